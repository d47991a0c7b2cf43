"""Parsing and formatting of quantities with units (kernbench.units)."""

from __future__ import annotations

import pytest

from kernbench.errors import ConfigError, KernBenchError, UnitError
from kernbench.units import (
    PS_PER_S,
    format_bandwidth,
    format_size,
    format_time,
    parse_bandwidth,
    parse_frequency,
    parse_size,
    parse_time,
    transfer_ps,
)

# --- time -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ps"),
    [
        ("1ps", 1),
        ("0ps", 0),
        ("500ns", 500_000),
        ("1ns", 1_000),
        ("1us", 1_000_000),
        ("1µs", 1_000_000),
        ("1ms", 1_000_000_000),
        ("1s", 1_000_000_000_000),
        ("2.5us", 2_500_000),
        ("0.5ns", 500),
        ("20ns", 20_000),
        (" 7 ns ", 7_000),
        ("1e3ns", 1_000_000),
        ("1.5e-3us", 1_500),
    ],
)
def test_parse_time_exact(text, ps):
    assert parse_time(text) == ps
    assert isinstance(parse_time(text), int)


def test_ps_per_second():
    assert PS_PER_S == 10**12


@pytest.mark.parametrize("bare", [500, 0, 1.5, "500", True, None])
def test_time_without_unit_is_an_error(bare):
    with pytest.raises(UnitError) as info:
        parse_time(bare)
    assert "500ns" in str(info.value)  # says how to write it


def test_time_number_without_unit_lists_units():
    with pytest.raises(UnitError, match="needs a unit") as info:
        parse_time(500)
    for unit in ("ps", "ns", "us", "ms"):
        assert unit in str(info.value)


def test_unknown_time_unit():
    with pytest.raises(UnitError) as info:
        parse_time("5parsecs")
    message = str(info.value)
    assert "parsecs" in message
    assert "unknown" in message
    assert "ns" in message and "ps" in message  # lists the valid units


def test_unit_is_case_sensitive():
    with pytest.raises(UnitError):
        parse_time("5NS")


def test_time_not_whole_picoseconds():
    with pytest.raises(UnitError, match="not a whole number of ps"):
        parse_time("0.5ps")
    with pytest.raises(UnitError, match="whole number"):
        parse_time("1.0001ns")


def test_negative_time_is_rejected():
    with pytest.raises(UnitError):
        parse_time("-5ns")


def test_unit_error_hierarchy():
    assert issubclass(UnitError, ConfigError)
    assert issubclass(UnitError, KernBenchError)
    with pytest.raises(KernBenchError):
        parse_time("5parsecs")


# --- size -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("1B", 1),
        ("1KB", 10**3),
        ("1kB", 10**3),
        ("1MB", 10**6),
        ("1GB", 10**9),
        ("1TB", 10**12),
        ("1KiB", 2**10),
        ("1MiB", 2**20),
        ("1GiB", 2**30),
        ("1TiB", 2**40),
        ("16MiB", 16_777_216),
        ("48GB", 48_000_000_000),
        ("64KiB", 65_536),
        ("1.5KiB", 1_536),
        ("0.5GiB", 2**29),
    ],
)
def test_parse_size_exact(text, nbytes):
    assert parse_size(text) == nbytes


def test_decimal_and_binary_prefixes_differ():
    assert parse_size("1GB") == 1_000_000_000
    assert parse_size("1GiB") == 1_073_741_824
    assert parse_size("1GiB") - parse_size("1GB") == 73_741_824


def test_size_plain_integer_is_bytes():
    assert parse_size(4096) == 4096
    assert parse_size(0) == 0


def test_size_errors():
    with pytest.raises(UnitError, match="negative"):
        parse_size(-1)
    with pytest.raises(UnitError, match="needs a unit"):
        parse_size(1.5)
    with pytest.raises(UnitError, match="needs a unit"):
        parse_size(True)
    with pytest.raises(UnitError, match="unknown size unit"):
        parse_size("5parsecs")
    with pytest.raises(UnitError, match="whole number of B"):
        parse_size("0.5B")
    with pytest.raises(UnitError, match="whole number"):
        parse_size("1.0001KiB")
    with pytest.raises(UnitError, match="cannot read"):
        parse_size("MiB")


