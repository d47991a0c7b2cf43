"""Training scripts' set-up lines (``torch.backends``, matmul precision, ``autocast``,
``is_bf16_supported``), the RNG state and ``torch.nn.utils``'s gradient clipping."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import KernBenchError, TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    torch.manual_seed(0)
    torch.set_float32_matmul_precision("highest")
    torch.backends.cudnn.benchmark = torch.backends.cudnn.deterministic = False


def test_backend_flags_keep_torchs_values_and_change_nothing(ctx):
    x = torch.from_numpy(np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32))
    (x @ x).free()  # warm up
    before = ctx.now
    product = x @ x
    plain_time = ctx.now - before
    plain = product.numpy()
    product.free()
    assert torch.get_float32_matmul_precision() == "highest"
    assert torch.backends.cuda.matmul.allow_tf32 is False
    torch.backends.cuda.matmul.allow_tf32 = True  # as torch: the precision becomes 'high'
    assert torch.get_float32_matmul_precision() == "high"
    torch.set_float32_matmul_precision("medium")
    assert torch.backends.cuda.matmul.allow_tf32 is True
    assert torch.backends.cudnn.allow_tf32 is True and torch.backends.cudnn.benchmark is False
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = True
    assert torch.backends.cudnn.benchmark is True
    assert torch.backends.mps.is_available() is False
    assert torch.cuda.is_bf16_supported() is True
    before = ctx.now
    product = x @ x
    assert ctx.now - before == plain_time
    np.testing.assert_array_equal(product.numpy(), plain)  # no TF32 rounding


def test_backend_flags_refuse_what_torch_refuses(ctx):
    with pytest.raises(TensorError, match="set_float32_matmul_precision: Invalid precision"):
        torch.set_float32_matmul_precision("low")
    with pytest.raises(KernBenchError, match="Unknown attribute allow_tf3"):
        torch.backends.cuda.matmul.allow_tf3 = True
    with pytest.raises(TensorError, match="cudnn.benchmark must be a bool"):
        torch.backends.cudnn.benchmark = "yes"
    with pytest.raises(AttributeError, match="torch.backends"):
        torch.backends.opt_einsum  # noqa: B018


def test_rng_state_round_trips(ctx):
    torch.manual_seed(4)
    state = torch.get_rng_state()
    assert state.dtype is torch.uint8 and state.shape == (37,)
    first = torch.rand(5).tolist()
    torch.set_rng_state(state)
    assert torch.rand(5).tolist() == first
    cuda_state = torch.cuda.get_rng_state()
    drawn = torch.randn(3).tolist()
    torch.cuda.set_rng_state(cuda_state)
    assert torch.randn(3).tolist() == drawn
    (saved,) = torch.cuda.get_rng_state_all()
    value = torch.rand(1).item()
    torch.cuda.set_rng_state_all([saved])
    assert torch.rand(1).item() == value
    with pytest.raises(TensorError, match="set_rng_state: expects the uint8 tensor of 37 bytes"):
        torch.set_rng_state(torch.ones(3))


def _params(*grads):
    out = []
    for g in grads:
        p = torch.ones(len(g))
        p.grad = torch.tensor(g)
        out.append(p)
    return out


def test_clip_grad_norm_scales_in_place_as_torch(ctx):
    params = _params([3.0, 4.0, 0.0], [0.0, 12.0])
    params.append(torch.ones(2))  # no grad: skipped
    total = nn.utils.clip_grad_norm_(params, max_norm=1.0)
    assert total.dtype is torch.float32 and total.shape == ()
    np.testing.assert_allclose(total.item(), 13.0, rtol=1e-6)
    scale = 1.0 / (13.0 + 1e-6)
    np.testing.assert_allclose(params[0].grad.numpy(), np.array([3, 4, 0]) * scale, rtol=1e-6)
    np.testing.assert_allclose(params[1].grad.numpy(), np.array([0, 12]) * scale, rtol=1e-6)
    small = _params([0.3, 0.4])
    np.testing.assert_allclose(nn.utils.clip_grad_norm_(small, 1.0).item(), 0.5, rtol=1e-6)
    np.testing.assert_allclose(small[0].grad.numpy(), [0.3, 0.4], rtol=1e-6)  # not scaled up
    inf = _params([3.0, -4.0], [1.0])
    assert nn.utils.clip_grad_norm_(inf, 2.0, norm_type="inf").item() == 4.0
    np.testing.assert_allclose(inf[0].grad.numpy(), np.array([3, -4]) * 2 / (4 + 1e-6), rtol=1e-6)
    one = _params([3.0, -4.0])
    assert nn.utils.clip_grad_norm_(one[0], 100.0, norm_type=1).item() == 7.0
    assert nn.utils.clip_grad_norm_([torch.ones(2)], 1.0).item() == 0.0


def test_clip_grad_norm_errors(ctx):
    bad = _params([float("inf"), 1.0])
    with pytest.raises(TensorError, match="The total norm of order 2.0 .* is non-finite"):
        nn.utils.clip_grad_norm_(bad, 1.0, error_if_nonfinite=True)
    with pytest.raises(TensorError, match="clip_grad_norm_: norm_type is 1, 2 or inf here"):
        nn.utils.clip_grad_norm_(_params([1.0]), 1.0, norm_type=3)
    with pytest.raises(TensorError, match="clip_grad_norm_: parameters must be a Tensor or an"):
        nn.utils.clip_grad_norm_(5, 1.0)
    with pytest.raises(
        AttributeError, match="torch.nn.utils' has no attribute 'fuse_conv_bn_eval'"
    ):
        nn.utils.fuse_conv_bn_eval  # noqa: B018


def test_clip_grad_value_clamps_in_place(ctx):
    params = _params([-3.0, 0.5, 2.0])
    assert nn.utils.clip_grad_value_(params, 1.0) is None
    assert params[0].grad.tolist() == [-1.0, 0.5, 1.0]


def test_clipping_costs_the_same_in_timing_only_mode():
    def run(timing_only: bool) -> int:
        context = RuntimeContext("tiny", timing_only=timing_only)
        with use_context(context):
            params = [torch.ones(256, 256) for _ in range(3)]
            for p in params:
                p.grad = torch.ones(256, 256)
            before = context.now
            nn.utils.clip_grad_norm_(params, 1.0)
            return context.now - before

    assert run(True) == run(False)


def _compile_run(compiled: bool):
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU())
        x = torch.randn(4, 8)
        if compiled:
            with pytest.warns(UserWarning, match="runs the model eagerly") as caught:
                run = torch.compile(model, mode="max-autotune")
            assert caught[0].filename == __file__  # shown at the script's line
            assert run is model
        else:
            run = model
        start = context.now
        out = run(x)
        return out.detach().numpy(), context.now - start


def test_compile_returns_the_model_run_eagerly_and_says_so():
    compiled, eager = _compile_run(True), _compile_run(False)
    np.testing.assert_array_equal(compiled[0], eager[0])
    assert compiled[1] == eager[1] > 0  # the eager program's time

    def step(x):
        return x * 2

    with pytest.warns(UserWarning):
        assert torch.compile(step) is step
    with pytest.warns(UserWarning):
        assert torch.compile(mode="reduce-overhead")(step) is step
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # disable=True: nothing compiled, nothing to say
        assert torch.compile(step, disable=True) is step
    with pytest.raises(TensorError, match="Unrecognized mode='fast', should be one of"):
        torch.compile(step, mode="fast")
    with pytest.raises(TensorError, match="model must be a module or a function"):
        torch.compile(3)
