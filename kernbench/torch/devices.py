"""Devices for the torch-like API: ``torch.device``, ``torch.ahbm`` (alias ``torch.cuda``),
``torch.accelerator`` and timing events on the simulated clock.

A device is one index at the topology's device level (a SIP, a cube or a PE,
as ``system.device_level`` says); ``set_device`` binds the calling rank to it
and new tensors are placed there.  The accelerator type is ``"ahbm"``;
``"cuda"`` is accepted as another spelling of it so CUDA scripts run unchanged,
and the two compare equal (``device("cuda:1") == device("ahbm", 1)``).

Every operation finishes before it returns (the caller waits on the simulated
machine), so ``synchronize`` has nothing to wait for and is a no-op, and an
:class:`Event` reads the clock when it is recorded.
"""

from __future__ import annotations

from typing import Any

from kernbench.distributed.world import synchronize_rank
from kernbench.errors import PlacementError, SimulationError, unsupported_name
from kernbench.runtime.current import current_context
from kernbench.torch import random as torch_random
from kernbench.torch.device_properties import DeviceProperties, device_properties
from kernbench.torch.missing import CUDA_HINTS, importable_namespace

__all__ = ["Event", "accelerator", "ahbm", "device"]

ACCELERATOR = "ahbm"
_TYPES = {"ahbm": ACCELERATOR, "cuda": ACCELERATOR, "cpu": "cpu"}
PS_PER_MS = 10**9


class device:  # noqa: N801 - torch spells it in lower case
    """Where a tensor lives: ``device("ahbm", 1)``, ``device("cuda:1")``, ``device("cpu")``."""

    __slots__ = ("type", "index")

    def __init__(self, type: Any, index: int | None = None) -> None:  # noqa: A002 - torch's name
        if isinstance(type, device):
            type, index = type.type, type.index if index is None else index
        elif isinstance(type, int) and not isinstance(type, bool):
            type, index = ACCELERATOR, type
        if not isinstance(type, str):
            raise PlacementError(f"device type must be a string like 'ahbm:0' (got {type!r})")
        kind, sep, idx = type.partition(":")
        if sep:
            if index is not None:
                raise PlacementError(f"device {type!r} already names an index; got index={index}")
            if not idx.isdigit():
                raise PlacementError(f"device {type!r}: the index after ':' must be an int")
            index = int(idx)
        if kind not in _TYPES:
            raise PlacementError(
                f"unknown device type {kind!r}; valid: {', '.join(sorted(_TYPES))}"
            )
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise PlacementError(f"device index must be an int (got {index!r})")
        if index is not None and index < 0:
            raise PlacementError(f"device index must be non-negative (got {index})")
        self.type = kind
        self.index = index

    @property
    def is_accelerator(self) -> bool:
        return _TYPES[self.type] == ACCELERATOR

    def _key(self) -> tuple[str, int | None]:
        return _TYPES[self.type], self.index

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except PlacementError:
                return False
        return isinstance(other, device) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{index})"


def device_index(dev: Any) -> int | None:
    """The accelerator index ``dev`` names; ``None`` for ``None`` and ``"cpu"``.

    An accelerator without an index (``"cuda"``) means the current device.
    Every tensor lives on the simulated machine, so callers read ``None`` as
    "where tensors go by default" or "where the tensor already is".
    """
    if dev is None:
        return None
    if isinstance(dev, int) and not isinstance(dev, bool):
        return dev
    d = device(dev)
    if not d.is_accelerator:
        return None
    return _current_index() if d.index is None else d.index


def _existing_index(dev: Any) -> int:
    """The index of device ``dev`` (the current device for ``None``), which must exist."""
    index = device_index(dev)
    if index is None:
        return _current_index()
    current_context().check_device(index)
    return index


def _current_index() -> int:
    current = current_context().current_device()
    return 0 if current is None else current


