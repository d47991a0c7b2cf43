"""The distributed programs users start from, run as written, and the gaps they found.

``tests/data/ddp_programs.py`` (PyTorch's DDP tutorial, pytorch/examples' ``multigpu.py``
and ``minGPT-ddp``) and ``tests/data/distributed_apps.py`` ("Writing Distributed
Applications" and the calls real programs add to it) each run once with ``kernbench run``
in a fresh interpreter; their values are checked against NumPy or numbers worked out by
hand.  The unit tests below pin each gap those programs hit: a ``main(rank, ...)`` started
by the ``__main__`` block's ``mp.spawn``, ``cross_entropy``'s backward against class
probabilities, ``get_default_backend_for_device``, a dict or function ``map_location``,
DDP over a module on two devices, ``Dropout2d``, ``F.log_softmax`` without ``dim``,
``get_node_local_rank``, ``@record``, ``torch.cuda.device``, a replaced submodule's place,
FSDP's ``enable_wrap``/``wrap`` and ``DeviceMesh`` built directly.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.bench.runner import runs_as_main
from kernbench.errors import CheckpointError, DistributedError, PlacementError, TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch.distributed.elastic.multiprocessing.errors import record

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def _run(script: str, tmp_path: Path, *args: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(DATA / script),
         "--topology", "multi_sip", "--", *args],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows: dict[str, dict[int, dict]] = defaultdict(dict)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line.removeprefix("RESULT "))
            rows[row.get("demo", row.get("pattern"))][row["rank"]] = row
    return {"rows": rows, "stdout": done.stdout, "stderr": done.stderr, "cwd": tmp_path}


@pytest.fixture(scope="module")
def ddp_programs(tmp_path_factory) -> dict:
    where = tmp_path_factory.mktemp("ddp")
    (where / "input.txt").write_text("the cat sat on the mat and the dog ran")
    return _run("ddp_programs.py", where, "2", "1", "input.txt", "snapshot.pt")


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict:
    return _run("distributed_apps.py", tmp_path_factory.mktemp("apps"))


# -- the DDP tutorial and multigpu.py ------------------------------------------------------
def _toy_gradients(p: dict, x: np.ndarray, y: np.ndarray) -> dict:
    """MSELoss of ToyModel (Linear(10, 10), ReLU, Linear(10, 5)) differentiated by hand."""
    w1, b1 = np.array(p["net1.weight"]), np.array(p["net1.bias"])
    w2, b2 = np.array(p["net2.weight"]), np.array(p["net2.bias"])
    h = x @ w1.T + b1
    a = np.maximum(h, 0)
    out = a @ w2.T + b2
    d_out = 2 * (out - y) / out.size
    d_h = (d_out @ w2) * (h > 0)
    return {
        "net1.weight": d_h.T @ x, "net1.bias": d_h.sum(0),
        "net2.weight": d_out.T @ a, "net2.bias": d_out.sum(0),
    }  # fmt: skip


def _check_sgd_step(rows: dict[int, dict], lr: float = 0.001) -> None:
    """Every rank ends where one SGD step on the gradients averaged over the ranks leads."""
    start = rows[0]["start"]
    assert all(r["start"] == start for r in rows.values())  # DDP broadcast rank 0's
    grads = [_toy_gradients(start, np.array(r["x"]), np.array(r["y"])) for r in rows.values()]
    for name, value in start.items():
        expected = np.array(value) - lr * np.mean([g[name] for g in grads], axis=0)
        for r in rows.values():
            np.testing.assert_allclose(r["end"][name], expected, rtol=1e-5, atol=1e-7)


def test_ddp_tutorial_demo_basic_averages_the_gradients(ddp_programs) -> None:
    rows = ddp_programs["rows"]["basic"]
    assert sorted(rows) == [0, 1, 2, 3]
    _check_sgd_step(rows)


def test_ddp_tutorial_checkpoint_loads_on_each_ranks_device(ddp_programs) -> None:
    rows = ddp_programs["rows"]["checkpoint"]
    assert sorted(rows) == [0, 1, 2, 3]
    for rank, row in rows.items():
        assert row["loaded_on"] == [rank]  # map_location={"cuda:0": f"cuda:{rank}"}
        assert row["keys"] == [f"module.net{i}.{p}" for i in (1, 2) for p in ("bias", "weight")]
        assert row["end"] == rows[0]["end"]


def test_ddp_tutorial_model_parallel_trains_a_module_on_two_devices(ddp_programs) -> None:
    rows = ddp_programs["rows"]["model_parallel"]
    assert sorted(rows) == [0, 1]
    for rank, row in rows.items():
        assert row["devices"] == [2 * rank, 2 * rank + 1] and row["output_device"] == 2 * rank + 1
    _check_sgd_step(rows)


def test_multigpu_trainer_runs_and_saves_its_checkpoint(ddp_programs) -> None:
    rows = ddp_programs["rows"]["multigpu"]
    assert sorted(rows) == [0, 1, 2, 3]
    start = rows[0]["start"]
    # cross_entropy of one class against a probability: log_softmax is 0 and the gradient
    # softmax * sum(t) - t is exactly 0, in torch as here, so SGD leaves the weights as
    # rank 0 broadcast them
    for row in rows.values():
        assert row["start"] == start and row["end"] == start
    out = ddp_programs["stdout"]
    assert "[GPU3] Epoch 1 | Batch size: 16 | Steps: 1" in out
    assert out.count("Training checkpoint saved at checkpoint.pt") == 2
    with use_context(RuntimeContext("tiny")):
        saved = torch.load(ddp_programs["cwd"] / "checkpoint.pt")
        assert {k: v.tolist() for k, v in saved.items()} == start


def test_mingpt_ddp_trains_saves_a_snapshot_and_resumes_from_it(ddp_programs) -> None:
    first = ddp_programs["rows"]["mingpt_1_epochs"]
    second = ddp_programs["rows"]["mingpt_2_epochs"]
    assert sorted(first) == sorted(second) == [0, 1]
    assert {r["resumed_at"] for r in first.values()} == {0}
    assert {r["resumed_at"] for r in second.values()} == {1}  # from the snapshot
    for rows in (first, second):
        assert len({r["end"] for r in rows.values()}) == 1  # DDP kept the ranks in step
        assert len({s for r in rows.values() for s in r["steps"]}) == 1  # one AdamW step each
    # an epoch is 2 iterations (25 training samples, 13 a rank, batches of 8): more than 2
    # AdamW steps after the second run means its optimizer started from the snapshot's state
    assert first[0]["steps"][0] in (1.0, 2.0) and second[0]["steps"][0] > 2.0
    out = ddp_programs["stdout"]
    assert out.count("Snapshot not found. Training model from scratch") == 2
    assert out.count("Resuming training from snapshot at Epoch 1") == 2
    with use_context(RuntimeContext("tiny")):
        snapshot = torch.load(ddp_programs["cwd"] / "snapshot.pt", map_location="cpu")
    assert sorted(snapshot) == ["finished_epoch", "model_state", "optimizer_state"]
    assert snapshot["finished_epoch"] == 2
    assert [g["weight_decay"] for g in snapshot["optimizer_state"]["param_groups"]] == [0.1, 0.0]


# -- Writing Distributed Applications -----------------------------------------------------
def _values(apps: dict, pattern: str) -> dict[int, object]:
    rows = apps["rows"][pattern]
    assert sorted(rows) == [0, 1, 2, 3], pattern
    return {rank: row["value"] for rank, row in rows.items()}


def test_point_to_point_and_a_group_as_the_tutorial_writes_them(apps) -> None:
    assert _values(apps, "local_rank") == {r: r for r in range(4)}
    assert _values(apps, "blocking") == {0: 1.0, 1: 1.0, 2: 0.0, 3: 0.0}
    assert _values(apps, "nonblocking") == {0: 1.0, 1: 1.0, 2: 0.0, 3: 0.0}
    assert _values(apps, "group_all_reduce") == {0: 2.0, 1: 2.0, 2: 1.0, 3: 1.0}
    expected = sum(np.arange(4) + 10 * r for r in range(4)).tolist()
    assert all(v == expected for v in _values(apps, "ring").values())


def test_the_collectives_give_what_numpy_gives(apps) -> None:
    for rank, v in _values(apps, "collectives").items():
        assert v["gather"] == ([0.0, 1.0, 2.0, 3.0] if rank == 0 else None)
        assert v["scatter"] == 10.0 * rank
        assert v["reduce"] == (24.0 if rank == 0 else None)  # 1 * 2 * 3 * 4
        assert v["all_gather"] == [[r, 2.0 * r] for r in range(4)]
        assert v["broadcast"] == 6.0
    for rank, v in _values(apps, "batched_p2p").items():
        assert v == [float((rank - 1) % 4)] * 3


def test_object_collectives(apps) -> None:
    for rank, v in _values(apps, "objects").items():
        assert v["all_gather"] == [{"rank": r, "name": f"r{r}"} for r in range(4)]
        assert v["broadcast"] == ["a", 1, {"k": 2}]
        assert v["gather"] == ([["x", r] for r in range(4)] if rank == 0 else None)
        assert v["scatter"] == rank * rank
        assert v["send"] == ({"from": 0} if rank == 1 else None)


def test_all_to_all_single_with_split_sizes_and_all_to_all(apps) -> None:
    input_splits = [[2, 2, 1, 1], [3, 2, 2, 2], [2, 1, 1, 1], [2, 2, 2, 1]]
    inputs = [np.arange(sum(s)) + 10 * r for r, s in enumerate(input_splits)]
    pieces = [np.split(x, np.cumsum(s)[:-1]) for x, s in zip(inputs, input_splits, strict=True)]
    for rank, v in _values(apps, "all_to_all").items():
        assert v["single"] == np.concatenate([p[rank] for p in pieces]).tolist()
        assert v["list"] == [4.0 * src + rank for src in range(4)]


def test_device_mesh_groups(apps) -> None:
    for rank, v in _values(apps, "mesh").items():
        row, col = divmod(rank, 2)
        assert v["coordinate"] == [row, col] and v["tp_local_rank"] == col
        assert v["tp_sum"] == float(2 * row + 2 * row + 1)
        assert v["dp_sum"] == float(col + 2 + col)
        assert v["dp_size"] == 2


def test_the_tutorials_partitioned_training_keeps_the_ranks_in_step(apps) -> None:
    values = _values(apps, "training")
    sums = values[0]["parameter_sums"]
    assert len(sums) == 8  # Net's 4 weights and 4 biases
    for v in values.values():
        assert v["parameter_sums"] == sums  # average_gradients: every rank steps alike
        assert all(abs(loss - np.log(10)) < 0.5 for loss in v["losses"])
    assert "Implicit dimension choice for log_softmax has been deprecated" in apps["stderr"]


# -- the gaps, one by one ------------------------------------------------------------------
def test_a_main_taking_arguments_is_started_by_the_main_block(tmp_path) -> None:
    spawned = tmp_path / "spawned.py"
    spawned.write_text(
        'def main(rank, world_size):\n    pass\n\nif __name__ == "__main__":\n    main(0, 1)\n'
    )
    plain = tmp_path / "plain.py"
    plain.write_text(
        'def main(steps=2, *, lr=0.1):\n    pass\n\nif __name__ == "__main__":\n    main()\n'
    )
    keyword = tmp_path / "keyword.py"
    keyword.write_text(
        'def main(*, cfg):\n    pass\n\nif __name__ == "__main__":\n    main(cfg=1)\n'
    )
    assert runs_as_main(spawned) and runs_as_main(keyword)
    assert not runs_as_main(plain)  # main() can be called as it is, once per rank


def _ce_numpy(x: np.ndarray, t: np.ndarray, smoothing: float) -> tuple[float, np.ndarray]:
    """Mean cross-entropy against probabilities and its gradient, by hand."""
    classes = x.shape[1]
    z = x - x.max(1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    mixed = t * (1 - smoothing) + smoothing / classes
    loss = -(mixed * logp).sum(1).mean()
    grad = (np.exp(logp) * mixed.sum(1, keepdims=True) - mixed) / x.shape[0]
    return loss, grad


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_cross_entropy_backward_against_class_probabilities(smoothing) -> None:
    rng = np.random.default_rng(3)
    x0 = rng.standard_normal((5, 4)).astype(np.float32)
    t0 = rng.random((5, 4)).astype(np.float32)  # rows need not sum to 1, as in torch
    with use_context(RuntimeContext("tiny")):
        x = torch.tensor(x0, requires_grad=True)
        t = torch.tensor(t0, requires_grad=True)
        loss = F.cross_entropy(x, t, label_smoothing=smoothing)
        loss.backward()
        expected_loss, expected_grad = _ce_numpy(x0.astype(np.float64), t0, smoothing)
        assert loss.item() == pytest.approx(expected_loss, rel=1e-5)
        np.testing.assert_allclose(x.grad.numpy(), expected_grad, rtol=1e-4, atol=1e-7)
        z = x0 - x0.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        np.testing.assert_allclose(t.grad.numpy(), -logp * (1 - smoothing) / 5, rtol=1e-4)
        # class indices with label smoothing: the onehot mixed with the uniform distribution
        x = torch.tensor(x0, requires_grad=True)
        target = np.array([0, 3, 1, 1, 2])
        F.cross_entropy(x, torch.tensor(target), label_smoothing=smoothing).backward()
        _, expected_grad = _ce_numpy(x0.astype(np.float64), np.eye(4)[target], smoothing)
        np.testing.assert_allclose(x.grad.numpy(), expected_grad, rtol=1e-4, atol=1e-7)


def test_get_default_backend_for_device_answers_as_torch() -> None:
    assert dist.get_default_backend_for_device("cuda") == "nccl"
    assert dist.get_default_backend_for_device(torch.device("cuda", 1)) == "nccl"
    assert dist.get_default_backend_for_device("cpu") == "gloo"
    assert dist.get_default_backend_for_device(torch.accelerator.current_accelerator()) == "ahbm"
    assert dist.Backend.default_device_backend_map["cuda"] == "nccl"
    with pytest.raises(PlacementError, match="unknown device type 'tpu'"):
        dist.get_default_backend_for_device("tpu")


def _map_location_rank(rank, world_size, path):
    dist.init_process_group()
    if rank == 0:
        torch.save({"w": torch.arange(3.0)}, path)
    dist.barrier()
    if rank == 0:
        return None
    mapped = torch.load(path, map_location={"cuda:0": f"cuda:{rank}"})["w"]
    kept = torch.load(path, map_location={"cuda:3": "cuda:1"})["w"]
    on_cpu = torch.load(path, map_location={"ahbm:0": "cpu"})["w"]
    seen = []
    moved = torch.load(path, map_location=lambda s, loc: seen.append(loc) or s.cuda(rank))["w"]
    default = torch.load(path, map_location=lambda s, loc: None)["w"]
    storage = torch.load(path, map_location=lambda s, loc: s)["w"]
    return {
        "mapped": (mapped.get_device(), mapped.tolist()),
        "kept": kept.get_device(),
        "cpu": on_cpu.get_device(),
        "functions": (seen, moved.get_device(), default.get_device(), storage.get_device()),
    }


def test_a_dict_or_function_map_location_maps_the_saved_device(tmp_path) -> None:
    path = str(tmp_path / "w.pt")
    result = kernbench.simulate(
        _map_location_rank, topology="multi_sip", world_size=2, args=(path,), rank_args=True
    )
    got = result.returns[1]
    assert got["mapped"] == (1, [0.0, 1.0, 2.0])
    assert got["kept"] == 0  # not a key: loaded where it was saved, as torch
    assert got["cpu"] == 1  # cpu: the current device, as every load to "cpu" here
    # a function gets the storage and the saved location; None is the saved device, the
    # storage as given (on the cpu) the current device
    assert got["functions"] == (["ahbm:0"], 1, 0, 1)


def test_map_location_refusals_name_what_to_give() -> None:
    with use_context(RuntimeContext("tiny")):
        data = io.BytesIO()
        torch.save({"t": torch.ones(2)}, data)
        with pytest.raises(CheckpointError, match="map_location's keys are device names"):
            torch.load(io.BytesIO(data.getvalue()), map_location={0: "cuda:0"})
        with pytest.raises(CheckpointError, match=r"map_location\['cuda:0'\] must be a device"):
            torch.load(io.BytesIO(data.getvalue()), map_location={"cuda:0": 1.5})
        with pytest.raises(CheckpointError, match="map_location returned str; it returns the"):
            torch.load(io.BytesIO(data.getvalue()), map_location=lambda s, loc: loc)
        with pytest.raises(CheckpointError, match=r"or a function of \(storage, location\)"):
            torch.load(io.BytesIO(data.getvalue()), map_location=1.5)


def test_dropout2d_zeroes_whole_channels_and_scales_the_rest() -> None:
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        x0 = np.random.default_rng(0).uniform(1, 2, (4, 6, 3, 3)).astype(np.float32)
        x = torch.tensor(x0, requires_grad=True)
        out = nn.Dropout2d(p=0.5)(x)
        ratio = out.detach().numpy() / x0
        per_channel = ratio.reshape(4, 6, 9)
        assert np.all(per_channel == per_channel[:, :, :1])  # one draw per channel
        assert set(np.unique(per_channel)) == {0.0, 2.0}
        out.sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), ratio)
        layer = nn.Dropout2d(0.25)
        layer.eval()
        assert layer(x) is x and repr(layer) == "Dropout2d(p=0.25, inplace=False)"
        one = F.dropout1d(torch.ones(3, 5), 0.5).numpy()  # (C, L): no batch dimension
        assert one.shape == (3, 5) and np.all(one == one[:, :1])
        three = F.dropout3d(torch.ones(2, 2, 2, 2), 0.5).numpy()  # (C, D, H, W)
        assert three.shape == (2, 2, 2, 2)
        assert np.all(three.reshape(2, 8) == three.reshape(2, 8)[:, :1])


def test_feature_dropout_refuses_what_torch_refuses() -> None:
    with use_context(RuntimeContext("tiny")):
        with pytest.raises(TensorError, match="dropout1d: Expected 2D or 3D input, but received"):
            F.dropout1d(torch.ones(2, 2, 2, 2))
        with pytest.raises(TensorError, match="dropout probability has to be between 0 and 1"):
            F.dropout2d(torch.ones(2, 2, 2, 2), p=1.5)
        with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
            nn.Dropout3d(p=-0.1)
        with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
            F.dropout2d(torch.ones(3, 4))
        with pytest.warns(UserWarning, match="assuming that channel-wise 1D dropout"):
            F.dropout2d(torch.ones(2, 3, 4))


def test_softmax_without_dim_picks_torchs_implicit_dim() -> None:
    with use_context(RuntimeContext("tiny")):
        a = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
        for shape, dim in (((4,), 0), ((3, 4), 1), ((2, 3, 4), 0)):
            x = torch.tensor(a[(0,) * (3 - len(shape))])
            with pytest.warns(UserWarning, match="Implicit dimension choice for log_softmax"):
                got = F.log_softmax(x)
            np.testing.assert_allclose(got.numpy(), x.log_softmax(dim).numpy())
            with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
                got = F.softmax(x)
            np.testing.assert_allclose(got.numpy(), x.softmax(dim).numpy())
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F.log_softmax(torch.ones(2, 2), dim=0)  # an explicit dim: no warning


def test_get_node_local_rank(monkeypatch) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    assert dist.get_node_local_rank(fallback_rank=3) == 3
    with pytest.raises(DistributedError, match="LOCAL_RANK is not in the environment"):
        dist.get_node_local_rank()
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert dist.get_node_local_rank(fallback_rank=3) == 1


def test_record_passes_results_and_errors_through() -> None:
    @record
    def main(x):
        return x + 1

    @record
    def done():
        sys.exit(0)

    @record
    def failing():
        raise KeyError("boom")

    @record
    def exits():
        sys.exit(3)

    assert main(1) == 2 and main.__name__ == "main"
    assert done() is None  # torch's wrapper turns exit status 0 into a return
    with pytest.raises(KeyError, match="boom"):
        failing()
    with pytest.raises(SystemExit):
        exits()
    with pytest.raises(DistributedError, match="record: expected the function to decorate"):
        record(None)


def _device_block():
    before = torch.cuda.current_device()
    with torch.cuda.device(1):
        inside, made = torch.cuda.current_device(), torch.ones(2)
    after = torch.cuda.current_device()
    with torch.cuda.device(-1):  # torch: a negative index changes nothing
        unchanged = torch.cuda.current_device()
    return before, inside, made.get_device(), after, unchanged


def test_cuda_device_context_manager_switches_and_restores() -> None:
    result = kernbench.simulate(_device_block, topology="multi_sip", world_size=1)
    assert result.returns[0] == (0, 1, 1, 0, 0)
    with use_context(RuntimeContext("multi_sip")):
        with pytest.raises(PlacementError, match="device 9 does not exist"):
            torch.cuda.device(9)
        with torch.cuda.device(2):
            assert torch.cuda.current_device() == 2
        assert torch.cuda.current_device() == 0  # unbound again, as before the block


def test_a_replaced_parameter_buffer_or_child_keeps_its_place() -> None:
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(1, 1), nn.Linear(1, 1)
            self.w, self.v = nn.Parameter(torch.ones(1)), nn.Parameter(torch.ones(1))
            self.register_buffer("x", torch.ones(1))
            self.register_buffer("y", torch.ones(1))

    with use_context(RuntimeContext("tiny")):
        model = Model()
        before = list(model.state_dict())
        model.a = nn.Linear(1, 1)  # as fine-tuning code replaces a layer, or FSDP wraps it
        model.w = nn.Parameter(torch.zeros(1))
        model.x = torch.zeros(1)
        assert list(model.state_dict()) == before
        assert before == ["w", "v", "x", "y", "a.weight", "a.bias", "b.weight", "b.bias"]
        assert [name for name, _ in model.named_children()] == ["a", "b"]


def _manual_wrap(rank, world_size):
    from kernbench.torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from kernbench.torch.distributed.fsdp.wrap import enable_wrap, wrap

    dist.init_process_group()
    with enable_wrap(wrapper_cls=FSDP):
        inner = wrap(nn.Linear(4, 4))
        model = wrap(nn.Sequential(inner, nn.ReLU()))
        try:
            with enable_wrap(wrapper_cls=FSDP):
                pass
            nested = None
        except DistributedError as exc:
            nested = str(exc)
    outside = wrap(nn.Linear(2, 2))
    return type(inner).__name__, type(model).__name__, type(outside).__name__, nested


def test_enable_wrap_and_wrap_wrap_by_hand_per_rank() -> None:
    from kernbench.torch.distributed.fsdp import fully_sharded_data_parallel as module_path

    assert module_path.CPUOffload is kernbench.torch.distributed.fsdp.CPUOffload
    assert module_path.BackwardPrefetch is kernbench.torch.distributed.fsdp.BackwardPrefetch
    result = kernbench.simulate(_manual_wrap, topology="multi_sip", world_size=2, rank_args=True)
    for inner, model, outside, nested in result.returns:
        assert (inner, model, outside) == (
            "FullyShardedDataParallel", "FullyShardedDataParallel", "Linear",
        )  # fmt: skip
        assert "already within an autowrap context" in nested


def _meshes(rank, world_size):
    from kernbench.torch.distributed.device_mesh import DeviceMesh, init_device_mesh

    built = DeviceMesh("cuda", torch.arange(4).view(2, 2), mesh_dim_names=("dp", "tp"))
    tp = torch.tensor([float(rank)])
    dist.all_reduce(tp, group=built.get_group("tp"))
    mesh = init_device_mesh("cuda", (2, 2), mesh_dim_names=("dp", "tp"))
    both = mesh["dp", "tp"]
    errors = []
    for bad in (lambda: mesh["tp", "dp"], lambda: DeviceMesh("cuda", [[0, 0]])):
        try:
            bad()
        except DistributedError as exc:
            errors.append(str(exc))
    return built.get_coordinate(), tp.item(), both.shape, both.mesh_dim_names, errors


def test_device_mesh_built_directly_and_sliced_by_several_names() -> None:
    result = kernbench.simulate(_meshes, topology="multi_sip", world_size=4, rank_args=True)
    for rank, (coordinate, tp_sum, shape, names, errors) in enumerate(result.returns):
        row, col = divmod(rank, 2)
        assert coordinate == [row, col] and tp_sum == 4 * row + 1
        assert shape == (2, 2) and names == ("dp", "tp")
        assert "Invalid mesh_dim_names ('tp', 'dp') specified" in errors[0]
        assert "DeviceMesh cannot have duplicate values" in errors[1]
