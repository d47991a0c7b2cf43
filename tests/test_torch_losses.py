"""kernbench.torch's ``log_softmax`` and ``torch.nn.functional``'s losses, ``dropout`` and
``one_hot``, against NumPy computed in float64.

Each runs on the tiny machine's device (its kernels cost simulated time); values are
compared with a tolerance right for float32.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context

TINY = "tiny"


@pytest.fixture
def ctx():
    context = RuntimeContext(TINY)
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _normal(shape, seed: int = 0, scale: float = 2.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def _log_softmax(a: np.ndarray, axis: int) -> np.ndarray:
    wide = a.astype(np.float64)
    z = wide - wide.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def _kernels(ctx, since: int) -> list[str]:
    return [row.tag for row in ctx.trace[since:] if row.kind == "kernel"]


# ----------------------------------------------------------------------------- log_softmax


@pytest.mark.parametrize(
    ("shape", "dim"), [((4, 7), 1), ((4, 7), 0), ((2, 3, 5), 1), ((3, 1500), -1)]
)
def test_log_softmax_matches_numpy_in_one_kernel(ctx, shape, dim):
    a = _normal(shape)
    x = torch.from_numpy(a)
    want = _log_softmax(a, dim)
    before = len(ctx.trace)
    got = torch.log_softmax(x, dim)
    assert _kernels(ctx, before) == ["_softmax_kernel"]
    assert got.shape == x.shape and got.dtype is torch.float32
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(x.log_softmax(dim).numpy(), want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(F.log_softmax(x, dim=dim).numpy(), want, rtol=1e-6, atol=1e-6)


def test_log_softmax_stays_finite_where_softmax_underflows(ctx):
    a = np.array([[0.0, -200.0, 1000.0], [-1e4, 0.0, -1e4]], np.float32)
    got = torch.tensor(a).log_softmax(-1).numpy()
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _log_softmax(a, -1), rtol=1e-6)
    assert (torch.tensor(a).softmax(-1).numpy() == 0).any()  # where log(softmax) is -inf


def test_log_softmax_takes_dtype_and_out(ctx):
    a = _normal((3, 4), seed=2)
    x16 = torch.from_numpy(a).half()
    got = F.log_softmax(x16, 1, dtype=torch.float32)
    assert got.dtype is torch.float32
    np.testing.assert_allclose(
        got.numpy(), _log_softmax(a.astype(np.float16), 1), rtol=1e-6, atol=1e-6
    )
    assert x16.log_softmax(1).dtype is torch.float16  # in float32, rounded once
    np.testing.assert_allclose(
        x16.log_softmax(1).float().numpy(), _log_softmax(a.astype(np.float16), 1), rtol=1e-3
    )
    out = torch.empty(3, 4)
    assert torch.log_softmax(torch.from_numpy(a), 1, out=out) is out
    np.testing.assert_allclose(out.numpy(), _log_softmax(a, 1), rtol=1e-6, atol=1e-6)
    assert torch.log_softmax(torch.from_numpy(a), axis=0).shape == (3, 4)


def test_log_softmax_refuses_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match="log_softmax of .*: torch.int32 is not a floating"):
        torch.tensor([1, 2]).log_softmax(0)
    with pytest.raises(TensorError, match=r"log_softmax: give dim \(log_softmax\(x, dim=-1\)\)"):
        F.log_softmax(torch.ones(3))
    with pytest.raises(TensorError, match="dim 2 is out of range for a 2-d tensor"):
        torch.log_softmax(torch.ones(2, 3), 2)
    with pytest.raises(TensorError, match="torch.nn.functional.log_softmax: expected a Tensor"):
        F.log_softmax([1.0, 2.0], 0)


def test_log_softmax_costs_time_in_timing_only_mode():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        x = torch.ones(64, 100)
        before = context.now
        assert x.log_softmax(-1).shape == (64, 100)
        assert context.now > before
