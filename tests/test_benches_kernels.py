"""The kernel bench scripts under benches/: correct results, figures, and a printed table.

Each bench is imported by path and its ``run(ctx, ...)`` called on a fresh
context for a regular shape and a ragged one that needs masks; ``checked``
says the values were compared with NumPy.  Each script is also run as a
program (``python benches/X.py ...``) on tiny.yaml and must print its table
and exit 0.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernbench.runtime import RuntimeContext, use_context

ROOT = Path(__file__).resolve().parents[1]
BENCHES = ROOT / "benches"
TINY = "tiny"
DEFAULT = "default"


def load_bench(name: str):
    path = BENCHES / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"kernbench_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def vector_add():
    return load_bench("vector_add")


@pytest.fixture(scope="module")
def nki_add():
    return load_bench("nki_tensor_add_2core")


@pytest.fixture(scope="module")
def softmax():
    return load_bench("fused_softmax")


@pytest.fixture(scope="module")
def matmul():
    return load_bench("matmul")


def _check_figures(fig: dict) -> None:
    assert fig["checked"] is True
    assert fig["elapsed_ps"] > 0
    assert fig["time_us"] == pytest.approx(fig["elapsed_ps"] / 1e6)


# ----------------------------------------------------------------------------- vector add


@pytest.mark.parametrize("size", [1000, 98432])  # 1000 < BLOCK: one ragged, masked block
def test_vector_add_one_pe(vector_add, size):
    fig = vector_add.run(RuntimeContext(TINY), size=size, block=1024)
    _check_figures(fig)
    assert fig["programs"] == -(-size // 1024)
    assert fig["pes"] == 1
    assert fig["bytes"] == 3 * size * 4
    assert fig["gbps"] == pytest.approx(fig["bytes"] / (fig["elapsed_ps"] * 1e-12) / 1e9)


@pytest.mark.parametrize("size", [1000, 98432])
def test_vector_add_sharded_over_the_machine(vector_add, size):
    fig = vector_add.run(RuntimeContext(TINY), size=size, block=256, sharded=True)
    _check_figures(fig)
    assert fig["placement"] == "sharded"
    assert fig["pes"] == 4  # every PE of tiny.yaml holds a shard and runs programs


def test_vector_add_sharded_is_faster_than_one_pe_on_default(vector_add):
    one = vector_add.run(RuntimeContext(DEFAULT), size=98432)
    sharded = vector_add.run(RuntimeContext(DEFAULT), size=98432, sharded=True)
    _check_figures(one)
    _check_figures(sharded)
    assert sharded["pes"] > 64
    assert sharded["elapsed_ps"] * 5 < one["elapsed_ps"]


def test_vector_add_in_timing_only_mode_skips_the_check(vector_add):
    fig = vector_add.run(RuntimeContext(TINY, timing_only=True), size=1000)
    assert fig["checked"] is False
    assert fig["elapsed_ps"] > 0


# ----------------------------------------------------------------------------- NKI tensor add


@pytest.mark.parametrize("shape", [(256, 1024), (512, 512)])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_nki_tensor_add_one_and_two_cores(nki_add, shape, dtype):
    rows, cols = shape
    one = nki_add.run(RuntimeContext(TINY), rows=rows, cols=cols, cores=1, dtype=dtype)
    two = nki_add.run(RuntimeContext(TINY), rows=rows, cols=cols, cores=2, dtype=dtype)
    _check_figures(one)
    _check_figures(two)
    assert one["pes"] == ["sip0.cube0.pe0"]
    assert two["pes"] == ["sip0.cube0.pe0", "sip0.cube0.pe1"]
    assert one["grid"] == two["grid"] == (rows // 128, cols // 512)
    itemsize = 2 if dtype == "bfloat16" else 4
    assert one["bytes"] == 3 * rows * cols * itemsize


def test_nki_tensor_add_split_memory_gives_the_second_core_its_own_bandwidth(nki_add):
    one = nki_add.run(RuntimeContext(TINY), cores=1)
    split = nki_add.run(RuntimeContext(TINY), cores=2, split=True)
    _check_figures(split)
    assert split["elapsed_ps"] < 0.6 * one["elapsed_ps"]


def test_nki_tensor_add_rejects_shapes_that_do_not_tile(nki_add):
    with pytest.raises(ValueError, match="multiple of 256"):
        nki_add.run(RuntimeContext(TINY), rows=128, cols=1024, cores=2)


# ----------------------------------------------------------------------------- softmax


@pytest.mark.parametrize(
    ("topology", "shape", "placement"),
    [
        (TINY, (37, 100), "cube=row_wise x1"),  # BLOCK 128 > 100 columns: masked, -inf
        (TINY, (64, 128), "cube=row_wise x1"),
        (DEFAULT, (37, 100), "one PE"),  # 37 rows do not divide over 16 cubes
        (DEFAULT, (64, 128), "cube=row_wise x16"),
    ],
)
def test_fused_softmax(softmax, topology, shape, placement):
    fig = softmax.run(RuntimeContext(topology), rows=shape[0], cols=shape[1])
    _check_figures(fig)
    assert fig["placement"] == placement
    assert fig["programs"] == shape[0]
    assert fig["bytes"] == 2 * shape[0] * shape[1] * 4
    if placement == "cube=row_wise x16":
        assert fig["pes"] == 16  # one PE per cube runs that cube's rows


# ----------------------------------------------------------------------------- matmul


@pytest.mark.parametrize("mnk", [(100, 70, 50), (64, 64, 64), (129, 65, 33)])
def test_matmul(matmul, mnk):
    m, n, k = mnk
    fig = matmul.run(RuntimeContext(TINY), m=m, n=n, k=k)
    _check_figures(fig)
    assert fig["flops"] == 2 * m * n * k
    assert fig["programs"] == -(-m // 64) * -(-n // 64)
    assert fig["tflops"] == pytest.approx(fig["flops"] / (fig["elapsed_ps"] * 1e-12) / 1e12)
    # Every element of A is loaded once per column block, of B once per row block.
    assert fig["bytes_loaded"] == 4 * (m * k * -(-n // 64) + k * n * -(-m // 64))
    assert fig["bytes_stored"] == 4 * m * n


def test_matmul_float16(matmul):
    fig = matmul.run(RuntimeContext(TINY), m=100, n=70, k=50, dtype="float16")
    _check_figures(fig)


# ----------------------------------------------------------------------------- main()

MAIN_ARGS = {
    "vector_add": (["--size", "1000"], "vector add on tiny", 2),
    "nki_tensor_add_2core": (["--rows", "256", "--cols", "512"], "NKI tensor add", 3),
    "fused_softmax": (["--rows", "37", "--cols", "100"], "fused softmax on tiny", 1),
    "matmul": (["--m", "100", "--n", "70", "--k", "50"], "matmul float32 on tiny", 1),
}


def _table_rows(out: str) -> list[str]:
    lines = out.strip().splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line) == {"-"})
    return lines[rule + 1 :]


@pytest.mark.parametrize("name", sorted(MAIN_ARGS))
def test_bench_script_prints_a_table_and_exits_0(name):
    args, title, nrows = MAIN_ARGS[name]
    env = {**os.environ, "KERNBENCH_TOPOLOGY": TINY}
    env.pop("KERNBENCH_TIMING_ONLY", None)
    proc = subprocess.run(
        [sys.executable, str(BENCHES / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert title in proc.stdout
    rows = _table_rows(proc.stdout)
    assert len(rows) == nrows
    assert all(row.rstrip().endswith("True") for row in rows), proc.stdout


def test_bench_script_in_timing_only_mode_says_values_are_not_checked():
    env = {**os.environ, "KERNBENCH_TOPOLOGY": TINY, "KERNBENCH_TIMING_ONLY": "1"}
    proc = subprocess.run(
        [sys.executable, str(BENCHES / "matmul.py"), "--m", "64", "--n", "64", "--k", "64"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "timing-only (values not checked)" in proc.stdout
    assert _table_rows(proc.stdout)[0].rstrip().endswith("False")


@pytest.mark.parametrize("name", sorted(MAIN_ARGS))
def test_bench_main_in_process_uses_the_current_context(name, capsys):
    args, title, nrows = MAIN_ARGS[name]
    module = load_bench(name)
    ctx = RuntimeContext(TINY)
    with use_context(ctx):
        rows = module.main(args)
    assert len(rows) == nrows
    assert all(r["checked"] is True for r in rows)
    assert ctx.now > 0  # the launches ran on this context's clock
    out = capsys.readouterr().out
    assert title in out
    assert len(_table_rows(out)) == nrows


def test_vector_add_main_reports_a_placement_that_does_not_divide_as_skipped(capsys):
    module = load_bench("vector_add")
    with use_context(RuntimeContext(DEFAULT)):
        rows = module.main(["--size", "1000"])  # 1000 does not split over 16 cubes
    assert rows[0]["checked"] is True
    assert "does not split" in rows[1]["skipped"]
    assert "sharded    skipped:" in capsys.readouterr().out
