"""The gamma family written once against the Array API (which has none): ``lgamma``,
``digamma`` and ``polygamma``, with PyTorch's algorithms and special values.

Note [Gamma functions without loops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The scalar algorithms PyTorch and Cephes use shift their argument by recurrences (``x + 1``
until ``x >= 10``, say) in ``while`` loops whose trip count depends on the value.  Here each
loop runs its largest trip count over the whole array, every element stepping only while its
own condition holds (a ``where`` per step), so a kernel is a fixed sequence of Array API ops:
lazy on Dask, traceable by ``jax.jit``, the same on every backend.  Float32 inputs compute in
float32 (the Python coefficients are weak scalars), as PyTorch's float kernels do.

* ``lgamma`` is Cephes' ``lgam``: for ``0 < x < 13`` the argument is moved into ``[2, 3)`` by
  ``Gamma(x + 1) = x Gamma(x)`` (at most ten products above, two quotients below, taken as
  logarithms apart so that a tiny ``x`` does not overflow them) and a rational function of
  ``x - 2`` gives ``lgamma`` there, accurate near the zeros at 1 and 2; from 13 on, Stirling's
  series.  Negative ``x`` uses the reflection ``lgamma(x) = log(pi / |x sin(pi x)|) -
  lgamma(-x)`` with ``sin(pi z)`` of the exact fractional part ``z``; ``x`` a non-positive
  integer or infinite gives ``inf``, as ``std::lgamma``.
* ``digamma`` is PyTorch's ``calc_digamma``: ``digamma(+-0) = -+inf``, NaN at the negative
  integers (and ``-inf``), the reflection ``digamma(1 - x) - pi / tan(pi r)`` below 0 (``r``
  below), ``x + 1`` up to 10 (``digamma(10)`` exactly is a constant) and the
  asymptotic series.
* ``polygamma(1, x)`` is PyTorch's ``calc_trigamma`` (reflection below 1/2, six steps of the
  recurrence, the asymptotic series);
* near the poles (the non-positive integers) the reflections take ``sin`` or ``tan`` of
  ``pi r`` with ``r = x - round(x)``, which is exact, not of ``pi x`` or of the fractional
  part: PyTorch's ``digamma(-2 + 4e-16)`` is 4% off, mdtensor's is not (a documented
  difference);
* ``polygamma(n, x)`` for ``n >= 2`` is ``(-1)^(n+1) n! zeta(n + 1, x)`` with Cephes'
  Hurwitz zeta: the terms ``(x + i)^-(n+1)`` summed up to ``x + i > 9`` (nine terms at
  least), then an Euler-Maclaurin tail of twelve terms; float32 in float64, as PyTorch's
  CPU kernel (its terms cancel near the zeros).  Below ``x = -_ZETA_SHIFT`` more terms would
  be needed than the fixed loop sums, and the answer there is NaN rather than a wrong number
  (a documented difference).
"""

from __future__ import annotations

import math

__all__ = ["ZETA_SHIFT", "digamma", "lgamma", "polygamma"]

_LB = (-1.37825152569120859100e3, -3.88016315134637840924e4, -3.31612992738871184744e5,
       -1.16237097492762307383e6, -1.72173700820839662146e6, -8.53555664245765465627e5)
_LC = (-3.51815701436523470549e2, -1.70642106651881159223e4, -2.20528590553854454839e5,
       -1.13933444367982507207e6, -2.53252307177582951285e6, -2.01889141433532773231e6)
_LA = (8.11614167470508450300e-4, -5.95061904284301438324e-4, 7.93650340457716943945e-4,
       -2.77777777730099687205e-3, 8.33333333333331927722e-2)
_LS2PI = 0.91893853320467274178  # log(sqrt(2 pi))
_LOGPI = 1.14472988584940017414
_INF, _NAN = float("inf"), float("nan")


def _poly(x, coefs, leading_one=False):
    """Horner's rule: ``coefs[0] x^n + ... + coefs[n]`` (with a leading ``x^(n+1)`` term of
    coefficient 1 when ``leading_one``: Cephes' ``p1evl``)."""
    acc = x + coefs[0] if leading_one else coefs[0]
    for c in coefs[1:]:
        acc = acc * x + c
    return acc


def _lgamma_positive(xp, x):
    """``lgamma`` of ``x > 0`` (any value elsewhere: the caller masks it)."""
    # 0 < x < 13: into [2, 3) by the recurrence
    xs = xp.where(x < 13.0, x, 2.5)
    n = xp.floor(xs) - 2.0  # -2 ... 10
    u = xs - n
    up, down = xp.ones_like(xs), xp.ones_like(xs)
    for k in range(10):
        up = up * xp.where(n > k, u + k, 1.0)
    for k in range(2):
        down = down * xp.where(-n > k, xs + k, 1.0)
    p = u - 2.0
    small = xp.log(up) - xp.log(down) + p * _poly(p, _LB) / _poly(p, _LC, leading_one=True)
    # x >= 13: Stirling's series
    xl = xp.where(x < 13.0, 13.0, x)
    q = (xl - 0.5) * xp.log(xl) - xl + _LS2PI
    z = 1.0 / (xl * xl)
    q = xp.where(xl > 1.0e8, q, q + _poly(z, _LA) / xl)
    return xp.where(x < 13.0, small, q)


