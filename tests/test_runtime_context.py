"""RuntimeContext: tensors placed, filled, read back and released on the simulated machine.

Values are checked against NumPy, placements against a closed-form layout
computed here from the policy and the machine's shape, and every shard's
physical address and page-table mapping against the PE the policy names.
"""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from greenlet import greenlet

import kernbench
from kernbench.errors import (
    ConfigError,
    MemoryFaultError,
    OutOfMemoryError,
    PlacementError,
    TensorError,
)
from kernbench.memory import MemoryKind
from kernbench.placement import DPPolicy
from kernbench.runtime import DeviceTensor, RuntimeContext
from kernbench.validation import shown_value

DEFAULT = "default"
TINY = "tiny"
RING8 = "ring8"

MODES = ("replicate", "row_wise", "column_wise")
LEVELS = ("sip", "cube", "pe")
POLICIES = [DPPolicy(sip=s, cube=c, pe=p) for s, c, p in itertools.product(MODES, repeat=3)]
DTYPE_NAMES = (
    "float16",
    "bfloat16",
    "float32",
    "int8",
    "int16",
    "int32",
    "uint8",
    "uint16",
    "uint32",
)
ITEMSIZE = {
    "float16": 2,
    "bfloat16": 2,
    "float32": 4,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "uint8": 1,
    "uint16": 2,
    "uint32": 4,
}
PAGE = 4096

# default.yaml: 1 SIP, 4x4 = 16 cubes, 8 PEs per cube, 48 GB of HBM per cube in 8 slices.
DEFAULT_MACHINE = (1, 16, 8)
DEFAULT_PARTITION = 48 * 10**9 // 8
# tiny.yaml: 1 SIP, 1 cube, 4 PEs, 4 GB of HBM per cube -> 1 GB per PE.
TINY_PARTITION = 10**9
# Rows and columns both divide by 16 cubes x 8 PEs; not square, so a row/column mix-up shows.
SHAPE = (128, 256)


def policy_id(policy: DPPolicy) -> str:
    short = {"replicate": "rep", "row_wise": "row", "column_wise": "col"}
    return "-".join(f"{level}={short[getattr(policy, level)]}" for level in LEVELS)


