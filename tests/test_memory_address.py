"""Physical address codec: lossless, distinct, and loud about bad fields."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernbench.errors import MemoryFaultError
from kernbench.memory import PA_BITS, MemoryKind, PhysAddr
from kernbench.memory.address import FIELD_BITS


def _field(name: str) -> st.SearchStrategy[int]:
    return st.integers(0, (1 << FIELD_BITS[name]) - 1)


@st.composite
def addresses(draw: st.DrawFn) -> PhysAddr:
    kind = draw(st.sampled_from(list(MemoryKind)))
    pe = 0 if kind is MemoryKind.SRAM else draw(_field("pe"))
    return PhysAddr(
        rack=draw(_field("rack")),
        sip=draw(_field("sip")),
        cube=draw(_field("cube")),
        pe=pe,
        kind=kind,
        offset=draw(_field("offset")),
    )


def test_layout_holds_65536_sips_and_256_gib_per_memory() -> None:
    assert PA_BITS == 72
    assert FIELD_BITS == {"offset": 38, "kind": 2, "pe": 7, "cube": 7, "sip": 16, "rack": 2}
    assert 1 << FIELD_BITS["sip"] == 65_536
    assert 1 << FIELD_BITS["offset"] >= 256 * 2**30


@settings(max_examples=200, deadline=None)
@given(addresses())
def test_encode_decode_round_trip(pa: PhysAddr) -> None:
    encoded = pa.encode()
    assert 0 <= encoded < 1 << PA_BITS
    assert PhysAddr.decode(encoded) == pa


@settings(max_examples=200, deadline=None)
@given(addresses(), addresses())
def test_different_addresses_encode_differently(a: PhysAddr, b: PhysAddr) -> None:
    assert (a == b) == (a.encode() == b.encode())


@pytest.mark.parametrize(
    "pa",
    [
        PhysAddr(0, 0, 0, 0, MemoryKind.HBM, 0),
        PhysAddr(3, 65_535, 127, 127, MemoryKind.TCM, (1 << 38) - 1),
        PhysAddr(0, 65_535, 0, 0, MemoryKind.SRAM, 0),
        PhysAddr(3, 65_535, 127, 127, MemoryKind.HBM, 0),
        PhysAddr(0, 0, 0, 0, MemoryKind.SRAM, (1 << 38) - 1),
        PhysAddr(1, 0, 0, 0, MemoryKind.HBM, 0),
    ],
)
def test_edge_addresses_round_trip(pa: PhysAddr) -> None:
    assert PhysAddr.decode(pa.encode()) == pa


def test_each_field_changes_the_encoding() -> None:
    base = PhysAddr(0, 1, 2, 3, MemoryKind.HBM, 4)
    variants = [
        PhysAddr(1, 1, 2, 3, MemoryKind.HBM, 4),
        PhysAddr(0, 2, 2, 3, MemoryKind.HBM, 4),
        PhysAddr(0, 1, 3, 3, MemoryKind.HBM, 4),
        PhysAddr(0, 1, 2, 4, MemoryKind.HBM, 4),
        PhysAddr(0, 1, 2, 3, MemoryKind.TCM, 4),
        PhysAddr(0, 1, 2, 3, MemoryKind.HBM, 5),
    ]
    codes = {base.encode(), *(v.encode() for v in variants)}
    assert len(codes) == 1 + len(variants)


@pytest.mark.parametrize(
    ("field", "value"),
    [("rack", 4), ("sip", 65_536), ("cube", 128), ("pe", 128), ("offset", 1 << 38), ("sip", -1)],
)
def test_out_of_range_field_is_named(field: str, value: int) -> None:
    fields = dict(rack=0, sip=0, cube=0, pe=0, kind=MemoryKind.TCM, offset=0)
    fields[field] = value
    with pytest.raises(MemoryFaultError, match=rf"field {field}={value}.*valid: 0\.\."):
        PhysAddr(**fields)


def test_bad_kind_and_sram_pe_are_rejected() -> None:
    with pytest.raises(MemoryFaultError, match="kind=3"):
        PhysAddr(0, 0, 0, 0, 3, 0)  # type: ignore[arg-type]
    with pytest.raises(MemoryFaultError, match="pe=2 must be 0 for SRAM"):
        PhysAddr(0, 0, 0, 2, MemoryKind.SRAM, 0)
    with pytest.raises(MemoryFaultError, match="out of range"):
        PhysAddr.decode(1 << 72)


def test_int_kind_is_coerced() -> None:
    pa = PhysAddr(0, 0, 0, 1, 2, 0)  # type: ignore[arg-type]
    assert pa.kind is MemoryKind.TCM
    assert pa == PhysAddr(0, 0, 0, 1, MemoryKind.TCM, 0)


def test_add_and_str() -> None:
    pa = PhysAddr(0, 0, 3, 5, MemoryKind.HBM, 0x1000)
    assert str(pa) == "sip0.cube3.pe5.hbm+0x1000"
    assert pa + 0x20 == PhysAddr(0, 0, 3, 5, MemoryKind.HBM, 0x1020)
    assert pa.encode() + 0x20 == (pa + 0x20).encode()
    assert str(PhysAddr(0, 1, 2, 0, MemoryKind.SRAM, 16)) == "sip1.cube2.sram+0x10"
    assert str(PhysAddr(2, 1, 2, 7, MemoryKind.TCM, 0)) == "rack2.sip1.cube2.pe7.tcm+0x0"
    with pytest.raises(MemoryFaultError, match="offset=-1"):
        pa + (-0x1001)


def test_the_largest_address_is_the_top_of_the_layout() -> None:
    top = PhysAddr(3, 65_535, 127, 127, MemoryKind.TCM, (1 << 38) - 1)
    assert top.encode() == (1 << PA_BITS) - 1 - (1 << 38)  # kind TCM=2, not 3
    assert PhysAddr.decode(top.encode()) == top
    # The sip field sits above cube: SIP 256 (which the 8-bit layout refused) is distinct.
    assert PhysAddr(0, 256, 0, 0, MemoryKind.HBM, 0).encode() == 256 << 54
    assert str(PhysAddr(0, 65_535, 1, 2, MemoryKind.TCM, 8)) == "sip65535.cube1.pe2.tcm+0x8"
