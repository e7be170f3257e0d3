"""Searching, sorting, set and utility functions (Array API), with torch spellings."""

from __future__ import annotations

import numpy as np
from numpy._core import multiarray as _np_multiarray

from mdtensor import _dtypes as dt
from mdtensor.dispatch.keys import DispatchKey

from . import _meta_fns as mf
from . import _meta_shape as ms
from ._cpu_kernels import generic_kernel, register_cpu_kernel
from ._cpu_reductions import (
    COMPLEX_CHARS,
    FLOAT_CHARS,
    INT_CHARS,
    REAL_CHARS,
    register_cpu_reduction,
    ufunc_reduction,
)
from ._decl import CATALOGUE, OpInfo, SampleInput, defop, register_leaf
from ._promotion import astype_as_pytorch
from ._samples import make_array, unary_samples
from .elementwise import ALL, REAL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

_ALIASES = {"dim": "axis", "keepdim": "keepdims"}


_axis = mf.backend_axis  # Note [Axes of 0-d tensors] in ops/_meta_fns.py


def _reduce_meta_to(dtype):
    def meta(x, axis=None, keepdims=False, **kwargs):
        shape, _ = mf.reduction(x, axis, keepdims)
        return shape, dtype
    return meta


_SAMPLES = unary_samples(None, kwargs=({}, {"axis": 0}, {"axis": -1, "keepdims": True}))
_NONEMPTY = lambda dtype, rng: [s for s in _SAMPLES(dtype, rng)  # noqa: E731
                                if s.args[0].size and (s.kwargs.get("axis") is None or
                                                       s.args[0].shape[s.kwargs["axis"]])]


def _arg_extreme(name):
    def impl(xp, x, axis=None, keepdims=False):
        mf.check_nonempty(name, x.shape, axis)
        r = getattr(xp, name)(x, axis=_axis(name, x.ndim, axis), keepdims=keepdims)
        # with keepdims and no axis, PyTorch keeps every dimension (size 1)
        if keepdims and axis is None and x.ndim:
            r = xp.reshape(r, (1,) * x.ndim)
        return r if str(r.dtype).endswith("int64") else xp.astype(r, xp.int64)
    impl.__name__ = name
    return impl


_argmax, _argmin = _arg_extreme("argmax"), _arg_extreme("argmin")


def _np_arg_extreme(method):
    def compute(x, axis, keepdims):
        return method(x, axis, None, keepdims=True) if keepdims else method(x, axis)
    return compute


def _argext_meta(x, axis=None, keepdims=False):
    if keepdims and axis is None:
        return (1,) * x.ndim, dt.int64
    return mf.reduction(x, axis, keepdims)[0], dt.int64


for _n, _f in (("argmax", _argmax), ("argmin", _argmin)):
    defop(f"{_n}(Tensor self, int? axis=None, bool keepdims=False) -> Tensor", impl=_f,
          meta=_argext_meta, methods=(_n,), kwarg_aliases=_ALIASES, accepts="iuf",
          info=OpInfo(ref=lambda x, axis=None, keepdims=False, _f=_f: _f(np, x, axis, keepdims),
                      dtypes=REAL, samples=_NONEMPTY, differentiable=False))
    # See Note [CPU reduction kernels] in ops/_cpu_reductions.py: ndarray.argmax gives int64
    # indices, and keeps every dimension with keepdims and no axis, as PyTorch
    register_cpu_reduction(CATALOGUE[f"aten::{_n}"].functional[0],
                           _np_arg_extreme(getattr(np.ndarray, _n)), INT_CHARS + FLOAT_CHARS)


_np_count = _np_multiarray.count_nonzero


def _count_nonzero(xp, x, axis=None, keepdims=False):
    return xp.count_nonzero(x, axis=_axis("count_nonzero", x.ndim, axis), keepdims=keepdims)


def _np_count_nonzero(xp, x, axis=None, keepdims=False):
    # See Note [NumPy fast impls] in ops/_decl.py: of the whole tensor, NumPy's C count as
    # a 0-d int64 array (np.count_nonzero and array-api-compat's wrapper are Python
    # functions); along axes, the impl
    if axis is None and not keepdims:
        return np.array(_np_count(x), np.int64)
    return _count_nonzero(xp, x, axis, keepdims)


