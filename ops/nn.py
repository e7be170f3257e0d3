"""Torch-style neural-network ops: relu, gelu, silu, softmax, log_softmax, dropout.

``softmax``/``log_softmax`` are real ops (not compositions), so autograd uses their compact
derivative formulas; both subtract the row maximum for numerical stability.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from mdtensor import random
from mdtensor.dispatch.namespaces import aten_calls as aten

from . import _meta_fns as mf
from ._cpu_kernels import register_cpu_kernel, register_direct
from ._decl import CATALOGUE, OpInfo, SampleInput, defop
from ._promotion import bfloat16_via_float32
from ._samples import make_array, unary_samples
from ._scipy_special import on_numpy, scipy_special
from ._special import erf
from .elementwise import FLOAT_ONES, FLOATS, to_float

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _relu(xp, x):
    return xp.maximum(x, xp.zeros_like(x))


def _np_relu(xp, x):
    # See Note [NumPy fast impls]: a 0-d zero of x's dtype, not a Python 0 converted per call
    zero = _ZEROS.get(x.dtype)
    if zero is None:
        if type(x) is not np.ndarray:
            return _relu(np, x)
        zero = _zero(x.dtype)
    return np.maximum(x, zero)


def _zero(dtype):
    """A read-only 0-d zero of ``dtype``, made once."""
    zero = _ZEROS.get(dtype)
    return zero if zero is not None else _ZEROS.setdefault(dtype, _readonly_zero(dtype))


def _readonly_zero(dtype):
    zero = np.zeros((), dtype)
    zero.flags.writeable = False
    return zero


_ZEROS: dict = {}


defop("relu(Tensor self) -> Tensor", impl=_relu, structured=True, meta=mf.same,
      cpu_impl=_np_relu, tags=("pointwise",), methods=("relu",), accepts="iuf",
      info=OpInfo(ref=lambda x: np.maximum(x, 0), dtypes=FLOATS, samples=unary_samples(None)))


# Note [threshold_backward]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# relu's gradient is PyTorch's ``threshold_backward(grad, out, 0)``: ``grad`` where ``self >
# threshold`` (and where ``self`` is NaN), else 0 -- one op instead of ``le`` then
# ``where``.  On NumPy, ``np.where`` with a data-dependent mask mispredicts a branch per
# element (230 us on the CNN example's 73,728 float32 values); the CPU kernel instead ANDs
# the gradient's bits with a mask of all-ones or all-zeros words (50 us), which gives +0.0
# where PyTorch gives 0 and passes NaN and infinite gradients unchanged elsewhere.  Small
# inputs, or operands of different shapes or dtypes, take ``np.where``.


def _threshold_backward(xp, g, x, threshold):
    out = xp.where(x <= threshold, xp.zeros_like(g), g)
    want = xp.result_type(g, x)  # promoted, as PyTorch's
    return out if out.dtype == want else xp.astype(out, want)


_BITS = {np.dtype(np.float16): np.int16, np.dtype(np.float32): np.int32,
         np.dtype(np.float64): np.int64}


def _np_threshold_backward(xp, g, x, threshold):
    # See Note [threshold_backward]
    ints = _BITS.get(g.dtype) if type(g) is np.ndarray else None
    if ints is None or type(x) is not np.ndarray or x.dtype != g.dtype:
        return _threshold_backward(np, g, x, threshold)
    if g.size < 4096 or g.shape != x.shape:
        return np.where(np.less_equal(x, threshold), _zero(g.dtype), g)
    mask = np.less_equal(x, threshold).astype(ints)
    mask -= 1  # 0 where dropped, all ones where kept
    return np.bitwise_and(g.view(ints), mask, mask).view(g.dtype)


def _threshold_backward_meta(g, x, threshold):
    return mf.binary(g, x)


def _threshold_backward_samples(dtype, rng):
    # (70, 70): above the CPU kernel's size for np.where (values at the threshold, where
    # the op jumps, are tests/test_nn_layers.py's: gradcheck steps across them here)
    return [SampleInput((make_array((3, 4), dtype, rng), make_array((3, 4), dtype, rng), 0)),
            SampleInput((make_array((70, 70), dtype, rng), make_array((70, 70), dtype, rng),
                         0.5)),
            SampleInput((make_array((5,), dtype, rng), make_array((5,), dtype, rng), -0.25))]


defop("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor",
      impl=_threshold_backward, cpu_impl=_np_threshold_backward,
      meta=_threshold_backward_meta, names=(), accepts="iuf",
      info=OpInfo(ref=lambda g, x, t: np.where(x <= t, 0, g).astype(g.dtype), dtypes=FLOATS,
                  samples=_threshold_backward_samples))


_SQRT1_2 = 1 / math.sqrt(2.0)


def _gelu(xp, x, approximate="none"):
    r = bfloat16_via_float32(xp, _gelu, x, approximate)  # (NumPy: 0.5 * x is float32)
    if r is not None:
        return r
    x = to_float(xp, x)
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + xp.tanh(c * (x + 0.044715 * x * x * x)))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    # PyTorch's formula, cancellation in 1 + erf included (Note [erf] in ops/_special.py)
    return x * 0.5 * (1.0 + erf(xp, x * _SQRT1_2))


def _np_gelu(xp, x, approximate="none"):
    """Exact gelu on NumPy with SciPy's erf (Note [SciPy on NumPy] in
    ops/_scipy_special.py), PyTorch's formula in one temporary."""
    erf_ufunc = scipy_special("erf") if approximate == "none" and x.ndim else None
    if erf_ufunc is None or not on_numpy(x):
        return _gelu(xp, x, approximate)
    t = _mul(x, _SQRT1_2)
    erf_ufunc(t, out=t)
    _add(t, 1.0, t)
    _mul(t, x, t)
    return _mul(t, 0.5, t)


