"""``torch.<name>`` forms of the rounding, division, scan, sorting and indexing methods
(``torch.floor``, ``torch.remainder``, ``torch.cumsum``, ``torch.sort``, ``torch.gather``...).

Each takes PyTorch's arguments (``out=`` where torch has it) and calls the tensor
method of the same name, so what runs on the device is as the method says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.functions import _elementwise, _tensor, into_out, with_out
from kernbench.torch.tensor import Tensor

__all__ = [
    "gather",
    "index_select",
    "take",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "index_add",
    "index_copy",
    "index_put",
    "index_put_",
    "argsort",
    "sort",
    "topk",
    "median",
    "nanmedian",
    "kthvalue",
    "histc",
    "mode",
    "quantile",
    "nanquantile",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "logcumsumexp",
    "prod",
    "ceil",
    "exp2",
    "expm1",
    "fix",
    "floor",
    "floor_divide",
    "fmod",
    "frac",
    "log10",
    "log1p",
    "log2",
    "remainder",
    "round",
    "sign",
    "trunc",
]


floor = with_out(_elementwise("floor"))
ceil = with_out(_elementwise("ceil"))
trunc = with_out(_elementwise("trunc"))
fix = with_out(_elementwise("fix"))
frac = with_out(_elementwise("frac"))
sign = with_out(_elementwise("sign"))
exp2 = with_out(_elementwise("exp2"))
log2 = with_out(_elementwise("log2"))
log10 = with_out(_elementwise("log10"))
log1p = with_out(_elementwise("log1p"))
expm1 = with_out(_elementwise("expm1"))


@with_out
def round(input: Tensor, *, decimals: int = 0) -> Tensor:  # noqa: A001,A002 - torch's names
    """``torch.round``: half to even, ``decimals`` places."""
    return _tensor(input, "round").round(decimals)


def _division(name: str) -> Callable[..., Tensor]:
    def fn(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
        if isinstance(input, Tensor):
            return getattr(input, name)(other)
        if isinstance(other, Tensor) and name == "remainder":  # torch.remainder(2, t)
            return other.__rmod__(input)
        raise TensorError(
            f"torch.{name}: expected a Tensor as input, got {type(input).__name__} and "
            f"{type(other).__name__}"
        )

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input`` and ``other``."
    return fn


floor_divide = with_out(_division("floor_divide"))
remainder = with_out(_division("remainder"))
fmod = with_out(_division("fmod"))


def prod(
    input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None, out: Any = None
) -> Tensor:  # noqa: A002
    """``torch.prod(input, *, dtype)`` or ``torch.prod(input, dim, keepdim=False, *, dtype)``."""
    result = _tensor(input, "prod").prod(dim, keepdim, dtype=dtype)
    return result if out is None else into_out("torch.prod", out, result)


@with_out
def cumsum(input: Tensor, dim: Any, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``torch.cumsum``: running sums along ``dim``."""
    return _tensor(input, "cumsum").cumsum(dim, dtype=dtype)


@with_out
def cumprod(input: Tensor, dim: Any, *, dtype: Any = None) -> Tensor:  # noqa: A002
    """``torch.cumprod``: running products along ``dim``."""
    return _tensor(input, "cumprod").cumprod(dim, dtype=dtype)


@with_out
def logcumsumexp(input: Tensor, dim: Any) -> Tensor:  # noqa: A002
    """``torch.logcumsumexp``: ``log(cumsum(exp(input)))`` along ``dim``, without overflow."""
    return _tensor(input, "logcumsumexp").logcumsumexp(dim)


