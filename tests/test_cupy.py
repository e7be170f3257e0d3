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
        want = f(md.asarray(a, device="cpu")).numpy()
        got = f(md.asarray(a, device="cuda")).to("cpu").numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_to_cpu_and_back_and_autograd():
    x = md.asarray([0.5, -1.0], dtype=md.float64, device="cuda", requires_grad=True)
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.to("cpu").numpy(), [1.0, -2.0])
    c = x.detach().to("cpu")
    c[0] = 9.0
    assert x.tolist() == [0.5, -1.0]
    assert c.to("cuda").device.type == "cuda"


def test_bad_device_index():
    n = md.asarray([1.0], device="cuda").device.backend.device_count()
    with pytest.raises(ValueError, match=f"cuda:{n}"):
        md.asarray([1.0], device=f"cuda:{n}")


# -- autograd, views, in-place, out= ------------------------------------------------------


def test_backward_accumulates_dense_grads_an_optimizer_can_update():
    # Note [Leaf gradients]: sum's gradient is a broadcast (stride-0) view; .grad must be a
    # dense array of its own (CuPy's flags have no 'writeable').
    w = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cuda", requires_grad=True)
    b = md.asarray([0.5, -0.5], device="cuda", requires_grad=True)
    for _ in range(2):
        md.tanh(w @ w.mT + b).sum().backward()
    assert w.grad.device.type == "cuda" and w.grad._data.flags.c_contiguous
    g = w.grad.to("cpu").numpy().copy()
    w.grad.mul_(0.5)  # an optimizer-style in-place update of .grad
    np.testing.assert_allclose(w.grad.to("cpu").numpy(), g / 2)
    ref = md.asarray(w.detach().to("cpu"), requires_grad=True)
    rb = md.asarray(b.detach().to("cpu"), requires_grad=True)
    for _ in range(2):
        md.tanh(ref @ ref.mT + rb).sum().backward()
    np.testing.assert_allclose(g, ref.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(b.grad.to("cpu").numpy(), rb.grad.numpy(), rtol=1e-6)


def test_mlp_training_step_matches_cpu():
    rng = np.random.default_rng(0)
    params = [rng.standard_normal((6, 5)), np.zeros(5), rng.standard_normal((5, 3)),
              np.zeros(3)]
    x, y = rng.standard_normal((4, 6)), np.eye(3)[[0, 2, 1, 1]]
    grads = {}
    for dev in ("cpu", "cuda"):
        ps = [md.tensor(p, dtype=md.float64, device=dev, requires_grad=True) for p in params]
        h = md.tanh(md.asarray(x, device=dev) @ ps[0] + ps[1])
        logp = md.log_softmax(h @ ps[2] + ps[3], dim=-1)
        loss = -(md.asarray(y, device=dev) * logp).sum() / 4
        loss.backward()
        with md.no_grad():
            for p in ps:
                p.sub_(0.1 * p.grad)
        grads[dev] = [p.detach().to("cpu").numpy() for p in ps]
    for a, b in zip(grads["cpu"], grads["cuda"]):
        np.testing.assert_allclose(b, a, rtol=1e-12)


def test_inplace_and_out_write_the_same_buffer():
    x = md.asarray(np.arange(6.0).reshape(2, 3), device="cuda")
    ptr = x._data.data.ptr
    x.add_(md.ones_like(x))
    x.mul_(2.0)
    out = md.empty((2, 3), dtype=md.float64, device="cuda")
    optr = out._data.data.ptr
    r = md.add(x, x, out=out)
    assert r is out and out._data.data.ptr == optr and x._data.data.ptr == ptr
    np.testing.assert_array_equal(out.to("cpu").numpy(), 4 * (np.arange(6.0) + 1).reshape(2, 3))
    assert x._version == 2


def test_like_factories_keep_the_device():
    x = md.asarray([[1.0, 2.0]], device="cuda")
    for f in (md.zeros_like, md.ones_like, md.empty_like):
        y = f(x)
        assert y.device == x.device and y.shape == x.shape and y.dtype is x.dtype
    assert md.full_like(x, 3.0).to("cpu").tolist() == [[3.0, 3.0]]


# -- indexing -----------------------------------------------------------------------------


def test_setitem_through_index_arrays_last_write_wins_and_checks_bounds():
    x = md.zeros((3, 5), device="cuda")
    x[md.asarray([2, 0, 2], device="cuda")] = md.asarray(
        np.arange(15.0, dtype=np.float32).reshape(3, 5), device="cuda")
    np.testing.assert_array_equal(x.to("cpu").numpy()[2], np.arange(10.0, 15.0))
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 0 with size 3"):
        x[md.asarray([0, 3], device="cuda")] = 1.0
    with pytest.raises(IndexError, match="out of bounds"):
        x[[0], [-6]] = 1.0


@pytest.mark.parametrize("call", [
    lambda x, i: md.take(x, i),
    lambda x, i: md.take_along_axis(x, i, axis=0),
    lambda x, i: md.index_select(x, 0, i),
    lambda x, i: x[i],
], ids=["take", "take_along_axis", "index_select", "getitem"])
def test_out_of_bounds_indices_raise_as_on_the_cpu(call):
    for dev in ("cpu", "cuda"):
        x = md.arange(5.0, device=dev)
        with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with "
                                             "size 5"):
            call(x, md.asarray([1, 5], device=dev))
        assert call(x, md.asarray([-1], device=dev)).to("cpu").tolist() == [4.0]


