"""Factory ops: BackendSelect picks the backend from ``device=``.

A factory has no tensor argument, so its call key set holds only the thread-local keys
(BackendSelect, ADInplaceOrView).  Its BackendSelect kernel turns ``device=`` (or the
default device) into that device's backend key and redispatches; the backend kernel then
allocates with the backend's namespace.  ``requires_grad=`` is handled after the kernel, as
PyTorch's Python binding does.
"""

from __future__ import annotations

from collections.abc import Callable

from mdtensor._device import Device, as_device
from mdtensor._dtypes import DType, as_dtype
from mdtensor._keys import AFTER_BACKEND_SELECT, DispatchKey
from mdtensor._meta import MetaArray
from mdtensor._ops import own_code

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
    table = op._table
    miss = op._miss

    def backend_select(ks, *args, device=None, **kwargs):
        dev = as_device(device)
        ks = ((ks & AFTER_BACKEND_SELECT) | dev.ks) & op._mask  # op.redispatch, inlined
        kernel = table.get(ks)
        if kernel is None:
            kernel = miss(ks)
        return kernel(*args, device=dev, **kwargs)

    backend_select = own_code(backend_select)  # Note [Own code objects]
    backend_select.__qualname__ = f"backend_select[{op.name}]"
    return backend_select


def deffactory(schema: str, impl: Callable, meta: Callable, *, names=None,
               info: OpInfo | None = None, derivative=None, kwarg_aliases=None,
               cpu_impl: Callable | None = None):
    """Declare a factory op.

    ``impl(xp, *args, dtype=<native or None>, device=<native device>, **kwargs)`` allocates
    on the backend; ``meta(*args, dtype=<DType or None>, **kwargs) -> (shape, DType)``.
    The schema must end with ``ScalarType? dtype=None, Device? device=None,
    bool requires_grad=False`` keyword arguments.  ``cpu_impl`` (same signature, ``xp``
    being NumPy itself) is the NumPy backend's own kernel (Note [NumPy fast impls]).
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
            _requires_grad(t)
        return t

    def _requires_grad(t):
        if t.dtype.kind not in "fc":
            raise RuntimeError(f"{name}: only tensors of floating point and complex dtype "
                               f"can require gradients, got {t.dtype.name}")
        t.requires_grad_(True)

    kernel = own_code(kernel, f"factory[{name}]")  # Note [Own code objects] in mdtensor/_ops.py
    _register(op, _backend_select(op), DispatchKey.BackendSelect, with_keyset=True)
    _register(op, kernel, DispatchKey.CompositeExplicitAutograd)
    if cpu_impl is not None:
        import numpy as np

        def cpu_kernel(*args, dtype=None, device=None, requires_grad=False, **kwargs):
            # a NumPy device, since the CPU key led here (BackendSelect passes a Device)
            dev = device if type(device) is Device else as_device(device)
            if dtype is not None:
                dtype = native_dtype(dev, dtype)
            t = dev.wrap(cpu_impl(np, *args, dtype=dtype, device=None, **kwargs) if kwargs
                         else cpu_impl(np, *args, dtype=dtype, device=None))
            if requires_grad:
                _requires_grad(t)
            return t

        cpu_kernel = own_code(cpu_kernel, f"factory_cpu[{name}]")
        _register(op, cpu_kernel, DispatchKey.CPU)
    decl.meta = meta
    return decl
