"""The JAX backend: device ``"jax"`` / ``"jax:N"`` (JAX's devices), backend component JAX.

JAX arrays are immutable, so every JAX tensor carries the Functionalize key (Note
[Immutable backends] in mdtensor/tensors/device.py): in-place ops, ``__setitem__`` and views behave
as on NumPy.  JAX defaults to 32-bit; this backend enables 64-bit types
(``jax_enable_x64``) when it loads, so float64/int64 tensors mean what they say, and
mdtensor's own defaults (float32, int64) are passed explicitly by the factories.

Note [JAX kernels]
~~~~~~~~~~~~~~~~~~
An eager ``jnp`` call costs 5-10 us (JAX's C++ ``jit`` dispatch plus the XLA call), and
Python code run just after it costs about three times what it costs alone (the dispatch
evicts the interpreter from the CPU caches), so every Python frame between the dispatcher
and JAX shows.  When the backend loads it registers, for the JAX key (rung 1, as the
NumPy backend's ``cpu_impl`` kernels), a kernel for the functional overload of every
pointwise op and every reduction of the catalogue: the op's own ``impl`` with ``xp=jnp``
under ``jax.jit``.  One C++ dispatch then replaces the impl's Python frames, its dtype
checks (traced once per dtype: Note [Integer inputs of float functions] in
ops/elementwise.py) and, for reductions, ``jnp.sum``'s Python wrapper (about 3 us).

* **Same computation.** The kernel runs the catalogue's impl, traced; a single ``jnp``
  function under ``jit`` is the same XLA computation ``jnp`` runs eagerly (``jnp``
  functions are themselves ``jit(inline=True)``).  Non-Tensor arguments of reductions
  (``axis``, ``keepdims``, ``dtype``, ``correction``) are static (lists become tuples), so
  each distinct value compiles once, as ``jnp.sum``'s own static arguments do.
* **Calls it does not take.** Tensor-only calls of pointwise ops only: a keyword argument
  (``alpha=``) or a Python scalar operand (``.Scalar`` overloads, where a traced scalar
  would lose its weak type or compile per value) takes the generic ArrayAPI kernel.
* **Every layer still runs.** The kernels sit where the ArrayAPI kernel sat (the JAX
  Dense key, below Functionalize, Python, ADInplaceOrView and Autograd), are leaf kernels
  (``_ops.LEAF_KERNELS``) like it, and a kernel a user registers for the JAX key still
  wins: the backend registers its kernels with ``md.library`` as backend kernels (Note
  [Backend kernels] in mdtensor/library.py), which stay below a user's.
* **The standard's special values.** For the ops in ``JAXBackend.special_values`` the
  traced impl is the catalogue's with the standard's special values (Note [Special
  values] in ops/special_values.py), and their other overloads (``x % 2.0``, ``out=``)
  get the same rules eagerly; the rules apply to complex tensors (and to zero results of
  ``%``, ``//``, ``sign``), traced once per dtype, so real dtypes cost nothing more.


Note [JAX on GPUs]
~~~~~~~~~~~~~~~~~~
Two of JAX's defaults on a GPU differ from what mdtensor (and PyTorch) promise, so the
backend changes them when it loads, for the whole process, as it turns on 64-bit types:

* XLA takes 75% of the GPU's memory when JAX starts, leaving the CuPy backend (or a
  second process: pytest's workers) out of memory.  Unless the variable is set (or JAX
  has used a device already), the backend sets ``XLA_PYTHON_CLIENT_PREALLOCATE=false``:
  JAX then allocates as it goes.
* float32 matrix products run in TF32 (a 10-bit mantissa: 3.5e-4 relative error in a
  complex64 matmul's gradient on an H200), where PyTorch and CuPy compute in float32.  The
  backend sets ``jax_default_matmul_precision`` to ``"highest"``: every backend gives
  float32 products.  (No effect on CPUs.)
"""

from __future__ import annotations

from ._base import Backend, BackendInfo, Capabilities, push_backend_kernel

__all__ = ["INFO", "JAXBackend", "backend"]

INFO = BackendInfo("jax", "jax", "JAX", requires=("jax",))


