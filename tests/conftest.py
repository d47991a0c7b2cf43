"""Where the repository's folders are, whichever directory pytest was started in.

The suite must pass from the repository root and from anywhere else
(``cd /tmp && python -m pytest /path/to/repo/tests``), so no test builds a path
from the working directory.  Tests that need a file of the repository take it
from these fixtures; tests that only need a machine name a bundled one
(``topology="ring8"``), which :mod:`kernbench.topology.bundled` finds from any
directory and in an installed package.
"""

from __future__ import annotations

import compileall
from collections.abc import Callable
from pathlib import Path

import pytest

import kernbench
from kernbench.topology import bundled_names, bundled_path

#: The checkout these tests belong to (resolved: ``__file__`` may be relative).
REPO_ROOT = Path(__file__).resolve().parent.parent


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Byte-compile the package once, before any worker or child interpreter imports it.

    Hundreds of tests start ``kernbench`` in a child process (the CLI, sweeps and their
    points).  An editable install leaves no bytecode, and with ``PYTHONDONTWRITEBYTECODE``
    set none is ever written, so every child would compile some 300 modules again
    (half a second of its start).  Python still reads bytecode that is there and
    checks it against each source's size and time, so a stale file is never used.
    A package that cannot be written to (installed read-only) is left as it is.
    """
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller did it
        return
    compileall.compile_dir(Path(kernbench.__file__).parent, quiet=2)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository's root directory."""
    return REPO_ROOT


@pytest.fixture(scope="session")
def benches_dir() -> Path:
    """``benches/``: the bench scripts users copy from."""
    return REPO_ROOT / "benches"


@pytest.fixture(scope="session")
def benchmarks_dir() -> Path:
    """``benchmarks/``: the scripts that measure the simulator itself."""
    return REPO_ROOT / "benchmarks"


@pytest.fixture(scope="session")
def examples_dir() -> Path:
    """``examples/``: example sweep files."""
    return REPO_ROOT / "examples"


@pytest.fixture(scope="session")
def test_data_dir() -> Path:
    """``tests/data/``: files the tests read."""
    return REPO_ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def baselines_dir() -> Path:
    """``tests/baselines/``: recorded reports that runs are compared against."""
    return REPO_ROOT / "tests" / "baselines"


@pytest.fixture(scope="session")
def catalogue_file() -> Path:
    """The collective catalogue as the repository shows it (``ccl/ccl.yaml``)."""
    return REPO_ROOT / "ccl" / "ccl.yaml"


@pytest.fixture(scope="session")
def bundled_topology() -> Callable[[str], Path]:
    """The file of a bundled machine by name: ``bundled_topology("ring8")``.

    For tests about files (``extends:``, copies a test edits); a test that only
    needs a machine passes its name instead.
    """

    def path_of(name: str) -> Path:
        path = bundled_path(name)
        if path is None:
            raise LookupError(f"no bundled machine {name!r} (bundled: {bundled_names()})")
        return path

    return path_of