def _gelu_ref(x, approximate="none"):
    from math import erf
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return 0.5 * x * (1.0 + np.tanh(c * (x + 0.044715 * x ** 3)))
    return (x * 0.5 * (1.0 + np.vectorize(erf, otypes=[np.float64])(x * _SQRT1_2)))\
        .astype(x.dtype)


defop("gelu(Tensor self, *, str approximate=\"none\") -> Tensor", impl=_gelu, meta=mf.unary_float,
      cpu_impl=_np_gelu,
      tags=("pointwise",), methods=("gelu",), accepts="biuf",
      info=OpInfo(ref=_gelu_ref, dtypes=FLOATS, rtol=1e-6, atol=1e-6,
                  samples=unary_samples(None, kwargs=({}, {"approximate": "tanh"}))))


def _silu(xp, x):
    x = to_float(xp, x)
    return x / (1 + xp.exp(-x))


def _np_silu(x):
    # Note [rsqrt and silu on NumPy] in ops/elementwise.py: _silu's operations, in place
    one = FLOAT_ONES.get(x.dtype.char)
    if one is None or not x.ndim:
        return None
    t = np.negative(x)
    np.exp(t, t)
    np.add(one, t, t)
    return np.divide(x, t, t)


_silu_decl = defop(
    "silu(Tensor self) -> Tensor", impl=_silu, meta=mf.unary_float, tags=("pointwise",),
    methods=("silu",),
    info=OpInfo(ref=lambda x: x / (1 + np.exp(-x)), dtypes=FLOATS,
                samples=unary_samples(None)))
register_direct(_silu_decl.functional[0], _np_silu)


def _softmax(xp, x, dim=-1):
    x = to_float(xp, x)
    if x.ndim == 0 or x.shape[dim] == 0:
        return _scalar_or_empty(xp, x, dim, _softmax)
    m = xp.max(x, axis=dim, keepdims=True)
    e = xp.exp(x - m)
    return e / xp.sum(e, axis=dim, keepdims=True)


