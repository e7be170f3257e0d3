"""Shared meta functions: shape and dtype inference without data.

A meta function takes the op's arguments (tensors may be real, meta or fake) and returns
``(shape, dtype)``, or a tuple/list of them for several outputs.  Errors raised here are the
same errors the real kernels raise, so Meta and fake tensors fail where real ones would.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes
from mdtensor._dtypes import DType, result_type

__all__ = [
    "ArraySpec",
    "backend_axis",
    "binary",
    "check_nonempty",
    "normalize_axis",
    "broadcast_shapes",
    "check_has_dimension",
    "compare",
    "matmul",
    "normalize_axes",
    "reduction",
    "same",
    "unary_float",
]


class ArraySpec:
    """A raw backend array seen as meta functions see tensors (shape, ndim, dtype), so an
    impl can run its op's meta function for the same checks and messages."""

    __slots__ = ("ndim", "raw_dtype", "shape")

    def __init__(self, a):
        self.shape = tuple(a.shape)
        self.ndim = len(self.shape)
        self.raw_dtype = a.dtype

    @property
    def dtype(self):
        # Converted when a check reads it: most read only the shape (a kernel's checks build
        # several specs per call: max pooling, batch norm, im2col).
        return _dtypes.as_dtype(self.raw_dtype)


def broadcast_shapes(op: str, *shapes) -> tuple[int, ...]:
    """Array API broadcasting; ValueError naming the op on incompatible shapes."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d == out[i] or d == 1:
                continue
            if out[i] == 1:
                out[i] = d
            else:
                raise ValueError(
                    f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be "
                    f"broadcast together (dimension {i - ndim}: {out[i]} vs {d})"
                )
    return tuple(out)


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def real_dtype(d: DType) -> DType:
    """The real dtype of complex ``d`` (``d`` itself when it is not complex)."""
    return {_dtypes.complex64: _dtypes.float32, _dtypes.complex128: _dtypes.float64}.get(d, d)


def same(x, *args, **kwargs):
    """Same shape and dtype as ``x``."""
    return x.shape, x.dtype


def unary_float(x, *args, **kwargs):
    """Same shape; integer/bool inputs give the default float dtype (as PyTorch)."""
    dt = x.dtype
    if dt.kind in "biu":
        dt = _dtypes.get_default_dtype()
    return x.shape, dt


def binary(a, b, *args, **kwargs):
    """Broadcast shapes; dtype by promotion with Python scalars weak."""
    return broadcast_shapes("binary op", _shape(a), _shape(b)), result_type(a, b)


def compare(a, b, *args, **kwargs):
    return broadcast_shapes("comparison", _shape(a), _shape(b)), _dtypes.bool_


def normalize_axis(op: str, axis, ndim: int) -> int:
    """One axis -> non-negative int; IndexError naming the op when out of range (a 0-d
    tensor takes 0 and -1, Note [Axes of 0-d tensors])."""
    if type(axis) is int and -ndim <= axis < ndim:  # the common case, no normalizing loop
        return axis + ndim if axis < 0 else axis
    return normalize_axes(op, axis, ndim)[0]


def normalize_axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    """Axis/axes -> sorted non-negative tuple; IndexError naming the op when out of range."""
    if axis is None:
        return tuple(range(ndim))
    if type(axis) is int and -ndim <= axis < ndim:
        return (axis + ndim if axis < 0 else axis,)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -max(ndim, 1) <= a < max(ndim, 1):
            raise IndexError(
                f"{op}: axis {a} is out of range for a tensor of dimension {ndim} "
                f"(expected to be in range [{-max(ndim, 1)}, {max(ndim, 1) - 1}])"
            )
        out.append(a % max(ndim, 1))
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: duplicate axes in {tuple(axes)}")
    return tuple(sorted(out))


def backend_axis(op: str, ndim: int, axis):
    """``axis`` of a tensor of ``ndim`` dimensions as the backends take it: an int, a tuple
    or None.

    Note [Axes of 0-d tensors]: PyTorch accepts axis 0 and -1 (and ``(0,)``, ``(-1,)``) of a
    0-d tensor, as its only element, and every op that takes an axis of its input then
    acts on that element: a reduction reduces it (the result is 0-d, with ``keepdims`` too),
    sort, flip and softmax give a 0-d result.  NumPy refuses such an axis in most functions
    (``AxisError``) and JAX in all.  So for a 0-d tensor the axis is checked here (an
    IndexError naming the op beyond 0 and -1) and given to the backend as None, the whole
    tensor, which is that element; ops that need a dimension (sort, softmax) compute on
    the tensor made 1-d and give the result back its 0-d shape.
    """
    if ndim == 0 and axis is not None:
        normalize_axes(op, axis, 0)
        return None
    return axis if axis is None or isinstance(axis, int) else tuple(axis)


def check_has_dimension(op: str, ndim: int, axis) -> None:
    """IndexError naming the op for ``axis`` of a 0-d tensor, for ops that need a dimension
    to work along (``roll``, ``split``, ...: ``NEEDS_DIMENSION`` in ops/_errors.py), as
    PyTorch's ``Dimension specified as 0 but tensor has no dimensions``."""
    if not ndim and axis is not None:
        raise IndexError(f"{op}: a 0-d tensor has no dimension {axis} (expected a tensor of "
                         f"at least one dimension)")


