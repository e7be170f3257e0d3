"""Shape manipulation, views, copies and torch-style tensor ops.

View ops declare ``Tensor(a) self -> Tensor(a)``: the ADInplaceOrView layer records view
metadata on their results and shares the base's version counter, and on backends with views
(NumPy, CuPy) the result shares memory with its base.
"""

from __future__ import annotations

import numpy as np

from . import _meta_fns as mf
from ._decl import OpInfo, SampleInput, defop
from ._samples import make_array, unary_samples
from .elementwise import ALL


def _clone(xp, x):
    return xp.asarray(x, copy=True)


defop("clone(Tensor self) -> Tensor", impl=_clone, meta=mf.same, methods=("clone",),
      info=OpInfo(ref=np.copy, dtypes=ALL, samples=unary_samples(None)))


def _transpose(xp, x, dim0, dim1):
    n = x.ndim
    perm = list(range(n))
    d0, d1 = mf.normalize_axes("transpose", dim0, n)[0], mf.normalize_axes("transpose", dim1,
                                                                          n)[0]
    perm[d0], perm[d1] = perm[d1], perm[d0]
    return xp.permute_dims(x, tuple(perm))


def _transpose_meta(x, dim0, dim1):
    n = x.ndim
    shape = list(x.shape)
    d0 = mf.normalize_axes("transpose", dim0, n)[0]
    d1 = mf.normalize_axes("transpose", dim1, n)[0]
    shape[d0], shape[d1] = shape[d1], shape[d0]
    return tuple(shape), x.dtype


def _transpose_samples(dtype, rng):
    return [SampleInput((make_array((2, 3, 4), dtype, rng), 0, 2)),
            SampleInput((make_array((2, 3), dtype, rng), -1, 0))]


defop("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", impl=_transpose,
      meta=_transpose_meta, methods=("transpose", "swapaxes"), names=("transpose",),
      info=OpInfo(ref=lambda x, a, b: np.swapaxes(x, a, b), dtypes=ALL,
                  samples=_transpose_samples))


def _view(xp, x, shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    out = xp.reshape(x, shape, copy=False)
    return out


def _view_meta(x, shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    n = x.numel() if hasattr(x, "numel") else int(np.prod(x.shape))
    known = 1
    infer = [i for i, s in enumerate(shape) if s == -1]
    for s in shape:
        if s != -1:
            known *= s
    if len(infer) > 1:
        raise ValueError(f"view: only one dimension can be inferred, got shape {shape}")
    if infer:
        if known == 0 or n % known:
            raise ValueError(f"view: shape {shape} is invalid for input of size {n}")
        shape = tuple(n // known if s == -1 else s for s in shape)
    elif known != n:
        raise ValueError(f"view: shape {shape} is invalid for input of size {n}")
    return shape, x.dtype


defop("view(Tensor(a) self, SymInt[] shape) -> Tensor(a)", impl=_view, meta=_view_meta,
      methods=("view",), names=(), varargs=True,
      info=OpInfo(ref=lambda x, s: np.reshape(x, s), dtypes=ALL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng), (3, 2))),
                                          SampleInput((make_array((2, 3), d, rng), (-1,)))]))
