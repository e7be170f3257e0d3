"""``md.linalg.lstsq``: least-squares solutions of ``A X = B``, as PyTorch's.

Note [Least squares through the SVD]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The Array API has no ``lstsq``; it has ``svd``.  With ``A = U S V^H`` (reduced), the
minimum-norm solution is ``X = V S^+ U^H B``, where ``S^+`` inverts the singular values
above ``rcond`` times the largest (``rcond`` defaults to the dtype's epsilon times
``max(m, n)``, PyTorch's default) and zeroes the others; ``rank`` counts the kept ones.  This
is LAPACK's ``gelsd``/``gelss`` algorithm; PyTorch's CPU default ``gelsy`` (a pivoted QR)
gives the same minimum-norm solution and rank up to rounding, and every driver name is
accepted for what PyTorch returns with it:

* ``gelsy`` (and ``driver=None``): ``(X, empty residuals, rank, empty singular values)``,
  the rank 0 when ``B`` has no column (LAPACK's quick return);
* ``gels`` (which assumes full rank): the residuals when ``m > n``, no rank;
* ``gelsd``/``gelss``: the rank, the singular values, and the residuals when ``m > n`` and
  every matrix has full rank -- a size that depends on the values, so their Meta function
  raises for ``m > n``, as for ``nonzero``.

The residuals are ``sum |A X - B|^2`` over the rows, one per column of ``B`` (a vector ``B``
is one column).  A vector ``B`` is ``(m,)`` or has ``A``'s shape without its last dimension;
batch dimensions broadcast.  Derivative rule (PyTorch's, through ``pinv``):
``ops/least_squares_derivatives.py``.
"""

from __future__ import annotations

import numpy as np
from numpy.linalg import _umath_linalg

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._accepted import refuse_bfloat16
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATING
from .linalg import LINALG_NAMES, lapack

__all__: list[str] = []

_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")


def _is_vector(a_shape, b_shape) -> bool:
    """PyTorch's ``linalg_solve_is_vector_rhs``."""
    return len(b_shape) == 1 or (len(b_shape) == len(a_shape) - 1 and
                                 tuple(b_shape) == tuple(a_shape[:-1]))


def _check(a, b, driver):
    """The batch shape, ``(m, n, k)``, whether ``b`` is a vector; PyTorch's checks, in
    mdtensor's words."""
    if driver is not None and driver not in _DRIVERS:
        raise ValueError(f"linalg.lstsq: driver must be one of {', '.join(_DRIVERS)}, "
                         f"got {driver!r}")
    ad, bd = dt.as_dtype(a.dtype), dt.as_dtype(b.dtype)
    if ad.kind not in "fc" or bd.kind not in "fc":
        bad = ad if ad.kind not in "fc" else bd
        raise TypeError(f"linalg.lstsq: expected floating or complex tensors, got {bad.name}")
    refuse_bfloat16("linalg.lstsq", (a, b))  # Note [Ops without bfloat16] in _accepted.py
    if ad != bd:
        raise TypeError(f"linalg.lstsq: expected input and other of the same dtype, got "
                        f"{ad.name} and {bd.name}")
    a_shape, b_shape = tuple(a.shape), tuple(b.shape)
    if len(a_shape) < 2:
        raise ValueError(f"linalg.lstsq: input must have at least 2 dimensions, got shape "
                         f"{a_shape}")
    vector = _is_vector(a_shape, b_shape)
    bm = b_shape + (1,) if vector else b_shape
    if len(bm) < 2 or bm[-2] != a_shape[-2]:
        raise ValueError(f"linalg.lstsq: the rows of other must match those of input "
                         f"(shape {a_shape}), got shape {b_shape}")
    batch = mf.broadcast_shapes("linalg.lstsq", a_shape[:-2], bm[:-2])
    m, n = a_shape[-2:]
    return batch, (m, n, bm[-1]), vector


