"""``torch.save`` and ``torch.load``: checkpoints of tensors and the objects around them.

torch pickles whatever it is given, and a pickle can run code when it is loaded; torch's
own default is now ``weights_only=True``, which loads tensors, numbers, strings and
containers of them, and classes the program allowlists.  kernbench writes a file of its
own: a zip archive holding ``checkpoint/tree.json`` (the object, each tensor a reference
into the archive) and one ``.npy`` per tensor (``checkpoint/tensors/<i>.npy``, read back
with ``allow_pickle=False``).  So a model's and an optimizer's ``state_dict()``, a step
count, a config dict or a list of tensors round-trip without a pickle, and loading them
runs no code.  Any other object (``torch.save(model)``, a NumPy array) is pickled into
``checkpoint/objects/<i>.pkl``, its tensors still stored as arrays, and loads under
torch's ``weights_only`` rules (:mod:`kernbench.torch.checkpoint_objects`).  A file
torch wrote is refused with what to do instead.

* **What is kept without a pickle**: ``None``, bools, ints (any size), floats (NaN and
  infinities too), strings, lists, tuples, dicts with keys of those kinds (``OrderedDict`` and
  ``collections.Counter``, which torch's ``weights_only`` loader also allows and
  ``MultiStepLR.state_dict()`` holds, stay what they were),
  tensors (dtype, shape, values, ``requires_grad``; an ``nn.Parameter`` comes back as
  one), ``torch.dtype``, ``torch.device`` and ``torch.Size``.  One tensor object saved
  twice comes back as one object; views of one storage come back as separate tensors.
* **Costs**: saving reads each tensor to the host and loading writes it back, through
  the fabric, as ``numpy()`` and ``torch.tensor`` do; the disk costs nothing.
* **Timing-only runs** have no values: their checkpoints hold dtypes and shapes only.
  A timing-only run loads any checkpoint (as zeros); a functional run refuses one
  without values.
* **Files** are written atomically through :mod:`kernbench.files` (a symlink, FIFO or
  device is never replaced) and read as regular files of at most
  :data:`CHECKPOINT_LIMIT` bytes; a file-like object (``io.BytesIO``) works too.
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

from kernbench.errors import CheckpointError, WeightsOnlyLoadError, exception_text
from kernbench.files import is_stream_target, read_bytes, write_bytes
from kernbench.runtime.current import current_context
from kernbench.torch.checkpoint_objects import (
    ObjectUnpickler,
    add_safe_globals,
    clear_safe_globals,
    get_safe_globals,
    pickled,
    safe_globals,
    unsafe_globals,
    weights_only_default,
)
from kernbench.torch.devices import device as torch_device
from kernbench.torch.dtypes import DTYPE_OBJECTS, TorchDType
from kernbench.torch.factories import tensor as make_tensor
from kernbench.torch.host_values import checked_read
from kernbench.torch.nn.parameter import (
    Parameter,
    UninitializedBuffer,
    UninitializedParameter,
    is_lazy,
)
from kernbench.torch.shapes import Size
from kernbench.torch.tensor import Tensor

__all__ = [
    "CHECKPOINT_LIMIT",
    "LoadingStorage",
    "add_safe_globals",
    "clear_safe_globals",
    "get_safe_globals",
    "get_unsafe_globals_in_checkpoint",
    "load",
    "safe_globals",
    "save",
]

# The largest checkpoint load() reads (the whole file is read into memory).
CHECKPOINT_LIMIT = 2 * 2**30
FORMAT = "kernbench-checkpoint"
VERSION = 2  # 2: pickled objects (a checkpoint without any is written as version 1)
VERSIONS = (1, 2)
_TREE = "checkpoint/tree.json"
_KINDS = {"list", "tuple", "dict", "tensor", "dtype", "device", "size", "pickle"}
_DEPTH = 200  # containers nested deeper than this are refused (and so are cycles)


def save(
    obj: Any,
    f: Any,
    pickle_module: Any = None,
    pickle_protocol: int = 2,
    _use_new_zipfile_serialization: bool = True,
    _disable_byteorder_record: bool = False,
) -> None:
    """Write ``obj`` to the file ``f`` (a path or a binary file object), as ``torch.save``.

    Objects other than tensors, numbers, strings and containers of them are pickled
    (protocol ``pickle_protocol``, Python's ``pickle``), their tensors kept as arrays.
    """
    if pickle_module is not None and pickle_module is not pickle:
        raise CheckpointError(
            "torch.save(pickle_module=...): kernbench pickles with Python's pickle; leave "
            "pickle_module out"
        )
    if (
        isinstance(pickle_protocol, bool)
        or not isinstance(pickle_protocol, int)
        or not 2 <= pickle_protocol <= pickle.HIGHEST_PROTOCOL
    ):
        raise CheckpointError(
            f"torch.save(pickle_protocol={pickle_protocol!r}): give a pickle protocol from 2 "
            f"to {pickle.HIGHEST_PROTOCOL}"
        )
    writer = _Writer(current_context().timing_only, pickle_protocol)
    tree = writer.node(obj, 0, ())
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        version = VERSION if writer.pickles else 1
        header = {"format": FORMAT, "version": version, "values": writer.values, "root": tree}
        archive.writestr(_TREE, json.dumps(header))
        for i, array in enumerate(writer.arrays):
            data = io.BytesIO()
            np.save(data, array, allow_pickle=False)
            archive.writestr(f"checkpoint/tensors/{i}.npy", data.getvalue())
        for i, data in enumerate(writer.pickles):
            archive.writestr(f"checkpoint/objects/{i}.pkl", data)
    _write(f, buffer.getvalue())


def load(
    f: Any,
    map_location: Any = None,
    pickle_module: Any = None,
    *,
    weights_only: bool | None = None,
    mmap: bool | None = None,
    **pickle_load_args: Any,
) -> Any:
    """The object :func:`save` wrote to ``f`` (a path or a binary file object), its tensors
    on the device ``map_location`` names (the current device by default), as ``torch.load``.
    A dict ``map_location`` maps the device each tensor was saved from to the one it loads
    to (``{"cuda:0": f"cuda:{rank}"}``, as torch's DDP tutorial loads a checkpoint rank 0
    saved); a tensor whose device is not a key loads where it was saved, as in torch.  A
    function is called as torch calls it, ``map_location(storage, location)``, with a
    :class:`LoadingStorage` standing for the storage.

    Tensors, numbers, strings and their containers load without a pickle.  A pickled
    object loads under torch's rules: ``weights_only=True`` (the default, as in torch
    2.6) allows only the globals torch allows and those allowlisted with
    :func:`add_safe_globals` or :class:`safe_globals`; ``weights_only=False`` unpickles
    anything, and so can run code: only for a file you trust.
    """
    if (pickle_module is not None and pickle_module is not pickle) or pickle_load_args:
        given = "pickle_module" if pickle_load_args == {} else next(iter(pickle_load_args))
        raise CheckpointError(
            f"torch.load({given}=...): kernbench unpickles with Python's pickle, as its "
            "checkpoints were written; leave it out"
        )
    device = _device_of(map_location)
    data, name = _read(f)
    archive, header = _opened(data, name)
    with archive:
        reader = _Reader(archive, name, device, header.get("values") is True)
        reader.weights_only = weights_only_default(weights_only)
        return reader.node(header.get("root"), 0)


def get_unsafe_globals_in_checkpoint(f: Any) -> list[str]:
    """The classes and functions (``"module.name"``) the checkpoint's pickled objects
    name that ``torch.load(weights_only=True)`` would refuse now, as torch's
    ``torch.serialization.get_unsafe_globals_in_checkpoint``; reading them runs no code."""
    data, name = _read(f)
    archive, _ = _opened(data, name, values_needed=False)
    with archive:
        entries = sorted(
            (n for n in archive.namelist() if n.startswith("checkpoint/objects/")),
            key=lambda n: (len(n), n),
        )
        return unsafe_globals(archive.read(n) for n in entries)


def _opened(data: bytes, name: str, values_needed: bool = True) -> tuple[zipfile.ZipFile, dict]:
    """The checkpoint's archive and header, checked (format, version, values, size)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        header = json.loads(archive.read(_TREE))
    except (zipfile.BadZipFile, KeyError, ValueError, UnicodeDecodeError, RecursionError):
        raise CheckpointError(
            f"torch.load: {name} is not a checkpoint kernbench.torch.save wrote (one PyTorch "
            "wrote is pickled objects, which kernbench does not unpickle: from PyTorch, save "
            "each tensor with np.save(path, t.cpu().numpy()) and load it here with "
            "torch.from_numpy(np.load(path)))"
        ) from None
    try:
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise CheckpointError(f"torch.load: {name} is not a kernbench checkpoint")
        if header.get("version") not in VERSIONS:
            raise CheckpointError(
                f"torch.load: {name} is checkpoint version {header.get('version')!r}; this "
                f"kernbench reads versions {VERSIONS[0]} to {VERSIONS[-1]}"
            )
        values = header.get("values") is True
        timing_only = current_context().timing_only
        if not values and not timing_only and values_needed:
            raise CheckpointError(
                f"torch.load: {name} was saved by a timing-only run and holds dtypes and "
                "shapes but no values; load it in a timing-only run (--timing-only), or save "
                "it again from a functional run"
            )
        if sum(info.file_size for info in archive.infolist()) > CHECKPOINT_LIMIT:
            raise CheckpointError(
                f"torch.load: {name} unpacks to more than {CHECKPOINT_LIMIT} bytes"
            )
    except BaseException:
        archive.close()
        raise
    return archive, header


