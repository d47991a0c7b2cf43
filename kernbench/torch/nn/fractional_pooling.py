"""``torch.nn.functional``'s fractional max pools: ``fractional_max_pool2d``/``3d`` and their
``*_with_indices`` forms, one kernel each call
(:func:`~kernbench.torch.nn.pool_kernels.launch_fractional_pool`).

As torch's: the windows are ``kernel_size`` wide and start, along each dim, at torch's
pseudo-random sequence for the plane's sample ``u`` (``alpha = (in - k) / (out - 1)``,
``start[i] = int((i + u) * alpha) - int(u * alpha)`` and the last window at ``in - k``),
so consecutive windows step by ``floor(alpha)`` or ``ceil(alpha)``.  ``output_size``, or
``output_ratio`` of the input's size, sets the output; the samples are
``_random_samples`` (``(N, C, dims)``, the input's dtype; for a 2-D pool a plane's first
sample is the width's and its second the height's, for a 3-D pool they are depth, height,
width) or, without it, ``torch.rand`` drawn from the rank's generator, so ``manual_seed``
repeats them (they are not torch's values).  The input may be batched or not;
``return_indices=True`` gives ``(values, indices)`` with int64 indices into each
flattened input plane, as ``max_pool`` gives them, and the gradient goes to those
positions.  torch's checks: ``kernel_size + output_size - 1 <= in`` for the 2-D pool and
``< in`` for the 3-D one (torch's 3-D check is strict).  Floating dtypes only.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.nn.pool_kernels import launch_fractional_pool
from kernbench.torch.sampling import rand
from kernbench.torch.shapes import flag_argument, int_sequence, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "fractional_max_pool2d",
    "fractional_max_pool2d_with_indices",
    "fractional_max_pool3d",
    "fractional_max_pool3d_with_indices",
]

_WORDS = {2: "Ints", 3: "three Ints"}


def _sizes(value: Any, dims: int, what: str, name: str) -> tuple[int, ...]:
    """``kernel_size`` or ``output_size``: an int or ``dims`` ints, as torch's message says."""
    items = int_sequence(value, f"torch.nn.functional.{what}", name)
    if len(items) == 1:
        items = items * dims
    if len(items) != dims:
        raise TensorError(f"{what}: {name} must either be a single Int or tuple of {_WORDS[dims]}")
    return items


def _ratios(value: Any, dims: int, what: str) -> tuple[float, ...]:
    items = tuple(value) if isinstance(value, list | tuple) else (value,)
    if len(items) > dims:
        raise TensorValueError(
            f"{what} requires output_ratio to either be a single Int or tuple of Ints."
        )
    if len(items) == 1:
        items = items * dims
    if len(items) != dims or not all(
        isinstance(r, numbers.Real) and not isinstance(r, bool) for r in items
    ):
        raise TensorValueError(
            f"{what}: output_ratio must be a number or {dims} numbers, got {value!r}"
        )
    return tuple(float(r) for r in items)


def _check_input(x: Tensor, dims: int, what: str) -> None:
    prefix = f"{what}()" if dims == 2 else f"{what}_out()"
    if x.ndim not in (dims + 1, dims + 2):
        raise TensorError(
            f"{prefix}: Expected {dims + 1}D or {dims + 2}D tensor, but got: {list(x.shape)}"
        )
    for d in range(1, x.ndim):
        if x.shape[d] == 0:
            raise TensorError(
                f"{prefix}: Expected input to have non-zero size for non-batch dimensions, "
                f"but got{list(x.shape)} with dimension {d} being empty."
            )
    if not x.dtype.is_floating_point:
        raise TensorError(
            f"{what}: takes a floating input here, got {x.dtype!r} (torch's kernel is not "
            "implemented for it either); convert with .float() first"
        )


def _check_fit(
    dims: int, what: str, spatial: tuple[int, ...], out: tuple[int, ...], kernel: tuple[int, ...]
) -> None:
    """torch's ``pool ... too large relative to input ...`` checks, in its order."""
    if dims == 2:
        for d, word in ((0, "height"), (1, "width")):
            if out[d] + kernel[d] - 1 > spatial[d]:
                raise TensorError(
                    f"{what}(): pool {word} {kernel[d]} too large relative to input {word} "
                    f"{spatial[d]}"
                )
        return
    for d, word in ((0, "time"), (2, "width"), (1, "height")):
        if not (kernel[d] <= spatial[d] and out[d] + kernel[d] - 1 < spatial[d]):
            raise TensorError(
                f"{what}_out(): pool {word} {kernel[d]} too large relative to input {word} "
                f"{spatial[d]}"
            )


def _check_samples(samples: Tensor, x: Tensor, dims: int) -> None:
    """torch's ``fractional_max_pool_check_shape``."""
    if samples.dtype is not x.dtype:
        raise TensorError("Expect _random_samples to have the same dtype as input")
    if samples.ndim != 3:
        raise TensorError(f"Expect _random_samples to have 3 dimensions, got {samples.ndim}")
    batch = 1 if x.ndim == dims + 1 else x.shape[0]
    channels = x.shape[-dims - 1]
    n, c, d = tuple(samples.shape)
    if n < batch:
        raise TensorError("Expect _random_samples.size(0) no less then input batch size.")
    if c != channels:
        raise TensorError("Expect _random_samples.size(1) equals to input channel size.")
    if d != dims:
        raise TensorError(f"Expect _random_samples.size(2) equals to {dims}; got {d}.")


