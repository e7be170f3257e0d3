"""Derivative rules of ``sort`` and ``diff`` (``ops/searching.py``): sorting passes the
gradient back through the inverse permutation; ``diff``'s is the difference of the gradient
padded on either side, split among ``prepend``, the input and ``append``."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import (
    rule,
    uses_out,
)

__all__: list[str] = []


@rule("sort")
def _sort(g, out, x, axis=-1, descending=False, *, stable=True):
    if not x.ndim:  # sorting one element moves nothing
        return g, None, None
    idx = aten.argsort(x, axis, descending, stable=True)
    inverse = aten.argsort(idx, axis)
    return aten.take_along_axis(g, inverse, axis), None, None


@rule("sort.dim")
@uses_out
def _sort_dim(g, out, x, dim=-1, descending=False, *, stable=None):
    # scatter the values' gradient back through the indices: g at the inverse permutation
    if x.ndim == 0:
        return g[0], None, None
    return aten.take_along_axis(g[0], aten.argsort(out[1], dim), dim), None, None


@rule("diff")
def _diff(g, out, x, axis=-1, n=1, *, prepend=None, append=None):
    if n == 0:  # the input itself: prepend and append are not used (NumPy, PyTorch)
        return g, None, None, {"prepend": None, "append": None}
    parts = [t for t in (prepend, x, append) if t is not None]
    a = axis % x.ndim
    for _ in range(n):
        # y = z[1:] - z[:-1] along a  =>  dz = pad(g, before) - pad(g, after)
        zero = aten.zeros(tuple(1 if i == a else s for i, s in enumerate(g.shape)),
                          dtype=g.dtype, device=g.device)
        g = aten.sub(aten.cat([zero, g], axis=a), aten.cat([g, zero], axis=a))
    grads, start = [], 0
    for t in parts:
        width = t.shape[a] if t.ndim else 1  # a 0-d prepend/append is one slice
        gt = aten.narrow(g, a, start, width)
        grads.append(gt if t.ndim else aten.sum(gt))
        start += width
    gx = grads[1] if prepend is not None else grads[0]
    # See Note [Keyword-only Tensor arguments] in mdtensor/layers/autograd/kernels.py
    return gx, None, None, {"prepend": grads[0] if prepend is not None else None,
                            "append": grads[-1] if append is not None else None}
