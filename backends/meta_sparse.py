"""Sparse meta tensors: the ``SparseMeta`` key (docs/SPARSE.md).

A sparse meta tensor has a shape, a dtype, a layout and a number of stored elements
(``nnz``), and no data: ``x.to("meta")`` of a sparse tensor, ``md.sparse_coo_tensor`` of
meta index and value tensors, and ``FakeTensorMode.from_tensor`` of a sparse tensor make
one.  Loaded by the first of these, never by ``import mdtensor``; it needs no SciPy.

Note [Stored elements of meta results]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A meta result's ``nnz`` is exact or the op refuses: the ops whose pattern follows from the
input's (the elementwise ops that keep zeros, ``mul`` by a dense tensor, transposes,
reshapes, CSR <-> COO of a coalesced tensor, ``sparse_mask``, ``softmax``, the gradients
that keep a pattern) keep its ``nnz``; products and sums with a dense result need only
shapes; the ops whose number of stored elements depends on the values and coordinates
(dense to sparse, ``coalesce`` of an uncoalesced tensor, sparse @ sparse, sparse + sparse,
``md.sparse.sum`` over some dimensions, indexing) raise ``NotImplementedError`` naming the
op, as FakeTensorMode's data-dependent ops do.  PyTorch's SparseMeta kernels give such
results ``nnz=0`` instead (and have no kernel for most of these ops); a wrong count would
mislead a memory estimate, which is what a meta tensor is for.
"""

from __future__ import annotations

import numpy as np
from mdtensor.backends._sparse_rules import (
    check_like_device,
    check_sparse_mask,
    common_kernels,
    data_dependent,
    layout_error,
    matmul_shape,
    normalize_axes,
    on_values,
    permutation,
    register,
    reshape_target,
    transpose_axes,
)
from mdtensor.backends.hybrid_sparse import routed
from mdtensor.backends.meta_backend import MetaArray

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.tensors.layout import SPARSE, register_sparse_array, sparse_coo, sparse_csr

__all__ = ["MetaArray", "MetaCOO", "MetaCSR", "data_dependent", "meta_like"]

_KEY = DispatchKey.SparseMeta


class MetaSparse:
    """Shape, dtype, number of stored elements and coalescedness of a sparse array that
    has no data."""

    __slots__ = ("shape", "dtype", "nnz", "coalesced")

    def __init__(self, shape, dtype, nnz: int, coalesced: bool):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.nnz = int(nnz)
        self.coalesced = bool(coalesced)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype}, "
                f"nnz={self.nnz})")


class MetaCOO(MetaSparse):
    __slots__ = ()


class MetaCSR(MetaSparse):
    __slots__ = ()


register_sparse_array(MetaCOO, sparse_coo)
register_sparse_array(MetaCSR, sparse_csr)


def meta_like(shape, dtype, nnz: int, layout, coalesced: bool = True, dense_dim: int = 0):
    """The meta array of a sparse tensor of ``layout`` (a CSR one is always coalesced); a
    hybrid COO one's parts are meta arrays (Note [One hybrid COO for every backend] in
    backends/hybrid_sparse.py)."""
    if dense_dim:
        from mdtensor.backends.hybrid_sparse import HybridCOO

        sd = len(shape) - dense_dim
        return HybridCOO(MetaArray((sd, nnz), np.dtype(np.int64)),
                         MetaArray((nnz, *shape[sd:]), dtype), shape, coalesced)
    if layout is sparse_csr:
        return MetaCSR(shape, dtype, nnz, True)
    return MetaCOO(shape, dtype, nnz, coalesced)


def _is_sparse(t) -> bool:
    return bool(getattr(t, "_ks", 0) & SPARSE)


def _dense(t):
    """A dense meta tensor of ``t``'s shape and dtype (for the dense ops' rules)."""
    return t._device.wrap(MetaArray(t._data.shape, t._data.dtype))


def _values(t):
    return t._device.wrap(MetaArray((t._data.nnz,), t._data.dtype))


def _same(t, dtype=None, shape=None, coalesced=None):
    """A sparse meta tensor with ``t``'s layout and nnz."""
    a = t._data
    return t._device.wrap(type(a)(a.shape if shape is None else shape,
                                  a.dtype if dtype is None else dtype, a.nnz,
                                  a.coalesced if coalesced is None else coalesced))


# ---------------------------------------------------------------------------------------
# Construction and parts


def make_coo(indices, values, size, dtype, is_coalesced):
    """``sparse_coo_tensor`` of meta index and value tensors: ``size`` is needed (the
    largest index is data)."""
    if size is None:
        raise data_dependent("sparse_coo_tensor: size")
    nnz = values._data.shape[0]
    if indices._data.shape != (len(size), nnz):
        raise ValueError(f"sparse_coo_tensor: indices of shape {indices._data.shape} do not "
                         f"fit size {tuple(size)} and {nnz} values (expected "
                         f"{(len(size), nnz)})")
    return values._device.wrap(MetaCOO(size, dtype, nnz, bool(is_coalesced)))


