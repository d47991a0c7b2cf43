"""``torch.distributed.fsdp``: ``FullyShardedDataParallel`` (FSDP, ZeRO-3), as torch's
first FSDP with ``use_orig_params=False``.

Each FSDP unit (the wrapped module, and each submodule an ``auto_wrap_policy`` picks)
flattens the parameters it owns into one flat parameter, padded to a multiple of the
world size, and every rank keeps only its shard of it (``model.parameters()`` are the
shards; the optimizer steps on them).  Around the unit's forward the shards are
all-gathered (``all_gather_into_tensor``) and the module's parameters become views of
the gathered tensor; the gradients of those views are joined into one flat gradient,
divided by the world size and reduce-scattered (``reduce_scatter_tensor``) into the
shard's ``.grad``.  ``FULL_SHARD`` frees the gathered parameters after the forward (the
tensors backward needs of them are kept as references, through
``saved_tensors_hooks``) and gathers them again when the backward first needs them;
``SHARD_GRAD_OP`` keeps them from forward to backward; ``NO_SHARD`` all-reduces the
gradients, as DDP.

The collectives overlap computation as torch's (``overlap.py``): each all-gather is
issued async (by the unit's pre-forward or pre-backward, or earlier by a prefetch:
``forward_prefetch``, ``backward_prefetch=BACKWARD_PRE`` by default, ``BACKWARD_POST``)
and waited for where the parameters are first used; each gradient reduction is started
async when the unit's gradient is computed and waited for at the end of the backward,
where the shards' ``.grad`` are set; ``limit_all_gathers`` keeps at most two all-gathers
in flight.  The values are those of blocking collectives; only the time changes.

``MixedPrecision(param_dtype, reduce_dtype)`` gathers the parameters in ``param_dtype``
and reduces gradients in ``reduce_dtype``; the shards and their gradients stay in full
precision.  ``state_dict()`` gives the full, unflattened state dict under the original
names (``FULL_STATE_DICT``, torch's default; ``rank0_only`` leaves the other ranks an
empty one); ``load_state_dict`` shards what it is given; ``clip_grad_norm_`` takes the
norm over all ranks' shards; ``summon_full_params`` gathers the parameters for use
outside forward; ``no_sync`` accumulates unsharded gradients until the next synchronised
backward.  Refused, naming the call: ``use_orig_params=True``, CPU offload,
hybrid sharding, sharded and local state dicts, the optimizer state-dict
helpers.
"""

from __future__ import annotations

import functools
import math
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum, auto
from typing import Any

from kernbench.distributed.scheduler import rank_local
from kernbench.errors import DistributedError, unsupported_name
from kernbench.torch.autograd import Function, is_grad_enabled, no_grad
from kernbench.torch.autograd.graph import saved_tensors_hooks
from kernbench.torch.distributed.collectives import (
    all_gather_into_tensor,
    all_reduce,
    broadcast,
    reduce_scatter_tensor,
)
from kernbench.torch.distributed.constants import ReduceOp
from kernbench.torch.distributed.fsdp import wrap
from kernbench.torch.distributed.fsdp.overlap import UnitSchedule
from kernbench.torch.distributed.groups import get_rank, get_world_size, is_initialized
from kernbench.torch.factories import cat, empty, zeros
from kernbench.torch.nn.module import Module, persistent_buffers
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = [
    "BackwardPrefetch",
    "CPUOffload",
    "FullStateDictConfig",
    "FullyShardedDataParallel",
    "MixedPrecision",
    "ShardedParameter",
    "ShardingStrategy",
    "StateDictType",
    "wrap",
]

_WRAPPED = "_fsdp_wrapped_module"


class ShardingStrategy(Enum):
    FULL_SHARD = auto()
    SHARD_GRAD_OP = auto()
    NO_SHARD = auto()
    HYBRID_SHARD = auto()
    _HYBRID_SHARD_ZERO2 = auto()


class BackwardPrefetch(Enum):
    BACKWARD_PRE = auto()
    BACKWARD_POST = auto()


class StateDictType(Enum):
    FULL_STATE_DICT = auto()
    LOCAL_STATE_DICT = auto()
    SHARDED_STATE_DICT = auto()


@dataclass
class CPUOffload:
    offload_params: bool = False


