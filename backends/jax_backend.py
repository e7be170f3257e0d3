"""The JAX backend: device ``"jax"`` / ``"jax:N"`` (JAX's devices), backend component JAX.

JAX arrays are immutable, so every JAX tensor carries the Functionalize key (Note
[Immutable backends] in mdtensor/_device.py): in-place ops, ``__setitem__`` and views behave
as on NumPy.  JAX defaults to 32-bit; this backend enables 64-bit types
(``jax_enable_x64``) when it loads, so float64/int64 tensors mean what they say, and
mdtensor's own defaults (float32, int64) are passed explicitly by the factories.
"""

from __future__ import annotations

from ._base import Backend, BackendInfo, Capabilities

INFO = BackendInfo("jax", "jax", "JAX", requires=("jax",))


class JAXBackend(Backend):
    name = "jax"
    device_type = "jax"
    key = "JAX"
    capabilities = Capabilities(views=False, inplace=False, ufunc_out=False)

    def __init__(self):
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        self._jax = jax
        self._xp = jnp
        self._devices = jax.devices()
        # Note: the concrete array class, never jax.Array (its metaclass defeats plum's
        # cache, DESIGN.md section 8).
        self.array_type = type(jnp.zeros(()))

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

    def copy_into(self, dst, src) -> None:
        raise RuntimeError("JAX arrays are immutable; in-place ops run through Functionalize")

    def native_dtype(self, dtype):
        return dtype.numpy


backend = JAXBackend
