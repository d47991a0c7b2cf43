"""``kernbench run``: build the machine, load a bench script on it and run its ranks."""

from __future__ import annotations

import ast
import contextlib
import csv
import hashlib
import inspect
import io
import os
import re
import sys
import threading
import traceback
import types
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from greenlet import GreenletExit

from kernbench import __version__
from kernbench.bench.outputs import check_outputs, writes_to_stdout
from kernbench.bench.simulate import Run, SimResult
from kernbench.bench.torch_imports import mirrored_imports
from kernbench.bench.trace import chrome_trace, write_json_atomic
from kernbench.ccl.settings import named_tune_table, split_overrides
from kernbench.distributed.environment import TORCHRUN_VARIABLES
from kernbench.distributed.watchdog import WallClock, WallTimeExpired, where_it_ran
from kernbench.distributed.world import run_settings
from kernbench.errors import (
    ConfigError,
    ForeignThreadError,
    KernBenchError,
    RankError,
    ScriptError,
    SimulationLimitError,
    UnsupportedNameError,
    exception_text,
    shown,
)
from kernbench.files import SCRIPT_LIMIT, is_stream_target, read_text, write_text
from kernbench.machine.observe import CollectiveRefused
from kernbench.runtime import default_topology_path
from kernbench.topology import (
    apply_overrides,
    document_digest,
    load_topology_sources,
    validate_topology,
)
from kernbench.units import format_size_iec, format_time

__all__ = [
    "load_script",
    "runs_as_main",
    "calls_main_at_module_level",
    "run_script",
    "format_run_summary",
    "csv_text",
    "write_csv_atomic",
]


