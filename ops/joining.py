"""Stacking along the first, second and third axes: ``hstack``, ``vstack``, ``dstack``,
``column_stack`` (PyTorch's and NumPy's, which agree).

Each is CompositeImplicitAutograd: its operands are brought to at least one, two or three
dimensions with ``reshape`` (NumPy's ``atleast_Nd`` rules: a vector becomes a row for
``vstack``, a ``(1, n, 1)`` slab for ``dstack``, a column for ``column_stack``) and joined
with ``cat``, so the derivative, the Meta kernel, dtype promotion and every backend come
from those two ops.
"""

from __future__ import annotations

import numpy as np

from mdtensor.dispatch.namespaces import namespaces as _namespaces

from ._composite import names_op
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import ALL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls  # the ops as plain functions (Note [Packet functions])


def _at_least(x, ndim: int):
    if x.ndim >= ndim:
        return x
    shape = tuple(x.shape)
    if ndim == 1:
        return aten.reshape(x, (1,))
    if ndim == 2:
        return aten.reshape(x, (1, *shape) if shape else (1, 1))
    # ndim == 3: (n,) -> (1, n, 1), (m, n) -> (m, n, 1)
    new = {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]
    return aten.reshape(x, new)


def _hstack(tensors):
    ts = [_at_least(t, 1) for t in tensors]
    return aten.cat(ts, 0 if ts[0].ndim == 1 else 1)


def _vstack(tensors):
    return aten.cat([_at_least(t, 2) for t in tensors], 0)


def _dstack(tensors):
    return aten.cat([_at_least(t, 3) for t in tensors], 2)


def _column_stack(tensors):
    cols = [aten.reshape(t, (t.numel(), 1)) if t.ndim <= 1 else t for t in tensors]
    return aten.cat(cols, 1)


def _samples(shapes_list):
    def samples(dtype, rng):
        return [SampleInput(([make_array(s, dtype, rng) for s in shapes],), name=str(shapes))
                for shapes in shapes_list]
    return samples


def _errors(name):
    return lambda: [ErrorInput(SampleInput(([],)), ValueError,
                               f"{name}: expected a non-empty list of Tensors")]


for _name, _fn, _ref, _shapes in (
        ("hstack", _hstack, np.hstack, [[(2,), (3,)], [(2, 3), (2, 1)], [(), ()]]),
        ("vstack", _vstack, np.vstack, [[(3,), (3,)], [(2, 3), (1, 3)], [(), ()]]),
        ("dstack", _dstack, np.dstack, [[(3,), (3,)], [(2, 3), (2, 3)], [(2, 2, 1), (2, 2)]]),
        ("column_stack", _column_stack, np.column_stack,
         [[(3,), (3,)], [(3, 2), (3,)], [(), ()]])):
    defop(f"{_name}(Tensor[] tensors) -> Tensor", composite=names_op(_name)(_fn),
          info=OpInfo(ref=_ref, dtypes=ALL, samples=_samples(_shapes), errors=_errors(_name)))
