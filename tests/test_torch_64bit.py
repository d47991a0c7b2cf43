"""64-bit tensors: float64 math in double precision, int64 values past 32 bits, and
collectives of int64/float64, checked against NumPy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn.functional as F
from kernbench.runtime import RuntimeContext, use_context

RNG = np.random.default_rng(0)
A = RNG.standard_normal((6, 7))
B = RNG.standard_normal((6, 7))
ERF = np.vectorize(math.erf)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def T(x: np.ndarray) -> torch.Tensor:  # noqa: N802 - short for the table below
    return torch.from_numpy(x)


# Each case: the facade's result and NumPy's float64 one.  The scalars (0.1, 0.3) are
# not float32 numbers, so a scalar rounded to float32 anywhere shows as ~1e-8 error.
FLOAT64_CASES = {
    "full": (lambda: torch.full((3,), 0.1, dtype=torch.float64), lambda: np.full(3, 0.1)),
    "add scalar": (lambda: T(A) + 0.1, lambda: A + 0.1),
    "mul scalar": (lambda: T(A) * 0.1, lambda: A * 0.1),
    "div scalar": (lambda: T(A) / 0.3, lambda: A / 0.3),
    "rsub": (lambda: 0.1 - T(A), lambda: 0.1 - A),
    "add alpha": (lambda: T(A).add(T(B), alpha=0.1), lambda: A + 0.1 * B),
    "clamp": (lambda: T(A).clamp(-0.1, 0.1), lambda: np.clip(A, -0.1, 0.1)),
    "pow": (lambda: T(np.abs(A)) ** 0.3, lambda: np.abs(A) ** 0.3),
    "square": (lambda: T(A) ** 2, lambda: A**2),
    "sqrt": (lambda: T(np.abs(A)) ** 0.5, lambda: np.sqrt(np.abs(A))),
    "lerp": (lambda: T(A).lerp(T(B), 0.1), lambda: A + 0.1 * (B - A)),
    "addcmul": (lambda: T(A).addcmul(T(B), T(B), value=0.1), lambda: A + 0.1 * B * B),
    "where": (lambda: torch.where(T(A) > 0, T(A), 0.1), lambda: np.where(A > 0, A, 0.1)),
    "masked_fill": (lambda: T(A).masked_fill(T(A) > 0, 0.1), lambda: np.where(A > 0, 0.1, A)),
    "arange": (lambda: torch.arange(0, 1, 0.1, dtype=torch.float64), lambda: np.arange(0, 1, 0.1)),
    "eq scalar": (lambda: (T(np.array([0.1, 0.3])) == 0.1).double(), lambda: np.array([1.0, 0])),
    "floor_divide": (lambda: T(np.abs(A)) // 0.1, lambda: np.floor_divide(np.abs(A), 0.1)),
    "remainder": (lambda: T(A) % 0.3, lambda: np.remainder(A, 0.3)),
    "scatter value": (
        lambda: torch.zeros(3, dtype=torch.float64).scatter_(0, torch.tensor([1]), 0.1),
        lambda: np.array([0.0, 0.1, 0.0]),
    ),
    "sum": (lambda: T(A).sum(1), lambda: A.sum(1)),
    "mean": (lambda: T(A).mean(), lambda: A.mean()),
    "var": (lambda: T(A).var(1), lambda: A.var(1, ddof=1)),
    "norm": (lambda: T(A).norm(dim=1), lambda: np.linalg.norm(A, axis=1)),
    "matmul": (lambda: T(A) @ T(B).T, lambda: A @ B.T),
    "softmax": (lambda: T(A).softmax(1), lambda: np.exp(A) / np.exp(A).sum(1, keepdims=True)),
    "logsumexp": (lambda: torch.logsumexp(T(A), 1), lambda: np.log(np.exp(A).sum(1))),
    "gelu": (lambda: F.gelu(T(A)), lambda: 0.5 * A * (1 + ERF(A / np.sqrt(2)))),
    "tanh": (lambda: T(A).tanh(), lambda: np.tanh(A)),
    "layer_norm": (
        lambda: F.layer_norm(T(A), (7,), eps=0.1),
        lambda: (A - A.mean(1, keepdims=True)) / np.sqrt(A.var(1, keepdims=True) + 0.1),
    ),
    "rms_norm": (
        lambda: F.rms_norm(T(A), (7,), eps=0.1),
        lambda: A / np.sqrt((A * A).mean(1, keepdims=True) + 0.1),
    ),
    "cross_entropy": (
        lambda: F.cross_entropy(T(A), torch.arange(6), label_smoothing=0.1),
        lambda: np.mean(
            -0.9 * (A - np.log(np.exp(A).sum(1, keepdims=True)))[np.arange(6), np.arange(6)]
            - 0.1 / 7 * (A - np.log(np.exp(A).sum(1, keepdims=True))).sum(1)
        ),
    ),
}


@pytest.mark.parametrize("name", list(FLOAT64_CASES))
def test_float64_math_keeps_double_precision(ctx, name):
    ours, numpy_ = FLOAT64_CASES[name]
    got = ours()
    assert got.dtype is torch.float64
    np.testing.assert_allclose(got.numpy(), numpy_(), rtol=1e-12, atol=1e-15)


def test_float32_scalars_stay_float32(ctx):
    # a float32 tensor's scalar is float32 (torch's opmath), not widened to double
    x = np.array([1.0, 3.0], np.float32)
    got = (torch.from_numpy(x) + 0.1).numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, x + np.float32(0.1))


def test_int64_values_past_32_bits(ctx):
    a = np.array([2**40, -(2**35), 7, 2**62], np.int64)
    t = torch.from_numpy(a)
    np.testing.assert_array_equal((t + 1).numpy(), a + 1)
    np.testing.assert_array_equal((t * 2).numpy(), a * 2)  # 2**63 wraps, as torch
    assert t.max().item() == 2**62 and t.argmax().item() == 3 and t.argmin().item() == 1
    assert t[:3].sum().item() == 2**40 - 2**35 + 7
    assert (t > 2**39).tolist() == [True, False, False, True]
    assert t.tolist() == a.tolist() and t.double().tolist() == a.astype(np.float64).tolist()
    assert torch.tensor(2**40).item() == 2**40
    assert (t.int() == torch.from_numpy(a.astype(np.int32))).all().item()  # wraps as a cast
    idx = torch.tensor([3, 0])  # int64 indices
    assert t[idx].tolist() == [2**62, 2**40]


def test_64_bit_tensors_cost_twice_the_memory_time(ctx):
    def copy_time(dtype):
        x = torch.ones(1 << 16, dtype=dtype)
        before = ctx.now
        x.clone()
        return ctx.now - before

    narrow, wide = copy_time(torch.float32), copy_time(torch.float64)
    assert 1.5 * narrow < wide < 2.5 * narrow
    assert copy_time(torch.int64) == wide


def _all_reduce_64(n: int) -> dict:
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    ints = torch.full((n,), 2**40 + rank, dtype=torch.int64)
    floats = torch.full((n,), 0.1 * (rank + 1), dtype=torch.float64)
    dist.all_reduce(ints)
    dist.all_reduce(floats)
    gathered = [torch.empty(3, dtype=torch.int64) for _ in range(world)]
    dist.all_gather(gathered, torch.arange(3) + 2**33 * rank)
    return {
        "ints": ints.numpy(),
        "floats": floats.numpy(),
        "gathered": torch.stack(gathered).numpy(),
    }


@pytest.mark.parametrize("backend", ["detailed", "fast"])
def test_collectives_of_int64_and_float64_values(backend):
    world = 4
    result = kernbench.simulate(
        _all_reduce_64,
        topology="multi_sip",
        world_size=world,
        overrides=(f"simulation.backend={backend}",),
        args=(1000,),
    )
    expected_floats = sum(0.1 * (r + 1) for r in range(world))  # in double, rank order
    for got in result.returns:
        assert got["ints"].dtype == np.int64
        np.testing.assert_array_equal(got["ints"], world * 2**40 + sum(range(world)))
        np.testing.assert_allclose(got["floats"], expected_floats, rtol=1e-15)
        np.testing.assert_array_equal(
            got["gathered"], np.arange(3)[None, :] + 2**33 * np.arange(world)[:, None]
        )