def lgamma(xp, x):
    """``log|Gamma(x)|`` of a real floating array (Note [Gamma functions without loops])."""
    neg = x < 0.0
    q = xp.where(neg, -x, x)
    w = _lgamma_positive(xp, xp.where(q == 0.0, 1.0, q))
    # reflection for x < 0: log(pi) - log(|q sin(pi z)|) - lgamma(q), z = q - floor(q)
    qf = xp.where(neg & xp.isfinite(q), q, 0.5)
    z = qf - xp.floor(qf)
    z = xp.where(z > 0.5, 1.0 - z, z)
    reflected = _LOGPI - xp.log(qf) - xp.log(xp.abs(xp.sin(math.pi * z))) - w  # no underflow
    out = xp.where(neg, reflected, w)
    pole = (x <= 0.0) & (x == xp.floor(x))  # 0, the negative integers and -inf
    out = xp.where(pole | xp.isinf(x), _INF, out)
    return xp.where(xp.isnan(x), x, out)


_PSI_10 = 2.25175258906672110764
_DA = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
       -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
       8.33333333333333333333e-2)


def _digamma_positive(xp, x):
    """PyTorch's ``calc_digamma`` of ``x > 0``."""
    result = xp.zeros_like(x)
    for _ in range(10):  # x + 1 until x >= 10: ten steps from any x > 0
        below = x < 10.0
        result = result - xp.where(below, 1.0 / x, 0.0)
        x = xp.where(below, x + 1.0, x)
    z = 1.0 / (x * x)
    y = xp.where(x < 1.0e17, z * _poly(z, _DA), 0.0)
    asymptotic = result + xp.log(x) - 0.5 / x - y
    return xp.where(x == 10.0, result + _PSI_10, asymptotic)


def digamma(xp, x):
    """The logarithmic derivative of Gamma of a real floating array (Note [Gamma functions
    without loops])."""
    neg = x < 0.0
    finite_neg = neg & xp.isfinite(x)
    xr = xp.where(finite_neg, 1.0 - x, xp.where(x > 0.0, x, 1.0))
    pos = _digamma_positive(xp, xr)
    # tan has period pi: pi * r with r in [-1/2, 1/2] keeps its relative accuracy where
    # PyTorch's r in (-1, 0] (modf) does not (float32 near -4: 1e-3 off; PyTorch computes
    # that term in double)
    r = xp.where(finite_neg, x - xp.round(x), 0.25)
    out = xp.where(finite_neg, pos - math.pi / xp.tan(math.pi * r), pos)
    out = xp.where(neg & (x == xp.trunc(x)), _NAN, out)  # negative integers, -inf
    inf = xp.full_like(x, _INF)
    out = xp.where(x == 0.0, xp.where(xp.signbit(x), inf, -inf), out)
    return xp.where(xp.isnan(x), x, out)


def _trigamma(xp, x):
    """PyTorch's ``calc_trigamma``."""
    reflect = x < 0.5
    # sin(pi x)^2 has period 1: sin(pi r) with r = x - round(x) (exact) keeps its relative
    # accuracy near the poles, where PyTorch's sin(pi x) loses it
    s = xp.sin(math.pi * xp.where(reflect, x - xp.round(x), 0.25))
    result = xp.where(reflect, -(math.pi * math.pi) / (s * s), 0.0)
    x = xp.where(reflect, 1.0 - x, x)
    for _ in range(6):
        result = result + 1.0 / (x * x)
        x = x + 1.0
    ixx = 1.0 / (x * x)
    result = result + (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (
        1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x
    return xp.where(reflect, -result, result)


_ZA = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
       7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
       -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)
#: how far below zero the fixed loop of ``_zeta`` reaches (Note [Gamma functions without
#: loops])
ZETA_SHIFT = _ZETA_SHIFT = 24  # public: the SciPy kernel of polygamma matches it


def _zeta(xp, s: float, q):
    """Cephes' Hurwitz zeta ``sum_i (q + i)^-s`` for ``s > 1`` (a Python number)."""
    pole = (q <= 0.0) & (q == xp.floor(q))
    qq = xp.where(pole | xp.isnan(q), 1.0, q)
    total = qq ** -s
    a = qq
    b = xp.zeros_like(qq)
    for i in range(9 + _ZETA_SHIFT):
        step = a <= 9.0 if i >= 9 else None
        a_next = a + 1.0
        b_next = a_next ** -s
        if step is None:
            a, b, total = a_next, b_next, total + b_next
        else:
            a = xp.where(step, a_next, a)
            b = xp.where(step, b_next, b)
            total = xp.where(step, total + b_next, total)
    w = a
    total = total + b * w / (s - 1.0) - 0.5 * b
    fact, k = 1.0, 0.0
    for coef in _ZA:
        fact *= s + k
        b = b / w
        total = total + fact * b / coef
        k += 1.0
        fact *= s + k
        b = b / w
        k += 1.0
    total = xp.where(a <= 9.0, _NAN, total)  # not reached by the loop: below -_ZETA_SHIFT
    return xp.where(pole, _INF, xp.where(xp.isnan(q), q, total))


def polygamma(xp, n: int, x):
    """The ``n``-th derivative of digamma of a real floating array (``n >= 0``)."""
    if n == 0:
        return digamma(xp, x)
    if n == 1:
        return _trigamma(xp, x)
    sign = 1.0 if n % 2 else -1.0
    wide = xp.astype(x, xp.float64) if x.dtype == xp.float32 else x
    out = sign * math.factorial(n) * _zeta(xp, float(n + 1), wide)
    return out if out.dtype == x.dtype else xp.astype(out, x.dtype)
