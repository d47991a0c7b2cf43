"""torch.nn modules, parameters, containers, layers and init, against torch's names and NumPy.

Registration order, dotted names, ``state_dict`` keys, printing and error
messages are torch's; layer outputs are checked against NumPy, and initial
weights against NumPy's PCG64 drawn as the rank generator draws them.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn.functional as F
from kernbench.errors import KernBenchError, ModuleAttributeError, TensorError, TensorTypeError
from kernbench.runtime import RuntimeContext, use_context
from kernbench.torch import nn


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)
        self.inner = nn.Linear(2, 2)

    def forward(self, x):
        return self.inner(x) * self.scale


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = Block()
        self.act = nn.ReLU()
        self.second = Block()
        self.shared = self.first.inner  # the same module twice

    def forward(self, x):
        return self.second(self.act(self.first(x)))


# ------------------------------------------------------------------------- registration, names


def test_names_follow_torch_registration_order_and_dedup(ctx):
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "first.scale",
        "first.inner.weight",
        "first.inner.bias",
        "second.scale",
        "second.inner.weight",
        "second.inner.bias",
    ]
    assert len(list(net.parameters())) == 6
    assert [n for n, _ in net.named_buffers()] == [
        "first.count",
        "first.scratch",
        "second.count",
        "second.scratch",
    ]
    assert [n for n, _ in net.named_modules()] == [
        "",
        "first",
        "first.inner",
        "act",
        "second",
        "second.inner",
    ]
    # shared is first.inner, not a child already seen: torch lists it (and dedups modules())
    assert [n for n, _ in net.named_children()] == ["first", "act", "second", "shared"]
    assert list(net.children())[0] is net.first
    assert [n for n, _ in net.named_parameters(prefix="model", recurse=False)] == []
    assert [n for n, _ in net.first.named_parameters(recurse=False)] == ["scale"]
    assert list(net.state_dict()) == [
        "first.scale",
        "first.count",
        "first.inner.weight",
        "first.inner.bias",
        "second.scale",
        "second.count",
        "second.inner.weight",
        "second.inner.bias",
        "shared.weight",
        "shared.bias",
    ]


def test_state_dict_shares_memory_and_load_copies(ctx):
    a, b = nn.Linear(3, 2), nn.Linear(3, 2)
    sd = a.state_dict()
    assert not isinstance(sd["weight"], nn.Parameter)
    sd["weight"].fill_(0.5)  # same memory as the parameter, as torch
    np.testing.assert_array_equal(a.weight.detach().numpy(), np.full((2, 3), 0.5, np.float32))
    result = b.load_state_dict(a.state_dict())
    assert repr(result) == "<All keys matched successfully>"
    np.testing.assert_array_equal(b.weight.detach().numpy(), a.weight.detach().numpy())
    np.testing.assert_array_equal(b.bias.detach().numpy(), a.bias.detach().numpy())
    assert isinstance(b.weight, nn.Parameter)
    assert list(a.state_dict(None, "lin.")) == ["lin.weight", "lin.bias"]  # torch's positional
    assert a.state_dict(keep_vars=True)["weight"] is a.weight
    b.load_state_dict({"weight": torch.ones(2, 3), "bias": torch.ones(2)}, assign=True)
    assert isinstance(b.weight, nn.Parameter) and b.weight.tolist() == [[1.0] * 3] * 2


def test_load_state_dict_strict_errors_are_torchs(ctx):
    m = nn.Linear(3, 2)
    sd = {"weight": torch.zeros(2, 3), "extra": torch.zeros(1)}
    with pytest.raises(TensorError) as info:
        m.load_state_dict(sd)
    assert str(info.value) == (
        "Error(s) in loading state_dict for Linear:\n"
        '\tMissing key(s) in state_dict: "bias". \n'
        '\tUnexpected key(s) in state_dict: "extra". '
    )
    keys = m.load_state_dict(sd, strict=False)
    assert keys.missing_keys == ["bias"] and keys.unexpected_keys == ["extra"]
    np.testing.assert_array_equal(m.weight.detach().numpy(), np.zeros((2, 3), np.float32))
    with pytest.raises(TensorError, match=r"size mismatch for weight: copying a param with "
                       r"shape torch.Size\(\[3, 3\]\) from checkpoint, the shape in current "
                       r"model is torch.Size\(\[2, 3\]\)."):  # fmt: skip
        m.load_state_dict({"weight": torch.zeros(3, 3), "bias": torch.zeros(2)})


def test_getattr_error_is_torchs_and_hasattr_works(ctx):
    m = nn.Linear(2, 2)
    with pytest.raises(ModuleAttributeError) as info:
        _ = m.weigth
    assert str(info.value) == "'Linear' object has no attribute 'weigth'"
    assert isinstance(info.value, KernBenchError) and isinstance(info.value, AttributeError)
    assert not hasattr(m, "nope") and hasattr(m, "weight")


def test_assigning_the_wrong_type_to_a_parameter_or_module_slot(ctx):
    m = nn.Linear(2, 2)
    with pytest.raises(TensorTypeError, match=r"cannot assign 'Tensor' as parameter 'weight' "
                       r"\(torch.nn.Parameter or None expected\)"):  # fmt: skip
        m.weight = torch.zeros(2, 2)
    m.bias = None  # None is allowed, as torch
    assert m.bias is None and [n for n, _ in m.named_parameters()] == ["weight"]
    seq = nn.Sequential(nn.ReLU())
    with pytest.raises(TensorTypeError, match="cannot assign 'int' as child module '0'"):
        setattr(seq, "0", 3)
    with pytest.raises(KeyError, match="attribute 'training' already exists"):
        m.register_buffer("training", torch.zeros(1))
    with pytest.raises(KeyError, match="parameter name can.+t contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="before Module.__init__"):

        class Broken(nn.Module):
            def __init__(self):
                self.w = nn.Parameter(torch.zeros(1))

        Broken()


def test_forward_missing_and_hooks(ctx):
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(1)
    m = nn.Identity()
    seen = []
    pre = m.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))
    m.register_forward_hook(lambda mod, args, out: seen.append(out.tolist()) or out * 2)
    assert m(torch.tensor([1.0])).tolist() == [4.0]
    pre.remove()
    assert m(torch.tensor([1.0])).tolist() == [2.0] and seen == [[2.0], [1.0]]


def test_repr_is_torchs(ctx):
    net = nn.Sequential(
        nn.Linear(4, 8),
        nn.GELU(approximate="tanh"),
        nn.ModuleList([nn.LayerNorm(8) for _ in range(3)] + [nn.Dropout(0.1)]),
        nn.Linear(8, 2, bias=False),
    )
    assert repr(net) == (
        "Sequential(\n"
        "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
        "  (1): GELU(approximate='tanh')\n"
        "  (2): ModuleList(\n"
        "    (0-2): 3 x LayerNorm((8,), eps=1e-05, elementwise_affine=True)\n"
        "    (3): Dropout(p=0.1, inplace=False)\n"
        "  )\n"
        "  (3): Linear(in_features=8, out_features=2, bias=False)\n"
        ")"
    )
    assert repr(nn.ReLU(inplace=True)) == "ReLU(inplace=True)"
    assert repr(nn.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(nn.Embedding(10, 3, padding_idx=-1)) == "Embedding(10, 3, padding_idx=9)"
    assert repr(nn.BatchNorm1d(4)) == (
        "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    )
    assert repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)" and repr(nn.MSELoss()) == "MSELoss()"
    p = nn.Parameter(torch.tensor([1.0, 2.0]))
    assert repr(p) == (
        "Parameter containing:\ntensor([1., 2.], device='ahbm:0', requires_grad=True)"
    )


# ------------------------------------------------------------------------- modes, conversion


def test_train_eval_requires_grad_zero_grad_apply(ctx):
    net = Net()
    assert net.training and net.first.inner.training
    assert net.eval() is net and not net.second.inner.training
    net.train()
    assert net.second.inner.training
    assert all(p.requires_grad for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())
    for p in net.parameters():
        p.grad = torch.ones(p.shape)
    net.zero_grad(set_to_none=False)
    assert all(p.grad.sum().item() == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    names = []
    assert net.apply(lambda m: names.append(type(m).__name__)) is net
    # apply walks children(), so the shared Linear is visited twice, as torch
    assert names == ["Linear", "Block", "ReLU", "Linear", "Block", "Linear", "Net"]


def test_to_and_half_convert_floating_params_and_buffers_in_place(ctx):
    bn = nn.BatchNorm1d(3)
    weight = bn.weight
    weight.grad = torch.ones(3)
    assert bn.half() is bn
    assert bn.weight is weight and weight.dtype is torch.float16
    assert weight.grad.dtype is torch.float16
    assert bn.running_mean.dtype is torch.float16
    assert bn.num_batches_tracked.dtype is torch.int64  # integer buffers stay
    assert bn.to(torch.float32).weight.dtype is torch.float32
    assert bn.to("cuda", dtype=torch.bfloat16).running_var.dtype is torch.bfloat16
    assert bn.float().bias.dtype is torch.float32 and bn.cuda() is bn
    with pytest.raises(TensorTypeError, match="only accepts floating point or complex dtypes"):
        bn.to(torch.int32)
    assert bn.to("cuda", torch.float16, non_blocking=True).weight.dtype is torch.float16
    assert bn.to(torch.float32, True).weight.dtype is torch.float32  # non_blocking, positional
    with pytest.raises(TensorTypeError, match=r"unexpected keyword argument 'blocking'; it tak"):
        bn.to(torch.float16, blocking=False)
    assert bn.weight.dtype is torch.float32  # refused before anything was converted
    with pytest.raises(TensorTypeError, match="at most a device and a dtype"):
        bn.to("cuda", torch.float16, torch.float32)


# --------------------------------------------------------------------------------- parameter


def test_parameter_is_a_tensor_over_the_same_memory(ctx):
    t = torch.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, nn.Parameter) and isinstance(p, torch.Tensor) and p.requires_grad
    assert not nn.Parameter(t, requires_grad=False).requires_grad
    t.fill_(3.0)
    assert p.tolist() == [3.0, 3.0]
    out = p * 2 + 1
    assert type(out) is torch.Tensor and out.tolist() == [7.0, 7.0]
    p.grad = torch.ones(2)  # a plain tensor is a valid grad
    deep = copy.deepcopy(p)
    assert isinstance(deep, nn.Parameter) and deep.grad.tolist() == [1.0, 1.0]
    with torch.no_grad():  # a Parameter is a leaf that requires grad: in place only here
        deep.fill_(0.0)
    assert p.tolist() == [3.0, 3.0]
    # the facade's mixins accept a Parameter where they check for a tensor
    assert p[torch.tensor([1, 0])].tolist() == [3.0, 3.0]
    assert p[torch.tensor([True, False])].tolist() == [3.0]
    with torch.no_grad():
        p[torch.tensor([True, False])] = torch.tensor(5.0)
    assert p.tolist() == [5.0, 3.0]
    with pytest.raises(TensorTypeError, match="data must be a Tensor"):
        nn.Parameter([1.0])


# -------------------------------------------------------------------------------- containers


def test_sequential_indexing_slicing_and_forward(ctx):
    seq = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and isinstance(seq[1], nn.ReLU)
    head = seq[:2]
    assert isinstance(head, nn.Sequential) and len(head) == 2 and head[0] is seq[0]
    x = torch.from_numpy(_values((5, 3)))
    expected = seq[2](seq[1](seq[0](x)))
    np.testing.assert_allclose(seq(x).detach().numpy(), expected.detach().numpy())
    seq.append(nn.Tanh())
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2", "3"]
    with pytest.raises(IndexError, match="index 7 is out of range"):
        seq[7]
    from collections import OrderedDict

    named = nn.Sequential(OrderedDict(fc=nn.Linear(2, 2), act=nn.ReLU()))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]


def test_module_and_parameter_lists_and_dicts(ctx):
    layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])
    layers.append(nn.ReLU())
    layers += [nn.Tanh()]
    assert len(layers) == 4 and isinstance(layers[-1], nn.Tanh)
    assert [n for n, _ in layers.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Identity()})
    assert list(heads.keys()) == ["a", "b"] and "a" in heads
    assert [n for n, _ in heads.named_parameters()] == ["a.weight", "a.bias"]
    plist = nn.ParameterList([torch.zeros(2), nn.Parameter(torch.ones(3))])
    assert all(isinstance(p, nn.Parameter) for p in plist) and len(plist) == 2
    assert [n for n, _ in plist.named_parameters()] == ["0", "1"]
    pdict = nn.ParameterDict({"w": torch.zeros(2, 2)})
    assert isinstance(pdict["w"], nn.Parameter) and list(pdict) == ["w"]
    assert repr(plist) == (
        "ParameterList(\n"
        "    (0): Parameter containing: [torch.float32 of size 2 (ahbm:0)]\n"
        "    (1): Parameter containing: [torch.float32 of size 3 (ahbm:0)]\n"
        ")"
    )


# ------------------------------------------------------------------------------------ layers


def test_linear_init_is_torchs_bound_drawn_from_the_seeded_generator(ctx):
    torch.manual_seed(7)
    m = nn.Linear(5, 3)
    rng = np.random.Generator(np.random.PCG64(7))
    bound = 1 / math.sqrt(5)

    def draw(shape):
        return (-bound + 2 * bound * rng.random(shape, dtype=np.float32).astype(float)).astype(
            np.float32
        )

    np.testing.assert_allclose(m.weight.detach().numpy(), draw((3, 5)), rtol=1e-6)
    np.testing.assert_allclose(m.bias.detach().numpy(), draw((3,)), rtol=1e-6)
    torch.manual_seed(7)
    again = nn.Linear(5, 3)
    np.testing.assert_array_equal(again.weight.detach().numpy(), m.weight.detach().numpy())
    x = _values((2, 4, 5))
    expected = x @ m.weight.detach().numpy().T + m.bias.detach().numpy()
    np.testing.assert_allclose(
        m(torch.from_numpy(x)).detach().numpy(), expected, rtol=1e-5, atol=1e-6
    )
    half = nn.Linear(5, 3, bias=False, dtype=torch.float16)
    assert half.weight.dtype is torch.float16 and half.bias is None


def test_embedding_rows_and_padding(ctx):
    torch.manual_seed(3)
    emb = nn.Embedding(6, 4, padding_idx=2)
    rng = np.random.Generator(np.random.PCG64(3))
    weights = rng.standard_normal((6, 4), dtype=np.float32)
    weights[2] = 0
    np.testing.assert_allclose(emb.weight.detach().numpy(), weights, rtol=1e-6)
    idx = np.array([[0, 2, 5], [1, 1, 3]])
    out = emb(torch.tensor(idx))
    assert tuple(out.shape) == (2, 3, 4)
    np.testing.assert_array_equal(out.detach().numpy(), weights[idx])
    with pytest.raises(TensorError, match="indices. to have one of the following scalar types"):
        emb(torch.zeros(2))
    frozen = nn.Embedding.from_pretrained(torch.from_numpy(weights))
    assert not frozen.weight.requires_grad


def test_norm_layers_match_numpy(ctx):
    x = _values((4, 6, 5))
    t = torch.from_numpy(x)
    ln = nn.LayerNorm(5)
    with torch.no_grad():  # as torch: parameters are changed in place outside the graph
        ln.weight.fill_(2.0)
        ln.bias.fill_(0.5)
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    np.testing.assert_allclose(
        ln(t).detach().numpy(), (x - mean) / np.sqrt(var + 1e-5) * 2 + 0.5, rtol=1e-4, atol=1e-5
    )
    rms = nn.RMSNorm([5], eps=1e-6)
    expected = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(rms(t).detach().numpy(), expected, rtol=1e-4, atol=1e-5)
    gn = nn.GroupNorm(3, 6)
    g = x.reshape(4, 3, 10)
    expected = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(
        gn(t).detach().numpy(), expected.reshape(x.shape), rtol=1e-4, atol=1e-5
    )
    assert (
        not nn.LayerNorm(5, bias=False).bias
        and nn.LayerNorm(5, elementwise_affine=False).weight is None
    )


def test_batch_norm_running_stats_in_train_and_eval(ctx):
    x = _values((8, 3))
    bn = nn.BatchNorm1d(3)
    out = bn(torch.from_numpy(x))
    mean, var = x.mean(0), x.var(0)
    np.testing.assert_allclose(
        out.detach().numpy(), (x - mean) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        bn.running_var.numpy(), 0.9 + 0.1 * x.var(0, ddof=1), rtol=1e-5, atol=1e-6
    )
    assert bn.num_batches_tracked.item() == 1
    bn.eval()
    rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
    np.testing.assert_allclose(
        bn(torch.from_numpy(x)).detach().numpy(),
        (x - rm) / np.sqrt(rv + 1e-5),
        rtol=1e-4,
        atol=1e-5,
    )
    assert bn.num_batches_tracked.item() == 1
    with pytest.raises(ValueError, match=r"expected 2D or 3D input \(got 4D input\)"):
        bn(torch.zeros(2, 3, 2, 2))
    with pytest.raises(ValueError, match=r"expected 4D input \(got 2D input\)"):
        nn.BatchNorm2d(3)(torch.zeros(2, 3))


def test_dropout_respects_train_and_eval(ctx):
    x = torch.ones(1000)
    drop = nn.Dropout(0.5)
    values = drop(x).numpy()
    assert set(np.unique(values)) == {0.0, 2.0} and 300 < (values == 0).sum() < 700
    drop.eval()
    np.testing.assert_array_equal(drop(x).numpy(), np.ones(1000, np.float32))
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(1.5)


def test_shape_layers(ctx):
    t = torch.zeros(2, 3, 4, 5)
    assert nn.Flatten()(t).shape == (2, 60) and nn.Flatten(0, 1)(t).shape == (6, 4, 5)
    assert nn.Unflatten(1, (3, 1))(torch.zeros(2, 3)).shape == (2, 3, 1)
    assert nn.Identity(54, unused="x")(t) is t


@pytest.mark.parametrize(
    ("module", "function"),
    [
        (nn.ReLU(), F.relu),
        (nn.GELU(), F.gelu),
        (nn.GELU("tanh"), lambda x: F.gelu(x, approximate="tanh")),
        (nn.SiLU(), F.silu),
        (nn.Sigmoid(), F.sigmoid),
        (nn.Tanh(), F.tanh),
        (nn.Softmax(dim=1), lambda x: F.softmax(x, 1)),
        (nn.LogSoftmax(dim=-1), lambda x: F.log_softmax(x, -1)),
        (nn.LeakyReLU(0.2), lambda x: F.leaky_relu(x, 0.2)),
        (nn.ELU(0.5), lambda x: F.elu(x, 0.5)),
        (nn.Softplus(2.0), lambda x: F.softplus(x, 2.0)),
        (nn.Mish(), F.mish),
        (nn.Hardswish(), F.hardswish),
        (nn.GLU(), F.glu),
    ],
)
def test_activation_modules_are_their_functions(ctx, module, function):
    x = torch.from_numpy(_values((3, 4)))
    np.testing.assert_array_equal(module(x).numpy(), function(x).numpy())


def test_loss_modules_are_their_functions(ctx):
    x, y = torch.from_numpy(_values((4, 3))), torch.from_numpy(_values((4, 3), seed=2))
    p = torch.from_numpy(np.random.default_rng(5).uniform(0.1, 0.9, (4, 3)).astype(np.float32))
    labels = torch.tensor([0, 2, 1, 2])
    cases = [
        (nn.MSELoss(), F.mse_loss(x, y)),
        (nn.L1Loss(reduction="sum"), F.l1_loss(x, y, reduction="sum")),
        (nn.SmoothL1Loss(beta=0.5), F.smooth_l1_loss(x, y, beta=0.5)),
        (nn.HuberLoss(delta=0.5), F.huber_loss(x, y, delta=0.5)),
        (nn.BCEWithLogitsLoss(), F.binary_cross_entropy_with_logits(x, p)),
    ]
    for module, expected in cases:
        target = p if isinstance(module, nn.BCEWithLogitsLoss) else y
        np.testing.assert_array_equal(module(x, target).numpy(), expected.numpy())
    np.testing.assert_array_equal(nn.BCELoss()(p, p).numpy(), F.binary_cross_entropy(p, p).numpy())
    ce = nn.CrossEntropyLoss(label_smoothing=0.1)
    np.testing.assert_array_equal(
        ce(x, labels).numpy(), F.cross_entropy(x, labels, label_smoothing=0.1).numpy()
    )
    lsm = F.log_softmax(x, 1)
    np.testing.assert_array_equal(
        nn.NLLLoss()(lsm, labels).numpy(), F.nll_loss(lsm, labels).numpy()
    )
    kl = nn.KLDivLoss(reduction="batchmean", log_target=True)
    np.testing.assert_array_equal(
        kl(lsm, lsm).numpy(), F.kl_div(lsm, lsm, reduction="batchmean", log_target=True).numpy()
    )


# -------------------------------------------------------------------------------------- init


def test_init_fills_and_gains(ctx):
    assert nn.init.calculate_gain("relu") == math.sqrt(2)
    assert nn.init.calculate_gain("tanh") == 5 / 3
    assert nn.init.calculate_gain("leaky_relu", 0.2) == math.sqrt(2 / 1.04)
    with pytest.raises(ValueError, match="Unsupported nonlinearity gelu"):
        nn.init.calculate_gain("gelu")
    w = torch.empty(30, 40)
    torch.manual_seed(1)
    assert nn.init.xavier_uniform_(w) is w
    rng = np.random.Generator(np.random.PCG64(1))
    bound = math.sqrt(6 / 70)
    expected = -bound + 2 * bound * rng.random((30, 40), dtype=np.float32).astype(float)
    np.testing.assert_allclose(w.numpy(), expected.astype(np.float32), rtol=1e-6)
    nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    expected = math.sqrt(2) / math.sqrt(30) * rng.standard_normal((30, 40), dtype=np.float32)
    np.testing.assert_allclose(w.numpy(), expected.astype(np.float32), rtol=1e-5)
    nn.init.trunc_normal_(w, std=0.02, a=-0.03, b=0.03)
    assert np.abs(w.numpy()).max() <= 0.03
    q = torch.empty(4, 6)
    nn.init.orthogonal_(q, gain=2.0)
    np.testing.assert_allclose(q.numpy() @ q.numpy().T, 4 * np.eye(4), atol=1e-5)
    assert nn.init.zeros_(w).sum().item() == 0 and nn.init.constant_(w, 0.5).mean().item() == 0.5
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        nn.init.xavier_uniform_(torch.empty(3))
    with pytest.raises(ValueError, match=r"Mode fan_both not supported, please use one of "):
        nn.init.kaiming_uniform_(w, mode="fan_both")


def test_imports_of_the_new_names(ctx):
    namespace: dict = {}
    exec("from kernbench.torch.nn import Linear, Module, Parameter, init", namespace)
    assert namespace["Linear"] is nn.Linear and namespace["init"] is nn.init
    exec("import kernbench.torch.nn.init as I", namespace)
    assert namespace["I"].kaiming_uniform_ is nn.init.kaiming_uniform_


# ------------------------------------------------------------------------ MultiheadAttention


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _mha_reference(q, k, v, mha, mask=None):
    """torch's multi_head_attention_forward in NumPy over (L, N, E) inputs."""
    L, N, E = q.shape
    S, H = k.shape[0], mha.num_heads
    D = E // H
    W, b = mha.in_proj_weight.detach().numpy(), mha.in_proj_bias.detach().numpy()
    Wo, bo = mha.out_proj.weight.detach().numpy(), mha.out_proj.bias.detach().numpy()

    def heads(x, i, n):
        y = x @ W[i * E : (i + 1) * E].T + b[i * E : (i + 1) * E]
        return y.reshape(n, N, H, D).transpose(1, 2, 0, 3)

    scores = heads(q, 0, L) / math.sqrt(D) @ heads(k, 1, S).swapaxes(-1, -2)
    if mask is not None:
        scores = scores + mask
    attn = _softmax(scores)
    out = (attn @ heads(v, 2, S)).transpose(2, 0, 1, 3).reshape(L, N, E) @ Wo.T + bo
    return out, attn


