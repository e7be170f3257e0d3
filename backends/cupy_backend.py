"""The CuPy backend: device ``"cuda"`` / ``"cuda:N"``, backend component CUDA.

CuPy arrays behave like NumPy's: views share memory and elementwise functions take
``out=``, so in-place ops write into the existing buffer.  Its tests skip when no GPU (or
no CuPy) is present.
"""

from __future__ import annotations

from ._base import Backend, BackendInfo, Capabilities

INFO = BackendInfo("cupy", "cuda", "CUDA", requires=("cupy",))


class CuPyBackend(Backend):
    name = "cupy"
    device_type = "cuda"
    key = "CUDA"
    capabilities = Capabilities(views=True, inplace=True, ufunc_out=True,
                                fancy_setitem=True)

    def __init__(self):
        import array_api_compat.cupy as xp
        import cupy

        self._cupy = cupy
        self._xp = xp
        self.array_type = cupy.ndarray
        self._count = cupy.cuda.runtime.getDeviceCount()

    def namespace(self):
        return self._xp

    def device_count(self) -> int:
        return self._count

    def native_device(self, index: int):
        return self._cupy.cuda.Device(index)

    def device_index(self, array) -> int:
        return array.device.id

    def ensure_array(self, result):
        if type(result) is self.array_type:
            return result
        return self._cupy.asarray(result)

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        with self._cupy.cuda.Device(index):
            if copy is True:
                return self._cupy.array(obj, dtype=dtype, copy=True)
            return self._cupy.asarray(obj, dtype=dtype)

    def to_numpy(self, array):
        return self._cupy.asnumpy(array)

    def from_dlpack(self, obj, index: int = 0):
        return self._cupy.from_dlpack(obj)

    def copy_into(self, dst, src) -> None:
        self._cupy.copyto(dst, src, casting="same_kind")

    def native_dtype(self, dtype):
        return dtype.numpy


backend = CuPyBackend
