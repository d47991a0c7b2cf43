"""The typed quantities topology keys are made of: times, bandwidths, counts, links.

Each parses its unit in one place (:mod:`kernbench.units`) and turns a unit
error into the ``ValueError`` pydantic attaches the key path to.  Shared by the
machine schema (:mod:`kernbench.topology.schema`) and the cluster interconnect
(:mod:`kernbench.topology.clos_spec`).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from kernbench.errors import UnitError
from kernbench.units import MAX_QUANTITY, parse_bandwidth, parse_time
from kernbench.validation import StrictModel

__all__ = ["checked", "Time", "Bandwidth", "Count", "LinkSpec"]


def checked(parse) -> BeforeValidator:
    """A validator that parses a value with ``parse`` (a :mod:`kernbench.units` parser)."""

    def validate(value: Any) -> int:
        try:
            return parse(value)
        except UnitError as exc:
            # pydantic only attaches the key path to ValueError.
            raise ValueError(str(exc)) from None

    return BeforeValidator(validate)


Time = Annotated[int, checked(parse_time), Field(ge=0)]
Bandwidth = Annotated[int, checked(parse_bandwidth)]
Count = Annotated[int, Field(strict=True, gt=0, le=MAX_QUANTITY)]


class LinkSpec(StrictModel):
    """One direction of a link; links are full duplex, each direction its own."""

    bandwidth: Bandwidth = Field(description="bytes per second in each direction, e.g. '50GB/s'")
    latency: Time = Field(description="time of flight per hop, e.g. '500ns'")
