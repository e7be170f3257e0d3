"""Scatters: ``scatter``, ``scatter_add``, ``scatter_reduce`` and the ``index_add``,
``index_copy``, ``index_fill`` family, each with its in-place form (``x.scatter_(...)``) and
``out=`` (structured ops), as PyTorch's.

``scatter(self, dim, index, src)`` writes ``src[i][j][k]`` to ``self[index[i][j][k]][j][k]``
(for ``dim == 0``): ``index`` has ``self``'s number of dimensions, is no larger than ``src``
anywhere nor than ``self`` off ``dim``, and only the part of ``src`` it covers is read.  The
``index_*`` ops address whole slices: ``index_add(self, dim, index, source)`` adds
``source``'s slice ``i`` along ``dim`` to ``self``'s slice ``index[i]``; they are scatters
with ``index`` broadcast along the other dimensions.  Every one computes the flat positions
of the writes and hands them to ``_segment.put`` (Note [Scatters without scatter functions]
in ops/_segment.py).  As PyTorch: indices are int32 or int64 in ``[0, size)`` (checked,
naming the op; ``index_fill`` takes negative ones too), ``src`` has ``self``'s dtype, and
of repeated positions in ``scatter`` the last write wins (PyTorch's CPU order; PyTorch
leaves it undefined).  The derivative rules are in
``ops/scatter_derivatives.py``.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._cpu_kernels import register_cpu
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from ._segment import put
from .elementwise import ALL, NUMERIC
from .indexing import index_grid, lowest_index

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

_REDUCES = {"sum": "sum", "prod": "prod", "mean": "sum", "amax": "amax", "amin": "amin"}


# -- checks (the Meta functions and the kernels share them) --------------------------------


def _int_index(name, index) -> None:
    if dt.as_dtype(index.dtype) not in (dt.int64, dt.int32):
        raise TypeError(f"{name}: Expected dtype int32/int64 for index, got "
                        f"{dt.as_dtype(index.dtype).name}")


def _same_dtype(name, x, src, what="src") -> None:
    if dt.as_dtype(x.dtype) is not dt.as_dtype(src.dtype):
        raise TypeError(f"{name}: Expected self.dtype to be equal to {what}.dtype, got "
                        f"{dt.as_dtype(x.dtype).name} and {dt.as_dtype(src.dtype).name}")


def _scatter_check(name, x, dim, index, src=None) -> int:
    """PyTorch's shape rules of a scatter; returns ``dim`` normalized."""
    _int_index(name, index)
    d = mf.normalize_axis(name, dim, len(x.shape))
    nd = max(len(x.shape), 1)
    if max(len(index.shape), 1) != nd or (src is not None and max(len(src.shape), 1) != nd):
        raise ValueError(f"{name}: Index tensor must have the same number of dimensions as "
                         f"self tensor{' and src tensor' if src is not None else ''}")
    if src is not None:
        _same_dtype(name, x, src)
    if 0 in tuple(index.shape):
        return d
    xs, ks = tuple(x.shape) or (1,), tuple(index.shape) or (1,)
    ss = (tuple(src.shape) or (1,)) if src is not None else None
    for i, k in enumerate(ks):
        if ss is not None and k > ss[i]:
            raise ValueError(f"{name}: Expected index {list(index.shape)} to be no larger "
                             f"than src {list(src.shape)} in every dimension")
        if i != d and k > xs[i]:
            raise ValueError(f"{name}: Expected index {list(index.shape)} to be no larger "
                             f"than self {list(x.shape)} apart from dimension {d}")
    return d


