"""The JAX backend: devices, explicit 64-bit types, mutation through Functionalize,
DLPack transfers and autograd.  Skips as a whole when JAX is not installed."""

from __future__ import annotations

import numpy as np
import pytest

import mdtensor as md

pytest.importorskip("jax", reason="JAX not installed (pip install 'jax[cpu]')")


def test_devices_and_bad_index():
    x = md.asarray([1.0], device="jax:0")
    assert str(x.device) == "jax" or str(x.device) == "jax:0"
    assert x.device.backend.name == "jax"
    n = x.device.backend.device_count()
    with pytest.raises(ValueError, match=f"jax:{n}"):
        md.asarray([1.0], device=f"jax:{n}")


def test_dtypes_are_explicit_64_bit_enabled():
    assert md.asarray([1.0, 2.0], device="jax").dtype == md.float32  # mdtensor default
    assert md.asarray([1, 2], device="jax").dtype == md.int64
    x = md.asarray([1.0, 2.0], dtype=md.float64, device="jax")
    assert x.dtype == md.float64 and str(x._data.dtype) == "float64"
    y = (x * 3).sum()
    assert y.dtype == md.float64
    assert md.zeros(3, dtype=md.complex128, device="jax").dtype == md.complex128


def test_every_jax_tensor_carries_functionalize():
    x = md.asarray([1.0, 2.0], device="jax")
    assert "Functionalize" in str(x.keyset)
    assert "Functionalize" in str((x + 1).keyset)
    assert "Functionalize" not in str(md.asarray([1.0]).keyset)


def test_inplace_ops_and_setitem_mutate_the_tensor():
    x = md.asarray([1.0, 2.0, 3.0], device="jax")
    v0 = x._version
    x.add_(1)
    x[0] = 10.0
    x.mul_(md.asarray([1.0, 2.0, 1.0], device="jax"))
    assert x.tolist() == [10.0, 6.0, 4.0]
    assert x._version > v0
    assert x.device.type == "jax"


def test_mutation_through_a_view_reaches_the_base():
    x = md.asarray([1.0, 2.0, 3.0], device="jax")
    v = x[1:]
    v.add_(1)
    assert x.tolist() == [1.0, 3.0, 4.0]


def test_every_alias_follows_a_mutation():
    x = md.arange(6.0, device="jax").reshape(2, 3)
    row, col, sub = x[1], x.T[0], x[1][1:]
    x.add_(1)  # the base: all views regenerate
    assert row.tolist() == [4.0, 5.0, 6.0] and col.tolist() == [1.0, 4.0]
    sub.mul_(-1)  # a view of a view: base and sibling views follow
    assert x.tolist() == [[1.0, 2.0, 3.0], [4.0, -5.0, -6.0]]
    assert row.tolist() == [4.0, -5.0, -6.0] and sub.tolist() == [-5.0, -6.0]
    col[1] = 40.0  # setitem through a transposed view
    assert x[1, 0].item() == 40.0 and row.tolist()[0] == 40.0
    a, b = x.reshape(-1).split([2, 4])
    b.mul_(0)
    assert x.tolist() == [[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]]


def test_out_into_a_view_reaches_the_base():
    x = md.zeros(4, device="jax")
    md.ops.aten.exp.out(md.zeros(2, device="jax"), out=x[1:3])
    assert x.tolist() == [0.0, 1.0, 1.0, 0.0]


def test_view_mutation_with_autograd_matches_numpy():
    def run(device):
        w = md.asarray([1.0, 2.0, 3.0], device=device, requires_grad=True)
        y = w * 2
        y[1:].mul_(w[:2])
        y.sum().backward()
        return y.tolist(), w.grad.tolist()

    assert run("jax") == run("cpu")


def test_bad_inplace_leaves_tensor_and_version_unchanged():
    x = md.asarray([1.0, 2.0], device="jax")
    v0 = x._version
    with pytest.raises((TypeError, ValueError, RuntimeError)):
        x.add_(md.asarray([1.0, 2.0, 3.0], device="jax"))
    assert x.tolist() == [1.0, 2.0] and x._version == v0


@pytest.mark.parametrize("dtype", [md.float32, md.float64, md.int64, md.bool])
def test_to_cpu_and_back(dtype):
    a = np.arange(6).reshape(2, 3) % 2 if dtype == md.bool else np.arange(6).reshape(2, 3)
    x = md.asarray(a, dtype=dtype, device="jax")
    c = x.to("cpu")
    assert c.device.type == "cpu" and c.dtype == dtype
    assert isinstance(c._data, np.ndarray)
    j = c.to("jax")
    assert j.device.type == "jax" and j.dtype == dtype
    np.testing.assert_array_equal(np.asarray(j._data), np.asarray(c._data))
    # The CPU copy is independent of the JAX tensor.
    c[0, 0] = 1
    assert x.tolist() == j.tolist()


def test_autograd_matches_numpy_backend():
    vals = [0.5, -1.0, 2.0]
    grads = {}
    for dev in ("cpu", "jax"):
        a = md.asarray(vals, dtype=md.float64, device=dev, requires_grad=True)
        out = (md.exp(a) * a).sum()
        out.backward()
        assert a.grad.device.type == dev
        grads[dev] = np.asarray(a.grad.to("cpu")._data)
    np.testing.assert_allclose(grads["jax"], grads["cpu"], rtol=1e-12)
    expected = np.exp(vals) * (1 + np.asarray(vals))
    np.testing.assert_allclose(grads["jax"], expected, rtol=1e-12)
