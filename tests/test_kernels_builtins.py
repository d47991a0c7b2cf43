"""The built-in flat-buffer kernels against NumPy, their integer semantics and their costs."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench.errors import KernelError
from kernbench.kernels import (
    BUILTIN_BLOCK,
    LaunchRecord,
    cdiv,
    elementwise_kernel,
    launch_copy,
    launch_elementwise,
    launch_fill,
    launch_reduce,
    launch_scalar,
    use_launcher,
)

DTYPES = [np.float32, np.float16, np.int32]
SIZES = [1, 1000, 4096]  # one element, ragged, an exact number of blocks


def operands(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(-4, 4, n).astype(dtype)
        y = rng.uniform(0.5, 4, n).astype(dtype) * rng.choice([-1, 1], n).astype(dtype)
    else:
        x = rng.integers(-1000, 1000, n).astype(dtype)
        y = rng.integers(1, 50, n).astype(dtype) * rng.choice([-1, 1], n).astype(dtype)
    return x, y


def trunc_div(x, y):
    return (np.sign(x) * np.sign(y) * (np.abs(x) // np.abs(y))).astype(x.dtype)


def numpy_binary(op, x, y):
    if op == "add":
        return x + y
    if op == "sub":
        return x - y
    if op == "mul":
        return x * y
    return x / y if x.dtype.kind == "f" else trunc_div(x, y)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_elementwise_matches_numpy(op, n, dtype):
    x, y = operands(n, dtype)
    out = np.full_like(x, 99)
    record = launch_elementwise(op, x, y, out, block=512)
    np.testing.assert_array_equal(out, numpy_binary(op, x, y))
    assert isinstance(record, LaunchRecord)
    assert record.grid.dims == (cdiv(n, 512),)


@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_elementwise_in_place(op):
    x, y = operands(1000, np.float32)
    expected = numpy_binary(op, x, y)
    launch_elementwise(op, x, y, x, block=256)
    np.testing.assert_array_equal(x, expected)


def test_elementwise_with_itself():
    x, _ = operands(1000, np.int32)
    expected = x * x
    launch_elementwise("mul", x, x, x)
    np.testing.assert_array_equal(x, expected)


def test_integer_div_truncates_toward_zero():
    x = np.array([-7, 7, -7, 7, 6, -6, 0, 1], dtype=np.int32)
    y = np.array([2, -2, -2, 2, 3, 3, 5, -3], dtype=np.int32)
    out = np.empty_like(x)
    launch_elementwise("div", x, y, out)
    np.testing.assert_array_equal(out, [-3, -3, 3, 3, 2, -2, 0, 0])


def test_integer_div_by_zero_gives_zero():
    x = np.array([5, -5], dtype=np.int32)
    out = np.empty_like(x)
    launch_elementwise("div", x, np.zeros_like(x), out)
    np.testing.assert_array_equal(out, [0, 0])


def test_integer_div_extremes_keep_precision():
    big = np.iinfo(np.int32).max
    x = np.array([big, -big, big - 1], dtype=np.int32)
    y = np.array([1, 7, -3], dtype=np.int32)
    out = np.empty_like(x)
    launch_elementwise("div", x, y, out)
    np.testing.assert_array_equal(out, [big, -big // 7 + 1, -((big - 1) // 3)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div", "scale"])
def test_scalar_matches_numpy(op, n, dtype):
    x, _ = operands(n, dtype)
    value = 3 if op != "scale" else -2
    out = np.empty_like(x)
    launch_scalar(op, x, value, out, block=256)
    reference = numpy_binary("mul" if op == "scale" else op, x, np.asarray(value, dtype=dtype))
    np.testing.assert_array_equal(out, reference)


def test_scalar_in_place_scale_by_reciprocal():
    x, _ = operands(4096, np.float32)
    expected = x * np.float32(0.25)
    launch_scalar("scale", x, 0.25, x)
    np.testing.assert_array_equal(x, expected)


def test_scalar_integer_div_truncates_and_numpy_scalars_are_weak():
    x = np.array([-7, 7, 9], dtype=np.int32)
    launch_scalar("div", x, np.int64(-2), x)
    np.testing.assert_array_equal(x, [3, -3, -4])
    h = np.array([1.5, 3.0], dtype=np.float16)
    out = np.empty_like(h)
    launch_scalar("mul", h, np.float64(1.1), out)
    # a run-time float argument is float32, as in Triton: float32 arithmetic, not float64
    np.testing.assert_array_equal(out, (h.astype(np.float32) * np.float32(1.1)).astype(np.float16))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
def test_fill_and_copy(n, dtype):
    out = np.zeros(n, dtype=dtype)
    launch_fill(out, 7, block=256)
    np.testing.assert_array_equal(out, np.full(n, 7, dtype=dtype))
    src, _ = operands(n, dtype)
    launch_copy(src, out, block=256)
    np.testing.assert_array_equal(out, src)


def test_copy_converts_to_the_destination_dtype():
    src = np.array([1.75, -2.5, 3.0], dtype=np.float32)
    dst = np.zeros(3, dtype=np.int32)
    launch_copy(src, dst)
    np.testing.assert_array_equal(dst, [1, -2, 3])


REDUCE_REFERENCE = {
    "sum": np.add,
    "prod": np.multiply,
    "min": np.minimum,
    "max": np.maximum,
    "band": np.bitwise_and,
    "bor": np.bitwise_or,
    "bxor": np.bitwise_xor,
}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("op", ["sum", "prod", "min", "max"])
def test_reduce_matches_numpy(op, n, dtype):
    acc, x = operands(n, dtype, seed=1)
    out = np.empty_like(acc)
    launch_reduce(op, acc, x, out, block=256)
    np.testing.assert_array_equal(out, REDUCE_REFERENCE[op](acc, x))


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
@pytest.mark.parametrize("op", ["band", "bor", "bxor"])
def test_bitwise_reduce_matches_numpy(op, dtype):
    rng = np.random.default_rng(2)
    acc, x = (rng.integers(0, 256, 1000).astype(dtype) for _ in range(2))
    out = np.empty_like(acc)
    launch_reduce(op, acc, x, out, block=256)
    np.testing.assert_array_equal(out, REDUCE_REFERENCE[op](acc, x))


def test_reduce_in_place_over_ranks_then_scale_is_avg():
    ranks = [operands(1000, np.float32, seed=s)[0] for s in range(4)]
    acc = ranks[0].copy()
    for contribution in ranks[1:]:
        launch_reduce("sum", acc, contribution, acc)
    launch_scalar("scale", acc, 1 / len(ranks), acc)
    expected = ((ranks[0] + ranks[1]) + ranks[2]) + ranks[3]
    np.testing.assert_array_equal(acc, expected * np.float32(1 / len(ranks)))


def test_reduce_min_max_propagate_nan():
    acc = np.array([np.nan, 1.0], dtype=np.float32)
    x = np.array([0.0, np.nan], dtype=np.float32)
    for op in ("min", "max"):
        out = np.empty_like(acc)
        launch_reduce(op, acc, x, out)
        assert np.isnan(out).all()


def test_bitwise_reduce_rejects_floats():
    x = np.ones(4, dtype=np.float32)
    with pytest.raises(KernelError, match="'band' needs an integer dtype"):
        launch_reduce("band", x, x, x)


def test_elementwise_cost_is_three_buffers_and_one_flop_per_element():
    n = 4 * BUILTIN_BLOCK
    x, y = operands(n, np.float32)
    record = launch_elementwise("add", x, y, np.empty_like(x))
    assert (record.bytes_loaded, record.bytes_stored) == (2 * 4 * n, 4 * n)
    assert record.bytes_moved == 3 * 4 * n
    assert record.vector_flops == n


def test_ragged_elementwise_moves_n_elements_but_computes_whole_blocks():
    n = 1000
    x, y = operands(n, np.float32)
    record = launch_elementwise("mul", x, y, np.empty_like(x), block=256)
    assert record.bytes_moved == 3 * 4 * n
    # the language counts arithmetic per lane issued, masked lanes included
    assert record.vector_flops == cdiv(n, 256) * 256


def test_empty_buffers_launch_one_masked_program():
    x = np.zeros(0, dtype=np.float32)
    record = launch_elementwise("add", x, x, x)
    assert record.grid.dims == (1,)
    assert record.bytes_moved == 0


def test_helpers_go_through_the_installed_launcher():
    seen = []

    def launcher(launch):
        seen.append((launch.kernel.name, launch.grid.dims, dict(launch.meta)))
        return "sentinel"

    x = np.zeros(3000, dtype=np.float32)
    with use_launcher(launcher):
        assert launch_elementwise("sub", x, x, x) == "sentinel"
    assert seen == [("elementwise_kernel", (3,), {"OP": "sub", "BLOCK": 1024})]


def test_bad_arguments_are_named():
    x = np.zeros(8, dtype=np.float32)
    with pytest.raises(KernelError, match="unknown op 'pow'; valid: add, sub, mul, div"):
        launch_elementwise("pow", x, x, x)
    with pytest.raises(KernelError, match="y has 4 elements but x has 8"):
        launch_elementwise("add", x, x[:4], x)
    with pytest.raises(KernelError, match="out has dtype int32 but x has float32"):
        launch_elementwise("add", x, x, x.astype(np.int32))
    with pytest.raises(KernelError, match="block must be a positive power of two, got 1000"):
        launch_fill(x, 1, block=1000)
    with pytest.raises(KernelError, match="value must be an int or a float"):
        launch_scalar("add", x, "1", x)


def test_kernel_rejects_unknown_op_when_launched_directly():
    x = np.zeros(8, dtype=np.float32)
    with pytest.raises(KernelError, match="unknown OP 'scale'"):
        elementwise_kernel[(1,)](x, x, x, 8, OP="scale", BLOCK=8)


def test_integer_division_by_a_scalar_works_on_unsigned_buffers():
    """The scalar argument is an int32 block: it is taken in the buffer's type to divide
    (a uint8 buffer divided by an int32 would mix signedness, which Triton refuses)."""
    for dtype in (np.uint8, np.uint32, np.int8, np.int32):
        x = np.array([7, 100, 0], dtype)
        out = np.empty_like(x)
        launch_scalar("div", x, 2, out)
        np.testing.assert_array_equal(out, np.array([3, 50, 0], dtype))


def test_an_integer_fill_from_a_float_is_exact_and_a_huge_float_fills_inf_quietly():
    import warnings

    out = np.empty(3, np.int32)
    launch_fill(out, 16777217.0)  # past float32's integers
    np.testing.assert_array_equal(out, [16777217] * 3)
    floats = np.empty(2, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        launch_fill(floats, 1e39)
        launch_scalar("add", floats, 1e39, floats)
    assert np.isinf(floats).all()
