"""Creation functions (Array API) and torch-style factories.

Note [Default dtypes]
~~~~~~~~~~~~~~~~~~~~~
As in PyTorch, the default floating dtype is float32 and the default integer dtype int64
(``md.zeros(3)`` is float32, ``md.arange(3)`` int64, ``md.asarray([1.0])`` float32).
``__array_namespace_info__().default_dtypes()`` reports them; ``md.set_default_dtype``
changes the floating one (and the complex one with it: Note [The default dtype] in
mdtensor/_dtypes.py), which the factories read at each call.
"""

from __future__ import annotations

import functools
import math

import numpy as np_

from mdtensor import _dtypes as dt
from mdtensor.dispatch.kernel import with_array_call
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import namespaces as md_ops

from ._factory import deffactory

__all__: list[str] = []

_TAIL = "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"


def _shape(size):
    if isinstance(size, int) or hasattr(size, "__index__") and not hasattr(size, "__len__"):
        return (int(size),)
    return tuple(int(s) for s in size)


def _check_shape(op, shape):
    """``shape`` (an int or a sequence of ints) as a tuple of ints, for op ``op``: a float
    dimension is a TypeError (JAX and the loopback truncated 2.5 to 2), a negative one a
    ValueError."""
    if type(shape) is not tuple:
        if isinstance(shape, (list, tuple)):
            shape = tuple(shape)
        elif hasattr(shape, "__index__") and not hasattr(shape, "__len__"):
            shape = (shape,)
        else:
            raise TypeError(f"{op}: expected a shape (an int or a sequence of ints), got "
                            f"{type(shape).__name__}")
    for s in shape:
        if type(s) is not int and (isinstance(s, bool) or not hasattr(s, "__index__")):
            raise TypeError(f"{op}: expected a shape of ints, got {shape!r}")
        if s < 0:
            raise ValueError(f"{op}: negative dimension {s} in shape {shape}")
    return shape


def _fill_meta(op):
    def meta(shape, *args, dtype=None, **kwargs):
        return _check_shape(op, shape), dt.as_dtype(dtype) if dtype is not None \
            else dt.get_default_dtype()
    return meta


def _zeros(xp, shape, *, dtype=None, device=None):
    return xp.zeros(_check_shape("zeros", shape), dtype=dtype or _default(xp),
                    device=device)


def _ones(xp, shape, *, dtype=None, device=None):
    return xp.ones(_check_shape("ones", shape), dtype=dtype or _default(xp), device=device)


def _empty(xp, shape, *, dtype=None, device=None):
    return xp.empty(_check_shape("empty", shape), dtype=dtype or _default(xp),
                    device=device)


def _np_fill(fn_name):
    """NumPy's own ``zeros``/``ones``/``empty`` (array-api-compat wraps them to check
    ``device=``, a third of the call on small shapes); ``xp`` is NumPy here."""
    if fn_name == "ones":  # np.ones is Python (empty + copyto): empty + fill is C only
        def impl(np, shape, *, dtype=None, device=None):
            out = _np_empty(_check_shape(fn_name, shape),
                            dtype=dtype or dt.get_default_dtype().numpy)
            out.fill(1)
            return out
        return impl
    fill = getattr(np_, fn_name)

    def impl(np, shape, *, dtype=None, device=None):
        return fill(_check_shape(fn_name, shape), dtype=dtype or dt.get_default_dtype().numpy)
    return impl


_np_empty = np_.empty


def _default(xp):
    """The default floating dtype in ``xp`` (Note [Default dtypes])."""
    return getattr(xp, dt.get_default_dtype().name)


deffactory(f"zeros(SymInt[] shape, {_TAIL}) -> Tensor", _zeros, _fill_meta("zeros"),
           cpu_impl=_np_fill("zeros"))
deffactory(f"ones(SymInt[] shape, {_TAIL}) -> Tensor", _ones, _fill_meta("ones"),
           cpu_impl=_np_fill("ones"))
deffactory(f"empty(SymInt[] shape, {_TAIL}) -> Tensor", _empty, _fill_meta("empty"),
           cpu_impl=_np_fill("empty"))


def _scalar_dtype(xp, value):
    if isinstance(value, bool):
        return xp.bool
    if isinstance(value, int):
        return xp.int64
    if isinstance(value, complex):
        return getattr(xp, dt.default_complex_dtype().name)
    return _default(xp)


def _full(xp, shape, fill_value, *, dtype=None, device=None):
    from ._promotion import scalar_into

    # Note [Scalars written into tensors] in ops/_promotion.py, in the given dtype or the
    # default one of the value's kind (1e300 does not fit the default float32)
    dtype = dtype or _scalar_dtype(xp, fill_value)
    fill_value = scalar_into("full", fill_value, dt.as_dtype(dtype))
    return xp.full(_check_shape("full", shape), fill_value, dtype=dtype, device=device)