def _index_check(name, x, dim, index, source=None) -> int:
    """PyTorch's rules of ``index_add``/``index_copy``/``index_fill``."""
    kinds = (dt.int64, dt.int32) if name == "index_add" else (dt.int64,)
    if dt.as_dtype(index.dtype) not in kinds:
        raise TypeError(f"{name}: Expected dtype {' or '.join(k.name for k in kinds)} for "
                        f"index, got {dt.as_dtype(index.dtype).name}")
    if len(index.shape) > 1:
        raise ValueError(f"{name}: Index is supposed to be a vector, got a tensor of "
                         f"dimension {len(index.shape)}")
    d = mf.normalize_axis(name, dim, len(x.shape))
    if source is not None:
        _same_dtype(name, x, source, "source")
        n = int(np.prod(index.shape))
        xs, ss = list(x.shape) or [1], list(source.shape) or [1]
        # index_copy takes a 0-d tensor as one of one element; index_add does not
        ndims = (len(source.shape), len(x.shape)) if name == "index_add" else (len(ss), len(xs))
        if ndims[0] != ndims[1]:
            raise ValueError(f"{name}: source must have the same number of dimensions as "
                             f"self, got {len(source.shape)} and {len(x.shape)}")
        if ss[d] != n:
            raise ValueError(f"{name}: Number of indices ({n}) should be equal to "
                             f"source.size(dim) ({ss[d]})")
        if any(a != b for i, (a, b) in enumerate(zip(xs, ss)) if i != d):
            raise ValueError(f"{name}: source {list(source.shape)} must have self's shape "
                             f"{list(x.shape)} apart from dimension {d}")
    return d


# -- positions -----------------------------------------------------------------------------


def _in_range(xp, name, index, d, size):
    """``index`` checked to lie in ``[0, size)`` (one min and max read, as gather's)."""
    if 0 in tuple(index.shape):
        return index
    lo, hi = int(xp.min(index)), int(xp.max(index))
    if lo < 0 or hi >= size:
        bad = lo if lo < 0 else hi
        raise IndexError(f"{name}: index {bad} is out of bounds for dimension {d} with size "
                         f"{size}")
    return index


def _positions(xp, shape, d, index):
    """The flat positions in a row-major array of ``shape`` that the elements of ``index``
    (``len(shape)`` dimensions, values along ``d``) address, as 1-D int64."""
    nd = len(shape)
    ishape = tuple(index.shape)
    flat = None
    stride = 1
    for ax in range(nd - 1, -1, -1):
        if ax == d:
            coord = xp.astype(index, xp.int64)
        else:
            view = [1] * nd
            view[ax] = ishape[ax]
            coord = xp.reshape(xp.arange(ishape[ax], dtype=xp.int64,
                                         device=_device(index)), tuple(view))
        term = coord * stride if stride != 1 else coord
        flat = term if flat is None else flat + term
        stride *= shape[ax]
    return xp.reshape(xp.broadcast_to(flat, ishape), (-1,))


def _device(a):
    dev = getattr(a, "device", None)
    if dev is None:
        from array_api_compat import device

        dev = device(a)
    return dev


def _as_1d(a):
    return a if a.ndim else a[None]


def _scatter_into(xp, name, x, dim, index, values, reduce):
    """``x`` with ``values`` (an array covering ``index``, or a Python scalar) combined at
    the positions ``index`` names along ``dim``."""
    shape0 = tuple(x.shape)
    x1, index1 = _as_1d(x), _as_1d(index)
    d = dim % x1.ndim
    if 0 in tuple(index1.shape):
        return xp.asarray(x, copy=True)
    index1 = _in_range(xp, name, index1, d, x1.shape[d])
    pos = _positions(xp, tuple(x1.shape), d, index1)
    if isinstance(values, (bool, int, float, complex)):
        vals = xp.full(pos.shape, values, dtype=x.dtype, device=_device(x))
    else:
        v = _as_1d(values)
        cut = tuple(slice(0, k) for k in index1.shape)
        vals = xp.reshape(v[cut], (-1,))
    out = put(xp, xp.reshape(x1, (-1,)), pos, vals, reduce)
    return xp.reshape(out, shape0)


