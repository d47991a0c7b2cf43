"""The kernel language computes what compiled Triton computes: types, rounding, NaN.

Each expected value is computed with NumPy the way Triton's ``semantic.py``
types the operation (both operands cast to the computation type first).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.kernels.language as tl
from kernbench.errors import KernelError
from kernbench.kernels import ArrayBuffer, jit


def block(values, dtype):
    """A block of ``values`` in ``dtype`` (bf16 rounded, as a load would give it)."""
    if dtype is tl.bfloat16:
        return tl.cast(tl.Block(np.asarray(values, dtype=np.float32)), tl.bfloat16)
    return tl.Block(np.asarray(values, dtype=dtype.np_dtype), dtype)


def check(result, dtype, expected):
    """``result`` has ``dtype`` and exactly the ``expected`` values."""
    assert result.dtype is dtype, (result.dtype, dtype)
    np.testing.assert_array_equal(result.value, np.asarray(expected, dtype=dtype.np_dtype))


# ----------------------------------------------------------------------------- dtypes


def test_dtype_predicates_follow_triton_names():
    assert tl.float16.is_fp16() and not tl.float16.is_bf16()
    assert tl.bfloat16.is_bf16() and tl.float32.is_fp32() and tl.float64.is_fp64()
    assert tl.int8.is_int8() and tl.uint32.is_uint32() and tl.int1.is_int1()
    assert not tl.int32.is_int64()
    # Triton counts int1 as an unsigned integer
    assert tl.int1.is_int() and tl.int1.is_int_unsigned() and not tl.int1.is_int_signed()
    assert tl.uint8.is_int_unsigned() and tl.int8.is_int_signed()
    assert not tl.float32.is_int() and not tl.float32.is_int_unsigned()
    assert (tl.int1.int_bitwidth, tl.int16.int_bitwidth, tl.uint64.int_bitwidth) == (1, 16, 64)
    with pytest.raises(KernelError, match=r"tl.float32 is not an integer type"):
        _ = tl.float32.int_bitwidth


# ----------------------------------------------------------------------------- promotion


def test_mixed_signedness_follows_cs_usual_arithmetic_conversions():
    one, two = block([1], tl.int32), block([2], tl.uint32)
    check(one - two, tl.uint32, [2**32 - 1])
    check(block([-1], tl.int32) < block([1], tl.uint32), tl.int1, [False])
    check(block([255], tl.uint8) + block([4], tl.int8), tl.uint8, [3])
    check(block([200], tl.uint8) + block([100], tl.int16), tl.int16, [300])
    check(block([0x80000000], tl.uint32) << block([1], tl.int32), tl.uint32, [0])
    check(block([True], tl.int1) + block([3], tl.int8), tl.int8, [4])


def test_a_scalar_of_no_higher_kind_keeps_the_blocks_type():
    check(block([127], tl.int8) + 1, tl.int8, [-128])  # wraps in int8, as compiled
    check(block([2.5], tl.float16) * 3, tl.float16, [7.5])
    check(block([0.1], tl.float16) + 0.1, tl.float16, [np.float16(0.1) + np.float16(0.1)])
    check(block([1.0], tl.bfloat16) + 1, tl.bfloat16, [2.0])
    # a float scalar with an integer block computes in float32
    check(block([16777217], tl.int32) + 0.5, tl.float32, [np.float32(16777216)])
    check(block([3], tl.uint8) * True, tl.uint8, [3])


def test_division_and_modulo_of_half_types_compute_in_float32():
    third = np.float32(1) / np.float32(3)
    check(block([1], tl.float16) / 3, tl.float32, [third])
    check(block([1], tl.float16) / block([3], tl.float16), tl.float32, [third])
    check(block([1], tl.bfloat16) / block([3], tl.bfloat16), tl.float32, [third])
    check(block([7.5], tl.float16) % 2, tl.float32, [1.5])
    check(block([1], tl.bfloat16) * block([3], tl.bfloat16), tl.bfloat16, [3])


def test_floats_of_different_types():
    check(block([1], tl.float16) + block([2], tl.bfloat16), tl.float16, [3])
    check(block([1], tl.bfloat16) + block([256], tl.int32), tl.float32, [257])
    # int32 -> fp16 first: 2049 is not an fp16 value
    check(block([2049], tl.int32) + block([0], tl.float16), tl.float16, [2048])
    check(block([1], tl.float32) + block([2], tl.float64), tl.float64, [3])
    # in float32, not through float64
    check(block([16777217], tl.int32) + block([0.5], tl.float32), tl.float32, [16777216])


def test_integer_true_division_is_float32():
    check(block([7], tl.int32) / block([2], tl.int32), tl.float32, [3.5])
    big = 2**40 + 1
    check(block([big], tl.int64) / block([1], tl.int64), tl.float32, [np.float32(big)])
    check(block([7], tl.int8) / 2, tl.float32, [3.5])


def test_integer_floordiv_and_mod_stay_c_like_in_the_promoted_type():
    check(block([-7], tl.int32) // 2, tl.int32, [-3])
    check(block([-7], tl.int32) % 3, tl.int32, [-1])
    check(block([250], tl.uint8) // block([3], tl.uint16), tl.uint16, [83])


def test_right_shift_is_arithmetic_for_signed_blocks_and_logical_for_unsigned():
    check(block([-8], tl.int8) >> 1, tl.int8, [-4])
    check(block([0xF0], tl.uint8) >> 4, tl.uint8, [0x0F])
    check(block([-1], tl.int32) >> block([28], tl.int32), tl.int32, [-1])


def test_comparisons_type_a_python_number_before_comparing():
    # Triton compares fp16 0.1 with float32 0.1 (the scalar is typed first)
    check(block([0.1], tl.float16) >= 0.1, tl.int1, [np.float32(np.float16(0.1)) >= 0.1])
    check(block([-1], tl.int8) < 200, tl.int1, [True])
    check(block([3], tl.uint8) == 3, tl.int1, [True])


def test_where_types_its_branches_like_a_binary_operation():
    cond = block([True, False], tl.int1)
    check(tl.where(cond, 1, 0), tl.int32, [1, 0])
    check(tl.where(cond, 1, 0.5), tl.float32, [1, 0.5])
    check(tl.where(cond, block([1, 2], tl.float16), 0.1), tl.float16, [1, np.float16(0.1)])
    check(tl.where(cond, block([1, 2], tl.int8), block([3, 4], tl.uint8)), tl.uint8, [1, 4])


def test_maximum_minimum_and_clamp_type_their_scalars_and_widen_bf16():
    check(tl.maximum(block([1, -2], tl.float16), 0.0), tl.float32, [1, 0])
    check(tl.minimum(block([1, -2], tl.int8), 0), tl.int32, [0, -2])
    check(tl.maximum(block([1], tl.bfloat16), block([2], tl.bfloat16)), tl.float32, [2])
    check(tl.clamp(block([-1, 0.5, 3], tl.float16), 0.0, 1.0), tl.float32, [0, 0.5, 1])
    with pytest.raises(KernelError, match=r"tl.clamp takes floating-point values.*tl.int32"):
        tl.clamp(block([1], tl.int32), 0, 1)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        (
            lambda: block([1], tl.int32) / block([1], tl.uint32),
            r"Cannot use /, // or % with int32 and uint32 because they have different "
            r"signedness; cast them to the same signedness",
        ),
        (
            lambda: block([1], tl.uint32) % block([1], tl.int8),
            r"Cannot use /, // or % with uint32 and int8",
        ),
        (
            lambda: block([1], tl.uint32) + -1,
            r"Cannot perform a binary operation between an unsigned tensor and a negative "
            r"scalar \(-1 with uint32\); cast one of them explicitly",
        ),
        (lambda: block([1], tl.int8) + 200, r"scalar 200 is out of range for int8"),
        (lambda: block([1.5], tl.float32) // 2, r"// needs integer operands.*use / to divide"),
        (lambda: block([1.5], tl.float32) & 1, r"& needs integer operands"),
        (lambda: ~block([1.5], tl.float32), r"~ needs an integer block, got tl.float32"),
    ],
)
def test_operations_triton_refuses_are_kernel_errors(expression, message):
    with pytest.raises(KernelError, match=message):
        expression()


def test_python_numbers_standing_alone_are_typed_as_triton_types_them():
    check(tl.where(block([True], tl.int1), 2**31, 0), tl.uint32, [2**31])
    check(tl.where(block([True], tl.int1), 2**32, 0), tl.int64, [2**32])
    check(tl.where(block([True], tl.int1), 2**63, 0), tl.uint64, [2**63])
    check(tl.where(block([True], tl.int1), True, False), tl.int1, [True])
    check(tl.where(block([True], tl.int1), 1e-300, 0.0), tl.float64, [1e-300])


# ----------------------------------------------------------------------------- NaN


def test_maximum_and_minimum_give_the_number_unless_nan_propagates():
    nan = np.float32("nan")
    x, y = block([nan, 1, nan], tl.float32), block([2, nan, nan], tl.float32)
    check(tl.maximum(x, y), tl.float32, np.fmax(x.value, y.value))  # [2, 1, nan]
    check(tl.minimum(x, y), tl.float32, np.fmin(x.value, y.value))
    check(tl.maximum(x, y, propagate_nan=tl.PropagateNan.ALL), tl.float32, [nan, nan, nan])
    check(tl.minimum(x, y, tl.PropagateNan.ALL), tl.float32, [nan, nan, nan])
    check(tl.maximum(x, 0.0, tl.constexpr(tl.PropagateNan.NONE)), tl.float32, [0, 1, 0])


def test_clamp_gives_min_for_nan_unless_nan_propagates():
    x = block([np.nan, -3, 3], tl.float32)
    check(tl.clamp(x, -1.0, 1.0), tl.float32, [-1, -1, 1])
    check(tl.clamp(x, -1.0, 1.0, tl.PropagateNan.ALL), tl.float32, [np.nan, -1, 1])


def test_propagate_nan_takes_only_its_two_values():
    with pytest.raises(KernelError, match=r"propagate_nan must be tl.PropagateNan.NONE or "):
        tl.maximum(block([1], tl.float32), 0.0, propagate_nan=True)


# ----------------------------------------------------------------------------- run-time scalars


@jit
def scaled_kernel(x_ptr, out_ptr, s, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i) * s)


@jit
def scalar_math_kernel(out_ptr, s, t):
    tl.store(out_ptr + 0, s // t)
    tl.store(out_ptr + 1, s % t)
    tl.store(out_ptr + 2, s * s)


@jit
def add_n_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(out_ptr + i, tl.load(x_ptr + i) + n)


def test_a_runtime_float_argument_is_float32():
    x = np.array([1.5, 3.0], dtype=np.float16)
    out = np.empty(2, dtype=np.float32)
    scaled_kernel[(1,)](x, out, 1.0001, BLOCK=2)
    # fp16 * fp32 computes in fp32 (a Python number would have kept fp16)
    np.testing.assert_array_equal(out, x.astype(np.float32) * np.float32(1.0001))


def test_runtime_int_arguments_are_int32_and_divide_as_c():
    out = np.zeros(3, dtype=np.int64)
    scalar_math_kernel[(1,)](out, -7, 3)
    np.testing.assert_array_equal(out, [-2, -1, 49])
    scalar_math_kernel[(1,)](out, 65536, 3)
    assert out[2] == 0  # 65536 * 65536 wraps in int32, as compiled


def test_an_int8_block_plus_a_runtime_int_is_int32():
    x = np.array([100, -100], dtype=np.int8)
    out = np.zeros(2, dtype=np.int32)
    add_n_kernel[(1,)](x, out, 200, BLOCK=2)
    np.testing.assert_array_equal(out, [300, 100])


def test_runtime_scalar_types_and_the_specialization_of_one():
    seen = {}

    def record(**kwargs):
        seen.update({k: v.dtype if isinstance(v, tl.Block) else v for k, v in kwargs.items()})

    @jit
    def typed(a, b, c, d, e, f, g):
        record(a=a, b=b, c=c, d=d, e=e, f=f, g=g)

    typed[(1,)](5, 2**31, 2**63, 1.5, True, 1, None)
    assert seen == dict(a=tl.int32, b=tl.int64, c=tl.uint64, d=tl.float32, e=tl.int1, f=1, g=None)

    @jit(do_not_specialize=["one"])
    def unspecialized(one):
        record(one=one)

    unspecialized[(1,)](1)
    assert seen["one"] is tl.int32


def test_grid_functions_see_plain_values_and_python_loops_take_runtime_ints():
    seen = []

    @jit
    def loop(out_ptr, n, BLOCK: tl.constexpr):
        total = tl.zeros((BLOCK,), tl.int32)
        for k in range(n):
            total += k
        tl.store(out_ptr + tl.arange(0, BLOCK), total)

    def grid(meta):
        seen.append(type(meta["n"]))
        return (1,)

    out = np.zeros(4, dtype=np.int32)
    loop[grid](out, 5, BLOCK=4)
    assert seen == [int]
    np.testing.assert_array_equal(out, [10] * 4)


# ----------------------------------------------------------------------------- reductions


def test_sum_widens_only_narrow_integers():
    halves = np.full(1000, 0.1, dtype=np.float16)
    check(
        tl.sum(block(halves, tl.float16)), tl.float16, np.float16(halves.astype(np.float32).sum())
    )
    check(tl.sum(block([1.5, 2.25], tl.bfloat16)), tl.bfloat16, [3.75])
    check(tl.sum(block([100, 100, 100], tl.int8)), tl.int32, 300)
    check(tl.sum(block([200, 200], tl.uint8)), tl.uint32, 400)
    check(tl.sum(block([True, True, False], tl.int1)), tl.uint32, 2)
    check(tl.sum(block([2**31 - 1, 1], tl.int32)), tl.int32, -(2**31))  # wraps, as compiled
    check(tl.sum(block([100, 100], tl.int8), dtype=tl.float32), tl.float32, 200)
    check(tl.sum(block([[1, 2], [3, 4]], tl.int16), axis=1), tl.int32, [3, 7])


def test_max_and_min_widen_narrow_types_unless_they_return_indices():
    check(tl.max(block([1, -3], tl.int8)), tl.int32, 1)
    check(tl.min(block([1.5, -3], tl.float16)), tl.float32, -3)
    check(tl.max(block([1.5, -3], tl.bfloat16)), tl.float32, 1.5)
    check(tl.max(block([1, 5], tl.uint8)), tl.int32, 5)
    value, index = tl.max(block([1.5, 7, 7], tl.float16), axis=0, return_indices=True)
    check(value, tl.float16, 7)
    check(index, tl.int32, 1)
    value, index = tl.min(block([3, -1], tl.bfloat16), axis=0, return_indices=True)
    check(value, tl.float32, -1)
    check(index, tl.int32, 1)


def test_max_and_min_reductions_let_nan_give_way_to_numbers():
    rows = block([[np.nan, 1, 3], [np.nan, np.nan, np.nan]], tl.float32)
    check(tl.max(rows, axis=1), tl.float32, [3, np.nan])
    check(tl.min(rows, axis=1), tl.float32, [1, np.nan])


def test_block_reduction_methods_take_the_functions_arguments():
    x = block([[1, 2], [3, 4]], tl.int8)
    check(x.sum(0, True, tl.int64), tl.int64, [[4, 6]])
    check(x.sum(axis=1, dtype=tl.float32), tl.float32, [3, 7])
    value, index = x.max(1, True)
    check(value, tl.int8, [2, 4])
    check(index, tl.int32, [1, 1])
    check(x.min(0, False, True, True), tl.int32, [[1, 2]])


# ----------------------------------------------------------------------------- loads and casts


@jit
def masked_load_kernel(x_ptr, out_ptr, OTHER: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < 1, other=OTHER)
    tl.store(out_ptr + i, x.to(tl.float32))


@pytest.mark.parametrize(
    ("element_type", "other", "expected"),
    [
        (tl.bfloat16, 0.1, 0.10009765625),
        (tl.float16, 0.1, np.float32(np.float16(0.1))),
        (tl.uint8, -1, 255),
    ],
)
def test_load_converts_other_to_the_element_type(element_type, other, expected):
    holder = np.zeros(4, dtype=element_type.np_dtype)
    buffer = ArrayBuffer("x", holder)
    buffer.element_type = element_type
    out = np.empty(4, dtype=np.float32)
    masked_load_kernel[(1,)](buffer, out, OTHER=other, BLOCK=4)
    np.testing.assert_array_equal(out, [0, expected, expected, expected])


def _toward_zero(values, grid):
    """Each value's nearest member of the sorted non-negative ``grid`` not above it in
    magnitude, with the value's sign (NaN stays NaN)."""
    magnitude = np.abs(values.astype(np.float64))
    picked = grid[np.searchsorted(grid, magnitude, side="right") - 1]
    return np.where(np.isnan(values), np.nan, np.copysign(picked, values))


