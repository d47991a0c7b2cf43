"""The margin, embedding and likelihood loss modules (``MarginRankingLoss``,
``HingeEmbeddingLoss``, ``SoftMarginLoss``, ``CosineEmbeddingLoss``, ``MultiMarginLoss``,
``MultiLabelMarginLoss``, ``MultiLabelSoftMarginLoss``, ``TripletMarginLoss``,
``TripletMarginWithDistanceLoss``, ``PoissonNLLLoss``, ``GaussianNLLLoss``) and the
distance modules ``CosineSimilarity`` and ``PairwiseDistance``.

Each holds torch's constructor arguments (the losses their ``reduction``, from torch's
legacy ``size_average``/``reduce`` too; a class ``weight`` is a buffer, as torch's) and
calls its ``torch.nn.functional`` op.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorValueError
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.functional_modules import LossBase, WeightedLossBase
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = [
    "CTCLoss",
    "CosineEmbeddingLoss",
    "CosineSimilarity",
    "GaussianNLLLoss",
    "HingeEmbeddingLoss",
    "MarginRankingLoss",
    "MultiLabelMarginLoss",
    "MultiLabelSoftMarginLoss",
    "MultiMarginLoss",
    "PairwiseDistance",
    "PoissonNLLLoss",
    "SoftMarginLoss",
    "TripletMarginLoss",
    "TripletMarginWithDistanceLoss",
]


class MarginRankingLoss(LossBase):
    def __init__(
        self,
        margin: float = 0.0,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.margin_ranking_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class HingeEmbeddingLoss(LossBase):
    def __init__(
        self,
        margin: float = 1.0,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.hinge_embedding_loss(input, target, margin=self.margin, reduction=self.reduction)


class SoftMarginLoss(LossBase):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)


class CosineEmbeddingLoss(LossBase):
    def __init__(
        self,
        margin: float = 0.0,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input1: Tensor, input2: Tensor, target: Tensor) -> Tensor:
        return F.cosine_embedding_loss(
            input1, input2, target, margin=self.margin, reduction=self.reduction
        )


class MultiMarginLoss(WeightedLossBase):
    def __init__(
        self,
        p: int = 1,
        margin: float = 1.0,
        weight: Tensor | None = None,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2) or isinstance(p, bool):
            raise TensorValueError("only p == 1 and p == 2 supported")
        if weight is not None and weight.ndim != 1:
            raise TensorValueError(
                f"MultiMarginLoss: expected weight to be None or 1D tensor, got {weight.ndim}D "
                "instead"
            )
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.multi_margin_loss(
            input, target, p=self.p, margin=self.margin, weight=self.weight,
            reduction=self.reduction,
        )  # fmt: skip


class MultiLabelMarginLoss(LossBase):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(WeightedLossBase):
    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.multilabel_soft_margin_loss(
            input, target, weight=self.weight, reduction=self.reduction
        )


class TripletMarginLoss(LossBase):
    def __init__(
        self,
        margin: float = 1.0,
        p: float = 2.0,
        eps: float = 1e-6,
        swap: bool = False,
        size_average: Any = None,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise TensorValueError(
                f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead"
            )
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_loss(
            anchor, positive, negative, margin=self.margin, p=self.p, eps=self.eps,
            swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class TripletMarginWithDistanceLoss(LossBase):
    def __init__(
        self,
        *,
        distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
        margin: float = 1.0,
        swap: bool = False,
        reduction: str = "mean",
    ) -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise TensorValueError(
                f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got "
                f"{margin} instead"
            )
        self.distance_function = distance_function
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return F.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction,
        )  # fmt: skip


class PoissonNLLLoss(LossBase):
    def __init__(
        self,
        log_input: bool = True,
        full: bool = False,
        size_average: Any = None,
        eps: float = 1e-8,
        reduce: Any = None,
        reduction: str = "mean",
    ) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Tensor) -> Tensor:
        return F.poisson_nll_loss(
            log_input, target, log_input=self.log_input, full=self.full, eps=self.eps,
            reduction=self.reduction,
        )  # fmt: skip


class CTCLoss(LossBase):
    """The connectionist temporal classification loss (:func:`F.ctc_loss`)."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
        super().__init__(reduction=reduction)
        self.blank, self.zero_infinity = blank, zero_infinity

    def forward(
        self, log_probs: Tensor, targets: Tensor, input_lengths: Any, target_lengths: Any
    ) -> Tensor:
        return F.ctc_loss(
            log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction,
            self.zero_infinity,
        )  # fmt: skip


class GaussianNLLLoss(LossBase):
    def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"):
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Tensor, var: Tensor | float) -> Tensor:  # noqa: A002
        return F.gaussian_nll_loss(
            input, target, var, full=self.full, eps=self.eps, reduction=self.reduction
        )


class CosineSimilarity(Module):
    """:func:`F.cosine_similarity` along ``dim``."""

    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    """:func:`F.pairwise_distance` over the last dim (torch keeps ``p`` as ``norm``)."""

    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)
