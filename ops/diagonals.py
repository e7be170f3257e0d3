"""Diagonals and triangles, with PyTorch's spellings: ``diagonal``, ``diag``,
``tril_indices``, ``triu_indices``.

``diagonal(x, offset, dim1, dim2)`` is the Array API's ``linalg.diagonal`` of ``x`` with
``dim1``/``dim2`` moved last (the diagonal is the last dimension, as PyTorch's).  As every
mdtensor op that is not declared a view it returns a new tensor: writing into it leaves
``x`` as it was, where PyTorch's diagonal is a view (docs/KIT.md).  ``diag(v, k)`` of a
vector is the square matrix with ``v`` on diagonal ``k``, of a matrix its diagonal ``k``.
``diagonal`` and ``diag`` have kernels of their own (on NumPy the ndarray's diagonal,
copied) and derivative formulas (ops/diagonals_derivatives.py); the index factories
compute on the host (their values depend only on the sizes) and move the result to the
device.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import namespaces as _namespaces

from . import _meta_fns as mf
from ._cpu_kernels import register_cpu
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._factory import deffactory
from ._samples import make_array
from .elementwise import ALL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls


def _diagonal_axes(x, dim1, dim2) -> tuple[int, int]:
    if x.ndim < 2:
        raise ValueError(f"diagonal: expected a tensor of at least 2 dimensions, got "
                         f"{x.ndim}")
    a = mf.normalize_axis("diagonal", dim1, x.ndim)
    b = mf.normalize_axis("diagonal", dim2, x.ndim)
    if a == b:
        raise ValueError(f"diagonal: dimensions cannot be identical {dim1}, {dim2}")
    return a, b


def _diagonal(xp, x, offset=0, dim1=0, dim2=1):
    a, b = _diagonal_axes(x, dim1, dim2)
    moved = xp.moveaxis(x, (a, b), (-2, -1))
    return xp.asarray(xp.linalg.diagonal(moved, offset=offset), copy=True)


def _np_diagonal(xp, x, offset=0, dim1=0, dim2=1):
    # NumPy's view puts the diagonal last too; int dimensions in range and distinct (the
    # common case) are checked here in one frame, the rest by ``_diagonal_axes``
    n = x.ndim
    if type(dim1) is int and type(dim2) is int and -n <= dim1 < n and -n <= dim2 < n \
            and (dim1 - dim2) % n and type(offset) is int:
        return x.diagonal(offset, dim1, dim2).copy()
    a, b = _diagonal_axes(x, dim1, dim2)
    return x.diagonal(offset, a, b).copy()


def _cpu_diagonal(generic):
    # Note [Hand-written CPU kernels] in ops/_cpu_kernels.py: ``_np_diagonal``'s common
    # case in the kernel's own frame, without the generic kernel's star call into the impl
    # (the sweep's ``md.diagonal(x, 1, 2, 0)`` of (2, 3, 4) float32: a frame of its 5);
    # anything else goes to the kernel from ``_np_diagonal``, whose checks name the errors
    def kernel(a, /, offset=0, dim1=0, dim2=1, *rest, **kwargs):
        x = a._data
        n = x.ndim
        if type(offset) is int and type(dim1) is int and type(dim2) is int \
                and -n <= dim1 < n and -n <= dim2 < n and (dim1 - dim2) % n \
                and not rest and not kwargs:
            return a._device.wrap(x.diagonal(offset, dim1, dim2).copy())
        return generic(a, offset, dim1, dim2, *rest, **kwargs)
    return kernel


def _diagonal_meta(x, offset=0, dim1=0, dim2=1):
    a, b = _diagonal_axes(x, dim1, dim2)
    n, m = x.shape[a], x.shape[b]
    k = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    return tuple(d for i, d in enumerate(x.shape) if i not in (a, b)) + (k,), x.dtype


def _diag_check(x) -> None:
    if x.ndim not in (1, 2):
        raise ValueError(f"diag: expected a 1-D or 2-D tensor, got {x.ndim}-D")


def _diag(xp, x, diagonal=0):
    # A matrix's diagonal ``k``, or the square matrix with the
    # vector on diagonal ``k`` -- where the mask of that diagonal selects the vector, padded
    # to a column of the result's size (row i of diagonal k >= 0 holds v[i], of k < 0
    # v[i + k]), so every backend builds it without writing into an array
    _diag_check(x)
    if x.ndim == 2:
        return _diagonal(xp, x, diagonal, 0, 1)
    n, k = x.shape[0], abs(diagonal)
    device = getattr(x, "device", None)
    pad = xp.zeros((k,), dtype=x.dtype, device=device)
    column = xp.concat([x, pad] if diagonal >= 0 else [pad, x])[:, None]
    mask = xp.eye(n + k, n + k, k=diagonal, dtype=xp.bool, device=device)
    return xp.where(mask, column, xp.zeros((), dtype=x.dtype, device=device))


def _np_diag(xp, x, diagonal=0):
    # See Note [NumPy fast impls] in ops/_decl.py: np.diag is a Python function; here the
    # ndarray's diagonal, copied, or the vector written into zeros with a strided slice of
    # the flat result (element (i, i + k) of an s x s matrix is at k + i (s + 1))
    if x.ndim == 2:
        return x.diagonal(diagonal).copy()
    if x.ndim != 1:
        _diag_check(x)
    n = x.shape[0]
    size = n + abs(diagonal)
    out = np.zeros((size, size), x.dtype)
    start = diagonal if diagonal >= 0 else -diagonal * size
    out.reshape(-1)[start:start + n * (size + 1):size + 1] = x
    return out


def _diag_meta(x, diagonal=0):
    _diag_check(x)
    if x.ndim == 2:
        return _diagonal_meta(x, diagonal, 0, 1)
    size = x.shape[0] + abs(diagonal)
    return (size, size), x.dtype


def _diagonal_ref(x, offset=0, dim1=0, dim2=1):
    return np.diagonal(x, offset, dim1, dim2)


defop("diagonal(Tensor self, int offset=0, int dim1=0, int dim2=1) -> Tensor",
      impl=_diagonal, cpu_impl=_np_diagonal, meta=_diagonal_meta, methods=("diagonal",),
      info=OpInfo(ref=_diagonal_ref, dtypes=ALL, samples=lambda d, rng: [
          SampleInput((make_array((3, 4), d, rng),)),
          SampleInput((make_array((3, 4), d, rng), -1)),
          SampleInput((make_array((2, 3, 4), d, rng), 1, 2, 0))],
          errors=lambda: [ErrorInput(SampleInput((np.zeros((2, 2)), 0, 1, 1)), ValueError,
                                     "diagonal: dimensions cannot be identical")]))
register_cpu(CATALOGUE["aten::diagonal"].functional[0], _cpu_diagonal, DispatchKey.CPU)
defop("diag(Tensor self, int diagonal=0) -> Tensor", impl=_diag, cpu_impl=_np_diag,
      meta=_diag_meta, methods=("diag",),
      info=OpInfo(ref=lambda x, k=0: np.diag(x, k), dtypes=ALL, samples=lambda d, rng: [
          SampleInput((make_array((3,), d, rng),)), SampleInput((make_array((3,), d, rng), 2)),
          SampleInput((make_array((3,), d, rng), -1)),
          SampleInput((make_array((3, 4), d, rng), 1)),
          SampleInput((make_array((4, 3), d, rng), -2)),
          SampleInput((make_array((0,), d, rng), 1))],
          errors=lambda: [ErrorInput(SampleInput((np.zeros((2, 2, 2)),)), ValueError,
                                     "diag: expected a 1-D or 2-D tensor, got 3-D")]))


def _tri_count(name, row, col, offset):
    for v, what in ((row, "row"), (col, "col")):
        if v < 0:
            raise ValueError(f"{name}: {what} must be non-negative, got {v}")
    keep = np.tril(np.ones((row, col), dtype=bool), offset) if name == "tril_indices" else \
        np.triu(np.ones((row, col), dtype=bool), offset)
    return keep


def _tri_indices(name):
    def impl(xp, row, col, offset=0, *, dtype=None, device=None):
        keep = _tri_count(name, row, col, offset)
        r, c = np.nonzero(keep)
        if not r.size:  # no index (Dask cannot chunk an empty host array)
            return xp.zeros((2, 0), dtype=dtype or xp.int64, device=device)
        out = np.stack([r, c]).astype(np.int64)
        arr = xp.asarray(out, device=device)
        return arr if dtype is None else xp.astype(arr, dtype)

    def meta(row, col, offset=0, *, dtype=None, **kwargs):
        n = int(_tri_count(name, row, col, offset).sum())
        return (2, n), dt.as_dtype(dtype) if dtype is not None else dt.int64

    impl.__name__ = name
    return impl, meta


for _name in ("tril_indices", "triu_indices"):
    _impl, _meta = _tri_indices(_name)
    _np = getattr(np, _name)
    deffactory(f"{_name}(int row, int col, int offset=0, *, ScalarType? dtype=None, "
               f"Device? device=None, bool requires_grad=False) -> Tensor", _impl, _meta,
               info=OpInfo(ref=lambda r, c, o=0, _np=_np: np.stack(_np(r, o, c)).astype(
                   np.int64), dtypes=(dt.int64,), differentiable=False,
                   samples=lambda d, rng: [SampleInput((3, 4, 1)), SampleInput((4, 3, -1)),
                                           SampleInput((0, 2))]))