class _Writer:
    """The object as a JSON tree; tensors' values gathered as arrays, other objects
    pickled (their tensors, dtypes, devices and sizes by reference into the tree)."""

    def __init__(self, timing_only: bool, protocol: int = 2) -> None:
        self.values = not timing_only
        self.protocol = protocol
        self.pickles: list[bytes] = []
        self.arrays: list[np.ndarray] = []
        self._tensors: dict[int, int] = {}  # id(tensor) -> its index in arrays
        self._keep: list[Tensor] = []  # the tensors indexed, so their ids stay theirs

    def node(self, obj: Any, depth: int, path: tuple) -> Any:
        if depth > _DEPTH:
            raise CheckpointError(
                f"torch.save: containers nested more than {_DEPTH} deep at {_where(path)} "
                "(a container that holds itself?)"
            )
        if obj is None or isinstance(obj, bool | int | float | str):
            return obj
        if isinstance(obj, Tensor):
            return self._tensor(obj)
        if isinstance(obj, TorchDType):
            return {"dtype": obj.name}
        if isinstance(obj, torch_device):
            return {"device": str(obj)}
        if isinstance(obj, Size):
            return {"size": list(obj)}
        if isinstance(obj, np.generic) and obj.dtype.kind in "biuf":
            return obj.item()
        if isinstance(obj, list | tuple) and type(obj) in (list, tuple):
            kind = "list" if isinstance(obj, list) else "tuple"
            return {kind: [self.node(v, depth + 1, (*path, i)) for i, v in enumerate(obj)]}
        if type(obj) in (dict, OrderedDict, Counter) and all(
            key is None or isinstance(key, bool | int | float | str | tuple) for key in obj
        ):
            items = []
            for key, value in obj.items():
                items.append(
                    [self.node(key, depth + 1, path), self.node(value, depth + 1, (*path, key))]
                )
            if isinstance(obj, Counter):
                return {"dict": items, "counter": True}
            return {"dict": items, "ordered": isinstance(obj, OrderedDict)}
        self.pickles.append(pickled(obj, self.protocol, self._kept, _where(path)))
        return {"pickle": len(self.pickles) - 1}

    def _kept(self, obj: Any) -> tuple | None:
        """The persistent id of what a pickled object holds that the tree keeps itself."""
        if isinstance(obj, Tensor):
            return ("tensor", self._tensor(obj))
        if isinstance(obj, TorchDType):
            return ("dtype", obj.name)
        if isinstance(obj, torch_device):
            return ("device", str(obj))
        if isinstance(obj, Size):
            return ("size", list(obj))
        return None

    def _tensor(self, t: Tensor) -> dict:
        if is_lazy(t):  # a lazy module's parameter or buffer: no shape, no values
            return self._uninitialized(t)
        index = self._tensors.get(id(t))
        if index is None:
            values = checked_read(t)  # the read to the host, in either mode
            if values is None:
                values = np.zeros(tuple(t.shape), dtype=np.dtype(_host_dtype(t.dtype)))
            index = self._tensors[id(t)] = len(self.arrays)
            self.arrays.append(np.ascontiguousarray(values).reshape(tuple(t.shape)))
            self._keep.append(t)
        return {
            "tensor": index,
            "dtype": t.dtype.name,
            "shape": list(t.shape),
            "requires_grad": bool(t.requires_grad),
            "parameter": isinstance(t, Parameter),
            "device": str(t.device),  # what a dict map_location maps from
        }

    def _uninitialized(self, t: Tensor) -> dict:
        """An uninitialized parameter or buffer as an entry of no elements that says so."""
        index = self._tensors.get(id(t))
        if index is None:
            index = self._tensors[id(t)] = len(self.arrays)
            self.arrays.append(np.zeros((0,), dtype=np.dtype(_host_dtype(t.dtype))))
            self._keep.append(t)
        return {
            "tensor": index,
            "dtype": t.dtype.name,
            "shape": [0],
            "requires_grad": bool(t.requires_grad),
            "parameter": isinstance(t, Parameter),
            "uninitialized": True,
            "device": str(t.device),
        }


