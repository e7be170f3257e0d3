"""Creation functions (Array API) and torch-style factories.

Note [Default dtypes]
~~~~~~~~~~~~~~~~~~~~~
As in PyTorch, the default floating dtype is float32 and the default integer dtype int64
(``md.zeros(3)`` is float32, ``md.arange(3)`` int64, ``md.asarray([1.0])`` float32).
``__array_namespace_info__().default_dtypes()`` reports them.
"""

from __future__ import annotations

import math

from mdtensor import _dtypes as dt

from ._factory import deffactory

_TAIL = "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"


def _shape(size):
    if isinstance(size, int) or hasattr(size, "__index__") and not hasattr(size, "__len__"):
        return (int(size),)
    return tuple(int(s) for s in size)


def _check_shape(op, shape):
    for s in shape:
        if s < 0:
            raise ValueError(f"{op}: negative dimension {s} in shape {shape}")
    return shape


def _fill_meta(op):
    def meta(size, *args, dtype=None, **kwargs):
        return _check_shape(op, _shape(size)), dt.as_dtype(dtype) if dtype is not None \
            else dt.float32
    return meta


def _zeros(xp, size, *, dtype=None, device=None):
    return xp.zeros(_check_shape("zeros", _shape(size)), dtype=dtype or xp.float32,
                    device=device)


def _ones(xp, size, *, dtype=None, device=None):
    return xp.ones(_check_shape("ones", _shape(size)), dtype=dtype or xp.float32, device=device)


def _empty(xp, size, *, dtype=None, device=None):
    return xp.empty(_check_shape("empty", _shape(size)), dtype=dtype or xp.float32,
                    device=device)


deffactory(f"zeros(SymInt[] size, {_TAIL}) -> Tensor", _zeros, _fill_meta("zeros"))
deffactory(f"ones(SymInt[] size, {_TAIL}) -> Tensor", _ones, _fill_meta("ones"))
deffactory(f"empty(SymInt[] size, {_TAIL}) -> Tensor", _empty, _fill_meta("empty"))


def _scalar_dtype(xp, value):
    if isinstance(value, bool):
        return xp.bool
    if isinstance(value, int):
        return xp.int64
    if isinstance(value, complex):
        return xp.complex64
    return xp.float32


def _full(xp, size, fill_value, *, dtype=None, device=None):
    return xp.full(_check_shape("full", _shape(size)), fill_value,
                   dtype=dtype or _scalar_dtype(xp, fill_value), device=device)


def _full_meta(size, fill_value, *, dtype=None, **kwargs):
    if dtype is not None:
        return _shape(size), dt.as_dtype(dtype)
    kind = {bool: dt.bool_, int: dt.int64, complex: dt.complex64}.get(type(fill_value), dt.float32)
    return _check_shape("full", _shape(size)), kind


deffactory(f"full(SymInt[] size, Scalar fill_value, {_TAIL}) -> Tensor", _full, _full_meta)


def _arange_count(start, end, step):
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    return max(0, math.ceil((end - start) / step))


def _arange_args(start, end, step):
    if end is None:
        start, end = 0, start
    return start, end, step


def _arange_dtype_is_int(start, end, step):
    return all(isinstance(v, int) for v in (start, end, step) if v is not None)


def _arange(xp, start, end=None, step=1, *, dtype=None, device=None):
    start, end, step = _arange_args(start, end, step)
    if dtype is None:
        dtype = xp.int64 if _arange_dtype_is_int(start, end, step) else xp.float32
    _arange_count(start, end, step)
    return xp.arange(start, end, step, dtype=dtype, device=device)


def _arange_meta(start, end=None, step=1, *, dtype=None, **kwargs):
    s, e, st = _arange_args(start, end, step)
    if dtype is None:
        dtype = dt.int64 if _arange_dtype_is_int(s, e, st) else dt.float32
    return (_arange_count(s, e, st),), dt.as_dtype(dtype)


deffactory(f"arange(Scalar start, Scalar? end=None, Scalar step=1, {_TAIL}) -> Tensor",
           _arange, _arange_meta)


def _linspace(xp, start, stop, num, *, endpoint=True, dtype=None, device=None):
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    if dtype is None:
        dtype = xp.complex64 if isinstance(start, complex) or isinstance(stop, complex) \
            else xp.float32
    return xp.linspace(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


def _linspace_meta(start, stop, num, *, endpoint=True, dtype=None, **kwargs):
    if dtype is None:
        dtype = dt.complex64 if isinstance(start, complex) or isinstance(stop, complex) \
            else dt.float32
    return (num,), dt.as_dtype(dtype)


deffactory(f"linspace(Scalar start, Scalar stop, int num, *, bool endpoint=True, "
           f"ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
           _linspace, _linspace_meta)


def _eye(xp, n_rows, n_cols=None, *, k=0, dtype=None, device=None):
    return xp.eye(n_rows, n_cols, k=k, dtype=dtype or xp.float32, device=device)


def _eye_meta(n_rows, n_cols=None, *, k=0, dtype=None, **kwargs):
    return (n_rows, n_rows if n_cols is None else n_cols), dt.as_dtype(dtype or dt.float32)


deffactory(f"eye(int n_rows, int? n_cols=None, *, int k=0, ScalarType? dtype=None, "
           f"Device? device=None, bool requires_grad=False) -> Tensor", _eye, _eye_meta)
