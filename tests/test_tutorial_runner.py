"""How ``kernbench run`` starts a script, and what a tutorial's calls check.

* The machine is built first and the script imported on it: module-level code
  sees the ``--topology`` machine and its tensors and kernels cost time.
* A script whose entry is its ``if __name__ == "__main__":`` block runs as
  ``__main__`` inside the run; ``--world-size`` reaches it as ``$WORLD_SIZE``.
* ``init_process_group`` checks ``rank``/``world_size`` against the machine;
  point-to-point errors and warnings name the call the user made.
* ``$KERNBENCH_TOPOLOGY`` takes a bundled name or a path that falls back to
  the bundled machine of that name.
"""

from __future__ import annotations

import os
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.bench.runner import calls_main_at_module_level, run_script, runs_as_main
from kernbench.errors import DistributedError, InputFileError, RankError
from kernbench.runtime import RuntimeContext, default_topology_path, use_context


def _script(tmp_path: Path, body: str, name: str = "script.py") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


def _quiet(_line: str) -> None:
    return None


# ------------------------------------------------------------- module level on the machine
MODULE_LEVEL = """\
    import kernbench.torch as torch
    from kernbench.runtime import current_context

    DEVICES = torch.cuda.device_count()
    NAME = torch.cuda.get_device_name(0)
    X = torch.ones(1024)
    Y = X + X  # a device kernel at module level
    AFTER_IMPORT_PS = current_context().now
    TOPOLOGY = current_context().topology.name


    def main():
        return {"devices": DEVICES, "name": NAME, "after_import_ps": AFTER_IMPORT_PS,
                "topology": TOPOLOGY, "y": Y[0].item()}
"""


def test_module_level_code_runs_on_the_requested_machine_and_costs_time(tmp_path) -> None:
    path = _script(tmp_path, MODULE_LEVEL)
    result = run_script(path, topology="ring8", world_size=1, echo=_quiet)
    info = result.returns[0]
    assert info["topology"] == "ring8" and info["devices"] == 8
    assert "ring8" in info["name"]
    assert info["y"] == 2.0
    assert info["after_import_ps"] > 0
    # The import's time is part of the run: the ranks start after it.
    assert result.elapsed_ps >= info["after_import_ps"]
    assert result.report["simulated_time_ps"] == result.elapsed_ps


def test_module_level_code_sees_the_set_overrides(tmp_path) -> None:
    path = _script(tmp_path, MODULE_LEVEL)
    result = run_script(
        path, topology="multi_sip", overrides=["system.sips.count=2"], world_size=1, echo=_quiet
    )
    assert result.returns[0]["devices"] == 2


# ------------------------------------------------------------------ the __main__ block entry
MAIN_BLOCK = """\
    import os

    import kernbench.torch as torch
    import kernbench.torch.distributed as dist
    import kernbench.torch.multiprocessing as mp


    def run(rank, size):
        t = torch.ones(4) * (rank + 1)
        dist.all_reduce(t)
        return t[0].item()


    def init_process(rank, size, fn, backend="gloo"):
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = "29500"
        dist.init_process_group(backend, rank=rank, world_size=size)
        return fn(rank, size)


    if __name__ == "__main__":
        size = int(os.environ.get("WORLD_SIZE", "2"))
        mp.set_start_method("spawn")
        processes = [mp.Process(target=init_process, args=(r, size, run)) for r in range(size)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
"""


def test_a_main_block_script_runs_as_main_and_starts_its_own_ranks(tmp_path) -> None:
    path = _script(tmp_path, MAIN_BLOCK)
    assert runs_as_main(path)
    result = run_script(path, topology="multi_sip", echo=_quiet)
    assert result.returns == [3.0, 3.0]
    assert result.report["world_size"] == 2
    assert len(result.per_rank_ps) == 2 and result.elapsed_ps > 0
    assert [c["op"] for c in result.report["collectives"]] == ["all_reduce"]


def test_world_size_reaches_a_main_block_as_the_environment(tmp_path) -> None:
    path = _script(tmp_path, MAIN_BLOCK)
    saved = os.environ.get("WORLD_SIZE")
    result = run_script(path, topology="multi_sip", world_size=4, echo=_quiet)
    assert result.returns == [10.0] * 4
    assert os.environ.get("WORLD_SIZE") == saved  # restored


def test_a_main_block_that_starts_another_world_size_is_an_error(tmp_path) -> None:
    body = MAIN_BLOCK.replace('int(os.environ.get("WORLD_SIZE", "2"))', "2")
    path = _script(tmp_path, body)
    with pytest.raises(DistributedError, match="differs from the run's --world-size 3"):
        run_script(path, topology="multi_sip", world_size=3, echo=_quiet)


