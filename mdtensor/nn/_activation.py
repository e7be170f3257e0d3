"""Activation modules: thin Modules over ``md.nn.functional``."""

from __future__ import annotations

from . import functional as F
from ._module import Module

__all__ = ["ELU", "GELU", "Hardsigmoid", "Hardswish", "Hardtanh", "LeakyReLU", "LogSigmoid",
           "LogSoftmax", "Mish", "ReLU", "ReLU6", "SELU", "SiLU", "Sigmoid", "Softmax",
           "Softplus", "Softsign", "Tanh"]


class _Inplace(Module):
    """An activation whose only option is ``inplace``: ``_fn(input, inplace)``."""

    _fn = staticmethod(F.relu)

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return self._fn(input, self.inplace)

    def extra_repr(self) -> str:
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    _fn = staticmethod(F.relu)


class SiLU(_Inplace):
    _fn = staticmethod(F.silu)


class ReLU6(_Inplace):
    _fn = staticmethod(F.relu6)


class Hardsigmoid(_Inplace):
    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Inplace):
    _fn = staticmethod(F.hardswish)


class Mish(_Inplace):
    _fn = staticmethod(F.mish)


class SELU(_Inplace):
    _fn = staticmethod(F.selu)


class _OneOption(_Inplace):
    """An activation with one option besides ``inplace``: ``_fn(input, option, inplace)``."""

    _option = "negative_slope"

    def forward(self, input):
        return self._fn(input, getattr(self, self._option), self.inplace)

    def extra_repr(self) -> str:
        return f"{self._option}={getattr(self, self._option)}" + super().extra_repr().replace(
            "inplace", ", inplace")


class LeakyReLU(_OneOption):
    _fn, _option = staticmethod(F.leaky_relu), "negative_slope"

    def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
        super().__init__(inplace)
        self.negative_slope = negative_slope


class ELU(_OneOption):
    _fn, _option = staticmethod(F.elu), "alpha"

    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__(inplace)
        self.alpha = alpha


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        if min_val > max_val:
            raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val "
                             f"({max_val})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}" + (
            ", inplace=True" if self.inplace else "")


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class _AlongDim(Module):
    """A normalization along ``dim``: ``_fn(input, dim)``."""

    _fn = staticmethod(F.softmax)

    def __init__(self, dim: int | None = None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return self._fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_AlongDim):
    _fn = staticmethod(F.softmax)


class LogSoftmax(_AlongDim):
    _fn = staticmethod(F.log_softmax)
