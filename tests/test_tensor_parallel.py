"""torch.distributed.tensor.parallel without DTensor (ADR 0023): parallelize_module with
ColwiseParallel and RowwiseParallel gives the unsharded model's outputs, losses and
(gathered) gradients; the parameters are local shards of the local shape; a forward costs
one all-reduce per Colwise->Rowwise pair and a backward one per column-sharded layer whose
input needs a gradient; embeddings shard by columns and by rows; plans match submodules
with wildcards; what needs DTensor is refused by type and message; pytorch/examples'
tensor_parallel_example.py runs as written (tests/data/tensor_parallel_example.py)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DistributedError, RankError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim
from kernbench.torch.distributed.device_mesh import init_device_mesh
from kernbench.torch.distributed.tensor import Replicate, Shard
from kernbench.torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)

ROOT = Path(__file__).resolve().parents[1]
WIDTH, HIDDEN, BATCH, STEPS = 8, 16, 6, 3


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.up = nn.Linear(WIDTH, HIDDEN)
        self.down = nn.Linear(HIDDEN, WIDTH)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(WIDTH, 3)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


PLAN = {"layers.*.up": ColwiseParallel(), "layers.*.down": RowwiseParallel()}
# how each parameter is split (None: whole on every rank)
SPLIT = {"up.weight": 0, "up.bias": 0, "down.weight": 1, "down.bias": None, "head": None}


def _split(name):
    return next(v for k, v in SPLIT.items() if k in name)


def _batch(step):
    rng = np.random.default_rng(step)
    return rng.standard_normal((BATCH, WIDTH), np.float32), rng.standard_normal(
        (BATCH, 3), np.float32
    )


def _train(model, params):
    opt = optim.SGD(params, lr=0.1, momentum=0.9)
    losses, grads = [], []
    for step in range(STEPS):
        x, y = _batch(step)
        opt.zero_grad()
        loss = ((model(torch.from_numpy(x)) - torch.from_numpy(y)) ** 2).mean()
        loss.backward()
        losses.append(loss.item())
        grads.append({n: _gathered(p) for n, p in model.named_parameters()})
        opt.step()
    return losses, grads


def _gathered(param):
    """A parameter's gradient whole: the pieces of a sharded one's all-gathered."""
    grad = param.grad
    placement = getattr(param, "placements", (Replicate(),))[0]
    if isinstance(placement, Replicate):
        return grad.numpy().copy()
    pieces = [torch.empty_like(grad) for _ in range(dist.get_world_size())]
    dist.all_gather(pieces, grad.contiguous())
    return np.concatenate([p.numpy() for p in pieces], axis=placement.dim)


def _reference():
    """The same model, unsharded, trained on one rank."""
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        model = Net()
        losses, grads = _train(model, model.parameters())
        return losses, grads, {k: v.numpy().copy() for k, v in model.state_dict().items()}


def _tp_run(rank, world):
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    model = parallelize_module(Net(), mesh, PLAN)
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    losses, grads = _train(model, model.parameters())
    full = {
        n: (p.full_tensor() if hasattr(p, "full_tensor") else p.detach()).numpy().copy()
        for n, p in model.named_parameters()
    }
    return losses, grads, shapes, full


@pytest.mark.parametrize("world", [2, 4])
def test_training_matches_the_unsharded_model(world):
    want_losses, want_grads, want_state = _reference()
    result = kernbench.simulate(_tp_run, topology="multi_sip", world_size=world, rank_args=True)
    for rank in range(world):
        losses, grads, shapes, full = result.returns[rank]
        np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
        for step in range(STEPS):
            for name, want in want_grads[step].items():
                np.testing.assert_allclose(
                    grads[step][name], want, rtol=1e-4, atol=1e-6, err_msg=f"{name} {step}"
                )
        for name, want in want_state.items():
            split = _split(name)
            local = list(want.shape)
            if split is not None:
                local[split] //= world
            assert shapes[name] == tuple(local), name  # the local shape, not torch's global
            np.testing.assert_allclose(full[name], want, rtol=1e-4, atol=1e-6, err_msg=name)
    ops = [(c["op"], c["bytes"]) for c in result.report["collectives"]]
    activation = BATCH * WIDTH * 4
    # parallelize_module, in the plan's order: rank 0's shards scattered (the report counts
    # the whole tensor), the row-sharded layers' biases broadcast
    up = [("scatter", HIDDEN * WIDTH * 4), ("scatter", HIDDEN * 4)]
    down = [("scatter", WIDTH * HIDDEN * 4), ("broadcast", WIDTH * 4)]
    assert ops[:8] == up * 2 + down * 2
    # each step: one all-reduce after each RowwiseParallel layer in forward, one for the
    # gradient of the second ColwiseParallel layer's input (the first one's is the data,
    # which needs none); each the size of the activations
    reductions = [b for op, b in ops if op == "all_reduce"]
    assert reductions == [activation] * 3 * STEPS


# -- embeddings ----------------------------------------------------------------------------
VOCAB, DIM = 8, 6


class Tagger(nn.Module):
    """Token embedding (rows sharded), then a column-sharded embedding summed in."""

    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(VOCAB, DIM)
        self.out = nn.Linear(DIM, 2)

    def forward(self, ids):
        return self.out(self.tok(ids) + self.gathered(self.pos(ids)))

    def gathered(self, shard):
        if not dist.is_initialized():
            return shard
        pieces = [torch.empty_like(shard) for _ in range(dist.get_world_size())]
        dist.all_gather(pieces, shard.contiguous())
        return torch.cat(pieces, dim=-1)


EMBEDDING_PLAN = {"tok": RowwiseParallel(input_layouts=Replicate()), "pos": ColwiseParallel()}
IDS = np.array([[0, 3, 7, 5], [6, 1, 2, 4]], np.int64)


def _embedding_run(rank, world):
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(1)
    model = Tagger()
    parallelize_module(model, mesh, EMBEDDING_PLAN)
    out = model(torch.from_numpy(IDS))
    out.sum().backward()
    shapes = {n: tuple(p.shape) for n, p in model.named_parameters()}
    return out.detach().numpy().copy(), _gathered(model.tok.weight), shapes


def test_embeddings_shard_by_rows_and_by_columns():
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(1)
        model = Tagger()
        out = model(torch.from_numpy(IDS))
        out.sum().backward()
        want_out, want_grad = out.detach().numpy().copy(), model.tok.weight.grad.numpy().copy()
    result = kernbench.simulate(_embedding_run, topology="multi_sip", world_size=2, rank_args=True)
    for rank in range(2):
        out, grad, shapes = result.returns[rank]
        np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-6)
        assert shapes["tok.weight"] == (VOCAB // 2, DIM)
        assert shapes["pos.weight"] == (VOCAB, DIM // 2)
    # forward: the row-sharded lookup's partial rows summed once (the indices need no
    # gradient, so the backward has no all-reduce)
    assert [c["op"] for c in result.report["collectives"]].count("all_reduce") == 1


# -- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda: ColwiseParallel(input_layouts=Shard(0)), "ColwiseParallel(input_layouts="),
        (lambda: ColwiseParallel(output_layouts=Replicate()), "output_layouts=Shard(dim=-1)"),
        (lambda: RowwiseParallel(output_layouts=Shard(1)), "RowwiseParallel(output_layouts="),
        (lambda: RowwiseParallel(use_local_output=False), "use_local_output=True"),
        (lambda: SequenceParallel(), "SequenceParallel"),
        (lambda: PrepareModuleInput(input_layouts=(Shard(1),)), "PrepareModuleInput"),
        (lambda: PrepareModuleOutput(), "PrepareModuleOutput"),
        (loss_parallel, "F.cross_entropy on the whole logits"),
        (lambda: dist.tensor.distribute_tensor, "there is no DTensor"),
        (lambda: dist.tensor.DTensor, "ColwiseParallel and RowwiseParallel"),
        (lambda: dist.DTensor, "parallelize_module"),
    ],
)
def test_what_needs_dtensor_is_refused_naming_what_to_use(make, words):
    with pytest.raises(UnsupportedNameError, match="KernBench") as caught:
        make()
    assert words in str(caught.value)


def test_the_default_layouts_written_out_are_accepted():
    ColwiseParallel(input_layouts=Replicate(), output_layouts=Shard(-1))
    RowwiseParallel(input_layouts=Shard(-1), output_layouts=Replicate())


def _misuse(rank, world, case):
    if case == "2d":
        mesh = init_device_mesh("cuda", (2, world // 2), mesh_dim_names=("dp", "tp"))
        parallelize_module(Net(), mesh, PLAN)
    mesh = init_device_mesh("cuda", (world,))
    if case == "relu":
        parallelize_module(nn.ReLU(), mesh, ColwiseParallel())
    if case == "twice":
        model = parallelize_module(Net(), mesh, PLAN)
        parallelize_module(model, mesh, PLAN)
    if case == "uneven":
        parallelize_module(nn.Linear(4, 3), mesh, ColwiseParallel())
    if case == "whole_input":
        layer = parallelize_module(nn.Linear(4, 2), mesh, RowwiseParallel())
        layer(torch.ones(3, 4))
    if case == "rowwise_embedding":
        parallelize_module(nn.Embedding(4, 2), mesh, RowwiseParallel())


@pytest.mark.parametrize(
    ("case", "kind", "words"),
    [
        ("2d", DistributedError, "only accepts a 1D DeviceMesh"),
        ("relu", DistributedError, "only support nn.Linear and nn.Embedding"),
        ("twice", DistributedError, "already sharded"),
        ("uneven", DistributedError, "must divide over the 2 ranks"),
        ("whole_input", DistributedError, "this rank's 2 of the 4 input features"),
        ("rowwise_embedding", UnsupportedNameError, "pass input_layouts=Replicate()"),
    ],
)
def test_misuse_is_an_error_naming_it(case, kind, words):
    world = 4 if case == "2d" else 2
    with pytest.raises(RankError) as caught:
        kernbench.simulate(
            _misuse, topology="multi_sip", world_size=world, rank_args=True, args=(case,)
        )
    assert isinstance(caught.value.original, kind)
    assert words in str(caught.value.original)


def test_the_import_paths_torch_programs_use():
    import kernbench.torch.distributed._tensor.device_mesh as old
    import kernbench.torch.distributed.device_mesh as new
    import kernbench.torch.distributed.tensor.parallel as tp

    assert old.init_device_mesh is new.init_device_mesh is dist.tensor.init_device_mesh
    assert dist.tensor.parallel is tp and tp.parallelize_module is parallelize_module
    assert dist.tensor.Shard(0) == Shard(0) != Shard(1)


# -- pytorch/examples' tensor_parallel_example.py ------------------------------------------
def _toy(p, x):
    h = x @ np.array(p["in_proj.weight"]).T + np.array(p["in_proj.bias"])
    a = np.maximum(h, 0)
    w2 = np.array(p["out_proj.weight"])
    out = a @ w2.T + np.array(p["out_proj.bias"])
    d_h = np.ones_like(out) @ w2 * (h > 0)  # the gradient of out.sum()
    grads = {
        "in_proj.weight": d_h.T @ x, "in_proj.bias": d_h.sum(0),
        "out_proj.weight": np.ones_like(out).T @ a, "out_proj.bias": np.full(5, len(x)),
    }  # fmt: skip
    return out, grads


def test_tensor_parallel_example_runs_as_written(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run",
         str(ROOT / "tests" / "data" / "tensor_parallel_example.py"), "--topology", "multi_sip",
         "--nproc-per-node", "2", "--report", str(tmp_path / "report.json")],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Tensor Parallel training completed!" in done.stderr
    rows = {}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            row = json.loads(line.removeprefix("RESULT "))
            rows[row["rank"]] = row
    assert sorted(rows) == [0, 1]
    start = rows[0]["start"]
    summed = {name: 0.0 for name in start}
    for i, x in enumerate(rows[0]["inputs"]):
        out, grads = _toy(start, np.array(x, np.float32))
        for row in rows.values():
            assert row["inputs"][i] == x  # the same seeded input on every rank
            np.testing.assert_allclose(row["outputs"][i], out, rtol=1e-5, atol=1e-6)
        summed = {name: summed[name] + grads[name] for name in grads}
    split = {"in_proj.weight": 0, "in_proj.bias": 0, "out_proj.weight": 1, "out_proj.bias": None}
    for name, dim in split.items():
        whole = np.array(start[name])
        local = [np.array(rows[r]["local"][name]) for r in (0, 1)]
        grads = [np.array(rows[r]["grads"][name]) for r in (0, 1)]
        if dim is None:
            pieces, grad_pieces = local[0], grads[0]
            np.testing.assert_array_equal(local[1], local[0])
        else:
            pieces = np.concatenate(local, axis=dim)
            grad_pieces = np.concatenate(grads, axis=dim)
            assert rows[0]["shapes"][name][dim] == whole.shape[dim] // 2
        # the optimizer was made before parallelize_module replaced the parameters: as in
        # torch, it steps none of the shards, and without zero_grad their gradients add up
        np.testing.assert_allclose(pieces, whole, rtol=0, atol=0)
        np.testing.assert_allclose(grad_pieces, summed[name], rtol=1e-4, atol=1e-5)
    report = json.loads((tmp_path / "report.json").read_text())
    ops = [c["op"] for c in report["collectives"]]
    # three shards scattered and a bias broadcast, then one all-reduce per forward and none
    # in backward: the input (the data) needs no gradient
    assert ops == ["scatter"] * 3 + ["broadcast"] + ["all_reduce"] * 10


def _copied(rank, world):
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    model = parallelize_module(Net(), mesh, PLAN)
    twin = copy.deepcopy(model)
    x = torch.from_numpy(_batch(0)[0])
    up = twin.layers[0].up.weight
    return (
        model(x).detach().numpy().copy(),
        twin(x).detach().numpy().copy(),
        up.placements,
        up.to_local() is up,
        up.full_tensor().numpy().copy(),
        model.layers[0].up.weight.full_tensor().numpy().copy(),
    )


def test_a_deep_copy_keeps_the_shards_and_the_collectives():
    result = kernbench.simulate(_copied, topology="multi_sip", world_size=2, rank_args=True)
    out, twin_out, placements, local_is_self, twin_full, full = result.returns[0]
    np.testing.assert_array_equal(twin_out, out)
    assert placements == (Shard(0),) and local_is_self
    np.testing.assert_array_equal(twin_full, full)


def _two_d(rank, world):
    mesh = init_device_mesh("cuda", (2, world // 2), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    model = parallelize_module(Net(), mesh["tp"], PLAN)
    x, _ = _batch(mesh.get_local_rank("dp"))  # each data-parallel replica its own batch
    return model(torch.from_numpy(x)).detach().numpy().copy()


def test_a_slice_of_a_2d_mesh_shards_over_its_own_ranks():
    want = []
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(0)
        model = Net()
        for replica in (0, 1):
            want.append(model(torch.from_numpy(_batch(replica)[0])).detach().numpy().copy())
    result = kernbench.simulate(_two_d, topology="multi_sip", world_size=4, rank_args=True)
    for rank in range(4):
        np.testing.assert_allclose(result.returns[rank], want[rank // 2], rtol=1e-5, atol=1e-6)
    ops = [c["op"] for c in result.report["collectives"]]
    assert ops.count("all_reduce") == 2 * 2  # two pairs, in each of the two tp groups


def _step(rank, world):
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    model = parallelize_module(Net(), mesh, PLAN)
    x = torch.ones(BATCH, WIDTH, requires_grad=True)
    model(x).sum().backward()


def test_timing_only_mode_gives_the_same_time():
    """(Embedding lookups are left out: their cost depends on the indices, in timing-only
    mode a few ns apart, with or without tensor parallelism.)"""
    times = [
        kernbench.simulate(
            _step, topology="multi_sip", world_size=2, rank_args=True, timing_only=timing
        ).report["simulated_time_ps"]
        for timing in (False, True)
    ]
    assert times[0] == times[1]


# -- attention, as torch's Llama tutorial shards it ----------------------------------------
HEADS, HEAD_DIM, SEQ = 4, 2, 5


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.n_heads = HEADS
        dim = HEADS * HEAD_DIM
        self.wq, self.wk, self.wv = (nn.Linear(dim, dim, bias=False) for _ in range(3))
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = (
            w(x).view(b, s, self.n_heads, HEAD_DIM).transpose(1, 2)
            for w in (self.wq, self.wk, self.wv)
        )
        scores = torch.softmax(q @ k.transpose(-2, -1) / HEAD_DIM**0.5, dim=-1)
        return self.wo((scores @ v).transpose(1, 2).reshape(b, s, self.n_heads * HEAD_DIM))


class Layer(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()

    def forward(self, x):
        return x + self.attention(x)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def _attention_input():
    return np.random.default_rng(5).standard_normal((2, SEQ, HEADS * HEAD_DIM), np.float32)


def _attention_run(rank, world):
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(2)
    model = Tiny()
    plan = {f"layers.*.attention.{w}": ColwiseParallel() for w in ("wq", "wk", "wv")}
    plan["layers.*.attention.wo"] = RowwiseParallel()
    parallelize_module(model, mesh, plan)
    for layer in model.layers:  # each rank computes its share of the heads, as torch's
        layer.attention.n_heads //= world  # tutorial adjusts them
    x = torch.from_numpy(_attention_input()).requires_grad_(True)
    out = model(x)
    out.sum().backward()
    return out.detach().numpy().copy(), x.grad.numpy().copy()


def test_attention_heads_shard_with_wildcard_paths():
    with use_context(RuntimeContext("tiny")):
        torch.manual_seed(2)
        model = Tiny()
        x = torch.from_numpy(_attention_input()).requires_grad_(True)
        out = model(x)
        out.sum().backward()
        want_out, want_grad = out.detach().numpy().copy(), x.grad.numpy().copy()
    result = kernbench.simulate(_attention_run, topology="multi_sip", world_size=2, rank_args=True)
    for rank in range(2):
        out, grad = result.returns[rank]
        np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(grad, want_grad, rtol=1e-5, atol=1e-5)
    reductions = [c["op"] for c in result.report["collectives"]].count("all_reduce")
    # per layer: wo's output in forward; in backward one for the gradient reaching x
    # through wq, wk and wv (each column-sharded layer's own, so three)
    assert reductions == 2 * (1 + 3)
