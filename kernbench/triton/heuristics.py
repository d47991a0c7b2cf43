"""``triton.heuristics``: meta-parameters computed from a launch's arguments."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kernbench.errors import KernelError
from kernbench.triton.jit import KernelInterface, arg_names_of, base_name, run_kernel

__all__ = ["Heuristics", "heuristics"]


class Heuristics(KernelInterface):
    """A kernel whose listed meta-parameters are computed from the other arguments."""

    def __init__(self, fn: Any, arg_names: list[str], values: Mapping[str, Callable]) -> None:
        self.fn = fn
        self.name = base_name(fn)
        self.arg_names = list(arg_names)
        self.values = dict(values)
        for name, rule in self.values.items():
            if not callable(rule):
                raise KernelError(
                    f"heuristics of {self.name!r}: the rule for {name!r} must be a function "
                    f"of the arguments dict, got {rule!r}"
                )

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        for name, rule in self.values.items():
            kwargs[name] = rule({**dict(zip(self.arg_names, args, strict=False)), **kwargs})
        if warmup:
            return self.fn.warmup(*args, grid=grid, **kwargs)
        return run_kernel(self.fn, args, grid, kwargs)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> Any:
        return self.run(*args, grid=grid, warmup=True, **kwargs)


def heuristics(values: Mapping[str, Callable[[dict[str, Any]], Any]]) -> Callable[[Any], Any]:
    """Decorate a kernel so ``values[name](args)`` sets meta-parameter ``name`` at each launch."""

    def decorator(fn: Any) -> Heuristics:
        return Heuristics(fn, arg_names_of(fn), values)

    return decorator
