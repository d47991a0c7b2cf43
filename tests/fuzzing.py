"""Hostile inputs for every file a user hands the ``kernbench`` command line.

Each *case* is a command line plus the files it reads (topologies, catalogue
and tune-table files, sweep files, regress and plot inputs, bench scripts),
made by mutating the bundled files and known-good documents: structural edits,
byte corruption, other encodings, YAML alias bombs, deep nesting, special files
(FIFOs, devices, directories, symlinks), oversized files, ``extends:`` chains
and cycles, hostile ``--set`` values and hostile bench scripts.

A case passes when ``kernbench.cli.main`` returns 0, 1 or 2 within
:data:`HANG_S` seconds and its standard error shows no Python traceback; it
fails as a *traceback* (exit 70, an escaped exception, "Traceback" on stderr)
or a *hang*.  ``tests/test_fuzz_cli.py`` runs a few hundred cases in the
suite; a long run is::

    .venv/bin/python tests/fuzzing.py --count 10000 --jobs 2

which prints a tally per kind and every failing case (seed, argv, stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import multiprocessing
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = sorted((REPO / "topologies").glob("*.yaml"))
CATALOGUE = REPO / "ccl" / "ccl.yaml"
HANG_S = 10.0
OK_STATUSES = (0, 1, 2)

TINY_BENCH = """\
import kernbench.torch as torch
import kernbench.torch.distributed as dist


def main():
    dist.init_process_group()
    t = torch.ones(1024)
    dist.all_reduce(t)
    return [{"size_B": 4096, "time_us": 1.0, "busbw_GBps": 1.0}]
"""


@dataclass
class Case:
    """One command line and the files it needs (written under a fresh directory)."""

    kind: str
    argv: list[str]
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    links: dict[str, str] = field(default_factory=dict)  # name -> target
    statuses: tuple[int, ...] = OK_STATUSES  # the bench's own sys.exit may add its status


@dataclass
class Outcome:
    kind: str
    seed: int
    argv: list[str]
    status: int | None
    verdict: str  # ok | traceback | hang | crash
    seconds: float
    stderr: str


# -- values and documents ------------------------------------------------------------------------

HOSTILE_SCALARS: list[Any] = [
    None,
    True,
    0,
    -1,
    1,
    3,
    2**31,
    2**64,
    10**20,
    -(10**20),
    1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    " ",
    "50GB/s",
    "500ns",
    "1.5GHz",
    "16MiB",
    "0ps",
    "-3ns",
    "1e999999999ns",
    "1e-999999999s",
    "1.0000000000000000000000000000001s",
    ".inf",
    "nan",
    "12 parsecs",
    "ring",
    "switch",
    "fully_connected",
    "cube",
    "pe",
    "sip",
    "NW",
    "auto",
    "hierarchical",
    "0x10",
    "é" * 3,
    "\u202e\u0000x",
    "a" * 5000,
    "/dev/zero",
    "../../../../etc/passwd",
    "%s%s%n",
    "{{}}",
    "[",
    "$$x$$",  # mathtext in a plot's labels
    "$\\frac{$",
]


def hostile_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if roll < 0.7 or depth > 2:
        return rng.choice(HOSTILE_SCALARS)
    if roll < 0.85:
        return [hostile_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {
        rng.choice(["a", "count", "link", "bandwidth", "w", "", "1"]): hostile_value(rng, depth + 1)
        for _ in range(rng.randint(0, 3))
    }


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _paths(value, (*prefix, index))
    return found


def mutate_document(rng: random.Random, document: Any, edits: int | None = None) -> Any:
    """Structural edits: replace, delete, add or rename keys (a deep copy is edited)."""
    doc = json.loads(json.dumps(document, default=str))
    for _ in range(edits if edits is not None else rng.randint(1, 4)):
        paths = _paths(doc)
        if not paths:
            return hostile_value(rng)
        path = rng.choice(paths)
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        last = path[-1]
        action = rng.choice(["replace", "replace", "delete", "add", "rename", "wrap"])
        if action == "replace":
            parent[last] = hostile_value(rng)
        elif action == "delete":
            del parent[last]
        elif action == "add" and isinstance(parent[last], dict):
            parent[last][rng.choice(["x", "extra", "count", "1", ""])] = hostile_value(rng)
        elif action == "rename" and isinstance(parent, dict):
            parent[f"{last}_"] = parent.pop(last)
        elif action == "wrap":
            parent[last] = [parent[last]]
    return doc


def dump(document: Any) -> bytes:
    try:
        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode()
    except yaml.YAMLError:
        return json.dumps(document, default=str).encode()


ALIAS_BOMB = b"""\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def byte_mutation(rng: random.Random, data: bytes) -> bytes:
    """Corrupt bytes: other encodings, binary junk, truncation, bombs, deep nesting."""
    choice = rng.randrange(12)
    if choice == 0:
        return data.decode("utf-8", "replace").encode("utf-16")
    if choice == 1:
        return data.replace(b"e", b"\xe9", 3)  # latin-1 bytes
    if choice == 2:
        cut = rng.randrange(len(data) + 1)
        return data[:cut]
    if choice == 3:
        spot = rng.randrange(len(data) + 1)
        return (
            data[:spot] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[spot:]
        )
    if choice == 4:
        return ALIAS_BOMB
    if choice == 5:
        depth = rng.choice([100, 5000, 100000])
        return b"a: " + b"[" * depth + b"]" * depth + b"\n"
    if choice == 6:
        depth = rng.choice([100, 5000])
        return b"".join(b"  " * i + b"k:\n" for i in range(depth))
    if choice == 7:
        return b"\x00" * rng.randint(1, 64) + data
    if choice == 8:
        return b"? [a, b]\n: 1\n{[1]: 2}: 3\n"
    if choice == 9:
        return data + b"\n---\nsecond: document\n"
    if choice == 10:
        return b"a: &x [*x]\n"
    return data.replace(b":", b"", 1)