def test_main_wins_over_the_main_block_and_run_is_the_last_resort(tmp_path) -> None:
    with_main = _script(
        tmp_path, "def main():\n    return 1\nif __name__ == '__main__':\n    main()\n", "a.py"
    )
    only_run = _script(tmp_path, "def run(rank, size):\n    return rank\n", "b.py")
    assert not runs_as_main(with_main) and not runs_as_main(only_run)
    assert run_script(only_run, topology="multi_sip", world_size=2, echo=_quiet).returns == [0, 1]


SELF_STARTING = """\
    import sys
    import kernbench.torch as torch
    import kernbench.torch.distributed as dist

    def main():
        dist.init_process_group()
        t = torch.ones(8) * (dist.get_rank() + 1)
        dist.all_reduce(t)
        assert t.tolist() == [6.0] * 8
        return 0

    {last_line}
"""


@pytest.mark.parametrize("last_line", ["main()", "sys.exit(main())", "status = main()"])
def test_a_script_calling_its_own_main_at_module_level_runs_it_once_per_rank(
    tmp_path, last_line
) -> None:
    path = _script(tmp_path, SELF_STARTING.format(last_line=last_line))
    assert not runs_as_main(path) and calls_main_at_module_level(path)
    result = run_script(path, topology="multi_sip", world_size=3, echo=_quiet)
    # once per rank: imported and then called per rank, main() would run twice
    assert [c["op"] for c in result.report["collectives"]] == ["all_reduce"]
    assert result.report["world_size"] == 3 and len(result.per_rank_ps) == 3


@pytest.mark.parametrize(
    ("body", "calls"),
    [
        ("def main():\n    pass\nif __name__ == '__main__':\n    main()\n", False),
        ("def main():\n    pass\nif '__main__' == __name__:\n    main()\n", False),
        ("def main():\n    pass\nlater = lambda: main()\n", False),
        ("def main():\n    pass\nclass A:\n    def f(self):\n        main()\n", False),
        ("def main():\n    pass\nif True:\n    main()\n", True),
        ("def main():\n    pass\nprint(main())\n", True),
    ],
    ids=["guard", "guard-reversed", "lambda", "method", "plain-if", "nested-call"],
)
def test_which_module_level_lines_call_main(tmp_path, body, calls) -> None:
    assert calls_main_at_module_level(_script(tmp_path, body)) is calls


def test_a_script_without_any_entry_runs_as_a_program(tmp_path, capsys) -> None:
    # All its work at module level, as pytorch/examples' regression/main.py: python runs it
    # once, and so does kernbench run, as __main__, its tensors on the machine's clock.
    path = _script(
        tmp_path,
        "import kernbench.torch as torch\n"
        "x = torch.arange(8, dtype=torch.float32)\n"
        "y = (x * 2).sum().item()\n"
        "print('VALUE', y, __name__)\n",
    )
    assert runs_as_main(path)
    result = run_script(path, topology="tiny", echo=_quiet)
    assert "VALUE 56.0 __main__" in capsys.readouterr().out
    assert result.elapsed_ps > 0 and result.report["world_size"] == 1


def test_a_script_that_only_defines_functions_is_told_nothing_ran(tmp_path, capsys) -> None:
    path = _script(tmp_path, "def mian():\n    pass\n")  # main misspelt
    result = run_script(path, topology="tiny", echo=_quiet)
    assert result.elapsed_ps == 0
    assert "did nothing on the machine; kernbench runs main() once per rank" in (
        capsys.readouterr().err
    )


def test_a_main_block_ending_in_sys_exit_0_still_reports(tmp_path) -> None:
    path = _script(tmp_path, MAIN_BLOCK + "    raise SystemExit(0)\n")
    assert run_script(path, topology="multi_sip", echo=_quiet).returns == [3.0, 3.0]


# ----------------------------------------------------------------- init_process_group checks
def _init(kwargs: dict) -> None:
    dist.init_process_group("gloo", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"world_size": 16}, "init_process_group(world_size=16): this machine has 4 devices"),
        ({"world_size": 3}, "init_process_group(world_size=3) but this run has 2 ranks"),
        ({"rank": 7}, "init_process_group(rank=7): rank must be in 0..1"),
        ({"rank": "0"}, "init_process_group: rank must be an int"),
    ],
    ids=["beyond-machine", "other-run", "rank-range", "rank-type"],
)
def test_init_process_group_checks_rank_and_world_size(kwargs, message) -> None:
    with pytest.raises(RankError) as info:
        kernbench.simulate(_init, topology="multi_sip", world_size=2, args=(kwargs,))
    assert message in str(info.value.__cause__)


