"""Backward of the padding, reordering, repeating, indexing and diagonal ops
(``index_formulas``) and of the further pointwise and matrix ops
(``more_pointwise_formulas``): gradients against NumPy central differences in float64,
each with torch's node name."""

from __future__ import annotations

import numpy as np
import pytest
from gradcheck import check

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module", autouse=True)
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _index(values, dtype=np.int64):
    return np.array(values, dtype=dtype)


def _t_index(values):
    return torch.tensor(_index(values))


def _np_pad(x, amounts, value=0.0):
    """``F.pad`` in NumPy (negative amounts crop)."""
    for i in range(len(amounts) // 2):
        d = x.ndim - 1 - i
        before, after = amounts[2 * i], amounts[2 * i + 1]
        widths = [(0, 0)] * x.ndim
        widths[d] = (max(before, 0), max(after, 0))
        x = np.pad(x, widths, constant_values=value)
        n = x.shape[d]
        x = np.take(x, range(max(-before, 0), n - max(-after, 0)), axis=d)
    return x


PAD_CASES = [(1, 2), (1, 0, 2, 1), (-1, 2, 1, -1), (0, 0, 1, 1, 2, 0)]


@pytest.mark.parametrize("amounts", PAD_CASES)
def test_constant_pad(amounts):
    check(
        lambda x: F.pad(x, amounts, value=0.5),
        lambda x: _np_pad(x, amounts, 0.5),
        (2, 3, 4),
        node="ConstantPadNdBackward0",
    )


@pytest.mark.parametrize(
    ("module", "amounts"),
    [
        (nn.ZeroPad1d(2), (2, 2)),
        (nn.ZeroPad2d((1, 0, 2, 1)), (1, 0, 2, 1)),
        (nn.ConstantPad2d(1, 3.0), (1, 1, 1, 1)),
        (nn.ConstantPad3d((1, 0, 0, 1, 1, 0), -1.0), (1, 0, 0, 1, 1, 0)),
        (nn.ConstantPad1d((0, 1), 2.0), (0, 1)),
        (nn.ZeroPad3d(1), (1,) * 6),
    ],
)
def test_pad_modules(module, amounts):
    value = getattr(module, "value", 0.0)
    check(module, lambda x: _np_pad(x, amounts, value), (1, 2, 3, 2))


def test_pad_module_checks_padding():
    with pytest.raises(Exception, match="padding must be"):
        nn.ZeroPad2d((1, 2, 3))


INDEX_CASES = {
    "flip": (lambda x: x.flip(0, 2), lambda x: np.flip(x, (0, 2)), "FlipBackward0"),
    "torch.flip": (lambda x: torch.flip(x, [1]), lambda x: np.flip(x, 1), "FlipBackward0"),
    "fliplr": (lambda x: x.fliplr(), lambda x: np.fliplr(x), "FlipBackward0"),
    "flipud": (lambda x: torch.flipud(x), lambda x: np.flipud(x), "FlipBackward0"),
    "roll": (lambda x: x.roll(1, 2), lambda x: np.roll(x, 1, 2), "RollBackward0"),
    "roll_flat": (lambda x: x.roll(5), lambda x: np.roll(x, 5), "RollBackward0"),
    "roll_dims": (
        lambda x: torch.roll(x, (1, -2), (0, 2)),
        lambda x: np.roll(x, (1, -2), (0, 2)),
        "RollBackward0",
    ),
    "repeat": (lambda x: x.repeat(2, 1, 3), lambda x: np.tile(x, (2, 1, 3)), "RepeatBackward0"),
    "repeat_more_dims": (
        lambda x: x.repeat(2, 1, 1, 2),
        lambda x: np.tile(x, (2, 1, 1, 2)),
        "RepeatBackward0",
    ),
    "tile": (lambda x: torch.tile(x, (2, 3)), lambda x: np.tile(x, (2, 3)), "RepeatBackward0"),
    "repeat_interleave": (
        lambda x: x.repeat_interleave(2, dim=1),
        lambda x: np.repeat(x, 2, axis=1),
        "IndexSelectBackward0",
    ),
    "repeat_interleave_flat": (
        lambda x: torch.repeat_interleave(x, 3),
        lambda x: np.repeat(x, 3),
        "IndexSelectBackward0",
    ),
    "gather": (
        lambda x: x.gather(2, _t_index([[[0, 3, 3]], [[1, 1, 2]]])),
        lambda x: np.take_along_axis(x[:, :1], _index([[[0, 3, 3]], [[1, 1, 2]]]), 2),
        "GatherBackward0",
    ),
    "take_along_dim": (
        lambda x: torch.take_along_dim(x, _t_index([[[2], [0], [3]]]), dim=2),
        lambda x: np.take_along_axis(x, np.broadcast_to(_index([[[2], [0], [3]]]), (2, 3, 1)), 2),
        "GatherBackward0",
    ),
    "take_along_dim_flat": (
        lambda x: x.take_along_dim(_t_index([5, 0, 5, 23])),
        lambda x: x.reshape(-1)[_index([5, 0, 5, 23])],
        "GatherBackward0",
    ),
    "index_select": (
        lambda x: x.index_select(1, _t_index([2, 0, 2])),
        lambda x: x[:, [2, 0, 2]],
        "IndexSelectBackward0",
    ),
    "torch.index_select": (
        lambda x: torch.index_select(x, -1, _t_index([3, 1])),
        lambda x: x[..., [3, 1]],
        "IndexSelectBackward0",
    ),
    "topk": (
        lambda x: x.topk(2, dim=1).values,
        lambda x: -np.sort(-x, axis=1)[:, :2],
        "TopkBackward0",
    ),
    "topk_smallest": (
        lambda x: torch.topk(x, 3, largest=False)[0],
        lambda x: np.sort(x, axis=-1)[..., :3],
        "TopkBackward0",
    ),
    "sort": (lambda x: x.sort(dim=0)[0], lambda x: np.sort(x, axis=0), "SortBackward0"),
    "sort_descending": (
        lambda x: torch.sort(x, descending=True).values,
        lambda x: -np.sort(-x, axis=-1),
        "SortBackward0",
    ),
    "diagonal": (
        lambda x: x.diagonal(),
        lambda x: np.diagonal(x, 0, 0, 1),
        "DiagonalBackward0",
    ),
    "diagonal_offset_dims": (
        lambda x: x.diagonal(1, 2, 1),
        lambda x: np.diagonal(x, 1, 2, 1),
        "DiagonalBackward0",
    ),
    "diagonal_negative": (
        lambda x: torch.diagonal(x, -1, 0, 2),
        lambda x: np.diagonal(x, -1, 0, 2),
        "DiagonalBackward0",
    ),
    "broadcast_to": (
        lambda x: x[:, :1].broadcast_to((3, 2, 3, 4)),
        lambda x: np.broadcast_to(x[:, :1], (3, 2, 3, 4)),
        "ExpandBackward0",
    ),
}


@pytest.mark.parametrize("case", sorted(INDEX_CASES))
def test_index_ops(case):
    torch_fn, numpy_fn, node = INDEX_CASES[case]
    out = check(torch_fn, numpy_fn, (2, 3, 4))
    root = out.grad_fn
    while root.name() != node and root.next_functions:  # (through a slice or a tuple item)
        root = root.next_functions[0][0]
    assert root.name() == node


@pytest.mark.parametrize("offset", [0, 1, -2])
@pytest.mark.parametrize("shape", [(4,), (3, 5)])
def test_diag(shape, offset):
    node = "DiagEmbedBackward0" if len(shape) == 1 else "DiagonalBackward0"
    check(lambda x: x.diag(offset), lambda x: np.diag(x, offset), shape, node=node)


def test_trace():
    check(torch.trace, np.trace, (3, 4), node="TraceBackward0")


def test_scatter_ops():
    index = _index([[0, 2], [1, 0], [3, 2]])  # (no repeats: which write wins is unspecified)
    check(
        lambda x, s: x.scatter(1, torch.tensor(index), s),
        lambda x, s: _np_scatter(x, index, s),
        (3, 4),
        (3, 3),
        node="ScatterBackward0",
    )
    check(
        lambda x: torch.scatter(x, 1, torch.tensor(index), value=2.0),
        lambda x: _np_scatter(x, index, np.full((3, 2), 2.0)),
        (3, 4),
        node="ScatterBackward1",
    )
    unique = _index([[0, 2], [1, 0], [3, 2]])
    check(
        lambda x, s: x.scatter_add(1, torch.tensor(unique), s),
        lambda x, s: _np_scatter(x, unique, s, add=True),
        (3, 4),
        (3, 2),
        node="ScatterAddBackward0",
    )
    check(
        lambda x, s: x.index_add(0, _t_index([2, 0, 2]), s, alpha=0.5),
        lambda x, s: _np_index_add(x, _index([2, 0, 2]), s * 0.5),
        (3, 4),
        (3, 4),
        node="IndexAddBackward0",
    )


def _np_scatter(x, index, src, add=False):
    out = x.copy()
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            if add:
                out[i, index[i, j]] += src[i, j]
            else:
                out[i, index[i, j]] = src[i, j]
    return out


def _np_index_add(x, index, src):
    out = x.copy()
    np.add.at(out, index, src)
    return out


def _np_logit(x, eps=None):
    if eps is not None:
        x = np.clip(x, eps, 1 - eps)
    return np.log(x / (1 - x))


POSITIVE = ((2, 3), 0.2, 0.8)
POINTWISE_CASES = {
    "log2": (torch.log2, np.log2, [POSITIVE], "Log2Backward0"),
    "log10": (lambda x: x.log10(), np.log10, [POSITIVE], "Log10Backward0"),
    "exp2": (torch.exp2, np.exp2, [(2, 3)], "Exp2Backward0"),
    "deg2rad": (torch.deg2rad, np.deg2rad, [(2, 3)], "Deg2RadBackward0"),
    "rad2deg": (lambda x: x.rad2deg(), np.rad2deg, [(2, 3)], "Rad2DegBackward0"),
    "frac": (lambda x: (x * 3).frac(), lambda x: np.modf(x * 3)[0], [(2, 3)], "FracBackward0"),
    "logit": (torch.logit, _np_logit, [POSITIVE], "LogitBackward0"),
    "logit_eps": (
        lambda x: x.logit(0.3),
        lambda x: _np_logit(x, 0.3),
        [((2, 3), 0.05, 0.95)],
        "LogitBackward0",
    ),
    "hypot": (torch.hypot, np.hypot, [(2, 3), (3,)], "HypotBackward0"),
    "lerp_number": (
        lambda a, b: torch.lerp(a, b, 0.3),
        lambda a, b: a + 0.3 * (b - a),
        [(2, 3), (3,)],
        "LerpBackward0",
    ),
    "lerp_tensor": (
        lambda a, b, w: a.lerp(b, w),
        lambda a, b, w: a + w * (b - a),
        [(2, 3), (2, 3), (3,)],
        "LerpBackward1",
    ),
    "addcmul": (
        lambda x, a, b: torch.addcmul(x, a, b, value=0.5),
        lambda x, a, b: x + 0.5 * a * b,
        [(2, 3), (2, 3), (1, 3)],
        "AddcmulBackward0",
    ),
    "addcdiv": (
        lambda x, a, b: x.addcdiv(a, b, value=-2),
        lambda x, a, b: x - 2 * a / b,
        [(2, 3), (2, 3), ((2, 3), 0.5, 1.5)],
        "AddcdivBackward0",
    ),
    "addmm": (
        lambda x, a, b: torch.addmm(x, a, b, beta=0.5, alpha=2.0),
        lambda x, a, b: 0.5 * x + 2.0 * a @ b,
        [(3,), (2, 4), (4, 3)],
        "AddmmBackward0",
    ),
    "addmm_method": (
        lambda x, a, b: x.addmm(a, b),
        lambda x, a, b: x + a @ b,
        [(2, 3), (2, 4), (4, 3)],
        "AddmmBackward0",
    ),
    "baddbmm": (
        lambda x, a, b: torch.baddbmm(x, a, b, beta=2.0, alpha=-1.0),
        lambda x, a, b: 2.0 * x - a @ b,
        [(1, 3), (2, 3, 4), (2, 4, 3)],
        "BaddbmmBackward0",
    ),
    "outer": (torch.outer, np.outer, [(3,), (4,)], "MulBackward0"),
    "ger": (lambda a, b: a.ger(b), np.outer, [(3,), (4,)], "MulBackward0"),
    "dot": (torch.dot, np.dot, [(4,), (4,)], "DotBackward0"),
    "mv": (lambda m, v: m.mv(v), lambda m, v: m @ v, [(3, 4), (4,)], "MvBackward0"),
    "torch.mv": (torch.mv, lambda m, v: m @ v, [(3, 4), (4,)], "MvBackward0"),
    "pairwise_distance": (
        F.pairwise_distance,
        lambda a, b: np.linalg.norm(a - b + 1e-6, axis=-1),
        [(3, 4), (3, 4)],
        "NormBackward1",
    ),
    "pairwise_distance_p1_keepdim": (
        lambda a, b: F.pairwise_distance(a, b, p=1, keepdim=True),
        lambda a, b: np.abs(a - b + 1e-6).sum(-1, keepdims=True),
        [(3, 4), (4,)],
        "NormBackward1",
    ),
}


@pytest.mark.parametrize("case", sorted(POINTWISE_CASES))
def test_pointwise_and_products(case):
    torch_fn, numpy_fn, shapes, node = POINTWISE_CASES[case]
    check(torch_fn, numpy_fn, *shapes, node=node)


@pytest.mark.parametrize(
    ("op", "node"),
    [
        (torch.sign, "SignBackward0"),
        (lambda x: x.sgn(), "SgnBackward0"),
        (torch.floor, "FloorBackward0"),
        (lambda x: x.ceil(), "CeilBackward0"),
        (torch.round, "RoundBackward0"),
        (lambda x: x.round(decimals=1), "RoundBackward1"),
        (torch.trunc, "TruncBackward0"),
        (lambda x: x.fix(), "TruncBackward0"),
    ],
)
def test_step_functions_have_zero_gradient(op, node):
    x = torch.tensor([[-1.7, 0.2, 2.5]], dtype=torch.float64, requires_grad=True)
    out = op(x * 1.5)
    assert out.grad_fn.name() == node
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 3)))