class JAXBackend(Backend):
    name = "jax"
    device_type = "jax"
    key = "JAX"
    capabilities = Capabilities(views=False, inplace=False, ufunc_out=False,
                                fancy_getitem=True)
    #: the ops whose XLA functions miss the standard's special values (Note [Special
    #: values] in ops/special_values.py): complex functions at infinities, NaNs and
    #: signed zeros, and the sign of zero results of ``%``, ``//`` and ``sign``
    special_values = ("abs", "acos", "acosh", "asinh", "atanh", "cosh", "exp",
                      "floor_divide", "log", "log1p", "remainder", "sign", "sinh", "sqrt")

    def __init__(self):
        import os

        # Note [JAX on GPUs] (read when JAX first uses a device, so imported or not)
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax

        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_default_matmul_precision", "highest")
        import jax.numpy as jnp

        self._jax = jax
        self._xp = jnp
        self._devices = jax.devices()
        # Note: the concrete array class, never jax.Array (its metaclass defeats plum's
        # cache, DESIGN.md section 8).
        self.array_type = type(jnp.zeros(()))
        _install_kernels(jax, jnp, self.special_values)

    def namespace(self):
        return self._xp

    def device_count(self) -> int:
        return len(self._devices)

    def native_device(self, index: int):
        return self._devices[index]

    def device_index(self, array) -> int:
        dev = next(iter(array.devices()))
        return self._devices.index(dev)

    def ensure_array(self, result):
        # Hot path (every kernel result): jnp functions already return arrays.
        if type(result) is self.array_type:
            return result
        return self._xp.asarray(result)

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        arr = self._xp.asarray(obj, dtype=dtype, copy=copy)
        return self._jax.device_put(arr, self._devices[index])

    def to_numpy(self, array):
        import numpy as np

        return np.asarray(array)

    def from_dlpack(self, obj, index: int = 0):
        return self._jax.device_put(self._xp.from_dlpack(obj), self._devices[index])

    def to_dlpack(self, array, *, stream=None, max_version=None, dl_device=None, copy=None):
        # Note [DLPack export]: JAX exports DLPack 0.x capsules (the legacy, unversioned
        # kind) whatever max_version says, but refuses a max_version below (0, 5); the
        # standard asks a producer whose major version the consumer shares to export its
        # own, so a max_version of major 0 is not passed on.  A dl_device JAX cannot
        # export to (no such platform here, or a copy that copy=False forbids) is the
        # standard's BufferError (JAX raises RuntimeError or ValueError).
        if max_version is not None and max_version[0] < 1:
            max_version = None
        try:
            return array.__dlpack__(stream=stream, max_version=max_version,
                                    dl_device=dl_device, copy=copy)
        except (RuntimeError, ValueError):
            if dl_device is None or tuple(dl_device) == tuple(
                    int(v) for v in array.__dlpack_device__()):
                raise
        raise BufferError(
            f"__dlpack__: the jax backend cannot export this array (on DLPack device "
            f"{tuple(int(v) for v in array.__dlpack_device__())}) to DLPack device "
            f"{tuple(dl_device)}" + (" without a copy (copy=False)" if copy is False else ""))

    def copy_into(self, dst, src) -> None:
        raise RuntimeError("JAX arrays are immutable; in-place ops run through Functionalize")

    def native_dtype(self, dtype):
        return dtype.numpy


# ---------------------------------------------------------------------------------------
# Note [JAX kernels]

_library: list = []  # the md.library.Library holding the backend's kernels (kept alive)


def _install_kernels(jax, jnp, special: tuple[str, ...]) -> None:
    """Register the backend's kernels for the JAX key (once per process): the standard's
    special values, then the jitted kernels (Note [Backend kernels] in
    mdtensor/library.py)."""
    if _library:
        return
    from mdtensor.ops import special_values
    from mdtensor.ops._decl import CATALOGUE

    from mdtensor.library import Library

    lib = Library("aten", "IMPL")
    _library.append(lib)
    fixed = special_values.register(lib, "JAX", special)
    for decl in list(CATALOGUE.values()):
        fn = _kernel_for(decl, fixed.get(decl.name, decl.impl), jax, jnp)
        if fn is not None:
            push_backend_kernel(decl.overloads[0], fn, "JAX", "mdtensor (JAX backend)")


