"""Triton's layer-norm tutorial (05-layer-norm.py): its three kernels as written.

The kernels are the tutorial's, transcribed with only the imports changed, and kept
at module level so other tests can launch them (an autograd wrapper, say).  The host
code is what the tutorial's ``LayerNorm.forward`` and ``LayerNorm.backward`` do,
written as two functions that launch the kernels directly.  The backward kernel's
spin lock (``tl.atomic_cas``/``tl.atomic_xchg``) serialises the programs of a group
on their partial ``dw``/``db`` row; programs run one at a time here, each to its end,
so a lock is always free when a program starts, and one left taken makes the kernel
raise instead of hang.  Values are checked against NumPy's layer norm and its
gradients, and the tutorial's ``torch.autograd.Function`` wrapper against
``F.layer_norm``'s backward, as its test does.
"""

from __future__ import annotations

import numpy as np
import pytest
from run_modes import assert_same_values, in_every_mode

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


@triton.jit
def _layer_norm_fwd_fused(
    X,  # pointer to the input
    Y,  # pointer to the output
    W,  # pointer to the weights
    B,  # pointer to the biases
    Mean,  # pointer to the mean
    Rstd,  # pointer to the 1/std
    stride,  # how much to increase the pointer when moving by 1 row
    N,  # number of columns in X
    eps,  # epsilon to avoid division by zero
    BLOCK_SIZE: tl.constexpr,
):
    row = tl.program_id(0)
    Y += row * stride
    X += row * stride
    mean = 0
    _mean = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        a = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        _mean += a
    mean = tl.sum(_mean, axis=0) / N
    _var = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        _var += x * x
    var = tl.sum(_var, axis=0) / N
    rstd = 1 / tl.sqrt(var + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for off in range(0, N, BLOCK_SIZE):
        cols = off + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        x_hat = (x - mean) * rstd
        y = x_hat * w + b
        tl.store(Y + cols, y, mask=mask)


@triton.jit
def _layer_norm_bwd_dx_fused(
    DX,  # pointer to the input gradient
    DY,  # pointer to the output gradient
    DW,  # pointer to the partial sum of weights gradient
    DB,  # pointer to the partial sum of biases gradient
    X,  # pointer to the input
    W,  # pointer to the weights
    Mean,  # pointer to the mean
    Rstd,  # pointer to the 1/std
    Lock,  # pointer to the lock
    stride,  # how much to increase the pointer when moving by 1 row
    N,  # number of columns in X
    GROUP_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.0)
    wdy = tl.where(mask, wdy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx, mask=mask)
    partial_dw = (dy * xhat).to(w.dtype)
    partial_db = (dy).to(w.dtype)
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    # the first store of a group does not accumulate
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


@triton.jit
def _layer_norm_bwd_dwdb(
    DW,  # pointer to the partial sum of weights gradient
    DB,  # pointer to the partial sum of biases gradient
    FINAL_DW,  # pointer to the weights gradient
    FINAL_DB,  # pointer to the biases gradient
    M,  # GROUP_SIZE_M
    N,  # number of columns
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
):
    pid = tl.program_id(0)
    cols = pid * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for i in range(0, M, BLOCK_SIZE_M):
        rows = i + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offs = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offs, mask=mask, other=0.0)
        db += tl.load(DB + offs, mask=mask, other=0.0)
    sum_dw = tl.sum(dw, axis=0)
    sum_db = tl.sum(db, axis=0)
    tl.store(FINAL_DW + cols, sum_dw, mask=cols < N)
    tl.store(FINAL_DB + cols, sum_db, mask=cols < N)


