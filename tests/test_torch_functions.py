"""kernbench.torch everyday functions, as methods and ``torch.`` functions, against NumPy.

Reductions, elementwise math, ``softmax`` and ``matmul`` run on the device
(they cost simulated time); ``allclose`` and ``equal`` are host-side reads.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _values(shape=(3, 5), seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# ----------------------------------------------------------------------------- max / min


@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_max_min_along_a_dim_give_values_and_indices(ctx, dim, keepdim):
    a = _values()
    t = torch.from_numpy(a)
    for name, np_value, np_index in (("max", np.max, np.argmax), ("min", np.min, np.argmin)):
        result = getattr(t, name)(dim=dim, keepdim=keepdim)
        values, indices = result  # a named tuple, like torch.return_types.max
        assert result.values is values and result.indices is indices
        assert type(result).__name__ == name
        np.testing.assert_array_equal(values.numpy(), np_value(a, axis=dim, keepdims=keepdim))
        expected = np_index(a, axis=dim)
        if keepdim:
            expected = np.expand_dims(expected, dim)
        np.testing.assert_array_equal(indices.numpy(), expected)
        assert indices.dtype is torch.int64
        same = getattr(torch, name)(t, dim, keepdim)
        np.testing.assert_array_equal(same.values.numpy(), values.numpy())


def test_whole_max_min_argmax_and_ties_take_the_first(ctx):
    a = np.array([[3, 9, 1], [9, 0, 2]], dtype=np.int32)
    t = torch.from_numpy(a)
    assert t.max().item() == 9 and t.max().shape == torch.Size([])
    assert torch.min(t).item() == 0
    assert t.argmax().item() == 1 and torch.argmin(t).item() == 4
    assert t.argmax(dim=0).tolist() == [1, 0, 1]
    assert t.argmax(dim=1, keepdim=True).tolist() == [[1], [0]]
    big = np.random.default_rng(2).uniform(-1, 1, 5000).astype(np.float32)
    assert torch.from_numpy(big).argmax().item() == int(np.argmax(big))  # several chunks
    assert torch.from_numpy(big).max().item() == float(big.max())
    with pytest.raises(TensorError, match="zero-size"):
        torch.zeros(0).max()


def test_argmax_without_dim_keeps_every_dim_with_keepdim(ctx):
    a = _values((3, 5))
    t = torch.from_numpy(a)
    for name in ("argmax", "argmin"):
        kept = getattr(t, name)(keepdim=True)
        expected = getattr(np, name)(a, axis=None, keepdims=True)  # shape (1, 1), as torch
        assert kept.shape == torch.Size([1, 1]) and kept.tolist() == expected.tolist()
        assert getattr(torch, name)(t.T, keepdim=True).tolist() == [[int(getattr(np, name)(a.T))]]
        assert getattr(t, name)().shape == torch.Size([])
    assert torch.tensor(2.0).argmax(keepdim=True).shape == torch.Size([])


def test_max_of_a_view_and_elementwise_maximum(ctx):
    a = _values((4, 6))
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(t.T.max(dim=1).values.numpy(), a.T.max(axis=1))
    np.testing.assert_array_equal(t[:, ::2].min(0).indices.numpy(), a[:, ::2].argmin(0))
    b = _values((4, 6), seed=3)
    u = torch.from_numpy(b)
    np.testing.assert_array_equal(torch.maximum(t, u).numpy(), np.maximum(a, b))
    np.testing.assert_array_equal(t.min(u).numpy(), np.minimum(a, b))
    np.testing.assert_array_equal(t.max(u[0]).numpy(), np.maximum(a, b[0]))


# ----------------------------------------------------------------------------- sum / mean


@pytest.mark.parametrize("dim", [None, 0, 1, (0, 1), (1, 2), (-1,)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_over_dims(ctx, dim, keepdim):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = torch.from_numpy(a)
    axis = dim if dim is None or isinstance(dim, tuple) else dim
    np.testing.assert_allclose(
        t.sum(dim, keepdim).numpy(), a.sum(axis=axis, keepdims=keepdim), rtol=1e-6
    )
    np.testing.assert_allclose(
        torch.mean(t, dim, keepdim).numpy(), a.mean(axis=axis, keepdims=keepdim), rtol=1e-6
    )


def test_sum_of_views_and_axis_spelling(ctx):
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    t = torch.from_numpy(a)
    assert t.T.sum(dim=1).tolist() == a.T.sum(axis=1).tolist()
    assert t[:, 1:3].sum().item() == int(a[:, 1:3].sum())
    assert t.sum(axis=0).tolist() == a.sum(axis=0).tolist()
    assert torch.sum(t, axis=1).tolist() == a.sum(axis=1).tolist()  # torch.<name> too
    assert torch.mean(t.float(), axis=0, keepdim=True).tolist() == [a.mean(axis=0).tolist()]
    assert torch.max(t, axis=1).indices.tolist() == a.argmax(axis=1).tolist()
    assert torch.min(t, axis=0).values.tolist() == a.min(axis=0).tolist()


def test_an_empty_dim_list_reduces_every_dim_and_a_repeated_dim_is_refused(ctx):
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = torch.from_numpy(a)
    for dims in ((), []):  # torch's rule, not NumPy's (which reduces nothing)
        total = t.sum(dims)
        assert total.shape == () and total.item() == float(a.sum())
        assert t.mean(dims, keepdim=True).numpy().tolist() == [[[float(a.mean())]]]
    total[...] = 0  # a new tensor, not a view of t
    np.testing.assert_array_equal(t.numpy(), a)
    with pytest.raises(TensorError, match=r"dim 0 appears multiple times in the list of dims"):
        t.sum((0, -3))
    with pytest.raises(TensorError, match=r"dim 2 appears multiple times"):
        t.mean([2, 1, 2])


# ----------------------------------------------------------------------------- elementwise


@pytest.mark.parametrize(
    ("name", "ref"), [("abs", np.abs), ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt)]
)
def test_unary_math_matches_numpy(ctx, name, ref):
    a = np.abs(_values()) + 0.1 if name in ("log", "sqrt") else _values()
    t = torch.from_numpy(a)
    np.testing.assert_allclose(getattr(t, name)().numpy(), ref(a), rtol=1e-6)
    np.testing.assert_allclose(getattr(torch, name)(t).numpy(), ref(a), rtol=1e-6)
    np.testing.assert_allclose(getattr(t.T, name)().numpy(), ref(a.T), rtol=1e-6)
    getattr(t, name + "_")()
    np.testing.assert_allclose(t.numpy(), ref(a), rtol=1e-6)


def test_unary_math_dtypes_follow_torch(ctx):
    ints = torch.tensor([-4, 9])
    assert ints.abs().dtype is torch.int64 and ints.abs().tolist() == [4, 9]
    assert abs(ints).tolist() == [4, 9]
    assert ints.exp().dtype is torch.float32
    np.testing.assert_allclose(torch.sqrt(torch.tensor([4, 9])).numpy(), [2.0, 3.0])
    with pytest.raises(TensorError, match="can't be cast"):
        ints.sqrt_()


def test_broadcasting_binary_ops_match_numpy(ctx):
    a, b = _values((3, 1)), _values((1, 4), seed=2)
    t, u = torch.from_numpy(a), torch.from_numpy(b)
    np.testing.assert_allclose((t + u).numpy(), a + b)
    np.testing.assert_allclose((t * u[0]).numpy(), a * b[0])
    np.testing.assert_allclose((u / t).numpy(), b / a, rtol=1e-6)
    rows = torch.from_numpy(_values((3, 4), seed=4))
    expected = _values((3, 4), seed=4) - a
    rows -= t  # in place, broadcast to the output's shape
    np.testing.assert_allclose(rows.numpy(), expected, rtol=1e-6)
    with pytest.raises(TensorError, match="doesn't match the broadcast shape"):
        t += u


def test_softmax_like_the_triton_tutorial(ctx):
    a = _values((4, 7))
    x = torch.from_numpy(a)
    x_max = x.max(dim=1)[0]
    z = x - x_max[:, None]
    numerator = torch.exp(z)
    denominator = numerator.sum(dim=1)
    naive = numerator / denominator[:, None]
    e = np.exp(a - a.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(naive.numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(torch.softmax(x, axis=-1).numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(x.softmax(dim=1).numpy(), expected, rtol=1e-6)
    e0 = np.exp(a - a.max(axis=0, keepdims=True))
    np.testing.assert_allclose(
        torch.softmax(x, 0).numpy(), e0 / e0.sum(axis=0, keepdims=True), rtol=1e-6
    )
    with pytest.raises(TensorError, match="not a floating dtype"):
        torch.tensor([1, 2]).softmax(0)
    # a dtype that is not one was taken for a device: "unknown device type 'bogus'"
    with pytest.raises(TensorError, match="unsupported dtype 'bogus'"):
        F.softmax(x, dim=1, dtype="bogus")


def _round_bfloat16(a: np.ndarray) -> np.ndarray:
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize(("shape", "dim"), [((4, 8), 0), ((4, 8), -1), ((2, 1500), 1)])
def test_softmax_is_one_kernel_rounding_once_like_torch(ctx, dtype, shape, dim):
    # torch computes a float16/bfloat16 softmax in float32 and rounds once; each step
    # rounding to the dtype (max, subtract, exp, sum, divide) was 1 ulp off in most places
    rounded = {"float16": lambda a: a.astype(np.float16).astype(np.float32)}.get(
        dtype, _round_bfloat16
    )
    a = rounded(np.random.default_rng(5).standard_normal(shape).astype(np.float32))
    wide = a.astype(np.float64)
    e = np.exp(wide - wide.max(dim, keepdims=True))
    want = rounded((e / e.sum(dim, keepdims=True)).astype(np.float32))
    x = torch.from_numpy(a).to(getattr(torch, dtype))
    before = len(ctx.trace)
    got = x.softmax(dim)
    kernels = [row.tag for row in ctx.trace[before:] if row.kind == "kernel"]
    assert kernels == ["_softmax_kernel"]
    assert got.dtype is x.dtype
    np.testing.assert_array_equal(got.float().numpy(), want)


# ----------------------------------------------------------------------------- matmul


@pytest.mark.parametrize(
    ("a_shape", "b_shape"),
    [
        ((70, 40), (40, 65)),
        ((5,), (5,)),
        ((5,), (5, 3)),
        ((4, 5), (5,)),
        ((2, 3, 5), (2, 5, 4)),
        ((2, 3, 5), (5, 4)),
        ((3, 5), (2, 5, 4)),
        ((2, 3, 4, 5), (2, 3, 5, 6)),  # attention's (B, H, T, D) @ (B, H, D, T)
        ((1, 3, 4, 5), (2, 1, 5, 6)),  # batch dims broadcast
        ((2, 3, 4, 5), (5, 6)),
        ((5, 4), (2, 3, 4, 6)),
        ((2, 3, 4, 5), (5,)),
        ((5,), (2, 1, 3, 5, 4)),
        ((0, 4, 5), (5, 2)),  # empty batches and empty sums, as NumPy and torch
        ((0, 3, 4, 5), (5, 2)),
        ((1, 4, 5), (0, 5, 2)),
        ((3, 0), (0, 2)),
    ],
)
def test_matmul_matches_numpy(ctx, a_shape, b_shape):
    a, b = _values(a_shape, seed=5), _values(b_shape, seed=6)
    t, u = torch.from_numpy(a), torch.from_numpy(b)
    out = t @ u
    assert tuple(out.shape) == np.matmul(a, b).shape
    np.testing.assert_allclose(out.numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(torch.matmul(t, u).numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-5)


def test_matmul_reads_transposed_operands_in_place(ctx):
    a = _values((6, 4))
    t = torch.from_numpy(a)
    np.testing.assert_allclose((t @ t.T).numpy(), a @ a.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((t.T @ t).numpy(), a.T @ a, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        torch.mm(t[1:3], t.T[:, ::2]).numpy(), a[1:3] @ a.T[:, ::2], rtol=1e-5, atol=1e-5
    )
    ints = torch.tensor([[1, 2], [3, 4]])
    assert (ints @ ints).tolist() == [[7, 10], [15, 22]]
    assert torch.dot(torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])).item() == 11.0


def test_matmul_errors(ctx):
    with pytest.raises(TensorError, match="cannot be multiplied"):
        torch.ones(2, 3) @ torch.ones(2, 3)
    with pytest.raises(TensorError, match="cannot be multiplied"):
        torch.ones(1, 2, 3, 4) @ torch.ones(1, 2, 3, 4)
    with pytest.raises(TensorError, match="cannot be broadcast|broadcast"):
        torch.ones(2, 2, 3, 4) @ torch.ones(3, 2, 4, 3)


def test_a_4d_matmul_keeps_its_operands(ctx):
    q0, k0 = _values((2, 2, 3, 4)), _values((1, 2, 4, 3), 7)
    q, kt = torch.from_numpy(q0), torch.from_numpy(k0)
    out = q @ kt
    assert tuple(out.shape) == (2, 2, 3, 3)
    np.testing.assert_allclose(out.numpy(), np.matmul(q0, k0), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(q.numpy(), q0)
    np.testing.assert_array_equal(kt.numpy(), k0)


def test_matmul_costs_matrix_engine_time(ctx):
    a, b = torch.ones(128, 128), torch.ones(128, 128)
    before = ctx.now
    c = a @ b
    assert ctx.now > before and c[0, 0].item() == 128.0


# ----------------------------------------------------------------------------- host-side


def test_allclose_and_equal_are_host_side_comparisons(ctx):
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([1.0, 2.0, 3.0 + 1e-6])
    assert torch.allclose(a, b) and a.allclose(b)
    assert not torch.allclose(a, b + 1) and torch.allclose(a, b + 0.01, atol=0.02)
    assert torch.allclose(a[None], a.expand(1, 3)) and torch.allclose(torch.ones(3), torch.ones(1))
    assert torch.equal(a, a.clone()) and not torch.equal(a, b) and not a.equal(a[:2])
    with pytest.raises(TensorError, match="dtypes"):
        torch.allclose(a, a.int())


# ----------------------------------------------------------------------------- factories


def test_factories_of_the_tutorials(ctx):
    torch.manual_seed(3)
    first = (torch.randn(4).tolist(), torch.rand(2, 2).tolist(), torch.randint(0, 9, (3,)).tolist())
    torch.manual_seed(3)
    second = (
        torch.randn(4).tolist(),
        torch.rand(2, 2).tolist(),
        torch.randint(0, 9, (3,)).tolist(),
    )
    assert first == second
    x = torch.rand(3, 2)
    for made, value in (
        (torch.zeros_like(x), 0.0),
        (torch.ones_like(x), 1.0),
        (torch.full_like(x, 2.5), 2.5),
    ):
        assert made.shape == x.shape and made.tolist() == [[value] * 2] * 3
    assert torch.empty_like(x).shape == x.shape and torch.rand_like(x).shape == x.shape
    assert torch.arange(2, 11, 3).tolist() == [2, 5, 8]
    v = torch.arange(6.0).reshape(2, 3)
    assert torch.cat([v[:, :1], v.T[1:].T], dim=1).tolist() == v.tolist()
    assert torch.stack([v[0], v[0, :1].expand(3)]).tolist() == [[0.0, 1.0, 2.0], [0.0] * 3]
    assert torch.reshape(v, (3, 2)).shape == (3, 2) and torch.transpose(v, 0, 1).shape == (3, 2)
    assert torch.flatten(v).shape == (6,) and torch.unsqueeze(v, 0).shape == (1, 2, 3)
    assert torch.squeeze(v[None]).shape == (2, 3) and torch.permute(v, (1, 0)).shape == (3, 2)


def test_nn_functional_softmax_and_what_nn_lacks(ctx):
    import kernbench.torch.nn.functional as F  # noqa: N812 - PyTorch's spelling

    x = torch.tensor([[1.0, 2.0, 3.0]])
    assert torch.allclose(F.softmax(x, dim=-1), torch.softmax(x, -1))
    assert torch.nn.functional.softmax(x, 1).shape == (1, 3)
    assert hasattr(torch.nn, "Conv3d") and not hasattr(torch.nn, "CrossMapLRN2d")
    with pytest.raises(AttributeError, match="README's 'What kernbench.torch supports'") as info:
        _ = torch.nn.CrossMapLRN2d
    assert f"nn has {', '.join(torch.nn.__all__)}" in str(info.value)
    with pytest.raises(AttributeError, match="no attribute .no_such_op.: there are .*gelu, "):
        _ = F.no_such_op


def test_linear_is_input_times_weight_transposed_plus_bias(ctx):
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 5), (4, 5), (4,)))
    got = F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))
    np.testing.assert_allclose(got.numpy(), x @ w.T + b, rtol=1e-6, atol=1e-6)
    assert F.linear(torch.from_numpy(x), torch.from_numpy(w)).shape == (2, 3, 4)
    assert F.linear(torch.from_numpy(x), torch.from_numpy(w[0])).shape == (2, 3)
    with pytest.raises(TensorError, match=r"weight must be 1-D or 2-D .* got shape \(1, 4, 5\)"):
        F.linear(torch.ones(2, 5), torch.ones(1, 4, 5))
    with pytest.raises(TensorError, match="bias is torch.float16 and the product torch.float32"):
        F.linear(torch.ones(2, 5), torch.ones(4, 5), torch.ones(4, dtype=torch.float16))


def test_mse_and_l1_losses_match_numpy_for_each_reduction(ctx):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
    x, y = torch.from_numpy(a), torch.from_numpy(b)
    square, absolute = (a - b) ** 2, np.abs(a - b)
    np.testing.assert_allclose(F.mse_loss(x, y).item(), square.mean(), rtol=1e-6)
    np.testing.assert_allclose(F.mse_loss(x, y, reduction="sum").item(), square.sum(), rtol=1e-6)
    np.testing.assert_array_equal(F.mse_loss(x, y, reduction="none").numpy(), square)
    np.testing.assert_allclose(F.l1_loss(x, y).item(), absolute.mean(), rtol=1e-6)
    np.testing.assert_allclose(F.mse_loss(x, y, size_average=False).item(), square.sum(), rtol=1e-6)
    assert F.mse_loss(x, y).shape == ()
    with pytest.warns(UserWarning, match=r"target size \(torch.Size\(\[4\]\)\) that is diff"):
        got = F.mse_loss(x, y[0])
    np.testing.assert_allclose(got.item(), ((a - b[0]) ** 2).mean(), rtol=1e-6)
    with pytest.raises(TensorError, match="reduction 'avg' is not one of 'mean', 'sum', 'none'"):
        F.mse_loss(x, y, reduction="avg")


def test_out_argument_of_torch_functions_receives_the_result(ctx):
    # torch.matmul(a, b, out=c) raised TypeError (unexpected keyword argument 'out')
    a_np = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = torch.from_numpy(a_np)
    c = torch.empty(2, 2)
    assert torch.matmul(a, torch.ones(3, 2), out=c) is c
    np.testing.assert_array_equal(c.numpy(), a_np @ np.ones((3, 2), np.float32))
    flat = torch.empty(8)
    torch.cat([a.flatten(), torch.ones(2)], out=flat)
    assert flat.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 1.0, 1.0]
    x = torch.ones(3)
    torch.add(x, 2, out=x)
    assert x.tolist() == [3.0, 3.0, 3.0]
    index = torch.empty(2, dtype=torch.int32)
    torch.argmax(a, dim=1, out=index)
    assert index.tolist() == [2, 2]
    with pytest.raises(TensorError, match=r"torch.mul: out has shape \(3,\) and the result"):
        torch.mul(a, 2, out=torch.empty(3))
    with pytest.raises(TensorError, match="can't be cast to the desired output type"):
        torch.mul(a, 2.5, out=torch.empty(2, 3, dtype=torch.int32))


def test_softmax_and_norm_write_into_out_as_torch(ctx):
    # torch.softmax(x, dim, out=y) raised TypeError; torch.norm(..., out=y) was refused
    values = np.random.default_rng(1).standard_normal((2, 5)).astype(np.float32)
    x = torch.from_numpy(values)
    probs = torch.empty(2, 5)
    assert torch.softmax(x, -1, out=probs) is probs
    e = np.exp(values - values.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(probs.numpy(), e / e.sum(axis=-1, keepdims=True), rtol=1e-6)
    rows = torch.empty(2)
    assert torch.norm(x, 2, 1, False, rows) is rows  # out is torch.norm's fifth parameter
    np.testing.assert_allclose(rows.numpy(), np.linalg.norm(values, axis=1), rtol=1e-6)
    whole = torch.empty(())
    torch.norm(x, out=whole)
    np.testing.assert_allclose(whole.item(), np.linalg.norm(values.ravel()), rtol=1e-6)
    with pytest.raises(
        TensorError, match=r"torch.norm: out has shape \(3,\) and the result \(2,\)"
    ):
        torch.norm(x, dim=1, out=torch.empty(3))
    with pytest.raises(TensorError, match="torch.softmax: result type torch.float32 can't"):
        torch.softmax(x, 0, out=torch.empty(2, 5, dtype=torch.int32))


def test_zero_d_operands_promote_like_python_scalars_within_their_kind(ctx):
    half = torch.ones(3, dtype=torch.float16)
    assert (half + torch.tensor(2.0)).dtype is torch.float16
    assert (torch.tensor(2.0) * half).dtype is torch.float16
    small = torch.ones(2, dtype=torch.int8)
    assert (small + torch.tensor(3)).dtype is torch.int8
    assert (small + torch.tensor(0.5)).dtype is torch.float32
    assert (half + torch.ones(3)).dtype is torch.float32  # not 0-d: ordinary promotion
    assert (torch.arange(3) + torch.arange(3)[1]).tolist() == [1, 2, 3]


def test_broadcasts_that_only_add_size_1_dims_work_in_and_out_of_place(ctx):
    """A bias added to a batch of one: the broadcast view of the bias is already dense,
    so it is used as it is (freeing it as a copy raised, after the in-place op ran)."""
    x_np, b_np = _values((1, 4)), _values((4,), seed=2)
    x, b = torch.from_numpy(x_np), torch.from_numpy(b_np)
    np.testing.assert_array_equal((x + b).numpy(), x_np + b_np)
    np.testing.assert_array_equal((b * x).numpy(), b_np * x_np)
    np.testing.assert_array_equal(torch.maximum(x, b).numpy(), np.maximum(x_np, b_np))
    np.testing.assert_array_equal(torch.minimum(b, x).numpy(), np.minimum(b_np, x_np))
    deep = torch.from_numpy(_values((1, 1, 4), seed=3))
    np.testing.assert_array_equal((deep - b).numpy(), deep.numpy() - b_np)
    x.add_(b)
    x += b
    np.testing.assert_array_equal(x.numpy(), (x_np + b_np) + b_np)
    np.testing.assert_array_equal(b.numpy(), b_np)  # the operand is unchanged and usable


def test_an_adam_step_with_addcmul_and_addcdiv_matches_numpy_bit_for_bit(ctx):
    """Rounded in the order of torch's CUDA kernels: (value * t1) * t2, value * (t1 / t2)."""
    rng = np.random.default_rng(5)
    p0, g0, m0 = (rng.standard_normal(33).astype(np.float32) for _ in range(3))
    v0 = np.abs(rng.standard_normal(33)).astype(np.float32)
    p, g, m, v = map(torch.from_numpy, (p0, g0, m0, v0))
    b1, b2, lr, eps = np.float32(0.9), np.float32(0.999), np.float32(1e-3), np.float32(1e-8)
    m.mul_(0.9).add_(g, alpha=1 - 0.9)
    v.mul_(0.999).addcmul_(g, g, value=1 - 0.999)
    p.addcdiv_(m, v.sqrt().add_(1e-8), value=-1e-3)
    m_np = m0 * b1 + g0 * np.float32(1 - 0.9)
    v_np = v0 * b2 + (np.float32(1 - 0.999) * g0) * g0
    np.testing.assert_array_equal(v.numpy(), v_np)
    np.testing.assert_array_equal(p.numpy(), p0 + -lr * (m_np / (np.sqrt(v_np) + eps)))
    out = torch.addcmul(p, g, m)  # value 1: no scaling
    np.testing.assert_array_equal(out.numpy(), p.numpy() + g0 * m_np)
    np.testing.assert_array_equal(
        torch.addcdiv(p, g, m, value=2).numpy(), p.numpy() + np.float32(2) * (g0 / m_np)
    )