def make_csr(crow, col, values, size, dtype):
    if size is None:
        raise data_dependent("sparse_csr_tensor: size")
    if len(size) != 2 or crow._data.shape != (size[0] + 1,):
        raise ValueError(f"sparse_csr_tensor: size {tuple(size)} has {size[0]} rows but "
                         f"crow_indices describe {crow._data.shape[0] - 1}")
    return values._device.wrap(MetaCSR(size, dtype, values._data.shape[0], True))


def _to_dense(self, dtype=None):
    return self._device.wrap(MetaArray(self._data.shape,
                                       self._data.dtype if dtype is None else dtype.numpy))


def _to_sparse(self, layout):
    a = self._data
    if layout is sparse_csr:
        if a.ndim != 2:
            raise ValueError(f"to_sparse_csr: a sparse CSR tensor has 2 dimensions; got a "
                             f"tensor of {a.ndim}")
        if not a.coalesced:
            raise data_dependent("to_sparse_csr of an uncoalesced tensor")
    elif not a.coalesced:
        raise data_dependent("to_sparse of an uncoalesced tensor")
    return self._device.wrap(meta_like(a.shape, a.dtype, a.nnz, layout))


def _part(name, shape_of, dtype_of=lambda a: "int64", layout=None, coalesced=False):
    def kernel(self):
        a = self._data
        if layout is not None and not isinstance(a, layout):
            want = "COO" if layout is MetaCOO else "CSR"
            raise TypeError(f"{name}: expected a sparse {want} tensor, got layout "
                            f"{'md.sparse_csr' if isinstance(a, MetaCSR) else 'md.sparse_coo'}")
        if coalesced and isinstance(a, MetaCOO) and not a.coalesced:
            raise RuntimeError(f"{name}: cannot get {name} on an uncoalesced tensor, please "
                               f"call .coalesce() first")
        return self._device.wrap(MetaArray(shape_of(a), np.dtype(dtype_of(a))))

    kernel.__name__ = kernel.__qualname__ = f"sparse_meta[{name}]"
    return kernel


def _coalesce(self):
    if isinstance(self._data, MetaCSR):
        raise layout_error("coalesce", sparse_csr, "COO")
    if not self._data.coalesced:
        raise data_dependent("coalesce")
    return _same(self)


def _is_coalesced(self):
    if isinstance(self._data, MetaCSR):
        raise layout_error("is_coalesced", sparse_csr, "COO")
    return self._data.coalesced


def _sparse_mask(self, mask):
    check_sparse_mask(self, mask)
    return _same(mask, dtype=self._data.dtype)


# ---------------------------------------------------------------------------------------
# Products, reductions, elementwise


def _matmul(self, other):
    sa, sb = _is_sparse(self), _is_sparse(other)
    shape = matmul_shape(self, other, sa, sb)
    if sa and sb:
        raise data_dependent("matmul of two sparse tensors")
    dtype = aten.matmul(_dense(self) if sa else self, _dense(other) if sb else other)
    return self._device.wrap(MetaArray(shape, dtype._data.dtype))


def _matmul_backward(g, self, other, mask):
    if _is_sparse(self) and _is_sparse(other):
        raise NotImplementedError("matmul_backward: the gradient of a product of two sparse "
                                  "tensors is not implemented (SparseMeta)")
    out = []
    for t, want in ((self, mask[0]), (other, mask[1])):
        if not want:
            out.append(None)
        elif _is_sparse(t):  # the gradient keeps the pattern (Note [Stored elements ...])
            if not t._data.coalesced:
                raise data_dependent("matmul_backward of an uncoalesced tensor")
            out.append(_same(t))
        else:
            out.append(t._device.wrap(MetaArray(t._data.shape, t._data.dtype)))
    return tuple(out)


def _sum(self, axis=None, keepdims=False, dtype=None):
    return aten.sum(_dense(self), axis, keepdims=keepdims, dtype=dtype)


def _sparse_sum(self, dim):
    dims = normalize_axes("sparse.sum", dim, self.ndim)
    want = aten.sum(_values(self))._data.dtype
    if len(dims) != self.ndim:
        raise data_dependent("sparse.sum over some of the dimensions")
    return self._device.wrap(MetaArray((), want))


def _sparse_sum_backward(grad, self, dim):
    return _same(self)


def _on_values(name):
    return on_values(name, _values, lambda t, v: _same(t, dtype=v._data.dtype), "SparseMeta")


