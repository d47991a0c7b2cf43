"""Triton's atomics in ``tl``: old values, final memory, types, memory orders, costs.

Each atomic is checked against a NumPy loop that applies the lanes one at a time in
lane order (what one atomic a lane does when lanes hit one element), with repeated
elements and masks.  Errors are checked by type and message.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernBenchError, KernelError
from kernbench.kernels import atomics, jit
from kernbench.runtime import RuntimeContext, use_context


@jit
def _rmw_kernel(mem_ptr, at_ptr, val_ptr, keep_ptr, old_ptr, N: tl.constexpr, OP: tl.constexpr):
    lanes = tl.arange(0, N)
    pointer = mem_ptr + tl.load(at_ptr + lanes)
    val = tl.load(val_ptr + lanes)
    keep = tl.load(keep_ptr + lanes) != 0
    old = getattr(tl, f"atomic_{OP}")(pointer, val, mask=keep)
    tl.store(old_ptr + lanes, old, mask=keep)


@jit
def _cas_kernel(mem_ptr, at_ptr, cmp_ptr, val_ptr, old_ptr, N: tl.constexpr):
    lanes = tl.arange(0, N)
    old = tl.atomic_cas(
        mem_ptr + tl.load(at_ptr + lanes), tl.load(cmp_ptr + lanes), tl.load(val_ptr + lanes)
    )
    tl.store(old_ptr + lanes, old)


def _float_key(v):
    """Order of floats with -0.0 below +0.0 (what Triton's bit compares give)."""
    return (float(v), bool(np.signbit(v)) is False)


_PYTHON_OPS = {
    "xchg": lambda old, v: v,
    "max": lambda old, v: (
        max(old, v, key=_float_key) if isinstance(old, np.floating) else max(old, v)
    ),
    "min": lambda old, v: (
        min(old, v, key=_float_key) if isinstance(old, np.floating) else min(old, v)
    ),
    "and": lambda old, v: old & v,
    "or": lambda old, v: old | v,
    "xor": lambda old, v: old ^ v,
}


def _lane_by_lane(op, memory, at, values, keep):
    memory, old = memory.copy(), np.zeros(len(at), dtype=memory.dtype)
    for lane, (i, v) in enumerate(zip(at, values, strict=True)):
        if keep[lane]:
            old[lane] = memory[i]
            memory[i] = _PYTHON_OPS[op](memory[i], v)
    return memory, old


def _run(op, memory, at, values, keep):
    memory, old = memory.copy(), np.zeros(len(at), dtype=memory.dtype)
    _rmw_kernel[(1,)](memory, at, values, keep.astype(np.int8), old, N=len(at), OP=op)
    return memory, old


_AT = np.array([3, 0, 3, 1, 3, 0, 5, 3], dtype=np.int32)  # element 3 four times, 0 twice
_KEEP = np.array([1, 1, 1, 1, 0, 1, 1, 1], dtype=bool)  # lane 4 (element 3) masked off


@pytest.mark.parametrize("op", ["xchg", "max", "min", "and", "or", "xor"])
@pytest.mark.parametrize("np_dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_integer_atomics_apply_lanes_in_order_and_return_each_lanes_old_value(op, np_dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(np_dtype)
    low = max(info.min, -(2**40))
    memory = rng.integers(low, min(info.max, 2**40), 6, dtype=np.int64).astype(np_dtype)
    values = rng.integers(low, min(info.max, 2**40), _AT.size, dtype=np.int64).astype(np_dtype)
    got_memory, got_old = _run(op, memory, _AT, values, _KEEP)
    want_memory, want_old = _lane_by_lane(op, memory, _AT, values, _KEEP)
    np.testing.assert_array_equal(got_memory, want_memory)
    np.testing.assert_array_equal(got_old[_KEEP], want_old[_KEEP])
    assert got_memory[2] == memory[2] and got_memory[4] == memory[4]  # no lane hit them


def test_unsigned_max_and_min_compare_without_sign():
    memory = np.array([1, 2**31], dtype=np.uint32)
    at = np.array([0, 1], dtype=np.int32)
    values = np.array([2**32 - 1, 5], dtype=np.uint32)
    keep = np.ones(2, dtype=bool)
    np.testing.assert_array_equal(_run("max", memory, at, values, keep)[0], [2**32 - 1, 2**31])
    np.testing.assert_array_equal(_run("min", memory, at, values, keep)[0], [1, 5])


@pytest.mark.parametrize("op", ["xchg", "max", "min"])
@pytest.mark.parametrize("np_dtype", [np.float32, np.float64])
def test_float_atomics_in_lane_order(op, np_dtype):
    memory = np.array([1.5, -2.0, 0.0, -0.0, 7.0, -3.25], dtype=np_dtype)
    values = np.array([-0.5, 3.0, 2.5, -0.0, 9.0, -7.5, 0.25, 4.0], dtype=np_dtype)
    got_memory, got_old = _run(op, memory, _AT, values, _KEEP)
    want_memory, want_old = _lane_by_lane(op, memory, _AT, values, _KEEP)
    np.testing.assert_array_equal(got_memory, want_memory)
    np.testing.assert_array_equal(np.signbit(got_memory), np.signbit(want_memory))
    np.testing.assert_array_equal(got_old[_KEEP], want_old[_KEEP])


def test_float_max_and_min_order_signed_zeros_and_nans_as_compiled_triton():
    at = np.arange(4, dtype=np.int32)
    keep = np.ones(4, dtype=bool)
    memory = np.array([-0.0, 0.0, 1.0, -1.0], dtype=np.float32)
    values = np.array([0.0, -0.0, np.nan, -np.nan], dtype=np.float32)
    largest, _ = _run("max", memory, at, values, keep)
    assert list(np.signbit(largest[:2])) == [False, False]  # +0.0 is above -0.0
    assert np.isnan(largest[2])  # a NaN with its sign bit clear wins a max
    assert largest[3] == -1.0  # one with it set loses
    smallest, _ = _run("min", memory, at, values, keep)
    assert list(np.signbit(smallest[:2])) == [True, True]
    assert smallest[2] == 1.0 and np.isnan(smallest[3])


@pytest.mark.parametrize("np_dtype", [np.int32, np.int64, np.float32, np.float16, np.int16])
def test_cas_swaps_where_the_element_equals_cmp_lane_after_lane(np_dtype):
    memory = np.array([0, 7, 3], dtype=np_dtype)
    at = np.array([0, 0, 1, 0, 2, 1, 2, 0], dtype=np.int32)
    cmp = np.array([0, 5, 6, 9, 3, 7, 2, 4], dtype=np_dtype)
    val = np.array([5, 9, 1, 4, 2, 8, 6, 1], dtype=np_dtype)
    old = np.zeros(8, dtype=np_dtype)
    _cas_kernel[(1,)](memory, at, cmp, val, old, N=8)
    # element 0: 0 -> 5 -> 9 -> 4 -> 1 (lanes 0, 1, 3, 7); element 1 keeps 7 against
    # cmp 6 (lane 2), then lane 5 swaps 7 -> 8; element 2: 3 -> 2 -> 6 (lanes 4, 6)
    np.testing.assert_array_equal(memory, np.array([1, 8, 6], dtype=np_dtype))
    np.testing.assert_array_equal(old, np.array([0, 5, 7, 9, 3, 7, 2, 4], dtype=np_dtype))


def test_cas_compares_bits_so_a_nan_matches_itself_and_zeros_differ():
    memory = np.array([np.nan, 0.0], dtype=np.float32)
    at = np.array([0, 1], dtype=np.int32)
    cmp = np.array([np.nan, -0.0], dtype=np.float32)
    val = np.array([1.0, 2.0], dtype=np.float32)
    old = np.zeros(2, dtype=np.float32)
    _cas_kernel[(1,)](memory, at, cmp, val, old, N=2)
    assert memory[0] == 1.0 and memory[1] == 0.0


@jit
def _scalar_kernel(lock_ptr, count_ptr, out_ptr):
    first = tl.atomic_cas(lock_ptr, 0, 1)
    second = tl.atomic_cas(lock_ptr, 0, 1)
    tl.atomic_xchg(lock_ptr, 0)
    tl.store(out_ptr, first)
    tl.store(out_ptr + 1, second)
    tl.store(out_ptr + 2, tl.atomic_xchg(count_ptr, 7))
    tl.store(out_ptr + 3, tl.atomic_max(count_ptr, 3))


def test_scalar_pointers_and_python_numbers_as_the_tutorial_writes_them():
    lock, count = np.zeros(1, dtype=np.int32), np.full(1, 2, dtype=np.int32)
    out = np.zeros(4, dtype=np.int32)
    _scalar_kernel[(1,)](lock, count, out)
    np.testing.assert_array_equal(out, [0, 1, 2, 7])
    assert lock[0] == 0 and count[0] == 7


@jit
def _typed_kernel(mem_ptr, OP: tl.constexpr, SEM: tl.constexpr, SCOPE: tl.constexpr):
    pointer = mem_ptr + tl.arange(0, 2)
    if OP == "cas":
        tl.atomic_cas(pointer, 0, 1, sem=SEM, scope=SCOPE)
    else:
        getattr(tl, f"atomic_{OP}")(pointer, 1, sem=SEM, scope=SCOPE)


@pytest.mark.parametrize(
    ("op", "np_dtype", "message"),
    [
        ("and", np.float32, "tl.atomic_and takes integer elements, got tl.float32"),
        ("xor", np.float64, "tl.atomic_xor takes integer elements"),
        ("max", np.float16, r"tl.atomic_max does not take tl.float16 elements .*only atomic_add"),
        ("xchg", np.int8, "tl.atomic_xchg does not take tl.int8 elements"),
        ("min", np.int16, "tl.atomic_min does not take tl.int16 elements"),
        ("or", np.uint8, "tl.atomic_or does not take tl.uint8 elements"),
        ("cas", np.int8, r"tl.atomic_cas takes elements of 16, 32 or 64 bits .*got tl.int8"),
        ("cas", np.bool_, "tl.atomic_cas takes elements of 16, 32 or 64 bits"),
    ],
)
def test_element_types_triton_refuses_are_refused(op, np_dtype, message):
    with pytest.raises(KernelError, match=message):
        _typed_kernel[(1,)](np.zeros(2, dtype=np_dtype), OP=op, SEM=None, SCOPE=None)


@pytest.mark.parametrize("op", ["add", "cas", "xchg", "max", "min", "and", "or", "xor"])
def test_memory_orders_triton_knows_are_taken(op):
    for sem in (None, "acquire", "release", "acq_rel", "relaxed"):
        for scope in (None, "gpu", "cta", "sys"):
            _typed_kernel[(1,)](np.zeros(2, dtype=np.int32), OP=op, SEM=sem, SCOPE=scope)


@pytest.mark.parametrize("op", ["add", "cas", "xchg", "max", "and"])
def test_bad_sem_and_scope_are_refused_naming_the_valid_ones(op):
    memory = np.zeros(2, dtype=np.int32)
    with pytest.raises(KernelError) as raised:
        _typed_kernel[(1,)](memory, OP=op, SEM="seq_cst", SCOPE=None)
    assert isinstance(raised.value, KernBenchError)
    assert f"tl.atomic_{op} sem='seq_cst' is not a memory semantic; use one of 'acquire', " in (
        str(raised.value)
    )
    assert "'acq_rel', 'relaxed' (or None for acq_rel)" in str(raised.value)
    with pytest.raises(KernelError, match=r"scope='device' is not a memory scope; use one of "
                       r"'gpu', 'cta', 'sys' \(or None for gpu\)"):  # fmt: skip
        _typed_kernel[(1,)](memory, OP=op, SEM="relaxed", SCOPE="device")
    np.testing.assert_array_equal(memory, [0, 0])  # refused before touching memory


@pytest.mark.parametrize("op", ["xchg", "max", "or"])
def test_out_of_bounds_lanes_raise_as_atomic_add_does(op):
    memory = np.zeros(4, dtype=np.int32)
    at = np.array([0, 4, 1, -1], dtype=np.int32)
    values = np.ones(4, dtype=np.int32)
    keep = np.ones(4, dtype=np.int8)
    with pytest.raises(KernelError, match=rf"tl.atomic_{op} of buffer 'mem_ptr' .* at element "
                       r"offset 4 is out of bounds \[0, 4\) \(2 of 4 lanes out of bounds\); "
                       r"pass a mask"):  # fmt: skip
        _rmw_kernel[(1,)](memory, at, values, keep, np.zeros(4, np.int32), N=4, OP=op)
    keep[[1, 3]] = 0  # masked off, the same lanes are not touched
    _rmw_kernel[(1,)](memory, at, values, keep, np.zeros(4, np.int32), N=4, OP=op)


@jit
def _cost_kernel(mem_ptr, at_ptr, N: tl.constexpr, OP: tl.constexpr):
    lanes = tl.arange(0, N)
    getattr(tl, f"atomic_{OP}")(mem_ptr + tl.load(at_ptr + lanes), 1, mask=lanes < N - 1)


@pytest.mark.parametrize("op", ["xchg", "max", "min", "and", "or", "xor"])
def test_atomics_cost_what_atomic_add_costs(op):
    at = np.array([0, 2, 2, 1, 3, 0, 1, 1], dtype=np.int32)
    add = _cost_kernel[(1,)](np.zeros(4, np.int32), at, N=8, OP="add").programs[0]
    other = _cost_kernel[(1,)](np.zeros(4, np.int32), at, N=8, OP=op).programs[0]
    assert other == add
    mem = next(t for t in add.traffic if t.buffer == "mem_ptr")
    assert (mem.loads, mem.stores, mem.bytes_loaded, mem.bytes_stored) == (1, 1, 28, 28)


def test_cas_costs_what_atomic_add_costs_on_the_same_lanes():
    @jit
    def one(mem_ptr, CAS: tl.constexpr):
        pointer = mem_ptr + tl.arange(0, 4)
        if CAS:
            tl.atomic_cas(pointer, 0, 1)
        else:
            tl.atomic_add(pointer, 1)

    memory = np.zeros(4, np.float32)
    assert one[(1,)](memory, CAS=True).programs[0] == one[(1,)](memory, CAS=False).programs[0]


@jit
def _wait_for_flag(flag_ptr, out_ptr):
    pid = tl.program_id(0)
    if pid == 0:
        while tl.atomic_add(flag_ptr, 0) == 0:  # program 1 sets it, but runs after
            pass
    else:
        tl.atomic_xchg(flag_ptr, 1)
    tl.store(out_ptr + pid, pid)


def test_waiting_for_a_later_program_raises_instead_of_hanging():
    with pytest.raises(KernelError) as raised:
        _wait_for_flag[(2,)](np.zeros(1, np.int32), np.zeros(2, np.int32))
    message = str(raised.value)
    assert message.startswith("kernel '_wait_for_flag' program (0,): tl.atomic_add changed ")
    assert f"nothing {atomics.SPIN_LIMIT} times in a row" in message
    assert "programs run one at a time here, each to its end" in message


@jit
def _bounded_tries(lock_ptr, out_ptr, TRIES: tl.constexpr):
    got = 0
    for _ in range(TRIES):
        if tl.atomic_cas(lock_ptr, 0, 1) == 0:
            got = 1
    tl.store(out_ptr, got)


def test_a_bounded_number_of_failed_tries_is_not_a_hang():
    lock, out = np.ones(1, np.int32), np.zeros(1, np.int32)
    _bounded_tries[(1,)](lock, out, TRIES=atomics.SPIN_LIMIT - 1)
    assert out[0] == 0 and lock[0] == 1
    with pytest.raises(KernelError, match="tl.atomic_cas changed nothing"):
        _bounded_tries[(1,)](lock, out, TRIES=atomics.SPIN_LIMIT)


@pytest.fixture(params=["detailed", "fast"])
def ctx(request):
    context = RuntimeContext("tiny", overrides=(f"simulation.backend={request.param}",))
    with use_context(context):
        yield context


@triton.jit
def _count_kernel(counter_ptr, largest_ptr, slots_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.atomic_max(largest_ptr, pid)
    ticket = tl.atomic_add(counter_ptr, 1)
    tl.atomic_or(slots_ptr + offsets % 4, 1 << (offsets % 31), mask=mask)
    tl.atomic_xchg(counter_ptr + 1 + pid, ticket)


def test_atomics_on_device_tensors_across_programs(ctx):
    n, block = 1000, 64
    programs = triton.cdiv(n, block)
    counter = torch.zeros(1 + programs, dtype=torch.int32)
    largest = torch.full((1,), -1, dtype=torch.int32)
    slots = torch.zeros(4, dtype=torch.int64)
    result = _count_kernel[(programs,)](counter, largest, slots, n, BLOCK=block)
    values = counter.numpy()
    assert values[0] == programs and largest.numpy()[0] == programs - 1
    # each program took its own ticket
    np.testing.assert_array_equal(np.sort(values[1:]), np.arange(programs))
    offsets = np.arange(n)
    want = [np.bitwise_or.reduce(1 << (offsets[offsets % 4 == s] % 31)) for s in range(4)]
    np.testing.assert_array_equal(slots.numpy(), want)
    assert result.elapsed_ps > 0


def test_the_atomics_are_triton_language_names():
    for name in ("cas", "xchg", "max", "min", "and", "or", "xor"):
        assert getattr(tl, f"atomic_{name}") is getattr(triton.language, f"atomic_{name}")
