"""Normalization layers with statistics over the batch or over channel groups:
``BatchNorm1d``, ``BatchNorm2d`` (running statistics, train/eval, ``momentum``,
``num_batches_tracked``) and ``GroupNorm`` -- PyTorch's parameters, buffers, state-dict
keys and ``repr``.  (``LayerNorm`` is in ``_layers``.)"""

from __future__ import annotations

from . import functional as F
from . import init
from ._module import Module
from ._parameter import Parameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "GroupNorm"]


def _affine_parameters(module: Module, n: int, affine: bool, bias: bool, device, dtype):
    """A per-channel ``weight`` (and ``bias`` unless ``bias=False``) when ``affine``."""
    from .. import empty

    for name, wanted in (("weight", affine), ("bias", affine and bias)):
        if wanted:
            setattr(module, name, Parameter(empty((n,), device=device, dtype=dtype)))
        else:
            module.register_parameter(name, None)


def _reset_affine(module: Module) -> None:
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share; ``_dims`` are the input ranks accepted."""

    _dims: tuple = (2, 3)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1,
                 affine: bool = True, track_running_stats: bool = True, device=None,
                 dtype=None, *, bias: bool = True):
        super().__init__()
        from .. import int64, ones, zeros

        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, num_features, affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", zeros((num_features,), device=device,
                                                       dtype=dtype))
            self.register_buffer("running_var", ones((num_features,), device=device,
                                                     dtype=dtype))
            self.register_buffer("num_batches_tracked", zeros((), dtype=int64, device=device))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            init.zeros_(self.running_mean)
            init.ones_(self.running_var)
            init.zeros_(self.num_batches_tracked)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        _reset_affine(self)

    def forward(self, input):
        if input.ndim not in self._dims:
            dims = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"{type(self).__name__}: expected {dims} input (got "
                             f"{input.ndim}D input)")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            from .. import no_grad

            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None,
                            self.running_var if keep else None, self.weight, self.bias,
                            use_batch, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, bias={self.bias is not None}, "
                f"track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """Batch normalization of ``(N, C)`` or ``(N, C, L)`` inputs over every dimension but
    the channels (``functional.batch_norm``)."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch normalization of ``(N, C, H, W)`` inputs over every dimension but the
    channels (``functional.batch_norm``)."""

    _dims = (4,)


class GroupNorm(Module):
    """``functional.group_norm`` with ``num_groups`` groups of ``num_channels`` channels,
    and a per-channel ``weight`` (ones) and ``bias`` (zeros) when ``affine``."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, bias: bool = True):
        super().__init__()
        if num_channels % num_groups:
            raise ValueError("GroupNorm: num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = (
            num_groups, num_channels, eps, affine)
        _affine_parameters(self, num_channels, affine, bias, device, dtype)
        _reset_affine(self)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")
