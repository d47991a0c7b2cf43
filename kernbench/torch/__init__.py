"""A PyTorch-shaped front end: run a PyTorch script with ``import kernbench.torch as torch``.

Tensors live on the simulated machine of the current
:class:`~kernbench.runtime.RuntimeContext`; their arithmetic runs device
kernels and costs simulated time.  See :mod:`kernbench.torch.tensor` for what
differs from PyTorch (no autograd, how views map to memory)
and :mod:`kernbench.torch.devices` for devices and events.
``torch.cuda`` is the same object as ``torch.ahbm``.
"""

from __future__ import annotations

import sys
from contextlib import ContextDecorator
from typing import Any

from kernbench.errors import unsupported_name
from kernbench.torch import (
    cuda_memory,  # noqa: F401 - registers torch.cuda's memory counters
    random,
    testing,
)
from kernbench.torch.amp import get_autocast_dtype, is_autocast_enabled
from kernbench.torch.composite_functions import (
    addmm,
    amax,
    amin,
    baddbmm,
    clamp_max,
    clamp_min,
    ger,
    logsumexp,
    moveaxis,
    movedim,
    mv,
    neg,
    negative,
    outer,
    reciprocal,
    repeat_interleave,
    square,
    std_mean,
    tile,
    unbind,
    unflatten,
    var_mean,
)
from kernbench.torch.devices import Event, accelerator, ahbm, device
from kernbench.torch.dtypes import (
    DTYPE_OBJECTS,
    UNSUPPORTED,
    get_default_dtype,
    set_default_dtype,
)
from kernbench.torch.dtypes import TorchDType as dtype
from kernbench.torch.einsum import einsum
from kernbench.torch.element_writes import (
    argwhere,
    index_fill,
    masked_scatter,
    put,
)
from kernbench.torch.factories import (
    arange,
    as_tensor,
    cat,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    stack,
    tensor,
    zeros,
    zeros_like,
)
from kernbench.torch.factories_more import (
    bincount,
    cartesian_prod,
    concat,
    concatenate,
    count_nonzero,
    diag,
    diagonal,
    diff,
    dstack,
    eye,
    flip,
    fliplr,
    flipud,
    hstack,
    linspace,
    logspace,
    meshgrid,
    multinomial,
    nan_to_num,
    roll,
    tril_indices,
    triu_indices,
    unique,
    vstack,
)
from kernbench.torch.functions import (
    abs,
    add,
    addcdiv,
    addcmul,
    all,
    allclose,
    any,
    argmax,
    argmin,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    bmm,
    chunk,
    clamp,
    clip,
    clone,
    cos,
    div,
    dot,
    eq,
    equal,
    erf,
    exp,
    flatten,
    ge,
    greater,
    greater_equal,
    gt,
    isclose,
    isfinite,
    isinf,
    isnan,
    le,
    lerp,
    less,
    less_equal,
    log,
    log_softmax,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    lt,
    masked_fill,
    masked_select,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    mm,
    mul,
    ne,
    nonzero,
    norm,
    not_equal,
    permute,
    pow,
    relu,
    reshape,
    rsqrt,
    sigmoid,
    sin,
    softmax,
    split,
    sqrt,
    squeeze,
    std,
    sub,
    sum,
    tanh,
    transpose,
    tril,
    triu,
    unsqueeze,
    var,
    where,
)
from kernbench.torch.kernel_functions import (
    argsort,
    ceil,
    cummax,
    cummin,
    cumprod,
    cumsum,
    exp2,
    expm1,
    fix,
    floor,
    floor_divide,
    fmod,
    frac,
    gather,
    histc,
    index_add,
    index_copy,
    index_put,
    index_put_,
    index_select,
    kthvalue,
    log1p,
    log2,
    log10,
    logcumsumexp,
    median,
    mode,
    nanmedian,
    nanquantile,
    prod,
    quantile,
    remainder,
    round,
    scatter,
    scatter_add,
    scatter_reduce,
    sign,
    sort,
    take,
    topk,
    trunc,
)
from kernbench.torch.membership import isin
from kernbench.torch.memory_formats import (
    channels_last,
    channels_last_3d,
    contiguous_format,
    memory_format,
    preserve_format,
)
from kernbench.torch.missing import MODULE_HINTS, install_import_hints
from kernbench.torch.nn.activations import celu, selu
from kernbench.torch.nn.losses_more import cosine_similarity, pairwise_distance
from kernbench.torch.preamble import (
    autocast,
    backends,
    get_float32_matmul_precision,
    get_rng_state,
    set_float32_matmul_precision,
    set_rng_state,
)
from kernbench.torch.product_functions import (
    block_diag,
    cdist,
    column_stack,
    cross,
    kron,
    take_along_dim,
    tensordot,
    trace,
)
from kernbench.torch.random import Generator, initial_seed, manual_seed, seed
from kernbench.torch.random_functions import bernoulli, normal, poisson
from kernbench.torch.runs import unique_consecutive
from kernbench.torch.sampling import (
    rand,
    rand_like,
    randint,
    randint_like,
    randn,
    randn_like,
    randperm,
)
from kernbench.torch.searching import bucketize, searchsorted
from kernbench.torch.serialization import load, save
from kernbench.torch.shape_views import (
    atleast_1d,
    atleast_2d,
    atleast_3d,
    broadcast_tensors,
    broadcast_to,
    narrow,
    swapaxes,
    swapdims,
    tensor_split,
)
from kernbench.torch.shapes import Size, tensor_argument
from kernbench.torch.special_functions import (
    bitwise_left_shift,
    bitwise_right_shift,
    copysign,
    deg2rad,
    digamma,
    erfinv,
    float_power,
    fmax,
    fmin,
    frexp,
    heaviside,
    hypot,
    i0,
    ldexp,
    lgamma,
    logaddexp,
    logaddexp2,
    logit,
    nextafter,
    positive,
    rad2deg,
    sgn,
    signbit,
    sinc,
    true_divide,
    xlogy,
)
from kernbench.torch.tensor import Tensor
from kernbench.torch.type_info import finfo, iinfo

