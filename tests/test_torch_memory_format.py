"""``torch.memory_format``: contiguous_format and preserve_format are the no-ops they are
on row-major tensors, channels_last is refused, ``is_contiguous`` answers from strides."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context

NO_OPS = [torch.contiguous_format, torch.preserve_format, None]


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _x():
    return torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)


# Every call torch takes memory_format= on, as (name, call(tensor, memory_format)).
CALLS = [
    ("Tensor.clone", lambda t, f: t.clone(memory_format=f)),
    ("Tensor.clone", lambda t, f: torch.clone(t, memory_format=f)),
    ("Tensor.to", lambda t, f: t.to(torch.float64, memory_format=f)),
    ("Tensor.cuda", lambda t, f: t.cuda(memory_format=f)),
    ("Tensor.cpu", lambda t, f: t.cpu(memory_format=f)),
    ("Tensor.half", lambda t, f: t.half(memory_format=f)),
    ("Tensor.long", lambda t, f: t.long(memory_format=f)),
    ("Tensor.bool", lambda t, f: t.bool(memory_format=f)),
    ("torch.empty_like", lambda t, f: torch.empty_like(t, memory_format=f)),
    ("torch.zeros_like", lambda t, f: torch.zeros_like(t, memory_format=f)),
    ("torch.ones_like", lambda t, f: torch.ones_like(t, memory_format=f)),
    ("torch.full_like", lambda t, f: torch.full_like(t, 2.0, memory_format=f)),
    ("torch.rand_like", lambda t, f: torch.rand_like(t, memory_format=f)),
    ("torch.randn_like", lambda t, f: torch.randn_like(t, memory_format=f)),
    ("torch.randint_like", lambda t, f: torch.randint_like(t, 3, memory_format=f)),
]


def test_the_four_formats_are_torchs_objects():
    formats = [
        torch.contiguous_format,
        torch.preserve_format,
        torch.channels_last,
        torch.channels_last_3d,
    ]
    assert [repr(f) for f in formats] == [
        "torch.contiguous_format",
        "torch.preserve_format",
        "torch.channels_last",
        "torch.channels_last_3d",
    ]
    assert str(torch.channels_last) == "torch.channels_last"
    assert all(isinstance(f, torch.memory_format) for f in formats)
    assert copy.deepcopy(torch.channels_last) is torch.channels_last
    assert pickle.loads(pickle.dumps(torch.preserve_format)) is torch.preserve_format
    with pytest.raises(TensorTypeError, match="cannot create 'torch.memory_format' instances"):
        torch.memory_format()


@pytest.mark.parametrize("fmt", NO_OPS, ids=repr)
@pytest.mark.parametrize(
    ("name", "call"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)]
)
def test_no_op_formats_give_what_the_call_gives_without_one(ctx, name, call, fmt):
    torch.manual_seed(3)
    plain = call(_x(), None)
    torch.manual_seed(3)
    got = call(_x(), fmt)
    assert got.is_contiguous() and got.shape == (2, 3, 4) and got.dtype == plain.dtype
    if name != "torch.empty_like":
        np.testing.assert_array_equal(got.numpy(), plain.numpy())


@pytest.mark.parametrize("fmt", [torch.channels_last, torch.channels_last_3d], ids=repr)
@pytest.mark.parametrize(
    ("name", "call"), CALLS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CALLS)]
)
def test_channels_last_is_refused_naming_the_call(ctx, name, call, fmt):
    with pytest.raises(
        TensorError,
        match=f"{name}: memory_format={fmt} is not modelled: tensors here are row-major "
        r"\(torch.contiguous_format\); drop memory_format=",
    ):
        call(_x(), fmt)


def test_contiguous_takes_contiguous_format_and_preserve_only_when_nothing_moves(ctx):
    x = _x()
    assert x.contiguous(torch.contiguous_format) is x
    assert x.contiguous(memory_format=torch.preserve_format) is x
    t = x.transpose(0, 2)
    before = ctx.now
    dense = t.contiguous(memory_format=torch.contiguous_format)
    assert ctx.now > before and dense.is_contiguous()
    np.testing.assert_array_equal(
        dense.numpy(), np.arange(24.0).reshape(2, 3, 4).transpose(2, 1, 0)
    )
    with pytest.raises(
        TensorError, match="preserve memory format is unsupported by the contiguous"
    ):
        t.contiguous(memory_format=torch.preserve_format)
    with pytest.raises(TensorError, match="Tensor.contiguous: memory_format=torch.channels_last"):
        x.contiguous(memory_format=torch.channels_last)
    with pytest.raises(
        TensorTypeError, match=r"contiguous\(\): argument 'memory_format' must be .*NoneType"
    ):
        x.contiguous(None)


def test_empty_and_module_to_take_what_torch_takes(ctx):
    assert torch.empty(2, 3, memory_format=torch.contiguous_format).shape == (2, 3)
    with pytest.raises(TensorError, match="torch.empty: unsupported memory format"):
        torch.empty(2, memory_format=torch.preserve_format)
    with pytest.raises(TensorError, match="torch.empty: memory_format=torch.channels_last"):
        torch.empty(1, 2, 3, 4, memory_format=torch.channels_last)
    layer = torch.nn.Linear(2, 2)
    assert layer.to(memory_format=torch.contiguous_format) is layer
    with pytest.raises(TensorError, match="nn.Module.to: memory_format=torch.channels_last"):
        layer.to(memory_format=torch.channels_last)
    with pytest.raises(TensorTypeError, match=r"Tensor.to\(\): argument 'memory_format' .* str"):
        _x().to(memory_format="channels_last")


def test_a_no_op_format_costs_nothing(ctx):
    x = _x()
    x.clone()  # warm up
    before = ctx.now
    x.clone()
    plain = ctx.now - before
    before = ctx.now
    x.clone(memory_format=torch.contiguous_format)
    assert ctx.now - before == plain


def test_is_contiguous_answers_for_each_format_from_the_strides(ctx):
    nchw = torch.arange(24.0).reshape(1, 2, 3, 4)
    assert nchw.is_contiguous() and nchw.is_contiguous(memory_format=torch.contiguous_format)
    assert nchw.is_contiguous(torch.preserve_format)
    assert not nchw.is_contiguous(memory_format=torch.channels_last)
    nhwc_as_nchw = torch.arange(24.0).reshape(1, 3, 4, 2).permute(0, 3, 1, 2)
    assert nhwc_as_nchw.is_contiguous(memory_format=torch.channels_last)
    assert not nhwc_as_nchw.is_contiguous()
    one_channel = torch.zeros(2, 1, 3, 3)  # as torch: both layouts have these strides
    assert one_channel.is_contiguous(memory_format=torch.channels_last)
    assert not torch.zeros(2, 3).is_contiguous(memory_format=torch.channels_last)
    ndhwc = torch.zeros(1, 2, 2, 2, 3).permute(0, 4, 1, 2, 3)
    assert ndhwc.is_contiguous(memory_format=torch.channels_last_3d)
    assert not ndhwc.is_contiguous(memory_format=torch.channels_last)
    with pytest.raises(TensorTypeError, match=r"is_contiguous\(\): argument 'memory_format'"):
        nchw.is_contiguous(memory_format="channels_last")


def test_randint_like_takes_torchs_bounds(ctx):
    x = torch.zeros(200, dtype=torch.int32)
    high = torch.randint_like(x, 4)
    assert high.dtype == torch.int32 and set(high.tolist()) == {0, 1, 2, 3}
    both = torch.randint_like(x, 5, 7)
    assert set(both.tolist()) == {5, 6}
    floats = torch.randint_like(torch.zeros(50), high=3)
    assert floats.dtype == torch.float32 and set(floats.tolist()) <= {0.0, 1.0, 2.0}
    assert torch.randint_like(x, low=1, high=2, dtype=torch.int64).tolist() == [1] * 200
    with pytest.raises(TensorError, match=r"randint_like takes \(input, high\)"):
        torch.randint_like(x)
    with pytest.raises(TensorError, match=r"randint_like takes \(input, high\)"):
        torch.randint_like(x, low=1)
