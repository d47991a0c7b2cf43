"""``triton.autotune``, ``triton.Config`` and ``triton.heuristics`` on the simulated machine.

Autotuning measures every config in simulation: the config kept is the one
whose launch took the least simulated time, tuning happens once per key, it
runs on the clock, and it leaves no trace in the outputs when
``restore_value`` / ``reset_to_zero`` say which arguments it writes.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.triton as triton
import kernbench.triton.language as tl
from kernbench.errors import KernelError
from kernbench.runtime import RuntimeContext, use_context

BLOCKS = (256, 4096, 1024)  # in this order the fastest is neither first nor last


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        torch.manual_seed(0)
        yield context


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


@triton.jit
def increment_kernel(x_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1.0, mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    total = tl.load(out_ptr + offsets, mask=mask) + tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, total, mask=mask)


def grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK_SIZE"]),)


def configs(blocks=BLOCKS):
    return [triton.Config({"BLOCK_SIZE": b}, num_warps=4) for b in blocks]


def tuned(kernel, blocks=BLOCKS, **options):
    return triton.autotune(configs=configs(blocks), key=["n"], **options)(kernel)


def alone_ps(x, n, block):
    """The simulated time of one config's launch, outside the autotuner."""
    out = torch.empty_like(x)
    return scale_kernel[grid](x, out, n, BLOCK_SIZE=block).elapsed_ps


@pytest.mark.parametrize("blocks", [BLOCKS, BLOCKS[::-1]])
def test_the_config_kept_is_the_one_that_ran_fastest_in_simulation(ctx, blocks):
    kernel = tuned(scale_kernel, blocks)
    x = torch.rand(8192)
    out = torch.empty_like(x)
    kernel[grid](x, out, 8192)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 2)

    alone = {b: alone_ps(x, 8192, b) for b in blocks}
    assert len(set(alone.values())) == len(blocks)  # the configs really differ
    fastest = min(alone, key=alone.get)
    assert kernel.best_config.kwargs == {"BLOCK_SIZE": fastest}
    assert kernel.cache[(8192, "torch.float32", "torch.float32")] is kernel.best_config
    record = kernel.tuning_records[0]
    assert dict(record.timings_ps) == {
        str(c): alone[c.kwargs["BLOCK_SIZE"]] for c in configs(blocks)
    }
    assert record.best == str(kernel.best_config)
    ms = {c.kwargs["BLOCK_SIZE"]: t for c, t in kernel.configs_timings.items()}
    assert ms == {b: [alone[b] / 1e9] * 3 for b in blocks}


def test_tuning_runs_on_the_clock_once_per_key(ctx):
    kernel = tuned(scale_kernel)
    x = torch.rand(8192)
    out = torch.empty_like(x)
    start = ctx.now
    first = kernel[grid](x, out, 8192)
    record = kernel.tuning_records[0]
    # every config once (no hooks), then the chosen one: the launch the caller gets
    assert record.tuning_ps == sum(ps for _, ps in record.timings_ps)
    assert ctx.now - start == record.tuning_ps + first.elapsed_ps
    assert first.elapsed_ps == dict(record.timings_ps)[record.best]

    start = ctx.now
    again = kernel[grid](x, out, 8192)
    assert ctx.now - start == again.elapsed_ps == first.elapsed_ps
    assert len(kernel.tuning_records) == 1  # same key: no tuning

    y = torch.rand(4096)
    kernel[grid](y, torch.empty_like(y), 4096)
    assert len(kernel.tuning_records) == 2
    assert set(kernel.cache) == {
        (8192, "torch.float32", "torch.float32"),
        (4096, "torch.float32", "torch.float32"),
    }


def test_restore_value_leaves_one_launch_worth_of_effect(ctx):
    x = torch.rand(5000)
    before = x.numpy()
    kernel = tuned(increment_kernel, restore_value=["x_ptr"])
    kernel[grid](x, 5000)
    np.testing.assert_array_equal(x.numpy(), before + 1)


def test_without_restore_value_every_tuning_run_writes_the_output(ctx):
    x = torch.rand(5000)
    before = x.numpy()
    kernel = tuned(increment_kernel)
    kernel[grid](x, 5000)
    np.testing.assert_allclose(x.numpy(), before + len(BLOCKS) + 1, rtol=1e-6)


