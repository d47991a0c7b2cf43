"""A pre-norm causal self-attention block, sharded over the ranks.

Every rank holds the same input ``x`` of shape ``(batch, seq, d_model)`` and
the same weights: ``W_qkv`` (``(3·d_model, d_model)``, W_q, W_k and W_v
stacked), ``W_o`` and the layer norm's ``gamma`` and ``beta``.  The block
computes

    h       = LayerNorm(x)
    q, k, v = h · W_qkvᵀ split in three, each split into heads
    a       = softmax(q · kᵀ / sqrt(d_head), causally masked) · v
    out     = x + a · W_oᵀ

sharded in one of two ways (``--mode``):

* ``heads`` -- tensor parallel (Megatron-LM): rank r owns ``heads / n``
  heads, i.e. those rows of each of W_q, W_k, W_v (one ``F.linear``) and
  those columns of ``W_o``; the partial output projections are summed with
  ``dist.all_reduce``.  The layer norm is ``F.layer_norm``.
* ``sequence`` -- sequence parallel: rank r owns ``seq / n`` positions of
  every sequence; keys and values of the whole sequence are rebuilt with
  ``dist.all_gather_into_tensor`` (ranks stacked on a new first dim, moved
  in place with ``movedim``), the causal mask is offset by the rank's first
  position, and the output rows are gathered with ``dist.all_gather`` and
  ``torch.cat``.  The layer norm is written out (``mean``,
  ``var(unbiased=False)``, ``rsqrt``).

The attention itself (``--kernel``) is written out -- scores with
``torch.matmul(q, k.transpose(-2, -1))`` (``manual``) or
``torch.einsum("bhqd,bhkd->bhqk", q, k)`` (``einsum``), scaled, a mask from
``torch.triu(torch.ones(..., dtype=torch.bool), diagonal=...)`` applied with
``masked_fill(mask, float("-inf"))``, ``torch.softmax`` over the last dim, and
``@`` (or ``einsum``) with the values -- or is
``F.scaled_dot_product_attention`` with the same mask (``sdpa``).  The result is checked
against NumPy's unsharded block on every rank (an ``AssertionError`` on a
mismatch), except in timing-only mode.

Run from the repository root (flags after ``--`` go to the script)::

    kernbench run benches/attention_block.py --topology topologies/ring8.yaml
    kernbench run benches/attention_block.py --topology topologies/ring8.yaml --timing-only \\
        -- --seq 256 --d-model 256 --heads 8 --mode sequence --kernel sdpa

``--heads`` and ``--seq`` must divide over the ranks.  Rank 0 prints, per
mode, the time (µs) of the block and of its communication, and returns one
row per mode (``--csv`` / ``--report`` record them).
"""

from __future__ import annotations

import argparse
import math

import numpy as np

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn.functional as F
from kernbench.runtime import current_context

