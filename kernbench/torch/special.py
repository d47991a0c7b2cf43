"""``torch.special``: torch's special functions by the names that module gives them.

Each is the ``torch`` op it names (``expit`` is ``torch.sigmoid``, ``gammaln`` is
``torch.lgamma``, ``psi`` is ``torch.digamma``, ...) or a short composition of them
(``erfc``, ``ndtr``, ``log_ndtr``, ``entr``, ``xlog1py``), so it costs what those ops cost
and is differentiable where they are.  Names torch.special has and this module lacks
(the Bessel and Airy functions, ``zeta``, ``polygamma``, ...) raise an error naming
them.
"""

from __future__ import annotations

import math
from typing import Any

import kernbench.torch as torch  # its ops as autograd wraps them, looked up at the call
from kernbench.errors import unsupported_name
from kernbench.torch.functions import into_out

__all__ = [
    "digamma",
    "entr",
    "erf",
    "erfc",
    "erfinv",
    "exp2",
    "expit",
    "expm1",
    "gammaln",
    "i0",
    "log1p",
    "log_ndtr",
    "log_softmax",
    "logit",
    "logsumexp",
    "ndtr",
    "psi",
    "round",
    "sinc",
    "softmax",
    "xlog1py",
    "xlogy",
]


def _out(result: Any, out: Any) -> Any:
    """``result``, or copied into ``out=`` with torch's checks (:func:`into_out`)."""
    return result if out is None else into_out("torch.special", out, result)


def expit(input: Any, *, out: Any = None) -> Any:
    """``1 / (1 + exp(-input))``: ``torch.sigmoid``."""
    return _out(torch.sigmoid(input), out)


def erf(input: Any, *, out: Any = None) -> Any:
    return _out(torch.erf(input), out)


def erfc(input: Any, *, out: Any = None) -> Any:
    """``1 - erf(input)``."""
    return _out(1.0 - torch.erf(input), out)


def erfinv(input: Any, *, out: Any = None) -> Any:
    return _out(torch.erfinv(input), out)


def exp2(input: Any, *, out: Any = None) -> Any:
    return _out(torch.exp2(input), out)


def expm1(input: Any, *, out: Any = None) -> Any:
    return _out(torch.expm1(input), out)


def log1p(input: Any, *, out: Any = None) -> Any:
    return _out(torch.log1p(input), out)


def logit(input: Any, eps: float | None = None, *, out: Any = None) -> Any:
    return _out(torch.logit(input, eps), out)


def xlogy(input: Any, other: Any, *, out: Any = None) -> Any:
    return _out(torch.xlogy(input, other), out)


def xlog1py(input: Any, other: Any, *, out: Any = None) -> Any:
    """``input * log1p(other)``, 0 where ``input`` is 0 (NaN ``other`` stays NaN)."""
    other = other if isinstance(other, torch.Tensor) else torch.tensor(float(other))
    product = input * torch.log1p(other)
    zero = (input == 0) & ~torch.isnan(other) if isinstance(input, torch.Tensor) else None
    if zero is None:
        return _out(product if input != 0 else torch.zeros_like(product), out)
    return _out(torch.where(zero, torch.zeros_like(product), product), out)


def sinc(input: Any, *, out: Any = None) -> Any:
    return _out(torch.sinc(input), out)


def round(input: Any, *, decimals: int = 0, out: Any = None) -> Any:  # noqa: A001
    return _out(torch.round(input, decimals=decimals), out)


def i0(input: Any, *, out: Any = None) -> Any:
    return _out(torch.i0(input), out)


def digamma(input: Any, *, out: Any = None) -> Any:
    return _out(torch.digamma(input), out)


psi = digamma


def gammaln(input: Any, *, out: Any = None) -> Any:
    """``log|Gamma(input)|``: ``torch.lgamma``."""
    return _out(torch.lgamma(input), out)


def ndtr(input: Any, *, out: Any = None) -> Any:
    """The standard normal's CDF, ``(1 + erf(input / sqrt(2))) / 2``."""
    return _out((1.0 + torch.erf(input * (1.0 / math.sqrt(2.0)))) * 0.5, out)


def log_ndtr(input: Any, *, out: Any = None) -> Any:
    """``log(ndtr(input))``."""
    return _out(torch.log(ndtr(input)), out)


def entr(input: Any, *, out: Any = None) -> Any:
    """``-input * log(input)`` elementwise: 0 at 0, ``-inf`` below 0."""
    value = torch.where(input > 0, -torch.xlogy(input, input), torch.zeros_like(input))
    return _out(torch.where(input < 0, torch.full_like(input, -math.inf), value), out)


def softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:
    return torch.softmax(input, dim, dtype=dtype)


def log_softmax(input: Any, dim: int, *, dtype: Any = None) -> Any:
    return torch.log_softmax(input, dim, dtype=dtype)


def logsumexp(input: Any, dim: Any, keepdim: bool = False, *, out: Any = None) -> Any:
    return _out(torch.logsumexp(input, dim, keepdim=keepdim), out)


_NOT_HERE = (
    "there is no device kernel for it here; compute it on the host from t.numpy() "
    "(scipy.special has it)"
)
_HINTS = {
    name: _NOT_HERE
    for name in (
        "airy_ai", "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0",
        "modified_bessel_i1", "modified_bessel_k0", "modified_bessel_k1",
        "scaled_modified_bessel_k0", "scaled_modified_bessel_k1", "spherical_bessel_j0", "zeta",
        "polygamma", "multigammaln",
        "gammainc", "gammaincc", "i0e", "i1", "i1e", "ndtri", "erfcx", "chebyshev_polynomial_t",
        "hermite_polynomial_h", "laguerre_polynomial_l", "legendre_polynomial_p",
    )
}  # fmt: skip


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.special", "torch.special", name, __all__, _HINTS)
