"""torch.distributed.optim.ZeroRedundancyOptimizer: DDP + ZeRO on 2 and 4 simulated ranks
against NumPy running the same optimizer on the averaged gradients; torch's sorted-greedy
partition; optimizer state for a rank's own parameters only; the consolidated state dict and
its round trip; the broadcasts a step costs; and what is refused, by type and message."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import (
    DistributedError,
    DistributedValueError,
    KernBenchError,
    TensorTypeError,
)
from kernbench.runtime import current_context
from kernbench.torch import nn, optim
from kernbench.torch.distributed.optim import ZeroRedundancyOptimizer

DDP = nn.parallel.DistributedDataParallel
LR = 0.05
MOMENTUM = 0.9
BETAS = (0.9, 0.999)
EPS = 1e-8
WEIGHT_DECAY = 0.01


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)  # weight 100, bias 10 elements
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)  # weight 50, bias 5

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def _data(rank, step):
    rng = np.random.default_rng([rank, step])
    return rng.standard_normal((20, 10), np.float32), rng.standard_normal((20, 5), np.float32)


def _params(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _make_optimizer(name, params, **kwargs):
    if name == "sgd":
        settings = {"lr": LR, "momentum": MOMENTUM, "weight_decay": WEIGHT_DECAY, **kwargs}
        return ZeroRedundancyOptimizer(params, optim.SGD, **settings)
    settings = {"lr": LR, "betas": BETAS, "eps": EPS, **kwargs}
    return ZeroRedundancyOptimizer(params, optimizer_class=optim.AdamW, **settings)


def _train(rank, world_size, name, steps, kwargs):
    dist.init_process_group()
    torch.manual_seed(rank)  # different on every rank: DDP broadcasts rank 0's
    model = ToyModel().to(rank)
    ddp = DDP(model, device_ids=[rank])
    initial = _params(model)
    opt = _make_optimizer(name, ddp.parameters(), **kwargs)
    loss_fn = nn.MSELoss()
    for step in range(steps):
        x, y = _data(rank, step)
        opt.zero_grad()
        loss_fn(ddp(torch.from_numpy(x)), torch.from_numpy(y).to(rank)).backward()
        opt.step()
    names = {id(p): k for k, p in model.named_parameters()}
    own = sorted(names[id(p)] for g in opt.optim.param_groups for p in g["params"])
    state = {names[id(p)]: sorted(s) for p, s in opt.optim.state.items()}
    moments = sum(s[k].numel() for s in opt.optim.state.values() for k in s if k != "step")
    dist.destroy_process_group()
    return {"initial": initial, "final": _params(model), "own": own, "state": state,
            "zero_state": len(opt.state), "moments": moments}  # fmt: skip


def _local_grads(p, x, y):
    h = x @ p["net1.weight"].T + p["net1.bias"]
    r = np.maximum(h, 0)
    o = r @ p["net2.weight"].T + p["net2.bias"]
    go = 2 * (o - y) / o.size
    gh = (go @ p["net2.weight"]) * (h > 0)
    return {"net2.weight": go.T @ r, "net2.bias": go.sum(0), "net1.weight": gh.T @ x,
            "net1.bias": gh.sum(0)}  # fmt: skip


def _numpy_run(name, initial, world, steps):
    """The unsharded optimizer, as torch's single-tensor formulas, on averaged gradients."""
    params = {k: v.astype(np.float64) for k, v in initial.items()}
    state = {k: {} for k in params}
    for step in range(steps):
        local = [_local_grads(params, *(a.astype(np.float64) for a in _data(r, step)))
                 for r in range(world)]  # fmt: skip
        for k in params:
            g = sum(grads[k] for grads in local) / world
            s = state[k]
            if name == "sgd":
                g = g + WEIGHT_DECAY * params[k]
                s["buf"] = g if "buf" not in s else MOMENTUM * s["buf"] + g
                params[k] = params[k] - LR * s["buf"]
                continue
            t = step + 1
            params[k] = params[k] * (1 - LR * WEIGHT_DECAY)  # AdamW's default decay
            s["m"] = BETAS[0] * s.get("m", 0) + (1 - BETAS[0]) * g
            s["v"] = BETAS[1] * s.get("v", 0) + (1 - BETAS[1]) * g * g
            denom = np.sqrt(s["v"]) / np.sqrt(1 - BETAS[1] ** t) + EPS
            params[k] = params[k] - LR / (1 - BETAS[0] ** t) * s["m"] / denom
    return params


