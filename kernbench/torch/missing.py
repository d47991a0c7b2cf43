"""What to say when a script asks a tensor for something kernbench.torch does not have.

A PyTorch script that calls ``t.pin_memory_()`` or ``t.histogramdd(...)`` gets a
:class:`~kernbench.errors.TensorAttributeError` (also an ``AttributeError``,
so ``hasattr`` and ``getattr(t, name, default)`` keep working) that names the
call and the nearest supported one: a hint written for the PyTorch methods
people reach for, else the closest names the tensor does have.
"""

from __future__ import annotations

import difflib
import importlib.abc
import sys
from collections.abc import Iterable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType

from kernbench.errors import KernBenchError, TensorAttributeError, UnsupportedModuleError

__all__ = [
    "missing_attribute",
    "install_import_hints",
    "importable_namespace",
    "MODULE_HINTS",
    "CUDA_HINTS",
]

_NO_COMPLEX = "there are no complex tensors here; keep the real and imaginary parts apart"

NO_SPARSE = (
    "sparse tensors are held dense here (torch.sparse_coo_tensor and t.to_sparse() make "
    "dense tensors; ADR 0029): use them as dense tensors (t.nonzero() gives the indices); "
    "torch.spmm and torch.sparse.mm multiply them"
)

_NO_KERNEL = (
    "there is no device kernel for it; write one with kernbench.triton, "
    "or compute on the host from t.numpy()"
)
# Names PyTorch has that need a device kernel kernbench.torch lacks (as torch.<name> and
# as tensor methods; the methods' in-place forms too).
KERNEL_NAMES = (
    "histogramdd",
)  # fmt: skip

HINTS = {  # (the named entries after the groups win)
    **dict.fromkeys((*KERNEL_NAMES, *(f"{name}_" for name in KERNEL_NAMES)), _NO_KERNEL),
    **dict.fromkeys(
        (
            "coalesce",
            "is_coalesced",
            "indices",
            "values",
            "_indices",
            "_values",
            "_nnz",
            "sparse_mask",
            "sparse_dim",
            "dense_dim",
            "crow_indices",
            "col_indices",
        ),
        NO_SPARSE,
    ),
    "gelu": "torch.nn.functional.gelu(t)",
    "silu": "torch.nn.functional.silu(t)",
    "is_floating_point": "t.dtype.is_floating_point",
    "isin": "torch.isin(t, test_elements) (a function in torch, not a Tensor method)",
    **dict.fromkeys(
        ("t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "as_strided_"),
        "the view without _ (t = t.t(), t = t.unsqueeze(0)); views change no memory",
    ),
}


# torch.<name> forms of torch.nn.functional ops (the convolutions and pools).
_FUNCTIONAL = (
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "max_pool1d", "max_pool2d", "max_pool3d",
    "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d",
)  # fmt: skip

# torch.<name> that scripts reach for and kernbench.torch does not have.
MODULE_HINTS = {
    **dict.fromkeys(KERNEL_NAMES, _NO_KERNEL),
    "is_floating_point": HINTS["is_floating_point"],
    **dict.fromkeys(
        ("sparse_csr_tensor", "sparse_csc_tensor", "sparse_compressed_tensor"),
        "build it with torch.sparse_coo_tensor(indices, values, size) (held dense here, "
        "ADR 0029), or dense",
    ),
    "hub": "there is no download here: build the model in the script and load a checkpoint "
    "with torch.load",
    "fft": "there are no FFT kernels here; compute it on the host with numpy.fft from t.numpy()",
    **dict.fromkeys(("complex32", "chalf"), _NO_COMPLEX),
    **{name: f"torch.nn.functional.{name} takes the same arguments" for name in _FUNCTIONAL},
}

# torch.cuda.<name> (and torch.ahbm, torch.accelerator).
CUDA_HINTS = {
    "get_device_capability": "there is no compute capability on this machine",
    **dict.fromkeys(
        ("Stream", "stream", "StreamContext", "graph", "CUDAGraph"),
        "streams and graphs are not modelled: work runs in call order on the device's one "
        "stream (current_stream())",
    ),
    "nvtx": "not modelled: the trace (kernbench run --trace) shows every operation",
}


def missing_attribute(name: str, known: Iterable[str]) -> TensorAttributeError:
    """The error for ``tensor.<name>`` that does not exist: the call and what to use instead."""
    message = f"'Tensor' object has no attribute {name!r} in kernbench.torch"
    if name.startswith("__") and name.endswith("__"):
        return TensorAttributeError(message)
    hint = HINTS.get(name)
    if hint is None:
        public = [k for k in known if not k.startswith("_")]
        close = difflib.get_close_matches(name, public, n=3, cutoff=0.75)
        hint = (
            f"nearest supported: {', '.join(close)}"
            if close
            else "the README's 'What kernbench.torch supports' lists what there is"
        )
    return TensorAttributeError(f"{message}: {hint}")


FACADE = "kernbench.torch"

# The classes of the facade's namespace objects that programs import as modules
# (``import torch.backends.cudnn as cudnn``, ``from torch.cuda.amp import autocast``).
_NAMESPACES: set[type] = set()


def importable_namespace(cls: type) -> type:
    """Class decorator: its instances that hang off the facade import as modules."""
    _NAMESPACES.add(cls)
    return cls


class _NamespaceLoader(importlib.abc.Loader):
    """Loads a namespace object as the module of its name (it stays the same object)."""

    def __init__(self, namespace: object) -> None:
        self.namespace = namespace

    def create_module(self, spec: ModuleSpec) -> object:
        return self.namespace

    def exec_module(self, module: object) -> None:
        pass


class _FacadeImportHints(importlib.abc.MetaPathFinder):
    """Consulted last: ``import kernbench.torch.optim`` (or ``from kernbench.torch import
    optim``) of a module the facade does not have raises what ``torch.optim`` would, an
    :class:`~kernbench.errors.UnsupportedModuleError` with the facade's hint, instead of
    Python's bare ``No module named``."""

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        parent_name, _, child = fullname.rpartition(".")
        parent = sys.modules.get(parent_name)
        if parent is None or not (parent_name + ".").startswith(FACADE + "."):
            return None
        try:
            found = getattr(parent, child)
        except KernBenchError as exc:  # the facade's hint, after its "module has no attribute"
            hint = str(exc).partition(": ")[2] or str(exc)
            raise UnsupportedModuleError(
                f"cannot import name {child!r} from {parent_name!r}: {hint}"
            ) from None
        except AttributeError:
            return None
        if isinstance(found, tuple(_NAMESPACES)):  # torch.cuda, torch.backends.cudnn, ..amp
            return ModuleSpec(fullname, _NamespaceLoader(found), is_package=True)
        raise UnsupportedModuleError(
            f"cannot import name {child!r} from {parent_name!r} as a module: it is an "
            f"attribute; import {parent_name} and use its {child}"
        )


def install_import_hints() -> None:
    """Put the facade's import hints at the end of ``sys.meta_path`` (once)."""
    if not any(isinstance(finder, _FacadeImportHints) for finder in sys.meta_path):
        sys.meta_path.append(_FacadeImportHints())