# -- DLPack and devices -------------------------------------------------------------------


def test_dlpack_to_and_from_the_cpu_and_cupy():
    import cupy

    a = cupy.arange(4.0)
    t = md.from_dlpack(a)  # stays on the GPU, sharing memory
    assert t.device.type == "cuda"
    a[0] = 7.0
    assert t.to("cpu").tolist() == [7.0, 1.0, 2.0, 3.0]
    c = md.from_dlpack(a, device="cpu")
    assert c.device.type == "cpu" and c.tolist() == [7.0, 1.0, 2.0, 3.0]
    assert md.asarray(a, device="cpu").tolist() == [7.0, 1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="copy=False"):
        md.from_dlpack(a, device="cpu", copy=False)
    back = cupy.from_dlpack(t)
    assert int(back[0]) == 7
    h = md.from_dlpack(np.arange(3.0), device="cuda")
    assert h.device.type == "cuda" and h.to("cpu").tolist() == [0.0, 1.0, 2.0]


def test_dlpack_with_jax():
    jax = pytest.importorskip("jax")
    x = md.asarray([1.0, 2.0], device="cuda")
    j = x.to("jax")
    assert j.device.type == "jax" and j.tolist() == [1.0, 2.0]
    assert j.to("cuda").tolist() == [1.0, 2.0]
    arr = jax.numpy.arange(3.0)
    t = md.from_dlpack(arr)  # a JAX array on the GPU is a CUDA tensor; on the CPU a cpu one
    platform = next(iter(arr.devices())).platform
    assert t.device.type == ("cuda" if platform == "gpu" else "cpu")
    assert t.to("cpu").tolist() == [0.0, 1.0, 2.0]


def test_mixed_devices_raise_naming_both():
    x = md.asarray([1.0], device="cuda")
    y = md.asarray([1.0], device="cpu")
    for f in (lambda: x + y, lambda: x.add_(y), lambda: y.add_(x), lambda: md.exp(x, out=y)):
        with pytest.raises(ValueError, match="same device.*(cuda.*cpu|cpu.*cuda)"):
            f()
    assert x.tolist() == [1.0] and y.tolist() == [1.0] and x._version == y._version == 0


