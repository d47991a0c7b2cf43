"""In-place ops on tensors in the graph: ``h.relu_()``, ``out += identity``,
``nn.ReLU(inplace=True)``, ``h[mask] = value``, ``buf.copy_(x)``.

torch records an in-place op as the op's node with the tensor as its output, the
tensor's previous history as its input.  Here the op's out-of-place form runs and
records its node (the formulas are the out-of-place ones), the result is copied into the
tensor's memory, and the tensor becomes that node's output.  Where the node saved the
tensor itself (``mul_`` needs its old value for the other operand's gradient), that
saved tensor is a copy taken first, as torch's generated code clones it.  Costs: the op
and one copy more than torch's in-place kernel (plus that clone where torch clones too).

Every in-place op bumps the version of the tensor's storage (torch's version counter);
a node that saved a tensor checks, when its backward runs, that the version is the one
it saved, and raises torch's "modified by an inplace operation" error otherwise.

Refused, naming the call: an in-place op on a leaf that requires grad (torch's error),
and on a view of a tensor that is in the graph (``y[:, 0].relu_()``: torch rewrites the
base's history, which is not done here), where the base's gradient would be wrong.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.autograd.formulas import sum_to
from kernbench.torch.autograd.grad_mode import no_grad
from kernbench.torch.autograd.graph import Node
from kernbench.torch.grad_slots import graph_owner, set_history
from kernbench.torch.tensor import Tensor

__all__ = ["record_in_place", "record_in_place_function"]

_OPERATORS = {
    "__iadd__": "__add__",
    "__isub__": "__sub__",
    "__imul__": "__mul__",
    "__itruediv__": "__truediv__",
    "__ipow__": "__pow__",
}


# The nodes of ops whose result is a view of their input (reshape's copy included: an
# in-place op on it is refused too, though it would be safe).
_VIEW_NODES = {
    "ViewBackward0", "UnsafeViewBackward0", "SliceBackward0", "SelectBackward0",
    "TBackward0", "TransposeBackward0", "PermuteBackward0", "UnsqueezeBackward0",
    "SqueezeBackward0", "ExpandBackward0", "SplitBackward0", "SplitWithSizesBackward0",
    "UnbindBackward0", "AliasBackward0", "NarrowBackward0", "AsStridedBackward0",
}  # fmt: skip


def _refuse_views(target: Tensor, op: str) -> None:
    """An in-place op on a view of a tensor in the graph (or of a leaf that requires
    grad) is refused: the base's gradient would miss it."""
    owner = graph_owner(target)
    storage = target.storage_device_tensor
    whole = target.numel() == math.prod(storage.shape) and target.is_contiguous()
    view = target.grad_fn is not None and target.grad_fn.name() in _VIEW_NODES
    if view or (owner is not None and owner is not target) or (target.requires_grad and not whole):
        raise TensorError(
            f"{op}: an in-place op on a view of a tensor that is part of the autograd graph is "
            "not supported by kernbench.torch's autograd (its base's gradient would miss it); "
            "apply it to the base tensor, or use the out-of-place form on a clone()"
        )


def _write_back(target: Tensor, result: Tensor, op: str) -> Tensor:
    """``target`` takes ``result``'s values and becomes its node's output."""
    if tuple(result.shape) != tuple(target.shape):
        raise TensorError(
            f"{op}: output with shape {list(target.shape)} doesn't match the broadcast shape "
            f"{list(result.shape)}"
        )
    node, nr = result.grad_fn, result.output_nr
    if node is not None:  # a saved copy of the tensor keeps the values the node needs
        node.unalias_saved(target.storage_device_tensor, _copy)
    elif target.requires_grad:  # a result that does not depend on it differentiably
        node, nr = Node(f"{op.rpartition('.')[2]}Backward", (target,), _no_gradient), 0
    with no_grad():
        target.copy_(result)  # (bumps the version)
    if node is not None:
        set_history(target, node, nr)
    return target


def _no_gradient(g: Tensor) -> tuple[None]:
    return (None,)


def _copy(t: Tensor) -> Tensor:
    with no_grad():
        return t.clone()


def record_in_place(fn: Callable, name: str, op: str, args: tuple, kwargs: dict) -> Any:
    """Run the in-place method ``name`` (``op`` for messages) as ``fn(*args, **kwargs)``
    would, recording it in the graph."""
    target = args[0]
    if not isinstance(target, Tensor):
        raise TensorError(f"{op}: expected a tensor to write into")
    if target.is_leaf and target.requires_grad:
        raise TensorError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    _refuse_views(target, op)
    if name == "__setitem__":
        return _setitem(target, args[1], args[2], op)
    if name == "copy_":
        src = args[1]
        value = src.to(target.dtype) if src.dtype is not target.dtype else src
        return _setitem(target, Ellipsis, value, op)
    if name in ("zero_", "fill_"):
        value = 0.0 if name == "zero_" else args[1]
        return _setitem(target, Ellipsis, value, op)
    base = _OPERATORS.get(name, name[:-1] if name.endswith("_") else None)
    method = getattr(Tensor, base, None) if base else None
    if method is None:
        raise TensorError(
            f"{op}: this in-place op has no out-of-place form to record; use the out-of-place "
            "op and assign its result"
        )
    result = method(target, *args[1:], **kwargs)
    if result is NotImplemented or not isinstance(result, Tensor):
        return result
    if result.dtype is not target.dtype:
        result = result.to(target.dtype)
    return _write_back(target, result, op)


def record_in_place_function(fn: Callable, op: str, args: tuple, kwargs: dict) -> Any:
    """``F.relu(x, inplace=True)`` and the like: the out-of-place call, written back into
    ``x`` (recorded as above)."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError) as exc:
        raise TensorError(f"{op}: {exc}") from exc
    arguments = dict(bound.arguments)
    target = next(iter(arguments.values()))
    if not isinstance(target, Tensor):
        raise TensorError(f"{op}(inplace=True): expected a tensor to write into")
    if target.is_leaf and target.requires_grad:
        raise TensorError(
            "a leaf Variable that requires grad is being used in an in-place operation."
        )
    _refuse_views(target, f"{op}(inplace=True)")
    arguments["inplace"] = False
    result = fn(**arguments)
    return _write_back(target, result, f"{op}(inplace=True)")


def _setitem(target: Tensor, key: Any, value: Any, op: str) -> Tensor:
    """``target[key] = value`` recorded: the written elements take ``value``'s gradient,
    the others keep the tensor's previous one."""
    inputs = (target, value)  # (the edges are read now: to the tensor's previous history)
    need_old = target.requires_grad
    with no_grad():
        target[key] = value  # (bumps the version)
    value_shape = tuple(value.shape) if isinstance(value, Tensor) else None
    need_value = isinstance(value, Tensor) and value.requires_grad

    def backward(g: Tensor) -> tuple[Any, Any]:
        g_old = None
        if need_old:
            g_old = g.clone()
            g_old[key] = 0.0
        g_value = None
        if need_value:
            picked = g[key]
            g_value = picked if value_shape is None else sum_to(picked, value_shape)
        return g_old, g_value

    node = Node("CopySlices", inputs, backward)
    set_history(target, node)
    return target