SELECTION_CASES = {
    "index_tensor": (
        lambda x: x[_t_index([2, 0, 2])],
        lambda x: x[[2, 0, 2]],
        (3, 4),
        "IndexBackward0",
    ),
    "index_mixed": (
        lambda x: x[1:, _t_index([3, 3, 0])],
        lambda x: x[1:, [3, 3, 0]],
        (3, 4),
        "IndexBackward0",
    ),
    "index_two_tensors": (
        lambda x: x[_t_index([0, 2, 0]), :, _t_index([1, 1, 1])],
        lambda x: x[[0, 2, 0], :, [1, 1, 1]],
        (3, 2, 4),
        "IndexBackward0",
    ),
    "index_mask": (
        lambda x: x[torch.tensor(np.array([True, False, True]))],
        lambda x: x[np.array([True, False, True])],
        (3, 4),
        "IndexBackward0",
    ),
    "masked_select": (
        lambda x: x.masked_select(torch.tensor(np.array([True, False, True, True]))),
        lambda x: x[np.broadcast_to(np.array([True, False, True, True]), (3, 4))],
        (3, 4),
        "MaskedSelectBackward0",
    ),
    "take": (
        lambda x: torch.take(x, _t_index([[0, -1], [5, 5]])),
        lambda x: x.reshape(-1)[_index([[0, -1], [5, 5]])],
        (3, 4),
        "TakeBackward0",
    ),
    "movedim": (
        lambda x: x.movedim(0, 2),
        lambda x: np.moveaxis(x, 0, 2),
        (2, 3, 4),
        "PermuteBackward0",
    ),
    "moveaxis": (
        lambda x: torch.moveaxis(x, (0, 1), (-1, 0)),
        lambda x: np.moveaxis(x, (0, 1), (-1, 0)),
        (2, 3, 4),
        "PermuteBackward0",
    ),
    "diff": (lambda x: x.diff(), lambda x: np.diff(x), (3, 4), "SubBackward0"),
    "diff_twice": (
        lambda x: torch.diff(x, n=2, dim=0),
        lambda x: np.diff(x, n=2, axis=0),
        (4, 3),
        "SubBackward0",
    ),
}


