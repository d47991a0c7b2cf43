"""In-place random fills of :class:`~kernbench.torch.Tensor`: ``normal_``, ``uniform_``,
``random_``, ``exponential_``, ``geometric_``, ``log_normal_``, ``cauchy_``,
``bernoulli_`` and ``bernoulli``.

:class:`TensorRandomFills` is mixed into the tensor class.  As ``rand``/``randn``
(:mod:`~kernbench.torch.sampling`), values are drawn on the host from the rank's
generator (or ``generator=``) and copied in through the fabric, which costs the
time of the copy; in timing-only mode nothing is drawn and the copy costs the same.
Each fill transforms one of the three streams the factories draw, so a seed gives
the same numbers whichever of them reads it:

* ``uniform_``, ``exponential_``, ``geometric_``, ``cauchy_``, ``bernoulli_(p)``: the
  float32 uniforms ``torch.rand`` draws (``Generator.random``), one an element;
* ``normal_``, ``log_normal_``: the float32 normals ``torch.randn`` draws;
* ``random_``: the int64 integers ``torch.randint`` draws.

The transform runs in float64 on the host, rounded once to the tensor's dtype.
``bernoulli`` of a tensor of probabilities draws the uniforms into a float32
temporary and compares them on the device (a kernel as costed as any elementwise
pass).  The values are not those PyTorch would draw.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kernbench.errors import OutOfMemoryError, TensorError
from kernbench.torch import random as torch_random
from kernbench.torch.arithmetic import check_pair, dense_as, free_temporaries
from kernbench.torch.dtypes import BOOL, DTYPE_OBJECTS
from kernbench.torch.special_kernels import launch_special_binary

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["TensorRandomFills", "bernoulli_of", "check_probabilities", "draw_into"]

_FLOAT32 = DTYPE_OBJECTS["float32"]
Draw = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def _uniform(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape, dtype=np.float32).astype(np.float64)


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32).astype(np.float64)


def draw_into(target: Tensor, what: str, draw: Draw, generator: Any = None) -> Tensor:
    """``draw(rng, shape)`` written into ``target`` (a host draw copied in through the
    fabric; through a temporary and the strided copy kernel when ``target`` is not one run
    of memory); in timing-only mode the copy runs with no values drawn."""
    rng = torch_random.resolve(generator)
    shape = tuple(target.shape)
    storage = target.storage_device_tensor
    if not target.numel():
        return target
    if storage.context.timing_only:
        values = np.broadcast_to(np.zeros((), np.float32), shape)
    else:
        try:
            values = draw(rng, shape)
        except MemoryError:
            raise OutOfMemoryError(
                f"{what}: drawing {math.prod(shape)} values for tensor {storage.name!r} ran "
                "out of host memory; run with --timing-only (sizes, not bytes) or use a "
                "smaller tensor"
            ) from None
    found = target.contiguous_device_tensor()
    if found is not None:
        found.copy_(values)
        return target
    temporary = target.new_empty(shape)
    temporary.device_tensor.copy_(values)
    target.copy_(temporary)
    temporary.free()
    return target


def _number(value: Any, what: str, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TensorError(f"{what}: {name} must be a number (as in torch), got {value!r}")
    return float(value)


def _floating(t: Tensor, what: str) -> None:
    if not t.dtype.is_floating_point:
        raise TensorError(
            f"{what} of {t.storage_device_tensor.name!r}: not implemented for {t.dtype!r} (as "
            "in torch, which fills floating tensors only); use random_() for integers"
        )


def check_probabilities(p: Tensor, what: str) -> None:
    """torch's check that every probability is in [0, 1], looked up in memory without the
    machine (no simulated time); timing-only runs carry no values and are not checked."""
    if p.numel() and not p.storage_device_tensor.context.timing_only:
        values = p.peek()
        if not ((values >= 0) & (values <= 1)).all():
            raise TensorError(f"{what}: expects all elements of p to be in [0, 1] (as in torch)")


def bernoulli_of(target: Tensor, p: Tensor, what: str, generator: Any) -> Tensor:
    """``target`` (its own shape and dtype) filled with 1 where a float32 uniform (the
    ``rand`` stream) is below ``p`` (broadcast to it), else 0: the uniforms drawn into a
    temporary, compared on the device."""
    if not p.dtype.is_floating_point:
        raise TensorError(
            f"{what}: the probabilities must be a floating tensor (as in torch), got "
            f"{p.dtype!r}; convert with .float()"
        )
    shape = check_pair(target, p, what, in_place=True)
    check_probabilities(p, what)
    uniforms = target.new_empty(shape, dtype=_FLOAT32)
    draw_into(uniforms, what, _uniform32, generator)
    probabilities, temps = dense_as(p, shape)
    direct = target.contiguous_device_tensor() is not None
    result = target if direct else target.new_empty(shape)
    if result.numel():
        launch_special_binary(
            "bernoulli", uniforms.device_tensor, probabilities.device_tensor, result.device_tensor
        )
    if result is not target:
        target.copy_(result)
        temps.append(result)
    free_temporaries(uniforms, *temps)
    return target


def _uniform32(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.random(shape, dtype=np.float32)


def _random_range(t: Tensor, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
    """[low, high) of ``random_()``, ``random_(to)`` or ``random_(from, to)``; ``to``
    None is the dtype's largest value, included (torch's ranges)."""
    what = f"random_ of {t.storage_device_tensor.name!r}"
    given = dict(kwargs)
    if "from_" in given:
        given["from"] = given.pop("from_")
    unknown = set(given) - {"from", "to"}
    if unknown or len(args) > 2:
        raise TensorError(
            f"{what}: takes random_(), random_(to) or random_(from, to=None), got "
            f"{len(args)} positional and {sorted(kwargs)} keyword arguments"
        )
    if len(args) == 1 and "from" not in given and "to" not in given:
        low, high = 0, args[0]
    else:
        names = ("from", "to")
        values = {**dict(zip(names, args, strict=False)), **given}
        low, high = values.get("from", 0), values.get("to")
    if t.dtype is BOOL:
        top = 1
    elif t.dtype.is_floating_point:
        top = 2 ** {"float64": 53, "float32": 24, "float16": 11, "bfloat16": 8}[t.dtype.name]
    else:
        top = int(np.iinfo(np.dtype(t.dtype.name)).max)
    bounds = []
    for name, value in (("from", low), ("to", high)):
        if value is None:
            bounds.append(None)
            continue
        try:
            bounds.append(operator.index(value) if not isinstance(value, bool) else None)
        except TypeError:
            bounds.append(None)
        if bounds[-1] is None:
            raise TensorError(f"{what}: {name} must be an int (as in torch), got {value!r}")
    low, high = bounds
    if high is None:
        high = top + 1  # the dtype's largest value included, as torch
    if not low < high:
        raise TensorError(
            f"{what}: random_ expects 'from' to be less than 'to', but got from={low} >= "
            f"to={high} (as in torch)"
        )
    floor = 0 if t.dtype is BOOL else -top - 1 if not t.dtype.is_floating_point else -top
    if t.dtype.name.startswith("uint"):
        floor = 0
    if low < floor or high - 1 > top:
        raise TensorError(
            f"{what}: [{low}, {high}) does not fit {t.dtype!r} ([{floor}, {top}]); pass "
            "bounds it holds"
        )
    return low, high


class TensorRandomFills:
    """Random fills in place (``normal_``, ``uniform_``, ...) and ``bernoulli``."""

    __slots__ = ()

    def normal_(self: Tensor, mean: Any = 0, std: Any = 1, *, generator: Any = None) -> Tensor:
        """Normal values of ``mean`` and ``std`` (``randn``'s stream, ``mean + std * z``)."""
        _floating(self, "normal_")
        m, s = _number(mean, "normal_", "mean"), _number(std, "normal_", "std")
        if not s >= 0:
            raise TensorError(f"normal_: normal expects std >= 0.0, but found std {std}")

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return m + s * _normal(rng, shape)

        return draw_into(self, "normal_", draw, generator)

    def uniform_(
        self: Tensor, from_: Any = 0, to: Any = 1, *, generator: Any = None, **kwargs: Any
    ) -> Tensor:
        """Uniform values in ``[from, to)`` (``rand``'s stream, ``from + (to - from) * u``);
        torch's keyword ``from`` is taken too (``uniform_(**{"from": a})``)."""
        if set(kwargs) - {"from"}:
            raise TensorError(
                f"uniform_: unexpected argument(s) {sorted(set(kwargs) - {'from'})}; it takes "
                "uniform_(from=0, to=1, *, generator=None)"
            )
        from_ = kwargs.get("from", from_)
        _floating(self, "uniform_")
        low, high = _number(from_, "uniform_", "from"), _number(to, "uniform_", "to")
        if not low <= high:
            raise TensorError(
                f"uniform_: uniform_ expects to return a [from, to) range, but found "
                f"from={from_} > to={to}"
            )

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return low + (high - low) * _uniform(rng, shape)

        return draw_into(self, "uniform_", draw, generator)

    def random_(self: Tensor, *args: Any, generator: Any = None, **kwargs: Any) -> Tensor:
        """Integers in ``[from, to)`` (``randint``'s stream): ``random_()`` spans the
        dtype (``[0, 2**mantissa]`` for floats), ``random_(to)`` is ``[0, to)``."""
        low, high = _random_range(self, args, kwargs)

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return rng.integers(low, high - 1, size=shape, dtype=np.int64, endpoint=True)

        return draw_into(self, "random_", draw, generator)

    def exponential_(self: Tensor, lambd: Any = 1, *, generator: Any = None) -> Tensor:
        """Exponential values of rate ``lambd``: ``-log(1 - u) / lambd`` (``rand``'s stream)."""
        _floating(self, "exponential_")
        rate = _number(lambd, "exponential_", "lambd")
        if not rate > 0:
            raise TensorError(
                f"exponential_: exponential_ expects lambda > 0.0, but found lambda={lambd}"
            )

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return -np.log1p(-_uniform(rng, shape)) / rate

        return draw_into(self, "exponential_", draw, generator)

    def geometric_(self: Tensor, p: Any, *, generator: Any = None) -> Tensor:
        """The number of Bernoulli(``p``) trials to the first success (1, 2, ...):
        ``floor(log(1 - u) / log(1 - p)) + 1`` (``rand``'s stream); any numeric dtype."""
        prob = _number(p, "geometric_", "p")
        if not 0 < prob < 1:
            raise TensorError(f"geometric_: geometric_ expects p to be in (0, 1), but got p={p}")
        if self.dtype is BOOL:
            raise TensorError("geometric_: not implemented for torch.bool (as in torch)")

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return np.floor(np.log1p(-_uniform(rng, shape)) / math.log1p(-prob)) + 1

        return draw_into(self, "geometric_", draw, generator)

    def log_normal_(self: Tensor, mean: Any = 1, std: Any = 2, *, generator: Any = None) -> Tensor:
        """``exp`` of normal values of ``mean`` and ``std`` (``randn``'s stream)."""
        _floating(self, "log_normal_")
        m, s = _number(mean, "log_normal_", "mean"), _number(std, "log_normal_", "std")
        if not s > 0:
            raise TensorError(f"log_normal_: log_normal_ expects std > 0.0, but found std={std}")

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return np.exp(m + s * _normal(rng, shape))

        return draw_into(self, "log_normal_", draw, generator)

    def cauchy_(self: Tensor, median: Any = 0, sigma: Any = 1, *, generator: Any = None) -> Tensor:
        """Cauchy values: ``median + sigma * tan(pi * (u - 1/2))`` (``rand``'s stream)."""
        _floating(self, "cauchy_")
        m, s = _number(median, "cauchy_", "median"), _number(sigma, "cauchy_", "sigma")
        if not s > 0:
            raise TensorError(f"cauchy_: cauchy_ expects sigma > 0.0, but found sigma={sigma}")

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return m + s * np.tan(np.pi * (_uniform(rng, shape) - 0.5))

        return draw_into(self, "cauchy_", draw, generator)

    def bernoulli_(self: Tensor, p: Any = 0.5, *, generator: Any = None) -> Tensor:
        """1 with probability ``p`` (a number, or a floating tensor broadcast to this one),
        else 0, in this tensor's dtype; ``u < p`` for ``rand``'s uniforms ``u``."""
        if hasattr(p, "storage_device_tensor"):
            return bernoulli_of(self, p, "bernoulli_", generator)
        prob = _number(p, "bernoulli_", "p")
        if not 0 <= prob <= 1:
            raise TensorError(f"bernoulli_: bernoulli_ expects p to be in [0, 1], but got p={p}")

        def draw(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
            return (rng.random(shape, dtype=np.float32) < np.float32(prob)).astype(np.float32)

        return draw_into(self, "bernoulli_", draw, generator)

    def bernoulli(self: Tensor, p: Any = None, *, generator: Any = None) -> Tensor:
        """A new tensor of this one's shape and dtype: 1 with probability ``p`` (a number),
        or with this tensor's values as the probabilities when ``p`` is None."""
        out = self.new_empty(self.shape)
        if p is None:
            if not self.dtype.is_floating_point:
                out.free()
                raise TensorError(
                    f"bernoulli of {self.storage_device_tensor.name!r}: the probabilities must "
                    f"be a floating tensor (as in torch), got {self.dtype!r}"
                )
            try:
                return bernoulli_of(out, self, "bernoulli", generator)
            except TensorError:
                out.free()
                raise
        try:
            return out.bernoulli_(p, generator=generator)
        except TensorError:
            out.free()
            raise
