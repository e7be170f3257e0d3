"""The Array API namespace of the Dask backend: ``array_api_compat.dask.array``, completed.

array-api-compat wraps ``dask.array`` as an Array API namespace, but leaves gaps that the
generic kernels would fall into: functions Dask lacks (``take_along_axis``, most of
``linalg``), a few that answer differently from NumPy (``linalg.cholesky`` returns the
upper factor, ``linalg.inv`` computes float32 in float64, ``linalg.svd`` refuses
``full_matrices=True``), ``reshape(copy=False)`` (it sets ``shape`` on the array), and
results of unknown size.  ``namespace`` is that namespace with those filled in; everything
else is array-api-compat's.  It is imported by the backend when it loads (it imports Dask).

Note [Broadcasts stay small]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``broadcast_to`` gives one chunk along each dimension it adds or stretches, whatever the
chunks of the arrays the result will meet; Dask then rechunks it (split and merge tasks,
a full-size copy) in every elementwise op with a chunked partner.  Gradients meet this
constantly: the backward of ``mean``, ``sum`` and of a broadcast operand expands a small
gradient to a large shape, then multiplies it with large, chunked arrays.  So a broadcast
made here remembers what it broadcasts (its *source*), and the elementwise functions
below compute with the sources of such operands wherever broadcasting the other operands
reaches the same result shape (``f(broadcast_to(g, s), y) = f(g, y)`` when ``y.shape ==
s``), and otherwise on the sources alone, broadcasting the small result
(``broadcast_to(g, s) / n = broadcast_to(g / n, s)``).  The values are the same; the
rechunks and the full-size intermediates are gone (a logistic-regression gradient step
lost 2 tasks per chunk), and the elementwise work on a broadcast happens once, on its
source.  Other functions receive the broadcast array itself.

Note [Dask linear algebra]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Dask has blocked algorithms for products (``matmul``, ``tensordot``, ``vecdot``) and for
the QR and SVD of tall-and-skinny matrices (TSQR): those stay Dask's, and scale past
memory.  The other linear-algebra functions work on whole matrices: each one runs
NumPy's (array-api-compat's NumPy function, the CPU backend's own) on every matrix of a
batch with ``dask.array.apply_gufunc``, which puts the last two dimensions of each input in
one chunk and keeps the batch dimensions chunked.  So a batch of matrices is computed in
parallel, chunk by chunk, and the answer is the CPU backend's to the last bit; one matrix
must fit in memory (docs/SCALE.md, "What does not scale").  A singular matrix raises
when the values are computed, with the CPU backend's ValueError (the namespace says
``computes_lazily``, so the catalogue reads no value at the call: Note [Singular matrices]
in ops/linalg.py).

Note [Data-dependent shapes on Dask]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``nonzero``, ``unique_*``, boolean-mask indexing and ``repeat`` by an array of counts have
sizes that depend on the values.
Dask gives such results unknown (NaN) chunk sizes, and by Dask's rules an array of
unknown sizes must have them computed (``compute_chunk_sizes()``) before anything that
needs its shape.  A tensor always has a shape (autograd, broadcasting checks, views and
``Tensor.shape`` need it), so these functions apply that rule at once: the sizes are
computed when the op is called (one pass over the graph feeding it, on the scheduler
``md.dask.use`` chose), while the values stay lazy.  They are the only ops that compute
while a Dask program is being built.
"""

from __future__ import annotations

import math
import types

import array_api_compat.dask.array as _compat
import array_api_compat.numpy as _np_xp
import dask.array as da
import numpy as np

__all__ = ["namespace"]