def _compiled(path: str | Path, source: str | None = None) -> tuple[str, Any, ast.Module]:
    """The script's name, code object and syntax tree (of ``source``, its text already
    read, else the file's); a syntax error is a ScriptError."""
    name = str(path)
    if source is None:
        source = read_text(path, what="bench script", limit=SCRIPT_LIMIT)
    try:
        tree = compile(source, name, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        code = compile(tree, name, "exec", dont_inherit=True)
    except SyntaxError as exc:
        line = exc.lineno or 0
        column = f":{exc.offset}" if exc.offset else ""
        raise ScriptError(
            f"{shown(name)}:{line}{column}: syntax error: {shown(str(exc.msg))}", path=name
        ) from None
    except (ValueError, RecursionError, MemoryError) as exc:
        # Refused outright (a NUL byte), or too deeply nested for the compiler.
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ScriptError(
            f"{shown(name)}: cannot compile the bench script ({reason}); is an expression "
            "nested too deeply?",
            path=name,
        ) from None
    return name, code, tree


def _is_main_guard(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` (either way round)."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s.id for s in sides if isinstance(s, ast.Name)]
    values = [s.value for s in sides if isinstance(s, ast.Constant)]
    return names == ["__name__"] and values == ["__main__"]


def _defines(tree: ast.Module, name: str) -> bool:
    """Whether the module's top level binds ``name`` (a def, class, assignment or import)."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def runs_as_main(path: str | Path, source: str | None = None) -> bool:
    """Whether ``kernbench run`` starts this script by its ``__main__`` block.

    It does when the script has a top-level ``if __name__ == "__main__":`` block
    and defines no ``main()`` that can be called without arguments: the block is
    the script's own launcher (the PyTorch tutorials' ``mp.Process``/``mp.spawn``
    loop, or ``mp.spawn(main, args=(world_size, ...))`` in pytorch/examples'
    ``multigpu.py``), so it runs as it would under ``python``, on the run's
    machine.  A ``main()`` is run once per rank instead, and a script with
    neither runs ``run(rank, world_size)`` per rank.  A script with none of the
    three (pytorch/examples' ``regression/main.py``: all its work at module
    level) is a program as it stands: it runs as ``__main__`` too, once, as
    ``python`` runs it.
    """
    _, _, tree = _compiled(path, source)
    return _runs_as_main(tree)


def _runs_as_main(tree: ast.Module) -> bool:
    if not any(_is_main_guard(node) for node in tree.body):
        return not _defines(tree, "main") and not _defines(tree, "run")
    return not _defines(tree, "main") or _main_needs_arguments(tree)


def _main_needs_arguments(tree: ast.Module) -> bool:
    """Whether the module's last top-level ``def main`` has a parameter without a default
    (``def main(rank, world_size, ...)``): only its ``__main__`` block can call it."""
    defs = [
        node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "main"
    ]
    if not defs:
        return False
    args = defs[-1].args
    positional = len(args.posonlyargs) + len(args.args)
    return positional > len(args.defaults) or any(d is None for d in args.kw_defaults)


def calls_main_at_module_level(path: str | Path, source: str | None = None) -> bool:
    """Whether the script calls ``main()`` itself at module level, outside any
    ``if __name__ == "__main__":`` block (``main()`` or ``sys.exit(main())`` as its last
    line).

    Such a script starts itself, as ``python SCRIPT.py`` and ``torchrun`` run it: the
    whole script runs once per rank, and ``main()`` is not called a second time.
    """
    _, _, tree = _compiled(path, source)
    return _starts_itself(tree)


def _starts_itself(tree: ast.Module) -> bool:
    return any(_calls_main(node) for node in tree.body if not _is_main_guard(node))


def _calls_main(node: ast.AST) -> bool:
    """Whether running ``node`` calls ``main`` (bodies of functions, classes and lambdas
    defined in it run later, if at all)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
        return False
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "main":
        return True
    return any(_calls_main(child) for child in ast.iter_child_nodes(node))


# What a script's import lets through as it is: Ctrl-C, the wall-time limit, a greenlet
# being unwound (each has its own handling above it).  SystemExit is handled apart.
_PASSED_THROUGH = (KeyboardInterrupt, WallTimeExpired, GreenletExit)


def load_script(path: str | Path, *, as_main: bool = False, source: str | None = None) -> Any:
    """Import a bench script by path; its ``__main__`` block runs only with ``as_main``.

    The file is read with :func:`kernbench.files.read_text` (a regular UTF-8
    file of at most ``SCRIPT_LIMIT`` bytes) and compiled here, so a syntax error
    is a :class:`~kernbench.errors.ScriptError` saying file:line:col and the
    compiler's message, and anything the script raises while it is imported is
    one ``ScriptError`` naming the script and the line.  The script's directory
    is on ``sys.path`` while it is imported, so it can import modules beside it.

    With ``as_main`` the script runs as ``__main__`` (``sys.modules["__main__"]``
    is the script while it runs), as ``python SCRIPT.py`` would run it, and a
    :class:`~kernbench.errors.KernBenchError` it raises (a rank's error, a
    deadlock, a limit) passes through as it is.
    """
    name, code, _ = _compiled(path, source)
    module_name = "__main__" if as_main else f"kernbench_script_{Path(name).stem}"
    module = types.ModuleType(module_name)
    module.__file__ = name
    # Registered as an import would be: dataclasses and pickling look classes up by module.
    saved = sys.modules.get(module_name)
    sys.modules[module_name] = module
    directory = str(Path(name).parent.resolve())
    sys.path.insert(0, directory)
    try:
        exec(code, module.__dict__)
    except SystemExit as exc:
        if as_main and exc.code in (None, 0):  # sys.exit() at the end of a finished run
            return module
        raise
    except _PASSED_THROUGH:
        raise
    except BaseException as exc:  # noqa: BLE001 - any error of the script's own import
        # BaseException: a script's own `class Stop(BaseException)` or a GeneratorExit
        # raised at module level is the script's error too, not one to escape the CLI.
        if as_main and isinstance(exc, KernBenchError):
            raise  # a rank's error, a deadlock or a limit: already says where
        if not as_main:
            sys.modules.pop(module_name, None)
        raise _import_error(name, exc, as_main) from exc
    finally:
        with contextlib.suppress(ValueError):  # the script may have taken it off itself
            sys.path.remove(directory)
        if as_main:
            if saved is None:
                sys.modules.pop(module_name, None)
            else:
                sys.modules[module_name] = saved
    return module


def _import_error(name: str, exc: BaseException, as_main: bool = False) -> ScriptError:
    doing = "running the bench script" if as_main else "importing the bench script"
    # KernBench's own messages carry what to use instead: not cut at the usual length
    text = shown(exception_text(exc), 1000 if isinstance(exc, KernBenchError) else 200)
    hint = _missing_name_hint(exc) or (_torchrun_hint(exc) if as_main else "")
    if hint:
        text = f"{text}: {hint}"
    return ScriptError(
        f"{shown(name)}:{_script_line(exc, name)}: {doing} raised {type(exc).__name__}: {text}",
        path=name,
        original=exc,
    )


# Packages people import by their usual names, and what to import here instead.
_MIRRORED = {
    "torch": "`import kernbench.torch as torch`, `import kernbench.torch.distributed as dist`",
    "triton": "`import kernbench.triton as triton`, `import kernbench.triton.language as tl`",
}


# torch's companion libraries, which KernBench does not mirror (they run on real torch),
# and what a script does instead.
_NOT_MIRRORED = {
    "torchvision": "make the images as tensors in the script (torch.utils.data.TensorDataset "
    "over torch.rand/randn, or NumPy arrays read from files through torch.from_numpy), "
    "normalise with tensor ops ((x - mean) / std), build the model from kernbench.torch.nn, "
    "and write images from t.numpy() with NumPy or PIL",
    "torchaudio": "load the audio with NumPy (or soundfile) and torch.from_numpy, and build "
    "the features with tensor ops",
    "torchtext": "tokenise in Python and make index tensors with torch.tensor; "
    "kernbench.torch.utils.data batches them",
}


def _torchrun_hint(exc: BaseException) -> str:
    """A ``__main__`` block reading torchrun's variables outside any rank was written for
    torchrun, which runs the whole script once per process."""
    if isinstance(exc, KeyError) and exc.args and exc.args[0] in TORCHRUN_VARIABLES:
        return (
            f"${exc.args[0]} is set in each rank, and this __main__ block runs once, outside "
            "any rank; a script written for torchrun runs once per rank with `kernbench run "
            "--nproc-per-node N SCRIPT`"
        )
    return ""


def _missing_name_hint(exc: BaseException) -> str:
    """What to use instead, for ``import torch`` and ``from kernbench.torch import where``
    and the like: Python turns the module's UnsupportedNameError into a bare ImportError,
    so ask again."""
    if not isinstance(exc, ImportError):
        return ""
    top, _, rest = (getattr(exc, "name", None) or "").partition(".")
    package = rest.partition(".")[0] if top == "kernbench" and rest else top
    if isinstance(exc, ModuleNotFoundError) and package in _NOT_MIRRORED:
        return (
            f"KernBench does not mirror {package} (it runs on torch itself, not on the "
            f"simulated machine): {_NOT_MIRRORED[package]}"
        )
    if isinstance(exc, ModuleNotFoundError) and package in _MIRRORED:
        return (
            f"KernBench mirrors {package} without depending on it: import it from kernbench "
            f"({_MIRRORED[package]}, and so on; the same names, run on the simulated machine)"
        )
    module = sys.modules.get(exc.name or "")
    found = re.match(r"cannot import name '(\w+)'", str(exc))
    if module is None or found is None or not module.__name__.startswith("kernbench."):
        return ""
    try:
        getattr(module, found.group(1))
    except UnsupportedNameError as missing:
        return str(missing).partition(": ")[2]
    except AttributeError:
        return ""
    return ""


def _script_line(exc: BaseException, filename: str) -> int:
    """The line of ``filename`` that was running when ``exc`` was raised (its innermost frame)."""
    line = 0
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        if frame.f_code.co_filename == filename:
            line = lineno
    return line


# Said when a script with no entry point (run as a program, as python runs it) spent no
# simulated time and only defines functions: a misspelt main() runs nothing, silently.
_NOTHING_RAN = (
    "note: the script ran as a program (it has no main(), run(rank, world_size) or "
    '`if __name__ == "__main__":` block) and did nothing on the machine; kernbench runs '
    "main() once per rank, or run(rank, world_size), or the __main__ block"
)


def _defines_functions_only(tree: ast.Module) -> bool:
    """Whether the module's top level defines functions and calls nothing at all."""
    defines = False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            defines = True
        elif any(isinstance(n, ast.Call) for n in ast.walk(node)) and not isinstance(
            node, ast.ClassDef | ast.Import | ast.ImportFrom
        ):
            return False
    return defines


def _entry(module: Any, path: str) -> tuple[Callable[..., Any], bool]:
    if callable(getattr(module, "main", None)):
        return _checked_entry(module.main, "main()", (), path), False
    if callable(getattr(module, "run", None)):
        return _checked_entry(module.run, "run(rank, world_size)", (0, 1), path), True
    raise ConfigError(
        "the script defines neither main() nor run(rank, world_size), and has no "
        '`if __name__ == "__main__":` block to start it by',
        source=path,
    )


def _checked_entry(fn: Callable[..., Any], form: str, args: tuple, path: str) -> Callable:
    """``fn`` if each rank can call it as ``form``: a plain function taking those arguments."""
    name = getattr(fn, "__name__", form.partition("(")[0])
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        kind = "a coroutine function (async def)"
    elif inspect.isgeneratorfunction(fn):
        kind = "a generator function (it yields)"
    else:
        try:
            inspect.signature(fn).bind(*args)
            return fn
        except TypeError as exc:
            kind = f"not callable as {form} ({exc})"
        except ValueError:  # no signature to read (a builtin): let the call say
            return fn
    raise ConfigError(
        f"{name} is {kind}; each rank calls the script's {form} as a plain function "
        "(def main(): or def run(rank, world_size):)",
        source=path,
    )


def _passing_script_exit(body: Callable[[], SimResult], script: str) -> SimResult:
    """Run ``body``, passing on a script's own sys.exit (argparse --help, a usage error)
    when the first rank calls it before any other rank ran; a rank exiting while the
    others run would leave them waiting, so that is an error naming it."""
    try:
        return body()
    except RankError as exc:
        if isinstance(exc.original, SystemExit):
            if exc.first:
                raise exc.original from None
            raise ScriptError(
                f"rank {exc.rank} called sys.exit({exc.original.code!r}) while the other "
                "ranks were running; a rank that fails raises, one that is done returns "
                "(or exits 0)",
                path=script,
            ) from None
        raise


def _each_rank_as_main(run: Run, script: str, source: str) -> SimResult:
    """The whole script as ``__main__`` in every rank, as torchrun runs it in each process:
    module-level code and the ``__main__`` block run once per rank, in a module of the
    rank's own (``sys.modules["__main__"]`` is rank 0's while the ranks run)."""
    name, code, _ = _compiled(script, source)
    modules: dict[int, types.ModuleType] = {}

    def body(rank: int, world_size: int) -> Any:
        module = modules[rank] = types.ModuleType("__main__")
        module.__file__ = name
        if rank == 0:
            sys.modules["__main__"] = module
        try:
            exec(code, module.__dict__)
        except SystemExit as exc:
            if exc.code not in (None, 0):
                raise
        except ImportError as exc:  # import torch: say what to import instead
            if not _missing_name_hint(exc):
                raise
            raise _import_error(name, exc, as_main=True) from exc
        return None

    saved = sys.modules.get("__main__")
    directory = str(Path(name).parent.resolve())
    sys.path.insert(0, directory)
    try:
        return run.ranks(body, rank_args=True)
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)
        if saved is not None:
            sys.modules["__main__"] = saved


