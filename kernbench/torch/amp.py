"""Automatic mixed precision: ``torch.autocast`` that casts, and ``GradScaler``.

Inside ``torch.autocast("cuda", dtype=...)`` (``"ahbm"`` too; ``torch.amp.autocast`` and
``torch.cuda.amp.autocast`` are the same), the ops torch's CUDA autocast runs in lower
precision cast their floating inputs (float32, float16, bfloat16; never float64) to the
region's dtype first: matmuls of every form (``@``, ``matmul``, ``mm``, ``bmm``, ``mv``,
``addmm``, ``baddbmm``, ``einsum``'s products), ``F.linear`` (bias too),
``F.scaled_dot_product_attention`` and the convolutions.  The ones it runs in float32
(``softmax``, ``log_softmax``, ``cross_entropy``, ``nll_loss``, ``layer_norm``,
``group_norm``, ``rms_norm``, the regression and divergence losses, ``normalize``,
``cosine_similarity``, ``softplus``) cast float16 and bfloat16 inputs up to float32.
Other ops run in their inputs' dtypes, promoting as usual.  As in torch, an op's own
inner calls are not cast again, a cast is a device kernel that costs time, and a leaf
tensor that requires grad (a parameter) is cast once per outermost region (the cast
cache; ``cache_enabled=False`` turns it off).  ``device_type="cpu"`` casts nothing:
every tensor here lives on the device.

:class:`GradScaler` is torch's loss scaler over the ``grad`` slots: ``scale``,
``unscale_`` (a non-finite check read to the host), ``step`` (skipped after an inf or
NaN), ``update`` (back off, or grow after ``growth_interval`` good steps),
``get_scale`` and ``state_dict``.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from contextlib import ContextDecorator
from typing import Any

from kernbench.distributed.scheduler import rank_local
from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS, TorchDType, as_torch_dtype
from kernbench.torch.missing import importable_namespace
from kernbench.torch.shapes import flag_argument

__all__ = [
    "CudaAmp",
    "GradScaler",
    "autocast",
    "autocast_op",
    "install_autocast",
    "get_autocast_dtype",
    "is_autocast_enabled",
]

DEVICE_TYPES = {"cuda": "float16", "ahbm": "float16", "cpu": "bfloat16"}
_ACCELERATOR = ("cuda", "ahbm")
_ELIGIBLE = ("float32", "float16", "bfloat16")
_RANK_KEY = "torch.autocast"
FLOAT32 = DTYPE_OBJECTS["float32"]


class _State:
    """One rank's autocast regions: the innermost's setting, the cast cache, and how
    deep inside an autocast op the rank is (its inner calls are not cast again)."""

    def __init__(self) -> None:
        self.stack: list[tuple[bool, TorchDType, bool]] = []  # (enabled, dtype, cache)
        self.inside = 0
        self.cache: dict[int, tuple[Any, Any]] = {}

    def active(self) -> TorchDType | None:
        if not self.stack or self.inside:
            return None
        enabled, dtype, _ = self.stack[-1]
        return dtype if enabled else None


_GLOBAL = _State()


def _state() -> _State:
    return rank_local(_RANK_KEY, _State, _GLOBAL)


class autocast(ContextDecorator):  # noqa: N801 - torch's name
    """``torch.autocast(device_type, dtype=None, enabled=True, cache_enabled=None)``: a
    context manager and decorator running the ops torch autocasts in ``dtype`` (float16 by
    default on the accelerator) or in float32 (see the module docstring)."""

    def __init__(
        self,
        device_type: str,
        dtype: Any = None,
        enabled: bool = True,
        cache_enabled: bool | None = None,
    ) -> None:
        if not isinstance(device_type, str) or device_type not in DEVICE_TYPES:
            raise TensorError(
                f"torch.autocast: device_type must be one of "
                f"{', '.join(map(repr, DEVICE_TYPES))}, got {device_type!r}"
            )
        self.device = device_type
        self.fast_dtype: TorchDType = as_torch_dtype(
            dtype, DTYPE_OBJECTS[DEVICE_TYPES[device_type]]
        )
        if self.fast_dtype.name not in ("float16", "bfloat16"):
            raise TensorError(
                f"torch.autocast: dtype {self.fast_dtype!r} is not supported; on "
                f"{device_type!r} autocast runs in torch.float16 or torch.bfloat16"
            )
        self._enabled = flag_argument(enabled, "torch.autocast", "enabled")
        self._cache = cache_enabled is None or flag_argument(
            cache_enabled, "torch.autocast", "cache_enabled"
        )

    def __enter__(self) -> autocast:
        state = _state()
        if self.device in _ACCELERATOR:
            state.stack.append((self._enabled, self.fast_dtype, self._cache))
        else:  # cpu: nothing here is a CPU tensor; the region keeps the one around it
            state.stack.append(state.stack[-1] if state.stack else (False, FLOAT32, True))
        return self

    def __exit__(self, *exc: object) -> None:
        state = _state()
        state.stack.pop()
        if not state.stack:
            state.cache.clear()  # as torch clears its cast cache leaving the outer region


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether ops on ``device_type`` (the accelerator by default) are autocast now."""
    if device_type is not None and device_type not in DEVICE_TYPES:
        raise TensorError(
            f"torch.is_autocast_enabled: device_type must be one of "
            f"{', '.join(map(repr, DEVICE_TYPES))}, got {device_type!r}"
        )
    if device_type == "cpu":
        return False
    state = _state()
    return bool(state.stack) and state.stack[-1][0]


