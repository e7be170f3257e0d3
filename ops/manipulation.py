"""Shape manipulation, views, copies and torch-style tensor ops.

View ops declare ``Tensor(a) self -> Tensor(a)``: the ADInplaceOrView layer records view
metadata on their results and shares the base's version counter, and on backends with views
(NumPy, CuPy) the result shares memory with its base.
"""

from __future__ import annotations

import math

import numpy as np

from mdtensor import _dtypes
from mdtensor.dispatch.inline import dispatch_kernel, inline_dispatch
from mdtensor.dispatch.namespaces import namespaces as _namespaces
from mdtensor.tensors.device import Device
from mdtensor.tensors.tensor import Tensor

from . import _meta_fns as mf
from . import _meta_shape as ms
from ._cpu_kernels import np_concatenate, register_cpu, register_list_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._promotion import promote_arrays
from ._samples import make_array, unary_samples
from .elementwise import ALL

__all__ = ["NotViewableError", "broadcast_shapes", "install_tensor_methods", "to", "to_device"]


def _clone(xp, x):
    return xp.asarray(x, copy=True)


def _np_clone(xp, x):
    # See Note [NumPy fast impls]: the ndarray's copy in its own layout (array-api-compat's
    # asarray is a Python function, half of clone's time)
    return x.copy("K")


defop("clone(Tensor self) -> Tensor", impl=_clone, cpu_impl=_np_clone, meta=mf.same,
      methods=("clone",),
      info=OpInfo(ref=np.copy, dtypes=ALL, samples=unary_samples(None)))


def _copy(xp, x, src):
    # ``self`` gives only the shape and dtype: src cast and broadcast to them (PyTorch's
    # copy_ casts; the src must broadcast to self's shape).
    if tuple(src.shape) != tuple(x.shape):
        _check_copy_shape(tuple(x.shape), tuple(src.shape))
        src = xp.broadcast_to(src, tuple(x.shape))
    return xp.astype(src, x.dtype, copy=True)


def _check_copy_shape(shape, src_shape):
    ok = len(src_shape) <= len(shape) and all(
        s in (1, d) for s, d in zip(src_shape[::-1], shape[::-1]))
    if not ok:
        raise RuntimeError(f"copy_: the source of shape {src_shape} cannot be broadcast to "
                           f"the destination's shape {shape}")


def _copy_meta(x, src):
    if tuple(src.shape) != tuple(x.shape):
        _check_copy_shape(tuple(x.shape), tuple(src.shape))
    return tuple(x.shape), x.dtype


def _copy_samples(dtype, rng):
    return [SampleInput((make_array((2, 3), dtype, rng), make_array((2, 3), dtype, rng))),
            SampleInput((make_array((2, 3), dtype, rng), make_array((3,), dtype, rng)))]


# copy_ is the in-place variant; ``copy`` (functional) is what Functionalize runs for it.
defop("copy(Tensor self, Tensor src) -> Tensor", impl=_copy, structured=True,
      meta=_copy_meta, names=(), methods=("copy_",),
      info=OpInfo(ref=lambda x, s: np.broadcast_to(s, x.shape).astype(x.dtype), dtypes=ALL,
                  samples=_copy_samples))


def _transpose_perm(x, dim0, dim1):
    n = x.ndim
    perm = list(range(n))
    d0, d1 = mf.normalize_axis("transpose", dim0, n), mf.normalize_axis("transpose", dim1, n)
    if n:  # a 0-d tensor's dimension 0 is itself (Note [Axes of 0-d tensors])
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return tuple(perm)


def _transpose(xp, x, dim0, dim1):
    return xp.permute_dims(x, _transpose_perm(x, dim0, dim1))


# Note [NumPy fast impls] (ops/_decl.py): the view ops below also have a ``cpu_impl`` that
# does the same checks and then calls the ndarray method (reshape/transpose/swapaxes/a
# strided ndarray), skipping NumPy's Python-level wrappers (np.expand_dims,
# np.broadcast_to and array-api-compat's reshape cost several microseconds each).


def _np_transpose(xp, x, dim0, dim1):
    try:  # NumPy's own checks first: they pass on every valid call
        return x.swapaxes(dim0, dim1)
    except (ValueError, TypeError):  # AxisError, a 0-d tensor's axis 0, ...: the checks
        return x.transpose(_transpose_perm(x, dim0, dim1))


def _transpose_meta(x, dim0, dim1):
    shape = list(x.shape)
    return tuple(shape[i] for i in _transpose_perm(x, dim0, dim1)), x.dtype


def _transpose_samples(dtype, rng):
    return [SampleInput((make_array((2, 3, 4), dtype, rng), 0, 2)),
            SampleInput((make_array((2, 3), dtype, rng), -1, 0))]


defop("transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)", impl=_transpose,
      cpu_impl=_np_transpose,
      meta=_transpose_meta, methods=("transpose", "swapaxes"), names=("transpose",),
      info=OpInfo(ref=lambda x, a, b: np.swapaxes(x, a, b), dtypes=ALL,
                  samples=_transpose_samples))


class NotViewableError(ValueError):
    """``view`` of a tensor whose memory layout cannot take the new shape without a copy."""


def _not_viewable(x, shape, e):
    return NotViewableError(
        f"view: the tensor's memory layout (shape {tuple(x.shape)}) is not compatible "
        f"with the shape {shape} without a copy; use .reshape(...) instead ({e})")


def _view(xp, x, shape):
    shape = _view_shape(x, shape)  # the shape errors, named after the op
    if 0 in shape:  # no memory to share (array_api_strict refuses copy=False then)
        return xp.reshape(x, shape)
    try:
        return xp.reshape(x, shape, copy=False)
    except (ValueError, AttributeError, TypeError) as e:
        raise _not_viewable(x, shape, e) from None


def _np_view(xp, x, shape):
    if x.size:  # (an empty tensor's shape may need _sized's check)
        try:  # NumPy checks the shape itself; the op's own checks name the error
            if x.flags.c_contiguous:  # never copies: without ``copy=``, 1.4K instructions less
                return x.reshape(shape)
            return x.reshape(shape, copy=False)
        except (ValueError, TypeError):
            pass
    shape = _view_shape(x, shape)
    try:
        return x.reshape(shape, copy=False)
    except ValueError as e:
        raise _not_viewable(x, shape, e) from None


