"""Bounds on the simulated cost of common tensor operations against one streaming pass.

A reduction reads its data once, so it should cost about what an elementwise operation
over the same data costs (torch's reduction kernels stream, they are not launch-bound);
an elementwise operation with a broadcast operand reads that operand through zero
strides, so it costs what the same operation of two full tensors costs, not that plus a
copy of the broadcast operand.  Timing-only mode on ring8 (one PE, 1 TB/s HBM).
"""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import simulated_ps as cost

import kernbench.torch as torch
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture(scope="module")
def ring8():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        yield context


# Each shape and each dtype runs by default, in two of the four pairs; the other two pairs
# take the same paths (the bounds are ratios to a pass of the same tensor) and are slow.
SHAPES_AND_DTYPES = [
    pytest.param(shape, dtype, id=f"shape{index}-{dtype}", marks=marks)
    for index, shape, dtype, marks in (
        (0, (4096, 1000), "float32", ()),
        (0, (4096, 1000), "float16", pytest.mark.slow),
        (1, (64, 1 << 16), "float32", pytest.mark.slow),
        (1, (64, 1 << 16), "float16", ()),
    )
]


@pytest.mark.parametrize(("shape", "dtype"), SHAPES_AND_DTYPES)
def test_reductions_cost_about_one_streaming_pass(ring8, shape, dtype):
    x = torch.ones(*shape, dtype=getattr(torch, dtype))
    elementwise = cost(ring8, lambda: x * 2)
    for dim in (0, 1):
        assert cost(ring8, lambda d=dim: x.sum(d)) <= 1.3 * elementwise
        assert cost(ring8, lambda d=dim: x.mean(d)) <= 1.3 * elementwise
        assert cost(ring8, lambda d=dim: x.max(d)) <= 1.3 * elementwise
        assert cost(ring8, lambda d=dim: x.norm(dim=d)) <= 1.3 * elementwise
        assert cost(ring8, lambda d=dim: x.any(d)) <= 1.3 * elementwise
    assert cost(ring8, lambda: x.var(1)) <= 1.3 * elementwise  # two passes, over one write
    # softmax reads and writes once when a line fits one step, as the elementwise pass;
    # a longer line is read three times (max, sum, write), as torch's kernel reads it
    assert cost(ring8, lambda: x.softmax(1)) <= (1.3 if shape[1] <= 1024 else 2) * elementwise
    assert cost(ring8, lambda: x.softmax(0)) <= 2 * elementwise


@pytest.mark.parametrize(("shape", "dtype"), SHAPES_AND_DTYPES)
def test_broadcast_operands_are_read_in_place(ring8, shape, dtype):
    dt = getattr(torch, dtype)
    n, c = shape
    x, y = torch.ones(n, c, dtype=dt), torch.ones(n, c, dtype=dt)
    bias, column = torch.ones(c, dtype=dt), torch.ones(n, 1, dtype=dt)
    same_shape = cost(ring8, lambda: x + y)
    assert cost(ring8, lambda: x + bias) <= 1.1 * same_shape
    assert cost(ring8, lambda: x * bias.view(1, c)) <= 1.1 * same_shape
    assert cost(ring8, lambda: x - column) <= 1.1 * same_shape
    assert cost(ring8, lambda: torch.maximum(x, bias)) <= 1.1 * same_shape
    transposed = torch.ones(c, n, dtype=dt).T  # a view of (n, c), not one run of memory
    assert cost(ring8, lambda: transposed / x) <= 1.1 * same_shape
    mask = x > 0
    assert cost(ring8, lambda: x < bias) <= 1.1 * cost(ring8, lambda: x < y)
    assert cost(ring8, lambda: torch.where(mask, x, bias)) <= 1.1 * cost(
        ring8, lambda: torch.where(mask, x, y)
    )
    assert cost(ring8, lambda: x.masked_fill(column > 0, 0)) <= 1.1 * cost(
        ring8, lambda: x.masked_fill(mask, 0)
    )


def test_a_channel_operand_of_an_image_batch_is_read_in_place(ring8):
    x, y = torch.ones(32, 64, 28, 28), torch.ones(32, 64, 28, 28)
    scale = torch.ones(1, 64, 1, 1)
    assert cost(ring8, lambda: x * scale) <= 1.1 * cost(ring8, lambda: x * y)
    assert cost(ring8, lambda: x + torch.tensor(1.0)) <= 1.1 * cost(ring8, lambda: x * y)


def test_broadcast_operands_run_one_kernel_with_numpys_values():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((5, 6, 7)).astype(np.float32)
    others = {
        "bias": rng.standard_normal(7).astype(np.float32),
        "column": rng.standard_normal((5, 1, 1)).astype(np.float32),
        "channel": rng.standard_normal((6, 1)).astype(np.float32),
        "scalar": np.array(1.5, np.float32),
        "transposed": rng.standard_normal((7, 6, 5)).astype(np.float32).T,
        "integers": rng.integers(-3, 4, 7).astype(np.int32),
    }
    context = RuntimeContext("tiny")
    with use_context(context):
        x = torch.from_numpy(a)
        for name, b in others.items():
            y = torch.from_numpy(np.ascontiguousarray(b.T)).T if name == "transposed" else None
            y = torch.from_numpy(b) if y is None else y
            x_positive, y_positive = x > 0, y > 0  # (a scalar op on a view copies it first)
            since = len(context.trace)
            got = {
                "add": x + y,
                "div": y / x,
                "maximum": torch.maximum(x, y),
                "lt": x < y,
                "where": torch.where(x_positive, y, x),
                "masked_fill": x.masked_fill(y_positive, -1.0),
            }
            ran = [row.tag for row in context.trace[since:] if row.kind == "kernel"]
            if name == "integers":  # converted to float32 first: its own 7 elements
                assert ran[:1] == ["copy_kernel"] and "_strided_copy_kernel" not in ran
            else:  # one kernel an op, no copy (masked_fill by a dense mask: the flat kernel)
                assert len(ran) == len(got) and "_broadcast_kernel" in ran, name
                assert not {"copy_kernel", "_strided_copy_kernel"} & set(ran), name
            wide = b.astype(np.float32)
            want = {
                "add": a + wide,
                "div": wide / a,
                "maximum": np.maximum(a, wide),
                "lt": a < wide,
                "where": np.where(a > 0, wide, a),
                "masked_fill": np.where(b > 0, np.float32(-1.0), a),
            }
            for op, value in got.items():
                np.testing.assert_array_equal(value.numpy(), want[op], err_msg=f"{op} {name}")