def layer_norm_forward(x, normalized_shape, weight, bias, eps):
    """The tutorial's ``LayerNorm.forward``, returning what it saves for backward."""
    y = torch.empty_like(x)
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    mean = torch.empty((M,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((M,), dtype=torch.float32, device=x.device)
    MAX_FUSED_SIZE = 65536 // x.element_size()
    BLOCK_SIZE = min(MAX_FUSED_SIZE, triton.next_power_of_2(N))
    if N > BLOCK_SIZE:
        raise RuntimeError("This layer norm doesn't support feature dim >= 64KB.")
    num_warps = min(max(BLOCK_SIZE // 256, 1), 8)
    _layer_norm_fwd_fused[(M,)](
        x_arg, y, weight, bias, mean, rstd,
        x_arg.stride(0), N, eps,
        BLOCK_SIZE=BLOCK_SIZE, num_warps=num_warps, num_ctas=1,
    )  # fmt: skip
    return y, mean, rstd, BLOCK_SIZE, num_warps


def layer_norm_backward(dy, x, w, b, m, v, block_size, num_warps, group_size_m=None):
    """The tutorial's ``LayerNorm.backward``; ``group_size_m`` overrides its heuristic
    (so that many rows share a lock).  Returns dx, dw, db and the locks."""
    N = w.shape[0]
    GROUP_SIZE_M = 64
    if N <= 8192:
        GROUP_SIZE_M = 96
    if N <= 4096:
        GROUP_SIZE_M = 128
    if N <= 1024:
        GROUP_SIZE_M = 256
    if group_size_m is not None:
        GROUP_SIZE_M = group_size_m
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=w.device)
    _dw = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device=w.device)
    _db = torch.zeros((GROUP_SIZE_M, N), dtype=x.dtype, device=w.device)
    dw = torch.empty((N,), dtype=w.dtype, device=w.device)
    db = torch.empty((N,), dtype=w.dtype, device=w.device)
    dx = torch.empty_like(dy)
    x_arg = x.reshape(-1, x.shape[-1])
    M, N = x_arg.shape
    _layer_norm_bwd_dx_fused[(M,)](
        dx, dy, _dw, _db, x, w, m, v, locks,
        x_arg.stride(0), N,
        BLOCK_SIZE_N=block_size,
        GROUP_SIZE_M=GROUP_SIZE_M,
        num_warps=num_warps,
    )  # fmt: skip
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_SIZE_N"]),)  # noqa: E731
    _layer_norm_bwd_dwdb[grid](
        _dw, _db, dw, db, min(GROUP_SIZE_M, M), N,
        BLOCK_SIZE_M=32,
        BLOCK_SIZE_N=128, num_ctas=1,
    )  # fmt: skip
    return dx, dw, db, locks


def _inputs(M, N, dtype, device=None):
    """The tutorial's test data."""
    x_shape = (M, N)
    w_shape = (x_shape[-1],)
    weight = torch.rand(w_shape, dtype=dtype, device=device)
    bias = torch.rand(w_shape, dtype=dtype, device=device)
    x = -2.3 + 0.5 * torch.randn(x_shape, dtype=dtype, device=device)
    dy = 0.1 * torch.randn_like(x)
    return x, weight, bias, dy


def _reference(x, w, b, dy, eps):
    """Layer norm over the last dim and its gradients, in float64."""
    x, w, b, dy = (a.numpy().astype(np.float64) for a in (x, w, b, dy))
    mean = x.mean(axis=1)
    rstd = 1 / np.sqrt(x.var(axis=1) + eps)
    xhat = (x - mean[:, None]) * rstd[:, None]
    y = xhat * w + b
    wdy = w * dy
    c1 = (xhat * wdy).mean(axis=1, keepdims=True)
    c2 = wdy.mean(axis=1, keepdims=True)
    dx = (wdy - (xhat * c1 + c2)) * rstd[:, None]
    return y, mean, rstd, dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


@pytest.mark.parametrize(
    ("M", "N", "dtype", "tolerance"),
    [(37, 300, torch.float32, 1e-4), (21, 1000, torch.float16, 1e-2)],
)
def test_forward_gives_numpys_layer_norm_mean_and_rstd(ctx, M, N, dtype, tolerance):
    device = triton.runtime.driver.active.get_active_torch_device()
    x, weight, bias, _ = _inputs(M, N, dtype, device)
    eps = 1e-5
    y, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, eps)
    assert (block_size, num_warps) == (triton.next_power_of_2(N), max(block_size // 256, 1))
    y_ref, mean_ref, rstd_ref, *_ = _reference(x, weight, bias, x, eps)
    assert y.dtype == dtype and mean.dtype == rstd.dtype == torch.float32
    np.testing.assert_allclose(mean.numpy(), mean_ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rstd.numpy(), rstd_ref, rtol=1e-4)
    np.testing.assert_allclose(y.numpy().astype(np.float64), y_ref, atol=tolerance, rtol=0)
    # the tutorial's own check, against torch's layer norm
    y_torch = torch.nn.functional.layer_norm(x, (N,), weight, bias, eps).to(dtype)
    assert torch.allclose(y, y_torch, atol=1e-2, rtol=0)


@pytest.mark.parametrize(
    ("M", "N", "dtype", "group_size_m", "tolerance"),
    [
        (37, 300, torch.float32, None, 1e-4),  # the heuristic: 256 groups, one row each
        (37, 300, torch.float32, 4, 1e-4),  # about nine rows share each lock
        (45, 200, torch.float16, 8, 1e-2),
    ],
)
def test_backward_kernels_give_layer_norm_gradients(ctx, M, N, dtype, group_size_m, tolerance):
    device = triton.runtime.driver.active.get_active_torch_device()
    x, weight, bias, dy = _inputs(M, N, dtype, device)
    eps = 1e-5
    y, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, eps)
    dx, dw, db, locks = layer_norm_backward(
        dy, x, weight, bias, mean, rstd, block_size, num_warps, group_size_m
    )
    *_, dx_ref, dw_ref, db_ref = _reference(x, weight, bias, dy, eps)
    assert dx.dtype == dw.dtype == db.dtype == dtype
    np.testing.assert_allclose(dx.numpy().astype(np.float64), dx_ref, atol=tolerance, rtol=0)
    scale = max(1.0, float(np.abs(dw_ref).max()))
    np.testing.assert_allclose(dw.numpy(), dw_ref, atol=tolerance * scale, rtol=0)
    np.testing.assert_allclose(db.numpy(), db_ref, atol=tolerance * scale, rtol=0)
    # every lock was released, and every group that had a row counted its first store
    groups = 256 if group_size_m is None else group_size_m
    lock_values = locks.numpy()
    assert (lock_values[:groups] == 0).all()
    np.testing.assert_array_equal(lock_values[groups:], np.arange(groups) < M)


def test_programs_of_one_group_on_different_pes_share_the_lock(ctx):
    """With dx spread over the PEs, a group's programs run on several PEs, interleaved
    by their simulated start times; each takes and releases the lock within itself."""
    M, N, groups = 32, 96, 3
    x, weight, bias, dy = _inputs(M, N, torch.float32)
    _, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, 1e-5)
    dx = torch.empty((M, N), dtype=torch.float32, dp=DPPolicy(pe="row_wise"))
    locks = torch.zeros(2 * groups, dtype=torch.int32)
    _dw = torch.zeros((groups, N), dtype=torch.float32)
    _db = torch.zeros((groups, N), dtype=torch.float32)
    result = _layer_norm_bwd_dx_fused[(M,)](
        dx, dy, _dw, _db, x, weight, mean, rstd, locks,
        x.stride(0), N, GROUP_SIZE_M=groups, BLOCK_SIZE_N=block_size,
    )  # fmt: skip
    assert len(result.placement) > 1
    *_, dx_ref, dw_ref, db_ref = _reference(x, weight, bias, dy, 1e-5)
    np.testing.assert_allclose(dx.numpy(), dx_ref, atol=1e-4, rtol=0)
    np.testing.assert_allclose(_dw.numpy().sum(axis=0), dw_ref, atol=1e-4, rtol=0)
    np.testing.assert_allclose(_db.numpy().sum(axis=0), db_ref, atol=1e-4, rtol=0)
    rows = np.arange(M)
    for group in range(groups):  # each partial row is its group's rows' sum
        np.testing.assert_allclose(_db.numpy()[group], dy.numpy()[rows % groups == group].sum(0),
                                   atol=1e-5)  # fmt: skip
    np.testing.assert_array_equal(locks.numpy(), [0] * groups + [1] * groups)


def test_forward_and_backward_in_timing_only_mode_and_on_the_fast_backend():
    """Timing-only loads read zeros, so every program finds its lock free and its group's
    count at 0 (it stores without accumulating: less traffic than a functional run);
    the fast backend gives the detailed backend's values, bit for bit."""

    def run(context):
        torch.manual_seed(0)
        M, N = 16, 64
        x, weight, bias, dy = _inputs(M, N, torch.float32)
        start = context.now
        y, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, 1e-5)
        dx, dw, db, locks = layer_norm_backward(
            dy, x, weight, bias, mean, rstd, block_size, num_warps, group_size_m=4
        )
        return context.now - start, [y, dx, dw, db, locks]

    times, (detailed, fast) = in_every_mode(run)
    assert all(t > 0 for t in times)
    assert times[1] < times[0]
    assert_same_values(detailed, fast)


