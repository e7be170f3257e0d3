"""Convolution, pooling and sliding windows of ``md.nn.functional``: ``conv1d``, ``conv2d``,
``max_pool1d``/``max_pool2d``, ``avg_pool1d``/``avg_pool2d``, ``unfold``, ``fold``.

The convolutions call the catalogue's ``convolution`` op (Note [Convolution kernels] in
ops/conv.py), max pooling ``max_pool2d_with_indices`` (Note [Max pooling kernels]
in ops/pooling.py); average pooling, ``unfold`` and ``fold`` are compositions of the
``im2col``/``col2im`` kernels with ``sum`` (Note [Convolution through im2col] in
ops/convolution.py).  So autograd (every order), modes and every backend get them.  Padding
the kernels cannot express -- the right-hand side of ``padding="same"`` with an even kernel,
``ceil_mode``'s extra rows -- is the catalogue's ``pad``.
"""

from __future__ import annotations

from mdtensor.tensors.tensor import Tensor

__all__ = ["avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "fold", "max_pool1d",
           "max_pool2d", "unfold"]


def _md():
    import mdtensor

    return mdtensor


def _aten():
    from mdtensor.dispatch.namespaces import namespaces

    return namespaces.aten


def _ints(op: str, name: str, value, n: int, minimum: int) -> tuple[int, ...]:
    """``value`` (an int or a sequence of 1 or ``n`` ints) as ``n`` ints, checked."""
    if type(value) is int and value >= minimum:
        return (value,) * n  # the common cases first, without the checks' generators
    if type(value) is tuple and len(value) == n and \
            all([type(v) is int and v >= minimum for v in value]):
        return value
    seq = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    if len(seq) == 1:
        seq = seq * n
    if len(seq) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
        raise ValueError(f"{op}: expected {name} to be an int or {n} ints, got {value!r}")
    if any(v < minimum for v in seq):
        which = "positive" if minimum else "non-negative"
        raise ValueError(f"{op}: {name} must be {which}, got {value!r}")
    return seq


def _pad2d(x: Tensor, top: int, bottom: int, left: int, right: int, value: float) -> Tensor:
    """``x`` with constant ``value`` rows and columns around its last two dimensions: the
    catalogue's ``pad``, which differentiates)."""
    return _md().pad(x, (left, right, top, bottom), value=value)


def _check_input(op: str, input: Tensor, spatial: int, kinds: str = "fc") -> None:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}: expected a Tensor input, got {type(input).__name__}")
    if input.ndim not in (spatial + 1, spatial + 2):
        raise ValueError(f"{op}: expected {spatial + 1}-D (unbatched) or {spatial + 2}-D "
                         f"(batched) input, but got input of size: {list(input.shape)}")
    if input.dtype.kind not in kinds:
        what = "a floating-point" if kinds == "fc" else "a real (floating-point or integer)"
        raise TypeError(f"{op}: expected {what} input, got {input.dtype.name}")


# -- convolution -----------------------------------------------------------------------------


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """2-D convolution (cross-correlation, as PyTorch) of ``input`` ``(N, C, H, W)`` or
    ``(C, H, W)`` with ``weight`` ``(out_channels, C / groups, kh, kw)``.

    ``padding`` is an int, a pair, ``"valid"`` (none) or ``"same"`` (the output has the
    input's size; stride 1 only; an odd total padding puts the extra row/column at the
    bottom/right, as PyTorch).  ``groups`` splits the channels into independent groups.

    Raises:
        TypeError: an input is not floating, or the dtypes differ.
        ValueError: shapes, channels, groups or parameters that do not fit (PyTorch's
            checks, in the op's words).
    """
    return _conv("conv2d", input, weight, bias, stride, padding, dilation, groups, 2)


def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride=1, padding=0,
           dilation=1, groups: int = 1) -> Tensor:
    """1-D convolution of ``input`` ``(N, C, L)`` or ``(C, L)`` with ``weight``
    ``(out_channels, C / groups, k)``; the options are ``conv2d``'s (computed as a 2-D
    convolution of height 1)."""
    return _conv("conv1d", input, weight, bias, stride, padding, dilation, groups, 1)


