"""Every kind of file a user hands in meets every kind of hostile file the same way.

Topologies, catalogues, sweep files and tune tables are all read by
kernbench.yamlfile: each hostile file below is one ConfigError naming the
file, within a second, for every kind.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kernbench.bench.sweep import load_sweep
from kernbench.ccl.catalogue import load_catalogue
from kernbench.ccl.tune_table import load_tune_table
from kernbench.errors import ConfigError, InputFileError
from kernbench.topology import load_topology

LOADERS: dict[str, Callable[[Path], object]] = {
    "topology": load_topology,
    "catalogue": load_catalogue,
    "sweep": load_sweep,
    "tune table": load_tune_table,
}

BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)

HOSTILE: dict[str, tuple[str | bytes | None, str]] = {
    "latin-1": ("name: café\n".encode("latin-1"), "not UTF-8"),
    "utf-16": ("name: x\n".encode("utf-16"), "UTF-16"),
    "binary": (b"\x7fELF\x02\x01\x01\x00" * 8, "binary data"),
    "alias bomb": (BOMB, "aliases expand to more than"),
    "deep flow": ("[" * 100_000 + "]" * 100_000, "nested more than"),
    "deep json": ('{"a": ' * 100_000 + "1" + "}" * 100_000, "nested more than"),
    "deep block": ("- " * 30_000 + "1\n", "nested more than"),
    "unhashable key": ("? [a, b]\n: 1\n", "mapping key must be a plain value"),
    "flow unhashable key": ("{[1]: 2}\n", "mapping key must be a plain value"),
    "duplicate key": ("name: a\nname: b\n", "appears twice"),
    "bad timestamp": ("when: !!timestamp 2024-13-45\n", "not a valid timestamp"),
    "syntax": ("a: [1, 2\nb: 'SECRET\n", "invalid YAML at line"),
    "fifo": (None, "a FIFO"),
}


@pytest.mark.parametrize("kind", LOADERS)
@pytest.mark.parametrize("case", HOSTILE)
def test_every_file_kind_refuses_every_hostile_file(tmp_path, kind, case):
    content, fragment = HOSTILE[case]
    path = tmp_path / "input.yaml"
    if content is None:
        os.mkfifo(path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        LOADERS[kind](path)
    assert time.perf_counter() - start < 1.0
    message = str(info.value)
    assert message.startswith(f"{path}: ")
    assert fragment in message
    assert "SECRET" not in message and "lol" not in message
    assert len(message) < 500


@pytest.mark.parametrize("kind", LOADERS)
@pytest.mark.parametrize("target", ["/dev/zero", "/dev/null", "/"])
def test_every_file_kind_refuses_special_files(kind, target):
    start = time.perf_counter()
    with pytest.raises(InputFileError) as info:
        LOADERS[kind](Path(target))
    assert time.perf_counter() - start < 1.0
    assert "only regular files" in str(info.value) or "directory" in str(info.value)
