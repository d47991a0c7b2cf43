"""torch.optim.lr_scheduler's MultiStepLR, ExponentialLR, ConstantLR, PolynomialLR,
MultiplicativeLR, CosineAnnealingWarmRestarts, CyclicLR, SequentialLR, ChainedScheduler and
ReduceLROnPlateau: each lr sequence against torch's closed form or rule written out here
with plain Python math, state_dict round trips, and torch's argument errors."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import KernBenchError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim
from kernbench.torch.optim import lr_scheduler

STEPS = 12
BASE = 0.1


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _optimizer(lr: float = BASE, cls=optim.SGD, **kwargs):
    return cls([nn.Parameter(torch.ones(1))], lr=lr, **kwargs)


def _lrs(opt, scheduler, steps: int = STEPS) -> list[float]:
    """The lr after construction and after each of ``steps`` optimizer+scheduler steps."""
    out = [scheduler.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        scheduler.step()
        out.append(scheduler.get_last_lr()[0])
        assert out[-1] == opt.param_groups[0]["lr"]
    return out


def _check(got, expected):
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------ single schedulers


def test_multistep_lr_counts_repeated_milestones(ctx):
    opt = _optimizer()
    got = _lrs(opt, lr_scheduler.MultiStepLR(opt, milestones=[2, 5, 5, 9], gamma=0.5))
    passed = [sum(m <= t for m in (2, 5, 5, 9)) for t in range(STEPS + 1)]
    _check(got, [BASE * 0.5**k for k in passed])


def test_exponential_lr(ctx):
    opt = _optimizer()
    got = _lrs(opt, lr_scheduler.ExponentialLR(opt, gamma=0.8))
    _check(got, [BASE * 0.8**t for t in range(STEPS + 1)])


def test_constant_lr(ctx):
    opt = _optimizer()
    got = _lrs(opt, lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=4))
    _check(got, [BASE * (0.5 if t < 4 else 1.0) for t in range(STEPS + 1)])
    opt = _optimizer()
    default = lr_scheduler.ConstantLR(opt)
    assert (default.factor, default.total_iters) == (1.0 / 3, 5)


def test_polynomial_lr(ctx):
    opt = _optimizer()
    got = _lrs(opt, lr_scheduler.PolynomialLR(opt, total_iters=6, power=2.0))
    _check(got, [BASE * (1 - min(t, 6) / 6) ** 2 for t in range(STEPS + 1)])


def test_multiplicative_lr(ctx):
    def factor(epoch):
        return 0.9 if epoch % 2 else 0.95

    opt = _optimizer()
    got = _lrs(opt, lr_scheduler.MultiplicativeLR(opt, lr_lambda=factor))
    expected = [BASE]
    for t in range(1, STEPS + 1):
        expected.append(expected[-1] * factor(t))
    _check(got, expected)


def _sgdr(t: float, T_0: int, T_mult: int, eta_min: float) -> float:
    """SGDR's lr at (possibly fractional) epoch t: find the restart t falls after."""
    start, length = 0, T_0
    while t >= start + length:
        start, length = start + length, length * T_mult
    return eta_min + (BASE - eta_min) * (1 + math.cos(math.pi * (t - start) / length)) / 2


@pytest.mark.parametrize(("T_0", "T_mult"), [(3, 1), (2, 2), (3, 3)])
def test_cosine_annealing_warm_restarts(ctx, T_0, T_mult):
    opt = _optimizer()
    sched = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=T_0, T_mult=T_mult, eta_min=0.01)
    got = _lrs(opt, sched, 20)
    _check(got, [_sgdr(t, T_0, T_mult, 0.01) for t in range(21)])


@pytest.mark.parametrize(("T_0", "T_mult"), [(3, 1), (2, 2)])
def test_cosine_annealing_warm_restarts_with_a_fractional_epoch(ctx, T_0, T_mult):
    opt = _optimizer()
    sched = lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=T_0, T_mult=T_mult, eta_min=0.01)
    iters = 4  # the per-batch pattern torch documents: step(epoch + i / iters)
    for epoch in range(4):
        for i in range(iters):
            sched.step(epoch + i / iters)
            t = epoch + i / iters
            assert sched.get_last_lr()[0] == pytest.approx(_sgdr(t, T_0, T_mult, 0.01), rel=1e-12)
            assert sched.last_epoch == math.floor(t)
    sched.step(6.5)
    sched.step()  # an integer step after an explicit epoch continues from it
    assert sched.last_epoch == 7
    assert sched.get_last_lr()[0] == pytest.approx(_sgdr(7.5, T_0, T_mult, 0.01), rel=1e-12)


