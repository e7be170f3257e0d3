"""The differential suite's table, continued: the everyday kit of issue 30 (filling,
stacking, statistics, scatters, special functions, ...).  Imported by ``_reference_ops``,
whose ``REFS`` and ``EXCLUDED`` these rows join."""

from __future__ import annotations

import math

import numpy as np
from _reference_ops import ALL, NUMERIC, REAL, Sample, arrays, elements, pairs, ref, unary
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__: list[str] = []


# -- filling ---------------------------------------------------------------------------------


@st.composite
def _fill_sample(draw):
    x = draw(arrays(ALL))
    kind = x.dtype.kind
    value = draw(st.booleans() if kind == "b" else st.integers(-3, 3) if kind in "iu"
                 else st.sampled_from([1.5, -0.0, float("inf"), 2]))
    return Sample((x, value))


# PyTorch has no derivative for a value's change, and fill's gradient of self is zero
ref("fill", lambda lib, x, v: x.clone().fill_(v), lambda lib, x, v: x.clone().fill_(v),
    _fill_sample())


@st.composite
def _fill_tensor_sample(draw):
    """A tensor and a 0-d value tensor of its dtype, or a real one (converted as PyTorch
    converts it: a float into an int tensor truncates).  A real value filled into a complex
    tensor gets the real part of its gradient, where PyTorch's backward raises (the
    difference ``real-inputs-of-complex-results``)."""
    x = draw(arrays(ALL))
    kinds = [x.dtype.name] + ([] if x.dtype.kind == "b" else ["float64", "int64"])
    v = draw(arrays(ALL, shape=(), dtype=st.sampled_from(kinds), special=False))
    return Sample((x, v))


ref("fill", lambda lib, x, v: x.clone().fill_(v), lambda lib, x, v: x.clone().fill_(v),
    _fill_tensor_sample(), name="fill.Tensor")
ref("zero", lambda lib, x: x.clone().zero_(), lambda lib, x: x.clone().zero_(), unary(ALL))
ref("ravel", lambda lib, x: lib.ravel(x), lambda lib, x: lib.ravel(x), unary(ALL))


# -- joining ---------------------------------------------------------------------------------