@pytest.mark.parametrize("w", [0.7, 0.9, 1.0, -0.6])
def test_lerp_with_a_weight_of_a_half_or_more_takes_torchs_second_form(ctx, w):
    """torch: end - (end - start) * (1 - w) for |w| >= 0.5, so that w = 1 gives end."""
    a0, b0 = _values((64,)), _values((64,), seed=2)
    expected = b0 - (b0 - a0) * (np.float32(1) - np.float32(w))
    a, b = torch.from_numpy(a0), torch.from_numpy(b0)
    np.testing.assert_array_equal(torch.lerp(a, b, w).numpy(), expected)
    a.lerp_(b, w)
    np.testing.assert_array_equal(a.numpy(), expected)
    assert torch.lerp(torch.tensor([3.0]), torch.tensor([0.1]), 1.0).tolist() == [
        np.float32(0.1).item()
    ]


def test_lerp_in_and_out_of_place_matches_numpy(ctx):
    a0, b0 = _values((4, 3)), _values((4, 3), seed=2)
    a, b = torch.from_numpy(a0), torch.from_numpy(b0)
    np.testing.assert_array_equal(torch.lerp(a, b, 0.25).numpy(), a0 + 0.25 * (b0 - a0))
    w0 = _values((3,), seed=3)
    np.testing.assert_array_equal(a.lerp(b, torch.from_numpy(w0)).numpy(), a0 + w0 * (b0 - a0))
    a.lerp_(b, 0.4)
    np.testing.assert_array_equal(a.numpy(), a0 + np.float32(0.4) * (b0 - a0))


