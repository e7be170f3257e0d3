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
from mdtensor.dispatch.keys import DispatchKey

from . import _meta_fns as mf
from ._cpu_kernels import register_cpu
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

#: NumPy dtype character -> (max, min), 0-d arrays of that dtype (by character: a dtype's
#: hash is computed on every lookup)
_FINITE_RANGE = {c: (np.asarray(np.finfo(c).max), np.asarray(np.finfo(c).min))
                 for c in "efd"}
#: NumPy's clip ufunc (``_core.umath``, NumPy >= 2), without np.clip's Python wrapper
_CLIP = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)
#: np.putmask's C function, without its ``__array_function__`` dispatcher (0.25 us)
_putmask = getattr(np.putmask, "_implementation", np.putmask)


def _np_nan_to_num(xp, x, nan=0.0, posinf=None, neginf=None):
    if x.dtype.kind != "f" or not x.ndim:  # (a ufunc gives a 0-d array a scalar)
        return _nan_to_num(xp, x, nan, posinf, neginf)
    bounds = _FINITE_RANGE.get(x.dtype.char)
    if bounds is None:  # (another floating dtype NumPy has)
        info = np.finfo(x.dtype)
        bounds = _FINITE_RANGE[x.dtype.char] = (np.asarray(info.max), np.asarray(info.min))
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


_ntn = defop("nan_to_num(Tensor self, float? nan=0.0, float? posinf=None, float? neginf=None)"
             " -> Tensor", impl=_nan_to_num, structured=True, meta=mf.same,
             methods=("nan_to_num",), cpu_impl=_np_nan_to_num, promote_scalars=False,
             info=OpInfo(ref=lambda x, nan=0.0, posinf=None, neginf=None: np.nan_to_num(
                 x, nan=nan, posinf=posinf, neginf=neginf), dtypes=ALL,
                 samples=_nan_samples))


# Note [One-frame kernels of nan_to_num and angle]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The commonest calls -- ``nan_to_num(x)`` with the default bounds, ``angle(x)`` of a real
# floating tensor -- are computed in a CPU kernel's own frame (Note [Hand-written CPU
# kernels] in ops/_cpu_kernels.py), registered above the kernel made from the ``cpu_impl``,
# which takes every other call: that kernel's frame and the impl's cost a small call a
# frame more.  ``nan_to_num``'s is ``_np_nan_to_num``'s computation with the default
# bounds, for the dtypes whose finite range ``_FINITE_RANGE`` holds (``md.nan_to_num(x)``,
# 16x16 float32: 22.8K -> 21.4K instructions); ``angle``'s is ``_real_angle``'s, with the
# constants of its dtype (``md.angle(x)`` requiring grad: 45.7K -> 31.9K, with
# ``_real_angle``'s three ufuncs).


def _cpu_nan_to_num(generic):
    def kernel(a, nan=0.0, posinf=None, neginf=None):
        x = a._data
        bounds = _FINITE_RANGE.get(x.dtype.char)
        if (bounds is not None and x.ndim and posinf is None and neginf is None
                and type(nan) is float and nan == 0.0):
            r = _CLIP(x, bounds[1], bounds[0])
            _putmask(r, np.isnan(r), nan)
            return a._device.wrap(r)
        return generic(a, nan, posinf, neginf)
    return kernel


if _CLIP is not None:
    register_cpu(_ntn.functional[0], _cpu_nan_to_num, DispatchKey.CPU)


def _angle(xp, x):
    d = dt.as_dtype(x.dtype)
    if d.kind == "c":
        return xp.atan2(xp.imag(x), xp.real(x))
    x = to_float(xp, x) if d.kind in "biu" else x
    zero = xp.zeros_like(x)
    out = xp.where(x < 0, xp.full_like(x, math.pi), zero)
    return xp.where(xp.isnan(x), x, out)


#: dtype character -> (1, pi), 0-d arrays of that dtype: the constants of ``_real_angle``
#: (a ufunc converts a Python or NumPy scalar operand on every call)
_ANGLE_CONSTANTS = {c: (np.asarray(1, c), np.asarray(math.pi, c)) for c in "efd"}


def _real_angle(x, one, pi):
    """angle of a real floating n-d array: ``pi * (1 - heaviside(x, 1))``, pi for the
    negative numbers, 0 for the others (-0 too: ``atan2(0, x)`` is pi there), NaN for NaN
    (``heaviside`` keeps it) -- three ufuncs into one array, against ``less``,
    ``multiply``, ``isnan`` and a ``copyto`` of the NaNs (25.9K -> 20.7K instructions on
    16x16 float32)."""
    h = np.heaviside(x, one)
    np.subtract(one, h, h)
    return np.multiply(h, pi, h)


def _np_angle(xp, x):
    """angle on NumPy: ``atan2`` of the parts' views for complex numbers, ``_real_angle``
    for real floats."""
    kind = x.dtype.kind
    if kind == "c":
        return np.arctan2(x.imag, x.real)
    constants = _ANGLE_CONSTANTS.get(x.dtype.char)
    if constants is None or not x.ndim:  # (a ufunc gives a 0-d array a scalar)
        return _angle(xp, x)
    return _real_angle(x, *constants)


def _angle_meta(x):
    d = x.dtype
    if d.kind == "c":
        return tuple(x.shape), mf.real_dtype(d)
    return mf.unary_float(x)


_ad = defop("angle(Tensor self) -> Tensor", impl=_angle, meta=_angle_meta, methods=("angle",),
            cpu_impl=_np_angle,
            accepts="iufc",
            info=OpInfo(ref=lambda x: np.angle(x).astype(
                np.float32 if x.dtype in (np.complex64, np.float32) or x.dtype.kind in "iu"
                else np.float64), dtypes=FLOATING,
                samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),))]))


_heaviside, _subtract, _multiply = np.heaviside, np.subtract, np.multiply


def _cpu_angle(generic):
    # Note [One-frame kernels of nan_to_num and angle]: ``_real_angle`` inlined
    def kernel(a):
        x = a._data
        constants = _ANGLE_CONSTANTS.get(x.dtype.char)
        if constants is not None and x.ndim:
            one, pi = constants
            h = _heaviside(x, one)
            _subtract(one, h, h)
            return a._device.wrap(_multiply(h, pi, h))
        return generic(a)
    return kernel


register_cpu(_ad.functional[0], _cpu_angle, DispatchKey.CPU)
