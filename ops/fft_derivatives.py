"""Derivative rules of ``md.fft`` (``ops/fft.py``): each transform's gradient is the
transform in the other direction with the dual normalization, cut or zero-padded back to the
input's length (``rfft``/``irfft`` also weigh the bins they read twice).  They read the
input's shape and dtype only (``reads()``: nothing is saved)."""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import (
    DERIVATIVES,
    is_complex,
    reads,
    rule,
)

__all__: list[str] = []


_DUAL_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _fit(t, axis, size):
    """``t`` cut or zero-padded to ``size`` along ``axis``."""
    have = t.shape[axis]
    if have == size:
        return t
    if have > size:
        return aten.narrow(t, axis, 0, size)
    shape = tuple(size - have if i == axis % t.ndim else s for i, s in enumerate(t.shape))
    return aten.cat([t, aten.zeros(shape, dtype=t.dtype, device=t.device)], axis=axis)


def _real_if(x, gx):
    return aten.real(gx) if x.dtype.kind != "c" else gx


def _c2c_rule(inverse_of):
    @reads()
    def formula(g, out, x, n=None, axis=-1, norm="backward"):
        gx = getattr(aten, inverse_of)(g, None, axis, _DUAL_NORM[norm])
        return (_real_if(x, _fit(gx, axis, x.shape[axis])), None, None, None)
    return formula


def _c2c_n_rule(inverse_of):
    @reads()
    def formula(g, out, x, s=None, axes=None, norm="backward"):
        axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
        if s is not None and axes is None:
            axes_ = list(range(x.ndim - len(s), x.ndim))
        gx = getattr(aten, inverse_of)(g, None, axes_, _DUAL_NORM[norm])
        for a in axes_:
            gx = _fit(gx, a, x.shape[a])
        return (_real_if(x, gx), None, None, None)
    return formula


DERIVATIVES["fft_fft"] = _c2c_rule("fft_ifft")


DERIVATIVES["fft_ifft"] = _c2c_rule("fft_fft")


DERIVATIVES["fft_fftn"] = _c2c_n_rule("fft_ifftn")


DERIVATIVES["fft_ifftn"] = _c2c_n_rule("fft_fftn")


@rule("fft_rfft")
@reads()
def _rfft(g, out, x, n=None, axis=-1, norm="backward"):
    size = n if n is not None else x.shape[axis]
    full = aten.fft_ifft(_fit(g, axis, size), None, axis, _DUAL_NORM[norm])
    return (aten.real(_fit(full, axis, x.shape[axis])), None, None, None)


@rule("fft_rfftn")
@reads()
def _rfftn(g, out, x, s=None, axes=None, norm="backward"):
    axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    if s is not None and axes is None:
        axes_ = list(range(x.ndim - len(s), x.ndim))
    sizes = list(s) if s is not None else [x.shape[a] for a in axes_]
    full = _fit(g, axes_[-1], sizes[-1])
    full = aten.fft_ifftn(full, sizes, axes_, _DUAL_NORM[norm])
    for a in axes_:
        full = _fit(full, a, x.shape[a])
    return (aten.real(full), None, None, None)


def _double_inner_bins(gx, axis, n):
    """irfft reads bins 1..ceil(n/2)-1 twice (as themselves and as their mirror)."""
    half = gx.shape[axis]
    double = n - half
    if double <= 0:
        return gx
    parts = [aten.narrow(gx, axis, 0, 1), aten.mul(aten.narrow(gx, axis, 1, double), 2.0)]
    if half - 1 - double > 0:
        parts.append(aten.narrow(gx, axis, 1 + double, half - 1 - double))
    return aten.cat(parts, axis=axis)


@rule("fft_irfft")
@reads()
def _irfft(g, out, x, n=None, axis=-1, norm="backward"):
    size = n if n is not None else 2 * (x.shape[axis] - 1)
    gx = aten.fft_rfft(g, None, axis, _DUAL_NORM[norm])
    gx = _double_inner_bins(gx, axis, size)
    return (_real_if(x, _fit(gx, axis, x.shape[axis])), None, None, None)


@rule("fft_irfftn")
@reads()
def _irfftn(g, out, x, s=None, axes=None, norm="backward"):
    axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    if s is not None and axes is None:
        axes_ = list(range(x.ndim - len(s), x.ndim))
    last = axes_[-1]
    size = s[-1] if s is not None else 2 * (x.shape[last] - 1)
    gx = aten.fft_rfftn(g, None, axes_, _DUAL_NORM[norm])
    gx = _double_inner_bins(gx, last, size)
    for a in axes_:
        gx = _fit(gx, a, x.shape[a])
    return (_real_if(x, gx), None, None, None)  # a real input (an irfft of reals) gets reals


@rule("fft_hfft")
@reads()
def _hfft(g, out, x, n=None, axis=-1, norm="backward"):
    # hfft(x) = irfft(conj(x)) with the normalization direction swapped
    (gx, *_rest) = _irfft(g, None, x, n, axis, _DUAL_NORM[norm])
    return (aten.conj(gx) if is_complex(gx) else gx, None, None, None)


@rule("fft_ihfft")
@reads()
def _ihfft(g, out, x, n=None, axis=-1, norm="backward"):
    # ihfft(x) = conj(rfft(x)) with the normalization direction swapped
    return _rfft(aten.conj(g), None, x, n, axis, _DUAL_NORM[norm])


def _plane(formula):
    """The rule of a 2-D transform (Note [Two-dimensional FFT ops] in ops/fft_planes.py):
    its n-d transform's, over the last two axes by default."""
    def plane(g, out, x, s=None, axes=(-2, -1), norm="backward"):
        return formula(g, out, x, s, list(axes), norm)
    return reads()(plane)


DERIVATIVES["fft_fft2"] = _plane(DERIVATIVES["fft_fftn"])
DERIVATIVES["fft_ifft2"] = _plane(DERIVATIVES["fft_ifftn"])
DERIVATIVES["fft_rfft2"] = _plane(_rfftn)
DERIVATIVES["fft_irfft2"] = _plane(_irfftn)


@rule("fft_fftshift")
@reads()
def _fftshift(g, out, x, axes=None):
    return aten.fft_ifftshift(g, axes), None


@rule("fft_ifftshift")
@reads()
def _ifftshift(g, out, x, axes=None):
    return aten.fft_fftshift(g, axes), None
