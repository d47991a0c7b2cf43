"""``torch.distributed.fsdp.wrap``: which submodules become FSDP units of their own.

A policy is called as torch calls it, ``policy(module=m, recurse=True,
nonwrapped_numel=n)`` to ask whether to look inside ``m``, and with ``recurse=False``
whether to wrap ``m`` (``n``: the numel of its parameters not yet in a unit).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kernbench.errors import DistributedError

__all__ = [
    "ModuleWrapPolicy",
    "always_wrap_policy",
    "lambda_auto_wrap_policy",
    "size_based_auto_wrap_policy",
    "transformer_auto_wrap_policy",
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