class _Reader:
    """The tree back as objects; each tensor made once, on ``device(where it was saved)``."""

    def __init__(
        self, archive: zipfile.ZipFile, name: str, device: Callable[[Any], Any], values: bool
    ) -> None:
        self.archive = archive
        self.name = name
        self.device = device
        self.values = values
        self.weights_only = True
        self._made: dict[int, Tensor] = {}
        self._objects: dict[int, Any] = {}  # one pickled object loads once

    def bad(self, what: str) -> CheckpointError:
        return CheckpointError(f"torch.load: {self.name} is damaged: {what}")

    def node(self, node: Any, depth: int) -> Any:
        if depth > _DEPTH:
            raise self.bad(f"containers nested more than {_DEPTH} deep")
        if node is None or isinstance(node, bool | int | float | str):
            return node
        if not isinstance(node, dict) or not node.keys() & _KINDS:
            raise self.bad(f"an entry {str(node)[:60]!r}")
        if "list" in node or "tuple" in node:
            items = node.get("list", node.get("tuple"))
            if not isinstance(items, list):
                raise self.bad("a list entry")
            out = [self.node(v, depth + 1) for v in items]
            return out if "list" in node else tuple(out)
        if "dict" in node:
            pairs = node["dict"]
            if not isinstance(pairs, list) or not all(
                isinstance(p, list) and len(p) == 2 for p in pairs
            ):
                raise self.bad("a dict entry")
            made = (
                Counter() if node.get("counter") else OrderedDict() if node.get("ordered") else {}
            )
            for key, value in pairs:
                made[self._key(self.node(key, depth + 1))] = self.node(value, depth + 1)
            return made
        if "tensor" in node:
            return self._tensor(node)
        if "pickle" in node:
            return self._unpickled(node["pickle"])
        if "dtype" in node:
            return self._dtype(node["dtype"])
        if "device" in node:
            return torch_device(str(node["device"]))
        sizes = node["size"]  # the one kind left of _KINDS
        if not isinstance(sizes, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in sizes
        ):
            raise self.bad("a torch.Size entry")
        return Size(sizes)

    def _unpickled(self, index: Any) -> Any:
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.bad("an object entry")
        if index in self._objects:
            return self._objects[index]
        try:
            data = self.archive.read(f"checkpoint/objects/{index}.pkl")
        except (KeyError, OSError, zipfile.BadZipFile):
            raise self.bad(f"object {index} is missing") from None
        unpickler = ObjectUnpickler(data, self._restored, self.weights_only, self.name)
        try:
            made = unpickler.load()
        except (CheckpointError, WeightsOnlyLoadError):
            raise
        except Exception as exc:  # noqa: BLE001 - a damaged pickle, or a class's own error
            raise CheckpointError(
                f"torch.load: {self.name}: unpickling object {index} raised "
                f"{type(exc).__name__}: {exception_text(exc)}"
            ) from None
        self._objects[index] = made
        return made

    def _restored(self, pid: Any) -> Any:
        """What a pickled object's persistent id stands for (see ``_Writer._kept``)."""
        if not isinstance(pid, tuple) or len(pid) != 2:
            raise self.bad("an object's reference")
        kind, what = pid
        if kind == "tensor" and isinstance(what, dict):
            return self._tensor(what)
        if kind == "dtype":
            return self._dtype(what)
        if kind == "device" and isinstance(what, str):
            return torch_device(what)
        if kind == "size":
            return self.node({"size": what}, 0)
        raise self.bad("an object's reference")

    def _key(self, key: Any) -> Any:
        try:
            hash(key)
        except TypeError:
            raise self.bad("a dict key that cannot be one") from None
        return key

    def _dtype(self, name: Any) -> TorchDType:
        dt = DTYPE_OBJECTS.get(name) if isinstance(name, str) else None
        if dt is None:
            raise self.bad(f"an unknown dtype {name!r}")
        return dt

    def _tensor(self, node: dict) -> Tensor:
        index = node["tensor"]
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.bad("a tensor entry")
        made = self._made.get(index)
        if made is not None:
            return made
        dt = self._dtype(node.get("dtype"))
        shape = node.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
        ):
            raise self.bad(f"tensor {index}'s shape")
        expected = np.dtype(_host_dtype(dt))
        try:
            raw = self.archive.read(f"checkpoint/tensors/{index}.npy")
            stream = io.BytesIO(raw)
            version = np.lib.format.read_magic(stream)
            if version == (1, 0):
                header = np.lib.format.read_array_header_1_0(stream)
            elif version == (2, 0):
                header = np.lib.format.read_array_header_2_0(stream)
            else:
                raise ValueError(f"npy format {version}")
        except (KeyError, ValueError, OSError, EOFError, zipfile.BadZipFile):
            raise self.bad(f"tensor {index}'s values") from None
        stored, fortran, dtype = header
        if list(stored) != shape or dtype != expected or fortran:
            raise self.bad(f"tensor {index} is {dtype}{list(stored)}")
        # the header is checked before anything is allocated: it sizes the array np.load makes
        if math.prod(stored) * dtype.itemsize > len(raw) - stream.tell():
            raise self.bad(f"tensor {index}'s values are cut short")
        try:
            array = np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError):
            raise self.bad(f"tensor {index}'s values") from None
        where = self.device(node.get("device"))
        if node.get("uninitialized") is True and shape == [0]:
            lazy = UninitializedParameter if node.get("parameter") else UninitializedBuffer
            made = lazy(bool(node.get("requires_grad")), device=where, dtype=dt)
            self._made[index] = made
            return made
        t = make_tensor(array, dtype=dt, device=where)
        if node.get("parameter"):
            t = Parameter(t, requires_grad=bool(node.get("requires_grad")))
        elif node.get("requires_grad"):
            t.requires_grad_()
        self._made[index] = t
        return t


