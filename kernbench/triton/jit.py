"""``triton.jit`` and the kernel interface ``autotune`` and ``heuristics`` wrap.

A :class:`JITFunction` here is the kernel layer's ``@jit`` kernel
(:class:`kernbench.kernels.jit.JITFunction`: ``kernel[grid](...)`` runs on the
simulated machine when an argument is a device tensor) with the rest of
Triton's kernel face:

* ``run(*args, grid=..., warmup=False, **kwargs)``, what ``kernel[grid](...)``
  calls in Triton and what wrappers (``Autotuner``, ``Heuristics``) call on
  the kernel they wrap;
* ``warmup(*args, grid=..., **kwargs)``, which compiles without running
  (:mod:`kernbench.triton.compiled`);
* ``arg_names``, the parameter names in order.

``jit`` accepts Triton's decorator keywords and refuses others; only
``do_not_specialize`` changes anything here (an argument equal to 1 stays a
typed int32 instead of a constant), the rest (``debug``, ``noinline`` ...) are
ignored.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import KernelError
from kernbench.kernels.jit import JITFunction as KernelJITFunction
from kernbench.triton.compiled import CompiledKernel, compile_kernel

__all__ = [
    "JIT_OPTIONS",
    "JITFunction",
    "KernelInterface",
    "arg_names_of",
    "base_name",
    "jit",
    "run_kernel",
]

#: Keywords ``triton.jit`` takes; only ``do_not_specialize`` changes what a kernel does here.
JIT_OPTIONS = frozenset(
    {
        "version",
        "repr",
        "launch_metadata",
        "do_not_specialize",
        "do_not_specialize_on_alignment",
        "debug",
        "noinline",
    }
)


class KernelInterface:
    """Something launched as ``kernel[grid](*args, **kwargs)``; subclasses define ``run``."""

    arg_names: list[str]

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        raise NotImplementedError

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)


def run_kernel(fn: Any, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any]) -> Any:
    """Launch ``fn[grid](*args, **kwargs)``: a wrapper's ``run`` or a kernel-layer kernel."""
    if isinstance(fn, KernelInterface | JITFunction):
        return fn.run(*args, grid=grid, **kwargs)
    if isinstance(fn, KernelJITFunction):
        return fn.launch(grid, *args, **kwargs)
    raise KernelError(
        f"{getattr(fn, '__name__', fn)!r} is not a kernel; decorate it with @triton.jit"
    )


def arg_names_of(fn: Any) -> list[str]:
    """The parameter names of a kernel or of the kernel a wrapper wraps."""
    names = getattr(fn, "arg_names", None)
    if names is None and isinstance(fn, KernelJITFunction):
        names = fn.params
    if names is None:
        raise KernelError(
            f"{getattr(fn, '__name__', fn)!r} is not a kernel; decorate it with @triton.jit"
        )
    return list(names)


def base_name(fn: Any) -> str:
    """The name of the kernel under any wrappers."""
    while not hasattr(fn, "name") and hasattr(fn, "fn"):
        fn = fn.fn
    return getattr(fn, "name", getattr(fn, "__name__", repr(fn)))


class JITFunction(KernelJITFunction):
    """A ``@triton.jit`` kernel: ``kernel[grid](...)``, ``run``, ``warmup``, ``arg_names``."""

    @property
    def arg_names(self) -> list[str]:
        return list(self.params)

    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch on ``grid`` (or, with ``warmup=True``, only compile); Triton's entry point."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        return self.launch(grid, *args, **kwargs)

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> CompiledKernel:
        """Compile for these arguments without running on the machine (no simulated time)."""
        return compile_kernel(self, grid, args, kwargs)


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Make ``fn`` a kernel; ``@triton.jit`` and ``@triton.jit(...)`` both work."""
    unknown = sorted(options.keys() - JIT_OPTIONS)
    if unknown:
        raise KernelError(
            f"triton.jit got unexpected keyword(s) {', '.join(unknown)}; "
            f"valid: {', '.join(sorted(JIT_OPTIONS))}"
        )

    def wrap(f: Callable[..., Any]) -> JITFunction:
        if not callable(f):
            raise KernelError(f"triton.jit decorates a function, got {f!r}")
        return JITFunction(f, options.get("do_not_specialize", ()))

    return wrap if fn is None else wrap(fn)
