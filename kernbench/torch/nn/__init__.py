"""``torch.nn`` for KernBench: ``torch.nn.functional`` (activations, norms, losses) and
``torch.nn.utils`` (gradient clipping).

There are no modules, parameters or autograd; asking for anything else
(``nn.Module``, ``nn.Linear``, ...) raises a
:class:`~kernbench.errors.TensorAttributeError` that says so and what to
write instead.
"""

from __future__ import annotations

from typing import Any

from kernbench.errors import TensorAttributeError
from kernbench.torch.nn import functional, utils

__all__ = ["functional", "utils"]


_AS_TENSORS = (
    "there are no modules or autograd: keep the weights as tensors and call "
    "torch.nn.functional (F.linear(x, weight, bias), F.layer_norm, "
    "F.scaled_dot_product_attention, ...)"
)
# What to write for the nn names model code reaches for.
HINTS = {
    **dict.fromkeys(
        ("Module", "Linear", "LayerNorm", "RMSNorm", "Embedding", "Sequential", "ModuleList",
         "MultiheadAttention", "GELU", "ReLU", "SiLU", "Dropout", "Softmax"),
        _AS_TENSORS,
    ),
    "Parameter": "there are no parameters or autograd: use the tensor itself "
    "(t.requires_grad_() is accepted; grad is a slot you assign)",
    "init": "fill the tensor: w.copy_(torch.randn(w.shape) * std), w.zero_(), w.fill_(v)",
    "parallel": "there is no DistributedDataParallel: all_reduce the gradients with "
    "torch.distributed (as benches/dp_training_step.py does)",
}  # fmt: skip


def __getattr__(name: str) -> Any:
    hint = HINTS.get(name, "there are no modules or autograd")
    raise TensorAttributeError(
        f"module 'kernbench.torch.nn' has no attribute {name!r}: {hint}; "
        f"kernbench.torch.nn.functional has {', '.join(functional.__all__)}"
    )
