"""compile_and_load: caching, the SPMD / MPMD / no-CC modes, artifacts and errors."""

from __future__ import annotations

import json
import os
import re
import signal
import tempfile
from pathlib import Path

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.errors import InputFileError, KernelError, OutputFileError
from kernbench.kernels import DeviceKernel, clear_cache, elementwise_kernel, jit
from kernbench.kernels.ranks import DistributedState, distributed_state, set_rank_provider


@jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, alpha * x + y, mask=mask)


@jit
def broken_kernel(x_ptr, BLOCK: tl.constexpr):
    tl.load(x_ptr + tl.arange(0, BLOCK))  # no mask: out of bounds when BLOCK > numel


@pytest.fixture(autouse=True)
def fresh_cache():
    clear_cache()
    yield
    clear_cache()


def axpy_inputs(n=1000, dtype=np.float32):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    return x, y, np.zeros_like(x), n, 2.0


def compile_axpy(tmp_path, inputs, block=256, **kwargs):
    n = inputs[3]
    return DeviceKernel.compile_and_load(
        axpy_kernel, *inputs, build_dir=tmp_path, grid=(tl.cdiv(n, block),), BLOCK=block, **kwargs
    )


def stats():
    s = DeviceKernel.stats()
    return s.compilations, s.cache_hits, s.loads


# ----------------------------------------------------------------------------- cache


def test_second_call_hits_the_cache(tmp_path):
    inputs = axpy_inputs()
    first = compile_axpy(tmp_path, inputs)
    second = compile_axpy(tmp_path, inputs)
    assert (first.from_cache, second.from_cache) == (False, True)
    assert stats() == (1, 1, 0)
    assert second.content_hash == first.content_hash
    assert second.artifact_path == first.artifact_path


def test_use_cached_if_exists_false_recompiles(tmp_path):
    inputs = axpy_inputs()
    compile_axpy(tmp_path, inputs)
    again = compile_axpy(tmp_path, inputs, use_cached_if_exists=False)
    assert not again.from_cache
    assert stats()[0] == 2


@pytest.mark.parametrize(
    "change",
    [
        {"inputs": axpy_inputs(n=2000)},
        {"inputs": axpy_inputs(dtype=np.float16)},
        {"block": 512},
    ],
    ids=["shape", "dtype", "meta"],
)
def test_a_new_signature_compiles_anew(tmp_path, change):
    base = compile_axpy(tmp_path, axpy_inputs())
    other = compile_axpy(tmp_path, change.get("inputs", axpy_inputs()), change.get("block", 256))
    assert not other.from_cache
    assert other.content_hash != base.content_hash
    assert stats()[0] == 2


def test_clear_cache_resets_counters(tmp_path):
    compile_axpy(tmp_path, axpy_inputs())
    clear_cache()
    assert stats() == (0, 0, 0)
    assert not compile_axpy(tmp_path, axpy_inputs()).from_cache


def test_a_deleted_artifact_is_restored_on_a_cache_hit(tmp_path):
    first = compile_axpy(tmp_path, axpy_inputs())
    first.artifact_path.unlink()
    again = compile_axpy(tmp_path, axpy_inputs())
    assert again.from_cache and again.artifact_path.exists()
    assert stats()[0] == 1


# ----------------------------------------------------------------------------- running


def test_the_loaded_kernel_runs_and_matches_numpy(tmp_path):
    x, y, out, n, alpha = axpy_inputs()
    kernel = compile_axpy(tmp_path, (x, y, out, n, alpha))
    record = kernel(x, y, out, n, alpha)
    np.testing.assert_array_equal(out, np.float32(alpha) * x + y)
    assert record.grid.dims == (4,)


