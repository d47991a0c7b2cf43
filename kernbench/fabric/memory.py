"""Memory access: plain transfers, writes into and reads out of the memories.

A :class:`Transfer` or :class:`MemoryWrite` is one flow from its source to
its destination (the hot path: finished by a callback, no process); a write
lands its bytes in the memory store when the last byte arrives.  A
:class:`MemoryRead` sends its request to the memory (latency only), reads the
store, and brings the bytes back.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

import simpy

from kernbench.errors import KernBenchError
from kernbench.machine import MemoryRead, MemoryWrite, Transfer

if TYPE_CHECKING:
    from kernbench.fabric.engine import Handle

__all__ = ["MemoryAccess"]

Transferring = Callable[[str, str, int], simpy.Event]


class MemoryAccess:
    """Serves :class:`Transfer`, :class:`MemoryWrite` and :class:`MemoryRead`."""

    def __init__(
        self,
        transfer: Transferring,
        complete: Callable[[Handle, Any], None],
        fail: Callable[[Handle, BaseException], None],
    ) -> None:
        self.transfer = transfer
        self.complete = complete
        self.fail = fail
        self.store: Any = None  # the memory store (functional mode) or a null store

    def start_transfer(self, handle: Handle) -> None:
        """Transfers and writes: one flow, finished by a callback."""
        msg = handle.msg
        delivered = self.transfer(msg.src, msg.dst, msg.nbytes)
        delivered.callbacks.append(lambda _ev: self._delivered(handle))

    def _delivered(self, handle: Handle) -> None:
        msg = handle.msg
        try:
            if type(msg) is MemoryWrite:
                self._store_write(msg)
        except KernBenchError as exc:
            self.fail(handle, exc)
            return
        self.complete(handle, None)

    def _store_write(self, msg: MemoryWrite) -> None:
        if msg.data is not None and self.store is not None and self.store.stores_bytes:
            self.store.write(msg.addr, msg.data, keep=msg.handed_over)

    def serve_read(self, msg: MemoryRead) -> Generator:
        yield self.transfer(msg.src, msg.dst, 0)
        data = None
        if self.store is not None and self.store.stores_bytes and msg.addr is not None:
            data = self.store.read(msg.addr, msg.nbytes)
        yield self.transfer(msg.dst, msg.src, msg.nbytes)
        return data

    def messages(self) -> tuple[type, ...]:
        return (Transfer, MemoryWrite)