def _kernel_for(decl, impl, jax, jnp):
    """The jitted kernel computing ``impl`` for ``decl``'s first (functional) overload, or
    None."""
    import functools

    from mdtensor.ops._errors import axis_check, device_mismatch, raise_from_backend
    from mdtensor.ops._impl_kernels import impl_kernel, prepared_impl

    from mdtensor.dispatch.keys import DispatchKey
    from mdtensor.tensors.tensor import Tensor
    from mdtensor.tensors.version_counter import new_counter

    new = object.__new__
    op = decl.overloads[0]
    schema = op.schema
    tags = op.tags
    if (impl is None or schema.is_mutable or schema.is_view or len(schema.returns) != 1
            or not schema.returns[0].type.is_tensor or schema.returns_tuple
            or not ("pointwise" in tags or "reduction" in tags) or "checks_values" in tags
            or not op.has_kernel_for(DispatchKey.ArrayAPI)):
        return None
    args = schema.arguments
    tensors = tuple(i for i, a in enumerate(args) if a.type.is_tensor_like)
    if any(args[i].kwarg_only or args[i].type.optional or args[i].has_default
           or args[i].type.is_tensor_list for i in tensors):
        return None
    # the impl as the generic kernels call it: operands checked and promoted first
    impl = prepared_impl(impl, schema, decl.accepts)
    # for the calls the jitted kernel does not take
    generic = impl_kernel(schema, impl, promote_scalars=False)
    name = schema.full_name
    traced = jax.jit(functools.partial(impl, jnp))
    n_positional = sum(1 for a in args if not a.kwarg_only)
    if "reduction" in tags and tensors == (0,):
        with_args = jax.jit(_with_static(impl, jnp), static_argnums=(1, 2))
        check = axis_check(schema)

        def kernel(a, *rest, **kwargs):
            if rest or kwargs:
                try:
                    return a._device.wrap(with_args(a._data, _hashable(rest),
                                                    _hashable_kw(kwargs)))
                except Exception as e:  # Note [Axis errors] in ops/_errors.py
                    if check is not None:
                        check(a._data.ndim, rest, kwargs)
                    if not isinstance(e, (ValueError, TypeError)):
                        raise
                    raise_from_backend(name, e, (a._data, *rest), kwargs)
            try:
                return a._device.wrap(traced(a._data))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data,))
    elif tensors == (0,) and len(args) == 1:
        def kernel(a):  # no **kwargs: an empty dict per call shows (Note [JAX kernels])
            # d.wrap(...) inlined: a jitted call always returns a JAX array, and a frame
            # run just after JAX's dispatch costs ~0.3 us (Note [JAX kernels])
            d = a._device
            t = new(Tensor)
            try:
                t._data = traced(a._data)
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data,))
            t._ks = d.ks
            t._device = d
            t._view = t._ag = None
            t._vc = new_counter()  # Note [Inference tensors] in mdtensor/tensors/version_counter.py
            return t
    elif tensors == (0,) and n_positional == 1:
        def kernel(a, **kwargs):
            if kwargs:
                return generic(a, **kwargs)
            try:
                return a._device.wrap(traced(a._data))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data,))
    elif tensors == (0, 1) and len(args) == 2:
        def kernel(a, b):
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            try:
                data = traced(a._data, b._data)
            except (ValueError, TypeError) as e:  # Note [Errors from the backend] in ops/_errors.py
                raise_from_backend(name, e, (a._data, b._data))
            t = new(Tensor)  # d.wrap(data), inlined as in the one-argument kernel
            t._data = data
            t._ks = d.ks
            t._device = d
            t._view = t._ag = None
            t._vc = new_counter()  # Note [Inference tensors] in mdtensor/tensors/version_counter.py
            return t
    elif tensors == (0, 1) and n_positional == 2:
        def kernel(a, b, **kwargs):
            if kwargs:
                return generic(a, b, **kwargs)
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            try:
                return d.wrap(traced(a._data, b._data))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend] in ops/_errors.py
                raise_from_backend(name, e, (a._data, b._data))
    else:
        return None
    kernel.__qualname__ = kernel.__name__ = f"jax_jit[{name}]"
    return kernel


def _with_static(impl, jnp):
    def run(x, rest, kwargs):
        return impl(jnp, x, *rest, **dict(kwargs))
    return run


def _hashable(rest: tuple) -> tuple:
    """Static arguments for ``jax.jit``: int lists (``axis=[0, 1]``) become tuples."""
    return tuple(tuple(v) if type(v) is list else v for v in rest)


def _hashable_kw(kwargs: dict) -> tuple:
    return tuple((k, tuple(v) if type(v) is list else v) for k, v in kwargs.items())


backend = JAXBackend
