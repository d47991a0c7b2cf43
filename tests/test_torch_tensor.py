"""kernbench.torch: tensors, factories, dtypes, devices, events and seeding.

Values are checked against NumPy on the tiny machine (1 SIP, 1 cube, 4 PEs);
time is checked against the context's clock.
"""

from __future__ import annotations

import operator
import re

import numpy as np
import pytest

import kernbench.kernels.language as tl
import kernbench.torch as torch
from kernbench.distributed.scheduler import Scheduler
from kernbench.errors import PlacementError, SimulationError, TensorAttributeError, TensorError
from kernbench.kernels.jit import jit
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, as_dtype, use_context

TINY = "tiny"
PE_DEVICES = ["system.device_level=pe"]  # tiny with one device per PE: 4 devices
OPS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "div": operator.truediv}
IOPS = {"add": operator.iadd, "sub": operator.isub, "mul": operator.imul}


@pytest.fixture
def ctx():
    context = RuntimeContext(TINY)
    with use_context(context):
        yield context
    torch.manual_seed(0)


def _pe(t: torch.Tensor) -> str:
    return t.device_tensor.placements[0].pe_name


def _operands(kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "float32":
        a = np.linspace(-3.0, 5.0, 24, dtype=np.float32).reshape(4, 6)
        return a, (np.arange(24, dtype=np.float32).reshape(4, 6) % 5) + 0.5
    a = np.arange(-10, 14, dtype=np.int32).reshape(4, 6)
    return a, (np.arange(24, dtype=np.int32).reshape(4, 6) % 7) + 1


# ----------------------------------------------------------------------------- dtypes


def test_dtype_objects_name_runtime_dtypes_and_aliases():
    assert repr(torch.float32) == "torch.float32"
    assert torch.float is torch.float32 and torch.half is torch.float16
    assert torch.int is torch.int32
    for dt in (torch.float16, torch.bfloat16, torch.int8, torch.uint16, torch.uint32):
        assert as_dtype(dt).name == dt.runtime_dtype_name == repr(dt).removeprefix("torch.")
    assert torch.bfloat16.itemsize == 2 and torch.bfloat16.is_floating_point
    assert not torch.int8.is_floating_point and not torch.uint8.is_signed
    assert isinstance(torch.float32, torch.dtype)


@pytest.mark.parametrize("bad", [torch.complex64, "complex64", np.complex128, "nope"])
def test_complex_dtypes_raise_naming_the_valid_ones(ctx, bad):
    with pytest.raises(TensorError, match=r"valid: torch\.float16, torch\.bfloat16"):
        torch.zeros(3, dtype=bad)


@pytest.mark.parametrize("dt", [torch.float64, torch.int64, torch.uint64, "float64", np.int64])
def test_64_bit_dtypes_hold_64_bit_values(ctx, dt):
    t = torch.ones(3, dtype=dt)
    assert t.dtype is torch.as_tensor(np.ones(1, t.numpy().dtype)).dtype
    assert t.element_size() == 8 and t.numpy().dtype.itemsize == 8


def test_from_numpy_keeps_the_arrays_dtype(ctx):
    x = np.random.default_rng(0).standard_normal(3)  # NumPy's default float64
    t = torch.from_numpy(x)
    assert t.dtype is torch.float64 and t.numpy().dtype == np.float64
    np.testing.assert_array_equal(t.numpy(), x)  # bit for bit, not through float32
    big = np.array([2**40, -(2**50)])
    assert torch.from_numpy(big).dtype is torch.int64
    assert torch.from_numpy(big).tolist() == big.tolist()
    with pytest.raises(TensorError, match=r"complex128 are not supported.*astype\(np\.float64"):
        torch.from_numpy(np.zeros(3, np.complex128))
    t = torch.from_numpy(np.arange(3, dtype=np.int16))
    assert t.dtype is torch.int16 and t.tolist() == [0, 1, 2]


def test_tensor_infers_dtypes_as_torch(ctx):
    assert torch.tensor([1.0, 2.0]).dtype is torch.float32
    assert torch.tensor([[1, 2], [3, 4]]).dtype is torch.int64
    assert torch.tensor(np.array([0.5, 1.5])).dtype is torch.float64  # the array's dtype
    assert torch.tensor(np.float64(0.5)).dtype is torch.float64
    assert torch.tensor(np.ones(2, np.float16)).dtype is torch.float16
    assert torch.tensor([1, 2], dtype=torch.uint8).dtype is torch.uint8
    assert torch.tensor([2**40]).tolist() == [2**40]
    with pytest.raises(TensorError, match="does not fit torch.int32"):
        torch.tensor([2**40], dtype=torch.int32)
    assert torch.tensor([True, False]).dtype is torch.bool
    assert torch.tensor([1, 2.5]).dtype is torch.float32
    assert torch.zeros(2, dtype=int).dtype is torch.int64
    assert torch.zeros(2, dtype=float).dtype is torch.float64  # Python's float is a double


def test_default_dtype_is_float32_and_settable(ctx):
    assert torch.get_default_dtype() is torch.float32
    torch.set_default_dtype(torch.float16)
    try:
        assert torch.zeros(2).dtype is torch.float16
        assert torch.tensor([1.5]).dtype is torch.float16
    finally:
        torch.set_default_dtype(torch.float32)
    with pytest.raises(TensorError, match="floating dtype"):
        torch.set_default_dtype(torch.int32)


# ----------------------------------------------------------------------------- factories


def test_factories_shapes_and_values(ctx):
    assert torch.zeros(2, 3).shape == (2, 3) == torch.zeros((2, 3)).shape
    assert repr(torch.empty([4]).shape) == "torch.Size([4])"
    assert torch.zeros(torch.Size([2, 5])).size() == (2, 5)
    np.testing.assert_array_equal(torch.zeros(2, 3).numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(torch.ones(3, dtype=torch.int8).numpy(), np.ones(3))
    full = torch.full((2, 2), 7)
    assert full.dtype is torch.int64 and full.tolist() == [[7, 7], [7, 7]]
    assert torch.full((2,), 2.5).dtype is torch.float32
    assert torch.zeros(()).shape == () and torch.zeros(()).item() == 0.0


def test_factories_take_size_as_a_keyword_as_torch_does(ctx):
    for factory in (torch.zeros, torch.ones, torch.empty, torch.rand, torch.randn):
        assert factory(size=(2, 3)).shape == (2, 3)
        assert factory(size=[4], dtype=torch.float16).shape == (4,)
        with pytest.raises(TensorError, match="as arguments or as size=, not both"):
            factory(2, size=(2,))
    np.testing.assert_array_equal(torch.ones(size=(2, 2)).numpy(), np.ones((2, 2), np.float32))
    torch.manual_seed(3)
    drawn = torch.randn(size=(5,)).numpy()
    torch.manual_seed(3)
    np.testing.assert_array_equal(torch.randn(5).numpy(), drawn)


def test_full_of_a_bool_makes_a_bool_tensor_as_torch_does(ctx):
    for flag in (True, np.bool_(False)):
        t = torch.full((2,), flag)
        assert t.dtype is torch.bool and t.tolist() == [bool(flag)] * 2
    assert torch.full((2,), True, dtype=torch.uint8).tolist() == [1, 1]
    assert torch.full_like(torch.zeros(2), True).tolist() == [1.0, 1.0]  # the tensor's dtype


@pytest.mark.parametrize(
    ("args", "kwargs", "expected"),
    [
        ((5,), {}, np.arange(5, dtype=np.int64)),
        ((2, 9, 3), {}, np.arange(2, 9, 3, dtype=np.int64)),
        ((0.0, 1.0, 0.25), {}, np.arange(0, 1, 0.25, dtype=np.float32)),
        ((6,), {"dtype": torch.float16}, np.arange(6, dtype=np.float16)),
        ((5, 0, -2), {}, np.arange(5, 0, -2, dtype=np.int64)),
        ((3, 3), {}, np.arange(3, 3, dtype=np.int64)),
        ((2**33, 2**33 + 3), {}, np.arange(2**33, 2**33 + 3, dtype=np.int64)),
        ((4,), {"dtype": torch.int32}, np.arange(4, dtype=np.int32)),
        ((0.0, 1.0, 0.25), {"dtype": torch.float64}, np.arange(0, 1, 0.25)),
    ],
)
def test_arange_matches_numpy(ctx, args, kwargs, expected):
    t = torch.arange(*args, **kwargs)
    assert t.numpy().dtype == expected.dtype
    np.testing.assert_array_equal(t.numpy(), expected)


def test_like_factories_keep_shape_and_dtype(ctx):
    base = torch.ones(2, 3, dtype=torch.int16)
    for made, value in (
        (torch.zeros_like(base), 0),
        (torch.ones_like(base), 1),
        (torch.full_like(base, 4), 4),
    ):
        assert made.shape == (2, 3) and made.dtype is torch.int16
        np.testing.assert_array_equal(made.numpy(), np.full((2, 3), value))
    assert torch.empty_like(base, dtype=torch.float32).dtype is torch.float32


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_stack_matches_numpy(ctx, dim):
    arrays = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * k for k in range(3)]
    out = torch.stack([torch.from_numpy(a) for a in arrays], dim=dim)
    expected = np.stack(arrays, axis=dim)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(out.numpy(), expected)


@pytest.mark.parametrize("dim", [0, 1])
def test_cat_matches_numpy(ctx, dim):
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    shape = (2, 5) if dim else (4, 3)
    b = np.arange(100, 100 + shape[0] * shape[1], dtype=np.int32).reshape(shape)
    out = torch.cat([torch.from_numpy(a), torch.from_numpy(b)], dim=dim)
    np.testing.assert_array_equal(out.numpy(), np.concatenate([a, b], axis=dim))


# ----------------------------------------------------------------------------- arithmetic


@pytest.mark.parametrize("kind", ["float32", "int32"])
@pytest.mark.parametrize("op", list(OPS))
def test_tensor_op_tensor_matches_numpy(ctx, kind, op):
    a, b = _operands(kind)
    out = OPS[op](torch.from_numpy(a), torch.from_numpy(b))
    expected = OPS[op](a, b)
    if op == "div":
        assert out.dtype is torch.float32  # true division, also for integers
        expected = (a.astype(np.float32) / b.astype(np.float32)).astype(np.float32)
    else:
        assert out.dtype.runtime_dtype_name == kind
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


@pytest.mark.parametrize("kind", ["float32", "int32"])
@pytest.mark.parametrize("op", list(OPS))
def test_scalar_ops_both_sides_match_numpy(ctx, kind, op):
    a, _ = _operands(kind)
    a = np.where(a == 0, 1, a).astype(a.dtype)  # 3 / a must not divide by zero
    t = torch.from_numpy(a)
    scalar = 3
    forward, backward = OPS[op](t, scalar), OPS[op](scalar, t)
    af = a.astype(np.float32) if op == "div" else a
    np.testing.assert_allclose(forward.numpy(), OPS[op](af, af.dtype.type(scalar)), rtol=1e-6)
    np.testing.assert_allclose(backward.numpy(), OPS[op](af.dtype.type(scalar), af), rtol=1e-6)
    assert forward.dtype is backward.dtype


@pytest.mark.parametrize("kind", ["float32", "int32"])
@pytest.mark.parametrize("op", list(IOPS))
def test_in_place_ops_and_full_slice_forms(ctx, kind, op):
    a, b = _operands(kind)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    same = ta
    ta = IOPS[op](ta, tb)
    assert ta is same
    expected = IOPS[op](a.copy(), b)
    np.testing.assert_array_equal(ta.numpy(), expected)
    sliced = torch.from_numpy(a)
    sliced[:] = IOPS[op](sliced[:], tb[:])  # what `sliced[:] op= tb[:]` runs
    np.testing.assert_array_equal(sliced.numpy(), expected)
    scalar = torch.from_numpy(a)
    scalar[...] = IOPS[op](scalar[...], 2)
    np.testing.assert_array_equal(scalar.numpy(), IOPS[op](a.copy(), a.dtype.type(2)))


def test_augmented_full_slice_statement(ctx):
    a = torch.arange(8, dtype=torch.float32)
    b = torch.ones(8)
    a[:] += b[:]
    a[:] *= 2
    np.testing.assert_array_equal(a.numpy(), (np.arange(8) + 1) * 2)
    a /= 4
    np.testing.assert_array_equal(a.numpy(), (np.arange(8) + 1) / 2)


def test_full_slice_assignment_from_tensor_scalar_and_array(ctx):
    a = torch.zeros(2, 3)
    a[:] = torch.ones(2, 3, dtype=torch.int32)
    np.testing.assert_array_equal(a.numpy(), np.ones((2, 3)))
    a[:] = 3.0
    np.testing.assert_array_equal(a.numpy(), np.full((2, 3), 3.0))
    a[...] = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(a.numpy(), np.arange(6).reshape(2, 3))


def test_type_promotion_follows_torch(ctx):
    i = torch.tensor([1, 2, 3])
    assert (i + 1).dtype is torch.int64
    assert (i.int() + i).dtype is torch.int64 and (i.int() + 1).dtype is torch.int32
    assert (torch.ones(2) + torch.ones(2, dtype=torch.float64)).dtype is torch.float64
    assert (torch.ones(2, dtype=torch.float64) + 1.5).dtype is torch.float64
    assert (i + torch.ones(3, dtype=torch.float64)).dtype is torch.float64
    assert (torch.ones(2, dtype=torch.float16) + torch.ones(2, dtype=torch.bfloat16)).dtype is (
        torch.float32
    )
    with pytest.raises(TensorError, match="torch.int64 and torch.uint64 promote to float64"):
        i + torch.ones(3, dtype=torch.uint64)
    half = i + 0.5
    assert half.dtype is torch.float32 and half.tolist() == [1.5, 2.5, 3.5]
    assert (i + torch.ones(3, dtype=torch.float16)).dtype is torch.float16
    assert (torch.ones(3, dtype=torch.float16) + torch.ones(3)).dtype is torch.float32
    assert (torch.ones(3, dtype=torch.int8) + torch.ones(3, dtype=torch.uint8)).dtype is (
        torch.int16
    )
    with pytest.raises(TensorError, match="can't be cast"):
        i /= 2
    with pytest.raises(TensorError, match="can't be cast"):
        i += 0.5
    f16 = torch.ones(3, dtype=torch.float16)
    f16 += torch.ones(3)  # float32 result cast back into float16, as torch allows
    assert f16.dtype is torch.float16 and f16.tolist() == [2.0, 2.0, 2.0]


def test_negation_and_reflected_division(ctx):
    t = torch.tensor([1.0, -2.0, 4.0])
    assert (-t).tolist() == [-1.0, 2.0, -4.0]
    assert (1 / t).tolist() == [1.0, -0.5, 0.25]
    assert (10 - torch.tensor([1, 2])).tolist() == [9, 8]
    u = torch.tensor([1, 2], dtype=torch.uint8)
    assert (-u).tolist() == [255, 254]
    assert (np.float32(2) * t).tolist() == [2.0, -4.0, 8.0]


def test_arithmetic_errors_are_clear(ctx):
    a = torch.zeros(3)
    with pytest.raises(TensorError, match=r"shapes \(3,\) and \(4,\) cannot be broadcast"):
        a + torch.zeros(4)
    with pytest.raises(TensorError, match="out of bounds for dimension 0 with size 3"):
        a[3]
    with pytest.raises(TensorError, match=r"the shape of the mask \[2\] at index 0 does not"):
        a[np.array([True, False])]
    with pytest.raises(TensorError, match="not supported"):
        a + "x"
    with pytest.raises(TensorError, match="not supported"):
        np.ones(3) + a
    with pytest.raises(TensorError, match="does not fit"):
        torch.zeros(2, dtype=torch.uint8) + 300


def test_add_with_alpha_and_method_forms(ctx):
    a = torch.ones(4)
    a.add_(torch.full((4,), 2.0), alpha=-0.5)
    assert a.tolist() == [0.0] * 4
    assert a.add(1).mul(3).sub(1).div(2).tolist() == [1.0] * 4


def test_a_float_alpha_on_integer_operands_is_refused_as_in_torch(ctx):
    i = torch.tensor([1, 2])
    refused = "for integral input tensors, argument {} must not be a floating point number"
    for call in (
        lambda: i.add(1, alpha=0.5),
        lambda: torch.sub(i, i, alpha=1.0),
        lambda: i.clone().add_(i, alpha=0.5),
    ):
        with pytest.raises(TensorError, match=refused.format("alpha")):
            call()
    with pytest.raises(TensorError, match=refused.format("value")):
        i.addcmul(i, i, value=0.5)
    # a float operand makes the result float, and then a float alpha is fine
    assert i.add(1.5, alpha=0.5).tolist() == [1.75, 2.75]
    assert i.add(torch.tensor(1.0), alpha=2.0).tolist() == [3.0, 4.0]
    assert i.sub(1, alpha=2).tolist() == [-1, 0] and i.sub(1, alpha=2).dtype is torch.int64


# ----------------------------------------------------------------------------- methods


def test_module_helpers(ctx):
    t = torch.ones(2, 2)
    assert torch.is_tensor(t) and not torch.is_tensor(np.ones(2)) and torch.numel(t) == 4

    @torch.no_grad()
    def double(x):
        return x * 2

    with torch.no_grad(), torch.inference_mode():
        assert double(t).tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_description_methods(ctx):
    t = torch.zeros(2, 3, dtype=torch.int16)
    assert (t.numel(), t.element_size(), t.dim(), t.nbytes, len(t)) == (6, 2, 2, 12, 2)
    assert t.size() == (2, 3) and t.size(1) == 3 and t.size(-1) == 3
    assert t.device == torch.device("ahbm", 0) and t.cuda() is t and t.to("cuda:0") is t
    with pytest.raises(TypeError, match="0-d"):
        len(torch.zeros(()))


def test_cpu_is_a_snapshot_as_a_copy_to_the_host_is(ctx):
    w = torch.ones(4)
    before, also = w.cpu(), w.to("cpu")
    w -= 0.5  # torch: the host copies keep the values they were made with
    assert before is not w and also is not w
    assert before.tolist() == also.tolist() == [1.0] * 4 and w.tolist() == [0.5] * 4
    assert before.dtype == w.dtype and before.device == w.device


def test_pin_memory_is_a_copy_as_cpu_is_and_device_tensors_are_not_pinned(ctx):
    w = torch.ones(4)
    pinned = w.pin_memory()
    w -= 0.5  # torch: pin_memory() copies an unpinned tensor
    assert pinned.tolist() == [1.0] * 4 and pinned.dtype == w.dtype
    assert not w.is_pinned() and not pinned.is_pinned()
    moved = pinned.to("cuda", non_blocking=True)
    assert moved is pinned  # already on the device: to() returns it, as for torch's CUDA tensors


def test_tensors_hash_by_identity_and_compare_to_none_as_torchs_do(ctx):
    a, b = torch.ones(3), torch.ones(3)
    assert len({a, b, a}) == 2 and {a: 1, b: 2}[b] == 2
    assert (a == None) is False and (a != None) is True  # noqa: E711 - torch's answers


def test_item_tolist_clone_copy_fill(ctx):
    t = torch.tensor([[1.5, 2.5], [3.5, 4.5]])
    assert t.tolist() == [[1.5, 2.5], [3.5, 4.5]]
    assert torch.tensor([7]).item() == 7 and isinstance(torch.tensor([7]).item(), int)
    with pytest.raises(TensorError, match="one-element"):
        t.item()
    c = t.clone()
    c += 1
    assert t.tolist() == [[1.5, 2.5], [3.5, 4.5]] and c.tolist() == [[2.5, 3.5], [4.5, 5.5]]
    t.copy_(c)
    assert t.tolist() == c.tolist()
    t.copy_(np.zeros((2, 2)))
    assert t.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert t.fill_(2).tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert t.zero_().sum().item() == 0.0
    with pytest.raises(TensorError, match="does not match"):
        t.copy_(torch.zeros(3))


def test_to_converts_dtype_on_device(ctx):
    t = torch.tensor([1.7, -2.7, 3.2])
    assert t.to(torch.float32) is t
    i = t.to(torch.int32)
    assert i.dtype is torch.int32 and i.tolist() == [1, -2, 3]  # truncation, like torch
    assert t.int().tolist() == [1, -2, 3] and i.float().dtype is torch.float32
    assert t.to(dtype=torch.float16, copy=True).dtype is torch.float16
    assert t.to(i).dtype is torch.int32
    b = torch.tensor([1.0, 2.0]).bfloat16()
    assert b.dtype is torch.bfloat16 and b.numpy().dtype == np.float32


@pytest.mark.parametrize("dim", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_and_mean_match_numpy(ctx, dim, keepdim):
    a = np.arange(35, dtype=np.float32).reshape(5, 7) / 4
    t = torch.from_numpy(a)
    np.testing.assert_allclose(
        t.sum(dim=dim, keepdim=keepdim).numpy(), a.sum(axis=dim, keepdims=keepdim), rtol=1e-6
    )
    np.testing.assert_allclose(
        t.mean(dim=dim, keepdim=keepdim).numpy(), a.mean(axis=dim, keepdims=keepdim), rtol=1e-6
    )


def test_reductions_return_device_tensors_with_torchs_dtypes(ctx):
    big = torch.arange(5000, dtype=torch.float32)
    total = big.sum()
    assert total.shape == () and total.dtype is torch.float32 and total.item() == 12497500.0
    assert big.mean().item() == 2499.5
    ints = torch.tensor([1, 2, 3], dtype=torch.int8)
    assert ints.sum().dtype is torch.int64 and ints.sum().item() == 6
    wide = torch.from_numpy(np.linspace(0, 1, 4097))  # float64: summed in float64
    assert wide.sum().dtype is torch.float64 and wide.sum().item() == pytest.approx(2048.5, 1e-15)
    assert ints.mean(dtype=torch.float32).item() == 2.0
    with pytest.raises(TensorError, match="dtype=torch.float32"):
        ints.mean()


def test_repr_shows_values_dtype_and_device(ctx):
    assert repr(torch.tensor([1.0, 2.0])) == "tensor([1., 2.], device='ahbm:0')"
    assert repr(torch.tensor([3], dtype=torch.int8)) == (
        "tensor([3], device='ahbm:0', dtype=torch.int8)"
    )
    t = torch.zeros(2)
    t.free()
    assert "<freed>" in repr(t)


def test_repr_follows_torch_for_empty_non_finite_and_flagged_tensors(ctx):
    device = "device='ahbm:0'"
    nan, inf = float("nan"), float("inf")
    cases = [
        (torch.zeros(3, 0), f"tensor([], {device}, size=(3, 0))"),
        (torch.zeros(0), f"tensor([], {device})"),
        (torch.zeros(0, dtype=torch.int32), f"tensor([], {device}, dtype=torch.int32)"),
        (torch.tensor([nan, 1.0, -inf]), f"tensor([nan, 1., -inf], {device})"),
        (torch.tensor([inf, 1.0]), f"tensor([inf, 1.], {device})"),
        (torch.tensor([nan, 1.5, inf]), f"tensor([   nan, 1.5000,    inf], {device})"),
        (torch.tensor([-0.0, 1.0]), f"tensor([-0., 1.], {device})"),
        (torch.zeros(2, requires_grad=True), f"tensor([0., 0.], {device}, requires_grad=True)"),
    ]
    for t, expected in cases:
        assert repr(t) == expected
    torch.set_default_dtype(torch.float16)
    try:  # the dtype left out is the default one
        assert repr(torch.tensor([1.5])) == f"tensor([1.5000], {device})"
        assert repr(torch.ones(1, dtype=torch.float32)) == (
            f"tensor([1.], {device}, dtype=torch.float32)"
        )
    finally:
        torch.set_default_dtype(torch.float32)


def test_kernels_take_tensors_directly(ctx):
    @jit
    def twice(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)

    x = torch.arange(10, dtype=torch.float32)
    out = torch.empty(10)
    twice[(1,)](x, out, 10, BLOCK=16)
    assert out.tolist() == [2.0 * i for i in range(10)]


# ----------------------------------------------------------------------------- time


def test_arithmetic_costs_simulated_time(ctx):
    a, b = torch.ones(4096), torch.ones(4096)
    for step in (
        lambda: a + b,
        lambda: a.__iadd__(b),
        lambda: a * 2,
        lambda: a.fill_(1),
        lambda: a.clone(),
        lambda: a.sum(),
        lambda: a.numpy(),
    ):
        before = ctx.now
        step()
        assert ctx.now > before


def test_timing_only_mode_costs_time_but_has_no_values():
    context = RuntimeContext(TINY, timing_only=True)
    with use_context(context):
        a = torch.ones(1024)
        before = context.now
        b = a + a
        b += 1
        total = b.sum()
        assert context.now > before
        assert "no values in timing-only mode" in repr(total)
        with pytest.raises(TensorError, match="timing-only"):
            b.numpy()
        with pytest.raises(TensorError, match="timing-only"):
            total.item()


def test_event_elapsed_time_is_the_simulated_delta_in_ms(ctx):
    start, end = torch.cuda.Event(enable_timing=True), torch.ahbm.Event(enable_timing=True)
    a = torch.ones(2048)
    start.record()
    t0 = ctx.now
    b = a * a
    b += a
    torch.cuda.synchronize()
    end.record()
    end.synchronize()
    assert end.query()
    assert start.elapsed_time(end) == (ctx.now - t0) / 1e9 > 0
    with pytest.raises(SimulationError, match="never recorded"):
        start.elapsed_time(torch.cuda.Event(enable_timing=True))
    untimed = torch.cuda.Event()
    untimed.record()
    with pytest.raises(SimulationError, match="enable_timing"):
        start.elapsed_time(untimed)


# ----------------------------------------------------------------------------- devices


def test_device_namespaces(ctx):
    assert torch.cuda is torch.ahbm
    assert torch.ahbm.is_available() and torch.accelerator.is_available()
    assert torch.ahbm.device_count() == torch.accelerator.device_count() == 1
    assert torch.ahbm.current_device() == 0 == torch.accelerator.current_device_index()
    torch.accelerator.set_device_index(0)
    torch.cuda.set_device("cuda:0")
    with pytest.raises(PlacementError, match="valid: 0..0"):
        torch.ahbm.set_device(1)
    with pytest.raises(PlacementError, match="valid: 0..0"):
        torch.accelerator.set_device_index(1)


def test_device_objects_parse_and_compare():
    assert torch.device("ahbm:1") == torch.device("cuda", 1) == torch.device(1)
    assert hash(torch.device("cuda:1")) == hash(torch.device("ahbm:1"))
    assert torch.device("cuda:1").type == "cuda" and torch.device("cuda:1").index == 1
    assert str(torch.device("ahbm", 2)) == "ahbm:2" and str(torch.device("cpu")) == "cpu"
    assert repr(torch.device("cpu")) == "device(type='cpu')"
    assert torch.device("cpu") != torch.device("ahbm")
    with pytest.raises(PlacementError, match="unknown device type 'xpu'"):
        torch.device("xpu:0")
    with pytest.raises(PlacementError, match="must be an int"):
        torch.device("cuda:x")


def test_tensors_follow_the_bound_device_and_device_arguments():
    context = RuntimeContext(TINY, overrides=PE_DEVICES)
    with use_context(context):
        assert torch.cuda.device_count() == 4
        z = torch.zeros(4, device="cuda:2")
        assert z.device == torch.device("ahbm:2") and _pe(z) == "sip0.cube0.pe2"
        assert context.current_device() is None  # the binding is left alone
        assert _pe(z + 1) == "sip0.cube0.pe2"
        moved = z.to("ahbm:3")
        assert moved.device.index == 3 and _pe(moved) == "sip0.cube0.pe3"
        with pytest.raises(TensorError, match="different devices"):
            z + moved
        torch.ahbm.set_device(1)
        assert torch.cuda.current_device() == 1
        assert _pe(torch.ones(2)) == "sip0.cube0.pe1"
        assert z.cuda().device.index == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda a, b: torch.nn.functional.linear(a, b), "matmul of shapes (2, 2) and (2, 2)"),
        (lambda a, b: torch.maximum(a, b), "maximum"),
        (lambda a, b: torch.nn.functional.layer_norm(a, 2, b[0]), "layer_norm"),
        (lambda a, b: torch.nn.functional.rms_norm(a, 2, b[0]), "rms_norm"),
    ],
)
def test_operands_on_different_devices_are_refused_as_torch_does(call, message):
    # these computed across devices (only the elementwise operators refused)
    with use_context(RuntimeContext(TINY, overrides=PE_DEVICES)):
        a, b = torch.ones(2, 2), torch.ones(2, 2, device="ahbm:1")
        with pytest.raises(TensorError) as info:
            call(a, b)
        assert f"{message}: tensors are on different devices (ahbm:0 and ahbm:1)" in str(info.value)


