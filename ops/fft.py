"""The Array API FFT extension (``md.fft``): aten ``fft_<name>`` ops.

Transforms of real inputs return complex results (``rfft``) and vice versa (``irfft``);
``fftfreq``/``rfftfreq`` are factories (``device=``).  Outputs follow the Array API:
complex64 for float32 inputs, complex128 for float64.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._accepted import refuse_bfloat16
from ._decl import OpInfo, SampleInput, defop
from ._factory import deffactory
from ._samples import make_array
from .elementwise import to_float

__all__ = ["FFT_NAMES"]

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


def _fft_meta(name, many):
    def meta(x, *args, **kwargs):
        refuse_bfloat16(f"fft_{name}", (x,))  # Note [Ops without bfloat16] in _accepted.py
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
                raise ValueError(f"fft_{name}: s and axes must have the same length, got "
                                 f"{len(sizes)} and {len(axes)}")
        else:
            axes, sizes = (kw.get("axis", -1),), [kw.get("n")]
        shape = list(x.shape)
        for k, (a, n) in enumerate(zip(axes, sizes)):
            if not x.ndim:
                raise IndexError(f"fft_{name}: a 0-d tensor has no dimension {a}")
            i = mf.normalize_axis(f"fft_{name}", a, x.ndim)
            last = k == len(axes) - 1
            m = shape[i]
            if n is None:
                n = 2 * (m - 1) if name in _REAL_OUT and last else m
            if n < 1:
                raise ValueError(f"fft_{name}: invalid number of data points ({n}) along "
                                 f"axis {a}")
            shape[i] = n // 2 + 1 if name in _REAL_IN and last else n
        single = x.dtype in (dt.float32, dt.complex64)
        if name in _REAL_OUT:
            return tuple(shape), dt.float32 if single else dt.float64
        return tuple(shape), dt.complex64 if single else dt.complex128
    meta.__name__ = f"fft_{name}_meta"
    return meta


def _fft_op(name, schema_args, dtypes, samples):
    getter = attrgetter(f"fft.{name}")
    # The standard's fft functions take n/axis/norm (s/axes/norm) keyword-only, and
    # array-api-compat's wrappers have ``xp`` as their second parameter: pass by name.
    params = ("n", "axis", "norm") if schema_args == _ONE else ("s", "axes", "norm")

    meta = _fft_meta(name, schema_args == _MANY)

    def impl(xp, x, *args, **kwargs):
        x = to_float(xp, x)  # Note [Integer inputs of float functions] in elementwise.py
        shape, dtype = meta(mf.ArraySpec(x), *args, **kwargs)  # Note [FFT shapes]
        kwargs.update(zip(params, args))
        if schema_args == _MANY and not x.ndim:  # no axis to transform: x, as complex
            if name in _REAL_IN or name in _REAL_OUT:
                raise ValueError(f"fft_{name}: expected a tensor of at least one dimension")
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
