"""``torch.nn.utils.prune``: torch's hook-based pruning of parameters by masks.

Pruning ``module.<name>`` moves the parameter to ``<name>_orig`` (the same Parameter),
registers the buffer ``<name>_mask`` (ones where an entry is kept, in the parameter's
dtype) and sets the plain attribute ``<name>`` to ``<name>_mask * <name>_orig``, which a
forward pre-hook (the pruning method itself) recomputes before every forward: one
recorded multiply, so gradients reach ``<name>_orig`` masked.  Pruning the same tensor
again combines the methods in a :class:`PruningContainer`, whose new method sees only
the entries (or, structured, the channels) still unpruned; :func:`remove` makes the
pruned tensor the parameter ``<name>`` again.

The masks are made of the tensor ops torch uses (``ones_like``/``zeros_like``, a clone,
index writes, a norm, the product), so they cost those kernels.  Which entries go is
decided on the host, as torch's ``topk``/``kthvalue`` would give them (ADR 0037): the
importance (``|t|``, the channels' norms) is read from the device, the ``k`` smallest
are taken in a stable order (ties go to the lower flat index, NaN counts as the
largest), and the indices are written back; the random methods draw their
probabilities from the rank's generator, so ``torch.manual_seed`` repeats them.  In a
timing-only run, where no values exist, the first ``k`` entries or channels go (the
same kernels, the same cost).
"""

from __future__ import annotations

import numbers
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

import kernbench.torch as torch  # ones_like, zeros_like, cat, as the facade wraps them
from kernbench.errors import TensorIndexError, TensorTypeError, TensorValueError
from kernbench.torch.nn.module import Module, forward_pre_hooks
from kernbench.torch.random import current_generator
from kernbench.torch.tensor import Tensor

__all__ = [
    "BasePruningMethod",
    "CustomFromMask",
    "Identity",
    "L1Unstructured",
    "LnStructured",
    "PruningContainer",
    "RandomStructured",
    "RandomUnstructured",
    "custom_from_mask",
    "global_unstructured",
    "identity",
    "is_pruned",
    "l1_unstructured",
    "ln_structured",
    "random_structured",
    "random_unstructured",
    "remove",
]


# -- the host-side choice ----------------------------------------------------------------


def _timing_only(t: Tensor) -> bool:
    return bool(t.storage_device_tensor.context.timing_only)


def _host(t: Tensor) -> np.ndarray | None:
    """``t``'s values on the host (a read through the fabric), None in a timing-only run."""
    return None if _timing_only(t) else t.numpy(force=True)


def _smallest(values: np.ndarray | None, count: int) -> np.ndarray:
    """The flat indices of ``values``' ``count`` smallest entries, as
    ``topk(largest=False)``: ties to the lower index, NaN the largest; without values
    (timing-only) the first ``count``."""
    if values is None:
        return np.arange(count, dtype=np.int64)
    return np.argsort(values.reshape(-1), kind="stable")[:count].astype(np.int64)


def _largest(values: np.ndarray | None, count: int) -> np.ndarray:
    """The flat indices of ``values``' ``count`` largest entries, as ``topk()``: NaN first,
    then by value, ties to the lower index; without values the first ``count``."""
    if values is None:
        return np.arange(count, dtype=np.int64)
    flat = values.reshape(-1)
    nan = np.isnan(flat)
    order = np.lexsort((np.arange(flat.size), -np.where(nan, 0.0, flat), ~nan))
    return order[:count].astype(np.int64)


def _along(dim: int, index: np.ndarray) -> tuple:
    """The key selecting ``index`` along ``dim`` (every other dim whole)."""
    return (slice(None),) * dim + (index,)


# -- validation, as torch's ----------------------------------------------------------------


def _validate_amount_init(amount: Any) -> None:
    if not isinstance(amount, numbers.Real):
        raise TensorTypeError(f"Invalid type for amount: {amount}. Must be int or float.")
    if (isinstance(amount, numbers.Integral) and amount < 0) or (
        not isinstance(amount, numbers.Integral) and not 0.0 <= float(amount) <= 1.0
    ):
        raise TensorValueError(
            f"amount={amount} should either be a float in the range [0, 1] or a "
            "non-negative integer"
        )


