"""``torch.nn.functional.gumbel_softmax``: a differentiable sample of a categorical.

As torch's: Gumbel noise ``-log(E)`` with ``E ~ Exp(1)`` (``empty_like(logits).
exponential_()``, drawn from the rank's generator, so ``manual_seed`` repeats it but
the values are not torch's), ``softmax((logits + noise) / tau, dim)``, and with
``hard=True`` the one-hot of its argmax plus ``y_soft - y_soft.detach()`` (the
straight-through estimator: the forward is one-hot, the gradient the soft sample's).
Composed of tensor methods, so autograd records it.
"""

from __future__ import annotations

from kernbench.errors import TensorError
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["gumbel_softmax"]


def gumbel_softmax(
    logits: Tensor, tau: float = 1, hard: bool = False, eps: float = 1e-10, dim: int = -1
) -> Tensor:
    """``F.gumbel_softmax(logits, tau=1, hard=False, dim=-1)`` (``eps`` unused, as torch)."""
    tensor_argument(logits, "gumbel_softmax(logits)")
    if not logits.dtype.is_floating_point:
        raise TensorError(f"gumbel_softmax: logits must be floating point, got {logits.dtype}")
    noise = -logits.detach().new_empty(logits.shape).exponential_().log()
    y_soft = ((logits + noise) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.detach().argmax(dim, keepdim=True)
    y_hard = y_soft.detach().new_zeros(y_soft.shape).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft
