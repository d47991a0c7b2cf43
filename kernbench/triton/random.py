"""``tl.rand`` and friends: Triton's counter-based random numbers (Philox 4x32).

The same ``(seed, offset)`` gives the same numbers as Triton's
``triton/language/random.py``: ``randint4x`` runs ``n_rounds`` rounds of
Philox 4x32 on the counter ``(offset, 0, 0, 0)`` with the key ``(low, high)``
32 bits of the seed taken as uint64, and returns four uint32 blocks;
``randint`` is the first of them; ``rand`` maps it to float32 in [0, 1) as
``uint_to_uniform_float`` does (bits read as int32, negatives folded onto
``-x - 1``, times 4.6566127342e-10 in float32); ``randn`` is the Box-Muller
transform of the first two.  The integers and uniforms are bit for bit
Triton's; the normals go through NumPy's float32 ``log``, ``sqrt`` and
``cos``, which may differ from the device's in the last bit.

Offsets are 32-bit integer blocks (Triton's 64-bit Philox for int64 offsets
is not here) and the seed is an integer (a run-time argument, a Python int or
a block of seeds that broadcasts with the offsets).  Each call counts the
integer and vector ops Triton's code would issue for it (8 per round per
element for Philox), so random numbers cost time as on the device.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.kernels.language import Block, constexpr, float32, int32, uint32
from kernbench.kernels.program import record_vector, where_am_i

__all__ = [
    "pair_uniform_to_normal",
    "philox",
    "rand",
    "rand4x",
    "randint",
    "randint4x",
    "randn",
    "randn4x",
    "uint_to_uniform_float",
]

N_ROUNDS_DEFAULT = 10
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_LOW32 = np.uint64(0xFFFFFFFF)
_UNIFORM_SCALE = np.float32(4.6566127342e-10)  # the largest with MAX_INT * scale < 1.0


def _value(x: Any) -> Any:
    return x.value if isinstance(x, constexpr) else x


def _seed_bits(seed: Any, what: str) -> np.ndarray:
    """The seed as uint64, as ``seed.to(tl.uint64)`` gives it (signed values wrap)."""
    seed = _value(seed)
    if isinstance(seed, Block):
        if not seed.dtype.is_int():
            raise KernelError(f"{where_am_i()}: {what} needs an integer seed, got {seed.dtype!r}")
        values = seed.value
        if values.dtype.kind == "i":
            return values.astype(np.int64).view(np.uint64)
        return values.astype(np.uint64)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise KernelError(f"{where_am_i()}: {what} needs an integer seed, got {seed!r}")
    return np.asarray(int(seed) % 2**64, dtype=np.uint64)


def _counter(offset: Any, what: str) -> np.ndarray:
    """The offsets' bits as uint32 values held in uint64 (room for the products)."""
    offset = _value(offset)
    if isinstance(offset, int) and not isinstance(offset, bool):
        if not -(2**31) <= offset < 2**31:
            raise KernelError(
                f"{where_am_i()}: {what}'s offset {offset} does not fit in 32 bits (Triton "
                "takes it as int64); 64-bit Philox is not modelled"
            )
        offset = Block(np.asarray(offset, dtype=np.int32), int32)
    if not isinstance(offset, Block) or not (
        offset.dtype.is_int() and offset.dtype.primitive_bitwidth == 32
    ):
        got = offset.dtype if isinstance(offset, Block) else offset
        raise KernelError(
            f"{where_am_i()}: {what} takes a block of 32-bit integer offsets "
            f"(tl.arange, int32 or uint32), got {got!r}; 64-bit Philox is not modelled"
        )
    return offset.value.view(np.uint32).astype(np.uint64)