cuda = ahbm

float16 = DTYPE_OBJECTS["float16"]
bfloat16 = DTYPE_OBJECTS["bfloat16"]
float32 = DTYPE_OBJECTS["float32"]
float64 = double = DTYPE_OBJECTS["float64"]
int8 = DTYPE_OBJECTS["int8"]
int16 = DTYPE_OBJECTS["int16"]
int32 = DTYPE_OBJECTS["int32"]
int64 = long = DTYPE_OBJECTS["int64"]
uint8 = DTYPE_OBJECTS["uint8"]
uint16 = DTYPE_OBJECTS["uint16"]
uint32 = DTYPE_OBJECTS["uint32"]
uint64 = DTYPE_OBJECTS["uint64"]
bool = DTYPE_OBJECTS["bool"]  # noqa: A001 - torch's name
half = float16
float = float32  # noqa: A001 - torch's name
int = int32  # noqa: A001 - torch's name
# Exist so comparisons work; creating a tensor with them raises a TensorError naming valid dtypes.
complex64 = UNSUPPORTED["complex64"]
complex128 = cdouble = UNSUPPORTED["complex128"]

__all__ = [
    "memory_format",
    "contiguous_format",
    "preserve_format",
    "channels_last",
    "channels_last_3d",
    "randint_like",
    "celu",
    "celu_",
    "selu",
    "selu_",
    "cosine_similarity",
    "pairwise_distance",
    "autocast",
    "backends",
    "get_float32_matmul_precision",
    "get_rng_state",
    "set_float32_matmul_precision",
    "set_rng_state",
    "bincount",
    "cartesian_prod",
    "concat",
    "concatenate",
    "count_nonzero",
    "diag",
    "diagonal",
    "diff",
    "dstack",
    "eye",
    "flip",
    "fliplr",
    "flipud",
    "hstack",
    "linspace",
    "logspace",
    "meshgrid",
    "multinomial",
    "nan_to_num",
    "roll",
    "tril_indices",
    "triu_indices",
    "unique",
    "vstack",
    "randperm",
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
    "bucketize",
    "searchsorted",
    "median",
    "nanmedian",
    "kthvalue",
    "histc",
    "mode",
    "quantile",
    "nanquantile",
    "cummax",
    "logcumsumexp",
    "cummin",
    "cumprod",
    "cumsum",
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
    "clamp_max",
    "clamp_min",
    "ger",
    "logsumexp",
    "outer",
    "reciprocal",
    "repeat_interleave",
    "std_mean",
    "tile",
    "unbind",
    "var_mean",
    "einsum",
    "addmm",
    "amax",
    "amin",
    "baddbmm",
    "moveaxis",
    "movedim",
    "mv",
    "neg",
    "negative",
    "square",
    "unflatten",
    "Event",
    "Generator",
    "Size",
    "Tensor",
    "abs",
    "accelerator",
    "add",
    "addcdiv",
    "addcmul",
    "ahbm",
    "allclose",
    "arange",
    "argmax",
    "argmin",
    "bmm",
    "as_tensor",
    "bfloat16",
    "bool",
    "cat",
    "chunk",
    "clamp",
    "clip",
    "clone",
    "cos",
    "cuda",
    "device",
    "div",
    "dot",
    "dtype",
    "empty",
    "empty_like",
    "equal",
    "erf",
    "exp",
    "flatten",
    "finfo",
    "float",
    "float16",
    "float32",
    "float64",
    "double",
    "from_numpy",
    "full",
    "full_like",
    "get_default_dtype",
    "half",
    "iinfo",
    "inference_mode",
    "enable_grad",
    "set_grad_enabled",
    "is_grad_enabled",
    "initial_seed",
    "int",
    "int16",
    "int32",
    "int64",
    "long",
    "int8",
    "is_tensor",
    "lerp",
    "log",
    "log_softmax",
    "manual_seed",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mm",
    "mul",
    "no_grad",
    "norm",
    "numel",
    "ones",
    "ones_like",
    "permute",
    "pow",
    "rand",
    "rand_like",
    "randint",
    "randn",
    "randn_like",
    "relu",
    "reshape",
    "rsqrt",
    "seed",
    "set_default_dtype",
    "sigmoid",
    "sin",
    "softmax",
    "split",
    "sqrt",
    "squeeze",
    "stack",
    "std",
    "sub",
    "sum",
    "tanh",
    "tensor",
    "testing",
    "save",
    "load",
    "is_autocast_enabled",
    "get_autocast_dtype",
    "transpose",
    "tril",
    "triu",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
    "unsqueeze",
    "var",
    "zeros",
    "zeros_like",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "greater",
    "less",
    "greater_equal",
    "less_equal",
    "not_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "logical_not",
    "isclose",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_not",
    "isnan",
    "isinf",
    "isfinite",
    "any",
    "all",
    "masked_fill",
    "masked_select",
    "nonzero",
    "where",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "copysign",
    "deg2rad",
    "digamma",
    "erfinv",
    "float_power",
    "fmax",
    "fmin",
    "frexp",
    "heaviside",
    "hypot",
    "i0",
    "ldexp",
    "lgamma",
    "logaddexp",
    "logaddexp2",
    "logit",
    "nextafter",
    "positive",
    "rad2deg",
    "sgn",
    "signbit",
    "sinc",
    "true_divide",
    "xlogy",
    "bernoulli",
    "normal",
    "poisson",
    "argwhere",
    "index_fill",
    "masked_scatter",
    "put",
    "take_along_dim",
    "isin",
    "block_diag",
    "cdist",
    "column_stack",
    "cross",
    "kron",
    "tensordot",
    "trace",
    "unique_consecutive",
    "atleast_1d",
    "atleast_2d",
    "atleast_3d",
    "broadcast_tensors",
    "broadcast_to",
    "narrow",
    "swapaxes",
    "swapdims",
    "tensor_split",
]