def _view_shape(x, shape, op="view"):
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    n = math.prod(x.shape)
    if -1 not in shape:
        if math.prod(shape) != n or (shape and min(shape) < 0):
            raise ValueError(f"{op}: shape {shape} is invalid for input of size {n}")
        return _sized(op, x, shape) if 0 in shape else shape  # else: x's own size
    if shape.count(-1) > 1:
        raise ValueError(f"{op}: only one dimension can be inferred, got shape {shape}")
    known = 1
    for s in shape:
        if s != -1:
            known *= s
    if known <= 0 or n % known:
        raise ValueError(f"{op}: shape {shape} is invalid for input of size {n}")
    return tuple(n // known if s == -1 else s for s in shape)


def _sized(name, x, shape):
    """``shape``, checked before the backend sees it (JAX aborts on a shape whose size
    overflows: Note [Allocation sizes] in ops/_factory.py).  Called only where the size
    can be that large: a view with a zero dimension (other views have ``x``'s own size), an
    expansion past 2**59 elements."""
    from mdtensor.tensors.factories import check_size

    from ._promotion import dtype_of

    check_size(name, shape, x.dtype if isinstance(x.dtype, _dtypes.DType) else dtype_of(x))
    return shape


def _view_meta(x, shape):
    return _view_shape(x, shape), x.dtype


# Note [view without strides]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On a backend whose arrays have no strides (JAX: ``Capabilities(views=False)``) a view is
# a copy kept in sync, and ``reshape`` with ``copy=False`` never refuses, so
# ``m.mT.view(6)`` succeeded there where NumPy (and PyTorch) raise.  ``view`` of a tensor
# that is itself a view, on such a backend, asks what a strided backend would say: the
# view's history (``ViewInfo.replay``, from its base) is replayed on a NumPy array of the
# base's shape (calloc'd and never written: no memory is touched), with the default
# thread-local state (no mode sees it), and NumPy's ``reshape(copy=False)`` decides.  So
# ``view`` raises the same NotViewableError on every backend, and ``reshape`` copies where
# NumPy's would.


def _strided_check(x, shape):
    """Raise NotViewableError if ``x.view(shape)`` would need a copy on a strided backend
    (Note [view without strides])."""
    from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY, FULL
    from mdtensor.dispatch.tls import DEFAULT_EXCLUDED, DEFAULT_INCLUDED, RestoreGuard

    info = x._view
    base = Device("cpu").wrap(np.zeros(tuple(info.base.shape), dtype=np.int8))
    with RestoreGuard((DEFAULT_INCLUDED, FULL & ~DEFAULT_EXCLUDED & ~AUTOGRAD_FUNCTIONALITY)):
        twin = info.replay(base)
    _np_view(np, twin._data, shape)


def _view_any(x, shape):
    """``view`` on backends that are not NumPy (rung 2, CompositeExplicitAutograd): the
    generic impl, after Note [view without strides]'s check."""
    d = x._device
    if x._view is not None and not d.backend.capabilities.views:
        _strided_check(x, shape)
    return d.wrap(_view(d.xp, x._data, shape))


defop("view(Tensor(a) self, SymInt[] shape) -> Tensor(a)", impl=_view, meta=_view_meta,
      cpu_impl=_np_view, explicit=_view_any,
      methods=("view",), names=(), varargs=True,
      info=OpInfo(ref=lambda x, s: np.reshape(x, s), dtypes=ALL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng), (3, 2))),
                                          SampleInput((make_array((2, 3), d, rng), (-1,)))]))


#: ``view``'s overload and its dispatch table (cleared in place, never replaced): reshape's
#: hot path dispatches it inline (Note [Views dispatched inline])
_view_op = CATALOGUE["aten::view"].overloads[0]
_view_table = _view_op.table
_view_call = _view_op.caller

# ---------------------------------------------------------------------------------------
# Array API manipulation functions and their torch spellings

from mdtensor._dtypes import result_type as _result_type  # noqa: E402

#: the aten operators as plain functions (``mdtensor.ops.aten_calls``, which is defined
#: only once this package is imported): a function-level import costs ~1 us per call
_aten = _namespaces.aten._calls

from .elementwise import INTS, NUMERIC  # noqa: E402,F401


def _ints(v):
    return (v,) if isinstance(v, (int, np.integer)) else tuple(v)


def _sample_2x3(dtype, rng, *rest, **kw):
    return [SampleInput((make_array((2, 3), dtype, rng), *rest), dict(kw))]


def _s(*cases):
    """Samples from (shape, extra args, kwargs) cases."""
    def samples(dtype, rng):
        return [SampleInput((make_array(shape, dtype, rng), *args), dict(kw), name=str(shape))
                for shape, args, kw in cases]
    return samples


def _check_perm(x, dims) -> tuple[int, ...]:
    dims = _ints(dims)
    n = x.ndim
    norm = mf.normalize_axes("permute", dims, n) if dims else ()
    if len(dims) != n or len(norm) != n:
        raise ValueError(f"permute: the number of dims ({len(dims)}) must equal the tensor's "
                         f"number of dimensions ({n}); got {dims}")
    return tuple(int(d) % max(n, 1) for d in dims)


def _permute(xp, x, dims):
    return xp.permute_dims(x, _check_perm(x, dims))


def _np_permute(xp, x, dims):
    if type(dims) is tuple and len(dims) == x.ndim:
        try:  # NumPy refuses repeated and out-of-range axes itself
            return x.transpose(dims)
        except (ValueError, TypeError):
            pass
    return x.transpose(_check_perm(x, dims))


defop("permute(Tensor(a) self, int[] axes) -> Tensor(a)", impl=_permute, cpu_impl=_np_permute,
      kwarg_aliases={"dims": "axes"},
      meta=mf.view_meta(lambda a, d: np.transpose(a, _check_perm(a, d))),
      names=("permute", "permute_dims"), methods=("permute", "permute_dims"), varargs=True,
      info=OpInfo(ref=lambda x, d: np.transpose(x, d), dtypes=ALL,
                  samples=_s(((2, 3, 4), ((2, 0, 1),), {}), ((3,), ((0,),), {})),
                  errors=lambda: [
                      ErrorInput(SampleInput((np.zeros((2, 3)), (0, 0))), ValueError,
                                 "permute: duplicate axes"),
                      ErrorInput(SampleInput((np.zeros((2, 3)), (0,))), ValueError,
                                 "permute: the number of dims"),
                      ErrorInput(SampleInput((np.zeros((2, 3)), (0, 2))), IndexError,
                                 "permute: axis 2 is out of range")]))


def _matrix_transpose(xp, x):
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: expected a tensor with at least 2 dimensions, "
                         f"got {x.ndim}")
    return xp.matrix_transpose(x)


def _np_matrix_transpose(xp, x):
    n = x.ndim
    if n == 2:  # ``ndarray.T``, a getset: 1.0K instructions against swapaxes' 1.7K
        return x.T
    if n < 2:
        return _matrix_transpose(xp, x)  # the error
    return x.swapaxes(-1, -2)


def _mt_meta(x):
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose: expected a tensor with at least 2 dimensions, "
                         f"got {x.ndim}")
    return tuple(x.shape[:-2]) + (x.shape[-1], x.shape[-2]), x.dtype


defop("matrix_transpose(Tensor(a) self) -> Tensor(a)", impl=_matrix_transpose, meta=_mt_meta,
      cpu_impl=_np_matrix_transpose,
      info=OpInfo(ref=lambda x: np.swapaxes(x, -1, -2), dtypes=ALL,
                  samples=_s(((2, 3), (), {}), ((2, 3, 4), (), {}))))


def _t(xp, x):
    if x.ndim > 2:
        raise ValueError(f"t: expects a tensor with <= 2 dimensions, but self is {x.ndim}D")
    return xp.permute_dims(x, tuple(reversed(range(x.ndim))))


def _np_t(xp, x):
    return x.T if x.ndim <= 2 else _t(xp, x)  # ndarray.T reverses the dimensions


defop("t(Tensor(a) self) -> Tensor(a)", impl=_t, cpu_impl=_np_t, methods=("t",),
      meta=lambda x: (tuple(reversed(x.shape)), x.dtype) if x.ndim <= 2 else _t(None, x),
      info=OpInfo(ref=np.transpose, dtypes=ALL, samples=_s(((2, 3), (), {}), ((4,), (), {}))))


# Note [reshape: a view when possible]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``reshape`` (and ``flatten``) follow PyTorch: the result is a view of ``self`` when the
# memory layout allows, else a copy.  Both are CompositeImplicitAutograd kernels over view
# ops, so aliasing is reported truthfully: ``y._base is x`` and the version counter is
# shared exactly when ``y`` shares ``x``'s memory.  The copy path views a fresh contiguous
# copy (``cat([x], axis=None)``: C-ordered and 1-D on every backend, differentiable), so
# there ``y._base`` is that private copy, never ``x``.  Their schemas carry no alias
# annotation (PyTorch's ``Tensor(a)`` on reshape would make the ADInplaceOrView layer
# record every result as a view of ``self``, copies included).  Array API ``copy=True``
# always copies and ``copy=False`` raises ValueError when a view is impossible.  On
# backends without views (JAX) ``view`` itself copies, as everywhere there.


def _copy_then_view(x, shape):
    return _view_call(_aten.cat([x], axis=None), shape)