@dataclass
class MixedPrecision:
    param_dtype: Any = None
    reduce_dtype: Any = None
    buffer_dtype: Any = None
    keep_low_precision_grads: bool = False
    cast_forward_inputs: bool = False
    cast_root_forward_inputs: bool = True


@dataclass
class FullStateDictConfig:
    offload_to_cpu: bool = False
    rank0_only: bool = False


class _ParamRef:
    """A tensor a node saved that is a view of a unit's gathered parameters: where it
    was, so the backward can view the parameters gathered again."""

    __slots__ = ("handle", "offset", "shape", "stride")

    def __init__(self, handle: _FlatHandle, t: Tensor) -> None:
        self.handle = handle
        self.shape = tuple(t.shape)
        self.stride = t.stride()
        self.offset = t.storage_offset()


class ShardedParameter:
    """What a module inside an FSDP unit holds for a parameter outside the unit's forward
    (torch's is a view of freed storage): using it raises, saying what to do."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise DistributedError(
            f"parameter {self._name} belongs to an FSDP unit and is sharded outside the "
            "unit's forward: read it inside FullyShardedDataParallel.summon_full_params(model)"
            "; activation checkpointing inside a FULL_SHARD unit is not supported here (its "
            "recomputation runs after the reshard): checkpoint whole units, or use "
            "ShardingStrategy.SHARD_GRAD_OP"
        )

    def __repr__(self) -> str:
        return f"<sharded FSDP parameter {self._name}>"


class _FlatHandle:
    """One unit's flat parameter: where its pieces were, its shard, and the gathered
    whole while it lives (torch's FlatParamHandle)."""

    def __init__(
        self,
        places: list[tuple[Module, str, int]],
        unique: list[Parameter],
        owner_names: dict[int, list[str]],
        strategy: ShardingStrategy,
        mixed_precision: MixedPrecision | None,
        process_group: Any,
    ) -> None:
        self.places = places
        self.owner_names = owner_names  # id(module) -> its parameter names, in order
        self.strategy = strategy
        self.mixed_precision = mixed_precision
        self.process_group = process_group
        no_shard = strategy is ShardingStrategy.NO_SHARD
        self.world = 1 if no_shard else get_world_size(process_group)
        self.rank = 0 if no_shard else get_rank(process_group)
        self.shapes = [tuple(p.shape) for p in unique]
        self.numels = [p.numel() for p in unique]
        self.total = sum(self.numels)
        self.padded = -(-self.total // self.world) * self.world if self.total else 0
        self.chunk = self.padded // self.world
        self.full: Tensor | None = None
        # Overlap (overlap.py): the all-gather on its way into ``full`` (its Work and the
        # shard it reads), whether a prefetch issued it, and the unit's place in a backward
        self.gathering: tuple[Any, Tensor] | None = None
        self.prefetched = False
        self.needs_backward_unshard = False  # resharded after a recorded forward
        self.ran_pre_backward = False
        self.schedule: UnitSchedule | None = None
        self.backward_prefetch: BackwardPrefetch | None = BackwardPrefetch.BACKWARD_PRE
        self.forward_prefetch = False
        self.config = (StateDictType.FULL_STATE_DICT, FullStateDictConfig())
        self.sync = True  # False inside no_sync: gradients accumulate unsharded
        self.pending: Tensor | None = None
        self.flat_param: Parameter | None = None
        if not unique:
            return
        dtypes = {p.dtype for p in unique}
        if len(dtypes) > 1:
            raise DistributedError(
                f"FullyShardedDataParallel: a unit's parameters must share one dtype to be "
                f"flattened, got {sorted(d.name for d in dtypes)}"
            )
        with no_grad():
            parts = [p.detach().reshape(-1) for p in unique]
            if self.padded > self.total:
                parts.append(zeros(self.padded - self.total, dtype=unique[0].dtype))
            shard = self.chunk_of(cat(parts)).clone()
        for owner, name, _ in places:
            owner.__delattr__(name)
        self.release()
        self.flat_param = Parameter(shard, any(p.requires_grad for p in unique))
        _FLATTENED[id(self.flat_param)] = self.flat_param

    def chunk_of(self, flat: Tensor) -> Tensor:
        return flat[self.rank * self.chunk : (self.rank + 1) * self.chunk]

    def _in_param_dtype(self, shard: Tensor) -> Tensor:
        mp = self.mixed_precision
        if mp is not None and mp.param_dtype is not None and shard.dtype is not mp.param_dtype:
            return shard.to(mp.param_dtype)
        return shard

    def gather(self, shard: Tensor) -> Tensor:
        """The flat parameters of every rank (``param_dtype`` when mixed precision), gathered
        now (blocking)."""
        shard = self._in_param_dtype(shard)
        if self.world == 1:
            full = shard  # nothing to gather: the views are of the flat parameter
        else:
            full = empty(self.padded, dtype=shard.dtype)
            all_gather_into_tensor(full, shard, group=self.process_group)
        self.full = full
        return full

    def unshard(self, schedule: UnitSchedule | None) -> None:
        """Start gathering the parameters into ``full`` unless they are gathered or on their
        way: the all-gather runs beside what the rank does next, until
        :meth:`wait_unsharded` (memory for them is taken now)."""
        if self.full is not None or self.flat_param is None:
            return
        with no_grad():
            shard = self.flat_param.detach()
            if self.world == 1:  # nothing to gather
                self.gather(shard)
                return
            shard = self._in_param_dtype(shard)
            full = empty(self.padded, dtype=shard.dtype)
            if schedule is not None:
                schedule.before_gather()
            work = all_gather_into_tensor(full, shard, group=self.process_group, async_op=True)
            if schedule is not None:
                schedule.gathered(work)
        self.full, self.gathering = full, (work, shard)

    def wait_unsharded(self) -> Tensor:
        """The gathered parameters, once the all-gather bringing them is done."""
        if self.gathering is not None:
            self.gathering[0].wait()
            self.gathering = None
        self.prefetched = False
        return self.full

    def views(self, full: Tensor) -> list[Tensor]:
        """The unit's parameters as views of the gathered flat tensor."""
        out, offset = [], 0
        for shape, n in zip(self.shapes, self.numels, strict=True):
            out.append(full[offset : offset + n].view(shape))
            offset += n
        return out

    def gathered_views(self) -> list[Tensor]:
        """The parameters gathered now, with recording off."""
        with no_grad():
            return self.views(self.gather(self.flat_param.detach()))

    def full_for_backward(self) -> Tensor:
        """The gathered parameters the backward needs: gathered again after a reshard."""
        if self.full is None:
            self.unshard(self.schedule)
        return self.wait_unsharded()

    def reduce_gradients(self, grads: tuple[Tensor, ...]) -> Tensor | None:
        """The views' gradients joined, averaged over the ranks, this rank's chunk; the
        gathered parameters are freed first (and, with ``BACKWARD_POST``, the next unit's
        all-gather issued).  In a scheduled backward the reduction is started (async) and
        the schedule accumulates it into ``.grad`` at the end of the backward (None is
        returned).  Inside ``no_sync`` the joined gradient is kept, unsharded, and added to
        the next synchronised one (torch's accumulation)."""
        schedule = self.schedule
        if schedule is not None:
            schedule.begin_backward()
        self.needs_backward_unshard = False
        parts = [g.reshape(-1) for g in grads]
        if self.padded > self.total:
            parts.append(zeros(self.padded - self.total, dtype=parts[0].dtype))
        flat = cat(parts)
        if self.pending is not None:
            flat = flat + self.pending.to(flat.dtype)
            self.pending = None
        if not self.sync:
            self.pending = flat
            self.release()
            return None
        self.release()  # reshard before the reduction, as torch's post-backward hook
        if schedule is not None and self.backward_prefetch is BackwardPrefetch.BACKWARD_POST:
            schedule.prefetch_backward(self)
        mp = self.mixed_precision
        if mp is not None and mp.reduce_dtype is not None and flat.dtype is not mp.reduce_dtype:
            flat = flat.to(mp.reduce_dtype)
        flat.div_(get_world_size(self.process_group))
        group, overlap = self.process_group, schedule is not None
        if self.strategy is ShardingStrategy.NO_SHARD:
            work = all_reduce(flat, ReduceOp.SUM, group=group, async_op=overlap)
            out = flat
        else:
            out = empty(self.chunk, dtype=flat.dtype)
            work = reduce_scatter_tensor(out, flat, ReduceOp.SUM, group=group, async_op=overlap)
        if schedule is not None:
            schedule.reduce(self, out, flat, work)
            return None
        keep_low = mp is not None and mp.keep_low_precision_grads
        if out.dtype is not self.flat_param.dtype and not keep_low:
            out = out.to(self.flat_param.dtype)
        return out

    def set_views(self, views: list[Tensor]) -> None:
        for owner, name, i in self.places:
            object.__setattr__(owner, name, views[i])

    def release(self) -> None:
        """Drop the gathered parameters; the modules hold a marker for each (reading it
        outside the unit's forward raises, saying what to do)."""
        if self.gathering is not None:  # an all-gather writes into them until it is done
            self.gathering[0].wait()
            self.gathering = None
        for owner, name, _ in self.places:
            owner.__dict__[name] = ShardedParameter(f"{type(owner).__name__}.{name}")
        self.full = None
        self.prefetched = False

    def load_full(self, values: list[Tensor]) -> None:
        """Set the shard from the unit's full parameters (one tensor per parameter)."""
        parts = [v.to(self.flat_param.dtype).reshape(-1) for v in values]
        if self.padded > self.total:
            parts.append(zeros(self.padded - self.total, dtype=self.flat_param.dtype))
        with no_grad():
            self.flat_param.copy_(self.chunk_of(cat(parts)))


# The flat parameters by id (an enclosing unit leaves them be); weak, so an id reused
# by a later tensor is not mistaken for one.
_FLATTENED: weakref.WeakValueDictionary[int, Parameter] = weakref.WeakValueDictionary()


def _is_flat(p: Any) -> bool:
    return _FLATTENED.get(id(p)) is p


_HANDLES: weakref.WeakKeyDictionary[Module, _FlatHandle] = weakref.WeakKeyDictionary()


def _handles(module: Module) -> list[_FlatHandle]:
    """The flat-parameter handles of the FSDP units in ``module`` (itself included)."""
    return [_HANDLES[m] for m in module.modules() if m in _HANDLES]


class _Unshard(Function):
    """The shard in, the unit's parameters (views of the gathered flat tensor) out; the
    backward joins their gradients and reduce-scatters them into the shard's."""

    @staticmethod
    def forward(ctx: Any, shard: Tensor, handle: _FlatHandle) -> tuple[Tensor, ...]:
        ctx.handle = handle
        if handle.full is None:
            handle.unshard(None)
        return tuple(handle.views(handle.wait_unsharded()))

    @staticmethod
    def backward(ctx: Any, *grads: Tensor) -> tuple[Any, ...]:
        return ctx.handle.reduce_gradients(grads), None


class FullyShardedDataParallel(Module):
    """``FullyShardedDataParallel(module, process_group=None, sharding_strategy=None, ...)``
    with torch's arguments (see the module's text)."""

    def __init__(
        self,
        module: Module,
        process_group: Any = None,
        sharding_strategy: ShardingStrategy | None = None,
        cpu_offload: CPUOffload | None = None,
        auto_wrap_policy: Callable[..., bool] | None = None,
        backward_prefetch: BackwardPrefetch | None = BackwardPrefetch.BACKWARD_PRE,
        mixed_precision: MixedPrecision | None = None,
        ignored_modules: Any = None,
        param_init_fn: Any = None,
        device_id: Any = None,
        sync_module_states: bool = False,
        forward_prefetch: bool = False,
        limit_all_gathers: bool = True,
        use_orig_params: bool = False,
        ignored_states: Any = None,
        device_mesh: Any = None,
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise DistributedError(
                f"FullyShardedDataParallel: module must be a torch.nn.Module, got "
                f"{type(module).__name__}"
            )
        if not is_initialized():
            raise DistributedError(
                "Default process group has not been initialized, please make sure to call "
                "init_process_group."
            )
        strategy = sharding_strategy or ShardingStrategy.FULL_SHARD
        refused = {
            "use_orig_params=True": use_orig_params,
            "cpu_offload=CPUOffload(offload_params=True)": bool(
                cpu_offload and cpu_offload.offload_params
            ),
            f"sharding_strategy={strategy}": "HYBRID" in strategy.name,
            "device_mesh": device_mesh is not None,
            "ignored_modules/ignored_states": bool(ignored_modules or ignored_states),
            "param_init_fn": param_init_fn is not None,
        }
        for what, given in refused.items():
            if given:
                raise DistributedError(
                    f"FullyShardedDataParallel({what}) is not supported by kernbench.torch's "
                    "FSDP: it shards with use_orig_params=False over one process group, "
                    "parameters on the device (FULL_SHARD, SHARD_GRAD_OP or NO_SHARD)"
                )
        self.process_group = process_group
        self.sharding_strategy = strategy
        self.mixed_precision = mixed_precision
        self.backward_prefetch = backward_prefetch
        self.forward_prefetch = forward_prefetch
        self.limit_all_gathers = limit_all_gathers
        kwargs = {
            "process_group": process_group,
            "sharding_strategy": strategy,
            "mixed_precision": mixed_precision,
            "sync_module_states": sync_module_states,
            "backward_prefetch": backward_prefetch,
            "forward_prefetch": forward_prefetch,
            "limit_all_gathers": limit_all_gathers,
        }
        if auto_wrap_policy is not None:
            _wrap_children(module, auto_wrap_policy, kwargs)
        if sync_module_states:
            with no_grad():
                for t in [*module.parameters(), *module.buffers()]:
                    if not _is_flat(t):
                        broadcast(t, group=process_group, group_src=0)
        self._fsdp_wrapped_module = module
        places, unique, names = _owned_parameters(module)
        handle = _FlatHandle(places, unique, names, strategy, mixed_precision, process_group)
        handle.backward_prefetch = backward_prefetch
        handle.forward_prefetch = forward_prefetch
        _HANDLES[self] = handle
        self._flat_param = handle.flat_param

    # -- forward --------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if not _forwarding().active:  # the root unit of this forward
            args, kwargs = self._cast_inputs(args, kwargs)
            own = _HANDLES[self].schedule
            # (a checkpointed unit recomputed in its backward has no schedule of its own)
            recomputing = own is not None and own.in_backward and not own.backward_abandoned()
            schedule = None if recomputing else _schedule_of(self)
            with _RootHooks(_handles(self), schedule):
                return self._unit_forward(args, kwargs, root=True)
        return self._unit_forward(args, kwargs)

    def _unit_forward(
        self, args: tuple[Any, ...], kwargs: dict[str, Any], root: bool = False
    ) -> Any:
        handle = _HANDLES[self]
        if handle.flat_param is None:
            return self._fsdp_wrapped_module(*args, **kwargs)
        schedule = _forwarding().schedule  # None in a recomputation inside the backward
        if schedule is not None:
            handle.schedule = schedule
            schedule.record_pre_forward(handle)
        recording = is_grad_enabled() and handle.flat_param.requires_grad
        # torch's pre-forward: this unit's all-gather, the next one's (forward_prefetch),
        # then the wait for this one
        handle.unshard(schedule)
        if schedule is not None and handle.forward_prefetch:
            schedule.prefetch_forward(handle)
        if recording:
            views = list(_Unshard.apply(handle.flat_param, handle))
        else:
            with no_grad():
                views = handle.views(handle.wait_unsharded())
        handle.set_views(views)
        # FULL_SHARD reshards after forward, except the root unit, whose parameters the
        # backward needs first (torch's FSDP keeps them too)
        reshard = not recording or (handle.strategy is ShardingStrategy.FULL_SHARD and not root)
        try:
            out = self._fsdp_wrapped_module(*args, **kwargs)
            if recording and schedule is not None:
                handle.ran_pre_backward = False
                for t in _tensors_in(out):
                    if t.requires_grad:
                        t.register_hook(functools.partial(_pre_backward, handle))
            return out
        finally:
            if schedule is not None:
                schedule.post_forward.append(handle)
                handle.needs_backward_unshard = recording and reshard
            if reshard:
                handle.release()

    def _cast_inputs(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any]:
        mp = self.mixed_precision
        if mp is None or mp.param_dtype is None or not mp.cast_root_forward_inputs:
            return args, kwargs
        dtype = mp.param_dtype

        def cast(v: Any) -> Any:
            if isinstance(v, Tensor) and v.dtype.is_floating_point and v.dtype is not dtype:
                return v.to(dtype)
            if isinstance(v, tuple | list):
                return type(v)(cast(x) for x in v)
            return v

        return cast(args), {k: cast(v) for k, v in kwargs.items()}

    # -- what torch's FSDP offers besides ---------------------------------------------------
    @property
    def module(self) -> Module:
        """The wrapped module."""
        return self._fsdp_wrapped_module

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            wrapped = self.__dict__.get("_modules", {}).get(_WRAPPED)
            if wrapped is None:
                raise
            return getattr(wrapped, name)

    def clip_grad_norm_(self, max_norm: float, norm_type: float = 2.0) -> Tensor:
        """Clip the gradients of every rank's shards by their total norm; returns it."""
        norm_type = float(norm_type)
        grads = [h.flat_param.grad for h in _handles(self) if h.flat_param is not None]
        grads = [g for g in grads if g is not None]
        sharded = self.sharding_strategy is not ShardingStrategy.NO_SHARD
        with no_grad():
            if not grads:
                return zeros(())
            if math.isinf(norm_type):
                total = cat([g.abs().max().reshape(1) for g in grads]).max().float()
                if sharded:
                    all_reduce(total, ReduceOp.MAX, group=self.process_group)
            else:
                total = sum(g.float().abs().pow(norm_type).sum() for g in grads)
                if sharded:
                    all_reduce(total, ReduceOp.SUM, group=self.process_group)
                total = total.pow(1.0 / norm_type)
            coef = (float(max_norm) / (total + 1e-6)).clamp(max=1.0)
            for g in grads:
                g.mul_(coef.to(g.dtype))
        return total

    @contextmanager
    def no_sync(self) -> Iterator[None]:
        """Backwards inside it keep each unit's gradient unsharded on the rank (no
        reduce-scatter; the memory of a full gradient per unit); the first backward after
        it adds them in and reduces, as torch's.  Call it on the root unit."""
        handles = _handles(self)
        for h in handles:
            h.sync = False
        try:
            yield
        finally:
            for h in handles:
                h.sync = True

    @staticmethod
    @contextmanager
    def summon_full_params(
        module: Module,
        recurse: bool = True,
        writeback: bool = True,
        rank0_only: bool = False,
        offload_to_cpu: bool = False,
        with_grads: bool = False,
    ) -> Iterator[None]:
        """Inside it, the modules' parameters are the full, gathered ones (changes to them
        are written back to the shards when ``writeback``)."""
        handles = [h for h in _handles(module) if h.flat_param is not None]
        if not recurse:
            handles = handles[:1]
        gathered = []
        for h in handles:
            views = h.gathered_views()
            h.set_views(views)
            gathered.append((h, views))
        try:
            yield
        finally:
            for h, views in gathered:
                if writeback:
                    h.load_full(views)
                h.release()

    @staticmethod
    @contextmanager
    def state_dict_type(
        module: Module,
        state_dict_type: StateDictType,
        state_dict_config: FullStateDictConfig | None = None,
        optim_state_dict_config: Any = None,
    ) -> Iterator[None]:
        """Set what ``state_dict()`` gives inside it: ``FULL_STATE_DICT`` only here."""
        if state_dict_type is not StateDictType.FULL_STATE_DICT:
            raise DistributedError(
                f"FullyShardedDataParallel.state_dict_type({state_dict_type}): only "
                "StateDictType.FULL_STATE_DICT is supported by kernbench.torch's FSDP"
            )
        handles = _handles(module)
        before = [h.config for h in handles]
        for h in handles:
            h.config = (state_dict_type, state_dict_config or FullStateDictConfig())
        try:
            yield
        finally:
            for h, b in zip(handles, before, strict=True):
                h.config = b

    @staticmethod
    def optim_state_dict(*args: Any, **kwargs: Any) -> Any:
        raise DistributedError(
            "FullyShardedDataParallel.optim_state_dict is not supported by kernbench.torch's "
            "FSDP: save optimizer.state_dict() per rank (it holds that rank's shards' state)"
        )

    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict[str, Tensor]:
        """The full state dict under the original names (the parameters gathered and
        copied), as torch's ``FULL_STATE_DICT``; empty on ranks other than 0 with
        ``rank0_only``."""
        out = OrderedDict() if destination is None else destination
        values: dict[tuple[int, str], Tensor] = {}
        names: dict[int, list[str]] = {}
        for h in _handles(self):
            if h.flat_param is None:
                continue
            views = h.gathered_views()
            with no_grad():
                for owner, name, i in h.places:
                    values[id(owner), name] = views[i].clone()
            names.update(h.owner_names)
            h.release()
        if _HANDLES[self].config[1].rank0_only and get_rank(self.process_group) != 0:
            return out
        for path, mod in _original_modules(self.module, prefix):
            for name in names.get(id(mod), ()):
                out[path + name] = values[id(mod), name]
            for name, buf in persistent_buffers(mod):
                out[path + name] = buf if keep_vars else buf.detach()
        return out

    def load_state_dict(self, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        """Shard a full state dict (``state_dict()``'s names) into the flat parameters and
        copy the buffers; torch's errors for missing and unexpected keys."""
        expected = list(self.state_dict().keys())
        missing = [k for k in expected if k not in state_dict]
        unexpected = [k for k in state_dict if k not in expected]
        if strict and (missing or unexpected):
            parts = []
            if unexpected:
                listed = ", ".join(f'"{k}"' for k in unexpected)
                parts.append(f"Unexpected key(s) in state_dict: {listed}. ")
            if missing:
                listed = ", ".join(f'"{k}"' for k in missing)
                parts.append(f"Missing key(s) in state_dict: {listed}. ")
            raise DistributedError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(parts)
            )
        paths = {id(mod): path for path, mod in _original_modules(self.module, "")}
        for h in _handles(self):
            if h.flat_param is None:
                continue
            current = h.gathered_views()
            h.release()
            values = list(current)
            for owner, name, i in h.places:
                key = paths[id(owner)] + name
                if key not in state_dict:
                    continue
                value = state_dict[key]
                if tuple(value.shape) != h.shapes[i]:
                    raise DistributedError(
                        f"size mismatch for {key}: copying a param with shape "
                        f"{tuple(value.shape)} from checkpoint, the shape in current model "
                        f"is {h.shapes[i]}."
                    )
                values[i] = value
            h.load_full(values)
        with no_grad():
            for path, mod in _original_modules(self.module, ""):
                for name, buf in persistent_buffers(mod):
                    if path + name in state_dict:
                        buf.copy_(state_dict[path + name])
        return None


class _Forwarding:
    """Whether the calling rank is inside a root unit's forward, and its schedule."""

    def __init__(self) -> None:
        self.active = False
        self.schedule: UnitSchedule | None = None


_OUTSIDE = _Forwarding()


def _forwarding() -> _Forwarding:
    return rank_local("torch.distributed.fsdp.forward", _Forwarding, _OUTSIDE)


class _RootHooks:
    """The root unit's forward: the saved-tensor hooks that keep views of gathered
    parameters as references (so a reshard frees them) and view them again, gathered
    anew, when the backward unpacks them."""

    def __init__(self, handles: list[_FlatHandle], schedule: UnitSchedule | None) -> None:
        self.handles = handles
        self.schedule = schedule
        self.previous: UnitSchedule | None = None
        self.hooks = saved_tensors_hooks(self._pack, _unpack)

    def __enter__(self) -> None:
        state = _forwarding()
        self.previous = state.schedule
        state.active, state.schedule = True, self.schedule
        if self.schedule is not None:
            self.schedule.begin_forward()
        self.hooks.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.hooks.__exit__(*exc)
        state = _forwarding()
        state.active, state.schedule = False, self.previous
        if self.schedule is not None:
            self.schedule.end_forward()

    def _pack(self, t: Any) -> Any:
        storage = getattr(t, "storage_device_tensor", None)
        for h in self.handles:
            if h.full is not None and h.full.storage_device_tensor is storage:
                if h.strategy is ShardingStrategy.FULL_SHARD:
                    return _ParamRef(h, t)
        return t


_SCHEDULES: weakref.WeakKeyDictionary[Module, UnitSchedule] = weakref.WeakKeyDictionary()


def _schedule_of(root: FullyShardedDataParallel) -> UnitSchedule:
    """The overlap schedule of the units under ``root`` (made at its first forward)."""
    schedule = _SCHEDULES.get(root)
    if schedule is None:
        schedule = _SCHEDULES[root] = UnitSchedule(_handles(root), root.limit_all_gathers)
    return schedule


def _pre_backward(handle: _FlatHandle, grad: Tensor) -> None:
    """torch's pre-backward hook (on the unit's forward outputs), once per backward: this
    unit's all-gather if it was resharded, then, with ``BACKWARD_PRE``, the next one's."""
    if handle.ran_pre_backward or handle.schedule is None:
        return
    handle.ran_pre_backward = True
    schedule = handle.schedule
    schedule.begin_backward()
    if handle.needs_backward_unshard:
        handle.unshard(schedule)
    if handle.backward_prefetch is BackwardPrefetch.BACKWARD_PRE:
        schedule.prefetch_backward(handle)


def _tensors_in(value: Any) -> Iterator[Tensor]:
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, tuple | list):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)


def _unpack(packed: Any) -> Any:
    if isinstance(packed, _ParamRef):
        full = packed.handle.full_for_backward()
        return full.as_strided(packed.shape, packed.stride, packed.offset)
    return packed


def _owned_parameters(
    module: Module,
) -> tuple[list[tuple[Module, str, int]], list[Parameter], dict[int, list[str]]]:
    """The parameters a unit over ``module`` owns (not in nested units): where each
    occurs ``(module, name, index)``, the distinct ones, and each module's names."""
    places: list[tuple[Module, str, int]] = []
    unique: list[Parameter] = []
    index: dict[int, int] = {}
    names: dict[int, list[str]] = {}
    for owner in _modules_outside_units(module):
        for name, p in owner.named_parameters(recurse=False, remove_duplicate=False):
            if id(p) not in index:
                index[id(p)] = len(unique)
                unique.append(p)
            places.append((owner, name, index[id(p)]))
            names.setdefault(id(owner), []).append(name)
    return places, unique, names


def _modules_outside_units(module: Module) -> Iterator[Module]:
    """``module`` and its submodules, not descending into nested FSDP units."""
    yield module
    for child in module.children():
        if isinstance(child, FullyShardedDataParallel):
            continue
        yield from _modules_outside_units(child)


def _original_modules(module: Module, prefix: str) -> Iterator[tuple[str, Module]]:
    """``(dotted path + '.', module)`` of the original modules, the FSDP wrappers left out
    of both the walk and the names."""
    if isinstance(module, FullyShardedDataParallel):
        yield from _original_modules(module.module, prefix)
        return
    yield prefix, module
    for name, child in module.named_children():
        if child is not None:
            yield from _original_modules(child, f"{prefix}{name}.")


def _wrap_children(module: Module, policy: Callable[..., bool], kwargs: dict[str, Any]) -> int:
    """torch's recursive wrap below the root: the children the policy picks become FSDP
    units (innermost first); returns the numel wrapped."""
    wrapped = 0
    for name, child in list(module.named_children()):
        if isinstance(child, FullyShardedDataParallel):
            continue
        numel = _unwrapped_numel(child)
        if policy(module=child, recurse=True, nonwrapped_numel=numel):
            inner = _wrap_children(child, policy, kwargs)
            if policy(module=child, recurse=False, nonwrapped_numel=numel - inner):
                setattr(module, name, FullyShardedDataParallel(child, **kwargs))
                wrapped += numel
            else:
                wrapped += inner
        elif policy(module=child, recurse=False, nonwrapped_numel=numel):
            setattr(module, name, FullyShardedDataParallel(child, **kwargs))
            wrapped += numel
    return wrapped


def _unwrapped_numel(module: Module) -> int:
    return sum(p.numel() for p in module.parameters() if not getattr(p, "_fsdp_flattened", False))


_FSDP2 = (
    "FSDP2 (fully_shard, FSDPModule, its policies) is not here: wrap the model in "
    "FullyShardedDataParallel(model, auto_wrap_policy=..., mixed_precision=MixedPrecision(...)), "
    "which shards, all-gathers and reduce-scatters per unit the same way"
)
_HINTS = dict.fromkeys(
    (
        "fully_shard",
        "FSDPModule",
        "MixedPrecisionPolicy",
        "OffloadPolicy",
        "CPUOffloadPolicy",
        "register_fsdp_forward_method",
        "UnshardHandle",
    ),
    _FSDP2,
)


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.distributed.fsdp", "fsdp", name, __all__, _HINTS)