def test_out_on_another_device_is_refused_as_torch_does():
    with use_context(RuntimeContext(TINY, overrides=PE_DEVICES)):
        out = torch.empty(2, device="ahbm:1")
        with pytest.raises(TensorError, match=re.escape("torch.add: out is on ahbm:1 and the")):
            torch.add(torch.ones(2), 1, out=out)


# ----------------------------------------------------------------------------- random


def test_manual_seed_makes_rand_deterministic(ctx):
    torch.manual_seed(1234)
    first = torch.rand(16).numpy()
    torch.manual_seed(1234)
    assert torch.initial_seed() == 1234
    np.testing.assert_array_equal(torch.rand(16).numpy(), first)
    torch.manual_seed(4321)
    assert not np.array_equal(torch.rand(16).numpy(), first)
    assert ((first >= 0) & (first < 1)).all()


def test_seeds_outside_torchs_range_are_refused_as_torch_refuses_them(ctx):
    """torch takes seeds in [-2**63, 2**64 - 1], negative ones wrapped to 64 bits."""
    torch.manual_seed(-1)
    assert torch.initial_seed() == (1 << 64) - 1
    torch.manual_seed((1 << 64) - 1)
    torch.manual_seed(-(1 << 63))
    assert torch.initial_seed() == 1 << 63
    for seed in (1 << 64, 2**70, -(1 << 63) - 1):
        with pytest.raises(TensorError, match=f"seed {seed} is out of range: it must be within"):
            torch.manual_seed(seed)
        with pytest.raises(TensorError, match="out of range"):
            torch.Generator().manual_seed(seed)
    assert torch.initial_seed() == 1 << 63  # a refused seed leaves the generator as it was


