"""Sparse layouts: construction, conversion and access (docs/SPARSE.md).

``md.sparse_coo_tensor``, ``md.sparse_csr_tensor``; ``x.to_sparse()``,
``x.to_sparse_csr()``, ``x.to_dense()``; ``indices()``, ``values()``, ``crow_indices()``,
``col_indices()``, ``coalesce()``, ``is_coalesced()``, ``sparse_mask()`` and ``x.nnz``.
A sparse tensor carries the Sparse key of its backend (Note [Layouts in the key set] in
mdtensor/tensors/layout.py); the kernels for it are a backend's (``SparseCPU``:
backends/scipy_sparse.py), loaded with SciPy by the first call that makes a sparse
tensor, never by ``import mdtensor``.

Note [Sparse ops in the catalogue]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As in PyTorch, ``to_dense``, ``to_sparse`` and ``to_sparse_csr`` are composites that return
a tensor already in the asked layout as it is and otherwise call the conversion ops
``_to_dense`` and ``_to_sparse``, which have derivatives: ``_to_dense``'s gradient is the
dense gradient masked to the input's stored positions (``sparse_mask``), ``_to_sparse``'s
the sparse gradient made dense.  The ops declare no OpInfo samples: the catalogue's sweeps
run dense samples on every backend, and these ops' behaviour is a sparse tensor's;
tests/test_sparse.py compares them with their dense equivalents instead.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.formulas import register_formulas
from mdtensor.tensors.factories import asarray
from mdtensor.tensors.layout import SPARSE, layout_of, sparse_coo, sparse_csr, strided
from mdtensor.tensors.tensor import Tensor

from ._decl import OpInfo, SampleInput, SparseInput, defop

__all__ = ["sparse_coo_tensor", "sparse_csr_tensor"]


def _backend(t):
    """The sparse kernels' module for the device of tensor ``t`` (SparseCPU: SciPy,
    SparseJAX: ``jax.experimental.sparse``), imported and registered on first use."""
    if t._device.type == "jax":
        from mdtensor.backends import jax_sparse

        return jax_sparse
    if t._device.type == "cuda":  # CuPy, imported here (Note [One source for SciPy and CuPy])
        from mdtensor.backends import cupyx_sparse

        return cupyx_sparse
    from mdtensor.backends import scipy_sparse

    return scipy_sparse


def _meta_backend():
    """The SparseMeta kernels' module (registers them, once)."""
    from mdtensor.backends import meta_sparse

    return meta_sparse


def _int_array(name: str, what: str, t) -> np.ndarray:
    a = t._data
    if a.dtype.kind not in "iu":
        raise TypeError(f"{name}: {what} must be an integer tensor, got {t.dtype.name}")
    return a


def _checked_size(name, size, inferred):
    if size is None:
        return tuple(inferred)
    size = tuple(int(s) for s in size)
    if len(size) != len(inferred):
        raise ValueError(f"{name}: the indices have {len(inferred)} dimensions but size "
                         f"{size} has {len(size)}")
    for d, (s, need) in enumerate(zip(size, inferred)):
        if need > s:
            raise ValueError(f"{name}: size {size} is too small for the indices: dimension "
                             f"{d} needs at least {need}")
    return size


def _coo_parts(indices, values):
    """The index and value arrays of a COO constructor call, their shapes checked (no data
    read: the meta kernel checks them too)."""
    name = "sparse_coo_tensor"
    idx = _int_array(name, "indices", indices)
    if idx.ndim != 2:
        raise ValueError(f"{name}: indices must have 2 dimensions (ndim, nnz), got "
                         f"{idx.ndim}")
    vals = values._data
    if vals.ndim < 1:
        raise ValueError(f"{name}: values must have at least 1 dimension (nnz, "
                         f"*dense_shape), got a 0-d tensor")
    if idx.shape[1] != vals.shape[0]:
        raise ValueError(f"{name}: indices give {idx.shape[1]} elements but values "
                         f"{vals.shape[0]}")
    return idx, vals