# ------------------------------------------------------------ point to point: the user's call
def _p2p(call: str, peer_kind: str):
    dist.init_process_group()
    me = dist.get_rank()
    t = torch.ones(4)
    peer = me if peer_kind == "self" else 9
    if call in ("send", "isend"):
        getattr(dist, call)(t, dst=peer)
    else:
        getattr(dist, call)(t, src=peer)


@pytest.mark.parametrize("call", ["send", "isend", "recv", "irecv"])
@pytest.mark.parametrize("peer_kind", ["self", "missing"])
def test_p2p_errors_name_the_call_made(call, peer_kind) -> None:
    with pytest.raises(RankError) as info:
        kernbench.simulate(_p2p, topology="multi_sip", world_size=2, args=(call, peer_kind))
    text = str(info.value.__cause__)
    assert text.startswith(f"{call}: ")
    other = {"send": "isend", "recv": "irecv", "isend": "send", "irecv": "recv"}[call]
    assert not text.startswith(f"{other}:")


def _p2p_outside_group():
    dist.init_process_group()
    group = dist.new_group([0, 1])
    t = torch.full((4,), 5.0)
    if dist.get_rank() == 2:
        return [
            dist.send(t, dst=0, group=group),
            dist.isend(t, dst=0, group=group),
            dist.recv(t, src=0, group=group),
            dist.irecv(t, src=0, group=group),
            t[0].item(),
        ]
    if dist.get_rank() == 0:
        dist.send(t, dst=1, group=group)
    else:
        dist.recv(t, src=0, group=group)
    return None


def test_p2p_on_a_group_the_rank_is_not_in_warns_and_does_nothing() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = kernbench.simulate(_p2p_outside_group, topology="multi_sip", world_size=3)
    assert result.returns[2] == [None, None, -1, None, 5.0]
    texts = [str(w.message) for w in caught]
    for call in ("send", "isend", "recv", "irecv"):
        assert f"Running {call} on global rank 2 which does not belong to the given group." in texts


def _send_to_a_rank_outside_the_group():
    dist.init_process_group()
    group = dist.new_group([0, 1])
    if dist.get_rank() == 0:
        dist.send(torch.ones(4), dst=2, group=group)


def test_p2p_peer_outside_the_group_is_an_error_naming_the_argument() -> None:
    with pytest.raises(RankError) as info:
        kernbench.simulate(_send_to_a_rank_outside_the_group, topology="multi_sip", world_size=3)
    assert isinstance(info.value.__cause__, DistributedError)
    assert "send: global rank 2 (dst=2) is not part of ProcessGroup(group1, ranks=[0, 1])" in str(
        info.value.__cause__
    )


