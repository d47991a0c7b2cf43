"""``torch.distributions.Normal`` and ``Uniform``: continuous, with ``rsample``."""

from __future__ import annotations

import math
from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.torch.distributions.distribution import Distribution

__all__ = ["Normal", "Uniform"]


def _broadcast(*values: Any) -> list[Any]:
    """Parameters as tensors of one shape (numbers become tensors of the default dtype)."""
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    dtype = tensors[0].dtype if tensors else torch.get_default_dtype()
    made = [
        v if isinstance(v, torch.Tensor) else torch.tensor(float(v), dtype=dtype) for v in values
    ]
    return list(torch.broadcast_tensors(*made))


class Normal(Distribution):
    """Gaussian with mean ``loc`` and standard deviation ``scale`` (> 0), as torch's."""

    has_rsample = True

    def __init__(self, loc: Any, scale: Any, validate_args: bool | None = None) -> None:
        self.loc, self.scale = _broadcast(loc, scale)
        super().__init__(tuple(self.loc.shape), (), validate_args)
        self._check("scale", self.scale, self.scale > 0, "GreaterThan(lower_bound=0.0)")

    @property
    def mean(self) -> Any:
        return self.loc

    @property
    def mode(self) -> Any:
        return self.loc

    @property
    def stddev(self) -> Any:
        return self.scale

    @property
    def variance(self) -> Any:
        return self.scale.pow(2)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            return torch.normal(self.loc.expand(shape), self.scale.expand(shape))

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        eps = torch.randn(tuple(shape), dtype=self.loc.dtype)
        return self.loc + eps * self.scale

    def log_prob(self, value: Any) -> Any:
        var = self.scale**2
        return (
            -((value - self.loc) ** 2) / (2 * var)
            - torch.log(self.scale)
            - math.log(math.sqrt(2 * math.pi))
        )

    def cdf(self, value: Any) -> Any:
        return 0.5 * (1 + torch.erf((value - self.loc) * self.scale.reciprocal() / math.sqrt(2)))

    def icdf(self, value: Any) -> Any:
        return self.loc + self.scale * torch.erfinv(2 * value - 1) * math.sqrt(2)

    def entropy(self) -> Any:
        return 0.5 + 0.5 * math.log(2 * math.pi) + torch.log(self.scale)

    def _shown(self) -> dict:
        return {"loc": self.loc, "scale": self.scale}


class Uniform(Distribution):
    """Uniform on ``[low, high)``, as torch's."""

    has_rsample = True

    def __init__(self, low: Any, high: Any, validate_args: bool | None = None) -> None:
        self.low, self.high = _broadcast(low, high)
        super().__init__(tuple(self.low.shape), (), validate_args)
        self._check("low", self.low, self.low < self.high, "LessThan(upper_bound=high)")

    @property
    def mean(self) -> Any:
        return (self.high + self.low) / 2

    @property
    def mode(self) -> Any:
        return torch.full_like(self.high, float("nan"))

    @property
    def stddev(self) -> Any:
        return (self.high - self.low) / 12**0.5

    @property
    def variance(self) -> Any:
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        rand = torch.rand(tuple(shape), dtype=self.low.dtype)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value: Any) -> Any:
        inside = self.low.le(value).type_as(self.low) * self.high.gt(value).type_as(self.low)
        return torch.log(inside) - torch.log(self.high - self.low)

    def cdf(self, value: Any) -> Any:
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value: Any) -> Any:
        return value * (self.high - self.low) + self.low

    def entropy(self) -> Any:
        return torch.log(self.high - self.low)

    def _shown(self) -> dict:
        return {"low": self.low, "high": self.high}