def test_multihead_attention_matches_numpy_with_masks(ctx):
    N, L, S, E, H = 2, 4, 5, 8, 2
    mha = nn.MultiheadAttention(E, H, batch_first=True)
    assert list(mha.state_dict()) == [
        "in_proj_weight",
        "in_proj_bias",
        "out_proj.weight",
        "out_proj.bias",
    ]
    assert repr(mha) == (
        "MultiheadAttention(\n  (out_proj): NonDynamicallyQuantizableLinear(in_features=8, "
        "out_features=8, bias=True)\n)"
    )
    assert mha.in_proj_bias.sum().item() == 0  # torch's init: zero biases
    with torch.no_grad():
        mha.in_proj_bias.copy_(torch.from_numpy(_values((3 * E,), 9)))
        mha.out_proj.bias.copy_(torch.from_numpy(_values((E,), 10)))
    q, k, v = _values((N, L, E), 1), _values((N, S, E), 2), _values((N, S, E), 3)
    causal = np.triu(np.ones((L, S), bool), 1)  # True: not attended
    padding = np.zeros((N, S), bool)
    padding[1, -2:] = True
    out, weights = mha(
        torch.from_numpy(q),
        torch.from_numpy(k),
        torch.from_numpy(v),
        key_padding_mask=torch.from_numpy(padding),
        attn_mask=torch.from_numpy(causal),
    )
    mask = np.where(causal, -np.inf, 0)[None, None] + np.where(padding, -np.inf, 0)[:, None, None]
    ref_out, ref_attn = _mha_reference(
        q.transpose(1, 0, 2), k.transpose(1, 0, 2), v.transpose(1, 0, 2), mha, mask
    )
    assert tuple(out.shape) == (N, L, E) and tuple(weights.shape) == (N, L, S)
    np.testing.assert_allclose(
        out.detach().numpy(), ref_out.transpose(1, 0, 2), rtol=1e-4, atol=1e-5
    )
    np.testing.assert_allclose(weights.detach().numpy(), ref_attn.mean(1), rtol=1e-4, atol=1e-6)
    fast, none = mha(
        torch.from_numpy(q),
        torch.from_numpy(k),
        torch.from_numpy(v),
        key_padding_mask=torch.from_numpy(padding),
        need_weights=False,
        attn_mask=torch.from_numpy(causal),
    )
    assert none is None
    np.testing.assert_allclose(fast.detach().numpy(), out.detach().numpy(), rtol=1e-4, atol=1e-5)
    _, per_head = mha(
        torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v), average_attn_weights=False
    )
    assert tuple(per_head.shape) == (N, H, L, S)


