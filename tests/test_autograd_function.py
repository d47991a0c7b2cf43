"""torch.autograd.Function (custom forward/backward), tensor hooks and retain_grad, and
autograd.grad running only what it needs: values against NumPy, the engine's checks of a
custom backward's results by type and message, and simulated costs."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.autograd.function import BackwardCFunction, once_differentiable


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        result = x.exp()
        ctx.save_for_backward(result)
        return result

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result


class ScaledMul(torch.autograd.Function):
    """x * y * scale, with the flags backward saw kept on the class for the tests."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, y, scale):
        ctx.save_for_backward(x, y)
        ctx.scale = scale
        return x * y * scale

    @staticmethod
    def backward(ctx, g):
        ScaledMul.seen.append(ctx.needs_input_grad)
        x, y = ctx.saved_tensors
        gx = g * y * ctx.scale if ctx.needs_input_grad[0] else None
        gy = g * x * ctx.scale if ctx.needs_input_grad[1] else None
        return gx, gy, None


def _values(n, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, n)


def test_custom_function_values_gradient_and_node(ctx):
    xv = _values(5, 0)
    x = torch.tensor(xv, requires_grad=True)
    y = Exp.apply(x)
    assert isinstance(y.grad_fn, BackwardCFunction) and y.grad_fn.name() == "ExpBackward"
    assert y.requires_grad and not y.is_leaf
    assert y.grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    np.testing.assert_allclose(y.detach().numpy(), np.exp(xv), rtol=1e-6)
    (y * 2.0).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * np.exp(xv), rtol=1e-6)
    # the forward ran with recording off; with no input requiring grad nothing is recorded
    plain = Exp.apply(torch.tensor(xv))
    assert plain.grad_fn is None and not plain.requires_grad
    with torch.no_grad():
        assert Exp.apply(x).grad_fn is None


def test_needs_input_grad_non_tensor_inputs_and_broadcast_gradients(ctx):
    ScaledMul.seen.clear()
    xv, yv = _values(3, 1), _values(6, 2).reshape(2, 3)
    x = torch.tensor(xv, requires_grad=True)
    y = torch.tensor(yv)
    out = ScaledMul.apply(x, y, 3.0)
    out.sum().backward()
    assert ScaledMul.seen == [(True, False, False)]
    # backward gave x a (2, 3) gradient: the engine sums it down to x's (3,)
    np.testing.assert_allclose(x.grad.numpy(), 3.0 * yv.sum(0), rtol=1e-6)


def test_several_outputs_unused_ones_get_zeros_or_none(ctx):
    seen = []

    class Split(torch.autograd.Function):
        materialize = True

        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(Split.materialize)
            return x * 2.0, x * 3.0, "label"

        @staticmethod
        def backward(ctx, ga, gb, glabel):
            seen.append((ga, gb, glabel))
            ga = ga if ga is not None else 0.0
            gb = gb if gb is not None else 0.0
            return ga * 2.0 + gb * 3.0

    xv = _values(4, 3)
    x = torch.tensor(xv, requires_grad=True)
    a, b, label = Split.apply(x)
    assert label == "label" and a.output_nr == 0 and b.output_nr == 1 and a.grad_fn is b.grad_fn
    (a * 5.0).sum().backward()
    ga, gb, glabel = seen[-1]
    assert glabel is None and gb.tolist() == [0.0] * 4  # materialized zeros for b
    np.testing.assert_allclose(x.grad.numpy(), [10.0] * 4)
    # both outputs used, through two paths each: the gradients add up per output
    x.grad = None
    a, b, _ = Split.apply(x)
    (a * 1.0 + a * 2.0 + b).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0 * 2.0 + 3.0] * 4)
    Split.materialize = False
    x.grad = None
    a, b, _ = Split.apply(x)
    b.sum().backward()
    assert seen[-1][0] is None  # not materialized
    np.testing.assert_allclose(x.grad.numpy(), [3.0] * 4)


def test_setup_context_style_and_vjp(ctx):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            (x,) = inputs
            ctx.save_for_backward(x)

        @staticmethod
        def vjp(ctx, g):
            (x,) = ctx.saved_tensors
            return 2.0 * x * g

    xv = _values(3, 4)
    x = torch.tensor(xv, requires_grad=True)
    Square.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * xv, rtol=1e-6)


