"""kernbench.torch's bool dtype: bool tensors, conversions and the arithmetic promotion.

Values are checked against NumPy on the tiny machine; that an operation runs
on the device is checked against the context's clock.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError
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
    with pytest.raises(TensorError, match="Boolean value of tensor .* 2 elements is ambiguous"):
        bool(t)


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
    assert (b + 1).dtype is torch.int32 and (b + 1).tolist() == [2, 1]
    assert (b * 2.5).dtype is torch.float32 and (b * 2.5).tolist() == [2.5, 0.0]
    assert (b + True).dtype is torch.bool and (b + True).tolist() == [True, True]
    assert (b * False).dtype is torch.bool and (b * False).tolist() == [False, False]
    assert (b / 2).dtype is torch.float32 and (b / 2).tolist() == [0.5, 0.0]
    assert (1 - b).dtype is torch.int32 and (1 - b).tolist() == [0, 1]
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


def test_sum_of_bools_counts_in_int32(ctx):
    mask = np.arange(20).reshape(4, 5) % 3 == 0
    t = torch.from_numpy(mask)
    total = t.sum()
    assert total.dtype is torch.int32 and total.item() == mask.sum()
    rows = t.sum(dim=1)
    assert rows.dtype is torch.int32
    np.testing.assert_array_equal(rows.numpy(), mask.sum(axis=1))
    assert torch.tensor([], dtype=torch.bool).sum().item() == 0