@pytest.mark.parametrize("case", sorted(SELECTION_CASES))
def test_selection_ops(case):
    torch_fn, numpy_fn, shape, node = SELECTION_CASES[case]
    check(torch_fn, numpy_fn, shape, node=node)


def _np_running(x, larger):
    return (np.maximum if larger else np.minimum).accumulate(x, axis=1)


@pytest.mark.parametrize(("name", "larger"), [("cummax", True), ("cummin", False)])
def test_cummax_cummin(name, larger):
    node = "CummaxBackward0" if larger else "CumminBackward0"
    check(lambda x: getattr(x, name)(1)[0], lambda x: _np_running(x, larger), (3, 5), node=node)


@pytest.mark.parametrize(
    ("name", "shapes", "np_fn"),
    [
        ("hstack", [(2, 3), (2, 1)], np.hstack),
        ("hstack", [(3,), (2,)], np.hstack),
        ("vstack", [(3,), (2, 3)], np.vstack),
        ("dstack", [(2, 3), (2, 3, 2)], np.dstack),
        ("column_stack", [(3,), (3, 2)], np.column_stack),
    ],
)
def test_stacks(name, shapes, np_fn):
    check(
        lambda *ts: getattr(torch, name)(list(ts)),
        lambda *arrays: np_fn(arrays),
        *shapes,
        node="CatBackward0",
    )


