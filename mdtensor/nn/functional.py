"""``md.nn.functional``: layers and losses as functions of tensors.

Every function here is a composite of public mdtensor ops (``md.matmul``, ``md.where``,
``md.log_softmax``, ...), so autograd, modes and every backend get it without kernels of
its own.  Where an op has a kink or a branch that may overflow, the composition picks
PyTorch's gradient at the kink (``leaky_relu`` and ``elu`` at 0) and keeps the unused
branch finite, so no ``0 * inf`` reaches a gradient.
"""

from __future__ import annotations

import warnings

from mdtensor.tensors.tensor import Tensor

from .. import _dtypes
from ._functional_attention import scaled_dot_product_attention
from ._functional_conv import (
    avg_pool1d,
    avg_pool2d,
    conv1d,
    conv2d,
    fold,
    max_pool1d,
    max_pool2d,
    unfold,
)
from ._functional_norm import batch_norm, group_norm, instance_norm

__all__ = [
    "avg_pool1d", "avg_pool2d", "batch_norm", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "conv1d", "conv2d", "cross_entropy", "dropout", "elu",
    "embedding", "fold", "gelu", "group_norm", "hardsigmoid", "hardswish", "hardtanh",
    "huber_loss", "instance_norm", "l1_loss", "layer_norm", "leaky_relu", "linear",
    "log_softmax", "logsigmoid", "max_pool1d", "max_pool2d", "mish", "mse_loss", "nll_loss",
    "normalize", "one_hot", "relu", "relu6", "scaled_dot_product_attention", "selu",
    "sigmoid", "silu", "smooth_l1_loss", "softmax", "softplus", "softsign", "tanh", "unfold",
]


def _md():
    import mdtensor

    return mdtensor


# -- layers ---------------------------------------------------------------------------------


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.mT + bias`` (``weight`` of shape ``(out_features, in_features)``).

    Raises:
        ValueError: ``input``'s last dimension is not ``in_features`` (from ``matmul``).
    """
    md = _md()
    out = md.matmul(input, weight.mT if weight.ndim >= 2 else weight)
    return out if bias is None else out + bias


def dropout(input: Tensor, p: float = 0.5, training: bool = True,
            inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)``
    while ``training``; the identity otherwise.  Draws from the device's default
    generator (``md.manual_seed``).

    Raises:
        ValueError: ``p`` is not in [0, 1].
    """
    if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
        raise ValueError(f"dropout: probability has to be between 0 and 1, but got {p}")
    md = _md()
    if not training or p == 0.0:
        return input
    out = md.dropout(input, float(p), True)
    if inplace:
        return input.copy_(out)
    return out


def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize over the last ``len(normalized_shape)`` dimensions (biased variance, as
    PyTorch), then scale by ``weight`` and shift by ``bias``.

    Raises:
        ValueError: ``input``'s trailing dimensions are not ``normalized_shape``.
    """
    md = _md()
    shape = _shape_tuple(normalized_shape)
    k = len(shape)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or input.ndim < k:
        raise ValueError(f"layer_norm: given normalized_shape={list(shape)}, expected input "
                         f"with shape [*, {', '.join(map(str, shape))}], but got input of "
                         f"size {list(input.shape)}")
    axes = tuple(range(-k, 0))
    centered = input - md.mean(input, axis=axes, keepdims=True)
    var = md.mean(centered * centered, axis=axes, keepdims=True)
    out = centered * md.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None,
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` picked by the integer tensor ``input``: shape
    ``input.shape + (embedding_dim,)``.

    ``padding_idx``'s rows get no gradient; ``max_norm`` first renormalizes, in place, the
    rows ``input`` names whose ``norm_type``-norm exceeds it (as PyTorch).

    Raises:
        TypeError: ``input`` is not an integer tensor.
        IndexError: an index is outside ``[0, num_embeddings)``.
        NotImplementedError: ``scale_grad_by_freq`` or ``sparse``.
    """
    md = _md()
    if input.dtype.kind not in "iu":
        raise TypeError(f"embedding: expected an integer index tensor, got {input.dtype.name}")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not "
                                  "supported")
    num = weight.shape[0]
    flat = input.reshape(-1)
    outside = (flat < 0) | (flat >= num)
    if flat.shape[0] and bool(md.any(outside)):
        raise IndexError(f"embedding: index {int(flat[outside][0])} is out of range for "
                         f"{num} embeddings")
    if max_norm is not None:
        _renorm_rows(weight, flat, max_norm, norm_type)
    out = md.index_select(weight, 0, flat).reshape((*input.shape, weight.shape[1]))
    if padding_idx is not None:
        pad = _padding_index(padding_idx, num)
        out = md.where(md.unsqueeze(input == pad, -1), out.detach(), out)
    return out


