"""Linear algebra: matmul and friends (Array API linear algebra functions)."""

from __future__ import annotations

import numpy as np
import numpy as _np

from . import _meta_fns as mf
from ._decl import OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import NUMERIC


def _matmul(xp, a, b):
    return xp.matmul(a, b)


def _matmul_samples(dtype, rng):
    shapes = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
              ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))]
    return [SampleInput((make_array(a, dtype, rng), make_array(b, dtype, rng)),
                        name=f"{a}@{b}") for a, b in shapes]


def _np_matmul(xp, a, b):
    return _np.matmul(a, b)


defop("matmul(Tensor self, Tensor other) -> Tensor", impl=_matmul, structured=True,
      cpu_impl=_np_matmul,
      meta=mf.matmul, methods=("matmul",),
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_matmul_samples))