def _meta(a, b, rcond=None, *, driver=None):
    batch, (m, n, k), vector = _check(a, b, driver)
    real = mf.real_dtype(a.dtype)
    solution = (batch + ((n,) if vector else (n, k)), a.dtype)
    empty = (0,)
    if driver in ("gelsd", "gelss") and m > n:
        raise NotImplementedError("linalg.lstsq: the residuals' shape is data-dependent "
                                  f"with driver={driver!r} (they exist when every matrix has "
                                  "full rank); meta and fake tensors cannot compute it")
    residuals = batch + (k,) if driver == "gels" and m > n else empty
    rank = empty if driver == "gels" else batch
    values = batch + (min(m, n),) if driver in ("gelsd", "gelss") else empty
    return solution, (residuals, real), (rank, dt.int64), (values, real)


def _lstsq(xp, a, b, rcond=None, *, driver=None):
    batch, (m, n, k), vector = _check(a, b, driver)
    bm = b[..., None] if vector else b
    a = xp.broadcast_to(a, batch + (m, n))
    bm = xp.broadcast_to(bm, batch + (m, k))
    real = getattr(xp, mf.real_dtype(dt.as_dtype(a.dtype)).name)
    complex_ = dt.as_dtype(a.dtype).kind == "c"

    def mh(v):
        v = xp.matrix_transpose(v)
        return xp.conj(v) if complex_ else v

    if min(m, n) == 0 or (k == 0 and driver in (None, "gelsy")):  # LAPACK's quick return
        x = xp.zeros(batch + (n, k), dtype=a.dtype)
        s = xp.zeros(batch + (0,), dtype=real)
        rank = xp.zeros(batch, dtype=xp.int64)
    else:  # Note [Least squares through the SVD]
        u, s, vh = xp.linalg.svd(a, full_matrices=False)
        eps = float(np.finfo(dt.as_dtype(real).numpy).eps)
        tol = (eps * max(m, n) if rcond is None else rcond) * xp.max(s, axis=-1, keepdims=True)
        keep = s > tol
        inv = xp.where(keep, 1.0 / xp.where(keep, s, 1.0), 0.0)
        uhb = mh(u) @ bm
        inv = xp.astype(inv, a.dtype) if inv.dtype != a.dtype else inv
        x = mh(vh) @ (inv[..., None] * uhb)
        rank = xp.sum(xp.astype(keep, xp.int64), axis=-1)
    empty = xp.zeros((0,), dtype=real)
    residuals = empty
    full = driver == "gels" or (driver in ("gelsd", "gelss") and bool(xp.all(rank == n)))
    if m > n and full:
        r = a @ x - bm
        residuals = xp.sum(xp.abs(r) ** 2, axis=-2)
    solution = x[..., 0] if vector else x
    rank = xp.zeros((0,), dtype=xp.int64) if driver == "gels" else rank
    values = s if driver in ("gelsd", "gelss") else empty
    return solution, residuals, rank, values


# Note [Least squares on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU impl (Note [NumPy fast impls] in ops/_decl.py) of the common call -- one matrix,
# ``driver`` None or "gelsy", a vector or matrix ``B`` with columns, floating-point
# operands of one dtype -- with LAPACK's ``gelsd`` (the SVD's algorithm: Note [Least squares
# through the SVD]), the gufunc ``np.linalg.lstsq`` calls, as it calls it (in double
# precision, cast back), with the cut-off of the input's precision (NumPy's default is
# double precision's).  The generic impl, whose array-api-compat calls cost 40 us on a 5x3
# matrix, serves the other calls and backends.

_LAPACK_TYPES = {np.dtype(np.float32): "d", np.dtype(np.float64): "d",
                 np.dtype(np.complex64): "D", np.dtype(np.complex128): "D"}
_REAL = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64),
         np.dtype(np.complex64): np.dtype(np.float32),
         np.dtype(np.complex128): np.dtype(np.float64)}


