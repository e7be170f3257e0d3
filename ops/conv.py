"""Convolution: ``convolution`` and ``convolution_backward`` (PyTorch's ops and schemas).

Note [Convolution kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~
``md.nn.functional.conv1d``/``conv2d`` call ``convolution``, PyTorch's op, rather than
composing ``im2col``, ``matmul`` and an add of the bias: the composition's backward was
``col2im`` scattering through the ``(N, C, H, W)`` layout, whose windows are runs of a few
values (6 at the CNN example's second convolution), with the loop overhead and temporaries
that go with them.  The forward returns the output; ``convolution_backward`` the gradients
of input, weight and bias that its ``output_mask`` asks for.

The generic kernels (every Array API backend) are the composition on raw arrays:
``im2col`` (Note [Convolution through im2col] in ops/convolution.py), one ``matmul`` with
the flattened weight (batched over the groups), the bias added; the backward's input
gradient is ``col2im`` of ``weight^T @ grad``, the weight's ``grad @ im2col(input)^T``
summed over the batch, the bias's a sum.  The NumPy kernels lay the input out as
``(C, H, W, N)``: see Note [Convolution in CHWN].  Both compute float16 and bfloat16 in
float32 (Note [Batch norm in low precision] in ops/normalization.py).

The derivative of ``convolution`` calls ``convolution_backward`` when backward records
nothing; with ``create_graph`` it composes the same formula from ``im2col``, ``col2im``,
``matmul`` and ``sum``, whose own derivatives give every higher order (as batch norm, Note
[Batch norm kernels] in ops/normalization.py).  ``convolution_backward``'s own derivative,
for its direct callers, is the vector-Jacobian product of that composite formula
(ops/conv_derivatives.py).  Transposed convolutions are not implemented (md has no
``conv_transpose``): ``transposed=True`` raises NotImplementedError naming the op.
"""

from __future__ import annotations

import numpy as np

from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._meta_fns import ArraySpec
from ._samples import make_array
from .convolution import col2im_array, im2col_array, int_tuple
from .elementwise import FLOATS
from .normalization import in_float32

#: the checked geometry other modules use (ops/conv_derivatives.py)
__all__ = ["geometry"]


# -- shapes and checks -----------------------------------------------------------------------


