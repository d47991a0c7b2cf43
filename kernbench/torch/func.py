"""``torch.func``: calling a module with other parameters, and the function transforms
that reverse-mode autograd can give.

* :func:`functional_call` runs ``module`` with some of its parameters and buffers
  replaced by the tensors of a dict (by dotted name, as ``named_parameters`` names them;
  tied weights follow, torch's ``tie_weights=True``), restoring them afterwards, so the
  gradient reaches the tensors passed in.  :func:`stack_module_state` stacks the
  parameters and buffers of identical models for a :func:`vmap` over them.
* :func:`grad`, :func:`grad_and_value`, :func:`vjp` and :func:`jacrev` run the function
  on inputs made leaves and ask the autograd engine (``torch.autograd.grad``) for the
  gradients: first order only.  A transform of a transform that needs second-order
  gradients (``grad(grad(f))``, ``hessian``) and the forward-mode ones (``jvp``,
  ``jacfwd``) raise naming the call, since the engine differentiates once.
* :func:`vmap` maps the function over a batch dimension by calling it once per sample
  and stacking the results (``torch.stack``, recorded for autograd): the values are
  torch's, the cost is that of the per-sample calls, not of one batched kernel.
  ``in_dims``/``out_dims`` take ints, ``None`` and (nested) tuples, lists and dicts as
  torch's; ``randomness='error'`` (the default) raises if the function draws random
  numbers, ``'different'`` draws per sample, ``'same'`` repeats the first sample's draws.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import kernbench.torch as torch  # stack and the RNG as the facade provides them
from kernbench.errors import KernBenchError, TensorError
from kernbench.torch.autograd.engine import grad as autograd_grad
from kernbench.torch.autograd.grad_mode import is_grad_enabled
from kernbench.torch.nn.module import Module, swap_tensor
from kernbench.torch.tensor import Tensor

__all__ = [
    "functional_call",
    "grad",
    "grad_and_value",
    "jacrev",
    "stack_module_state",
    "vjp",
    "vmap",
]


# -- functional_call ----------------------------------------------------------------------
def _owner(module: Any, name: str) -> tuple[Any, str]:
    path, _, leaf = name.rpartition(".")
    try:
        return module.get_submodule(path), leaf
    except AttributeError as exc:
        raise KernBenchError(
            f"torch.func.functional_call: {name!r} names no submodule of "
            f"{type(module).__name__} (its names are those of named_parameters and "
            "named_buffers)"
        ) from exc


def functional_call(
    module: Any,
    parameter_and_buffer_dicts: Mapping[str, Any] | Iterable[Mapping[str, Any]],
    args: Any = None,
    kwargs: Mapping[str, Any] | None = None,
    *,
    tie_weights: bool = True,
    strict: bool = False,
) -> Any:
    """``module(*args, **kwargs)`` with the named parameters and buffers replaced."""
    if not isinstance(module, Module):
        raise KernBenchError(
            f"torch.func.functional_call: module must be a torch.nn.Module, got "
            f"{type(module).__name__}"
        )
    dicts = (
        [parameter_and_buffer_dicts]
        if isinstance(parameter_and_buffer_dicts, Mapping)
        else list(parameter_and_buffer_dicts)
    )
    values: dict[str, Any] = {}
    for d in dicts:
        repeated = sorted(set(values) & set(d))
        if repeated:
            raise ValueError(
                f"functional_call got multiple values for keys {repeated}, which are used in "
                "two or more of the dicts"
            )
        values.update(d)
    current = {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
    }
    if strict:
        missing = sorted(set(current) - set(values))
        unexpected = sorted(set(values) - set(current))
        if missing or unexpected:
            raise KernBenchError(
                f"Error(s) in reparametrizing for {type(module).__name__}: missing key(s) "
                f"{missing}, unexpected key(s) {unexpected}"
            )
    if tie_weights:  # a name tied to a given one takes its value too
        given = {id(current[name]): value for name, value in values.items() if name in current}
        for name, tensor in current.items():
            if name not in values and id(tensor) in given:
                values[name] = given[id(tensor)]
    swapped: list[tuple[Any, str, Any]] = []
    try:
        for name, value in values.items():
            owner, leaf = _owner(module, name)
            try:
                swapped.append((owner, leaf, swap_tensor(owner, leaf, value)))
            except KeyError:
                raise KernBenchError(
                    f"torch.func.functional_call: {name!r} is neither a parameter nor a "
                    f"buffer of {type(module).__name__}"
                ) from None
        call_args = args if isinstance(args, tuple) else (() if args is None else (args,))
        return module(*call_args, **(kwargs or {}))
    finally:
        for owner, leaf, before in reversed(swapped):
            swap_tensor(owner, leaf, before)


def stack_module_state(models: Iterable[Any]) -> tuple[dict[str, Tensor], dict[str, Tensor]]:
    """The parameters and the buffers of identical ``models``, each stacked along a new
    first dimension (the parameters detached as new leaves that require grad)."""
    models = list(models)
    if not models:
        raise TensorError("stack_module_state: Expected at least one model, got 0.")
    if not all(m.training == models[0].training for m in models):
        raise TensorError(
            "stack_module_state: Expected all models to have the same training/eval mode."
        )
    first = type(models[0])
    if not all(type(m) is first for m in models):
        raise TensorError("stack_module_state: Expected all models to be of the same class.")
    names = [n for n, _ in models[0].named_parameters()]
    params = {
        n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).requires_grad_()
        for n in names
    }
    buffers = {
        n: torch.stack([dict(m.named_buffers())[n] for m in models])
        for n, _ in models[0].named_buffers()
    }
    return params, buffers


# -- reverse-mode transforms ---------------------------------------------------------------
def _leaves(args: tuple, argnums: int | tuple[int, ...], call: str) -> tuple[list, Any]:
    """``args`` with those at ``argnums`` made leaves that require grad (tensors within
    tuples, lists and dicts too); the leaves, in the structure ``argnums`` asks for."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise TensorError(f"{call}: argnums must be non-empty")
    for n in nums:
        if not isinstance(n, int) or not -len(args) <= n < len(args):
            raise TensorError(
                f"{call}: Got argnums={argnums!r}; each must be an int in [-{len(args)}, "
                f"{len(args)}) for {len(args)} positional arguments"
            )
    out = list(args)
    for n in nums:
        out[n] = _map(lambda t: t.detach().requires_grad_(), out[n])
    chosen = out[nums[0]] if isinstance(argnums, int) else tuple(out[n] for n in nums)
    return out, chosen


