"""Pairwise distances: ``cdist(x1, x2, p)``, as PyTorch's.

``x1`` is ``(*, P, M)``, ``x2`` ``(*, R, M)`` (batch dimensions broadcast); the result is
``(*, P, R)``, the p-norms of the differences of their rows: ``p = 0`` counts the
coordinates that differ, ``p = inf`` takes the largest, any other ``p >= 0`` is
``sum(|d|^p)^(1/p)``.  A NaN coordinate makes the distance NaN for every ``p`` (PyTorch's
``p = inf`` skips it: a documented difference).

Note [Euclidean distances by matrix products]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As PyTorch's, ``p = 2`` computes ``|x|^2 + |y|^2 - 2 x.y`` with one matrix product
(clamped at 0, then the square root) when ``compute_mode`` is ``"use_mm_for_euclid_dist"``,
or is ``None``/``"use_mm_for_euclid_dist_if_necessary"`` and ``P`` or ``R`` exceeds 25: fast,
and off by cancellation for close points (a distance of 0 can come out as ~1e-4 in float32).
``"donot_use_mm_for_euclid_dist"`` always takes the differences (``P * R * M`` elements).
The derivative (``ops/distances_derivatives.py``) is the differences' in every mode, 0 where
a distance is 0, as PyTorch's ``cdist_backward``.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._cpu_kernels import register_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._promotion import bfloat16_via_float32, dtype_of
from ._samples import make_array
from .elementwise import FLOATS

__all__: list[str] = []

_MODES = (None, "use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist",
          "donot_use_mm_for_euclid_dist")


def _meta(x1, x2, p=2.0, compute_mode=None):
    for name, x in (("x1", x1), ("x2", x2)):
        if x.ndim < 2:
            raise ValueError(f"cdist: expected {name} of at least 2 dimensions, got shape "
                             f"{tuple(x.shape)}")
        if x.dtype.kind != "f":
            raise TypeError(f"cdist: expected floating-point tensors, got {name} of dtype "
                            f"{x.dtype.name}")
    if x1.dtype != x2.dtype:
        raise TypeError(f"cdist: expected x1 and x2 of the same dtype, got {x1.dtype.name} "
                        f"and {x2.dtype.name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise ValueError(f"cdist: x1 and x2 must have the same number of columns, got "
                         f"{x1.shape[-1]} and {x2.shape[-1]}")
    if not p >= 0:
        raise ValueError(f"cdist: p must be non-negative, got {p}")
    if compute_mode not in _MODES:
        raise ValueError(f"cdist: compute_mode must be one of {', '.join(map(str, _MODES))}, "
                         f"got {compute_mode!r}")
    batch = mf.broadcast_shapes("cdist", tuple(x1.shape[:-2]), tuple(x2.shape[:-2]))
    return batch + (x1.shape[-2], x2.shape[-2]), x1.dtype


def uses_products(p, compute_mode, rows1: int, rows2: int) -> bool:
    """Whether ``cdist`` computes by matrix products (Note [Euclidean distances by matrix
    products])."""
    if p != 2 or compute_mode == "donot_use_mm_for_euclid_dist":
        return False
    return compute_mode == "use_mm_for_euclid_dist" or rows1 > 25 or rows2 > 25


def _cdist(xp, x1, x2, p=2.0, compute_mode=None):
    if dtype_of(x2) is dt.bfloat16:  # computed in float32 and rounded, as PyTorch's
        r = bfloat16_via_float32(xp, _cdist, x1, xp.astype(x2, xp.float32), p, compute_mode)
        if r is not None:
            return r
    shape, _ = _meta(mf.ArraySpec(x1), mf.ArraySpec(x2), p, compute_mode)
    batch, (rows1, rows2), m = shape[:-2], shape[-2:], x1.shape[-1]
    x1 = xp.broadcast_to(x1, batch + (rows1, m))
    x2 = xp.broadcast_to(x2, batch + (rows2, m))
    if m == 0 or 0 in shape:
        return xp.zeros(shape, dtype=x1.dtype)
    if uses_products(p, compute_mode, rows1, rows2):
        n1 = xp.sum(x1 * x1, axis=-1)[..., :, None]
        n2 = xp.sum(x2 * x2, axis=-1)[..., None, :]
        sq = n1 + n2 - 2.0 * (x1 @ xp.matrix_transpose(x2))
        return xp.sqrt(xp.maximum(sq, 0.0))
    diff = xp.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:  # PyTorch's min(ceil(|d|), 1): a NaN difference counts as NaN
        return xp.sum(xp.minimum(xp.ceil(diff), 1.0), axis=-1)
    if p == 1:
        return xp.sum(diff, axis=-1)
    if p == 2:
        return xp.sqrt(xp.sum(diff * diff, axis=-1))
    if p == math.inf:
        return xp.max(diff, axis=-1)
    return xp.sum(diff ** p, axis=-1) ** (1.0 / p)


def _ref(x1, x2, p=2.0, compute_mode=None):
    diff = np.abs(x1[..., :, None, :] - x2[..., None, :, :])
    if p == 0:
        return np.minimum(np.ceil(diff), 1).sum(-1)
    if p == math.inf:
        return diff.max(-1) if diff.shape[-1] else diff.sum(-1)
    return (diff ** p).sum(-1) ** (1.0 / p)


def _samples(dtype, rng):
    a, b = make_array((4, 3), dtype, rng), make_array((5, 3), dtype, rng)
    out = [SampleInput((a, b), {"p": p}, name=f"p={p}") for p in (0.0, 1.0, 2.0, 3.0, 0.5,
                                                                  math.inf)]
    out.append(SampleInput((make_array((2, 1, 4, 3), dtype, rng), make_array((3, 2, 3), dtype,
                                                                             rng))))
    out.append(SampleInput((make_array((30, 3), dtype, rng), b), name="products"))
    return out


def _errors():
    a = np.ones((2, 3))
    yield ErrorInput(SampleInput((np.ones(3), a)), ValueError,
                     r"cdist: expected x1 of at least 2 dimensions, got shape \(3,\)")
    yield ErrorInput(SampleInput((a, np.ones((2, 4)))), ValueError,
                     "cdist: x1 and x2 must have the same number of columns, got 3 and 4")
    yield ErrorInput(SampleInput((a, a), {"p": -1.0}), ValueError,
                     "cdist: p must be non-negative, got -1.0")
    yield ErrorInput(SampleInput((a.astype(np.int64), a.astype(np.int64))), TypeError,
                     "cdist: expected floating-point tensors, got x1 of dtype int64")
    yield ErrorInput(SampleInput((a, a.astype(np.float32))), TypeError,
                     "cdist: expected x1 and x2 of the same dtype")


defop("cdist(Tensor x1, Tensor x2, float p=2.0, str? compute_mode=None) -> Tensor",
      impl=_cdist, meta=_meta, promote_scalars=False,
      info=OpInfo(ref=_ref, dtypes=FLOATS, samples=_samples, errors=_errors))


# Note [cdist on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~
# The CPU kernel (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py) computes the
# differences' norms of the generic impl -- the broadcast differences, then NumPy's
# reductions called directly -- for operands of one floating dtype with columns and rows,
# ``p`` 1, 2, inf or another positive number, where no matrix products are asked for (Note
# [Euclidean distances by matrix products]); ``p = 2`` squares the differences without
# their absolute values (the same numbers).  Anything else, and batch dimensions that do
# not broadcast, take the generic kernel.

_add, _largest = np.add.reduce, np.maximum.reduce


def _np_cdist(x1, x2, p=2.0, compute_mode=None):
    s1, s2 = x1.shape, x2.shape
    if (len(s1) < 2 or len(s2) < 2 or x1.dtype != x2.dtype or x1.dtype.kind != "f"
            or s1[-1] != s2[-1] or not s1[-1] or not s1[-2] or not s2[-2]
            or type(p) not in (float, int) or not p > 0 or compute_mode not in _MODES
            or uses_products(p, compute_mode, s1[-2], s2[-2])):
        return None
    try:
        diff = x1[..., :, None, :] - x2[..., None, :, :]
    except ValueError:  # batch dimensions that do not broadcast
        return None
    if p == 2:
        diff *= diff
        return np.sqrt(_add(diff, -1), out=None)
    np.abs(diff, out=diff)
    if p == 1:
        return _add(diff, -1)
    if p == math.inf:
        return _largest(diff, -1)
    diff **= p
    return _add(diff, -1) ** (1.0 / p)


register_direct(CATALOGUE["aten::cdist"].functional[0], _np_cdist, arity=2)
