"""Gradients against NumPy central differences: what the autograd tests share.

``check(torch_fn, numpy_fn, *shapes)`` draws float64 inputs (each entry of ``shapes`` a
shape, or ``(shape, low, high)``), runs ``sum(torch_fn(*leaves) * w)`` backward for a
random ``w``, and compares every leaf's gradient with central differences of the same
sum of ``numpy_fn``; the forward's values and shape are checked too.
"""

from __future__ import annotations

import numpy as np

import kernbench.torch as torch


def rand(shape, seed, low=-1.0, high=1.0):
    return np.random.default_rng(seed).uniform(low, high, shape)


def numeric_grad(f, arrays, i, eps=1e-6):
    """Central differences of the scalar NumPy function ``f`` in argument ``i``."""
    x = arrays[i]
    grad = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        keep = x[idx]
        x[idx] = keep + eps
        up = f(*arrays)
        x[idx] = keep - eps
        down = f(*arrays)
        x[idx] = keep
        grad[idx] = (up - down) / (2 * eps)
    return grad


def check(torch_fn, numpy_fn, *shapes, seed=0, low=-1.0, high=1.0, node=None, atol=1e-6):
    """The output (whose node must have a formula, named ``node`` if given), after its
    gradients were checked."""
    arrays = []
    for i, s in enumerate(shapes):
        shape, lo, hi = (s, low, high) if not (s and isinstance(s[0], tuple)) else s
        arrays.append(rand(shape, seed + i, lo, hi))
    expected_out = numpy_fn(*arrays)
    w = rand(np.shape(expected_out), seed + 99)
    leaves = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out = torch_fn(*leaves)
    assert out.requires_grad and not out.is_leaf and out.grad_fn is not None
    assert "NotImplemented" not in out.grad_fn.name()
    if node is not None:
        assert out.grad_fn.name() == node
    assert tuple(out.shape) == np.shape(expected_out)
    np.testing.assert_allclose(out.detach().numpy(), expected_out, rtol=1e-6, atol=1e-9)
    (out * torch.tensor(w, dtype=torch.float64)).sum().backward()
    for i, leaf in enumerate(leaves):
        expected = numeric_grad(lambda *a: float(np.sum(numpy_fn(*a) * w)), arrays, i)
        np.testing.assert_allclose(leaf.grad.numpy(), expected, rtol=1e-5, atol=atol)
    return out