def get_autocast_dtype(device_type: str) -> TorchDType:
    """The dtype autocast regions on ``device_type`` use now (torch's default outside)."""
    if device_type not in DEVICE_TYPES:
        raise TensorError(
            f"torch.get_autocast_dtype: device_type must be one of "
            f"{', '.join(map(repr, DEVICE_TYPES))}, got {device_type!r}"
        )
    state = _state()
    if device_type in _ACCELERATOR and state.stack:
        return state.stack[-1][1]
    return DTYPE_OBJECTS[DEVICE_TYPES[device_type]]


def _cast(state: _State, value: Any, to: TorchDType, kinds: tuple[str, ...]) -> Any:
    dtype = getattr(value, "dtype", None)
    if not isinstance(dtype, TorchDType) or dtype.name not in kinds or dtype is to:
        if isinstance(value, list | tuple) and value and hasattr(value[0], "dtype"):
            return type(value)(_cast(state, v, to, kinds) for v in value)
        return value
    cache = state.stack[-1][2]
    leaf = cache and getattr(value, "requires_grad", False) and _is_leaf(value)
    if leaf:
        kept = state.cache.get(id(value))
        if kept is not None and kept[0] is value and kept[1].dtype is to:
            return kept[1]
    cast = value.to(to)
    if leaf:
        state.cache[id(value)] = (value, cast)
    return cast


def _is_leaf(t: Any) -> bool:
    leaf = getattr(t, "is_leaf", True)
    return bool(leaf)


