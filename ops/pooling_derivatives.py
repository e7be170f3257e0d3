"""Derivative formulas of max pooling (ops/pooling.py, Note [Max pooling kernels]).

The gradient of ``max_pool2d_with_indices`` goes to the index each maximum came from (its
backward op); the backward op is linear in ``grad_output``, and its own gradient gathers the
incoming gradient at the same indices (PyTorch's ``max_pool_double_backward``).
"""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import reads, rule, uses_out

__all__: list[str] = []  # importing the module registers its rules


@rule("max_pool2d_with_indices")
@uses_out(1)
@reads()  # the output's indices only
def _max_pool(g, out, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    return (aten.max_pool2d_with_indices_backward(g[0], x, kernel_size, stride, padding,
                                                  dilation, ceil_mode, out[1]),
            None, None, None, None, None)


@rule("max_pool2d_with_indices_backward")
@reads(7)  # the indices
def _max_pool_backward(g, out, grad_output, x, kernel_size, stride, padding, dilation,
                       ceil_mode, indices):
    lead = tuple(indices.shape[:-2])
    flat = aten.reshape(g, lead + (-1,))
    picked = aten.take_along_axis(flat, aten.reshape(indices, lead + (-1,)), -1)
    return (aten.reshape(picked, tuple(indices.shape)),) + (None,) * 7
