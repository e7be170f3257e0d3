"""Derivative formulas of convolution (ops/conv.py, Note [Convolution kernels])."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY as _AUTOGRAD
from mdtensor.dispatch.tls import dispatch_tls

from ._derivative_helpers import reads, rule, uses_mask
from .conv import geometry

__all__: list[str] = []  # importing the module registers its rules


def _recording() -> bool:
    return bool(dispatch_tls.get()[1] & _AUTOGRAD)


def composite_backward(g, x, weight, stride, padding, dilation, groups, mask):
    """The three gradients from ``im2col``, ``col2im``, ``matmul`` and ``sum`` (public ops,
    so they differentiate again): ``col2im(weight^T @ g)``, ``g @ im2col(x)^T`` summed over
    the batch, and ``g`` summed to the channels -- those ``mask`` asks for, else None."""
    k, d, p, s, blocks = geometry("convolution_backward", x, weight, stride, padding,
                                  dilation, False, (0,), groups)
    n, out_channels = x.shape[0], weight.shape[0]
    windows = blocks[0] * blocks[1]
    g4 = aten.reshape(g, (n, groups, out_channels // groups, windows))
    x4 = x if x.ndim == 4 else aten.unsqueeze(x, 2)
    gx = gw = gb = None
    if mask[0]:
        w3 = aten.reshape(weight, (groups, out_channels // groups, -1))
        cols = aten.matmul(aten.matrix_transpose(w3), g4)  # (N, G, Cg * kh * kw, L)
        cols = aten.reshape(cols, (n, x.shape[1] * k[0] * k[1], windows))
        gx = aten.reshape(aten.col2im(cols, tuple(x4.shape[2:]), k, d, p, s), tuple(x.shape))
    if mask[1]:
        cols = aten.reshape(aten.im2col(x4, k, d, p, s), (n, groups, -1, windows))
        gw = aten.sum(aten.matmul(g4, aten.matrix_transpose(cols)), (0,))
        gw = aten.reshape(gw, tuple(weight.shape))
    if mask[2]:
        gb = aten.sum(g, (0,) + tuple(range(2, g.ndim)))
    return gx, gw, gb


@rule("convolution")
@reads(0, 1)  # of the bias, only whether there is one
@uses_mask
def _convolution(needs, g, out, x, weight, bias, stride, padding, dilation, transposed,
                 output_padding, groups):
    # needs: input, weight, then the bias's entry (False when there is no bias)
    mask = (bool(needs[0]), bool(needs[1]), bias is not None and bool(needs[2]))
    if _recording():
        gx, gw, gb = composite_backward(g, x, weight, stride, padding, dilation, groups, mask)
    else:
        gx, gw, gb = aten.convolution_backward(
            g, x, weight, None if bias is None else tuple(bias.shape), stride, padding,
            dilation, transposed, output_padding, groups, mask)
    return (gx, gw, gb) + (None,) * 6


@rule("convolution_backward")
def _convolution_backward(c, out, g, x, weight, bias_sizes, stride, padding, dilation,
                          transposed, output_padding, groups, output_mask):
    # The vector-Jacobian product of the composite formula (Note [Convolution kernels]):
    # rarely run, the forward's formula composes ops whenever backward records.
    from mdtensor.autograd import enable_grad, grad

    inputs = [t if t.requires_grad else t.detach().requires_grad_(True)
              for t in (g, x, weight)]
    with enable_grad():
        outs = composite_backward(*inputs, stride, padding, dilation, groups, output_mask)
    pairs = [(o, t) for o, t in zip(outs, c) if o is not None and t is not None]
    grads = tuple(grad([o for o, _ in pairs], inputs, [t for _, t in pairs],
                       create_graph=_recording(), allow_unused=True)) if pairs else \
        (None,) * 3
    return grads + (None,) * 8
