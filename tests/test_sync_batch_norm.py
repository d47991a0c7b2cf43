"""torch.nn.SyncBatchNorm: on 2 ranks with different batches, the outputs, input gradients
and running statistics are those of BatchNorm over the concatenated batch, the weight's
gradients add up to its gradient there; one all-reduce forward and one backward;
convert_sync_batchnorm swaps every batch norm sharing its tensors; eval is local."""

from __future__ import annotations

import numpy as np

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn

ROWS = 3


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2 * ROWS, 4, 5, 5)).astype(np.float32) * 2 + 1
    w = rng.normal(size=(2 * ROWS, 4, 5, 5)).astype(np.float32)
    return x, w


def _model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4), nn.ReLU())
    with torch.no_grad():
        net[1].weight.copy_(torch.tensor([1.0, 2.0, 0.5, -1.0]))
        net[1].bias.copy_(torch.tensor([0.0, 0.1, -0.2, 0.3]))
    return net


def _synced(rank, world):
    dist.init_process_group()
    net = nn.SyncBatchNorm.convert_sync_batchnorm(_model())
    assert isinstance(net[1], nn.SyncBatchNorm)
    x, w = _data()
    rows = slice(rank * ROWS, (rank + 1) * ROWS)
    xt = torch.tensor(x[rows], requires_grad=True)
    y = net(xt)
    (y * torch.tensor(w[rows])).sum().backward()
    out = {
        "y": y.detach().numpy().copy(),
        "dx": xt.grad.numpy().copy(),
        "dweight": net[1].weight.grad.numpy().copy(),
        "mean": net[1].running_mean.numpy().copy(),
        "var": net[1].running_var.numpy().copy(),
    }
    net.eval()
    out["eval"] = net(torch.tensor(x[rows])).detach().numpy().copy()
    dist.destroy_process_group()
    return out


def test_sync_batch_norm_is_batch_norm_over_every_ranks_batch():
    result = kernbench.simulate(_synced, topology="multi_sip", world_size=2, rank_args=True)
    with use_context(RuntimeContext("tiny")):
        net = _model()
        x, w = _data()
        xt = torch.tensor(x, requires_grad=True)
        y = net(xt)
        (y * torch.tensor(w)).sum().backward()
        want_y, want_dx = y.detach().numpy(), xt.grad.numpy()
        want_dw = net[1].weight.grad.numpy()
        want_mean, want_var = net[1].running_mean.numpy(), net[1].running_var.numpy()
        net.eval()
        want_eval = net(xt.detach()).detach().numpy()
    dweights = []
    for rank in range(2):
        got = result.returns[rank]
        rows = slice(rank * ROWS, (rank + 1) * ROWS)
        np.testing.assert_allclose(got["y"], want_y[rows], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["dx"], want_dx[rows], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(got["mean"], want_mean, rtol=1e-5)
        np.testing.assert_allclose(got["var"], want_var, rtol=1e-4)
        np.testing.assert_allclose(got["eval"], want_eval[rows], rtol=1e-4, atol=1e-5)
        dweights.append(got["dweight"])
    np.testing.assert_allclose(dweights[0] + dweights[1], want_dw, rtol=1e-4, atol=1e-5)
    ops = [c["op"] for c in result.report["collectives"]]
    assert ops == ["all_reduce", "all_reduce"]  # the statistics, then their gradient