defop("count_nonzero(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor",
      impl=_count_nonzero, cpu_impl=_np_count_nonzero, meta=_reduce_meta_to(dt.int64),
      methods=("count_nonzero",),
      kwarg_aliases=_ALIASES,
      info=OpInfo(ref=lambda x, axis=None, keepdims=False: np.asarray(
          np.count_nonzero(x, axis=axis, keepdims=keepdims)), dtypes=ALL, samples=_SAMPLES,
          differentiable=False))


def _nonzero(xp, x):
    if x.ndim == 0:
        raise ValueError("nonzero: zero-dimensional tensors are not supported (Array API)")
    return tuple(xp.nonzero(x))


def _np_nonzero(xp, x):
    # See Note [NumPy fast impls] in ops/_decl.py: the ndarray's own nonzero (C; the generic
    # impl goes through array-api-compat's Python wrapper)
    if x.ndim == 0:
        _nonzero(xp, x)  # raises the op's error
    return list(x.nonzero())


defop("nonzero(Tensor self) -> Tensor[]", impl=lambda xp, x: list(_nonzero(xp, x)),
      cpu_impl=_np_nonzero,
      tags=("dynamic_output_shape",),
      info=OpInfo(ref=lambda x: list(np.nonzero(x)), dtypes=ALL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),))],
                  differentiable=False))


def _argwhere(xp, x):
    """PyTorch's ``argwhere``/``Tensor.nonzero()``: the indices of the nonzero elements as
    the rows of an ``(n, ndim)`` int64 tensor (Note [Torch methods] in ops/_methods.py)."""
    if x.ndim == 0:
        n = 1 if bool(x) else 0
        return xp.zeros((n, 0), dtype=xp.int64)
    idx = [i if str(i.dtype).endswith("int64") else xp.astype(i, xp.int64)
           for i in xp.nonzero(x)]
    return xp.stack(idx, axis=1)


def _np_argwhere(xp, x):
    """The CPU impl of argwhere (Note [NumPy fast impls] in ops/_decl.py): ``np.nonzero``'s
    index arrays as the rows of one array, transposed into a C-contiguous result, where the
    generic impl's ``xp.stack`` goes through Python-level wrappers (about 10 us on 16x16);
    writing each into a column of the result costs 1.2K instructions more on 2x3."""
    if x.ndim == 0:
        return _argwhere(xp, x)
    # (the method: np.nonzero's wrappers cost 0.4 us)
    return np.array(x.nonzero(), _INT64).T.copy()


_INT64 = np.dtype(np.int64)


defop("argwhere(Tensor self) -> Tensor", impl=_argwhere, cpu_impl=_np_argwhere,
      tags=("dynamic_output_shape",),
      methods=("argwhere", "nonzero"),  # x.nonzero() is PyTorch's, md.nonzero the standard's
      info=OpInfo(ref=lambda x: np.argwhere(x), dtypes=ALL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),)),
                                          SampleInput((make_array((), d, rng),))],
                  differentiable=False))


def _searchsorted(xp, sorted_sequence, x, side="left", sorter=None):
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    out = xp.searchsorted(sorted_sequence, x, side=side, sorter=sorter)
    # The default indexing dtype (JAX returns int32).
    return out if str(out.dtype).endswith("int64") else xp.astype(out, xp.int64)


def _ss_samples(dtype, rng):
    s = np.sort(make_array((6,), dtype, rng))
    return [SampleInput((s, make_array((3,), dtype, rng))),
            SampleInput((s, make_array((3,), dtype, rng)), {"side": "right"})]


_ss = defop("searchsorted(Tensor sorted_sequence, Tensor self, *, str side=\"left\", "
      "Tensor? sorter=None) -> Tensor", impl=_searchsorted,
      meta=lambda s, x, **k: (tuple(x.shape), dt.int64),
      info=OpInfo(ref=lambda s, x, side="left": np.searchsorted(s, x, side=side), dtypes=REAL,
                  samples=_ss_samples, differentiable=False))


def _check_axis(name, axis, ndim) -> None:
    """An out-of-range ``axis`` is mdtensor's IndexError naming the op, whatever the
    backend would raise (JAX: ValueError)."""
    n = ndim or 1
    if not -n <= axis < n:
        mf.normalize_axes(name, axis, ndim)  # raises


def _sort(xp, x, axis=-1, descending=False, stable=True):
    n = x.ndim or 1
    if not -n <= axis < n:  # _check_axis, inline
        _check_axis("sort", axis, x.ndim)
    if not x.ndim:  # Note [Axes of 0-d tensors] in ops/_meta_fns.py
        return xp.asarray(x, copy=True)
    return xp.sort(x, axis=axis, descending=descending, stable=stable)


