"""Counting values into bins: ``bincount`` and ``histc``, as PyTorch's.

``bincount(x, weights=None, minlength=0)`` counts each value of a 1-d tensor of
non-negative integers (sums its weights): ``max(max(x) + 1, minlength)`` bins, a size that
depends on the values (tagged ``dynamic_output_shape``: no Meta function, as for
``nonzero``).  The counts are int64; summed weights are float32 for float32 weights and
float64 for any other (the real part of complex ones), as PyTorch's -- and, as PyTorch's, an
empty input gives int64 zeros, weights or not.

``histc(x, bins=100, min=0, max=0)`` counts the elements of a floating tensor in ``bins``
equal bins over ``[min, max]`` (the last bin closed), in ``x``'s dtype; elements outside
(and NaN) are left out.  Where ``min == max`` the range is the data's (read from the
backend), widened by 1 on each side if that is one point.  An element's bin is PyTorch's
``trunc((x - min) * bins / (max - min))`` computed in ``x``'s dtype, so elements on or near
the edges fall where PyTorch puts them.  A range that stays one point when widened (one
value of 1e30) raises; PyTorch's then divides by zero (a documented difference).

Neither op is differentiable (``bincount``'s weights have no derivative in PyTorch either:
asking for one raises).  Both sum with ``put`` (Note [Scatters without scatter functions]
in ops/_segment.py), lazily on Dask once the size or range is known.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes as dt

from . import _segment
from ._cpu_kernels import register_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATS, INTS

__all__: list[str] = []


def _bincount_checks(x, weights, minlength) -> None:
    d = dt.as_dtype(x.dtype)
    if d.kind not in "iu":
        raise TypeError(f"bincount: expected a 1-d tensor of non-negative integers, got "
                        f"{x.ndim}-d {d.name}")
    if x.ndim != 1:
        raise ValueError(f"bincount: expected a 1-d tensor of non-negative integers, got "
                         f"shape {tuple(x.shape)}")
    if minlength < 0:
        raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
    if weights is not None and (weights.ndim != 1 or weights.shape[0] != x.shape[0]):
        raise ValueError(f"bincount: weights must be 1-d and as long as the input "
                         f"({x.shape[0]}), got shape {tuple(weights.shape)}")


def _bincount(xp, x, weights=None, minlength=0):
    if minlength >= 0 and x.ndim == 1 and not x.shape[0] and \
            dt.as_dtype(x.dtype).kind in "iu":  # PyTorch's: int64 zeros, whatever the
        return xp.zeros((minlength,), dtype=xp.int64)  # weights
    _bincount_checks(x, weights, minlength)
    n = x.shape[0]
    if bool(xp.any(x < 0)):
        raise ValueError(f"bincount: expected non-negative integers, got {int(xp.min(x))}")
    size = max(int(xp.max(x)) + 1, minlength)
    positions = xp.astype(x, xp.int64)
    if weights is None:
        values = xp.ones((n,), dtype=xp.int64)
    else:
        wd = dt.as_dtype(weights.dtype)
        values = xp.real(weights) if wd.kind == "c" else weights
        out = xp.float32 if wd is dt.float32 else xp.float64
        values = values if values.dtype == out else xp.astype(values, out)
    return _segment.put(xp, xp.zeros((size,), dtype=values.dtype), positions, values, "sum")


def _bincount_ref(x, weights=None, minlength=0):
    if weights is not None and x.size:
        weights = np.real(weights).astype(np.float32 if weights.dtype == np.float32
                                          else np.float64)
    out = np.bincount(x, weights if x.size else None, minlength)
    return out if weights is not None and x.size else out.astype(np.int64)


def _bincount_samples(dtype, rng):
    x = np.abs(make_array((7,), dtype, rng)).astype(dtype.numpy)
    w = make_array((7,), dt.float32, rng)
    return [SampleInput((x,)), SampleInput((x,), {"minlength": 12}),
            SampleInput((x,), {"weights": w}),
            SampleInput((x,), {"weights": w.astype(np.float64), "minlength": 2}),
            SampleInput((np.zeros(0, dtype.numpy),), {"minlength": 3})]


def _bincount_errors():
    yield ErrorInput(SampleInput((np.asarray([1, -2, 3]),)), ValueError,
                     "bincount: expected non-negative integers, got -2")
    yield ErrorInput(SampleInput((np.asarray([[1, 2]]),)), ValueError,
                     r"bincount: expected a 1-d tensor of non-negative integers, got shape "
                     r"\(1, 2\)")
    yield ErrorInput(SampleInput((np.asarray([1.0, 2.0]),)), TypeError,
                     "bincount: expected tensors of dtype int8, .*; got float64")
    yield ErrorInput(SampleInput((np.asarray([1, 2]),), {"minlength": -1}), ValueError,
                     "bincount: minlength must be non-negative, got -1")
    yield ErrorInput(SampleInput((np.asarray([1, 2]),), {"weights": np.ones(3)}),
                     ValueError, "bincount: weights must be 1-d and as long as the input")


defop("bincount(Tensor self, Tensor? weights=None, int minlength=0) -> Tensor",
      impl=_bincount, tags=("dynamic_output_shape",), methods=("bincount",),
      promote_scalars=False,
      info=OpInfo(ref=_bincount_ref, dtypes=INTS, samples=_bincount_samples,
                  errors=_bincount_errors, differentiable=False))


def _histc_range(xp, x, bins, lo, hi):
    """PyTorch's ``histc_select_outer_bin_edges``, with its checks."""
    d = dt.as_dtype(x.dtype)
    if d.kind != "f":
        raise TypeError(f"histc: expected a floating-point tensor, got {d.name}")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {bins}")
    lo, hi = float(lo), float(hi)
    if lo == hi and math.prod(x.shape):
        lo, hi = float(xp.min(x)), float(xp.max(x))
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"histc: range of [{lo}, {hi}] is not finite")
    if not lo < hi:
        raise ValueError(f"histc: max must be larger than min, got min={lo}, max={hi}")
    return lo, hi


