"""Linear algebra: matmul and friends (Array API linear algebra functions)."""

from __future__ import annotations

import cmath
import math

import numpy as np
from numpy.linalg import _umath_linalg

from mdtensor import _dtypes as dt
from mdtensor.dispatch.kernel import own_code, with_array_call
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.tensors.tensor import Tensor

from . import _meta_fns as mf
from ._accepted import refuse_bfloat16
from ._cpu_kernels import register_cpu, register_direct
from ._decl import CATALOGUE, OpInfo, SampleInput, defop, register, register_leaf
from ._errors import device_mismatch
from ._linalg_meta import LINALG_METAS
from ._promotion import bfloat16_via_float32, dtype_of
from ._samples import make_array
from .elementwise import FLOATING, NUMERIC, to_float

__all__ = ["LINALG_NAMES", "lapack", "np_vector_norm"]


def _product(xp, a, b):
    """``xp.matmul(a, b)``; bfloat16 operands multiplied as float32 and the product rounded
    (Note [Products of bfloat16])."""
    if dtype_of(a) is dt.bfloat16 and dtype_of(b) is dt.bfloat16:
        f32 = xp.float32
        return xp.astype(xp.matmul(xp.astype(a, f32), xp.astype(b, f32)), a.dtype)
    return xp.matmul(a, b)


_matmul = _product


# Note [Products of bfloat16]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ml_dtypes' ``np.matmul`` of two bfloat16 arrays accumulates in float32 and returns float32
# (``np.dot`` returns bfloat16, also accumulated in float32); PyTorch's product of bfloat16
# tensors is bfloat16, accumulated in float32.  The CPU kernel rounds what ``np.matmul``
# returns back to bfloat16; the generic impl multiplies float32 copies and rounds (Dask
# would otherwise add its blocks' float32 products into bfloat16, which NumPy refuses).


def _matmul_samples(dtype, rng):
    shapes = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
              ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))]
    return [SampleInput((make_array(a, dtype, rng), make_array(b, dtype, rng)),
                        name=f"{a}@{b}") for a, b in shapes]


defop("matmul(Tensor self, Tensor other) -> Tensor", impl=_matmul, structured=True,
      meta=mf.matmul, methods=("matmul",), accepts="iufc",
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_matmul_samples))


# Note [Matrix products through np.dot]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernel of matmul (Note [NumPy fast impls]: array-api-compat wraps matmul).  For
# operands of one or two dimensions whose inner sizes agree, ``np.dot`` computes what
# ``np.matmul`` computes (the same BLAS call for real matrices) without the generalized
# ufunc's set-up: an 8x8 float32 product takes 1.1 us against 2.6 us (NumPy 2.4, one BLAS
# thread).  Batched operands, 0-d ones (``np.dot`` would multiply) and mismatched sizes
# (whose error is matmul's) take ``np.matmul``.  The kernels call the C function behind
# ``np.dot`` (its ``_implementation``, NumPy >= 1.25): ``np.dot`` itself first runs a Python
# dispatcher for ``__array_function__``, which plain ndarrays never need -- 1.2K of the 8.2K
# instructions of an 8x16 @ 16x16 product (cachegrind).

_np_dot = getattr(np.dot, "_implementation", np.dot)
_np_matmul = np.matmul

# Note [Large products through np.matmul]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``np.dot`` zeroes its output before BLAS writes it (``cblas_matrixproduct``), and BLAS
# zeroes it again for ``beta = 0``; ``np.matmul`` leaves it to BLAS.  Where the output is
# in cache the extra memset is lost in the noise, but in a training step every large
# product writes to memory the BLAS call before it pushed out of cache: in the
# 784-256-256-10 MLP step (batch 64) the memset took 2.3% of the step (perf, 32 us of
# 1.38 ms).  Products with at least ``_LARGE`` output elements therefore take
# ``np.matmul``, whose set-up costs ~0.7 us more than ``np.dot``'s: nothing next to a
# product of that size, and most of a tiny one's time.
_LARGE = 4096

#: the dtype kinds the product kernels compute (not bool, nor ml_dtypes' bfloat16, kind 'V':
#: Note [Products of bfloat16])
_PRODUCT_KINDS = "iufc"


_BOOL = np.dtype(bool)


def _cpu_matmul(generic):
    from ._errors import raise_from_backend

    name = "aten::matmul"
    dot, matmul = _np_dot, np.matmul

    def kernel(a, b):
        d = a._device
        if b._device is not d:
            raise device_mismatch(name, d, b._device)
        x, y = a._data, b._data
        if x.dtype is _BOOL and y.dtype is _BOOL:  # refused (Note [Accepted dtypes])
            return generic(a, b)
        if x.dtype is not y.dtype and (x.dtype.kind == "V" or y.dtype.kind == "V"):
            return generic(a, b)  # Note [bfloat16 in the ufunc kernels] (_ufunc_kernels.py)
        try:
            if 0 < x.ndim <= 2 and 0 < y.ndim <= 2 and x.shape[-1] == y.shape[0]:
                if x.ndim == 2 and y.ndim == 2 and x.shape[0] * y.shape[1] >= _LARGE:
                    r = matmul(x, y)  # Note [Large products through np.matmul]
                    # See Note [Products of bfloat16]
                    return d.wrap(r.astype(x.dtype) if x.dtype.kind == "V" else r)
                return d.wrap(dot(x, y))
            r = matmul(x, y)
            return d.wrap(r.astype(x.dtype) if x.dtype.kind == "V" else r)
        except (ValueError, TypeError) as e:  # Note [Errors from the backend]
            raise_from_backend(name, e, (x, y))

    def specialize(args, kwargs):  # Note [Array calls] in mdtensor/dispatch/kernel.py
        if kwargs or len(args) != 2 or any(type(t) is not Tensor for t in args):
            return None
        a, b = args
        x, y = a._data, b._data
        if (a._device is not b._device or x.dtype is _BOOL and y.dtype is _BOOL
                or x.dtype.kind == "V" or y.dtype.kind == "V"):
            return None
        if (0 < x.ndim <= 2 and 0 < y.ndim <= 2 and x.shape[-1] == y.shape[0]
                and not (x.ndim == 2 and y.ndim == 2 and x.shape[0] * y.shape[1] >= _LARGE)):
            return dot, args, {}
        return matmul, args, {}

    kernel.__qualname__ = kernel.__name__ = "cpu[aten::matmul]"
    return with_array_call(kernel, specialize)


_op = CATALOGUE["aten::matmul"].functional[0]
register_leaf(_op, _cpu_matmul(_op.kernels_for(DispatchKey.ArrayAPI)[0].fn),
               DispatchKey.CPU)
del _op


def cpu_kernel(aten_name: str, direct, arity: int = 2) -> None:
    """``register_direct`` (ops/_cpu_kernels.py) for ``aten::<aten_name>`` (Notes [mm, bmm
    and dot on NumPy] and [Linalg on NumPy])."""
    register_direct(CATALOGUE[f"aten::{aten_name}"].functional[0], direct, arity)


# Note [matmul_backward]
# ~~~~~~~~~~~~~~~~~~~~~~
# matmul's gradient as one op, as PyTorch's ``aten::matmul_backward``: both products, and
# only those ``mask`` asks for -- a masked-out gradient is None (PyTorch's undefined
# tensor).  The formula of matmul (ops/products_derivatives.py) calls it when backward
# records nothing (no ``create_graph``): one dispatch, where ``g @ b.mT`` and ``a.mT @ g`` take four
# (two views, two products) -- about 3 us less per matmul in a backward pass on the
# 2-core EPYC, 5% of the 16-16-16-4 MLP training step.  With ``create_graph`` the formula
# keeps composing ``matmul`` and ``matrix_transpose``, whose own formulas give the higher
# derivatives.  The semantics are the composite formula's: vectors are promoted and
# squeezed back, broadcast batch dimensions summed, complex operands conjugated (``g @
# b^H``), and a real operand gets the real part of a complex gradient.


def _mH(xp, x):
    t = xp.matrix_transpose(x)
    return xp.conj(t) if dtype_of(t).kind == "c" else t


def _sum_to(xp, x, shape):
    """``x`` summed over the dimensions it was broadcast along to reach ``shape``."""
    shape = tuple(shape)
    lead = x.ndim - len(shape)
    if lead:
        x = xp.sum(x, axis=tuple(range(lead)))
    ones = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    if ones:
        x = xp.sum(x, axis=ones, keepdims=True)
    return x


def _real_for(xp, gx, x):
    """The real part of a complex gradient ``gx`` of a real argument ``x``."""
    if dtype_of(gx).kind == "c" and dtype_of(x).kind != "c":
        return xp.real(gx)
    return gx


def _check_mask(mask):
    if len(mask) != 2:
        raise ValueError(f"matmul_backward: mask must have 2 entries (one per operand), got "
                         f"{len(mask)}: {tuple(mask)}")


