"""``parallelize_module(module, device_mesh, parallelize_plan)``: torch's entry point to
tensor parallelism, over plain local shards (ADR 0023)."""

from __future__ import annotations

import warnings
from fnmatch import fnmatch
from typing import Any

from kernbench.errors import DistributedError
from kernbench.torch.distributed.mesh import DeviceMesh
from kernbench.torch.distributed.tensor.parallel.style import ParallelStyle
from kernbench.torch.nn.module import Module

__all__ = ["parallelize_module"]


def _check_mesh(device_mesh: Any) -> None:
    if device_mesh is None:
        raise DistributedError(
            "parallelize_module: pass device_mesh (there is no current-mesh context here): "
            'init_device_mesh("cuda", (world_size,))'
        )
    if not isinstance(device_mesh, DeviceMesh):
        raise DistributedError(
            f"parallelize_module: device_mesh must be a DeviceMesh, got "
            f"{type(device_mesh).__name__}"
        )
    if device_mesh.ndim > 1:
        raise DistributedError(
            f"Tensor Parallel only accepts a 1D DeviceMesh, but found {device_mesh.ndim}D! "
            'If you have a 2-D or N-D device_mesh, consider passing in device_mesh["tp"]'
        )


def parallelize_module(
    module: Module,
    device_mesh: DeviceMesh | None = None,
    parallelize_plan: ParallelStyle | dict[str, ParallelStyle] | None = None,
    *,
    src_data_rank: int | None = 0,
) -> Module:
    """Apply ``parallelize_plan`` to ``module`` in place and return it, as torch's.

    A plan is one style (for ``module`` itself) or a dict from submodule paths to styles;
    each part of a path is matched against child names with ``fnmatch``, so
    ``"layers.*.attention.wq"`` names that layer of every block.  The parameters become
    this rank's shards, taken from the mesh rank ``src_data_rank`` (one ``scatter`` or
    ``broadcast`` each), or from the rank's own values when it is ``None``.
    """
    _check_mesh(device_mesh)
    if parallelize_plan is None:
        warnings.warn(
            "No parallelize_plan is provided and auto-parallel is not supported at the moment, "
            "so this parallelize_module call will do nothing.",
            stacklevel=2,
        )
        return module
    if isinstance(parallelize_plan, ParallelStyle):
        parallelize_plan.src_data_rank = src_data_rank
        return parallelize_plan._apply(module, device_mesh)  # noqa: SLF001 - torch's contract
    if not isinstance(parallelize_plan, dict):
        raise DistributedError(
            "Expect Union[ParallelStyle, Dict[str, ParallelStyle]] for parallelize_plan, "
            f"{type(parallelize_plan).__name__} found!"
        )
    for path, style in parallelize_plan.items():
        if not isinstance(path, str) or not path:
            raise DistributedError(
                f"parallelize_plan: expect module path to be a non-empty string, got {path!r}"
            )
        atom, _, rest = path.partition(".")
        for name, child in list(module.named_children()):
            if not fnmatch(name, atom):
                continue
            if rest:
                parallelize_module(child, device_mesh, {rest: style}, src_data_rank=src_data_rank)
            else:
                parallelize_module(child, device_mesh, style, src_data_rank=src_data_rank)
    return module
