"""The Meta device: tensors with shape and dtype but no data.

A meta tensor's ``_data`` is a ``MetaArray`` (shape, dtype, strides).  Meta kernels are
generated from the catalogue's meta functions (``register_meta_kernels``), so a
(10**6 x 10**6) @ (10**6 x 10) meta matmul returns its (10**6, 10) result at once.
"""

from __future__ import annotations

import numpy as np
from mdtensor.backends._base import Backend, Capabilities

__all__ = ["MetaArray", "meta_backend"]


class MetaArray:
    """Shape, dtype and (C-contiguous) strides of an array that has no data."""

    __slots__ = ("shape", "dtype", "strides")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        strides = []
        acc = self.dtype.itemsize
        for s in reversed(self.shape):
            strides.append(acc)
            acc *= max(s, 1)
        self.strides = tuple(reversed(strides))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return f"MetaArray(shape={self.shape}, dtype={self.dtype})"


class MetaBackend(Backend):
    """Backend of the ``"meta"`` device (key Meta); it never computes."""

    name = "meta"
    device_type = "meta"
    key = "Meta"
    capabilities = Capabilities(views=True, inplace=True, ufunc_out=False)
    array_api = False
    array_type = MetaArray

    def namespace(self):
        return None

    def ensure_array(self, result):
        if isinstance(result, MetaArray):
            return result
        raise TypeError(f"meta kernels must produce MetaArray, got {type(result).__name__}")

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        a = np.asarray(obj) if dtype is None else np.asarray(obj, dtype=dtype)
        return MetaArray(a.shape, a.dtype)

    def to_numpy(self, array):
        raise RuntimeError("meta tensors have no data; item(), tolist() and numpy() are "
                           "not available on the meta device")

    def copy_into(self, dst, src) -> None:
        return None

    def native_dtype(self, dtype):
        return dtype.numpy


meta_backend = MetaBackend()