def _map(fn: Callable[[Tensor], Any], tree: Any) -> Any:
    if isinstance(tree, Tensor):
        return fn(tree)
    if isinstance(tree, tuple | list):
        return type(tree)(_map(fn, x) for x in tree)
    if isinstance(tree, dict):
        return {k: _map(fn, v) for k, v in tree.items()}
    return tree


def _flat(tree: Any) -> list[Tensor]:
    if isinstance(tree, Tensor):
        return [tree]
    if isinstance(tree, tuple | list):
        return [t for x in tree for t in _flat(x)]
    if isinstance(tree, dict):
        return [t for v in tree.values() for t in _flat(v)]
    return []


def _rebuild(tree: Any, flat: Iterable[Any]) -> Any:
    items = iter(flat)

    def go(node: Any) -> Any:
        if isinstance(node, Tensor):
            return next(items)
        if isinstance(node, tuple | list):
            return type(node)(go(x) for x in node)
        if isinstance(node, dict):
            return {k: go(v) for k, v in node.items()}
        return node

    return go(tree)


_ACTIVE: list[str] = []  # the transforms running their function now


@contextlib.contextmanager
def _differentiating(call: str) -> Iterator[None]:
    """Run a transform's function, refusing one started inside another: differentiating
    a gradient needs second order, and the inner transform's leaves would be cut off
    from the outer's (a silent zero)."""
    if _ACTIVE:
        raise TensorError(
            f"{call} inside {_ACTIVE[-1]}: a transform of a transform that differentiates "
            "twice (grad of grad, jacrev of grad, hessian) is not supported: the autograd "
            "engine here gives first-order gradients only"
        )
    _ACTIVE.append(call)
    try:
        yield
    finally:
        _ACTIVE.pop()


def _first_order(call: str) -> None:
    if not is_grad_enabled():
        raise TensorError(f"{call}: gradients are off (torch.no_grad); call it outside no_grad")


def _engine_grads(outputs: list[Tensor], leaves: list[Tensor], grad_outputs: Any = None) -> list:
    """``torch.autograd.grad`` of ``outputs`` for ``leaves`` (graph kept, for another
    call), a zero tensor for each leaf the outputs do not depend on."""
    live = [k for k, o in enumerate(outputs) if o.requires_grad]
    grads: Any = [None] * len(leaves)
    if live:
        vs = None if grad_outputs is None else [grad_outputs[k] for k in live]
        grads = autograd_grad(
            [outputs[k] for k in live], leaves, grad_outputs=vs, retain_graph=True,
            allow_unused=True,
        )  # fmt: skip
    return [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves, strict=True)]


