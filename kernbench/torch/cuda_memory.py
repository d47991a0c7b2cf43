"""``torch.cuda``'s memory counters (``memory_allocated``, ``max_memory_allocated``,
``memory_stats``, ``mem_get_info``, ...), answered from the simulator's allocator.

As torch's caching allocator counts per process, the counts are the calling
rank's: the bytes of the live tensors it made whose memory lies on the device
asked about (the current device by default).  A device is all the PEs at the
topology's device level (a SIP, a cube or a PE), so a tensor placed by a
``DPPolicy`` across devices counts on each device in part.  Bytes are the
allocator's rounded ones (each shard up to 256 B); ``requested_bytes`` are the
sizes asked for.  A tensor's bytes come back when its last reference goes (or
its ``free()``), as torch frees on the last reference.  There is no caching
allocator: freed memory returns to the machine at once, so "reserved" is
"allocated" (``empty_cache`` has nothing to release) and a segment is an
allocation.  ``mem_get_info`` answers for the device's HBM as the driver does,
every rank's tensors included: ``total`` is the HBM of all the device's PEs,
though a tensor placed without a ``DPPolicy`` lives in its first PE's partition
only.  Asking costs no simulated time.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any

from kernbench.errors import PlacementError
from kernbench.runtime.current import current_context
from kernbench.runtime.memory_stats import DeviceMemoryStats, Stat
from kernbench.torch.devices import ahbm, device, device_index
from kernbench.units import format_size_iec

__all__ = [
    "max_memory_allocated",
    "max_memory_cached",
    "max_memory_reserved",
    "mem_get_info",
    "memory_allocated",
    "memory_cached",
    "memory_reserved",
    "memory_stats",
    "memory_summary",
    "reset_accumulated_memory_stats",
    "reset_max_memory_allocated",
    "reset_max_memory_cached",
    "reset_peak_memory_stats",
]

_METRICS = ("current", "peak", "allocated", "freed")


def _device_index(call: str, dev: Any) -> int:
    """The device index ``dev`` names for ``torch.cuda.<call>`` (None: the current one)."""
    ctx = current_context()
    if dev is None:
        index = ctx.current_device()
        return 0 if index is None else index
    try:
        index = device_index(dev)
        if index is None:
            raise PlacementError(f"expected an accelerator device, but got {device(dev)}")
        ctx.check_device(index)
    except PlacementError as exc:
        raise PlacementError(f"torch.cuda.{call}: {exc}") from None
    return index


def _stats(call: str, dev: Any) -> DeviceMemoryStats:
    return current_context().memory_stats(_device_index(call, dev))


def _flat(name: str, stat: Stat) -> dict[str, int]:
    return {f"{name}.all.{metric}": getattr(stat, metric) for metric in _METRICS}


def memory_stats(device: Any = None) -> OrderedDict[str, int]:
    """torch's flat statistics of the calling rank on ``device``, sorted by key.

    ``allocation``, ``segment`` and ``active`` count the allocations (one per
    shard), ``allocated_bytes``, ``reserved_bytes`` and ``active_bytes`` their
    rounded bytes, ``requested_bytes`` the bytes asked for, each
    ``.all.{current,peak,allocated,freed}`` (there are no large and small
    pools); ``inactive_split*`` are 0, ``num_ooms`` counts the allocations that
    did not fit.
    """
    stats = _stats("memory_stats", device)
    counts, rounded, requested = stats.stats()
    flat: dict[str, int] = {}
    for name in ("allocation", "segment", "active"):
        flat |= _flat(name, counts)
    for name in ("allocated_bytes", "reserved_bytes", "active_bytes"):
        flat |= _flat(name, rounded)
    flat |= _flat("requested_bytes", requested)
    flat |= _flat("inactive_split", Stat()) | _flat("inactive_split_bytes", Stat())
    flat |= {
        "num_alloc_retries": 0,
        "num_ooms": stats.num_ooms,
        "num_device_alloc": counts.allocated,
        "num_device_free": counts.freed,
    }
    return OrderedDict(sorted(flat.items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes of the calling rank's live tensors on ``device`` (rounded to 256 B a shard)."""
    return _stats("memory_allocated", device).allocated_bytes.current


def max_memory_allocated(device: Any = None) -> int:
    """The most :func:`memory_allocated` has been since the start or the last
    :func:`reset_peak_memory_stats`."""
    return _stats("max_memory_allocated", device).allocated_bytes.peak