def _np_lstsq(xp, a, b, rcond=None, *, driver=None):
    c = _LAPACK_TYPES.get(a.dtype)
    if (c is None or driver not in (None, "gelsy") or a.ndim != 2 or b.dtype != a.dtype
            or not 1 <= b.ndim <= 2 or b.shape[0] != a.shape[0] or not a.size or not b.size
            or not (rcond is None or type(rcond) is float)):
        return _lstsq(xp, a, b, rcond, driver=driver)
    dtype = a.dtype
    real = _REAL[dtype]
    if rcond is None:
        rcond = float(np.finfo(real).eps) * max(a.shape)
    vector = b.ndim == 1
    found = lapack(_umath_linalg.lstsq, a, b[:, None] if vector else b, rcond,
                   signature=f"{c}{c}d->{c}did")
    if found is None:  # LAPACK failed: the generic impl's SVD decides
        return _lstsq(xp, a, b, rcond, driver=driver)
    x, rank = found[0], found[2]
    x = x.astype(dtype, copy=False)
    empty = np.zeros((0,), real)
    return (x[:, 0] if vector else x), empty, rank.astype(np.int64), empty


def _ref(a, b, rcond=None, *, driver=None):
    """NumPy's lstsq (the SVD's algorithm) per matrix, with PyTorch's outputs."""
    vector = _is_vector(a.shape, b.shape)
    bm = b[..., None] if vector else b
    batch = np.broadcast_shapes(a.shape[:-2], bm.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    bm = np.broadcast_to(bm, batch + bm.shape[-2:])
    x = np.zeros(batch + (a.shape[-1], bm.shape[-1]), a.dtype)
    rank = np.zeros(batch, np.int64)
    for i in np.ndindex(*batch):
        x[i], _, rank[i], _ = np.linalg.lstsq(a[i], bm[i], rcond=rcond)
    return (x[..., 0] if vector else x, np.zeros(0, np.real(x).dtype), rank,
            np.zeros(0, np.real(x).dtype))


def _samples(dtype, rng):
    tall = make_array((5, 3), dtype, rng)
    return [SampleInput((tall, make_array((5, 2), dtype, rng))),
            SampleInput((tall, make_array((5,), dtype, rng))),
            SampleInput((make_array((2, 3, 4), dtype, rng), make_array((3, 2), dtype, rng))),
            SampleInput((make_array((2, 4, 4), dtype, rng), make_array((2, 4), dtype, rng)))]


def _errors():
    a = np.ones((4, 3))
    yield ErrorInput(SampleInput((np.ones(4), a)), ValueError,
                     r"linalg.lstsq: input must have at least 2 dimensions, got shape \(4,\)")
    yield ErrorInput(SampleInput((a, np.ones((3, 2)))), ValueError,
                     "linalg.lstsq: the rows of other must match")
    yield ErrorInput(SampleInput((a, np.ones((4, 2), np.float32))), TypeError,
                     "linalg.lstsq: expected input and other of the same dtype")
    yield ErrorInput(SampleInput((np.ones((4, 3), np.int64), np.ones((4, 2), np.int64))),
                     TypeError, "linalg.lstsq: expected floating or complex tensors")
    yield ErrorInput(SampleInput((a, np.ones((4, 2))), {"driver": "qr"}), ValueError,
                     "linalg.lstsq: driver must be one of")


defop("linalg_lstsq(Tensor self, Tensor b, float? rcond=None, *, str? driver=None) -> "
      "(Tensor solution, Tensor residuals, Tensor rank, Tensor singular_values)",
      impl=_lstsq, cpu_impl=_np_lstsq, meta=_meta, names=(), methods=(),
      promote_scalars=False,
      info=OpInfo(ref=_ref, dtypes=FLOATING, samples=_samples, errors=_errors))
LINALG_NAMES["lstsq"] = "linalg_lstsq"