@st.composite
def _same_shapes(draw, max_dims=3):
    """One to three tensors of one shape (now and then one of another shape), of one dtype
    or mixed."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=3))
    k = draw(st.integers(1, 3))
    d1 = draw(st.sampled_from(ALL))
    out = []
    for i in range(k):
        s = shape
        if i and draw(st.integers(0, 7)) == 0:
            s = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=3))
        d = d1 if draw(st.integers(0, 3)) else draw(st.sampled_from(ALL))
        out.append(draw(hnp.arrays(np.dtype(d), s, elements=elements(d))))
    return Sample((out,))


for _n in ("hstack", "vstack", "dstack", "column_stack"):
    ref(_n, lambda lib, ts, _n=_n: getattr(lib, _n)(ts),
        lambda lib, ts, _n=_n: getattr(lib, _n)(ts), _same_shapes())


# -- closeness -------------------------------------------------------------------------------


@st.composite
def _close_sample(draw):
    s = draw(pairs(ALL, scalars=False, same_dtype=draw(st.integers(0, 9)) > 0))
    a, b = s.args
    if draw(st.booleans()) and a.shape == b.shape and a.dtype == b.dtype:
        b = a.copy()  # close and equal values, not only far ones
    kw = draw(st.sampled_from([{}, {"rtol": 0.5}, {"atol": 1.0}, {"equal_nan": True},
                               {"rtol": 0.0, "atol": 0.0}]))
    return Sample((a, b), kw)


ref("isclose", lambda lib, a, b, **k: lib.isclose(a, b, **k),
    lambda lib, a, b, **k: lib.isclose(a, b, **k), _close_sample(), grad=False)
ref("allclose", lambda lib, a, b, **k: lib.asarray(lib.allclose(a, b, **k)) if lib.__name__
    == "mdtensor" else lib.tensor(lib.allclose(a, b, **k)),
    lambda lib, a, b, **k: lib.tensor(lib.allclose(a, b, **k)), _close_sample(), grad=False)


# -- scatters --------------------------------------------------------------------------------


@st.composite
def _scatter_sample(draw, dtypes=ALL, value=False, reduce=False):
    """``(self, dim, index, src)``: an index no larger than src, nor than self off dim, with
    values in range (now and then one out of range, a mismatched dtype or an int32 index)."""
    x = draw(arrays(dtypes, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1,
                                                    max_side=4)))
    nd = max(x.ndim, 1)
    xs = x.shape or (1,)
    dim = draw(st.integers(-nd, nd - 1))
    d = dim % nd
    ishape = tuple(draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, 4)) if i == d
                   else draw(st.integers(1, xs[i])) for i in range(nd))
    hi = xs[d] - 1 if draw(st.integers(0, 14)) else xs[d]
    index = draw(hnp.arrays(np.int64, ishape, elements=st.integers(0, hi)))
    if draw(st.integers(0, 19)) == 0:
        index = index.astype(np.int32)
    if x.ndim == 0 and draw(st.booleans()):
        index = index.reshape(()) if index.size == 1 else index
    if value:
        v = draw(st.booleans() if x.dtype.kind == "b" else st.integers(-3, 3)
                 if x.dtype.kind in "iu" else st.sampled_from([1.5, -2.0, float("nan")]))
        return Sample((x, dim, index, v))
    sshape = tuple(k + draw(st.integers(0, 1)) for k in index.shape) if index.ndim else ()
    sd = x.dtype if draw(st.integers(0, 14)) else np.dtype(draw(st.sampled_from(dtypes)))
    src = draw(hnp.arrays(sd, sshape, elements=elements(sd.name)))
    if reduce:
        return Sample((x, dim, index, src, draw(st.sampled_from(
            ["sum", "prod", "mean", "amax", "amin"]))), {"include_self": draw(st.booleans())})
    return Sample((x, dim, index, src))


def _unique_positions(s: Sample) -> bool:
    """Whether no two elements of the index write one position (scatter's gradient, as
    PyTorch's formula, assumes so)."""
    x, dim, index = s.args[:3]
    nd = max(x.ndim, 1)
    idx = index.reshape(index.shape or (1,))
    grid = np.indices(idx.shape)
    grid[dim % nd] = idx
    flat = grid.reshape(nd, -1).T
    return len({tuple(r) for r in flat.tolist()}) == flat.shape[0]


ref("scatter", lambda lib, x, d, i, s: lib.scatter(x, d, i, s),
    lambda lib, x, d, i, s: lib.scatter(x, d, i, s),
    _scatter_sample().filter(_unique_positions), name="scatter.src")
ref("scatter", lambda lib, x, d, i, v: lib.scatter(x, d, i, v),
    lambda lib, x, d, i, v: lib.scatter(x, d, i, v), _scatter_sample(value=True),
    name="scatter.value")
ref("scatter_add", lambda lib, x, d, i, s: lib.scatter_add(x, d, i, s),
    lambda lib, x, d, i, s: lib.scatter_add(x, d, i, s), _scatter_sample(NUMERIC))
ref("scatter_reduce", lambda lib, x, d, i, s, r, **k: lib.scatter_reduce(x, d, i, s, r, **k),
    lambda lib, x, d, i, s, r, **k: lib.scatter_reduce(x, d, i, s, r, **k),
    _scatter_sample(("int64", "float32", "float64"), reduce=True))


@st.composite
def _index_sample(draw, dtypes=ALL, fill=False):
    """``(self, dim, index, source)`` of index_add/index_copy (``value`` for index_fill)."""
    x = draw(arrays(dtypes, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1,
                                                    max_side=4)))
    nd = max(x.ndim, 1)
    xs = list(x.shape or (1,))
    dim = draw(st.integers(-nd, nd - 1))
    d = dim % nd
    n = draw(st.integers(0, 4))
    hi = xs[d] - 1 if draw(st.integers(0, 14)) else xs[d]
    index = draw(hnp.arrays(draw(st.sampled_from([np.int64, np.int64, np.int32])), (n,),
                            elements=st.integers(0, hi)))
    if fill:
        v = draw(st.booleans() if x.dtype.kind == "b" else st.integers(-3, 3)
                 if x.dtype.kind in "iu" else st.sampled_from([1.5, -2.0]))
        return Sample((x, dim, index, v))
    sshape = list(xs)
    sshape[d] = n if draw(st.integers(0, 14)) else n + 1
    src = draw(hnp.arrays(x.dtype, tuple(sshape) if x.ndim else (), elements=elements(
        x.dtype.name))) if x.ndim or n == 1 else draw(hnp.arrays(x.dtype, tuple(sshape),
                                                                 elements=elements(
                                                                     x.dtype.name)))
    return Sample((x, dim, index, src))