def _validate_amount(amount: Any, tensor_size: int) -> None:
    if isinstance(amount, numbers.Integral) and amount > tensor_size:
        raise TensorValueError(
            f"amount={amount} should be smaller than the number of parameters to "
            f"prune={tensor_size}"
        )


def _count_to_prune(amount: Any, tensor_size: int) -> int:
    """``amount`` itself (an int) or ``round(amount * tensor_size)`` (a fraction; Python's
    rounding, half to even, as torch's)."""
    _validate_amount(amount, tensor_size)
    if isinstance(amount, numbers.Integral):
        return int(amount)
    return round(amount * tensor_size)


def _validate_structured(t: Tensor) -> None:
    if t.dim() <= 1:
        raise TensorValueError(
            "Structured pruning can only be applied to multidimensional tensors. Found "
            f"tensor of shape {t.shape} with {t.dim()} dims"
        )


def _validate_dim(t: Tensor, dim: int) -> int:
    """``dim`` made non-negative; torch's IndexError for one the tensor does not have."""
    if not -t.dim() <= dim < t.dim():
        raise TensorIndexError(f"Invalid index {dim} for tensor of size {t.shape}")
    return dim % t.dim()


def _norm(t: Tensor, n: Any, dim: int) -> Tensor:
    """The ``n``-norm of each slice of ``t`` along ``dim`` (over every other dim), as
    ``torch.norm(t, p=n, dim=others)``: 1, 2 and ``"fro"`` one norm kernel, ``inf`` and
    ``-inf`` the largest or smallest magnitude, 0 the count of nonzeros, any other
    order ``sum(|t| ** n) ** (1 / n)``."""
    others = [d for d in range(t.dim()) if d != dim]
    if n in (1, 2, "fro"):
        return t.norm(n, others)
    if isinstance(n, str) or isinstance(n, bool) or not isinstance(n, numbers.Real):
        raise TensorValueError(
            f"LnStructured: n must be a number or 'fro', got {n!r} ('nuc' is not supported)"
        )
    if n == float("inf"):
        return t.abs().amax(others)
    if n == float("-inf"):
        return t.abs().amin(others)
    if n == 0:
        return (t != 0).to(t.dtype).sum(others)
    return t.abs().pow(float(n)).sum(others).pow(1.0 / float(n))


# -- the methods ---------------------------------------------------------------------------