def _vector_product_shape(a, b):
    """The shape of ``a @ b`` for operands of at most two dimensions that fit, else None
    (the common case, without the Meta function's dtype promotion)."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if not (1 <= len(sa) <= 2 and 1 <= len(sb) <= 2) or sa[-1] != sb[0]:
        return None
    return sa[:-1] + sb[1:]


def _check_grad_shape(g, a, b):
    """``g`` has the shape of ``a @ b`` (whose own errors name matmul); arrays or tensors."""
    if _vector_product_shape(a, b) == tuple(g.shape):
        return
    a, b = mf.ArraySpec(a), mf.ArraySpec(b)
    try:
        shape = mf.matmul(a, b)[0]
    except ValueError as e:
        raise ValueError(f"matmul_backward: {e}") from None
    if tuple(g.shape) != tuple(shape):
        raise ValueError(f"matmul_backward: grad_out has shape {tuple(g.shape)}, the product "
                         f"of {tuple(a.shape)} and {tuple(b.shape)} has {tuple(shape)}")


def _matmul_backward(xp, g, a, b, mask):
    _check_mask(mask)
    _check_grad_shape(g, a, b)
    need_a, need_b = mask
    if a.ndim == 1 and b.ndim == 1:  # a dot product: g is 0-d
        return (_real_for(xp, xp.multiply(g, _conj(xp, b)), a) if need_a else None,
                _real_for(xp, xp.multiply(g, _conj(xp, a)), b) if need_b else None)
    a2 = xp.expand_dims(a, axis=0) if a.ndim == 1 else a
    b2 = xp.expand_dims(b, axis=-1) if b.ndim == 1 else b
    g2 = xp.expand_dims(g, axis=-2) if a.ndim == 1 else g
    if b.ndim == 1:
        g2 = xp.expand_dims(g2, axis=-1)
    ga = gb = None
    if need_a:
        ga = _product(xp, g2, _mH(xp, b2))
        if a.ndim == 1:
            ga = xp.squeeze(ga, axis=-2)
        ga = _real_for(xp, _sum_to(xp, ga, a.shape), a)
    if need_b:
        gb = _product(xp, _mH(xp, a2), g2)
        if b.ndim == 1:
            gb = xp.squeeze(gb, axis=-1)
        gb = _real_for(xp, _sum_to(xp, gb, b.shape), b)
    return ga, gb


def _conj(xp, x):
    return xp.conj(x) if dtype_of(x).kind == "c" else x


def _cpu_matmul_backward(generic):
    """The CPU kernel: two real matrices (a layer's weights and activations) take NumPy's
    matmul on transposed views directly; everything else the generic impl."""
    def kernel(g, a, b, mask):
        ad, bd, gd = a._data, b._data, g._data
        d = g._device
        if (len(mask) == 2 and ad.ndim == 2 and bd.ndim == 2 and ad.dtype.kind == "f"
                and bd.dtype.kind == "f" and a._device is d and b._device is d
                and gd.shape == (ad.shape[0], bd.shape[1]) and ad.shape[1] == bd.shape[0]):
            # Note [Matrix products through np.dot], and [Large products through
            # np.matmul]: the gradients have the shapes of a and b
            wrap = d.wrap
            ga = gb = None
            if mask[0]:
                ga = wrap((_np_matmul if ad.size >= _LARGE else _np_dot)(gd, bd.T))
            if mask[1]:
                gb = wrap((_np_matmul if bd.size >= _LARGE else _np_dot)(ad.T, gd))
            return ga, gb
        return generic(g, a, b, mask)

    def specialize(args, kwargs):  # Note [Array calls] in mdtensor/dispatch/kernel.py
        if kwargs or len(args) != 4 or any(type(t) is not Tensor for t in args[:3]):
            return None
        g, a, b, mask = args
        ad, bd, gd = a._data, b._data, g._data
        d = g._device
        if not (len(mask) == 2 and ad.ndim == 2 and bd.ndim == 2 and ad.dtype.kind == "f"
                and bd.dtype.kind == "f" and a._device is d and b._device is d
                and gd.shape == (ad.shape[0], bd.shape[1]) and ad.shape[1] == bd.shape[0]):
            return None
        fa = (_np_matmul if ad.size >= _LARGE else _np_dot) if mask[0] else None
        fb = (_np_matmul if bd.size >= _LARGE else _np_dot) if mask[1] else None
        return _matmul_grads(fa, fb), (g, a, b), {}

    kernel.__qualname__ = kernel.__name__ = "cpu[aten::matmul_backward]"
    return with_array_call(kernel, specialize)


def _matmul_grads(fa, fb):
    """``(g, a, b) -> (ga, gb)`` of two matrices, ``fa``/``fb`` the products of the
    gradients computed (None: not computed)."""
    if fa is not None and fb is not None:
        return lambda g, a, b: (fa(g, b.T), fb(a.T, g))
    if fa is not None:
        return lambda g, a, b: (fa(g, b.T), None)
    if fb is not None:
        return lambda g, a, b: (None, fb(a.T, g))
    return lambda g, a, b: (None, None)


def _matmul_backward_meta(g, a, b, mask):
    def grad_dtype(x, other):  # a real operand gets the real part (as _real_for)
        dt = mf.result_type(g, other)
        return dt if x.dtype.kind == "c" else mf.real_dtype(dt)

    _check_mask(mask)
    _check_grad_shape(g, a, b)
    return ((tuple(a.shape), grad_dtype(a, b)) if mask[0] else None,
            (tuple(b.shape), grad_dtype(b, a)) if mask[1] else None)


def _matmul_backward_ref(g, a, b, mask):
    def real_for(gx, x):
        return gx.real if np.iscomplexobj(gx) and not np.iscomplexobj(x) else gx

    def sum_to(x, shape):
        lead = x.ndim - len(shape)
        x = x.sum(axis=tuple(range(lead))) if lead else x
        ones = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
        return x.sum(axis=ones, keepdims=True) if ones else x

    if a.ndim == 1 and b.ndim == 1:
        return (real_for(g * np.conj(b), a) if mask[0] else None,
                real_for(g * np.conj(a), b) if mask[1] else None)
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g[..., None, :] if a.ndim == 1 else g
    g2 = g2[..., None] if b.ndim == 1 else g2
    ga = g2 @ np.conj(np.swapaxes(b2, -1, -2))
    gb = np.conj(np.swapaxes(a2, -1, -2)) @ g2
    ga = ga[..., 0, :] if a.ndim == 1 else ga
    gb = gb[..., 0] if b.ndim == 1 else gb
    return (real_for(sum_to(ga, a.shape), a) if mask[0] else None,
            real_for(sum_to(gb, b.shape), b) if mask[1] else None)


def _matmul_backward_samples(dtype, rng):
    out = []
    for (sa, sb), mask in zip(
            [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((2, 3, 4), (4, 5)),
             ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (4, 2)), ((2, 3, 4), (4, 5))],
            [(True, True)] * 6 + [(False, True), (True, False)]):
        a, b = make_array(sa, dtype, rng), make_array(sb, dtype, rng)
        g = make_array(np.matmul(a, b).shape, dtype, rng)
        out.append(SampleInput((g, a, b, mask), name=f"{sa}@{sb} mask={mask}"))
    return out


def _matmul_backward_errors():
    from ._decl import ErrorInput

    yield ErrorInput(SampleInput((np.ones((3, 2)), np.ones((3, 4)), np.ones((4, 2)), (True,))),
                     ValueError, "matmul_backward: mask must have 2 entries")


defop("matmul_backward(Tensor grad_out, Tensor self, Tensor other, bool[2] mask)"
      " -> (Tensor, Tensor)", impl=_matmul_backward, meta=_matmul_backward_meta, names=(),
      info=OpInfo(ref=_matmul_backward_ref, dtypes=FLOATING, samples=_matmul_backward_samples,
                  errors=_matmul_backward_errors))
_op = CATALOGUE["aten::matmul_backward"].functional[0]
register_leaf(_op, _cpu_matmul_backward(_op.kernels_for(DispatchKey.ArrayAPI)[0].fn),
               DispatchKey.CPU)
del _op


# ---------------------------------------------------------------------------------------
# The Array API linear-algebra extension (md.linalg), plus tensordot/vecdot/outer.
# Ops live in aten as linalg_<name>; mdtensor/linalg.py exposes them as md.linalg.<name>.

import functools  # noqa: E402
from operator import attrgetter  # noqa: E402

from .elementwise import FLOATS  # noqa: E402

#: md.linalg name -> aten packet name (filled by _linalg below)
LINALG_NAMES: dict[str, str] = {"matmul": "matmul", "matrix_transpose": "matrix_transpose"}


#: ops whose formula the OpInfo sweep gradchecks on its samples (cholesky, eigh and
#: eigvalsh read one triangle of the input; their symmetric gradients are tested on
#: symmetrized inputs in tests/test_autograd_formulas.py)
_WITH_FORMULA = {"inv", "det", "solve", "outer", "vecdot", "trace", "cross", "diagonal",
                 "matrix_norm", "matrix_power", "pinv", "slogdet", "svdvals", "tensordot",
                 "vector_norm"}


#: the functions of square matrices (their first argument): checked before the backend,
#: whose own errors differ (NumPy's LinAlgError, JAX's ValueError, each in its own words)
_SQUARE = {"cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv", "matrix_power",
           "slogdet", "solve"}


def _check_square(name, a) -> None:
    shape = tuple(a.shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"linalg.{name}: expected a square matrix or a batch of square "
                         f"matrices (shape (..., n, n)), got shape {shape}")


#: the functions whose result is floating whatever the input (integer inputs: float32)
_FLOAT_RESULTS = {"cholesky", "det", "eig", "eigh", "eigvals", "eigvalsh", "inv",
                  "matrix_norm", "pinv", "qr", "slogdet", "solve", "svd", "svdvals",
                  "vector_norm"}


#: the linalg functions PyTorch's CPU kernels refuse bfloat16 for (Note [Ops without
#: bfloat16] in ops/_accepted.py)
_NO_BFLOAT16 = frozenset({"cholesky", "det", "eigh", "eigvalsh", "eig", "eigvals", "inv",
                          "matrix_rank", "pinv", "qr", "slogdet", "solve", "svd", "svdvals"})


def _without_bfloat16(op, meta):
    """``meta`` refusing bfloat16 operands first (Note [Ops without bfloat16])."""
    def checked(*args, **kwargs):
        refuse_bfloat16(op, args)
        return meta(*args, **kwargs)
    return checked


def _of_float_inputs(meta):
    """``meta`` of a function whose integer and bool inputs compute in float32 (Note
    [Integer inputs of float functions] in ops/elementwise.py): it sees them as the default
    float dtype."""
    from types import SimpleNamespace

    from mdtensor import _dtypes as dt

    def as_float(a):
        if hasattr(a, "shape") and hasattr(a, "dtype") and \
                dt.as_dtype(a.dtype).kind in "biu":
            return mf.ArraySpec(SimpleNamespace(shape=tuple(a.shape),
                                                dtype=dt.get_default_dtype()))
        return a

    def meta_of_floats(*args, **kwargs):
        return meta(*(as_float(a) for a in args), **kwargs)

    return meta_of_floats


# Note [Singular matrices]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy and PyTorch raise for a singular matrix (inv, solve) or one that is not positive
# definite (cholesky); JAX returns infinities and nans.  So these ops check their result on
# every backend: finite inputs with a non-finite result raise the ValueError NumPy's
# LinAlgError becomes (one isfinite reduction read from the backend per call).  Except on a
# namespace that computes lazily (``xp.computes_lazily``: Dask's), where reading a value at
# the call would compute the whole result: its matrix functions are NumPy's, run per matrix
# when the values are computed, and raise that same ValueError then.
_FAILS_SILENTLY = {"inv": "Singular matrix", "solve": "Singular matrix",
                   "cholesky": "Matrix is not positive definite",
                   "matrix_power": "Singular matrix"}


def _check_finite(xp, name, args, out) -> None:
    arrays = [a for a in args if hasattr(a, "shape")]
    if not math.prod(out.shape) or bool(xp.all(xp.isfinite(out))):
        return
    if all(bool(xp.all(xp.isfinite(a))) for a in arrays):
        raise ValueError(f"linalg.{name}: {_FAILS_SILENTLY[name]}")


def _linalg(name, schema_args, returns="Tensor", *, top_level=False, samples=None, ref=None,
            dtypes=FLOATS, meta=None, xp_fn=None, kwarg_aliases=None, cpu=None):
    """Declare ``linalg.<name>`` (or the top-level ``name``): an impl calling
    ``xp_fn(xp)`` (default ``xp.linalg.<name>``) after the op's checks, and a CPU kernel
    where ``cpu`` is given (Note [Linalg on NumPy])."""
    getter = xp_fn or attrgetter(f"linalg.{name}")
    aten_name = name if top_level else f"linalg_{name}"
    floating = name in _FLOAT_RESULTS
    square = name in _SQUARE
    checks = meta or LINALG_METAS.get(name)
    if name in _NO_BFLOAT16 and checks is not None:
        checks = _without_bfloat16(f"linalg.{name}", checks)
    # the Meta device sees the integers of a float function as float32
    meta = _of_float_inputs(checks) if floating and checks is not None else checks

    def impl(xp, *args, **kwargs):
        if name in _NO_BFLOAT16:
            refuse_bfloat16(f"linalg.{name}", args)
        if square:
            _check_square(name, args[0])
        if floating:  # Note [Integer inputs of float functions] in ops/elementwise.py
            args = [to_float(xp, a) if hasattr(a, "dtype") else a for a in args]
        if checks is not None:  # Note [Linalg checks]
            checks(*(mf.ArraySpec(a) if hasattr(a, "shape") else a for a in args), **kwargs)
        if kwargs.get("rtol") is not None:
            kwargs["rtol"] = _tolerance(aten_name, xp, args[0], kwargs["rtol"])
        try:
            out = getter(xp)(*args, **kwargs)
        except Exception as e:
            if type(e).__name__ != "LinAlgError":  # NumPy's (a singular matrix, ...)
                raise
            raise ValueError(f"linalg.{name}: {e}") from None
        if (name in _FAILS_SILENTLY and not getattr(xp, "computes_lazily", False)
                and not (name == "matrix_power" and args[1] >= 0)):  # powers overflow
            _check_finite(xp, name, args, out)
        return tuple(out) if isinstance(out, tuple) else out

    impl.__name__ = name
    defop(f"{aten_name}({schema_args}) -> {returns}", impl=impl, meta=meta,
          names=(name,) if top_level else (), methods=(), kwarg_aliases=kwarg_aliases,
          accepts="iufc" if name == "vecdot" else None,
          info=OpInfo(ref=ref, dtypes=dtypes, samples=samples,
                      differentiable=name in _WITH_FORMULA) if ref else None)
    if not top_level or name in ("tensordot", "vecdot", "outer"):
        LINALG_NAMES[name] = aten_name
    if cpu is not None:
        cpu_kernel(aten_name, cpu, arity=2 if schema_args.startswith("Tensor self, Tensor") else 1)


# Note [Linalg on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~
# The generic impl of a linear algebra function checks its operands through the Meta
# functions and calls the namespace's function, which on NumPy is array-api-compat's
# wrapper of ``np.linalg``'s Python wrapper: 5-60 us on a 3x3 matrix, most of it Python.
# ``_linalg(cpu=fn)`` gives the op a CPU kernel (Note [NumPy fast impls]): ``fn(*arrays,
# **kwargs)`` computes the common case -- operands of the expected ranks, sizes and
# dtypes -- with NumPy's C functions directly and returns None for anything else, which
# the generic impl then takes (its checks raise the op's errors).  The fast cases give the
# generic impl's results and dtypes (the OpInfo sweep checks both against the reference).


def _np_outer(a, b):
    # A (n, 1) @ (1, m) product is the outer product, computed once per element with no
    # sum (BLAS's beta = 0): NumPy's broadcast multiply costs 0.4 us more to set up on
    # small vectors; large outer products take the multiply, which writes the output once
    if a.ndim == 1 and b.ndim == 1:
        n, m = a.shape[0], b.shape[0]
        if n * m < _LARGE:
            return _np_dot(a.reshape(n, 1), b.reshape(1, m))
        return np.multiply.outer(a, b)
    return None


def _np_vecdot(a, b, axis=-1):
    nd = a.ndim
    if a.shape == b.shape and -nd <= axis < nd and a.dtype != _BOOL:
        return np.vecdot(a, b, axis=axis)
    return None


def _np_tensordot(a, b, axes=2):
    # axes=k: a's last k dimensions against b's first k, one matrix product of the two
    # reshaped operands (what np.tensordot does, less its Python argument handling)
    if type(axes) is not int or not 0 <= axes <= min(a.ndim, b.ndim):
        return None
    sa, sb = a.shape, b.shape
    free_a, free_b = sa[:a.ndim - axes], sb[axes:]
    if sa[a.ndim - axes:] != sb[:axes]:
        return None
    m, n = math.prod(free_a), math.prod(free_b)
    k = math.prod(sb[:axes])
    x, y = a.reshape(m, k), b.reshape(k, n)
    out = _np_matmul(x, y) if m * n >= _LARGE else _np_dot(x, y)
    return out.reshape(free_a + free_b)


# The LAPACK gufuncs behind ``np.linalg`` (Note [Linalg on NumPy]): called as
# ``np.linalg`` calls them -- in double precision (``signature``), the result cast back to
# the input's precision -- with its floating-point error state (``lapack``), except that a
# failure (``invalid``: a singular or indefinite matrix) raises FloatingPointError, which
# sends the call to the generic kernel and its error.  A non-finite result from finite inputs does
# too (Note [Singular matrices]).
_SIGNATURE = {np.dtype(np.float32): ("d", np.dtype(np.float32)),
              np.dtype(np.float64): ("d", np.dtype(np.float64)),
              np.dtype(np.complex64): ("D", np.dtype(np.complex64)),
              np.dtype(np.complex128): ("D", np.dtype(np.complex128))}
_REAL_RESULT = {np.dtype(np.float32): np.dtype(np.float32),
                np.dtype(np.float64): np.dtype(np.float64),
                np.dtype(np.complex64): np.dtype(np.float32),
                np.dtype(np.complex128): np.dtype(np.float64)}
_ERRORS = {"over": "ignore", "divide": "ignore", "under": "ignore", "invalid": "raise"}
# ``with np.errstate(...)`` costs 1.1 us (it builds the state on every entry); the state is
# built once here and set in NumPy's context variable around the call, as errstate does.
# NumPy-internal names: without them, errstate.
try:
    from numpy._core.umath import _extobj_contextvar, _make_extobj

    _LAPACK_STATE = _make_extobj(**_ERRORS)
except (ImportError, TypeError):  # pragma: no cover - another NumPy
    _extobj_contextvar = None


def lapack(fn, *arrays, **kwargs):
    """``fn(*arrays, **kwargs)`` -- a LAPACK gufunc of ``np.linalg`` (``signature=``), or
    another NumPy call -- in that error state, or None where it fails (see above)."""
    if _extobj_contextvar is None:  # pragma: no cover
        try:
            with np.errstate(**_ERRORS):
                return fn(*arrays, **kwargs)
        except FloatingPointError:
            return None
    token = _extobj_contextvar.set(_LAPACK_STATE)
    try:
        return fn(*arrays, **kwargs)
    except FloatingPointError:
        return None
    finally:
        _extobj_contextvar.reset(token)


def _finite(out) -> bool:
    if out.size <= 64:  # a sum of Python numbers: inf and nan propagate, no NumPy call
        return cmath.isfinite(sum(out.ravel().tolist()))
    return bool(np.isfinite(out).all())


def _square_matrix(x):
    """``(LAPACK type letter, result dtype)`` of a non-empty square matrix (or stack) of a
    floating-point or complex dtype, else None."""
    sig = _SIGNATURE.get(x.dtype)
    shape = x.shape
    if sig is None or len(shape) < 2 or shape[-1] != shape[-2] or not x.size:
        return None
    return sig


def _np_square(fn, x):
    """The LAPACK gufunc ``fn`` of a square matrix (or stack) to one of its shape: its
    finite result in ``x``'s precision, or None (Note [Singular matrices])."""
    sig = _square_matrix(x)
    if sig is None:
        return None
    out = lapack(fn, x, signature=f"{sig[0]}->{sig[0]}")
    if out is None or not _finite(out):
        return None
    return out.astype(sig[1], copy=False)


def _np_cholesky(x, upper=False):
    return None if upper is not False else _np_square(_umath_linalg.cholesky_lo, x)


def _np_inv(x):
    return _np_square(_umath_linalg.inv, x)


def _np_solve(a, b):
    sig = _square_matrix(a)
    if sig is None or a.ndim != 2 or b.dtype != a.dtype or not 1 <= b.ndim <= 2 \
            or b.shape[0] != a.shape[0] or not b.size:
        return None
    c = sig[0]
    fn = _umath_linalg.solve1 if b.ndim == 1 else _umath_linalg.solve
    out = lapack(fn, a, b, signature=f"{c}{c}->{c}")
    if out is None or not _finite(out):
        return None
    return out.astype(sig[1], copy=False)


def _np_svdvals(x):
    sig = _SIGNATURE.get(x.dtype)
    if sig is None or x.ndim < 2 or not x.size:
        return None
    out = lapack(_umath_linalg.svd, x, signature=f"{sig[0]}->d")
    if out is None:
        return None
    return out.astype(_REAL_RESULT[x.dtype], copy=False)


def _np_eigvalsh(x):
    sig = _square_matrix(x)
    if sig is None:
        return None
    out = lapack(_umath_linalg.eigvalsh_lo, x, signature=f"{sig[0]}->d")
    return None if out is None else out.astype(_REAL_RESULT[x.dtype], copy=False)


def _np_matrix_rank(x, *, rtol=None):
    # the generic impl's computation (the singular values in the input's precision, the
    # count of those above rtol times the largest) on the LAPACK gufunc; a tensor rtol
    # takes the generic kernel
    if rtol is not None and type(rtol) not in (int, float):
        return None
    s = _np_svdvals(x)
    if s is None:
        return None
    if rtol is None:
        rtol = max(x.shape[-2:]) * np.finfo(s.dtype).eps
    tol = np.multiply(_largest(s, -1, None, None, True), rtol)
    return _sum(np.greater(s, tol), -1, np.int64)


def _np_matrix_power(x, n):
    # Repeated squaring, as the generic impl, without its product by the identity first;
    # n <= 0 (the identity, inverses) takes the generic kernel
    shape = x.shape
    if type(n) is not int or n < 1 or len(shape) < 2 or shape[-1] != shape[-2] \
            or x.dtype.kind not in "iufc":
        return None
    product = _np_dot if len(shape) == 2 else _np_matmul
    result, power = None, x
    while n:
        if n & 1:
            result = power if result is None else product(result, power)
        n >>= 1
        if n:
            power = product(power, power)
    return x.copy() if result is x else result


def _np_pinv(x, rtol=None):
    # np.linalg.pinv's computation with array-api-compat's default tolerance (max(m, n)
    # times the precision's epsilon), for one matrix
    sig = _SIGNATURE.get(x.dtype)
    if sig is None or x.ndim != 2 or not x.size or rtol is not None:
        return None
    c, dtype = sig
    real = _REAL_RESULT[x.dtype]
    a = x.conj() if c == "D" else x
    found = lapack(_umath_linalg.svd_s, a, signature=f"{c}->{c}d{c}")
    if found is None:
        return None
    u, s, vt = (found[0].astype(dtype, copy=False), found[1].astype(real, copy=False),
                found[2].astype(dtype, copy=False))
    cutoff = np.float64(max(x.shape) * float(np.finfo(real).eps)) * np.float64(s[0])
    large = s > cutoff
    s = np.divide(1, s, where=large, out=s)
    s[~large] = 0
    return _np_matmul(vt.T, s[:, None] * u.T)


def _np_norm2(x, axes, keepdims):
    """Note [Scaled norms]'s 2-norm of ``x`` (floating or complex, non-empty) over
    ``axes`` (None: all), as the generic ``_scaled_norm`` computes it, with NumPy's C
    reductions; the one scale of a full reduction checked in Python.  float32 sums its
    squares in double instead, where none can overflow or underflow (as the whole-tensor
    norm below): the same norm, rounded once."""
    if x.dtype == _F32 and axes is not None:
        d = x.astype(np.float64)
        d *= d
        t = _sum(d, axes, None, None, True) if keepdims else _sum(d, axes)
        return np.sqrt(t).astype(_F32)
    a = np.abs(x)
    s = _largest(a, axes, None, None, True)
    if s.size == 1:
        v = s.item()
        if v == 0 or not math.isfinite(v):
            s = np.ones_like(s)
    else:
        s = np.where((s == 0) | ~np.isfinite(s), 1, s).astype(s.dtype, copy=False)
    q = a / s
    q *= q
    r = np.sqrt(_sum(q, axes, None, None, True))
    r *= s
    if keepdims:
        return r
    return r.reshape(()) if axes is None else r.reshape(
        tuple(n for i, n in enumerate(r.shape) if i not in axes))


# The 2-norm of a whole real tensor, where no square can overflow or underflow: the square
# root of one BLAS dot product (float32 in double precision), PyTorch's sum of squares (the
# scaled sum above differs from it in the last bit at most); outside that range, the scaled
# norm.
_SAFE = {np.dtype(np.float32): (1e-30, 1e30), np.dtype(np.float64): (1e-290, 1e290)}


def _np_vector_norm(x, axis=None, keepdims=False, ord=2):  # noqa: A002 (the Array API's)
    nd = x.ndim
    if ord != 2 or type(ord) not in (int, float) or x.dtype.kind not in "fc" or not x.size:
        return None
    if axis is None:
        safe = _SAFE.get(x.dtype)
        if safe is not None:
            xf = x.reshape(-1)
            if x.dtype.itemsize == 4:  # float32 in double: its squares cannot overflow
                xf = xf.astype(np.float64)
                t = _np_dot(xf, xf)
            else:  # (an overflow is inf, silently)
                t = lapack(_np_dot, xf, xf)
            if t is not None and safe[0] < float(t) < safe[1]:
                # sqrt in double, rounded once: exact; a 0-d array made here, where a
                # NumPy scalar would be wrapped through ``asarray`` (1.7K instructions)
                r = math.sqrt(t)
                return np.full((1,) * nd, r, x.dtype) if keepdims else np.array(r, x.dtype)
        return _np_norm2(x, None, keepdims)
    if type(axis) is int:
        if not -nd <= axis < nd:
            return None
        return _np_norm2(x, (axis % nd,), keepdims)
    # a tuple of axes (distinct, in range): the scaled norm over them; anything else is the
    # generic kernel's to refuse (Note [Axes of the vector norm])
    if type(axis) is not tuple:
        return None
    axes = _NORM_AXES.get((nd, axis))
    if axes is None or {*map(type, axis)} != _INT_TYPE:
        axes = _norm_axes(axis, nd)
        if axes is None:
            return None
    return _np_norm2(x, axes, keepdims)


# Note [Axes of the vector norm]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A tuple ``dim`` is checked (ints, in range, distinct), normalized and sorted by a loop of
# ~100 opcodes, a quarter of a small ``linalg.norm(x, None, (0, 2))``; the result is kept
# per (ndim, tuple).  Tuples of floats or bools equal to ints (``(1.0, 2)``, ``(True, 2)``)
# are the same keys, so a hit counts only when every element is an int -- one C-level
# pass, ``{*map(type, axis)}`` -- and the others take the loop, which refuses them.

_NORM_AXES: dict = {}  # (ndim, axis tuple) -> the axes normalized and sorted
_INT_TYPE = {int}


def _norm_axes(axis: tuple, nd: int) -> tuple | None:
    """``axis`` normalized for an ``nd``-d tensor and sorted; None where an element is not
    an int, is out of range or repeats (Note [Axes of the vector norm])."""
    axes = []
    for a in axis:
        if type(a) is not int or not -nd <= a < nd:
            return None
        a %= nd
        if a in axes:
            return None
        axes.append(a)
    axes = tuple(sorted(axes))
    if axes:
        if len(_NORM_AXES) >= 64:
            _NORM_AXES.clear()
        _NORM_AXES[nd, axis] = axes
    return axes


#: the vector norm's CPU computation, for linalg.norm's kernel (Note [linalg.norm on NumPy])
np_vector_norm = _np_vector_norm


def _np_matrix_norm(x, keepdims=False, ord="fro"):  # noqa: A002
    nd = x.ndim
    if nd < 2 or x.dtype.kind not in "fc" or not x.size:
        return None
    if ord == "fro":
        if nd == 2:  # the whole tensor's 2-norm
            return _np_vector_norm(x, None, keepdims)
        return _np_norm2(x, (nd - 2, nd - 1), keepdims)
    pick = _MAX_SUMS.get(ord) if type(ord) in (int, float) else None
    if pick is None:
        return None
    # ord 1 / -1: the largest / smallest column sum of magnitudes; inf / -inf: row sums
    sums = _sum(np.abs(x), nd - 2 if ord in (1, -1) else nd - 1, None, None, True)
    r = pick(sums, nd - 1 if ord in (1, -1) else nd - 2, None, None, True)
    return r if keepdims else r.reshape(x.shape[:-2])


_MAX_SUMS = {1: np.maximum.reduce, -1: np.minimum.reduce, math.inf: np.maximum.reduce,
             -math.inf: np.minimum.reduce}


def _np_trace(x, offset=0, dtype=None):
    if x.ndim < 2 or dtype is not None or type(offset) is not int or x.dtype.kind not in "fc":
        return None
    return x.trace(offset, -2, -1)


def _np_diagonal(x, offset=0):
    if x.ndim < 2 or type(offset) is not int:
        return None
    return x.diagonal(offset, -2, -1)


_largest, _sum = np.maximum.reduce, np.add.reduce
_F32 = np.dtype(np.float32)


# np.cross's products and difference, component k = a[k+1] b[k+2] - a[k+2] b[k+1]: both
# products of the three components at once, from one take of each operand (six components
# along ``axis``), and the difference of their halves, two views (a take costs 4.5K
# instructions on a (4, 3) operand, a view 1.7K: 24.2K -> 22.9K for the computation).
_CROSS_A, _CROSS_B = np.array([1, 2, 0, 2, 0, 1]), np.array([2, 0, 1, 1, 2, 0])
_CROSS_HALVES: dict = {}  # axis -> the indices of the two halves along it


def _cross_halves(axis: int) -> tuple:
    """The indices of the first and second three of six components along ``axis``
    (negative: from the end), whatever the rank."""
    def along(half):
        if axis < 0:
            return (Ellipsis, half) + (slice(None),) * (-axis - 1)
        return (slice(None),) * axis + (half,)
    halves = _CROSS_HALVES[axis] = (along(slice(None, 3)), along(slice(3, None)))
    return halves


def _np_cross(a, b, axis):
    p = a.take(_CROSS_A, axis)
    p *= b.take(_CROSS_B, axis)
    halves = _CROSS_HALVES.get(axis)
    first, second = halves if halves is not None else _cross_halves(axis)
    return np.subtract(p[first], p[second])


# Note [linalg.cross on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernel of ``linalg_cross`` (Note [Linalg on NumPy]), a single frame as the
# products' (Note [mm, bmm and dot on NumPy]): operands of one shape, one device and one
# numeric dtype (not bool, nor bfloat16) with 3 components along ``axis`` take
# ``_np_cross``; broadcasting, mixed dtypes (which promote by mdtensor's rules) and every
# error are the generic impl's.  Through ``register_direct`` the call cost 50.8K
# instructions (two frames and a star call with ``axis``).


def _cpu_cross(generic):
    def kernel(a, b, *, axis=-1):
        d = a._device
        x, y = a._data, b._data
        sx = x.shape
        if (b._device is d and sx == y.shape and x.dtype is y.dtype
                and x.dtype.kind in _PRODUCT_KINDS and type(axis) is int
                and -len(sx) <= axis < len(sx) and sx[axis] == 3):
            return d.wrap(_np_cross(x, y, axis))
        return generic(a, b, axis=axis)
    return kernel


def _tolerance(name, xp, x, rtol):
    """``rtol`` of ``pinv``/``matrix_rank`` as the backend takes it: a number, or the
    array of a tensor on ``x``'s device.  (An ``Any`` argument reaches the impl as it was
    passed; handed on as a Tensor, the backend would convert it through ``__array__``,
    which only CPU tensors allow.)"""
    if not isinstance(rtol, Tensor):
        return rtol
    dev = rtol._device
    if dev.xp is not xp or dev.backend.device_index(x) != dev.index:
        other = (f"{dev.type}:{dev.backend.device_index(x)}" if dev.xp is xp
                 else "a device of another backend")
        raise device_mismatch(name, other, dev)
    return rtol._data


def _square(n=3, batch=()):
    def samples(dtype, rng):
        a = make_array(batch + (n, n), dtype, rng)
        return [SampleInput((a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=a.dtype),))]
    return samples


