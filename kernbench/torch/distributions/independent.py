"""``torch.distributions.Independent``: batch dims of a distribution read as event dims.

``Independent(Normal(mu, sigma), 1)`` is a diagonal Gaussian over the last dim, as
continuous-action policies and variational programs write it: its ``log_prob`` and
``entropy`` are the base's summed over the reinterpreted dims, its samples, mean and
variance the base's.  ``kl_divergence`` of two with the same reinterpreted dims is the
base pair's, summed the same way.
"""

from __future__ import annotations

from typing import Any

from kernbench.torch.distributions.distribution import Distribution

__all__ = ["Independent"]


def sum_rightmost(value: Any, dims: int) -> Any:
    """``value`` summed over its last ``dims`` dims."""
    return value.sum(tuple(range(-dims, 0))) if dims > 0 else value


class Independent(Distribution):
    """``Independent(base_distribution, reinterpreted_batch_ndims)``, as torch's."""

    def __init__(
        self,
        base_distribution: Distribution,
        reinterpreted_batch_ndims: int,
        validate_args: bool | None = None,
    ) -> None:
        if not isinstance(base_distribution, Distribution):
            raise TypeError(
                "Independent: base_distribution must be a Distribution, got "
                f"{type(base_distribution).__name__}"
            )
        batch = tuple(base_distribution.batch_shape)
        if not isinstance(reinterpreted_batch_ndims, int) or not (
            0 <= reinterpreted_batch_ndims <= len(batch)
        ):
            raise ValueError(
                "Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                f"actual {reinterpreted_batch_ndims} vs {len(batch)}"
            )
        split = len(batch) - reinterpreted_batch_ndims
        event = batch[split:] + tuple(base_distribution.event_shape)
        self.base_dist = base_distribution
        self.reinterpreted_batch_ndims = reinterpreted_batch_ndims
        super().__init__(batch[:split], event, validate_args)

    @property
    def has_rsample(self) -> bool:  # type: ignore[override]
        return self.base_dist.has_rsample

    @property
    def mean(self) -> Any:
        return self.base_dist.mean

    @property
    def mode(self) -> Any:
        return self.base_dist.mode

    @property
    def variance(self) -> Any:
        return self.base_dist.variance

    def sample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.sample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        return self.base_dist.rsample(sample_shape)

    def log_prob(self, value: Any) -> Any:
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self) -> Any:
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def __repr__(self) -> str:
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"
