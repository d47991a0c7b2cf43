"""The autograd slots of :class:`~kernbench.torch.Tensor`: ``requires_grad``, ``grad``,
``grad_fn``, ``is_leaf``, ``data``, ``detach`` and ``backward``.

The graph itself is :mod:`kernbench.torch.autograd`'s: an operation recorded there sets
its result's ``grad_fn`` (:func:`set_history`), and ``backward()`` runs the engine that
package registers (:func:`register_engine`), so this module, below it, imports none of it.
``data``/``detach()`` are new tensors over the same memory, outside the graph.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kernbench.errors import TensorError
from kernbench.torch.hooks import RemovableHandle
from kernbench.torch.shapes import flag_argument

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = [
    "TensorGradSlots",
    "bump_version",
    "graph_owner",
    "leaf_grad_hooks",
    "post_accumulate_grad_hooks",
    "register_engine",
    "set_history",
    "storage_version",
]

_ENGINE: list[Callable[..., None]] = []


def post_accumulate_grad_hooks(tensor: Any) -> list[Callable[[Any], None]]:
    """The hooks registered on ``tensor`` with ``register_post_accumulate_grad_hook``."""
    hooks = tensor._post_accumulate_hooks  # noqa: SLF001 - this module's slot
    return list(hooks.values()) if hooks else []


def leaf_grad_hooks(tensor: Any) -> list[Callable[[Any], Any]]:
    """The hooks registered with ``register_hook`` on leaf ``tensor``, in order."""
    hooks = tensor._grad_hooks  # noqa: SLF001 - this module's slot
    return list(hooks.values()) if hooks else []


# torch's version counter, per storage (views share it): bumped by every in-place op, so
# a node can tell that a tensor it saved was changed before its backward ran.
_VERSIONS: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
# The first tensor recorded on a storage (the base its views were made from).
_OWNERS: weakref.WeakKeyDictionary[Any, weakref.ref] = weakref.WeakKeyDictionary()


def storage_version(tensor: Any) -> int:
    """How many in-place ops have written ``tensor``'s storage."""
    return _VERSIONS.get(tensor.storage_device_tensor, 0)


def bump_version(tensor: Any) -> None:
    """Count an in-place write of ``tensor``'s storage."""
    storage = tensor.storage_device_tensor
    _VERSIONS[storage] = _VERSIONS.get(storage, 0) + 1


def graph_owner(tensor: Any) -> Any:
    """The live tensor first recorded in the graph on ``tensor``'s storage, or None."""
    ref = _OWNERS.get(tensor.storage_device_tensor)
    return None if ref is None else ref()


def register_engine(run_backward: Callable[..., None]) -> None:
    """Install what ``Tensor.backward`` runs (:mod:`kernbench.torch.autograd` does, once)."""
    _ENGINE[:] = [run_backward]


def set_history(tensor: Tensor, node: Any, output_nr: int = 0) -> None:
    """Make ``tensor`` output ``output_nr`` of graph node ``node``: it requires grad and
    is no leaf."""
    tensor._grad_fn = node  # noqa: SLF001 - the slot this module keeps for the tensor
    tensor._requires_grad = True  # noqa: SLF001
    tensor._output_nr = output_nr  # noqa: SLF001
    storage = tensor.storage_device_tensor
    owner = _OWNERS.get(storage)
    if owner is None or owner() is None:
        _OWNERS[storage] = weakref.ref(tensor)