def _full_meta(shape, fill_value, *, dtype=None, **kwargs):
    size = shape
    if dtype is not None:
        return _check_shape("full", size), dt.as_dtype(dtype)
    kind = {bool: dt.bool_, int: dt.int64, complex: dt.default_complex_dtype()}.get(
        type(fill_value), dt.get_default_dtype())
    return _check_shape("full", shape), kind


deffactory(f"full(SymInt[] shape, Scalar fill_value, {_TAIL}) -> Tensor", _full, _full_meta)


def _arange_count(start, end, step):
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    return max(0, math.ceil((end - start) / step))


def _arange_args(start, end, step):
    if end is None:
        start, end = 0, start
    return start, end, step


def _arange_dtype_is_int(start, end, step):
    return all(isinstance(v, int) for v in (start, end, step) if v is not None)


def _arange(xp, start, stop=None, step=1, *, dtype=None, device=None):
    start, end, step = _arange_args(start, stop, step)
    if dtype is None:
        dtype = xp.int64 if _arange_dtype_is_int(start, end, step) else _default(xp)
    n = _arange_count(start, end, step)
    target = dt.as_dtype(dtype)
    if target.kind in "iu" and (target is not dt.int64 or not all(
            isinstance(v, int) for v in (start, end, step))):
        # PyTorch: n values counted from the given bounds, computed from start and step
        # truncated to integers, and cast (wrapping: arange(-1.5, 1.5, dtype=uint8) is
        # [255, 0, 1]); NumPy computes in floats and refuses what overflows the dtype
        wide = xp.arange(n, dtype=xp.int64, device=device) * int(step) + int(start)
        return xp.astype(wide, dtype)
    return xp.arange(start, end, step, dtype=dtype, device=device)


def _arange_meta(start, stop=None, step=1, *, dtype=None, **kwargs):
    s, e, st = _arange_args(start, stop, step)
    if dtype is None:
        dtype = dt.int64 if _arange_dtype_is_int(s, e, st) else dt.get_default_dtype()
    return (_arange_count(s, e, st),), dt.as_dtype(dtype)


deffactory(f"arange(Scalar start, Scalar? stop=None, Scalar step=1, {_TAIL}) -> Tensor",
           _arange, _arange_meta)


def _linspace(xp, start, stop, num, *, endpoint=True, dtype=None, device=None):
    if num < 0:
        raise ValueError(f"linspace: num must be non-negative, got {num}")
    if dtype is None:
        dtype = getattr(xp, dt.default_complex_dtype().name) if isinstance(
            start, complex) or isinstance(stop, complex) else _default(xp)
    return xp.linspace(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)


def _linspace_meta(start, stop, num, *, endpoint=True, dtype=None, **kwargs):
    if dtype is None:
        dtype = dt.default_complex_dtype() if isinstance(start, complex) or isinstance(
            stop, complex) else dt.get_default_dtype()
    return (num,), dt.as_dtype(dtype)


deffactory("linspace(Scalar start, Scalar stop, int num, *, bool endpoint=True, "
           "ScalarType? dtype=None, Device? device=None, bool requires_grad=False) -> Tensor",
           _linspace, _linspace_meta)


def _eye(xp, n_rows, n_cols=None, *, k=0, dtype=None, device=None):
    _eye_meta(n_rows, n_cols)  # the sizes checked, as on meta
    return xp.eye(n_rows, n_cols, k=k, dtype=dtype or _default(xp), device=device)


def _eye_meta(n_rows, n_cols=None, *, k=0, dtype=None, **kwargs):
    shape = _check_shape("eye", (n_rows, n_rows if n_cols is None else n_cols))
    return shape, dt.as_dtype(dtype or dt.get_default_dtype())


deffactory("eye(int n_rows, int? n_cols=None, *, int k=0, ScalarType? dtype=None, "
           "Device? device=None, bool requires_grad=False) -> Tensor", _eye, _eye_meta)


# ---------------------------------------------------------------------------------------
# *_like, tril/triu, meshgrid, from_dlpack


from ._cpu_kernels import register_cpu  # noqa: E402
from ._decl import OpInfo, SampleInput, defop  # noqa: E402
from ._meta_fns import same as _same_meta  # noqa: E402
from ._samples import make_array  # noqa: E402
from .elementwise import ALL, NUMERIC  # noqa: E402

_LIKE_TAIL = "*, ScalarType? dtype=None, Device? device=None, bool requires_grad=False"


