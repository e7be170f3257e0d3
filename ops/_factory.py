"""Factory ops: BackendSelect picks the backend from ``device=``.

A factory has no tensor argument, so its call key set holds only the thread-local keys
(BackendSelect, ADInplaceOrView).  Its BackendSelect kernel turns ``device=`` (or the
default device) into that device's backend key and redispatches; the backend kernel then
allocates with the backend's namespace.  ``requires_grad=`` is handled after the kernel, as
PyTorch's Python binding does.
"""

from __future__ import annotations

from collections.abc import Callable

from mdtensor._device import as_device
from mdtensor._dtypes import DType, as_dtype
from mdtensor._keys import AFTER_BACKEND_SELECT, DispatchKey
from mdtensor._meta import MetaArray

from ._decl import OpInfo, _register, defop

__all__ = ["deffactory", "native_dtype"]


def native_dtype(dev, dtype):
    """The backend dtype for ``dtype`` (None stays None)."""
    if dtype is None:
        return None
    if not isinstance(dtype, DType):
        dtype = as_dtype(dtype)
    return dev.backend.native_dtype(dtype)


def _backend_select(op):
    def backend_select(ks, *args, device=None, **kwargs):
        dev = as_device(device)
        return op.redispatch((ks & AFTER_BACKEND_SELECT) | dev.ks, *args, device=dev,
                             **kwargs)

    backend_select.__qualname__ = f"backend_select[{op.name}]"
    return backend_select


def deffactory(schema: str, impl: Callable, meta: Callable, *, names=None,
               info: OpInfo | None = None, derivative=None, kwarg_aliases=None):
    """Declare a factory op.

    ``impl(xp, *args, dtype=<native or None>, device=<native device>, **kwargs)`` allocates
    on the backend; ``meta(*args, dtype=<DType or None>, **kwargs) -> (shape, DType)``.
    The schema must end with ``ScalarType? dtype=None, Device? device=None,
    bool requires_grad=False`` keyword arguments.
    """
    decl = defop(schema, meta=None, tags=("factory",), names=names, info=info,
                 derivative=derivative,
                 kwarg_aliases=kwarg_aliases or {"size": "shape", "end": "stop"})
    op = decl.overloads[-1]
    name = op.name

    def kernel(*args, dtype=None, device=None, requires_grad=False, **kwargs):
        dev = as_device(device)
        if dev.type == "meta":
            shape, dt = meta(*args, dtype=dtype, **kwargs)
            t = dev.wrap(MetaArray(shape, dt.numpy))
        else:
            t = dev.wrap(impl(dev.xp, *args, dtype=native_dtype(dev, dtype), device=dev.native,
                              **kwargs))
        if requires_grad:
            if t.dtype.kind not in "fc":
                raise RuntimeError(f"{name}: only tensors of floating point and complex dtype "
                                   f"can require gradients, got {t.dtype.name}")
            t.requires_grad_(True)
        return t

    kernel.__qualname__ = kernel.__name__ = f"factory[{name}]"
    _register(op, _backend_select(op), DispatchKey.BackendSelect, with_keyset=True)
    _register(op, kernel, DispatchKey.CompositeExplicitAutograd)
    decl.meta = meta
    return decl