def _coo_kernel(indices, values, size=None, *, dtype=None, is_coalesced=None):
    name = "sparse_coo_tensor"
    idx, vals = _coo_parts(indices, values)
    if idx.size and idx.min() < 0:
        raise ValueError(f"{name}: indices must be non-negative")
    inferred = idx.max(axis=1) + 1 if idx.shape[1] else [0] * idx.shape[0]
    backend = _backend(values)
    if dtype is not None:
        vals = vals.astype(dtype.numpy)
    if vals.ndim > 1:  # hybrid: dense trailing dimensions
        backend.check_dtype(name, vals.dtype)
        shape = _hybrid_size(size, idx, vals, inferred)
        return _hybrid().make(values._device, idx.astype(np.int64), vals, shape,
                              bool(is_coalesced))
    shape = _checked_size(name, size, inferred)
    coo = backend.make_coo(name, idx, vals, shape, bool(is_coalesced))
    return values._device.wrap(coo)


def _hybrid():
    """The hybrid COO kernels (Note [One hybrid COO for every backend] in
    backends/hybrid_sparse.py)."""
    from mdtensor.backends import hybrid_sparse

    return hybrid_sparse


def _hybrid_size(size, idx, vals, inferred):
    """The size of a hybrid tensor: checked sparse sizes, then the values' dense ones."""
    name = "sparse_coo_tensor"
    dense = tuple(vals.shape[1:])
    if size is None:
        return _checked_size(name, None, inferred) + dense
    size = tuple(int(s) for s in size)
    _hybrid().check_shape(name, idx.shape[0], vals.shape, size)
    return _checked_size(name, size[:idx.shape[0]], inferred) + dense


def _coo_meta(indices, values, size=None, *, dtype=None, is_coalesced=None):
    idx, vals = _coo_parts(indices, values)
    want = vals.dtype if dtype is None else dtype.numpy
    if vals.ndim > 1:
        meta = _meta_backend()  # the SparseMeta kernels
        if size is None:
            raise meta.data_dependent("sparse_coo_tensor: size")
        size = _hybrid_size(size, idx, vals, [0] * idx.shape[0])
        return _hybrid().make(values._device, idx, meta.MetaArray(vals.shape, want), size,
                              bool(is_coalesced))
    if size is not None:
        size = _checked_size("sparse_coo_tensor", size, [0] * idx.shape[0])
    return _meta_backend().make_coo(indices, values, size, want, is_coalesced)


def _csr_parts(crow_indices, col_indices, values):
    name = "sparse_csr_tensor"
    crow = _int_array(name, "crow_indices", crow_indices)
    col = _int_array(name, "col_indices", col_indices)
    vals = values._data
    if crow.ndim != 1 or col.ndim != 1 or vals.ndim != 1:
        raise ValueError(f"{name}: crow_indices, col_indices and values must have 1 "
                         f"dimension each")
    if col.shape[0] != vals.shape[0]:
        raise ValueError(f"{name}: col_indices give {col.shape[0]} elements but values "
                         f"{vals.shape[0]}")
    return crow, col, vals


def _csr_kernel(crow_indices, col_indices, values, size=None, *, dtype=None):
    name = "sparse_csr_tensor"
    crow, col, vals = _csr_parts(crow_indices, col_indices, values)
    if len(crow) == 0 or crow[0] != 0 or crow[-1] != len(col) or np.any(np.diff(crow) < 0):
        raise ValueError(f"{name}: crow_indices must start at 0, not decrease and end at "
                         f"the number of elements ({len(col)})")
    if len(col) and col.min() < 0:
        raise ValueError(f"{name}: col_indices must be non-negative")
    shape = _checked_size(name, size, (len(crow) - 1, int(col.max()) + 1 if len(col) else 0))
    if size is not None and shape[0] != len(crow) - 1:
        raise ValueError(f"{name}: size {shape} has {shape[0]} rows but crow_indices "
                         f"describe {len(crow) - 1}")
    if dtype is not None:
        vals = vals.astype(dtype.numpy)
    return values._device.wrap(_backend(values).make_csr(name, crow, col, vals, shape))


def _csr_meta(crow_indices, col_indices, values, size=None, *, dtype=None):
    crow, col, vals = _csr_parts(crow_indices, col_indices, values)
    if size is not None:
        size = _checked_size("sparse_csr_tensor", size, (0, 0))
    return _meta_backend().make_csr(crow_indices, col_indices, values, size,
                                    vals.dtype if dtype is None else dtype.numpy)


defop("sparse_coo_tensor(Tensor indices, Tensor values, int[]? size=None, *, "
      "ScalarType? dtype=None, bool? is_coalesced=None) -> Tensor", names=(),
      kernels={"CPU": _coo_kernel, "JAX": _coo_kernel, "CUDA": _coo_kernel,
               "Meta": _coo_meta})