def test_backward_with_a_lock_left_taken_raises_instead_of_spinning(ctx):
    """A lock nobody will release: programs run one at a time, so the spinning program
    could never see it freed; the kernel says so rather than hang."""
    M, N = 6, 64
    x, weight, bias, dy = _inputs(M, N, torch.float32)
    _, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, 1e-5)
    locks = torch.zeros(4, dtype=torch.int32)
    locks[1] = 1  # group 1's lock, taken by no program that will run again
    partial = torch.zeros((2, N), dtype=torch.float32)
    dx = torch.empty_like(dy)
    with pytest.raises(KernelError, match=r"program \(1,\): tl.atomic_cas changed nothing"):
        _layer_norm_bwd_dx_fused[(M,)](
            dx, dy, partial, partial.clone(), x, weight, mean, rstd, locks,
            x.stride(0), N, GROUP_SIZE_M=2, BLOCK_SIZE_N=block_size,
        )  # fmt: skip


def test_backward_time_includes_the_atomics(ctx):
    """The lock's atomics are costed as tl.atomic_add is: a load and a store each."""
    M, N = 8, 128
    x, weight, bias, dy = _inputs(M, N, torch.float32)
    _, mean, rstd, block_size, num_warps = layer_norm_forward(x, (N,), weight, bias, 1e-5)
    locks = torch.zeros(2 * 4, dtype=torch.int32)
    partial = torch.zeros((4, N), dtype=torch.float32)
    result = _layer_norm_bwd_dx_fused[(M,)](
        torch.empty_like(dy), dy, partial, partial.clone(), x, weight, mean, rstd, locks,
        x.stride(0), N, GROUP_SIZE_M=4, BLOCK_SIZE_N=block_size,
    )  # fmt: skip
    first_of_group, later = result.record.programs[0], result.record.programs[4]
    # program 0: loads x, dy, w, mean, rstd, the lock (cas), the count; stores dx, the
    # lock, the count (xchg), dw, db and the lock again (xchg); program 4 also loads dw, db
    assert first_of_group.loads == 9 and first_of_group.stores == 6
    assert later.loads == 10 and later.stores == 5
    assert result.elapsed_ps > 0


