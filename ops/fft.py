"""The Array API FFT extension (``md.fft``): aten ``fft_<name>`` ops.

Transforms of real inputs return complex results (``rfft``) and vice versa (``irfft``);
``fftfreq``/``rfftfreq`` are factories (``device=``).  Outputs follow the Array API:
complex64 for float32 inputs, complex128 for float64.
"""

from __future__ import annotations

import math
from operator import attrgetter

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._accepted import refuse_bfloat16
from ._cpu_kernels import register_direct
from ._decl import CATALOGUE, OpInfo, SampleInput, defop
from ._factory import deffactory
from ._samples import make_array
from .elementwise import to_float

__all__ = ["FFT_NAMES", "direct_transform", "transform_kernels"]

#: md.fft name -> aten packet name
FFT_NAMES: dict[str, str] = {}

_COMPLEX = (dt.complex64, dt.complex128)
_REAL = (dt.float32, dt.float64)


def _default(xp):
    return getattr(xp, dt.get_default_dtype().name)


def _cast_like(out, x, xp):
    # NumPy's fft computes in double precision; keep single precision inputs single.
    # Note: compared with the namespace's dtypes, never NumPy's (array_api_strict dtypes
    # compare unequal to NumPy's).
    single = getattr(x, "dtype", None) in (xp.float32, xp.complex64)
    if single and out.dtype == xp.complex128:
        return xp.astype(out, xp.complex64)
    if single and out.dtype == xp.float64:
        return xp.astype(out, xp.float32)
    return out


# Note [FFT shapes]
# ~~~~~~~~~~~~~~~~~
# The Meta kernels' rules, also checked by the real kernels before the backend sees the
# call (so every backend raises the same named errors): a transformed axis has ``n`` points
# (default: its size), which must be at least 1; the real-input transforms (rfft, ihfft)
# keep ``n // 2 + 1`` of them, the real-output ones (irfft, hfft) make ``n`` from ``m``
# inputs (default ``n = 2 (m - 1)``).  Complex outputs are complex64 for single precision
# and complex128 otherwise, real outputs the matching float.

_REAL_IN = {"rfft", "ihfft", "rfftn"}
_REAL_OUT = {"irfft", "hfft", "irfftn"}


def _input_for(xp, name, x):
    """``x`` in the dtype the standard's transform takes: real floating for rfft, ihfft and
    rfftn, complex for the others (array_api_strict refuses anything else; NumPy converts
    as this does): single precision stays single, integers become the default dtypes."""
    d = dt.as_dtype(x.dtype)
    if name in _REAL_IN:
        want = d if d.kind == "f" else dt.get_default_dtype()
    else:
        want = d if d.kind == "c" else dt.complex128 if d is dt.float64 else \
            dt.complex64 if d.kind == "f" else dt.default_complex_dtype()
    return x if want is d else xp.astype(x, getattr(xp, want.name))


def _fft_meta(name, many, op):
    def meta(x, *args, **kwargs):
        refuse_bfloat16(op, (x,))  # Note [Ops without bfloat16] in _accepted.py
        params = ("s", "axes", "norm") if many else ("n", "axis", "norm")
        kw = dict(zip(params, args), **kwargs)
        if many:
            axes = kw.get("axes")
            s = kw.get("s")
            if axes is None:
                axes = tuple(range(x.ndim))[-len(s):] if s is not None else \
                    tuple(range(x.ndim))
            axes = tuple(axes)
            sizes = list(s) if s is not None else [None] * len(axes)
            if len(sizes) != len(axes):
                raise ValueError(f"{op}: s and axes must have the same length, got "
                                 f"{len(sizes)} and {len(axes)}")
        else:
            axes, sizes = (kw.get("axis", -1),), [kw.get("n")]
        shape = list(x.shape)
        for k, (a, n) in enumerate(zip(axes, sizes)):
            if not x.ndim:
                raise IndexError(f"{op}: a 0-d tensor has no dimension {a}")
            i = mf.normalize_axis(op, a, x.ndim)
            last = k == len(axes) - 1
            m = shape[i]
            if n is None:
                n = 2 * (m - 1) if name in _REAL_OUT and last else m
            if n < 1:
                raise ValueError(f"{op}: invalid number of data points ({n}) along "
                                 f"axis {a}")
            shape[i] = n // 2 + 1 if name in _REAL_IN and last else n
        single = x.dtype in (dt.float32, dt.complex64)
        if name in _REAL_OUT:
            return tuple(shape), dt.float32 if single else dt.float64
        return tuple(shape), dt.complex64 if single else dt.complex128
    meta.__name__ = f"{op}_meta"
    return meta


