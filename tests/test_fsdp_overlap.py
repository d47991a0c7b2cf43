"""FSDP overlaps its collectives with computation as torch's (ADR 0021 addendum): the
values are those of every collective blocking where it is issued, bit for bit, with and
without prefetch in each sharding strategy; the overlapped step is faster than the
blocking one and no faster than its compute alone or its collectives alone; the
collectives are issued in torch's order for BACKWARD_PRE, BACKWARD_POST, no backward
prefetch and forward_prefetch; no more than two all-gathers are in flight; a prefetched
unit's parameters are allocated when its gather is issued; timing-only mode gives the
same time."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.runtime import current_context
from kernbench.torch import nn, optim
from kernbench.torch.distributed import fsdp as fsdp_module
from kernbench.torch.distributed.fsdp import BackwardPrefetch, ShardingStrategy
from kernbench.torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from kernbench.torch.distributed.fsdp.overlap import UnitSchedule
from kernbench.torch.distributed.fsdp.wrap import ModuleWrapPolicy

WIDTH, BATCH, STEPS = 32, 16, 2
PRE, POST = BackwardPrefetch.BACKWARD_PRE, BackwardPrefetch.BACKWARD_POST


class Block(nn.Module):
    """Blocks of different widths, so each unit's collectives have their own size."""

    def __init__(self, index, events=None, memory=None):
        super().__init__()
        self.index, self.events, self.memory = index, events, memory
        self.up = nn.Linear(WIDTH, (index + 2) * WIDTH)
        self.down = nn.Linear((index + 2) * WIDTH, WIDTH)

    def forward(self, x):
        if self.events is not None:
            self.events.append(f"forward {self.index}")
        out = x + self.down(torch.relu(self.up(x)))
        if self.events is not None and out.requires_grad:
            out.register_hook(lambda g: self.events.append(f"backward {self.index}"))
        if self.memory is not None and out.requires_grad:  # as this block's backward starts
            out.register_hook(lambda g: self.memory.append(torch.cuda.memory_allocated()))
        return out