def _like(factory, *extra):
    caller = None

    def explicit(x, *args, dtype=None, device=None, requires_grad=False):
        # The factory's overload itself (each has one): a keyword call of the namespace
        # function would resolve its types first (md.ones_like(x) 15 -> 9 us, 2-core EPYC).
        nonlocal caller
        if caller is None:
            caller = getattr(md_ops.aten, factory).default.caller
        return caller(tuple(x.shape), *args,
                      dtype=dtype if dtype is not None else x.dtype,
                      device=device if device is not None else x._device,
                      requires_grad=requires_grad)
    explicit.__name__ = f"{factory}_like"
    return explicit


def _like_meta(x, *args, dtype=None, **kwargs):
    return tuple(x.shape), dt.as_dtype(dtype) if dtype is not None else x.dtype


def _np_like(factory):
    """The CPU kernel of ``<factory>_like``: NumPy's ``empty_like`` (C; ``np.ones_like`` and
    ``np.zeros_like`` are Python over it) of the same shape, dtype and memory layout, as
    PyTorch's ``preserve_format``; a call with ``dtype=``, ``device=`` or
    ``requires_grad=`` takes the composite.  The engine's root gradient is ``ones_like``
    (as PyTorch's ``_make_grads``): 2.6 -> 1.2 us for a 0-d float32 tensor."""
    explicit = _like(factory)
    empty_like = np_.empty_like

    def kernel(x, **kwargs):
        if kwargs:
            return explicit(x, **kwargs)
        a = empty_like(x._data)
        if factory != "empty":
            a.fill(factory == "ones")
        return x._device.wrap(a)

    def filled_like(x):
        a = empty_like(x)
        a.fill(factory == "ones")
        return a

    def specialize(args, kwargs):  # Note [Array calls] in mdtensor/dispatch/kernel.py
        if kwargs or len(args) != 1:
            return None
        return (empty_like if factory == "empty" else filled_like), args, {}

    kernel.__name__ = f"np_{factory}_like"
    return with_array_call(kernel, specialize)


for _f in ("zeros", "ones", "empty"):
    defop(f"{_f}_like(Tensor self, {_LIKE_TAIL}) -> Tensor", explicit=_like(_f),
          kernels={"CPU": _np_like(_f)}, meta=_like_meta, tags=("factory",))
defop(f"full_like(Tensor self, Scalar fill_value, {_LIKE_TAIL}) -> Tensor",
      explicit=_like("full"), meta=_like_meta, tags=("factory",))


def _tri(name):
    def impl(xp, x, k=0):
        if x.ndim < 2:
            raise ValueError(f"{name}: expected a tensor with at least 2 dimensions, got "
                             f"{x.ndim}")
        return getattr(xp, name)(x, k=k)
    impl.__name__ = name
    return impl


@functools.lru_cache(maxsize=64)
def _tri_mask(name, n, m, k):
    """The read-only boolean mask of the elements ``tril``/``triu`` keep in an (n, m)
    matrix (``np.tri``: j <= i + k)."""
    mask = np_.tri(n, m, k, dtype=bool) if name == "tril" else ~np_.tri(n, m, k - 1,
                                                                         dtype=bool)
    mask.setflags(write=False)
    return mask


#: np.copyto's C function, below its ``__array_function__`` dispatcher (a Python-level
#: frame: 0.17 of the 0.79 us a (3, 4) tril costs); the dispatcher where NumPy has no such
#: attribute.  Only ndarrays reach it.
_np_copyto = getattr(np_.copyto, "_implementation", np_.copyto)


def _np_tri(name):
    """Note [NumPy fast impls] in ops/_decl.py: np.tril/np.triu build their mask and call
    np.where through Python-level wrappers (8 us on a 16x16 matrix); the masks are cached
    and the kept elements copied into zeros."""
    generic = _tri(name)

    def impl(xp, x, k=0):
        if x.ndim < 2 or type(k) is not int:
            return generic(xp, x, k)
        out = np_.zeros(x.shape, x.dtype)
        _np_copyto(out, x, where=_tri_mask(name, x.shape[-2], x.shape[-1], k))
        return out

    impl.__name__ = f"np_{name}"
    return impl


# Note [One-frame tril and triu]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The kernel made from the ``cpu_impl`` is two frames (the fast kernel's and the impl's) and
# forwards ``k=`` through ``**kwargs`` twice.  A CPU kernel written by hand (Note
# [Hand-written CPU kernels] in ops/_cpu_kernels.py) takes ``k`` by name and computes
# ``_np_tri``'s copy into zeros in its own frame for the n-d (n >= 2) tensors and int
# ``k`` it takes; every other call goes to the ``cpu_impl``'s kernel under it.