# Partition of ToyModel's parameters, largest first to the least-loaded rank:
# 2 ranks: net1.weight (100) -> 0; net2.weight (50), net1.bias (10), net2.bias (5) -> 1.
# 4 ranks: one each, in that order.
OWN = {
    2: [["net1.weight"], ["net1.bias", "net2.bias", "net2.weight"]],
    4: [["net1.weight"], ["net2.weight"], ["net1.bias"], ["net2.bias"]],
}
SIZES = {"net1.weight": 100, "net1.bias": 10, "net2.weight": 50, "net2.bias": 5}


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("name", ["sgd", "adamw"])
def test_ddp_with_zero_matches_numpy_and_keeps_state_for_own_parameters(world, name):
    steps = 3
    result = kernbench.simulate(
        _train, topology="multi_sip", world_size=world, rank_args=True, args=(name, steps, {})
    )
    first = result.returns[0]
    for rank in range(world):  # the broadcasts leave every rank the same parameters
        for key, value in result.returns[rank]["final"].items():
            np.testing.assert_array_equal(value, first["final"][key], err_msg=key)
    expected = _numpy_run(name, first["initial"], world, steps)
    for key, value in first["final"].items():
        np.testing.assert_allclose(value, expected[key], rtol=1e-4, atol=1e-5, err_msg=key)
    keys = ["momentum_buffer"] if name == "sgd" else ["exp_avg", "exp_avg_sq", "step"]
    for rank in range(world):
        got = result.returns[rank]
        assert got["own"] == OWN[world][rank]
        assert got["state"] == {k: keys for k in OWN[world][rank]}  # its own parameters only
        assert got["zero_state"] == 0
        per_param = 1 if name == "sgd" else 2
        assert got["moments"] == per_param * sum(SIZES[k] for k in OWN[world][rank])


def test_parameters_as_bucket_view_gives_the_same_values_with_one_broadcast_per_rank(
    monkeypatch,
):
    from kernbench.torch.distributed.optim import zero_redundancy_optimizer as zro

    sizes: dict[int, list[int]] = {}
    real = zro.broadcast

    def recording(tensor, *args, **kw):
        sizes.setdefault(dist.get_rank(), []).append(tensor.numel())
        return real(tensor, *args, **kw)

    monkeypatch.setattr(zro, "broadcast", recording)
    steps = 2
    bucketed = kernbench.simulate(
        _train, topology="multi_sip", world_size=2, rank_args=True,
        args=("adamw", steps, {"parameters_as_bucket_view": True}),
    )  # fmt: skip
    # one flat bucket per rank per step: rank 0's 100 elements, rank 1's 65
    assert sizes == {0: [100, 65] * steps, 1: [100, 65] * steps}
    expected = _numpy_run("adamw", bucketed.returns[0]["initial"], 2, steps)
    for rank in range(2):
        for key, value in bucketed.returns[rank]["final"].items():
            np.testing.assert_allclose(value, expected[key], rtol=1e-4, atol=1e-5, err_msg=key)


# ------------------------------------------------------------------------ the partition


