"""Meta functions of the linear-algebra ops (``md.linalg``, ``outer``, ``vecdot``,
``tensordot``): shapes and dtypes without data.

Note [Linalg checks]
~~~~~~~~~~~~~~~~~~~~
Each function here is also run by its op's real kernel on the arrays' shapes and dtypes
before the backend computes (``ops/linalg.py``), so that a matrix of the wrong shape gets
the same error naming the op on every backend and on Meta, where NumPy, JAX and
array_api_strict each word their own (or broadcast where PyTorch refuses).  Rules follow the
Array API and PyTorch: matrices are the last two dimensions, batch dimensions broadcast
where two operands meet, decompositions of real inputs give real factors (``eig``: complex),
and the singular values, eigenvalues of Hermitian matrices, norms and ``logabsdet`` are
real.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf

__all__ = ["LINALG_METAS", "outer", "tensordot", "vecdot"]


def _complex_of(d):
    return dt.complex128 if d in (dt.float64, dt.complex128) else dt.complex64


def _matrices(op, x, square=True):
    """``x``'s batch shape and matrix size, checked (the message of ops/linalg.py's
    ``_check_square``)."""
    shape = tuple(x.shape)
    if square and (len(shape) < 2 or shape[-1] != shape[-2]):
        raise ValueError(f"linalg.{op}: expected a square matrix or a batch of square "
                         f"matrices (shape (..., n, n)), got shape {shape}")
    if len(shape) < 2:
        raise ValueError(f"linalg.{op}: expected a tensor of at least 2 dimensions, got "
                         f"{len(shape)}")
    return shape[:-2], shape[-2], shape[-1]


def _same(op):
    def meta(x, *args, **kwargs):
        _matrices(op, x)
        return tuple(x.shape), x.dtype
    return meta


def _det(x):
    batch, _, _ = _matrices("det", x)
    return batch, x.dtype


def _slogdet(x):
    batch, _, _ = _matrices("slogdet", x)
    return (batch, x.dtype), (batch, mf.real_dtype(x.dtype))


def _eigh(x):
    batch, n, _ = _matrices("eigh", x)
    return (batch + (n,), mf.real_dtype(x.dtype)), (tuple(x.shape), x.dtype)


def _eigvalsh(x):
    batch, n, _ = _matrices("eigvalsh", x)
    return batch + (n,), mf.real_dtype(x.dtype)


def _eig(x):
    batch, n, _ = _matrices("eig", x)
    c = _complex_of(x.dtype)
    return (batch + (n,), c), (tuple(x.shape), c)


def _eigvals(x):
    batch, n, _ = _matrices("eigvals", x)
    return batch + (n,), _complex_of(x.dtype)


def _matrix_power(x, n):
    _matrices("matrix_power", x)
    if n < 0 and x.dtype.kind not in "fc":
        raise TypeError(f"linalg.matrix_power: a negative power needs a floating-point or "
                        f"complex tensor, got {x.dtype.name}")
    return tuple(x.shape), x.dtype


def _matrix_rank(x, *, rtol=None):
    batch, _, _ = _matrices("matrix_rank", x, square=False)
    return batch, dt.int64


def _pinv(x, *, rtol=None):
    batch, m, n = _matrices("pinv", x, square=False)
    return batch + (n, m), x.dtype


def _qr(x, *, mode="reduced"):
    batch, m, n = _matrices("qr", x, square=False)
    if mode not in ("reduced", "complete"):
        raise ValueError(f"linalg.qr: mode must be 'reduced' or 'complete', got {mode!r}")
    k = m if mode == "complete" else min(m, n)
    return (batch + (m, k), x.dtype), (batch + (k, n), x.dtype)


def _svd(x, *, full_matrices=True):
    batch, m, n = _matrices("svd", x, square=False)
    k = min(m, n)
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    return (batch + u, x.dtype), (batch + (k,), mf.real_dtype(x.dtype)), (batch + vh, x.dtype)


def _svdvals(x):
    batch, m, n = _matrices("svdvals", x, square=False)
    return batch + (min(m, n),), mf.real_dtype(x.dtype)


def _solve(a, b):
    batch, n, _ = _matrices("solve", a)
    bs = tuple(b.shape)
    if b.ndim == 1:  # a vector (the Array API, NumPy 2)
        if bs[0] != n:
            raise ValueError(f"linalg.solve: the vector has {bs[0]} elements, the matrices "
                             f"are {n}x{n}")
        return batch + (n,), mf.result_type(a, b)
    if b.ndim < 2 or bs[-2] != n:
        raise ValueError(f"linalg.solve: expected right-hand sides of shape (..., {n}, k), "
                         f"got {bs}")
    return mf.broadcast_shapes("linalg.solve", batch, bs[:-2]) + bs[-2:], mf.result_type(a, b)


def _matrix_norm(x, *, keepdims=False, ord="fro"):
    batch, _, _ = _matrices("matrix_norm", x, square=False)
    return batch + ((1, 1) if keepdims else ()), mf.real_dtype(x.dtype)


def _diagonal(x, *, offset=0):
    batch, m, n = _matrices("diagonal", x, square=False)
    size = min(m, n - offset) if offset >= 0 else min(m + offset, n)
    return batch + (max(size, 0),), x.dtype


def _trace(x, *, offset=0, dtype=None):
    batch, _, _ = _matrices("trace", x, square=False)
    if dtype is not None:
        return batch, dt.as_dtype(dtype)
    d = x.dtype  # integers accumulate in the default integer dtype, as sum
    return batch, dt.int64 if d.kind in "bi" else dt.uint64 if d.kind == "u" else d


def outer(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"outer: expected 1-D tensors, got {a.ndim}-D and {b.ndim}-D")
    return (a.shape[0], b.shape[0]), mf.result_type(a, b)


def vecdot(a, b, *, axis=-1):
    shape = mf.broadcast_shapes("vecdot", tuple(a.shape), tuple(b.shape))
    if not shape:
        raise ValueError("vecdot: expected tensors of at least 1 dimension")
    i = mf.normalize_axis("vecdot", axis, len(shape)) - len(shape)
    sizes = [tuple(t.shape)[i] for t in (a, b) if len(t.shape) >= -i]
    if len(set(sizes)) > 1:  # the Array API and NumPy: the contracted axes do not broadcast
        raise ValueError(f"vecdot: the contracted axis {axis} has sizes {sizes[0]} and "
                         f"{sizes[1]}; expected equal sizes")
    return shape[:i] + shape[i + 1:] if i != -1 else shape[:-1], mf.result_type(a, b)


def tensordot(a, b, *, axes=2):
    try:
        out = np.tensordot(mf.dummy(a), mf.dummy(b), axes=axes)
    except (ValueError, IndexError, TypeError) as e:
        raise ValueError(f"tensordot: {e}") from None
    return tuple(out.shape), mf.result_type(a, b)


#: linalg name -> meta function (checks first: Note [Linalg checks])
LINALG_METAS = {
    "cholesky": _same("cholesky"), "det": _det, "inv": _same("inv"), "slogdet": _slogdet,
    "eigh": _eigh, "eigvalsh": _eigvalsh, "eig": _eig, "eigvals": _eigvals,
    "matrix_power": _matrix_power, "matrix_rank": _matrix_rank, "pinv": _pinv, "qr": _qr,
    "svd": _svd, "svdvals": _svdvals, "solve": _solve, "matrix_norm": _matrix_norm,
    "diagonal": _diagonal, "trace": _trace, "outer": outer, "vecdot": vecdot,
    "tensordot": tensordot,
}
