"""Factory ops: BackendSelect picks the backend from ``device=``.

A factory has no tensor argument, so its call key set holds only the thread-local keys
(BackendSelect, ADInplaceOrView).  Its BackendSelect kernel turns ``device=`` (or the
default device) into that device's backend key and redispatches; the backend kernel then
allocates with the backend's namespace.  ``requires_grad=`` is handled after the kernel, as
PyTorch's Python binding does.
"""

from __future__ import annotations

from collections.abc import Callable

from mdtensor.backends.meta_backend import MetaArray

from mdtensor._dtypes import DType, as_dtype
from mdtensor.dispatch.kernel import named
from mdtensor.dispatch.keys import AFTER_BACKEND_SELECT, DispatchKey
from mdtensor.tensors.device import Device, as_device
from mdtensor.tensors.factories import check_size

from ._decl import OpInfo, defop, register

__all__ = ["deffactory", "native_dtype"]

# Note [Allocation sizes]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A factory asked for more bytes than any array can have (more than 2**63 - 1: NumPy's
# "array is too big", PyTorch's "Storage size calculation overflowed") must raise, naming
# the op, on every device: JAX's C++ aborts the whole process on such a shape.  So the
# generic factory kernel (every backend but NumPy, and Meta, where PyTorch raises too) runs
# the op's meta function and checks the size *before* the backend sees the call; NumPy's
# own kernel lets NumPy refuse and renames its error (no cost when it succeeds).  A size
# that is possible but does not fit in memory is a MemoryError naming the op on every
# backend (JAX's RESOURCE_EXHAUSTED included).

def _allocation_error(name, e, shape, dtype, dev):
    """The op's MemoryError for a backend that could not allocate, or None (Note
    [Allocation sizes])."""
    if isinstance(e, MemoryError) or "RESOURCE_EXHAUSTED" in str(e):
        n = dtype.itemsize
        for s in shape:
            n *= s
        return MemoryError(f"{name}: not enough memory on device {dev} for a tensor of "
                           f"shape {tuple(shape)} and dtype {dtype.name} ({n} bytes)")
    return None


def native_dtype(dev, dtype):
    """The backend dtype for ``dtype`` (None stays None)."""
    if dtype is None:
        return None
    if not isinstance(dtype, DType):
        dtype = as_dtype(dtype)
    return dev.backend.native_dtype(dtype)


def _backend_select(op):
    table = op.table
    miss = op.fill_entry

    def backend_select(ks, *args, device=None, **kwargs):
        dev = as_device(device)
        ks = ((ks & AFTER_BACKEND_SELECT) | dev.ks) & op.mask  # op.redispatch, inlined
        kernel = table.get(ks)
        if kernel is None:
            kernel = miss(ks)
        return kernel(*args, device=dev, **kwargs)

    backend_select.__qualname__ = f"backend_select[{op.name}]"
    return backend_select


def deffactory(schema: str, impl: Callable, meta: Callable, *, names=None,
               info: OpInfo | None = None, kwarg_aliases=None,
               cpu_impl: Callable | None = None):
    """Declare a factory op.

    ``impl(xp, *args, dtype=<native or None>, device=<native device>, **kwargs)`` allocates
    on the backend; ``meta(*args, dtype=<DType or None>, **kwargs) -> (shape, DType)``.
    The schema must end with ``ScalarType? dtype=None, Device? device=None,
    bool requires_grad=False`` keyword arguments.  ``cpu_impl`` (same signature, ``xp``
    being NumPy itself) is the NumPy backend's own kernel (Note [NumPy fast impls]).
    """
    decl = defop(schema, meta=None, tags=("factory",), names=names, info=info,
                 kwarg_aliases=kwarg_aliases or {"size": "shape", "end": "stop"})
    op = decl.overloads[-1]
    name = op.name

    def kernel(*args, dtype=None, device=None, requires_grad=False, **kwargs):
        dev = as_device(device)
        shape, dt = meta(*args, dtype=dtype, **kwargs)
        check_size(name, shape, dt)  # Note [Allocation sizes]: before the backend sees it
        if dev.type == "meta":
            t = dev.wrap(MetaArray(shape, dt.numpy))
        else:
            try:
                data = impl(dev.xp, *args, dtype=native_dtype(dev, dtype), device=dev.native,
                            **kwargs)
            except Exception as e:
                err = _allocation_error(name, e, shape, dt, dev)
                if err is None:
                    raise
                raise err from e
            t = dev.wrap(data)
        if requires_grad:
            _requires_grad(t)
        return t

    def _requires_grad(t):
        if t.dtype.kind not in "fc":
            raise RuntimeError(f"{name}: only tensors of floating point and complex dtype "
                               f"can require gradients, got {t.dtype.name}")
        t.requires_grad_(True)

    # See Note [Own code objects] in mdtensor/dispatch/kernel.py
    kernel = named(kernel, f"factory[{name}]")
    register(op, _backend_select(op), DispatchKey.BackendSelect, with_keyset=True)
    register(op, kernel, DispatchKey.CompositeExplicitAutograd)
    if cpu_impl is not None:
        import numpy as np

        def cpu_kernel(*args, dtype=None, device=None, requires_grad=False, **kwargs):
            # a NumPy device, since the CPU key led here (BackendSelect passes a Device)
            dev = device if type(device) is Device else as_device(device)
            native = None if dtype is None else native_dtype(dev, dtype)
            try:
                t = dev.wrap(cpu_impl(np, *args, dtype=native, device=None, **kwargs) if kwargs
                             else cpu_impl(np, *args, dtype=native, device=None))
            except (ValueError, MemoryError) as e:  # Note [Allocation sizes]: NumPy refused
                shape, dt = meta(*args, dtype=dtype, **kwargs)
                check_size(name, shape, dt)
                err = _allocation_error(name, e, shape, dt, dev)
                if err is None:
                    raise
                raise err from e
            if requires_grad:
                _requires_grad(t)
            return t

        cpu_kernel = named(cpu_kernel, f"factory_cpu[{name}]")
        register(op, cpu_kernel, DispatchKey.CPU)
    decl.meta = meta
    return decl
