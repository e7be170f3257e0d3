"""``*_copy`` ops: the non-aliasing twin of every view op (``transpose_copy.int``, ...).

``md.func.functionalize(f, remove="mutations_and_views")`` runs these instead of views, so a
trace of the functionalized program holds no aliasing at all (PyTorch generates its
``view_copy`` ops the same way).  Each is generated from its view op's declaration: the
schema without alias annotations, the view's impl followed by a copy (on NumPy its NumPy
impl, or the generic one, followed by ``ndarray.copy``), the view's meta function, OpInfo
data and derivative formula.  They are reachable as ``md.ops.aten.<view>_copy`` only (not
in the ``md`` namespace).
"""

from __future__ import annotations

import re

from mdtensor.dispatch.keys import DispatchKey

from ._decl import CATALOGUE, defop

__all__ = ["VIEW_COPY"]

#: view op packet name -> its ``_copy`` packet name
VIEW_COPY: dict[str, str] = {}

_ALIAS = re.compile(r"Tensor\([a-z]+(?: -> \*)?!?\)")


def _copying(impl):
    def impl_copy(xp, *args, **kwargs):
        r = impl(xp, *args, **kwargs)
        if isinstance(r, (list, tuple)):
            return type(r)(xp.asarray(a, copy=True) for a in r)
        return xp.asarray(r, copy=True)

    impl_copy.__name__ = impl_copy.__qualname__ = f"{impl.__name__}_copy"
    return impl_copy


def _np_copying(impl):
    """The CPU twin of ``_copying``: the view op's NumPy impl (Note [NumPy fast impls] in
    ops/_decl.py), then ``ndarray.copy`` (row-major, as PyTorch's ``*_copy`` results)."""
    def impl_copy(xp, *args, **kwargs):
        r = impl(xp, *args, **kwargs)
        if type(r) is list:  # (a list comprehension: no generator frame per piece)
            return [a.copy() for a in r]
        if isinstance(r, tuple):
            return tuple(a.copy() for a in r)
        return r.copy()

    impl_copy.__name__ = impl_copy.__qualname__ = f"{impl.__name__}_copy"
    return impl_copy


def _cpu_impl(op, generic):
    """The CPU impl of the ``_copy`` of view overload ``op``: its NumPy impl where it
    declared one whose kernel exposes it (one Tensor first: ``array_impl``, or
    ``list_impl`` for a list of views), else its
    ``generic`` impl, followed by ``ndarray.copy``."""
    for k in op.kernels_for(DispatchKey.CPU):
        impl = getattr(k.fn, "array_impl", None) or getattr(k.fn, "list_impl", None)
        if impl is not None:
            return _np_copying(impl)
    return _np_copying(generic)


def _declare() -> None:
    views = [d for d in CATALOGUE.values()
             if d.overloads and d.overloads[0].schema.namespace == "aten"
             and all(o.schema.is_view for o in d.functional) and d.functional]
    for decl in views:
        copy_decl = None
        for op in decl.functional:
            schema = str(op.schema)
            head, _, rest = schema.partition("(")
            name, dot, ov = head.partition(".")
            text = f"{name}_copy{dot}{ov}({_ALIAS.sub('Tensor', rest)}"
            copy_decl = defop(text, impl=_copying(decl.impl), meta=decl.meta, names=(),
                              cpu_impl=_cpu_impl(op, decl.impl),
                              info=decl.info if copy_decl is None else None,
                              decl=copy_decl, kwarg_aliases=decl.kwarg_aliases)
        VIEW_COPY[decl.name] = copy_decl.name


_declare()
