"""``triton.autotune``: configs tuned by simulated time (``triton.Config`` is in ``config``).

On the first launch for a *key* (the values of the ``key`` arguments, plus
the dtype of every argument that has one, as in Triton), every config left
after ``prune_configs_by`` runs once on the simulated machine and the one
whose launch took the least simulated time is kept for that key
(``kernel.cache[key]``, ``kernel.best_config``, ``kernel.configs_timings`` in
ms).  Simulated time is deterministic, so one run per config measures it
exactly: ``warmup``, ``rep``, ``use_cuda_graph`` and ``cache_results`` are
accepted and change nothing.  Ties go to the config listed first.  A config
whose launch raises a kernel error (a block too large, say) is skipped with an
infinite time, like Triton's out-of-resources configs; if every config fails,
the launch fails with their errors.

**On the clock.** The tuning runs are real launches on the user's machine, as
on a GPU: the first launch for a key advances the simulated clock by every
config's run (and by the ``reset_to_zero`` / ``restore_value`` copies around
them) and then runs the chosen config, which is the launch the caller gets.
Later launches with that key run the chosen config only.  Time a tuned kernel
with :func:`kernbench.triton.testing.do_bench`, which calls it once before it
measures, as Triton's does.  A config's time is that of its launch alone,
from the launch command to the last program's end, not of the hooks around it.

**No side effects.** ``reset_to_zero`` arguments are zeroed before each
config's run and once more before the chosen config runs; ``restore_value``
arguments are copied before each config's run and copied back after it.
Device tensors are copied with the tensor's ``clone``/``copy_``/``zero_``
(device kernels, on the clock); NumPy arrays on the host.

**Reported.** Each tuning appends a :class:`TuningRecord` to
``kernel.tuning_records`` (every config's simulated ps, the winner, when the
tuning started and ended); with ``TRITON_PRINT_AUTOTUNING=1`` each config and
the result are printed as Triton prints them, with simulated times.

Launches on host NumPy arrays take no simulated time, so every config ties
and the first is kept.
"""

from __future__ import annotations

import builtins
import math
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from kernbench.errors import KernelError
from kernbench.triton.config import Config, TuningRecord
from kernbench.triton.jit import KernelInterface, arg_names_of, base_name, run_kernel
from kernbench.triton.timing import PS_PER_MS, clock_of

__all__ = ["Autotuner", "autotune"]


# ----------------------------------------------------------------------------- value hooks


def _zero(value: Any) -> None:
    if isinstance(value, np.ndarray):
        value.fill(0)
    else:
        value.zero_()


