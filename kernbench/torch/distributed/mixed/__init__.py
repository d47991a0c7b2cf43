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
  rank that runs the op's phases with the same algorithm configurations the
  two-step mode uses, on sub-communicators of the rank's TP and DP groups.
  The data is cut into k pieces and pipelined on the PEs over IPCQ: stage s
  runs phase 1 of piece s beside phase 2 of piece s-1, so where TP and DP
  use different links the phases overlap (the fabric prices the links they
  do share).  k is planned by the collective cost model
  (:mod:`~kernbench.torch.distributed.mixed.pipeline`) within the bounds
  ``min_block_size`` / ``max_block_size`` (elements per piece); k = 1, the
  two-step schedule in one launch, unless pipelining is predicted at least 5%
  faster.  It is 1 for the single-phase ops (nothing to overlap) and where
  the phases share their busiest links (e.g. TP pairs and DP rings on
  ``ring8``).  ``last_fused_pieces`` says what the last fused op ran in.  The
  launch is checked like any collective (op, dtype, shape, piece bounds and
  layout must match on every rank) and appears in the run report's
  ``collectives`` as config ``mixed_fused``.

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
``ib_enable_ibgda``, ``should_init_nvshmem``) and ``min_num_steps`` (the
piece count is planned here, not fixed) are accepted and recorded; they do
not change the simulation.

The layout is :mod:`~kernbench.torch.distributed.mixed.layout`, the fused
mode's phases and piece plan :mod:`~kernbench.torch.distributed.mixed.pipeline`,
its programs and launch :mod:`~kernbench.torch.distributed.mixed.fused`,
and the handler :mod:`~kernbench.torch.distributed.mixed.handler`.
"""

from __future__ import annotations

from kernbench.torch.distributed.mixed.handler import (
    AUTOTUNE_BASE_BYTES,
    DEFAULT_MODE,
    MODES,
    MixedCommHandler,
)
from kernbench.torch.distributed.mixed.layout import FUSED_OPS, OPS, SINGLE_OPS, MixedLayout

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
