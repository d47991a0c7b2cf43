"""``torch.nn.RNN`` (tanh or relu), ``LSTM`` and ``GRU``: multi-layer, optionally
bidirectional recurrent layers, as torch's ``torch/nn/modules/rnn.py``.

Parameters are torch's, named and shaped as torch's (``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` for an LSTM
with ``proj_size``, each with ``_reverse`` for the second direction), registered in
torch's order and drawn from ``U(-1/sqrt(hidden_size), 1/sqrt(hidden_size))``.

Cost model: as cuDNN does, each layer and direction projects the input of *all* its
time steps with one matmul (``F.linear`` over ``(seq_len * batch, input)``), then runs
one step per loop iteration: the recurrent matmul ``W_hh h`` and the gate ops of
:mod:`~kernbench.torch.nn.rnn_cells` (so a step costs a small matmul and a few
pointwise kernels, one launch each, where cuDNN fuses the pointwise part).  The
step outputs are concatenated once per layer and direction.  Everything is a
recorded op, so ``backward()`` runs through the autograd engine.  Dropout between
layers is ``F.dropout`` in training.

A :class:`~kernbench.torch.nn.utils.rnn.PackedSequence` input runs the same steps on
the first ``batch_sizes[t]`` rows at step ``t`` (the rows that have ended keep their
last state; the reverse direction starts each sequence from its own end).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

import kernbench.torch as torch  # cat and stack as wrapped for autograd
from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.amp import is_autocast_enabled
from kernbench.torch.factories import empty, zeros
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.nn.rnn_cells import check_size, gru_step, lstm_step, rnn_step
from kernbench.torch.nn.utils.rnn import PackedSequence, packed
from kernbench.torch.tensor import Tensor

__all__ = ["GRU", "LSTM", "RNN", "RNNBase"]

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _permuted(hx: Tensor, order: list[int] | None) -> Tensor:
    """``hx`` with its batch dim (1) in ``order`` (recorded as basic indexing)."""
    if order is None or order == list(range(hx.shape[1])):
        return hx
    return torch.stack([hx[:, i] for i in order], 1)


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: the parameters and the layer loop."""

    def __init__(
        self,
        mode: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        if mode not in _GATES:
            raise TensorValueError(f"Unrecognized RNN mode: {mode}")
        if (
            isinstance(dropout, bool)
            or not isinstance(dropout, numbers.Real)
            or not 0 <= dropout <= 1
        ):
            raise TensorValueError(
                "dropout should be a number in range [0, 1] representing the probability of "
                "an element being zeroed"
            )
        check_size(hidden_size, type(self).__name__, "hidden_size")
        check_size(num_layers, type(self).__name__, "num_layers")
        if dropout > 0 and num_layers == 1:
            warnings.warn(
                "dropout option adds dropout after all but last recurrent layer, so non-zero "
                f"dropout expects num_layers greater than 1, but got dropout={dropout} and "
                f"num_layers={num_layers}",
                stacklevel=3,
            )
        if isinstance(proj_size, bool) or not isinstance(proj_size, int) or proj_size < 0:
            raise TensorValueError(
                "proj_size should be a positive integer or zero to disable projections"
            )
        if proj_size >= hidden_size:
            raise TensorValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        made = {"device": device, "dtype": dtype}
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            for direction in range(num_directions):
                layer_input = input_size if layer == 0 else real_hidden * num_directions
                suffix = "_reverse" if direction == 1 else ""
                shapes = [
                    (f"weight_ih_l{layer}{suffix}", (gate_size, layer_input)),
                    (f"weight_hh_l{layer}{suffix}", (gate_size, real_hidden)),
                ]
                if bias:
                    shapes += [
                        (f"bias_ih_l{layer}{suffix}", (gate_size,)),
                        (f"bias_hh_l{layer}{suffix}", (gate_size,)),
                    ]
                if proj_size > 0:
                    shapes.append((f"weight_hr_l{layer}{suffix}", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name, Parameter(empty(*shape, **made)))
                names = [name for name, _ in shapes]
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / self.hidden_size**0.5 if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self) -> None:
        """Nothing to do: there is no cuDNN weight buffer here."""

    @property
    def _flat_weights(self) -> list[Tensor | None]:
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list[list[Parameter]]:
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ---------------------------------------------------------------------------- checks

    def _check_input(self, input: Tensor, expected_dim: int) -> None:  # noqa: A002
        weight = self._flat_weights[0]
        if input.dtype != weight.dtype and not is_autocast_enabled():
            raise TensorValueError(
                f"input must have the type {weight.dtype}, got type {input.dtype}"
            )
        if input.ndim != expected_dim:
            raise TensorError(f"input must have {expected_dim} dimensions, got {input.ndim}")
        if input.shape[-1] != self.input_size:
            raise TensorError(
                f"input.size(-1) must be equal to input_size. Expected {self.input_size}, got "
                f"{input.shape[-1]}"
            )

    def _expected_hidden(self, batch: int, cell: bool = False) -> tuple[int, int, int]:
        directions = 2 if self.bidirectional else 1
        size = self.proj_size if self.proj_size > 0 and not cell else self.hidden_size
        return (self.num_layers * directions, batch, size)

    @staticmethod
    def _check_hidden(hx: Tensor, expected: tuple[int, ...], label: str = "hidden") -> None:
        if tuple(hx.shape) != expected:
            raise TensorError(f"Expected {label} size {expected}, got {list(hx.shape)}")

    # ---------------------------------------------------------------------------- running

    def _prepare(
        self,
        input: Any,  # noqa: A002 - torch's name
        states: tuple[Tensor | None, ...],
    ) -> tuple[Tensor, list[int], list[int] | None, list[int] | None, bool, tuple[Any, ...]]:
        """``(data, batch_sizes, sorted, unsorted, batched, states)``: the input as rows
        of ``batch_sizes[t]`` per step, its states with a batch dim (None if not given)."""
        if isinstance(input, PackedSequence):
            data = input.data
            self._check_input(data, 2)
            batch_sizes, order, back = input.host_layout()
            states = tuple(None if s is None else _permuted(s, order) for s in states)
            return data, batch_sizes, order, back, True, states
        what = "RNN" if self.mode.startswith("RNN") else self.mode
        if input.ndim not in (2, 3):
            tail = " tensor" if what == "RNN" else ""
            raise TensorValueError(
                f"{what}: Expected input to be 2D or 3D, got {input.ndim}D{tail} instead"
            )
        batched = input.ndim == 3
        given = [s for s in states if s is not None]
        if given and any(s.ndim != (3 if batched else 2) for s in given):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            want = 3 if batched else 2
            if len(states) == 1:
                raise TensorError(
                    f"For {kind} input, hx should also be {want}-D but got {given[0].ndim}-D tensor"
                )
            dims = ", ".join(f"{s.ndim}-D" for s in given)
            raise TensorError(
                f"For {kind} input, hx and cx should also be {want}-D but got ({dims}) tensors"
            )
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            states = tuple(None if s is None else s.unsqueeze(1) for s in states)
        self._check_input(input, 3)
        if self.batch_first:
            input = input.transpose(0, 1)
        steps, batch = input.shape[0], input.shape[1]
        return (
            input.reshape(steps * batch, self.input_size),
            [batch] * steps,
            None,
            None,
            batched,
            states,
        )

    def _direction(
        self,
        data: Tensor,
        batch_sizes: list[int],
        weights: list[Tensor | None],
        h: Tensor,
        c: Tensor | None,
        reverse: bool,
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """One layer in one direction: ``(output rows, h_n, c_n)``."""
        w_ih, w_hh, b_ih, b_hh, w_hr = weights
        projected = F.linear(data, w_ih, b_ih)  # every step's input projection at once
        starts = [0]
        for size in batch_sizes[:-1]:
            starts.append(starts[-1] + size)
        outputs: list[Tensor | None] = [None] * len(batch_sizes)
        order = range(len(batch_sizes) - 1, -1, -1) if reverse else range(len(batch_sizes))
        for t in order:
            size, start = batch_sizes[t], starts[t]
            gi = projected[start : start + size]
            full = size == h.shape[0]
            h_prev = h if full else h[:size]
            if self.mode == "LSTM":
                c_prev = c if full else c[:size]
                h_new, c_new = lstm_step(gi, h_prev, c_prev, w_hh, b_hh, w_hr)
                c = c_new if full else torch.cat([c_new, c[size:]], 0)
            elif self.mode == "GRU":
                h_new = gru_step(gi, h_prev, w_hh, b_hh)
            else:
                h_new = rnn_step(gi, h_prev, w_hh, b_hh, self.mode == "RNN_RELU")
            h = h_new if full else torch.cat([h_new, h[size:]], 0)
            outputs[t] = h_new
        return torch.cat(outputs, 0), h, c

    def _run(
        self, data: Tensor, batch_sizes: list[int], hx: Tensor, cx: Tensor | None
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """``(output rows, h_n, c_n)`` of all the layers."""
        directions = 2 if self.bidirectional else 1
        h_n: list[Tensor] = []
        c_n: list[Tensor] = []
        layer_input = data
        for layer in range(self.num_layers):
            results = []
            for direction in range(directions):
                index = layer * directions + direction
                names = self._all_weights[index]
                found = {name.split("_l")[0]: getattr(self, name) for name in names}
                weights = [
                    found.get(key)
                    for key in ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")
                ]
                out, h, c = self._direction(
                    layer_input,
                    batch_sizes,
                    weights,
                    hx[index],
                    None if cx is None else cx[index],
                    reverse=direction == 1,
                )
                results.append(out)
                h_n.append(h)
                if c is not None:
                    c_n.append(c)
            layer_input = results[0] if directions == 1 else torch.cat(results, 1)
            if self.training and self.dropout > 0 and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, training=True)
        return layer_input, torch.stack(h_n, 0), torch.stack(c_n, 0) if c_n else None

    def _forward(self, input: Any, states: tuple[Tensor | None, ...]) -> tuple[Any, ...]:  # noqa: A002
        data, batch_sizes, order, back, batched, states = self._prepare(input, states)
        batch = batch_sizes[0]
        full = []
        for i, state in enumerate(states):
            cell = i == 1
            expected = self._expected_hidden(batch, cell)
            if state is None:
                state = zeros(*expected, dtype=data.dtype, device=data.device)
            elif len(states) == 2:
                self._check_hidden(state, expected, f"hidden[{i}]")
            else:
                self._check_hidden(state, expected)
            full.append(state)
        out, h_n, c_n = self._run(data, batch_sizes, full[0], full[1] if len(full) == 2 else None)
        finals = [s for s in (h_n, c_n) if s is not None]
        if isinstance(input, PackedSequence):
            finals = [_permuted(s, back) for s in finals]
            output: Any = packed(out, batch_sizes, order, back)
        else:
            output = out.view(len(batch_sizes), batch, out.shape[-1])
            if self.batch_first:
                output = output.transpose(0, 1)
            if not batched:
                output = output.squeeze(0 if self.batch_first else 1)
                finals = [s.squeeze(1) for s in finals]
        return (output, *finals)


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` (``relu`` with
    ``nonlinearity='relu'``); ``forward(input, hx=None) -> (output, h_n)``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        nonlinearity: str = "tanh",
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise TensorValueError(
                f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'."
            )
        mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(
            mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
            bidirectional, 0, device, dtype,
        )  # fmt: skip
        self.nonlinearity = nonlinearity

    def forward(self, input: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:  # noqa: A002
        output, h_n = self._forward(input, (hx,))
        return output, h_n


class LSTM(RNNBase):
    """Long short-term memory, gates ``i, f, g, o``; ``forward(input, (h_0, c_0)=None)
    -> (output, (h_n, c_n))``.  With ``proj_size`` the hidden state is projected by
    ``weight_hr_l{k}`` (``h`` has ``proj_size`` features, ``c`` ``hidden_size``)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        proj_size: int = 0,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            "LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
            bidirectional, proj_size, device, dtype,
        )  # fmt: skip

    def forward(
        self,
        input: Any,  # noqa: A002 - torch's name
        hx: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Any, tuple[Tensor, Tensor]]:
        states = (None, None) if hx is None else tuple(hx)
        if len(states) != 2:
            raise TensorValueError(f"LSTM: hx must be a pair (h_0, c_0), got {len(states)} items")
        output, h_n, c_n = self._forward(input, states)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """Gated recurrent unit, gates ``r, z, n`` with ``n = tanh(W_in x + b_in + r * (W_hn h
    + b_hn))``; ``forward(input, hx=None) -> (output, h_n)``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = False,
        dropout: float = 0.0,
        bidirectional: bool = False,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
            bidirectional, 0, device, dtype,
        )  # fmt: skip

    def forward(self, input: Any, hx: Tensor | None = None) -> tuple[Any, Tensor]:  # noqa: A002
        output, h_n = self._forward(input, (hx,))
        return output, h_n
