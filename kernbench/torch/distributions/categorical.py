"""``torch.distributions.Categorical`` and ``Bernoulli``: by ``probs`` or by ``logits``."""

from __future__ import annotations

from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.torch.distributions.distribution import Distribution

__all__ = ["Bernoulli", "Categorical"]


def _one_of(probs: Any, logits: Any, name: str) -> None:
    if (probs is None) == (logits is None):
        raise ValueError(f"{name}: Either `probs` or `logits` must be specified, but not both.")


def _as_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=torch.get_default_dtype())


class _ProbsOrLogits(Distribution):
    """A discrete distribution given ``probs`` or ``logits``: the other is made from it
    when first read (``_from_logits`` / ``_from_probs``), as torch's lazy properties."""

    def _from_logits(self, logits: Any) -> Any:
        raise NotImplementedError

    def _from_probs(self, probs: Any) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        if name == "probs":
            made = self.__dict__["probs"] = self._from_logits(self.__dict__["logits"])
            return made
        if name == "logits":
            made = self.__dict__["logits"] = self._from_probs(self.__dict__["probs"])
            return made
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")

    def _support(self, count: int, dtype: Any, expand: bool) -> Any:
        """``0 .. count-1`` along a new first dim, over the batch dims (expanded or 1)."""
        values = torch.arange(count, dtype=dtype)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        if expand:
            values = values.expand((-1, *tuple(self._batch_shape)))
        return values

    def _shown(self) -> dict:
        return {"probs": self.probs} if "probs" in self.__dict__ else {"logits": self.logits}


class Categorical(_ProbsOrLogits):
    """One of ``K`` categories per batch entry, with ``probs`` (normalised along the last
    dim) or ``logits`` (normalised to log-probabilities), as torch's."""

    has_enumerate_support = True

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        _one_of(probs, logits, "Categorical")
        self._validate_args = self._validation(validate_args)  # the checks below need it
        if probs is not None:
            probs = _as_tensor(probs)
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs
            self._check("probs", probs, (probs >= 0) & probs.isfinite(), "Simplex()")
            self.probs = probs / probs.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            logits = _as_tensor(logits)
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = logits - logits.logsumexp(dim=-1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.size()[-1]
        super().__init__(tuple(self._param.shape)[:-1], (), validate_args)

    def _from_logits(self, logits: Any) -> Any:
        return torch.softmax(logits, -1)

    def _from_probs(self, probs: Any) -> Any:
        eps = torch.finfo(probs.dtype).eps
        return torch.log(probs.clamp(min=eps, max=1 - eps))

    @property
    def param_shape(self) -> Any:
        return self._param.size()

    @property
    def mean(self) -> Any:
        return torch.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self) -> Any:
        return self.probs.argmax(dim=-1)

    @property
    def variance(self) -> Any:
        return torch.full(self._extended_shape(), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        count = 1
        for n in tuple(sample_shape):
            count *= n
        with torch.no_grad():
            probs_2d = self.probs.reshape(-1, self._num_events)
            drawn = torch.multinomial(probs_2d, max(count, 1), True).T
        return drawn[:count].reshape(shape) if count else drawn[:0].reshape(shape)

    def log_prob(self, value: Any) -> Any:
        value = value.long().unsqueeze(-1)
        value, log_pmf = torch.broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self) -> Any:
        smallest = torch.finfo(self.logits.dtype).min
        logits = self.logits.clamp(min=smallest)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand: bool = True) -> Any:
        return self._support(self._num_events, torch.int64, expand)


class Bernoulli(_ProbsOrLogits):
    """1 with probability ``probs`` (or ``sigmoid(logits)``), else 0, as torch's."""

    has_enumerate_support = True

    def __init__(
        self, probs: Any = None, logits: Any = None, validate_args: bool | None = None
    ) -> None:
        _one_of(probs, logits, "Bernoulli")
        self._validate_args = self._validation(validate_args)  # the checks below need it
        if probs is not None:
            probs = _as_tensor(probs)
            self.probs = probs
            self._check(
                "probs",
                probs,
                (probs >= 0) & (probs <= 1),
                "Interval(lower_bound=0.0, upper_bound=1.0)",
            )
            self._param = probs
        else:
            self.logits = _as_tensor(logits)
            self._param = self.logits
        super().__init__(tuple(self._param.shape), (), validate_args)

    def _from_logits(self, logits: Any) -> Any:
        return torch.sigmoid(logits)

    def _from_probs(self, probs: Any) -> Any:
        eps = torch.finfo(probs.dtype).eps
        clamped = probs.clamp(min=eps, max=1 - eps)
        return torch.log(clamped) - torch.log1p(-clamped)

    @property
    def mean(self) -> Any:
        return self.probs

    @property
    def mode(self) -> Any:
        mode = (self.probs >= 0.5).to(self.probs.dtype)
        return torch.where(self.probs == 0.5, torch.full_like(mode, float("nan")), mode)

    @property
    def variance(self) -> Any:
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape: Any = ()) -> Any:
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            return torch.bernoulli(self.probs.expand(shape))

    def log_prob(self, value: Any) -> Any:
        logits, value = torch.broadcast_tensors(self.logits, value)
        return -torch.nn.functional.binary_cross_entropy_with_logits(
            logits, value, reduction="none"
        )

    def entropy(self) -> Any:
        return torch.nn.functional.binary_cross_entropy_with_logits(
            self.logits, self.probs, reduction="none"
        )

    def enumerate_support(self, expand: bool = True) -> Any:
        return self._support(2, self._param.dtype, expand)
