"""User-facing error types.

Every error a user can cause (bad YAML, a bad unit, a placement that does not
divide, out of memory, an out-of-bounds kernel access, mismatched collectives)
is a :class:`KernBenchError` subclass.  Its message names the offending key,
tensor or rank and says what would be valid.  The CLI prints the message
without a traceback and exits with status 2.
"""

from __future__ import annotations

import difflib
import os
import pickle
import sys
import types
from collections.abc import Iterable, Mapping

__all__ = [
    "shown",
    "exception_text",
    "user_stacklevel",
    "KernBenchError",
    "ConfigError",
    "UnitError",
    "TopologyError",
    "RouteError",
    "PlacementError",
    "OutOfMemoryError",
    "AllocationError",
    "MemoryFaultError",
    "TensorError",
    "CheckpointError",
    "DataError",
    "OptimizerValueError",
    "OptimizerStateError",
    "TensorAttributeError",
    "TensorTypeError",
    "TensorValueError",
    "TensorNotImplementedError",
    "TensorRuntimeError",
    "TensorIndexError",
    "TensorZeroDivisionError",
    "ModuleAttributeError",
    "UnsupportedNameError",
    "UnsupportedModuleError",
    "unsupported_name",
    "KernelError",
    "SimulationError",
    "DeadlockError",
    "ForeignThreadError",
    "RankError",
    "DistributedError",
    "ProcessTargetError",
    "DistributedValueError",
    "CollectiveMismatchError",
    "SimulationLimitError",
    "InputFileError",
    "OutputFileError",
    "ScriptError",
    "ResultRowError",
    "WeightsOnlyLoadError",
]


class KernBenchError(Exception):
    """Base class of every error a user of KernBench can cause."""


def shown(text: str, limit: int = 200) -> str:
    """``text`` as an error message may echo it: control characters escaped, length capped."""
    if not text.isprintable():
        text = repr(text)[1:-1]
    if len(text) > limit:
        text = f"{text[: limit - 20]}... ({len(text)} characters)"
    return text


def exception_text(value: object) -> str:
    """``str(value)`` of an exception (or exit code) that user code made, never raising:
    a ``__str__`` that raises or returns something other than text gives what Python's
    own traceback printer shows then."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - the user's __str__ may raise anything
        return "<exception str() failed>"


class ConfigError(KernBenchError):
    """A configuration file or override is invalid.

    ``key_path`` is the dotted path of the offending key (``""`` when the whole
    document is at fault); ``source`` names the file or override it came from.
    """

    def __init__(self, message: str, *, key_path: str = "", source: str = "") -> None:
        self.key_path = key_path
        self.source = source
        where = f"{shown(source)}: " if source else ""
        at = f"{key_path}: " if key_path else ""
        super().__init__(f"{where}{at}{message}")


class UnitError(ConfigError):
    """A quantity is missing its unit, has an unknown unit, or is out of range."""


class TopologyError(ConfigError):
    """A topology is well-formed YAML but describes an impossible machine."""


class InputFileError(ConfigError):
    """A file handed in cannot be read: missing, not a regular file, too large, not UTF-8."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(message, source=path)