def _fill_value(name, dtype, value):
    from .filling import _value_for  # PyTorch's conversion of a fill value

    return _value_for(name, dt.as_dtype(dtype), value)


# -- scatter, scatter_add, scatter_reduce ------------------------------------------------------


def _scatter_src(xp, x, dim, index, src):
    _scatter_check("scatter", x, dim, index, src)
    return _scatter_into(xp, "scatter", x, dim, index, src, "set")


def _scatter_value(xp, x, dim, index, value):
    _scatter_check("scatter", x, dim, index)
    return _scatter_into(xp, "scatter", x, dim, index,
                         _fill_value("scatter", x.dtype, value), "set")


def _scatter_add(xp, x, dim, index, src):
    _scatter_check("scatter_add", x, dim, index, src)
    return _scatter_into(xp, "scatter_add", x, dim, index, src, "sum")


def _identity(xp, dtype, reduce):
    """The value a reduction starts from (what ``include_self=False`` puts in ``self``)."""
    d = dt.as_dtype(dtype)
    if reduce in ("sum", "mean"):
        return False if d.kind == "b" else 0
    if reduce == "prod":
        return True if d.kind == "b" else 1
    big = reduce == "amin"
    if d.kind == "b":
        return big
    if d.kind in "iu":
        info = np.iinfo(d.numpy)
        return int(info.max if big else info.min)
    return float("inf") if big else float("-inf")


def _scatter_reduce(xp, x, dim, index, src, reduce, include_self=True):
    _scatter_check("scatter_reduce", x, dim, index, src)
    if reduce not in _REDUCES:
        raise ValueError(f"scatter_reduce: reduce argument must be either sum, prod, mean, "
                         f"amax or amin, got {reduce}")
    base = x
    if not include_self:  # the written positions start from the reduction's identity
        base = _scatter_into(xp, "scatter_reduce", x, dim, index,
                             _identity(xp, x.dtype, reduce), "set")
    total = _scatter_into(xp, "scatter_reduce", base, dim, index, src, _REDUCES[reduce])
    if reduce != "mean":
        return total
    ones = xp.ones(tuple(x.shape), dtype=x.dtype, device=_device(x))
    if not include_self:
        ones = _scatter_into(xp, "scatter_reduce", ones, dim, index, 0, "set")
    count = _scatter_into(xp, "scatter_reduce", ones, dim, index, xp.ones_like(src), "sum")
    count = xp.where(count == 0, xp.ones_like(count), count)
    if dt.as_dtype(x.dtype).kind in "iub":
        return total // count
    return total / count


def _named_meta(name, with_src=True):
    def meta(x, dim, index, src=None, *args, **kwargs):
        _scatter_check(name, x, dim, index, src if with_src else None)
        return tuple(x.shape), x.dtype
    return meta


# -- index_add, index_copy, index_fill ------------------------------------------------------


def _broadcast_index(xp, index, d, shape):
    """The 1-D ``index`` as an index of ``shape`` for a scatter along ``d``."""
    view = [1] * len(shape)
    view[d] = -1
    idx = xp.reshape(xp.astype(index, xp.int64), tuple(view))
    return xp.broadcast_to(idx, tuple(shape))


def _index_add(xp, x, dim, index, source, alpha=1):
    d = _index_check("index_add", x, dim, index, source)
    x1, s1 = _as_1d(x), _as_1d(source)
    idx = _broadcast_index(xp, _as_1d(index), d, tuple(s1.shape))
    if alpha != 1:
        s1 = s1 * alpha
    return xp.reshape(_scatter_into(xp, "index_add", x1, d, idx, s1, "sum"), tuple(x.shape))


def _index_copy(xp, x, dim, index, source):
    d = _index_check("index_copy", x, dim, index, source)
    x1, s1 = _as_1d(x), _as_1d(source)
    idx = _broadcast_index(xp, _as_1d(index), d, tuple(s1.shape))
    return xp.reshape(_scatter_into(xp, "index_copy", x1, d, idx, s1, "set"), tuple(x.shape))


