"""KernBench: a discrete-event simulator of AI-accelerator systems on SimPy."""

import os

# The kernel interpreter runs many small NumPy products; a multi-threaded BLAS spends
# more time waking threads than computing them, and sweep workers run side by side.
# Set before NumPy loads; a value the user chose wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from kernbench.errors import KernBenchError  # noqa: E402

__version__ = "0.1.0"

__all__ = ["KernBenchError", "__version__", "simulate", "SimResult"]


def __getattr__(name: str):
    # The harness imports every layer; load it only when asked for.
    if name in ("simulate", "SimResult"):
        import importlib

        return getattr(importlib.import_module("kernbench.bench.simulate"), name)
    raise AttributeError(f"module 'kernbench' has no attribute {name!r}")