def test_forward_benchmark_as_the_tutorial_runs_it(ctx, capsys):
    device = triton.runtime.driver.active.get_active_torch_device()

    @triton.testing.perf_report(
        triton.testing.Benchmark(
            x_names=["N"],
            x_vals=[256 * i for i in range(1, 3)],
            line_arg="provider",
            line_vals=["triton", "torch"],
            line_names=["Triton", "Torch"],
            styles=[("blue", "-"), ("green", "-")],
            ylabel="GB/s",
            plot_name="layer-norm-forward",
            args={"M": 64, "dtype": torch.float16, "mode": "forward"},
        )
    )
    def bench_layer_norm(M, N, dtype, provider, mode="backward", eps=1e-5, device=device):
        x, weight, bias, _ = _inputs(M, N, dtype, device)
        quantiles = [0.5, 0.2, 0.8]

        def y_fwd():
            if provider == "triton":
                return layer_norm_forward(x, (N,), weight, bias, eps)[0]
            if provider == "torch":
                return torch.nn.functional.layer_norm(x, (N,), weight, bias, eps)

        gbps = lambda ms: 2 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)  # noqa: E731
        ms, min_ms, max_ms = triton.testing.do_bench(y_fwd, quantiles=quantiles, rep=500)
        return gbps(ms), gbps(max_ms), gbps(min_ms)

    bench_layer_norm.run(print_data=True)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "layer-norm-forward:"
    table = bench_layer_norm.tables["layer-norm-forward"]
    assert [row[0] for row in table.rows] == [256, 512]
    assert all(row[1] > 0 and row[2] > 0 for row in table.rows)


