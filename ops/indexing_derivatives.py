"""Derivative rules of the selections and gathers (``ops/indexing.py``, ``narrow``,
``index_select``, ``repeat_interleave``): the gradient is written into zeros of the input's
shape (Note [Writing a gradient into zeros]), repeated indices accumulating (Note [Gather
backward])."""

from __future__ import annotations

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY as _AUTOGRAD
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.layers.autograd.formulas import sum_to
from mdtensor.tensors.tensor import Tensor

from ._derivative_helpers import (
    grad_for,
    reads,
    rule,
)

_tls_get = dispatch_tls.get

__all__: list[str] = []


# Note [Writing a gradient into zeros]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The backward of a selection (``x[key]``, ``narrow``) writes ``g`` into zeros of ``x``'s
# shape: in place into fresh zeros for a plain ``g`` (no copy), with the functional
# ``index_put`` for a wrapper subclass -- a batched cotangent under ``vmap`` cannot be
# written into unbatched zeros in place (mdtensor/layers/vmap.py), the functional op batches
# the zeros instead.
def _into_zeros(shape, key, g):
    z = aten.zeros(shape, dtype=g.dtype, device=g.device)
    if type(g) is not Tensor:
        return aten.index_put(z, key, g)
    aten.index_put_(z, key, g)
    return z


def _scatter_into_zeros(x, key, g, basic):
    if basic:
        return _into_zeros(tuple(x.shape), key, g)
    # Repeated indices accumulate (np.add.at semantics), as PyTorch's index backward.
    return _scatter_add(tuple(x.shape), key, g)


# Note [Gather backward]
# ~~~~~~~~~~~~~~~~~~~~~~
# The gradient of a gather (``x[index]``, ``take``, ``index_select``, ``take_along_axis``,
# ``repeat_interleave``) adds ``g`` at the gathered positions into zeros, repeated indices
# accumulating -- ``np.add.at``, which no Array API function does, so ``_index_add`` runs
# it on raw (host) arrays and records nothing.  That was invisible to a Hessian through
# the gather's *input* (the scatter is constant in ``x``) but lost every derivative
# through ``g``: ``jvp`` by double vjp and Hessians whose first gradient flows through a
# gather (``sin(x[idx])``) came out zero there.  Under ``create_graph`` the scatter is
# therefore a step of its own, ``ScatterAdd``, linear in ``g``: its backward is the gather
# ``gg[key]`` again, a recorded op, so the chain differentiates to any order (PyTorch's
# ``index_put(..., accumulate=True)`` has that derivative).


def _scatter_add(shape, key, g):
    """``zeros(shape)`` with ``g`` added at ``key``, repeated indices accumulating;
    differentiable in ``g`` under ``create_graph`` (Note [Gather backward])."""
    if type(g) is not Tensor:  # differentiable as it is (recorded ops)
        return _index_add_dispatched(aten.zeros(shape, dtype=g.dtype, device=g.device),
                                     key, g)
    if g.requires_grad and _tls_get()[1] & _AUTOGRAD:
        return _scatter_add_function().apply(g, shape, key)
    return _index_add(aten.zeros(shape, dtype=g.dtype, device=g.device), key, g)


_ScatterAdd = None


def _scatter_add_function():
    global _ScatterAdd
    if _ScatterAdd is None:
        from mdtensor.autograd import Function

        class ScatterAdd(Function):
            @staticmethod
            def forward(ctx, g, shape, key):
                ctx.key = key
                return _index_add(aten.zeros(shape, dtype=g.dtype, device=g.device), key, g)

            @staticmethod
            def backward(ctx, gg):
                return gg[ctx.key], None, None

        _ScatterAdd = ScatterAdd
    return _ScatterAdd


def _index_add_dispatched(z, key, g):
    """``_index_add`` by dispatched ops, for a ``g`` whose array a kernel may not read
    (a batched cotangent: Note [Writing a gradient into zeros]): the values sorted by the
    flat position they go to, summed per position as differences of a running sum."""
    n = z.numel()
    flat = aten.reshape(aten.arange(n, device=z.device).reshape(tuple(z.shape))[key], (-1,))
    order = aten.argsort(flat, stable=True)
    vals = aten.reshape(g, (-1,))[order]
    running = aten.cumulative_sum(vals, include_initial=True)
    bounds = aten.searchsorted(flat[order], aten.arange(n + 1, device=z.device))
    return z + aten.reshape(running[bounds[1:]] - running[bounds[:-1]], tuple(z.shape))


def _index_add(z, key, g):
    """``z`` with ``g`` scatter-added at ``key`` (a new tensor off the CPU backend)."""
    import numpy as np
    from mdtensor.ops.indexing import _raw

    if type(g) is not Tensor:  # a wrapper (a batched cotangent): dispatched ops only
        return _index_add_dispatched(z, key, g)
    raw = _raw(key)
    if z.device.type == "cpu":
        np.add.at(z._data, raw, g._data)
        return z
    # The Array API has no scatter-add, and index + index_put_ would lose repeated indices
    # (the last write wins), so other backends accumulate on the host.
    b = z.device.backend
    parts = raw if isinstance(raw, tuple) else (raw,)
    host_key = tuple(b.to_numpy(k) if isinstance(k, b.array_type) else k for k in parts)
    acc = np.array(b.to_numpy(z._data), copy=True)
    np.add.at(acc, host_key, b.to_numpy(g._data))
    return z._device.wrap(b.asarray(acc, index=z._device.index))