def _log_softmax(xp, x, dim=-1):
    x = to_float(xp, x)
    if x.ndim == 0 or x.shape[dim] == 0:
        return _scalar_or_empty(xp, x, dim, _log_softmax)
    m = xp.max(x, axis=dim, keepdims=True)
    s = x - m
    return s - xp.log(xp.sum(xp.exp(s), axis=dim, keepdims=True))


def _scalar_or_empty(xp, x, dim, fn):
    """softmax or log_softmax (``fn``) of a 0-d tensor, computed on it made 1-d (Note [Axes
    of 0-d tensors] in ops/_meta_fns.py: its value counts, softmax(nan) is nan), or over an
    empty axis (an empty result, as PyTorch's)."""
    mf.normalize_axes("softmax", dim, x.ndim)
    if x.ndim == 0:
        return xp.reshape(fn(xp, xp.reshape(x, (1,)), 0), ())
    return xp.asarray(x, copy=True)


# Note [NumPy fast impls] (ops/_decl.py): the same computation with ufunc reductions,
# which skip np.max/np.sum's Python-level dispatch (several microseconds on small inputs).
_max_reduce = np.maximum.reduce
_sum_reduce = np.add.reduce
_mul, _sub, _div, _exp, _log = np.multiply, np.subtract, np.divide, np.exp, np.log
_add, _matmul = np.add, np.matmul
_ndarray = np.ndarray


# The temporaries are reused (positional ``out``): no allocation after the first, and
# the reductions' ``keepdims`` is passed positionally (``axis, dtype, out, keepdims``).
# A small softmax is NumPy's own cost: its two axis reductions and two broadcasting
# operations take ~10K instructions each on a 16x16 array (an ``exp`` 4.5K), so a row-wise
# softmax takes ~5 us where PyTorch's fused kernel takes 1.4.


def _np_softmax(xp, x, dim=-1):
    if x.ndim == 0 or x.dtype.kind != "f" or x.shape[dim] == 0:
        return _softmax(xp, x, dim)
    e = _sub(x, _max_reduce(x, dim, None, None, True))
    _exp(e, e)
    return _div(e, _sum_reduce(e, dim, None, None, True), e)


def _np_log_softmax(xp, x, dim=-1):
    if x.ndim == 0 or x.dtype.kind != "f" or x.shape[dim] == 0:
        return _log_softmax(xp, x, dim)
    s = _sub(x, _max_reduce(x, dim, None, None, True))
    lse = _sum_reduce(_exp(s), dim, None, None, True)
    return _sub(s, _log(lse, lse), s)


def _softmax_ref(x, dim=-1):
    if x.ndim == 0:
        return _softmax_ref(x.reshape(1), 0).reshape(())
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _softmax_meta(x, dim=-1):
    if x.ndim:
        mf.normalize_axes("softmax", dim, x.ndim)
    return mf.unary_float(x)


def _sm_samples(dtype, rng):
    return [SampleInput((make_array((2, 5), dtype, rng), -1)),
            SampleInput((make_array((3, 4), dtype, rng), 0)),
            SampleInput((make_array((6,), dtype, rng),))]


defop("softmax(Tensor self, int dim=-1) -> Tensor", impl=_softmax, meta=_softmax_meta,
      cpu_impl=_np_softmax, accepts="biuf",
      methods=("softmax",), kwarg_aliases={"axis": "dim"},
      info=OpInfo(ref=_softmax_ref, dtypes=FLOATS, samples=_sm_samples))
defop("log_softmax(Tensor self, int dim=-1) -> Tensor", impl=_log_softmax, meta=_softmax_meta,
      cpu_impl=_np_log_softmax, accepts="biuf",
      methods=("log_softmax",), kwarg_aliases={"axis": "dim"},
      info=OpInfo(ref=lambda x, dim=-1: np.log(_softmax_ref(x, dim)), dtypes=FLOATS,
                  samples=_sm_samples))

