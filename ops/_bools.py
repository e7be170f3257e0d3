"""Bool tensors where the Array API specifies numbers only.

Note [Arithmetic of bools]
~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch and NumPy add, multiply, compare and reduce bool tensors (``True + True`` is True,
``max`` of bools is ``any``, ``sum`` counts, ``isfinite`` of a bool is True); the Array API
specifies these functions for numeric dtypes only, and array_api_strict refuses bools.  So
the generic kernels of those ops compute on bools as small integers (``as_numbers``) and,
where the op's result is bool, give the truth of the result back (``!= 0``): the same
values as NumPy's on every backend.  NumPy's and JAX's own kernels take bools as they are;
the conversion runs only when every array operand is bool, which costs one dtype test on
the generic path.
"""

from __future__ import annotations

__all__ = ["as_numbers", "is_bool", "with_bools_as_numbers"]


#: (dtype class, dtype) -> whether it is bool (``str`` of a NumPy dtype costs ~1 us, on every
#: add; the class is in the key because array_api_strict's dtypes hash like NumPy's and warn
#: when compared with them)
_BOOL_DTYPES: dict = {}


def is_bool(v) -> bool:
    """Whether ``v`` is a bool array or a Python bool."""
    if type(v) is bool:
        return True
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        return False
    key = (dtype.__class__, dtype)
    hit = _BOOL_DTYPES.get(key)
    if hit is None:
        hit = _BOOL_DTYPES[key] = str(dtype).endswith("bool")
    return hit


def as_numbers(xp, *values):
    """Bool arrays as int8 arrays (Python bools as ints); other values as they are."""
    return tuple(int(v) if isinstance(v, bool) else xp.astype(v, xp.int8)
                 if is_bool(v) else v for v in values)


def with_bools_as_numbers(impl, bool_result: bool, operands: int = 1):
    """``impl(xp, *args, **kwargs)`` computing on bools as int8 when every array among its
    first ``operands`` arguments is bool (Note [Arithmetic of bools]); with ``bool_result``
    (add, max) the int8 result's truth is returned.  The common call -- an operand that is
    not bool -- costs one cached dtype test per operand."""

    def numbers(xp, args, kwargs):
        r = impl(xp, *as_numbers(xp, *args[:operands]), *args[operands:], **kwargs)
        return xp.not_equal(r, 0) if bool_result else r

    if operands == 1:
        def impl_of_bools(xp, x, *args, **kwargs):
            if type(x) is bool or not is_bool(x):  # a Python bool is the impl's to take
                return impl(xp, x, *args, **kwargs)
            return numbers(xp, (x, *args), kwargs)
    else:
        def impl_of_bools(xp, *args, **kwargs):
            array = False
            for a in args[:operands]:
                if type(a) is not bool:
                    if not is_bool(a):
                        return impl(xp, *args, **kwargs)
                    array = True
            return numbers(xp, args, kwargs) if array else impl(xp, *args, **kwargs)

    impl_of_bools.__name__ = getattr(impl, "__name__", "impl")
    return impl_of_bools
