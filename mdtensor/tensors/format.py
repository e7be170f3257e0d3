"""PyTorch-style tensor repr: ``tensor([1., 2.], dtype=md.float64)``.

Note [Lazy reprs]
~~~~~~~~~~~~~~~~~
A tensor of a lazy backend (Dask) has no values until they are computed, and computing a
large one in a ``repr`` (a debugger, a notebook cell) could take minutes.  Its repr shows
the values only up to ``LAZY_REPR_LIMIT`` elements (what NumPy prints without eliding),
and otherwise ``...`` with the size and dtype, as a meta tensor's; a chunked backend's
tensors also show their largest chunk per dimension (``chunksize=``).  A small result
still computes its graph, however large the inputs behind it (``repr(loss)``).
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes
from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import ExcludeGuard
from mdtensor.tensors.layout import SPARSE, layout_of, sparse_csr

__all__ = ["tensor_repr"]

# The dtypes PyTorch's repr leaves implicit (the defaults of float and int literals).
_IMPLICIT = (_dtypes.float32, _dtypes.int64, _dtypes.bool_)

#: Note [Lazy reprs]
LAZY_REPR_LIMIT = 1000


def tensor_repr(t) -> str:
    if t._ks & SPARSE:
        return _sparse_repr(t)
    dtype = t.dtype
    extras = []
    if t._device.type != "cpu":
        extras.append(f"device='{t._device}'")
    caps = t._device.backend.capabilities
    lazy = t._device.type == "meta" or (caps.lazy and t.numel() > LAZY_REPR_LIMIT)
    if lazy:
        extras.insert(0, f"size={t.shape}")
        body = "..."
    else:
        arr = np.asarray(t._device.backend.to_numpy(t._data))
        if arr.size == 0:
            extras.insert(0, f"size={tuple(arr.shape)}")
            body = "[]"
        else:
            body = np.array2string(arr, separator=", ", prefix="tensor(",
                                   threshold=1000, edgeitems=3, precision=4,
                                   suppress_small=False, floatmode="maxprec")
    if caps.chunked:
        extras.append(f"chunksize={_chunksize(t.chunks)}")
    if dtype not in _IMPLICIT or lazy or t.numel() == 0:
        extras.append(f"dtype=md.{dtype.name}")
    _autograd_extras(t, extras)
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def _autograd_extras(t, extras) -> None:
    ag = t._ag
    if ag is not None:
        grad_fn = t.grad_fn  # a stale view's remade history (Note [Stale views])
        if grad_fn is not None:
            extras.append(f"grad_fn=<{grad_fn.name()}>")
        elif ag.requires_grad:
            extras.append("requires_grad=True")


def _sparse_repr(t) -> str:
    """PyTorch's: the index and value tensors, then size, nnz and layout."""
    layout = layout_of(t)
    with ExcludeGuard(AUTOGRAD_FUNCTIONALITY):  # the parts, not a record of reading them
        if layout is sparse_csr:
            parts = [("crow_indices", aten.crow_indices(t)), ("col_indices",
                                                            aten.col_indices(t))]
        else:  # as stored, coalesced or not (PyTorch shows _indices() and _values())
            parts = [("indices", aten._indices(t))]
        parts.append(("values", aten._values(t)))
    pad = " " * len("tensor(")
    lines = []
    dtype_text = f", dtype=md.{t.dtype.name})"
    for name, part in parts:
        text = tensor_repr(part)
        if name == "values" and text.endswith(dtype_text):  # shown once, below
            text = text[:-len(dtype_text)] + ")"
        lines.append(name + "=" + text.replace("\n", "\n" + " " * (len(name) + 1) + pad))
    extras = [f"size={t.shape}", f"nnz={t.nnz}"]
    if t.dtype not in _IMPLICIT:
        extras.append(f"dtype=md.{t.dtype.name}")
    extras.append(f"layout={layout!r}")
    if t._device.type != "cpu":
        extras.append(f"device='{t._device}'")
    _autograd_extras(t, extras)
    return "tensor(" + (",\n" + pad).join(lines + [", ".join(extras)]) + ")"


def _chunksize(chunks) -> tuple:
    """The largest chunk along each dimension (Dask's ``chunksize``)."""
    return tuple(max(c) if c else 0 for c in chunks)