def test_division_modes_and_integer_addcdiv_are_refused_by_name(ctx):
    a = torch.from_numpy(_values())
    np.testing.assert_array_equal(torch.div(a, 2.0, rounding_mode=None).numpy(), a.numpy() / 2)
    with pytest.raises(TensorError, match="div expected rounding_mode to be one of None"):
        a.div(2, rounding_mode="round")
    ints = torch.ones(3, dtype=torch.int32)
    with pytest.raises(TensorError, match="addcdiv: integer division is not supported"):
        ints.addcdiv(ints, ints)


def test_bmm_multiplies_equal_batches_and_refuses_others_as_torch(ctx):
    a, b = _values((2, 3, 4)), _values((2, 4, 5), seed=8)
    out = torch.bmm(torch.from_numpy(a), torch.from_numpy(b))
    np.testing.assert_allclose(out.numpy(), np.matmul(a, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(TensorError, match="both must be 3-D with the same batch size"):
        torch.ones(2, 3, 4).bmm(torch.ones(4, 5))


def test_mm_takes_only_matrices_as_torch(ctx):
    a, b = _values((3, 4)), _values((4, 2), seed=8)
    np.testing.assert_allclose(
        torch.from_numpy(a).mm(torch.from_numpy(b)).numpy(), a @ b, rtol=1e-5, atol=1e-5
    )
    for left, right in (((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 2))):
        with pytest.raises(TensorError, match=r"mm of shapes .*: both must be 2-D matrices"):
            torch.mm(torch.ones(*left), torch.ones(*right))
        with pytest.raises(TensorError, match="both must be 2-D matrices"):
            torch.ones(*left).mm(torch.ones(*right))


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("sizee", "nearest supported: size"),
        ("xyzzy", "the README's 'What kernbench.torch supports' lists what there is"),
        ("histogramdd", "there is no device kernel for it"),
        ("isin", "torch.isin(t, test_elements)"),
        ("is_floating_point", "t.dtype.is_floating_point"),
        ("unsqueeze_", "the view without _"),
    ],
)
def test_missing_tensor_methods_say_what_to_write_instead(ctx, name, hint):
    with pytest.raises(AttributeError, match=re.escape(hint)):
        getattr(torch.ones(2), name)


