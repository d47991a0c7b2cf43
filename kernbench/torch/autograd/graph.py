"""The recorded graph: a :class:`Node` per differentiable operation, an
:class:`AccumulateGrad` per leaf that requires grad.

A node holds the edges to the nodes that made its inputs (``next_functions``, as
torch's), the tensors its backward needs (``saved``, detached views of the same memory,
so no reference cycle runs through a result and its node) and the function that turns
the gradient of its output into gradients of its inputs.  Saved tensors are held until
a backward without ``retain_graph`` frees them, as torch's.

``saved_tensors_hooks(pack_hook, unpack_hook)`` (torch's ``torch.autograd.graph``
context manager, per rank) has every tensor a node saves while it is active kept as
``pack_hook(tensor)`` and given back to the backward as ``unpack_hook(packed)``: storing
activations in a narrower dtype, say, saves the device memory it saves on a GPU.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.distributed.scheduler import current_rank
from kernbench.errors import TensorError
from kernbench.torch.grad_slots import set_history, storage_version

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "AccumulateGrad",
    "Node",
    "UnsupportedBackward",
    "disable_saved_tensors_hooks",
    "edge",
    "pack_saved",
    "output_edge",
    "record",
    "save_on_cpu",
    "saved",
    "saved_tensors_hooks",
    "saved_versions",
    "check_versions",
    "sequence_mark",
    "unpack_saved",
]

_SEQUENCE = itertools.count()

FREED = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


class Node:
    """One recorded operation: ``name()`` is torch's (``AddBackward0``, ``MmBackward0``)."""

    def __init__(
        self,
        name: str,
        inputs: Sequence[Any],
        backward: Callable[..., Sequence[Any]],
        saved_tensors: Sequence[Any] = (),
        num_outputs: int = 1,
    ) -> None:
        self._name = name
        self.num_outputs = num_outputs
        self.next_functions = tuple(output_edge(t) for t in inputs)
        # The dtype each input's gradient must have (torch's input metadata): a gradient
        # of another dtype (a float32 sum's, flowing into a bfloat16 operand) is cast.
        self.input_dtypes = tuple(
            t.dtype if node is not None else None
            for t, (node, _) in zip(inputs, self.next_functions, strict=True)
        )
        self._backward = backward
        self._saved: tuple[Any, ...] | None = pack_saved(saved_tensors)
        self._versions = saved_versions(self._saved)
        self._saves = bool(saved_tensors)
        self.sequence_nr = next(_SEQUENCE)
        # Hooks registered on the tensors this node made (``register_hook``, ``retain_grad``),
        # per output number; the engine runs them on the gradient before the node.
        self.tensor_hooks: dict[int, dict[int, Callable[[Any], Any]]] = {}
        self.retained: dict[int, weakref.ref] = {}

    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"<{self._name} object at {id(self):#x}>"

    def apply(self, *grads: Tensor | None) -> Sequence[Any]:
        """Gradients of the inputs (None where an input needs none) from the outputs'
        (one per output; the engine runs a node once at least one has arrived)."""
        if self._saved is None:
            raise TensorError(FREED)
        check_versions(self.name(), self._saved, self._versions)
        return self._backward(*grads, *unpack_saved(self._saved))

    def unalias_saved(self, storage: Any, copy: Callable[[Any], Any]) -> None:
        """Replace the saved tensors over ``storage`` by ``copy(tensor)`` (an in-place op
        is about to overwrite it, and this node needs the values as they are)."""
        if not self._saved:
            return
        self._saved = tuple(
            copy(t) if getattr(t, "storage_device_tensor", None) is storage else t
            for t in self._saved
        )
        self._versions = saved_versions(self._saved)

    def release(self) -> None:
        """Drop the saved tensors (after a backward without ``retain_graph``)."""
        if self._saves:
            self._saved = None


class UnsupportedBackward(Node):
    """The node of an operation without a backward formula: running it raises, naming it."""

    def __init__(self, op: str, inputs: Sequence[Any]) -> None:
        self.op = op
        # (apply is overridden: a bound method as the backward would make a reference
        # cycle, and a node in a cycle keeps its tensors' memory until the cyclic GC runs)
        super().__init__(f"NotImplemented[{op}]", inputs, _no_inputs)

    def apply(self, *grads: Tensor | None) -> Sequence[Any]:
        raise TensorError(
            f"backward through torch.{self.op} is not supported yet: kernbench.torch's autograd "
            "has formulas for the ops ADR 0020 lists; compute this part under torch.no_grad() "
            "(or detach() its inputs), or write its gradient by hand"
        )


class AccumulateGrad(Node):
    """The end of a path at a leaf: adds the gradient into ``variable.grad``."""

    def __init__(self, variable: Tensor) -> None:
        self.variable = variable
        super().__init__("torch::autograd::AccumulateGrad", (), _no_inputs)

    def release(self) -> None:
        return None


def _no_inputs(grad: Tensor) -> Sequence[Any]:
    return ()


# One AccumulateGrad per live leaf (held by the nodes that point at it, as torch's).
_ACCUMULATORS: weakref.WeakValueDictionary[int, AccumulateGrad] = weakref.WeakValueDictionary()


def edge(t: Any) -> Node | None:
    """The node a gradient for input ``t`` goes to: its grad_fn, its leaf's
    accumulator, or None (a number, or a tensor that does not require grad)."""
    if not getattr(t, "requires_grad", False):
        return None
    if t.grad_fn is not None:
        return t.grad_fn
    found = _ACCUMULATORS.get(id(t))
    if found is None or found.variable is not t:
        found = _ACCUMULATORS[id(t)] = AccumulateGrad(t)
    return found