# Calls over at least this many ranks that run message by message on a machine that
# prices collectives step-wide are told on standard error as they start: at this
# scale a call can take minutes, and the run's summary comes only at its end.
NOTE_REFUSED_FROM = 256


class _RefusalNotes:
    """Tells, once per op, configuration and reason, which large calls run message by
    message on the fast backend and why."""

    def __init__(self) -> None:
        self._told: set[tuple[str, str, str]] = set()

    def on_refused(self, record: CollectiveRefused) -> None:
        key = (record.op, record.config, record.reason)
        if record.ranks < NOTE_REFUSED_FROM or key in self._told:
            return
        self._told.add(key)
        print(
            f"note: {record.op} ({record.config}) over {record.ranks} ranks runs message by "
            f"message on the fast backend: {record.reason or 'refused'}",
            file=sys.stderr,
            flush=True,
        )


def _anchored(path: str | None) -> str | None:
    """``path`` made absolute against the working directory of now (a stream name as it is)."""
    if path is None or is_stream_target(path) or "\x00" in str(path):
        return path
    return os.path.abspath(path)


@contextlib.contextmanager
def _streams_kept() -> Iterator[None]:
    """``sys.stdout`` and ``sys.stderr`` as they were before the script, once it is done.

    A script that rebinds them (``sys.stdout = io.StringIO()``) or closes them must not
    take the run's summary and error line with it.  A closed stream is opened again on
    its file descriptor, which closing a standard stream leaves open.  A descriptor the
    script closed itself (``os.close(1)``) is pointed at the other standard stream's, so
    what was to go to it goes there (see :func:`_descriptors_kept`).
    """
    stdout, stderr = sys.stdout, sys.stderr
    try:
        yield
    finally:
        _descriptors_kept()
        sys.stdout, sys.stderr = _usable(stdout, 1), _usable(stderr, 2)