def test_missing_torch_functions_say_what_to_write_instead():
    assert callable(torch.autograd.backward) and callable(torch.autograd.grad)
    for name, hint in (
        ("histogramdd", "there is no device kernel for it"),
        ("hub", "there is no download here"),
        ("fft", "numpy.fft"),
        ("sparse_csr_tensor", "torch.sparse_coo_tensor(indices, values, size)"),
        ("is_floating_point", "t.dtype.is_floating_point"),
    ):
        with pytest.raises(
            AttributeError,
            match=re.escape(f"torch.{name} is not in KernBench; ") + ".*" + re.escape(hint),
        ):
            getattr(torch, name)


def test_maximum_and_minimum_promote_mixed_dtypes_as_torch(ctx):
    ints = np.array([1, 5, 3], np.int32)
    floats = np.array([2.5, 1.0, 3.5], np.float32)
    a, b = torch.tensor(ints), torch.tensor(floats)
    for got, want in (
        (torch.maximum(a, b), np.maximum(ints, floats)),
        (torch.minimum(b, a), np.minimum(ints, floats)),
    ):
        assert got.dtype is torch.float32
        np.testing.assert_array_equal(got.numpy(), want.astype(np.float32))
    # A 0-d operand of the same kind keeps the other's dtype (torch's result_type).
    half = torch.tensor([1.0, 4.0], dtype=torch.float16)
    capped = torch.maximum(half, torch.tensor(2.0))
    assert capped.dtype is torch.float16
    np.testing.assert_array_equal(capped.numpy(), np.array([2.0, 4.0], np.float16))


