# Generated from mdtensor's op catalogue by tools/gen_stubs.py; do not edit.
# After adding or changing an op, run: python tools/gen_stubs.py

"""``md.fft``: the Array API FFT extension (the functions of aten ``fft_<name>`` ops)."""

from ._typing import Bool, DeviceLike, DTypeLike, Float, Int, IntList
from .tensors.tensor import Tensor

__all__ = [
    "fft",
    "fft2",
    "fftfreq",
    "fftn",
    "fftshift",
    "hfft",
    "ifft",
    "ifft2",
    "ifftn",
    "ifftshift",
    "ihfft",
    "irfft",
    "irfft2",
    "irfftn",
    "rfft",
    "rfft2",
    "rfftfreq",
    "rfftn",
]

def fft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def fft2(self: Tensor, s: IntList | None = ..., axes: IntList = ..., norm: str = ...) -> Tensor: ...

def fftfreq(
    n: Int,
    d: Float = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def fftn(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList | None = ...,
    norm: str = ...,
) -> Tensor: ...

def fftshift(self: Tensor, axes: IntList | None = ...) -> Tensor: ...

def hfft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def ifft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def ifft2(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList = ...,
    norm: str = ...,
) -> Tensor: ...

def ifftn(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList | None = ...,
    norm: str = ...,
) -> Tensor: ...

def ifftshift(self: Tensor, axes: IntList | None = ...) -> Tensor: ...

def ihfft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def irfft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def irfft2(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList = ...,
    norm: str = ...,
) -> Tensor: ...

def irfftn(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList | None = ...,
    norm: str = ...,
) -> Tensor: ...

def rfft(self: Tensor, n: Int | None = ..., axis: Int = ..., norm: str = ...) -> Tensor: ...

def rfft2(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList = ...,
    norm: str = ...,
) -> Tensor: ...

def rfftfreq(
    n: Int,
    d: Float = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def rfftn(
    self: Tensor,
    s: IntList | None = ...,
    axes: IntList | None = ...,
    norm: str = ...,
) -> Tensor: ...