@inline_dispatch
def _reshape(x, shape, *, copy=None):
    if copy:
        shape = _ints(shape)
        _view_shape(x, shape, "reshape")  # its own checks, named reshape
        return _copy_then_view(x, shape)
    # ``_view_call(x, shape)``, inlined (Note [Views dispatched inline])
    kernel = dispatch_kernel(_view_op, _view_table, x)
    try:
        return kernel(x, shape)
    except NotViewableError:
        shape = _ints(shape)
        if copy is False:
            raise ValueError(f"reshape: cannot reshape a tensor of shape {tuple(x.shape)} to "
                             f"{shape} without a copy (copy=False)") from None
        return _copy_then_view(x, shape)
    except ValueError:  # view's own shape checks: raised again, named reshape
        _view_shape(x, _ints(shape), "reshape")
        raise


defop("reshape(Tensor self, SymInt[] shape, *, bool? copy=None) -> Tensor",
      composite=_reshape,
      meta=lambda x, shape, copy=None: (_view_shape(x, _ints(shape), "reshape"), x.dtype),
      methods=("reshape",), varargs=True, kwarg_aliases={"newshape": "shape"},
      info=OpInfo(ref=lambda x, s: np.reshape(x, s), dtypes=ALL,
                  samples=_s(((2, 3), ((3, 2),), {}), ((2, 3), ((-1,),), {}),
                             ((0, 3), ((3, 0),), {})),
                  errors=lambda: [
                      ErrorInput(SampleInput((np.zeros((2, 3)), (4,))), ValueError,
                                 r"reshape: shape \(4,\) is invalid for input of size 6"),
                      ErrorInput(SampleInput((np.zeros((2, 3)), (-1, -1))), ValueError,
                                 "only one dimension can be inferred")]))


def _flat_shape(x, start_dim=0, end_dim=-1):
    n = x.ndim
    if n == 0:
        mf.normalize_axes("flatten", start_dim, 0), mf.normalize_axes("flatten", end_dim, 0)
        return (1,)
    s = mf.normalize_axis("flatten", start_dim, n)
    e = mf.normalize_axis("flatten", end_dim, n)
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} cannot come after end_dim {end_dim}")
    size = 1
    for d in x.shape[s:e + 1]:
        size *= d
    return tuple(x.shape[:s]) + (size,) + tuple(x.shape[e + 1:])


_FLAT = (-1,)


@inline_dispatch
def _flatten(x, start_dim=0, end_dim=-1):
    """CompositeImplicitAutograd of ``flatten`` and ``ravel`` (PyTorch's ``reshape(-1)``):
    ``reshape`` to the flattened shape (Note [reshape: a view when possible]).  That shape
    is always valid, so ``_reshape``'s steps reduce to ``view``, dispatched inline (Note
    [Views dispatched inline]: a frame less than calling ``_reshape``, ``flatten`` with
    grad of the sweep sample 34.5K -> 33.9K instructions), or a view of a copy."""
    shape = _FLAT if start_dim == 0 and end_dim == -1 else _flat_shape(x, start_dim, end_dim)
    kernel = dispatch_kernel(_view_op, _view_table, x)
    try:
        return kernel(x, shape)
    except NotViewableError:
        return _copy_then_view(x, shape)


defop("flatten(Tensor self, int start_dim=0, int end_dim=-1) -> Tensor", composite=_flatten,
      meta=lambda x, *r, **k: (_flat_shape(x, *r, **k), x.dtype), methods=("flatten",),
      info=OpInfo(ref=lambda x, *r: np.reshape(x, _flat_shape(x, *r)), dtypes=ALL,
                  samples=_s(((2, 3, 4), (), {}), ((2, 3, 4), (1,), {}), ((), (), {}))))


defop("ravel(Tensor self) -> Tensor", composite=_flatten,
      meta=lambda x: ((math.prod(x.shape),), x.dtype), methods=("ravel",),
      info=OpInfo(ref=lambda x: np.ravel(x), dtypes=ALL,
                  samples=_s(((2, 3, 4), (), {}), ((), (), {}), ((0, 3), (), {}))))


def _expand_shape(x, shape):
    shape = _ints(shape)
    lead = len(shape) - x.ndim
    if lead < 0:
        raise ValueError(f"expand: the number of sizes provided ({len(shape)}) must be greater "
                         f"or equal to the number of dimensions in the tensor ({x.ndim})")
    full = shape
    if shape and min(shape) < 0:  # -1 keeps an existing size
        full = tuple(x.shape[i - lead] if (s == -1 and i >= lead) else s
                     for i, s in enumerate(shape))
        for i, s in enumerate(full):
            if s < 0:
                where = "in a leading, non-existing dimension" if i < lead else "here"
                raise ValueError(f"expand: the expanded size of the tensor ({s}) isn't "
                                 f"allowed {where} (dimension {i}); target sizes: "
                                 f"{list(shape)}, tensor sizes: {list(x.shape)}")
    for i, d in enumerate(x.shape):
        if d != 1 and d != full[i + lead]:
            raise ValueError(
                f"expand: the expanded size of the tensor ({full[i + lead]}) must match the "
                f"existing size ({d}) at non-singleton dimension {i + lead}.  Target sizes: "
                f"{list(shape)}.  Tensor sizes: {list(x.shape)}")
    return (_sized("expand", x, full) if math.prod(full) > 1 << 59 else full), lead


def _expand(xp, x, shape):
    return xp.broadcast_to(x, _expand_shape(x, shape)[0])


# Note [Broadcast strides]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# ``broadcast_to`` and ``expand`` on CPU build their read-only view with the ndarray
# constructor over ``x``'s buffer and strides worked out in Python: the checks and the loop
# over the dimensions cost 1.2 us, more than the whole ``torch.broadcast_to`` call (1.9 us).
# The strides depend only on the target shape, ``x``'s shape and strides and its item size
# (which decide whether ``x`` is row-major, as the buffer argument needs), so they are
# worked out once per such key and looked up after (None where the fast view does not
# apply).  The shape's entries are ints by then (resolution checks a ``SymInt[]``), so
# keys that compare equal ask for the same view.  The table is cleared when it grows past
# ``_STRIDES_KEPT`` entries: a program uses a handful of shapes.


def _broadcast_strides(x, shape):
    """The strides of ``x`` broadcast to the tuple ``shape`` as a strided view of its
    buffer (what np.broadcast_to makes, without its Python-level checks), for the common
    case: a row-major ``x``, each size equal to ``x``'s or expanding a unit dimension.
    None for anything else: the op's own checks decide."""
    xs = x.shape
    lead = len(shape) - len(xs)
    if lead < 0 or not x.size or not x.flags.c_contiguous or math.prod(shape) > 1 << 59:
        return None
    strides = x.strides
    if lead:  # new leading dimensions: stride 0
        for f in shape[:lead]:
            if type(f) is not int or f < 0:
                return None
        strides = (0,) * lead + strides
    for i, d in enumerate(xs, lead):
        f = shape[i]
        if d != f:
            if d != 1 or type(f) is not int or f < 0:
                return None
            # a unit dimension expanded: stride 0 (a tuple throughout: the constructor
            # reads a tuple of strides faster than a list)
            strides = strides[:i] + (0,) + strides[i + 1:]
    return strides


_STRIDES: dict = {}  # (shape, x.shape, x.strides, x.itemsize) -> strides or None
_STRIDES_KEPT = 256


def _np_broadcast_or(slow):
    """The CPU impl ``impl(xp, x, shape)`` of ``broadcast_to`` or ``expand``: ``x``
    broadcast to ``shape`` as a read-only view of its buffer, or ``slow(xp, x, shape)``
    where that fast view does not apply (Note [Broadcast strides]).  One frame per call: a
    helper returning None to each op's own impl cost a second (``broadcast_to`` with grad,
    sweep sample: 39.3K -> 38.9K instructions)."""
    def impl(xp, x, shape):
        if type(shape) is tuple:
            key = (shape, x.shape, x.strides, x.itemsize)
            try:
                strides = _STRIDES[key]
            except KeyError:
                if len(_STRIDES) >= _STRIDES_KEPT:
                    _STRIDES.clear()
                strides = _STRIDES[key] = _broadcast_strides(x, shape)
            if strides is not None:
                out = np.ndarray(shape, x.dtype, x, 0, strides)
                out.setflags(write=False)
                return out
        return slow(xp, x, shape)

    return impl


