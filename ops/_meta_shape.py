"""Meta functions of the shape-manipulation and indexing chapters.

Like ``_meta_fns``: each takes the op's arguments (real, meta or fake tensors) and returns
``(shape, dtype)`` (a list of them for ``Tensor[]`` returns), raising the errors the real
kernel raises.  Data-dependent shapes (``repeat_interleave`` with a tensor of repeats) raise
NotImplementedError naming the op, as the Meta device cannot know them.
"""

from __future__ import annotations

import numpy as np

from mdtensor._dtypes import result_type

from . import _meta_fns as mf

__all__ = [
    "broadcast_arrays",
    "diff",
    "index_select",
    "repeat_interleave",
    "repeat_tensor",
    "take",
    "take_along_axis",
    "tile",
]


def _ints(v) -> tuple[int, ...]:
    return (int(v),) if isinstance(v, (int, np.integer)) else tuple(int(s) for s in v)


def _int_index(op: str, index) -> None:
    if index.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected an integer index tensor, got {index.dtype.name}")


def tile(x, reps):
    """Array API ``tile``: ``reps`` shorter than ``x.ndim`` is padded with leading ones."""
    reps = _ints(reps)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: repetitions must be non-negative, got {reps}")
    n = max(len(reps), x.ndim)
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    reps = (1,) * (n - len(reps)) + reps
    return tuple(s * r for s, r in zip(shape, reps)), x.dtype


def repeat_tensor(x, repeats):
    """``Tensor.repeat`` (PyTorch): like ``tile`` but ``repeats`` may not be shorter."""
    reps = _ints(repeats)
    if len(reps) < x.ndim:
        raise ValueError(f"repeat: number of repeat dims ({len(reps)}) can not be smaller than "
                         f"number of dimensions of tensor ({x.ndim})")
    return tile(x, reps)


def repeat_interleave(x, repeats, axis=None):
    """Array API ``repeat``: shape known for integer repeats only."""
    if hasattr(repeats, "shape"):
        raise NotImplementedError(
            "repeat_interleave: with a tensor of repeats the output shape is data-dependent; "
            "meta and fake tensors cannot compute it")
    r = int(repeats)
    if r < 0:
        raise ValueError(f"repeat_interleave: repeats must be non-negative, got {r}")
    if axis is None:
        return (x.numel() * r if hasattr(x, "numel") else int(np.prod(x.shape)) * r,), x.dtype
    a = mf.normalize_axis("repeat_interleave", axis, x.ndim)
    shape = list(x.shape)
    shape[a] *= r
    return tuple(shape), x.dtype


def broadcast_arrays(tensors):
    shape = mf.broadcast_shapes("broadcast_arrays", *(tuple(t.shape) for t in tensors))
    return [(shape, t.dtype) for t in tensors]


def take(x, indices, axis=None):
    _int_index("take", indices)
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for a tensor of dimension {x.ndim}")
        axis = 0
    a = mf.normalize_axis("take", axis, x.ndim)
    if indices.ndim != 1:
        raise ValueError(f"take: expected a 1-D index tensor, got {indices.ndim}-D")
    shape = list(x.shape)
    shape[a] = indices.shape[0]
    return tuple(shape), x.dtype


def index_select(x, dim, index):
    _int_index("index_select", index)
    if index.ndim > 1:
        raise ValueError(f"index_select: index must be 0-D or 1-D, got {index.ndim}-D")
    a = mf.normalize_axis("index_select", dim, x.ndim)
    if not x.ndim and int(np.prod(index.shape)) != 1:
        raise IndexError(f"index_select: the index of a 0-d tensor has one element, got "
                         f"{int(np.prod(index.shape))}")
    shape = list(x.shape) or [1]
    shape[a] = int(np.prod(index.shape))
    return tuple(shape[:x.ndim]) if x.ndim else (), x.dtype


def take_along_axis(x, indices, axis=-1):
    _int_index("take_along_axis", indices)
    if indices.ndim != x.ndim:
        raise ValueError(f"take_along_axis: indices must have the tensor's number of "
                         f"dimensions ({x.ndim}), got {indices.ndim}")
    a = mf.normalize_axis("take_along_axis", axis, x.ndim)
    xs = list(x.shape)
    xs[a] = 1
    ins = list(indices.shape)
    ins[a] = 1
    shape = list(mf.broadcast_shapes("take_along_axis", tuple(xs), tuple(ins)))
    shape[a] = indices.shape[a]
    return tuple(shape), x.dtype


def diff(x, axis=-1, n=1, *, prepend=None, append=None):
    if n < 0:
        raise ValueError(f"diff: order n must be non-negative, got {n}")
    if x.ndim == 0:
        raise ValueError("diff: expected a tensor of at least one dimension")
    a = mf.normalize_axis("diff", axis, x.ndim)
    shape = list(x.shape)
    parts = [x] + [t for t in (prepend, append) if t is not None]
    for t in parts[1:]:
        tshape = list(t.shape) if t.ndim else list(shape[:a]) + [1] + list(shape[a + 1:])
        if len(tshape) != x.ndim or any(tshape[i] != shape[i]
                                        for i in range(x.ndim) if i != a):
            raise ValueError(f"diff: prepend/append of shape {tuple(t.shape)} does not match "
                             f"the tensor's shape {tuple(x.shape)} except along axis {a}")
        shape[a] += tshape[a]
    if n == 0:  # no difference taken: x itself, without prepend/append (NumPy, PyTorch)
        return tuple(x.shape), x.dtype
    shape[a] = max(shape[a] - n, 0)
    return tuple(shape), result_type(*parts)
