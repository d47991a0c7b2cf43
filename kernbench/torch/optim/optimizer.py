"""``torch.optim.Optimizer``: parameter groups, per-parameter state, ``zero_grad`` and the
state dict, as torch's.

``step()`` reads the ``grad`` slots ``backward()`` filled or the script assigned
(a parameter whose ``grad`` is None is skipped, as torch skips it) and
updates the parameters with in-place device ops, so a step costs device time.
The step counter of Adam-style state is a Python float (torch keeps a CPU
tensor; there is no host tensor here, and reading a device one would cost a
transfer torch does not pay).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from kernbench.errors import OptimizerValueError, TensorError, TensorTypeError
from kernbench.torch.autograd import enable_grad
from kernbench.torch.tensor import Tensor

__all__ = ["Optimizer", "required"]


class _Required:
    """The default of a hyper-parameter every group must give (torch's ``required``)."""

    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class: ``Optimizer(params, defaults)``; subclasses define ``step``."""

    def __init__(self, params: Any, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict[Tensor, dict[str, Any]] = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TensorTypeError(
                "params argument given to the optimizer should be an iterable of Tensors or "
                f"dicts, but got {type(params).__name__}"
            )
        groups = list(params)
        if not groups:
            raise OptimizerValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        if not isinstance(param_group, dict):
            raise TensorTypeError(
                f"param_group must be a dict, but got {type(param_group).__name__}"
            )
        params = param_group["params"]
        if isinstance(params, Tensor):
            param_group["params"] = [params]
        elif isinstance(params, set):
            raise TensorTypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead."
            )
        else:
            param_group["params"] = list(params)
        for param in param_group["params"]:
            if not isinstance(param, Tensor):
                raise TensorTypeError(
                    f"optimizer can only optimize Tensors, but one of the params is "
                    f"{type(param).__name__}"
                )
        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise OptimizerValueError(
                    "parameter group didn't specify a value of required optimization "
                    f"parameter {name}"
                )
            param_group.setdefault(name, default)
        if len({id(p) for p in param_group["params"]}) != len(param_group["params"]):
            raise OptimizerValueError(
                "optimizer contains a parameter group with duplicate parameters; in future, "
                "this will cause an error"
            )
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in param_group["params"]):
            raise OptimizerValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        raise NotImplementedError

    def _closure_loss(self, closure: Callable[[], Any] | None) -> Any:
        if closure is None:
            return None
        with enable_grad():  # torch's closure records its forward and runs backward
            return closure()

    # -- state dict ----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """``{'state': {index: state}, 'param_groups': [{..., 'params': [indices]}]}``; the
        state's tensors are the optimizer's own (not copies), as torch's."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take ``state_dict``'s hyper-parameters and state (copied to each parameter's device;
        floating state in the parameter's dtype), as torch's."""
        state_dict = copy.deepcopy(state_dict)
        groups, saved = self.param_groups, state_dict["param_groups"]
        if len(groups) != len(saved):
            raise OptimizerValueError(
                "loaded state dict has a different number of parameter groups"
            )
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved, strict=True)):
            raise OptimizerValueError(
                "loaded state dict contains a parameter group that doesn't match the size "
                "of optimizer's group"
            )
        by_index = {
            i: p
            for s, g in zip(saved, groups, strict=True)
            for i, p in zip(s["params"], g["params"], strict=True)
        }
        self.state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key not in by_index:
                raise TensorError(f"load_state_dict: state for parameter {key} has no parameter")
            param = by_index[key]
            self.state[param] = {k: _cast(param, k, v) for k, v in value.items()}
        self.param_groups = [
            {**s, "params": g["params"]} for s, g in zip(saved, groups, strict=True)
        ]

    def __getstate__(self) -> dict[str, Any]:
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def __repr__(self) -> str:
        text = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"


def _cast(param: Tensor, key: str, value: Any) -> Any:
    if not isinstance(value, Tensor) or key == "step":
        return value
    dtype = param.dtype if value.dtype.is_floating_point else value.dtype
    return value.to(device=param.device, dtype=dtype)


def parameters_with_grads(group: dict[str, Any]) -> Iterable[Tensor]:
    """The group's parameters whose ``grad`` slot is set (the others are skipped)."""
    return [p for p in group["params"] if p.grad is not None]
