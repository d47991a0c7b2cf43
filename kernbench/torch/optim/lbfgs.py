"""``torch.optim.LBFGS``: limited-memory BFGS over one parameter group, with torch's
algorithm, defaults, tolerance checks, optional strong-Wolfe line search and state.

The vectors (the flat gradient, the direction ``d``, the curvature pairs
``old_dirs``/``old_stps``, ``prev_flat_grad``) are device tensors and every update of
them is a device op, so a step costs device time as torch's does.  The scalars the
algorithm branches on or scales by (``|g|_inf``, ``|g|_1``, ``y.s``, ``y.y``, ``g.d``,
the two-loop coefficients, the loss) are reduced on the device (``Tensor.dot``, a product
and a parallel sum) and read back to
the host, one transfer each, where torch reads them with ``.item()`` or a tensor
``alpha``; so ``ro``, ``al`` and ``H_diag`` are host floats here (torch keeps 0-d
tensors).  The state sits on the first parameter under torch's keys: ``func_evals``,
``n_iter``, ``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``,
``prev_flat_grad``, ``prev_loss`` and ``al``.

In timing-only mode the reads cost the same time but return no values, so no
test can stop the loop early: every step runs ``max_iter`` iterations (fewer if
``max_eval`` evaluations come first), each curvature pair enters the history,
the first step length is ``lr``, and a strong-Wolfe search takes its first trial
step.  That is the cost of a step that never stops early: without a line search
exactly a functional run's that runs all ``max_iter`` iterations (the tests hold
the two to the picosecond); a functional strong-Wolfe search may evaluate more
often than once an iteration, so it can cost more.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import OptimizerStateError, OptimizerValueError, TensorTypeError
from kernbench.torch.autograd import no_grad
from kernbench.torch.factories import cat, zeros
from kernbench.torch.optim.line_search import host_scalar, strong_wolfe
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.tensor import Tensor

__all__ = ["LBFGS"]

CURVATURE_THRESHOLD = 1e-10  # a pair with y.s at or below this is not stored


class LBFGS(Optimizer):
    """L-BFGS (after minFunc, as torch's): ``step(closure)`` runs up to ``max_iter``
    iterations and ``max_eval`` closure calls (default ``max_iter * 5 // 4``) and returns
    the closure's first loss."""

    def __init__(
        self,
        params: Any,
        lr: float = 1,
        max_iter: int = 20,
        max_eval: int | None = None,
        tolerance_grad: float = 1e-7,
        tolerance_change: float = 1e-9,
        history_size: int = 100,
        line_search_fn: str | None = None,
    ) -> None:
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {
            "lr": lr,
            "max_iter": max_iter,
            "max_eval": max_eval,
            "tolerance_grad": tolerance_grad,
            "tolerance_change": tolerance_change,
            "history_size": history_size,
            "line_search_fn": line_search_fn,
        }
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise OptimizerValueError(
                "LBFGS doesn't support per-parameter options (parameter groups)"
            )
        self._params: list[Tensor] = self.param_groups[0]["params"]

    # -- the flat view of the parameters -------------------------------------------------
    def _gather_flat_grad(self) -> Tensor:
        views = []
        for p in self._params:
            if p.grad is None:
                views.append(zeros(p.numel(), dtype=p.dtype, device=p.device))
            else:
                views.append(p.grad.reshape(-1))
        return cat(views, 0)

    def _add_grad(self, step_size: float, update: Tensor) -> None:
        offset = 0
        for p in self._params:
            numel = p.numel()
            p.add_(update[offset : offset + numel].view_as(p), alpha=step_size)
            offset += numel

    def _clone_param(self) -> list[Tensor]:
        return [p.clone() for p in self._params]

    def _set_param(self, params_data: list[Tensor]) -> None:
        for p, data in zip(self._params, params_data, strict=True):
            p.copy_(data)

    def _evaluate(self, closure: Callable[[], Any]) -> tuple[Any, float | None]:
        loss = self._closure_loss(closure)
        if loss is None:
            raise TensorTypeError("LBFGS.step: the closure must return the loss, got None")
        return loss, host_scalar(loss)

    def _directional_evaluate(
        self, closure: Callable[[], Any], x: list[Tensor], t: float, d: Tensor
    ) -> tuple[float | None, Tensor]:
        self._add_grad(t, d)
        _, loss = self._evaluate(closure)
        flat_grad = self._gather_flat_grad()
        self._set_param(x)
        return loss, flat_grad

    def _optimal(self, flat_grad: Tensor, tolerance_grad: float) -> bool:
        largest = host_scalar(flat_grad.abs().max())
        return largest is not None and largest <= tolerance_grad

    # -- the step ------------------------------------------------------------------------
    @no_grad()  # as torch: the update is not recorded (the closure is, see _closure_loss)
    def step(self, closure: Callable[[], Any] | None = None) -> Any:  # noqa: C901, PLR0912, PLR0915
        if closure is None:
            raise TensorTypeError("LBFGS.step needs a closure that reevaluates the model")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss, loss = self._evaluate(closure)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if self._optimal(flat_grad, tolerance_grad):
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag = state.get("H_diag")
        prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1

            # the descent direction
            if state["n_iter"] == 1:
                d = flat_grad.neg()
                old_dirs, old_stps, ro, h_diag = [], [], [], 1.0
            else:
                y = flat_grad.sub(prev_flat_grad)
                s = d.mul(t)
                ys = host_scalar(y.dot(s))
                if ys is None or ys > CURVATURE_THRESHOLD:
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    yy = host_scalar(y.dot(y))
                    ro.append(1.0 if ys is None else 1.0 / ys)
                    h_diag = 1.0 if ys is None or yy is None else ys / yy
                if "al" not in state:
                    state["al"] = [None] * history_size
                al = state["al"]
                # the two-loop recursion: d = -H g with H from the stored pairs
                q = flat_grad.neg()
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = _known_or(host_scalar(old_stps[i].dot(q)), 1.0) * ro[i]
                    q.add_(old_dirs[i], alpha=-al[i])
                d = r = q.mul(h_diag)
                for i in range(len(old_dirs)):
                    be_i = _known_or(host_scalar(old_dirs[i].dot(r)), 1.0) * ro[i]
                    r.add_(old_stps[i], alpha=al[i] - be_i)

            if prev_flat_grad is None:
                prev_flat_grad = flat_grad.clone()
            else:
                prev_flat_grad.copy_(flat_grad)
            prev_loss = loss

            # the step length: the first one scaled so the first move is at most lr in L1
            if state["n_iter"] == 1:
                g_sum = host_scalar(flat_grad.abs().sum())
                t = lr if g_sum is None else min(1.0, 1.0 / g_sum) * lr
            else:
                t = lr
            gtd = host_scalar(flat_grad.dot(d))
            if gtd is not None and gtd > -tolerance_change:
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                if line_search_fn != "strong_wolfe":
                    raise OptimizerStateError("only 'strong_wolfe' is supported")
                x_init = self._clone_param()

                def evaluate(x: list[Tensor], step: float, direction: Tensor) -> Any:
                    return self._directional_evaluate(closure, x, step, direction)

                loss, flat_grad, t, ls_func_evals = strong_wolfe(
                    evaluate,
                    x_init,
                    t,
                    d,
                    _known_or(loss, 0.0),
                    flat_grad,
                    _known_or(gtd, -1.0),
                    tolerance_change,
                )
                self._add_grad(t, d)
                opt_cond = self._optimal(flat_grad, tolerance_grad)
            else:
                self._add_grad(t, d)
                opt_cond = False
                if n_iter != max_iter:
                    # no evaluation after the last move: a stochastic closure gains nothing
                    _, loss = self._evaluate(closure)
                    flat_grad = self._gather_flat_grad()
                    opt_cond = self._optimal(flat_grad, tolerance_grad)
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            largest_move = host_scalar(d.mul(t).abs().max())
            if largest_move is not None and largest_move <= tolerance_change:
                break
            if loss is not None and prev_loss is not None:
                if abs(loss - prev_loss) < tolerance_change:
                    break

        state["d"], state["t"] = d, t
        state["old_dirs"], state["old_stps"], state["ro"] = old_dirs, old_stps, ro
        state["H_diag"] = h_diag
        state["prev_flat_grad"], state["prev_loss"] = prev_flat_grad, prev_loss
        return orig_loss


def _known_or(value: float | None, placeholder: float) -> float:
    """``value``, or in timing-only mode (no values) a placeholder of the same cost."""
    return placeholder if value is None else value
