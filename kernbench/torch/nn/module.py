"""``torch.nn.Module``: parameters, buffers and submodules registered by attribute.

A module keeps torch's three ordered registries (``_parameters``,
``_buffers``, ``_modules``) filled by ``__setattr__``, walks them in torch's
order with torch's dotted names (``named_parameters``, ``state_dict``, ...)
and prints itself as torch does.  Calling a module runs its forward pre-hooks,
``forward`` and its forward hooks; full backward hooks see its gradients
(:mod:`kernbench.torch.autograd.module_hooks`); ``load_state_dict`` runs every module's
load-state-dict pre-hooks first (which may rename keys, as torch's).  Conversions
(``to``, ``half``, ``cuda``) change the module in place and return it, converting
floating parameters and buffers only, as torch.  Parameters have
``requires_grad=True`` and a ``grad`` that ``backward()`` fills (ADR 0020).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from kernbench.errors import ModuleAttributeError, TensorError, TensorTypeError
from kernbench.torch.dtypes import DTYPE_OBJECTS, TorchDType, as_torch_dtype
from kernbench.torch.hooks import RemovableHandle
from kernbench.torch.memory_formats import check_memory_format
from kernbench.torch.nn.parameter import Buffer, Parameter, is_lazy
from kernbench.torch.shapes import flag_argument
from kernbench.torch.tensor import Tensor

__all__ = ["Module", "add_indent", "forward_pre_hooks", "persistent_buffers", "swap_tensor"]


class _IncompatibleKeys(NamedTuple):
    missing_keys: list[str]
    unexpected_keys: list[str]

    def __repr__(self) -> str:
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return (
            f"_IncompatibleKeys(missing_keys={self.missing_keys!r}, "
            f"unexpected_keys={self.unexpected_keys!r})"
        )

    __str__ = __repr__


def add_indent(text: str, spaces: int) -> str:
    """Every line of ``text`` but the first indented by ``spaces`` (torch's ``_addindent``)."""
    first, *rest = text.split("\n")
    if not rest:
        return text
    return first + "\n" + "\n".join(" " * spaces + line for line in rest)


def _floating(t: Tensor) -> bool:
    return t.dtype.is_floating_point


class Module:
    """Base class of the layers; subclasses set attributes in ``__init__`` and define
    ``forward``."""

    training: bool
    _version = 1
    # (module, hooks, args) -> (args, finish(output)): registered by
    # kernbench.torch.autograd.module_hooks, which sits above this module
    backward_hook_setup: Callable[..., Any] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args or kwargs:
            raise TensorTypeError(
                f"{type(self).__name__}.__init__() got an unexpected argument: Module takes "
                "none (as torch)"
            )
        set_ = object.__setattr__
        set_(self, "training", True)
        set_(self, "_parameters", {})
        set_(self, "_buffers", {})
        set_(self, "_non_persistent_buffers_set", set())
        set_(self, "_modules", {})
        set_(self, "_forward_pre_hooks", OrderedDict())
        set_(self, "_forward_hooks", OrderedDict())
        set_(self, "_load_state_dict_pre_hooks", OrderedDict())

    # -- calling -------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function'
        )

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        backward_hooks = self.__dict__.get("_backward_hooks")
        finish = None
        if backward_hooks and Module.backward_hook_setup is not None:
            args, finish = Module.backward_hook_setup(self, list(backward_hooks.values()), args)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output if finish is None else finish(output)

    def register_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        return RemovableHandle(self._forward_pre_hooks, hook)

    def share_memory(self) -> Module:
        """``share_memory_()`` on every parameter and buffer (no-ops for device tensors,
        as torch's for CUDA ones); returns the module."""
        for t in (*self.parameters(), *self.buffers()):
            t.share_memory_()
        return self

    def register_forward_hook(self, hook: Callable) -> RemovableHandle:
        return RemovableHandle(self._forward_hooks, hook)

    def register_load_state_dict_pre_hook(self, hook: Callable) -> RemovableHandle:
        """``hook(module, state_dict, prefix, local_metadata, strict, missing_keys,
        unexpected_keys, error_msgs)`` runs when ``load_state_dict`` reaches this module,
        before any key is matched; it may rename or drop keys in ``state_dict`` (a copy of
        the one given), as torch's."""
        if "_load_state_dict_pre_hooks" not in self.__dict__:
            object.__setattr__(self, "_load_state_dict_pre_hooks", OrderedDict())
        return RemovableHandle(self._load_state_dict_pre_hooks, hook)

    def register_full_backward_hook(self, hook: Callable, prepend: bool = False) -> RemovableHandle:
        """``hook(module, grad_input, grad_output)`` in each backward through a call of
        this module (:mod:`kernbench.torch.autograd.module_hooks`)."""
        hooks = self.__dict__.setdefault("_backward_hooks", OrderedDict())
        handle = RemovableHandle(hooks, hook)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    # -- registration --------------------------------------------------------------------
    def _check_name(self, name: Any, kind: str) -> None:
        if not isinstance(name, str):
            raise TensorTypeError(f"{kind} name should be a string. Got {type(name).__name__}")
        if "." in name:
            raise KeyError(f'{kind} name can\'t contain "."')
        if name == "":
            raise KeyError(f'{kind} name can\'t be empty string ""')

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TensorTypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(torch.nn.Parameter or None required)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TensorTypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(torch Tensor or None required)"
            )
        self._buffers[name] = tensor
        if flag_argument(persistent, "register_buffer", "persistent"):
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        if module is not None and not isinstance(module, Module):
            raise TensorTypeError(f"{type(module).__name__} is not a Module subclass")
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        module = self
        for item in target.split(".") if target else ():
            if not hasattr(module, item):
                raise ModuleAttributeError(f"{module._get_name()} has no attribute `{item}`")
            module = getattr(module, item)
            if not isinstance(module, Module):
                raise ModuleAttributeError(f"`{item}` is not an nn.Module")
        return module

    def get_parameter(self, target: str) -> Parameter:
        """The parameter at the dotted path ``target`` (``"encoder.0.weight"``), as torch."""
        owner, name = self._owner_of(target)
        param = getattr(owner, name)
        if not isinstance(param, Parameter):
            raise ModuleAttributeError(f"`{name}` is not an nn.Parameter")
        return param

    def get_buffer(self, target: str) -> Tensor:
        """The buffer at the dotted path ``target`` (``"bn.running_mean"``), as torch."""
        owner, name = self._owner_of(target)
        buffers = dict(owner.named_buffers(recurse=False))
        if name not in buffers:
            raise ModuleAttributeError(f"`{name}` is not a buffer")
        return buffers[name]

    def _owner_of(self, target: str) -> tuple[Module, str]:
        module_path, _, name = target.rpartition(".")
        owner = self.get_submodule(module_path)
        if not hasattr(owner, name):
            raise ModuleAttributeError(f"{type(owner).__name__} has no attribute `{name}`")
        return owner, name

    def __setattr__(self, name: str, value: Any) -> None:
        params = self.__dict__.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TensorTypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(torch.nn.Parameter or None expected)"
                )
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in self.__dict__:
                raise AttributeError("cannot assign module before Module.__init__() call")
            self._forget(name, keep="_modules")
            self._modules[name] = value
        elif name in self.__dict__.get("_modules", {}):
            if value is not None:
                raise TensorTypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(torch.nn.Module or None expected)"
                )
            self._modules[name] = value
        elif isinstance(value, Buffer):
            self._forget(name, keep="_buffers")
            self.register_buffer(name, value, value.persistent)
        elif name in self.__dict__.get("_buffers", {}):
            if value is not None and not isinstance(value, Tensor):
                raise TensorTypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(torch.nn.Buffer, torch.Tensor or None expected)"
                )
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Drop ``name`` from the instance and the registries other than ``keep``, before it
        is registered anew in ``keep``: as torch's, a replaced parameter, buffer or child
        keeps its place there (and in ``state_dict`` and ``parameters()``)."""
        self.__dict__.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                self.__dict__[registry].pop(name, None)
        self._non_persistent_buffers_set.discard(name)

    def __getattr__(self, name: str) -> Any:
        # Only called for names that are not ordinary attributes.
        for registry in ("_parameters", "_buffers", "_modules"):
            found = self.__dict__.get(registry)
            if found is not None and name in found:
                return found[name]
        raise ModuleAttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        for registry in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[registry]:
                del self.__dict__[registry][name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        own = [*self._parameters, *self._buffers, *self._modules]
        return sorted(set(super().__dir__()) | set(own))

    # -- walking -------------------------------------------------------------------------
    def named_modules(
        self, memo: set | None = None, prefix: str = "", remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Module]]:
        memo = set() if memo is None else memo
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self) -> Iterator[Module]:
        for _, module in self.named_modules():
            yield module

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen: set = set()
        for name, module in self._modules.items():
            if module is not None and module not in seen:
                seen.add(module)
                yield name, module

    def children(self) -> Iterator[Module]:
        for _, module in self.named_children():
            yield module

    def _named_members(
        self, registry: str, prefix: str, recurse: bool, remove_duplicate: bool
    ) -> Iterator[tuple[str, Any]]:
        seen: set[int] = set()
        walk = (
            self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
            if recurse
            else [(prefix, self)]
        )
        for module_prefix, module in walk:
            for name, value in getattr(module, registry).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(value))
                yield module_prefix + ("." if module_prefix else "") + name, value

    def named_parameters(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Parameter]]:
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(
        self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True
    ) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def apply(self, fn: Callable[[Module], Any]) -> Module:
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- state ---------------------------------------------------------------------------
    def state_dict(
        self, *args: Any, destination: Any = None, prefix: str = "", keep_vars: bool = False
    ) -> OrderedDict[str, Tensor]:
        """Parameters then persistent buffers of each module, in ``named_modules`` order,
        as tensors over the same memory (``keep_vars`` keeps the Parameters themselves)."""
        if args:  # torch's deprecated positional (destination, prefix, keep_vars)
            given = (destination, prefix, keep_vars)
            destination, prefix, keep_vars = (*args[:3], *given[len(args[:3]) :])
        out = OrderedDict() if destination is None else destination
        # an uninitialized (lazy) parameter or buffer is kept itself, as torch's lazy modules
        for name, param in self._parameters.items():
            if param is not None:
                out[prefix + name] = param if keep_vars or is_lazy(param) else param.detach()
        for name, buf in self._buffers.items():
            if buf is not None and name not in self._non_persistent_buffers_set:
                out[prefix + name] = buf if keep_vars or is_lazy(buf) else buf.detach()
        for name, module in self._modules.items():
            if module is not None:
                module.state_dict(destination=out, prefix=prefix + name + ".", keep_vars=keep_vars)
        return out

    def load_state_dict(
        self, state_dict: Any, strict: bool = True, assign: bool = False
    ) -> _IncompatibleKeys:
        """Copy ``state_dict``'s tensors into the parameters and persistent buffers (a copy
        kernel each); ``strict`` raises torch's message for missing and unexpected keys."""
        strict = flag_argument(strict, "load_state_dict", "strict")
        if not isinstance(state_dict, dict):
            raise TensorTypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}."
            )
        errors: list[str] = []
        state_dict = OrderedDict(state_dict)  # torch's copy, which pre-hooks may change
        for prefix, module in self.named_modules():
            hooks = module.__dict__.get("_load_state_dict_pre_hooks", {})
            for hook in list(hooks.values()):
                hook(module, state_dict, prefix + "." if prefix else "", {}, strict, [], [], errors)
        expected = self.state_dict(keep_vars=True)
        for key, target in expected.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, Tensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected torch.Tensor or '
                    f"Tensor-like object from checkpoint but received {type(value)}"
                )
            elif is_lazy(target) and is_lazy(value):
                continue  # both without a shape yet (torch's copy of nothing)
            elif tuple(value.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape {value.shape} from "
                    f"checkpoint, the shape in current model is {target.shape}."
                )
            elif assign:
                owner_name, _, name = key.rpartition(".")
                if isinstance(target, Parameter):
                    value = Parameter(value, target.requires_grad)
                setattr(self.get_submodule(owner_name), name, value)
            else:
                target.copy_(value)
        missing = [key for key in expected if key not in state_dict]
        unexpected = [key for key in state_dict if key not in expected]
        if strict:
            if unexpected:
                listed = ", ".join(f'"{k}"' for k in unexpected)
                errors.insert(0, f"Unexpected key(s) in state_dict: {listed}. ")
            if missing:
                listed = ", ".join(f'"{k}"' for k in missing)
                errors.insert(0, f"Missing key(s) in state_dict: {listed}. ")
        if errors:
            raise TensorError(
                f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                + "\n\t".join(errors)
            )
        return _IncompatibleKeys(missing, unexpected)

    # -- modes and gradients -------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self) -> Module:
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.zero_()

    # -- conversion ----------------------------------------------------------------------
    def _apply(self, fn: Callable[[Tensor], Tensor]) -> Module:
        for module in self.children():
            module._apply(fn)  # noqa: SLF001 - torch's recursion over its own class
        for param in self._parameters.values():
            if param is None:
                continue
            converted = fn(param)
            if converted is not param:
                param.data = converted
            if param.grad is not None:
                grad = fn(param.grad)
                if grad is not param.grad:
                    param.grad.data = grad
        for name, buf in self._buffers.items():
            if buf is not None:
                self._buffers[name] = fn(buf)
        return self

    def to(self, *args: Any, **kwargs: Any) -> Module:
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)`` or ``to(tensor)``: in place;
        a dtype converts the floating parameters and buffers only, as torch."""
        dtype, device = kwargs.pop("dtype", None), kwargs.pop("device", None)
        check_memory_format(kwargs.pop("memory_format", None), "nn.Module.to")
        kwargs.pop("non_blocking", None)  # every copy here finishes before it returns
        kwargs.pop("copy", None)  # torch's parser takes it too; parameters convert in place
        if kwargs:
            raise TensorTypeError(
                f"nn.Module.to() got an unexpected keyword argument {next(iter(kwargs))!r}; "
                "it takes device, dtype, non_blocking, copy and memory_format (or a tensor)"
            )
        if len(args) > 3 or sum(not isinstance(arg, bool) for arg in args) > 2:
            raise TensorTypeError(
                f"nn.Module.to() takes at most a device and a dtype (or a tensor) and "
                f"non_blocking; got {len(args)} positional arguments"
            )
        for arg in args:
            if isinstance(arg, Tensor):
                dtype, device = arg.dtype, arg.device
            elif isinstance(arg, TorchDType):
                dtype = arg
            elif not isinstance(arg, bool):
                device = arg
        if dtype is not None:
            dtype = as_torch_dtype(dtype)
            if not dtype.is_floating_point:
                raise TensorTypeError(
                    "nn.Module.to only accepts floating point or complex dtypes, but got "
                    f"desired dtype={dtype!r}"
                )

        def convert(t: Tensor) -> Tensor:
            return t.to(device=device, dtype=dtype if _floating(t) else None)

        return self._apply(convert)

    def _cast(self, name: str) -> Module:
        dt = DTYPE_OBJECTS[name]
        return self._apply(lambda t: t.to(dt) if _floating(t) else t)

    def cuda(self, device: Any = None) -> Module:
        return self._apply(lambda t: t.cuda(device))

    def cpu(self) -> Module:
        """There is no host tensor: the module stays where it is (a no-op, returning self)."""
        return self

    def float(self) -> Module:
        return self._cast("float32")

    def double(self) -> Module:
        return self._cast("float64")

    def half(self) -> Module:
        return self._cast("float16")

    def bfloat16(self) -> Module:
        return self._cast("bfloat16")

    def type(self, dst_type: Any) -> Module:
        return self._apply(lambda t: t.to(dst_type))

    # -- printing ------------------------------------------------------------------------
    def _get_name(self) -> str:
        return type(self).__name__

    def extra_repr(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [
            f"({key}): {add_indent(repr(module), 2)}" for key, module in self._modules.items()
        ]
        lines = extra_lines + child_lines
        main = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                main += extra_lines[0]
            else:
                main += "\n  " + "\n  ".join(lines) + "\n"
        return main + ")"


def persistent_buffers(module: Module) -> list[tuple[str, Tensor]]:
    """``module``'s own buffers that ``state_dict`` saves (not its children's), by name."""
    return [
        (name, buf)
        for name, buf in module._buffers.items()  # noqa: SLF001 - this module's registry
        if buf is not None and name not in module._non_persistent_buffers_set  # noqa: SLF001
    ]


def forward_pre_hooks(module: Module) -> OrderedDict[int, Callable]:
    """``module``'s forward pre-hooks by handle id, the registry itself (torch's
    ``weight_norm`` and ``spectral_norm`` find and remove their hook there)."""
    return module._forward_pre_hooks  # noqa: SLF001 - this module's registry


def swap_tensor(module: Module, name: str, value: Any) -> Any:
    """Put ``value`` (any tensor) in the slot of ``module``'s own parameter or buffer
    ``name`` and return what was there: ``torch.func.functional_call``'s swap, which keeps
    the slot's place and takes a tensor that is not a ``Parameter``.  ``KeyError`` when
    ``name`` is neither."""
    for registry in (module._parameters, module._buffers):  # noqa: SLF001 - its registries
        if name in registry:
            before = registry[name]
            registry[name] = value
            return before
    raise KeyError(name)
