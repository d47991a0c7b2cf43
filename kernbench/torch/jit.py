"""``torch.jit``: TorchScript's entry points, run eagerly (ADR 0030).

Model code carries TorchScript's annotations (``@torch.jit.ignore``, ``@torch.jit.unused``,
``torch.jit.is_scripting()`` branches, ``torch.jit.Final``) and programs script or trace
their model before training (``model = torch.jit.script(model)``).  A scripted or traced
callable computes what the eager one does, so here ``script`` and ``trace`` return the
module or function itself, and warn, as ``torch.compile`` does, that the simulated time
is the eager program's; the annotations are the identity; ``is_scripting()`` and
``is_tracing()`` are False.  ``torch.jit.save``/``load`` (TorchScript archives) are
refused with what to use instead (``torch.save`` of the model or its state dict).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, Final

from kernbench.errors import TensorError, unsupported_name, user_stacklevel

__all__ = [
    "Final",
    "annotate",
    "export",
    "ignore",
    "interface",
    "is_scripting",
    "is_tracing",
    "script",
    "trace",
    "trace_module",
    "unused",
]

_EAGER = (
    "torch.jit.{what}: kernbench runs the {kind} eagerly (there is no TorchScript here), so "
    "its values are the eager program's and its simulated time too"
)


def _eager(what: str, obj: Any) -> Any:
    if not callable(obj):
        raise TensorError(
            f"torch.jit.{what}: expected a module or a function, got {type(obj).__name__}"
        )
    kind = "module" if hasattr(obj, "parameters") else "function"
    warnings.warn(_EAGER.format(what=what, kind=kind), stacklevel=user_stacklevel())
    return obj


def script(obj: Any, optimize: Any = None, _frames_up: int = 0, _rcb: Any = None,
           example_inputs: Any = None) -> Any:  # fmt: skip
    """``torch.jit.script``: ``obj`` itself (see the module docstring)."""
    return _eager("script", obj)


def trace(func: Any, example_inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    """``torch.jit.trace``: ``func`` itself; the example inputs are not run."""
    return _eager("trace", func)


def trace_module(mod: Any, inputs: Any = None, *args: Any, **kwargs: Any) -> Any:
    return _eager("trace_module", mod)


def _identity_decorator(fn: Any = None, **_: Any) -> Any:
    if fn is None:  # @torch.jit.ignore(drop=True)
        return lambda f: f
    return fn


ignore = _identity_decorator
unused = _identity_decorator
export = _identity_decorator
interface = _identity_decorator


def annotate(the_type: Any, the_value: Any) -> Any:
    return the_value


def is_scripting() -> bool:
    return False


def is_tracing() -> bool:
    return False


_ARCHIVES = (
    "there are no TorchScript archives here: save the model with torch.save(model) or "
    "torch.save(model.state_dict(), f) and load it with torch.load"
)


def __getattr__(name: str) -> Callable[..., Any]:
    hints = {
        "save": _ARCHIVES,
        "load": _ARCHIVES,
        "freeze": "drop the line (a scripted model here is the eager one)",
        "optimize_for_inference": "drop the line",
    }
    raise unsupported_name("kernbench.torch.jit", "torch.jit", name, __all__, hints)
