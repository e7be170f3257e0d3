"""Derivative formulas of the catalogue's ops (the Autograd layer's rules table).

``DERIVATIVES[name]`` is ``formula(g, out, *args, **kwargs) -> tuple``: given the gradient
``g`` of the output (a tuple for several outputs), the output ``out`` (only for formulas
marked ``@uses_out``; else None) and the op's arguments, it returns one entry per
positional argument: the gradient of a Tensor argument (a list for ``Tensor[]``), or None.
Names are packet names (``"mul"``) or overload names (``"max.dim"``); an in-place op
(``mul_``) uses its functional op's formula with the value ``self`` had before.  Formulas
use md ops, so ``create_graph=True`` differentiates them again.

``NONDIFFERENTIABLE`` ops give outputs that never require grad (integer results, masks).
"""

from __future__ import annotations

import math

from mdtensor.ops import aten

__all__ = ["DERIVATIVES", "NONDIFFERENTIABLE", "sum_to", "uses_out"]

DERIVATIVES: dict = {}
NONDIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "isfinite", "isinf", "isnan", "signbit", "argmax", "argmin", "argsort",
    "count_nonzero", "nonzero", "searchsorted", "all", "any", "unique_values",
    "unique_counts", "unique_inverse", "unique_all", "floor_divide", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "sign", "ceil", "floor", "trunc", "round", "detach", "zeros", "ones", "empty", "full",
    "arange", "linspace", "eye", "nextafter",
})


def uses_out(fn):
    """Mark a formula that reads the op's output (so the Autograd kernel saves it)."""
    fn.uses_out = True
    return fn


def rule(*names):
    def register(fn):
        for n in names:
            DERIVATIVES[n] = fn
        return fn
    return register


def sum_to(g, shape):
    """Reduce a broadcast gradient back to ``shape``."""
    if g is None:
        return None
    shape = tuple(shape)
    if tuple(g.shape) == shape:
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(i + lead for i, s in enumerate(shape)
                                      if s == 1 and g.shape[i + lead] != 1)
    if axes:
        g = aten.sum(g, axes, True)
    if lead:
        g = aten.reshape(g, shape)
    return g


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _g(g, x):
    """``g`` reduced to the shape of argument ``x`` (None for non-tensor ``x``)."""
    return sum_to(g, x.shape) if hasattr(x, "_ks") else None


# -- arithmetic -------------------------------------------------------------------------


@rule("add")
def _add(g, out, a, b, alpha=1):
    return _g(g, a), _g(g if alpha == 1 else aten.mul(g, alpha), b), None


@rule("sub")
def _sub(g, out, a, b, alpha=1):
    return _g(g, a), _g(aten.neg(g) if alpha == 1 else aten.mul(g, -alpha), b), None


@rule("mul")
def _mul(g, out, a, b):
    return (_g(aten.mul(g, b), a) if hasattr(a, "_ks") else None,
            _g(aten.mul(g, a), b) if hasattr(b, "_ks") else None)


@rule("div")
def _div(g, out, a, b):
    ga = _g(aten.div(g, b), a) if hasattr(a, "_ks") else None
    gb = None
    if hasattr(b, "_ks"):
        gb = _g(aten.neg(aten.div(aten.mul(g, a), aten.mul(b, b))), b)
    return ga, gb


@rule("neg")
def _neg(g, out, a):
    return (aten.neg(g),)


@rule("positive", "clone", "contiguous")
def _identity(g, out, a, *args, **kwargs):
    return (g,)


@rule("pow")
def _pow(g, out, a, b):
    ga = gb = None
    if hasattr(a, "_ks"):
        ga = _g(aten.mul(aten.mul(g, b), aten.pow(a, aten.sub(b, 1) if hasattr(b, "_ks")
                                                  else b - 1)), a)
    if hasattr(b, "_ks"):
        base = a if hasattr(a, "_ks") else a
        log_a = aten.log(base) if hasattr(base, "_ks") else math.log(base)
        gb = _g(aten.mul(aten.mul(g, aten.pow(a, b)), log_a), b)
    return ga, gb


@rule("abs")
def _abs(g, out, a):
    return (aten.mul(g, aten.sign(a)),)


@rule("square")
def _square(g, out, a):
    return (aten.mul(g, aten.mul(a, 2)),)