def _conv(op, input, weight, bias, stride, padding, dilation, groups, spatial):
    md = _md()
    _check_input(op, input, spatial)
    if not isinstance(weight, Tensor) or weight.ndim != spatial + 2:
        raise ValueError(f"{op}: expected a {spatial + 2}-D weight (out_channels, "
                         f"in_channels / groups, *kernel_size), got "
                         f"{list(getattr(weight, 'shape', [])) or type(weight).__name__}")
    if weight.dtype != input.dtype or (bias is not None and bias.dtype != input.dtype):
        other = weight.dtype if weight.dtype != input.dtype else bias.dtype
        raise TypeError(f"{op}: input type ({input.dtype.name}) and weight/bias type "
                        f"({other.name}) should be the same")
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(f"{op}: non-positive groups is not supported, got {groups!r}")
    stride = _ints(op, "stride", stride, spatial, 1)
    dilation = _ints(op, "dilation", dilation, spatial, 1)
    kernel = tuple(weight.shape[2:])
    pads = _conv_padding(op, padding, kernel, dilation, stride, spatial)
    batched = input.ndim == spatial + 2
    x = input if batched else md.unsqueeze(input, 0)
    out_channels, per_group = weight.shape[0], weight.shape[1]
    channels = x.shape[1]
    if channels != per_group * groups:
        raise ValueError(f"{op}: given groups={groups}, weight of size {list(weight.shape)}, "
                         f"expected input{list(x.shape)} to have {per_group * groups} "
                         f"channels, but got {channels} channels instead")
    if out_channels % groups:
        raise ValueError(f"{op}: given groups={groups}, expected weight to be divisible by "
                         f"{groups} at dimension 0, but got weight of size "
                         f"{list(weight.shape)} instead")
    if bias is not None and tuple(bias.shape) != (out_channels,):
        raise ValueError(f"{op}: expected bias of shape [{out_channels}], got "
                         f"{list(bias.shape)}")
    effective = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    padded = [x.shape[2 + i] + sum(pads[i]) for i in range(spatial)]
    if any(p < e for p, e in zip(padded, effective)):
        raise ValueError(f"{op}: calculated padded input size per channel: {padded}; "
                         f"kernel size: {effective}; kernel size can't be greater than "
                         f"actual input size {list(x.shape[2:])}")
    if any(before != after for before, after in pads):
        # "same" with an even kernel: the extra row/column after, the rest in the op
        x = md.pad(x, tuple(v for before, after in reversed(pads) for v in (0, after - before)))
    out = _aten().convolution(x, weight, bias, stride, tuple(before for before, _ in pads),
                              dilation, False, (0,) * spatial, groups)
    return out if batched else md.squeeze(out, 0)


