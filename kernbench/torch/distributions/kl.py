"""``torch.distributions.kl_divergence``: closed forms for pairs of one family."""

from __future__ import annotations

from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.errors import UnsupportedNameError
from kernbench.torch.distributions.categorical import Bernoulli, Categorical
from kernbench.torch.distributions.distribution import Distribution
from kernbench.torch.distributions.independent import Independent, sum_rightmost
from kernbench.torch.distributions.normal import Normal, Uniform

__all__ = ["kl_divergence"]


def _normal(p: Normal, q: Normal) -> Any:
    var_ratio = (p.scale / q.scale).pow(2)
    t1 = ((p.loc - q.loc) / q.scale).pow(2)
    return 0.5 * (var_ratio + t1 - 1 - torch.log(var_ratio))


def _categorical(p: Categorical, q: Categorical) -> Any:
    t = p.probs * (p.logits - q.logits)
    t = torch.where((q.probs == 0).expand_as(t), torch.full_like(t, float("inf")), t)
    t = torch.where((p.probs == 0).expand_as(t), torch.zeros_like(t), t)
    return t.sum(-1)


def _bernoulli(p: Bernoulli, q: Bernoulli) -> Any:
    softplus = torch.nn.functional.softplus
    t1 = p.probs * (softplus(-q.logits) - softplus(-p.logits))
    t1 = torch.where(q.probs == 0, torch.full_like(t1, float("inf")), t1)
    t1 = torch.where(p.probs == 0, torch.zeros_like(t1), t1)
    t2 = (1 - p.probs) * (softplus(q.logits) - softplus(p.logits))
    t2 = torch.where(q.probs == 1, torch.full_like(t2, float("inf")), t2)
    t2 = torch.where(p.probs == 1, torch.zeros_like(t2), t2)
    return t1 + t2


def _uniform(p: Uniform, q: Uniform) -> Any:
    result = torch.log((q.high - q.low) / (p.high - p.low))
    outside = (q.low > p.low) | (q.high < p.high)
    return torch.where(outside, torch.full_like(result, float("inf")), result)


_PAIRS = {
    (Normal, Normal): _normal,
    (Categorical, Categorical): _categorical,
    (Bernoulli, Bernoulli): _bernoulli,
    (Uniform, Uniform): _uniform,
}


def _independent(p: Independent, q: Independent) -> Any:
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError(
            "kl_divergence(Independent, Independent): the reinterpreted_batch_ndims differ"
        )
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


def kl_divergence(p: Distribution, q: Distribution) -> Any:
    """``KL(p || q)`` per batch entry, for two distributions of one family here."""
    if isinstance(p, Independent) and isinstance(q, Independent):
        return _independent(p, q)
    rule = _PAIRS.get((type(p), type(q)))
    if rule is None:
        pairs = ", ".join(f"{a.__name__}-{b.__name__}" for a, b in _PAIRS)
        raise UnsupportedNameError(
            f"kl_divergence({type(p).__name__}, {type(q).__name__}): no closed form here "
            f"(there are {pairs}); estimate it by sampling: (p.log_prob(x) - q.log_prob(x))"
            ".mean() over x = p.sample((n,))"
        )
    return rule(p, q)
