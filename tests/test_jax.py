"""The JAX backend: devices, explicit 64-bit types, mutation through Functionalize,
DLPack transfers and autograd.  Skips as a whole when JAX is not installed."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import to_numpy

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
    assert "Functionalize" not in str(md.asarray([1.0], device="cpu").keyset)


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
    np.testing.assert_array_equal(to_numpy(j), c.numpy())
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
        grads[dev] = a.grad.to("cpu").numpy()
    np.testing.assert_allclose(grads["jax"], grads["cpu"], rtol=1e-12)
    expected = np.exp(vals) * (1 + np.asarray(vals))
    np.testing.assert_allclose(grads["jax"], expected, rtol=1e-12)


# ---------------------------------------------------------------------------------------
# Note [JAX kernels] (backends/jax_backend.py): jitted JAX-key kernels for pointwise ops and
# reductions.  They must compute what the catalogue's generic kernels compute, and every
# layer above the backend must still see every op.


def _jax_kernel(op):
    from mdtensor.dispatch.keys import DispatchKey

    kernel, rung = op.resolve(DispatchKey.JAX)
    return kernel, rung


def test_hot_ops_get_jitted_leaf_kernels():
    from mdtensor.dispatch.kernel import LEAF_KERNELS

    md.asarray([1.0], device="jax")  # the backend registers its kernels when it loads
    aten = md.ops.aten
    for op in (aten.exp.default, aten.add.Tensor, aten.mul.Tensor, aten.sum.default,
               aten.mean.default, aten.max.default):
        kernel, rung = _jax_kernel(op)
        assert kernel.name == f"jax_jit[{op.name}]" and rung.startswith("1.")
        assert kernel.fn in LEAF_KERNELS  # as the ArrayAPI kernel it replaces
    # In-place, out= and Scalar overloads keep the generic kernels.
    for op in (aten.exp_.default, aten.exp.out, aten.add.Scalar, aten.add_.Tensor):
        assert not _jax_kernel(op)[0].name.startswith("jax_jit")


def _generic(op, *args, **kwargs):
    from mdtensor.dispatch.keys import DispatchKey

    return op.kernels_for(DispatchKey.ArrayAPI)[0].fn(*args, **kwargs)


def _same(got, expected):
    assert got.device.type == "jax" and got.dtype == expected.dtype
    assert got.shape == expected.shape
    np.testing.assert_array_equal(to_numpy(got), to_numpy(expected))


@pytest.mark.parametrize("dtype", [md.float32, md.float64, md.int8, md.int64, md.bool])
def test_jitted_kernels_compute_what_the_generic_kernels_compute(dtype):
    aten = md.ops.aten
    a = np.arange(-3, 3).reshape(2, 3)
    x = md.asarray(a % 2 if dtype == md.bool else a, dtype=dtype, device="jax")
    y = md.asarray(np.ones((1, 3)), dtype=dtype, device="jax")
    calls = [
        (aten.exp.default, (x,), {}),  # int -> float32 (traced once per dtype)
        (aten.abs.default, (x,), {}) if dtype != md.bool else None,
        (aten.isnan.default, (x,), {}),
        (aten.mul.Tensor, (x, y), {}),  # broadcasting
        (aten.maximum.Tensor, (x, y), {}) if dtype != md.bool else None,
        (aten.add.Tensor, (x, y), {"alpha": 2}) if dtype != md.bool else None,  # generic
        (aten.eq.Tensor, (x, y), {}),
        (aten.sum.default, (x,), {}),  # int8 -> int64
        (aten.sum.default, (x, [0, 1]), {}),  # a list axis is a static tuple
        (aten.sum.default, (x, 1, True), {}),
        (aten.sum.default, (x,), {"axis": 0, "dtype": md.float64}),
        (aten.max.default, (x,), {"axis": [1]}),  # keyword-only axis
    ]
    if dtype.kind == "f":
        calls += [(aten.var.default, (x,), {"axis": 1, "correction": 1.0}),
                  (aten.logsumexp.default, (x,), {"axis": -1}),
                  (aten.sigmoid.default, (x,), {})]
    for call in filter(None, calls):
        op, args, kwargs = call
        got = op(*args, **kwargs)
        assert _jax_kernel(op)[0].name.startswith("jax_jit")
        _same(got, _generic(op, *args, **kwargs))


def test_jitted_kernels_raise_what_the_generic_kernels_raise():
    aten = md.ops.aten
    empty = md.asarray(np.zeros((2, 0)), device="jax")
    two, three = md.zeros(2, device="jax"), md.zeros(3, device="jax")
    for op, args, kwargs in [(aten.max.default, (empty,), {"axis": 1}),  # no identity
                             (aten.add.Tensor, (two, three), {})]:  # shapes
        with pytest.raises(Exception) as generic:
            _generic(op, *args, **kwargs)
        with pytest.raises(type(generic.value)) as jitted:
            op(*args, **kwargs)
        assert str(jitted.value).split("\n")[0] == str(generic.value).split("\n")[0]
    with pytest.raises(ValueError, match="same device"):
        md.mul(two, md.zeros(2, device="cpu"))


def test_every_layer_sees_the_ops_of_jitted_kernels():
    from mdtensor.modes import LoggingMode

    def program(x):
        return md.sum(md.exp(x) * x + x)

    # Modes (the Python key)
    x = md.asarray([0.5, -1.0, 2.0], dtype=md.float64, device="jax")
    with LoggingMode() as mode:
        program(x)
    names = [line.split("(")[0] for line in mode.log]
    assert names == ["aten::exp", "aten::mul.Tensor", "aten::add.Tensor", "aten::sum"]
    # Autograd (first and second order) through the jitted kernels
    for dev in ("cpu", "jax"):
        w = md.asarray([0.5, -1.0, 2.0], dtype=md.float64, device=dev, requires_grad=True)
        (g,) = md.autograd.grad(program(w), (w,), create_graph=True)
        (gg,) = md.autograd.grad(g.sum(), (w,))
        if dev == "cpu":
            expected = (g.tolist(), gg.tolist())
    np.testing.assert_allclose(g.tolist(), expected[0], rtol=1e-12)
    np.testing.assert_allclose(gg.tolist(), expected[1], rtol=1e-12)
    # Functionalize: the transform sees them (wrappers reach the layer) and mutations of
    # their results still reach the base
    def mutating(x):
        y = md.exp(x)
        y[1:].add_(x[1:])
        return md.sum(y, 0), y

    plain = mutating(x.clone())
    functional = md.func.functionalize(mutating)(x.clone())
    for p, f in zip(plain, functional):
        assert f.device.type == "jax" and f.tolist() == p.tolist()


def test_a_kernel_registered_for_jax_wins_over_the_jitted_one():
    import warnings

    calls = []

    def mine(x):
        calls.append(x)
        return md.asarray([42.0], device="jax")

    x = md.asarray([1.0], device="jax")
    with md.library.Library("aten", "IMPL") as lib:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Overriding a previously registered kernel"
            lib.impl("exp", mine, "JAX")
        assert md.exp(x).tolist() == [42.0] and calls
    assert md.exp(x).tolist() == [pytest.approx(np.e)]
    assert _jax_kernel(md.ops.aten.exp.default)[0].name == "jax_jit[aten::exp]"


def test_views_of_a_zero_d_base_follow_in_place_changes():
    # Every element of a view of a 0-d base aliases it (Functionalize's write-back).
    x = md.asarray(3.0, device="jax")
    y, z = md.flatten(x), x[None]
    x.add_(1.5)
    assert y.tolist() == [4.5] and z.tolist() == [4.5]
    y.mul_(2)
    assert x.item() == 9.0 and z.tolist() == [9.0]
