"""``torch.autograd.Function``: an operation whose backward the user writes.

As torch's: a subclass defines ``forward`` and ``backward`` as static methods, and is
called as ``MyFn.apply(*args)``.  ``forward(ctx, *args)`` runs with recording off (or
``forward(*args)`` followed by ``setup_context(ctx, inputs, output)``); when an input
requires grad and recording is on, its tensor outputs become the outputs of one graph
node, ``MyFnBackward``, which is also the ``ctx`` (``y.grad_fn.saved_tensors`` works as in
torch).  ``backward(ctx, *grad_outputs)`` receives a gradient per forward output (zeros
for an output the loss did not use, unless ``ctx.set_materialize_grads(False)``; None for
an output that is not a tensor) and returns one per forward input, checked as torch's
engine checks them: the count (trailing Nones beyond it allowed), None for non-tensor
inputs, a shape that sums to the input's (broadcast gradients are reduced) and the dtype
(cast).  The backward runs the facade's ops like every other node, so a custom
backward -- a Triton kernel launched from it, say -- costs the simulated time it takes.

What is not here: higher-order gradients (``create_graph``), forward-mode ``jvp`` and
``vmap``; each raises naming the call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError, TensorTypeError
from kernbench.torch.autograd.formulas import sum_to
from kernbench.torch.autograd.grad_mode import is_grad_enabled, no_grad
from kernbench.torch.autograd.graph import (
    FREED,
    Node,
    check_versions,
    pack_saved,
    saved,
    saved_versions,
    unpack_saved,
)
from kernbench.torch.grad_slots import set_history

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["BackwardCFunction", "Function", "FunctionCtx", "once_differentiable"]


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


class FunctionCtx:
    """What ``forward``/``setup_context`` may call on ``ctx``; any other attribute may be
    set on it to pass values to ``backward``."""

    to_save: tuple[Any, ...] | None = None
    non_differentiable: tuple[Any, ...] = ()
    dirty_tensors: tuple[Any, ...] = ()
    materialize_grads = True

    def save_for_backward(self, *tensors: Any) -> None:
        """Keep ``tensors`` (or None) for ``backward``'s ``ctx.saved_tensors``."""
        for i, t in enumerate(tensors):
            if t is not None and not _is_tensor(t):
                raise TensorTypeError(
                    f"save_for_backward can only save variables, but argument {i} is of type "
                    f"{type(t).__name__}"
                )
        self.to_save = tensors

    def save_for_forward(self, *tensors: Any) -> None:
        raise TensorError(
            "ctx.save_for_forward: forward-mode AD (jvp) is not supported by kernbench.torch's "
            "autograd; save tensors for backward with ctx.save_for_backward"
        )

    def mark_dirty(self, *tensors: Any) -> None:
        """The inputs ``forward`` changed in place (returned as outputs): they become
        outputs of this node."""
        self.dirty_tensors = tensors

    def mark_non_differentiable(self, *tensors: Any) -> None:
        """Outputs that get no gradient (``requires_grad=False``; ``backward`` receives
        zeros for them)."""
        self.non_differentiable = tensors

    def set_materialize_grads(self, value: bool) -> None:
        """With False, ``backward`` gets None (not zeros) for outputs the loss did not use."""
        self.materialize_grads = bool(value)


