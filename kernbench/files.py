"""Reading the files a user hands in and writing the files a user asks for, safely.

Reads (:func:`read_text`, :func:`read_bytes`) accept only regular files (a
symlink to one is fine), refuse anything larger than a stated limit before
reading it, and decode text as UTF-8 only: a FIFO, a device, a directory, a
binary or a UTF-16 file is a one-line :class:`~kernbench.errors.InputFileError`
naming the file, never a hang or a traceback.

Writes (:func:`write_text`, :func:`write_bytes`) go to a temporary file beside
the target, which is then renamed over it: a reader never sees half a file.
The rename replaces only a regular file (or nothing): a symlink, FIFO, device,
socket or directory at the target is refused with an
:class:`~kernbench.errors.OutputFileError`.  ``-`` and the standard-stream
device names (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/1``...) write
straight through to that stream.  Every OS failure (disk full, read-only
directory, a parent that is a file, a NUL in the path) is an
``OutputFileError`` too, and the temporary file is removed.  The rules and
their limits are ADR 0012.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from kernbench.errors import InputFileError, OutputFileError

__all__ = [
    "CONFIG_LIMIT",
    "RESULTS_LIMIT",
    "SCRIPT_LIMIT",
    "read_bytes",
    "read_text",
    "write_bytes",
    "write_text",
    "is_stream_target",
    "regular_file_problem",
    "check_output_target",
]

#: Topologies, catalogues, sweep files, tune tables: hand-written, small.
CONFIG_LIMIT = 4 * 2**20
#: Reports, sweep summaries and CSV files read back by ``regress`` and ``plot``.
RESULTS_LIMIT = 256 * 2**20
#: Bench scripts.
SCRIPT_LIMIT = 4 * 2**20

_STREAMS = {
    "-": "stdout",
    "/dev/stdout": "stdout",
    "/dev/fd/1": "stdout",
    "/proc/self/fd/1": "stdout",
    "/dev/stderr": "stderr",
    "/dev/fd/2": "stderr",
    "/proc/self/fd/2": "stderr",
}


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _limit_text(limit: int) -> str:
    return f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit} bytes"


def _os_reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def read_bytes(path: str | Path, *, what: str = "file", limit: int = CONFIG_LIMIT) -> bytes:
    """The bytes of the regular file ``path``, which must hold at most ``limit`` bytes.

    Opening does not block on a FIFO (``O_NONBLOCK``) and nothing is read
    before the file is known to be regular and small enough.
    """
    name = str(path)
    if "\x00" in name:
        raise InputFileError(f"{what} path contains a NUL character", path=name)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputFileError(f"{what} not found", path=name) from None
    except IsADirectoryError:
        raise InputFileError(f"{what} is a directory, not a file", path=name) from None
    except OSError as exc:
        raise InputFileError(f"cannot read {what}: {_os_reason(exc)}", path=name) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(
                f"{what} is {_kind(info.st_mode)}; only regular files are read", path=name
            )
        if info.st_size > limit:
            raise InputFileError(
                f"{what} is {info.st_size} bytes, over the limit of {_limit_text(limit)}",
                path=name,
            )
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise InputFileError(
                    f"{what} grew past the limit of {_limit_text(limit)} while being read",
                    path=name,
                )
        return b"".join(chunks)
    except OSError as exc:
        raise InputFileError(f"cannot read {what}: {_os_reason(exc)}", path=name) from None
    finally:
        os.close(fd)


def read_text(path: str | Path, *, what: str = "file", limit: int = CONFIG_LIMIT) -> str:
    """The UTF-8 text of the regular file ``path`` (a UTF-8 byte-order mark is dropped).

    Binary content (a NUL byte), UTF-16/32 and any other encoding are refused
    with a message that says the file must be UTF-8 text.
    """
    data = read_bytes(path, what=what, limit=limit)
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputFileError(
            f"{what} is UTF-16 or UTF-32 encoded; save it as UTF-8 text", path=str(path)
        )
    nul = data.find(b"\x00")
    if nul >= 0:
        raise InputFileError(
            f"{what} holds binary data (a NUL byte at offset {nul}); expected UTF-8 text",
            path=str(path),
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(
            f"{what} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8",
            path=str(path),
        ) from None
    return text.removeprefix("\ufeff")


def regular_file_problem(path: str | Path) -> str | None:
    """Why ``path`` cannot be read as a regular file (``None`` when it can); never raises."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return "not found"
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return f"cannot be read ({reason})"
    if not stat.S_ISREG(info.st_mode):
        return f"is {_kind(info.st_mode)}, not a regular file"
    return None