class Net(nn.Module):
    def __init__(self, events=None, memory=None):
        super().__init__()
        self.blocks = nn.ModuleList([Block(i, events, memory) for i in range(3)])
        self.head = nn.Linear(WIDTH, 4)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _unit_of(numel, world):
    """The unit a collective of ``numel`` elements (a flat parameter, padded) is of."""
    for i in range(3):
        n = 2 * (i + 2) * WIDTH * WIDTH + (i + 3) * WIDTH
        if numel in (n, -(-n // world) * world):
            return str(i)
    return "root"


def _patched(monkeypatch, mode, events):
    """FSDP's collectives recorded into ``events`` (with the in-flight all-gathers at each
    all-gather); ``blocking``: each waited for where issued (the schedule before overlap);
    ``compute``: none runs (the compute alone)."""
    inflight = []

    def wrap(name, original):
        def call(*args, **kwargs):
            rank = dist.get_rank()
            tag = {"all_gather_into_tensor": "gather", "reduce_scatter_tensor": "reduce"}
            numel = args[1 if name == "reduce_scatter_tensor" else 0].numel()
            if name != "all_reduce" or numel > 1:  # (clip_grad_norm_'s is one element)
                label = f"{tag.get(name, 'all_reduce')} {_unit_of(numel, 2)}"
                events[rank].append(label)
            if mode == "compute":
                return _Done() if kwargs.get("async_op") else None
            work = original(*args, **kwargs)
            if name == "all_gather_into_tensor" and rank == 0:
                inflight[:] = [w for w in inflight if not w.is_completed()] + [work]
                events["max_inflight"] = max(events.get("max_inflight", 0), len(inflight))
            if mode == "blocking" and work is not None:
                work.wait()
            return work

        return call

    for name in ("all_gather_into_tensor", "reduce_scatter_tensor", "all_reduce"):
        monkeypatch.setattr(fsdp_module, name, wrap(name, getattr(fsdp_module, name)))


class _Done:
    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True


def _run(rank, world, strategy, options, events):
    dist.init_process_group()
    torch.manual_seed(0)
    log = events[0] if rank == 0 else None  # its marks among its collectives
    model = FSDP(
        Net(log), auto_wrap_policy=ModuleWrapPolicy({Block}), sharding_strategy=strategy, **options
    )
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ctx, times = current_context(), []
    for step in range(STEPS):
        rng = np.random.default_rng([rank, step])
        x = torch.from_numpy(rng.standard_normal((BATCH, WIDTH), np.float32))
        y = torch.from_numpy(rng.standard_normal((BATCH, 4), np.float32))
        opt.zero_grad()
        dist.barrier()
        start = ctx.now
        if log is not None:
            log.clear()  # (the last step's are kept)
        ((model(x) - y) ** 2).mean().backward()
        times.append((start, ctx.now))
        opt.step()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    params = [p.detach().numpy().copy() for p in model.parameters()]
    dist.destroy_process_group()
    return params, grads, times


def _simulate(monkeypatch, strategy, options, mode="overlap"):
    events = {0: [], 1: []}
    with monkeypatch.context() as patch:
        _patched(patch, mode, events)
        result = kernbench.simulate(
            _run, topology="multi_sip", world_size=2, rank_args=True,
            args=(strategy, options, events),
        )  # fmt: skip
    return result, events


@pytest.mark.parametrize("strategy", list(ShardingStrategy)[:3])
def test_overlap_keeps_the_values_and_bounds_the_step_time(monkeypatch, strategy):
    blocking, _ = _simulate(monkeypatch, strategy, {"backward_prefetch": None}, "blocking")
    compute, _ = _simulate(monkeypatch, strategy, {}, "compute")
    runs = {
        name: _simulate(monkeypatch, strategy, options)[0]
        for name, options in (
            ("none", {"backward_prefetch": None}),
            ("pre", {"backward_prefetch": PRE, "forward_prefetch": True}),
            ("post", {"backward_prefetch": POST}),
        )
    }
    for result in runs.values():
        for rank in range(2):
            want, got = blocking.returns[rank], result.returns[rank]
            for a, b in zip(want[0] + want[1], got[0] + got[1], strict=True):
                assert np.array_equal(a, b)  # bit for bit: only the timing changed

    def step_ps(result):
        """The last step's forward and backward (both ranks: from the barrier to the
        later one's end)."""
        starts, ends = zip(*(result.returns[r][2][-1] for r in range(2)), strict=True)
        return min(starts), max(ends)

    def duration(result):
        start, end = step_ps(result)
        return end - start

    start, end = step_ps(runs["pre"])
    overlapped = end - start
    # A group's collectives run one after another, so the step lasts at least their sum;
    # and at least the compute alone (the same step with no collective run)
    comm = sum(
        c["end_ps"] - c["start_ps"]
        for c in runs["pre"].report["collectives"]
        if c["start_ps"] >= start and c["end_ps"] <= end and c["op"] != "barrier"
    )
    assert max(duration(compute), comm) < overlapped < duration(blocking)
    for name in ("none", "post"):
        assert duration(runs[name]) < duration(blocking)


ORDERS = {
    # root's pre-backward prefetches the last block; each block's the one before it
    PRE: ["gather 2", "backward 2", "gather 1", "reduce 2", "backward 1", "gather 0",
          "reduce 1", "backward 0", "reduce 0", "reduce root"],
    # after a block's gradient, before its reduce-scatter
    POST: ["backward 2", "gather 2", "gather 1", "reduce 2", "backward 1", "gather 0",
           "reduce 1", "backward 0", "reduce 0", "reduce root"],
    # each block gathers when its own backward starts
    None: ["backward 2", "gather 2", "reduce 2", "backward 1", "gather 1", "reduce 1",
           "backward 0", "gather 0", "reduce 0", "reduce root"],
}  # fmt: skip


@pytest.mark.parametrize("prefetch", [PRE, POST, None])
def test_collectives_are_issued_in_torchs_order(monkeypatch, prefetch):
    options = {"backward_prefetch": prefetch, "forward_prefetch": prefetch is PRE}
    result, events = _simulate(monkeypatch, ShardingStrategy.FULL_SHARD, options)
    forward = ["gather root", "gather 0", "forward 0", "gather 1", "forward 1", "gather 2",
               "forward 2"]  # fmt: skip
    if prefetch is PRE:  # forward_prefetch: the next block's gather before this one runs
        forward = ["gather root", "gather 0", "gather 1", "forward 0", "gather 2", "forward 1",
                   "forward 2"]  # fmt: skip
    assert events[0] == forward + ORDERS[prefetch]  # rank 0's, the last step's
    assert events["max_inflight"] <= 2


def test_the_rate_limiter_waits_for_the_oldest_of_two_all_gathers():
    class Pending:
        def __init__(self, name, log):
            self.name, self.log, self.done = name, log, False

        def wait(self):
            self.log.append(f"wait {self.name}")
            self.done = True

        def is_completed(self):
            return self.done

    for limit, want in ((True, ["wait a"]), (False, [])):
        log = []
        schedule = UnitSchedule([], limit_all_gathers=limit)
        for name in "abc":
            schedule.before_gather()
            schedule.gathered(Pending(name, log))
        assert log == want


def _memory_as_backward_starts(rank, world, prefetch):
    dist.init_process_group()
    torch.manual_seed(0)
    memory = []
    model = FSDP(Net(memory=memory), auto_wrap_policy=ModuleWrapPolicy({Block}),
                 backward_prefetch=prefetch)  # fmt: skip
    model(torch.ones(BATCH, WIDTH)).sum().backward()
    dist.destroy_process_group()
    return memory


def test_a_prefetched_units_parameters_are_allocated_when_its_gather_is_issued():
    at = {}
    for prefetch in (PRE, None):
        result = kernbench.simulate(
            _memory_as_backward_starts, topology="multi_sip", world_size=2, rank_args=True,
            args=(prefetch,),
        )  # fmt: skip
        at[prefetch] = result.returns[0]  # blocks 2, 1, 0
    # BACKWARD_PRE: the root's pre-backward has issued block 2's all-gather before block 2's
    # backward starts, so its gathered parameters (float32, padded) are held then
    block2 = 4 * (2 * 4 * WIDTH * WIDTH + 5 * WIDTH)
    assert at[PRE][0] - at[None][0] >= block2


def _steps(rank, world):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}), forward_prefetch=True)
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        opt.zero_grad()
        model(torch.ones(BATCH, WIDTH)).sum().backward()
        opt.step()
    dist.destroy_process_group()


