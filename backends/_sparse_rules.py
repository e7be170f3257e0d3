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


# ---------------------------------------------------------------------------------------
# Kernels every sparse backend shares, written against a few of its primitives


def _is_sparse(t) -> bool:
    from mdtensor.tensors.layout import SPARSE

    return bool(getattr(t, "_ks", 0) & SPARSE)


def _no_elements(t):
    """A tensor of no elements with ``t``'s dtype (for the dense ops' dtype rules)."""
    return t._device.wrap(t._data.data[:0])


def data_dependent(op: str) -> NotImplementedError:
    """The error of an op on a sparse meta tensor whose result's number of stored elements
    is data (Note [Stored elements of meta results] in backends/meta_sparse.py)."""
    return NotImplementedError(
        f"{op}: the number of stored elements of the result depends on the data, which "
        f"sparse meta tensors do not have (SparseMeta)")


def layout_error(name: str, got, want: str, hint: str = "") -> TypeError:
    return TypeError(f"{name}: expected a sparse {want} tensor, got layout {got}{hint}")


def uncoalesced_error(name: str) -> RuntimeError:
    return RuntimeError(f"{name}: cannot get {name} on an uncoalesced tensor, please call "
                        f".coalesce() first")


def check_sparse_mask(self, mask) -> None:
    if not _is_sparse(mask):
        raise TypeError("sparse_mask: expected mask to be a sparse tensor, got a strided "
                        "one")
    if tuple(self.shape) != tuple(mask.shape):
        raise ValueError(f"sparse_mask: expected self and mask of the same shape, got "
                         f"{tuple(self.shape)} and {tuple(mask.shape)}")


def check_index_key(key, key_name: str) -> tuple:
    """The parts of ``x[key]`` for a sparse ``x``: ints, slices (positive steps) and
    ``...``; new axes have no kernel."""
    parts = key if isinstance(key, tuple) else (key,)
    if any(k is None for k in parts):
        raise NotImplementedError(f"__getitem__: new axes (None) of a sparse tensor have no "
                                  f"kernel ({key_name})")
    if any(isinstance(k, slice) and k.step is not None and k.step <= 0 for k in parts):
        raise ValueError("__getitem__: step must be greater than zero")
    return parts


def kept(coords, shape, dims):
    """The coordinates (one array per dimension) and shape without the dimensions
    ``dims``."""
    keep = [d for d in range(len(shape)) if d not in dims]
    return [coords[d] for d in keep], tuple(shape[d] for d in keep)


def check_like_device(self, device, key_name: str) -> None:
    if device is not None and str(device) != str(self._device):
        raise NotImplementedError(f"zeros_like: a sparse tensor on {self._device} to "
                                  f"{device} ({key_name})")


def add_like(name: str, sign: int, sparse_add):
    """``add``/``sub``: sparse and dense give dense (the dense op on a dense copy), two
    sparse tensors of one shape ``sparse_add(self, other, dtype, scale)`` (``self + scale
    * other``), with the dense op's dtype rules."""
    def kernel(self, other, *, alpha=1):
        from mdtensor.dispatch.namespaces import aten_calls as aten

        op = getattr(aten, name)
        if not (_is_sparse(self) and _is_sparse(other)):  # sparse + dense is dense
            a = aten._to_dense(self) if _is_sparse(self) else self
            b = aten._to_dense(other) if _is_sparse(other) else other
            return op(a, b, alpha=alpha)
        if tuple(self.shape) != tuple(other.shape):
            raise ValueError(f"{name}: sparse operands must have the same shape; got "
                             f"{tuple(self.shape)} and {tuple(other.shape)}")
        dtype = op(_no_elements(self), _no_elements(other), alpha=alpha)._data.dtype
        return sparse_add(self, other, dtype, sign * alpha)

    kernel.__name__ = kernel.__qualname__ = f"sparse[{name}]"
    return kernel


