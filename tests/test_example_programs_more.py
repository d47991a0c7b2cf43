"""Training programs written as pytorch/examples and the PyTorch tutorials write them
(mnist, vae, dcgan and an older-style GAN, siamese_network, super_resolution,
fast_neural_style, gcn, gat, mnist_forward_forward, the spatial transformer, imagenet's
checkpoint and resume, reinforcement_learning's reinforce and actor_critic, DQN, seq2seq
with attention, mnist_rnn), with synthetic data made in the program and only their
imports changed, run by ``kernbench run`` (``tests/data/examples/``).  Each prints one
``RESULT {json}`` line; what can be recomputed from it (a loss from printed outputs and
targets, a Gram matrix from printed features, discounted returns from printed rewards)
is checked against NumPy."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "tests" / "data" / "examples"


def _run(script: str, cwd: Path, *args: str, topology: str = "default") -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", "--topology", topology,
         str(EXAMPLES / script), "--", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout
    assert "1 ranks" in done.stdout
    return json.loads(lines[0].removeprefix("RESULT "))


def _nll(log_probs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    return -log_probs[np.arange(len(targets)), targets]


def _bce(p: np.ndarray, y: np.ndarray) -> np.ndarray:
    return -(y * np.log(p) + (1 - y) * np.log(1 - p))


def _smooth_l1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    d = np.abs(a - b)
    return np.where(d < 1.0, 0.5 * d * d, d - 0.5)


def _normalised_returns(rewards: list[float], gamma: float) -> np.ndarray:
    returns, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.insert(0, running)
    returns = np.array(returns, dtype=np.float32)
    eps = np.finfo(np.float32).eps
    return (returns - returns.mean()) / (returns.std(ddof=1) + eps)  # torch's std: unbiased


def test_mnist_classifier_trains_evaluates_and_saves(tmp_path) -> None:
    result = _run("mnist_cnn.py", tmp_path, "--epochs", "2")
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    assert log_probs.shape == (16, 10)
    np.testing.assert_allclose(np.exp(log_probs).sum(1), 1.0, rtol=1e-5)
    assert result["batch_sums"][-1] == pytest.approx(_nll(log_probs, targets).sum(), rel=1e-5)
    assert result["test_loss"] == pytest.approx(sum(result["batch_sums"]) / 32, rel=1e-6)
    np.testing.assert_array_equal(np.array(result["pred"])[:, 0], log_probs.argmax(1))
    assert 0 <= result["correct"] <= result["count"] == 32
    assert len(result["losses"]) == 8 and all(math.isfinite(v) for v in result["losses"])
    assert result["rates"] == pytest.approx([1.0, 0.7])  # StepLR(step_size=1, gamma=0.7)
    assert result["last_lr"] == pytest.approx([0.49])
    assert result["keys"] == [f"{m}.{p}" for m in ("conv1", "conv2", "fc1", "fc2")
                              for p in ("weight", "bias")]  # fmt: skip
    assert (tmp_path / "mnist_cnn.pt").stat().st_size > 0


def test_vae_loss_is_reconstruction_plus_kl(tmp_path) -> None:
    result = _run("vae.py", tmp_path)
    x, recon = np.array(result["x"]), np.array(result["recon"])
    mu, logvar = np.array(result["mu"]), np.array(result["logvar"])
    assert x.shape == recon.shape == (4, 64) and mu.shape == logvar.shape == (4, 4)
    bce = _bce(recon, x).sum()
    kld = -0.5 * np.sum(1 + logvar - mu**2 - np.exp(logvar))
    assert result["loss"] == pytest.approx(bce + kld, rel=1e-4)
    assert result["comparison"] == [8, 1, 8, 8] and result["sample"] == [6, 64]
    low, high = result["sample_range"]
    assert 0.0 < low <= high < 1.0  # a sigmoid's outputs
    assert len(result["epoch_losses"]) == 3 and all(v > 0 for v in result["epoch_losses"])


def test_dcgan_generator_loss_is_bce_of_the_discriminator_on_fakes(tmp_path) -> None:
    result = _run("dcgan.py", tmp_path, "--steps", "2")
    d_fake = np.array(result["d_fake"])
    assert d_fake.shape == (8,) and ((d_fake > 0) & (d_fake < 1)).all()
    assert result["err_g"] == pytest.approx(_bce(d_fake, 1.0).mean(), rel=1e-5)
    assert result["fake_shape"] == [4, 1, 8, 8]
    low, high = result["fake_range"]
    assert -1.0 <= low <= high <= 1.0  # Tanh
    assert len(result["history"]) == 4  # 2 epochs of 2 batches (drop_last)
    for err_d, err_g, d_x, d_g_z1, d_g_z2 in result["history"]:
        assert err_d > 0 and err_g > 0 and all(0 < v < 1 for v in (d_x, d_g_z1, d_g_z2))
    assert len(result["bn_mean"]) == 8 and any(v != 0 for v in result["bn_mean"])
    assert (tmp_path / "netG_epoch_1.pth").exists()


def test_dcgan_through_data_parallel_on_two_devices_gives_the_same_values(tmp_path) -> None:
    one = _run("dcgan.py", tmp_path, "--steps", "1", topology="ring8")
    two = _run("dcgan.py", tmp_path, "--steps", "1", "--ngpu", "2", topology="ring8")
    assert two["d_fake"] == one["d_fake"] and two["history"] == one["history"]


def test_legacy_style_gan_with_cuda_tensor_types_and_variables(tmp_path) -> None:
    result = _run("gan_legacy.py", tmp_path)
    g_scores = np.array(result["g_scores"])
    real, fake = np.array(result["real_scores"]), np.array(result["fake_scores"])
    assert result["g_loss"] == pytest.approx(_bce(g_scores, 1.0).mean(), rel=1e-5)
    d_loss = (_bce(real, 1.0).mean() + _bce(fake, 0.0).mean()) / 2
    assert result["d_loss"] == pytest.approx(d_loss, rel=1e-5)
    assert result["gen_shape"] == [8, 1, 4, 4] and result["bn_eps"] == 0.8


def test_siamese_network_scores_pairs(tmp_path) -> None:
    result = _run("siamese.py", tmp_path)
    outputs, targets = np.array(result["outputs"]), np.array(result["targets"])
    assert outputs.shape == targets.shape == (9,)
    assert result["loss"] == pytest.approx(_bce(outputs, targets).mean(), rel=1e-5)
    assert result["pred"] == (outputs > 0.5).astype(int).tolist()
    assert result["pred_dtype"] == "torch.int64"  # torch.where(cond, 1, 0)
    assert 0 <= result["correct"] <= 18
    assert result["backbone"] == ["Conv2d", "BatchNorm2d", "ReLU", "MaxPool2d", "AdaptiveAvgPool2d"]
    assert len(result["losses"]) == 6


def test_super_resolution_psnr_and_orthogonal_init(tmp_path) -> None:
    result = _run("super_resolution.py", tmp_path, "--nEpochs", "2")
    prediction, target = np.array(result["prediction"]), np.array(result["target"])
    assert prediction.shape == target.shape == (2, 1, 8, 8)  # 4x4 inputs, upscale 2
    mse = np.mean((prediction - target) ** 2)
    assert result["mse"] == pytest.approx(mse, rel=1e-5)
    assert result["psnr"] == pytest.approx(10 * math.log10(1 / mse), rel=1e-5)
    assert result["gain"] == pytest.approx(math.sqrt(2))
    assert len(result["epoch_losses"]) == 2
    assert (tmp_path / "model_epoch_2.pth").exists()


def test_orthogonal_init_rows_are_orthonormal_times_the_gain(tmp_path) -> None:
    result = _run("super_resolution.py", tmp_path, "--nEpochs", "0")
    w = np.array(result["conv1"])  # 8 x 25: the rows are orthogonal, of norm gain
    np.testing.assert_allclose(w @ w.T, 2.0 * np.eye(8), atol=1e-5)


def test_fast_neural_style_gram_matrix(tmp_path) -> None:
    result = _run("fast_neural_style.py", tmp_path)
    features = np.array(result["features"])
    b, ch, h, w = features.shape
    f = features.reshape(b, ch, h * w)
    gram = f @ f.transpose(0, 2, 1) / (ch * h * w)
    np.testing.assert_allclose(result["gram"], gram, rtol=1e-5, atol=1e-7)
    assert result["shape"] == [1, 3, 8, 8] and result["image"] == [8, 8, 3]
    assert result["style_shape"] == [1, 4, 4]
    assert len(result["history"]) == 3
    assert all(c >= 0 and s >= 0 for c, s in result["history"])


def test_gcn_normalised_adjacency_loss_and_accuracy(tmp_path) -> None:
    result = _run("gcn.py", tmp_path)
    adj, adj_norm = np.array(result["adj"]), np.array(result["adj_norm"])
    np.testing.assert_array_equal(adj, adj.T)
    np.testing.assert_array_equal(np.diag(adj), 1.0)  # self-loops
    d = 1 / np.sqrt(adj.sum(1))
    np.testing.assert_allclose(adj_norm, d[:, None] * adj * d[None, :], rtol=1e-5)
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    assert log_probs.shape == (6, 2)
    assert result["loss"] == pytest.approx(_nll(log_probs, targets).mean(), rel=1e-5)
    assert result["acc"] == pytest.approx(np.mean(log_probs.argmax(1) == targets))
    assert sorted(result["idx"]) == list(range(20))
    assert len(result["history"]) == 20


def test_gat_attention_layer_against_numpy(tmp_path) -> None:
    result = _run("gat.py", tmp_path)
    w, a = np.array(result["W"]), np.array(result["a"])  # (5, 16), (2, 16, 1)
    h, adj = np.array(result["features"]), np.array(result["adj"])
    heads, hidden = a.shape[0], a.shape[1] // 2
    ht = (h @ w).reshape(len(h), heads, hidden).transpose(1, 0, 2)
    e = ht @ a[:, :hidden, :] + (ht @ a[:, hidden:, :]).transpose(0, 2, 1)
    e = np.where(e > 0, e, 0.2 * e)  # LeakyReLU(0.2)
    e = np.where(adj > 0, e, -9e16)
    attention = np.exp(e - e.max(-1, keepdims=True))
    attention /= attention.sum(-1, keepdims=True)
    expected = (attention @ ht).transpose(1, 0, 2).reshape(len(h), -1)  # heads concatenated
    np.testing.assert_allclose(result["hidden"], expected, rtol=1e-4, atol=1e-5)
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    assert log_probs.shape == (5, 3)
    assert result["loss"] == pytest.approx(_nll(log_probs, targets).mean(), rel=1e-5)
    assert result["acc"] == pytest.approx(np.mean(log_probs.argmax(1) == targets))
    assert len(result["losses"]) == 10


def test_spatial_transformer_starts_at_the_identity_and_resamples(tmp_path) -> None:
    result = _run("spatial_transformer.py", tmp_path)
    images = np.array(result["images"])  # (2, 1, 12, 12)
    np.testing.assert_allclose(result["untrained"], images, atol=1e-5)  # theta = identity
    theta, warped = np.array(result["theta"]), np.array(result["warped"])
    assert theta.shape == (2, 2, 3) and len(result["losses"]) == 4
    steps = np.linspace(-1, 1, 12) * 11 / 12  # align_corners=False: the pixel centres
    base = np.stack(np.broadcast_arrays(steps[None, :], steps[:, None], 1.0), -1)
    grid = np.einsum("hwk,njk->nhwj", base, theta)
    x, y = ((grid[..., 0] + 1) * 12 - 1) / 2, ((grid[..., 1] + 1) * 12 - 1) / 2
    expected = np.zeros_like(warped)
    for b in range(2):
        x0, y0 = np.floor(x[b]).astype(int), np.floor(y[b]).astype(int)
        for dx, dy in ((0, 0), (1, 0), (0, 1), (1, 1)):
            xi, yi = x0 + dx, y0 + dy
            weight = (1 - np.abs(x[b] - xi)) * (1 - np.abs(y[b] - yi))
            inside = (xi >= 0) & (xi < 12) & (yi >= 0) & (yi < 12)
            value = images[b, 0][np.clip(yi, 0, 11), np.clip(xi, 0, 11)]
            expected[b, 0] += np.where(inside, value, 0.0) * weight
    np.testing.assert_allclose(warped, expected, rtol=1e-4, atol=1e-5)


def _topk_accuracy(logits: np.ndarray, targets: np.ndarray, k: int) -> float:
    top = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    return 100.0 * np.mean((top == targets[:, None]).any(axis=1))


def test_imagenet_style_checkpoint_resumes_where_it_stopped(tmp_path) -> None:
    first = _run("imagenet_resume.py", tmp_path, "--epochs", "2")
    logits, targets = np.array(first["logits"]), np.array(first["targets"])
    log_probs = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    assert first["loss"] == pytest.approx(_nll(log_probs, targets).mean(), rel=1e-5)
    assert first["acc1"] == pytest.approx(_topk_accuracy(logits, targets, 1), rel=1e-6)
    assert first["acc5"] == pytest.approx(_topk_accuracy(logits, targets, 5), rel=1e-6)
    assert first["lr"] == pytest.approx(0.025)  # StepLR(step_size=1, gamma=0.5), 2 epochs
    assert first["keys"] == ["module.0.weight", "module.0.bias"]  # DataParallel's prefix
    assert first["best_saved"] is True and first["resumed"] is None
    assert first["best_acc1"] >= first["final_acc1"]
    second = _run("imagenet_resume.py", tmp_path, "--epochs", "3", "--resume",
                  "checkpoint.pth.tar")  # fmt: skip
    resumed = second["resumed"]
    assert resumed["epoch"] == 2 and resumed["lr"] == pytest.approx(0.025)
    assert resumed["best_acc1"] == pytest.approx(first["best_acc1"])
    assert resumed["acc1"] == pytest.approx(first["final_acc1"])  # the same weights
    assert len(second["losses"]) == 1 and second["lr"] == pytest.approx(0.0125)


def test_forward_forward_overlay_and_goodness(tmp_path) -> None:
    result = _run("forward_forward.py", tmp_path)
    x, x_pos, y = np.array(result["x"]), np.array(result["x_pos"]), result["y"]
    expected = x.copy()
    expected[:, :4] = 0.0
    expected[np.arange(3), y] = result["x_max"]
    np.testing.assert_allclose(x_pos, expected, rtol=1e-6)
    goodness = np.zeros((3, 4))
    for label in range(4):
        h = x.copy()
        h[:, :4] = 0.0
        h[:, label] = x.max()
        for weight, bias in result["weights"]:
            h = h / (np.linalg.norm(h, axis=1, keepdims=True) + 1e-4)
            h = np.maximum(h @ np.array(weight).T + np.array(bias), 0.0)
            goodness[:, label] += (h**2).mean(1)
    np.testing.assert_allclose(result["goodness"], goodness, rtol=1e-4, atol=1e-6)
    assert len(result["losses"]) == 2 and 0.0 <= result["train_error"] <= 1.0


def test_reinforce_loss_from_normalised_returns(tmp_path) -> None:
    result = _run("reinforce.py", tmp_path, "--episodes", "4")
    returns = _normalised_returns(result["rewards"], result["gamma"])
    np.testing.assert_allclose(result["returns"], returns, rtol=1e-5, atol=1e-6)
    log_probs = np.array(result["log_probs"])
    assert (log_probs < 0).all() and len(log_probs) == result["steps"]
    assert result["loss"] == pytest.approx(np.sum(-log_probs * returns), rel=1e-4, abs=1e-6)
    assert result["eps"] == float(np.finfo(np.float32).eps)


def test_actor_critic_loss_is_policy_plus_smooth_l1_value(tmp_path) -> None:
    result = _run("actor_critic.py", tmp_path, "--episodes", "3")
    returns = _normalised_returns(result["rewards"], 0.95)
    np.testing.assert_allclose(result["returns"], returns, rtol=1e-5, atol=1e-6)
    log_probs, values = np.array(result["log_probs"]), np.array(result["values"])
    assert result["value_shape"] == [1]
    policy = np.sum(-log_probs * (returns - values))
    value = np.sum(_smooth_l1(values, returns))
    assert result["loss"] == pytest.approx(policy + value, rel=1e-4, abs=1e-6)


def test_dqn_huber_loss_masked_targets_and_soft_update(tmp_path) -> None:
    result = _run("dqn.py", tmp_path)
    q, target = np.array(result["q"]), np.array(result["target"])
    mask, rewards = np.array(result["mask"]), np.array(result["rewards"])
    assert q.shape == target.shape == (8,)
    assert result["loss"] == pytest.approx(_smooth_l1(q, target).mean(), rel=1e-5)
    np.testing.assert_allclose(target[~mask], rewards[~mask])  # final states: the reward
    assert not mask.all() and rewards[~mask].tolist() == [1.0] * int((~mask).sum())
    soft = {k: np.array(v) for k, v in result["soft"].items()}
    np.testing.assert_allclose(soft["after"], 0.05 * soft["policy"] + 0.95 * soft["before"],
                               rtol=1e-5, atol=1e-7)  # fmt: skip


def test_seq2seq_with_attention_loss_and_attention_weights(tmp_path) -> None:
    result = _run("seq2seq.py", tmp_path)
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    assert log_probs.shape == (8 * 5, 8)  # batch x MAX_LENGTH steps, 8 tokens
    np.testing.assert_allclose(np.exp(log_probs).sum(1), 1.0, rtol=1e-5)
    assert result["loss"] == pytest.approx(_nll(log_probs, targets).mean(), rel=1e-5)
    attentions = np.array(result["attentions"])
    assert attentions.shape == (2, 5, 5)  # a weight per decoder step and encoder position
    np.testing.assert_allclose(attentions.sum(-1), 1.0, rtol=1e-5)
    assert np.array(result["decoded"]).shape == (2, 5)
    assert result["encoder_outputs"] == [2, 5, 16] and len(result["losses"]) == 2


def test_mnist_rnn_summed_nll_and_lstm_shapes(tmp_path) -> None:
    result = _run("mnist_rnn.py", tmp_path, "--epochs", "1")
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    assert log_probs.shape == (12, 3)
    assert result["test_loss"] == pytest.approx(_nll(log_probs, targets).sum(), rel=1e-5)
    assert result["correct"] == int(np.sum(log_probs.argmax(1) == targets))
    # batch_first output (N, L, H); h and c are (layers, N, H)
    assert result["shapes"] == [[12, 6, 12], [[1, 12, 12], [1, 12, 12]]]
    assert len(result["losses"]) == 3 and all(v > 0 for v in result["running_var"])
