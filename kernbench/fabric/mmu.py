"""The MMUs: page tables on every PE, installed by their cube's M_CPU.

The host sends an :class:`MmuMap` (or :class:`MmuUnmap`) to a cube's M_CPU,
which takes its command latency, then sends the entries to every target PE,
each installing its pages at ``map_latency_per_page`` apiece (ADR 0007).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from functools import partial

import simpy

from kernbench.errors import KernBenchError
from kernbench.machine import MmuMap, MmuUnmap
from kernbench.memory.mmu import PageTable
from kernbench.topology import names
from kernbench.topology.schema import MmuAttrs

__all__ = ["Mmus"]


class Mmus:
    """Every PE's page table (made on first use); serves MMU map and unmap commands."""

    def __init__(
        self,
        env: simpy.Environment,
        transfer: Callable[..., simpy.Event],
        send: Callable[[str, str, int, Callable[[], None], int], None],
        attrs: MmuAttrs,
        command_latency_ps: int,
    ) -> None:
        self.env = env
        self.transfer = transfer  # (src, dst, nbytes, after=ps), as Fabric.transfer
        self.send = send  # (src, dst, nbytes, done, after): done() ``after`` ps past arrival
        self.attrs = attrs
        self.command_latency_ps = command_latency_ps
        self._tables: dict[str, PageTable] = {}

    def page_table(self, pe: str) -> PageTable:
        table = self._tables.get(pe)
        if table is None:
            name = names.part_of(pe, "mmu")
            table = self._tables[pe] = PageTable(self.attrs.page_size, name=name)
        return table

    def serve(self, msg: MmuMap | MmuUnmap) -> Generator:
        # The command reaches the M_CPU, which takes its latency.
        yield self.transfer(msg.src, msg.dst, msg.nbytes, after=self.command_latency_ps)
        if not msg.targets:
            return
        page_size = self.attrs.page_size
        pages = sum(-(-entry[-1] // page_size) for entry in msg.entries)
        install_ps = pages * self.attrs.map_latency_per_page
        # Each target receives the entries, then installs them: one timer per target at
        # the end of both (a map is tens of installs, made for every tensor a run creates).
        installed = self.env.event()
        pending = [len(msg.targets)]
        for pe in msg.targets:
            done = partial(self._install, msg, pe, installed, pending)
            self.send(msg.dst, pe, msg.nbytes, done, install_ps)
        yield installed

    def _install(
        self, msg: MmuMap | MmuUnmap, target: str, installed: simpy.Event, pending: list[int]
    ) -> None:
        """Apply the entries on ``target``; the last target done completes the command.

        A fault fails the command at once (the first one; the other targets go on
        installing, as each PE's MMU does on its own)."""
        table = self.page_table(target)
        try:
            if isinstance(msg, MmuMap):
                for va, pa, nbytes in msg.entries:
                    table.map(va, pa, nbytes)
            else:
                for va, nbytes in msg.entries:
                    table.unmap(va, nbytes)
        except KernBenchError as fault:
            if not installed.triggered:
                installed.fail(fault)
            return
        pending[0] -= 1
        if not pending[0] and not installed.triggered:
            installed.succeed()