def _host_dtype(dt: TorchDType) -> str:
    """The NumPy dtype a tensor of ``dt`` reads to the host as (bfloat16 reads as float32)."""
    return "float32" if dt.name == "bfloat16" else dt.runtime_dtype_name


def _where(path: tuple) -> str:
    return "the top" if not path else "".join(f"[{key!r}]" for key in path)


def _device_of(map_location: Any) -> Callable[[Any], Any]:
    """Where a tensor saved from a device (its name, ``None`` in a checkpoint that did not
    record it) loads to: every tensor lives on the simulated machine, so ``"cpu"`` (and
    ``None``) mean the current device, as ``.to("cpu")`` keeps them there."""
    if isinstance(map_location, dict):
        return _mapped(map_location)
    if map_location is None or isinstance(map_location, str | torch_device | int):
        where = _load_device(map_location, "map_location")
        return lambda saved: where
    if callable(map_location):
        return _called(map_location)
    raise CheckpointError(
        f"torch.load(map_location={type(map_location).__name__}): give a device "
        "('cuda:0', torch.device, an index or 'cpu'), a dict of devices "
        "({'cuda:0': 'cuda:1'}) or a function of (storage, location)"
    )


class LoadingStorage:
    """What a ``map_location`` function is handed for each tensor, as torch hands it the
    storage it read (on the cpu): ``cpu()``, ``cuda(device)`` and ``to(device)`` give the
    storage on that device, so ``lambda storage, loc: storage`` and
    ``lambda storage, loc: storage.cuda(rank)`` say where the tensor goes."""

    def __init__(self, device: Any = "cpu") -> None:
        self.device = torch_device(device)

    def cpu(self) -> LoadingStorage:
        return LoadingStorage("cpu")

    def cuda(self, device: Any = None, non_blocking: bool = False) -> LoadingStorage:
        if isinstance(device, int) and not isinstance(device, bool):
            return LoadingStorage(torch_device("cuda", device))
        return LoadingStorage("cuda" if device is None else device)

    def to(self, device: Any = None, *args: Any, **kwargs: Any) -> LoadingStorage:
        return LoadingStorage(device if device is not None else self.device)

    def __repr__(self) -> str:
        return f"<storage being loaded, on {self.device}>"


