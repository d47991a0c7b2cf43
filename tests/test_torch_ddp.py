"""torch.nn.parallel.DistributedDataParallel: the DDP tutorial's ToyModel trained on 2 and 4
simulated ranks, as written; gradients equal the average of the ranks' own gradients
(NumPy), parameters stay identical across ranks, ``no_sync`` defers the reduction, and a
missing process group is torch's error."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DistributedError, RankError, TensorError
from kernbench.torch import nn, optim

DDP = nn.parallel.DistributedDataParallel
LR = 0.05


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def _data(rank, step):
    rng = np.random.default_rng([rank, step])
    return rng.standard_normal((20, 10), np.float32), rng.standard_normal((20, 5), np.float32)


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _train(rank, world_size, steps):
    dist.init_process_group()
    torch.manual_seed(rank)  # different on every rank: DDP broadcasts rank 0's
    model = ToyModel().to(rank)
    ddp = DDP(model, device_ids=[rank])
    initial = _params(model)
    loss_fn = nn.MSELoss()
    opt = optim.SGD(ddp.parameters(), lr=LR)
    grads = []
    for step in range(steps):
        x, y = _data(rank, step)
        opt.zero_grad()
        outputs = ddp(torch.from_numpy(x))
        labels = torch.from_numpy(y).to(rank)
        loss_fn(outputs, labels).backward()
        grads.append({k: p.grad.numpy().copy() for k, p in model.named_parameters()})
        opt.step()
    dist.destroy_process_group()
    return {"initial": initial, "grads": grads, "final": _params(model)}


def _local_grads(p, x, y):
    h = x @ p["net1.weight"].T + p["net1.bias"]
    r = np.maximum(h, 0)
    o = r @ p["net2.weight"].T + p["net2.bias"]
    go = 2 * (o - y) / o.size
    gh = (go @ p["net2.weight"]) * (h > 0)
    return {"net2.weight": go.T @ r, "net2.bias": go.sum(0), "net1.weight": gh.T @ x,
            "net1.bias": gh.sum(0)}  # fmt: skip


@pytest.mark.parametrize("world", [2, 4])
def test_ddp_toy_model_averages_gradients_and_keeps_ranks_equal(world):
    steps = 2
    result = kernbench.simulate(
        _train, topology="multi_sip", world_size=world, rank_args=True, args=(steps,)
    )
    first = result.returns[0]
    for rank in range(world):
        for part in ("initial", "final"):
            for name, value in result.returns[rank][part].items():
                np.testing.assert_array_equal(value, first[part][name], err_msg=name)
    params = {k: v.astype(np.float64) for k, v in first["initial"].items()}
    for step in range(steps):
        local = [_local_grads(params, *(a.astype(np.float64) for a in _data(r, step)))
                 for r in range(world)]  # fmt: skip
        for name in params:
            average = sum(g[name] for g in local) / world
            for rank in range(world):
                got = result.returns[rank]["grads"][step][name]
                np.testing.assert_allclose(got, average, rtol=1e-4, atol=1e-6, err_msg=name)
            params[name] = params[name] - LR * average
    for name, value in first["final"].items():
        np.testing.assert_allclose(value, params[name], rtol=1e-4, atol=1e-6, err_msg=name)


def _no_sync(rank, world_size):
    dist.init_process_group()
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False)
    ddp = DDP(model)
    x = torch.full((1, 3), float(rank + 1))
    with ddp.no_sync():
        ddp(x).sum().backward()
    local = model.weight.grad.numpy().copy()
    ddp(x).sum().backward()  # reduces what both backwards accumulated
    assert isinstance(ddp.module, nn.Linear) and ddp.module is model
    assert list(ddp.state_dict()) == ["module.weight"]
    assert ddp(x).grad_fn.name() == "_DDPSinkBackward"
    return local, model.weight.grad.numpy()


def test_ddp_no_sync_defers_the_reduction():
    result = kernbench.simulate(_no_sync, topology="multi_sip", world_size=2, rank_args=True)
    for rank in range(2):
        local, reduced = result.returns[rank]
        np.testing.assert_allclose(local, [[rank + 1] * 3])
        np.testing.assert_allclose(reduced, [[3.0] * 3])  # (2*1 + 2*2) / 2


def _without_group():
    DDP(nn.Linear(2, 2))


def test_ddp_needs_a_process_group():
    with pytest.raises(RankError, match="Default process group has not been initialized"):
        kernbench.simulate(_without_group, topology="multi_sip", world_size=2)
    from kernbench.torch.nn.parallel import DistributedDataParallel  # torch's import path

    assert DistributedDataParallel is DDP
    with pytest.raises(AttributeError, match="there are DistributedDataParallel, DataParallel"):
        torch.nn.parallel.replicate  # noqa: B018
    assert issubclass(RankError, Exception) and issubclass(DistributedError, Exception)


class _Sized:
    """What the bucket assignment reads of a tensor."""

    def __init__(self, nbytes, dtype="float32", device=0):
        self.dtype, self.n, self.device = dtype, nbytes, device

    def numel(self):
        return self.n // 4

    def get_device(self):
        return self.device

    def element_size(self):
        return 4


def test_bucket_assignment_closes_buckets_at_their_limits_per_dtype_as_torchs():
    from kernbench.torch.distributed.data_parallel import bucket_assignment

    a, b, c, d = _Sized(400), _Sized(800), _Sized(400), _Sized(4000)
    # limits [1000, 2000]: a+b reaches 1000 -> closed; the next bucket's limit is 2000
    assert bucket_assignment([a, b, c, d], [1000, 2000]) == [[a, b], [c, d]]
    assert bucket_assignment([a, c], [1000, 2000]) == [[a, c]]  # left open, still a bucket
    h1, h2 = _Sized(600, "bfloat16"), _Sized(600, "bfloat16")
    # dtypes never share a bucket; each has its own limit sequence
    assert bucket_assignment([a, h1, b, h2], [1000, 2000]) == [[a, b], [h1, h2]]
    # nor do devices (a module split over two devices, as the DDP tutorial's ToyMpModel)
    e, f = _Sized(600, device=1), _Sized(600, device=1)
    assert bucket_assignment([a, e, b, f], [1000, 2000]) == [[a, b], [e, f]]


class Wide(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 32)  # 4096 + 128 bytes
        self.b = nn.Linear(32, 32)
        self.c = nn.Linear(32, 8)  # 1024 + 32 bytes

    def forward(self, x):
        return self.c(self.b(self.a(x)))


def _bucketed(rank, world_size, kwargs):
    dist.init_process_group()
    torch.manual_seed(0)
    model = Wide()
    ddp = DDP(model, **kwargs)
    for step in range(3):
        ddp(torch.full((2, 32), float(rank + step))).sum().backward()
    return {k: p.grad.numpy().copy() for k, p in model.named_parameters()}


# Wide's parameters in registration order: a.weight 1024 elements (4096 B), a.bias 32,
# b.weight 1024, b.bias 32, c.weight 256, c.bias 8: 2376 elements in all.
@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # default: one bucket first; then rebuilt in reverse registration order with a
        # first bucket of 1 MiB, which this whole model fits: still one
        ({}, [[2376]] * 3),
        # a cap of 5000 B (a custom cap is the first bucket's too): one bucket first, then
        # c.bias, c.weight, b.bias, b.weight reach 5280 B and close (1320 elements);
        # a.bias and a.weight (4224 B) stay open: the last bucket
        ({"bucket_cap_mb": 5000 / 2**20}, [[2376], [1320, 1056], [1320, 1056]]),
        # parameters may go unused: the buckets are made at once, in registration order
        # (a.weight, a.bias, b.weight close at 8320 B; b.bias, c.weight, c.bias stay
        # open), sorted by their first parameter and reduced last first; never rebuilt
        ({"bucket_cap_mb": 5000 / 2**20, "find_unused_parameters": True}, [[296, 2080]] * 3),
    ],
)
def test_ddp_reduces_gradients_in_torchs_buckets(monkeypatch, kwargs, expected):
    from kernbench.torch.distributed import data_parallel

    calls: dict[int, list[int]] = {}
    reduce = data_parallel.all_reduce

    def recording(tensor, *args, **kw):
        calls.setdefault(dist.get_rank(), []).append(tensor.numel())
        return reduce(tensor, *args, **kw)

    monkeypatch.setattr(data_parallel, "all_reduce", recording)
    result = kernbench.simulate(
        _bucketed, topology="multi_sip", world_size=2, rank_args=True, args=(kwargs,)
    )
    flat = [n for step in expected for n in step]
    assert calls == {0: flat, 1: flat}
    monkeypatch.setattr(data_parallel, "all_reduce", reduce)
    baseline = kernbench.simulate(
        _bucketed, topology="multi_sip", world_size=2, rank_args=True, args=({},)
    )
    for rank in range(2):  # the averaged gradients do not depend on the buckets
        for name, g in result.returns[rank].items():
            np.testing.assert_allclose(g, baseline.returns[0][name], rtol=1e-6, err_msg=name)


def _interleaved(rank, world_size, events):
    dist.init_process_group()
    torch.manual_seed(0)
    model = Wide()
    ddp = DDP(model, bucket_cap_mb=5000 / 2**20)
    for name, p in model.named_parameters():  # after DDP's own hooks: sees them done
        p.register_post_accumulate_grad_hook(lambda _p, name=name: events[rank].append(name))
    for step in range(2):
        events[rank].append(f"step {step}")
        ddp(torch.full((2, 32), float(rank + step))).sum().backward()


def test_ddp_starts_each_buckets_all_reduce_as_soon_as_its_gradients_are_ready(monkeypatch):
    from kernbench.torch.distributed import data_parallel

    events: dict[int, list[str]] = {0: [], 1: []}
    reduce = data_parallel.all_reduce

    def recording(tensor, *args, **kw):
        assert kw.get("async_op") is True  # the backward goes on beside it
        events[dist.get_rank()].append(f"all_reduce {tensor.numel()}")
        return reduce(tensor, *args, **kw)

    monkeypatch.setattr(data_parallel, "all_reduce", recording)
    kernbench.simulate(
        _interleaved, topology="multi_sip", world_size=2, rank_args=True, args=(events,)
    )
    for rank in range(2):
        got = ["ready" if e.startswith(("a.", "b.", "c.")) else e for e in events[rank]]
        # (DDP's hook runs before the test's, so a launch shows before the "ready" of the
        # gradient that completed its bucket.)  The first backward has one bucket,
        # complete with the last gradient; the second the rebuilt ones: c's and b's
        # gradients (1320 elements) go as soon as b.weight's is in, while a's are still
        # being computed, and a's when a's last is in
        assert got == ["step 0", *["ready"] * 5, "all_reduce 2376", "ready",
                       "step 1", *["ready"] * 3, "all_reduce 1320", "ready", "ready",
                       "all_reduce 1056", "ready"]  # fmt: skip
        assert events[rank][1:3] == ["c.bias", "c.weight"] or events[rank][1:3] == [
            "c.weight",
            "c.bias",
        ]


def test_post_accumulate_grad_hooks_run_after_each_accumulation_and_can_be_removed():
    def body():
        w = torch.ones(3, requires_grad=True)
        seen = []
        handle = w.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        (w * 2).sum().backward()
        (w * 3).sum().backward()
        handle.remove()
        (w * 3).sum().backward()
        torch.autograd.grad((w * 4).sum(), [w])  # no accumulation: no hook (as torch)
        with pytest.raises(TensorError, match="non-leaf"):
            (w * 2).register_post_accumulate_grad_hook(print)
        with pytest.raises(TensorError, match="doesn't require gradient"):
            torch.ones(2).register_post_accumulate_grad_hook(print)
        return seen, w.grad.tolist()

    seen, grad = kernbench.simulate(body, topology="multi_sip", world_size=1).returns[0]
    assert seen == [[2.0] * 3, [5.0] * 3] and grad == [8.0] * 3


class _TwoHeads(nn.Module):
    """A trunk and two heads; ``forward(x, head)`` uses one head only."""

    def __init__(self):
        super().__init__()
        self.trunk = nn.Linear(3, 4)
        self.a = nn.Linear(4, 1)
        self.b = nn.Linear(4, 1)

    def forward(self, x, head):
        return getattr(self, head)(self.trunk(x))


def _unused(rank, world_size, find_unused, heads):
    dist.init_process_group()
    torch.manual_seed(0)
    model = _TwoHeads()
    ddp = DDP(model, find_unused_parameters=find_unused)
    x = torch.full((2, 3), float(rank + 1))
    ddp(x, heads[rank]).sum().backward()
    grads = {k: None if p.grad is None else p.grad.numpy().copy()
             for k, p in model.named_parameters()}  # fmt: skip
    try:
        ddp(x, heads[rank])
    except DistributedError as error:
        return grads, str(error)
    return grads, None


def test_ddp_unused_parameters_as_torchs_reducer():
    # find_unused_parameters=False: the next forward raises torch's error, naming the
    # indices of the parameters that got no gradient on that rank
    result = kernbench.simulate(
        _unused, topology="multi_sip", world_size=2, rank_args=True, args=(False, "aa")
    )
    for rank in range(2):
        _, error = result.returns[rank]
        assert error.startswith("Expected to have finished reduction in the prior iteration")
        assert "find_unused_parameters=True" in error
        assert error.endswith(f"Parameter indices which did not receive grad for rank {rank}: 4 5")
    # find_unused_parameters=True: a head no rank used keeps no gradient (the optimizer
    # skips it); a head one rank used gets the average with the other rank's zeros
    result = kernbench.simulate(
        _unused, topology="multi_sip", world_size=2, rank_args=True, args=(True, "aa")
    )
    for rank in range(2):
        grads, error = result.returns[rank]
        assert error is None and grads["b.weight"] is None and grads["b.bias"] is None
        assert grads["a.bias"].tolist() == [2.0]  # each rank's 2 rows, averaged
    result = kernbench.simulate(
        _unused, topology="multi_sip", world_size=2, rank_args=True, args=(True, "ab")
    )
    for rank in range(2):
        grads, error = result.returns[rank]
        assert grads["a.bias"].tolist() == [1.0] and grads["b.bias"].tolist() == [1.0]


def _coalesced(rank, world_size):
    dist.init_process_group()
    torch.manual_seed(rank)  # different on every rank: DDP broadcasts rank 0's
    model = ToyModel()
    DDP(model)
    return _params(model)


def test_ddp_broadcasts_parameters_coalesced_in_buckets(monkeypatch):
    from kernbench.torch.distributed import data_parallel

    # ToyModel's float32 tensors: net1.weight 400 B, net1.bias 40 B, net2.weight 200 B,
    # net2.bias 20 B; at 256 B a bucket: [net1.weight] alone, [net1.bias, net2.weight],
    # [net2.bias]
    monkeypatch.setattr(data_parallel, "BROADCAST_BUCKET_BYTES", 256)
    result = kernbench.simulate(_coalesced, topology="multi_sip", world_size=2, rank_args=True)
    sizes = [c["bytes"] for c in result.report["collectives"] if c["op"] == "broadcast"]
    assert sizes == [400, 240, 20]
    for k, v in result.returns[0].items():
        np.testing.assert_array_equal(result.returns[1][k], v, err_msg=k)
