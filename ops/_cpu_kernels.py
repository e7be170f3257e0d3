"""Hand-written CPU kernels: the registration they share.

Note [Hand-written CPU kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``defop(cpu_impl=...)`` (Note [NumPy fast impls] in ops/_decl.py) serves ops whose
Tensor arguments come first and whose operands the accepted-dtype check can see.  Ops whose
Tensors lie elsewhere in the schema (``index_select(self, dim, index)``), whose common case
is a few checks away from one NumPy call, or whose functional form is a composite
(``masked_fill``) get a CPU kernel written by hand instead: it computes the common case
directly on the arrays -- operands on one device, of the dtypes and shapes the op expects --
and hands every other call, unchanged, to the kernel the op had (its ArrayAPI kernel, or
its CompositeExplicitAutograd one), whose checks raise the op's errors.  So the errors,
the other backends and the Meta kernels stay as they were, and the OpInfo sweep and the
differential tests compare the fast case against the same references.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np

from mdtensor.dispatch.callers import _NO
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.tensors.tensor import Tensor

from ._decl import register_leaf
from ._impl_kernels import result_tuple

__all__ = ["generic_kernel", "np_concatenate", "register_arrays_direct", "register_cpu",
           "register_cpu_kernel", "register_direct", "register_list_direct"]

#: the dtype kinds the direct kernels compute: not bool, nor ml_dtypes' bfloat16 (kind 'V',
#: whose products and norms round through float32 in the generic kernels)
_KINDS = "iufc"

#: NumPy's C concatenate, ``np.concatenate``'s ``_implementation`` (NumPy >= 1.25), for the
#: joins' kernels: ``np.concatenate`` runs its ``__array_function__`` dispatcher, a Python
#: frame, first
np_concatenate = getattr(np.concatenate, "_implementation", np.concatenate)


def generic_kernel(op) -> Callable:
    """The kernel ``op`` has for the ArrayAPI key (from its ``impl``)."""
    return op.kernels_for(DispatchKey.ArrayAPI)[-1].fn


def register_cpu(op, build: Callable, fallback: DispatchKey = DispatchKey.ArrayAPI,
                 record: Callable | None = None) -> None:
    """Register ``build(generic)`` as ``op``'s CPU kernel, where ``generic`` is the kernel
    ``op`` has for ``fallback`` (Note [Hand-written CPU kernels]); ``record(xp, *arrays,
    **kwargs)``, where given, is the kernel's NumPy computation for the sweep (as
    ``register_direct``'s ``direct``)."""
    kernel = build(op.kernels_for(fallback)[-1].fn)
    kernel.__qualname__ = kernel.__name__ = f"cpu[{op.name}]"
    register_leaf(op, kernel, DispatchKey.CPU)
    if record is not None:
        _record(op, record)


def register_direct(op, direct: Callable, arity: int = 1) -> None:
    """Register a CPU kernel of ``op`` computing the common case on its arrays:
    ``direct(*arrays, *rest, **kwargs)`` -- the op's ``arity`` leading Tensor arguments as
    arrays, the other arguments as given -- returns the result (an array, or a tuple of
    arrays for an op returning several Tensors), or None where the generic kernel must
    decide (Note [Hand-written CPU kernels]).  Operands on different devices, bool or
    bfloat16 ones go to the generic kernel."""
    result = len(op.schema.returns) > 1 and (lambda d, out: tuple(d.wrap(o) for o in out))

    def build(generic):
        if arity == 2:
            def kernel(a, b, /, *rest, **kwargs):
                d = a._device
                x, y = a._data, b._data
                if b._device is d and x.dtype.kind in _KINDS and y.dtype.kind in _KINDS:
                    # (no star call where nothing follows the operands: Note [Star calls]
                    # in mdtensor/dispatch/callers.py)
                    out = direct(x, y, *rest, **kwargs) if rest or kwargs else direct(x, y)
                    if out is not None:
                        return result(d, out) if result else d.wrap(out)
                if rest or kwargs:
                    return generic(a, b, *rest, **kwargs)
                return generic(a, b)
        else:
            def kernel(a, /, *rest, **kwargs):
                x = a._data
                if x.dtype.kind in _KINDS:
                    out = direct(x, *rest, **kwargs) if rest or kwargs else direct(x)
                    if out is not None:
                        d = a._device
                        return result(d, out) if result else d.wrap(out)
                if rest or kwargs:
                    return generic(a, *rest, **kwargs)
                return generic(a)
        return kernel

    register_cpu(op, build)
    _record(op, lambda xp, *args, **kwargs: direct(*args, **kwargs))


