"""Registration points where a lower layer is handed what a higher one provides.

* ``kernels.jit.register_argument_launcher``: arguments of a registered type
  claim launches (the device module registers the runtime's device tensors).
* ``kernels.ranks.set_rank_provider``: the process group ``compile_and_load``
  asks for its rank (``kernbench.torch.distributed`` registers one).
* ``distributed.world.set_p2p_launch`` / ``World(p2p_launch=...)``: what
  runs a matched send/recv (``kernbench.ccl.launch`` registers one).

Each: registering it, the behaviour with none registered, and the error a user
gets when nothing is registered where it matters.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.distributed.world import World, p2p_launch, p2p_work, set_p2p_launch
from kernbench.errors import DistributedError, KernelError, RankError
from kernbench.kernels import DeviceKernel, DeviceLaunchResult, LaunchRecord, clear_cache, jit
from kernbench.kernels.jit import argument_launcher, register_argument_launcher, use_launcher
from kernbench.kernels.ranks import DistributedState, distributed_state, set_rank_provider
from kernbench.runtime import DeviceTensor, RuntimeContext


@jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, 2 * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def tiny_context(**kwargs) -> RuntimeContext:
    return RuntimeContext("tiny", overrides=["system.device_level=pe"], **kwargs)


# ----------------------------------------------------------------------------- argument launchers


class Claiming:
    """An argument type that claims launches once registered."""


class ClaimingSubclass(Claiming):
    pass


def test_a_registered_argument_type_claims_the_launch_and_so_do_its_subclasses():
    def claim(value, launch):
        return ("claimed", type(value).__name__, launch.kernel.name)

    register_argument_launcher(Claiming, claim)
    out = np.zeros(4, dtype=np.float32)
    for value, name in ((Claiming(), "Claiming"), (ClaimingSubclass(), "ClaimingSubclass")):
        assert argument_launcher(value) is claim
        assert scale_kernel[(1,)](value, out, 4, BLOCK=4) == ("claimed", name, "scale_kernel")


def test_without_a_claiming_argument_a_kernel_runs_on_the_host():
    x = np.arange(4, dtype=np.float32)
    out = np.zeros(4, dtype=np.float32)
    assert argument_launcher(x) is None
    record = scale_kernel[(1,)](x, out, 4, BLOCK=4)
    assert isinstance(record, LaunchRecord)
    np.testing.assert_array_equal(out, 2 * x)


def test_an_installed_launcher_takes_launches_before_any_claim():
    register_argument_launcher(Claiming, lambda value, launch: "claimed")
    with use_launcher(lambda launch: "installed"):
        assert scale_kernel[(1,)](Claiming(), np.zeros(4), 4, BLOCK=4) == "installed"


def test_device_tensors_are_registered_by_the_kernel_layer_not_the_runtime():
    ctx = tiny_context()
    x = ctx.zeros((8,))
    out = ctx.zeros((8,))
    assert not hasattr(DeviceTensor, "__kernel_launch__")
    assert argument_launcher(x) is not None
    result = scale_kernel[(2,)](x, out, 8, BLOCK=4)
    assert isinstance(result, DeviceLaunchResult)
    assert result.elapsed_ps > 0


@pytest.mark.parametrize(
    ("argument_type", "launcher", "message"),
    [
        ("Claiming", lambda value, launch: None, "registered for a type"),
        (Claiming, "not callable", "must be callable with"),
    ],
)
def test_a_bad_argument_launcher_registration_is_refused(argument_type, launcher, message):
    with pytest.raises(KernelError, match=message):
        register_argument_launcher(argument_type, launcher)


# ----------------------------------------------------------------------------- rank providers


@jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


@pytest.fixture
def no_rank_provider():
    """No rank provider during the test; the one registered before is restored after it."""
    clear_cache()
    previous = set_rank_provider(None)
    yield previous
    set_rank_provider(previous)
    clear_cache()


def compile_add_one(tmp_path, **options) -> DeviceKernel:
    x, out = np.zeros(8, dtype=np.float32), np.zeros(8, dtype=np.float32)
    return DeviceKernel.compile_and_load(add_one, x, out, 8, build_dir=tmp_path, BLOCK=8, **options)


def test_with_no_rank_provider_there_is_no_process_group(tmp_path, no_rank_provider):
    assert distributed_state() == DistributedState(False)
    assert compile_add_one(tmp_path).mode == "no_cc"


def test_a_registered_rank_provider_is_asked_and_can_be_replaced(tmp_path, no_rank_provider):
    barriers = []
    state = DistributedState(True, 0, 2, lambda: barriers.append("barrier"))
    assert set_rank_provider(lambda: state) is None
    assert distributed_state() is state
    kernel = compile_add_one(tmp_path)
    assert (kernel.mode, kernel.rank_id, kernel.world_size) == ("spmd", 0, 2)
    assert barriers == ["barrier"]
    assert compile_add_one(tmp_path, is_spmd=False).mode == "mpmd"

    previous = set_rank_provider(lambda: DistributedState(False))
    assert previous() is state
    assert compile_add_one(tmp_path).mode == "no_cc"


def test_torch_distributed_registers_a_rank_provider_when_imported():
    import kernbench.torch.distributed  # noqa: F401  (registers at import)

    provider = set_rank_provider(None)
    try:
        assert provider is not None
        assert provider.__module__ == "kernbench.torch.distributed"
        assert provider() == DistributedState(False)  # outside a run nothing is initialised
    finally:
        set_rank_provider(provider)


def test_cc_without_a_rank_provider_or_explicit_ranks_is_an_error(tmp_path, no_rank_provider):
    with pytest.raises(KernelError, match="cc_enabled=True needs rank_id and world_size"):
        compile_add_one(tmp_path, cc_enabled=True)


def test_spmd_without_a_rank_provider_needs_mpmd(tmp_path, no_rank_provider):
    with pytest.raises(KernelError, match="needs is_spmd=False"):
        compile_add_one(tmp_path, rank_id=0, world_size=2)


def test_a_rank_provider_must_be_callable(no_rank_provider):
    with pytest.raises(KernelError, match="rank provider must be a callable"):
        set_rank_provider("rank 0")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- p2p launches


class FakeTransfer:
    """Stands for a point-to-point program: it finishes ``duration_ps`` after it starts."""

    def __init__(self, calls: list, duration_ps: int = 1000) -> None:
        self.calls = calls
        self.duration_ps = duration_ps

    def __call__(self, ctx, src, dst):
        self.calls.append((src.name, dst.name))
        env = ctx.machine.clock
        return type("Launched", (), {"finish": lambda _self: env.timeout(self.duration_ps)})()


@pytest.fixture
def no_p2p_launch():
    """No registered p2p launch during the test; the one before is restored after it."""
    previous = set_p2p_launch(None)
    yield previous
    set_p2p_launch(previous)


def exchange(world: World) -> list:
    """Rank 0 sends a tensor to rank 1; returns (source, end time) per rank."""
    ctx = world.ctx

    def body(rank: int):
        tensor = ctx.zeros((4,), name=f"t{rank}")
        rv = world.post_send(tensor, 1, 0) if rank == 0 else world.post_recv(tensor, 0, 0)
        p2p_work(world, rv).wait()
        return rv.source, ctx.now

    return world.run(body)


def test_a_world_built_with_a_p2p_launch_runs_sends_with_it(no_p2p_launch):
    calls: list = []
    ctx = tiny_context()
    results = exchange(World(ctx, 2, p2p_launch=FakeTransfer(calls)))
    assert calls == [("t0", "t1")]
    assert [source for source, _ in results] == [0, 0]
    assert results[0][1] == results[1][1]


def test_a_registered_p2p_launch_is_the_default_of_worlds(no_p2p_launch):
    calls: list = []
    launch = FakeTransfer(calls)
    assert set_p2p_launch(launch) is None
    assert p2p_launch() is launch
    exchange(World(tiny_context(), 2))
    assert calls == [("t0", "t1")]


def test_ccl_registers_its_send_recv_when_imported():
    from kernbench.ccl import launch  # registers at import

    assert p2p_launch() is launch.send_recv


def test_a_send_with_no_p2p_launch_says_what_to_import(no_p2p_launch):
    with pytest.raises(
        RankError, match="nothing launches point-to-point transfers: import kernbench.ccl.launch"
    ):
        exchange(World(tiny_context(), 2))


@pytest.mark.parametrize("setter", ["register", "world"])
def test_a_p2p_launch_must_be_callable(setter, no_p2p_launch):
    with pytest.raises(DistributedError, match="must be callable with"):
        if setter == "register":
            set_p2p_launch("send")  # type: ignore[arg-type]
        else:
            World(tiny_context(), 2, p2p_launch="send")  # type: ignore[arg-type]