def test_generators_and_other_distributions(ctx):
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    a = torch.randn(3, 4, generator=g1)
    assert a.shape == (3, 4) and a.dtype is torch.float32
    np.testing.assert_array_equal(a.numpy(), torch.randn(3, 4, generator=g2).numpy())
    r = torch.randint(3, 9, (100,), generator=g1)
    assert r.dtype is torch.int64 and r.numpy().min() >= 3 and r.numpy().max() < 9
    assert torch.randint(5, (2, 2)).shape == (2, 2)
    assert torch.rand(2, dtype=torch.bfloat16).dtype is torch.bfloat16
    with pytest.raises(TensorError, match="floating dtype"):
        torch.rand(2, dtype=torch.int32)


def test_each_rank_has_its_own_generator():
    context = RuntimeContext(TINY, overrides=PE_DEVICES)
    scheduler = Scheduler(context.machine.clock, 3)
    context.machine.set_waiter(lambda h: scheduler.wait_until(h.event, f"request {h.request_id}"))

    def body(rank: int):
        torch.cuda.set_device(rank)
        if rank == 2:
            torch.manual_seed(99)
        values = torch.rand(8)
        return torch.initial_seed(), values.device.index, values.numpy()

    with use_context(context):
        torch.manual_seed(0)
        results = scheduler.run(body)
        assert torch.initial_seed() == 0  # the module-wide generator is untouched
    assert [r[:2] for r in results] == [(0, 0), (0, 1), (99, 2)]
    np.testing.assert_array_equal(results[0][2], results[1][2])
    assert not np.array_equal(results[0][2], results[2][2])