def test_multihead_attention_sequence_first_unbatched_and_errors(ctx):
    E, H = 6, 3
    mha = nn.MultiheadAttention(E, H)
    x = _values((4, E), 4)  # unbatched (L, E)
    out, weights = mha(torch.from_numpy(x), torch.from_numpy(x), torch.from_numpy(x))
    ref_out, ref_attn = _mha_reference(x[:, None], x[:, None], x[:, None], mha)
    assert tuple(out.shape) == (4, E) and tuple(weights.shape) == (4, 4)
    np.testing.assert_allclose(out.detach().numpy(), ref_out[:, 0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(weights.detach().numpy(), ref_attn[0].mean(0), rtol=1e-4, atol=1e-6)
    with pytest.raises(TensorError, match="Need attn_mask if specifying the is_causal hint"):
        mha(torch.from_numpy(x), torch.from_numpy(x), torch.from_numpy(x), is_causal=True)
    with pytest.raises(
        TensorError, match=r"The shape of the 2D attn_mask is torch.Size\(\[2, 2\]\)"
    ):
        t = torch.from_numpy(x)
        mha(t, t, t, attn_mask=torch.zeros(2, 2))
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(7, 2)
    separate = nn.MultiheadAttention(E, H, kdim=4, vdim=5, bias=False)
    assert [n for n, _ in separate.named_parameters()] == [
        "q_proj_weight",
        "k_proj_weight",
        "v_proj_weight",
        "out_proj.weight",
    ]
    out, _ = separate(torch.zeros(3, 2, E), torch.zeros(5, 2, 4), torch.zeros(5, 2, 5))
    assert tuple(out.shape) == (3, 2, E)


def test_share_memory_is_a_no_op_on_device_tensors_as_torch_s_on_cuda(ctx):
    # Programs call model.share_memory() before handing the model to mp.Process workers;
    # the ranks of a run share one process, so they hold the same model object.
    model = nn.Linear(3, 2)
    before = {name: p for name, p in model.named_parameters()}
    values = {name: p.detach().numpy().copy() for name, p in before.items()}
    assert model.share_memory() is model
    for name, p in model.named_parameters():
        assert p is before[name]
        np.testing.assert_array_equal(p.detach().numpy(), values[name])
    t = torch.ones(4)
    assert t.share_memory_() is t
