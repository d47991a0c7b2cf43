"""``all_to_all`` and ``all_to_all_single``: every rank sends a block to every rank.

Each rank's send and receive blocks are regions of single-lane tensors; the
launch first checks that what rank r sends to rank j is what j expects from
r, so a mismatch names both ranks instead of hanging or corrupting data.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from kernbench.ccl import launch as ccl
from kernbench.ccl.comm import Region
from kernbench.distributed.world import ProcessGroup, Work, World
from kernbench.errors import CollectiveMismatchError, DistributedError
from kernbench.runtime.tensor import DeviceTensor
from kernbench.torch.distributed.arguments import check_count, collective_call

__all__ = ["all_to_all", "all_to_all_single"]


def _split_regions(
    t: DeviceTensor, splits: Sequence[int] | None, group_size: int, what: str, arg: str
) -> list[Region]:
    """``t`` cut along dimension 0 into one region per group member (evenly by default)."""
    lane = ccl.single_lane(t, what)
    rows = t.shape[0] if t.shape else 1
    row = t.numel // rows if rows else 0
    if splits is None:
        if rows % group_size:
            raise DistributedError(
                f"{what}: dimension 0 of {t.name!r} ({rows}) does not split evenly over "
                f"{group_size} ranks; pass {arg}"
            )
        splits = [rows // group_size] * group_size
    try:
        splits = [operator.index(s) for s in splits]
    except TypeError:
        raise DistributedError(f"{what}: {arg} must be a list of ints, got {splits!r}") from None
    if len(splits) != group_size or sum(splits) != rows or min(splits) < 0:
        raise DistributedError(
            f"{what}: {arg}={splits} must have {group_size} non-negative entries summing to "
            f"dimension 0 of {t.name!r} ({rows})"
        )
    regions, start = [], 0
    for s in splits:
        regions.append(lane.region(start * row, (start + s) * row))
        start += s
    return regions


def all_to_all_single(
    output: Any,
    input: Any,
    output_split_sizes: list[int] | None = None,
    input_split_sizes: list[int] | None = None,
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("all_to_all_single", group)
    if call is None:
        return None
    out, t = call.tensor(output), call.tensor(input)
    if out.dtype != t.dtype:
        raise DistributedError("all_to_all_single: output and input must have the same dtype")
    group_size = call.group.size()
    sends = _split_regions(t, input_split_sizes, group_size, call.what, "input_split_sizes")
    recvs = _split_regions(out, output_split_sizes, group_size, call.what, "output_split_sizes")
    return call.submit(
        {"dtype": t.dtype.name, "algorithm": algorithm},
        (sends, recvs),
        lambda ps: _launch(call.world, call.group, ps, algorithm),
        async_op,
        [output],
    )


def all_to_all(
    output_tensor_list: list[Any],
    input_tensor_list: list[Any],
    group: Any = None,
    async_op: bool = False,
    *,
    algorithm: str | None = None,
) -> Work | None:
    call = collective_call("all_to_all", group)
    if call is None:
        return None
    outs = call.tensors(output_tensor_list)
    ins = call.tensors(input_tensor_list)
    check_count(outs, call.group, call.what, "output_tensor_list")
    check_count(ins, call.group, call.what, "input_tensor_list")
    dtypes = {x.dtype.name for x in outs + ins}
    if len(dtypes) > 1:
        raise DistributedError(
            f"all_to_all: every tensor of output_tensor_list and input_tensor_list must have "
            f"the same dtype; got {sorted(dtypes)}"
        )
    sends = [ccl.single_lane(x, call.what).region() for x in ins]
    recvs = [ccl.single_lane(x, call.what).region() for x in outs]
    return call.submit(
        {"dtype": ins[0].dtype.name, "algorithm": algorithm},
        (sends, recvs),
        lambda ps: _launch(call.world, call.group, ps, algorithm),
        async_op,
        list(output_tensor_list),
    )


def _launch(
    world: World,
    group: ProcessGroup,
    payloads: list[tuple[list[Region], list[Region]]],
    algorithm: str | None = None,
) -> Any:
    """Check that every pair of ranks agrees on its block sizes, then launch the exchange."""
    group_size = len(payloads)
    for r in range(group_size):
        for j in range(group_size):
            sent, expected = payloads[r][0][j].count, payloads[j][1][r].count
            if sent != expected:
                src, dst = group.ranks[r], group.ranks[j]
                raise CollectiveMismatchError(
                    f"all_to_all: rank {src} sends {sent} elements to rank {dst}, which "
                    f"expects {expected} from it",
                    {
                        src: f"all_to_all sending {sent} elements to rank {dst}",
                        dst: f"all_to_all expecting {expected} elements from rank {src}",
                    },
                )
    return ccl.all_to_all(world.ctx, [s for s, _ in payloads], [r for _, r in payloads], algorithm)
