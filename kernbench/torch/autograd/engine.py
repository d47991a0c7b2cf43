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
from kernbench.torch.autograd.graph import AccumulateGrad, Node, output_edge
from kernbench.torch.grad_slots import leaf_grad_hooks, post_accumulate_grad_hooks

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "backward",
    "grad",
    "backward_running",
    "queue_callback",
    "register_anomaly_check",
    "run_to_edges",
    "tensor_backward",
]

_RANK_KEY = "torch.autograd.callbacks"
# What runs on each node's gradients after it ran (anomaly detection, registered by checks.py).
_ANOMALY: list[Callable[[str, Sequence[Any]], None]] = []


def register_anomaly_check(check: Callable[[str, Sequence[Any]], None]) -> None:
    """Have ``check(node_name, grads)`` called after every node the engine runs."""
    _ANOMALY[:] = [check]


_GLOBAL_CALLBACKS: list[list[Callable[[], None]]] = []


def _callbacks() -> list[list[Callable[[], None]]]:
    """The calling rank's backwards running (a rank may yield inside one), innermost last."""
    rank = current_rank()
    if rank is None:
        return _GLOBAL_CALLBACKS
    return rank.local.setdefault(_RANK_KEY, [])


def backward_running() -> bool:
    """Whether a backward is running on the calling rank (its graph, or a callback's)."""
    return bool(_callbacks())


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


Slots = list  # a node's gradients so far, one per output (None: none arrived)


def _run(
    roots: Sequence[Tensor],
    gradients: Sequence[Tensor],
    retain_graph: bool,
    capture: dict[tuple[int, int], Any] | None = None,
    stop_at_capture: bool = False,
) -> None:
    """Run the graph from ``roots``.

    With ``capture`` (keys ``(id(node), output number)`` of the inputs' edges), store
    their gradients there instead of accumulating into leaves, and run only the nodes on
    a path to one of them (torch's ``autograd.grad`` does no more work than that); with
    ``stop_at_capture`` too, a captured node does not run (the caller hands its gradient
    on: a checkpointed region's recomputation stops at the region's inputs)."""
    buffers: dict[Node, Slots] = {}
    given_ids = {id(g.storage_device_tensor) for g in gradients}
    handed: dict[int, int] = {}
    targets = None if capture is None else {key[0] for key in capture}
    roots_nodes = []
    for root, g in zip(roots, gradients, strict=True):
        node, nr = output_edge(root)
        if node is None:
            raise TensorError(
                "element 0 of tensors does not require grad and does not have a grad_fn"
            )
        _add(buffers, node, nr, g, handed)
        roots_nodes.append(node)
    needed = None if targets is None else _needed(roots_nodes, targets, stop_at_capture)
    dependencies = _dependencies(buffers, needed, targets if stop_at_capture else None)
    ready = [(-n.sequence_nr, id(n), n) for n in buffers if dependencies.get(n, 0) == 0]
    heapq.heapify(ready)
    callbacks: list[Callable[[], None]] = []
    running = _callbacks()
    running.append(callbacks)
    try:
        with no_grad():
            while ready:
                _, _, node = heapq.heappop(ready)
                slots = buffers.pop(node)
                for g in slots:
                    if g is not None:
                        handed[id(g.storage_device_tensor)] -= 1
                hooked = _run_tensor_hooks(node, slots)
                if capture is not None:
                    for nr, g in enumerate(slots):
                        if (id(node), nr) in capture:
                            capture[id(node), nr] = g
                    if (
                        isinstance(node, AccumulateGrad)
                        or (stop_at_capture and id(node) in targets)
                        or not any(c in needed for c, _ in node.next_functions)
                    ):
                        continue  # (nothing below it is asked for: it need not run)
                if isinstance(node, AccumulateGrad):
                    g = slots[0]
                    key = id(g.storage_device_tensor)
                    owned = not hooked and handed[key] == 0 and key not in given_ids
                    _accumulate(node.variable, g, owned)
                    for hook in post_accumulate_grad_hooks(node.variable):
                        hook(node.variable)
                    continue
                grads = node.apply(*slots)
                if _ANOMALY:
                    _ANOMALY[0](node.name(), grads)
                if not retain_graph:
                    node.release()
                settled = []
                for i, ((target, nr), dtype) in enumerate(
                    zip(node.next_functions, node.input_dtypes, strict=True)
                ):
                    if target is None or (needed is not None and target not in needed):
                        continue
                    gi = grads[i] if i < len(grads) else None
                    if gi is not None:
                        if gi.dtype != dtype:  # torch's engine casts it to the input's dtype
                            gi = gi.to(dtype)
                        _add(buffers, target, nr, gi, handed)
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
                    if stop_at_capture and id(target) in targets:
                        continue
                    for below, _ in target.next_functions:
                        if below is not None and (needed is None or below in needed):
                            dependencies[below] -= 1
                            if dependencies[below] == 0:
                                settled.append(below)
            for callback in callbacks:
                callback()
    finally:
        running.pop()


