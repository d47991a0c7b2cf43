"""``torch.save`` / ``torch.load``: a checkpoint of state dicts round-trips exactly, costs
its host transfers, runs no code when loaded, and refuses what it does not keep."""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from collections import OrderedDict

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.optim as optim
from kernbench.errors import CheckpointError, InputFileError, KernBenchError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _model() -> nn.Module:
    torch.manual_seed(3)
    return nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.Linear(3, 2))


def test_a_models_and_optimizers_state_round_trip_exactly(ctx, tmp_path):
    model = _model()
    opt = optim.AdamW(model.parameters(), lr=1e-3)
    for p in model.parameters():
        p.grad = torch.ones(p.shape)
    opt.step()
    path = tmp_path / "ckpt.pt"
    state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": 7}
    torch.save(state, path)
    loaded = torch.load(path, weights_only=True)
    assert loaded["epoch"] == 7 and isinstance(loaded["model"], OrderedDict)
    assert list(loaded["model"]) == list(model.state_dict())
    for name, value in model.state_dict().items():
        got = loaded["model"][name]
        assert got.dtype is value.dtype and got.shape == value.shape
        np.testing.assert_array_equal(got.numpy(), value.numpy())
    torch.manual_seed(99)  # other weights, until the checkpoint's are loaded
    fresh = nn.Sequential(nn.Linear(4, 3), nn.LayerNorm(3), nn.Linear(3, 2))
    x = torch.from_numpy(np.arange(8, dtype=np.float32).reshape(2, 4))
    assert not np.array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    fresh.load_state_dict(loaded["model"])
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())
    opt2 = optim.AdamW(fresh.parameters(), lr=1.0)
    opt2.load_state_dict(loaded["optimizer"])
    assert opt2.state_dict()["param_groups"] == opt.state_dict()["param_groups"]


def test_every_kind_it_keeps_comes_back_as_it_was(ctx):
    t = torch.tensor([1.5, -2.0, 3.25], dtype=torch.bfloat16)
    p = nn.Parameter(torch.tensor([[1.0, 2.0]]))
    big = torch.tensor([2**62 + 1, -7], dtype=torch.int64)
    obj = {
        "none": None,
        "flags": (True, False),
        "ints": [0, -3, 2**80],
        "floats": [0.1, math.inf, -math.inf],
        "text": "héllo",
        1: "int key",
        (2, "b"): "tuple key",
        "nested": OrderedDict(b=[{"t": t}], a=()),
        "dtype": torch.float16,
        "device": torch.device("cuda", 0),
        "size": torch.Size([2, 3]),
        "param": p,
        "big": big,
        "same": [t, t],  # one tensor twice: one object back
        "numpy_scalar": np.float32(0.5),
        "grad": torch.ones(2).requires_grad_(),
    }
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    back = torch.load(buffer)
    assert back["none"] is None and back["flags"] == (True, False)
    assert back["ints"] == [0, -3, 2**80] and back["floats"] == [0.1, math.inf, -math.inf]
    assert back["text"] == "héllo" and back[1] == "int key" and back[(2, "b")] == "tuple key"
    nested = back["nested"]
    assert type(nested) is OrderedDict and list(nested) == ["b", "a"] and nested["a"] == ()
    assert nested["b"][0]["t"].dtype is torch.bfloat16
    assert nested["b"][0]["t"].tolist() == [1.5, -2.0, 3.25]
    assert back["dtype"] is torch.float16 and back["device"] == torch.device("cuda", 0)
    assert back["size"] == torch.Size([2, 3]) and isinstance(back["size"], torch.Size)
    assert isinstance(back["param"], nn.Parameter) and back["param"].requires_grad
    assert back["param"].tolist() == [[1.0, 2.0]]
    assert back["big"].dtype is torch.int64 and back["big"].tolist() == [2**62 + 1, -7]
    assert back["same"][0] is back["same"][1] is nested["b"][0]["t"]
    assert back["numpy_scalar"] == 0.5 and back["grad"].requires_grad
    nan = torch.load(_saved([math.nan, torch.tensor([math.nan])]))
    assert math.isnan(nan[0]) and math.isnan(nan[1].item())


