"""The FFTs' NumPy kernels against ``numpy.fft``: the small transforms computed as products
with a coefficient matrix (Note [Small FFTs as products] in ops/fft.py) and pocketfft's
larger ones, along every axis, cut and padded, under every normalization; and the 2-D ops'
errors (Note [Two-dimensional FFT ops] in ops/fft_planes.py)."""

from __future__ import annotations

import numpy as np
import pytest

import mdtensor as md

_NORMS = ("backward", "forward", "ortho")


def _input(kind, shape, dtype, rng):
    x = rng.standard_normal(shape)
    if kind not in ("rfft", "ihfft") and dtype in ("complex64", "complex128"):
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def _check(got, want, dtype):
    tol = 2e-5 if dtype in ("float32", "complex64") else 1e-12
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("kind", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
@pytest.mark.parametrize("dtype", ["float32", "complex64", "float64", "complex128"])
@pytest.mark.parametrize("shape", [(7,), (3, 6), (2, 16, 5), (4, 40)])
def test_one_dimensional_transforms(kind, dtype, shape):
    if kind in ("rfft", "ihfft") and dtype.startswith("complex"):
        pytest.skip("a real-input transform")
    rng = np.random.default_rng(0)
    x = _input(kind, shape, dtype, rng)
    single = dtype in ("float32", "complex64")
    for axis in range(-len(shape), len(shape)):
        for n in (None, 1, 5, 16, 17):
            for norm in _NORMS:
                got = getattr(md.fft, kind)(md.asarray(x), n=n, axis=axis, norm=norm)
                want = getattr(np.fft, kind)(x, n=n, axis=axis, norm=norm)
                if single:
                    want = want.astype(np.complex64 if want.dtype.kind == "c" else np.float32)
                assert got.dtype == md.asarray(want).dtype
                _check(got.to("cpu").numpy(), want, dtype)


@pytest.mark.parametrize("kind", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "rfftn"])
@pytest.mark.parametrize("shape", [(4, 6), (2, 3, 8), (20, 3), (9, 9)])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_two_dimensional_transforms(kind, shape, dtype):
    rng = np.random.default_rng(1)
    dtype = "float64" if "rfft" in kind and dtype == "complex128" else dtype
    x = _input(kind[:-1], shape, dtype, rng)
    for s in (None, (5, 4), (9, 10)):
        for norm in _NORMS:
            for a in (x, x[..., ::-1]):  # contiguous and not
                axes = {"axes": (-2, -1)} if kind.endswith("n") else {}  # the 2-D default
                got = getattr(md.fft, kind)(md.asarray(a), s=s, norm=norm, **axes)
                want = getattr(np.fft, kind)(a, s=s, axes=(-2, -1), norm=norm)
                _check(got.to("cpu").numpy(), want, dtype)


@pytest.mark.parametrize("kind", ["fft2", "ifft2", "rfft2", "irfft2"])
def test_two_dimensional_errors(kind):
    with pytest.raises(IndexError, match=f"fft_{kind}: axis -2 is out of range"):
        getattr(md.fft, kind)(md.ones((3,)))
    with pytest.raises(IndexError, match=f"fft_{kind}: axis 5 is out of range"):
        getattr(md.fft, kind)(md.ones((3, 4)), axes=(0, 5))


def test_small_transforms_leave_the_odd_cases_to_the_generic_kernel():
    # no rows to transform, and a complex input of a real-input transform (an error)
    got = md.fft.rfftn(md.zeros((0, 3)), axes=(1,))
    assert got.shape == (0, 2) and got.dtype == md.complex64
    with pytest.raises(TypeError, match="fft_rfft2"):
        md.fft.rfft2(md.zeros((2, 2), dtype=md.complex64))


@pytest.mark.parametrize("name", ["fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
                                  "rfftn", "irfftn"])
def test_a_bad_norm_of_a_small_nd_transform_is_named_after_the_op(name):
    # Note [Small FFTs as products]: the product path leaves a bad norm to the generic
    # kernel, whose error names the op (NumPy's own message named none)
    x = md.asarray(np.ones((4, 4), np.float32))
    with pytest.raises(ValueError, match=f"fft_{name}: Invalid norm"):
        getattr(md.fft, name)(x, norm="bogus")