def _index_fill(xp, x, dim, index, value):
    d = _index_check("index_fill", x, dim, index)
    x1 = _as_1d(x)
    size = x1.shape[d]
    if index.shape[0] if index.ndim else True:  # index_fill takes negative indices too
        lo = int(xp.min(index))
        if lo < -size:
            raise IndexError(f"index_fill: index {lo} is out of bounds for dimension {d} "
                             f"with size {size}")
        index = xp.where(index < 0, index + size, index)
    shape = list(x1.shape)
    shape[d] = int(np.prod(index.shape))
    idx = _broadcast_index(xp, _as_1d(index), d, tuple(shape))
    v = _fill_value("index_fill", x.dtype, value)
    return xp.reshape(_scatter_into(xp, "index_fill", x1, d, idx, v, "set"), tuple(x.shape))


def _index_meta(name, with_source=True):
    def meta(x, dim, index, source=None, *args, **kwargs):
        _index_check(name, x, dim, index, source if with_source else None)
        return tuple(x.shape), x.dtype
    return meta


# -- OpInfo samples -------------------------------------------------------------------------


def _scatter_samples(dtype, rng):
    # repeated positions last: gradcheck takes the first samples, and with repeats the
    # gradient of the overwritten src elements is g, as PyTorch's (its formula assumes
    # unique positions), not the 0 finite differences see
    x = make_array((3, 4), dtype, rng)
    return [
        SampleInput((x, 0, np.asarray([[0, 1, 2, 0], [2, 0, 0, 1]]),
                     make_array((2, 4), dtype, rng)), name="dim0"),
        SampleInput((x, 1, np.asarray([[3], [0], [1]]), make_array((3, 2), dtype, rng)),
                    name="src-larger"),
        SampleInput((make_array((), dtype, rng), 0, np.asarray(0),
                     make_array((), dtype, rng)), name="0-d"),
        SampleInput((x, -1, np.asarray([[1, 1], [2, 2], [0, 3]]),
                     make_array((3, 2), dtype, rng)), name="repeats"),
    ]


def _torch_scatter_ref(x, dim, index, src, reduce="set", include_self=True):
    """A NumPy reference, one element at a time."""
    x = np.array(x, copy=True)
    x1, i1 = x.reshape(x.shape or (1,)), index.reshape(index.shape or (1,))
    s1 = np.asarray(src).reshape(np.shape(src) or (1,)) if np.ndim(src) or isinstance(
        src, np.ndarray) else None
    d = dim % x1.ndim
    acc: dict = {}
    for pos in np.ndindex(*i1.shape):
        target = list(pos)
        target[d] = i1[pos]
        target = tuple(target)
        v = s1[pos] if s1 is not None else src
        acc.setdefault(target, []).append(v)
    for t, vs in acc.items():
        if reduce == "set":
            x1[t] = vs[-1]
            continue
        vals = ([x1[t]] if include_self else []) + vs
        if reduce == "sum":
            x1[t] = np.sum(vals, dtype=x.dtype) if x.dtype != bool else np.any(vals)
        elif reduce == "prod":
            x1[t] = np.prod(vals, dtype=x.dtype) if x.dtype != bool else np.all(vals)
        elif reduce == "mean":
            s = np.sum(vals, dtype=x.dtype)
            x1[t] = s // len(vals) if x.dtype.kind in "iub" else s / len(vals)
        elif reduce == "amax":
            x1[t] = np.max(vals)
        else:
            x1[t] = np.min(vals)
    return x1.reshape(x.shape)


