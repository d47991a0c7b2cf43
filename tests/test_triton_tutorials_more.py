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
