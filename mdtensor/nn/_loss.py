"""Loss modules: ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``L1Loss``."""

from __future__ import annotations

from . import functional as F
from ._module import Module

__all__ = ["CrossEntropyLoss", "L1Loss", "MSELoss", "NLLLoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean"):
        super().__init__()
        F._check_reduction(type(self).__name__, reduction)
        self.reduction = reduction


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class NLLLoss(_Loss):
    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, self.weight, self.ignore_index, self.reduction)


class CrossEntropyLoss(_Loss):
    def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean",
                 label_smoothing: float = 0.0):
        super().__init__(reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, self.weight, self.ignore_index, self.reduction,
                               self.label_smoothing)
