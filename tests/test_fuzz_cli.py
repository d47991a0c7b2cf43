"""Hostile inputs through the whole command line: never a traceback, never a hang.

The cases come from :mod:`fuzzing` (every file kind a user hands in, with alias
bombs, special files, encodings and deep nesting among the mutations).  The
suite runs a fixed slice of seeds; ``python tests/fuzzing.py --count 10000``
runs a long one.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzzing  # noqa: E402

SEEDS = range(0, 240)


@pytest.mark.parametrize("kind", sorted(fuzzing.GENERATORS))
def test_every_kind_is_generated(kind):
    kinds = {fuzzing.make_case(seed).kind for seed in SEEDS}
    assert kind in kinds


def test_hostile_inputs_end_in_a_result_or_one_error_line():
    outcomes = fuzzing.run_many(list(SEEDS), jobs=1)
    bad = [o for o in outcomes if o.verdict != "ok"]
    assert not bad, "\n\n".join(
        f"seed {o.seed} {o.kind} {o.verdict} status={o.status}\nargv={o.argv}\n{o.stderr}"
        for o in bad[:5]
    )
    errors = [o for o in outcomes if o.status == 2]
    assert errors, "no case was refused: the generators no longer make hostile inputs"
    for outcome in errors:
        lines = [line for line in outcome.stderr.splitlines() if line.startswith("error:")]
        assert lines, f"seed {outcome.seed}: exit 2 without an error: line\n{outcome.stderr}"


def test_a_traceback_is_detected(monkeypatch):
    """The harness itself: an exception escaping main() is a failure, not a pass."""
    import kernbench.cli

    def boom(argv):
        raise TypeError("internal")

    fuzzing.real_artifacts()  # made with the real CLI first, whatever ran on this worker
    monkeypatch.setattr(kernbench.cli, "main", boom)
    assert fuzzing.run_case(0).verdict == "traceback"