def philox(seed: Any, c0: Any, c1: Any, c2: Any, c3: Any, n_rounds: Any = N_ROUNDS_DEFAULT):
    """``n_rounds`` of Philox 4x32 on counters ``c0..c3`` keyed by ``seed``: four uint32 blocks."""
    rounds = int(_value(n_rounds))
    seed64 = _seed_bits(seed, "tl.philox")
    counters = [_counter(c, "tl.philox") for c in (c0, c1, c2, c3)]
    shapes = (seed64.shape, *(c.shape for c in counters))
    try:
        shape = np.broadcast_shapes(*shapes)
    except ValueError:
        raise KernelError(
            f"{where_am_i()}: tl.philox's seed and offsets must broadcast together, got "
            f"shapes {', '.join(map(str, shapes))}"
        ) from None
    c0_, c1_, c2_, c3_ = (np.broadcast_to(c, shape) for c in counters)
    k0 = np.broadcast_to(seed64 & _LOW32, shape)
    k1 = np.broadcast_to((seed64 >> np.uint64(32)) & _LOW32, shape)
    for _ in range(rounds):
        prev0, prev2 = c0_, c2_
        c0_ = ((_ROUND_B * prev2) >> np.uint64(32)) ^ c1_ ^ k0
        c2_ = ((_ROUND_A * prev0) >> np.uint64(32)) ^ c3_ ^ k1
        c1_ = (_ROUND_B * prev2) & _LOW32
        c3_ = (_ROUND_A * prev0) & _LOW32
        k0 = (k0 + _KEY_A) & _LOW32
        k1 = (k1 + _KEY_B) & _LOW32
    elements = int(np.prod(shape))
    record_vector(8 * rounds * elements + 2 * rounds, floating=False)  # the rounds, the key
    return tuple(Block(c.astype(np.uint32), uint32) for c in (c0_, c1_, c2_, c3_))


def randint4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT):
    """Four blocks of random uint32: Philox on the counter ``(offset, 0, 0, 0)``."""
    counter = _counter(offset, "tl.randint4x")
    zero = Block(np.zeros(counter.shape, np.uint32), uint32)
    record_vector(counter.size, floating=False)  # offset * 0
    return philox(seed, offset, zero, zero, zero, n_rounds)


def randint(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> Block:
    """A block of random uint32: the first block of :func:`randint4x`."""
    return randint4x(seed, offset, n_rounds)[0]


def uint_to_uniform_float(x: Any) -> Block:
    """Random 32-bit integers to float32 in [0, 1), as Triton maps them."""
    x = _value(x)
    if not isinstance(x, Block) or x.dtype not in (int32, uint32):
        raise KernelError(
            f"{where_am_i()}: tl.uint_to_uniform_float takes an int32 or uint32 block, got {x!r}"
        )
    signed = x.value.view(np.int32)
    folded = np.where(signed < 0, -(signed.astype(np.int64)) - 1, signed).astype(np.int32)
    record_vector(4 * signed.size, floating=False)  # x < 0, -x, - 1, where
    record_vector(signed.size, floating=True)
    return Block(folded.astype(np.float32) * _UNIFORM_SCALE, float32)


def rand(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> Block:
    """A block of float32 uniform in [0, 1) for ``offset`` under ``seed``."""
    return uint_to_uniform_float(randint(seed, offset, n_rounds))


def rand4x(seed: Any, offsets: Any, n_rounds: Any = N_ROUNDS_DEFAULT):
    """Four blocks of float32 uniform in [0, 1)."""
    return tuple(uint_to_uniform_float(i) for i in randint4x(seed, offsets, n_rounds))


def pair_uniform_to_normal(u1: Any, u2: Any) -> tuple[Block, Block]:
    """The Box-Muller transform of two uniform blocks: two standard normal blocks."""
    a, b = _value(u1), _value(u2)
    if not (isinstance(a, Block) and isinstance(b, Block)):
        raise KernelError(f"{where_am_i()}: tl.pair_uniform_to_normal takes two float32 blocks")
    a32, b32 = a.value.astype(np.float32), b.value.astype(np.float32)
    with np.errstate(all="ignore"):
        first = np.maximum(np.float32(1.0e-7), a32)
        theta = np.float32(6.283185307179586) * b32
        radius = np.sqrt(np.float32(-2.0) * np.log(first))
        n1, n2 = radius * np.cos(theta), radius * np.sin(theta)
    elements = int(np.broadcast(a32, b32).size)
    record_vector(5 * elements, floating=True)  # maximum and four products
    record_vector(4 * elements, floating=True, transcendental=True)  # log, sqrt, cos, sin
    return Block(n1.astype(np.float32), float32), Block(n2.astype(np.float32), float32)


def randn(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT) -> Block:
    """A block of float32 drawn from N(0, 1) for ``offset`` under ``seed``."""
    i1, i2, _, _ = randint4x(seed, offset, n_rounds)
    return pair_uniform_to_normal(uint_to_uniform_float(i1), uint_to_uniform_float(i2))[0]


def randn4x(seed: Any, offset: Any, n_rounds: Any = N_ROUNDS_DEFAULT):
    """Four blocks of float32 drawn from N(0, 1)."""
    u1, u2, u3, u4 = rand4x(seed, offset, n_rounds)
    return (*pair_uniform_to_normal(u1, u2), *pair_uniform_to_normal(u3, u4))