def _partition(rank, world_size):
    dist.init_process_group()
    sizes = {"a": 2, "b": 8, "c": 5, "d": 4, "e": 3}
    params = {k: torch.zeros(n, requires_grad=True) for k, n in sizes.items()}
    names = {id(p): k for k, p in params.items()}

    def owned(opt):
        return [[names[id(p)] for p in g["params"]] for g in opt.optim.param_groups]

    one_group = ZeroRedundancyOptimizer(list(params.values()), optim.SGD, lr=0.1)
    # two groups: totals carry over from the first to the second; equal sizes keep their order
    more = {"f": torch.zeros(6, requires_grad=True), "g": torch.zeros(4, requires_grad=True),
            "h": torch.zeros(5, requires_grad=True), "i": torch.zeros(3, requires_grad=True),
            "j": torch.zeros(3, requires_grad=True)}  # fmt: skip
    names.update({id(p): k for k, p in more.items()})
    first = [more["f"], more["g"]]
    second = [more["h"], more["i"], more["j"]]
    groups = ZeroRedundancyOptimizer(
        [{"params": first}, {"params": second, "lr": 0.5}], optim.SGD, lr=0.1
    )
    added = ZeroRedundancyOptimizer(first, optim.SGD, lr=0.1)
    added.add_param_group({"params": second, "lr": 0.5})
    lrs = [g["lr"] for g in added.optim.param_groups]
    return owned(one_group), owned(groups), owned(added), lrs, [g["lr"] for g in added.param_groups]


def test_partition_is_torchs_sorted_greedy_rule():
    two = kernbench.simulate(_partition, topology="multi_sip", world_size=2, rank_args=True)
    # sizes a=2 b=8 c=5 d=4 e=3, largest first: b->0 (8,0); c->1 (8,5); d->1 (8,9);
    # e->0 (11,9); a->1 (11,11).  (In registration order it would be a,b,c,d,e -> 0,1,0,0,1.)
    assert [r[0] for r in two.returns] == [[["b", "e"]], [["c", "d", "a"]]]
    three = kernbench.simulate(_partition, topology="multi_sip", world_size=3, rank_args=True)
    # group 1: f=6 -> 0, g=4 -> 1: totals (6,4,0); group 2 goes on from those totals:
    # h=5 -> 2 (6,4,5); i=3 -> 1 (6,7,5); j=3 -> 2 (6,7,8): i before j, as registered
    by_rank = [[["f"], []], [["g"], ["i"]], [[], ["h", "j"]]]
    assert [r[1] for r in three.returns] == by_rank
    assert [r[2] for r in three.returns] == by_rank  # add_param_group: the same partition
    for r in three.returns:
        assert r[3] == [0.1, 0.5] and r[4] == [0.1, 0.5]


# ---------------------------------------------------------------- the consolidated state


