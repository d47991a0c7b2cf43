"""What attention, pipeline and optimizer code reaches for, against NumPy.

``triu``/``tril`` (causal masks), ``scaled_dot_product_attention``,
``finfo``/``iinfo``, and the errors that name what to use where KernBench has
no equivalent (FSDP, pipelining).
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import (
    KernBenchError,
    TensorAttributeError,
    TensorError,
    TensorTypeError,
    UnsupportedModuleError,
)
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# ----------------------------------------------------------------------------- triu / tril


@pytest.mark.parametrize("shape", [(5, 7), (7, 5), (2, 3, 4, 4)])
@pytest.mark.parametrize("diagonal", [0, 1, -2, 9, -9])
def test_triu_tril_match_numpy(ctx, shape, diagonal):
    a = _values(shape)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(t.triu(diagonal).numpy(), np.triu(a, diagonal))
    np.testing.assert_array_equal(t.tril(diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(torch.triu(t, diagonal=diagonal).numpy(), np.triu(a, diagonal))
    np.testing.assert_array_equal(torch.tril(t, diagonal).numpy(), np.tril(a, diagonal))
    np.testing.assert_array_equal(t.numpy(), a)  # the out-of-place forms leave t alone


def test_triu_tril_in_place_and_out(ctx):
    a = _values((4, 6))
    t = torch.from_numpy(a)
    assert t.triu_(1) is t
    np.testing.assert_array_equal(t.numpy(), np.triu(a, 1))
    u = torch.from_numpy(a)
    u.tril_()
    np.testing.assert_array_equal(u.numpy(), np.tril(a))
    out = torch.empty(4, 6)
    assert torch.tril(torch.from_numpy(a), -1, out=out) is out
    np.testing.assert_array_equal(out.numpy(), np.tril(a, -1))
    # on a view: only the view's triangle is written
    w = torch.from_numpy(a)
    w[:, 2:].triu_()
    expected = a.copy()
    expected[:, 2:] = np.triu(a[:, 2:])
    np.testing.assert_array_equal(w.numpy(), expected)


def test_causal_masks_of_bool_and_int_tensors(ctx):
    mask = torch.triu(torch.ones(4, 4, dtype=torch.bool), diagonal=1)
    assert mask.dtype is torch.bool
    np.testing.assert_array_equal(mask.numpy(), np.triu(np.ones((4, 4), bool), 1))
    lower = torch.ones(3, 5, dtype=torch.int32).tril()
    assert lower.dtype is torch.int32
    np.testing.assert_array_equal(lower.numpy(), np.tril(np.ones((3, 5), np.int32)))
    scores = torch.from_numpy(_values((4, 4)))
    filled = scores.masked_fill(mask, float("-inf")).numpy()
    assert np.isneginf(filled[np.triu_indices(4, 1)]).all()


def test_triu_errors_name_the_call(ctx):
    with pytest.raises(TensorError, match="triu: input tensor must have at least 2 dimensions"):
        torch.ones(3).triu()
    with pytest.raises(TensorError, match="tril_: input tensor must have at least 2 dimensions"):
        torch.ones(3).tril_()
    with pytest.raises(TensorTypeError, match="argument 'diagonal' must be int, not float"):
        torch.triu(torch.ones(2, 2), 0.5)


# ------------------------------------------------------------ scaled_dot_product_attention


def _attention(q, k, v, keep=None, bias=None, scale=None):
    """NumPy's attention in float64: ``keep`` (bool) says which scores take part."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if keep is not None:
        scores = np.where(keep, scores, -np.inf)
    if bias is not None:
        scores = scores + bias
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("lengths", [(6, 6), (4, 7)])
def test_sdpa_causal_and_scaled_match_numpy(ctx, lengths):
    length, source = lengths
    q, k, v = (
        _values((2, 3, length, 8), 1),
        _values((2, 3, source, 8), 2),
        _values((2, 3, source, 5), 3),
    )
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    out = F.scaled_dot_product_attention(tq, tk, tv)
    assert tuple(out.shape) == (2, 3, length, 5)
    np.testing.assert_allclose(out.numpy(), _attention(q, k, v), rtol=1e-5, atol=1e-5)
    causal = np.tril(np.ones((length, source), bool))  # torch's: from the top-left corner
    got = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=0.3)
    np.testing.assert_allclose(
        got.numpy(), _attention(q, k, v, causal, scale=0.3), rtol=1e-5, atol=1e-5
    )


