"""Max pooling: ``max_pool2d_with_indices`` and its backward op.

Note [Max pooling kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``md.nn.functional.max_pool2d`` is PyTorch's pair of kernels rather than a composition
(``im2col`` then ``max.dim`` was 3-4x PyTorch's time: ``argmax`` over a short window axis
costs more than PyTorch's whole forward and backward).  The forward walks the ``kh * kw``
window positions, each a strided slice of the ``-inf``-padded input, keeping the running
maximum and its window position with PyTorch's rule -- a value replaces the maximum when it
is greater *or NaN* (so NaN wins, the last NaN of a window) -- and returns the maximum and
its flat index ``h * W + w`` in the input plane.  The backward adds each gradient to the
pixel its index names (``col2im`` of the one-hot window positions in the generic kernel;
one ``bincount`` on NumPy), and its own derivative is the gather of the incoming gradient at
the same indices (ops/pooling_derivatives.py), so every order differentiates.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np

from ._cpu_kernels import register_arrays_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._meta_fns import ArraySpec
from ._samples import make_array
from .convolution import col2im_array, int_pair, pad_array, spec_of
from .elementwise import FLOATS

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _params(op, x, kernel_size, stride, padding, dilation, ceil_mode):
    """Checked ``(k, s, p, d, (H, W), (Ho, Wo), extra)``; ``extra`` is the padding
    ``ceil_mode`` adds after the bottom and right edges."""
    if x.dtype.kind not in "iuf":
        raise TypeError(f"{op}: expected a real (floating-point or integer) input, got "
                        f"{x.dtype.name}")
    if x.ndim not in (3, 4) or 0 in tuple(x.shape[-3:]):
        raise ValueError(f"{op}: expected 3-D (C, H, W) or 4-D (N, C, H, W) input with "
                         f"non-zero C, H and W, got shape {tuple(x.shape)}")
    k = int_pair(op, "kernel_size", kernel_size, 1)
    s = k if not stride else int_pair(op, "stride", stride, 1)
    p = int_pair(op, "padding", padding, 0)
    d = int_pair(op, "dilation", dilation, 1)
    return (k, s, p, d) + _geometry(op, k, s, p, d, tuple(x.shape), bool(ceil_mode))


@functools.lru_cache(maxsize=64)
def _geometry(op, k, s, p, d, shape, ceil_mode) -> tuple:
    """``((H, W), (Ho, Wo), extra)`` of checked window parameters, checked against the
    input's ``shape``; kept per geometry (the arithmetic was a fifth of a small pooling's
    Python time)."""
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:  # PyTorch's check of this op (not dilated)
        raise ValueError(f"{op}: pad should be smaller than or equal to half of kernel size, "
                         f"but got padW = {p[1]}, padH = {p[0]}, kW = {k[1]}, kH = {k[0]}")
    size = shape[-2:]
    out, extra = [], []
    for i in (0, 1):
        span, full = d[i] * (k[i] - 1) + 1, size[i] + 2 * p[i]
        n = (full - span + (s[i] - 1 if ceil_mode else 0)) // s[i] + 1
        if ceil_mode and (n - 1) * s[i] >= size[i] + p[i]:
            n -= 1
        out.append(n)
        extra.append(max(0, (n - 1) * s[i] + span - full))
    if out[0] < 1 or out[1] < 1:
        raise ValueError(f"{op}: given input of size {list(shape)}, the calculated output "
                         f"size {out} is too small")
    return size, tuple(out), tuple(extra)


def _forward_meta(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    from mdtensor import _dtypes

    *_, out, _ = _params("max_pool2d", x, kernel_size, stride, padding, dilation, ceil_mode)
    shape = tuple(x.shape[:-2]) + out
    return [(shape, x.dtype), (shape, _dtypes.int64)]


def _window_slices(x, k, s, d, out):
    """The ``kh * kw`` strided slices of (padded) ``x``, one per window position."""
    return [x[..., i * d[0]:i * d[0] + s[0] * (out[0] - 1) + 1:s[0],
              j * d[1]:j * d[1] + s[1] * (out[1] - 1) + 1:s[1]]
            for i, j in itertools.product(range(k[0]), range(k[1]))]


def _first_valid(start: int, dilation: int) -> int:
    """PyTorch's window start: stepped by the dilation past the padding."""
    return start + (-start + dilation - 1) // dilation * dilation if start < 0 else start