def _round_trip(rank, world_size):
    dist.init_process_group()
    torch.manual_seed(0)
    model, plain_model = ToyModel(), ToyModel()
    plain_model.load_state_dict(model.state_dict())
    ddp, plain_ddp = DDP(model), DDP(plain_model)
    zero = _make_optimizer("adamw", ddp.parameters())
    plain = optim.AdamW(plain_ddp.parameters(), lr=LR, betas=BETAS, eps=EPS)
    loss_fn = nn.MSELoss()

    def train(net, opt, step):
        x, y = _data(rank, step)
        opt.zero_grad()
        loss_fn(net(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        opt.step()

    for step in range(2):
        train(ddp, zero, step)
        train(plain_ddp, plain, step)
    errors = []
    with pytest.raises(DistributedError) as caught:  # before any consolidation
        zero.state_dict()
    errors.append(str(caught.value))
    zero.consolidate_state_dict(to=1)
    if rank == 1:
        saved = zero.state_dict()
        wanted = plain.state_dict()
        assert sorted(saved["state"]) == sorted(wanted["state"]) == [0, 1, 2, 3]
        for i, state in wanted["state"].items():
            assert saved["state"][i]["step"] == state["step"] == 2.0
            for key in ("exp_avg", "exp_avg_sq"):
                np.testing.assert_allclose(
                    saved["state"][i][key].numpy(), state[key].numpy(), rtol=1e-5, atol=1e-8
                )
        assert saved["param_groups"] == wanted["param_groups"]
    else:
        with pytest.raises(DistributedError) as caught:  # consolidated on rank 1 only
            zero.state_dict()
        errors.append(str(caught.value))
        saved = None
    carried = [saved]
    dist.broadcast_object_list(carried, group_src=1)
    # a new model and optimizer that load the state go on as the trained ones do
    restored_model = ToyModel()
    restored_model.load_state_dict(model.state_dict())
    restored_ddp = DDP(restored_model)
    restored = _make_optimizer("adamw", restored_ddp.parameters(), lr=1.0)
    restored.load_state_dict(carried[0])
    lr = [g["lr"] for g in restored.optim.param_groups]
    train(ddp, zero, 2)
    train(restored_ddp, restored, 2)
    own = sorted(len(s) for s in restored.optim.state.values())
    return errors, lr, own, _params(model), _params(restored_model), len(restored.optim.state)


def test_consolidated_state_dict_equals_the_unsharded_optimizers_and_round_trips():
    result = kernbench.simulate(_round_trip, topology="multi_sip", world_size=2, rank_args=True)
    for rank, (errors, lr, own, trained, restored, held) in enumerate(result.returns):
        assert errors[0] == (
            "Optimizer state has not been consolidated on this rank. Please call "
            f"`consolidate_state_dict(to={rank})` on all ranks beforehand if you meant to "
            "save the global state."
        )
        assert len(errors) == (2 if rank == 0 else 1)
        assert lr == [LR]  # the loaded hyper-parameters reach the local optimizer
        assert held == len(OWN[2][rank])  # the state of its own parameters only
        assert own == [3] * held  # step, exp_avg, exp_avg_sq
        for key, value in trained.items():
            np.testing.assert_allclose(restored[key], value, rtol=1e-6, atol=1e-7, err_msg=key)


# ------------------------------------------------------------------ the cost of a step


def _timed(rank, world_size, monkeypatch_log):
    dist.init_process_group()
    torch.manual_seed(0)
    model = ToyModel()
    ddp = DDP(model)
    opt = _make_optimizer("adamw", ddp.parameters())
    ctx = current_context()
    x, y = _data(rank, 0)
    nn.MSELoss()(ddp(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    opt.step()  # the state exists from here on: both timed steps do the same work
    torch.cuda.synchronize()
    dist.barrier()
    start = ctx.now
    opt.optim.step()  # the local step alone
    torch.cuda.synchronize()
    local = ctx.now - start
    dist.barrier()
    monkeypatch_log[rank] = []
    start = ctx.now
    opt.step()
    torch.cuda.synchronize()
    return local, ctx.now - start


def test_a_step_broadcasts_every_parameter_from_its_owner_and_costs_time(monkeypatch):
    from kernbench.torch.distributed.optim import zero_redundancy_optimizer as zro

    log: dict[int, list] = {}
    real = zro.broadcast

    def recording(tensor, *args, **kw):
        assert kw["async_op"] is True  # all started, then waited for
        log.setdefault(dist.get_rank(), []).append(
            (kw["group_src"], tensor.numel() * tensor.element_size())
        )
        return real(tensor, *args, **kw)

    monkeypatch.setattr(zro, "broadcast", recording)
    result = kernbench.simulate(
        _timed, topology="multi_sip", world_size=4, rank_args=True, args=(log,)
    )
    total = sum(SIZES.values()) * 4  # float32
    owners = {"net1.weight": 0, "net2.weight": 1, "net1.bias": 2, "net2.bias": 3}
    expected = [(owners[k], n * 4) for k, n in sorted(SIZES.items(), key=lambda kv: owners[kv[0]])]
    for rank in range(4):
        assert log[rank] == expected  # the timed step's broadcasts, in torch's order
        assert sum(n for _, n in log[rank]) == total
        local, zero = result.returns[rank]
        assert 0 < local < zero


# -------------------------------------------------------------------------- refusals


def _refusals(rank, world_size):
    dist.init_process_group()
    model = ToyModel()
    messages = []
    with pytest.raises(DistributedError) as caught:
        ZeroRedundancyOptimizer(model.parameters(), optim.SGD, overlap_with_ddp=True, lr=0.1)
    messages.append(str(caught.value))
    opt = ZeroRedundancyOptimizer(model.parameters(), optim.SGD, lr=0.1)
    with pytest.raises(DistributedError) as caught:
        opt.join_hook()
    messages.append(str(caught.value))
    with pytest.raises(DistributedValueError, match="ZeroRedundancyOptimizer got an empty param"):
        ZeroRedundancyOptimizer([], optim.SGD, lr=0.1)
    with pytest.raises(TensorTypeError, match="should be an iterable of Tensors"):
        ZeroRedundancyOptimizer(model.net1.weight, optim.SGD, lr=0.1)
    mixed = [model.net1.weight, torch.zeros(3, dtype=torch.float16, requires_grad=True)]
    with pytest.raises(DistributedValueError, match="same dense type for all parameters but got"):
        ZeroRedundancyOptimizer(mixed, optim.SGD, lr=0.1)
    return messages


def test_refusals_name_the_call_and_what_to_do():
    result = kernbench.simulate(_refusals, topology="multi_sip", world_size=2, rank_args=True)
    overlap, join = result.returns[0]
    assert overlap.startswith("ZeroRedundancyOptimizer(overlap_with_ddp=True): ")
    assert "leave overlap_with_ddp=False and call step() after backward()" in overlap
    assert join.startswith("ZeroRedundancyOptimizer.join_hook: ")
    assert "same number of steps" in join
    assert issubclass(DistributedError, KernBenchError)
    assert issubclass(DistributedValueError, ValueError)  # what torch raises for these


def test_import_paths_are_torchs():
    namespace: dict = {}
    exec("from kernbench.torch.distributed.optim import ZeroRedundancyOptimizer", namespace)
    assert namespace["ZeroRedundancyOptimizer"] is ZeroRedundancyOptimizer
    assert dist.optim.ZeroRedundancyOptimizer is ZeroRedundancyOptimizer
    with pytest.raises(AttributeError, match="DistributedOptimizer.*torch.distributed.rpc"):
        dist.optim.DistributedOptimizer  # noqa: B018


# ------------------------------------------------- param_groups, zero_grad and schedulers


def _settings(rank, world_size):
    dist.init_process_group()
    p = torch.zeros(4, requires_grad=True)  # rank 0's
    q = torch.zeros(2, requires_grad=True)  # rank 1's
    opt = ZeroRedundancyOptimizer([p, q], optim.SGD, lr=0.1)
    assert opt.param_groups[0]["params"] == [p, q]  # the full list on every rank
    assert opt.param_groups[0]["momentum"] == 0  # the local optimizer's defaults too
    scheduler = optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    values = []
    for _ in range(2):
        p.grad, q.grad = torch.ones(4), torch.full((2,), 2.0)
        opt.step()
        scheduler.step()  # writes opt.param_groups; the next step takes it
        values.append((p.tolist(), q.tolist()))
    opt.zero_grad(set_to_none=False)
    zeroed = (p.grad.tolist(), q.grad.tolist())
    opt.zero_grad()
    return values, zeroed, p.grad is None and q.grad is None, opt.optim.param_groups[0]["lr"]


def test_param_groups_are_kept_in_sync_with_the_local_optimizer():
    result = kernbench.simulate(_settings, topology="multi_sip", world_size=2, rank_args=True)
    for values, zeroed, cleared, lr in result.returns:
        # lr 0.1 then 0.05: p -= lr * 1, q -= lr * 2, whoever owns them
        expected = [([-0.1] * 4, [-0.2] * 2), ([-0.15] * 4, [-0.3] * 2)]
        for (p, q), (want_p, want_q) in zip(values, expected, strict=True):
            np.testing.assert_allclose(p, want_p, rtol=1e-6)
            np.testing.assert_allclose(q, want_q, rtol=1e-6)
        assert zeroed == ([0.0] * 4, [0.0] * 2) and cleared
        assert lr == 0.05