def _pair(sa, sb):
    def samples(dtype, rng):
        return [SampleInput((make_array(sa, dtype, rng), make_array(sb, dtype, rng)))]
    return samples


_linalg("cholesky", "Tensor self, *, bool upper=False", samples=_square(), cpu=_np_cholesky,
        ref=lambda a, upper=False: np.linalg.cholesky(a))
def _cross_meta(a, b, axis=-1):
    """The broadcast shape of two stacks of 3-vectors along ``axis``; ValueError naming
    the op for any other length (NumPy also takes 2-vectors, which the Array API and
    PyTorch do not), IndexError for an axis out of range.  Stacks of different ranks
    broadcast as the Array API says (PyTorch refuses them: the differences row
    cross-of-different-ranks); a non-negative axis then names no one dimension of both."""
    # bool operands computing in bool (NumPy cannot subtract bools; PyTorch has no bool
    # cross either)
    if dt.as_dtype(a.dtype) is dt.bool_ and dt.as_dtype(b.dtype) is dt.bool_:
        raise TypeError("linalg.cross: expected numeric tensors, got two bool tensors")
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) != len(sb) and axis >= 0:
        raise ValueError(f"linalg.cross: inputs of different numbers of dimensions need a "
                         f"negative axis, got axis={axis} for shapes {sa} and {sb}")
    for s in (sa, sb):
        mf.normalize_axes("linalg.cross", axis, len(s))
    if not sa or sa[axis] != 3 or sb[axis] != 3:
        raise ValueError(f"linalg.cross: inputs dimension {axis} must have length 3, got "
                         f"{sa[axis] if sa else 'a 0-d tensor'} and "
                         f"{sb[axis] if sb else 'a 0-d tensor'}")
    return mf.broadcast_shapes("linalg.cross", sa, sb), mf.result_type(a, b)


