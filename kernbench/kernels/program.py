"""The program that is running: what ``tl`` calls need to know about it.

The interpreter makes a :class:`ProgramState` current for the length of one
program (:func:`running_program`); ``tl`` calls read it to find their
program id, to report their work to its recorder and to name the program in
their error messages (:func:`where_am_i`).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ProgramState",
    "current_program",
    "record_vector",
    "running_program",
    "where_am_i",
]


@dataclass(frozen=True, slots=True)
class ProgramState:
    """What ``tl`` calls need to know about the program that is running."""

    kernel: str
    pid: tuple[int, int, int]  # padded to three axes, as tl.program_id sees it
    num_programs: tuple[int, int, int]
    recorder: Any
    program: tuple[int, ...] = ()  # the program id as launched, for messages
    # The machine's addresses as this program sees them (``pointer(addresses, element_ty)``:
    # a loaded address cast to a pointer); None on the host, where there are none.
    address_space: Any = None


_CURRENT: contextvars.ContextVar[ProgramState | None] = contextvars.ContextVar(
    "kernbench_kernel_program", default=None
)


@contextmanager
def running_program(state: ProgramState):
    """Make ``state`` the running program for the ``tl`` calls in the block."""
    token = _CURRENT.set(state)
    try:
        yield state
    finally:
        _CURRENT.reset(token)


def current_program() -> ProgramState | None:
    return _CURRENT.get()


def where_am_i() -> str:
    """The running kernel and program, to begin an error message with."""
    state = _CURRENT.get()
    if state is None:
        return "outside a kernel"
    return f"kernel {state.kernel!r} program {state.program or state.pid}"


def record_vector(elements: int, floating: bool, transcendental: bool = False) -> None:
    """Report ``elements`` vector-engine ops (integer ops when not ``floating``)."""
    state = _CURRENT.get()
    if state is not None:
        state.recorder.record_vector(elements, floating=floating, transcendental=transcendental)
