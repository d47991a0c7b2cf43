"""Random tensors: ``rand``, ``randn``, ``randint``, the ``*_like`` forms and dropout's mask.

Values are drawn on the host from the rank's generator
(:mod:`kernbench.torch.random`) and copied in through the fabric, which costs
time.  In timing-only mode no values are drawn at all: the copy still runs
and costs the same time.
"""

from __future__ import annotations

import functools
import math
import numbers
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import OutOfMemoryError, TensorError
from kernbench.torch import random as torch_random
from kernbench.torch.devices import device_index
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS, TorchDType, as_torch_dtype
from kernbench.torch.factories import like_arguments
from kernbench.torch.memory_formats import check_memory_format
from kernbench.torch.shapes import shape_argument
from kernbench.torch.tensor import Tensor, new_tensor

__all__ = [
    "keep_mask",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "randperm",
]


def _floating(dtype: Any, what: str) -> TorchDType:
    dt = as_torch_dtype(dtype)
    if not dt.is_floating_point:
        raise TensorError(f"{what}: needs a floating dtype, got {dt!r}")
    return dt


def _drawn(
    shape: tuple[int, ...],
    dt: TorchDType,
    device: Any,
    dp: Any,
    draw: Callable[[tuple[int, ...]], np.ndarray],
    what: str,
) -> Tensor:
    """A tensor of ``draw(shape)`` values, drawn on the host and copied in.

    The tensor is made first, so a size that does not fit is refused before any
    value is drawn.
    """
    out = new_tensor(shape, dt, index=device_index(device), dp=dp)
    target = out.device_tensor
    if target.context.timing_only:
        target.copy_(np.broadcast_to(np.zeros((), np.float32), shape))
        return out
    try:
        values = draw(shape)
    except MemoryError:
        raise OutOfMemoryError(
            f"{what}: drawing {math.prod(shape)} values for tensor {target.name!r} ran out of "
            "host memory; run with --timing-only (sizes, not bytes) or use a smaller tensor"
        ) from None
    target.copy_(values)
    return out