def _non_negative(bits_to_values):
    values = bits_to_values(np.arange(0x8000, dtype=np.uint16))
    return np.sort(values[~np.isnan(values)].astype(np.float64))


HALF_GRID = _non_negative(lambda bits: bits.view(np.float16))
BF16_GRID = _non_negative(lambda bits: (bits.astype(np.uint32) << 16).view(np.float32))
DOWNCAST_VALUES = np.array(
    [1 / 3, -1 / 3, 70000, -70000, 65520, np.inf, -np.inf, np.nan, 1e-7, 3.4e38, 0.0],
    dtype=np.float32,
)


@pytest.mark.parametrize(("to", "grid"), [(tl.float16, HALF_GRID), (tl.bfloat16, BF16_GRID)])
def test_rtz_rounds_float32_toward_zero(to, grid):
    x = tl.Block(DOWNCAST_VALUES)
    expected = _toward_zero(DOWNCAST_VALUES, grid)
    np.testing.assert_array_equal(x.to(to, fp_downcast_rounding="rtz").value, expected)
    np.testing.assert_array_equal(tl.cast(x, to, "rtz").value, expected)
    rtne = x.to(to, fp_downcast_rounding="rtne").value
    np.testing.assert_array_equal(rtne, tl.cast(x, to).value)
    assert rtne[2] > expected[2]  # the default rounds 70000 to nearest, up


