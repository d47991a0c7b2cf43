"""Compile-and-load for ``@jit`` kernels, with NKIPy's SPMD / MPMD / no-CC modes.

``DeviceKernel.compile_and_load(kernel, *inputs, **meta)`` "compiles" a kernel
for one input signature: it binds the inputs as
:class:`~kernbench.kernels.interpreter.ShapeOnlyBuffer` objects, runs program 0
of the grid in timing-only mode to check that it runs, and writes an artifact
``<root>/<content_hash>/kernel.json`` (kernel name, hash, input signature,
meta-parameters, grid and what the traced program did). The returned
:class:`DeviceKernel` launches ``kernel[grid](*inputs, **meta)`` through the
current launcher when called with inputs of the same signature.

Tensor inputs are NumPy arrays or anything with ``.shape`` and ``.dtype``
(a ``.dtype.storage`` NumPy dtype if it has one) and optionally ``.numel``;
every other input is a scalar, and its value is part of the signature. Pass
tensors positionally; ``**meta`` holds constexprs and scalars. ``grid`` is a
launch spec or a callable of the meta dict, as in ``kernel[grid]``; without one
the kernel runs as a single program.

Content hash: SHA-256 over the kernel's source text (``inspect.getsource``;
device functions it calls are not included), module and name, the input
signature, meta-parameters, launch options and the launch grid. Like NKIPy it
does not depend on the CC mode. The in-memory cache is keyed by the artifact
directory and the hash, so MPMD ranks simulated in one process each keep
their own entry; ``use_cached_if_exists=False`` recompiles.

Modes (``DeviceKernel.mode``):

* ``"no_cc"`` -- ``cc_enabled=False``, or ``None`` with no process group and no
  explicit ``rank_id``/``world_size``. Compiles locally into ``<build_dir>``.
  The process group is what the registered rank provider reports
  (:mod:`kernbench.kernels.ranks`; ``kernbench.torch.distributed`` registers
  one); without a provider there is none.
* ``"spmd"`` -- ``is_spmd=True`` with CC on and a process group: rank 0
  compiles, every rank then enters the group's barrier, and the other ranks
  load rank 0's artifact from the shared ``<build_dir>``. Explicit
  ``rank_id``/``world_size`` without a process group cannot be SPMD, since
  there is nothing to wait on: that is an error asking for ``is_spmd=False``.
* ``"mpmd"`` -- ``is_spmd=False`` with CC on: every rank compiles into
  ``<build_dir>/rank_<r>/``, ``r`` being ``rank_id`` or the group rank.

``build_dir`` defaults to one temporary directory per process, removed at exit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import operator
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

import numpy as np

import kernbench.kernels.language as tl
from kernbench.errors import KernelError
from kernbench.files import RESULTS_LIMIT, read_text, write_text
from kernbench.kernels.grid import Grid
from kernbench.kernels.interpreter import ShapeOnlyBuffer
from kernbench.kernels.jit import JITFunction
from kernbench.kernels.ranks import distributed_state

__all__ = ["CompileStats", "DeviceKernel", "clear_cache", "shape_only_inputs"]

ARTIFACT_FORMAT = "kernbench-kernel/1"
ARTIFACT_NAME = "kernel.json"


@dataclass(frozen=True, slots=True)
class CompileStats:
    """Counters since the last :func:`clear_cache`."""

    compilations: int  # traces run and artifacts written
    cache_hits: int  # compile_and_load answered from the in-memory cache
    loads: int  # SPMD ranks other than 0 that loaded rank 0's artifact


@dataclass
class _Counters:
    compilations: int = 0
    cache_hits: int = 0
    loads: int = 0


_CACHE: dict[tuple[str, str], dict[str, Any]] = {}  # (artifact root, hash) -> artifact
_COUNTERS = _Counters()
_DEFAULT_BUILD_DIR: tempfile.TemporaryDirectory[str] | None = None


def clear_cache() -> None:
    """Forget every compiled kernel and reset the counters (files stay on disk)."""
    _CACHE.clear()
    _COUNTERS.compilations = _COUNTERS.cache_hits = _COUNTERS.loads = 0


def _default_build_dir() -> Path:
    global _DEFAULT_BUILD_DIR
    if _DEFAULT_BUILD_DIR is None:
        _DEFAULT_BUILD_DIR = tempfile.TemporaryDirectory(prefix="kernbench-kernels-")
    return Path(_DEFAULT_BUILD_DIR.name)


# ----------------------------------------------------------------------------- signatures


@dataclass(frozen=True, slots=True)
class _TensorSpec:
    shape: tuple[int, ...]
    dtype_name: str  # the tensor's own dtype name ("bfloat16" for a device bf16 tensor)
    storage: np.dtype  # what a kernel buffer over it holds
    numel: int

    def as_json(self, param: str) -> dict[str, Any]:
        return {
            "param": param,
            "kind": "tensor",
            "shape": list(self.shape),
            "dtype": self.dtype_name,
        }


def _is_tensor(value: Any) -> bool:
    if isinstance(value, np.generic):  # NumPy scalars have a shape and a dtype too
        return False
    return isinstance(value, np.ndarray) or (hasattr(value, "shape") and hasattr(value, "dtype"))


def _tensor_spec(value: Any, param: str, kernel: str) -> _TensorSpec:
    unwrap = getattr(type(value), "__kernel_arg__", None)
    if unwrap is not None:  # a torch-like tensor: describe the device tensor it wraps
        value = unwrap(value)
    try:
        shape = tuple(int(d) for d in value.shape)
        dt = value.dtype
        storage = np.dtype(getattr(dt, "storage", dt))
    except (TypeError, ValueError) as exc:
        raise KernelError(
            f"kernel {kernel!r}: argument {param!r} looks like a tensor but its shape or "
            f"dtype is not usable ({exc})"
        ) from None
    name = getattr(dt, "name", None)
    numel = getattr(value, "numel", None)
    if callable(numel):
        numel = numel()
    if isinstance(value, np.ndarray) or numel is None:
        numel = int(np.prod(shape, dtype=np.int64))
    return _TensorSpec(shape, name if isinstance(name, str) else str(storage), storage, int(numel))


def _canonical(value: Any) -> Any:
    """A JSON value standing for ``value`` in the hash and the artifact."""
    if isinstance(value, tl.constexpr):
        value = value.value
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tl.dtype):
        return f"tl.{value.name}"
    if isinstance(value, tuple | list):
        return [_canonical(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    return repr(value)


def _kernel_source(kernel: JITFunction) -> str:
    try:
        return inspect.getsource(kernel.fn)
    except (OSError, TypeError):  # defined where no source file exists (a REPL)
        code = kernel.fn.__code__
        return f"<bytecode {code.co_code.hex()} consts {code.co_consts!r}>"


def _grid_json(grid: Grid) -> dict[str, Any]:
    return {"dims": list(grid.dims), "spmd_axis": grid.spmd_axis, "num_cores": grid.num_cores}


def _content_hash(kernel: JITFunction, payload: Mapping[str, Any]) -> str:
    keyed = {
        "format": ARTIFACT_FORMAT,
        "source": _kernel_source(kernel),
        "module": getattr(kernel.fn, "__module__", None),
        "qualname": getattr(kernel.fn, "__qualname__", kernel.name),
        **payload,
    }
    text = json.dumps(keyed, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def shape_only_inputs(fn: JITFunction, inputs: Sequence[Any]) -> tuple[Any, ...]:
    """``inputs`` with each tensor replaced by a :class:`ShapeOnlyBuffer` of its size and dtype.

    A kernel run on them sees the tensors' sizes and dtypes, touches no bytes
    and costs no simulated time: what a trace (or a Triton ``warmup``) runs.
    Tensors are matched to parameters by position.
    """
    if len(inputs) > len(fn.params):
        raise KernelError(
            f"kernel {fn.name!r} takes {len(fn.params)} parameters "
            f"({', '.join(fn.params)}), got {len(inputs)} inputs"
        )
    traced = []
    for param, value in zip(fn.params, inputs, strict=False):
        if _is_tensor(value):
            spec = _tensor_spec(value, param, fn.name)
            value = ShapeOnlyBuffer(param, spec.storage, spec.numel)
        traced.append(value)
    return tuple(traced)


# ----------------------------------------------------------------------------- modes


def _optional_int(value: Any, what: str, kernel: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise KernelError(f"kernel {kernel!r}: {what} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise KernelError(f"kernel {kernel!r}: {what} must be an integer, got {value!r}") from None


class _CompileMode(NamedTuple):
    """The mode a kernel is compiled in, with the rank and barrier that mode uses."""

    mode: str
    cc_enabled: bool
    rank: int | None
    world_size: int | None
    barrier: Callable[[], Any] | None


def _choose_mode(
    kernel: str,
    is_spmd: bool,
    cc_enabled: bool | None,
    rank_id: Any,
    world_size: Any,
) -> _CompileMode:
    rank = _optional_int(rank_id, "rank_id", kernel)
    world = _optional_int(world_size, "world_size", kernel)
    if (rank is None) != (world is None):
        given, missing = ("rank_id", "world_size") if world is None else ("world_size", "rank_id")
        raise KernelError(
            f"kernel {kernel!r}: {given} was given without {missing}; pass both or neither"
        )
    explicit = rank is not None
    if explicit and world is not None:
        if world <= 0:
            raise KernelError(f"kernel {kernel!r}: world_size must be positive, got {world}")
        if not 0 <= rank < world:
            raise KernelError(
                f"kernel {kernel!r}: rank_id {rank} is out of range for world_size {world}; "
                f"valid: 0..{world - 1}"
            )
    if cc_enabled is not None and not isinstance(cc_enabled, bool):
        raise KernelError(f"kernel {kernel!r}: cc_enabled must be None, True or False")
    if cc_enabled is False:
        return _CompileMode("no_cc", False, rank, world, None)
    state = distributed_state()
    if cc_enabled is None and not (state.initialized or explicit):
        return _CompileMode("no_cc", False, None, None, None)
    if not explicit:
        if not state.initialized:
            raise KernelError(
                f"kernel {kernel!r}: cc_enabled=True needs rank_id and world_size, or an "
                "initialised process group"
            )
        rank, world = state.rank, state.world_size
    if not is_spmd:
        return _CompileMode("mpmd", True, rank, world, None)
    if not state.initialized:
        raise KernelError(
            f"kernel {kernel!r}: explicit rank_id/world_size without an initialised process "
            "group needs is_spmd=False (MPMD: every rank compiles); SPMD needs the process "
            "group's barrier so other ranks can load rank 0's artifact"
        )
    return _CompileMode("spmd", True, rank, world, state.barrier)


# ----------------------------------------------------------------------------- artifacts


def _write_artifact(path: Path, artifact: Mapping[str, Any]) -> None:
    # Atomic (readers never see a half-written file), and only over a regular file: a
    # build directory is the user's, and a link or FIFO planted in it is not written through.
    text = json.dumps(artifact, indent=2, sort_keys=True) + "\n"
    write_text(path, text, what="kernel artifact")


def _read_artifact(path: Path, kernel: str, content_hash: str) -> dict[str, Any]:
    if not os.path.lexists(path):
        raise KernelError(
            f"kernel {kernel!r}: rank 0's artifact {path} does not exist after the barrier; "
            "SPMD ranks must share build_dir and launch the same kernel and input shapes"
        )
    # Bounded and regular-file-only (a FIFO would block the rank forever).
    text = read_text(path, what=f"kernel {kernel!r}'s artifact", limit=RESULTS_LIMIT)
    try:
        artifact = json.loads(text)
    except (ValueError, RecursionError):
        artifact = None
    if not isinstance(artifact, dict):
        raise KernelError(f"kernel {kernel!r}: artifact {path} is not a kernel artifact")
    if artifact.get("content_hash") != content_hash or artifact.get("kernel") != kernel:
        raise KernelError(f"kernel {kernel!r}: artifact {path} belongs to another kernel")
    return artifact


# ----------------------------------------------------------------------------- the kernel


class DeviceKernel:
    """A compiled kernel bound to one input signature; call it with inputs of that signature."""

    def __init__(
        self,
        kernel: JITFunction,
        artifact: Mapping[str, Any],
        *,
        grid: Any,
        meta: Mapping[str, Any],
        tensor_specs: Mapping[int, _TensorSpec],
        num_inputs: int,
        compile_mode: _CompileMode,
        artifact_path: Path,
        from_cache: bool,
    ) -> None:
        self.kernel = kernel
        self.artifact: Mapping[str, Any] = MappingProxyType(dict(artifact))
        self.grid = grid
        self.meta: Mapping[str, Any] = MappingProxyType(dict(meta))
        self._tensor_specs = dict(tensor_specs)
        self._num_inputs = num_inputs
        self.mode: str = compile_mode.mode
        self.cc_enabled: bool = compile_mode.cc_enabled
        self.rank_id: int | None = compile_mode.rank
        self.world_size: int | None = compile_mode.world_size
        self.artifact_path: Path = artifact_path
        self.content_hash: str = artifact["content_hash"]
        self.from_cache: bool = from_cache

    @property
    def name(self) -> str:
        return self.kernel.name

    def __repr__(self) -> str:
        return (
            f"DeviceKernel({self.name}, mode={self.mode}, hash={self.content_hash[:12]}, "
            f"from_cache={self.from_cache})"
        )

    def __call__(self, *inputs: Any) -> Any:
        """Launch ``kernel[grid](*inputs, **meta)``; returns what the launcher returns."""
        if len(inputs) != self._num_inputs:
            raise KernelError(
                f"kernel {self.name!r} was compiled for {self._num_inputs} inputs, "
                f"called with {len(inputs)}"
            )
        for index, spec in self._tensor_specs.items():
            param = self.kernel.params[index]
            value = inputs[index]
            got = _tensor_spec(value, param, self.name) if _is_tensor(value) else None
            if got is None or (got.shape, got.dtype_name) != (spec.shape, spec.dtype_name):
                seen = "not a tensor" if got is None else f"{got.shape} {got.dtype_name}"
                raise KernelError(
                    f"kernel {self.name!r}: input {param!r} is {seen}, but it was compiled "
                    f"for {spec.shape} {spec.dtype_name}; compile_and_load it for this signature"
                )
        return self.kernel[self.grid](*inputs, **self.meta)

    @staticmethod
    def stats() -> CompileStats:
        return CompileStats(_COUNTERS.compilations, _COUNTERS.cache_hits, _COUNTERS.loads)

    @classmethod
    def compile_and_load(
        cls,
        fn: JITFunction,
        *inputs: Any,
        is_spmd: bool = True,
        cc_enabled: bool | None = None,
        rank_id: int | None = None,
        world_size: int | None = None,
        build_dir: str | os.PathLike[str] | None = None,
        use_cached_if_exists: bool = True,
        grid: Any = None,
        **meta: Any,
    ) -> DeviceKernel:
        """Trace ``fn`` for ``inputs`` (or reuse the cached trace) and return it ready to call."""
        if not isinstance(fn, JITFunction):
            name = getattr(fn, "__name__", type(fn).__name__)
            raise KernelError(
                f"compile_and_load: {name!r} is not a @jit kernel; decorate it with "
                "kernbench.kernels.jit"
            )
        name = fn.name
        compile_mode = _choose_mode(name, is_spmd, cc_enabled, rank_id, world_size)
        grid_spec = (1,) if grid is None else grid

        if len(inputs) > len(fn.params):
            raise KernelError(
                f"kernel {name!r} takes {len(fn.params)} parameters "
                f"({', '.join(fn.params)}), got {len(inputs)} inputs"
            )
        for key, value in meta.items():
            if _is_tensor(value):
                raise KernelError(
                    f"kernel {name!r}: tensor argument {key!r} must be passed positionally, "
                    "not as a keyword"
                )
        specs = {
            i: _tensor_spec(v, fn.params[i], name) for i, v in enumerate(inputs) if _is_tensor(v)
        }
        traced_args = tuple(
            ShapeOnlyBuffer(fn.params[i], specs[i].storage, specs[i].numel) if i in specs else v
            for i, v in enumerate(inputs)
        )
        launch = fn.prepare(grid_spec, *traced_args, **meta)
        signature = [
            specs[i].as_json(fn.params[i])
            if i in specs
            else {"param": fn.params[i], "kind": "scalar", "value": _canonical(v)}
            for i, v in enumerate(inputs)
        ]
        payload = {
            "kernel": name,
            "inputs": signature,
            "meta": _canonical(dict(launch.meta)),
            "keywords": _canonical({k: v for k, v in meta.items() if k not in launch.meta}),
            "options": _canonical(dict(launch.options)),
            "grid": _grid_json(launch.grid),
        }
        content_hash = _content_hash(fn, payload)

        root = Path(build_dir) if build_dir is not None else _default_build_dir()
        if compile_mode.mode == "mpmd":
            root = root / f"rank_{compile_mode.rank}"
        artifact_path = root / content_hash / ARTIFACT_NAME
        key = (str(root.resolve()), content_hash)

        def make(artifact: Mapping[str, Any], from_cache: bool) -> DeviceKernel:
            return cls(
                fn,
                artifact,
                grid=grid_spec,
                meta=meta,
                tensor_specs=specs,
                num_inputs=len(inputs),
                compile_mode=compile_mode,
                artifact_path=artifact_path,
                from_cache=from_cache,
            )

        if compile_mode.mode == "spmd" and compile_mode.rank != 0:
            if compile_mode.barrier is not None:
                compile_mode.barrier()
            artifact = _read_artifact(artifact_path, name, content_hash)
            _COUNTERS.loads += 1
            return make(artifact, from_cache=False)

        try:
            artifact, from_cache = _compile(
                launch, key, artifact_path, payload, use_cached_if_exists
            )
        finally:
            # rank 0 enters the barrier even when its trace fails, so the other ranks
            # are not left waiting; they then report the missing artifact
            if compile_mode.mode == "spmd" and compile_mode.barrier is not None:
                compile_mode.barrier()
        return make(artifact, from_cache=from_cache)


def _compile(
    launch: Any,
    key: tuple[str, str],
    artifact_path: Path,
    payload: Mapping[str, Any],
    use_cached_if_exists: bool,
) -> tuple[dict[str, Any], bool]:
    """The artifact for ``launch`` from the cache or a fresh trace, and whether it was cached."""
    cached = _CACHE.get(key) if use_cached_if_exists else None
    if cached is not None:
        _COUNTERS.cache_hits += 1
        if not artifact_path.exists():  # the build directory was cleaned: restore the file
            _write_artifact(artifact_path, cached)
        return cached, True
    name = launch.kernel.name
    try:
        counts = launch.run_program(next(iter(launch.grid.program_ids())))
    except KernelError as exc:
        raise KernelError(f"compile_and_load of kernel {name!r} failed: {exc}") from exc
    artifact = {
        "format": ARTIFACT_FORMAT,
        "content_hash": key[1],
        **payload,
        "traced_program": _canonical(dataclasses.asdict(counts)),
    }
    _write_artifact(artifact_path, artifact)
    _CACHE[key] = artifact
    _COUNTERS.compilations += 1
    return artifact, False
