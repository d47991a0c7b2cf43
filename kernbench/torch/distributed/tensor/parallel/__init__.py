"""``torch.distributed.tensor.parallel``: ``parallelize_module`` with ``ColwiseParallel``
and ``RowwiseParallel`` (Megatron-style tensor parallelism), without DTensor (ADR 0023).

The styles shard ``nn.Linear`` and ``nn.Embedding`` parameters into plain local tensors
(``model.in_proj.weight.shape`` is this rank's shape) and run the collectives torch's
default layouts imply: a ``ColwiseParallel``/``RowwiseParallel`` pair costs one
all-reduce in forward (after the row-sharded layer) and one in backward (the gradient of
the column-sharded layer's input, when it needs one).  ``SequenceParallel``,
``PrepareModuleInput``, ``PrepareModuleOutput`` and ``loss_parallel`` are refused when
used, naming what to use instead.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import UnsupportedNameError, unsupported_name
from kernbench.torch.distributed.tensor.parallel.api import parallelize_module
from kernbench.torch.distributed.tensor.parallel.style import (
    ColwiseParallel,
    ParallelStyle,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
)

__all__ = [
    "ColwiseParallel",
    "ParallelStyle",
    "PrepareModuleInput",
    "PrepareModuleOutput",
    "RowwiseParallel",
    "SequenceParallel",
    "loss_parallel",
    "parallelize_module",
]


def loss_parallel() -> Any:
    """Refused: it computes the cross-entropy of a DTensor sharded on the class dimension."""
    raise UnsupportedNameError(
        "torch.distributed.tensor.parallel.loss_parallel is not supported in KernBench: it "
        "needs the logits as a DTensor, and there is no DTensor here (ADR 0023); leave the "
        "output layer replicated (RowwiseParallel, or out of the plan) and call "
        "F.cross_entropy on the whole logits"
    )


def __getattr__(name: str) -> Any:
    raise unsupported_name(
        "kernbench.torch.distributed.tensor.parallel",
        "torch.distributed.tensor.parallel",
        name,
        __all__,
        {"PrepareModuleInputOutput": "see PrepareModuleInput (refused: no DTensor here)"},
    )
