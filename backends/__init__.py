"""Backend discovery and registration (``md.backends``).

Backends are found through two entry-point groups (docs/BACKENDS.md):

* ``mdtensor.backend_info`` -- a ``BackendInfo`` (name, device type, key, required
  packages), read at ``import mdtensor`` without importing any array library;
* ``mdtensor.backends`` -- the ``Backend`` class or factory, loaded lazily on the first use
  of its device.

The built-in backends (NumPy, JAX, CuPy, Dask) are registered through the same groups in
mdtensor's own pyproject.toml.  A broken plug-in is reported with a warning naming its
distribution and skipped; it never breaks ``import mdtensor`` or another backend.
"""

from __future__ import annotations

import importlib.util
import threading as _threading
import warnings as _warnings
from collections.abc import Callable
from importlib.metadata import entry_points

from mdtensor.dispatch import keys as _keys
from mdtensor.dispatch.operators import dispatcher

from ._base import Backend, BackendInfo, Capabilities, push_backend_kernel

__all__ = [
    "Backend",
    "BackendInfo",
    "Capabilities",
    "available",
    "device_type_for_dlpack",
    "get",
    "push_backend_kernel",
    "register",
    "rename_privateuse1",
]


class _Entry:
    __slots__ = ("info", "factory", "backend", "distribution", "error")

    def __init__(self, info: BackendInfo, factory, distribution: str | None):
        self.info = info
        self.factory = factory  # an EntryPoint, a class/callable, or None
        self.backend: Backend | None = None
        self.distribution = distribution
        self.error: str | None = None


_lock = _threading.RLock()
_by_device_type: dict[str, _Entry] = {}
_by_name: dict[str, _Entry] = {}
#: plug-ins skipped at discovery: entry-point name -> why (named in later errors)
_skipped: dict[str, str] = {}
_load_hooks: list[Callable[[Backend], None]] = []
_discovered = False

# Note [Discovery]
# ~~~~~~~~~~~~~~~~
# Discovery runs once, under the lock, and counts as done only when it finished: a
# KeyboardInterrupt or SystemExit raised while a plug-in's metadata is imported undoes what
# it had registered and leaves discovery to run again on the next use (it used to mark
# itself done first, leaving the process with no backend at all, "unknown device type
# 'cpu'").  Each plug-in is checked before it is added -- its name, device type (not empty,
# not a taken one, not "meta") and backend key (a backend component no other backend has:
# PrivateUse1 taken by the loopback is refused) -- and one that fails is skipped with a
# RuntimeWarning naming its distribution, and remembered, so that ``device=`` of a skipped
# plug-in says why instead of only "unknown device type".

# Built-ins are known without metadata too, so a source checkout that was never installed
# (no entry points) still finds them.
_BUILTIN = {
    "numpy": ("mdtensor.backends.numpy_backend",
              BackendInfo("numpy", "cpu", "CPU", ("numpy",), dlpack_device_types=(1,))),
    "jax": ("mdtensor.backends.jax_backend", BackendInfo("jax", "jax", "JAX", ("jax",))),
    "cupy": ("mdtensor.backends.cupy_backend",
             BackendInfo("cupy", "cuda", "CUDA", ("cupy",), dlpack_device_types=(2,))),
    "dask": ("mdtensor.backends.dask_backend", BackendInfo("dask", "dask", "Dask", ("dask",))),
}


def _dist_name(ep) -> str:
    dist = getattr(ep, "dist", None)
    return dist.name if dist is not None else f"entry point {ep.name!r}"


def _discover() -> None:
    """Read backend metadata from entry points (no array library is imported)."""
    global _discovered
    with _lock:
        if _discovered:
            return
        names, types, skipped = dict(_by_name), dict(_by_device_type), dict(_skipped)
        try:
            _discover_all()
        except BaseException:  # Note [Discovery]: interrupted, it is not done
            _by_name.clear()
            _by_name.update(names)
            _by_device_type.clear()
            _by_device_type.update(types)
            _skipped.clear()
            _skipped.update(skipped)
            raise
        _discovered = True


def _skip(name: str, dist: str, why: str, device_type=None) -> None:
    _skipped[name] = f"{why} (from {dist})"
    if isinstance(device_type, str) and device_type not in _by_device_type:
        _skipped[device_type] = _skipped[name]
    _warnings.warn(f"mdtensor: skipping backend plug-in {name!r} from {dist}: {why}",
                  RuntimeWarning, stacklevel=4)


