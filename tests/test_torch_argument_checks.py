"""Arguments of the wrong kind are a TensorError naming the call and the argument.

Each case used to escape from inside KernBench as a bare TypeError, ValueError or
IndexError ("'NoneType' object is not iterable", "tuple index out of range", "the
truth value of an array ... is ambiguous"), which the command line reports as an
internal error; ``randint`` bounds past the dtype wrapped silently.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _grid() -> torch.Tensor:
    return torch.arange(6, dtype=torch.float32).reshape(2, 3)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.amax(None), "amax: dim must be an int or a sequence of ints, got None"),
        (lambda t: t.amax(0, keepdim=np.array([1, 2])), "amax: keepdim must be True or False"),
        (lambda t: t.logsumexp(0, np.array([1, 2])), "logsumexp: keepdim must be True or False"),
        (lambda t: t.sum(0, keepdim=np.array([1, 2])), "sum: keepdim must be True or False"),
        (lambda t: t.argmax(keepdim="yes"), "argmax: keepdim must be True or False"),
        (lambda t: t.max(0, None), "max: keepdim must be True or False, got None"),
        (lambda t: t.all(0, np.array([1, 2])), "all: keepdim must be True or False"),
        (lambda t: t.unflatten(0, None), "unflatten: sizes must be an int or a sequence"),
        (lambda t: t.movedim(0, None), "movedim: destination must be an int or a sequence"),
        (lambda t: t.split(None), "split: split_size must be an int or a sequence of ints"),
        (lambda t: t.split([1, [2]]), "split: split_size must be an int or a sequence of ints"),
        (lambda t: t.split("a"), "split: split_size must be an int or a sequence of ints"),
        (lambda t: t.tile(None), "tile: the repeats must be an int or a sequence of ints"),
        (lambda t: t.narrow(0, None, 1), "narrow: start must be an int, got None"),
        (lambda t: t.mv(np.float32), "mv: expected a 2-D matrix and a 1-D vector"),
        (lambda t: t.addmm(np.float32, np.float32), "addmm: mat1 must be a 2-D tensor"),
        (lambda t: torch.cat(None), "cat needs a non-empty sequence of Tensors, got NoneType"),
        (lambda t: torch.stack([t], None), "stack: dim must be an int, got None"),
        (lambda t: torch.stack([t], float), "stack: dim must be an int"),
        (lambda t: torch.numel([3]), "torch.numel: expected a Tensor, got list"),
    ],
)
def test_wrong_kinds_of_argument_name_the_call(ctx, call, message):
    with pytest.raises(TensorError) as info:
        call(_grid())
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda s: s.unbind(), "unbind"),
        (lambda s: s.chunk(2), "chunk"),
        (lambda s: s.split(1), "split"),
        (lambda s: s.narrow(0, 0, 1), "narrow"),
        (lambda s: s.unflatten(0, (1,)), "unflatten"),
    ],
)
def test_calls_that_index_a_dim_refuse_a_0d_tensor(ctx, call, what):
    with pytest.raises(TensorError, match=f"{what}: dimension specified as 0 but the tensor has"):
        call(torch.tensor(2.5))


def test_movedim_of_a_0d_tensor_and_cat_of_0d_tensors(ctx):
    assert torch.tensor(2.5).movedim(0, -1).item() == 2.5  # as torch
    with pytest.raises(TensorError, match=r"cat: zero-dimensional tensor \(at position 0\)"):
        torch.cat(list(torch.ones(3)))  # iterating a 1-d tensor gives 0-d ones
    assert torch.cat(list(_grid())).shape == torch.Size([6])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: torch.randint(0, 2**40, (3,), dtype=torch.int32),
            r"randint: \[0, 1099511627776\) does not fit torch.int32",
        ),
        (lambda: torch.randint(0, 2**64, (3,)), r"does not fit torch.int64"),
        (lambda: torch.randint(-5, 300, (8,), dtype=torch.uint8), "does not fit torch.uint8"),
        (lambda: torch.randint(None, (2,)), "randint: high must be a finite int, got None"),
        (lambda: torch.randint(float("inf"), (2,)), "randint: high must be a finite int"),
        (lambda: torch.randint(np.array([1, 2]), (2,)), "randint: high must be a finite int"),
        (lambda: torch.arange(float("nan")), "arange: start, end and step must be finite"),
        (lambda: torch.arange(0, float("inf")), "arange: start, end and step must be finite"),
        (lambda: torch.tensor([1, [2]]), "tensor: data must be a number or nested lists"),
        (lambda: torch.tensor([[1, 2], [3]]), "all lists at one depth the same length"),
        (lambda: torch.zeros(2, requires_grad=np.array([1, 2])), "requires_grad must be True"),
        (lambda: torch.tensor(2.0, requires_grad="yes"), "tensor: requires_grad must be True"),
    ],
)
def test_factory_arguments_are_checked(ctx, call, message):
    with pytest.raises(TensorError, match=message):
        call()


def test_randint_bounds_that_fit_still_draw(ctx):
    wide = torch.randint(0, 2**40, (64,), dtype=torch.float32).numpy()
    assert wide.min() >= 0 and wide.max() < 2**40
    small = torch.randint(0, 256, (64,), dtype=torch.uint8).numpy()
    assert small.dtype == np.uint8
    assert set(torch.randint(torch.tensor(3), (64,)).numpy().tolist()) <= {0, 1, 2}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: F.relu(t, np.array([1, 2])), "relu: inplace must be True or False"),
        (lambda t: F.silu(t, "yes"), "silu: inplace must be True or False"),
        (lambda t: F.dropout(t, 0.5, np.array([1, 2])), "dropout: training must be True or False"),
        (lambda t: F.gelu(t, np.array([1, 2])), "gelu: approximate must be 'none' or 'tanh'"),
        (lambda t: F.layer_norm(t, np.array([1, 2])), r"normalized_shape \(1, 2\) must be"),
        (lambda t: F.normalize(t, out="s"), "normalize: out must be a Tensor, got str"),
        (lambda t: F.pad(t, None), "pad: pad must be an int or a sequence of ints, got None"),
        (lambda t: F.pad(t, [1, [2]]), "pad: pad must be an int or a sequence of ints"),
        (lambda t: F.pad(t, (1, 1), np.array([1, 2])), "pad: mode array"),
        (lambda t: torch.addcmul(t, 0, "a"), "addcmul: tensor1 must be a Tensor, got int"),
        (lambda t: torch.addcdiv(t, t, np.array([1])), "addcdiv: tensor2 must be a Tensor"),
        (lambda t: torch.where(t > 0, out=t), "torch.where: this form returns tuple"),
        (lambda t: t.reshape(-1).dot(None), "dot: expected a Tensor, got NoneType"),
    ],
)
def test_functional_arguments_are_checked(ctx, call, message):
    with pytest.raises(TensorError, match=message):
        call(_grid())


def test_flags_still_take_bools_and_ints(ctx):
    t = _grid() - 2
    np.testing.assert_array_equal(F.relu(t, 0).numpy(), np.maximum(t.numpy(), 0))
    assert t.sum(0, keepdim=np.bool_(True)).shape == torch.Size([1, 3])
    assert F.layer_norm(_grid(), np.array([3])).shape == torch.Size([2, 3])


def _assign(key, value):
    def write(t):
        t[key] = value

    return write


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (_assign(0, "abc"), "the values must be a Tensor, a number or an array"),
        (_assign(None, object()), "the values must be a Tensor, a number or an array"),
        (_assign(0, 1j), "the values must be a Tensor, a number or an array"),
        (_assign(0, [1, [2]]), "the value assigned must be a Tensor, a number or an array"),
        (lambda t: t.copy_("abc"), "copy_ into .*: the values must be a Tensor"),
        (lambda t: t[[[0, 1], [0]]], "indices must be lists of ints of one length at each depth"),
        (lambda t: t[::0], "step must be greater than zero, got 0"),
        (lambda t: t[1.5:], r"slice slice\(1.5, None, None\): its start, stop and step must be"),
        (lambda t: t[:"a":2], "its start, stop and step must be ints or None"),
        (lambda t: t.expand(None, 3), "expand: a size must be an int, got None"),
        (lambda t: t.view_as(None), "view_as: other must be a Tensor, got NoneType"),
        (lambda t: t.reshape_as(6), "reshape_as: other must be a Tensor, got int"),
        (lambda t: t.expand_as("a"), "expand_as: other must be a Tensor, got str"),
    ],
)
def test_indexing_and_views_check_their_arguments(ctx, call, message):
    with pytest.raises(TensorError, match=message):
        call(_grid())


def test_assigning_host_values_still_matches_numpy(ctx):
    t, a = _grid(), np.arange(6, dtype=np.float32).reshape(2, 3)
    t[0] = [7, 8, 9]
    t[1, 1:] = np.array([True, False])
    a[0] = [7, 8, 9]
    a[1, 1:] = [1, 0]
    np.testing.assert_array_equal(t.numpy(), a)
    assert t[torch.tensor(1) :].shape == torch.Size([1, 3])


# ----------------------------------------------------------------------------- values


def test_sum_with_an_integer_dtype_casts_first_as_torch(ctx):
    values = np.array([[1.5, 2.5], [-1.7, 0.9]], dtype=np.float32)
    t = torch.from_numpy(values)
    cast = values.astype(np.int32)  # torch converts the input to dtype, then sums
    assert t.sum(dtype=torch.int32).item() == cast.sum() == 2  # was 4 (summed, then cast)
    np.testing.assert_array_equal(t.sum(0, dtype=torch.int32).numpy(), cast.sum(0))
    halves = values.astype(np.float16)
    assert t.sum(dtype=torch.float16).item() == np.float16(halves.astype(np.float32).sum())
    assert torch.tensor([1, 2]).sum(dtype=torch.float32).item() == 3.0


def test_a_uint8_index_is_a_mask_as_in_torch(ctx):
    values = np.arange(6, dtype=np.float32).reshape(3, 2)
    t = torch.from_numpy(values)
    mask = torch.tensor([1, 0, 1], dtype=torch.uint8)
    with pytest.warns(UserWarning, match="indexing with dtype torch.uint8 is now deprecated"):
        picked = t[mask]
    np.testing.assert_array_equal(picked.numpy(), values[[True, False, True]])  # was rows 1, 0, 1
    with pytest.warns(UserWarning):
        t[mask] = 0.0
    values[[True, False, True]] = 0.0
    np.testing.assert_array_equal(t.numpy(), values)


def test_a_tensor_given_as_dtype_is_named(ctx):
    with pytest.raises(TensorError, match="dtype must be a torch dtype such as torch.float32, got"):
        torch.as_tensor([1.0], torch.ones(2))  # as_tensor(data, dtype): was NumPy's ValueError
    with pytest.raises(TensorError, match="unsupported dtype 'complex64'; valid: torch.float16"):
        torch.zeros(2, dtype="complex64")
    assert torch.zeros(2, dtype="float64").dtype is torch.float64  # a name, as NumPy's


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.size(0), "size: dimension specified as 0 but the tensor has no dimensions"),
        (lambda s: s.stride(-1), "stride: dimension specified as -1 but the tensor has no"),
        (lambda s: s.type_as(None), "type_as: other must be a Tensor, got NoneType"),
    ],
)
def test_accessors_of_a_0d_tensor(ctx, call, message):
    with pytest.raises(TensorError, match=message):
        call(torch.tensor(2.5))


def test_torch_functions_with_out_name_themselves_on_wrong_arguments(ctx):
    t = torch.ones(2)
    with pytest.raises(TypeError, match=r"torch.abs: too many positional arguments; it takes"):
        torch.abs(t, None)
    with pytest.raises(TypeError, match=r"required argument: 'other'; it takes torch.add"):
        torch.add(t)
    np.testing.assert_array_equal(torch.abs(-t, out=torch.empty(2)).numpy(), [1.0, 1.0])


def test_attention_scale_and_loss_weight_of_the_wrong_kind(ctx):
    q = torch.ones(2, 3, 4)
    with pytest.raises(TensorError, match="scale must be a number or None, got 'x'"):
        F.scaled_dot_product_attention(q, q, q, scale="x")
    with pytest.raises(TensorError, match="weight must be a Tensor or None, got str"):
        F.cross_entropy(torch.ones(4, 3), torch.tensor([0, 1, 2, 0]), weight="w")


@pytest.mark.parametrize(
    "name", ["cat", "concat", "concatenate", "stack", "hstack", "vstack", "dstack"]
)
@pytest.mark.parametrize("requires_grad", [False, True])
def test_joining_a_bare_tensor_is_refused_as_torch_refuses_it(ctx, name, requires_grad):
    """A tensor is not a sequence of tensors to torch.cat and its kin (they used to join its
    rows); a list or tuple of one tensor still works."""
    t = torch.ones(2, 3, requires_grad=requires_grad)
    shown = {"concat": "cat", "concatenate": "cat"}.get(name, name)
    with pytest.raises(TypeError, match=rf"^{shown}\(\): argument 'tensors' \(position 1\) "
                       "must be tuple of Tensors, not Tensor$"):  # fmt: skip
        getattr(torch, name)(t)
    assert np.array_equal(getattr(torch, name)((t,)).detach().numpy().ravel(), np.ones(6))
