"""pytorch/examples' ``distributed/tensor_parallelism/tensor_parallel_example.py``, written
for KernBench.

The imports differ, the helpers of its ``log_utils.py`` (``get_logger``, ``rank_log``,
``verify_min_gpu_count``) are inlined, and the module body runs once per rank as torchrun runs it
(``kernbench run --nproc-per-node 2``).  The lines that keep the start, the inputs and
the outputs, and the last one, print one ``RESULT {json}`` line per rank for
``tests/test_tensor_parallel.py`` (not in the original).

As in the original, the optimizer is made before ``parallelize_module``, which registers
new (sharded) parameters: the optimizer holds the replaced ones, which get no gradient,
so ``optimizer.step()`` changes nothing, and without ``zero_grad`` the shards' gradients
add up over the ten iterations.  That is what torch does with this script too.
"""

import json
import logging
import os
import sys

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.torch.distributed._tensor.device_mesh import init_device_mesh
from kernbench.torch.distributed.tensor.parallel import (
    ColwiseParallel,
    RowwiseParallel,
    parallelize_module,
)

logging.basicConfig(
    format="%(asctime)s %(message)s", datefmt="%m/%d/%Y %I:%M:%S %p", level=logging.INFO
)


def get_logger():
    return logging.getLogger(__name__)


def rank_log(_rank, logger, msg):
    """helper function to log only on global rank 0"""
    if _rank == 0:
        logger.info(f" {msg}")


def verify_min_gpu_count(min_gpus: int = 2) -> bool:
    """verification that we have at least 2 gpus to run dist examples"""
    has_cuda = torch.cuda.is_available()
    gpu_count = torch.cuda.device_count()
    return has_cuda and gpu_count >= min_gpus


class ToyModel(nn.Module):
    """MLP based model"""

    def __init__(self):
        super(ToyModel, self).__init__()  # noqa: UP008 - as the original writes it
        self.in_proj = nn.Linear(10, 32)
        self.relu = nn.ReLU()
        self.out_proj = nn.Linear(32, 5)

    def forward(self, x):
        return self.out_proj(self.relu(self.in_proj(x)))


def report(rank, **values):
    print("RESULT " + json.dumps({"rank": rank, **values}))


# ---- GPU check ------------
_min_gpu_count = 2

if not verify_min_gpu_count(min_gpus=_min_gpu_count):
    print(f"Unable to locate sufficient {_min_gpu_count} gpus to run this example. Exiting.")
    sys.exit()
# ---------------------------

logger = get_logger()

# create a device mesh based on the given world_size.
_world_size = int(os.environ["WORLD_SIZE"])

device_mesh = init_device_mesh(device_type="cuda", mesh_shape=(_world_size,))
_rank = device_mesh.get_rank()

print(f"Starting PyTorch TP example on rank {_rank}.")
assert _world_size % 2 == 0, f"TP examples require even number of GPUs, but got {_world_size} gpus"

rank_log(_rank, logger, f"Device Mesh created: {device_mesh=}")

# create model and move it to GPU - init"cuda"_mesh has already mapped GPU ids.
tp_model = ToyModel().to("cuda")
start = {k: v.detach().cpu().numpy().tolist() for k, v in tp_model.state_dict().items()}

# Create an optimizer for the parallelized module.
lr = 0.25
optimizer = torch.optim.AdamW(tp_model.parameters(), lr=lr, foreach=True)

# Custom parallelization plan for the model
tp_model = parallelize_module(
    module=tp_model,
    device_mesh=device_mesh,
    parallelize_plan={
        "in_proj": ColwiseParallel(),
        "out_proj": RowwiseParallel(),
    },
)
# Perform a num of iterations of forward/backward
# and optimizations for the sharded module.
num_iters = 10
rank_log(_rank, logger, "Tensor Parallel training starting...")

inputs, outputs = [], []
for i in range(num_iters):
    # For TP, input needs to be same across all TP ranks.
    # Setting the random seed is to mimic the behavior of dataloader.
    torch.manual_seed(i)
    inp = torch.rand(20, 10, device="cuda")
    output = tp_model(inp)
    output.sum().backward()
    optimizer.step()
    rank_log(_rank, logger, f"Tensor Parallel iter {i} completed")
    inputs.append(inp.cpu().numpy().tolist())
    outputs.append(output.detach().cpu().numpy().tolist())

rank_log(_rank, logger, "Tensor Parallel training completed!")
report(
    _rank,
    start=start,
    inputs=inputs,
    outputs=outputs,
    shapes={n: list(p.shape) for n, p in tp_model.named_parameters()},
    local={n: p.detach().cpu().numpy().tolist() for n, p in tp_model.named_parameters()},
    grads={n: p.grad.cpu().numpy().tolist() for n, p in tp_model.named_parameters()},
)
