"""The next Triton tutorials as written: libdevice (07), group GEMM (08), persistent matmul (09).

As in ``test_triton_tutorials.py``: only the imports are changed
(``import kernbench.triton as triton``, ``import kernbench.triton.language as
tl``, ``import kernbench.torch as torch``, ``from kernbench.triton.language.extra
import libdevice``), sizes are small and the machine is the tiny one; values are
checked against NumPy, errors by type and message.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError, UnsupportedNameError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.triton.language.extra import libdevice


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


# ----------------------------------------------------------------------------- 07 libdevice


@triton.jit
def asin_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    block_start = pid * BLOCK_SIZE
    offsets = block_start + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    x = libdevice.asin(x)
    tl.store(y_ptr + offsets, x, mask=mask)


def test_libdevice_tutorial_asin(ctx, capsys):
    device = triton.runtime.driver.active.get_active_torch_device()
    size = 3000
    x = torch.rand(size, device=device)
    output_triton = torch.zeros(size, device=device)
    output_torch = torch.asin(x)
    assert x.is_cuda and output_triton.is_cuda
    n_elements = output_torch.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    asin_kernel[grid](x, output_triton, n_elements, BLOCK_SIZE=1024)
    print(output_torch)
    print(output_triton)
    print(
        f"The maximum difference between torch and triton is "
        f"{torch.max(torch.abs(output_torch - output_triton))}"
    )
    assert capsys.readouterr().out.splitlines()[-1].endswith("is 0.0")
    np.testing.assert_allclose(output_triton.numpy(), np.arcsin(x.numpy()), rtol=1e-6)

    # The tutorial's second launch names the libdevice file (CUDA's or HIP's); the
    # backend here is neither, so its branch raises, but the keyword is accepted.
    assert triton.runtime.driver.active.get_current_target().backend == "ahbm"
    extern_libs = {"libdevice": "third_party/nvidia/backend/lib/libdevice.10.bc"}
    output_triton = torch.empty_like(x)
    asin_kernel[grid](x, output_triton, n_elements, BLOCK_SIZE=1024, extern_libs=extern_libs)
    assert torch.max(torch.abs(output_torch - output_triton)).item() == 0.0


@triton.jit
def _libdevice_many(x_ptr, out_ptr, WHICH: tl.constexpr):
    offsets = tl.arange(0, 8)
    x = tl.load(x_ptr + offsets)
    if WHICH == "atan2":
        y = libdevice.atan2(x, 0.5)
    elif WHICH == "tanh":
        y = libdevice.tanh(x)
    elif WHICH == "pow":
        y = libdevice.pow(x, 3.0)
    elif WHICH == "fma":
        y = libdevice.fma(x, x, 1.0)
    elif WHICH == "isnan":
        y = libdevice.isnan(x / x)
    else:
        y = tl.extra.libdevice.erfc(x)
    tl.store(out_ptr + offsets, y)


@pytest.mark.parametrize(
    "which, expect",
    [
        ("atan2", lambda v: np.arctan2(v, 0.5)),
        ("tanh", np.tanh),
        ("pow", lambda v: v**3),
        ("fma", lambda v: v * v + 1),
        ("isnan", lambda v: (v == 0).astype(np.float32)),
        ("erfc", lambda v: np.array([__import__("math").erfc(e) for e in v])),
    ],
)
def test_libdevice_functions_give_numpy_values_in_the_argument_type(ctx, which, expect):
    x = torch.tensor([0.0, 0.1, 0.25, -0.5, 0.75, 0.9, -0.99, 0.3])
    out = torch.empty_like(x)
    _libdevice_many[(1,)](x, out, WHICH=which)
    np.testing.assert_allclose(out.numpy(), expect(x.numpy()), rtol=2e-6, atol=1e-7)


@triton.jit
def _asin_of(x_ptr, y_ptr, AS: tl.constexpr):
    offsets = tl.arange(0, 4)
    x = tl.load(x_ptr + offsets)
    tl.store(y_ptr + offsets, libdevice.asin(x if AS is None else x.to(AS)))


def test_libdevice_takes_fp32_or_fp64_as_triton_dispatches_it(ctx):
    x = torch.rand(4, dtype=torch.float64)
    y = torch.empty_like(x)
    run = _asin_of[(1,)](x, y, AS=None)
    np.testing.assert_array_equal(y.numpy(), np.arcsin(x.numpy()))
    assert run.record.programs[0].transcendental_ops == 4
    with pytest.raises(KernelError, match=r"libdevice\.asin takes float32 or float64 values"):
        _asin_of[(1,)](x, y, AS=tl.float16)


def test_libdevice_names_it_lacks_say_what_to_use(ctx):
    with pytest.raises(UnsupportedNameError, match=r"libdevice\.div_rz .*directed rounding"):
        libdevice.div_rz  # noqa: B018
    with pytest.raises(UnsupportedNameError, match=r"libdevice\.float2int_rn .*\.to\(tl"):
        libdevice.float2int_rn  # noqa: B018
    with pytest.raises(UnsupportedNameError, match=r"tl\.extra\.cuda .*extra\.libdevice"):
        tl.extra.cuda  # noqa: B018


# ----------------------------------------------------------------------------- 08 group GEMM


def is_cuda():
    return triton.runtime.driver.active.get_current_target().backend == "cuda"


def supports_tma():
    return is_cuda() and torch.cuda.get_device_capability()[0] >= 9


def num_sms():
    if is_cuda():
        return torch.cuda.get_device_properties("cuda").multi_processor_count
    return 148


def _group_gemm_configs():
    tiles = [(128, 128, 32, 84), (128, 128, 32, 128), (64, 64, 32, 84), (64, 64, 32, 128)]
    tiles += [(128, 128, 64, num_sms()), (64, 128, 64, num_sms())]
    return [
        triton.Config({"BLOCK_SIZE_M": m, "BLOCK_SIZE_N": n, "BLOCK_SIZE_K": k, "NUM_SM": sms})
        for m, n, k, sms in tiles
    ]


@triton.autotune(configs=_group_gemm_configs(), key=["group_size"])
@triton.jit
def grouped_matmul_kernel(
    group_a_ptrs,
    group_b_ptrs,
    group_c_ptrs,
    group_gemm_sizes,
    g_lds,
    group_size,
    NUM_SM: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
):
    tile_idx = tl.program_id(0)
    last_problem_end = 0
    for g in range(group_size):
        # this problem's <M, N, K>
        gm = tl.load(group_gemm_sizes + g * 3)
        gn = tl.load(group_gemm_sizes + g * 3 + 1)
        gk = tl.load(group_gemm_sizes + g * 3 + 2)
        num_m_tiles = tl.cdiv(gm, BLOCK_SIZE_M)
        num_n_tiles = tl.cdiv(gn, BLOCK_SIZE_N)
        num_tiles = num_m_tiles * num_n_tiles
        # the tiles of this problem that fall to this program
        while tile_idx >= last_problem_end and tile_idx < last_problem_end + num_tiles:
            k = gk
            lda = tl.load(g_lds + g * 3)
            ldb = tl.load(g_lds + g * 3 + 1)
            ldc = tl.load(g_lds + g * 3 + 2)
            a_ptr = tl.load(group_a_ptrs + g).to(tl.pointer_type(tl.float16))
            b_ptr = tl.load(group_b_ptrs + g).to(tl.pointer_type(tl.float16))
            c_ptr = tl.load(group_c_ptrs + g).to(tl.pointer_type(tl.float16))
            tile_idx_in_gemm = tile_idx - last_problem_end
            tile_m_idx = tile_idx_in_gemm // num_n_tiles
            tile_n_idx = tile_idx_in_gemm % num_n_tiles

            offs_am = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_bn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            offs_k = tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + offs_am[:, None] * lda + offs_k[None, :]
            b_ptrs = b_ptr + offs_k[:, None] * ldb + offs_bn[None, :]
            accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
            for kk in range(0, tl.cdiv(k, BLOCK_SIZE_K)):  # noqa: B007 - as written
                tl.multiple_of(a_ptrs, [16, 16])
                tl.multiple_of(b_ptrs, [16, 16])
                # full tiles only, as in the tutorial
                a = tl.load(a_ptrs)
                b = tl.load(b_ptrs)
                accumulator += tl.dot(a, b)
                a_ptrs += BLOCK_SIZE_K
                b_ptrs += BLOCK_SIZE_K * ldb
            c = accumulator.to(tl.float16)

            offs_cm = tile_m_idx * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
            offs_cn = tile_n_idx * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
            c_ptrs = c_ptr + ldc * offs_cm[:, None] + offs_cn[None, :]
            tl.store(c_ptrs, c)

            # the next tile of this program is NUM_SM tiles on
            tile_idx += NUM_SM

        last_problem_end = last_problem_end + num_tiles


def group_gemm_fn(group_A, group_B, device):
    assert len(group_A) == len(group_B)
    group_size = len(group_A)
    A_addrs, B_addrs, C_addrs, g_sizes, g_lds, group_C = [], [], [], [], [], []
    for i in range(group_size):
        A = group_A[i]
        B = group_B[i]
        assert A.shape[1] == B.shape[0]
        M, K = A.shape
        K, N = B.shape
        C = torch.empty((M, N), device=device, dtype=A.dtype)
        group_C.append(C)
        A_addrs.append(A.data_ptr())
        B_addrs.append(B.data_ptr())
        C_addrs.append(C.data_ptr())
        g_sizes += [M, N, K]
        g_lds += [A.stride(0), B.stride(0), C.stride(0)]
    # device tensors of addresses, sizes and leading dimensions
    d_a_ptrs = torch.tensor(A_addrs, device=device)
    d_b_ptrs = torch.tensor(B_addrs, device=device)
    d_c_ptrs = torch.tensor(C_addrs, device=device)
    d_g_sizes = torch.tensor(g_sizes, dtype=torch.int32, device=device)
    d_g_lds = torch.tensor(g_lds, dtype=torch.int32, device=device)
    grid = lambda META: (META["NUM_SM"],)  # noqa: E731
    grouped_matmul_kernel[grid](d_a_ptrs, d_b_ptrs, d_c_ptrs, d_g_sizes, d_g_lds, group_size)
    return group_C


def test_group_gemm_tutorial_values_and_tuning(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    assert not supports_tma() and num_sms() == 148  # the tutorial's non-CUDA branch
    group_m = [256, 128, 128]
    group_n = [128, 256, 128]
    group_k = [128, 128, 256]
    group_A, group_B = [], []
    for M, N, K in zip(group_m, group_n, group_k, strict=True):
        group_A.append(torch.rand((M, K), device=device, dtype=torch.float16))
        group_B.append(torch.rand((K, N), device=device, dtype=torch.float16))
    tri_out = group_gemm_fn(group_A, group_B, device)
    ref_out = [torch.matmul(a, b) for a, b in zip(group_A, group_B, strict=True)]
    for i in range(len(group_m)):
        assert torch.allclose(ref_out[i], tri_out[i], atol=1e-2, rtol=0)
        want = group_A[i].numpy().astype(np.float32) @ group_B[i].numpy().astype(np.float32)
        np.testing.assert_allclose(tri_out[i].numpy(), want.astype(np.float16), rtol=2e-3)
    assert len(grouped_matmul_kernel.configs_timings) == 6
    best = grouped_matmul_kernel.best_config
    assert grouped_matmul_kernel.configs_timings[best] == min(
        grouped_matmul_kernel.configs_timings.values()
    )


def triton_perf_fn(a_ptrs, b_ptrs, c_ptrs, sizes, lds, group_size):
    grid = lambda META: (META["NUM_SM"],)  # noqa: E731
    grouped_matmul_kernel[grid](a_ptrs, b_ptrs, c_ptrs, sizes, lds, group_size)


def torch_perf_fn(group_A, group_B):
    for a, b in zip(group_A, group_B, strict=True):
        torch.matmul(a, b)


def test_group_gemm_tutorial_benchmark(ctx, capsys):
    device = triton.runtime.driver.active.get_active_torch_device()

    @triton.testing.perf_report(
        triton.testing.Benchmark(
            x_names=["N"],
            x_vals=[2**i for i in range(7, 9)],
            line_arg="provider",
            line_vals=["cublas", "triton"] + (["triton-tma"] if supports_tma() else []),
            line_names=["cuBLAS", "Triton"] + (["Triton + TMA"] if supports_tma() else []),
            styles=[("green", "-"), ("blue", "-")] + ([("red", "-")] if supports_tma() else []),
            ylabel="runtime(ms)",
            plot_name="group-gemm-performance",
            args={},
        )
    )
    def benchmark_square_matrices(N, provider):
        group_size = 4
        group_A, group_B, A_addrs, B_addrs, C_addrs, g_sizes, g_lds = [], [], [], [], [], [], []
        group_C = []
        for _ in range(group_size):
            A = torch.rand((N, N), device=device, dtype=torch.float16)
            B = torch.rand((N, N), device=device, dtype=torch.float16)
            C = torch.empty((N, N), device=device, dtype=torch.float16)
            group_A.append(A)
            group_B.append(B)
            group_C.append(C)
            A_addrs.append(A.data_ptr())
            B_addrs.append(B.data_ptr())
            C_addrs.append(C.data_ptr())
            g_sizes += [N, N, N]
            g_lds += [N, N, N]
        d_a_ptrs = torch.tensor(A_addrs, device=device)
        d_b_ptrs = torch.tensor(B_addrs, device=device)
        d_c_ptrs = torch.tensor(C_addrs, device=device)
        d_g_sizes = torch.tensor(g_sizes, dtype=torch.int32, device=device)
        d_g_lds = torch.tensor(g_lds, dtype=torch.int32, device=device)
        quantiles = [0.5, 0.2, 0.8]
        if provider == "cublas":
            ms, min_ms, max_ms = triton.testing.do_bench(
                lambda: torch_perf_fn(group_A, group_B), quantiles=quantiles
            )
        if provider == "triton":
            ms, min_ms, max_ms = triton.testing.do_bench(
                lambda: triton_perf_fn(
                    d_a_ptrs, d_b_ptrs, d_c_ptrs, d_g_sizes, d_g_lds, group_size
                ),
                quantiles=quantiles,
            )
            for a, b, c in zip(group_A, group_B, group_C, strict=True):
                assert torch.allclose(torch.matmul(a, b), c, atol=1e-2, rtol=0)
        return ms, max_ms, min_ms

    benchmark_square_matrices.run(show_plots=True, print_data=True)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "group-gemm-performance:"
    assert printed[1].split() == ["N", "cuBLAS", "Triton"]
    rows = benchmark_square_matrices.tables["group-gemm-performance"].rows
    assert [row[0] for row in rows] == [128, 256]
    assert all(row[1] > 0 and row[2] > 0 for row in rows)


def _address_tables(tensors, device):
    return torch.tensor([t.data_ptr() for t in tensors], device=device)


def test_group_gemm_charges_the_tensors_behind_the_addresses(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    A = torch.rand((128, 64), device=device, dtype=torch.float16)
    B = torch.rand((64, 128), device=device, dtype=torch.float16)
    C = torch.empty((128, 128), device=device, dtype=torch.float16)
    sizes = torch.tensor([128, 128, 64], dtype=torch.int32, device=device)
    lds = torch.tensor([64, 128, 128], dtype=torch.int32, device=device)
    a_ptrs, b_ptrs, c_ptrs = (_address_tables([t], device) for t in (A, B, C))
    run = grouped_matmul_kernel.fn[(4,)](
        a_ptrs, b_ptrs, c_ptrs, sizes, lds, 1, NUM_SM=4, BLOCK_SIZE_M=64, BLOCK_SIZE_N=64,
        BLOCK_SIZE_K=32,
    )  # fmt: skip
    np.testing.assert_allclose(
        C.numpy(), (A.numpy().astype(np.float32) @ B.numpy()).astype(np.float16), rtol=2e-3
    )
    traffic = {}
    for program in run.record.programs:
        for t in program.traffic:
            loaded, stored = traffic.get(t.buffer, (0, 0))
            traffic[t.buffer] = (loaded + t.bytes_loaded, stored + t.bytes_stored)
    # four 64x64 tiles, each reading a 64-row stripe of A and a 64-column one of B
    name = lambda t: t.device_tensor.name  # noqa: E731
    assert traffic[name(A)] == (4 * 64 * 64 * 2, 0)
    assert traffic[name(B)] == (4 * 64 * 64 * 2, 0)
    assert traffic[name(C)] == (0, 128 * 128 * 2)
    assert traffic[name(a_ptrs)] == (4 * 8, 0)
    assert run.record.matrix_flops == 2 * 128 * 128 * 64


@triton.jit
def _follow(addr_ptr, out_ptr, AS: tl.constexpr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    src = tl.load(addr_ptr + offsets).to(tl.pointer_type(AS))
    tl.store(out_ptr + offsets, tl.load(src).to(tl.float32))


def test_loaded_addresses_refused_where_they_cannot_be_followed(ctx):
    device = triton.runtime.driver.active.get_active_torch_device()
    x = torch.rand(8, device=device, dtype=torch.float16)
    y = torch.rand(8, device=device)
    out = torch.empty(8, device=device)
    # a block of addresses inside one tensor is a block pointer into it
    elements = torch.tensor([x.data_ptr() + 2 * i for i in (7, 0, 3, 3, 1, 2, 6, 5)])
    _follow[(1,)](elements, out, AS=tl.float16, N=8)
    np.testing.assert_array_equal(out.numpy(), x.numpy()[[7, 0, 3, 3, 1, 2, 6, 5]])
    # a view's data_ptr() is its first element's address in the tensor it views
    m = torch.rand((4, 8), device=device, dtype=torch.float16)
    row = m[2]
    _follow[(1,)](torch.tensor([row.data_ptr() + 2 * i for i in range(8)]), out, tl.float16, 8)
    np.testing.assert_array_equal(out.numpy(), m.numpy()[2])
    with pytest.raises(KernelError, match=r"is in tensor '.*' of tl\.float16; .*pointer_type"):
        _follow[(1,)](_address_tables([x], device), out, AS=tl.float32, N=1)
    with pytest.raises(KernelError, match="are in different tensors"):
        _follow[(1,)](_address_tables([x, y], device), out, AS=tl.float16, N=2)
    with pytest.raises(KernelError, match="is in no live tensor"):
        _follow[(1,)](torch.tensor([12345, 0]), out, AS=tl.float16, N=2)
    with pytest.raises(KernelError, match="not on an element boundary"):
        _follow[(1,)](torch.tensor([x.data_ptr() + 1, 0]), out, AS=tl.float16, N=1)


@triton.jit
def _cast_to_pointer(x_ptr, out_ptr):
    tl.store(out_ptr, tl.load(tl.load(x_ptr).to(tl.pointer_type(tl.float32))))


def test_addresses_need_a_functional_device_run():
    with pytest.raises(KernelError, match="only integer addresses"):
        _cast_to_pointer[(1,)](np.zeros(1, np.float32), np.zeros(1, np.float32))
    with pytest.raises(KernelError, match="only in a kernel running on the simulated machine"):
        _cast_to_pointer[(1,)](np.zeros(1, np.int64), np.zeros(1, np.float32))
    with use_context(RuntimeContext("tiny", timing_only=True)):
        x = torch.zeros(4, dtype=torch.int64)
        with pytest.raises(KernelError, match="a timing-only run carries no values"):
            _cast_to_pointer[(1,)](x, torch.zeros(4))


# ----------------------------------------------------------------------------- 09 persistent matmul


def _matmul_launch_metadata(grid, kernel, args):
    M, N, K = args["M"], args["N"], args["K"]
    bytes_per_elem = args["c_ptr"].element_size()
    return {
        "name": f"{kernel.name} [M={M}, N={N}, K={K}]",
        f"flops{bytes_per_elem * 8}": 2.0 * M * N * K,
        "bytes": bytes_per_elem * (M * K + N * K + M * N),
    }


def matmul_get_configs(pre_hook=None):
    return [
        triton.Config(
            {"BLOCK_SIZE_M": BM, "BLOCK_SIZE_N": BN, "BLOCK_SIZE_K": BK, "GROUP_SIZE_M": 8},
            num_stages=s,
            num_warps=w,
            pre_hook=pre_hook,
        )
        for BM in [128]
        for BN in [128, 256]
        for BK in [64, 128]
        for s in [2, 3, 4]
        for w in [4, 8]
    ]


@triton.autotune(configs=matmul_get_configs(), key=["M", "N", "K"])
@triton.jit(launch_metadata=_matmul_launch_metadata)
def matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
    stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr,
):  # fmt: skip
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (pid % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    start_m = pid_m * BLOCK_SIZE_M
    start_n = pid_n * BLOCK_SIZE_N
    offs_am = start_m + tl.arange(0, BLOCK_SIZE_M)
    offs_bn = start_n + tl.arange(0, BLOCK_SIZE_N)
    offs_am = tl.where(offs_am < M, offs_am, 0)
    offs_bn = tl.where(offs_bn < N, offs_bn, 0)
    offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M)
    offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N)
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

    if c_ptr.dtype.element_ty == tl.float8e4nv:
        c = accumulator.to(tl.float8e4nv)
    else:
        c = accumulator.to(tl.float16)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


def matmul(a, b):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.dtype == b.dtype, "Incompatible dtypes"
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda META: (  # noqa: E731
        triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),
    )
    matmul_kernel[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1),
    )  # fmt: skip
    return c


@triton.jit
def _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS):
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + (tile_id % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.autotune(configs=matmul_get_configs(), key=["M", "N", "K"])
@triton.jit(launch_metadata=_matmul_launch_metadata)
def matmul_kernel_persistent(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
    stride_cn, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr, NUM_SMS: tl.constexpr,
):  # fmt: skip
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n

    # the epilogue walks the tiles with a counter of its own, as the tutorial does
    tile_id_c = start_pid - NUM_SMS

    offs_k_for_mask = tl.arange(0, BLOCK_SIZE_K)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n

    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _compute_pid(tile_id, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
        start_m = pid_m * BLOCK_SIZE_M
        start_n = pid_n * BLOCK_SIZE_N
        offs_am = start_m + tl.arange(0, BLOCK_SIZE_M)
        offs_bn = start_n + tl.arange(0, BLOCK_SIZE_N)
        offs_am = tl.where(offs_am < M, offs_am, 0)
        offs_bn = tl.where(offs_bn < N, offs_bn, 0)
        offs_am = tl.max_contiguous(tl.multiple_of(offs_am, BLOCK_SIZE_M), BLOCK_SIZE_M)
        offs_bn = tl.max_contiguous(tl.multiple_of(offs_bn, BLOCK_SIZE_N), BLOCK_SIZE_N)

        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K + tl.arange(0, BLOCK_SIZE_K)
            a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
            b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

            a = tl.load(a_ptrs, mask=offs_k_for_mask[None, :] < K - ki * BLOCK_SIZE_K, other=0.0)
            b = tl.load(b_ptrs, mask=offs_k_for_mask[:, None] < K - ki * BLOCK_SIZE_K, other=0.0)
            accumulator = tl.dot(a, b, accumulator)

        tile_id_c += NUM_SMS
        pid_m, pid_n = _compute_pid(tile_id_c, num_pid_in_group, num_pid_m, GROUP_SIZE_M, NUM_SMS)
        offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
        offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
        c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
        c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
        if c_ptr.dtype.element_ty == tl.float8e4nv:
            c = accumulator.to(tl.float8e4nv)
        else:
            c = accumulator.to(tl.float16)
        tl.store(c_ptrs, c, mask=c_mask)


def matmul_persistent(a, b):
    assert a.shape[1] == b.shape[0], "Incompatible dimensions"
    assert a.dtype == b.dtype, "Incompatible dtypes"
    NUM_SMS = torch.cuda.get_device_properties("cuda").multi_processor_count
    M, K = a.shape
    K, N = b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = lambda META: (  # noqa: E731
        min(NUM_SMS, triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"])),
    )
    matmul_kernel_persistent[grid](
        a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), NUM_SMS=NUM_SMS,
    )  # fmt: skip
    return c


def test_persistent_matmul_tutorial_matches_the_naive_one_and_torch(ctx):
    assert not supports_tma()  # the tutorial's TMA kernels are not run (see the refusals)
    M, N, K = 384, 256, 200  # partial tiles along M and K
    a = torch.randn((M, K), device="cuda", dtype=torch.float16)
    b = torch.randn((K, N), device="cuda", dtype=torch.float16)
    b = b.T.contiguous()
    torch_result = torch.matmul(a, b.T)
    naive_result = matmul(a, b.T)
    persistent_result = matmul_persistent(a, b.T)
    assert torch.allclose(torch_result, naive_result, atol=1e-1, rtol=1e-2)
    assert torch.allclose(torch_result, persistent_result, atol=1e-1, rtol=1e-2)
    want = (a.numpy().astype(np.float32) @ b.numpy().T.astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(persistent_result.numpy(), want, rtol=2e-3, atol=2e-3)
    np.testing.assert_array_equal(persistent_result.numpy(), naive_result.numpy())
    # a program per PE, each walking the tiles NUM_SMS apart
    assert torch.cuda.get_device_properties("cuda").multi_processor_count == 4
    assert len(matmul_kernel_persistent.configs_timings) == 24


@triton.jit
def _to_fp8(x_ptr):
    tl.load(x_ptr).to(tl.float8e4nv)


def test_persistent_matmul_tutorial_parts_that_are_not_modelled_say_so(ctx):
    from kernbench.triton.tools.tensor_descriptor import TensorDescriptor

    a = torch.randn((64, 64), device="cuda", dtype=torch.float16)
    with pytest.raises(KernelError, match=r"TensorDescriptor\.from_tensor.*tl\.make_block_ptr"):
        TensorDescriptor.from_tensor(a, [32, 32])
    with pytest.raises(KernelError, match=r"TensorDescriptor\(\.\.\.\): TMA"):
        TensorDescriptor(a, a.shape, a.stride(), [32, 32])
    with pytest.raises(UnsupportedNameError, match=r"tl\.make_tensor_descriptor .*make_block_ptr"):
        tl.make_tensor_descriptor  # noqa: B018
    with pytest.raises(UnsupportedNameError, match=r"triton\.set_allocator .*not modelled"):
        triton.set_allocator  # noqa: B018
    with pytest.raises(UnsupportedNameError, match="no compute capability"):
        torch.cuda.get_device_capability()
    with pytest.raises(UnsupportedNameError, match=r"properties\.major .*no compute capability"):
        torch.cuda.get_device_properties("cuda").major  # noqa: B018
    assert not hasattr(torch, "float8_e4m3fn")  # the tutorial's fp8 check takes this
    with pytest.raises(KernelError, match=r"\.to\(tl\.float8e4nv\): tl\.float8e4nv values are"):
        _to_fp8[(1,)](a)


def test_device_properties_in_torch_terms(ctx):
    props = torch.cuda.get_device_properties("cuda")
    driver = triton.runtime.driver.active.utils.get_device_properties(0)
    assert props.multi_processor_count == driver["multiprocessor_count"] == 4
    assert props.shared_memory_per_block == driver["max_shared_mem"]
    assert props.total_memory == driver["hbm_bytes"]
    assert props.warp_size == 1
    assert props.name == torch.cuda.get_device_name(0)


def test_persistent_programs_walk_the_tiles_num_sms_apart(ctx):
    a = torch.randn((384, 128), device="cuda", dtype=torch.float16)
    b = torch.randn((128, 256), device="cuda", dtype=torch.float16)
    c = torch.empty((384, 256), device="cuda", dtype=torch.float16)
    run = matmul_kernel_persistent.fn[(4,)](
        a, b, c, 384, 256, 128, 128, 1, 256, 1, 256, 1, BLOCK_SIZE_M=128, BLOCK_SIZE_N=128,
        BLOCK_SIZE_K=64, GROUP_SIZE_M=8, NUM_SMS=4,
    )  # fmt: skip
    # six 128x128 tiles over four programs: programs 0 and 1 take two, each tile two k-steps
    assert [p.dots for p in run.record.programs] == [4, 4, 2, 2]
    want = (a.numpy().astype(np.float32) @ b.numpy().astype(np.float32)).astype(np.float16)
    np.testing.assert_allclose(c.numpy(), want, rtol=2e-3, atol=2e-3)


@triton.jit
def _recast(x_ptr, AS: tl.constexpr):
    tl.load(x_ptr.to(AS))


def test_pointer_casts_keep_the_element_type(ctx):
    x = torch.rand(4, device="cuda", dtype=torch.float16)
    _recast[(1,)](x, AS=tl.pointer_type(tl.float16))
    with pytest.raises(KernelError, match=r"cannot convert a pointer to pointer<tl\.float16>"):
        _recast[(1,)](x, AS=tl.pointer_type(tl.int16))
    with pytest.raises(KernelError, match=r"into tl\.int64 here: a pointer is a buffer"):
        _recast[(1,)](x, AS=tl.int64)
