"""Component names: the one place that builds and parses them.

Names are hierarchical and stable (DESIGN.md): ``sip0``, ``sip0.cube3``,
``sip0.cube3.pe5``, ``sip0.cube3.pe5.tcm``, ``sip0.cube3.hbm2``,
``sip0.cube3.sram``, ``sip0.cube3.m_cpu``, ``sip0.cube3.noc`` (the cube's
router), ``host``, ``switch``; on a leaf/spine cluster also ``node5.switch``
(the switch of a node's intra-node fabric), ``leaf2`` and ``spine7``; links are
``link:A->B`` and memory ports ``port:MEMORY``.  Nobody else formats a name
with an f-string or splits one: build them here, and take them apart with
:func:`parse` (syntax only; whether a name exists on a machine is
:meth:`MachineGraph.check_name`'s business).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

__all__ = [
    "HOST",
    "SWITCH",
    "NodeName",
    "sip",
    "cube",
    "pe",
    "tcm",
    "hbm",
    "sram",
    "m_cpu",
    "noc",
    "node_switch",
    "leaf",
    "spine",
    "CLOS_SWITCH_KINDS",
    "link",
    "port",
    "link_source",
    "parse",
    "cube_of",
    "within_cube",
    "sip_of",
    "tcm_of",
    "sram_of",
    "m_cpu_of",
    "part_of",
    "pe_coordinates",
]

HOST = "host"
SWITCH = "switch"
#: Kinds of the switches of a leaf/spine cluster (``NodeName.index`` is their number).
CLOS_SWITCH_KINDS = ("node_switch", "leaf", "spine")

# Node kinds inside a cube (besides PEs and their TCMs).
_CUBE_LEAVES = ("sram", "m_cpu", "noc")
# Parts of a PE that trace rows and errors name (not nodes of the graph).
_PE_PARTS = ("mmu", "ipcq", "matrix", "vector")


@dataclass(frozen=True, slots=True)
class NodeName:
    """A parsed node name: its kind and coordinates (-1 where a level does not apply)."""

    # host | switch | sip | cube | pe | tcm | hbm | sram | m_cpu | noc | node_switch | leaf | spine
    kind: str
    sip: int = -1
    cube: int = -1
    pe: int = -1
    index: int = -1  # the HBM slice; the node, leaf or spine of a cluster switch

    def __str__(self) -> str:
        return _format(self)


def sip(s: int) -> str:
    return f"sip{s}"


def cube(s: int, c: int) -> str:
    return f"sip{s}.cube{c}"


def pe(s: int, c: int, p: int) -> str:
    return f"sip{s}.cube{c}.pe{p}"


def tcm(s: int, c: int, p: int) -> str:
    return f"sip{s}.cube{c}.pe{p}.tcm"


def hbm(s: int, c: int, k: int) -> str:
    return f"sip{s}.cube{c}.hbm{k}"


def sram(s: int, c: int) -> str:
    return f"sip{s}.cube{c}.sram"


def m_cpu(s: int, c: int) -> str:
    return f"sip{s}.cube{c}.m_cpu"


def noc(s: int, c: int) -> str:
    return f"sip{s}.cube{c}.noc"


def node_switch(n: int) -> str:
    """The switch of node ``n``'s intra-node fabric (an NVSwitch-like crossbar)."""
    return f"node{n}.switch"


def leaf(k: int) -> str:
    """Leaf switch ``k`` of a two-level leaf/spine cluster."""
    return f"leaf{k}"


def spine(k: int) -> str:
    """Spine switch ``k`` of a two-level leaf/spine cluster."""
    return f"spine{k}"


def link(src: str, dst: str) -> str:
    """The name of the directed link from ``src`` to ``dst`` (node names or labels)."""
    return f"link:{src}->{dst}"


def port(memory: str) -> str:
    """The name of a memory's port (the link into and out of it)."""
    return f"port:{memory}"


def is_port(name: str) -> bool:
    """Whether ``name`` is a memory's port (``port:M``)."""
    return name.startswith("port:")


def link_source(name: str) -> str | None:
    """Where a ``link:A->B`` starts (``A``), or a ``port:M``'s memory (``M``); else ``None``."""
    kind, sep, ends = name.partition(":")
    if not sep or kind not in ("link", "port"):
        return None
    return ends.split("->", 1)[0]


def _index(text: str, prefix: str) -> int:
    if not text.startswith(prefix):
        raise ValueError(text)
    digits = text[len(prefix) :]
    value = int(digits) if digits.isdigit() and digits.isascii() else -1
    if value < 0 or str(value) != digits:  # only canonical spellings: no "00", "+1", " 1"
        raise ValueError(text)
    return value


