"""The Array API's special values, for backends whose own functions give other ones.

Note [Special values]
~~~~~~~~~~~~~~~~~~~~~
The standard tabulates what elementwise functions return at infinities, NaNs and signed
zeros: for complex arguments the values of C99's Annex G (``exp(-inf + inf j)`` is
``0 + 0j``, ``acos(0 + NaN j)`` is ``pi/2 + NaN j``), for real ones the sign of a zero
result (``-0.0 % 2`` is ``+0``, ``+0.0 // -2`` is ``-0``, ``sign(-0.0)`` is ``+0``).
NumPy gives these values (glibc's complex functions follow Annex G), except for complex
``expm1`` and ``tanh``.  XLA's complex functions give NaN parts where the standard has
limits and drop the sign of zero parts, and its ``%``, ``//`` and ``sign`` give a zero of
the other sign; array_api_strict's ``sign(-0 + 0j)`` is ``-0 + 0j``.

mdtensor means the same on every backend, so the rules are written here once -- the
standard's tables as data (``TABLES``, in the standard's words and order) and three real
rules -- and a backend whose library differs registers them for its key with
``register`` (through ``md.library``, as any backend would): its kernel for ``acos``
computes its library's ``acos``, then the standard's values where a row of the table
applies.  A backend whose library is right registers nothing and pays nothing.
``expm1`` and ``tanh``, which NumPy gets wrong too, apply their tables in the catalogue's
own impl (``unary(..., complex_special=True)`` in ops/elementwise.py), for every backend.

A table is applied in three steps:

1. **Fold** the argument by the function's symmetries into the quadrant the table
   describes: ``f(conj(z)) == conj(f(z))`` (the standard requires it of every tabulated
   function), and ``f(-z) == -f(z)`` (asinh, atanh, sinh, tanh) or ``f(-z) == f(z)``
   (cosh), as in C99.  Sign flips are exact, so the library's function computed on the
   folded argument and unfolded has these symmetries everywhere, branch cuts included
   (XLA's ``sqrt(1.5 - 0j)`` is ``1.22 + 0j``; folded, ``1.22 - 0j``).
2. **Replace** the library's result where a row matches the folded parts ``a + b j``;
   the first matching row wins, as in the standard's lists.  Where the standard leaves a
   sign unspecified (``NaN ± infinity j``) the row gives glibc's (NumPy's) choice in the
   table's quadrant and marks the part (``"re"``, ``"im"``, ``"both"``); unfolded, such a
   sign may differ from NumPy's in the other quadrants (``cosh(-0 + inf j)`` is
   ``NaN - 0j`` here, ``NaN + 0j`` from glibc), which the standard allows.
3. **Unfold** the result.

Results of the form ``c * cis(b)`` (``exp(-inf + b j)`` is ``+0 * cis(b)``) are built from
constants chosen by the signs of ``cos(b)`` and ``sin(b)``: ``c * cos(b)`` with ``c``
infinite or zero is ``±c``, and an Array API namespace has no exact way to assemble a
complex number from two real parts (``re + 1j * im`` is NaN for an infinite ``im``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable

from ._promotion import dtype_of

__all__ = ["TABLES", "Cis", "Table", "fixed", "names", "register"]

_PI = math.pi
_INF = math.inf
_NAN = math.nan


# ---------------------------------------------------------------------------------------
# Conditions on one part of the (folded) argument, in the standard's words


def _is_zero(xp, v):
    return v == 0


def _is_positive_zero(xp, v):
    return xp.logical_and(v == 0, xp.logical_not(xp.signbit(v)))


def _is_negative_zero(xp, v):
    return xp.logical_and(v == 0, xp.signbit(v))


def _is_nonzero(xp, v):  # NaN and the infinities included ("not equal to 0")
    return xp.logical_not(v == 0)


def _is_nonzero_number(xp, v):
    return xp.logical_and(xp.logical_not(v == 0), xp.logical_not(xp.isnan(v)))


def _is_nonzero_finite(xp, v):
    return xp.logical_and(xp.isfinite(v), xp.logical_not(v == 0))


def _is_positive_finite(xp, v):
    return xp.logical_and(xp.isfinite(v), v > 0)


def _equals(value):
    def condition(xp, v):
        return v == value
    return condition


def _any(xp, v):
    return xp.logical_or(xp.isnan(v), xp.logical_not(xp.isnan(v)))


_CONDITIONS: dict[str, Callable] = {
    "+0": _is_positive_zero,
    "-0": _is_negative_zero,
    "±0": _is_zero,
    "+inf": _equals(_INF),
    "-inf": _equals(-_INF),
    "±inf": lambda xp, v: xp.isinf(v),
    "NaN": lambda xp, v: xp.isnan(v),
    "finite": lambda xp, v: xp.isfinite(v),
    "nonzero finite": _is_nonzero_finite,
    "positive finite": _is_positive_finite,
    "nonzero": _is_nonzero,
    "nonzero number": _is_nonzero_number,
    "1": _equals(1.0),
    "-1": _equals(-1.0),
    "any": _any,
}


# ---------------------------------------------------------------------------------------
# Values


class Cis:
    """``scale * cis(b) + shift`` (``cis(b) = cos(b) + sin(b) j``) for a zero or
    infinite ``scale``: each part is ``±scale`` by the sign of ``cos(b)``, ``sin(b)``."""

    __slots__ = ("scale", "shift")

    def __init__(self, scale: float, shift: float = 0.0):
        self.scale = scale
        self.shift = shift

    def __call__(self, xp, a, b, dtype):
        c, s = self.scale, self.shift
        cos_neg, sin_neg = xp.signbit(xp.cos(b)), xp.signbit(xp.sin(b))

        def const(re_neg, im_neg):
            re = -c if re_neg else c
            # ``+ s`` only when there is a shift: -0.0 + 0.0 is +0.0
            return xp.asarray(complex(re + s if s else re, -c if im_neg else c), dtype=dtype)

        return xp.where(cos_neg, xp.where(sin_neg, const(True, True), const(True, False)),
                        xp.where(sin_neg, const(False, True), const(False, False)))

    def __repr__(self) -> str:
        return f"Cis({self.scale}, {self.shift})"


def _constant(value: complex | float):
    def make(xp, a, b, dtype):
        return xp.asarray(value, dtype=dtype)
    return make


def _magnitude_of(part: str):
    def make(xp, a, b, dtype):
        return xp.abs(a if part == "a" else b)
    return make


def _value(spec):
    if isinstance(spec, Cis):
        return spec
    if isinstance(spec, tuple):
        return _constant(complex(*spec))
    if spec in ("abs(a)", "abs(b)"):
        return _magnitude_of(spec[-2])
    return _constant(float(spec))


# ---------------------------------------------------------------------------------------
# Tables


class Table:
    """The standard's special values of one complex function.

    Args:
        rows: ``(condition on a, condition on b, value[, unspecified])`` with ``a + b j``
            the folded argument; a value is ``(real, imag)``, a ``Cis``, or for ``abs`` a
            real number or ``"abs(a)"``/``"abs(b)"``; ``unspecified`` names the parts
            (``"re"``, ``"im"``, ``"both"``) whose sign the standard leaves open.
        symmetry: ``"conj"`` (fold by ``f(conj(z)) == conj(f(z))``), ``"conj odd"`` or
            ``"conj even"`` (also by ``f(-z) == -f(z)`` or ``f(-z) == f(z)``), or ``""``
            (rows for every quadrant).
    """

    def __init__(self, rows, symmetry: str = "conj"):
        self.rows = tuple(rows)
        self.symmetry = symmetry
        self._rows = tuple((_CONDITIONS[row[0]], _CONDITIONS[row[1]], _value(row[2]))
                           for row in reversed(self.rows))  # the first row wins

    def __call__(self, xp, f: Callable, z):
        """``f(xp, z)`` with the table's values (Note [Special values])."""
        flip = conj = None
        if "odd" in self.symmetry or "even" in self.symmetry:
            flip = xp.signbit(xp.real(z))
            z = xp.where(flip, xp.negative(z), z)
        if "conj" in self.symmetry:
            conj = xp.signbit(xp.imag(z))
            z = xp.where(conj, xp.conj(z), z)
        r = f(xp, z)
        a, b = xp.real(z), xp.imag(z)
        seen: dict = {}
        for ca, cb, value in self._rows:
            m = xp.logical_and(_condition(seen, ca, xp, a, "a"),
                               _condition(seen, cb, xp, b, "b"))
            r = xp.where(m, value(xp, a, b, r.dtype), r)
        if conj is not None:
            r = xp.where(conj, xp.conj(r), r)
        if flip is not None and "odd" in self.symmetry:
            r = xp.where(flip, xp.negative(r), r)
        return r