def _bundled_documents() -> list[Any]:
    return [yaml.safe_load(path.read_text()) for path in TOPOLOGIES]


# -- generators ----------------------------------------------------------------------------------

Generator = Callable[[random.Random], Case]


def _topology_bytes(rng: random.Random) -> bytes:
    docs = _bundled_documents()
    doc = rng.choice(docs)
    if rng.random() < 0.5:
        doc = mutate_document(rng, doc, rng.choice([1, 1, 2, 4]))
    if isinstance(doc, dict) and "extends" in doc:
        doc["extends"] = str(REPO / "topologies" / "default.yaml")
    data = dump(doc)
    if rng.random() < 0.35:
        data = byte_mutation(rng, data)
    return data


def special_path(rng: random.Random, case: Case, name: str) -> str:
    """A path that is not a regular file: a FIFO, a device, a directory, a link to one."""
    pick = rng.randrange(6)
    if pick == 0:
        case.fifos += (name,)
        return name
    if pick == 1:
        return rng.choice(["/dev/zero", "/dev/null", "/dev/urandom"])
    if pick == 2:
        case.dirs += (name,)
        return name
    if pick == 3:
        case.links[name] = "/dev/zero"
        return name
    if pick == 4:
        case.files[name] = b"x: " + b"y" * (5 * 2**20)  # over the configuration limit
        return name
    return "missing-" + name


