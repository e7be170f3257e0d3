"""The non-op parts of the Array API namespace: constants, dtype functions, inspection."""

from __future__ import annotations

import math

import numpy as np

from mdtensor import backends
from mdtensor.tensors.device import Device, default_device

from . import _dtypes
from ._dtypes import DType, as_dtype

__all__ = [
    "__array_namespace_info__",
    "can_cast",
    "e",
    "finfo",
    "iinfo",
    "inf",
    "isdtype",
    "nan",
    "newaxis",
    "pi",
    "result_type",
]

e = math.e
pi = math.pi
inf = math.inf
nan = math.nan
newaxis = None

_KINDS = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


def isdtype(dtype, kind) -> bool:
    """Array API ``isdtype``: is ``dtype`` of ``kind`` (a dtype, a kind name, or a tuple)?"""
    if not isinstance(dtype, DType):
        raise TypeError(f"isdtype: expected an mdtensor dtype, got {type(dtype).__name__}")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, DType):
        return dtype is kind
    if isinstance(kind, str):
        try:
            return dtype.kind in _KINDS[kind]
        except KeyError:
            raise ValueError(f"isdtype: unknown kind {kind!r}; expected one of "
                             f"{', '.join(_KINDS)}") from None
    raise TypeError(f"isdtype: kind must be a dtype, a string or a tuple, got "
                    f"{type(kind).__name__}")


def result_type(*arrays_and_dtypes) -> DType:
    """Array API ``result_type`` (Python scalars are weak)."""
    return _dtypes.result_type(*arrays_and_dtypes)


def can_cast(from_, to, /) -> bool:
    """Array API ``can_cast``: may ``from_`` (a dtype or tensor) be cast to ``to`` safely?"""
    src = from_.dtype if hasattr(from_, "dtype") and not isinstance(from_, DType) else from_
    return _dtypes.can_cast(as_dtype(src), as_dtype(to), casting="safe")


class finfo_object:
    """Array API ``finfo`` result: bits, eps, max, min, smallest_normal, dtype."""

    def __init__(self, dtype: DType):
        if dtype is _dtypes.bfloat16:  # NumPy's finfo does not know ml_dtypes' types
            import ml_dtypes

            fi = ml_dtypes.finfo(dtype.numpy)
        else:
            fi = np.finfo(dtype.numpy)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.smallest_normal = float(fi.smallest_normal)
        self.tiny = self.smallest_normal  # PyTorch's name
        self.resolution = float(fi.resolution)
        self.dtype = {_dtypes.complex64: _dtypes.float32,
                      _dtypes.complex128: _dtypes.float64}.get(dtype, dtype)

    def __repr__(self) -> str:
        return f"finfo(bits={self.bits}, eps={self.eps}, dtype={self.dtype})"


class iinfo_object:
    """Array API ``iinfo`` result: bits, max, min, dtype."""

    def __init__(self, dtype: DType):
        ii = np.iinfo(dtype.numpy)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"iinfo(bits={self.bits}, min={self.min}, max={self.max}, dtype={self.dtype})"


def _dtype_of(x) -> DType:
    if isinstance(x, DType):
        return x
    if hasattr(x, "dtype"):
        return x.dtype
    return as_dtype(x)


def finfo(type, /) -> finfo_object:  # noqa: A002 - Array API spelling
    dt = _dtype_of(type)
    if dt.kind not in "fc":
        raise TypeError(f"finfo: expected a floating-point dtype, got {dt.name}")
    return finfo_object(dt)


def iinfo(type, /) -> iinfo_object:  # noqa: A002
    dt = _dtype_of(type)
    if dt.kind not in "iu":
        raise TypeError(f"iinfo: expected an integer dtype, got {dt.name}")
    return iinfo_object(dt)


class _Info:
    """``md.__array_namespace_info__()``: the Array API inspection object."""

    __module__ = "mdtensor"

    def capabilities(self) -> dict:
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 64}

    def default_device(self):
        return default_device()

    def devices(self) -> tuple:
        out = []
        for row in backends.available():
            if row["loaded"]:
                b = backends.get(row["device_type"])
                out += [Device(row["device_type"], i) for i in range(b.device_count())]
        return tuple(out) or (self.default_device(),)

    def default_dtypes(self, *, device=None) -> dict:
        """Note [Default dtypes] (ops/creation.py)."""
        return {"real floating": _dtypes.get_default_dtype(),
                "complex floating": _dtypes.default_complex_dtype(),
                "integral": _dtypes.int64, "indexing": _dtypes.int64}

    def dtypes(self, *, device=None, kind=None) -> dict:
        out = {}
        for dt in _dtypes.all_dtypes:
            if dt is _dtypes.float16:
                continue
            if kind is None or isdtype(dt, kind):
                out[dt.name] = dt
        return out


def __array_namespace_info__() -> _Info:
    return _Info()