class TensorGradSlots:
    """``requires_grad``, ``grad``, ``data`` and ``detach`` of a tensor."""

    __slots__ = ()
    _grad_fn: Any = None  # the autograd node that made this tensor; None for a leaf
    # Hooks run after a backward has accumulated this leaf's gradient (the engine calls them).
    _post_accumulate_hooks: dict[int, Callable[[Any], None]] | None = None
    _output_nr = 0  # which output of its grad_fn this tensor is
    _grad_hooks: dict[int, Callable[[Any], Any]] | None = None  # a leaf's register_hook hooks

    @property
    def requires_grad(self: Tensor) -> bool:
        """True for a leaf that asked for gradients and for results recorded from one."""
        return self._requires_grad

    @property
    def grad_fn(self: Tensor) -> Any:
        """The graph node that made this tensor (``<MulBackward0 ...>``), None for a leaf."""
        return self._grad_fn

    @property
    def is_leaf(self: Tensor) -> bool:
        """True unless the tensor is the recorded result of an operation (has a grad_fn)."""
        return self._grad_fn is None

    def backward(
        self: Tensor,
        gradient: Any = None,
        retain_graph: bool | None = None,
        create_graph: bool = False,
        inputs: Any = None,
    ) -> None:
        """Accumulate the gradient of this tensor into the leaves' ``.grad`` (see
        :func:`kernbench.torch.autograd.backward`)."""
        _ENGINE[0](self, gradient, retain_graph, create_graph, inputs)

    @property
    def _version(self: Tensor) -> int:
        """torch's version counter: in-place writes to this tensor's storage so far."""
        return storage_version(self)

    @property
    def output_nr(self: Tensor) -> int:
        """Which output of its ``grad_fn`` this tensor is (0 for a leaf)."""
        return self._output_nr

    def register_hook(self: Tensor, hook: Callable[[Tensor], Tensor | None]) -> RemovableHandle:
        """``hook(grad)`` each time a gradient with respect to this tensor is computed, as
        torch's: a result that is not None replaces the gradient (for a leaf, before it is
        accumulated into ``.grad``).  Hooks run in registration order; a RemovableHandle."""
        if not self._requires_grad:
            raise TensorError("cannot register a hook on a tensor that doesn't require gradient")
        if not callable(hook):
            raise TensorError(f"register_hook: hook must be callable, got {type(hook).__name__}")
        if self._grad_fn is None:
            if self._grad_hooks is None:
                self._grad_hooks = {}
            return RemovableHandle(self._grad_hooks, hook)
        return RemovableHandle(self._grad_fn.tensor_hooks.setdefault(self._output_nr, {}), hook)

    def retain_grad(self: Tensor) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` after backward (added up over
        backwards, as a leaf's), as torch's; a no-op on a leaf."""
        if not self._requires_grad:
            raise TensorError("can't retain_grad on Tensor that has requires_grad=False")
        if self._grad_fn is not None:
            self._grad_fn.retained[self._output_nr] = weakref.ref(self)

    @property
    def retains_grad(self: Tensor) -> bool:
        """True for a non-leaf tensor whose gradient ``retain_grad()`` keeps."""
        if self._grad_fn is None:
            return False
        kept = self._grad_fn.retained.get(self._output_nr)
        return kept is not None and kept() is self

    def register_post_accumulate_grad_hook(
        self: Tensor, hook: Callable[[Tensor], None]
    ) -> RemovableHandle:
        """``hook(tensor)`` after each backward that accumulated a gradient into this
        leaf's ``.grad`` (in registration order), as torch's; a RemovableHandle."""
        if self._grad_fn is not None:
            raise TensorError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._requires_grad:
            raise TensorError("cannot register a hook on a tensor that doesn't require gradient")
        if not callable(hook):
            raise TensorError(
                f"register_post_accumulate_grad_hook: hook must be callable, got "
                f"{type(hook).__name__}"
            )
        if self._post_accumulate_hooks is None:
            self._post_accumulate_hooks = {}
        return RemovableHandle(self._post_accumulate_hooks, hook)

    @requires_grad.setter
    def requires_grad(self: Tensor, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
        requires_grad = flag_argument(requires_grad, "requires_grad_", "requires_grad")
        if self._grad_fn is not None:
            if requires_grad:
                return self
            raise TensorError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach() (as torch)"
            )
        if requires_grad and not self.dtype.is_floating_point:
            raise TensorError(
                f"requires_grad on {self.storage_device_tensor.name!r}: only tensors of "
                f"floating point dtype can require gradients (as in torch), not {self.dtype!r}"
            )
        self._requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self: Tensor) -> Tensor | None:
        """A slot for a gradient tensor: None until assigned."""
        return self._grad

    @grad.setter
    def grad(self: Tensor, value: Tensor | None) -> None:
        if value is not None and not isinstance(value, TensorGradSlots):
            raise TensorError(f"assigned grad must be a Tensor or None, got {type(value).__name__}")
        if value is not None and value.shape != self.shape:
            raise TensorError(
                f"assigned grad has shape {tuple(value.shape)} but the tensor has "
                f"{tuple(self.shape)}"
            )
        self._grad = value

    @property
    def data(self: Tensor) -> Tensor:
        """The same memory as a new tensor outside the graph (no grad_fn, no requires_grad)."""
        return self._view(self.geometry)

    @data.setter
    def data(self: Tensor, value: Tensor) -> None:
        if not isinstance(value, TensorGradSlots):
            raise TensorError(f"data must be set to a Tensor, got {type(value).__name__}")
        grad, flag = self._grad, self._requires_grad  # p.data = x keeps p's slots
        self._init(value.storage_device_tensor, value.geometry, value.get_device(), value.dp)
        self._grad, self._requires_grad = grad, flag

    def detach(self: Tensor) -> Tensor:
        return self._view(self.geometry)

    def detach_(self: Tensor) -> Tensor:
        """Take the tensor out of the graph: a leaf that does not require grad."""
        self._grad_fn = None
        self._requires_grad = False
        return self