def gen_topology(rng: random.Random) -> Case:
    case = Case("topology", [])
    if rng.random() < 0.15:
        path = special_path(rng, case, "topo.yaml")
    elif rng.random() < 0.2:
        path = "topo.yaml"
        variant = rng.randrange(5)
        if variant == 0:  # extends a special file
            target = special_path(rng, case, "parent.yaml")
            case.files[path] = f"extends: {target}\nname: x\n".encode()
        elif variant == 1:  # a cycle
            case.files[path] = b"extends: other.yaml\n"
            case.files["other.yaml"] = b"extends: topo.yaml\n"
        elif variant == 2:  # a long chain
            length = rng.choice([40, 2000])
            for i in range(length):
                case.files[f"c{i}.yaml"] = f"extends: c{i + 1}.yaml\n".encode()
            case.files[f"c{length}.yaml"] = (REPO / "topologies" / "tiny.yaml").read_bytes()
            case.files["tiny.yaml"] = case.files[f"c{length}.yaml"]
            case.files["default.yaml"] = (REPO / "topologies" / "default.yaml").read_bytes()
            case.files[path] = b"extends: c0.yaml\n"
        elif variant == 3:
            case.files[path] = b"extends: /etc/passwd\n"
        else:
            case.files[path] = b"extends: " + _topology_bytes(rng)[:200] + b"\n"
    else:
        path = "topo.yaml"
        case.files[path] = _topology_bytes(rng)
    overrides = []
    for _ in range(rng.choice([0, 0, 1, 2])):
        overrides += ["--set", random_override(rng)]
    if rng.random() < 0.25:
        case.files["bench.py"] = TINY_BENCH.encode()
        case.argv = ["run", "bench.py", "--topology", path, "--timing-only", *overrides]
    else:
        case.argv = ["topo", "show", path, *overrides, *(["--json"] if rng.random() < 0.3 else [])]
    return case


SET_KEYS = [
    "system.sips.count",
    "sip.cube_mesh.w",
    "sip.cube_mesh.h",
    "sip.cube_mesh.torus",
    "sip.cube_mesh.link.bandwidth",
    "sip.cube_mesh.link.latency",
    "system.interconnect.kind",
    "system.device_level",
    "cube.pe_layout.pe_per_corner",
    "cube.pe_layout.corners",
    "cube.memory_map.hbm_slices_per_cube",
    "cube.memory_map.hbm_total_gb_per_cube",
    "cube.pe_template.components.pe_mmu.attrs.page_size",
    "cube.pe_template.components.pe_tcm.attrs.size_mb",
    "fabric.packet_bytes",
    "faults.links",
    "faults.pes",
    "nope.key",
    "system",
    "a.b.c.d.e.f",
]


def random_override(rng: random.Random) -> str:
    key = rng.choice(SET_KEYS)
    roll = rng.random()
    if roll < 0.1:
        value = "{" + ", ".join(ALIAS_BOMB.decode().strip().splitlines()) + "}"
    elif roll < 0.2:
        depth = rng.choice([100, 100000])
        value = "[" * depth + "]" * depth
    elif roll < 0.3:
        value = json.dumps(hostile_value(rng))
    else:
        value = str(rng.choice(HOSTILE_SCALARS))
    if rng.random() < 0.05:
        key = ".".join(["k"] * rng.choice([70, 3]))
    return f"{key}={value}"


def gen_set(rng: random.Random) -> Case:
    overrides = []
    for _ in range(rng.randint(1, 3)):
        overrides += ["--set", random_override(rng)]
    return Case("set", ["topo", "show", str(REPO / "topologies" / "tiny.yaml"), *overrides])


CCL_KEYS = [
    "ccl.all_reduce",
    "ccl.all",
    "ccl.broadcast",
    "ccl.configs.ring.chunks",
    "ccl.configs.ring.buffer",
    "ccl.configs.ring.queue_depth",
    "ccl.configs.mesh2d.params.algorithms",
    "ccl.configs.hierarchical.params.levels",
    "ccl.configs.hierarchical.params.algorithms",
    "ccl.configs.new.module",
    "ccl.configs.new.world_size",
    "ccl.defaults.algorithm.all_reduce",
    "ccl.tune_table",
    "ccl.nonsense",
]