def test_dp_shards_a_tensor_and_results_keep_the_placement(ctx):
    dp = DPPolicy(pe="row_wise")
    a = torch.arange(32, dtype=torch.float32, dp=dp)
    b = torch.ones(32, dp=dp)
    total = a + b
    pes = {p.pe_name for p in total.device_tensor.placements}
    assert pes == {f"sip0.cube0.pe{i}" for i in range(4)}
    np.testing.assert_array_equal(total.numpy(), np.arange(32) + 1)
    assert total.sum().item() == float(np.arange(32).sum() + 32)


def test_chunk_and_split_are_views_as_in_torch(ctx):
    t = torch.arange(10)
    assert [c.tolist() for c in t.chunk(4)] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [c.tolist() for c in torch.chunk(t, 3)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [c.tolist() for c in torch.split(t, 4)] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert [c.tolist() for c in t.split([3, 7])] == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
    m = torch.arange(12).view(3, 4)
    left, right = m.chunk(2, dim=1)
    assert left.tolist() == [[0, 1], [4, 5], [8, 9]] and right.shape == (3, 2)
    left.fill_(-1)  # a view: the base sees it
    assert m[0].tolist() == [-1, -1, 2, 3]
    with pytest.raises(
        TensorError, match=r"split_sizes \[3, 3\] .*add up to the size of dimension 0 \(10\)"
    ):
        t.split([3, 3])
    with pytest.raises(TensorError, match="chunks must be a positive int"):
        t.chunk(0)


@pytest.mark.parametrize(
    ("module", "name", "says"),
    [
        ("torch", "fft", "numpy.fft"),
        ("torch", "hub", "build the model"),
        ("torch", "zerso", "nearest: zeros"),
        ("torch.cuda", "get_device_capability", "no compute capability"),
        ("torch.cuda", "Stream", "streams and graphs are not modelled"),
    ],
)
def test_missing_module_names_say_what_to_use_instead(ctx, module, name, says):
    from kernbench.errors import UnsupportedNameError

    owner = torch if module == "torch" else torch.cuda
    with pytest.raises(
        UnsupportedNameError, match=f"{module}\\.{name} is not in KernBench; .*{says}"
    ):
        getattr(owner, name)
    assert not hasattr(owner, name)
    with pytest.raises(AttributeError) as plain:  # tools probing dunders get a plain error
        owner.__not_there__  # noqa: B018
    assert not isinstance(plain.value, UnsupportedNameError)


def test_new_zeros_ones_full_take_the_tensors_dtype(ctx):
    t = torch.ones(2, dtype=torch.int16)
    z, o, f = t.new_zeros(3), t.new_ones((2, 2)), t.new_full((2,), 7)
    assert (z.tolist(), o.tolist(), f.tolist()) == ([0, 0, 0], [[1, 1], [1, 1]], [7, 7])
    assert z.dtype == o.dtype == f.dtype == torch.int16
    assert t.new_zeros(2, dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("isin", re.escape("torch.isin(t, test_elements)")),
        ("histogramdd", "no device kernel"),
    ],
)
def test_missing_methods_people_reach_for_say_what_to_use(ctx, name, says):
    with pytest.raises(TensorAttributeError, match=f"{name!r} in kernbench.torch: .*{says}"):
        getattr(torch.ones(2), name)


