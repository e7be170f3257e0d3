"""Reductions and statistics (Array API statistical functions, torch spellings).

Note [Reduction arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Schemas use the Array API names ``axis``/``keepdims``, positional-or-keyword, so both
``md.sum(x, axis=0)`` (Array API) and ``x.sum(0)`` (PyTorch) work; ``dim=``/``keepdim=`` are
accepted as keyword aliases.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.kernel import with_array_call
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls
from mdtensor.tensors.tensor import Tensor

from . import _meta_fns as mf
from ._bools import as_numbers, is_bool, with_bools_as_numbers
from ._cpu_reductions import (
    COMPLEX_CHARS,
    FLOAT_CHARS,
    REAL_CHARS,
    register_cpu_reduction,
    register_cpu_scan,
    ufunc_reduction,
)
from ._decl import CATALOGUE, OpInfo, SampleInput, defop, register_leaf
from ._errors import axis_check
from ._promotion import astype_as_pytorch, dtype_of
from ._samples import make_array, unary_samples
from .elementwise import FLOATING, FLOATS, NUMERIC, REAL, REAL_KINDS, to_float

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}


_axis = mf.backend_axis  # Note [Axes of 0-d tensors] in ops/_meta_fns.py


def _sum(xp, x, axis=None, keepdims=False, *, dtype=None):
    if dtype is None and dtype_of(x) is dt.bfloat16:  # Note [Sums of bfloat16]
        r = xp.sum(xp.astype(x, xp.float32), axis=_axis("sum", x.ndim, axis),
                   keepdims=keepdims)
        return xp.astype(r, x.dtype)
    return xp.sum(x, axis=_axis("sum", x.ndim, axis), keepdims=keepdims,
                  dtype=dtype and _native(xp, dtype))


_sum = with_bools_as_numbers(_sum, False)  # bools count (Note [Arithmetic of bools])


def _native(xp, dtype):
    from mdtensor._dtypes import as_dtype

    return getattr(xp, as_dtype(dtype).name)


def _sum_meta(x, axis=None, keepdims=False, *, dtype=None):
    shape, d = mf.reduction(x, axis, keepdims, dtype=dtype)
    if dtype is None and d.kind in "bi":
        from mdtensor import _dtypes
        d = _dtypes.int64
    elif dtype is None and d.kind == "u":
        from mdtensor import _dtypes
        d = _dtypes.uint64
    return shape, d


def _cpu_sum():
    """The CPU kernel of sum: ``np.add.reduce`` (Note [NumPy fast impls]: it skips
    ``np.sum``'s Python-level dispatch), in the kernel's own frame -- the generic kernel
    over an impl is one frame more, on the commonest reduction of a backward pass (a
    bias's gradient)."""
    add_reduce = np.add.reduce
    check = axis_check(CATALOGUE["aten::sum"].functional[0].schema)

    def kernel(a, axis=None, keepdims=False, *, dtype=None):
        x = a._data
        if axis is None and x.size <= _SMALL_SUM and x.dtype.char in "fd" and not (
                keepdims or dtype):
            # Note [Small sums]
            r = np.array(sum((x if x.ndim == 1 else x.reshape(-1)).tolist()), x.dtype)
        else:
            if axis is not None and (type(axis) is not int or not x.ndim):
                axis = _axis("sum", x.ndim, axis)
            try:
                # Positional: reduce(array, axis, dtype, out, keepdims); the fewer, the
                # faster
                if x.dtype.kind == "V" and dtype is None:  # Note [Sums of bfloat16]
                    r = np.asarray(add_reduce(x, axis, np.float32, None, keepdims), x.dtype)
                elif dtype is None and not keepdims:
                    r = add_reduce(x, axis)
                else:
                    r = add_reduce(x, axis, dtype and _native(np, dtype), None, keepdims)
            except Exception:
                check(x.ndim, (axis,), {})  # Note [Axis errors] in ops/_errors.py
                raise
        return a._device.wrap(r)

    def specialize(args, kwargs):  # Note [Array calls] in mdtensor/dispatch/kernel.py
        if not 1 <= len(args) <= 3 or set(kwargs) - {"dtype"} or kwargs.get("dtype"):
            return None
        a, axis, keepdims = (*args, None, False)[:3]
        x = getattr(a, "_data", None)
        if type(a) is not Tensor or x.dtype.kind == "V":
            return None
        if axis is None and x.size <= _SMALL_SUM and x.dtype.char in "fd" and not keepdims:
            return _small_sum, (a,), {}  # Note [Small sums]
        if axis is not None and (type(axis) is not int or not x.ndim):
            axis = _axis("sum", x.ndim, axis)
        if keepdims:
            return add_reduce, (a, axis, None, None, True), {}
        return add_reduce, (a, axis), {}

    kernel.__qualname__ = kernel.__name__ = "cpu[aten::sum]"
    return with_array_call(kernel, specialize)


def _small_sum(x):
    """``sum`` of a small float array (Note [Small sums])."""
    return np.array(sum((x if x.ndim == 1 else x.reshape(-1)).tolist()), x.dtype)


# Note [Small sums]
# ~~~~~~~~~~~~~~~~~
# Setting up a NumPy reduction costs about as much as three elementwise ufunc calls, whatever
# the size (``np.add.reduce`` on 8 float32 elements: 2.3 us against ``np.exp``'s 1.1 us, on
# the same machine), and the 0-d result comes back as a NumPy scalar that must be made an
# array again.  A whole-tensor sum of at most ``_SMALL_SUM`` float32/float64 elements is
# instead added up by Python in double precision (``tolist`` + ``sum``) and rounded once to
# the tensor's dtype: 1.3 us against 3.0 us on 8 elements; the two meet near 64 elements.
# The result is at least as accurate as NumPy's (float32 values accumulate in float64; below
# 8 elements NumPy also adds sequentially), and may differ from NumPy's float32 pairwise sum
# in the last place.  Zeros keep NumPy's sign (the sum starts at +0) and inf and nan propagate
# as in NumPy; NumPy's floating-point warnings differ, as PyTorch has none: inf + -inf gives
# nan silently, and a float32 overflow warns in the final cast, not in the reduction.
_SMALL_SUM = 32

# Note [Sums of bfloat16]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# ml_dtypes' loops add bfloat16 in bfloat16: a sum of 1000 ones stops at 256 (the spacing
# of bfloat16 there is 2).  PyTorch's CPU kernels, and XLA's, accumulate bfloat16 in
# float32 and round once; so do the CPU sum and the mean of every backend here.


_REDUCE_SAMPLES = unary_samples(None, kwargs=({}, {"axis": 0}, {"axis": -1, "keepdims": True}))

defop("sum(Tensor self, int[1]? axis=None, bool keepdims=False, *, ScalarType? dtype=None)"
      " -> Tensor", impl=_sum, meta=_sum_meta, tags=("reduction",),
      methods=("sum",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.sum(x, axis=axis,
                                                                  keepdims=keepdims),
                  dtypes=NUMERIC, samples=_REDUCE_SAMPLES))


register_leaf(CATALOGUE["aten::sum"].functional[0], _cpu_sum(), DispatchKey.CPU)


# Note [Reductions of too few elements]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The mean of no element is nan, as PyTorch's, without NumPy's "Mean of empty slice"
# RuntimeWarning; a variance (or standard deviation) with no degree of freedom left (at most
# ``correction`` elements) is nan too, with PyTorch's UserWarning naming the op instead of
# NumPy's "Degrees of freedom <= 0".  Only a reduction with an empty dimension, or a
# correction, looks at its counts: the common call pays one test.


def _count(shape, axis) -> int:
    n = 1
    if not shape:  # Note [Axes of 0-d tensors] in ops/_meta_fns.py: the element
        return n
    for i in range(len(shape)) if axis is None else mf.normalize_axes(
            "reduction", axis, len(shape)):
        n *= shape[i]
    return n


def _nans(xp, x, axis, keepdims, dtype=None):
    """The result of reducing ``x`` over ``axis``, every element nan (of ``dtype``, by
    default ``x``'s)."""
    shape, _ = mf.reduction(x, axis, keepdims)
    return xp.full(shape, float("nan"), dtype=x.dtype if dtype is None else dtype)


def _mean(xp, x, axis=None, keepdims=False):
    x = to_float(xp, x)
    if 0 in x.shape and _count(x.shape, axis) == 0:  # Note [Reductions of too few elements]
        return _nans(xp, x, axis, keepdims)
    if dtype_of(x) is dt.bfloat16:  # Note [Sums of bfloat16]
        r = xp.mean(xp.astype(x, xp.float32), axis=_axis("mean", x.ndim, axis),
                    keepdims=keepdims)
        return xp.astype(r, x.dtype)
    return xp.mean(x, axis=_axis("mean", x.ndim, axis), keepdims=keepdims)


defop("mean(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor", impl=_mean,
      meta=mf.float_reduction, tags=("reduction",), methods=("mean",), kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.mean(x, axis=axis,
                                                                   keepdims=keepdims),
                  dtypes=FLOATING, samples=_REDUCE_SAMPLES))


def _np_mean(x, axis, keepdims):
    # np.mean's computation (Note [CPU reduction kernels] in ops/_cpu_reductions.py): the
    # sum, divided by the count of the elements reduced into each result
    if not x.size:
        return None  # Note [Reductions of too few elements]
    r = _add_reduce(x, axis, None, None, True) if keepdims else _add_reduce(x, axis)
    return r / (x.size // r.size)


_add_reduce = np.add.reduce
_FLOAT_CHARS = "fd" + COMPLEX_CHARS  # float16 sums in float32 (np.mean), integers in float
register_cpu_reduction(CATALOGUE["aten::mean"].functional[0], _np_mean, _FLOAT_CHARS)


# ---------------------------------------------------------------------------------------
# The rest of the statistical functions


def _prod(xp, x, axis=None, keepdims=False, *, dtype=None):
    return xp.prod(x, axis=_axis("prod", x.ndim, axis), keepdims=keepdims,
                   dtype=dtype and _native(xp, dtype))


_prod = with_bools_as_numbers(_prod, False)


defop("prod(Tensor self, int[1]? axis=None, bool keepdims=False, *, ScalarType? dtype=None)"
      " -> Tensor", impl=_prod, meta=_sum_meta, tags=("reduction",), methods=("prod",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.prod(x, axis=axis,
                                                                   keepdims=keepdims),
                  dtypes=NUMERIC, samples=_REDUCE_SAMPLES))
# int64 and floats multiply in their own dtype (smaller integers in int64: generic)
register_cpu_reduction(CATALOGUE["aten::prod"].functional[0], ufunc_reduction(np.multiply),
                       "lq" + _FLOAT_CHARS)


def _extreme(name, which):
    def impl(xp, x, axis=None, keepdims=False):
        mf.check_nonempty(name, x.shape, axis)
        return getattr(xp, which)(x, axis=_axis(name, x.ndim, axis), keepdims=keepdims)
    # the max of bools is their any (Note [Arithmetic of bools] in ops/_bools.py)
    return with_bools_as_numbers(impl, True)


_max, _min = _extreme("max", "max"), _extreme("min", "min")


def _as_int64(xp, idx):
    """Indices in the default index dtype (JAX's argmax gives int32 without x64)."""
    return idx if str(idx.dtype).endswith("int64") else xp.astype(idx, xp.int64)


def _reduce_nonempty_samples(dtype, rng):
    return [s for s in _REDUCE_SAMPLES(dtype, rng) if s.args[0].size and (
        s.kwargs.get("axis") is None or s.args[0].shape[s.kwargs["axis"]])]


# Note [max and min]: ``md.max(x)`` / ``md.max(x, axis=...)`` follow the Array API (values
# only, keyword ``axis``); ``x.max(0)`` / ``md.max(x, dim=0)`` follow PyTorch and return
# ``(values, indices)`` through the ``max.dim`` overload, chosen by plum because its ``dim``
# is positional-or-keyword while the Array API overload's ``axis`` is keyword-only.
for _n, _f, _arg in (("max", _max, np.argmax), ("min", _min, np.argmin)):
    _d = defop(f"{_n}(Tensor self, *, int[1]? axis=None, bool keepdims=False) -> Tensor",
               impl=_f, meta=mf.reduction, tags=("reduction",), methods=(_n,),
               accepts=REAL_KINDS,
               kwarg_aliases={"keepdim": "keepdims"},
               info=OpInfo(ref=lambda x, axis=None, keepdims=False, _n=_n: getattr(np, _n)(
                   x, axis=axis, keepdims=keepdims), dtypes=REAL,
                   samples=_reduce_nonempty_samples))

    def _dim_impl(xp, x, dim, keepdim=False, _f=_f, _n=_n):
        boolean = is_bool(x)
        if boolean:  # Note [Arithmetic of bools] in ops/_bools.py
            x = as_numbers(xp, x)[0]
        values = _f(xp, x, dim, keepdim)
        idx = (xp.argmax if _n == "max" else xp.argmin)(x, axis=_axis(_n, x.ndim, dim),
                                                        keepdims=keepdim)
        return (xp.not_equal(values, 0) if boolean else values), _as_int64(xp, idx)

    def _dim_meta(x, dim, keepdim=False):
        shape, d = mf.reduction(x, dim, keepdim)
        from mdtensor import _dtypes
        return (shape, d), (shape, _dtypes.int64)

    defop(f"{_n}.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, "
          f"Tensor indices)", impl=_dim_impl, meta=_dim_meta, decl=_d)
    defop(f"a{_n}(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor",
          impl=_extreme(f"a{_n}", _n), accepts=REAL_KINDS,
          meta=mf.reduction, tags=("reduction",), methods=(f"a{_n}",), kwarg_aliases=_ALIASES,
          info=OpInfo(ref=lambda x, axis=None, keepdims=False, _n=_n: getattr(np, _n)(
              x, axis=axis, keepdims=keepdims), dtypes=REAL, samples=_reduce_nonempty_samples))


def _np_extreme_dim(ufunc, arg):
    reduce = ufunc.reduce

    def compute(x, dim, keepdim):  # NumPy orders bools, as max.dim's generic impl
        if keepdim:
            return reduce(x, dim, None, None, True), arg(x, dim, None, keepdims=True)
        return reduce(x, dim), arg(x, dim)
    return compute


# Note [CPU reduction kernels] in ops/_cpu_reductions.py: NumPy's maximum of bools is their
# any, as the generic kernels' (Note [Arithmetic of bools] in ops/_bools.py)
for _n, _u, _arg in (("max", np.maximum, np.ndarray.argmax),
                     ("min", np.minimum, np.ndarray.argmin)):
    for _key in (f"aten::{_n}", f"aten::a{_n}"):
        register_cpu_reduction(CATALOGUE[_key].functional[0], ufunc_reduction(_u),
                               REAL_CHARS)
    register_cpu_reduction(CATALOGUE[f"aten::{_n}"].functional[1],
                           _np_extreme_dim(_u, _arg), REAL_CHARS)


# Note [Variance in double precision]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The squared deviations of float32 values overflow (or underflow) long before their mean
# does: ``std([3e37, -3e37])`` was inf.  As PyTorch's CPU kernels, which accumulate float32
# moments in double, var and std of float32 (complex64) tensors compute in float64
# (complex128) and round once at the end; float64 ones compute as they are (PyTorch's
# then overflow as NumPy's do).  The variance of a complex tensor is real, as PyTorch's.


def _moments(name, root):
    def impl(xp, x, *, axis=None, correction=0.0, keepdims=False):
        x = to_float(xp, x)
        axes = _axis(name, x.ndim, axis)  # checked first
        dtype = dt.as_dtype(x.dtype)
        out = getattr(xp, _REAL.get(dtype.name, dtype.name))
        if (correction or 0 in x.shape) and _count(x.shape, axis) - correction <= 0:
            import warnings  # Note [Reductions of too few elements]

            warnings.warn(f"{name}(): degrees of freedom is <= 0 (correction {correction} "
                          f"for {_count(x.shape, axis)} elements per result); the result "
                          f"is nan", UserWarning, stacklevel=2)
            return _nans(xp, x, axis, keepdims, out)
        wide = _WIDE.get(dtype.name)
        if wide is not None:
            x = xp.astype(x, getattr(xp, wide))
        if dtype.kind == "c":  # the variances of the two parts add up (the standard's
            # var takes real numbers only)
            r = xp.add(*(xp.var(part, axis=axes, keepdims=keepdims, correction=correction)
                         for part in (xp.real(x), xp.imag(x))))
            r = xp.sqrt(r) if root else r
        else:
            r = getattr(xp, name)(x, axis=axes, keepdims=keepdims, correction=correction)
        return r if r.dtype == out else xp.astype(r, out)
    impl.__name__ = name
    return impl


_WIDE = {"float32": "float64", "float16": "float64", "bfloat16": "float64",
         "complex64": "complex128"}
_REAL = {"complex64": "float32", "complex128": "float64"}
_var, _std = _moments("var", False), _moments("std", True)


def _var_meta(x, *, axis=None, correction=0.0, keepdims=False):
    shape, dtype = mf.float_reduction(x, axis, keepdims)
    return shape, mf.real_dtype(dtype)


def _spread_samples(dtype, rng):
    """Reductions with at least two elements per reduced slice (std's derivative is
    undefined at zero spread)."""
    return [s for s in _reduce_nonempty_samples(dtype, rng) if s.args[0].ndim
            and min(s.args[0].shape[a] for a in ([s.kwargs["axis"]] if "axis" in s.kwargs
                                                 else range(s.args[0].ndim))) > 1]


def _torch_spread(name):
    """PyTorch's ``var``/``std`` overloads (CompositeImplicitAutograd, as PyTorch's
    ``std.dim``), in terms of the Array API one: the correction defaults to 1 (Bessel's),
    ``unbiased=False`` means 0 (Note [Torch methods] in ops/_methods.py)."""
    def correction(x, dim=None, *, correction=None, keepdim=False):
        return getattr(aten_calls, name)(x, axis=dim, correction=1.0 if correction is None
                                         else correction, keepdims=keepdim)

    def unbiased(x, unbiased=True):
        return correction(x, correction=1.0 if unbiased else 0.0)

    def dim(x, dim, unbiased=True, keepdim=False):
        return correction(x, dim, correction=1.0 if unbiased else 0.0, keepdim=keepdim)

    return correction, unbiased, dim


# Note [Torch methods] in ops/_methods.py: md.var(x) / md.var(x, axis=..., correction=...)
# are the Array API's (correction 0); x.var(), md.var(x, 1), dim=, keepdim=, unbiased= are
# PyTorch's (correction 1).
for _n, _f in (("var", _var), ("std", _std)):
    _d = defop(f"{_n}(Tensor self, *, int[1]? axis=None, float correction=0.0, "
               f"bool keepdims=False) -> Tensor", impl=_f, meta=_var_meta,
               tags=("reduction",), methods=(_n,),
               method_overloads=("unbiased", "correction", "dim"),
               info=OpInfo(ref=lambda x, axis=None, keepdims=False, correction=0.0, _n=_n:
                           getattr(np, _n)(x, axis=axis, keepdims=keepdims, ddof=correction),
                           dtypes=FLOATS, samples=_spread_samples))
    _corr, _unb, _dim = _torch_spread(_n)
    defop(f"{_n}.unbiased(Tensor self, bool unbiased=True) -> Tensor", composite=_unb,
          decl=_d)
    defop(f"{_n}.correction(Tensor self, int[1]? dim=None, *, Scalar? correction=None, "
          f"bool keepdim=False) -> Tensor", composite=_corr, decl=_d)
    defop(f"{_n}.dim(Tensor self, int[1]? dim, bool unbiased=True, bool keepdim=False) "
          f"-> Tensor", composite=_dim, decl=_d)


def _np_moment(root):
    """np.var's (np.std's) computation, float16 and float32 in float64 (Note [Variance in
    double precision]; Note [CPU reduction kernels] in ops/_cpu_reductions.py)."""
    def compute(x, axis, keepdims, correction=0.0):
        if not x.size:
            return None  # Note [Reductions of too few elements]
        dtype = x.dtype
        if dtype.char != "d":
            x = x.astype(np.float64)
        if axis is None and not keepdims:
            # the whole tensor's: its mean a 0-d array, not a (1, ..., 1) one, which NumPy
            # broadcasts at 0.5 us more per operation (the same values, the same order)
            n = x.size
            if n <= correction:
                return None
            d = np.subtract(x, np.array(float(_add_reduce(x, None)) / n))
            np.multiply(d, d, out=d)
            v = float(_add_reduce(d, None)) / (n - correction)
            return dtype.type(math.sqrt(v) if root else v)
        mean = _add_reduce(x, axis, None, None, True)
        n = x.size // mean.size
        if n <= correction:
            return None  # the generic kernel warns
        mean /= n
        d = x - mean
        np.multiply(d, d, out=d)
        r = _add_reduce(d, axis, None, None, keepdims)
        if not r.ndim:  # a NumPy scalar: Python's float arithmetic is cheaper than ufuncs'
            v = float(r) / (n - correction)
            return dtype.type(math.sqrt(v) if root else v)
        np.divide(r, n - correction, out=r)
        if root:
            np.sqrt(r, out=r)
        return r.astype(dtype, copy=False)
    return compute


for _n in ("var", "std"):
    register_cpu_reduction(CATALOGUE[f"aten::{_n}"].functional[0], _np_moment(_n == "std"),
                           FLOAT_CHARS, options=("correction",))


def _cumulative(name):
    def impl(xp, x, axis=None, *, dtype=None, include_initial=False):
        if axis is None:
            if x.ndim > 1:
                raise ValueError(f"{name}: axis is required for a tensor of dimension "
                                 f"{x.ndim}")
            axis = 0
        if dtype is None:
            # Array API: small integer inputs accumulate in the default integer dtype
            # (backends differ here, so say it explicitly).
            from mdtensor._dtypes import as_dtype

            kind = as_dtype(x.dtype).kind
            if kind in "bi":
                dtype = "int64"
            elif kind == "u":
                dtype = "uint64"
        if dtype is not None:  # accumulate in dtype (the standard's functions take no bool)
            x = astype_as_pytorch(xp, x, dt.as_dtype(dtype))
            dtype = x.dtype  # and say so: NumPy accumulates small integers in 64 bits
        if x.ndim == 0:  # Note [Axes of 0-d tensors] in ops/_meta_fns.py
            mf.normalize_axes(name, axis, 0)
            r = getattr(xp, name)(xp.reshape(x, (1,)), axis=0, dtype=dtype,
                                  include_initial=include_initial)
            return r if include_initial else xp.reshape(r, ())
        return getattr(xp, name)(x, axis=axis, dtype=dtype, include_initial=include_initial)
    return impl


def _cum_meta(x, axis=None, *, dtype=None, include_initial=False):
    shape = list(x.shape)
    if include_initial:
        a = 0 if axis is None else mf.normalize_axis("cumulative", axis, x.ndim)
        shape = shape or [1]
        shape[a] += 1
    elif axis is not None:
        mf.normalize_axes("cumulative", axis, x.ndim)
    d = mf.as_dtype_or(dtype, x.dtype)
    if dtype is None and d.kind in "bi":
        from mdtensor import _dtypes
        d = _dtypes.int64
    elif dtype is None and d.kind == "u":
        from mdtensor import _dtypes
        d = _dtypes.uint64
    return tuple(shape), d


for _n, _ref, _torch in (("cumulative_sum", np.cumsum, "cumsum"),
                         ("cumulative_prod", np.cumprod, "cumprod")):
    defop(f"{_n}(Tensor self, int? axis=None, *, ScalarType? dtype=None, "
          f"bool include_initial=False) -> Tensor", impl=_cumulative(_n), meta=_cum_meta,
          names=(_n, _torch), methods=(_n, _torch), kwarg_aliases={"dim": "axis"},
          info=OpInfo(ref=lambda x, axis=None, _ref=_ref: _ref(x, axis=0 if axis is None
                                                               else axis),
                      dtypes=NUMERIC,
                      samples=lambda d, rng: [SampleInput((make_array((5,), d, rng),)),
                                              SampleInput((make_array((2, 3), d, rng), 1))]))
# int64 and floats accumulate in their own dtype (other integers in int64: generic)
for _n, _u in (("cumulative_sum", np.add), ("cumulative_prod", np.multiply)):
    register_cpu_scan(CATALOGUE[f"aten::{_n}"].functional[0], _u.accumulate,
                      "lq" + _FLOAT_CHARS)


def _logsumexp(xp, x, axis=None, keepdims=False):
    # Over an empty axis the sum of exponentials is 0 and the result -inf, as PyTorch's
    # (the maximum, which only keeps exp from overflowing, is then taken as 0).  Integers
    # give the default float dtype (Note [Integer inputs of float functions]).
    x = to_float(xp, x)
    axes = _axis("logsumexp", x.ndim, axis)
    if any(x.shape[a] == 0 for a in mf.normalize_axes("logsumexp", axes, x.ndim)):
        m = xp.zeros(mf.reduction(x, axes, True)[0], dtype=x.dtype)
    else:  # the largest real part (complex numbers have no order)
        m = xp.max(xp.real(x) if dt.as_dtype(x.dtype).kind == "c" else x, axis=axes,
                   keepdims=True)
        m = xp.where(xp.isfinite(m), m, xp.zeros_like(m))
    out = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
    return out if keepdims else xp.reshape(out, mf.reduction(x, axes, False)[0])


def _np_logsumexp(x, axis, keepdims):
    # the generic computation in NumPy's ufuncs (Note [CPU reduction kernels] in
    # ops/_cpu_reductions.py)
    if not x.size:
        return None
    m = np.maximum.reduce(x, axis, None, None, True)
    if not np.logical_and.reduce(np.isfinite(m), None):  # an inf or nan maximum is taken as 0
        m = np.where(np.isfinite(m), m, 0)
    d = np.subtract(x, m)
    t = _add_reduce(np.exp(d, out=d), axis, None, None, keepdims)
    return np.add(np.log(t), m if keepdims else m.reshape(np.shape(t)))


defop("logsumexp(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor",
      impl=_logsumexp, meta=mf.float_reduction, tags=("reduction",), methods=("logsumexp",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.log(np.sum(
          np.exp(x), axis=axis, keepdims=keepdims)), dtypes=FLOATS,
          samples=_reduce_nonempty_samples))
register_cpu_reduction(CATALOGUE["aten::logsumexp"].functional[0], _np_logsumexp, FLOAT_CHARS)
