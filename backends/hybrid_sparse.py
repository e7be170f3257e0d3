"""Hybrid sparse COO tensors: sparse leading dimensions, dense trailing ones (docs/SPARSE.md).

``md.sparse_coo_tensor(indices, values, size)`` with ``values`` of more than one dimension,
or ``x.to_sparse(sparse_dim)``, makes one, as PyTorch's: ``indices`` of shape
``(sparse_dim, nnz)``, ``values`` of shape ``(nnz, *dense_shape)``, ``size`` the sparse
sizes and then the dense ones.  Loaded with the first sparse backend (through
``_sparse_rules.register``), never by ``import mdtensor``.

Note [One hybrid COO for every backend]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
SciPy's sparse arrays have no dense dimensions (JAX's BCOO has, as ``n_dense``; CuPy's
have none).  A hybrid tensor therefore holds a ``HybridCOO``: its two parts as arrays of
the tensor's own backend (NumPy, JAX, CuPy, meta), its shape and whether it is coalesced.
The kernels below compute on the parts with the catalogue's dense ops (``index_add`` to
scatter, ``index_select`` to gather, ``sum``, ``cat``), so one implementation serves every
device that has sparse kernels -- the same answers and the same errors on the CPU, on JAX
and on CUDA -- and on ``"meta"`` the same code computes shapes.  The bookkeeping of
coordinates whose result size is data (``coalesce``: which positions repeat; dense to
sparse: which rows are non-zero; masks) runs with NumPy on the host, as Note [Coordinates
on the host] in backends/jax_sparse.py does, and on meta raises the data-dependent error.

Each sparse backend's kernel table passes through ``routed`` before it registers:
a call with a hybrid operand runs the kernel of ``KERNELS`` below, and an op not in it
raises ``NotImplementedError`` naming the op, the layout and the key.  A hybrid tensor has
the ``sparse_coo`` layout, as in PyTorch; ``sparse_dim()`` and ``dense_dim()`` tell it
apart.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from mdtensor.backends._sparse_rules import (
    ZERO_PRESERVING,
    add_like,
    check_like_device,
    check_sparse_mask,
    data_dependent,
    move,
    normalize_axes,
    on_values,
    permutation,
    transpose_axes,
    transposes,
    uncoalesced_error,
)

from mdtensor import _dtypes as dt
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.tensors.layout import SPARSE, register_sparse_array, sparse_coo
from mdtensor.tensors.version_counter import counter

__all__ = ["HybridCOO", "KERNELS", "from_dense", "make", "route", "routed"]


class HybridCOO:
    """The parts of a hybrid COO tensor: ``indices`` (int64, ``(sparse_dim, nnz)``) and
    ``data`` (``(nnz, *dense_shape)``), arrays of the tensor's backend."""

    __slots__ = ("indices", "data", "shape", "coalesced")

    def __init__(self, indices, data, shape, coalesced: bool):
        self.indices, self.data = indices, data
        self.shape = tuple(int(s) for s in shape)
        self.coalesced = bool(coalesced)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def sparse_dim(self) -> int:
        return int(self.indices.shape[0])

    @property
    def dense_dim(self) -> int:
        return len(self.data.shape) - 1

    def __repr__(self) -> str:
        return (f"HybridCOO(shape={self.shape}, sparse_dim={self.sparse_dim}, "
                f"nnz={self.nnz}, dtype={self.dtype})")


register_sparse_array(HybridCOO, sparse_coo)


def is_hybrid(t) -> bool:
    return type(getattr(t, "_data", None)) is HybridCOO


def _key(t) -> str:
    return "Sparse" + t._device.backend.key


# ---------------------------------------------------------------------------------------
# Parts and helpers


def _wrap(t, array):
    return t._device.wrap(array)


def _idx(t):
    return _wrap(t, t._data.indices)


def _vals(t):
    return _wrap(t, t._data.data)


def _new(t, indices, values, shape=None, coalesced=None):
    """A hybrid tensor on ``t``'s device of index and value tensors."""
    a = t._data
    return _wrap(t, HybridCOO(indices._data, values._data, a.shape if shape is None else
                              shape, a.coalesced if coalesced is None else coalesced))