def _triangle(t: int, up: int, down: int) -> tuple[int, float]:
    """(cycle number from 1, height in [0, 1]) of a triangle wave rising for ``up`` steps and
    falling for ``down``."""
    cycle, position = divmod(t, up + down)
    height = position / up if position <= up else (up + down - position) / down
    return cycle + 1, height


@pytest.mark.parametrize("mode", ["triangular", "triangular2", "exp_range"])
def test_cyclic_lr_and_momentum(ctx, mode):
    opt = _optimizer(momentum=0.9)
    sched = lr_scheduler.CyclicLR(
        opt, base_lr=0.01, max_lr=0.1, step_size_up=3, step_size_down=2, mode=mode, gamma=0.9
    )
    lrs, momenta = [sched.get_last_lr()[0]], [opt.param_groups[0]["momentum"]]
    for _ in range(STEPS):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
        momenta.append(opt.param_groups[0]["momentum"])
    expected_lr, expected_m = [], []
    for t in range(STEPS + 1):
        cycle, height = _triangle(t, 3, 2)
        scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": 0.9**t}[mode]
        expected_lr.append(0.01 + 0.09 * height * scale)
        expected_m.append(0.9 - 0.1 * height * scale)  # default momenta: 0.8 up to 0.9
    _check(lrs, expected_lr)
    _check(momenta, expected_m)


def test_cyclic_lr_cycles_adams_beta1_and_takes_a_scale_fn(ctx):
    opt = _optimizer(cls=optim.Adam)
    sched = lr_scheduler.CyclicLR(
        opt, base_lr=0.01, max_lr=0.05, step_size_up=2, scale_fn=lambda x: 1 / x
    )
    got, betas = _lrs(opt, sched, 8), opt.param_groups[0]["betas"]
    _check(got, [0.01 + 0.04 * _triangle(t, 2, 2)[1] / _triangle(t, 2, 2)[0] for t in range(9)])
    assert betas[1] == 0.999 and betas[0] == pytest.approx(0.9, rel=1e-12)  # back at a trough
    saved = sched.state_dict()
    assert saved["_scale_fn_custom"] is None  # a lambda is not saved, as torch
    opt = _optimizer()
    with pytest.raises(ValueError, match="mode is invalid and scale_fn is None"):
        lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=0.1, mode="square")
    with pytest.raises(ValueError, match="max_lr must have the same length as optimizer"):
        lr_scheduler.CyclicLR(opt, base_lr=0.01, max_lr=[0.1, 0.2])


# ------------------------------------------------------------------ schedulers of schedulers


def test_sequential_linear_warmup_then_cosine(ctx):
    opt = _optimizer()
    warmup = lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=9, eta_min=0.001)
    sched = lr_scheduler.SequentialLR(opt, schedulers=[warmup, cosine], milestones=[3])
    got = _lrs(opt, sched)
    # warm-up epochs 0..2; at the milestone epoch 3 the cosine starts over at its epoch 0
    # (the base lr), not where the warm-up would have been
    expected = [BASE * (0.1 + 0.9 * t / 3) for t in range(3)]
    expected += [0.001 + (BASE - 0.001) * (1 + math.cos(math.pi * (t - 3) / 9)) / 2
                 for t in range(3, STEPS + 1)]  # fmt: skip
    _check(got, expected)
    assert got[3] == BASE
    assert (warmup.last_epoch, cosine.last_epoch, sched.last_epoch) == (2, 9, 12)


def test_each_optimizer_step_uses_the_lr_the_scheduler_set(ctx):
    p0 = np.linspace(-1, 1, 6)
    grads = [np.random.default_rng(s).uniform(-1, 1, 6) for s in range(STEPS)]
    p = nn.Parameter(torch.from_numpy(p0.copy()))
    opt = optim.SGD([p], lr=BASE)
    warmup = lr_scheduler.LinearLR(opt, start_factor=0.25, total_iters=2)
    cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS - 2)
    sched = lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[2])
    for g in grads:
        p.grad = torch.from_numpy(g.copy())
        opt.step()
        sched.step()
    lrs = [BASE * (0.25 + 0.75 * t / 2) for t in range(2)]
    lrs += [BASE * (1 + math.cos(math.pi * (t - 2) / (STEPS - 2))) / 2 for t in range(2, STEPS)]
    expected = p0 - sum(lr * g for lr, g in zip(lrs, grads, strict=True))
    np.testing.assert_allclose(p.detach().numpy(), expected, rtol=1e-12, atol=1e-14)


