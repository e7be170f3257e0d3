"""Special functions of real arguments, as PyTorch's: ``erfc``, ``erfinv``, ``lgamma``,
``digamma`` and ``polygamma`` (``erf`` is in ``ops/elementwise.py``).

The kernels are written once against the Array API (Notes [erf] and [erfinv] in
``ops/_special.py``, [Gamma functions without loops] in ``ops/_gamma.py``): no SciPy, the
same algorithm on every backend.  Integer and bool inputs give the default float dtype;
complex inputs are refused, as PyTorch's CPU kernels refuse them.  Derivative rules:
``ops/special_functions_derivatives.py``.
"""

from __future__ import annotations

import importlib.util
import math

import numpy as np

from . import _gamma, _special
from . import _meta_fns as mf
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._promotion import bfloat16_via_float32
from ._samples import make_array, unary_samples
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


def _unary(name: str, fn, ref, domain=None) -> None:
    def impl(xp, a):
        r = bfloat16_via_float32(xp, fn, a)
        return fn(xp, to_float(xp, a)) if r is None else r

    impl.__name__ = f"_{name}"
    defop(f"{name}(Tensor self) -> Tensor", impl=impl, structured=True, meta=mf.unary_float,
          tags=("pointwise",), methods=(name,), accepts=REAL_KINDS,
          info=OpInfo(ref=ref, dtypes=FLOATS, samples=unary_samples(domain)))


_unary("erfc", _special.erfc, _math_ref(math.erfc))
_unary("erfinv", _special.erfinv, _scipy_ref("erfinv"), domain="open_unit")
_unary("lgamma", _gamma.lgamma, _math_ref(math.lgamma), domain="positive")
_unary("digamma", _gamma.digamma, _scipy_ref("digamma"), domain="positive")


def _polygamma(xp, n, a):
    if n < 0:
        raise ValueError(f"polygamma: n must be non-negative, got {n}")
    r = bfloat16_via_float32(xp, lambda xp, a: _gamma.polygamma(xp, n, a), a)
    return _gamma.polygamma(xp, n, to_float(xp, a)) if r is None else r


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


defop("polygamma(int n, Tensor self) -> Tensor", impl=_polygamma, structured=True,
      meta=_polygamma_meta, tags=("pointwise",), accepts=REAL_KINDS,
      info=OpInfo(ref=_scipy_ref("polygamma"), dtypes=FLOATS, samples=_polygamma_samples,
                  errors=_polygamma_errors))
