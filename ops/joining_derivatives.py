"""Derivative rules of the stacking ops (``ops/joining.py``): the gradient narrowed back to
each operand's part of the result, in the operand's shape and dtype (Note [Stacking
kernels])."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import in_dtype_of, reads, rule
from .joining import joined

__all__: list[str] = []


def _stacked(name):
    @rule(name)
    @reads()
    def formula(g, out, tensors):
        new, a, _ = joined(name, [t.shape for t in tensors])
        grads, start = [], 0
        for t, s in zip(tensors, new):
            n = s[a]
            gx = aten.narrow(g, a, start, n)
            shape = tuple(t.shape)
            grads.append(in_dtype_of(gx if shape == s else aten.reshape(gx, shape), t))
            start += n
        return (grads,)
    return formula


for _name in ("hstack", "vstack", "dstack", "column_stack"):
    _stacked(_name)
