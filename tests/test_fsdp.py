"""torch.distributed.fsdp.FullyShardedDataParallel: a model wrapped per block by
transformer_auto_wrap_policy trains on 2 and 4 ranks to the parameters of the plain model
trained on the whole batch (NumPy allclose); each rank holds 1/world of each unit; the
collectives of each sharding strategy (FULL_SHARD gathers twice, SHARD_GRAD_OP once,
NO_SHARD all-reduces); FULL_SHARD frees the gathered parameters after forward;
clip_grad_norm_, the full state dict and its round trip, summon_full_params, mixed
precision; the refusals by message."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DistributedError
from kernbench.torch import nn, optim
from kernbench.torch.distributed.fsdp import (
    FullStateDictConfig,
    MixedPrecision,
    ShardingStrategy,
    StateDictType,
)
from kernbench.torch.distributed.fsdp import (
    FullyShardedDataParallel as FSDP,
)
from kernbench.torch.distributed.fsdp.wrap import (
    ModuleWrapPolicy,
    size_based_auto_wrap_policy,
    transformer_auto_wrap_policy,
)

WIDTH, BATCH, STEPS = 6, 8, 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(WIDTH)
        self.head = nn.Linear(WIDTH, 3)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _batch(step):
    rng = np.random.default_rng(step)
    return rng.standard_normal((BATCH, WIDTH), np.float32), rng.standard_normal(
        (BATCH, 3), np.float32
    )


def _policy():
    return functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={Block})


def _train(model, rank, world, clip=None):
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    norms = []
    for step in range(STEPS):
        x, y = _batch(step)
        rows = slice(rank * BATCH // world, (rank + 1) * BATCH // world)
        opt.zero_grad()
        loss = ((model(torch.from_numpy(x[rows])) - torch.from_numpy(y[rows])) ** 2).mean()
        loss.backward()
        if clip is not None:
            norms.append(clip(model).item())
        opt.step()
    return norms


def _reference(clip=False):
    """The plain model trained on the whole batch: what FSDP must give."""
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        model = Net()
        norms = _train(
            model,
            0,
            1,
            (lambda m: nn.utils.clip_grad_norm_(m.parameters(), 0.05)) if clip else None,
        )
        return {k: v.numpy().copy() for k, v in model.state_dict().items()}, norms


def _fsdp_run(rank, world, strategy, clip):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=_policy(), sharding_strategy=strategy)
    shards = [tuple(p.shape) for p in model.parameters()]
    names = [n for n, _ in model.named_parameters()]
    norms = _train(model, rank, world, (lambda m: m.clip_grad_norm_(0.05)) if clip else None)
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    dist.destroy_process_group()
    return state, norms, shards, names


@pytest.mark.parametrize(
    ("world", "strategy"),
    [(2, ShardingStrategy.FULL_SHARD), (4, ShardingStrategy.FULL_SHARD),
     (2, ShardingStrategy.SHARD_GRAD_OP), (2, ShardingStrategy.NO_SHARD)],
)  # fmt: skip
def test_fsdp_trains_to_the_plain_models_parameters(world, strategy):
    want, _ = _reference()
    result = kernbench.simulate(
        _fsdp_run, topology="multi_sip", world_size=world, rank_args=True, args=(strategy, False)
    )
    block = 4 * WIDTH * WIDTH + 3 * WIDTH  # a Block's parameters
    root = 2 * WIDTH + 3 * WIDTH + 3  # the norm's and the head's
    for rank in range(world):
        state, _, shards, names = result.returns[rank]
        assert list(state) == list(want)  # the original names, in the original order
        for k in want:
            np.testing.assert_allclose(state[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)
        share = 1 if strategy is ShardingStrategy.NO_SHARD else world
        assert shards == [(-(-n // share),) for n in (root, block, block)]
        assert names == [
            "_flat_param",
            "_fsdp_wrapped_module.blocks.0._flat_param",
            "_fsdp_wrapped_module.blocks.1._flat_param",
        ]
    ops = [c["op"] for c in result.report["collectives"]]
    per_step = {
        # gathered in forward and again in backward, but for the root unit, kept
        ShardingStrategy.FULL_SHARD: (5, 3, 0),
        ShardingStrategy.SHARD_GRAD_OP: (3, 3, 0),
        ShardingStrategy.NO_SHARD: (0, 0, 3),
    }[strategy]
    state_dict_gathers = 3 if strategy is not ShardingStrategy.NO_SHARD else 0
    assert ops.count("all_gather") == STEPS * per_step[0] + state_dict_gathers
    assert ops.count("reduce_scatter") == STEPS * per_step[1]
    assert ops.count("all_reduce") == STEPS * per_step[2]


def test_clip_grad_norm_takes_the_norm_over_every_ranks_shards():
    want, want_norms = _reference(clip=True)
    result = kernbench.simulate(
        _fsdp_run,
        topology="multi_sip",
        world_size=2,
        rank_args=True,
        args=(ShardingStrategy.FULL_SHARD, True),
    )
    for rank in range(2):
        state, norms, _, _ = result.returns[rank]
        np.testing.assert_allclose(norms, want_norms, rtol=1e-5)
        for k in want:
            np.testing.assert_allclose(state[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


def _memory(rank, world, strategy):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=_policy(), sharding_strategy=strategy)
    x, _ = _batch(0)
    before = torch.cuda.memory_allocated()
    out = model(torch.from_numpy(x))
    after = torch.cuda.memory_allocated() - before
    out.sum().backward()
    dist.destroy_process_group()
    return after


def test_full_shard_frees_the_gathered_parameters_after_forward():
    kept = {}
    for strategy in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
        result = kernbench.simulate(
            _memory, topology="multi_sip", world_size=2, rank_args=True, args=(strategy,)
        )
        kept[strategy] = result.returns[0]
    block = 4 * WIDTH * WIDTH + 3 * WIDTH
    # float32 bytes of the two blocks' gathered parameters (the root unit's are kept by both)
    blocks = 4 * 2 * block
    assert kept[ShardingStrategy.SHARD_GRAD_OP] - kept[ShardingStrategy.FULL_SHARD] >= blocks


def _state_round_trip(rank, world):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    with FSDP.state_dict_type(
        model, StateDictType.FULL_STATE_DICT, FullStateDictConfig(rank0_only=True)
    ):
        only_rank0 = model.state_dict()
    full = model.state_dict()
    torch.manual_seed(rank + 10)
    other = FSDP(Net(), auto_wrap_policy=ModuleWrapPolicy({Block}))
    x = torch.ones(2, WIDTH)
    before = other(x).detach().numpy().copy()
    other.load_state_dict(full)
    after = other(x).detach().numpy().copy()
    expected = model(x).detach().numpy().copy()
    with FSDP.summon_full_params(other):
        shape = tuple(other.module.blocks[0].module.up.weight.shape)
        other.module.head.bias.fill_(0.0)  # written back to the shards on exit
    bias = other.state_dict()["head.bias"].numpy().copy()
    errors = []
    for call in (
        lambda: FSDP(Net(), use_orig_params=True),
        lambda: FSDP(Net(), sharding_strategy=ShardingStrategy.HYBRID_SHARD),
        lambda: FSDP.state_dict_type(model, StateDictType.SHARDED_STATE_DICT).__enter__(),
        lambda: other.load_state_dict({"head.bias": torch.ones(3)}),
    ):
        try:
            call()
        except DistributedError as error:
            errors.append(str(error))
    dist.destroy_process_group()
    return len(only_rank0), before, after, expected, shape, bias, errors


def test_full_state_dict_round_trip_summon_full_params_and_refusals():
    result = kernbench.simulate(
        _state_round_trip, topology="multi_sip", world_size=2, rank_args=True
    )
    for rank in range(2):
        n_rank0, before, after, expected, shape, bias, errors = result.returns[rank]
        assert n_rank0 == (12 if rank == 0 else 0)
        np.testing.assert_allclose(after, expected, rtol=1e-6)
        assert not np.allclose(before, expected)
        assert shape == (2 * WIDTH, WIDTH) and bias.tolist() == [0.0] * 3
        assert "use_orig_params=True) is not supported" in errors[0]
        assert "HYBRID_SHARD) is not supported" in errors[1]
        assert "only StateDictType.FULL_STATE_DICT is supported" in errors[2]
        assert errors[3].startswith("Error(s) in loading state_dict for FullyShardedDataParallel")
        assert 'Missing key(s) in state_dict: "blocks.0.up.weight"' in errors[3]


def _mixed(rank, world):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(
        Net(),
        auto_wrap_policy=functools.partial(size_based_auto_wrap_policy, min_num_params=100),
        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32),
    )
    x, y = _batch(0)
    out = model(torch.from_numpy(x))
    loss = ((out.float() - torch.from_numpy(y)) ** 2).mean()
    loss.backward()
    grads = [(p.dtype, p.grad.dtype) for p in model.parameters()]
    dist.destroy_process_group()
    return out.dtype, loss.item(), grads, len(list(model.parameters()))


def test_mixed_precision_gathers_in_bfloat16_and_keeps_float32_shards():
    result = kernbench.simulate(_mixed, topology="multi_sip", world_size=2, rank_args=True)
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        x, y = _batch(0)
        want = ((Net()(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean().item()
    for rank in range(2):
        dtype, loss, grads, units = result.returns[rank]
        assert dtype is torch.bfloat16 and abs(loss - want) < 0.02 * abs(want)
        assert units == 3  # each Block (110 parameters) and the root
        assert all(g == (torch.float32, torch.float32) for g in grads)


def _checkpoint_inside(rank, world, strategy):
    from kernbench.torch.utils.checkpoint import checkpoint

    class Inner(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block()

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)

    dist.init_process_group()
    torch.manual_seed(0)
    # Inner a unit of its own inside the root (the root unit is never resharded)
    model = FSDP(
        nn.Sequential(Inner()),
        auto_wrap_policy=ModuleWrapPolicy({Inner}),
        sharding_strategy=strategy,
    )
    try:
        model(torch.ones(2, WIDTH)).sum().backward()
        outcome = [p.grad.shape for p in model.parameters()]
    except DistributedError as error:
        outcome = str(error)
    try:
        model.module[0].module.block.up.weight.shape  # noqa: B018
    except DistributedError as error:
        outside = str(error)
    dist.destroy_process_group()
    return outcome, outside


def test_checkpointing_inside_a_unit_needs_its_parameters_kept():
    for strategy, works in (
        (ShardingStrategy.SHARD_GRAD_OP, True),
        (ShardingStrategy.FULL_SHARD, False),
    ):
        result = kernbench.simulate(
            _checkpoint_inside, topology="multi_sip", world_size=2, rank_args=True, args=(strategy,)
        )
        outcome, outside = result.returns[0]
        if works:
            assert outcome == [(81,)]
        else:
            assert "Linear.weight belongs to an FSDP unit" in outcome
            assert "checkpoint whole units, or use ShardingStrategy.SHARD_GRAD_OP" in outcome
        assert "read it inside FullyShardedDataParallel.summon_full_params(model)" in outside


def _accumulate(rank, world):
    dist.init_process_group()
    torch.manual_seed(0)
    model = FSDP(Net(), auto_wrap_policy=_policy())
    opt = optim.SGD(model.parameters(), lr=0.1)
    x, y = _batch(0)
    rows = [slice(2 * (2 * rank + m), 2 * (2 * rank + m) + 2) for m in range(2)]  # 2 micro-batches

    def loss_of(r):
        return ((model(torch.from_numpy(x[r])) - torch.from_numpy(y[r])) ** 2).mean()

    with model.no_sync():
        loss_of(rows[0]).backward()
        kept = [p.grad for p in model.parameters()]
    loss_of(rows[1]).backward()
    opt.step()
    state = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    dist.destroy_process_group()
    return kept, state


def test_no_sync_accumulates_unsharded_and_reduces_once():
    result = kernbench.simulate(_accumulate, topology="multi_sip", world_size=2, rank_args=True)
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        plain = Net()
        x, y = _batch(0)
        total = 0.0
        for m in range(4):  # every rank's micro-batches, averaged over the 2 ranks
            r = slice(2 * m, 2 * m + 2)
            total = total + ((plain(torch.from_numpy(x[r])) - torch.from_numpy(y[r])) ** 2).mean()
        (total / 2).backward()
        optim.SGD(plain.parameters(), lr=0.1).step()
        want = {k: v.numpy().copy() for k, v in plain.state_dict().items()}
    for rank in range(2):
        kept, state = result.returns[rank]
        assert kept == [None, None, None]  # nothing reduced inside no_sync
        for k in want:
            np.testing.assert_allclose(state[k], want[k], rtol=1e-5, atol=1e-6, err_msg=k)
    ops = [c["op"] for c in result.report["collectives"]]
    assert ops.count("reduce_scatter") == 3  # one per unit, after no_sync


def test_fsdp2_and_distributed_checkpoint_say_what_to_use_instead():
    import kernbench.torch.distributed.fsdp as fsdp
    from kernbench.errors import UnsupportedNameError

    for name in ("fully_shard", "MixedPrecisionPolicy", "FSDPModule"):
        with pytest.raises(UnsupportedNameError, match=r"wrap the model in FullyShardedData"):
            getattr(fsdp, name)
    with pytest.raises(UnsupportedNameError, match=r"no distributed checkpoint \(DCP\) here"):
        dist.checkpoint  # noqa: B018
    from kernbench.torch.distributed.fsdp import fully_sharded_data_parallel  # a submodule

    assert fully_sharded_data_parallel.FullyShardedDataParallel is fsdp.FullyShardedDataParallel