class BackwardCFunction(Node, FunctionCtx):
    """The node (and ``ctx``) of one ``Function.apply``: ``<MyFnBackward object ...>``."""

    _forward_cls: type[Function]

    def __init__(self) -> None:  # the node's fields are filled in after forward ran
        self._name = f"{self._forward_cls.__name__}Backward"
        self.needs_input_grad: tuple[bool, ...] = ()
        self._outputs: tuple[tuple[tuple[int, ...], Any] | None, ...] = ()
        self._input_shapes: tuple[tuple[int, ...] | None, ...] = ()

    @property
    def saved_tensors(self) -> tuple[Any, ...]:
        """The tensors given to ``save_for_backward`` (freed by a backward without
        ``retain_graph``)."""
        if "_saved" not in vars(self):  # forward or setup_context still running
            return tuple(self.to_save or ())
        if self._saved is None:
            raise TensorError(FREED)
        check_versions(self.name(), self._saved, self._versions)
        return unpack_saved(self._saved)

    def apply(self, *grads: Any) -> tuple[Any, ...]:
        """The inputs' gradients from the outputs' (saved tensors are read, and checked
        for having been freed, through ``ctx.saved_tensors``)."""
        return self._call_backward(*grads)

    def attach_graph(self, inputs: tuple[Any, ...], outputs: tuple[Any, ...]) -> None:
        saved_tensors = tuple(saved(t) if t is not None else None for t in self.to_save or ())
        # (the originals go: an output kept here would hold its own node in a cycle)
        self.to_save = None
        Node.__init__(  # (apply is overridden: no bound method kept, so no reference cycle)
            self, f"{self._forward_cls.__name__}Backward", inputs, _unused, num_outputs=len(outputs)
        )
        self._saved = pack_saved(saved_tensors)
        self._versions = saved_versions(self._saved)
        self._saves = True
        self._input_shapes = tuple(tuple(t.shape) if _is_tensor(t) else None for t in inputs)
        self._outputs = tuple(
            (tuple(out.shape), out.dtype) if _is_tensor(out) else None for out in outputs
        )

    def _call_backward(self, *grads: Any) -> tuple[Any, ...]:
        present = next(g for g in grads if g is not None)
        full = []
        for g, meta in zip(grads, self._outputs, strict=True):
            if g is None and meta is not None and self.materialize_grads:
                g = present.new_zeros(meta[0], dtype=meta[1])
            full.append(g)
        result = _user_backward(self._forward_cls)(self, *full)
        return self._checked(result)

    def _checked(self, result: Any) -> tuple[Any, ...]:
        name = self.name()
        grads = list(result) if isinstance(result, tuple | list) else [result]
        expected = len(self._input_shapes)
        if len(grads) > expected and all(g is None for g in grads[expected:]):
            grads = grads[:expected]
        if len(grads) != expected:
            raise TensorError(
                f"function {name} returned an incorrect number of gradients (expected "
                f"{expected}, got {len(grads)})"
            )
        for i, (g, shape) in enumerate(zip(grads, self._input_shapes, strict=True)):
            if g is None:
                continue
            if shape is None:
                raise TensorError(
                    f"function {name} returned a gradient different than None at position "
                    f"{i + 1}, but the corresponding forward input was not a Variable"
                )
            if not _is_tensor(g):
                raise TensorTypeError(
                    f"function {name} returned {type(g).__name__} at position {i + 1}: a "
                    "gradient is a Tensor or None"
                )
            if not self.needs_input_grad[i]:
                grads[i] = None
            elif tuple(g.shape) != shape:
                grads[i] = _sum_to(g, shape, name, i)
        return tuple(grads)


def _unused(*args: Any) -> tuple[Any, ...]:
    return ()


def _sum_to(g: Tensor, shape: tuple[int, ...], name: str, index: int) -> Tensor:
    """``g`` summed down to ``shape`` when ``shape`` broadcasts to it, as torch's engine
    does with a gradient of a broadcast shape; anything else is refused."""
    got = tuple(g.shape)
    lead = len(got) - len(shape)
    if lead < 0 or any(s not in (1, d) for s, d in zip(shape, got[lead:], strict=True)):
        raise TensorError(
            f"Function {name} returned an invalid gradient at index {index} - got "
            f"{list(got)} but expected shape compatible with {list(shape)}"
        )
    return sum_to(g, shape)