class OutputFileError(KernBenchError):
    """An output cannot be written where asked: a special file, a bad path, an I/O error."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{shown(path)}: {message}" if path else message)


class ScriptError(KernBenchError):
    """A bench script cannot be loaded: a syntax error, or an error raised while importing it.

    ``path`` is the script; ``original`` is the exception its import raised
    (``None`` for a syntax error, whose file, line, column and message are in
    the text).
    """

    def __init__(self, message: str, *, path: str, original: BaseException | None = None) -> None:
        self.path = path
        self.original = original
        super().__init__(message)


class ResultRowError(KernBenchError):
    """A result row a bench returns holds a value its report or CSV cannot hold."""


class RouteError(KernBenchError):
    """No route exists between two named endpoints, or a name is unknown."""


class PlacementError(KernBenchError):
    """A DP placement does not fit the tensor shape or the machine."""


class OutOfMemoryError(KernBenchError):
    """An allocation does not fit in the memory it must live in."""


class AllocationError(KernBenchError):
    """Misuse of an allocator: double free, freeing an unknown address."""


class MemoryFaultError(KernBenchError):
    """An access to an unmapped virtual address or outside an allocation."""


class TensorError(KernBenchError):
    """Misuse of a tensor: use after free, wrong dtype, shape mismatch."""


class CheckpointError(KernBenchError):
    """A checkpoint ``torch.save`` cannot write or ``torch.load`` cannot read: an object
    of a kind it does not keep, a file it did not write, one without values."""


class WeightsOnlyLoadError(CheckpointError, pickle.UnpicklingError):
    """``torch.load`` with ``weights_only=True`` met an object of a class or function not
    allowlisted (torch raises ``pickle.UnpicklingError`` there, which this is too)."""


class DataError(KernBenchError, ValueError):
    """A dataset, sampler or data loader given what ``torch.utils.data`` refuses (torch
    raises ``ValueError`` for these too)."""


class OptimizerValueError(KernBenchError, ValueError):
    """An optimizer or lr scheduler given a hyper-parameter torch refuses (torch raises
    ``ValueError`` with the same message)."""


class OptimizerStateError(KernBenchError, RuntimeError):
    """An lr scheduler whose optimizer changed under it in a way torch refuses, or an
    optimizer step torch refuses (LBFGS with an unknown ``line_search_fn``); torch raises
    ``RuntimeError``."""


class TensorAttributeError(TensorError, AttributeError):
    """A tensor attribute or method that does not exist or is not supported (``hasattr`` works)."""


class TensorIndexError(TensorError, IndexError):
    """An index outside a tensor's dims or sizes, or of a kind that cannot index (as torch's
    ``IndexError``)."""


class TensorTypeError(TensorError, TypeError):
    """A tensor used where Python needs another type (``len()`` of a 0-d tensor, ...)."""


class TensorValueError(TensorError, ValueError):
    """A tensor or module argument torch refuses with ``ValueError`` (a recurrent layer
    given a 4-D input or a ``dropout`` outside [0, 1], ...)."""


class TensorRuntimeError(TensorError, RuntimeError):
    """A tensor operation torch refuses with ``RuntimeError`` (``numpy()`` of a tensor
    that requires grad, ...)."""


class TensorNotImplementedError(TensorError, NotImplementedError):
    """A combination of arguments torch refuses with ``NotImplementedError``
    (``embedding_bag``'s ``per_sample_weights`` outside ``mode='sum'``, ...)."""


class TensorZeroDivisionError(TensorError, ZeroDivisionError):
    """Integer division of tensors by zero (torch's "ZeroDivisionError")."""


class ModuleAttributeError(KernBenchError, AttributeError):
    """An attribute a ``torch.nn.Module`` does not have (``hasattr`` works), as torch's."""


class UnsupportedNameError(KernBenchError, AttributeError):
    """A name PyTorch or Triton has that KernBench's module does not (``hasattr`` works)."""


class UnsupportedModuleError(KernBenchError, ModuleNotFoundError):
    """``import torch.optim``-style imports of a facade module KernBench does not have.

    Also a ``ModuleNotFoundError``, so code that probes with ``except ImportError``
    keeps working; ``name`` is left unset so that ``from torch import optim`` shows
    this message rather than Python's plain "cannot import name".
    """


def unsupported_name(
    module: str, shown_as: str, name: str, known: Iterable[str], hints: Mapping[str, str]
) -> AttributeError:
    """The error for ``<module>.<name>`` that does not exist: the call and what to use instead.

    ``shown_as`` is the module as users write it (``torch``, ``tl``); ``hints``
    says what to use for the names people reach for; others get the closest
    names the module has.  Dunder names (looked up by tools) get a plain
    AttributeError.
    """
    message = f"module {module!r} has no attribute {name!r}"
    if name.startswith("__") and name.endswith("__"):
        return AttributeError(message)
    hint = hints.get(name)
    if hint is None:
        public = sorted(k for k in known if not k.startswith("_"))
        close = difflib.get_close_matches(name, public, n=3, cutoff=0.75)
        hint = f"nearest: {', '.join(close)}" if close else "the README lists what there is"
    return UnsupportedNameError(f"{message}: {shown_as}.{name} is not in KernBench; {hint}")


class KernelError(KernBenchError):
    """A kernel is malformed or misbehaves (bad grid, out-of-bounds access)."""


class SimulationError(KernBenchError):
    """The simulation cannot proceed (a wait that can never complete)."""


class ForeignThreadError(SimulationError):
    """Simulated work was asked for from a thread other than the one the run runs on."""


class DeadlockError(SimulationError):
    """Ranks wait for something that can never happen; ``blocked`` maps rank -> what."""

    def __init__(self, message: str, blocked: dict[int, str]) -> None:
        super().__init__(message)
        self.blocked = dict(blocked)


class RankError(KernBenchError):
    """A rank's code raised; the original exception is the ``__cause__``."""

    def __init__(self, rank: int, cause: BaseException) -> None:
        self.rank = rank
        self.original = cause
        self.first = False  # raised before the run did anything (no other rank started)
        super().__init__(f"rank {rank} raised {type(cause).__name__}: {exception_text(cause)}")


class DistributedError(KernBenchError):
    """Misuse of the distributed API (not initialised, bad group, bad rank)."""


class ProcessTargetError(DistributedError, TypeError):
    """``mp.Process`` / ``mp.spawn`` given a target that is not callable, arguments that
    are not a tuple, or arguments the target cannot take."""


class DistributedValueError(DistributedError, ValueError):
    """A ``torch.distributed`` API given a value torch refuses with ``ValueError`` (an empty
    or mixed-dtype parameter list for ``ZeroRedundancyOptimizer``)."""


class CollectiveMismatchError(DeadlockError, DistributedError):
    """Ranks of one group called different collectives at the same point.

    It is a :class:`DeadlockError` too: such ranks would wait for each other
    forever; ``blocked`` maps each rank to what it called.
    """


class SimulationLimitError(SimulationError):
    """A run reached its --max-sim-time or passed its --max-wall-time and was stopped.

    ``report`` (set by the harness) is the partial report of what had happened.
    """

    def __init__(self, message: str, blocked: dict[int, str]) -> None:
        super().__init__(message)
        self.blocked = dict(blocked)
        self.report: dict | None = None


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame(depth: int = 1) -> tuple[types.FrameType | None, int]:
    """The first frame outside the kernbench package (the user's line), searched from the
    frame that called the caller (``depth`` 1; 2 starts one further up), and how many
    frames up from that starting frame it is (1: the starting frame itself)."""
    frame = sys._getframe(depth + 1)  # noqa: SLF001 - the frames above the caller
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return frame, level


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` in the calling function that shows the
    warning at the first frame outside the kernbench package (the user's line), however
    many of kernbench's own frames (autograd's wrappers included) lie between."""
    return user_frame()[1]