def test_builtin_kernel_with_a_callable_grid(tmp_path):
    x = np.arange(3000, dtype=np.float32)
    y = np.full(3000, 0.5, dtype=np.float32)
    out = np.empty_like(x)
    kernel = DeviceKernel.compile_and_load(
        elementwise_kernel,
        x,
        y,
        out,
        x.size,
        build_dir=tmp_path,
        grid=lambda meta: (tl.cdiv(meta["n"], meta["BLOCK"]),),
        OP="div",
        BLOCK=1024,
    )
    assert kernel.artifact["grid"] == {"dims": [3], "spmd_axis": None, "num_cores": 1}
    kernel(x, y, out, x.size)
    np.testing.assert_array_equal(out, x / y)


def test_numpy_scalars_are_scalars(tmp_path):
    x, y, out, _, _ = axpy_inputs()
    kernel = compile_axpy(tmp_path, (x, y, out, np.int64(1000), np.float32(2.0)))
    assert [i["kind"] for i in kernel.artifact["inputs"]][3:] == ["scalar", "scalar"]
    assert kernel.artifact["inputs"][4]["value"] == 2.0


def test_calling_with_another_signature_is_refused(tmp_path):
    x, y, out, n, alpha = axpy_inputs()
    kernel = compile_axpy(tmp_path, (x, y, out, n, alpha))
    with pytest.raises(KernelError, match=r"input 'y_ptr' is \(10,\) float32.*\(1000,\) float32"):
        kernel(x, y[:10], out, n, alpha)
    with pytest.raises(KernelError, match="compiled for 5 inputs, called with 4"):
        kernel(x, y, out, n)


# ----------------------------------------------------------------------------- artifact


def test_artifact_json_contents(tmp_path):
    kernel = compile_axpy(tmp_path, axpy_inputs())
    assert kernel.artifact_path == tmp_path / kernel.content_hash / "kernel.json"
    artifact = json.loads(kernel.artifact_path.read_text())
    assert artifact["kernel"] == "axpy_kernel"
    assert artifact["content_hash"] == kernel.content_hash
    assert artifact["inputs"] == [
        {"param": "x_ptr", "kind": "tensor", "shape": [1000], "dtype": "float32"},
        {"param": "y_ptr", "kind": "tensor", "shape": [1000], "dtype": "float32"},
        {"param": "out_ptr", "kind": "tensor", "shape": [1000], "dtype": "float32"},
        {"param": "n", "kind": "scalar", "value": 1000},
        {"param": "alpha", "kind": "scalar", "value": 2.0},
    ]
    assert artifact["meta"] == {"BLOCK": 256}
    assert artifact["grid"] == {"dims": [4], "spmd_axis": None, "num_cores": 1}
    traced = artifact["traced_program"]
    assert traced["pid"] == [0]
    assert (traced["bytes_loaded"], traced["bytes_stored"]) == (2 * 256 * 4, 256 * 4)
    assert traced["vector_flops"] == 2 * 256  # alpha * x, then + y
    assert [t["buffer"] for t in traced["traffic"]] == ["x_ptr", "y_ptr", "out_ptr"]
    assert dict(kernel.artifact) == artifact


def test_default_build_dir_is_a_temporary_directory():
    kernel = DeviceKernel.compile_and_load(axpy_kernel, *axpy_inputs(), grid=(4,), BLOCK=256)
    assert kernel.artifact_path.is_relative_to(Path(tempfile.gettempdir()))
    assert not kernel.artifact_path.is_relative_to(Path(__file__).resolve().parents[1])


class FakeDeviceTensor:
    """Duck-types a device tensor: a shape, a dtype with a storage type, a numel."""

    class DType:
        name = "bfloat16"
        storage = np.dtype(np.uint16)

    def __init__(self, shape):
        self.shape = shape
        self.dtype = self.DType()

    def numel(self):
        return int(np.prod(self.shape))


