"""Scatters that reduce: ``scatter_reduce``/``scatter_reduce_`` (``"sum"``, ``"prod"``,
``"mean"``, ``"amax"``, ``"amin"``, ``include_self``) and the multiply of
``scatter_(..., reduce="multiply")``.

:class:`TensorScatterReduce` is mixed into the tensor class; it runs
:mod:`~kernbench.torch.index_ops`' scatter with a reduction, as torch's
``scatter_reduce_two`` does: with ``include_self=False`` the places the index names
are first set to the reduction's identity (a value scatter: 0, 1, -inf or the dtype's
lowest, +inf or its largest); ``"sum"`` and ``"mean"`` add through ``tl.atomic_add``;
``"mean"`` then counts the writes to each place (a scatter-add of ones into a tensor
of ones, or zeros without ``include_self``, in the tensor's dtype) and divides by the
count (floor division for integers).

``"prod"``, ``"amax"`` and ``"amin"`` use no atomic (Triton has none for a product, and
``tl.atomic_max``/``atomic_min`` take no 8-, 16-bit or half types and let a NaN win by
its sign bit, not as torch's loop does), so
:func:`launch_update` reads, combines and writes back in one kernel: a program takes
up to :data:`BLOCK` lines of the index and walks each along the dim in order, one
place a step for all its lines at once, so no two lanes of a step touch one element
and programs, which run one at a time, never race.  A step costs what an atomic's
update does: the index, the source and the target read, the target written.  The
order is torch's CPU loop (so float products round as its do), and NaN wins as there:
a NaN source replaces the value, and a NaN value stays.  A scatter into few long
lines runs its steps one after another on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import kernbench.kernels.language as tl
from kernbench.errors import TensorError
from kernbench.kernels.builtins import typed_scalar
from kernbench.kernels.jit import jit
from kernbench.runtime.dtypes import DTYPES
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.device_kernels import BLOCK, check_elements
from kernbench.torch.dtypes import BOOL
from kernbench.torch.shapes import flag_argument, tensor_argument

if TYPE_CHECKING:
    from kernbench.torch.dtypes import TorchDType
    from kernbench.torch.tensor import Tensor

__all__ = ["REDUCTIONS", "TensorScatterReduce", "launch_update"]

#: What ``scatter_reduce`` takes, as torch names them.
REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")
_KERNEL_OP = {"sum": "add", "mean": "add"}  # the others are launch_update's ops


@jit(do_not_specialize=["value"])
def _update_kernel(
    src_ptr,
    idx_ptr,
    out_ptr,
    n_lines,
    K,
    C,
    LO,
    value,
    OP: tl.constexpr,
    SRC_TENSOR: tl.constexpr,
    LB: tl.constexpr,
):
    # Lines (r, c) of index (R, K, C), in order along k: out[r, index[r, k, c], c] becomes
    # OP of itself and src[r, k, c] (or value), out viewed as (R, LO, C).
    line = tl.program_id(0) * LB + tl.arange(0, LB)
    mask = line < n_lines
    at = (line // C) * (K * C) + line % C
    target = (line // C) * (LO * C) + line % C
    for k in range(0, K):
        idx = tl.load(idx_ptr + at + k * C, mask=mask, other=0)
        if SRC_TENSOR:
            v = tl.load(src_ptr + at + k * C, mask=mask, other=0)
        else:
            v = value
        place = target + idx * C
        current = tl.load(out_ptr + place, mask=mask, other=0)
        if OP == "prod":
            new = current * v
        elif OP == "amax":  # std::max(current, v), but a NaN source wins
            new = tl.where(v != v, v, tl.where(current < v, v, current))
        else:  # "amin": std::min(current, v), but a NaN source wins
            tl.static_assert(OP == "amin", "OP is prod, amax or amin")
            new = tl.where(v != v, v, tl.where(v < current, v, current))
        tl.store(out_ptr + place, new, mask=mask)


def launch_update(
    src: DeviceTensor | int | float,
    index: DeviceTensor,
    out: DeviceTensor,
    sizes: tuple[int, int, int],
    op: str,
) -> None:
    """``out`` (R, LO, C) at ``index`` (R, K, C) combined with ``src`` (R, K, C, or one
    number) by ``op`` ("prod", "amax" or "amin"), one step of k at a time for every line;
    ``sizes`` = (K, C, LO)."""
    k, c, lo = sizes
    check_elements(out.numel, "scatter")  # the target is indexed with 32-bit offsets too
    n_lines = index.numel // max(1, k)
    lb = tl.next_power_of_2(max(1, min(n_lines, BLOCK)))
    is_tensor = isinstance(src, DeviceTensor)
    if not is_tensor:  # torch converts the number to the tensor's dtype first
        src = out.dtype.from_storage(out.dtype.to_storage(np.asarray(src))).item()
    _update_kernel[(-(-n_lines // lb),)](
        src if is_tensor else index,
        index,
        out,
        n_lines,
        k,
        c,
        lo,
        0 if is_tensor else typed_scalar(src, out.dtype),
        OP=op,
        SRC_TENSOR=is_tensor,
        LB=lb,
    )


def _identity(op: str, dt: TorchDType) -> int | float | bool:
    """What ``include_self=False`` starts each reduced place from, as torch's
    ``scatter_reduce`` initialises them."""
    if op in ("sum", "mean"):
        return 0
    if op == "prod":
        return 1
    if dt.is_floating_point:
        return float("-inf") if op == "amax" else float("inf")
    if dt is BOOL:
        return op == "amin"
    info = np.iinfo(DTYPES[dt.name].storage)
    return int(info.min) if op == "amax" else int(info.max)


class TensorScatterReduce:
    """``scatter_reduce`` and ``scatter_reduce_``: a scatter that reduces."""

    __slots__ = ()

    def scatter_reduce_(
        self: Tensor, dim: Any, index: Any, src: Any, reduce: Any, *, include_self: Any = True
    ) -> Tensor:
        """Reduce ``src`` into ``self`` at ``index`` along ``dim`` by ``reduce`` ("sum",
        "prod", "mean", "amax", "amin"), ``self``'s values included unless
        ``include_self`` is False (then the places written start from the identity)."""
        what = f"scatter_reduce_ of {self.storage_device_tensor.name!r}"
        include_self = flag_argument(include_self, "scatter_reduce", "include_self")
        if reduce not in REDUCTIONS:
            raise TensorError(
                f"{what}: reduce argument must be either sum, prod, mean, amax or amin, got "
                f"{reduce!r}"
            )
        src = tensor_argument(src, f"{what}: src")
        if not include_self:
            self._scatter(what, dim, index, None, _identity(reduce, self.dtype), reduce=None)
        self._scatter(what, dim, index, src, None, reduce=_KERNEL_OP.get(reduce, reduce))
        if reduce == "mean":
            count = (self.new_ones if include_self else self.new_zeros)(tuple(self.shape))
            ones = src.new_ones(tuple(src.shape))
            count.scatter_add_(dim, index, ones)
            unwritten = count == 0
            count.masked_fill_(unwritten, 1)
            if self.dtype.is_floating_point:
                self.div_(count)
            else:
                self.floor_divide_(count)
            for temporary in (count, ones, unwritten):
                temporary.free()
        return self

    def scatter_reduce(
        self: Tensor, dim: Any, index: Any, src: Any, reduce: Any, *, include_self: Any = True
    ) -> Tensor:
        """:meth:`scatter_reduce_` into a copy of ``self``."""
        return self.clone().scatter_reduce_(dim, index, src, reduce, include_self=include_self)
