"""``torch.autograd`` for KernBench: reverse-mode gradients over the facade's ops (ADR 0020).

An operation on tensors of which one requires grad, with recording on, gives a result
with ``requires_grad=True`` and a ``grad_fn`` node (``<MulBackward0 ...>``);
``loss.backward()`` runs the graph in reverse with the same device ops, so the backward
pass costs simulated time, and adds each leaf's gradient into its ``.grad``.
``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` switch recording
per rank.  Which ops have formulas and what happens to the others:
:mod:`~kernbench.torch.autograd.install`.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorError, unsupported_name
from kernbench.torch.autograd import function
from kernbench.torch.autograd.checks import (
    GradcheckError,
    Variable,
    detect_anomaly,
    gradcheck,
    is_anomaly_check_nan_enabled,
    is_anomaly_enabled,
    set_detect_anomaly,
)
from kernbench.torch.autograd.engine import backward, grad, queue_callback, tensor_backward
from kernbench.torch.autograd.function import Function
from kernbench.torch.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from kernbench.torch.autograd.graph import Node
from kernbench.torch.grad_slots import register_engine

__all__ = [
    "Function",
    "GradcheckError",
    "Variable",
    "detect_anomaly",
    "gradcheck",
    "gradgradcheck",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "set_detect_anomaly",
    "Node",
    "backward",
    "enable_grad",
    "function",
    "grad",
    "inference_mode",
    "is_grad_enabled",
    "no_grad",
    "queue_callback",
    "set_grad_enabled",
]

register_engine(tensor_backward)

_HINTS = {
    "functional": "torch.autograd.functional (jacobian, hessian, vjp, jvp) is not here: "
    "torch.autograd.grad(outputs, inputs, grad_outputs) gives a vjp",
    "forward_ad": "forward-mode AD is not supported; use backward mode (torch.autograd.grad)",
    "profiler": "use torch.profiler (profile, record_function: regions timed on the simulated "
    "clock); every operation is in kernbench run --trace FILE (open it in Perfetto)",
}


def gradgradcheck(*args: Any, **kwargs: Any) -> bool:
    """Refused: second derivatives need ``create_graph``, which this autograd lacks."""
    raise TensorError(
        "torch.autograd.gradgradcheck: higher-order gradients (create_graph=True) are not "
        "supported by kernbench.torch's autograd; gradcheck checks first derivatives"
    )


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.autograd", "torch.autograd", name, __all__, _HINTS)
