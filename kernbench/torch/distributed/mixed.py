"""Mixed TP x DP collectives with a per-size autotune, after FlashInfer's ``MixedCommHandler``.

Ranks form a two-level machine: ``local`` ranks share a SIP (a node),
``inter`` ranks are the SIPs.  Each level is split into a tensor-parallel (TP)
and a data-parallel (DP) part::

    world_rank = local_rank + inter_rank * local_size
    local_rank = local_tp_rank + local_dp_rank * local_tp_size
    inter_rank = inter_tp_rank + inter_dp_rank * inter_tp_size

so the TP group has ``local_tp_size * inter_tp_size`` ranks (TP rank
``local_tp_rank + inter_tp_rank * local_tp_size``) and the DP group
``local_dp_size * inter_dp_size`` ranks (DP rank ``local_dp_rank +
inter_dp_rank * local_dp_size``).  Both orders are increasing world-rank
order, so the ``torch.distributed`` groups (whose ranks are sorted) number
their members as TP / DP ranks.

Operations (``x`` is a single-lane :class:`kernbench.torch.Tensor` of at least
one dimension; results are new tensors; dimension 0 is the one split or
joined; the reduction is a sum):

* ``all_reduce`` over TP;
* ``all_gather`` over TP (``tp_size * x.shape[0]`` rows, block i from TP rank i);
* ``reduce_scatter`` over TP (``x.shape[0]`` divisible by ``tp_size``; TP rank
  j keeps block j);
* ``all_reduce_all_gather``: all-reduce ``x`` over TP, then all-gather the
  result over DP (``dp_size * x.shape[0]`` rows, block i from DP rank i);
* ``reduce_scatter_all_reduce``: reduce-scatter ``x`` over DP (DP rank j keeps
  block j of ``dp_size``), then all-reduce that block over TP.

Modes:

* ``"two_step"``: the op's collectives one after another through
  ``kernbench.torch.distributed`` (so each goes through its own rendezvous
  and :class:`~kernbench.ccl.launch.CollectiveLauncher` with the catalogue's
  default algorithm); a single-phase op is one collective.
* ``"fused"``: one rendezvous on the WORLD group launching one program per
  rank.  The program cuts the data into pieces (``min_num_steps``, fewer when
  a piece would drop below ``min_block_size`` elements, more when one would
  exceed ``max_block_size``) and pipelines them: piece k's first phase runs on
  its own sub-communicator, then piece k's second phase starts as a separate
  SimPy process on another sub-communicator, overlapping piece k+1's first
  phase.  Each phase is the registry's ``ring`` program, run with the
  catalogue's ``ring`` configuration.  For the single-phase ops the second
  phase is empty: the pieces run one after another in one launch.  The
  launch is checked like any collective (op, dtype, shape, pieces and layout
  must match on every rank) and appears in the run report's ``collectives``
  as config ``mixed_fused``.

Where an op reduces in place (``all_reduce``, ``all_reduce_all_gather``)
both modes first copy ``x`` the same way (``x.clone()``), so the modes
differ only in how the collectives run.

Autotune (``use_autotune=True`` runs it at construction; it is collective)
times every valid (op, mode) in simulation on inputs of ``8 KiB * 2**i`` bytes
per rank, ``i = 0 .. max_coef - 1``, and keeps the fastest mode per size in
``autotune_map``; ``select_autotune_mode`` looks up
``round(log2(bytes / 8 KiB))`` clamped to the table.  The simulation is
deterministic, so every rank builds the same table.  ``autotune_times`` keeps
the measured picoseconds, ``{op: [{mode: ps} per size]}``.  ``shutdown()``
only marks the handler closed (there is nothing to free on simulated ranks).

FlashInfer's hardware arguments (``device``, ``grid_size``,
``ib_enable_ibgda``, ``should_init_nvshmem``) are accepted and recorded; they
do not change the simulation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.algorithms import Algorithm, OpArgs, get_algorithm
from kernbench.ccl.comm import Comm, Region, chunk_bounds
from kernbench.ccl.launch import CollectiveLauncher, single_lane
from kernbench.ccl.settings import ccl_settings
from kernbench.distributed.world import ProcessGroup, active_world
from kernbench.errors import DistributedError
from kernbench.runtime import current_context
from kernbench.torch.dtypes import as_torch_dtype
from kernbench.torch.tensor import Tensor

__all__ = [
    "AUTOTUNE_BASE_BYTES",
    "DEFAULT_MODE",
    "FUSED_OPS",
    "MODES",
    "OPS",
    "SINGLE_OPS",
    "MixedCommHandler",
    "MixedLayout",
]

SINGLE_OPS = ("all_reduce", "all_gather", "reduce_scatter")
FUSED_OPS = ("all_reduce_all_gather", "reduce_scatter_all_reduce")
OPS = SINGLE_OPS + FUSED_OPS
MODES = ("two_step", "fused")
DEFAULT_MODE = "two_step"  # the mode of an op with no autotune entry
AUTOTUNE_BASE_BYTES = 8 * 1024
FUSED_CONFIG = "mixed_fused"  # the configuration name fused launches report


# ----------------------------------------------------------------------------- layout
@dataclass(frozen=True)
class MixedLayout:
    """How ``local_size * inter_size`` world ranks split into TP and DP groups."""

    local_size: int
    inter_size: int
    local_tp_size: int
    local_dp_size: int
    inter_tp_size: int
    inter_dp_size: int

    @property
    def world_size(self) -> int:
        return self.local_size * self.inter_size

    @property
    def tp_size(self) -> int:
        return self.local_tp_size * self.inter_tp_size

    @property
    def dp_size(self) -> int:
        return self.local_dp_size * self.inter_dp_size

    def coords(self, world_rank: int) -> tuple[int, int, int, int]:
        """(local_tp_rank, local_dp_rank, inter_tp_rank, inter_dp_rank) of a world rank."""
        local, inter = world_rank % self.local_size, world_rank // self.local_size
        return (
            local % self.local_tp_size,
            local // self.local_tp_size,
            inter % self.inter_tp_size,
            inter // self.inter_tp_size,
        )

    def world_rank(self, ltp: int, ldp: int, itp: int, idp: int) -> int:
        local = ltp + ldp * self.local_tp_size
        inter = itp + idp * self.inter_tp_size
        return local + inter * self.local_size

    def tp_rank(self, world_rank: int) -> int:
        ltp, _, itp, _ = self.coords(world_rank)
        return ltp + itp * self.local_tp_size

    def dp_rank(self, world_rank: int) -> int:
        _, ldp, _, idp = self.coords(world_rank)
        return ldp + idp * self.local_dp_size

    def tp_groups(self) -> list[tuple[int, ...]]:
        """Every TP group (ranks sharing DP coordinates), in DP-rank order, members by TP rank."""
        return [
            tuple(
                self.world_rank(ltp, ldp, itp, idp)
                for itp in range(self.inter_tp_size)
                for ltp in range(self.local_tp_size)
            )
            for idp in range(self.inter_dp_size)
            for ldp in range(self.local_dp_size)
        ]

    def dp_groups(self) -> list[tuple[int, ...]]:
        """Every DP group (ranks sharing TP coordinates), in TP-rank order, members by DP rank."""
        return [
            tuple(
                self.world_rank(ltp, ldp, itp, idp)
                for idp in range(self.inter_dp_size)
                for ldp in range(self.local_dp_size)
            )
            for itp in range(self.inter_tp_size)
            for ltp in range(self.local_tp_size)
        ]

    def tp_group_of(self, world_rank: int) -> tuple[int, ...]:
        return self.tp_groups()[self.dp_rank(world_rank)]

    def dp_group_of(self, world_rank: int) -> tuple[int, ...]:
        return self.dp_groups()[self.tp_rank(world_rank)]

    def valid_ops(self) -> list[str]:
        ops = list(SINGLE_OPS) if self.tp_size > 1 else []
        if self.tp_size > 1 and self.dp_size > 1:
            ops += FUSED_OPS
        return ops


def _split(size: int, tp: int | None, dp: int | None, default_tp: bool, level: str) -> tuple:
    """(tp, dp) of one level; a missing one is derived from the other or defaulted."""
    for name, value in ((f"{level}_tp_size", tp), (f"{level}_dp_size", dp)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise DistributedError(f"MixedCommHandler: {name}={value!r} must be a positive int")
    if tp is None and dp is None:
        tp, dp = (size, 1) if default_tp else (1, size)
    elif tp is None:
        tp = size // dp if size % dp == 0 else 0
    elif dp is None:
        dp = size // tp if size % tp == 0 else 0
    if tp * dp != size or not tp or not dp:
        raise DistributedError(
            f"MixedCommHandler: {level}_tp_size ({tp or '?'}) x {level}_dp_size ({dp or '?'}) "
            f"must equal {level}_size ({size})"
        )
    return tp, dp


# ----------------------------------------------------------------------------- fused programs
def _fused_program(
    op: str,
    x: Region,
    out: Region,
    tp: list[int],
    dp: list[int],
    steps: int,
) -> Callable[[Comm], Generator]:
    """One rank's fused program: ``steps`` pieces, phase 2 of piece k overlapping phase 1 of k+1."""
    ring = get_algorithm("ring").programs
    t, d = len(tp), len(dp)

    def blocks(region: Region, parts: int) -> list[Region]:
        size = region.count // parts
        return [region.sub(i * size, (i + 1) * size) for i in range(parts)]

    # The piece grid: the extent every block is cut along.
    extent = x.count // {"reduce_scatter": t, "reduce_scatter_all_reduce": d}.get(op, 1)
    bounds = chunk_bounds(extent, steps)

    def program(c: Comm) -> Generator:
        tail = []
        for k, (a, b) in enumerate(bounds):
            tpc = c.sub(tp, ("tp", k))
            if op == "all_reduce":  # in place: x is the output
                yield from ring["all_reduce"](tpc, OpArgs(buf=x.sub(a, b)))
            elif op == "all_gather":
                args = OpArgs(inp=x.sub(a, b), blocks=tuple(o.sub(a, b) for o in blocks(out, t)))
                yield from ring["all_gather"](tpc, args)
            elif op == "reduce_scatter":
                args = OpArgs(blocks=tuple(i.sub(a, b) for i in blocks(x, t)), out=out.sub(a, b))
                yield from ring["reduce_scatter"](tpc, args)
            elif op == "all_reduce_all_gather":  # x is a working copy, reduced in place
                piece = x.sub(a, b)
                yield from ring["all_reduce"](tpc, OpArgs(buf=piece))
                args = OpArgs(inp=piece, blocks=tuple(o.sub(a, b) for o in blocks(out, d)))
                tail.append(c.env.process(ring["all_gather"](c.sub(dp, ("dp", k)), args)))
            else:  # reduce_scatter_all_reduce
                piece = out.sub(a, b)
                args = OpArgs(blocks=tuple(i.sub(a, b) for i in blocks(x, d)), out=piece)
                yield from ring["reduce_scatter"](c.sub(dp, ("dp", k)), args)
                tail.append(c.env.process(ring["all_reduce"](tpc, OpArgs(buf=piece))))
        if tail:
            yield c.env.all_of(tail)

    return program


