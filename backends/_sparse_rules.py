"""What every sparse backend does alike: check axes, product operands and reshape targets,
refuse ops by name, and move a sparse tensor to another device.

The SparseCPU kernels (``scipy_sparse``), the SparseMeta ones (``meta_sparse``) and any
other backend's check their arguments with these functions, so a bad call raises the same
error, in the catalogue's words, whichever backend the tensor lives on.  Nothing here
computes on data: the arguments are tensors (read for ``shape`` and ``ndim``) and ints.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.array_utils import normalize_axis_tuple

__all__ = ["ZERO_PRESERVING", "matmul_shape", "move", "normalize_axes", "on_values",
           "permutation", "refusal", "reshape_target", "transpose_axes", "transposes"]

#: elementwise ops that map zero to zero: a sparse backend computes them on the stored
#: values (Note [Values through the dense ops] in backends/scipy_sparse.py)
ZERO_PRESERVING = ("neg", "abs", "sqrt", "sin", "tanh", "relu", "sign", "square", "expm1",
                   "log1p", "sinh", "tan", "asin", "atan", "asinh", "atanh", "trunc",
                   "floor", "ceil", "conj", "positive")


def normalize_axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    """``axis`` (an int or a tuple) as non-negative axes; the catalogue's errors, named."""
    try:
        return normalize_axis_tuple(axis, ndim)
    except np.exceptions.AxisError:
        raise IndexError(f"{op}: axis {axis} is out of range for a tensor of dimension "
                         f"{ndim} (expected to be in range [{-ndim}, {ndim - 1}])") from None
    except ValueError:
        raise ValueError(f"{op}: duplicate axes in {axis}") from None


def matmul_shape(self, other, sa: bool, sb: bool) -> tuple[int, ...]:
    """The shape of ``self @ other`` where ``sa``/``sb`` say which operands are sparse: a
    sparse operand has 2 dimensions, a dense one 1 or 2."""
    for t, s, side in ((self, sa, "self"), (other, sb, "other")):
        if s and t.ndim != 2:
            raise ValueError(f"matmul: a sparse operand must have 2 dimensions; {side} "
                             f"has {t.ndim}")
        if not s and not 1 <= t.ndim <= 2:
            raise ValueError(f"matmul: a dense operand of a sparse product must have 1 or "
                             f"2 dimensions; {side} has {t.ndim}")
    a, b = tuple(self.shape), tuple(other.shape)
    inner_b = b[0] if len(b) == 1 else b[-2]
    if a[-1] != inner_b:
        raise ValueError(f"matmul: self and other shapes cannot be multiplied "
                         f"({'x'.join(map(str, a))} and {'x'.join(map(str, b))})")
    return a[:-1] + b[1:]


def transpose_axes(shape, dim0: int, dim1: int) -> list[int]:
    """The permutation that swaps ``dim0`` and ``dim1``."""
    nd = len(shape)
    d0, = normalize_axes("transpose", dim0, nd)
    d1, = normalize_axes("transpose", dim1, nd)
    axes = list(range(nd))
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return axes


def permutation(shape, axes) -> tuple[int, ...]:
    nd = len(shape)
    axes = tuple(int(d) % nd for d in axes) if nd else tuple(axes)
    if sorted(axes) != list(range(nd)):
        raise ValueError(f"permute: axes {tuple(axes)} are not a permutation of the "
                         f"{nd} dimensions")
    return axes


def reshape_target(shape, target, csr: bool) -> tuple[int, ...]:
    """``target`` with its ``-1`` resolved, checked against a tensor of ``shape``."""
    target = tuple(int(s) for s in target)
    total = math.prod(shape)
    if target.count(-1) == 1:
        known = math.prod(s for s in target if s != -1)
        if known and total % known == 0:
            target = tuple(total // known if s == -1 else s for s in target)
    if math.prod(target) != total or any(s < 0 for s in target):
        raise ValueError(f"reshape: shape {target} is invalid for input of size {total}")
    if csr and len(target) != 2:
        raise ValueError(f"reshape: a sparse CSR tensor has 2 dimensions; got shape "
                         f"{target} (convert with to_sparse() first)")
    return target


def refusal(name: str, key: str, why: str):
    """The kernel of an op a sparse key refuses by name: the CompositeExplicitAutograd
    kernels that compute on dense arrays (``view``, ``ones_like``, ...) would otherwise
    serve it."""
    def kernel(self, *args, **kwargs):
        raise NotImplementedError(f"aten::{name}: no kernel for a sparse tensor "
                                  f"({key}): {why}")

    kernel.__name__ = kernel.__qualname__ = f"sparse[{name}]"
    return kernel


def move(t, device, key: str):
    """``t.to(device)`` of sparse ``t``: its dense parts moved, and the sparse tensor made
    again from them by the destination's constructor kernel (``sparse_coo_tensor`` /
    ``sparse_csr_tensor`` for its key), so any two backends with sparse constructors move
    tensors between them.  A destination without one raises its missing-kernel error."""
    from mdtensor.dispatch.namespaces import aten_calls as aten
    from mdtensor.tensors.layout import layout_of, sparse_csr

    if str(device) == str(t._device):
        return aten.clone(t)
    try:
        if layout_of(t) is sparse_csr:
            parts = (aten.crow_indices(t), aten.col_indices(t), aten._values(t))
            moved = [aten.to_device_copy(p, device) for p in parts]
            return aten.sparse_csr_tensor(*moved, tuple(t.shape))
        parts = (aten._indices(t), aten._values(t))
        moved = [aten.to_device_copy(p, device) for p in parts]
        return aten.sparse_coo_tensor(*moved, tuple(t.shape),
                                      is_coalesced=aten.is_coalesced(t))
    except NotImplementedError as e:
        raise NotImplementedError(f"aten::to_device_copy: moving a sparse tensor from "
                                  f"{t._device} to {device} needs sparse kernels there "
                                  f"({key} has none for it: {e})") from None


def on_values(name: str, values_of, rebuild, key: str):
    """The kernel of an elementwise op that keeps zeros: the dense op on ``values_of(t)``
    (a dense tensor of the stored values), then ``rebuild(t, result)`` (Note [Values
    through the dense ops] in backends/scipy_sparse.py).  ``pow`` takes positive exponents
    only."""
    from mdtensor.dispatch.namespaces import aten_calls as aten

    op = getattr(aten, name)

    def kernel(self, *args, **kwargs):
        if name == "pow":
            exponent = args[0] if args else kwargs.get("exponent")
            if not (isinstance(exponent, (int, float)) and exponent > 0):
                raise NotImplementedError(
                    f"pow: a sparse tensor to the power {exponent!r} would not keep its "
                    f"zeros; {key} takes positive exponents (use to_dense() first)")
        return rebuild(self, op(values_of(self), *args, **kwargs))

    kernel.__name__ = kernel.__qualname__ = f"{key}[{name}]"
    return kernel


def transposes(transpose, clone):
    """The ``matrix_transpose`` and ``t`` kernels of a backend whose ``transpose.int`` and
    ``clone`` kernels are ``transpose`` and ``clone``."""
    def matrix_transpose(self):
        if self.ndim < 2:
            raise ValueError(f"matrix_transpose: expected a tensor of at least 2 dimensions, "
                             f"got {self.ndim}")
        return transpose(self, -2, -1)

    def t(self):
        if self.ndim > 2:
            raise ValueError(f"t: expects a tensor with <= 2 dimensions, but self is "
                             f"{self.ndim}D")
        return transpose(self, 0, -1) if self.ndim == 2 else clone(self)

    return matrix_transpose, t