def test_reset_to_zero_zeroes_before_each_run_and_before_the_chosen_one(ctx):
    x = torch.rand(3000)
    out = torch.ones(3000)
    kernel = tuned(accumulate_kernel, reset_to_zero=["out_ptr"])
    kernel[grid](x, out, 3000)
    np.testing.assert_array_equal(out.numpy(), x.numpy())


def test_hooks_are_on_the_clock_but_not_in_a_configs_time(ctx):
    x = torch.rand(5000)
    kernel = tuned(increment_kernel, restore_value=["x_ptr"])
    kernel[grid](x, 5000)
    record = kernel.tuning_records[0]
    assert record.tuning_ps > sum(ps for _, ps in record.timings_ps)  # clone + copy_ per config


def test_numpy_arguments_run_on_the_host_and_keep_the_first_config():
    kernel = tuned(scale_kernel)
    x = np.arange(3000, dtype=np.float32)
    out = np.zeros_like(x)
    kernel[grid](x, out, 3000)
    np.testing.assert_array_equal(out, x * 2)
    assert kernel.best_config == configs()[0]
    assert dict(kernel.tuning_records[0].timings_ps) == {str(c): 0 for c in configs()}


def test_host_restore_value_and_reset_to_zero_on_numpy_arrays():
    x = np.ones(1000, dtype=np.float32)
    triton.autotune(configs(), key=["n"], restore_value=["x_ptr"])(increment_kernel)[grid](x, 1000)
    np.testing.assert_array_equal(x, 2)
    out = np.full(1000, 7, dtype=np.float32)
    kernel = triton.autotune(configs(), key=["n"], reset_to_zero=["out_ptr"])(accumulate_kernel)
    kernel[grid](x, out, 1000)
    np.testing.assert_array_equal(out, x)


def test_prune_configs_by(ctx):
    seen = []

    def early(configs, named_args, **kwargs):
        seen.append(sorted(named_args))
        return [c for c in configs if c.kwargs["BLOCK_SIZE"] != 256]

    def perf_model(**kwargs):
        return -kwargs["BLOCK_SIZE"]  # predicts the largest block fastest

    x = torch.rand(2048)
    kernel = tuned(scale_kernel, prune_configs_by={"early_config_prune": early})
    kernel[grid](x, torch.empty_like(x), 2048)
    assert seen == [["n", "out_ptr", "x_ptr"]]
    assert {c for c, _ in kernel.tuning_records[0].timings_ps} == {
        str(c) for c in configs((4096, 1024))
    }

    kernel = tuned(scale_kernel, prune_configs_by={"perf_model": perf_model, "top_k": 1})
    kernel[grid](x, torch.empty_like(x), 2048)
    assert kernel.best_config.kwargs == {"BLOCK_SIZE": 4096}
    assert kernel.tuning_records == []  # one config left: nothing to measure

    with pytest.raises(KernelError, match="early_config_prune left no config"):
        tuned(scale_kernel, prune_configs_by={"early_config_prune": lambda c, a, **k: []})[grid](
            x, torch.empty_like(x), 2048
        )


def test_a_float_top_k_is_a_share_of_all_configs_as_in_triton(ctx):
    def early(configs, named_args, **kwargs):
        return [c for c in configs if c.kwargs["BLOCK_SIZE"] != 256]

    x = torch.rand(2048)
    prune = {"early_config_prune": early, "perf_model": lambda **kw: 0.0, "top_k": 0.5}
    kernel = tuned(scale_kernel, (256, 4096, 1024, 512), prune_configs_by=prune)
    kernel[grid](x, torch.empty_like(x), 2048)
    # int(4 configs * 0.5) = 2 to keep; the early prune left 3, so the model drops one
    assert [c for c, _ in kernel.tuning_records[0].timings_ps] == [
        str(c) for c in configs((4096, 1024))
    ]


def test_a_config_that_fails_is_skipped_and_all_failing_is_an_error(ctx):
    x = torch.rand(1000)
    out = torch.empty_like(x)
    too_big = 2**21  # more elements than a block may hold
    kernel = tuned(scale_kernel, (too_big, 256))
    kernel[grid](x, out, 1000)
    assert kernel.best_config.kwargs == {"BLOCK_SIZE": 256}
    assert dict(kernel.tuning_records[0].timings_ps)[str(configs((too_big,))[0])] is None
    with pytest.raises(KernelError, match="every config failed"):
        tuned(scale_kernel, (too_big, too_big * 2))[grid](x, out, 1000)