def autocast_op(kind: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """A decorator for an op autocast covers: ``"lower"`` runs it in the region's dtype,
    ``"float32"`` in float32, ``"keep"`` in its inputs' dtypes; its own inner calls are
    not cast again."""
    if kind not in ("lower", "float32", "keep"):
        raise ValueError(f"autocast_op: kind {kind!r}")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(*args: Any, **kwargs: Any) -> Any:
            state = _state()
            dtype = state.active()
            if dtype is None:
                return fn(*args, **kwargs)
            if kind != "keep":
                if kind == "lower":
                    to, kinds = dtype, _ELIGIBLE
                else:
                    to, kinds = FLOAT32, ("float16", "bfloat16")
                args = tuple(_cast(state, a, to, kinds) for a in args)
                kwargs = {k: _cast(state, v, to, kinds) for k, v in kwargs.items()}
            state.inside += 1
            try:
                return fn(*args, **kwargs)
            finally:
                state.inside -= 1

        inner.__wrapped_by_autocast__ = kind  # type: ignore[attr-defined]
        return inner

    return wrap


class GradScaler:
    """``torch.amp.GradScaler`` (and ``torch.cuda.amp.GradScaler``), over the parameters'
    ``grad`` slots, with torch's defaults and update rule."""

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        if device not in DEVICE_TYPES:
            raise TensorError(
                f"GradScaler: device must be one of {', '.join(map(repr, DEVICE_TYPES))}, "
                f"got {device!r}"
            )
        if not growth_factor > 1.0:
            raise TensorError("The growth factor must be > 1.0.")
        if not 0.0 < backoff_factor < 1.0:
            raise TensorError("The backoff factor must be < 1.0.")
        self._enabled = flag_argument(enabled, "GradScaler", "enabled")
        self._scale = float(init_scale)
        self._growth_factor = float(growth_factor)
        self._backoff_factor = float(backoff_factor)
        self._growth_interval = int(growth_interval)
        self._growth_tracker = 0
        self._per_optimizer: dict[int, dict[str, Any]] = {}

    def is_enabled(self) -> bool:
        return self._enabled

    def get_scale(self) -> float:
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def scale(self, outputs: Any) -> Any:
        """``outputs`` times the scale (a tensor, or tensors in lists, tuples and dicts)."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, list | tuple):
            return type(outputs)(self.scale(o) for o in outputs)
        if isinstance(outputs, dict):
            return {k: self.scale(v) for k, v in outputs.items()}
        if not hasattr(outputs, "dtype"):
            raise TensorError(
                f"GradScaler.scale: outputs must be a tensor or tensors, got "
                f"{type(outputs).__name__}"
            )
        return outputs * self._scale

    def _grads(self, optimizer: Any) -> Iterable[Any]:
        for group in optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    yield p.grad

    def unscale_(self, optimizer: Any) -> None:
        """Divide ``optimizer``'s gradients by the scale, in place, and note whether any
        is infinite or NaN (read to the host, as torch reads ``found_inf``)."""
        if not self._enabled:
            return
        record = self._per_optimizer.setdefault(id(optimizer), {"stage": "ready"})
        if record["stage"] == "unscaled":
            raise TensorError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if record["stage"] == "stepped":
            raise TensorError("unscale_() is being called after step().")
        inverse = 1.0 / self._scale
        bad = None  # one flag on the device, read once, as torch reads found_inf
        for g in self._grads(optimizer):
            g.mul_(inverse)
            not_finite = g.isfinite().logical_not().any()
            bad = not_finite if bad is None else bad.logical_or(not_finite)
        record["stage"], record["found_inf"] = "unscaled", bool(bad) if bad is not None else False

    def step(self, optimizer: Any, *args: Any, **kwargs: Any) -> Any:
        """``optimizer.step()`` unless the gradients held an inf or NaN (unscaling them
        first if ``unscale_`` was not called)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        record = self._per_optimizer.setdefault(id(optimizer), {"stage": "ready"})
        if record["stage"] == "stepped":
            raise TensorError("step() has already been called since the last update().")
        if record["stage"] == "ready":
            self.unscale_(optimizer)
        result = None if record["found_inf"] else optimizer.step(*args, **kwargs)
        record["stage"] = "stepped"
        return result

    def update(self, new_scale: float | None = None) -> None:
        """Back off the scale after a step that found an inf or NaN, grow it after
        ``growth_interval`` steps in a row that did not (torch's rule)."""
        if not self._enabled:
            return
        if new_scale is not None:
            self._scale = float(new_scale)
        else:
            if not self._per_optimizer:
                raise TensorError("No inf checks were recorded prior to update.")
            found = any(r.get("found_inf") for r in self._per_optimizer.values())
            if found:
                self._scale *= self._backoff_factor
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    self._scale *= self._growth_factor
                    self._growth_tracker = 0
            if math.isinf(self._scale):
                raise TensorError("GradScaler: the scale overflowed")
        self._per_optimizer.clear()

    def state_dict(self) -> dict[str, Any]:
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not self._enabled:
            return
        if not state_dict:
            raise TensorError(
                "The source state dict is empty, possibly because it was saved from a "
                "disabled instance of GradScaler."
            )
        self._scale = float(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


# The entry points autocast covers, by kind (torch's CUDA lists, as far as they exist
# here).  Every route into a matmul is listed, so a cast always happens before the op
# that records it for backward sees its inputs.
_TENSOR_OPS = {
    "lower": ("matmul", "__matmul__", "__rmatmul__", "mm", "bmm", "mv", "addmm", "baddbmm",
              "addmv", "addr", "addbmm"),
    "float32": ("softmax", "log_softmax", "tan", "sinh", "cosh", "dist", "renorm"),
    "keep": ("dot",),
}  # fmt: skip
_TORCH_OPS = {
    "lower": ("matmul", "mm", "bmm", "mv", "addmm", "baddbmm", "einsum", "addmv", "addr",
              "addbmm", "chain_matmul"),
    "float32": ("softmax", "log_softmax", "layer_norm", "rms_norm", "group_norm", "tan",
                "sinh", "cosh", "dist", "renorm"),
    "keep": ("dot",),
}  # fmt: skip
_FUNCTIONAL_OPS = {
    "lower": ("linear", "scaled_dot_product_attention", "conv1d", "conv2d", "conv3d",
              "conv_transpose1d", "conv_transpose2d", "conv_transpose3d"),
    "float32": (
        "softmax", "log_softmax", "cross_entropy", "nll_loss", "layer_norm", "group_norm",
        "rms_norm", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div",
        "binary_cross_entropy_with_logits", "normalize", "cosine_similarity", "softplus",
    ),
}  # fmt: skip


def install_autocast(tensor_class: type, torch_module: Any, functional: Any) -> None:
    """Put autocast over the covered entry points (once, after anything else that wraps
    them, so its casts come first)."""
    for ops, owner in (
        (_TENSOR_OPS, tensor_class),
        (_TORCH_OPS, torch_module),
        (_FUNCTIONAL_OPS, functional),
    ):
        for kind, names in ops.items():
            for name in names:
                fn = getattr(owner, name, None)
                if fn is None or getattr(fn, "__wrapped_by_autocast__", None):
                    continue
                setattr(owner, name, autocast_op(kind)(fn))


class _CudaAutocast(autocast):
    """``torch.cuda.amp.autocast(enabled=True, dtype=torch.float16, cache_enabled=True)``."""

    def __init__(self, enabled: bool = True, dtype: Any = None, cache_enabled: bool = True) -> None:
        super().__init__("cuda", dtype, enabled, cache_enabled)


class _CudaGradScaler(GradScaler):
    """``torch.cuda.amp.GradScaler(init_scale=2.**16, ...)``: :class:`GradScaler` on cuda."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )


@importable_namespace
class CudaAmp:
    """``torch.cuda.amp``: its ``autocast`` and ``GradScaler``."""

    autocast = _CudaAutocast
    GradScaler = _CudaGradScaler
