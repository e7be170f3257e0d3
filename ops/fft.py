"""The Array API FFT extension (``md.fft``): aten ``fft_<name>`` ops.

Transforms of real inputs return complex results (``rfft``) and vice versa (``irfft``);
``fftfreq``/``rfftfreq`` are factories (``device=``).  Outputs follow the Array API:
complex64 for float32 inputs, complex128 for float64.
"""

from __future__ import annotations

from operator import attrgetter

import numpy as np

from mdtensor import _dtypes as dt

from ._decl import OpInfo, SampleInput, defop
from ._factory import deffactory
from ._samples import make_array
from .elementwise import to_float

__all__ = ["FFT_NAMES"]

#: md.fft name -> aten packet name
FFT_NAMES: dict[str, str] = {}

_COMPLEX = (dt.complex64, dt.complex128)
_REAL = (dt.float32, dt.float64)


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


def _fft_op(name, schema_args, dtypes, samples):
    getter = attrgetter(f"fft.{name}")
    # The standard's fft functions take n/axis/norm (s/axes/norm) keyword-only, and
    # array-api-compat's wrappers have ``xp`` as their second parameter: pass by name.
    params = ("n", "axis", "norm") if schema_args == _ONE else ("s", "axes", "norm")

    def impl(xp, x, *args, **kwargs):
        x = to_float(xp, x)  # Note [Integer inputs of float functions] in elementwise.py
        kwargs.update(zip(params, args))
        if kwargs.get("s") is not None:
            kwargs["s"] = tuple(kwargs["s"])
        if kwargs.get("axes") is not None:
            kwargs["axes"] = tuple(kwargs["axes"])
        return _cast_like(getter(xp)(x, **kwargs), x, xp)

    impl.__name__ = name
    ref_fn = getattr(np.fft, name)
    defop(f"fft_{name}(Tensor self, {schema_args}) -> Tensor", impl=impl, names=(),
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
    getter = attrgetter(f"fft.{name}")

    def impl(xp, x, axes=None):
        return getter(xp)(x, axes=None if axes is None else
                          (axes if isinstance(axes, int) else tuple(axes)))

    impl.__name__ = name
    defop(f"fft_{name}(Tensor self, int[1]? axes=None) -> Tensor", impl=impl, names=(),
          meta=lambda x, axes=None: (tuple(x.shape), x.dtype),
          info=OpInfo(ref=getattr(np.fft, name), dtypes=_REAL + _COMPLEX, samples=_s((3, 4))))
    FFT_NAMES[name] = f"fft_{name}"


_shift("fftshift")
_shift("ifftshift")


def _freq(name):
    getter = attrgetter(f"fft.{name}")

    def impl(xp, n, d=1.0, *, dtype=None, device=None):
        if n <= 0:
            raise ValueError(f"{name}: n must be positive, got {n}")
        out = getter(xp)(n, d=d, device=device)
        return xp.astype(out, dtype or xp.float32)

    def meta(n, d=1.0, *, dtype=None, **kwargs):
        size = n if name == "fftfreq" else n // 2 + 1
        return (size,), dt.as_dtype(dtype) if dtype is not None else dt.float32

    deffactory(f"fft_{name}(int n, float d=1.0, *, ScalarType? dtype=None, Device? device=None,"
               f" bool requires_grad=False) -> Tensor", impl, meta, names=())
    FFT_NAMES[name] = f"fft_{name}"


_freq("fftfreq")
_freq("rfftfreq")