def _reshape(x, /, shape, *, copy=None):
    """NumPy's ``reshape``, for any chunks.

    ``copy=False`` asks for no copy: a Dask array is immutable and reshaped lazily, so no
    reshape copies anything (array-api-compat's sets ``shape`` on the array, which Dask
    refuses).  Dask reshapes only by merging or splitting dimensions along chunk
    boundaries; other reshapes go through one dimension whose chunks are whole rows of
    the new shape (Dask's own advice: "reshape in multiple passes")."""
    try:
        return _compat.reshape(x, shape)
    except NotImplementedError:
        shape = _resolve(shape, x.size)
        if not x.size:  # nothing to move: one (empty) chunk reshapes freely
            return da.reshape(x.rechunk(-1), shape)
        flat = da.reshape(x, (-1,))
        row = math.prod(shape[1:])
        if row:
            flat = flat.rechunk(max(row, flat.chunksize[0] // row * row))
        return da.reshape(flat, shape)


def _resolve(shape, size: int) -> tuple:
    """``shape`` with its -1 (if any) replaced by the size it stands for."""
    shape = tuple(shape)
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        shape = tuple(size // known if s == -1 else s for s in shape)
    return shape


def _expand_dims(x, /, *, axis=0):
    """One new dimension, by indexing with ``None``: Dask's ``expand_dims`` reshapes,
    and a reshape layer is not fused with the blockwise ops around it, where an indexing
    layer is (one task per chunk less in a gradient through ``matmul``)."""
    if not isinstance(axis, int):
        return _compat.expand_dims(x, axis=axis)
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"axis {axis} is out of bounds for array of dimension {x.ndim + 1}")
    return x[(slice(None),) * (axis % (x.ndim + 1)) + (None,)]


def _on_empty(fn, *arrays, **kwargs):
    """NumPy's ``fn`` on zero-size stand-ins of Dask ``arrays`` (no values to read), its
    results as Dask arrays in one chunk.  For inputs with no elements, where Dask's own
    functions fail or differ from NumPy: ``apply_gufunc`` and "auto" chunks divide by the
    sizes, reductions compute the wrong shape, concatenations have nothing to join,
    products lose their shape checks.  Where one input is empty the results' values do not
    depend on the others' (they are empty, or a function of the shapes alone: ``det`` of a
    0x0 matrix is 1, a product over an empty dimension 0), so the others' stand-ins
    broadcast one element (no memory, whatever their size)."""
    out = fn(*(_stand_in(a) for a in arrays), **kwargs)
    if isinstance(out, tuple):
        return tuple(da.from_array(np.asarray(o), chunks=-1) for o in out)
    return da.from_array(np.asarray(out), chunks=-1)


def _stand_in(a):
    return np.broadcast_to(np.zeros((), a.dtype), a.shape)


def _filled(fn):
    """Dask's ``fn`` (zeros, ones, empty, full); an empty shape in one chunk, as Dask's
    "auto" chunks divide by the size (a ZeroDivisionError for (0, 2) with small chunks)."""

    def create(shape, *args, **kwargs):
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        if 0 in dims:
            kwargs["chunks"] = -1
        return fn(shape, *args, **kwargs)

    create.__name__ = fn.__name__
    return create


def _eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """``eye`` in Dask's "auto" chunks, each block NumPy's ``eye`` of its part of the
    diagonal.  (Dask's own takes the first row block's height as the size of square blocks,
    so a matrix with fewer rows than a block gets a graph that misses blocks: ``eye(1,
    3, k=2)`` in blocks of 2 declares 3 column blocks and builds 2.)"""
    m = n_rows if n_cols is None else n_cols
    dtype = np.dtype(np.float64 if dtype is None else dtype)
    if not (n_rows and m):  # empty ("auto" divides by the size)
        return da.from_array(np.eye(n_rows, m, k=k, dtype=dtype), chunks=-1)

    def block(block_info=None):
        (r0, r1), (c0, c1) = block_info[None]["array-location"]
        return np.eye(r1 - r0, c1 - c0, k=k - (c0 - r0), dtype=dtype)

    return da.map_blocks(block, chunks=da.core.normalize_chunks("auto", (n_rows, m), dtype=dtype),
                         dtype=dtype, meta=np.empty((0, 0), dtype))


def _linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """NumPy's ``linspace`` in Dask's "auto" chunks, each block computed as NumPy computes
    its part (in float64, ``stop`` exact at the end).  Dask's own computes in the result's
    dtype and may miss ``stop``: ``linspace(3.3e15, 1.0, 24)`` in float32 ended at 1.5."""
    work = np.result_type(start, stop, float(num))
    dtype = np.dtype(work if dtype is None else dtype)
    if not num:
        return da.from_array(np.linspace(start, stop, 0, dtype=dtype), chunks=-1)
    div = num - 1 if endpoint else num
    delta = np.asarray(stop, work) - np.asarray(start, work)
    step = delta / div if div > 0 else None

    def block(block_info=None):
        (a, b), = block_info[None]["array-location"]
        y = np.arange(a, b, dtype=work)
        if step is None:
            y = y * delta
        elif step == 0:
            y = y / div * delta
        else:
            y = y * step
        y += start
        if endpoint and num > 1 and b == num:
            y[-1] = stop
        return y.astype(dtype, copy=False)

    return da.map_blocks(block, chunks=da.core.normalize_chunks("auto", (num,), dtype=dtype),
                         dtype=dtype, meta=np.empty((0,), dtype))


def _take(x, indices, /, *, axis=0):
    """Dask's ``take``, except for one index in a Dask array: Dask's indexing then gives
    the result the size of ``x``'s whole axis (``x[i]`` for ``x`` of 3 elements in one
    chunk and ``i`` a Dask array of one says shape (3,) and computes 1), so the index is
    repeated and the result cut to one."""
    if not (isinstance(indices, da.Array) and indices.size == 1 and indices.ndim <= 1):
        return _compat.take(x, indices, axis=axis)
    axis %= x.ndim
    twice = da.concatenate([da.reshape(indices, (1,))] * 2)
    out = _compat.take(x, twice, axis=axis)[(slice(None),) * axis + (slice(0, 1),)]
    return out if indices.ndim else da.squeeze(out, axis=axis)


def _take_along_axis(x, indices, /, *, axis=-1):
    """NumPy's ``take_along_axis``: each lane along ``axis`` in one chunk."""
    if not (x.size and indices.size):
        return _on_empty(np.take_along_axis, x, indices, axis=axis)
    x = da.moveaxis(x, axis, -1)
    indices = da.moveaxis(indices, axis, -1)
    out = da.apply_gufunc(_take_along_last, "(i),(j)->(j)", x, indices,
                          output_dtypes=x.dtype, allow_rechunk=True)
    return da.moveaxis(out, -1, axis)


def _take_along_last(a, i):
    return np.take_along_axis(a, i, axis=-1)


def _check_contracted(x1, x2):
    """NumPy's rule that ``matmul``'s contracted dimensions are equal: Dask's blockwise
    product broadcasts a 1 against any size ((2, 1) @ (2,) gave (2,))."""
    if x1.ndim and x2.ndim:
        k1, k2 = x1.shape[-1], x2.shape[-2 if x2.ndim > 1 else 0]
        if k1 != k2:
            raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension "
                             f"0 (size {k2} is different from {k1})")


def _roll(x, /, shift, *, axis=None):
    """Dask's ``roll``, except of an empty array (Dask's fails: nothing to concatenate)."""
    if not x.size:
        return _on_empty(np.roll, x, shift=shift, axis=axis)
    return _compat.roll(x, shift, axis=axis)


def _keep_dtype(fn):
    """Dask's product ``fn``, cast back to NumPy's result dtype: Dask adds the products of
    its blocks with ``sum``, which widens small integers to int64 (NumPy's int8 @ int8 is
    int8; the wider sum wraps to the same int8 values).  Products with an empty operand are
    NumPy's (``_on_empty``)."""
    name = fn.__name__

    def product(x1, x2, /, **kwargs):
        if name == "matmul":
            _check_contracted(x1, x2)
        if not (x1.size and x2.size):  # Dask's lose the shape checks, tensordot its sizes
            return _on_empty(getattr(_np_xp, name), x1, x2, **kwargs)
        out = fn(x1, x2, **kwargs)
        dtype = np.result_type(x1.dtype, x2.dtype)
        return out if out.dtype == dtype else out.astype(dtype)

    product.__name__ = name
    return product



def _empty_safe(name):
    """Dask's ``name`` (max, min, argmax, argmin), except where it differs from NumPy.  On
    an array with no elements Dask's chunk reductions compute the wrong shape (``max`` of
    (0, 1, 0) along axis 1 gives (1, 0)) or fail, where NumPy returns an empty result of
    the right shape -- NumPy's answer on a zero-size stand-in is used (``_on_empty``)."""
    fn = getattr(_compat, name)

    def reduce(x, /, *, axis=None, keepdims=False):
        if x.size == 0:
            return _on_empty(getattr(_np_xp, name), x, axis=axis, keepdims=keepdims)
        if axis is None and x.ndim > 1 and name.startswith("arg"):
            # Dask's flat arg-reduction of a chunked matrix breaks ties by chunk, not by
            # position ([[5, 4, 8], [8, -6, -7]] in 1x1 chunks: 3, not 2); along one
            # dimension it keeps the first, as NumPy does
            r = fn(da.reshape(x, (-1,)), axis=0)
            return da.reshape(r, (1,) * x.ndim) if keepdims else r
        return fn(x, axis=axis, keepdims=keepdims)

    reduce.__name__ = name
    return reduce


def _distinct_axes(fn):
    """``fn`` refusing a repeated axis as NumPy does (Dask reduces over it once):
    mdtensor's kernels then name the op (Note [Axis errors] in ops/_errors.py)."""

    def reduce(x, /, *args, axis=None, **kwargs):
        if isinstance(axis, tuple) and x.ndim and len({a % x.ndim for a in axis}) < len(axis):
            raise ValueError("duplicate value in 'axis'")
        return fn(x, *args, axis=axis, **kwargs)

    reduce.__name__ = fn.__name__
    return reduce


# ---------------------------------------------------------------------------------------
# Note [Data-dependent shapes on Dask]


def _known_sizes(arrays):
    """``arrays`` (a tuple) with unknown chunk sizes computed, on md.dask's scheduler."""
    from mdtensor import dask as md_dask

    return md_dask.compute_chunk_sizes(*arrays)


def _nonzero(x, /):
    return _known_sizes(tuple(_compat.nonzero(x)))


def _repeat(x, repeats, /, *, axis=None):
    """NumPy's ``repeat``.  Dask repeats by one integer along one axis only: per-element
    counts repeat by taking ``x`` at ``np.repeat(arange(n), counts)``, and counts in an
    array (whose values decide the result's size) are computed at the call."""
    if isinstance(repeats, da.Array):
        from mdtensor import dask as md_dask

        repeats = md_dask.compute_arrays(repeats)[0]
    if not x.size:  # Dask concatenates the repeated chunks: here there are none
        return _on_empty(np.repeat, x, repeats=repeats, axis=axis)
    if axis is None:
        x, axis = da.reshape(x, (-1,)), 0
    counts = np.asarray(repeats)
    if counts.ndim == 0:
        return _compat.repeat(x, int(counts), axis=axis)
    n = x.shape[axis]
    return da.take(x, np.repeat(np.arange(n), np.broadcast_to(counts, (n,))), axis=axis)


def _searchsorted(x1, x2, /, *, side="left", sorter=None):
    """NumPy's ``searchsorted``.  Dask's refuses ``sorter``, which means searching
    ``x1[sorter]`` (``x1`` sorted by it), and fails at compute time for a 0-d ``x2``."""
    if sorter is not None:
        x1 = da.take(x1, sorter)
    if x2.ndim == 0:
        return da.reshape(_compat.searchsorted(x1, x2[None], side=side), ())
    return _compat.searchsorted(x1, x2, side=side)


def _unique_all(x, /):
    return type(r := _compat.unique_all(x))(*_known_sizes(tuple(r)))


def _unique_counts(x, /):
    return type(r := _compat.unique_counts(x))(*_known_sizes(tuple(r)))


def _unique_inverse(x, /):
    return type(r := _compat.unique_inverse(x))(*_known_sizes(tuple(r)))


def _unique_values(x, /):
    return _known_sizes((_compat.unique_values(x),))[0]


# ---------------------------------------------------------------------------------------
# Note [Dask linear algebra]


def _real(dtype):
    return np.empty(0, dtype).real.dtype


def _per_matrix(name, signature, *arrays, dtypes, sizes=None, **kwargs):
    """array-api-compat's NumPy ``linalg.<name>`` on every matrix of ``arrays``."""
    fn = getattr(_np_xp.linalg, name)

    def run(*blocks):
        try:
            out = fn(*blocks, **kwargs)
        except np.linalg.LinAlgError as e:  # raised when computed: the CPU backend's error
            raise ValueError(f"linalg.{name}: {e}") from None
        return tuple(out) if isinstance(out, tuple) else out

    run.__name__ = f"linalg_{name}"
    if not all(a.size for a in arrays):
        return _on_empty(run, *arrays)
    return da.apply_gufunc(run, signature, *arrays, output_dtypes=dtypes,
                           output_sizes=sizes, allow_rechunk=True)


def _tall_skinny(x) -> bool:
    """A 2-D matrix Dask's TSQR takes: at least as many rows as columns, its columns in one
    chunk (rows may be chunked)."""
    return x.ndim == 2 and x.shape[0] >= x.shape[1] and len(x.chunks[1]) == 1


def _cholesky(x, /, *, upper=False):
    return _per_matrix("cholesky", "(i,j)->(i,j)", x, dtypes=x.dtype, upper=upper)


def _cross(x1, x2, /, *, axis=-1):
    dtype = np.result_type(x1.dtype, x2.dtype)
    out = _per_matrix("cross", "(i),(i)->(i)", da.moveaxis(x1, axis, -1),
                      da.moveaxis(x2, axis, -1), dtypes=dtype)
    return da.moveaxis(out, -1, axis)


def _det(x, /):
    return _per_matrix("det", "(i,j)->()", x, dtypes=x.dtype)


def _eigh(x, /):
    w, v = _per_matrix("eigh", "(i,j)->(i),(i,j)", x, dtypes=(_real(x.dtype), x.dtype))
    return _compat.linalg.EighResult(w, v)


def _eigvalsh(x, /):
    return _per_matrix("eigvalsh", "(i,j)->(i)", x, dtypes=_real(x.dtype))


def _eig(x, /):
    dtype = _complex(x.dtype)
    return _per_matrix("eig", "(i,j)->(i),(i,j)", x, dtypes=(dtype, dtype))


def _eigvals(x, /):
    return _per_matrix("eigvals", "(i,j)->(i)", x, dtypes=_complex(x.dtype))


def _complex(dtype):
    """The dtype of ``eig``'s results: complex of ``dtype``'s precision, whatever the
    values (the standard's rule, which array-api-compat's NumPy function follows; NumPy's
    own would be real when every eigenvalue is, which a lazy result could not know)."""
    return np.result_type(dtype, np.complex64)


def _inv(x, /):
    return _per_matrix("inv", "(i,j)->(i,j)", x, dtypes=x.dtype)


def _matrix_norm(x, /, *, keepdims=False, ord="fro"):
    if ord in (2, -2, "nuc"):  # singular values: per matrix (Dask's need one chunked axis)
        r = _per_matrix("matrix_norm", "(i,j)->()", x, dtypes=_real(x.dtype), ord=ord)
        return da.expand_dims(r, (-2, -1)) if keepdims else r
    return _compat.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


def _matrix_power(x, n, /):
    return _per_matrix("matrix_power", "(i,j)->(i,j)", x, dtypes=x.dtype, n=n)


def _matrix_rank(x, /, *, rtol=None):
    return _per_matrix("matrix_rank", "(i,j)->()", x, dtypes=np.int64, rtol=rtol)


def _pinv(x, /, *, rtol=None):
    return _per_matrix("pinv", "(i,j)->(j,i)", x, dtypes=x.dtype, rtol=rtol)


def _qr(x, /, *, mode="reduced"):
    if mode == "reduced" and _tall_skinny(x):
        return _compat.linalg.qr(x)
    m, n = x.shape[-2:]
    k = min(m, n) if mode == "reduced" else m
    q, r = _per_matrix("qr", "(i,j)->(i,k),(k,j)", x, dtypes=(x.dtype, x.dtype),
                       sizes={"k": k}, mode=mode)
    return _compat.linalg.QRResult(q, r)


def _slogdet(x, /):
    sign, logabsdet = _per_matrix("slogdet", "(i,j)->(),()", x,
                                  dtypes=(x.dtype, _real(x.dtype)))
    return _compat.linalg.SlogdetResult(sign, logabsdet)


def _solve(x1, x2, /):
    dtype = np.result_type(x1.dtype, x2.dtype)
    if x1.size and x2.ndim > 1 and not x2.shape[-1]:
        # No right-hand side: an empty result, whatever x1 holds (NumPy factorizes x1
        # first, and raises for a singular one: lazily, that would mean computing x1; the
        # stand-ins of _on_empty would make any x1 singular)
        shape = np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + x2.shape[-2:]
        return da.from_array(np.empty(shape, dtype), chunks=-1)
    if x2.ndim == 1:  # a vector right-hand side (the Array API's one special case)
        return _per_matrix("solve", "(i,j),(j)->(i)", x1, x2, dtypes=dtype)
    return _per_matrix("solve", "(i,j),(j,k)->(i,k)", x1, x2, dtypes=dtype)


def _svd(x, /, *, full_matrices=True):
    if not full_matrices and _tall_skinny(x):
        return _compat.linalg.svd(x, full_matrices=False)
    m, n = x.shape[-2:]
    k = min(m, n)
    sizes = {"k": k, "u": m if full_matrices else k, "v": n if full_matrices else k}
    u, s, vh = _per_matrix("svd", "(i,j)->(i,u),(k),(v,j)", x,
                           dtypes=(x.dtype, _real(x.dtype), x.dtype), sizes=sizes,
                           full_matrices=full_matrices)
    return _compat.linalg.SVDResult(u, s, vh)


def _svdvals(x, /):
    if _tall_skinny(x):
        return _compat.linalg.svd(x, full_matrices=False)[1]
    return _per_matrix("svdvals", "(i,j)->(k)", x, dtypes=_real(x.dtype),
                       sizes={"k": min(x.shape[-2:])})


# ---------------------------------------------------------------------------------------
# FFTs: Dask transforms along an axis held in one chunk (it raises otherwise); the
# transformed axes are rechunked so, the others stay chunked.


def _whole_along(x, axes):
    return x.rechunk({a % x.ndim: -1 for a in axes}) if x.ndim else x


def _fft_along_axis(name):
    fn = getattr(_compat.fft, name)

    def transform(x, /, *, n=None, axis=-1, norm="backward"):
        return fn(_whole_along(x, (axis,)), n=n, axis=axis, norm=norm)

    transform.__name__ = name
    return transform


def _fft_along_axes(name):
    fn = getattr(_compat.fft, name)

    def transform(x, /, *, s=None, axes=None, norm="backward"):
        if axes is None:
            axes = range(x.ndim) if s is None else range(x.ndim - len(s), x.ndim)
        return fn(_whole_along(x, tuple(axes)), s=s, axes=axes, norm=norm)

    transform.__name__ = name
    return transform


# ---------------------------------------------------------------------------------------
# Note [Broadcasts stay small]

_SOURCE = "_mdtensor_broadcast_of"


def _broadcast_to(x, /, shape):
    out = _compat.broadcast_to(x, tuple(shape))
    if out.shape != x.shape:
        setattr(out, _SOURCE, getattr(x, _SOURCE, x))
    return out


def _is_array(a) -> bool:
    return isinstance(a, (da.Array, np.ndarray, np.generic))


def _on_sources(fn):
    def elementwise(*args, **kwargs):
        sources = [getattr(a, _SOURCE, None) for a in args]
        if all(s is None for s in sources):
            return fn(*args, **kwargs)
        shape = np.broadcast_shapes(*(a.shape for a in args if _is_array(a)))
        small = [a if s is None else s for a, s in zip(args, sources)]
        out = fn(*small, **kwargs)
        return out if out.shape == shape else _broadcast_to(out, shape)

    elementwise.__name__ = fn.__name__
    elementwise.__doc__ = fn.__doc__
    return elementwise


# ---------------------------------------------------------------------------------------
# The namespace

#: the standard's elementwise functions, and astype, clip, where (Note [Broadcasts stay
#: small])
_ELEMENTWISE = (
    "abs", "acos", "acosh", "add", "asin", "asinh", "astype", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos", "cosh",
    "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal",
    "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p",
    "log2", "log10", "logaddexp", "logical_and", "logical_not", "logical_or",
    "logical_xor", "maximum", "minimum", "multiply", "negative", "nextafter", "not_equal",
    "positive", "pow", "real", "reciprocal", "remainder", "round", "sign", "signbit", "sin",
    "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc", "where",
)
#: reductions taking a tuple of axes, which must refuse a repeated one
_AXES = ("all", "any", "count_nonzero", "flip", "mean", "prod", "std", "sum", "var")


def _linalg() -> types.SimpleNamespace:
    ns = {n: getattr(_compat.linalg, n) for n in dir(_compat.linalg) if not n.startswith("_")}
    ns.update(cholesky=_cholesky, cross=_cross, det=_det, eigh=_eigh, eigvalsh=_eigvalsh,
              eig=_eig, eigvals=_eigvals, inv=_inv,
              matrix_norm=_matrix_norm, matrix_power=_matrix_power,
              matrix_rank=_matrix_rank, pinv=_pinv, qr=_qr, slogdet=_slogdet, solve=_solve,
              svd=_svd, svdvals=_svdvals)
    return types.SimpleNamespace(**ns)


def _fft() -> types.SimpleNamespace:
    ns = {n: getattr(_compat.fft, n) for n in dir(_compat.fft) if not n.startswith("_")}
    ns.update({n: _fft_along_axis(n) for n in ("fft", "ifft", "rfft", "irfft", "hfft",
                                               "ihfft")})
    ns.update({n: _fft_along_axes(n) for n in ("fftn", "ifftn", "rfftn", "irfftn")})
    return types.SimpleNamespace(**ns)


def _namespace() -> types.SimpleNamespace:
    ns = {n: getattr(_compat, n) for n in _compat.__all__}
    ns.update({n: _on_sources(ns[n]) for n in _ELEMENTWISE})
    ns.update({n: _keep_dtype(ns[n]) for n in ("matmul", "tensordot", "vecdot")})
    ns.update({n: _empty_safe(n) for n in ("argmax", "argmin", "max", "min")})
    ns.update({n: _filled(ns[n]) for n in ("zeros", "ones", "empty", "full")})
    ns.update({n: _distinct_axes(ns[n]) for n in _AXES + ("max", "min")})
    ns["computes_lazily"] = True  # Note [Singular matrices] in ops/linalg.py
    ns.update(reshape=_reshape, expand_dims=_expand_dims, broadcast_to=_broadcast_to, eye=_eye,
              take_along_axis=_take_along_axis, nonzero=_nonzero, repeat=_repeat,
              searchsorted=_searchsorted, linspace=_linspace, take=_take, roll=_roll,
              unique_all=_unique_all,
              unique_counts=_unique_counts, unique_inverse=_unique_inverse,
              unique_values=_unique_values, linalg=_linalg(), fft=_fft())
    return types.SimpleNamespace(**ns)


#: the Dask backend's ``namespace()``
namespace = _namespace()
