"""torch.optim.LBFGS against a NumPy L-BFGS written from torch's algorithm: every point
the closure is evaluated at, on a least-squares problem (two parameters) and on the
Rosenbrock function, with and without the strong-Wolfe line search, for several history
sizes; convergence to ``np.linalg.lstsq``; the closure-call count; the state dict; the
one-group rule; a timing-only run; and an LSTM fitted to sine waves with it under
``kernbench run`` (``tests/data/sine_lstm_lbfgs.py``, the training flow of pytorch/examples'
``time_sequence_prediction``)."""

from __future__ import annotations

import json
import math
import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import OptimizerStateError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


# -- the reference ---------------------------------------------------------------------
def _cubic(x1, f1, g1, x2, f2, g2, bounds=None):
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    square = d1**2 - g1 * g2
    if square < 0:
        return (lo + hi) / 2
    d2 = math.sqrt(square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _wolfe(fun, x, t, d, f, g, gtd, tol_change, c1=1e-4, c2=0.9, max_ls=25):  # noqa: C901
    d_norm = np.abs(d).max()
    f_new, g_new = fun(x + t * d)
    evals, gtd_new = 1, g_new @ d
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, it = False, 0
    while it < max_ls:
        if (
            f_new > f + c1 * t * gtd
            or (it > 1 and f_new >= f_prev)
            or (abs(gtd_new) > -c2 * gtd and gtd_new >= 0)
        ):
            br = [[t_prev, f_prev, g_prev, gtd_prev], [t, f_new, g_new, gtd_new]]
            break
        if abs(gtd_new) <= -c2 * gtd:
            br, done = [[t, f_new, g_new, gtd_new]], True
            break
        t_next = _cubic(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                        bounds=(t + 0.01 * (t - t_prev), 10 * t))  # fmt: skip
        t_prev, f_prev, g_prev, gtd_prev, t = t, f_new, g_new, gtd_new, t_next
        f_new, g_new = fun(x + t * d)
        evals, gtd_new, it = evals + 1, g_new @ d, it + 1
    if it == max_ls:
        br = [[0.0, f, g, None], [t, f_new, g_new, None]]
    low, high = (0, 1) if br[0][1] <= br[-1][1] else (1, 0)
    insufficient = False
    while not done and it < max_ls:
        if abs(br[1][0] - br[0][0]) * d_norm < tol_change:
            break
        t = _cubic(br[0][0], br[0][1], br[0][3], br[1][0], br[1][1], br[1][3])
        top, bottom = max(br[0][0], br[1][0]), min(br[0][0], br[1][0])
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = fun(x + t * d)
        evals, gtd_new, it = evals + 1, g_new @ d, it + 1
        if f_new > f + c1 * t * gtd or f_new >= br[low][1]:
            br[high] = [t, f_new, g_new, gtd_new]
            low, high = (0, 1) if br[0][1] <= br[1][1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (br[high][0] - br[low][0]) >= 0:
                br[high] = list(br[low])
            br[low] = [t, f_new, g_new, gtd_new]
    return br[low][1], br[low][2], br[low][0], evals


class ReferenceLBFGS:
    """torch's L-BFGS on a flat float64 vector; ``fun(x) -> (loss, gradient)``."""

    def __init__(self, lr=1.0, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):  # fmt: skip
        self.lr, self.max_iter = lr, max_iter
        self.max_eval = max_iter * 5 // 4 if max_eval is None else max_eval
        self.tol_grad, self.tol_change = tolerance_grad, tolerance_change
        self.history, self.line_search = history_size, line_search_fn
        self.n_iter = self.func_evals = 0
        self.d = self.t = self.prev_g = self.prev_loss = None
        self.dirs, self.stps, self.ro, self.h_diag = [], [], [], 1.0

    def step(self, fun, x):  # noqa: C901, PLR0912
        loss, g = fun(x)
        first, evals = loss, 1
        self.func_evals += 1
        if np.abs(g).max() <= self.tol_grad:
            return x, first
        n = 0
        while n < self.max_iter:
            n += 1
            self.n_iter += 1
            if self.n_iter == 1:
                self.d, self.dirs, self.stps, self.ro, self.h_diag = -g, [], [], [], 1.0
            else:
                y, s = g - self.prev_g, self.d * self.t
                ys = y @ s
                if ys > 1e-10:
                    if len(self.dirs) == self.history:
                        self.dirs.pop(0), self.stps.pop(0), self.ro.pop(0)
                    self.dirs.append(y), self.stps.append(s), self.ro.append(1 / ys)
                    self.h_diag = ys / (y @ y)
                al = [0.0] * len(self.dirs)
                q = -g
                for i in reversed(range(len(self.dirs))):
                    al[i] = (self.stps[i] @ q) * self.ro[i]
                    q = q - al[i] * self.dirs[i]
                r = q * self.h_diag
                for i in range(len(self.dirs)):
                    r = r + (al[i] - (self.dirs[i] @ r) * self.ro[i]) * self.stps[i]
                self.d = r
            self.prev_g, self.prev_loss = g.copy(), loss
            t = min(1.0, 1.0 / np.abs(g).sum()) * self.lr if self.n_iter == 1 else self.lr
            self.t = t
            gtd = g @ self.d
            if gtd > -self.tol_change:
                break
            ls_evals = 0
            if self.line_search == "strong_wolfe":
                loss, g, t, ls_evals = _wolfe(fun, x, t, self.d, loss, g, gtd, self.tol_change)
                self.t = t
                x = x + t * self.d
                opt = np.abs(g).max() <= self.tol_grad
            else:
                x = x + t * self.d
                opt = False
                if n != self.max_iter:
                    loss, g = fun(x)
                    opt, ls_evals = np.abs(g).max() <= self.tol_grad, 1
            evals += ls_evals
            self.func_evals += ls_evals
            if n == self.max_iter or evals >= self.max_eval or opt:
                break
            if np.abs(self.d * t).max() <= self.tol_change:
                break
            if abs(loss - self.prev_loss) < self.tol_change:
                break
        return x, first


# -- the problems ------------------------------------------------------------------------
RNG = np.random.default_rng(7)
FEATURES = RNG.normal(size=(12, 3))
TARGETS = RNG.normal(size=(12, 2))


def _least_squares_numpy(x):
    """``mean((X W^T + b - Y)^2)`` with ``x = [W.ravel(), b]``."""
    w, b = x[:6].reshape(2, 3), x[6:]
    r = FEATURES @ w.T + b - TARGETS
    grad_r = 2 * r / r.size
    return float((r**2).mean()), np.concatenate([(grad_r.T @ FEATURES).ravel(), grad_r.sum(0)])


def _rosenbrock_numpy(x):
    a, b = x[:-1], x[1:]
    loss = float((100 * (b - a**2) ** 2 + (1 - a) ** 2).sum())
    g = np.zeros_like(x)
    g[:-1] += -400 * a * (b - a**2) - 2 * (1 - a)
    g[1:] += 200 * (b - a**2)
    return loss, g


def _least_squares_params():
    w = nn.Parameter(torch.from_numpy(np.full((2, 3), 0.1)))
    b = nn.Parameter(torch.from_numpy(np.zeros(2)))
    features, targets = torch.from_numpy(FEATURES), torch.from_numpy(TARGETS)

    def loss():
        return ((features @ w.t() + b - targets) ** 2).mean()

    return [w, b], loss


def _rosenbrock_params(start=(-1.2, 1.0, -0.5, 0.8)):
    x = nn.Parameter(torch.from_numpy(np.array(start, dtype=np.float64)))

    def loss():
        a, b = x[:-1], x[1:]
        return (100 * (b - a * a) ** 2 + (1 - a) ** 2).sum()

    return [x], loss


PROBLEMS = {
    "least_squares": (_least_squares_params, _least_squares_numpy),
    "rosenbrock": (_rosenbrock_params, _rosenbrock_numpy),
}


def _flat(params) -> np.ndarray:
    return np.concatenate([p.detach().numpy().ravel() for p in params])


def _traced(params, loss_fn, opt, trace):
    def closure():
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        trace.append(_flat(params))
        return loss

    return closure


def _run_both(problem, steps, **kwargs):
    make, fun = PROBLEMS[problem]
    params, loss_fn = make()
    x = _flat(params)
    opt = optim.LBFGS(params, **kwargs)
    trace, losses = [], []
    closure = _traced(params, loss_fn, opt, trace)
    for _ in range(steps):
        losses.append(opt.step(closure).item())
    ref_trace = []

    def traced_fun(point):
        ref_trace.append(point.copy())
        return fun(point)

    ref = ReferenceLBFGS(**kwargs)
    ref_losses = []
    for _ in range(steps):
        x, first = ref.step(traced_fun, x)
        ref_losses.append(first)
    return params, opt, trace, losses, ref, ref_trace, ref_losses, x


@pytest.mark.parametrize("problem", sorted(PROBLEMS))
@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
@pytest.mark.parametrize("history_size", [1, 3, 100])
def test_every_evaluated_point_matches_the_reference(ctx, problem, line_search_fn, history_size):
    params, opt, trace, losses, ref, ref_trace, ref_losses, x = _run_both(
        problem, 3, line_search_fn=line_search_fn, history_size=history_size, max_iter=8
    )
    assert len(trace) == len(ref_trace)
    np.testing.assert_allclose(np.array(trace), np.array(ref_trace), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-10)
    np.testing.assert_allclose(_flat(params), x, rtol=1e-9, atol=1e-12)
    state = opt.state[params[0]]
    assert state["func_evals"] == ref.func_evals == len(trace)
    assert state["n_iter"] == ref.n_iter
    assert len(state["old_dirs"]) == len(ref.dirs) <= history_size
    assert state["t"] == pytest.approx(ref.t, rel=1e-9)
    np.testing.assert_allclose(state["d"].numpy(), ref.d, rtol=1e-8, atol=1e-12)
    assert state["H_diag"] == pytest.approx(ref.h_diag, rel=1e-9)


def test_the_two_problems_tell_line_search_from_fixed_steps(ctx):
    """On Rosenbrock the strong-Wolfe search tries other points than fixed steps do (so the
    comparisons above check two different paths)."""
    fixed = _run_both("rosenbrock", 1, max_iter=8)[2]
    searched = _run_both("rosenbrock", 1, max_iter=8, line_search_fn="strong_wolfe")[2]
    assert len(fixed) != len(searched) or not np.allclose(fixed, searched)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_converges_to_the_least_squares_solution(ctx, line_search_fn):
    params, loss_fn = _least_squares_params()
    opt = optim.LBFGS(
        params, line_search_fn=line_search_fn, tolerance_grad=1e-12, tolerance_change=1e-15
    )
    closure = _traced(params, loss_fn, opt, [])
    for _ in range(3):
        opt.step(closure)
    design = np.hstack([FEATURES, np.ones((len(FEATURES), 1))])
    solution = np.linalg.lstsq(design, TARGETS, rcond=None)[0]
    np.testing.assert_allclose(params[0].detach().numpy(), solution[:3].T, atol=1e-9)
    np.testing.assert_allclose(params[1].detach().numpy(), solution[3], atol=1e-9)


def test_rosenbrock_reaches_its_minimum_with_strong_wolfe(ctx):
    params, loss_fn = _rosenbrock_params()
    opt = optim.LBFGS(params, line_search_fn="strong_wolfe", max_iter=100, max_eval=200)
    opt.step(_traced(params, loss_fn, opt, []))
    np.testing.assert_allclose(params[0].detach().numpy(), np.ones(4), atol=1e-5)


def test_the_closure_is_called_max_iter_times_without_line_search(ctx):
    """No line search: one evaluation before the loop and one after each move but the last,
    so ``max_iter`` calls a step while nothing converges; ``max_eval`` stops it sooner."""
    params, loss_fn = _rosenbrock_params()
    trace: list = []
    opt = optim.LBFGS(params, lr=0.01, max_iter=6)
    closure = _traced(params, loss_fn, opt, trace)
    opt.step(closure)
    assert len(trace) == 6 == opt.state[params[0]]["func_evals"]
    opt.step(closure)
    assert len(trace) == 12 == opt.state[params[0]]["func_evals"]
    assert opt.state[params[0]]["n_iter"] == 12
    capped = optim.LBFGS(params, lr=0.01, max_iter=6, max_eval=3)
    trace.clear()
    capped.step(_traced(params, loss_fn, capped, trace))
    assert len(trace) == 3 == capped.state[params[0]]["func_evals"]


def test_an_optimal_start_returns_after_one_evaluation(ctx):
    x = nn.Parameter(torch.from_numpy(np.ones(4)))
    trace: list = []
    opt = optim.LBFGS([x])

    def closure():
        opt.zero_grad()
        loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
        loss.backward()
        trace.append(1)
        return loss

    assert opt.step(closure).item() == 0.0
    assert len(trace) == 1
    assert opt.state[x]["n_iter"] == 0
    assert "d" not in opt.state[x]


def test_a_parameter_without_a_gradient_stays_put(ctx):
    """A parameter the loss does not use has no ``grad``: it counts as zeros in the flat
    gradient (as torch's), so the step leaves it as it was."""
    params, loss_fn = _least_squares_params()
    unused = nn.Parameter(torch.from_numpy(np.array([3.0, -4.0])))
    opt = optim.LBFGS([params[0], unused, params[1]], max_iter=5)
    opt.step(_traced(params, loss_fn, opt, []))
    assert unused.grad is None
    np.testing.assert_array_equal(unused.detach().numpy(), [3.0, -4.0])
    assert opt.state[params[0]]["d"].shape == (10,)
    np.testing.assert_array_equal(opt.state[params[0]]["d"].numpy()[6:8], [0.0, 0.0])


def test_a_step_needs_a_closure_that_returns_the_loss(ctx):
    params, loss_fn = _least_squares_params()
    opt = optim.LBFGS(params)
    with pytest.raises(TypeError, match="needs a closure"):
        opt.step()
    with pytest.raises(TypeError, match="must return the loss"):
        opt.step(lambda: None)


def test_state_dict_round_trip(ctx):
    """A second optimizer loaded with the first's state dict, on a copy of its parameters,
    evaluates the same points as the first from there on."""
    params, loss_fn = _least_squares_params()
    first = optim.LBFGS(params, history_size=3, max_iter=4)
    first.step(_traced(params, loss_fn, first, []))
    saved = first.state_dict()
    assert set(saved["state"][0]) == {
        "func_evals", "n_iter", "d", "t", "old_dirs", "old_stps", "ro", "H_diag",
        "prev_flat_grad", "prev_loss", "al",
    }  # fmt: skip
    assert saved["param_groups"][0]["params"] == [0, 1]
    assert saved["param_groups"][0]["max_eval"] == 5
    copies = [nn.Parameter(torch.from_numpy(p.detach().numpy().copy())) for p in params]
    features, targets = torch.from_numpy(FEATURES), torch.from_numpy(TARGETS)
    second = optim.LBFGS(copies, history_size=100, max_iter=20)
    second.load_state_dict(saved)
    assert second.param_groups[0]["history_size"] == 3
    traces: list[list] = [[], []]
    first.step(_traced(params, loss_fn, first, traces[0]))
    second.step(
        _traced(
            copies,
            lambda: ((features @ copies[0].t() + copies[1] - targets) ** 2).mean(),
            second,
            traces[1],
        )
    )
    np.testing.assert_allclose(np.array(traces[0]), np.array(traces[1]), rtol=1e-12)
    assert second.state[copies[0]]["func_evals"] == first.state[params[0]]["func_evals"]


def test_one_parameter_group_only(ctx):
    a, b = nn.Parameter(torch.zeros(2)), nn.Parameter(torch.zeros(3))
    with pytest.raises(ValueError, match=r"LBFGS doesn't support per-parameter options"):
        optim.LBFGS([{"params": [a]}, {"params": [b], "lr": 0.1}])
    assert optim.LBFGS([{"params": [a, b]}]).param_groups[0]["max_eval"] == 25


def test_an_unknown_line_search_is_refused_at_the_step(ctx):
    params, loss_fn = _least_squares_params()
    opt = optim.LBFGS(params, line_search_fn="backtracking")
    with pytest.raises(OptimizerStateError, match="only 'strong_wolfe' is supported"):
        opt.step(_traced(params, loss_fn, opt, []))
    assert issubclass(OptimizerStateError, RuntimeError)  # what torch raises


def _timed_steps(timing_only: bool, line_search_fn=None) -> tuple[int, int, int]:
    """``(closure calls, iterations, simulated ps)`` of one Rosenbrock step with ``lr``
    small enough that a functional run never stops early."""
    context = RuntimeContext("tiny", timing_only=timing_only)
    with use_context(context):
        x = nn.Parameter(torch.ones(4) if timing_only else torch.from_numpy(
            np.array([-1.2, 1.0, -0.5, 0.8], dtype=np.float32)))  # fmt: skip
        opt = optim.LBFGS([x], lr=1e-4, max_iter=5, line_search_fn=line_search_fn)
        calls = []

        def closure():
            opt.zero_grad()
            loss = (100 * (x[1:] - x[:-1] ** 2) ** 2 + (1 - x[:-1]) ** 2).sum()
            loss.backward()
            calls.append(1)
            return loss

        before = context.now
        opt.step(closure)
        return len(calls), opt.state[x]["n_iter"], context.now - before


def test_timing_only_runs_max_iter_iterations_at_a_functional_runs_cost():
    calls, iterations, elapsed = _timed_steps(timing_only=True)
    assert (calls, iterations) == (5, 5)
    assert elapsed > 0
    assert _timed_steps(timing_only=False) == (calls, iterations, elapsed)


def test_timing_only_strong_wolfe_takes_the_first_trial_step():
    calls, iterations, elapsed = _timed_steps(timing_only=True, line_search_fn="strong_wolfe")
    assert (calls, iterations) == (6, 5)  # one before the loop, one trial per iteration
    assert elapsed > _timed_steps(timing_only=True)[2]


# -- an LSTM fitted with LBFGS under kernbench run, as time_sequence_prediction trains -------
ROOT = Path(__file__).resolve().parents[1]
SEQUENCE_PROGRAM = ROOT / "tests" / "data" / "sine_lstm_lbfgs.py"


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _lstm_cell(x, h, c, weights, name):
    gates = (x @ weights[f"{name}.weight_ih"].T + weights[f"{name}.bias_ih"]
             + h @ weights[f"{name}.weight_hh"].T + weights[f"{name}.bias_hh"])  # fmt: skip
    i, f, g, o = np.split(gates, 4, axis=1)
    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
    return _sigmoid(o) * np.tanh(c), c


def _untrained_loss(program: dict) -> float:
    """The program's first loss worked out in NumPy from its untrained model's weights
    (made as the program makes them: ``torch.manual_seed(0)``, ``Predictor()``,
    ``.double()``) and its waves."""
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        model = program["Predictor"]().double()
        weights = {k: v.numpy() for k, v in model.state_dict().items()}
    waves = program["make_waves"]()
    inputs, targets = waves[3:, :-1], waves[3:, 1:]
    h1 = c1 = h2 = c2 = np.zeros((len(inputs), program["HIDDEN"]))
    outputs = []
    for t in range(inputs.shape[1]):
        h1, c1 = _lstm_cell(inputs[:, t : t + 1], h1, c1, weights, "first")
        h2, c2 = _lstm_cell(h1, h2, c2, weights, "second")
        outputs.append(h2 @ weights["head.weight"].T + weights["head.bias"])
    return float(((np.hstack(outputs) - targets) ** 2).mean())


def test_an_lstm_trains_with_lbfgs_under_kernbench_run(tmp_path):
    """``kernbench run`` of the program for one step of ``max_iter=10``: each step calls
    the closure ``max_iter`` times and returns its first loss; the losses fall; the first
    is the untrained model's, worked out in NumPy; the plots are written where it runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(SEQUENCE_PROGRAM),
         "--topology", "multi_sip", "--", "--steps", "1", "--max-iter", "10"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(rows[-1].removeprefix("RESULT "))
    steps, evaluations = result["returned"], result["evaluated"]
    assert [len(losses) for losses in evaluations] == [10]
    assert (result["func_evals"], result["n_iter"]) == (10, 10)
    assert steps == [losses[0] for losses in evaluations]
    assert evaluations[0][-1] < evaluations[0][0] / 5  # ten iterations fit the waves
    assert len(result["held"]) == 1 and math.isfinite(result["held"][0])
    program = runpy.run_path(str(SEQUENCE_PROGRAM), run_name="sine_lstm_lbfgs")
    assert steps[0] == pytest.approx(_untrained_loss(program), rel=1e-12)
    assert result["shape"] == [3, program["SAMPLES"] - 1 + 4]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wave0.png"]