def test_rtz_from_float64():
    values = np.array([1 / 3, -(2.0**200), 1 + 2.0**-30], dtype=np.float64)
    rtz = tl.Block(values).to(tl.float32, fp_downcast_rounding="rtz").value
    expected = [np.nextafter(np.float32(1 / 3), np.float32(0)), -np.finfo(np.float32).max, 1]
    np.testing.assert_array_equal(rtz, np.asarray(expected, dtype=np.float32))


@pytest.mark.parametrize(
    ("source", "to", "rounding", "message"),
    [
        (
            tl.float32,
            tl.float16,
            "rtn",
            r"fp_downcast_rounding must be one of rtne, rtz, got 'rtn'",
        ),
        (tl.float16, tl.float32, "rtz", r"applies only to a float conversion to a narrower"),
        (tl.int32, tl.float16, "rtz", r"not tl.int32 to tl.float16"),
        (tl.bfloat16, tl.float16, "rtz", r"not tl.bfloat16 to tl.float16"),
    ],
)
def test_rounding_modes_triton_refuses(source, to, rounding, message):
    with pytest.raises(KernelError, match=message):
        block([1], source).to(to, fp_downcast_rounding=rounding)


# ----------------------------------------------------------------------------- dot


def _matrices(dtype):
    rng = np.random.default_rng(3)
    return block(rng.random((16, 16)), dtype), block(rng.random((16, 16)), dtype)