def _unique_index(s: Sample) -> bool:
    i = s.args[2]
    return len(set(i.tolist())) == i.size


ref("index_add", lambda lib, x, d, i, s: lib.index_add(x, d, i, s),
    lambda lib, x, d, i, s: lib.index_add(x, d, i, s), _index_sample(NUMERIC))
ref("index_add", lambda lib, x, d, i, s: lib.index_add(x, d, i, s, alpha=2),
    lambda lib, x, d, i, s: lib.index_add(x, d, i, s, alpha=2), _index_sample(NUMERIC),
    name="index_add-alpha")
ref("index_copy", lambda lib, x, d, i, s: lib.index_copy(x, d, i, s),
    lambda lib, x, d, i, s: lib.index_copy(x, d, i, s),
    _index_sample().filter(_unique_index))
ref("index_fill", lambda lib, x, d, i, v: lib.index_fill(x, d, i, v),
    lambda lib, x, d, i, v: lib.index_fill(x, d, i, v), _index_sample(fill=True))


# -- order statistics ------------------------------------------------------------------------


def _valid_dim(x, draw):
    n = max(x.ndim, 1)
    return draw(st.integers(-n, n - 1) | st.sampled_from([n]))


@st.composite
def _k_sample(draw, dtypes, k_from=0, keepdim=False, extra=()):
    x = draw(arrays(dtypes, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                    max_side=4)))
    dim = _valid_dim(x, draw)
    size = (x.shape or (1,))[dim] if -max(x.ndim, 1) <= dim < max(x.ndim, 1) else 1
    k = draw(st.integers(min(k_from, size), size) | st.sampled_from([size + 1]))
    kw = {}
    if keepdim and draw(st.booleans()):
        kw["keepdim"] = True
    for name, values in extra:
        if draw(st.booleans()):
            kw[name] = draw(st.sampled_from(values))
    return Sample((x, k, dim), kw)


def _via_gather(fn):
    """``(values, the elements of x at indices)``: the indices of equal values may differ
    (PyTorch's order of ties is unspecified), the elements they point to may not."""
    def call(lib, x, *a, **k):
        values, indices = fn(lib, x, *a, **k)
        if x.ndim == 0:
            return values, lib.reshape(x, ()) if lib.__name__ == "torch" else x
        dim = a[1] if len(a) > 1 else k.get("dim", -1)  # (k, dim)
        keep = k.get("keepdim", False) if fn is _kth else True  # topk keeps every dim
        idx = indices if keep else lib.unsqueeze(indices, dim)
        picked = lib.gather(x, dim, idx)
        return values, picked if keep else lib.squeeze(picked, dim)
    return call


def _kth(lib, x, k, dim=-1, **kw):
    return lib.kthvalue(x, k, dim, **kw)


ref("topk", _via_gather(lambda lib, x, k, dim=-1, **kw: lib.topk(x, k, dim, **kw)),
    _via_gather(lambda lib, x, k, dim=-1, **kw: lib.topk(x, k, dim, **kw)),
    _k_sample(REAL, extra=(("largest", [False]),)))
ref("kthvalue", _via_gather(_kth), _via_gather(_kth),
    _k_sample(("int64", "float32", "float64"), k_from=1, keepdim=True))
