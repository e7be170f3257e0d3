"""Derivative rules of the nn ops (``ops/nn.py``): the activations, ``softmax`` and
``log_softmax``, and the backward ops those formulas call (Note [Backward ops] in
ops/nn.py), which are differentiated again for double backward."""

from __future__ import annotations

import math

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import (
    analytic,
    reads,
    real_floats,
    rule,
    uses_out,
)

__all__: list[str] = []


@rule("relu")
@uses_out
@reads()  # the output only
def _relu(g, out, a):
    # PyTorch's threshold_backward: zero where out <= 0, so a nan passes the gradient
    return (aten.threshold_backward(g, out, 0),)


@rule("threshold_backward")
@reads(1)  # self, for the mask
def _threshold_backward(c, out, g, x, threshold):
    # linear in grad_output; piecewise constant in self (zero gradient, as PyTorch's)
    return aten.threshold_backward(c, x, threshold), None, None


@rule("silu")
@analytic
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
    cdf = aten.mul(aten.add(aten.erf(aten.mul(a, _SQRT1_2)), 1), 0.5)
    pdf = aten.mul(aten.exp(aten.mul(aten.mul(a, a), -0.5)), 1 / math.sqrt(2 * math.pi))
    return (aten.mul(g, aten.add(cdf, aten.mul(a, pdf))),)


_SQRT1_2 = 1 / math.sqrt(2.0)


@rule("softmax")
@uses_out
@reads()  # the output only
def _softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    if real_floats(out, g):
        return aten._softmax_backward_data(g, out, dim), None
    s = aten.sum(aten.mul(g, out), dim, True)
    return aten.mul(out, aten.sub(g, s)), None


@rule("log_softmax")
@uses_out
@reads()  # the output only
def _log_softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    if real_floats(out, g):
        return aten._log_softmax_backward_data(g, out, dim), None
    return aten.sub(g, aten.mul(aten.exp(out), aten.sum(g, dim, True))), None


# Derivatives of the backward ops (Note [Backward ops] in ops/nn.py), for double backward.


@rule("tanh_backward")
def _tanh_backward(c, out, g, y):
    # f = g * (1 - y^2)
    return aten.tanh_backward(c, y), aten.mul(aten.mul(c, g), aten.mul(y, -2.0))


@rule("sigmoid_backward")
def _sigmoid_backward(c, out, g, y):
    # f = g * y * (1 - y)
    return aten.sigmoid_backward(c, y), aten.mul(aten.mul(c, g), aten.sub(1, aten.mul(y, 2.0)))


@rule("_softmax_backward_data")
def _softmax_backward_data(c, out, g, y, dim):
    # f = y * g - y * S(g * y), S summing over dim (kept)
    gy = aten.sum(aten.mul(g, y), dim, True)
    cy = aten.sum(aten.mul(c, y), dim, True)
    grad_y = aten.sub(aten.mul(c, aten.sub(g, gy)), aten.mul(g, cy))
    return aten._softmax_backward_data(c, y, dim), grad_y, None


@rule("_log_softmax_backward_data")
def _log_softmax_backward_data(c, out, g, y, dim):
    # f = g - exp(y) * S(g)
    e = aten.exp(y)
    grad_g = aten.sub(c, aten.sum(aten.mul(e, c), dim, True))
    grad_y = aten.neg(aten.mul(aten.mul(c, e), aten.sum(g, dim, True)))
    return grad_g, grad_y, None
