"""``torch.autograd.gradcheck``, anomaly detection and ``Variable``: the tools people use
beside a custom ``autograd.Function``.

* ``gradcheck(func, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, ...)``
  compares the analytical Jacobian (one ``autograd.grad`` per output element) with
  central differences of ``func`` (two calls per input element), as torch's slow mode
  does, and raises ``GradcheckError`` with torch's message (or returns False).  Both
  sides run on the simulated machine, so they cost simulated time; it needs values (a
  timing-only run refuses it).
* ``detect_anomaly(check_nan=True)`` / ``set_detect_anomaly(mode)``: while on (per rank),
  the backward checks each node's gradients for NaN and raises torch's "Function
  'XBackward' returned nan values in its 0th output."; the check reads each gradient's
  ``isnan().any()`` back to the host, and costs that, as torch's does.
* ``Variable(t, requires_grad=False)`` is the tensor (torch merged the two in 0.4).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import Any

from kernbench.distributed.scheduler import current_rank
from kernbench.errors import TensorError
from kernbench.torch.autograd.engine import grad as autograd_grad
from kernbench.torch.autograd.engine import register_anomaly_check
from kernbench.torch.autograd.grad_mode import no_grad

__all__ = [
    "GradcheckError",
    "Variable",
    "detect_anomaly",
    "gradcheck",
    "is_anomaly_check_nan_enabled",
    "is_anomaly_enabled",
    "set_detect_anomaly",
]


class GradcheckError(TensorError):
    """``gradcheck`` found the analytical and numerical gradients apart."""


def _is_tensor(value: Any) -> bool:
    return hasattr(value, "grad_fn") and hasattr(value, "storage_device_tensor")


def gradcheck(
    func: Callable[..., Any],
    inputs: Any,
    *,
    eps: float = 1e-6,
    atol: float = 1e-5,
    rtol: float = 1e-3,
    raise_exception: bool = True,
    nondet_tol: float = 0.0,
    check_undefined_grad: bool = True,
    check_grad_dtypes: bool = False,
    check_batched_grad: bool = False,
    check_batched_forward_grad: bool = False,
    check_forward_ad: bool = False,
    check_backward_ad: bool = True,
    fast_mode: bool = False,
    masked: bool | None = None,
) -> bool:
    """True if ``func``'s gradients with respect to its inputs that require grad match
    central differences (see the module's text)."""
    if check_batched_grad or check_batched_forward_grad or check_forward_ad:
        raise TensorError(
            "gradcheck(check_batched_grad/check_batched_forward_grad/check_forward_ad=True): "
            "vmap and forward-mode AD are not supported by kernbench.torch's autograd; leave "
            "them False"
        )
    tupled = tuple(inputs) if isinstance(inputs, tuple | list) else (inputs,)
    wrt = [i for i, t in enumerate(tupled) if _is_tensor(t) and t.requires_grad]
    if not wrt:
        raise GradcheckError("gradcheck expects at least one input tensor to require gradient")
    for i in wrt:
        t = tupled[i]
        if t.storage_device_tensor.context.timing_only:
            raise TensorError(
                "gradcheck needs values: a timing-only run holds none; run it functionally"
            )
        if t.dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point. "
                "This check will likely fail if all the inputs are not of double precision "
                "floating point. ",
                stacklevel=2,
            )
    outputs = _outputs(func, tupled)
    if not check_backward_ad:
        return True
    for o, out in enumerate(outputs):
        if not out.dtype.is_floating_point:
            continue
        # the analytical side first, from a fresh graph: the numerical side changes the
        # inputs in place (and back), which a graph saved before would refuse
        analytical = _analytical(_outputs(func, tupled)[o], tupled, wrt)
        numerical = _numerical(func, tupled, wrt, o, eps)
        for k, i in enumerate(wrt):
            a, n = analytical[k], numerical[k]
            if not _allclose(a, n, rtol, atol):
                if not raise_exception:
                    return False
                raise GradcheckError(
                    f"Jacobian mismatch for output {o} with respect to input {i},\n"
                    f"numerical:{_show(n)}\nanalytical:{_show(a)}\n"
                )
    return True


def _outputs(func: Callable[..., Any], inputs: tuple[Any, ...]) -> list[Any]:
    result = func(*inputs)
    found = list(result) if isinstance(result, tuple | list) else [result]
    return [t for t in found if _is_tensor(t)]


def _numerical(
    func: Callable[..., Any], inputs: tuple[Any, ...], wrt: list[int], o: int, eps: float
) -> list[list[list[float]]]:
    """Per input: rows (one per input element) of d out_o / d x by central differences."""
    jacobians = []
    with no_grad():
        for i in wrt:
            x = inputs[i].detach()  # the same memory: func reads the perturbed element
            rows = []
            for j in range(x.numel()):
                at = _index(j, tuple(x.shape))
                original = x[at].item()
                x[at] = original + eps
                plus = _outputs(func, inputs)[o].reshape(-1).tolist()
                x[at] = original - eps
                minus = _outputs(func, inputs)[o].reshape(-1).tolist()
                x[at] = original
                rows.append([(p - m) / (2 * eps) for p, m in zip(plus, minus, strict=True)])
            jacobians.append(rows)
    return jacobians