def test_sdpa_bool_and_float_masks_broadcast(ctx):
    q, k, v = _values((2, 4, 8), 1), _values((2, 6, 8), 2), _values((2, 6, 8), 3)
    keep = np.random.default_rng(4).random((4, 6)) < 0.7
    keep[:, 0] = True  # no row left without a key
    bias = _values((1, 4, 6), 5)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    got = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(keep))
    np.testing.assert_allclose(got.numpy(), _attention(q, k, v, keep), rtol=1e-5, atol=1e-5)
    got = F.scaled_dot_product_attention(tq, tk, tv, torch.from_numpy(bias))
    np.testing.assert_allclose(got.numpy(), _attention(q, k, v, bias=bias), rtol=1e-5, atol=1e-5)


def test_sdpa_grouped_query_heads(ctx):
    q, k, v = _values((1, 4, 5, 8), 1), _values((1, 2, 5, 8), 2), _values((1, 2, 5, 8), 3)
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    got = F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, enable_gqa=True)
    np.testing.assert_array_equal(tk.numpy(), k)  # the inputs are left as they were
    np.testing.assert_array_equal(tv.numpy(), v)
    kk, vv = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    expected = _attention(q, kk, vv, np.tril(np.ones((5, 5), bool)))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_sdpa_dropout_draws_from_the_rank_generator(ctx):
    x = torch.from_numpy(_values((2, 4, 8)))
    torch.manual_seed(3)
    first = F.scaled_dot_product_attention(x, x, x, dropout_p=0.5).numpy()
    torch.manual_seed(3)
    again = F.scaled_dot_product_attention(x, x, x, dropout_p=0.5).numpy()
    np.testing.assert_array_equal(first, again)
    plain = F.scaled_dot_product_attention(x, x, x).numpy()
    assert not np.allclose(first, plain)
    assert not F.scaled_dot_product_attention(x, x, x, dropout_p=1.0).numpy().any()


def test_sdpa_errors_are_torch_s(ctx):
    x = torch.ones(2, 4, 8)
    with pytest.raises(TensorError, match="attn_mask should not be set when is_causal=True"):
        F.scaled_dot_product_attention(x, x, x, attn_mask=torch.ones(4, 4), is_causal=True)
    with pytest.raises(TensorError, match="do not fit"):
        F.scaled_dot_product_attention(x, torch.ones(2, 4, 6), x)
    with pytest.raises(TensorError, match="must be a multiple of key's"):
        F.scaled_dot_product_attention(torch.ones(1, 3, 4, 8), torch.ones(1, 2, 4, 8),
                                       torch.ones(1, 2, 4, 8), enable_gqa=True)  # fmt: skip
    with pytest.raises(TensorError, match="dropout_p must be between 0 and 1"):
        F.scaled_dot_product_attention(x, x, x, dropout_p=1.5)


# ----------------------------------------------------------------------------- finfo / iinfo


def test_finfo_iinfo_give_torch_s_numbers(ctx):
    f32 = torch.finfo(torch.float32)
    assert (f32.bits, f32.eps, f32.max, f32.min) == (
        32, 1.1920928955078125e-07, 3.4028234663852886e38, -3.4028234663852886e38,
    )  # fmt: skip
    assert f32.tiny == f32.smallest_normal == 1.1754943508222875e-38 and f32.dtype == "float32"
    assert torch.finfo().eps == f32.eps  # the default dtype's
    f16 = torch.finfo(torch.half)
    assert (f16.max, f16.eps, f16.tiny, f16.resolution) == (
        65504.0,
        0.0009765625,
        6.103515625e-05,
        0.001,
    )
    bf16 = torch.finfo(torch.bfloat16)
    assert (bf16.bits, bf16.max, bf16.eps, bf16.tiny, bf16.resolution) == (
        16, 3.3895313892515355e38, 0.0078125, 1.1754943508222875e-38, 0.01,
    )  # fmt: skip
    assert torch.finfo(torch.float64).eps == np.finfo(np.float64).eps
    i32 = torch.iinfo(torch.int32)
    assert (i32.bits, i32.min, i32.max, i32.dtype) == (32, -(2**31), 2**31 - 1, "int32")
    assert torch.iinfo(torch.uint8).max == 255 and torch.iinfo(torch.int64).max == 2**63 - 1
    # the mask idiom: the most negative float instead of -inf
    scores = torch.zeros(2, 2).masked_fill(torch.ones(2, 2, dtype=torch.bool).triu(1), f32.min)
    assert scores.numpy()[0, 1] == np.finfo(np.float32).min


