"""The one YAML loader (kernbench.yamlfile): bounded, strict, and every failure a ConfigError.

Each hostile input here used to run for minutes, end in MemoryError or
RecursionError, crash with a TypeError, or echo the file's text in the error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernbench.errors import ConfigError, InputFileError, KernBenchError
from kernbench.yamlfile import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    YamlSyntaxError,
    load_yaml,
    load_yaml_mapping,
    parse_yaml,
)

# "Billion laughs": 9 levels of 9 aliases each expand to 9^9 (387 million) strings.
BOMB = "\n".join(
    ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
)


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def quick(fn, *args, **kwargs):
    """Call ``fn`` and return what it raised, checking it took well under a second."""
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        fn(*args, **kwargs)
    assert time.perf_counter() - start < 1.0
    return info.value


# --- what it reads ------------------------------------------------------------------


def test_a_mapping_with_anchors_merge_keys_and_json_syntax(tmp_path):
    path = write(
        tmp_path / "t.yaml",
        "link: &link {bandwidth: 50GB/s, latency: 1us}\n"
        "a: *link\n"
        "b: {<<: *link, latency: 2us}\n"
        'c: {"x": [1, 2.5, true, null]}\n',
    )
    document = load_yaml_mapping(path, what="topology")
    assert document == {
        "link": {"bandwidth": "50GB/s", "latency": "1us"},
        "a": {"bandwidth": "50GB/s", "latency": "1us"},
        "b": {"bandwidth": "50GB/s", "latency": "2us"},
        "c": {"x": [1, 2.5, True, None]},
    }


def test_an_empty_file_is_an_empty_mapping(tmp_path):
    assert load_yaml_mapping(write(tmp_path / "t.yaml", "# nothing\n")) == {}
    assert load_yaml(write(tmp_path / "u.yaml", "")) is None


def test_parse_yaml_reads_values():
    assert parse_yaml("[NW, SE]", source="--set") == ["NW", "SE"]
    assert parse_yaml("4", source="--set") == 4
    assert parse_yaml("{a: 1}", source="--set") == {"a": 1}


def test_a_legitimate_document_near_the_limits_loads():
    deep = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    assert parse_yaml(deep, source="x") is not None
    items = ", ".join(["*a"] * (MAX_ALIAS_NODES // 2 - 1))
    value = parse_yaml(f"{{k: &a [1], v: [{items}]}}", source="x")
    assert len(value["v"]) == MAX_ALIAS_NODES // 2 - 1


# --- alias bombs --------------------------------------------------------------------


def test_alias_bomb_in_a_file_is_refused_at_once(tmp_path):
    path = write(tmp_path / "bomb.yaml", BOMB)
    assert path.stat().st_size < 600
    error = quick(load_yaml_mapping, path, what="topology")
    message = str(error)
    assert str(path) in message
    assert f"aliases expand to more than {MAX_ALIAS_NODES} nodes" in message
    assert "line 5" in message  # a4: the first alias past the budget
    assert "lol" not in message


def test_alias_bomb_in_text_is_refused_at_once():
    error = quick(parse_yaml, BOMB.replace("\n", ", ").join("{}"), source="--set x")
    assert "--set x" in str(error) and "aliases expand to more than" in str(error)


def test_merge_key_bomb_is_refused():
    levels = ["a0: &a0 {k: v}"] + [
        f"a{i}: &a{i} {{<<: [{', '.join([f'*a{i - 1}'] * 9)}], x{i}: 1}}" for i in range(1, 12)
    ]
    quick(parse_yaml, "\n".join(levels), source="x")


def test_an_alias_inside_its_own_anchor_is_refused():
    error = quick(parse_yaml, "a: &a [1, *a]", source="x")
    assert "contains it" in str(error)


def test_undefined_alias_gives_line_and_column():
    error = quick(parse_yaml, "a: 1\nb: *nope\n", source="x")
    assert "line 2, column 4" in str(error)


# --- depth --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000 + "]" * 100_000, "{a: " * 100_000 + "1" + "}" * 100_000, "- " * 30_000 + "1"],
)
def test_deep_nesting_is_refused_at_once(text):
    error = quick(parse_yaml, text, source="x")
    assert f"nested more than {MAX_DEPTH} levels" in str(error)


def test_deep_nesting_in_a_file_names_the_file_and_line(tmp_path):
    path = write(tmp_path / "deep.yaml", "a:\n" + "".join(f"{' ' * i}  b:\n" for i in range(80)))
    error = quick(load_yaml, path)
    assert str(path) in str(error) and "line" in str(error)


# --- keys ---------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["? [a, b]\n: 1\n", "{[1]: 2}", "{{a: 1}: 2}", "? {a: 1}\n: 2"])
def test_unhashable_keys_are_a_config_error(text):
    error = quick(parse_yaml, text, source="x")
    assert "mapping key must be a plain value" in str(error)
    assert "line 1" in str(error)


def test_duplicate_keys_are_refused_with_their_position():
    error = quick(parse_yaml, "a: 1\nb: 2\na: 3\n", source="f.yaml")
    assert "key 'a' appears twice" in str(error)
    assert "line 3, column 1" in str(error)


def test_a_duplicate_key_that_is_not_a_plain_name_is_not_echoed():
    line = "root:$6$SECRETSALT$hash:19000:0:99999:7:::"
    error = quick(parse_yaml, f"{line}\n{line}\n", source="/etc/shadow")
    assert "appears twice" in str(error) and "line 2, column 1" in str(error)
    assert "SECRET" not in str(error)


# --- values the constructor cannot build ---------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "when: !!timestamp 2024-13-45",  # a timestamp with month 13
        "n: !!int " + "9" * 5000,  # past Python's int-from-string limit
        "x: !!float abc",
        "x: !!binary a",
        "x: !!python/object:os.system {}",
        "x: !!set {a: 1, [b]: 2}",
    ],
)
def test_values_the_constructor_rejects_are_config_errors(text):
    error = quick(parse_yaml, text, source="f.yaml")
    assert "f.yaml" in str(error) and "line 1" in str(error)


def test_a_set_is_refused_since_its_order_changes_from_run_to_run():
    """A !!set given for a list key (cube.pe_layout.corners) made a machine whose corner
    order, and so its digest, depended on the process's string hashing."""
    with pytest.raises(
        ConfigError,
        match=r"^--set x: line 1, column 1: a set \(!!set\) has no order, and no key takes "
        r"one; write a list such as \[a, b\]$",
    ):
        parse_yaml("!!set {SE, NW, NE}", source="--set x")
    assert parse_yaml("{SE: null, NW: null}", source="s") == {"SE": None, "NW": None}


