"""``nn.Module.register_full_backward_hook``: the module's input and output gradients.

As torch's ``BackwardHook``: when hooks are registered and recording is on, the call's
positional tensor arguments pass through one identity node and its tensor outputs
through another.  In backward the output node keeps the gradients of the outputs
(``grad_output``); the input node then calls each hook as ``hook(module, grad_input,
grad_output)`` (``grad_input`` one entry per positional argument, None for non-tensors
and inputs that need no gradient), and a tuple a hook returns replaces ``grad_input``.
When no input needs a gradient the hooks are called from the output node with
``grad_input`` all None.  ``nn.Module`` calls :func:`setup` through
``Module.backward_hook_setup``, registered here (``nn`` sits below ``autograd``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kernbench.errors import TensorError
from kernbench.torch.autograd.function import Function
from kernbench.torch.autograd.grad_mode import is_grad_enabled
from kernbench.torch.nn.module import Module
from kernbench.torch.tensor import Tensor

__all__ = ["setup"]


class _State:
    def __init__(self, module: Module, hooks: Sequence[Callable], arg_count: int) -> None:
        self.module, self.hooks, self.arg_count = module, list(hooks), arg_count
        self.positions: list[int] = []  # of the positional tensors that need a gradient
        self.grad_output: tuple[Any, ...] = ()

    def call_hooks(self, grad_input: tuple[Any, ...]) -> tuple[Any, ...]:
        for hook in self.hooks:
            result = hook(self.module, grad_input, self.grad_output)
            if result is None:
                continue
            result = tuple(result) if isinstance(result, list | tuple) else (result,)
            if len(result) != len(grad_input):
                raise TensorError(
                    f"Backward hook returned an invalid number of grad_input, got "
                    f"{len(result)}, but expected {len(grad_input)}"
                )
            grad_input = result
        return grad_input


class _InputHook(Function):
    @staticmethod
    def forward(ctx: Any, state: _State, *tensors: Any) -> tuple[Any, ...]:
        ctx.state = state
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        state = ctx.state
        grad_input: list[Any] = [None] * state.arg_count
        for position, g in zip(state.positions, grads, strict=True):
            grad_input[position] = g
        replaced = state.call_hooks(tuple(grad_input))
        return (None, *(replaced[p] for p in state.positions))


class _OutputHook(Function):
    @staticmethod
    def forward(ctx: Any, state: _State, *tensors: Any) -> tuple[Any, ...]:
        ctx.state = state
        return tensors

    @staticmethod
    def backward(ctx: Any, *grads: Any) -> tuple[Any, ...]:
        state = ctx.state
        state.grad_output = grads
        if not state.positions:
            state.call_hooks((None,) * state.arg_count)
        return (None, *grads)


def setup(
    module: Module, hooks: Sequence[Callable], args: tuple[Any, ...]
) -> tuple[tuple[Any, ...], Callable[[Any], Any]]:
    """``args`` with their gradient-needing tensors behind the input node, and the
    function that puts the output's tensors behind the output node."""
    if not is_grad_enabled():
        return args, lambda output: output
    state = _State(module, hooks, len(args))
    state.positions = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if state.positions:
        hooked = _InputHook.apply(state, *(args[i] for i in state.positions))
        args = tuple(
            hooked[state.positions.index(i)] if i in state.positions else a
            for i, a in enumerate(args)
        )

    def finish(output: Any) -> Any:
        single = isinstance(output, Tensor)
        outputs = (output,) if single else output
        if not isinstance(outputs, tuple) or not any(
            isinstance(o, Tensor) and o.requires_grad for o in outputs
        ):
            return output
        where = [i for i, o in enumerate(outputs) if isinstance(o, Tensor) and o.requires_grad]
        hooked = _OutputHook.apply(state, *(outputs[i] for i in where))
        done = tuple(hooked[where.index(i)] if i in where else o for i, o in enumerate(outputs))
        return done[0] if single else done

    return args, finish


Module.backward_hook_setup = setup
