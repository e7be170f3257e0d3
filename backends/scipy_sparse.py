"""Sparse CPU kernels: the ``SparseCPU`` key, computed with ``scipy.sparse``.

Loaded on the first sparse tensor (``md.sparse_coo_tensor``, ``x.to_sparse()``, ...), never
by ``import mdtensor``: importing it imports SciPy, records SciPy's sparse array classes as
sparse layouts (Note [Layouts in the key set] in mdtensor/tensors/layout.py) and registers
every kernel below for ``SparseCPU`` through the operator API, as the JAX backend registers
its own (docs/SPARSE.md says what a backend registers to offer a sparse layout).

Note [Sparse arrays on the CPU]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A sparse COO tensor holds a ``scipy.sparse.coo_array`` (any number of dimensions), a CSR
tensor a ``scipy.sparse.csr_array`` (two).  SciPy over pydata ``sparse``, measured on this
machine (``python -m benchmarks.sparse --libraries``: one thread, float32, a 100,000 x
100,000 matrix with 1,000,000 non-zeros times a 100,000 x 16 dense matrix; docs/SPARSE.md
has the table): SciPy CSR @ dense 24-44 ms, pydata GCXS 19-32 ms, pydata COO 76-88 ms, and
the transposed product of backward SciPy CSR 21-22 ms against pydata COO 330-385 ms.
SciPy's kernels are compiled ahead of time (pydata's are Numba functions compiled on first
use), SciPy is installed wherever the scientific stack is, and its COO arrays have any
number of dimensions.  A COO tensor's ``is_coalesced()`` is
SciPy's ``has_canonical_format`` (sorted, no duplicates), as PyTorch's flag: set by
``coalesce()`` and by conversions, not by ``sparse_coo_tensor``.

Note [Values through the dense ops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
An elementwise op that keeps zeros (``neg``, ``sin``, ``mul`` by a scalar, ...) is the same
op on the stored values: the kernel calls the dense op on a tensor of the values and
rebuilds the sparse array around its result.  Its dtype rules, special values and errors
are then exactly the dense op's.  A dispatch mode sees the sparse op, not the inner call
(the mode is off while its handler runs the op, as in PyTorch).
"""

from __future__ import annotations

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

__all__ = ["check_dtype", "from_dense", "is_sparse_array", "make_coo", "make_csr"]

# Note [One source for SciPy and CuPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``cupyx.scipy.sparse`` mirrors ``scipy.sparse`` (``coo_array``, ``csr_array``, their
# methods) and CuPy mirrors NumPy, so the SparseCUDA kernels are this module's source run a
# second time with CuPy's modules in place of SciPy's and NumPy's: backends/cupyx_sparse.py
# executes it as a separate module object whose ``LIBRARY`` names ``(numpy-like module,
# sparse module, key name, where, origin)``.  The CPU tests exercise the one code path;
# what CuPy does differently (its COO arrays have one or two dimensions, not n) only a GPU
# shows (tests/test_cupy.py).  Imported as itself, the module computes with SciPy.
LIBRARY = globals().get("LIBRARY")
if LIBRARY is None:
    import numpy as np
    import scipy.sparse as sp

    LIBRARY = (np, sp, "SparseCPU", "the CPU", "scipy.sparse")
np, sp, _KEY_NAME, _WHERE, _ORIGIN = LIBRARY

register_sparse_array(sp.coo_array, sparse_coo)
register_sparse_array(sp.csr_array, sparse_csr)

_KEY = DispatchKey[_KEY_NAME]
_INDEX = np.int64  # PyTorch's index dtype: what indices() gives


def is_sparse_array(a) -> bool:
    return isinstance(a, (sp.coo_array, sp.csr_array))