# -- the vectorised elementwise kernels (Note [Vectorised elementwise kernels]) ------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
@pytest.mark.parametrize("n", [1, 3, 4, 5, 1000, 4097])
def test_vectorised_kernels_match_cupy(dtype, n):
    import cupy

    rng = np.random.default_rng(n)
    a = cupy.asarray((rng.standard_normal(n) * 10).astype(dtype))
    b = cupy.asarray((rng.standard_normal(n) * 10 + 20).astype(dtype))
    x, y = md.from_dlpack(a), md.from_dlpack(b)
    floats = dtype.startswith("float")
    pairs = [(x + y, a + b), (x - y, a - b), (x * y, a * b), (-x, -a)]
    if floats:
        pairs += [(x / y, a / b), (md.exp(x / 10), cupy.exp(a / 10)),
                  (md.tanh(x), cupy.tanh(a)), (md.sqrt(y), cupy.sqrt(b)),
                  (md.log(y), cupy.log(b)), (md.sin(x), cupy.sin(a)), (md.cos(x), cupy.cos(a))]
    for got, want in pairs:
        assert got.dtype.name == dtype
        np.testing.assert_array_equal(got.to("cpu").numpy(), cupy.asnumpy(want))
    z = md.asarray(a, copy=True)
    z.add_(y)
    z.mul_(y)
    np.testing.assert_array_equal(z.to("cpu").numpy(), cupy.asnumpy((a + b) * b))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(1,), (7,), (4, 10), (64, 256), (3, 2, 1000), (2, 3000)])
def test_row_and_reduction_kernels_match_cupy(dtype, shape):
    import cupy

    rng = np.random.default_rng(sum(shape))
    a = cupy.asarray((rng.standard_normal(shape) * 3).astype(dtype))
    g = cupy.asarray(rng.standard_normal(shape).astype(dtype))
    x, gt = md.from_dlpack(a), md.from_dlpack(g)
    # the kernels sum in another order than CuPy's reductions
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == "float32" else {"rtol": 1e-12, "atol": 1e-11}
    m = a.max(axis=-1, keepdims=True)
    e = cupy.exp(a - m)
    s = e.sum(axis=-1, keepdims=True)
    ls = (a - m) - cupy.log(s)
    sm = e / s
    aten = md.ops.aten
    y, ly = md.from_dlpack(sm), md.from_dlpack(ls)
    pairs = [
        (md.softmax(x, dim=-1), sm), (md.log_softmax(x, dim=x.ndim - 1), ls),
        (aten._softmax_backward_data(gt, y, -1), g * sm - sm * (g * sm).sum(-1, keepdims=True)),
        (aten._log_softmax_backward_data(gt, ly, -1),
         g - cupy.exp(ls) * g.sum(-1, keepdims=True)),
        (aten.tanh_backward(gt, x), g * (1 - a * a)),
        (aten.sigmoid_backward(gt, x), g * (a * (1 - a))),
        (md.sum(x), a.sum()), (md.sum(x, axis=-1), a.sum(-1)),
        (md.sum(x, axis=0, keepdims=True), a.sum(0, keepdims=True)),
        (md.sum(x, axis=tuple(range(x.ndim - 1))), a.sum(tuple(range(a.ndim - 1)))),
    ]
    if x.ndim == 3:
        pairs += [(md.sum(x, axis=(1, 2)), a.sum((1, 2))), (md.sum(x, axis=1), a.sum(1))]
    for got, want in pairs:
        assert got.dtype.name == dtype and got.shape == want.shape
        np.testing.assert_allclose(got.to("cpu").numpy(), cupy.asnumpy(want), **tol)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_and_broadcast_kernels_match_cupy(dtype):
    import cupy

    rng = np.random.default_rng(3)
    a = cupy.asarray(rng.standard_normal((64, 10)).astype(dtype))
    bias = cupy.asarray(rng.standard_normal(10).astype(dtype) + 3)
    x, b = md.from_dlpack(a), md.from_dlpack(bias)
    pairs = [(x * 0.1, a * 0.1), (x / 64, a / 64), (x + 2, a + 2), (x - 1e-3, a - 1e-3),
             (1 - x, 1 - a), (2.5 / (x + 10), 2.5 / (a + 10)), (3 * x, 3 * a),
             (x + b, a + bias), (b + x, bias + a), (x * b, a * bias), (x - b, a - bias),
             (x / b, a / bias), (b - x, bias - a), (md.asarray(b[None], copy=True) + x,
                                                    bias[None] + a)]
    for got, want in pairs:
        assert got.dtype.name == dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.to("cpu").numpy(), cupy.asnumpy(want))
    i = md.from_dlpack(cupy.arange(6))  # integer tensors, bool scalars: the generic kernel
    for f in (lambda t: t * 2, lambda t: t * True, lambda t: t / 2, lambda t: 1.5 - t):
        got, want = f(i), f(i.to("cpu"))
        assert got.dtype is want.dtype and got.tolist() == want.tolist()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (64, 784, 256), (5, 3, 1), (1, 7, 4), (33, 65, 17)])
