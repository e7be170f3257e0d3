"""The two-dimensional FFTs PyTorch and NumPy name on their own: ``fft2``, ``ifft2``,
``rfft2``, ``irfft2`` -- the n-dimensional transforms over the last two axes by default
(``md.fft.fft2(x)`` is ``md.fft.fftn(x, axes=(-2, -1))``).

Note [Two-dimensional FFT ops]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
They were composites calling the ``fftn`` ops, which dispatched twice and recorded the n-d
op; each is an op of its own now (as PyTorch's ``fft_fft2``), with the ``fftn`` op's kernels
given ``axes`` (default ``(-2, -1)``): the generic impl and Meta kernel of ops/fft.py (whose
errors name the 2-D op), its NumPy kernel, and its derivative (ops/fft_derivatives.py).
"""

from __future__ import annotations

import numpy as np

from ._cpu_kernels import register_direct
from ._decl import CATALOGUE, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import FLOATING, FLOATS
from .fft import FFT_NAMES, direct_transform, transform_kernels

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _plane(name):
    """``(impl, meta, direct)`` of ``fft_<name>2``: ``fft_<name>n``'s over the last two axes
    by default (Note [Two-dimensional FFT ops])."""
    impl_n, meta_n = transform_kernels(f"{name}n", f"fft_{name}2")
    direct_n = direct_transform(f"{name}n")

    def impl(xp, x, s=None, axes=(-2, -1), norm="backward"):
        return impl_n(xp, x, s, axes, norm)

    def meta(x, s=None, axes=(-2, -1), norm="backward"):
        return meta_n(x, s, axes, norm)

    def direct(x, s=None, axes=(-2, -1), norm="backward"):
        return direct_n(x, s, axes, norm)

    impl.__name__ = f"{name}2"
    return impl, meta, direct_n and direct


def _samples(shape):
    def samples(dtype, rng):
        x = make_array(shape, dtype, rng)
        return [SampleInput((x,)), SampleInput((x,), {"norm": "ortho"}),
                SampleInput((x, [4, 6])), SampleInput((x,), {"axes": [0, 2]})]
    return samples


for _name, _dtypes, _shape in (("fft", FLOATING, (2, 4, 6)), ("ifft", FLOATING, (2, 4, 6)),
                               ("rfft", FLOATS, (2, 4, 6)), ("irfft", FLOATING, (2, 4, 4))):
    _ref = getattr(np.fft, f"{_name}2")
    _impl, _meta, _direct = _plane(_name)
    defop(f"fft_{_name}2(Tensor self, int[1]? s=None, int[1] axes=[-2,-1], "
          f"str norm=\"backward\") -> Tensor", impl=_impl, meta=_meta, names=(),
          accepts="biuf" if _name == "rfft" else None,
          info=OpInfo(ref=lambda x, s=None, axes=(-2, -1), norm="backward", _ref=_ref:
                      _ref(x, s, axes, norm), dtypes=_dtypes, samples=_samples(_shape),
                      rtol=1e-4, atol=1e-4))
    if _direct is not None:
        register_direct(CATALOGUE[f"aten::fft_{_name}2"].functional[0], _direct)
    FFT_NAMES[f"{_name}2"] = f"fft_{_name}2"
