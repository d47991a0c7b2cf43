"""How FSDP overlaps its collectives with computation on a rank: one root's order of
units and the collectives it has in flight (torch's exec-order data, rate limiter and
post-backward stream, for ``use_orig_params=False``).

Compute here runs as the rank issues it, and an async collective (``async_op=True``)
runs beside it until it is waited for, as DistributedDataParallel's bucket all-reduces
do; a group's collectives still run one after another in call order (ADR 0016).  So
what torch does on its unshard and post-backward streams is done here by issuing the
collective early and waiting for it late:

* a unit's all-gather is issued by its pre-forward (or earlier, by a prefetch) and
  waited for where its parameters are first used;
* ``forward_prefetch`` issues the next unit's all-gather (in the pre-forward order of the
  first iteration) when a unit's forward starts;
* ``BackwardPrefetch.BACKWARD_PRE`` issues the all-gather of the next unit in backward
  order (the reverse of this iteration's post-forward order) when a unit's backward
  starts (a hook on its forward outputs), ``BACKWARD_POST`` when its gradient is
  computed, before its reduce-scatter;
* gradient reduce-scatters (``NO_SHARD``: all-reduces) are started when a unit's
  gradient is computed and waited for at the end of the backward (a queued callback, as
  torch's post-backward final callback), where the shards' ``.grad`` are set;
* ``limit_all_gathers`` keeps at most two all-gathers issued and not finished: a third
  waits for the oldest first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kernbench.torch.autograd import no_grad, queue_callback
from kernbench.torch.autograd.engine import backward_running
from kernbench.torch.grad_slots import post_accumulate_grad_hooks

if TYPE_CHECKING:
    from kernbench.torch.tensor import Tensor

__all__ = ["MAX_INFLIGHT_ALL_GATHERS", "UnitSchedule"]

MAX_INFLIGHT_ALL_GATHERS = 2  # torch's _max_num_inflight_all_gathers


class UnitSchedule:
    """One root unit's schedule on the calling rank (its units are ``handles``)."""

    def __init__(self, handles: list[Any], limit_all_gathers: bool) -> None:
        self.handles = handles
        self.limit_all_gathers = limit_all_gathers
        self.pre_forward: list[Any] = []  # fixed after the first forward, as torch's
        self.order_fixed = False
        self.post_forward: list[Any] = []  # this iteration's
        self.gathers: list[Any] = []  # all-gathers issued, oldest first
        self.reductions: list[tuple[Any, Tensor, Tensor | None, Any]] = []
        self.queued = False
        self.in_backward = False

    # -- forward --------------------------------------------------------------------------
    def begin_forward(self) -> None:
        """A root forward starts: nothing gathered before it is used (a prefetch that no
        unit consumed, parameters kept by a unit whose backward did not run)."""
        for h in self.handles:
            if h.full is not None:
                h.release()
        self.post_forward = []

    def record_pre_forward(self, handle: Any) -> None:
        if not self.order_fixed and handle not in self.pre_forward:
            self.pre_forward.append(handle)

    def end_forward(self) -> None:
        self.order_fixed = True
        for h in self.handles:
            if h.prefetched:  # a forward prefetch this forward did not use
                h.release()

    def prefetch_forward(self, handle: Any) -> None:
        """``forward_prefetch``: gather the unit after ``handle`` in forward order."""
        if not self.order_fixed or handle not in self.pre_forward:
            return
        index = self.pre_forward.index(handle) + 1
        if index < len(self.pre_forward):
            self._prefetch(self.pre_forward[index])

    # -- backward -------------------------------------------------------------------------
    def backward_abandoned(self) -> bool:
        """Whether a backward of this schedule raised before its final callback (the
        engine drops its callbacks): then its reductions are waited for (every rank
        issued them) and dropped, as that backward's gradients are, and the schedule is
        out of backward again."""
        if not self.in_backward or backward_running():
            return False
        reductions, self.reductions = self.reductions, []
        self.queued = self.in_backward = False
        for _, _, _, work in reductions:
            work.wait()
        return True

    def begin_backward(self) -> None:
        """Called by every unit's pre- and post-backward: the first one queues the wait for
        the reductions at the end of this backward."""
        if not self.queued:
            self.queued = self.in_backward = True
            queue_callback(self._finish_backward)
        self._let_go()

    def prefetch_backward(self, handle: Any) -> None:
        """Gather the unit that comes after ``handle`` in backward order, if it needs it."""
        if handle not in self.post_forward:
            return
        index = self.post_forward.index(handle) - 1
        if index >= 0 and self.post_forward[index].needs_backward_unshard:
            self._prefetch(self.post_forward[index])

    def reduce(self, handle: Any, out: Tensor, flat: Tensor | None, work: Any) -> None:
        """A unit's reduction started: its input ``flat`` is kept while it runs."""
        self._let_go()
        self.reductions.append((handle, out, flat, work))

    def _let_go(self) -> None:
        """Drop the inputs of the reductions that are done (torch frees them once the
        post-backward stream has used them); looked at by every pre- and post-backward."""
        self.reductions = [
            (h, o, None if w.is_completed() else f, w) for h, o, f, w in self.reductions
        ]

    def _finish_backward(self) -> None:
        """torch's post-backward final callback: wait for every reduction, in the order
        they were started, and accumulate each into its shard's ``.grad``; drop what a
        prefetch gathered and no unit used."""
        reductions, self.reductions = self.reductions, []
        self.queued = self.in_backward = False
        for _, _, _, work in reductions:
            work.wait()
        with no_grad():
            for handle, out, _, _ in reductions:
                _accumulate(handle, out)
        for h in self.handles:  # torch's catch-all reshard
            if h.full is not None:
                h.release()

    # -- all-gathers ----------------------------------------------------------------------
    def _prefetch(self, handle: Any) -> None:
        if handle.full is None and handle.flat_param is not None:
            handle.unshard(self)
            handle.prefetched = True

    def before_gather(self) -> None:
        """torch's rate limiter: with ``limit_all_gathers``, a third all-gather waits for
        the oldest of the two still on their way."""
        self.gathers = [w for w in self.gathers if not w.is_completed()]
        while self.limit_all_gathers and len(self.gathers) >= MAX_INFLIGHT_ALL_GATHERS:
            self.gathers.pop(0).wait()

    def gathered(self, work: Any) -> None:
        self.gathers.append(work)


def _accumulate(handle: Any, out: Tensor) -> None:
    """The reduced gradient into the shard's ``.grad`` (as the autograd engine adds a
    leaf's), then the shard's post-accumulate-grad hooks."""
    param = handle.flat_param
    if out.dtype is not param.dtype:  # (keep_low_precision_grads too, as the engine casts)
        out = out.to(param.dtype)
    if param.grad is None:
        param.grad = out
    else:
        param.grad.add_(out)
    for hook in post_accumulate_grad_hooks(param):
        hook(param)
