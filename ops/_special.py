"""Special functions written once against the Array API (which has none): ``erf``,
``erfc`` and ``erfinv`` (the gamma family is in ``ops/_gamma.py``).

Note [erf]
~~~~~~~~~~
W. J. Cody's rational Chebyshev approximations (Math. Comp. 23 (1969) 631-637; the SPECFUN
routine CALERF, behind many C libraries' ``erf``), relative error below 1e-16 in double
precision, in three ranges of ``y = |x|``:

* ``y <= 0.5``: ``erf(x) = x * P(y^2) / Q(y^2)``;
* ``0.5 < y <= 4``: ``erfc(y) = exp(-y^2) * P(y) / Q(y)``;
* ``y > 4``: ``erfc(y) = exp(-y^2) / y * (1/sqrt(pi) + R(1/y^2) / y^2)``;

and ``erf(x) = sign(x) (1 - erfc(y))`` above 0.5.  ``exp(-y^2)`` is computed as
``exp(-t^2) exp(-(y - t)(y + t))`` with ``t`` = ``y`` rounded down to a multiple of 1/16,
so that ``y^2``'s rounding error is not magnified by the exponential.  Each range is
evaluated where it applies only (the others see a harmless stand-in value), so no
infinity or nan arises in between.  Float32 inputs compute in float32 (the Python
coefficients are weak scalars).  The gelu kernel and its derivative use it, as PyTorch's
exact gelu uses ``erf`` (its former Abramowitz-Stegun formula was off by up to 1.5e-7).
"""

from __future__ import annotations

__all__ = ["erf", "erfc", "erfinv"]

_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02,
      3.20937758913846947e03, 1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03,
      2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01,
      2.98635138197400131e02, 8.81952221241769090e02, 1.71204761263407058e03,
      2.05107837782607147e03, 1.23033935479799725e03, 2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02,
      1.62138957456669019e03, 3.29079923573345963e03, 4.36261909014324716e03,
      3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1,
      1.60837851487422766e-2, 6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1,
      6.05183413124413191e-2, 2.33520497626869185e-3)
_RSQRT_PI = 5.6418958354775628695e-1
#: erfc(y) underflows to 0 in double precision beyond this
_BIG = 26.543


def _cody(xp, x):
    """``(small, erf_small, erfc_y)``: where ``|x| <= 0.5``, ``erf(x)`` there, and
    ``erfc(|x|)`` elsewhere (Note [erf])."""
    y = xp.abs(x)
    small = y <= 0.5
    big = y > 4.0
    # |x| <= 0.5
    ys = xp.where(small, y, 0.0)
    z = ys * ys
    num, den = _A[4] * z, z
    for i in range(3):
        num = (num + _A[i]) * z
        den = (den + _B[i]) * z
    erf_small = x * (num + _A[3]) / (den + _B[3])
    # 0.5 < |x| <= 4: erfc(y) exp(y^2)
    ym = xp.where(small | big, 1.0, y)
    num, den = _C[8] * ym, ym
    for i in range(7):
        num = (num + _C[i]) * ym
        den = (den + _D[i]) * ym
    mid = (num + _C[7]) / (den + _D[7])
    # |x| > 4: erfc(y) exp(y^2), up to |x| where erfc underflows
    yb = xp.where(big, xp.minimum(y, _BIG), 5.0)
    z = 1.0 / (yb * yb)
    num, den = _P[5] * z, z
    for i in range(4):
        num = (num + _P[i]) * z
        den = (den + _Q[i]) * z
    tail = (_RSQRT_PI - z * (num + _P[4]) / (den + _Q[4])) / yb
    # exp(-y^2) without magnifying y^2's rounding error
    yl = xp.where(small, 0.0, xp.minimum(y, _BIG))
    t = xp.trunc(yl * 16.0) / 16.0
    scaled = xp.where(big, tail, mid)
    erfc_y = xp.exp(-t * t) * xp.exp(-(yl - t) * (yl + t)) * scaled
    return small, erf_small, xp.where(y >= _BIG, 0.0, erfc_y)


def erf(xp, x):
    """The error function of a real floating array ``x`` (Note [erf])."""
    small, erf_small, erfc_y = _cody(xp, x)
    large = xp.where(x < 0, erfc_y - 1.0, 1.0 - erfc_y)
    return xp.where(small, erf_small, xp.where(xp.isnan(x), x, large))


def erfc(xp, x):
    """The complementary error function ``1 - erf(x)`` of a real floating array, accurate
    where it is tiny (Note [erf]: ``erfc(|x|)`` is what the large ranges compute)."""
    small, erf_small, erfc_y = _cody(xp, x)
    large = xp.where(x < 0, 2.0 - erfc_y, erfc_y)
    return xp.where(small, 1.0 - erf_small, xp.where(xp.isnan(x), x, large))


# Note [erfinv]
# ~~~~~~~~~~~~~
# PyTorch's CPU ``erfinv`` (``calc_erfinv``): a rational approximation in ``y^2`` for
# ``|y| <= 0.7`` and in ``sqrt(-log((1 - |y|) / 2))`` above, then two Newton steps on
# ``erf(x) = y`` (with the erf above, accurate to a few ulps).  ``erfinv(+-1) = +-inf`` and
# ``|y| > 1`` is NaN.  Near ``|y| = 1`` the problem itself is ill-conditioned: ``1 - |y|``
# holds few significant bits, and every implementation's answer is only as good as those.
_EA = (0.886226899, -1.645349621, 0.914624893, -0.140543331)
_EB = (-2.118377725, 1.442710462, -0.329097515, 0.012229801)
_EC = (-1.970840454, -1.624906493, 3.429567803, 1.641345311)
_ED = (3.543889200, 1.637067800)
_TWO_RSQRT_PI = 2.0 * _RSQRT_PI


def erfinv(xp, y):
    """The inverse error function of a real floating array ``y`` (Note [erfinv])."""
    a = xp.abs(y)
    central = a <= 0.7
    yc = xp.where(central, y, 0.0)
    z = yc * yc
    num = ((_EA[3] * z + _EA[2]) * z + _EA[1]) * z + _EA[0]
    den = (((_EB[3] * z + _EB[2]) * z + _EB[1]) * z + _EB[0]) * z + 1.0
    x_central = yc * num / den
    at = xp.where(central | (a >= 1.0), 0.85, a)
    z = xp.sqrt(-xp.log((1.0 - at) / 2.0))
    num = ((_EC[3] * z + _EC[2]) * z + _EC[1]) * z + _EC[0]
    den = (_ED[1] * z + _ED[0]) * z + 1.0
    x_tail = num / den
    x = xp.where(central, x_central, xp.where(y < 0, -x_tail, x_tail))
    for _ in range(2):
        x = x - (erf(xp, x) - y) / (_TWO_RSQRT_PI * xp.exp(-x * x))
    inf = xp.full_like(y, float("inf"))
    inf = xp.where(y < 0, -inf, inf)
    x = xp.where(a == 1.0, inf, x)
    return xp.where((a > 1.0) | xp.isnan(y), float("nan"), x)