def _alpha(size: int, k: int, out: int, dtype: Any) -> np.floating:
    """torch's ``alpha``, ``(in - k) / (out - 1)`` in the input's type (float32 for the
    half types, which the kernel rounds to them); 0 for one output, which needs none."""
    kind = np.float64 if dtype.name == "float64" else np.float32
    if out <= 1:
        return kind(0)
    return kind(size - k) / kind(out - 1)


def _fractional(
    dims: int,
    input: Any,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any,
    output_ratio: Any,
    _random_samples: Any,
) -> tuple[Tensor, Tensor]:
    what = f"fractional_max_pool{dims}d"
    x = tensor_argument(input, f"torch.nn.functional.{what}")
    if output_size is None and output_ratio is None:
        raise TensorValueError(
            f"{what} requires specifying either an output_size or an output_ratio"
        )
    if output_size is None:
        ratios = _ratios(output_ratio, dims, what)
        shape = tuple(x.shape)
        if len(shape) < dims:
            raise TensorError(
                f"{what}: output_ratio needs an input of at least {dims} dims, got {list(shape)}"
            )
        output_size = tuple(int(s * r) for s, r in zip(shape[-dims:], ratios, strict=True))
    kernel = _sizes(kernel_size, dims, what, "kernel_size")
    out_spatial = _sizes(output_size, dims, what, "output_size")
    prefix = f"{what}()"
    if any(k <= 0 for k in kernel):
        raise TensorError(
            f"{prefix}: kernel size should be greater than zero, but got "
            f"{'x'.join(map(str, kernel))}"
        )
    _check_input(x, dims, what)
    if any(o < 0 for o in out_spatial):
        raise TensorError(f"{prefix}: output_size must not be negative, got {list(out_spatial)}")
    spatial = tuple(x.shape)[-dims:]
    _check_fit(dims, what, spatial, out_spatial, kernel)
    if _random_samples is None:
        batch = 1 if x.ndim == dims + 1 else x.shape[0]
        samples = rand(batch, x.shape[-dims - 1], dims, dtype=x.dtype, device=x.get_device())
    else:
        samples = tensor_argument(_random_samples, f"torch.nn.functional.{what}")
        _check_samples(samples, x, dims)
    out = x.new_empty((*tuple(x.shape)[: x.ndim - dims], *out_spatial))
    indices = out.new_empty(tuple(out.shape), dtype=DTYPE_OBJECTS["int64"])
    if out.numel():
        dense, flat_samples = x.dense(), samples.dense()
        ones = (1,) * (3 - dims)
        launch_fractional_pool(
            dense.device_tensor,
            flat_samples.device_tensor,
            out.device_tensor,
            indices.device_tensor,
            (*ones, *spatial),
            (*ones, *out_spatial),
            (*ones, *kernel),
            (-1, 1, 0) if dims == 2 else (0, 1, 2),
            (*((np.float32(0),) * (3 - dims)), *(
                _alpha(s, k, o, x.dtype)
                for s, k, o in zip(spatial, kernel, out_spatial, strict=True)
            )),
        )  # fmt: skip
        for made, given in ((dense, x), (flat_samples, samples)):
            if made is not given:
                made.free()
    if _random_samples is None:
        samples.free()
    return out, indices


def _values_or_pair(
    dims: int,
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any,
    output_ratio: Any,
    return_indices: bool,
    _random_samples: Tensor | None,
) -> Any:
    """``fractional_max_pool{dims}d``: the values, and the indices with ``return_indices``."""
    flag = flag_argument(
        return_indices, f"torch.nn.functional.fractional_max_pool{dims}d", "return_indices"
    )
    values, indices = _fractional(
        dims, input, kernel_size, output_size, output_ratio, _random_samples
    )
    if flag:
        return values, indices
    indices.free()
    return values


def fractional_max_pool2d_with_indices(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The maximum of each fractional window of (N, C, H, W) or (C, H, W) ``input`` and its
    index in the flattened H x W plane (``return_indices`` is ignored, as torch's)."""
    return _fractional(2, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool2d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """The maximum of each fractional window of (N, C, H, W) or (C, H, W) ``input`` (and its
    index in the flattened H x W plane with ``return_indices``)."""
    return _values_or_pair(
        2, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )


def fractional_max_pool3d_with_indices(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The maximum of each fractional window of (N, C, D, H, W) or (C, D, H, W) ``input``
    and its index in the flattened D x H x W volume (``return_indices`` is ignored)."""
    return _fractional(3, input, kernel_size, output_size, output_ratio, _random_samples)


def fractional_max_pool3d(
    input: Tensor,  # noqa: A002 - torch's name
    kernel_size: Any,
    output_size: Any = None,
    output_ratio: Any = None,
    return_indices: bool = False,
    _random_samples: Tensor | None = None,
) -> Any:
    """The maximum of each fractional window of (N, C, D, H, W) or (C, D, H, W) ``input``
    (and its index in the flattened D x H x W volume with ``return_indices``)."""
    return _values_or_pair(
        3, input, kernel_size, output_size, output_ratio, return_indices, _random_samples
    )