def _argsort(xp, x, axis=-1, descending=False, stable=True):
    n = x.ndim or 1
    if not -n <= axis < n:  # _check_axis, inline
        _check_axis("argsort", axis, x.ndim)
    if not x.ndim:  # Note [Axes of 0-d tensors] in ops/_meta_fns.py
        return xp.zeros((), dtype=xp.int64)
    return xp.argsort(x, axis=axis, descending=descending, stable=stable)


def _sort_meta(name, dtype=None):
    def meta(x, axis=-1, *args, **kwargs):
        _check_axis(name, axis, x.ndim)
        return tuple(x.shape), dtype or x.dtype
    return meta


def _sort_ref(x, axis=-1, descending=False, stable=True):
    out = np.sort(x, axis=axis, kind="stable")
    return np.flip(out, axis=axis) if descending else out


def _argsort_ref(x, axis=-1, descending=False, stable=True):
    # Stable descending order keeps equal elements in their original order (Array API),
    # which is not the reverse of the stable ascending order.
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return np.flip(x.shape[axis] - 1 - idx, axis)


def _sort_dim(xp, x, dim=-1, descending=False, *, stable=None):
    """PyTorch's sort: ``(values, indices)``, stable (a valid answer for any ``stable``)."""
    if x.ndim == 0:
        _check_axis("sort", dim, 0)
        return x, xp.zeros((), dtype=xp.int64)
    idx = _argsort(xp, x, dim, descending)
    return xp.take_along_axis(x, idx, axis=dim), idx


def _sort_dim_meta(x, dim=-1, *args, **kwargs):
    _check_axis("sort", dim, x.ndim)
    return (tuple(x.shape), x.dtype), (tuple(x.shape), dt.int64)


_SORT_SAMPLES = unary_samples(None, kwargs=({}, {"descending": True}))
# Note [Torch methods] in ops/_methods.py: md.sort(x) / md.sort(x, axis=...) are the Array
# API's (values); x.sort(), md.sort(x, 1), md.sort(x, dim=1) PyTorch's ((values, indices)).
_d = defop("sort(Tensor self, *, int axis=-1, bool descending=False, bool stable=True) "
           "-> Tensor", impl=_sort, meta=_sort_meta("sort"), methods=("sort",),
           method_overloads=("dim",), accepts="biuf",
           info=OpInfo(ref=_sort_ref, dtypes=REAL,
                       samples=lambda d, rng: [s for s in _SORT_SAMPLES(d, rng)
                                               if s.args[0].ndim]))
defop("sort.dim(Tensor self, int dim=-1, bool descending=False, *, bool? stable=None) -> "
      "(Tensor values, Tensor indices)", impl=_sort_dim, meta=_sort_dim_meta, decl=_d)
defop("argsort(Tensor self, int axis=-1, bool descending=False, *, bool stable=True)"
      " -> Tensor", impl=_argsort, accepts="biuf",
      meta=_sort_meta("argsort", dt.int64), methods=("argsort",),
      kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=_argsort_ref, dtypes=REAL, differentiable=False,
                  samples=lambda d, rng: [s for s in _SORT_SAMPLES(d, rng) if s.args[0].ndim]))

_UNIQUE = lambda d, rng: [SampleInput((np.asarray(  # noqa: E731
    make_array((7,), d, rng)[[0, 1, 0, 2, 1, 3, 0]]),))]
defop("unique_values(Tensor self) -> Tensor", impl=lambda xp, x: xp.unique_values(x),
      tags=("dynamic_output_shape",),
      info=OpInfo(ref=lambda x: np.unique(x), dtypes=REAL, samples=_UNIQUE,
                  differentiable=False))
defop("unique_counts(Tensor self) -> (Tensor values, Tensor counts)",
      impl=lambda xp, x: tuple(xp.unique_counts(x)), tags=("dynamic_output_shape",),
      info=OpInfo(ref=lambda x: tuple(np.unique(x, return_counts=True)), dtypes=REAL,
                  samples=_UNIQUE, differentiable=False))
defop("unique_inverse(Tensor self) -> (Tensor values, Tensor inverse_indices)",
      impl=lambda xp, x: tuple(xp.unique_inverse(x)), tags=("dynamic_output_shape",),
      info=OpInfo(ref=lambda x: tuple(np.unique(x, return_inverse=True)), dtypes=REAL,
                  samples=_UNIQUE, differentiable=False))