def _discover_all() -> None:
    """Read every plug-in's metadata and register what passes (Note [Discovery])."""
    infos = {}
    for ep in entry_points(group="mdtensor.backend_info"):
        try:
            info = ep.load()
            if not isinstance(info, BackendInfo):
                raise TypeError(f"expected a BackendInfo, got {type(info).__name__}")
            dist = _dist_name(ep)
            if ep.name in infos and infos[ep.name][1] != dist:
                raise ValueError(f"backend name {ep.name!r} is already registered by "
                                 f"{infos[ep.name][1]}")
            infos[ep.name] = (info, dist)
        except Exception as e:  # noqa: BLE001 - a broken plug-in must not break import
            _skip(ep.name, _dist_name(ep),
                  f"its backend_info failed to load ({type(e).__name__}: {e})")
    # A factory belongs to the backend_info of its own distribution (two distributions
    # declaring the same name must not pair one's metadata with the other's factory).
    factories = {(ep.name, _dist_name(ep)): ep
                 for ep in entry_points(group="mdtensor.backends")}
    for name, (module, info) in _BUILTIN.items():
        if name not in infos:
            infos[name] = (info, "mdtensor")
        factories.setdefault((name, "mdtensor"), module + ":backend")
    # Built-in backends first: a plug-in can never displace them (a clash is reported
    # against the plug-in, whatever order entry points come in).
    ordered = sorted(infos.items(), key=lambda kv: (kv[1][1] != "mdtensor", kv[0]))
    for name, (info, dist) in ordered:
        factory = factories.get((name, dist))
        if factory is None:
            _skip(name, dist, "it declares mdtensor.backend_info but no mdtensor.backends "
                              "entry point", info.device_type)
            continue
        try:
            _add(_Entry(info, factory, dist))
        except ValueError as e:
            _skip(name, dist, str(e), info.device_type)


def _add(entry: _Entry) -> None:
    info = entry.info
    for field in ("name", "device_type", "key"):
        value = getattr(info, field, None)
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f"backend {info.name!r}: its {field} must be a non-empty str, "
                             f"got {value!r}")
    if not info.device_type.isidentifier():
        raise ValueError(f"backend {info.name!r}: device type {info.device_type!r} is not a "
                         f"valid identifier (device strings are 'type' or 'type:index')")
    if info.device_type == "meta":
        raise ValueError(f"backend {info.name!r}: device type 'meta' is mdtensor's own")
    if info.name in _by_name:
        other = _by_name[info.name]
        raise ValueError(
            f"backend name {info.name!r} is already registered by {other.distribution}"
        )
    if info.device_type in _by_device_type:
        other = _by_device_type[info.device_type]
        raise ValueError(
            f"device type {info.device_type!r} is already served by backend "
            f"{other.info.name!r} from {other.distribution}"
        )
    if info.key not in _keys.BACKEND_COMPONENTS or info.key == "Meta":
        raise ValueError(
            f"backend {info.name!r} names backend key {info.key!r}; expected one of "
            f"{', '.join(k for k in _keys.BACKEND_COMPONENTS if k != 'Meta')}"
        )
    for other in _by_name.values():
        if other.info.key == info.key:
            raise ValueError(
                f"backend key {info.key!r} is already taken by backend {other.info.name!r} "
                f"from {other.distribution}")
    _by_name[info.name] = entry
    _by_device_type[info.device_type] = entry


def _instantiate(entry: _Entry) -> Backend:
    factory = entry.factory
    if isinstance(factory, str):
        module, _, attr = factory.partition(":")
        factory = getattr(importlib.import_module(module), attr)
    elif hasattr(factory, "load"):
        factory = factory.load()
    backend = factory() if callable(factory) and not isinstance(factory, Backend) else factory
    _check_contract(backend)
    info = entry.info
    if (backend.key != info.key or backend.device_type != info.device_type
            or backend.name != info.name):
        raise TypeError(
            f"backend {info.name!r}: its metadata says name={info.name!r}, key={info.key}, "
            f"device_type={info.device_type!r}, but the backend object says "
            f"name={backend.name!r}, key={backend.key}, device_type={backend.device_type!r}"
        )
    backend.namespace()  # its first call here, so a failure names the plug-in
    return backend


