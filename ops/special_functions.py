"""Special functions of real arguments, as PyTorch's: ``erfc``, ``erfinv``, ``lgamma``,
``digamma`` and ``polygamma`` (``erf`` is in ``ops/elementwise.py``).

The kernels are written once against the Array API (Notes [erf] and [erfinv] in
``ops/_special.py``, [Gamma functions without loops] in ``ops/_gamma.py``), the same
algorithm on every backend; on NumPy, SciPy's ufuncs compute them where SciPy imports (Note
[SciPy on NumPy] in ops/_scipy_special.py).  Integer and bool inputs give the default float dtype;
complex inputs are refused, as PyTorch's CPU kernels refuse them.  Derivative rules:
``ops/special_functions_derivatives.py``.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from mdtensor.dispatch.callers import _NO

from . import _gamma, _special
from . import _meta_fns as mf
from ._cpu_kernels import register_cpu
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._promotion import bfloat16_via_float32, half_via_float32
from ._samples import make_array, unary_samples
from ._scipy_special import cpu_unary, on_numpy, scipy_special, unary_kernel
from .elementwise import FLOATS, REAL_KINDS, to_float

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

_HAVE_SCIPY = importlib.util.find_spec("scipy") is not None  # for the OpInfo references


def _scipy_ref(name: str):
    """``scipy.special.<name>`` on the sample's arrays, in their dtype (imported when a test
    calls it; None without SciPy: the sweep then checks everything but the values)."""
    if not _HAVE_SCIPY:
        return None

    def ref(*args):
        from scipy import special

        out = getattr(special, name)(*args)
        return out.astype(args[-1].dtype)
    return ref


def _math_ref(fn):
    def ref(a):
        return np.vectorize(fn, otypes=[np.float64])(a).astype(a.dtype)
    return ref


def _unary(name: str, fn, ref, scipy_name: str, domain=None, lowest=None) -> None:
    def impl(xp, a):
        r = half_via_float32(xp, fn, a)  # Note [Half precision special functions]
        return fn(xp, to_float(xp, a)) if r is None else r

    impl.__name__ = f"_{name}"
    impl = unary_kernel(scipy_name, impl, lowest)
    decl = defop(f"{name}(Tensor self) -> Tensor", impl=impl, structured=True,
                 meta=mf.unary_float, tags=("pointwise",), methods=(name,),
                 accepts=REAL_KINDS,
                 info=OpInfo(ref=ref, dtypes=FLOATS, samples=unary_samples(domain)))
    register_cpu(decl.functional[0], cpu_unary(scipy_name, lowest))


# SciPy's gammaln(-inf) is -inf, std::lgamma's (PyTorch's) +inf.  The dtype's most negative
# finite value is an integer, a pole, where both give +inf: SciPy gets that in place of
# -inf (one ``maximum``, which keeps NaNs), the other arguments as they are.  As 0-d arrays:
# NumPy converts a scalar operand on every call (1 us against 0.4).
_LOWEST = {c: np.array(np.finfo(c).min, c) for c in "fd"}


# SciPy's special values of these agree with the Array API kernels' (PyTorch's), lgamma's
# at -inf aside
_unary("erfc", _special.erfc, _math_ref(math.erfc), "erfc")
_unary("erfinv", _special.erfinv, _scipy_ref("erfinv"), "erfinv", domain="open_unit")
_unary("lgamma", _gamma.lgamma, _math_ref(math.lgamma), "gammaln", domain="positive",
       lowest=_LOWEST)
_unary("digamma", _gamma.digamma, _scipy_ref("digamma"), "psi", domain="positive")


def _polygamma(xp, n, a):
    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    r = bfloat16_via_float32(xp, lambda xp, a: _gamma.polygamma(xp, n, a), a)
    return _gamma.polygamma(xp, n, to_float(xp, a)) if r is None else r


def _polygamma_any(xp, n, a):
    """polygamma (the impl of every backend, SciPy's on NumPy: Note [SciPy on NumPy]),
    with SciPy: ``psi`` for ``n = 0``, and
    for ``n >= 2`` ``(-1)^(n+1) n! zeta(n + 1, x)`` with SciPy's Hurwitz zeta (its
    ``polygamma`` is a Python function over the same, 100x slower on small arrays), NaN
    where the Array API kernel's is (``+inf``, below ``-ZETA_SHIFT`` off the poles: Note
    [Gamma functions without loops]).  ``n = 1`` keeps the Array API kernel: PyTorch's
    trigamma series is 5e-10 off in float64, and SciPy's exact values would not match
    it (nor the other backends) to the float64 tolerances."""
    if n == 0 and type(a) is np.ndarray and a.dtype.char in "fd":
        psi = scipy_special("psi")
        if psi is not None:
            return psi(a)
    zeta = scipy_special("zeta") if n > 1 and on_numpy(a) else None
    if zeta is None:
        return _polygamma(xp, n, a)
    out = np.asarray(zeta(float(n + 1), a))  # an array, for a 0-d ``a`` too
    np.multiply(out, (1.0 if n % 2 else -1.0) * math.factorial(n), out)
    # the poles (integers, -inf) keep their infinities
    bad = ((a < -_gamma.ZETA_SHIFT) & (a != np.floor(a))) | (a == math.inf)
    np.copyto(out, math.nan, where=bad)
    return out


def _polygamma_meta(n, x):
    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    return mf.unary_float(x)


def _polygamma_samples(dtype, rng):
    return [SampleInput((n, make_array(shape, dtype, rng, "positive")))
            for n in (0, 1, 2, 3) for shape in ((), (5,), (2, 3))]


def _polygamma_errors():
    yield ErrorInput(SampleInput((-1, np.ones(3))), ValueError,
                     "polygamma: n must be non-negative, got -1")


_polygamma_decl = defop(
    "polygamma(int n, Tensor self) -> Tensor", impl=_polygamma_any, structured=True,
    meta=_polygamma_meta, tags=("pointwise",), accepts=REAL_KINDS,
    info=OpInfo(ref=_scipy_ref("polygamma"), dtypes=FLOATS, samples=_polygamma_samples,
                errors=_polygamma_errors))


def _polygamma_cpu(generic):
    # (Note [SciPy on NumPy]'s CPU kernels) polygamma(0, x) is SciPy's psi, as digamma's
    # kernel computes it; other orders take the impl's checks and zeta.  The callers pass
    # ``(n, self)``: named, no star call (Note [Star calls] in
    # mdtensor/dispatch/callers.py), and psi looked up once, at the first call.
    psi = []

    def kernel(n, a=_NO, /, *rest, **kwargs):
        if type(n) is int and n == 0 and a is not _NO and not rest and not kwargs:
            x = a._data
            if type(x) is np.ndarray and x.dtype.char in "fd":
                if not psi:
                    psi.append(scipy_special("psi"))
                if psi[0] is not None:
                    return a._device.wrap(psi[0](x))
        if a is _NO:
            return generic(n, *rest, **kwargs)
        return generic(n, a, *rest, **kwargs)
    return kernel


register_cpu(_polygamma_decl.functional[0], _polygamma_cpu)