@rule("maximum", "minimum")
def _maxmin(g, out, a, b):
    # The larger (smaller) argument gets the gradient; ties split it evenly, as PyTorch.
    wins_a = aten.astype(aten.eq(out, a), g.dtype)
    wins_b = aten.astype(aten.eq(out, b), g.dtype)
    both = aten.mul(wins_a, wins_b)
    wa = aten.sub(wins_a, aten.mul(both, 0.5))
    wb = aten.sub(wins_b, aten.mul(both, 0.5))
    return (_g(aten.mul(g, wa), a) if hasattr(a, "_ks") else None,
            _g(aten.mul(g, wb), b) if hasattr(b, "_ks") else None)


_maxmin.uses_out = True


@rule("clamp")
def _clamp(g, out, a, min=None, max=None):
    mask = aten.ones(a.shape, dtype=g.dtype, device=g.device)
    if min is not None:
        mask = aten.mul(mask, aten.astype(aten.ge(a, min), g.dtype))
    if max is not None:
        mask = aten.mul(mask, aten.astype(aten.le(a, max), g.dtype))
    return aten.mul(g, mask), None, None


# -- unary functions ----------------------------------------------------------------------


@rule("exp")
@uses_out
def _exp(g, out, a):
    return (aten.mul(g, out),)


@rule("expm1")
@uses_out
def _expm1(g, out, a):
    return (aten.mul(g, aten.add(out, 1)),)


@rule("log")
def _log(g, out, a):
    return (aten.div(g, a),)


@rule("log2")
def _log2(g, out, a):
    return (aten.div(g, aten.mul(a, math.log(2.0))),)


@rule("log10")
def _log10(g, out, a):
    return (aten.div(g, aten.mul(a, math.log(10.0))),)


@rule("log1p")
def _log1p(g, out, a):
    return (aten.div(g, aten.add(a, 1)),)


@rule("sqrt")
@uses_out
def _sqrt(g, out, a):
    return (aten.div(g, aten.mul(out, 2)),)


@rule("rsqrt")
@uses_out
def _rsqrt(g, out, a):
    return (aten.mul(g, aten.mul(aten.pow(out, 3), -0.5)),)


@rule("reciprocal")
@uses_out
def _reciprocal(g, out, a):
    return (aten.neg(aten.mul(g, aten.mul(out, out))),)


@rule("sin")
def _sin(g, out, a):
    return (aten.mul(g, aten.cos(a)),)


@rule("cos")
def _cos(g, out, a):
    return (aten.neg(aten.mul(g, aten.sin(a))),)


@rule("tan")
@uses_out
def _tan(g, out, a):
    return (aten.mul(g, aten.add(aten.mul(out, out), 1)),)


@rule("asin")
def _asin(g, out, a):
    return (aten.div(g, aten.sqrt(aten.sub(1, aten.mul(a, a)))),)


@rule("acos")
def _acos(g, out, a):
    return (aten.neg(aten.div(g, aten.sqrt(aten.sub(1, aten.mul(a, a))))),)


@rule("atan")
def _atan(g, out, a):
    return (aten.div(g, aten.add(aten.mul(a, a), 1)),)


@rule("sinh")
def _sinh(g, out, a):
    return (aten.mul(g, aten.cosh(a)),)


@rule("cosh")
def _cosh(g, out, a):
    return (aten.mul(g, aten.sinh(a)),)


@rule("tanh")
@uses_out
def _tanh(g, out, a):
    return (aten.mul(g, aten.sub(1, aten.mul(out, out))),)


@rule("asinh")
def _asinh(g, out, a):
    return (aten.div(g, aten.sqrt(aten.add(aten.mul(a, a), 1))),)


@rule("acosh")
def _acosh(g, out, a):
    return (aten.div(g, aten.sqrt(aten.sub(aten.mul(a, a), 1))),)


@rule("atanh")
def _atanh(g, out, a):
    return (aten.div(g, aten.sub(1, aten.mul(a, a))),)


@rule("sigmoid")
@uses_out
def _sigmoid(g, out, a):
    return (aten.mul(g, aten.mul(out, aten.sub(1, out))),)


@rule("atan2")
def _atan2(g, out, a, b):
    denom = aten.add(aten.mul(a, a), aten.mul(b, b))
    return (_g(aten.div(aten.mul(g, b), denom), a) if hasattr(a, "_ks") else None,
            _g(aten.neg(aten.div(aten.mul(g, a), denom)), b) if hasattr(b, "_ks") else None)