class BasePruningMethod(ABC):
    """The base of the pruning methods: ``compute_mask`` (abstract), ``apply`` (prune a
    module's tensor), ``apply_mask``, ``prune`` (a tensor, without a module) and
    ``remove``; an instance is the forward pre-hook that recomputes the pruned tensor."""

    PRUNING_TYPE: str
    _tensor_name: str

    def __call__(self, module: Module, inputs: Any) -> None:
        setattr(module, self._tensor_name, self.apply_mask(module))

    @abstractmethod
    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """The mask for the importance scores ``t``, keeping ``default_mask``'s zeros."""

    def apply_mask(self, module: Module) -> Tensor:
        """``<name>_mask * <name>_orig`` (recorded: gradients reach ``<name>_orig``)."""
        if getattr(self, "_tensor_name", None) is None:
            raise AssertionError(f"Module {module} has to be pruned")
        mask = getattr(module, self._tensor_name + "_mask")
        orig = getattr(module, self._tensor_name + "_orig")
        return mask.to(dtype=orig.dtype) * orig

    @classmethod
    def apply(
        cls,
        module: Module,
        name: str,
        *args: Any,
        importance_scores: Tensor | None = None,
        **kwargs: Any,
    ) -> BasePruningMethod:
        """Prune ``module.<name>`` with ``cls(*args, **kwargs)``, combined with the pruning
        already there in a :class:`PruningContainer`; returns the hook registered."""
        hooks = forward_pre_hooks(module)
        found = [
            (key, hook)
            for key, hook in hooks.items()
            if isinstance(hook, BasePruningMethod) and _name_of(hook) == name
        ]
        if len(found) > 1:
            raise AssertionError(
                f"Avoid adding multiple pruning hooks to the same tensor {name} of module "
                f"{module}. Use a PruningContainer."
            )
        new = cls(*args, **kwargs)
        new._tensor_name = name
        orig = getattr(module, name)
        if importance_scores is None:
            importance_scores = orig
        elif tuple(importance_scores.shape) != tuple(orig.shape):
            raise AssertionError(
                f"importance_scores should have the same shape as parameter {name} of {module}"
            )
        old_key, old = found[0] if found else (None, None)
        method: BasePruningMethod = new
        if isinstance(old, PruningContainer):
            old.add_pruning_method(new)
            method = old
        elif old is not None:
            method = PruningContainer(old)
            method.add_pruning_method(new)
        first = old is None
        if first:
            module.register_parameter(name + "_orig", orig)
            delattr(module, name)  # the parameter; the pruned tensor takes its name
            default_mask = torch.ones_like(orig)
        else:
            default_mask = getattr(module, name + "_mask").detach().clone()
        try:
            mask = method.compute_mask(importance_scores.detach(), default_mask=default_mask)
            module.register_buffer(name + "_mask", mask)
            setattr(module, name, method.apply_mask(module))
        except BaseException:
            if first:
                vars(module).pop(name, None)
                module.register_parameter(name, orig)
                delattr(module, name + "_orig")
            elif isinstance(old, PruningContainer):
                old.drop_last()
            raise
        if old_key is not None:
            del hooks[old_key]
        module.register_forward_pre_hook(method)
        return method

    def prune(
        self,
        t: Tensor,
        default_mask: Tensor | None = None,
        importance_scores: Tensor | None = None,
    ) -> Tensor:
        """``t`` times the mask this method computes for it (from ``importance_scores``,
        ``t`` itself by default, on top of ``default_mask``, ones by default)."""
        if importance_scores is None:
            importance_scores = t
        elif tuple(importance_scores.shape) != tuple(t.shape):
            raise AssertionError("importance_scores should have the same shape as tensor t")
        if default_mask is None:
            default_mask = torch.ones_like(t)
        return t * self.compute_mask(importance_scores.detach(), default_mask=default_mask)

    def remove(self, module: Module) -> None:
        """Make the pruning permanent: the Parameter ``<name>`` holds ``mask * orig`` and
        ``<name>_orig`` and ``<name>_mask`` go (the hook is the caller's to drop)."""
        if getattr(self, "_tensor_name", None) is None:
            raise AssertionError(f"Module {module} has to be pruned before pruning can be removed")
        name = self._tensor_name
        weight = self.apply_mask(module)
        if name in vars(module):
            delattr(module, name)
        orig = getattr(module, name + "_orig")
        orig.data = weight.data
        delattr(module, name + "_orig")
        delattr(module, name + "_mask")
        setattr(module, name, orig)


def _name_of(method: BasePruningMethod) -> str | None:
    """The name of the tensor ``method`` prunes (torch's ``_tensor_name``), if set."""
    return getattr(method, "_tensor_name", None)


