"""Convolution layers: ``Conv1d`` and ``Conv2d``, with PyTorch's parameters, defaults,
initialization and ``repr``."""

from __future__ import annotations

from . import functional as F
from ._layers import add_weight_and_bias, reset_weight_and_bias
from ._module import Module

__all__ = ["Conv1d", "Conv2d"]


def _tuple(op: str, name: str, value, n: int) -> tuple:
    seq = tuple(value) if isinstance(value, (list, tuple)) else (value,) * n
    if len(seq) != n or not all(isinstance(v, int) and not isinstance(v, bool) for v in seq):
        raise ValueError(f"{op}: expected {name} to be an int or {n} ints, got {value!r}")
    return seq


class _ConvNd(Module):
    """What Conv1d and Conv2d share; ``_spatial`` dimensions, ``_fn`` the functional."""

    _spatial = 2
    _fn = staticmethod(F.conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        super().__init__()
        op, n = type(self).__name__, self._spatial
        if not isinstance(groups, int) or groups <= 0:
            raise ValueError(f"{op}: groups must be a positive integer, got {groups!r}")
        if in_channels % groups:
            raise ValueError(f"{op}: in_channels must be divisible by groups")
        if out_channels % groups:
            raise ValueError(f"{op}: out_channels must be divisible by groups")
        if padding_mode != "zeros":
            valid = ("zeros", "reflect", "replicate", "circular")
            if padding_mode not in valid:
                raise ValueError(f"{op}: padding_mode must be one of {valid}, but got "
                                 f"padding_mode={padding_mode!r}")
            raise NotImplementedError(f"{op}: padding_mode={padding_mode!r} is not supported "
                                      f"(only 'zeros')")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = _tuple(op, "kernel_size", kernel_size, n)
        self.stride = _tuple(op, "stride", stride, n)
        self.dilation = _tuple(op, "dilation", dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"{op}: invalid padding string {padding!r}, should be one of "
                                 f"['valid', 'same']")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{op}: padding='same' is not supported for strided "
                                 f"convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(op, "padding", padding, n)
        self.groups, self.padding_mode = groups, padding_mode
        add_weight_and_bias(self, (out_channels, in_channels // groups, *self.kernel_size),
                            bias, device, dtype)

    def reset_parameters(self) -> None:
        reset_weight_and_bias(self.weight, self.bias)

    def forward(self, input):
        return self._fn(input, self.weight, self.bias, self.stride, self.padding,
                        self.dilation, self.groups)

    def extra_repr(self) -> str:
        n = self._spatial
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}")
        if self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        return s


class Conv2d(_ConvNd):
    """2-D convolution over ``(N, C, H, W)`` (or ``(C, H, W)``) inputs
    (``functional.conv2d``).  ``weight`` ``(out_channels, in_channels / groups, kh, kw)``
    and ``bias`` start as PyTorch's: ``kaiming_uniform_(weight, a=sqrt(5))`` and
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)).  ``padding_mode`` other than ``'zeros'`` raises
    ``NotImplementedError``."""

    _spatial = 2
    _fn = staticmethod(F.conv2d)


class Conv1d(_ConvNd):
    """1-D convolution over ``(N, C, L)`` (or ``(C, L)``) inputs (``functional.conv1d``);
    otherwise as ``Conv2d``."""

    _spatial = 1
    _fn = staticmethod(F.conv1d)
