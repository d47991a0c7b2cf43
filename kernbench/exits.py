"""How a ``kernbench`` command ends: its exit status and the one line an error prints.

:func:`status_of` turns whatever ended a command into an exit status, never
showing a Python traceback unless asked (``--traceback`` or
``KERNBENCH_TRACEBACK=1``):

* a user error (a :class:`~kernbench.errors.KernBenchError`, or click's usage
  errors) is one ``error: ...`` line and exit status 2;
* an exception raised by the user's own script names the rank, the exception
  and the innermost line of the user's code (outside KernBench, the standard
  library and installed packages), on one ``error:`` line, status 2; raised
  while the script loads, outside any rank, it names the script's innermost
  line;
* any other exception is a KernBench bug: one ``error: internal error: ...``
  line and status 70 (``EX_SOFTWARE``), so that tests and fuzzers can tell it
  from a user error;
* Ctrl-C exits 130; a closed standard output (``kernbench ... | head -1``)
  exits 141, as a program killed by SIGPIPE does, without a message.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from pathlib import Path

import click

from kernbench.errors import KernBenchError, OutputFileError, RankError, exception_text, shown

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_INTERNAL_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_USER_ERROR",
    "TRACEBACK_VARIABLE",
    "StdoutClosed",
    "status_of",
    "traceback_asked",
]

EXIT_USER_ERROR = 2
EXIT_INTERNAL_ERROR = 70  # EX_SOFTWARE in sysexits.h
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, as a shell reports a reader that went away
TRACEBACK_VARIABLE = "KERNBENCH_TRACEBACK"
_TRACEBACK_HINT = f"{TRACEBACK_VARIABLE}=1 shows the traceback"
_KERNBENCH = Path(__file__).resolve().parent


class StdoutClosed(Exception):
    """Standard output was closed by its reader (raised past click, which would exit 1)."""


def traceback_asked() -> bool:
    """True when ``KERNBENCH_TRACEBACK`` is set to anything but ``""`` or ``0``."""
    return os.environ.get(TRACEBACK_VARIABLE, "") not in ("", "0")


def _library_directories() -> tuple[str, ...]:
    """KernBench's own package and the installed libraries: code that is not the user's."""
    paths = sysconfig.get_paths()
    places = {str(_KERNBENCH)}
    places.update(
        str(Path(paths[name]).resolve())
        for name in ("stdlib", "platstdlib", "purelib", "platlib")
        if name in paths
    )
    return tuple(place + os.sep for place in places)


def _user_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The innermost frame of ``error``'s traceback in the user's code (their script)."""
    libraries = _library_directories()
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        try:
            where = str(Path(frame.filename).resolve())
        except (OSError, RuntimeError, ValueError):
            where = frame.filename
        # Compiled extensions (Cython) name their sources relatively ("numpy/random/
        # _common.pyx"): never the user's code, which is a file that exists.
        compiled = frame.filename.endswith((".pyx", ".pxd")) or not os.path.exists(frame.filename)
        if not frame.filename.startswith("<") and not compiled and not where.startswith(libraries):
            found = frame
    return found


def _script_location(error: BaseException, script: str) -> str | None:
    """``file:line in function`` of the innermost frame of ``error`` in ``script``, if any."""
    try:
        target = os.path.realpath(script)
        if isinstance(error, SyntaxError) and error.filename and error.lineno:
            if os.path.realpath(error.filename) == target:
                return f"{error.filename}:{error.lineno}"
        found = None
        for frame in traceback.extract_tb(error.__traceback__):
            if os.path.realpath(frame.filename) == target:
                found = f"{frame.filename}:{frame.lineno} in {frame.name}"
        return found
    except (OSError, ValueError):
        return None


def _script_error(error: BaseException, where: str, show_traceback: bool) -> int:
    """The user's script raised while it was loaded (not in a rank): name its line."""
    if show_traceback:
        _print_traceback(error)
    text = error.msg if isinstance(error, SyntaxError) else error
    message = shown(exception_text(text), 1000)
    hint = "" if show_traceback else f"; {_TRACEBACK_HINT}"
    click.echo(
        f"error: the script raised {type(error).__name__}"
        + (f": {message}" if message else "")
        + f" (at {where}{hint})",
        err=True,
    )
    return EXIT_USER_ERROR


