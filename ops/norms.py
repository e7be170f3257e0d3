"""``md.linalg.norm``: PyTorch's (and NumPy's) one norm function, choosing between the
Array API's ``vector_norm`` and ``matrix_norm`` from ``ord`` and ``dim``.

As ``torch.linalg.norm``: with ``dim`` an int (or a 1-D input and no ``dim``) it is a vector
norm, with two dims (or a 2-D input and ``ord`` given) a matrix norm over them, and with
neither ``ord`` nor ``dim`` the 2-norm of the flattened input.  CompositeImplicitAutograd:
gradients, Meta kernels and every backend come from the two norms.
"""

from __future__ import annotations

import numpy as np

from mdtensor.dispatch.namespaces import namespaces as _namespaces

from . import _meta_fns as mf
from ._composite import names_op
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATS
from .linalg import LINALG_NAMES

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls


def _norm(x, ord=None, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = aten.astype(x, dtype)
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
    if ord is not None and dim is None:
        if x.ndim not in (1, 2):
            raise ValueError(f"linalg.norm: If dim is not specified but ord is, the input "
                             f"must be 1D or 2D. Got {x.ndim}D.")
        dim = tuple(range(x.ndim))
    if dim is None or len(dim) == 1 or ord is None:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm: order {ord} not supported for vector norms")
        return aten.linalg_vector_norm(x, axis=dim, keepdims=keepdim,
                                       ord=2 if ord is None else ord)
    if len(dim) != 2:
        raise ValueError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                         f"Got {list(dim)}")
    a, b = (mf.normalize_axis("linalg.norm", v, x.ndim) for v in dim)
    if a == b:
        raise ValueError(f"linalg.norm: dims must be different, got {list(dim)}")
    r = aten.linalg_matrix_norm(aten.moveaxis(x, [a, b], [-2, -1]), keepdims=False, ord=ord)
    if keepdim:
        for axis in sorted((a, b)):
            r = aten.unsqueeze(r, axis)
    return r


def _samples(dtype, rng):
    v, m = make_array((5,), dtype, rng), make_array((3, 4), dtype, rng)
    b = make_array((2, 3, 4), dtype, rng)
    return [SampleInput((v,)), SampleInput((m,)), SampleInput((v, 1)),
            SampleInput((m, "fro")), SampleInput((m, 1)), SampleInput((b, None, (0, 2))),
            SampleInput((b, 2, 1), {"keepdim": True}), SampleInput((b, "fro", (2, 0)),
                                                                  {"keepdim": True})]


def _ref(x, ord=None, dim=None, keepdim=False):
    if ord is None and dim is None:
        return np.asarray(np.linalg.norm(x.reshape(-1)))
    return np.asarray(np.linalg.norm(x, ord, dim, keepdim))


defop("linalg_norm(Tensor self, Any? ord=None, int[1]? dim=None, bool keepdim=False, *, "
      "ScalarType? dtype=None) -> Tensor", composite=names_op("linalg_norm")(_norm),
      names=(),
      info=OpInfo(ref=_ref, dtypes=FLOATS, samples=_samples, errors=lambda: [
          ErrorInput(SampleInput((np.zeros((2, 2, 2)), 2)), ValueError,
                     "If dim is not specified but ord is, the input must be 1D or 2D")]))
LINALG_NAMES["norm"] = "linalg_norm"
