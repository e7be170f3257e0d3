"""``md.optim.Adam`` and ``AdamW``: PyTorch's update rule, AMSGrad, L2 or decoupled
weight decay."""

from __future__ import annotations

from .. import maximum, sqrt, zeros_like
from ._optimizer import Optimizer
from ._updates import addcdiv_, addcmul_, check_options, lerp_, real_params

__all__ = ["Adam", "AdamW"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), PyTorch's rule, per parameter at step ``t``::

        g = grad + weight_decay * p           (or p *= 1 - lr * weight_decay, decoupled)
        m = m + (1 - beta1) * (g - m)
        v = beta2 * v + (1 - beta2) * g * g
        v_max = max(v_max, v)                 (amsgrad; v_max replaces v below)
        p = p - lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)

    State: ``step`` (an int), ``exp_avg``, ``exp_avg_sq`` and ``max_exp_avg_sq``.

    Raises:
        ValueError: a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside [0, 1).
    """

    _name = "Adam"

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, decoupled_weight_decay: bool = False):
        check_options(self._name, learning_rate=lr, epsilon=eps, betas=betas,
                      weight_decay=weight_decay)
        super().__init__(params, {"lr": lr, "betas": tuple(betas), "eps": eps,
                                  "weight_decay": weight_decay, "amsgrad": amsgrad,
                                  "maximize": maximize, "foreach": foreach,
                                  "decoupled_weight_decay": decoupled_weight_decay})

    def _update(self, group: dict, params: list) -> None:
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay, amsgrad = group["weight_decay"], group["amsgrad"]
        for p in real_params(self._name, params):
            grad = -p.grad if group["maximize"] else p.grad
            state = self.state[p]
            if not state:
                state["step"] = 0
                state["exp_avg"] = zeros_like(p)
                state["exp_avg_sq"] = zeros_like(p)
                if amsgrad:
                    state["max_exp_avg_sq"] = zeros_like(p)
            state["step"] += 1
            step = state["step"]
            if weight_decay != 0:
                if group["decoupled_weight_decay"]:
                    p.mul_(1 - lr * weight_decay)
                else:
                    grad = grad + p * weight_decay
            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            lerp_(exp_avg, grad, 1 - beta1)
            addcmul_(exp_avg_sq.mul_(beta2), grad, grad, 1 - beta2)
            step_size = lr / (1 - beta1**step)
            bias_correction2_sqrt = (1 - beta2**step) ** 0.5
            if amsgrad:
                peak = state["max_exp_avg_sq"]
                peak.copy_(maximum(peak, exp_avg_sq))
                denom = (sqrt(peak) / bias_correction2_sqrt).add_(eps)
            else:
                denom = (sqrt(exp_avg_sq) / bias_correction2_sqrt).add_(eps)
            addcdiv_(p, exp_avg, denom, -step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): each step first scales the
    parameter by ``1 - lr * weight_decay``.  The default ``weight_decay`` is 0.01."""

    _name = "AdamW"

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         foreach=foreach, decoupled_weight_decay=True)