@rule("hypot")
@uses_out
def _hypot(g, out, a, b):
    return (_g(aten.div(aten.mul(g, a), out), a) if hasattr(a, "_ks") else None,
            _g(aten.div(aten.mul(g, b), out), b) if hasattr(b, "_ks") else None)


@rule("logaddexp")
@uses_out
def _logaddexp(g, out, a, b):
    return (_g(aten.mul(g, aten.exp(aten.sub(a, out))), a) if hasattr(a, "_ks") else None,
            _g(aten.mul(g, aten.exp(aten.sub(b, out))), b) if hasattr(b, "_ks") else None)


@rule("relu")
@uses_out
def _relu(g, out, a):
    return (aten.mul(g, aten.astype(aten.gt(out, 0), g.dtype)),)


@rule("silu")
def _silu(g, out, a):
    s = aten.sigmoid(a)
    return (aten.mul(g, aten.mul(s, aten.add(aten.mul(a, aten.sub(1, s)), 1))),)


@rule("gelu")
def _gelu(g, out, a, approximate="none"):
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        inner = aten.mul(aten.add(a, aten.mul(aten.pow(a, 3), 0.044715)), c)
        t = aten.tanh(inner)
        dinner = aten.mul(aten.add(aten.mul(aten.mul(a, a), 3 * 0.044715), 1), c)
        d = aten.add(aten.mul(aten.add(t, 1), 0.5),
                     aten.mul(aten.mul(aten.mul(a, 0.5), aten.sub(1, aten.mul(t, t))), dinner))
        return (aten.mul(g, d),)
    cdf = aten.mul(aten.add(_erf(aten.div(a, math.sqrt(2.0))), 1), 0.5)
    pdf = aten.mul(aten.exp(aten.mul(aten.mul(a, a), -0.5)), 1 / math.sqrt(2 * math.pi))
    return (aten.mul(g, aten.add(cdf, aten.mul(a, pdf))),)


def _erf(x):
    # The same approximation as the gelu kernel, so the gradient matches it.
    from mdtensor.ops.nn import _erf as erf_impl

    class _XP:
        abs = staticmethod(aten.abs)
        exp = staticmethod(aten.exp)
        where = staticmethod(aten.where)

    return erf_impl(_XP, x)


@rule("softmax")
@uses_out
def _softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    s = aten.sum(aten.mul(g, out), dim, True)
    return aten.mul(out, aten.sub(g, s)), None


@rule("log_softmax")
@uses_out
def _log_softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    return aten.sub(g, aten.mul(aten.exp(out), aten.sum(g, dim, True))), None


# -- reductions ---------------------------------------------------------------------------


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to ``x``'s shape."""
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(a % max(x.ndim, 1) for a in axes)
    if not keepdims and x.ndim:
        shape = [1 if i in axes else s for i, s in enumerate(x.shape)]
        g = aten.reshape(g, tuple(shape))
    return aten.expand(g, tuple(x.shape)) if x.ndim else g


@rule("sum")
def _sum(g, out, x, axis=None, keepdims=False, *, dtype=None):
    return aten.astype(_expand_back(g, x, axis, keepdims), x.dtype) if g.dtype is not x.dtype \
        else _expand_back(g, x, axis, keepdims), None, None


def _count(x, axis):
    if axis is None:
        return max(x.numel(), 1) if x.numel() else 1
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@rule("mean")
def _mean(g, out, x, axis=None, keepdims=False):
    return aten.div(_expand_back(g, x, axis, keepdims), _count(x, axis)), None, None


@rule("prod")
@uses_out
def _prod(g, out, x, axis=None, keepdims=False, *, dtype=None):
    # Note: divides by x, so zeros in x give nan gradients (documented limitation).
    return (aten.div(aten.mul(_expand_back(g, x, axis, keepdims),
                              _expand_back(out, x, axis, keepdims)), x), None, None)