def _called(map_location: Callable[..., Any]) -> Callable[[Any], Any]:
    """torch's function map_location: called with the storage and the saved location;
    ``None`` back means the default (where it was saved), a storage its device."""

    def where(saved: Any) -> Any:
        location = saved if isinstance(saved, str) else "cpu"
        result = map_location(LoadingStorage(), location)
        if result is None:
            device = torch_device(location)
            return device if device.is_accelerator else None
        if not isinstance(result, LoadingStorage):
            raise CheckpointError(
                f"torch.load: map_location returned {type(result).__name__}; it returns the "
                "storage it was given (moved with .cuda(i), .to(device) or .cpu()) or None"
            )
        return result.device if result.device.is_accelerator else None

    return where


def _load_device(where: Any, what: str) -> Any:
    """The accelerator ``where`` names, or ``None`` (the current device) for cpu or None."""
    if isinstance(where, bool) or not (
        where is None or isinstance(where, str | torch_device | int)
    ):
        raise CheckpointError(f"torch.load: {what} must be a device, not {type(where).__name__}")
    device = torch_device(where) if where is not None else None
    return None if device is None or not device.is_accelerator else device


def _mapped(map_location: dict) -> Callable[[Any], Any]:
    """torch's dict map_location: the saved device looked up among the keys (``"cuda:0"``
    and ``"ahbm:0"`` name one device here), else kept."""
    table = [
        (_dict_key(key), _load_device(value, f"map_location[{key!r}]"))
        for key, value in map_location.items()
    ]

    def where(saved: Any) -> Any:
        if not isinstance(saved, str):
            return None  # a checkpoint from before devices were recorded
        device = torch_device(saved)
        for key, target in table:
            if key == device:
                return target
        return device if device.is_accelerator else None

    return where


