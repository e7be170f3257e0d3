"""``md.linalg.norm``: PyTorch's (and NumPy's) one norm function, choosing between the
Array API's ``vector_norm`` and ``matrix_norm`` from ``ord`` and ``dim``.

As ``torch.linalg.norm``: with ``dim`` an int (or a 1-D input and no ``dim``) it is a vector
norm, with two dims (or a 2-D input and ``ord`` given) a matrix norm over them, and with
neither ``ord`` nor ``dim`` the 2-norm of the flattened input.  CompositeImplicitAutograd:
gradients, Meta kernels and every backend come from the two norms.
"""

from __future__ import annotations

import numpy as np

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import namespaces as _namespaces

from . import _meta_fns as mf
from ._composite import names_op
from ._cpu_reductions import without_autograd
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop, register_leaf
from ._samples import make_array
from .elementwise import FLOATS
from .linalg import LINALG_NAMES, np_vector_norm

__all__ = ["norm_plan"]

aten = _namespaces.aten._calls


def norm_plan(ndim: int, ord, dim) -> tuple[bool, tuple | None]:  # noqa: A002
    """``(vector, dims)``: whether ``linalg.norm(x, ord, dim)`` of an ``ndim``-d ``x`` is a
    vector norm over ``dims`` (None: all of it) or a matrix norm over the two (normalized)
    ``dims``; raises the op's errors.  The decomposition, the CPU kernel and the derivative
    formula (ops/linalg_derivatives.py) follow it."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
    if ord is not None and dim is None:
        if ndim not in (1, 2):
            raise ValueError(f"linalg.norm: If dim is not specified but ord is, the input "
                             f"must be 1D or 2D. Got {ndim}D.")
        dim = tuple(range(ndim))
    if dim is None or len(dim) == 1 or ord is None:
        if isinstance(ord, str):
            raise ValueError(f"linalg.norm: order {ord} not supported for vector norms")
        return True, dim
    if len(dim) != 2:
        raise ValueError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                         f"Got {list(dim)}")
    a, b = (mf.normalize_axis("linalg.norm", v, ndim) for v in dim)
    if a == b:
        raise ValueError(f"linalg.norm: dims must be different, got {list(dim)}")
    return False, (a, b)


def _norm(x, ord=None, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = aten.astype(x, dtype)
    vector, dim = norm_plan(x.ndim, ord, dim)
    if vector:
        return aten.linalg_vector_norm(x, axis=dim, keepdims=keepdim,
                                       ord=2 if ord is None else ord)
    a, b = dim
    r = aten.linalg_matrix_norm(aten.moveaxis(x, [a, b], [-2, -1]), keepdims=False, ord=ord)
    if keepdim:
        for axis in sorted((a, b)):
            r = aten.unsqueeze(r, axis)
    return r


_named_norm = names_op("linalg_norm")(_norm)  # the inner ops' errors name linalg_norm


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
      "ScalarType? dtype=None) -> Tensor", composite=_named_norm,
      names=(),
      info=OpInfo(ref=_ref, dtypes=FLOATS, samples=_samples, errors=lambda: [
          ErrorInput(SampleInput((np.zeros((2, 2, 2)), 2)), ValueError,
                     "If dim is not specified but ord is, the input must be 1D or 2D")]))
LINALG_NAMES["norm"] = "linalg_norm"


# Note [linalg.norm on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The decomposition costs a dispatch of its own and the vector norm's keyword call (2 us of
# 8 on a small tensor).  As ``nansum`` (Note [Composite ops with CPU kernels] in
# ops/_cpu_reductions.py), ``linalg_norm`` has a CPU kernel and a derivative formula of its
# own (ops/linalg_derivatives.py: the vector or matrix norm's formula, by ``norm_plan``).
# The kernel computes the 2-norms (``ord=None``) of NumPy arrays without ``dtype=`` as the
# vector norm's CPU kernel does (``np_vector_norm``); every other call, and every one that
# function leaves to the generic kernel, is the decomposition's.  The kernel is registered
# as a leaf, so the Autograd kernel above it calls it as it is, without its exclude guard
# (4K instructions of a call recording for autograd); the decomposition, which calls ops,
# therefore excludes the Autograd key itself, as that guard did: its ops record nothing of
# their own (the Autograd kernel records ``linalg_norm``'s formula).


_generic_norm = without_autograd(_named_norm)


def _norm_cpu(x, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    a = x._data
    if ord is None and dtype is None and type(a) is np.ndarray and a.ndim:
        axis = dim if dim is None or type(dim) is int else tuple(dim)
        r = np_vector_norm(a, axis, keepdim)
        if r is not None:
            return x._device.wrap(r)
    return _generic_norm(x, ord, dim, keepdim, dtype=dtype)


register_leaf(CATALOGUE["aten::linalg_norm"].functional[0], _norm_cpu, DispatchKey.CPU)