@pytest.mark.parametrize("dtype", [tl.float32, tl.bfloat16])
def test_dot_of_fp32_or_bf16_is_fp32_whatever_out_dtype_says(dtype):
    a, b = _matrices(dtype)
    expected = np.matmul(a.value.astype(np.float32), b.value.astype(np.float32))
    result = tl.dot(a, b, out_dtype=tl.float16)
    assert result.dtype is tl.float32
    np.testing.assert_allclose(result.value, expected, rtol=1e-6)


def test_dot_of_fp16_honours_out_dtype_and_fp64_stays_fp64():
    a, b = _matrices(tl.float16)
    product = np.matmul(a.value.astype(np.float32), b.value.astype(np.float32))
    check(tl.dot(a, b, out_dtype=tl.float16), tl.float16, product.astype(np.float16))
    check(tl.dot(a, b), tl.float32, product)
    a, b = _matrices(tl.float64)
    check(tl.dot(a, b), tl.float64, np.matmul(a.value, b.value))


def test_dot_refuses_a_bf16_out_dtype():
    a, b = _matrices(tl.bfloat16)
    with pytest.raises(KernelError, match=r"out_dtype=tl.float32 and .to\(tl.bfloat16\)"):
        tl.dot(a, b, out_dtype=tl.bfloat16)