def _conv_padding(op, padding, kernel, dilation, stride, spatial):
    """``((before, after), ...)`` per spatial dimension."""
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * spatial
        if padding != "same":
            raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                             f"'valid' or 'same'")
        if any(s != 1 for s in stride):
            raise ValueError(f"{op}: padding='same' is not supported for strided "
                             f"convolutions")
        totals = [d * (k - 1) for k, d in zip(kernel, dilation)]
        return tuple((t // 2, t - t // 2) for t in totals)
    return tuple((p, p) for p in _ints(op, "padding", padding, spatial, 0))


# -- unfold and fold -------------------------------------------------------------------------


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """The sliding windows of ``input`` ``(N, C, H, W)`` (or ``(C, H, W)``) as columns:
    ``(N, C * kh * kw, L)`` (PyTorch's ``F.unfold``, the ``im2col`` op)."""
    return _aten().im2col(input, kernel_size, dilation, padding, stride)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Sum columns ``(N, C * kh * kw, L)`` back into an ``(N, C, *output_size)`` image
    (PyTorch's ``F.fold``, the ``col2im`` op; the adjoint of ``unfold``)."""
    return _aten().col2im(input, output_size, kernel_size, dilation, padding, stride)


# -- pooling ---------------------------------------------------------------------------------


def _pool_size(op, size, k, s, p, d, ceil_mode):
    """PyTorch's ``pooling_output_shape``: windows along one axis."""
    numerator = size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)
    out = numerator // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _pool_params(op, input, kernel_size, stride, padding, dilation, ceil_mode, spatial):
    _check_input(op, input, spatial, "iuf" if op.startswith("max") else "fc")
    k = _ints(op, "kernel_size", kernel_size, spatial, 1)
    s = k if stride is None or (isinstance(stride, (list, tuple)) and not stride) else \
        _ints(op, "stride", stride, spatial, 1)
    p = _ints(op, "padding", padding, spatial, 0)
    d = _ints(op, "dilation", dilation, spatial, 1)
    for ki, pi, di in zip(k, p, d):
        if pi * 2 > (ki - 1) * di + 1:
            raise ValueError(f"{op}: pad should be at most half of effective kernel size, "
                             f"but got pad={pi}, kernel_size={ki} and dilation={di}")
    size = tuple(input.shape[-spatial:])
    out = tuple(_pool_size(op, size[i], k[i], s[i], p[i], d[i], ceil_mode)
                for i in range(spatial))
    if any(o < 1 for o in out) or any(n == 0 for n in input.shape[-spatial - 1:]):
        raise ValueError(f"{op}: given input of size {list(input.shape)}, the calculated "
                         f"output size {list(out)} is too small")
    if spatial == 1:
        k, s, p, d, size, out = ((first, *v) for first, v in
                                 zip((1, 1, 0, 1, 1, 1), (k, s, p, d, size, out)))
    return k, s, p, d, size, out


def _windows(x, k, s, p, d, size, out, value):
    """``x`` (4-D) padded with ``value`` and cut into windows: ``(N, C, kh * kw, L)``."""
    extra = [max(0, (out[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 - (size[i] + 2 * p[i]))
             for i in range(2)]
    x = _pad2d(x, p[0], p[0] + extra[0], p[1], p[1] + extra[1], value)
    cols = _aten().im2col(x, k, d, (0, 0), s)
    return cols.reshape((x.shape[0], x.shape[1], k[0] * k[1], out[0] * out[1]))


def _as_4d(input, spatial):
    md = _md()
    x = input if input.ndim == spatial + 2 else md.unsqueeze(input, 0)
    return md.unsqueeze(x, 2) if spatial == 1 else x


def _from_4d(out, input, spatial):
    md = _md()
    out = md.squeeze(out, 2) if spatial == 1 else out
    return out if input.ndim == spatial + 2 else md.squeeze(out, 0)


def max_pool2d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """The maximum of each window of ``input`` ``(N, C, H, W)`` or ``(C, H, W)``;
    ``stride`` defaults to ``kernel_size``, padding counts as ``-inf``.  With
    ``return_indices``, also the flat index (``h * W + w``) of each maximum in its input
    plane, the first one on ties; NaN wins, as in PyTorch.  The gradient goes to that
    index."""
    return _max_pool("max_pool2d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, 2)


def max_pool1d(input: Tensor, kernel_size, stride=None, padding=0, dilation=1,
               ceil_mode: bool = False, return_indices: bool = False):
    """``max_pool2d`` along the last dimension of ``(N, C, L)`` or ``(C, L)``."""
    return _max_pool("max_pool1d", input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices, 1)


def _max_pool(op, input, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
              spatial):
    k, s, p, d, _, _ = _pool_params(op, input, kernel_size, stride, padding, dilation,
                                    ceil_mode, spatial)
    x = input if spatial == 2 else _md().unsqueeze(input, -2)
    values, indices = _aten().max_pool2d_with_indices(x, k, s, p, d, ceil_mode)
    if spatial == 1:
        values, indices = _md().squeeze(values, -2), _md().squeeze(indices, -2)
    return (values, indices) if return_indices else values


def avg_pool2d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True, divisor_override: int | None = None) -> Tensor:
    """The mean of each window of ``input`` ``(N, C, H, W)`` or ``(C, H, W)``; ``stride``
    defaults to ``kernel_size``.  The divisor is PyTorch's: the window's size within the
    zero-padded input (``count_include_pad``) or within the input itself, or
    ``divisor_override``."""
    return _avg_pool("avg_pool2d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override, 2)


def avg_pool1d(input: Tensor, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """``avg_pool2d`` along the last dimension of ``(N, C, L)`` or ``(C, L)``."""
    return _avg_pool("avg_pool1d", input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, None, 1)


def _avg_pool(op, input, kernel_size, stride, padding, ceil_mode, count_include_pad,
              divisor_override, spatial):
    md = _md()
    k, s, p, d, size, out = _pool_params(op, input, kernel_size, stride, padding, 1,
                                         ceil_mode, spatial)
    if divisor_override is not None and (not isinstance(divisor_override, int)
                                         or divisor_override == 0):
        raise ValueError(f"{op}: divisor must be not zero, got {divisor_override!r}")
    x = _as_4d(input, spatial)
    sums = md.sum(_windows(x, k, s, p, d, size, out, 0.0), axis=2)
    if divisor_override is not None:
        divisor = float(divisor_override)
    else:
        counts = [_window_counts(size[i], k[i], s[i], p[i], out[i], count_include_pad)
                  for i in range(2)]
        divisor = md.asarray([[a * b for b in counts[1]] for a in counts[0]],
                             dtype=x.dtype, device=x.device).reshape((-1,))
    return _from_4d((sums / divisor).reshape(x.shape[:2] + out), input, spatial)


def _window_counts(size, k, s, p, out, count_include_pad):
    """The divisor of each window along one axis (PyTorch's ``avg_pool2d`` kernel)."""
    counts = []
    for i in range(out):
        start = i * s - p
        end = min(start + k, size + p)
        inside = min(end, size) - max(start, 0)
        counts.append(end - start if count_include_pad else inside)
    return counts