def _analytical(out: Any, inputs: tuple[Any, ...], wrt: list[int]) -> list[list[list[float]]]:
    """Per input: rows (one per input element) of d out / d x, one vjp per out element."""
    targets = [inputs[i] for i in wrt]
    columns: list[list[list[float]]] = [[] for _ in wrt]
    n = out.numel()
    for j in range(n):
        seed = out.new_zeros(out.shape)
        seed[_index(j, tuple(out.shape))] = 1.0
        grads = autograd_grad(out, targets, seed, retain_graph=True, allow_unused=True)
        for k, (t, g) in enumerate(zip(targets, grads, strict=True)):
            values = [0.0] * t.numel() if g is None else g.reshape(-1).tolist()
            columns[k].append(values)
    # columns[k][j][e] = d out_j / d x_e; rows are per input element e
    return [[list(col) for col in zip(*cols, strict=True)] if cols else [] for cols in columns]


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element ``flat`` of a tensor of ``shape`` (row-major) as an index tuple."""
    index = []
    for size in reversed(shape):
        flat, at = divmod(flat, size)
        index.append(at)
    return tuple(reversed(index))


def _allclose(a: list[list[float]], b: list[list[float]], rtol: float, atol: float) -> bool:
    for row_a, row_b in zip(a, b, strict=True):
        for x, y in zip(row_a, row_b, strict=True):
            if not abs(x - y) <= atol + rtol * abs(y):
                return False
    return True


def _show(rows: Sequence[Sequence[float]]) -> str:
    return (
        "tensor(["
        + ",\n        ".join("[" + ", ".join(f"{v:.4f}" for v in r) + "]" for r in rows)
        + "])"
    )


# -- anomaly detection ------------------------------------------------------------------

_RANK_KEY = "torch.autograd.anomaly"
_GLOBAL: list[tuple[bool, bool]] = [(False, True)]


def _mode() -> tuple[bool, bool]:
    rank = current_rank()
    if rank is None:
        return _GLOBAL[0]
    return rank.local.get(_RANK_KEY, (False, True))


def _set_mode(mode: tuple[bool, bool]) -> None:
    rank = current_rank()
    if rank is None:
        _GLOBAL[0] = mode
    else:
        rank.local[_RANK_KEY] = mode


def is_anomaly_enabled() -> bool:
    return _mode()[0]


def is_anomaly_check_nan_enabled() -> bool:
    return _mode()[1]


class set_detect_anomaly:  # noqa: N801 - torch's name
    """Switch anomaly detection on or off (a context manager that restores it, or a call
    that leaves it set), as torch's."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self.previous = _mode()
        _set_mode((bool(mode), bool(check_nan)))

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _set_mode(self.previous)


class detect_anomaly:  # noqa: N801 - torch's name
    """A context manager (or decorator) that turns anomaly detection on inside it."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = check_nan
        self._previous: list[tuple[bool, bool]] = []

    def __enter__(self) -> None:
        self._previous.append(_mode())
        _set_mode((True, self.check_nan))

    def __exit__(self, *exc: object) -> None:
        _set_mode(self._previous.pop())

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def _check_nan(node_name: str, grads: Sequence[Any]) -> None:
    """After a node ran with anomaly detection on: torch's error if a gradient has NaN."""
    enabled, check_nan = _mode()
    if not (enabled and check_nan):
        return
    for i, g in enumerate(grads):
        if g is None or not _is_tensor(g) or g.storage_device_tensor.context.timing_only:
            continue
        if g.isnan().any().item():
            raise TensorError(f"Function '{node_name}' returned nan values in its {i}th output.")


register_anomaly_check(_check_nan)


# -- Variable ----------------------------------------------------------------------------


class _VariableMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return _is_tensor(instance)


class Variable(metaclass=_VariableMeta):
    """``Variable(t, requires_grad=False)``: the tensor itself (``requires_grad`` set when
    asked), as torch's since 0.4; ``isinstance(t, Variable)`` holds for every tensor."""

    def __new__(cls, data: Any, requires_grad: bool = False, volatile: bool = False) -> Any:
        if not _is_tensor(data):
            raise TensorError(f"Variable data has to be a tensor, but got {type(data).__name__}")
        if volatile:
            raise TensorError(
                "Variable(volatile=True) was removed from torch; use `with torch.no_grad():`"
            )
        if requires_grad:
            data.requires_grad_(True)
        return data