def _saved(obj) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return buffer


def test_saving_reads_each_tensor_to_the_host_and_loading_writes_it_back(ctx):
    t = torch.ones(1 << 16)  # 256 KiB
    start = ctx.now
    t.numpy()
    read = ctx.now - start
    start = ctx.now
    buffer = _saved({"t": t})
    saved = ctx.now - start
    assert read > 0 and saved == read  # one host read of the tensor, nothing else
    start = ctx.now
    back = torch.load(buffer)["t"]
    loaded = ctx.now - start
    start = ctx.now
    torch.tensor(np.ones(1 << 16, dtype=np.float32))
    assert loaded == ctx.now - start > 0  # one host write, as torch.tensor's
    assert back.sum().item() == 1 << 16


def test_a_timing_only_checkpoint_holds_no_values_and_a_functional_run_refuses_it(tmp_path):
    path = tmp_path / "t.pt"
    with use_context(RuntimeContext("tiny", timing_only=True)):
        torch.save({"w": torch.ones(3, 2, dtype=torch.float16)}, path)
        back = torch.load(path)  # a timing-only run loads its own kind
        assert back["w"].shape == (3, 2) and back["w"].dtype is torch.float16
    with use_context(RuntimeContext("tiny")):
        with pytest.raises(CheckpointError, match=r"saved by a timing-only run .*--timing-only"):
            torch.load(path)
        torch.save({"w": torch.ones(2)}, path)  # a functional checkpoint ...
    with use_context(RuntimeContext("tiny", timing_only=True)):
        assert torch.load(path)["w"].shape == (2,)  # ... loads in a timing-only run too


def test_what_cannot_be_pickled_is_refused_naming_where(ctx):
    with pytest.raises(
        CheckpointError, match=r"cannot pickle the function at \['f'\]: .*state_dict\(\)"
    ):
        torch.save({"f": lambda: 1}, io.BytesIO())


def test_a_container_holding_itself_is_refused(ctx):
    loop: list = []
    loop.append(loop)
    with pytest.raises(CheckpointError, match="nested more than 200 deep"):
        torch.save(loop, io.BytesIO())


def test_files_are_written_whole_and_never_through_a_symlink(ctx, tmp_path):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "ckpt.pt"
    link.symlink_to(target)
    with pytest.raises(KernBenchError, match="symbolic link"):
        torch.save({"a": 1}, link)
    assert target.read_text() == "keep me" and link.is_symlink()
    path = tmp_path / "sub" / "ckpt.pt"
    torch.save({"a": 1}, str(path))
    torch.save({"a": 2}, path)  # replaced atomically
    assert torch.load(os.fspath(path)) == {"a": 2}
    assert [p.name for p in path.parent.iterdir()] == ["ckpt.pt"]  # no temporary left
    with pytest.raises(CheckpointError, match="not a file name"):
        torch.save({}, "-")
    with pytest.raises(CheckpointError, match="open it in binary mode"):
        torch.save({}, io.StringIO())