@pytest.mark.parametrize("name", ["dropout1d", "dropout2d", "dropout3d"])
def test_feature_dropout_records_its_product(name):
    shape = {"dropout1d": (2, 6, 3), "dropout2d": (2, 6, 3, 2), "dropout3d": (2, 6, 1, 2, 2)}[name]
    torch.manual_seed(3)
    x = torch.tensor(
        np.random.default_rng(1).uniform(-1, 1, shape), dtype=torch.float64, requires_grad=True
    )
    out = getattr(F, name)(x, 0.5)
    assert out.grad_fn.name() == "MulBackward0"
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 2.0, 0.0))


def _np_erfinv(y):
    """Inverse of erf by Newton steps from 0 (the tests stay well inside (-1, 1))."""
    import math

    x = np.zeros_like(y)
    erf = np.vectorize(math.erf)
    for _ in range(50):
        x = x - (erf(x) - y) / (2 / np.sqrt(np.pi) * np.exp(-x * x))
    return x


MORE_CASES = {
    "logaddexp": (torch.logaddexp, np.logaddexp, [(2, 3), (3,)], "LogaddexpBackward0"),
    "logaddexp2": (
        lambda a, b: a.logaddexp2(b),
        np.logaddexp2,
        [(2, 3), (2, 3)],
        "Logaddexp2Backward0",
    ),
    "xlogy": (
        torch.xlogy,
        lambda a, b: a * np.log(b),
        [(2, 3), ((2, 3), 0.5, 2.0)],
        "XlogyBackward0",
    ),
    "xlogy_number": (
        lambda a: a.xlogy(3.0),
        lambda a: a * np.log(3.0),
        [(2, 3)],
        "XlogyBackward2",
    ),
    "remainder": (
        lambda a, b: torch.remainder(a * 3, b),
        lambda a, b: np.mod(a * 3, b),
        [(2, 3), ((2, 3), 0.6, 0.9)],
        "RemainderBackward1",
    ),
    "remainder_number": (
        lambda a: (a * 3).remainder(0.7),
        lambda a: np.mod(a * 3, 0.7),
        [(2, 3)],
        "RemainderBackward0",
    ),
    "fmod": (
        lambda a, b: torch.fmod(a * 3, b),
        lambda a, b: np.fmod(a * 3, b),
        [(2, 3), ((2, 3), 0.6, 0.9)],
        "FmodBackward1",
    ),
    "nan_to_num": (torch.nan_to_num, np.nan_to_num, [(2, 3)], "NanToNumBackward0"),
    "copysign": (
        lambda a, b: a.copysign(b),
        np.copysign,
        [(2, 3), (3,)],
        "CopysignBackward0",
    ),
    "fmax": (torch.fmax, np.fmax, [(2, 3), (2, 3)], "FmaxBackward0"),
    "fmin": (lambda a, b: a.fmin(b), np.fmin, [(2, 3), (3,)], "FminBackward0"),
    "erfinv": (torch.erfinv, _np_erfinv, [((2, 3), -0.8, 0.8)], "ErfinvBackward0"),
    "sinc": (torch.sinc, np.sinc, [(2, 3)], "SincBackward0"),
}


@pytest.mark.parametrize("case", sorted(MORE_CASES))
def test_more_pointwise(case):
    torch_fn, numpy_fn, shapes, node = MORE_CASES[case]
    check(torch_fn, numpy_fn, *shapes, node=node)


