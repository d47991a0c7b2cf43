"""The Triton tutorials' programs (vector add, fused softmax, matmul, dropout) as written.

Each test is written the way the tutorials are -- ``import kernbench.triton as
triton``, ``import kernbench.triton.language as tl``, ``import kernbench.torch
as torch`` and nothing else to run the kernels -- on the tiny machine, with
smaller sizes so the suite stays fast.  Values are checked against NumPy;
autotuning must keep the config that ran fastest in simulation, and
``do_bench`` must give the simulated milliseconds of a call.

Strides come from ``x.stride()`` and values are checked with
``torch.allclose`` against ``torch.softmax`` / ``torch.matmul`` as the
tutorials do, and against NumPy.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.triton.runtime import driver


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


# ----------------------------------------------------------------------------- 01 vector add


@triton.jit
def add_kernel(x_ptr, y_ptr, output_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(output_ptr + offsets, x + y, mask=mask)


def add(x, y, device):
    output = torch.empty_like(x)
    assert x.device == device and y.device == device and output.device == device
    n_elements = output.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, output, n_elements, BLOCK_SIZE=1024)
    return output


def test_vector_add_tutorial_values_and_benchmark(ctx, tmp_path, capsys):
    device = triton.runtime.driver.active.get_active_torch_device()
    x = torch.rand(9843, device=device)
    y = torch.rand(9843, device=device)
    out = add(x, y, device)
    np.testing.assert_array_equal(out.numpy(), x.numpy() + y.numpy())

    @triton.testing.perf_report(
        triton.testing.Benchmark(
            x_names=["size"],
            x_vals=[2**i for i in range(12, 15)],
            x_log=True,
            line_arg="provider",
            line_vals=["triton", "torch"],
            line_names=["Triton", "Torch"],
            styles=[("blue", "-"), ("green", "-")],
            ylabel="GB/s",
            plot_name="vector-add-performance",
            args={},
        )
    )
    def benchmark(size, provider):
        x = torch.rand(size, device=device, dtype=torch.float32)
        y = torch.rand(size, device=device, dtype=torch.float32)
        quantiles = [0.5, 0.2, 0.8]
        if provider == "torch":
            ms, min_ms, max_ms = triton.testing.do_bench(lambda: x + y, quantiles=quantiles)
        if provider == "triton":
            ms, min_ms, max_ms = triton.testing.do_bench(
                lambda: add(x, y, device), quantiles=quantiles
            )
        gbps = lambda ms: 3 * x.numel() * x.element_size() * 1e-9 / (ms * 1e-3)  # noqa: E731
        return gbps(ms), gbps(max_ms), gbps(min_ms)

    benchmark.run(print_data=True, show_plots=True, save_path=str(tmp_path))
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "vector-add-performance:"
    assert printed[1].split() == ["size", "Triton", "Torch"]
    assert [line.split()[1] for line in printed[2:]] == ["4096", "8192", "16384"]
    table = benchmark.tables["vector-add-performance"]
    assert all(row[1] > 0 and row[2] > 0 for row in table.rows)
    assert (tmp_path / "vector-add-performance.csv").read_text().startswith("size,Triton,Torch\n")
    assert (tmp_path / "vector-add-performance.png").read_bytes()[:4] == b"\x89PNG"


def test_do_bench_gives_the_simulated_ms_of_one_call(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    x = torch.rand(4096, device=device)
    y = torch.rand(4096, device=device)
    out = torch.empty_like(x)

    def launch():
        return add_kernel[(4,)](x, y, out, 4096, BLOCK_SIZE=1024)

    ms = triton.testing.do_bench(launch)
    assert ms == launch().elapsed_ps / 1e9 > 0


# ----------------------------------------------------------------------------- 02 fused softmax


@triton.jit
def softmax_kernel(
    output_ptr,
    input_ptr,
    input_row_stride,
    output_row_stride,
    n_rows,
    n_cols,
    BLOCK_SIZE: tl.constexpr,
    num_stages: tl.constexpr,
):
    row_start = tl.program_id(0)
    row_step = tl.num_programs(0)
    for row_idx in tl.range(row_start, n_rows, row_step, num_stages=num_stages):
        row_start_ptr = input_ptr + row_idx * input_row_stride
        col_offsets = tl.arange(0, BLOCK_SIZE)
        input_ptrs = row_start_ptr + col_offsets
        mask = col_offsets < n_cols
        row = tl.load(input_ptrs, mask=mask, other=-float("inf"))
        row_minus_max = row - tl.max(row, axis=0)
        numerator = tl.exp(row_minus_max)
        denominator = tl.sum(numerator, axis=0)
        softmax_output = numerator / denominator
        output_row_start_ptr = output_ptr + row_idx * output_row_stride
        tl.store(output_row_start_ptr + col_offsets, softmax_output, mask=mask)


def softmax(x, launches):
    device = triton.runtime.driver.active.get_active_torch_device()
    properties = driver.active.utils.get_device_properties(device.index)
    num_sm = properties["multiprocessor_count"]
    num_regs = properties["max_num_regs"]
    size_smem = properties["max_shared_mem"]
    warp_size = properties["warpSize"]
    n_rows, n_cols = x.shape
    block_size = triton.next_power_of_2(n_cols)
    num_warps = 8
    num_stages = 4 if size_smem > 200000 else 2
    y = torch.empty_like(x)
    stride = x.stride(0)
    kernel = softmax_kernel.warmup(
        y,
        x,
        stride,
        stride,
        n_rows,
        n_cols,
        BLOCK_SIZE=block_size,
        num_stages=num_stages,
        num_warps=num_warps,
        grid=(1,),
    )
    kernel._init_handles()
    occupancy = num_regs // (kernel.n_regs * warp_size * num_warps)
    occupancy = min(occupancy, size_smem // kernel.metadata.shared)
    num_programs = min(num_sm * occupancy, n_rows)
    launches.append((kernel, num_programs))
    kernel[(num_programs, 1, 1)](y, x, stride, stride, n_rows, n_cols, block_size, num_stages)
    return y


def test_fused_softmax_tutorial_persistent_programs(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    x = torch.randn(183, 781, device=device)
    launches = []
    y = softmax(x, launches)
    host = x.numpy()
    e = np.exp(host - host.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    kernel, num_programs = launches[0]
    # 1024 lanes of float32 a load, 4 stages; 1024-element blocks over 8 warps of 1 thread
    assert kernel.metadata.shared == 1024 * 4 * 4
    assert kernel.n_regs == 1024 // 8
    assert kernel.n_spills == 0
    assert num_programs == 183  # TCM holds far more than one row per PE: one program a row


def test_fused_softmax_with_fewer_persistent_programs_gives_the_same_values(ctx):
    x = torch.randn(37, 100, device=triton.runtime.driver.active.get_active_torch_device())
    y = torch.empty_like(x)
    compiled = softmax_kernel.warmup(
        y, x, 100, 100, 37, 100, BLOCK_SIZE=128, num_stages=2, grid=(1,)
    )
    compiled[(5,)](y, x, 100, 100, 37, 100, 128, 2)
    host = x.numpy()
    e = np.exp(host - host.max(axis=1, keepdims=True))
    np.testing.assert_allclose(y.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


# ----------------------------------------------------------------------------- 03 matmul


def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def get_cuda_autotune_config():
    return [
        triton.Config(
            {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8}
        )
    ]


def get_hip_autotune_config():
    sizes = [
        {"BLOCK_SIZE_M": 16, "BLOCK_SIZE_N": 16, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 4},
        {"BLOCK_SIZE_M": 32, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 64, "GROUP_SIZE_M": 6},
    ]
    return [
        triton.Config(s | {"matrix_instr_nonkdim": 16}, num_warps=8, num_stages=2) for s in sizes
    ]


def get_autotune_config():
    return get_cuda_autotune_config() if is_cuda() else get_hip_autotune_config()


@triton.autotune(configs=get_autotune_config(), key=["M", "N", "K"])
@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    ACTIVATION: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m
    tl.assume(pid_m >= 0)
    tl.assume(pid_n >= 0)
    tl.assume(stride_am > 0)
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    if ACTIVATION == "leaky_relu":
        accumulator = leaky_relu(accumulator)
    c = accumulator.to(tl.float16)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


@triton.jit
def leaky_relu(x):
    return tl.where(x >= 0, x, 0.01 * x)


def matmul(a, b, activation=""):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.is_contiguous(), "Matrix A must be contiguous"
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=torch.float16)
    grid = lambda META: (  # noqa: E731
        triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),
    )
    matmul_kernel[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        ACTIVATION=activation,
    )
    return c


def _reference(a, b, activation=""):
    out = a.numpy().astype(np.float32) @ b.numpy().astype(np.float32)
    if activation == "leaky_relu":
        out = np.where(out >= 0, out, 0.01 * out)
    return out


@pytest.mark.parametrize("activation", ["", "leaky_relu"])
def test_matmul_tutorial_values_and_autotuned_config(ctx, activation):
    device = triton.runtime.driver.active.get_active_torch_device()
    matmul_kernel.cache.clear()
    a = torch.rand((96, 128), device=device, dtype=torch.float16) - 0.5
    b = torch.rand((128, 80), device=device, dtype=torch.float16) - 0.5
    c = matmul(a, b, activation)
    np.testing.assert_allclose(c.numpy(), _reference(a, b, activation), atol=1e-2, rtol=0)
    if activation == "":
        assert torch.allclose(c, torch.matmul(a, b), atol=1e-2, rtol=0)

    assert not is_cuda()  # the simulated machine takes the tutorial's non-CUDA configs
    record = matmul_kernel.tuning_records[-1]
    assert record.key == (96, 80, 128, "torch.float16", "torch.float16", "torch.float16")
    timings = dict(record.timings_ps)
    assert len(timings) == 3 and len(set(timings.values())) == 3  # the configs differ in time
    assert timings[record.best] == min(timings.values())
    assert str(matmul_kernel.best_config) == record.best

    # Each config run alone, outside the autotuner, takes the time the autotuner measured.
    kernel = matmul_kernel.fn
    for config in get_hip_autotune_config():
        out = torch.empty((96, 80), device=device, dtype=torch.float16)
        grid = (
            triton.cdiv(96, config.kwargs["BLOCK_SIZE_M"])
            * triton.cdiv(80, config.kwargs["BLOCK_SIZE_N"]),
        )
        launch = kernel[grid](
            a,
            b,
            out,
            96,
            80,
            128,
            128,
            1,
            80,
            1,
            80,
            1,
            ACTIVATION=activation,
            **config.all_kwargs(),
        )
        assert launch.elapsed_ps == timings[str(config)]


def test_matmul_benchmark_do_bench_after_autotuning(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    matmul_kernel.cache.clear()
    a = torch.randn((64, 64), device=device, dtype=torch.float16)
    b = torch.randn((64, 64), device=device, dtype=torch.float16)
    quantiles = [0.5, 0.2, 0.8]
    ms, min_ms, max_ms = triton.testing.do_bench(lambda: matmul(a, b), quantiles=quantiles)
    assert ms == min_ms == max_ms > 0
    record = matmul_kernel.tuning_records[-1]
    best_ms = dict(record.timings_ps)[record.best] / 1e9
    assert best_ms < ms  # the measured call also allocates C on the device
    perf = 2 * 64 * 64 * 64 * 1e-12 / (ms * 1e-3)
    assert perf > 0


# --------------------------------------------------------------------------- 04 low-memory dropout


@triton.jit
def _seeded_dropout(x_ptr, output_ptr, n_elements, p, seed, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    random = tl.rand(seed, offsets)
    x_keep = random > p
    output = tl.where(x_keep, x / (1 - p), 0.0)
    tl.store(output_ptr + offsets, output, mask=mask)


def seeded_dropout(x, p, seed):
    output = torch.empty_like(x)
    assert x.is_contiguous()
    n_elements = x.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    _seeded_dropout[grid](x, output, n_elements, p, seed, BLOCK_SIZE=1024)
    return output


def philox_reference(seed, offset, rounds=10):
    """Philox 4x32 on one counter (offset, 0, 0, 0), in Python integers."""
    mask = 0xFFFFFFFF
    c0, c1, c2, c3 = offset & mask, 0, 0, 0
    k0, k1 = seed & mask, (seed >> 32) & mask
    for _ in range(rounds):
        p0, p2 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p2 >> 32) ^ c1 ^ k0, p2 & mask, (p0 >> 32) ^ c3 ^ k1, p0 & mask
        k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
    return c0, c1, c2, c3


def uniform_reference(word):
    signed = word - 2**32 if word >= 2**31 else word
    folded = -signed - 1 if signed < 0 else signed
    return np.float32(folded) * np.float32(4.6566127342e-10)


def test_low_memory_dropout_tutorial_draws_tritons_philox_numbers(ctx):
    x = torch.randn(1500)
    output = seeded_dropout(x, p=0.5, seed=123)
    output2 = seeded_dropout(x, p=0.5, seed=123)
    output3 = seeded_dropout(x, p=0.5, seed=512)
    np.testing.assert_array_equal(output.numpy(), output2.numpy())
    assert not np.array_equal(output.numpy(), output3.numpy())
    uniform = np.array([uniform_reference(philox_reference(123, i)[0]) for i in range(1500)])
    host = x.numpy()
    expected = np.where(uniform > 0.5, host / np.float32(0.5), np.float32(0.0))
    np.testing.assert_array_equal(output.numpy(), expected)
    assert 0.45 < (uniform > 0.5).mean() < 0.55

    # Random123's known answers for Philox 4x32-10
    words = tl.philox(0xA4093822 | 0x299F31D0 << 32, *(
        tl.full([1], c, tl.uint32) for c in (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344)
    ))  # fmt: skip
    assert [int(w.value[0]) for w in words] == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


def test_tl_randint_randn_and_their_refusals(ctx):
    @triton.jit
    def draw(ints_ptr, normals_ptr, seed, BLOCK_SIZE: tl.constexpr):
        offsets = tl.arange(0, BLOCK_SIZE)
        tl.store(ints_ptr + offsets, tl.randint(seed, offsets).to(tl.int32, bitcast=True))
        tl.store(normals_ptr + offsets, tl.randn(seed, offsets))

    ints = torch.empty(4096, dtype=torch.int32)
    normals = torch.empty(4096)
    launch = draw[(1,)](ints, normals, -7, BLOCK_SIZE=4096)
    seed = -7 % 2**64  # an int32 seed widens to uint64 with its sign
    words = [philox_reference(seed, i)[:2] for i in range(4096)]
    expected = np.array([w[0] for w in words], dtype=np.uint64).astype(np.uint32)
    np.testing.assert_array_equal(ints.numpy().view(np.uint32), expected)
    u1 = np.maximum(np.float32(1e-7), np.array([uniform_reference(w[0]) for w in words]))
    u2 = np.array([uniform_reference(w[1]) for w in words])
    box_muller = np.sqrt(-2.0 * np.log(u1)) * np.cos(np.float32(6.283185307179586) * u2)
    np.testing.assert_allclose(normals.numpy(), box_muller, rtol=1e-5, atol=1e-6)
    assert abs(normals.numpy().mean()) < 0.05 and abs(normals.numpy().std() - 1) < 0.05
    assert launch.record.programs[0].int_ops > 80 * 4096  # ten rounds of Philox a lane

    @triton.jit
    def float_offsets(out_ptr):
        tl.store(out_ptr + tl.arange(0, 4), tl.rand(1, tl.arange(0, 4).to(tl.float32)))

    with pytest.raises(KernelError, match="32-bit integer offsets"):
        float_offsets[(1,)](torch.empty(4))


@triton.jit
def _rand_at(out_ptr, seed, OFFSET: tl.constexpr, SEEDS: tl.constexpr):
    offsets = tl.arange(0, 4)
    seeds = seed + tl.arange(0, SEEDS) if SEEDS else seed
    tl.store(out_ptr + offsets, tl.rand(seeds, OFFSET if OFFSET else offsets))


@pytest.mark.parametrize(
    ("seed", "offset", "seeds", "message"),
    [
        # these said "outside a kernel", the OverflowError, the ValueError of NumPy
        (2**70, 0, 0, "kernel '_rand_at': argument seed=1180591620717411303424 does not fit"),
        (1, 2**40, 0, "tl.randint4x's offset 1099511627776 does not fit in 32 bits"),
        (1, 0, 8, "tl.philox's seed and offsets must broadcast together, got shapes (8,), (4,)"),
    ],
)
def test_tl_rand_refuses_seeds_and_offsets_it_cannot_take(ctx, seed, offset, seeds, message):
    with pytest.raises(KernelError) as info:
        _rand_at[(1,)](torch.empty(4), seed, OFFSET=offset, SEEDS=seeds)
    assert message in str(info.value)


# ----------------------------------------------------------------------------- 06 fused attention


@triton.jit
def attention_forward_kernel(
    Q, K, V, sm_scale, M, Out, N_CTX,
    stride_m, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr,
):  # fmt: skip
    start_m = tl.program_id(0)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + offs_m[:, None] * stride_m + offs_d[None, :])
    m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504  # 1/log(2)
    for start_n in tl.range(0, N_CTX, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        k = tl.load(K + (start_n + offs_n)[None, :] * stride_m + offs_d[:, None])
        qk = tl.dot(q, k)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        l_ij = tl.sum(p, 1)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + l_ij
        acc = acc * alpha[:, None]
        v = tl.load(V + (start_n + offs_n)[:, None] * stride_m + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    m_i += tl.math.log2(l_i)
    acc = acc / l_i[:, None]
    tl.store(M + offs_m, m_i)
    tl.store(Out + offs_m[:, None] * stride_m + offs_d[None, :], acc.to(Out.type.element_ty))


def test_flash_attention_forward_with_tl_math(ctx):
    n_ctx, head_dim, sm_scale = 64, 16, 0.5
    q, k, v = (torch.randn((n_ctx, head_dim), dtype=torch.float16) for _ in range(3))
    out = torch.empty_like(q)
    m = torch.empty((n_ctx,), dtype=torch.float32)
    grid = lambda META: (triton.cdiv(n_ctx, META["BLOCK_M"]),)  # noqa: E731
    attention_forward_kernel[grid](
        q, k, v, sm_scale, m, out, n_ctx, q.stride(0), BLOCK_M=16, BLOCK_N=16, HEAD_DIM=head_dim
    )
    qh, kh, vh = (t.numpy().astype(np.float32) for t in (q, k, v))
    s = qh @ kh.T * sm_scale
    p = np.exp(s - s.max(axis=1, keepdims=True))
    reference = (p / p.sum(axis=1, keepdims=True)) @ vh
    triton.testing.assert_close(out, reference, atol=1e-2, rtol=0)
    logsumexp2 = (s.max(axis=1) + np.log(p.sum(axis=1))) / np.log(2)
    np.testing.assert_allclose(m.numpy(), logsumexp2, rtol=1e-5)
    assert tl.math.exp2 is tl.exp2 and tl.math.log2 is tl.log2
    with pytest.raises(UnsupportedNameError, match=r"tl\.math\.umulhi is not in KernBench"):
        tl.math.umulhi  # noqa: B018


# ----------------------------------------------------------------------------- common kernels


@triton.jit
def gelu_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, 0.5 * x * (1 + tl.erf(x * 0.7071067811865476)), mask=mask)


@triton.jit
def quantize_rows_kernel(x_ptr, q_ptr, scale_ptr, n_cols, stride, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride + cols, mask=mask, other=0.0)
    scale = tl.max(tl.abs(x), axis=0) / 127.0
    q = tl.math.floor(x / scale + 0.5)
    tl.store(q_ptr + row * stride + cols, tl.clamp(q, -127.0, 127.0).to(tl.int8), mask=mask)
    tl.store(scale_ptr + row, scale)


def test_exact_gelu_with_erf_and_row_wise_int8_quantisation(ctx):
    import math

    x = torch.randn(300)
    out = torch.empty_like(x)
    launch = gelu_kernel[(3,)](x, out, 300, BLOCK_SIZE=128)
    host = x.numpy().astype(np.float64)
    erf = np.array([math.erf(v) for v in host / math.sqrt(2)])
    np.testing.assert_allclose(out.numpy(), 0.5 * host * (1 + erf), rtol=1e-6, atol=1e-7)
    assert launch.record.programs[0].transcendental_ops == 128  # one erf a lane

    x = torch.randn((4, 50))
    q = torch.empty((4, 50), dtype=torch.int8)
    scale = torch.empty((4,))
    quantize_rows_kernel[(4,)](x, q, scale, 50, x.stride(0), BLOCK_SIZE=64)
    host = x.numpy()
    expected_scale = np.abs(host).max(axis=1) / np.float32(127.0)
    np.testing.assert_array_equal(scale.numpy(), expected_scale)
    expected = np.clip(np.floor(host / expected_scale[:, None] + np.float32(0.5)), -127, 127)
    np.testing.assert_array_equal(q.numpy(), expected.astype(np.int8))
    assert tl.ceil is tl.math.ceil and tl.floor is tl.math.floor and tl.erf is tl.math.erf

    @triton.jit
    def half_erf(x_ptr):
        tl.store(x_ptr + tl.arange(0, 4), tl.erf(tl.load(x_ptr + tl.arange(0, 4))))

    with pytest.raises(KernelError, match=r"tl.erf takes float32 or float64 values"):
        half_erf[(1,)](torch.zeros(4, dtype=torch.float16))