def _to_device(t, array: np.ndarray):
    """A dense tensor on ``t``'s device of host array ``array``."""
    dev = t._device
    return dev.wrap(dev.backend.asarray(array, index=dev.index))


def _host(t, op: str) -> np.ndarray:
    """Dense index tensor ``t`` on the host (Note [One hybrid COO for every backend]);
    refused on meta, where it is data."""
    if t._device.type == "meta":
        raise data_dependent(op)
    return np.asarray(t.numpy(force=True), dtype=np.int64)


def _host_indices(t, op: str) -> np.ndarray:
    return _host(_idx(t), op)


def _flat(t, indices=None):
    """The row-major positions of ``t``'s stored elements among its sparse positions, as a
    tensor on its device (computed there: on meta a shape)."""
    a = t._data
    idx = _idx(t) if indices is None else indices
    sizes = a.shape[:idx.shape[0]]
    strides = [math.prod(sizes[d + 1:]) for d in range(len(sizes))]
    col = _to_device(t, np.asarray(strides, np.int64).reshape(-1, 1))
    return aten.sum(aten.mul(idx, col), 0)


def _flat_host(indices: np.ndarray, sizes) -> np.ndarray:
    if not indices.shape[1]:
        return np.zeros(0, np.int64)
    return np.ravel_multi_index(tuple(indices), tuple(sizes)).astype(np.int64)


def _scatter(t, flat, values, rows: int):
    """A dense tensor of ``rows`` rows (and ``values``' trailing shape), ``values[k]`` added
    at row ``flat[k]``."""
    if values.dtype is dt.bool_:  # summed as integers (JAX's index_add takes no bools)
        return aten.astype(_scatter(t, flat, aten.astype(values, dt.int64), rows), dt.bool_)
    zeros = aten.zeros((rows, *values.shape[1:]), dtype=values.dtype, device=t._device)
    return aten.index_add(zeros, 0, flat, values)


def _merged(t, indices, values, op: str):
    """The coalesced hybrid tensor with ``t``'s shape of (possibly repeated) ``indices``
    and ``values``: the positions sorted and merged on the host, the values summed on
    the device."""
    a = t._data
    sizes = a.shape[:indices.shape[0]]
    host = _host(indices, op)
    keys, inverse = np.unique(_flat_host(host, sizes), return_inverse=True)
    merged = np.stack(np.unravel_index(keys, sizes)).reshape(len(sizes), len(keys))
    summed = _scatter(t, _to_device(t, inverse.reshape(-1).astype(np.int64)), values,
                      len(keys))
    return _new(t, _to_device(t, merged.astype(np.int64)), summed, coalesced=True)


# ---------------------------------------------------------------------------------------
# Construction (ops/sparse.py calls these)


def make(device, indices, values, shape, coalesced: bool):
    """The hybrid tensor of index array ``indices`` and value array ``values`` (arrays of
    ``device``'s backend) in ``shape``."""
    return device.wrap(HybridCOO(indices, values, shape, coalesced))


def check_shape(name: str, sparse_dim: int, values_shape, size) -> None:
    """``size`` against the parts: ``sparse_dim`` sparse sizes, then ``values``' dense
    ones."""
    dense = tuple(values_shape[1:])
    if len(size) != sparse_dim + len(dense) or tuple(size[sparse_dim:]) != dense:
        raise ValueError(f"{name}: size {tuple(size)} does not fit indices of {sparse_dim} "
                         f"sparse dimensions and values of dense shape {dense} (expected "
                         f"{sparse_dim} sizes and then {dense})")


