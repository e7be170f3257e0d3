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
    LeakyReLU,
    LogSoftmax,
    ReLU,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from ._container import ModuleDict, ModuleList, Sequential
from ._layers import Dropout, Embedding, Flatten, Identity, LayerNorm, Linear
from ._loss import CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from ._module import Module, RemovableHandle
from ._parameter import Buffer, Parameter

__all__ = [
    "Buffer", "CrossEntropyLoss", "Dropout", "ELU", "Embedding", "Flatten", "GELU",
    "Identity", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax", "MSELoss",
    "Module", "ModuleDict", "ModuleList", "NLLLoss", "Parameter", "ReLU", "RemovableHandle",
    "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh", "functional", "init",
]
