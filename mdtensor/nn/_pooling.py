"""Pooling layers: ``MaxPool1d``/``MaxPool2d``, ``AvgPool1d``/``AvgPool2d``, with
PyTorch's defaults (``stride`` = ``kernel_size``) and ``repr``."""

from __future__ import annotations

from . import functional as F
from ._module import Module

__all__ = ["AvgPool1d", "AvgPool2d", "MaxPool1d", "MaxPool2d"]


class _MaxPoolNd(Module):
    _fn = staticmethod(F.max_pool2d)

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1,
                 return_indices: bool = False, ceil_mode: bool = False):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, input):
        return self._fn(input, self.kernel_size, self.stride, self.padding, self.dilation,
                        ceil_mode=self.ceil_mode, return_indices=self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(_MaxPoolNd):
    """``functional.max_pool2d`` over ``(N, C, H, W)`` or ``(C, H, W)``."""

    _fn = staticmethod(F.max_pool2d)


class MaxPool1d(_MaxPoolNd):
    """``functional.max_pool1d`` over ``(N, C, L)`` or ``(C, L)``."""

    _fn = staticmethod(F.max_pool1d)


class AvgPool2d(Module):
    """``functional.avg_pool2d`` over ``(N, C, H, W)`` or ``(C, H, W)``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None):
        super().__init__()
        self.kernel_size = kernel_size
        self.stride = stride if stride is not None else kernel_size
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, input):
        return F.avg_pool2d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool1d(AvgPool2d):
    """``functional.avg_pool1d`` over ``(N, C, L)`` or ``(C, L)``."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False,
                 count_include_pad: bool = True):
        # PyTorch keeps AvgPool1d's sizes as 1-tuples (its repr shows them so)
        super().__init__(_single(kernel_size), _single(stride if stride is not None
                                                       else kernel_size),
                         _single(padding), ceil_mode, count_include_pad)

    def forward(self, input):
        return F.avg_pool1d(input, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


def _single(value):
    return tuple(value) if isinstance(value, (list, tuple)) else (value,)
