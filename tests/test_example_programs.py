"""Single-process programs written as pytorch/examples writes them, run by ``kernbench run``
with only their imports changed (``tests/data/poly_regression.py``,
``tests/data/language_model.py``): a script with no entry point runs as a program; a
whole model saved with ``torch.save(model)`` loads back under ``safe_globals`` naming
``torch.nn.modules.<file>`` classes, and is refused without them as torch 2.6 refuses
it; ``torch.LongTensor(n)``; ``import torch.onnx``.  Values against NumPy."""

from __future__ import annotations

import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernbench.torch as torch
from kernbench.errors import UnsupportedNameError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _run(script: str, cwd: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(DATA / script), "--", *args],
        capture_output=True, text=True, cwd=cwd, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, done.stdout
    assert "1 ranks" in done.stdout  # run once, as python runs it
    return json.loads(lines[0].removeprefix("RESULT "))


def _smooth_l1(prediction: np.ndarray, target: np.ndarray) -> float:
    d = np.abs(prediction - target)
    return float(np.mean(np.where(d < 1.0, 0.5 * d * d, d - 0.5)))


def test_a_program_written_at_module_level_runs_and_fits(tmp_path) -> None:
    result = _run("poly_regression.py", tmp_path, "0.02")
    first = result["first"]
    x, y = np.array(first["x"]), np.array(first["y"])
    np.testing.assert_allclose(x[:, 1], x[:, 0] ** 2, rtol=1e-5)  # the features
    np.testing.assert_allclose(x[:, 3], x[:, 0] ** 4, rtol=1e-5)
    w_true, b_true = np.array(result["w_true"]), result["b_true"]
    np.testing.assert_allclose(y[:, 0], x @ w_true + b_true, rtol=1e-5, atol=1e-4)
    assert first["loss"] == pytest.approx(_smooth_l1(np.array(first["prediction"]), y), rel=1e-5)
    assert result["loss"] < 0.02 and result["steps"] < 2000
    np.testing.assert_allclose(result["w"], w_true, atol=0.5)
    assert result["b"] == pytest.approx(b_true, abs=0.5)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("lm")
    rng = random.Random(3)
    words = "the cat sat on a mat and dog ran to park with big red ball".split()
    (where / "corpus").mkdir()
    for name, lines in (("train", 24), ("valid", 6)):
        text = "\n".join(
            " ".join(rng.choice(words) for _ in range(rng.randint(4, 8))) for _ in range(lines)
        )
        (where / "corpus" / f"{name}.txt").write_text(text + "\n")
    return where


@pytest.mark.parametrize("model", ["LSTM", "Transformer"])
def test_a_language_model_saves_whole_and_loads_under_safe_globals(corpus, model) -> None:
    result = _run("language_model.py", corpus, "--model", model, "--save", f"{model}.pt")
    assert result["type"] == ("Attention" if model == "Transformer" else "Recurrent")
    assert result["same_state"] is True
    # torch.load without the allowlist: torch 2.6's refusal, caught as UnpicklingError
    assert "weights only load failed" in result["refused"]
    assert "__main__." in result["refused"] and "add_safe_globals" in result["refused"]
    # the loaded model's evaluation, against NumPy's NLL of its log-probabilities
    log_probs, targets = np.array(result["log_probs"]), np.array(result["targets"])
    np.testing.assert_allclose(np.exp(log_probs).sum(axis=1), 1.0, rtol=1e-5)
    nll = -log_probs[np.arange(len(targets)), targets].mean()
    assert result["eval_loss"] == pytest.approx(nll, rel=1e-5)
    vocabulary = 16  # 15 words and <eos>
    assert log_probs.shape[1] == vocabulary
    losses = result["losses"]
    assert len(losses) >= 3 and all(math.isfinite(v) for v in losses)
    assert abs(losses[0] - math.log(vocabulary)) < 0.6  # an untrained model is near uniform
    assert result["dummy"] == [[6, 2], "torch.int64", 0]
    assert result["exporting"] is False


def test_torch_onnx_imports_and_an_export_says_what_to_do() -> None:
    import kernbench.torch.onnx as onnx

    assert torch.onnx is onnx and onnx.is_in_onnx_export() is False
    with pytest.raises(UnsupportedNameError, match=r"torch.onnx.export: .*export the model"):
        torch.onnx.export(object(), (), "model.onnx")
    with pytest.raises(UnsupportedNameError, match=r"torch.onnx.export_to_pretty_string is not"):
        torch.onnx.export_to_pretty_string  # noqa: B018