@pytest.mark.parametrize(
    ("text", "tag", "failure"),
    [
        ("w: !!bool 4", "bool", "KeyError"),
        ("w: !<tag:yaml.org,2002:bool> '1'", "bool", "KeyError"),
        ("w: !!float", "float", "IndexError"),
        ("count: !!timestamp 8", "timestamp", "AttributeError"),
    ],
)
def test_explicit_tags_pyyamls_constructors_fail_on_are_config_errors(text, tag, failure):
    """PyYAML's own constructors raise KeyError, IndexError or AttributeError on these;
    they used to escape as an internal error."""
    with pytest.raises(
        ConfigError,
        match=f"^s.yaml: line 1, column [0-9]+: this value is not a valid {tag} \\({failure}\\)$",
    ):
        parse_yaml(text, source="s.yaml")


# --- syntax errors never echo the text ------------------------------------------------


def test_syntax_error_gives_position_and_problem_not_the_text(tmp_path):
    secret = "root:$6$SECRETSALT$hashhashhash:19000:0:99999:7:::"
    path = write(tmp_path / "t.yaml", f"a: [1, 2\nb: '{secret}\n")
    error = quick(load_yaml, path)
    message = str(error)
    assert "invalid YAML at line" in message
    assert "SECRET" not in message and "hashhash" not in message


def test_a_document_that_is_not_a_mapping_says_its_type_only(tmp_path):
    path = write(tmp_path / "token", "SECRETTOKEN-0123456789abcdef\nmore-secret\n")
    error = quick(load_yaml_mapping, path, what="topology")
    assert "not a str" in str(error)
    assert "SECRET" not in str(error) and "more" not in str(error)


