"""Bounds on the simulated cost of common tensor operations against one streaming pass.

A reduction reads its data once, so it should cost about what an elementwise operation
over the same data costs (torch's reduction kernels stream, they are not launch-bound);
an elementwise operation with a broadcast operand reads that operand through zero
strides, so it costs what the same operation of two full tensors costs, not that plus a
copy of the broadcast operand.  Timing-only mode on ring8 (one PE, 1 TB/s HBM).
"""

from __future__ import annotations

import pytest

import kernbench.torch as torch
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module")
def ring8():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        yield context


def _cost(context, call) -> int:
    before = context.now
    call()
    return context.now - before


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("shape", [(4096, 1000), (64, 1 << 16)])
def test_reductions_cost_about_one_streaming_pass(ring8, shape, dtype):
    x = torch.ones(*shape, dtype=getattr(torch, dtype))
    elementwise = _cost(ring8, lambda: x * 2)
    for dim in (0, 1):
        assert _cost(ring8, lambda d=dim: x.sum(d)) <= 1.3 * elementwise
        assert _cost(ring8, lambda d=dim: x.mean(d)) <= 1.3 * elementwise
        assert _cost(ring8, lambda d=dim: x.max(d)) <= 1.3 * elementwise
        assert _cost(ring8, lambda d=dim: x.norm(dim=d)) <= 1.3 * elementwise
        assert _cost(ring8, lambda d=dim: x.any(d)) <= 1.3 * elementwise
    assert _cost(ring8, lambda: x.var(1)) <= 1.3 * elementwise  # two passes, over one write
    # softmax reads and writes once when a line fits one step, as the elementwise pass;
    # a longer line is read three times (max, sum, write), as torch's kernel reads it
    assert _cost(ring8, lambda: x.softmax(1)) <= (1.3 if shape[1] <= 1024 else 2) * elementwise
    assert _cost(ring8, lambda: x.softmax(0)) <= 2 * elementwise
