"""``torch.utils.checkpoint``: activation checkpointing, as torch's two variants.

A checkpointed function keeps none of its intermediate activations for backward; the
backward runs the function again (with the random-number state it had, so dropout
draws the same masks, and in the autocast region it ran in) and differentiates the
recomputation.  Both costs are simulated:
the region's memory is freed after the forward (``torch.cuda.max_memory_allocated``
drops), and the backward pays the forward a second time.

* ``use_reentrant=False`` (torch's recommended one): the forward is recorded as usual,
  then the region's graph is replaced by one node whose edges are the ones leaving the
  region (its tensor inputs, the parameters it used, anything else from outside), so
  gradients reach parameters the function closes over, as torch's do.  The backward
  recomputes the region and runs its graph down to those edges only.
* ``use_reentrant=True``: the forward runs with recording off, as one
  ``autograd.Function`` over the tensor arguments (``CheckpointFunctionBackward``); its
  backward recomputes on detached inputs and runs a backward of its own, which adds the
  parameters' gradients into their ``.grad`` directly.  As torch's, outputs need an
  input that requires grad, and keyword arguments are refused.

As torch (2.4 and later), ``use_reentrant`` must be passed: the two differ in what they
differentiate.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.amp import autocast, get_autocast_dtype, is_autocast_enabled
from kernbench.torch.autograd import Function, backward, enable_grad, is_grad_enabled
from kernbench.torch.autograd.engine import run_to_edges
from kernbench.torch.autograd.graph import FREED, AccumulateGrad, Node, sequence_mark
from kernbench.torch.grad_slots import set_history
from kernbench.torch.random import current_generator

__all__ = ["checkpoint", "checkpoint_sequential"]

_EXPLICIT = (
    "torch.utils.checkpoint: please pass in use_reentrant=True or use_reentrant=False "
    "explicitly. It is recommended that you use use_reentrant=False. Refer to docs for more "
    "details on the differences between the two variants."
)


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def checkpoint(
    function: Callable[..., Any],
    *args: Any,
    use_reentrant: bool | None = None,
    context_fn: Callable[[], Any] | None = None,
    determinism_check: str = "default",
    debug: bool = False,
    preserve_rng_state: bool = True,
    **kwargs: Any,
) -> Any:
    """``function(*args, **kwargs)`` without keeping its activations for backward."""
    if use_reentrant is None:
        raise TensorError(_EXPLICIT)
    if determinism_check not in ("default", "none"):
        raise TensorError(
            f"torch.utils.checkpoint: determinism_check should be one of ['default', 'none'], "
            f"but got {determinism_check!r}"
        )
    if use_reentrant:
        if context_fn is not None or debug:
            raise TensorError(
                "Passing context_fn or debug is only supported when use_reentrant=False."
            )
        if kwargs:
            raise TensorError("Unexpected keyword arguments: " + ",".join(kwargs))
        if is_grad_enabled() and not any(_is_tensor(a) and a.requires_grad for a in args):
            warnings.warn(
                "None of the inputs have requires_grad=True. Gradients will be None",
                stacklevel=2,
            )
        return CheckpointFunction.apply(function, preserve_rng_state, *args)
    if context_fn is not None:
        raise TensorError(
            "torch.utils.checkpoint(context_fn=...): selective activation checkpointing is "
            "not supported; checkpoint the whole function"
        )
    return _checkpoint_region(function, args, kwargs, preserve_rng_state, determinism_check)


def checkpoint_sequential(
    functions: Any,
    segments: int,
    input: Any,  # noqa: A002 - torch's name
    use_reentrant: bool | None = None,
    **kwargs: Any,
) -> Any:
    """Run ``functions`` (a list or an ``nn.Sequential``) in ``segments`` checkpointed
    chunks, the last one not checkpointed, as torch's."""
    if use_reentrant is None:
        raise TensorError(_EXPLICIT)
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise TensorError(
            f"checkpoint_sequential: segments must be a positive int, got {segments!r}"
        )
    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(  # noqa: A001
            _run_range(functions, start, end),
            input,
            use_reentrant=use_reentrant,
            **kwargs,
        )
    return _run_range(functions, end + 1, len(functions) - 1)(input)


def _run_range(functions: list[Any], start: int, end: int) -> Callable[[Any], Any]:
    def forward(value: Any) -> Any:
        for j in range(start, end + 1):
            value = functions[j](value)
        return value

    return forward


class _Replay:
    """What the recomputation must see as the forward did: the calling rank's generator
    state (kept on the host, as torch stashes it: no device work) and the autocast region
    it ran in."""

    def __init__(self, preserve_rng_state: bool) -> None:
        self.state = current_generator().get_state() if preserve_rng_state else None
        self.autocast = (is_autocast_enabled("cuda"), get_autocast_dtype("cuda"))

    def run(self, fn: Callable[[], Any]) -> Any:
        enabled, dtype = self.autocast
        with autocast("cuda", dtype=dtype, enabled=enabled):
            if self.state is None:
                return fn()
            generator = current_generator()
            now = generator.get_state()
            generator.set_state(self.state)
            try:
                return fn()
            finally:
                generator.set_state(now)