def _condition(seen: dict, cond, xp, v, part: str):
    key = (cond, part)
    hit = seen.get(key)
    if hit is None:
        hit = seen[key] = cond(xp, v)
    return hit


_H = _PI / 2  # the standard's π/2
_Q = _PI / 4
_3Q = 3 * _PI / 4

#: the rows the standard gives ``log``, ``log1p`` and ``acosh`` alike, in this order (all
#: three grow like ``log(z)`` at infinity)
_LOG_AT_INFINITY = (
    ("-inf", "positive finite", (_INF, _PI)),
    ("+inf", "positive finite", (_INF, 0.0)),
    ("-inf", "+inf", (_INF, _3Q)),
    ("+inf", "+inf", (_INF, _Q)),
    ("±inf", "NaN", (_INF, _NAN)),
    ("NaN", "finite", (_NAN, _NAN)),
    ("NaN", "+inf", (_INF, _NAN)),
    ("NaN", "NaN", (_NAN, _NAN)),
)

#: function -> its table, transcribed from the standard (2025.12), rows in its order
TABLES: dict[str, Table] = {
    "abs": Table([
        ("±inf", "any", _INF),
        ("any", "±inf", _INF),
        ("±0", "any", "abs(b)"),
        ("any", "±0", "abs(a)"),
        ("NaN", "finite", _NAN),
        ("finite", "NaN", _NAN),
        ("NaN", "NaN", _NAN),
    ], symmetry=""),
    "acos": Table([
        ("±0", "+0", (_H, -0.0)),
        ("±0", "NaN", (_H, _NAN)),
        ("finite", "+inf", (_H, -_INF)),
        ("nonzero finite", "NaN", (_NAN, _NAN)),
        ("-inf", "positive finite", (_PI, -_INF)),
        ("+inf", "positive finite", (0.0, -_INF)),
        ("-inf", "+inf", (_3Q, -_INF)),
        ("+inf", "+inf", (_Q, -_INF)),
        ("±inf", "NaN", (_NAN, _INF), "im"),
        ("NaN", "finite", (_NAN, _NAN)),
        ("NaN", "+inf", (_NAN, -_INF)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ]),
    "acosh": Table([
        ("±0", "+0", (0.0, _H)),
        ("finite", "+inf", (_INF, _H)),
        ("nonzero finite", "NaN", (_NAN, _NAN)),
        ("±0", "NaN", (_NAN, _H), "im"),  # the standard: +0; C99 (and NumPy): either zero
        *_LOG_AT_INFINITY,
    ]),
    "asinh": Table([
        ("+0", "+0", (0.0, 0.0)),
        ("positive finite", "+inf", (_INF, _H)),
        ("finite", "NaN", (_NAN, _NAN)),
        ("+inf", "positive finite", (_INF, 0.0)),
        ("+inf", "+inf", (_INF, _Q)),
        ("NaN", "+0", (_NAN, 0.0)),
        ("NaN", "nonzero finite", (_NAN, _NAN)),
        ("NaN", "+inf", (_INF, _NAN), "re"),
        ("NaN", "NaN", (_NAN, _NAN)),
    ], symmetry="conj odd"),
    "atanh": Table([
        ("+0", "+0", (0.0, 0.0)),
        ("+0", "NaN", (0.0, _NAN)),
        ("1", "+0", (_INF, 0.0)),
        ("positive finite", "+inf", (0.0, _H)),
        ("nonzero finite", "NaN", (_NAN, _NAN)),
        ("+inf", "positive finite", (0.0, _H)),
        ("+inf", "+inf", (0.0, _H)),
        ("+inf", "NaN", (0.0, _NAN)),
        ("NaN", "finite", (_NAN, _NAN)),
        ("NaN", "+inf", (0.0, _H), "re"),
        ("NaN", "NaN", (_NAN, _NAN)),
    ], symmetry="conj odd"),
    "cosh": Table([
        ("+0", "+0", (1.0, 0.0)),
        ("+0", "+inf", (_NAN, 0.0), "im"),
        ("+0", "NaN", (_NAN, 0.0), "im"),
        ("nonzero finite", "+inf", (_NAN, _NAN)),
        ("nonzero finite", "NaN", (_NAN, _NAN)),
        ("+inf", "+0", (_INF, 0.0)),
        ("+inf", "nonzero finite", Cis(_INF)),
        ("+inf", "+inf", (_INF, _NAN), "re"),
        ("+inf", "NaN", (_INF, _NAN)),
        ("NaN", "±0", (_NAN, 0.0), "im"),
        ("NaN", "nonzero finite", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ], symmetry="conj even"),
    "exp": Table([
        ("±0", "+0", (1.0, 0.0)),
        ("finite", "+inf", (_NAN, _NAN)),
        ("finite", "NaN", (_NAN, _NAN)),
        ("+inf", "+0", (_INF, 0.0)),
        ("-inf", "finite", Cis(0.0)),
        ("+inf", "nonzero finite", Cis(_INF)),
        ("-inf", "+inf", (0.0, 0.0), "both"),
        ("+inf", "+inf", (_INF, _NAN), "re"),
        ("-inf", "NaN", (0.0, 0.0), "both"),
        ("+inf", "NaN", (_INF, _NAN), "re"),
        ("NaN", "+0", (_NAN, 0.0)),
        ("NaN", "nonzero", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ]),
    "expm1": Table([
        ("±0", "+0", (0.0, 0.0)),
        ("finite", "+inf", (_NAN, _NAN)),
        ("finite", "NaN", (_NAN, _NAN)),
        ("+inf", "+0", (_INF, 0.0)),
        ("-inf", "finite", Cis(0.0, -1.0)),
        ("+inf", "nonzero finite", Cis(_INF, -1.0)),
        ("-inf", "+inf", (-1.0, 0.0), "im"),
        ("+inf", "+inf", (_INF, _NAN), "re"),
        ("-inf", "NaN", (-1.0, 0.0), "im"),
        ("+inf", "NaN", (_INF, _NAN), "re"),
        ("NaN", "+0", (_NAN, 0.0)),
        ("NaN", "nonzero", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ]),
    "log": Table([
        ("-0", "+0", (-_INF, _PI)),
        ("+0", "+0", (-_INF, 0.0)),
        ("finite", "+inf", (_INF, _H)),
        ("finite", "NaN", (_NAN, _NAN)),
        *_LOG_AT_INFINITY,
    ]),
    "log1p": Table([
        ("-1", "+0", (-_INF, 0.0)),
        ("finite", "+inf", (_INF, _H)),
        ("finite", "NaN", (_NAN, _NAN)),
        *_LOG_AT_INFINITY,
    ]),
    "sign": Table([
        ("±0", "±0", (0.0, 0.0)),
        ("NaN", "any", (_NAN, _NAN)),
        ("any", "NaN", (_NAN, _NAN)),
        # "the rules of complex number division": z / |z| with |z| infinite
        ("±inf", "any", (_NAN, _NAN)),
        ("any", "±inf", (_NAN, _NAN)),
    ], symmetry=""),
    "sinh": Table([
        ("+0", "+0", (0.0, 0.0)),
        ("+0", "+inf", (0.0, _NAN), "re"),
        ("+0", "NaN", (0.0, _NAN), "re"),
        ("positive finite", "+inf", (_NAN, _NAN)),
        ("positive finite", "NaN", (_NAN, _NAN)),
        ("+inf", "+0", (_INF, 0.0)),
        ("+inf", "positive finite", Cis(_INF)),
        ("+inf", "+inf", (_INF, _NAN), "re"),
        ("+inf", "NaN", (_INF, _NAN), "re"),
        ("NaN", "+0", (_NAN, 0.0)),
        ("NaN", "nonzero finite", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ], symmetry="conj odd"),
    "sqrt": Table([
        ("±0", "+0", (0.0, 0.0)),
        ("any", "+inf", (_INF, _INF)),
        ("finite", "NaN", (_NAN, _NAN)),
        ("-inf", "positive finite", (0.0, _INF)),
        ("+inf", "positive finite", (_INF, 0.0)),
        ("-inf", "NaN", (_NAN, _INF), "im"),
        ("+inf", "NaN", (_INF, _NAN)),
        ("NaN", "any", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ]),
    "tanh": Table([
        ("+0", "+0", (0.0, 0.0)),
        ("nonzero finite", "+inf", (_NAN, _NAN)),
        ("+0", "+inf", (0.0, _NAN)),
        ("nonzero finite", "NaN", (_NAN, _NAN)),
        ("+0", "NaN", (0.0, _NAN)),
        ("+inf", "positive finite", (1.0, 0.0)),
        ("+inf", "+inf", (1.0, 0.0), "im"),
        ("+inf", "NaN", (1.0, 0.0), "im"),
        ("NaN", "+0", (_NAN, 0.0)),
        ("NaN", "nonzero number", (_NAN, _NAN)),
        ("NaN", "NaN", (_NAN, _NAN)),
    ], symmetry="conj odd"),
}


# ---------------------------------------------------------------------------------------
# Real rules: the sign of a zero result


def _sign_real(xp, x, r):
    # sign(-0.0) is +0 (XLA keeps the sign of the zero)
    return xp.where(r == 0, xp.zeros_like(r), r)


def _zero_with_sign_of(xp, like, v):
    """A zero of ``like``'s dtype with the sign of ``v`` (an array or a Python number)."""
    if isinstance(v, (bool, int, float)):
        return math.copysign(0.0, v)
    return xp.copysign(xp.zeros_like(like), v)


def _remainder_real(xp, a, b, r):
    # x % y has the sign of y, a zero too (-0.0 % 2 is +0; XLA keeps the dividend's)
    return xp.where(r == 0, _zero_with_sign_of(xp, r, b), r)


def _floor_divide_real(xp, a, b, q):
    # A zero quotient has the sign of a / b (-0.0 // 2 is -0, -1.5 // -2 is +0)
    return xp.where(q == 0, _zero_with_sign_of(xp, q, xp.divide(a, b)), q)


_REAL: dict[str, Callable] = {
    "sign": _sign_real,
    "remainder": _remainder_real,
    "floor_divide": _floor_divide_real,
}


# ---------------------------------------------------------------------------------------
# The fixed impls and their registration


def _is_complex(a) -> bool:
    return not isinstance(a, (bool, int, float, complex)) and dtype_of(a).kind == "c"


def _is_float(a) -> bool:
    return not isinstance(a, (bool, int, float, complex)) and dtype_of(a).kind == "f"


def fixed(name: str, impl: Callable) -> Callable:
    """``impl(xp, *args)``, an op's computation on raw arrays, with the standard's special
    values of ``name`` (Note [Special values]).

    Raises:
        ValueError: the standard tabulates nothing for ``name`` here.
    """
    table = TABLES.get(name)
    real = _REAL.get(name)
    if table is None and real is None:
        raise ValueError(f"special_values: no special values for {name!r}; there are "
                         f"rules for {', '.join(names())}")
    if name in ("remainder", "floor_divide"):
        def special(xp, a, b):
            r = impl(xp, a, b)
            return real(xp, a, b, r) if _is_float(r) else r
    else:
        def special(xp, a):
            if table is not None and _is_complex(a):
                return table(xp, impl, a)
            r = impl(xp, a)
            return real(xp, a, r) if real is not None and _is_float(r) else r
    special.__name__ = special.__qualname__ = getattr(impl, "__name__", name)
    return special


def names() -> tuple[str, ...]:
    """The ops with special values here."""
    return tuple(sorted(set(TABLES) | set(_REAL)))


def register(lib, key: str, ops: Iterable[str]) -> dict[str, Callable]:
    """Register the standard's special values of ``ops`` for the backend key ``key``.

    For every overload of each op, ``lib`` (an ``md.library.Library("aten", "IMPL")``,
    which the backend keeps alive) registers a backend kernel computing the catalogue's
    impl with ``fixed``.

    Returns:
        op name -> its fixed impl, for a backend that builds faster kernels from it (the
        JAX backend traces them under ``jax.jit``).

    Raises:
        ValueError: an op has no special values here.
    """
    from ._decl import CATALOGUE
    from ._impl_kernels import impl_kernel

    impls = {}
    for name in ops:
        decl = CATALOGUE[f"aten::{name}"]
        impl = impls[name] = fixed(name, decl.impl)
        for op in decl.overloads:
            kernel = impl_kernel(op.schema, impl, accepts=decl.accepts)
            kernel.__name__ = kernel.__qualname__ = f"special_values[{op.name}]"
            lib.impl(op, kernel, key, backend=True)
    return impls
