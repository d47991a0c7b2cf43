"""Checking every output of a command before the command does any work.

A run can take an hour; a ``--report`` path that cannot be written must be
refused before the first simulated picosecond, not after the last.
:func:`check_outputs` applies :func:`kernbench.files.check_output_target` to
each output and adds what only the whole command line can tell:

* the directory a file would be created in must be writable;
* two outputs may not name the same file (the second would replace the first),
  and at most one output may go to each standard stream;
* an output may not be one of the command's input files (``plot -o r.csv
  r.csv`` would replace the results it plots).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from kernbench.errors import OutputFileError
from kernbench.files import check_output_target, is_stream_target

__all__ = ["check_outputs", "writes_to_stdout"]

_STDERR_NAMES = frozenset({"/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"})


def writes_to_stdout(path: str | Path | None) -> bool:
    """True when writing ``path`` writes to standard output (``-``, ``/dev/stdout``...)."""
    return path is not None and is_stream_target(path) and str(path) not in _STDERR_NAMES


def _creation_directory(path: Path) -> Path:
    """The nearest existing ancestor of ``path``: where its temporary file is made."""
    for ancestor in path.absolute().parents:
        if os.path.exists(ancestor):  # never raises, unlike Path.exists on EACCES
            return ancestor
    return Path("/")


def _check_writable(path: Path, what: str) -> None:
    directory = _creation_directory(path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise OutputFileError(
            f"cannot write {what}: directory {directory} is not writable", path=str(path)
        )


def check_outputs(
    outputs: Mapping[str, str | Path | None], *, inputs: Iterable[str | Path | None] = ()
) -> None:
    """Refuse, with an :class:`~kernbench.errors.OutputFileError`, outputs that would fail.

    ``outputs`` maps what each output is (``"--report"``, ``"plot"``) to its
    path, ``None`` when it was not asked for; ``inputs`` are the files the
    command reads.
    """
    streams: dict[str, str] = {}
    files: dict[str, str] = {}
    read = {
        os.path.realpath(path): str(path)
        for path in inputs
        if path is not None and "\x00" not in str(path)  # such an input fails on its own
    }
    for what, path in outputs.items():
        if path is None:
            continue
        name = str(path)
        check_output_target(name, what=what)
        if is_stream_target(name):
            stream = "standard output" if writes_to_stdout(name) else "standard error"
            if stream in streams:
                raise OutputFileError(
                    f"both {streams[stream]} and {what} would go to {stream}; "
                    "send one of them to a file",
                    path=name,
                )
            streams[stream] = what
            continue
        real = os.path.realpath(name)
        if real in files:
            raise OutputFileError(
                f"given for both {files[real]} and {what}; the second would replace the first",
                path=name,
            )
        if real in read:
            raise OutputFileError(
                f"{what} would replace the input file {read[real]}; write it somewhere else",
                path=name,
            )
        files[real] = what
        _check_writable(Path(name), what)
