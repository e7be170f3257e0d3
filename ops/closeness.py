"""Closeness of two tensors: ``isclose`` (elementwise) and ``allclose`` (one bool), as
PyTorch computes them.

``|self - other| <= atol + rtol * |other|``, and equality itself (so equal infinities are
close), and with ``equal_nan`` two NaNs.  As PyTorch, both tensors must have one dtype (no
promotion: closeness of an int and a float tensor is refused), bools compare as the default
float dtype, integers subtract in their own dtype (unsigned ones wrap, as PyTorch's) and
zero tolerances are equality.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.namespaces import namespaces as _namespaces

from . import _meta_fns as mf
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import ALL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls


def _check(name, a_dtype, b_dtype, rtol, atol) -> None:
    if a_dtype != b_dtype:
        raise TypeError(f"{name}: expected self and other to have the same dtype, but got "
                        f"{dt.as_dtype(a_dtype).name} and {dt.as_dtype(b_dtype).name}")
    if rtol < 0:
        raise ValueError(f"{name}: rtol must be greater than or equal to zero, but got {rtol}")
    if atol < 0:
        raise ValueError(f"{name}: atol must be greater than or equal to zero, but got {atol}")


def _isclose(xp, a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    _check("isclose", a.dtype, b.dtype, rtol, atol)
    kind = dt.as_dtype(a.dtype).kind
    close = a == b
    if equal_nan and kind in "fc":
        close = close | (xp.isnan(a) & xp.isnan(b))
    if rtol == 0 and atol == 0:
        return close
    if kind == "b":
        a, b = xp.astype(a, xp.float32), xp.astype(b, xp.float32)
    if kind in "iu":  # in float64: a difference of integers may wrap (uint8 1 - 2 is 255)
        a, b = xp.astype(a, xp.float64), xp.astype(b, xp.float64)
        return close | (xp.abs(a - b) <= atol + xp.abs(rtol * b))
    diff = xp.abs(a - b)
    allowed = atol + xp.abs(rtol * b)
    return close | (xp.isfinite(diff) & (diff <= allowed))


def _isclose_meta(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    _check("isclose", a.dtype, b.dtype, rtol, atol)
    return mf.broadcast_shapes("isclose", a.shape, b.shape), dt.bool_


def _allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """CompositeImplicitAutograd: ``all(isclose(...))`` as a Python bool."""
    if a.dtype is not b.dtype:
        _check("allclose", a.dtype, b.dtype, rtol, atol)
    if a.shape != b.shape:  # isclose's check, in allclose's name
        mf.broadcast_shapes("allclose", tuple(a.shape), tuple(b.shape))
    return bool(aten.all(aten.isclose(a, b, rtol, atol, equal_nan)))


def _samples(dtype, rng):
    a = make_array((2, 3), dtype, rng)
    near = a + (a * 1e-6).astype(a.dtype) if dtype.kind in "fc" else a.copy()
    far = make_array((2, 3), dtype, rng)
    out = [SampleInput((a, near)), SampleInput((a, far)), SampleInput((a, far[0])),
           SampleInput((a, far), {"rtol": 0.5, "atol": 1.0})]
    if dtype.kind == "f":
        nan = np.asarray([np.nan, np.inf, -np.inf, 1.0], dtype=a.dtype)
        out += [SampleInput((nan, nan)), SampleInput((nan, nan), {"equal_nan": True})]
    return out


def _errors():
    return [ErrorInput(SampleInput((np.zeros(2), np.zeros(2, np.float32))), TypeError,
                       "isclose: expected self and other to have the same dtype"),
            ErrorInput(SampleInput((np.zeros(2), np.zeros(2)), {"rtol": -1.0}), ValueError,
                       "isclose: rtol must be greater than or equal to zero")]


defop("isclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, "
      "bool equal_nan=False) -> Tensor", impl=_isclose, meta=_isclose_meta,
      methods=("isclose",), promote_scalars=False,
      info=OpInfo(ref=lambda a, b, **k: np.isclose(a, b, **k), dtypes=ALL, samples=_samples,
                  errors=_errors, differentiable=False))
defop("allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, "
      "bool equal_nan=False) -> bool", composite=_allclose, methods=("allclose",),
      tags=("dynamic_output_shape",),  # a bool read from the values: none on meta
      info=OpInfo(ref=lambda a, b, **k: np.allclose(a, b, **k), dtypes=ALL, samples=_samples,
                  differentiable=False))
