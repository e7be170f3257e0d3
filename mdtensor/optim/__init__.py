"""``md.optim``: optimizers with PyTorch's update rules, and ``lr_scheduler``.

Every update is an in-place op on the parameters under ``no_grad`` (Note [In-place
updates] in ``_optimizer.py``), so optimizers work on every backend: NumPy, JAX (through
functionalization) and plug-in backends.  docs/NN.md lists the differences from PyTorch.
"""

from . import lr_scheduler
from ._adagrad import Adagrad
from ._adam import Adam, AdamW
from ._optimizer import Optimizer
from ._rmsprop import RMSprop
from ._sgd import SGD

__all__ = ["SGD", "Adagrad", "Adam", "AdamW", "Optimizer", "RMSprop", "lr_scheduler"]
