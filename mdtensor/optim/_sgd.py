"""``md.optim.SGD``: PyTorch's update rule (momentum, dampening, Nesterov, weight decay)."""

from __future__ import annotations

from ._optimizer import Optimizer
from ._updates import add_, check_options, real_params

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent, PyTorch's rule::

        g = grad + weight_decay * p
        buf = g                                   (first step)
        buf = momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf   (with momentum)
        p = p - lr * g

    Raises:
        ValueError: a negative option, or ``nesterov`` without momentum or with dampening.
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None):
        check_options("SGD", learning_rate=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("SGD: Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, {"lr": lr, "momentum": momentum, "dampening": dampening,
                                  "weight_decay": weight_decay, "nesterov": nesterov,
                                  "maximize": maximize, "foreach": foreach})

    def _update(self, group: dict, params: list) -> None:
        lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        for p in real_params("SGD", params):
            grad = -p.grad if group["maximize"] else p.grad
            if weight_decay != 0:
                grad = grad + p * weight_decay
            if momentum != 0:
                state = self.state[p]
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = grad.detach().clone()
                else:
                    add_(buf.mul_(momentum), grad, 1 - dampening)
                grad = grad + buf * momentum if nesterov else buf
            add_(p, grad, -lr)
