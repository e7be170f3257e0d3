"""Sparse JAX kernels: the ``SparseJAX`` key, computed with ``jax.experimental.sparse``.

Loaded on the first sparse tensor made on a JAX device (``md.sparse_coo_tensor`` of JAX
tensors, ``x.to_sparse()`` of one, ``x.to("jax")`` of a sparse tensor), never by ``import
mdtensor``: it records JAX's ``BCOO`` (COO) and ``BCSR`` (CSR) as sparse layouts (Note
[Layouts in the key set] in mdtensor/tensors/layout.py) and registers the kernels below for
``SparseJAX``, the same ops with the same rules as the SparseCPU kernels
(backends/scipy_sparse.py; the shared checks are backends/_sparse_rules.py).

Note [Sparse arrays on JAX]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A COO tensor holds a ``BCOO`` with no batch and no dense dimensions (``indices`` of shape
``(nnz, ndim)``), a CSR tensor a 2-D ``BCSR``.  Its ``is_coalesced()`` is BCOO's
``indices_sorted and unique_indices``, set by ``coalesce()`` (``bcoo_sum_duplicates``) and
by conversions.  JAX's kernels run eagerly here: the number of stored elements of a result
(``coalesce``, dense to sparse, sparse @ sparse) is computed from the data, as SciPy's.
Products compute on BCOO (``bcoo_dot_general``): JAX's BCSR product takes a dense right
operand only, and a BCSR converts to BCOO without copying its values.  The dtypes are the
SparseCPU kernels' (no float16 or bfloat16), so the two backends accept the same tensors.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as js
from mdtensor.backends._sparse_rules import (
    backend_kernels,
    check_index_key,
    check_like_device,
    check_sparse_mask,
    kept,
    layout_error,
    matmul_backward,
    matmul_shape,
    mul_tensor,
    normalize_axes,
    on_values,
    permutation,
    register,
    reshape_target,
    transpose_axes,
    uncoalesced_error,
)
from mdtensor.backends.hybrid_sparse import routed

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.tensors.layout import SPARSE, register_sparse_array, sparse_coo, sparse_csr
from mdtensor.tensors.version_counter import counter

__all__ = ["check_dtype", "from_dense", "make_coo", "make_csr"]

register_sparse_array(js.BCOO, sparse_coo)
register_sparse_array(js.BCSR, sparse_csr)

_KEY = DispatchKey.SparseJAX
_KEY_NAME = "SparseJAX"
_INDEX = jnp.int64


def check_dtype(name: str, dtype) -> None:
    dtype = np.dtype(dtype)
    if dtype.kind not in "biufc" or dtype.kind == "f" and dtype.itemsize < 4:
        raise TypeError(f"{name}: sparse tensors on JAX take bool, integer, float32, "
                        f"float64 and complex dtypes; got {dtype.name}")


def _coo(indices, data, shape, coalesced: bool) -> js.BCOO:
    """A BCOO of ``data`` at ``indices`` (``(nnz, ndim)``)."""
    return js.BCOO((data, indices), shape=tuple(shape), indices_sorted=coalesced,
                   unique_indices=coalesced)


def _coalesced_flag(a) -> bool:
    return isinstance(a, js.BCSR) or bool(a.indices_sorted and a.unique_indices)


def _sum_duplicates(a: js.BCOO) -> js.BCOO:
    """``a`` sorted and without duplicates (``coalesce``): the coordinates on the host
    (Note [Coordinates on the host]), the values summed by one segment sum."""
    if _coalesced_flag(a):
        return a
    if a.nse == 0 or a.ndim == 0:
        return _coo(a.indices, a.data, a.shape, True)
    keys, inverse = np.unique(_flat(a.indices, a.shape), return_inverse=True)
    data = jax.ops.segment_sum(a.data, jnp.asarray(inverse.reshape(-1)),
                               num_segments=len(keys))
    return _coo(_unflat(keys, a.shape), data.astype(a.dtype), a.shape, True)


# Note [Coordinates on the host]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# JAX compiles each eager operation for each new shape, and the shapes of sparse results
# are the numbers of stored elements, new at nearly every call: a chain of ``jnp`` index
# operations (``bcoo_sum_duplicates``, a CSR conversion, sparse @ sparse through
# ``bcoo_spdot_general``) took 2-7 s on this machine the first time for a 3 x 4 matrix.
# The kernels therefore compute the bookkeeping of coordinates -- sorting, merging
# duplicates, CSR row pointers, the join of sparse @ sparse, reshapes -- with NumPy on
# the host (the number of stored elements of such results is data, which JAX computes
# eagerly on the host as well), and the values with JAX (gathers, products, segment sums).


def _host(x) -> np.ndarray:
    return np.asarray(x)


def _flat(indices, shape) -> np.ndarray:
    """Row-major positions of ``indices`` (``(nnz, ndim)``) in ``shape``, on the host."""
    idx = _host(indices)
    if not len(idx):
        return np.zeros(0, np.int64)
    return np.ravel_multi_index(tuple(idx.T), tuple(shape))


def _unflat(flat, shape):
    out = np.stack(np.unravel_index(flat, tuple(shape)), axis=1) if shape else \
        np.zeros((len(flat), 0))
    return jnp.asarray(out.reshape(len(flat), len(shape)).astype(np.int64))


# ---------------------------------------------------------------------------------------
# Construction and conversion (the catalogue's constructors call these: ops/sparse.py)


def make_coo(name: str, indices, values, shape, coalesced: bool):
    check_dtype(name, values.dtype)
    return _coo(jnp.asarray(indices, _INDEX).T, values, shape, coalesced)


def make_csr(name: str, crow, col, values, shape):
    check_dtype(name, values.dtype)
    return js.BCSR((values, jnp.asarray(col, _INDEX), jnp.asarray(crow, _INDEX)),
                   shape=tuple(shape))


def from_dense(name: str, array, layout):
    check_dtype(name, array.dtype)
    if layout is sparse_csr:
        if array.ndim != 2:
            raise ValueError(f"{name}: a sparse CSR tensor has 2 dimensions; got a tensor "
                             f"of {array.ndim}")
        return js.BCSR.fromdense(array, index_dtype=_INDEX)
    if array.ndim == 0:
        raise ValueError(f"{name}: a sparse COO tensor needs at least one dimension; got a "
                         f"0-d tensor")
    nse = int(jnp.count_nonzero(array))
    # row-major order, no duplicates
    return js.BCOO.fromdense(array, nse=nse, index_dtype=_INDEX)


def _as_coo(a) -> js.BCOO:
    """``a`` as BCOO (a BCSR's coordinates, in row order: coalesced)."""
    if isinstance(a, js.BCOO):
        return a
    c = a.to_bcoo()
    return _coo(c.indices.astype(_INDEX), c.data, c.shape, True)


def _as_csr(a) -> js.BCSR:
    """``a`` as BCSR (row pointers on the host, Note [Coordinates on the host])."""
    if isinstance(a, js.BCSR):
        return a
    a = _sum_duplicates(a)
    idx = _host(a.indices).reshape(a.nse, 2)
    crow = np.concatenate([[0], np.cumsum(np.bincount(idx[:, 0], minlength=a.shape[0]))])
    return js.BCSR((a.data, jnp.asarray(idx[:, 1].astype(np.int64)),
                    jnp.asarray(crow.astype(np.int64))), shape=a.shape)


def _like(a, values):
    """A sparse array with ``a``'s structure and ``values``."""
    if isinstance(a, js.BCSR):
        return js.BCSR((values, a.indices, a.indptr), shape=a.shape)
    return _coo(a.indices, values, a.shape, _coalesced_flag(a))


def coords_of(a) -> tuple:
    """The coordinates of ``a``'s stored elements, one array per dimension."""
    return tuple(_as_coo(a).indices.T)


def _layout(a):
    return sparse_csr if isinstance(a, js.BCSR) else sparse_coo


def _is_sparse(t) -> bool:
    return bool(getattr(t, "_ks", 0) & SPARSE)


def _values(t):
    return t._device.wrap(t._data.data)


# ---------------------------------------------------------------------------------------
# The catalogue's sparse ops


def _to_dense(self, dtype=None):
    d = self._data.todense()
    return self._device.wrap(d if dtype is None else d.astype(dtype.numpy))


def _to_sparse(self, layout):
    a = self._data
    if layout is sparse_csr:
        if a.ndim != 2:
            raise ValueError(f"to_sparse_csr: a sparse CSR tensor has 2 dimensions; got a "
                             f"tensor of {a.ndim}")
        return self._device.wrap(_as_csr(a))
    return self._device.wrap(_sum_duplicates(_as_coo(a)))


def _raw_indices(self):
    a = self._data
    if not isinstance(a, js.BCOO):
        raise layout_error("_indices", _layout(a), "COO")
    return self._device.wrap(a.indices.T.astype(_INDEX))


def _indices(self):
    a = self._data
    if not isinstance(a, js.BCOO):
        raise layout_error("indices", _layout(a), "COO", "; a CSR tensor has crow_indices() "
                           "and col_indices()")
    if not _coalesced_flag(a):
        raise uncoalesced_error("indices")
    return _raw_indices(self)


def _raw_values(self):
    """See Note [The values share the version counter] in backends/scipy_sparse.py."""
    out = self._device.wrap(self._data.data)
    out._vc = counter(self)
    return out


def _values_op(self):
    if not _coalesced_flag(self._data):
        raise uncoalesced_error("values")
    return _raw_values(self)


def _csr_part(name, attr):
    def kernel(self):
        a = self._data
        if not isinstance(a, js.BCSR):
            raise layout_error(name, _layout(a), "CSR")
        return self._device.wrap(getattr(a, attr).astype(_INDEX))

    kernel.__name__ = kernel.__qualname__ = f"sparse_jax[{name}]"
    return kernel


def _coalesce(self):
    a = self._data
    if not isinstance(a, js.BCOO):
        raise layout_error("coalesce", _layout(a), "COO")
    return self._device.wrap(_sum_duplicates(a))


def _is_coalesced(self):
    a = self._data
    if not isinstance(a, js.BCOO):
        raise layout_error("is_coalesced", _layout(a), "COO")
    return _coalesced_flag(a)


def _gather(a, m):
    """``a``'s values (dense or sparse) at the stored positions of sparse ``m`` (zero where
    a sparse ``a`` stores nothing); the positions found on the host (Note [Coordinates on
    the host])."""
    if not m.nse:
        return jnp.zeros(0, a.dtype)
    want = _flat(_as_coo(m).indices, m.shape)
    if not isinstance(a, (js.BCOO, js.BCSR)):
        return a.reshape(-1)[jnp.asarray(want)]
    c = _sum_duplicates(_as_coo(a))
    if not c.nse:
        return jnp.zeros(m.nse, a.dtype)
    have = _flat(c.indices, c.shape)
    pos = np.minimum(np.searchsorted(have, want), c.nse - 1)
    found = jnp.asarray(have[pos] == want)
    return jnp.where(found, c.data[jnp.asarray(pos)], jnp.zeros((), a.dtype))


def _sparse_mask(self, mask):
    check_sparse_mask(self, mask)
    m = mask._data
    return mask._device.wrap(_like(m, _gather(self._data, m)))


# ---------------------------------------------------------------------------------------
# Products


def _matmul(self, other):
    a, b = self._data, other._data
    sa, sb = _is_sparse(self), _is_sparse(other)
    shape = matmul_shape(self, other, sa, sb)
    if sa and sb:
        r = _spspmm(_as_coo(a), _as_csr(b))
        return self._device.wrap(_as_csr(r) if isinstance(a, js.BCSR) else r)
    if sa:
        return self._device.wrap(jnp.reshape(_as_coo(a) @ b, shape))
    return self._device.wrap(jnp.reshape(a @ _as_coo(b), shape))


def _spspmm(a: js.BCOO, b: js.BCSR) -> js.BCOO:
    """Sparse @ sparse: each stored ``a[i, k]`` times each stored element of row ``k`` of
    ``b``, the products at ``(i, j)`` summed; the join on the host (Note [Coordinates on
    the host])."""
    ai = _host(a.indices).reshape(a.nse, 2)
    indptr, bcols = _host(b.indptr), _host(b.indices)
    start = indptr[ai[:, 1]]
    count = indptr[ai[:, 1] + 1] - start
    which = np.repeat(np.arange(a.nse), count)
    at = start[which] + np.arange(len(which)) - (np.cumsum(count) - count)[which]
    data = a.data[jnp.asarray(which)] * b.data[jnp.asarray(at)]
    idx = np.stack([ai[which, 0], bcols[at]], axis=1).astype(np.int64)
    return _sum_duplicates(_coo(jnp.asarray(idx), data, (a.shape[0], b.shape[1]), False))


def _sampled(rows, cols, left, right):
    """``out[k] = left[rows[k]] . right[cols[k]]``."""
    return jnp.einsum("ij,ij->i", left[rows], right[cols])


def _coalesced(a):
    return a if isinstance(a, js.BCSR) else _sum_duplicates(a)


_matmul_backward = matmul_backward(
    _KEY_NAME, coalesced=_coalesced, coords=coords_of, like=_like, sampled=_sampled,
    t_matmul=lambda a, d, transpose: (_as_coo(a).T if transpose else _as_coo(a)) @ d,
    todense=lambda a: a.todense())


# ---------------------------------------------------------------------------------------
# Reductions


def _sum(self, axis=None, keepdims=False, dtype=None):
    a = self._data
    total = aten.sum(_values(self), dtype=dtype)  # the dense op's dtype rules
    nd = a.ndim
    norm = tuple(range(nd)) if axis is None else normalize_axes("sum", axis, nd)
    if len(norm) == nd:
        return aten.reshape(total, (1,) * nd) if keepdims else total
    want = total._data.dtype
    keep = [d for d in range(nd) if d not in norm]
    coords = coords_of(a)
    r = jnp.zeros(tuple(a.shape[d] for d in keep), want)
    r = r.at[tuple(coords[d] for d in keep)].add(a.data.astype(want))
    if keepdims:
        r = r.reshape(tuple(1 if d in norm else s for d, s in enumerate(a.shape)))
    return self._device.wrap(r)


def _sparse_sum(self, dim):
    a = _sum_duplicates(_as_coo(self._data))
    want = aten.sum(_values(self))._data.dtype
    dims = normalize_axes("sparse.sum", dim, a.ndim)
    coords, shape = kept(coords_of(a), a.shape, dims)
    if not shape:
        return self._device.wrap(jnp.sum(a.data, dtype=want))
    r = _coo(jnp.stack(coords, axis=1), a.data.astype(want), shape, False)
    return self._device.wrap(_sum_duplicates(r))


def _sparse_sum_backward(grad, self, dim):
    a = self._data
    a = a if isinstance(a, js.BCSR) else _sum_duplicates(a)
    dims = normalize_axes("sparse.sum", dim, a.ndim)
    coords, shape = kept(coords_of(a), a.shape, dims)
    g = grad._data
    if _is_sparse(grad):
        at = _coo(jnp.stack(coords, axis=1), jnp.zeros(a.nse, g.dtype), shape, False)
        vals = _gather(g, at)
    else:
        vals = jnp.broadcast_to(g, shape)[tuple(coords)] if shape else jnp.full(a.nse, g)
    return self._device.wrap(_like(a, vals.astype(a.dtype)))


# ---------------------------------------------------------------------------------------
# Softmax over a sparse dimension (Note [Sparse softmax] in backends/scipy_sparse.py)


def _slices(a, dim):
    """The slice along ``dim`` of each stored element of ``a``: ids ``0..n-1``, and ``n``
    (on the host, Note [Coordinates on the host])."""
    idx = _host(_as_coo(a).indices).reshape(a.nse, a.ndim)
    other = [d for d in range(a.ndim) if d != dim]
    if not other or not a.nse:
        return jnp.zeros(a.nse, jnp.int64), min(a.nse, 1)
    key = np.ravel_multi_index(tuple(idx[:, other].T), [a.shape[d] for d in other])
    _, inverse = np.unique(key, return_inverse=True)
    inverse = inverse.reshape(-1)
    return jnp.asarray(inverse), int(inverse.max()) + 1


def _softmax(self, dim=-1):
    a = self._data
    a = a if isinstance(a, js.BCSR) else _sum_duplicates(a)
    if np.dtype(a.dtype).kind != "f":
        raise TypeError(f"softmax: a sparse softmax takes floating tensors, got "
                        f"{self.dtype.name}")
    (d,) = normalize_axes("softmax", dim, a.ndim)
    inverse, n = _slices(a, d)
    v = a.data
    top = jax.ops.segment_max(v, inverse, num_segments=n)
    e = jnp.exp(v - top[inverse])
    total = jax.ops.segment_sum(e, inverse, num_segments=n)
    return self._device.wrap(_like(a, (e / total[inverse]).astype(v.dtype)))


def _softmax_backward_data(grad_output, output, dim):
    o = output._data
    gv = _gather(grad_output._data, o)
    (d,) = normalize_axes("softmax", dim, o.ndim)
    inverse, n = _slices(o, d)
    total = jax.ops.segment_sum(gv * o.data, inverse, num_segments=n)
    return output._device.wrap(_like(o, (o.data * (gv - total[inverse])).astype(o.dtype)))


# ---------------------------------------------------------------------------------------
# Elementwise (Note [Values through the dense ops] in backends/scipy_sparse.py)


def _on_values(name):
    return on_values(name, _values, lambda t, v: _rebuild(t, v), _KEY_NAME)


def _sparse_mul(self, other, dtype):
    a = _sum_duplicates(_as_coo(self._data))
    r = _like(a, a.data.astype(dtype) * _gather(other._data, a).astype(dtype))
    return self._device.wrap(_as_csr(r) if isinstance(self._data, js.BCSR) else r)


def _picked(a, dense, shape):
    """``dense`` (broadcast to ``shape``) at the stored positions of ``a``."""
    if not a.nse:
        return jnp.zeros(0, dense.dtype)
    return jnp.broadcast_to(dense, shape)[coords_of(a)]


def _sparse_add(self, other, dtype, scale):
    a, b = _as_coo(self._data), _as_coo(other._data)
    bd = b.data.astype(dtype)
    data = jnp.concatenate([a.data.astype(dtype),
                            bd * jnp.asarray(scale).astype(dtype) if scale != 1 else bd])
    r = _sum_duplicates(_coo(jnp.concatenate([a.indices, b.indices]).astype(_INDEX), data,
                             a.shape, False))
    return self._device.wrap(_as_csr(r) if isinstance(self._data, js.BCSR) else r)


def _rebuild(t, values):
    return t._device.wrap(_like(t._data, values._data))


_mul_tensor = mul_tensor(_sparse_mul, _picked, _rebuild)


# ---------------------------------------------------------------------------------------
# Shape


def _permuted(self, axes):
    a = self._data
    if isinstance(a, js.BCSR):
        c = _as_coo(a)
        return self._device.wrap(_as_csr(_coo(c.indices[:, list(axes)], c.data,
                                              tuple(a.shape[d] for d in axes), False)))
    r = _coo(a.indices[:, list(axes)], a.data, tuple(a.shape[d] for d in axes),
             _coalesced_flag(a) and list(axes) == sorted(axes))
    return self._device.wrap(r)


def _transpose(self, dim0, dim1):
    return _permuted(self, transpose_axes(self._data.shape, dim0, dim1))


def _permute(self, axes):
    return _permuted(self, permutation(self._data.shape, axes))


def _clone(self):
    return self._device.wrap(_like(self._data, jnp.array(self._data.data, copy=True)))


def _reshape(self, shape, *, copy=None):
    a = self._data
    shape = reshape_target(a.shape, shape, isinstance(a, js.BCSR))
    c = _as_coo(a)
    # a row-major reshape keeps the elements' order: coalesced stays coalesced
    r = _coo(_unflat(_flat(c.indices, c.shape), shape), c.data, shape, _coalesced_flag(c))
    return self._device.wrap(_as_csr(r) if isinstance(a, js.BCSR) else r)


def _empty_sparse_like(self, *, dtype=None, device=None, requires_grad=False):
    a = self._data
    check_like_device(self, device, _KEY_NAME)
    want = a.dtype if dtype is None else dtype.numpy
    r = _coo(jnp.zeros((0, a.ndim), _INDEX), jnp.zeros(0, want), a.shape, True)
    t = self._device.wrap(_as_csr(r) if isinstance(a, js.BCSR) else r)
    return t.requires_grad_(True) if requires_grad else t


def _basic_index(self, key):
    """``x[key]`` with ints, slices and ``...``: a sparse result (COO; CSR for two
    dimensions of a CSR tensor), a dense 0-d one for a single element."""
    a = self._data
    parts = check_index_key(key, _KEY_NAME)
    if sum(k is Ellipsis for k in parts) > 1 or \
            len([k for k in parts if k is not Ellipsis]) > a.ndim:
        raise IndexError(f"__getitem__: index {key!r} is out of range for a sparse tensor "
                         f"of shape {tuple(a.shape)}")
    full, i = [], 0
    for k in parts:
        if k is Ellipsis:
            fill = a.ndim - (len(parts) - 1)
            full += [slice(None)] * fill
        else:
            full.append(k)
    full += [slice(None)] * (a.ndim - len(full))
    c = _as_coo(a)
    host = _host(c.indices).reshape(c.nse, a.ndim)  # Note [Coordinates on the host]
    keep = np.ones(c.nse, bool)
    coords, shape = [], []
    for d, k in enumerate(full):
        n = a.shape[d]
        x = host[:, d]
        if isinstance(k, slice):
            start, stop, step = k.indices(n)
            size = len(range(start, stop, step))
            keep &= (x >= start) & (x < stop) & ((x - start) % step == 0)
            coords.append((x - start) // step)
            shape.append(size)
        else:
            k = int(k)
            if not -n <= k < n:
                raise IndexError(f"__getitem__: index {key!r} is out of range for a sparse "
                                 f"tensor of shape {tuple(a.shape)}")
            keep &= x == k % n
            i += 1
    sel = np.flatnonzero(keep)
    data = c.data[jnp.asarray(sel)]
    if not shape:  # one element
        return self._device.wrap(jnp.sum(data).astype(a.dtype))
    idx = np.stack([x[sel] for x in coords], axis=1) if len(sel) else \
        np.zeros((0, len(shape)))
    r = _coo(jnp.asarray(idx.astype(np.int64)), data, tuple(shape), _coalesced_flag(c))
    if isinstance(a, js.BCSR) and len(shape) == 2:
        return self._device.wrap(_as_csr(r))
    return self._device.wrap(r)


# ---------------------------------------------------------------------------------------
# Registration

KERNELS = backend_kernels(globals(), _KEY_NAME)
register(routed(KERNELS), _KEY, "jax.experimental.sparse")
