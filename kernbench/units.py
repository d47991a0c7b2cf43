"""The one place where quantities with units are parsed and formatted.

Internal units: time is an integer number of picoseconds, size an integer
number of bytes, bandwidth an integer number of bytes per second, frequency an
integer number of hertz.  Decimal prefixes are powers of ten (1 GB = 10^9 B),
binary prefixes powers of two (1 GiB = 2^30 B).  Parsing is exact (decimal
arithmetic); a value that is not a whole number of the internal unit is an
error rather than a silent rounding.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from kernbench.errors import UnitError

__all__ = [
    "PS_PER_S",
    "parse_time",
    "parse_size",
    "parse_bandwidth",
    "parse_frequency",
    "transfer_ps",
    "format_time",
    "format_size",
    "format_bandwidth",
]

PS_PER_S = 10**12

_TIME_UNITS = {"ps": 1, "ns": 10**3, "us": 10**6, "µs": 10**6, "ms": 10**9, "s": 10**12}
_SIZE_UNITS = {
    "B": 1,
    "KB": 10**3,
    "kB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}
_BANDWIDTH_UNITS = {f"{name}/s": factor for name, factor in _SIZE_UNITS.items()}
_FREQUENCY_UNITS = {"Hz": 1, "kHz": 10**3, "KHz": 10**3, "MHz": 10**6, "GHz": 10**9}

_QUANTITY = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-zµ/]+)\s*$")


def _parse(value: object, units: dict[str, int], kind: str, example: str) -> int:
    valid = ", ".join(units)
    if isinstance(value, bool) or not isinstance(value, str):
        raise UnitError(
            f"{kind} {value!r} needs a unit, written as a string such as {example!r} "
            f"(valid units: {valid})"
        )
    match = _QUANTITY.match(value)
    if match is None:
        raise UnitError(f"cannot read {kind} {value!r}; write it like {example!r}")
    number, unit = match.groups()
    if unit not in units:
        raise UnitError(f"unknown {kind} unit {unit!r} in {value!r}; valid units: {valid}")
    try:
        exact = Decimal(number) * units[unit]
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise UnitError(f"cannot read {kind} {value!r}") from exc
    if exact != exact.to_integral_value():
        base = next(iter(units))
        raise UnitError(f"{kind} {value!r} is not a whole number of {base}")
    return int(exact)


def parse_time(value: object) -> int:
    """``"500ns"`` -> 500_000 (picoseconds)."""
    return _parse(value, _TIME_UNITS, "time", "500ns")


def parse_size(value: object) -> int:
    """``"16MiB"`` -> 16_777_216, ``"48GB"`` -> 48_000_000_000 (bytes).

    A plain non-negative integer is taken as a number of bytes.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise UnitError(f"size {value!r} must not be negative")
        return value
    return _parse(value, _SIZE_UNITS, "size", "16MiB")


def parse_bandwidth(value: object) -> int:
    """``"50GB/s"`` -> 50_000_000_000 (bytes per second)."""
    bandwidth = _parse(value, _BANDWIDTH_UNITS, "bandwidth", "50GB/s")
    if bandwidth <= 0:
        raise UnitError(f"bandwidth {value!r} must be positive")
    return bandwidth


def parse_frequency(value: object) -> int:
    """``"1.5GHz"`` -> 1_500_000_000 (hertz)."""
    frequency = _parse(value, _FREQUENCY_UNITS, "frequency", "1.5GHz")
    if frequency <= 0:
        raise UnitError(f"frequency {value!r} must be positive")
    return frequency


def transfer_ps(nbytes: int, bandwidth: int) -> int:
    """Picoseconds to move ``nbytes`` at ``bandwidth`` bytes/s, rounded up."""
    return -(-nbytes * PS_PER_S // bandwidth)


def _scaled(value: float, steps: list[tuple[float, str]]) -> str:
    for factor, unit in steps:
        if abs(value) >= factor:
            return f"{value / factor:.4g}{unit}"
    factor, unit = steps[-1]
    return f"{value / factor:.4g}{unit}"


def format_time(ps: int | float) -> str:
    """Human form of a time in picoseconds: ``format_time(1_500_000) == '1.5us'``."""
    return _scaled(ps, [(1e12, "s"), (1e9, "ms"), (1e6, "us"), (1e3, "ns"), (1, "ps")])


def format_size(nbytes: int | float) -> str:
    """Human form of a size in bytes: binary prefixes when they are exact, else decimal.

    ``format_size(16 * 2**20) == '16MiB'``, ``format_size(48 * 10**9) == '48GB'``.
    """
    binary = [(2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")]
    decimal = [(10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "KB")]
    exact = [
        f"{int(nbytes) // factor}{unit}"
        for factor, unit in binary + decimal
        if nbytes >= factor and nbytes % factor == 0
    ]
    if exact:
        return min(exact, key=len)
    return _scaled(nbytes, binary + [(1, "B")])


def format_bandwidth(bytes_per_s: int | float) -> str:
    """Human form of a bandwidth, decimal prefixes: ``'50GB/s'``."""
    return _scaled(
        bytes_per_s, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1, "B/s")]
    )