def gen_catalogue(rng: random.Random) -> Case:
    case = Case("catalogue", [])
    case.files["bench.py"] = TINY_BENCH.encode()
    overrides = []
    for _ in range(rng.randint(1, 3)):
        key = rng.choice(CCL_KEYS)
        value = rng.choice(
            [
                *[str(v) for v in HOSTILE_SCALARS[:20]],
                "ring",
                "auto",
                "hierarchical",
                "mesh2d",
                "[]",
                "[cube, sip, pe]",
                "5",
                "[ring, nope]",
                "{module: ring}",
            ]
        )
        overrides += ["--set", f"{key}={value}"]
    case.argv = ["run", "bench.py", "--topology", str(REPO / "topologies" / "tiny.yaml")]
    case.argv += ["--timing-only", "--set", "system.device_level=pe", *overrides]
    return case


def _tune_table(rng: random.Random) -> Any:
    table = {
        "topology": "tiny",
        "topology_digest": "0" * 16,
        "world_size": 4,
        "results": [
            {
                "op": "all_reduce",
                "bytes": 4096,
                "world_size": 4,
                "times_ps": {"ring": 100, "direct": 200},
                "winner": "ring",
            }
        ],
    }
    return mutate_document(rng, table) if rng.random() < 0.8 else table


def gen_tune_table(rng: random.Random) -> Case:
    case = Case("tune_table", [])
    case.files["bench.py"] = TINY_BENCH.encode()
    if rng.random() < 0.15:
        path = special_path(rng, case, "table.yaml")
    else:
        path = "table.yaml"
        data = dump(_tune_table(rng))
        if rng.random() < 0.3:
            data = byte_mutation(rng, data)
        case.files[path] = data
    case.argv = ["run", "bench.py", "--topology", str(REPO / "topologies" / "tiny.yaml")]
    case.argv += ["--timing-only", "--set", "system.device_level=pe"]
    case.argv += ["--set", "ccl.all_reduce=auto", "--set", f"ccl.tune_table={path}"]
    return case


def gen_sweep(rng: random.Random) -> Case:
    case = Case("sweep", [])
    case.files["bench.py"] = TINY_BENCH.encode()
    case.files["tiny.yaml"] = (REPO / "topologies" / "tiny.yaml").read_bytes()
    case.files["default.yaml"] = (REPO / "topologies" / "default.yaml").read_bytes()
    doc = {"bench": "bench.py", "topologies": ["tiny.yaml"], "timing_only": True}
    if rng.random() < 0.85:
        doc = mutate_document(rng, doc)
    data = dump(doc)
    if rng.random() < 0.3:
        data = byte_mutation(rng, data)
    path = "sweep.yaml"
    if rng.random() < 0.1:
        path = special_path(rng, case, "sweep.yaml")
    else:
        case.files[path] = data
    case.argv = ["sweep", path, "-o", "out"]
    return case


_ARTIFACTS: dict[str, Any] = {}


def real_artifacts() -> dict[str, Any]:
    """A real run report, its CSV and a sweep summary of the tiny bench (made once)."""
    if not _ARTIFACTS:
        from kernbench.cli import main

        folder = Path(tempfile.mkdtemp(prefix="kbfuzz-art-"))
        (folder / "bench.py").write_text(TINY_BENCH)
        tiny = str(REPO / "topologies" / "tiny.yaml")
        (folder / "sweep.yaml").write_text(
            f"bench: bench.py\ntopologies: [{tiny}]\nset: {{ccl.all_reduce: [ring, direct]}}\n"
        )
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            main(
                [
                    "run",
                    str(folder / "bench.py"),
                    "--topology",
                    tiny,
                    "--timing-only",
                    "--set",
                    "system.device_level=pe",
                    "--report",
                    str(folder / "r.json"),
                    "--csv",
                    str(folder / "r.csv"),
                ]
            )
            main(["sweep", str(folder / "sweep.yaml"), "-o", str(folder / "out")])
        _ARTIFACTS["report"] = json.loads((folder / "r.json").read_text())
        _ARTIFACTS["csv"] = (folder / "r.csv").read_bytes()
        _ARTIFACTS["summary"] = json.loads((folder / "out" / "summary.json").read_text())
        shutil.rmtree(folder, ignore_errors=True)
    return _ARTIFACTS


