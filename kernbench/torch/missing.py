"""What to say when a script asks a tensor for something kernbench.torch does not have.

A PyTorch script that calls ``t.backward()`` or ``t.scatter_(...)`` gets a
:class:`~kernbench.errors.TensorAttributeError` (also an ``AttributeError``,
so ``hasattr`` and ``getattr(t, name, default)`` keep working) that names the
call and the nearest supported one: a hint written for the PyTorch methods
people reach for, else the closest names the tensor does have.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from kernbench.errors import TensorAttributeError

__all__ = ["missing_attribute"]

_NO_AUTOGRAD = "there is no autograd in kernbench.torch (grad is a plain slot you assign)"
_INDEX_WRITE = "write through indexing instead: t[i] = v, t[a:b] = other, t[[i, j]] = v"
_INDEX_READ = "read through indexing instead: t[i], t[a:b], t[[i, j]] (a list of indices)"
_NO_64_BIT = "tensors hold at most 32-bit values; use .int() or .float()"

HINTS = {
    "backward": _NO_AUTOGRAD,
    "retain_grad": _NO_AUTOGRAD,
    "register_hook": _NO_AUTOGRAD,
    "grad_fn": _NO_AUTOGRAD,
    "scatter": _INDEX_WRITE,
    "scatter_": _INDEX_WRITE,
    "scatter_add_": _INDEX_WRITE,
    "index_add_": _INDEX_WRITE,
    "index_copy_": _INDEX_WRITE,
    "index_put_": _INDEX_WRITE,
    "masked_fill_": _INDEX_WRITE,
    "masked_fill": _INDEX_WRITE,
    "gather": _INDEX_READ,
    "index_select": _INDEX_READ,
    "masked_select": _INDEX_READ,
    "take": _INDEX_READ,
    "long": _NO_64_BIT,
    "double": _NO_64_BIT,
    "bool": "there is no bool dtype; compare on the host with t.numpy()",
    "pin_memory": "there is no host tensor; numpy() reads values back",
    "share_memory_": "there is no host tensor; numpy() reads values back",
}


def missing_attribute(name: str, known: Iterable[str]) -> TensorAttributeError:
    """The error for ``tensor.<name>`` that does not exist: the call and what to use instead."""
    message = f"'Tensor' object has no attribute {name!r} in kernbench.torch"
    if name.startswith("__") and name.endswith("__"):
        return TensorAttributeError(message)
    hint = HINTS.get(name)
    if hint is None:
        public = [k for k in known if not k.startswith("_")]
        close = difflib.get_close_matches(name, public, n=3, cutoff=0.6)
        hint = f"nearest supported: {', '.join(close)}" if close else "see README"
    return TensorAttributeError(f"{message}: {hint}")
