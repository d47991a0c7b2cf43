"""The recorded graph: a :class:`Node` per differentiable operation, an
:class:`AccumulateGrad` per leaf that requires grad.

A node holds the edges to the nodes that made its inputs (``next_functions``, as
torch's), the tensors its backward needs (``saved``, detached views of the same memory,
so no reference cycle runs through a result and its node) and the function that turns
the gradient of its output into gradients of its inputs.  Saved tensors are held until
a backward without ``retain_graph`` frees them, as torch's.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.grad_slots import set_history

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "AccumulateGrad",
    "Node",
    "UnsupportedBackward",
    "edge",
    "output_edge",
    "record",
    "saved",
    "sequence_mark",
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
        self._saved: tuple[Any, ...] | None = tuple(saved_tensors)
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
        return self._backward(*grads, *self._saved)

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
