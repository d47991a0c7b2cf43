"""KernBench: a discrete-event simulator of AI-accelerator systems on SimPy."""

from kernbench.errors import KernBenchError

__version__ = "0.1.0"

__all__ = ["KernBenchError", "__version__"]
