"""Derivative rules of the shape and view ops, joins and splits, tiles and conversions
(``ops/manipulation.py``): each gradient undoes the op's rearrangement of the elements
(``permute`` by the inverse permutation, ``expand`` by a sum back to the input's shape,
``cat`` by narrowing)."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.formulas import sum_to

from ._derivative_helpers import (
    in_dtype_of,
    is_complex,
    reads,
    rule,
)

__all__: list[str] = []


@rule("transpose")
@reads()
def _transpose(g, out, x, d0, d1):
    return aten.transpose(g, d0, d1), None, None


@rule("permute")
@reads()
def _permute(g, out, x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return aten.permute(g, tuple(inv)), None


@rule("matrix_transpose")
@reads()
def _mt(g, out, x):
    return (aten.matrix_transpose(g),)


@rule("t")
@reads()
def _t(g, out, x):
    return (aten.t(g),)


@rule("view", "reshape", "flatten", "squeeze", "unsqueeze")
@reads()
def _reshape(g, out, x, *args, **kwargs):
    return (aten.reshape(g, tuple(x.shape)),) + (None,) * len(args)


@rule("expand", "broadcast_to")
@reads()
def _expand(g, out, x, shape):
    return sum_to(g, x.shape), None


@rule("moveaxis")
@reads()
def _moveaxis(g, out, x, source, destination):
    return aten.moveaxis(g, destination, source), None, None


@rule("flip")
@reads()
def _flip(g, out, x, axis=None):
    return aten.flip(g, axis), None


@rule("roll")
@reads()
def _roll(g, out, x, shift, axis=None):
    neg = -shift if isinstance(shift, int) else tuple(-s for s in shift)
    return aten.roll(g, neg, axis), None, None


@rule("cat")
@reads()
def _cat(g, out, tensors, axis=0):
    if axis is None:
        grads, start = [], 0
        for t in tensors:
            n = t.numel()
            grads.append(in_dtype_of(aten.reshape(aten.narrow(g, 0, start, n),
                                                   tuple(t.shape)), t))
            start += n
        return grads, None
    grads, start = [], 0
    a = axis % tensors[0].ndim
    for t in tensors:
        n = t.shape[a]
        grads.append(in_dtype_of(aten.narrow(g, a, start, n), t))
        start += n
    return grads, None


@rule("stack")
@reads()
def _stack(g, out, tensors, axis=0):
    return [in_dtype_of(gi, t) for gi, t in
            zip(aten.unbind(g, axis % (tensors[0].ndim + 1)), tensors)], None


# Note [Gradients of the pieces]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``split``, ``chunk`` and ``unbind`` save nothing (PyTorch's SplitBackward0 keeps the sizes
# and the dim): a piece that got no gradient contributes zeros of its shape, which the
# formula works out from ``x``'s shape and the op's arguments.  Saving the pieces (to make
# ``zeros_like`` of them) cost an alias and a version per piece on every recorded call.


def _piece_lengths(n, size):
    """The lengths of the pieces of ``size`` of a dimension of ``n`` (the last shorter)."""
    return [min(size, n - b) for b in range(0, n, size)] if n else [0]


def _pieces_grad(g, x, lengths, a):
    """``x``'s gradient from its pieces' (``lengths`` along axis ``a``): Note [Gradients of
    the pieces]."""
    shape = list(x.shape)
    grads = []
    for gi, n in zip(g, lengths):
        if gi is None:
            shape[a] = n
            gi = aten.zeros(tuple(shape), dtype=x.dtype, device=x.device)
        grads.append(gi)
    return aten.cat(grads, a)


@rule("split")
@reads()
def _split(g, out, x, sizes, axis=0):
    a = axis % x.ndim
    n = x.shape[a]
    lengths = _piece_lengths(n, int(sizes)) if isinstance(sizes, int) else list(sizes)
    return _pieces_grad(g, x, lengths, a), None, None


@rule("chunk")
@reads()
def _chunk(g, out, x, chunks, axis=0):
    a = axis % x.ndim
    n = x.shape[a]
    lengths = _piece_lengths(n, -(-n // chunks)) if n else [0] * chunks
    return _pieces_grad(g, x, lengths, a), None, None


@rule("unbind")
@reads()
def _unbind(g, out, x, axis=0):
    a = axis % x.ndim
    shape = tuple(x.shape[:a]) + tuple(x.shape[a + 1:])
    grads = [gi if gi is not None else aten.zeros(shape, dtype=x.dtype, device=x.device)
             for gi in g]
    return aten.stack(grads, a), None


@rule("astype")
@reads()
def _astype(g, out, x, dtype, *, copy=True, device=None):
    if is_complex(g) and not is_complex(x):  # a real input gets the real part
        g = aten.real(g)
    return aten.astype(g, x.dtype), None


@rule("copy")
@reads()
def _copy(g, out, self, src):
    gs = sum_to(g, src.shape)
    return None, gs if gs.dtype == src.dtype else aten.astype(gs, src.dtype)


def _tile_grad(g, x, reps):
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    inter = []
    for r, s in zip(reps, shape):
        inter += [r, s]
    g = aten.reshape(g, tuple(inter))
    g = aten.sum(g, tuple(range(0, 2 * n, 2)))
    return aten.reshape(g, tuple(x.shape))


@rule("tile")
def _tile(g, out, x, reps):
    return _tile_grad(g, x, reps), None


@rule("repeat_tensor")
def _repeat_tensor(g, out, x, repeats):
    return _tile_grad(g, x, repeats), None


@rule("to_device_copy")
@reads()
def _to_device(g, out, x, device):
    return aten.to_device_copy(g, x.device), None


@rule("meshgrid")
@reads()  # the inputs' shapes only (PyTorch's meshgrid is views: it saves nothing)
def _meshgrid(g, out, tensors, indexing="xy"):
    grads = []
    n = len(tensors)
    for j, gj in enumerate(g):
        if gj is None:
            grads.append(None)
            continue
        axis = j
        if indexing == "xy" and n >= 2 and j < 2:
            axis = 1 - j
        others = tuple(a for a in range(gj.ndim) if a != axis)
        grads.append(aten.reshape(aten.sum(gj, others) if others else gj,
                                  tuple(tensors[j].shape)))
    return grads, None
