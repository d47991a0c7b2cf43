"""The project as a user installs it: a wheel in a new virtual environment, used from elsewhere.

The editable checkout the rest of the suite imports hides packaging mistakes (a
YAML file left out of the package data, a path built from the repository's
layout).  These tests build a wheel, install it non-editable into a fresh
virtual environment and run the command line from a temporary directory that
holds nothing of the repository.  The fast test installs the wheel alone and
lends the new environment this one's dependencies; the ``slow`` one installs
them from the package index as a user would.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from kernbench.topology import bundled_names

RUN_ARGS = ["--topology", "ring8", "--timing-only", "--set", "ccl.all_reduce=ring_hbm_8"]
BENCH_ARGS = ["--", "-b", "4KiB", "-e", "8KiB", "-n", "1", "-w", "0"]


def _environment() -> dict[str, str]:
    """This environment less what would let the checkout or a chosen machine leak in."""
    leaks = ("PYTHONPATH", "KERNBENCH_TOPOLOGY", "KERNBENCH_TIMING_ONLY", "VIRTUAL_ENV")
    return {key: value for key, value in os.environ.items() if key not in leaks}


def _run(argv: list[str | Path], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory, repo_root) -> Path:
    """A wheel of the project as it stands in this checkout."""
    # Built from a copy: setuptools writes build/ and an egg-info beside the sources.
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(
        repo_root / "kernbench",
        source / "kernbench",
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo_root / name, source / name)
    wheelhouse = tmp_path_factory.mktemp("wheelhouse")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _ok(_run([*build, "--no-index", "--wheel-dir", wheelhouse, source], cwd=wheelhouse))
    (built,) = wheelhouse.glob("kernbench-*.whl")
    return built


def _new_venv(directory: Path, *, with_pip: bool) -> Path:
    """A virtual environment at ``directory`` (of the interpreter under this one); its bin/."""
    _ok(
        _run(
            [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), directory],
            cwd=directory.parent,
        )
    )
    return directory / "bin"


def _site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(_ok(_run([python, "-c", code], cwd=python.parent)).strip())


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """bin/ of a fresh virtual environment holding the wheel, non-editable, without its deps.

    This environment's site-packages is listed in a .pth file so the dependencies
    import without a download.  Directories named by a .pth file are added to the
    path but their own .pth files are not run, so the editable kernbench of this
    environment (installed by a .pth hook) stays out: the wheel's is the only one.
    """
    bin_dir = _new_venv(tmp_path_factory.mktemp("wheel-venv") / "venv", with_pip=False)
    install = [sys.executable, "-m", "pip", "--python", bin_dir / "python", "install"]
    _ok(_run([*install, "--no-deps", "--no-index", wheel], cwd=bin_dir))
    outer = sysconfig.get_paths()["purelib"]
    (_site_packages(bin_dir / "python") / "kernbench-test-dependencies.pth").write_text(
        f"{outer}\n"
    )
    return bin_dir


@pytest.fixture
def elsewhere(tmp_path, benches_dir) -> Path:
    """An unrelated directory holding only a copy of benches/allreduce_perf.py."""
    shutil.copy(benches_dir / "allreduce_perf.py", tmp_path / "allreduce_perf.py")
    return tmp_path


def test_the_wheel_carries_every_bundled_machine_and_the_catalogue(wheel) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"kernbench/topologies/{name}.yaml" for name in bundled_names()} <= names
    assert "kernbench/ccl/ccl.yaml" in names


def _check_installed(bin_dir: Path, elsewhere: Path) -> None:
    """The installed package, not the checkout, answers every command from ``elsewhere``."""
    venv = bin_dir.parent.resolve()
    code = "import kernbench; print(kernbench.__file__)"
    package = Path(_ok(_run([bin_dir / "python", "-c", code], cwd=elsewhere)).strip()).resolve()
    assert package.is_relative_to(venv), f"kernbench imported from {package}, not the wheel"
    assert (package.parent / "ccl" / "ccl.yaml").is_file()

    shown = _ok(_run([bin_dir / "kernbench", "topo", "show", "default"], cwd=elsewhere))
    assert shown.startswith("default: ") and "128 PEs in 16 cubes" in shown

    listed = _ok(_run([bin_dir / "kernbench", "topo", "list", "--json"], cwd=elsewhere))
    machines = {m["name"]: m for m in json.loads(listed)}
    assert sorted(machines) == bundled_names()
    assert all(Path(m["file"]).resolve().is_relative_to(venv) for m in machines.values())
    table = _ok(_run([bin_dir / "kernbench", "topo", "list"], cwd=elsewhere))
    assert [line.split()[0] for line in table.splitlines()[1:]] == bundled_names()

    # ring_hbm_8 is a configuration of the bundled catalogue: the run finds it.
    run = [bin_dir / "kernbench", "run", "allreduce_perf.py", *RUN_ARGS, *BENCH_ARGS]
    out = _ok(_run(run, cwd=elsewhere))
    rows = [line.split() for line in out.splitlines() if line.strip()[:1].isdigit()]
    assert [row[0] for row in rows] == ["4096", "8192"]
    assert "algorithm: ring_hbm_8" in out
    assert "simulated time:" in out and "on ring8, 8 ranks" in out
    # The same run through the checkout prints the same table and times.
    checkout = [sys.executable, "-m", "kernbench.cli", "run", "allreduce_perf.py", *RUN_ARGS]
    assert _ok(_run([*checkout, *BENCH_ARGS], cwd=elsewhere)) == out


def test_the_installed_wheel_runs_from_an_unrelated_directory(installed, elsewhere) -> None:
    _check_installed(installed, elsewhere)


@pytest.mark.slow
def test_the_wheel_installs_with_its_dependencies_from_the_package_index(
    wheel, tmp_path_factory, elsewhere
) -> None:
    bin_dir = _new_venv(tmp_path_factory.mktemp("index-venv") / "venv", with_pip=True)
    _ok(_run([bin_dir / "python", "-m", "pip", "install", "-q", wheel], cwd=bin_dir, timeout=1800))
    _check_installed(bin_dir, elsewhere)
