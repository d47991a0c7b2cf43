"""``torch.nn.init``: fill a tensor in place with torch's initial distributions.

Values are drawn on the host from the rank's generator (float32 draws, as
``torch.rand``/``torch.randn`` here, so ``torch.manual_seed`` repeats them;
they are not the values torch would draw) and copied in through the fabric,
which costs time.  Bounds, standard deviations, fans and gains are torch's.
``trunc_normal_`` redraws the values outside ``[a, b]`` (torch inverts the
CDF: the same distribution); ``orthogonal_`` takes NumPy's QR on the host, as
torch does on the CPU; ``sparse_`` zeroes ``ceil(sparsity * rows)`` random rows of each
column of a normal draw, and ``dirac_`` writes torch's identity kernels.  torch's
deprecated names without the ``_`` (``init.xavier_uniform(w)``) warn as torch's and
fill in place.  In timing-only mode nothing is drawn: zeros of the
same size are copied in.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import TensorAttributeError, TensorError, user_stacklevel
from kernbench.torch import random as torch_random
from kernbench.torch.tensor import Tensor

__all__ = [
    "calculate_gain",
    "constant_",
    "dirac_",
    "eye_",
    "kaiming_normal_",
    "kaiming_uniform_",
    "normal_",
    "ones_",
    "orthogonal_",
    "sparse_",
    "trunc_normal_",
    "uniform_",
    "xavier_normal_",
    "xavier_uniform_",
    "zeros_",
]


def _tensor(value: Any, what: str) -> Tensor:
    if not isinstance(value, Tensor):
        raise TensorError(
            f"torch.nn.init.{what}: tensor must be a Tensor, got {type(value).__name__}"
        )
    return value


def _fill(
    tensor: Tensor, generator: Any, draw: Callable[[np.random.Generator, tuple], np.ndarray]
) -> Tensor:
    shape = tuple(tensor.shape)
    if tensor.storage_device_tensor.context.timing_only:
        return tensor.copy_(np.zeros(shape, np.float32))
    return tensor.copy_(draw(torch_random.resolve(generator), shape))


def calculate_gain(nonlinearity: str, param: Any = None) -> float:
    """torch's recommended gain for ``nonlinearity`` (``param`` is leaky_relu's slope)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d", "sigmoid")  # fmt: skip
    if nonlinearity in linear:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, numbers.Real) and not isinstance(param, bool) or param is True:
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """torch's ``_calculate_fan_in_and_fan_out``: dim 1 and dim 0 times the receptive field."""
    if tensor.ndim < 2:
        raise ValueError(
            "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions"
        )
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    valid = ["fan_in", "fan_out"]
    if mode not in valid:
        raise ValueError(f"Mode {mode} not supported, please use one of {valid}")
    fan_in, fan_out = fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator: Any = None) -> Tensor:
    """U(a, b), in place."""
    _tensor(tensor, "uniform_")
    low, high = float(a), float(b)
    return _fill(
        tensor,
        generator,
        lambda rng, shape: low + (high - low) * rng.random(shape, dtype=np.float32).astype(float),
    )


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator: Any = None) -> Tensor:
    """N(mean, std²), in place."""
    _tensor(tensor, "normal_")
    mu, sigma = float(mean), float(std)
    return _fill(
        tensor,
        generator,
        lambda rng, shape: mu + sigma * rng.standard_normal(shape, dtype=np.float32).astype(float),
    )


def trunc_normal_(
    tensor: Tensor,
    mean: float = 0.0,
    std: float = 1.0,
    a: float = -2.0,
    b: float = 2.0,
    generator: Any = None,
) -> Tensor:
    """N(mean, std²) truncated to [a, b], in place (values outside are drawn again)."""
    _tensor(tensor, "trunc_normal_")
    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn(
            "mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The distribution "
            "of values may be incorrect.",
            stacklevel=user_stacklevel(),
        )

    def draw(rng: np.random.Generator, shape: tuple) -> np.ndarray:
        values = mean + std * rng.standard_normal(shape, dtype=np.float32).astype(float)
        outside = (values < a) | (values > b)
        while outside.any():
            values[outside] = mean + std * rng.standard_normal(int(outside.sum()))
            outside = (values < a) | (values > b)
        return values

    return _fill(tensor, generator, draw)