def _expand_view(xp, x, shape):
    """``expand`` on CPU where the fast view does not apply."""
    full, lead = _expand_shape(x, shape)
    # A read-only strided view over x's own buffer, as np.broadcast_to makes.
    if not x.ndim:  # a 0-d gradient of a full reduction (sum's formula): every stride 0
        out = np.ndarray(full, x.dtype, x, 0, (0,) * lead)
    elif not x.flags.c_contiguous or x.size == 0:
        return np.broadcast_to(x, full)
    else:
        strides = (0,) * lead + tuple(0 if d != f else s for d, f, s
                                      in zip(x.shape, full[lead:], x.strides))
        out = np.ndarray(full, x.dtype, x, 0, strides)
    out.setflags(write=False)
    return out


_np_expand = _np_broadcast_or(_expand_view)


defop("expand(Tensor(a) self, SymInt[] size) -> Tensor(a)", impl=_expand, cpu_impl=_np_expand,
      meta=mf.view_meta(lambda a, s: _expand(np, a, s)), methods=("expand",), varargs=True,
      names=("expand",),
      info=OpInfo(ref=lambda x, s: _expand(np, x, s), dtypes=ALL,
                  samples=_s(((3, 1), ((3, 4),), {}), ((3,), ((2, -1),), {}),
                             ((), ((2, 3),), {}))))
def _broadcast_to_shape(x, shape):
    """``shape`` checked as a target ``x`` broadcasts to (ValueError naming the op)."""
    shape = _ints(shape)
    xs = tuple(x.shape)
    if len(xs) > len(shape) or any(d != t and d != 1 for d, t in zip(xs[::-1], shape[::-1])) \
            or any(t < 0 for t in shape):
        raise ValueError(f"broadcast_to: a tensor of shape {xs} cannot be broadcast to shape "
                         f"{shape}")
    return shape


def _broadcast_to(xp, x, shape):
    return xp.broadcast_to(x, _broadcast_to_shape(x, shape))


_np_broadcast_to = _np_broadcast_or(_broadcast_to)


defop("broadcast_to(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
      impl=_broadcast_to, cpu_impl=_np_broadcast_to,
      meta=lambda x, shape: (_broadcast_to_shape(x, shape), x.dtype),
      info=OpInfo(ref=lambda x, s: np.broadcast_to(x, s), dtypes=ALL,
                  samples=_s(((3, 1), ((2, 3, 4),), {}))))


def _squeeze(xp, x, axis=None):
    if axis is None:
        axis = tuple(i for i, d in enumerate(x.shape) if d == 1)
    axes = mf.normalize_axes("squeeze", axis, x.ndim)
    if not x.ndim:  # Note [Axes of 0-d tensors] in ops/_meta_fns.py: nothing to squeeze
        return x[...]
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: cannot select an axis to squeeze out which has size "
                             f"not equal to one (axis {a} has size {x.shape[a]})")
    return xp.squeeze(x, axis=axes) if axes else x[...]


def _np_squeeze(xp, x, axis=None):
    if axis is None:
        return x.squeeze()  # every unit dimension: ndarray.squeeze, in C
    if type(axis) is int and x.ndim:
        s = x.shape
        if -len(s) <= axis < len(s) and s[axis] == 1:  # the common case
            if not axis and len(s) > 1:  # (x[0] of a vector: a scalar, not a view)
                return x[0]  # basic indexing: 1.1K instructions against reshape's 2.1K
            if axis == -1:
                return x[..., 0]
            return x.reshape(s[:axis] + s[axis + 1:])
    return _squeeze(xp, x, axis)


defop("squeeze(Tensor(a) self, int[1]? axis=None) -> Tensor(a)", impl=_squeeze,
      cpu_impl=_np_squeeze,
      meta=mf.view_meta(lambda a, axis=None: _squeeze(np, a, axis)), methods=("squeeze",),
      kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, axis=None: _squeeze(np, x, axis), dtypes=ALL,
                  samples=_s(((2, 1, 3, 1), (), {}), ((2, 1, 3), (1,), {}))))


def _unsqueeze_axes(x, axis):
    axes = _ints(axis)
    n = x.ndim + len(axes)
    norm = []
    for a in axes:
        a = int(a)
        if not -n <= a < n:
            raise IndexError(f"unsqueeze: axis {a} is out of range for a result of dimension "
                             f"{n} (expected to be in range [{-n}, {n - 1}])")
        norm.append(a % n)
    if len(set(norm)) != len(norm):
        raise ValueError(f"expand_dims: repeated axes in {tuple(axes)}")
    return norm


def _unsqueeze(xp, x, axis):
    norm = _unsqueeze_axes(x, axis)
    return xp.expand_dims(x, axis=norm[0] if len(norm) == 1 else tuple(norm))


def _np_unsqueeze(xp, x, axis):
    s = x.shape
    if type(axis) is int and 0 <= axis <= len(s):  # the common case
        if not axis:
            return x[None]  # basic indexing: 1.1K instructions against reshape's 2.1K
        if axis == len(s):
            return x[..., None]
        return x.reshape(s[:axis] + (1,) + s[axis:])
    norm = _unsqueeze_axes(x, axis)
    shape = list(x.shape)
    for a in sorted(norm):
        shape.insert(a, 1)
    return x.reshape(shape)  # inserting unit dimensions never copies


defop("unsqueeze(Tensor(a) self, int[1] axis) -> Tensor(a)", impl=_unsqueeze,
      cpu_impl=_np_unsqueeze,
      meta=mf.view_meta(lambda a, axis: _unsqueeze(np, a, axis)),
      names=("unsqueeze", "expand_dims"), methods=("unsqueeze", "expand_dims"),
      kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, a: np.expand_dims(x, a), dtypes=ALL,
                  samples=_s(((2, 3), (0,), {}), ((2, 3), (-1,), {}), ((), (0,), {}))))


def _moveaxis(xp, x, source, destination):
    if not x.ndim:  # Note [Axes of 0-d tensors]: axis 0 of a 0-d tensor is itself
        for axes in (source, destination):
            mf.normalize_axes("moveaxis", axes, 0)
        return x[...]
    return xp.moveaxis(x, source if isinstance(source, int) else tuple(source),
                       destination if isinstance(destination, int) else tuple(destination))


def _np_moveaxis(xp, x, source, destination):
    # one axis (np.moveaxis costs 2.5 us): the transpose's permutation, kept per (ndim,
    # source, destination) -- ints only, checked before the look-up, as True and 1.0 are
    # keys equal to 1 (the permutation's list built per call: 68 -> 35 opcodes)
    if type(source) is int and type(destination) is int:
        perm = _MOVES.get((x.ndim, source, destination))
        if perm is None:
            perm = _one_move(x.ndim, source, destination)
        if perm is not None:
            return x.transpose(perm)
    return _moveaxis(xp, x, source, destination)


_MOVES: dict = {}  # (ndim, source, destination) -> the permutation moving one axis


def _one_move(n: int, source: int, destination: int) -> tuple | None:
    """The permutation of ``n`` axes moving ``source`` to ``destination`` (ints), kept in
    ``_MOVES``; None where either is out of range (the generic impl's error)."""
    if not (-n <= source < n and -n <= destination < n):
        return None
    perm = list(range(n))
    perm.insert(destination % n, perm.pop(source % n))
    if len(_MOVES) >= 256:
        _MOVES.clear()
    perm = _MOVES[n, source, destination] = tuple(perm)
    return perm


