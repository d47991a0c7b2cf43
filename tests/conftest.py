"""Where the repository's folders are, whichever directory pytest was started in.

The suite must pass from the repository root and from anywhere else
(``cd /tmp && python -m pytest /path/to/repo/tests``), so no test builds a path
from the working directory.  Tests that need a file of the repository take it
from these fixtures; tests that only need a machine name a bundled one
(``topology="ring8"``), which :mod:`kernbench.topology.bundled` finds from any
directory and in an installed package.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from kernbench.topology import bundled_names, bundled_path

#: The checkout these tests belong to (resolved: ``__file__`` may be relative).
REPO_ROOT = Path(__file__).resolve().parent.parent


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
