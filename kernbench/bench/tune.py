"""``kernbench tune``: measure every candidate algorithm in simulation over a size sweep.

For each op and each catalogue configuration that can run it on the group
(:func:`kernbench.ccl.tuner.candidates`: the world size, and where the PEs
sit for the algorithms that care), one timing-only run calls the op twice per
size (the first call installs the IPCQ plan) and keeps the second call's time
from launch to end.
The table records, per size, every candidate's time and the winner, and what
it was measured on (the topology's name and digest, the world size); run with
``--set ccl.tune_table=TABLE.yaml`` and ``algorithm="auto"`` (or
``ccl.<op>=auto``) to use it on that machine.  Its format is
:class:`kernbench.ccl.tune_table.TuneTable`; what :func:`tune` returns is
validated against it, so every table written can be read back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from kernbench.bench.simulate import simulate
from kernbench.ccl.settings import CclSettings, split_overrides, use_settings
from kernbench.ccl.tune_table import TuneTable, config_settings
from kernbench.ccl.tuner import candidates, predict
from kernbench.distributed.world import check_world_size
from kernbench.errors import DistributedError, OutOfMemoryError, RankError
from kernbench.files import write_text
from kernbench.runtime import RuntimeContext
from kernbench.topology import load_topology, topology_digest
from kernbench.units import format_size

__all__ = ["tune"]


def _calls(op: str, config: str, sizes: Sequence[int], reached: list[int]) -> Callable[[], None]:
    """The ranks' body: ``op`` by ``config`` twice at every size; the size being measured
    is kept in ``reached``."""

    def body() -> None:
        import kernbench.torch as torch
        import kernbench.torch.distributed as dist

        dist.init_process_group()
        p = dist.get_world_size()
        for nbytes in sizes:
            reached[:] = [nbytes]
            n = max(p, nbytes // 4 // p * p)
            for _ in range(2):
                if op == "all_reduce":
                    dist.all_reduce(torch.empty(n), algorithm=config)
                elif op == "all_gather":
                    dist.all_gather_into_tensor(
                        torch.empty(n), torch.empty(n // p), algorithm=config
                    )
                elif op == "reduce_scatter":
                    dist.reduce_scatter_tensor(
                        torch.empty(n // p), torch.empty(n), algorithm=config
                    )
                else:
                    dist.broadcast(torch.empty(n), src=0, algorithm=config)

    return body


def tune(
    topology: str | Path,
    *,
    ops: Sequence[str] = ("all_reduce",),
    sizes: Sequence[int],
    world_size: int | None = None,
    overrides: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The tune table (a dict ready to dump as YAML)."""
    topology_overrides, ccl_overrides = split_overrides(overrides)
    topo = load_topology(topology, topology_overrides)
    probe = RuntimeContext(topo, timing_only=True)
    # The candidates are the catalogue as the measured runs see it (with --set ccl.*).
    use_settings(probe, CclSettings.from_overrides(ccl_overrides))
    size = probe.num_devices if world_size is None else check_world_size(world_size, probe)
    pes = [probe.device_pe(rank) for rank in range(size)]
    results = []
    measured: dict[str, Any] = {}
    for op in ops:
        times: dict[str, list[int]] = {}
        predicted: dict[str, list[float | None]] = {}
        fitting = candidates(probe, op, pes)
        if not fitting:
            raise DistributedError(
                f"tune: no configuration in the catalogue can run {op} on {size} ranks"
            )
        for name, config in fitting:
            measured[name] = config_settings(config)
            if progress:
                progress(f"{op}: {name}")
            reached: list[int] = []
            try:
                run = simulate(
                    _calls(op, name, sizes, reached),
                    topology=topo,
                    world_size=size,
                    timing_only=True,
                    overrides=[o for o in overrides if o.startswith("ccl.")],
                )
            except RankError as exc:
                if not isinstance(exc.original, OutOfMemoryError) or not reached:
                    raise
                raise OutOfMemoryError(
                    f"tune: {op} by {name} on messages of {format_size(reached[0])} does not "
                    f"fit in device memory ({exc.original}); give a --max-size below "
                    f"{format_size(reached[0])}"
                ) from exc
            records = [c for c in run.report["collectives"] if c["op"] == op][1::2]
            times[name] = [c["end_ps"] - c["launch_ps"] for c in records]
            predicted[name] = [predict(probe, op, name, config, pes, s) for s in sizes]
        for i, nbytes in enumerate(sizes):
            row = {name: t[i] for name, t in times.items()}
            order = list(times)  # catalogue order breaks ties: simpler configurations first
            winner = min(row, key=lambda n: (row[n], order.index(n)))
            results.append(
                {
                    "op": op,
                    "world_size": size,
                    "bytes": int(nbytes),
                    "winner": winner,
                    "times_ps": row,
                    "predicted_ps": {
                        n: round(p[i] * 1e12) for n, p in predicted.items() if p[i] is not None
                    },
                }
            )
    table = {
        "topology": topo.name,
        "topology_digest": topology_digest(topo),
        "world_size": size,
        "overrides": list(overrides),
        "configs": measured,
        "results": results,
    }
    TuneTable.model_validate(table)  # what is written must read back
    return table


def write_table(table: dict[str, Any], path: str | Path) -> None:
    """The table as YAML, written with :func:`kernbench.files.write_text`."""
    write_text(path, yaml.safe_dump(table, sort_keys=False), what="tune table")
