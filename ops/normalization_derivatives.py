"""Derivative formulas of batch normalization (ops/normalization.py, Note [Batch norm
kernels])."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY as _AUTOGRAD
from mdtensor.dispatch.tls import dispatch_tls

from ._derivative_helpers import rule, uses_out

__all__: list[str] = []  # importing the module registers its rules


def _recording() -> bool:
    return bool(dispatch_tls.get()[1] & _AUTOGRAD)


def composite_backward(g, x, weight, eps, train=True, mean=None, invstd=None,
                       running_var=None):
    """The backward formula from public ops (so it differentiates again).  While training,
    the statistics are ``mean`` and ``invstd`` when given (the backward op's arguments),
    else recomputed from ``x`` (so their dependence on it is part of the formula); in
    evaluation ``mean`` is the running mean and ``running_var`` the running variance."""
    axes = (0,) + tuple(range(2, x.ndim))
    shape = (1, x.shape[1]) + (1,) * (x.ndim - 2)
    count = x.numel() // x.shape[1] if x.shape[1] else 0
    if not train:
        invstd = aten.rsqrt(aten.add(running_var, eps))
    if mean is None:
        mean = aten.mean(x, axes, True)
        centered = aten.sub(x, mean)
        invstd = aten.rsqrt(aten.add(aten.mean(aten.mul(centered, centered), axes, True), eps))
    else:
        centered = aten.sub(x, aten.reshape(mean, shape))
        invstd = aten.reshape(invstd, shape)
    xhat = aten.mul(centered, invstd)
    gb = aten.sum(g, axes)
    gw = aten.sum(aten.mul(g, xhat), axes)
    scale = invstd if weight is None else aten.mul(invstd, aten.reshape(weight, shape))
    if not train:
        return aten.mul(g, scale), gw, gb
    inner = aten.sub(aten.sub(g, aten.div(aten.reshape(gb, shape), count)),
                     aten.mul(xhat, aten.div(aten.reshape(gw, shape), count)))
    return aten.mul(inner, scale), gw, gb


@rule("_native_batch_norm_legit.no_stats")
@uses_out(1, 2)  # the statistics
def _batch_norm(g, out, x, weight, bias, training, momentum, eps):
    # Only the output is differentiable (PyTorch: the saved statistics are not); the
    # gradients of the batch statistics' outputs are ignored.
    go = g[0]
    if go is None:
        return (None,) * 6
    if _recording():
        gx, gw, gb = composite_backward(go, x, weight, eps)
    else:
        gx, gw, gb = aten.native_batch_norm_backward(
            go, x, weight, None, None, out[1], out[2], True, eps,
            (True, weight is not None, bias is not None))
    return (gx, gw if weight is not None else None, gb if bias is not None else None,
            None, None, None)


@rule("native_batch_norm_backward")
def _batch_norm_backward(c, out, g, x, weight, running_mean, running_var, save_mean,
                         save_invstd, train, eps, output_mask):
    # The vector-Jacobian product of the composite formula (Note [Batch norm kernels]):
    # rarely run, the forward's formula composes ops whenever backward records.
    from mdtensor.autograd import enable_grad, grad

    def as_input(t):
        return t if t is None or t.requires_grad else t.detach().requires_grad_(True)

    # the kernel's arguments as they are: the statistics are inputs of the op
    stats = (save_mean, save_invstd) if train else (running_mean, running_var)
    inputs = [as_input(t) for t in (g, x, weight, *stats)]
    with enable_grad():
        if train:
            outs = composite_backward(*inputs[:3], eps, True, inputs[3], inputs[4])
        else:
            outs = composite_backward(*inputs[:3], eps, False, inputs[3],
                                      running_var=inputs[4])
    pairs = [(o, t) for o, t, m in zip(outs, c, output_mask) if m and t is not None]
    wrt = [t for t in inputs if t is not None]
    grads = list(grad([o for o, _ in pairs], wrt, [t for _, t in pairs],
                      create_graph=_recording(), allow_unused=True)) if pairs else \
        [None] * len(wrt)
    g_out, g_x, g_w, g_a, g_b = (grads.pop(0) if t is not None else None for t in inputs)
    stat_grads = (None, None, g_a, g_b) if train else (g_a, g_b, None, None)
    return (g_out, g_x, g_w, *stat_grads, None, None, None)
