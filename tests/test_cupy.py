"""The CuPy backend (device ``"cuda"``).  Runs unchanged on a machine with CuPy and a GPU;
skips with the reason otherwise."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

import mdtensor as md


def _skip_reason():
    if importlib.util.find_spec("cupy") is None:
        return "CuPy not installed (pip install 'mdtensor[cupy]')"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy installed but no CUDA device present"
    except Exception as e:  # noqa: BLE001 - no driver, no runtime, ...
        return f"CuPy installed but no usable CUDA device ({type(e).__name__}: {e})"
    return None


_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


def test_factories_and_dtypes():
    x = md.asarray([1.0, 2.0], device="cuda")
    assert x.device.type == "cuda" and x.device.backend.name == "cupy"
    assert x.dtype == md.float32
    assert md.zeros(3, dtype=md.float64, device="cuda").dtype == md.float64
    assert "Functionalize" not in str(x.keyset)


def test_views_share_memory_and_inplace_writes():
    x = md.asarray([1.0, 2.0, 3.0], device="cuda")
    v = x[1:]
    v.add_(1)
    x[0] = 10.0
    assert x.tolist() == [10.0, 3.0, 4.0] and v.tolist() == [3.0, 4.0]


def test_results_match_numpy_backend():
    a = np.linspace(-2, 2, 12, dtype=np.float64).reshape(3, 4)
    for f in (lambda t: md.exp(t) * t, lambda t: t.sum(axis=0), lambda t: t @ t.T):
        want = np.asarray(f(md.asarray(a))._data)
        got = f(md.asarray(a, device="cuda")).to("cpu")._data
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_to_cpu_and_back_and_autograd():
    x = md.asarray([0.5, -1.0], dtype=md.float64, device="cuda", requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.to("cpu")._data, [1.0, -2.0])
    c = x.detach().to("cpu")
    c[0] = 9.0
    assert x.tolist() == [0.5, -1.0]
    assert c.to("cuda").device.type == "cuda"


def test_bad_device_index():
    n = md.asarray([1.0], device="cuda").device.backend.device_count()
    with pytest.raises(ValueError, match=f"cuda:{n}"):
        md.asarray([1.0], device=f"cuda:{n}")