def _cross(xp, a, b, axis=-1):
    _cross_meta(mf.ArraySpec(a), mf.ArraySpec(b), axis)  # the same checks and messages
    return xp.linalg.cross(a, b, axis=axis)


_linalg("cross", "Tensor self, Tensor other, *, int axis=-1", samples=_pair((4, 3), (4, 3)),
        ref=lambda a, b, axis=-1: np.cross(a, b, axis=axis), meta=_cross_meta,
        xp_fn=lambda xp: functools.partial(_cross, xp))
register_cpu(CATALOGUE["aten::linalg_cross"].functional[0], _cpu_cross,
             record=lambda xp, a, b, axis=-1: _np_cross(a, b, axis))
_linalg("det", "Tensor self", samples=_square(), ref=np.linalg.det)
_linalg("diagonal", "Tensor self, *, int offset=0", samples=_square(),
        ref=lambda a, offset=0: np.diagonal(a, offset, -2, -1), cpu=_np_diagonal)
_linalg("eigh", "Tensor self", "(Tensor eigenvalues, Tensor eigenvectors)")
_linalg("eigvalsh", "Tensor self", samples=_square(), ref=np.linalg.eigvalsh,
        cpu=_np_eigvalsh)
_linalg("eig", "Tensor self", "(Tensor eigenvalues, Tensor eigenvectors)")
_linalg("eigvals", "Tensor self")
_linalg("inv", "Tensor self", samples=_square(), ref=np.linalg.inv, cpu=_np_inv)


