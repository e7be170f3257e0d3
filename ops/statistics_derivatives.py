"""Derivative rules of ``ops/statistics.py`` (PyTorch's formulas, in md ops).

A value selected by index (``topk``, ``kthvalue``, ``median`` along a dimension, the running
extremes) passes its gradient to the element it was taken from: ``g`` scattered at the
indices into zeros.  ``median`` of the whole tensor shares it evenly among the elements equal
to the median, as PyTorch's ``evenly_distribute_backward``.  ``logcumsumexp`` uses PyTorch's
formula: reversed ``logcumsumexp`` of ``log|g| - out``, positive and negative parts apart.
"""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from mdtensor.tensors.tensor import Tensor

from ._derivative_helpers import expand_back, reads, rule, uses_out
from .statistics import quantile_points, quantile_values

__all__: list[str] = []


def _scattered(g, x, dim, indices, keepdim=True):
    """``zeros(x.shape)`` with ``g`` added at ``indices`` along ``dim``."""
    if not x.ndim:
        return aten.reshape(g, ())
    d = dim % x.ndim
    if not keepdim:
        g, indices = aten.unsqueeze(g, d), aten.unsqueeze(indices, d)
    return aten.scatter_add(aten.zeros_like(x, dtype=g.dtype), d, indices, g)


@rule("topk")
@uses_out
@reads()
def _topk(g, out, x, k, dim=-1, largest=True, sorted=True):
    return _scattered(g[0], x, dim, out[1]), None, None, None, None


@rule("kthvalue")
@uses_out
@reads()
def _kthvalue(g, out, x, k, dim=-1, keepdim=False):
    return _scattered(g[0], x, dim, out[1], keepdim), None, None, None


@rule("median.dim")
@uses_out
@reads()
def _median_dim(g, out, x, dim, keepdim=False):
    return _scattered(g[0], x, dim, out[1], keepdim), None, None


@rule("median")
@uses_out
def _median(g, out, x):
    hit = aten.where(aten.isnan(out), aten.isnan(x), aten.eq(x, out))
    share = aten.astype(hit, g.dtype)
    return (aten.mul(share, aten.div(g, aten.sum(share))),)


@rule("cummax", "cummin")
@uses_out(1)  # the indices
@reads()
def _cumextreme(g, out, x, dim):
    return _scattered(g[0], x, dim, out[1]), None


def _reverse_logcumsumexp(v, dim):
    return aten.flip(aten.logcumsumexp(aten.flip(v, axis=(dim,)), dim), axis=(dim,))


@rule("logcumsumexp")
@uses_out
def _logcumsumexp(g, out, x, dim):
    if not x.ndim:
        return g, None
    d = dim % x.ndim
    lowest = -1.7976931348623157e308 if x.dtype.itemsize == 8 else -3.4028234663852886e38
    log_abs = aten.log(aten.abs(g))
    pos = aten.where(aten.gt(g, 0), log_abs, lowest)
    neg = aten.where(aten.lt(g, 0), log_abs, lowest)
    out_pos = aten.exp(aten.add(_reverse_logcumsumexp(aten.sub(pos, out), d), x))
    out_neg = aten.exp(aten.add(_reverse_logcumsumexp(aten.sub(neg, out), d), x))
    return aten.sub(out_pos, out_neg), None


# Note [Composite ops with CPU kernels] in ops/_cpu_reductions.py: the formulas of nansum
# and nanmean serve the CPU (the other backends differentiate their decomposition).


def _where_not_nan(gx, x):
    if x.dtype.kind in "fc":
        gx = aten.where(aten.isnan(x), 0.0, gx)
    return gx if gx.dtype == x.dtype else aten.astype(gx, x.dtype)


@rule("nansum")
def _nansum(g, out, x, dim=None, keepdim=False, *, dtype=None):
    return _where_not_nan(expand_back(g, x, dim, keepdim), x), None, None


@rule("nanmean")
def _nanmean(g, out, x, dim=None, keepdim=False, *, dtype=None):
    count = aten.sum(aten.astype(aten.logical_not(aten.isnan(x)), g.dtype), dim, keepdim)
    # a slice of NaNs only (count 0) gets no gradient: its count is taken as 1, not divided by
    count = aten.maximum(count, 1.0)
    return _where_not_nan(expand_back(aten.div(g, count), x, dim, keepdim), x), None, None


# quantile's CPU kernel (Note [The CPU kernel of quantile] in ops/statistics.py) needs the
# gradient of the decomposition it replaces: each quantile's gradient goes to the order
# statistics it blends, ``1 - w`` to the lower and ``w`` to the upper, at the positions they
# were sorted from (a stable sort's, as the decomposition's sort); a slice holding a NaN
# gets none.  A Tensor ``q`` blended linearly gets ``(upper - lower) (n - 1)``.


@rule("quantile")
def _quantile(g, out, x, q, dim=None, keepdim=False, *, interpolation="linear"):
    q_is_tensor = isinstance(q, Tensor)
    qv = quantile_values(x, q)
    src = aten.reshape(x, (-1,)) if dim is None else (x if x.ndim else aten.reshape(x, (1,)))
    d = 0 if dim is None else dim % src.ndim
    n = src.shape[d]
    order = aten.argsort(src, d, stable=True)
    kept = tuple(1 if i == d else k for i, k in enumerate(src.shape))
    g = aten.where(aten.any(aten.isnan(src), d, True), 0.0,
                   aten.reshape(g, (len(qv), *kept)))  # (quantile, *the kept shape)
    q_linear = q_is_tensor and interpolation == "linear"
    gx = aten.zeros_like(src, dtype=g.dtype)
    gq = []
    ordered = aten.sort(src, axis=d) if q_linear and q.requires_grad else None
    for i, (lo, hi, w) in enumerate(quantile_points(qv, n, interpolation)):
        gi = g[i]
        at_lo = aten.narrow(order, d, lo, 1)
        if w is None:
            gx = aten.scatter_add(gx, d, at_lo, gi)
            continue
        if q_linear:
            w = aten.sub(aten.mul(aten.reshape(q, (-1,))[i], n - 1), lo)
        gx = aten.scatter_add(gx, d, at_lo, aten.mul(gi, aten.sub(1, w) if q_linear
                                                      else 1 - w))
        gx = aten.scatter_add(gx, d, aten.narrow(order, d, hi, 1), aten.mul(gi, w))
        if ordered is not None:
            spread = aten.sub(aten.narrow(ordered, d, hi, 1), aten.narrow(ordered, d, lo, 1))
            gq.append(aten.mul(aten.sum(aten.mul(gi, spread)), n - 1))
    gq = aten.reshape(aten.stack(gq), q.shape) if gq else None
    return aten.reshape(gx, x.shape), gq, None, None