def _clone(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value.clone()


def _copy_back(value: Any, saved: Any) -> None:
    if isinstance(value, np.ndarray):
        value[...] = saved
    else:
        value.copy_(saved)


def _printing() -> bool:
    return os.environ.get("TRITON_PRINT_AUTOTUNING", "") == "1"


class Autotuner(KernelInterface):
    """A kernel launched with the config that ran fastest in simulation, per key."""

    def __init__(
        self,
        fn: Any,
        arg_names: list[str],
        configs: list[Config] | None,
        key: Iterable[str],
        reset_to_zero: Iterable[str] | None,
        restore_value: Iterable[str] | None,
        pre_hook: Callable[..., Any] | None = None,
        post_hook: Callable[..., Any] | None = None,
        prune_configs_by: Mapping[str, Any] | None = None,
        warmup: int | None = None,
        rep: int | None = None,
        use_cuda_graph: bool = False,
        do_bench: Callable[..., Any] | None = None,
        cache_results: bool = False,
    ) -> None:
        self.fn = fn
        self.name = base_name(fn)
        self.arg_names = list(arg_names)
        self.configs = list(configs) if configs else [Config({})]
        for config in self.configs:
            if not isinstance(config, Config):
                raise KernelError(
                    f"autotune of {self.name!r}: configs must be triton.Config objects, "
                    f"got {config!r}"
                )
        if isinstance(key, str):
            raise KernelError(
                f"autotune of {self.name!r}: key is a list of argument names, got {key!r}; "
                f"write key=[{key!r}]"
            )
        self.keys = list(key)
        self._check_names(self.keys, "key")
        self.reset_to_zero = list(reset_to_zero or [])
        self.restore_value = list(restore_value or [])
        self._check_names(self.reset_to_zero, "reset_to_zero")
        self._check_names(self.restore_value, "restore_value")
        self.cache: dict[tuple[Any, ...], Config] = {}
        self.configs_timings: dict[Config, list[float]] = {}
        self.best_config: Config | None = None
        self.tuning_records: list[TuningRecord] = []
        self.nargs: dict[str, Any] | None = None
        self.restore_copies: dict[str, Any] = {}
        self.pre_hook = pre_hook or self._default_pre_hook
        self.post_hook = post_hook or self._default_post_hook
        prune = dict(prune_configs_by or {})
        unknown = sorted(prune.keys() - {"perf_model", "top_k", "early_config_prune"})
        if unknown:
            raise KernelError(
                f"autotune of {self.name!r}: prune_configs_by has unknown field(s) "
                f"{', '.join(unknown)}; valid: early_config_prune, perf_model, top_k"
            )
        self.perf_model = prune.get("perf_model")
        self.configs_top_k = prune.get("top_k", 1.0)
        self.early_config_prune = prune.get("early_config_prune")
        self.do_bench = do_bench
        self.num_warmups, self.num_reps = warmup, rep
        self.use_cuda_graph, self.cache_results = use_cuda_graph, cache_results

    def _check_names(self, names: list[str], what: str) -> None:
        unknown = [n for n in names if n not in self.arg_names]
        if unknown:
            raise KernelError(
                f"autotune of {self.name!r}: {what} names {', '.join(map(repr, unknown))}, "
                f"not parameters of the kernel; its parameters are {', '.join(self.arg_names)}"
            )

    def __repr__(self) -> str:
        return f"Autotuner({self.name}, {len(self.configs)} configs, key={self.keys})"

    # -- hooks ---------------------------------------------------------------------------
    def _default_pre_hook(self, kwargs: dict[str, Any], reset_only: bool = False) -> None:
        for name in self.reset_to_zero:
            if kwargs.get(name) is not None:
                _zero(kwargs[name])
        if not reset_only:
            self.restore_copies = {
                name: _clone(kwargs[name])
                for name in self.restore_value
                if kwargs.get(name) is not None
            }

    def _default_post_hook(self, kwargs: dict[str, Any], exception: Exception | None) -> None:
        for name, saved in self.restore_copies.items():
            _copy_back(kwargs[name], saved)
        self.restore_copies = {}

    # -- choosing --------------------------------------------------------------------------
    def prune_configs(self, kwargs: dict[str, Any]) -> list[Config]:
        """The configs to run: ``early_config_prune``, then the ``perf_model``'s ``top_k``.

        A float ``top_k`` is a share of all the configs, not of those the early
        prune left, as in Triton.
        """
        pruned = self.configs
        if self.early_config_prune:
            pruned = list(self.early_config_prune(self.configs, self.nargs, **kwargs))
            if not pruned:
                raise KernelError(
                    f"autotune of {self.name!r}: early_config_prune left no config; "
                    "it must return at least one"
                )
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:  # a share of all configs, as Triton
                top_k = max(1, int(len(self.configs) * top_k))
            elif isinstance(top_k, bool) or not isinstance(top_k, int):
                raise KernelError(
                    f"autotune of {self.name!r}: prune_configs_by top_k must be a float <= 1.0 "
                    f"or an int, got {top_k!r}"
                )
            if len(pruned) > top_k:
                estimate = {
                    c: self.perf_model(**self.nargs, **kwargs, **c.all_kwargs()) for c in pruned
                }
                pruned = sorted(estimate, key=estimate.__getitem__)[:top_k]
        return list(pruned)

    def _key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        named = {k: v for k, v in {**self.nargs, **kwargs}.items() if k in self.arg_names}
        key = [named[k] for k in self.keys if k in named]
        key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
        return tuple(key)

    def _bench(
        self, args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any], config: Config, clock: Any
    ) -> tuple[list[float], int | None, str | None]:
        """(ms as Triton's benchmarker gives them, simulated ps when measured here, failure)."""
        if _printing():
            print(f"Autotuning kernel {self.name} with config {config}")
        conflicts = kwargs.keys() & config.kwargs.keys()
        if conflicts:
            raise KernelError(
                f"autotune of {self.name!r}: conflicting meta-parameters "
                f"{', '.join(sorted(conflicts))} are both passed and tuned; "
                "do not pass auto-tuned meta-parameters"
            )
        current = {**kwargs, **config.all_kwargs()}
        full_nargs = {**self.nargs, **current}
        measured: list[int] = []

        def kernel_call() -> None:
            if config.pre_hook:
                config.pre_hook(full_nargs)
            self.pre_hook(full_nargs)
            try:
                start = clock.now if clock is not None else 0
                run_kernel(self.fn, args, grid, current)
                measured.append((clock.now - start) if clock is not None else 0)
            except Exception as exc:
                try:
                    self.post_hook(full_nargs, exception=exc)
                finally:
                    raise
            self.post_hook(full_nargs, exception=None)

        try:
            if self.do_bench is not None:
                result = self.do_bench(kernel_call, quantiles=(0.5, 0.2, 0.8))
                times = list(result) if isinstance(result, list | tuple) else [result] * 3
                return [float(t) for t in times], None, None
            kernel_call()
        except KernelError as exc:
            if _printing():
                print(f"Autotuning failed with {exc}")
            return [math.inf] * 3, None, str(exc)
        ms = measured[0] / PS_PER_MS
        return [ms, ms, ms], measured[0], None

    def _tune(
        self, key: tuple[Any, ...], args: tuple[Any, ...], grid: Any, kwargs: dict[str, Any]
    ) -> None:
        pruned = self.prune_configs(kwargs)
        if len(pruned) == 1:
            self.cache[key] = pruned[0]
            return
        clock = clock_of([*args, *kwargs.values()])
        start = clock.now if clock is not None else 0
        timings: dict[Config, list[float]] = {}
        measured_ps: dict[Config, int | None] = {}
        failures: list[str] = []
        for config in pruned:
            timings[config], ps, failure = self._bench(args, grid, kwargs, config, clock)
            if ps is None and failure is None:  # a user benchmarker: its ms, in ps
                ps = round(timings[config][0] * PS_PER_MS)
            measured_ps[config] = ps
            if failure is not None:
                failures.append(f"[{config}]: {failure}")
        best = builtins.min(timings, key=lambda c: timings[c][0])
        if math.isinf(timings[best][0]):
            raise KernelError(
                f"autotune of {self.name!r}: every config failed: " + "; ".join(failures)
            )
        self.cache[key] = best
        self.configs_timings = timings
        self.pre_hook({**self.nargs, **kwargs, **best.all_kwargs()}, reset_only=True)
        end = clock.now if clock is not None else 0
        self.tuning_records.append(
            TuningRecord(
                kernel=self.name,
                key=key,
                timings_ps=tuple((str(c), ps) for c, ps in measured_ps.items()),
                best=str(best),
                start_ps=start,
                end_ps=end,
            )
        )
        if _printing():
            print(
                f"Triton autotuning for function {self.name},\nwith key as {key},\n"
                f"finished after {(end - start) / PS_PER_MS:.6f} ms of simulated time,\n"
                f"best config selected: {best} ({timings[best][0]:.6f} ms);"
            )

    # -- launching -------------------------------------------------------------------------
    def run(self, *args: Any, grid: Any, warmup: bool = False, **kwargs: Any) -> Any:
        """Launch with the best config for this key, tuning first if the key is new."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            if len(self.configs) > 1:
                key = self._key(args, kwargs)
                if key not in self.cache:
                    self._tune(key, args, grid, kwargs)
                config = self.cache[key]
            else:
                config = self.configs[0]
            self.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return run_kernel(self.fn, args, grid, {**kwargs, **config.all_kwargs()})
        finally:
            self.nargs = None

    def warmup(self, *args: Any, grid: Any, **kwargs: Any) -> list[Any]:
        """Compile every config left after pruning; no config runs on the machine."""
        self.nargs = dict(zip(self.arg_names, args, strict=False))
        try:
            return [
                self.fn.warmup(*args, grid=grid, **kwargs, **config.all_kwargs())
                for config in self.prune_configs(kwargs)
            ]
        finally:
            self.nargs = None


def autotune(
    configs: list[Config],
    key: list[str],
    prune_configs_by: Mapping[str, Any] | None = None,
    reset_to_zero: list[str] | None = None,
    restore_value: list[str] | None = None,
    pre_hook: Callable[..., Any] | None = None,
    post_hook: Callable[..., Any] | None = None,
    warmup: int | None = None,
    rep: int | None = None,
    use_cuda_graph: bool = False,
    do_bench: Callable[..., Any] | None = None,
    cache_results: bool = False,
) -> Callable[[Any], Autotuner]:
    """Decorate a ``@triton.jit`` kernel to launch with its fastest config (by simulated time)."""

    def decorator(fn: Any) -> Autotuner:
        return Autotuner(
            fn,
            arg_names_of(fn),
            configs,
            key,
            reset_to_zero,
            restore_value,
            pre_hook=pre_hook,
            post_hook=post_hook,
            prune_configs_by=prune_configs_by,
            warmup=warmup,
            rep=rep,
            use_cuda_graph=use_cuda_graph,
            do_bench=do_bench,
            cache_results=cache_results,
        )

    return decorator
