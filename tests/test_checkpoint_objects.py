"""Whole objects in checkpoints (``torch.save(model)``) under torch 2.6's ``weights_only`` rules,
and torch's legacy tensor types (``torch.LongTensor(n)``)."""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.errors import CheckpointError, TensorError, WeightsOnlyLoadError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import serialization


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context
    serialization.clear_safe_globals()


class Tagger(nn.Module):
    """A model of the program's own, holding layers, a buffer, a function and plain fields."""

    def __init__(self, vocab: int = 11, width: int = 6) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.rnn = nn.LSTM(width, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.activation = F.relu
        self.register_buffer("scale", torch.full((vocab,), 0.5))
        self.note = {"vocab": vocab, "tags": ("a", "b")}

    def forward(self, tokens):
        hidden, _ = self.rnn(self.embed(tokens))
        return self.head(self.activation(hidden)) * self.scale


@dataclass
class Config:
    lr: float
    layers: int


class Fussy:
    """Refuses to be unpickled."""

    def __init__(self):
        self.kept = 1

    def __setstate__(self, state):
        raise ValueError("refused")


CLASSES = [Tagger, nn.Embedding, nn.LSTM, nn.Linear, F.relu]


def _saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _state(model) -> dict:
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_a_whole_model_round_trips_when_its_classes_are_allowlisted(ctx):
    torch.manual_seed(5)
    model = Tagger()
    tokens = torch.tensor([[1, 4, 9, 2]])
    expected = model(tokens).detach().numpy()
    data = _saved(model)
    with serialization.safe_globals(CLASSES):
        back = torch.load(io.BytesIO(data))
    assert type(back) is Tagger and back is not model
    assert back.activation is F.relu and back.note == {"vocab": 11, "tags": ("a", "b")}
    before, after = _state(model), _state(back)
    assert list(after) == list(before)
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in back.parameters())
    np.testing.assert_array_equal(back(tokens).detach().numpy(), expected)
    assert serialization.get_safe_globals() == []  # the block's allowlist is gone after it


def test_the_default_load_refuses_an_unlisted_global_as_torch_does(ctx):
    data = _saved(Tagger())
    with pytest.raises(WeightsOnlyLoadError) as info:
        torch.load(io.BytesIO(data))
    message = str(info.value)
    assert "weights only load failed" in message and "Tagger" in message
    assert "torch.serialization.add_safe_globals([Tagger])" in message
    assert "weights_only=False" in message
    assert isinstance(info.value, pickle.UnpicklingError)  # what torch raises
    assert isinstance(info.value, CheckpointError)
    with pytest.raises(WeightsOnlyLoadError, match="Embedding"):  # one class short
        with serialization.safe_globals([Tagger]):
            torch.load(io.BytesIO(data))
    back = torch.load(io.BytesIO(data), weights_only=False)  # a trusted file
    assert type(back) is Tagger


def test_add_safe_globals_lasts_until_cleared_and_checks_its_entries(ctx):
    data = _saved(Tagger())
    serialization.add_safe_globals(CLASSES)
    assert type(torch.load(io.BytesIO(data))) is Tagger
    assert serialization.get_safe_globals() == CLASSES
    serialization.clear_safe_globals()
    with pytest.raises(WeightsOnlyLoadError):
        torch.load(io.BytesIO(data))
    with pytest.raises(CheckpointError, match="takes a list"):
        serialization.add_safe_globals(Tagger)
    with pytest.raises(CheckpointError, match="is not a class or function"):
        serialization.add_safe_globals([3])
    # (object, "module.name"): a class saved under another name
    renamed = _saved(Config(0.5, 2))
    key = f"{Config.__module__}.{Config.__qualname__}"
    with serialization.safe_globals([(Config, key)]):
        assert torch.load(io.BytesIO(renamed)) == Config(0.5, 2)


def test_unsafe_globals_are_listed_without_running_anything(ctx):
    data = _saved({"model": Tagger(), "config": Config(0.1, 3), "step": 7})
    names = serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    assert f"{Tagger.__module__}.Tagger" in names and f"{Config.__module__}.Config" in names
    assert f"{nn.LSTM.__module__}.LSTM" in names
    assert "collections.OrderedDict" not in names  # allowed by default
    with serialization.safe_globals([Tagger, Config]):
        left = serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(data))
    assert f"{Tagger.__module__}.Tagger" not in left and left
    assert serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(_saved({"a": 1}))) == []


def test_plain_containers_stay_unpickled_and_other_values_are_pickled(ctx):
    weights = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    array = np.linspace(0.0, 1.0, 5)
    obj = {"w": weights, "again": [weights], "array": array, "set": {3, 1}, "raw": b"\x00\x01"}
    data = _saved(obj)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        names = archive.namelist()
    assert "checkpoint/tensors/0.npy" in names and "checkpoint/tensors/1.npy" not in names
    assert sum(n.startswith("checkpoint/objects/") for n in names) == 3  # array, set, bytes
    with pytest.raises(WeightsOnlyLoadError, match="numpy"):  # as torch 2.6 refuses arrays
        torch.load(io.BytesIO(data))
    back = torch.load(io.BytesIO(data), weights_only=False)
    np.testing.assert_array_equal(back["array"], array)
    assert back["set"] == {1, 3} and back["raw"] == b"\x00\x01"
    assert back["again"][0] is back["w"]  # one tensor, saved twice, loads as one
    np.testing.assert_array_equal(back["w"].numpy(), weights.numpy())
    # sets, frozensets, bytes and complex numbers are what torch allows by default
    plain = _saved([{1, 2}, frozenset({4}), b"ab", complex(1, 2)])
    assert torch.load(io.BytesIO(plain)) == [{1, 2}, frozenset({4}), b"ab", complex(1, 2)]
    for protocol in (2, 3, 5):
        buffer = io.BytesIO()
        torch.save({"s": {5}, "c": complex(0, 1)}, buffer, pickle_protocol=protocol)
        assert torch.load(io.BytesIO(buffer.getvalue())) == {"s": {5}, "c": complex(0, 1)}