def cummax(input: Tensor, dim: Any = None, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.cummax``: the running maximum along ``dim`` and its indices."""
    result = _tensor(input, "cummax").cummax(dim)
    return result if out is None else _into_pair("torch.cummax", out, result)


def cummin(input: Tensor, dim: Any = None, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.cummin``: the running minimum along ``dim`` and its indices."""
    result = _tensor(input, "cummin").cummin(dim)
    return result if out is None else _into_pair("torch.cummin", out, result)


def sort(
    input: Tensor,  # noqa: A002
    dim: Any = -1,
    descending: bool = False,
    stable: bool = False,
    *,
    out: Any = None,
) -> Any:
    """``torch.sort``: (values, indices) along ``dim``; ``out=`` a (values, indices) pair."""
    result = _tensor(input, "sort").sort(dim, descending, stable)
    return result if out is None else _into_pair("torch.sort", out, result)


@with_out
def argsort(input: Tensor, dim: Any = -1, descending: bool = False, stable: bool = False) -> Tensor:  # noqa: A002
    """``torch.argsort``: the indices that sort ``input`` along ``dim``."""
    return _tensor(input, "argsort").argsort(dim, descending, stable)


def topk(
    input: Tensor,  # noqa: A002
    k: Any,
    dim: Any = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002 - torch's name
    *,
    out: Any = None,
) -> Any:
    """``torch.topk``: the ``k`` largest (smallest) along ``dim`` and their indices."""
    result = _tensor(input, "topk").topk(k, dim, largest, sorted)
    return result if out is None else _into_pair("torch.topk", out, result)


def median(input: Tensor, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.median``: the lower median of all elements, or ``(values, indices)`` along
    ``dim`` (``out=`` then a pair)."""
    return _selected("median", input, dim, keepdim, out)


def nanmedian(input: Tensor, dim: Any = None, keepdim: bool = False, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.nanmedian``: :func:`median` of the elements that are not NaN."""
    return _selected("nanmedian", input, dim, keepdim, out)


def kthvalue(
    input: Tensor,  # noqa: A002
    k: Any,
    dim: Any = -1,
    keepdim: bool = False,
    *,
    out: Any = None,
) -> Any:
    """``torch.kthvalue``: the ``k``-th smallest along ``dim`` and its index."""
    result = _tensor(input, "kthvalue").kthvalue(k, dim, keepdim)
    return result if out is None else _into_pair("torch.kthvalue", out, result)


@with_out
def histc(input: Tensor, bins: Any = 100, min: Any = 0, max: Any = 0) -> Tensor:  # noqa: A002
    """``torch.histc``: counts in ``bins`` equal bins of ``[min, max]`` (the data's range
    when ``min == max``)."""
    return _tensor(input, "histc").histc(bins, min, max)


def mode(input: Tensor, dim: Any = -1, keepdim: bool = False, *, out: Any = None) -> Any:  # noqa: A002
    """``torch.mode``: the most frequent value along ``dim`` and an index of it."""
    result = _tensor(input, "mode").mode(dim, keepdim)
    return result if out is None else _into_pair("torch.mode", out, result)


def _selected(what: str, input: Any, dim: Any, keepdim: Any, out: Any) -> Any:  # noqa: A002
    result = getattr(_tensor(input, what), what)(dim, keepdim)
    if out is None:
        return result
    if dim is None:
        return into_out(f"torch.{what}", out, result)
    return _into_pair(f"torch.{what}", out, result)


def _quantile(name: str) -> Callable[..., Tensor]:
    def fn(
        input: Tensor,  # noqa: A002
        q: Any,
        dim: Any = None,
        keepdim: bool = False,
        *,
        interpolation: str = "linear",
    ) -> Tensor:
        return getattr(_tensor(input, name), name)(q, dim, keepdim, interpolation=interpolation)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``torch.{name}``: :meth:`Tensor.{name}` of ``input``."
    return fn


quantile = with_out(_quantile("quantile"))
nanquantile = with_out(_quantile("nanquantile"))


def _into_pair(what: str, out: Any, result: Any) -> Any:
    if not isinstance(out, tuple | list) or len(out) != 2:
        for part in result:
            part.free()
        raise TensorError(f"{what}: out must be a (values, indices) pair of tensors, got {out!r}")
    return type(result)(into_out(what, out[0], result[0]), into_out(what, out[1], result[1]))


@with_out
def gather(input: Tensor, dim: Any, index: Any, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """``torch.gather``: :meth:`Tensor.gather`."""
    return _tensor(input, "gather").gather(dim, index)


@with_out
def index_select(input: Tensor, dim: Any, index: Any) -> Tensor:  # noqa: A002
    """``torch.index_select``: :meth:`Tensor.index_select`."""
    return _tensor(input, "index_select").index_select(dim, index)


@with_out
def take(input: Tensor, index: Any) -> Tensor:  # noqa: A002
    """``torch.take``: :meth:`Tensor.take`."""
    return _tensor(input, "take").take(index)


def scatter(
    input: Tensor,  # noqa: A002
    dim: Any,
    index: Any,
    src: Any = None,
    *,
    value: Any = None,
    reduce: Any = None,
    out: Any = None,
) -> Tensor:
    """``torch.scatter``: :meth:`Tensor.scatter` (a copy of ``input`` written at ``index``)."""
    result = _tensor(input, "scatter").scatter(dim, index, src, value=value, reduce=reduce)
    return result if out is None else into_out("torch.scatter", out, result)


@with_out
def scatter_add(input: Tensor, dim: Any, index: Any, src: Any) -> Tensor:  # noqa: A002
    """``torch.scatter_add``: :meth:`Tensor.scatter_add`."""
    return _tensor(input, "scatter_add").scatter_add(dim, index, src)


@with_out
def scatter_reduce(
    input: Tensor,  # noqa: A002
    dim: Any,
    index: Any,
    src: Any,
    reduce: Any,
    *,
    include_self: Any = True,
) -> Tensor:
    """``torch.scatter_reduce``: :meth:`Tensor.scatter_reduce`."""
    return _tensor(input, "scatter_reduce").scatter_reduce(
        dim, index, src, reduce, include_self=include_self
    )


@with_out
def index_add(input: Tensor, dim: Any, index: Any, source: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002
    """``torch.index_add``: :meth:`Tensor.index_add`."""
    return _tensor(input, "index_add").index_add(dim, index, source, alpha=alpha)


@with_out
def index_copy(input: Tensor, dim: Any, index: Any, source: Any) -> Tensor:  # noqa: A002
    """``torch.index_copy``: :meth:`Tensor.index_copy`."""
    return _tensor(input, "index_copy").index_copy(dim, index, source)


@with_out
def index_put(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """``torch.index_put``: :meth:`Tensor.index_put`."""
    return _tensor(input, "index_put").index_put(indices, values, accumulate)


def index_put_(input: Tensor, indices: Any, values: Any, accumulate: bool = False) -> Tensor:  # noqa: A002
    """``torch.index_put_``: :meth:`Tensor.index_put_` (``input`` written in place)."""
    return _tensor(input, "index_put_").index_put_(indices, values, accumulate)
