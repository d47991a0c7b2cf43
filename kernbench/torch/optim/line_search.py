"""The strong-Wolfe line search ``torch.optim.LBFGS`` runs with ``line_search_fn="strong_wolfe"``,
and the cubic interpolation it steps by: torch's bracketing and zoom phases (Moré and
Thuente's scheme as ``lswolfe.lua`` has it) with the same constants and the same order of
tests, so it tries the same step lengths and calls the closure the same number of times.

The step lengths, losses and directional derivatives are host floats: each directional
derivative is an inner product on the device (``Tensor.dot``) read back to the host, as
torch's comparisons read it.  In timing-only mode there are no values to compare; the
search then takes the first trial step (one evaluation), as a search whose first step
satisfies the Wolfe conditions does, so a timing-only step costs one closure call per
iteration.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kernbench.torch.host_values import checked_read
from kernbench.torch.tensor import Tensor

__all__ = ["cubic_interpolate", "host_scalar", "strong_wolfe"]

SUFFICIENT_DECREASE = 1e-4  # c1, the Armijo constant
CURVATURE = 0.9  # c2, the strong-Wolfe curvature constant
MAX_LINE_SEARCH_ITERATIONS = 25

DirectionalEvaluate = Callable[[list[Tensor], float, Tensor], tuple[float | None, Tensor]]


def host_scalar(value: Tensor | float) -> float | None:
    """A one-element tensor's value read to the host through the fabric (a transfer that
    costs time, as torch's ``.item()``), a number as it is, or None in timing-only mode."""
    if not isinstance(value, Tensor):
        return float(value)
    values = checked_read(value)
    return None if values is None else float(values.reshape(-1)[0])


def cubic_interpolate(
    x1: float,
    f1: float,
    g1: float,
    x2: float,
    f2: float,
    g2: float,
    bounds: tuple[float, float] | None = None,
) -> float:
    """The minimiser of the cubic through ``(x1, f1)`` and ``(x2, f2)`` with slopes ``g1`` and
    ``g2``, clamped to ``bounds`` (default: the interval between the points); the middle of
    the bounds when the cubic has no minimum."""
    low, high = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (low + high) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        minimum = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        minimum = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(minimum, low), high)


class _Bracket:
    """Two trial points (step, loss, gradient, directional derivative) around a Wolfe
    point, or one point that satisfies the conditions."""

    def __init__(self, points: list[tuple[float, float, Tensor, float]]) -> None:
        self.t = [p[0] for p in points]
        self.f = [p[1] for p in points]
        self.g = [p[2] for p in points]
        self.gtd = [p[3] for p in points]

    def set(self, i: int, t: float, f: float, g: Tensor, gtd: float) -> None:
        self.t[i], self.f[i], self.g[i], self.gtd[i] = t, f, g, gtd

    def low_high(self) -> tuple[int, int]:
        return (0, 1) if self.f[0] <= self.f[-1] else (1, 0)


def strong_wolfe(
    evaluate: DirectionalEvaluate,
    x: list[Tensor],
    t: float,
    d: Tensor,
    f: float,
    g: Tensor,
    gtd: float,
    tolerance_change: float = 1e-9,
) -> tuple[float | None, Tensor, float, int]:
    """``(loss, flat_grad, step, evaluations)`` at a step along ``d`` from ``x`` that satisfies
    the strong Wolfe conditions (or the best point found in 25 evaluations); ``evaluate(x,
    t, d)`` is the loss and flat gradient at ``x + t d`` (the parameters are put back)."""
    d_norm = host_scalar(d.abs().max())
    g = g.clone()
    f_new, g_new = evaluate(x, t, d)
    evaluations = 1
    gtd_new = host_scalar(g_new.dot(d))
    if f_new is None or gtd_new is None or d_norm is None:
        return f_new, g_new, t, evaluations
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done = False
    ls_iter = 0
    bracket: _Bracket | None = None
    while ls_iter < MAX_LINE_SEARCH_ITERATIONS:
        armijo_fails = f_new > f + SUFFICIENT_DECREASE * t * gtd
        if (
            armijo_fails
            or (ls_iter > 1 and f_new >= f_prev)
            or (abs(gtd_new) > -CURVATURE * gtd and gtd_new >= 0)
        ):
            previous_point = (t_prev, f_prev, g_prev, gtd_prev)
            bracket = _Bracket([previous_point, (t, f_new, g_new.clone(), gtd_new)])
            break
        if abs(gtd_new) <= -CURVATURE * gtd:
            bracket = _Bracket([(t, f_new, g_new, gtd_new)])
            done = True
            break
        # extrapolate: a step between just past t and ten times t
        previous = t
        t = cubic_interpolate(
            t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(t + 0.01 * (t - t_prev), t * 10)
        )
        t_prev, f_prev, g_prev, gtd_prev = previous, f_new, g_new.clone(), gtd_new
        f_new, g_new = evaluate(x, t, d)
        evaluations += 1
        gtd_new = _known(host_scalar(g_new.dot(d)))
        f_new = _known(f_new)
        ls_iter += 1
    if ls_iter == MAX_LINE_SEARCH_ITERATIONS:
        bracket = _Bracket([(0.0, f, g, math.nan), (t, f_new, g_new, math.nan)])
    assert bracket is not None
    insufficient_progress = False
    low, high = bracket.low_high()
    while not done and ls_iter < MAX_LINE_SEARCH_ITERATIONS:
        if abs(bracket.t[1] - bracket.t[0]) * d_norm < tolerance_change:
            break
        t = cubic_interpolate(
            bracket.t[0], bracket.f[0], bracket.gtd[0], bracket.t[1], bracket.f[1], bracket.gtd[1]
        )
        # a trial too near an end of the bracket twice running (or past it) moves a tenth of
        # the bracket's length inside, so the bracket keeps shrinking
        top, bottom = max(bracket.t), min(bracket.t)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient_progress or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient_progress = False
            else:
                insufficient_progress = True
        else:
            insufficient_progress = False
        f_trial, g_new = evaluate(x, t, d)
        f_new = _known(f_trial)
        evaluations += 1
        gtd_new = _known(host_scalar(g_new.dot(d)))
        ls_iter += 1
        if f_new > f + SUFFICIENT_DECREASE * t * gtd or f_new >= bracket.f[low]:
            bracket.set(high, t, f_new, g_new.clone(), gtd_new)
            low, high = bracket.low_high()
        else:
            if abs(gtd_new) <= -CURVATURE * gtd:
                done = True
            elif gtd_new * (bracket.t[high] - bracket.t[low]) >= 0:
                bracket.set(high, bracket.t[low], bracket.f[low], bracket.g[low], bracket.gtd[low])
            bracket.set(low, t, f_new, g_new.clone(), gtd_new)
    return bracket.f[low], bracket.g[low], bracket.t[low], evaluations


def _known(value: float | None) -> float:
    """A value read in functional mode (the search only reads on after its first trial
    when the first one had values)."""
    assert value is not None
    return value