ref("median", lambda lib, x: lib.median(x), lambda lib, x: lib.median(x),
    unary(("int64", "float32", "float64"), shape=hnp.array_shapes(
        min_dims=0, max_dims=3, min_side=1, max_side=4)))


@st.composite
def _median_dim_sample(draw):
    x = draw(arrays(("int64", "float32", "float64")))
    return Sample((x, _valid_dim(x, draw)), {"keepdim": draw(st.booleans())})


ref("median", lambda lib, x, d, **k: lib.median(x, d, **k)[0],
    lambda lib, x, d, **k: lib.median(x, d, **k)[0], _median_dim_sample(), name="median.dim")


@st.composite
def _quantile_sample(draw):
    x = draw(arrays(("float32", "float64"), special=draw(st.booleans())))
    if draw(st.booleans()):
        q = draw(st.floats(0, 1) | st.sampled_from([-0.5, 1.5]))
    else:
        q = draw(hnp.arrays(x.dtype, draw(st.sampled_from([(), (1,), (3,)])),
                            elements=st.floats(0, 1, width=32)))
    kw = {}
    if draw(st.booleans()):
        kw["dim"] = _valid_dim(x, draw)
    if draw(st.booleans()):
        kw["keepdim"] = True
    if draw(st.booleans()):
        kw["interpolation"] = draw(st.sampled_from(["lower", "higher", "midpoint", "nearest"]))
    return Sample((x, q), kw)


ref("quantile", lambda lib, x, q, **k: lib.quantile(x, q, **k),
    lambda lib, x, q, **k: lib.quantile(x, q, **k), _quantile_sample())


@st.composite
def _nan_reduce_sample(draw, dtypes):
    # NaNs and infinities, no huge magnitudes: 1e30 - 1e30 + 1 in float32 depends on the
    # order of the additions, which NumPy's and PyTorch's sums do not share
    d = draw(st.sampled_from(dtypes))
    x = draw(hnp.arrays(np.dtype(d), draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                           max_side=4)),
                        elements=elements(d, magnitudes=False)))
    kw = {}
    if draw(st.booleans()):
        n = max(x.ndim, 1)
        kw["dim"] = draw(st.integers(-n, n - 1))
        if draw(st.booleans()):
            kw["keepdim"] = True
    return Sample((x,), kw)


ref("nansum", lambda lib, x, **k: lib.nansum(x, **k), lambda lib, x, **k: lib.nansum(x, **k),
    _nan_reduce_sample(("float32", "float64", "int64")))
ref("nanmean", lambda lib, x, **k: lib.nanmean(x, **k),
    lambda lib, x, **k: lib.nanmean(x, **k), _nan_reduce_sample(("float32", "float64")))


@st.composite
def _scan_sample(draw, dtypes):
    x = draw(arrays(dtypes))
    return Sample((x, _valid_dim(x, draw)))


for _n in ("cummax", "cummin"):
    ref(_n, lambda lib, x, d, _n=_n: getattr(lib, _n)(x, d),
        lambda lib, x, d, _n=_n: getattr(lib, _n)(x, d), _scan_sample(REAL))
ref("logcumsumexp", lambda lib, x, d: lib.logcumsumexp(x, d),
    lambda lib, x, d: lib.logcumsumexp(x, d), _scan_sample(("float32", "float64")))


# -- two-dimensional FFTs ----------------------------------------------------------------------


@st.composite
def _fft2_sample(draw):
    x = draw(arrays(("float32", "float64", "complex64", "complex128"), special=False,
                    shape=hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=4)))
    kw = {}
    if draw(st.booleans()):
        n = x.ndim
        kw["axes"] = tuple(draw(st.lists(st.integers(-n, n - 1), min_size=2, max_size=2,
                                         unique_by=lambda v: v % n)))
    if draw(st.booleans()):
        kw["s"] = tuple(draw(st.integers(1, 4)) for _ in range(2))
    if draw(st.booleans()):
        kw["norm"] = draw(st.sampled_from(["ortho", "forward"]))
    return Sample((x,), kw)


