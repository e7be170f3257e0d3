"""``md.optim.RMSprop``: PyTorch's update rule (centered, momentum, weight decay)."""

from __future__ import annotations

from .. import sqrt, zeros_like
from ._optimizer import Optimizer
from ._updates import add_, addcdiv_, addcmul_, check_options, lerp_, real_params

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop, PyTorch's rule::

        g = grad + weight_decay * p
        v = alpha * v + (1 - alpha) * g * g
        avg = sqrt(v - m * m) + eps, with m = m + (1 - alpha) * (g - m)   (centered)
        avg = sqrt(v) + eps                                               (otherwise)
        buf = momentum * buf + g / avg;  p = p - lr * buf                 (momentum > 0)
        p = p - lr * g / avg                                              (otherwise)

    State: ``step``, ``square_avg``, ``momentum_buffer`` (momentum > 0), ``grad_avg``
    (centered).

    Raises:
        ValueError: a negative option.
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0.0, momentum: float = 0.0, centered: bool = False,
                 *, maximize: bool = False, foreach=None):
        check_options("RMSprop", learning_rate=lr, epsilon=eps, momentum=momentum,
                      weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, {"lr": lr, "alpha": alpha, "eps": eps,
                                  "weight_decay": weight_decay, "momentum": momentum,
                                  "centered": centered, "maximize": maximize,
                                  "foreach": foreach})

    def _update(self, group: dict, params: list) -> None:
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        weight_decay, momentum, centered = group["weight_decay"], group["momentum"], \
            group["centered"]
        for p in real_params("RMSprop", params):
            grad = -p.grad if group["maximize"] else p.grad
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["square_avg"] = zeros_like(p)
                if momentum > 0:
                    state["momentum_buffer"] = zeros_like(p)
                if centered:
                    state["grad_avg"] = zeros_like(p)
            state["step"] += 1
            if weight_decay != 0:
                grad = grad + p * weight_decay
            square_avg = state["square_avg"]
            addcmul_(square_avg.mul_(alpha), grad, grad, 1 - alpha)
            if centered:
                grad_avg = lerp_(state["grad_avg"], grad, 1 - alpha)
                avg = sqrt(square_avg - grad_avg * grad_avg)
            else:
                avg = sqrt(square_avg)
            avg = avg.add_(eps)
            if momentum > 0:
                buf = state["momentum_buffer"]
                addcdiv_(buf.mul_(momentum), grad, avg)
                add_(p, buf, -lr)
            else:
                addcdiv_(p, grad, avg, -lr)
