"""Import order changes no value and no time: ``import numpy`` first or ``import kernbench`` first.

KernBench pins BLAS to one thread through environment variables when it is
imported before NumPy, and with threadpoolctl when a run starts (NumPy may
already have loaded its BLAS with one thread per core).  Each order runs a
float16 blocked matmul kernel (``tl.dot`` accumulates with NumPy's BLAS) in a
fresh interpreter whose environment sets no thread count.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROGRAM = """\
import sys

if sys.argv[1] == "numpy-first":
    import numpy as np
    import kernbench
else:
    import kernbench
    import numpy as np

import hashlib
import json

from threadpoolctl import threadpool_info

sys.path.insert(0, sys.argv[2])
from matmul import matmul_kernel  # benches/matmul.py

from kernbench.kernels import cdiv
from kernbench.runtime import current_context

M = N = K = 128
BLOCK = 32


def body():
    ctx = current_context()
    rng = np.random.default_rng(7)
    a, b = (rng.standard_normal((M, K), dtype=np.float32) for _ in range(2))
    ta, tb = ctx.empty((M, K), "float16"), ctx.empty((K, N), "float16")
    tc = ctx.empty((M, N), "float16")
    ta.copy_(a)
    tb.copy_(b)
    grid = (cdiv(M, BLOCK), cdiv(N, BLOCK))
    launch = matmul_kernel[grid](
        ta, tb, tc, M, N, K, K, 1, N, 1, N, 1, BLOCK_M=BLOCK, BLOCK_N=BLOCK, BLOCK_K=BLOCK
    )
    return hashlib.sha256(tc.numpy().tobytes()).hexdigest(), launch.elapsed_ps


result = kernbench.simulate(body, topology="tiny", world_size=1)
digest, kernel_ps = result.returns[0]
threads = sorted({pool["num_threads"] for pool in threadpool_info()})
print(json.dumps({"digest": digest, "kernel_ps": kernel_ps, "run_ps": result.elapsed_ps,
                  "trace": result.report["trace_digest"], "threads": threads}))
"""

THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _run(order: str, tmp_path: Path) -> dict:
    program = tmp_path / "order.py"
    program.write_text(PROGRAM)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in THREAD_VARIABLES and not k.startswith("KERNBENCH_")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    completed = subprocess.run(
        [sys.executable, str(program), order, str(ROOT / "benches")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def orders(tmp_path_factory) -> dict[str, dict]:
    return {
        order: _run(order, tmp_path_factory.mktemp(order))
        for order in ("numpy-first", "kernbench-first")
    }


def test_numpy_first_gives_the_same_values_and_times(orders) -> None:
    first, second = orders["numpy-first"], orders["kernbench-first"]
    assert first["digest"] == second["digest"]
    assert first["kernel_ps"] == second["kernel_ps"] > 0
    assert (first["run_ps"], first["trace"]) == (second["run_ps"], second["trace"])


def test_every_blas_pool_runs_one_thread_whatever_the_order(orders) -> None:
    for result in orders.values():
        assert result["threads"] in ([], [1])