def from_dense(t, sparse_dim: int):
    """``t.to_sparse(sparse_dim)`` of dense ``t``: the positions of its first
    ``sparse_dim`` dimensions whose dense block has a non-zero, in row-major order."""
    if not 1 <= sparse_dim <= t.ndim:
        raise ValueError(f"to_sparse: sparse_dim must be between 1 and the number of "
                         f"dimensions ({t.ndim}); got {sparse_dim}")
    if t._device.type == "meta":
        raise data_dependent("to_sparse")
    sizes = tuple(t.shape[:sparse_dim])
    rows = aten.reshape(t, (math.prod(sizes), *t.shape[sparse_dim:]))
    nonzero = aten.ne(rows, 0) if rows.ndim == 1 else aten.any(
        aten.ne(rows, 0), tuple(range(1, rows.ndim)))
    keep = np.flatnonzero(nonzero.numpy(force=True)).astype(np.int64)
    values = aten.index_select(rows, 0, _to_device(t, keep))
    indices = np.stack(np.unravel_index(keep, sizes)).reshape(sparse_dim, len(keep))
    return make(t._device, _to_device(t, indices.astype(np.int64))._data, values._data,
                tuple(t.shape), True)


# ---------------------------------------------------------------------------------------
# Kernels


def _to_dense(self, dtype=None):
    a = self._data
    sizes = a.shape[:a.sparse_dim]
    out = aten.reshape(_scatter(self, _flat(self), _vals(self), math.prod(sizes)), a.shape)
    return out if dtype is None else aten.astype(out, dtype)


def _to_sparse(self, layout):
    a = self._data
    raise NotImplementedError(f"to_sparse_csr: a hybrid sparse COO tensor (sparse_dim="
                              f"{a.sparse_dim}, dense_dim={a.dense_dim}) has no CSR form "
                              f"({_key(self)}); CSR tensors have no dense dimensions")


def _indices(self):
    if not self._data.coalesced:
        raise uncoalesced_error("indices")
    return _idx(self)


def _raw_values(self):
    """See Note [The values share the version counter] in backends/scipy_sparse.py."""
    out = _vals(self)
    out._vc = counter(self)
    return out


def _values(self):
    if not self._data.coalesced:
        raise uncoalesced_error("values")
    return _raw_values(self)


def _coalesce(self):
    if self._data.coalesced:
        return _new(self, _idx(self), aten.clone(_vals(self)))
    return _merged(self, _idx(self), _vals(self), "coalesce")


def _is_coalesced(self):
    return self._data.coalesced


def _csr_only(name):
    def kernel(self):
        raise TypeError(f"{name}: expected a sparse CSR tensor, got layout md.sparse_coo")

    kernel.__name__ = kernel.__qualname__ = f"hybrid[{name}]"
    return kernel


def _rows(t, dense):
    """Dense ``dense`` (``t``'s shape) as one row per sparse position."""
    a = t._data
    return aten.reshape(dense, (math.prod(a.shape[:a.sparse_dim]), *a.shape[a.sparse_dim:]))


def _sparse_mask(self, mask):
    """``self``'s values at ``mask``'s stored positions (zero where a sparse ``self``
    stores nothing)."""
    check_sparse_mask(self, mask)
    if not is_hybrid(mask) or is_hybrid(self) and \
            self._data.sparse_dim != mask._data.sparse_dim:
        raise NotImplementedError(f"sparse_mask: a hybrid sparse COO tensor and a mask of "
                                  f"other sparse dimensions ({_key(mask)})")
    if not is_hybrid(self):
        return _new(mask, _idx(mask), aten.index_select(_rows(mask, self), 0, _flat(mask)))
    if self._data.indices is mask._data.indices:  # the same pattern (gradients)
        return _new(mask, _idx(mask), _vals(self))
    if mask._device.type == "meta":  # only the shape is known, and needed
        return _new(mask, _idx(mask), aten.zeros(mask._data.data.shape, dtype=self.dtype,
                                                 device=mask._device))
    c = self if self._data.coalesced else _coalesce(self)
    sizes = c.shape[:c._data.sparse_dim]
    have = _flat_host(_host_indices(c, "sparse_mask"), sizes)
    want = _flat_host(_host_indices(mask, "sparse_mask"), sizes)
    pos = np.minimum(np.searchsorted(have, want), max(len(have) - 1, 0))
    found = have[pos] == want if len(have) else np.zeros(len(want), bool)
    vals = _vals(c) if len(have) else aten.zeros((1, *c.shape[c._data.sparse_dim:]),
                                                 dtype=c.dtype, device=c._device)
    picked = aten.index_select(vals, 0, _to_device(c, pos.astype(np.int64)))
    keep = _to_device(c, found.reshape((-1,) + (1,) * (picked.ndim - 1)))
    return _new(mask, _idx(mask), aten.mul(picked, aten.astype(keep, picked.dtype)))


