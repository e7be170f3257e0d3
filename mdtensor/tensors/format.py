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

__all__ = ["tensor_repr"]

# The dtypes PyTorch's repr leaves implicit (the defaults of float and int literals).
_IMPLICIT = (_dtypes.float32, _dtypes.int64, _dtypes.bool_)

#: Note [Lazy reprs]
LAZY_REPR_LIMIT = 1000


def tensor_repr(t) -> str:
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
    ag = t._ag
    if ag is not None:
        grad_fn = t.grad_fn  # a stale view's remade history (Note [Stale views])
        if grad_fn is not None:
            extras.append(f"grad_fn=<{grad_fn.name()}>")
        elif ag.requires_grad:
            extras.append("requires_grad=True")
    return "tensor(" + body + "".join(", " + e for e in extras) + ")"


def _chunksize(chunks) -> tuple:
    """The largest chunk along each dimension (Dask's ``chunksize``)."""
    return tuple(max(c) if c else 0 for c in chunks)
