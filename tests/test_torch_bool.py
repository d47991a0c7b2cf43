"""kernbench.torch's bool dtype: bool tensors, conversions and the arithmetic promotion.

Values are checked against NumPy on the tiny machine; that an operation runs
on the device is checked against the context's clock.
"""

from __future__ import annotations

import operator

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context

TINY = "tiny"


@pytest.fixture
def ctx():
    context = RuntimeContext(TINY)
    with use_context(context):
        yield context


def _bools(t: torch.Tensor) -> np.ndarray:
    values = t.numpy()
    assert t.dtype is torch.bool and values.dtype == np.bool_
    return values


# ----------------------------------------------------------------------------- the dtype


def test_bool_dtype_is_one_byte_and_not_floating_or_signed():
    assert repr(torch.bool) == "torch.bool" and isinstance(torch.bool, torch.dtype)
    assert torch.bool.itemsize == 1
    assert not torch.bool.is_floating_point and not torch.bool.is_signed


def test_factories_make_bool_tensors(ctx):
    t = torch.tensor([True, False, True])
    np.testing.assert_array_equal(_bools(t), [True, False, True])
    assert t.itemsize == t.element_size() == 1 and t.nbytes == 3
    assert _bools(torch.zeros(2, 3, dtype=torch.bool)).tolist() == [[False] * 3] * 2
    assert _bools(torch.ones(2, dtype=torch.bool)).tolist() == [True, True]
    assert _bools(torch.full((2,), True)).tolist() == [True, True]
    assert _bools(torch.full((2,), 0.5, dtype=torch.bool)).tolist() == [True, True]
    assert torch.empty(4, dtype=torch.bool).dtype is torch.bool
    assert torch.tensor([2, 0, -1], dtype=torch.bool).tolist() == [True, False, True]
    mask = np.array([[True, False], [False, True]])
    np.testing.assert_array_equal(_bools(torch.from_numpy(mask)), mask)
    np.testing.assert_array_equal(_bools(torch.tensor(mask)), mask)
    assert _bools(torch.zeros_like(t)).tolist() == [False] * 3


def test_item_tolist_and_bool_give_python_bools(ctx):
    t = torch.tensor([True, False])
    assert t[0].item() is True and t[1].item() is False
    assert t.tolist() == [True, False] and type(t.tolist()[0]) is bool
    assert bool(t[0]) is True and bool(torch.tensor([False])) is False
    with pytest.raises(
        TensorError, match="Boolean value of Tensor with more than one value is ambig"
    ):
        bool(t)
    with pytest.raises(TensorError, match=r"Boolean value of Tensor with no values is ambiguous"):
        bool(t[:0])


def test_repr_prints_bools_as_torch_does(ctx):
    assert repr(torch.tensor([True, False])) == "tensor([ True, False], device='ahbm:0')"
    assert repr(torch.tensor([True, True])) == "tensor([True, True], device='ahbm:0')"
    assert repr(torch.tensor(False)) == "tensor(False, device='ahbm:0')"
    empty = torch.tensor([], dtype=torch.bool)
    assert repr(empty) == "tensor([], device='ahbm:0', dtype=torch.bool)"


@pytest.mark.parametrize("convert", ["bool()", "to(torch.bool)", "to(bool)"])
def test_conversion_to_bool_is_nonzero_nan_included(ctx, convert):
    values = np.array([0.0, -1.5, np.nan, np.inf, -0.0, 1e-30], np.float32)
    t = torch.from_numpy(values)
    before = ctx.now
    out = eval(f"t.{convert}", {"t": t, "torch": torch})
    assert ctx.now > before  # the copy kernel ran
    np.testing.assert_array_equal(_bools(out), values.astype(bool))
    ints = torch.tensor([0, 3, -7], dtype=torch.int8)
    assert _bools(ints.bool()).tolist() == [False, True, True]


def test_conversion_from_bool_gives_zeros_and_ones(ctx):
    t = torch.tensor([True, False, True])
    for dtype, np_dtype in [
        (torch.float32, np.float32),
        (torch.float16, np.float16),
        (torch.int32, np.int32),
        (torch.uint8, np.uint8),
    ]:
        out = t.to(dtype)
        assert out.dtype is dtype
        np.testing.assert_array_equal(out.numpy(), np.array([1, 0, 1], np_dtype))
    assert t.bfloat16().tolist() == [1.0, 0.0, 1.0]
    assert t.bool() is t
    assert t[::2].bool().tolist() == [True, True]  # a strided view, copied