# the input's array read directly, without the generic kernel's unwrapping (Note
# [Hand-written CPU kernels]); 0-d and other dtypes take the generic kernel
for _name, _impl in (("softmax", _np_softmax), ("log_softmax", _np_log_softmax)):
    register_cpu_kernel(CATALOGUE[f"aten::{_name}"].functional[0], functools.partial(_impl, np),
                        "efd")

# ---------------------------------------------------------------------------------------
# Note [Backward ops]
# ~~~~~~~~~~~~~~~~~~~
# As in PyTorch, the gradients of tanh, sigmoid, softmax and log_softmax are ops of their
# own (``tanh_backward``, ``sigmoid_backward``, ``_softmax_backward_data``,
# ``_log_softmax_backward_data``): one dispatch instead of three or four, and on NumPy one
# kernel that reuses its temporaries.  They have derivatives of their own, so
# ``create_graph=True`` still differentiates through them.  PyTorch's ``input_dtype``
# argument of the softmax pair is left out (mdtensor's gradients keep the output's dtype).
# Real dtypes only: complex gradients keep the composite formulas (ops/nn_derivatives.py).


def _tanh_backward(xp, g, y):
    return xp.multiply(g, xp.subtract(1, xp.multiply(y, y)))


def _np_tanh_backward(xp, g, y):
    t = _mul(y, y)
    dt = t.dtype
    if type(t) is not _ndarray or dt != g.dtype or t.shape != g.shape:
        return _tanh_backward(np, g, y)
    one = _ONES.get(dt)
    _sub(_one(dt) if one is None else one, t, t)  # positional out: cheaper than out=
    return _mul(g, t, t)


def _sigmoid_backward(xp, g, y):
    return xp.multiply(g, xp.multiply(y, xp.subtract(1, y)))


def _np_sigmoid_backward(xp, g, y):
    dt = y.dtype
    one = _ONES.get(dt)
    t = _sub(_one(dt) if one is None else one, y)
    if type(t) is not _ndarray or t.dtype != g.dtype or t.shape != g.shape:
        return _sigmoid_backward(np, g, y)
    _mul(y, t, t)
    return _mul(g, t, t)


# A ufunc given a Python scalar converts it on every call (NEP 50's weak scalars): on 128
# float32 elements ``np.subtract(1, y)`` costs 2.0 us, ``np.subtract(one, y)`` with a 0-d
# array of y's dtype 1.1 us.  The kernels above keep one such array per dtype.
_ONES: dict = {}


def _one(dtype):
    one = _ONES.get(dtype)
    if one is None:
        one = _ONES[dtype] = np.ones((), dtype)
        one.flags.writeable = False
    return one


def _softmax_backward_data(xp, g, y, dim):
    gy = xp.multiply(g, y)
    return xp.subtract(gy, xp.multiply(y, xp.sum(gy, axis=dim, keepdims=True)))


# Note [Spread sums as products]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The softmax pair's gradients need a sum along ``dim`` spread back along it.  On a small
# array a keepdims reduction and the broadcasting product with its result cost some 1 us
# each (NumPy's iterator, for a (1, n) or (n, 1) operand), while the product with an ``n x n``
# matrix of ones makes the spread sum at once, each element its row's (column's) sum:
# ``t @ ones`` along the last axis, ``ones @ t`` along the one before, 1 us for a 16x16
# array whose reduction and broadcast took 2.5.  For float32/float64 arrays of up to 1024
# elements summed along at most 16 points (beyond, the products' ``n^2`` work and BLAS's
# threads outweigh it); otherwise the reduction and the broadcast.

_SPREAD_ONES: dict = {}


def _spread_sum(t, dim):
    """``t``'s sums along ``dim`` in ``t``'s shape, or None (Note [Spread sums as
    products])."""
    nd = t.ndim
    if t.size > 1024 or not nd or type(dim) is not int or t.dtype.char not in "fd":
        return None
    if dim < 0:
        dim += nd
    if dim == nd - 1:
        n, right = t.shape[-1], True
    elif dim == nd - 2:
        n, right = t.shape[-2], False
    else:
        return None
    if n > 16:
        return None
    key = (n, t.dtype.char)
    ones = _SPREAD_ONES.get(key)
    if ones is None:
        ones = _SPREAD_ONES[key] = np.ones((n, n), t.dtype)
        ones.flags.writeable = False
    return _matmul(t, ones) if right else _matmul(ones, t)