def test_nan_to_num_gives_no_gradient_to_replaced_values():
    x = torch.tensor([1.0, float("nan"), float("inf")], dtype=torch.float64, requires_grad=True)
    torch.nan_to_num(x * 1.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0, 0.0, 0.0])


def _np_cdist(a, b, p):
    diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
    return (diff**p).sum(-1) ** (1 / p)


EINSUM_CASES = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bki", [(2, 2, 3), (2, 3, 2)]),
    ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("ik,j->ijk", [(2, 3), (4,)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("i,i", [(3,), (3,)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 2), (1, 2, 4, 2)]),
    ("ijk,j->k", [(2, 3, 2), (3,)]),
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("...ij,jk", [(2, 2, 3), (3, 4)]),
    ("b...,b->...", [(2, 3, 2), (2,)]),
    ("...d,...d->...", [(2, 3), (2, 3)]),
]


@pytest.mark.parametrize(("equation", "shapes"), EINSUM_CASES)
def test_einsum(equation, shapes):
    check(
        lambda *ts: torch.einsum(equation, *ts),
        lambda *arrays: np.asarray(np.einsum(equation, *arrays)),
        *shapes,
        node="EinsumBackward0",
    )


def test_einsum_operand_list():
    check(
        lambda a, b: torch.einsum("ij,jk->ik", [a, b]),
        lambda a, b: a @ b,
        (2, 3),
        (3, 2),
        node="EinsumBackward0",
    )


@pytest.mark.parametrize("p", [1.0, 2.0, 3.0, 0.5])
def test_cdist(p):
    check(
        lambda a, b: torch.cdist(a, b, p=p),
        lambda a, b: _np_cdist(a, b, p),
        (2, 3, 4),
        (1, 5, 4),
        node="CdistBackward0",
    )


def test_cdist_by_matmul():
    check(
        lambda a, b: torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
        lambda a, b: _np_cdist(a, b, 2.0),
        (3, 4),
        (5, 4),
        node="EuclideanDistBackward0",
    )


