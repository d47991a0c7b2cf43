"""In-place ops on tensors in the autograd graph: each gives the gradients of its
out-of-place form (NumPy where it matters), torchvision's BasicBlock with
``ReLU(inplace=True)`` and ``out += identity`` trains as its out-of-place twin, ``t[key] =
value`` routes gradients to the value and away from the overwritten elements, and the
version counter refuses a backward through a tensor changed after it was saved, with
torch's message; the refusals (leaves, views) by message."""

from __future__ import annotations

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import TensorError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn, optim


@pytest.fixture(scope="module")
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _leaf(seed, shape=(2, 3)):
    values = np.random.default_rng(seed).uniform(-1.0, 1.0, shape)
    return torch.tensor(values, requires_grad=True), values


OPS = [
    ("relu_", lambda h, o: h.relu_(), lambda h, o: h.relu()),
    ("add_", lambda h, o: h.add_(o, alpha=2.0), lambda h, o: h.add(o, alpha=2.0)),
    ("mul_", lambda h, o: h.mul_(o), lambda h, o: h * o),  # needs h's old value for o's grad
    ("div_", lambda h, o: h.div_(o + 3.0), lambda h, o: h / (o + 3.0)),
    ("sigmoid_", lambda h, o: h.sigmoid_(), lambda h, o: h.sigmoid()),
    ("exp_", lambda h, o: h.exp_(), lambda h, o: h.exp()),
    ("clamp_", lambda h, o: h.clamp_(-0.3, 0.4), lambda h, o: h.clamp(-0.3, 0.4)),
    ("iadd", lambda h, o: h.__iadd__(o), lambda h, o: h + o),
    ("isub", lambda h, o: h.__isub__(o), lambda h, o: h - o),
    ("imul", lambda h, o: h.__imul__(o), lambda h, o: h * o),
    ("itruediv", lambda h, o: h.__itruediv__(o + 3.0), lambda h, o: h / (o + 3.0)),
    ("F.relu", lambda h, o: F.relu(h, inplace=True), lambda h, o: F.relu(h)),
    ("F.leaky_relu", lambda h, o: F.leaky_relu(h, 0.1, True), lambda h, o: F.leaky_relu(h, 0.1)),
]


@pytest.mark.parametrize(("name", "in_place", "out_of_place"), OPS, ids=[o[0] for o in OPS])
def test_in_place_ops_give_the_out_of_place_gradients(ctx, name, in_place, out_of_place):
    got = []
    for fn in (in_place, out_of_place):
        x, _ = _leaf(0)
        o, _ = _leaf(1)
        h = x * 1.5
        before = h._version
        y = fn(h, o)
        if fn is in_place:
            assert y is h and h._version > before and not h.is_leaf
        (y * torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)).sum().backward()
        got.append((y.detach().numpy().copy(), x.grad.numpy().copy(), o.grad))
    (v1, gx1, go1), (v2, gx2, go2) = got
    np.testing.assert_allclose(v1, v2, rtol=1e-12)
    np.testing.assert_allclose(gx1, gx2, rtol=1e-12)
    if go2 is not None:
        np.testing.assert_allclose(go1.numpy(), go2.numpy(), rtol=1e-12)


class BasicBlock(nn.Module):
    """torchvision's ResNet BasicBlock, as written there."""

    def __init__(self, planes, inplace):
        super().__init__()
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=inplace)
        self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.inplace = inplace

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.inplace:
            out += identity
        else:
            out = out + identity
        out = self.relu(out)
        return out


def test_a_resnet_basic_block_with_in_place_relu_and_residual_trains_as_its_twin(ctx):
    x = torch.tensor(np.random.default_rng(3).normal(size=(2, 4, 6, 6)), dtype=torch.float32)
    finals = []
    for inplace in (True, False):
        torch.manual_seed(0)
        block = BasicBlock(4, inplace)
        opt = optim.SGD(block.parameters(), lr=0.1, momentum=0.9)
        for _ in range(2):
            opt.zero_grad()
            block(x).square().mean().backward()
            opt.step()
        finals.append({k: v.numpy().copy() for k, v in block.state_dict().items()})
    for k in finals[1]:
        np.testing.assert_allclose(finals[0][k], finals[1][k], rtol=1e-5, atol=1e-6, err_msg=k)


