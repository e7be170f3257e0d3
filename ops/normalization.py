"""Batch normalization with batch statistics: ``_native_batch_norm_legit.no_stats`` and
``native_batch_norm_backward`` (PyTorch's ops and schemas).

Note [Batch norm kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~
``md.nn.functional.batch_norm`` while training normalizes with the batch's statistics.  As a
composite that was some 25 dispatched ops forward and backward, 3-4x PyTorch's time at the
CNN example's sizes; these two ops are PyTorch's pair: the forward returns the output, the
batch mean and ``1 / sqrt(var + eps)`` (biased variance), the backward the gradients of
input, weight and bias in one kernel each.  The running statistics are not this op's
business (PyTorch's ``no_stats`` overload): ``F.batch_norm`` updates them from the saved
mean and inverse deviation, in place under ``no_grad``.

The derivative of the forward op calls the backward op when backward records nothing; with
``create_graph`` it composes the same formula from public ops, whose own derivatives give
the higher orders (as matmul and ``matmul_backward``, Note [matmul_backward] in
ops/linalg.py).  The backward op's own derivative, for direct callers, is the vector-Jacobian
product of that composite formula (ops/normalization_derivatives.py).
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt

from ._cpu_kernels import register_arrays_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._meta_fns import ArraySpec
from ._promotion import dtype_of
from ._samples import make_array
from .elementwise import FLOATS

#: the low-precision wrapper other chapters' kernels use (ops/conv.py)
__all__ = ["in_float32"]


def _check(op: str, x, weight=None, bias=None) -> tuple:
    """``(channels, reduced axes, count, per-channel shape)``, checked."""
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    if x.ndim < 2:
        raise ValueError(f"{op}: expected an input of 2 or more dimensions (N, C, *), got "
                         f"shape {tuple(x.shape)}")
    channels = x.shape[1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (channels,):
            raise ValueError(f"{op}: expected {name} of shape [{channels}] (one per channel), "
                             f"got {list(t.shape)}")
    axes = (0,) + tuple(range(2, x.ndim))
    count = 1
    for a in axes:
        count *= x.shape[a]
    return channels, axes, count, (1, channels) + (1,) * (x.ndim - 2)


def _forward_meta(x, weight, bias, training, momentum, eps):
    # one value per channel is F.batch_norm's error, not the op's (as PyTorch's)
    channels, *_ = _check("batch_norm", x, weight, bias)
    if not training:
        raise ValueError("batch_norm: running_mean and running_var must be defined in "
                         "evaluation mode (training=False)")
    return [(tuple(x.shape), x.dtype), ((channels,), x.dtype), ((channels,), x.dtype)]


def _forward(xp, x, weight, bias, training, momentum, eps):
    _forward_meta(ArraySpec(x), weight, bias, training, momentum, eps)
    _, axes, _, shape = _check("batch_norm", ArraySpec(x))
    mean = xp.mean(x, axis=axes)
    var = xp.var(x, axis=axes)
    invstd = 1.0 / xp.sqrt(var + eps)
    scale = invstd if weight is None else invstd * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    out = x * xp.reshape(scale, shape) + xp.reshape(shift, shape)
    return out, mean, invstd


# Note [Batch norm on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels view the input as ``(N, C, L)`` and reduce it without ``np.mean`` and
# ``np.var`` (whose Python layers and temporaries made ``var`` alone 180 us of the CNN
# example's 64x8x12x12 batch): the per-channel sums are ``np.add.reduce`` over N (adding
# whole contiguous planes) then over L, the sums of products ``np.einsum("ncl,ncl->c")``,
# one pass without a temporary.  The centered input is computed once and reused: the
# forward scales it in place into the output (``(x - mean) * scale + bias``, PyTorch's
# order), the backward takes ``sum(g * (x - mean))`` from it and then scales it in place
# into the input gradient's ``xhat`` term.  The per-channel operands are repeated to
# ``(C, L)`` first: NumPy 2 buffers a ``(C, 1)`` operand broadcast along the inner axis
# (copying it into a buffer, value by value), twice the cost of the operation itself,
# while a ``(C, L)`` one broadcasts along ``N`` alone and runs unbuffered; an ``(N, C)``
# input needs no repeat (its ``(C,)`` operands broadcast along ``N``).
#
# Arrays of up to 4096 elements are a few microseconds of arithmetic under fixed costs, so
# there each NumPy call counts: the sums are one ``np.add.reduce`` over ``(0, 2)`` (two
# reductions cost 1.8 us more), the sums of products a product and that sum (einsum's
# setup costs 1.5 us), the per-channel operands broadcast as ``(C, 1)`` (the buffer costs
# less than the repeat), and the statistics are computed in place (``1 / sqrt(v)`` as
# ``np.reciprocal``, the same rounding, without a Python scalar's conversion).
#
# Both CPU kernels read their Tensor arguments' arrays themselves (``register_arrays_direct``
# in ops/_cpu_kernels.py: the generic kernel's unwrapping of optional Tensors cost 2-3 us of
# the backward's 10); empty inputs, low precision, other devices and every error take the
# generic impl.

#: the input size up to which the kernels take the small arrays' calls
_SMALL = 4096


def _tiled(values, x3):
    """Per-channel ``values`` as an operand of an ``(N, C, L)`` array: repeated along
    ``(C, L)``, an operand that broadcasts along ``N`` only, or ``(C, 1)`` for a small
    array (Note [Batch norm on NumPy])."""
    if x3.size <= _SMALL:
        return values.reshape(-1, 1)
    return values.repeat(x3.shape[2]).reshape(x3.shape[1:])  # (np.repeat: 2 us more)


def _channel_sums(x3):
    """The per-channel sums of an ``(N, C, L)`` or ``(N, C)`` array."""
    if x3.ndim == 2:
        return np.add.reduce(x3, 0)
    if x3.size <= _SMALL:
        return np.add.reduce(x3, (0, 2))
    return np.add.reduce(np.add.reduce(x3, 0), 1)


def _channel_dot(a, b):
    """The per-channel sums of ``a * b``: one pass without a temporary for large arrays,
    a product and a sum for small ones (einsum's own setup costs 1.5 us)."""
    if a.size > _SMALL:
        return np.einsum("ncl,ncl->c" if a.ndim == 3 else "nc,nc->c", a, b)
    return _channel_sums(a * b)


def _as_ncl(x):
    return x.reshape(x.shape[0], x.shape[1], -1)


def _forward_direct(x, weight, bias, training, momentum, eps):
    """The forward on NumPy arrays for a float32 or float64 input with values, in
    training, with per-channel ``weight`` and ``bias`` or None; else None (Note [Batch
    norm on NumPy])."""
    shape = x.shape
    channels = shape[1:2]
    if (len(shape) < 2 or x.dtype.char not in "fd" or not x.size or not training
            or weight is not None and weight.shape != channels
            or bias is not None and bias.shape != channels):
        return None
    x3 = _as_ncl(x)
    count = x.size // shape[1]
    mean = _channel_sums(x3)
    mean /= count
    centered = x3 - _tiled(mean, x3)
    invstd = _channel_dot(centered, centered)
    invstd /= count
    invstd += eps
    np.sqrt(invstd, invstd)
    np.reciprocal(invstd, invstd)
    scale = invstd if weight is None else invstd * weight
    np.multiply(centered, _tiled(scale, x3), centered)
    if bias is not None:
        np.add(centered, _tiled(bias, x3), centered)
    return centered.reshape(shape), mean, invstd


def _np_forward(xp, x, weight, bias, training, momentum, eps):
    out = _forward_direct(x, weight, bias, training, momentum, eps)
    return out if out is not None else _forward(np, x, weight, bias, training, momentum, eps)


def _backward_meta(g, x, weight, running_mean, running_var, save_mean, save_invstd, train,
                   eps, output_mask):
    channels, *_ = _check("native_batch_norm_backward", x, weight)
    if tuple(g.shape) != tuple(x.shape):
        raise ValueError(f"native_batch_norm_backward: expected grad_out of the input's shape "
                         f"{list(x.shape)}, got {list(g.shape)}")
    if len(output_mask) != 3:
        raise ValueError(f"native_batch_norm_backward: output_mask must have 3 entries, got "
                         f"{len(output_mask)}")
    if (save_mean if train else running_mean) is None:
        raise ValueError("native_batch_norm_backward: needs save_mean and save_invstd "
                         "(train=True) or running_mean and running_var (train=False)")
    shapes = [tuple(x.shape), (channels,), (channels,)]
    return [(s, x.dtype) if m else None for s, m in zip(shapes, output_mask)]


def _statistics(xp, running_mean, running_var, save_mean, save_invstd, train, eps):
    if train:
        return save_mean, save_invstd
    return running_mean, 1.0 / xp.sqrt(running_var + eps)


def _backward(xp, g, x, weight, running_mean, running_var, save_mean, save_invstd, train,
              eps, output_mask):
    _backward_meta(ArraySpec(g), ArraySpec(x), weight, running_mean, running_var, save_mean,
                   save_invstd, train, eps, output_mask)
    _, axes, count, shape = _check("native_batch_norm_backward", ArraySpec(x))
    mean, invstd = _statistics(xp, running_mean, running_var, save_mean, save_invstd, train,
                               eps)
    xhat = (x - xp.reshape(mean, shape)) * xp.reshape(invstd, shape)
    gb = xp.sum(g, axis=axes)
    gw = xp.sum(g * xhat, axis=axes)
    scale = invstd if weight is None else invstd * weight
    gx = None
    if output_mask[0]:
        if train:
            gx = (g - xp.reshape(gb / count, shape) - xhat * xp.reshape(gw / count, shape)) \
                * xp.reshape(scale, shape)
        else:
            gx = g * xp.reshape(scale, shape)
    return (gx, gw if output_mask[1] else None, gb if output_mask[2] else None)


def _np_backward(g, x, weight, running_mean, running_var, save_mean, save_invstd, train,
                 eps, output_mask):
    """The common case on NumPy arrays of one floating dtype, or None (Note [Batch norm on
    NumPy])."""
    shape = x.shape
    mean, spread = (save_mean, save_invstd) if train else (running_mean, running_var)
    channels = shape[1:2]
    if (g.shape != shape or len(shape) < 2 or x.dtype.char not in "fd" or g.dtype != x.dtype
            or not x.size or len(output_mask) != 3
            or getattr(mean, "shape", None) != channels
            or getattr(spread, "shape", None) != channels
            or weight is not None and weight.shape != channels):
        return None  # the generic kernel, whose checks raise the op's errors
    invstd = spread if train else 1.0 / np.sqrt(spread + eps)
    count = x.size // shape[1]
    if len(shape) == 2:  # (N, C): the per-channel operands broadcast along N as they are
        x3, g3, tile = x, g, False
    else:
        x3, g3, tile = _as_ncl(x), _as_ncl(g), True
    gb = _channel_sums(g3)
    centered = x3 - (_tiled(mean, x3) if tile else mean)
    gw = _channel_dot(centered, g3) * invstd  # sum(g * (x - mean)) * invstd
    gx = None
    if output_mask[0]:
        scale = invstd if weight is None else invstd * weight
        if train:  # (g - gb / n - (x - mean) * invstd * gw / n) * scale, in ``centered``
            k, m = gw * (invstd * (-1.0 / count)), gb * (-1.0 / count)
            np.multiply(centered, _tiled(k, x3) if tile else k, centered)
            centered += g3
            centered += _tiled(m, x3) if tile else m
            centered *= _tiled(scale, x3) if tile else scale
            gx = centered
        else:
            gx = g3 * (_tiled(scale, x3) if tile else scale)
        gx = gx.reshape(shape)
    return (gx, gw if output_mask[1] else None, gb if output_mask[2] else None)


# Note [Batch norm in low precision]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's CPU kernels take float16 and bfloat16 inputs and compute in float32 (their
# "opmath" type), rounding the output and the saved statistics to the input's dtype.  So do
# these: ``in_float32`` casts every float16/bfloat16 array argument to float32, runs the
# kernel, and rounds its results to the input's dtype (ml_dtypes' bfloat16 has no einsum
# loop, and float16 sums would lose the statistics' precision).


_LOW = (dt.float16, dt.bfloat16)


def in_float32(kernel, input_at: int):
    """``kernel`` (``kernel(xp, *args)``) computed in float32 when its argument
    ``input_at`` is float16 or bfloat16 (Note [Batch norm in low precision])."""
    def run(xp, *args, **kwargs):
        dtype = dtype_of(args[input_at])
        if dtype is not dt.float16 and dtype is not dt.bfloat16:
            return kernel(xp, *args, **kwargs)
        f32 = xp.float32

        def wide(a):
            low = getattr(a, "dtype", None) is not None and dtype_of(a) in _LOW
            return xp.astype(a, f32) if low else a

        low = args[input_at].dtype
        result = kernel(xp, *map(wide, args), **{k: wide(v) for k, v in kwargs.items()})
        if not isinstance(result, tuple):
            return xp.astype(result, low)
        return tuple(None if r is None else xp.astype(r, low) for r in result)

    run.__name__ = kernel.__name__
    return run


# -- test data -------------------------------------------------------------------------------


def _forward_ref(x, weight, bias, training, momentum, eps):
    axes = (0,) + tuple(range(2, x.ndim))
    mean = x.astype(np.float64).mean(axis=axes)
    var = x.astype(np.float64).var(axis=axes)
    invstd = 1 / np.sqrt(var + eps)
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    out = (x - mean.reshape(shape)) * invstd.reshape(shape)
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out.astype(x.dtype), mean.astype(x.dtype), invstd.astype(x.dtype)


def _forward_samples(dtype, rng):
    out = []
    for shape, affine in (((5, 3), True), ((2, 3, 4), False), ((2, 2, 3, 2), True)):
        x = make_array(shape, dtype, rng) * 2 + 1
        w = make_array((shape[1],), dtype, rng) if affine else None
        b = make_array((shape[1],), dtype, rng) if affine else None
        out.append(SampleInput((x, w, b, True, 0.1, 1e-3), name=f"{shape} affine={affine}"))
    return out


def _backward_ref(g, x, weight, running_mean, running_var, save_mean, save_invstd, train,
                  eps, output_mask):
    return _backward(np, g, x, weight, running_mean, running_var, save_mean, save_invstd,
                     train, eps, output_mask)


def _backward_samples(dtype, rng):
    out = []
    # the gradcheck sweep differentiates the first output of the first three samples
    for shape, affine, mask in (((5, 3), True, (True, True, True)),
                                ((2, 3, 4), False, (True, False, True)),
                                ((2, 2, 3, 2), True, (True, True, True)),
                                ((2, 2, 3, 2), True, (False, True, False))):
        x = make_array(shape, dtype, rng) * 2 + 1
        w = make_array((shape[1],), dtype, rng) if affine else None
        _, mean, invstd = _forward_ref(x, w, None, True, 0.1, 1e-3)
        g = make_array(shape, dtype, rng)
        out.append(SampleInput((g, x, w, None, None, mean, invstd, True, 1e-3, mask),
                               name=f"{shape} mask={mask}"))
    # evaluation mode: the running statistics (the kernels' other branch)
    x, g = make_array((4, 3, 2), dtype, rng), make_array((4, 3, 2), dtype, rng)
    running_var = make_array((3,), dtype, rng) ** 2 + 0.5
    out.append(SampleInput((g, x, make_array((3,), dtype, rng), make_array((3,), dtype, rng),
                            running_var, None, None, False, 1e-3, (True, True, True)),
                           name="eval"))
    return out


def _errors():
    yield ErrorInput(SampleInput((np.ones((4, 3), np.float32), None, None, False, 0.1,
                                  1e-5)), ValueError, "batch_norm: running_mean and running_var")
    yield ErrorInput(SampleInput((np.ones((4, 3), np.float32), np.ones(2, np.float32), None,
                                  True, 0.1, 1e-5)), ValueError,
                     r"batch_norm: expected weight of shape \[3\]")


defop("_native_batch_norm_legit.no_stats(Tensor input, Tensor? weight, Tensor? bias, "
      "bool training, float momentum, float eps) -> (Tensor, Tensor, Tensor)",
      impl=in_float32(_forward, 0), cpu_impl=in_float32(_np_forward, 0),
      meta=_forward_meta, names=(),
      info=OpInfo(ref=_forward_ref, dtypes=FLOATS, samples=_forward_samples, errors=_errors,
                  rtol=1e-4, atol=1e-5))
defop("native_batch_norm_backward(Tensor grad_out, Tensor input, Tensor? weight, "
      "Tensor? running_mean, Tensor? running_var, Tensor? save_mean, Tensor? save_invstd, "
      "bool train, float eps, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
      impl=in_float32(_backward, 1), meta=_backward_meta, names=(),
      info=OpInfo(ref=_backward_ref, dtypes=FLOATS, samples=_backward_samples,
                  rtol=1e-4, atol=1e-5))
register_arrays_direct(CATALOGUE["aten::_native_batch_norm_legit"].functional[0],
                         _forward_direct)
register_arrays_direct(CATALOGUE["aten::native_batch_norm_backward"].functional[0],
                         _np_backward)
