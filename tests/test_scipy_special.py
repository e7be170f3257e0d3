"""The special functions' CPU kernels with and without SciPy (Note [SciPy on NumPy] in
ops/_scipy_special.py): SciPy is imported by the first call that wants it, never by
``import mdtensor``, and an install without it computes the same values with the Array API
kernels."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import mdtensor as md

pytest.importorskip("scipy")

#: (name, call) of every op whose CPU kernel may call SciPy
CALLS = {
    "erf": "md.erf(x)", "erfc": "md.erfc(x)", "erfinv": "md.erfinv(x / 4)",
    "lgamma": "md.lgamma(x)", "digamma": "md.digamma(x)", "sigmoid": "md.sigmoid(x)",
    "polygamma0": "md.polygamma(0, x)", "polygamma2": "md.polygamma(2, x)",
    "gelu": "md.nn.functional.gelu(x)",
}

_VALUES = [-3.7, -2.5, -0.5, -0.0, 0.0, 1e-8, 0.3, 1.0, 2.0, 3.9, 25.0,
           float("inf"), float("-inf"), float("nan")]


def _results(block_scipy: bool) -> dict:
    code = f"""
        import sys, json, warnings
        warnings.simplefilter("ignore")
        if {block_scipy}:
            sys.modules["scipy"] = None  # import scipy raises ImportError
        import numpy as np, mdtensor as md
        imported = "scipy" in sys.modules and sys.modules["scipy"] is not None
        out = {{"imported at import": imported}}
        for dtype in ("float32", "float64"):
            x = md.asarray(np.array({[repr(v) for v in _VALUES]!r}).astype(dtype))
            for name, call in {CALLS!r}.items():
                out[f"{{name}} {{dtype}}"] = [repr(float(v)) for v in eval(call).numpy()]
        out["scipy imported"] = "scipy.special" in sys.modules
        print(json.dumps(out))
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_kernels_with_and_without_scipy_agree():
    with_scipy, without = _results(False), _results(True)
    assert with_scipy.pop("imported at import") is False  # imported on first use
    assert without.pop("imported at import") is False
    assert with_scipy.pop("scipy imported") is True
    assert without.pop("scipy imported") is False
    for key, got in with_scipy.items():
        a = np.array([float(v) for v in got])
        b = np.array([float(v) for v in without[key]])
        rtol = 2e-3 if key.endswith("float32") else 1e-9  # float32 lgamma/digamma near zeros
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-6, equal_nan=True, err_msg=key)


def test_special_values_match_the_array_api_kernels():
    # the CPU kernels' values where SciPy's own differ (lgamma(-inf), polygamma's range)
    x = md.asarray([float("-inf"), float("inf"), -30.5, -30.0])
    assert md.lgamma(x).tolist()[:2] == [float("inf"), float("inf")]
    got = md.polygamma(2, x).numpy()
    assert np.isneginf(got[0]) and np.isnan(got[1]) and np.isnan(got[2])
    assert np.isneginf(got[3])


@pytest.mark.parametrize("device", ["cpu", "jax"])
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfc", "erfinv"])
def test_half_precision_is_computed_in_float32(name, device):
    # Note [Half precision special functions] (ops/special_functions.py): lgamma's
    # coefficients overflowed float16, which made every value NaN
    torch = pytest.importorskip("torch")
    if device == "jax":
        pytest.importorskip("jax")
    values = [-2.5, -0.5, 0.5, 0.9, 1.5, 3.0, 20.0] if name != "erfinv" else \
        [-0.9, -0.5, 0.0, 0.3, 0.75]
    x = np.array(values, np.float16)
    got = getattr(md, name)(md.asarray(x, device=device))
    want = getattr(torch, name)(torch.from_numpy(x)).numpy()
    assert got.dtype == md.float16
    np.testing.assert_allclose(np.asarray(got.cpu().numpy(), np.float32),
                               want.astype(np.float32), rtol=2e-3)


def test_polygamma_kernel_hands_other_calls_to_the_generic_kernel():
    # psi serves order 0 of float32/float64 arrays; an int tensor, another order and a
    # bad order take the generic kernel, which converts, computes and raises as before
    x = md.asarray([1.0, 2.5, 4.0], dtype=md.float64)
    np.testing.assert_allclose(md.polygamma(0, md.asarray([1, 2, 4])).numpy(),
                               md.polygamma(0, md.asarray([1.0, 2.0, 4.0])).numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(md.polygamma(0, x).numpy(), md.digamma(x).numpy())
    with pytest.raises(ValueError, match="polygamma: n must be non-negative"):
        md.polygamma(-1, x)