def _matrix_norm_samples(dtype, rng):
    # Every ord has a derivative; the sweep gradchecks the first three samples.  A random
    # non-square matrix has no ties among its column or row sums.
    a = make_array((3, 4), dtype, rng)
    return [SampleInput((a,), {"ord": o}, name=f"ord={o}")
            for o in ("fro", 1, -np.inf, np.inf, -1, "nuc", 2, -2)] + [
        SampleInput((make_array((2, 3, 3), dtype, rng),), {"ord": 1, "keepdims": True},
                    name="batched ord=1 keepdims")]


def _matrix_norm_fro(xp, x, keepdims=False, ord="fro"):
    r = bfloat16_via_float32(xp, _matrix_norm_fro, x, keepdims, ord)  # (as PyTorch's)
    if r is not None:
        return r
    # The Frobenius norm is the 2-norm of the elements, scaled (Note [Scaled norms]).
    if ord == "fro" and x.ndim >= 2:
        return _vector_norm(xp, x, axis=(-2, -1), keepdims=keepdims, ord=2)
    if x.ndim >= 2 and 0 in tuple(x.shape[-2:]):
        # empty matrices: the norms that are maxima or sums are 0 (PyTorch); a minimum
        # over no columns (ord=-1), rows (-inf) or singular values (-2) has no identity
        m, n = x.shape[-2:]
        if (ord == -1 and not n) or (ord == -float("inf") and not m) or ord == -2:
            raise ValueError(f"linalg.matrix_norm: the ord={ord} norm of an empty matrix "
                             f"(shape {tuple(x.shape)}) is a minimum over nothing")
        shape = mf.reduction(mf.ArraySpec(x), (-2, -1), keepdims)[0]
        return xp.zeros(shape, dtype=xp.abs(xp.reshape(x, (-1,))[:0]).dtype)
    return xp.linalg.matrix_norm(x, keepdims=keepdims, ord=ord)


