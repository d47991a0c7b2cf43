"""Placement layer: a data-parallel policy and a tensor shape -> the shard each PE holds.

A tensor is placed level by level — over SIPs, then over each SIP's cubes, then
over each cube's PEs — by a :class:`DPPolicy`; :func:`plan_shards` turns the policy
into a list of :class:`ShardSpec`, and :func:`scatter` / :func:`gather` move
host data into and out of those shards.  See :mod:`kernbench.placement.shard`
for how 1-D and 0-d tensors are handled.
"""

from kernbench.placement.policy import COLUMN_WISE, MODES, REPLICATE, ROW_WISE, DPPolicy, Mode
from kernbench.placement.shard import ShardSpec, plan_shards
from kernbench.placement.transfer import gather, scatter, shards_by_pe, unique_blocks

__all__ = [
    "COLUMN_WISE",
    "MODES",
    "REPLICATE",
    "ROW_WISE",
    "DPPolicy",
    "Mode",
    "ShardSpec",
    "gather",
    "plan_shards",
    "scatter",
    "shards_by_pe",
    "unique_blocks",
]
