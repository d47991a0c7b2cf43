"""More factories and joins: ``eye``, ``linspace``, ``logspace``, ``tril_indices``/
``triu_indices``, ``hstack``/``vstack``/``dstack``, ``concat``/``concatenate``,
``meshgrid`` and ``cartesian_prod``; and the ``torch.<name>`` forms of ``flip``,
``roll``, ``diag``, ``diagonal``, ``diff``, ``nan_to_num``, ``count_nonzero``,
``unique``, ``bincount`` and ``multinomial``.

``eye`` writes zeros and fills its diagonal view (a strided fill);
``linspace``/``logspace`` are one device kernel; the index factories are
computed on the host and copied in (torch computes them on the device: the
copy costs about what its kernel would); the stacks are ``cat`` of views;
``meshgrid`` gives broadcast views (no copy, as torch); the ``torch.*`` forms
call the tensor methods (:mod:`~kernbench.torch.rearrange`,
:mod:`~kernbench.torch.host_ops`).
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import TensorError, user_stacklevel
from kernbench.torch.devices import device_index
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, as_torch_dtype, get_default_dtype
from kernbench.torch.factories import _tensor_list, cat, stack, zeros
from kernbench.torch.functions import with_out
from kernbench.torch.more_kernels import launch_linspace
from kernbench.torch.shapes import flag_argument, int_argument, tensor_argument
from kernbench.torch.tensor import Tensor, new_tensor

__all__ = [
    "bincount",
    "cartesian_prod",
    "concat",
    "concatenate",
    "count_nonzero",
    "diag",
    "diagonal",
    "diff",
    "dstack",
    "eye",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "linspace",
    "logspace",
    "meshgrid",
    "multinomial",
    "nan_to_num",
    "roll",
    "tril_indices",
    "triu_indices",
    "unique",
    "vstack",
]


def _tensor(value: Any, what: str) -> Tensor:
    return tensor_argument(value, f"torch.{what}")


def _grad(t: Tensor, requires_grad: Any, what: str) -> Tensor:
    return t.requires_grad_() if flag_argument(requires_grad, what, "requires_grad") else t


def eye(
    n: int,
    m: int | None = None,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """An ``n`` x ``m`` (``n``) matrix of zeros with ones on its diagonal: zeros written by
    the runtime, the diagonal by the strided fill kernel."""
    rows = int_argument(n, "eye", "n")
    cols = rows if m is None else int_argument(m, "eye", "m")
    if rows < 0 or cols < 0:
        raise TensorError(f"eye: n and m must be greater or equal to 0, got {rows} and {cols}")
    out = zeros(rows, cols, dtype=dtype, device=device, dp=dp)
    if rows and cols:
        out.diagonal().fill_(1)
    return _grad(out, requires_grad, "eye")


def _endpoint(value: Any, what: str, name: str) -> float:
    if hasattr(value, "storage_device_tensor"):
        if value.ndim:
            raise TensorError(f"{what}: {name} must be a number or a 0-d tensor")
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{what}: {name} must be a number, got {value!r}")
    return float(value)


def _spaced(
    what: str, start: Any, end: Any, steps: Any, base: float | None, dtype: Any, device: Any
) -> Tensor:
    lo, hi = _endpoint(start, what, "start"), _endpoint(end, what, "end")
    count = int_argument(steps, what, "steps")
    if count < 0:
        raise TensorError(f"{what}: number of steps must be non-negative, got {count}")
    dt = as_torch_dtype(dtype, get_default_dtype())
    if dt is BOOL:
        raise TensorError(f"{what}: not implemented for 'Bool' (as torch)")
    out = new_tensor((count,), dt, index=device_index(device))
    if count:
        launch_linspace(out.device_tensor, count, lo, hi, log_base=base)
    return out


@with_out
def linspace(
    start: Any,
    end: Any,
    steps: int,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``steps`` evenly spaced points from ``start`` to ``end`` (both included), the first
    half from ``start``, the second from ``end``, as torch's; one kernel.  Integer
    dtypes truncate the float64 points."""
    out = _spaced("linspace", start, end, steps, None, dtype, device)
    return _grad(out, requires_grad, "linspace")