def test_gemm_matches_cupy_matmul_for_every_layout(dtype, m, k, n):
    import cupy

    rng = np.random.default_rng(m * k * n)
    a = cupy.asarray(rng.standard_normal((m, k)).astype(dtype))
    b = cupy.asarray(rng.standard_normal((k, n)).astype(dtype))
    at = cupy.asarray(cupy.asnumpy(a).T.copy())  # (k, m): .T is a column-major (m, k)
    bt = cupy.asarray(cupy.asnumpy(b).T.copy())
    wide = cupy.zeros((m, k + 3), dtype)
    wide[:, :k] = a  # rows with a leading dimension larger than k
    tol = {"rtol": 1e-5, "atol": 1e-4} if dtype == "float32" else {"rtol": 1e-12,
                                                                    "atol": 1e-12}
    want = cupy.asnumpy(a @ b)
    for x, y in ((a, b), (at.T, b), (a, bt.T), (at.T, bt.T), (wide[:, :k], b)):
        got = md.from_dlpack(x) @ md.from_dlpack(y)
        np.testing.assert_allclose(got.to("cpu").numpy(), want, **tol)
    g = cupy.asarray(rng.standard_normal((m, n)).astype(dtype))
    ga, gb = md.ops.aten.matmul_backward(md.from_dlpack(g), md.from_dlpack(a),
                                         md.from_dlpack(b), [True, True])
    np.testing.assert_allclose(ga.to("cpu").numpy(), cupy.asnumpy(g @ b.T), **tol)
    np.testing.assert_allclose(gb.to("cpu").numpy(), cupy.asnumpy(a.T @ g), **tol)
    ga, gb = md.ops.aten.matmul_backward(md.from_dlpack(g), md.from_dlpack(a),
                                         md.from_dlpack(b), [False, True])
    assert ga is None and gb.shape == (k, n)
    flipped = md.from_dlpack(a[::-1])  # negative strides: the generic kernel
    np.testing.assert_allclose((flipped @ md.from_dlpack(b)).to("cpu").numpy(),
                               cupy.asnumpy(a[::-1] @ b), **tol)


def test_row_kernels_propagate_nan_and_infinities_as_the_generic_path():
    import cupy

    a = cupy.asarray([[1.0, np.nan, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0],
                      [0.0, 1.0, 2.0]], dtype=cupy.float32)
    x = md.from_dlpack(a)
    for f in (lambda t: md.softmax(t, dim=-1), lambda t: md.log_softmax(t, dim=-1),
              lambda t: md.sum(t, axis=-1)):
        got = f(x).to("cpu").numpy()
        want = f(md.asarray(a.get(), device="cpu")).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, equal_nan=True)