defop("unique_all(Tensor self) -> (Tensor values, Tensor indices, Tensor inverse_indices, "
      "Tensor counts)", impl=lambda xp, x: tuple(xp.unique_all(x)),
      tags=("dynamic_output_shape",),
      info=OpInfo(ref=lambda x: tuple(np.unique(x, return_index=True, return_inverse=True,
                                                return_counts=True)), dtypes=REAL,
                  samples=_UNIQUE, differentiable=False))


# Note [Sets on NumPy]
# ~~~~~~~~~~~~~~~~~~~~
# The CPU kernels of the unique_* functions are ``np.unique``'s own computation without its
# Python-level layers (16x16: 5-17 us there, and array-api-compat's on top): the flat copy
# sorted as np.unique sorts it (``sort`` for the values alone, an ``argsort`` -- stable where
# first indices are wanted -- otherwise), a mask of the first of each run of equal values
# (``!=``, so each NaN is a value of its own, as the Array API and np.unique_values say),
# the first indices, the inverse as the running count of runs put back in place, and the
# counts as the distances between the runs' starts.  The same algorithm and sorts as NumPy's
# give the same results, signed zeros included.


def _np_unique(x, index=False, inverse=False, counts=False):
    flat = x.reshape(-1)
    n = flat.size
    if not n:
        return None
    if index or inverse:
        order = flat.argsort(kind="stable" if index else "quicksort")
        s = flat[order]
    else:
        s = flat.copy()
        s.sort()
    # first[:n]: the first of each run; first[n] marks the end, so that the runs' starts
    # and the end are one nonzero() (the counts: their differences)
    first = np.empty(n + 1, dtype=bool)
    first[0] = first[n] = True
    np.not_equal(s[1:], s[:-1], first[1:n])
    head = first[:n]
    out = [s[head]]
    if index:
        out.append(order[head])
    if counts:
        bounds = first.nonzero()[0]
        runs = np.subtract(bounds[1:], bounds[:-1])
    if inverse:  # each element's run: the count of runs started after the first
        first[0] = False
        inv = np.empty(n, dtype=np.intp)
        inv[order] = np.add.accumulate(head, 0, np.intp)
        out.append(inv.reshape(x.shape))
    if counts:
        out.append(runs)
    return tuple(out) if len(out) > 1 else out[0]


for _n, _kw in (("unique_values", {}), ("unique_counts", {"counts": True}),
                ("unique_inverse", {"inverse": True}),
                ("unique_all", {"index": True, "inverse": True, "counts": True})):
    register_cpu_kernel(CATALOGUE[f"aten::{_n}"].functional[0],
                        lambda x, _kw=_kw: _np_unique(x, **_kw), REAL_CHARS)


def _np_searchsorted_kernel(op):
    """The CPU kernel of searchsorted: ndarray.searchsorted for a 1-D sorted sequence of
    the values' dtype (Note [CPU reduction kernels] in ops/_cpu_reductions.py)."""
    generic = generic_kernel(op)
    wanted = frozenset(REAL_CHARS)

    def kernel(sorted_sequence, x, *, side="left", sorter=None):
        a, v = sorted_sequence._data, x._data
        if (sorter is None and a.ndim == 1 and a.dtype == v.dtype and a.dtype.char in wanted
                and side in ("left", "right") and sorted_sequence._device is x._device):
            return x._device.wrap(a.searchsorted(v, side))
        return generic(sorted_sequence, x, side=side, sorter=sorter)

    kernel.__qualname__ = kernel.__name__ = f"cpu[{op.schema.full_name}]"
    return kernel


register_leaf(_ss.functional[0], _np_searchsorted_kernel(_ss.functional[0]), DispatchKey.CPU)


def _all(xp, x, axis=None, keepdims=False):
    return xp.all(x, axis=_axis("all", x.ndim, axis), keepdims=keepdims)


def _any(xp, x, axis=None, keepdims=False):
    return xp.any(x, axis=_axis("any", x.ndim, axis), keepdims=keepdims)


for _n, _f, _u in (("all", _all, np.logical_and), ("any", _any, np.logical_or)):
    _d = defop(f"{_n}(Tensor self, int[1]? axis=None, bool keepdims=False) -> Tensor",
               impl=_f, meta=_reduce_meta_to(dt.bool_), methods=(_n,), kwarg_aliases=_ALIASES,
               info=OpInfo(ref=lambda x, axis=None, keepdims=False, _n=_n: np.asarray(
                   getattr(np, _n)(x, axis=axis, keepdims=keepdims)), dtypes=ALL,
                   samples=_SAMPLES, differentiable=False))
    # See Note [CPU reduction kernels] in ops/_cpu_reductions.py: NumPy's logical reductions
    # give bools for every real dtype
    register_cpu_reduction(_d.functional[0], ufunc_reduction(_u), REAL_CHARS)


