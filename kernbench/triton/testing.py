"""``triton.testing``: ``do_bench``, ``perf_report``/``Benchmark`` and ``assert_close``.

``do_bench(fn)`` returns the *simulated* milliseconds one call of ``fn`` takes
on the current context's machine (:func:`kernbench.runtime.current_context`).
Like Triton's it calls ``fn`` once before it measures, so compiling and
autotuning stay out of the measurement; then it measures one call.  Simulated
time is deterministic, so more repetitions would measure the same time again:
``warmup`` and ``rep`` (milliseconds of a real device's time) are accepted and
change nothing, every quantile asked for is that one time, and ``return_mode``
``"min"``, ``"max"``, ``"mean"`` and ``"median"`` all give it (``"all"`` gives
``[ms]``).  Both calls advance the clock.  ``grad_to_none``
is accepted and ignored (gradients are not reset between runs).  ``do_bench_cudagraph(fn, rep,
grad_to_none, quantiles, return_mode)`` is the same measurement: ``fn`` runs
as it is, with no graph captured.

``perf_report(benchmarks)(fn).run(...)`` runs the sweep: ``fn(**x_args,
**{line_arg: value}, **args)`` for every x value and every line, each
returning a number or ``(mean, min, max)``.  ``print_data=True`` prints the
table (the plot's name, then one row per x value, one column per line);
``save_path=DIR`` writes ``DIR/<plot_name>.csv``, ``DIR/<plot_name>.png``
(matplotlib, off-screen) and ``DIR/results.html``.  There is no display here,
so ``show_plots=True`` shows nothing; the figures are kept in
``mark.figures`` and the tables in ``mark.tables``.  ``return_df=True``
returns pandas DataFrames when pandas is installed (it is not a KernBench
dependency).
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from kernbench.errors import KernelError, unsupported_name
from kernbench.files import write_bytes, write_text
from kernbench.runtime import current_context
from kernbench.torch.dtypes import DTYPE_OBJECTS, UNSUPPORTED, TorchDType, get_default_dtype
from kernbench.triton.timing import PS_PER_MS

__all__ = [
    "Benchmark",
    "BenchmarkTable",
    "Mark",
    "assert_close",
    "do_bench",
    "do_bench_cudagraph",
    "perf_report",
]

RETURN_MODES = ("min", "max", "mean", "median", "all")


def _check_summary(quantiles: Sequence[float] | None, return_mode: str, name: str) -> None:
    if return_mode not in RETURN_MODES:
        raise KernelError(
            f"{name}: return_mode {return_mode!r} is not one of {', '.join(RETURN_MODES)}"
        )
    bad = [q for q in quantiles or () if not 0 <= q <= 1]
    if bad:
        raise KernelError(f"{name}: quantiles must lie in [0, 1], got {bad}")


def _one_call(
    fn: Callable[[], Any], quantiles: Sequence[float] | None, return_mode: str, name: str
) -> float | list[float]:
    """Call ``fn`` to warm up, then measure one call; report it as Triton's benchmarkers do."""
    _check_summary(quantiles, return_mode, name)
    if not callable(fn):
        raise KernelError(f"{name} needs a function to call, got {fn!r}")
    clock = current_context()
    fn()
    start = clock.now
    fn()
    ms = (clock.now - start) / PS_PER_MS
    if quantiles is not None:
        values = [ms for _ in quantiles]
        return values[0] if len(values) == 1 else values
    return [ms] if return_mode == "all" else ms


def do_bench(
    fn: Callable[[], Any],
    warmup: float = 25,
    rep: float = 100,
    grad_to_none: Any = None,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
) -> float | list[float]:
    """Simulated milliseconds of one call of ``fn`` (after one call to warm up)."""
    return _one_call(fn, quantiles, return_mode, "do_bench")


def do_bench_cudagraph(
    fn: Callable[[], Any],
    rep: float = 20,
    grad_to_none: Any = None,
    quantiles: Sequence[float] | None = None,
    return_mode: str = "mean",
) -> float | list[float]:
    """As :func:`do_bench`: ``fn`` runs as it is (no graph is captured); one call is measured."""
    return _one_call(fn, quantiles, return_mode, "do_bench_cudagraph")


def _torch_dtype(value: Any) -> Any:
    """The dtype ``torch.tensor(value)`` would have: what a callable tolerance is given."""
    dt = getattr(value, "dtype", None)
    if isinstance(dt, TorchDType):
        return dt
    if isinstance(value, np.ndarray | np.generic):
        name = value.dtype.name
    else:
        kind = np.asarray(value).dtype.kind
        name = {"f": get_default_dtype().name, "i": "int64", "b": "bool"}.get(kind, "")
    return DTYPE_OBJECTS.get(name) or UNSUPPORTED.get(name) or np.asarray(value).dtype


