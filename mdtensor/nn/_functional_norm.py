"""Batch and group normalization of ``md.nn.functional``: ``batch_norm``, ``group_norm``,
``instance_norm``.

Compositions of public ops (means, ``rsqrt``), as ``layer_norm`` is, so autograd, modes
and every backend get them -- except ``batch_norm`` while training, which is PyTorch's
pair of kernels (Note [Batch norm kernels] in ops/normalization.py).  The statistics are
PyTorch's: normalization divides by the biased standard deviation; ``batch_norm``'s running
variance is updated with the unbiased one, in place and without gradient (``copy_`` under
``no_grad``, so on JAX through functionalization).
"""

from __future__ import annotations

from mdtensor.tensors.tensor import Tensor

__all__ = ["batch_norm", "group_norm", "instance_norm"]


def _md():
    import mdtensor

    return mdtensor


def _moments(x: Tensor, axes: tuple):
    """``(mean, biased variance)`` over ``axes``, kept as size-1 dimensions."""
    md = _md()
    mean = md.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    return mean, centered, md.mean(centered * centered, axis=axes, keepdims=True)


def _affine(out: Tensor, weight, bias, shape) -> Tensor:
    if weight is not None:
        out = out * weight.reshape(shape)
    if bias is not None:
        out = out + bias.reshape(shape)
    return out


def _check_channels(op: str, name: str, t, channels: int) -> None:
    if t is not None and tuple(t.shape) != (channels,):
        raise ValueError(f"{op}: expected {name} of shape [{channels}] (one per channel), got "
                         f"{list(t.shape)}")


def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,
               weight: Tensor | None = None, bias: Tensor | None = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel (dimension 1) of ``input`` ``(N, C, *)``.

    While ``training``, with the batch's statistics over every dimension but 1, and the
    running statistics (when given) updated in place:
    ``running = (1 - momentum) * running + momentum * batch`` (the unbiased variance);
    otherwise with ``running_mean`` and ``running_var``.

    Raises:
        ValueError: ``input`` has fewer than 2 dimensions, one value per channel while
            training, running statistics missing in evaluation, or parameters of the wrong
            shape.
    """
    md = _md()
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of 2 or more dimensions (N, C, *), "
                         f"got {list(input.shape)}")
    channels = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        _check_channels("batch_norm", name, t, channels)
    shape = (1, channels) + (1,) * (input.ndim - 2)
    if training:
        # See Note [Batch norm kernels] in ops/normalization.py: one op each way
        from mdtensor.dispatch.namespaces import namespaces

        aten = namespaces.aten

        count = input.numel() // channels if channels else 0
        if count <= 1:
            raise ValueError(f"batch_norm: expected more than 1 value per channel when "
                             f"training, got input size {list(input.shape)}")
        out, mean, invstd = aten._native_batch_norm_legit.no_stats(input, weight, bias, True,
                                                                   momentum, eps)
        if running_mean is not None or running_var is not None:
            _update_running(running_mean, running_var, mean, invstd, count, momentum, eps)
        return out
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var must be defined in "
                         "evaluation mode (training=False)")
    # in evaluation, one multiply-add: the per-channel scale and shift are computed on (C,)
    # vectors, so the whole input sees one multiplication and one addition
    scale = md.rsqrt(running_var + eps)
    if weight is not None:
        scale = scale * weight
    shift = -running_mean * scale
    if bias is not None:
        shift = shift + bias
    return input * scale.reshape(shape) + shift.reshape(shape)


def _update_running(running_mean, running_var, mean, invstd, count: int, momentum,
                    eps) -> None:
    """PyTorch's ``running = (1 - momentum) * running + momentum * batch``, in place, from
    the kernel's mean and ``invstd`` (the unbiased variance is ``(invstd ** -2 - eps) *
    count / (count - 1)``): in-place ``mul_`` and ``add_``, the variance's two scales
    folded into one factor (nine ops, where copies of new values took twelve)."""
    md = _md()
    with md.no_grad():
        if running_mean is not None:
            running_mean.mul_(1 - momentum).add_(mean * momentum)
        if running_var is not None:
            unbiased = (1.0 / (invstd * invstd) - eps) * (count / (count - 1) * momentum)
            running_var.mul_(1 - momentum).add_(unbiased)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Normalize ``input`` ``(N, C, *)`` over each group of ``C / num_groups`` channels
    (and all their other dimensions), then scale and shift per channel.

    Raises:
        ValueError: ``C`` is not divisible by ``num_groups``, or parameters of the wrong
            shape.
    """
    md = _md()
    if input.ndim < 2:
        raise ValueError(f"group_norm: expected an input of 2 or more dimensions (N, C, *), "
                         f"got {list(input.shape)}")
    n, channels = input.shape[:2]
    if not isinstance(num_groups, int) or num_groups < 1 or channels % num_groups:
        raise ValueError(f"group_norm: expected number of channels in input to be divisible "
                         f"by num_groups, but got input of shape {list(input.shape)} and "
                         f"num_groups={num_groups}")
    _check_channels("group_norm", "weight", weight, channels)
    _check_channels("group_norm", "bias", bias, channels)
    grouped = input.reshape((n, num_groups, -1))
    _, centered, var = _moments(grouped, (2,))
    out = (centered * md.rsqrt(var + eps)).reshape(input.shape)
    return _affine(out, weight, bias, (1, channels) + (1,) * (input.ndim - 2))


def instance_norm(input: Tensor, running_mean: Tensor | None = None,
                  running_var: Tensor | None = None, weight: Tensor | None = None,
                  bias: Tensor | None = None, use_input_stats: bool = True,
                  momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """Normalize each channel of each sample of ``input`` ``(N, C, *)`` over its other
    dimensions (``use_input_stats=True``; running statistics are not supported).

    Raises:
        NotImplementedError: ``use_input_stats=False`` or running statistics given.
        ValueError: ``input`` has fewer than 3 dimensions.
    """
    if not use_input_stats or running_mean is not None or running_var is not None:
        raise NotImplementedError("instance_norm: running statistics are not supported")
    if input.ndim < 3:
        raise ValueError(f"instance_norm: expected an input of 3 or more dimensions (N, C, "
                         f"*), got {list(input.shape)}")
    return group_norm(input, input.shape[1], weight, bias, eps) if input.shape[1] else input