_ERF = np.vectorize(math.erf)
_EDGES = np.array(
    [-30, -3, -1.5, -1e-6, -0.0, 0.0, 1e-7, 0.5, 2.0, 20.0, np.nan, np.inf, -np.inf], np.float32
)


def _gelu_tanh(v):
    return 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)))


@pytest.mark.parametrize(
    ("call", "want"),
    [
        (lambda x: torch.sigmoid(x), lambda v: 1 / (1 + np.exp(-v))),
        (lambda x: x.tanh(), np.tanh),
        (lambda x: torch.rsqrt(x.abs()), lambda v: 1 / np.sqrt(np.abs(v))),
        (lambda x: x.sin(), np.sin),
        (lambda x: torch.cos(x), np.cos),
        (lambda x: torch.erf(x), _ERF),
        (lambda x: F.relu(x), lambda v: np.where(v < 0, 0, v)),
        (lambda x: F.gelu(x), lambda v: 0.5 * v * (1 + _ERF(v / np.sqrt(2)))),
        (lambda x: F.gelu(x, approximate="tanh"), _gelu_tanh),
        (lambda x: F.silu(x), lambda v: v / (1 + np.exp(-v))),
        (lambda x: x.clamp(-1, 1), lambda v: np.clip(v, -1, 1)),
        (lambda x: torch.clip(x, min=0.25), lambda v: np.where(v < 0.25, 0.25, v)),
    ],
    ids=[
        "sigmoid",
        "tanh",
        "rsqrt",
        "sin",
        "cos",
        "erf",
        "relu",
        "gelu",
        "gelu_tanh",
        "silu",
        "clamp",
        "clip_min",
    ],  # fmt: skip
)
def test_activations_match_numpy_to_float32_precision(ctx, call, want):
    with np.errstate(all="ignore"):
        expected = want(_EDGES.astype(np.float64)).astype(np.float32)
    got = call(torch.tensor(_EDGES))
    assert got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), expected, rtol=2e-6, atol=0, equal_nan=True)


def test_activation_dtypes_and_in_place_forms_as_torch(ctx):
    ints = torch.tensor(np.array([-2, 0, 3], np.int32))
    assert ints.relu().dtype is torch.int32 and ints.relu().tolist() == [0, 0, 3]
    assert ints.sigmoid().dtype is torch.float32  # integer input: the default float dtype
    assert ints.clamp(0, 2).tolist() == [0, 0, 2] and ints.clamp(0, 2).dtype is torch.int32
    assert ints.clamp(0.5).dtype is torch.float32 and ints.clamp(0.5).tolist() == [0.5, 0.5, 3]
    half = torch.tensor(np.array([-1, 0.1, 3], np.float16))
    assert half.tanh().dtype is torch.float16 and F.gelu(half).dtype is torch.float16
    halves = np.array([-1, 0.1, 3], np.float16)
    np.testing.assert_array_equal(
        half.tanh().numpy(), np.tanh(halves.astype(np.float32)).astype(np.float16)
    )
    x = torch.tensor(np.array([-1.0, 2.0], np.float32))
    same = F.relu(x, inplace=True)
    assert same is x and x.tolist() == [0.0, 2.0]
    x.sigmoid_().clamp_(max=0.75)
    np.testing.assert_allclose(x.numpy(), [0.5, 0.75], rtol=1e-6)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda i, x: F.gelu(i), "gelu of 't"),
        (lambda i, x: F.silu(i), "silu of 't"),
        (lambda i, x: F.gelu(x, approximate="exact"), "approximate must be 'none' or 'tanh'"),
        (lambda i, x: x.clamp(), "at least one of 'min' or 'max' must not be None"),
        (lambda i, x: x.clamp("0"), "clamp: min and max must be numbers or tensors, got str"),
        (lambda i, x: x.clamp_(torch.zeros(2, 2)), "the bounds broadcast the result to (2, 2)"),
        (lambda i, x: i.clamp_(0.5), "can't be cast to the in-place output type torch.int32"),
        (lambda i, x: i.sigmoid_(), "can't be cast to the in-place output type torch.int32"),
        # bounds past the dtype wrapped: int32 min=2**40 gave zeros, uint8 min=256 too
        (lambda i, x: i.clamp(min=2**40), "scalar 1099511627776 does not fit torch.int32"),
        (lambda i, x: i.to(torch.uint8).clamp(256), "scalar 256 does not fit torch.uint8 [0, 255]"),
        (lambda i, x: i.clamp(10**20), "scalar 100000000000000000000 does not fit torch.int32"),
    ],
)
def test_activation_misuse_is_refused_by_name(ctx, call, message):
    ints = torch.tensor(np.array([-2, 3], np.int32))
    floats = torch.tensor(np.array([-2.0, 3.0], np.float32))
    with pytest.raises(TensorError) as info:
        call(ints, floats)
    assert message in str(info.value)


