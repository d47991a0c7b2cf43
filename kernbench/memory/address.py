"""Physical addresses: which memory of which component, and where in it.

A :class:`PhysAddr` names a byte anywhere in the machine as
``(rack, sip, cube, pe, kind, offset)`` and packs into one 72-bit integer, so
addresses can be sorted, hashed and searched with ``bisect`` (Python integers
are unbounded; nothing stores an encoded address in a fixed-width array).  Bit
layout, least significant first::

    bits  0..37  offset  38 bits   0 .. 256 GiB - 1
    bits 38..39  kind     2 bits   MemoryKind (HBM=0, SRAM=1, TCM=2)
    bits 40..46  pe       7 bits   0 .. 127 PEs per cube
    bits 47..53  cube     7 bits   0 .. 127 cubes per SIP
    bits 54..69  sip     16 bits   0 .. 65,535 SIPs per rack
    bits 70..71  rack     2 bits   0 .. 3

The sip field is 16 bits so that a cluster of 65,536 chips (a two-level
leaf/spine machine, :mod:`kernbench.topology.schema`) can address its memory;
it was 8 bits (256 SIPs) when the layout fitted 64 bits.

Because ``offset`` is the least significant field, addresses in the same memory
are ordered as their offsets are, and a contiguous byte range of one memory is
a contiguous integer range.

Conventions for the fields:

* **HBM**: ``offset`` is relative to the start of the cube's HBM; ``pe`` is the
  PE that owns the partition the offset falls in.
* **SRAM**: ``offset`` is relative to the start of the cube's SRAM; ``pe`` is
  always 0 (the SRAM is shared, so one canonical encoding is kept).
* **TCM**: ``offset`` is relative to the start of that PE's TCM.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from kernbench.errors import MemoryFaultError
from kernbench.topology import names

__all__ = ["MemoryKind", "PhysAddr", "PA_BITS", "OFFSET_BITS", "FIELD_BITS"]


class MemoryKind(IntEnum):
    """The three kinds of memory a physical address can point into."""

    HBM = 0
    SRAM = 1
    TCM = 2


OFFSET_BITS = 38
_KIND_BITS = 2
_PE_BITS = 7
_CUBE_BITS = 7
_SIP_BITS = 16
_RACK_BITS = 2

# (field, width in bits), least significant first; the single source of the layout.
_LAYOUT: tuple[tuple[str, int], ...] = (
    ("offset", OFFSET_BITS),
    ("kind", _KIND_BITS),
    ("pe", _PE_BITS),
    ("cube", _CUBE_BITS),
    ("sip", _SIP_BITS),
    ("rack", _RACK_BITS),
)
PA_BITS = sum(width for _, width in _LAYOUT)
#: Width in bits of each field, for callers that check a machine fits the layout.
FIELD_BITS: dict[str, int] = dict(_LAYOUT)


def _shifts() -> dict[str, tuple[int, int]]:
    shifts: dict[str, tuple[int, int]] = {}
    position = 0
    for field, width in _LAYOUT:
        shifts[field] = (position, width)
        position += width
    return shifts


_SHIFTS = _shifts()


@dataclass(frozen=True, slots=True)
class PhysAddr:
    """A byte address in one memory of the machine; see the module docstring."""

    rack: int
    sip: int
    cube: int
    pe: int
    kind: MemoryKind
    offset: int

    def __post_init__(self) -> None:
        for field, (_, width) in _SHIFTS.items():
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int):
                raise MemoryFaultError(
                    f"physical address field {field}={value!r} must be an integer"
                )
            limit = 1 << width
            if not 0 <= value < limit:
                raise MemoryFaultError(
                    f"physical address field {field}={value} is out of range; valid: 0..{limit - 1}"
                )
        try:
            kind = MemoryKind(self.kind)
        except ValueError:
            valid = ", ".join(f"{k.name}={k.value}" for k in MemoryKind)
            raise MemoryFaultError(
                f"physical address field kind={self.kind!r} is not a memory kind; valid: {valid}"
            ) from None
        # Coerce plain ints so that equal addresses compare and print alike.
        object.__setattr__(self, "kind", kind)
        if kind is MemoryKind.SRAM and self.pe != 0:
            raise MemoryFaultError(
                f"physical address field pe={self.pe} must be 0 for SRAM "
                f"(cube SRAM is shared, not owned by a PE)"
            )

    def encode(self) -> int:
        """Pack into one integer below ``2**PA_BITS``; :meth:`decode` inverts it."""
        value = 0
        for field, (shift, _) in _SHIFTS.items():
            value |= int(getattr(self, field)) << shift
        return value

    @classmethod
    def decode(cls, value: int) -> PhysAddr:
        """Unpack an integer made by :meth:`encode`."""
        if isinstance(value, bool) or not isinstance(value, int):
            raise MemoryFaultError(f"encoded physical address {value!r} must be an integer")
        if not 0 <= value < (1 << PA_BITS):
            raise MemoryFaultError(
                f"encoded physical address {value:#x} is out of range; "
                f"valid: 0..{(1 << PA_BITS) - 1:#x}"
            )
        fields = {
            field: (value >> shift) & ((1 << width) - 1)
            for field, (shift, width) in _SHIFTS.items()
        }
        return cls(**fields)

    def __add__(self, delta: int) -> PhysAddr:
        if isinstance(delta, bool) or not isinstance(delta, int):
            return NotImplemented
        return PhysAddr(self.rack, self.sip, self.cube, self.pe, self.kind, self.offset + delta)

    @property
    def location(self) -> str:
        """Hierarchical name of the memory, e.g. ``sip0.cube3.pe5.hbm``."""
        rack = f"rack{self.rack}." if self.rack else ""
        if self.kind is MemoryKind.SRAM:
            return rack + names.sram(self.sip, self.cube)
        return f"{rack}{names.pe(self.sip, self.cube, self.pe)}.{self.kind.name.lower()}"

    def __str__(self) -> str:
        return f"{self.location}+{self.offset:#x}"