def test_setitem_sends_the_written_elements_gradient_to_the_value(ctx):
    x, xv = _leaf(4, (4, 3))
    v, vv = _leaf(5, (3,))
    h = x * 2.0
    h[1] = v * 3.0  # a row, from a value that requires grad
    mask = torch.tensor([True, False, True, False])
    h[mask] = 0.5  # rows 0 and 2: a number
    weights = torch.tensor(np.arange(12.0).reshape(4, 3))
    (h * weights).sum().backward()
    want_x = 2.0 * np.arange(12.0).reshape(4, 3)
    want_x[[0, 1, 2]] = 0.0  # overwritten: no gradient to x there
    np.testing.assert_allclose(x.grad.numpy(), want_x)
    np.testing.assert_allclose(v.grad.numpy(), 3.0 * np.arange(3.0, 6.0))
    assert h.grad_fn.name() == "CopySlices"
    # a buffer that does not require grad, filled from ones that do (broadcast value)
    buf = torch.zeros(2, 3, dtype=torch.float64)
    y, yv = _leaf(6, (3,))
    buf[0] = y
    buf[1:] = y.sum()
    buf.sum().backward()
    np.testing.assert_allclose(y.grad.numpy(), [4.0, 4.0, 4.0])  # 1 + 3 (the sum, 3 columns)
    assert buf.requires_grad and not buf.is_leaf
    # copy_, zero_ and fill_ on tensors in the graph
    a, _ = _leaf(7, (3,))
    b, _ = _leaf(8, (3,))
    t = a * 1.0
    t.copy_(b * 2.0)
    t.sum().backward()
    assert a.grad.tolist() == [0.0] * 3 and b.grad.tolist() == [2.0] * 3
    a.grad = None
    t = a * 1.0
    t.zero_()
    (t + a).sum().backward()
    assert a.grad.tolist() == [1.0] * 3


def test_the_version_counter_refuses_a_backward_through_a_changed_tensor(ctx):
    x, _ = _leaf(9, (3,))
    h = x.exp()  # ExpBackward saves its result
    y = h * 2.0
    h.add_(1.0)
    with pytest.raises(
        TensorError,
        match=r"modified by an inplace operation: \[torch.float64 \[3\]\], saved by "
        r"ExpBackward0, is at version 1; expected version 0 instead",
    ):
        y.sum().backward()
    # a parameter stepped between forward and backward, as torch refuses it
    lin = nn.Linear(3, 2)
    out = lin(torch.ones(4, 3, requires_grad=True)).sum()
    with torch.no_grad():
        lin.weight.add_(0.1)
    with pytest.raises(TensorError, match="modified by an inplace operation"):
        out.backward()


def test_an_in_place_op_with_no_gradient_cuts_the_old_history(ctx):
    x, _ = _leaf(11, (3,))
    h = x * 2.0
    h.eq_(torch.tensor([1.0, 0.5, 9.0], dtype=torch.float64))  # values no longer depend on x
    (h + x).sum().backward()
    assert x.grad.tolist() == [1.0, 1.0, 1.0]  # only through "+ x"


def test_refusals_name_the_call(ctx):
    x, _ = _leaf(10, (3,))
    with pytest.raises(TensorError, match="a leaf Variable that requires grad is being used"):
        x.relu_()
    with pytest.raises(TensorError, match="a leaf Variable that requires grad is being used"):
        F.relu(x, inplace=True)
    h = x * 2.0
    with pytest.raises(TensorError, match="__iadd__: an in-place op on a view of a tensor"):
        h[1:].__iadd__(1.0)
    leaf_view = x.view(3)  # the whole of a leaf's memory, through a view
    with pytest.raises(TensorError, match="relu_: an in-place op on a view of a tensor"):
        leaf_view.relu_()
    with pytest.raises(TensorError, match="output with shape \\[3\\] doesn't match the broadcast"):
        h.add_(torch.ones(2, 3))
