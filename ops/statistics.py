"""Order statistics and NaN-aware reductions, as PyTorch's: ``topk``, ``kthvalue``,
``median``, ``quantile``, ``nansum``, ``nanmean``, ``cummax``/``cummin``, ``logcumsumexp``.

NaN is the largest value wherever an order is needed, as PyTorch: ``topk`` puts NaNs first,
a slice holding a NaN has NaN as its median, maximum and quantiles.  ``topk``,
``kthvalue`` and ``median`` with ``dim`` return ``(values, indices)``; of equal values the
sort is stable.  ``quantile``, ``nansum`` and ``nanmean`` are CompositeImplicitAutograd
(sort, take, where, sum), so on the backends without a kernel of their own their gradients
come from those ops; their CPU kernels and the other ops have rules in
``ops/statistics_derivatives.py``.

Note [Scans in log steps]
~~~~~~~~~~~~~~~~~~~~~~~~~
The Array API has ``cumulative_sum`` and ``cumulative_prod`` but no running maximum nor
running ``logaddexp``.  ``cummax`` and ``logcumsumexp`` are inclusive scans of associative
operations, computed as Hillis and Steele's scan: ``log2(n)`` steps, each combining every
element with the one ``2**k`` places before it -- whole-array ops on every backend, lazy on
Dask.  ``cummax`` scans pairs ``(value, index)`` under the order "NaN above everything, then
by value, then the later index" (PyTorch's: the index of the last maximum, and a NaN stays
the maximum once seen); maximum under a total order is associative.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import namespaces as _namespaces
from mdtensor.tensors.tensor import Tensor

from . import _meta_fns as mf
from ._composite import names_op
from ._cpu_kernels import register_cpu, register_cpu_kernel
from ._cpu_reductions import (
    FLOAT_CHARS,
    INT_CHARS,
    REAL_CHARS,
    register_cpu_reduction,
    register_cpu_scan,
    without_autograd,
)
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATS, REAL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls


def _device(a):
    dev = getattr(a, "device", None)
    if dev is None:
        from array_api_compat import device

        dev = device(a)
    return dev


def _as_1d(x):
    return x if x.ndim else x[None]


def _dim_size(name, shape, dim) -> int:
    d = mf.normalize_axis(name, dim, len(shape))
    return (tuple(shape) or (1,))[d]


# -- topk, kthvalue, median ------------------------------------------------------------------


def _topk_check(x, k, dim):
    n = _dim_size("topk", x.shape, dim)
    if not 0 <= k <= n:
        raise IndexError(f"topk: selected index k out of range (k={k}, size {n} along "
                         f"dimension {dim})")


def _take_first(xp, a, k, d):
    return a[(slice(None),) * d + (slice(0, k), Ellipsis)]


def _topk(xp, x, k, dim=-1, largest=True, sorted=True):
    _topk_check(x, k, dim)
    if not x.ndim:  # PyTorch's: the element itself, for k 0 too
        return x, xp.zeros((), dtype=xp.int64, device=_device(x))
    x1 = _as_1d(x)
    d = dim % x1.ndim
    idx = xp.argsort(x1, axis=d, descending=largest, stable=True)
    idx = _take_first(xp, idx, k, d)
    values = xp.take_along_axis(x1, idx, axis=d)
    idx = xp.astype(idx, xp.int64)
    if not x.ndim:
        return xp.reshape(values, ()), xp.reshape(idx, ())
    return values, idx


def _topk_meta(x, k, dim=-1, largest=True, sorted=True):
    _topk_check(x, k, dim)
    shape = list(x.shape)
    if shape:
        shape[dim % len(shape)] = k
    return (tuple(shape), x.dtype), (tuple(shape), dt.int64)  # 0-d: the element


def _kth_check(name, x, k, dim):
    n = _dim_size(name, x.shape, dim)
    if not 1 <= k <= n:
        raise IndexError(f"{name}: selected number k out of range for dimension {dim} "
                         f"(k={k}, size {n})")


def _select(xp, x, position, dim, keepdim):
    """``(values, indices)``: the element at ``position`` of each slice along ``dim`` in
    sorted order (NaNs last)."""
    x1 = _as_1d(x)
    d = dim % x1.ndim
    idx = xp.argsort(x1, axis=d, stable=True)
    pick = idx[(slice(None),) * d + (slice(position, position + 1), Ellipsis)]
    values = xp.take_along_axis(x1, pick, axis=d)
    pick = xp.astype(pick, xp.int64)
    if not keepdim or not x.ndim:
        shape = tuple(s for i, s in enumerate(x1.shape) if i != d) if x.ndim else ()
        values, pick = xp.reshape(values, shape), xp.reshape(pick, shape)
    return values, pick


def _kthvalue(xp, x, k, dim=-1, keepdim=False):
    _kth_check("kthvalue", x, k, dim)
    return _select(xp, x, k - 1, dim, keepdim)


def _reduce_pair_meta(name, check=None):
    def meta(x, *args, **kwargs):
        dim = kwargs.get("dim", args[1] if len(args) > 1 else -1) if check else \
            (args[0] if args else kwargs.get("dim", -1))
        keepdim = kwargs.get("keepdim", args[2] if check and len(args) > 2 else
                             args[1] if not check and len(args) > 1 else False)
        if check:
            check(name, x, args[0] if args else kwargs["k"], dim)
        else:
            mf.normalize_axes(name, dim, x.ndim)
        shape, _ = mf.reduction(x, dim, keepdim)
        return (shape, x.dtype), (shape, dt.int64)
    return meta


def _nan_first_position(xp, x1, d, has_nan):
    """The index of the first NaN along ``d`` (where a slice has one)."""
    n = x1.shape[d]
    ar = xp.reshape(xp.arange(n, dtype=xp.int64, device=_device(x1)),
                    tuple(n if i == d else 1 for i in range(x1.ndim)))
    big = xp.where(xp.isnan(x1), ar, xp.full_like(ar, n))
    return xp.min(big, axis=d, keepdims=True)


def _median_dim(xp, x, dim=-1, keepdim=False):
    n = _dim_size("median", x.shape, dim)
    if n == 0:
        raise IndexError(f"median: cannot compute the median of an empty dimension "
                         f"({dim})")
    values, idx = _select(xp, x, (n - 1) // 2, dim, True)
    if dt.as_dtype(x.dtype).kind == "f":  # a NaN in the slice is its median
        x1 = _as_1d(x)
        d = dim % x1.ndim
        has_nan = xp.any(xp.isnan(x1), axis=d, keepdims=True)
        values = xp.where(has_nan, xp.asarray(float("nan"), dtype=x.dtype), values)
        idx = xp.where(has_nan, _nan_first_position(xp, x1, d, has_nan), idx)
    if not keepdim or not x.ndim:
        x1 = _as_1d(x)
        d = dim % x1.ndim
        shape = tuple(s for i, s in enumerate(x1.shape) if i != d) if x.ndim else ()
        values, idx = xp.reshape(values, shape), xp.reshape(idx, shape)
    return values, idx


def _median(xp, x):
    flat = xp.reshape(x, (-1,))
    if flat.shape[0] == 0:
        return xp.asarray(float("nan"), dtype=x.dtype) if dt.as_dtype(x.dtype).kind == "f" \
            else _raise_empty_median()
    return _median_dim(xp, flat, 0, False)[0]


def _raise_empty_median():
    raise IndexError("median: cannot compute the median of an empty integer tensor")


def _median_dim_meta(x, dim=-1, keepdim=False):
    if _dim_size("median", x.shape, dim) == 0:
        raise IndexError(f"median: cannot compute the median of an empty dimension "
                         f"({dim})")
    shape, _ = mf.reduction(x, dim, keepdim)
    return (shape, x.dtype), (shape, dt.int64)


def _samples_2d(dtype, rng, kw_list):
    x = make_array((3, 5), dtype, rng)
    return [SampleInput((x,) + args, kw, name=f"{args}{kw}") for args, kw in kw_list]


def _ties_ok_ref(fn):
    return fn


def _np_topk(x, k, dim=-1, largest=True, sorted=True):
    x1 = x.reshape(x.shape or (1,))
    key = -x1 if largest and x1.dtype.kind != "b" else x1
    if largest and x1.dtype.kind == "b":
        key = ~x1
    idx = np.argsort(key, axis=dim, kind="stable")
    if largest and x1.dtype.kind == "f":  # NaN first, as PyTorch
        idx = np.argsort(np.where(np.isnan(x1), -np.inf, -x1), axis=dim, kind="stable")
    idx = np.take(idx, np.arange(k), axis=dim)
    vals = np.take_along_axis(x1, idx, axis=dim)
    return (vals.reshape(()) if not x.ndim else vals,
            idx.reshape(()) if not x.ndim else idx)


_tk = defop("topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> "
            "(Tensor values, Tensor indices)", impl=_topk, meta=_topk_meta, methods=("topk",),
            accepts="iuf",  # PyTorch's topk refuses bools
            info=OpInfo(ref=_np_topk, dtypes=REAL[1:], samples=lambda d, rng: _samples_2d(
                d, rng, [((2,), {}), ((3, 0), {}), ((2,), {"largest": False}),
                         ((0,), {})]),
                errors=lambda: [ErrorInput(SampleInput((np.zeros(3), 4)), IndexError,
                                           "topk: selected index k out of range")]))


def _np_kth(x, k, dim=-1, keepdim=False):
    x1 = x.reshape(x.shape or (1,))
    idx = np.argsort(x1, axis=dim, kind="stable")
    pick = np.take(idx, [k - 1], axis=dim)
    vals = np.take_along_axis(x1, pick, axis=dim)
    if not keepdim or not x.ndim:
        vals, pick = np.squeeze(vals, dim), np.squeeze(pick, dim)
        if not x.ndim:
            vals, pick = vals.reshape(()), pick.reshape(())
    return vals, pick


defop("kthvalue(Tensor self, int k, int dim=-1, bool keepdim=False) -> "
      "(Tensor values, Tensor indices)", impl=_kthvalue,
      meta=_reduce_pair_meta("kthvalue", _kth_check), methods=("kthvalue",),
      info=OpInfo(ref=_np_kth, dtypes=REAL, samples=lambda d, rng: _samples_2d(
          d, rng, [((2,), {}), ((1, 0), {"keepdim": True}), ((5,), {})]),
          errors=lambda: [ErrorInput(SampleInput((np.zeros(3), 0)), IndexError,
                                     "kthvalue: selected number k out of range")]))


def _np_median(x, dim=None, keepdim=False):
    if dim is None:
        flat = np.sort(x.reshape(-1))
        return flat[(flat.size - 1) // 2] if not np.isnan(flat).any() else np.float64("nan")
    return _np_kth(np.where(np.isnan(x), np.inf, x) if x.dtype.kind == "f" else x,
                   (x.shape[dim] + 1) // 2, dim, keepdim)[0]


_md = defop("median(Tensor self) -> Tensor", impl=_median, meta=lambda x: ((), x.dtype),
            methods=("median",),
            info=OpInfo(ref=lambda x: np.asarray(_np_median(x), dtype=x.dtype), dtypes=REAL,
                        samples=lambda d, rng: [SampleInput((make_array((3, 4), d, rng),)),
                                                SampleInput((make_array((5,), d, rng),))]))
defop("median.dim(Tensor self, int dim, bool keepdim=False) -> "
      "(Tensor values, Tensor indices)", impl=_median_dim, meta=_median_dim_meta, decl=_md)


# Note [Order statistics on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels of topk, kthvalue and median take their values from a sorted copy and their
# indices from ``argsort``, both stable along the dimension (NumPy's ``take_along_axis``
# costs 6 us on 16x16, three sorts' worth): the two orders agree element for element, ties
# and NaNs included.  A descending order (topk's largest) is the ascending stable order of
# the slice reversed, reversed again: ties keep their first-come order and NaNs come first,
# as PyTorch's.  The whole-tensor median needs no indices: it sorts a small flat copy, and
# partitions a large one.  The NaN rules (a slice holding a NaN has it as its median) cost
# one reduction when no NaN is there (none for the whole-tensor median, whose NaNs sort last).


def _np_sorted(x, d):
    """``(values, indices)`` of ``x`` sorted stably along ``d`` (Note [Order statistics on
    NumPy])."""
    order = x.argsort(d, kind="stable")
    values = x.copy()
    values.sort(d, kind="stable")
    return values, order


def _np_dim(x, dim):
    """``dim`` of ``x`` as a non-negative int; None out of range (the generic kernel's)."""
    d = dim + x.ndim if dim < 0 else dim
    return d if 0 <= d < x.ndim else None


def _np_topk_kernel(x, k, dim=-1, largest=True, sorted=True):
    d = _np_dim(x, dim)
    if d is None or not 0 <= k <= x.shape[d]:
        return None
    head = (slice(None),) * d
    if not largest:
        values, order = _np_sorted(x, d)
        return values[head + (slice(0, k),)], order[head + (slice(0, k),)]
    # the last k of the reversed slice's ascending order, last first
    n = x.shape[d]
    values, order = _np_sorted(x[head + (slice(None, None, -1),)], d)
    last = head + (slice(None, n - 1 - k if k < n else None, -1),)
    return values[last], (n - 1) - order[last]


def _np_kthvalue_kernel(x, k, dim=-1, keepdim=False):
    d = _np_dim(x, dim)
    if d is None or not 1 <= k <= x.shape[d]:
        return None
    values, order = _np_sorted(x, d)
    at = (slice(None),) * d + ((slice(k - 1, k),) if keepdim else (k - 1,))
    return values[at], order[at]


def _np_median_dim_kernel(x, dim, keepdim=False):
    d = _np_dim(x, dim)
    if d is None or not x.shape[d]:
        return None
    n = x.shape[d]
    values, order = _np_sorted(x, d)
    head = (slice(None),) * d
    at = head + (slice((n - 1) // 2, (n + 1) // 2),)
    picked, order = values[at], order[at]
    if x.dtype.kind == "f":
        last = values[head + (slice(n - 1, n),)]  # NaN where the slice holds one
        nan = last != last
        if np.logical_or.reduce(nan, None):
            picked = np.where(nan, last, picked)
            order = np.where(nan, (x != x).argmax(d, None, keepdims=True), order)
    if not keepdim:
        picked, order = picked.squeeze(d), order.squeeze(d)
    return picked, order


def _np_median_kernel(x):
    n = x.size
    if not n:
        return None
    flat = x.flatten()
    kth = (n - 1) // 2
    # a NaN sorts last, so the last element tells whether there is one: a small copy is
    # sorted (one call), a large one partitioned at the median and at the end
    if n <= _SORTED_MEDIAN:
        flat.sort()
    elif x.dtype.kind == "f":
        flat.partition((kth, n - 1))
    else:
        flat.partition(kth)
    # (the result a 0-d view, ``flat[..., i]``: a NumPy scalar would be wrapped through
    # ``asarray``, 0.8K instructions more)
    if x.dtype.kind == "f":
        top = flat[n - 1]
        if top != top:
            return flat[..., n - 1]
    return flat[..., kth]


#: the size up to which the whole-tensor median sorts its copy rather than partitioning it:
#: on small tensors sorting is one cheap call, where partitioning and a NaN check are two
_SORTED_MEDIAN = 1024


register_cpu_kernel(_tk.functional[0], _np_topk_kernel, INT_CHARS + FLOAT_CHARS)
register_cpu_kernel(CATALOGUE["aten::kthvalue"].functional[0], _np_kthvalue_kernel, REAL_CHARS)
register_cpu_kernel(_md.functional[0], _np_median_kernel, REAL_CHARS)
register_cpu_kernel(_md.functional[1], _np_median_dim_kernel, REAL_CHARS)


# -- quantile ------------------------------------------------------------------------------


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile_check(x, q_values, dim, interpolation):
    if dt.as_dtype(x.dtype).kind != "f":
        raise TypeError(f"quantile: input tensor must be either float or double dtype, got "
                        f"{dt.as_dtype(x.dtype).name}")
    if interpolation not in _INTERPOLATIONS:
        raise ValueError(f"quantile: interpolation must be one of {', '.join(_INTERPOLATIONS)}"
                         f", got '{interpolation}'")
    if dim is not None:
        mf.normalize_axes("quantile", dim, x.ndim)
    if 0 in tuple(x.shape):  # any empty input, as PyTorch (NumPy: an empty reduced axis)
        raise IndexError("quantile: input tensor must be non-empty")
    for q in q_values:
        if not 0 <= q <= 1:
            raise ValueError(f"quantile: q values must be in the range [0, 1], got {q}")


def quantile_points(qv, n, interpolation) -> list:
    """``(lo, hi, w)`` of each quantile ``qv`` of ``n`` sorted values: the order statistics
    it takes and the weight of ``hi`` in their blend, None where an interpolation picks one
    (lower, higher, nearest).  Linear and midpoint blend even at an order statistic, as
    PyTorch's ``lerp`` (``lo == hi``, ``w`` 0 or 0.5): an infinite one gives NaN there
    (``inf - inf``), as in PyTorch and NumPy."""
    points = []
    for qq in qv:
        pos = qq * (n - 1)
        lo, hi = math.floor(pos), math.ceil(pos)
        w = pos - lo
        if interpolation == "lower":
            hi, w = lo, None
        elif interpolation == "higher":
            lo, w = hi, None
        elif interpolation == "nearest":
            lo = hi = int(round(pos))  # half to even, as PyTorch's
            w = None
        elif interpolation == "midpoint":
            w = 0.5
        points.append((lo, hi, w))
    return points


def quantile_values(x, q) -> list:
    """The quantiles of Tensor ``x`` that ``q`` (a Tensor or a float) asks for, as the
    positions take them: a float in the input's dtype, as PyTorch computes with it after
    checking its range as given (5e-324 is 0 for a float32 input)."""
    if isinstance(q, Tensor):
        return [float(v) for v in q.reshape((-1,)).tolist()]
    return [float(np.dtype(x.dtype.numpy).type(q))]


def _quantile_q_values(x, q) -> list:
    """``q``'s values as given, checked to be a scalar or a vector of ``x``'s dtype."""
    if not isinstance(q, Tensor):
        return [float(q)]
    if q.ndim > 1:
        raise ValueError(f"quantile: q must be a scalar or 1D tensor, got a tensor of "
                         f"dimension {q.ndim}")
    if q.dtype is not x.dtype:
        raise TypeError(f"quantile: q tensor must be same dtype as the input tensor, got "
                        f"{q.dtype.name} and {x.dtype.name}")
    return quantile_values(x, q)


def quantile_shape(x_shape, n_q, dim, keepdim) -> tuple:
    """The shape of ``quantile``'s result: ``n_q`` quantiles first (None: a scalar ``q``),
    then ``x``'s kept dimensions."""
    if dim is None:
        shape = (1,) * len(x_shape) if keepdim else ()
    elif not x_shape:
        shape = ()
    else:
        d = dim % len(x_shape)
        shape = (tuple(x_shape[:d]) + (1,) * keepdim + tuple(x_shape[d + 1:]))
    return shape if n_q is None else (n_q,) + shape


def _quantile(x, q, dim=None, keepdim=False, *, interpolation="linear"):
    """CompositeImplicitAutograd: sort, take the two neighbouring order statistics, blend."""
    q_is_tensor = isinstance(q, Tensor)
    qv = _quantile_q_values(x, q)
    _quantile_check(x, qv, dim, interpolation)
    if not q_is_tensor:  # checked as given, then taken in the dtype
        qv = quantile_values(x, q)
    src = aten.reshape(x, (-1,)) if dim is None else (x if x.ndim else aten.reshape(x, (1,)))
    d = 0 if dim is None else dim % src.ndim
    n = src.shape[d]
    ordered = aten.sort(src, axis=d)  # NaNs last
    has_nan = aten.any(aten.isnan(src), d, True)
    outs = []
    q_linear = q_is_tensor and interpolation == "linear"
    q_flat = aten.reshape(q, (-1,)) if q_linear else None
    for i, (lo, hi, w) in enumerate(quantile_points(qv, n, interpolation)):
        v = v_lo = aten.narrow(ordered, d, lo, 1)
        if w is not None:  # PyTorch's lerp: from the nearer end, exact at either
            v_hi = aten.narrow(ordered, d, hi, 1)
            wt = aten.sub(aten.mul(q_flat[i], n - 1), lo) if q_linear else w  # (in q too)
            if w < 0.5:
                v = aten.add(v_lo, aten.mul(aten.sub(v_hi, v_lo), wt))
            else:
                v = aten.sub(v_hi, aten.mul(aten.sub(v_hi, v_lo), aten.sub(1, wt)
                                            if q_linear else 1 - wt))
        outs.append(aten.where(has_nan, float("nan"), v))
    # (len(q), *the kept-dims shape); one quantile is reshaped as it is (a dispatch less)
    r = outs[0] if len(outs) == 1 else aten.stack(outs, axis=0)
    n_q = len(outs) if q_is_tensor and q.ndim else None  # first, as PyTorch's
    return aten.reshape(r, quantile_shape(tuple(x.shape), n_q, dim, keepdim))


# Note [The CPU kernel of quantile]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The decomposition above costs some fifteen dispatches (30 us for a 3x5 float32 tensor,
# PyTorch 26 us).  On the CPU the same steps on the arrays -- one sort, the order
# statistics taken, blended in the input's dtype, NaN where the slice holds one (the last
# sorted value: NaNs sort last) -- are one kernel, with a derivative of its own
# (ops/statistics_derivatives.py; Note [Composite ops with CPU kernels] in
# ops/_cpu_reductions.py: the other backends keep the decomposition and its gradients).
# The weights are the decomposition's: a Python float rounded to the dtype, or for a
# Tensor ``q`` with linear interpolation ``q * (n - 1) - lo`` computed in the dtype.  Any
# case it does not take (a 0-d or empty input, another dtype, q out of range, an unknown
# interpolation or axis) goes to the decomposition, which raises the op's errors.

_FLOAT_CHARS = frozenset(FLOAT_CHARS)


def _np_quantile(x, q, dim=None, keepdim=False, interpolation="linear"):
    """quantile of the arrays (``q`` a float or a 0-d or 1-d array), or None where the
    decomposition decides (Note [The CPU kernel of quantile])."""
    if not x.ndim or not x.size or x.dtype.char not in _FLOAT_CHARS:
        return None
    is_array = isinstance(q, np.ndarray)
    if is_array:
        if q.ndim > 1 or q.dtype != x.dtype:
            return None
        qv = q.reshape(-1).tolist()
        if not all(0 <= v <= 1 for v in qv):
            return None
    elif 0 <= q <= 1:
        qv = [float(x.dtype.type(q))]  # in the dtype, as the decomposition's
    else:
        return None
    if interpolation not in _INTERPOLATIONS:
        return None
    if dim is None:
        src, d = x.reshape(-1), 0
    elif type(dim) is int and -x.ndim <= dim < x.ndim:
        src, d = x, dim % x.ndim
    else:
        return None
    n = src.shape[d]
    ordered = src.copy()  # the ndarray methods: np.sort's and np.take's wrappers cost 2 us
    ordered.sort(d)
    has_nan = np.isnan(ordered.take([n - 1], d))
    q_linear = is_array and interpolation == "linear"
    dtype = x.dtype.type
    outs = []
    for i, (lo, hi, w) in enumerate(quantile_points(qv, n, interpolation)):
        v = v_lo = ordered.take([lo], d)
        if w is not None:
            v_hi = ordered.take([hi], d)
            # in the dtype, as the decomposition's
            wt = q.reshape(-1)[i] * (n - 1) - lo if q_linear else dtype(w)
            v = v_lo + (v_hi - v_lo) * wt if w < 0.5 else v_hi - (v_hi - v_lo) * (1 - wt)
        outs.append(v)
    r = outs[0] if len(outs) == 1 else np.stack(outs)
    if has_nan.any():
        r = np.where(has_nan, dtype(np.nan), r)
    n_q = len(outs) if is_array and q.ndim else None
    return r.reshape(quantile_shape(x.shape, n_q, dim, keepdim))


def _cpu_quantile(decomposition):
    generic = without_autograd(decomposition)  # the decomposition records nothing

    def kernel(a, q, dim=None, keepdim=False, *, interpolation="linear"):
        r = _np_quantile(a._data, q._data if isinstance(q, Tensor) else q, dim, keepdim,
                         interpolation)
        if r is not None:
            return a._device.wrap(r)
        return generic(a, q, dim, keepdim, interpolation=interpolation)
    return kernel


def _quantile_ref(x, q, dim=None, keepdim=False, interpolation="linear"):
    method = {"linear": "linear", "lower": "lower", "higher": "higher",
              "midpoint": "midpoint", "nearest": "nearest"}[interpolation]
    return np.asarray(np.quantile(x, q, axis=dim, keepdims=keepdim, method=method),
                      dtype=x.dtype)


def _quantile_samples(dtype, rng):
    x = make_array((3, 5), dtype, rng)
    q = np.asarray([0.3, 0.55, 0.9], dtype=dtype.numpy)  # no kinks: pos = q * 4
    return [SampleInput((x, 0.3)), SampleInput((x, 0.5), {"dim": 0, "keepdim": True}),
            SampleInput((x, q), {"dim": 1}),
            *[SampleInput((x, 0.4), {"dim": 1, "interpolation": m})
              for m in _INTERPOLATIONS[1:]]]


def _quantile_meta(x, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The shape without q's values (a meta q has none to check)."""
    _quantile_check(x, [], dim, interpolation)
    n_q = q.shape[0] if hasattr(q, "shape") and len(q.shape) == 1 else None
    return quantile_shape(tuple(x.shape), n_q, dim, keepdim), x.dtype


_q = defop("quantile(Tensor self, Tensor q, int? dim=None, bool keepdim=False, *, "
           "str interpolation=\"linear\") -> Tensor", meta=_quantile_meta,
           composite=names_op("quantile")(_quantile), methods=("quantile",),
           info=OpInfo(ref=_quantile_ref, dtypes=FLOATS, samples=_quantile_samples,
                       errors=lambda: [ErrorInput(SampleInput((np.zeros(3), 1.5)),
                                                  ValueError, "q values must be in the range")]))
defop("quantile.scalar(Tensor self, float q, int? dim=None, bool keepdim=False, *, "
      "str interpolation=\"linear\") -> Tensor", composite=names_op("quantile")(_quantile),
      meta=_quantile_meta, decl=_q)
for _op in _q.overloads:  # Note [The CPU kernel of quantile]
    register_cpu(_op, _cpu_quantile, DispatchKey.CompositeImplicitAutograd,
                 record=lambda xp, x, q, *args, **kwargs: _np_quantile(x, q, *args, **kwargs))


# -- NaN-aware sums -----------------------------------------------------------------------------


def _nansum(x, dim=None, keepdim=False, *, dtype=None):
    """CompositeImplicitAutograd: ``sum`` with NaNs as zeros."""
    if x.dtype.kind in "fc":
        x = aten.where(aten.isnan(x), 0, x)
    return aten.sum(x, dim, keepdim, dtype=dtype)


def _nanmean(x, dim=None, keepdim=False, *, dtype=None):
    """CompositeImplicitAutograd: the sum of the non-NaN elements over their count."""
    if x.dtype.kind not in "fc":
        raise TypeError(f"nanmean: expected input to have floating point or complex dtype "
                        f"but got {x.dtype.name}")
    not_nan = aten.logical_not(aten.isnan(x))
    count = aten.sum(aten.astype(not_nan, x.dtype if x.dtype.kind == "f" else
                                 dt.as_dtype(x.dtype).real_dtype if hasattr(
                                     x.dtype, "real_dtype") else dt.float64), dim, keepdim)
    return aten.div(_nansum(x, dim, keepdim, dtype=dtype), count)


def _nan_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    if dtype.kind in "fc":
        x[0, 1] = np.nan
        x[2, :] = np.nan
    return [SampleInput((x,)), SampleInput((x,), {"dim": 1}),
            SampleInput((x,), {"dim": 0, "keepdim": True})]


_ALIASES = {"axis": "dim", "keepdims": "keepdim"}
defop("nansum(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"
      " -> Tensor", composite=names_op("nansum")(_nansum), methods=("nansum",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, dim=None, keepdim=False: np.asarray(
          np.nansum(x, axis=dim, keepdims=keepdim)), dtypes=FLOATS, samples=_nan_samples))
defop("nanmean(Tensor self, int[1]? dim=None, bool keepdim=False, *, ScalarType? dtype=None)"
      " -> Tensor", composite=names_op("nanmean")(_nanmean), methods=("nanmean",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, dim=None, keepdim=False: np.asarray(
          np.nanmean(x, axis=dim, keepdims=keepdim), dtype=x.dtype), dtypes=FLOATS,
          samples=lambda d, rng: _nan_samples(d, rng)[:1] + [
              SampleInput((make_array((3, 4), d, rng),), {"dim": 1})]))


# Note [NaN sums on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# ``np.add.reduce`` takes a mask (``where=``, with the initial value 0): the sum of the
# non-NaN elements is one reduction over ``x == x``, with no copy of ``x`` with zeros for its
# NaNs (``np.where``, 1 us on a small array).  NumPy sums each run of unmasked elements
# pairwise, as it sums a whole array.  ``nanmean`` also needs the count of non-NaN
# elements, and on an array without NaN (most arrays) that is the count of elements: so it
# sums first, and a result without NaN (one more reduction where it is not one number)
# divides by that; only a NaN among the sums -- a NaN in the input, or infinities of both
# signs -- takes the masked sum and count.


def _np_nansum(x, axis, keepdims):
    # See Note [Composite ops with CPU kernels] in ops/_cpu_reductions.py: NaNs as zeros
    return np.add.reduce(x, axis, None, None, keepdims, 0, x == x)


def _np_nanmean(x, axis, keepdims):
    # the sum of the non-NaN elements over their count; a count of 0 gives nan silently,
    # as PyTorch's
    if x.size:
        s = np.add.reduce(x, axis, None, None, True) if keepdims else np.add.reduce(x, axis)
        total = s if type(s) is not np.ndarray else np.add.reduce(s, None)
        if total == total:
            return s / (x.size // s.size)
    kept = x == x
    total = np.add.reduce(x, axis, None, None, keepdims, 0, kept)
    if axis is None and not keepdims:  # the count a Python int, dividing in x's dtype
        count = int(np.count_nonzero(kept))
        return total / count if count else total.dtype.type(math.nan)
    count = np.add.reduce(kept, axis, x.dtype, None, keepdims)
    if np.count_nonzero(count) == count.size:
        return total / count
    return np.divide(total, count, out=np.full(np.shape(total), np.nan, x.dtype),
                     where=count != 0)


for _n, _f in (("nansum", _np_nansum), ("nanmean", _np_nanmean)):
    register_cpu_reduction(CATALOGUE[f"aten::{_n}"].functional[0], _f, "fd", composite=True)


# -- scans (Note [Scans in log steps]) ----------------------------------------------------------


def _shifted(xp, a, s, d, fill):
    """``a`` moved ``s`` places along ``d`` toward the end, ``fill`` in front."""
    n = a.shape[d]
    head_shape = tuple(min(s, n) if i == d else k for i, k in enumerate(a.shape))
    head = xp.full(head_shape, fill, dtype=a.dtype, device=_device(a))
    body = a[(slice(None),) * d + (slice(0, max(n - s, 0)), Ellipsis)]
    return xp.concat([head, body], axis=d)


def _cumextreme(name, larger):
    def impl(xp, x, dim):
        x1 = _as_1d(x)
        d = mf.normalize_axis(name, dim, x.ndim) if x.ndim else \
            mf.normalize_axes(name, dim, 0) and 0
        n = x1.shape[d]
        kind = dt.as_dtype(x.dtype).kind
        idx = xp.reshape(xp.arange(n, dtype=xp.int64, device=_device(x1)),
                         tuple(n if i == d else 1 for i in range(x1.ndim)))
        idx = xp.broadcast_to(idx, tuple(x1.shape))
        vals = x1
        fill = _lowest(x.dtype, larger)
        s = 1
        while s < n:
            pv = _shifted(xp, vals, s, d, fill)
            pi = _shifted(xp, idx, s, d, 0)
            if kind == "b":
                keep_prev = (pv & ~vals) if larger else (~pv & vals)
            else:
                keep_prev = (pv > vals) if larger else (pv < vals)
            if kind in "fc":  # NaN wins, the later one of two
                keep_prev = (keep_prev & ~xp.isnan(vals)) | (xp.isnan(pv) & ~xp.isnan(vals))
            vals = xp.where(keep_prev, pv, vals)
            idx = xp.where(keep_prev, pi, idx)
            s *= 2
        if not x.ndim:
            return xp.reshape(vals, ()), xp.reshape(idx, ())
        return vals, idx
    impl.__name__ = name
    return impl


def _lowest(dtype, larger):
    d = dt.as_dtype(dtype)
    if d.kind == "b":
        return not larger
    if d.kind in "iu":
        info = np.iinfo(d.numpy)
        return int(info.min if larger else info.max)
    return float("-inf") if larger else float("inf")


def _cum_meta(name):
    def meta(x, dim):
        mf.normalize_axes(name, dim, x.ndim)
        return (tuple(x.shape), x.dtype), (tuple(x.shape), dt.int64)
    return meta


def _np_cum(larger):
    def ref(x, dim):
        x1 = x.reshape(x.shape or (1,))
        x1 = np.moveaxis(x1, dim, -1)
        vals = np.empty_like(x1)
        idx = np.zeros(x1.shape, dtype=np.int64)
        for pos in np.ndindex(*x1.shape[:-1]):
            best, bi = None, 0
            for j, v in enumerate(x1[pos]):
                better = best is None or (v != v) or (best == best and (
                    v >= best if larger else v <= best))
                if better:
                    best, bi = v, j
                vals[pos + (j,)], idx[pos + (j,)] = best, bi
        vals, idx = np.moveaxis(vals, -1, dim), np.moveaxis(idx, -1, dim)
        return vals.reshape(x.shape), idx.reshape(x.shape)
    return ref


# Note [Running extremes on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On the CPU, ``np.maximum.accumulate`` is the running maximum itself (NaN propagates, as
# PyTorch's), and the index of each is the last position ``i <= j`` where an element equals
# the running maximum at its own place (a NaN is a hit once the maximum is NaN): every new
# maximum is such a hit, so the last hit holds the current maximum, and of ties the later
# one wins, as in PyTorch.  That last hit is a running maximum of the hits' positions: one
# more scan, where the generic scan in log steps (Note [Scans in log steps]) takes ~10
# whole-array ops per step.  On small tensors a NumPy call costs more than its work, so the
# positions are cached per shape, as large as the tensor (a ufunc on operands of one shape
# skips the broadcasting machinery), and along a ``dim`` of at most 256 in uint8: the hits
# as uint8 times them is a ufunc call without a cast (bool times broadcast int64 positions,
# which buffers one, cost ~9.6K instructions on 3x5; this ~3.3K), the running maximum of
# those cast to int64 once at the end.  The two scans remain ~15K instructions each.


def _np_cumextreme(ufunc):
    accumulate = ufunc.accumulate
    running_last = np.maximum.accumulate

    def compute(x, dim):
        vals = accumulate(x, dim)
        hit = x == vals
        d = dim + x.ndim if dim < 0 else dim
        if x.dtype.kind == "f":
            hit |= x != x  # (in place: ``out=`` costs 0.5K instructions more)
        positions = _POSITIONS.get((x.shape, d))
        if positions is None:
            positions = _positions(x.shape, d)
        if positions.dtype is _UINT8:
            return vals, running_last(hit.view(_UINT8) * positions, d).astype(_INT64)
        return vals, running_last(hit * positions, d)
    return compute


_UINT8 = np.dtype(np.uint8)
_INT64 = np.dtype(np.int64)
_POSITIONS: dict = {}  # (shape, d) -> the positions along d (Note [Running extremes on NumPy])


def _positions(shape: tuple, d: int) -> np.ndarray:
    """The positions along ``d`` for a tensor of ``shape``, made and kept in ``_POSITIONS``
    (the scan looks there first, without this frame)."""
    n = shape[d]
    positions = np.arange(n, dtype=np.uint8 if n <= 256 else np.int64)
    positions = positions.reshape((n,) + (1,) * (len(shape) - d - 1))
    if math.prod(shape) <= 4096:  # small: as large as the tensor
        positions = np.ascontiguousarray(np.broadcast_to(positions, shape))
    if len(_POSITIONS) >= 64:
        _POSITIONS.clear()
    _POSITIONS[shape, d] = positions
    return positions


for _n, _larger, _u in (("cummax", True, np.maximum), ("cummin", False, np.minimum)):
    _d = defop(f"{_n}(Tensor self, int dim) -> (Tensor values, Tensor indices)",
               impl=_cumextreme(_n, _larger), meta=_cum_meta(_n), methods=(_n,),
               info=OpInfo(ref=_np_cum(_larger), dtypes=REAL, samples=lambda d, rng: [
                   SampleInput((make_array((3, 5), d, rng), 1)),
                   SampleInput((make_array((6,), d, rng), 0)),
                   SampleInput((make_array((), d, rng), 0))]))
    register_cpu_kernel(_d.functional[0], _np_cumextreme(_u), REAL_CHARS)


def _logcumsumexp(xp, x, dim):
    if dt.as_dtype(x.dtype).kind not in "fc":
        raise TypeError(f"logcumsumexp: expected a floating point or complex tensor, got "
                        f"{dt.as_dtype(x.dtype).name}")
    x1 = _as_1d(x)
    d = mf.normalize_axis("logcumsumexp", dim, x.ndim) if x.ndim else \
        mf.normalize_axes("logcumsumexp", dim, 0) and 0
    n = x1.shape[d]
    acc = x1
    s = 1
    while s < n:
        acc = xp.logaddexp(_shifted(xp, acc, s, d, float("-inf")), acc)
        s *= 2
    return xp.reshape(acc, ()) if not x.ndim else acc


def _logcumsumexp_meta(x, dim):
    mf.normalize_axes("logcumsumexp", dim, x.ndim)
    return tuple(x.shape), x.dtype


_d = defop("logcumsumexp(Tensor self, int dim) -> Tensor", impl=_logcumsumexp,
           meta=_logcumsumexp_meta, methods=("logcumsumexp",),
           info=OpInfo(ref=lambda x, dim: np.logaddexp.accumulate(x, axis=dim) if x.ndim
                       else x, dtypes=FLOATS, samples=lambda d, rng: [
                           SampleInput((make_array((3, 5), d, rng), 1)),
                           SampleInput((make_array((7,), d, rng), 0)),
                           SampleInput((make_array((), d, rng), 0))]))
# NumPy's logaddexp scan on the CPU (Note [CPU scan kernels] in ops/_cpu_reductions.py)
register_cpu_scan(_d.functional[0], np.logaddexp.accumulate, FLOAT_CHARS, "dim")
