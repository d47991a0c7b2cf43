"""``torch.nn.parallel.DistributedDataParallel``: one model replica per rank, gradients
averaged over the process group after each backward.

At construction the parameters and buffers are broadcast from the group's rank 0 (one
``broadcast`` per tensor; torch coalesces them into 250 MB buckets).  The forward calls
the wrapped module and passes its tensor outputs through an identity node
(``_DDPSinkBackward``, as torch's ``_DDPSink``); when a backward reaches it, it queues
the end of the reduction for the end of that backward, and arms the reducer: each
parameter's ``register_post_accumulate_grad_hook`` marks its gradient ready, and a bucket
whose gradients are all ready (and whose predecessors have started) is copied into one
flat tensor, divided by the world size and ``all_reduce``-d (SUM) asynchronously, beside
the rest of the backward, as torch's reducer does.  The buckets are torch's: the first
backward has one bucket holding every gradient (per dtype), as torch has before it has
seen the order gradients become ready; the backwards after it use buckets rebuilt in that
order, a first one of 1 MiB and then ``bucket_cap_mb`` (25 MiB) each, closed when a
gradient brings them to the limit (``find_unused_parameters=True`` uses those limits from
the start, in registration order, and never rebuilds).  At the end of the backward the
buckets left (gradients that never came: an unused parameter takes part with zeros, so
every rank calls the same collectives) are started, every all-reduce is waited for and
the averages are copied back into ``.grad``, as torch's reducer does without
``gradient_as_bucket_view``.  Unused parameters end as torch's: with
``find_unused_parameters=True`` the ranks add up which parameters they used (one small
all-reduce) and a parameter no rank used keeps ``.grad`` None; without it, the next
forward raises torch's "Expected to have finished reduction in the prior iteration"
error naming the parameters' indices.

The module registers itself as ``kernbench.torch.nn.parallel`` (the ``torch.nn.parallel``
import path), since ``torch.nn`` sits below ``torch.distributed`` here (ADR 0013).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from kernbench.errors import DistributedError, TensorAttributeError
from kernbench.runtime.current import current_context
from kernbench.torch import nn
from kernbench.torch.autograd import is_grad_enabled, no_grad, queue_callback
from kernbench.torch.autograd.graph import Node
from kernbench.torch.distributed.collectives import all_reduce, broadcast
from kernbench.torch.distributed.constants import ReduceOp
from kernbench.torch.distributed.groups import get_rank, get_world_size, is_initialized
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import cat, tensor, zeros_like
from kernbench.torch.grad_slots import set_history
from kernbench.torch.nn.data_parallel import DataParallel, data_parallel
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = ["DistributedDataParallel"]


class DistributedDataParallel(Module):
    """``DistributedDataParallel(module, device_ids=None, output_device=None, ...)``: torch's
    arguments are taken; ``bucket_cap_mb``, ``find_unused_parameters`` and ``static_graph``
    shape the buckets as torch's; ``gradient_as_bucket_view`` changes nothing (the copies
    into and out of each bucket are always made)."""

    def __init__(
        self,
        module: Module,
        device_ids: Any = None,
        output_device: Any = None,
        dim: int = 0,
        broadcast_buffers: bool = True,
        init_sync: bool = True,
        process_group: Any = None,
        bucket_cap_mb: float | None = None,
        find_unused_parameters: bool = False,
        check_reduction: bool = False,
        gradient_as_bucket_view: bool = False,
        static_graph: bool = False,
        delay_all_reduce_named_params: Any = None,
        param_to_hook_all_reduce: Any = None,
        mixed_precision: Any = None,
        device_mesh: Any = None,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise DistributedError(
                f"DistributedDataParallel: module must be a torch.nn.Module, got "
                f"{type(module).__name__}"
            )
        if not is_initialized():
            raise DistributedError(
                "Default process group has not been initialized, please make sure to call "
                "init_process_group."
            )
        if device_ids is not None and len(list(device_ids)) > 1:
            raise DistributedError(
                f"DistributedDataParallel: device_ids={list(device_ids)!r}: one device per "
                "rank (as torch's single-device modules); pass [rank] or None"
            )
        if not any(p.requires_grad for p in module.parameters()):
            raise DistributedError(
                "DistributedDataParallel is not needed when a module doesn't have any "
                "parameter that requires a gradient."
            )
        self.module = module
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.process_group = process_group
        self.bucket_cap_mb = bucket_cap_mb
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.require_backward_grad_sync = True
        self._queued = False
        params = [p for p in module.parameters() if p.requires_grad]
        cap = int((25 if bucket_cap_mb is None else bucket_cap_mb) * MIB)
        self._limits = [MIB if bucket_cap_mb is None else cap, cap]
        # torch's first buckets: one (per dtype) unless parameters may go unused; made in
        # registration order, sorted by their first parameter, reduced last first.
        one = not find_unused_parameters or static_graph
        made = bucket_assignment(params, [sys.maxsize] if one else self._limits)
        where = {id(p): i for i, p in enumerate(params)}
        made.sort(key=lambda bucket: min(where[id(p)] for p in bucket))
        self._buckets: list[list[Tensor]] = made[::-1]
        self._rebuild = one  # torch rebuilds once, in the order gradients become ready
        # The backward in progress: gradients ready, in order; buckets launched.
        self._armed = False
        self._ready: dict[int, Tensor] = {}
        self._launched: list[tuple[list[Tensor], Tensor, Any]] = []
        self._params = params
        self._no_grad_before: set[int] = set()  # parameters given zeros by _launch
        # Parameters a backward gave no gradient (find_unused_parameters=False): torch's
        # reducer does not finish, and the next forward raises.
        self._unfinished: list[int] = []
        for p in params:
            p.register_post_accumulate_grad_hook(self._grad_ready)
        if init_sync:
            states = [*module.parameters(), *(module.buffers() if broadcast_buffers else ())]
            broadcast_coalesced(states, process_group)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self._unfinished and self.require_backward_grad_sync and is_grad_enabled():
            raise DistributedError(_unfinished_message(self._unfinished, self.process_group))
        if self.broadcast_buffers:
            broadcast_coalesced(list(self.module.buffers()), self.process_group)
        if self.device_ids:  # as torch's: inputs move to the module's device first
            device = self.device_ids[0]
            inputs, kwargs = _to_device(inputs, device), _to_device(kwargs, device)
        output = self.module(*inputs, **kwargs)
        if self.require_backward_grad_sync and is_grad_enabled():
            output = self._sink(output)
        return output

    def _sink(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            if not value.requires_grad:
                return value
            passed = value.detach()
            set_history(passed, Node("_DDPSinkBackward", (value,), self._reached))
            return passed
        if isinstance(value, tuple | list):
            return type(value)(self._sink(v) for v in value)
        if isinstance(value, dict):
            return {k: self._sink(v) for k, v in value.items()}
        return value

    def _reached(self, grad: Tensor) -> tuple[Tensor]:
        """The backward reached the outputs: reduce the gradients as they become ready."""
        if not self._queued:
            self._queued = self._armed = True
            queue_callback(self._finish_reduction)
        return (grad,)

    def _grad_ready(self, param: Tensor) -> None:
        """A parameter's gradient is accumulated: launch every bucket now complete, in order
        (torch's reducer launches bucket i only after bucket i-1)."""
        if not self._armed:
            return
        self._ready[id(param)] = param
        while len(self._launched) < len(self._buckets):
            bucket = self._buckets[len(self._launched)]
            if any(id(p) not in self._ready for p in bucket):
                break
            self._launch(bucket)

    def _launch(self, bucket: list[Tensor]) -> None:
        """Copy the bucket's gradients into one tensor, divide it by the world size and
        start its all-reduce (async: the backward goes on beside it)."""
        with no_grad():
            grads = []
            for p in bucket:
                if p.grad is None:  # unused on this rank: takes part with zeros
                    p.grad = zeros_like(p)
                    self._no_grad_before.add(id(p))
                grads.append(p.grad)
            flat = _on_rank_device(cat([g.reshape(-1) for g in grads]))
            flat.div_(get_world_size(self.process_group))
            work = all_reduce(flat, ReduceOp.SUM, group=self.process_group, async_op=True)
        self._launched.append((grads, flat, work))

    def _finish_reduction(self) -> None:
        """After the backward: launch the buckets left (gradients that never became ready),
        wait for every all-reduce and copy the averages back into ``.grad``."""
        self._queued = self._armed = False
        unused = [i for i, p in enumerate(self._params) if id(p) not in self._ready]
        for bucket in self._buckets[len(self._launched) :]:
            self._launch(bucket)
        with no_grad():
            for grads, flat, work in self._launched:
                work.wait()
                offset = 0
                for g in grads:
                    n = g.numel()
                    g.copy_(flat[offset : offset + n].view(g.shape))
                    offset += n
            if unused and (self.find_unused_parameters or self.static_graph):
                self._drop_globally_unused()
            elif unused:
                self._unfinished = unused
        self._no_grad_before = set()
        if self._rebuild:
            self._rebuild = False
            ready = list(self._ready.values())
            seen = {id(p) for p in ready}
            params = [p for p in self.module.parameters() if p.requires_grad]
            ready += [p for p in reversed(params) if id(p) not in seen]
            self._buckets = bucket_assignment(ready, self._limits)
        self._ready, self._launched = {}, []

    def _drop_globally_unused(self) -> None:
        """As torch's reducer with ``find_unused_parameters``: the ranks add up which
        parameters each used (one small all-reduce), and a parameter no rank used keeps
        no gradient (``.grad`` stays None, so the optimizer skips it); one some rank used
        gets the average, zeros from the others included."""
        flags = [int(id(p) in self._ready) for p in self._params]
        used = tensor(flags, dtype=DTYPE_OBJECTS["int32"])  # one copy in, as torch's map
        all_reduce(used, ReduceOp.SUM, group=self.process_group)
        # (a timing-only run has no values to add up: what was unused stays zeros)
        counts = used.tolist() if not _timing_only(used) else [1] * len(self._params)
        for p, count in zip(self._params, counts, strict=True):
            if count == 0 and id(p) in self._no_grad_before:
                p.grad = None

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards inside accumulate local gradients without reducing them; the first
        backward after it reduces what was accumulated, as torch's."""
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous


MIB = 1024 * 1024
BROADCAST_BUCKET_BYTES = 250 * MIB  # torch's DDP broadcast_bucket_size


def broadcast_coalesced(tensors: list[Tensor], group: Any) -> None:
    """torch's ``_broadcast_coalesced`` from rank 0 of ``group``: the tensors, per dtype and
    device (a model split over devices: the DDP tutorial's ``ToyMpModel``) in order of
    first appearance, in buckets of at most 250 MiB (a larger tensor alone),
    each flattened into one tensor (``cat``), broadcast once and copied back on the other
    ranks; one collective for a small model's parameters instead of one per tensor."""
    by_dtype: dict[Any, list[list[Tensor]]] = {}
    for t in tensors:
        buckets = by_dtype.setdefault(_bucket_key(t), [[]])
        size = sum(x.numel() * x.element_size() for x in buckets[-1])
        if buckets[-1] and size + t.numel() * t.element_size() > BROADCAST_BUCKET_BYTES:
            buckets.append([])
        buckets[-1].append(t)
    root = get_rank(group) == 0
    with no_grad():
        for buckets in by_dtype.values():
            for bucket in buckets:
                if len(bucket) == 1 and _on_rank_device(bucket[0]) is bucket[0]:
                    broadcast(bucket[0], group=group, group_src=0)
                    continue
                flat = _on_rank_device(cat([t.reshape(-1) for t in bucket]))
                broadcast(flat, group=group, group_src=0)
                if root:
                    continue
                offset = 0
                for t in bucket:
                    n = t.numel()
                    t.copy_(flat[offset : offset + n].view(t.shape))
                    offset += n


def bucket_assignment(tensors: list[Tensor], limits: list[int]) -> list[list[Tensor]]:
    """Torch's ``_compute_bucket_assignment_by_size``: ``tensors`` in order into buckets per
    dtype and device; a bucket closes when a tensor brings it to its limit, and the next
    bucket of that dtype and device takes the next limit (the last one repeating).  Buckets
    in the order they close, the ones left open after them."""
    done: list[list[Tensor]] = []
    open_: dict[Any, tuple[list[Tensor], int, int]] = {}  # key -> (tensors, bytes, limit #)
    for t in tensors:
        key = _bucket_key(t)
        members, size, which = open_.get(key, ([], 0, 0))
        members.append(t)
        size += t.numel() * t.element_size()
        if size >= limits[which]:
            done.append(members)
            open_[key] = ([], 0, min(which + 1, len(limits) - 1))
        else:
            open_[key] = (members, size, which)
    return done + [members for members, _, _ in open_.values() if members]


def _on_rank_device(t: Tensor) -> Tensor:
    """``t``, or a copy of it on the calling rank's device when it is on another one: a
    rank's collectives run on its own device, so a bucket of a module split over devices
    (``ToyMpModel``) is copied there and back; NCCL would run it where it lies, so those
    copies cost time torch's run does not spend."""
    device = current_context().current_device()
    return t if device is None or t.get_device() == device else t.to(device)


def _bucket_key(t: Tensor) -> tuple[Any, int]:
    """Tensors share a bucket when they share a dtype and a device, as in torch."""
    return t.dtype, t.get_device()


def _unfinished_message(indices: list[int], group: Any) -> str:
    return (
        "Expected to have finished reduction in the prior iteration before starting a new "
        "one. This error indicates that your module has parameters that were not used in "
        "producing loss. You can enable unused parameter detection by passing the keyword "
        "argument `find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`"
        ", and by making sure all `forward` function outputs participate in calculating loss."
        f"\nParameter indices which did not receive grad for rank {get_rank(group)}: "
        + " ".join(str(i) for i in indices)
    )


def _timing_only(t: Tensor) -> bool:
    return t.storage_device_tensor.context.timing_only


def _to_device(value: Any, device: Any) -> Any:
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, tuple | list):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def _parallel_getattr(name: str) -> Any:
    hint = "there are DistributedDataParallel, DataParallel and data_parallel"
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.parallel' has no attribute {name!r}: {hint}"
    )


def _register() -> None:
    """``torch.nn.parallel`` as a module of the facade: ``nn.parallel`` and the import path."""
    parallel = ModuleType(
        "kernbench.torch.nn.parallel",
        "``torch.nn.parallel``: DistributedDataParallel "
        "(kernbench.torch.distributed.data_parallel), DataParallel and data_parallel "
        "(kernbench.torch.nn.data_parallel).",
    )
    parallel.DistributedDataParallel = DistributedDataParallel
    parallel.DataParallel = DataParallel
    parallel.data_parallel = data_parallel
    parallel.__all__ = ["DataParallel", "DistributedDataParallel", "data_parallel"]
    parallel.__getattr__ = _parallel_getattr
    sys.modules[parallel.__name__] = parallel
    nn.parallel = parallel


_register()