def _run_tensor_hooks(node: Node, slots: Slots) -> bool:
    """Run the ``register_hook`` hooks of the tensors ``node`` made (a leaf's, for its
    accumulator) on their gradients in ``slots``, in place; then keep the gradients of
    the tensors that ``retain_grad()``.  True if a hook replaced a gradient."""
    replaced = False
    if isinstance(node, AccumulateGrad):
        hooks = {0: leaf_grad_hooks(node.variable)}
    elif not node.tensor_hooks and not node.retained:  # the usual node: nothing to run
        return False
    else:
        hooks = {nr: list(found.values()) for nr, found in node.tensor_hooks.items() if found}
    for nr, chain in hooks.items():
        for hook in chain:
            if slots[nr] is None:
                break
            result = hook(slots[nr])
            if result is None:
                continue
            if not hasattr(result, "grad_fn"):
                raise TensorError(
                    f"hook {getattr(hook, '__name__', hook)!r} returned "
                    f"{type(result).__name__}: a tensor hook returns a Tensor or None"
                )
            if tuple(result.shape) != tuple(slots[nr].shape):
                raise TensorError(
                    f"hook {getattr(hook, '__name__', hook)!r} has changed the size of value "
                    f"(from {tuple(slots[nr].shape)} to {tuple(result.shape)})"
                )
            slots[nr], replaced = result, True
    for nr, ref in list(node.retained.items()):
        tensor = ref()
        if tensor is None:
            del node.retained[nr]
        elif slots[nr] is not None:
            g = slots[nr]
            tensor.grad = g.clone() if tensor.grad is None else tensor.grad + g
    return replaced


def _needed(roots: Sequence[Node], targets: set[int], stop: bool) -> set[Node]:
    """The nodes on a path from ``roots`` to a node in ``targets`` (by id); with
    ``stop``, paths end at the first target they meet."""
    known: dict[Node, bool] = {}
    stack: list[tuple[Node, bool]] = [(n, False) for n in roots]
    while stack:
        node, expanded = stack.pop()
        if node in known:
            continue
        terminal = stop and id(node) in targets
        children = [] if terminal else [c for c, _ in node.next_functions if c is not None]
        if not expanded:
            stack.append((node, True))
            stack.extend((c, False) for c in children if c not in known)
            continue
        known[node] = id(node) in targets or any(known.get(c, False) for c in children)
    return {node for node, hit in known.items() if hit}


def _dependencies(
    buffers: dict[Node, Slots], needed: set[Node] | None, terminal: set[int] | None
) -> dict[Node, int]:
    """How many edges into each node are still to be run (only into ``needed`` nodes, and
    none out of a ``terminal`` one, when given)."""
    counts: dict[Node, int] = {}
    seen = set(buffers)
    stack = list(buffers)
    while stack:
        node = stack.pop()
        if terminal is not None and id(node) in terminal:
            continue
        for target, _ in node.next_functions:
            if target is None or (needed is not None and target not in needed):
                continue
            counts[target] = counts.get(target, 0) + 1
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return counts


def _add(
    buffers: dict[Node, Slots], node: Node, nr: int, g: Tensor, handed: dict[int, int]
) -> None:
    slots = buffers.get(node)
    if slots is None:
        slots = buffers[node] = [None] * node.num_outputs
    old = slots[nr]
    if old is not None:
        handed[id(old.storage_device_tensor)] -= 1
        g = old + g
    slots[nr] = g
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
        raise TensorError(f"backward(create_graph=True): {_NO_HIGHER_ORDER}")
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


_NO_HIGHER_ORDER = (
    "higher-order gradients are not supported by kernbench.torch's autograd (v1): a "
    "gradient is not itself differentiable here.  A gradient penalty (WGAN-GP, R1) can be "
    "replaced by weight clipping (WGAN: p.data.clamp_(-c, c) after each critic step) or "
    "spectral normalisation; a Hessian-vector product by finite differences of two "
    "gradients"
)


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
            f"autograd.grad(create_graph=True / is_grads_batched=True): {_NO_HIGHER_ORDER}"
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
    edges = [output_edge(t) for t in targets]
    capture: dict[tuple[int, int], Any] = {(id(n), nr): None for n, nr in edges}
    _run(roots, gradients, bool(retain_graph), capture)
    results = []
    for i, (t, (n, nr)) in enumerate(zip(targets, edges, strict=True)):
        found = capture[id(n), nr]
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


def run_to_edges(
    roots: Sequence[Tensor], gradients: Sequence[Tensor], edges: Sequence[tuple[Node, int]]
) -> tuple[Any, ...]:
    """Run the graph from ``roots`` (given their gradients) down to ``edges`` and no
    further: the gradients arriving at each edge (None where none did), in order.  What a
    recomputed region (``torch.utils.checkpoint``) hands on to the graph outside it."""
    capture: dict[tuple[int, int], Any] = {(id(n), nr): None for n, nr in edges}
    _run(roots, gradients, False, capture, stop_at_capture=True)
    return tuple(capture[id(n), nr] for n, nr in edges)