def test_finfo_iinfo_refuse_the_other_kind(ctx):
    with pytest.raises(TensorTypeError, match="requires a floating point input type.*iinfo"):
        torch.finfo(torch.int32)
    with pytest.raises(TensorTypeError, match="requires an integer input type.*finfo"):
        torch.iinfo(torch.float32)
    with pytest.raises(TensorTypeError, match="argument 'type' must be torch.dtype, not str"):
        torch.finfo("float32")


# ------------------------------------------------------- what there is not: DTensor, pipelining


@pytest.mark.parametrize(
    ("statement", "says"),
    [
        ("import kernbench.torch.float32", "it is an attribute; import kernbench.torch"),
        ("from kernbench.torch.distributed.tensor import DTensor", "no DTensor"),
        ("import kernbench.torch.distributed.tensor.experimental", "parallelize_module"),
        ("from kernbench.torch.distributed import pipelining", "pipeline_parallel.py"),
    ],
)
def test_imports_of_what_there_is_not_say_what_to_use(statement, says):
    with pytest.raises(UnsupportedModuleError, match=says) as caught:
        exec(statement, {})
    assert isinstance(caught.value, KernBenchError) and isinstance(caught.value, ImportError)
    assert "cannot import name" in str(caught.value)


def test_imports_that_exist_and_probes_still_work():
    namespace: dict = {}
    exec("from kernbench.torch import nn, cuda, float32, distributed", namespace)
    exec("import kernbench.torch.nn.functional as F2", namespace)
    assert namespace["F2"] is F
    exec("from kernbench.torch import autograd", namespace)
    exec("from kernbench.torch.nn.parallel import DistributedDataParallel", namespace)
    assert namespace["DistributedDataParallel"] is torch.nn.parallel.DistributedDataParallel
    try:  # code that probes for an optional module keeps working
        import kernbench.torch.no_such_module  # noqa: F401
    except ImportError:
        pass


def test_backward_of_a_tensor_outside_the_graph_is_torchs_error(ctx):
    with pytest.raises(TensorError, match="does not require grad and does not have a grad_fn"):
        torch.ones(3).sum().backward()


# ------------------------------------- square, neg, amax/amin, addmm/baddbmm, unflatten, movedim


def test_square_and_neg_match_numpy(ctx):
    a = _values((3, 4))
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(torch.square(t).numpy(), a * a)
    np.testing.assert_array_equal(t.neg().numpy(), -a)
    np.testing.assert_array_equal(torch.negative(t).numpy(), -a)
    u = torch.from_numpy(a)
    assert u.square_() is u
    np.testing.assert_array_equal(u.numpy(), a * a)
    assert u.neg_() is u
    np.testing.assert_array_equal(u.numpy(), -(a * a))
    small = torch.tensor([0, 1, 200], dtype=torch.uint8)
    assert small.neg_().tolist() == [0, 255, 56]  # wraps around, as torch
    with pytest.raises(TensorError, match="Negation, the `-` operator, on a bool tensor"):
        torch.neg(torch.ones(2, dtype=torch.bool))