def test_non_differentiable_outputs_and_inputs_returned_as_outputs(ctx):
    class SortLike(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            values, index = x.sort()
            ctx.mark_non_differentiable(index)
            ctx.save_for_backward(index)
            return values, index

        @staticmethod
        def backward(ctx, g, g_index):
            (index,) = ctx.saved_tensors
            assert g_index is None or not g_index.any().item()
            out = torch.zeros_like(g)
            out[index] = g
            return out

    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 4.0

    xv = np.array([3.0, 1.0, 2.0])
    x = torch.tensor(xv, requires_grad=True)
    values, index = SortLike.apply(x)
    assert not index.requires_grad and index.grad_fn is None
    (values * torch.tensor([1.0, 10.0, 100.0])).sum().backward()
    assert x.grad.tolist() == [100.0, 1.0, 10.0]
    y = Identity.apply(x)
    assert y is not x and y.grad_fn.name() == "IdentityBackward" and x.is_leaf
    assert y.data_ptr() == x.data_ptr()


def test_mark_dirty_changes_an_input_in_place(ctx):
    class AddOne_(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1.0)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 1.0

    leaf = torch.tensor([1.0, 2.0], requires_grad=True)
    h = leaf * 3.0
    out = AddOne_.apply(h)
    assert out is h and h.grad_fn.name() == "AddOne_Backward"
    assert h.tolist() == [4.0, 7.0]
    out.sum().backward()
    assert leaf.grad.tolist() == [3.0, 3.0]
    with pytest.raises(TensorError, match="a leaf Variable that requires grad is being used"):
        AddOne_.apply(leaf)


def test_custom_backward_results_are_checked_as_torch_checks_them(ctx):
    def make(backward_result):
        class Bad(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return backward_result(g)

        return Bad

    x = torch.ones(2, 3, requires_grad=True)
    cases = [
        (lambda g: (g,), r"function BadBackward returned an incorrect number of gradients "
         r"\(expected 2, got 1\)"),
        (lambda g: (g, g), "returned a gradient different than None at position 2, but the "
         "corresponding forward input was not a Variable"),
        (lambda g: (torch.ones(4), None), r"returned an invalid gradient at index 0 - got \[4\] "
         r"but expected shape compatible with \[2, 3\]"),
        (lambda g: (1.0, None), "returned float at position 1"),
    ]  # fmt: skip
    for result, message in cases:
        with pytest.raises(TensorError, match=message):
            make(result).apply(x, 2.0).sum().backward()
    # trailing Nones beyond the inputs are allowed, as torch's
    make(lambda g: (g, None, None)).apply(x, 2.0).sum().backward()
    assert x.grad.tolist() == [[1.0] * 3] * 2


def test_apply_refusals_and_freed_saved_tensors(ctx):
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(TypeError, match=r"Exp.apply\(\) takes no keyword arguments"):
        Exp.apply(x=x)
    with pytest.raises(TensorError, match="legacy autograd functions are not supported"):
        Exp()(x)
    with pytest.raises(TensorError, match="subclass Function and call apply"):
        torch.autograd.Function.apply(x)

    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0

    with pytest.raises(TensorError, match="You must implement either the backward or vjp"):
        NoBackward.apply(x).sum().backward()
    y = Exp.apply(x)
    y.sum().backward(retain_graph=True)
    y.sum().backward()  # the graph was kept once
    assert x.grad.tolist() == [2.0 * np.e] * 3 or np.allclose(x.grad.numpy(), 2.0 * np.e)
    with pytest.raises(TensorError, match="Trying to backward through the graph a second time"):
        y.sum().backward()
    with pytest.raises(TensorError, match="Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors  # noqa: B018
    with pytest.raises(
        TypeError, match="save_for_backward can only save variables, but argument 0"
    ):

        class SavesNumber(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(3)
                return x

        SavesNumber.apply(x)


def test_once_differentiable_and_a_backward_that_launches_ops_costs_time():
    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            assert not torch.is_grad_enabled()
            (x,) = ctx.saved_tensors
            return 3.0 * x * x * g

    xv = _values(4096, 5)
    spent = []
    for custom in (True, False):  # fresh machines: costs depend on what ran before
        context = RuntimeContext("ring8")
        with use_context(context):
            x = torch.tensor(xv, requires_grad=custom)
            y = Cube.apply(x) if custom else x * x * x
            g = torch.ones(4096)
            before = context.now
            if custom:
                y.backward(g)
            else:  # the three ops of the custom backward, launched directly
                3.0 * x * x * g
            spent.append(context.now - before)
            if custom:
                np.testing.assert_allclose(x.grad.numpy(), 3.0 * xv**2, rtol=1e-5)
    assert spent[0] == spent[1] > 0


def test_register_hook_on_leaves_and_intermediates(ctx):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.tolist()) or g * 10.0)
    h = x * 2.0
    h.register_hook(lambda g: g + 1.0)
    h.register_hook(lambda g: seen.append(g.tolist()))  # sees the first hook's result
    (h * 3.0).sum().backward()
    assert seen == [[4.0] * 3, [8.0] * 3]  # h's gradient 3 + 1; x's is 2 * 4
    assert x.grad.tolist() == [80.0] * 3
    handle.remove()
    x.grad = None
    (x * 1.0).sum().backward()
    assert x.grad.tolist() == [1.0] * 3
    with pytest.raises(TensorError, match="cannot register a hook on a tensor that doesn't"):
        torch.ones(2).register_hook(print)
    h = x * 2.0
    h.register_hook(lambda g: torch.ones(5))
    with pytest.raises(
        TensorError, match=r"has changed the size of value \(from \(3,\) to \(5,\)\)"
    ):
        h.sum().backward()


def test_retain_grad_keeps_an_intermediate_gradient(ctx):
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    h = x * x
    assert not h.retains_grad
    h.retain_grad()
    assert h.retains_grad and not x.retains_grad
    (h * 3.0).sum().backward(retain_graph=True)
    assert h.grad.tolist() == [3.0, 3.0] and x.grad.tolist() == [6.0, -12.0]
    (h * 3.0).sum().backward()
    assert h.grad.tolist() == [6.0, 6.0]  # added up, as a leaf's
    x.retain_grad()  # a no-op on a leaf
    with pytest.raises(TensorError, match="can't retain_grad on Tensor that has requires_grad"):
        torch.ones(2).retain_grad()


def test_autograd_grad_runs_only_the_nodes_it_needs():
    context = RuntimeContext("ring8", timing_only=True)
    with use_context(context):
        w = torch.ones(256, 256, requires_grad=True)
        x = torch.ones(128, 256)
        h = (x @ w).tanh()
        out = (h * 2.0).sum()
        before = context.now
        (gh,) = torch.autograd.grad(out, [h], retain_graph=True)
        partial = context.now - before
        assert tuple(gh.shape) == (128, 256) and w.grad is None
        before = context.now
        torch.autograd.grad(out, [w], retain_graph=True)
        full = context.now - before
        # h's gradient needs the sum's and the product's backward; w's needs the tanh's and
        # the matmul's too, which the first call does not run
        assert 0 < partial < 0.7 * full  # (it ran the whole graph: partial == full)


def test_autograd_grad_through_a_multi_output_function(ctx):
    class Two(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2.0, x * 3.0

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2.0 + gb * 3.0

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    a, b = Two.apply(x)
    (ga,) = torch.autograd.grad((a * b).sum(), [a], retain_graph=True)
    np.testing.assert_allclose(ga.numpy(), b.detach().numpy())
    (gx,) = torch.autograd.grad((a * b).sum(), [x])
    np.testing.assert_allclose(gx.numpy(), 12.0 * np.array([1.0, 2.0]))


def test_gradcheck_passes_a_right_backward_and_names_a_wrong_one(ctx):
    x = torch.tensor(_values(4, 6), requires_grad=True)
    y = torch.tensor(_values(4, 7))
    assert torch.autograd.gradcheck(Exp.apply, (x,))
    assert torch.autograd.gradcheck(ScaledMul.apply, (x, y, 2.0), eps=1e-6, atol=1e-4)

    class WrongExp(Exp):
        @staticmethod
        def backward(ctx, g):
            (result,) = ctx.saved_tensors
            return g * result * 1.5

    with pytest.raises(
        torch.autograd.GradcheckError,
        match=r"Jacobian mismatch for output 0 with respect to input 0,\nnumerical:",
    ):
        torch.autograd.gradcheck(WrongExp.apply, (x,))
    assert torch.autograd.gradcheck(WrongExp.apply, (x,), raise_exception=False) is False
    with pytest.raises(torch.autograd.GradcheckError, match="at least one input tensor"):
        torch.autograd.gradcheck(Exp.apply, (torch.ones(2),))
    with pytest.warns(UserWarning, match="is not a double precision floating point"):
        torch.autograd.gradcheck(
            Exp.apply, (torch.ones(2, requires_grad=True),), eps=1e-2, atol=1e-2
        )
    with pytest.raises(TensorError, match="gradgradcheck: higher-order gradients"):
        torch.autograd.gradgradcheck(Exp.apply, (x,))


def test_detect_anomaly_names_the_node_that_made_nan(ctx):
    class NanBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return g * float("nan")

    x = torch.ones(3, requires_grad=True)
    NanBackward.apply(x).sum().backward()  # off: the NaN reaches .grad silently
    assert np.isnan(x.grad.numpy()).all()
    assert not torch.autograd.is_anomaly_enabled()
    with torch.autograd.detect_anomaly():
        assert torch.autograd.is_anomaly_enabled()
        with pytest.raises(
            TensorError, match=r"Function 'NanBackwardBackward' returned nan values in its 0th"
        ):
            NanBackward.apply(x).sum().backward()
    assert not torch.autograd.is_anomaly_enabled()
    torch.autograd.set_detect_anomaly(True, check_nan=False)
    NanBackward.apply(x).sum().backward()  # NaN checks off
    torch.autograd.set_detect_anomaly(False)
    assert not torch.autograd.is_anomaly_enabled()


def test_variable_is_the_tensor(ctx):
    t = torch.ones(2)
    v = torch.autograd.Variable(t, requires_grad=True)
    assert v is t and t.requires_grad and isinstance(t, torch.autograd.Variable)
    assert not isinstance(3.0, torch.autograd.Variable)
    with pytest.raises(TensorError, match="Variable data has to be a tensor, but got list"):
        torch.autograd.Variable([1.0])
    with pytest.raises(AttributeError, match="torch.autograd.grad.*gives a vjp"):
        torch.autograd.functional  # noqa: B018


def test_a_dropped_graph_frees_its_memory_without_the_cyclic_gc(ctx):
    # A node in a reference cycle would keep its saved tensors (device memory) until
    # Python's cyclic GC ran: memory and placement would depend on when that happens.
    import gc

    from kernbench.torch.utils.checkpoint import checkpoint

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    x = torch.ones(4, 8)

    def region(v):
        q = lin(v).view(1, 1, 4, 8)
        return torch.nn.functional.scaled_dot_product_attention(q, q, q).view(4, 8)

    gc.collect()
    gc.disable()
    try:
        base = torch.cuda.memory_allocated()
        for backward in (False, True):
            for use_reentrant in (False, True):
                h = Exp.apply(lin(x))
                h = checkpoint(region, h, use_reentrant=use_reentrant)
                h = torch.log2(h)  # no formula: a node that refuses backward
                loss = (Exp.apply(h[:2]) * 2.0).sum()
                if backward:
                    Exp.apply(lin(x)).sum().backward()
                del h, loss
                lin.zero_grad(set_to_none=True)
                assert torch.cuda.memory_allocated() == base, (backward, use_reentrant)
    finally:
        gc.enable()


def test_saved_tensors_hooks_pack_what_nodes_keep(ctx):
    from kernbench.torch.autograd.graph import (
        disable_saved_tensors_hooks,
        save_on_cpu,
        saved_tensors_hooks,
    )

    torch.manual_seed(0)
    layers = [torch.nn.Linear(64, 64) for _ in range(4)]
    x = torch.tensor(np.random.default_rng(8).normal(size=(512, 64)), dtype=torch.float32)

    def run(hooks):
        for layer in layers:
            layer.zero_grad(set_to_none=True)
        base = torch.cuda.memory_allocated()
        with hooks:
            h = x
            for layer in layers:
                h = torch.nn.functional.gelu(layer(h))
            y = Exp.apply(h * 0.01)
        kept = torch.cuda.memory_allocated() - base
        y.sum().backward()
        return kept, [layer.weight.grad.numpy().copy() for layer in layers]

    import contextlib

    packed, unpacked = [], []

    def pack(t):
        packed.append(tuple(t.shape))
        return t

    def unpack(t):
        unpacked.append(tuple(t.shape))
        return t

    plain_kept, plain = run(contextlib.nullcontext())
    same_kept, same = run(saved_tensors_hooks(pack, unpack))
    assert same_kept == plain_kept and len(packed) == len(unpacked) > 8
    for a, b in zip(same, plain, strict=True):
        np.testing.assert_array_equal(a, b)
    # activations kept in bfloat16: half the bytes of each (the weights' bfloat16 copies
    # are small beside them), gradients to bfloat16's precision
    narrow_kept, narrow = run(
        saved_tensors_hooks(lambda t: t.to(torch.bfloat16), lambda t: t.to(torch.float32))
    )
    assert narrow_kept <= plain_kept - 2 * 512 * 64 * 4
    for a, b in zip(narrow, plain, strict=True):
        np.testing.assert_allclose(a, b, rtol=0.05, atol=2e-3)
    with disable_saved_tensors_hooks("hooks are off in this region"):
        with pytest.raises(TensorError, match="hooks are off in this region"):
            with saved_tensors_hooks(pack, unpack):
                pass
    with saved_tensors_hooks(lambda t: t, lambda t: 3):
        y = Exp.apply(torch.ones(2, requires_grad=True))
    with pytest.raises(TensorError, match="unpack_hook returned int"):
        y.sum().backward()
    with pytest.raises(TensorError, match="save_on_cpu: there are no host tensors"):
        save_on_cpu()
