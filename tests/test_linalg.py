"""``md.linalg``: what the op catalogue's sweeps (tests/test_opinfo.py,
tests/test_cross_backend.py) do not cover."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import backend_params, to_numpy

import mdtensor as md

DEVICES = backend_params("cpu", "loopback", "jax")


@pytest.mark.parametrize("device", DEVICES)
def test_tolerances_may_be_tensors(device):
    # The standard's rtol is a number or an array (broadcast against the batch); the
    # generic kernels pass the tensor's array, never the tensor (array_api_strict and JAX
    # would convert it through __array__, which only CPU tensors allow).
    a = np.random.default_rng(0).normal(size=(2, 4, 3))
    x = md.asarray(a, device=device)
    for rtol in (0.1, md.asarray(0.1, dtype=md.float64, device=device)):
        np.testing.assert_allclose(to_numpy(md.linalg.pinv(x, rtol=rtol)),
                                   np.linalg.pinv(a, rtol=0.1), rtol=1e-10)
    batched = md.asarray([0.1, 0.9], dtype=md.float64, device=device)
    assert md.linalg.matrix_rank(x, rtol=batched).tolist() == np.linalg.matrix_rank(
        a, rtol=np.array([0.1, 0.9])).tolist()
    np.testing.assert_allclose(to_numpy(md.linalg.pinv(x, rtol=batched)),
                               np.linalg.pinv(a, rtol=np.array([0.1, 0.9])), rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
def test_matrix_rank_tolerance_is_relative_to_the_largest_singular_value(device):
    # Singular values 10, 1, 0.05: rtol=0.01 keeps those above 0.1 (JAX's own
    # matrix_rank takes a given rtol as an absolute tolerance and counts 3).
    x = md.asarray(np.diag([10.0, 1.0, 0.05]), device=device)
    assert md.linalg.matrix_rank(x, rtol=0.01).tolist() == 2
    assert md.linalg.matrix_rank(x).tolist() == 3
    assert md.linalg.matrix_rank(x).dtype == md.int64
    assert md.linalg.matrix_rank(md.zeros((2, 0, 3), device=device)).tolist() == [0, 0]


@pytest.mark.parametrize("device", DEVICES[1:])
def test_a_tolerance_on_another_device_is_refused(device):
    x = md.asarray(np.eye(3), device=device)
    for fn in (md.linalg.pinv, md.linalg.matrix_rank):
        with pytest.raises(ValueError, match=r"linalg_\w+: expected all tensors to be on "
                                             r"the same device.*cpu"):
            fn(x, rtol=md.asarray(0.1, device="cpu"))


def test_norms_scale_instead_of_overflowing():
    # Note [Scaled norms]: |x|^2 overflowed
    assert md.linalg.vector_norm(md.asarray([2e245], dtype=md.float64)).item() == 2e245
    big = md.asarray([[3e30, 4e30], [0.0, 0.0]], dtype=md.float32)
    np.testing.assert_allclose(to_numpy(md.linalg.vector_norm(big)), 5e30, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(md.linalg.matrix_norm(big)), 5e30, rtol=1e-6)
    np.testing.assert_allclose(to_numpy(md.linalg.vector_norm(big, ord=3, axis=1)),
                               [(27 + 64) ** (1 / 3) * 1e30, 0.0], rtol=1e-6)
    tiny = md.asarray([3e-200, 4e-200], dtype=md.float64)
    np.testing.assert_allclose(to_numpy(md.linalg.vector_norm(tiny)), 5e-200, rtol=1e-14)
    special = md.asarray([[math.inf, 1.0], [math.nan, 1.0], [0.0, 0.0]], dtype=md.float64)
    got = to_numpy(md.linalg.vector_norm(special, axis=1))
    assert got[0] == math.inf and math.isnan(got[1]) and got[2] == 0.0
    assert md.linalg.vector_norm(md.zeros((2, 0)), axis=1).tolist() == [0.0, 0.0]


def test_cross_needs_3_vectors():
    # NumPy's cross takes 2-vectors (and gave 0.0 here); the Array API and PyTorch do not
    for dev in (None, "meta"):
        a = md.asarray([1.0, 2.0], device=dev)
        with pytest.raises(ValueError, match="linalg.cross: inputs dimension -1 must have "
                                             "length 3, got 2 and 2"):
            md.linalg.cross(a, a)
    x = md.asarray([[1.0, 0.0, 0.0]])
    y = md.asarray([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert to_numpy(md.linalg.cross(x, y)).tolist() == [[0.0, 0.0, 1.0], [0.0, -1.0, 0.0]]
    assert md.linalg.cross(x.to("meta"), y.to("meta")).shape == (2, 3)


def test_vecdot_contracts_axes_of_one_size():
    # the Array API and NumPy: the other axes broadcast, the contracted ones do not (a
    # (0,) and a (1,) vector gave 0.0; PyTorch raises for them)
    for dev in (None, "meta"):
        with pytest.raises(ValueError, match="vecdot: the contracted axis -1 has sizes 0 "
                                             "and 1; expected equal sizes"):
            md.vecdot(md.zeros((0,), device=dev), md.ones((1,), device=dev))
        with pytest.raises(ValueError, match="sizes 1 and 3"):
            md.vecdot(md.ones((2, 1), device=dev), md.ones((2, 3), device=dev))
    x, y = md.asarray([[1.0, 2.0], [3.0, 4.0]]), md.asarray([1.0, -1.0])
    assert to_numpy(md.vecdot(x, y)).tolist() == [-1.0, -1.0]


def test_lstsq_drivers_return_what_pytorchs_do():
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    want_x, want_res, _, want_s = np.linalg.lstsq(a, b)
    for driver in ("gels", "gelsd", "gelss"):
        r = md.linalg.lstsq(md.asarray(a), md.asarray(b), driver=driver)
        np.testing.assert_allclose(to_numpy(r.solution), want_x, rtol=1e-10)
        np.testing.assert_allclose(to_numpy(r.residuals), want_res, rtol=1e-10)
        assert r.rank.shape == ((0,) if driver == "gels" else ())
        assert r.singular_values.shape == ((0,) if driver == "gels" else (3,))
    deficient = np.concatenate([a[:, :2], a[:, :1]], axis=1)  # rank 2: no residuals
    r = md.linalg.lstsq(md.asarray(deficient), md.asarray(b), driver="gelsd")
    assert int(r.rank) == 2 and r.residuals.shape == (0,)
    meta = md.zeros((5, 3), dtype=md.float64, device="meta")
    assert md.linalg.lstsq(meta, md.zeros((5, 2), dtype=md.float64, device="meta"))[0].shape \
        == (3, 2)
    with pytest.raises(NotImplementedError, match="linalg.lstsq: the residuals' shape is "
                                                  "data-dependent"):
        md.linalg.lstsq(meta, md.zeros((5, 2), dtype=md.float64, device="meta"),
                        driver="gelsd")


def _cpu_and_generic(name):
    from mdtensor.ops._decl import CATALOGUE

    from mdtensor.dispatch.keys import DispatchKey

    op = CATALOGUE[f"aten::{name}"].functional[0]
    cpu = op.kernels_for(DispatchKey.CPU)[-1].fn
    assert cpu.__name__ == f"cpu[{op.name}]", cpu.__name__  # the kernel under test is there
    return cpu, op.kernels_for(DispatchKey.ArrayAPI)[-1].fn


def _outcome(fn, *args, **kwargs):
    try:
        return to_numpy(fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001 - compared: the same class and message
        return e


@pytest.mark.parametrize("name", ["linalg_eigvalsh", "linalg_matrix_rank"])
def test_eigvalsh_and_matrix_rank_cpu_kernels_compute_what_the_generic_ones_do(name):
    # Note [Linalg on NumPy]: the LAPACK gufunc on the common case, the generic kernel
    # (and its errors) for the rest
    cpu, generic = _cpu_and_generic(name)
    rng = np.random.default_rng(0)
    rtols = [{}] if name == "linalg_eigvalsh" else [{}, {"rtol": 0.5}, {"rtol": 1},
                                                     {"rtol": md.asarray([0.1, 0.9])}]
    for shape in [(3, 3), (2, 4, 4), (1, 1), (0, 0), (2, 0, 0), (3,), (), (3, 4), (2, 4, 3)]:
        for dtype in ("float32", "float64", "complex64", "int64", "bool"):
            a = rng.standard_normal(shape).astype(dtype)
            if len(shape) >= 2 and shape[-1] == shape[-2]:
                a = a + np.swapaxes(a, -1, -2)
            if dtype == "float64" and a.size:
                a.reshape(-1)[-1] = np.nan  # LAPACK's failure: the generic kernel's error
            for kw in rtols:
                if isinstance(kw.get("rtol"), md.Tensor) and shape[:-2] != (2,):
                    continue
                want = _outcome(generic, md.asarray(a), **kw)
                got = _outcome(cpu, md.asarray(a), **kw)
                if isinstance(want, Exception):
                    assert type(got) is type(want) and str(got) == str(want), (got, want)
                else:
                    assert got.dtype == want.dtype and got.shape == want.shape
                    np.testing.assert_array_equal(got, want)
