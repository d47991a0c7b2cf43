"""``torch.nn.functional.ctc_loss``: the connectionist temporal classification loss.

The negative log-likelihood of each target sequence under the per-frame class
log-probabilities, summed over every alignment (blanks between and around the labels, a
label repeated only across a blank), by the forward recursion in log space over the
extended target ``blank, l1, blank, l2, ..., blank``:

    alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)) + lp_t(l'_s)

where the ``s-2`` term counts only for a label that differs from the label two back.  All
samples of a batch run together, one step per frame (a sample whose input is shorter
keeps its values), in tensor methods that autograd records, so the gradient is the one
the recursion gives.  Impossible states hold ``-1e30`` instead of ``-inf``, which keeps
every gradient finite; a sample no alignment fits (a target longer than its input
allows) gets an infinite loss, or zero with ``zero_infinity=True`` (its gradient zero
too), as torch's.  The targets and lengths are read on the host, as torch's kernels read
them; a timing-only run, which has no values, prices the recursion for targets without
repeats, and lengths given as tensors as the longest the shapes allow.
``reduction='mean'`` divides each loss by its target length (at least 1) and averages
over the batch, as torch does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.dtypes import DTYPE_OBJECTS
from kernbench.torch.factories import tensor
from kernbench.torch.nn.argument_checks import (
    call_name,
    floating_input,
    host_values,
    reduced,
    reduction_argument,
)
from kernbench.torch.shapes import flag_argument, int_argument, tensor_argument
from kernbench.torch.tensor import Tensor

__all__ = ["ctc_loss"]

#: What an impossible state holds: far below any log-probability, and finite.
IMPOSSIBLE = -1e30


def _lengths(value: Any, what: str, name: str, batch: int, longest: list[int]) -> list[int]:
    """The lengths as ints; a tensor of them in a timing-only run, which keeps no values,
    counts as ``longest`` (every sample as long as the input allows: the dearest case)."""
    if isinstance(value, Tensor):
        if value.numel() != batch:
            raise TensorError(
                f"{call_name(what)}: {name} must be of size batch_size ({batch}), got "
                f"{value.numel()}"
            )
        values = host_values(value)
        if values is None:
            return list(longest)
        items = [int(v) for v in np.asarray(values).reshape(-1).tolist()]
    elif isinstance(value, list | tuple):
        items = [int_argument(v, call_name(what), name) for v in value]
    else:
        items = [int_argument(value, call_name(what), name)]
    if len(items) != batch:
        raise TensorError(
            f"{call_name(what)}: {name} must be of size batch_size ({batch}), got {len(items)}"
        )
    if any(v < 0 for v in items):
        raise TensorError(f"{call_name(what)}: {name} must be >= 0, got {items}")
    return items


def _labels(
    targets: Tensor, target_lengths: list[int], what: str, timing_only: bool
) -> list[list[int]]:
    """Each sample's labels, from (N, S) padded targets or their 1-D concatenation."""
    batch = len(target_lengths)
    if targets.ndim == 2:
        if targets.shape[0] != batch:
            raise TensorError(
                f"{call_name(what)}: targets has {targets.shape[0]} rows for a batch of {batch}"
            )
        longest = max(target_lengths, default=0)
        if targets.shape[1] < longest:
            raise TensorError(
                f"{call_name(what)}: Expected tensor to have size at least {longest} at "
                f"dimension 1, but got size {targets.shape[1]} for argument #2 'targets'"
            )
    elif targets.ndim == 1:
        if targets.shape[0] < sum(target_lengths):
            raise TensorError(
                f"{call_name(what)}: concatenated targets hold {targets.shape[0]} labels, "
                f"target_lengths sum to {sum(target_lengths)}"
            )
    else:
        raise TensorError(
            f"{call_name(what)}: targets must be 1-D (concatenated) or 2-D (batch, max "
            f"target length), got shape {list(targets.shape)}"
        )
    if timing_only:  # no values: labels without repeats price the same recursion
        return [[1 + i % 2 for i in range(n)] for n in target_lengths]
    values = np.asarray(host_values(targets)).astype(np.int64)
    if targets.ndim == 2:
        return [values[n, : target_lengths[n]].tolist() for n in range(batch)]
    starts = np.concatenate(([0], np.cumsum(target_lengths)[:-1])).astype(int)
    return [values[s : s + n].tolist() for s, n in zip(starts, target_lengths, strict=True)]


def _log_add(*terms: Tensor) -> Tensor:
    """``log(sum(exp(term)))`` elementwise, shifted by the largest term."""
    top = terms[0]
    for term in terms[1:]:
        top = top.maximum(term)
    total = (terms[0] - top).exp()
    for term in terms[1:]:
        total = total + (term - top).exp()
    return top + total.log()


