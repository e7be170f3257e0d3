"""Indexing: ``x[key]``, ``x[key] = value``, take/take_along_axis, where, masked_fill.

Note [Indexing ops]
~~~~~~~~~~~~~~~~~~~
``Tensor.__getitem__`` routes by key, as PyTorch does: a *basic* key (ints, slices,
Ellipsis, None) goes to ``aten::basic_index`` -- a view op, sharing memory with the base on
NumPy -- and anything else (integer arrays, tensors, lists, boolean masks) to
``aten::index``, which copies.  ``x[key] = v`` is ``aten::index_put_``, in place (version
counter bumped by the ADInplaceOrView layer).  Tensors inside a key are unwrapped to their
arrays by the kernels; the key itself is an ``Any`` argument.

The semantics are NumPy's on every backend, with PyTorch's error wording.  The NumPy
kernels pass keys on (NumPy does it all); the generic kernels use only what the Array API
specifies (Notes [Basic keys off NumPy], [Advanced indexing], [Writes through index
arrays]).
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.inline import dispatch_kernel, inline_dispatch
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.tensors.tensor import Tensor

from . import _meta_fns as mf
from . import _meta_shape as ms
from ._cpu_kernels import register_cpu
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._errors import device_mismatch
from ._promotion import dtype_of, scalar_into
from ._samples import make_array
from .elementwise import ALL

__all__ = ["getitem", "index_grid", "is_basic_key", "lowest_index", "scatter_set", "setitem"]

_BASIC = (int, slice, type(Ellipsis), type(None), np.integer)


def is_basic_key(key) -> bool:
    if isinstance(key, tuple):
        return all(isinstance(k, _BASIC) and not isinstance(k, bool) for k in key)
    return isinstance(key, _BASIC) and not isinstance(key, bool)


def _raw(key):
    if isinstance(key, Tensor):
        return key._data
    if isinstance(key, tuple):
        return tuple(_raw(k) for k in key)
    if isinstance(key, list):
        arr = np.asarray([k.item() if isinstance(k, Tensor) else k for k in key])
        # an empty list selects nothing: an empty integer index (NumPy and PyTorch), not
        # the float64 array np.asarray makes of it
        return arr.astype(np.int64) if arr.size == 0 and arr.dtype.kind == "f" else arr
    return key


def _basic_key(shape, key, op):
    """``key`` checked against ``shape`` and spelled for the Array API: integers in bounds,
    slices clipped to the dimension, the trailing ``...`` NumPy implies made explicit.

    Note [Basic keys off NumPy]: the Array API leaves an out-of-bounds integer and a slice
    bound past the end unspecified, and backends differ: JAX clamps ``x[7]`` to the last row,
    array_api_strict rejects ``x[:, 0:4]`` of 3 columns.  The generic kernels therefore check
    integers here (against the shape: no data is read) and clip slices as NumPy and PyTorch
    do (``slice.indices``), so every backend gives NumPy's result or its IndexError.  The
    NumPy ``basic_index`` kernel passes the key on and only calls this to word the error
    NumPy raised; ``x[key] = v`` checks basic keys with it on every backend, as before.
    """
    keys = key if type(key) is tuple else (key,)
    ndim = len(shape)
    n_ellipsis = sum(1 for k in keys if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in keys if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(f"{op}: too many indices for tensor of dimension {ndim} "
                         f"(got {consumed})")
    out = []
    dim = 0
    for k in keys:
        if k is Ellipsis:
            dim = ndim - (consumed - dim)
        elif type(k) is slice:
            k = _clip_slice(k, shape[dim])
            dim += 1
        elif k is not None:
            size = shape[dim]
            if not -size <= k < size:
                raise IndexError(f"{op}: index {k} is out of bounds for dimension {dim} with "
                                 f"size {size}")
            dim += 1
        out.append(k)
    if not n_ellipsis:
        out.append(Ellipsis)
    return tuple(out)


def _clip_slice(s, size):
    """``s`` with its bounds inside ``[0, size]`` (the same elements, NumPy's clipping)."""
    start, stop, step = s.indices(size)
    if step > 0:
        return slice(start, stop, step)
    # Stepping down, slice.indices says "before the first element" with -1, which a slice
    # would read as the last element: None says it.
    if start < 0:
        return slice(0, 0, 1)
    return slice(start, None if stop < 0 else stop, step)


def _full_key(key):
    """Add the trailing ``...`` NumPy implies (the Array API requires it explicitly)."""
    if type(key) is not tuple:
        return (key, Ellipsis) if key is not Ellipsis else key
    for k in key:
        if k is Ellipsis:
            return key
    return key + (Ellipsis,)


def _basic_index(xp, x, key):
    return x[_basic_key(tuple(x.shape), key, "__getitem__")]


def _np_basic_index(xp, x, key):
    # Note [NumPy fast impls]: NumPy slices without the trailing ``...`` (a slice always
    # gives an array, never a scalar); the Array API (array_api_strict) wants it spelled out.
    # NumPy clips slices and raises for an out-of-bounds integer itself (Note [Basic keys
    # off NumPy]).
    try:
        return x[key] if type(key) is slice else x[_full_key(key)]
    except IndexError:  # a slice of a 0-d tensor too
        _basic_key(x.shape, key, "__getitem__")  # raises with the op's own message
        raise


def _basic_meta(x, key):
    _basic_key(tuple(x.shape), key, "__getitem__")
    return tuple(mf.dummy(x)[key].shape), x.dtype


def _index_samples(keys):
    def samples(dtype, rng):
        return [SampleInput((make_array((4, 3), dtype, rng), k), name=repr(k)) for k in keys]
    return samples


defop("basic_index(Tensor(a) self, Any key) -> Tensor(a)", impl=_basic_index,
      cpu_impl=_np_basic_index, meta=_basic_meta, names=(),
      info=OpInfo(ref=lambda x, k: x[k], dtypes=ALL,
                  samples=_index_samples([1, slice(1, 3), (Ellipsis, 0), (None, 0),
                                          (slice(None, None, -1),) if False else (0, 1),
                                          (slice(None), None)]),
                  errors=lambda: [ErrorInput(SampleInput((np.zeros((2, 3)), (0, 0, 0))),
                                             IndexError, "too many indices"),
                                  ErrorInput(SampleInput((np.zeros((2, 3)), 5)), IndexError,
                                             "out of bounds")]))


def _backend_key(xp, raw):
    """Index arrays in the backend's own array type (NumPy arrays from lists otherwise)."""
    if isinstance(raw, tuple):
        return tuple(_backend_key(xp, k) for k in raw)
    if isinstance(raw, np.ndarray) and type(raw) is not type(xp.asarray(0)):
        return xp.asarray(raw)
    return raw


def _is_array(k) -> bool:
    return hasattr(k, "dtype") and hasattr(k, "shape")


def _is_bool_array(k) -> bool:
    return _is_array(k) and str(k.dtype).endswith("bool")


def _np_index(xp, x, key):
    # Note [NumPy fast impls]: NumPy does advanced indexing itself (several index arrays,
    # bounds checks); the generic kernel spells it with take (Note [Advanced indexing]).
    try:
        return x[_full_key(_raw(key))]
    except IndexError as e:
        raise IndexError(f"__getitem__: {str(e).replace('for axis', 'for dimension')}"
                         ) from None


def _index(xp, x, key):
    raw = _backend_key(xp, _raw(key))
    if is_basic_key(raw):  # integers only (aten.index called directly): a copy
        return xp.asarray(_basic_index(xp, x, raw), copy=True)
    if _is_bool_array(raw):  # a sole boolean mask: the Array API's own
        _check_mask_shape(tuple(x.shape), raw, 0, "__getitem__")
        if raw.ndim == 0:  # x[True] is x[None], x[False] x[None][:0]: one mask of one
            # element on a new dimension, which every backend takes (Dask no 0-d mask)
            return xp.expand_dims(x, axis=0)[xp.reshape(raw, (1,))]
        if tuple(raw.shape) != tuple(x.shape[:raw.ndim]):  # a mask of size 0 selects
            raw = xp.zeros(x.shape[:raw.ndim], dtype=xp.bool)  # nothing
        if 1 < raw.ndim < x.ndim:
            x, raw = _mask_on_one_dimension(xp, x, raw)
        return x[raw]
    return _advanced_index(xp, x, raw, "__getitem__")


def _mask_on_one_dimension(xp, x, mask):
    """``x`` with the dimensions a boolean ``mask`` covers merged into one, and the mask
    flattened to match: the same selection, for backends whose masks cover one dimension
    or all of them (Dask refuses a (3, 4) mask on a (3, 4, 5) array)."""
    n = 1
    for s in mask.shape:
        n *= s
    return xp.reshape(x, (n, *x.shape[mask.ndim:])), xp.reshape(mask, (n,))


def _check_mask_shape(shape, mask, dim, op):
    # As NumPy: a mask's dimension has the tensor's size, or size 0 (it selects nothing)
    covered = shape[dim:dim + mask.ndim]
    if len(covered) != mask.ndim or not all(m in (s, 0) for m, s in zip(mask.shape, covered)):
        raise IndexError(f"{op}: the shape of the mask {list(mask.shape)} at index {dim} does "
                         f"not match the shape of the indexed tensor {list(shape)} at index "
                         f"{dim}")


def _advanced_index(xp, x, key, op, check=True):
    """``x[key]`` for a key with index arrays, with Array API functions only.

    Note [Advanced indexing]
    ~~~~~~~~~~~~~~~~~~~~~~~~
    The Array API allows one integer index array, and only among integers; NumPy's
    ``x[[0, 1], :, [2, 3]]`` is not in it, and backends disagree on out-of-bounds indices
    (JAX clamps or fills with NaN, CuPy wraps).  So the generic kernel builds the result
    from ``take``, with NumPy's semantics:

    1. The key is expanded (``...``, the implied trailing slices); integers count as index
       arrays (0-d), boolean arrays become their ``nonzero()`` integer arrays, one per
       dimension they cover; slices and ``None`` are applied first as a basic index, which
       keeps one dimension per advanced index.
    2. Every index array is checked against its dimension's size with the backend's
       ``min``/``max`` (``check``: callers with indices made in bounds skip it), and negative
       indices are wrapped.
    3. The index arrays broadcast together and are linearized (row-major over the indexed
       dimensions, which are moved to the front and flattened into one), so one ``take``
       gathers the result, reshaped to the broadcast shape followed by the other dimensions.
    4. NumPy's placement rule: when the advanced indices are all next to each other in the
       key, their dimensions replace them in place instead of coming first.
    """
    basic, adv = _parse_key(xp, tuple(x.shape), key, op, check)
    y = x[tuple(basic)] if any(b != slice(None) for b in basic) else x
    return _gather(xp, y, adv, op)


def _parse_key(xp, shape, key, op, check):
    """Step 1 of Note [Advanced indexing]: the basic part of ``key`` (one entry per
    dimension of ``y = x[basic]``) and its advanced indices, as ``(dimension of y, index,
    dimension of x, size, checked)`` with ``index`` an int or an integer array."""
    keys = key if type(key) is tuple else (key,)
    n_ellipsis = sum(1 for k in keys if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis ('...')")
    consumed = sum(0 if isinstance(k, (bool, np.bool_)) else k.ndim if _is_bool_array(k)
                   else 1 for k in keys if k is not None and k is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"{op}: too many indices for tensor of dimension {len(shape)} "
                         f"(got {consumed})")
    basic = []
    adv = []
    dim = 0
    for k in keys + (() if n_ellipsis else (Ellipsis,)):
        if k is Ellipsis:
            for _ in range(len(shape) - consumed):
                basic.append(slice(None))
                dim += 1
        elif k is None:
            basic.append(None)
        elif type(k) is slice:
            basic.append(_clip_slice(k, shape[dim]))
            dim += 1
        elif isinstance(k, (bool, np.bool_)) or _is_bool_array(k):
            if not _is_array(k) or k.ndim == 0:  # NumPy: a new dimension of size 1 or 0
                idx = xp.zeros((1 if bool(k) else 0,), dtype=xp.int64)
                adv.append((len(basic), idx, dim, 1, True))
                basic.append(None)
                continue
            _check_mask_shape(shape, k, dim, op)
            for idx in xp.nonzero(k):
                adv.append((len(basic), idx, dim, shape[dim], True))
                basic.append(slice(None))
                dim += 1
        elif _is_array(k) or isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            if _is_array(k) and dt.as_dtype(k.dtype).kind not in "iu":
                raise IndexError(f"{op}: tensors used as indices must be integer or bool "
                                 f"tensors, got {dt.as_dtype(k.dtype).name}")
            adv.append((len(basic), k, dim, shape[dim], not check))
            basic.append(slice(None))
            dim += 1
        else:
            raise IndexError(f"{op}: only integers, slices (':'), ellipsis ('...'), None and "
                             f"integer or boolean tensors are valid indices (got "
                             f"{type(k).__name__})")
    return basic, adv


def _gather(xp, y, adv, op):
    """Steps 2-4 of Note [Advanced indexing]: ``adv`` indexes dimensions of ``y``."""
    shapes = [tuple(k.shape) for _, k, _, _, _ in adv if _is_array(k)]
    try:
        bshape = tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise IndexError(f"{op}: shape mismatch: indexing tensors could not be broadcast "
                         f"together with shapes {', '.join(str(list(s)) for s in shapes)}"
                         ) from None
    linear, stride = 0, 1
    for _, k, dim, size, checked in reversed(adv):
        k = _in_bounds(xp, k, dim, size, checked, op)
        linear = k * stride + linear
        stride *= size
    positions = [p for p, _, _, _, _ in adv]
    rest = [i for i in range(y.ndim) if i not in positions]
    if positions + rest != list(range(y.ndim)):
        y = xp.permute_dims(y, tuple(positions + rest))
    rest_shape = tuple(y.shape)[len(adv):]
    flat = xp.reshape(y, (stride,) + rest_shape)
    r = xp.take(flat, xp.reshape(xp.broadcast_to(linear, bshape), (-1,)), axis=0)
    r = xp.reshape(r, bshape + rest_shape)
    first = positions[0]
    if first and positions == list(range(first, first + len(adv))):
        nb = len(bshape)
        r = xp.permute_dims(r, tuple(range(nb, nb + first)) + tuple(range(nb))
                            + tuple(range(nb + first, r.ndim)))
    return r


def _in_bounds(xp, k, dim, size, checked, op, low=None):
    """Index ``k`` of dimension ``dim`` (of ``size``) checked and made non-negative: a
    Python int, or an int64 array.  ``low``: the smallest index taken (``-size``; 0 for
    PyTorch's gathers, which take no negative index)."""
    low = -size if low is None else low
    if not _is_array(k):
        if not low <= k < size:
            raise IndexError(f"{op}: index {k} is out of bounds for dimension {dim} with size "
                             f"{size}")
        return int(k) + size if k < 0 else int(k)
    if k.dtype != xp.int64:
        k = xp.astype(k, xp.int64)
    if checked:
        return k
    n = 1
    for s in k.shape:
        n *= s
    if n == 0:
        return k
    lo, hi = int(xp.min(k)), int(xp.max(k))
    if hi >= size or lo < low:
        bad = hi if hi >= size else lo
        raise IndexError(f"{op}: index {bad} is out of bounds for dimension {dim} with size "
                         f"{size}")
    return xp.where(k < 0, k + size, k) if lo < 0 else k


def _index_meta(x, key):
    keys = key if isinstance(key, tuple) else (key,)
    for k in keys:
        if isinstance(k, Tensor) and k.dtype is dt.bool_ or isinstance(k, np.ndarray) and \
                k.dtype == bool:
            raise NotImplementedError(
                "aten::index: boolean-mask indexing has a data-dependent output shape; "
                "meta and fake tensors cannot compute it")
    raw = tuple(np.zeros(k.shape, np.int64) if isinstance(k, Tensor) else k for k in keys)
    return tuple(mf.dummy(x)[raw if isinstance(key, tuple) else raw[0]].shape), x.dtype


defop("index(Tensor self, Any key) -> Tensor", impl=_index, cpu_impl=_np_index,
      meta=_index_meta,
      tags=("dynamic_output_shape",), names=(),
      info=OpInfo(ref=lambda x, k: x[k], dtypes=ALL,
                  samples=_index_samples([[0, 2], (slice(None), [1, 0]),
                                          np.array([True, False, True, False])])))


def _put_parts(self, key, value, name, where):
    """The raw key and value of ``self[key] = value`` (shared by index_put_ and
    index_put): the value's array (same device) and the key in the backend's arrays."""
    dev = self._device
    if isinstance(value, Tensor):
        if value._device is not dev:
            raise device_mismatch(f"aten::{name}", dev, value._device)
        value = value._data
        lead = 0
        while lead < len(value.shape) and value.shape[lead] == 1:
            lead += 1
        if lead:  # leading 1s broadcast away (PyTorch writes a (1,) value into x[0])
            value = dev.xp.reshape(value, tuple(value.shape[lead:]))
    else:  # Note [Scalars written into tensors] in ops/_promotion.py
        value = scalar_into(where, value, self.dtype)
    if is_basic_key(key):
        raw = _basic_key(tuple(self.shape), key, where)
        if any(k is None for k in raw):
            return _without_new_axes(dev.xp, self._data, raw, value, where)
        return raw, value
    return _backend_key(dev.xp, _raw(key)), value


def _without_new_axes(xp, data, raw, value, where):
    """``data[raw] = value`` for a basic key with ``None`` (new axes), spelled without
    them: the value broadcast to what the key selects, then reshaped without the new
    size-1 axes.  The Array API's ``__setitem__`` takes no ``None`` (array_api_strict
    refuses it), while getting ``x[:, None]`` has it, and its backward writes through it."""
    target = tuple(data[raw].shape)
    plain = tuple(k for k in raw if k is not None)
    if hasattr(value, "shape"):
        try:
            value = xp.broadcast_to(value, target)
        except (ValueError, TypeError) as e:
            raise _native_error(ValueError(str(e)), where, data, raw, value) from None
        value = xp.reshape(value, tuple(data[plain].shape))
    return plain, value


def _writes_through_index_arrays(raw) -> bool:
    """Whether a raw key (from ``_put_parts``) is more than the Array API's ``__setitem__``
    takes: basic keys and a sole boolean mask."""
    return not (type(raw) is tuple and is_basic_key(raw) or _is_bool_array(raw))


def _native_error(e, op, data=None, raw=None, value=None):
    """The backend's own indexing error, named by the op (PyTorch's 'dimension' wording);
    a value that does not broadcast to what the key selects gets PyTorch's message, the
    same on every backend (Note [Errors from the backend] in ops/_errors.py)."""
    if data is not None and "broadcast" in str(e).lower():
        try:
            target = list(data[raw].shape)
        except Exception:  # noqa: BLE001 - the key itself is what failed: report that
            target = None
        if target is not None:
            return ValueError(f"{op}: shape mismatch: value tensor of shape "
                              f"{list(getattr(value, 'shape', ()))} cannot be broadcast to "
                              f"indexing result of shape {target}")
    return type(e)(f"{op}: {str(e).replace('for axis', 'for dimension')}")


def _index_put_kernel(self, key, value):
    dev = self._device
    caps = dev.backend.capabilities
    if not caps.inplace:
        raise RuntimeError(f"aten::index_put_: the {dev.backend.name} backend's arrays are "
                           f"immutable; in-place ops on it run through Functionalize")
    raw, value = _put_parts(self, key, value, "index_put_", "__setitem__")
    if not caps.fancy_setitem and _writes_through_index_arrays(raw):
        # Note [Writes through index arrays]
        dev.backend.copy_into(self._data, _scatter(dev.xp, self._data, raw, value,
                                                   "__setitem__"))
        return self
    try:
        self._data[raw] = value
    except (IndexError, ValueError) as e:
        raise _native_error(e, "__setitem__", self._data, raw, value) from None
    return self


_ip = defop("index_put_.Tensor(Tensor(a!) self, Any key, Tensor value) -> Tensor(a!)",
            kernels={"ArrayAPI": _index_put_kernel}, names=(),
            meta=lambda self, key, value: (tuple(self.shape), self.dtype))
defop("index_put_.Scalar(Tensor(a!) self, Any key, Scalar value) -> Tensor(a!)",
      kernels={"ArrayAPI": _index_put_kernel}, decl=_ip,
      meta=lambda self, key, value: (tuple(self.shape), self.dtype))


def gather_at(device, data, raw):
    """``data[raw]`` for ``raw`` a tuple of in-bounds integer index arrays, one per
    dimension of ``data`` (Functionalize regenerating a view from its base): the backend's
    own indexing where its arrays take such keys (``Capabilities.fancy_getitem``), else
    one ``take`` (Note [Advanced indexing])."""
    if device.backend.capabilities.fancy_getitem:
        return data[raw]
    adv = [(i, k, i, size, True) for i, (k, size) in enumerate(zip(raw, data.shape))]
    return _gather(device.xp, data, adv, "view")


def scatter_set(device, data, raw, value, *, op="index_put", check=True):
    """A new array: ``data`` with ``data[raw] = value``, on ``device``'s backend, for
    arrays that cannot or must not be written (Note [Writes through index arrays]).

    ``check=False`` skips the bounds check of index arrays made in bounds by the caller
    (Functionalize's write-back of a view).
    """
    xp = device.xp
    at = getattr(data, "at", None)
    if (not device.backend.capabilities.fancy_setitem and _writes_through_index_arrays(raw)
            and (check or at is None)):
        return _scatter(xp, data, raw, value, op, check)
    name = "__setitem__" if op == "index_put" else op
    mask = _is_bool_array(raw)
    if mask:
        _check_mask_shape(tuple(data.shape), raw, 0, name)
    if at is None and (0 in tuple(data.shape) or mask and 0 in tuple(raw.shape)):
        # nothing to write (Dask refuses even a value that fits); a mask's count is
        # unknown on Dask, and 0 here
        target = (0, *data.shape[raw.ndim:]) if mask else tuple(data[raw].shape)
        _values_for(xp, value, data.dtype, target, name)
        return xp.asarray(data, copy=True)
    try:
        if at is not None:
            return at[raw].set(value)
        out = xp.asarray(data, copy=True)
        if mask and 1 < raw.ndim < out.ndim:
            flat, raw = _mask_on_one_dimension(xp, out, raw)
            flat[raw] = value
            return xp.reshape(flat, tuple(data.shape))
        out[raw] = value
        return out
    except (IndexError, ValueError, TypeError) as e:
        if isinstance(e, TypeError) and "broadcast" not in str(e).lower():
            raise
        raise _native_error(e, name, data, raw, value) from None


def _device_of(data):
    # ``data.device`` (the Array API), or array-api-compat's answer for arrays without it
    # (Dask's)
    dev = getattr(data, "device", None)
    if dev is None:
        from array_api_compat import device

        dev = device(data)
    return dev


def _scatter(xp, data, key, value, op, check=True):
    """``data`` with ``data[key] = value``, computed out of place with Array API functions.

    Note [Writes through index arrays]
    ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
    The Array API's ``__setitem__`` takes basic keys and a sole boolean mask only, and
    array_api_strict enforces it; JAX's ``.at[key].set`` takes index arrays but drops
    out-of-bounds updates silently.  Backends whose arrays take index arrays in
    ``__setitem__`` with NumPy's semantics declare ``Capabilities(fancy_setitem=True)``
    (NumPy) and get the key as it is (CuPy's wrap indices out of bounds and leave repeated
    ones undefined); on the others a write through index arrays is computed here, out of place:

    1. ``positions = arange(data.size).reshape(data.shape)[key]``, by the generic gather
       (Note [Advanced indexing]: bounds checked, NumPy's key semantics), names the element
       of ``data`` each written value goes to; the value is broadcast to its shape;
    2. arrays with ``.at`` (JAX) scatter the values at the flat positions with it;
    3. otherwise each element of ``data`` finds its last write by a binary search in the
       sorted positions (a stable ``argsort``, so that with repeated indices the last value
       wins, as on NumPy), and the result is ``where(written, new values, data)``.

    The in-place ``index_put_`` copies the result into its array (``copy_into``).
    """
    shape = tuple(data.shape)
    n = 1
    for s in shape:
        n *= s
    ids = xp.reshape(xp.arange(n, dtype=xp.int64, device=_device_of(data)), shape)
    positions = _advanced_index(xp, ids, key, op, check)
    target = tuple(positions.shape)
    values = _values_for(xp, value, data.dtype, target, op)
    positions = xp.reshape(positions, (-1,))
    flat = xp.reshape(data, (-1,))
    at = getattr(flat, "at", None)
    if at is not None:  # JAX: its own scatter, on the checked positions
        return xp.reshape(at[positions].set(xp.reshape(values, (-1,))), shape)
    if positions.shape[0] == 0:
        return xp.asarray(data, copy=True)
    order = xp.argsort(positions, stable=True)
    written = xp.take(positions, order)
    ids = xp.reshape(ids, (-1,))
    last = xp.searchsorted(written, ids, side="right") - 1
    last = xp.where(last < 0, xp.zeros_like(last), last)
    hit = xp.take(written, last) == ids
    new = xp.take(xp.reshape(values, (-1,)), xp.take(order, last))
    return xp.reshape(xp.where(hit, new, flat), shape)


def _values_for(xp, value, dtype, target, op):
    """``value`` (an array or a Python scalar) as an array of ``dtype`` and shape
    ``target``, broadcast as NumPy's ``__setitem__`` does (leading 1s dropped)."""
    if not _is_array(value):
        value = xp.asarray(value)
    if value.dtype != dtype:
        value = xp.astype(value, dtype)
    vshape = tuple(value.shape)
    while len(vshape) > len(target) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        if np.broadcast_shapes(vshape, target) != target:
            raise ValueError
    except ValueError:
        raise ValueError(f"{op}: shape mismatch: value tensor of shape "
                         f"{list(value.shape)} cannot be broadcast to indexing result of "
                         f"shape {list(target)}") from None
    return xp.broadcast_to(xp.reshape(value, vshape), target)


def _index_put_functional_kernel(self, key, value):
    """``index_put``: the functional ``x[key] = value`` (Functionalize's counterpart of
    ``index_put_``; it also writes a view's new value back into its base)."""
    dev = self._device
    raw, value = _put_parts(self, key, value, "index_put", "__setitem__")
    if hasattr(value, "dtype") and value.dtype != self._data.dtype:
        value = dev.xp.astype(value, self._data.dtype)
    return dev.wrap(scatter_set(dev, self._data, raw, value))


def _index_put_ref(x, key, value):
    out = np.array(x, copy=True)
    out[key] = value
    return out


def _index_put_samples(dtype, rng):
    x = make_array((3, 4), dtype, rng)
    return [SampleInput((x, (slice(1, 3), 0), make_array((2,), dtype, rng))),
            SampleInput((x, (slice(None), slice(None, None, 2)), make_array((3, 2), dtype,
                                                                            rng))),
            SampleInput((x, 1, make_array((), dtype, rng)))]


_ipf = defop("index_put.Tensor(Tensor self, Any key, Tensor value) -> Tensor",
             kernels={"ArrayAPI": _index_put_functional_kernel}, names=(),
             meta=lambda self, key, value: (tuple(self.shape), self.dtype),
             info=OpInfo(ref=_index_put_ref, dtypes=ALL, samples=_index_put_samples))
defop("index_put.Scalar(Tensor self, Any key, Scalar value) -> Tensor",
      kernels={"ArrayAPI": _index_put_functional_kernel}, decl=_ipf,
      meta=lambda self, key, value: (tuple(self.shape), self.dtype))


def _plain_key(key) -> bool:
    """``key`` is ints and forward slices only (where NumPy's assignment is PyTorch's)."""
    for k in key if type(key) is tuple else (key,):
        if type(k) is not int and (type(k) is not slice or k.step is not None and
                                   (type(k.step) is not int or k.step <= 0)):
            return False
    return True


def _cpu_index_put(generic):
    # The functional ``x[key] = value`` on NumPy (Note [Hand-written CPU kernels] in
    # ops/_cpu_kernels.py): a copy and NumPy's assignment, for a key of ints and forward
    # slices and a value of the tensor's dtype (NumPy broadcasts leading 1s away, as
    # _put_parts does); an index out of range, a value that does not broadcast and every
    # other call take the generic kernel and its error.
    def kernel(a, key, value):
        d = a._device
        if type(value) is Tensor and value._device is d and _plain_key(key):
            x, v = a._data, value._data
            if v.dtype == x.dtype:
                out = x.copy()
                try:
                    out[key] = v
                    return d.wrap(out)
                except (IndexError, ValueError, TypeError):  # (a complex (1,) value into
                    pass  # one element: NumPy's TypeError, where a real one is its ValueError)
        return generic(a, key, value)
    return kernel


register_cpu(_ipf.functional[0], _cpu_index_put)


@inline_dispatch
def getitem(self, key) -> Tensor:
    """``Tensor.__getitem__`` (Note [Indexing ops])."""
    if type(key) is slice or is_basic_key(key):
        # the overload's caller, inlined: ``self`` is a Tensor, so its key set is all the
        # call needs (Note [Inline dispatch] in mdtensor/dispatch/inline.py)
        kernel = dispatch_kernel(_basic_index_op, _basic_index_table, self)
        return kernel(self, key)
    return _index_op(self, key)


def setitem(self, key, value) -> None:
    """``Tensor.__setitem__`` (Note [Indexing ops])."""
    if value is None or isinstance(value, (str, bytes)):  # Note [Scalars written into tensors]
        scalar_into("__setitem__", value, self.dtype)
    if not isinstance(value, (Tensor, bool, int, float, complex)):
        from mdtensor.tensors.factories import asarray

        value = asarray(value, dtype=self.dtype, device=self.device)
    _index_put_op(self, key, value)


# ---------------------------------------------------------------------------------------
# take, take_along_axis, where, masked_fill


# Note [Gathers check their indices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy's take raises IndexError for an index out of bounds; CuPy's wraps it around and
# JAX's returns NaN (or clamps): a program that is wrong on one backend would compute
# garbage on the others.  ``take``, ``take_along_axis``, ``gather`` and ``index_select``
# check their indices themselves on every backend, with one message (``_in_bounds``, as
# advanced indexing does: Note [Advanced indexing]), and hand the backend indices made
# non-negative; PyTorch's ``gather`` and ``index_select`` take no negative index
# (``low=0``).  On a GPU the check reads two numbers back (a synchronisation), as
# PyTorch's CPU kernels check and its CUDA kernels assert.


# Note [Gathers on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels of the gathers (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py)
# let NumPy check the upper bound -- ``ndarray.take`` (mode "raise") and advanced indexing
# raise IndexError for an index past the end, and the kernel then hands the call to the
# generic one, which raises the op's message -- and check the lower bound themselves where
# PyTorch takes no negative index (``index_select``, ``gather``): the smallest index of a
# short array read as a list (a NumPy reduction costs 0.8 us to set up).  ``gather`` and
# ``take_along_axis`` are one advanced indexing, ``x[i0, ..., index, ..., in]``, with the
# ``arange`` of each other dimension shaped to broadcast (``index_grid``, kept per shape); the
# aranges' extents cut the tensor to the index's (gather) or broadcast against it
# (take_along_axis), as the generic kernels do with a slice and ``xp.take_along_axis``.


def lowest_index(k) -> int:
    """The smallest entry of the non-empty integer array ``k``, found by ``argmin`` (4.0K
    instructions for 3 entries, 4.9K for 256, where the minimum of ``k``'s list took 4.3K for
    3 and a ``minimum`` reduction's set-up 10.4K for 256)."""
    return k.item(k.argmin())


def _int_array(k) -> bool:
    """``k`` holds integers that fit int64 (the generic kernels' index dtype)."""
    kind = k.dtype.kind
    return kind == "i" or kind == "u" and k.dtype.itemsize < 8


_GRIDS: dict = {}


def index_grid(shape: tuple, axis: int) -> list:
    """``[arange(shape[0]), ..., None (at axis), ...]``, each shaped to broadcast along its
    own dimension (Note [Gathers on NumPy])."""
    key = (shape, axis)
    grid = _GRIDS.get(key)
    if grid is None:
        n = len(shape)
        grid = []
        for i, s in enumerate(shape):
            if i == axis:
                grid.append(None)
                continue
            r = np.arange(s).reshape((1,) * i + (s,) + (1,) * (n - i - 1))
            r.flags.writeable = False
            grid.append(r)
        if len(_GRIDS) >= 256:
            _GRIDS.clear()
        _GRIDS[key] = grid
    return grid


def _along(x, k, grid_shape, axis):
    """``x`` gathered at ``k`` along ``axis`` (Note [Gathers on NumPy])."""
    if x.ndim == 1:
        return x[k]
    key = list(index_grid(grid_shape, axis))
    key[axis] = k
    return x[tuple(key)]


def _take(xp, x, indices, axis=None):
    mf.check_has_dimension("take", x.ndim, axis)  # NumPy would flatten
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis is required for a tensor of dimension {x.ndim}")
        axis = 0
    if -x.ndim <= axis < x.ndim:  # else the backend raises (Note [Axis errors])
        indices = _in_bounds(xp, indices, axis % x.ndim, x.shape[axis], False, "take")
    return xp.take(x, indices, axis=axis)


def _int_index_samples(shape, idx, **kw):
    def samples(dtype, rng):
        return [SampleInput((make_array(shape, dtype, rng), np.asarray(idx)), dict(kw))]
    return samples


defop("take(Tensor self, Tensor indices, *, int? axis=None) -> Tensor", impl=_take,
      methods=("take",), kwarg_aliases={"dim": "axis"}, meta=ms.take,
      info=OpInfo(ref=lambda x, i, axis=None: np.take(x, i, axis=0 if axis is None else axis),
                  dtypes=ALL, samples=_int_index_samples((5,), [0, 3, 3])))


def _cpu_take(generic):
    def kernel(a, indices, *rest, **kwargs):  # Note [Gathers on NumPy]
        # (Functionalize passes keyword-only arguments by position)
        d = a._device
        x, k = a._data, indices._data
        if indices._device is d and _int_array(k):
            axis = rest[0] if rest else kwargs.get("axis")
            nd = x.ndim
            if axis is None and nd == 1 or type(axis) is int and nd and -nd <= axis < nd:
                try:
                    return d.wrap(x.take(k, axis or 0))
                except IndexError:
                    pass
        return generic(a, indices, *rest, **kwargs)
    return kernel


register_cpu(CATALOGUE["aten::take"].functional[0], _cpu_take)


def _take_along_axis(xp, x, indices, axis=-1):
    ms.take_along_axis(mf.ArraySpec(x), mf.ArraySpec(indices), axis)  # its named errors
    # Note [Gathers check their indices]
    if indices.ndim == x.ndim and -x.ndim <= axis < x.ndim:  # Note [Axis errors]
        indices = _in_bounds(xp, indices, axis % x.ndim, x.shape[axis], False,
                             "take_along_axis")
    return xp.take_along_axis(x, indices, axis=axis)


defop("take_along_axis(Tensor self, Tensor indices, int axis=-1) -> Tensor",
      impl=_take_along_axis, names=("take_along_axis",), meta=ms.take_along_axis,
      methods=("take_along_axis",), kwarg_aliases={"dim": "axis", "index": "indices"},
      info=OpInfo(ref=lambda x, i, axis=-1: np.take_along_axis(x, i, axis), dtypes=ALL,
                  samples=_int_index_samples((2, 3), [[0, 2], [1, 1]], axis=1)))


def _cpu_take_along_axis(generic):
    def kernel(a, indices, axis=-1):  # Note [Gathers on NumPy]
        d = a._device
        x, k = a._data, indices._data
        nd = x.ndim
        if (indices._device is d and _int_array(k) and k.ndim == nd and nd
                and type(axis) is int and -nd <= axis < nd):
            try:
                return d.wrap(_along(x, k, x.shape, axis % nd))
            except IndexError:  # past the end, or shapes that do not broadcast
                pass
        return generic(a, indices, axis)
    return kernel


register_cpu(CATALOGUE["aten::take_along_axis"].functional[0], _cpu_take_along_axis)


# Note [gather is PyTorch's]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``md.gather(x, dim, index)`` is ``torch.gather``, not the Array API's ``take_along_axis``
# (which ``md.gather`` used to name): the index has the tensor's number of dimensions (0-d
# and 1-d count alike), may be smaller than the tensor in every dimension but ``dim`` --
# it never broadcasts -- and the result has the index's shape; indices must lie in
# ``[0, size)`` (a negative one raises, where take_along_axis wraps it).  The kernel checks
# the shapes (the Meta function's checks) and the index's range (one min and max read from
# the backend), then takes along ``dim`` from the tensor cut to the index's extent.


def _gather_meta(x, dim, index, *, sparse_grad=False):
    if index.dtype.kind not in "iu":
        raise TypeError(f"gather: expected an integer index tensor, got {index.dtype.name}")
    d = mf.normalize_axis("gather", dim, x.ndim)
    if max(x.ndim, 1) != max(index.ndim, 1):
        raise ValueError(f"gather: the index must have the tensor's number of dimensions, "
                         f"got an index of dimension {index.ndim} for a tensor of dimension "
                         f"{x.ndim}")
    xs, ks = tuple(x.shape) or (1,), tuple(index.shape) or (1,)
    if any(k > s for i, (k, s) in enumerate(zip(ks, xs)) if i != d):
        raise ValueError(f"gather: the index of shape {list(index.shape)} must be no larger "
                         f"than the tensor's shape {list(x.shape)} apart from dimension {d}")
    return tuple(index.shape), x.dtype


def _torch_gather(xp, x, dim, index, *, sparse_grad=False):
    _gather_meta(mf.ArraySpec(x), dim, mf.ArraySpec(index))  # Note [gather is PyTorch's]
    d = mf.normalize_axis("gather", dim, x.ndim)
    shape = tuple(index.shape)
    if not x.ndim or not index.ndim:
        x, index = xp.reshape(x, (-1,)), xp.reshape(index, (-1,))
    # Note [Gathers check their indices]: PyTorch's [0, size), as int64
    index = _in_bounds(xp, index, d, x.shape[d], False, "gather", low=0)
    cut = tuple(slice(None) if i == d else slice(0, k) for i, k in enumerate(index.shape))
    return xp.reshape(xp.take_along_axis(x[cut], index, axis=d), shape)


defop("gather(Tensor self, int dim, Tensor index, *, bool sparse_grad=False) -> Tensor",
      impl=_torch_gather, meta=_gather_meta, methods=("gather",), kwarg_aliases={"axis": "dim"},
      info=OpInfo(ref=lambda x, d, i: np.take_along_axis(
          x[tuple(slice(None) if k == d % x.ndim else slice(0, n)
                  for k, n in enumerate(i.shape))], i, d), dtypes=ALL,
          samples=lambda d, rng: [
              SampleInput((make_array((3, 4), d, rng), 1, np.asarray([[0, 3, 3], [1, 0, 2]]))),
              SampleInput((make_array((3, 4), d, rng), 0, np.asarray([[2], [0], [1], [2]])))],
          errors=lambda: [
              ErrorInput(SampleInput((np.zeros((2, 4)), 1, np.asarray([[-1]]))), IndexError,
                         "gather: index -1 is out of bounds for dimension 1 with size 4"),
              ErrorInput(SampleInput((np.zeros((1, 4)), 1, np.asarray([[0], [0]]))),
                         ValueError, "must be no larger than the tensor's shape"),
              ErrorInput(SampleInput((np.zeros((2, 4)), 1, np.asarray([0]))), ValueError,
                         "the index must have the tensor's number of dimensions")]))


def _cpu_gather(generic):
    def kernel(a, dim, index, *rest, **kwargs):  # Note [Gathers on NumPy]
        d = a._device
        x, k = a._data, index._data
        nd = x.ndim
        if (index._device is d and _int_array(k) and k.ndim == nd and nd
                and type(dim) is int and -nd <= dim < nd and (not k.size or lowest_index(k) >= 0)):
            try:  # an index larger than the tensor (but along dim) raises too
                return d.wrap(_along(x, k, k.shape, dim % nd))
            except IndexError:
                pass
        return generic(a, dim, index, *rest, **kwargs)
    return kernel


register_cpu(CATALOGUE["aten::gather"].functional[0], _cpu_gather)


def _index_select(xp, x, dim, index):
    ms.index_select(x, dim, _IndexSpec(index))  # the meta function's checks, same messages
    size = x.shape[dim % x.ndim] if x.ndim else 1  # Note [Gathers check their indices]
    index = _in_bounds(xp, index, dim % max(x.ndim, 1), size, False, "index_select",
                       low=0)  # PyTorch's bounds: [0, size)
    if x.ndim == 0:
        return xp.reshape(xp.take(xp.reshape(x, (1,)), xp.reshape(index, (-1,)), axis=0), ())
    return xp.take(x, xp.reshape(index, (-1,)), axis=dim)


class _IndexSpec:
    """A raw index array seen as the meta functions see tensors (shape, ndim, dtype)."""

    def __init__(self, a):
        self.shape = tuple(a.shape)
        self.ndim = len(self.shape)
        self.dtype = dt.as_dtype(a.dtype)


defop("index_select(Tensor self, int dim, Tensor index) -> Tensor", impl=_index_select,
      meta=ms.index_select, methods=("index_select",), kwarg_aliases={"axis": "dim"},
      # Note: no derivative formula yet (ops/derivatives.py; backward raises naming the op).
      info=OpInfo(ref=lambda x, d, i: np.take(x, i, axis=d), dtypes=ALL,
                  samples=lambda d, rng: [
                      SampleInput((make_array((4, 3), d, rng), 0, np.asarray([3, 0, 0]))),
                      SampleInput((make_array((4, 3), d, rng), -1, np.asarray([2, 1])))],
                  errors=lambda: [
                      ErrorInput(SampleInput((np.zeros((2, 3)), 0, np.zeros((2, 2), np.int64))),
                                 ValueError, "index must be 0-D or 1-D"),
                      ErrorInput(SampleInput((np.zeros((2, 3)), 2, np.zeros(1, np.int64))),
                                 IndexError, "out of range"),
                      ErrorInput(SampleInput((np.zeros((2, 3)), 0, np.zeros(1))),
                                 TypeError, "integer index")]))


def _cpu_index_select(generic):
    def kernel(a, dim, index):  # Note [Gathers on NumPy]
        d = a._device
        x, k = a._data, index._data
        nd = x.ndim
        # (an empty tensor goes to the generic kernel's bounds check: NumPy's take reads no
        # element from it, so it checks no index -- index 0 of a (0, 0) tensor's dim 1)
        if (index._device is d and k.ndim == 1 and _int_array(k) and type(dim) is int
                and -nd <= dim < nd and (not k.size or x.size and lowest_index(k) >= 0)):
            try:
                return d.wrap(x.take(k, dim))
            except IndexError:
                pass
        return generic(a, dim, index)
    return kernel


register_cpu(CATALOGUE["aten::index_select"].functional[0], _cpu_index_select)


def _bool_condition(dtype) -> None:
    raise TypeError(f"where: expected a bool condition, got {dtype.name} (compare it, "
                    f"e.g. where(c != 0, ...), as PyTorch asks too)")


def _where(xp, condition, x, y):
    if dtype_of(condition).kind != "b":
        _bool_condition(dtype_of(condition))
    return xp.where(condition, x, y)


_HIGHER = {int: "b", float: "biuV", complex: "biuf"}  # as in ops/_ufunc_kernels.py
# ``np.where`` dispatches ``__array_function__`` first (0.15 us of its 0.85 on 16x16 float32);
# the C function behind it, in NumPy's private ``_core._multiarray_umath`` (NumPy >= 2),
# does not
_np_where_c = getattr(getattr(getattr(np, "_core", None), "_multiarray_umath", None), "where",
                      np.where)


def _np_where(xp, condition, x, y):
    # Note [NumPy fast impls]: np.where promotes Python scalars weakly, as the Meta kernels
    # do, so the CPU skips the generic scalar promotion (ops/_promotion.py) and
    # array-api-compat's asarray for two scalars -- except for a scalar of a higher kind
    # than the array (or two scalars), where NumPy's rule differs from PyTorch's (Note
    # [Scalars of a higher kind] in mdtensor/_dtypes.py): the result is cast to the Meta
    # kernels' dtype.
    if condition.dtype.kind != "b":
        _bool_condition(dt.from_numpy_dtype(condition.dtype))
    tx, ty = type(x), type(y)
    if tx is np.ndarray and ty is np.ndarray and x.dtype is not y.dtype:
        # PyTorch's promotion, not NumPy's (float32 with int32 is float32, bfloat16 with
        # int16 bfloat16: Note [Promotion of bfloat16])
        want = dt.promote_types(dt.from_numpy_dtype(x.dtype),
                                dt.from_numpy_dtype(y.dtype)).numpy
        x = x if x.dtype == want else x.astype(want)
        y = y if y.dtype == want else y.astype(want)
    r = _np_where_c(condition, x, y)
    if tx is np.ndarray and ty is np.ndarray:
        return r
    if (tx is np.ndarray and x.dtype.kind not in _HIGHER.get(ty, "")) or \
            (ty is np.ndarray and y.dtype.kind not in _HIGHER.get(tx, "")):
        return r
    want = dt.result_type(*(dt.from_numpy_dtype(v.dtype) if type(v) is np.ndarray else v
                            for v in (x, y))).numpy
    return r if r.dtype == want else r.astype(want)


def _where_meta(c, x, y):
    if c.dtype.kind != "b":
        _bool_condition(c.dtype)
    shape = mf.broadcast_shapes("where", tuple(c.shape), getattr(x, "shape", ()),
                                getattr(y, "shape", ()))
    return shape, dt.result_type(x, y)


def _where_samples(dtype, rng):
    c = rng.random((2, 3)) > 0.5
    return [SampleInput((c, make_array((2, 3), dtype, rng), make_array((3,), dtype, rng)))]


_wdecl = defop("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
               impl=_where, cpu_impl=_np_where, meta=_where_meta, names=("where",),
               methods=(),
               info=OpInfo(ref=np.where, dtypes=ALL, samples=_where_samples))


def _cpu_where(generic):
    """``where(c, x, y)`` of three tensors on one device, a bool condition and operands of
    one dtype: the C ``where`` on their arrays (Note [Hand-written CPU kernels]); the rest
    -- other dtypes, devices, a shape NumPy refuses -- takes the op's CPU kernel."""
    def kernel(c, a, b):
        d = a._device
        k, x, y = c._data, a._data, b._data
        if (b._device is d and c._device is d and k.dtype.kind == "b"
                and x.dtype is y.dtype):
            try:
                return d.wrap(_np_where_c(k, x, y))
            except ValueError:
                pass
        return generic(c, a, b)
    return kernel


register_cpu(_wdecl.functional[0], _cpu_where, DispatchKey.CPU)
defop("where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor", impl=_where,
      cpu_impl=_np_where, meta=_where_meta, decl=_wdecl)
defop("where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor", impl=_where,
      cpu_impl=_np_where, meta=_where_meta, decl=_wdecl)
defop("where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor", impl=_where,
      cpu_impl=_np_where, meta=lambda c, x, y: (tuple(c.shape), dt.result_type(x, y)), decl=_wdecl)


def _masked_fill(xp, x, mask, value):
    if not hasattr(value, "dtype"):  # Note [Scalars written into tensors]
        value = scalar_into("masked_fill", value, dtype_of(x))
    return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)


def _masked_fill_meta(x, mask, value):
    shape = mf.broadcast_shapes("masked_fill", tuple(x.shape), tuple(mask.shape))
    if shape != tuple(x.shape):
        raise RuntimeError(f"masked_fill: the mask of shape {tuple(mask.shape)} must be "
                           f"broadcastable to the tensor's shape {tuple(x.shape)}")
    return tuple(x.shape), x.dtype


def _check_mask(mask, name):
    if mask.dtype is not dt.bool_:
        raise TypeError(f"{name}: expected a bool mask, got {mask.dtype.name}")


def _masked_fill_scalar_(xp, x, mask, value):
    return _masked_fill(xp, x, mask, value)


def _masked_fill_samples(dtype, rng):
    x = make_array((2, 3), dtype, rng)
    mask = rng.random((2, 3)) > 0.5
    fill = {"b": True, "i": 7, "u": 7, "f": -1.5, "c": -1.5}[dtype.kind]
    return [SampleInput((x, mask, fill)), SampleInput((x, mask[0], fill))]


def _masked_fill_explicit(self, mask, value):
    """Note [masked_fill is clone + masked_fill_]: CompositeExplicitAutograd, so an
    override of ``masked_fill_`` for a backend changes ``masked_fill`` on it too."""
    _check_mask(mask, "masked_fill")
    if not isinstance(value, Tensor):  # Note [Scalars written into tensors], before clone
        value = scalar_into("masked_fill", value, self.dtype)
    out = aten.clone(self)
    return aten.masked_fill_(out, mask, value)


def masked_fill_functional(self, mask, value):
    """``masked_fill`` as one functional op, for Functionalize: its functional op is a
    composite of the mutation (Note [masked_fill is clone + masked_fill_]), which a
    transform removing mutations cannot run."""
    if not isinstance(value, Tensor):  # Note [Scalars written into tensors]
        value = scalar_into("masked_fill", value, self.dtype)
    return aten.where(mask, value, self)


_mf = defop("masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)",
            impl=_masked_fill_scalar_, meta=_masked_fill_meta, methods=(), names=())
defop("masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)",
      impl=_masked_fill_scalar_, meta=_masked_fill_meta, decl=_mf)
_mfd = defop("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
             explicit=_masked_fill_explicit, meta=_masked_fill_meta, methods=("masked_fill",),
             info=OpInfo(ref=lambda x, m, v: np.where(m, np.asarray(v, x.dtype), x),
                         dtypes=ALL, samples=_masked_fill_samples))
defop("masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor",
      explicit=_masked_fill_explicit, meta=_masked_fill_meta, decl=_mfd)
_mfd.inplace = list(_mf.overloads)


# Note [masked_fill on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``masked_fill`` with a Python scalar, on NumPy, is a copy and one ``putmask`` (or a
# ``copyto`` through the mask where it broadcasts) in a CPU kernel of its own (Note
# [Hand-written CPU kernels] in ops/_cpu_kernels.py): the composite's clone and in-place
# fill are two dispatches more.  The value is converted as the composite converts it (Note
# [Scalars written into tensors]); a mask that is not bool, or does not broadcast to the
# tensor's shape, goes to the composite, which raises the op's error.  So does every call
# once ``masked_fill_`` has a CPU kernel of its own (an override: Note [masked_fill is
# clone + masked_fill_]), which the composite then calls.

_BOOL = np.dtype(bool)


def _cpu_masked_fill(composite):
    overridden = _mf.overloads[0].kernels_for  # masked_fill_.Scalar

    def kernel(a, mask, value):
        d = a._device
        x, m = a._data, mask._data
        if (mask._device is d and m.dtype is _BOOL and isinstance(value, (bool, int, float,
                                                                           complex))
                and not overridden(DispatchKey.CPU)):
            v = value
            if not (type(value) is float and x.dtype.kind == "f" and abs(value) <= 65504.0):
                # (a float any floating dtype holds, as scalar_into would return it)
                v = scalar_into("masked_fill", value, dtype_of(x))
            out = x.copy()
            if m.shape == x.shape:
                np.putmask(out, m, v)
                return d.wrap(out)
            try:
                np.copyto(out, v, casting="unsafe", where=m)
                return d.wrap(out)
            except ValueError:  # a mask that does not broadcast to the tensor's shape
                pass
        return composite(a, mask, value)
    return kernel


register_cpu(_mfd.functional[0], _cpu_masked_fill, DispatchKey.CompositeExplicitAutograd)


# Bound once (Note [The hot path] in mdtensor/dispatch/callers.py): x[k] skips the namespace lookup.
_basic_index_op = CATALOGUE["aten::basic_index"].overloads[0]
_basic_index_table = _basic_index_op.table  # cleared in place, never replaced
_index_op = CATALOGUE["aten::index"].overloads[0]
_index_put_op = _ip.overloads[0].overloadpacket  # Tensor or Scalar value: the packet picks