def _descriptors_kept() -> None:
    """Standard output and error open again if the script closed their descriptors.

    One closed is made a copy of the other, so the summary (or the error line) still
    reaches the terminal or file the other goes to (standard output's with a note on
    standard error saying so); both closed are opened on the null device: nothing can
    be shown, and the exit status still tells.  Left closed, the summary would fail to
    print (an internal error instead of the run's outcome), and the next file the run
    opened (the report being written) would be given the free descriptor and take what
    is printed.
    """
    closed = [fd for fd in (1, 2) if not _is_open(fd)]
    if not closed:
        return
    if len(closed) == 2:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in closed:
            if fd != null:
                os.dup2(null, fd)
        if null not in closed:
            os.close(null)
        return
    os.dup2(3 - closed[0], closed[0])
    if closed == [1]:  # (a note for a closed standard error would be on standard output)
        with contextlib.suppress(OSError, ValueError, AttributeError):
            print(
                "note: the script closed standard output (file descriptor 1); what the run "
                "prints there goes to standard error",
                file=sys.__stderr__,
                flush=True,
            )


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def _refusals_in_threads() -> Iterator[list[ForeignThreadError]]:
    """The simulated work refused to threads a script started, collected for the run.

    Such a thread ends with its ForeignThreadError uncaught; Python would print its
    traceback and let the run end as if nothing failed.  They are kept here, and the
    run raises the first once its script is done.  Other errors a thread leaves
    uncaught go to the hook that was there before.
    """
    refused: list[ForeignThreadError] = []
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if isinstance(args.exc_value, ForeignThreadError):
            refused.append(args.exc_value)
        else:
            previous(args)

    threading.excepthook = hook
    try:
        yield refused
    finally:
        threading.excepthook = previous


