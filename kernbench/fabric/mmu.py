"""The MMUs: page tables on every PE, installed by their cube's M_CPU.

The host sends an :class:`MmuMap` (or :class:`MmuUnmap`) to a cube's M_CPU,
which takes its command latency, then sends the entries to every target PE,
each installing its pages at ``map_latency_per_page`` apiece (ADR 0007).
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import simpy

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
        transfer: Callable[[str, str, int], simpy.Event],
        attrs: MmuAttrs,
        command_latency_ps: int,
    ) -> None:
        self.env = env
        self.transfer = transfer
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
        yield self.transfer(msg.src, msg.dst, msg.nbytes)
        yield self.env.timeout(self.command_latency_ps)
        page_size = self.attrs.page_size
        pages = sum(-(-entry[-1] // page_size) for entry in msg.entries)
        install_ps = pages * self.attrs.map_latency_per_page
        installs = [self.env.process(self._install(msg, pe, install_ps)) for pe in msg.targets]
        yield self.env.all_of(installs)
        for process in installs:  # surface a fault from any target
            if not process.ok:
                raise process.value

    def _install(self, msg: MmuMap | MmuUnmap, target: str, install_ps: int) -> Generator:
        yield self.transfer(msg.dst, target, msg.nbytes)
        yield self.env.timeout(install_ps)
        table = self.page_table(target)
        if isinstance(msg, MmuMap):
            for va, pa, nbytes in msg.entries:
                table.map(va, pa, nbytes)
        else:
            for va, nbytes in msg.entries:
                table.unmap(va, nbytes)