def test_cat_promotes_mixed_dtypes_as_torch_does(ctx):
    a, b = torch.tensor([1.5, 2.5]), torch.tensor([3, 4], dtype=torch.int32)
    out = torch.cat([a, b])
    assert out.dtype == torch.float32 and out.tolist() == [1.5, 2.5, 3.0, 4.0]
    ints = torch.cat([torch.tensor([1], dtype=torch.int8), torch.tensor([300], dtype=torch.int16)])
    assert ints.dtype == torch.int16 and ints.tolist() == [1, 300]


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.tensor([300], dtype=torch.int8),
        lambda: torch.full((2,), 300, dtype=torch.int8),
        lambda: torch.zeros(2, dtype=torch.int8).fill_(-129),
        lambda: torch.tensor([2**40], dtype=torch.int32),
    ],
)
def test_integers_that_do_not_fit_are_refused_as_torch_refuses_them(ctx, make):
    with pytest.raises(TensorError, match=r"does not fit torch\.int(8|32) \["):
        make()


def test_stack_promotes_and_split_takes_integer_likes_and_none_compares(ctx):
    mixed = torch.stack([torch.tensor([1, 1], dtype=torch.int32), torch.tensor([1.5, 2.5])])
    assert mixed.dtype == torch.float32 and mixed.tolist() == [[1.0, 1.0], [1.5, 2.5]]
    assert [c.tolist() for c in torch.arange(4).split(np.int64(2))] == [[0, 1], [2, 3]]
    t = torch.ones(2)
    assert (t == None) is False and (t != None) is True  # noqa: E711 - torch's answer


