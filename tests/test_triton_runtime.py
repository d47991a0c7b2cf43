"""``triton.testing``, ``triton.runtime.driver``, ``kernel.warmup`` and ``tl.range``."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError, PlacementError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.triton.runtime import driver


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


# ----------------------------------------------------------------------------- do_bench


def test_do_bench_modes_and_quantiles_all_give_the_one_simulated_time(ctx):
    x = torch.rand(2048)
    out = torch.empty_like(x)
    calls = []

    def fn():
        calls.append(ctx.now)
        return copy_kernel[(2,)](x, out, 2048, BLOCK_SIZE=1024)

    ms = triton.testing.do_bench(fn)
    assert len(calls) == 2  # one call to warm up, one measured
    assert ms == fn().elapsed_ps / 1e9
    for mode in ("min", "max", "median", "mean"):
        assert triton.testing.do_bench(fn, return_mode=mode) == ms
    assert triton.testing.do_bench(fn, return_mode="all") == [ms]
    assert triton.testing.do_bench(fn, quantiles=[0.5]) == ms
    assert triton.testing.do_bench(fn, warmup=1, rep=1, quantiles=(0.5, 0.2, 0.8)) == [ms] * 3


def test_do_bench_of_nothing_on_the_machine_is_zero(ctx):
    assert triton.testing.do_bench(lambda: None) == 0.0


def test_do_bench_errors(ctx):
    with pytest.raises(KernelError, match="return_mode 'avg' is not one of min, max"):
        triton.testing.do_bench(lambda: None, return_mode="avg")
    with pytest.raises(KernelError, match=r"quantiles must lie in \[0, 1\]"):
        triton.testing.do_bench(lambda: None, quantiles=[50])
    with pytest.raises(KernelError, match="needs a function"):
        triton.testing.do_bench(3)


def test_do_bench_cudagraph_is_the_same_measurement(ctx):
    x = torch.rand(2048)
    out = torch.empty_like(x)

    def fn():
        return copy_kernel[(2,)](x, out, 2048, BLOCK_SIZE=1024)

    ms = triton.testing.do_bench(fn)
    assert triton.testing.do_bench_cudagraph(fn) == ms > 0
    assert triton.testing.do_bench_cudagraph(fn, rep=5, quantiles=[0.5, 0.2]) == [ms, ms]
    assert triton.testing.do_bench_cudagraph(fn, return_mode="all") == [ms]
    with pytest.raises(KernelError, match="do_bench_cudagraph: return_mode 'avg'"):
        triton.testing.do_bench_cudagraph(fn, return_mode="avg")


def test_assert_close_reads_tensors_back(ctx):
    x = torch.rand(10)
    triton.testing.assert_close(x, x.numpy() + 0.001)
    with pytest.raises(AssertionError):
        triton.testing.assert_close(x, x.numpy() + 1)


def test_assert_close_takes_tolerances_as_functions_of_the_dtype(ctx):
    x = torch.rand(10, dtype=torch.float16)
    seen = []

    def atol(dtype):
        seen.append(dtype)
        return 0.05 if dtype == torch.float16 else 1e-6

    triton.testing.assert_close(x, x.numpy().astype(np.float32) + 0.02, atol=atol)
    triton.testing.assert_close(x, x.numpy() * 1.1, atol=0, rtol=lambda dtype: 0.2)
    with pytest.raises(AssertionError):
        triton.testing.assert_close(np.float32(1.0), 1.02, atol=atol)
    assert seen == [torch.float16, torch.float32]


# ----------------------------------------------------------------------------- perf_report


def test_perf_report_sweeps_prints_and_saves(tmp_path, capsys):
    calls = []

    @triton.testing.perf_report(
        [
            triton.testing.Benchmark(
                x_names=["M", "N"],
                x_vals=[2, (3, 4)],
                line_arg="provider",
                line_vals=["a", "b"],
                line_names=["A", "B"],
                plot_name="first",
                args={"scale": 10},
            ),
            triton.testing.Benchmark(
                x_names=["M"],
                x_vals=[1],
                line_arg="provider",
                line_vals=["a"],
                line_names=["A"],
                plot_name="second",
                args={},
                y_log=True,
            ),
        ]
    )
    def bench(M, provider, scale=1, N=0, extra=0):
        calls.append((M, N, provider, scale, extra))
        value = float(M * scale + N + extra)
        return (value, value - 1, value + 1) if provider == "a" else value

    assert bench.run(print_data=True, save_path=str(tmp_path), extra=0.5) is None
    assert calls[:4] == [
        (2, 2, "a", 10, 0.5),
        (2, 2, "b", 10, 0.5),
        (3, 4, "a", 10, 0.5),
        (3, 4, "b", 10, 0.5),
    ]
    table = bench.tables["first"]
    assert table.columns == ("M", "N", "A", "B")
    assert table.rows == ((2, 2, 22.5, 22.5), (3, 4, 34.5, 34.5))
    assert table.mins == ((21.5, None), (33.5, None))
    out = capsys.readouterr().out
    assert out.startswith("first:\n")
    assert "second:" in out
    assert (
        tmp_path / "first.csv"
    ).read_text() == "M,N,A,B\n2,2,22.500000,22.500000\n3,4,34.500000,34.500000\n"
    assert (tmp_path / "second.png").exists()
    assert '<image src="first.png"/>' in (tmp_path / "results.html").read_text()
    assert set(bench.figures) == {"first", "second"}


def test_perf_report_errors():
    with pytest.raises(KernelError, match="x_names is a non-empty list"):
        triton.testing.Benchmark("N", [1], "p", ["a"], ["A"])
    with pytest.raises(KernelError, match="one name per line"):
        triton.testing.Benchmark(["N"], [1], "p", ["a", "b"], ["A"])
    mark = triton.testing.perf_report(triton.testing.Benchmark(["N"], [1], "p", ["a"], ["A"], "t"))(
        lambda N, p: (1, 2)
    )
    with pytest.raises(
        KernelError, match=r"returned 2 values; return one number or \(mean, min, max\)"
    ):
        mark.run()
    ok = triton.testing.perf_report(triton.testing.Benchmark(["N"], [1], "p", ["a"], ["A"], "t"))(
        lambda N, p: 1.0
    )
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(KernelError, match="needs pandas"):
            ok.run(return_df=True)
    else:
        assert list(ok.run(return_df=True).columns) == ["N", "A"]


# ----------------------------------------------------------------------------- driver


def test_driver_describes_the_simulated_device(ctx):
    active = triton.runtime.driver.active
    assert active is driver.active
    device = active.get_active_torch_device()
    assert device == torch.device("ahbm", 0) and device.index == 0
    target = active.get_current_target()
    assert (target.backend, target.arch, target.warp_size) == ("ahbm", "tiny", 1)
    props = active.utils.get_device_properties(device.index)
    topo = ctx.topology
    tcm = topo.cube.pe_template.components.pe_tcm.attrs.size_mb
    assert props["multiprocessor_count"] == topo.num_pes == 4
    assert props["max_shared_mem"] == props["tcm_bytes"] == tcm
    assert props["max_num_regs"] == tcm // 4
    assert props["warpSize"] == 1
    assert props["sm_clock_rate"] == topo.cube.pe_template.components.pe_core.attrs.clock // 1000
    assert props["hbm_bytes"] == topo.cube.memory_map.hbm_total_gb_per_cube
    assert active.get_benchmarker() is triton.testing.do_bench
    assert active.get_device_interface() is torch.cuda


def test_device_properties_per_device_level():
    ctx = RuntimeContext("tiny", overrides=["system.device_level=pe"])
    with use_context(ctx):
        props = driver.active.utils.get_device_properties(3)
        assert props["multiprocessor_count"] == 1
        with pytest.raises(PlacementError, match=r"device 4 does not exist; valid: 0\.\.3"):
            driver.active.utils.get_device_properties(4)
        torch.cuda.set_device(2)
        assert driver.active.get_active_torch_device() == torch.device("ahbm", 2)


# ----------------------------------------------------------------------------- warmup


def test_warmup_compiles_without_running(ctx):
    x = torch.rand(3000)
    out = torch.zeros(3000)
    start = ctx.now
    compiled = copy_kernel.warmup(x, out, 3000, BLOCK_SIZE=1024, num_warps=2, grid=(3,))
    assert ctx.now == start
    assert not out.numpy().any()
    assert compiled.metadata.shared == 1024 * 4 * 3  # one float32 tile of x, Triton's 3 stages
    assert compiled.metadata.num_warps == 2
    assert compiled.n_regs == 1024 // 2
    assert compiled.n_spills == 0
    compiled._init_handles()
    compiled[(3,)](x, out, 3000, 1024)
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    with pytest.raises(
        KernelError, match="compiled with BLOCK_SIZE=1024 but launched with BLOCK_SIZE=512"
    ):
        compiled[(6,)](x, out, 3000, 512)


def test_warmup_errors(ctx):
    x = torch.rand(100)
    with pytest.raises(KernelError, match="warmup needs grid="):
        copy_kernel.warmup(x, x, 100, BLOCK_SIZE=128, grid=None)
    with pytest.raises(KernelError, match="its parameters are x_ptr, out_ptr, n, BLOCK_SIZE"):
        copy_kernel.warmup(x, x, grid=(1,))
    with pytest.raises(KernelError, match="warmup of kernel 'copy_kernel' failed: .*out of bounds"):
        copy_kernel.warmup(x, x, 1000, BLOCK_SIZE=1024, grid=(1,))


def test_run_is_tritons_launch_entry_point(ctx):
    x = torch.rand(100)
    out = torch.empty_like(x)
    copy_kernel.run(x, out, 100, BLOCK_SIZE=128, grid=(1,))
    np.testing.assert_array_equal(out.numpy(), x.numpy())
    assert isinstance(
        copy_kernel.run(x, out, 100, BLOCK_SIZE=128, grid=(1,), warmup=True), triton.CompiledKernel
    )
    assert copy_kernel.arg_names == ["x_ptr", "out_ptr", "n", "BLOCK_SIZE"]


def test_jit_takes_tritons_keywords_only():
    @triton.jit(do_not_specialize=["n"], debug=False)
    def kernel(x_ptr, n):
        pass

    assert isinstance(kernel, triton.JITFunction)
    with pytest.raises(KernelError, match="unexpected keyword.*interpret.*valid: debug"):
        triton.jit(interpret=True)


# ----------------------------------------------------------------------------- tl.range


@triton.jit
def strided_rows(x_ptr, n, STAGES: tl.constexpr):
    for i in tl.range(tl.program_id(0), n, tl.num_programs(0), num_stages=STAGES):
        tl.store(x_ptr + i, tl.load(x_ptr + i) + 1.0)
    for j in tl.static_range(2):
        tl.store(x_ptr + j, tl.load(x_ptr + j) + 10.0)


def test_tl_range_and_static_range():
    x = np.zeros(10, dtype=np.float32)
    strided_rows[(3,)](x, 10, STAGES=2)
    expected = np.ones(10, dtype=np.float32)
    expected[:2] += 30  # every one of the 3 programs adds 10 to the first two
    np.testing.assert_array_equal(x, expected)
    assert list(tl.range(5)) == [0, 1, 2, 3, 4]
    assert list(tl.range(1, 8, 3, loop_unroll_factor=2)) == [1, 4, 7]
    assert list(tl.static_range(tl.constexpr(3))) == [0, 1, 2]
    assert len(tl.range(0, 10, 4)) == 3
    assert tl.assume(True) is None
    with pytest.raises(KernelError, match="tl.range step must not be zero"):
        tl.range(0, 4, 0)
    with pytest.raises(KernelError, match="tl.range stop must be an integer"):
        tl.range(0.5)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("argmax", r"tl.max\(x, axis, return_indices=True\)"),
        ("argmin", r"tl.min\(x, axis, return_indices=True\)"),
        ("gather", "not in KernBench's kernel language"),
        ("histogram", "not in KernBench's kernel language"),
        ("make_tensor_descriptor", "tl.make_block_ptr"),
    ],
)
def test_missing_language_names_say_what_to_use_instead(name, says):
    import kernbench.triton.language as tl_module
    from kernbench.errors import UnsupportedNameError

    with pytest.raises(UnsupportedNameError, match=f"tl\\.{name} is not in KernBench; .*{says}"):
        getattr(tl_module, name)


@pytest.mark.parametrize(
    ("module", "name", "says"),
    [
        (triton, "set_allocator", "tensor descriptors .* pointer arithmetic"),
        (triton, "autotun", "nearest: autotune"),
        (triton.testing, "get_dram_gbps", "get_device_properties"),
        (triton.testing, "set_gpu_clock", "no clock to pin"),
    ],
)
def test_missing_triton_names_say_what_to_use_instead(module, name, says):
    from kernbench.errors import UnsupportedNameError

    shown = module.__name__.removeprefix("kernbench.")
    with pytest.raises(
        UnsupportedNameError, match=f"{shown}\\.{name} is not in KernBench; .*{says}"
    ):
        getattr(module, name)
    assert not hasattr(module, name)


@pytest.mark.parametrize(
    ("entries", "message"),
    [
        ([5], "do_not_specialize position 5 is past its 2 parameters (x_ptr, n)"),
        (["m"], "do_not_specialize names 'm', not one of its parameters; valid: x_ptr, n"),
    ],
)
def test_do_not_specialize_names_a_parameter(entries, message):
    with pytest.raises(KernelError) as info:

        @triton.jit(do_not_specialize=entries)
        def kernel(x_ptr, n):
            pass

    assert message in str(info.value)


def test_do_not_specialize_by_name_or_position_is_the_same():
    def body(x_ptr, n):
        pass

    by_name = triton.jit(do_not_specialize=["n"])(body)
    by_position = triton.jit(do_not_specialize=[1])(body)
    from_end = triton.jit(do_not_specialize=[-1])(body)
    assert by_name.do_not_specialize == by_position.do_not_specialize == from_end.do_not_specialize
    assert by_name.do_not_specialize == {"n"}