def _flat_index(xp, where, k, s, p, d, size, out):
    """The flat input-plane index ``h * W + w`` of window position ``where``: the window's
    corner plus the position's offset (a table of ``kh * kw`` entries).  A window whose
    maximum was never replaced (``where == -1``: only padding, or only the dtype's lowest
    value) gets PyTorch's initial index, its first position inside the input."""
    dev = _device(where)
    rows = xp.reshape(xp.arange(out[0], dtype=xp.int64, device=dev), (-1, 1))
    cols = xp.arange(out[1], dtype=xp.int64, device=dev)
    corner = (rows * s[0] - p[0]) * size[1] + (cols * s[1] - p[1])
    offsets = xp.asarray([i * d[0] * size[1] + j * d[1] for i, j in
                          itertools.product(range(k[0]), range(k[1]))], dtype=xp.int64,
                         device=dev)
    unset = where < 0
    if xp is np and not unset.any():
        return corner + offsets.take(where)
    first = xp.asarray([[_first_valid(y * s[0] - p[0], d[0]) * size[1]
                         + _first_valid(z * s[1] - p[1], d[1]) for z in range(out[1])]
                        for y in range(out[0])], dtype=xp.int64, device=dev)
    picked = xp.reshape(xp.take(offsets, xp.reshape(xp.where(unset, 0, where), (-1,)), axis=0),
                        where.shape)
    return xp.where(unset, first, corner + picked)


def _device(a):
    from array_api_compat import device

    return device(a)


def _lowest(xp, dtype):
    return -math.inf if xp.isdtype(dtype, "real floating") else xp.iinfo(dtype).min


def _windows_of(xp, x, kernel_size, stride, padding, dilation, ceil_mode):
    """The checked parameters, the dtype's lowest value and the window slices of ``x``
    padded with it."""
    params = _params("max_pool2d", ArraySpec(x), kernel_size, stride, padding, dilation,
                     ceil_mode)
    k, s, p, d, _, out, extra = params
    lowest = _lowest(xp, x.dtype)
    padded = pad_array(xp, x, (p[0], p[0] + extra[0], p[1], p[1] + extra[1]), lowest)
    return params, lowest, _window_slices(padded, k, s, d, out)


