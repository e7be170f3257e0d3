"""``md.nn``: modules, parameters, layers, losses, ``functional`` and ``init``.

PyTorch's ``torch.nn`` API on mdtensor tensors (docs/NN.md lists the deliberate
differences).  Layers compute with public mdtensor ops only (``md.nn.functional``), so they
run on every backend and autograd differentiates them.  Importing ``md.nn`` imports no
array library.
"""

from . import functional, init
from ._activation import (
    ELU,
    GELU,
    SELU,
    Hardsigmoid,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSigmoid,
    LogSoftmax,
    Mish,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Softsign,
    Tanh,
)
from ._container import ModuleDict, ModuleList, Sequential
from ._conv import Conv1d, Conv2d
from ._layers import Dropout, Embedding, Flatten, Identity, LayerNorm, Linear
from ._loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CrossEntropyLoss,
    HuberLoss,
    L1Loss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
)
from ._module import Module, RemovableHandle
from ._normalization import BatchNorm1d, BatchNorm2d, GroupNorm
from ._parameter import Buffer, Parameter
from ._pooling import AvgPool1d, AvgPool2d, MaxPool1d, MaxPool2d

__all__ = [
    "AvgPool1d", "AvgPool2d", "BCELoss", "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d",
    "Buffer", "Conv1d", "Conv2d", "CrossEntropyLoss", "Dropout", "ELU", "Embedding",
    "Flatten", "GELU", "GroupNorm", "Hardsigmoid", "Hardswish", "Hardtanh", "HuberLoss",
    "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSigmoid", "LogSoftmax",
    "MSELoss", "MaxPool1d", "MaxPool2d", "Mish", "Module", "ModuleDict", "ModuleList",
    "NLLLoss", "Parameter", "ReLU", "ReLU6", "RemovableHandle", "SELU", "Sequential", "SiLU",
    "Sigmoid", "SmoothL1Loss", "Softmax", "Softplus", "Softsign", "Tanh", "functional",
    "init",
]