def check_dtype(name: str, dtype) -> None:
    if np.dtype(dtype).kind not in "biufc" or np.dtype(dtype).itemsize < 4 and \
            np.dtype(dtype).kind == "f":
        raise TypeError(f"{name}: sparse tensors on {_WHERE} take bool, integer, float32, "
                        f"float64 and complex dtypes; got {np.dtype(dtype).name}")


# ---------------------------------------------------------------------------------------
# Construction and conversion (the catalogue's sparse ops call these: ops/sparse.py)


def make_coo(name: str, indices, values, shape, coalesced: bool):
    """A ``coo_array`` of ``values`` at ``indices`` (a (ndim, nnz) array) in ``shape``."""
    check_dtype(name, values.dtype)
    coo = sp.coo_array((values, tuple(indices)), shape=tuple(shape))
    if coalesced:
        coo.has_canonical_format = True
    return coo


def make_csr(name: str, crow, col, values, shape):
    check_dtype(name, values.dtype)
    return sp.csr_array((values, col, crow), shape=tuple(shape))


def from_dense(name: str, array, layout):
    """The sparse array of layout ``layout`` holding the non-zeros of NumPy ``array``."""
    check_dtype(name, array.dtype)
    if layout is sparse_csr:
        if array.ndim != 2:
            raise ValueError(f"{name}: a sparse CSR tensor has 2 dimensions; got a tensor "
                             f"of {array.ndim}")
        return sp.csr_array(array)
    if array.ndim == 0:
        raise ValueError(f"{name}: a sparse COO tensor needs at least one dimension; got a "
                         f"0-d tensor")
    coo = sp.coo_array(array)
    coo.has_canonical_format = True  # row-major order of the non-zeros, no duplicates
    return coo


def convert(a, layout):
    """Sparse array ``a`` in sparse ``layout`` (a COO result is coalesced)."""
    if layout is sparse_csr:
        if a.ndim != 2:
            raise ValueError(f"to_sparse_csr: a sparse CSR tensor has 2 dimensions; got a "
                             f"tensor of {a.ndim}")
        return a.tocsr()
    coo = a.tocoo()
    if not coo.has_canonical_format:
        coo.sum_duplicates()
    return coo


def _like(a, values):
    """A sparse array with ``a``'s structure and ``values`` (NumPy, one per stored element)."""
    if isinstance(a, sp.csr_array):
        return sp.csr_array((values, a.indices, a.indptr), shape=a.shape)
    out = sp.coo_array((values, _coords(a)), shape=a.shape)
    out.has_canonical_format = a.has_canonical_format
    return out


def _in_layout(r, like):
    """SciPy result ``r`` in the format of ``like`` (SciPy gives CSR for many 2-D ops)."""
    if isinstance(like, sp.csr_array):
        return r if isinstance(r, sp.csr_array) else r.tocsr()
    return r if isinstance(r, sp.coo_array) else r.tocoo()


def coords_of(a):
    """The coordinates of ``a``'s stored elements, one array per dimension."""
    if isinstance(a, sp.csr_array):
        rows = np.repeat(np.arange(a.shape[0], dtype=a.indices.dtype), np.diff(a.indptr))
        return (rows, a.indices)
    return _coords(a)


def _coords(coo):
    """A COO array's coordinates, one array per dimension (CuPy's have ``row`` and
    ``col``, SciPy's any number as ``coords``)."""
    return coo.coords if hasattr(coo, "coords") else (coo.row, coo.col)


def _values(t):
    """A dense tensor of ``t``'s stored values (sharing them)."""
    return t._device.wrap(t._data.data)


def _is_sparse(t) -> bool:
    return bool(getattr(t, "_ks", 0) & SPARSE)


# ---------------------------------------------------------------------------------------
# The catalogue's sparse ops


def _to_dense(self, dtype=None):
    d = self._data.toarray()
    if dtype is not None:
        d = d.astype(dtype.numpy)
    return self._device.wrap(d)


def _to_sparse(self, layout):
    return self._device.wrap(convert(self._data, layout))


