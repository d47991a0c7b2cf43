"""``torch.nn.DataParallel`` and ``torch.nn.parallel.data_parallel`` on one device.

Single-process programs wrap their model as torch's examples do
(``model = nn.DataParallel(model)`` when ``torch.cuda.device_count() > 1``; dcgan's
``nn.parallel.data_parallel(self.main, input, range(ngpu))``).  Here the wrapped module
runs whole on the device its tensors are on: the values are torch's (a batch split
into per-device chunks and gathered again gives the same outputs, except for
``BatchNorm``'s per-chunk statistics), the state dict has torch's ``module.`` prefix,
and ``.module`` is the wrapped model.  The simulated time is one device's: no scatter,
replicas or gather are modelled, and asking for more than one device warns so.  Time
on several devices comes from one rank per device with ``DistributedDataParallel``
(``kernbench run --nproc-per-node N``).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

from kernbench.errors import TensorTypeError, TensorValueError, user_stacklevel
from kernbench.runtime.current import current_context
from kernbench.torch.devices import device_index
from kernbench.torch.nn.module import Module

__all__ = ["DataParallel", "data_parallel"]

_ONE_DEVICE = (
    "{what}: runs the module on one device here (values as torch's; the simulated time "
    "is one device's, without scatter, replicas or gather); for time on {count} devices "
    "run one rank per device with DistributedDataParallel (kernbench run "
    "--nproc-per-node {count})"
)


def _device_ids(what: str, device_ids: Any, output_device: Any) -> list[int]:
    """The device indices ``device_ids`` names (default: every device), each checked."""
    count = current_context().num_devices
    if device_ids is None:
        ids = list(range(count))
    else:
        if not isinstance(device_ids, Iterable) or isinstance(device_ids, str):
            raise TensorTypeError(
                f"{what}: device_ids must be a list of device indices or devices, got "
                f"{type(device_ids).__name__}"
            )
        ids = [device_index(d) for d in device_ids]
    for given in [*ids, *([] if output_device is None else [device_index(output_device)])]:
        if given is None or not 0 <= given < count:
            raise TensorValueError(
                f"{what}: invalid device id {given!r}: this machine has {count} device(s), "
                f"0 to {count - 1}"
            )
    if len(ids) > 1:
        warnings.warn(_ONE_DEVICE.format(what=what, count=len(ids)), stacklevel=user_stacklevel())
    return ids


class DataParallel(Module):
    """``DataParallel(module, device_ids=None, output_device=None, dim=0)``: calls
    ``module`` with the inputs as they are (see the module docstring)."""

    def __init__(
        self, module: Module, device_ids: Any = None, output_device: Any = None, dim: int = 0
    ) -> None:
        super().__init__()
        if not isinstance(module, Module):
            raise TensorTypeError(
                f"DataParallel: module must be an nn.Module, got {type(module).__name__}"
            )
        self.module = module
        self.device_ids = _device_ids("nn.DataParallel", device_ids, output_device)
        self.output_device = output_device if output_device is not None else (
            self.device_ids[0] if self.device_ids else None
        )  # fmt: skip
        self.dim = dim

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self.module(*inputs, **kwargs)


def data_parallel(
    module: Module,
    inputs: Any,
    device_ids: Any = None,
    output_device: Any = None,
    dim: int = 0,
    module_kwargs: dict | None = None,
) -> Any:
    """``torch.nn.parallel.data_parallel``: ``module(*inputs, **module_kwargs)`` on one
    device (see the module docstring)."""
    _device_ids("nn.parallel.data_parallel", device_ids, output_device)
    if not isinstance(inputs, tuple):
        inputs = (inputs,)
    return module(*inputs, **(module_kwargs or {}))