def once_differentiable(
    fn: Callable[..., Any],
) -> Callable[..., Any]:
    """Mark a ``backward`` as not differentiable itself (it runs with recording off; there
    are no higher-order gradients here anyway)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper


class Function(FunctionCtx):
    """Base class of user-defined differentiable operations (see the module's text)."""

    _backward_cls: type[BackwardCFunction]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._backward_cls = type(
            f"{cls.__name__}Backward", (BackwardCFunction,), {"_forward_cls": cls}
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if type(self) is not Function and "forward" in vars(type(self)):
            forward = inspect.getattr_static(type(self), "forward")
            if not isinstance(forward, staticmethod):
                raise TensorError(
                    "Legacy autograd function with non-static forward method is deprecated. "
                    "Please use new-style autograd function with static forward method. "
                    "(Example: https://pytorch.org/docs/stable/autograd.html#torch.autograd.Function)"
                )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise TensorError(
            f"{type(self).__name__}()(...): legacy autograd functions are not supported (as in "
            f"torch); define forward and backward as @staticmethods and call "
            f"{type(self).__name__}.apply(...)"
        )

    @staticmethod
    def forward(*args: Any, **kwargs: Any) -> Any:
        raise TensorError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: Any) -> Any:
        raise TensorError("setup_context is not implemented.")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise TensorError(
            "You must implement either the backward or vjp method for your custom "
            "autograd.Function to use it with backward mode AD."
        )

    vjp = backward

    @staticmethod
    def jvp(ctx: Any, *grad_inputs: Any) -> Any:
        raise TensorError(
            "autograd.Function.jvp: forward-mode AD is not supported by kernbench.torch's "
            "autograd; use backward mode (loss.backward(), torch.autograd.grad)"
        )

    @staticmethod
    def vmap(info: Any, in_dims: Any, *args: Any) -> Any:
        raise TensorError(
            "autograd.Function.vmap: torch.vmap is not supported by kernbench.torch; loop "
            "over the batch, or write the batched op"
        )

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        """Run ``forward`` and, when an input requires grad and recording is on, record
        one node whose backward is the class's ``backward``."""
        if cls is Function:
            raise TensorError("torch.autograd.Function.apply: subclass Function and call apply")
        if kwargs:
            raise TensorTypeError(
                f"{cls.__name__}.apply() takes no keyword arguments (as torch's): pass "
                f"{', '.join(sorted(kwargs))} positionally"
            )
        ctx = cls._backward_cls()
        recording = is_grad_enabled() and any(_is_tensor(a) and a.requires_grad for a in args)
        ctx.needs_input_grad = tuple(
            bool(recording and _is_tensor(a) and a.requires_grad) for a in args
        )
        custom_setup = cls.setup_context is not Function.setup_context
        with no_grad():
            if custom_setup:
                output = cls.forward(*args)
                cls.setup_context(ctx, args, output)
            else:
                output = cls.forward(ctx, *args)
        if not recording:
            return output
        single = not isinstance(output, tuple)
        outputs = (output,) if single else output
        outputs = tuple(_own(out, args, ctx) for out in outputs)
        ctx.attach_graph(args, outputs)
        excluded = {id(t) for t in ctx.non_differentiable}
        for nr, out in enumerate(outputs):
            if not _is_tensor(out):
                continue
            if id(out) in excluded or not out.dtype.is_floating_point:
                continue
            set_history(out, ctx, nr)
        return outputs[0] if single else outputs


def _user_backward(cls: type[Function]) -> Callable[..., Any]:
    """The user's ``backward``, or their ``vjp`` when only that is defined."""
    if cls.backward is Function.backward and cls.vjp is not Function.vjp:
        return cls.vjp
    return cls.backward


def _own(out: Any, inputs: tuple[Any, ...], ctx: BackwardCFunction) -> Any:
    """An output that is an input: the input itself when ``mark_dirty`` names it (it was
    changed in place), else a new tensor over its memory, as torch's view of it."""
    if not _is_tensor(out) or not any(out is a for a in inputs):
        return out
    if any(out is t for t in ctx.dirty_tensors):
        if out.is_leaf and out.requires_grad:
            raise TensorError(
                "a leaf Variable that requires grad is being used in an in-place operation."
            )
        return out
    return out.detach()