def _scatter_errors():
    x = np.zeros((2, 3))
    return [
        ErrorInput(SampleInput((x, 0, np.asarray([[0, 1]], np.int16), np.ones((1, 2)))),
                   TypeError, "scatter: Expected dtype int32/int64 for index"),
        ErrorInput(SampleInput((x, 0, np.asarray([[2, 0]]), np.ones((1, 2)))), IndexError,
                   "scatter: index 2 is out of bounds for dimension 0 with size 2"),
        ErrorInput(SampleInput((x, 0, np.asarray([[0, 0]]), np.ones((1, 2), np.float32))),
                   TypeError, "scatter: Expected self.dtype to be equal to src.dtype"),
        ErrorInput(SampleInput((x, 0, np.asarray([[0, 0, 0, 0]]), np.ones((1, 4)))),
                   ValueError, "scatter: Expected index .* to be no larger than self"),
        ErrorInput(SampleInput((x, 0, np.asarray([0]), np.ones((1, 2)))), ValueError,
                   "scatter: Index tensor must have the same number of dimensions"),
    ]


_sc = defop("scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
            impl=_scatter_src, structured=True, meta=_named_meta("scatter"),
            methods=("scatter",),
            info=OpInfo(ref=_torch_scatter_ref, dtypes=ALL, samples=_scatter_samples,
                        errors=_scatter_errors))
defop("scatter.value(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
      impl=_scatter_value, structured=True, meta=_named_meta("scatter", False), decl=_sc,
      promote_scalars=False)
defop("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
      impl=_scatter_add, structured=True, meta=_named_meta("scatter_add"),
      methods=("scatter_add",),
      info=OpInfo(ref=lambda x, d, i, s: _torch_scatter_ref(x, d, i, s, "sum"),
                  dtypes=NUMERIC, samples=_scatter_samples))


def _reduce_samples(dtype, rng):
    out = []
    for reduce in ("sum", "prod", "mean", "amax", "amin"):
        for s in _scatter_samples(dtype, rng)[:2] + _scatter_samples(dtype, rng)[3:]:
            for include_self in (True, False):
                out.append(SampleInput(s.args + (reduce,), {"include_self": include_self},
                                       name=f"{s.name}-{reduce}-{include_self}"))
    return out


defop("scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
      "bool include_self=True) -> Tensor", impl=_scatter_reduce, structured=True,
      meta=_named_meta("scatter_reduce"), methods=("scatter_reduce",),
      info=OpInfo(ref=lambda x, d, i, s, r, include_self=True: _torch_scatter_ref(
          x, d, i, s, r, include_self), dtypes=(dt.int64, dt.float32, dt.float64),
          samples=_reduce_samples))


def _index_samples(dtype, rng):
    x = make_array((4, 3), dtype, rng)
    return [SampleInput((x, 0, np.asarray([3, 0, 3]), make_array((3, 3), dtype, rng))),
            SampleInput((x, 1, np.asarray([2, 1]), make_array((4, 2), dtype, rng))),
            SampleInput((make_array((), dtype, rng), 0, np.asarray([0]),
                         make_array((), dtype, rng)))]


def _index_ref(reduce, alpha=1):
    def ref(x, dim, index, source, alpha=alpha):
        x1 = np.array(x, copy=True).reshape(x.shape or (1,))
        s1 = np.asarray(source).reshape(np.shape(source) or (1,))
        d = dim % x1.ndim
        for i, k in enumerate(np.asarray(index).reshape(-1)):
            dst = (slice(None),) * d + (k,)
            src = (slice(None),) * d + (i,)
            if reduce == "sum":
                x1[dst] = x1[dst] + s1[src] * alpha
            else:
                x1[dst] = s1[src]
        return x1.reshape(x.shape)
    return ref


def _index_errors(name):
    x = np.zeros((2, 3))
    return lambda: [
        ErrorInput(SampleInput((x, 0, np.asarray([2]), np.ones((1, 3)))), IndexError,
                   f"{name}: index 2 is out of bounds for dimension 0 with size 2"),
        ErrorInput(SampleInput((x, 0, np.asarray([0, 1]), np.ones((1, 3)))), ValueError,
                   rf"{name}: Number of indices \(2\) should be equal to source.size"),
        ErrorInput(SampleInput((x, 0, np.asarray([0.0]), np.ones((1, 3)))), TypeError,
                   f"{name}: Expected dtype int64( or int32)? for index")]