defop("moveaxis(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)",
      impl=_moveaxis, cpu_impl=_np_moveaxis,
      meta=mf.view_meta(lambda a, s, d: _moveaxis(np, a, s, d)),
      names=("moveaxis", "movedim"), methods=("moveaxis", "movedim"),
      info=OpInfo(ref=np.moveaxis, dtypes=ALL, samples=_s(((2, 3, 4), (0, 2), {}))))


def _narrow(xp, x, dim, start, length):
    # checked here: ADInplaceOrView calls this view's impl directly (Note [Fused view
    # kernels] in mdtensor/layers/inplace_or_view.py), past the generic kernel's axis check
    mf.check_has_dimension("narrow", x.ndim, dim)
    d = mf.normalize_axis("narrow", dim, x.ndim)
    if start < 0:
        start += x.shape[d]
    if not (0 <= start and start + length <= x.shape[d]) or length < 0:
        raise IndexError(f"narrow: start ({start}) + length ({length}) exceeds dimension "
                         f"size ({x.shape[d]})")
    idx = [slice(None)] * x.ndim
    idx[d] = slice(start, start + length)
    return x[(*idx, Ellipsis)]


def _np_narrow(xp, x, dim, start, length):
    # Note [NumPy fast impls] (ops/_decl.py): the first dimension, in range, one slice
    if not dim and type(dim) is int and type(start) is int and type(length) is int \
            and x.ndim and 0 <= start and 0 <= length and start + length <= x.shape[0]:
        return x[start:start + length]
    return _narrow(xp, x, dim, start, length)


defop("narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)",
      impl=_narrow, cpu_impl=_np_narrow, meta=mf.view_meta(lambda a, *r: _narrow(np, a, *r)),
      methods=("narrow",),
      info=OpInfo(ref=lambda x, *r: _narrow(np, x, *r), dtypes=ALL,
                  samples=_s(((4, 3), (0, 1, 2), {}))))


def _unbind(xp, x, axis=0):
    n = x.ndim
    a = mf.normalize_axis("unbind", axis, n)
    if a == 0 and n:
        return [x[i, ...] for i in range(x.shape[0])]  # (x[i] of a vector: a scalar)
    return [x[(slice(None),) * a + (i, Ellipsis)] for i in range(x.shape[a])]


def _np_unbind(xp, x, axis=0):
    # the rows' views (a vector's elements are scalars, not views: the impl's x[i, ...]),
    # by index: ``list(x)`` ends on NumPy's IndexError, whose message it formats (4.8K of
    # the 29.8K instructions of ``md.unbind`` on (2, 3))
    return list(map(x.__getitem__, range(len(x)))) if axis == 0 and x.ndim > 1 else \
        _unbind(xp, x, axis)


defop("unbind(Tensor(a -> *) self, int axis=0) -> Tensor(a)[]", impl=_unbind,
      cpu_impl=_np_unbind,
      meta=mf.view_meta(lambda a, axis=0: _unbind(np, a, axis)),
      names=("unbind", "unstack"), methods=("unbind", "unstack"), kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, axis=0: _unbind(np, x, axis), dtypes=ALL,
                  samples=_s(((2, 3), (), {}), ((2, 3), (1,), {}))))


def _split(xp, x, split_size_or_sections, axis=0):
    a = mf.normalize_axis("split", axis, x.ndim)
    n = x.shape[a]
    if isinstance(split_size_or_sections, (int, np.integer)):
        size = int(split_size_or_sections)
        if size <= 0 and n:
            raise ValueError(f"split: split_size must be positive, got {size}")
        # (a trailing Ellipsis: the Array API indexes every dimension or none)
        if not n:
            return [x[(*(slice(None),) * a, slice(0, 0), Ellipsis)]]
        # (stops past the end are outside the Array API too)
        if not a:
            return [x[b:min(b + size, n), ...] for b in range(0, n, size)]
        lead = (slice(None),) * a
        return [x[(*lead, slice(b, min(b + size, n)), Ellipsis)] for b in range(0, n, size)]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ValueError(f"split: split sizes {sizes} do not sum to the dimension size {n}")
    out, start = [], 0
    lead = (slice(None),) * a
    for s in sizes:
        out.append(x[(*lead, slice(start, start + s), Ellipsis)])
        start += s
    return out


def _np_pieces(x, size, a):
    """``x`` cut into pieces of ``size`` along axis ``a`` (normalized), the last one
    shorter: basic slices, whose stops NumPy clips (what ``_split`` computes with ``min``
    and an Ellipsis, the Array API's spelling, at 1.7K instructions a piece more)."""
    n = x.shape[a]
    if not a:
        return [x[b:b + size] for b in range(0, n, size)]
    lead = (slice(None),) * a
    return [x[(*lead, slice(b, b + size))] for b in range(0, n, size)]


def _np_split(xp, x, split_size_or_sections, axis=0):
    # Note [NumPy fast impls] (ops/_decl.py): a positive int size of a non-empty dimension;
    # ``_split`` gives everything else and every error
    if type(split_size_or_sections) is int and split_size_or_sections > 0 and x.ndim:
        a = 0 if type(axis) is int and axis == 0 else mf.normalize_axis("split", axis, x.ndim)
        if x.shape[a]:
            return _np_pieces(x, split_size_or_sections, a)
    return _split(xp, x, split_size_or_sections, axis)


defop("split(Tensor(a -> *) self, int[] split_size_or_sections, int axis=0) -> Tensor(a)[]",
      impl=_split, cpu_impl=_np_split,
      meta=mf.view_meta(lambda a, s, axis=0: _split(np, a, s, axis)),
      methods=("split",), kwarg_aliases={"dim": "axis", "split_size": "split_size_or_sections"},
      info=OpInfo(ref=lambda x, s, axis=0: _split(np, x, s, axis), dtypes=ALL,
                  samples=_s(((5, 2), (2,), {}), ((5, 2), ([1, 4],), {}))))