class PruningContainer(BasePruningMethod):
    """A sequence of pruning methods on one tensor, applied one after the other: each new
    method computes its mask over the entries (unstructured) or channels (structured)
    the ones before left, and its ``PRUNING_TYPE`` says which.  ``PruningContainer(m1,
    m2, ...)`` takes the tensor's name from ``m1`` (torch's does so for one method and
    fails for more)."""

    def __init__(self, *args: Any) -> None:
        self._pruning_methods: tuple[BasePruningMethod, ...] = ()
        if args and _name_of(self) is None:
            self._tensor_name = _name_of(args[0])  # type: ignore[assignment]
        for method in args:
            self.add_pruning_method(method)

    def add_pruning_method(self, method: BasePruningMethod | None) -> None:
        """Append ``method``, which must prune the same tensor."""
        if method is not None and not isinstance(method, BasePruningMethod):
            raise TensorTypeError(f"{type(method)} is not a BasePruningMethod subclass")
        if method is not None and _name_of(self) != _name_of(method):
            raise TensorValueError(
                "Can only add pruning methods acting on the parameter named "
                f"'{_name_of(self)}' to PruningContainer {self}. Found '{_name_of(method)}'"
            )
        self._pruning_methods += (method,)  # type: ignore[operator]

    def drop_last(self) -> None:
        """Forget the method added last (an ``apply`` that failed)."""
        self._pruning_methods = self._pruning_methods[:-1]

    def __len__(self) -> int:
        return len(self._pruning_methods)

    def __iter__(self) -> Iterator[BasePruningMethod]:
        return iter(self._pruning_methods)

    def __getitem__(self, idx: Any) -> Any:
        return self._pruning_methods[idx]

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        """``default_mask`` with the last method's mask written over the part still left:
        the entries where it is 1 (unstructured), the channels along the method's ``dim``
        not all zero (structured), or all of it (global)."""
        method = self._pruning_methods[-1]
        mask = default_mask.to(dtype=t.dtype)
        kind = getattr(method, "PRUNING_TYPE", None)
        if kind == "unstructured":
            left = _host(default_mask)
            index = (
                np.arange(t.numel(), dtype=np.int64)
                if left is None
                else np.flatnonzero(left.reshape(-1) == 1).astype(np.int64)
            )
            flat = mask.view(-1)
            partial = method.compute_mask(t.reshape(-1)[index], default_mask=flat[index])
            if index.size:
                flat[index] = partial.to(dtype=mask.dtype)
            return mask
        if kind == "structured":
            if not hasattr(method, "dim"):
                raise AttributeError(
                    'Pruning methods of PRUNING_TYPE "structured" need to have the attribute '
                    "`dim` defined."
                )
            ndim = t.dim()
            _validate_structured(t)
            dim = method.dim + ndim if method.dim < 0 else method.dim
            if dim < 0:
                raise TensorIndexError(f"Index is out of bounds for tensor with dimensions {ndim}")
            dim = _validate_dim(t, dim)
            sums = _host(default_mask.sum([d for d in range(ndim) if d != dim]))
            index = (
                np.arange(t.shape[dim], dtype=np.int64)
                if sums is None
                else np.flatnonzero(sums != 0).astype(np.int64)
            )
            key = _along(dim, index)
            partial = method.compute_mask(t[key], default_mask=mask[key])
            if index.size:
                mask[key] = partial.to(dtype=mask.dtype)
            return mask
        if kind == "global":
            return method.compute_mask(t, default_mask=mask).to(dtype=mask.dtype)
        raise TensorValueError(f"Unrecognized PRUNING_TYPE {kind}")


class Identity(BasePruningMethod):
    """Prune nothing: the mask is ones (torch's way to reparametrize without pruning)."""

    PRUNING_TYPE = "unstructured"

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        return default_mask

    @classmethod
    def apply(cls, module: Module, name: str) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name)


class _UnstructuredPruning(BasePruningMethod):
    """Prune ``amount`` (a count or a fraction) of the entries left: the ones
    :meth:`_pruned` picks."""

    PRUNING_TYPE = "unstructured"

    def __init__(self, amount: int | float) -> None:
        _validate_amount_init(amount)
        self.amount = amount

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        size = t.numel()
        count = _count_to_prune(self.amount, size)
        _validate_amount(count, size)
        mask = default_mask.clone()
        if count:
            mask.view(-1)[self._pruned(t, count)] = 0
        return mask

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        raise NotImplementedError


class RandomUnstructured(_UnstructuredPruning):
    """Prune ``amount`` (a count or a fraction) of the entries left, at random."""

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        return _largest(current_generator().rng.random(t.numel()), count)

    @classmethod
    def apply(cls, module: Module, name: str, amount: int | float) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name, amount=amount)


class L1Unstructured(_UnstructuredPruning):
    """Prune ``amount`` (a count or a fraction) of the entries left with the smallest
    magnitude."""

    def _pruned(self, t: Tensor, count: int) -> np.ndarray:
        return _smallest(_host(t.abs()), count)

    @classmethod
    def apply(  # type: ignore[override]
        cls,
        module: Module,
        name: str,
        amount: int | float,
        importance_scores: Tensor | None = None,
    ) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, importance_scores=importance_scores)