def test_timing_only_mode_gives_the_same_overlapped_time():
    times = [
        kernbench.simulate(
            _steps, topology="multi_sip", world_size=2, rank_args=True, timing_only=timing
        ).report["simulated_time_ps"]
        for timing in (False, True)
    ]
    assert times[0] == times[1]


class _Stop(Exception):
    pass


def _after_a_failed_backward(rank, world, fail):
    """One step, after (``fail``) a backward that raised in block 1's gradient and was
    caught: the step's gradients must be those of a clean first step."""
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    x = torch.ones(BATCH, WIDTH) * (rank + 1)
    if fail:
        block = model.module.blocks[1]
        original = block.forward

        def raising(h):
            out = original(h)
            out.register_hook(lambda g: (_ for _ in ()).throw(_Stop("block 1")))
            return out

        block.forward = raising
        with pytest.raises(_Stop):
            model(x).sum().backward()
        block.forward = original
        for p in model.parameters():
            p.grad = None
    model(x).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model(x).sum().backward()  # and the one after accumulates onto them
    again = [p.grad.numpy().copy() for p in model.parameters()]
    dist.destroy_process_group()
    return grads, again


def test_a_backward_that_raised_leaves_the_next_step_as_a_clean_one():
    runs = {
        fail: kernbench.simulate(
            _after_a_failed_backward, topology="multi_sip", world_size=2, rank_args=True,
            args=(fail,),
        ).returns
        for fail in (False, True)
    }  # fmt: skip
    for rank in range(2):
        (clean, clean2), (after, after2) = runs[False][rank], runs[True][rank]
        for a, b in zip(clean + clean2, after + after2, strict=True):
            assert np.array_equal(a, b)
        for a, b in zip(clean, clean2, strict=True):
            assert np.allclose(2 * a, b)