def _np_instance_norm(x, w=None, b=None, eps=1e-5):
    dims = tuple(range(2, x.ndim))
    mean = x.mean(dims, keepdims=True)
    var = x.var(dims, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    shape = (1, x.shape[1]) + (1,) * len(dims)
    if w is not None:
        out = out * w.reshape(shape) + b.reshape(shape)
    return out


def test_instance_norm():
    check(F.instance_norm, _np_instance_norm, (2, 3, 5), node="ViewBackward0")
    check(
        lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
        _np_instance_norm,
        (2, 3, 2, 3),
        (3,),
        (3,),
        node="ViewBackward0",
    )


ORDER_CASES = {
    "median_dim": (
        lambda x: x.median(1).values,
        lambda x: np.sort(x, 1)[:, (x.shape[1] - 1) // 2],
        "MedianBackward1",
    ),
    "median_all": (
        lambda x: x.median(),
        lambda x: np.sort(x.reshape(-1))[(x.size - 1) // 2],
        "MedianBackward0",
    ),
    "nanmedian_dim": (
        lambda x: torch.nanmedian(x, 0, keepdim=True)[0],
        lambda x: np.sort(x, 0)[[(x.shape[0] - 1) // 2]],
        "NanmedianBackward1",
    ),
    "kthvalue": (
        lambda x: x.kthvalue(2, 1)[0],
        lambda x: np.sort(x, 1)[:, 1],
        "KthvalueBackward0",
    ),
}


@pytest.mark.parametrize("case", sorted(ORDER_CASES))
def test_order_statistics(case):
    torch_fn, numpy_fn, node = ORDER_CASES[case]
    check(torch_fn, numpy_fn, (3, 4), node=node)


def test_mode_sends_the_gradient_to_its_index():
    x = torch.tensor([[1.0, 2.0, 2.0], [3.0, 3.0, 1.0]], dtype=torch.float64, requires_grad=True)
    values, indices = x.mode(1)
    assert values.grad_fn.name() == "ModeBackward0"
    values.sum().backward()
    expected = np.zeros((2, 3))
    expected[np.arange(2), indices.numpy()] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)


def test_tensor_split_unfold_broadcast_tensors():
    check(
        lambda x: torch.cat([p * (i + 1) for i, p in enumerate(x.tensor_split(3, dim=1))], 1),
        lambda x: np.concatenate(
            [p * (i + 1) for i, p in enumerate(np.array_split(x, 3, axis=1))], 1
        ),
        (2, 7),
    )
    check(
        lambda x: x.unfold(1, 3, 2),
        lambda x: np.stack([x[:, i : i + 3] for i in range(0, 5, 2)], 1),
        (2, 7),
        node="UnfoldBackward0",
    )
    check(
        lambda a, b: torch.stack(torch.broadcast_tensors(a, b)),
        lambda a, b: np.stack(np.broadcast_arrays(a, b)),
        (2, 1),
        (3,),
    )


def _np_block_diag(*arrays):
    blocks = [a.reshape(1, -1) if a.ndim < 2 else a for a in arrays]
    rows, cols = sum(b.shape[0] for b in blocks), sum(b.shape[1] for b in blocks)
    out, r, c = np.zeros((rows, cols)), 0, 0
    for b in blocks:
        out[r : r + b.shape[0], c : c + b.shape[1]] = b
        r, c = r + b.shape[0], c + b.shape[1]
    return out


def _np_index_copy(x, index, source):
    out = x.copy()
    out[index] = source
    return out


def _np_masked_scatter(x, mask, source):
    out = x.copy()
    mask = np.broadcast_to(mask, x.shape)
    out[mask] = source.reshape(-1)[: mask.sum()]
    return out


MASK = np.array([[True, False, True, True]])
FURTHER_CASES = {
    "tensordot": (
        lambda a, b: torch.tensordot(a, b, dims=([1, 0], [0, 2])),
        lambda a, b: np.tensordot(a, b, axes=([1, 0], [0, 2])),
        [(2, 3, 4), (3, 5, 2)],
        "ViewBackward0",
    ),
    "tensordot_int": (
        lambda a, b: torch.tensordot(a, b, 1),
        lambda a, b: np.tensordot(a, b, 1),
        [(2, 3), (3, 4)],
        "ViewBackward0",
    ),
    "kron": (torch.kron, np.kron, [(2, 3), (2, 2)], "ViewBackward0"),
    "cross": (
        lambda a, b: a.cross(b, dim=1),
        lambda a, b: np.cross(a, b, axis=1),
        [(2, 3), (1, 3)],
        "LinalgCrossBackward0",
    ),
    "linalg.cross": (
        lambda a, b: torch.linalg.cross(a, b),
        lambda a, b: np.cross(a, b),
        [(2, 3), (2, 3)],
        "LinalgCrossBackward0",
    ),
    "block_diag": (
        lambda a, b, c: torch.block_diag(a, b, c),
        _np_block_diag,
        [(2, 3), (3,), (1, 2)],
        "BlockDiagBackward0",
    ),
    "lgamma": (
        torch.lgamma,
        lambda x: np.vectorize(__import__("math").lgamma)(x),
        [((2, 3), 0.5, 3.0)],
        "LgammaBackward0",
    ),
    "ldexp": (
        lambda a, b: torch.ldexp(a, b),
        lambda a, b: a * 2.0**b,
        [(2, 3), (3,)],
        "MulBackward0",
    ),
    "float_power": (
        lambda a, b: torch.float_power(a, b),
        lambda a, b: a**b,
        [((2, 3), 0.5, 2.0), (3,)],
        "PowBackward1",
    ),
    "float_power_number": (
        lambda a: a.float_power(2.5),
        lambda a: a**2.5,
        [((2, 3), 0.5, 2.0)],
        "PowBackward0",
    ),
    "true_divide": (
        lambda a, b: torch.true_divide(a, b),
        lambda a, b: a / b,
        [(2, 3), ((3,), 0.5, 1.5)],
        "DivBackward0",
    ),
    "index_copy": (
        lambda x, s: x.index_copy(0, _t_index([2, 0]), s),
        lambda x, s: _np_index_copy(x, [2, 0], s),
        [(3, 4), (2, 4)],
        "IndexCopyBackward0",
    ),
    "index_fill": (
        lambda x: x.index_fill(1, _t_index([1, 3]), -1.0),
        lambda x: np.where(np.isin(np.arange(4), [1, 3]), -1.0, x),
        [(3, 4)],
        "IndexFillBackward0",
    ),
    "index_put": (
        lambda x, v: x.index_put((_t_index([2, 0]),), v),
        lambda x, v: _np_index_copy(x, [2, 0], v),
        [(3, 4), (4,)],
        "IndexPutBackward0",
    ),
    "index_put_accumulate": (
        lambda x, v: x.index_put((_t_index([2, 0, 2]), _t_index([1, 1, 1])), v, accumulate=True),
        lambda x, v: _np_index_add_at(x, ([2, 0, 2], [1, 1, 1]), v),
        [(3, 4), (3,)],
        "IndexPutBackward0",
    ),
    "masked_scatter": (
        lambda x, s: x.masked_scatter(torch.tensor(MASK), s),
        lambda x, s: _np_masked_scatter(x, MASK, s),
        [(3, 4), (4, 3)],
        "MaskedScatterBackward0",
    ),
    "repeat_interleave_tensor": (
        lambda x: x.repeat_interleave(_t_index([1, 0, 3]), dim=0),
        lambda x: np.repeat(x, [1, 0, 3], axis=0),
        [(3, 4)],
        "IndexSelectBackward0",
    ),
    "repeat_interleave_tensor_flat": (
        lambda x: torch.repeat_interleave(x, _t_index([2, 1, 0, 1])),
        lambda x: np.repeat(x.reshape(-1), [2, 1, 0, 1]),
        [(2, 2)],
        "IndexSelectBackward0",
    ),
}


def _np_index_add_at(x, index, values):
    out = x.copy()
    np.add.at(out, index, values)
    return out


@pytest.mark.parametrize("case", sorted(FURTHER_CASES))
def test_further_ops(case):
    torch_fn, numpy_fn, shapes, node = FURTHER_CASES[case]
    check(torch_fn, numpy_fn, *shapes, node=node)


@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing):
    check(
        lambda a, b: torch.stack(torch.meshgrid(a, b, indexing=indexing)) * 1.5,
        lambda a, b: np.stack(np.meshgrid(a, b, indexing=indexing)) * 1.5,
        (3,),
        (4,),
    )


def test_bernoulli_gives_zero_gradient():
    p = torch.tensor([0.2, 0.7], dtype=torch.float64, requires_grad=True)
    draw = torch.bernoulli(p)
    assert draw.grad_fn.name() == "BernoulliBackward0"
    (draw * 3).sum().backward()
    np.testing.assert_array_equal(p.grad.numpy(), [0.0, 0.0])


def _np_edge_pad(x, amounts, mode):
    widths = [(0, 0)] * x.ndim
    for i in range(len(amounts) // 2):
        widths[x.ndim - 1 - i] = (amounts[2 * i], amounts[2 * i + 1])
    return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge"}.get(mode, "wrap"))


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize(
    ("shape", "amounts"),
    [((2, 3, 5), (2, 1)), ((1, 2, 4, 3), (1, 2, 0, 3)), ((1, 3, 3, 4), (1, 1, 2, 2, 1, 0))],
)
def test_edge_pad(mode, shape, amounts):
    if mode == "reflect" and len(amounts) == 4 and amounts[3] >= shape[-2]:
        amounts = (1, 2, 0, 1)
    name = "Reflection" if mode == "reflect" else "Replication"
    node = "CopySlices" if mode == "circular" else f"{name}Pad{len(amounts) // 2}DBackward0"
    check(
        lambda x: F.pad(x, amounts, mode=mode),
        lambda x: _np_edge_pad(x, amounts, mode),
        shape,
        node=node,
    )


@pytest.mark.parametrize(
    ("module", "amounts", "mode"),
    [
        (nn.ReflectionPad1d(2), (2, 2), "reflect"),
        (nn.ReflectionPad2d((1, 0, 1, 1)), (1, 0, 1, 1), "reflect"),
        (nn.ReplicationPad2d(2), (2,) * 4, "replicate"),
        (nn.ReplicationPad3d((1, 0, 0, 1, 1, 1)), (1, 0, 0, 1, 1, 1), "replicate"),
        (nn.CircularPad1d((2, 3)), (2, 3), "circular"),
        (nn.CircularPad2d(1), (1,) * 4, "circular"),
    ],
)
def test_edge_pad_modules(module, amounts, mode):
    shape = (1, 2, 3) if len(amounts) == 2 else (1, 2, 3, 3)
    check(module, lambda x: _np_edge_pad(x, amounts, mode), shape)


def test_edge_pad_checks():
    x = torch.zeros(1, 2, 3)
    with pytest.raises(Exception, match="Padding size should be less than"):
        F.pad(x, (3, 0), mode="reflect")
    with pytest.raises(Exception, match="doesn't take in value argument"):
        F.pad(x, (1, 0), mode="replicate", value=1.0)
    with pytest.raises(Exception, match="wrapping around more than once"):
        F.pad(x, (4, 0), mode="circular")


def _np_scatter_reduce(x, index, src, reduce, include_self):
    out = x.copy()
    groups = {}
    for i in range(index.shape[0]):
        for j in range(index.shape[1]):
            groups.setdefault((i, index[i, j]), []).append(src[i, j])
    for (i, k), values in groups.items():
        pool = ([x[i, k]] if include_self else []) + values
        out[i, k] = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](pool)
    return out


@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "mean", "amax", "amin"])
def test_scatter_reduce(reduce, include_self):
    index = _index([[0, 2, 2], [1, 1, 3], [3, 0, 3]])
    check(
        lambda x, s: x.scatter_reduce(1, torch.tensor(index), s, reduce, include_self=include_self),
        lambda x, s: _np_scatter_reduce(x, index, s, reduce, include_self),
        (3, 4),
        (3, 3),
        node="ScatterReduceBackward0",
    )


def test_diff_with_prepend_and_append():
    check(
        lambda x, p, a: x.diff(n=2, dim=1, prepend=p, append=a),
        lambda x, p, a: np.diff(x, n=2, axis=1, prepend=p, append=a),
        (2, 3),
        (2, 1),
        (2, 2),
        node="SubBackward0",
    )


def test_pin_memory_and_frexp():
    check(lambda x: x.pin_memory(), lambda x: x, (2, 3), node="PinMemoryBackward0")
    check(
        lambda x: torch.frexp(x * 5).mantissa,
        lambda x: np.frexp(x * 5)[0],
        (2, 3),
        node="FrexpBackward0",
    )


@pytest.mark.parametrize(
    ("layer", "padding", "mode"),
    [
        (nn.Conv2d, 1, "reflect"),
        (nn.Conv2d, "same", "circular"),
        (nn.Conv1d, 2, "replicate"),
        (nn.Conv3d, (0, 1, 1), "reflect"),
    ],
)
def test_conv_padding_modes(layer, padding, mode):
    """A padding_mode convolves the input padded in that mode, without padding, as torch's
    ``_conv_forward``; its gradients flow back through the pad."""
    dims = {nn.Conv1d: 1, nn.Conv2d: 2, nn.Conv3d: 3}[layer]
    conv = layer(2, 3, 3, padding=padding, padding_mode=mode).double()
    assert f"padding_mode={mode}" in repr(conv)
    x = torch.tensor(
        np.random.default_rng(0).uniform(-1, 1, (1, 2) + (4,) * dims),
        dtype=torch.float64,
        requires_grad=True,
    )
    out = conv(x)
    amounts = conv._reversed_padding_repeated_twice  # noqa: SLF001 - torch's attribute
    reference = getattr(F, f"conv{dims}d")(F.pad(x, amounts, mode=mode), conv.weight, conv.bias)
    np.testing.assert_allclose(out.detach().numpy(), reference.detach().numpy(), atol=1e-12)
    assert tuple(out.shape[2:]) == (
        (4,) * dims if padding == "same" else tuple(reference.shape[2:])
    )
    out.sum().backward()
    got = x.grad.numpy().copy()
    x.grad = None
    reference.sum().backward()
    np.testing.assert_allclose(got, x.grad.numpy(), atol=1e-12)


def test_index_with_lists():
    check(lambda x: x[[2, 0, 2]], lambda x: x[[2, 0, 2]], (3, 4), node="IndexBackward0")
    check(
        lambda x: x[:, [1, 1], [0, 3]],
        lambda x: x[:, [1, 1], [0, 3]],
        (2, 3, 4),
        node="IndexBackward0",
    )


def test_rounding_division_and_mod():
    x = torch.tensor([[0.7, -1.2, 2.5]], dtype=torch.float64, requires_grad=True)
    d = torch.tensor([0.3, 0.4, 0.6], dtype=torch.float64, requires_grad=True)
    for out, node in (
        (torch.div(x, 0.3, rounding_mode="floor"), "DivBackward3"),
        (x.div(d, rounding_mode="trunc"), "DivBackward2"),
    ):
        assert out.grad_fn.name() == node
        out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros((1, 3)))
    np.testing.assert_array_equal(d.grad.numpy(), np.zeros(3))
    check(lambda a: (a * 3) % 0.7, lambda a: np.mod(a * 3, 0.7), (2, 3), node="RemainderBackward0")
    check(lambda a, b: a / b, lambda a, b: a / b, (2, 3), ((3,), 0.5, 1.5), node="DivBackward0")


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "nearest", "midpoint"])
def test_quantile(interpolation):
    check(
        lambda x: x.quantile(0.3, dim=1, interpolation=interpolation),
        lambda x: np.quantile(x, 0.3, axis=1, method=interpolation),
        (3, 6),
        node="QuantileBackward0",
    )