def transform_kernels(name: str, op: str):
    """``(impl, meta)`` of the transform ``name`` ("fft", ..., "irfftn") for the op named
    ``op`` (its errors name it): the n-dimensional ones take ``(x, s, axes, norm)``, the
    others ``(x, n, axis, norm)`` (the 2-D ops of ops/fft_planes.py share the n-d ones)."""
    many = name.endswith("n")
    getter = attrgetter(f"fft.{name}")
    # The standard's fft functions take n/axis/norm (s/axes/norm) keyword-only, and
    # array-api-compat's wrappers have ``xp`` as their second parameter: pass by name.
    params = ("s", "axes", "norm") if many else ("n", "axis", "norm")

    meta = _fft_meta(name, many, op)

    def impl(xp, x, *args, **kwargs):
        x = to_float(xp, x)  # Note [Integer inputs of float functions] in elementwise.py
        shape, dtype = meta(mf.ArraySpec(x), *args, **kwargs)  # Note [FFT shapes]
        kwargs.update(zip(params, args))
        if many and not x.ndim:  # no axis to transform: x, as complex
            if name in _REAL_IN or name in _REAL_OUT:
                raise ValueError(f"{op}: expected a tensor of at least one dimension")
            return xp.astype(x, getattr(xp, dtype.name))
        if 0 in tuple(x.shape):  # all zeros once padded (NumPy's irfftn leaves it unset)
            return xp.zeros(shape, dtype=getattr(xp, dtype.name))
        x = _input_for(xp, name, x)
        if kwargs.get("s") is not None:
            kwargs["s"] = tuple(kwargs["s"])
        if kwargs.get("axes") is not None:
            kwargs["axes"] = tuple(kwargs["axes"])
        return _cast_like(getter(xp)(x, **kwargs), x, xp)

    impl.__name__ = name
    return impl, meta


def _fft_op(name, schema_args, dtypes, samples):
    impl, meta = transform_kernels(name, f"fft_{name}")
    impl.__name__ = name
    ref_fn = getattr(np.fft, name)
    defop(f"fft_{name}(Tensor self, {schema_args}) -> Tensor", impl=impl, names=(),
          meta=meta, accepts="biuf" if name in _REAL_IN else None,
          info=OpInfo(ref=lambda x, *a, **k: ref_fn(x, *a, **k), dtypes=dtypes,
                      samples=samples, rtol=1e-4, atol=1e-4))
    FFT_NAMES[name] = f"fft_{name}"


def _s(shape):
    def samples(dtype, rng):
        return [SampleInput((make_array(shape, dtype, rng),))]
    return samples


_ONE = "int? n=None, int axis=-1, str norm=\"backward\""
_MANY = "int[]? s=None, int[]? axes=None, str norm=\"backward\""
for _n in ("fft", "ifft"):
    _fft_op(_n, _ONE, _COMPLEX, _s((2, 8)))
for _n in ("fftn", "ifftn"):
    _fft_op(_n, _MANY, _COMPLEX, _s((4, 6)))
_fft_op("rfft", _ONE, _REAL, _s((2, 8)))
_fft_op("irfft", _ONE, _COMPLEX, _s((2, 5)))
_fft_op("rfftn", _MANY, _REAL, _s((4, 6)))
_fft_op("irfftn", _MANY, _COMPLEX, _s((4, 4)))
_fft_op("hfft", _ONE, _COMPLEX, _s((2, 5)))
_fft_op("ihfft", _ONE, _REAL, _s((2, 8)))


