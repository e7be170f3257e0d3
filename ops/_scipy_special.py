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
"""

from __future__ import annotations

import numpy as np

__all__ = ["on_numpy", "scipy_special", "unary_kernel"]

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


def unary_kernel(name: str, generic, fix=None):
    """The impl ``impl(xp, a)`` calling ``scipy.special.<name>`` on float32 and float64
    NumPy arrays, ``generic`` (the Array API impl) on the rest or without SciPy.  It is
    both the op's impl and its CPU impl: the in-place and ``out=`` kernels, which call the
    impl, then compute what the functional CPU kernel computes.  ``fix(out)`` mends
    SciPy's result in place where its special values differ from ``generic``'s."""
    def impl(xp, a):
        if type(a) is np.ndarray and a.dtype.char in "fd":
            fn = _FOUND[name] if name in _FOUND else scipy_special(name)
            if fn is not None:
                if fix is None:
                    return fn(a)
                out = fn(a)
                if not a.ndim:  # a ufunc's 0-d result is a NumPy scalar
                    out = np.asarray(out)
                fix(out)
                return out
        return generic(xp, a)

    impl.__name__ = f"scipy_{name}"
    return impl