def test_vectorised_kernels_leave_other_cases_to_the_generic_kernel():
    import cupy

    a = cupy.arange(12.0, dtype=cupy.float32).reshape(3, 4)
    x = md.from_dlpack(a)
    cases = [
        (x[:, 1:] + x[:, 1:], a[:, 1:] + a[:, 1:]),      # strided
        (x[0, 1:] * x[1, 1:], a[0, 1:] * a[1, 1:]),      # 4-byte aligned only
        (x + x[0], a + a[0]),                            # broadcasting
        (md.add(x, x, alpha=2), a + 2 * a),              # a keyword
        (x + md.asarray(a, dtype=md.float64), a + a.astype(cupy.float64)),  # mixed dtypes
        (md.exp(x.mT), cupy.exp(a.T)),
    ]
    for got, want in cases:
        np.testing.assert_array_equal(got.to("cpu").numpy(), cupy.asnumpy(want))
    v = md.from_dlpack(cupy.arange(8.0))
    v[4:].add_(v[:4])  # disjoint halves, 16-byte aligned: the vectorised kernel
    assert v.to("cpu").tolist() == [0, 1, 2, 3, 4, 6, 8, 10]
    w = md.from_dlpack(cupy.arange(8.0))
    w[2:].add_(w[:-2])  # overlapping, 16-byte aligned: the generic kernel, as on the CPU
    c = md.arange(8.0, dtype=md.float64, device="cpu")
    c[2:].add_(c[:-2])
    assert w.to("cpu").tolist() == c.tolist()


def test_a_user_kernel_for_cuda_wins_over_the_backends_own():
    x = md.asarray([1.0, 2.0], device="cuda")
    with md.library.Library("aten", "IMPL") as lib:
        with pytest.warns(UserWarning, match=r"cuda_kernel\[aten::exp\]"):
            lib.impl("exp", lambda t: md.from_dlpack(t._data * 0 + 42), "CUDA")
        assert md.exp(x).to("cpu").tolist() == [42.0, 42.0]
    assert md.exp(md.asarray([0.0], device="cuda")).to("cpu").tolist() == [1.0]


# -- sparse tensors: the SparseCUDA kernels (Note [One source for SciPy and CuPy] in
# backends/scipy_sparse.py), against the CPU's --------------------------------------------


def test_sparse_tensors_match_the_cpus():
    pytest.importorskip("cupyx.scipy.sparse")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((5, 4))
    a[rng.random((5, 4)) > 0.4] = 0
    w = rng.standard_normal((4, 3))
    for how in ("to_sparse", "to_sparse_csr"):
        c = getattr(md.asarray(a, device="cpu"), how)()
        g = getattr(md.asarray(a, device="cuda"), how)()
        assert md.DispatchKey.SparseCUDA in g.keyset and g.layout is c.layout
        assert g.nnz == c.nnz
        for f in (lambda s, d: s @ d, lambda s, d: md.sum(s, 0),
                  lambda s, d: (s * 2 + s).to_dense(),
                  lambda s, d: md.sin(s).to_dense(), lambda s, d: s.mT.to_dense(),
                  lambda s, d: md.addmm(md.ones((5, 3), device=d.device), s, d)):
            want = f(c, md.asarray(w, device="cpu"))
            got = f(g, md.asarray(w, device="cuda"))
            np.testing.assert_allclose(got.to("cpu").numpy(), want.numpy(), rtol=1e-12)
        moved = c.to("cuda")
        assert moved.device.type == "cuda" and moved.layout is c.layout
    v = md.asarray(a[a != 0], device="cuda", requires_grad=True)
    idx = md.asarray(np.stack(np.nonzero(a)), device="cuda")
    s = md.sparse_coo_tensor(idx, v, a.shape)
    md.sum(s @ md.asarray(w, device="cuda")).backward()
    np.testing.assert_allclose(v.grad.to("cpu").numpy(), (np.ones((5, 3)) @ w.T)[a != 0])
    h = md.asarray(a, device="cuda").to_sparse(1)  # hybrid: the parts on the GPU
    assert h.dense_dim() == 1
    np.testing.assert_allclose(md.sum(h * 3, 1).to("cpu").numpy(), 3 * a.sum(1))
