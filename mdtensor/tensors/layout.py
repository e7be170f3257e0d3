"""Layouts: ``md.strided``, ``md.sparse_coo``, ``md.sparse_csr`` (docs/SPARSE.md).

Note [Layouts in the key set]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A tensor's layout is the second axis of its key set (DESIGN.md section 6): a strided
(dense) tensor carries its backend's Dense key (``CPU``), a sparse one the same backend's
Sparse key (``SparseCPU``) instead, so one table lookup picks sparse kernels, and
Autograd, ADInplaceOrView and the Python modes above it run unchanged.  The layout is not
stored: a tensor is sparse when its key set has the Sparse functionality, and which sparse
layout it has is the type of its array, which the sparse kernels' module records here
when it loads (``register_sparse_array``).  ``Device.wrap`` gives an array of such a type
the Sparse key on its slow path (the one a NumPy scalar takes), so a strided tensor's
creation costs nothing more, and every kernel that wraps a result -- the autograd
engine's saved outputs included -- makes a sparse tensor of a sparse array.
"""

from __future__ import annotations

from mdtensor.dispatch.keys import DispatchKey

__all__ = ["Layout", "layout_of", "register_sparse_array", "sparse_coo", "sparse_csr",
           "sparse_keys", "strided"]

DENSE = DispatchKey.Dense.value
SPARSE = DispatchKey.Sparse.value
_FUNCTIONALIZE = DispatchKey.Functionalize.value


class Layout:
    """How a tensor's elements are stored: ``md.strided`` (dense), ``md.sparse_coo``
    (indices and values of the non-zero elements) or ``md.sparse_csr`` (compressed rows).

    Examples:
        >>> md.asarray([[0.0, 1.0]]).layout
        md.strided
    """

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"md.{self.name}"

    def __reduce__(self):
        return _by_name, (self.name,)


strided = Layout("strided")
sparse_coo = Layout("sparse_coo")
sparse_csr = Layout("sparse_csr")
_LAYOUTS = {lay.name: lay for lay in (strided, sparse_coo, sparse_csr)}

#: sparse array class -> its layout (Note [Layouts in the key set])
SPARSE_ARRAYS: dict[type, Layout] = {}


def _by_name(name: str) -> Layout:
    return _LAYOUTS[name]


def register_sparse_array(cls: type, layout: Layout) -> None:
    """Tensors wrapping arrays of class ``cls`` have ``layout`` and the Sparse key."""
    SPARSE_ARRAYS[cls] = layout


def sparse_keys(ks: int) -> int:
    """The key set of a sparse tensor on the device whose tensors have key set ``ks``:
    Sparse for Dense, and no Functionalize (Note [Immutable backends] in
    mdtensor/tensors/device.py): the sparse kernels make no views and mutate nothing, so a
    sparse tensor on JAX dispatches as one on the CPU."""
    return (ks & ~(DENSE | _FUNCTIONALIZE)) | SPARSE


def layout_of(t) -> Layout:
    """The layout of Tensor ``t``."""
    if not t._ks & SPARSE:
        return strided
    return SPARSE_ARRAYS[type(t._data)]
