"""kernbench.torch indexing and views: values against NumPy, strides as PyTorch gives them.

Views share their base's memory: writes through a view are seen by the base.
Contiguous views are the same bytes (collectives and kernels use them
directly); other views are read and written by the strided copy kernel.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
import kernbench.kernels.language as tl
import kernbench.torch as torch
import kernbench.torch.distributed as dist
from kernbench.errors import TensorError, TensorIndexError, TensorTypeError
from kernbench.kernels.jit import jit
from kernbench.placement import DPPolicy
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _grid(rows: int = 3, cols: int = 4) -> tuple[torch.Tensor, np.ndarray]:
    values = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    return torch.from_numpy(values), values.copy()


# ----------------------------------------------------------------------------- reading


@pytest.mark.parametrize(
    "key",
    [
        0,
        -1,
        (1, 2),
        slice(1, 3),
        (slice(None), None),
        None,
        (Ellipsis, 0),
        slice(None, None, 2),
        (slice(None), slice(1, None, 2)),
        (1, slice(None, 3)),
        (None, Ellipsis, None),
        slice(5, 9),
    ],
)
def test_basic_indexing_matches_numpy(ctx, key):
    t, a = _grid()
    view = t[key]
    assert tuple(view.shape) == a[key].shape
    np.testing.assert_array_equal(view.numpy(), a[key])


def test_view_shapes_strides_and_offsets_are_pytorchs(ctx):
    t, _ = _grid()  # (3, 4): strides (4, 1)
    assert t.stride() == (4, 1) and t.storage_offset() == 0 and t.is_contiguous()
    assert (t[1].stride(), t[1].storage_offset()) == ((1,), 4)
    assert (t[1:3].stride(), t[1:3].storage_offset()) == ((4, 1), 4)
    assert (t[:, None].shape, t[:, None].stride()) == (torch.Size([3, 1, 4]), (4, 4, 1))
    assert t[None].stride() == (12, 4, 1) and t[..., None].stride() == (4, 1, 1)
    assert t[0, None].stride() == (4, 1)
    assert (t[..., 1].stride(), t[..., 1].storage_offset()) == ((4,), 1)
    assert t[::2].stride() == (8, 1) and not t[::2].is_contiguous()
    assert t.T.stride() == (1, 4) and not t.T.is_contiguous()
    assert t[:, 1:3].stride() == (4, 1) and not t[:, 1:3].is_contiguous()
    assert t.stride(0) == 4 and t.stride(-1) == 1


def test_zero_d_results_item_and_repr(ctx):
    t = torch.tensor([1.5, 2.5, 3.5])
    assert t[0].shape == torch.Size([]) and t[0].dim() == 0
    assert t[0].item() == 1.5 and t[-1].item() == 3.5
    assert repr(t[1]) == "tensor(2.5000, device='ahbm:0')"
    assert repr(t[1:]) == "tensor([2.5000, 3.5000], device='ahbm:0')"
    assert float(t[2]) == 3.5
    assert torch.tensor([7])[0].tolist() == 7


def test_integer_lists_and_tensors_index_the_first_dim(ctx):
    t, a = _grid()
    np.testing.assert_array_equal(t[[2, 0]].numpy(), a[[2, 0]])
    np.testing.assert_array_equal(t[torch.tensor([1, 1])].numpy(), a[[1, 1]])
    np.testing.assert_array_equal(t[np.array([0, 2])].numpy(), a[[0, 2]])
    np.testing.assert_array_equal(t[torch.tensor(2)].numpy(), a[2])  # 0-d: like t[2]
    assert t[torch.tensor(2)].storage_offset() == 8
    t[[0, 2]] = -1.0
    a[[0, 2]] = -1.0
    np.testing.assert_array_equal(t.numpy(), a)


def test_iteration_yields_rows_and_len_is_the_first_dim(ctx):
    t, a = _grid()
    assert len(t) == 3
    assert [row.tolist() for row in t] == a.tolist()


def test_indexing_errors_name_the_problem(ctx):
    t, _ = _grid()
    with pytest.raises(TensorError, match="index 3 is out of bounds for dimension 0 with size 3"):
        t[3]
    with pytest.raises(TensorError, match="too many indices"):
        t[0, 0, 0]
    with pytest.raises(TensorError, match="step must be greater than zero"):
        t[::-1]
    with pytest.raises(TensorError, match=r"the shape of the mask \[2\] at index 0 does not"):
        t[[True, False]]
    with pytest.raises(TensorError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(TensorIndexError, match="index 4 is out of bounds for dimension 1"):
        t[[0, 1], [1, 4]]
    with pytest.raises(TensorError, match="not supported"):
        t[1.5]
    with pytest.raises(TensorTypeError, match="0-d tensor"):
        len(t[0, 0])
    with pytest.raises(TypeError):
        iter(t[0, 0])


# ----------------------------------------------------------------------------- writing


def test_writes_through_views_reach_the_base(ctx):
    t, a = _grid()
    t[0] = 5
    a[0] = 5
    t[1:3] = torch.ones(2, 4)
    a[1:3] = 1
    t[0] += 1
    a[0] += 1
    row = t[2]
    row *= 3
    a[2] *= 3
    t[:, 1] = torch.tensor([7.0, 8.0, 9.0])  # a strided destination
    a[:, 1] = [7.0, 8.0, 9.0]
    t[::2, ::3] = np.float32(-2)
    a[::2, ::3] = -2
    t[..., 3] = np.array([0.5, 1.5, 2.5], dtype=np.float32)  # host values, strided
    a[..., 3] = [0.5, 1.5, 2.5]
    t[1] = torch.tensor([4.0])  # broadcast like PyTorch's copy_
    a[1] = 4.0
    t[2] = [1.0, 2.0, 3.0, 4.0]  # host values into a contiguous row: written in place
    a[2] = [1.0, 2.0, 3.0, 4.0]
    t[0, 1:3] = np.array([-7.0], dtype=np.float32)  # host values broadcast
    a[0, 1:3] = -7.0
    np.testing.assert_array_equal(t.numpy(), a)


def test_assigned_values_lose_leading_size_one_dims_and_broadcast_as_in_torch(ctx):
    t, a = _grid()  # (3, 4)
    t[0] = torch.tensor([[1.0, 2.0, 3.0, 4.0]])  # a keepdim result into a row
    a[0] = [1.0, 2.0, 3.0, 4.0]
    t[1, 2] = torch.tensor([9.0])  # one element into a 0-d view
    a[1, 2] = 9.0
    t[2, 1:3] = np.array([[[5.0, 6.0]]], dtype=np.float32)
    a[2, 1:3] = [5.0, 6.0]
    np.testing.assert_array_equal(t.numpy(), a)
    t[[0, 2]] = torch.tensor([[-1.0, -2.0, -3.0, -4.0]])  # (1, 4) broadcast over the rows
    a[[0, 2]] = [-1.0, -2.0, -3.0, -4.0]
    t[[1, 0]] = torch.tensor([[7.0], [8.0]])  # (2, 1): one value per row
    a[[1, 0]] = [[7.0], [8.0]]
    t[np.array([2])] = np.full((1, 1, 4), 0.5, dtype=np.float32)
    a[2] = 0.5
    np.testing.assert_array_equal(t.numpy(), a)
    with pytest.raises(TensorError, match=r"value of shape \(2, 3\) cannot be broadcast to "):
        t[[0, 1]] = torch.ones(2, 3)
    with pytest.raises(TensorError, match=r"source shape \(3, 1\) does not match \(3,\)"):
        t[:, 0] = torch.ones(3, 1)  # torch strips only leading size-1 dims


def test_in_place_methods_on_views(ctx):
    t, a = _grid()
    t[1].add_(10)
    t[:, 0].mul_(2)
    t.T[3].div_(2)
    t[2].fill_(-1)
    t[0, :2].zero_()
    a[1] += 10
    a[:, 0] *= 2
    a[:, 3] /= 2
    a[2] = -1
    a[0, :2] = 0
    np.testing.assert_array_equal(t.numpy(), a)
    u = torch.arange(6, dtype=torch.float32)
    u[::2] /= 2
    expected = np.arange(6, dtype=np.float32)
    expected[::2] /= 2
    np.testing.assert_array_equal(u.numpy(), expected)


def test_ring_all_reduce_buffers_write_into_slices(ctx):
    accum, recv = torch.zeros(4), torch.ones(4)
    accum[:] += recv[:]
    accum[:] += recv[:]
    send = torch.empty(4)
    send[:] = accum[:]
    assert send.tolist() == [2.0] * 4


def test_expanded_views_refuse_writes(ctx):
    x = torch.ones(1, 3).expand(2, 3)
    with pytest.raises(TensorError, match="single memory location"):
        x.fill_(2)
    with pytest.raises(TensorError, match="single memory location"):
        x[:] = torch.zeros(2, 3)


def test_a_view_costs_no_time_and_whole_views_cost_as_the_tensor(ctx):
    a, b = torch.ones(4096), torch.ones(4096)
    before = ctx.now
    views = (a[:], a[1:], a[None], a.view(64, 64), a.T)
    assert ctx.now == before and len(views) == 5
    start = ctx.now
    a += b
    whole = ctx.now - start
    start = ctx.now
    a[:] += b[:]
    assert ctx.now - start == whole


# ----------------------------------------------------------------------------- view methods


def test_view_methods_shapes_strides_and_values(ctx):
    t = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    cases = [
        (t.transpose(0, 2), a.transpose(2, 1, 0), (1, 4, 12)),
        (t.permute(1, 2, 0), a.transpose(1, 2, 0), (4, 1, 12)),
        (t.T, a.T, (1, 4, 12)),
        (t.view(6, 4), a.reshape(6, 4), (4, 1)),
        (t.view(-1), a.reshape(-1), (1,)),
        (t.reshape(4, -1), a.reshape(4, 6), (6, 1)),
        (t.flatten(), a.reshape(-1), (1,)),
        (t.flatten(1), a.reshape(2, 12), (12, 1)),
        (t.unsqueeze(1), a[:, None], (12, 12, 4, 1)),
        (t.unsqueeze(-1), a[..., None], (12, 4, 1, 1)),
        (t[:, :1].squeeze(), a[:, 0], (12, 1)),
        (t[:1].squeeze(0), a[0], (4, 1)),
        (t[:, :1].expand(2, 3, 4), np.broadcast_to(a[:, :1], (2, 3, 4)), (12, 0, 1)),
        (t[0, 0].expand(2, -1), np.broadcast_to(a[0, 0], (2, 4)), (0, 1)),
        (t.narrow(2, 1, 2), a[:, :, 1:3], (12, 4, 1)),
        (t[0].t(), a[0].T, (1, 4)),
        (t.mT, a.swapaxes(1, 2), (12, 1, 4)),
    ]
    for view, expected, strides in cases:
        assert tuple(view.shape) == expected.shape
        assert view.stride() == strides
        np.testing.assert_array_equal(view.numpy(), expected)


def test_narrow_counts_a_negative_start_from_the_end(ctx):
    t, a = _grid()  # (3, 4)
    for start, length in [(-2, 2), (-4, 4), (-1, 1), (-3, 1), (1, 3), (4, 0)]:
        view = t.narrow(1, start, length)
        begin = start % 4 if start < 0 else start
        np.testing.assert_array_equal(view.numpy(), a[:, begin : begin + length])
    with pytest.raises(TensorError, match=r"start \(3\) \+ length \(2\) exceeds dimension size"):
        t.narrow(1, -1, 2)
    with pytest.raises(TensorError, match=r"start \(-5\) is out of range .* \(valid: -4\.\.4\)"):
        t.narrow(1, -5, 1)


def test_view_refuses_what_needs_a_copy_and_reshape_copies(ctx):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    with pytest.raises(TensorError, match=r"use \.reshape"):
        t.T.view(6)
    with pytest.raises(TensorError, match="invalid for input of size 6"):
        t.view(4, 2)
    flat = t.T.reshape(6)  # a copy
    assert flat.tolist() == [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]
    flat[0] = 99
    assert t[0, 0].item() == 0.0
    shared = t.reshape(3, 2)  # a view
    shared[0, 0] = 42
    assert t[0, 0].item() == 42.0


def test_contiguous_clone_copy_and_data(ctx):
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    row = t[1]
    assert t.contiguous() is t and row.contiguous() is row
    tt = t.T.contiguous()
    assert tt.is_contiguous() and tt.stride() == (2, 1)
    assert tt.tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
    c = t[:, 1].clone()
    c += 100
    assert t[:, 1].tolist() == [1.0, 4.0] and c.tolist() == [101.0, 104.0]
    d = t.data
    d[0, 0] = -5
    assert t[0, 0].item() == -5.0 and d.storage_device_tensor is t.storage_device_tensor
    t[1].copy_(torch.tensor([7.0, 8.0, 9.0]))
    assert t[1].tolist() == [7.0, 8.0, 9.0]


def test_grad_slot_and_requires_grad_flag(ctx):
    p = torch.ones(3)
    assert p.grad is None and p.requires_grad is False
    p.requires_grad = True
    assert p.requires_grad and p.requires_grad_(False) is p and not p.requires_grad
    p.grad = torch.full((3,), 2.0)
    p.grad.data /= 2  # the tutorial's average_gradients pattern
    assert p.grad.tolist() == [1.0, 1.0, 1.0]
    p.data = torch.zeros(3)  # new memory, same slots
    assert p.tolist() == [0.0] * 3 and p.grad.tolist() == [1.0] * 3
    with pytest.raises(TensorError, match="must be a Tensor"):
        p.grad = [1, 2, 3]
    with pytest.raises(TensorError, match="shape"):
        p.grad = torch.ones(4)


def test_description_of_views(ctx):
    t = torch.zeros(2, 3, dtype=torch.int32)
    v = t[:, 1:]
    assert v.shape == (2, 2) and v.size(1) == 2 and v.size(-1) == 2 and v.dim() == 2
    assert v.numel() == 4 and v.dtype is torch.int32 and str(v.device) == "ahbm:0"
    assert v.nbytes == 16 and v.ndim == 2
    assert v.data_ptr() == t.data_ptr() + 4


def test_unsupported_attributes_name_the_nearest_supported_one(ctx):
    t = torch.ones(2)
    assert t.share_memory_() is t  # a device tensor: a no-op, as torch's for CUDA
    with pytest.raises(AttributeError, match="histogramdd.*no device kernel"):
        t.histogramdd(t)
    with pytest.raises(TensorError, match="nearest supported: transpose"):
        t.transpos(0, 0)
    assert getattr(t, "no_such_thing", 3) == 3


# ----------------------------------------------------------------------------- placement


def test_views_of_a_row_wise_sharded_tensor_are_its_bytes(ctx):
    t = torch.arange(32, dtype=torch.float32, dp=DPPolicy(pe="row_wise")).reshape(8, 4)
    a = np.arange(32, dtype=np.float32).reshape(8, 4)
    middle = t[2:6]  # rows 2-3 on pe1, 4-5 on pe2: the same bytes
    pes = [p.pe_name for p in middle.device_tensor.placements]
    assert pes == ["sip0.cube0.pe1", "sip0.cube0.pe2"]
    middle += 1
    a[2:6] += 1
    uneven = t[1:7]  # pieces of 1, 2, 2, 1 rows: reached through strided copies
    uneven *= 2
    a[1:7] *= 2
    t[:, 2] = 0.0
    a[:, 2] = 0
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t[3:5].numpy(), a[3:5])


def test_views_of_a_column_wise_sharded_tensor_run_through_copies(ctx):
    t = torch.zeros(4, 4, dp=DPPolicy(pe="column_wise"))
    t.copy_(np.arange(16, dtype=np.float32).reshape(4, 4))
    assert t.device_tensor is t.storage_device_tensor
    row = t[1]
    with pytest.raises(TensorError, match="shards do not split it into rows"):
        _ = row.device_tensor
    row += 100
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    a[1] += 100
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(row.numpy(), a[1])


def test_freeing_a_view_is_refused_and_freeing_the_base_ends_its_views(ctx):
    t = torch.ones(4)
    v = t[1:3]
    with pytest.raises(TensorError, match="owns no memory"):
        v.free()
    t.free()
    with pytest.raises(TensorError, match="freed"):
        v.numpy()


# ----------------------------------------------------------------------------- kernels


def test_kernels_take_views_as_pointers_to_their_first_element(ctx):
    @jit
    def add_one(x_ptr, n, stride, BLOCK: tl.constexpr):
        i = tl.arange(0, BLOCK)
        mask = i < n
        tl.store(x_ptr + i * stride, tl.load(x_ptr + i * stride, mask=mask) + 1, mask=mask)

    t, a = _grid()
    add_one[(1,)](t[1], 4, 1, BLOCK=8)  # a contiguous row
    col = t[:, 2]
    add_one[(1,)](col, 3, col.stride(0), BLOCK=4)  # a strided column, indexed by its stride
    a[1] += 1
    a[:, 2] += 1
    np.testing.assert_array_equal(t.numpy(), a)


# ----------------------------------------------------------------------------- collectives


def _collectives_on_views() -> dict:
    dist.init_process_group()
    rank = dist.get_rank()
    t = torch.arange(8, dtype=torch.float32) + 10 * rank
    dist.all_reduce(t[0:4])
    m = torch.arange(12, dtype=torch.float32).reshape(3, 4) + 100 * rank
    dist.all_reduce(m[1])
    buf = torch.zeros(6)
    if rank == 0:
        dist.send(t[2:5], dst=1)
    else:
        dist.recv(buf[1:4], src=0)
    try:
        dist.all_reduce(m[:, 0])
        error = None
    except TensorError as exc:
        error = str(exc)
    return {"t": t.numpy(), "m": m.numpy(), "buf": buf.numpy(), "error": error}


def test_collectives_move_the_values_of_contiguous_views():
    res = kernbench.simulate(_collectives_on_views, topology="multi_sip", world_size=2)
    r0, r1 = res.returns
    t = [np.arange(8, dtype=np.float32) + 10 * r for r in range(2)]
    m = [np.arange(12, dtype=np.float32).reshape(3, 4) + 100 * r for r in range(2)]
    for r, out in enumerate((r0, r1)):
        expected_t = t[r].copy()
        expected_t[:4] = t[0][:4] + t[1][:4]
        expected_m = m[r].copy()
        expected_m[1] = m[0][1] + m[1][1]
        np.testing.assert_array_equal(out["t"], expected_t)
        np.testing.assert_array_equal(out["m"], expected_m)
        assert "not contiguous" in out["error"] and ".contiguous()" in out["error"]
    sent = t[0].copy()
    sent[:4] = t[0][:4] + t[1][:4]
    np.testing.assert_array_equal(r1["buf"], [0, *sent[2:5], 0, 0])


def test_timing_only_views_cost_time_and_carry_no_values():
    context = RuntimeContext("tiny", timing_only=True)
    with use_context(context):
        x = torch.randn(64, 32)
        before = context.now
        x[1:3] = torch.ones(2, 32)
        x[:, 0] = 2.0
        y = x.T.contiguous()
        assert context.now > before and y.shape == (32, 64)
        assert "no values in timing-only mode" in repr(x[0])
        with pytest.raises(TensorError, match="timing-only"):
            x.T.numpy()


def test_a_range_indexes_as_the_list_of_its_ints(ctx):
    # "What is torch.nn really?": -input[range(target.shape[0]), target].mean()
    values = np.arange(20, dtype=np.float32).reshape(4, 5) / 7
    x = torch.tensor(values, requires_grad=True)
    target = np.array([1, 0, 4, 2])
    loss = -x[range(4), torch.tensor(target)].mean()
    assert loss.item() == pytest.approx(-values[np.arange(4), target].mean(), rel=1e-6)
    loss.backward()
    expected = np.zeros_like(values)
    expected[np.arange(4), target] = -0.25
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    np.testing.assert_array_equal(x.detach()[range(1, 3)].numpy(), values[1:3])
    eye = torch.zeros(3, 3)
    eye[range(3), range(3)] = 1.0
    np.testing.assert_array_equal(eye.numpy(), np.eye(3, dtype=np.float32))
