"""Sliding windows: ``im2col`` and ``col2im`` (``F.unfold`` and ``F.fold``).

Note [Convolution through im2col]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A convolution is ``im2col`` then one ``matmul`` with the flattened weight: the generic
kernels of the ``convolution`` op and its higher derivatives are that composition (Note
[Convolution kernels] in ops/conv.py); average pooling sums the window axis of ``im2col``'s
columns.  The two kernels are each other's adjoints -- ``col2im`` sums every column entry
back into the pixel it was read from -- so each is the other's derivative
(ops/convolution_derivatives.py) and every derivative order of these compositions comes
from ``im2col``, ``col2im`` and the ops composed with them.

The layout is PyTorch's: ``im2col`` of an ``(N, C, H, W)`` input (or ``(C, H, W)``) is
``(N, C * kh * kw, L)``, the channel slowest, then the kernel row, then the kernel column;
``L = out_h * out_w`` windows in row-major order.  Zero padding is part of the kernel (no
``pad`` op needed), as in PyTorch.

The generic kernels use Array API slicing with steps (one strided slice per kernel
position, stacked) and, for ``col2im``, one zero-interleave-and-pad per kernel position
summed; the NumPy kernels gather the windows with one ``np.take`` and add the columns
back with ``kh * kw`` in-place additions (Note [im2col as one gather], Note [col2im as
contiguous runs]).
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
from .elementwise import FLOATS

#: the raw-array helpers other chapters' kernels use (ops/pooling.py, ops/conv.py)
__all__ = ["col2im_array", "im2col_array", "int_pair", "int_tuple", "pad_array", "spec_of"]


# -- shapes and checks -----------------------------------------------------------------------


def int_tuple(op: str, name: str, value, n: int, minimum: int) -> tuple[int, ...]:
    """``value`` (an int, or one or ``n`` ints) as ``n`` ints of at least ``minimum``,
    checked (the window parameters of this chapter's, ops/pooling.py's and ops/conv.py's
    ops; PyTorch expands one int to every spatial dimension)."""
    t = type(value)
    if (t is tuple or t is list) and len(value) == n and \
            all([type(v) is int and v >= minimum for v in value]):
        # the common case, without the checks' generators (a kernel's hot path)
        return value if t is tuple else tuple(value)
    if t is int and value >= minimum:  # one int for every dimension (not a bool)
        return (value,) * n
    value = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if len(value) == 1:
        value = value * n
    if len(value) != n or not all(isinstance(v, int) and not isinstance(v, bool)
                                  for v in value):
        raise ValueError(f"{op}: expected {name} to be {n} ints, got {list(value)}")
    if any(v < minimum for v in value):
        which = "greater than zero" if minimum else "non-negative"
        raise ValueError(f"{op}: {name} should be {which}, but got {name}: "
                         f"{list(value)}")
    return value


def int_pair(op: str, name: str, value, minimum: int) -> tuple[int, int]:
    """``int_tuple`` of two ints.  One int, or a tuple or list of two, is checked here,
    without ``int_tuple``'s call and generators: the window ops check four or five such
    arguments per call (``max_pool2d_with_indices(x, [2, 2])``'s padding 0 and dilation 1
    cost 350 of its 1005 Python opcodes through ``int_tuple``)."""
    t = type(value)
    if t is int:  # (not a bool: int_tuple refuses those)
        if value >= minimum:
            return value, value
    elif (t is tuple or t is list) and len(value) == 2:
        a, b = value
        if type(a) is int and type(b) is int and a >= minimum and b >= minimum:
            return value if t is tuple else (a, b)
    return int_tuple(op, name, value, 2, minimum)


def _windows(op, spatial, kernel_size, dilation, padding, stride):
    """The checked window parameters and the number of windows along each axis."""
    k = int_pair(op, "kernel_size", kernel_size, 1)
    d = int_pair(op, "dilation", dilation, 1)
    p = int_pair(op, "padding", padding, 0)
    s = int_pair(op, "stride", stride, 1)
    blocks = ((spatial[0] + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1,
              (spatial[1] + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1)
    if blocks[0] < 1 or blocks[1] < 1:
        raise ValueError(
            f"{op}: given input with spatial size {tuple(spatial)}, kernel_size={list(k)}, "
            f"dilation={list(d)}, padding={list(p)}, calculated shape of the array of "
            f"sliding blocks as {blocks}, but its components must be at least one")
    return k, d, p, s, blocks


def _check_float(op: str, x) -> None:
    if x.dtype.kind not in "fc":
        raise TypeError(f"{op}: expected a floating-point or complex input, got "
                        f"{x.dtype.name}")


def _im2col_checked(x, kernel_size, dilation, padding, stride) -> tuple:
    """``(output shape, window parameters)`` of ``im2col``, checked."""
    _check_float("im2col", x)
    if x.ndim not in (3, 4) or 0 in tuple(x.shape[-3:]):
        raise ValueError(f"im2col: expected a 3-D (C, H, W) or 4-D (N, C, H, W) input with "
                         f"non-zero C, H and W, got shape {tuple(x.shape)}")
    windows = _windows("im2col", x.shape[-2:], kernel_size, dilation, padding, stride)
    (kh, kw), blocks = windows[0], windows[4]
    shape = (x.shape[-3] * kh * kw, blocks[0] * blocks[1])
    return tuple(x.shape[:-3]) + shape, windows


def _im2col_meta(x, kernel_size, dilation, padding, stride):
    return _im2col_checked(x, kernel_size, dilation, padding, stride)[0], x.dtype


def _col2im_checked(x, output_size, kernel_size, dilation, padding, stride) -> tuple:
    """``(output shape, output_size, window parameters)`` of ``col2im``, checked."""
    _check_float("col2im", x)
    size = int_pair("col2im", "output_size", output_size, 1)
    if x.ndim not in (2, 3) or x.shape[-1] == 0 or x.shape[-2] == 0:
        raise ValueError(f"col2im: expected a 2-D (C * kh * kw, L) or 3-D (N, C * kh * kw, L) "
                         f"input with non-zero dimensions, got shape {tuple(x.shape)}")
    windows = _windows("col2im", size, kernel_size, dilation, padding, stride)
    k, blocks = windows[0], windows[4]
    rows, length = x.shape[-2:]
    if rows % (k[0] * k[1]):
        raise ValueError(f"col2im: expected size of input's dimension 1 to be divisible by "
                         f"the product of kernel_size, but got input.size(1)={rows} and "
                         f"kernel_size={k}")
    if length != blocks[0] * blocks[1]:
        raise ValueError(f"col2im: given output_size={list(size)}, kernel_size={list(k)}, "
                         f"dilation={list(dilation)}, padding={list(padding)}, "
                         f"stride={list(stride)}, expected size of input's dimension 2 to "
                         f"match the calculated number of sliding blocks {blocks[0]} * "
                         f"{blocks[1]} = {blocks[0] * blocks[1]}, but got input.size(2)="
                         f"{length}")
    return tuple(x.shape[:-2]) + (rows // (k[0] * k[1]),) + size, size, windows


def _col2im_meta(x, output_size, kernel_size, dilation, padding, stride):
    return _col2im_checked(x, output_size, kernel_size, dilation, padding, stride)[0], x.dtype


def spec_of(x, kinds: str):
    """``x`` as the checks read it: a NumPy array of a dtype of ``kinds`` as it is (its
    dtype's ``kind`` and ``name`` are the Array API's), any other as an ``ArraySpec``
    (ml_dtypes' bfloat16 is kind 'V' to NumPy): the checks of NumPy kernels without
    ``ArraySpec``'s dtype conversion (1.3 us)."""
    return x if type(x) is np.ndarray and x.dtype.kind in kinds else ArraySpec(x)


def _device(a):
    from array_api_compat import device

    return device(a)


def _full(xp, like, shape, value):
    return xp.full(shape, value, dtype=like.dtype, device=_device(like))


def pad_array(xp, x, pads: tuple, value: float = 0.0):
    """Raw array ``x`` with ``(top, bottom, left, right)`` rows and columns of ``value``
    around its last two dimensions (the kernels' padding: the catalogue has no pad op)."""
    top, bottom, left, right = pads
    for axis, before, after in ((-2, top, bottom), (-1, left, right)):
        if not (before or after):
            continue
        parts = []
        for n in (before, None, after):
            if n is None:
                parts.append(x)
            elif n:
                shape = list(x.shape)
                shape[axis] = n
                parts.append(_full(xp, x, tuple(shape), value))
        x = xp.concat(parts, axis=axis)
    return x


# -- im2col ----------------------------------------------------------------------------------


def im2col_array(xp, x, kernel_size, dilation, padding, stride):
    """``im2col`` on a raw array with Array API functions (the generic kernel)."""
    out_shape, ((kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw)) = _im2col_checked(
        ArraySpec(x), kernel_size, dilation, padding, stride)
    x = pad_array(xp, x, (ph, ph, pw, pw))
    cols = [x[..., i * dh:i * dh + sh * (bh - 1) + 1:sh, j * dw:j * dw + sw * (bw - 1) + 1:sw]
            for i, j in itertools.product(range(kh), range(kw))]
    return xp.reshape(xp.stack(cols, axis=-3), out_shape)


def _np_im2col(xp, x, kernel_size, dilation, padding, stride):
    out_shape, ((kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw)) = _im2col_checked(
        spec_of(x, "fc"), kernel_size, dilation, padding, stride)
    if ph or pw:
        padded = np.zeros(x.shape[:-2] + (x.shape[-2] + 2 * ph, x.shape[-1] + 2 * pw),
                          x.dtype)
        padded[..., ph:ph + x.shape[-2], pw:pw + x.shape[-1]] = x
        x = padded
    # See Note [im2col as one gather]
    planes = x.reshape((-1, x.shape[-2] * x.shape[-1]))
    index = _window_index(x.shape[-1], (kh, kw), (dh, dw), (sh, sw), (bh, bw))
    return planes.take(index, axis=1).reshape(out_shape)


# Note [im2col as one gather]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Copying the windows as one strided view (``as_strided`` to ``(..., kh, kw, bh, bw)``,
# then ``reshape``) runs NumPy's inner loop once per window row of ``bw`` values: 27,648
# loops of 6 values for the CNN example's second convolution, whose loop overhead was the
# copy's cost.  ``np.take`` along the flattened planes with one index per column entry
# (``(i * dh + y * sh) * Wp + j * dw + x * sw``, cached per geometry) gathers each plane's
# columns in one call: 125 against 175 us there, the same at one channel.


@functools.lru_cache(maxsize=64)
def _window_index(width, k, d, s, blocks):
    """The flat plane index of each im2col entry of one (padded) plane of ``width``
    columns, ordered ``(i, j, y, x)``."""
    i, j, y, x = np.ix_(range(k[0]), range(k[1]), range(blocks[0]), range(blocks[1]))
    index = ((i * d[0] + y * s[0]) * width + j * d[1] + x * s[1]).reshape(-1)
    index.flags.writeable = False
    return index


# -- col2im ----------------------------------------------------------------------------------


def col2im_array(xp, x, output_size, kernel_size, dilation, padding, stride):
    """``col2im`` on a raw array with Array API functions (the generic kernel)."""
    out_shape, (h, w), ((kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw)) = _col2im_checked(
        ArraySpec(x), output_size, kernel_size, dilation, padding, stride)
    cols = xp.reshape(x, out_shape[:-2] + (kh, kw, bh, bw))
    hp, wp = h + 2 * ph, w + 2 * pw
    total = None
    for i, j in itertools.product(range(kh), range(kw)):
        part = _interleave(xp, _interleave(xp, cols[..., i, j, :, :], -2, sh), -1, sw)
        part = pad_array(xp, part, (i * dh, hp - i * dh - part.shape[-2], j * dw,
                                    wp - j * dw - part.shape[-1]))
        total = part if total is None else total + part
    return total[..., ph:ph + h, pw:pw + w]


def _interleave(xp, x, axis: int, step: int):
    """``x`` with ``step - 1`` zeros between neighbours along ``axis`` (-2 or -1)."""
    if step == 1 or x.shape[axis] == 1:
        return x
    spread = xp.stack([x] + [xp.zeros_like(x)] * (step - 1), axis=axis)
    shape = list(x.shape)
    n = shape[axis]
    shape[axis] = n * step
    spread = xp.reshape(spread, tuple(shape))
    keep = (n - 1) * step + 1
    return spread[..., :keep, :] if axis == -2 else spread[..., :keep]


# Note [Small col2im as one scatter]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Up to a few thousand column entries the additions below are a dozen NumPy calls on a few
# hundred values; there one ``np.add.at`` of every entry into the flat (padded) canvas, at
# an index table kept per geometry, costs less (the sweep's (2, 18, 16) columns: 136K ->
# 26K instructions; (1, 63, 64): 251K -> 151K; larger columns keep the additions, whose
# index-free passes were tuned on the CNN example's batches).  The columns are read in
# their own order, window position ``(i, j)`` before the block, so each pixel receives its
# entries in the order of ``(i, j)``, as in the window-by-window additions: the sums are
# the same to the bit.

#: the column entries up to which col2im is one scatter (Note [Small col2im as one scatter])
_SCATTER_SIZE = 4096


@functools.lru_cache(maxsize=32)
def _scatter_index(planes: int, canvas: tuple, k, d, s, blocks):
    """The flat index in ``planes`` padded canvases of each column entry, in the columns'
    ``(planes, kh, kw, bh, bw)`` order, read-only."""
    n, i, j, y, z = np.ix_(range(planes), range(k[0]), range(k[1]), range(blocks[0]),
                           range(blocks[1]))
    index = ((n * canvas[0] + y * s[0] + i * d[0]) * canvas[1] + z * s[1] + j * d[1]).ravel()
    index.flags.writeable = False
    return index


def _np_col2im(xp, x, output_size, kernel_size, dilation, padding, stride):
    out_shape, (h, w), ((kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw)) = _col2im_checked(
        spec_of(x, "fc"), output_size, kernel_size, dilation, padding, stride)
    hp, wp = h + 2 * ph, w + 2 * pw
    if x.size <= _SCATTER_SIZE:  # See Note [Small col2im as one scatter]
        planes = math.prod(out_shape[:-2])
        out = np.zeros(planes * hp * wp, x.dtype)
        np.add.at(out, _scatter_index(planes, (hp, wp), (kh, kw), (dh, dw), (sh, sw),
                                      (bh, bw)), x.reshape(-1))
        out = out.reshape(out_shape[:-2] + (hp, wp))
        return out[..., ph:ph + h, pw:pw + w].copy() if ph or pw else out
    cols = x.reshape(out_shape[:-2] + (kh, kw, bh, bw))
    out = np.zeros(out_shape[:-2] + (hp, wp), x.dtype)
    if sh > (kh - 1) * dh and sw > (kw - 1) * dw:  # windows that do not overlap: one copy
        *lead, rs, cs = out.strides  # (a view by the constructor: as_strided is Python)
        np.ndarray(out.shape[:-2] + (kh, kw, bh, bw), out.dtype, out, 0,
                   (*lead, rs * dh, cs * dw, rs * sh, cs * sw))[...] = cols
    elif sh == sw == 1:
        return _add_runs(cols, out_shape, (h, w), (kh, kw), (dh, dw), (ph, pw), (bh, bw))
    else:
        _add_windows(out, cols, (kh, kw), (dh, dw), (sh, sw), (bh, bw))
    return out[..., ph:ph + h, pw:pw + w].copy() if ph or pw else out


def _add_runs(cols, out_shape, size, k, d, p, blocks):
    """col2im with stride 1 as ``kh * kw`` contiguous additions.

    Note [col2im as contiguous runs]: added window by window into an ``(N, C, H, W)``
    canvas, each addition loops over rows of ``bw`` elements (6 at the CNN example's sizes:
    loop overhead, not arithmetic).  Here the planes are the last axis and each window
    row is padded to the canvas's width: window ``(i, j)`` then covers one contiguous run
    of the flattened canvas, from ``i * dh * Wp + j * dw`` (the padding adds zeros past the
    row's end), and each addition is one contiguous block of ``bh * Wp * N * C`` values.
    """
    (h, w), (kh, kw), (dh, dw), (ph, pw), (bh, bw) = size, k, d, p, blocks
    hp, wp = h + 2 * ph, w + 2 * pw
    planes = math.prod(out_shape[:-2])
    runs = np.zeros((kh, kw, bh, wp, planes), cols.dtype)
    runs[:, :, :, :bw, :] = cols.reshape((planes, kh, kw, bh, bw)).transpose(1, 2, 3, 4, 0)
    runs = runs.reshape((kh, kw, bh * wp, planes))
    canvas = np.zeros((hp * wp + (kw - 1) * dw, planes), cols.dtype)
    for i, j in itertools.product(range(kh), range(kw)):
        start = i * dh * wp + j * dw
        canvas[start:start + bh * wp] += runs[i, j]
    image = canvas[:hp * wp].reshape((hp, wp, planes))[ph:ph + h, pw:pw + w]
    return np.ascontiguousarray(image.transpose(2, 0, 1)).reshape(out_shape)


def _add_windows(out, cols, k, d, s, blocks):
    (kh, kw), (dh, dw), (sh, sw), (bh, bw) = k, d, s, blocks
    for i, j in itertools.product(range(kh), range(kw)):
        out[..., i * dh:i * dh + sh * (bh - 1) + 1:sh,
            j * dw:j * dw + sw * (bw - 1) + 1:sw] += cols[..., i, j, :, :]


# -- declarations and test data --------------------------------------------------------------

#: (input shape, kernel_size, dilation, padding, stride)
_CASES = [
    ((2, 3, 5, 6), (2, 3), (1, 1), (0, 0), (1, 1)),
    ((1, 2, 7, 5), (3, 2), (2, 1), (1, 2), (2, 3)),
    ((2, 4, 4), (2, 2), (1, 1), (0, 0), (2, 2)),
    ((1, 1, 3, 3), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 2, 1, 6), (1, 3), (1, 2), (0, 1), (1, 2)),
]


