"""The CPU kernels of reductions and scans: NumPy's C functions called directly.

Note [CPU reduction kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
On 16x16 inputs NumPy's Python-level wrappers (``np.max``, ``np.mean``, ``np.var``,
``np.cumsum``: fromnumeric's ``_wrapreduction``, ``_methods``) cost 1-8 us, more than the
reduction itself, and the generic kernel over an Array API impl adds array-api-compat's
wrappers, the bool conversion (Note [Arithmetic of bools] in ops/_bools.py) and the
emptiness checks on every call.  So the common reductions register a CPU kernel of their own
(as ``sum`` does in ops/reductions.py): ``ufunc.reduce``/``ufunc.accumulate`` or an ndarray
method, called positionally in the kernel's own frame, on the common case only -- an
n-d tensor (n > 0) of a dtype the op accepts and computes in as it is, no options the
fast path does not know.  Everything else -- 0-d tensors, other dtypes, empty tensors where
the op must look at counts, and every call NumPy refuses (an axis out of range, a repeated
axis, an empty ``max``) -- goes to the op's generic kernel, which gives the project's
errors and the uncommon cases' results: the fast path never raises an error of its own
and its results are the generic kernel's (the OpInfo sweep runs both).

Note [Composite ops with CPU kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``nansum`` and ``nanmean`` are CompositeImplicitAutograd (where, isnan, sum): on small
inputs their decomposition costs several dispatches.  As PyTorch gives ``softmax`` a kernel
and a derivative of its own, they have a CPU kernel (NumPy's computation) and a derivative
formula (ops/statistics_derivatives.py); by the dispatch table's rules (Note [Dispatch
table] in mdtensor/dispatch/operators.py) a backend with a kernel of its own gets the
formula at its Autograd key, while the others (JAX, Dask, Meta) keep the decomposition and
its gradients.  The CPU kernel hands the cases it does not compute to the decomposition,
which calls ops, and calls it with autograd excluded (the decomposition's ops record
nothing of their own): so the kernel is a leaf (``LEAF_KERNELS``, Note [Autograd kernels]
in mdtensor/layers/autograd/kernels.py), which the Autograd kernel above it calls directly
rather than through its own exclusion of autograd around every call, the common case's
too (``md.nanmean(x)`` of a 16x16 float32 tensor requiring grad: 33.7K -> 29.9K
instructions).
"""

from __future__ import annotations

from collections.abc import Callable

from mdtensor.dispatch.kernel import own_code
from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY, DispatchKey
from mdtensor.dispatch.tls import ExcludeGuard

from ._cpu_kernels import generic_kernel, register_cpu, register_cpu_kernel
from ._decl import register_leaf
from ._impl_kernels import result_tuple

__all__ = ["BOOL_CHARS", "COMPLEX_CHARS", "FLOAT_CHARS", "INT_CHARS", "REAL_CHARS",
           "register_cpu_reduction", "register_cpu_scan", "scan", "ufunc_reduction",
           "without_autograd"]

#: NumPy dtype characters by kind: the dtypes mdtensor has on NumPy (others, such as
#: ml_dtypes' bfloat16, take the generic kernel)
BOOL_CHARS = "?"
INT_CHARS = "bhilqBHILQ"
FLOAT_CHARS = "efd"
COMPLEX_CHARS = "FD"
REAL_CHARS = BOOL_CHARS + INT_CHARS + FLOAT_CHARS


def register_cpu_reduction(op, compute: Callable, chars: str, options=(), *,
                           composite: bool = False) -> None:
    """Register for ``op`` (a reduction taking ``(self, axis=None, keepdims=False, ...)``,
    whatever the two are called) the CPU kernel ``compute(x, axis, keepdims, **options)``
    -> ndarray (or NumPy scalar, or a tuple of them) for n-d arrays of the dtype characters
    ``chars`` (Note [CPU reduction kernels]); ``options``: the keyword arguments
    ``compute`` takes (others send the call to the generic kernel).  ``compute`` returns
    None for a case it leaves to the generic kernel.  ``composite``: the op is
    CompositeImplicitAutograd (``nansum``), whose decomposition is the generic kernel -- the
    op then needs a derivative formula of its own, and the CPU kernel, a leaf, calls the
    decomposition with autograd excluded (Note [Composite ops with CPU kernels])."""
    generic = (without_autograd(op.kernels_for(DispatchKey.CompositeImplicitAutograd)[-1].fn)
               if composite else generic_kernel(op))
    wanted = frozenset(chars)
    known = frozenset(options)
    result_type = result_tuple(op.schema) if op.schema.returns_tuple else None
    names = [a.name for a in op.schema.arguments[1:]]
    axis_name, keep_name = names[0], next(n for n in names if n.startswith("keepdim"))

    def kernel(a, axis=None, keepdims=False, **options):
        if options:  # the schema's own names, given by keyword (max.dim's dim=)
            axis = options.pop(axis_name, axis)
            keepdims = options.pop(keep_name, keepdims)
        x = a._data
        if x.ndim and x.dtype.char in wanted and (not options or known.issuperset(options)):
            if type(axis) is list:
                axis = tuple(axis)
            try:
                r = compute(x, axis, keepdims, **options) if options else \
                    compute(x, axis, keepdims)
            except Exception:  # the generic kernel says what was wrong
                r = None
            if r is not None:
                wrap = a._device.wrap
                return result_type(*map(wrap, r)) if result_type else wrap(r)
        options[axis_name] = axis
        options[keep_name] = keepdims
        return generic(a, **options)

    kernel = own_code(kernel, f"cpu[{op.schema.full_name}]")  # Note [Own code objects]
    register_leaf(op, kernel, DispatchKey.CPU)


