"""Stacking along the first, second and third axes: ``hstack``, ``vstack``, ``dstack``,
``column_stack`` (PyTorch's and NumPy's, which agree).

Note [Stacking kernels]
~~~~~~~~~~~~~~~~~~~~~~~
Each op brings its operands to at least one, two or three dimensions (NumPy's
``atleast_Nd`` rules: a vector becomes a row for ``vstack``, a ``(1, n, 1)`` slab for
``dstack``, a column for ``column_stack``) and joins them along one axis (``joined``).
The ops have kernels of their own -- an impl against the Array API, a CPU kernel (Note
[Hand-written CPU kernels] in ops/_cpu_kernels.py), a Meta kernel and a derivative formula
that narrows the gradient back to each operand (ops/joining_derivatives.py) -- because the composite
of ``reshape`` and ``cat`` redispatched an op per operand and recorded a node per operand
(8-12 us where PyTorch takes 1.5-2.5).  The composite stays registered
(CompositeImplicitAutograd) for what decomposes: modes, functionalization, ``vmap``.
"""

from __future__ import annotations

import numpy as np

from mdtensor._dtypes import result_type
from mdtensor.dispatch.namespaces import namespaces as _namespaces

from ._composite import names_op
from ._cpu_kernels import np_concatenate, register_list_direct
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._promotion import dtype_of
from ._samples import make_array
from .elementwise import ALL

__all__ = ["joined"]

aten = _namespaces.aten._calls  # the ops as plain functions (Note [Packet functions])


def _hstack_shape(s: tuple) -> tuple:
    return s if s else (1,)


def _vstack_shape(s: tuple) -> tuple:
    n = len(s)
    return s if n >= 2 else (1, *s) if n else (1, 1)


def _dstack_shape(s: tuple) -> tuple:
    n = len(s)
    return s if n >= 3 else (*s, 1) if n == 2 else (1, *s, 1) if n else (1, 1, 1)


def _column_shape(s: tuple) -> tuple:
    if len(s) >= 2:
        return s
    return (s[0] if s else 1, 1)


#: op name -> (the shape an operand of shape ``s`` takes, the axis of the join given the
#: first operand's new rank)
_JOINS = {
    "hstack": (_hstack_shape, lambda ndim: 0 if ndim == 1 else 1),
    "vstack": (_vstack_shape, lambda ndim: 0),
    "dstack": (_dstack_shape, lambda ndim: 2),
    "column_stack": (_column_shape, lambda ndim: 1),
}


def joined(name: str, shapes) -> tuple[list, int, tuple]:
    """``(new shapes, axis, result shape)`` of stacking operands of ``shapes`` with
    ``name`` (Note [Stacking kernels]); raises ValueError naming the op where the shapes
    do not join."""
    if not shapes:
        raise ValueError(f"{name}: expected a non-empty list of Tensors")
    shape_of, axis_of = _JOINS[name]
    new = [shape_of(tuple(s)) for s in shapes]
    first = new[0]
    a = axis_of(len(first))
    out = list(first)
    for s in new[1:]:
        if len(s) != len(first) or any(s[i] != first[i] for i in range(len(s)) if i != a):
            raise ValueError(f"{name}: the tensors, as {len(first)}-d tensors, must have the "
                             f"same shape except in dimension {a}; got {first} and {s}")
        out[a] += s[a]
    return new, a, tuple(out)


def _meta(name):
    def meta(tensors):
        return joined(name, [t.shape for t in tensors])[2], result_type(*tensors)
    return meta


def _impl(name):
    def impl(xp, tensors):
        new, a, _ = joined(name, [t.shape for t in tensors])
        dtypes = [dtype_of(t) for t in tensors]
        target = result_type(*dtypes)
        native = getattr(xp, target.name)
        return xp.concat([xp.reshape(t if d is target else xp.astype(t, native), s)
                          for t, d, s in zip(tensors, dtypes, new)], axis=a)
    return impl


# The CPU kernels (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py): operands of one
# dtype on one device, those of fewer dimensions than the op wants lifted to them (views),
# joined by one NumPy concatenate, which checks the shapes itself.  Mixed dtypes (promoted by
# the project's rules, not NumPy's) and anything NumPy refuses go to the ArrayAPI kernel,
# which raises the op's own error (``register_list_direct`` in ops/_cpu_kernels.py).


def _lift_1d(a):
    return a.reshape(1)


def _lift_row(a):
    return a[None] if a.ndim else a.reshape(1, 1)


def _lift_column(a):
    return a[:, None] if a.ndim else a.reshape(1, 1)


def _lift_slab(a):
    n = a.ndim
    return a[:, :, None] if n == 2 else a[None, :, None] if n else a.reshape(1, 1, 1)


def _numpy_join(axis_of):
    """The CPU kernel's computation on the lifted arrays, of one dtype (None: the generic
    kernel decides)."""
    def compute(arrays):
        return np_concatenate(arrays, axis_of(arrays[0].ndim))
    return compute


#: op name -> (the rank its operands are lifted to, the lift, the axis given the rank:
#: ``_JOINS``'s)
_CPU_JOINS = {name: (need, lift, _JOINS[name][1]) for name, need, lift in (
    ("hstack", 1, _lift_1d), ("vstack", 2, _lift_row), ("dstack", 3, _lift_slab),
    ("column_stack", 2, _lift_column))}


# The composites (CompositeImplicitAutograd: what decomposes, Note [Stacking kernels])


def _composite(name):
    def composite(tensors):
        new, a, _ = joined(name, [t.shape for t in tensors])
        return aten.cat([t if tuple(t.shape) == s else aten.reshape(t, s)
                         for t, s in zip(tensors, new)], a)
    return names_op(name)(composite)


def _samples(shapes_list):
    def samples(dtype, rng):
        return [SampleInput(([make_array(s, dtype, rng) for s in shapes],), name=str(shapes))
                for shapes in shapes_list]
    return samples


def _errors(name):
    return lambda: [ErrorInput(SampleInput(([],)), ValueError,
                               f"{name}: expected a non-empty list of Tensors")]


for _name, _ref, _shapes in (
        ("hstack", np.hstack, [[(2,), (3,)], [(2, 3), (2, 1)], [(), ()]]),
        ("vstack", np.vstack, [[(3,), (3,)], [(2, 3), (1, 3)], [(), ()], [(1, 2), (2,)]]),
        ("dstack", np.dstack,
         [[(3,), (3,)], [(2, 3), (2, 3)], [(2, 2, 1), (2, 2)], [(), ()], [(1, 2, 1), (2,)]]),
        ("column_stack", np.column_stack,
         [[(3,), (3,)], [(3, 2), (3,)], [(), ()], [(2,), (2, 2)]])):
    _decl = defop(f"{_name}(Tensor[] tensors) -> Tensor", impl=_impl(_name), meta=_meta(_name),
                  composite=_composite(_name),
                  info=OpInfo(ref=_ref, dtypes=ALL, samples=_samples(_shapes),
                              errors=_errors(_name)))
    _need, _lift, _axis_of = _CPU_JOINS[_name]
    register_list_direct(_decl.functional[0], _numpy_join(_axis_of), _need, _lift)