def test_a_dict_with_keys_json_cannot_hold_is_pickled_whole(ctx):
    data = _saved({Config(1.0, 1).layers: "int key", (1, "a"): 2})  # plain keys: the tree
    assert torch.load(io.BytesIO(data)) == {1: "int key", (1, "a"): 2}
    odd = _saved({frozenset({1}): torch.ones(2)})
    back = torch.load(io.BytesIO(odd))
    assert list(back) == [frozenset({1})] and back[frozenset({1})].tolist() == [1.0, 1.0]


def test_map_location_reaches_the_tensors_inside_objects(ctx):
    model = nn.Linear(3, 2)
    data = _saved(model)
    with serialization.safe_globals([nn.Linear]):
        for where in ("cpu", 0, "cuda:0", {"ahbm:0": "cuda:0"}):
            back = torch.load(io.BytesIO(data), map_location=where)
            np.testing.assert_array_equal(
                back.weight.detach().numpy(), model.weight.detach().numpy()
            )


def test_the_force_variables_change_the_default_as_torch_s_do(ctx, monkeypatch):
    data = _saved(Config(2.0, 4))
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    assert torch.load(io.BytesIO(data)) == Config(2.0, 4)
    with pytest.raises(WeightsOnlyLoadError):
        torch.load(io.BytesIO(data), weights_only=True)
    monkeypatch.delenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD")
    monkeypatch.setenv("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "true")
    with pytest.raises(WeightsOnlyLoadError):
        torch.load(io.BytesIO(data), weights_only=False)


def test_a_damaged_or_failing_pickle_is_a_checkpoint_error(ctx):
    data = _saved({"c": Config(1.0, 2)})
    source = zipfile.ZipFile(io.BytesIO(data))
    damaged = io.BytesIO()
    with zipfile.ZipFile(damaged, "w") as archive:
        for name in source.namelist():
            body = source.read(name)
            archive.writestr(name, body[:10] if name.endswith(".pkl") else body)
    with pytest.raises(CheckpointError, match=r"is damaged: ValueError"):
        torch.load(io.BytesIO(damaged.getvalue()), weights_only=False)
    with pytest.raises(CheckpointError, match=r"unpickling object 0 raised ValueError: refused"):
        torch.load(io.BytesIO(_saved(Fussy())), weights_only=False)  # the class's own error


def test_objects_of_the_running_simulation_cannot_be_saved(ctx):
    holder = Config(ctx, 1)  # a dataclass holding the run's context
    with pytest.raises(CheckpointError, match=r"part of the running simulation.*state_dict"):
        torch.save(holder, io.BytesIO())


def test_a_timing_only_run_saves_and_loads_objects_without_values():
    with use_context(RuntimeContext("tiny", timing_only=True)):
        data = _saved(nn.Linear(4, 2))
        with serialization.safe_globals([nn.Linear]):
            back = torch.load(io.BytesIO(data))
        assert back.weight.shape == (2, 4) and back.bias.shape == (2,)


# -- torch's legacy tensor types -----------------------------------------------------------
def test_legacy_types_construct_and_match_their_dtype(ctx):
    filled = torch.LongTensor(6).zero_().view(-1, 2)
    assert filled.shape == (3, 2) and filled.dtype is torch.int64
    np.testing.assert_array_equal(filled.numpy(), np.zeros((3, 2), dtype=np.int64))
    values = torch.FloatTensor([[1, 2], [3, 4]])
    assert values.dtype is torch.float32 and values.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert torch.DoubleTensor(np.arange(3)).dtype is torch.float64
    assert torch.ByteTensor(torch.Size([2, 5])).shape == (2, 5)
    assert torch.BoolTensor().shape == (0,)
    assert isinstance(values, torch.FloatTensor) and not isinstance(values, torch.LongTensor)
    assert not isinstance(np.ones(2), torch.FloatTensor)
    assert values.type(torch.LongTensor).dtype is torch.int64
    assert torch.FloatTensor(values) is values
    assert repr(torch.HalfTensor) == "<class 'torch.HalfTensor'>"
    with pytest.raises(TensorError, match=r"torch.LongTensor\(tensor\): expected a torch.int64"):
        torch.LongTensor(values)
    with pytest.raises(TensorError, match=r"give sizes \(ints or a torch.Size\)"):
        torch.IntTensor(2.5)


def test_a_pickle_with_a_hostile_memo_index_is_refused_before_it_allocates(ctx):
    import struct

    data = _saved({"c": Config(1.0, 2)})
    source = zipfile.ZipFile(io.BytesIO(data))
    hostile = b"\x80\x04N" + b"r" + struct.pack("<I", 0xFFFFFFF0) + b"."  # LONG_BINPUT 4e9
    forged = io.BytesIO()
    with zipfile.ZipFile(forged, "w") as archive:
        for name in source.namelist():
            archive.writestr(name, hostile if name.endswith(".pkl") else source.read(name))
    for weights_only in (True, False):
        with pytest.raises(CheckpointError, match=r"damaged: a pickle memo index 4294967280"):
            torch.load(io.BytesIO(forged.getvalue()), weights_only=weights_only)
    with pytest.raises(CheckpointError, match="memo index"):
        serialization.get_unsafe_globals_in_checkpoint(io.BytesIO(forged.getvalue()))
