"""PyTorch's "Writing Distributed Applications" tutorial, on the simulated machine.

The tutorial's programs with only the imports changed: ranks are the
topology's devices (SIPs of ``topologies/multi_sip.yaml``, or cubes with
``--set system.device_level=cube``), messages travel over the simulated IPCQ
and fabric, and every step costs simulated time.  Four demos run one after
another on every rank:

* ``blocking p2p`` -- rank 0 adds one to a zero tensor and ``send``\\ s it to
  every other rank, which ``recv``\\ s it;
* ``non-blocking p2p`` -- the same with ``isend`` / ``irecv`` and ``wait()``;
* ``all_reduce on a group`` -- ``new_group([0, 1])`` sums ``torch.ones(1)``
  over its members; other ranks get ``GroupMember.NON_GROUP_MEMBER`` and skip;
* ``ring all-reduce`` -- the tutorial's hand-written ``allreduce(send, recv)``
  built from ``isend`` and ``recv`` only, checked against ``dist.all_reduce``.

Each demo checks its values (an ``AssertionError`` on a mismatch) except in
timing-only mode, where tensors carry sizes but no values.

Run it with the runner, which builds the machine and then runs the
``__main__`` block below on it, as ``python`` would (``--world-size`` reaches
the block as ``$WORLD_SIZE``; by default up to 4 ranks, one per device)::

    kernbench run benches/dist_tutorial.py --topology topologies/multi_sip.yaml
    kernbench run benches/dist_tutorial.py --topology topologies/default.yaml \\
        --set system.device_level=cube --world-size 8 --report out.json --trace trace.json

or directly, which starts the ranks with ``torch.multiprocessing.Process`` in
the same way (``$KERNBENCH_TOPOLOGY`` picks the machine, a bundled name or a
file; ``$WORLD_SIZE`` the number of ranks)::

    KERNBENCH_TOPOLOGY=multi_sip python benches/dist_tutorial.py

``run(rank, world_size)`` is the per-rank program either way; a caller of
``kernbench.simulate(run, rank_args=True, ...)`` may use it alone.

Every rank prints what it holds after each demo, as the tutorial does, and
the direct run ends with the simulated time of the whole program.
"""

from __future__ import annotations

import os
import sys

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.multiprocessing as mp
from kernbench.runtime import current_context

RING_ELEMENTS = 256


def _values() -> bool:
    """Whether tensors hold values (not in timing-only mode)."""
    return not current_context().timing_only


def _show(rank: int, what: str, tensor: torch.Tensor) -> None:
    shown = tensor.numpy()[0] if _values() else "(timing-only)"
    print(f"Rank {rank} has data {shown} after {what}")


def blocking_p2p(rank: int, size: int) -> float | None:
    """Rank 0 sends ``zeros(1) + 1`` to every other rank with blocking send/recv."""
    tensor = torch.zeros(1)
    if rank == 0:
        tensor += 1
        for dst in range(1, size):
            dist.send(tensor=tensor, dst=dst)
    else:
        dist.recv(tensor=tensor, src=0)
    _show(rank, "blocking p2p", tensor)
    if _values():
        assert tensor.item() == 1.0, tensor
        return tensor.item()
    return None


def nonblocking_p2p(rank: int, size: int) -> float | None:
    """The same with ``isend`` / ``irecv``: the calls return at once; ``wait()`` completes."""
    tensor = torch.zeros(1)
    requests = []
    if rank == 0:
        tensor += 1
        requests = [dist.isend(tensor=tensor, dst=dst) for dst in range(1, size)]
    else:
        requests = [dist.irecv(tensor=tensor, src=0)]
    for req in requests:
        req.wait()
    _show(rank, "non-blocking p2p", tensor)
    if _values():
        assert tensor.item() == 1.0, tensor
        return tensor.item()
    return None


def group_all_reduce(rank: int, size: int) -> float | None:
    """``all_reduce`` of ``ones(1)`` over ``new_group([0, 1])``; others are not members."""
    members = [0, 1] if size > 1 else [0]
    group = dist.new_group(members)
    tensor = torch.ones(1)
    if group is dist.GroupMember.NON_GROUP_MEMBER:
        assert dist.get_rank(group) == -1
        return None
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    _show(rank, "all_reduce on a group", tensor)
    if _values():
        assert tensor.item() == float(len(members)), tensor
        return tensor.item()
    return None


def allreduce(send: torch.Tensor, recv: torch.Tensor) -> None:
    """The tutorial's ring all-reduce: ``recv`` = the sum over ranks of ``send``."""
    rank = dist.get_rank()
    size = dist.get_world_size()
    send_buff = send.clone()
    recv_buff = send.clone()
    accum = send.clone()

    left = ((rank - 1) + size) % size
    right = (rank + 1) % size

    for i in range(size - 1):
        if i % 2 == 0:
            # Send send_buff
            send_req = dist.isend(send_buff, right)
            dist.recv(recv_buff, left)
            accum[:] += recv_buff[:]
        else:
            # Send recv_buff
            send_req = dist.isend(recv_buff, right)
            dist.recv(send_buff, left)
            accum[:] += send_buff[:]
        send_req.wait()
    recv[:] = accum[:]


def ring_all_reduce(rank: int, size: int) -> float | None:
    """The hand-written ring against the library's ``all_reduce``."""
    send = torch.full((RING_ELEMENTS,), float(rank + 1))
    recv = torch.zeros(RING_ELEMENTS)
    allreduce(send, recv)
    reference = send.clone()
    dist.all_reduce(reference)
    _show(rank, "ring all-reduce", recv)
    if _values():
        expected = size * (size + 1) / 2
        assert (recv.numpy() == expected).all(), recv
        assert (reference.numpy() == expected).all(), reference
        return float(recv.numpy()[0])
    return None


def run(rank: int, size: int) -> dict[str, float | None]:
    """Every demo on this rank (``kernbench run`` calls this once per rank)."""
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=rank, world_size=size)
    torch.cuda.set_device(rank)
    results = {}
    if size > 1:
        results["blocking_p2p"] = blocking_p2p(rank, size)
        results["nonblocking_p2p"] = nonblocking_p2p(rank, size)
    results["group_all_reduce"] = group_all_reduce(rank, size)
    results["ring_all_reduce"] = ring_all_reduce(rank, size)
    dist.barrier()
    return results


def init_process(rank, size, fn, backend="gloo"):
    """Initialize the distributed environment."""
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group(backend, rank=rank, world_size=size)
    fn(rank, size)


if __name__ == "__main__":
    world_size = int(os.environ.get("WORLD_SIZE", "0")) or min(4, torch.cuda.device_count())
    processes = []
    if "google.colab" in sys.modules:
        print("Running in Google Colab")
        mp.get_context("spawn")
        world_size = 1
    else:
        mp.set_start_method("spawn")
    for rank in range(world_size):
        p = mp.Process(target=init_process, args=(rank, world_size, run))
        p.start()
        processes.append(p)

    for p in processes:
        p.join()
    print(f"simulated time: {current_context().now / 1e6:.3f} us on {world_size} ranks")