def _indices(self):
    a = self._data
    if not isinstance(a, sp.coo_array):
        raise layout_error("indices", _layout(a), "COO", "; a CSR tensor has crow_indices() "
                           "and col_indices()")
    if not a.has_canonical_format:
        raise uncoalesced_error("indices")
    return _raw_indices(self)


def _values_op(self):
    a = self._data
    if isinstance(a, sp.coo_array) and not a.has_canonical_format:
        raise uncoalesced_error("values")
    return _raw_values(self)


# Note [The values share the version counter]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x.values()`` shares memory with sparse ``x``, as PyTorch's, and so shares its version
# counter: a write through it (``x.values().mul_(2)``) bumps ``x``'s version, and a backward
# that saved ``x`` then raises "modified by an inplace operation", as PyTorch's does.  The
# ops are not declared as views (``Tensor(a)``): a view op gets a generated ``*_copy`` twin
# and a replay for Functionalize, which mean nothing for a sparse base; the counter is all
# that is shared.


def _raw_values(self):
    """``_values()``: the stored values, coalesced or not (PyTorch's ``_values``); see
    Note [The values share the version counter]."""
    out = self._device.wrap(self._data.data)
    out._vc = counter(self)
    return out


def _raw_indices(self):
    a = self._data
    if not isinstance(a, sp.coo_array):
        raise layout_error("_indices", _layout(a), "COO")
    return self._device.wrap(np.stack(_coords(a)).astype(_INDEX).reshape(a.ndim, a.nnz))


def _csr_part(name, attr):
    def kernel(self):
        a = self._data
        if not isinstance(a, sp.csr_array):
            raise layout_error(name, _layout(a), "CSR")
        return self._device.wrap(getattr(a, attr).astype(_INDEX))
    kernel.__name__ = kernel.__qualname__ = f"sparse[{name}]"
    return kernel


def _layout(a):
    return sparse_csr if isinstance(a, sp.csr_array) else sparse_coo


def _coalesce(self):
    a = self._data
    if not isinstance(a, sp.coo_array):
        raise layout_error("coalesce", _layout(a), "COO")
    c = _copy(a)
    c.sum_duplicates()  # nothing to do when it has the canonical format
    return self._device.wrap(c)


def _is_coalesced(self):
    a = self._data
    if not isinstance(a, sp.coo_array):
        raise layout_error("is_coalesced", _layout(a), "COO")
    return bool(a.has_canonical_format)


def _sparse_mask(self, mask):
    """``self``'s values at the stored positions of sparse ``mask``, with its structure."""
    check_sparse_mask(self, mask)
    m = mask._data
    if _is_sparse(self):
        vals = _gather_sparse(self._data, m)
    else:
        vals = np.ascontiguousarray(self._data[coords_of(m)])
    return mask._device.wrap(_like(m, vals))


def _gather_sparse(a, m):
    """``a``'s values at ``m``'s stored positions (zero where ``a`` stores nothing),
    without densifying: a binary search of the flat positions."""
    c = a.tocoo()
    if not c.has_canonical_format:
        c = _copy(c)
        c.sum_duplicates()
    shape = a.shape
    have = np.ravel_multi_index(_coords(c), shape) if c.nnz else np.zeros(0, np.int64)
    order = np.argsort(have)  # the positions are distinct
    have, vals = have[order], c.data[order]
    want = np.ravel_multi_index(coords_of(m), shape) if m.nnz else np.zeros(0, np.int64)
    pos = np.minimum(np.searchsorted(have, want), max(len(have) - 1, 0))
    found = (have[pos] == want) if len(have) else np.zeros(len(want), bool)
    out = np.zeros(len(want), dtype=a.dtype)
    out[found] = vals[pos[found]]
    return out


# ---------------------------------------------------------------------------------------
# Products


