"""What a sweep point's child process runs: never outlive the parent, run one item, report.

The parent (:mod:`kernbench.bench.executors`) starts ``python -c`` with code
that loads this file *by path*, not as ``kernbench.bench.point_child``, so
that the guard below runs before the (slow to import) ``kernbench.bench``
package: a child whose parent dies while it starts up must not live on.  So
only the standard library is imported at the top.

The guard: SIGINT is ignored (Ctrl-C in a terminal reaches the whole process
group; the parent decides what to stop); on Linux the kernel is asked for
SIGKILL when the parent dies (``PR_SET_PDEATHSIG``); the parent must still be
the one named on the command line; and a thread watches stdin, a pipe whose
only writer is the parent, and ends the process at its end-of-file — which
is what stops a child where ``prctl`` does not exist.

Then the item (one JSON line on stdin) is given to the target function
(``module:function``) and its JSON result written to the result pipe.  The
process always ends with ``os._exit``: a thread the bench left running must
not keep it alive, and the exit status is the bench's own when it exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import importlib
import json
import os
import signal
import sys
import threading
import traceback
from typing import Any

__all__ = ["main"]

_PR_SET_PDEATHSIG = 1
_READ_BYTES = 1 << 16


def main() -> None:
    """``python -c <loader> THIS_FILE TARGET RESULT_FD PARENT_PID``, the item on stdin."""
    target, result_fd, parent_pid = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    line = _read_line(0)
    watch = os.dup(0)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the bench gets an empty stdin
    os.close(devnull)
    threading.Thread(target=_exit_when_closed, args=(watch,), daemon=True).start()
    faulthandler.enable()  # a segfault leaves a Python traceback in the stderr tail
    status = 0
    try:
        module_name, _, function_name = target.partition(":")
        function = getattr(importlib.import_module(module_name), function_name)
        data = json.dumps(function(json.loads(line))).encode()
        with os.fdopen(result_fd, "wb") as result:
            result.write(data)
    except SystemExit as exc:
        status = _exit_status(exc.code)
    except BaseException:
        traceback.print_exc()
        status = 1
    _flush()
    os._exit(status)


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # The parent may have died before the request took effect.
    if os.getppid() != parent_pid:
        os._exit(1)


def _read_line(fd: int) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = os.read(fd, _READ_BYTES)
        if not chunk:
            os._exit(1)  # the parent went away before sending the item
        data += chunk
    return bytes(data)


def _exit_when_closed(fd: int) -> None:
    while os.read(fd, _READ_BYTES):
        pass
    os._exit(1)


def _exit_status(code: Any) -> int:
    """The status ``sys.exit(code)`` gives (``None``: 0, an int: itself, else printed and 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