defop("index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) "
      "-> Tensor", impl=_index_add, structured=True, meta=_index_meta("index_add"),
      methods=("index_add",),
      info=OpInfo(ref=_index_ref("sum"), dtypes=NUMERIC, samples=lambda d, rng: [
          *_index_samples(d, rng), SampleInput(_index_samples(d, rng)[0].args,
                                               {"alpha": 2})],
          errors=_index_errors("index_add")))
defop("index_copy(Tensor self, int dim, Tensor index, Tensor source) -> Tensor",
      impl=_index_copy, structured=True, meta=_index_meta("index_copy"),
      methods=("index_copy",),
      info=OpInfo(ref=_index_ref("set"), dtypes=ALL,
                  samples=lambda d, rng: [s for s in _index_samples(d, rng)
                                          if s.args[2].tolist() != [3, 0, 3]],
                  errors=_index_errors("index_copy")))


def _index_fill_samples(dtype, rng):
    value = {"b": True, "i": 3, "u": 3, "f": 1.5, "c": 1.5}[dtype.kind]
    return [SampleInput((make_array((4, 3), dtype, rng), 0, np.asarray([3, 0, 3]), value)),
            SampleInput((make_array((4, 3), dtype, rng), -1, np.asarray([1]), value)),
            SampleInput((make_array((), dtype, rng), 0, np.asarray([0]), value))]


def _index_fill_ref(x, dim, index, value):
    x1 = np.array(x, copy=True).reshape(x.shape or (1,))
    x1[(slice(None),) * (dim % x1.ndim) + (np.asarray(index).reshape(-1),)] = value
    return x1.reshape(x.shape)


defop("index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
      impl=_index_fill, structured=True, meta=_index_meta("index_fill", False),
      methods=("index_fill",), promote_scalars=False,
      info=OpInfo(ref=_index_fill_ref, dtypes=ALL, samples=_index_fill_samples))


# -- CPU kernels ------------------------------------------------------------------------------

# Note [Scatters on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels of the scatters (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py)
# write into a copy of ``self`` with one NumPy call: an assignment through an advanced index
# (``scatter``, ``index_copy``, ``index_fill``: NumPy assigns in order, so the last write
# wins, as ``put``'s "set") or the reduction's ``ufunc.at`` (``scatter_add``, ``index_add``,
# ``scatter_reduce`` but for "mean").  A scatter's index is ``self[i0, ..., index, ...,
# in]`` with the aranges of the index's extent (``index_grid``, as gather's: Note [Gathers
# on NumPy] in ops/indexing.py), ``src`` cut to that extent; an ``index_*`` op's is ``(:,
# ..., index)``.  The calls of the common case -- operands of the dtypes and ranks the op
# takes, no negative index (one scan of the index: ``lowest_index``) -- take this path;
# NumPy raises IndexError for an index past the end (or an index larger than ``self`` off
# ``dim``), and that call and every other go to the generic kernel, whose checks raise the
# op's errors.

_I64, _I32 = np.dtype(np.int64), np.dtype(np.int32)
_AT = {"sum": np.add.at, "prod": np.multiply.at, "amax": np.maximum.at,
       "amin": np.minimum.at}


def _assign(out, key, values):
    out[key] = values


def _add_at(out, key, values, alpha=1):
    if alpha != 1:
        return False  # the generic kernel multiplies (and checks alpha)
    np.add.at(out, key, values)
    return None


def _reduce_at(out, key, values, reduce, include_self=True):
    at = _AT.get(reduce)
    if at is None:
        return False  # "mean" (or an unknown reduction): the generic kernel
    if not include_self:
        out[key] = _identity(np, out.dtype, reduce)
    at(out, key, values)
    return None