def _ring_neighbours(group: Sequence[int], rank: int) -> set[int]:
    i = list(group).index(rank)
    return {group[(i + 1) % len(group)], group[(i - 1) % len(group)]} - {rank}


# ----------------------------------------------------------------------------- the handler
class MixedCommHandler:
    """TP / DP collectives of one rank, with FlashInfer's constructor and methods.

    Every rank constructs it, with its own ranks and the same sizes, after
    ``dist.init_process_group()``: construction creates the TP groups, then
    the DP groups, with ``dist.new_group`` (the same calls on every rank), and
    with ``use_autotune`` runs :meth:`run_autotune` (a collective).

    Defaults of the splits: ``local_tp_size = local_size`` and
    ``local_dp_size = 1`` (TP inside a SIP), ``inter_tp_size = 1`` and
    ``inter_dp_size = inter_size`` (DP across SIPs); when one size of a level
    is given the other is derived from it.  The layout must match where the
    ranks live: the device of world rank ``w`` must sit in SIP ``w //
    local_size`` (its ``inter_rank``).

    ``dtype`` is the dtype autotune times (default: ``torch.get_default_dtype()``);
    the ops take tensors of any dtype the sum supports.  ``max_coef`` is the
    number of autotune sizes.  ``min_block_size`` / ``max_block_size`` bound
    the elements per piece of the fused mode (``max_block_size=None``: no
    bound) and ``min_num_steps`` is its number of pieces.
    """

    def __init__(
        self,
        world_rank: int,
        world_size: int,
        local_rank: int,
        local_size: int,
        inter_rank: int,
        inter_size: int,
        local_tp_size: int | None = None,
        local_dp_size: int | None = None,
        inter_tp_size: int | None = None,
        inter_dp_size: int | None = None,
        dtype: Any = None,
        device: Any = None,
        grid_size: int | None = None,
        max_block_size: int | None = None,
        min_block_size: int = 256,
        min_num_steps: int = 4,
        ib_enable_ibgda: bool = True,
        should_init_nvshmem: bool = True,
        use_autotune: bool = True,
        *,
        max_coef: int = 6,
    ) -> None:
        sizes = {
            "world_size": world_size,
            "local_size": local_size,
            "inter_size": inter_size,
        }
        for name, value in sizes.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise DistributedError(f"MixedCommHandler: {name}={value!r} must be a positive int")
        if local_size * inter_size != world_size:
            raise DistributedError(
                f"MixedCommHandler: local_size ({local_size}) x inter_size ({inter_size}) must "
                f"equal world_size ({world_size})"
            )
        ltp, ldp = _split(local_size, local_tp_size, local_dp_size, True, "local")
        itp, idp = _split(inter_size, inter_tp_size, inter_dp_size, False, "inter")
        if not 0 <= local_rank < local_size or not 0 <= inter_rank < inter_size:
            raise DistributedError(
                f"MixedCommHandler: local_rank {local_rank} must be in 0..{local_size - 1} and "
                f"inter_rank {inter_rank} in 0..{inter_size - 1}"
            )
        if world_rank != local_rank + inter_rank * local_size:
            raise DistributedError(
                f"MixedCommHandler: world_rank ({world_rank}) must be local_rank ({local_rank}) "
                f"+ inter_rank ({inter_rank}) x local_size ({local_size})"
            )
        if min_num_steps < 1 or min_block_size < 1 or (max_block_size or 1) < 1:
            raise DistributedError(
                "MixedCommHandler: min_num_steps, min_block_size and max_block_size must be >= 1"
            )
        if max_coef < 1:
            raise DistributedError(f"MixedCommHandler: max_coef={max_coef} must be >= 1")
        if not dist.is_initialized():
            raise DistributedError(
                "MixedCommHandler needs an initialised process group: call "
                "dist.init_process_group() on every rank first"
            )
        if dist.get_world_size() != world_size or dist.get_rank() != world_rank:
            raise DistributedError(
                f"MixedCommHandler: world_rank {world_rank} of world_size {world_size} but this "
                f"is rank {dist.get_rank()} of {dist.get_world_size()}"
            )
        self.layout = MixedLayout(local_size, inter_size, ltp, ldp, itp, idp)
        self._check_placement()

        self.world_rank, self.world_size = world_rank, world_size
        self.local_rank, self.local_size = local_rank, local_size
        self.inter_rank, self.inter_size = inter_rank, inter_size
        self.local_tp_size, self.local_dp_size = ltp, ldp
        self.inter_tp_size, self.inter_dp_size = itp, idp
        self.tp_size, self.dp_size = self.layout.tp_size, self.layout.dp_size
        self.tp_rank = self.layout.tp_rank(world_rank)
        self.dp_rank = self.layout.dp_rank(world_rank)
        self.dtype = as_torch_dtype(dtype)
        self.device = device
        self.grid_size = grid_size
        self.max_block_size = max_block_size
        self.min_block_size = min_block_size
        self.min_num_steps = min_num_steps
        self.ib_enable_ibgda = ib_enable_ibgda
        self.should_init_nvshmem = should_init_nvshmem
        self.max_coef = max_coef
        self.autotune_map: dict[str, list[str]] = {}
        self.autotune_times: dict[str, list[dict[str, int]]] = {}
        self._closed = False

        self.tp_group: ProcessGroup = self._new_groups(self.layout.tp_groups())
        self.dp_group: ProcessGroup = self._new_groups(self.layout.dp_groups())
        self.init_virtual_memory()
        self.init_nvshmem()
        if use_autotune:
            self.run_autotune()

    # -- set-up ------------------------------------------------------------------------
    def _check_placement(self) -> None:
        """Every world rank's device must sit in the SIP numbered by its inter_rank."""
        ctx = current_context()
        local = self.layout.local_size
        for w in range(self.layout.world_size):
            sip = ctx.device_coords(w)[0]
            if sip != w // local:
                level = ctx.topology.system.device_level
                per_sip = ctx.num_devices // ctx.topology.num_sips
                raise DistributedError(
                    f"MixedCommHandler: the layout does not match where ranks live: world rank "
                    f"{w} has inter_rank {w // local} (local_size {local}) but its device "
                    f"({level} {w}) is in SIP {sip}; local_size must be the number of ranks per "
                    f"SIP ({per_sip} {level} devices here)"
                )

    def _new_groups(self, groups: list[tuple[int, ...]]) -> ProcessGroup:
        """``dist.new_group`` for every group in order (on every rank); this rank's group."""
        mine = None
        for ranks in groups:
            group = dist.new_group(list(ranks))
            if self.world_rank in ranks:
                mine = group
        assert isinstance(mine, ProcessGroup)
        return mine

    def init_virtual_memory(self) -> None:
        """FlashInfer maps peer memory here; simulated ranks need nothing (a no-op)."""

    def init_nvshmem(self) -> None:
        """FlashInfer starts nvshmem here; simulated ranks need nothing (a no-op)."""

    def shutdown(self) -> None:
        """Release the handler: later calls raise.  The groups stay (torch has no group delete)."""
        self._closed = True

    # -- what is valid -----------------------------------------------------------------
    def get_valid_op_list(self) -> list[str]:
        """Ops this layout serves: TP ops when tp > 1, the fused pairs when also dp > 1."""
        return self.layout.valid_ops()

    def get_valid_mode_list(self) -> list[str]:
        """Modes this layout serves (none when it serves no op)."""
        return list(MODES) if self.get_valid_op_list() else []

    # -- autotune ------------------------------------------------------------------------
    def _count(self, op: str, nbytes: int, itemsize: int) -> int:
        """Elements of an input of about ``nbytes`` that ``op`` accepts."""
        div = {"reduce_scatter": self.tp_size, "reduce_scatter_all_reduce": self.dp_size}.get(op, 1)
        return max(div, nbytes // itemsize // div * div)

    def run_autotune(self) -> dict[str, list[str]]:
        """Time every valid (op, mode) in simulation and keep the fastest mode per size.

        Collective: every rank calls it.  Each measurement is ``barrier; t0;
        op; barrier; t1`` and the time is ``t1 - t0`` minus a back-to-back
        barrier, i.e. from the common start until the last rank finishes; ranks
        leave a WORLD collective together, so every rank sees the same times.
        Each (op, mode) runs once untimed first (installing its IPCQ tables).
        """
        self._usable()
        ctx = current_context()
        ops, modes = self.get_valid_op_list(), self.get_valid_mode_list()
        self.autotune_map, self.autotune_times = {}, {}
        if not ops:
            return self.autotune_map
        itemsize = self.dtype.itemsize
        dist.barrier()
        start = ctx.now
        dist.barrier()
        barrier_ps = ctx.now - start
        for op in ops:
            counts = [
                self._count(op, AUTOTUNE_BASE_BYTES << i, itemsize) for i in range(self.max_coef)
            ]
            x = torch.zeros(counts[0], dtype=self.dtype)
            for mode in modes:
                self._run(op, x, mode).free()
            x.free()
            best, times = [], []
            for count in counts:
                x = torch.zeros(count, dtype=self.dtype)
                row: dict[str, int] = {}
                for mode in modes:
                    dist.barrier()
                    start = ctx.now
                    out = self._run(op, x, mode)
                    dist.barrier()
                    row[mode] = ctx.now - start - barrier_ps
                    out.free()
                x.free()
                times.append(row)
                best.append(min(modes, key=lambda m: (row[m], modes.index(m))))
            self.autotune_map[op], self.autotune_times[op] = best, times
        return self.autotune_map

    def select_autotune_mode(self, op: str, x_in: Tensor) -> str:
        """The tuned mode for ``x_in``'s size (``DEFAULT_MODE`` when ``op`` was not tuned)."""
        self._valid_op(op)
        table = self.autotune_map.get(op)
        if not table:
            return DEFAULT_MODE
        nbytes = x_in.nbytes
        i = round(math.log2(nbytes / AUTOTUNE_BASE_BYTES)) if nbytes > 0 else 0
        return table[min(max(i, 0), len(table) - 1)]

    # -- ops -----------------------------------------------------------------------------
    def all_reduce(self, x: Tensor, mode: str | None = None) -> Tensor:
        """Sum ``x`` over the TP group."""
        return self.run(x, "all_reduce", mode)

    def all_gather(self, x: Tensor, mode: str | None = None) -> Tensor:
        """Concatenate the TP ranks' ``x`` along dimension 0 (block i from TP rank i)."""
        return self.run(x, "all_gather", mode)

    def reduce_scatter(self, x: Tensor, mode: str | None = None) -> Tensor:
        """Sum ``x`` over TP; TP rank j keeps block j of ``tp_size`` along dimension 0."""
        return self.run(x, "reduce_scatter", mode)

    def all_reduce_all_gather(self, x: Tensor, mode: str | None = None) -> Tensor:
        """All-reduce ``x`` over TP, then all-gather the result over DP."""
        return self.run(x, "all_reduce_all_gather", mode)

    def reduce_scatter_all_reduce(self, x: Tensor, mode: str | None = None) -> Tensor:
        """Reduce-scatter ``x`` over DP (DP rank j keeps block j), then all-reduce it over TP."""
        return self.run(x, "reduce_scatter_all_reduce", mode)

    def run(self, x: Tensor, op: str, mode: str | None = None) -> Tensor:
        """Run ``op`` on ``x`` in ``mode`` (None: the autotuned mode for its size)."""
        self._usable()
        self._valid_op(op)
        if mode is None:
            mode = self.select_autotune_mode(op, x)
        if mode not in self.get_valid_mode_list():
            raise DistributedError(
                f"MixedCommHandler.{op}: unknown mode {mode!r}; valid: "
                f"{', '.join(self.get_valid_mode_list())}"
            )
        return self._run(op, x, mode)

    # -- internals -------------------------------------------------------------------------
    def _usable(self) -> None:
        if self._closed:
            raise DistributedError("MixedCommHandler: used after shutdown()")

    def _valid_op(self, op: str) -> None:
        valid = self.get_valid_op_list()
        if op not in valid:
            why = f"unknown op {op!r}" if op not in OPS else f"{op} is not valid for this layout"
            raise DistributedError(
                f"MixedCommHandler: {why} (tp={self.tp_size}, dp={self.dp_size}); valid: "
                f"{', '.join(valid) or 'none'}"
            )

    def _out_shape(self, op: str, x: Tensor) -> tuple[int, ...]:
        if not isinstance(x, Tensor):
            raise DistributedError(
                f"MixedCommHandler.{op}: expected a kernbench.torch Tensor, got {type(x).__name__}"
            )
        single_lane(x.device_tensor, f"MixedCommHandler.{op}")
        if x.ndim < 1:
            raise DistributedError(f"MixedCommHandler.{op}: x needs at least one dimension")
        rows, rest = x.shape[0], tuple(x.shape[1:])
        factor = {"all_gather": self.tp_size, "all_reduce_all_gather": self.dp_size}.get(op)
        if factor:
            return (rows * factor, *rest)
        parts = {"reduce_scatter": self.tp_size, "reduce_scatter_all_reduce": self.dp_size}.get(op)
        if parts:
            if rows % parts:
                raise DistributedError(
                    f"MixedCommHandler.{op}: dimension 0 of x ({rows}) must split over "
                    f"{parts} ranks"
                )
            return (rows // parts, *rest)
        return tuple(x.shape)

    def _run(self, op: str, x: Tensor, mode: str) -> Tensor:
        """One op in one mode.

        Both modes copy ``x`` with the same device copy (``x.clone()``) where
        the op reduces in place (``all_reduce``, ``all_reduce_all_gather``),
        so they differ only in how the collectives run.
        """
        shape = self._out_shape(op, x)
        tp, dp = self.tp_group, self.dp_group
        if op == "all_reduce":
            out = x.clone()
            if mode == "fused":
                self._fused(op, out, out)
            else:
                dist.all_reduce(out, group=tp)
            return out
        out = torch.empty(shape, dtype=x.dtype)
        if op == "all_reduce_all_gather":
            work = x.clone()
            if mode == "fused":
                self._fused(op, work, out)
            else:
                dist.all_reduce(work, group=tp)
                dist.all_gather_into_tensor(out, work, group=dp)
            work.free()
        elif mode == "fused":
            self._fused(op, x, out)
        elif op == "all_gather":
            dist.all_gather_into_tensor(out, x, group=tp)
        elif op == "reduce_scatter":
            dist.reduce_scatter_tensor(out, x, group=tp)
        else:
            dist.reduce_scatter_tensor(out, x, group=dp)
            dist.all_reduce(out, group=tp)
        return out

    def num_steps(self, op: str, x: Tensor) -> int:
        """Pieces the fused mode cuts ``x`` into (per block for the scattering ops)."""
        parts = {"reduce_scatter": self.tp_size, "reduce_scatter_all_reduce": self.dp_size}
        count = x.numel() // parts.get(op, 1)
        steps = min(self.min_num_steps, max(1, count // self.min_block_size))
        if self.max_block_size:
            steps = max(steps, -(-count // self.max_block_size))
        return max(1, min(steps, count))

    def _fused(self, op: str, x: Tensor, out: Tensor) -> None:
        """One WORLD rendezvous launching every rank's pipelined program."""
        world = active_world()
        steps = self.num_steps(op, x)
        layout = self.layout
        signature = (x.dtype.name, tuple(x.shape), steps, layout)

        def launch(payloads: list[tuple[Any, Any]]) -> CollectiveLauncher:
            return _launch_fused(world.ctx, op, layout, payloads, steps)

        world.collective(
            world.world_group,
            f"mixed {op} (fused)",
            signature,
            (x.device_tensor, out.device_tensor),
            launch,
            False,
        )

    def __repr__(self) -> str:
        return (
            f"MixedCommHandler(rank {self.world_rank}/{self.world_size}, "
            f"local {self.local_tp_size}tp x {self.local_dp_size}dp, "
            f"inter {self.inter_tp_size}tp x {self.inter_dp_size}dp)"
        )


def _launch_fused(
    ctx: Any, op: str, layout: MixedLayout, payloads: list[tuple[Any, Any]], steps: int
) -> CollectiveLauncher:
    """The WORLD launch of a fused op: one program per rank (run by the last rank to arrive)."""
    name, config = ccl_settings(ctx).resolve("ring")
    tp_of = [layout.tp_group_of(w) for w in range(layout.world_size)]
    dp_of = [layout.dp_group_of(w) for w in range(layout.world_size)]

    def peers(_op: str, _size: int, rank: int) -> set[int]:
        found = _ring_neighbours(tp_of[rank], rank)
        if op in FUSED_OPS:
            found |= _ring_neighbours(dp_of[rank], rank)
        return found

    algorithm = Algorithm(
        name=FUSED_CONFIG,
        programs={},
        description=f"pipelined TP/DP phases over the {name!r} ring configuration",
        peers=peers,
    )
    launcher = CollectiveLauncher(ctx, op, FUSED_CONFIG, config, algorithm)
    ins = [single_lane(x, op) for x, _ in payloads]
    outs = [single_lane(o, op) for _, o in payloads]
    launcher.nbytes = max(ins[0].region().nbytes, outs[0].region().nbytes)
    programs = [
        _fused_program(op, ins[w].region(), outs[w].region(), list(tp_of[w]), list(dp_of[w]), steps)
        for w in range(layout.world_size)
    ]
    launcher.lane(programs, [x.pe for x in ins], [x.memory_node for x in ins])
    for _, o in payloads:
        launcher.refresh_replicas(o)
    return launcher
