"""``torch.nn.utils.parametrize``: a parameter or buffer seen through modules.

``register_parametrization(module, "weight", p)`` moves ``module.weight`` to
``module.parametrizations.weight.original`` (a :class:`ParametrizationList`, holding
``p`` and any parametrizations registered after it) and makes ``module.weight`` a
property that computes ``p(original)`` on every read, as torch's: the module's class is
swapped, for this instance only, for a subclass named ``Parametrized<Class>`` that
carries the property (ADR 0027).  Reading the property runs the parametrizations'
tensor ops, recorded and costing time as those ops do; assigning to it runs their
``right_inverse`` (in reverse order, recording off) and sets the original's data.  A
``right_inverse`` that returns several tensors makes ``original0``, ``original1``, ...
(weight norm's magnitude and direction).  ``state_dict()`` keys are torch's
(``parametrizations.weight.original``), since the originals are ordinary parameters
of ordinary submodules.  ``cached()`` computes each parametrized tensor once inside it
(the cache is the calling rank's).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from copy import deepcopy
from typing import Any

import kernbench.torch as torch  # no_grad, as the facade provides it
from kernbench.distributed.scheduler import rank_local
from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.nn.containers import ModuleDict, ModuleList
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = [
    "ParametrizationList",
    "cached",
    "is_parametrized",
    "register_parametrization",
    "remove_parametrizations",
    "transfer_parametrizations_and_params",
    "type_before_parametrizations",
]


class _Cache:
    """How many ``cached()`` blocks are open, and the tensors computed inside them."""

    def __init__(self) -> None:
        self.depth = 0
        self.values: dict[tuple[int, str], Tensor] = {}


_OUTSIDE_RANKS = _Cache()


def _cache() -> _Cache:
    # Per rank, as grad mode: a rank may yield to the others inside a cached() block.
    return rank_local("torch.nn.utils.parametrize.cached", _Cache, _OUTSIDE_RANKS)


@contextmanager
def cached() -> Iterator[None]:
    """Inside it, each parametrized tensor is computed on its first read and reused; the
    values are dropped when the outermost ``cached()`` exits."""
    cache = _cache()
    cache.depth += 1
    try:
        yield
    finally:
        cache.depth -= 1
        if not cache.depth:
            cache.values.clear()


def _register_parameter_or_buffer(module: Module, name: str, value: Tensor) -> None:
    if isinstance(value, Parameter):
        module.register_parameter(name, value)
    else:
        module.register_buffer(name, value)


def _set_data(dest: Tensor, src: Tensor) -> None:
    """torch's ``dest.set_(src)``: ``dest`` (the same object, its grad and requires_grad
    kept) now over ``src``'s memory and shape."""
    dest.data = src


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor and its ``original`` (or ``original0``, ...): the
    type of ``module.parametrizations.<name>``, made by :func:`register_parametrization`."""

    def __init__(self, modules: Iterable[Module], original: Tensor, unsafe: bool = False) -> None:
        modules = list(modules)
        if not modules:
            raise TensorValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        original_shape, original_dtype = original.shape, original.dtype
        with torch.no_grad():
            new: Any = original
            for module in reversed(modules):
                inverse = getattr(module, "right_inverse", None)
                if inverse is not None:
                    try:
                        new = inverse(new)
                    except NotImplementedError:
                        pass
        if not isinstance(new, Tensor | Sequence):
            raise TensorValueError(
                "'right_inverse' must return a Tensor or a Sequence of tensors (list, tuple...). "
                f"Got {type(new).__name__}"
            )
        self.is_tensor = isinstance(new, Tensor)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if original.dtype != new.dtype:
                raise TensorValueError(
                    "When `right_inverse` outputs one tensor, it may not change the dtype.\n"
                    f"original.dtype: {original.dtype}\n"
                    f"right_inverse(original).dtype: {new.dtype}"
                )
            _set_data(original, new)  # the same Parameter, so an optimizer keeps it
            _register_parameter_or_buffer(self, "original", original)
        else:
            for i, tensor in enumerate(new):
                if not isinstance(tensor, Tensor):
                    raise TensorValueError(
                        "'right_inverse' must return a Tensor or a Sequence of tensors "
                        "(list, tuple...). "
                        f"Got element {i} of the sequence with type {type(tensor).__name__}."
                    )
                if isinstance(original, Parameter):
                    tensor = Parameter(tensor, original.requires_grad)
                tensor.requires_grad_(original.requires_grad)
                _register_parameter_or_buffer(self, f"original{i}", tensor)
        if not self.unsafe:
            value = self()
            if not isinstance(value, Tensor):
                raise TensorValueError(
                    f"A parametrization must return a tensor. Got {type(value).__name__}."
                )
            if value.dtype != original_dtype:
                raise TensorValueError(
                    "Registering a parametrization may not change the dtype of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized dtype: {original_dtype}\n"
                    f"parametrized dtype: {value.dtype}"
                )
            if value.shape != original_shape:
                raise TensorValueError(
                    "Registering a parametrization may not change the shape of the tensor, "
                    "unless `unsafe` flag is enabled.\n"
                    f"unparametrized shape: {original_shape}\n"
                    f"parametrized shape: {value.shape}"
                )

    def right_inverse(self, value: Tensor) -> None:
        """Run the parametrizations' ``right_inverse`` in reverse order on ``value`` and make
        the result the original(s) (what assigning to the parametrized tensor does)."""
        with torch.no_grad():
            for module in reversed(list(self)):
                inverse = getattr(module, "right_inverse", None)
                if inverse is None:
                    raise TensorError(
                        f"parametrization {type(module).__name__} does not implement right_inverse."
                    )
                value = inverse(value)
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise TensorValueError(
                        f"`right_inverse` should return a tensor. Got {type(value).__name__}"
                    )
                if value.dtype != self.original.dtype:
                    raise TensorValueError(
                        f"The tensor returned by `right_inverse` has dtype {value.dtype} "
                        f"while `original` has dtype {self.original.dtype}"
                    )
                _set_data(self.original, value)
                return
            if not isinstance(value, Sequence):
                raise TensorValueError(
                    "'right_inverse' must return a sequence of tensors. "
                    f"Got {type(value).__name__}."
                )
            if len(value) != self.ntensors:
                raise TensorValueError(
                    "'right_inverse' must return a sequence of tensors of length "
                    f"{self.ntensors}. Got a sequence of length {len(value)}."
                )
            for i, tensor in enumerate(value):
                original = getattr(self, f"original{i}")
                if not isinstance(tensor, Tensor):
                    raise TensorValueError(
                        "`right_inverse` must return a sequence of tensors. "
                        f"Got element {i} of type {type(tensor).__name__}"
                    )
                if original.dtype != tensor.dtype:
                    raise TensorValueError(
                        f"Tensor {i} returned by `right_inverse` has dtype {tensor.dtype} "
                        f"while `original{i}` has dtype {original.dtype}"
                    )
                _set_data(original, tensor)

    def forward(self) -> Tensor:
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x


def _refuse_pickling(self: Module) -> None:
    raise TensorError(
        "Serialization of parametrized modules is only supported through state_dict(). See:\n"
        "https://pytorch.org/tutorials/beginner/saving_loading_models.html"
        "#saving-loading-a-general-checkpoint-for-inference-and-or-resuming-training"
    )


def _copy_instance(self: Module, memo: dict) -> Module:
    """What ``copy.deepcopy`` does for a class without ``__reduce__`` help (the
    parametrized class refuses pickling, which deepcopy would otherwise go through)."""
    found = memo.get(id(self))
    if found is not None:
        return found
    replica = type(self).__new__(type(self))
    memo[id(self)] = replica
    replica.__dict__.update(deepcopy(self.__dict__, memo))
    return replica


def _inject_new_class(module: Module) -> None:
    """Give ``module`` (alone) a subclass of its class, ``Parametrized<Class>``, to carry
    the properties; torch's."""
    cls = type(module)
    namespace: dict[str, Any] = {"__getstate__": _refuse_pickling}
    if not hasattr(cls, "__deepcopy__"):
        namespace["__deepcopy__"] = _copy_instance
    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), namespace)