def test_sequential_constant_then_exponential_as_torchs_example(ctx):
    opt = _optimizer()
    constant = lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=4)
    decay = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    sched = lr_scheduler.SequentialLR(opt, schedulers=[constant, decay], milestones=[4])
    got = _lrs(opt, sched)
    _check(got, [BASE * 0.1 if t < 4 else BASE * 0.9 ** (t - 4) for t in range(STEPS + 1)])


def test_sequential_with_three_schedulers(ctx):
    opt = _optimizer()
    first = lr_scheduler.ConstantLR(opt, factor=0.5, total_iters=10)
    second = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    third = lr_scheduler.StepLR(opt, step_size=2, gamma=0.1)
    sched = lr_scheduler.SequentialLR(opt, [first, second, third], milestones=[2, 5])
    got = _lrs(opt, sched)
    expected = [0.05, 0.05, 0.1, 0.05, 0.025] + [BASE * 0.1 ** ((t - 5) // 2) for t in range(5, 13)]
    _check(got, expected)


def test_chained_scheduler_multiplies_the_factors(ctx):
    opt = _optimizer()
    constant = lr_scheduler.ConstantLR(opt, factor=0.1, total_iters=4)
    decay = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    sched = lr_scheduler.ChainedScheduler([constant, decay], optimizer=opt)
    got = _lrs(opt, sched)
    _check(got, [BASE * 0.9**t * (0.1 if t < 4 else 1.0) for t in range(STEPS + 1)])


def test_sequential_state_dict_round_trip(ctx):
    def make(opt):
        warmup = lr_scheduler.LinearLR(opt, start_factor=0.2, total_iters=4)
        cosine = lr_scheduler.CosineAnnealingLR(opt, T_max=8)
        return lr_scheduler.SequentialLR(opt, [warmup, cosine], milestones=[4])

    opt = _optimizer()
    straight = _lrs(opt, make(opt))
    opt = _optimizer()
    sched = make(opt)
    first = _lrs(opt, sched, 6)
    saved_sched, saved_opt = sched.state_dict(), opt.state_dict()
    assert [s["last_epoch"] for s in saved_sched["_schedulers"]] == [3, 2]
    opt = _optimizer()
    sched = make(opt)
    opt.load_state_dict(saved_opt)
    sched.load_state_dict(saved_sched)
    rest = _lrs(opt, sched, STEPS - 6)
    _check(first + rest[1:], straight)


def test_sequential_and_chained_refuse_what_torch_refuses(ctx):
    opt, other = _optimizer(), _optimizer()
    mine = lr_scheduler.ExponentialLR(opt, gamma=0.9)
    theirs = lr_scheduler.ExponentialLR(other, gamma=0.9)
    plateau = lr_scheduler.ReduceLROnPlateau(opt)
    with pytest.raises(ValueError, match="SequentialLR expects at least one scheduler"):
        lr_scheduler.SequentialLR(opt, [], [])
    with pytest.raises(ValueError, match="one more than the number of milestone points"):
        lr_scheduler.SequentialLR(opt, [mine, mine], [1, 2])
    with pytest.raises(ValueError, match="does not support `ReduceLROnPlateau` scheduler"):
        lr_scheduler.SequentialLR(opt, [mine, plateau], [2])
    with pytest.raises(ValueError, match="expects all schedulers to belong to the same optim"):
        lr_scheduler.ChainedScheduler([mine, theirs])
    with pytest.raises(TensorTypeError, match="at index 0 should have `optimizer`"):
        lr_scheduler.ChainedScheduler([object()], optimizer=opt)
    with pytest.raises(ValueError, match="expects at least one scheduler to be chained"):
        lr_scheduler.ChainedScheduler([])


# ------------------------------------------------------------------ ReduceLROnPlateau


def _plateau(opt, sched, metrics) -> list[float]:
    out = []
    for metric in metrics:
        opt.step()
        sched.step(metric)
        out.append(sched.get_last_lr()[0])
    return out


def test_reduce_on_plateau_with_patience_cooldown_and_min_lr(ctx):
    opt = _optimizer()
    sched = lr_scheduler.ReduceLROnPlateau(
        opt, factor=0.5, patience=1, threshold=0.1, cooldown=2, min_lr=0.015
    )
    metrics = [1.0, 0.95, 0.95, 0.8, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.5]
    # step 1 sets best=1.0; 0.95 is no improvement at rel threshold 0.1 (needs < 0.9): two
    # bad epochs > patience 1 cut the lr at step 3; step 4 improves (0.8 < 0.9) inside the
    # cooldown; steps 5-6 are cooldown then one bad epoch; step 7 cuts; 8-9 cooldown; 10-11
    # bad, cut to max(0.0125, min_lr 0.015); 12 improves
    expected = [0.1, 0.1, 0.05, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.025, 0.015, 0.015]
    _check(_plateau(opt, sched, metrics), expected)
    assert sched.best == 0.5 and sched.last_epoch == 12


def test_reduce_on_plateau_max_mode_abs_threshold_and_eps(ctx):
    opt = _optimizer(lr=0.1)
    sched = lr_scheduler.ReduceLROnPlateau(opt, mode="max", threshold=0.05, threshold_mode="abs",
                                           patience=0)  # fmt: skip
    # 1.04 is not above best 1.0 + 0.05: cut; 1.06 is: new best; 1.1 is not above 1.11: cut
    _check(_plateau(opt, sched, [1.0, 1.04, 1.06, 1.1]), [0.1, 0.01, 0.01, 0.001])
    opt = _optimizer(lr=1e-8)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, eps=1e-8)
    assert _plateau(opt, sched, [1.0, 2.0]) == [1e-8, 1e-8]  # a cut smaller than eps is skipped


def test_reduce_on_plateau_min_lr_per_group_state_and_errors(ctx):
    a, b = nn.Parameter(torch.ones(1)), nn.Parameter(torch.ones(1))
    opt = optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.2}], lr=0.1)
    sched = lr_scheduler.ReduceLROnPlateau(opt, patience=0, factor=0.1, min_lr=[0.05, 0.0])
    sched.step(torch.tensor(1.0))  # a 0-d tensor metric, as torch takes
    sched.step(2.0)
    assert [g["lr"] for g in opt.param_groups] == [0.05, pytest.approx(0.02, rel=1e-15)]
    saved = sched.state_dict()
    again = lr_scheduler.ReduceLROnPlateau(opt)
    again.load_state_dict(saved)
    assert (again.best, again.patience, again.min_lrs) == (1.0, 0, [0.05, 0.0])
    with pytest.raises(ValueError, match=r"^Factor should be < 1.0.$"):
        lr_scheduler.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="expected 2 min_lrs, got 1"):
        lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1])
    with pytest.raises(ValueError, match="mode avg is unknown!"):
        lr_scheduler.ReduceLROnPlateau(opt, mode="avg")
    with pytest.raises(ValueError, match="threshold mode pct is unknown!"):
        lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="pct")
    opt.add_param_group({"params": [nn.Parameter(torch.ones(1))]})
    with pytest.raises(RuntimeError, match="number of param groups in the `optimizer` \\(3\\)"):
        sched.step(3.0)


