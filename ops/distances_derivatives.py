"""Derivative rule of ``ops/distances.py``: PyTorch's ``cdist_backward``.

With ``d = x1_i - x2_j`` and ``D = dist(i, j)``, the gradient of ``D`` in ``x1_i`` is
``sign(d)`` for ``p = 1``, ``d / D`` for ``p = 2``, ``sign(d) |d|^(p-1) / D^(p-1)`` for
other ``p``, and ``sign(d)`` where ``|d| = D`` for ``p = inf``: 0 where ``D`` is 0 (and where
``d`` is, for ``p < 1``), and 0 for ``p = 0``; ``x2_j``'s is its negative.
"""

from __future__ import annotations

import math

from mdtensor.ops import aten_calls as aten

from mdtensor.layers.autograd.formulas import sum_to

from ._derivative_helpers import rule, uses_out

__all__: list[str] = []


@rule("cdist")
@uses_out
def _cdist(g, out, x1, x2, p=2.0, compute_mode=None):
    if p == 0:
        return aten.zeros_like(x1), aten.zeros_like(x2), None, None
    diff = aten.sub(aten.unsqueeze(x1, -2), aten.unsqueeze(x2, -3))  # (*, P, R, M)
    dist = aten.unsqueeze(out, -1)
    if p == 1:
        step = aten.sign(diff)
    elif p == math.inf:
        # PyTorch's 1 - min(1, ceil(||d| - D|)): 1 where |d| = D, NaN where both are inf
        gap = aten.ceil(aten.abs(aten.sub(aten.abs(diff), dist)))
        step = aten.mul(aten.sign(diff), aten.sub(1.0, aten.minimum(gap, 1.0)))
    else:
        safe = aten.where(aten.eq(dist, 0), 1.0, dist)
        step = aten.mul(aten.mul(aten.sign(diff), aten.pow(aten.abs(diff), p - 1)),
                        aten.pow(safe, 1 - p)) if p != 2 else aten.div(diff, safe)
        zero = aten.eq(dist, 0)
        if p < 1:  # |d|^(p-1) is infinite at d = 0: PyTorch's gradient is 0 there
            zero = aten.logical_or(zero, aten.eq(diff, 0))
        step = aten.where(zero, 0.0, step)
    weighted = aten.mul(step, aten.unsqueeze(g, -1))
    g1 = sum_to(aten.sum(weighted, axis=-2), tuple(x1.shape))
    g2 = sum_to(aten.neg(aten.sum(weighted, axis=-3)), tuple(x2.shape))
    return g1, g2, None, None
