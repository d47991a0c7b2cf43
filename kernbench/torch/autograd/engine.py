"""Running the graph backward: ``Tensor.backward``, ``torch.autograd.backward`` and
``torch.autograd.grad``.

The nodes reachable from the roots run in reverse topological order (of two ready
nodes, the one recorded later first, as torch's CPU queue orders them by sequence
number).  Gradients arriving at one node from several paths are added (an ``add``
kernel each, as torch's input buffer adds them); a leaf's gradient is added into its
``.grad`` in place, or becomes it.  Every gradient is computed by the facade's own ops
with recording off, so a backward costs simulated time as the device ops it runs do.
Callbacks queued while it runs (:func:`queue_callback`, as DistributedDataParallel's
reducer queues one) run once the graph is done.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kernbench.distributed.scheduler import current_rank
from kernbench.errors import TensorError
from kernbench.torch.autograd.grad_mode import no_grad
from kernbench.torch.autograd.graph import AccumulateGrad, Node, edge
from kernbench.torch.grad_slots import post_accumulate_grad_hooks

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["backward", "grad", "queue_callback", "tensor_backward"]

_RANK_KEY = "torch.autograd.callbacks"
_GLOBAL_CALLBACKS: list[list[Callable[[], None]]] = []


def _callbacks() -> list[list[Callable[[], None]]]:
    """The calling rank's backwards running (a rank may yield inside one), innermost last."""
    rank = current_rank()
    if rank is None:
        return _GLOBAL_CALLBACKS
    return rank.local.setdefault(_RANK_KEY, [])


def queue_callback(callback: Callable[[], None]) -> None:
    """Run ``callback`` when the calling rank's backward now running has finished its graph."""
    running = _callbacks()
    if not running:
        raise TensorError("queue_callback: no backward is running")
    running[-1].append(callback)


def _tensors(value: Any, what: str) -> list[Any]:
    if value is None:
        return []
    items = list(value) if isinstance(value, list | tuple) else [value]
    for item in items:
        if not hasattr(item, "grad_fn"):
            raise TensorError(f"{what}: expected Tensors, got {type(item).__name__}")
    return items


def _root_gradient(out: Tensor, given: Any, index: int) -> Tensor:
    if given is None:
        if out.numel() != 1:
            raise TensorError("grad can be implicitly created only for scalar outputs")
        if not out.dtype.is_floating_point:
            raise TensorError(
                f"grad can be implicitly created only for real scalar outputs but got {out.dtype}"
            )
        return out.new_ones(out.shape)
    if not hasattr(given, "grad_fn"):
        given = out.new_tensor(given) if hasattr(out, "new_tensor") else given
    if tuple(given.shape) != tuple(out.shape):
        raise TensorError(
            f"Mismatch in shape: grad_output[{index}] has a shape of {tuple(given.shape)} and "
            f"output[{index}] has a shape of {tuple(out.shape)}."
        )
    return given


def _run(
    roots: Sequence[Tensor],
    gradients: Sequence[Tensor],
    retain_graph: bool,
    capture: dict[int, Any] | None = None,
) -> None:
    """Run the graph from ``roots``; with ``capture`` (``id(tensor)`` of inputs whose
    node or accumulator it maps), store their gradients there instead of accumulating."""
    buffers: dict[Node, Tensor] = {}
    given_ids = {id(g.storage_device_tensor) for g in gradients}
    handed: dict[int, int] = {}
    for root, g in zip(roots, gradients, strict=True):
        node = edge(root)
        if node is None:
            raise TensorError(
                "element 0 of tensors does not require grad and does not have a grad_fn"
            )
        _add(buffers, node, g, handed)
    dependencies = _dependencies(buffers)
    ready = [(-n.sequence_nr, id(n), n) for n in buffers if dependencies.get(n, 0) == 0]
    heapq.heapify(ready)
    callbacks: list[Callable[[], None]] = []
    running = _callbacks()
    running.append(callbacks)
    try:
        with no_grad():
            while ready:
                _, _, node = heapq.heappop(ready)
                g = buffers.pop(node)
                key = id(g.storage_device_tensor)
                handed[key] -= 1
                if capture is not None and id(node) in capture:
                    capture[id(node)] = g
                    if isinstance(node, AccumulateGrad):
                        continue
                if isinstance(node, AccumulateGrad):
                    if capture is None:
                        owned = handed[key] == 0 and key not in given_ids
                        _accumulate(node.variable, g, owned)
                        for hook in post_accumulate_grad_hooks(node.variable):
                            hook(node.variable)
                    continue
                grads = node.apply(g)
                if not retain_graph:
                    node.release()
                settled = []
                for i, ((target, _), dtype) in enumerate(
                    zip(node.next_functions, node.input_dtypes, strict=True)
                ):
                    if target is None:
                        continue
                    gi = grads[i] if i < len(grads) else None
                    if gi is not None:
                        if gi.dtype != dtype:  # torch's engine casts it to the input's dtype
                            gi = gi.to(dtype)
                        _add(buffers, target, gi, handed)
                    dependencies[target] -= 1
                    if dependencies[target] == 0:
                        settled.append(target)
                # A node every path reached without a gradient does not run; the nodes
                # below it wait for it no longer (their other inputs may still come).
                while settled:
                    target = settled.pop()
                    if target in buffers:
                        heapq.heappush(ready, (-target.sequence_nr, id(target), target))
                        continue
                    for below, _ in target.next_functions:
                        if below is not None:
                            dependencies[below] -= 1
                            if dependencies[below] == 0:
                                settled.append(below)
            for callback in callbacks:
                callback()
    finally:
        running.pop()


