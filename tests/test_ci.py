"""CI runs what the README tells a developer to run, and checks style before the tests."""

from __future__ import annotations

import re


def _readme_test_command(readme: str) -> str:
    """The one line of the fenced bash block after "Run the tests:"."""
    match = re.search(r"Run the tests:\s*```bash\n(.+?)\n```", readme, re.DOTALL)
    assert match, "README.md has no 'Run the tests:' bash block"
    (line,) = match.group(1).splitlines()
    return line


def test_ci_runs_exactly_the_readme_test_command(repo_root) -> None:
    command = _readme_test_command((repo_root / "README.md").read_text())
    lines = (repo_root / ".ci" / "run").read_text().splitlines()
    assert command in lines


def test_the_test_command_checks_lint_format_and_layers_before_pytest(repo_root) -> None:
    steps = _readme_test_command((repo_root / "README.md").read_text()).split(" && ")
    assert steps[:2] == ["python3 -m venv .venv", ".venv/bin/pip install -q -e '.[test]'"]
    assert steps[2:] == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/lint-imports",
        ".venv/bin/python -m pytest -q",
    ]
