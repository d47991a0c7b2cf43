"""``RuntimeContext.install_ipcq``: install a collective configuration's neighbour tables.

The runtime API installs the IPCQ neighbour tables of a catalogue
configuration ahead of any collective (``ctx.install_ipcq(algorithm=...)``)
and gets the plan back: which PE each rank runs on and whom it talks to.
Collectives install the tables they need themselves, once per
(configuration, op, PEs) (:mod:`kernbench.ccl.launch`); an explicit install
records its tables under the same keys, so a collective that follows finds
them in place and installs nothing, and installing a plan twice sends
nothing the second time.  A different plan (another configuration, world
size or placement) installs its own tables beside the first, as collectives
with different configurations do.

The runtime knows nothing of collectives, so this module registers itself
with :func:`kernbench.runtime.ipcq_install.set_ipcq_installer` on import.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kernbench.ccl.algorithms import get_algorithm
from kernbench.ccl.catalogue import load_catalogue
from kernbench.ccl.launch import INSTALL_ENTRY_BYTES
from kernbench.ccl.settings import ccl_settings
from kernbench.ccl.tuner import unfit
from kernbench.errors import DistributedError
from kernbench.machine import IpcqInstall
from kernbench.runtime import RuntimeContext
from kernbench.runtime.ipcq_install import set_ipcq_installer
from kernbench.topology import names

__all__ = ["install_plan"]

WHAT = "install_ipcq"


def _count(value: Any, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise DistributedError(
            f"{WHAT}: {arg} must be a whole number of ranks >= 1 (got {value!r})"
        )
    return int(value)


def _entries(rank_to_pe: Any) -> list[Any]:
    """The entries of ``rank_to_pe`` in rank order: a sequence, or a mapping rank -> entry
    whose ranks are 0..n-1 (as the plan this call returns holds them)."""
    if isinstance(rank_to_pe, Mapping):
        ranks = list(rank_to_pe)
        if any(isinstance(r, bool) or not isinstance(r, int) for r in ranks) or sorted(
            ranks
        ) != list(range(len(ranks))):
            raise DistributedError(
                f"{WHAT}: rank_to_pe maps {ranks!r}; as a mapping it must map every rank "
                f"0..{len(ranks) - 1} to its (sip, cube, pe)"
            )
        return [rank_to_pe[rank] for rank in range(len(ranks))]
    if isinstance(rank_to_pe, str | bytes) or not isinstance(rank_to_pe, Iterable):
        raise DistributedError(
            f"{WHAT}: rank_to_pe must list each rank's (sip, cube, pe) (got {rank_to_pe!r})"
        )
    return list(rank_to_pe)


def _triple(rank: int, entry: Any) -> tuple[int, int, int]:
    """``entry`` as a (sip, cube, pe) of whole numbers; anything else names the rank (a
    float or a text entry such as "012" is not read as one)."""
    if isinstance(entry, Iterable) and not isinstance(entry, str | bytes):
        values = tuple(entry)
        if len(values) == 3 and not any(isinstance(v, bool) for v in values):
            try:
                sip, cube, pe = (operator.index(v) for v in values)
                return sip, cube, pe
            except TypeError:
                pass
    raise DistributedError(
        f"{WHAT}: rank_to_pe[{rank}] must be a (sip, cube, pe) triple of whole numbers "
        f"(got {entry!r})"
    )


def _placement(
    ctx: RuntimeContext, world_size: int, rank_to_pe: Sequence[Any] | None, source: str
) -> list[tuple[int, int, int]]:
    """Each rank's (sip, cube, pe): as given (checked) or each device's first PE.

    ``source`` says where ``world_size`` came from, for errors.
    """
    topo = ctx.topology
    if rank_to_pe is None:
        if world_size > ctx.num_devices:
            raise DistributedError(
                f"{WHAT}: {source} asks for {world_size} ranks but the machine has "
                f"{ctx.num_devices} devices at level {topo.system.device_level!r} (valid: "
                f"1..{ctx.num_devices}); pass rank_to_pe to place the ranks on PEs"
            )
        return [
            tuple(c or 0 for c in ctx.device_coords(rank))  # type: ignore[misc]
            for rank in range(world_size)
        ]
    coords = []
    bounds = (topo.num_sips, topo.cubes_per_sip, topo.pes_per_cube)
    for rank, entry in enumerate(rank_to_pe):
        sip, cube, pe = _triple(rank, entry)
        if not all(0 <= v < n for v, n in zip((sip, cube, pe), bounds, strict=True)):
            raise DistributedError(
                f"{WHAT}: rank_to_pe[{rank}]={(sip, cube, pe)} is not a PE of this machine "
                f"(sip 0..{bounds[0] - 1}, cube 0..{bounds[1] - 1}, pe 0..{bounds[2] - 1})"
            )
        coords.append((sip, cube, pe))
    if len(set(coords)) != len(coords):
        raise DistributedError(f"{WHAT}: rank_to_pe places two ranks on one PE: {coords}")
    if len(coords) != world_size:
        raise DistributedError(
            f"{WHAT}: rank_to_pe has {len(coords)} entries but the plan has {world_size} ranks"
        )
    return coords


def install_plan(
    ctx: RuntimeContext,
    *,
    algorithm: str | None = None,
    ccl_yaml: str | Path | None = None,
    world_size_override: int | None = None,
    rank_to_pe: Sequence[tuple[int, int, int]] | None = None,
) -> dict[str, Any]:
    """Install (once) and return the plan of ``algorithm``; see ``RuntimeContext.install_ipcq``."""
    entries = None if rank_to_pe is None else _entries(rank_to_pe)
    settings = ccl_settings(ctx)
    catalogue = settings.catalogue if ccl_yaml is None else load_catalogue(ccl_yaml)
    choice = algorithm if algorithm is not None else settings.choice("all_reduce")
    if not isinstance(choice, str) or choice == "auto":
        raise DistributedError(
            f"{WHAT}: algorithm={choice!r} does not name one configuration (auto depends on "
            f"the message size); name one of: {', '.join(sorted(catalogue.configs))}"
        )
    name, config = catalogue.resolve(choice)
    if ccl_yaml is not None and settings.catalogue.configs.get(name) != config:
        name = f"{name}@{ccl_yaml}"  # not the run's configuration of that name
    if world_size_override is not None:
        world_size = _count(world_size_override, "world_size_override")
        source = f"world_size_override={world_size}"
    elif config.world_size is not None:
        world_size, source = config.world_size, f"configuration {name!r}"
    elif entries is not None:
        world_size, source = _count(len(entries), "len(rank_to_pe)"), "rank_to_pe"
    else:
        world_size, source = ctx.num_devices, "one rank per device"
    coords = _placement(ctx, world_size, entries, source)
    pes = tuple(names.pe(*c) for c in coords)
    algo = get_algorithm(config.module)
    reasons = {op: unfit(config, op, pes) for op in algo.ops}
    ops = [op for op, reason in reasons.items() if reason is None]
    if not ops:
        raise DistributedError(
            f"{WHAT}: configuration {name!r} cannot run on these {world_size} ranks: "
            f"{next(iter(reasons.values()))}"
        )
    neighbours = {
        rank: sorted(set().union(*(algo.neighbours(op, world_size, rank) for op in ops)))
        for rank in range(world_size)
    }
    pe_table = {pes[r]: tuple(sorted(pes[p] for p in peers)) for r, peers in neighbours.items()}
    missing = [op for op in ops if (name, op, pes) not in settings.plans]
    handles = []
    if missing:
        for pe in pes:
            entries = pe_table[pe]
            handles.append(
                ctx.submit(
                    IpcqInstall(
                        src=names.HOST,
                        dst=names.m_cpu_of(pe),
                        targets=(pe,),
                        entries=entries,
                        nbytes=INSTALL_ENTRY_BYTES * max(1, len(entries)),
                        tag=f"{name} plan",
                    )
                )
            )
        for op in ops:  # recorded first: a collective posted meanwhile installs nothing
            settings.plans[(name, op, pes)] = {
                pes[r]: tuple(sorted(pes[p] for p in algo.neighbours(op, world_size, r)))
                for r in range(world_size)
            }
        ctx.wait_all(handles)
    return {
        "algorithm": name,
        "module": config.module,
        "world_size": world_size,
        "ops": tuple(ops),
        "rank_to_pe": dict(enumerate(coords)),
        "neighbors": {rank: tuple(peers) for rank, peers in neighbours.items()},
        "pe_neighbors": pe_table,
        "installed": bool(missing),
    }


set_ipcq_installer(install_plan)
