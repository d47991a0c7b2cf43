"""``torch.distributions.Distribution``: the base of every distribution here.

A distribution has a ``batch_shape`` (independent distributions side by side) and an
``event_shape`` (the shape of one draw); ``sample(sample_shape)`` draws
``sample_shape + batch_shape + event_shape`` values from the rank's generator without
recording a gradient, ``rsample`` (where there is one) by the reparameterisation trick so
that gradients reach the parameters.  Parameters are checked as torch checks them
(``validate_args``, on by default): a value that breaks its constraint is a
``ValueError`` naming the parameter and the constraint.  The checks read the parameters
back to the host, as torch's do (a device sync there), and are skipped in timing-only
runs, which carry no values.
"""

from __future__ import annotations

from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.runtime.current import current_context

__all__ = ["Distribution"]


class Distribution:
    """Batch and event shapes, argument checks, and the methods subclasses provide."""

    has_rsample = False
    _validate_default = True

    def __init__(
        self, batch_shape: Any = (), event_shape: Any = (), validate_args: bool | None = None
    ) -> None:
        self._batch_shape = torch.Size(batch_shape)
        self._event_shape = torch.Size(event_shape)
        self._validate_args = self._validation(validate_args)

    @staticmethod
    def _validation(validate_args: bool | None) -> bool:
        """Whether to check arguments: as asked, else the default (on, as in torch)."""
        return Distribution._validate_default if validate_args is None else bool(validate_args)

    @staticmethod
    def set_default_validate_args(value: bool) -> None:
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: expected True or False, got {value!r}")
        Distribution._validate_default = value

    @property
    def batch_shape(self) -> Any:
        return self._batch_shape

    @property
    def event_shape(self) -> Any:
        return self._event_shape

    def _extended_shape(self, sample_shape: Any = ()) -> Any:
        if not isinstance(sample_shape, torch.Size | tuple | list):
            raise TypeError(
                f"{type(self).__name__}.sample: sample_shape must be a torch.Size or a tuple, "
                f"got {type(sample_shape).__name__}"
            )
        return torch.Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _check(self, name: str, value: Any, holds: Any, constraint: str) -> None:
        """``ValueError`` unless ``holds`` (a bool tensor of ``value``) is true everywhere."""
        if not self._validate_args or current_context().timing_only:
            return
        if not bool(holds.all().item()):
            raise ValueError(
                f"Expected parameter {name} ({type(value).__name__} of shape "
                f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                f"{constraint}, but found invalid values:\n{value}"
            )

    def sample(self, sample_shape: Any = ()) -> Any:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape: Any = ()) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__} has no rsample (no reparameterised sampling); use sample()"
        )

    def sample_n(self, n: int) -> Any:
        return self.sample((n,))

    def log_prob(self, value: Any) -> Any:
        raise NotImplementedError

    def entropy(self) -> Any:
        raise NotImplementedError

    def cdf(self, value: Any) -> Any:
        raise NotImplementedError

    def icdf(self, value: Any) -> Any:
        raise NotImplementedError

    def perplexity(self) -> Any:
        return torch.exp(self.entropy())

    @property
    def stddev(self) -> Any:
        return self.variance.sqrt()

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}: {value.size() if hasattr(value, 'size') else value}"
            for name, value in self._shown().items()
        )
        return f"{type(self).__name__}({shown})"

    def _shown(self) -> dict:
        return {}
