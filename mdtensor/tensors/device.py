"""Devices: ``md.Device("cpu")``, ``"cuda:1"``, ``"jax"``, ``"meta"``.

A ``Device`` is interned (one object per device), and carries what kernels need on the hot
path: the backend, its Array API namespace ``xp``, the key set of tensors on it, and
``wrap(array) -> Tensor``.  Creating a device loads its backend (lazily, on first use).
"""

from __future__ import annotations

import threading

from mdtensor import backends
from mdtensor.backends.meta_backend import meta_backend
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.operators import dispatcher
from mdtensor.dispatch.resolution import register_schema_class
from mdtensor.tensors.tensor import make_wrap

__all__ = ["Device", "as_device"]

_interned: dict[tuple[str, int], Device] = {}
_lock = threading.Lock()


def _parse(spec) -> tuple[str, int | None]:
    if isinstance(spec, Device):
        return spec.type, spec.index
    if not isinstance(spec, str):
        raise TypeError(f"Device: expected a device string such as 'cpu' or 'cuda:0', "
                        f"got {type(spec).__name__}")
    kind, sep, idx = spec.partition(":")
    if sep:
        if not idx.isdigit():
            raise ValueError(f"Device: invalid device string {spec!r}; expected 'type' or "
                             f"'type:index' with a non-negative integer index")
        return kind, int(idx)
    return kind, None


class Device:
    """A device: a backend's device type plus an index.

    Examples:
        >>> md.Device("cpu")
        device(type='cpu')
        >>> md.Device("cpu") is md.Device("cpu")
        True
    """

    __slots__ = ("type", "index", "backend", "xp", "ks", "wrap", "native", "dtypes",
                 "__weakref__")

    def __new__(cls, spec, index: int | None = None):
        kind, parsed = _parse(spec)
        if index is None:
            index = parsed
        if index is not None and (not isinstance(index, int) or index < 0):
            raise ValueError(f"Device: invalid index {index!r}")
        key = (kind, index or 0)
        dev = _interned.get(key)
        if dev is not None:
            return dev
        with _lock:
            dev = _interned.get(key)
            if dev is None:
                dev = object.__new__(cls)
                dev._init(kind, index or 0)
                _interned[key] = dev
        return dev

    def _init(self, kind: str, index: int) -> None:
        backend = meta_backend if kind == "meta" else backends.get(kind)
        count = backend.device_count()
        if index >= count:
            raise ValueError(
                f"Device: {kind}:{index} does not exist; the {backend.name} backend has "
                f"{count} {kind} device(s)"
            )
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "index", index)
        object.__setattr__(self, "backend", backend)
        object.__setattr__(self, "xp", backend.namespace())
        object.__setattr__(self, "native", backend.native_device(index))
        ks = (DispatchKey[backend.key].value | DispatchKey.ADInplaceOrView.value)
        if not backend.capabilities.inplace:
            # Note [Immutable backends]: every tensor on a backend whose arrays cannot be
            # mutated carries Functionalize, so in-place ops and views behave as on NumPy.
            ks |= DispatchKey.Functionalize.value
        object.__setattr__(self, "ks", ks)
        dispatcher.device_types[backend.key] = kind  # for the dispatcher's error messages
        object.__setattr__(self, "wrap", make_wrap(self))
        # native dtype -> md DType, for Tensor.dtype (one dict per backend: its own native
        # dtypes only, never compared with another library's)
        dtypes = backend.__dict__.get("_md_dtypes")
        if dtypes is None:
            dtypes = backend.__dict__["_md_dtypes"] = {}
        object.__setattr__(self, "dtypes", dtypes)

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable")

    def __reduce__(self):
        return Device, (str(self),)

    # As PyTorch shows them: 'cpu' and 'meta' without an index, the other device types with
    # theirs ('jax:0', 'cuda:1'), so ``device="jax:0"`` shows what was asked for.
    def __repr__(self) -> str:
        if self.type in ("cpu", "meta"):
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        if self.type in ("cpu", "meta"):
            return self.type
        return f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                return Device(other) is self
            except (ValueError, TypeError, RuntimeError):
                return False
        return other is self

    def __hash__(self) -> int:
        return hash((self.type, self.index))


register_schema_class("Device", Device)  # Note [Schema classes] in mdtensor/dispatch/resolution.py


_default_device = None


def default_device() -> Device:
    global _default_device
    if _default_device is None:
        import os

        _default_device = Device(os.environ.get("MDTENSOR_DEFAULT_DEVICE", "cpu"))
    return _default_device


def set_default_device(device) -> None:
    """Set the device factories use when no ``device=`` is given (process-wide)."""
    global _default_device
    _default_device = as_device(device)


def as_device(device) -> Device:
    """``None`` -> the default device; a string or Device -> that Device."""
    if device is None:
        return default_device()
    if type(device) is Device:
        return device
    return Device(device)
