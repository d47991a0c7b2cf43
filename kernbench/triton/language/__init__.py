"""``import kernbench.triton.language as tl``: the kernel language under Triton's module name.

Everything of :mod:`kernbench.kernels.language` (``program_id``, ``arange``,
``load``, ``store``, ``dot``, reductions, math, dtypes, ``constexpr``...) plus
the loop and hint helpers the Triton tutorials use:

* ``tl.range(start, stop, step, num_stages=None, loop_unroll_factor=None, ...)``
  and ``tl.static_range(start, stop, step)`` are Python ranges here.  Programs
  run one at a time in the interpreter, so there is no software pipeline to
  build: ``num_stages``, ``loop_unroll_factor``, ``disallow_acc_multi_buffer``,
  ``flatten``, ``warp_specialize`` and ``disable_licm`` are accepted and change
  neither the values nor the simulated time.  Bounds may be scalar blocks
  (``tl.program_id(0)``, ``tl.num_programs(0)``).
* ``tl.assume(cond)`` is a compiler hint; it returns ``None`` and checks nothing.
* ``tl.rand``, ``tl.randn``, ``tl.randint`` (and their ``4x`` forms,
  ``tl.philox``, ``tl.uint_to_uniform_float``, ``tl.pair_uniform_to_normal``)
  are Triton's Philox random numbers (:mod:`kernbench.triton.random`).
* ``tl.math`` is Triton's math module: ``tl.math.exp2`` is ``tl.exp2``, and so
  on for the math functions the language has (the fused-attention tutorial
  writes ``tl.math.exp2`` and ``tl.math.log2``).
* ``tl.extra.libdevice`` (``from kernbench.triton.language.extra import
  libdevice``) is Triton's libdevice: ``asin``, ``atan2``, ``tanh``, ``pow`` ...
  (:mod:`kernbench.kernels.libdevice`).
"""

from __future__ import annotations

import builtins
import operator
import types
from typing import Any

from kernbench.errors import KernelError, unsupported_name
from kernbench.kernels.language import *  # noqa: F403 - this module is that language, re-exported
from kernbench.kernels.language import __all__ as _kernel_language_names
from kernbench.kernels.language import constexpr as _constexpr
from kernbench.triton.language import extra  # tl.extra.libdevice, as Triton has it
from kernbench.triton.random import *  # noqa: F403 - Philox random numbers, as tl has them
from kernbench.triton.random import __all__ as _random_names

__all__ = [
    *_kernel_language_names,
    *_random_names,
    "assume",
    "extra",
    "math",
    "range",
    "static_range",
]


def _bound(value: Any, what: str) -> int:
    if isinstance(value, _constexpr):
        value = value.value
    try:
        return operator.index(value)
    except TypeError:
        raise KernelError(
            f"{what} must be an integer (or an integer scalar block), got {value!r}"
        ) from None


class range:  # noqa: N801, A001 - Triton's name
    """``tl.range``: iterate ``start, start + step, ... < stop`` (a Python range here)."""

    def __init__(
        self,
        arg1: Any,
        arg2: Any = None,
        step: Any = None,
        num_stages: int | None = None,
        loop_unroll_factor: int | None = None,
        disallow_acc_multi_buffer: bool = False,
        flatten: bool = False,
        warp_specialize: bool = False,
        disable_licm: bool = False,
    ) -> None:
        if arg2 is None:
            start, stop = 0, _bound(arg1, "tl.range stop")
        else:
            start, stop = _bound(arg1, "tl.range start"), _bound(arg2, "tl.range stop")
        step = 1 if step is None else _bound(step, "tl.range step")
        if step == 0:
            raise KernelError("tl.range step must not be zero")
        self._range = builtins.range(start, stop, step)
        self.num_stages = num_stages
        self.loop_unroll_factor = loop_unroll_factor

    def __iter__(self):
        return iter(self._range)

    def __len__(self) -> int:
        return len(self._range)

    def __repr__(self) -> str:
        r = self._range
        return f"tl.range({r.start}, {r.stop}, {r.step})"


class static_range(range):  # noqa: N801 - Triton's name
    """``tl.static_range``: a range Triton unrolls at compile time (a Python range here)."""

    def __init__(self, arg1: Any, arg2: Any = None, step: Any = None) -> None:
        super().__init__(arg1, arg2, step)

    def __repr__(self) -> str:
        r = self._range
        return f"tl.static_range({r.start}, {r.stop}, {r.step})"


def assume(cond: Any) -> None:
    """A compiler hint about a value (``tl.assume(stride > 0)``); nothing to do here."""


_NOT_IN_LANGUAGE = "not in KernBench's kernel language (README, Triton support, lists it)"
_HINTS = {
    "argmax": "tl.max(x, axis, return_indices=True), which returns (values, indices)",
    "argmin": "tl.min(x, axis, return_indices=True), which returns (values, indices)",
    **dict.fromkeys(("histogram", "reduce", "gather", "flip"), _NOT_IN_LANGUAGE),
    "make_tensor_descriptor": "tl.make_block_ptr (block pointers), or pointer arithmetic "
    "(ptr + offsets) with masks",
    **dict.fromkeys(
        ("device_print", "static_print"),
        "print() runs as Python in the interpreter (tl.static_assert, tl.device_assert exist)",
    ),
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.triton.language", "tl", name, __all__, _HINTS)


_MATH_NAMES = (
    "abs",
    "ceil",
    "cos",
    "erf",
    "exp",
    "exp2",
    "floor",
    "log",
    "log2",
    "rsqrt",
    "sin",
    "sqrt",
)


def _math_getattr(name: str) -> Any:
    raise unsupported_name(
        "kernbench.triton.language.math",
        "tl.math",
        name,
        _MATH_NAMES,
        dict.fromkeys(("fma", "umulhi", "fdiv", "div_rn", "sqrt_rn"), _NOT_IN_LANGUAGE),
    )


math = types.ModuleType(
    "kernbench.triton.language.math",
    "``tl.math``: the math functions of the kernel language under Triton's module name.",
)
math.__dict__.update({name: globals()[name] for name in _MATH_NAMES})
math.__dict__["__all__"] = list(_MATH_NAMES)
math.__dict__["__getattr__"] = _math_getattr