def _np_softmax_backward_data(xp, g, y, dim):
    t = _mul(g, y)
    if type(t) is not _ndarray or t.dtype != g.dtype or t.shape != g.shape:
        return _softmax_backward_data(np, g, y, dim)
    s = _spread_sum(t, dim)
    if s is None:
        s = _sum_reduce(t, dim, None, None, True)
    r = _mul(y, s)
    return _sub(t, r, t)


def _log_softmax_backward_data(xp, g, y, dim):
    return xp.subtract(g, xp.multiply(xp.exp(y), xp.sum(g, axis=dim, keepdims=True)))


def _np_log_softmax_backward_data(xp, g, y, dim):
    t = _exp(y)
    if type(t) is not _ndarray or t.dtype != g.dtype or t.shape != g.shape:
        return _log_softmax_backward_data(np, g, y, dim)
    s = _spread_sum(g, dim)  # Note [Spread sums as products]
    _mul(t, _sum_reduce(g, dim, None, None, True) if s is None else s, t)
    return _sub(g, t, t)


def _pair_samples(dtype, rng):
    return [SampleInput((make_array((2, 5), dtype, rng), make_array((2, 5), dtype, rng))),
            SampleInput((make_array((3,), dtype, rng), make_array((3,), dtype, rng)))]


def _pair_dim_samples(dtype, rng):
    return [SampleInput((make_array((2, 5), dtype, rng), make_array((2, 5), dtype, rng), -1)),
            SampleInput((make_array((3, 4), dtype, rng), make_array((3, 4), dtype, rng), 0))]


def _backward_meta(g, y, *args):
    return mf.binary(g, y)


defop("tanh_backward(Tensor grad_output, Tensor output) -> Tensor", impl=_tanh_backward,
      cpu_impl=_np_tanh_backward, meta=_backward_meta, names=(),
      info=OpInfo(ref=lambda g, y: g * (1 - y * y), dtypes=FLOATS, samples=_pair_samples))
defop("sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor",
      impl=_sigmoid_backward, cpu_impl=_np_sigmoid_backward, meta=_backward_meta, names=(),
      info=OpInfo(ref=lambda g, y: g * y * (1 - y), dtypes=FLOATS, samples=_pair_samples))
defop("_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor",
      impl=_softmax_backward_data, cpu_impl=_np_softmax_backward_data, meta=_backward_meta,
      names=(),
      info=OpInfo(ref=lambda g, y, dim: g * y - y * (g * y).sum(axis=dim, keepdims=True),
                  dtypes=FLOATS, samples=_pair_dim_samples))
defop("_log_softmax_backward_data(Tensor grad_output, Tensor output, int dim) -> Tensor",
      impl=_log_softmax_backward_data, cpu_impl=_np_log_softmax_backward_data,
      meta=_backward_meta, names=(),
      info=OpInfo(ref=lambda g, y, dim: g - np.exp(y) * g.sum(axis=dim, keepdims=True),
                  dtypes=FLOATS, samples=_pair_dim_samples))


def _dropout(x, p=0.5, train=True):
    """CompositeImplicitAutograd (as PyTorch's ``dropout``): a random keep-mask from the
    device's generator; the gradient comes from masked_fill and mul."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    if not train or p == 0.0:
        return aten.clone(x)
    if p == 1.0:
        return aten.mul(x, 0.0)
    keep = aten.lt(random.rand(x.shape, device=x.device, dtype=x.dtype), 1.0 - p)
    return aten.mul(aten.masked_fill(x, aten.logical_not(keep), 0.0), 1.0 / (1.0 - p))


defop("dropout(Tensor input, float p=0.5, bool train=True) -> Tensor",
      composite=_dropout, meta=mf.same, methods=())
