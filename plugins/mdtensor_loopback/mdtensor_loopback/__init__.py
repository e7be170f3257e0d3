"""The loopback backend: ``array_api_strict`` behind PrivateUse1, device ``"loopback"``.

Importing this module must not import ``array_api_strict`` (``INFO`` is read at
``import mdtensor``); the backend object imports it when the device is first used.
"""

from __future__ import annotations

from mdtensor.backends import Backend, BackendInfo, Capabilities

__all__ = ["INFO", "LoopbackBackend"]

INFO = BackendInfo("loopback", "loopback", "PrivateUse1", requires=("array_api_strict",))


class LoopbackBackend(Backend):
    name = "loopback"
    device_type = "loopback"
    key = "PrivateUse1"
    # array_api_strict arrays wrap NumPy arrays: basic slices are views, setitem works,
    # but its functions take no out=.
    capabilities = Capabilities(views=True, inplace=True, ufunc_out=False)

    #: the ops whose array_api_strict functions miss the standard's special values:
    #: ``sign(-0 + 0j)`` is ``-0 + 0j`` there, the standard's ``0 + 0j``
    special_values = ("sign",)

    def __init__(self):
        import array_api_strict
        from mdtensor.ops import special_values

        from mdtensor.library import Library

        self._xp = array_api_strict
        self.array_type = type(array_api_strict.asarray(0))
        self._device = array_api_strict.Device("CPU_DEVICE")
        # Kernels of our own for our key, as any backend registers them (kept alive with
        # the backend: destroying the Library would undo them)
        self._library = Library("aten", "IMPL")
        special_values.register(self._library, self.key, self.special_values)

    def namespace(self):
        return self._xp

    def native_device(self, index: int):
        return self._device

    def ensure_array(self, result):
        if isinstance(result, self.array_type):
            return result
        return self._xp.asarray(result)

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        import numpy as np

        if isinstance(obj, self.array_type):
            return self._xp.asarray(obj, dtype=dtype, copy=copy)
        if dtype is not None and not isinstance(obj, np.ndarray):
            # Python numbers straight to the dtype asked for: NumPy's own inference takes
            # [2**63 + 1, 1] to float64, and the cast to uint64 then rounds.
            arr = np.asarray(obj, dtype=np.dtype(str(dtype).rsplit(".", 1)[-1]))
            return self._xp.asarray(arr, copy=copy)
        arr = np.asarray(obj)
        if dtype is None:
            return self._xp.asarray(np.array(arr, copy=True) if copy else arr, copy=copy)
        return self._xp.asarray(arr, dtype=dtype, copy=copy)

    def to_numpy(self, array):
        import numpy as np

        return np.from_dlpack(array)

    def from_dlpack(self, obj, index: int = 0):
        import numpy as np

        arr = np.from_dlpack(obj)
        # A read-only export (from an immutable backend such as JAX) is copied: loopback
        # arrays are written in place.
        return self._xp.asarray(arr if arr.flags.writeable else arr.copy())

    def copy_into(self, dst, src) -> None:
        dst[...] = src

    def native_dtype(self, dtype):
        native = getattr(self._xp, dtype.name, None)
        if native is None:  # md.bfloat16: array_api_strict has none
            raise TypeError(f"the loopback backend (array_api_strict) has no {dtype.name}")
        return native

    def dtype_from_native(self, native):
        from mdtensor._dtypes import dtype_from_name

        cache = self.__dict__.setdefault("_by_native", {})
        hit = cache.get(native)
        if hit is None:
            hit = cache[native] = dtype_from_name(str(native).rsplit(".", 1)[-1])
        return hit
