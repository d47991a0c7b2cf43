"""``torch.nn.RNNCell``, ``LSTMCell`` and ``GRUCell``, and the one-step updates the
recurrent layers (:mod:`~kernbench.torch.nn.recurrent`) share with them.

A step is made of recorded ops (``F.linear``, ``chunk``, ``sigmoid``, ``tanh``,
``relu``, ``+``, ``*``), so the autograd engine differentiates it and each op costs
what its kernel costs.  The gates are in torch's (cuDNN's) order: ``i, f, g, o`` for
the LSTM, ``r, z, n`` for the GRU, whose new gate is ``tanh(W_in x + b_in + r * (W_hn h
+ b_hn))`` and whose update is ``n + z * (h - n)`` (ATen's form of ``(1 - z) * n + z *
h``).  Every step takes its input projection ``W_ih x + b_ih`` already made, so a
layer makes it for all its time steps with one matmul.
"""

from __future__ import annotations

import math
from typing import Any

from kernbench.errors import TensorError, TensorValueError
from kernbench.torch.factories import empty, zeros
from kernbench.torch.nn import functional as F
from kernbench.torch.nn import init
from kernbench.torch.nn.module import Module
from kernbench.torch.nn.parameter import Parameter
from kernbench.torch.tensor import Tensor

__all__ = ["GRUCell", "LSTMCell", "RNNCell", "RNNCellBase", "gru_step", "lstm_step", "rnn_step"]


def rnn_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None, relu: bool) -> Tensor:
    """``act(gi + W_hh h + b_hh)`` for the input projection ``gi``."""
    pre = gi + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def lstm_step(
    gi: Tensor,
    h: Tensor,
    c: Tensor,
    w_hh: Tensor,
    b_hh: Tensor | None,
    w_hr: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """``(h', c')``; ``h'`` projected by ``w_hr`` when the LSTM has ``proj_size``."""
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, 1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def gru_step(gi: Tensor, h: Tensor, w_hh: Tensor, b_hh: Tensor | None) -> Tensor:
    """``h'`` of a GRU, torch's gate order ``r, z, n``."""
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, 1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()
    return n + z * (h - n)


def check_size(value: Any, what: str, name: str) -> int:
    """A positive int, as torch's recurrent modules want their sizes."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{what}: {name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise TensorValueError(f"{what}: {name} must be greater than zero, got {value}")
    return value


class RNNCellBase(Module):
    """The weights of one cell: ``weight_ih (chunks*H, input)``, ``weight_hh (chunks*H,
    H)``, ``bias_ih``, ``bias_hh`` (``chunks*H``), all ``U(-1/sqrt(H), 1/sqrt(H))``."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool,
        num_chunks: int,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__()
        what = type(self).__name__
        self.input_size = check_size(input_size, what, "input_size")
        self.hidden_size = check_size(hidden_size, what, "hidden_size")
        self.bias = bias
        made = {"device": device, "dtype": dtype}
        self.weight_ih = Parameter(empty(num_chunks * hidden_size, input_size, **made))
        self.weight_hh = Parameter(empty(num_chunks * hidden_size, hidden_size, **made))
        if bias:
            self.bias_ih = Parameter(empty(num_chunks * hidden_size, **made))
            self.bias_hh = Parameter(empty(num_chunks * hidden_size, **made))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0.0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _batched(self, input: Tensor, states: tuple[Tensor | None, ...]) -> tuple[Any, ...]:  # noqa: A002
        """``(is_batched, input, *states)`` with a batch dim, the states zeros if None,
        after torch's checks of dims and sizes."""
        what = type(self).__name__
        if input.ndim not in (1, 2):
            raise TensorValueError(
                f"{what}: Expected input to be 1D or 2D, got {input.ndim}D instead"
            )
        for idx, state in enumerate(states):
            if state is not None and state.ndim not in (1, 2):
                label = "hidden" if len(states) == 1 else f"hx[{idx}]"
                raise TensorValueError(
                    f"{what}: Expected {label} to be 1D or 2D, got {state.ndim}D instead"
                )
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.input_size:
            raise TensorError(
                f"{what}: input has inconsistent input_size: got {input.shape[1]} expected "
                f"{self.input_size}"
            )
        filled = []
        for idx, state in enumerate(states):
            if state is None:
                state = zeros(
                    input.shape[0], self.hidden_size, dtype=input.dtype, device=input.device
                )
            elif not batched:
                state = state.unsqueeze(0)
            if state.shape[0] != input.shape[0]:
                raise TensorError(
                    f"{what}: Input batch size {input.shape[0]} doesn't match hidden{idx} batch "
                    f"size {state.shape[0]}"
                )
            if state.shape[1] != self.hidden_size:
                raise TensorError(
                    f"{what}: hidden{idx} has inconsistent hidden_size: got {state.shape[1]}, "
                    f"expected {self.hidden_size}"
                )
            filled.append(state)
        return (batched, input, *filled)


class RNNCell(RNNCellBase):
    """``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (``relu`` with ``nonlinearity='relu'``)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        nonlinearity: str = "tanh",
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        if self.nonlinearity not in ("tanh", "relu"):
            raise TensorError(f"Unknown nonlinearity: {self.nonlinearity}")
        batched, x, h = self._batched(input, (hx,))
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h = rnn_step(gi, h, self.weight_hh, self.bias_hh, self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step: ``(h', c')`` from ``input`` and ``(h, c)`` (zeros if not given)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(
        self,
        input: Tensor,  # noqa: A002 - torch's name
        hx: tuple[Tensor, Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        states = (None, None) if hx is None else tuple(hx)
        if len(states) != 2:
            raise TensorValueError(
                f"LSTMCell: hx must be a pair (h_0, c_0), got {len(states)} items"
            )
        batched, x, h, c = self._batched(input, states)
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = lstm_step(gi, h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h'`` from ``input`` and ``h`` (zeros if not given)."""

    def __init__(
        self,
        input_size: int,
        hidden_size: int,
        bias: bool = True,
        device: Any = None,
        dtype: Any = None,
    ) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Tensor, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        batched, x, h = self._batched(input, (hx,))
        gi = F.linear(x, self.weight_ih, self.bias_ih)
        h = gru_step(gi, h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
