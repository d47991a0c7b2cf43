"""``trace``, ``kron``, ``cross``/``linalg.cross``, ``tensordot``, ``block_diag``, ``cdist``
and ``column_stack``: NumPy's values, torch's dtypes and errors, and device ops that cost
time in both modes and give the same values on both backends."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode, simulated_ps

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


RNG = np.random.default_rng(7)


def _t(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def test_trace_sums_the_diagonal_in_torchs_dtype(ctx):
    a = RNG.standard_normal((4, 6))
    assert torch.trace(_t(a)).item() == pytest.approx(np.trace(a))
    ints = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    got = ints.trace()
    assert got.dtype == torch.int64 and got.item() == 0 + 5 + 10
    assert _t(a).T.trace().item() == pytest.approx(np.trace(a))
    with pytest.raises(TensorError, match="trace: expected a matrix, but got tensor with dim 3"):
        torch.ones(2, 2, 2).trace()


@pytest.mark.parametrize(
    ("a_shape", "b_shape"), [((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 1, 2), (3,))]
)
def test_kron_is_numpys(ctx, a_shape, b_shape):
    a, b = RNG.standard_normal(a_shape), RNG.standard_normal(b_shape)
    np.testing.assert_allclose(torch.kron(_t(a), _t(b)).numpy(), np.kron(a, b))
    np.testing.assert_allclose(_t(a).kron(_t(b)).numpy(), np.kron(a, b))
    ints = torch.kron(torch.tensor([1, 2]), torch.tensor([[1.5]]))
    assert ints.dtype == torch.float32 and ints.tolist() == [[1.5, 3.0]]


def test_cross_is_numpys_along_any_dim_with_broadcast(ctx):
    a, b = RNG.standard_normal((5, 3)), RNG.standard_normal((1, 3))
    np.testing.assert_allclose(torch.linalg.cross(_t(a), _t(b)).numpy(), np.cross(a, b))
    np.testing.assert_allclose(torch.cross(_t(a.T), _t(b.T), dim=0).numpy(), np.cross(a, b).T)
    np.testing.assert_allclose(_t(a).cross(_t(b), dim=-1).numpy(), np.cross(a, b))
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim"):
        got = torch.cross(_t(a.T), _t(np.repeat(b.T, 5, 1)))  # the first dim of size 3
    np.testing.assert_allclose(got.numpy(), np.cross(a, b).T)
    with pytest.raises(TensorError, match="linalg.cross: inputs dimension 0 must have length 3"):
        torch.linalg.cross(torch.ones(2, 3), torch.ones(2, 3), dim=0)
    with pytest.raises(TensorError, match="must have the same number of dimensions"):
        torch.linalg.cross(torch.ones(2, 3), torch.ones(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(TensorError, match="no dimension of size 3"):
            torch.cross(torch.ones(2, 4), torch.ones(2, 4))


@pytest.mark.parametrize(
    "dims", [2, 0, 1, ([1, 0], [0, 2]), ([2], [1]), [[-1], [1]], (1, 0)], ids=str
)
def test_tensordot_is_numpys(ctx, dims):
    a, b = RNG.standard_normal((3, 4, 5)), RNG.standard_normal((4, 5, 2))
    if dims == 2:
        np_dims = 2
    elif dims in (0, 1):
        a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2))
        np_dims = dims
    elif dims == (1, 0):
        a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 3))
        np_dims = ([1], [0])
    elif dims == ([1, 0], [0, 2]):
        b = RNG.standard_normal((4, 5, 3))
        np_dims = ([1, 0], [0, 2])
    else:
        np_dims = dims
    got = torch.tensordot(_t(a), _t(b), dims=dims)
    np.testing.assert_allclose(got.numpy(), np.tensordot(a, b, np_dims), rtol=1e-12)


def test_tensordot_errors_are_torchs(ctx):
    a, b = torch.ones(3, 4), torch.ones(5, 3)
    with pytest.raises(TensorError, match="tensordot expects dims >= 0, but got dims=-1"):
        torch.tensordot(a, b, -1)
    with pytest.raises(
        TensorError,
        match="contracted dimensions need to match, but first has size 4 in dim 1 and second "
        "has size 5 in dim 0",
    ):
        torch.tensordot(a, b, 1)
    with pytest.raises(TensorError, match="both dimension lists should have same length"):
        torch.tensordot(a, b, ([0, 1], [1]))
    with pytest.raises(TensorError, match="dim 0 appears multiple times"):
        torch.tensordot(a, torch.ones(3, 3), ([0, 0], [0, 1]))


def test_block_diag_places_the_blocks_on_a_zero_matrix(ctx):
    blocks = [np.ones((2, 2), np.float32), np.array(5), np.arange(3), np.zeros((0, 2))]
    got = torch.block_diag(*[_t(b) for b in blocks])
    want = np.zeros((4, 8), np.float64)
    want[:2, :2], want[2, 2], want[3, 3:6] = 1, 5, np.arange(3)
    assert got.dtype == torch.float64
    np.testing.assert_array_equal(got.numpy(), want)
    empty = torch.block_diag()
    assert empty.shape == (1, 0) and empty.dtype == torch.float32
    with pytest.raises(TensorError, match="Input 1 has 3 dimensions"):
        torch.block_diag(torch.ones(1), torch.ones(1, 1, 1))


def _distances(x, y, p):
    d = np.abs(x[..., :, None, :].astype(np.float64) - y[..., None, :, :])
    if p == 0:
        return (d != 0).sum(-1)
    if np.isinf(p):
        return d.max(-1)
    return (d**p).sum(-1) ** (1 / p)


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.0, 3.0])
@pytest.mark.parametrize("rows", [7, 30])
def test_cdist_is_the_p_norm_of_every_pair(ctx, p, rows):
    x = RNG.standard_normal((2, 6, 4)).astype(np.float32)
    y = RNG.standard_normal((1, rows, 4)).astype(np.float32)  # batch broadcast
    got = torch.cdist(_t(x), _t(y), p=p)
    assert got.dtype == torch.float32 and tuple(got.shape) == (2, 6, rows)
    np.testing.assert_allclose(got.numpy(), _distances(x, y, p), rtol=1e-4, atol=1e-4)


def test_cdist_compute_modes_and_errors(ctx):
    x = RNG.standard_normal((5, 3))
    for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        got = torch.cdist(_t(x), _t(x), compute_mode=mode)
        np.testing.assert_allclose(got.numpy(), _distances(x, x, 2), atol=1e-6)
    with pytest.raises(TensorError, match="fast is not a valid value for compute_mode"):
        torch.cdist(_t(x), _t(x), compute_mode="fast")
    with pytest.raises(TensorError, match="cdist only supports floating-point dtypes, X1 got"):
        torch.cdist(torch.ones(2, 2, dtype=torch.int64), _t(x))
    with pytest.raises(TensorError, match="cdist only supports at least 2D tensors, X2 got: 1D"):
        torch.cdist(_t(x), torch.ones(3))
    with pytest.raises(TensorError, match="same number of columns. X1: 3 X2: 2"):
        torch.cdist(_t(x), torch.ones(2, 2, dtype=torch.float64))
    with pytest.raises(TensorError, match="cdist only supports non-negative p values"):
        torch.cdist(_t(x), _t(x), p=-1)


def test_column_stack_is_numpys(ctx):
    parts = [np.arange(3), np.arange(6).reshape(3, 2), np.arange(3) * 10]
    got = torch.column_stack([_t(p) for p in parts])
    np.testing.assert_array_equal(got.numpy(), np.column_stack(parts))
    assert torch.column_stack((torch.tensor(1), torch.tensor(2))).tolist() == [[1, 2]]
    with pytest.raises(TensorError, match="torch.column_stack needs a non-empty sequence"):
        torch.column_stack([])


def _products(context):
    rng = np.random.default_rng(8)
    x = _t(rng.standard_normal((40, 16)).astype(np.float32))
    y = _t(rng.standard_normal((24, 16)).astype(np.float32))
    start = context.now
    results = [
        torch.cdist(x, y),
        torch.cdist(x[:20], y[:20], p=1),
        torch.tensordot(x, y, ([1], [1])),
        torch.kron(x[:4, :4], y[:4, :4]),
        torch.linalg.cross(x[:, :3], y[:1, :3]),
        torch.block_diag(x[:3], y[:2]),
        x[:16].trace(),
    ]
    return context.now - start, results


def test_products_cost_time_in_both_modes_and_agree_on_both_backends():
    times, (detailed, fast) = in_every_mode(_products)
    assert all(t > 0 for t in times) and times[0] == times[1]
    assert_same_values(detailed, fast)


def test_a_cdist_costs_more_for_more_points_in_either_form():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x, y = torch.ones(32, 64), torch.ones(32, 64)
        for mode in ("use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
            costs = [
                simulated_ps(context, lambda n=n, m=mode: torch.cdist(x[:n], y, compute_mode=m))
                for n in (4, 32)
            ]
            assert 0 < costs[0] < costs[1]
