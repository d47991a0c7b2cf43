"""``@jit`` kernels, their launches and the pluggable launcher.

``kernel[grid](*args, **meta)`` binds the arguments (NumPy arrays become
:class:`ArrayBuffer` objects named after their parameter), builds the grid
(:class:`~kernbench.kernels.grid.Grid`, which also says in what order programs
run and which core each belongs to) and hands a frozen :class:`KernelLaunch` to
the current *launcher*. The default launcher, :func:`run_on_host`, runs every
program with the :class:`Interpreter` and returns a :class:`LaunchRecord`; a
caller installs its own launcher (``set_launcher`` / ``use_launcher``) to run
programs elsewhere, calling ``launch.run_program(pid, recorder)`` for the
programs each executor owns.

With the default launcher, an argument of a type registered with
:func:`register_argument_launcher` claims the launch: the kernel layer's device
module registers the runtime's device tensors that way, so a kernel on device
tensors runs on the simulated machine.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels import language as tl
from kernbench.kernels.grid import Grid
from kernbench.kernels.interpreter import (
    ArrayBuffer,
    Interpreter,
    LaunchRecord,
    ProgramCounts,
    ProgramRecorder,
)
from kernbench.kernels.program import current_program

__all__ = [
    "ArgumentLauncher",
    "JITFunction",
    "KernelLaunch",
    "Launcher",
    "argument_launcher",
    "get_launcher",
    "jit",
    "register_argument_launcher",
    "reset_launcher",
    "run_on_host",
    "set_launcher",
    "use_launcher",
]

# Launch keywords Triton accepts that mean nothing to the interpreter; kept in
# ``KernelLaunch.options`` for whoever wants them.  The second row are backend
# options a ``triton.Config`` may carry (the AMD ones appear in Triton's tutorials);
# ``extern_libs`` names libdevice files, which are built in here (the libdevice
# tutorial passes it).
LAUNCH_OPTIONS = frozenset(
    {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "debug", "stream"}
    | {"ir_override", "matrix_instr_nonkdim", "waves_per_eu", "kpack", "launch_pdl"}
    | {"extern_libs"}
)


@dataclass(frozen=True, slots=True)
class KernelLaunch:
    """One launch, ready to run: the kernel, its grid and its bound arguments."""

    kernel: JITFunction
    grid: Grid
    args: tuple[Any, ...]  # run-time arguments, in parameter order (buffers wrapped)
    meta: Mapping[str, Any]  # constexpr meta-parameters by name
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    # How an address the kernel loads becomes a pointer (the device layer sets it per PE;
    # see ``ProgramState.address_space``).
    address_space: Any = None

    @property
    def arguments(self) -> Mapping[str, Any]:
        """Every parameter by name: what the kernel function is called with.

        Run-time numbers are typed blocks (:func:`~kernbench.kernels.language.runtime_scalar`);
        meta-parameters are the plain values.
        """
        values = {
            name: self.kernel.runtime_value(name, value)
            for name, value in zip(self.kernel.runtime_params, self.args, strict=True)
        }
        values.update(self.meta)
        return MappingProxyType(values)

    def run_program(
        self, pid: tuple[int, ...], recorder: ProgramRecorder | None = None
    ) -> ProgramCounts:
        """Run one program on the host; an executor calls this for the programs it owns."""
        return Interpreter().run_program(self, pid, recorder)

    def run(self) -> LaunchRecord:
        return Interpreter().run(self)


Launcher = Callable[[KernelLaunch], Any]


def run_on_host(launch: KernelLaunch) -> LaunchRecord:
    """The default launcher: every program in order, on the host."""
    return Interpreter().run(launch)


_LAUNCHER: ContextVar[Launcher] = ContextVar("kernbench_kernel_launcher", default=run_on_host)


def get_launcher() -> Launcher:
    return _LAUNCHER.get()


def set_launcher(launcher: Launcher) -> Token[Launcher]:
    """Route ``kernel[grid](...)`` to ``launcher``; ``reset_launcher(token)`` undoes it."""
    if not callable(launcher):
        raise KernelError(f"a launcher must be callable with a KernelLaunch, got {launcher!r}")
    return _LAUNCHER.set(launcher)


def reset_launcher(token: Token[Launcher]) -> None:
    _LAUNCHER.reset(token)


@contextmanager
def use_launcher(launcher: Launcher):
    token = set_launcher(launcher)
    try:
        yield launcher
    finally:
        reset_launcher(token)


#: Runs a launch that one of its arguments claimed: ``(argument, launch) -> result``.
ArgumentLauncher = Callable[[Any, "KernelLaunch"], Any]

_ARGUMENT_LAUNCHERS: dict[type, ArgumentLauncher] = {}


def register_argument_launcher(argument_type: type, launcher: ArgumentLauncher) -> None:
    """Let arguments of ``argument_type`` (and its subclasses) claim launches.

    Under the default launcher, ``kernel[grid](...)`` with such an argument
    returns ``launcher(argument, launch)`` instead of running on the host.
    Registering a type again replaces its launcher.
    """
    if not isinstance(argument_type, type):
        raise KernelError(f"an argument launcher is registered for a type, got {argument_type!r}")
    if not callable(launcher):
        raise KernelError(
            f"an argument launcher must be callable with (argument, launch), got {launcher!r}"
        )
    _ARGUMENT_LAUNCHERS[argument_type] = launcher


def argument_launcher(value: Any) -> ArgumentLauncher | None:
    """The launcher registered for ``value``'s type or its nearest base, if any."""
    for cls in type(value).__mro__:
        launcher = _ARGUMENT_LAUNCHERS.get(cls)
        if launcher is not None:
            return launcher
    return None