# --- bandwidth --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "bps"),
    [
        ("50GB/s", 50_000_000_000),
        ("12.8GB/s", 12_800_000_000),
        ("1TB/s", 10**12),
        ("2TB/s", 2 * 10**12),
        ("256GB/s", 256 * 10**9),
        ("1MB/s", 10**6),
        ("1KB/s", 10**3),
        ("1kB/s", 10**3),
        ("1B/s", 1),
        ("1GiB/s", 2**30),
        ("1MiB/s", 2**20),
        ("1KiB/s", 2**10),
        ("1TiB/s", 2**40),
    ],
)
def test_parse_bandwidth_exact(text, bps):
    assert parse_bandwidth(text) == bps


def test_bandwidth_without_unit():
    with pytest.raises(UnitError, match="needs a unit") as info:
        parse_bandwidth(50)
    assert "GB/s" in str(info.value)
    with pytest.raises(UnitError):
        parse_bandwidth("50")


def test_bandwidth_unknown_unit():
    with pytest.raises(UnitError, match="unknown bandwidth unit") as info:
        parse_bandwidth("50 parsecs")
    assert "GB/s" in str(info.value)


def test_bandwidth_in_bits_is_not_bytes():
    # "Gb/s" (bits) is not a size unit; it must not be silently read as GB/s.
    with pytest.raises(UnitError):
        parse_bandwidth("1Gb/s")


def test_bandwidth_must_be_positive():
    with pytest.raises(UnitError, match="positive"):
        parse_bandwidth("0GB/s")
    with pytest.raises(UnitError):
        parse_bandwidth("-50GB/s")


def test_size_unit_is_not_a_bandwidth():
    with pytest.raises(UnitError):
        parse_bandwidth("50GB")


def test_bandwidth_not_whole_bytes_per_second():
    with pytest.raises(UnitError, match="whole number"):
        parse_bandwidth("0.5B/s")


# --- frequency --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hz"),
    [
        ("1.5GHz", 1_500_000_000),
        ("1GHz", 10**9),
        ("800MHz", 800_000_000),
        ("1kHz", 1_000),
        ("1KHz", 1_000),
        ("60Hz", 60),
    ],
)
def test_parse_frequency_exact(text, hz):
    assert parse_frequency(text) == hz


def test_frequency_errors():
    with pytest.raises(UnitError, match="positive"):
        parse_frequency("0GHz")
    with pytest.raises(UnitError, match="needs a unit"):
        parse_frequency(1.5)
    with pytest.raises(UnitError, match="unknown frequency unit"):
        parse_frequency("1.5parsecs")
    with pytest.raises(UnitError, match="whole number"):
        parse_frequency("0.5Hz")


# --- transfer time ----------------------------------------------------------


def test_transfer_ps_exact():
    # 100 bytes at 50 GB/s = 2 ns.
    assert transfer_ps(100, 50 * 10**9) == 2_000
    # 1 MiB at 1 TB/s = 1.048576 us.
    assert transfer_ps(2**20, 10**12) == 1_048_576
    assert transfer_ps(0, 10**9) == 0


def test_transfer_ps_rounds_up():
    # 1 byte at 3 B/s is 333333333333.33.. ps -> rounded up.
    assert transfer_ps(1, 3) == 333_333_333_334
    # Less than a picosecond still costs one.
    assert transfer_ps(1, 2 * 10**12) == 1
    # 3 bytes at 2 B/s = 1.5 s exactly: no rounding.
    assert transfer_ps(3, 2) == 1_500_000_000_000
    # 101 bytes at 50 GB/s = 2020 ps exactly.
    assert transfer_ps(101, 50 * 10**9) == 2_020
    # 1 byte at 12.8 GB/s = 78.125 ps -> 79.
    assert transfer_ps(1, parse_bandwidth("12.8GB/s")) == 79


# --- formatting -------------------------------------------------------------


@pytest.mark.parametrize(
    ("ps", "text"),
    [
        (1_500_000, "1.5us"),
        (500_000, "500ns"),
        (500, "500ps"),
        (0, "0ps"),
        (2 * 10**12, "2s"),
        (3 * 10**9, "3ms"),
        (123_456_789, "123.5us"),
        (-1_500, "-1.5ns"),
    ],
)
def test_format_time(ps, text):
    assert format_time(ps) == text


@pytest.mark.parametrize(
    ("nbytes", "text"),
    [
        (16 * 2**20, "16MiB"),
        (1_536, "1.5KiB"),
        (100, "100B"),
        (2**30, "1GiB"),
        (2**40, "1TiB"),
        (0, "0B"),
    ],
)
def test_format_size(nbytes, text):
    assert format_size(nbytes) == text