def _usable(stream: Any, fd: int) -> Any:
    if stream is None or not getattr(stream, "closed", False):
        return stream
    try:
        return open(  # noqa: SIM115 - the stream lives as long as the process
            fd, "w", encoding="utf-8", errors="backslashreplace", closefd=False
        )
    except OSError:  # the descriptor itself was closed: nothing to write to
        return stream


def run_script(
    script: str,
    *,
    topology: str | None = None,
    world_size: int | None = None,
    overrides: Sequence[str] = (),
    timing_only: bool = False,
    report_path: str | None = None,
    trace_path: str | None = None,
    csv_path: str | None = None,
    seed: int = 0,
    max_sim_time_ps: int | None = None,
    max_wall_s: float | None = None,
    script_args: Sequence[str] = (),
    echo: Callable[[str], None] = print,
    per_rank: bool = False,
    rows_kept: bool = False,
    mirror_imports: bool = True,
) -> SimResult:
    """Run a bench script on a simulated machine and write what was asked for.

    The machine is built first and the script imported on it (module-level
    code runs on ``topology`` and costs time on the run's clock).  A script
    with a ``main()`` runs it once per rank (a script calling its own ``main()`` at
    module level runs whole in each rank, as with ``per_rank``); one with an ``if __name__ ==
    "__main__":`` block and no ``main()`` runs as ``__main__``, starting its own
    ranks with ``torch.multiprocessing`` (see :func:`runs_as_main`); otherwise
    ``run(rank, world_size)`` runs once per rank.  With ``per_rank`` the whole
    script (module level and ``__main__`` block) runs once per rank, as
    ``torchrun`` runs it in each process (``--nproc-per-node``).

    The outputs are checked before the script is even loaded (see
    :func:`kernbench.bench.outputs.check_outputs`) and written through
    :mod:`kernbench.files`.  When one of them goes to standard output, what
    the script prints goes to standard error, so that standard output carries
    that output alone.

    The result rows a rank returns are checked as it returns them when a report or
    CSV is written, or when ``rows_kept`` (the caller keeps them: a sweep's point).

    With ``mirror_imports`` (the default) the script's ``import torch`` and ``import
    triton`` (and their submodules) are KernBench's ``kernbench.torch`` and
    ``kernbench.triton`` while it runs (:mod:`kernbench.bench.torch_imports`), so a
    PyTorch program runs as written.
    """
    if topology is not None and not str(topology).strip():
        raise ConfigError(
            "--topology is empty; name a topology file or a bundled machine (kernbench topo "
            "list), or leave the option out for the default machine",
            key_path="topology",
        )
    topology_path = Path(topology) if topology else default_topology_path()
    outputs = {"report": report_path, "CSV": csv_path, "trace": trace_path}
    # Read once, before the run (the script is compiled and the machine built from what
    # was read here): what the report records is what ran, whatever happens to the
    # files meanwhile, and no output may replace any of them (a bundled machine's file,
    # a parent its extends: chain names, the tune table --set ccl.tune_table names).
    document, topology_files = load_topology_sources(topology_path)  # before --set
    check_outputs(outputs, inputs=[script, *topology_files, named_tune_table(overrides)])
    # Where the outputs go is fixed now: a script that changes the working directory
    # (os.chdir) would otherwise move them to a place no check has seen.
    written = {what: _anchored(path) for what, path in outputs.items()}
    source = read_text(script, what="bench script", limit=SCRIPT_LIMIT)
    script_digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    _, _, tree = _compiled(script, source)  # a syntax error is reported here, once
    as_main = _runs_as_main(tree)
    # A script calling its own main() at module level is run whole in each rank, as
    # torchrun runs it: imported once and then main() per rank, main() would run twice.
    per_rank = per_rank or _starts_itself(tree)
    machine = validate_topology(
        apply_overrides(document, split_overrides(overrides)[0]), source=str(topology_path)
    )
    # The machine first: the script is imported on it, so module-level code runs on the
    # requested topology and its tensors and kernels cost time on the run's clock.
    run = Run(
        machine,
        world_size=world_size,
        timing_only=timing_only,
        overrides=overrides,
        seed=seed,
        detail=bool(trace_path),
        max_sim_time_ps=max_sim_time_ps,
        max_wall_s=max_wall_s,
        check_rows=bool(rows_kept or report_path or csv_path),
    )
    run.ctx.machine.observers.add(_RefusalNotes())
    saved_argv = sys.argv
    sys.argv = [script, *script_args]
    to_stdout = any(writes_to_stdout(path) for path in outputs.values())
    # The ranks' scheduler keeps --max-wall-time while they run; this one also covers
    # the script's module level and __main__ block, outside any rank.
    limited = isinstance(max_wall_s, int | float) and 0 < max_wall_s < float("inf")
    wall = WallClock(max_wall_s) if limited else None
    run_settings(run.ctx).wall_clock = wall  # the ranks' scheduler shares it
    try:
        with (
            mirrored_imports(mirror_imports),
            _streams_kept(),
            contextlib.redirect_stdout(sys.stderr) if to_stdout else contextlib.nullcontext(),
            _refusals_in_threads() as refused,
        ):
            if per_rank:
                result = _passing_script_exit(
                    lambda: _each_rank_as_main(run, script, source), script
                )
            elif as_main:

                def as_main_block() -> Any:
                    return load_script(script, as_main=True, source=source)

                result = _passing_script_exit(lambda: run.script_main(as_main_block), script)
                if not result.elapsed_ps and _defines_functions_only(tree):
                    print(_NOTHING_RAN, file=sys.stderr)
            else:
                with run.active():
                    module = load_script(script, source=source)
                fn, rank_args = _entry(module, script)
                result = _passing_script_exit(lambda: run.ranks(fn, rank_args=rank_args), script)
            if refused:
                raise refused[0]
    except SystemExit as exc:
        asked = [f"{what} ({path})" for what, path in outputs.items() if path]
        if exc.code not in (None, 0) or not asked:
            raise  # the status the script asked for; no output was asked for
        line = _script_line(exc, str(script))
        raise ScriptError(
            f"{shown(script)}:{line}: the script called sys.exit({exc.code!r}) before its run "
            f"finished (at module level, or in its first rank before it ran anything), so "
            f"no {', '.join(asked)} was written; a rank that is done returns from main() or "
            "run() (or exits 0 once it has run)",
            path=script,
            original=exc,
        ) from None
    except WallTimeExpired as expired:
        if wall is not None:
            wall.stop()
        raise SimulationLimitError(
            f"stopped: wall time passed --max-wall-time ({max_wall_s:g} s) in the script "
            f"outside its ranks (module level or __main__ block){where_it_ran(expired)}",
            {},
        ) from None
    except SimulationLimitError as exc:
        if wall is not None:
            wall.stop()  # first: nothing may interrupt writing what was done
        if report_path and exc.report is not None:  # what happened before the stop is kept
            write_json_atomic(written["report"], exc.report, what="partial report")
            echo(f"partial report: {report_path}")
        raise
    finally:
        if wall is not None:
            wall.stop()
        run_settings(run.ctx).wall_clock = None
        sys.argv = saved_argv
    result.report["metadata"] = {
        "script": str(script),
        "script_sha256": script_digest,
        "script_args": list(script_args),
        "topology": result.report["topology"],
        "topology_file": str(topology_path),
        "topology_digest": document_digest(document),
        "overrides": list(overrides),
        "world_size": result.report["world_size"],
        "timing_only": timing_only,
        "seed": seed,
        "kernbench_version": __version__,
    }
    echo(format_run_summary(result))
    if report_path:
        write_json_atomic(written["report"], result.report, what="report")
        echo(f"report: {report_path}")
    if csv_path:
        rows = result.report.get("results", [])
        write_csv_atomic(written["CSV"], rows, result.report["metadata"])
        # A header and no row is easy to take for results; say why there are none.
        empty = "" if rows else " (a header only: no rank returned a list of result dicts)"
        echo(f"csv: {csv_path}{empty}")
    if trace_path:
        trace = chrome_trace(
            result.trace,
            detail=result.detail,
            edges=result.context.machine.graph.edges,
            metadata=result.report,
        )
        write_json_atomic(written["trace"], trace, what="trace")
        echo(f"trace: {trace_path}")
    return result