def constant_(tensor: Tensor, val: float) -> Tensor:
    return _tensor(tensor, "constant_").fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    return _tensor(tensor, "ones_").fill_(1)


def zeros_(tensor: Tensor) -> Tensor:
    return _tensor(tensor, "zeros_").zero_()


def eye_(tensor: Tensor) -> Tensor:
    if _tensor(tensor, "eye_").ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    return tensor.copy_(np.eye(*tensor.shape, dtype=np.float32))


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = fan_in_and_fan_out(_tensor(tensor, "xavier_uniform_"))
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator: Any = None) -> Tensor:
    fan_in, fan_out = fan_in_and_fan_out(_tensor(tensor, "xavier_normal_"))
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor: Tensor, a: float, mode: str, nonlinearity: str) -> float | None:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=user_stacklevel())
        return None
    return calculate_gain(nonlinearity, a) / math.sqrt(_correct_fan(tensor, mode))


def kaiming_uniform_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """U(-bound, bound) with bound = gain * sqrt(3 / fan), in place."""
    std = _kaiming_std(_tensor(tensor, "kaiming_uniform_"), a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(
    tensor: Tensor,
    a: float = 0,
    mode: str = "fan_in",
    nonlinearity: str = "leaky_relu",
    generator: Any = None,
) -> Tensor:
    """N(0, std²) with std = gain / sqrt(fan), in place."""
    std = _kaiming_std(_tensor(tensor, "kaiming_normal_"), a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator: Any = None) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain``: the QR of a normal draw, taken on the host
    with torch's sign fix, copied in."""
    if _tensor(tensor, "orthogonal_").ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows

    def draw(rng: np.random.Generator, shape: tuple) -> np.ndarray:
        flat = rng.standard_normal((rows, cols), dtype=np.float32).astype(float)
        if rows < cols:
            flat = flat.T
        q, r = np.linalg.qr(flat)
        q = q * np.sign(np.diag(r))
        if rows < cols:
            q = q.T
        return (gain * q).reshape(shape)

    return _fill(tensor, generator, draw)


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """The convolution kernels that pass their input through (per group), in place."""
    sizes = tuple(_tensor(tensor, "dirac_").shape)
    if len(sizes) not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    if sizes[0] % groups != 0:
        raise ValueError("dim 0 must be divisible by groups")
    out_per_group = sizes[0] // groups
    kernel = np.zeros(sizes, np.float32)
    centre = tuple(n // 2 for n in sizes[2:])
    for g in range(groups):
        for d in range(min(out_per_group, sizes[1])):
            kernel[(g * out_per_group + d, d, *centre)] = 1.0
    return tensor.copy_(kernel)


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator: Any = None) -> Tensor:
    """N(0, std²) with ``ceil(sparsity * rows)`` entries of each column zero, in place."""
    if _tensor(tensor, "sparse_").ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    rows, cols = tensor.shape
    zeros = int(math.ceil(sparsity * rows))

    def draw(rng: np.random.Generator, shape: tuple) -> np.ndarray:
        values = std * rng.standard_normal(shape, dtype=np.float32).astype(float)
        for col in range(cols):
            values[rng.permutation(rows)[:zeros], col] = 0.0
        return values

    return _fill(tensor, generator, draw)


def _deprecated(name: str) -> Callable[..., Tensor]:
    def fill(*args: Any, **kwargs: Any) -> Tensor:
        warnings.warn(
            f"`nn.init.{name}` is now deprecated in favor of `nn.init.{name}_`.",
            FutureWarning,
            stacklevel=user_stacklevel(),
        )
        return globals()[f"{name}_"](*args, **kwargs)

    fill.__name__ = fill.__qualname__ = name
    fill.__doc__ = f"``nn.init.{name}``: torch's deprecated name of ``{name}_``."
    return fill


uniform = _deprecated("uniform")
normal = _deprecated("normal")
constant = _deprecated("constant")
xavier_uniform = _deprecated("xavier_uniform")
xavier_normal = _deprecated("xavier_normal")
kaiming_uniform = _deprecated("kaiming_uniform")
kaiming_normal = _deprecated("kaiming_normal")
orthogonal = _deprecated("orthogonal")
sparse = _deprecated("sparse")


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.init' has no attribute {name!r}: there are "
        f"{', '.join(__all__)}; fill other initial values on the host and copy them in "
        "(with torch.no_grad(): w.copy_(torch.from_numpy(array)))"
    )
