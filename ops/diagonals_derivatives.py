"""Derivative rules of ``ops/diagonals.py``: ``diagonal``'s gradient puts ``g`` back on the
diagonal of a zero tensor of the input's shape; ``diag``'s is that of a matrix, and of a
vector the diagonal of ``g`` (PyTorch's ``diag_backward``); the index factories have
none."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import reads, rule

__all__: list[str] = []


@rule("diagonal")
@reads()
def _diagonal(g, out, x, offset=0, dim1=0, dim2=1):
    # In the plane of (dim1, dim2), moved last: the outer products of the 0/1 rows that
    # pick the diagonal's element i out of each axis (r0 + i and r0 + offset + i), weighted
    # by g[..., i] -- matmuls, so every backend differentiates it again
    n = len(x.shape)
    a, b = dim1 % n, dim2 % n
    k = g.shape[-1]
    r0 = max(0, -offset)
    pick_a = aten.eye(k, x.shape[a], k=r0, dtype=g.dtype, device=g.device)
    pick_b = aten.eye(k, x.shape[b], k=r0 + offset, dtype=g.dtype, device=g.device)
    plane = aten.matmul(aten.matrix_transpose(pick_a),
                        aten.mul(aten.unsqueeze(g, -1), pick_b))
    return aten.moveaxis(plane, [-2, -1], [a, b]), None, None, None


@rule("diag")
@reads()
def _diag(g, out, x, diagonal=0):
    if x.ndim == 1:
        return aten.diagonal(g, diagonal, 0, 1), None
    return _diagonal(g, out, x, diagonal, 0, 1)[0], None
