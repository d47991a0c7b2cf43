"""Safe reads and writes: only regular files, bounded, atomic, never over a special file."""

from __future__ import annotations

import os
import stat

import pytest

from kernbench.errors import InputFileError, OutputFileError
from kernbench.files import read_text, write_text


def test_round_trip_and_bom(tmp_path):
    path = tmp_path / "a" / "b.txt"
    write_text(path, "héllo")
    assert read_text(path) == "héllo"
    path.write_bytes(b"\xef\xbb\xbfkey: 1\n")
    assert read_text(path) == "key: 1\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfek\x00e\x00y\x00", "UTF-16 or UTF-32"),
        (b"key: \x00\x01\x02", r"binary data \(a NUL byte at offset 5\)"),
        (b"name: caf\xe9\n", r"not UTF-8 text \(byte 0xe9 at offset 9\)"),
    ],
)
def test_undecodable_inputs_are_named(tmp_path, content, message):
    path = tmp_path / "topo.yaml"
    path.write_bytes(content)
    with pytest.raises(InputFileError, match=message) as info:
        read_text(path, what="topology")
    assert str(path) in str(info.value)


@pytest.mark.parametrize(("target", "kind"), [("/dev/zero", "a device"), ("/dev/null", "a device")])
def test_devices_are_not_read(target, kind):
    with pytest.raises(InputFileError, match=f"is {kind}; only regular files are read"):
        read_text(target)


def test_fifo_is_not_read_and_does_not_block(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputFileError, match="a FIFO"):
        read_text(fifo)


def test_directory_and_missing_and_size_limit(tmp_path):
    with pytest.raises(InputFileError, match="directory"):
        read_text(tmp_path)
    with pytest.raises(InputFileError, match="not found"):
        read_text(tmp_path / "nope")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2000)
    with pytest.raises(InputFileError, match="2000 bytes, over the limit of 1000 bytes"):
        read_text(big, limit=1000)
    assert read_text(big, limit=2000) == "x" * 2000


def test_write_refuses_symlink_fifo_device_directory(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for target, kind in [
        (link, "a symbolic link"),
        (fifo, "a FIFO"),
        ("/dev/full", "a device"),
        (tmp_path, "a directory"),
    ]:
        with pytest.raises(OutputFileError, match=f"target is {kind}"):
            write_text(target, "new")
    assert link.is_symlink() and real.read_text() == "keep"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_write_under_a_file_and_nul_are_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(OutputFileError, match="is not a regular file, not a directory|Not a dir"):
        write_text(blocker / "out.json", "x")
    with pytest.raises(OutputFileError, match=r"a\\x00b: output path contains a NUL"):
        write_text("a\x00b", "x")


def test_read_only_directory_is_an_error_and_leaves_no_temp(tmp_path):
    folder = tmp_path / "ro"
    folder.mkdir()
    target = folder / "out.json"
    target.write_text("old")
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        with pytest.raises(OutputFileError, match="cannot write"):
            write_text(target, "new")
    finally:
        folder.chmod(0o700)
    assert target.read_text() == "old"
    assert sorted(p.name for p in folder.iterdir()) == ["out.json"]


def test_stdout_writes_through(capfdbinary):
    write_text("-", "one\n")
    write_text("/dev/stdout", "two\n")
    assert capfdbinary.readouterr().out == b"one\ntwo\n"


def test_replaces_regular_file_atomically(tmp_path):
    target = tmp_path / "r.json"
    target.write_text("old")
    write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]