def _matmul(self, other):
    a, b = self._data, other._data
    sa, sb = _is_sparse(self), _is_sparse(other)
    shape = matmul_shape(self, other, sa, sb)
    if sa and sb:
        return self._device.wrap(_in_layout(_csr(a) @ _csr(b), a))
    if sa:  # reshaped: SciPy gives () for a (1, 0) @ (0,) product
        return self._device.wrap(np.asarray(_csr(a) @ b).reshape(shape))
    # dense @ sparse, as (sparse^T @ dense^T)^T
    r = _csr(b).T @ (a.T if a.ndim == 2 else a)
    return self._device.wrap(np.ascontiguousarray(np.asarray(r).T).reshape(shape))


def _csr(a):
    """``a`` as CSR for a product: SciPy's CSR kernels beat its COO ones (the transposed
    product by 2.5x at the benchmark's size), and a coalesced COO array converts in a
    few milliseconds (its elements are already in row order)."""
    return a if isinstance(a, sp.csr_array) else a.tocsr()


_CHUNK = 1 << 16  # stored elements per step of a sampled product (bounds its memory)


def _sampled(rows, cols, left, right):
    """``out[k] = left[rows[k]] . right[cols[k]]`` (the sampled dense-dense product),
    in chunks so that memory stays ``O(chunk x inner)``."""
    out = np.empty(len(rows), dtype=np.result_type(left, right))
    for s in range(0, len(rows), _CHUNK):
        e = s + _CHUNK
        out[s:e] = np.einsum("ij,ij->i", left[rows[s:e]], right[cols[s:e]])
    return out


def _coalesced(a):
    """``a`` without duplicates: a gradient stored with ``a``'s duplicates would count each
    position's gradient once per duplicate."""
    if isinstance(a, sp.coo_array) and not a.has_canonical_format:
        a = _copy(a)
        a.sum_duplicates()
    return a


def _t_matmul(a, d, transpose):
    """``a^T @ d`` (``transpose``) or ``a @ d`` of sparse ``a``, as a NumPy array."""
    return np.ascontiguousarray(np.asarray((_csr(a).T if transpose else _csr(a)) @ d))


_matmul_backward = matmul_backward(
    _KEY_NAME, coalesced=_coalesced, coords=coords_of, like=_like,
    sampled=lambda rows, cols, left, right: _sampled(rows, cols, np.ascontiguousarray(left),
                                                     np.ascontiguousarray(right)),
    t_matmul=_t_matmul, todense=lambda a: a.toarray())


# ---------------------------------------------------------------------------------------
# Reductions


def _sum(self, axis=None, keepdims=False, dtype=None):
    a = self._data
    total = aten.sum(_values(self), dtype=dtype)  # the dense op's dtype rules
    if axis is None:
        if keepdims:
            return aten.reshape(total, (1,) * a.ndim)
        return total
    nd = a.ndim
    norm = normalize_axes("sum", axis, nd)
    want = total._data.dtype
    if len(norm) == nd:  # every axis: the total
        return aten.reshape(total, (1,) * nd) if keepdims else total
    if a.ndim == 2 and len(norm) == 1:
        r = np.asarray(a.sum(axis=norm[0], dtype=want))
    else:  # several axes, or n-D COO: sum over the coordinates
        keep = [d for d in range(nd) if d not in norm]
        shape = tuple(a.shape[d] for d in keep)
        r = np.zeros(shape, dtype=want)
        coords = coords_of(a)
        np.add.at(r, tuple(coords[d] for d in keep), a.data.astype(want))
    if keepdims:
        r = r.reshape(tuple(1 if d in norm else s for d, s in enumerate(a.shape)))
    return self._device.wrap(np.ascontiguousarray(r, dtype=want))


