"""Sample-input generators for the OpInfo sweep (``OpInfo.samples``).

Each generator is ``samples(dtype, rng) -> list[SampleInput]`` with NumPy arrays for tensor
arguments; ``domain`` names keep inputs where the reference is defined (``"positive"`` for
log, ``"unit"`` for asin, ...).
"""

from __future__ import annotations

import numpy as np

from ._decl import SampleInput

__all__ = ["binary_samples", "make_array", "unary_samples"]

SHAPES = [(), (5,), (2, 3), (0,), (2, 1, 3)]


def make_array(shape, dtype, rng, domain=None) -> np.ndarray:
    """A random array of ``dtype`` (an mdtensor DType) within ``domain``."""
    npd = dtype.numpy
    if dtype.kind == "b":
        return np.asarray(rng.random(shape) > 0.5)
    if dtype.kind in "iu":
        info = np.iinfo(npd)
        lo, hi = max(info.min, -9), min(info.max, 9)
        if domain == "shift":
            lo, hi = 0, min(info.bits - 1, 7)
        elif domain in ("positive", "nonzero", "pow"):
            lo = max(lo, 1)
        elif domain == "nonnegative":
            lo = max(lo, 0)
        if domain == "pow":
            hi = min(hi, 3)
        return np.asarray(rng.integers(lo, hi + 1, size=shape)).astype(npd)
    lo, hi = -2.0, 2.0
    if domain in ("positive", "nonzero"):
        lo, hi = 0.1, 3.0
    elif domain == "nonnegative":
        lo, hi = 0.0, 3.0
    elif domain == "unit":
        lo, hi = -0.95, 0.95
    elif domain == "open_unit":
        lo, hi = -0.9, 0.9
    elif domain == "ge_one":
        lo, hi = 1.05, 3.0
    elif domain == "gt_minus_one":
        lo, hi = -0.9, 2.0
    elif domain == "pow":
        lo, hi = 0.2, 2.0
    real = rng.uniform(lo, hi, size=shape)
    if dtype.kind == "c":
        real = real + 1j * rng.uniform(lo, hi, size=shape)
    return np.asarray(real).astype(npd)


def unary_samples(domain=None, kwargs=({},)):
    def samples(dtype, rng):
        out = []
        for shape in SHAPES:
            for kw in kwargs:
                if "axis" in kw and kw["axis"] is not None and len(shape) == 0:
                    continue  # no axis to reduce over
                out.append(SampleInput((make_array(shape, dtype, rng, domain),), dict(kw),
                                       name=f"{shape}"))
        return out

    return samples


def binary_samples(domain=None):
    def samples(dtype, rng):
        out = []
        for sa, sb in [((), ()), ((5,), (5,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((0,), (1,))]:
            a = make_array(sa, dtype, rng, None if domain in ("nonzero",) else domain)
            b = make_array(sb, dtype, rng, domain)
            out.append(SampleInput((a, b), name=f"{sa}x{sb}"))
        scalar = {"b": True, "i": 2, "u": 2, "f": 1.5, "c": 1.5}[dtype.kind]
        a = make_array((4,), dtype, rng, None if domain == "nonzero" else domain)
        out.append(SampleInput((a, scalar), name="tensor-scalar"))
        return out

    return samples