def _vecdot(xp, a, b, axis=-1):
    if dtype_of(b) is dt.bfloat16:  # Note [Products of bfloat16]
        r = bfloat16_via_float32(xp, _vecdot, a, xp.astype(b, xp.float32), axis)
        if r is not None:
            return r
    # operands broadcast first, as PyTorch's (conj(a) * b).sum(axis) (NumPy's gufunc wants
    # both to have the axis)
    if len(a.shape) != len(b.shape) or tuple(a.shape) != tuple(b.shape):
        a, b = xp.broadcast_arrays(a, b)
    return xp.vecdot(a, b, axis=axis)


_linalg("matrix_norm", "Tensor self, *, bool keepdims=False, Any ord=\"fro\"",
        samples=_matrix_norm_samples, ref=lambda a, keepdims=False, ord="fro": np.linalg.norm(
            a, ord=ord, axis=(-2, -1), keepdims=keepdims),
        xp_fn=lambda xp: functools.partial(_matrix_norm_fro, xp), cpu=_np_matrix_norm)
def _matrix_power(xp, x, n):
    """Repeated squaring with matmul, on every backend (the standard's matrix_power takes
    floating-point matrices; PyTorch's integers too): x^0 is the identity, x^-n inv(x)^n."""
    if n < 0:
        x, n = _matrix_inv(xp, x), -n
    size = x.shape[-1]
    result = xp.broadcast_to(xp.eye(size, dtype=x.dtype), tuple(x.shape))
    result = xp.asarray(result, copy=True)
    power = x
    while n:
        if n & 1:
            result = _product(xp, result, power)
        n >>= 1
        if n:
            power = _product(xp, power, power)
    return result


def _matrix_inv(xp, x):
    out = xp.linalg.inv(x)
    _check_finite(xp, "matrix_power", (x,), out)
    return out


def _trace(xp, x, offset=0, dtype=None):
    if dtype is None and str(x.dtype).endswith("bool"):  # bools count (as sum)
        x = xp.astype(x, xp.int64)
    return xp.linalg.trace(x, offset=offset, dtype=dtype)


_linalg("matrix_power", "Tensor self, int n", samples=lambda d, rng: [
    SampleInput((s.args[0], 3)) for s in _square()(d, rng)],
    ref=np.linalg.matrix_power, xp_fn=lambda xp: functools.partial(_matrix_power, xp),
    cpu=_np_matrix_power)


def _matrix_rank(xp, x, *, rtol=None):
    # The number of singular values above rtol times the largest (the standard's and
    # NumPy's definition; JAX's matrix_rank takes a given rtol as an absolute tolerance).
    s = xp.linalg.svdvals(x)
    if s.shape[-1] == 0:
        return xp.zeros(s.shape[:-1], dtype=xp.int64)
    if rtol is None:
        rtol = max(x.shape[-2:]) * xp.finfo(s.dtype).eps
    elif not isinstance(rtol, (int, float)):
        rtol = xp.expand_dims(xp.astype(rtol, s.dtype), axis=-1)
    tol = xp.multiply(xp.max(s, axis=-1, keepdims=True), rtol)
    return xp.sum(xp.astype(s > tol, xp.int64), axis=-1)


_linalg("matrix_rank", "Tensor self, *, Any? rtol=None", samples=lambda d, rng: [
    SampleInput((make_array((2, 4, 3), d, rng),), {"rtol": r}, name=f"rtol={r}")
    for r in (None, 0.1, 0.9)],
        ref=lambda a, rtol=None: np.linalg.matrix_rank(a, rtol=rtol),
        xp_fn=lambda xp: functools.partial(_matrix_rank, xp), cpu=_np_matrix_rank)
_linalg("outer", "Tensor self, Tensor other", samples=_pair((3,), (4,)), ref=np.outer,
        top_level=True, xp_fn=attrgetter("linalg.outer"), cpu=_np_outer)
_linalg("pinv", "Tensor self, *, Any? rtol=None", samples=_square(), cpu=_np_pinv,
        ref=lambda a, rtol=None: np.linalg.pinv(a))
_linalg("qr", "Tensor self, *, str mode=\"reduced\"", "(Tensor Q, Tensor R)")
_linalg("slogdet", "Tensor self", "(Tensor sign, Tensor logabsdet)", samples=_square(),
        ref=lambda a: tuple(np.linalg.slogdet(a)))
_linalg("solve", "Tensor self, Tensor other", samples=lambda d, rng: [
    SampleInput((_square()(d, rng)[0].args[0], make_array((3,), d, rng)))],
    ref=np.linalg.solve, cpu=_np_solve)
_linalg("svd", "Tensor self, *, bool full_matrices=True", "(Tensor U, Tensor S, Tensor Vh)")
_linalg("svdvals", "Tensor self", samples=_square(), cpu=_np_svdvals,
        ref=lambda a: np.linalg.svd(a, compute_uv=False))