defop("sparse_csr_tensor(Tensor crow_indices, Tensor col_indices, Tensor values, "
      "int[]? size=None, *, ScalarType? dtype=None) -> Tensor", names=(),
      kernels={"CPU": _csr_kernel, "JAX": _csr_kernel, "CUDA": _csr_kernel,
               "Meta": _csr_meta})


def _as_tensor(v, device=None):
    """``v`` as a tensor on ``device`` (None: where it is, or the default device for
    data); tensors are moved as ``torch.sparse_coo_tensor(..., device=)`` moves them."""
    if isinstance(v, Tensor):
        return v if device is None else v.to(device)
    return asarray(v, device=device)


def sparse_coo_tensor(indices, values, size=None, *, dtype=None, device=None,
                      is_coalesced=None):
    """A sparse COO tensor: ``values[k]`` at ``indices[:, k]`` (``indices`` of shape
    ``(ndim, nnz)``) in a tensor of ``size`` (default: just large enough), on ``device``
    (default: where ``values`` is), as ``torch.sparse_coo_tensor``.  Lists are accepted for
    ``indices`` and ``values``.

    Examples:
        >>> x = md.sparse_coo_tensor([[0, 1], [1, 0]], [3.0, 4.0], (2, 2))
        >>> x.to_dense().tolist()
        [[0.0, 3.0], [4.0, 0.0]]
    """
    return aten.sparse_coo_tensor(_as_tensor(indices, device), _as_tensor(values, device),
                                  size, dtype=dtype, is_coalesced=is_coalesced)


def sparse_csr_tensor(crow_indices, col_indices, values, size=None, *, dtype=None,
                      device=None):
    """A sparse CSR tensor (``torch.sparse_csr_tensor``): row ``i`` holds ``values[k]`` at
    column ``col_indices[k]`` for ``crow_indices[i] <= k < crow_indices[i + 1]``, on
    ``device`` (default: where ``values`` is)."""
    return aten.sparse_csr_tensor(_as_tensor(crow_indices, device),
                                  _as_tensor(col_indices, device),
                                  _as_tensor(values, device), size, dtype=dtype)


# ---------------------------------------------------------------------------------------
# Conversions (Note [Sparse ops in the catalogue])


def _dense_to_sparse(self, layout):
    return self._device.wrap(_backend(self).from_dense(f"to_{_target_name(layout)}",
                                                       self._data, layout))


def _dense_to_hybrid(self, sparse_dim):
    """``x.to_sparse(sparse_dim)``: COO with dense trailing dimensions, or without when
    ``sparse_dim`` is every dimension."""
    backend = _backend(self)
    if sparse_dim == self.ndim:
        return _dense_to_sparse(self, sparse_coo)
    backend.check_dtype("to_sparse", self._data.dtype)
    return _hybrid().from_dense(self, sparse_dim)


def _dense_to_sparse_meta(self, layout):
    raise NotImplementedError(f"to_{_target_name(layout)}: the number of stored elements of "
                              f"the result depends on the data, which meta tensors do not "
                              f"have (Meta)")


def _target_name(layout) -> str:
    return "sparse_csr" if layout is sparse_csr else "sparse"


def _to_dense_composite(self, dtype=None):
    if not self._ks & SPARSE:
        return self if dtype is None else aten.astype(self, dtype)
    return aten._to_dense(self, dtype)


def _to_sparse_composite(self, sparse_dim=None, *, layout=None):
    layout = sparse_coo if layout is None else layout
    if layout is strided:
        return aten.to_dense(self)
    if layout not in (sparse_coo, sparse_csr):
        raise ValueError(f"to_sparse: expected layout md.sparse_coo or md.sparse_csr, got "
                         f"{layout!r}")
    if sparse_dim is not None:
        if layout is sparse_csr:
            raise ValueError("to_sparse: sparse_dim makes a (hybrid) COO tensor; a CSR "
                             "tensor has no dense dimensions")
        if self._ks & SPARSE:
            if sparse_dim != _sparse_dim(self):
                raise NotImplementedError(
                    f"to_sparse: a sparse tensor of sparse_dim {_sparse_dim(self)} to "
                    f"sparse_dim {sparse_dim} (as PyTorch, only the dense tensor converts)")
            return self
        return aten._to_sparse(self, sparse_dim)
    if layout_of(self) is layout:
        return self
    return aten._to_sparse(self, layout)