def without_autograd(decomposition: Callable) -> Callable:
    """``decomposition`` called with autograd excluded: what it calls records nothing
    (Note [Composite ops with CPU kernels])."""
    def generic(*args, **kwargs):
        with ExcludeGuard(AUTOGRAD_FUNCTIONALITY):  # (a guard per call: per thread)
            return decomposition(*args, **kwargs)
    return generic


def ufunc_reduction(ufunc) -> Callable:
    """``compute`` of a reduction that is ``ufunc.reduce`` (max: ``np.maximum``); positional,
    and without ``keepdims`` unless it is asked for (the fewer arguments, the faster)."""
    reduce = ufunc.reduce

    def compute(x, axis, keepdims):
        return reduce(x, axis, None, None, True) if keepdims else reduce(x, axis)
    return own_code(compute)  # Note [Own code objects]: one per ufunc


def scan(accumulate: Callable, axis_name: str = "axis") -> Callable:
    """``compute`` of a scan for ``register_cpu_kernel`` (ops/_cpu_kernels.py):
    ``accumulate(x, axis)`` (``np.add.accumulate``) -> ndarray or a tuple of them
    (``cummax``'s values and indices),
    for the op's axis argument ``axis_name`` (``cummax(self, dim)``); the options
    (``dtype=``, ``include_initial=``) and a missing axis of an n-d tensor are the generic
    kernel's."""
    def compute(x, *args, **options):
        axis = args[0] if args else options.pop(axis_name, None)
        if options or len(args) > 1 or (axis is None and x.ndim > 1):
            return None
        return accumulate(x, axis or 0)
    return own_code(compute)  # Note [Own code objects]: one per scan


# Note [CPU scan kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A scan's commonest call is the tensor and its axis, positionally (``md.cumulative_sum(x,
# axis=1)`` reaches the kernel as ``kernel(x, 1)``): ``register_cpu_scan`` gives it a CPU
# kernel computing that call in its own frame, ``accumulate(x, axis)`` wrapped, above the
# kernel ``register_cpu_kernel`` makes from ``scan(accumulate)``, which takes every other
# call (keywords, options, a missing axis of an n-d tensor, what NumPy refuses) and is the
# computation the sweep times as NumPy's.  Without that kernel's frame and ``compute``'s,
# ``md.cumulative_sum(x, axis=1)`` of a 16x16 float32 tensor requiring grad takes 28.4K
# instructions, against 30.4K.

_MISSING = object()  # an axis the caller did not pass


def register_cpu_scan(op, accumulate: Callable, chars: str, axis_name: str = "axis") -> None:
    """Register for ``op`` (a scan taking ``(self, axis, ...)``; ``axis_name``: what the
    axis argument is called) the CPU kernel ``accumulate(x, axis)`` (``np.add.accumulate``)
    for n-d arrays of the dtype characters ``chars``, the axis given positionally and
    nothing else (Note [CPU scan kernels]); the other calls take ``scan(accumulate,
    axis_name)``'s kernel, and then the op's generic kernel."""
    register_cpu_kernel(op, scan(accumulate, axis_name), chars)
    wanted = frozenset(chars)

    def build(general):
        def kernel(a, axis=_MISSING, /, *rest, **options):
            x = a._data
            if (not rest and not options and x.ndim and x.dtype.char in wanted
                    and (x.ndim == 1 or (axis is not None and axis is not _MISSING))):
                try:  # (as ``scan``'s ``compute``: no axis is the only one of a vector)
                    return a._device.wrap(accumulate(x, 0 if axis is _MISSING else axis or 0))
                except Exception:  # noqa: BLE001 - the general kernel says what was wrong
                    pass
            if axis is _MISSING:
                return general(a, **options)
            return general(a, axis, *rest, **options)
        return own_code(kernel)  # Note [Own code objects]: one per scan
    register_cpu(op, build, DispatchKey.CPU)
