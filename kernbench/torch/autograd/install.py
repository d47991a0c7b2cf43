"""Putting autograd over the facade's entry points, once, when ``kernbench.torch`` loads.

Every public tensor method (and the arithmetic operators, ``[]``, ``T``, ``mT``), every
function of ``torch``, ``torch.nn.functional`` and ``torch.linalg`` is replaced by a
wrapper that calls it unchanged unless one of its tensor arguments requires grad and
recording is on.  Then the wrapper

* runs the op's rule (:data:`~kernbench.torch.autograd.formulas.RULES`,
  :data:`~kernbench.torch.autograd.nn_formulas.NN_RULES`): the forward with recording
  off, and one node with its backward formula;
* records an in-place op (a method ending in ``_``, ``+=``, ``[...] =``, ``inplace=True``)
  as its out-of-place form written back (:mod:`~kernbench.torch.autograd.in_place`),
  with torch's error for a leaf; every in-place call bumps its tensor's version;
* for any other op, runs it with recording off and gives its floating results an
  :class:`~kernbench.torch.autograd.graph.UnsupportedBackward` node, so a backward that
  reaches it raises naming the op instead of dropping that path's gradient.

``torch.<name>`` functions that only call the tensor method of the same name pass
through (the method records).  Code that changes parameters in place as torch does
under ``no_grad`` (``nn.init``, ``clip_grad_*``, ``load_state_dict``) runs with
recording off.  New ops added to the facade are covered by the same sweep: they get the
"not supported yet" node until a rule is written for them.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kernbench.torch import functions, linalg
from kernbench.torch.autograd.attention_formulas import (
    ATTENTION_FUNCTION_RULES,
    ATTENTION_NN_RULES,
    ATTENTION_RULES,
)
from kernbench.torch.autograd.conv_formulas import CONV_NN_RULES
from kernbench.torch.autograd.formulas import FUNCTION_RULES, RULES, Unsupported, untracked
from kernbench.torch.autograd.grad_mode import is_grad_enabled, no_grad
from kernbench.torch.autograd.graph import UnsupportedBackward
from kernbench.torch.autograd.in_place import record_in_place, record_in_place_function
from kernbench.torch.autograd.index_formulas import (
    INDEX_FUNCTION_RULES,
    INDEX_NN_RULES,
    INDEX_RULES,
)
from kernbench.torch.autograd.math_more_formulas import (
    MATH_MORE_FUNCTION_RULES,
    MATH_MORE_LINALG_RULES,
    MATH_MORE_RULES,
)
from kernbench.torch.autograd.more_pointwise_formulas import (
    MORE_POINTWISE_FUNCTION_RULES,
    MORE_POINTWISE_NN_RULES,
    MORE_POINTWISE_RULES,
)
from kernbench.torch.autograd.nn_formulas import NN_RULES
from kernbench.torch.autograd.pointwise_formulas import (
    POINTWISE_FUNCTION_RULES,
    POINTWISE_LINALG_RULES,
    POINTWISE_NN_RULES,
    POINTWISE_RULES,
)
from kernbench.torch.autograd.product_formulas import (
    PRODUCT_FUNCTION_RULES,
    PRODUCT_LINALG_RULES,
    PRODUCT_NN_RULES,
    PRODUCT_RULES,
)
from kernbench.torch.autograd.resample_formulas import RESAMPLE_NN_RULES
from kernbench.torch.autograd.scan_formulas import SCAN_RULES
from kernbench.torch.autograd.selection_formulas import (
    SELECTION_FUNCTION_RULES,
    SELECTION_NN_RULES,
    SELECTION_RULES,
)
from kernbench.torch.autograd.trig_formulas import TRIG_FUNCTION_RULES, TRIG_RULES
from kernbench.torch.grad_slots import bump_version, set_history
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init as nn_init
from kernbench.torch.nn import utils as nn_utils
from kernbench.torch.nn.bags import __all__ as bag_names
from kernbench.torch.nn.channel_ops import __all__ as channel_ops_names
from kernbench.torch.nn.likelihood_losses import __all__ as likelihood_loss_names
from kernbench.torch.nn.margin_losses import __all__ as margin_loss_names
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.sampling_grids import __all__ as sampling_grid_names
from kernbench.torch.nn.shrink_activations import __all__ as shrink_activation_names
from kernbench.torch.nn.unpooling import AVG_POOLS
from kernbench.torch.nn.unpooling import __all__ as unpooling_names
from kernbench.torch.tensor import Tensor

__all__ = ["install_autograd"]

_OPERATORS = {
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
    "__rpow__", "__matmul__", "__rmatmul__", "__neg__", "__pos__", "__abs__", "__getitem__",
}  # fmt: skip
_IN_PLACE_OPERATORS = {
    "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__",
    "__ipow__", "__imatmul__", "__setitem__", "__iand__", "__ior__", "__ixor__",
    "__ilshift__", "__irshift__",
}  # fmt: skip
# Methods outside the graph by nature: autograd's own, host reads, and new tensors that
# take only a dtype and device from the tensor.
_LEFT_ALONE = {
    "backward", "requires_grad_", "detach", "detach_", "numpy", "item", "tolist",
    "new", "new_empty", "new_zeros", "new_ones", "new_full", "new_tensor", "free", "size", "stride",
    "dim", "numel", "nelement", "element_size", "storage_offset", "data_ptr",
    "is_contiguous", "get_device", "contiguous_device_tensor",
    "register_post_accumulate_grad_hook", "share_memory_",
}  # fmt: skip
_PROPERTIES = {"T", "mT"}
# torch.<name> that call the tensor method of the same name, or torch functions, which
# record (torch.spmm is torch.mm; sparse_coo_tensor an index_put into zeros).
_PASS_THROUGH = (set(functions.__all__) - {"where", "isclose"}) | {
    "neg", "negative", "spmm", "sparse_coo_tensor", "vmap",
}  # fmt: skip
# torch.nn.functional.<name> composed only of tensor methods (which record).
_F_PASS_THROUGH = {
    "softmax", "log_softmax", "relu", "sigmoid", "tanh",
    *shrink_activation_names, *channel_ops_names, *margin_loss_names, *likelihood_loss_names,
    *bag_names, *sampling_grid_names, *unpooling_names, "gumbel_softmax", "ctc_loss",
}  # fmt: skip
# torch.<name> outside the graph: factories (a tensor argument gives only a dtype, a
# device or values copied as a new leaf), seeds, files, predicates.
_TORCH_LEFT_ALONE = {
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange",
    "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like",
    "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
    "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state", "save", "load",
    "is_tensor", "numel", "get_default_dtype", "set_default_dtype", "allclose", "equal",
    "set_float32_matmul_precision", "get_float32_matmul_precision", "tril_indices",
    "triu_indices", "is_grad_enabled", "use_deterministic_algorithms",
    "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
    "set_deterministic_debug_mode", "get_deterministic_debug_mode",
}  # fmt: skip

_RULES = {
    **RULES, **ATTENTION_RULES, **POINTWISE_RULES, **SCAN_RULES, **INDEX_RULES,
    **MORE_POINTWISE_RULES, **SELECTION_RULES, **PRODUCT_RULES, **TRIG_RULES,
    **MATH_MORE_RULES,
    # sparse tensors are held dense: a conversion to sparse is a copy, to dense a cast
    **dict.fromkeys(("to_sparse", "to_sparse_coo", "to_sparse_csr", "to_sparse_csc"),
                    RULES["clone"]),
    "to_dense": RULES["to"],
}  # fmt: skip
_FUNCTION_RULES = {
    **FUNCTION_RULES, **ATTENTION_FUNCTION_RULES, **POINTWISE_FUNCTION_RULES,
    **INDEX_FUNCTION_RULES, **MORE_POINTWISE_FUNCTION_RULES,
    **SELECTION_FUNCTION_RULES, **PRODUCT_FUNCTION_RULES, **TRIG_FUNCTION_RULES,
    **MATH_MORE_FUNCTION_RULES,
}  # fmt: skip
_NN_RULES = {
    **NN_RULES, **ATTENTION_NN_RULES, **CONV_NN_RULES, **POINTWISE_NN_RULES,
    **RESAMPLE_NN_RULES, **INDEX_NN_RULES,
    **MORE_POINTWISE_NN_RULES, **SELECTION_NN_RULES,
    **PRODUCT_NN_RULES,
}  # fmt: skip

_INSTALLED: list[bool] = []


def _grad_tensors(args: tuple, kwargs: dict) -> list[Tensor]:
    """The tensors among the arguments (and in list/tuple arguments) that require grad."""
    found = []
    for value in (*args, *kwargs.values()):
        if isinstance(value, Tensor):
            if value.requires_grad:
                found.append(value)
        elif isinstance(value, list | tuple):
            found.extend(v for v in value if isinstance(v, Tensor) and v.requires_grad)
    return found


def _inplace_flag(fn: Callable, args: tuple, kwargs: dict) -> bool:
    if "inplace" in kwargs:
        return kwargs["inplace"] is True
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return bound.arguments.get("inplace") is True


def _unsupported(fn: Callable, op: str, inputs: list[Tensor], args: tuple, kwargs: dict) -> Any:
    if _inplace_flag(fn, args, kwargs):  # the recorded out-of-place call, written back
        recording = _WRAPPED.get(id(fn), (fn, fn))[1]
        return record_in_place_function(recording, f"torch.{op}", args, kwargs)
    out = untracked(fn, *args, **kwargs)
    outs = out if isinstance(out, tuple | list) else (out,)
    for item in outs:
        if (
            isinstance(item, Tensor)
            and item.dtype.is_floating_point
            and not any(item is t for t in inputs)
        ):
            set_history(item, UnsupportedBackward(op, inputs))
    return out


_WRAPPED: dict[int, tuple[Callable, Callable]] = {}  # id(original) -> (original, wrapper)


def _wrap(fn: Callable, op: str, rule: Callable | None) -> Callable:
    """The wrapper of ``fn``; one per function, so aliases (``concat is cat``) stay aliases."""
    known = _WRAPPED.get(id(fn))
    if known is not None and known[0] is fn:
        return known[1]
    call = _wrapper(fn, op, rule)
    _WRAPPED[id(fn)] = (fn, call)
    return call


def _wrapper(fn: Callable, op: str, rule: Callable | None) -> Callable:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        inputs = _grad_tensors(args, kwargs)
        if not inputs or not is_grad_enabled():
            return fn(*args, **kwargs)
        if rule is not None:
            try:
                return rule(fn, *args, **kwargs)
            except Unsupported:
                pass
        return _unsupported(fn, op, inputs, args, kwargs)

    return call


def _wrap_in_place(fn: Callable, op: str) -> Callable:
    known = _WRAPPED.get(id(fn))
    if known is not None and known[0] is fn:
        return known[1]
    call = _in_place_wrapper(fn, op)
    _WRAPPED[id(fn)] = (fn, call)
    return call


def _in_place_wrapper(fn: Callable, op: str) -> Callable:
    name = op.rpartition(".")[2]

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        target = args[0] if args and isinstance(args[0], Tensor) else None
        if target is not None and is_grad_enabled() and _grad_tensors(args, kwargs):
            return record_in_place(fn, name, op, args, kwargs)  # (bumps the version)
        result = fn(*args, **kwargs)
        if target is not None:
            bump_version(target)
        return result

    return call


def _untracked_call(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with no_grad():
            return fn(*args, **kwargs)

    return call


def _is_in_place(name: str) -> bool:
    return name in _IN_PLACE_OPERATORS or (name.endswith("_") and not name.startswith("_"))


def _install_methods() -> None:
    for name in dir(Tensor):
        operator = name in _OPERATORS or name in _IN_PLACE_OPERATORS
        if name in _LEFT_ALONE or (name.startswith("_") and not operator):
            continue
        raw = inspect.getattr_static(Tensor, name)
        if isinstance(raw, property):
            if name in _PROPERTIES and raw.fget is not None:
                fget = _wrap(raw.fget, f"Tensor.{name}", _RULES.get(name))
                setattr(Tensor, name, property(fget, raw.fset, raw.fdel, raw.__doc__))
            continue
        if not inspect.isfunction(raw):
            continue
        if _is_in_place(name):
            setattr(Tensor, name, _wrap_in_place(raw, f"Tensor.{name}"))
        else:
            setattr(Tensor, name, _wrap(raw, f"Tensor.{name}", _RULES.get(name)))


def _install_functions(module: ModuleType, prefix: str, names: Any, rules: dict, skip: set) -> None:
    for name in names:
        fn = getattr(module, name, None)
        if name in skip or not inspect.isfunction(fn):
            continue
        op = prefix + (fn.__name__ if not fn.__name__.startswith("_") else name)  # cat, not concat
        if _is_in_place(name):
            setattr(module, name, _wrap_in_place(fn, op))
        else:
            setattr(module, name, _wrap(fn, op, rules.get(name) or rules.get(fn.__name__)))


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def install_autograd(torch_module: ModuleType) -> None:
    """Wrap the facade's entry points (``torch_module`` is ``kernbench.torch``); once."""
    if _INSTALLED:
        return
    _install_methods()
    _install_functions(
        torch_module, "", torch_module.__all__, _FUNCTION_RULES, _PASS_THROUGH | _TORCH_LEFT_ALONE
    )
    _install_functions(F, "nn.functional.", F.__all__, _NN_RULES, _F_PASS_THROUGH | {"one_hot"})
    AVG_POOLS.update({dims: getattr(F, f"avg_pool{dims}d") for dims in AVG_POOLS})
    linalg_rules = {**POINTWISE_LINALG_RULES, **PRODUCT_LINALG_RULES, **MATH_MORE_LINALG_RULES}
    _install_functions(linalg, "linalg.", linalg.__all__, linalg_rules, set())
    for name in nn_init.__all__:
        setattr(nn_init, name, _untracked_call(getattr(nn_init, name)))
    for name in nn_utils.UNTRACKED:
        setattr(nn_utils, name, _untracked_call(getattr(nn_utils, name)))
    Module.load_state_dict = _untracked_call(Module.load_state_dict)
    for cls in _subclasses(Module):  # torch initializes parameters under no_grad
        for name in ("reset_parameters", "_reset_parameters"):
            if name in vars(cls):
                setattr(cls, name, _untracked_call(vars(cls)[name]))
    _INSTALLED.append(True)
