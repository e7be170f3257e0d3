"""Hybrid sparse COO tensors (docs/SPARSE.md, Note [One hybrid COO for every backend] in
backends/hybrid_sparse.py): sparse leading dimensions, dense trailing ones.  Every op
against its dense equivalent over shapes, sparse dimensions and densities (empty and full
included), gradients, meta and fake shapes, files, devices, and the ops a hybrid tensor
refuses by name.  On the CPU, or on JAX where that is the device under test."""

from __future__ import annotations

import io

import numpy as np
import pytest
from _helpers import TEST_DEVICE, TEST_DEVICE_TYPE, skip_on
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.modes import FakeTensorMode, LoggingMode
from mdtensor.testing import gradcheck

pytestmark = skip_on("dask", "loopback", "cuda",
                     reason="sparse layouts have kernels on the CPU and JAX only")

pytest.importorskip("scipy.sparse")

DEV = TEST_DEVICE if TEST_DEVICE_TYPE == "jax" else "cpu"
KEY = "SparseJAX" if TEST_DEVICE_TYPE == "jax" else "SparseCPU"
EXAMPLES = 5 if TEST_DEVICE_TYPE == "jax" else 30


def dense(a, dtype=None):
    return md.asarray(a, dtype=dtype, device=DEV)


@st.composite
def hybrid_arrays(draw, dtype=np.float64):
    """A NumPy array of 2-3 dimensions, a sparse_dim below its ndim, and about
    ``density`` of its sparse positions non-zero (0 and 1 included)."""
    ndim = draw(st.integers(2, 3))
    shape = tuple(draw(st.lists(st.integers(0, 4), min_size=ndim, max_size=ndim)))
    sparse_dim = draw(st.integers(1, ndim - 1))
    density = draw(st.sampled_from([0.0, 0.3, 1.0]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    a = (rng.standard_normal(shape) + 1).astype(dtype)
    rows = rng.random(shape[:sparse_dim]) >= density
    a[rows] = 0
    return a, sparse_dim


def close(t, want):
    t = t.detach()
    got = t.to_dense() if t.layout is not md.strided else t
    got = got.numpy(force=True)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_a_hybrid_tensor_is_made_read_and_shown_as_pytorchs():
    h = md.sparse_coo_tensor(dense([[0, 2, 0]], md.int64), dense([[1.0, 2.0], [3.0, 4.0],
                                                                 [5.0, 6.0]]), (3, 2))
    assert (h.layout, h.shape, h.nnz, h.sparse_dim(), h.dense_dim()) == (
        md.sparse_coo, (3, 2), 3, 1, 1)
    assert md.DispatchKey[KEY] in h.keyset and not h.is_coalesced()
    assert h.to_dense().tolist() == [[6.0, 8.0], [0.0, 0.0], [3.0, 4.0]]
    c = h.coalesce()
    assert c.is_coalesced() and c.indices().tolist() == [[0, 2]]
    assert c.values().tolist() == [[6.0, 8.0], [3.0, 4.0]]
    with pytest.raises(RuntimeError, match="values: cannot get values on an uncoalesced"):
        h.values()
    assert repr(c).startswith("tensor(indices=tensor([[0, 2]]") or "device=" in repr(c)
    assert "values=tensor([[6., 8.],\n" in repr(c) and "layout=md.sparse_coo" in repr(c)
    # strided, COO and CSR tensors have sparse_dim()/dense_dim() too, as in PyTorch
    d = dense([[0.0, 1.0], [2.0, 0.0]])
    assert (d.sparse_dim(), d.dense_dim()) == (0, 2)
    assert (d.to_sparse().sparse_dim(), d.to_sparse_csr().dense_dim()) == (2, 0)
    assert d.to_sparse(2).dense_dim() == 0 and d.to_sparse(1).dense_dim() == 1


@pytest.mark.parametrize("call, error, message", [
    (lambda: md.sparse_coo_tensor(dense([[0]], md.int64), dense([[1.0, 2.0]]), (1, 3)),
     ValueError, r"size \(1, 3\) does not fit indices of 1 sparse dimensions and values "
                 r"of dense shape \(2,\)"),
    (lambda: md.sparse_coo_tensor(dense([[0]], md.int64), dense([[1.0, 2.0]]), (1,)),
     ValueError, "does not fit"),
    (lambda: md.sparse_coo_tensor(dense([[3]], md.int64), dense([[1.0, 2.0]]), (2, 2)),
     ValueError, "size .* is too small for the indices"),
    (lambda: dense([[1.0]]).to_sparse(3), ValueError, "sparse_dim must be between 1 and"),
    (lambda: dense([[1.0]]).to_sparse(1).to_sparse(2), NotImplementedError,
     "to_sparse: a sparse tensor of sparse_dim 1 to sparse_dim 2"),
    (lambda: dense([[1.0]]).to_sparse(1, layout=md.sparse_csr), ValueError,
     "a CSR tensor has no dense dimensions"),
    (lambda: dense([[1.0]], md.float16).to_sparse(1), TypeError, "got float16"),
])
def test_bad_hybrid_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


@settings(max_examples=EXAMPLES, deadline=None)
@given(hybrid_arrays())
def test_conversions_and_coalesce_match_dense(case):
    a, k = case
    h = dense(a).to_sparse(k)
    assert h.sparse_dim() == k and h.dense_dim() == a.ndim - k and h.is_coalesced()
    rows = a.reshape(a.shape[:k] + (int(np.prod(a.shape[k:])),))
    assert h.nnz == int(np.any(rows != 0, axis=-1).sum())
    close(h, a)
    # duplicates add up, and coalesce() merges them
    idx, vals = h.indices(), h.values()
    twice = md.sparse_coo_tensor(md.cat([idx, idx], 1), md.cat([vals, vals], 0), a.shape)
    assert not twice.is_coalesced()
    close(twice, 2 * a)
    c = twice.coalesce()
    assert c.is_coalesced() and c.nnz == h.nnz
    close(c, 2 * a)


@settings(max_examples=EXAMPLES, deadline=None)
@given(hybrid_arrays(), st.data())
def test_sums_match_dense(case, data):
    a, k = case
    h = dense(a).to_sparse(k)
    axes = data.draw(st.sets(st.integers(0, a.ndim - 1)))
    keep = data.draw(st.booleans())
    axis = tuple(sorted(axes)) if axes else None
    close(md.sum(h, axis=axis, keepdims=keep), np.sum(a, axis=axis, keepdims=keep))


@settings(max_examples=EXAMPLES, deadline=None)
@given(hybrid_arrays(), st.sampled_from(["neg", "abs", "sin", "tanh", "relu", "square"]),
       st.sampled_from([2.0, -0.5]))
def test_elementwise_ops_that_keep_zeros_match_dense(case, name, scalar):
    a, k = case
    h, d = dense(a).to_sparse(k), dense(a)
    for got, want in ((getattr(md, name)(h), getattr(md, name)(d)), (h * scalar, d * scalar),
                      (scalar * h, scalar * d), (h / scalar, d / scalar), (h ** 2, d ** 2),
                      (h.astype(md.float32), d.astype(md.float32))):
        assert got.layout is md.sparse_coo and got.sparse_dim() == k
        close(got, want.numpy(force=True))
    factor = np.arange(1, a.shape[-1] + 1, dtype=a.dtype)
    close(h * dense(factor), a * factor)


@settings(max_examples=EXAMPLES, deadline=None)
@given(hybrid_arrays(), st.integers(0, 2**16))
def test_add_and_sub_match_dense(case, seed):
    a, k = case
    b = np.random.default_rng(seed).standard_normal(a.shape)
    b[np.random.default_rng(seed + 1).random(a.shape[:k]) > 0.5] = 0
    x, y = dense(a).to_sparse(k), dense(b).to_sparse(k)
    s = x + y
    assert s.layout is md.sparse_coo and s.sparse_dim() == k and s.is_coalesced()
    close(s, a + b)
    close(md.sub(x, y, alpha=2), a - 2 * b)
    close(x + dense(b), a + b)  # sparse + dense is dense
    assert (x + dense(b)).layout is md.strided


@settings(max_examples=EXAMPLES, deadline=None)
@given(hybrid_arrays(), st.data())
def test_transposes_within_the_sparse_or_the_dense_dimensions_match_dense(case, data):
    a, k = case
    h = dense(a).to_sparse(k)
    group = data.draw(st.sampled_from([list(range(k)), list(range(k, a.ndim))]))
    axes = list(range(a.ndim))
    axes[group[0]:group[-1] + 1] = data.draw(st.permutations(group))
    p = h.permute(axes)
    assert p.sparse_dim() == k and p.is_coalesced() == (axes[:k] == list(range(k)))
    close(p, np.transpose(a, axes))
    if len(group) > 1:
        close(h.transpose(group[0], group[-1]), np.swapaxes(a, group[0], group[-1]))
    if a.ndim == 3 and k == 1:
        close(h.mT, np.swapaxes(a, 1, 2))
    if k == 1:
        with pytest.raises(NotImplementedError, match="transpose: a sparse and a dense "
                                                      f"dimension .*{KEY}"):
            h.transpose(0, 1)


def test_gradients_match_dense_and_gradcheck():
    idx = dense([[0, 2, 2], [1, 0, 1]], md.int64)
    w = dense(np.arange(24.0).reshape(3, 2, 4) / 10, md.float64)

    def f(v):
        h = md.sparse_coo_tensor(idx, v, (3, 2, 4))
        return md.sum(h.to_dense() * w) + md.sum(md.sum(h * 3 - h, axis=(0, 2)) ** 2)

    v = dense(np.random.default_rng(0).standard_normal((3, 4)), md.float64)
    assert gradcheck(f, (v.requires_grad_(),))
    x = dense(np.random.default_rng(1).standard_normal((3, 4)), md.float64)
    x.requires_grad_()
    md.sum(x.to_sparse(1).to_dense() * 5).backward()
    assert x.grad.tolist() == np.full((3, 4), 5.0).tolist()
    assert gradcheck(lambda t: md.sum(t.to_sparse(1) * 2, axis=0), (x.detach().requires_grad_(),))


def test_ops_without_a_hybrid_kernel_name_the_op_the_layout_and_the_key():
    h = dense([[1.0, 0.0], [0.0, 0.0]]).to_sparse(1)
    for call, op in ((lambda: h @ dense([[1.0], [2.0]]), "matmul"),
                     (lambda: h.reshape(4), "reshape"),
                     (lambda: h[0], "basic_index"), (lambda: md.softmax(h, 0), "softmax"),
                     (lambda: h * h, "mul"), (lambda: md.sparse.sum(h, 0), "_sparse_sum")):
        with pytest.raises(NotImplementedError, match=f"{op}: no kernel for a hybrid sparse "
                                                      f"COO tensor .*{KEY}"):
            call()
    with pytest.raises(NotImplementedError, match=f"to_sparse_csr: .*hybrid.*{KEY}"):
        h.to_sparse_csr()
    with pytest.raises(TypeError, match="crow_indices: expected a sparse CSR tensor"):
        h.crow_indices()
    with md.sparse.densify_fallback(), pytest.warns(UserWarning, match="exp"):
        close(md.exp(h), np.exp([[1.0, 0.0], [0.0, 0.0]]))


def test_files_devices_meta_and_fakes_keep_the_dense_dimensions():
    a = np.zeros((4, 3, 2))
    a[1, 2] = [1.0, 2.0]
    a[3, 0] = [3.0, 0.0]
    h = dense(a).to_sparse(2).requires_grad_()
    buf = io.BytesIO()
    md.save({"h": h}, buf)
    buf.seek(0)
    back = md.load(buf)["h"]
    assert (back.sparse_dim(), back.requires_grad, back.is_coalesced()) == (2, True, True)
    close(back, a)
    moved = h.detach().to("cpu")
    assert moved.device == md.Device("cpu") and moved.sparse_dim() == 2
    close(moved, a)
    m = h.detach().to("meta")
    assert (m.layout, m.shape, m.nnz, m.sparse_dim(), m.device.type) == (
        md.sparse_coo, (4, 3, 2), 2, 2, "meta")
    assert (m.values().shape, m.indices().shape, m.to_dense().shape) == ((2, 2), (2, 2),
                                                                         (4, 3, 2))
    assert (md.sum(m, axis=(1, 2)).shape, (m * 2).nnz, (-m).sparse_dim()) == ((4,), 2, 2)
    assert m.permute((1, 0, 2)).shape == (3, 4, 2) and not m.permute((1, 0, 2)).is_coalesced()
    mm = md.sparse_coo_tensor(md.empty((2, 7), dtype=md.int64, device="meta"),
                              md.empty((7, 5), device="meta"), (10, 10, 5))
    assert (mm.nnz, mm.dense_dim(), mm.to_dense().shape) == (7, 1, (10, 10, 5))
    with pytest.raises(NotImplementedError, match="coalesce: the number of stored elements"):
        mm.coalesce()
    with FakeTensorMode() as mode:
        f = mode.from_tensor(h)
        s = md.sum(f * 2, axis=0)
    assert (f.layout, f.nnz, f.dense_dim(), s.shape) == (md.sparse_coo, 2, 1, (3, 2))
    with LoggingMode() as log:
        md.sum(h.detach(), axis=0)
    assert log.log[0].startswith("aten::sum(float64[4, 3, 2](sparse_coo)")


def test_matches_pytorchs_hybrid_tensors():
    torch = pytest.importorskip("torch")
    a = np.zeros((3, 4, 2))
    a[0, 1] = [1.0, -2.0]
    a[2, 3] = [0.5, 0.0]
    t, h = torch.tensor(a).to_sparse(2), dense(a, md.float64).to_sparse(2)
    assert (t.sparse_dim(), t.dense_dim(), t._nnz()) == (h.sparse_dim(), h.dense_dim(), h.nnz)
    assert t.indices().tolist() == h.indices().tolist()
    assert t.values().tolist() == h.values().tolist()
    assert (t * 3).to_dense().tolist() == (h * 3).to_dense().tolist()
    assert (t + t).coalesce().values().tolist() == (h + h).values().tolist()


@pytest.mark.parametrize("dtype", [md.bool, md.int64, md.complex128])
def test_duplicates_add_up_in_every_dtype(dtype):
    # bool duplicates add as PyTorch's do (True + True is True); JAX's index_add takes no
    # bools, so the hybrid kernels sum them as integers on every backend
    idx = dense([[1, 0, 1]], md.int64)
    vals = dense([[1, 0], [0, 1], [1, 1]], dtype)
    h = md.sparse_coo_tensor(idx, vals, (2, 2))
    want = np.array([[0, 1], [2, 1]]).astype(dtype.numpy)
    assert h.to_dense().dtype == dtype
    np.testing.assert_array_equal(h.to_dense().numpy(force=True), want)
    c = h.coalesce()
    assert c.nnz == 2 and c.indices().tolist() == [[0, 1]]
    np.testing.assert_array_equal(c.values().numpy(force=True), want)
