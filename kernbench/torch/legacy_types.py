"""``torch.FloatTensor``, ``torch.LongTensor``, ...: torch's legacy tensor types.

Older programs still build tensors with them (pytorch/examples' word_language_model:
``torch.LongTensor(seq_len * batch_size).zero_()``) and test tensors against them
(``isinstance(x, torch.FloatTensor)``).  Called with sizes, one makes an
uninitialised tensor of its dtype on the current device (``torch.empty``); with a
sequence or an array, that data (``torch.tensor``); with nothing, an empty tensor.
``isinstance`` holds for a tensor of its dtype, and ``t.type(torch.LongTensor)``
converts.  ``torch.Tensor(...)`` called the same way is the constructor with the default
dtype (pytorch/examples' gcn: ``nn.Parameter(torch.Tensor(in_dim, out_dim))``), and
``t.new(...)`` with ``t``'s dtype.  ``torch.cuda.FloatTensor`` and its kin are the same
constructors under torch.cuda's names (there is no host tensor).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import TensorError
from kernbench.torch.devices import ahbm
from kernbench.torch.dtypes import DTYPE_OBJECTS, TorchDType, get_default_dtype
from kernbench.torch.factories import empty
from kernbench.torch.factories import tensor as make_tensor
from kernbench.torch.shapes import Size
from kernbench.torch.tensor import Tensor, TensorType

__all__ = [
    "BFloat16Tensor",
    "BoolTensor",
    "ByteTensor",
    "CharTensor",
    "DoubleTensor",
    "FloatTensor",
    "HalfTensor",
    "IntTensor",
    "LongTensor",
    "ShortTensor",
]


class LegacyTensorType(type):
    """The type of ``torch.FloatTensor`` and its kin: a constructor bound to one dtype."""

    legacy_dtype: TorchDType

    def __instancecheck__(cls, obj: Any) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.legacy_dtype

    def __call__(cls, *args: Any, device: Any = None) -> Tensor:
        return _construct(cls.__name__, cls.legacy_dtype, args, device)

    def __repr__(cls) -> str:
        return f"<class 'torch.{cls.__name__}'>"


def _construct(name: str, dtype: TorchDType, args: tuple, device: Any) -> Tensor:
    """``torch.<name>(*args, device=device)``: an empty, data or uninitialised tensor."""
    if not args:
        return empty(0, dtype=dtype, device=device)
    if len(args) == 1 and isinstance(args[0], Tensor):
        if args[0].dtype is not dtype:
            also = "" if name == "Tensor" else f" or t.type(torch.{name})"
            raise TensorError(
                f"torch.{name}(tensor): expected a {dtype} tensor, got {args[0].dtype}; "
                f"convert it with t.to({dtype}){also}"
            )
        return args[0]
    if (
        len(args) == 1
        and isinstance(args[0], list | tuple | np.ndarray)
        and (not isinstance(args[0], Size))
    ):
        return make_tensor(args[0], dtype=dtype, device=device)
    sizes = args[0] if len(args) == 1 and isinstance(args[0], Size) else args
    if not all(isinstance(n, int | np.integer) and not isinstance(n, bool) for n in sizes):
        raise TensorError(
            f"torch.{name}{args!r}: give sizes (ints or a torch.Size), or a "
            "list, tuple or array of values"
        )
    return empty(*(int(n) for n in sizes), dtype=dtype, device=device)


def _default_tensor(*args: Any, device: Any = None) -> Tensor:
    """``torch.Tensor(...)``: the legacy constructor with the default dtype."""
    return _construct("Tensor", get_default_dtype(), args, device)


def _new_like(like: Tensor, args: tuple) -> Tensor:
    """``like.new(*args)``: the legacy constructor with ``like``'s dtype and device."""
    return _construct("Tensor.new", like.dtype, args, like.device)


TensorType.legacy_constructor = _default_tensor
TensorType.legacy_new = _new_like


def _legacy(name: str, dtype: str) -> LegacyTensorType:
    made = LegacyTensorType(name, (), {"__doc__": f"torch.{name}: {dtype} tensors."})
    made.legacy_dtype = DTYPE_OBJECTS[dtype]
    made.__module__ = "kernbench.torch"
    return made


FloatTensor = _legacy("FloatTensor", "float32")
DoubleTensor = _legacy("DoubleTensor", "float64")
HalfTensor = _legacy("HalfTensor", "float16")
BFloat16Tensor = _legacy("BFloat16Tensor", "bfloat16")
LongTensor = _legacy("LongTensor", "int64")
IntTensor = _legacy("IntTensor", "int32")
ShortTensor = _legacy("ShortTensor", "int16")
CharTensor = _legacy("CharTensor", "int8")
ByteTensor = _legacy("ByteTensor", "uint8")
BoolTensor = _legacy("BoolTensor", "bool")

# torch.cuda.FloatTensor and its kin: every tensor is on the device here, so they are the
# same constructors under torch.cuda's names (`Tensor = torch.cuda.FloatTensor if cuda
# else torch.FloatTensor`, as GAN scripts write).
for _name, _dtype in (
    ("FloatTensor", "float32"), ("DoubleTensor", "float64"), ("HalfTensor", "float16"),
    ("BFloat16Tensor", "bfloat16"), ("LongTensor", "int64"), ("IntTensor", "int32"),
    ("ShortTensor", "int16"), ("CharTensor", "int8"), ("ByteTensor", "uint8"),
    ("BoolTensor", "bool"),
):  # fmt: skip
    ahbm.provide(_name, _legacy(f"cuda.{_name}", _dtype))