def _chunk(xp, x, chunks, axis=0):
    a = mf.normalize_axis("chunk", axis, x.ndim)
    if chunks <= 0:
        raise ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[a]
    if not n:  # PyTorch: as many empty chunks as asked for
        return [x[(slice(None),) * a + (slice(0, 0),)] for _ in range(chunks)]
    return _split(xp, x, -(-n // chunks), a)


def _np_chunk(xp, x, chunks, axis=0):
    # Note [NumPy fast impls]: a positive int count of a non-empty dimension
    if type(chunks) is int and chunks > 0 and x.ndim:
        a = 0 if type(axis) is int and axis == 0 else mf.normalize_axis("chunk", axis, x.ndim)
        n = x.shape[a]
        if n:
            return _np_pieces(x, -(-n // chunks), a)
    return _chunk(xp, x, chunks, axis)


defop("chunk(Tensor(a -> *) self, int chunks, int axis=0) -> Tensor(a)[]", impl=_chunk,
      cpu_impl=_np_chunk,
      meta=mf.view_meta(lambda a, c, axis=0: _chunk(np, a, c, axis)), methods=("chunk",),
      kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, c, axis=0: _chunk(np, x, c, axis), dtypes=ALL,
                  samples=_s(((5, 2), (2,), {}), ((6,), (3,), {}))))


# ---------------------------------------------------------------------------------------
# Copies


def _cat_meta(tensors, axis=0):
    if not tensors:
        raise ValueError("concat: expected a non-empty sequence of tensors")
    first = tensors[0]
    if axis is None:
        return (sum(t.numel() for t in tensors),), _result_type(*tensors)
    if not first.ndim:
        raise ValueError("concat: zero-dimensional tensors cannot be concatenated")
    a = mf.normalize_axis("concat", axis, first.ndim)
    shape = list(first.shape)
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(t.shape[i] != shape[i] for i in range(first.ndim)
                                       if i != a):
            raise ValueError(f"concat: tensors must have the same shape except in the "
                             f"concatenating dimension {a}; got {tuple(first.shape)} and "
                             f"{tuple(t.shape)}")
        shape[a] += t.shape[a]
    return tuple(shape), _result_type(*tensors)


def _promoted(xp, tensors):
    """``tensors`` in their common dtype: tensors of several dtypes promote (PyTorch's cat
    and stack, and the Meta kernels); the Array API leaves mixed kinds unspecified and
    array_api_strict refuses them."""
    if len({t.dtype for t in tensors}) < 2:
        return tensors
    target = getattr(xp, _result_type(*(_Shape(t) for t in tensors)).name)
    return [t if t.dtype == target else xp.astype(t, target) for t in tensors]


def _concat(xp, tensors, axis=0):
    tensors = _promoted(xp, tensors)
    if any(0 in tuple(t.shape) for t in tensors):  # Dask joins empty arrays of any shape
        _cat_meta([_Shape(t) for t in tensors], axis)
    try:
        return xp.concat(tensors, axis=axis)
    except (ValueError, IndexError, TypeError):
        _cat_meta([_Shape(t) for t in tensors], axis)  # raises with the op's own message
        raise


def _list_samples(shapes, **kw):
    def samples(dtype, rng):
        return [SampleInput(([make_array(s, dtype, rng) for s in shapes],), dict(kw))]
    return samples


# The CPU kernel of cat (register_list_direct: arrays of one dtype) is NumPy's C
# concatenate itself, without ``np.concatenate``'s dispatcher frame: it checks the shapes
# and axis itself, and where it refuses (ValueError, TypeError) the impl's checks raise the
# op's error.
_np_concat = np_concatenate


_cat = defop("cat(Tensor[] tensors, int? axis=0) -> Tensor", impl=_concat, meta=_cat_meta,
             names=("cat", "concat", "concatenate"), kwarg_aliases={"dim": "axis"},
             info=OpInfo(ref=lambda ts, axis=0: np.concatenate(ts, axis=axis), dtypes=ALL,
                         samples=_list_samples([(2, 3), (1, 3)])))
register_list_direct(_cat.functional[0], _np_concat)


def _stack_meta(tensors, axis=0):
    if not tensors:
        raise ValueError("stack: expected a non-empty sequence of tensors")
    shape = tuple(tensors[0].shape)
    for t in tensors[1:]:
        if tuple(t.shape) != shape:
            raise ValueError(f"stack: all tensors must have the same shape; got {shape} and "
                             f"{tuple(t.shape)}")
    n = len(shape) + 1
    a = int(axis)
    if not -n <= a < n:
        raise IndexError(f"stack: axis {a} is out of range for a result of dimension {n}")
    a %= n
    return shape[:a] + (len(tensors),) + shape[a:], _result_type(*tensors)


def _stack(xp, tensors, axis=0):
    _stack_meta([_Shape(t) for t in tensors], axis)
    return xp.stack(_promoted(xp, tensors), axis=axis)


def _np_stack(arrays, axis=0):
    # The CPU kernel (register_list_direct: arrays of one dtype): np.stack's Python-level
    # checks cost 2 us.  Along the first axis the result is ``np.array(arrays)``, one C
    # call that checks the shapes itself (ValueError: the impl's checks and errors).  Along
    # an axis ``a`` of the inputs' shape ``s``, the result is their concatenation along
    # ``a`` with that axis split into (len(arrays), s[a]), a view of the fresh array.
    # Other shapes and axes: the impl's checks and errors.
    if type(axis) is int:
        s = arrays[0].shape
        n = len(s)
        a = axis + n + 1 if axis < 0 else axis
        if not a:
            return np.array(arrays)
        for t in arrays:
            if t.shape != s:
                return None
        if 0 < a < n:
            return _np_concat(arrays, a).reshape(s[:a] + (len(arrays),) + s[a:])
        if a == n:
            one = s + (1,)
            return _np_concat([t.reshape(one) for t in arrays], a)
    return None


class _Shape:
    """Adapts a raw array to what meta functions read (shape, dtype)."""

    def __init__(self, a):
        from mdtensor._dtypes import as_dtype

        self.shape = tuple(a.shape)
        self.ndim = len(self.shape)
        self.dtype = as_dtype(a.dtype)

    def numel(self) -> int:
        return int(np.prod(self.shape))


_stack_decl = defop("stack(Tensor[] tensors, int axis=0) -> Tensor", impl=_stack,
                    meta=_stack_meta, kwarg_aliases={"dim": "axis"},
                    info=OpInfo(ref=lambda ts, axis=0: np.stack(ts, axis=axis), dtypes=ALL,
                                samples=_list_samples([(2, 3), (2, 3)])))
register_list_direct(_stack_decl.functional[0], _np_stack)


def _flip(xp, x, axis=None):
    # Note: PyTorch's flip copies; NumPy's returns a view, so copy to keep the schema honest.
    # A 0-d tensor's axis 0 is its element (Note [Axes of 0-d tensors] in _meta_fns.py).
    axis = None if axis is None else mf.backend_axis("flip", x.ndim, _ints(axis))
    return xp.asarray(xp.flip(x, axis=axis), copy=True)


def _flip_meta(x, axis=None):
    if axis is not None:
        mf.normalize_axes("flip", _ints(axis), x.ndim)
    return tuple(x.shape), x.dtype


_REVERSED = slice(None, None, -1)


def _np_flip(xp, x, axis=None):
    # See Note [NumPy fast impls]: a reversed slice per axis, copied (np.flip's wrapper costs
    # more than the copy); 0-d tensors, repeated or out-of-range axes take the impl
    n = x.ndim
    idx = [slice(None)] * n
    for a in (range(n) if axis is None else (axis,) if type(axis) is int else axis):
        if type(a) is not int or not -n <= a < n or idx[a] is _REVERSED:
            return _flip(xp, x, axis)
        idx[a] = _REVERSED
    return x[tuple(idx)].copy() if n else _flip(xp, x, axis)


defop("flip(Tensor self, int[]? axis=None) -> Tensor", impl=_flip, cpu_impl=_np_flip,
      meta=_flip_meta, methods=("flip",),
      kwarg_aliases={"dims": "axis"},
      info=OpInfo(ref=lambda x, axis=None: np.flip(x, axis), dtypes=ALL,
                  samples=_s(((2, 3), (), {}), ((2, 3), (1,), {}))))


def _roll(xp, x, shift, axis=None):
    shift = shift if isinstance(shift, (int, np.integer)) else tuple(shift)
    axis = axis if axis is None or isinstance(axis, (int, np.integer)) else tuple(axis)
    return xp.roll(x, shift, axis=axis)


def _np_roll(xp, x, shift, axis=None):
    # See Note [NumPy fast impls]: one shift along one axis (or of the flattened tensor) is a
    # concatenation of two slices (np.roll costs 9 us on a 16x16 matrix)
    if type(shift) is not int or x.size == 0 or not (axis is None or type(axis) is int):
        return _roll(xp, x, shift, axis)
    if axis is None:
        return _np_roll(xp, x.reshape(-1), shift, 0).reshape(x.shape)
    n = x.ndim
    if not -n <= axis < n:
        return _roll(xp, x, shift, axis)  # its error
    a = axis % n
    s = shift % x.shape[a]
    if not s:
        return x.copy()
    lead = (slice(None),) * a
    return np.concatenate((x[(*lead, slice(-s, None))], x[(*lead, slice(None, -s))]), a)


defop("roll(Tensor self, int[1] shift, int[1]? axis=None) -> Tensor", impl=_roll,
      cpu_impl=_np_roll,
      meta=lambda x, *a, **k: (tuple(x.shape), x.dtype), methods=("roll",),
      kwarg_aliases={"shifts": "shift", "dims": "axis"},
      info=OpInfo(ref=lambda x, s, axis=None: np.roll(x, s, axis), dtypes=ALL,
                  samples=_s(((5,), (2,), {}), ((2, 3), (1,), {"axis": 1}))))


def _repeat_interleave(xp, x, repeats, axis=None):
    mf.check_has_dimension("repeat_interleave", x.ndim, axis)  # NumPy would flatten
    return xp.repeat(x, repeats._data if hasattr(repeats, "_data") else repeats, axis=axis)


defop("repeat_interleave(Tensor self, Any repeats, *, int? axis=None) -> Tensor",
      impl=_repeat_interleave,
      meta=ms.repeat_interleave,
      names=("repeat_interleave", "repeat"), methods=("repeat_interleave",),
      kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, r, axis=None: np.repeat(x, r, axis), dtypes=ALL,
                  samples=_s(((3,), (2,), {}), ((2, 3), (2,), {"axis": 1}))))


def _tile(xp, x, reps):
    return xp.tile(x, _ints(reps))


defop("tile(Tensor self, int[] reps) -> Tensor", impl=_tile, methods=("tile",), meta=ms.tile,
      kwarg_aliases={"dims": "reps"},
      info=OpInfo(ref=np.tile, dtypes=ALL, samples=_s(((2, 3), ((2, 1),), {}))))


def _repeat_torch(xp, x, repeats):
    reps = _ints(repeats)
    if len(reps) < x.ndim:
        raise ValueError(f"repeat: number of repeat dims ({len(reps)}) can not be smaller than "
                         f"number of dimensions of tensor ({x.ndim})")
    return xp.tile(x, reps)


defop("repeat_tensor(Tensor self, int[] repeats) -> Tensor", impl=_repeat_torch,
      meta=ms.repeat_tensor,
      names=(), methods=("repeat",), varargs=True,
      info=OpInfo(ref=lambda x, r: np.tile(x, r), dtypes=ALL,
                  samples=_s(((2, 3), ((2, 1),), {}))))


# Note [broadcast_arrays: views of its inputs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's ``broadcast_tensors`` is CompositeImplicitAutograd (``expand_outplace``): an
# input already of the broadcast shape is returned itself, every other is ``expand``-ed to
# it.  So each output is its input or a tracked view of it, as here: it shares the input's
# version counter and view metadata, its history is ``ExpandBackward0`` (no formula of its
# own), an in-place change of the input after the call is seen by the backward as for
# ``expand``, and writing in place to an expanded output raises as there (an earlier impl
# returned the backend's views untracked: gradients through them missed later in-place
# changes of the inputs).  The broadcast shape's check raises ValueError naming
# ``broadcast_arrays``; ``expand`` is dispatched inline (Note [Views dispatched inline]).

_expand_op = CATALOGUE["aten::expand"].overloads[0]
_expand_table = _expand_op.table  # cleared in place, never replaced


@inline_dispatch
def _broadcast_arrays(tensors):
    shape = mf.broadcast_shapes("broadcast_arrays", *[tuple(t.shape) for t in tensors])
    out = []
    for t in tensors:  # (a loop, not a comprehension's frame)
        if tuple(t.shape) == shape:
            out.append(t)
        else:
            kernel = dispatch_kernel(_expand_op, _expand_table, t)
            out.append(kernel(t, shape))
    return out


defop("broadcast_arrays(Tensor[] tensors) -> Tensor[]", composite=_broadcast_arrays,
      star_args=True,
      meta=ms.broadcast_arrays,
      info=OpInfo(ref=lambda ts: list(np.broadcast_arrays(*ts)), dtypes=ALL,
                  samples=_list_samples([(2, 1), (1, 3)])))


def _contiguous(xp, x):
    # PyTorch's: ``self`` when its elements are in row-major order, else a row-major copy
    # (a strided array's order: Note [Strides] in ops/_torch_methods.py; arrays without
    # strides always are)
    flags = getattr(x, "flags", None)
    if flags is None or getattr(flags, "c_contiguous", True):
        return x
    return xp.reshape(xp.reshape(x, (-1,)), tuple(x.shape))  # a row-major copy


defop("contiguous(Tensor(a) self) -> Tensor(a)", impl=_contiguous, meta=mf.same,
      methods=("contiguous",),
      info=OpInfo(ref=lambda x: x, dtypes=ALL, samples=_s(((2, 3), (), {}))))


def broadcast_shapes(*shapes) -> tuple[int, ...]:
    """Array API ``broadcast_shapes``: the shape the given shapes broadcast to.

    Raises:
        ValueError: the shapes are not broadcast-compatible.
    """
    return mf.broadcast_shapes("broadcast_shapes", *(tuple(s) for s in shapes))


def _isin(xp, x1, x2, invert=False):
    x1, x2 = promote_arrays(xp, x1, x2)  # compared in their common dtype
    fn = getattr(xp, "isin", None)
    if fn is None or not str(x1.dtype).rstrip("0123456789").endswith("int") or \
            not x1.ndim or not x2.ndim or not math.prod(x2.shape):
        # the standard's isin takes integers only (array_api_strict enforces it, and errs
        # for a 0-d tensor or no test elements): every element compared with every one
        out = xp.any(xp.expand_dims(x1, axis=-1) == xp.reshape(x2, (-1,)), axis=-1)
    else:
        out = fn(x1, x2)  # inverted here: array_api_strict's isin ignores invert=
    return xp.logical_not(out) if invert else out


_isin_decl = defop("isin.Tensor(Tensor elements, Tensor test_elements, *, bool invert=False)"
                   " -> Tensor", impl=_isin, names=("isin",),
                   meta=lambda a, b, invert=False: (tuple(a.shape), _bool()),
                   info=OpInfo(ref=lambda a, b, invert=False: np.isin(a, b, invert=invert),
                               dtypes=INTS, differentiable=False,
                               samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),
                                                                    make_array((4,), d, rng)))]))