@rule("var")
def _var(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    n = _count(x, axis)
    mean = aten.mean(x, axis, True)
    scale = 2.0 / max(n - correction, 1)
    return (aten.mul(aten.mul(_expand_back(g, x, axis, keepdims), aten.sub(x, mean)), scale),
            None, None)


@rule("std")
@uses_out
def _std(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    gvar = aten.div(g, aten.mul(out, 2))
    return _var(gvar, None, x, axis, keepdims, correction=correction)


def _select_extreme(g, out, x, axis, keepdims):
    """Gradient of max/min/amax/amin: split evenly among the tied extreme elements."""
    full = _expand_back(out, x, axis, keepdims)
    mask = aten.astype(aten.eq(x, full), g.dtype)
    count = _expand_back(aten.sum(mask, axis, keepdims), x, axis, keepdims)
    return aten.div(aten.mul(_expand_back(g, x, axis, keepdims), mask), count)


@rule("max", "min", "amax", "amin")
@uses_out
def _max(g, out, x, axis=None, keepdims=False):
    return _select_extreme(g, out, x, axis, keepdims), None, None


@rule("max.dim", "min.dim")
@uses_out
def _max_dim(g, out, x, dim, keepdim=False):
    return _select_extreme(g[0], out[0], x, dim, keepdim), None, None


@rule("logsumexp")
@uses_out
def _logsumexp(g, out, x, axis=None, keepdims=False):
    return (aten.mul(_expand_back(g, x, axis, keepdims),
                     aten.exp(aten.sub(x, _expand_back(out, x, axis, keepdims)))), None, None)


@rule("cumulative_sum")
def _cumsum(g, out, x, axis=None, *, dtype=None, include_initial=False):
    a = 0 if axis is None else axis
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
    rev = aten.flip(aten.cumulative_sum(aten.flip(g, a), a), a)
    return rev, None


# -- linear algebra ----------------------------------------------------------------------


@rule("matmul")
def _matmul(g, out, a, b):
    if a.ndim == 1 and b.ndim == 1:
        return aten.mul(g, b), aten.mul(g, a)
    a2 = aten.unsqueeze(a, 0) if a.ndim == 1 else a
    b2 = aten.unsqueeze(b, -1) if b.ndim == 1 else b
    g2 = g
    if a.ndim == 1:
        g2 = aten.unsqueeze(g2, -2)
    if b.ndim == 1:
        g2 = aten.unsqueeze(g2, -1)
    ga = aten.matmul(g2, aten.matrix_transpose(b2))
    gb = aten.matmul(aten.matrix_transpose(a2), g2)
    if a.ndim == 1:
        ga = aten.squeeze(ga, -2)
    if b.ndim == 1:
        gb = aten.squeeze(gb, -1)
    return sum_to(ga, a.shape), sum_to(gb, b.shape)


# -- shape and view ops -------------------------------------------------------------------


@rule("transpose")
def _transpose(g, out, x, d0, d1):
    return aten.transpose(g, d0, d1), None, None


@rule("permute")
def _permute(g, out, x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return aten.permute(g, tuple(inv)), None


@rule("matrix_transpose")
def _mt(g, out, x):
    return (aten.matrix_transpose(g),)


@rule("t")
def _t(g, out, x):
    return (aten.t(g),)


@rule("view", "reshape", "flatten", "squeeze", "unsqueeze")
def _reshape(g, out, x, *args, **kwargs):
    return (aten.reshape(g, tuple(x.shape)),) + (None,) * len(args)


@rule("expand", "broadcast_to")
def _expand(g, out, x, shape):
    return sum_to(g, x.shape), None


@rule("moveaxis")
def _moveaxis(g, out, x, source, destination):
    return aten.moveaxis(g, destination, source), None, None


@rule("flip")
def _flip(g, out, x, axis=None):
    return aten.flip(g, axis), None


@rule("roll")
def _roll(g, out, x, shift, axis=None):
    neg = -shift if isinstance(shift, int) else tuple(-s for s in shift)
    return aten.roll(g, neg, axis), None, None


def _scatter_into_zeros(x, key, g, basic):
    z = aten.zeros(tuple(x.shape), dtype=g.dtype, device=g.device)
    if basic:
        aten.index_put_(z, key, g)
        return z
    # Repeated indices accumulate (np.add.at semantics), as PyTorch's index backward.
    return _index_add(z, key, g)


def _index_add(z, key, g):
    """``z`` with ``g`` scatter-added at ``key`` (a new tensor off the CPU backend)."""
    import numpy as np
    from mdtensor.ops.indexing import _raw

    raw = _raw(key)
    if z.device.type == "cpu":
        np.add.at(z._data, raw, g._data)
        return z
    # The Array API has no scatter-add, and index + index_put_ would lose repeated indices
    # (the last write wins), so other backends accumulate on the host.
    b = z.device.backend
    parts = raw if isinstance(raw, tuple) else (raw,)
    host_key = tuple(b.to_numpy(k) if isinstance(k, b.array_type) else k for k in parts)
    acc = np.array(b.to_numpy(z._data), copy=True)
    np.add.at(acc, host_key, b.to_numpy(g._data))
    return z._device.wrap(b.asarray(acc, index=z._device.index))


@rule("basic_index")
def _basic_index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, True), None


@rule("index")
def _index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, False), None


@rule("narrow")
def _narrow(g, out, x, dim, start, length):
    z = aten.zeros(tuple(x.shape), dtype=g.dtype, device=g.device)
    d = dim % x.ndim
    start = start % x.shape[d] if start < 0 else start
    aten.index_put_(z, (slice(None),) * d + (slice(start, start + length),), g)
    return z, None, None, None


@rule("cat")
def _cat(g, out, tensors, axis=0):
    if axis is None:
        grads, start = [], 0
        for t in tensors:
            n = t.numel()
            grads.append(aten.reshape(aten.narrow(g, 0, start, n), tuple(t.shape)))
            start += n
        return grads, None
    grads, start = [], 0
    a = axis % tensors[0].ndim
    for t in tensors:
        n = t.shape[a]
        grads.append(aten.narrow(g, a, start, n))
        start += n
    return grads, None


@rule("stack")
def _stack(g, out, tensors, axis=0):
    return list(aten.unbind(g, axis % (tensors[0].ndim + 1))), None


def _list_grads(g, out, x, *rest, axis=0):
    grads = [gi if gi is not None else aten.mul(o, 0.0) for gi, o in zip(g, out)]
    return aten.cat(grads, axis)


@rule("split")
@uses_out
def _split(g, out, x, sizes, axis=0):
    return _list_grads(g, out, x, axis=axis), None, None


@rule("chunk")
@uses_out
def _chunk(g, out, x, chunks, axis=0):
    return _list_grads(g, out, x, axis=axis), None, None


@rule("unbind")
@uses_out
def _unbind(g, out, x, axis=0):
    grads = [gi if gi is not None else aten.mul(o, 0.0) for gi, o in zip(g, out)]
    return aten.stack(grads, axis), None


@rule("where")
def _where(g, out, cond, a, b):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    return (None,
            _g(aten.where(cond, g, zero), a) if hasattr(a, "_ks") else None,
            _g(aten.where(cond, zero, g), b) if hasattr(b, "_ks") else None)


@rule("masked_fill")
def _masked_fill(g, out, x, mask, value):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    gv = aten.sum(aten.where(mask, g, zero)) if hasattr(value, "_ks") else None
    return aten.where(mask, zero, g), None, gv


@rule("index_put")
def _index_put(g, out, x, key, value):
    """``x[key] = value`` (in place): the overwritten part of x gets no gradient."""
    gx = aten.clone(g)
    aten.index_put_(gx, key, 0.0)
    gv = None
    if hasattr(value, "_ks"):
        sel = aten.basic_index(g, key) if _basic(key) else aten.index(g, key)
        gv = sum_to(sel, value.shape)
    return gx, None, gv


def _basic(key):
    from mdtensor.ops.indexing import is_basic_key

    return is_basic_key(key)


@rule("take_along_axis")
def _take_along_axis(g, out, x, indices, axis=-1):
    import numpy as np

    # np.put_along_axis would drop repeated indices; np.add.at accumulates them.  Off the
    # CPU backend this runs on the host (the Array API has no scatter-add).
    b = g.device.backend
    idx = list(np.ix_(*[np.arange(s) for s in indices.shape]))
    idx[axis % x.ndim] = np.asarray(b.to_numpy(indices._data))
    acc = np.zeros(tuple(x.shape), dtype=np.asarray(b.to_numpy(g._data)).dtype)
    np.add.at(acc, tuple(idx), b.to_numpy(g._data))
    return g._device.wrap(b.asarray(acc, index=g._device.index)), None, None


@rule("astype")
def _astype(g, out, x, dtype, *, copy=True, device=None):
    return aten.astype(g, x.dtype), None


@rule("copy")
def _copy(g, out, self, src):
    gs = sum_to(g, src.shape)
    return None, gs if gs.dtype == src.dtype else aten.astype(gs, src.dtype)


@rule("conj")
def _conj(g, out, a):
    return (aten.conj(g),)


@rule("copysign")
@uses_out
def _copysign(g, out, a, b):
    s = aten.mul(aten.sign(a), aten.sign(out))
    return (_g(aten.mul(g, s), a) if hasattr(a, "_ks") else None,
            _g(aten.mul(g, 0.0), b) if hasattr(b, "_ks") else None)


def _mod_rule(rounding):
    def formula(g, out, a, b):
        gb = None
        if hasattr(b, "_ks"):
            q = rounding(aten.div(a, b))
            gb = _g(aten.neg(aten.mul(g, q)), b)
        return (_g(g, a) if hasattr(a, "_ks") else None), gb
    return formula


DERIVATIVES["remainder"] = _mod_rule(aten.floor)
DERIVATIVES["fmod"] = _mod_rule(aten.trunc)


@rule("cumulative_prod")
@uses_out
def _cumprod(g, out, x, axis=None, *, dtype=None, include_initial=False):
    # Note: divides by x (zeros in x give nan gradients), as the prod formula.
    a = 0 if axis is None else axis
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
        out = aten.narrow(out, a, 1, out.shape[a] - 1)
    rev = aten.flip(aten.cumulative_sum(aten.flip(aten.mul(g, out), a), a), a)
    return aten.div(rev, x), None


def _tile_grad(g, x, reps):
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    inter = []
    for r, s in zip(reps, shape):
        inter += [r, s]
    g = aten.reshape(g, tuple(inter))
    g = aten.sum(g, tuple(range(0, 2 * n, 2)))
    return aten.reshape(g, tuple(x.shape))


@rule("tile")
def _tile(g, out, x, reps):
    return _tile_grad(g, x, reps), None


@rule("repeat_tensor")
def _repeat_tensor(g, out, x, repeats):
    return _tile_grad(g, x, repeats), None


@rule("sort")
def _sort(g, out, x, axis=-1, descending=False, *, stable=True):
    idx = aten.argsort(x, axis, descending, stable=True)
    inverse = aten.argsort(idx, axis)
    return aten.take_along_axis(g, inverse, axis), None, None


@rule("take")
def _take(g, out, x, indices, axis=None):
    a = 0 if axis is None else axis % x.ndim
    key = (slice(None),) * a + (indices,)
    return _scatter_into_zeros(x, key, g, False), None


# -- linear algebra extension -------------------------------------------------------------

DERIVATIVES["mm"] = DERIVATIVES["bmm"] = DERIVATIVES["matmul"]


@rule("dot", "vecdot")
def _dot(g, out, a, b, axis=-1):
    ge = aten.unsqueeze(g, axis) if a.ndim > 1 else g
    return sum_to(aten.mul(ge, b), a.shape), sum_to(aten.mul(ge, a), b.shape)


@rule("outer")
def _outer(g, out, a, b):
    return aten.matmul(g, b), aten.matmul(aten.matrix_transpose(g), a)


@rule("linalg_inv")
@uses_out
def _inv(g, out, a):
    t = aten.matrix_transpose(out)
    return (aten.neg(aten.matmul(aten.matmul(t, g), t)),)


@rule("linalg_det")
@uses_out
def _det(g, out, a):
    inv_t = aten.matrix_transpose(aten.linalg_inv(a))
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(aten.mul(g, out), -1), -1), inv_t),)


