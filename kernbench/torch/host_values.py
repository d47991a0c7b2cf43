"""Reading a tensor's values on the host: ``numpy``, ``item``, ``tolist``, ``repr``, ``bool``.

:class:`TensorHostValues` is mixed into :class:`~kernbench.torch.Tensor`.
A read a program makes (``numpy``, ``item``, ``tolist``, ``bool``) goes to
the host through the fabric, which costs the simulated time of the transfer;
what the host then does with the values (comparing) costs nothing.  Printing
(``repr``/``str``) only looks: :meth:`peek` reads memory as it is without
the machine, so no time passes and a rank's ``print`` line is never split
by another rank's.  A view that is not one run of memory is first
copied into a contiguous temporary on the device (costed) and read from
there.  In timing-only mode there are no values to read: these raise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import TensorError, TensorRuntimeError
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, get_default_dtype
from kernbench.torch.printing import format_values

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorHostValues", "checked_read"]


def checked_read(t: Tensor) -> np.ndarray | None:
    """The values of a small dense result a check needs on the host (a bounds check, a
    test for zero divisors), read through the fabric; in timing-only mode None, after a
    read that costs the same time, so both modes take one time."""
    dense = t.dense()
    try:
        return dense.storage_device_tensor.context.read_back(dense.device_tensor)
    finally:
        if dense is not t:
            dense.free()


DTYPE_INT64 = DTYPE_OBJECTS["int64"]


class TensorHostValues:
    """The host-side reads of a tensor."""

    __slots__ = ()

    def numpy(self: Tensor, *, force: bool = False) -> np.ndarray:
        """The values, read to the host through the fabric (a copy; costs time).

        As in torch, a tensor that requires grad is refused unless ``force=True``
        (torch's ``t.detach().numpy()``); ``item()``, ``tolist()`` and the host-side
        checks read any tensor.
        """
        if self.requires_grad and not force:
            raise TensorRuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
                f"instead (tensor {self.storage_device_tensor.name!r}; or numpy(force=True))"
            )
        found = self.contiguous_device_tensor()
        if found is not None:
            return found.numpy()
        if self.storage_device_tensor.context.timing_only:
            return self.storage_device_tensor.numpy()  # raises: no values in timing-only mode
        temp = self.dense()
        try:
            return temp.device_tensor.numpy()
        finally:
            temp.free()

    def peek(self: Tensor) -> np.ndarray:
        """The values as memory holds them now, read without the machine (host-side:
        no simulated time, the rank does not yield); what ``print`` shows."""
        base = self.storage_device_tensor
        flat = base.context.peek(base).reshape(-1)
        itemsize = flat.itemsize
        view = np.lib.stride_tricks.as_strided(
            flat[self.storage_offset() :],
            shape=tuple(self.shape),
            strides=tuple(st * itemsize for st in self.stride()),
            writeable=False,
        )
        return view.copy()

    def __array__(self: Tensor, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = self.numpy()
        return values if dtype is None else values.astype(dtype)

    def tolist(self: Tensor) -> Any:
        return self.numpy(force=True).tolist()

    def item(self: Tensor) -> int | float:
        if self.numel() != 1:
            raise TensorError(
                f"item() needs a one-element tensor; {self.storage_device_tensor.name!r} has "
                f"{self.numel()} elements"
            )
        return self.numpy(force=True).reshape(()).item()

    def __format__(self: Tensor, format_spec: str) -> str:
        """As torch: a 0-d tensor formats its value (``f"{loss:.4f}"``); others only as str."""
        if self.ndim == 0:
            return format(self.item(), format_spec)
        if format_spec:
            raise TensorError(
                f"format spec {format_spec!r} on tensor {self.storage_device_tensor.name!r} "
                f"of shape {tuple(self.shape)}: only a 0-d tensor takes one (as in torch); "
                "format t.item() or t.tolist()"
            )
        return str(self)

    def __float__(self: Tensor) -> float:
        return float(self.item())

    def __int__(self: Tensor) -> int:
        return int(self.item())

    def __index__(self: Tensor) -> int:
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TensorError(
                "only integer tensors of a single element can be converted to an index"
            )
        return int(self.item())

    def __bool__(self: Tensor) -> bool:
        if self.numel() != 1:
            count = "no values" if self.numel() == 0 else "more than one value"
            raise TensorError(
                f"Boolean value of Tensor with {count} is ambiguous (as in torch; "
                f"{self.storage_device_tensor.name!r} has {self.numel()}); use t.any() or "
                "t.all() (a mask), or torch.equal(a, b)"
            )
        return bool(self.item())

    def __repr__(self: Tensor) -> str:
        extras = [f"device='{self.device}'"]
        empty = self.numel() == 0
        if self.storage_device_tensor.is_freed:
            body = f"<freed>, size={tuple(self.shape)}"
        elif self.storage_device_tensor.context.timing_only:
            body = f"<no values in timing-only mode>, size={tuple(self.shape)}"
        else:
            body = format_values(self.peek(), prefix="tensor(")
            if empty and self.ndim != 1:
                extras.append(f"size={tuple(self.shape)}")  # as torch: "[]" does not say it
        # torch leaves out the dtype values infer, but not for an empty tensor, whose
        # missing values infer nothing
        inferred = (get_default_dtype(),) if empty else (get_default_dtype(), DTYPE_INT64, BOOL)
        if self.dtype not in inferred:
            extras.append(f"dtype={self.dtype!r}")
        if self.grad_fn is not None:  # as torch's: a recorded result names its node
            extras.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self.requires_grad:
            extras.append("requires_grad=True")
        return f"tensor({body}, {', '.join(extras)})"