def register_arrays_direct(op, direct: Callable) -> None:
    """Register a CPU kernel of ``op`` (Tensors and optional Tensors anywhere among its
    positional arguments, at least one of them not optional, no Tensor lists) computing
    the common case on its arrays: ``direct(*arguments)`` -- the Tensors as their arrays,
    on one device, None as None, the other arguments as given -- returns the result (an
    array, or a tuple of arrays and None for an op returning several Tensors), or None
    where the generic kernel must decide; so does an exception, the generic kernel saying
    what was wrong (Note [Hand-written CPU kernels]).  Calls with keywords, or without
    every argument up to the last Tensor, go to the generic kernel: the op's CPU kernel
    where it has one (from its ``cpu_impl``), else its ArrayAPI kernel.  ``direct`` checks
    dtypes itself.

    The kernel is most of what mdtensor adds to ``direct``'s own time, so it is written
    for it: the device is the first non-optional Tensor's, and two or three results are
    wrapped without a comprehension's frame (0.3 us of ``nll_loss_forward``'s 1.5)."""
    schema = op.schema
    positions = schema.tensor_arg_indices
    last = positions[-1]
    first = next(i for i in positions if not schema.arguments[i].type.optional)
    several = len(schema.returns) if len(schema.returns) > 1 else 0
    make = _tuple_maker(op)

    def build(generic):
        def kernel(*args, **kwargs):
            if not kwargs and len(args) > last and type(t := args[first]) is Tensor:
                d = t._device
                arrays = list(args)
                for i in positions:
                    t = args[i]
                    if t is not None:
                        if type(t) is not Tensor or t._device is not d:
                            break
                        arrays[i] = t._data
                else:
                    try:
                        out = direct(*arrays)
                    except Exception:  # the generic kernel says what was wrong
                        out = None
                    if out is not None:
                        wrap = d.wrap
                        if not several:
                            return wrap(out)
                        if several == 2:
                            a, b = out
                            return make((None if a is None else wrap(a),
                                         None if b is None else wrap(b)))
                        if several == 3:
                            a, b, c = out
                            return make((None if a is None else wrap(a),
                                         None if b is None else wrap(b),
                                         None if c is None else wrap(c)))
                        return make([None if o is None else wrap(o) for o in out])
            return generic(*args, **kwargs)
        return kernel

    register_cpu(op, build, DispatchKey.CPU if op.kernels_for(DispatchKey.CPU)
                 else DispatchKey.ArrayAPI)
    _record(op, lambda xp, *args, **kwargs: direct(*args, **kwargs))


def _tuple_maker(op) -> Callable:
    """``make(iterable)`` -> the op's result tuple, made by C calls: a named tuple's class
    through ``tuple.__new__`` (its own ``__new__`` is a Python frame)."""
    named = result_tuple(op.schema)
    return functools.partial(tuple.__new__, named) if isinstance(named, type) else tuple


