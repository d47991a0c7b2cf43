"""``torch.optim`` for KernBench: ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``, ``Adagrad``,
``Adadelta``, ``Adamax``, ``NAdam``, ``RAdam``, ``Rprop``, ``ASGD``, ``Adafactor`` over the
``grad`` slots ``backward()`` filled (or a script assigned), ``LBFGS`` over a closure,
``SparseAdam`` (its arguments and checks; its step refuses the dense gradients that are all
there are here, :mod:`~kernbench.torch.optim.sparse_adam`),
``torch.optim.lr_scheduler`` and ``torch.optim.swa_utils``
(:mod:`~kernbench.torch.optim.swa_utils`).

``step()`` updates each parameter whose ``grad`` is set with torch's
single-tensor formulas as in-place device ops, so it costs device time
(:mod:`~kernbench.torch.optim.optimizers`,
:mod:`~kernbench.torch.optim.optimizers_more`,
:mod:`~kernbench.torch.optim.adafactor`, :mod:`~kernbench.torch.optim.lbfgs`).
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError
from kernbench.torch.optim import lr_scheduler, swa_utils
from kernbench.torch.optim.adafactor import Adafactor
from kernbench.torch.optim.lbfgs import LBFGS
from kernbench.torch.optim.optimizer import Optimizer
from kernbench.torch.optim.optimizers import SGD, Adam, AdamW
from kernbench.torch.optim.optimizers_more import (
    ASGD,
    Adadelta,
    Adagrad,
    Adamax,
    NAdam,
    RAdam,
    RMSprop,
    Rprop,
)
from kernbench.torch.optim.sparse_adam import SparseAdam

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "RMSprop",
    "Adagrad",
    "Adadelta",
    "Adamax",
    "NAdam",
    "RAdam",
    "LBFGS",
    "Rprop",
    "ASGD",
    "Adafactor",
    "SparseAdam",
    "Optimizer",
    "lr_scheduler",
    "swa_utils",
]


def __getattr__(name: str) -> Any:
    raise TensorAttributeError(
        f"module 'kernbench.torch.optim' has no attribute {name!r}: there are "
        f"{', '.join(__all__)}; write other updates with in-place tensor ops "
        "(p.add_(g, alpha=-lr), as benches/zero_optimizer_step.py does)"
    )