def _cpu_tri(name):
    def build(generic):
        def kernel(a, *, k=0):
            x = a._data
            shape = x.shape
            if len(shape) >= 2 and type(k) is int:
                out = np_.zeros(shape, x.dtype)
                _np_copyto(out, x, where=_tri_mask(name, shape[-2], shape[-1], k))
                return a._device.wrap(out)
            return generic(a, k=k)
        return kernel
    return build


for _n in ("tril", "triu"):
    _d = defop(f"{_n}(Tensor self, *, int k=0) -> Tensor", impl=_tri(_n), meta=_same_meta,
               cpu_impl=_np_tri(_n),
               methods=(_n,), kwarg_aliases={"diagonal": "k"},
               info=OpInfo(ref=lambda x, k=0, _n=_n: getattr(np_, _n)(x, k=k), dtypes=ALL,
                           samples=lambda d, rng: [
                               SampleInput((make_array((3, 4), d, rng),)),
                               SampleInput((make_array((2, 3, 3), d, rng),), {"k": 1})]))
    register_cpu(_d.functional[0], _cpu_tri(_n), DispatchKey.CPU)


def _meshgrid_meta(tensors, *, indexing="xy"):
    """0-d or 1-d tensors of one dtype (the Array API and PyTorch): one output per input,
    each of the sizes of all (the first two swapped with ``indexing="xy"``)."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    if any(t.ndim > 1 for t in tensors):
        raise ValueError(f"meshgrid: expected 0-d or 1-d tensors, got shapes "
                         f"{[tuple(t.shape) for t in tensors]}")
    if len({t.dtype for t in tensors}) > 1:
        raise TypeError(f"meshgrid: expected tensors of one dtype, got "
                        f"{[t.dtype.name for t in tensors]}")
    sizes = [math.prod(t.shape) if t.ndim else 1 for t in tensors]
    if indexing == "xy" and len(sizes) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    return [(tuple(sizes), t.dtype) for t in tensors]


def _meshgrid(xp, tensors, indexing="xy"):
    from ._meta_fns import ArraySpec

    _meshgrid_meta([ArraySpec(t) for t in tensors], indexing=indexing)
    return tuple(xp.meshgrid(*(xp.reshape(t, (-1,)) for t in tensors), indexing=indexing))


def _np_meshgrid(xp, tensors, indexing="xy"):
    # See Note [NumPy fast impls]: np.meshgrid broadcasts through Python-level wrappers (19 us
    # for two vectors); here each output is its input, laid along its own axis (the first
    # two swapped with "xy"), repeated along each other axis -- ``ndarray.repeat`` makes the
    # array directly
    dtype = tensors[0].dtype if tensors else None
    sizes = []
    for t in tensors:
        if t.ndim > 1 or t.dtype != dtype:
            return _meshgrid(xp, tensors, indexing)  # its errors
        sizes.append(t.size)
    n = len(sizes)
    if indexing == "xy" and n > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
        axes = [1, 0, *range(2, n)]
    elif indexing in ("xy", "ij") and n:
        axes = range(n)
    else:
        return _meshgrid(xp, tensors, indexing)
    if n == 1:  # (nothing to repeat: a copy)
        return (tensors[0].reshape(-1).copy(),)
    shape = [1] * n
    out = []
    for t, a in zip(tensors, axes):
        shape[a] = -1
        o = t.reshape(shape)
        shape[a] = 1
        for j in range(n):
            if j != a:
                o = o.repeat(sizes[j], j)
        out.append(o)
    return tuple(out)


defop("meshgrid(Tensor[] tensors, *, str indexing=\"xy\") -> Tensor[]", impl=_meshgrid,
      cpu_impl=_np_meshgrid,
      star_args=True, meta=_meshgrid_meta,
      info=OpInfo(ref=lambda ts, indexing="xy": list(np_.meshgrid(*ts, indexing=indexing)),
                  dtypes=NUMERIC,
                  samples=lambda d, rng: [SampleInput(([make_array((3,), d, rng),
                                                        make_array((2,), d, rng)],))]))


# Note [lift_fresh]
# ~~~~~~~~~~~~~~~~~
# ``md.asarray``/``md.tensor`` (and the random functions built on them) make a tensor from
# data, which is no op: a dispatch mode would never see it, and FakeTensorMode would leave
# it real.  As PyTorch's ``torch.tensor`` does, such a fresh tensor is passed through
# ``lift_fresh`` (the identity) when a mode is active -- only then: the factory reads the
# thread-local include set for the Python key -- so a mode sees it and may replace it
# (FakeTensorMode returns a fake).


def _lift_fresh(self):
    return self


defop("lift_fresh(Tensor self) -> Tensor", explicit=_lift_fresh, names=(),
      meta=lambda x: (tuple(x.shape), x.dtype))
