"""Derivative rule of ``ops/least_squares.py``: PyTorch's ``linalg_lstsq_backward``.

The solution ``X = pinv(A) B``: ``gB = pinv(A)^H gX`` and ``gA`` is ``pinv``'s rule applied
to ``gX B^H``.  The residuals ``sum |A X - B|^2`` are stationary in ``X`` (the normal
equations), so their gradient only sees ``A`` and ``B`` directly: ``gA += 2 R X^H g``,
``gB -= 2 R g`` with ``R = A X - B``.  The rank and singular values are not differentiable.
"""

from __future__ import annotations

import math

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import DERIVATIVES, rule, uses_out

__all__: list[str] = []


def _mh(x):
    t = aten.matrix_transpose(x)
    return aten.conj(t) if x.dtype.kind == "c" else t


def _add(a, b):
    return b if a is None else a if b is None else aten.add(a, b)


def _sum_to(g, shape):
    """``g`` summed over the batch dimensions it broadcast to."""
    lead = g.ndim - len(shape)
    if lead > 0:
        g = aten.sum(g, axis=tuple(range(lead)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and g.shape[i] != 1)
    return aten.sum(g, axis=axes, keepdims=True) if axes else g


@rule("linalg_lstsq")
@uses_out
def _lstsq(g, out, a, b, rcond=None, *, driver=None):
    g_x, g_res = g[0], g[1]
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and tuple(b.shape) == tuple(a.shape[:-1]))
    bm = aten.unsqueeze(b, -1) if vector else b
    x = aten.unsqueeze(out[0], -1) if vector else out[0]
    ga = gb = None
    if g_x is not None:
        gx = aten.unsqueeze(g_x, -1) if vector else g_x
        pinv = aten.linalg_pinv(a)
        ga = DERIVATIVES["linalg_pinv"](aten.matmul(gx, _mh(bm)), pinv, a)[0]
        gb = aten.matmul(_mh(pinv), gx)
    if g_res is not None and math.prod(g_res.shape):
        r = aten.sub(aten.matmul(a, x), bm)
        w = aten.mul(aten.unsqueeze(g_res, -2), 2.0)  # one weight per column of B
        ga = _add(ga, aten.matmul(aten.mul(r, w), _mh(x)))
        gb = _add(gb, aten.neg(aten.mul(r, w)))
    if ga is not None:
        ga = _sum_to(ga, tuple(a.shape))
    if gb is not None:
        gb = _sum_to(gb, tuple(bm.shape))
        gb = aten.squeeze(gb, -1) if vector else gb
    return ga, gb, None