def _sum(self, axis=None, keepdims=False, dtype=None):
    """A dense result, as for every sparse layout: the dense dimensions summed on the
    values, then the sparse ones scattered into the dimensions left."""
    a = self._data
    v = _vals(self)
    total = aten.sum(v, dtype=dtype)  # the dense op's dtype rules
    norm = tuple(range(a.ndim)) if axis is None else normalize_axes("sum", axis, a.ndim)
    if len(norm) == a.ndim:
        return aten.reshape(total, (1,) * a.ndim) if keepdims else total
    sd = a.sparse_dim
    dense_axes = tuple(d - sd + 1 for d in norm if d >= sd)
    v = aten.sum(v, dense_axes, dtype=dtype) if dense_axes else aten.astype(v, total.dtype)
    keep = [d for d in range(sd) if d not in norm]
    if not keep:
        r = aten.sum(v, 0)
    else:
        sizes = tuple(a.shape[d] for d in keep)
        flat = _flat(_new(self, _idx(self), v, shape=sizes + tuple(v.shape[1:])),
                     aten.index_select(_idx(self), 0, _to_device(self, np.asarray(keep))))
        r = aten.reshape(_scatter(self, flat, v, math.prod(sizes)),
                         sizes + tuple(v.shape[1:]))
    if keepdims:
        r = aten.reshape(r, tuple(1 if d in norm else s for d, s in enumerate(a.shape)))
    return r


def _rebuild(t, values):
    return _new(t, _idx(t), values)


def _on_values(name):
    return on_values(name, lambda t: _vals(t), _rebuild, "the hybrid COO layout")


def _mul_tensor(self, other):
    """``mul`` by a dense tensor broadcasting to the hybrid one's shape (its elements at
    the stored positions); two sparse factors have no hybrid kernel."""
    s, d = (self, other) if is_hybrid(self) else (other, self)
    if d._ks & SPARSE:
        raise _refusal("mul", s, "times a sparse tensor ")
    shape = np.broadcast_shapes(tuple(s.shape), tuple(d.shape))
    if shape != tuple(s.shape):
        raise ValueError(f"mul: a dense factor must broadcast to the sparse tensor's shape "
                         f"{tuple(s.shape)}; got {tuple(d.shape)}")
    full = aten.broadcast_to(d, shape) if tuple(d.shape) != shape else d
    picked = aten.index_select(_rows(s, full), 0, _flat(s))
    return _rebuild(s, aten.mul(_vals(s), picked))


def _sparse_add(self, other, dtype, scale):
    if not (is_hybrid(self) and is_hybrid(other)) or \
            self._data.sparse_dim != other._data.sparse_dim:
        raise ValueError(f"add: sparse operands must have the same sparse dimensions; got "
                         f"{self.sparse_dim()} and {other.sparse_dim()}")
    b = aten.astype(_vals(other), dtype)
    values = aten.cat([aten.astype(_vals(self), dtype), aten.mul(b, scale) if scale != 1
                       else b], 0)
    return _merged(self, aten.cat([_idx(self), _idx(other)], 1), values, "add")


def _clone(self):
    return _new(self, aten.clone(_idx(self)), aten.clone(_vals(self)))


def _empty_like(self, *, dtype=None, device=None, requires_grad=False):
    check_like_device(self, device, _key(self))
    a = self._data
    values = aten.zeros((0, *a.shape[a.sparse_dim:]), dtype=dtype or self.dtype,
                        device=self._device)
    idx = aten.zeros((a.sparse_dim, 0), dtype=dt.int64, device=self._device)
    t = _new(self, idx, values, coalesced=True)
    return t.requires_grad_(True) if requires_grad else t


