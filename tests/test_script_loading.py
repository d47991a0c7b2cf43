"""A bench script that cannot be loaded is one KernBenchError naming the script.

Syntax errors say file:line:col and the compiler's message; import errors and
exceptions raised while the script is imported name the script and the error;
a directory, a FIFO, a binary, a non-UTF-8 or a too-large file is refused
before anything is read or run.  Through the CLI each is one ``error:`` line
and exit status 2.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from kernbench.bench.runner import load_script
from kernbench.cli import main
from kernbench.errors import InputFileError, KernBenchError, ScriptError
from kernbench.files import SCRIPT_LIMIT

GOOD = "def main():\n    return 1\n"


def _script(tmp_path: Path, text: str, name: str = "bench.py") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "where", "message"),
    [
        ("def main(:\n    pass\n", "bench.py:1:10", "invalid syntax"),
        ("x = 1\ndef main():\nreturn 2\n", "bench.py:3:1", "expected an indented block"),
        ("def main():\n    return (1,\n", "bench.py:2:12", "'(' was never closed"),
        ("def main():\n\tif 1:\n        pass\n", "bench.py:3:", "inconsistent use of tabs"),
    ],
    ids=["invalid", "indentation", "unclosed", "tabs"],
)
def test_a_syntax_error_names_file_line_column_and_message(
    tmp_path: Path, text: str, where: str, message: str
):
    path = _script(tmp_path, text)
    with pytest.raises(ScriptError) as info:
        load_script(path)
    text = str(info.value)
    assert text.startswith(f"{tmp_path / where}")
    assert "syntax error" in text and message in text
    assert "\n" not in text


@pytest.mark.parametrize(
    "text",
    ["x = " + "-" * 200_000 + "1\n", "x = 1" + " + 1" * 500_000 + "\n"],
    ids=["deep-unary", "long-sum"],
)
def test_source_too_deep_for_the_compiler_is_a_script_error(tmp_path: Path, text: str):
    path = _script(tmp_path, text)
    with pytest.raises(ScriptError) as info:
        load_script(path)
    assert str(info.value).startswith(f"{path}: cannot compile the bench script (")
    assert "nested too deeply" in str(info.value)


def test_an_import_error_names_the_script_and_the_missing_module(tmp_path: Path):
    path = _script(tmp_path, "import kernbench_no_such_module\n" + GOOD)
    with pytest.raises(ScriptError) as info:
        load_script(path)
    assert str(info.value) == (
        f"{path}:1: importing the bench script raised ModuleNotFoundError: "
        "No module named 'kernbench_no_such_module'"
    )
    assert isinstance(info.value.original, ModuleNotFoundError)


@pytest.mark.parametrize(
    ("line", "instead"),
    [
        ("import torch", "import kernbench.torch as torch"),
        ("import torch.distributed as dist", "import kernbench.torch.distributed as dist"),
        ("from torch.nn import functional", "import kernbench.torch as torch"),
        ("import triton.language as tl", "import kernbench.triton.language as tl"),
    ],
)
def test_importing_torch_or_triton_says_what_to_import_instead(tmp_path: Path, line, instead):
    import importlib.util

    if importlib.util.find_spec(line.split()[1].split(".")[0]) is not None:
        pytest.skip("the real package is installed here")
    path = _script(tmp_path, line + "\n" + GOOD)
    with pytest.raises(ScriptError, match=re.escape(f"`{instead}`")):
        load_script(path)


def test_an_exception_while_importing_names_the_script_and_the_line(tmp_path: Path):
    path = _script(
        tmp_path, GOOD + "\n\ndef helper():\n    raise ValueError('bad setting')\n\nhelper()\n"
    )
    with pytest.raises(ScriptError) as info:
        load_script(path)
    assert str(info.value) == (
        f"{path}:6: importing the bench script raised ValueError: bad setting"
    )


def test_a_kernbench_error_while_importing_is_wrapped_naming_the_script(tmp_path: Path):
    path = _script(
        tmp_path, "from kernbench.errors import TopologyError\nraise TopologyError('no cubes')\n"
    )
    with pytest.raises(
        ScriptError,
        match=r"bench.py:2: importing the bench script raised "
        r"TopologyError: no cubes",
    ):
        load_script(path)


def test_a_sibling_module_of_the_script_can_be_imported(tmp_path: Path):
    _script(tmp_path, "VALUE = 7\n", name="helper_for_bench_loading.py")
    path = _script(
        tmp_path, "import helper_for_bench_loading\nVALUE = helper_for_bench_loading.VALUE\n" + GOOD
    )
    try:
        module = load_script(path)
    finally:
        sys.modules.pop("helper_for_bench_loading", None)
    assert module.VALUE == 7 and module.main() == 1
    assert module.__file__ == str(path)
    assert str(tmp_path) not in sys.path  # the search path is put back


def test_a_script_sees_its_own_file_and_is_not_run_as_main(tmp_path: Path):
    path = _script(
        tmp_path,
        "NAME = __name__\nFILE = __file__\n"
        "if __name__ == '__main__':\n    raise SystemExit('ran as main')\n",
    )
    module = load_script(path)
    assert module.NAME != "__main__"
    assert module.FILE == str(path)


def test_a_dataclass_in_a_script_works(tmp_path: Path):
    path = _script(
        tmp_path,
        "from __future__ import annotations\nfrom dataclasses import dataclass\n\n"
        "@dataclass\nclass Row:\n    size: int\n\nROW = Row(3)\n",
    )
    assert load_script(path).ROW.size == 3


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "bench script not found"),
        (lambda p: p.mkdir(), "bench script is a directory"),
        (lambda p: os.mkfifo(p), "bench script is a FIFO"),
        (lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01\x00binary"), "holds binary data"),
        (lambda p: p.write_bytes("x = 'caf\u00e9'\n".encode("latin-1")), "not UTF-8 text"),
        (lambda p: p.write_bytes(b"#" * (SCRIPT_LIMIT + 1)), "over the limit of 4 MiB"),
    ],
    ids=["missing", "directory", "fifo", "binary", "latin1", "too-large"],
)
def test_an_unreadable_script_is_refused_before_it_runs(tmp_path: Path, make, message):
    path = tmp_path / "bench.py"
    make(path)
    with pytest.raises(InputFileError) as info:
        load_script(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("def main(:\n", "bench.py:1:10: syntax error"),
        (
            "import kernbench_no_such_module\ndef main():\n    pass\n",
            "bench.py:1: importing the bench script raised",
        ),
        # No entry point: the script is a program, run as python runs it.
        ("import kernbench_no_such_module\n", "bench.py:1: running the bench script raised"),
        ("raise RuntimeError('at import')\n", "RuntimeError: at import"),
    ],
    ids=["syntax", "import", "program", "raises"],
)
def test_the_cli_prints_one_error_line_and_exits_2(tmp_path: Path, capsys, text, message):
    path = _script(tmp_path, text)
    assert main(["run", str(path), "--topology", "tiny"]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith(f"error: {path}") and message in first
    assert "site-packages" not in err and "importlib" not in err


def test_script_errors_are_kernbench_errors():
    assert issubclass(ScriptError, KernBenchError)