def _im2col_ref(x, kernel_size, dilation, padding, stride):
    return _np_im2col(np, x, kernel_size, dilation, padding, stride)


def _col2im_ref(x, output_size, kernel_size, dilation, padding, stride):
    """Straight from the definition: every entry added to the pixel it came from."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw) = _windows(
        "col2im", output_size, kernel_size, dilation, padding, stride)
    cols = x.reshape(x.shape[:-2] + (-1, kh, kw, bh, bw))
    out = np.zeros(x.shape[:-2] + (cols.shape[-5],) + tuple(output_size), x.dtype)
    for i, j, y, z in itertools.product(range(kh), range(kw), range(bh), range(bw)):
        r, c = y * sh + i * dh - ph, z * sw + j * dw - pw
        if 0 <= r < output_size[0] and 0 <= c < output_size[1]:
            out[..., r, c] += cols[..., i, j, y, z]
    return out


def _im2col_samples(dtype, rng):
    return [SampleInput((make_array(shape, dtype, rng), k, d, p, s), name=f"{shape} k={k}")
            for shape, k, d, p, s in _CASES]


def _col2im_samples(dtype, rng):
    out = []
    for shape, k, d, p, s in _CASES:
        cols_shape, _ = _im2col_meta(ArraySpec(np.empty(shape, dtype.numpy)), k, d, p, s)
        out.append(SampleInput((make_array(cols_shape, dtype, rng), shape[-2:], k, d, p, s),
                               name=f"{shape} k={k}"))
    return out


def _im2col_errors():
    x = np.ones((1, 2, 4, 4), np.float32)
    yield ErrorInput(SampleInput((np.ones((4, 4), np.float32), (2, 2), (1, 1), (0, 0),
                                  (1, 1))), ValueError, "im2col: expected a 3-D")
    yield ErrorInput(SampleInput((x, (5, 5), (1, 1), (0, 0), (1, 1))), ValueError,
                     "im2col: given input with spatial size")
    yield ErrorInput(SampleInput((x, (2, 2), (1, 1), (0, 0), (0, 1))), ValueError,
                     "im2col: stride should be greater than zero")
    yield ErrorInput(SampleInput((x, (2, 2), (1, 1), (-1, 0), (1, 1))), ValueError,
                     "im2col: padding should be non-negative")
    yield ErrorInput(SampleInput((np.ones((1, 2, 4, 4), np.int64), (2, 2), (1, 1), (0, 0),
                                  (1, 1))), TypeError, "im2col: expected a floating-point")


def _col2im_errors():
    cols = np.ones((1, 8, 9), np.float32)
    yield ErrorInput(SampleInput((cols, (4, 4), (3, 3), (1, 1), (0, 0), (1, 1))), ValueError,
                     "col2im: expected size of input's dimension 1 to be divisible")
    yield ErrorInput(SampleInput((cols, (5, 5), (2, 2), (1, 1), (0, 0), (1, 1))), ValueError,
                     "col2im: given output_size")


defop("im2col(Tensor self, int[2] kernel_size, int[2] dilation, int[2] padding, "
      "int[2] stride) -> Tensor", impl=im2col_array, cpu_impl=_np_im2col, meta=_im2col_meta,
      names=(), info=OpInfo(ref=_im2col_ref, dtypes=FLOATS, samples=_im2col_samples,
                            errors=_im2col_errors))
defop("col2im(Tensor self, int[2] output_size, int[2] kernel_size, int[2] dilation, "
      "int[2] padding, int[2] stride) -> Tensor", impl=col2im_array, cpu_impl=_np_col2im,
      meta=_col2im_meta, names=(),
      info=OpInfo(ref=_col2im_ref, dtypes=FLOATS, samples=_col2im_samples,
                  errors=_col2im_errors))
# their input's array read directly, without the generic kernel's unwrapping (Note
# [Hand-written CPU kernels])
for _name, _impl in (("im2col", _np_im2col), ("col2im", _np_col2im)):
    register_arrays_direct(CATALOGUE[f"aten::{_name}"].functional[0], functools.partial(_impl, np))
