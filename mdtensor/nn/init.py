"""``md.nn.init``: fill tensors in place with PyTorch's initialization schemes.

Each function writes into its tensor under ``no_grad`` (so it works on parameters, and on
JAX through functionalization) and returns it.  The random ones draw from ``generator``
or the device's default generator (``md.manual_seed``): the same distributions and
bounds as PyTorch, not the same numbers (PyTorch's generators are its own).
Fans follow PyTorch: ``fan_in = size(1) * receptive field``, ``fan_out = size(0) *
receptive field``, where the receptive field is the product of the dimensions after the
first two.
"""

from __future__ import annotations

import math
import warnings

from mdtensor.tensors.tensor import Tensor

__all__ = [
    "calculate_gain", "constant_", "eye_", "fan_in_and_fan_out", "kaiming_normal_",
    "kaiming_uniform_", "normal_", "ones_", "uniform_", "xavier_normal_", "xavier_uniform_",
    "zeros_",
]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for ``nonlinearity`` (PyTorch's table): 1 for linear/conv and
    sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope**2)) for leaky_relu
    (slope ``param``, default 0.01), 3/4 for selu.

    Raises:
        ValueError: an unknown nonlinearity, or a leaky_relu slope that is not a number.
    """
    if nonlinearity in _LINEAR:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope**2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}")


def _fans(name: str, tensor: Tensor) -> tuple[int, int]:
    if tensor.ndim < 2:
        raise ValueError(f"{name}: fan in and fan out can not be computed for a tensor with "
                         f"fewer than 2 dimensions (got shape {list(tensor.shape)})")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(name: str, tensor: Tensor, mode: str) -> int:
    fan_in, fan_out = _fans(name, tensor)
    if not isinstance(mode, str) or mode.lower() not in ("fan_in", "fan_out"):
        raise ValueError(f"{name}: mode {mode!r} is not supported, use 'fan_in' or 'fan_out'")
    return fan_in if mode.lower() == "fan_in" else fan_out


def _write(name: str, tensor: Tensor, values) -> Tensor:
    from ..autograd import no_grad

    with no_grad():
        tensor.copy_(values)
    return tensor


def _floating(name: str, tensor: Tensor):
    if not isinstance(tensor, Tensor):
        raise TypeError(f"{name}: expected a Tensor, got {type(tensor).__name__}")
    if tensor.dtype.kind != "f":
        raise TypeError(f"{name}: expected a real floating tensor, got {tensor.dtype.name}")
    return tensor.dtype


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from U(a, b): ``a + (b - a) * U(0, 1)``."""
    from ..random import rand

    dtype = _floating("uniform_", tensor)
    u = rand(tensor.shape, dtype=dtype, device=tensor.device, generator=generator)
    return _write("uniform_", tensor, u * (b - a) + a)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with samples from N(mean, std**2)."""
    from ..random import randn

    dtype = _floating("normal_", tensor)
    z = randn(tensor.shape, dtype=dtype, device=tensor.device, generator=generator)
    return _write("normal_", tensor, z * std + mean)


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    from .. import full_like

    return _write("constant_", tensor, full_like(tensor, val))


def zeros_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 0)


def ones_(tensor: Tensor) -> Tensor:
    return constant_(tensor, 1)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal).

    Raises:
        ValueError: ``tensor`` is not 2-D.
    """
    from .. import eye

    if tensor.ndim != 2:
        raise ValueError(f"eye_: only tensors with 2 dimensions are supported, got shape "
                         f"{list(tensor.shape)}")
    return _write("eye_", tensor, eye(*tensor.shape, dtype=tensor.dtype, device=tensor.device))


def _empty_is_noop(tensor: Tensor) -> bool:
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op", UserWarning, stacklevel=3)
        return True
    return False


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))`` (Glorot & Bengio)."""
    fan_in, fan_out = _fans("xavier_uniform_", tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """N(0, std**2) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _fans("xavier_normal_", tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """U(-b, b) with ``b = gain * sqrt(3 / fan)`` (He et al.); ``gain`` is
    ``calculate_gain(nonlinearity, a)`` and ``fan`` the fan of ``mode``."""
    if _empty_is_noop(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan("kaiming_uniform_", tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """N(0, std**2) with ``std = gain / sqrt(fan)``."""
    if _empty_is_noop(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_fan("kaiming_normal_", tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight of 2 or more dimensions (PyTorch's
    ``_calculate_fan_in_and_fan_out``)."""
    return _fans("fan_in_and_fan_out", tensor)


_calculate_fan_in_and_fan_out = fan_in_and_fan_out  # PyTorch's (private) spelling
