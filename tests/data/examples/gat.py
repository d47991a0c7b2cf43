"""A graph attention network trained as pytorch/examples' ``gat/main.py`` trains one:
per-head projections ``torch.mm(h, W)`` viewed as ``(nodes, heads, hidden)`` and
permuted, attention scores from ``torch.matmul`` with the halves of ``a`` added as
``source + target.mT``, ``LeakyReLU``, masking with
``torch.where(adj_mat > 0, e, -9e16 * torch.ones_like(e))``, ``F.softmax(dim=-1)``,
``F.dropout(training=self.training)``, heads concatenated or averaged, ``F.elu``;
weights from ``nn.Parameter(torch.empty(size=...))`` and ``xavier_normal_``; the
adjacency a ``torch.sparse_coo_tensor`` plus ``torch.eye``; ``NLLLoss`` and ``Adam``.

Prints one ``RESULT {json}`` line with the first layer's weights, the node features, the
adjacency and that layer's output (the test recomputes it with NumPy), and the test
nodes' log-probabilities, labels and loss.
"""

import json

import numpy as np

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F


class GraphAttentionLayer(nn.Module):
    def __init__(self, in_features, out_features, n_heads, concat=False, dropout=0.2,
                 leaky_relu_slope=0.2):  # fmt: skip
        super().__init__()
        self.n_heads, self.concat, self.dropout = n_heads, concat, dropout
        if concat:
            assert out_features % n_heads == 0
            self.n_hidden = out_features // n_heads
        else:
            self.n_hidden = out_features
        self.W = nn.Parameter(torch.empty(size=(in_features, self.n_hidden * n_heads)))
        self.a = nn.Parameter(torch.empty(size=(n_heads, 2 * self.n_hidden, 1)))
        self.leakyrelu = nn.LeakyReLU(leaky_relu_slope)
        self.softmax = nn.Softmax(dim=1)
        nn.init.xavier_normal_(self.W)
        nn.init.xavier_normal_(self.a)

    def _get_attention_scores(self, h_transformed):
        source_scores = torch.matmul(h_transformed, self.a[:, : self.n_hidden, :])
        target_scores = torch.matmul(h_transformed, self.a[:, self.n_hidden :, :])
        e = source_scores + target_scores.mT
        return self.leakyrelu(e)

    def forward(self, h, adj_mat):
        n_nodes = h.shape[0]
        h_transformed = torch.mm(h, self.W)
        h_transformed = F.dropout(h_transformed, self.dropout, training=self.training)
        h_transformed = h_transformed.view(n_nodes, self.n_heads, self.n_hidden).permute(1, 0, 2)
        e = self._get_attention_scores(h_transformed)
        connectivity_mask = -9e16 * torch.ones_like(e)
        e = torch.where(adj_mat > 0, e, connectivity_mask)
        attention = F.softmax(e, dim=-1)
        attention = F.dropout(attention, self.dropout, training=self.training)
        h_prime = torch.matmul(attention, h_transformed)
        if self.concat:
            return h_prime.permute(1, 0, 2).contiguous().view(n_nodes, -1)
        return h_prime.mean(dim=0)


class GAT(nn.Module):
    def __init__(self, in_features, n_hidden, n_heads, num_classes, concat=False,
                 dropout=0.4, leaky_relu_slope=0.2):  # fmt: skip
        super().__init__()
        self.gat1 = GraphAttentionLayer(in_features, n_hidden, n_heads, concat, dropout,
                                        leaky_relu_slope)  # fmt: skip
        self.gat2 = GraphAttentionLayer(n_hidden, num_classes, 1, False, dropout,
                                        leaky_relu_slope)  # fmt: skip

    def forward(self, input_tensor, adj_mat):
        x = F.elu(self.gat1(input_tensor, adj_mat))
        return F.log_softmax(self.gat2(x, adj_mat), dim=1)


torch.manual_seed(13)
rng = np.random.default_rng(13)
V, classes = 16, 3
node_labels = np.arange(V) % classes
upper = np.triu(rng.random((V, V)) < np.where(node_labels[:, None] == node_labels, 0.5, 0.05), 1)
edges = np.argwhere(upper | upper.T)
features = torch.FloatTensor(
    (rng.random((V, 5)) < 0.3 + 0.2 * (node_labels[:, None] == np.arange(5) % 3)).astype(np.int32)
)
labels = torch.LongTensor(node_labels)
adj_mat = torch.sparse_coo_tensor(edges.T, torch.ones(len(edges)), (V, V), dtype=torch.int64)
adj_mat = torch.eye(V) + adj_mat
gat = GAT(in_features=5, n_hidden=8, n_heads=2, num_classes=labels.max().item() + 1,
          concat=True)  # fmt: skip
optimizer = torch.optim.Adam(gat.parameters(), lr=0.01, weight_decay=5e-4)
criterion = nn.NLLLoss()
idx = torch.randperm(len(labels))
idx_test, idx_train = idx[:5], idx[5:]
losses = []
for _epoch in range(10):
    gat.train()
    optimizer.zero_grad()
    y_pred = gat(features, adj_mat)
    loss = criterion(y_pred[idx_train], labels[idx_train])
    loss.backward()
    optimizer.step()
    losses.append(loss.item())
gat.eval()
with torch.no_grad():
    hidden = gat.gat1(features, adj_mat)
    output = gat(features, adj_mat)[idx_test]
    target = labels[idx_test]
    test_loss = criterion(output, target)
    acc = (output.argmax(dim=1) == target).float().sum() / len(target)
print("RESULT " + json.dumps({
    "W": gat.gat1.W.tolist(), "a": gat.gat1.a.tolist(), "features": features.tolist(),
    "adj": adj_mat.tolist(), "hidden": hidden.tolist(), "log_probs": output.tolist(),
    "targets": target.tolist(), "loss": test_loss.item(), "acc": acc.item(), "losses": losses,
}))  # fmt: skip
