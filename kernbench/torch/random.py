"""Random numbers for the torch-like API: ``Generator``, ``manual_seed``, ``initial_seed``.

Values are drawn on the host with NumPy's PCG64 and copied into device
tensors, so the same seed gives the same values on every run (they are not
the values PyTorch would draw).  Each rank has its own default generator, kept
in the rank's ``local`` state, as each process has one under PyTorch; outside
ranks there is one module-wide generator.  A rank's generator starts from the
module-wide generator's seed (0 unless ``manual_seed`` was called before the
ranks started), so runs are deterministic without any seeding.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from kernbench.distributed.scheduler import rank_local
from kernbench.errors import TensorError

__all__ = ["Generator", "current_generator", "initial_seed", "manual_seed", "seed"]

DEFAULT_SEED = 0
_RANK_KEY = "torch.default_generator"


def _check_seed(value: Any) -> int:
    if isinstance(value, bool):
        raise TensorError(f"seed must be an int, got {value!r}")
    try:
        seed = operator.index(value)
    except TypeError:
        raise TensorError(f"seed must be an int, got {value!r}") from None
    if not -(1 << 63) <= seed < 1 << 64:  # torch's range, refused as torch refuses it
        raise TensorError(
            f"seed {seed} is out of range: it must be within the inclusive range "
            "[-0x8000_0000_0000_0000, 0xffff_ffff_ffff_ffff]"
        )
    if seed < 0:
        seed &= (1 << 64) - 1  # torch wraps negative seeds to 64 bits as well
    return seed


class Generator:
    """A seeded source of random values (``torch.Generator().manual_seed(s)``)."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = device
        self._seed = DEFAULT_SEED
        self._rng = np.random.Generator(np.random.PCG64(self._seed))

    def manual_seed(self, seed: int) -> Generator:
        self._seed = _check_seed(seed)
        self._rng = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def initial_seed(self) -> int:
        return self._seed

    def seed(self) -> int:
        """Reseed from fresh OS entropy (not reproducible); returns the new seed."""
        new_seed = int(np.random.SeedSequence().entropy) & ((1 << 63) - 1)
        self.manual_seed(new_seed)
        return new_seed

    def get_state(self) -> dict:
        return self._rng.bit_generator.state

    def set_state(self, state: dict) -> Generator:
        self._rng.bit_generator.state = state
        return self

    @property
    def rng(self) -> np.random.Generator:
        """The NumPy generator values are drawn from."""
        return self._rng

    def __repr__(self) -> str:
        return f"Generator(seed={self._seed})"


_GLOBAL = Generator()


def current_generator() -> Generator:
    """The calling rank's default generator (the module-wide one outside ranks)."""
    return rank_local(_RANK_KEY, _rank_generator, _GLOBAL)


def _rank_generator() -> Generator:
    """A rank's first generator: from the module-wide one's seed."""
    return Generator().manual_seed(_GLOBAL.initial_seed())


def manual_seed(seed: int) -> Generator:
    """Seed the calling rank's default generator; returns it."""
    return current_generator().manual_seed(seed)


def initial_seed() -> int:
    return current_generator().initial_seed()


def seed() -> int:
    """Reseed the default generator non-deterministically; returns the seed."""
    return current_generator().seed()


def resolve(generator: Generator | None) -> np.random.Generator:
    if generator is None:
        return current_generator().rng
    if not isinstance(generator, Generator):
        raise TensorError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    return generator.rng
