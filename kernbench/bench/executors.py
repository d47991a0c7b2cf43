"""Where sweep points run: in this process, in a local process pool, or on Dask.

Each executor is a generator that takes a picklable top-level function and a
list of arguments and yields the function's results as they finish, in
completion order.  Closing the generator early (Ctrl-C in the driver, or an
error) cancels what has not started and stops the workers, so the driver can
exit at once; what already finished was yielded and is the driver's to keep.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

__all__ = ["EXECUTORS", "run_in_process", "run_local_pool", "run_dask"]

EXECUTORS = ("local", "dask")


def _ignore_sigint() -> None:
    # Ctrl-C in a terminal reaches every process of the group; only the driver
    # should react (it stops the workers itself), so workers do not print tracebacks.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def run_in_process(fn: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
    """One item after another in this process (``-j 1``: easiest to debug)."""
    for item in items:
        yield fn(item)


def run_local_pool(fn: Callable[[Any], Any], items: Sequence[Any], jobs: int) -> Iterator[Any]:
    """A pool of ``jobs`` fresh processes.

    "spawn" rather than "fork": the driver may hold threads (the progress bar,
    Dask's) and greenlets, which a forked child must not inherit.
    """
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=context, initializer=_ignore_sigint)
    pending: set[Future] = {pool.submit(fn, item) for item in items}
    try:
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                yield future.result()
    except BaseException:
        for future in pending:
            future.cancel()
        # A running point cannot be cancelled; its partial work is redone on resume.
        for process in list(getattr(pool, "_processes", {}).values()):
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def run_dask(
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    jobs: int,
    scheduler: str | None = None,
    *,
    keys: Sequence[str] | None = None,
) -> Iterator[Any]:
    """Submit every item to a Dask scheduler, or to a local cluster of ``jobs`` workers."""
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler:
        client = Client(scheduler)
    else:
        # Workers started while SIGINT is ignored keep ignoring it (Python leaves an
        # ignored SIGINT alone), so Ctrl-C in a terminal stops only the driver, which
        # then closes the cluster; the price is that Ctrl-C waits for the start-up.
        main_thread = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main_thread else None
        try:
            cluster = LocalCluster(
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
                silence_logs=logging.ERROR,
            )
        finally:
            if main_thread:
                signal.signal(signal.SIGINT, previous)
        client = Client(cluster)
    futures = []
    try:
        for index, item in enumerate(items):
            key = keys[index] if keys else None
            futures.append(client.submit(fn, item, pure=False, key=key))
        for future in as_completed(futures):
            result = future.result()
            future.release()
            yield result
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
