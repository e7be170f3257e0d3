"""Derivative rules of ``ops/float_values.py`` (PyTorch's formulas, in md ops)."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import rule

__all__: list[str] = []


@rule("nan_to_num")
def _nan_to_num(g, out, x, *rest, **kwargs):
    # the replaced elements are constants
    return (aten.where(aten.isfinite(x), g, 0), *(None for _ in rest))


@rule("angle")
def _angle(g, out, x):
    if x.dtype.kind != "c":
        return (aten.zeros_like(x),)
    # PyTorch's: g * z / |z|^2 * i, and 0 at z = 0
    step = aten.mul(aten.div(aten.mul(g, x), aten.square(aten.abs(x))), 1j)
    return (aten.where(aten.eq(x, 0), 0, step),)