def ctc_loss(
    log_probs: Tensor,
    targets: Tensor,
    input_lengths: Any,
    target_lengths: Any,
    blank: int = 0,
    reduction: str = "mean",
    zero_infinity: bool = False,
) -> Tensor:
    """The CTC loss of (T, N, C) or (T, C) ``log_probs`` against ``targets``."""
    what = "ctc_loss"
    lp = floating_input(log_probs, what, "log_probs")
    tgt = tensor_argument(targets, call_name(what))
    if tgt.dtype.is_floating_point:
        raise TensorError(f"{call_name(what)}: targets must hold integer labels, got {tgt.dtype!r}")
    reduction = reduction_argument(what, reduction)
    zero_inf = flag_argument(zero_infinity, call_name(what), "zero_infinity")
    unbatched = lp.ndim == 2
    if unbatched:
        lp = lp.unsqueeze(1)
        tgt = tgt.unsqueeze(0) if tgt.ndim == 1 else tgt
    if lp.ndim != 3:
        raise TensorError(
            f"{call_name(what)}: log_probs must be (T, N, C) or (T, C), got shape "
            f"{list(log_probs.shape)}"
        )
    frames, batch, classes = (int(s) for s in lp.shape)
    blank = int_argument(blank, call_name(what), "blank")
    if not 0 <= blank < classes:
        raise TensorError(
            f"{call_name(what)}: blank must be in label range [0, {classes}), got {blank}"
        )
    inputs = _lengths(input_lengths, what, "input_lengths", batch, [frames] * batch)
    if tgt.ndim == 2:
        widest = [int(tgt.shape[1])] * batch
    else:  # concatenated: shared out evenly
        share, extra = divmod(int(tgt.shape[0]), max(batch, 1))
        widest = [share + (n < extra) for n in range(batch)]
    lengths = _lengths(target_lengths, what, "target_lengths", batch, widest)
    if max(inputs, default=0) > frames:
        raise TensorError(
            f"{call_name(what)}: Expected input_lengths to have value at most {frames}, but "
            f"got value {max(inputs)}"
        )
    timing_only = lp.storage_device_tensor.context.timing_only
    labels = _labels(tgt, lengths, what, timing_only)
    for n, row in enumerate(labels):
        if any(not 0 <= c < classes for c in row):
            raise TensorError(
                f"{call_name(what)}: targets of sample {n} hold {row}; labels must be in "
                f"[0, {classes})"
            )

    device, dtype = lp.device, lp.dtype

    def const(values: Any) -> Tensor:  # host-made values as the loss's dtype, on its device
        return tensor(values, dtype=dtype, device=device)

    if batch and max(inputs, default=0):
        loss = _alignment_loss(lp, labels, inputs, lengths, blank, const)
    else:  # no frames anywhere: the empty target has likelihood 1, any other none
        loss = const(np.array([0.0 if m == 0 else -IMPOSSIBLE for m in lengths]))
        loss = loss + lp.sum() * 0.0  # zero gradients for log_probs
    loss = loss.masked_fill(loss > -IMPOSSIBLE / 10, 0.0 if zero_inf else float("inf"))
    if reduction == "mean":
        loss = loss / const(np.maximum(np.array(lengths, dtype=np.float64), 1.0))
    if unbatched and reduction == "none":
        return loss.reshape(())
    return reduced(loss, reduction)


def _alignment_loss(
    lp: Tensor,
    labels: list[list[int]],
    inputs: list[int],
    lengths: list[int],
    blank: int,
    const: Callable[[Any], Tensor],
) -> Tensor:
    """Each sample's negative log-likelihood by the forward recursion over (T, N, C)
    ``lp`` (``-IMPOSSIBLE`` or more where no alignment fits)."""
    frames, batch, _ = (int(n) for n in lp.shape)
    device = lp.device
    # The extended targets (blank, l1, blank, ..., blank), padded with blanks.
    states = 2 * max(lengths, default=0) + 1
    ext = np.full((batch, states), blank, dtype=np.int64)
    for n, row in enumerate(labels):
        ext[n, 1 : 2 * len(row) : 2] = row
    s = np.arange(states)
    skip = np.full((batch, states), IMPOSSIBLE, dtype=np.float64)
    allowed = (s >= 2) & (ext != blank) & (ext != np.roll(ext, 2, axis=1))
    skip[allowed] = 0.0
    start = np.full((batch, states), IMPOSSIBLE, dtype=np.float64)
    start[:, 0] = 0.0
    if states > 1:
        start[np.array(lengths) > 0, 1] = 0.0
    index = tensor(ext, dtype=DTYPE_OBJECTS["int64"], device=device)
    emit = lp.gather(2, index.unsqueeze(0).expand(frames, batch, states))
    step_mask = const(np.where(s == 0, IMPOSSIBLE, 0.0))  # no state before the first
    skip_mask = const(skip)
    back_one = tensor(np.maximum(s - 1, 0), device=device)
    back_two = tensor(np.maximum(s - 2, 0), device=device)

    alpha = emit[0] + const(start)
    for t in range(1, max(inputs)):
        moved = _log_add(alpha, alpha[:, back_one] + step_mask, alpha[:, back_two] + skip_mask)
        moved = moved + emit[t]
        running = np.array([t < n for n in inputs])
        if running.all():
            alpha = moved
        else:
            keep = const(running.astype(np.float64)[:, None])
            alpha = moved * keep + alpha * (1.0 - keep)

    last = np.array([2 * n for n in lengths])
    final = alpha.gather(1, tensor(last[:, None], device=device))
    before = alpha.gather(1, tensor(np.maximum(last - 1, 0)[:, None], device=device))
    before = before + const(np.where(last > 0, 0.0, IMPOSSIBLE)[:, None])
    likelihood = _log_add(final, before).reshape(batch)
    # A sample with no frames: the empty target has likelihood 1, any other none.
    has_input = const(np.array([float(n > 0) for n in inputs]))
    empty = const(np.array([IMPOSSIBLE if n == 0 and m > 0 else 0.0
                            for n, m in zip(inputs, lengths, strict=True)]))  # fmt: skip
    return -(likelihood * has_input + empty) + 0.0  # + 0.0: a zero loss is +0.0, not -0.0
