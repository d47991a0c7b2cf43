"""``torch.distributed.fsdp.wrap``: which submodules become FSDP units of their own.

A policy is called as torch calls it, ``policy(module=m, recurse=True,
nonwrapped_numel=n)`` to ask whether to look inside ``m``, and with ``recurse=False``
whether to wrap ``m`` (``n``: the numel of its parameters not yet in a unit).
``with enable_wrap(wrapper_cls=FSDP, **kwargs):`` makes ``wrap(module)`` wrap by hand, as
torch's; the context is kept per rank (a rank may wait for the others inside it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from kernbench.distributed.scheduler import rank_local
from kernbench.errors import DistributedError

__all__ = [
    "ModuleWrapPolicy",
    "always_wrap_policy",
    "enable_wrap",
    "lambda_auto_wrap_policy",
    "size_based_auto_wrap_policy",
    "transformer_auto_wrap_policy",
    "wrap",
]


def always_wrap_policy(*args: Any, **kwargs: Any) -> bool:
    """Wrap every submodule."""
    return True


def lambda_auto_wrap_policy(
    module: Any, recurse: bool, nonwrapped_numel: int, lambda_fn: Any
) -> bool:
    """Look everywhere; wrap where ``lambda_fn(module)``."""
    if recurse:
        return True
    return bool(lambda_fn(module))


def transformer_auto_wrap_policy(
    module: Any, recurse: bool, nonwrapped_numel: int, transformer_layer_cls: Iterable[type]
) -> bool:
    """Look everywhere; wrap the instances of ``transformer_layer_cls`` (a set of classes)."""
    if recurse:
        return True
    return isinstance(module, tuple(transformer_layer_cls))


def size_based_auto_wrap_policy(
    module: Any,
    recurse: bool,
    nonwrapped_numel: int,
    min_num_params: int = int(1e8),
    force_leaf_modules: set[type] | None = None,
    exclude_wrap_modules: set[type] | None = None,
) -> bool:
    """Wrap a module holding at least ``min_num_params`` parameters not yet wrapped."""
    leaf = tuple(force_leaf_modules or ())
    excluded = tuple(exclude_wrap_modules or ())
    if recurse:
        return not (leaf and isinstance(module, leaf))
    return nonwrapped_numel >= min_num_params and not (excluded and isinstance(module, excluded))


class ModuleWrapPolicy:
    """``ModuleWrapPolicy({Block, ...})``: wrap the instances of these classes."""

    def __init__(self, module_classes: Iterable[type]) -> None:
        classes = tuple(module_classes)
        if not all(isinstance(c, type) for c in classes):
            raise DistributedError(
                f"ModuleWrapPolicy: module_classes must be classes, got {module_classes!r}"
            )
        self._classes = classes

    def __call__(self, module: Any, recurse: bool, nonwrapped_numel: int = 0) -> bool:
        if recurse:
            return True
        return isinstance(module, self._classes)


_OUTSIDE: dict[str, Any] = {}  # enable_wrap's state outside ranks
_KEY = "torch.distributed.fsdp.wrap.enable_wrap"


def _config() -> dict[str, Any]:
    return rank_local(_KEY, dict, _OUTSIDE)


@contextmanager
def enable_wrap(*, wrapper_cls: Any, **wrapper_kwargs: Any) -> Iterator[None]:
    """Inside the block, :func:`wrap` wraps a module in ``wrapper_cls(module,
    **wrapper_kwargs)``; blocks do not nest, as in torch."""
    config = _config()
    if config:
        raise DistributedError(
            "enable_wrap: You are already within an autowrap context and we currently do "
            "not supported nested autowrap."
        )
    if wrapper_cls is None:
        raise DistributedError("enable_wrap: Expected to pass in wrapper_cls arg")
    config.update(wrapper_cls=wrapper_cls, kwargs=dict(wrapper_kwargs))
    try:
        yield
    finally:
        config.clear()


def wrap(module: Any, **wrap_overrides: Any) -> Any:
    """``module`` wrapped as the enclosing :func:`enable_wrap` says (``wrap_overrides``
    over its arguments, a module's ``_wrap_overrides`` over both); ``module`` itself
    outside such a block."""
    config = _config()
    if not config:
        return module
    kwargs = {**config["kwargs"], **wrap_overrides, **getattr(module, "_wrap_overrides", {})}
    return config["wrapper_cls"](module, **kwargs)