def _call_on_leaves(
    func: Callable[..., Any], args: tuple, kwargs: dict, argnums: Any, has_aux: bool, call: str
) -> tuple[Any, Any, Any]:
    """Run ``func`` with the arguments at ``argnums`` made leaves: its output, its aux
    (``has_aux``: the output must be a pair) and the leaves in ``argnums``' structure."""
    _first_order(call)
    inputs, chosen = _leaves(args, argnums, call)
    with _differentiating(call):
        result = func(*inputs, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple | list) and len(result) == 2):
            raise TensorError(
                f"{call}(f)(*args): output of function f should be a tuple: (output, aux) "
                "if has_aux is True"
            )
        result, aux = result
    return result, aux, chosen


def grad_and_value(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f`` -> a function giving ``(gradient, value)`` of ``f``'s scalar output (with its
    aux as ``(gradient, (value, aux))`` when ``has_aux``)."""
    call = "torch.func.grad_and_value"

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result, aux, chosen = _call_on_leaves(func, args, kwargs, argnums, has_aux, call)
        if not isinstance(result, Tensor) or result.numel() != 1:
            what = (
                f"tensor with {result.ndim} dims"
                if isinstance(result, Tensor)
                else type(result).__name__
            )
            raise TensorError(
                f"{call}(f)(*args): Expected f(*args) to return a scalar Tensor, got {what}"
            )
        gradient = _rebuild(chosen, _engine_grads([result], _flat(chosen)))
        value = result.detach()
        return (gradient, (value, aux)) if has_aux else (gradient, value)

    return wrapper


def grad(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f`` -> a function giving the gradient of ``f``'s scalar output with respect to
    the arguments at ``argnums`` (and ``f``'s aux when ``has_aux``)."""
    both = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        gradient, value = both(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient

    return wrapper


def vjp(func: Callable[..., Any], *primals: Any, has_aux: bool = False) -> tuple:
    """``(output, vjp_fn)``: ``vjp_fn(v)`` gives ``v``'s vector-Jacobian product with each
    primal (reverse mode, once per call of ``vjp_fn``)."""
    call = "torch.func.vjp"
    result, aux, chosen = _call_on_leaves(
        func, primals, {}, tuple(range(len(primals))), has_aux, call
    )
    outputs = _flat(result)

    def vjp_fn(*cotangents: Any) -> tuple:
        vs = _flat(cotangents[0] if len(cotangents) == 1 else cotangents)
        if len(vs) != len(outputs):
            raise TensorError(
                f"{call}: expected {len(outputs)} cotangents (one per output), got {len(vs)}"
            )
        return tuple(_rebuild(chosen, _engine_grads(outputs, _flat(chosen), vs)))

    detached = _map(lambda t: t.detach(), result)
    return (detached, vjp_fn, aux) if has_aux else (detached, vjp_fn)


def jacrev(
    func: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """``f`` -> a function giving the Jacobian of ``f``'s tensor output with respect to the
    arguments at ``argnums``: shape ``output.shape + input.shape``, one reverse pass per
    output element."""
    call = "torch.func.jacrev"

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        result, aux, chosen = _call_on_leaves(func, args, kwargs, argnums, has_aux, call)
        if not isinstance(result, Tensor):
            raise TensorError(f"{call}: the function must return a Tensor here, got {result!r}")
        leaves = _flat(chosen)
        flat = result.reshape(-1)
        rows: list[list[Tensor]] = [[] for _ in leaves]
        for i in range(flat.numel()):
            for k, g in enumerate(_engine_grads([flat[i]], leaves)):
                rows[k].append(g)
        jac = [
            torch.stack(r).reshape(*result.shape, *leaf.shape)
            if r
            else torch.zeros(*result.shape, *leaf.shape, dtype=leaf.dtype)
            for r, leaf in zip(rows, leaves, strict=True)
        ]
        out = _rebuild(chosen, jac)
        return (out, aux) if has_aux else out

    return wrapper


# -- vmap ----------------------------------------------------------------------------------
def _dims_for(tree: Any, dims: Any, call: str) -> Any:
    """``dims`` spread over ``tree``: an int or None applies to every tensor in it."""
    if dims is None or isinstance(dims, int):
        return _map(lambda _t: dims, tree) if not isinstance(tree, Tensor) else dims
    if isinstance(tree, tuple | list) and isinstance(dims, tuple | list):
        if len(tree) != len(dims):
            raise TensorError(
                f"{call}: in_dims is not compatible with the structure of the inputs: "
                f"{len(dims)} dims for {len(tree)} values"
            )
        return type(tree)(_dims_for(t, d, call) for t, d in zip(tree, dims, strict=True))
    if isinstance(tree, dict) and isinstance(dims, dict):
        return {k: _dims_for(v, dims.get(k), call) for k, v in tree.items()}
    raise TensorError(f"{call}: in_dims {dims!r} does not match the input {type(tree).__name__}")


def _pairs(tree: Any, dims: Any) -> list[tuple[Tensor, int | None]]:
    if isinstance(tree, Tensor):
        return [(tree, dims)]
    if isinstance(tree, tuple | list):
        return [p for t, d in zip(tree, dims, strict=True) for p in _pairs(t, d)]
    if isinstance(tree, dict):
        return [p for k, v in tree.items() for p in _pairs(v, dims[k])]
    return []


def _select(tree: Any, dims: Any, i: int) -> Any:
    if isinstance(tree, Tensor):
        return tree if dims is None else tree.select(dims, i)
    if isinstance(tree, tuple | list):
        return type(tree)(_select(t, d, i) for t, d in zip(tree, dims, strict=True))
    if isinstance(tree, dict):
        return {k: _select(v, dims[k], i) for k, v in tree.items()}
    return tree


def _stack(results: list[Any], out_dims: Any, call: str) -> Any:
    first = results[0]
    if isinstance(first, Tensor):
        dim = out_dims if isinstance(out_dims, int) else 0
        if out_dims is None:
            return first
        return torch.stack(results, dim=dim)
    if isinstance(first, tuple | list):
        dims = out_dims if isinstance(out_dims, tuple | list) else [out_dims] * len(first)
        if len(dims) != len(first):
            raise TensorError(f"{call}: out_dims has {len(dims)} entries for {len(first)} outputs")
        return type(first)(_stack([r[k] for r in results], d, call) for k, d in enumerate(dims))
    if isinstance(first, dict):
        return {
            k: _stack([r[k] for r in results], out_dims.get(k, 0) if isinstance(out_dims, dict)
                      else out_dims, call)
            for k in first
        }  # fmt: skip
    if all(r == first for r in results) and out_dims is None:
        return first
    raise TensorError(
        f"{call}: the function must return tensors (or tuples, lists and dicts of them), "
        f"got {type(first).__name__}"
    )


def vmap(
    func: Callable[..., Any],
    in_dims: Any = 0,
    out_dims: Any = 0,
    randomness: str = "error",
    *,
    chunk_size: int | None = None,
) -> Callable[..., Any]:
    """``func`` mapped over a batch dimension of its inputs: called per sample, stacked."""
    call = "torch.vmap"
    if randomness not in ("error", "different", "same"):
        raise TensorError(
            f"{call}: Only allowed values for randomness are 'error', 'different', or 'same'. "
            f"Got {randomness}"
        )
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise TensorError(f"{call}: chunk_size should be None or greater than 0, got {chunk_size}")

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        dims = _dims_for(args, tuple(in_dims) if isinstance(in_dims, list) else in_dims, call)
        sizes = set()
        for t, d in _pairs(args, dims):
            if d is not None:
                if not -t.ndim <= d < max(t.ndim, 1):
                    raise TensorError(
                        f"{call}: in_dim {d} is out of range for an input of {t.ndim} dims"
                    )
                sizes.add(int(t.shape[d]))
        if not sizes:
            raise TensorError(
                f"{call}: at least one input must be mapped over (in_dims all None); got "
                f"in_dims={in_dims!r}"
            )
        if len(sizes) > 1:
            raise TensorError(
                f"{call}: Expected all tensors to have the same size in the mapped dimension, "
                f"got sizes {sorted(sizes)} for the mapped dimension"
            )
        (size,) = sizes
        if not size:
            raise TensorError(
                f"{call}: the mapped dimension has size 0; vmap calls the function once per "
                "index, so there is nothing to call it on (make the batch non-empty)"
            )
        results = []
        start_state = torch.get_rng_state()
        for i in range(size):
            if randomness == "same":
                torch.set_rng_state(start_state)
            before = torch.get_rng_state()
            results.append(func(*_select(args, dims, i), **kwargs))
            if randomness == "error" and not torch.equal(before, torch.get_rng_state()):
                raise TensorError(
                    f"{call}: called random operation while in randomness error mode. Please "
                    "either use the 'same' or 'different' randomness flags on vmap or perform "
                    "the randomness operation out of vmap"
                )
        return _stack(results, out_dims, call)

    return wrapper