def _report(rng: random.Random) -> Any:
    artifacts = real_artifacts()
    if rng.random() < 0.6:
        return artifacts["report"] if rng.random() < 0.6 else artifacts["summary"]
    rows = [
        {"op": "all_reduce", "size_B": 2**i, "time_us": 1.0 + i, "busbw_GBps": 10.0 * i}
        for i in range(rng.randint(0, 6))
    ]
    if rng.random() < 0.5:
        return {"results": rows, "simulated_time_ps": 1000, "metadata": {"topology": "tiny"}}
    return {"points": 1, "ok": 1, "failed": [], "rows": rows}


def _results_bytes(rng: random.Random) -> bytes:
    if rng.random() < 0.15:
        data = real_artifacts()["csv"]
        return byte_mutation(rng, data) if rng.random() < 0.5 else data
    report = _report(rng)
    if rng.random() < 0.6:
        report = mutate_document(rng, report, rng.randint(1, 2))
    if rng.random() < 0.3:
        rows = report.get("results") or report.get("rows") if isinstance(report, dict) else None
        if isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows):
            header = sorted({k for r in rows for k in r})
            text = ",".join(header) + "\n"
            text += "".join(",".join(str(r.get(k, "")) for k in header) + "\n" for r in rows)
            data = text.encode()
        else:
            data = b"a,b\n1,2,3\n"
    else:
        data = json.dumps(report, default=str).encode()
    if rng.random() < 0.25:
        data = byte_mutation(rng, data)
    if rng.random() < 0.05:
        depth = rng.choice([200, 100000])
        data = b"[" * depth + b"]" * depth
    return data


def _results_file(rng: random.Random, case: Case, stem: str) -> str:
    if rng.random() < 0.1:
        return special_path(rng, case, stem + ".json")
    suffix = rng.choice([".json", ".json", ".csv"])
    name = stem + suffix
    case.files[name] = _results_bytes(rng)
    return name


def gen_regress(rng: random.Random) -> Case:
    case = Case("regress", [])
    base = _results_file(rng, case, "base")
    current = _results_file(rng, case, "current") if rng.random() < 0.8 else base
    argv = ["regress", base, current]
    if rng.random() < 0.3:
        argv += ["--tolerance", rng.choice(["2%", "0", "-1", "nan", "abc", "1e999", "200%"])]
    if rng.random() < 0.3:
        argv += ["--key", rng.choice(["op", "size_B", "nope", ""])]
    case.argv = argv
    return case


def gen_plot(rng: random.Random) -> Case:
    case = Case("plot", [])
    inputs = [_results_file(rng, case, f"in{i}") for i in range(rng.randint(1, 3))]
    out = rng.choice(["out.png", "out.svg", "out.pdf", "out.xyz", "out", "-"])
    if rng.random() < 0.1:
        out = special_path(rng, case, "plotout.png")
    argv = ["plot", *inputs, "-o", out]
    if rng.random() < 0.3:
        argv += ["--x", rng.choice(["size_B", "nope", "op"]), "--y", rng.choice(["time_us", "x"])]
    if rng.random() < 0.2:
        argv += ["--breakdown"]
    case.argv = argv
    return case


