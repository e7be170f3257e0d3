"""Reductions and statistics (Array API statistical functions, torch spellings).

Note [Reduction arguments]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Schemas use the Array API names ``axis``/``keepdims``, positional-or-keyword, so both
``md.sum(x, axis=0)`` (Array API) and ``x.sum(0)`` (PyTorch) work; ``dim=``/``keepdim=`` are
accepted as keyword aliases.
"""

from __future__ import annotations

import numpy as np

from . import _meta_fns as mf
from ._decl import OpInfo, defop
from ._samples import unary_samples
from .elementwise import FLOATING, NUMERIC

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}


def _axis(axis):
    if axis is None or isinstance(axis, int):
        return axis
    return tuple(axis)


def _sum(xp, x, axis=None, keepdims=False, *, dtype=None):
    return xp.sum(x, axis=_axis(axis), keepdims=keepdims, dtype=dtype and _native(xp, dtype))


def _native(xp, dtype):
    from mdtensor._dtypes import as_dtype

    return getattr(xp, as_dtype(dtype).name)


def _sum_meta(x, axis=None, keepdims=False, *, dtype=None):
    shape, d = mf.reduction(x, axis, keepdims, dtype=dtype)
    if dtype is None and d.kind in "bi":
        from mdtensor import _dtypes
        d = _dtypes.int64
    elif dtype is None and d.kind == "u":
        from mdtensor import _dtypes
        d = _dtypes.uint64
    return shape, d


def _np_sum(xp, x, axis=None, keepdims=False, *, dtype=None):
    # Note [NumPy fast impls]: ufunc.reduce skips np.sum's Python-level dispatch.
    # Positional: reduce(array, axis, dtype, out, keepdims).
    return _add_reduce(x, _axis(axis), dtype and _native(np, dtype), None, keepdims)


_add_reduce = np.add.reduce


_REDUCE_SAMPLES = unary_samples(None, kwargs=({}, {"axis": 0}, {"axis": -1, "keepdims": True}))

defop("sum(Tensor self, int[1]? axis=None, bool keepdims=False, *, ScalarType? dtype=None)"
      " -> Tensor", impl=_sum, cpu_impl=_np_sum, meta=_sum_meta, tags=("reduction",), methods=("sum",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.sum(x, axis=axis,
                                                                  keepdims=keepdims),
                  dtypes=NUMERIC, samples=_REDUCE_SAMPLES))


def _mean(xp, x, axis=None, keepdims=False):
    return xp.mean(x, axis=_axis(axis), keepdims=keepdims)


defop("mean(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor", impl=_mean,
      meta=mf.reduction, tags=("reduction",), methods=("mean",), kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.mean(x, axis=axis,
                                                                   keepdims=keepdims),
                  dtypes=FLOATING, samples=_REDUCE_SAMPLES))