def sequence_mark() -> int:
    """A number below every node recorded from now on (a region's start)."""
    return next(_SEQUENCE)


def output_edge(t: Any) -> tuple[Node | None, int]:
    """``(node, output number)`` a gradient for input ``t`` goes to (torch's edge)."""
    node = edge(t)
    if node is None or node is not t.grad_fn:
        return node, 0
    return node, t.output_nr


def saved(t: Any) -> Any:
    """What a node keeps of tensor ``t``: a detached tensor over the same memory."""
    return t.detach() if hasattr(t, "detach") else t


def record(outputs: Any, node: Node) -> Any:
    """Make the floating tensors in ``outputs`` (a tensor or a tuple) results of ``node``
    (each its output 0: a node with several outputs numbers them itself)."""
    for out in outputs if isinstance(outputs, tuple | list) else (outputs,):
        if hasattr(out, "grad_fn") and out.dtype.is_floating_point:
            set_history(out, node)
    return outputs


# -- version checks ----------------------------------------------------------------------


def saved_versions(kept: Sequence[Any] | None) -> tuple[int | None, ...]:
    """The version of each saved tensor's storage now (None for what is not a tensor)."""
    return tuple(
        storage_version(t) if hasattr(t, "storage_device_tensor") else None for t in kept or ()
    )


def check_versions(name: str, kept: Sequence[Any], versions: Sequence[int | None]) -> None:
    """torch's error when a tensor a node saved was changed in place since."""
    for t, then in zip(kept, versions, strict=True):
        if then is None:
            continue
        now = storage_version(t)
        if now != then:
            raise TensorError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{t.dtype} {list(t.shape)}], saved by {name}, is at "
                f"version {now}; expected version {then} instead. Hint: the tensor was "
                "changed in place after the op that saved it; use the out-of-place form, or "
                "clone() it before changing it"
            )


# -- saved tensor hooks ------------------------------------------------------------------

_HOOKS_KEY = "torch.autograd.saved_tensors_hooks"
_GLOBAL_HOOKS: list[Any] = []


def _hook_stack() -> list[Any]:
    """The calling rank's active hooks, innermost last (a str: hooks disabled, why)."""
    rank = current_rank()
    if rank is None:
        return _GLOBAL_HOOKS
    return rank.local.setdefault(_HOOKS_KEY, [])


class _Packed:
    """A saved tensor as its pack hook returned it, with the hook that gives it back."""

    __slots__ = ("unpack", "value")

    def __init__(self, value: Any, unpack: Callable[[Any], Any]) -> None:
        self.value = value
        self.unpack = unpack


def pack_saved(tensors: Sequence[Any]) -> tuple[Any, ...]:
    """What a node keeps of ``tensors`` (already :func:`saved`): each packed by the
    innermost ``saved_tensors_hooks`` when there are any."""
    stack = _hook_stack()
    if not stack or not tensors or isinstance(stack[-1], str):
        return tuple(tensors)
    pack, unpack = stack[-1]
    stack.append("packing")  # a pack hook's own ops save nothing through the hooks
    try:
        return tuple(_Packed(pack(t), unpack) if hasattr(t, "grad_fn") else t for t in tensors)
    finally:
        stack.pop()


def unpack_saved(kept: Sequence[Any]) -> tuple[Any, ...]:
    """The tensors :func:`pack_saved` kept, as the backward needs them."""
    out = []
    for item in kept:
        if isinstance(item, _Packed):
            item = item.unpack(item.value)
            if not hasattr(item, "grad_fn"):
                raise TensorError(
                    f"saved_tensors_hooks: unpack_hook returned {type(item).__name__}; it must "
                    "return the Tensor that was packed (or one equal to it)"
                )
        out.append(item)
    return tuple(out)


class saved_tensors_hooks:  # noqa: N801 - torch's name
    """``with saved_tensors_hooks(pack_hook, unpack_hook):`` as torch's (see above)."""

    def __init__(self, pack_hook: Callable[[Any], Any], unpack_hook: Callable[[Any], Any]) -> None:
        if not callable(pack_hook) or not callable(unpack_hook):
            raise TensorError("saved_tensors_hooks: pack_hook and unpack_hook must be callable")
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self) -> saved_tensors_hooks:
        stack = _hook_stack()
        if stack and isinstance(stack[-1], str) and stack[-1] != "packing":
            raise TensorError(stack[-1])
        stack.append((self.pack_hook, self.unpack_hook))
        return self

    def __exit__(self, *exc: object) -> None:
        _hook_stack().pop()


class disable_saved_tensors_hooks:  # noqa: N801 - torch's name
    """Inside it, entering ``saved_tensors_hooks`` raises ``error_message``; tensors are
    saved as they are."""

    def __init__(self, error_message: str) -> None:
        self.error_message = error_message

    def __enter__(self) -> None:
        _hook_stack().append(self.error_message)

    def __exit__(self, *exc: object) -> None:
        _hook_stack().pop()


def save_on_cpu(pin_memory: bool = False, device_type: str = "cuda") -> Any:
    """Refused: tensors here live on the simulated devices only."""
    raise TensorError(
        "torch.autograd.graph.save_on_cpu: there are no host tensors in kernbench.torch (cpu() "
        "copies on the device), so offloading saves nothing here; to shrink saved "
        "activations, pack them with saved_tensors_hooks (e.g. to bfloat16) or checkpoint "
        "them with torch.utils.checkpoint"
    )