def rand(
    *sizes: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """Uniform in [0, 1), drawn on the host from the rank's generator and copied in."""
    dt = _floating(dtype, "rand")
    draw = functools.partial(torch_random.resolve(generator).random, dtype=np.float32)
    out = _drawn(shape_argument(sizes, "rand", size), dt, device, dp, draw, "rand")
    return out.requires_grad_(requires_grad)


def randn(
    *sizes: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """Standard normal, drawn on the host from the rank's generator and copied in."""
    dt = _floating(dtype, "randn")
    draw = functools.partial(torch_random.resolve(generator).standard_normal, dtype=np.float32)
    out = _drawn(shape_argument(sizes, "randn", size), dt, device, dp, draw, "randn")
    return out.requires_grad_(requires_grad)


def _bound(value: Any, name: str) -> int:
    """A bound of ``randint``: a finite number, as an int (floats truncate, as torch)."""
    if not isinstance(value, bool | np.bool_ | np.ndarray):
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
            if math.isfinite(value):
                return int(value)
        else:
            try:
                return operator.index(value)
            except TypeError:
                pass
    raise TensorError(f"randint: {name} must be a finite int, got {value!r}")


def randint(
    *args: Any,
    size: Any = None,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """``randint(high, size)`` or ``randint(low, high, size)``: integers in [low, high)."""
    if size is None:
        if len(args) < 2:
            raise TensorError("randint needs high and size: randint(high, size)")
        *args, size = args
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TensorError(
            f"randint takes (high, size) or (low, high, size); got {len(args)} bounds"
        )
    low, high = (_bound(v, name) for v, name in ((low, "low"), (high, "high")))
    if not low < high:
        raise TensorError(f"randint: low ({low}) must be below high ({high})")
    shape = shape_argument((size,), "randint")
    dt = as_torch_dtype(dtype, DTYPE_OBJECTS["int64"])
    if not dt.is_floating_point and dt is not BOOL:
        info = np.iinfo(np.dtype(dt.name))
        if low < info.min or high - 1 > info.max:
            raise TensorError(
                f"randint: [{low}, {high}) does not fit {dt!r} ({info.min}..{info.max}); "
                "pass a dtype that holds it, such as dtype=torch.float32"
            )
    draw = functools.partial(torch_random.resolve(generator).integers, low, high, dtype=np.int64)
    return _drawn(shape, dt, device, dp, draw, "randint").requires_grad_(requires_grad)


def randperm(
    n: int,
    *,
    generator: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    dp: Any = None,
) -> Tensor:
    """A random permutation of ``0..n-1`` (``int64``), drawn on the host from the rank's
    generator (or ``generator``) and copied in, as the other random factories."""
    try:
        count = operator.index(n) if not isinstance(n, bool) else None
    except TypeError:
        count = None
    if count is None or count < 0:
        raise TensorError(f"randperm: n must be a non-negative int, got {n!r}")
    dt = as_torch_dtype(dtype, DTYPE_OBJECTS["int64"])
    if dt is BOOL or (not dt.is_floating_point and count - 1 > np.iinfo(np.dtype(dt.name)).max):
        raise TensorError(f"randperm: n={count} does not fit {dt!r}; pass dtype=torch.int64")
    draw = functools.partial(_permutation, torch_random.resolve(generator))
    out = _drawn((count,), dt, device, dp, draw, "randperm")
    return out.requires_grad_(requires_grad)


def _permutation(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.permutation(shape[0]).astype(np.int64)


def rand_like(
    input: Tensor,  # noqa: A002
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.rand_like")
    dt, index = like_arguments(input, dtype, device)
    return rand(input.shape, dtype=dt, device=index, requires_grad=requires_grad, dp=input.dp)


def randn_like(
    input: Tensor,  # noqa: A002
    *,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    check_memory_format(memory_format, "torch.randn_like")
    dt, index = like_arguments(input, dtype, device)
    return randn(input.shape, dtype=dt, device=index, requires_grad=requires_grad, dp=input.dp)


def randint_like(
    input: Tensor,  # noqa: A002
    *bounds: Any,
    low: Any = None,
    high: Any = None,
    dtype: Any = None,
    device: Any = None,
    requires_grad: bool = False,
    memory_format: Any = None,
) -> Tensor:
    """``randint_like(input, high)`` or ``randint_like(input, low, high)``: :func:`randint`
    of ``input``'s shape, with its dtype (a float input gives whole floats, as torch) and
    device unless ``dtype``/``device`` say otherwise."""
    check_memory_format(memory_format, "torch.randint_like")
    given = [*((low,) if low is not None else ()), *bounds, *((high,) if high is not None else ())]
    if len(given) not in (1, 2) or (low is not None and high is None):
        raise TensorError(
            "randint_like takes (input, high) or (input, low, high); got "
            f"{len(given)} bounds (low={low!r}, high={high!r})"
        )
    dt, index = like_arguments(input, dtype, device)
    return randint(
        *given, input.shape, dtype=dt, device=index, requires_grad=requires_grad, dp=input.dp
    )


def keep_mask(like: Tensor, keep: float, what: str, shape: tuple[int, ...] | None = None) -> Tensor:
    """A bool tensor of ``like``'s shape, device and placement, each element True with
    probability ``keep`` (a uniform float32 draw below it), drawn on the host from the
    rank's generator and copied in (one byte an element).  With ``shape`` it has that
    shape instead (one draw per channel, for the feature dropouts), placed by default."""
    rng = torch_random.resolve(None)

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        return rng.random(shape, dtype=np.float32) < np.float32(keep)

    if shape is not None:
        return _drawn(tuple(shape), BOOL, like.get_device(), None, draw, what)
    return _drawn(tuple(like.shape), BOOL, like.get_device(), like.dp, draw, what)