class LayerNorm(torch.autograd.Function):
    """The tutorial's autograd wrapper, as written (its forward and backward bodies are
    the host code above)."""

    @staticmethod
    def forward(ctx, x, normalized_shape, weight, bias, eps):
        y, mean, rstd, BLOCK_SIZE, num_warps = layer_norm_forward(
            x, normalized_shape, weight, bias, eps
        )
        ctx.save_for_backward(x, weight, bias, mean, rstd)
        ctx.BLOCK_SIZE = BLOCK_SIZE
        ctx.num_warps = num_warps
        ctx.eps = eps
        return y

    @staticmethod
    def backward(ctx, dy):
        x, w, b, m, v = ctx.saved_tensors
        dx, dw, db, _ = layer_norm_backward(dy, x, w, b, m, v, ctx.BLOCK_SIZE, ctx.num_warps)
        return dx, None, dw, db, None


layer_norm = LayerNorm.apply


def test_the_tutorials_autograd_wrapper_matches_torchs_layer_norm_backward(ctx):
    # the tutorial's test_layer_norm: y and the three gradients against F.layer_norm's
    M, N, dtype, eps = 151, 256, torch.float32, 1e-5
    x, weight, bias, dy = _inputs(M, N, dtype)
    weight.requires_grad_(True)
    bias.requires_grad_(True)
    x.requires_grad_(True)
    w_shape = (N,)
    y_tri = layer_norm(x, w_shape, weight, bias, eps)
    assert y_tri.grad_fn.name() == "LayerNormBackward"
    y_ref = torch.nn.functional.layer_norm(x, w_shape, weight, bias, eps).to(dtype)
    y_tri.backward(dy, retain_graph=True)
    dx_tri, dw_tri, db_tri = [_.grad.clone() for _ in [x, weight, bias]]
    x.grad, weight.grad, bias.grad = None, None, None
    y_ref.backward(dy, retain_graph=True)
    dx_ref, dw_ref, db_ref = [_.grad.clone() for _ in [x, weight, bias]]
    assert torch.allclose(y_tri, y_ref, atol=1e-2, rtol=0)
    assert torch.allclose(dx_tri, dx_ref, atol=1e-2, rtol=0)
    assert torch.allclose(db_tri, db_ref, atol=1e-2, rtol=0)
    assert torch.allclose(dw_tri, dw_ref, atol=1e-2, rtol=0)
    _, _, _, dx, dw, db = _reference(x.detach(), weight.detach(), bias.detach(), dy, eps)
    np.testing.assert_allclose(dx_tri.numpy(), dx, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dw_tri.numpy(), dw, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(db_tri.numpy(), db, rtol=1e-4, atol=1e-4)
