"""``kernbench run`` runs a PyTorch program as written: its ``import torch`` and
``import triton`` are KernBench's mirrors while the script runs (ADR 0025)."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import kernbench.torch
import kernbench.triton
from kernbench.bench.runner import run_script
from kernbench.bench.torch_imports import mirrored_imports

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def test_torch_and_its_submodules_are_kernbench_s_own_modules() -> None:
    with mirrored_imports():
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        import triton.language as tl
        from torch.nn.modules.rnn import LSTM
        from torch.utils.data import DataLoader

        assert torch is kernbench.torch and F is kernbench.torch.nn.functional
        assert dist is kernbench.torch.distributed and LSTM is kernbench.torch.nn.LSTM
        assert DataLoader is kernbench.torch.utils.data.DataLoader
        assert tl is kernbench.triton.language
        # each module keeps its own identity: no __path__ grafted on, its own spec
        assert torch.__spec__.name == "kernbench.torch" and not hasattr(F, "__path__")
        with pytest.raises(ModuleNotFoundError, match="torch.fft is not in KernBench"):
            import torch.fft  # noqa: F401
    assert "torch" not in sys.modules and "torch.nn" not in sys.modules
    assert kernbench.torch.__spec__.name == "kernbench.torch"


def test_what_sys_modules_held_before_is_back_after(monkeypatch) -> None:
    real = types.ModuleType("torch")  # stands for an installed torch, imported before
    monkeypatch.setitem(sys.modules, "torch", real)
    with mirrored_imports():
        import torch

        assert torch is kernbench.torch
    assert sys.modules["torch"] is real
    with mirrored_imports(enabled=False):
        import torch

        assert torch is real


def _quiet(_text: str) -> None:
    pass


def test_a_script_importing_torch_runs_as_the_same_script_importing_kernbench(
    tmp_path, capsys
) -> None:
    source = (DATA / "poly_regression.py").read_text()
    plain = source.replace("import kernbench.torch as torch", "import torch").replace(
        "import kernbench.torch.nn.functional as F", "import torch.nn.functional as F"
    )
    assert "kernbench" not in plain.split('"""', 2)[2]  # nothing of KernBench left
    (tmp_path / "mirrored.py").write_text(source)
    (tmp_path / "plain.py").write_text(plain)
    ran = {}
    for name in ("mirrored", "plain"):
        result = run_script(
            str(tmp_path / f"{name}.py"), topology="tiny", script_args=["0.5"], echo=_quiet
        )
        lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("RESULT ")]
        ran[name] = (result.elapsed_ps, lines)
    assert ran["plain"] == ran["mirrored"] and ran["plain"][0] > 0


def test_the_cli_can_leave_the_imports_to_python(tmp_path) -> None:
    path = tmp_path / "train.py"
    path.write_text("import torch\nx = torch.ones(3).sum().item()\nprint('SUM', x)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))

    def run(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "kernbench.cli", "run", *flags, str(path), "-t", "tiny"],
            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
        )  # fmt: skip

    done = run()
    assert done.returncode == 0, done.stderr
    assert "SUM 3.0" in done.stdout and "1 ranks" in done.stdout
    import importlib.util

    if importlib.util.find_spec("torch") is None:  # no real torch here: Python's own error
        refused = run("--no-mirror-imports")
        assert refused.returncode != 0 and "No module named 'torch'" in refused.stderr
        assert "`import kernbench.torch as torch`" in refused.stderr


def test_the_versions_name_the_api_mirrored() -> None:
    # programs print or compare them: torch.__version__ >= "2.0", packaging's parse
    assert kernbench.torch.__version__ == "2.6.0+kernbench"
    assert kernbench.triton.__version__ == "3.2.0+kernbench"
    parts = tuple(int(x) for x in kernbench.torch.__version__.split("+")[0].split("."))
    assert parts >= (2, 0, 0)


def test_the_namespaces_programs_import_as_modules() -> None:
    # import torch.backends.cudnn as cudnn (pytorch/examples' imagenet), from
    # torch.cuda.amp import GradScaler, autocast (pre-2.4 AMP scripts), import torch.cuda
    import kernbench.torch.backends.cudnn as cudnn
    import kernbench.torch.cuda
    from kernbench.torch.cuda.amp import GradScaler, autocast

    torch = kernbench.torch
    assert cudnn is torch.backends.cudnn and kernbench.torch.cuda is torch.cuda
    assert GradScaler is torch.cuda.amp.GradScaler and autocast is torch.cuda.amp.autocast
    cudnn.benchmark = True
    assert torch.backends.cudnn.benchmark is True
    cudnn.benchmark = False
    with mirrored_imports():
        import torch.backends.cudnn as mirrored
        import torch.backends.mps

        assert mirrored is kernbench.torch.backends.cudnn
        assert torch.backends.mps.is_available() is False
    with pytest.raises(ModuleNotFoundError, match="it is an attribute; import kernbench.torch"):
        import kernbench.torch.Tensor  # noqa: F401 - a class, not a namespace