SCRIPT_BODIES = [
    "x = 1 +\n",
    "import nonexistent_module_xyz\n",
    "raise RuntimeError('at import')\n",
    "def main():\n    raise ValueError('in rank')\n",
    "def main():\n    return 1 / 0\n",
    "import sys\ndef main():\n    sys.exit(3)\n",
    "def main():\n    return [{'a': object()}]\n",
    "def main():\n    return [{'a': float('nan')}]\n",
    "def main():\n    return {'not': 'a list'}\n",
    "def run(rank, world_size):\n    return rank\n",
    "x = 1\n",
    "def main():\n    def f(n):\n        return f(n + 1)\n    return f(0)\n",
    "import kernbench.torch as torch\ndef main():\n    torch.empty(10**20)\n",
    "import kernbench.torch as torch\ndef main():\n    torch.empty(2**37)\n",
    "import kernbench.torch as torch\ndef main():\n    torch.ones(-5)\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n"
    "    if dist.get_rank() == 0:\n        dist.all_reduce(torch.ones(8))\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n"
    "    dist.all_reduce(torch.ones(8 + dist.get_rank()))\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n"
    "    dist.all_reduce(torch.ones(8), algorithm=['ring', 'direct'][dist.get_rank() % 2])\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n    dist.send(torch.ones(4), dst=99)\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n"
    "    dist.recv(torch.ones(4), src=dist.get_rank())\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n    dist.all_reduce(torch.ones(8), op='nope')\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n    dist.all_reduce(torch.ones(8), "
    "algorithm='hierarchical')\n",
    "import kernbench.torch.distributed as dist\nimport kernbench.torch as torch\n"
    "def main():\n    dist.init_process_group()\n"
    "    g = dist.new_group([0, 1])\n    dist.all_reduce(torch.ones(8), group=g)\n",
    "import kernbench.kernels as kk\nimport kernbench.torch as torch\nimport "
    "kernbench.kernels.language as tl\n@kk.jit\ndef k(x, n, B: tl.constexpr):\n"
    "    i = tl.arange(0, B)\n    tl.store(x + i + 10**6, tl.load(x + i))\n"
    "def main():\n    x = torch.ones(16)\n    k[(1,)](x, 16, B=16)\n",
    "import kernbench.kernels as kk\nimport kernbench.torch as torch\nimport "
    "kernbench.kernels.language as tl\n@kk.jit\ndef k(x, n, B: tl.constexpr):\n"
    "    pass\ndef main():\n    x = torch.ones(16)\n    k[(10**12,)](x, 16, B=16)\n",
    "import kernbench.kernels as kk\nimport kernbench.torch as torch\nimport "
    "kernbench.kernels.language as tl\n@kk.jit\ndef k(x, n, B: tl.constexpr):\n"
    "    pass\ndef main():\n    x = torch.ones(16)\n    k[(-1, 2.5)](x, 16, B=16)\n",
    "import kernbench.torch as torch\ndef main():\n    t = torch.ones(4)\n"
    "    t.free() if hasattr(t, 'free') else None\n    return float(t.sum())\n",
    "import kernbench.torch as torch\ndef main():\n"
    "    return [float(torch.ones(4, dtype=torch.float16).sum())]\n",
    "import kernbench.torch as torch\ndef main():\n    torch.ones(4).to('cuda:99')\n",
]


def gen_script(rng: random.Random) -> Case:
    case = Case("script", [])
    roll = rng.random()
    if roll < 0.75:
        body = rng.choice(SCRIPT_BODIES)
        if rng.random() < 0.2:
            body = body.replace("(", "((", 1)
        data = body.encode()
    elif roll < 0.9:
        data = byte_mutation(rng, rng.choice(SCRIPT_BODIES).encode())
    else:
        path = special_path(rng, case, "bench.py")
        case.argv = ["run", path, "--topology", str(REPO / "topologies" / "tiny.yaml")]
        return case
    case.files["bench.py"] = data
    if b"sys.exit(3)" in data:
        case.statuses = (*OK_STATUSES, 3)
    topology = rng.choice(["tiny.yaml", "ring8.yaml"])
    argv = ["run", "bench.py", "--topology", str(REPO / "topologies" / topology)]
    if rng.random() < 0.5:
        argv.append("--timing-only")
    if rng.random() < 0.3:
        argv += ["--set", "system.device_level=pe"]
    if rng.random() < 0.2:
        argv += ["--max-wall-time", rng.choice(["2s", "0s", "-1s", "1e999s", "abc"])]
    if rng.random() < 0.2:
        target = rng.choice(["report.json", "-", "/dev/full", "out/dir/", "bench.py"])
        argv += [rng.choice(["--report", "--csv", "--trace"]), target]
    case.argv = argv
    return case


