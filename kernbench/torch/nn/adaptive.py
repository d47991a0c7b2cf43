"""``nn.AdaptiveLogSoftmaxWithLoss``: torch's adaptive softmax (Grave et al., "Efficient
softmax approximation for GPUs"), built as torch builds it.

The classes below ``cutoffs[0]`` (the shortlist) and one entry per cluster are the
``head``, a ``Linear``; cluster ``i`` is ``tail[i]``, a ``Sequential`` of two ``Linear``
layers without bias (``in_features`` to ``in_features // div_value ** (i + 1)`` to the
cluster's classes), so parameter and ``state_dict`` names are torch's (``head.weight``,
``tail.0.0.weight``, ``tail.0.1.weight``, ...) and the cost is those layers' kernels.

``forward(input, target)`` gives ``_ASMoutput(output, loss)``: each row's log-probability
of its target and their negated mean.  As torch's, each cluster's projection runs only on
the rows whose targets fall in it: the rows are found on the host (``nonzero`` of the
cluster's mask, read as torch's is) and gathered with ``index_select``; then
``log_softmax`` and ``gather`` of the head for every row.  ``log_prob(input)`` is every
class's log-probability (every cluster on every row); ``predict(input)`` is its argmax,
found as torch finds it: the head's argmax, and the full distribution only for the rows
whose argmax is a cluster.  ``forward`` takes a 2-D input with a 1-D target or a 1-D
input with a 0-D target; ``log_prob`` and ``predict`` take 2-D inputs, as torch's.

A timing-only run has no values to route rows by, so the rows are taken as split evenly
over the shortlist and the clusters, in order (ADR 0035): the same kernels run on those
sizes, and the host reads cost what they cost with values.
"""

from __future__ import annotations

import numbers
from collections import namedtuple
from collections.abc import Sequence
from typing import Any

import numpy as np

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.host_values import checked_read
from kernbench.torch.nn import functional as F
from kernbench.torch.nn.containers import ModuleList, Sequential
from kernbench.torch.nn.layers import Linear
from kernbench.torch.nn.module import Module
from kernbench.torch.shapes import tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])  # noqa: PYI024 - torch's type


def _rows(mask: Tensor, placeholder: tuple[int, int]) -> Tensor:
    """The indices of ``mask``'s true rows (int64, 1-D), read on the host as ``nonzero``
    reads them; in a timing-only run, which has no values, rows ``placeholder`` [start,
    stop) after a read of the mask that costs what the read with values costs."""
    if not mask.storage_device_tensor.context.timing_only:
        return mask.nonzero().view(-1)
    checked_read(mask)
    start, stop = placeholder
    rows = mask.new_empty((stop - start,), dtype=DTYPE_OBJECTS["int64"])
    return rows.copy_(np.arange(start, stop, dtype=np.int64))


def _even_split(rows: int, parts: int) -> list[tuple[int, int]]:
    """``rows`` split evenly into ``parts`` consecutive runs (timing-only routing)."""
    bounds = np.linspace(0, rows, parts + 1).astype(np.int64).tolist()
    return list(zip(bounds[:-1], bounds[1:], strict=True))


