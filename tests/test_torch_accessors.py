"""The public accessors the torch layer reads instead of other modules' private names.

``Tensor.new_empty`` (a new tensor with this tensor's dtype, device and, for
the same shape, placement), ``Tensor.get_device``/``dp``,
``DeviceTensor.context``, ``TorchDType.runtime_dtype_name``, and a
``DeviceMesh`` passed as ``group=``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import kernbench
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import DistributedError, RankError, TensorError
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, as_dtype, use_context
from kernbench.torch.dtypes import runtime_dtype

ROOT = Path(__file__).resolve().parents[1]
TINY = str(ROOT / "topologies" / "tiny.yaml")
MULTI_SIP = str(ROOT / "topologies" / "multi_sip.yaml")
PE_DEVICES = ["system.device_level=pe"]  # tiny with one device per PE: 4 devices


@pytest.fixture
def ctx():
    context = RuntimeContext(TINY, overrides=PE_DEVICES)
    with use_context(context):
        yield context


def _pes(t: torch.Tensor) -> set[str]:
    return {p.pe_name for p in t.device_tensor.placements}


def test_new_empty_keeps_dtype_device_and_same_shape_placement(ctx):
    ctx.set_device(0)
    dp = DPPolicy(pe="row_wise")
    x = torch.ones(8, 4, dtype=torch.int32, dp=dp)
    assert x.dp is dp and x.get_device() == 0
    same = x.new_empty(8, 4)
    assert same.dtype is torch.int32 and same.dp is dp and _pes(same) == _pes(x)
    other = x.new_empty((2, 3), dtype=torch.float16)
    assert tuple(other.shape) == (2, 3) and other.dtype is torch.float16
    assert other.dp is None and len(other.device_tensor.placements) == 1
    moved = torch.zeros(4).new_empty(4, device="ahbm:2")
    assert moved.get_device() == 2 and _pes(moved) == {"sip0.cube0.pe2"}
    assert torch.zeros(2).new_empty(1, requires_grad=True).requires_grad


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.zeros(3, requires_grad=True),
        lambda: torch.ones(3, requires_grad=True),
        lambda: torch.empty(3, requires_grad=True),
        lambda: torch.full((3,), 2.0, requires_grad=True),
        lambda: torch.tensor([1.0, 2.0], requires_grad=True),
        lambda: torch.zeros(3).new_zeros(2, requires_grad=True),
        lambda: torch.rand(3, requires_grad=True),
        lambda: torch.randn(5, 3, requires_grad=True),
        lambda: torch.zeros_like(torch.ones(3), requires_grad=True),
        lambda: torch.ones_like(torch.ones(3), requires_grad=True, memory_format=None),
        lambda: torch.empty_like(torch.ones(3), requires_grad=True),
        lambda: torch.full_like(torch.ones(3), 2.0, requires_grad=True),
        lambda: torch.rand_like(torch.ones(3), requires_grad=True),
        lambda: torch.randn_like(torch.ones(3), requires_grad=True),
    ],
)
def test_requires_grad_in_a_factory_sets_the_flag_as_requires_grad_does(ctx, make):
    t = make()
    assert t.requires_grad and t.grad is None


def test_only_floating_tensors_can_require_grad(ctx):
    with pytest.raises(TensorError, match="only tensors of floating point dtype"):
        torch.zeros(3, dtype=torch.int32, requires_grad=True)
    t = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(TensorError, match="only tensors of floating point dtype"):
        t.requires_grad = True
    assert not t.requires_grad_(False).requires_grad
    with pytest.raises(TensorError, match="only tensors of floating point dtype"):
        torch.randint(0, 4, (3,), requires_grad=True)
    assert not torch.randint(0, 4, (3,), requires_grad=False).requires_grad


def test_a_tensor_keeps_the_context_it_was_made_in(ctx):
    t = torch.zeros(4)
    assert t.device_tensor.context is ctx
    with use_context(RuntimeContext(TINY)):
        assert t.clone().device_tensor.context is ctx  # not the context now current


def test_torch_dtypes_name_the_runtime_dtype_they_stand_for():
    assert torch.bfloat16.runtime_dtype_name == "bfloat16"
    assert runtime_dtype(torch.bfloat16) is as_dtype("bfloat16")
    assert torch.float64.runtime_dtype_name == "float64"
    assert torch.complex64.runtime_dtype_name is None
    with pytest.raises(TensorError, match="torch.complex64 is not supported: there are no complex"):
        runtime_dtype(torch.complex64)


def _mesh_as_group(n: int) -> tuple[list[float], int]:
    dist.init_process_group()
    mesh = dist.init_device_mesh("ahbm", (2, 2), mesh_dim_names=("dp", "tp"))
    x = torch.full((n,), float(dist.get_rank() + 1))
    dist.all_reduce(x, group=mesh["tp"])  # a one-dimensional mesh is its group
    return x.tolist(), dist.get_world_size(mesh["dp"])


def test_a_one_dimensional_mesh_is_a_group():
    result = kernbench.simulate(_mesh_as_group, topology=MULTI_SIP, world_size=4, args=(4,))
    # tp groups are ranks {0, 1} and {2, 3}
    sums = [3.0, 3.0, 7.0, 7.0]
    for rank, (values, dp_size) in enumerate(result.returns):
        np.testing.assert_array_equal(values, [sums[rank]] * 4)
        assert dp_size == 2


def _whole_mesh_as_group() -> None:
    dist.init_process_group()
    mesh = dist.init_device_mesh("ahbm", (2, 2))
    dist.all_reduce(torch.ones(4), group=mesh)


def test_a_mesh_of_several_dimensions_as_group_is_a_clear_error():
    with pytest.raises(RankError, match="this mesh has several dimensions") as info:
        kernbench.simulate(_whole_mesh_as_group, topology=MULTI_SIP, world_size=4)
    assert isinstance(info.value.__cause__, DistributedError)