def _sparse_sum(self, dim):
    """``md.sparse.sum``: a sparse result over the dimensions left (dense when none is),
    whose gradient keeps the input's pattern (``torch.sparse.sum``)."""
    a = _coalesced(self._data)
    want = aten.sum(_values(self))._data.dtype  # the dense op's dtype rules
    dims = normalize_axes("sparse.sum", dim, a.ndim)
    coords, shape = kept(coords_of(a), a.shape, dims)
    if not shape:
        return self._device.wrap(np.asarray(a.data.sum(dtype=want)))
    r = sp.coo_array((a.data.astype(want), tuple(coords)), shape=shape)
    r.sum_duplicates()
    return self._device.wrap(r)


def _sparse_sum_backward(grad, self, dim):
    a = _coalesced(self._data)
    dims = normalize_axes("sparse.sum", dim, a.ndim)
    coords, shape = kept(coords_of(a), a.shape, dims)
    g = grad._data
    if _is_sparse(grad):
        at = sp.coo_array((np.zeros(a.nnz, g.dtype), tuple(coords)), shape=shape)
        vals = _gather_sparse(g, at)
    else:
        vals = np.broadcast_to(g, shape)[tuple(coords)] if shape else np.full(a.nnz, g)
    return self._device.wrap(_like(a, np.ascontiguousarray(vals, dtype=a.dtype)))


# ---------------------------------------------------------------------------------------
# Softmax over a sparse dimension (Note [Sparse softmax])

# Note [Sparse softmax]
# ~~~~~~~~~~~~~~~~~~~~~
# As ``torch.sparse.softmax``: the elements a sparse tensor does not store count as minus
# infinity, so each slice along ``dim`` is the softmax of its stored values alone, and the
# result has the input's pattern (a slice with nothing stored stays empty).  The backward
# (``_softmax_backward_data``) is the dense formula, ``out * (g - sum(g * out, dim))``, on
# that pattern.  Slices are found from the coordinates of the other dimensions.


def _slices(a, dim):
    """The slice along ``dim`` of each stored element of ``a``: ids ``0..n-1``, and ``n``."""
    coords = coords_of(a)
    other = [c for d, c in enumerate(coords) if d != dim]
    if not other or not len(coords[0]):
        return np.zeros(len(coords[0]), np.intp), min(len(coords[0]), 1)
    key = np.ravel_multi_index(other, [n for d, n in enumerate(a.shape) if d != dim])
    _, inverse = np.unique(key, return_inverse=True)
    return inverse, int(inverse.max()) + 1


def _softmax(self, dim=-1):
    a = _coalesced(self._data)
    if a.dtype.kind != "f":
        raise TypeError(f"softmax: a sparse softmax takes floating tensors, got "
                        f"{self.dtype.name}")
    (d,) = normalize_axes("softmax", dim, a.ndim)
    inverse, n = _slices(a, d)
    v = a.data
    top = np.full(n, -np.inf, v.dtype)
    np.maximum.at(top, inverse, v)
    e = np.exp(v - top[inverse])
    total = np.bincount(inverse, weights=e, minlength=n)
    return self._device.wrap(_like(a, (e / total[inverse]).astype(v.dtype)))


def _softmax_backward_data(grad_output, output, dim):
    o = output._data
    g = grad_output
    gv = _gather_sparse(g._data, o) if _is_sparse(g) else g._data[coords_of(o)]
    (d,) = normalize_axes("softmax", dim, o.ndim)
    inverse, n = _slices(o, d)
    total = np.bincount(inverse, weights=gv * o.data, minlength=n)
    return output._device.wrap(_like(o, (o.data * (gv - total[inverse])).astype(o.dtype)))


# ---------------------------------------------------------------------------------------
# Elementwise (Note [Values through the dense ops])


def _on_values(name):
    return on_values(name, _values, _rebuild, _KEY_NAME)


def _rebuild(t, values):
    return t._device.wrap(_like(t._data, values._data))


def _sparse_mul(self, other, dtype):
    r = self._data.multiply(other._data)
    return self._device.wrap(_in_layout(sp.coo_array(r) if r.ndim != 2 else r,
                                        self._data).astype(dtype))