@pytest.mark.parametrize(
    "exponent", [0, 1, 2, 3, -1, -2, 0.5, 1.5, -0.5, 2.5, math.inf, -math.inf, math.nan]
)
def test_pow_of_a_number_matches_numpy_at_the_edges(ctx, exponent):
    values = np.array(
        [-2.0, -1.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, np.nan, np.inf, -np.inf], np.float32
    )
    with np.errstate(all="ignore"):
        want = np.power(values.astype(np.float64), exponent).astype(np.float32)
    x = torch.tensor(values)
    for got in (x**exponent, x.pow(exponent), torch.pow(x, exponent)):
        assert got.dtype is torch.float32
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-7, atol=0, equal_nan=True)
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got.numpy()[numbers]), np.signbit(want[numbers]))


def test_pow_dtypes_bases_and_in_place_as_torch(ctx):
    ints = torch.tensor(np.array([-3, -1, 0, 2, 7], np.int32))
    cubed = ints**3
    assert cubed.dtype is torch.int32 and cubed.tolist() == [-27, -1, 0, 8, 343]
    assert (ints**0).tolist() == [1] * 5
    assert (ints**0.5).dtype is torch.float32  # an integer tensor to a float power
    wraps = torch.tensor(np.array([1 << 16], np.int32)) ** 2
    assert wraps.tolist() == [0]  # int32 wraps, as torch's does
    exponents = torch.tensor(np.array([0, 1, 10], np.int32))
    assert (2.0**exponents).tolist() == [1.0, 2.0, 1024.0]
    assert torch.pow(3, torch.tensor([3.0])).tolist() == [27.0]
    x = torch.tensor([1.5, -2.0])
    x **= 2
    assert x.tolist() == [2.25, 4.0]
    assert x.pow_(0.5).tolist() == [1.5, 2.0]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda i, x: i**-1, "Integers to negative integer powers are not allowed"),
        (lambda i, x: i.pow_(0.5), "can't be cast to the in-place output type torch.int32"),
        (lambda i, x: x ** "2", "the exponent must be a number or a Tensor"),
        (lambda i, x: i.pow_(x), "can't be cast to the in-place output type torch.int32"),
    ],
)
def test_pow_misuse_is_refused_by_name(ctx, call, message):
    ints = torch.tensor(np.array([-2, 3], np.int32))
    floats = torch.tensor(np.array([-2.0, 3.0], np.float32))
    with pytest.raises(TensorError) as info:
        call(ints, floats)
    assert message in str(info.value)


def test_norm_matches_numpy_over_any_dims(ctx):
    values = np.random.default_rng(0).standard_normal((3, 4, 5)).astype(np.float32)
    x = torch.tensor(values)
    np.testing.assert_allclose(x.norm().item(), np.linalg.norm(values.ravel()), rtol=1e-6)
    np.testing.assert_allclose(
        torch.norm(x, dim=1).numpy(), np.linalg.norm(values, axis=1), rtol=1e-6
    )
    np.testing.assert_allclose(
        x.norm(p=1, dim=(0, 2), keepdim=True).numpy(),
        np.abs(values).sum(axis=(0, 2), keepdims=True),
        rtol=1e-6,
    )
    np.testing.assert_allclose(
        x.norm(2.0, dim=(1, 2)).numpy(), np.sqrt((values * values).sum(axis=(1, 2))), rtol=1e-6
    )
    assert torch.tensor(values.astype(np.float16)).norm().dtype is torch.float16


@pytest.mark.parametrize(
    ("p", "dtype", "message"),
    [
        (3, torch.float32, "norm(p=3): p is 1, 2 or 'fro' here"),
        (float("inf"), torch.float32, "norm(p=inf): p is 1, 2 or 'fro' here"),
        ("nuc", torch.float32, "norm(p='nuc'): p is 1, 2 or 'fro' here"),
        (2, torch.int32, "norm(): input dtype should be floating point (got torch.int32"),
    ],
)
def test_norm_refuses_what_it_cannot_compute(ctx, p, dtype, message):
    with pytest.raises(TensorError) as info:
        torch.ones(4, dtype=dtype).norm(p)
    assert message in str(info.value)


def test_norm_to_an_integer_dtype_blames_the_dtype_argument(ctx):
    # it said the float32 input was not floating point
    with pytest.raises(TensorError) as info:
        torch.norm(torch.ones(4), dtype=torch.int32)
    assert "the desired output dtype should be floating point (got dtype=torch.int32" in str(
        info.value
    )


def test_var_and_std_match_numpy(ctx):
    values = (np.random.default_rng(0).standard_normal((3, 4, 5)) * 3 + 100).astype(np.float32)
    x = torch.tensor(values)
    wide = values.astype(np.float64)
    np.testing.assert_allclose(x.var().item(), wide.var(ddof=1), rtol=1e-5)
    np.testing.assert_allclose(torch.var(x, 1).numpy(), wide.var(axis=1, ddof=1), rtol=1e-5)
    np.testing.assert_allclose(
        x.std(dim=-1, unbiased=False, keepdim=True).numpy(),
        wide.std(axis=-1, keepdims=True),
        rtol=1e-5,
    )
    np.testing.assert_allclose(
        torch.std(x, dim=(0, 2), correction=0).numpy(), wide.std(axis=(0, 2)), rtol=1e-5
    )
    assert x.var(dim=(0, 2), keepdim=True).shape == (1, 4, 1)
    np.testing.assert_allclose(x.var(False).item(), wide.var(), rtol=1e-5)  # var(unbiased)
    one = torch.tensor([5.0])
    assert math.isnan(one.var().item()) and one.var(correction=0).item() == 0.0
    assert torch.tensor([[1.0], [2.0]]).T.var().item() == 0.5  # a strided view


def test_var_refuses_integers_and_two_corrections(ctx):
    with pytest.raises(TensorError, match=r"std and var only support floating point dtypes"):
        torch.tensor([1, 2]).var()
    with pytest.raises(TensorError, match=r"give unbiased= or correction=, not both"):
        torch.ones(3).std(unbiased=True, correction=0)


def test_testing_assert_close_as_torch(ctx):
    a = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(a, torch.tensor([1.0, 2.0000001, 3.0]))  # float32 defaults
    with pytest.raises(AssertionError) as info:
        torch.testing.assert_close(a, torch.tensor([1.0, 2.0, 3.1]))
    lines = str(info.value).splitlines()
    assert lines[0] == "Tensor-likes are not close!"
    assert lines[2] == "Mismatched elements: 1 / 3 (33.3%)"
    assert lines[3].startswith("Greatest absolute difference: 0.0999") and lines[3].endswith(
        "at index (2,) (up to 1e-05 allowed)"
    )
    assert lines[4].endswith("at index (2,) (up to 1.3e-06 allowed)")
    torch.testing.assert_close(a, torch.tensor([1.0, 2.0, 3.1]), rtol=0.05, atol=0.0)
    half = torch.tensor([1.0, 2.0], dtype=torch.float16)
    torch.testing.assert_close(half, torch.tensor([1.0, 2.001], dtype=torch.float16))
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        torch.testing.assert_close(a, torch.tensor([1, 2, 3]))
    with pytest.raises(AssertionError, match="custom"):
        torch.testing.assert_close(a, a + 1, msg="custom")
    nan = torch.tensor([float("nan")])
    torch.testing.assert_close(nan, nan, equal_nan=True)
    with pytest.raises(AssertionError):
        torch.testing.assert_close(nan, nan)
    with pytest.raises(ValueError, match="Both 'rtol' and 'atol' must be either specified"):
        torch.testing.assert_close(a, a, rtol=1e-3)