for _n in ("fft2", "ifft2", "rfft2", "irfft2"):
    ref(f"fft_{_n}", lambda lib, x, _n=_n, **k: getattr(lib.fft, _n)(x, **k),
        lambda lib, x, _n=_n, axes=(-2, -1), **k: getattr(lib.fft, _n)(x, dim=axes, **k),
        _fft2_sample(), tol=10)


# -- PyTorch's overloads of Array API ops ------------------------------------------------------


@st.composite
def _round_sample(draw):
    x = draw(arrays(("float32", "float64"), lo=-1000, hi=1000))
    return Sample((x,), {"decimals": draw(st.integers(-3, 3))})


ref("round", lambda lib, x, **k: lib.round(x, **k), lambda lib, x, **k: lib.round(x, **k),
    _round_sample(), grad=False, name="round.decimals")
ref("where", lambda lib, c: lib.where(c), lambda lib, c: lib.where(c),
    arrays(("bool",), shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0,
                                              max_side=4)).map(lambda c: Sample((c,))),
    grad=False, name="where.cond")


# -- norms ----------------------------------------------------------------------------------------


@st.composite
def _norm_sample(draw):
    x = draw(arrays(("float32", "float64"), special=False,
                    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)))
    n = x.ndim
    kind = draw(st.sampled_from(["none", "vector", "matrix"] if n >= 2 else ["none", "vector"]))
    if kind == "none":
        return Sample((x,), {"keepdim": draw(st.booleans())})
    if kind == "vector":
        return Sample((x, draw(st.sampled_from([1, 2, 3, float("inf"), float("-inf"), 0])),
                       draw(st.integers(-n, n - 1))), {"keepdim": draw(st.booleans())})
    dims = tuple(draw(st.lists(st.integers(-n, n - 1), min_size=2, max_size=2,
                               unique_by=lambda v: v % n)))
    return Sample((x, draw(st.sampled_from(["fro", "nuc", 1, -1, float("inf")])), dims),
                  {"keepdim": draw(st.booleans())})


ref("linalg_norm", lambda lib, x, *a, **k: lib.linalg.norm(x, *a, **k),
    lambda lib, x, *a, **k: lib.linalg.norm(x, *a, **k), _norm_sample(), tol=10)


# -- padding -------------------------------------------------------------------------------------


@st.composite
def _pad_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0,
                                                 max_side=4)))
    mode = draw(st.sampled_from(["constant", "constant", "reflect", "replicate", "circular"]))
    k = draw(st.integers(1, min(x.ndim, 3) if mode != "constant" else x.ndim + 1))
    pad = tuple(draw(st.integers(-2 if mode == "constant" else -1, 4)) for _ in range(2 * k))
    if draw(st.integers(0, 14)) == 0:
        pad = pad[:-1]
    kw = {}
    if mode == "constant" and draw(st.booleans()):
        kw["value"] = draw(st.booleans() if x.dtype.kind == "b" else st.integers(-3, 3))
    return Sample((x, pad, mode), kw)


def _torch_pad(lib, x, pad, mode="constant", **kw):
    return lib.nn.functional.pad(x, pad, mode, **kw)


ref("pad", lambda lib, x, pad, mode="constant", **kw: lib.pad(x, pad, mode, **kw), _torch_pad,
    _pad_sample())


# -- diagonals and triangles ----------------------------------------------------------------------


@st.composite
def _diagonal_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0,
                                                 max_side=4)))
    n = x.ndim
    return Sample((x, draw(st.integers(-4, 4)), draw(st.integers(-n, n - 1)),
                   draw(st.integers(-n, n - 1))))


ref("diagonal", lambda lib, x, o, a, b: lib.diagonal(x, o, a, b),
    lambda lib, x, o, a, b: lib.diagonal(x, o, a, b), _diagonal_sample())


@st.composite
def _diag_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                 max_side=4)))
    return Sample((x, draw(st.integers(-4, 4))))