def check_nonempty(op: str, shape, axis) -> None:
    """A reduction without identity (max, argmax, ...) over ``axis`` of a tensor of
    ``shape``: ValueError naming the op when a reduced dimension has size 0, in PyTorch's
    words.  Reducing no axis (``axis=()``) or only non-empty ones is fine, whatever the
    other dimensions' sizes."""
    if axis is None:
        if 0 in tuple(shape):
            raise ValueError(f"{op}: expected reduction dim to be specified for an empty "
                             f"tensor (shape {tuple(shape)}; the reduction has no "
                             f"identity)")
        return
    for a in normalize_axes(op, axis, len(shape)):
        if len(shape) and shape[a] == 0:
            raise ValueError(f"{op}: expected reduction dim {a} to have non-zero size "
                             f"(shape {tuple(shape)}; the reduction has no identity)")


def reduction(x, axis=None, keepdims=False, *, dtype=None, **kwargs):
    """Reduce ``axis`` (None: all); dtype from ``dtype=`` or ``x``."""
    axes = normalize_axes("reduction", axis, x.ndim)
    shape = tuple(
        (1 if i in axes else d) for i, d in enumerate(x.shape) if keepdims or i not in axes
    )
    return shape, _dtypes.as_dtype(dtype) if dtype is not None else x.dtype


def float_reduction(x, *args, **kwargs):
    """``reduction``, with integer/bool inputs giving the default float dtype (Note [Integer
    inputs of float functions] in ops/elementwise.py)."""
    shape, d = reduction(x, *args, **kwargs)
    return shape, _dtypes.get_default_dtype() if d.kind in "biu" else d


def matmul(a, b, *args, **kwargs):
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not sa or not sb:
        raise ValueError(f"matmul: both arguments must be at least 1-D, got shapes {sa} and {sb}")
    a2 = sa if len(sa) > 1 else (1,) + sa
    b2 = sb if len(sb) > 1 else sb + (1,)
    if a2[-1] != b2[-2]:
        raise ValueError(
            f"matmul: shapes {sa} and {sb} are not aligned: {a2[-1]} (dim -1 of the first) "
            f"!= {b2[-2]} (dim -2 of the second)"
        )
    batch = broadcast_shapes("matmul", a2[:-2], b2[:-2])
    shape = batch + (a2[-2], b2[-1])
    if len(sa) == 1:
        shape = shape[:-2] + shape[-1:]
    if len(sb) == 1:
        shape = shape[:-1]
    return shape, result_type(a, b)


def as_dtype_or(dtype, default: DType) -> DType:
    return _dtypes.as_dtype(dtype) if dtype is not None else default


def compare_unary(x, *args, **kwargs):
    """Same shape, bool dtype (isnan, logical_not, ...)."""
    return x.shape, _dtypes.bool_


def dummy(x):
    """A zero-strided NumPy array with ``x``'s shape and dtype: no memory, so shape rules
    of NumPy view functions can run on it (used by view-op meta functions)."""
    return np.lib.stride_tricks.as_strided(np.zeros(1, x.dtype.numpy), tuple(x.shape),
                                           (0,) * len(x.shape))


def view_meta(fn):
    """Meta function of a view op from its NumPy counterpart run on a dummy."""
    def meta(x, *args, **kwargs):
        out = fn(dummy(x), *args, **kwargs)
        if isinstance(out, (list, tuple)):
            return [(o.shape, x.dtype) for o in out]
        return tuple(out.shape), x.dtype
    meta.__name__ = f"view_meta[{getattr(fn, '__name__', fn)}]"
    return meta