def _histc(xp, x, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's argument names)
    lo, hi = _histc_range(xp, x, bins, min, max)
    x = xp.reshape(x, (-1,))
    lo_t, hi_t = (xp.asarray(v, dtype=x.dtype) for v in (lo, hi))  # the edges, in x's dtype
    inside = (x >= lo_t) & (x <= hi_t)  # NaN is not
    pos = xp.astype(xp.trunc(xp.where(inside, (x - lo_t) * bins / (hi_t - lo_t), 0.0)),
                    xp.int64)
    pos = xp.where(pos >= bins, bins - 1, pos)  # the last bin is closed
    counts = xp.astype(inside, x.dtype)
    return _segment.put(xp, xp.zeros((bins,), dtype=x.dtype), pos, counts, "sum")


def _histc_meta(x, bins=100, min=0, max=0):  # noqa: A002
    if x.dtype.kind != "f":
        raise TypeError(f"histc: expected a floating-point tensor, got {x.dtype.name}")
    if bins <= 0:
        raise ValueError(f"histc: bins must be positive, got {bins}")
    return (bins,), x.dtype


def _histc_ref(x, bins=100, min=0, max=0):  # noqa: A002
    lo, hi = float(min), float(max)
    if lo == hi and x.size:
        lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    return np.histogram(x, bins, (lo, hi))[0].astype(x.dtype)


def _histc_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    return [SampleInput((x,)), SampleInput((x,), {"bins": 5}),
            SampleInput((x,), {"bins": 4, "min": -1.0, "max": 1.0}),
            SampleInput((np.full(3, 2.0, dtype.numpy),), {"bins": 4}),
            SampleInput((np.zeros(0, dtype.numpy),), {"bins": 3})]


def _histc_errors():
    x = np.asarray([1.0, 2.0])
    yield ErrorInput(SampleInput((x,), {"bins": 0}), ValueError,
                     "histc: bins must be positive, got 0")
    yield ErrorInput(SampleInput((x,), {"bins": 4, "min": 2.0, "max": 1.0}), ValueError,
                     "histc: max must be larger than min")
    yield ErrorInput(SampleInput((np.asarray([1.0, np.nan]),)), ValueError,
                     r"histc: range of \[nan, nan\] is not finite")
    yield ErrorInput(SampleInput((np.asarray([1, 2]),)), TypeError,
                     "histc: expected a floating-point tensor, got int64")


defop("histc(Tensor self, int bins=100, Scalar min=0, Scalar max=0) -> Tensor",
      impl=_histc, meta=_histc_meta, methods=("histc",), promote_scalars=False,
      info=OpInfo(ref=_histc_ref, dtypes=FLOATS, samples=_histc_samples,
                  errors=_histc_errors, differentiable=False))


# Note [Histograms on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py) count with
# ``np.bincount``: ``bincount`` of a non-empty 1-d integer tensor is NumPy's own, which
# raises for a negative value (the call then goes to the generic kernel and its error), its
# float64 sums of float32 weights cast to float32; ``histc`` computes each element's bin by
# the generic impl's formula, in the tensor's dtype, for the elements inside the range only,
# and counts them.  Empty inputs, other dtypes, complex weights and bad arguments take the
# generic kernels.

_INT_KINDS = ("i", "u")
_smallest, _largest = np.minimum.reduce, np.maximum.reduce
#: np.bincount's C function, without its ``__array_function__`` dispatcher frame
_count = getattr(np.bincount, "_implementation", np.bincount)


def _np_bincount(x, weights=None, minlength=0):
    if (x.ndim != 1 or not x.shape[0] or x.dtype.kind not in _INT_KINDS
            or x.dtype == np.uint64 or type(minlength) is not int or minlength < 0):
        return None
    if weights is None:
        try:
            return _count(x, None, minlength)
        except ValueError:  # a negative value
            return None
    w = getattr(weights, "_data", None)  # a Tensor argument after the first comes as it is
    if (type(w) is not np.ndarray or w.dtype.kind != "f" or w.ndim != 1
            or w.shape[0] != x.shape[0]):
        return None
    try:
        out = _count(x, w, minlength)
    except ValueError:
        return None
    return out.astype(np.float32) if w.dtype == np.float32 else out


def _np_histc(x, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's argument names)
    if x.dtype.kind != "f" or type(bins) is not int or bins <= 0 or not x.size:
        return None
    xf = x.reshape(-1)
    try:
        lo, hi = float(min), float(max)
    except TypeError:
        return None
    inside = None
    if lo == hi:  # the data's range: every element is inside (NaN makes it not finite)
        lo, hi = float(_smallest(xf)), float(_largest(xf))
        inside = xf
        if lo == hi:
            lo, hi = lo - 1.0, hi + 1.0
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        return None
    scalar = x.dtype.type
    lo_t, hi_t = scalar(lo), scalar(hi)
    if inside is None:
        inside = xf[(xf >= lo_t) & (xf <= hi_t)]  # NaN is not
    pos = inside - lo_t
    pos *= bins
    pos /= hi_t - lo_t
    counts = _count(pos.astype(np.int64), None, bins + 1)  # (>= 0: astype truncates)
    counts[bins - 1] += counts[bins]  # the last bin is closed: hi counts in it
    return counts[:bins].astype(x.dtype)


register_direct(CATALOGUE["aten::bincount"].functional[0], _np_bincount)
register_direct(CATALOGUE["aten::histc"].functional[0], _np_histc)