def _np_scatter(write):
    """The CPU kernel of a scatter (Note [Scatters on NumPy]): ``write(out, key, src,
    *rest, **kwargs)`` into a copy of ``self`` (False: the generic kernel instead)."""
    def build(generic):
        def kernel(a, dim, index, src, *rest, **kwargs):
            d = a._device
            x, k, v = a._data, index._data, src._data
            nd = x.ndim
            if (index._device is d and src._device is d and k.ndim == nd and v.ndim == nd
                    and type(dim) is int and -nd <= dim < nd and v.dtype == x.dtype
                    and (k.dtype is _I64 or k.dtype is _I32)
                    and (not k.size or lowest_index(k) >= 0)):
                ks = k.shape
                if ks != v.shape:
                    if any(m > n for m, n in zip(ks, v.shape)):
                        return generic(a, dim, index, src, *rest, **kwargs)
                    v = v[tuple(slice(0, m) for m in ks)]
                axis = dim % nd
                key = list(index_grid(ks, axis))
                key[axis] = k
                out = x.copy()
                key = tuple(key)
                try:  # (no star call where nothing follows: Note [Star calls] in
                    # mdtensor/dispatch/callers.py)
                    if (write(out, key, v, *rest, **kwargs) if rest or kwargs
                            else write(out, key, v)) is not False:
                        return d.wrap(out)
                except IndexError:  # an index past the end: the generic kernel's error
                    pass
            return generic(a, dim, index, src, *rest, **kwargs)
        return kernel
    return build


def _np_index(write, int32=False):
    """The CPU kernel of ``index_add``/``index_copy`` (Note [Scatters on NumPy])."""
    def build(generic):
        def kernel(a, dim, index, source, *rest, **kwargs):  # (alpha: by position too)
            d = a._device
            x, k, v = a._data, index._data, source._data
            nd = x.ndim
            if (index._device is d and source._device is d and k.ndim == 1 and v.ndim == nd
                    and type(dim) is int and -nd <= dim < nd and v.dtype == x.dtype
                    and (k.dtype is _I64 or int32 and k.dtype is _I32)):
                axis = dim % nd
                xs = x.shape
                if (xs[:axis] + k.shape + xs[axis + 1:] == v.shape
                        and (not k.size or lowest_index(k) >= 0)):
                    out = x.copy()
                    key = (slice(None),) * axis + (k,)
                    try:  # (no star call where nothing follows: Note [Star calls])
                        if (write(out, key, v, *rest, **kwargs) if rest or kwargs
                                else write(out, key, v)) is not False:
                            return d.wrap(out)
                    except IndexError:
                        pass
            return generic(a, dim, index, source, *rest, **kwargs)
        return kernel
    return build


def _np_index_fill(generic):
    def kernel(a, dim, index, value):  # Note [Scatters on NumPy]
        d = a._device
        x, k = a._data, index._data
        nd = x.ndim
        if (index._device is d and k.ndim <= 1 and k.dtype is _I64 and type(dim) is int
                and -nd <= dim < nd and isinstance(value, (bool, int, float, complex))):
            if not (type(value) is float and x.dtype.kind in "fc"):
                value = _fill_value("index_fill", x.dtype, value)
            out = x.copy()
            try:  # negative indices in [-size, 0) count from the end, as NumPy's
                out[(slice(None),) * (dim % nd) + (k,)] = value
                return d.wrap(out)
            except IndexError:
                pass
        return generic(a, dim, index, value)
    return kernel


for _name, _build in (("scatter", _np_scatter(_assign)), ("scatter_add", _np_scatter(_add_at)),
                      ("scatter_reduce", _np_scatter(_reduce_at)),
                      ("index_add", _np_index(_add_at, int32=True)),
                      ("index_copy", _np_index(_assign)), ("index_fill", _np_index_fill)):
    register_cpu(CATALOGUE[f"aten::{_name}"].functional[0], _build)
