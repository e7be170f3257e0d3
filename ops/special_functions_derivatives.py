"""Derivative rules of ``ops/special_functions.py`` (PyTorch's formulas, in md ops)."""

from __future__ import annotations

import math

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import rule, uses_out

__all__: list[str] = []

_TWO_RSQRT_PI = 2.0 / math.sqrt(math.pi)


@rule("erfc")
def _erfc(g, out, x):
    return (aten.mul(g, aten.mul(aten.exp(aten.neg(aten.square(x))), -_TWO_RSQRT_PI)),)


@rule("erfinv")
@uses_out
def _erfinv(g, out, x):
    # PyTorch's: 0.5 sqrt(pi) exp(erfinv(x)^2) g
    return (aten.mul(g, aten.mul(aten.exp(aten.square(out)), 0.5 * math.sqrt(math.pi))),)


@rule("lgamma")
def _lgamma(g, out, x):
    return (aten.mul(g, aten.digamma(x)),)


@rule("digamma")
def _digamma(g, out, x):
    return (aten.mul(g, aten.polygamma(1, x)),)


@rule("polygamma")
def _polygamma(g, out, n, x):
    return None, aten.mul(g, aten.polygamma(n + 1, x))