defop("isin.Scalar(Tensor elements, Scalar test_elements, *, bool invert=False) -> Tensor",
      impl=lambda xp, a, b, invert=False: _isin(xp, a, xp.asarray([b], dtype=a.dtype), invert),
      meta=lambda a, b, invert=False: (tuple(a.shape), _bool()), decl=_isin_decl)
defop("isin.Scalar_Tensor(Scalar elements, Tensor test_elements, *, bool invert=False)"
      " -> Tensor", impl=lambda xp, a, b, invert=False: _isin(xp, xp.asarray(a, dtype=b.dtype),
                                                              b, invert),
      meta=lambda a, b, invert=False: ((), _bool()), decl=_isin_decl)


# Note [isin on NumPy]
# ~~~~~~~~~~~~~~~~~~~~
# The generic kernel promotes its operands and names their dtype (``str(dtype)``: NumPy's
# Python-level ``_name_get``, ~1 us) before calling ``np.isin`` through its
# ``__array_function__`` dispatcher; and ``np.isin`` itself is a dozen Python-level NumPy
# calls (min, max, zeros_like, ...: 11 us at least, 20-30 us on a few int8 elements).  The
# CPU kernel takes operands of one dtype and, where the generic kernel would call
# ``np.isin`` (integers, neither operand 0-d, test elements not empty) on many elements,
# calls ``np.isin``'s implementation directly (``invert=`` as the generic kernel's
# ``logical_not``).  Otherwise it compares every element with every test element, as the
# generic kernel does for the other calls: ``logical_or.reduce(x[..., None] == test, -1)``
# costs ~2 us, ~20 ns a row of ``x`` and ~1 ns an element pair, so it serves integers too
# where ``x.size * (test.size + 16) <= 8192`` (2 us against NumPy's 21 on 2x3 int8
# elements and 4 test elements).  Both give what the generic kernel gives; every other
# call (mixed dtypes: the project's promotion, bools, bfloat16) is the generic kernel's.
# The commonest call -- a few elements against a vector of test elements -- is computed
# in the kernel's own frame (2x3 int8 elements, 4 test elements: 34.1K -> 30.0K
# instructions); the others go through ``_direct_isin``, also the computation the sweep
# times as NumPy's (the declaration's ``cpu_impl``).
_np_isin = getattr(np.isin, "_implementation", np.isin)
_any = np.logical_or.reduce
#: the dtype kinds the kernel computes (not bool, nor ml_dtypes' bfloat16, kind 'V')
_ISIN_KINDS = "iufc"


