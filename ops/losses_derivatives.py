"""Derivative formulas of the negative log-likelihood loss (ops/losses.py, Note [nll_loss
kernels])."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import rule, uses_out

__all__: list[str] = []  # importing the module registers its rules


@rule("nll_loss_forward")
@uses_out(1)  # the total weight
def _nll_loss(g, out, x, target, weight, reduction, ignore_index):
    # only the loss differentiates, and only for the input (PyTorch: not the weights)
    go = g[0]
    if go is None:
        return (None,) * 5
    return (aten.nll_loss_backward(go, x, target, weight, reduction, ignore_index, out[1]),
            None, None, None, None)


@rule("nll_loss_backward")
def _nll_loss_backward(c, out, g, x, target, weight, reduction, ignore_index, total_weight):
    # linear in grad_output, constant in the input: the forward applied to ``c``
    loss, _ = aten.nll_loss_forward(c, target, weight, reduction, ignore_index)
    return loss, None, None, None, None, None, None