def csv_text(rows: Sequence[dict], metadata: dict | None = None) -> str:
    """Rows as CSV (columns in order of first appearance; units are in the column names).

    Metadata columns (topology, digest, overrides, version, seed) are appended to
    every row so that a CSV stands on its own; one whose name a row already has
    is written as ``run.<name>``, so the bench's own value stays.
    """
    extra = {}
    if metadata:
        extra = {
            "topology": metadata.get("topology", ""),
            "topology_file": metadata.get("topology_file", ""),
            "topology_digest": metadata.get("topology_digest", ""),
            "overrides": " ".join(metadata.get("overrides", [])),
            "seed": metadata.get("seed", ""),
            "kernbench_version": metadata.get("kernbench_version", ""),
        }
    own = {key for row in rows for key in row}
    # A bench's own column of the same name keeps it; the run's value goes beside it.
    extra = {(f"run.{key}" if key in own else key): value for key, value in extra.items()}
    columns = list(dict.fromkeys(key for row in rows for key in (*row, *extra)))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns or list(extra), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({**row, **extra})
    return buffer.getvalue()


def write_csv_atomic(path: str | Path, rows: Sequence[dict], metadata: dict | None = None) -> None:
    """:func:`csv_text` written with :func:`kernbench.files.write_text`."""
    write_text(path, csv_text(rows, metadata), what="CSV")