# ------------------------------------------------------------------ errors, state, imports


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda o: lr_scheduler.ConstantLR(o, factor=1.5), ValueError,
         "Constant multiplicative factor expected to be between 0 and 1."),
        (lambda o: lr_scheduler.MultiplicativeLR(o, lr_lambda=0.9), TypeError,
         "lr_lambda should be a function, but got float"),
        (lambda o: lr_scheduler.MultiplicativeLR(o, lr_lambda=[abs, abs]), ValueError,
         "Expected 1 lr_lambdas, but got 2"),
        (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=0), ValueError,
         "Expected positive integer T_0, but got 0"),
        (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, T_0=2, T_mult=1.5), ValueError,
         "Expected integer T_mult >= 1, but got 1.5"),
        (lambda o: lr_scheduler.CosineAnnealingWarmRestarts(o, 2).step(-1), ValueError,
         "Expected non-negative epoch, but got -1"),
        (lambda o: lr_scheduler.CyclicLR(_optimizer(cls=optim.Adagrad), 0.01, 0.1), ValueError,
         "optimizer must support momentum or beta1 with `cycle_momentum` option enabled"),
        (lambda o: lr_scheduler.ExponentialLR("sgd", gamma=0.9), TypeError,
         "str is not an Optimizer"),
    ],
)  # fmt: skip
def test_argument_errors_are_torchs(ctx, make, error, message):
    with pytest.raises(error) as caught:
        make(_optimizer())
    assert str(caught.value) == message and isinstance(caught.value, KernBenchError)