def assert_close(x: Any, y: Any, atol: Any = None, rtol: Any = None, err_msg: str = "") -> None:
    """Assert ``x`` and ``y`` are close (tensors are read back with ``.numpy()``).

    As in Triton, ``atol`` defaults to 1e-2 and ``rtol`` to 0, and either may be
    a function of ``x``'s dtype (a torch dtype).
    """

    def host(v: Any) -> np.ndarray:
        return np.asarray(v.numpy() if hasattr(v, "numpy") else v)

    atol = 1e-2 if atol is None else atol
    rtol = 0.0 if rtol is None else rtol
    atol = atol(_torch_dtype(x)) if callable(atol) else atol
    rtol = rtol(_torch_dtype(x)) if callable(rtol) else rtol
    np.testing.assert_allclose(host(x), host(y), atol=atol, rtol=rtol, err_msg=err_msg)


class Benchmark:
    """One sweep of a :func:`perf_report`: x values, lines and how to plot them."""

    def __init__(
        self,
        x_names: list[str],
        x_vals: list[Any],
        line_arg: str,
        line_vals: list[Any],
        line_names: list[str],
        plot_name: str = "",
        args: dict[str, Any] | None = None,
        xlabel: str = "",
        ylabel: str = "",
        x_log: bool = False,
        y_log: bool = False,
        styles: list[tuple[str, str]] | None = None,
    ) -> None:
        if isinstance(x_names, str) or not x_names:
            raise KernelError(
                f"Benchmark: x_names is a non-empty list of argument names, got {x_names!r}"
            )
        if len(line_names) != len(line_vals):
            raise KernelError(
                f"Benchmark {plot_name!r}: {len(line_vals)} line_vals but "
                f"{len(line_names)} line_names; give one name per line"
            )
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        self.plot_name = plot_name
        self.args = dict(args or {})
        self.xlabel, self.ylabel = xlabel, ylabel
        self.x_log, self.y_log = x_log, y_log
        self.styles = styles


@dataclass(frozen=True, slots=True)
class BenchmarkTable:
    """The results of one :class:`Benchmark`: a row per x value, a column per line."""

    name: str
    columns: tuple[str, ...]  # the x names, then the line names
    rows: tuple[tuple[Any, ...], ...]
    mins: tuple[tuple[Any, ...], ...]  # per row, per line (None where not returned)
    maxs: tuple[tuple[Any, ...], ...]

    def to_string(self) -> str:
        """The table as text, a numbered row per x value (as pandas prints a DataFrame)."""
        cells = [[""] + list(self.columns)]
        cells += [[str(i)] + [_cell(v) for v in row] for i, row in enumerate(self.rows)]
        widths = [max(len(r[c]) for r in cells) for c in range(len(cells[0]))]
        return "\n".join(
            "  ".join(cell.rjust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
            for r in cells
        )

    def to_csv(self) -> str:
        lines = [",".join(self.columns)]
        lines += [",".join(_cell(v) for v in row) for row in self.rows]
        return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float | np.floating):
        return f"{float(value):.6f}"
    return str(value)