@rule("linalg_solve")
@uses_out
def _solve(g, out, a, b):
    vec = b.ndim == 1
    gb = aten.linalg_solve(aten.matrix_transpose(a), g)
    if vec:
        ga = aten.neg(aten.outer(gb, out))
    else:
        ga = aten.neg(aten.matmul(gb, aten.matrix_transpose(out)))
    return ga, gb


@rule("linalg_trace")
def _trace(g, out, a, offset=0, dtype=None):
    n, m = a.shape[-2], a.shape[-1]
    eye = aten.eye(n, m, k=offset, dtype=g.dtype, device=g.device)
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(g, -1), -1), eye),)


@rule("to_device_copy")
def _to_device(g, out, x, device):
    return aten.to_device_copy(g, x.device), None


@rule("tril")
def _tril(g, out, x, k=0):
    return (aten.tril(g, k=k),)


@rule("triu")
def _triu(g, out, x, k=0):
    return (aten.triu(g, k=k),)


def _view_copy_rules() -> None:
    """``<view>_copy`` ops differentiate like their views (ops/view_copy.py)."""
    from mdtensor.ops.view_copy import VIEW_COPY

    for view, copy in VIEW_COPY.items():
        for name in [n for n in DERIVATIVES if n == view or n.startswith(view + ".")]:
            DERIVATIVES[copy + name[len(view):]] = DERIVATIVES[name]


_view_copy_rules()