MODES = ("heads", "sequence")
KERNELS = ("manual", "einsum", "sdpa")
EPS = 1e-5


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Sharded causal self-attention block")
    parser.add_argument("--batch", type=int, default=2, help="sequences (2)")
    parser.add_argument("--seq", type=int, default=64, help="sequence length (64)")
    parser.add_argument("--d-model", type=int, default=64, help="model width (64)")
    parser.add_argument("--heads", type=int, default=8, help="attention heads (8)")
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both")
    parser.add_argument("--kernel", choices=KERNELS, default="manual",
                        help="attention written out with matmul or einsum, or "
                        "F.scaled_dot_product_attention (manual)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def make_data(args):
    rng = np.random.default_rng(args.seed)
    d = args.d_model
    x = rng.standard_normal((args.batch, args.seq, d)).astype(np.float32)
    w_qkv = (rng.standard_normal((3 * d, d)) / np.sqrt(d)).astype(np.float32)
    w_o = (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32)
    gamma = (1.0 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    beta = (0.1 * rng.standard_normal(d)).astype(np.float32)
    return x, w_qkv, w_o, gamma, beta


def reference(x, w_qkv, w_o, gamma, beta, heads):
    x = x.astype(np.float64)
    batch, seq, d = x.shape
    dh = d // heads
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + EPS) * gamma + beta
    q, k, v = np.split(h @ w_qkv.astype(np.float64).T, 3, axis=-1)
    q, k, v = (t.reshape(batch, seq, heads, dh).transpose(0, 2, 1, 3) for t in (q, k, v))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh)
    scores = np.where(np.triu(np.ones((seq, seq), dtype=bool), 1), -np.inf, scores)
    scores = scores - scores.max(-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(-1, keepdims=True)
    a = (p @ v).transpose(0, 2, 1, 3).reshape(batch, seq, d)
    return x + a @ w_o.astype(np.float64).T


def attention(q, k, v, hidden, kernel):
    """Attention of ``(batch, heads, rows, d_head)`` queries; ``hidden`` is True where a
    query may not see a key (a bool ``(rows, keys)`` mask)."""
    if kernel == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, attn_mask=~hidden)
    scale = 1.0 / math.sqrt(q.size(-1))
    if kernel == "einsum":
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k) * scale
    else:
        scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(hidden, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if kernel == "einsum":
        return torch.einsum("bhqk,bhkd->bhqd", probs, v)
    return probs @ v


def split_heads(t, heads):
    """``(batch, rows, heads * d_head)`` -> ``(batch, heads, rows, d_head)``."""
    return t.unflatten(-1, (heads, -1)).transpose(1, 2)


def merge_heads(t):
    batch, heads, rows, dh = t.shape
    return t.transpose(1, 2).contiguous().view(batch, rows, heads * dh)


def manual_layer_norm(x, weight, bias, eps=EPS):
    mean = x.mean(dim=-1, keepdim=True)
    var = x.var(dim=-1, keepdim=True, unbiased=False)
    return (x - mean) * torch.rsqrt(var + eps) * weight + bias


def timed_comm(fn):
    """``fn()`` and the milliseconds it took."""
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    result = fn()
    end.record()
    end.synchronize()
    return result, start.elapsed_time(end)


def head_parallel(x, params, args, rank, world_size):
    """Rank ``rank``'s heads (its rows of each of W_q, W_k, W_v and its columns of W_o);
    the output projection's partial sums all-reduced."""
    w_qkv, w_o, gamma, beta = params
    d = args.d_model
    local_heads = args.heads // world_size
    width = local_heads * (d // args.heads)
    mine = slice(rank * width, (rank + 1) * width)
    # this rank's rows of W_q, W_k and W_v, stacked as one (3 * width, d) weight
    w_local = torch.cat([w[mine] for w in w_qkv.chunk(3, dim=0)], dim=0)
    h = F.layer_norm(x, (d,), weight=gamma, bias=beta, eps=EPS)
    q, k, v = F.linear(h, w_local).split(width, dim=-1)
    q, k, v = (split_heads(t, local_heads) for t in (q, k, v))
    hidden = torch.triu(torch.ones(args.seq, args.seq, dtype=torch.bool), diagonal=1)
    a = merge_heads(attention(q, k, v, hidden, args.kernel))
    out = F.linear(a, w_o[:, mine])
    _, comm_ms = timed_comm(lambda: dist.all_reduce(out, op=dist.ReduceOp.SUM))
    return x + out, comm_ms


def sequence_parallel(x, params, args, rank, world_size):
    """Rank ``rank``'s rows of every sequence; keys and values all-gathered."""
    w_qkv, w_o, gamma, beta = params
    rows = args.seq // world_size
    first = rank * rows
    x_local = x[:, first : first + rows]
    h = manual_layer_norm(x_local, gamma, beta)
    q, k_local, v_local = (h @ w.T for w in w_qkv.chunk(3, dim=0))

    def gather_rows(t):
        # all_gather_into_tensor stacks the ranks' (batch, rows, d) along a new first dim
        stacked = torch.empty(world_size, *t.shape, dtype=t.dtype, device=t.device)
        dist.all_gather_into_tensor(stacked, t.contiguous())
        return stacked.movedim(0, 1).reshape(t.shape[0], world_size * rows, t.shape[-1])

    (k_full, v_full), comm_ms = timed_comm(lambda: (gather_rows(k_local), gather_rows(v_local)))
    q, k, v = (split_heads(t, args.heads) for t in (q, k_full, v_full))
    # row i of this shard is position first + i: it may see keys 0 .. first + i
    hidden = torch.ones(rows, args.seq, dtype=torch.bool).triu(diagonal=first + 1)
    a = merge_heads(attention(q, k, v, hidden, args.kernel))
    out_local = x_local + a @ w_o.T
    pieces = [torch.empty_like(out_local) for _ in range(world_size)]
    _, more_ms = timed_comm(lambda: dist.all_gather(pieces, out_local))
    return torch.cat(pieces, dim=1), comm_ms + more_ms


def main():
    args = parse_args()
    dist.init_process_group("nccl")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(rank)
    if args.heads % world_size or args.seq % world_size or args.d_model % args.heads:
        raise ValueError("--heads and --seq must divide over the ranks, --d-model over --heads")
    data = make_data(args)
    x = torch.tensor(data[0], device="cuda")
    params = tuple(torch.from_numpy(value).cuda() for value in data[1:])
    expected = None
    if not current_context().timing_only:
        expected = reference(*data, args.heads)

    modes = MODES if args.mode == "both" else (args.mode,)
    rows = []
    for mode in modes:
        block = head_parallel if mode == "heads" else sequence_parallel
        block(x, params, args, rank, world_size)  # warm-up
        dist.barrier()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        out, comm_ms = block(x, params, args, rank, world_size)
        end.record()
        torch.cuda.synchronize()
        checked = "n/a"
        if expected is not None:
            np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-4, atol=1e-4)
            checked = True
        rows.append(
            {
                "mode": mode,
                "kernel": args.kernel,
                "world_size": world_size,
                "batch": args.batch,
                "seq": args.seq,
                "d_model": args.d_model,
                "heads": args.heads,
                "block_us": start.elapsed_time(end) * 1e3,
                "comm_us": comm_ms * 1e3,
                "checked": checked,
            }
        )
    dist.barrier()
    if rank != 0:
        return None
    print(
        f"causal self-attention ({args.kernel}), {world_size} ranks: batch {args.batch}, "
        f"seq {args.seq}, d_model {args.d_model}, {args.heads} heads"
    )
    for r in rows:
        print(
            f"  {r['mode']:<9} block {r['block_us']:>10.3f} us   comm {r['comm_us']:>10.3f} us"
            f"   checked {r['checked']}"
        )
    return rows