class Mark:
    """A function marked by :func:`perf_report`; ``run`` sweeps it."""

    def __init__(self, fn: Callable[..., Any], benchmarks: Benchmark | list[Benchmark]) -> None:
        self.fn = fn
        self.benchmarks = benchmarks
        self.tables: dict[str, BenchmarkTable] = {}
        self.figures: dict[str, Figure] = {}

    def _x_args(self, bench: Benchmark, x: Any) -> dict[str, Any]:
        if isinstance(x, tuple | list):
            if len(x) != len(bench.x_names):
                raise KernelError(
                    f"Benchmark {bench.plot_name!r}: x value {x!r} has {len(x)} entries for "
                    f"{len(bench.x_names)} x_names"
                )
            return dict(zip(bench.x_names, x, strict=True))
        return {name: x for name in bench.x_names}

    def _sweep(self, bench: Benchmark, **kwargs: Any) -> BenchmarkTable:
        rows, mins, maxs = [], [], []
        for x in bench.x_vals:
            x_args = self._x_args(bench, x)
            means, lows, highs = [], [], []
            for line in bench.line_vals:
                ret = self.fn(**x_args, **{bench.line_arg: line}, **bench.args, **kwargs)
                if isinstance(ret, tuple | list):
                    if len(ret) != 3:
                        raise KernelError(
                            f"perf_report {bench.plot_name!r}: the function returned "
                            f"{len(ret)} values; return one number or (mean, min, max)"
                        )
                    mean, low, high = ret
                else:
                    mean, low, high = ret, None, None
                means.append(mean)
                lows.append(low)
                highs.append(high)
            rows.append((*x_args.values(), *means))
            mins.append(tuple(lows))
            maxs.append(tuple(highs))
        return BenchmarkTable(
            bench.plot_name,
            (*bench.x_names, *bench.line_names),
            tuple(rows),
            tuple(mins),
            tuple(maxs),
        )

    def _plot(self, bench: Benchmark, table: BenchmarkTable) -> Figure:
        figure = Figure()
        FigureCanvasAgg(figure)
        ax = figure.add_subplot()
        xs = [row[0] for row in table.rows]
        first = len(bench.x_names)
        for i, name in enumerate(bench.line_names):
            color = bench.styles[i][0] if bench.styles and i < len(bench.styles) else None
            style = bench.styles[i][1] if bench.styles and i < len(bench.styles) else None
            ys = [row[first + i] for row in table.rows]
            ax.plot(xs, ys, label=name, color=color, ls=style)
            low = [m[i] for m in table.mins]
            high = [m[i] for m in table.maxs]
            if None not in low and None not in high:
                ax.fill_between(xs, low, high, alpha=0.15, color=color)
        ax.legend()
        ax.set_xlabel(bench.xlabel or " = ".join(bench.x_names))
        ax.set_ylabel(bench.ylabel)
        ax.set_xscale("log" if bench.x_log else "linear")
        ax.set_yscale("log" if bench.y_log else "linear")
        return figure

    def run(
        self,
        show_plots: bool = False,
        print_data: bool = False,
        save_path: str = "",
        return_df: bool = False,
        **kwargs: Any,
    ) -> Any:
        """Run every benchmark; print, save and return its table as asked."""
        benchmarks = self.benchmarks if isinstance(self.benchmarks, list) else [self.benchmarks]
        html = ["<html><body>"]
        tables = []
        for bench in benchmarks:
            table = self._sweep(bench, **kwargs)
            tables.append(table)
            self.tables[bench.plot_name] = table
            if bench.plot_name:
                figure = self.figures[bench.plot_name] = self._plot(bench, table)
                if save_path:
                    png = io.BytesIO()
                    figure.savefig(png, format="png")
                    write_bytes(Path(save_path) / f"{bench.plot_name}.png", png.getvalue())
                    html.append(f'<image src="{bench.plot_name}.png"/>')
            if print_data:
                print(bench.plot_name + ":")
                print(table.to_string())
            if save_path:
                write_text(Path(save_path) / f"{bench.plot_name}.csv", table.to_csv())
        if save_path:
            write_text(
                Path(save_path) / "results.html", "\n".join([*html, "</body></html>"]) + "\n"
            )
        if not return_df:
            return None
        frames = [_data_frame(t) for t in tables]
        return frames[0] if len(frames) == 1 else frames


def _data_frame(table: BenchmarkTable) -> Any:
    try:
        import pandas
    except ImportError:
        raise KernelError(
            "Mark.run(return_df=True) needs pandas, which is not installed; "
            "read the results from mark.tables instead"
        ) from None
    return pandas.DataFrame(list(table.rows), columns=list(table.columns))


def perf_report(benchmarks: Benchmark | list[Benchmark]) -> Callable[[Callable[..., Any]], Mark]:
    """Mark a function for benchmarking; ``.run(...)`` on the result sweeps it."""

    def wrapper(fn: Callable[..., Any]) -> Mark:
        return Mark(fn, benchmarks)

    return wrapper


_DEVICE_FIGURES = (
    "the simulated device's figures are in "
    "triton.runtime.driver.active.utils.get_device_properties(i)"
)
_HINTS = {
    **dict.fromkeys(
        ("get_dram_gbps", "get_max_tensorcore_tflops", "get_max_simd_tflops"), _DEVICE_FIGURES
    ),
    **dict.fromkeys(
        ("set_gpu_clock", "nvsmi"),
        "there is no clock to pin: simulated time is the same at every run",
    ),
}


def __getattr__(name: str) -> Any:
    raise unsupported_name("kernbench.triton.testing", "triton.testing", name, __all__, _HINTS)