def _mul_tensor(self, other):
    sa, sb = _is_sparse(self), _is_sparse(other)
    dtype = aten.mul(_dense(self) if sa else self, _dense(other) if sb else other)
    if sa and sb:
        raise data_dependent("mul of two sparse tensors")
    s = self if sa else other
    if tuple(dtype.shape) != tuple(s.shape):
        raise ValueError(f"mul: a dense factor must broadcast to the sparse tensor's shape "
                         f"{tuple(s.shape)}; got {tuple((other if sa else self).shape)}")
    return _same(s, dtype=dtype._data.dtype)


def _add_like(name):
    def kernel(self, other, *, alpha=1):
        if _is_sparse(self) and _is_sparse(other):
            raise data_dependent(f"{name} of two sparse tensors")
        return getattr(aten, name)(_dense(self) if _is_sparse(self) else self,
                                   _dense(other) if _is_sparse(other) else other,
                                   alpha=alpha)

    kernel.__name__ = kernel.__qualname__ = f"sparse_meta[{name}]"
    return kernel


def _softmax(self, dim=-1):
    if self._data.dtype.kind != "f":
        raise TypeError(f"softmax: a sparse softmax takes floating tensors, got "
                        f"{self.dtype.name}")
    normalize_axes("softmax", dim, self.ndim)
    if not self._data.coalesced:
        raise data_dependent("softmax of an uncoalesced tensor")
    return _same(self)


def _softmax_backward_data(grad_output, output, dim):
    return _same(output)


# ---------------------------------------------------------------------------------------
# Shape


def _transpose(self, dim0, dim1):
    axes = transpose_axes(self.shape, dim0, dim1)
    shape = tuple(self.shape[d] for d in axes)
    return _same(self, shape=shape, coalesced=isinstance(self._data, MetaCSR) or
                 axes == list(range(self.ndim)) and self._data.coalesced)


def _permute(self, axes):
    axes = permutation(self.shape, axes)
    shape = tuple(self.shape[d] for d in axes)
    return _same(self, shape=shape, coalesced=isinstance(self._data, MetaCSR) or
                 axes == tuple(range(self.ndim)) and self._data.coalesced)


def _reshape(self, shape, *, copy=None):
    a = self._data
    return _same(self, shape=reshape_target(a.shape, shape, isinstance(a, MetaCSR)))


def _basic_index(self, key):
    raise data_dependent("__getitem__")


def _empty_like(self, *, dtype=None, device=None, requires_grad=False):
    check_like_device(self, device, "SparseMeta")
    a = self._data
    t = self._device.wrap(type(a)(a.shape, a.dtype if dtype is None else dtype.numpy, 0,
                                  True))
    return t.requires_grad_(True) if requires_grad else t


def _to_device_copy(self, device):
    if str(device) == "meta":
        return _same(self)
    raise NotImplementedError(f"to_device_copy: Cannot copy out of meta tensor; no data! "
                              f"(a sparse meta tensor to {device}) (SparseMeta)")


# ---------------------------------------------------------------------------------------
# Registration

KERNELS = {
    "_to_dense": _to_dense, "_to_sparse": _to_sparse,
    "indices": _part("indices", lambda a: (a.ndim, a.nnz), layout=MetaCOO, coalesced=True),
    "_indices": _part("_indices", lambda a: (a.ndim, a.nnz), layout=MetaCOO),
    "values": _part("values", lambda a: (a.nnz,), lambda a: a.dtype, coalesced=True),
    "_values": _part("_values", lambda a: (a.nnz,), lambda a: a.dtype),
    "crow_indices": _part("crow_indices", lambda a: (a.shape[0] + 1,), layout=MetaCSR),
    "col_indices": _part("col_indices", lambda a: (a.nnz,), layout=MetaCSR),
    "coalesce": _coalesce, "is_coalesced": _is_coalesced, "sparse_mask": _sparse_mask,
    "matmul": _matmul, "mm": _matmul, "matmul_backward": _matmul_backward, "sum": _sum,
    "_sparse_sum.dim": _sparse_sum, "_sparse_sum_backward": _sparse_sum_backward,
    "mul.Tensor": _mul_tensor, "add.Tensor": _add_like("add"), "sub.Tensor": _add_like("sub"),
    "softmax": _softmax, "_softmax_backward_data": _softmax_backward_data,
    "basic_index": _basic_index, "reshape": _reshape, "permute": _permute,
    "zeros_like": _empty_like, "empty_like": _empty_like,
    **common_kernels("SparseMeta", _on_values, _transpose, lambda self: _same(self)),
    "to_device_copy": _to_device_copy,
}

register(routed(KERNELS), _KEY, "meta_sparse")
