"""Every code block of the README runs as printed.

* ```` ```python ```` blocks are written to a file and run: with ``kernbench run``
  (and the ``--topology``/``--set`` their comment names) when they define
  ``main()`` or a ``__main__`` block, else with plain ``python``.
* ```` ```console ```` blocks: each ``$ `` line is run (``kernbench`` as this
  interpreter's ``kernbench.cli``); the lines printed under it in the README
  must appear in its output.
* ```` ```bash ```` blocks are the set-up commands: the main job's command
  (after its installing steps) is run; the test command is what CI runs, so it
  is checked to be ``.ci/run``'s, not run from inside itself.

Commands on the 131,072-PE machine take minutes: they run with ``-m slow``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(lang: str) -> list[str]:
    return [body for kind, body in FENCE.findall(README.read_text()) if kind == lang]


def _kernbench(args: list[str]) -> list[str]:
    return [sys.executable, "-m", "kernbench.cli", *args]


def _run(argv: list[str], tmp_path: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("KERNBENCH_TOPOLOGY", None)
    return subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _slow(command: str) -> list:
    return [pytest.mark.slow] if "cluster128k" in command or "pod16k" in command else []


def _python_cases() -> list:
    return [pytest.param(body, id=f"python{i}") for i, body in enumerate(_blocks("python"))]


def _console_cases() -> list:
    cases = []
    for i, body in enumerate(_blocks("console")):
        lines = body.splitlines()
        for j, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            shown = []
            for after in lines[j + 1 :]:
                if after.startswith("$ "):
                    break
                shown.append(after)
            cases.append(pytest.param(line[2:], shown, id=f"console{i}.{j}", marks=_slow(line)))
    return cases


def test_the_readme_has_the_blocks_this_test_runs() -> None:
    assert _python_cases() and _console_cases() and len(_blocks("bash")) == 2


@pytest.mark.parametrize("body", _python_cases())
def test_python_block_runs(body: str, tmp_path: Path) -> None:
    script = tmp_path / "readme_block.py"
    script.write_text(body)
    if re.search(r"^def main\(|^if __name__ == .__main__.:", body, re.M):
        hint = re.search(r"kernbench run \S+((?: --\S+ \S+)*)", body)
        options = shlex.split(hint.group(1)) if hint else []
        argv = _kernbench(["run", str(script), *options])
    else:
        argv = [sys.executable, str(script)]
    result = _run(argv, tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize(("command", "shown"), _console_cases())
def test_console_block_runs_as_printed(command: str, shown: list[str], tmp_path: Path) -> None:
    words = shlex.split(command)
    assert words[0] == "kernbench", command
    result = _run(_kernbench(words[1:]), tmp_path)
    output = result.stdout + result.stderr
    expects_error = any(line.startswith("error:") for line in shown)
    assert (result.returncode != 0) == expects_error, output[-3000:]
    for line in shown:
        assert line in output, (line, output[-3000:])


def test_main_job_command_runs() -> None:
    setup, _ = _blocks("bash")
    main_job = setup.strip().split(" && ")[-1]
    words = shlex.split(main_job)
    assert words[0] == ".venv/bin/kernbench", main_job
    result = _run(_kernbench(words[1:]), ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "# Avg bus bandwidth" in result.stdout


def test_test_command_is_what_ci_runs() -> None:
    _, tests = _blocks("bash")
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests.strip() in ci
