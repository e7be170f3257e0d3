"""Per-tensor autograd state (``Tensor._ag``), created only when a tensor needs it.

Note [Autograd key]
~~~~~~~~~~~~~~~~~~~
A tensor carries the AutogradFunctionality key only while it requires grad (or has a
grad_fn), so ops on plain tensors never visit the Autograd layer.  ``set_requires_grad``
and the Autograd kernels add the key; ``detach`` makes a tensor without it.
"""

from __future__ import annotations

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.tensors.version_counter import INFERENCE, new_counter

__all__ = ["AutogradMeta", "inference_saved", "requires_grad", "saved_version", "set_grad",
           "set_requires_grad"]

_INFERENCE_SAVED = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a "
    "clone to get a normal tensor and use it in autograd, or use `md.no_grad()` instead of "
    "`md.inference_mode()`.")


def inference_saved():
    """Raise PyTorch's error for an inference tensor saved for backward (Note [Inference
    tensors] in mdtensor/tensors/version_counter.py)."""
    raise RuntimeError(_INFERENCE_SAVED)


def saved_version(t) -> int:
    """The version ``t`` is saved for backward at; an inference tensor cannot be saved."""
    vc = t._vc
    if vc is None:
        return 0
    if vc is INFERENCE:
        inference_saved()
    return vc.value


class AutogradMeta:
    """Autograd state of one tensor.

    Attributes:
        requires_grad: a leaf that requires grad, or a non-leaf with a grad_fn.
        grad: the accumulated gradient of a leaf (or of a non-leaf with retain_grad).
        grad_fn: the Node that produced this tensor (None for leaves).
        output_nr: which output of ``grad_fn`` this tensor is.
        retains_grad: ``retain_grad()`` was called on this non-leaf.
        hooks: gradient hooks (``register_hook``), called in registration order.
        leaf_edge: a leaf's edge ``(AccumulateGrad node, 0)``, made on first use (one
            tuple, shared by every node that records the leaf).
    """

    __slots__ = ("requires_grad", "grad", "grad_fn", "output_nr", "retains_grad", "hooks",
                 "leaf_edge")

    # No ``__init__`` (Note [Class calls] in mdtensor/tensors/tensor.py): ``AutogradMeta()``
    # then every slot, or ``make``.

    @staticmethod
    def make(requires_grad=False, grad_fn=None, output_nr=0):
        meta = AutogradMeta()
        meta.requires_grad = requires_grad
        meta.grad = None
        meta.grad_fn = grad_fn
        meta.output_nr = output_nr
        meta.retains_grad = False
        meta.hooks = None
        meta.leaf_edge = None  # (the leaf's AccumulateGrad node, 0), made on first use
        return meta


def requires_grad(v) -> bool:
    """Whether ``v`` is a tensor that requires grad (False for anything else)."""
    ag = getattr(v, "_ag", None)
    return ag is not None and ag.requires_grad


def set_requires_grad(t, flag: bool) -> None:
    """``t.requires_grad_(flag)`` with PyTorch's checks."""
    flag = bool(flag)
    ag = t._ag
    if ag is not None and ag.grad_fn is not None:
        if not flag:
            raise RuntimeError(
                "requires_grad_(): you can only change requires_grad flags of leaf variables. "
                "If you want to use a computed variable in a subgraph that doesn't require "
                "differentiation use var_no_grad = var.detach()."
            )
        return
    if flag:
        if t._vc is INFERENCE and new_counter() is not INFERENCE:
            raise RuntimeError("requires_grad_(): setting requires_grad=True on an inference "
                               "tensor outside InferenceMode is not allowed.")
        if t.dtype.kind not in "fc":
            raise RuntimeError(
                f"requires_grad_(): only Tensors of floating point and complex dtype can "
                f"require gradients, got {t.dtype.name}"
            )
        if ag is None:
            t._ag = AutogradMeta.make(requires_grad=True)
        else:
            ag.requires_grad = True
        t._ks |= AUTOGRAD_FUNCTIONALITY
    else:
        if ag is not None:
            ag.requires_grad = False
        t._ks &= ~AUTOGRAD_FUNCTIONALITY


def set_grad(t, value) -> None:
    """``t.grad = value`` with PyTorch's checks (``value``: a Tensor or None)."""
    if value is not None:
        if value.shape != t.shape:
            raise RuntimeError(f"grad: assigned grad has shape {value.shape}, but the tensor "
                               f"has shape {t.shape}")
        if value.dtype is not t.dtype:
            raise RuntimeError(f"grad: assigned grad has dtype {value.dtype.name}, but the "
                               f"tensor has dtype {t.dtype.name}")
    ag = t._ag
    if ag is None:
        if value is None:
            return
        ag = t._ag = AutogradMeta.make()
    ag.grad = value
