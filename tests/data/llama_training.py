"""A Llama-style training script written the way minimal reference implementations write one
(imports changed only, sizes tiny): RMSNorm, rotary position embeddings in the real-valued
rotate_half form with cached cos/sin, grouped-query attention through
F.scaled_dot_product_attention, a SwiGLU MLP whose gating is a custom autograd.Function (as a
hand-written fused kernel would be wrapped), activation checkpointing of every layer
(torch.utils.checkpoint, use_reentrant=False), DDP, bfloat16 autocast, AdamW with a
warm-up-then-cosine LambdaLR, clip_grad_norm_, the loss all-reduced for logging, and a
checkpoint saved by rank 0 behind a barrier.  ACT_CKPT=0 in the environment turns the
activation checkpointing off.

Run with torchrun-style ranks: kernbench run llama_training.py --nproc-per-node 2
"""

import math
import os
from dataclasses import dataclass

from kernbench.torch.nn.parallel import DistributedDataParallel as DDP

import kernbench.torch as torch
import kernbench.torch.distributed as dist
import kernbench.torch.nn as nn
import kernbench.torch.nn.functional as F
from kernbench.torch.utils.checkpoint import checkpoint


@dataclass
class ModelArgs:
    dim: int = 32
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    vocab_size: int = 64
    multiple_of: int = 16
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_seq_len: int = 16
    activation_checkpointing: bool = os.environ.get("ACT_CKPT", "1") == "1"


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


def precompute_rope(head_dim, end, theta):
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2)[: (head_dim // 2)].float() / head_dim))
    t = torch.arange(end, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(0).unsqueeze(2), sin.unsqueeze(0).unsqueeze(2)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


class SiLUMul(torch.autograd.Function):
    """silu(a) * b with a hand-written backward (a fused kernel's wrapper)."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx, grad_out):
        a, b = ctx.saved_tensors
        sig = torch.sigmoid(a)
        silu = a * sig
        grad_a = grad_out * b * sig * (1 + a * (1 - sig))
        grad_b = grad_out * silu
        return grad_a, grad_b


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_heads, self.n_kv_heads = args.n_heads, args.n_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x, cos, sin):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.n_heads, self.head_dim)
        xk = self.wk(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xv = self.wv(x).view(bsz, seqlen, self.n_kv_heads, self.head_dim)
        xq, xk = apply_rotary_emb(xq, xk, cos, sin)
        xq, xk, xv = (t.transpose(1, 2) for t in (xq, xk, xv))
        out = F.scaled_dot_product_attention(xq, xk, xv, is_causal=True, enable_gqa=True)
        return self.wo(out.transpose(1, 2).contiguous().view(bsz, seqlen, -1))


class FeedForward(nn.Module):
    def __init__(self, dim: int, hidden_dim: int, multiple_of: int):
        super().__init__()
        hidden_dim = int(2 * hidden_dim / 3)
        hidden_dim = multiple_of * ((hidden_dim + multiple_of - 1) // multiple_of)
        self.w1 = nn.Linear(dim, hidden_dim, bias=False)
        self.w2 = nn.Linear(hidden_dim, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden_dim, bias=False)

    def forward(self, x):
        return self.w2(SiLUMul.apply(self.w1(x), self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args.dim, 4 * args.dim, args.multiple_of)
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, cos, sin):
        h = x + self.attention(self.attention_norm(x), cos, sin)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        cos, sin = precompute_rope(args.dim // args.n_heads, args.max_seq_len, args.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.apply(self._init_weights)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, tokens, targets):
        seqlen = tokens.shape[1]
        h = self.tok_embeddings(tokens)
        cos, sin = self.cos[:seqlen], self.sin[:seqlen]
        for layer in self.layers:
            if self.args.activation_checkpointing and self.training:
                h = checkpoint(layer, h, cos, sin, use_reentrant=False)
            else:
                h = layer(h, cos, sin)
        logits = self.output(self.norm(h)).float()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main():
    dist.init_process_group(backend="nccl")
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    torch.manual_seed(0)
    args = ModelArgs()
    model = Transformer(args).cuda()
    model = DDP(model, device_ids=[local_rank])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1, betas=(0.9, 0.95))
    warmup, total = 1, 3

    def lr_lambda(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    g = torch.Generator().manual_seed(1234 + rank)
    # a repeating pattern the model can learn: token t is followed by (t * 5 + 3) % vocab
    starts = torch.randint(0, args.vocab_size, (4, 1), generator=g)
    seq = [starts]
    for _ in range(args.max_seq_len):
        seq.append((seq[-1] * 5 + 3) % args.vocab_size)
    data = torch.cat(seq, dim=1).cuda()
    tokens, targets = data[:, :-1], data[:, 1:]
    losses = []
    model.train()
    for step in range(total):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = model(tokens, targets)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged, op=dist.ReduceOp.AVG)
        losses.append(logged.item())
        if rank == 0:
            print(
                f"step {step}: loss {losses[-1]:.4f}, grad norm {norm.item():.4f}, "
                f"lr {scheduler.get_last_lr()[0]:.6f}"
            )
    dist.barrier()
    if rank == 0:
        torch.save(model.module.state_dict(), os.environ.get("CKPT", "llama_ckpt.pt"))
        print(f"peak memory {torch.cuda.max_memory_allocated()} bytes")
    dist.barrier()
    dist.destroy_process_group()
    assert losses[-1] < losses[0], losses


if __name__ == "__main__":
    main()