def test_device_tensors_are_traced_by_shape_and_storage(tmp_path):
    x = FakeDeviceTensor((8, 128))
    kernel = DeviceKernel.compile_and_load(
        elementwise_kernel, x, x, x, 1024, build_dir=tmp_path, OP="add", BLOCK=1024
    )
    spec = kernel.artifact["inputs"][0]
    assert (spec["shape"], spec["dtype"]) == ([8, 128], "bfloat16")
    assert kernel.artifact["traced_program"]["bytes_stored"] == 1024 * 2


# ----------------------------------------------------------------------------- modes


def test_no_cc_when_nothing_is_given(tmp_path):
    kernel = compile_axpy(tmp_path, axpy_inputs())
    assert (kernel.mode, kernel.cc_enabled, kernel.rank_id, kernel.world_size) == (
        "no_cc",
        False,
        None,
        None,
    )


@pytest.fixture
def no_rank_provider():
    """No rank provider registered during the test; the one before is restored after it."""
    previous = set_rank_provider(None)
    yield
    set_rank_provider(previous)


def test_without_the_distributed_layer_there_is_no_process_group(no_rank_provider):
    assert distributed_state() == DistributedState(False)


def test_mpmd_namespaces_the_build_dir_by_rank(tmp_path):
    kernel = compile_axpy(tmp_path, axpy_inputs(), is_spmd=False, rank_id=3, world_size=4)
    assert (kernel.mode, kernel.cc_enabled, kernel.rank_id, kernel.world_size) == (
        "mpmd",
        True,
        3,
        4,
    )
    assert kernel.artifact_path == tmp_path / "rank_3" / kernel.content_hash / "kernel.json"
    assert kernel.artifact_path.exists()


def test_mpmd_ranks_in_one_process_each_compile_with_the_same_hash(tmp_path):
    ranks = [
        compile_axpy(tmp_path, axpy_inputs(), is_spmd=False, rank_id=r, world_size=2)
        for r in (0, 1)
    ]
    assert ranks[0].content_hash == ranks[1].content_hash
    assert ranks[0].artifact_path != ranks[1].artifact_path
    assert stats()[0] == 2


class FakeGroup:
    """A process group of ``world_size`` ranks whose barrier is logged.

    It registers itself as the rank provider; ``no_rank_provider`` restores the one before.
    """

    def __init__(self, world_size=2):
        self.world_size = world_size
        self.log = []
        self.on_barrier = None

    def become(self, rank):
        def barrier():
            self.log.append(("barrier", rank, DeviceKernel.stats().compilations))
            if self.on_barrier is not None:
                self.on_barrier()

        state = DistributedState(True, rank, self.world_size, barrier)
        set_rank_provider(lambda: state)


def test_spmd_rank0_compiles_then_waits(tmp_path, no_rank_provider):
    group = FakeGroup()
    group.become(0)
    kernel = compile_axpy(tmp_path, axpy_inputs())
    assert (kernel.mode, kernel.cc_enabled, kernel.rank_id, kernel.world_size) == (
        "spmd",
        True,
        0,
        2,
    )
    assert group.log == [("barrier", 0, 1)]  # compiled before the barrier
    assert kernel.artifact_path == tmp_path / kernel.content_hash / "kernel.json"


def test_spmd_other_ranks_wait_then_load_rank0s_artifact(tmp_path, no_rank_provider):
    group = FakeGroup()
    inputs = axpy_inputs()

    def rank0_arrives():
        group.on_barrier = None
        group.become(0)
        group.rank0 = compile_axpy(tmp_path, inputs)

    group.on_barrier = rank0_arrives  # the artifact appears only while rank 1 waits
    group.become(1)
    kernel = compile_axpy(tmp_path, inputs)
    assert group.log == [("barrier", 1, 0), ("barrier", 0, 1)]
    assert (kernel.mode, kernel.rank_id, kernel.from_cache) == ("spmd", 1, False)
    assert kernel.artifact_path == group.rank0.artifact_path
    assert kernel.artifact["content_hash"] == group.rank0.content_hash
    assert stats() == (1, 0, 1)  # one compilation (rank 0's), one load
    x, y, out, n, alpha = inputs
    kernel(x, y, out, n, alpha)
    np.testing.assert_array_equal(out, np.float32(alpha) * x + y)


