"""The PyTorch tutorial's distributed patterns, run as a user runs them, checked against NumPy.

``tests/data/tutorial_patterns.py`` is written as the tutorial writes its
programs (``init_process`` + ``mp.Process`` in the ``__main__`` block); it runs
once with plain ``python`` and once with ``kernbench run``, each in a fresh
interpreter and from a directory other than the repository, and both must give
the same values (checked here against NumPy) and the same simulated time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "data" / "tutorial_patterns.py"
WORLD = 4
ELEMENTS = 8
NON_MEMBER = WORLD - 1


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("KERNBENCH_") and k not in ("WORLD_SIZE", "RANK")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra)
    return env


def _results(completed: subprocess.CompletedProcess) -> dict:
    assert completed.returncode == 0, completed.stderr
    by_pattern: dict[str, dict[int, dict]] = defaultdict(dict)
    simulated = None
    for line in completed.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line.removeprefix("RESULT "))
            by_pattern[row["pattern"]][row["rank"]] = row
        elif line.startswith("SIMULATED "):
            simulated = int(line.split()[1])
    return {
        "rows": by_pattern,
        "simulated_ps": simulated,
        "stdout": completed.stdout,
        "stderr": completed.stderr,
    }


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    elsewhere = tmp_path_factory.mktemp("cwd")
    # A topology path relative to the repository falls back to the bundled machine of
    # that name from any directory; the CLI takes a bundled name as well.
    plain = subprocess.run(
        [sys.executable, str(SCRIPT)],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=_env(KERNBENCH_TOPOLOGY="topologies/multi_sip.yaml"),
        timeout=300,
    )
    runner = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(SCRIPT), "--topology", "multi_sip"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=_env(),
        timeout=300,
    )
    return {"python": _results(plain), "kernbench run": _results(runner)}


MODES = ["python", "kernbench run"]


@pytest.mark.parametrize("mode", MODES)
def test_blocking_send_recv(runs, mode) -> None:
    rows = runs[mode]["rows"]["blocking_p2p"]
    assert sorted(rows) == list(range(WORLD))
    for rank, row in rows.items():
        np.testing.assert_array_equal(row["value"], np.zeros(ELEMENTS, np.float32) + 7)
        assert row["sender"] == (None if rank == 0 else 0)
        assert row["first"] == 7.0  # tensor[0].item(), as the tutorial prints tensor[0]


@pytest.mark.parametrize("mode", MODES)
def test_isend_irecv_wait(runs, mode) -> None:
    rows = runs[mode]["rows"]["nonblocking_p2p"]
    for rank, row in rows.items():
        left = (rank - 1) % WORLD
        np.testing.assert_array_equal(row["value"], np.full(ELEMENTS, left + 1, np.float32))


@pytest.mark.parametrize("mode", MODES)
def test_group_all_reduce_leaves_the_non_member_alone_with_a_warning(runs, mode) -> None:
    rows = runs[mode]["rows"]["group_all_reduce"]
    members = range(WORLD - 1)
    expected = np.full(ELEMENTS, sum(r + 1 for r in members), np.float32)
    for rank in members:
        np.testing.assert_array_equal(rows[rank]["value"], expected)
        assert rows[rank]["group_rank"] == rank
    outsider = rows[NON_MEMBER]
    np.testing.assert_array_equal(outsider["value"], np.full(ELEMENTS, NON_MEMBER + 1, np.float32))
    assert outsider["group_rank"] == -1
    assert all(row["returned_none"] for row in rows.values())
    stderr = runs[mode]["stderr"]
    for call in ("all_reduce", "broadcast", "barrier"):
        assert (
            f"UserWarning: Running {call} on global rank {NON_MEMBER} which does not belong "
            "to the given group." in stderr
        )


@pytest.mark.parametrize("mode", MODES)
def test_hand_written_ring_all_reduce_over_chunks(runs, mode) -> None:
    rows = runs[mode]["rows"]["ring_all_reduce"]
    expected = sum(np.arange(ELEMENTS, dtype=np.float32) + 10 * r for r in range(WORLD))
    for row in rows.values():
        np.testing.assert_array_equal(row["value"], expected)


def _sgd_expected() -> list[np.ndarray]:
    params = [np.ones(ELEMENTS, np.float32), np.zeros(ELEMENTS // 2, np.float32)]
    for step in range(2):
        for i, p in enumerate(params):
            grads = [
                (np.arange(p.size, dtype=np.float32) + 1) * (r + 1) * (step + 1) / 4
                for r in range(WORLD)
            ]
            average = np.sum(grads, axis=0, dtype=np.float32) / np.float32(WORLD)
            params[i] = p - average * np.float32(0.5)
    return params


@pytest.mark.parametrize("mode", MODES)
def test_synchronous_sgd_average_gradients(runs, mode) -> None:
    rows = runs[mode]["rows"]["synchronous_sgd"]
    expected = _sgd_expected()
    for row in rows.values():
        for got, want in zip(row["value"], expected, strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-6)


def test_both_ways_give_the_same_values_and_simulated_time(runs) -> None:
    plain, runner = runs["python"], runs["kernbench run"]
    assert plain["rows"] == runner["rows"]
    assert plain["simulated_ps"] == runner["simulated_ps"] > 0
    # kernbench run's summary counts the ranks the script started itself.
    assert f"({runner['simulated_ps']} ps) on multi_sip, {WORLD} ranks" in runner["stdout"]
