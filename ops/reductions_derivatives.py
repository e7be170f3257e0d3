"""Derivative rules of the reductions and scans (``ops/reductions.py``): the gradient is
broadcast back over the reduced axes (``expand_back``); ``prod`` and ``cumulative_prod``
divide by no factor, so zeros get their gradient (Note [Products of the others] in
ops/_derivative_helpers.py)."""

from __future__ import annotations

import math

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import (
    conj_factor,
    expand_back,
    prod_of_others,
    reads,
    rule,
    uses_out,
)

__all__: list[str] = []


@rule("sum")
@reads()
def _sum(g, out, x, axis=None, keepdims=False, *, dtype=None):
    gx = expand_back(g, x, axis, keepdims)
    # sum(x, dtype=...): the gradient goes back to x's dtype (native dtypes compared: the
    # same dtype is one object, and a needless astype would only cost a copy)
    if g._data.dtype is not x._data.dtype:
        gx = aten.astype(gx, x.dtype)
    return gx, None, None


def _count(x, axis):
    if axis is None or not x.ndim:  # a 0-d tensor's axis 0 is its element
        return max(x.numel(), 1) if x.numel() else 1
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@rule("mean")
@reads()
def _mean(g, out, x, axis=None, keepdims=False):
    return aten.div(expand_back(g, x, axis, keepdims), _count(x, axis)), None, None


@rule("prod")
def _prod(g, out, x, axis=None, keepdims=False, *, dtype=None):
    # See Note [Products of the others]: no division by x, so zeros get their gradient
    gx = aten.mul(expand_back(g, x, axis, keepdims), conj_factor(prod_of_others(x, axis)))
    if gx.dtype != x.dtype:  # prod(x, dtype=...): back to x's dtype
        gx = aten.astype(gx, x.dtype)
    return gx, None, None


@rule("var")
def _var(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    n = _count(x, axis)
    mean = aten.mean(x, axis, True)
    # PyTorch's 2 / (n - correction): inf (a nan gradient) without degrees of freedom
    scale = 2.0 / (n - correction) if n != correction else math.inf
    return (aten.mul(aten.mul(expand_back(g, x, axis, keepdims), aten.sub(x, mean)), scale),
            None, None)


@rule("std")
@uses_out
def _std(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    # As PyTorch, a zero standard deviation (a constant input) gives a zero gradient, the
    # subgradient, rather than 0/0
    gvar = aten.where(aten.eq(out, 0), 0.0, aten.div(g, aten.mul(out, 2)))
    return _var(gvar, None, x, axis, keepdims, correction=correction)


def _select_extreme(g, out, x, axis, keepdims):
    """Gradient of max/min/amax/amin: split evenly among the tied extreme elements."""
    full = expand_back(out, x, axis, keepdims)
    mask = aten.astype(aten.eq(x, full), g.dtype)
    count = expand_back(aten.sum(mask, axis, keepdims), x, axis, keepdims)
    return aten.div(aten.mul(expand_back(g, x, axis, keepdims), mask), count)


@rule("max", "min", "amax", "amin")
@uses_out
def _max(g, out, x, axis=None, keepdims=False):
    return _select_extreme(g, out, x, axis, keepdims), None, None


@rule("max.dim", "min.dim")
@uses_out
@reads()  # x's shape only: the indices say where the gradient goes
def _max_dim(g, out, x, dim, keepdim=False):
    # PyTorch's value_selecting_reduction_backward: the gradient goes to the index max.dim
    # returned, not split among ties as for max(x) and amax
    if not x.ndim:
        return g[0], None, None
    d = dim % x.ndim
    idx, gv = out[1], g[0]
    if not keepdim:
        idx, gv = aten.unsqueeze(idx, d), aten.unsqueeze(gv, d)
    pos = aten.arange(x.shape[d], device=x.device)
    pos = aten.reshape(pos, (x.shape[d],) + (1,) * (x.ndim - d - 1))
    return aten.where(aten.eq(pos, idx), gv, 0.0), None, None


@rule("logsumexp")
@uses_out
def _logsumexp(g, out, x, axis=None, keepdims=False):
    return (aten.mul(expand_back(g, x, axis, keepdims),
                     aten.exp(aten.sub(x, expand_back(out, x, axis, keepdims)))), None, None)


@rule("cumulative_sum")
@reads()  # the gradient is g's reversed scan: x is not read
def _cumsum(g, out, x, axis=None, *, dtype=None, include_initial=False):
    a = 0 if axis is None else axis
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
    rev = aten.flip(aten.cumulative_sum(aten.flip(g, a), a), a)
    return rev, None


@rule("cumulative_prod")
@uses_out
def _cumprod(g, out, x, axis=None, *, dtype=None, include_initial=False):
    # As PyTorch's cumprod_backward: out / x only before the first zero of a slice (a sum of
    # that range's terms only: an output past a zero may be 0 * inf = nan); at the first
    # zero the products that skip it up to the second zero -- the product of the factors
    # before it times the cumulative products of those after it, each with its gradient,
    # the rest of the slice masked to 1 (factors) and 0 (gradients), as PyTorch masks; after
    # it nothing, as every product there has that zero in it.
    if not x.ndim:
        return (g if not include_initial else aten.reshape(aten.narrow(g, 0, 1, 1), ())), None
    a = 0 if axis is None else axis % x.ndim
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
        out = aten.narrow(out, a, 1, out.shape[a] - 1)
    if x.shape[a] <= 1:  # the product of one factor is the factor (an inf or a 0 too)
        return (g if g.dtype == x.dtype else aten.astype(g, x.dtype)), None
    zero = aten.eq(x, 0)
    seen = aten.cumulative_sum(zero, a)
    before = aten.eq(seen, 0)
    first = aten.logical_and(zero, aten.eq(seen, 1))
    to_second = aten.eq(seen, 1)  # from the first zero to the second
    after_first = aten.cumulative_prod(
        aten.where(aten.logical_and(to_second, aten.logical_not(first)), x, 1.0), a)
    before_first = aten.prod(aten.where(before, x, 1.0), a, True)
    at_first = aten.mul(aten.sum(aten.mul(after_first, aten.where(to_second, g, 0.0)), a,
                                 True), before_first)
    if at_first.dtype != g.dtype:
        at_first = aten.astype(at_first, g.dtype)
    until_zero = aten.div(_reverse_cumsum(aten.where(before, aten.mul(g, out), 0.0), a),
                          aten.where(before, x, 1.0))
    gx = aten.where(before, until_zero, aten.where(first, at_first, 0.0))
    return (gx if gx.dtype == x.dtype else aten.astype(gx, x.dtype)), None


def _reverse_cumsum(v, a):
    return aten.flip(aten.cumulative_sum(aten.flip(v, a), a), a)