def _to_sparse_csr_composite(self):
    return _to_sparse_composite(self, layout=sparse_csr)


def _dense_only(name):
    def kernel(self, *args):
        raise TypeError(f"{name}: expected a sparse tensor, got layout md.strided")

    kernel.__name__ = kernel.__qualname__ = f"dense[{name}]"
    return kernel


defop("_to_dense(Tensor self, ScalarType? dtype=None) -> Tensor", names=())
_TO_SPARSE = defop("_to_sparse(Tensor self, Layout layout) -> Tensor", names=(),
                   kernels={"CPU": _dense_to_sparse, "JAX": _dense_to_sparse,
                            "CUDA": _dense_to_sparse, "Meta": _dense_to_sparse_meta})
defop("_to_sparse.sparse_dim(Tensor self, int sparse_dim) -> Tensor", names=(),
      kernels={"CPU": _dense_to_hybrid, "JAX": _dense_to_hybrid, "CUDA": _dense_to_hybrid,
               "Meta": lambda self, sparse_dim: _dense_to_sparse_meta(self, sparse_coo)},
      decl=_TO_SPARSE)
# OpInfo data: the sweep compares a sparse result's dense copy with the reference, and
# gradchecks dense inputs only -- tests/test_sparse.py gradchecks the conversions through
# the constructors instead (differentiable=False here).
_SPARSE_DTYPES = tuple(getattr(dt, n) for n in ("float32", "float64", "int64", "complex128",
                                                 "bool_"))


def _arrays(dtype, rng, shapes):
    """Arrays of ``shapes`` with none, some and all of their elements non-zero."""
    for shape in shapes:
        for density in (0.0, 0.4, 1.0):
            a = (rng.standard_normal(shape) + 2).astype(dtype.numpy)
            a[rng.random(shape) >= density] = 0
            yield a, f"{shape} density {density}"


def _to_sparse_samples(dtype, rng):
    for a, name in _arrays(dtype, rng, [(3, 4), (0, 3), (5,), (2, 3, 2)]):
        yield SampleInput((a,), name=name)
        if a.ndim > 1:  # hybrid: dense trailing dimensions
            yield SampleInput((a, 1), name=name + " sparse_dim 1")


def _to_sparse_csr_samples(dtype, rng):
    for a, name in _arrays(dtype, rng, [(3, 4), (0, 3), (1, 1)]):
        yield SampleInput((a,), name=name)


def _to_dense_samples(dtype, rng):
    for a, name in _arrays(dtype, rng, [(3, 4), (0, 2), (2, 3, 2)]):
        yield SampleInput((SparseInput.of(a),), name=name + " COO")
        if a.ndim == 2:
            yield SampleInput((SparseInput.of(a, "sparse_csr"),), name=name + " CSR")
        yield SampleInput((a,), name=name + " strided")


def _same(a, *args, **kwargs):
    return np.asarray(a)


defop("to_dense(Tensor self, ScalarType? dtype=None) -> Tensor", names=(),
      methods=("to_dense",), composite=_to_dense_composite,
      info=OpInfo(ref=_same, dtypes=_SPARSE_DTYPES, samples=_to_dense_samples,
                  differentiable=False))
defop("to_sparse(Tensor self, int? sparse_dim=None, *, Layout? layout=None) -> Tensor",
      names=(), methods=("to_sparse",), composite=_to_sparse_composite,
      info=OpInfo(ref=_same, dtypes=_SPARSE_DTYPES, samples=_to_sparse_samples,
                  differentiable=False))
defop("to_sparse_csr(Tensor self) -> Tensor", names=(), methods=("to_sparse_csr",),
      composite=_to_sparse_csr_composite,
      info=OpInfo(ref=_same, dtypes=_SPARSE_DTYPES, samples=_to_sparse_csr_samples,
                  differentiable=False))

# Access to the parts of a sparse tensor; on a strided tensor a TypeError (CEA: every
# backend's dense key; a sparse key's own kernel comes first).
for _schema in ("indices(Tensor self) -> Tensor", "values(Tensor self) -> Tensor",
                "_indices(Tensor self) -> Tensor", "_values(Tensor self) -> Tensor",
                "crow_indices(Tensor self) -> Tensor", "col_indices(Tensor self) -> Tensor",
                "coalesce(Tensor self) -> Tensor", "is_coalesced(Tensor self) -> bool",
                "sparse_mask(Tensor self, Tensor mask) -> Tensor"):
    _name = _schema.split("(")[0]
    defop(_schema, names=(), methods=(_name,), explicit=_dense_only(_name))