def _shift(name):
    def impl(xp, x, axes=None):
        # a roll by half of each axis (the standard's fftshift takes floating-point arrays
        # only; NumPy's is this roll)
        _shift_meta(x, axes)
        axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) \
            else tuple(axes)
        shifts = tuple((x.shape[a] // 2) if name == "fftshift" else -(x.shape[a] // 2)
                       for a in axes)
        return xp.roll(x, shifts, axis=axes)

    def _shift_meta(x, axes=None):
        if not len(x.shape):  # PyTorch: a 0-d tensor has no dimension to shift along
            raise IndexError(f"fft_{name}: a 0-d tensor has no dimension to shift along")
        if axes is not None:
            mf.normalize_axes(f"fft_{name}", axes, len(x.shape))
        return tuple(x.shape), x.dtype

    impl.__name__ = name
    defop(f"fft_{name}(Tensor self, int[1]? axes=None) -> Tensor", impl=impl, names=(),
          meta=lambda x, axes=None: _shift_meta(x, axes),
          info=OpInfo(ref=getattr(np.fft, name), dtypes=_REAL + _COMPLEX, samples=_s((3, 4))))
    FFT_NAMES[name] = f"fft_{name}"


_shift("fftshift")
_shift("ifftshift")


# Note [FFTs on NumPy]
# ~~~~~~~~~~~~~~~~~~~~
# ``np.fft.fft`` is a Python function around pocketfft's generalized ufuncs
# (``numpy.fft._pocketfft_umath``, NumPy >= 2.0): it converts its argument, works out the
# normalization and the output's shape and allocates it, 2.5 us of a 5 us transform of a
# 2x8 array, and array-api-compat's wrapper and the generic impl's checks add as much
# again.  The CPU kernels (Note [Hand-written CPU kernels] in ops/_cpu_kernels.py) call the
# ufuncs themselves for the common case -- floating-point or complex inputs of single or
# double precision (NumPy 2 transforms single precision in single precision), a valid axis
# (axes: distinct), ``n >= 1`` points, a known ``norm``, no empty dimension -- with what
# ``_raw_fft`` computes: the factor ``1``, ``1/n`` or ``1/sqrt(n)`` by the norm and the
# direction, and the output ``n`` points long (``n // 2 + 1`` for rfft).  ``hfft`` and
# ``ihfft`` are NumPy's irfft of the conjugate and conjugated rfft, with the norm's
# direction swapped; the n-dimensional transforms are NumPy's sequence of 1-d ones (rfftn:
# rfft of the last axis first; irfftn: irfft of the last axis last).  Anything else --
# integer or half inputs, an invalid argument -- takes the generic kernel, which converts
# or raises the op's error.  The shifts are a ``take`` per axis of a rolled ``arange``
# (kept per size), for arrays up to 4096 elements (beyond, the generic ``roll``: no
# gather on large arrays).

try:
    from numpy.fft import _pocketfft_umath as _pfu
except ImportError:  # NumPy < 2: the generic kernels only
    _pfu = None

_C_OF = {np.dtype(np.float32): np.dtype(np.complex64),
         np.dtype(np.float64): np.dtype(np.complex128),
         np.dtype(np.complex64): np.dtype(np.complex64),
         np.dtype(np.complex128): np.dtype(np.complex128)}
_R_OF = {c: np.dtype(r) for c, r in ((np.dtype(np.complex64), np.float32),
                                      (np.dtype(np.complex128), np.float64),
                                      (np.dtype(np.float32), np.float32),
                                      (np.dtype(np.float64), np.float64))}
_SWAP = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _np_fft1(kind, x, n, ax, norm):
    """pocketfft's ``kind`` ("fft", "ifft", "rfft", "irfft") of ``x`` along the valid axis
    ``ax`` (non-negative), or None (Note [FFTs on NumPy])."""
    shape = x.shape
    last = ax == len(shape) - 1
    if n is not None and type(n) is not int:
        return None
    key = None
    if x.size <= 1024 and (last or ax == len(shape) - 2):  # a matrix made before?
        key = (kind, shape[ax], n, norm, x.dtype.char, last)
        w = _DFT.get(key)
        if w is not None:
            out = _dft(kind, x, w, last)
            if out is not None:
                return out
    m = shape[ax]
    if n is None:
        n = 2 * (m - 1) if kind == "irfft" else m
    if n < 1 or not m:
        return None
    inverse = kind == "ifft" or kind == "irfft"
    if norm == "backward":
        fct = 1 / n if inverse else 1
    elif norm == "forward":
        fct = 1 if inverse else 1 / n
    elif norm == "ortho":
        fct = 1 / math.sqrt(n)
    else:
        return None
    if kind == "rfft" and x.dtype.kind != "f":
        return None
    if key is not None and m <= _DFT_MAX and n <= _DFT_MAX:
        w = _dft_matrix(kind, m, n, fct, x.dtype, last)
        if len(_DFT) >= 256:
            _DFT.clear()
        _DFT[key] = w
        out = _dft(kind, x, w, last)
        if out is not None:
            return out
    if kind == "rfft":
        ufunc, size, dtype = (_pfu.rfft_n_odd if n % 2 else _pfu.rfft_n_even), n // 2 + 1, \
            _C_OF[x.dtype]
    elif kind == "irfft":
        ufunc, size, dtype = _pfu.irfft, n, _R_OF[x.dtype]
    else:
        ufunc, size, dtype = _pfu.ifft if inverse else _pfu.fft, n, _C_OF[x.dtype]
    out = np.empty(shape[:ax] + (size,) + shape[ax + 1:], dtype)
    if last:
        return ufunc(x, fct, out=out)
    return ufunc(x, fct, axes=[(ax,), (), (ax,)], out=out)


# Note [Small FFTs as products]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# pocketfft's ufuncs cost 1-1.5 us a call and some 0.1 us a transformed row (a 16x16
# complex64 transform: 3 us, a 4096x16 one 2.5 ms), while the discrete Fourier transform of
# ``n <= 16`` points is a product with the ``m x n`` matrix of its coefficients (``m`` the
# input's points, cut or zero-padded to ``n``), which BLAS computes in 1-1.5 us for a small
# array, with the same rounding (1e-7 of the largest value in single precision).  Arrays of
# up to 1024 elements only: the product is faster on larger ones too (a tenth of pocketfft's
# time for a 4096x16 one on one thread), but BLAS may share it among threads, which on a
# loaded machine cost more than they gain.  So a transform of at most 16 points
# along the last axis is ``x @ W``, along the one before it ``W.T @ x``, the normalization
# factor in ``W``.  The real transforms take one real product: ``rfft`` of the last axis
# multiplies by the matrix of the cosine and sine terms interleaved, a ``(..., 2 (n//2+1))``
# real result read as complex; ``irfft`` of the last axis reads the complex input as its
# interleaved real and imaginary parts, weighing each bin by 2 but the zero frequency and
# (even ``n``) the last, whose imaginary parts it ignores, as pocketfft does.  The matrices
# are kept per transform, sizes, normalization and dtype (up to 256 of them, looked up
# before anything else is computed);
# anything else (an irfft along another axis, a larger transform) takes pocketfft.  An n-d
# transform of the last axes taking and making at most 64 points (a 2-D one of 8x8) is one
# product too, whose matrix is NumPy's own transform of each input point in double precision
# (of its real and its imaginary unit for irfftn): 1.3 us where the 1-d steps cost 4.3.

_DFT_MAX = 16
_DFT: dict = {}


def _dft(kind, x, w, last):
    """``kind`` of ``x`` along its last (``last``) or second-to-last axis by a product with
    its coefficient matrix ``w``, or None (Note [Small FFTs as products])."""
    if kind == "irfft" and not (last and x.strides[-1] == x.itemsize):
        return None
    if kind == "rfft" and last:
        return np.matmul(x, w).view(_C_OF[x.dtype])
    if kind == "irfft":  # a real input: the real parts' rows
        return np.matmul(x.view(_R_OF[x.dtype]), w) if x.dtype.kind == "c" else \
            np.matmul(x, w[0::2])
    return np.matmul(x, w) if last else np.matmul(w, x)


def _dft_nd(name, x, s, k, norm):
    """The n-d transform ``name`` of ``x``'s last ``k`` axes as one product, where it takes
    and makes at most 64 points, or None (Note [Small FFTs as products])."""
    if not x.size or name == "rfftn" and x.dtype.kind != "f":  # the 1-d steps decide
        return None
    if norm not in _SWAP:  # a bad norm is the generic kernel's error, named after the op
        return None
    tail = x.shape[-k:]
    key = (name, tail, s if s is None else tuple(s), norm, x.dtype.char)
    w = _DFT.get(key, _DFT)
    if w is _DFT:  # not seen: its matrix, or None where it is too large
        w = _dft_nd_matrix(name, tail, s, norm, x.dtype)
        if len(_DFT) >= 256:
            _DFT.clear()
        _DFT[key] = w
    if w is None:
        return None
    w, out_tail = w
    lead = x.shape[:-k]
    if name == "rfftn":
        return np.matmul(x.reshape(lead + (-1,)), w).view(_C_OF[x.dtype]).reshape(
            lead + out_tail)
    if name == "irfftn":
        if x.dtype.kind != "c":  # a real input: the real parts' rows
            w = w[0::2]
        elif x.strides[-1] != x.itemsize:
            return None
        else:
            x = x.view(_R_OF[x.dtype])
    return np.matmul(x.reshape(lead + (-1,)), w).reshape(lead + out_tail)


def _dft_nd_matrix(name, tail, s, norm, dtype):
    """``(matrix, output's last axes)`` of ``_dft_nd``, or None: NumPy's transform of each
    input point (real and imaginary, for irfftn), in double precision."""
    k = len(tail)
    sizes = list(s) if s is not None else [None] * k
    points = math.prod(tail)
    last = sizes[-1]
    if last is None:
        sizes[-1] = last = 2 * (tail[-1] - 1) if name == "irfftn" else tail[-1]
    sizes = [t if n is None else n for n, t in zip(sizes, tail)]
    out_tail = tuple(sizes[:-1]) + (last // 2 + 1 if name == "rfftn" else last,)
    if not points or points > 64 or min(sizes) < 1 or math.prod(out_tail) > 64:
        return None
    axes = tuple(range(1, k + 1))
    if name == "irfftn":  # rows 2j, 2j + 1: point j's real and imaginary parts
        basis = np.zeros((2 * points, points), np.complex128)
        basis[0::2] = np.eye(points)
        basis[1::2] = 1j * np.eye(points)
        w = np.fft.irfftn(basis.reshape((-1,) + tail), sizes, axes, norm)
        return w.reshape(2 * points, -1).astype(_R_OF[dtype]), out_tail
    basis = np.eye(points, dtype=np.float64 if name == "rfftn" else np.complex128)
    w = getattr(np.fft, name)(basis.reshape((-1,) + tail), sizes, axes, norm)
    w = w.reshape(points, -1)
    if name == "rfftn":  # the real and imaginary parts interleaved
        return w.view(np.float64).astype(dtype), out_tail
    return w.astype(_C_OF[dtype]), out_tail


def _dft_matrix(kind, m, n, fct, dtype, last):
    inverse = kind == "ifft" or kind == "irfft"
    used = min(m, n // 2 + 1 if kind == "irfft" else n)
    cols = n // 2 + 1 if kind == "rfft" else n
    k = np.arange(used)[:, None] * np.arange(cols) % n  # exact: the angles' multiples
    angle = (2 * np.pi / n) * k
    if kind == "irfft":  # rows 2q, 2q + 1: the real and imaginary parts of bin q
        weight = np.full((used, 1), 2.0 * fct)
        weight[0] = fct
        if n % 2 == 0 and used > n // 2:
            weight[n // 2] = fct
        sin = np.sin(angle)
        sin[0] = 0.0
        if n % 2 == 0 and used > n // 2:
            sin[n // 2] = 0.0
        w = np.zeros((2 * m, n))
        w[0:2 * used:2] = weight * np.cos(angle)
        w[1:2 * used:2] = -weight * sin
        return w.astype(_R_OF[dtype])
    w = np.zeros((m, cols), np.complex128)
    w[:used] = fct * np.exp((1j if inverse else -1j) * angle)
    if kind == "rfft" and last:  # the real and imaginary parts interleaved
        return w.view(np.float64).astype(dtype)
    w = w.astype(_C_OF[dtype])
    return w if last else np.ascontiguousarray(w.T)


def _np_fft(name):
    """The direct transform of a 1-d FFT op (Note [FFTs on NumPy])."""
    def direct(x, n=None, axis=-1, norm="backward"):
        nd = x.ndim
        if x.dtype not in _C_OF or not nd or type(axis) is not int or not -nd <= axis < nd:
            return None
        ax = axis % nd
        if name == "hfft":
            if norm not in _SWAP:
                return None
            return _np_fft1("irfft", np.conjugate(x), n, ax, _SWAP[norm])
        if name == "ihfft":
            out = _np_fft1("rfft", x, n, ax, _SWAP.get(norm))
            return out if out is None else np.conjugate(out, out=out)
        return _np_fft1(name, x, n, ax, norm)
    return direct


def _np_fftn(name):
    """The direct transform of an n-d FFT op (Note [FFTs on NumPy])."""
    kind = name[:-1]

    def direct(x, s=None, axes=None, norm="backward"):
        nd = x.ndim
        if x.dtype not in _C_OF or not nd or s is not None and not len(s):
            return None
        if axes is None:
            axes = range(nd)[-len(s):] if s is not None else range(nd)
        valid = []
        for a in axes:  # an invalid axis is the generic kernel's error
            if type(a) is not int or not -nd <= a < nd:
                return None
            valid.append(a % nd)
        axes = valid
        k = len(axes)
        if not k or (k > 1 and len(set(axes)) != k) or s is not None and len(s) != k:
            return None
        if x.size <= 1024 and axes[0] == nd - k and axes[-1] == nd - 1 and (
                k < 3 or axes == list(range(nd - k, nd))):
            out = _dft_nd(name, x, s, k, norm)
            if out is not None:
                return out
        sizes = s if s is not None else (None,) * k
        if kind == "rfft":  # the last axis real-to-complex, then the others
            x = _np_fft1("rfft", x, sizes[-1], axes[-1], norm)
            order, one = range(k - 2, -1, -1), "fft"
        elif kind == "irfft":  # the others complex-to-complex, the last one last
            order, one = range(k - 2, -1, -1), "ifft"
        else:
            order, one = range(k - 1, -1, -1), kind
        for i in order:
            if x is None:
                return None
            x = _np_fft1(one, x, sizes[i], axes[i], norm)
        if kind == "irfft" and x is not None:
            x = _np_fft1("irfft", x, sizes[-1], axes[-1], norm)
        return x
    return direct


def direct_transform(name: str):
    """The NumPy kernel of the n-dimensional transform ``name`` (``register_direct``'s
    ``direct``; Note [FFTs on NumPy]), or None where NumPy lacks pocketfft's ufuncs."""
    return _np_fftn(name) if _pfu is not None else None


_ROLLS: dict = {}


def _np_shift(name):
    def direct(x, axes=None):
        nd = x.ndim
        if not nd or x.size > 4096:
            return None
        if axes is None:
            axes = range(nd)
        elif type(axes) is int:
            axes = (axes,)
        try:
            axes = [a % nd for a in axes if -nd <= a < nd]
        except TypeError:
            return None
        if not axes or len(set(axes)) != len(axes):
            return None
        for a in axes:
            m = x.shape[a]
            key = (m, name)
            perm = _ROLLS.get(key)
            if perm is None:
                perm = np.roll(np.arange(m), m // 2 if name == "fftshift" else -(m // 2))
                perm.flags.writeable = False
                if len(_ROLLS) >= 256:
                    _ROLLS.clear()
                _ROLLS[key] = perm
            x = x.take(perm, a)
        return x
    return direct


if _pfu is not None:
    for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
        register_direct(CATALOGUE[f"aten::fft_{_n}"].functional[0], _np_fft(_n))
    for _n in ("fftn", "ifftn", "rfftn", "irfftn"):
        register_direct(CATALOGUE[f"aten::fft_{_n}"].functional[0], _np_fftn(_n))
for _n in ("fftshift", "ifftshift"):
    register_direct(CATALOGUE[f"aten::fft_{_n}"].functional[0], _np_shift(_n))


def _freq(name):
    getter = attrgetter(f"fft.{name}")

    def impl(xp, n, d=1.0, *, dtype=None, device=None):
        if n < 0:
            raise ValueError(f"{name}: n must be non-negative, got {n}")
        if n == 0:  # PyTorch: no frequencies, and rfftfreq's one is 0 / 0 (NumPy divides
            # by zero)
            if name == "fftfreq":
                return xp.zeros((0,), dtype=dtype or _default(xp), device=device)
            return xp.full((1,), float("nan"), dtype=dtype or _default(xp), device=device)
        out = getter(xp)(n, d=d, device=device)
        return xp.astype(out, dtype or _default(xp))

    def meta(n, d=1.0, *, dtype=None, **kwargs):
        size = n if name == "fftfreq" else n // 2 + 1
        return (size,), dt.as_dtype(dtype) if dtype is not None else dt.get_default_dtype()

    deffactory(f"fft_{name}(int n, float d=1.0, *, ScalarType? dtype=None, Device? device=None,"
               f" bool requires_grad=False) -> Tensor", impl, meta, names=())
    FFT_NAMES[name] = f"fft_{name}"


_freq("fftfreq")
_freq("rfftfreq")
