"""A two-layer graph convolutional network trained as pytorch/examples' ``gcn/main.py``
trains one: ``nn.Parameter(torch.Tensor(n, m))`` weights set by ``xavier_normal_`` and
``zeros_``, ``torch.mm`` then ``torch.spmm`` with the normalised adjacency
``D^-1/2 (A + I) D^-1/2`` (``A`` a ``torch.sparse_coo_tensor`` of the edges, with
``torch.eye``, ``torch.sum``, ``torch.sqrt(1 / d)`` and ``torch.diag(d).to_sparse()``),
row-normalised features, ``Dropout``,
``log_softmax`` with ``NLLLoss``, ``Adam`` with ``weight_decay``, a split of the nodes by
``torch.randperm`` and accuracy as ``(output.argmax(dim=1) == target).float().sum() /
len(target)``.

The graph is random: two communities, with features that lean towards the community.
Prints one ``RESULT {json}`` line with the adjacency, the model's log-probabilities on
the test nodes, their labels and the loss and accuracy (recomputed by the test).
"""

import json

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.torch import nn
from kernbench.torch.optim import Adam


class GraphConv(nn.Module):
    def __init__(self, input_dim, output_dim, use_bias=False):
        super().__init__()
        self.kernel = nn.Parameter(torch.Tensor(input_dim, output_dim))
        nn.init.xavier_normal_(self.kernel)
        self.bias = None
        if use_bias:
            self.bias = nn.Parameter(torch.Tensor(output_dim))
            nn.init.zeros_(self.bias)

    def forward(self, input_tensor, adj_mat):
        support = torch.mm(input_tensor, self.kernel)
        output = torch.spmm(adj_mat, support)
        if self.bias is not None:
            output = output + self.bias
        return output


class GCN(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, use_bias=True, dropout_p=0.1):
        super().__init__()
        self.gc1 = GraphConv(input_dim, hidden_dim, use_bias=use_bias)
        self.gc2 = GraphConv(hidden_dim, output_dim, use_bias=use_bias)
        self.dropout = nn.Dropout(dropout_p)

    def forward(self, input_tensor, adj_mat):
        x = F.relu(self.gc1(input_tensor, adj_mat))
        x = self.dropout(x)
        x = self.gc2(x, adj_mat)
        return F.log_softmax(x, dim=1)


def make_graph(rng, nodes=20, feature_count=6):
    labels = np.arange(nodes) % 2
    same = labels[:, None] == labels[None, :]
    upper = np.triu(rng.random((nodes, nodes)) < np.where(same, 0.4, 0.05), 1)
    edges = np.argwhere(upper | upper.T)
    leaning = np.arange(feature_count) % 2 == labels[:, None]
    words = rng.random((nodes, feature_count)) < 0.2 + 0.5 * leaning
    return words, labels, edges


torch.manual_seed(0)
words, labels, edges = make_graph(np.random.default_rng(0))
features = torch.FloatTensor(words.astype(np.int32))
scale_vector = torch.sum(features, dim=1)
scale_vector = 1 / scale_vector
scale_vector[scale_vector == float("inf")] = 0
scale_vector = torch.diag(scale_vector).to_sparse()
features = scale_vector @ features
labels = torch.LongTensor(labels)
V, E = len(labels), len(edges)
adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(E), (V, V), dtype=torch.int64)
adj_mat = torch.eye(V) + adj_mat
degree_mat = torch.sum(adj_mat, dim=1)
degree_mat = torch.sqrt(1 / degree_mat)
degree_mat[degree_mat == float("inf")] = 0
degree_mat = torch.diag(degree_mat).to_sparse()
adj_norm = degree_mat @ adj_mat @ degree_mat

idx = torch.randperm(len(labels))
idx_test, idx_val, idx_train = idx[:6], idx[6:10], idx[10:]
gcn = GCN(features.shape[1], 8, labels.max().item() + 1, True, 0.1)
optimizer = Adam(gcn.parameters(), lr=0.05, weight_decay=5e-4)
criterion = nn.NLLLoss()
history = []
for _epoch in range(20):
    gcn.train()
    optimizer.zero_grad()
    y_pred = gcn(features, adj_norm)
    train_loss = criterion(y_pred[idx_train], labels[idx_train])
    train_loss.backward()
    optimizer.step()
    with torch.no_grad():
        gcn.eval()
        output = gcn(features, adj_norm)
        val_loss = criterion(output[idx_val], labels[idx_val])
        acc = (output[idx_val].argmax(dim=1) == labels[idx_val]).float().sum() / len(idx_val)
    history.append([train_loss.item(), val_loss.item(), acc.item()])
gcn.eval()
with torch.no_grad():
    output = gcn(features, adj_norm)[idx_test]
    target = labels[idx_test]
    test_loss = criterion(output, target)
    test_acc = (output.argmax(dim=1) == target).float().sum() / len(target)
print("RESULT " + json.dumps({
    "adj": adj_mat.tolist(), "adj_norm": adj_norm.tolist(), "log_probs": output.tolist(),
    "targets": target.tolist(), "loss": test_loss.item(), "acc": test_acc.item(),
    "idx": idx.tolist(), "history": history,
}))  # fmt: skip