# ------------------------------------------------------------------ $KERNBENCH_TOPOLOGY
@pytest.mark.parametrize("value", ["ring8", "topologies/ring8.yaml", "ring8.yaml"])
def test_kernbench_topology_takes_a_name_or_a_path_that_falls_back(
    value, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNBENCH_TOPOLOGY", value)
    assert default_topology_path().name == "ring8.yaml"


def test_kernbench_topology_that_names_nothing_lists_the_bundled_machines(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KERNBENCH_TOPOLOGY", "topologies/nope.yaml")
    with pytest.raises(InputFileError, match="bundled: .*ring8"):
        default_topology_path()


def _bad_argument(what: str):
    dist.init_process_group()
    t = torch.ones(4)
    if what == "op":
        dist.all_reduce(t, op="sum")
    elif what == "group":
        dist.broadcast(t, src=0, group="everyone")
    else:
        dist.send(t, dst=1, group="everyone")


@pytest.mark.parametrize(
    ("what", "message"),
    [
        ("op", "all_reduce: op must be a dist.ReduceOp (ReduceOp.SUM, "),
        ("group", "broadcast: group must be a ProcessGroup"),
        ("p2p-group", "send: group must be a ProcessGroup"),
    ],
)
def test_argument_errors_name_the_call(what, message) -> None:
    with pytest.raises(RankError) as info:
        kernbench.simulate(_bad_argument, topology="multi_sip", world_size=2, args=(what,))
    assert message in str(info.value.__cause__)


# ------------------------------------------------------ ranks started by torch.multiprocessing
def _noop(rank: int, *args) -> None:
    return None


def test_mp_spawn_beyond_the_machine_names_nprocs_and_the_devices() -> None:
    import kernbench.torch.multiprocessing as mp
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("multi_sip")), pytest.raises(DistributedError) as info:
        mp.spawn(_noop, nprocs=5)
    assert "nprocs 5 does not fit: the topology has 4 devices" in str(info.value)


def test_mp_process_beyond_the_machine_names_the_process_count() -> None:
    import kernbench.torch.multiprocessing as mp
    from kernbench.runtime import RuntimeContext, use_context

    with use_context(RuntimeContext("multi_sip")):
        processes = [mp.Process(target=_noop, args=(r,)) for r in range(5)]
        for p in processes:
            p.start()
        with pytest.raises(DistributedError, match="mp.Process count 5 does not fit"):
            processes[0].join()


def test_a_ddp_training_script_with_amp_data_loading_and_a_checkpoint_runs_as_written(
    tmp_path, test_data_dir
) -> None:
    checkpoint = tmp_path / "ckpt.pt"
    lines: list[str] = []
    result = run_script(
        str(test_data_dir / "ddp_amp_training.py"),
        topology="multi_sip",
        world_size=2,
        per_rank=True,
        script_args=[str(checkpoint)],
        echo=lines.append,
    )
    ops = [c["op"] for c in result.report["collectives"]]
    # DDP's one (coalesced) broadcast of the 4 parameters, then one all_reduce per step:
    # the model's 4 gradients fit one bucket (2 epochs of 32 samples each per rank, batches of 8)
    assert ops.count("broadcast") == 1 and ops.count("all_reduce") == 2 * 4
    with use_context(RuntimeContext("tiny")):
        state = torch.load(checkpoint)
        assert list(state) == ["net1.weight", "net1.bias", "net2.weight", "net2.bias"]
        assert all(np.isfinite(v.numpy()).all() for v in state.values())


def test_a_gpt_pretraining_script_in_nanogpts_style_runs_as_written(
    tmp_path, test_data_dir, capsys
) -> None:
    rng = np.random.default_rng(0)
    for split, n in (("train", 2048), ("val", 512)):
        rng.integers(0, 64, n).astype(np.uint16).tofile(tmp_path / f"{split}.bin")
    result = run_script(
        str(test_data_dir / "gpt_pretraining.py"),
        topology="multi_sip",
        world_size=2,
        per_rank=True,
        script_args=[str(tmp_path)],
        echo=_quiet,
    )
    out = capsys.readouterr().out.splitlines()
    printed = [line for line in out if line.startswith(("step", "iter", "resumed", "sampled"))]
    assert [line.split(":")[0].split(",")[0] for line in printed] == [
        "step 0", "iter 0", "step 1", "iter 1", "resumed at 1", "sampled [[0",
    ]  # fmt: skip
    first = float(printed[0].split("train loss ")[1].split(",")[0])
    assert abs(first - np.log(64)) < 0.1  # 0.02-std initial weights: near-uniform logits
    sampled = [int(t) for t in printed[-1].split("[[")[1].split("]]")[0].split(",")]
    assert len(sampled) == 4 and all(0 <= t < 64 for t in sampled)
    ops = [c["op"] for c in result.report["collectives"]]
    # DDP broadcasts the 16 parameters (the tied embedding once) coalesced, in one
    # collective, as torch's _broadcast_coalesced; each of the 2 iterations
    # has one micro-step per rank (2 // 2), and its gradients fit one bucket
    assert ops.count("broadcast") == 1 and ops.count("all_reduce") == 2
    assert (tmp_path / "ckpt.pt").is_file()


def test_a_llama_training_script_with_checkpointing_and_a_custom_function_runs_as_written(
    tmp_path, test_data_dir, capsys, monkeypatch
) -> None:
    monkeypatch.setenv("CKPT", str(tmp_path / "llama.pt"))
    result = run_script(
        str(test_data_dir / "llama_training.py"),
        topology="multi_sip",
        world_size=2,
        per_rank=True,
        echo=_quiet,
    )
    out = capsys.readouterr().out.splitlines()
    steps = [line for line in out if line.startswith("step ")]
    assert [line.split(":")[0] for line in steps] == [f"step {i}" for i in range(3)]
    losses = [float(line.split("loss ")[1].split(",")[0]) for line in steps]
    assert abs(losses[0] - np.log(64)) < 0.1 and losses[-1] < losses[0]
    # warm-up then cosine: the learning rate after each step, as LambdaLR computes it
    lrs = [float(line.split("lr ")[1]) for line in steps]
    expected = [3e-3 * 0.5 * (1 + np.cos(np.pi * (s - 1) / 2)) for s in range(1, 4)]
    np.testing.assert_allclose(lrs, expected, atol=1e-6)
    assert any(line.startswith("peak memory ") for line in out)
    ops = [c["op"] for c in result.report["collectives"]]
    # DDP broadcasts the 21 parameters and 2 buffers once, the buffers again each forward
    # (each time one coalesced broadcast, as torch's);
    # each step one gradient bucket and the logged loss are all-reduced
    assert ops.count("broadcast") == 1 + 3 and ops.count("all_reduce") == 2 * 3
    state = torch.load(tmp_path / "llama.pt", weights_only=True)
    assert "layers.1.feed_forward.w3.weight" in state and "cos" not in state
