"""The set-up lines of training scripts, accepted as documented no-ops, and the RNG state.

``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.*`` and
``torch.set_float32_matmul_precision`` keep torch's types and values (``allow_tf32``
reads and writes the matmul precision, as torch's does) but change nothing: a matmul
runs in its tensors' dtype, with no TF32 (ADR 0016).  ``torch.autocast`` casts, as
torch's does (:mod:`kernbench.torch.amp`).  ``torch.get_rng_state`` /
``set_rng_state`` (and ``torch.cuda``'s) save and restore the calling rank's
generator as torch's ``uint8`` state tensor.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from kernbench.errors import TensorAttributeError, TensorError, unsupported_name, user_stacklevel
from kernbench.torch import random as torch_random
from kernbench.torch.amp import autocast
from kernbench.torch.devices import ahbm
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import from_numpy
from kernbench.torch.missing import importable_namespace
from kernbench.torch.shapes import tensor_argument

__all__ = [
    "autocast",
    "compile",
    "backends",
    "get_float32_matmul_precision",
    "get_rng_state",
    "set_float32_matmul_precision",
    "set_rng_state",
]

_PRECISIONS = ("highest", "high", "medium")
_precision = ["highest"]  # torch's default


def set_float32_matmul_precision(precision: str) -> None:
    """Accepted and remembered (``'highest'``, ``'high'`` or ``'medium'``); a matmul runs in
    its tensors' dtype whatever it says."""
    if not isinstance(precision, str) or precision not in _PRECISIONS:
        raise TensorError(
            f"set_float32_matmul_precision: Invalid precision {precision!r}: one of "
            f"{', '.join(map(repr, _PRECISIONS))}"
        )
    _precision[0] = precision


def get_float32_matmul_precision() -> str:
    return _precision[0]


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise TensorError(f"{what} must be a bool (True or False), got {value!r}")
    return value


