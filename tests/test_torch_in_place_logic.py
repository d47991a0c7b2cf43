"""kernbench.torch's in-place comparisons and logic (``eq_``, ``logical_and_``, ``bitwise_not_``,
...): torch's semantics, checked against NumPy on the tiny machine.

torch computes the comparison in the operands' common dtype and writes its 1 or 0 into
the tensor in the tensor's own dtype; ``other`` broadcasts to the tensor's shape, never
beyond it.
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


COMPARISONS = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
ALIASES = {
    "not_equal": "ne",
    "less": "lt",
    "less_equal": "le",
    "greater": "gt",
    "greater_equal": "ge",
}
LOGICAL = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}
BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
A = np.array([[-1.5, 0.0, 2.0, np.nan], [3.0, np.inf, -2.0, 2.0], [0.5, 2.0, 1.0, -0.0]])
B = np.array([2.0, np.nan, 1.0, -0.0])  # one row, broadcast over A's rows


def _kernels(ctx, since: int) -> list[str]:
    return [row.tag for row in ctx.trace[since:] if row.kind == "kernel"]


# ----------------------------------------------------------------------------- comparisons


@pytest.mark.parametrize("name", [*COMPARISONS, *ALIASES])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.int8, np.bool_])
def test_in_place_comparisons_write_the_result_in_the_tensors_dtype(ctx, name, dtype):
    compare = COMPARISONS[ALIASES.get(name, name)]
    a = (A if dtype is np.float32 else np.nan_to_num(A, posinf=7, neginf=-7)).astype(dtype)
    b = B.astype(np.float32)  # a float other: compared in float32, as torch's promotion
    t = torch.from_numpy(a)
    got = getattr(t, f"{name}_")(torch.from_numpy(b))
    assert got is t and t.dtype is torch.from_numpy(a).dtype and t.shape == a.shape
    want = compare(a.astype(np.float32), b).astype(dtype)
    np.testing.assert_array_equal(t.numpy(), want)
    # a scalar other, and a tensor other of the same dtype
    t = torch.from_numpy(a)
    getattr(t, f"{name}_")(1)
    np.testing.assert_array_equal(t.numpy(), compare(a, a.dtype.type(1)).astype(dtype))
    t, u = torch.from_numpy(a), torch.from_numpy(a[::-1].copy())
    getattr(t, f"{name}_")(u)
    np.testing.assert_array_equal(t.numpy(), compare(a, a[::-1]).astype(dtype))


def test_an_integer_tensor_compared_with_a_float_compares_in_float(ctx):
    t = torch.tensor([1, 2, 3])
    assert t.lt_(2.5) is t and t.dtype is torch.int64 and t.tolist() == [1, 1, 0]
    t = torch.tensor([1, 2, 3], dtype=torch.int16)
    t.eq_(torch.tensor([1.0, 2.5, 3.0]))
    assert t.dtype is torch.int16 and t.tolist() == [1, 0, 1]
    flags = torch.tensor([True, False, True])
    assert flags.greater_(torch.tensor([0.5, -1.0, 2.0])).tolist() == [True, True, False]
    assert flags.dtype is torch.bool


def test_in_place_comparisons_write_through_views(ctx):
    grid = torch.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    column = grid[:, 1]  # not one run of memory: written back by the strided copy
    assert column.ge_(5) is column
    want = np.arange(12, dtype=np.float32).reshape(3, 4)
    want[:, 1] = want[:, 1] >= 5
    np.testing.assert_array_equal(grid.numpy(), want)
    row = grid[2]  # one run: written directly
    row.ne_(torch.tensor([8.0, 0.0, 10.0, 0.0]))
    want[2] = want[2] != [8.0, 0.0, 10.0, 0.0]
    np.testing.assert_array_equal(grid.numpy(), want)


def test_an_in_place_comparison_is_one_kernel_into_the_tensor(ctx):
    x, y = torch.ones(100_000), torch.zeros(100_000)
    before = len(ctx.trace)
    x.eq_(y)  # the bool result converted as it is stored, as torch's cast-to-output
    assert _kernels(ctx, before) == ["_test_kernel"]
    start = ctx.now
    x + y
    added = ctx.now - start
    start = ctx.now
    x.lt_(y)
    compared = ctx.now - start
    assert 0.5 * added < compared <= 1.05 * added  # reads two float32s, writes one
    assert not x.numpy().any()


def test_in_place_comparisons_refuse_what_torch_refuses(ctx):
    with pytest.raises(
        TensorError,
        match=r"eq_ of .*: output with shape \[3\] doesn't match the broadcast shape \[2, 3\]",
    ):
        torch.ones(3).eq_(torch.ones(2, 3))
    with pytest.raises(TensorError, match=r"output with shape \[2, 1\] doesn't match .* \[2, 3\]"):
        torch.ones(2, 1).greater_equal_(torch.ones(3))
    x = torch.arange(6).float()
    with pytest.raises(TensorError, match="lt_ of .*: unsupported operation: some elements"):
        x[1:].lt_(x[:-1])
    with pytest.raises(TensorError, match=r"le_ of .*: scalar 1000 does not fit torch\.int8"):
        torch.tensor([1, 2], dtype=torch.int8).le_(1000)
    with pytest.raises(TensorError, match="ne_ of .*: operand list is not supported"):
        torch.ones(2).ne_([1, 2])
    t = torch.tensor([1.0, 2.0])
    assert t.eq_(t).tolist() == [1.0, 1.0]  # the same view is an in-place op


def test_the_out_forms_write_the_same_values(ctx):
    a = A.astype(np.float32)
    for name, compare in COMPARISONS.items():
        t = torch.from_numpy(a)
        assert getattr(torch, name)(t, torch.from_numpy(B.astype(np.float32)), out=t) is t
        np.testing.assert_array_equal(t.numpy(), compare(a, B.astype(np.float32)).astype(a.dtype))
    t = torch.from_numpy(a)
    assert torch.logical_and(t, torch.from_numpy(B.astype(np.float32)), out=t) is t
    np.testing.assert_array_equal(t.numpy(), np.logical_and(a, B).astype(np.float32))


# ----------------------------------------------------------------------------- logic


@pytest.mark.parametrize("op", list(LOGICAL))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
def test_in_place_logical_ops_keep_the_tensors_dtype(ctx, op, dtype):
    a = np.array([[0, 1, 2, 0], [3, 0, 0, 1]]).astype(dtype)
    b = np.array([1.5, 0.0, np.nan, 0.0], np.float32)  # any dtype, broadcast
    t = torch.from_numpy(a)
    assert getattr(t, f"logical_{op}_")(torch.from_numpy(b)) is t
    assert t.dtype is torch.from_numpy(a).dtype
    np.testing.assert_array_equal(t.numpy(), LOGICAL[op](a, b).astype(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
def test_in_place_logical_not(ctx, dtype):
    a = np.array([0, 1, 2, 0, 5]).astype(dtype)
    t = torch.from_numpy(a)
    assert t.logical_not_() is t and t.dtype is torch.from_numpy(a).dtype
    np.testing.assert_array_equal(t.numpy(), np.logical_not(a).astype(dtype))
    f = torch.tensor([np.nan, -0.0])
    assert f.logical_not_().tolist() == [0.0, 1.0]  # NaN is nonzero


def test_in_place_logical_ops_refuse_what_torch_refuses(ctx):
    with pytest.raises(
        TensorError, match=r"logical_or_ of .*: output with shape \[2\] doesn't match .* \[3, 2\]"
    ):
        torch.ones(2).logical_or_(torch.ones(3, 2))
    with pytest.raises(TensorError, match="logical_and_ of .*: other must be a Tensor, got int"):
        torch.ones(2).logical_and_(1)
    x = torch.ones(4)
    with pytest.raises(TensorError, match="logical_xor_ of .*: unsupported operation"):
        x[:3].logical_xor_(x[1:])


# ----------------------------------------------------------------------------- bitwise


@pytest.mark.parametrize("op", list(BITWISE))
def test_in_place_bitwise_ops_as_the_operators(ctx, op):
    a = np.array([[12, -7, 0], [5, 3, -1]], np.int32)
    b = np.array([6, 5, -1], np.int32)
    t = torch.from_numpy(a)
    assert getattr(t, f"bitwise_{op}_")(torch.from_numpy(b)) is t
    np.testing.assert_array_equal(t.numpy(), BITWISE[op](a, b))
    t = torch.from_numpy(a)
    getattr(t, f"bitwise_{op}_")(3)
    np.testing.assert_array_equal(t.numpy(), BITWISE[op](a, 3))
    small = torch.tensor([1, 2, 3], dtype=torch.int8)
    getattr(small, f"bitwise_{op}_")(torch.tensor(6))  # a 0-d int32 keeps int8
    assert small.dtype is torch.int8
    np.testing.assert_array_equal(small.numpy(), BITWISE[op](np.int8([1, 2, 3]), 6))
    flags = torch.tensor([True, False, True])
    getattr(flags, f"bitwise_{op}_")(torch.tensor([True, True, False]))
    want = BITWISE[op](np.array([True, False, True]), np.array([True, True, False]))
    np.testing.assert_array_equal(flags.numpy(), want)


def test_in_place_bitwise_not(ctx):
    u = torch.tensor([0, 5, 255], dtype=torch.uint8)
    assert u.bitwise_not_() is u and u.dtype is torch.uint8 and u.tolist() == [255, 250, 0]
    flags = torch.tensor([True, False])
    assert flags.bitwise_not_().tolist() == [False, True]
    grid = torch.zeros(2, 2, dtype=torch.int32)
    grid[:, 0].bitwise_not_()
    assert grid.tolist() == [[-1, 0], [-1, 0]]


def test_in_place_bitwise_ops_refuse_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match=r"bitwise_and_: not implemented for torch\.float32"):
        torch.ones(3).bitwise_and_(1)
    with pytest.raises(TensorError, match=r"bitwise_not_: not implemented for torch\.float32"):
        torch.ones(3).bitwise_not_()
    with pytest.raises(
        TensorError,
        match=r"bitwise_or_ of .*: result type torch\.int64 can't be cast to the desired output "
        r"type torch\.bool .*\(a = a \| b\)",
    ):
        torch.tensor([True]).bitwise_or_(torch.tensor([3]))
    with pytest.raises(TensorError, match=r"bitwise_xor_ of .*: output with shape \[1\]"):
        torch.tensor([1]).bitwise_xor_(torch.tensor([1, 2]))


# ----------------------------------------------------------------------------- the names


def test_every_in_place_form_torch_has_is_a_method(ctx):
    t = torch.ones(2)
    names = [
        *(f"{name}_" for name in (*COMPARISONS, *ALIASES)),
        *(f"logical_{op}_" for op in (*LOGICAL, "not")),
        *(f"bitwise_{op}_" for op in (*BITWISE, "not")),
    ]
    for name in names:
        assert callable(getattr(t, name)), name


def test_in_place_logic_costs_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        t = torch.ones(64, 100)
        for call in (
            lambda: t.eq_(1.0),
            lambda: t.logical_not_(),
            lambda: t[:, 0].gt_(torch.zeros(64)),
        ):
            before = context.now
            assert call() is not None
            assert context.now > before