def _check_contract(backend) -> None:
    """The required parts of docs/BACKENDS.md, checked once at load (a missing one would
    otherwise surface as an obscure error in the first kernel)."""
    for attr in ("name", "device_type", "key"):
        if not getattr(backend, attr, None):
            raise TypeError(f"backend object {backend!r} is missing required attribute {attr!r}")
    ns = getattr(type(backend), "namespace", None)
    if ns is None or ns is Backend.namespace:
        raise TypeError(f"backend {backend.name!r} does not define namespace() (required)")
    array_type = getattr(backend, "array_type", object)
    if not isinstance(array_type, type) or array_type is object:
        raise TypeError(
            f"backend {backend.name!r}: array_type must be the concrete array class, got "
            f"{array_type!r}")


def get(device_type: str) -> Backend:
    """The backend serving ``device_type``, loading it on first use.

    Raises:
        ValueError: no backend serves this device type.
        RuntimeError: the backend failed to load (its array library is missing, ...).
    """
    _discover()
    entry = _by_device_type.get(device_type)
    if entry is None:
        known = ", ".join(sorted(_by_device_type)) or "none"
        why = _skipped.get(device_type)
        if why is not None:  # Note [Discovery]
            raise ValueError(f"device type {device_type!r}: its backend plug-in was "
                             f"skipped: {why}")
        raise ValueError(
            f"unknown device type {device_type!r}; known device types: {known}, meta"
        )
    if entry.backend is not None:
        return entry.backend
    with _lock:
        if entry.backend is not None:
            return entry.backend
        try:
            backend = _instantiate(entry)
        except Exception as e:  # noqa: BLE001
            entry.error = f"{type(e).__name__}: {e}"
            raise RuntimeError(
                f"backend {entry.info.name!r} for device type {device_type!r} "
                f"(from {entry.distribution}) failed to load: {entry.error}"
            ) from e
        if backend.array_api:  # the ArrayAPI alias key serves it now (rung 2 of the ladder)
            dispatcher.array_api_backends.add(backend.key)
            dispatcher.invalidate_all()
        for hook in _load_hooks:
            hook(backend)
        entry.backend = backend
        return backend


def register(backend: Backend, *, info: BackendInfo | None = None) -> None:
    """Register a backend object programmatically (instead of through an entry point).

    Raises:
        ValueError: the name or device type is taken, or the key is not a backend key.
    """
    _discover()
    info = info or BackendInfo(backend.name, backend.device_type, backend.key)
    with _lock:
        entry = _Entry(info, backend, "md.backends.register")
        _add(entry)
        try:
            get(info.device_type)
        except Exception:
            del _by_name[info.name], _by_device_type[info.device_type]
            raise


def unregister(name: str) -> None:
    """Remove a backend registered with ``register`` (mainly for tests)."""
    with _lock:
        entry = _by_name.pop(name)
        _by_device_type.pop(entry.info.device_type, None)


def available() -> list[dict]:
    """Every known backend: name, device type, key, installed, loaded, distribution."""
    _discover()
    rows = []
    for name, e in sorted(_by_name.items()):
        installed = all(importlib.util.find_spec(r) is not None for r in e.info.requires)
        rows.append({
            "name": name,
            "device_type": e.info.device_type,
            "key": e.info.key,
            "installed": installed,
            "loaded": e.backend is not None,
            "distribution": e.distribution,
            "error": e.error,
        })
    return rows


def device_type_for_dlpack(dlpack_type: int) -> str | None:
    """The device type whose backend imports arrays of DLPack device type ``dlpack_type``
    as its own (``BackendInfo.dlpack_device_types``), or None; loads no backend."""
    _discover()
    for e in _by_name.values():
        if dlpack_type in e.info.dlpack_device_types:
            return e.info.device_type
    return None


def loaded() -> list[Backend]:
    return [e.backend for e in _by_name.values() if e.backend is not None]


def on_load(hook: Callable[[Backend], None]) -> None:
    """Call ``hook(backend)`` for every backend loaded from now on (and the loaded ones)."""
    _load_hooks.append(hook)
    for b in loaded():
        hook(b)


def rename_privateuse1(name: str) -> None:
    """Show PrivateUse1 as ``name``: ``device="name"`` and ``AutogradName`` in dumps."""
    _rename("PrivateUse1", name)


def _rename(component: str, name: str) -> None:
    if not name.isidentifier():
        raise ValueError(f"rename_privateuse1: {name!r} is not a valid identifier")
    _keys.rename_backend(component, name[:1].upper() + name[1:])
    _discover()
    for e in list(_by_name.values()):
        if e.info.key == component and e.info.device_type != name:
            _by_device_type.pop(e.info.device_type, None)
            e.info.device_type = name
            _by_device_type[name] = e
            if e.backend is not None:
                e.backend.device_type = name