def _dependencies(buffers: dict[Node, Tensor]) -> dict[Node, int]:
    counts: dict[Node, int] = {}
    seen = set(buffers)
    stack = list(buffers)
    while stack:
        node = stack.pop()
        for target, _ in node.next_functions:
            if target is None:
                continue
            counts[target] = counts.get(target, 0) + 1
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return counts


def _add(buffers: dict[Node, Tensor], node: Node, g: Tensor, handed: dict[int, int]) -> None:
    if node in buffers:
        old = buffers[node]
        handed[id(old.storage_device_tensor)] -= 1
        g = old + g
    buffers[node] = g
    key = id(g.storage_device_tensor)
    handed[key] = handed.get(key, 0) + 1


def _accumulate(variable: Tensor, g: Tensor, owned: bool) -> None:
    """``variable.grad += g`` in place, or ``variable.grad = g`` (a copy unless the
    gradient is a dense tensor nothing else holds), in the variable's dtype."""
    if g.dtype is not variable.dtype:
        g, owned = g.to(variable.dtype), True
    if variable.grad is None:
        dense = g.is_contiguous() and g.storage_device_tensor.shape == tuple(g.shape)
        variable.grad = g if owned and dense else g.clone()
    else:
        variable.grad.add_(g)


def tensor_backward(
    tensor: Tensor,
    gradient: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    inputs: Any = None,
) -> None:
    """``Tensor.backward``: :func:`backward` of one tensor."""
    backward(tensor, gradient, retain_graph, create_graph, inputs=inputs)


def backward(
    tensors: Any,
    grad_tensors: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    grad_variables: Any = None,
    inputs: Any = None,
) -> None:
    """Add the gradients of ``tensors`` (weighted by ``grad_tensors``; a scalar needs none)
    into the ``.grad`` of the leaves that require grad.  The graph's saved tensors are
    freed unless ``retain_graph``.  ``create_graph`` (a graph of the backward) is not
    supported."""
    roots = _tensors(tensors, "backward")
    if create_graph:
        raise TensorError(
            "backward(create_graph=True): higher-order gradients are not supported by "
            "kernbench.torch's autograd (v1)"
        )
    if inputs is not None:
        raise TensorError("backward(inputs=...) is not supported by kernbench.torch's autograd")
    given = grad_tensors if grad_tensors is not None else grad_variables
    given_list = [None] * len(roots) if given is None else _listed(given)
    if len(given_list) != len(roots):
        raise TensorError(
            f"grad can be implicitly created only for scalar outputs: got {len(given_list)} "
            f"gradients for {len(roots)} tensors"
        )
    gradients = [
        _root_gradient(r, g, i) for i, (r, g) in enumerate(zip(roots, given_list, strict=True))
    ]
    _run(roots, gradients, bool(retain_graph))


def _listed(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else [value]


def grad(
    outputs: Any,
    inputs: Any,
    grad_outputs: Any = None,
    retain_graph: bool | None = None,
    create_graph: bool = False,
    only_inputs: bool = True,
    allow_unused: bool | None = None,
    is_grads_batched: bool = False,
    materialize_grads: bool = False,
) -> tuple[Any, ...]:
    """The gradients of ``outputs`` with respect to ``inputs``, returned (not accumulated
    into ``.grad``), as torch's."""
    if create_graph or is_grads_batched:
        raise TensorError(
            "autograd.grad(create_graph=True / is_grads_batched=True) is not supported by "
            "kernbench.torch's autograd (v1)"
        )
    roots = _tensors(outputs, "autograd.grad")
    targets = _tensors(inputs, "autograd.grad")
    for i, t in enumerate(targets):
        if not t.requires_grad:
            raise TensorError(
                f"One of the differentiated Tensors (input {i}) does not require grad"
            )
    given_list = [None] * len(roots) if grad_outputs is None else _listed(grad_outputs)
    gradients = [
        _root_gradient(r, g, i) for i, (r, g) in enumerate(zip(roots, given_list, strict=True))
    ]
    nodes = [edge(t) for t in targets]
    capture: dict[int, Any] = {id(n): None for n in nodes}
    _run(roots, gradients, bool(retain_graph), capture)
    results = []
    for i, (t, n) in enumerate(zip(targets, nodes, strict=True)):
        found = capture[id(n)]
        if found is None:
            if not allow_unused and not materialize_grads:
                raise TensorError(
                    f"One of the differentiated Tensors (input {i}) appears to not have been "
                    "used in the graph. Set allow_unused=True if this is the desired behavior."
                )
            if materialize_grads:
                found = t.new_zeros(t.shape)
        results.append(found)
    return tuple(results)
