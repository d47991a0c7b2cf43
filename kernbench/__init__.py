"""KernBench: a discrete-event simulator of AI-accelerator systems on SimPy."""

from kernbench.errors import KernBenchError

__version__ = "0.1.0"

__all__ = ["KernBenchError", "__version__", "simulate", "SimResult"]


def __getattr__(name: str):
    # The harness imports every layer; load it only when asked for.
    if name in ("simulate", "SimResult"):
        import importlib

        return getattr(importlib.import_module("kernbench.bench.simulate"), name)
    raise AttributeError(f"module 'kernbench' has no attribute {name!r}")
