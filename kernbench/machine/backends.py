"""Backends by name: the registry a run's machine is built from (ADR 0014).

A backend registers a factory ``(topology, store) -> Machine`` under a name
when its package is imported (the detailed SimPy fabric registers
``detailed``); the runtime builds a run's machine with :func:`build_machine`,
so no layer above names a backend's classes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kernbench.errors import ConfigError
from kernbench.machine.api import Machine
from kernbench.topology.schema import Topology

__all__ = ["DEFAULT_BACKEND", "register_backend", "backend_names", "build_machine"]

DEFAULT_BACKEND = "detailed"

Factory = Callable[[Topology, Any], Machine]
_FACTORIES: dict[str, Factory] = {}


def register_backend(name: str, factory: Factory) -> None:
    """Make ``factory`` build the machines of runs that ask for backend ``name``."""
    if name in _FACTORIES and _FACTORIES[name] is not factory:
        raise ValueError(f"backend {name!r} is registered twice")
    _FACTORIES[name] = factory


def backend_names() -> list[str]:
    return sorted(_FACTORIES)


def build_machine(topology: Topology, *, store: Any, backend: str = DEFAULT_BACKEND) -> Machine:
    """The machine of one run, on the backend of that name."""
    factory = _FACTORIES.get(backend)
    if factory is None:
        known = ", ".join(backend_names()) or "none registered"
        raise ConfigError(
            f"unknown simulation backend {backend!r}; valid: {known}",
            key_path="simulation.backend",
        )
    return factory(topology, store)
