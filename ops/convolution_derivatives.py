"""Derivative formulas of ``im2col`` and ``col2im`` (ops/convolution.py).

The two ops are linear and each other's adjoints (Note [Convolution through im2col]), so
each one's gradient is the other applied to the incoming gradient, and neither reads the
values of its input.
"""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import reads, rule

__all__: list[str] = []  # importing the module registers its rules


@rule("im2col")
@reads()
def _im2col(g, out, x, kernel_size, dilation, padding, stride):
    return (aten.col2im(g, tuple(x.shape[-2:]), kernel_size, dilation, padding, stride),
            None, None, None, None)


@rule("col2im")
@reads()
def _col2im(g, out, x, output_size, kernel_size, dilation, padding, stride):
    return aten.im2col(g, kernel_size, dilation, padding, stride), None, None, None, None, None
