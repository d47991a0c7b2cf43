"""The seed's runtime API: ``install_ipcq``, ``launch`` by name, ``ahbm``/``accelerator``.

``install_ipcq`` installs a catalogue configuration's neighbour tables and
returns the plan (rank -> (sip, cube, pe), rank -> neighbours); it shares its
record with the collectives' automatic install, so nothing is installed
twice.  ``launch`` runs a ``@jit`` kernel under a name.  The namespaces bind
the calling rank to a device, in agreement with ``torch.cuda``.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.kernels.language as tl
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import ConfigError, DistributedError, KernelError
from kernbench.kernels import jit
from kernbench.runtime import RuntimeContext, current_context


def _installs(ctx: RuntimeContext) -> list:
    return [row for row in ctx.trace if row.kind == "ipcq_install"]


# -------------------------------------------------------------------------- install_ipcq
def test_default_plan_is_the_run_all_reduce_choice_one_rank_per_device() -> None:
    ctx = RuntimeContext("multi_sip")
    plan = ctx.install_ipcq()
    assert plan["algorithm"] == "ring" and plan["world_size"] == 4
    assert plan["rank_to_pe"] == {r: (r, 0, 0) for r in range(4)}
    assert plan["neighbors"] == {0: (1, 3), 1: (0, 2), 2: (1, 3), 3: (0, 2)}
    assert plan["pe_neighbors"]["sip0.cube0.pe0"] == ("sip1.cube0.pe0", "sip3.cube0.pe0")
    assert "all_reduce" in plan["ops"] and plan["installed"]
    assert len(_installs(ctx)) == 4 and ctx.now > 0


def test_the_same_plan_twice_installs_once() -> None:
    ctx = RuntimeContext("multi_sip")
    first = ctx.install_ipcq("ring")
    now, rows = ctx.now, len(_installs(ctx))
    again = ctx.install_ipcq("ring")
    assert not again["installed"] and ctx.now == now and len(_installs(ctx)) == rows
    assert {k: v for k, v in again.items() if k != "installed"} == {
        k: v for k, v in first.items() if k != "installed"
    }


def test_a_different_plan_installs_its_own_tables_beside_the_first() -> None:
    ctx = RuntimeContext("multi_sip")
    ctx.install_ipcq("ring")
    plan = ctx.install_ipcq("binomial", world_size_override=2)
    assert plan["installed"] and plan["neighbors"] == {0: (1,), 1: (0,)}
    assert len(_installs(ctx)) == 4 + 2


def test_rank_to_pe_places_the_ranks() -> None:
    ctx = RuntimeContext("default")
    plan = ctx.install_ipcq("ring", rank_to_pe=[(0, 0, 0), (0, 0, 1), (0, 1, 0)])
    assert plan["world_size"] == 3
    assert plan["rank_to_pe"] == {0: (0, 0, 0), 1: (0, 0, 1), 2: (0, 1, 0)}
    assert set(plan["pe_neighbors"]) == {"sip0.cube0.pe0", "sip0.cube0.pe1", "sip0.cube1.pe0"}


def _explicit_then_all_reduce(explicit: bool):
    ctx = current_context()
    dist.init_process_group()
    if explicit and dist.get_rank() == 0:
        ctx.install_ipcq("ring")
    dist.barrier(algorithm="dissemination")
    t = torch.ones(16) * (dist.get_rank() + 1)
    dist.all_reduce(t, algorithm="ring")
    return t[0].item()


@pytest.mark.parametrize("explicit", [False, True], ids=["automatic", "explicit"])
def test_a_collective_after_an_explicit_install_installs_nothing_more(explicit) -> None:
    result = kernbench.simulate(_explicit_then_all_reduce, topology="multi_sip", args=(explicit,))
    assert result.returns == [10.0] * 4
    ring_rows = [row for row in _installs(result.context) if row.tag == "ring plan"]
    assert len(ring_rows) == 4  # four PEs, installed once: by the call or by the collective


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"algorithm": "auto"}, DistributedError, "does not name one configuration"),
        ({"algorithm": "no_such"}, Exception, "no_such"),
        ({"world_size_override": 0}, DistributedError, "world_size_override must be"),
        ({"world_size_override": 5}, DistributedError, "(valid: 1..4)"),
        ({"rank_to_pe": [(0, 0, 0), (0, 0, 0)]}, DistributedError, "two ranks on one PE"),
        ({"rank_to_pe": [(9, 0, 0)]}, DistributedError, "is not a PE of this machine"),
        ({"rank_to_pe": [(0, 0)]}, DistributedError, "must be a (sip, cube, pe) triple"),
        (
            {"rank_to_pe": [(0, 0, 0)], "world_size_override": 2},
            DistributedError,
            "rank_to_pe has 1 entries but the plan has 2 ranks",
        ),
        (
            {"algorithm": "ring_tcm_8"},
            DistributedError,
            "configuration 'ring_tcm_8' asks for 8 ranks but the machine has 4 devices",
        ),
        (
            {"algorithm": "mesh_2x2", "world_size_override": 3},
            DistributedError,
            "configuration 'mesh_2x2' cannot run on these 3 ranks",
        ),
    ],
    ids=[
        "auto",
        "unknown",
        "zero",
        "too-many",
        "duplicate",
        "off-machine",
        "not-triple",
        "count",
        "pinned-size",
        "unfit",
    ],
)
def test_install_ipcq_errors_name_the_argument(kwargs, error, message) -> None:
    ctx = RuntimeContext("multi_sip")
    with pytest.raises(error) as info:
        ctx.install_ipcq(**kwargs)
    assert message in str(info.value)
    assert isinstance(info.value, kernbench.KernBenchError)


def test_install_ipcq_without_an_installer_says_what_to_import(monkeypatch) -> None:
    from kernbench.runtime import ipcq_install

    previous = ipcq_install.set_ipcq_installer(None)
    try:
        with pytest.raises(ConfigError, match="import kernbench.torch.distributed"):
            RuntimeContext("tiny").install_ipcq()
    finally:
        ipcq_install.set_ipcq_installer(previous)


def test_an_installer_must_be_callable() -> None:
    from kernbench.runtime import ipcq_install

    with pytest.raises(ConfigError, match="must be callable"):
        ipcq_install.set_ipcq_installer("ring")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------- launch
@jit
def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def test_launch_runs_a_kernel_by_name_on_the_machine() -> None:
    ctx = RuntimeContext("tiny")
    x = ctx.zeros((64,), "float32")
    x.copy_(np.arange(64, dtype=np.float32))
    out = ctx.empty((64,), "float32")
    before = ctx.now
    result = ctx.launch("add_one", add_one, x, out, 64, grid=(4,), BLOCK=16)
    np.testing.assert_array_equal(out.numpy(), np.arange(64, dtype=np.float32) + 1)
    assert ctx.kernels["add_one"] is add_one
    assert result.elapsed_ps > 0 and ctx.now > before


@pytest.mark.parametrize(
    ("name", "fn", "message"),
    [("", add_one, "kernel_name must be a non-empty str"), ("f", len, "must be a @jit kernel")],
    ids=["name", "kernel"],
)
def test_launch_checks_its_arguments(name, fn, message) -> None:
    with pytest.raises(KernelError, match=message):
        RuntimeContext("tiny").launch(name, fn)


# ---------------------------------------------------------------------- device namespaces
def test_namespaces_are_unbound_outside_ranks() -> None:
    ctx = RuntimeContext("multi_sip")
    assert ctx.ahbm.current_device() is None
    assert ctx.accelerator.current_device_index() is None
    assert ctx.ahbm.device_count() == ctx.accelerator.device_count() == 4


def _bind(use_accelerator: bool):
    ctx = current_context()
    dist.init_process_group()
    rank = dist.get_rank()
    target = (rank + 1) % dist.get_world_size()
    if use_accelerator:
        ctx.accelerator.set_device_index(target)
    else:
        ctx.ahbm.set_device(target)
    t = torch.ones(4)
    return (
        ctx.ahbm.current_device(),
        ctx.accelerator.current_device_index(),
        torch.cuda.current_device(),
        t.get_device(),
    )


@pytest.mark.parametrize("use_accelerator", [False, True], ids=["ahbm", "accelerator"])
def test_namespaces_bind_the_calling_rank_as_torch_cuda_does(use_accelerator) -> None:
    result = kernbench.simulate(_bind, topology="multi_sip", args=(use_accelerator,))
    for rank, bound in enumerate(result.returns):
        assert bound == ((rank + 1) % 4,) * 4


def test_set_device_out_of_range_names_the_valid_devices() -> None:
    ctx = RuntimeContext("multi_sip")
    with pytest.raises(kernbench.KernBenchError, match=r"valid: 0\.\.3"):
        ctx.ahbm.set_device(4)