@pytest.mark.parametrize(
    ("bps", "text"),
    [
        (50 * 10**9, "50GB/s"),
        (12_800_000_000, "12.8GB/s"),
        (10**12, "1TB/s"),
        (999, "999B/s"),
        (1_500_000, "1.5MB/s"),
        (2_000, "2KB/s"),
    ],
)
def test_format_bandwidth(bps, text):
    assert format_bandwidth(bps) == text


@pytest.mark.parametrize("ps", [1, 20_000, 500_000, 1_500_000, 7 * 10**9, 10**12])
def test_format_time_round_trips(ps):
    assert parse_time(format_time(ps)) == ps


@pytest.mark.parametrize("bps", [1, 2_000, 12_800_000_000, 50 * 10**9, 2 * 10**12])
def test_format_bandwidth_round_trips(bps):
    assert parse_bandwidth(format_bandwidth(bps)) == bps


@pytest.mark.parametrize("nbytes", [1, 1_536, 16 * 2**20, 2**30, 48 * 2**30])
def test_format_size_round_trips(nbytes):
    assert parse_size(format_size(nbytes)) == nbytes


# --- exactness and bounds -----------------------------------------------------------


def _quick_unit_error(parse, value) -> UnitError:
    import time

    start = time.perf_counter()
    with pytest.raises(UnitError) as info:
        parse(value)
    assert time.perf_counter() - start < 0.5
    return info.value


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_time, "1e999999999ns"),
        (parse_time, "1e+999999999999999999999999s"),
        (parse_size, "1e999999999GiB"),
        (parse_bandwidth, "9" * 5000 + "GB/s"),
        (parse_frequency, "1e30GHz"),
        (parse_time, "9223372036854775808ps"),
    ],
)
def test_values_too_large_are_refused_at_once(parse, text):
    error = _quick_unit_error(parse, text)
    assert "too large" in str(error)
    assert "9223372036854775807" in str(error)  # says the limit
    assert len(str(error)) < 500


def test_the_largest_value_is_accepted():
    assert parse_time("9223372036854775807ps") == 2**63 - 1
    assert parse_size(2**63 - 1) == 2**63 - 1
    with pytest.raises(UnitError, match="too large"):
        parse_size(2**63)


@pytest.mark.parametrize(
    "text",
    ["1e-999999999s", "1e-40s", "0.0000000000000000000000000000001s", "1e-99999999999999999999ps"],
)
def test_tiny_values_are_not_rounded_to_zero(text):
    error = _quick_unit_error(parse_time, text)
    assert "not a whole number of ps" in str(error)


def test_zero_with_any_exponent_is_zero():
    assert parse_time("0e999999999ns") == 0
    assert parse_time("0.000e-999999999s") == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("123456789012345678.901234567890ps", None),  # 30 significant digits, not whole
        ("1234567890123456789.00000000000ns", None),  # too large once in ps
        ("1.23456789012345678901234567890s", None),  # ps would need 29 more digits
        ("9223372036854775.807000000000000ns", 9223372036854775807),
        ("1.000000000000000000000000000000s", 10**12),
        ("12345678901234567.8900000000000ps", None),
    ],
)
def test_thirty_significant_digits_are_exact(text, expected):
    if expected is None:
        with pytest.raises(UnitError):
            parse_time(text)
    else:
        assert parse_time(text) == expected


def test_digits_past_twenty_eight_are_not_rounded_away():
    # 29 significant digits: the decimal default context would round the 1 away.
    with pytest.raises(UnitError, match="whole number of B"):
        parse_size("100000000000000.00000000000001B")
    with pytest.raises(UnitError, match="whole number of ps"):
        parse_time("1000000000.0000000000000000001ps")
    assert parse_time("1000000000000000000.0000000000000000000000ps") == 10**18


def test_greek_mu_and_a_plus_sign_read_as_written():
    assert parse_time("2\u03bcs") == parse_time("2\u00b5s") == parse_time("+2us") == 2_000_000


@pytest.mark.parametrize(("parse", "value"), [(parse_time, "-1ns"), (parse_bandwidth, "-1GB/s")])
def test_a_negative_quantity_says_so(parse, value):
    with pytest.raises(UnitError, match=f"'{value}' must not be negative"):
        parse(value)


@pytest.mark.parametrize("value", ["400Gbps", "400Gb/s"])
def test_a_rate_in_bits_says_to_divide_by_8(value):
    with pytest.raises(UnitError, match=r"divide a rate in bits by 8, 400Gb/s is '50GB/s'"):
        parse_bandwidth(value)
