"""The machines that ship inside the package, and how a topology argument finds its file.

A topology is named by a path (``topologies/ring8.yaml``, ``./my.yaml``) or by
the name of a bundled machine (``ring8``, ``ring8.yaml``).  A path that exists
is used as written; otherwise a bundled machine of that name (the path's last
component, with or without ``.yaml``) is used when the argument is a bare name
or ``topologies/<name>.yaml``, so the README's ``--topology
topologies/ring8.yaml`` works from any directory and in an installed package;
a missing file in another directory (``./mine/ring8.yaml``) is an error, not
the bundled machine.  The bundled files are package data
(``kernbench/topologies/*.yaml``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from kernbench.errors import InputFileError

__all__ = ["BUNDLED_DIR", "bundled_names", "bundled_path", "resolve_topology_path"]

#: Where the bundled machines live (a directory inside the installed package).
BUNDLED_DIR = Path(str(resources.files("kernbench") / "topologies"))


def bundled_names() -> list[str]:
    """The bundled machines' names, sorted (``default``, ``fc8``, ...)."""
    return sorted(path.stem for path in BUNDLED_DIR.glob("*.yaml"))


def bundled_path(name: str) -> Path | None:
    """The file of the bundled machine ``name`` (``ring8`` or ``ring8.yaml``), if there is one."""
    stem = name.removesuffix(".yaml")
    if not stem or "/" in stem or "\\" in stem or stem.startswith("."):
        return None
    path = BUNDLED_DIR / f"{stem}.yaml"
    try:
        return path if path.is_file() else None
    except OSError:  # a name too long for the file system names no bundled machine
        return None


def resolve_topology_path(spec: str | Path) -> Path:
    """The file a ``--topology``/``topology=`` argument names (see the module docstring).

    Raises :class:`~kernbench.errors.InputFileError` naming the bundled
    machines when neither a file nor a bundled machine has that name.
    """
    text = str(spec)
    if not text:  # Path("") is the current directory, which no one means by it
        raise InputFileError(
            "the topology path is empty; name a topology file or a bundled machine "
            f"({', '.join(bundled_names())})",
            path=text,
        )
    path = Path(text)
    try:
        if path.exists():
            return path
    except (OSError, ValueError):
        return path  # let the reader say what is wrong with it
    bundled = bundled_path(path.name)
    if bundled is not None:
        # A bare name, or the README's topologies/<name>.yaml from another directory: the
        # bundled machine.  A missing file elsewhere is a typo, not a request for it.
        if len(path.parts) == 1 or path.parent.name == "topologies":
            return bundled
        raise InputFileError(
            f"topology file not found (a bundled machine has the name {path.name!r}: give "
            f"{bundled.stem} alone for it)",
            path=text,
        )
    raise InputFileError(
        f"topology file not found, and no bundled machine has that name "
        f"(bundled: {', '.join(bundled_names())})",
        path=text,
    )