defop("_sparse_sum.dim(Tensor self, int[1] dim) -> Tensor", names=(),
      explicit=_dense_only("_sparse_sum"))
defop("_sparse_sum_backward(Tensor grad, Tensor self, int[] dim) -> Tensor", names=(),
      explicit=_dense_only("_sparse_sum_backward"))


def _nnz(self) -> int:
    """The number of stored elements of a sparse tensor (PyTorch's ``_nnz()``)."""
    if not self._ks & SPARSE:
        raise TypeError("nnz: expected a sparse tensor, got layout md.strided")
    d = self._data
    return int(d.nse if hasattr(d, "nse") else d.nnz)  # JAX's BCOO/BCSR say nse


Tensor.nnz = property(_nnz)  # type: ignore[attr-defined]


def _sparse_dim(self) -> int:
    """The number of sparse dimensions (PyTorch's ``sparse_dim()``): a hybrid COO tensor's
    indices' rows, every dimension of another sparse tensor, none of a strided one."""
    if not self._ks & SPARSE:
        return 0
    return int(getattr(self._data, "sparse_dim", self.ndim))


def _dense_dim(self) -> int:
    """The number of dense trailing dimensions (PyTorch's ``dense_dim()``): those of a
    hybrid COO tensor's values, every dimension of a strided tensor."""
    return self.ndim - _sparse_dim(self)


Tensor.sparse_dim = _sparse_dim  # type: ignore[attr-defined]
Tensor.dense_dim = _dense_dim  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------------------
# Derivatives (ops/derivatives.py's contract: one entry per positional argument)


def _coalesced(t):
    """``t`` without duplicates: a gradient with ``t``'s duplicate positions would count
    each position once per duplicate."""
    if layout_of(t) is sparse_coo and not aten.is_coalesced(t):
        return aten.coalesce(t)
    return t


def _d_to_dense(g, out, self, dtype=None):
    return (aten.sparse_mask(g, _coalesced(self)),)


def _d_to_sparse(g, out, self, layout):
    if not self._ks & SPARSE:
        return (aten.to_dense(g),)
    if g._ks & SPARSE:
        return (aten.to_sparse(g, layout=layout_of(self)),)
    return (aten.sparse_mask(g, _coalesced(self)),)


def _d_values(g, out, self):
    """The gradient of the values: a sparse tensor with ``self``'s structure."""
    if layout_of(self) is sparse_csr:
        return (aten.sparse_csr_tensor(aten.crow_indices(self), aten.col_indices(self), g,
                                       self.shape),)
    return (aten.sparse_coo_tensor(aten._indices(self), g, self.shape,
                                   is_coalesced=aten.is_coalesced(self)),)


def _d_sparse_coo_tensor(g, out, indices, values, size=None, **kwargs):
    return (None, aten._values(aten.sparse_mask(g, out)))


def _d_sparse_csr_tensor(g, out, crow, col, values, size=None, **kwargs):
    return (None, None, aten._values(aten.sparse_mask(g, out)))


# they read the output (ops/derivatives.py's ``uses_out``)
_d_sparse_coo_tensor.uses_out = _d_sparse_csr_tensor.uses_out = True


def _d_coalesce(g, out, self):
    return (g,)


def _d_sparse_sum(g, out, self, dim):
    return (aten._sparse_sum_backward(g, self, dim), None)


def _d_sparse_mask(g, out, self, mask):
    return (g if self._ks & SPARSE else aten.to_dense(g), None)


register_formulas(
    {"_to_dense": _d_to_dense, "_to_sparse": _d_to_sparse, "values": _d_values,
     "_values": _d_values, "sparse_coo_tensor": _d_sparse_coo_tensor,
     "sparse_csr_tensor": _d_sparse_csr_tensor,
     "coalesce": _d_coalesce, "sparse_mask": _d_sparse_mask, "_sparse_sum": _d_sparse_sum},
    nondifferentiable=frozenset({"indices", "_indices", "crow_indices", "col_indices",
                                 "is_coalesced"}))