def mul_tensor(sparse_mul, picked, rebuild):
    """``mul`` with a sparse operand: two sparse tensors of one shape ``sparse_mul(self,
    other, dtype)``; a sparse tensor and a dense one broadcasting to its shape the dense
    op on the stored values and ``picked(sparse_array, dense_array, shape)``, the dense
    factor's elements at the stored positions; ``rebuild(t, values)`` makes the result."""
    def kernel(self, other):
        from mdtensor.dispatch.namespaces import aten_calls as aten

        sa, sb = _is_sparse(self), _is_sparse(other)
        if sa and sb:
            if tuple(self.shape) != tuple(other.shape):
                raise ValueError(f"mul: sparse operands must have the same shape; got "
                                 f"{tuple(self.shape)} and {tuple(other.shape)}")
            dtype = aten.mul(_no_elements(self), _no_elements(other))._data.dtype
            return sparse_mul(self, other, dtype)
        s, d = (self, other) if sa else (other, self)
        shape = np.broadcast_shapes(tuple(s.shape), tuple(d.shape))
        if shape != tuple(s.shape):
            raise ValueError(f"mul: a dense factor must broadcast to the sparse tensor's "
                             f"shape {tuple(s.shape)}; got {tuple(d.shape)}")
        values = s._device.wrap(s._data.data)
        vals = aten.mul(values, d._device.wrap(picked(s._data, d._data, shape)))
        return rebuild(s, vals)

    kernel.__name__ = kernel.__qualname__ = "sparse[mul]"
    return kernel


def matmul_backward(key_name: str, *, coalesced, coords, like, sampled, t_matmul, todense):
    """matmul's gradients with a sparse operand: the sparse one's gradient has its
    sparsity pattern (PyTorch's ``torch.sparse.mm``), the dense one's is dense.  The
    backend gives ``coalesced(a)`` (no duplicates: each position's gradient once),
    ``coords(a)``, ``like(a, values)``, ``sampled(rows, cols, left, right)`` (``left[rows[k]]
    . right[cols[k]]``), ``t_matmul(a, d, transpose)`` (``a^T @ d`` or ``a @ d``, dense) and
    ``todense(a)``."""
    def kernel(g, self, other, mask):
        if _is_sparse(self) and _is_sparse(other):
            raise NotImplementedError(f"matmul_backward: the gradient of a product of two "
                                      f"sparse tensors is not implemented ({key_name})")
        gd = todense(g._data) if _is_sparse(g) else g._data
        ga = gb = None
        if _is_sparse(self):
            a, b = coalesced(self._data), other._data
            b2 = b[:, None] if b.ndim == 1 else b
            g2 = gd[:, None] if gd.ndim == 1 else gd
            if mask[0]:
                rows, cols = coords(a)
                ga = self._device.wrap(like(a, sampled(rows, cols, g2, b2).astype(a.dtype)))
            if mask[1]:
                gb = other._device.wrap(t_matmul(a, g2, True).reshape(b.shape))
        else:
            a, b = self._data, coalesced(other._data)
            a2 = a[None, :] if a.ndim == 1 else a
            g2 = gd[None, :] if gd.ndim == 1 else gd
            if mask[0]:  # g @ b^T, as (b @ g^T)^T
                ga = self._device.wrap(t_matmul(b, g2.T, False).T.reshape(a.shape))
            if mask[1]:
                rows, cols = coords(b)
                gb = other._device.wrap(like(b, sampled(rows, cols, a2.T, g2.T)
                                             .astype(b.dtype)))
        return ga, gb

    kernel.__name__ = kernel.__qualname__ = "sparse[matmul_backward]"
    return kernel