GENERATORS: dict[str, Generator] = {
    "topology": gen_topology,
    "set": gen_set,
    "catalogue": gen_catalogue,
    "tune_table": gen_tune_table,
    "sweep": gen_sweep,
    "regress": gen_regress,
    "plot": gen_plot,
    "script": gen_script,
}
# Sweeps start a process per point: fewer of them keeps a long run's time in bounds.
WEIGHTS = {"sweep": 0.3}


def make_case(seed: int) -> Case:
    rng = random.Random(seed)
    kinds = list(GENERATORS)
    weights = [WEIGHTS.get(kind, 1.0) for kind in kinds]
    kind = rng.choices(kinds, weights)[0]
    return GENERATORS[kind](rng)


# -- running -------------------------------------------------------------------------------------


class _Hang(BaseException):
    pass


def _on_alarm(_signum: int, _frame: Any) -> None:
    raise _Hang


def _materialise(case: Case, folder: Path) -> None:
    for name, data in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for name in case.fifos:
        os.mkfifo(folder / name)
    for name in case.dirs:
        (folder / name).mkdir(exist_ok=True)
    for name, target in case.links.items():
        (folder / name).symlink_to(target)


def run_case(seed: int) -> Outcome:
    """Run one case in this process, in a fresh directory, with a hang alarm."""
    from kernbench.cli import main

    case = make_case(seed)
    folder = Path(tempfile.mkdtemp(prefix="kbfuzz-"))
    here = os.getcwd()
    err, out = io.StringIO(), io.StringIO()
    status: int | None = None
    verdict = "ok"
    start = time.perf_counter()
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    try:
        _materialise(case, folder)
        os.chdir(folder)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            status = main(list(case.argv))
    except _Hang:
        verdict = "hang"
    except SystemExit as exc:  # should not escape main(); count it as a crash of the CLI
        status, verdict = (exc.code if isinstance(exc.code, int) else 1), "crash"
    except BaseException as exc:  # noqa: BLE001 - the point is to see what escapes
        import traceback

        verdict = "traceback"
        err.write("".join(traceback.format_exception(exc)))
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        os.chdir(here)
        shutil.rmtree(folder, ignore_errors=True)
    seconds = time.perf_counter() - start
    text = err.getvalue()
    if verdict == "ok" and (status not in case.statuses or "Traceback (most recent" in text):
        verdict = "traceback"
    return Outcome(case.kind, seed, case.argv, status, verdict, seconds, text[-3000:])


def _worker(seed: int) -> Outcome:
    return run_case(seed)


def run_many(seeds: list[int], jobs: int) -> list[Outcome]:
    real_artifacts()  # made once, before the workers fork
    if jobs <= 1:
        return [run_case(seed) for seed in seeds]
    context = multiprocessing.get_context("fork")
    outcomes = []
    with context.Pool(jobs, maxtasksperchild=100) as pool:
        for outcome in pool.imap_unordered(_worker, seeds, chunksize=4):
            outcomes.append(outcome)
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--start", type=int, default=0, help="first seed")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    start = time.perf_counter()
    outcomes = run_many(list(range(args.start, args.start + args.count)), args.jobs)
    tally: Counter = Counter((o.kind, o.verdict) for o in outcomes)
    print(f"{len(outcomes)} inputs in {time.perf_counter() - start:.0f} s")
    for kind in GENERATORS:
        counts = {v: tally[(kind, v)] for v in ("ok", "traceback", "hang", "crash")}
        print(f"  {kind:<11} " + "  ".join(f"{v} {n}" for v, n in counts.items()))
    slowest = max(outcomes, key=lambda o: o.seconds, default=None)
    if slowest:
        print(f"slowest: {slowest.seconds:.1f} s (seed {slowest.seed}, {slowest.kind})")
    bad = [o for o in outcomes if o.verdict != "ok"]
    for o in sorted(bad, key=lambda o: o.seed):
        print(f"\n== seed {o.seed} {o.kind} {o.verdict} status={o.status} {o.seconds:.1f}s")
        print("   argv:", o.argv)
        print("   " + o.stderr.strip().replace("\n", "\n   ")[-1500:])
    print(f"\nfailures: {len(bad)}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
