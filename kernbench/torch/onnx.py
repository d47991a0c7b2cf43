"""``torch.onnx``: importable, as the programs that offer an ONNX export import it.

pytorch/examples' ``word_language_model/main.py`` imports ``torch.onnx`` at the top and
exports only when asked (``--onnx-export``).  KernBench simulates a program and builds
no graph to export, so the import works and an export says what to do instead.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import UnsupportedNameError, unsupported_name

__all__ = ["dynamo_export", "export", "is_in_onnx_export"]

_EXPORT = (
    "KernBench simulates the program and builds no graph to export; export the model with "
    "PyTorch itself (the same script, importing torch)"
)


def export(model: Any, args: Any = (), f: Any = None, *rest: Any, **options: Any) -> Any:
    """Refused: there is no ONNX graph here (see the module's docstring)."""
    raise UnsupportedNameError(f"torch.onnx.export: {_EXPORT}")


def dynamo_export(model: Any, *args: Any, **options: Any) -> Any:
    """Refused, as :func:`export`."""
    raise UnsupportedNameError(f"torch.onnx.dynamo_export: {_EXPORT}")


def is_in_onnx_export() -> bool:
    """Never: nothing is being exported (models ask this to pick their export-time path)."""
    return False


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.torch.onnx", "torch.onnx", name, __all__, {})