def _renorm_rows(weight: Tensor, flat: Tensor, max_norm: float, norm_type: float) -> None:
    md = _md()
    with md.no_grad():
        rows = md.unique_values(flat)
        picked = md.index_select(weight, 0, rows)
        norms = md.linalg.vector_norm(picked, ord=norm_type, axis=1, keepdims=True)
        scale = md.where(norms > max_norm, max_norm / (norms + 1e-7), 1.0)
        weight[rows] = picked * scale


def _padding_index(padding_idx: int, num: int) -> int:
    if not -num <= padding_idx < num:
        raise ValueError(f"embedding: padding_idx must be within num_embeddings ({num}), "
                         f"got {padding_idx}")
    return padding_idx + num if padding_idx < 0 else padding_idx


# -- activations ----------------------------------------------------------------------------


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    md = _md()
    return input.relu_() if inplace else md.relu(input)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x`` (the gradient at 0 is the slope,
    as PyTorch's)."""
    md = _md()
    out = md.where(input > 0, input, input * negative_slope)
    return input.copy_(out) if inplace else out


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    md = _md()
    negative = md.where(input > 0, 0.0, input)  # keeps expm1 finite where x is large
    out = md.where(input > 0, input, alpha * md.expm1(negative))
    return input.copy_(out) if inplace else out


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    return _md().gelu(input, approximate=approximate)


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    out = _md().silu(input)
    return input.copy_(out) if inplace else out


def sigmoid(input: Tensor) -> Tensor:
    return _md().sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    return _md().tanh(input)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, and ``x`` itself where ``beta * x > threshold``."""
    md = _md()
    z = input * beta
    small = z <= threshold
    return md.where(small, md.log1p(md.exp(md.where(small, z, 0.0))) / beta, input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0,
             inplace: bool = False) -> Tensor:
    """``input`` clamped to ``[min_val, max_val]``; the gradient is 0 at and beyond the
    bounds (PyTorch's ``hardtanh_backward``).

    Raises:
        ValueError: ``min_val > max_val``.
    """
    md = _md()
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val ({min_val}) cannot be greater than max_val "
                         f"({max_val})")
    out = md.where(input <= min_val, min_val, md.where(input >= max_val, max_val, input))
    out = out.astype(input.dtype)
    return input.copy_(out) if inplace else out


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)`` (``hardtanh(x, 0, 6)``)."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``; the gradient is ``1 / 6`` strictly inside (-3, 3), else 0."""
    md = _md()
    inside = (input > -3) & (input < 3)
    out = md.where(inside, input / 6 + 0.5, md.where(input >= 3, 1.0, 0.0)).astype(
        input.dtype)
    return input.copy_(out) if inplace else out


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``, with PyTorch's gradient (``x / 3 + 0.5`` on (-3, 3), 0 at
    -3, 1 at 3)."""
    md = _md()
    out = md.where(input <= -3, 0.0, md.where(input >= 3, input, input * (input + 3) / 6))
    out = out.astype(input.dtype)
    return input.copy_(out) if inplace else out


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed as ``-log(1 + exp(-x))`` without overflow."""
    md = _md()
    return -md.logaddexp(md.zeros_like(input), -input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    md = _md()
    out = input * md.tanh(md.logaddexp(md.zeros_like(input), input))
    return input.copy_(out) if inplace else out


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with the self-normalizing constants."""
    out = elu(input, 1.6732632423543772848170429916717) * 1.0507009873554804934193349852946
    return input.copy_(out) if inplace else out


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (1 + _md().abs(input))


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12) -> Tensor:
    """``input / max(||input||_p, eps)`` along ``dim``."""
    md = _md()
    norm = md.linalg.vector_norm(input, ord=p, axis=dim, keepdims=True)
    return input / md.clamp(norm, min=eps)


def _softmax_dim(name: str, ndim: int, dim):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  f"to include dim=X as an argument.", UserWarning, stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    md = _md()
    if dtype is not None:
        input = input.astype(_dtypes.as_dtype(dtype))
    return md.softmax(input, _softmax_dim("softmax", input.ndim, dim))


def log_softmax(input: Tensor, dim: int | None = None, dtype=None) -> Tensor:
    md = _md()
    if dtype is not None:
        input = input.astype(_dtypes.as_dtype(dtype))
    return md.log_softmax(input, _softmax_dim("log_softmax", input.ndim, dim))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot rows: shape ``tensor.shape + (num_classes,)``; -1 infers the count
    from the largest class.

    Raises:
        TypeError: ``tensor`` is not an integer tensor.
        ValueError: a class is negative or not below ``num_classes``.
    """
    md = _md()
    if tensor.dtype.kind not in "iu":
        raise TypeError(f"one_hot: expected an integer tensor of class indices, got "
                        f"{tensor.dtype.name}")
    if tensor.numel() and int(md.min(tensor)) < 0:
        raise ValueError("one_hot: class values must be non-negative")
    if num_classes == -1:
        num_classes = int(md.max(tensor)) + 1 if tensor.numel() else 0
    elif tensor.numel() and int(md.max(tensor)) >= num_classes:
        raise ValueError(f"one_hot: class values must be smaller than num_classes "
                         f"({num_classes}), got {int(md.max(tensor))}")
    classes = md.arange(num_classes, device=tensor.device)
    return (md.unsqueeze(tensor, -1) == classes).astype(_dtypes.int64)


# -- losses ---------------------------------------------------------------------------------


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    md = _md()
    if reduction == "mean":
        return md.mean(loss)
    if reduction == "sum":
        return md.sum(loss)
    return loss


def _check_reduction(name: str, reduction) -> None:
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{name}: {reduction!r} is not a valid value for reduction (expected "
                         f"'mean', 'sum' or 'none')")


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean (or sum, or none) of ``(input - target) ** 2``."""
    _check_reduction("mse_loss", reduction)
    diff = input - target
    return _reduce(diff * diff, reduction)


def l1_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:
    """Mean (or sum, or none) of ``|input - target|``."""
    _check_reduction("l1_loss", reduction)
    return _reduce(_md().abs(input - target), reduction)


def _same_shape(name: str, input: Tensor, target: Tensor) -> None:
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"{name}: using a target size ({list(target.shape)}) that is "
                         f"different to the input size ({list(input.shape)}) is deprecated. "
                         f"Please ensure they have the same size.")


def smooth_l1_loss(input: Tensor, target: Tensor, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    """``0.5 * d ** 2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 * beta``
    (``d = input - target``; ``beta=0`` is ``l1_loss``).

    Raises:
        ValueError: ``beta`` is negative, or an unknown ``reduction``.
    """
    md = _md()
    _check_reduction("smooth_l1_loss", reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: does not support negative values for beta, got "
                         f"{beta}")
    if beta == 0:
        return l1_loss(input, target, reduction)
    diff = input - target
    size = md.abs(diff)
    return _reduce(md.where(size < beta, 0.5 * diff * diff / beta, size - 0.5 * beta),
                   reduction)


def huber_loss(input: Tensor, target: Tensor, reduction: str = "mean",
               delta: float = 1.0) -> Tensor:
    """``0.5 * d ** 2`` where ``|d| < delta``, else ``delta * (|d| - 0.5 * delta)``.

    Raises:
        ValueError: ``delta`` is not positive, or an unknown ``reduction``.
    """
    md = _md()
    _check_reduction("huber_loss", reduction)
    if not delta > 0:
        raise ValueError(f"huber_loss: does not support non-positive values for delta, got "
                         f"{delta}")
    diff = input - target
    size = md.abs(diff)
    return _reduce(md.where(size < delta, 0.5 * diff * diff, delta * (size - 0.5 * delta)),
                   reduction)


def binary_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                         reduction: str = "mean") -> Tensor:
    """``-weight * (t * log(x) + (1 - t) * log(1 - x))`` for probabilities ``input``, each
    log clamped to at least -100 (as PyTorch).

    Raises:
        ValueError: shapes that differ, an input outside [0, 1], an unknown ``reduction``.
    """
    md = _md()
    _check_reduction("binary_cross_entropy", reduction)
    _same_shape("binary_cross_entropy", input, target)
    if input.numel() and bool(md.any((input < 0) | (input > 1))):
        raise ValueError("binary_cross_entropy: all elements of input should be between 0 "
                         "and 1")
    loss = -(target * _clamped_log(input) + (1 - target) * _clamped_log(1 - input))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def _clamped_log(x: Tensor) -> Tensor:
    """``max(log(x), -100)``, with a gradient of 0 (not NaN) where ``x`` is 0."""
    md = _md()
    positive = x > 0
    return md.maximum(md.where(positive, md.log(md.where(positive, x, 1.0)), -100.0), -100.0)


def binary_cross_entropy_with_logits(input: Tensor, target: Tensor,
                                     weight: Tensor | None = None, reduction: str = "mean",
                                     pos_weight: Tensor | None = None) -> Tensor:
    """``binary_cross_entropy(sigmoid(input), target)`` computed stably from the logits:
    ``(1 - t) * x + (1 + (pos_weight - 1) * t) * log(1 + exp(-x))``; ``pos_weight``
    weighs the positive class (broadcast along the last dimension).

    Raises:
        ValueError: shapes that differ, or an unknown ``reduction``.
    """
    md = _md()
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    _same_shape("binary_cross_entropy_with_logits", input, target)
    softplus_neg = md.logaddexp(md.zeros_like(input), -input)
    if pos_weight is not None:
        softplus_neg = softplus_neg * (1 + (pos_weight - 1) * target)
    loss = (1 - target) * input + softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def nll_loss(input: Tensor, target: Tensor, weight: Tensor | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood of class indices ``target`` under log-probabilities
    ``input`` of shape ``(N, C, ...)`` or ``(C,)``.  ``mean`` divides by the summed
    weights of the targets that are not ``ignore_index``, as PyTorch.

    Raises:
        TypeError: ``target`` is not an integer tensor.
        ValueError: ``target``'s shape does not match ``input``'s without the class axis.
        IndexError: a target is outside ``[0, C)`` and not ``ignore_index``.
    """
    md = _md()
    _check_reduction("nll_loss", reduction)
    if input.ndim in (1, 2) and isinstance(target, Tensor) and target.dtype.kind in "iu" \
            and (weight is None or not weight.requires_grad):
        # PyTorch's kernels (Note [nll_loss kernels] in ops/losses.py); a weight that
        # requires grad keeps the composition, which differentiates it (PyTorch's does not)
        from mdtensor.dispatch.namespaces import namespaces

        _class_targets_shape("nll_loss", input, target)
        return namespaces.aten.nll_loss_forward(input, target, weight, _REDUCTIONS[reduction],
                                                ignore_index)[0]
    cdim, valid, safe = _class_targets("nll_loss", input, target, ignore_index)
    picked = md.squeeze(md.take_along_axis(input, md.unsqueeze(safe, cdim), axis=cdim), cdim)
    w = _target_weights(weight, valid, safe, input.dtype)
    loss = -picked * w
    if reduction == "none":
        return loss
    total = md.sum(loss)
    return total / md.sum(w) if reduction == "mean" else total


_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}  # PyTorch's enum, the kernels' argument


def _class_targets_shape(name: str, input: Tensor, target: Tensor) -> int:
    """The class axis, with ``target``'s dtype and shape checked."""
    if target.dtype.kind not in "iu":
        raise TypeError(f"{name}: expected an integer target of class indices, got "
                        f"{target.dtype.name} (probabilities are cross_entropy's)")
    if input.ndim == 0:
        raise ValueError(f"{name}: expected an input of shape (C,) or (N, C, ...), got a 0-d "
                         f"tensor")
    cdim = 0 if input.ndim == 1 else 1
    expected = input.shape[:cdim] + input.shape[cdim + 1:]
    if target.shape != expected:
        raise ValueError(f"{name}: expected target of shape {list(expected)} for input of shape "
                         f"{list(input.shape)}, got {list(target.shape)}")
    return cdim


def _class_targets(name: str, input: Tensor, target: Tensor, ignore_index: int):
    """``(class axis, not-ignored mask, targets with ignored ones set to 0)``, checked."""
    md = _md()
    cdim = _class_targets_shape(name, input, target)
    valid = target != ignore_index
    safe = md.where(valid, target, 0)
    classes = input.shape[cdim]
    bad = (safe < 0) | (safe >= classes)
    if target.numel() and bool(md.any(bad)):
        raise IndexError(f"{name}: target {int(target[bad].reshape(-1)[0])} is out of bounds "
                         f"for {classes} classes")
    return cdim, valid, safe


def _target_weights(weight, valid: Tensor, safe: Tensor, dtype) -> Tensor:
    md = _md()
    if weight is None:
        return valid.astype(dtype)
    picked = md.take(weight, safe.reshape(-1), axis=0).reshape(safe.shape)
    return md.where(valid, picked, 0.0)


def cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None,
                  ignore_index: int = -100, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    """Cross-entropy between logits ``input`` (``(N, C, ...)`` or ``(C,)``) and class
    indices or class probabilities ``target``, with PyTorch's ``weight``,
    ``ignore_index``, ``reduction`` and ``label_smoothing``.

    Raises:
        ValueError: ``label_smoothing`` is not in [0, 1], or the shapes do not match.
        IndexError: a class index is out of bounds.
    """
    md = _md()
    _check_reduction("cross_entropy", reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got "
                         f"{label_smoothing}")
    if input.ndim == 0:
        raise ValueError("cross_entropy: expected an input of shape (C,) or (N, C, ...), got "
                         "a 0-d tensor")
    cdim = 0 if input.ndim == 1 else 1
    classes = input.shape[cdim]
    logp = md.log_softmax(input, cdim)
    wview = None
    if weight is not None:
        wview = weight.reshape(tuple(classes if d == cdim else 1 for d in range(input.ndim)))
    if target.dtype.kind == "f":
        return _cross_entropy_probs(logp, target, wview, cdim, classes, reduction,
                                    label_smoothing)
    nll = nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return nll
    _, valid, safe = _class_targets("cross_entropy", input, target, ignore_index)
    smooth = -md.sum(logp if wview is None else logp * wview, axis=cdim)
    smooth = md.where(valid, smooth, 0.0)
    if reduction == "mean":
        smooth = md.sum(smooth) / md.sum(_target_weights(weight, valid, safe, input.dtype))
    elif reduction == "sum":
        smooth = md.sum(smooth)
    return nll * (1 - label_smoothing) + smooth * (label_smoothing / classes)


def _cross_entropy_probs(logp, target, wview, cdim, classes, reduction, label_smoothing):
    md = _md()
    if target.shape != logp.shape:
        raise ValueError(f"cross_entropy: expected probability targets of the input's shape "
                         f"{list(logp.shape)}, got {list(target.shape)}")
    if label_smoothing > 0.0:
        target = target * (1 - label_smoothing) + label_smoothing / classes
    terms = logp * target if wview is None else logp * target * wview
    if reduction == "none":
        return -md.sum(terms, axis=cdim)
    total = -md.sum(terms)
    return total / (logp.numel() / classes) if reduction == "mean" else total


def _shape_tuple(shape) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        return (shape,)
    shape = tuple(shape)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        raise TypeError(f"expected a shape (an int or a tuple of ints), got {shape!r}")
    return shape

