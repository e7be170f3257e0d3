"""The NumPy backend: device ``"cpu"``, backend component CPU.

NumPy arrays have views and in-place ufuncs with ``out=``, so in-place ops write into the
existing buffer and views share memory with their base.
"""

from __future__ import annotations

import warnings

import numpy as np

from ._base import Backend, BackendInfo, Capabilities

__all__ = ["INFO", "NumPyBackend", "backend"]

INFO = BackendInfo("numpy", "cpu", "CPU", requires=("numpy",), dlpack_device_types=(1,))


def _by_numpy():
    from mdtensor._dtypes import all_dtypes

    return {d.numpy: d for d in all_dtypes}


_BY_NUMPY = _by_numpy()


# Note [Floating-point warnings]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch computes ``x / 0``, ``log(0)`` and ``sqrt(-1)`` silently (inf, -inf, nan); NumPy
# warns ("RuntimeWarning: divide by zero encountered in divide").  mdtensor follows PyTorch:
# when the NumPy backend is made, a warnings filter is *appended* that ignores NumPy's
# floating-point RuntimeWarnings raised from mdtensor's own modules.  Appended, so a filter
# the user sets (``-W error``, ``warnings.simplefilter("error")``) comes first and wins, and
# NumPy calls of the user's own code warn as before.  No per-call ``np.errstate``: setting
# and resetting NumPy's error-state context variable would cost every kernel call.

_FP_WARNINGS = r"(divide by zero|invalid value|overflow|underflow) encountered"


def _silence_floating_point_warnings() -> None:
    """See Note [Floating-point warnings]."""
    warnings.filterwarnings("ignore", _FP_WARNINGS, RuntimeWarning, r"mdtensor\.",
                            append=True)


class NumPyBackend(Backend):
    name = "numpy"
    device_type = "cpu"
    key = "CPU"
    capabilities = Capabilities(views=True, inplace=True, ufunc_out=True,
                                fancy_setitem=True, fancy_getitem=True)
    array_type = np.ndarray

    def __init__(self):
        import array_api_compat.numpy as xp

        from mdtensor._dtypes import on_bfloat16

        self._xp = xp
        self._dtypes = {}
        _silence_floating_point_warnings()
        # See Note [bfloat16 through ml_dtypes] in mdtensor/_dtypes.py: the kernels name dtypes
        # as ``getattr(xp, dtype.name)``; jax.numpy has ``bfloat16``, this namespace gets
        # ml_dtypes' once it is loaded.
        on_bfloat16(lambda native: setattr(xp, "bfloat16", native))

    def namespace(self):
        return self._xp

    def native_device(self, index: int):
        return "cpu"

    # Note: NumPy ufuncs and reductions return NumPy scalars for 0-d results; tensors
    # always hold arrays.  np.asarray itself (a C function, no Python frame: every full
    # reduction's result passes here) makes a 0-d array of a scalar, an ndarray of a
    # subclass instance and returns an ndarray unchanged.
    ensure_array = staticmethod(np.asarray)

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        return np.asarray(obj, dtype=dtype) if copy is not True else np.array(obj, dtype=dtype)

    def to_numpy(self, array):
        return array

    def from_dlpack(self, obj, index: int = 0):
        # Note: an immutable producer (JAX) exports read-only memory; a CPU tensor must be
        # writable, so that case is copied (the copy PyTorch's cross-device .to makes too).
        try:
            arr = np.from_dlpack(obj)
        except (RuntimeError, BufferError, TypeError) as e:
            if str(getattr(obj, "dtype", "")) != "bfloat16":
                raise
            # NumPy's DLPack reads no bfloat16 (ml_dtypes' is a NumPy user dtype)
            raise BufferError("from_dlpack: NumPy cannot import bfloat16 arrays through "
                              "DLPack; md.asarray(x, device='cpu') copies them") from e
        return arr if arr.flags.writeable else arr.copy()

    def owns_dense(self, array) -> bool:
        flags = getattr(array, "flags", None)  # broadcast_to's views are read-only
        if flags is None:  # a sparse array (scipy.sparse), made for this gradient
            return True
        return flags.writeable and flags.c_contiguous

    def copy_into(self, dst, src) -> None:
        np.copyto(dst, src, casting="same_kind")

    def native_dtype(self, dtype):
        return dtype.numpy

    def dtype_from_native(self, native):
        return _BY_NUMPY.get(native) or super().dtype_from_native(native)


backend = NumPyBackend
