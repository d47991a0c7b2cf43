"""``torch.nn.parallel.DistributedDataParallel``: one model replica per rank, gradients
averaged over the process group after each backward.

At construction the parameters and buffers are broadcast from the group's rank 0 (one
``broadcast`` per tensor; torch coalesces them into 250 MB buckets).  The forward calls
the wrapped module and passes its tensor outputs through an identity node
(``_DDPSinkBackward``, as torch's ``_DDPSink``); when a backward reaches it, it queues
the reduction to run once the whole graph has run.  The gradients are reduced in torch's
buckets: the first backward reduces one bucket holding every gradient (per dtype), as
torch does before it has seen the order gradients become ready; the backwards after it
reduce buckets rebuilt in that order (taken here as reverse registration order), a first
one of 1 MiB and then ``bucket_cap_mb`` (25 MiB) each, closed when a gradient brings them
to the limit (``find_unused_parameters=True`` uses those limits from the start and never
rebuilds).  A bucket's gradients are copied into one flat tensor, divided by the world
size and ``all_reduce``-d (SUM), and copied back, as torch's reducer does without
``gradient_as_bucket_view``.  The reduction does not overlap the backward (torch starts a
bucket's all-reduce as soon as it is full).  A parameter whose gradient is None on this
rank (unused in its forward) takes part with zeros, so every rank calls the same
collectives, and gets the averaged result as its ``.grad``.

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
from kernbench.torch import nn
from kernbench.torch.autograd import is_grad_enabled, no_grad, queue_callback
from kernbench.torch.autograd.graph import Node
from kernbench.torch.distributed.collectives import all_reduce, broadcast
from kernbench.torch.distributed.constants import ReduceOp
from kernbench.torch.distributed.groups import get_world_size, is_initialized
from kernbench.torch.factories import cat, zeros_like
from kernbench.torch.grad_slots import set_history
from kernbench.torch.nn.modules import Module
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
        # The buckets of the next reduction (lists of parameters); None until the first.
        self._buckets: list[list[Tensor]] | None = None
        self._rebuilt = False
        if init_sync:
            with no_grad():
                for t in [*module.parameters(), *module.buffers()]:
                    broadcast(t, group=process_group, group_src=0)

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.broadcast_buffers:
            with no_grad():
                for t in self.module.buffers():
                    broadcast(t, group=self.process_group, group_src=0)
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
        if not self._queued:
            self._queued = True
            queue_callback(self._reduce_gradients)
        return (grad,)

    def _reduce_gradients(self) -> None:
        """Average every parameter's gradient over the group (after the backward)."""
        self._queued = False
        world = get_world_size(self.process_group)
        params = [p for p in self.module.parameters() if p.requires_grad]
        cap = int((25 if self.bucket_cap_mb is None else self.bucket_cap_mb) * MIB)
        first = MIB if self.bucket_cap_mb is None else cap
        if self._buckets is None:
            # torch's first buckets: one (per dtype) unless parameters may go unused; made
            # in registration order, sorted by their first parameter, reduced last first.
            one = not self.find_unused_parameters or self.static_graph
            made = bucket_assignment(params, [sys.maxsize] if one else [first, cap])
            where = {id(p): i for i, p in enumerate(params)}
            made.sort(key=lambda bucket: min(where[id(p)] for p in bucket))
            self._buckets = made[::-1]
        with no_grad():
            for bucket in self._buckets:
                self._reduce_bucket(bucket, world)
        if not self._rebuilt and (self.static_graph or not self.find_unused_parameters):
            self._rebuilt = True  # torch rebuilds once, in the order gradients became ready
            self._buckets = bucket_assignment(params[::-1], [first, cap])

    def _reduce_bucket(self, params: list[Tensor], world: int) -> None:
        """Copy the bucket's gradients into one tensor, average it over the group, copy back."""
        grads = []
        for p in params:
            if p.grad is None:
                p.grad = zeros_like(p)
            grads.append(p.grad)
        flat = cat([g.reshape(-1) for g in grads])
        flat.div_(world)
        all_reduce(flat, ReduceOp.SUM, group=self.process_group)
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset : offset + n].view(g.shape))
            offset += n

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


def bucket_assignment(tensors: list[Tensor], limits: list[int]) -> list[list[Tensor]]:
    """Torch's ``_compute_bucket_assignment_by_size``: ``tensors`` in order into buckets per
    dtype; a bucket closes when a tensor brings it to its limit, and the next bucket of that
    dtype takes the next limit (the last one repeating).  Buckets in the order they close,
    the ones left open after them."""
    done: list[list[Tensor]] = []
    open_: dict[Any, tuple[list[Tensor], int, int]] = {}  # dtype -> (tensors, bytes, limit #)
    for t in tensors:
        members, size, which = open_.get(t.dtype, ([], 0, 0))
        members.append(t)
        size += t.numel() * t.element_size()
        if size >= limits[which]:
            done.append(members)
            open_[t.dtype] = ([], 0, min(which + 1, len(limits) - 1))
        else:
            open_[t.dtype] = (members, size, which)
    return done + [members for members, _, _ in open_.values() if members]


def _to_device(value: Any, device: Any) -> Any:
    if isinstance(value, Tensor):
        return value.to(device)
    if isinstance(value, tuple | list):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def _parallel_getattr(name: str) -> Any:
    hint = {
        "DataParallel": "one process driving several devices is not modelled: run one rank "
        "per device with DistributedDataParallel",
    }.get(name, "there is DistributedDataParallel")
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn.parallel' has no attribute {name!r}: {hint}"
    )


def _register() -> None:
    """``torch.nn.parallel`` as a module of the facade: ``nn.parallel`` and the import path."""
    parallel = ModuleType(
        "kernbench.torch.nn.parallel",
        "``torch.nn.parallel``: DistributedDataParallel "
        "(kernbench.torch.distributed.data_parallel).",
    )
    parallel.DistributedDataParallel = DistributedDataParallel
    parallel.__all__ = ["DistributedDataParallel"]
    parallel.__getattr__ = _parallel_getattr
    sys.modules[parallel.__name__] = parallel
    nn.parallel = parallel


_register()
