"""Cleaning and reading floating values: ``nan_to_num`` and ``angle``, as PyTorch's.

``nan_to_num(x, nan=0.0, posinf=None, neginf=None)`` replaces NaN by ``nan`` and the
infinities by ``posinf``/``neginf`` (the dtype's largest and lowest finite values by
default), for each part of a complex number; integers and bools come back as they are.
``angle(z)`` is ``atan2(imag, real)``; of a real number, 0 for the non-negative ones and
pi for the negative ones (NaN stays NaN), as a float (integers give the default float
dtype).  Derivative rules: ``ops/float_values_derivatives.py``.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._decl import OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import ALL, FLOATING, to_float

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _clean(xp, x, nan, posinf, neginf):
    from mdtensor._namespace import finfo  # (NumPy's knows no bfloat16)

    info = finfo(dt.as_dtype(x.dtype))
    hi = float(info.max) if posinf is None else posinf
    lo = float(info.min) if neginf is None else neginf
    x = xp.where(xp.isnan(x), xp.asarray(nan, dtype=x.dtype), x)
    x = xp.where(x == math.inf, xp.asarray(hi, dtype=x.dtype), x)
    return xp.where(x == -math.inf, xp.asarray(lo, dtype=x.dtype), x)


def _nan_to_num(xp, x, nan=0.0, posinf=None, neginf=None):
    d = dt.as_dtype(x.dtype)
    if d.kind in "biu":
        return xp.asarray(x, copy=True)
    if d.kind == "c":
        real, imag = xp.real(x), xp.imag(x)
        parts = [_clean(xp, p, nan, posinf, neginf) for p in (real, imag)]
        return xp.astype(parts[0], x.dtype) + xp.astype(parts[1], x.dtype) * xp.asarray(
            1j, dtype=x.dtype)
    return _clean(xp, x, nan, posinf, neginf)


# On NumPy (Note [NumPy fast impls] in ops/_decl.py): with the default bounds, the
# infinities clipped to the dtype's finite range -- one ufunc pass, which leaves the finite
# values and the NaNs as they are -- then the NaNs replaced (NaN where ``nan`` is None, as
# the generic impl's ``asarray(None)``): 8 -> 2 us on the sweep's 6 floats.  Other bounds
# replace each kind of value in a copy.  The bounds are kept as 0-d arrays of the dtype: a
# ufunc converts a NumPy scalar operand on every call (clip with two of them: 0.3 us more).

_FINITE_RANGE: dict = {}  # NumPy dtype -> (max, min), 0-d arrays of that dtype
#: NumPy's clip ufunc (``_core.umath``, NumPy >= 2), without np.clip's Python wrapper
_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)
#: np.putmask's C function, without its ``__array_function__`` dispatcher (0.25 us)
_putmask = getattr(np.putmask, "_implementation", np.putmask)


def _np_nan_to_num(xp, x, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind != "f" or not x.ndim:  # (a ufunc gives a 0-d array a scalar)
        return _nan_to_num(xp, x, nan, posinf, neginf)
    bounds = _FINITE_RANGE.get(x.dtype)
    if bounds is None:
        info = np.finfo(x.dtype)
        bounds = _FINITE_RANGE[x.dtype] = (np.asarray(info.max), np.asarray(info.min))
    # a zero (the default) as it is: putmask casts it exactly, without an array made for it
    fill = nan if type(nan) is float and nan == 0.0 else np.asarray(nan, x.dtype)
    if posinf is None and neginf is None and _CLIP is not None:
        r = _CLIP(x, bounds[1], bounds[0])
        _putmask(r, np.isnan(r), fill)
        return r
    hi = bounds[0] if posinf is None else posinf
    lo = bounds[1] if neginf is None else neginf
    r = x.copy()
    _putmask(r, np.isnan(x), fill)
    _putmask(r, x == math.inf, np.asarray(hi, x.dtype))
    _putmask(r, x == -math.inf, np.asarray(lo, x.dtype))
    return r


def _nan_samples(dtype, rng):
    x = make_array((6,), dtype, rng)
    if dtype.kind in "fc":
        x[:3] = [np.nan, np.inf, -np.inf]
    return [SampleInput((x,)), SampleInput((x,), {"nan": 1.5, "posinf": 9.0, "neginf": -9.0}),
            SampleInput((make_array((2, 3), dtype, rng),))]


defop("nan_to_num(Tensor self, float? nan=0.0, float? posinf=None, float? neginf=None)"
      " -> Tensor", impl=_nan_to_num, structured=True, meta=mf.same, methods=("nan_to_num",),
      cpu_impl=_np_nan_to_num,
      promote_scalars=False,
      info=OpInfo(ref=lambda x, nan=0.0, posinf=None, neginf=None: np.nan_to_num(
          x, nan=nan, posinf=posinf, neginf=neginf), dtypes=ALL, samples=_nan_samples))


def _angle(xp, x):
    d = dt.as_dtype(x.dtype)
    if d.kind == "c":
        return xp.atan2(xp.imag(x), xp.real(x))
    x = to_float(xp, x) if d.kind in "biu" else x
    zero = xp.zeros_like(x)
    out = xp.where(x < 0, xp.full_like(x, math.pi), zero)
    return xp.where(xp.isnan(x), x, out)


def _np_angle(xp, x):
    """angle on NumPy: ``atan2`` of the parts' views for complex numbers, ``pi * (x < 0)``
    with the NaNs copied for real floats (not ``atan2(0, x)``, which is pi at -0)."""
    kind = x.dtype.kind
    if kind == "c":
        return np.arctan2(x.imag, x.real)
    if kind != "f" or not x.ndim:  # (a ufunc gives a 0-d array a scalar)
        return _angle(xp, x)
    r = np.multiply(np.less(x, 0), np.asarray(math.pi, x.dtype))
    np.copyto(r, x, where=np.isnan(x))
    return r


def _angle_meta(x):
    d = x.dtype
    if d.kind == "c":
        return tuple(x.shape), mf.real_dtype(d)
    return mf.unary_float(x)


defop("angle(Tensor self) -> Tensor", impl=_angle, meta=_angle_meta, methods=("angle",),
      cpu_impl=_np_angle,
      accepts="iufc",
      info=OpInfo(ref=lambda x: np.angle(x).astype(
          np.float32 if x.dtype in (np.complex64, np.float32) or x.dtype.kind in "iu"
          else np.float64), dtypes=FLOATING,
          samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),))]))
