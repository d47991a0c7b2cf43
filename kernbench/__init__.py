"""KernBench: a discrete-event simulator of AI-accelerator systems on SimPy."""

import os

# The kernel interpreter runs many small NumPy products; a multi-threaded BLAS spends
# more time waking threads than computing them, and sweep workers run side by side.
# Set before NumPy loads; a value the user chose wins.  NumPy may have loaded first
# (``import numpy`` before ``import kernbench``): limit_blas_threads() then pins the
# loaded pools when a run starts, so that import order changes no value or time.
_BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
_USER_SET_THREADS = any(os.environ.get(_var) for _var in _BLAS_VARIABLES)
for _var in _BLAS_VARIABLES:
    os.environ.setdefault(_var, "1")

from kernbench.errors import KernBenchError  # noqa: E402

__version__ = "0.1.0"

__all__ = ["KernBenchError", "__version__", "limit_blas_threads", "simulate", "SimResult"]


def limit_blas_threads() -> None:
    """Pin the BLAS and OpenMP thread pools loaded so far to one thread.

    Called when a run starts (``simulate``, ``kernbench run``, the first
    context of a plain ``python`` script).  A thread count the user set in the
    environment before importing KernBench is left as it is.
    """
    if _USER_SET_THREADS:
        return
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1)


def __getattr__(name: str):
    # The harness imports every layer; load it only when asked for.
    if name in ("simulate", "SimResult"):
        import importlib

        return getattr(importlib.import_module("kernbench.bench.simulate"), name)
    raise AttributeError(f"module 'kernbench' has no attribute {name!r}")