def _print_traceback(error: BaseException) -> None:
    text = "".join(traceback.format_exception(error)).rstrip()
    click.echo(text, err=True)


def _discard_stdout() -> None:
    """Point standard output at /dev/null so that the exit flush cannot fail again."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        pass
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real file behind sys.stdout (tests)
        pass


def _internal_error(error: BaseException, show_traceback: bool) -> int:
    if show_traceback:
        _print_traceback(error)
    message = shown(exception_text(error), 300)
    click.echo(
        f"error: internal error: {type(error).__name__}"
        + (f": {message}" if message else "")
        + f" (please report; {TRACEBACK_VARIABLE}=1 shows where)",
        err=True,
    )
    return EXIT_INTERNAL_ERROR


def _rank_error(error: RankError, show_traceback: bool, script: str | None) -> int:
    """A rank's own exception: name the rank, the exception and the user's line."""
    cause = error.original
    if isinstance(cause, KeyboardInterrupt):
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    if isinstance(cause, BrokenPipeError):
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    frame = _user_frame(cause)
    location = f"{frame.filename}:{frame.lineno} in {frame.name}" if frame else None
    if location is None and script:  # a script installed beside the libraries
        location = _script_location(cause, script)
    if location is None and not isinstance(cause, KernBenchError):
        return _internal_error(cause, show_traceback)  # raised by KernBench's own code
    if show_traceback:
        _print_traceback(cause)
    if isinstance(cause, KernBenchError):
        message = str(error)
    else:
        text = shown(exception_text(cause), 1000)
        message = f"rank {error.rank} raised {type(cause).__name__}: {text}"
    where = f"at {location}" if location else ""
    hint = "" if show_traceback or isinstance(cause, KernBenchError) else _TRACEBACK_HINT
    extra = "; ".join(part for part in (where, hint) if part)
    click.echo(f"error: {message}" + (f" ({extra})" if extra else ""), err=True)
    return EXIT_USER_ERROR


def _system_exit(exc: SystemExit) -> int:
    """A command's (or a script's) own exit status, as the interpreter would give it."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    click.echo(exception_text(exc.code), err=True)
    return 1


def _click_message(error: click.ClickException) -> str:
    """A usage error on one line, pointing at the command's help."""
    message = shown(" ".join(error.format_message().split()), 1000)
    context = getattr(error, "ctx", None)
    if context is not None:
        message += f" (see {context.command_path} --help)"
    return message


def status_of(error: BaseException, *, show_traceback: bool, script: str | None = None) -> int:
    """The exit status for ``error``, after printing what it needs (see the module doc).

    ``script`` is the bench script the command ran, if any: its lines are the
    user's even when it is installed beside the libraries.
    """
    if isinstance(error, SystemExit):  # a command or script that ends with a status of its own
        return _system_exit(error)
    if isinstance(error, KeyboardInterrupt | click.exceptions.Abort):
        click.echo("aborted", err=True)
        return EXIT_INTERRUPTED
    if isinstance(error, StdoutClosed | BrokenPipeError):
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    if isinstance(error, RankError):
        return _rank_error(error, show_traceback, script)
    if isinstance(error, KernBenchError):
        if isinstance(error, OutputFileError) and isinstance(error.__context__, BrokenPipeError):
            _discard_stdout()  # an output written to a standard output that was closed
            return EXIT_BROKEN_PIPE
        if show_traceback:
            _print_traceback(error)
        click.echo(f"error: {error}", err=True)
        return EXIT_USER_ERROR
    if isinstance(error, click.ClickException):
        click.echo(f"error: {_click_message(error)}", err=True)
        return EXIT_USER_ERROR
    where = _script_location(error, script) if script else None
    if where:
        return _script_error(error, where, show_traceback)
    return _internal_error(error, show_traceback)
