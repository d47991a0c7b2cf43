"""What the pytorch/examples programs reached for and KernBench lacked, against NumPy:
``torch.Tensor(n, m)`` (the legacy constructor), ``torch.spmm`` / ``torch.sparse.*``,
``torch.sparse_coo_tensor`` and ``to_sparse()`` (sparse tensors held dense, ADR 0029),
``nn.DataParallel`` on one device (ADR 0028)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import kernbench.torch as torch
import kernbench.torch.nn as nn
from kernbench.errors import (
    TensorAttributeError,
    TensorError,
    TensorTypeError,
    TensorValueError,
    UnsupportedNameError,
)
from kernbench.runtime import RuntimeContext, use_context


@pytest.fixture
def ctx():
    context = RuntimeContext("tiny")
    with use_context(context):
        yield context


def _values(shape, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# ------------------------------------------------------------------ torch.Tensor(...)


def test_torch_tensor_with_sizes_is_an_uninitialised_default_dtype_tensor(ctx) -> None:
    t = torch.Tensor(3, 4)
    assert type(t) is torch.Tensor and t.shape == (3, 4) and t.dtype is torch.float32
    assert torch.Tensor(torch.Size([2, 5])).shape == (2, 5)
    assert torch.Tensor().shape == (0,)
    torch.set_default_dtype(torch.float64)
    try:
        assert torch.Tensor(2).dtype is torch.float64
    finally:
        torch.set_default_dtype(torch.float32)


def test_torch_tensor_with_data_copies_it_as_floats(ctx) -> None:
    t = torch.Tensor([[1, 2], [3, 4]])
    assert t.dtype is torch.float32
    np.testing.assert_array_equal(t.numpy(), [[1, 2], [3, 4]])
    np.testing.assert_array_equal(torch.Tensor(np.arange(3)).numpy(), [0, 1, 2])
    same = torch.ones(2)
    assert torch.Tensor(same) is same


def test_torch_tensor_refuses_what_torch_refuses(ctx) -> None:
    message = r"torch.Tensor\(tensor\): expected a torch.float32 tensor, got torch.int64; "
    with pytest.raises(TensorError, match=message + r"convert it with t.to\(torch.float32\)$"):
        torch.Tensor(torch.arange(3))
    with pytest.raises(TensorError, match=r"torch.Tensor\(2.5,\): give sizes"):
        torch.Tensor(2.5)


def test_a_parameter_made_from_torch_tensor_and_initialised(ctx) -> None:
    kernel = nn.Parameter(torch.Tensor(6, 4))
    nn.init.xavier_normal_(kernel)
    assert isinstance(kernel, nn.Parameter) and kernel.requires_grad
    assert kernel.shape == (6, 4) and np.isfinite(kernel.detach().numpy()).all()


def test_subclasses_still_wrap_tensors(ctx) -> None:
    p = nn.Parameter(torch.ones(2))
    assert type(p) is nn.Parameter and isinstance(p, torch.Tensor)
    assert isinstance(torch.zeros(1), torch.Tensor)


# ------------------------------------------------------------------ spmm and torch.sparse


def test_spmm_and_sparse_mm_are_the_dense_product_with_gradients(ctx) -> None:
    a_np, b_np = _values((5, 5), 1), _values((5, 3), 2)
    for product in (torch.spmm, torch.sparse.mm):
        a = torch.tensor(a_np)
        b = torch.tensor(b_np, requires_grad=True)
        out = product(a, b)
        np.testing.assert_allclose(out.detach().numpy(), a_np @ b_np, rtol=1e-5, atol=1e-5)
        out.sum().backward()
        np.testing.assert_allclose(b.grad.numpy(), np.repeat(a_np.sum(0)[:, None], 3, 1), rtol=1e-5)


def test_sparse_addmm_sum_and_softmax_are_the_dense_ones(ctx) -> None:
    m, a, b = _values((2, 3), 3), _values((2, 4), 4), _values((4, 3), 5)
    out = torch.sparse.addmm(torch.tensor(m), torch.tensor(a), torch.tensor(b), beta=0.5, alpha=2)
    np.testing.assert_allclose(out.numpy(), 0.5 * m + 2 * a @ b, rtol=1e-5, atol=1e-5)
    assert torch.sparse.sum(torch.tensor(m)).item() == pytest.approx(m.sum(), rel=1e-5)
    np.testing.assert_allclose(torch.sparse.sum(torch.tensor(m), 1).numpy(), m.sum(1), rtol=1e-5)
    e = np.exp(m - m.max(1, keepdims=True))
    np.testing.assert_allclose(
        torch.sparse.softmax(torch.tensor(m), 1).numpy(), e / e.sum(1, keepdims=True), rtol=1e-5
    )
    np.testing.assert_allclose(
        torch.sparse.log_softmax(torch.tensor(m), 1).numpy(),
        np.log(e / e.sum(1, keepdims=True)),
        rtol=1e-5,
        atol=1e-6,
    )


@pytest.mark.filterwarnings("ignore:.*sparse tensors are held dense")
def test_sparse_coo_tensor_sums_values_at_their_indices(ctx) -> None:
    where = np.array([[0, 2, 0, 1], [1, 0, 1, 3]])
    values = np.array([1.5, 2.0, 0.5, -1.0], dtype=np.float32)
    expected = np.zeros((3, 4), dtype=np.float32)
    np.add.at(expected, (where[0], where[1]), values)  # repeated (0, 1) adds up
    out = torch.sparse_coo_tensor(torch.tensor(where), torch.tensor(values), (3, 4))
    np.testing.assert_array_equal(out.numpy(), expected)
    assert out.layout is torch.strided and out.is_sparse is False
    inferred = torch.sparse_coo_tensor(where, values.tolist())  # size from the indices
    assert inferred.shape == (3, 4) and inferred.dtype is torch.float32
    ints = torch.sparse_coo_tensor(where.T.T, torch.ones(4), (3, 4), dtype=torch.int64)
    assert ints.dtype is torch.int64 and ints.numpy()[0, 1] == 2
    rows = torch.sparse_coo_tensor([[2, 0]], torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    np.testing.assert_array_equal(rows.numpy(), [[3, 4], [0, 0], [1, 2]])  # a dense dim


def test_sparse_coo_tensor_warns_and_carries_gradients(ctx) -> None:
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.warns(UserWarning, match=r"torch.sparse_coo_tensor: sparse tensors are held "
                      r"dense in kernbench"):  # fmt: skip
        out = torch.sparse_coo_tensor([[1, 1, 3]], w * 2, (5,))
    (out * torch.arange(5.0)).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), [2.0, 2.0, 6.0])


def test_sparse_coo_tensor_refuses_what_torch_refuses(ctx) -> None:
    with pytest.raises(TensorValueError, match=r"for dim 1, size is 2 but found index 3"):
        torch.sparse_coo_tensor([[0, 1], [3, 0]], [1.0, 2.0], (2, 2))
    with pytest.raises(TensorValueError, match=r"indices' nnz \(2\) must match values'"):
        torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0, 3.0], (2,))
    with pytest.raises(TensorValueError, match=r"indices must be a 2-D integer tensor"):
        torch.sparse_coo_tensor([0, 1], [1.0, 2.0], (2,))
    with pytest.raises(TensorValueError, match=r"size \(2, 3\) does not hold 1 sparse dims"):
        torch.sparse_coo_tensor([[0, 1]], [1.0, 2.0], (2, 3))


@pytest.mark.filterwarnings("ignore:.*sparse tensors are held dense")
def test_to_sparse_is_a_copy_and_to_dense_the_tensor(ctx) -> None:
    d_np = np.diag([1.0, 2.0, 3.0]).astype(np.float32)
    d = torch.tensor(d_np, requires_grad=True)
    s = d.to_sparse()
    assert s is not d and s.is_sparse is False
    np.testing.assert_array_equal(s.detach().numpy(), d_np)
    for convert in ("to_sparse_coo", "to_sparse_csr", "to_sparse_csc"):
        np.testing.assert_array_equal(getattr(d, convert)().detach().numpy(), d_np)
    x_np = _values((3, 2), 7)
    (s @ torch.tensor(x_np)).sum().backward()  # through the copy
    np.testing.assert_allclose(d.grad.numpy(), np.repeat(x_np.sum(1)[None, :], 3, 0), rtol=1e-5)
    plain = torch.ones(2)
    assert plain.to_dense() is plain and plain.to_dense(torch.float64).dtype is torch.float64


def test_what_sparse_tensors_lack_says_they_are_held_dense(ctx) -> None:
    with pytest.raises(TensorAttributeError, match=r"coalesce.*held dense here.*nonzero"):
        torch.eye(3).coalesce()
    with pytest.raises(UnsupportedNameError, match=r"torch.sparse_csr_tensor .*sparse_coo_tensor"):
        torch.sparse_csr_tensor  # noqa: B018
    with pytest.raises(UnsupportedNameError, match=r"torch.sparse.spdiags .*held dense here"):
        torch.sparse.spdiags  # noqa: B018
    assert repr(torch.sparse_coo) == "torch.sparse_coo" and torch.strided is not torch.sparse_csr


# ------------------------------------------------------------------ DataParallel


def test_data_parallel_calls_the_module_and_prefixes_its_state(ctx) -> None:
    inner = nn.Linear(3, 2)
    model = nn.DataParallel(inner)
    x_np = _values((4, 3), 6)
    out = model(torch.tensor(x_np))
    w, b = inner.weight.detach().numpy(), inner.bias.detach().numpy()
    np.testing.assert_allclose(out.detach().numpy(), x_np @ w.T + b, rtol=1e-5, atol=1e-6)
    assert model.module is inner and model.device_ids == [0] and model.output_device == 0
    assert list(model.state_dict()) == ["module.weight", "module.bias"]
    out.sum().backward()
    np.testing.assert_allclose(inner.bias.grad.numpy(), [4.0, 4.0])
    assert nn.parallel.DataParallel is nn.DataParallel


def test_functional_data_parallel_takes_a_tensor_or_a_tuple(ctx) -> None:
    model = nn.Bilinear(2, 2, 1)
    a, b = torch.ones(3, 2), torch.zeros(3, 2)
    np.testing.assert_allclose(
        nn.parallel.data_parallel(model, (a, b), range(1)).detach().numpy(),
        model(a, b).detach().numpy(),
    )
    relu = nn.ReLU()
    assert nn.parallel.data_parallel(relu, torch.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]


def test_data_parallel_checks_its_devices() -> None:
    with use_context(RuntimeContext("ring8")):
        with pytest.warns(UserWarning, match=r"nn.DataParallel: runs the module on one "
                          r"device here .* --nproc-per-node 8\)"):  # fmt: skip
            model = nn.DataParallel(nn.Linear(1, 1))
        assert model.device_ids == list(range(8))
        with pytest.raises(TensorValueError, match=r"invalid device id 9: this machine has 8"):
            nn.DataParallel(nn.Linear(1, 1), device_ids=[0, 9])
        with pytest.raises(TensorValueError, match=r"invalid device id 8"):
            nn.parallel.data_parallel(nn.ReLU(), torch.ones(1), [0], output_device=8)
        with pytest.raises(TensorTypeError, match=r"module must be an nn.Module, got int"):
            nn.DataParallel(3)


# ------------------------------------------------------------------ what to write instead


def test_torch_hub_says_what_to_do() -> None:
    with pytest.raises(UnsupportedNameError, match=r"torch.hub .*build the model"):
        torch.hub  # noqa: B018


# ------------------------------------------------------------------ nn.init


@pytest.mark.parametrize("groups", [1, 2])
def test_dirac_writes_identity_kernels(ctx, groups) -> None:
    import kernbench.torch.nn.functional as F

    w = nn.init.dirac_(torch.empty(4, 2, 3, 3), groups=groups)
    expected = np.zeros((4, 2, 3, 3), np.float32)
    per_group = 4 // groups
    for g in range(groups):
        for d in range(min(per_group, 2)):
            expected[g * per_group + d, d, 1, 1] = 1.0
    np.testing.assert_array_equal(w.numpy(), expected)
    x = torch.tensor(_values((1, 2, 5, 5), 8))
    same = F.conv2d(x, nn.init.dirac_(torch.empty(2, 2, 3)).unsqueeze(-1).expand(2, 2, 3, 3)
                    * torch.tensor([0.0, 1.0, 0.0]).view(1, 1, 1, 3), padding=1)  # fmt: skip
    np.testing.assert_allclose(same.numpy(), x.numpy(), rtol=1e-6)  # passes the input through
    with pytest.raises(ValueError, match="Only tensors with 3, 4, or 5 dimensions"):
        nn.init.dirac_(torch.empty(2, 2))
    with pytest.raises(ValueError, match="dim 0 must be divisible by groups"):
        nn.init.dirac_(torch.empty(3, 2, 3), groups=2)


def test_sparse_zeroes_a_fraction_of_each_column(ctx) -> None:
    torch.manual_seed(0)
    w = nn.init.sparse_(torch.empty(10, 6), sparsity=0.3, std=0.5).numpy()
    assert ((w == 0).sum(axis=0) == 3).all()  # ceil(0.3 * 10) zeros in every column
    assert 0.2 < w[w != 0].std() < 1.0
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions"):
        nn.init.sparse_(torch.empty(2, 2, 2), 0.5)


def test_deprecated_init_names_warn_and_fill(ctx) -> None:
    w = torch.empty(3, 4)
    with pytest.warns(FutureWarning, match=r"`nn.init.xavier_uniform` is now deprecated in "
                      r"favor of `nn.init.xavier_uniform_`"):  # fmt: skip
        assert nn.init.xavier_uniform(w) is w
    bound = math.sqrt(6 / 7)
    assert np.abs(w.numpy()).max() <= bound
    with pytest.warns(FutureWarning):
        nn.init.constant(w, 0.25)
    assert (w.numpy() == 0.25).all()
    with pytest.raises(TensorAttributeError, match=r"nn.init' has no attribute 'glorot_'.*dirac_"):
        nn.init.glorot_  # noqa: B018
    assert not hasattr(nn.init, "glorot_")


# ------------------------------------------------------------------ gumbel_softmax


def test_gumbel_softmax_is_a_softmax_of_noisy_logits(ctx) -> None:
    import kernbench.torch.nn.functional as F

    logits_np = _values((4, 5), 9)
    torch.manual_seed(3)
    soft = F.gumbel_softmax(torch.tensor(logits_np), tau=0.5).numpy()
    np.testing.assert_allclose(soft.sum(1), 1.0, rtol=1e-5)
    torch.manual_seed(3)
    noise = -torch.empty(4, 5).exponential_().log().numpy()  # the same draw
    z = (logits_np + noise) / 0.5
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(soft, e / e.sum(1, keepdims=True), rtol=1e-4, atol=1e-6)


def test_hard_gumbel_softmax_is_one_hot_with_the_soft_gradient(ctx) -> None:
    import kernbench.torch.nn.functional as F

    logits = torch.tensor(_values((3, 4), 10), requires_grad=True)
    torch.manual_seed(5)
    hard = F.gumbel_softmax(logits, hard=True, dim=1)
    values = hard.detach().numpy()
    assert set(np.unique(values)) == {0.0, 1.0} and (values.sum(1) == 1).all()
    torch.manual_seed(5)
    soft = F.gumbel_softmax(logits, hard=False, dim=1)
    np.testing.assert_array_equal(values.argmax(1), soft.detach().numpy().argmax(1))
    w = torch.tensor(_values((3, 4), 11))
    (hard * w).sum().backward()
    straight_through = logits.grad.numpy().copy()
    logits.grad = None
    (soft * w).sum().backward()
    np.testing.assert_allclose(straight_through, logits.grad.numpy(), rtol=1e-5, atol=1e-7)
    with pytest.raises(TensorError, match="logits must be floating point"):
        F.gumbel_softmax(torch.arange(3))


def test_a_gradient_penalty_says_what_to_write_instead(ctx) -> None:
    x = torch.ones(2, requires_grad=True)
    y = (x**3).sum()
    with pytest.raises(TensorError, match=r"create_graph=True.*not supported.*weight clipping"):
        torch.autograd.grad(y, x, create_graph=True)
    with pytest.raises(TensorError, match=r"backward\(create_graph=True\): .*finite differences"):
        y.backward(create_graph=True)


# ------------------------------------------------------------------ set-up lines


def test_deterministic_algorithms_are_accepted_and_reported() -> None:
    assert torch.are_deterministic_algorithms_enabled() is False
    try:
        torch.use_deterministic_algorithms(True)
        assert torch.are_deterministic_algorithms_enabled() is True
        assert torch.is_deterministic_algorithms_warn_only_enabled() is False
        assert torch.get_deterministic_debug_mode() == 2
        torch.set_deterministic_debug_mode("warn")
        assert torch.is_deterministic_algorithms_warn_only_enabled() is True
        assert torch.get_deterministic_debug_mode() == 1
        with pytest.raises(TensorTypeError, match="argument 'mode' must be bool, not int"):
            torch.use_deterministic_algorithms(1)
        with pytest.raises(TensorValueError, match="expected one of `default`, `warn`, `error`"):
            torch.set_deterministic_debug_mode("loud")
        with pytest.raises(TensorValueError, match="expected 0, 1, or 2, but got 3"):
            torch.set_deterministic_debug_mode(3)
    finally:
        torch.use_deterministic_algorithms(False)
    assert torch.get_deterministic_debug_mode() == 0


def test_torch_version_compares_by_number() -> None:
    import kernbench.torch.version as version

    assert torch.__version__ == "2.6.0+kernbench" and isinstance(torch.__version__, str)
    assert torch.__version__ >= (2, 0) and torch.__version__ >= "1.13"
    assert torch.__version__ < "2.10" and torch.__version__ < (3,)
    assert torch.__version__ != "2.6" and torch.__version__ != (2, 6)  # the local label
    assert torch.__version__.split("+")[0] == "2.6.0"
    assert tuple(int(v) for v in torch.__version__.split(".")[:2]) == (2, 6)
    assert torch.version is version and version.cuda is None and version.hip is None
    assert version.__version__ is torch.__version__


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("from torchvision import datasets, transforms", "TensorDataset over torch.rand"),
        ("import kernbench.torchvision.transforms", "does not mirror torchvision"),
        ("import torchaudio", "soundfile"),
    ],
)
def test_importing_a_companion_library_says_what_to_do_instead(tmp_path, line, hint) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "uses_companion.py"
    script.write_text(f"import kernbench.torch as torch\n{line}\n")
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERNBENCH_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "kernbench.cli", "run", str(script)],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "uses_companion.py:2:" in done.stderr and "ModuleNotFoundError" in done.stderr
    assert hint in done.stderr and "Traceback" not in done.stderr


# ------------------------------------------------------------------ distributions.Independent


def test_independent_normal_is_a_diagonal_gaussian(ctx) -> None:
    from kernbench.torch.distributions import Independent, Normal, kl_divergence

    mu_np, sigma_np = _values((3, 4), 12), np.abs(_values((3, 4), 13)) + 0.5
    mu = torch.tensor(mu_np, requires_grad=True)
    d = Independent(Normal(mu, torch.tensor(sigma_np)), 1)
    assert d.batch_shape == (3,) and d.event_shape == (4,) and d.has_rsample
    x_np = _values((3, 4), 14)
    log_prob = d.log_prob(torch.tensor(x_np))
    expected = (-((x_np - mu_np) ** 2) / (2 * sigma_np**2) - np.log(sigma_np)
                - 0.5 * np.log(2 * np.pi)).sum(-1)  # fmt: skip
    np.testing.assert_allclose(log_prob.detach().numpy(), expected, rtol=1e-5)
    entropy = (0.5 + 0.5 * np.log(2 * np.pi) + np.log(sigma_np)).sum(-1)
    np.testing.assert_allclose(d.entropy().numpy(), entropy, rtol=1e-5)
    log_prob.sum().backward()
    np.testing.assert_allclose(mu.grad.numpy(), (x_np - mu_np) / sigma_np**2, rtol=1e-5)
    assert d.rsample((2,)).shape == (2, 3, 4) and d.sample().shape == (3, 4)
    q = Independent(Normal(torch.zeros(3, 4), torch.ones(3, 4)), 1)
    kl = 0.5 * (sigma_np**2 + mu_np**2 - 1 - np.log(sigma_np**2))
    np.testing.assert_allclose(kl_divergence(d, q).detach().numpy(), kl.sum(-1), rtol=1e-5)
    whole = Independent(Normal(torch.zeros(3, 4), torch.ones(3, 4)), 2)
    assert whole.batch_shape == () and whole.log_prob(torch.zeros(3, 4)).shape == ()
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims <= len"):
        Independent(Normal(torch.zeros(3), torch.ones(3)), 2)


# ------------------------------------------------------------------ legacy CUDA types, t.new


def test_cuda_legacy_types_are_the_device_constructors(ctx) -> None:
    from kernbench.torch.autograd import Variable

    Tensor = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor
    assert Tensor is torch.cuda.FloatTensor and repr(Tensor) == "<class 'torch.cuda.FloatTensor'>"
    valid = Variable(Tensor(4, 1).fill_(1.0), requires_grad=False)
    assert valid.dtype is torch.float32 and valid.tolist() == [[1.0]] * 4
    noise_np = np.random.default_rng(15).normal(0, 1, (4, 8))
    z = Variable(Tensor(noise_np))
    assert z.dtype is torch.float32
    np.testing.assert_allclose(z.numpy(), noise_np.astype(np.float32))
    assert isinstance(z, torch.cuda.FloatTensor) and not isinstance(z, torch.cuda.LongTensor)
    assert torch.ones(2).type(torch.cuda.LongTensor).dtype is torch.int64
    assert torch.cuda.LongTensor([1, 2]).dtype is torch.int64
    with pytest.raises(TensorError, match=r"torch.cuda.LongTensor\(tensor\): expected a torch"):
        torch.cuda.LongTensor(torch.ones(2))


def test_tensor_new_keeps_the_dtype(ctx) -> None:
    ints = torch.arange(3)
    made = ints.new(2, 5)
    assert made.shape == (2, 5) and made.dtype is torch.int64
    assert ints.new([4, 5]).tolist() == [4, 5] and ints.new([4, 5]).dtype is torch.int64
    assert ints.new().shape == (0,) and ints.new(ints) is ints
    w = torch.ones(2, 3, requires_grad=True)
    hidden = w.new(4, 3).zero_()
    assert hidden.requires_grad is False and hidden.dtype is torch.float32
    assert hidden.tolist() == [[0.0] * 3] * 4


@pytest.mark.filterwarnings("ignore:.*sparse tensors are held dense")
def test_legacy_sparse_constructors_as_pygcn_writes_them(ctx) -> None:
    rows, cols = np.array([0, 1, 2]), np.array([1, 2, 0])
    indices = torch.from_numpy(np.vstack((rows, cols)).astype(np.int64))
    values = torch.from_numpy(np.array([0.5, 1.5, 2.5], dtype=np.float64))
    adj = torch.sparse.FloatTensor(indices, values, torch.Size((3, 3)))
    assert adj.dtype is torch.float32
    expected = np.zeros((3, 3), np.float32)
    expected[rows, cols] = [0.5, 1.5, 2.5]
    np.testing.assert_array_equal(adj.numpy(), expected)
    support = torch.tensor(_values((3, 2), 16))
    np.testing.assert_allclose(
        torch.spmm(adj, support).numpy(), expected @ support.numpy(), rtol=1e-5
    )
    assert torch.sparse.LongTensor(indices, torch.ones(3), (3, 3)).dtype is torch.int64


def test_a_custom_scheduler_subclasses_the_old_lrscheduler_name(ctx) -> None:
    from kernbench.torch.optim.lr_scheduler import LRScheduler, _LRScheduler

    class Warmup(_LRScheduler):
        def __init__(self, optimizer, warmup, last_epoch=-1):
            self.warmup = warmup
            super().__init__(optimizer, last_epoch)

        def get_lr(self):
            return [base * min(1.0, (self.last_epoch + 1) / self.warmup) for base in self.base_lrs]

    optimizer = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=2.0)
    scheduler = Warmup(optimizer, 4)
    seen = []
    for _ in range(5):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert seen == pytest.approx([0.5, 1.0, 1.5, 2.0, 2.0])
    assert issubclass(_LRScheduler, LRScheduler)