def common_kernels(key_name: str, on_values_kernel, transpose, clone) -> dict:
    """The kernels every sparse backend registers alike: the ops on the stored values
    (``on_values_kernel(name)``), ``t`` and ``matrix_transpose`` from its ``transpose``,
    ``to_device_copy`` through the parts, and the refusals of the CompositeExplicitAutograd
    kernels that compute on dense arrays."""
    return {
        "mul.Scalar": on_values_kernel("mul"),
        "mul.Scalar_Tensor": lambda self, other: on_values_kernel("mul")(other, self),
        "div.Scalar": on_values_kernel("div"), "pow.Scalar": on_values_kernel("pow"),
        "astype": on_values_kernel("astype"),
        **{name: on_values_kernel(name) for name in ZERO_PRESERVING},
        "transpose.int": transpose,
        **dict(zip(("matrix_transpose", "t"), transposes(transpose, clone))),
        "clone": clone,
        "to_device_copy": lambda self, device: move(self, device, key_name),
        "view": refusal("view", key_name, "a sparse tensor has no strided view; use reshape"),
        "ones_like": refusal("ones_like", key_name, "the result would be dense; use "
                             "md.ones(x.shape)"),
        "full_like": refusal("full_like", key_name, "the result would be dense; use "
                             "md.full(x.shape, value)"),
        "masked_fill.Scalar": refusal("masked_fill", key_name, "use to_dense() first"),
        "masked_fill.Tensor": refusal("masked_fill", key_name, "use to_dense() first"),
    }


def register(kernels: dict, key, origin: str) -> None:
    """Register ``kernels`` (``{overload name: fn}``) for sparse ``key`` (a backend's
    table passes through ``hybrid_sparse.routed`` first: Note [One hybrid COO for every
    backend] in backends/hybrid_sparse.py)."""
    from mdtensor.dispatch.kernel import Kernel
    from mdtensor.dispatch.namespaces import lookup

    for name, fn in kernels.items():
        op = lookup(f"aten::{name}" if "." in name else f"aten::{name}.default")
        op.register_kernel(Kernel(fn, key, origin=origin))


#: overload -> the name of the function a sparse backend's module defines for it (its
#: kernel table is ``backend_kernels(its globals())``, the same ops for every backend)
BACKEND_KERNELS = {
    "_to_dense": "_to_dense", "_to_sparse": "_to_sparse", "indices": "_indices",
    "values": "_values_op", "_values": "_raw_values", "_indices": "_raw_indices",
    "coalesce": "_coalesce",
    "is_coalesced": "_is_coalesced", "sparse_mask": "_sparse_mask", "matmul": "_matmul",
    "mm": "_matmul", "matmul_backward": "_matmul_backward", "sum": "_sum",
    "_sparse_sum.dim": "_sparse_sum", "_sparse_sum_backward": "_sparse_sum_backward",
    "mul.Tensor": "_mul_tensor",
    "softmax": "_softmax", "_softmax_backward_data": "_softmax_backward_data",
    "basic_index": "_basic_index", "reshape": "_reshape", "permute": "_permute",
    "zeros_like": "_empty_sparse_like", "empty_like": "_empty_sparse_like",
}


def backend_kernels(namespace: dict, key_name: str) -> dict:
    """A sparse backend's kernel table: its functions named in ``BACKEND_KERNELS`` (from
    ``namespace``, its module's globals), the CSR parts from its ``_csr_part(name,
    attribute)``, ``add``/``sub`` from its ``_sparse_add`` and ``common_kernels`` of its
    ``_on_values``, ``_transpose`` and ``_clone``."""
    table = {op: namespace[fn] for op, fn in BACKEND_KERNELS.items()}
    table["crow_indices"] = namespace["_csr_part"]("crow_indices", "indptr")
    table["col_indices"] = namespace["_csr_part"]("col_indices", "indices")
    table["add.Tensor"] = add_like("add", 1, namespace["_sparse_add"])
    table["sub.Tensor"] = add_like("sub", -1, namespace["_sparse_add"])
    table.update(common_kernels(key_name, namespace["_on_values"], namespace["_transpose"],
                                namespace["_clone"]))
    return table