def geometry(op, x, weight, stride, padding, dilation, transposed, output_padding, groups):
    """Checked ``(k, d, p, s, blocks)``, each two ints (a 1-D convolution is one of height
    1), for an input ``x`` and a ``weight`` (arrays, tensors or specs)."""
    if transposed:
        raise NotImplementedError(f"{op}: transposed convolutions are not implemented "
                                  f"(transposed=True)")
    if x.dtype.kind not in "fc":
        raise TypeError(f"{op}: expected a floating-point or complex input, got "
                        f"{x.dtype.name}")
    if weight.dtype != x.dtype:
        raise TypeError(f"{op}: input type ({x.dtype.name}) and weight type "
                        f"({weight.dtype.name}) should be the same")
    if x.ndim not in (3, 4) or weight.ndim != x.ndim:
        raise ValueError(f"{op}: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input and a "
                         f"weight of as many dimensions, got input of shape "
                         f"{list(x.shape)} and weight of shape {list(weight.shape)}")
    spatial = x.ndim - 2
    s = int_tuple(op, "stride", stride, spatial, 1)
    p = int_tuple(op, "padding", padding, spatial, 0)
    d = int_tuple(op, "dilation", dilation, spatial, 1)
    if any(int_tuple(op, "output_padding", output_padding or 0, spatial, 0)):
        raise ValueError(f"{op}: output_padding is only for transposed convolutions, got "
                         f"{list(output_padding)}")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}: non-positive groups is not supported, got {groups!r}")
    out_channels, per_group = weight.shape[0], weight.shape[1]
    if x.shape[1] != per_group * groups or x.shape[1] == 0:
        raise ValueError(f"{op}: given groups={groups}, weight of size {list(weight.shape)}, "
                         f"expected input{list(x.shape)} to have {per_group * groups} "
                         f"channels, but got {x.shape[1]} channels instead")
    if out_channels == 0 or out_channels % groups:
        raise ValueError(f"{op}: given groups={groups}, expected weight to be divisible by "
                         f"{groups} at dimension 0, but got weight of size "
                         f"{list(weight.shape)} instead")
    k = tuple(weight.shape[2:])
    size = tuple(x.shape[2:])
    if spatial == 1:
        k, s, p, d, size = (1, *k), (1, *s), (0, *p), (1, *d), (1, *size)
    padded = [size[i] + 2 * p[i] for i in range(2)]
    effective = [(k[i] - 1) * d[i] + 1 for i in range(2)]
    if any(a < b for a, b in zip(padded, effective)) or 0 in k:
        raise ValueError(f"{op}: calculated padded input size per channel: "
                         f"{padded[2 - spatial:]}; kernel size: {effective[2 - spatial:]}; "
                         f"kernel size can't be greater than actual input size")
    blocks = tuple((padded[i] - effective[i]) // s[i] + 1 for i in range(2))
    return k, d, p, s, blocks


def _check_bias(op, bias_shape, out_channels):
    if bias_shape is not None and tuple(bias_shape) != (out_channels,):
        raise ValueError(f"{op}: expected bias of shape [{out_channels}], got "
                         f"{list(bias_shape)}")


def _out_shape(x, weight, blocks):
    spatial = blocks[1:] if x.ndim == 3 else blocks
    return (x.shape[0], weight.shape[0], *spatial)


def _checked_forward(x, weight, bias, stride, padding, dilation, transposed, output_padding,
                     groups):
    """The meta function's checks: the output shape and the ``geometry``."""
    geom = geometry("convolution", x, weight, stride, padding, dilation, transposed,
                    output_padding, groups)
    _check_bias("convolution", None if bias is None else bias.shape, weight.shape[0])
    if bias is not None and bias.dtype != x.dtype:
        raise TypeError(f"convolution: input type ({x.dtype.name}) and bias type "
                        f"({bias.dtype.name}) should be the same")
    return _out_shape(x, weight, geom[4]), geom


def _forward_meta(x, weight, bias, stride, padding, dilation, transposed, output_padding,
                  groups):
    shape, _ = _checked_forward(x, weight, bias, stride, padding, dilation, transposed,
                                output_padding, groups)
    return shape, x.dtype


def _backward_meta(g, x, weight, bias_sizes, stride, padding, dilation, transposed,
                   output_padding, groups, output_mask):
    return _checked_backward(g, x, weight, bias_sizes, stride, padding, dilation, transposed,
                             output_padding, groups, output_mask)[0]


def _checked_backward(g, x, weight, bias_sizes, stride, padding, dilation, transposed,
                      output_padding, groups, output_mask):
    """The meta function's checks: its result and the ``geometry``."""
    op = "convolution_backward"
    geom = geometry(op, x, weight, stride, padding, dilation, transposed, output_padding,
                    groups)
    blocks = geom[4]
    if len(output_mask) != 3:
        raise ValueError(f"{op}: output_mask must have 3 entries, got {len(output_mask)}")
    shape = _out_shape(x, weight, blocks)
    if tuple(g.shape) != shape:
        raise ValueError(f"{op}: expected grad_output of shape {list(shape)}, got "
                         f"{list(g.shape)}")
    _check_bias(op, bias_sizes, weight.shape[0])
    shapes = (tuple(x.shape), tuple(weight.shape), (weight.shape[0],))
    return [(s, x.dtype) if m else None for s, m in zip(shapes, output_mask)], geom


# -- generic kernels -------------------------------------------------------------------------


def _as_4d(xp, a):
    """A 1-D convolution's ``(N, C, L)`` array as ``(N, C, 1, L)``."""
    return a if a.ndim == 4 else xp.reshape(a, (a.shape[0], a.shape[1], 1, a.shape[2]))


def _convolution(xp, x, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    shape, (k, d, p, s, blocks) = _checked_forward(
        ArraySpec(x), ArraySpec(weight), None if bias is None else ArraySpec(bias), stride,
        padding, dilation, transposed, output_padding, groups)
    n, out_channels = x.shape[0], weight.shape[0]
    cols = im2col_array(xp, _as_4d(xp, x), k, d, p, s)  # (N, C * kh * kw, L)
    cols = xp.reshape(cols, (n, groups, -1, blocks[0] * blocks[1]))
    out = xp.matmul(xp.reshape(weight, (groups, out_channels // groups, -1)), cols)
    out = xp.reshape(out, shape)
    if bias is not None:
        out = out + xp.reshape(bias, (out_channels,) + (1,) * (x.ndim - 2))
    return out


def _convolution_backward(xp, g, x, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    _, (k, d, p, s, blocks) = _checked_backward(
        ArraySpec(g), ArraySpec(x), ArraySpec(weight), bias_sizes, stride, padding, dilation,
        transposed, output_padding, groups, output_mask)
    n, out_channels = x.shape[0], weight.shape[0]
    g4 = xp.reshape(g, (n, groups, out_channels // groups, blocks[0] * blocks[1]))
    w3 = xp.reshape(weight, (groups, out_channels // groups, -1))
    gx = gw = gb = None
    if output_mask[0]:
        x4 = _as_4d(xp, x)
        cols = xp.matmul(xp.matrix_transpose(w3), g4)  # (N, G, Cg * kh * kw, L)
        cols = xp.reshape(cols, (n, x.shape[1] * k[0] * k[1], blocks[0] * blocks[1]))
        gx = xp.reshape(col2im_array(xp, cols, tuple(x4.shape[2:]), k, d, p, s), x.shape)
    if output_mask[1]:
        cols = im2col_array(xp, _as_4d(xp, x), k, d, p, s)
        cols = xp.reshape(cols, (n, groups, -1, blocks[0] * blocks[1]))
        gw = xp.sum(xp.matmul(g4, xp.matrix_transpose(cols)), axis=0)
        gw = xp.reshape(gw, weight.shape)
    if output_mask[2]:
        gb = xp.sum(g, axis=(0,) + tuple(range(2, g.ndim)))
    return gx, gw, gb


# -- NumPy kernels ---------------------------------------------------------------------------

# Note [Convolution in CHWN]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# In PyTorch's ``(N, C, H, W)`` layout a window's row is ``kw`` values of one plane and the
# copies into the columns (and the backward's additions out of them) run NumPy's inner loop
# once per few values.  The CPU kernels put the batch last: the input, zero-padded, becomes
# ``(C, Hp, Wp, N)``, where window position ``(i, j)``'s values for every output row are
# runs of ``bw * N`` contiguous values (with stride 1 along the width; ``N`` otherwise).
# The columns are ``(C * kh * kw, bh * bw * N)`` -- one strided copy of the padded input --
# and the forward is one GEMM per group, ``weight (O, C * kh * kw) @ cols``, whose
# ``(O, bh, bw, N)`` result goes back to ``(N, O, bh, bw)`` in one copy.  The bias is one
# more column of the weight against a row of ones in the columns (an add of a ``(O, 1)``
# operand along the rows would be buffered by NumPy, at twice the add's cost).  The
# backward takes ``grad`` to ``(O, bh * bw * N)`` once; the weight's gradient is
# ``grad @ cols^T``, the bias's a contiguous row sum, and the input's the adjoint of the
# copy: ``weight^T @ grad`` added window position by window position (``kh * kw`` additions
# of ``C * bh`` runs each) into a ``(C, Hp, Wp, N)`` canvas, cut and transposed back.


def _chwn(x4, p):
    """``x4`` ``(N, C, H, W)`` zero-padded by ``p`` and laid out ``(C, Hp, Wp, N)``."""
    n, c, h, w = x4.shape
    ph, pw = p
    out = np.empty((c, h + 2 * ph, w + 2 * pw, n), x4.dtype)
    out[:, ph:ph + h, pw:pw + w, :] = x4.transpose(1, 2, 3, 0)
    if ph:  # zeros around the input only, not under it
        out[:, :ph] = 0
        out[:, ph + h:] = 0
    if pw:
        out[:, ph:ph + h, :pw] = 0
        out[:, ph:ph + h, pw + w:] = 0
    return out


def _window_view(chwn, k, d, s, blocks):
    """The windows of a ``(C, Hp, Wp, N)`` array as a view ``(C, kh, kw, bh, bw, N)``."""
    sc, sh, sw, sn = chwn.strides
    shape = (chwn.shape[0], k[0], k[1], blocks[0], blocks[1], chwn.shape[3])
    strides = (sc, sh * d[0], sw * d[1], sh * s[0], sw * s[1], sn)
    # an ndarray on chwn's buffer (what as_strided makes, without its Python layers: 10 us
    # a call); every window lies inside chwn, which the view keeps alive
    view = np.ndarray(shape, chwn.dtype, chwn, 0, strides)
    view.flags.writeable = False
    return view


def _chwn_cols(x4, k, d, p, s, blocks, ones: bool = False):
    """The columns ``(C * kh * kw, bh * bw * N)`` (Note [Convolution in CHWN]); with
    ``ones``, one more row of ones (the bias's factor)."""
    view = _window_view(_chwn(x4, p), k, d, s, blocks)
    rows, width = view.shape[0] * k[0] * k[1], view[0, 0, 0].size
    cols = np.empty((rows + ones, width), x4.dtype)
    np.copyto(cols[:rows].reshape(view.shape), view)
    if ones:
        cols[rows] = 1
    return cols


def _grouped_product(a, b, groups):
    """``a (O, K) @ b (K, M)`` per group: ``(O, M)``."""
    if groups == 1:
        return np.matmul(a, b)
    a3 = a.reshape((groups, a.shape[0] // groups, -1))
    b3 = b.reshape((groups, b.shape[0] // groups, -1))
    return np.matmul(a3, b3).reshape((a.shape[0], -1))


def _generic_only(x, weight):
    """Inputs the NumPy kernels leave to the generic ones: empty batches and arrays."""
    return x.size == 0 or weight.size == 0


def _np_convolution(xp, x, weight, bias, stride, padding, dilation, transposed,
                    output_padding, groups):
    # NumPy arrays answer the checks themselves (their dtypes have a kind and a name)
    shape, (k, d, p, s, blocks) = _checked_forward(
        x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    if _generic_only(x, weight):
        return _convolution(np, x, weight, bias, stride, padding, dilation, transposed,
                            output_padding, groups)
    # See Note [Convolution in CHWN]
    n, out_channels = x.shape[0], weight.shape[0]
    w2 = weight.reshape((out_channels, -1))
    fold = bias is not None and groups == 1  # the bias as one more column of the weight
    cols = _chwn_cols(_as_4d(np, x), k, d, p, s, blocks, ones=fold)
    if fold:
        w2 = np.concatenate([w2, bias.reshape((out_channels, 1))], axis=1)
    out = _grouped_product(w2, cols, groups)
    if bias is not None and not fold:
        out += np.repeat(bias, out.shape[1]).reshape(out.shape)
    out = out.reshape((out_channels, blocks[0] * blocks[1], n)).transpose(2, 0, 1)
    result = np.empty((n, out_channels, blocks[0] * blocks[1]), out.dtype)
    np.copyto(result, out)
    return result.reshape(shape)


def _np_convolution_backward(xp, g, x, weight, bias_sizes, stride, padding, dilation,
                             transposed, output_padding, groups, output_mask):
    _, (k, d, p, s, blocks) = _checked_backward(
        g, x, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
        groups, output_mask)
    if _generic_only(x, weight) or g.dtype != x.dtype:
        return _convolution_backward(np, g, x, weight, bias_sizes, stride, padding, dilation,
                                     transposed, output_padding, groups, output_mask)
    # See Note [Convolution in CHWN]
    n, out_channels = x.shape[0], weight.shape[0]
    w2 = weight.reshape((out_channels, -1))
    gt = np.ascontiguousarray(g.reshape((n, out_channels, -1)).transpose(1, 2, 0))
    gt = gt.reshape((out_channels, -1))  # (O, bh * bw * N)
    gx = gw = gb = None
    if output_mask[2]:
        gb = np.add.reduce(gt, axis=1)
    if output_mask[1]:
        gw = _weight_gradient(gt, _chwn_cols(_as_4d(np, x), k, d, p, s, blocks), groups)
        gw = gw.reshape(weight.shape)
    if output_mask[0]:
        gx = _input_gradient(x, w2, gt, groups, k, d, p, s, blocks)
    return gx, gw, gb


def _weight_gradient(gt, cols, groups):
    """``grad @ cols^T`` per group, ``(O, C / G * kh * kw)``.

    With one group it is computed as ``(cols @ grad^T)^T``: the same products, but
    OpenBLAS takes 84 against 138 us for the CNN example's second convolution (``cols``
    ``(72, 2304)``, ``grad`` ``(16, 2304)``) when the long axis is the inner one of both
    contiguous operands' rows rather than of a transposed operand; the first
    convolution's ``(9, 9216)`` takes 17 us either way."""
    if groups == 1:
        return np.matmul(cols, gt.T).T
    return _grouped_product(gt, _transposed_groups(cols, groups), groups)


def _transposed_groups(cols, groups):
    """``cols`` ``(G * K, M)`` as ``(G * M, K)``: each group's block transposed (the second
    factor of ``grad @ cols^T`` per group)."""
    if groups == 1:
        return cols.T
    return cols.reshape((groups, -1, cols.shape[1])).transpose(0, 2, 1).reshape(
        (-1, cols.shape[0] // groups))


def _input_gradient(x, w2, gt, groups, k, d, p, s, blocks):
    """``weight^T @ grad`` per group, added back window position by window position."""
    n, c = x.shape[0], x.shape[1]
    out_channels = w2.shape[0]
    if groups == 1:
        gcols = np.matmul(w2.T, gt)
    else:
        w3 = w2.reshape((groups, out_channels // groups, -1)).transpose(0, 2, 1)
        gcols = np.matmul(w3, gt.reshape((groups, out_channels // groups, -1)))
    gcols = gcols.reshape((c, k[0], k[1], blocks[0], blocks[1], n))
    x4 = _as_4d(np, x)
    h, w = x4.shape[2:]
    (ph, pw), (sh, sw), (dh, dw), (bh, bw) = p, s, d, blocks
    canvas = np.zeros((c, h + 2 * ph, w + 2 * pw, n), x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            canvas[:, i * dh:i * dh + sh * (bh - 1) + 1:sh,
                   j * dw:j * dw + sw * (bw - 1) + 1:sw] += gcols[:, i, j]
    # the interior (runs of w * N values), then one transpose of (C * h * w, N): two copies
    # with long inner loops rather than one whose rows are w values
    image = np.ascontiguousarray(canvas[:, ph:ph + h, pw:pw + w, :]).reshape((-1, n))
    return np.ascontiguousarray(image.T).reshape(x.shape)


# -- test data -------------------------------------------------------------------------------

#: (input shape, weight shape, bias, stride, padding, dilation, groups)
_CASES = [
    ((2, 3, 5, 6), (4, 3, 2, 3), True, (1, 1), (0, 0), (1, 1), 1),
    ((1, 4, 7, 5), (6, 2, 3, 2), False, (2, 3), (1, 2), (2, 1), 2),
    ((2, 2, 4, 4), (3, 2, 3, 3), True, (1, 1), (1, 1), (1, 1), 1),
    ((3, 4, 6), (4, 1, 3), True, (2,), (1,), (2,), 4),  # 1-D, depthwise
    ((2, 1, 1, 6), (2, 1, 1, 3), False, (1, 2), (0, 1), (1, 2), 1),  # 1-D as height 1
]


def _forward_ref(x, weight, bias, stride, padding, dilation, transposed, output_padding,
                 groups):
    """Straight from the definition, one output position at a time."""
    (kh, kw), (dh, dw), (ph, pw), (sh, sw), (bh, bw) = geometry(
        "convolution", x, weight, stride, padding, dilation, transposed, output_padding,
        groups)
    x4 = x if x.ndim == 4 else x[:, :, None, :]
    w4 = weight if weight.ndim == 4 else weight[:, :, None, :]
    n, c = x4.shape[:2]
    o, cg = w4.shape[:2]
    padded = np.zeros((n, c, x4.shape[2] + 2 * ph, x4.shape[3] + 2 * pw), x.dtype)
    padded[:, :, ph:ph + x4.shape[2], pw:pw + x4.shape[3]] = x4
    out = np.zeros((n, o, bh, bw), x.dtype)
    og = o // groups
    for y in range(bh):
        for z in range(bw):
            patch = padded[:, :, y * sh:y * sh + (kh - 1) * dh + 1:dh,
                           z * sw:z * sw + (kw - 1) * dw + 1:dw]
            for gi in range(groups):
                part = patch[:, gi * cg:(gi + 1) * cg].reshape((n, -1))
                out[:, gi * og:(gi + 1) * og, y, z] = \
                    part @ w4[gi * og:(gi + 1) * og].reshape((og, -1)).T
    if bias is not None:
        out = out + bias[:, None, None]
    return out.reshape((n, o) + ((bh, bw) if x.ndim == 4 else (bw,)))


def _forward_samples(dtype, rng):
    out = []
    for xs, ws, bias, s, p, d, groups in _CASES:
        b = make_array((ws[0],), dtype, rng) if bias else None
        out.append(SampleInput((make_array(xs, dtype, rng), make_array(ws, dtype, rng), b,
                                s, p, d, False, (0,) * len(s), groups),
                               name=f"{xs}*{ws} groups={groups}"))
    return out


def _backward_ref(g, x, weight, bias_sizes, stride, padding, dilation, transposed,
                  output_padding, groups, output_mask):
    return _convolution_backward(np, g, x, weight, bias_sizes, stride, padding, dilation,
                                 transposed, output_padding, groups, output_mask)


def _backward_samples(dtype, rng):
    out = []
    masks = [(True, True, True), (True, True, False), (True, True, True),
             (True, False, True), (False, True, False)]
    for (xs, ws, bias, s, p, d, groups), mask in zip(_CASES, masks):
        x, w = make_array(xs, dtype, rng), make_array(ws, dtype, rng)
        shape = _forward_ref(x, w, None, s, p, d, False, (0,), groups).shape
        out.append(SampleInput((make_array(shape, dtype, rng), x, w,
                                (ws[0],) if bias else None, s, p, d, False,
                                (0,) * len(s), groups, mask),
                               name=f"{xs}*{ws} mask={mask}"))
    return out


def _errors():
    x, w = np.ones((1, 4, 5, 5), np.float32), np.ones((2, 4, 3, 3), np.float32)
    conv = (None, (1, 1), (0, 0), (1, 1))
    yield ErrorInput(SampleInput((x, w, *conv, True, (0, 0), 1)), NotImplementedError,
                     "convolution: transposed convolutions are not implemented")
    yield ErrorInput(SampleInput((x, w, *conv, False, (0, 0), 2)), ValueError,
                     r"convolution: given groups=2, weight of size \[2, 4, 3, 3\]")
    yield ErrorInput(SampleInput((x, np.ones((2, 4, 6, 6), np.float32), *conv, False, (0, 0),
                                  1)), ValueError, "convolution: calculated padded input size")
    yield ErrorInput(SampleInput((x, w, np.ones(3, np.float32), (1, 1), (0, 0), (1, 1),
                                  False, (0, 0), 1)), ValueError,
                     r"convolution: expected bias of shape \[2\]")
    yield ErrorInput(SampleInput((x, w.astype(np.float64), *conv, False, (0, 0), 1)),
                     TypeError, r"convolution: input type \(float32\) and weight type")
    yield ErrorInput(SampleInput((x, w, None, (0, 1), (0, 0), (1, 1), False, (0, 0), 1)),
                     ValueError, "convolution: stride should be greater than zero")


defop("convolution(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] dilation, bool transposed, int[] output_padding, int groups) -> Tensor",
      impl=in_float32(_convolution, 0), cpu_impl=in_float32(_np_convolution, 0),
      meta=_forward_meta, names=(),
      info=OpInfo(ref=_forward_ref, dtypes=FLOATS, samples=_forward_samples, errors=_errors,
                  rtol=1e-4, atol=1e-5))
defop("convolution_backward(Tensor grad_output, Tensor input, Tensor weight, "
      "int[]? bias_sizes, int[] stride, int[] padding, int[] dilation, bool transposed, "
      "int[] output_padding, int groups, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      impl=in_float32(_convolution_backward, 1),
      cpu_impl=in_float32(_np_convolution_backward, 1), meta=_backward_meta,
      names=(), info=OpInfo(ref=_backward_ref, dtypes=FLOATS, samples=_backward_samples,
                            rtol=1e-4, atol=1e-5))
