"""A mixture-of-experts layer with expert parallelism, written as a PyTorch program.

Every rank holds ``--tokens`` tokens of width ``--d-model`` and the same router
``W_r`` (``(d_model, experts)``); rank r owns experts ``r·E/n .. (r+1)·E/n - 1``,
each a two-layer MLP ``gelu(h · W1[e]) · W2[e]``.  The layer is

    p          = softmax(x · W_r)                  router probabilities
    w, e       = topk(p, k); w /= sum(w)           each token's k experts and weights
    order      = argsort(e.flatten(), stable)      token copies grouped by expert
    counts     = bincount(e.flatten(), E)          copies per expert
    send       = x[order // k]                     the copies, by advanced indexing
    recv       = all_to_all_single(send, splits from the counts)
    y          = each local expert's MLP over its rows of ``recv``
    back       = all_to_all_single(y, the splits reversed)
    out        = zeros.index_add_(0, order // k, back · w.flatten()[order])

with the per-expert counts exchanged first (``all_to_all_single`` of an int64
tensor, read with ``.tolist()`` for the split sizes, as real MoE code does).
The result is checked against NumPy's dense layer on every rank (an
``AssertionError`` on a mismatch).  Timing-only runs carry no values, so there
the routing is taken as balanced (``tokens·k/E`` copies per expert) and
nothing is checked.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/moe_layer.py --topology topologies/ring8.yaml
    kernbench run benches/moe_layer.py --topology topologies/ring8.yaml -- --tokens 256 --top-k 1

Rank 0 prints the layer's time (µs) and its two all-to-alls' and returns one
row (``--csv`` / ``--report`` record it).
"""

from __future__ import annotations