def register_list_direct(op, direct: Callable, rank: int = 0, lift: Callable | None = None,
                         ) -> None:
    """Register a CPU kernel of ``op`` (a Tensor list first: ``cat``, ``stack``, ``hstack``)
    computing the common case on its arrays: ``direct(arrays, *rest, **kwargs)`` -> array;
    None, a ValueError or a TypeError where the generic kernel must decide (Note
    [Hand-written CPU kernels]), so ``direct`` may be NumPy's C function itself.  Only a
    list of plain Tensors of one device and one dtype reaches ``direct``: mixed dtypes
    promote by the project's rules, not NumPy's.  An array of fewer than ``rank``
    dimensions is passed as ``lift(array)``.  Unwrapping the list here rather than through
    the generic kernel saves a third of a small join."""
    def build(generic):
        # ``b``, the argument after the list (cat's and stack's axis), is named so that the
        # common calls forward no ``*rest`` (Note [Star calls])
        def kernel(tensors, b=_NO, /, *rest, **kwargs):
            if tensors:
                first = tensors[0]
                if type(first) is Tensor:
                    d, dt = first._device, first._data.dtype
                    arrays = []
                    for t in tensors:
                        if type(t) is not Tensor or t._device is not d:
                            break
                        a = t._data
                        if a.dtype is not dt and a.dtype != dt:
                            break
                        arrays.append(lift(a) if rank and a.ndim < rank else a)
                    else:
                        try:
                            if b is _NO:
                                out = direct(arrays, **kwargs) if kwargs else direct(arrays)
                            elif rest or kwargs:
                                out = direct(arrays, b, *rest, **kwargs)
                            else:
                                out = direct(arrays, b)
                        except (ValueError, TypeError):  # the generic kernel's error
                            out = None
                        if out is not None:
                            return d.wrap(out)
            if b is _NO:
                return generic(tensors, **kwargs)
            return generic(tensors, b, *rest, **kwargs)
        return kernel

    register_cpu(op, build)
    _record(op, lambda xp, arrays, *rest, **kwargs: direct(
        [a if a.ndim >= rank else lift(a) for a in arrays], *rest, **kwargs))


def _record(op, cpu_impl: Callable) -> None:
    """Keep ``cpu_impl(xp, *arrays_and_arguments)`` (None: the generic kernel decides) as
    the op's NumPy computation, which ``python -m benchmarks --sweep`` times as the backend's
    own call."""
    decl = getattr(op, "decl", None)
    if decl is not None and op in decl.functional and decl.cpu_impl is None:
        decl.cpu_impl = cpu_impl


def register_cpu_kernel(op, compute: Callable, chars: str) -> None:
    """Register for ``op`` (of one Tensor, ``self``, first) the CPU kernel ``compute(x,
    *args, **kwargs)`` -> ndarray (or NumPy scalar, or a tuple of them), taking the op's
    other arguments as the kernel gets them, for n-d arrays of the dtype characters
    ``chars``; None (or an exception) sends the call to the generic kernel (Note [CPU
    reduction kernels] in ops/_cpu_reductions.py).  For ops whose arguments are not a
    reduction's or a scan's."""
    wanted = frozenset(chars)
    make = _tuple_maker(op) if op.schema.returns_tuple else None

    def build(generic):
        # ``b``, the argument after ``self`` (a scan's dim, topk's k), is named so that the
        # common calls of two arguments forward no ``*args`` (Note [Star calls])
        def kernel(a, b=_NO, /, *args, **kwargs):
            x = a._data
            if x.ndim and x.dtype.char in wanted:
                try:
                    if args or kwargs:
                        r = (compute(x, *args, **kwargs) if b is _NO else
                             compute(x, b, *args, **kwargs))
                    else:
                        r = compute(x) if b is _NO else compute(x, b)
                except Exception:  # the generic kernel says what was wrong
                    r = None
                if r is not None:
                    wrap = a._device.wrap
                    if make is None:
                        return wrap(r)
                    if len(r) == 2:  # values and indices: no map (0.2 us of cummax's 6)
                        v, i = r
                        return make((wrap(v), wrap(i)))
                    return make(map(wrap, r))
            if b is _NO:
                return generic(a, *args, **kwargs)
            return generic(a, b, *args, **kwargs)
        return kernel

    register_cpu(op, build)
    _record(op, lambda xp, x, *args, **kwargs: compute(x, *args, **kwargs))