class no_grad(ContextDecorator):  # noqa: N801 - torch's name
    """No-op context manager and decorator: there is no autograd to switch off."""

    def __enter__(self) -> no_grad:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


inference_mode = enable_grad = no_grad


class set_grad_enabled(no_grad):  # noqa: N801 - torch's name
    """No-op, as a call, a context manager or a decorator: there is no autograd."""

    def __init__(self, mode: bool) -> None:
        self.mode = mode


def is_grad_enabled() -> bool:
    """False: there is no autograd (gradients are written by hand)."""
    return False


def is_tensor(obj: Any) -> bool:
    return isinstance(obj, Tensor)


def numel(input: Tensor) -> int:  # noqa: A002 - torch's name
    return tensor_argument(input, "torch.numel").numel()


def selu_(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """``torch.selu_``: :func:`torch.nn.functional.selu` in place."""
    return selu(input, inplace=True)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002 - torch's name
    """``torch.celu_``: :func:`torch.nn.functional.celu` in place."""
    return celu(input, alpha, inplace=True)


def __getattr__(name: str) -> Any:
    if name == "default_generator":  # per rank, so looked up on each access
        return random.current_generator()
    raise unsupported_name("kernbench.torch", "torch", name, globals(), MODULE_HINTS)


install_import_hints()

# The subpackages users import as torch.distributed, torch.multiprocessing, torch.nn,
# torch.optim, torch.linalg and torch.utils.
from kernbench.torch import (  # noqa: E402,F401
    amp,  # noqa: E402,F401
    distributed,
    linalg,
    multiprocessing,
    nn,
    optim,
    utils,
)

ahbm.provide("amp", amp.CudaAmp())
# Last of all: autocast's casts come before anything else that wraps these ops.
amp.install_autocast(Tensor, sys.modules[__name__], nn.functional)