def _is_constexpr(annotation: Any) -> bool:
    if annotation is tl.constexpr:
        return True
    return isinstance(annotation, str) and annotation.rpartition(".")[2] == "constexpr"


#: Argument types a kernel receives unchanged (checked first: most arguments are numbers).
_PLAIN_VALUES = frozenset({int, float, bool, str, type(None)})


class JITFunction:
    """A kernel: launch it with ``kernel[grid](*args, **meta)``."""

    def __init__(self, fn: Callable[..., Any], do_not_specialize: Any = ()) -> None:
        self.fn = fn
        self.name = fn.__name__
        self.signature = inspect.signature(fn)
        for p in self.signature.parameters.values():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise KernelError(f"kernel {self.name!r}: *args and **kwargs are not supported")
        self.params = tuple(self.signature.parameters)
        self.constexprs = frozenset(
            n for n, p in self.signature.parameters.items() if _is_constexpr(p.annotation)
        )
        self.runtime_params = tuple(n for n in self.params if n not in self.constexprs)
        parameters = self.signature.parameters.values()
        self._plain = all(p.kind is p.POSITIONAL_OR_KEYWORD for p in parameters)
        self._defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
        self.do_not_specialize = frozenset(self._unspecialized(do_not_specialize))
        functools.update_wrapper(self, fn)

    def _unspecialized(self, entries: Any) -> list[str]:
        """``do_not_specialize``'s parameter names, from names or positions."""
        if isinstance(entries, str | int):
            entries = [entries]
        names = []
        for entry in entries:
            if isinstance(entry, int) and not isinstance(entry, bool):
                if not -len(self.params) <= entry < len(self.params):
                    raise KernelError(
                        f"kernel {self.name!r}: do_not_specialize position {entry} is past "
                        f"its {len(self.params)} parameters ({', '.join(self.params)})"
                    )
                names.append(self.params[entry])
            elif isinstance(entry, str) and entry in self.params:
                names.append(entry)
            else:
                raise KernelError(
                    f"kernel {self.name!r}: do_not_specialize names {entry!r}, not one of its "
                    f"parameters; valid: {', '.join(self.params)} or their positions"
                )
        return names

    def __repr__(self) -> str:
        return f"JITFunction({self.name})"

    def __getitem__(self, grid: Any) -> Callable[..., Any]:
        return functools.partial(self.launch, grid)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if current_program() is None:
            raise KernelError(f"kernel {self.name!r}: launch it with {self.name}[grid](...)")
        return self.fn(*args, **kwargs)  # a device function called from another kernel

    def prepare(self, grid: Any, *args: Any, **kwargs: Any) -> KernelLaunch:
        """Bind arguments and build the grid (``grid``: a spec or a callable of the meta dict)."""
        options = {k: kwargs.pop(k) for k in LAUNCH_OPTIONS & kwargs.keys() if k not in self.params}
        try:
            arguments = self._bind(args, kwargs)
        except TypeError as exc:
            raise KernelError(
                f"kernel {self.name!r}: {exc}; its parameters are {', '.join(self.params)}"
            ) from None
        values = {name: self._kernel_value(name, v) for name, v in arguments.items()}
        if callable(grid):
            _check_grid_callable(grid, self.name)
        spec = grid(MappingProxyType(values)) if callable(grid) else grid
        return KernelLaunch(
            kernel=self,
            grid=Grid.from_spec(spec, self.name),
            args=tuple(values[n] for n in self.runtime_params),
            meta=MappingProxyType({n: values[n] for n in self.params if n in self.constexprs}),
            options=MappingProxyType(options),
        )

    def launch(self, grid: Any, *args: Any, **kwargs: Any) -> Any:
        """Prepare a launch and hand it to the current launcher; return what it returns.

        With the default launcher, the first argument whose type has an
        :func:`argument_launcher` (a device tensor) claims the launch, so kernels
        on device tensors run on the simulated machine.
        """
        launch = self.prepare(grid, *args, **kwargs)
        launcher = get_launcher()
        if launcher is run_on_host:
            for value in launch.args:
                claim = argument_launcher(value)
                if claim is not None:
                    return claim(value, launch)
        return launcher(launch)

    def run_program(
        self,
        pid: tuple[int, ...],
        args: tuple[Any, ...],
        meta: Mapping[str, Any],
        recorder: ProgramRecorder | None = None,
        *,
        grid: Any,
    ) -> ProgramCounts:
        """Run just program ``pid`` of ``self[grid](*args, **meta)`` on the host."""
        return self.prepare(grid, *args, **meta).run_program(pid, recorder)

    def runtime_value(self, name: str, value: Any) -> Any:
        """Run-time argument ``name`` as the kernel function receives it."""
        if type(value) is int and not -(2**63) <= value < 2**64:
            raise KernelError(
                f"kernel {self.name!r}: argument {name}={value} does not fit in 64 bits "
                "(Triton's launcher passes integers as int32, int64 or uint64)"
            )
        return tl.runtime_scalar(value, specialize=name not in self.do_not_specialize)

    def _bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """Every argument by parameter name, in parameter order, defaults applied: what
        ``signature.bind`` and ``apply_defaults`` give, without their cost (tens of
        microseconds a launch) when the parameters are plain and the call fits them."""
        if self._plain and len(args) <= len(self.params):
            values = dict(zip(self.params, args, strict=False))
            if all(k not in values and k in self.signature.parameters for k in kwargs):
                values.update(kwargs)
                if all(n in values or n in self._defaults for n in self.params):
                    return {n: values[n] if n in values else self._defaults[n] for n in self.params}
        bound = self.signature.bind(*args, **kwargs)  # refuses the call, saying why
        bound.apply_defaults()
        return dict(bound.arguments)

    @staticmethod
    def _kernel_value(name: str, value: Any) -> Any:
        if type(value) in _PLAIN_VALUES:
            return value
        if isinstance(value, tl.constexpr):
            return value.value
        unwrap = getattr(type(value), "__kernel_arg__", None)
        if unwrap is not None:  # a wrapper (a torch-like tensor) passes what it wraps
            value = unwrap(value)
        if isinstance(value, np.ndarray):
            return ArrayBuffer(name, value)
        return value


def jit(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Make ``fn`` a kernel; ``@jit`` and ``@jit(...)`` both work.

    ``do_not_specialize`` (names or positions) keeps an argument equal to 1 a typed
    int32 instead of a constant, as in Triton; other options are ignored.
    """

    def wrap(f: Callable[..., Any]) -> JITFunction:
        return JITFunction(f, options.get("do_not_specialize", ()))

    return wrap if fn is None else wrap(fn)


def _check_grid_callable(grid: Callable[..., Any], name: str) -> None:
    """A grid callable takes one argument, the meta-parameters (``lambda meta: (...)``)."""
    try:
        inspect.signature(grid).bind(MappingProxyType({}))
    except ValueError:  # no signature to read (a builtin): let the call say
        return
    except TypeError:
        raise KernelError(
            f"kernel {name!r}: the grid callable must take one argument, the dict of "
            f"meta-parameters, as in Triton (kernel[lambda meta: (n // meta['BLOCK'],)]); "
            f"got {grid!r}"
        ) from None