class Event:
    """A point on the simulated clock, recorded with :meth:`record`.

    ``elapsed_time(end)`` is the simulated time between two recorded events,
    in milliseconds, like ``torch.cuda.Event``.
    """

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self._time_ps: int | None = None

    @property
    def time_ps(self) -> int | None:
        """The simulated time of the last :meth:`record`, in ps (None before)."""
        return self._time_ps

    def record(self, stream: Any = None) -> None:
        self._time_ps = current_context().now

    def wait(self, stream: Any = None) -> None:
        """No-op: work is complete when its call returns."""

    def query(self) -> bool:
        """True: work recorded before this event has always finished."""
        return True

    def synchronize(self) -> None:
        """No-op: work is complete when its call returns."""

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated milliseconds from this event to ``end_event``."""
        if not isinstance(end_event, Event):
            raise SimulationError(
                f"Event.elapsed_time: end_event must be a torch.cuda.Event, got "
                f"{type(end_event).__name__}"
            )
        for event, which in ((self, "start"), (end_event, "end")):
            if not event.enable_timing:
                raise SimulationError(
                    f"Event.elapsed_time: the {which} event was created without enable_timing=True"
                )
            if event.time_ps is None:
                raise SimulationError(
                    f"Event.elapsed_time: the {which} event was never recorded; call record()"
                )
        return (end_event.time_ps - self._time_ps) / PS_PER_MS

    def __repr__(self) -> str:
        state = "unrecorded" if self._time_ps is None else f"at {self._time_ps} ps"
        return f"Event({state})"


class _Stream:
    """The one stream of a device: work runs in call order and is done on return."""

    def __init__(self, index: int) -> None:
        self.device = device(ACCELERATOR, index)

    def synchronize(self) -> None:
        """No-op: work is complete when its call returns."""

    def wait_stream(self, stream: Any) -> None:
        """No-op: there is one stream per device."""

    def wait_event(self, event: Event) -> None:
        """No-op: recorded events have always completed."""

    def record_event(self, event: Event | None = None) -> Event:
        if event is not None and not isinstance(event, Event):
            raise SimulationError(
                f"Stream.record_event: event must be a torch.cuda.Event or None, got "
                f"{type(event).__name__}"
            )
        event = event or Event()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def __repr__(self) -> str:
        return f"Stream(device={self.device})"


class _DeviceContext:
    """``with torch.cuda.device(i):``: device ``i`` is current inside the block, the one
    before it after (``None`` or a negative index: nothing changes), as torch's."""

    def __init__(self, dev: Any) -> None:
        if isinstance(dev, int) and not isinstance(dev, bool) and dev < 0:
            dev = None
        self.idx = device_index(dev)
        if self.idx is not None:
            current_context().check_device(self.idx)
        self.prev_idx: int | None = None

    def __enter__(self) -> None:
        if self.idx is not None:
            ctx = current_context()
            self.prev_idx = ctx.current_device()
            ctx.set_device(self.idx)

    def __exit__(self, *exc: object) -> bool:
        if self.idx is not None:
            ctx = current_context()
            if self.prev_idx is None:
                ctx.unbind_device()
            else:
                ctx.set_device(self.prev_idx)
        return False


@importable_namespace
class _AhbmModule:
    """``torch.ahbm`` (also ``torch.cuda``): device selection, counting, events."""

    Event = Event

    def __getattr__(self, name: str) -> Any:
        raise unsupported_name("torch.cuda", "torch.cuda", name, dir(self), CUDA_HINTS)

    def provide(self, name: str, function: Any) -> None:
        """Register ``torch.cuda.<name>`` from a higher module (the RNG state functions,
        which make tensors this module cannot import)."""
        setattr(self, name, function)

    def is_bf16_supported(self, including_emulation: bool = True) -> bool:
        """True: bfloat16 tensors and matmuls run here."""
        return True

    def set_device(self, device: Any) -> None:
        """Bind the calling rank to ``device`` (an index, ``"ahbm:1"`` or a device)."""
        index = device_index(device)
        if index is None:
            raise PlacementError(f"set_device needs an accelerator index, got {device!r}")
        current_context().set_device(index)

    def current_device(self) -> int:
        """The calling rank's device; 0 when none was set."""
        return _current_index()

    def device(self, device: Any) -> _DeviceContext:
        """``with torch.cuda.device(i):`` makes device ``i`` current for the block."""
        return _DeviceContext(device)

    def device_count(self) -> int:
        return current_context().num_devices

    def is_available(self) -> bool:
        return True

    def is_initialized(self) -> bool:
        return True

    def synchronize(self, device: Any = None) -> None:
        """Wait for the calling rank's async collectives (``async_op=True``) to finish;
        every other operation has finished when its call returns."""
        _existing_index(device)
        synchronize_rank()

    def current_stream(self, device: Any = None) -> _Stream:
        return _Stream(_existing_index(device))

    default_stream = current_stream

    def get_device_name(self, device: Any = None) -> str:
        ctx = current_context()
        level = ctx.topology.system.device_level
        return f"KernBench {ctx.topology.name} {level} {_existing_index(device)}"

    def get_device_properties(self, device: Any = None) -> DeviceProperties:
        """The device in torch's terms; a PE is a multiprocessor
        (:mod:`kernbench.torch.device_properties`)."""
        index = _existing_index(device)
        return device_properties(current_context(), index, self.get_device_name(index))

    def manual_seed(self, seed: int) -> None:
        """Seed the calling rank's generator (device and host share one here)."""
        torch_random.manual_seed(seed)

    manual_seed_all = manual_seed

    def empty_cache(self) -> None:
        """No-op: freed tensors return their memory at once."""

    def __repr__(self) -> str:
        return "<module 'torch.ahbm'>"


@importable_namespace
class _AcceleratorModule:
    """``torch.accelerator``: the device-agnostic spelling of :data:`ahbm`."""

    def __init__(self, backend: _AhbmModule) -> None:
        self._backend = backend

    def set_device_index(self, device: Any) -> None:
        self._backend.set_device(device)

    set_device_idx = set_device_index

    def current_device_index(self) -> int:
        return self._backend.current_device()

    current_device_idx = current_device_index

    def current_accelerator(self, check_available: bool = False) -> device:
        return device(ACCELERATOR)

    def device_count(self) -> int:
        return self._backend.device_count()

    def is_available(self) -> bool:
        return True

    def synchronize(self, device: Any = None) -> None:
        """As ``torch.cuda.synchronize``: the calling rank's async collectives finish."""
        synchronize_rank()

    def __repr__(self) -> str:
        return "<module 'torch.accelerator'>"


ahbm = _AhbmModule()
accelerator = _AcceleratorModule(ahbm)