def _sparse_add(self, other, dtype, scale):
    a, b = self._data.astype(dtype), other._data.astype(dtype)
    return self._device.wrap(_in_layout(a + b * scale if scale != 1 else a + b, self._data))


_mul_tensor = mul_tensor(
    _sparse_mul, lambda a, dense, shape: np.ascontiguousarray(
        np.broadcast_to(dense, shape)[coords_of(a)]), _rebuild)


# ---------------------------------------------------------------------------------------
# Shape


def _transpose(self, dim0, dim1):
    a = self._data
    axes = transpose_axes(a.shape, dim0, dim1)
    if isinstance(a, sp.csr_array):
        return self._device.wrap(a.T.tocsr() if axes != [0, 1] else _copy(a))
    r = a.transpose(tuple(axes))
    return self._device.wrap(r.tocoo() if not isinstance(r, sp.coo_array) else r)


def _copy(a):
    """A copy of sparse array ``a`` (SciPy's ``copy`` forgets ``has_canonical_format``)."""
    c = a.copy()
    if isinstance(a, sp.coo_array):
        c.has_canonical_format = a.has_canonical_format
    return c


def _clone(self):
    return self._device.wrap(_copy(self._data))


def _reshape(self, shape, *, copy=None):
    a = self._data
    shape = reshape_target(a.shape, shape, isinstance(a, sp.csr_array))
    if isinstance(a, sp.csr_array):
        return self._device.wrap(a.reshape(shape).tocsr())
    if shape == tuple(a.shape):
        return self._device.wrap(_copy(a))
    r = a.reshape(shape)
    r = r if isinstance(r, sp.coo_array) else r.tocoo()
    # a row-major reshape keeps the elements' order: coalesced stays coalesced
    r.has_canonical_format = a.has_canonical_format
    return self._device.wrap(r)


def _permute(self, axes):
    a = self._data
    axes = permutation(a.shape, axes)
    if isinstance(a, sp.csr_array):
        return self._device.wrap(a.T.tocsr() if axes == (1, 0) else _copy(a))
    return self._device.wrap(a.transpose(axes))


def _empty_sparse_like(self, *, dtype=None, device=None, requires_grad=False):
    """``zeros_like``/``empty_like`` of a sparse tensor: no stored elements, its layout
    (as PyTorch)."""
    a = self._data
    check_like_device(self, device, _KEY_NAME)
    want = a.dtype if dtype is None else dtype.numpy
    if isinstance(a, sp.csr_array):
        out = sp.csr_array(a.shape, dtype=want)
    else:
        out = sp.coo_array((np.zeros(0, want), tuple(np.zeros((a.ndim, 0), np.int64))),
                           shape=a.shape)
        out.has_canonical_format = True
    t = self._device.wrap(out)
    return t.requires_grad_(True) if requires_grad else t


def _basic_index(self, key):
    """``x[key]`` with ints, slices and ``...`` (SciPy's indexing): a sparse result in the
    input's layout where it has two dimensions (COO otherwise), a dense 0-d one for a
    single element."""
    a = self._data
    check_index_key(key, _KEY_NAME)
    try:
        r = a[key]
    except IndexError:
        raise IndexError(f"__getitem__: index {key!r} is out of range for a sparse tensor "
                         f"of shape {tuple(a.shape)}") from None
    if not is_sparse_array(r) and not sp.issparse(r):  # one element
        return self._device.wrap(np.asarray(r, dtype=a.dtype))
    if isinstance(a, sp.csr_array) and r.ndim == 2:
        return self._device.wrap(r.tocsr())
    return self._device.wrap(r if isinstance(r, sp.coo_array) else r.tocoo())


# ---------------------------------------------------------------------------------------
# Registration

KERNELS = backend_kernels(globals(), _KEY_NAME)
register(routed(KERNELS), _KEY, _ORIGIN)