def _inject_property(module: Module, tensor_name: str) -> None:
    def get_parametrized(self: Module) -> Tensor:
        parametrization = self.parametrizations[tensor_name]
        cache = _cache()
        if not cache.depth:
            return parametrization()
        key = (id(self), tensor_name)
        value = cache.values.get(key)
        if value is None:
            value = cache.values[key] = parametrization()
        return value

    def set_original(self: Module, value: Tensor) -> None:
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(type(module), tensor_name, property(get_parametrized, set_original))


def _check_consistent(module: Module, tensor_name: str, parametrization: Module) -> None:
    """torch's checks when a parametrization is added to a parametrized tensor: it and its
    ``right_inverse`` keep the tensor's shape and dtype."""
    current = getattr(module, tensor_name)
    out = parametrization(current)
    if not isinstance(out, Tensor):
        raise TensorValueError(f"A parametrization must return a tensor. Got {type(out).__name__}.")
    if out.dtype != current.dtype:
        raise TensorValueError(
            "Registering a parametrization may not change the dtype of the tensor, unless the "
            "`unsafe` flag is enabled.\n"
            f"module.{tensor_name}.dtype: {current.dtype}\n"
            f"parametrization(module.{tensor_name}).dtype: {out.dtype}"
        )
    if out.shape != current.shape:
        raise TensorValueError(
            "Registering a parametrization may not change the shape of the tensor, unless the "
            "`unsafe` flag is enabled.\n"
            f"module.{tensor_name}.shape: {current.shape}\n"
            f"parametrization(module.{tensor_name}).shape: {out.shape}"
        )
    inverse = getattr(parametrization, "right_inverse", None)
    if inverse is None:
        return
    try:
        back = inverse(out)
    except NotImplementedError:
        return
    if not isinstance(back, Tensor):
        raise TensorValueError(
            f"parametrization.right_inverse must return a tensor. Got: {type(back).__name__}"
        )
    for what, got, want in (
        ("dtype", back.dtype, current.dtype),
        ("shape", back.shape, current.shape),
    ):
        if got != want:
            raise TensorValueError(
                f"The tensor returned by parametrization.right_inverse must have the same {what} "
                f"as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                f"module.{tensor_name}.{what}: {want}\n"
                f"returned {what}: {got}"
            )