@lru_cache(maxsize=65536)
def parse(name: str) -> NodeName:
    """The kind and coordinates of ``name``; ``ValueError`` if it is not a node name."""
    if name in (HOST, SWITCH):
        return NodeName(name)
    parts = name.split(".")
    if parts[0].startswith(("leaf", "spine", "node")):
        return _parse_cluster_switch(name, parts)
    s = _index(parts[0], "sip")
    if len(parts) == 1:
        return NodeName("sip", s)
    c = _index(parts[1], "cube")
    if len(parts) == 2:
        return NodeName("cube", s, c)
    leaf = parts[2]
    if leaf.startswith("pe"):
        p = _index(leaf, "pe")
        if len(parts) == 3:
            return NodeName("pe", s, c, p)
        if len(parts) == 4 and parts[3] == "tcm":
            return NodeName("tcm", s, c, p)
    elif len(parts) == 3 and leaf.startswith("hbm"):
        return NodeName("hbm", s, c, -1, _index(leaf, "hbm"))
    elif len(parts) == 3 and leaf in _CUBE_LEAVES:
        return NodeName(leaf, s, c)
    raise ValueError(name)


def _parse_cluster_switch(name: str, parts: list[str]) -> NodeName:
    if len(parts) == 1 and parts[0].startswith("leaf"):
        return NodeName("leaf", index=_index(parts[0], "leaf"))
    if len(parts) == 1 and parts[0].startswith("spine"):
        return NodeName("spine", index=_index(parts[0], "spine"))
    if len(parts) == 2 and parts[1] == "switch":
        return NodeName("node_switch", index=_index(parts[0], "node"))
    raise ValueError(name)


def _format(node: NodeName) -> str:
    kind = node.kind
    if kind in (HOST, SWITCH):
        return kind
    if kind == "node_switch":
        return node_switch(node.index)
    if kind == "leaf":
        return leaf(node.index)
    if kind == "spine":
        return spine(node.index)
    if kind == "sip":
        return sip(node.sip)
    if kind == "cube":
        return cube(node.sip, node.cube)
    if kind == "pe":
        return pe(node.sip, node.cube, node.pe)
    if kind == "tcm":
        return tcm(node.sip, node.cube, node.pe)
    if kind == "hbm":
        return hbm(node.sip, node.cube, node.index)
    return f"{cube(node.sip, node.cube)}.{kind}"


def cube_of(name: str) -> str:
    """The cube a node sits in: ``sip0.cube3.pe5`` -> ``sip0.cube3`` (``ValueError`` if none)."""
    node = parse(name)
    if node.cube < 0:
        raise ValueError(name)
    return cube(node.sip, node.cube)


def within_cube(name: str) -> tuple[str, str] | None:
    """``(cube, rest)`` for a name inside a cube, sub-components included.

    ``sip0.cube3.pe5.vector`` (an engine of a PE) -> ``("sip0.cube3", "pe5.vector")``;
    ``sip0.cube3`` -> ``("sip0.cube3", "")``; ``None`` for names outside any cube.
    """
    parts = name.split(".", 2)
    if len(parts) < 2:
        return None
    try:
        node = parse(f"{parts[0]}.{parts[1]}")
    except ValueError:
        return None
    if node.cube < 0:  # a cluster switch such as node3.switch
        return None
    return cube(node.sip, node.cube), parts[2] if len(parts) == 3 else ""


def sip_of(name: str) -> str:
    """The SIP a node sits in: ``sip0.cube3.pe5`` -> ``sip0`` (``ValueError`` outside one)."""
    node = parse(name)
    if node.sip < 0:
        raise ValueError(name)
    return sip(node.sip)


def tcm_of(pe_name: str) -> str:
    """A PE's scratchpad: ``sip0.cube3.pe5`` -> ``sip0.cube3.pe5.tcm``."""
    node = parse(pe_name)
    return tcm(node.sip, node.cube, node.pe)


def sram_of(name: str) -> str:
    """The SRAM of the cube a node sits in."""
    return f"{cube_of(name)}.sram"


def m_cpu_of(name: str) -> str:
    """The command processor of the cube a node sits in."""
    return f"{cube_of(name)}.m_cpu"


def part_of(pe_name: str, part: str) -> str:
    """A named part of a PE that is not a node of the graph: ``mmu``, ``ipcq``, an engine
    (``matrix``, ``vector``): ``sip0.cube3.pe5`` -> ``sip0.cube3.pe5.vector``."""
    if part not in _PE_PARTS:
        raise ValueError(f"{part!r} is not a part of a PE; parts: {', '.join(_PE_PARTS)}")
    return f"{pe_name}.{part}"


def pe_coordinates(pe_name: str) -> tuple[int, int, int]:
    """``sip0.cube3.pe5`` -> ``(0, 3, 5)``; ``ValueError`` for any other kind of name."""
    node = parse(pe_name)
    if node.kind != "pe":
        raise ValueError(pe_name)
    return node.sip, node.cube, node.pe