import argparse

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn.functional as F
from kernbench.runtime import current_context


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Expert-parallel mixture-of-experts layer")
    parser.add_argument("--tokens", type=int, default=64, help="tokens per rank (64)")
    parser.add_argument("--d-model", type=int, default=32, help="model width (32)")
    parser.add_argument("--ffn", type=int, default=64, help="expert hidden width (64)")
    parser.add_argument("--experts-per-rank", type=int, default=2, help="(2)")
    parser.add_argument("--top-k", type=int, default=2, help="experts per token (2)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_data(args, world_size):
    """Every rank's tokens (rank r's are ``x[r]``), the router and the experts' weights."""
    rng = np.random.default_rng(args.seed)
    experts, d = world_size * args.experts_per_rank, args.d_model
    x = rng.standard_normal((world_size, args.tokens, d)).astype(np.float32)
    w_r = rng.standard_normal((d, experts)).astype(np.float32)
    w1 = (rng.standard_normal((experts, d, args.ffn)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((experts, args.ffn, d)) / np.sqrt(args.ffn)).astype(np.float32)
    return x, w_r, w1, w2


def reference(x, w_r, w1, w2, k):
    """The dense layer in float64: every token through its k experts, weighted."""
    x = x.astype(np.float64)
    logits = x @ w_r
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    top = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, top, -1)
    w /= w.sum(-1, keepdims=True)
    out = np.zeros_like(x)
    erf = np.vectorize(__import__("math").erf)
    for j in range(k):
        e = top[:, j]
        h = np.einsum("td,tdf->tf", x, w1[e])
        h = 0.5 * h * (1 + erf(h / np.sqrt(2)))
        out += w[:, j : j + 1] * np.einsum("tf,tfd->td", h, w2[e])
    return out


def timed(fn):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    result = fn()
    end.record()
    end.synchronize()
    return result, start.elapsed_time(end)


def moe_layer(x, w_r, w1, w2, args, world_size):
    """This rank's tokens through the layer; the output and the all-to-alls' milliseconds."""
    k, local = args.top_k, args.experts_per_rank
    experts = world_size * local
    probs = torch.softmax(x @ w_r, dim=-1)
    weights, chosen = torch.topk(probs, k, dim=-1)
    weights = weights / weights.sum(dim=-1, keepdim=True)
    flat = chosen.flatten()
    order = torch.argsort(flat, stable=True)
    token = order // k
    send = x[token]
    timing_only = current_context().timing_only
    even = x.shape[0] * k // experts  # timing-only: no values to count, routing balanced
    if timing_only:
        counts = torch.full((experts,), even, dtype=torch.int64, device=x.device)
    else:
        counts = torch.bincount(flat, minlength=experts)  # read to the host, as torch's
    # per-expert counts to their owners: row r of recv_counts is what rank r sends here
    recv_counts = torch.empty_like(counts)
    (_, ms_counts) = timed(lambda: dist.all_to_all_single(recv_counts, counts))
    if timing_only:
        mine, per_expert = [[even] * local] * world_size, [[even] * local] * world_size
    else:
        mine = counts.view(world_size, local).tolist()
        per_expert = recv_counts.view(world_size, local).tolist()
    sent, received = [sum(row) for row in mine], [sum(row) for row in per_expert]
    recv = torch.empty(sum(received), x.shape[1], device=x.device)
    (_, ms_there) = timed(
        lambda: dist.all_to_all_single(
            recv, send, output_split_sizes=received, input_split_sizes=sent
        )
    )
    # each source rank's rows arrive grouped by expert (they were sorted by expert id)
    y = torch.empty(recv.shape[0], w2.shape[-1], device=x.device)
    start = 0
    for source in range(world_size):
        for e in range(local):
            n = per_expert[source][e]
            if n:
                h = F.gelu(recv[start : start + n] @ w1[e])
                y[start : start + n] = h @ w2[e]
            start += n
    back = torch.empty_like(send)
    (_, ms_back) = timed(
        lambda: dist.all_to_all_single(back, y, output_split_sizes=sent, input_split_sizes=received)
    )
    scale = weights.flatten()[order].unsqueeze(1)
    out = torch.zeros_like(x).index_add_(0, token, back * scale)
    return out, ms_counts + ms_there + ms_back


def main():
    args = parse_args()
    dist.init_process_group("nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    if args.top_k > world_size * args.experts_per_rank:
        raise ValueError("--top-k must not exceed the number of experts")
    x_all, w_r, w1, w2 = make_data(args, world_size)
    x = torch.from_numpy(x_all[rank]).cuda()
    lo, hi = rank * args.experts_per_rank, (rank + 1) * args.experts_per_rank
    params = (torch.from_numpy(w_r).cuda(), torch.from_numpy(w1[lo:hi]).cuda(),
              torch.from_numpy(w2[lo:hi]).cuda())  # fmt: skip
    moe_layer(x, *params, args, world_size)  # warm-up
    dist.barrier()
    (out, comm_ms), layer_ms = timed(lambda: moe_layer(x, *params, args, world_size))
    checked = "n/a"
    if not current_context().timing_only:
        expected = reference(x_all[rank], w_r, w1, w2, args.top_k)
        np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
        checked = True
    row = {
        "world_size": world_size,
        "tokens": args.tokens,
        "d_model": args.d_model,
        "ffn": args.ffn,
        "experts": world_size * args.experts_per_rank,
        "top_k": args.top_k,
        "layer_us": layer_ms * 1e3,
        "all_to_all_us": comm_ms * 1e3,
        "checked": checked,
    }
    dist.barrier()
    if rank != 0:
        return None
    print(
        f"MoE layer, {world_size} ranks: {args.tokens} tokens a rank, d_model {args.d_model}, "
        f"{row['experts']} experts of ffn {args.ffn}, top-{args.top_k}"
    )
    print(
        f"  layer {row['layer_us']:>10.3f} us   all-to-all {row['all_to_all_us']:>10.3f} us"
        f"   checked {checked}"
    )
    return [row]


if __name__ == "__main__":
    main()