def test_assert_close_compares_integers_exactly(ctx):
    big = torch.tensor([2**53, 7], dtype=torch.int64)
    torch.testing.assert_close(big, torch.tensor([2**53, 7], dtype=torch.int64))
    with pytest.raises(AssertionError) as info:  # equal as float64, as they were compared
        torch.testing.assert_close(big, torch.tensor([2**53 + 1, 7], dtype=torch.int64))
    assert str(info.value).splitlines() == [
        "Tensor-likes are not equal!",
        "",
        "Mismatched elements: 1 / 2 (50.0%)",
        "Greatest absolute difference: 1 at index (0,)",
        f"Greatest relative difference: {1 / 2**53!r} at index (0,)",
    ]
    with pytest.raises(AssertionError) as info:  # a 0-dim pair: torch's scalar message
        torch.testing.assert_close(big[0], big[0] + 1)
    assert str(info.value).splitlines() == [
        "Scalars are not equal!",
        "",
        f"Expected {2**53 + 1} but got {2**53}.",
        "Absolute difference: 1",
        f"Relative difference: {1 / (2**53 + 1)!r}",
    ]
    with pytest.raises(AssertionError) as info:
        torch.testing.assert_close(1.0, 1.5)
    assert str(info.value).splitlines() == [
        "Scalars are not close!",
        "",
        "Expected 1.5 but got 1.0.",
        "Absolute difference: 0.5 (up to 1e-07 allowed)",
        "Relative difference: 0.3333333333333333 (up to 1e-07 allowed)",
    ]
    with pytest.raises(AssertionError, match="Scalars are not equal!"):
        torch.testing.assert_close(2**53, 2**53 + 1)  # Python ints, as torch's NumberPair
    torch.testing.assert_close(2**70, 2**70)
    top = np.array([2**64 - 1], np.uint64)
    with pytest.raises(AssertionError, match="Greatest absolute difference: 1 at index"):
        torch.testing.assert_close(top, top - np.uint64(1))
    flags = torch.tensor([True, False, True])
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 3"):
        torch.testing.assert_close(flags, torch.tensor([True, True, True]))
    with pytest.raises(AssertionError, match="Booleans mismatch: True is not False"):
        torch.testing.assert_close(True, False)


def test_assert_close_checks_dtypes_as_torch(ctx):
    ints = torch.tensor([1, 2], dtype=torch.int64)
    with pytest.raises(
        AssertionError, match="attribute 'dtype' do not match: torch.int64 != torch.int32"
    ):
        torch.testing.assert_close(ints, ints.int())
    torch.testing.assert_close(ints, ints.int(), check_dtype=False)
    with pytest.raises(AssertionError, match="attribute 'dtype' do not match"):
        torch.testing.assert_close(np.arange(3), np.arange(3.0))
    with pytest.raises(AssertionError, match=r"The \(d\)types do not match: <class 'int'>"):
        torch.testing.assert_close(1, 1.0)
    torch.testing.assert_close(1, 1.0, check_dtype=False)
    # the looser dtype's default tolerances, as torch: float32's for int64 with float32
    near = torch.tensor([1.0, 2.000001])
    torch.testing.assert_close(ints, near, check_dtype=False)
    torch.testing.assert_close(near, ints, check_dtype=False)


def test_assert_close_compares_sequences_and_mappings_item_by_item_as_torch(ctx):
    close = torch.testing.assert_close
    close([1, 2, (3.0,)], (1, 2, [3.0]))  # any two sequences, each item its own pair
    close({"b": [1], "a": torch.ones(2)}, {"a": torch.ones(2), "b": [1]})
    with pytest.raises(AssertionError) as info:
        close([1, 2], [1, 2, 3])
    assert str(info.value) == "The length of the sequences mismatch: 2 != 3"
    with pytest.raises(AssertionError) as info:  # each item keeps its own type rules
        close([1, 2], [1.0, 2.0])
    assert str(info.value) == (
        "The (d)types do not match: <class 'int'> != <class 'float'>.\n\n"
        "The failure occurred for item [0]"
    )
    close([1, 2], [1.0, 2.0], check_dtype=False)
    with pytest.raises(AssertionError) as info:
        close([torch.ones(2), torch.ones(3)], [torch.ones(2), torch.zeros(3)])
    assert str(info.value).startswith("Tensor-likes are not close!")
    assert str(info.value).endswith("\n\nThe failure occurred for item [1]")
    with pytest.raises(AssertionError) as info:
        close({"a": 1, "c": 2}, {"a": 1, "b": 2})
    assert str(info.value) == (
        "The keys of the mappings do not match:\n"
        "Missing keys in the actual mapping: ['b']\n"
        "Additional keys in the actual mapping: ['c']"
    )
    with pytest.raises(AssertionError, match=r"item \['x'\]\[1\]\[1\]$"):
        close({"x": [1, [2, 3]]}, {"x": [1, [2, 4]]})
    with pytest.raises(AssertionError) as info:
        close([2**60], [2**60 + 1])  # Python ints compare exactly, not as one float array
    assert "Absolute difference: 1" in str(info.value)
    with pytest.raises(TypeError, match=r"<class 'str'> and <class 'str'>.\n\n.*item \[0\]"):
        close(["a"], ["a"])
    with pytest.raises(TypeError, match="No comparison pair"):
        close([1.0], torch.ones(1))
    with pytest.raises(AssertionError) as info:
        close([1], [2], msg="custom")
    assert str(info.value) == "custom"
    with pytest.raises(AssertionError, match=r"(?s)^> Scalars are not equal!.*item \[0\]$"):
        close([1], [2], msg=lambda generated: "> " + generated)


def test_assert_close_checks_the_device_and_reports_infinite_differences():
    # equal values on two devices passed; an infinite difference read 1.79769e+308
    with use_context(RuntimeContext("tiny", overrides=["system.device_level=pe"])):
        a = torch.tensor([1.0, float("inf")])
        there = a.to("ahbm:1")
        with pytest.raises(AssertionError) as info:
            torch.testing.assert_close(a, there)
        assert (
            str(info.value) == "The values for attribute 'device' do not match: ahbm:0 != ahbm:1."
        )
        torch.testing.assert_close(a, there, check_device=False)
        with pytest.raises(AssertionError) as info:
            torch.testing.assert_close(a, torch.tensor([1.0, -float("inf")]))
        assert "Greatest absolute difference: inf at index (1,)" in str(info.value)


