"""``torch.einsum``: Einstein sums as permutes, sums and batched matmuls on the device.

The operands are contracted left to right, two at a time, as
``torch.einsum`` does without opt_einsum: an index only one operand has and
nothing later needs is summed away first (``sum``), the indices both have and
the result keeps become the batch, the ones both have and nothing keeps are
contracted, and the pair becomes one batched ``matmul`` of the operands
permuted and reshaped to ``(batch, rows, k)`` and ``(batch, k, cols)``
(a copy kernel where a permute is not contiguous).  Then the result is
summed and permuted to the output's order.  Both the implicit form
(``"ij,jk"``: the indices that appear once, in alphabetical order) and the
explicit one (``"ij,jk->ik"``) are taken, with ``...`` for leading dims;
an index repeated within one operand (a diagonal, ``"ii->i"``) is not.
"""

from __future__ import annotations

import math
import string
from collections import Counter
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.tensor import Tensor

__all__ = ["einsum"]

_LETTERS = set(string.ascii_letters)


def _fail(message: str) -> TensorError:
    return TensorError(f"einsum(): {message}")


def _parse(equation: str, operands: list[Tensor]) -> tuple[list[str], str]:
    """Each operand's indices and the output's, one letter a dim, ``...`` spelled out."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise _fail(
            "more operands were provided than specified in the equation"
            if len(operands) > len(terms)
            else f"fewer operands were provided than specified in the equation ({len(terms)} "
            f"terms, {len(operands)} operands)"
        )
    used = set(equation)
    spare = iter(sorted(_LETTERS - used))
    ellipsis_dims = 0
    for term, t in zip(terms, operands, strict=True):
        if "..." in term:
            ellipsis_dims = max(ellipsis_dims, t.ndim - (len(term) - 3))
    filler = "".join(next(spare) for _ in range(ellipsis_dims))
    indices = []
    for position, (term, t) in enumerate(zip(terms, operands, strict=True)):
        if "..." in term:
            spanned = t.ndim - (len(term) - 3)  # the dims "..." stands for, right-aligned
            if spanned < 0:
                raise _fail(
                    f"operand {position} has {t.ndim} dimensions and its subscripts {term!r} "
                    "name more"
                )
            term = term.replace("...", filler[len(filler) - spanned :])
        bad = set(term) - _LETTERS
        if bad:
            raise _fail(f"invalid subscript {sorted(bad)[0]!r} in operand {position}")
        if len(term) != t.ndim:
            raise _fail(
                f"the number of subscripts in the equation ({len(term)}) does not match the "
                f"number of dimensions ({t.ndim}) for operand {position}"
            )
        repeated = [i for i, n in Counter(term).items() if n > 1]
        if repeated:
            raise _fail(
                f"subscript {repeated[0]!r} is repeated in operand {position} (a diagonal); "
                "there is no kernel for it here: index or mask the operand first"
            )
        indices.append(term)
    if arrow:
        out = rhs.replace("...", filler)
        for i in out:
            if i not in _LETTERS:
                raise _fail(f"invalid subscript {i!r} in the output")
            if not any(i in term for term in indices):
                raise _fail(
                    f"output subscript {i} does not appear in the equation for any input operand"
                )
        if len(set(out)) != len(out):
            raise _fail(f"output subscript {out[0]!r} appears more than once in the output")
    else:
        counts = Counter("".join(indices))
        out = filler + "".join(sorted(i for i, n in counts.items() if n == 1 and i not in filler))
    return indices, out


def _sizes(indices: list[str], operands: list[Tensor]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for position, (term, t) in enumerate(zip(indices, operands, strict=True)):
        for i, n in zip(term, t.shape, strict=True):
            if sizes.setdefault(i, n) != n:
                raise _fail(
                    f"operands do not broadcast with remapped shapes: subscript {i!r} has size "
                    f"{sizes[i]} and, in operand {position}, {n} (give them one size)"
                )
    return sizes


def _sum_away(t: Tensor, term: str, keep: set[str]) -> tuple[Tensor, str]:
    gone = tuple(d for d, i in enumerate(term) if i not in keep)
    if not gone:
        return t, term
    return t.sum(dim=gone), "".join(i for i in term if i in keep)


def _arranged(t: Tensor, term: str, order: str, shape: tuple[int, ...]) -> Tensor:
    permuted = t.permute(*[term.index(i) for i in order]) if term != order else t
    return permuted.reshape(*shape)


def _pair(a: Tensor, ta: str, b: Tensor, tb: str, keep: set[str], sizes: dict[str, int]):
    a, ta = _sum_away(a, ta, keep | set(tb))
    b, tb = _sum_away(b, tb, keep | set(ta))
    batch = "".join(i for i in ta if i in tb and i in keep)
    contracted = "".join(i for i in ta if i in tb and i not in keep)
    rows = "".join(i for i in ta if i not in tb)
    cols = "".join(i for i in tb if i not in ta)

    def size(part: str) -> int:
        return math.prod(sizes[i] for i in part)

    left = _arranged(a, ta, batch + rows + contracted, (size(batch), size(rows), size(contracted)))
    right = _arranged(b, tb, batch + contracted + cols, (size(batch), size(contracted), size(cols)))
    product = left.matmul(right)
    term = batch + rows + cols
    return product.reshape(*[sizes[i] for i in term]), term


def einsum(equation: str, *operands: Any) -> Tensor:
    """``torch.einsum(equation, *operands)`` (or with the operands in one list)."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise _fail(f"equation must be a str, got {type(equation).__name__}")
    if not operands:
        raise _fail("must provide at least one operand")
    for position, t in enumerate(operands):
        if not isinstance(t, Tensor):
            raise _fail(f"operand {position} must be a Tensor, got {type(t).__name__}")
    tensors = list(operands)
    indices, out = _parse(equation, tensors)
    sizes = _sizes(indices, tensors)
    result, term = tensors[0], indices[0]
    for position in range(1, len(tensors)):
        later = set(out).union(*indices[position + 1 :])
        result, term = _pair(result, term, tensors[position], indices[position], later, sizes)
    result, term = _sum_away(result, term, set(out))
    if term != out:
        result = result.permute(*[term.index(i) for i in out])
    return result
