"""``torch.distributions``: densities, entropies and KL against NumPy, gradients through
``log_prob`` and ``rsample``, sampling frequencies, torch's argument checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.distributions import (
    Bernoulli,
    Categorical,
    Distribution,
    Normal,
    Uniform,
    kl_divergence,
)


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


def test_categorical_by_probs_and_by_logits(ctx):
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], dtype=np.float32)
    m = Categorical(torch.tensor(probs * 4))  # normalised, as torch's
    np.testing.assert_allclose(m.probs.numpy(), probs, rtol=1e-6)
    value = np.array([2, 0])
    np.testing.assert_allclose(
        m.log_prob(torch.tensor(value)).numpy(), np.log(probs[[0, 1], value]), rtol=1e-6
    )
    np.testing.assert_allclose(m.entropy().numpy(), -(probs * np.log(probs)).sum(-1), rtol=1e-6)
    assert m.batch_shape == (2,) and m.event_shape == () and m.param_shape == (2, 3)
    assert m.mode.tolist() == [2, 0] and repr(m) == "Categorical(probs: torch.Size([2, 3]))"
    logits = np.array([1.0, 2.0, 0.5], dtype=np.float32)
    by_logits = Categorical(logits=torch.tensor(logits))
    soft = np.exp(logits) / np.exp(logits).sum()
    np.testing.assert_allclose(by_logits.probs.numpy(), soft, rtol=1e-6)
    np.testing.assert_allclose(by_logits.logits.numpy(), np.log(soft), rtol=1e-5)
    assert by_logits.enumerate_support().tolist() == [0, 1, 2]


def test_categorical_samples_follow_the_probabilities(ctx):
    m = Categorical(torch.tensor([0.1, 0.2, 0.7]))
    drawn = m.sample((4000,))
    assert drawn.shape == (4000,) and drawn.dtype is torch.int64
    freq = np.bincount(drawn.numpy(), minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.1, 0.2, 0.7], atol=0.03)
    batch = Categorical(torch.tensor([[1.0, 0.0], [0.0, 1.0]])).sample((5,))
    assert batch.shape == (5, 2) and batch[:, 0].tolist() == [0] * 5
    assert batch[:, 1].tolist() == [1] * 5
    assert m.sample().shape == ()


def test_the_policy_gradient_reaches_the_logits(ctx):
    logits = torch.tensor([[1.0, 2.0, 0.5]], requires_grad=True)
    m = Categorical(logits=logits)
    action = torch.tensor([1])
    (-m.log_prob(action) * 2.0).sum().backward()
    soft = np.exp([1.0, 2.0, 0.5]) / np.exp([1.0, 2.0, 0.5]).sum()
    np.testing.assert_allclose(logits.grad.numpy()[0], -2.0 * (np.eye(3)[1] - soft), rtol=1e-5)


def test_normal_density_moments_and_reparameterised_samples(ctx):
    loc = torch.tensor([0.0, 1.0], requires_grad=True)
    scale = torch.tensor([1.0, 2.0], requires_grad=True)
    n = Normal(loc, scale)
    x = np.array([0.5, -1.0], dtype=np.float32)
    mu, sd = np.array([0.0, 1.0]), np.array([1.0, 2.0])
    expected = -((x - mu) ** 2) / (2 * sd**2) - np.log(sd) - 0.5 * np.log(2 * np.pi)
    np.testing.assert_allclose(n.log_prob(torch.tensor(x)).detach().numpy(), expected, rtol=1e-6)
    np.testing.assert_allclose(
        n.entropy().detach().numpy(), 0.5 + 0.5 * np.log(2 * np.pi) + np.log(sd), rtol=1e-6
    )
    erf = np.vectorize(math.erf)
    np.testing.assert_allclose(
        n.cdf(torch.tensor(x)).detach().numpy(), 0.5 * (1 + erf((x - mu) / (sd * np.sqrt(2)))),
        rtol=1e-5,
    )  # fmt: skip
    np.testing.assert_allclose(n.icdf(n.cdf(torch.tensor(x))).detach().numpy(), x, atol=1e-4)
    assert n.variance.tolist() == [1.0, 4.0] and n.stddev.tolist() == [1.0, 2.0]
    sample = n.rsample((3,))
    assert sample.shape == (3, 2) and sample.requires_grad
    sample.sum().backward()
    assert loc.grad.tolist() == [3.0, 3.0]  # d(loc + eps * scale)/d loc, 3 draws
    assert not n.sample((3,)).requires_grad
    many = Normal(2.0, 0.5).sample((20000,)).numpy()
    assert abs(many.mean() - 2.0) < 0.02 and abs(many.std() - 0.5) < 0.02


def test_bernoulli_and_uniform(ctx):
    p = np.array([0.3, 0.9], dtype=np.float32)
    b = Bernoulli(probs=torch.tensor(p))
    v = np.array([1.0, 0.0], dtype=np.float32)
    np.testing.assert_allclose(
        b.log_prob(torch.tensor(v)).numpy(), np.log(np.where(v == 1, p, 1 - p)), rtol=1e-5
    )
    np.testing.assert_allclose(
        b.entropy().numpy(), -(p * np.log(p) + (1 - p) * np.log(1 - p)), rtol=1e-5
    )
    by_logits = Bernoulli(logits=torch.tensor([0.0]))
    assert by_logits.probs.tolist() == [0.5] and by_logits.sample((6,)).shape == (6, 1)
    u = Uniform(torch.tensor([0.0]), torch.tensor([4.0]))
    assert u.log_prob(torch.tensor([1.0])).tolist() == pytest.approx([-math.log(4.0)])
    assert u.log_prob(torch.tensor([5.0])).tolist() == [-math.inf]
    assert u.entropy().tolist() == pytest.approx([math.log(4.0)])
    drawn = u.sample((2000,)).numpy()
    assert drawn.min() >= 0.0 and drawn.max() < 4.0 and abs(drawn.mean() - 2.0) < 0.1
    assert u.mean.tolist() == [2.0] and u.variance.tolist() == pytest.approx([16 / 12])


def test_kl_divergences_in_closed_form(ctx):
    p = Normal(torch.tensor([1.0]), torch.tensor([2.0]))
    q = Normal(torch.tensor([0.0]), torch.tensor([1.0]))
    assert kl_divergence(p, q).item() == pytest.approx(math.log(0.5) + (4 + 1) / 2 - 0.5, rel=1e-6)
    a, c = np.array([0.2, 0.8]), np.array([0.5, 0.5])
    got = kl_divergence(Categorical(torch.tensor(a)), Categorical(torch.tensor(c))).item()
    assert got == pytest.approx(float((a * np.log(a / c)).sum()), rel=1e-5)
    pb, qb = 0.3, 0.6
    got = kl_divergence(Bernoulli(torch.tensor(pb)), Bernoulli(torch.tensor(qb))).item()
    expected = pb * math.log(pb / qb) + (1 - pb) * math.log((1 - pb) / (1 - qb))
    assert got == pytest.approx(expected, rel=1e-5)
    assert kl_divergence(Uniform(0.0, 1.0), Uniform(0.0, 2.0)).item() == pytest.approx(
        math.log(2.0)
    )
    with pytest.raises(UnsupportedNameError, match=r"kl_divergence\(Normal, Uniform\)"):
        kl_divergence(p, Uniform(0.0, 1.0))


def test_arguments_are_checked_as_torch_checks_them(ctx):
    with pytest.raises(ValueError, match=r"Expected parameter scale .*GreaterThan"):
        Normal(0.0, -1.0)
    Normal(0.0, -1.0, validate_args=False)  # unchecked when asked
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified"):
        Bernoulli(probs=torch.tensor(0.5), logits=torch.tensor(0.0))
    with pytest.raises(ValueError, match=r"Expected parameter probs .*Interval"):
        Bernoulli(probs=torch.tensor([1.5]))
    with pytest.raises(ValueError, match="at least one-dimensional"):
        Categorical(torch.tensor(1.0))
    with pytest.raises(UnsupportedNameError, match="torch.distributions.Beta is not"):
        torch.distributions.Beta  # noqa: B018
    assert issubclass(Normal, Distribution) and Normal.has_rsample


def test_a_timing_only_run_samples_and_skips_the_checks():
    with use_context(RuntimeContext("tiny", timing_only=True)):
        m = Categorical(logits=torch.zeros(4, 6))
        assert m.sample((3,)).shape == (3, 4) and m.log_prob(m.sample()).shape == (4,)
        assert Normal(torch.zeros(5), torch.ones(5)).rsample((2,)).shape == (2, 5)