def _direct_isin(x, y, invert=False):
    if x.dtype is not y.dtype or type(invert) is not bool:
        return None
    if x.dtype.kind in "iu" and x.ndim and y.ndim and y.size and \
            x.size * (y.size + 16) > 8192:
        return _np_isin(x, y, invert=invert)
    out = _any(x[..., None] == (y if y.ndim == 1 else y.reshape(-1)), -1)
    return ~out if invert else out


def _cpu_isin(generic):
    """isin's CPU kernel (Note [isin on NumPy])."""
    def kernel(a, b, invert=False):
        d = a._device
        x, y = a._data, b._data
        if (b._device is d and x.dtype is y.dtype and x.dtype.kind in _ISIN_KINDS
                and type(invert) is bool):
            if y.ndim == 1 and x.size * (y.size + 16) <= 8192:
                out = _any(x[..., None] == y, -1)
                return d.wrap(~out if invert else out)
            return d.wrap(_direct_isin(x, y, invert))
        return generic(a, b, invert=invert)
    return kernel


register_cpu(_isin_decl.functional[0], _cpu_isin,
             record=lambda xp, x, y, invert=False: _direct_isin(x, y, invert))


def _bool():
    from mdtensor import _dtypes

    return _dtypes.bool_


# ---------------------------------------------------------------------------------------
# Moving between devices


def _to_device_copy(x, device):
    """CompositeExplicitAutograd: copy ``x`` to ``device`` (through DLPack when both
    backends support it, else through host NumPy)."""
    from mdtensor.tensors.device import as_device

    dst = as_device(device)
    src_backend = x._device.backend
    if dst is x._device:
        return x._device.wrap(src_backend.asarray(x._data, copy=True))
    try:
        # DLPack imports share the producer's memory where they can (CPU<->CPU, one GPU):
        # copy on the destination, so the result is independent of ``x`` as ``to`` promises.
        shared = dst.backend.from_dlpack(x._data, dst.index)
        data = dst.backend.asarray(shared, index=dst.index, copy=True)
    except Exception:  # noqa: BLE001 - fall back to the host copy
        data = dst.backend.asarray(src_backend.to_numpy(x._data), index=dst.index, copy=True)
    return dst.wrap(data)


def _to_device_copy_meta(x, device):
    """The Meta kernel: a meta tensor has no data to copy anywhere but to meta (PyTorch's
    error)."""
    from mdtensor.backends.meta_backend import MetaArray

    from mdtensor.tensors.device import as_device

    dst = as_device(device)
    if dst.type != "meta":
        raise NotImplementedError(
            f"to_device_copy: Cannot copy out of meta tensor; no data! (to {dst}) Make the "
            f"tensor on {dst} instead, e.g. md.empty(x.shape, dtype=x.dtype, "
            f"device='{dst}')")
    return dst.wrap(MetaArray(tuple(x.shape), x._data.dtype))


defop("to_device_copy(Tensor self, Device device) -> Tensor", explicit=_to_device_copy,
      meta=lambda x, device: (tuple(x.shape), x.dtype), names=(),
      kernels={"Meta": _to_device_copy_meta})


def to(self, *args, device: Device | str | None = None, dtype=None, copy: bool = False,
       non_blocking: bool = False) -> Tensor:
    """``x.to(device)``, ``x.to(dtype)``, ``x.to(device, dtype)``, keywords too (PyTorch);
    returns ``self`` when nothing changes and ``copy`` is False."""
    aten = _aten

    for a in args:
        if isinstance(a, _dtypes.DType):
            dtype = a
        elif isinstance(a, (str, Device)):
            device = a
        elif isinstance(a, Tensor):
            device, dtype = a.device, a.dtype
        else:
            raise TypeError(f"to(): expected a device, a dtype or a tensor, got "
                            f"{type(a).__name__}")
    out = self
    if device is not None:
        dev = Device(device) if not isinstance(device, Device) else device
        if dev is not self._device:
            out = aten.to_device_copy(out, dev)
    if dtype is not None and _dtypes.as_dtype(dtype) is not out.dtype:
        out = aten.astype(out, _dtypes.as_dtype(dtype))
    if copy and out is self:
        out = aten.clone(self)
    return out


def to_device(self, device: Device | str, /, *, stream=None) -> Tensor:
    """Array API ``to_device``."""
    return to(self, device=device)


# Note [Views dispatched inline]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x.T``, ``x.mT`` and the CompositeImplicitAutograd ``reshape`` and ``ravel`` each call one
# view overload.  Through its packet function or caller that is one Python frame more per
# call than the op itself needs; like ``x[1:3]`` (``ops/indexing.py``) they run the
# overload's four dispatch lines in their own frame instead (Note [Inline dispatch] in
# mdtensor/dispatch/inline.py): the same table, so modes, autograd, functionalization and
# traces see the same call (``x.T``: 11.7K -> 9.9K instructions, ``md.ravel(x)``: 16.0K
# -> 14.4K, ``md.reshape(x, (4, 64))``: 16.5K -> 15.6K; 16x16 float32).  ``x.T`` and
# ``x.mT`` of a subclass of Tensor take the packet, which may resolve a subclass's call to
# an overload of its own.

_mt_op = CATALOGUE["aten::matrix_transpose"].overloads[0]
_mt_table = _mt_op.table  # cleared in place, never replaced


@inline_dispatch
def _T(self) -> Tensor:
    # Array API: ``x.T`` is for 2-D tensors only (PyTorch's reversal of other ndims is
    # deprecated there); ``mT``/``permute`` serve the other cases.
    if self._data.ndim != 2:
        raise ValueError(f"Tensor.T: expected a 2-D tensor, got {self.ndim}-D; use "
                         f"x.mT for batched matrices or x.permute(...) to reverse dims")
    if type(self) is not Tensor:
        return _aten.matrix_transpose(self)
    # of a 2-D tensor, permute(1, 0) (and faster)
    kernel = dispatch_kernel(_mt_op, _mt_table, self)
    return kernel(self)


@inline_dispatch
def _mT(self) -> Tensor:
    if type(self) is not Tensor:
        return _aten.matrix_transpose(self)
    kernel = dispatch_kernel(_mt_op, _mt_table, self)
    return kernel(self)


def _contiguous_of(declared):
    """``x.contiguous()``: PyTorch's method returns ``self`` itself, without dispatching,
    when the tensor already is row-major (an array without strides always is, as in
    ``_contiguous``); ``declared``, the catalogue's method (the ``contiguous`` op, whose
    result is a view), serves the rest: subclasses, sparse layouts, strided copies.
    ``md.contiguous(x)`` stays the op: a new tensor viewing ``x``.

    The op takes no argument but self: the method takes no keywords either (Python's
    TypeError names ``Tensor.contiguous``), which spares the call an empty ``**kwargs``
    dict, a third of its 0.3 us; positional extras reach the op and its error."""
    def contiguous(self, *args):
        d = self._data
        if type(self) is Tensor and not args:
            if type(d) is np.ndarray:
                if d.flags.c_contiguous:
                    return self
            elif type(d) is self._device.backend.array_type \
                    and getattr(getattr(d, "flags", None), "c_contiguous", True):
                return self
        return declared(self, *args)

    contiguous.__doc__ = declared.__doc__
    contiguous.__qualname__ = "Tensor.contiguous"
    return contiguous


def _cpu(self) -> Tensor:
    return to(self, device="cpu")


def install_tensor_methods() -> None:
    """The Tensor methods written here rather than declared as ops."""
    Tensor.to = to
    Tensor.to_device = to_device
    Tensor.T = property(_T, doc="The transpose of a 2-D tensor (Array API).")
    Tensor.mT = property(_mT, doc="The transpose of the last two dimensions.")
    Tensor.cpu = _cpu
    Tensor.contiguous = _contiguous_of(Tensor.contiguous)