def _diff(xp, x, axis=-1, n=1, prepend=None, append=None):
    ms.diff(mf.ArraySpec(x), axis, n,  # the Meta kernel's named errors
            prepend=None if prepend is None else mf.ArraySpec(prepend),
            append=None if append is None else mf.ArraySpec(append))
    kw = {}
    if prepend is not None:
        kw["prepend"] = prepend
    if append is not None:
        kw["append"] = append
    return xp.diff(x, axis=axis, n=n, **kw)


defop("diff(Tensor self, int axis=-1, int n=1, *, Tensor? prepend=None, Tensor? append=None)"
      " -> Tensor", impl=_diff, meta=ms.diff, methods=("diff",), kwarg_aliases={"dim": "axis"},
      info=OpInfo(ref=lambda x, axis=-1, n=1: np.diff(x, n=n, axis=axis), dtypes=REAL,
                  samples=lambda d, rng: [SampleInput((make_array((4, 5), d, rng),)),
                                          SampleInput((make_array((4, 5), d, rng), 0, 2))]))


def _np_diff(x, axis=-1, n=1, *, prepend=None, append=None):
    # the first difference, without np.diff's Python-level wrapper (Note [CPU reduction
    # kernels] in ops/_cpu_reductions.py); bools (not_equal in NumPy) take the generic kernel
    if n != 1 or prepend is not None or append is not None or not x.shape[axis]:
        return None
    head = (slice(None),) * (axis + x.ndim if axis < 0 else axis)
    return np.subtract(x[head + (slice(1, None),)], x[head + (slice(None, -1),)])


register_cpu_kernel(CATALOGUE["aten::diff"].functional[0], _np_diff, INT_CHARS + FLOAT_CHARS +
                    COMPLEX_CHARS)


# -- dtype conversion ---------------------------------------------------------------------


def _astype(xp, x, dtype, *, copy=True, device=None):
    target = dt.as_dtype(dtype)
    if target.kind != "c" and dt.as_dtype(x.dtype).kind == "c":
        return astype_as_pytorch(xp, x, target)  # the real part (PyTorch, NumPy)
    native = getattr(xp, target.name, None)
    if native is None:  # array_api_strict has no bfloat16
        raise TypeError(f"astype: the backend of this tensor has no {target.name}")
    return xp.astype(x, native, copy=copy)


def _np_astype(xp, x, dtype, *, copy=True, device=None):
    """The CPU impl of astype (Note [NumPy fast impls] in ops/_decl.py): ``ndarray.astype``
    to the target's NumPy dtype, where the generic impl resolves the dtype twice and calls
    array-api-compat's wrapper (``md.astype`` of 2x3 float32 to float64: 36.6K -> 20.2K
    instructions, the generic impl's import of ``native_dtype`` gone too).  For one of
    the standard dtypes (bfloat16 is a ``_LazyDType``), a real ``x`` (a complex one takes
    PyTorch's real part) and no ``device=``, whose check is the wrapper's."""
    if type(dtype) is dt.DType and x.dtype.kind != "c" and device is None:
        return x.astype(dtype.numpy) if copy is True else x.astype(dtype.numpy, copy=copy)
    return _astype(xp, x, dtype, copy=copy, device=device)


defop("astype(Tensor self, ScalarType dtype, *, bool copy=True, Device? device=None)"
      " -> Tensor", impl=_astype, cpu_impl=_np_astype, meta=lambda x, dtype, **k: (tuple(x.shape),
                                                              dt.as_dtype(dtype)),
      methods=("astype",),
      info=OpInfo(ref=lambda x, d: x.astype(dt.as_dtype(d).numpy), dtypes=REAL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),
                                                       dt.float64))]))
defop("searchsorted.Scalar(Tensor sorted_sequence, Scalar self, *, str side=\"left\", "
      "Tensor? sorter=None) -> Tensor",
      impl=lambda xp, s, x, side="left", sorter=None: _searchsorted(
          xp, s, xp.asarray(x, dtype=s.dtype), side=side, sorter=sorter),
      meta=lambda s, x, **k: ((), dt.int64), decl=_ss)