def is_stream_target(path: str | Path) -> bool:
    """True for ``-`` and the names of the standard output and error streams."""
    return str(path) in _STREAMS


def check_output_target(path: str | Path, *, what: str = "output") -> None:
    """Refuse, before any work is done, a target that :func:`write_bytes` would refuse.

    A missing target is fine (its directory is made when written); a regular
    file is fine; a stream name is fine.  Everything else raises
    :class:`OutputFileError`.
    """
    name = str(path)
    if is_stream_target(name):
        return
    if not name:
        raise OutputFileError(
            f"{what} path is empty; name a file (or '-' for standard output)", path=name
        )
    if "\x00" in name:
        raise OutputFileError(f"{what} path contains a NUL character", path=name)
    try:
        info = os.lstat(name)
    except FileNotFoundError:
        _check_ancestors(Path(name), what)
        return
    except OSError as exc:
        raise OutputFileError(f"cannot write {what}: {_os_reason(exc)}", path=name) from None
    if not stat.S_ISREG(info.st_mode):
        raise OutputFileError(
            f"{what} target is {_kind(info.st_mode)}; KernBench writes only regular files "
            "(or '-' for standard output)",
            path=name,
        )


def _check_ancestors(path: Path, what: str) -> None:
    """The nearest existing ancestor of a missing target must be a directory."""
    for ancestor in path.parents:
        try:
            mode = os.stat(ancestor).st_mode
        except FileNotFoundError:
            continue
        except OSError as exc:
            reason = _os_reason(exc)
            raise OutputFileError(f"cannot write {what}: {reason}", path=str(path)) from None
        if not stat.S_ISDIR(mode):
            raise OutputFileError(
                f"cannot write {what}: {ancestor} is {_kind(mode)}, not a directory",
                path=str(path),
            )
        return


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: str | Path, data: bytes, *, what: str = "output") -> None:
    """Write ``data`` to ``path`` atomically, or through to a standard stream.

    The target's directory is made if missing.  See the module docstring for
    what is refused.
    """
    name = str(path)
    stream = _STREAMS.get(name)
    if stream is not None:
        target = sys.stdout if stream == "stdout" else sys.stderr
        try:
            target.flush()
            buffer = getattr(target, "buffer", None)
            if buffer is not None:
                buffer.write(data)
                buffer.flush()
            else:
                target.write(data.decode("utf-8", errors="replace"))
                target.flush()
        except OSError as exc:
            raise OutputFileError(f"cannot write {what}: {_os_reason(exc)}", path=name) from None
        return
    check_output_target(name, what=what)
    target_path = Path(name)
    tmp = None
    try:
        target_path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(
            prefix=f".{target_path.name}.", suffix=".tmp", dir=target_path.parent
        )
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes files private; results are not
        # The target may have changed since it was checked; check once more, as close
        # to the rename as Python allows (ADR 0012 names the remaining window).
        check_output_target(name, what=what)
        os.replace(tmp, name)
        tmp = None
    except OutputFileError:
        raise
    except OSError as exc:
        raise OutputFileError(f"cannot write {what}: {_os_reason(exc)}", path=name) from None
    except ValueError as exc:  # e.g. an embedded NUL that slipped past the checks
        raise OutputFileError(f"cannot write {what}: {exc}", path=name) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def write_text(path: str | Path, text: str, *, what: str = "output") -> None:
    """:func:`write_bytes` of ``text`` encoded as UTF-8.

    A lone surrogate (the way Python keeps a command-line argument's bytes
    that are not UTF-8, e.g. a bench argument a CSV row repeats) is written
    as its escape, ``\\udcff``, as JSON writes it, so the file stays UTF-8.
    """
    write_bytes(path, text.encode("utf-8", "backslashreplace"), what=what)


@contextlib.contextmanager
def exclusive_lock(path: str | Path, *, what: str) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (a regular file, made if missing, never through a
    symlink) while the block runs; one already held elsewhere is an OutputFileError.
    The lock goes with the process, so a killed holder leaves none behind."""
    name = str(path)
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise OutputFileError(f"cannot lock {what}: {_os_reason(exc)}", path=name) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OutputFileError(f"cannot lock {what}: not a regular file", path=name)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputFileError(
                f"{what} is in use by another run (its lock {name} is held); wait for it to "
                "finish, or write elsewhere",
                path=name,
            ) from None
        yield
    finally:
        os.close(fd)
