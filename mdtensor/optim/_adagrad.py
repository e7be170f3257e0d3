"""``md.optim.Adagrad``: PyTorch's update rule (learning-rate decay, weight decay)."""

from __future__ import annotations

from .. import full_like, sqrt
from ._optimizer import Optimizer
from ._updates import addcdiv_, addcmul_, check_options, real_params

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.), PyTorch's rule at step ``t``::

        g = grad + weight_decay * p
        clr = lr / (1 + (t - 1) * lr_decay)
        s = s + g * g
        p = p - clr * g / (sqrt(s) + eps)

    State (made at construction, as PyTorch): ``step`` and ``sum`` (starting at
    ``initial_accumulator_value``).

    Raises:
        ValueError: a negative option.
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0.0,
                 weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
                 eps: float = 1e-10, foreach=None, *, maximize: bool = False):
        check_options("Adagrad", learning_rate=lr, lr_decay=lr_decay,
                      weight_decay=weight_decay,
                      initial_accumulator_value=initial_accumulator_value, epsilon=eps)
        super().__init__(params, {"lr": lr, "lr_decay": lr_decay, "eps": eps,
                                  "weight_decay": weight_decay,
                                  "initial_accumulator_value": initial_accumulator_value,
                                  "foreach": foreach, "maximize": maximize})
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p] = {"step": 0,
                                 "sum": full_like(p, group["initial_accumulator_value"])}

    def _update(self, group: dict, params: list) -> None:
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay = group["weight_decay"]
        for p in real_params("Adagrad", params):
            grad = -p.grad if group["maximize"] else p.grad
            state = self.state[p]
            state["step"] += 1
            if weight_decay != 0:
                grad = grad + p * weight_decay
            clr = lr / (1 + (state["step"] - 1) * lr_decay)
            total = addcmul_(state["sum"], grad, grad)
            addcdiv_(p, grad, sqrt(total).add_(eps), -clr)
