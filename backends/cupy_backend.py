"""The CuPy backend: device ``"cuda"`` / ``"cuda:N"``, backend component CUDA.

CuPy arrays behave like NumPy's: views share memory and elementwise functions take
``out=``, so in-place ops write into the existing buffer.  The hot elementwise cases run
kernels of the backend's own (Note [Vectorised elementwise kernels] in cupy_kernels.py).
Its tests skip when no GPU (or no CuPy) is present; ``tools/gpu_check.sh`` runs them on a
GPU machine.
"""

from __future__ import annotations

from ._base import Backend, BackendInfo, Capabilities

__all__ = ["INFO", "CuPyBackend", "backend"]

INFO = BackendInfo("cupy", "cuda", "CUDA", requires=("cupy",), dlpack_device_types=(2,))


class CuPyBackend(Backend):
    name = "cupy"
    device_type = "cuda"
    key = "CUDA"
    # Note: no fancy_setitem: CuPy's ``x[index_arrays] = v`` wraps indices out of bounds
    # around and leaves which of repeated indices wins undefined, so such writes take
    # mdtensor's own scatter (Note [Writes through index arrays] in ops/indexing.py).
    capabilities = Capabilities(views=True, inplace=True, ufunc_out=True,
                                fancy_getitem=True)

    def __init__(self):
        import array_api_compat.cupy as xp
        import cupy

        self._cupy = cupy
        self._xp = xp
        self.array_type = cupy.ndarray
        self._count = cupy.cuda.runtime.getDeviceCount()
        _install_kernels(cupy)

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
        with self._cupy.cuda.Device(index):
            return self._cupy.from_dlpack(obj)

    def owns_dense(self, array) -> bool:
        # CuPy's flags have no ``writeable`` (its arrays are always writable); a broadcast
        # view's zero strides make it not C-contiguous.
        return array._c_contiguous  # flags.c_contiguous, without a Flags object

    def copy_into(self, dst, src) -> None:
        self._cupy.copyto(dst, src, casting="same_kind")

    def native_dtype(self, dtype):
        return dtype.numpy


_installed: list = []


def _install_kernels(cupy) -> None:
    if not _installed:
        from .cupy_kernels import install

        install(cupy)
        _installed.append(True)


backend = CuPyBackend