ref("diag", lambda lib, x, k: lib.diag(x, k), lambda lib, x, k: lib.diag(x, k), _diag_sample())
for _n in ("tril_indices", "triu_indices"):
    ref(_n, lambda lib, r, c, o, _n=_n: getattr(lib, _n)(r, c, o),
        lambda lib, r, c, o, _n=_n: getattr(lib, _n)(r, c, o),
        st.builds(lambda r, c, o: Sample((r, c, o)), st.integers(0, 5), st.integers(0, 5),
                  st.integers(-6, 6)), grad=False)


# -- floating values ------------------------------------------------------------------------------


@st.composite
def _nan_to_num_sample(draw):
    x = draw(arrays(ALL))
    kw = {}
    for name in ("nan", "posinf", "neginf"):
        if draw(st.booleans()):
            kw[name] = draw(st.sampled_from([0.0, -1.5, 7.0]))
    return Sample((x,), kw)


ref("nan_to_num", lambda lib, x, **k: lib.nan_to_num(x, **k),
    lambda lib, x, **k: lib.nan_to_num(x, **k), _nan_to_num_sample())
ref("angle", lambda lib, x: lib.angle(x), lambda lib, x: lib.angle(x), unary(NUMERIC))


# -- special functions ---------------------------------------------------------------------------

for _n in ("erfc", "lgamma", "digamma"):
    ref(_n, lambda lib, x, _n=_n: getattr(lib, _n)(x), lambda lib, x, _n=_n: getattr(lib, _n)(x),
        unary(ALL))
ref("erfinv", lambda lib, x: lib.erfinv(x), lambda lib, x: lib.erfinv(x),
    unary(ALL, lo=-1.0, hi=1.0))
ref("polygamma", lambda lib, n, x: lib.polygamma(n, x), lambda lib, n, x: lib.polygamma(n, x),
    st.builds(lambda n, s: Sample((n, *s.args)), st.integers(0, 4), unary(REAL)))


# -- least squares -------------------------------------------------------------------------------


@st.composite
def _lstsq_sample(draw):
    """``(A, B)``: tall, wide, square and empty matrices, a batch now and then, B a matrix
    or a vector, each driver that returns the rank."""
    d = draw(st.sampled_from(("float32", "float64", "complex64", "complex128")))
    lead = tuple(draw(st.lists(st.integers(1, 2), max_size=1)))
    m, n = draw(st.integers(0, 4)), draw(st.integers(0, 4))
    a = draw(hnp.arrays(np.dtype(d), lead + (m, n), elements=elements(d, special=False)))
    # (PyTorch's batches of B that broadcast against A's give odd shapes when empty)
    bshape = lead + (m,) if draw(st.booleans()) else lead + (m, draw(st.integers(0, 3)))
    b = draw(hnp.arrays(np.dtype(d), bshape, elements=elements(d, special=False)))
    drivers = [{}, {"driver": "gelsy"}]
    if min(b.shape[-2:]) if b.ndim > len(lead) + 1 else b.shape[-1]:  # (PyTorch's gelsd and
        drivers += [{"driver": "gelsd"}, {"driver": "gelss"}]     # gelss fail on empty B)
    return Sample((a, b), draw(st.sampled_from(drivers)))


def _np_lstsq(a, b, driver=None):
    """NumPy's lstsq (LAPACK's gelsd) per matrix, with PyTorch's outputs for ``driver``
    (the rows of the differences table compare with it)."""
    vector = b.ndim == a.ndim - 1
    bm = b[..., None] if vector else b
    batch, (m, n), k = a.shape[:-2], a.shape[-2:], bm.shape[-1]
    x = np.zeros(batch + (n, k), a.dtype)
    rank = np.zeros(batch, np.int64)
    for i in np.ndindex(*batch):
        if min(m, n, k):
            x[i], _, rank[i], _ = np.linalg.lstsq(a[i], bm[i])
    real = np.abs(x).dtype
    return [x[..., 0] if vector else x, np.zeros(0, real), rank, np.zeros(0, real)]


ref("linalg_lstsq", lambda lib, a, b, **k: lib.linalg.lstsq(a, b, **k),
    lambda lib, a, b, **k: lib.linalg.lstsq(a, b, **k), _lstsq_sample(), tol=1e3,
    numpy=_np_lstsq)