@with_out
def logspace(
    start: Any,
    end: Any,
    steps: int,
    base: float = 10.0,
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
) -> Tensor:
    """``base ** linspace(start, end, steps)``; one kernel."""
    b = _endpoint(base, "logspace", "base")
    if b <= 0:
        raise TensorError(f"logspace: base must be positive here, got {base}")
    return _grad(
        _spaced("logspace", start, end, steps, b, dtype, device), requires_grad, "logspace"
    )


def _triangle_indices(
    what: str, row: Any, col: Any, offset: Any, dtype: Any, device: Any, upper: bool
) -> Tensor:
    rows, cols = int_argument(row, what, "row"), int_argument(col, what, "col")
    k = int_argument(offset, what, "offset")
    if rows < 0 or cols < 0:
        raise TensorError(f"{what}: row and col must be non-negative, got {rows} and {cols}")
    if rows * cols > 2**31 - 1:
        raise TensorError(
            f"{what}: a {rows} x {cols} matrix has more than 2**31 - 1 elements; its indices "
            "would not fit a device tensor"
        )
    k = max(-rows, min(cols, k))  # an offset past the matrix selects all or none of it
    dt = as_torch_dtype(dtype, DTYPE_OBJECTS["int64"])
    if dt not in (DTYPE_OBJECTS["int64"], DTYPE_OBJECTS["int32"]):
        raise TensorError(f"{what}: dtype must be torch.int64 or torch.int32, got {dt!r}")
    found = (np.triu_indices if upper else np.tril_indices)(rows, k, cols)
    values = np.stack(found).astype(np.dtype(dt.name)).reshape(2, -1)
    out = new_tensor(values.shape, dt, index=device_index(device))
    if values.size:
        out.copy_(values)
    return out