class _StructuredPruning(BasePruningMethod):
    """Prune ``amount`` (a count or a fraction) of the channels along ``dim``: all but
    the ones :meth:`_kept` keeps, by the scores :meth:`_scores` gives."""

    PRUNING_TYPE = "structured"

    def __init__(self, amount: int | float, dim: int = -1) -> None:
        _validate_amount_init(amount)
        self.amount = amount
        self.dim = dim

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        _validate_structured(t)
        dim = _validate_dim(t, self.dim)
        size = t.shape[dim]
        count = _count_to_prune(self.amount, size)
        _validate_amount(count, size)
        scores = self._scores(t, dim)
        if not count:
            return default_mask
        keep = np.sort(self._kept(scores, size, size - count))
        mask = torch.zeros_like(t)
        if keep.size:
            mask[_along(dim, keep)] = 1
        mask *= default_mask.to(dtype=mask.dtype)
        return mask

    def _scores(self, t: Tensor, dim: int) -> Tensor | None:
        """What the channels are ranked by, computed whether or not any is pruned."""
        return None

    def _kept(self, scores: Tensor | None, size: int, kept: int) -> np.ndarray:
        raise NotImplementedError


class RandomStructured(_StructuredPruning):
    """Prune ``amount`` (a count or a fraction) of the channels along ``dim``, at random."""

    def _kept(self, scores: Tensor | None, size: int, kept: int) -> np.ndarray:
        return _largest(current_generator().rng.random(size), kept)

    @classmethod
    def apply(  # type: ignore[override]
        cls, module: Module, name: str, amount: int | float, dim: int = -1
    ) -> BasePruningMethod:
        return super().apply(module, name, amount=amount, dim=dim)


class LnStructured(_StructuredPruning):
    """Prune ``amount`` (a count or a fraction) of the channels along ``dim`` with the
    smallest ``n``-norm (the others kept as ``topk(norm, kept)``)."""

    def __init__(self, amount: int | float, n: Any, dim: int = -1) -> None:
        super().__init__(amount, dim)
        self.n = n

    def _scores(self, t: Tensor, dim: int) -> Tensor | None:
        return _norm(t, self.n, dim)

    def _kept(self, scores: Tensor | None, size: int, kept: int) -> np.ndarray:
        return _largest(_host(scores), kept)

    @classmethod
    def apply(  # type: ignore[override]
        cls,
        module: Module,
        name: str,
        amount: int | float,
        n: Any,
        dim: int,
        importance_scores: Tensor | None = None,
    ) -> BasePruningMethod:
        return super().apply(
            module, name, amount=amount, n=n, dim=dim, importance_scores=importance_scores
        )


class CustomFromMask(BasePruningMethod):
    """Prune by a given ``mask`` (of the tensor's shape): its zeros go."""

    PRUNING_TYPE = "global"

    def __init__(self, mask: Tensor) -> None:
        self.mask = mask

    def compute_mask(self, t: Tensor, default_mask: Tensor) -> Tensor:
        if tuple(default_mask.shape) != tuple(self.mask.shape):
            raise AssertionError(
                f"mask of shape {tuple(self.mask.shape)} given for a tensor of shape "
                f"{tuple(default_mask.shape)}"
            )
        return default_mask * self.mask.to(dtype=default_mask.dtype)

    @classmethod
    def apply(cls, module: Module, name: str, mask: Tensor) -> BasePruningMethod:  # type: ignore[override]
        return super().apply(module, name, mask=mask)


# -- the functions -------------------------------------------------------------------------


def identity(module: Module, name: str) -> Module:
    """Reparametrize ``module.<name>`` as ``<name>_orig * <name>_mask`` with a mask of
    ones (nothing pruned)."""
    Identity.apply(module, name)
    return module


def random_unstructured(module: Module, name: str, amount: int | float) -> Module:
    """Prune ``amount`` of ``module.<name>``'s entries left, at random."""
    RandomUnstructured.apply(module, name, amount)
    return module


