"""``FractionalMaxPool2d`` and ``FractionalMaxPool3d``: modules over
:func:`F.fractional_max_pool2d`/``3d`` (:mod:`~kernbench.torch.nn.fractional_pooling`).

As torch's: ``kernel_size``, ``output_size`` and ``output_ratio`` are kept spread over the
dims (``_pair``/``_triple``); exactly one of ``output_size`` and ``output_ratio`` is
given, a ratio in (0, 1); ``_random_samples`` is a buffer (None unless given, so the
pool draws new samples each call).
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorValueError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = ["FractionalMaxPool2d", "FractionalMaxPool3d"]


def _spread(value: Any, dims: int) -> tuple:
    """torch's ``_pair``/``_triple``: a sequence as a tuple, anything else ``dims`` times."""
    return tuple(value) if isinstance(value, list | tuple) else (value,) * dims


class _FractionalMaxPoolNd(Module):
    _dims = 2

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        super().__init__()
        dims = self._dims
        name = type(self).__name__
        self.kernel_size = _spread(kernel_size, dims)
        self.return_indices = return_indices
        self.register_buffer("_random_samples", _random_samples)
        self.output_size = _spread(output_size, dims) if output_size is not None else None
        self.output_ratio = _spread(output_ratio, dims) if output_ratio is not None else None
        if output_size is None and output_ratio is None:
            raise TensorValueError(
                f"{name} requires specifying either an output size, or a pooling ratio"
            )
        if output_size is not None and output_ratio is not None:
            raise TensorValueError("only one of output_size and output_ratio may be specified")
        if self.output_ratio is not None and not all(0 < r < 1 for r in self.output_ratio):
            raise TensorValueError(f"output_ratio must be between 0 and 1 (got {output_ratio})")

    def forward(self, input: Tensor) -> Any:  # noqa: A002 - torch's name
        return getattr(F, f"fractional_max_pool{self._dims}d")(
            input, self.kernel_size, self.output_size, self.output_ratio,
            self.return_indices, _random_samples=self._random_samples,
        )  # fmt: skip


class FractionalMaxPool2d(_FractionalMaxPoolNd):
    """The maximum of each fractional window (:func:`F.fractional_max_pool2d`)."""


class FractionalMaxPool3d(_FractionalMaxPoolNd):
    """The maximum of each fractional window (:func:`F.fractional_max_pool3d`); a
    ``kernel_size`` not above 0 is refused here, as torch's module refuses it."""

    _dims = 3

    def __init__(
        self,
        kernel_size: Any,
        output_size: Any = None,
        output_ratio: Any = None,
        return_indices: bool = False,
        _random_samples: Tensor | None = None,
    ) -> None:
        sizes = kernel_size if isinstance(kernel_size, list | tuple) else (kernel_size,)
        if not all(k > 0 for k in sizes):
            raise TensorValueError(f"kernel_size must greater than 0, but got {kernel_size}")
        super().__init__(kernel_size, output_size, output_ratio, return_indices, _random_samples)
