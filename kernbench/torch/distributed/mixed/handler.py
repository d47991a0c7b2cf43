"""``MixedCommHandler``: one rank's TP / DP collectives, after FlashInfer's handler.

See :mod:`kernbench.torch.distributed.mixed` for the layout, the ops, the two
modes and the autotune.
"""

from __future__ import annotations

import math
from typing import Any

import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.ccl.launch import CollectiveLauncher, single_lane
from kernbench.distributed.world import ProcessGroup, active_world
from kernbench.errors import DistributedError
from kernbench.runtime import current_context
from kernbench.torch.distributed.mixed.fused import launch_fused
from kernbench.torch.distributed.mixed.layout import OPS, MixedLayout, split_level
from kernbench.torch.dtypes import as_torch_dtype
from kernbench.torch.tensor import Tensor

__all__ = ["AUTOTUNE_BASE_BYTES", "DEFAULT_MODE", "MODES", "MixedCommHandler"]

MODES = ("two_step", "fused")
DEFAULT_MODE = "two_step"  # the mode of an op with no autotune entry
AUTOTUNE_BASE_BYTES = 8 * 1024


class MixedCommHandler:
    """TP / DP collectives of one rank, with FlashInfer's constructor and methods.

    Every rank constructs it, with its own ranks and the same sizes, after
    ``dist.init_process_group()``: construction creates the TP groups, then
    the DP groups, with ``dist.new_group`` (the same calls on every rank), and
    with ``use_autotune`` runs :meth:`run_autotune` (a collective).

    Defaults of the splits, as FlashInfer's: ``*_tp_size = *_size`` and
    ``*_dp_size = 1`` on both levels (TP over every rank); when one size of
    a level is given the other is derived from it.  The layout must match where the
    ranks live: the device of world rank ``w`` must sit in SIP ``w //
    local_size`` (its ``inter_rank``).

    ``dtype`` is the dtype autotune times (default: ``torch.get_default_dtype()``);
    the ops take tensors of any dtype the sum supports.  ``max_coef`` is the
    number of autotune sizes.  ``min_block_size`` / ``max_block_size`` bound
    the elements per piece of the fused mode (``max_block_size=None``: no
    bound); the piece count within them is planned
    (:mod:`~kernbench.torch.distributed.mixed.pipeline`), so ``min_num_steps``
    is only recorded.
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
        ltp, ldp = split_level(local_size, local_tp_size, local_dp_size, "local")
        itp, idp = split_level(inter_size, inter_tp_size, inter_dp_size, "inter")
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
        self.last_fused_pieces = 0  # pieces the last fused op ran in (0: none ran yet)
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

    def piece_bounds(self, op: str, x: Tensor) -> tuple[int, int]:
        """(least, most) pieces the fused mode may cut ``x`` into for ``op``.

        A piece (per block, for the scattering ops) holds at least
        ``min_block_size`` elements and at most ``max_block_size``.
        """
        parts = {"reduce_scatter": self.tp_size, "reduce_scatter_all_reduce": self.dp_size}
        count = max(1, x.numel() // parts.get(op, 1))
        most = max(1, count // self.min_block_size)
        least = -(-count // self.max_block_size) if self.max_block_size else 1
        return min(least, count), max(most, min(least, count))

    def _fused(self, op: str, x: Tensor, out: Tensor) -> None:
        """One WORLD rendezvous launching every rank's pipelined program."""
        world = active_world()
        least, most = self.piece_bounds(op, x)
        layout = self.layout
        signature = (x.dtype.name, tuple(x.shape), least, most, layout)

        def launch(payloads: list[tuple[Any, Any, Any]]) -> CollectiveLauncher:
            tensors = [(x, o) for x, o, _ in payloads]
            launcher, pieces = launch_fused(world.ctx, op, layout, tensors, least, most)
            for _, _, handler in payloads:
                handler.last_fused_pieces = pieces
            return launcher

        world.collective(
            world.world_group,
            f"mixed {op} (fused)",
            signature,
            (x.device_tensor, out.device_tensor, self),
            launch,
            False,
        )

    def __repr__(self) -> str:
        return (
            f"MixedCommHandler(rank {self.world_rank}/{self.world_size}, "
            f"local {self.local_tp_size}tp x {self.local_dp_size}dp, "
            f"inter {self.inter_tp_size}tp x {self.inter_dp_size}dp)"
        )