@importable_namespace
class _Settings:
    """A ``torch.backends`` namespace: its known flags, each a bool; others refused."""

    _owner = "torch.backends"
    _flags: dict[str, bool] = {}

    def __init__(self) -> None:
        object.__setattr__(self, "_values", dict(self._flags))

    def __getattr__(self, name: str) -> Any:
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise TensorAttributeError(
            f"{self._owner} has no attribute {name!r} in kernbench.torch: there are "
            f"{', '.join(sorted(values))} (accepted; they change nothing here)"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        values = object.__getattribute__(self, "_values")
        if name not in values:
            raise TensorAttributeError(
                f"{self._owner}: Unknown attribute {name} (as torch); there are "
                f"{', '.join(sorted(values))}"
            )
        values[name] = _flag(value, f"{self._owner}.{name}")


class _Matmul(_Settings):
    """``torch.backends.cuda.matmul``: ``allow_tf32`` is the float32 matmul precision
    (``'highest'`` is False), as torch's."""

    _owner = "torch.backends.cuda.matmul"
    _flags = {
        "allow_fp16_reduced_precision_reduction": True,
        "allow_bf16_reduced_precision_reduction": True,
    }

    def __getattr__(self, name: str) -> Any:
        if name == "allow_tf32":
            return _precision[0] != "highest"
        return super().__getattr__(name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "allow_tf32":
            _precision[0] = "high" if _flag(value, f"{self._owner}.allow_tf32") else "highest"
            return
        super().__setattr__(name, value)


class _Cudnn(_Settings):
    _owner = "torch.backends.cudnn"
    _flags = {"enabled": True, "benchmark": False, "deterministic": False, "allow_tf32": True}

    def is_available(self) -> bool:
        """False: there is no cuDNN (its flags are accepted and change nothing)."""
        return False


@importable_namespace
class _Cuda:
    """``torch.backends.cuda``."""

    def __init__(self) -> None:
        self.matmul = _Matmul()

    def is_built(self) -> bool:
        return True

    def __getattr__(self, name: str) -> Any:
        raise unsupported_name(
            "kernbench.torch.backends.cuda",
            "torch.backends.cuda",
            name,
            ("matmul", "is_built"),
            {},
        )


@importable_namespace
class _Mps:
    """``torch.backends.mps``: not available (scripts choose their device with it)."""

    def is_available(self) -> bool:
        return False

    def is_built(self) -> bool:
        return False


@importable_namespace
class _Backends:
    """``torch.backends``: ``cuda`` (``matmul``), ``cudnn`` and ``mps``."""

    def __init__(self) -> None:
        self.cuda = _Cuda()
        self.cudnn = _Cudnn()
        self.mps = _Mps()

    def __getattr__(self, name: str) -> Any:
        raise unsupported_name(
            "kernbench.torch.backends",
            "torch.backends",
            name,
            ("cuda", "cudnn", "mps"),
            {name: "not modelled here (matmul runs in its tensors' dtype): drop the line"},
        )


backends = _Backends()

# The PCG64 state as bytes: state (16), inc (16), has_uint32 (1), uinteger (4).
_STATE_BYTES = 37


def get_rng_state() -> Any:
    """The calling rank's generator state as a ``uint8`` tensor (copied in), as torch's."""
    state = torch_random.current_generator().get_state()
    inner = state["state"]
    packed = (
        int(inner["state"]).to_bytes(16, "little")
        + int(inner["inc"]).to_bytes(16, "little")
        + int(state["has_uint32"]).to_bytes(1, "little")
        + int(state["uinteger"]).to_bytes(4, "little")
    )
    return from_numpy(np.frombuffer(packed, np.uint8).copy())


def set_rng_state(new_state: Any) -> None:
    """Restore the calling rank's generator from :func:`get_rng_state`'s tensor (read to the
    host).  In timing-only mode no values are drawn, so there is nothing to restore."""
    t = tensor_argument(new_state, "torch.set_rng_state")
    if t.dtype is not DTYPE_OBJECTS["uint8"] or tuple(t.shape) != (_STATE_BYTES,):
        raise TensorError(
            f"torch.set_rng_state: expects the uint8 tensor of {_STATE_BYTES} bytes "
            f"torch.get_rng_state() gives, got {t.dtype!r} of shape {tuple(t.shape)}"
        )
    if t.storage_device_tensor.context.timing_only:
        return
    packed = t.numpy(force=True).tobytes()
    generator = torch_random.current_generator()
    generator.set_state(
        {
            "bit_generator": "PCG64",
            "state": {
                "state": int.from_bytes(packed[:16], "little"),
                "inc": int.from_bytes(packed[16:32], "little"),
            },
            "has_uint32": packed[32],
            "uinteger": int.from_bytes(packed[33:], "little"),
        }
    )


def _cuda_get_rng_state(device: Any = "cuda") -> Any:
    """``torch.cuda.get_rng_state``: the device and the host share one generator here."""
    return get_rng_state()


def _cuda_set_rng_state(new_state: Any, device: Any = "cuda") -> None:
    set_rng_state(new_state)


def _cuda_get_rng_state_all() -> list[Any]:
    return [get_rng_state()]


def _cuda_set_rng_state_all(new_states: Any) -> None:
    for state in new_states:
        set_rng_state(state)


ahbm.provide("get_rng_state", _cuda_get_rng_state)
ahbm.provide("set_rng_state", _cuda_set_rng_state)
ahbm.provide("get_rng_state_all", _cuda_get_rng_state_all)
ahbm.provide("set_rng_state_all", _cuda_set_rng_state_all)


_COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile(  # noqa: A001 - torch's name
    model: Any = None,
    *,
    fullgraph: bool = False,
    dynamic: bool | None = None,
    backend: Any = "inductor",
    mode: str | None = None,
    options: dict | None = None,
    disable: bool = False,
) -> Any:
    """``torch.compile``: ``model`` (a module or a function) itself, run eagerly.

    A compiled callable computes what the eager one does, so the values are torch's;
    there is no compiler here, so the simulated time is the eager program's (no
    fusion, no CUDA graphs), which a warning says.  As a decorator (``@torch.compile``
    or ``@torch.compile(mode=...)``) it returns the function.
    """
    if mode not in _COMPILE_MODES:
        raise TensorError(
            f"torch.compile: Unrecognized mode={mode!r}, should be one of: "
            f"{', '.join(m for m in _COMPILE_MODES if m)}"
        )
    if mode is not None and options is not None:
        raise TensorError("torch.compile: Either mode or options can be specified, but both can't")
    if model is None:
        return lambda fn: compile(
            fn, fullgraph=fullgraph, dynamic=dynamic, backend=backend, mode=mode,
            options=options, disable=disable,
        )  # fmt: skip
    if not callable(model):
        raise TensorError(
            f"torch.compile: model must be a module or a function, got {type(model).__name__}"
        )
    if not disable:
        warnings.warn(
            "torch.compile: kernbench runs the model eagerly (there is no compiler here), "
            "so its simulated time is the eager program's: no fusion, no CUDA graphs",
            stacklevel=user_stacklevel(),
        )
    return model