def test_quantile_of_many_q_over_every_element():
    qs = np.array([0.1, 0.5, 0.95])
    check(
        lambda x: torch.quantile(x, torch.tensor(qs), keepdim=True),
        lambda x: np.quantile(x, qs, keepdims=True),
        (3, 4),
        node="QuantileBackward0",
    )
    check(
        lambda x: x.quantile(torch.tensor(qs), dim=0, keepdim=True),
        lambda x: np.quantile(x, qs, axis=0, keepdims=True),
        (5, 2),
        node="QuantileBackward0",
    )


def test_as_strided_adds_overlapping_windows():
    check(
        lambda x: x.as_strided((3, 3), (2, 1)),
        lambda x: np.lib.stride_tricks.as_strided(x, (3, 3), (16, 8)).copy(),
        (8,),
        node="AsStridedBackward0",
    )


def test_random_draws_give_zero_gradients():
    mean = torch.tensor([0.0, 1.0], dtype=torch.float64, requires_grad=True)
    std = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    rate = torch.tensor([1.0, 3.0], dtype=torch.float64, requires_grad=True)
    p = torch.tensor([0.5, 0.5], dtype=torch.float64, requires_grad=True)
    draws = [
        (torch.normal(mean, std), "NormalBackward3"),
        (torch.normal(mean, 2.0), "NormalBackward1"),
        (torch.normal(0.0, std), "NormalBackward2"),
        (torch.poisson(rate), "PoissonBackward0"),
        (torch.bernoulli(rate * 0, p), "BernoulliBackward2"),
    ]
    for draw, node in draws:
        assert draw.grad_fn.name() == node
        draw.sum().backward()
    for leaf in (mean, std, rate, p):
        np.testing.assert_array_equal(leaf.grad.numpy(), [0.0, 0.0])