def test_resuming_does_not_step_ahead(ctx):
    opt = _optimizer()
    sched = lr_scheduler.ExponentialLR(opt, gamma=0.5)
    _lrs(opt, sched, 3)
    resumed = lr_scheduler.ExponentialLR(opt, gamma=0.5, last_epoch=3)
    assert resumed.get_last_lr() == [BASE * 0.5**3] and resumed.last_epoch == 4
    with pytest.raises(KeyError, match="param 'initial_lr' is not specified"):
        lr_scheduler.PolynomialLR(_optimizer(), last_epoch=2)


def test_closed_forms_for_step_with_an_epoch(ctx):
    cases = [
        (lambda o: lr_scheduler.MultiStepLR(o, [2, 4], gamma=0.5), 5, BASE * 0.25),
        (lambda o: lr_scheduler.ExponentialLR(o, gamma=0.5), 3, BASE * 0.125),
        (lambda o: lr_scheduler.ConstantLR(o, factor=0.5, total_iters=4), 2, BASE * 0.5),
        (lambda o: lr_scheduler.PolynomialLR(o, total_iters=4, power=1.0), 3, BASE * 0.25),
    ]
    for make, epoch, expected in cases:
        opt = _optimizer()
        sched = make(opt)
        with pytest.warns(UserWarning, match="The epoch parameter in `scheduler.step"):
            sched.step(epoch)
        assert sched.get_last_lr()[0] == pytest.approx(expected, rel=1e-12)


def test_state_dict_round_trips(ctx):
    opt = _optimizer()
    sched = lr_scheduler.MultiStepLR(opt, milestones=[3, 6], gamma=0.5)
    _lrs(opt, sched, 4)
    saved = sched.state_dict()
    assert saved["last_epoch"] == 4 and "optimizer" not in saved
    other = lr_scheduler.MultiStepLR(_optimizer(), milestones=[1], gamma=0.1)
    other.load_state_dict(saved)
    assert (other.last_epoch, other.gamma, dict(other.milestones)) == (4, 0.5, {3: 1, 6: 1})
    opt = _optimizer()
    sched = lr_scheduler.MultiplicativeLR(opt, lr_lambda=lambda e: 0.9)
    assert sched.state_dict()["lr_lambdas"] == [None]


def test_all_schedulers_import_from_lr_scheduler(ctx):
    namespace: dict = {}
    exec(
        "from kernbench.torch.optim.lr_scheduler import SequentialLR, ChainedScheduler, "
        "MultiStepLR, ExponentialLR, ConstantLR, PolynomialLR, MultiplicativeLR, "
        "CosineAnnealingWarmRestarts, ReduceLROnPlateau, CyclicLR, LRScheduler",
        namespace,
    )
    assert namespace["SequentialLR"] is torch.optim.lr_scheduler.SequentialLR
    assert issubclass(namespace["ReduceLROnPlateau"], namespace["LRScheduler"])
    assert issubclass(namespace["CyclicLR"], lr_scheduler.LRScheduler)


def test_a_multistep_state_dict_checkpoints_with_torch_save(ctx, tmp_path):
    opt = _optimizer()
    sched = lr_scheduler.MultiStepLR(opt, milestones=[2, 4, 4], gamma=0.5)
    _lrs(opt, sched, 3)
    torch.save({"scheduler": sched.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "c")
    saved = torch.load(tmp_path / "c", weights_only=True)
    assert type(saved["scheduler"]["milestones"]) is Counter  # as torch's loader keeps it
    opt = _optimizer()
    resumed = lr_scheduler.MultiStepLR(opt, milestones=[9])
    opt.load_state_dict(saved["optimizer"])
    resumed.load_state_dict(saved["scheduler"])
    _check(_lrs(opt, resumed, 3), [BASE * 0.5, BASE * 0.125, BASE * 0.125, BASE * 0.125])