def test_spmd_rank_without_rank0s_artifact_fails_clearly(tmp_path, no_rank_provider):
    FakeGroup().become(1)
    with pytest.raises(KernelError, match="rank 0's artifact .* does not exist after the barrier"):
        compile_axpy(tmp_path, axpy_inputs())
    assert stats()[0] == 0


def test_spmd_rank0_still_waits_when_its_trace_fails(tmp_path, no_rank_provider):
    group = FakeGroup()
    group.become(0)
    with pytest.raises(KernelError, match="compile_and_load of kernel 'broken_kernel' failed"):
        DeviceKernel.compile_and_load(broken_kernel, np.zeros(4), build_dir=tmp_path, BLOCK=8)
    assert group.log == [("barrier", 0, 0)]


def test_cc_disabled_overrides_a_process_group(tmp_path, no_rank_provider):
    group = FakeGroup()
    group.become(1)
    kernel = compile_axpy(tmp_path, axpy_inputs(), cc_enabled=False)
    assert (kernel.mode, kernel.cc_enabled) == ("no_cc", False)
    assert group.log == [] and stats()[0] == 1


def test_mpmd_takes_the_rank_from_the_process_group(tmp_path, no_rank_provider):
    FakeGroup(world_size=4).become(2)
    kernel = compile_axpy(tmp_path, axpy_inputs(), is_spmd=False)
    assert (kernel.mode, kernel.rank_id, kernel.world_size) == ("mpmd", 2, 4)
    assert kernel.artifact_path.parent.parent == tmp_path / "rank_2"


def test_the_cache_key_does_not_depend_on_the_mode(tmp_path):
    no_cc = compile_axpy(tmp_path, axpy_inputs())
    mpmd = compile_axpy(tmp_path, axpy_inputs(), is_spmd=False, rank_id=0, world_size=1)
    assert no_cc.content_hash == mpmd.content_hash


# ----------------------------------------------------------------------------- errors


def test_explicit_cc_without_a_process_group_needs_mpmd(tmp_path):
    with pytest.raises(KernelError, match="'axpy_kernel'.*needs is_spmd=False"):
        compile_axpy(tmp_path, axpy_inputs(), rank_id=0, world_size=2)


def test_cc_enabled_without_ranks_or_group_is_refused(tmp_path):
    with pytest.raises(KernelError, match="cc_enabled=True needs rank_id and world_size"):
        compile_axpy(tmp_path, axpy_inputs(), cc_enabled=True, is_spmd=False)


@pytest.mark.parametrize(
    ("ranks", "message"),
    [
        ({"rank_id": 1}, "rank_id was given without world_size"),
        ({"world_size": 2}, "world_size was given without rank_id"),
        (
            {"rank_id": 4, "world_size": 4},
            r"rank_id 4 is out of range for world_size 4; valid: 0..3",
        ),
        ({"rank_id": -1, "world_size": 4}, "rank_id -1 is out of range"),
        ({"rank_id": 0, "world_size": 0}, "world_size must be positive"),
        ({"rank_id": "0", "world_size": 2}, "rank_id must be an integer"),
    ],
)
def test_bad_ranks_are_named(tmp_path, ranks, message):
    with pytest.raises(KernelError, match=f"'axpy_kernel': {message}"):
        compile_axpy(tmp_path, axpy_inputs(), is_spmd=False, **ranks)


def test_only_jit_kernels_compile(tmp_path):
    def plain(x_ptr):
        pass

    with pytest.raises(KernelError, match="'plain' is not a @jit kernel"):
        DeviceKernel.compile_and_load(plain, np.zeros(4), build_dir=tmp_path)