@rule("basic_index")
@reads()
def _basic_index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, True), None


@rule("index")
def _index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, False), None


@rule("narrow")
@reads()
def _narrow(g, out, x, dim, start, length):
    d = dim % x.ndim
    start = start % x.shape[d] if start < 0 else start
    key = (slice(None),) * d + (slice(start, start + length),)
    return _into_zeros(tuple(x.shape), key, g), None, None, None


@rule("where")
@reads(0)
def _where(g, out, cond, a, b):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    return (None,
            grad_for(aten.where(cond, g, zero), a) if hasattr(a, "_ks") else None,
            grad_for(aten.where(cond, zero, g), b) if hasattr(b, "_ks") else None)


@rule("masked_fill")
@reads(1)
def _masked_fill(g, out, x, mask, value):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    gv = aten.sum(aten.where(mask, g, zero)) if hasattr(value, "_ks") else None
    return aten.where(mask, zero, g), None, gv


@rule("index_put")
def _index_put(g, out, x, key, value):
    """``x[key] = value`` (in place): the overwritten part of x gets no gradient."""
    gx = aten.clone(g)
    aten.index_put_(gx, key, 0.0)
    gv = None
    if hasattr(value, "_ks"):
        sel = aten.basic_index(g, key) if _basic(key) else aten.index(g, key)
        # the forward broadcast the value without its leading 1s (a (1,) value into x[0])
        shape = tuple(value.shape)
        while shape and shape[0] == 1 and len(shape) > len(sel.shape):
            shape = shape[1:]
        gv = sum_to(sel, shape)
        if shape != tuple(value.shape):
            gv = aten.reshape(gv, tuple(value.shape))
    return gx, None, gv


def _basic(key):
    from mdtensor.ops.indexing import is_basic_key

    return is_basic_key(key)


@rule("take_along_axis")
@reads(1)  # the indices; of x only its shape
def _take_along_axis(g, out, x, indices, axis=-1):
    return _scatter_add_along(g, x, indices, axis), None, None


@rule("gather")
@reads(2)  # the indices; of x only its shape
def _gather(g, out, x, dim, index, *, sparse_grad=False):
    return _scatter_add_along(g, x, index, dim), None, None


def _scatter_add_along(g, x, indices, axis):
    """``zeros(x.shape)`` with ``g`` added at ``indices`` along ``axis`` (the indices cover
    ``g``'s shape, at most ``x``'s in the other dimensions): the gradient of
    take_along_axis and gather."""
    import numpy as np

    shape = tuple(x.shape)
    if not shape:  # a 0-d tensor's dimension 0 is its element
        return aten.sum(g)
    if not g.ndim:
        g = aten.reshape(g, (1,))
    gshape = tuple(g.shape)
    a = axis % len(shape)
    # take_along_axis broadcasts the tensor and the indices against each other (but along
    # ``axis``): scatter into the tensor broadcast to g's shape, then sum back to x's.
    # np.put_along_axis would drop repeated indices; a scatter-add at the positions (Note
    # [Gather backward]) accumulates them.
    wide = tuple(n if i == a else max(n, m) for i, (n, m) in enumerate(zip(shape, gshape)))
    idx_data = np.asarray(indices.device.backend.to_numpy(indices._data))
    idx_data = np.broadcast_to(idx_data.reshape(idx_data.shape or (1,)), gshape)
    idx = list(np.ix_(*[np.arange(s) for s in gshape]))
    idx[a] = idx_data
    acc = _scatter_add(wide, tuple(idx), g)
    ones = tuple(i for i, (n, w) in enumerate(zip(shape, wide)) if n != w)
    return aten.sum(acc, ones, True) if ones else acc


@rule("take")
@reads(1)  # the indices; of x only its shape
def _take(g, out, x, indices, axis=None):
    a = 0 if axis is None else axis % x.ndim
    key = (slice(None),) * a + (indices,)
    return _scatter_into_zeros(x, key, g, False), None


@rule("index_select")
@reads(2)  # the indices; of x only its shape
def _index_select(g, out, x, dim, index):
    if not x.ndim:  # one element selected (Note [Axes of 0-d tensors])
        return g, None, None
    d = dim % x.ndim
    if not index.ndim:  # a 0-d index selects like a 1-element one
        index = aten.reshape(index, (1,))
    return _scatter_add(tuple(x.shape), (slice(None),) * d + (index,), g), None, None


@rule("repeat_interleave")
@reads(1)  # a Tensor of repeats; of x only its shape
def _repeat_interleave(g, out, x, repeats, axis=None):
    import numpy as np

    src = x if axis is not None else aten.reshape(x, (-1,))
    a = 0 if axis is None else axis % x.ndim
    n = src.shape[a]
    reps = repeats.tolist() if hasattr(repeats, "_ks") else repeats
    owner = np.repeat(np.arange(n), reps)  # the source index of every output element
    gx = _scatter_add(tuple(src.shape), (slice(None),) * a + (owner,), g)
    return aten.reshape(gx, tuple(x.shape)) if axis is None else gx, None, None
