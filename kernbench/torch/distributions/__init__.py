"""``torch.distributions``: ``Categorical``, ``Bernoulli``, ``Normal`` and ``Uniform`` with
torch's parameters, ``Independent`` over any of them, ``sample``/``rsample``,
``log_prob``, ``entropy``, ``cdf``/``icdf``, moments and ``kl_divergence`` between two of
one family.

What a policy-gradient or variational program reaches for: ``m = Categorical(probs);
action = m.sample(); loss = -m.log_prob(action) * reward``, or ``Normal(mu,
sigma).rsample()``.  Every method is the torch ops it is written with, so it costs their
simulated time and gradients flow where torch's do (``rsample``, ``log_prob``,
``entropy``; ``sample`` records none).  Draws come from the rank's generator
(``torch.manual_seed``).  Other distributions raise an error naming them.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import unsupported_name
from kernbench.torch.distributions.categorical import Bernoulli, Categorical
from kernbench.torch.distributions.distribution import Distribution
from kernbench.torch.distributions.independent import Independent
from kernbench.torch.distributions.kl import kl_divergence
from kernbench.torch.distributions.normal import Normal, Uniform

__all__ = [
    "Bernoulli",
    "Categorical",
    "Distribution",
    "Independent",
    "Normal",
    "Uniform",
    "kl_divergence",
]

_OTHERS = (
    "the distributions here are Categorical, Bernoulli, Normal, Uniform and Independent; "
    "write the density with tensor ops (log_prob), and draw with torch.rand/randn/multinomial"
)


def __getattr__(name: str) -> Any:
    hints = {} if name.startswith("_") else {name: _OTHERS}
    raise unsupported_name(
        "kernbench.torch.distributions", "torch.distributions", name, __all__, hints
    )