def _permuted(self, axes, name: str):
    """``self`` with its dimensions in the order ``axes``: sparse ones among themselves (the
    index rows), dense ones among themselves (the values'); as PyTorch, a sparse and a dense
    dimension do not trade places."""
    a = self._data
    sd = a.sparse_dim
    axes = [int(d) for d in axes]
    if any((d < sd) != (i < sd) for i, d in enumerate(axes)):
        raise NotImplementedError(f"{name}: a sparse and a dense dimension of a hybrid sparse "
                                  f"COO tensor do not trade places (sparse_dim={sd}, "
                                  f"dense_dim={a.dense_dim}; {_key(self)})")
    idx, vals = _idx(self), _vals(self)
    moved = axes[:sd] != list(range(sd))
    if moved:
        idx = aten.index_select(idx, 0, _to_device(self, np.asarray(axes[:sd], np.int64)))
    if axes[sd:] != list(range(sd, a.ndim)):
        vals = aten.permute(vals, (0, *(d - sd + 1 for d in axes[sd:])))
    return _new(self, idx, vals, shape=tuple(a.shape[d] for d in axes),
                coalesced=a.coalesced and not moved)


def _transpose(self, dim0, dim1):
    return _permuted(self, transpose_axes(self.shape, dim0, dim1), "transpose")


def _permute(self, axes):
    return _permuted(self, permutation(self.shape, axes), "permute")


_matrix_transpose, _t = transposes(_transpose, lambda self: _clone(self))


#: the ops a hybrid tensor has (Note [One hybrid COO for every backend]); every other op
#: of a sparse backend's table refuses it by name
KERNELS = {
    "_to_dense": _to_dense, "_to_sparse": _to_sparse, "indices": _indices,
    "values": _values, "_values": _raw_values, "_indices": lambda self: _idx(self),
    "coalesce": _coalesce, "is_coalesced": _is_coalesced, "sparse_mask": _sparse_mask,
    "crow_indices": _csr_only("crow_indices"), "col_indices": _csr_only("col_indices"),
    "sum": _sum, "mul.Tensor": _mul_tensor,
    "add.Tensor": add_like("add", 1, _sparse_add), "sub.Tensor": add_like("sub", -1,
                                                                          _sparse_add),
    "mul.Scalar": _on_values("mul"),
    "mul.Scalar_Tensor": lambda self, other: _on_values("mul")(other, self),
    "div.Scalar": _on_values("div"), "pow.Scalar": _on_values("pow"),
    "astype": _on_values("astype"), "clone": _clone,
    "zeros_like": _empty_like, "empty_like": _empty_like, "transpose.int": _transpose,
    "permute": _permute, "matrix_transpose": _matrix_transpose, "t": _t,
    "to_device_copy": lambda self, device: move(self, device, _key(self)),
}


def _refusal(name: str, t, what: str = "") -> NotImplementedError:
    a = t._data
    return NotImplementedError(
        f"{name}: no kernel for a hybrid sparse COO tensor {what}(sparse_dim={a.sparse_dim}, "
        f"dense_dim={a.dense_dim}; {_key(t)}): use to_dense() first, or make it with "
        f"values of one dimension")


def route(name: str, kernel, zero_preserving: bool):
    """``kernel`` (a sparse backend's, for op ``name``), sending calls with a hybrid
    operand to ``KERNELS`` or refusing them by name."""
    short = name.split(".")[0]
    hybrid = KERNELS.get(name) or (_on_values(short) if zero_preserving else None)

    @functools.wraps(kernel)
    def routed(*args, **kwargs):
        for a in args[:2]:
            if type(getattr(a, "_data", None)) is HybridCOO:
                if hybrid is None:
                    raise _refusal(short, a)
                return hybrid(*args, **kwargs)
        return kernel(*args, **kwargs)

    return routed


def routed(kernels: dict) -> dict:
    """A sparse backend's kernel table with every kernel ``route``d."""
    return {name: route(name, fn, name in ZERO_PRESERVING) for name, fn in kernels.items()}