def _tensordot_meta(a, b, *, axes=2):
    """The result of ``tensordot(a, b, axes)``, or PyTorch's errors naming the op."""
    sa, sb = tuple(a.shape), tuple(b.shape)
    if isinstance(axes, int) and not isinstance(axes, bool):
        if not 0 <= axes <= min(len(sa), len(sb)):
            raise ValueError(f"tensordot: axes={axes} is out of range for tensors of "
                             f"dimensions {len(sa)} and {len(sb)}")
        ax_a, ax_b = list(range(len(sa) - axes, len(sa))), list(range(axes))
    else:
        try:
            ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: axes must be an int or a pair of sequences of "
                            f"ints, got {axes!r}") from None
        if len(ax_a) != len(ax_b):
            raise ValueError(f"tensordot: both tensors must contract as many dimensions, "
                             f"got {ax_a} and {ax_b}")
        ax_a = [mf.normalize_axis("tensordot", x, len(sa)) for x in ax_a]
        ax_b = [mf.normalize_axis("tensordot", x, len(sb)) for x in ax_b]
    for i, j in zip(ax_a, ax_b):
        if sa[i] != sb[j]:
            raise ValueError(f"tensordot: contracted dimension {i} of the first tensor "
                             f"(size {sa[i]}) does not match dimension {j} of the second "
                             f"(size {sb[j]}); shapes {sa} and {sb}")
    shape = tuple(s for k, s in enumerate(sa) if k not in ax_a) + tuple(
        s for k, s in enumerate(sb) if k not in ax_b)
    from mdtensor import _dtypes

    return shape, _dtypes.result_type(a.dtype, b.dtype)


_linalg("tensordot", "Tensor self, Tensor other, *, Any axes=2", top_level=True,
        meta=_tensordot_meta,
        kwarg_aliases={"dims": "axes"},  # PyTorch's keyword
        samples=_pair((2, 3, 4), (3, 4, 5)), xp_fn=attrgetter("tensordot"), cpu=_np_tensordot,
        ref=lambda a, b, axes=2: np.tensordot(a, b, axes))
_linalg("trace", "Tensor self, *, int offset=0, ScalarType? dtype=None", samples=_square(),
        ref=lambda a, offset=0: np.trace(a, offset, axis1=-2, axis2=-1),
        xp_fn=lambda xp: functools.partial(_trace, xp), cpu=_np_trace)
_linalg("vecdot", "Tensor self, Tensor other, *, int axis=-1", top_level=True,
        samples=_pair((2, 3), (2, 3)), xp_fn=lambda xp: functools.partial(_vecdot, xp),
        cpu=_np_vecdot,
        ref=lambda a, b, axis=-1: np.sum(a * b, axis=axis))
# Note [Scaled norms]
# ~~~~~~~~~~~~~~~~~~~
# ``sum(|x|^p)^(1/p)`` overflows (or underflows) in ``|x|^p`` long before the norm does:
# ``vector_norm([2e245])`` was inf.  As LAPACK's ``nrm2``, the norm is computed from ``x``
# divided by its largest magnitude ``s`` and multiplied back: ``s * sum((|x|/s)^p)^(1/p)``,
# for every ``p > 0`` other than 1 and inf (which sum or compare magnitudes), and for the
# Frobenius norm.  ``s`` is taken as 1 where it is 0 (all zeros), not finite (the norm is
# then inf or nan anyway) or over an empty axis.  A negative ``p`` is computed as it is
# (zeros give inf terms and a zero norm).  PyTorch does not scale: where its norm
# overflows (``[2e245, 3e245]``) mdtensor's is finite, a deliberate difference.


def _vector_norm(xp, x, axis=None, keepdims=False, ord=2):
    x = to_float(xp, x)  # Note [Integer inputs of float functions] in ops/elementwise.py
    axes = mf.backend_axis("linalg.vector_norm", x.ndim, axis)
    ndim = x.ndim
    if axes is None and ndim > 1:  # the flattened tensor's norm (Array API)
        r = _vector_norm(xp, xp.reshape(x, (-1,)), None, False, ord)
        return xp.reshape(r, (1,) * ndim) if keepdims else r
    a = xp.abs(x)
    inf = float("inf")
    if ord in (inf, -inf):
        mf.check_nonempty("linalg.vector_norm", a.shape, axes)
        r = (xp.max if ord == inf else xp.min)(a, axis=axes, keepdims=keepdims)
    elif ord == 0:
        r = xp.sum(xp.astype(a != 0, a.dtype), axis=axes, keepdims=keepdims)
    elif ord == 1:
        r = xp.sum(a, axis=axes, keepdims=keepdims)
    elif ord < 0:  # a minimum, in effect: no identity over nothing (PyTorch)
        mf.check_nonempty("linalg.vector_norm", a.shape, axes)
        r = xp.pow(xp.sum(xp.pow(a, float(ord)), axis=axes, keepdims=keepdims), 1.0 / ord)
    else:
        r = _scaled_norm(xp, a, axes, keepdims, float(ord))
    return r


def _scaled_norm(xp, a, axes, keepdims, p):
    """Note [Scaled norms]: ``sum(a^p)^(1/p)`` over ``axes`` of magnitudes ``a``."""
    reduced = mf.normalize_axes("linalg.vector_norm", axes, a.ndim)
    if any(a.shape[i] == 0 for i in reduced):
        s = xp.ones(mf.reduction(a, axes, True)[0], dtype=a.dtype)
    else:
        s = xp.max(a, axis=axes, keepdims=True)
        s = xp.where(xp.logical_or(s == 0, xp.logical_not(xp.isfinite(s))),
                     xp.ones_like(s), s)
    q = a / s
    t = xp.sum(q * q if p == 2 else xp.pow(q, p), axis=axes, keepdims=True)
    r = (xp.sqrt(t) if p == 2 else xp.pow(t, 1.0 / p)) * s
    return r if keepdims else xp.reshape(r, mf.reduction(a, axes, False)[0])


def _vector_norm_meta(x, axis=None, keepdims=False, ord=2):
    dtype = mf.real_dtype(mf.unary_float(x)[1])
    if axis is None and x.ndim > 1:
        return ((1,) * x.ndim if keepdims else ()), dtype
    shape, _ = mf.reduction(x, axis, keepdims)
    return shape, dtype


def _vector_norm_ref(a, axis=None, keepdims=False, ord=2):
    return np.linalg.norm(a.reshape(-1) if axis is None else a, ord=ord, axis=axis,
                          keepdims=keepdims)


defop("linalg_vector_norm(Tensor self, *, int[1]? axis=None, bool keepdims=False, "
      "Any ord=2) -> Tensor", impl=_vector_norm, meta=_vector_norm_meta, names=(),
      tags=("reduction",),
      info=OpInfo(ref=_vector_norm_ref, dtypes=FLOATS, samples=lambda d, rng: [
          SampleInput((make_array((2, 3), d, rng),))]))
LINALG_NAMES["vector_norm"] = "linalg_vector_norm"
cpu_kernel("linalg_vector_norm", _np_vector_norm, arity=1)


def _mm(xp, a, b):
    _mm_meta(mf.ArraySpec(a), mf.ArraySpec(b))  # the same named errors on every backend
    return _product(xp, a, b)


def _bmm(xp, a, b):
    _bmm_meta(mf.ArraySpec(a), mf.ArraySpec(b))
    return _product(xp, a, b)


def _bmm_meta(a, b):
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"bmm: expected 3-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[0] != b.shape[0]:  # PyTorch's bmm does not broadcast the batch
        raise ValueError(f"bmm: the batch sizes must be equal, got {a.shape[0]} and "
                         f"{b.shape[0]}")
    try:
        return mf.matmul(a, b)
    except ValueError as e:
        raise ValueError(f"bmm: {e}") from None


def _dot(xp, a, b):
    # PyTorch's dot conjugates nothing (vdot and the Array API's vecdot conjugate a); the
    # result keeps the operands' dtype (a sum would widen small integers)
    _dot_meta(mf.ArraySpec(a), mf.ArraySpec(b))
    p = xp.multiply(a, b)
    return xp.sum(p, dtype=p.dtype)


def _mm_meta(a, b):
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"mm: expected 2-D tensors, got {a.ndim}-D and {b.ndim}-D")
    try:
        return mf.matmul(a, b)
    except ValueError as e:
        raise ValueError(f"mm: {e}") from None


def _dot_meta(a, b):
    if a.ndim != 1 or b.ndim != 1:
        raise ValueError(f"dot: expected 1-D tensors, got {a.ndim}-D and {b.ndim}-D")
    if a.shape[0] != b.shape[0]:
        raise ValueError(f"dot: the tensors must have the same size, got {a.shape[0]} and "
                         f"{b.shape[0]}")
    return (), mf.result_type(a, b)


defop("mm(Tensor self, Tensor mat2) -> Tensor", impl=_mm, meta=_mm_meta, methods=("mm",),
      accepts="iufc",
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_pair((2, 3), (3, 4))))
defop("bmm(Tensor self, Tensor mat2) -> Tensor", impl=_bmm, meta=_bmm_meta, methods=("bmm",),
      accepts="iufc",
      info=OpInfo(ref=np.matmul, dtypes=NUMERIC, samples=_pair((2, 2, 3), (2, 3, 4))))
defop("dot(Tensor self, Tensor tensor) -> Tensor", impl=_dot, meta=_dot_meta, methods=("dot",),
      accepts="iufc",
      info=OpInfo(ref=np.dot, dtypes=FLOATS, samples=_pair((3,), (3,))))