def test_a_pickle_or_a_damaged_file_is_refused_with_what_to_do(ctx, tmp_path):
    pickled = tmp_path / "torch.pt"
    with zipfile.ZipFile(pickled, "w") as archive:  # torch's layout: archive/data.pkl
        archive.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    with pytest.raises(CheckpointError, match=r"not a checkpoint kernbench.torch.save.*np.save"):
        torch.load(pickled)
    plain = tmp_path / "plain.pt"
    plain.write_bytes(b"\x80\x02}q\x00.")
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        torch.load(plain)
    with pytest.raises(InputFileError, match="checkpoint not found"):
        torch.load(tmp_path / "missing.pt")
    good = _saved({"t": torch.ones(2)}).getvalue()
    with zipfile.ZipFile(io.BytesIO(good)) as archive:
        tree = json.loads(archive.read("checkpoint/tree.json"))
    tree["root"]["dict"][0][1]["shape"] = [3]
    damaged = io.BytesIO()
    with zipfile.ZipFile(damaged, "w") as archive:
        archive.writestr("checkpoint/tree.json", json.dumps(tree))
        with zipfile.ZipFile(io.BytesIO(good)) as source:
            archive.writestr("checkpoint/tensors/0.npy", source.read("checkpoint/tensors/0.npy"))
    damaged.seek(0)
    with pytest.raises(CheckpointError, match=r"damaged: tensor 0 is float32\[2\]"):
        torch.load(damaged)
    huge = io.BytesIO()  # a header claiming 2**40 elements over a few bytes of data
    header = {"descr": "<f4", "fortran_order": False, "shape": (2**40,)}
    np.lib.format.write_array_header_1_0(huge, header)
    tree["root"]["dict"][0][1]["shape"] = [2**40]
    claims = io.BytesIO()
    with zipfile.ZipFile(claims, "w") as archive:
        archive.writestr("checkpoint/tree.json", json.dumps(tree))
        archive.writestr("checkpoint/tensors/0.npy", huge.getvalue() + b"\0" * 8)
    claims.seek(0)
    with pytest.raises(CheckpointError, match="tensor 0's values are cut short"):
        torch.load(claims)  # refused before np.load sizes an array by the header
    deep = io.BytesIO()
    with zipfile.ZipFile(deep, "w") as archive:
        archive.writestr("checkpoint/tree.json", "[" * 100_000 + "]" * 100_000)
    deep.seek(0)
    with pytest.raises(CheckpointError, match="not a checkpoint"):
        torch.load(deep)
    for entry in ({"size": "ab"}, {"size": [1.5]}, {"dtype": "float128"}, {"tensor": True}):
        odd = io.BytesIO()
        with zipfile.ZipFile(odd, "w") as archive:
            archive.writestr(
                "checkpoint/tree.json",
                json.dumps({"format": "kernbench-checkpoint", "version": 1, "values": True,
                            "root": entry}),
            )  # fmt: skip
        odd.seek(0)
        with pytest.raises(CheckpointError, match="is damaged"):
            torch.load(odd)
    tree["version"] = 99
    newer = io.BytesIO()
    with zipfile.ZipFile(newer, "w") as archive:
        archive.writestr("checkpoint/tree.json", json.dumps(tree))
    newer.seek(0)
    with pytest.raises(CheckpointError, match="version 99; this kernbench reads versions 1 to 2"):
        torch.load(newer)


def test_load_arguments_as_torch_takes_them(ctx):
    data = _saved({"t": torch.ones(2)}).getvalue()
    for where in (None, "cpu", "cuda", "cuda:0", torch.device("cuda", 0), 0):
        assert torch.load(io.BytesIO(data), map_location=where)["t"].tolist() == [1.0, 1.0]
    assert torch.load(io.BytesIO(data), weights_only=False)["t"].shape == (2,)
    mapped = torch.load(io.BytesIO(data), map_location={"cuda:1": "cuda:0"})
    assert mapped["t"].tolist() == [1.0, 1.0]
    kept = torch.load(io.BytesIO(data), map_location=lambda storage, loc: storage)
    assert kept["t"].tolist() == [1.0, 1.0]
    with pytest.raises(CheckpointError, match=r"torch.load\(encoding=...\): .*Python's pickle"):
        torch.load(io.BytesIO(data), encoding="latin1")
    with pytest.raises(CheckpointError, match=r"torch.save\(pickle_module=...\)"):
        torch.save({}, io.BytesIO(), pickle_module=json)
    with pytest.raises(CheckpointError, match=r"pickle_protocol=1\): give a pickle protocol"):
        torch.save({}, io.BytesIO(), pickle_protocol=1)
