"""Harness layer: running bench scripts, reports, traces."""

from kernbench.bench.simulate import SimResult, run_report, simulate

__all__ = ["SimResult", "run_report", "simulate"]
