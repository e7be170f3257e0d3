"""``md.autograd``: reverse-mode automatic differentiation.

``backward``, ``grad``, the grad modes (``no_grad``, ``enable_grad``, ``set_grad_enabled``,
``inference_mode``), and ``Function`` for custom differentiable functions; Tensor methods
``backward``, ``register_hook``, ``retain_grad``, ``detach``, ``detach_``.  The machinery --
the Autograd layer's kernels, the graph and its engine -- lives in mdtensor/layers/autograd/
(docs/AUTOGRAD.md).
"""

from __future__ import annotations

from mdtensor.layers.autograd.api import backward, grad
from mdtensor.layers.autograd.grad_mode import (
    enable_grad,
    inference_mode,
    is_grad_enabled,
    is_inference_mode_enabled,
    no_grad,
    set_grad_enabled,
)

from .function import Function

__all__ = [
    "Function",
    "backward",
    "enable_grad",
    "grad",
    "inference_mode",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "no_grad",
    "set_grad_enabled",
]
