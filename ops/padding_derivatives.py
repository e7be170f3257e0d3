"""Derivative rule of ``pad`` (ops/padding.py), which the CPU's own kernel needs (Note [The
CPU kernel of pad]; other backends differentiate the composite): a constant pad's gradient
is the gradient padded by the negated amounts (what was added is cropped, what was cropped
comes back as zeros), the other modes' the sum of the gradient over the positions each
element was taken to (``index_add`` along each padded dimension, the last padded first)."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import reads, rule
from .padding import indices

__all__: list[str] = []


@rule("pad")
@reads()
def _pad(g, out, x, pad, mode="constant", value=None):
    from mdtensor.tensors.factories import asarray

    if mode == "constant":
        return aten.pad(g, [-int(p) for p in pad]), None, None, None
    shape = list(x.shape)
    for i in reversed(range(len(pad) // 2)):
        d = len(shape) - 1 - i
        n = shape[d]
        idx = asarray(indices(mode, n, int(pad[2 * i]), int(pad[2 * i + 1])), device=g.device)
        like = list(g.shape)
        like[d] = n
        g = aten.index_add(aten.zeros(tuple(like), dtype=g.dtype, device=g.device), d, idx, g)
    return g, None, None, None