# ----------------------------------------------------------------------------- bitcasts


def test_bf16_bitcasts_to_and_from_16_bit_types():
    one = block([1.0, -2.0], tl.bfloat16)
    check(one.to(tl.int16, bitcast=True), tl.int16, [0x3F80, np.int16(-16384)])
    check(one.to(tl.uint16, bitcast=True), tl.uint16, [0x3F80, 0xC000])
    check(
        one.to(tl.float16, bitcast=True),
        tl.float16,
        np.array([0x3F80, 0xC000], np.uint16).view(np.float16),
    )
    check(block([0x3F80], tl.int16).to(tl.bfloat16, bitcast=True), tl.bfloat16, [1.0])
    half = np.array([1.875], np.float16)
    check(block(half, tl.float16).to(tl.bfloat16, bitcast=True), tl.bfloat16, [1.0])
    check(block([1.0], tl.float32).to(tl.int32, bitcast=True), tl.int32, [0x3F800000])


def test_bitcast_keeps_the_width():
    with pytest.raises(KernelError, match=r"cannot bitcast tl.float32 \(32 bits\) to tl.float16"):
        block([1.0], tl.float32).to(tl.float16, bitcast=True)
    with pytest.raises(KernelError, match=r"tl.int1 \(1 bits\) to tl.int8 \(8 bits\)"):
        block([True], tl.int1).to(tl.int8, bitcast=True)


