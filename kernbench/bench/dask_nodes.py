"""A Dask scheduler and worker that serve no HTTP: the local cluster of ``kernbench sweep``.

``distributed`` starts an HTTP server on every scheduler (port 8787 by default)
and every worker (a random port) even when the dashboard is turned off
(``dashboard_address=None``, ``dashboard=False``; distributed issue #7207).
A sweep's throw-away local cluster needs none of it, and a server nobody asked
for on a shared machine is one too many, so these nodes skip
``start_http_server``.  Nothing else in ``distributed`` needs the server: the
dashboard routes, the Prometheus metrics and the health check are simply absent.

Imported only when a sweep runs with ``--executor dask`` and no ``--scheduler``.
"""

from __future__ import annotations

from typing import Any

from distributed import Scheduler, Worker

__all__ = ["NoHttpScheduler", "NoHttpWorker"]


class NoHttpScheduler(Scheduler):
    """A scheduler without the HTTP server (so without a dashboard link)."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Serve nothing."""


class NoHttpWorker(Worker):
    """A worker without the HTTP server."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Serve nothing."""
