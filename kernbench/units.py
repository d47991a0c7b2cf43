"""The one place where quantities with units are parsed and formatted.

Internal units: time is an integer number of picoseconds, size an integer
number of bytes, bandwidth an integer number of bytes per second, frequency an
integer number of hertz.  Decimal prefixes are powers of ten (1 GB = 10^9 B),
binary prefixes powers of two (1 GiB = 2^30 B).  Parsing is exact (integer
arithmetic on the digits as written, however many): a value that is not a
whole number of the internal unit (``"0.5ps"``, ``"1e-999999999s"``) is an
error rather than a silent rounding, and every value must be below 2^63
(:data:`MAX_QUANTITY`; for time, about 106 days), so a written exponent
cannot make a huge integer.
"""

from __future__ import annotations

import math
import re

from kernbench.errors import UnitError, shown

__all__ = [
    "PS_PER_S",
    "MAX_QUANTITY",
    "scale_exact",
    "parse_time",
    "parse_size",
    "parse_bandwidth",
    "parse_frequency",
    "transfer_ps",
    "format_time",
    "format_size",
    "format_size_iec",
    "format_bandwidth",
]

PS_PER_S = 10**12
#: Every parsed quantity is below 2^63: it fits the signed 64-bit integers that
#: reports, NumPy arrays and traces hold (2^63 ps is about 106 days).
MAX_QUANTITY = 2**63 - 1

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
_NUMBER = re.compile(r"^([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?$")


def _echo(value: object) -> str:
    """``value`` as an error message may quote it."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 256:
        return f"an integer of {value.bit_length()} bits"
    return shown(repr(value), 80)


def _multiplicity(factor: int, prime: int) -> int:
    count = 0
    while factor and factor % prime == 0:
        factor //= prime
        count += 1
    return count


def scale_exact(number: str | int | float, factor: int, *, what: str, base: str) -> int:
    """``number`` (decimal digits as written, an int or a finite float) times ``factor``, exactly.

    The result must be a whole number of at most :data:`MAX_QUANTITY`; ``what``
    and ``base`` (the internal unit's name) word the :class:`UnitError`
    otherwise.  Every digit counts, however many are written, and a huge or
    tiny exponent is decided without building the number it would make.
    """
    if isinstance(number, float):
        if not math.isfinite(number):
            raise UnitError(f"{what} must be a finite number")
        number = repr(number)
    elif isinstance(number, int):
        number = str(number)
    match = _NUMBER.match(number)
    if match is None or not (match.group(1) or match.group(2)):
        raise UnitError(f"{what} is not a number")
    whole, fraction, sign, exponent = match.groups(default="")
    digits = (whole + fraction).lstrip("0")
    if not digits:
        return 0
    # The value is int(digits) * 10**power, with no zero at the end of digits.
    significant = digits.rstrip("0")
    exponent_digits = exponent.lstrip("0")
    if len(exponent_digits) > 18:  # stands in for any exponent past deciding below
        written = 10**18
    else:
        written = int(exponent_digits or "0")
    power = (-written if sign == "-" else written) - len(fraction)
    power += len(digits) - len(significant)
    too_large = UnitError(f"{what} is too large; at most {MAX_QUANTITY} {base}")
    if power + len(significant) > 21:  # at least 10^21 > MAX_QUANTITY, before the factor
        raise too_large
    # significant is not a multiple of 10, so significant * factor is a multiple of
    # 10**k only for k up to the factor's count of 2s or of 5s.
    cancelled = max(_multiplicity(factor, 2), _multiplicity(factor, 5))
    if power < -cancelled:
        raise UnitError(f"{what} is not a whole number of {base}")
    value = int(significant) * factor
    if power >= 0:
        value *= 10**power
    else:
        value, rest = divmod(value, 10**-power)
        if rest:
            raise UnitError(f"{what} is not a whole number of {base}")
    if value > MAX_QUANTITY:
        raise too_large
    return value


def _parse(value: object, units: dict[str, int], kind: str, example: str) -> int:
    valid = ", ".join(units)
    if isinstance(value, bool) or not isinstance(value, str):
        raise UnitError(
            f"{kind} {_echo(value)} needs a unit, written as a string such as {example!r} "
            f"(valid units: {valid})"
        )
    text = value.replace("\u03bc", "\u00b5")  # Greek mu, as keyboards type it: micro
    match = _QUANTITY.match(text.replace("+", "", 1) if text.lstrip().startswith("+") else text)
    if match is None:
        if text.lstrip().startswith("-") and _QUANTITY.match(text.replace("-", "", 1)):
            raise UnitError(f"{kind} {_echo(value)} must not be negative")
        raise UnitError(f"cannot read {kind} {_echo(value)}; write it like {example!r}")
    number, unit = match.groups()
    if unit not in units:
        hint = ""
        if kind == "bandwidth" and (unit.endswith("bps") or unit.endswith("b/s")):
            hint = " (bits are not a unit here: divide a rate in bits by 8, 400Gb/s is '50GB/s')"
        raise UnitError(
            f"unknown {kind} unit {_echo(unit)} in {_echo(value)}; valid units: {valid}{hint}"
        )
    base = next(iter(units))
    return scale_exact(number, units[unit], what=f"{kind} {_echo(value)}", base=base)


def parse_time(value: object) -> int:
    """``"500ns"`` -> 500_000 (picoseconds)."""
    return _parse(value, _TIME_UNITS, "time", "500ns")


def parse_size(value: object) -> int:
    """``"16MiB"`` -> 16_777_216, ``"48GB"`` -> 48_000_000_000 (bytes).

    A plain non-negative integer is taken as a number of bytes.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise UnitError(f"size {_echo(value)} must not be negative")
        if value > MAX_QUANTITY:
            raise UnitError(f"size {_echo(value)} is too large; at most {MAX_QUANTITY} B")
        return value
    return _parse(value, _SIZE_UNITS, "size", "16MiB")


def parse_bandwidth(value: object) -> int:
    """``"50GB/s"`` -> 50_000_000_000 (bytes per second)."""
    bandwidth = _parse(value, _BANDWIDTH_UNITS, "bandwidth", "50GB/s")
    if bandwidth <= 0:
        raise UnitError(f"bandwidth {_echo(value)} must be positive")
    return bandwidth


def parse_frequency(value: object) -> int:
    """``"1.5GHz"`` -> 1_500_000_000 (hertz)."""
    frequency = _parse(value, _FREQUENCY_UNITS, "frequency", "1.5GHz")
    if frequency <= 0:
        raise UnitError(f"frequency {_echo(value)} must be positive")
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


def format_size_iec(nbytes: int | float) -> str:
    """A size for reports: binary (IEC) prefixes and 4 significant digits, trailing zeros kept.

    Every size of a summary reads the same way, exact or not:
    ``format_size_iec(12 * 2**30) == '12.00GiB'``, ``format_size_iec(218_628_096) ==
    '208.5MiB'``, ``format_size_iec(512) == '512B'``.
    """
    for factor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(nbytes) >= factor:
            value = nbytes / factor
            digits = (
                3 if abs(value) < 10 else 2 if abs(value) < 100 else 1 if abs(value) < 1000 else 0
            )
            return f"{value:.{digits}f}{unit}"
    return f"{int(nbytes)}B"


def format_bandwidth(bytes_per_s: int | float) -> str:
    """Human form of a bandwidth, decimal prefixes: ``'50GB/s'``."""
    return _scaled(
        bytes_per_s, [(1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "KB/s"), (1, "B/s")]
    )
