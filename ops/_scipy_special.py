"""SciPy's special functions as NumPy kernels of mdtensor's (``scipy.special``'s C ufuncs).

Note [SciPy on NumPy]
~~~~~~~~~~~~~~~~~~~~~
The special functions (``erf``, ``erfc``, ``erfinv``, ``lgamma``, ``digamma``,
``polygamma``, ``sigmoid``, exact ``gelu``) are written once against the Array API
(ops/_special.py, ops/_gamma.py): dozens of array operations each, 60-150 us on a 16x16
array.  On NumPy, ``scipy.special`` has the same functions as C ufuncs (1-15 us), so where
SciPy imports the CPU kernels call them for float32 and float64 arrays (its loops for
other dtypes compute in float32 or float64 and would change the result's dtype); other
dtypes, the other backends and an install without SciPy keep the Array API kernel.  SciPy
is an optional dependency: it is imported by the first call that wants it, never by
``import mdtensor``.  The two agree within the OpInfo tolerances, which the sweep checks on
both; where SciPy's special values differ from PyTorch's (``digamma(-inf)``, ...) the kernel
that calls it says so and fixes them.

The CPU kernels (``cpu_unary``) are written by hand (Note [Hand-written CPU kernels] in
ops/_cpu_kernels.py): a float32 or float64 array goes to the ufunc in the kernel's own
frame, as a ``Ufunc`` kernel's does (``defop(cpu_impl=...)`` would put the accepted-dtype
check and the impl's frame between them, 0.4 us of a 1.8 us call); everything else is the
op's generic kernel's.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cpu_unary", "on_numpy", "scipy_special", "unary_kernel"]

#: ufunc name -> the ufunc, or None where SciPy (or the function) is missing
_FOUND: dict = {}


def scipy_special(name: str):
    """``scipy.special.<name>``, or None without SciPy (Note [SciPy on NumPy])."""
    try:
        return _FOUND[name]
    except KeyError:
        pass
    try:
        from scipy import special
    except ImportError:
        special = None
    fn = _FOUND[name] = getattr(special, name, None)
    return fn


def on_numpy(a) -> bool:
    """Whether ``a`` is a float32 or float64 NumPy array, which SciPy's ufuncs serve."""
    return type(a) is np.ndarray and a.dtype.char in "fd"


def unary_kernel(name: str, generic, lowest=None):
    """The impl ``impl(xp, a)`` calling ``scipy.special.<name>`` on float32 and float64
    NumPy arrays, ``generic`` (the Array API impl) on the rest or without SciPy.  It is
    both the op's impl and its CPU impl: the in-place and ``out=`` kernels, which call the
    impl, then compute what the functional CPU kernel computes.  ``lowest``: ``{dtype
    char: 0-d array}``, the least argument SciPy's function is given (``maximum(a,
    lowest)`` instead of ``a``), where its special values below it differ from
    ``generic``'s."""
    def impl(xp, a):
        if type(a) is np.ndarray and a.dtype.char in "fd":
            fn = _FOUND[name] if name in _FOUND else scipy_special(name)
            if fn is not None:
                return fn(a) if lowest is None else fn(np.maximum(a, lowest[a.dtype.char]))
        return generic(xp, a)

    impl.__name__ = f"scipy_{name}"
    return impl


def cpu_unary(name: str, lowest=None):
    """``build(generic)`` for ``register_cpu``: the CPU kernel of a unary op that is
    ``scipy.special.<name>`` on float32 and float64 arrays (``lowest`` as
    ``unary_kernel``'s), ``generic`` on the rest and without SciPy (Note [SciPy on
    NumPy])."""
    def build(generic):
        def kernel(a):
            x = a._data
            if type(x) is np.ndarray and x.dtype.char in "fd":
                fn = _FOUND.get(name) or scipy_special(name)
                if fn is not None:
                    if lowest is None:
                        return a._device.wrap(fn(x))
                    if not x.ndim:
                        return a._device.wrap(fn(np.maximum(x, lowest[x.dtype.char])))
                    t = np.maximum(x, lowest[x.dtype.char])
                    return a._device.wrap(fn(t, t))  # (out positionally: no keyword parsing)
            return generic(a)
        return kernel
    return build