TIMED_OPS = {
    "pad_constant": lambda x: F.pad(x, (1, 2, 0, 1)),
    "pad_reflect": lambda x: F.pad(x, (2, 2, 1, 1), mode="reflect"),
    "roll": lambda x: x.roll(3, 2),
    "repeat": lambda x: x.repeat(1, 2, 1, 1),
    "gather": lambda x: x.gather(3, torch.zeros(2, 4, 8, 3, dtype=torch.int64)),
    "index_select": lambda x: x.index_select(1, torch.zeros(3, dtype=torch.int64)),
    "advanced_index": lambda x: x[:, torch.zeros(5, dtype=torch.int64)],
    "topk": lambda x: x.topk(3).values,
    "einsum": lambda x: torch.einsum("bchw,bcwk->bchk", x, x),
    "cdist": lambda x: torch.cdist(x, x),
    "quantile": lambda x: x.quantile(0.5, dim=-1),
    "addcmul": lambda x: torch.addcmul(x, x, x, value=0.5),
}


@pytest.mark.parametrize("case", sorted(TIMED_OPS))
def test_forward_costs_the_same_and_backward_costs_time(case):
    """Timing-only: the forward costs what it costs without autograd; the backward runs
    device ops and takes simulated time."""
    op = TIMED_OPS[case]
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.ones(2, 4, 8, 8)
        before = context.now
        op(x)
        plain = context.now - before
        leaf = torch.ones(2, 4, 8, 8, requires_grad=True)
        before = context.now
        out = op(leaf)
        recorded_forward = context.now - before
        assert recorded_forward == plain
        assert "NotImplemented" not in out.grad_fn.name()
        before = context.now
        out.backward(torch.ones(*out.shape))
        assert context.now > before