# ----------------------------------------------------------------------------- math and methods


@pytest.mark.parametrize(
    "name", ["exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "erf", "floor", "ceil"]
)
@pytest.mark.parametrize("dtype", [tl.int32, tl.float16, tl.bfloat16, tl.uint8])
def test_math_functions_take_only_float32_and_float64(name, dtype):
    message = rf"tl.{name} takes float32 or float64 values \(as in Triton\), got {dtype!r}; "
    with pytest.raises(KernelError, match=message + r"convert first with .to\(tl.float32\)"):
        getattr(tl, name)(block([1], dtype))


def test_sigmoid_takes_only_float32_and_float64_and_keeps_float64():
    with pytest.raises(KernelError, match=r"tl.sigmoid takes float32 or float64 values"):
        tl.sigmoid(block([1], tl.int8))
    check(tl.exp(block([1], tl.float64)), tl.float64, [np.exp(1.0)])
    check(tl.sigmoid(block([0], tl.float64)), tl.float64, [0.5])


def test_erf_floor_and_ceil_as_triton_math():
    values = [-2.5, -0.5, 0.0, 0.5, 1.5]
    check(tl.erf(block(values, tl.float32)), tl.float32, [math.erf(v) for v in values])
    check(block(values, tl.float64).erf(), tl.float64, [math.erf(v) for v in values])
    check(tl.floor(block(values, tl.float32)), tl.float32, np.floor(values))
    check(block(values, tl.float32).ceil(), tl.float32, np.ceil(values))


def test_triton_tensor_methods_call_the_functions():
    x = block([[1.0, 4.0]], tl.float32)
    for name in ("exp", "exp2", "log", "log2", "sin", "cos", "sqrt", "rsqrt", "sigmoid", "abs"):
        check(getattr(x, name)(), tl.float32, getattr(tl, name)(x).value)
    assert x.reshape(2, 1).shape == x.reshape((2, 1)).shape == (2, 1)
    assert x.trans().shape == (2, 1) and x.expand_dims(0).shape == (1, 1, 2)
    assert x.broadcast_to(3, 2).shape == (3, 2)
    check(x.cast(tl.float16), tl.float16, [[1, 4]])


def test_python_and_or_not_on_a_block_say_to_use_bitwise_operators():
    pair = block([1, 2], tl.int32)
    message = (
        r"Python's and/or/not \(and if\) needs one value, but this block has 2 elements; "
        r"for elementwise logic use &, \| and ~"
    )
    with pytest.raises(KernelError, match=message):
        _ = pair and True
    with pytest.raises(KernelError, match=message):
        _ = not pair
    assert bool(block([1], tl.int32)) and not block([0], tl.int1)
    with pytest.raises(KernelError, match=r"int\(\) needs one value, but this block has 2"):
        int(pair)


def test_printing_a_block_shows_its_values_and_repr_its_shape():
    pair = block([1, 2], tl.int32)
    assert str(pair) == "[1 2] (tl.int32)"
    assert f"{block([0.5], tl.bfloat16)}" == "[0.5] (tl.bfloat16)"
    assert repr(pair) == "Block(shape=(2,), dtype=tl.int32)"