@pytest.mark.parametrize("data", [[2**70], [2**40, 1.5], [float("nan")]])
def test_python_numbers_an_int_dtype_cannot_hold_are_refused(ctx, data):
    with pytest.raises(TensorError, match="torch.int32"):
        torch.tensor(data, dtype=torch.int32)


def test_a_0d_tensor_formats_its_value_as_torch_does(ctx):
    loss = torch.tensor(1.23456)
    assert f"{loss:.4f}" == "1.2346" and f"{torch.tensor(7):>3d}" == "  7"
    t = torch.tensor([1.0, 2.0])
    assert f"{t}" == str(t)
    with pytest.raises(TensorError, match=r"only a 0-d tensor takes one .* t.item\(\)"):
        f"{t:.2f}"


def test_writes_that_partly_overlap_their_source_are_refused_as_torch_does(ctx):
    # x[1:] = x[:-1] gave numpy's snapshot answer; torch refuses it (memory overlap)
    x = torch.arange(6).float()
    message = (
        "some elements of the input tensor and the written-to tensor refer to a single "
        "memory location (as in torch); clone() the input"
    )
    with pytest.raises(TensorError, match=re.escape(f"copy_: unsupported operation: {message}")):
        x[1:] = x[:-1]
    with pytest.raises(TensorError, match=re.escape(message)):
        x[1:].add_(x[:-1])
    square = torch.ones(2, 2)
    with pytest.raises(TensorError, match=re.escape(message)):
        square.copy_(square.t())  # the same memory in another order
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]  # nothing was written
    # what torch allows: disjoint parts, the same view (in place), views it cannot compare
    x[3:] = x[:3]
    x[1:] = x[:-1].clone()
    square.add_(square).copy_(square)
    grid = torch.arange(8).float().view(2, 4)
    grid[:, 0].copy_(grid[:, 1])  # strided views: not dense, not compared (torch alike)
    assert x.tolist() == [0.0, 0.0, 1.0, 2.0, 0.0, 1.0]
    assert square.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    assert grid.tolist() == [[1.0, 1.0, 2.0, 3.0], [5.0, 5.0, 6.0, 7.0]]


def test_select_is_a_view_of_one_index_with_torchs_gradient_and_error(ctx):
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    x = torch.from_numpy(values).requires_grad_()
    np.testing.assert_array_equal(x.select(1, -1).detach().numpy(), values[:, -1])
    np.testing.assert_array_equal(torch.select(x.detach(), 0, 1).numpy(), values[1])
    out = x.select(2, 1)
    assert out.grad_fn.name() == "SelectBackward0"
    out.sum().backward()
    expected = np.zeros_like(values)
    expected[:, :, 1] = 1
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    with pytest.raises(
        TensorError,
        match=r"select\(\): index 3 out of range for tensor of size \[2, 3, 4\] at dimension 1",
    ):
        x.select(1, 3)