class AdaptiveLogSoftmaxWithLoss(Module):
    """``AdaptiveLogSoftmaxWithLoss(in_features, n_classes, cutoffs, div_value=4.0,
    head_bias=False, device=None, dtype=None)``, torch's layers and arguments."""

    def __init__(
        self,
        in_features: int,
        n_classes: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        head_bias: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise TensorValueError("cutoffs should be a sequence of length larger than 0")
        if (
            cutoffs != sorted(cutoffs)
            or min(cutoffs) <= 0
            or max(cutoffs) > n_classes - 1
            or len(set(cutoffs)) != len(cutoffs)
            or any(not isinstance(c, numbers.Real) or int(c) != c for c in cutoffs)
        ):
            raise TensorValueError(
                "cutoffs should be a sequence of unique, positive integers sorted in an "
                "increasing order, where each value is between 1 and n_classes-1"
            )
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = [*cutoffs, n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        self.head = Linear(in_features, self.head_size, bias=head_bias, device=device, dtype=dtype)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(
                Sequential(
                    Linear(in_features, hidden, bias=False, device=device, dtype=dtype),
                    Linear(hidden, size, bias=False, device=device, dtype=dtype),
                )
            )

    def reset_parameters(self) -> None:
        self.head.reset_parameters()
        for projection in self.tail:
            for layer in projection:
                layer.reset_parameters()

    def forward(self, input_: Tensor, target_: Tensor) -> Any:
        """``_ASMoutput(output, loss)``: each row's log-probability of its target, and
        the mean of their negatives."""
        x = tensor_argument(input_, "AdaptiveLogSoftmaxWithLoss")
        t = tensor_argument(target_, "AdaptiveLogSoftmaxWithLoss")
        if t.ndim == 1:
            if x.ndim == 0 or x.shape[0] != t.shape[0]:
                raise TensorError(
                    "Input and target should have the same size in the batch dimension."
                )
            if x.ndim != 2:
                raise TensorError(
                    "1D target tensor expects 2D input tensors, but found inputs with size "
                    f"{x.shape}"
                )
        elif t.ndim == 0:
            if x.ndim != 1:
                raise TensorError(
                    "0D target tensor expects 1D input tensors, but found inputs with size "
                    f"{x.shape}"
                )
        else:
            raise TensorError("0D or 1D target tensor expected, multi-target not supported")
        batched = t.ndim > 0
        x = x if batched else x.unsqueeze(0)
        t = t if batched else t.unsqueeze(0)
        batch = t.shape[0]
        output = x.new_zeros(batch)
        gather_inds = t.new_empty(batch)
        bounds = [0, *self.cutoffs]
        placeholders = _even_split(batch, len(bounds) - 1)
        used = 0
        for i in range(len(bounds) - 1):
            low, high = bounds[i], bounds[i + 1]
            rows = _rows((t >= low) & (t < high), placeholders[i])
            if rows.numel() == 0:
                continue
            if i == 0:
                gather_inds.index_copy_(0, rows, t.index_select(0, rows))
            else:
                relative = t.index_select(0, rows) - low
                cluster_output = self.tail[i - 1](x.index_select(0, rows))
                gather_inds.index_fill_(0, rows, self.shortlist_size + i - 1)
                cluster_logprob = F.log_softmax(cluster_output, dim=1)
                local = cluster_logprob.gather(1, relative.unsqueeze(1))
                output.index_copy_(0, rows, local.squeeze(1))
            used += rows.numel()
        if used != batch:
            raise TensorError(
                f"Target values should be in [0, {self.n_classes - 1}], but values in range "
                f"[{t.min().item()}, {t.max().item()}] were found. "
            )
        head_logprob = F.log_softmax(self.head(x), dim=1)
        output += head_logprob.gather(1, gather_inds.unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        return _ASMoutput(output if batched else output.squeeze(0), loss)

    def _get_full_log_prob(self, input: Tensor, head_output: Tensor) -> Tensor:  # noqa: A002
        """Every class's log-probability: the shortlist's from the head, each cluster's
        its own plus the head's for the cluster."""
        out = input.new_empty((head_output.shape[0], self.n_classes))
        head_logprob = F.log_softmax(head_output, dim=1)
        out[:, : self.shortlist_size] = head_logprob[:, : self.shortlist_size]
        for i, (start, stop) in enumerate(zip(self.cutoffs, self.cutoffs[1:], strict=False)):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            out[:, start:stop] = cluster_logprob + head_logprob[
                :, self.shortlist_size + i
            ].unsqueeze(1)
        return out

    def _batch(self, input: Any, what: str) -> Tensor:  # noqa: A002
        x = tensor_argument(input, f"AdaptiveLogSoftmaxWithLoss.{what}")
        if x.ndim != 2:
            raise TensorError(
                f"AdaptiveLogSoftmaxWithLoss.{what}: expects a 2D input (N, in_features), as "
                f"torch's, but found inputs with size {x.shape}"
            )
        return x

    def log_prob(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        """The log-probability of every class for each row of (N, in_features) ``input``."""
        x = self._batch(input, "log_prob")
        return self._get_full_log_prob(x, self.head(x))

    def predict(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        """The most probable class of each row of (N, in_features) ``input``: the head's
        argmax, and the full distribution's only for rows whose argmax is a cluster."""
        x = self._batch(input, "predict")
        head_output = self.head(x)
        output = head_output.argmax(dim=1)
        outside = output >= self.shortlist_size
        batch = x.shape[0]
        shortlist_rows = _even_split(batch, self.n_clusters + 1)[0][1]
        rows = _rows(outside, (shortlist_rows, batch))
        if rows.numel() == 0:
            return output
        if rows.numel() == batch:
            return self._get_full_log_prob(x, head_output).argmax(dim=1)
        log_prob = self._get_full_log_prob(
            x.index_select(0, rows), head_output.index_select(0, rows)
        )
        return output.index_copy_(0, rows, log_prob.argmax(dim=1))