def test_bool_views_and_copies_keep_their_values(ctx):
    mask = np.arange(12).reshape(3, 4) % 3 == 0
    t = torch.from_numpy(mask)
    np.testing.assert_array_equal(_bools(t.T.contiguous()), mask.T)
    np.testing.assert_array_equal(_bools(t[1:, ::2].clone()), mask[1:, ::2])
    t[0] = False
    assert _bools(t)[0].tolist() == [False] * 4
    joined = torch.cat([torch.tensor([True]), torch.tensor([False, True])])
    assert _bools(joined).tolist() == [True, False, True]


def test_bool_tensors_in_timing_only_mode_cost_time():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        t = torch.ones(1000, dtype=torch.bool)
        before = context.now
        t.float()
        assert context.now > before


# ----------------------------------------------------------------------------- promotion


@pytest.mark.parametrize(
    ("other", "dtype"),
    [
        (np.array([1, 2, 3], np.int32), torch.int32),
        (np.array([1, 2, 3], np.uint8), torch.uint8),
        (np.array([1, 2, 3], np.int8), torch.int8),
        (np.array([0.5, 1.5, 2.5], np.float32), torch.float32),
        (np.array([0.5, 1.5, 2.5], np.float16), torch.float16),
    ],
)
def test_bool_with_a_number_tensor_takes_the_numbers_dtype(ctx, other, dtype):
    mask = np.array([True, False, True])
    b, x = torch.from_numpy(mask), torch.from_numpy(other)
    for result, expected in [
        (b + x, mask + other),
        (x + b, other + mask),
        (b * x, mask * other),
        (x - b, other - mask),
    ]:
        assert result.dtype is dtype
        np.testing.assert_array_equal(result.numpy(), expected.astype(other.dtype))


def test_bool_with_scalars_follows_torchs_categories(ctx):
    b = torch.tensor([True, False])
    assert (b + 1).dtype is torch.int64 and (b + 1).tolist() == [2, 1]
    assert (b * 2.5).dtype is torch.float32 and (b * 2.5).tolist() == [2.5, 0.0]
    assert (b + True).dtype is torch.bool and (b + True).tolist() == [True, True]
    assert (b * False).dtype is torch.bool and (b * False).tolist() == [False, False]
    assert (b / 2).dtype is torch.float32 and (b / 2).tolist() == [0.5, 0.0]
    assert (1 - b).dtype is torch.int64 and (1 - b).tolist() == [0, 1]
    ints = torch.tensor([1, 2], dtype=torch.int16)
    assert (ints + True).dtype is torch.int16 and (ints + True).tolist() == [2, 3]


def test_bool_with_bool_adds_and_multiplies_as_or_and_and(ctx):
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_array_equal(_bools(ta + tb), a | b)
    np.testing.assert_array_equal(_bools(ta * tb), a & b)
    quotient = ta / tb
    assert quotient.dtype is torch.float32
    assert quotient.tolist()[:2] == [1.0, float("inf")]
    ta += tb
    np.testing.assert_array_equal(_bools(ta), a | b)


def test_a_zero_dim_tensor_of_a_higher_category_decides_the_dtype(ctx):
    b = torch.tensor([True, False])
    assert (b + torch.tensor(3, dtype=torch.int8)).dtype is torch.int8
    assert (b * torch.tensor(2.0, dtype=torch.float16)).dtype is torch.float16
    x = torch.tensor([1, 2], dtype=torch.int16)
    assert (x + torch.tensor(True)).dtype is torch.int16


@pytest.mark.parametrize(
    ("expr", "says"),
    [
        ("a - b", "Subtraction, the `-` operator, with two bool tensors is not supported"),
        ("a - True", "Subtraction, the `-` operator, with two bool tensors is not supported"),
        ("True - a", "Subtraction, the `-` operator, with two bool tensors is not supported"),
        ("-a", "Negation, the `-` operator, on a bool tensor is not supported"),
    ],
)
def test_subtracting_or_negating_bools_raises_as_in_torch(ctx, expr, says):
    a, b = torch.tensor([True, False]), torch.tensor([False, False])  # noqa: F841 - eval
    with pytest.raises(TensorError, match=f"{says}.*use the `~` or `logical_not\\(\\)`"):
        eval(expr)


def test_sum_of_bools_counts_in_int64(ctx):
    mask = np.arange(20).reshape(4, 5) % 3 == 0
    t = torch.from_numpy(mask)
    total = t.sum()
    assert total.dtype is torch.int64 and total.item() == mask.sum()
    rows = t.sum(dim=1)
    assert rows.dtype is torch.int64
    np.testing.assert_array_equal(rows.numpy(), mask.sum(axis=1))
    assert torch.tensor([], dtype=torch.bool).sum().item() == 0