def memory_reserved(device: Any = None) -> int:
    """:func:`memory_allocated`: there is no caching allocator holding freed memory."""
    return _stats("memory_reserved", device).allocated_bytes.current


def max_memory_reserved(device: Any = None) -> int:
    """:func:`max_memory_allocated`: there is no caching allocator holding freed memory."""
    return _stats("max_memory_reserved", device).allocated_bytes.peak


def memory_cached(device: Any = None) -> int:
    """Deprecated in torch (warns as torch does): :func:`memory_reserved`."""
    warnings.warn(
        "`torch.cuda.memory_cached` has been renamed to `torch.cuda.memory_reserved`",
        FutureWarning,
        stacklevel=2,
    )
    return _stats("memory_cached", device).allocated_bytes.current


def max_memory_cached(device: Any = None) -> int:
    """Deprecated in torch (warns as torch does): :func:`max_memory_reserved`."""
    warnings.warn(
        "`torch.cuda.max_memory_cached` has been renamed to `torch.cuda.max_memory_reserved`",
        FutureWarning,
        stacklevel=2,
    )
    return _stats("max_memory_cached", device).allocated_bytes.peak


def reset_peak_memory_stats(device: Any = None) -> None:
    """Every peak of the calling rank on ``device`` starts again from its current value."""
    _stats("reset_peak_memory_stats", device).reset_peak()


def reset_accumulated_memory_stats(device: Any = None) -> None:
    """The ``allocated`` and ``freed`` totals and ``num_ooms`` start again from zero."""
    _stats("reset_accumulated_memory_stats", device).reset_accumulated()


def _reset_peak_warning(call: str, device: Any) -> None:
    warnings.warn(
        f"torch.cuda.{call} now calls torch.cuda.reset_peak_memory_stats, which resets /all/ "
        "peak memory stats.",
        FutureWarning,
        stacklevel=3,
    )
    _stats(call, device).reset_peak()


def reset_max_memory_allocated(device: Any = None) -> None:
    """:func:`reset_peak_memory_stats`, with torch's warning that it resets every peak."""
    _reset_peak_warning("reset_max_memory_allocated", device)


def reset_max_memory_cached(device: Any = None) -> None:
    """:func:`reset_peak_memory_stats`, with torch's warning that it resets every peak."""
    _reset_peak_warning("reset_max_memory_cached", device)


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """``(free, total)`` bytes of ``device``'s HBM, every rank's tensors counted, as the
    driver answers ``cudaMemGetInfo``.  ``free`` may not fit one tensor: each PE's HBM
    partition is allocated on its own."""
    used, total = current_context().device_memory(_device_index("mem_get_info", device))
    return total - used, total


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    """A table of :func:`memory_stats` for the calling rank on ``device``, as torch prints
    one (``abbreviated`` changes nothing: there are no pools to break down)."""
    index = _device_index("memory_summary", device)
    stats = current_context().memory_stats(index)
    free, total = mem_get_info(index)
    counts, rounded, requested = stats.stats()
    width = 75
    rows = [
        f" KernBench memory summary, device ID {index}".ljust(width),
        "-" * width,
        f" Out of memory: {stats.num_ooms}   HBM free {format_size_iec(free)} of "
        f"{format_size_iec(total)}".ljust(width),
        "=" * width,
        f" {'Metric':<21} | {'Cur Usage':>10} | {'Peak Usage':>10} | {'Tot Alloc':>10} | "
        f"{'Tot Freed':>10} ",
    ]
    for label, stat, sized in (
        ("Allocated memory", rounded, True),
        ("Requested memory", requested, True),
        ("Reserved memory", rounded, True),
        ("Allocations", counts, False),
    ):
        cells = [getattr(stat, metric) for metric in _METRICS]
        shown = [format_size_iec(c) if sized else str(c) for c in cells]
        rows.append("-" * width)
        rows.append(f" {label:<21} | " + " | ".join(f"{s:>10}" for s in shown) + " ")
    rows.append("=" * width)
    return "".join(f"|{row}|\n" for row in ["=" * width, *rows])


for _function in (
    memory_stats,
    memory_allocated,
    max_memory_allocated,
    memory_reserved,
    max_memory_reserved,
    memory_cached,
    max_memory_cached,
    reset_peak_memory_stats,
    reset_accumulated_memory_stats,
    reset_max_memory_allocated,
    reset_max_memory_cached,
    mem_get_info,
    memory_summary,
):
    ahbm.provide(_function.__name__, _function)