@pytest.mark.parametrize("dim", [(), 0, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_amax_amin_match_numpy(ctx, dim, keepdim):
    a = _values((3, 4, 5))
    t = torch.from_numpy(a)
    axis = None if dim == () else dim
    np.testing.assert_array_equal(t.amax(dim, keepdim).numpy(), a.max(axis, keepdims=keepdim))
    np.testing.assert_array_equal(
        torch.amin(t, dim=dim, keepdim=keepdim).numpy(), a.min(axis, keepdims=keepdim)
    )
    with pytest.raises(TensorError, match="appears multiple times"):
        t.amax((0, -3))


def test_addmm_baddbmm_match_numpy(ctx):
    bias, m1, m2 = _values((4,), 1), _values((3, 5), 2), _values((5, 4), 3)
    got = torch.addmm(torch.from_numpy(bias), torch.from_numpy(m1), torch.from_numpy(m2))
    np.testing.assert_allclose(got.numpy(), bias + m1 @ m2, rtol=1e-6, atol=1e-6)
    got = torch.from_numpy(bias).addmm(
        torch.from_numpy(m1), torch.from_numpy(m2), beta=0.5, alpha=2.0
    )
    np.testing.assert_allclose(got.numpy(), 0.5 * bias + 2 * (m1 @ m2), rtol=1e-6, atol=1e-6)
    nan = torch.full((3, 4), float("nan"))
    got = torch.addmm(nan, torch.from_numpy(m1), torch.from_numpy(m2), beta=0)
    np.testing.assert_allclose(got.numpy(), m1 @ m2, rtol=1e-6, atol=1e-6)  # input ignored
    b0, b1, b2 = _values((2, 3, 4), 4), _values((2, 3, 5), 5), _values((2, 5, 4), 6)
    out = torch.empty(2, 3, 4)
    torch.baddbmm(
        torch.from_numpy(b0), torch.from_numpy(b1), torch.from_numpy(b2), alpha=0.25, out=out
    )
    np.testing.assert_allclose(out.numpy(), b0 + 0.25 * (b1 @ b2), rtol=1e-6, atol=1e-6)
    with pytest.raises(TensorError, match="addmm: mat1 must be a 2-D tensor, got \\(2, 3, 5\\)"):
        torch.addmm(torch.from_numpy(bias), torch.from_numpy(b1), torch.from_numpy(m2))
    with pytest.raises(TensorError, match="addmm: input of shape \\(7,\\) does not broadcast"):
        torch.addmm(torch.ones(7), torch.from_numpy(m1), torch.from_numpy(m2))


def test_unflatten_and_movedim_are_views(ctx):
    a = _values((2, 12, 3))
    t = torch.from_numpy(a)
    u = t.unflatten(1, (3, -1))
    assert tuple(u.shape) == (2, 3, 4, 3)
    np.testing.assert_array_equal(u.numpy(), a.reshape(2, 3, 4, 3))
    np.testing.assert_array_equal(torch.unflatten(t, -1, (1, 3)).numpy(), a.reshape(2, 12, 1, 3))
    m = torch.movedim(t, 0, -1)
    np.testing.assert_array_equal(m.numpy(), np.moveaxis(a, 0, -1))
    np.testing.assert_array_equal(
        t.moveaxis((0, 1), (2, 0)).numpy(), np.moveaxis(a, (0, 1), (2, 0))
    )
    u[0, 0, 0, 0] = 42.0  # views: writes reach the tensor
    m[1, 0, 1] = -7.0
    assert t[0, 0, 0].item() == 42.0 and t[1, 1, 0].item() == -7.0
    with pytest.raises(TensorError, match="don't multiply up to the size of dim 1"):
        t.unflatten(1, (5, -1))
    with pytest.raises(TensorError, match="only one dimension can be inferred"):
        t.unflatten(1, (-1, -1))
    with pytest.raises(TensorError, match="movedim: repeated dim in `source`"):
        t.movedim((0, 0), (1, 2))


# ----------------------------------------------------------------------------- einsum


@pytest.mark.parametrize(
    ("equation", "shapes"),
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("ij,jk", [(3, 4), (4, 5)]),
        ("bhqd,bhkd->bhqk", [(2, 3, 4, 8), (2, 3, 5, 8)]),
        ("bhqk,bhkd->bqhd", [(2, 3, 4, 5), (2, 3, 5, 8)]),
        ("...id,...jd->...ij", [(2, 3, 4, 8), (2, 3, 5, 8)]),
        ("bi,bi->b", [(4, 6), (4, 6)]),
        ("i,j->ij", [(3,), (4,)]),
        ("ij->ji", [(3, 4)]),
        ("ijk->j", [(3, 4, 5)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
        ("bij,jk->bik", [(2, 3, 4), (4, 5)]),
        ("ij,kl->", [(2, 3), (4, 5)]),
    ],
)
def test_einsum_matches_numpy(ctx, equation, shapes):
    arrays = [_values(shape, seed) for seed, shape in enumerate(shapes, 1)]
    got = torch.einsum(equation, *(torch.from_numpy(a) for a in arrays))
    expected = np.einsum(equation, *(a.astype(np.float64) for a in arrays))
    assert tuple(got.shape) == expected.shape
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-5)
    listed = torch.einsum(equation, [torch.from_numpy(a) for a in arrays])  # operands in a list
    np.testing.assert_allclose(listed.numpy(), expected, rtol=1e-5, atol=1e-5)


def test_einsum_errors_name_the_problem(ctx):
    a, b = torch.ones(3, 4), torch.ones(5, 6)
    with pytest.raises(TensorError, match="subscript 'j' has size 4 and, in operand 1, 5"):
        torch.einsum("ij,jk->ik", a, b)
    with pytest.raises(TensorError, match="number of subscripts in the equation \\(3\\)"):
        torch.einsum("ijk->i", a)
    with pytest.raises(TensorError, match="fewer operands were provided"):
        torch.einsum("ij,jk->ik", a)
    with pytest.raises(TensorError, match="subscript 'i' is repeated in operand 0"):
        torch.einsum("ii->i", torch.ones(3, 3))
    with pytest.raises(TensorError, match="output subscript z does not appear"):
        torch.einsum("ij->z", a)


# ------------------------------------------------------- repeats, reductions and norms


def test_repeat_tile_repeat_interleave_unbind_match_numpy(ctx):
    a = _values((2, 3))
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(t.repeat(2, 1, 2).numpy(), np.tile(a, (2, 1, 2)))
    np.testing.assert_array_equal(t.repeat((1, 3)).numpy(), np.tile(a, (1, 3)))
    np.testing.assert_array_equal(torch.tile(t, (2,)).numpy(), np.tile(a, 2))
    np.testing.assert_array_equal(t.repeat_interleave(2, dim=1).numpy(), np.repeat(a, 2, 1))
    np.testing.assert_array_equal(torch.repeat_interleave(t, 3).numpy(), np.repeat(a, 3))
    np.testing.assert_array_equal(
        t.repeat_interleave(torch.tensor(2), dim=-2, output_size=4).numpy(), np.repeat(a, 2, 0)
    )
    # grouped-query attention: each of 2 key heads serves 2 query heads
    k = _values((1, 2, 4, 3))
    np.testing.assert_array_equal(
        torch.from_numpy(k).repeat_interleave(2, dim=1).numpy(), np.repeat(k, 2, axis=1)
    )
    copy = t.repeat(1, 1)  # a copy even when nothing repeats, as torch
    copy[0, 0] = 99.0
    assert t[0, 0].item() == a[0, 0]
    rows = torch.unbind(t, 1)
    assert len(rows) == 3 and [r.tolist() for r in rows] == [list(c) for c in a.T.tolist()]
    rows[0][1] = -5.0  # views
    assert t[1, 0].item() == -5.0
    with pytest.raises(TensorError, match="can not be smaller than number of dimensions"):
        t.repeat(2)
    with pytest.raises(TensorError, match="a 1-D integer tensor of 2 counts .* got torch.int64"):
        t.repeat_interleave(torch.tensor([1, 2, 3]), dim=0)
    # per-slice repeats: read to the host (the size depends on them), then one gather
    np.testing.assert_array_equal(
        t.repeat_interleave(torch.tensor([2, 0]), dim=0).numpy(),
        np.repeat(t.numpy(), [2, 0], axis=0),
    )
    np.testing.assert_array_equal(
        torch.repeat_interleave(t, torch.tensor([1, 0, 3]), dim=1, output_size=4).numpy(),
        np.repeat(t.numpy(), [1, 0, 3], axis=1),
    )
    with pytest.raises(TensorError, match="repeats can not be negative"):
        t.repeat_interleave(torch.tensor([1, -1]), dim=0)


def test_clamp_min_max_reciprocal_outer_logsumexp_var_mean(ctx):
    a = _values((3, 4))
    t = torch.from_numpy(a)
    np.testing.assert_array_equal(torch.clamp_min(t, 0.5).numpy(), np.maximum(a, 0.5))
    np.testing.assert_array_equal(t.clamp_max(0.5).numpy(), np.minimum(a, 0.5))
    np.testing.assert_allclose(torch.reciprocal(t).numpy(), 1 / a, rtol=1e-6)
    assert torch.tensor([2, 4]).reciprocal().tolist() == [0.5, 0.25]  # ints give floats
    with pytest.raises(TensorError, match="can't be cast to the desired output type"):
        torch.tensor([2, 4]).reciprocal_()
    u, v = _values((3,), 2), _values((5,), 3)
    np.testing.assert_allclose(
        torch.outer(torch.from_numpy(u), torch.from_numpy(v)).numpy(), np.outer(u, v), rtol=1e-6
    )
    for dim, keepdim in ((-1, False), ((0, 1), True)):
        m = a.max(axis=dim, keepdims=True)
        expected = np.log(np.exp(a - m).sum(axis=dim, keepdims=True)) + m
        if not keepdim:
            expected = expected.squeeze(dim)
        np.testing.assert_allclose(torch.logsumexp(t, dim, keepdim).numpy(), expected, rtol=1e-6)
    stable = torch.tensor([[1000.0, 1000.0], [float("-inf"), float("-inf")]]).logsumexp(1)
    np.testing.assert_allclose(stable.numpy(), [1000 + np.log(2), -np.inf])
    var, mean = torch.var_mean(t, dim=-1, keepdim=True, unbiased=False)
    np.testing.assert_allclose(var.numpy(), a.var(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(mean.numpy(), a.mean(-1, keepdims=True), rtol=1e-5)
    std, mean = torch.std_mean(t, 0)
    np.testing.assert_allclose(std.numpy(), a.std(0, ddof=1), rtol=1e-5)


def test_linalg_norms_and_normalize_and_pad(ctx):
    a = _values((3, 4))
    t = torch.from_numpy(a)
    np.testing.assert_allclose(torch.linalg.vector_norm(t).item(), np.linalg.norm(a), rtol=1e-6)
    np.testing.assert_allclose(
        torch.linalg.vector_norm(t, 1, dim=-1).numpy(), np.abs(a).sum(-1), rtol=1e-6
    )
    np.testing.assert_allclose(torch.linalg.norm(t).item(), np.linalg.norm(a), rtol=1e-6)
    with pytest.raises(TensorError, match="ord=2 of a matrix is not here"):
        torch.linalg.norm(t, 2)
    with pytest.raises(KernBenchError, match="torch.linalg.svd is not in KernBench; .*numpy"):
        torch.linalg.svd(t)
    expected = a / np.linalg.norm(a, axis=-1, keepdims=True)
    np.testing.assert_allclose(F.normalize(t, dim=-1).numpy(), expected, rtol=1e-6)
    np.testing.assert_array_equal(F.pad(t, (1, 2)).numpy(), np.pad(a, ((0, 0), (1, 2))))
    np.testing.assert_array_equal(
        F.pad(t, (0, -1, 2, 0), value=7.0).numpy(),
        np.pad(a[:, :-1], ((2, 0), (0, 0)), constant_values=7.0),
    )
    with pytest.raises(TensorError, match="mode 'wrap': Unrecognised padding mode"):
        F.pad(t, (1, 1), mode="wrap")


def test_mv_and_type(ctx):
    a, v = _values((3, 4), 1), _values((4,), 2)
    np.testing.assert_allclose(
        torch.mv(torch.from_numpy(a), torch.from_numpy(v)).numpy(), a @ v, rtol=1e-6
    )
    with pytest.raises(TensorError, match="mv: expected a 2-D matrix and a 1-D vector"):
        torch.ones(4).mv(torch.ones(4))
    t = torch.from_numpy(a)
    assert t.type() == "torch.ahbm.FloatTensor" and t.half().type() == "torch.ahbm.HalfTensor"
    assert t.type(torch.bfloat16).dtype is torch.bfloat16
    assert t.type("torch.cuda.IntTensor").dtype is torch.int32
    assert t.type("torch.cuda.LongTensor").dtype is torch.int64
    assert t.double().type() == "torch.ahbm.DoubleTensor"
    with pytest.raises(TensorError, match="not a tensor type here"):
        t.type("torch.cuda.ComplexFloatTensor")


def test_grad_mode_switches_and_nn_names_say_what_to_write(ctx):
    with torch.enable_grad(), torch.set_grad_enabled(False):
        assert torch.is_grad_enabled() is False
    torch.set_grad_enabled(False)  # as a call, too
    assert torch.is_grad_enabled() is False
    torch.set_grad_enabled(True)
    assert torch.is_grad_enabled() is True

    @torch.enable_grad()
    def f(x):
        return x + 1

    assert f(torch.ones(2)).tolist() == [2.0, 2.0]
    for name, says in (
        ("CrossMapLRN2d", "the README's 'What kernbench.torch supports' lists what there is"),
    ):
        with pytest.raises(TensorAttributeError, match=f"no attribute '{name}': .*{says}"):
            getattr(torch.nn, name)
    with pytest.raises(KernBenchError, match="torch.fft is not in KernBench; .*numpy.fft"):
        torch.fft  # noqa: B018