# -- distances -----------------------------------------------------------------------------------


@st.composite
def _cdist_sample(draw):
    """Two batches of rows (batch dimensions that broadcast, now and then mismatched columns
    or dtypes), each p PyTorch special-cases and one it does not.  No matrix products (they
    cancel differently: a unit test compares them)."""
    d = draw(st.sampled_from(("float32", "float64", "float64", "int64")))
    d2 = d if draw(st.integers(0, 9)) else draw(st.sampled_from(("float32", "float64")))
    lead = tuple(draw(st.lists(st.integers(1, 2), max_size=2)))
    m = draw(st.integers(0, 3))
    m2 = m if draw(st.integers(0, 9)) else draw(st.integers(0, 3))
    x1 = draw(hnp.arrays(np.dtype(d), lead + (draw(st.integers(0, 4)), m),
                         elements=elements(d)))
    x2 = draw(hnp.arrays(np.dtype(d2), lead[draw(st.integers(0, len(lead))):] +
                         (draw(st.integers(0, 4)), m2), elements=elements(d2)))
    kw = {"p": draw(st.sampled_from([0.0, 1.0, 2.0, 3.0, 0.5, math.inf]))}
    if draw(st.booleans()):
        kw["compute_mode"] = "donot_use_mm_for_euclid_dist"
    return Sample((x1, x2), kw)


def _np_cdist(a, b, p=2.0, compute_mode=None):
    diff = np.abs(a[..., :, None, :] - b[..., None, :, :])
    if p == math.inf:
        return [diff.max(-1) if diff.shape[-1] else diff.sum(-1)]
    return [(np.minimum(np.ceil(diff), 1) if p == 0 else diff ** p).sum(-1) ** (
        1.0 if p == 0 else 1.0 / p)]


ref("cdist", lambda lib, a, b, **k: lib.cdist(a, b, **k),
    lambda lib, a, b, **k: lib.cdist(a, b, **k), _cdist_sample(), numpy=_np_cdist)


# -- histograms ----------------------------------------------------------------------------------


@st.composite
def _bincount_sample(draw):
    """Non-negative integers (now and then a negative one, a float or 2-d tensor), with
    weights of any dtype now and then, and a minlength."""
    d = draw(st.sampled_from(("int64", "int32", "uint8", "int64", "float32", "bool")))
    shape = (draw(st.integers(0, 6)),) if draw(st.integers(0, 9)) else (1, 2)
    lo = -1 if draw(st.integers(0, 9)) == 0 else 0
    x = draw(hnp.arrays(np.dtype(d), shape, elements=elements(d, special=False, lo=lo, hi=6)))
    kw = {}
    if draw(st.booleans()):
        wd = draw(st.sampled_from(("float32", "float64", "int64", "bool", "complex64")))
        n = shape[-1] if draw(st.integers(0, 9)) else shape[-1] + 1
        kw["weights"] = draw(hnp.arrays(np.dtype(wd), (n,), elements=elements(wd)))
    if draw(st.booleans()):
        kw["minlength"] = draw(st.integers(-1, 8))
    return Sample((x,), kw)


ref("bincount", lambda lib, x, **k: lib.bincount(x, **k),
    lambda lib, x, **k: lib.bincount(x, **k), _bincount_sample())


@st.composite
def _histc_sample(draw):
    x = draw(arrays(("float32", "float64", "float64", "int64")))
    kw = {"bins": draw(st.sampled_from([1, 3, 4, 7, 100, 0]))}
    if draw(st.booleans()):
        lo = draw(st.sampled_from([-4.0, -1.5, 0.0, 2.0, 0.1]))
        kw.update(min=lo, max=lo + draw(st.sampled_from([0.0, 1.0, 2.5, 8.0, -1.0])))
    return Sample((x,), kw)


ref("histc", lambda lib, x, **k: lib.histc(x, **k), lambda lib, x, **k: lib.histc(x, **k),
    _histc_sample(), grad=False)
