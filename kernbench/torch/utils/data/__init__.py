"""``torch.utils.data`` for KernBench: datasets, samplers and ``DataLoader``, as torch's.

Loading is host work, as on a GPU machine: samplers draw their orders on the host
from the rank's generator (``torch.manual_seed`` repeats them; the orders are not
the ones PyTorch would draw) and cost no simulated time.  What a batch costs is what
building it does: the default collate stacks a dataset's tensors with
``torch.stack`` (a device copy) and copies numbers and NumPy arrays in with
``torch.tensor`` (a host-to-device transfer).  ``num_workers`` > 0 loads in the
rank's own process, in the same order (map-style datasets give the same batches).
"""

from __future__ import annotations

from kernbench.torch.utils.data.collate import default_collate, default_convert
from kernbench.torch.utils.data.dataloader import DataLoader, get_worker_info
from kernbench.torch.utils.data.datasets import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)
from kernbench.torch.utils.data.distributed import DistributedSampler
from kernbench.torch.utils.data.samplers import (
    BatchSampler,
    RandomSampler,
    Sampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "BatchSampler",
    "ChainDataset",
    "ConcatDataset",
    "DataLoader",
    "Dataset",
    "DistributedSampler",
    "IterableDataset",
    "RandomSampler",
    "Sampler",
    "SequentialSampler",
    "StackDataset",
    "Subset",
    "SubsetRandomSampler",
    "TensorDataset",
    "WeightedRandomSampler",
    "default_collate",
    "default_convert",
    "get_worker_info",
    "random_split",
]