def tril_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The (2, N) row and column indices of the lower triangle of a ``row`` x ``col``
    matrix (with ``offset``), ``int64``; computed on the host, copied in."""
    return _triangle_indices("tril_indices", row, col, offset, dtype, device, upper=False)


def triu_indices(
    row: int, col: int, offset: int = 0, *, dtype: Any = None, device: Any = None
) -> Tensor:
    """The (2, N) indices of the upper triangle, as :func:`tril_indices`."""
    return _triangle_indices("triu_indices", row, col, offset, dtype, device, upper=True)


def _at_least(t: Tensor, dims: int) -> Tensor:
    if t.ndim >= dims:
        return t
    if dims == 2:
        return t.reshape(1, -1) if t.ndim else t.reshape(1, 1)
    if t.ndim == 0:
        return t.reshape(1, 1, 1)
    if t.ndim == 1:
        return t.reshape(1, -1, 1)
    return t.unsqueeze(-1)


@with_out
def hstack(tensors: Sequence[Tensor]) -> Tensor:
    """``cat`` along dim 1, or dim 0 of 1-D tensors (0-d ones as 1-D)."""
    items = [t.reshape(1) if not t.ndim else t for t in _tensor_list(tensors, "torch.hstack")]
    return cat(items, 0 if items[0].ndim == 1 else 1)


@with_out
def vstack(tensors: Sequence[Tensor]) -> Tensor:
    """``cat`` along dim 0 of the tensors made at least 2-D (a vector is one row)."""
    return cat([_at_least(t, 2) for t in _tensor_list(tensors, "torch.vstack")], 0)


@with_out
def dstack(tensors: Sequence[Tensor]) -> Tensor:
    """``cat`` along dim 2 of the tensors made at least 3-D."""
    return cat([_at_least(t, 3) for t in _tensor_list(tensors, "torch.dstack")], 2)


concat = concatenate = cat


def meshgrid(*tensors: Any, indexing: str | None = None) -> tuple[Tensor, ...]:
    """Coordinate grids of 0-d or 1-D tensors as broadcast views (no copy, as torch);
    ``indexing`` ``'ij'`` (the default, with torch's warning when not given) or
    ``'xy'``."""
    items = (
        list(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], Sequence)
        else list(tensors)
    )
    items = _tensor_list(items, "torch.meshgrid")
    if indexing is None:
        warnings.warn(
            "torch.meshgrid: in an upcoming release, it will be required to pass the indexing "
            "argument.",
            UserWarning,
            stacklevel=user_stacklevel(),
        )
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise TensorError(
            f'torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}'
        )
    for t in items:
        if t.ndim > 1:
            raise TensorError(
                f"torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got a tensor of "
                f"shape {tuple(t.shape)}"
            )
    vectors = [t.reshape(-1) for t in items]
    swap = indexing == "xy" and len(vectors) >= 2
    if swap:
        vectors[0], vectors[1] = vectors[1], vectors[0]
    shape = tuple(v.shape[0] for v in vectors)
    grids = []
    for k, v in enumerate(vectors):
        view = v.reshape(*([1] * k), shape[k], *([1] * (len(shape) - k - 1)))
        grids.append(view.expand(shape))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


def cartesian_prod(*tensors: Tensor) -> Tensor:
    """Every combination of the 1-D tensors' elements, (N, k): the ``meshgrid`` views
    stacked (one copy each); one tensor is returned as it is, as torch."""
    items = _tensor_list(list(tensors), "torch.cartesian_prod")
    for t in items:
        if t.ndim != 1:
            raise TensorError(
                f"torch.cartesian_prod: Expect a 1D vector, but got shape {tuple(t.shape)}"
            )
    if len(items) == 1:
        return items[0]
    grids = meshgrid(*items, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


def flip(input: Tensor, dims: Any) -> Tensor:  # noqa: A002
    return _tensor(input, "flip").flip(dims)


def fliplr(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "fliplr").fliplr()


def flipud(input: Tensor) -> Tensor:  # noqa: A002
    return _tensor(input, "flipud").flipud()


def roll(input: Tensor, shifts: Any, dims: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "roll").roll(shifts, dims)


@with_out
def diag(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002
    return _tensor(input, "diag").diag(diagonal)


def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:  # noqa: A002
    return _tensor(input, "diagonal").diagonal(offset, dim1, dim2)


@with_out
def diff(
    input: Tensor,  # noqa: A002
    n: int = 1,
    dim: int = -1,
    prepend: Any = None,
    append: Any = None,
) -> Tensor:
    return _tensor(input, "diff").diff(n, dim, prepend, append)


@with_out
def nan_to_num(
    input: Tensor,  # noqa: A002
    nan: float = 0.0,
    posinf: float | None = None,
    neginf: float | None = None,
) -> Tensor:
    return _tensor(input, "nan_to_num").nan_to_num(nan, posinf, neginf)


def count_nonzero(input: Tensor, dim: Any = None) -> Tensor:  # noqa: A002
    return _tensor(input, "count_nonzero").count_nonzero(dim)


def unique(
    input: Tensor,  # noqa: A002
    sorted: bool = True,  # noqa: A002
    return_inverse: bool = False,
    return_counts: bool = False,
    dim: int | None = None,
) -> Any:
    return _tensor(input, "unique").unique(sorted, return_inverse, return_counts, dim)


def bincount(input: Tensor, weights: Any = None, minlength: int = 0) -> Tensor:  # noqa: A002
    return _tensor(input, "bincount").bincount(weights, minlength)


@with_out
def multinomial(
    input: Tensor,  # noqa: A002
    num_samples: int,
    replacement: bool = False,
    *,
    generator: Any = None,
) -> Tensor:
    return _tensor(input, "multinomial").multinomial(num_samples, replacement, generator=generator)