# Up to this many ranks the summary lists every rank's time; beyond, a digest.
LISTED_RANKS = 16
# The summary shows the rank orders of this many distinct collectives (all: --report).
LISTED_ORDERS = 3


def _per_rank_line(times: Sequence[int]) -> str:
    if len(times) <= LISTED_RANKS:
        return "per-rank time: " + ", ".join(format_time(t) for t in times)
    ordered = sorted(range(len(times)), key=lambda r: (times[r], r))
    fastest, slowest = ordered[0], ordered[-1]
    median = times[ordered[len(ordered) // 2]]
    return (
        f"per-rank time: min {format_time(times[fastest])} (rank {fastest}), median "
        f"{format_time(median)}, max {format_time(times[slowest])} (rank {slowest}) "
        f"over {len(times)} ranks (every rank's time: --report)"
    )


def _share(part: int | float, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "0.0%"


def _busy_line(what: str, component: dict, elapsed_ps: int) -> str:
    return (
        f"{what}: {component['name']} busy {format_time(component['busy_ps'])} "
        f"({_share(component['busy_ps'], elapsed_ps)} of the run)"
    )


def _collective_lines(report: dict, elapsed_ps: int) -> list[str]:
    """The headline: the collectives' own time, what they were, and the busiest fabric link."""
    calls = report.get("collectives") or []
    if not calls:
        return []
    by_op: dict[str, int] = {}
    for call in calls:
        by_op[call["op"]] = by_op.get(call["op"], 0) + 1
    in_flight = report.get("collective_time_ps", 0)
    lines = [
        f"collectives: {format_time(in_flight)} in flight ({_share(in_flight, elapsed_ps)} of "
        f"the run) over {len(calls)} calls: "
        + ", ".join(f"{op} {count}" for op, count in by_op.items())
    ]
    fabric = report.get("busiest_fabric_component")
    if fabric:
        lines.append("  " + _busy_line("busiest link outside the host links", fabric, elapsed_ps))
    capped = Counter(
        (call["config"], call["pieces_from"], call["pieces_setting"])
        for call in calls
        if call.get("pieces_capped")
    )
    lines.extend(
        f"  pieces: {count} {config} call{'s' if count > 1 else ''} {how}"
        f" (--set ccl.configs.{config}.{setting}=N sets them)"
        for (config, how, setting), count in sorted(capped.items())
    )
    priced = [call["priced"] for call in calls if "priced" in call]
    if priced:
        wide = sum(how.startswith("step-wide") for how in priced)
        drifting = priced.count("step-wide, drifting")
        line = (
            f"  fast backend: {wide} of {len(priced)} calls priced step-wide, "
            f"{len(priced) - wide} run message by message"
        )
        if drifting:
            line += (
                f"; {drifting} with ranks drifting apart, approximate"
                " (simulation.drift=exact runs them message by message)"
            )
        overlapped = priced.count("step-wide, overlapped")
        if overlapped:
            line += (
                f"; {overlapped} priced alone although other collectives started before"
                " they ended (their times leave that traffic out)"
            )
        bounded = [call["bound"] for call in calls if "bound" in call]
        if bounded:
            line += (
                f"; {len(bounded)} bounded (ranks drifting apart or pipelined channels "
                f"can add at most {max(bounded):.2%} to a rank's time)"
            )
        lines.append(line)
        reasons = Counter(call["refused"] for call in calls if call.get("refused"))
        lines.extend(
            f"    message by message for {reason}: {count}"
            for reason, count in sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
        )
    return lines


def _host_lines(report: dict, elapsed_ps: int) -> list[str]:
    """Everything else: host fills and reads, value checks, kernels, and the host links."""
    calls = report.get("collectives") or []
    if not calls:
        return []
    outside = max(0, elapsed_ps - report.get("collective_time_ps", 0))
    lines = [
        f"outside collectives: {format_time(outside)} ({_share(outside, elapsed_ps)} of the "
        "run: host fills and reads, value checks, kernels)"
    ]
    host = report.get("busiest_host_link")
    if host:
        lines.append(
            "  "
            + _busy_line("busiest host link", host, elapsed_ps)
            + f", {format_size_iec(host['bytes'])} moved"
        )
    return lines


def format_run_summary(result: SimResult) -> str:
    """What ``kernbench run`` prints after the script: the collectives' time first.

    The first lines are the collectives' own time (from each call's launch to
    its end, overlaps counted once: :func:`kernbench.bench.simulate.collective_time_ps`)
    and the busiest link outside the host links; then the rest of the run
    (host fills and reads, checks, kernels) and the host links apart; then the
    simulated time, per-rank times, bytes per link class and the busiest
    component of the whole run.  Sizes are IEC with 4 significant digits.
    """
    report = result.report
    elapsed = result.elapsed_ps
    lines = _collective_lines(report, elapsed)
    lines.append(
        f"simulated time: {format_time(elapsed)} ({elapsed} ps) on "
        f"{report['topology']}, {report['world_size']} ranks"
        + (" (timing-only)" if report["timing_only"] else "")
    )
    lines.append(_per_rank_line(result.per_rank_ps))
    lines += _host_lines(report, elapsed)
    if report["bytes_by_link_class"]:
        lines.append(
            "bytes moved per link class: "
            + ", ".join(
                f"{name} {format_size_iec(nbytes)}"
                for name, nbytes in report["bytes_by_link_class"].items()
            )
        )
    orders = {
        (c["op"], c["config"], c["rank_order"]): None
        for c in report.get("collectives", ())
        if c.get("rank_order")
    }
    for op, config, order in list(orders)[:LISTED_ORDERS]:
        lines.append(f"rank order of {op} {config}: {order}")
    busiest = report.get("busiest_component")
    if busiest:
        lines.append(_busy_line("busiest component of the whole run", busiest, elapsed))
    return "\n".join(lines)
