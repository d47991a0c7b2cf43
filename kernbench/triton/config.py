"""``triton.Config``, a candidate for the autotuner, and the record of one tuning."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kernbench.errors import KernelError

__all__ = ["Config", "TuningRecord"]


class Config:
    """A candidate for the autotuner: meta-parameters and launch options."""

    def __init__(
        self,
        kwargs: Mapping[str, Any],
        num_warps: int = 4,
        num_stages: int = 3,
        num_ctas: int = 1,
        maxnreg: int | None = None,
        pre_hook: Callable[[dict[str, Any]], Any] | None = None,
        ir_override: str | None = None,
    ) -> None:
        if not isinstance(kwargs, Mapping):
            raise KernelError(
                f"triton.Config takes a dict of meta-parameters first, got {kwargs!r}"
            )
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_ctas = num_ctas
        self.num_stages = num_stages
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook
        self.ir_override = ir_override

    def all_kwargs(self) -> dict[str, Any]:
        """The meta-parameters and the launch options that are set."""
        options = (
            ("num_warps", self.num_warps),
            ("num_ctas", self.num_ctas),
            ("num_stages", self.num_stages),
            ("maxnreg", self.maxnreg),
            ("ir_override", self.ir_override),
        )
        return {**self.kwargs, **{k: v for k, v in options if v is not None}}

    def __str__(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.kwargs.items()]
        parts += [
            f"num_warps: {self.num_warps}",
            f"num_ctas: {self.num_ctas}",
            f"num_stages: {self.num_stages}",
            f"maxnreg: {self.maxnreg}",
        ]
        return ", ".join(parts)

    def __repr__(self) -> str:
        return f"Config({self})"

    def _identity(self) -> tuple[Any, ...]:
        return (*self.all_kwargs().items(), self.pre_hook)

    def __hash__(self) -> int:
        return hash(self._identity())

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Config) and self._identity() == other._identity()


@dataclass(frozen=True, slots=True)
class TuningRecord:
    """One tuning: what each config took on the simulated machine and which won."""

    kernel: str
    key: tuple[Any, ...]
    timings_ps: tuple[tuple[str, int | None], ...]  # (config, simulated ps); None: it failed
    best: str
    start_ps: int  # the simulated clock when tuning began and ended (0 on the host)
    end_ps: int

    @property
    def tuning_ps(self) -> int:
        """Simulated time the tuning took: every config's run and the hooks around them."""
        return self.end_ps - self.start_ps