class CheckpointFunction(Function):
    """The reentrant variant: one node over the tensor arguments."""

    @staticmethod
    def forward(ctx: Any, run_function: Callable, preserve_rng_state: bool, *args: Any) -> Any:
        ctx.run_function = run_function
        ctx.replay = _Replay(preserve_rng_state)
        ctx.inputs = [None if _is_tensor(a) else a for a in args]
        ctx.tensor_indices = [i for i, a in enumerate(args) if _is_tensor(a)]
        ctx.save_for_backward(*(a for a in args if _is_tensor(a)))
        return run_function(*args)

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> Any:
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors, strict=True):
            inputs[i] = t.detach()
            if ctx.needs_input_grad[i + 2]:  # (after run_function and preserve_rng_state)
                inputs[i].requires_grad_(True)

        def rerun() -> Any:
            with enable_grad():
                return ctx.run_function(*inputs)

        outputs = ctx.replay.run(rerun)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        roots, given = [], []
        for out, g in zip(outputs, grads, strict=False):
            if _is_tensor(out) and out.requires_grad and g is not None:
                roots.append(out)
                given.append(g)
        if not roots:
            raise TensorError(
                "none of output has requires_grad=True, this checkpoint() is not necessary"
            )
        backward(roots, given)
        return (None, None, *(a.grad if _is_tensor(a) else None for a in inputs))


def _flat_tensors(value: Any) -> list[Any]:
    if _is_tensor(value):
        return [value]
    if isinstance(value, tuple | list):
        return [t for item in value for t in _flat_tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _flat_tensors(item)]
    return []


class _CheckpointNode(Node):
    """The non-reentrant variant's node: the region's outputs in, its edges out."""

    def __init__(
        self,
        edges: list[tuple[Node, int]],
        dtypes: list[Any],
        rerun: Callable[[], Any],
        shapes: list[tuple[int, ...]],
        determinism_check: str,
    ) -> None:
        super().__init__("CheckpointBackward", (), _unused, num_outputs=len(shapes))
        self.next_functions = tuple(edges)
        self.input_dtypes = tuple(dtypes)
        self._rerun = rerun
        self._shapes = shapes
        self._check = determinism_check
        self._saves = True
        self._saved = ()

    def release(self) -> None:
        """After a backward without ``retain_graph``: drop the region's inputs too."""
        self._saved = None
        self._rerun = None

    def apply(self, *grads: Any) -> tuple[Any, ...]:
        """Recompute the region and run its graph down to the edges leaving it (apply is
        overridden rather than given as a bound method: no reference cycle, so the
        node's memory goes when the graph does)."""
        if self._rerun is None:
            raise TensorError(FREED)
        outputs = _flat_tensors(self._rerun())
        shapes = [tuple(t.shape) for t in outputs]
        if self._check == "default" and shapes != self._shapes:
            raise TensorError(
                "torch.utils.checkpoint: Recomputed values for the following tensors have "
                f"different metadata than during the forward pass: shapes {self._shapes} in "
                f"the forward, {shapes} recomputed (is the function deterministic in its "
                "shapes?)"
            )
        roots, given = [], []
        for out, g in zip(outputs, grads, strict=True):
            if g is not None and out.requires_grad:
                roots.append(out)
                given.append(g)
        return run_to_edges(roots, given, self.next_functions)


def _unused(*args: Any) -> tuple[Any, ...]:
    return ()


def _checkpoint_region(
    function: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    preserve_rng_state: bool,
    determinism_check: str,
) -> Any:
    replay = _Replay(preserve_rng_state)
    mark = sequence_mark()
    result = function(*args, **kwargs)
    outputs = _flat_tensors(result)
    if not is_grad_enabled() or not any(_internal(t.grad_fn, mark) for t in outputs):
        return result
    edges, dtypes = _region_edges(outputs, mark)

    def rerun() -> Any:
        with enable_grad():
            return function(*args, **kwargs)

    node = _CheckpointNode(
        edges,
        dtypes,
        lambda: replay.run(rerun),
        [tuple(t.shape) for t in outputs],
        determinism_check,
    )
    for nr, out in enumerate(outputs):
        if _internal(out.grad_fn, mark):
            set_history(out, node, nr)
    return result


def _internal(node: Node | None, mark: int) -> bool:
    return node is not None and not isinstance(node, AccumulateGrad) and node.sequence_nr > mark


def _region_edges(outputs: Iterable[Any], mark: int) -> tuple[list[tuple[Node, int]], list[Any]]:
    """The edges leaving the region recorded after ``mark`` (in the order a walk from the
    outputs meets them), and the dtype each one's gradient must have."""
    edges: list[tuple[Node, int]] = []
    dtypes: list[Any] = []
    found: set[tuple[int, int]] = set()
    seen: set[int] = set()
    stack = [t.grad_fn for t in reversed(list(outputs)) if _internal(t.grad_fn, mark)]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        inner = []
        for (target, nr), dtype in zip(node.next_functions, node.input_dtypes, strict=True):
            if target is None:
                continue
            if _internal(target, mark):
                inner.append(target)
            elif (id(target), nr) not in found:
                found.add((id(target), nr))
                edges.append((target, nr))
                dtypes.append(dtype)
        stack.extend(reversed(inner))
    return edges, dtypes
