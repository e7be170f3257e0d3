"""The two-dimensional FFTs PyTorch and NumPy name on their own: ``fft2``, ``ifft2``,
``rfft2``, ``irfft2`` -- the n-dimensional transforms over the last two axes by default
(``md.fft.fft2(x)`` is ``md.fft.fftn(x, axes=(-2, -1))``).  CompositeImplicitAutograd: the
derivatives, Meta kernels and errors are those of the ``fftn`` ops (ops/fft.py)."""

from __future__ import annotations

import numpy as np

from mdtensor.dispatch.namespaces import namespaces as _namespaces

from ._composite import names_op
from ._decl import OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATING, FLOATS
from .fft import FFT_NAMES

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls


def _plane(name):
    def composite(x, s=None, axes=(-2, -1), norm="backward"):
        return getattr(aten, f"fft_{name}n")(x, s, list(axes), norm)
    composite.__name__ = f"{name}2"
    return composite


def _samples(shape):
    def samples(dtype, rng):
        x = make_array(shape, dtype, rng)
        return [SampleInput((x,)), SampleInput((x,), {"norm": "ortho"}),
                SampleInput((x, [4, 6])), SampleInput((x,), {"axes": [0, 2]})]
    return samples


for _name, _dtypes, _shape in (("fft", FLOATING, (2, 4, 6)), ("ifft", FLOATING, (2, 4, 6)),
                               ("rfft", FLOATS, (2, 4, 6)), ("irfft", FLOATING, (2, 4, 4))):
    _ref = getattr(np.fft, f"{_name}2")
    defop(f"fft_{_name}2(Tensor self, int[1]? s=None, int[1] axes=[-2,-1], "
          f"str norm=\"backward\") -> Tensor",
          composite=names_op(f"fft_{_name}2")(_plane(_name)), names=(),
          info=OpInfo(ref=lambda x, s=None, axes=(-2, -1), norm="backward", _ref=_ref:
                      _ref(x, s, axes, norm), dtypes=_dtypes, samples=_samples(_shape),
                      rtol=1e-4, atol=1e-4))
    FFT_NAMES[f"{_name}2"] = f"fft_{_name}2"