def host_values(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values exactly representable in ``dtype``, including its extremes for integers."""
    rng = np.random.default_rng(seed)
    if dtype in ("float16", "bfloat16", "float32"):
        # Multiples of 1/8 in [-16, 16): at most 7 significant bits, exact in bfloat16.
        return (rng.integers(-128, 128, size=shape) / 8).astype(np.float32)
    info = np.iinfo(np.dtype(dtype))
    values = rng.integers(int(info.min), int(info.max), size=shape, endpoint=True)
    flat = values.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[-1] = info.min, info.max
    return values.astype(np.dtype(dtype))


def stored_form(dtype: str, values: np.ndarray) -> np.ndarray:
    """The bytes a shard of ``values`` must hold, as an array of the storage type."""
    if dtype == "bfloat16":
        # Exactly representable values: bfloat16 is the top half of the float32 bits.
        return (values.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(np.dtype(dtype))


def expected_layout(
    policy: DPPolicy, shape: tuple[int, int], machine: tuple[int, int, int]
) -> list[tuple[tuple[int, int, int], tuple[int, int], tuple[int, int], int]]:
    """Per PE, in (sip, cube, pe) order: coord, row range, column range, replica number.

    Closed form: the row_wise levels together cut dimension 0 into as many
    blocks as the product of their sizes, the member indices forming a mixed
    radix number (outer level most significant) that picks the block; the same
    for column_wise levels and the last dimension; replicate levels number the
    copies the same way.
    """
    rows, cols = shape
    out = []
    for coord in itertools.product(*(range(n) for n in machine)):
        row_block = col_block = replica = 0
        row_parts = col_parts = 1
        for level, member, size in zip(LEVELS, coord, machine, strict=True):
            mode = getattr(policy, level)
            if mode == "row_wise":
                row_block, row_parts = row_block * size + member, row_parts * size
            elif mode == "column_wise":
                col_block, col_parts = col_block * size + member, col_parts * size
            else:
                replica = replica * size + member
        height, width = rows // row_parts, cols // col_parts
        out.append(
            (
                coord,
                (row_block * height, (row_block + 1) * height),
                (col_block * width, (col_block + 1) * width),
                replica,
            )
        )
    return out


def check_placement(
    ctx: RuntimeContext,
    t: DeviceTensor,
    policy: DPPolicy,
    machine: tuple[int, int, int],
    partition: int,
    slices_per_pe: bool = True,
) -> None:
    """Every shard is where the policy says, in its PE's HBM partition, mapped at its VA.

    ``machine`` is (SIPs, cubes per SIP, PEs per cube); a policy's counts narrow it.
    """
    machine = tuple(
        getattr(policy, f"num_{level}s") or size
        for level, size in zip(LEVELS, machine, strict=True)
    )
    layout = expected_layout(policy, t.shape, machine)
    assert [(p.shard.sip, p.shard.cube, p.shard.pe) for p in t.placements] == [
        coord for coord, *_ in layout
    ]
    itemsize = ITEMSIZE[t.dtype.name]
    spans = []
    for p, (coord, (r0, r1), (c0, c1), replica) in zip(t.placements, layout, strict=True):
        sip, cube, pe = coord
        shard = p.shard
        assert [(s.start, s.stop) for s in shard.index] == [(r0, r1), (c0, c1)]
        assert shard.shape == (r1 - r0, c1 - c0)
        assert shard.replica == replica
        nbytes = (r1 - r0) * (c1 - c0) * itemsize
        assert shard.nbytes == nbytes
        assert p.pe_name == f"sip{sip}.cube{cube}.pe{pe}"
        # Physical address: in the owning PE's partition of its cube's HBM.
        pa = p.pa
        assert (pa.rack, pa.sip, pa.cube, pa.pe, pa.kind) == (0, sip, cube, pe, MemoryKind.HBM)
        assert pe * partition <= pa.offset
        assert pa.offset + nbytes <= (pe + 1) * partition
        if slices_per_pe:  # as many HBM slices as PEs: PE p's partition is slice p
            assert p.memory_node == f"sip{sip}.cube{cube}.hbm{pe}"
        # Virtual address: page aligned, and the PE's MMU maps it onto the shard.
        assert p.va % PAGE == 0
        table = ctx.machine.page_table(p.pe_name)
        assert table.translate(p.va, nbytes) == [(pa, nbytes)]
        spans.append((p.va, p.va + nbytes))
    spans.sort()
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, "two shards of one tensor share virtual addresses"


def check_shard_bytes(ctx: RuntimeContext, t: DeviceTensor, values: np.ndarray) -> None:
    """Every shard, replicas included, holds exactly its block of ``values``."""
    name = t.dtype.name
    storage = stored_form(name, values)
    for p in t.placements:
        raw = ctx.store.read(p.pa, p.shard.nbytes)
        held = raw.view(storage.dtype).reshape(p.shard.shape)
        np.testing.assert_array_equal(held, storage[p.shard.index], err_msg=p.pe_name)


def round_trip(ctx: RuntimeContext, policy: DPPolicy, dtype: str, seed: int) -> None:
    values = host_values(dtype, SHAPE, seed)
    host = ctx.from_numpy(values, dtype)
    t = ctx.zeros(SHAPE, dtype, dp=policy)
    try:
        assert t.shape == SHAPE
        assert t.dtype.name == dtype
        check_placement(ctx, t, policy, DEFAULT_MACHINE, DEFAULT_PARTITION)
        t.copy_(host)
        check_shard_bytes(ctx, t, values)
        out = t.numpy()
        expected_type = np.float32 if dtype == "bfloat16" else np.dtype(dtype)
        assert out.dtype == expected_type
        assert out.shape == SHAPE
        np.testing.assert_array_equal(out, values.astype(expected_type))
    finally:
        t.free()
    assert ctx.memory.used_bytes() == 0


# -- round trip on default.yaml -------------------------------------------------------


@pytest.fixture(scope="module")
def default_ctx():
    ctx = RuntimeContext(DEFAULT)
    yield ctx
    ctx.cleanup()


@pytest.mark.parametrize(
    ("policy", "dtype"),
    [(policy, DTYPE_NAMES[i % len(DTYPE_NAMES)]) for i, policy in enumerate(POLICIES)],
    ids=[
        f"{policy_id(policy)}-{DTYPE_NAMES[i % len(DTYPE_NAMES)]}"
        for i, policy in enumerate(POLICIES)
    ],
)
def test_round_trip_every_policy(default_ctx: RuntimeContext, policy: DPPolicy, dtype: str):
    """All 27 policies, the nine dtypes spread over them (each dtype on three policies)."""
    round_trip(default_ctx, policy, dtype, seed=POLICIES.index(policy))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_round_trip_every_dtype_on_one_pe(default_ctx: RuntimeContext, dtype: str):
    round_trip(default_ctx, DPPolicy(num_sips=1, num_cubes=1, num_pes=1), dtype, seed=7)


@pytest.mark.parametrize("policy", POLICIES, ids=policy_id)
def test_round_trip_every_policy_and_dtype(default_ctx: RuntimeContext, policy: DPPolicy):
    """The full 27 policies x 9 dtypes matrix."""
    for i, dtype in enumerate(DTYPE_NAMES):
        round_trip(default_ctx, policy, dtype, seed=i)


@pytest.mark.parametrize(
    "policy",
    [
        DPPolicy(sip="row_wise"),
        DPPolicy(sip="column_wise"),
        DPPolicy(sip="replicate"),
        DPPolicy(sip="row_wise", num_sips=4),
    ],
    ids=["row", "col", "rep", "row-x4"],
)
def test_sip_level_placement_on_a_multi_sip_machine(policy: DPPolicy):
    """ring8.yaml has 8 SIPs of one cube of one PE: the SIP level really splits."""
    ctx = RuntimeContext(RING8)
    values = host_values("int16", (16, 24), seed=3)
    t = ctx.zeros((16, 24), "int16", dp=policy)
    check_placement(ctx, t, policy, (8, 1, 1), 16 * 10**9)
    t.copy_(values)
    check_shard_bytes(ctx, t, values)
    np.testing.assert_array_equal(t.numpy(), values)
    ctx.cleanup()
    assert ctx.memory.used_bytes() == 0


def test_a_shard_is_mapped_in_every_pe_of_its_cube_only():
    ctx = RuntimeContext(DEFAULT)
    t = ctx.empty((16, 8), "float32", dp=DPPolicy(cube="row_wise", num_cubes=2, num_pes=1))
    assert [p.pe_name for p in t.placements] == ["sip0.cube0.pe0", "sip0.cube1.pe0"]
    for p in t.placements:
        for pe in range(8):
            table = ctx.machine.page_table(f"sip0.cube{p.shard.cube}.pe{pe}")
            assert table.translate(p.va, p.shard.nbytes) == [(p.pa, p.shard.nbytes)]
        with pytest.raises(MemoryFaultError, match="page fault"):
            ctx.machine.page_table("sip0.cube2.pe0").translate(p.va, p.shard.nbytes)


def test_zeros_reads_back_zeros_in_memory_a_freed_tensor_had_written():
    ctx = RuntimeContext(TINY)
    dp = DPPolicy(pe="row_wise")
    first = ctx.zeros((8, 16), "int32", dp=dp)
    first.copy_(np.full((8, 16), -1, dtype=np.int32))
    addresses = [p.pa for p in first.placements]
    first.free()
    second = ctx.zeros((8, 16), "int32", dp=dp)
    assert [p.pa for p in second.placements] == addresses  # the same memory, reused
    np.testing.assert_array_equal(second.numpy(), np.zeros((8, 16), dtype=np.int32))


def test_copy_from_another_device_tensor_and_converting_dtypes():
    ctx = RuntimeContext(TINY)
    values = host_values("float32", (8, 12), seed=1)
    src = ctx.zeros((8, 12), "float32", dp=DPPolicy(pe="row_wise"))
    src.copy_(values)
    dst = ctx.zeros((8, 12), "bfloat16", dp=DPPolicy(pe="column_wise"))
    dst.copy_(src)
    np.testing.assert_array_equal(dst.numpy(), values)
    check_shard_bytes(ctx, dst, values)
    # A host tensor of another dtype is converted to the tensor's dtype.
    ints = ctx.zeros((8, 12), "int16")
    ints.copy_(ctx.from_numpy(np.arange(96, dtype=np.float32).reshape(8, 12)))
    np.testing.assert_array_equal(ints.numpy(), np.arange(96, dtype=np.int16).reshape(8, 12))
    assert ints.numpy().dtype == np.int16


def test_empty_tensor_dimension_round_trips():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((0, 8), "int16", dp=DPPolicy(pe="row_wise"))
    assert all(p.pa is None for p in t.placements)
    t.copy_(np.zeros((0, 8), dtype=np.int16))
    out = t.numpy()
    assert out.shape == (0, 8) and out.dtype == np.int16
    t.free()
    assert ctx.memory.used_bytes() == 0


def test_zero_dimensional_tensor_reads_back_as_zero_dimensional():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((), "float32")
    out = t.numpy()
    assert out.shape == () and out == 0


def test_zero_dimensional_tensor_round_trips():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((), "float32")
    t.copy_(np.array(2.5, dtype=np.float32))
    assert t.numpy().shape == ()
    assert t.numpy() == np.float32(2.5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_from_numpy_keeps_a_zero_dimensional_shape(dtype: str):
    ctx = RuntimeContext(TINY)
    host = ctx.from_numpy(np.array(2.5, dtype=np.float32), dtype)
    assert host.shape == ()
    assert host.numpy().shape == ()


# -- memory: out of memory, free, cleanup ---------------------------------------------


def test_out_of_memory_names_the_tensor_and_leaves_the_machine_as_it_was():
    ctx = RuntimeContext(TINY)
    values = np.arange(32, dtype=np.int32).reshape(4, 8)
    small = ctx.zeros((4, 8), "int32", name="small")
    small.copy_(values)
    used, va_used, segments = ctx.memory.used_bytes(), ctx.va.used, ctx.store.segment_count
    now, rows = ctx.now, len(ctx.trace)
    too_big = 1000 * 250_001 * 4  # 1_000_004_000 B > the 1 GB partition of one PE
    with pytest.raises(OutOfMemoryError) as info:
        ctx.zeros((1000, 250_001), "float32", name="huge")
    message = str(info.value)
    assert "'huge'" in message
    assert "(1000, 250001)" in message and "float32" in message
    assert f"{too_big} B" in message  # what was asked for
    assert "sip0.cube0.pe0 HBM partition" in message
    assert "capacity 1GB" in message and "in use 256B" in message  # what is there
    assert "largest free block" in message
    assert ctx.memory.used_bytes() == used
    assert ctx.va.used == va_used
    assert ctx.store.segment_count == segments
    assert (ctx.now, len(ctx.trace)) == (now, rows)  # nothing was sent
    np.testing.assert_array_equal(small.numpy(), values)


def test_out_of_memory_on_a_later_shard_gives_back_the_earlier_shards():
    ctx = RuntimeContext(TINY, overrides=["system.device_level=pe"])
    ctx.set_device(3)
    small = ctx.zeros((4, 8), "int32", name="small")  # fills 256 B of pe3's partition
    assert [p.pe_name for p in small.placements] == ["sip0.cube0.pe3"]
    small.copy_(np.arange(32, dtype=np.int32).reshape(4, 8))
    used = ctx.memory.used_bytes()
    whole = TINY_PARTITION // 4  # float32 elements filling one partition exactly
    with pytest.raises(OutOfMemoryError, match=r"'replicated'.*sip0\.cube0\.pe3 HBM partition"):
        # pe0, pe1 and pe2 have room; pe3 comes last and does not.
        ctx.empty((whole,), "float32", dp=DPPolicy(num_pes=4), name="replicated")
    assert ctx.memory.used_bytes() == used
    # No shard leaked: the first three partitions are still wholly free.
    full = ctx.empty((whole,), "float32", dp=DPPolicy(num_pes=3), name="full")
    assert [p.pe_name for p in full.placements] == [f"sip0.cube0.pe{i}" for i in range(3)]
    np.testing.assert_array_equal(small.numpy(), np.arange(32, dtype=np.int32).reshape(4, 8))


def test_use_after_free_and_double_free_are_tensor_errors():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((4, 8), "float32", name="gone")
    other = ctx.zeros((4, 8), "float32", name="other")
    t.free()
    assert t.is_freed
    freed = re.escape("tensor 'gone' was freed; it can no longer be used")
    with pytest.raises(TensorError, match=freed):
        t.numpy()
    with pytest.raises(TensorError, match=freed):
        t.copy_(np.zeros((4, 8), dtype=np.float32))
    with pytest.raises(TensorError, match=freed):
        other.copy_(t)  # a freed tensor as the source
    with pytest.raises(TensorError, match=freed):
        _ = t.placements
    with pytest.raises(
        TensorError, match=re.escape("tensor 'gone' was already freed (double free)")
    ):
        t.free()
    np.testing.assert_array_equal(other.numpy(), np.zeros((4, 8), dtype=np.float32))


def test_free_returns_memory_and_unmaps_now():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((64, 64), "float32", dp=DPPolicy(pe="column_wise"))
    shards = [(p.pe_name, p.va, p.shard.nbytes) for p in t.placements]
    assert ctx.memory.used_bytes() == 64 * 64 * 4
    t.free()
    assert ctx.memory.used_bytes() == 0
    assert ctx.va.used == 0
    assert ctx.store.segment_count == 0
    for pe_name, va, nbytes in shards:
        with pytest.raises(MemoryFaultError, match="page fault"):
            ctx.machine.page_table(pe_name).translate(va, nbytes)
    assert [row.kind for row in ctx.trace if row.tag == t.name][-1] == "mmu_unmap"


def test_cleanup_returns_all_memory_and_unmaps_everything():
    ctx = RuntimeContext(TINY)
    tensors = [
        ctx.zeros((8, 8), "int8"),
        ctx.zeros((16, 32), "float32", dp=DPPolicy(pe="row_wise")),
        ctx.empty((4, 1000), "bfloat16", dp=DPPolicy()),  # replicated on all 4 PEs
    ]
    tensors[1].copy_(np.ones((16, 32), dtype=np.float32))
    shards = [(p.pe_name, p.va, p.shard.nbytes) for t in tensors for p in t.placements]
    assert ctx.memory.used_bytes() > 0
    ctx.cleanup()
    assert ctx.memory.used_bytes() == 0
    assert ctx.va.used == 0
    assert ctx.store.segment_count == 0
    for pe_name, va, nbytes in shards:
        with pytest.raises(MemoryFaultError, match="page fault"):
            ctx.machine.page_table(pe_name).translate(va, nbytes)
    for t in tensors:
        assert t.is_freed
        with pytest.raises(TensorError, match="was freed"):
            t.numpy()
    ctx.cleanup()  # a second cleanup has nothing left to do
    assert ctx.memory.used_bytes() == 0


def test_context_manager_cleans_up():
    with RuntimeContext(TINY) as ctx:
        kept = ctx.zeros((8, 8), "float32", dp=DPPolicy(pe="row_wise"))
        assert ctx.memory.used_bytes() > 0
    assert ctx.memory.used_bytes() == 0
    assert kept.is_freed


def test_a_dropped_tensor_is_freed_before_the_next_one_is_made():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((64, 64), "float32")  # 16 KiB: four pages
    pe_name, va, nbytes = t.placements[0].pe_name, t.va_base, t.nbytes
    assert ctx.memory.used_bytes() == nbytes
    del t
    keep = ctx.zeros((4, 4), "float32")
    assert ctx.memory.used_bytes() == 256  # only the new tensor (4x4x4 B, rounded to 256)
    assert ctx.va.used == PAGE
    table = ctx.machine.page_table(pe_name)
    with pytest.raises(MemoryFaultError, match="page fault"):
        table.translate(va, nbytes)
    # The new tensor may reuse the first page; then it maps to the new tensor's memory.
    new = keep.placements[0]
    assert table.translate(new.va, 64) == [(new.pa, 64)]
    assert not keep.is_freed


def test_a_dropped_tensor_gives_its_memory_back_at_once():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((64, 64), "float32", dp=DPPolicy(pe="row_wise"))
    t.copy_(np.ones((64, 64), dtype=np.float32))
    assert (ctx.memory.used_bytes(), ctx.store.segment_count) == (64 * 64 * 4, 4)
    del t
    assert (ctx.memory.used_bytes(), ctx.store.segment_count) == (0, 0)
    assert ctx.va.used == 4 * PAGE  # unmapped (timed messages) before the next tensor is made
    keep = ctx.zeros(1)
    assert ctx.va.used == PAGE
    assert not keep.is_freed


def test_a_tensor_dropped_while_memory_is_being_changed_waits_for_the_next_drain():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((64, 64), "float32")
    with ctx._changing_memory():  # as when a garbage collection runs inside an allocation
        del t
        assert ctx.memory.used_bytes() == 64 * 64 * 4
    keep = ctx.zeros(1)
    assert ctx.memory.used_bytes() == 256
    assert not keep.is_freed


def test_a_dropped_tensor_is_freed_by_cleanup():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((32, 32), "float32")
    del t
    ctx.cleanup()
    assert ctx.memory.used_bytes() == 0
    assert ctx.va.used == 0


# -- errors --------------------------------------------------------------------------


def test_copy_with_a_mismatched_shape_is_a_tensor_error():
    ctx = RuntimeContext(TINY)
    t = ctx.zeros((4, 8), "float32", name="dst")
    expected = re.escape(
        "copy_ into tensor 'dst': source shape (8, 4) does not match the tensor's shape (4, 8)"
    )
    with pytest.raises(TensorError, match=expected):
        t.copy_(np.zeros((8, 4), dtype=np.float32))
    with pytest.raises(TensorError, match=expected):
        t.copy_(ctx.from_numpy(np.zeros((8, 4), dtype=np.float32)))
    with pytest.raises(TensorError, match=expected):
        t.copy_(ctx.zeros((8, 4), "float32"))
    np.testing.assert_array_equal(t.numpy(), np.zeros((4, 8), dtype=np.float32))


VALID_DTYPES = (
    "valid: float16, bfloat16, float32, float64, int8, int16, int32, int64, uint8, uint16, "
    "uint32, uint64, bool"
)


@pytest.mark.parametrize("bad", ["float128", "nope", "complex64", "int4"])
def test_bad_dtype_name_lists_the_valid_dtypes(bad: str):
    ctx = RuntimeContext(TINY)
    with pytest.raises(TensorError, match=re.escape(f"unsupported dtype '{bad}'; {VALID_DTYPES}")):
        ctx.zeros((2, 2), bad)
    assert ctx.memory.used_bytes() == 0


def test_from_numpy_of_an_unsupported_dtype_lists_the_valid_dtypes():
    ctx = RuntimeContext(TINY)
    with pytest.raises(TensorError, match=re.escape(VALID_DTYPES)):
        ctx.from_numpy(np.zeros(3, dtype=np.complex64))


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("bf16", "bfloat16"), ("half", "float16"), ("f32", "float32"), ("u8", "uint8")],
)
def test_dtype_aliases(name: str, dtype: str):
    ctx = RuntimeContext(TINY)
    assert ctx.zeros((2,), name).dtype.name == dtype
    assert ctx.zeros((2,), np.dtype(dtype) if dtype != "bfloat16" else dtype).dtype.name == dtype


@pytest.mark.parametrize(
    ("shape", "policy", "fragments"),
    [
        (
            (6, 8),
            DPPolicy(pe="row_wise"),
            ["pe='row_wise'", "4 PEs", "dimension 0 has size 6", "num_pes", "multiple of 4"],
        ),
        (
            (8, 6),
            DPPolicy(pe="column_wise"),
            ["pe='column_wise'", "4 PEs", "dimension 1 has size 6", "num_pes", "multiple of 4"],
        ),
        (
            (8, 3),
            DPPolicy(pe="column_wise", num_pes=2),
            ["over 2 PEs", "dimension 1 has size 3", "not split into 2 equal parts"],
        ),
    ],
)
def test_a_placement_that_does_not_divide_is_a_placement_error(shape, policy, fragments):
    ctx = RuntimeContext(TINY)
    with pytest.raises(PlacementError) as info:
        ctx.zeros(shape, "float32", dp=policy)
    for fragment in fragments:
        assert fragment in str(info.value)
    assert ctx.memory.used_bytes() == 0
    assert ctx.trace == []


def test_a_placement_that_does_not_divide_across_cubes_names_the_outer_split():
    ctx = RuntimeContext(DEFAULT)
    with pytest.raises(PlacementError) as info:
        ctx.zeros((32, 8), "float32", dp=DPPolicy(cube="row_wise", pe="row_wise"))
    message = str(info.value)
    assert "pe='row_wise' over 8 PEs" in message
    assert "dimension 0 has size 32, 2 per block after cube='row_wise' x16" in message
    assert "multiple of 128" in message


def test_set_device_out_of_range_names_the_valid_range():
    ctx = RuntimeContext(DEFAULT)  # device level sip: one device
    with pytest.raises(PlacementError, match=re.escape("(valid: 0..0)")):
        ctx.set_device(1)
    pes = RuntimeContext(TINY, overrides=["system.device_level=pe"])
    for device in (4, -1):
        with pytest.raises(
            PlacementError,
            match=re.escape(
                f"device {device} does not exist: this machine has 4 devices at level 'pe' "
                "(valid: 0..3)"
            ),
        ):
            pes.set_device(device)
    with pytest.raises(PlacementError, match="must be an int"):
        pes.set_device("1")
    assert pes.current_device() is None


def test_set_device_places_new_tensors_on_that_device_per_rank():
    ctx = RuntimeContext(TINY, overrides=["system.device_level=pe"])
    seen = {}

    def rank(device: int) -> None:
        ctx.set_device(device)
        seen[device] = ctx.zeros((4, 4), "float32").placements[0].pe_name

    for device in (2, 1):
        greenlet(rank).switch(device)
    assert seen == {2: "sip0.cube0.pe2", 1: "sip0.cube0.pe1"}
    assert ctx.current_device() is None  # the main greenlet never chose one


def test_a_device_at_cube_level_keeps_replicated_levels_inside_it():
    ctx = RuntimeContext(DEFAULT, overrides=["system.device_level=cube"])
    assert ctx.num_devices == 16
    ctx.set_device(5)
    split = ctx.empty((16, 8), "float32", dp=DPPolicy(pe="row_wise"))
    assert [p.pe_name for p in split.placements] == [f"sip0.cube5.pe{i}" for i in range(8)]
    whole = ctx.empty((16, 8), "float32")
    assert [p.pe_name for p in whole.placements] == ["sip0.cube5.pe0"]
    # A level that splits spans the machine, whatever the current device.
    spread = ctx.empty((16, 8), "float32", dp=DPPolicy(cube="row_wise", num_pes=1))
    assert [p.pe_name for p in spread.placements] == [f"sip0.cube{c}.pe0" for c in range(16)]


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        ((2, -1), "shape (2, -1): dimension 1 is -1; dimensions are non-negative ints"),
        ((2, 1.5), "shape (2, 1.5): dimension 1 is 1.5; dimensions are non-negative ints"),
    ],
)
def test_a_bad_shape_is_a_tensor_error(shape, message):
    ctx = RuntimeContext(TINY)
    with pytest.raises(TensorError, match=re.escape(message)):
        ctx.zeros(shape, "float32")


def test_dp_must_be_a_policy():
    ctx = RuntimeContext(TINY)
    with pytest.raises(PlacementError, match=re.escape("dp must be a DPPolicy (got str)")):
        ctx.zeros((4, 4), "float32", dp="row_wise")


def test_copied_in_shards_are_the_stores_own_and_replicas_independent():
    """copy_ hands each fresh shard to the store (no second copy); the store's
    bytes share memory with neither the caller's array nor another replica."""
    ctx = RuntimeContext(TINY)
    values = host_values("float32", (8, 12), seed=3)
    source = values.copy()
    t = ctx.zeros((8, 12), "float32", dp=DPPolicy(pe="replicate"))
    t.copy_(source)
    source[:] = 0  # the caller's array is not the tensor's memory
    check_shard_bytes(ctx, t, values)
    first, *others = t.placements
    assert others  # replicated on every PE of the cube
    ctx.store.view(first.pa, first.shard.nbytes)[:] = 0
    for p in others:
        held = ctx.store.read(p.pa, p.shard.nbytes).view(np.float32).reshape(8, 12)
        np.testing.assert_array_equal(held, values, err_msg=p.pe_name)


@pytest.mark.parametrize("flag", ["no", None, 1, [True]])
def test_timing_only_takes_only_true_or_false(flag):
    """ "no" used to be true (a timing-only run, reported as timing_only: "no")."""
    message = f"timing_only must be True or False (got {shown_value(flag)})"
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        RuntimeContext("tiny", timing_only=flag)
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}$"):
        kernbench.simulate(lambda: None, topology="tiny", timing_only=flag)
    assert RuntimeContext("tiny", timing_only=np.bool_(True)).timing_only is True