# ----------------------------------------------------------------------------- comparisons

COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
OPERATORS = {
    "eq": operator.eq,
    "ne": operator.ne,
    "lt": operator.lt,
    "le": operator.le,
    "gt": operator.gt,
    "ge": operator.ge,
}
ALIASES = {
    "not_equal": "ne",
    "less": "lt",
    "less_equal": "le",
    "greater": "gt",
    "greater_equal": "ge",
}
FLOATS = np.array([[-1.5, 0.0, 2.0, np.nan], [3.0, np.inf, -np.inf, 2.0], [0.5, 2.0, 1.0, -0.0]])


@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparisons_of_broadcast_tensors_match_numpy(ctx, op):
    a = FLOATS.astype(np.float32)
    b = np.array([[2.0], [np.nan], [1.0]], np.float32)  # (3, 1) against (3, 4)
    expected = COMPARISONS[op](a, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for result in (
        OPERATORS[op](ta, tb),
        getattr(ta, op)(tb),
        getattr(torch, op)(ta, tb),
    ):
        np.testing.assert_array_equal(_bools(result), expected)
    np.testing.assert_array_equal(_bools(OPERATORS[op](tb, ta)), COMPARISONS[op](b, a))


@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparisons_with_scalars_on_either_side_match_numpy(ctx, op):
    a = FLOATS.astype(np.float32)
    t = torch.from_numpy(a)
    compare = OPERATORS[op]
    for scalar in (2.0, 2, True, float("nan"), float("inf")):
        value = np.float32(scalar)
        np.testing.assert_array_equal(_bools(compare(t, scalar)), compare(a, value))
        np.testing.assert_array_equal(_bools(compare(scalar, t)), compare(value, a))
    np.testing.assert_array_equal(_bools(getattr(torch, op)(t, 2.0)), COMPARISONS[op](a, 2.0))


@pytest.mark.parametrize(("alias", "op"), list(ALIASES.items()))
def test_comparison_aliases_are_the_same_comparisons(ctx, alias, op):
    a = np.arange(6, dtype=np.int32) - 2
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(_bools(getattr(t, alias)(1)), COMPARISONS[op](a, 1))
    np.testing.assert_array_equal(_bools(getattr(torch, alias)(t, t * 0)), COMPARISONS[op](a, 0))


def test_comparisons_promote_as_torch_does(ctx):
    ints = torch.tensor([1, 2, 3])
    assert (ints == 2.5).tolist() == [False, False, False]  # compared in float32
    assert (ints < 2.5).tolist() == [True, True, False]
    assert (ints == torch.tensor([1.0, 2.5, 3.0])).tolist() == [True, False, True]
    small = torch.tensor([100, -100], dtype=torch.int8)
    assert (small == torch.tensor([100, 156], dtype=torch.int16)).tolist() == [True, False]
    half = torch.tensor([0.1, 0.2], dtype=torch.float16)
    assert (half == 0.1).tolist() == [True, False]  # the scalar in the tensor's dtype
    flags = torch.tensor([True, False])
    assert (flags == 1).tolist() == [True, False] and (flags == 2).tolist() == [False, False]
    assert (flags < torch.tensor([2, 0], dtype=torch.uint8)).tolist() == [True, False]


def test_comparisons_of_views_and_empty_tensors(ctx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(_bools(t.T > 4), a.T > 4)
    np.testing.assert_array_equal(_bools(t[:, ::2] == t[:, 1::2] - 1), a[:, ::2] == a[:, 1::2] - 1)
    empty = torch.zeros(0, 3) == 1
    assert empty.dtype is torch.bool and empty.shape == (0, 3)
    assert (torch.zeros(2, 0) < torch.zeros(1, 0)).shape == (2, 0)


def test_a_comparison_runs_a_device_kernel_like_an_elementwise_op(ctx):
    x, y = torch.ones(100_000), torch.zeros(100_000)
    start = ctx.now
    x + y
    added = ctx.now - start
    start = ctx.now
    equal = x == y
    compared = ctx.now - start
    assert not equal.any()
    # both read two float32 operands; the comparison writes a byte per element, not four
    assert 0.5 * added < compared <= added


def test_comparison_errors_name_the_problem(ctx):
    t = torch.tensor([1, 2], dtype=torch.int8)
    with pytest.raises(TensorError, match=r"lt of .*: scalar 1000 does not fit torch\.int8"):
        t < 1000  # noqa: B015
    with pytest.raises(TensorError, match=r"eq of .*: operand list is not supported"):
        torch.eq(t, [1, 2])
    assert (t == "two") is False and (t != [1, 2]) is True  # torch's operators: by identity
    with pytest.raises(TensorTypeError, match="'<' not supported between .* 'Tensor' and 'str'"):
        t < "two"  # noqa: B015
    with pytest.raises(TensorError, match=r"shapes \(2,\) and \(3,\) cannot be broadcast"):
        t == torch.zeros(3)  # noqa: B015
    with pytest.raises(TensorError, match="out has shape"):
        torch.eq(t, 1, out=torch.empty(3, dtype=torch.bool))
    out = torch.empty(2, dtype=torch.bool)
    assert torch.lt(t, 2, out=out) is out and out.tolist() == [True, False]


def test_a_one_element_comparison_is_a_python_condition(ctx):
    a = torch.tensor([3.0])
    assert bool(a > 2) is True and (1 if a == 3 else 0) == 1
    assert a in [a]  # identity first, as for torch tensors


# ----------------------------------------------------------------------------- logic

LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


@pytest.mark.parametrize("op", list(LOGICAL))
def test_logical_ops_take_any_dtypes_and_broadcast(ctx, op):
    a = np.array([[0.0, 1.5, np.nan, -0.0]], np.float32)
    b = np.array([[0], [3], [-1]], np.int32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    expected = LOGICAL[op](a, b)
    np.testing.assert_array_equal(_bools(getattr(ta, f"logical_{op}")(tb)), expected)
    np.testing.assert_array_equal(_bools(getattr(torch, f"logical_{op}")(ta, tb)), expected)
    with pytest.raises(TensorError, match=f"logical_{op} of .*: other must be a Tensor, got int"):
        getattr(ta, f"logical_{op}")(1)


def test_logical_not_of_numbers_and_bools(ctx):
    a = np.array([0.0, 2.0, np.nan, -0.0], np.float32)
    np.testing.assert_array_equal(_bools(torch.from_numpy(a).logical_not()), np.logical_not(a))
    flags = torch.tensor([True, False])
    assert torch.logical_not(flags).tolist() == [False, True]


BITWISE = {"&": operator.and_, "|": operator.or_, "^": operator.xor}


@pytest.mark.parametrize("symbol", list(BITWISE))
def test_bitwise_operators_are_logical_on_bools_and_bitwise_on_ints(ctx, symbol):
    p = np.array([[True, True, False, False]])
    q = np.array([[True], [False]])
    tp, tq = torch.from_numpy(p), torch.from_numpy(q)
    apply = BITWISE[symbol]
    np.testing.assert_array_equal(_bools(apply(tp, tq)), apply(p, q))
    np.testing.assert_array_equal(_bools(apply(tp, True)), apply(p, True))
    np.testing.assert_array_equal(_bools(apply(False, tp)), apply(False, p))
    a = np.array([12, -7, 0, 255], np.int32)
    b = np.array([10, 3, 5, 15], np.int16)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    result = apply(ta, tb)
    assert result.dtype is torch.int32
    np.testing.assert_array_equal(result.numpy(), apply(a, b.astype(np.int32)))
    np.testing.assert_array_equal(apply(ta, 6).numpy(), apply(a, 6))
    mixed = apply(tp[0], ta)  # a bool with an integer tensor: the integer dtype
    assert mixed.dtype is torch.int32
    np.testing.assert_array_equal(mixed.numpy(), apply(p[0].astype(np.int32), a))


def test_bitwise_functions_and_invert(ctx):
    a = np.array([12, -7, 0], np.int32)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(torch.bitwise_and(t, 6).numpy(), a & 6)
    np.testing.assert_array_equal(t.bitwise_or(t * 2).numpy(), a | (a * 2))
    np.testing.assert_array_equal(torch.bitwise_xor(t, t).numpy(), a ^ a)
    np.testing.assert_array_equal((~t).numpy(), ~a)
    u = np.array([0, 5, 255], np.uint8)
    inverted = torch.bitwise_not(torch.from_numpy(u))
    assert inverted.dtype is torch.uint8
    np.testing.assert_array_equal(inverted.numpy(), ~u)
    assert (~torch.tensor([True, False])).tolist() == [False, True]


def test_in_place_bitwise_operators(ctx):
    mask = torch.tensor([True, True, False])
    base = mask
    mask &= torch.tensor([True, False, True])
    assert mask is base and mask.tolist() == [True, False, False]
    mask |= torch.tensor([False, False, True])
    assert mask.tolist() == [True, False, True]
    mask ^= True
    assert mask.tolist() == [False, True, False]
    grid = torch.zeros(2, 3, dtype=torch.int32)
    column = grid[:, 1]  # not one run of memory: written back by the strided copy
    column |= 5
    assert grid.tolist() == [[0, 5, 0], [0, 5, 0]]
    with pytest.raises(TensorError, match=r"result type torch\.int64 can't be cast .* torch\.bool"):
        mask &= torch.tensor([1, 0, 1])


@pytest.mark.parametrize("expr", ["f & f", "f | 1", "i ^ f", "~f", "i & 1.5"])
def test_bitwise_operators_refuse_floats_as_torch_does(ctx, expr):
    f, i = torch.ones(2), torch.ones(2, dtype=torch.int32)  # noqa: F841 - eval
    with pytest.raises(TensorError, match=r"bitwise_\w+: not implemented for torch\.float32"):
        eval(expr)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_isnan_isinf_isfinite_match_numpy(ctx, dtype):
    a = np.array([[0.0, np.nan, np.inf], [-np.inf, -2.5, 1e4]], dtype)
    t = torch.from_numpy(a)
    for name, expected in [
        ("isnan", np.isnan(a)),
        ("isinf", np.isinf(a)),
        ("isfinite", np.isfinite(a)),
    ]:
        np.testing.assert_array_equal(_bools(getattr(t, name)()), expected)
        np.testing.assert_array_equal(_bools(getattr(torch, name)(t.T)), expected.T)
    ints = torch.tensor([1, -2])
    assert ints.isnan().tolist() == [False, False] and ints.isinf().tolist() == [False, False]
    assert ints.isfinite().tolist() == [True, True]
    assert torch.zeros(0).isnan().shape == (0,)


# ----------------------------------------------------------------------------- where


def test_where_of_broadcast_tensors_matches_numpy(ctx):
    cond = np.array([[True], [False], [True]])
    x = np.arange(4, dtype=np.float32)
    y = np.full((3, 1), -1.0, np.float32)
    out = torch.where(torch.from_numpy(cond), torch.from_numpy(x), torch.from_numpy(y))
    assert out.dtype is torch.float32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out.numpy(), np.where(cond, x, y))
    method = torch.from_numpy(x).where(torch.from_numpy(cond), torch.from_numpy(y))
    np.testing.assert_array_equal(method.numpy(), np.where(cond, x, y))


def test_where_with_scalars_promotes_as_torch_does(ctx):
    a = np.array([1.5, -2.0, np.nan, 4.0], np.float32)
    t = torch.from_numpy(a)
    cond = t > 0
    np.testing.assert_array_equal(torch.where(cond, t, 0.0).numpy(), np.where(a > 0, a, 0))
    np.testing.assert_array_equal(torch.where(cond, -1, t).numpy(), np.where(a > 0, -1, a))
    ints = torch.tensor([1, 2, 3, 4])
    assert torch.where(cond, ints, 0).dtype is torch.int64
    halves = torch.where(cond, ints, 0.5)
    assert halves.dtype is torch.float32 and halves.tolist() == [1.0, 0.5, 0.5, 4.0]
    assert torch.where(cond, ints.to(torch.int8), ints.to(torch.int16)).dtype is torch.int16
    assert torch.where(cond, 1.0, 0.0).tolist() == [1.0, 0.0, 0.0, 1.0]
    assert torch.where(cond, 1, 0).dtype is torch.int64
    both = torch.where(cond, True, False)
    assert both.dtype is torch.bool and both.tolist() == [True, False, False, True]
    out = torch.empty(4)
    assert torch.where(cond, t, 2.0, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.where(a > 0, a, 2.0))
    fp16 = torch.where(cond, t.half(), 0.1)
    assert fp16.dtype is torch.float16 and fp16.numpy()[1] == np.float16(0.1)


def test_where_with_the_condition_alone_gives_the_indices(ctx):
    cond = np.array([[True, False, True], [False, True, False]])
    rows, cols = torch.where(torch.from_numpy(cond))
    expected = np.nonzero(cond)
    assert rows.dtype is torch.int64
    np.testing.assert_array_equal(rows.numpy(), expected[0])
    np.testing.assert_array_equal(cols.numpy(), expected[1])


def test_where_errors_name_the_problem(ctx):
    t = torch.ones(3)
    with pytest.raises(
        TensorError, match=r"torch.where expected condition to be a boolean tensor.*torch\.float32"
    ):
        torch.where(t, t, 0.0)
    with pytest.raises(TensorError, match=r"condition must be a Tensor, got list"):
        torch.where([True], t, t)
    with pytest.raises(TensorError, match=r"shapes \(3,\) and \(2,\) cannot be broadcast"):
        torch.where(t > 0, torch.ones(2), 0.0)


# ----------------------------------------------------------------------------- masked_fill


def test_masked_fill_matches_numpy_with_a_broadcast_mask(ctx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    mask = np.array([True, False, False, True])
    t = torch.from_numpy(a)
    out = t.masked_fill(torch.from_numpy(mask), -1.0)
    np.testing.assert_array_equal(out.numpy(), np.where(mask, -1.0, a))
    np.testing.assert_array_equal(t.numpy(), a)  # out of place
    same = torch.masked_fill(t, torch.from_numpy(mask), torch.tensor(7.0))  # a 0-d value
    np.testing.assert_array_equal(same.numpy(), np.where(mask, 7.0, a))
    assert t.masked_fill_(torch.from_numpy(mask), float("inf")) is t
    np.testing.assert_array_equal(t.numpy(), np.where(mask, np.inf, a))


def test_masked_fill_in_place_on_a_view_and_other_dtypes(ctx):
    base = torch.zeros(3, 4, dtype=torch.int32)
    column = base[:, 2]
    column.masked_fill_(torch.tensor([True, False, True]), 9)
    assert base.tolist() == [[0, 0, 9, 0], [0, 0, 0, 0], [0, 0, 9, 0]]
    flags = torch.tensor([True, False])
    assert flags.masked_fill(torch.tensor([True, True]), False).tolist() == [False, False]
    logits = torch.zeros(2, 2, dtype=torch.float16)
    filled = logits.masked_fill(torch.tensor([[False, True], [False, False]]), float("-inf"))
    assert filled.dtype is torch.float16 and filled.tolist() == [[0.0, -np.inf], [0.0, 0.0]]


def test_masked_fill_refuses_what_torch_refuses(ctx):
    t = torch.zeros(3)
    with pytest.raises(
        TensorError, match=r"masked_fill_ only supports boolean masks, but got mask with dtype"
    ):
        t.masked_fill_(torch.tensor([1, 0, 1]), 1.0)
    with pytest.raises(TensorError, match=r"only supports a 0-dimensional value tensor"):
        t.masked_fill(t > 0, torch.ones(3))
    with pytest.raises(TensorError, match=r"doesn't match the broadcast shape"):
        t.masked_fill_(torch.ones(2, 3, dtype=torch.bool), 1.0)
    with pytest.raises(TensorError, match=r"scalar 300 does not fit torch\.int8"):
        torch.zeros(2, dtype=torch.int8).masked_fill(torch.ones(2, dtype=torch.bool), 300)


# ----------------------------------------------------------------------------- any and all


@pytest.mark.parametrize("name", ["any", "all"])
def test_any_and_all_reduce_like_numpy(ctx, name):
    a = np.array(
        [[0.0, 1.0, 0.0], [2.0, np.nan, 3.0], [0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], np.float32
    )
    t = torch.from_numpy(a)
    reduce = getattr(np, name)
    whole = getattr(t, name)()
    assert whole.shape == () and whole.item() is bool(reduce(a))
    for dim in (0, 1, -1):
        np.testing.assert_array_equal(_bools(getattr(t, name)(dim)), reduce(a, axis=dim))
        kept = getattr(torch, name)(t, dim=dim, keepdim=True)
        np.testing.assert_array_equal(_bools(kept), reduce(a, axis=dim, keepdims=True))
    np.testing.assert_array_equal(_bools(getattr(t, name)((0, 1))), reduce(a))
    np.testing.assert_array_equal(_bools(getattr(t.T, name)(1)), reduce(a.T, axis=1))
    mask = a > 0
    np.testing.assert_array_equal(
        _bools(getattr(torch.from_numpy(mask), name)(1)), reduce(mask, axis=1)
    )


def test_any_and_all_of_empty_tensors_as_torch(ctx):
    empty = torch.zeros(2, 0)
    assert empty.any(1).tolist() == [False, False] and empty.all(1).tolist() == [True, True]
    assert empty.any().item() is False and empty.all().item() is True
    assert empty.any(0).shape == (0,)
    bytes_ = torch.tensor([0, 3], dtype=torch.uint8)
    assert bytes_.any().dtype is torch.uint8 and bytes_.all().item() == 0  # as torch


def test_any_runs_a_reduction_kernel(ctx):
    t = torch.zeros(10_000, dtype=torch.bool)
    start = ctx.now
    assert not t.any()
    assert ctx.now > start


# ----------------------------------------------------------------------------- nonzero


def test_nonzero_reads_the_indices_back(ctx):
    a = np.array([[0, 3, 0], [4, 0, 5]], np.int32)
    t = torch.from_numpy(a)
    found = t.nonzero()
    assert found.dtype is torch.int64
    np.testing.assert_array_equal(found.numpy(), np.argwhere(a))
    rows, cols = torch.nonzero(t, as_tuple=True)
    np.testing.assert_array_equal(rows.numpy(), np.nonzero(a)[0])
    np.testing.assert_array_equal(cols.numpy(), np.nonzero(a)[1])
    assert torch.zeros(3).nonzero().shape == (0, 1)


def test_comparisons_and_masks_cost_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        a, b = torch.ones(1000), torch.zeros(1000)
        for make in (
            lambda: a == b,
            lambda: (a < 1) | (b > 0),
            lambda: torch.where(a > b, a, 0.0),
            lambda: a.masked_fill(b == 0, 1.0),
            lambda: (a == 1).all(),
            lambda: a.isnan(),
        ):
            before = context.now
            assert make().dtype in (torch.bool, torch.float32)
            assert context.now > before
        with pytest.raises(TensorError, match="no values in timing-only mode"):
            (a > 0).nonzero()


# ----------------------------------------------------------------------------- mask indexing


def test_indexing_by_a_full_mask_gives_the_selected_elements(ctx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(a)
    mask = t > 4.5
    selected = t[mask]
    assert selected.shape == ((a > 4.5).sum(),) and selected.dtype is torch.float32
    np.testing.assert_array_equal(selected.numpy(), a[a > 4.5])
    np.testing.assert_array_equal(t[(t > 100)].numpy(), a[a > 100])  # none selected
    np.testing.assert_array_equal(t.T[t.T < 3].numpy(), a.T[a.T < 3])  # a strided view
    np.testing.assert_array_equal(t[a > 4.5].numpy(), a[a > 4.5])  # a NumPy mask
    np.testing.assert_array_equal(
        torch.masked_select(t, torch.from_numpy(a[0] > 1)).numpy(),
        a[np.broadcast_to(a[0] > 1, a.shape)],
    )


def test_indexing_by_a_mask_of_leading_dims_selects_rows(ctx):
    a = np.arange(24, dtype=np.int32).reshape(4, 3, 2)
    t = torch.from_numpy(a)
    rows = np.array([True, False, True, True])
    np.testing.assert_array_equal(t[torch.from_numpy(rows)].numpy(), a[rows])
    np.testing.assert_array_equal(t[[True, False, False, True]].numpy(), a[[0, 3]])
    grid = a[:, :, 0] % 4 == 0
    picked = t[torch.from_numpy(grid)]
    assert picked.shape == (grid.sum(), 2)
    np.testing.assert_array_equal(picked.numpy(), a[grid])
    assert t[torch.tensor(True)].shape == (1, 4, 3, 2)  # a 0-d mask adds a dim, as torch
    assert t[torch.tensor(False)].shape == (0, 4, 3, 2)


def test_writing_through_a_mask(ctx):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_numpy(a)
    t[t > 8] = 0.0
    expected = np.where(a > 8, 0.0, a)
    np.testing.assert_array_equal(t.numpy(), expected)
    rows = np.array([True, False, True])
    t[torch.from_numpy(rows)] = torch.tensor([-1.0, -2.0, -3.0, -4.0])  # broadcast over rows
    expected[rows] = [-1.0, -2.0, -3.0, -4.0]
    np.testing.assert_array_equal(t.numpy(), expected)
    chosen = t < 0
    t[chosen] = torch.arange(8).float()  # one value per selected element
    expected[expected < 0] = np.arange(8)
    np.testing.assert_array_equal(t.numpy(), expected)
    t[rows] = torch.tensor(5.0)  # a 0-d tensor, and a NumPy mask
    expected[rows] = 5.0
    np.testing.assert_array_equal(t.numpy(), expected)


def test_writing_through_a_mask_into_a_view(ctx):
    base = torch.zeros(3, 4, dtype=torch.int32)
    view = base[:, 1:3]
    view[view == 0] = 7
    assert base.tolist() == [[0, 7, 7, 0]] * 3
    view[torch.tensor([[True, False], [False, False], [False, True]])] = torch.tensor([1, 2])
    assert base.tolist() == [[0, 1, 7, 0], [0, 7, 7, 0], [0, 7, 2, 0]]


def test_mask_indexing_errors_name_the_problem(ctx):
    t = torch.zeros(3, 4)
    with pytest.raises(
        TensorError,
        match=r"the shape of the mask \[4\] at index 0 does not match the shape of the indexed "
        r"tensor \[3, 4\] at index 0",
    ):
        t[torch.ones(4, dtype=torch.bool)]
    with pytest.raises(TensorError, match=r"shape mismatch: value of shape \(2,\) cannot be"):
        t[t == 0] = torch.ones(2)
    with pytest.raises(TensorError, match="masked_select: expected BoolTensor for mask"):
        t.masked_select(torch.ones(3, 4))


def test_max_min_and_argmax_of_bools_match_numpy(ctx):
    mask = np.array([[False, True, True], [False, False, False]])
    t = torch.from_numpy(mask)
    assert t.max().item() is True and t.min().item() is False
    values, indices = t.max(1)
    np.testing.assert_array_equal(_bools(values), mask.max(axis=1))
    np.testing.assert_array_equal(indices.numpy(), mask.argmax(axis=1))
    np.testing.assert_array_equal(t.argmin(1).numpy(), mask.argmin(axis=1))
    np.testing.assert_array_equal(_bools(torch.maximum(t, ~t)), np.ones_like(mask))
    np.testing.assert_array_equal(_bools(torch.stack([t, ~t])), np.stack([mask, ~mask]))
    with pytest.raises(TensorError, match=r"mean\(\) of .*: torch\.bool is not a floating dtype"):
        t.mean()


# ----------------------------------------------------------------------------- Triton kernels


@triton.jit
def _keep_positive(x_ptr, keep_ptr, out_ptr, positive_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    valid = offsets < n
    keep = tl.load(keep_ptr + offsets, mask=valid, other=0)
    tl.static_assert(keep.dtype == tl.int1)  # a bool tensor is a pointer to int1, as in Triton
    x = tl.load(x_ptr + offsets, mask=valid)
    tl.store(out_ptr + offsets, tl.where(keep, x, 0.0), mask=valid)
    tl.store(positive_ptr + offsets, x > 0, mask=valid)


def test_a_triton_kernel_reads_and_writes_bool_tensors(ctx):
    a = np.array([1.0, -2.0, 3.0, -4.0, 5.0], np.float32)
    keep = np.array([True, False, True, True, False])
    out, positive = torch.zeros(5), torch.zeros(5, dtype=torch.bool)
    _keep_positive[(1,)](torch.from_numpy(a), torch.from_numpy(keep), out, positive, 5, BLOCK=8)
    np.testing.assert_array_equal(out.numpy(), np.where(keep, a, 0.0))
    np.testing.assert_array_equal(_bools(positive), a > 0)


def test_arange_refuses_bool_as_torch_does(ctx):
    with pytest.raises(TensorError, match="arange: not implemented for 'Bool' \\(as in torch\\)"):
        torch.arange(4, dtype=torch.bool)
    assert torch.arange(4).bool().tolist() == [False, True, True, True]


def test_isclose_matches_numpy_and_torch_rules(ctx):
    a_np = np.array([1.0, 1.0 + 1e-6, 1.1, np.nan, np.inf, -np.inf, 0.0, np.inf], np.float32)
    b_np = np.array([1.0, 1.0, 1.0, np.nan, np.inf, np.inf, 1e-9, 1.0], np.float32)
    a, b = torch.from_numpy(a_np), torch.from_numpy(b_np)
    got = torch.isclose(a, b)
    assert got.dtype is torch.bool
    assert got.tolist() == np.isclose(a_np, b_np).tolist()
    assert a.isclose(b, equal_nan=True).tolist() == np.isclose(a_np, b_np, equal_nan=True).tolist()
    loose = torch.isclose(a, b, rtol=0.2, atol=0.0)
    assert loose.tolist() == np.isclose(a_np, b_np, rtol=0.2, atol=0.0).tolist()
    # broadcast, integers (compared in float), exact when both tolerances are 0
    grid = torch.from_numpy(np.arange(6, dtype=np.float32).reshape(2, 3))
    row = torch.from_numpy(np.array([0.0, 1.5, 5.0], np.float32))
    assert torch.isclose(grid, row, atol=0.5).tolist() == [
        [True, True, False],
        [False, False, True],
    ]
    ints = torch.tensor([100, 101, 200])
    assert torch.isclose(ints, torch.tensor([100, 100, 100]), rtol=0.01).tolist() == [
        True,
        True,
        False,
    ]
    assert torch.isclose(a, b, rtol=0, atol=0).tolist() == (a_np == b_np).tolist()
    with pytest.raises(TensorError, match="expected both inputs to be of the same dtype"):
        torch.isclose(ints, b[:3])
    with pytest.raises(TensorError, match="rtol must be greater than or equal to zero, but got -1"):
        torch.isclose(a, b, rtol=-1)
    with pytest.raises(TensorTypeError, match="argument 'other' must be Tensor, not float"):
        a.isclose(1.0)