def test_tensors_passed_by_keyword_are_refused(tmp_path):
    x = np.zeros(4, dtype=np.float32)
    with pytest.raises(KernelError, match="tensor argument 'out_ptr' must be passed positionally"):
        DeviceKernel.compile_and_load(
            elementwise_kernel, x, x, build_dir=tmp_path, out_ptr=x, n=4, OP="add", BLOCK=4
        )


# -- with real simulated ranks ----------------------------------------------------------


@jit
def _add_ranks(x, y, out, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(
        out + offsets, tl.load(x + offsets, mask=mask) + tl.load(y + offsets, mask=mask), mask=mask
    )


def _compile_on_ranks(spmd: bool, build_dir: str):
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    dist.init_process_group()
    rank = dist.get_rank()
    a = torch.tensor(np.arange(100, dtype=np.float32) + rank)
    b, out = torch.ones(100), torch.empty(100)
    kernel = DeviceKernel.compile_and_load(
        _add_ranks, a, b, out, 100, is_spmd=spmd, build_dir=build_dir, grid=(1,), BLOCK=128
    )
    kernel(a, b, out, 100)
    return kernel.mode, str(kernel.artifact_path), out.numpy()


@pytest.mark.parametrize("spmd", [True, False], ids=["spmd", "mpmd"])
def test_compile_and_load_across_simulated_ranks(spmd, tmp_path):
    import kernbench

    clear_cache()
    result = kernbench.simulate(_compile_on_ranks, topology="multi_sip", args=(spmd, str(tmp_path)))
    stats = DeviceKernel.stats()
    for rank, (mode, path, values) in enumerate(result.returns):
        np.testing.assert_array_equal(values, np.arange(100, dtype=np.float32) + rank + 1)
        if spmd:
            assert mode == "spmd" and "rank_" not in path
        else:
            assert mode == "mpmd" and f"rank_{rank}" in path
    if spmd:  # rank 0 compiles; the three others load its artifact after a barrier
        assert (stats.compilations, stats.loads) == (1, 3)
        assert len({path for _, path, _ in result.returns}) == 1
    else:  # every rank compiles into its own directory
        assert (stats.compilations, stats.loads) == (4, 0)


# ----------------------------------------------------------------------------- artifacts as files


def _artifact_place(tmp_path) -> Path:
    """Where compiling axpy into tmp_path/"b" puts its artifact (learnt by compiling into "a")."""
    content_hash = compile_axpy(tmp_path / "a", axpy_inputs()).content_hash
    clear_cache()
    place = tmp_path / "b" / content_hash / "kernel.json"
    place.parent.mkdir(parents=True)
    return place


def test_an_artifact_target_that_is_a_link_is_refused_not_written_through(tmp_path):
    place = _artifact_place(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    place.symlink_to(victim)
    with pytest.raises(OutputFileError, match="kernel artifact target is a symbolic link"):
        compile_axpy(tmp_path / "b", axpy_inputs())
    assert place.is_symlink() and victim.read_text() == "keep me"


@pytest.mark.parametrize(
    ("kind", "error", "message"),
    [
        ("fifo", InputFileError, "kernel 'axpy_kernel''s artifact is a FIFO"),
        ("list", KernelError, "kernel.json is not a kernel artifact"),
        ("half", KernelError, "kernel.json is not a kernel artifact"),
    ],
)
def test_rank0s_artifact_that_cannot_be_read_is_an_error_not_a_hang(
    tmp_path, no_rank_provider, kind, error, message
):
    """A FIFO used to block the rank forever; a JSON list raised AttributeError."""
    place = _artifact_place(tmp_path)
    if kind == "fifo":
        os.mkfifo(place)
    else:
        place.write_text("[1]" if kind == "list" else '{"kernel": ')
    FakeGroup().become(1)

    def hung(*_):
        pytest.fail("reading rank 0's artifact hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        with pytest.raises(error, match=re.escape(message)):
            compile_axpy(tmp_path / "b", axpy_inputs())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