def _addmm(self, mat1, mat2, *, beta=1, alpha=1):
    """``torch.addmm``: ``beta * self + alpha * (mat1 @ mat2)``, ``self`` broadcasting to
    the product's shape.  ``mat1`` or ``mat2`` may be sparse (the product is then
    ``mm``'s sparse kernel, docs/SPARSE.md); with ``beta == 0`` ``self``'s values are not
    read (NaN included), as PyTorch's."""
    from mdtensor.dispatch.namespaces import aten_calls as aten

    prod = aten.mm(mat1, mat2)
    shape = tuple(prod.shape)
    try:
        fits = tuple(self.shape) == shape or np.broadcast_shapes(
            tuple(self.shape), shape) == shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"addmm: self of shape {tuple(self.shape)} does not broadcast to "
                         f"the product's shape {shape}")
    if alpha != 1:
        prod = aten.mul(prod, alpha)
    if beta == 0:
        return prod
    return aten.add(self if beta == 1 else aten.mul(self, beta), prod)


def _addmm_samples(dtype, rng):
    a, b = make_array((2, 3), dtype, rng), make_array((3, 4), dtype, rng)
    return [SampleInput((make_array((2, 4), dtype, rng), a, b)),
            SampleInput((make_array((4,), dtype, rng), a, b), {"beta": 0.5, "alpha": 2.0},
                        name="broadcast self, beta and alpha"),
            SampleInput((make_array((2, 4), dtype, rng), a, b), {"beta": 0},
                        name="beta 0")]


defop("addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) "
      "-> Tensor", composite=_addmm, methods=("addmm",),
      info=OpInfo(ref=lambda s, a, b, beta=1, alpha=1: (beta * s if beta else 0)
                  + alpha * np.matmul(a, b), dtypes=FLOATS, samples=_addmm_samples))

# Note [addmm on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~
# ``addmm`` is CompositeImplicitAutograd (``mm``, ``mul``, ``add``: the sparse products and
# every backend come from them), which on small matrices costs three dispatches and their
# recording.  As ``nansum`` (Note [Composite ops with CPU kernels] in ops/_cpu_reductions.py)
# it has a CPU kernel and a derivative formula of its own (ops/products_derivatives.py): for
# dense float32 or float64 matrices of one dtype, ``self`` of the product's shape or a row
# of it (or 0-d) and real scalars, the product and the sum in place in it, in the
# decomposition's order (``alpha`` times the product, then ``beta * self`` plus it); every
# other call is the decomposition's, which also raises the op's errors.


def _addmm_cpu(self, mat1, mat2, *, beta=1, alpha=1):
    # (the product inline, as mm's kernel computes it, and each shape read once: a frame
    # and ~4K instructions fewer than through mm's kernel, 28.7K -> 24.7K on (2, 3) @ (3, 4))
    s, a, b = self._data, mat1._data, mat2._data
    d = self._device
    if (type(a) is np.ndarray and type(b) is np.ndarray and type(s) is np.ndarray
            and a.dtype is b.dtype and s.dtype is a.dtype and a.dtype.char in "fd"
            and mat1._device is d and mat2._device is d
            and type(beta) in (int, float) and type(alpha) in (int, float)):
        sa, sb, ss = a.shape, b.shape, s.shape
        if len(sa) == 2 and len(sb) == 2 and sa[1] == sb[0] and (
                ss == (sa[0], sb[1]) or ss == sb[1:] or not ss):
            # (see Note [Large products through np.matmul])
            prod = (_np_matmul if sa[0] * sb[1] >= _LARGE else _np_dot)(a, b)
            # (in-place operators: a ufunc's ``out=`` keyword costs 0.4 us more; the sum
            # commutes exactly)
            if alpha != 1:
                prod *= alpha
            if beta != 0:
                prod += s if beta == 1 else np.multiply(s, beta)
            return d.wrap(prod)
    return _addmm(self, mat1, mat2, beta=beta, alpha=alpha)


register(CATALOGUE["aten::addmm"].functional[0], _addmm_cpu, DispatchKey.CPU)

# Note [mm, bmm and dot on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The CPU kernels of the fixed-rank products (Note [NumPy fast impls]), hand-written as
# matmul's is: through ``defop(cpu_impl=...)`` the accepted-dtype wrapper and the impl's own
# shape checks cost 0.35 us, a quarter of an 8x8 product.  Operands on one device, neither
# bool nor bfloat16, of the right ranks and sizes go straight to the C function matmul's
# kernel uses (Note [Matrix products through np.dot]; ``np.matmul`` for the batched ``bmm``
# and for large products, Note [Large products through np.matmul]); anything else takes the
# generic kernel, whose checks raise the op's own errors.  One factory makes the three
# kernels, each a single frame (``register_direct``'s kernel calling a ``direct`` function
# was two, and cost ``dot`` 29.4K instructions per call).
#
# Mixed dtypes: NumPy's products promote two tensors as mdtensor does (NumPy's rule for
# tensors of different kinds: int32 with float32 is float64, docs/ARCHITECTURE.md), so the
# fast kernels, the generic impl (``xp.matmul``, ``xp.multiply``) and the Meta functions
# (``mf.result_type``) give one dtype; tests/test_product_kernels.py checks that they do.
# ``np.dot`` of two vectors keeps their dtype, as the generic ``sum(a * b, dtype=...)``
# does; for operands of one dtype it writes into a 0-d array of that dtype (``out=``),
# where its NumPy scalar would be wrapped through ``asarray``.

def _fixed_rank_product(rank: int):
    """``build(generic)`` of the CPU kernel of the product of two ``rank``-d operands: ``dot``
    (1), ``mm`` (2), ``bmm`` (3) (Note [mm, bmm and dot on NumPy])."""
    inner = max(rank - 2, 0)  # the dimension of ``b`` that meets ``a``'s last
    dot, matmul, empty = _np_dot, _np_matmul, np.empty

    def build(generic):
        def kernel(a, b):
            d = a._device
            x, y = a._data, b._data
            sx, sy = x.shape, y.shape
            if (b._device is d and len(sx) == rank and len(sy) == rank and sx[-1] == sy[inner]
                    and x.dtype.kind in _PRODUCT_KINDS and y.dtype.kind in _PRODUCT_KINDS):
                if rank == 1:
                    if x.dtype is y.dtype:
                        out = empty((), x.dtype)
                        dot(x, y, out)
                        return d.wrap(out)
                    return d.wrap(dot(x, y))
                if rank == 2:
                    # (Note [Large products through np.matmul])
                    return d.wrap((matmul if sx[0] * sy[1] >= _LARGE else dot)(x, y))
                if sx[0] == sy[0]:  # bmm: PyTorch's does not broadcast the batch
                    return d.wrap(matmul(x, y))
            return generic(a, b)
        return own_code(kernel)  # Note [Own code objects]: one per product
    return build


def _product_record(rank: int):
    """The NumPy computation of ``_fixed_rank_product(rank)``'s kernel, for the sweep."""
    return (lambda xp, x, y: _np_matmul(x, y)) if rank == 3 else (lambda xp, x, y: _np_dot(x, y))


for _name, _rank in (("dot", 1), ("mm", 2), ("bmm", 3)):
    register_cpu(CATALOGUE[f"aten::{_name}"].functional[0], _fixed_rank_product(_rank),
                 record=_product_record(_rank))
del _name, _rank


def _einsum(xp, equation, operands):
    fn = getattr(xp, "einsum", None)
    if fn is None:
        raise NotImplementedError("einsum: this backend's namespace has no einsum")
    low = [a.dtype for a in operands if dtype_of(a) is dt.bfloat16]
    if low:
        # See Note [Products of bfloat16]: ml_dtypes has no einsum loop; bfloat16 operands
        # are multiplied as float32 and the product rounded when the result is bfloat16
        f32 = xp.float32
        out = fn(equation, *(xp.astype(a, f32) if dtype_of(a) is dt.bfloat16 else a
                             for a in operands))
        want = dt.result_type(*map(dtype_of, operands))
        return xp.astype(out, low[0]) if want is dt.bfloat16 else out
    return fn(equation, *operands)


def _einsum_meta(equation, tensors):
    try:
        out = np.einsum(equation, *(mf.dummy(t) for t in tensors))
    except (ValueError, TypeError) as e:
        raise ValueError(f"einsum: {e}") from None
    return tuple(np.shape(out)), mf.result_type(*tensors)


defop("einsum(str equation, Tensor[] tensors) -> Tensor", impl=_einsum, star_args=True,
      meta=_einsum_meta,
      info=OpInfo(ref=lambda e, ts: np.einsum(e, *ts), dtypes=FLOATS,
                  samples=lambda d, rng: [SampleInput(("ij,jk->ik", [make_array((2, 3), d, rng),
                                                                   make_array((3, 4), d, rng)]))]))