def _max_pool(xp, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    params, lowest, windows = _windows_of(xp, x, kernel_size, stride, padding, dilation,
                                          ceil_mode)
    best = xp.full(windows[0].shape, lowest, dtype=x.dtype, device=_device(x))
    where = xp.full(best.shape, -1, dtype=xp.int64, device=_device(x))
    for n, v in enumerate(windows):
        take = (v > best) | xp.isnan(v)  # PyTorch's rule: greater, or NaN
        best = xp.where(take, v, best)
        where = xp.where(take, xp.asarray(n, dtype=xp.int64, device=_device(x)), where)
    return best, _flat_index(xp, where, *params[:6])


# Note [Max pooling as one argmax]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On NumPy the windows are a strided view of the (padded) planes, ``(planes, Ho, Wo, kh,
# kw)``, copied once to ``(windows, kh * kw)`` rows; one ``argmax`` along the rows gives the
# window positions of the maxima and the values there the maxima (a ``max`` reduction of the
# rows cost 2 us more on 216 values), and a table of the ``kh * kw`` plane
# offsets plus each window's corner gives the flat index (a scan of the window positions
# costs one pass of several ufuncs per position); up to 4096 window values the sum of the
# two is one table, kept per geometry, and the indices one ``take`` from it at the maxima's
# positions (10K of the 99K instructions of a 2x2 pooling of 216 values went to the offsets'
# ``take``, its reshape and the corners' sum).  ``argmax`` keeps the first maximum of
# the row-major scan, PyTorch's rule, except where a window holds a NaN (PyTorch takes its
# last NaN) or, with padding, where a window's maximum is the dtype's lowest value (PyTorch
# names its first position inside the input, ``argmax`` may name the padding).  Those
# inputs -- a NaN maximum; with padding, a maximum that is the lowest value -- take
# PyTorch's scan.  ``MaxPool2d(2)`` of planes of even size keeps a path of its own (Note [2x2
# max pooling on NumPy]): on a training batch's planes the rows of four values make the
# argmax's inner loop run once per window, 1.6x the CNN epoch of examples/train_cnn.py.
# Up to 1024 elements the argmax costs less than the 2x2 path's dozen more NumPy calls
# (216 elements: 10.7 us against 18.1; 2048: 36 against 22).


def _np_max_pool(xp, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k, s, p, d, size, out, extra = _params("max_pool2d", spec_of(x, "iuf"), kernel_size,
                                           stride, padding, dilation, ceil_mode)
    if x.size > 1024 and k == s == (2, 2) and p == (0, 0) and d == (1, 1) \
            and size == (2 * out[0], 2 * out[1]):
        pooled = _np_max_pool_2x2(x, out)  # Note [2x2 max pooling on NumPy]
        if pooled is not None:
            return pooled
    planes = np.ascontiguousarray(x).reshape((-1,) + size)
    padded = p != (0, 0) or extra != (0, 0)
    if padded:
        lowest = _lowest(np, x.dtype)
        canvas = np.full((planes.shape[0], size[0] + 2 * p[0] + extra[0],
                          size[1] + 2 * p[1] + extra[1]), lowest, x.dtype)
        canvas[:, p[0]:p[0] + size[0], p[1]:p[1] + size[1]] = planes
        planes = canvas
    n, hp, wp = planes.shape
    b = planes.itemsize
    windows = np.ndarray((n, out[0], out[1], k[0], k[1]), x.dtype, planes, 0,
                         (hp * wp * b, s[0] * wp * b, s[1] * b, d[0] * wp * b, d[1] * b))
    rows = windows.reshape((-1, k[0] * k[1]))  # the one copy
    where = rows.argmax(axis=1)  # a NaN is the maximum of its row, as in np.maximum
    # the row maxima: each row's start plus its argmax, one flat take (a max reduction
    # cost 2 us more, a two-array index 0.25 us more)
    flat = where + _row_starts(rows.shape[0], rows.shape[1])
    best = rows.take(flat)
    if best.size and (x.dtype.kind == "f" and _holds_nan(best)
                      or padded and best.item(best.argmin()) == lowest):
        return _np_max_pool_scan(x, k, s, p, d, size, out, extra)
    if rows.size <= _TABLED:  # the index of every window position, taken at the maxima
        index = _position_index(k, s, p, d, size, out, n).take(flat)
    else:
        offsets, corners = _index_tables(k, s, p, d, size, out)
        index = offsets.take(where).reshape((n, out[0] * out[1]))  # (np.take: 2 frames)
        index += corners
    shape = tuple(x.shape[:-2]) + out
    return best.reshape(shape), index.reshape(shape)


def _holds_nan(a) -> bool:
    """Whether the non-empty float array ``a`` holds a NaN: ``argmax`` names the first NaN
    where there is one, and a NaN differs from itself (4.7K instructions on 54 values, where
    ``np.isnan`` of a ``maximum`` reduction took 14.6K: the reduction's set-up, then a ufunc
    call on its 0-d result)."""
    m = a.item(a.argmax())
    return m != m


# Note [2x2 max pooling on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The common ``MaxPool2d(2)`` of planes of even size.  Each window position of the loop in
# ``_np_max_pool`` is a strided slice whose rows are ``W / 2`` values long, so its
# elementwise ops run NumPy's inner loop once per short row, and NumPy 2 copies such
# operands into buffers before each op.  Here the input's window rows -- a window's upper
# and lower rows side by side, ``2 * W`` values -- are transposed in one copy to
# ``(2 * W, planes * Ho)``, where each of the four window positions is a ``(Wo, planes *
# Ho)`` block whose rows are long and contiguous; every comparison and maximum runs on
# them, and the maxima and their indices are transposed back.  PyTorch's order is kept:
# the first maximum of the row-major scan wins (the left of a horizontal tie, then the
# upper row); NaN inputs take the loop, which applies PyTorch's NaN rule.  The windows tile
# the input and ``np.maximum`` propagates NaN, so the maxima hold a NaN exactly when the
# input does: the test reads the maxima, a quarter of the input.


def _np_max_pool_2x2(x, out):
    """The maxima and indices, or None when the input holds a NaN (Note [2x2 max pooling on
    NumPy])."""
    (oh, ow), w = out, x.shape[-1]
    lead = tuple(x.shape[:-2])
    rows = math.prod(lead) * oh
    columns = np.empty((2 * w, rows), x.dtype)
    np.copyto(columns, np.ascontiguousarray(x).reshape((rows, 2 * w)).T)
    (ul, ur), (ll, lr) = columns.reshape((2, ow, 2, rows)).transpose(0, 2, 1, 3)
    upper_col = np.greater(ur, ul).view(np.int8)  # the right of the upper pair
    lower_col = np.greater(lr, ll).view(np.int8)
    upper, lower_half = np.maximum(ul, ur), np.maximum(ll, lr)
    lower = np.greater(lower_half, upper)  # the lower row
    best = np.maximum(upper, lower_half, out=upper)
    if x.dtype.kind == "f" and _holds_nan(best):
        return None
    offset = lower_col - upper_col  # the chosen row's column: a select without branches
    offset *= lower.view(np.int8)
    offset += upper_col
    where = lower * w
    where += offset
    shape = lead + out
    values = np.empty(shape, x.dtype)
    np.copyto(values.reshape((-1, oh, ow)), best.reshape((ow, -1, oh)).transpose(1, 2, 0))
    index = np.empty(shape, np.int64)
    np.copyto(index.reshape((-1, oh, ow)), where.reshape((ow, -1, oh)).transpose(1, 2, 0))
    index += _corners(oh, ow, w)
    return values, index


@functools.lru_cache(maxsize=32)
def _corners(oh: int, ow: int, w: int):
    """The flat input index of each 2x2 window's upper left corner."""
    corners = np.arange(oh).reshape(-1, 1) * (2 * w) + np.arange(ow) * 2
    corners.flags.writeable = False
    return corners


@functools.lru_cache(maxsize=32)
def _row_starts(n: int, width: int):
    """The flat index of each of ``n`` rows of ``width`` values, read-only."""
    starts = np.arange(0, n * width, width)
    starts.flags.writeable = False
    return starts


@functools.lru_cache(maxsize=32)
def _index_tables(k, s, p, d, size, out):
    """The flat plane offset of each of the ``kh * kw`` window positions, and the flat
    index of each window's corner (Note [Max pooling as one argmax])."""
    offsets = np.array([i * d[0] * size[1] + j * d[1]
                        for i, j in itertools.product(range(k[0]), range(k[1]))], np.int64)
    corners = ((np.arange(out[0], dtype=np.int64) * s[0] - p[0]) * size[1]).reshape((-1, 1)) \
        + (np.arange(out[1], dtype=np.int64) * s[1] - p[1])
    corners = corners.reshape(-1)
    offsets.flags.writeable = corners.flags.writeable = False
    return offsets, corners


#: the windows' size up to which ``_np_max_pool`` takes the indices from one table
_TABLED = 4096


@functools.lru_cache(maxsize=32)
def _position_index(k, s, p, d, size, out, n: int):
    """The flat input-plane index of each position of each window of ``n`` planes, in the
    order of ``_np_max_pool``'s rows (Note [Max pooling as one argmax]): one ``take`` at the
    maxima's positions gives their indices, read-only."""
    offsets, corners = _index_tables(k, s, p, d, size, out)
    table = np.tile((corners.reshape((-1, 1)) + offsets).reshape(-1), n)
    table.flags.writeable = False
    return table


def _np_max_pool_scan(x, k, s, p, d, size, out, extra):
    """PyTorch's scan of the window positions, one strided slice each (the NaN rule)."""
    lowest = _lowest(np, x.dtype)
    padded = pad_array(np, x, (p[0], p[0] + extra[0], p[1], p[1] + extra[1]), lowest)
    windows = _window_slices(padded, k, s, d, out)
    best = np.full(windows[0].shape, lowest, x.dtype)
    where = np.full(best.shape, -1, np.int64)
    take = np.empty(best.shape, bool)
    for n, v in enumerate(windows):
        np.greater(v, best, out=take)
        take |= np.isnan(v)
        np.copyto(best, v, where=take)
        where += take * (n - where)  # cheaper than a masked copy
    return best, _flat_index(np, where, k, s, p, d, size, out)


def _backward_meta(g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    return tuple(x.shape), x.dtype


def _check_backward(g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    params = _params("max_pool2d_with_indices_backward", spec_of(x, "iuf"), kernel_size, stride,
                     padding, dilation, ceil_mode)
    shape = tuple(x.shape[:-2]) + params[5]
    if tuple(g.shape) != shape or tuple(indices.shape) != shape:
        raise ValueError(f"max_pool2d_with_indices_backward: expected grad_output and indices "
                         f"of shape {list(shape)}, got {list(g.shape)} and "
                         f"{list(indices.shape)}")
    return params


def _max_pool_backward(xp, g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    k, s, p, d, size, out, extra = _check_backward(g, x, kernel_size, stride, padding,
                                                   dilation, ceil_mode, indices)
    # the window position of each index, then col2im of the one-hot positions
    rows = xp.reshape(xp.arange(out[0], dtype=xp.int64, device=_device(x)), (-1, 1))
    cols = xp.arange(out[1], dtype=xp.int64, device=_device(x))
    ki = (indices // size[1] - rows * s[0] + p[0]) // d[0]
    kj = (indices % size[1] - cols * s[1] + p[1]) // d[1]
    where = ki * k[1] + kj
    zero = xp.zeros_like(g)
    # an index outside the plane (a window of padding only) sends its gradient nowhere
    g = xp.where((indices >= 0) & (indices < size[0] * size[1]), g, zero)
    parts = [xp.where(where == n, g, zero) for n in range(k[0] * k[1])]
    lead = tuple(g.shape[:-2])
    stacked = xp.reshape(xp.stack(parts, axis=-3),
                         lead[:-1] + (lead[-1] * k[0] * k[1], out[0] * out[1]))
    full = (size[0] + 2 * p[0] + extra[0], size[1] + 2 * p[1] + extra[1])
    canvas = col2im_array(xp, stacked, full, k, d, (0, 0), s)
    return canvas[..., p[0]:p[0] + size[0], p[1]:p[1] + size[1]]


def _np_max_pool_backward(xp, g, x, kernel_size, stride, padding, dilation, ceil_mode,
                          indices):
    k, s, _, d, *_ = _check_backward(g, x, kernel_size, stride, padding, dilation,
                                     ceil_mode, indices)
    planes = math.prod(x.shape[:-2])
    plane = x.shape[-2] * x.shape[-1]
    indices, g = indices.reshape((planes, -1)), g.reshape((planes, -1))
    dropped = indices.size and _outside_plane(indices, plane)
    if dropped:
        outside = (indices < 0) | (indices >= plane)  # windows of padding only: dropped
        g, indices = np.where(outside, 0, g).astype(g.dtype), np.where(outside, 0, indices)
    flat = (indices + _plane_starts(planes, plane)).ravel()
    if not dropped and s[0] > (k[0] - 1) * d[0] and s[1] > (k[1] - 1) * d[1]:
        # windows that do not overlap: each pixel gets one gradient at most (a dropped
        # one's zero, sent to its plane's first pixel, would overwrite that pixel's)
        total = np.zeros(planes * plane, g.dtype)
        total[flat] = g.reshape(-1)
        return total.reshape(x.shape)
    total = np.bincount(flat, weights=g.reshape(-1), minlength=planes * plane)
    return total.astype(g.dtype, copy=False).reshape(x.shape)


@functools.lru_cache(maxsize=32)
def _plane_starts(planes: int, plane: int):
    """The flat index of each plane's first pixel, a column."""
    starts = np.arange(planes, dtype=np.int64).reshape((planes, 1)) * plane
    starts.flags.writeable = False
    return starts


def _outside_plane(indices, plane: int) -> bool:
    """Whether an index lies outside ``[0, plane)``; for int64 indices from the largest of
    them read as unsigned (a negative index is a large unsigned one), not ``min`` and
    ``max``, and by ``argmax``, not a ``maximum`` reduction (7K instructions on 54 indices
    against 12.7K: a reduction's set-up)."""
    if indices.dtype == np.int64:
        unsigned = indices.view(_U64)
        return unsigned.item(unsigned.argmax()) >= plane
    return bool(indices.min() < 0 or indices.max() >= plane)


_U64 = np.dtype(np.uint64)


# -- test data -------------------------------------------------------------------------------

#: (input shape, kernel_size, stride, padding, dilation, ceil_mode)
_CASES = [
    ((2, 3, 6, 6), (2, 2), (), (0, 0), (1, 1), False),
    ((1, 2, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True),
    ((2, 5, 4), (2, 3), (1, 2), (1, 1), (2, 1), False),
    ((1, 1, 5, 5), (3, 2), (1, 1), (1, 0), (1, 2), True),
]


def _ref(x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Straight from PyTorch's loop."""
    k, s, p, d, size, out, _ = _params("max_pool2d", x, kernel_size, stride, padding,
                                       dilation, ceil_mode)
    planes = x.reshape((-1,) + size)
    values = np.empty((planes.shape[0],) + out, x.dtype)
    index = np.empty((planes.shape[0],) + out, np.int64)
    for n, y, z in itertools.product(range(planes.shape[0]), range(out[0]), range(out[1])):
        best, at = -np.inf, -1
        for i, j in itertools.product(range(k[0]), range(k[1])):
            h, w = y * s[0] - p[0] + i * d[0], z * s[1] - p[1] + j * d[1]
            if 0 <= h < size[0] and 0 <= w < size[1]:
                v = planes[n, h, w]
                if v > best or np.isnan(v) or at < 0:
                    best, at = v, h * size[1] + w
        values[n, y, z], index[n, y, z] = best, at
    return values.reshape(x.shape[:-2] + out), index.reshape(x.shape[:-2] + out)


def _samples(dtype, rng):
    out = []
    for shape, *args in _CASES:
        x = make_array(shape, dtype, rng)
        if shape == (1, 2, 7, 6):
            x[0, 0, 2, 2] = x[0, 0, 2, 3]  # a tie
        out.append(SampleInput((x, *args), name=f"{shape} k={args[0]}"))
    return out


def _backward_ref(g, x, kernel_size, stride, padding, dilation, ceil_mode, indices):
    planes = g.reshape((-1, g.shape[-2] * g.shape[-1]))
    out = np.zeros((planes.shape[0], x.shape[-2] * x.shape[-1]), g.dtype)
    for n in range(planes.shape[0]):
        np.add.at(out[n], indices.reshape(planes.shape)[n], planes[n])
    return out.reshape(x.shape)


def _backward_samples(dtype, rng):
    out = []
    for shape, *args in _CASES:
        x = make_array(shape, dtype, rng)
        _, indices = _ref(x, *args)
        out.append(SampleInput((make_array(indices.shape, dtype, rng), x, *args, indices),
                               name=f"{shape} k={args[0]}"))
    return out


def _errors():
    x = np.ones((1, 1, 4, 4), np.float32)
    yield ErrorInput(SampleInput((x, (2, 2), (), (2, 2))), ValueError,
                     "max_pool2d: pad should be smaller than or equal to half of kernel size")
    yield ErrorInput(SampleInput((np.ones((4, 4), np.float32), (2, 2))), ValueError,
                     "max_pool2d: expected 3-D")
    yield ErrorInput(SampleInput((x, (5, 5))), ValueError,
                     "max_pool2d: given input of size")
    yield ErrorInput(SampleInput((np.ones((1, 1, 4, 4), np.bool_), (2, 2))), TypeError,
                     "max_pool2d: expected a real")


defop("max_pool2d_with_indices(Tensor self, int[2] kernel_size, int[2] stride=[], "
      "int[2] padding=0, int[2] dilation=1, bool ceil_mode=False) -> (Tensor, Tensor)",
      impl=_max_pool, cpu_impl=_np_max_pool, meta=_forward_meta, names=(),
      info=OpInfo(ref=_ref, dtypes=FLOATS, samples=_samples, errors=_errors))
defop("max_pool2d_with_indices_backward(Tensor grad_output, Tensor self, int[2] kernel_size, "
      "int[2] stride, int[2] padding, int[2] dilation, bool ceil_mode, Tensor indices) "
      "-> Tensor", impl=_max_pool_backward, cpu_impl=_np_max_pool_backward,
      meta=_backward_meta, names=(),
      info=OpInfo(ref=_backward_ref, dtypes=FLOATS, samples=_backward_samples))
# their Tensors' arrays read directly, without the generic kernel's unwrapping and result
# wrappers (Note [Hand-written CPU kernels])
for _name, _impl in (("max_pool2d_with_indices", _np_max_pool),
                     ("max_pool2d_with_indices_backward", _np_max_pool_backward)):
    register_arrays_direct(CATALOGUE[f"aten::{_name}"].functional[0], functools.partial(_impl, np))