def l1_unstructured(
    module: Module, name: str, amount: int | float, importance_scores: Tensor | None = None
) -> Module:
    """Prune ``amount`` of ``module.<name>``'s entries left with the smallest magnitude
    (of ``importance_scores``, the tensor itself by default)."""
    L1Unstructured.apply(module, name, amount=amount, importance_scores=importance_scores)
    return module


def random_structured(module: Module, name: str, amount: int | float, dim: int) -> Module:
    """Prune ``amount`` of ``module.<name>``'s channels along ``dim``, at random."""
    RandomStructured.apply(module, name, amount, dim)
    return module


def ln_structured(
    module: Module,
    name: str,
    amount: int | float,
    n: Any,
    dim: int,
    importance_scores: Tensor | None = None,
) -> Module:
    """Prune ``amount`` of ``module.<name>``'s channels along ``dim`` with the smallest
    ``n``-norm (of ``importance_scores``, the tensor itself by default)."""
    LnStructured.apply(module, name, amount, n, dim, importance_scores=importance_scores)
    return module


def global_unstructured(
    parameters: Iterable[tuple[Module, str]],
    pruning_method: type,
    importance_scores: dict | None = None,
    **kwargs: Any,
) -> None:
    """Prune the tensors ``(module, name)`` of ``parameters`` as one: ``pruning_method``
    (an unstructured one, made with ``kwargs``) chooses over all their entries left at
    once (scored by ``importance_scores[(module, name)]`` where given), and each tensor
    gets its part of the mask by :func:`custom_from_mask`."""
    if not isinstance(parameters, Iterable):
        raise TensorTypeError("global_unstructured(): parameters is not an Iterable")
    if importance_scores is None:
        importance_scores = {}
    if not isinstance(importance_scores, dict):
        raise TensorTypeError("global_unstructured(): importance_scores must be of type dict")
    pairs = list(parameters)
    scores = torch.cat(
        [
            importance_scores.get((module, name), getattr(module, name)).detach().reshape(-1)
            for module, name in pairs
        ]
    )
    default_mask = torch.cat(
        [
            (
                getattr(module, name + "_mask")
                if hasattr(module, name + "_mask")
                else torch.ones_like(getattr(module, name))
            ).reshape(-1)
            for module, name in pairs
        ]
    )
    container = PruningContainer()
    container._tensor_name = "temp"  # noqa: SLF001 - torch's attribute, defined here
    method = pruning_method(**kwargs)
    method._tensor_name = "temp"  # noqa: SLF001 - the same name as the container's
    if method.PRUNING_TYPE != "unstructured":
        raise TensorTypeError(
            'Only "unstructured" PRUNING_TYPE supported for the `pruning_method`. Found '
            f"method {pruning_method} of type {method.PRUNING_TYPE}"
        )
    container.add_pruning_method(method)
    final_mask = container.compute_mask(scores, default_mask)
    start = 0
    for module, name in pairs:
        param = getattr(module, name)
        size = param.numel()
        custom_from_mask(
            module, name, mask=final_mask[start : start + size].view(tuple(param.shape))
        )
        start += size


def custom_from_mask(module: Module, name: str, mask: Tensor) -> Module:
    """Prune ``module.<name>`` where ``mask`` (of its shape) is zero."""
    CustomFromMask.apply(module, name, mask)
    return module


def remove(module: Module, name: str) -> Module:
    """Make the pruning of ``module.<name>`` permanent: the Parameter ``<name>`` holds the
    pruned values; ``<name>_orig``, ``<name>_mask`` and the hook go."""
    hooks = forward_pre_hooks(module)
    for key, hook in hooks.items():
        if isinstance(hook, BasePruningMethod) and _name_of(hook) == name:
            hook.remove(module)
            del hooks[key]
            return module
    raise TensorValueError(
        f"Parameter '{name}' of module {module} has to be pruned before pruning can be removed"
    )


def is_pruned(module: Module) -> bool:
    """Whether ``module`` or any module inside it has a pruning hook."""
    return any(
        isinstance(hook, BasePruningMethod)
        for submodule in module.modules()
        for hook in forward_pre_hooks(submodule).values()
    )