def test_autotune_errors_name_the_problem(ctx):
    x = torch.rand(1000)
    with pytest.raises(KernelError, match="conflicting meta-parameters BLOCK_SIZE"):
        tuned(scale_kernel)[grid](x, torch.empty_like(x), 1000, BLOCK_SIZE=128)
    with pytest.raises(KernelError, match="key names 'size', not parameters"):
        triton.autotune(configs(), key=["size"])(scale_kernel)
    with pytest.raises(KernelError, match=r"write key=\['n'\]"):
        triton.autotune(configs(), key="n")(scale_kernel)
    with pytest.raises(KernelError, match="must be triton.Config objects"):
        triton.autotune([{"BLOCK_SIZE": 128}], key=["n"])(scale_kernel)
    with pytest.raises(KernelError, match="unknown field"):
        triton.autotune(configs(), key=["n"], prune_configs_by={"topk": 1})(scale_kernel)
    with pytest.raises(KernelError, match="not a kernel"):
        triton.autotune(configs(), key=["n"])(lambda x: x)


def test_print_autotuning(ctx, monkeypatch, capsys):
    monkeypatch.setenv("TRITON_PRINT_AUTOTUNING", "1")
    x = torch.rand(2048)
    kernel = tuned(scale_kernel)
    kernel[grid](x, torch.empty_like(x), 2048)
    out = capsys.readouterr().out
    assert out.count("Autotuning kernel scale_kernel with config BLOCK_SIZE: ") == len(BLOCKS)
    assert "Triton autotuning for function scale_kernel,\nwith key as (2048," in out
    assert f"best config selected: {kernel.best_config} (" in out
    assert "ms of simulated time" in out


def test_a_single_config_is_not_measured(ctx):
    x = torch.rand(1000)
    out = torch.empty_like(x)
    kernel = triton.autotune([triton.Config({"BLOCK_SIZE": 512})], key=["n"])(scale_kernel)
    start = ctx.now
    launch = kernel[grid](x, out, 1000)
    assert ctx.now - start == launch.elapsed_ps
    assert kernel.tuning_records == [] and kernel.best_config.kwargs == {"BLOCK_SIZE": 512}


def test_config_matches_triton():
    config = triton.Config({"BLOCK_SIZE": 64}, num_warps=8, num_stages=2)
    assert config.all_kwargs() == {"BLOCK_SIZE": 64, "num_warps": 8, "num_ctas": 1, "num_stages": 2}
    assert str(config) == (
        "BLOCK_SIZE: 64, num_warps: 8, num_ctas: 1, num_stages: 2, maxnreg: None"
    )
    assert config == triton.Config({"BLOCK_SIZE": 64}, num_warps=8, num_stages=2)
    assert len({config, triton.Config({"BLOCK_SIZE": 64}, num_warps=8, num_stages=2)}) == 1
    assert config != triton.Config({"BLOCK_SIZE": 64})
    with pytest.raises(KernelError, match="dict of meta-parameters"):
        triton.Config(64)


def test_heuristics_set_meta_parameters_and_stack_under_autotune(ctx):
    @triton.heuristics({"BLOCK_SIZE": lambda args: triton.next_power_of_2(args["n"])})
    @triton.jit
    def whole(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offsets = tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)

    x = torch.rand(700)
    out = torch.empty_like(x)
    whole[(1,)](x, out, 700)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 2)
    assert whole.warmup(x, out, 700, grid=(1,)).constants["BLOCK_SIZE"] == 1024

    @triton.autotune(configs=[triton.Config({}, num_warps=w) for w in (2, 4)], key=["n"])
    @triton.heuristics({"BLOCK_SIZE": lambda args: 256})
    @triton.jit
    def blocked(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)

    blocked[grid](x, out, 700)
    np.testing.assert_array_equal(out.numpy(), x.numpy() * 2)
    assert blocked.best_config.num_warps == 2  # num_warps costs nothing here: a tie, first kept

    with pytest.raises(KernelError, match="must be a function"):
        triton.heuristics({"BLOCK_SIZE": 256})(scale_kernel)


def test_autotuner_warmup_compiles_every_config_without_running(ctx):
    x = torch.rand(4096)
    out = torch.empty_like(x)
    kernel = tuned(scale_kernel)
    start = ctx.now
    compiled = kernel.warmup(x, out, 4096, grid=grid)
    assert ctx.now == start
    assert [c.constants["BLOCK_SIZE"] for c in compiled] == list(BLOCKS)
    assert kernel.tuning_records == []