def _dict_key(key: Any) -> Any:
    if not isinstance(key, str | torch_device):
        raise CheckpointError(
            f"torch.load: map_location's keys are device names such as 'cuda:0', got {key!r}"
        )
    return torch_device(key)


def _write(f: Any, data: bytes) -> None:
    if isinstance(f, str | os.PathLike):
        name = os.fspath(f)
        if isinstance(name, bytes) or is_stream_target(name):
            raise CheckpointError(
                f"torch.save: {name!r} is not a file name; name a checkpoint file"
            )
        write_bytes(name, data, what="checkpoint")
        return
    write = getattr(f, "write", None)
    if not callable(write):
        raise CheckpointError(
            f"torch.save: f must be a file name or a binary file object, got {type(f).__name__}"
        )
    try:
        write(data)
    except TypeError:
        raise CheckpointError(
            "torch.save: the file object takes text; open it in binary mode ('wb')"
        ) from None


def _read(f: Any) -> tuple[bytes, str]:
    if isinstance(f, str | os.PathLike):
        name = os.fspath(f)
        if isinstance(name, bytes):
            name = name.decode(errors="replace")
        return read_bytes(name, what="checkpoint", limit=CHECKPOINT_LIMIT), repr(name)
    read = getattr(f, "read", None)
    if not callable(read):
        raise CheckpointError(
            f"torch.load: f must be a file name or a binary file object, got {type(f).__name__}"
        )
    data = read(CHECKPOINT_LIMIT + 1)
    if isinstance(data, str):
        raise CheckpointError("torch.load: the file object gives text; open it in binary mode")
    if len(data) > CHECKPOINT_LIMIT:
        raise CheckpointError(f"torch.load: the checkpoint is over {CHECKPOINT_LIMIT} bytes")
    return bytes(data), "the file object"
