"""PyTorch's fused in-place update ops, composed from mdtensor's (Note [In-place
updates] in ``_optimizer.py``), and the checks every optimizer's options share."""

from __future__ import annotations

from mdtensor.tensors.tensor import Tensor

__all__ = ["add_", "addcdiv_", "addcmul_", "check_options", "lerp_", "real_params"]


def add_(t: Tensor, x: Tensor, alpha: float = 1.0) -> Tensor:
    """``t += alpha * x`` (PyTorch's ``add_(x, alpha=alpha)``)."""
    return t.add_(x if alpha == 1 else x * alpha)


def addcmul_(t: Tensor, a: Tensor, b: Tensor, value: float = 1.0) -> Tensor:
    """``t += value * a * b``, rounded as PyTorch's ``(value * a) * b``."""
    return t.add_((a * value) * b if value != 1 else a * b)


def addcdiv_(t: Tensor, a: Tensor, b: Tensor, value: float = 1.0) -> Tensor:
    """``t += value * a / b``, rounded as PyTorch's ``(value * a) / b``."""
    return t.add_((a * value) / b if value != 1 else a / b)


def lerp_(t: Tensor, end: Tensor, weight: float) -> Tensor:
    """``t += weight * (end - t)``, PyTorch's formula for ``weight < 0.5``, and
    ``t = end - (end - t) * (1 - weight)`` above it."""
    if abs(weight) < 0.5:
        return t.add_((end - t) * weight)
    return t.copy_(end - (end - t) * (1 - weight))


def check_options(name: str, **options) -> None:
    """PyTorch's range checks: each option must be >= 0 (``lr``, ``eps``, ...), betas
    in [0, 1).

    Raises:
        ValueError: naming the optimizer, the option and the value.
    """
    for key, value in options.items():
        if key == "betas":
            for i, beta in enumerate(value):
                if not 0.0 <= beta < 1.0:
                    raise ValueError(f"{name}: invalid beta parameter at index {i}: {beta} "
                                     f"(expected 0 <= beta < 1)")
        elif not 0.0 <= value:
            raise ValueError(f"{name}: invalid {key.replace('_', ' ')} value: {value} "
                             f"(expected >= 0)")


def real_params(name: str, params: list) -> list:
    """``params``, checked to be real floating tensors.

    Raises:
        TypeError: a complex parameter (not supported yet) or an integer one.
    """
    for p in params:
        if p.dtype.kind != "f":
            raise TypeError(f"{name}: expected real floating parameters, got a "
                            f"{p.dtype.name} parameter of shape {list(p.shape)}")
    return params