def test_layer_norm_and_rms_norm_match_numpy(ctx):
    rng = np.random.default_rng(0)
    values = (rng.standard_normal((6, 3, 40)) * 2 + 5).astype(np.float32)
    weight = rng.standard_normal((3, 40)).astype(np.float32)
    bias = rng.standard_normal((3, 40)).astype(np.float32)
    x = torch.tensor(values)
    rows = values.reshape(6, -1).astype(np.float64)
    centred = rows - rows.mean(1, keepdims=True)
    want = (centred / np.sqrt(rows.var(1, keepdims=True) + 1e-5)).reshape(values.shape)
    got = F.layer_norm(x, (3, 40), torch.tensor(weight), torch.tensor(bias))
    np.testing.assert_allclose(got.numpy(), want * weight + bias, rtol=1e-5, atol=1e-5)
    wide = values.astype(np.float64)
    last = (wide - wide.mean(-1, keepdims=True)) / np.sqrt(wide.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(F.layer_norm(x, 40).numpy(), last, rtol=1e-5, atol=1e-5)
    rms = wide / np.sqrt((wide * wide).mean(-1, keepdims=True) + 1e-6) * weight[0]
    got = F.rms_norm(x, [40], torch.tensor(weight[0]), eps=1e-6)
    np.testing.assert_allclose(got.numpy(), rms, rtol=1e-5, atol=1e-5)
    assert F.rms_norm(x, 40).dtype is torch.float32


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda x: F.layer_norm(x, (4, 8)),
            "normalized_shape (4, 8) must be the input's last dims",
        ),
        (lambda x: F.layer_norm(x, 8, torch.ones(4)), "weight of shape (4,) must have the norm"),
        (lambda x: F.rms_norm(x.int(), 8), "rms_norm: expected a floating tensor"),
        # these raised ValueError, TypeError or AttributeError from inside the library
        (lambda x: F.layer_norm(x, 8, eps="a"), "layer_norm: eps must be a number"),
        (lambda x: F.rms_norm(x, 8, eps="a"), "rms_norm: eps must be a number"),
        (lambda x: F.layer_norm(x, None), "normalized_shape must be an int or a sequence"),
        (lambda x: F.rms_norm(x, 8.0), "rms_norm: normalized_shape must be an int or a"),
        (lambda x: F.layer_norm(x, (8.0,)), "layer_norm: normalized_shape must be an int"),
        (lambda x: F.rms_norm(x.tolist(), 8), "rms_norm: expected a Tensor, got list"),
    ],
)
def test_norm_misuse_names_the_call(ctx, call, message):
    with pytest.raises(TensorError) as info:
        call(torch.ones(2, 8))
    assert message in str(info.value)


def test_tanh_keeps_float32_precision_near_zero_and_the_sign_of_zero(ctx):
    values = np.array([1e-12, 1e-20, 1e-38, -0.0, -1e-5, 5e-5, 2e-4, 0.3], np.float32)
    got = torch.tensor(values).tanh().numpy()
    np.testing.assert_array_equal(got, np.tanh(values.astype(np.float64)).astype(np.float32))
    assert np.signbit(got[3])


def test_one_to_any_power_is_one(ctx):
    exponents = torch.tensor([math.inf, -math.inf, math.nan, 2.0])
    assert (1.0**exponents).tolist() == [1.0, 1.0, 1.0, 1.0]
    assert (2.0**exponents).tolist()[:2] == [math.inf, 0.0]


def test_assert_close_of_integers_says_not_equal_and_of_numbers_uses_float64(ctx):
    with pytest.raises(AssertionError) as info:
        torch.testing.assert_close(torch.tensor([1, 2, 3]), torch.tensor([1, 2, 4]))
    text = str(info.value)
    assert text.startswith("Tensor-likes are not equal!") and "allowed" not in text
    with pytest.raises(AssertionError, match="Scalars are not close"):
        torch.testing.assert_close(1.0, 1.0 + 1e-6)  # float64's rtol 1e-7, as torch
    torch.testing.assert_close(1.0, 1.0 + 1e-8)


def test_assert_close_picks_tolerances_by_type_not_by_value():
    torch.testing.assert_close(1e10, 1e10 + 1)  # floats: float64's rtol, whole or not
    torch.testing.assert_close(np.array([1.0], np.float32), np.array([1.000001], np.float32))
    with pytest.raises(AssertionError, match="Scalars are not close"):
        torch.testing.assert_close(2.0, 3.0)
    with pytest.raises(AssertionError, match="Scalars are not equal"):
        torch.testing.assert_close(2, 3)


def test_loss_and_linear_misuse_names_the_function(ctx):
    ints = torch.tensor([1, 2])
    with pytest.raises(TensorError, match="mse_loss: input and target must be floating"):
        F.mse_loss(ints, ints, reduction="sum")
    with pytest.raises(TensorError, match="linear: bias of shape \\(3,\\) does not add"):
        F.linear(torch.ones(2, 4), torch.ones(5, 4), torch.ones(3))
    assert torch.pow(math.inf, torch.tensor([0.0, 1.0])).tolist() == [1.0, math.inf]


def test_an_integer_sum_past_int32_is_an_int64_sum_as_torchs(ctx):
    big = np.array([[2**30, 2**30 - 1], [2**30, 1]], np.int32)
    x = torch.from_numpy(big)
    assert x.sum(1).tolist() == [2**31 - 1, 2**30 + 1]
    assert torch.sum(x[:, 1]).item() == 2**30  # a view, summed whole
    assert x.sum(0).dtype is torch.int64 and x.sum(0).tolist() == [2**31, 2**30]
    assert x.sum().item() == int(big.astype(np.int64).sum())
    assert torch.from_numpy(-big).sum(dim=(0, 1)).item() == -3221225472
    # an int64 sum past int64 wraps, as torch's does
    wide = torch.tensor([2**62, 2**62])
    assert wide.sum().item() == -(2**63)
    # asked for int32 explicitly, it wraps as torch's int32 sum does
    assert x.sum(0, dtype=torch.int32).tolist() == [-(2**31), 2**30]
    assert x.float().sum().item() == float(big.astype(np.int64).sum())


def test_lerp_of_float64_takes_one_minus_the_weight_in_double_as_torch(ctx):
    """torch's lerp kernel computes 1 - weight in its opmath type: double for float64."""
    a0 = np.linspace(-3.0, 5.0, 16)
    b0 = np.cos(np.arange(16.0)) * 7.0
    w = 0.7  # 1 - 0.7 differs between float32 and float64
    expected = b0 - (b0 - a0) * (1.0 - w)
    a, b = torch.from_numpy(a0), torch.from_numpy(b0)
    np.testing.assert_array_equal(torch.lerp(a, b, w).numpy(), expected)
    assert not np.array_equal(expected, b0 - (b0 - a0) * float(np.float32(1) - np.float32(w)))
    a.lerp_(b, w)
    np.testing.assert_array_equal(a.numpy(), expected)