def register_parametrization(
    module: Module, tensor_name: str, parametrization: Module, *, unsafe: bool = False
) -> Module:
    """Make ``module.<tensor_name>`` read as ``parametrization(original)``; a second call on
    the same name chains (``p2(p1(original))``).  ``unsafe=True`` skips torch's shape and
    dtype checks."""
    unsafe = flag_argument(unsafe, "register_parametrization", "unsafe")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            _check_consistent(module, tensor_name, parametrization)
        plist = module.parametrizations[tensor_name]
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in dict(module.named_parameters(recurse=False)) or tensor_name in dict(
        module.named_buffers(recurse=False)
    ):
        original = getattr(module, tensor_name)
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise TensorValueError(
            f"Module '{module}' does not have a parameter, a buffer, or a parametrized element "
            f"with name '{tensor_name}'"
        )
    return module


def is_parametrized(module: Module, tensor_name: str | None = None) -> bool:
    """Whether ``module`` has a parametrization (on ``tensor_name``, when given)."""
    parametrizations = getattr(module, "parametrizations", None)
    if not isinstance(parametrizations, ModuleDict):
        return False
    if tensor_name is None:
        return len(parametrizations) > 0
    return tensor_name in parametrizations


def remove_parametrizations(
    module: Module, tensor_name: str, leave_parametrized: bool = True
) -> Module:
    """Undo :func:`register_parametrization` on ``tensor_name``: the original Parameter (the
    same object) comes back, holding the parametrized value when ``leave_parametrized``
    (the default), else its own; the class comes back with the last one removed."""
    leave_parametrized = flag_argument(
        leave_parametrized, "remove_parametrizations", "leave_parametrized"
    )
    if not is_parametrized(module, tensor_name):
        raise TensorValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with torch.no_grad():
                _set_data(original, getattr(module, tensor_name))
    elif leave_parametrized:
        value = getattr(module, tensor_name)
        detached = value.detach()
        original = Parameter(detached, value.requires_grad) if value.requires_grad else detached
    else:
        raise TensorValueError(
            "Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
            "parametrized in terms of a sequence of tensors."
        )
    delattr(type(module), tensor_name)
    del module.parametrizations[tensor_name]
    _register_parameter_or_buffer(module, tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = type(module).__bases__[0]
    return module


def type_before_parametrizations(module: Module) -> type:
    """``module``'s class as it was before any parametrization (not ``Parametrized...``)."""
    if is_parametrized(module):
        return type(module).__bases__[0]
    return type(module)


def transfer_parametrizations_and_params(
    from_module: Module, to_module: Module, tensor_name: str | None = None
) -> Module:
    """Register ``from_module``'s parametrizations (of ``tensor_name``, or all) on
    ``to_module`` too, its originals then being ``from_module``'s (the same Parameters),
    as torch's; a name ``to_module`` lacks is first made a Parameter of the current value."""
    if not is_parametrized(from_module):
        return to_module
    names = list(from_module.parametrizations) if tensor_name is None else [tensor_name]
    for name in names:
        source = from_module.parametrizations[name]
        if not hasattr(to_module, name):
            setattr(to_module, name, Parameter(getattr(from_module, name)))
        for parametrization in source:
            register_parametrization(to_module, name, parametrization)
        target = to_module.parametrizations[name]
        originals = (
            ["original"] if source.is_tensor else [f"original{i}" for i in range(source.ntensors)]
        )
        for original in originals:
            setattr(target, original, getattr(source, original))
    return to_module