def test_two_documents_are_refused():
    error = quick(parse_yaml, "a: 1\n---\nb: 2\n", source="x")
    assert "one document" in str(error) and "line 2" in str(error)


def test_control_characters_are_refused_with_position():
    error = quick(parse_yaml, "a: 1\nb: \x07\n", source="x")
    assert "line 2" in str(error)


# --- files --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ("name: café\n".encode("latin-1"), "not UTF-8"),
        ("name: x\n".encode("utf-16"), "UTF-16"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary"),
    ],
)
def test_undecodable_files_are_input_file_errors(tmp_path, data, fragment):
    path = write(tmp_path / "t.yaml", data)
    error = quick(load_yaml_mapping, path, what="topology")
    assert isinstance(error, InputFileError)
    assert fragment in str(error) and str(path) in str(error)


def test_devices_and_fifos_are_refused_without_reading(tmp_path):
    error = quick(load_yaml_mapping, "/dev/zero", what="topology")
    assert isinstance(error, InputFileError) and "a device" in str(error)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    error = quick(load_yaml_mapping, fifo, what="sweep file")
    assert "a FIFO" in str(error)


def test_syntax_error_is_its_own_class_for_callers_that_fall_back():
    with pytest.raises(YamlSyntaxError):
        parse_yaml("a: [1", source="x")
    with pytest.raises(ConfigError) as info:
        parse_yaml("[" * 1000, source="x")
    assert not isinstance(info.value, YamlSyntaxError)


def test_the_pure_python_parser_is_bounded_the_same_way():
    """Without libyaml the loader falls back to PyYAML's Python parser; same bounds, same errors."""
    cases = {
        "deep": "[" * 2000,
        "bomb": BOMB,
        "recursive": "a: &a [1, *a]",
        "unhashable": "? [a]\n: 1",
        "duplicate": "a: 1\na: 2",
        "control": "a: 1\nb: \x07",
        "syntax": "a: [1",
        "timestamp": "x: !!timestamp 2024-13-45",
        "bool": "x: !!bool 2",
    }
    script = (
        "import json, sys, yaml\n"
        "yaml.__with_libyaml__ = False\n"
        "from kernbench.errors import ConfigError\n"
        "from kernbench.yamlfile import parse_yaml\n"
        "out = {}\n"
        "for name, text in json.loads(sys.stdin.read()).items():\n"
        "    try:\n"
        "        parse_yaml(text, source='s')\n"
        "        out[name] = 'accepted'\n"
        "    except ConfigError as exc:\n"
        "        out[name] = str(exc)\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(cases), capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert "nested more than 64 levels" in out["deep"]
    assert "aliases expand to more than" in out["bomb"] and "line 5" in out["bomb"]
    assert "contains it" in out["recursive"]
    assert "mapping key must be a plain value" in out["unhashable"]
    assert "appears twice" in out["duplicate"]
    assert "line 2" in out["control"] and "U+0007" in out["control"]
    assert "invalid YAML at line 1" in out["syntax"]
    assert "not a valid timestamp" in out["timestamp"]
    assert "not a valid bool (KeyError)" in out["bool"]


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("010", 10),  # YAML 1.1: 8 (octal)
        ("0o10", 8),
        ("0x10", 16),
        ("-3", -3),
        ("1.5", 1.5),
        ("1e3", 1000.0),
        (".inf", float("inf")),
        ("true", True),
        ("1:30", "1:30"),  # YAML 1.1: 90 (base 60)
        ("1_0", "1_0"),  # YAML 1.1: 10
        ("yes", "yes"),  # YAML 1.1: True
        ("off", "off"),  # YAML 1.1: False
        ("0b11", "0b11"),  # YAML 1.1: 3
        ("2026-11-27", "2026-11-27"),  # YAML 1.1: a date
    ],
)
def test_plain_scalars_are_read_by_yaml_1_2s_core_schema(text, value):
    assert parse_yaml(f"a: {text}", source="s") == {"a": value}


def test_a_count_in_base_60_is_refused_not_read_as_another_number():
    from kernbench.topology import load_topology

    assert load_topology("ring8", ["system.sips.count=010"]).system.sips.count == 10
    with pytest.raises(KernBenchError, match="system.sips.count"):
        load_topology("ring8", ["system.sips.count=1:30"])
