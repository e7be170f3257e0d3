"""Sparse tensors beyond their kernels (docs/SPARSE.md): meta sparse tensors and
FakeTensorMode, LoggingMode, ``to(device)``, ``md.save``/``md.load``, the version counter
shared through ``values()``, and ``addmm`` with a sparse operand.  Sparse tensors compute on
the CPU, so these tests name ``device="cpu"`` (and ``"meta"``) whatever backend the suite
runs on, and run on every one."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.modes import FakeTensorMode, LoggingMode
from mdtensor.testing import gradcheck

pytest.importorskip("scipy.sparse")

CPU = "cpu"


def dense(a, dtype=None):
    """A dense CPU tensor of ``a`` (the sparse tensors are made from these)."""
    return md.asarray(a, dtype=dtype, device=CPU)


A = np.array([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])


def _sparse(how):
    s = dense(A).to_sparse()
    return s.to_sparse_csr() if how == "csr" else s


def _same_meta(real, meta):
    """``meta`` describes ``real``: shape, dtype, layout, device and (sparse) nnz."""
    assert meta.device == md.Device("meta")
    assert (meta.shape, meta.dtype, meta.layout) == (real.shape, real.dtype, real.layout)
    if real.layout is not md.strided:
        assert meta.nnz == real.nnz
        if real.layout is md.sparse_coo:
            assert meta.is_coalesced() == real.is_coalesced()


# ---------------------------------------------------------------------------------------
# Meta sparse tensors (Note [Stored elements of meta results] in backends/meta_sparse.py)

W = np.arange(6.0).reshape(3, 2)
D = np.linspace(-1.0, 1.0, 6).reshape(2, 3)

#: op name -> f(sparse, dense of the sparse's shape, dense right factor); run on real and
#: meta tensors, whose results must agree on everything but the data
META_OPS = {
    "matmul": lambda s, d, w: s @ w,
    "rmatmul": lambda s, d, w: dense(W.T).to(s.device) @ s.mT,
    "mm": lambda s, d, w: md.mm(s, w),
    "addmm": lambda s, d, w: md.addmm(d[:, :2], s, w, beta=0.5),
    "sum": lambda s, d, w: md.sum(s),
    "sum axis": lambda s, d, w: md.sum(s, axis=1, keepdims=True),
    "sparse.sum all": lambda s, d, w: md.sparse.sum(s),
    "mul scalar": lambda s, d, w: s * 3,
    "mul dense": lambda s, d, w: s * d,
    "div": lambda s, d, w: s / 2,
    "pow": lambda s, d, w: s ** 2,
    "neg": lambda s, d, w: -s,
    "sin": lambda s, d, w: md.sin(s),
    "relu": lambda s, d, w: md.relu(s),
    "astype": lambda s, d, w: s.astype(md.float64),
    "add dense": lambda s, d, w: s + d,
    "sub dense": lambda s, d, w: d - s,
    "transpose": lambda s, d, w: s.transpose(0, 1),
    "mT": lambda s, d, w: s.mT,
    "t": lambda s, d, w: s.t(),
    "permute": lambda s, d, w: s.permute(1, 0),
    "reshape": lambda s, d, w: s.reshape(3, 2),
    "clone": lambda s, d, w: s.clone(),
    "to_dense": lambda s, d, w: s.to_dense(),
    "to_sparse": lambda s, d, w: s.to_sparse(),
    "to_sparse_csr": lambda s, d, w: s.to_sparse_csr(),
    "softmax": lambda s, d, w: md.softmax(s, 1),
    "sparse_mask": lambda s, d, w: d.sparse_mask(s),
    "values": lambda s, d, w: s.values(),
    "indices": lambda s, d, w: s.indices() if s.layout is md.sparse_coo else s.crow_indices(),
    "zeros_like": lambda s, d, w: md.zeros_like(s),
}


@pytest.mark.parametrize("how", ["coo", "csr"])
@pytest.mark.parametrize("name", sorted(META_OPS))
def test_meta_sparse_ops_describe_their_real_results(name, how):
    fn = META_OPS[name]
    s, d, w = _sparse(how), dense(D), dense(W)
    real = fn(s, d, w)
    meta = fn(s.to("meta"), d.to("meta"), w.to("meta"))
    _same_meta(real, meta)


def test_meta_sparse_tensors_have_shape_layout_and_nnz():
    s = _sparse("coo")
    m = s.to("meta")
    assert m.layout is md.sparse_coo and m.nnz == 3 and m.shape == (2, 3) and m.is_coalesced()
    assert md.DispatchKey.SparseMeta in m.keyset
    assert "nnz=3" in repr(m) and "device='meta'" in repr(m)
    c = md.sparse_coo_tensor(md.empty((2, 5), dtype=md.int64, device="meta"),
                             md.empty(5, device="meta"), (4, 4))
    assert (c.layout, c.nnz, c.is_coalesced(), c.device) == (md.sparse_coo, 5, False,
                                                            md.Device("meta"))
    on_meta = md.sparse_coo_tensor([[0, 1], [2, 0]], [1.0, 2.0], (3, 3), device="meta")
    assert (on_meta.device, on_meta.nnz, on_meta.layout) == (md.Device("meta"), 2,
                                                             md.sparse_coo)
    r = md.sparse_csr_tensor(md.empty(5, dtype=md.int64, device="meta"),
                             md.empty(7, dtype=md.int64, device="meta"),
                             md.empty(7, dtype=md.float64, device="meta"), (4, 9))
    assert (r.layout, r.nnz, r.dtype, r.shape) == (md.sparse_csr, 7, md.float64, (4, 9))
    # a large matrix costs nothing: shapes only
    big = md.sparse_coo_tensor(md.empty((2, 10**6), dtype=md.int64, device="meta"),
                               md.empty(10**6, device="meta"), (10**5, 10**5),
                               is_coalesced=True).requires_grad_()
    b = md.empty((10**5, 16), device="meta", requires_grad=True)
    y = big @ b
    assert y.shape == (10**5, 16) and y.layout is md.strided
    md.sum(y).backward()
    assert big.grad.layout is md.sparse_coo and big.grad.nnz == 10**6
    assert b.grad.shape == (10**5, 16)


@pytest.mark.parametrize("call, message", [
    (lambda m: m.coalesce(), "coalesce: the number of stored elements"),
    (lambda m: m @ m.mT, "matmul of two sparse tensors: the number of stored elements"),
    (lambda m: m + m, "add of two sparse tensors"),
    (lambda m: m[0], "__getitem__"),
    (lambda m: md.sparse.sum(m, 1), "sparse.sum over some of the dimensions"),
    (lambda m: md.empty((2, 2), device="meta").to_sparse(), "to_sparse: the number of "
                                                             "stored elements"),
    (lambda m: md.sparse_coo_tensor(md.empty((2, 1), dtype=md.int64, device="meta"),
                                    md.empty(1, device="meta")), "sparse_coo_tensor: size"),
])
def test_meta_ops_whose_nnz_depends_on_the_data_raise_naming_the_op(call, message):
    m = md.sparse_coo_tensor(md.empty((2, 3), dtype=md.int64, device="meta"),
                             md.empty(3, device="meta"), (3, 3))
    with pytest.raises(NotImplementedError, match=message):
        call(m)


def test_meta_sparse_errors_match_the_cpu_ones():
    s = _sparse("coo")
    m = s.to("meta")
    for call in (lambda t: t @ dense(np.ones((4, 2))).to(t.device),
                 lambda t: t.transpose(0, 5), lambda t: t.reshape(4, 4), lambda t: t.view(6),
                 lambda t: t ** -1, lambda t: t.permute(0, 0)):
        with pytest.raises(Exception) as real:
            call(s)
        with pytest.raises(type(real.value)) as meta:
            call(m)
        assert str(meta.value).replace("SparseMeta", "SparseCPU") == str(real.value)
    with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
        m.to(CPU)


def test_fake_tensor_mode_handles_sparse_tensors():
    s, c = _sparse("coo"), _sparse("csr").requires_grad_()
    with FakeTensorMode() as mode:
        fs, fc = mode.from_tensor(s), mode.from_tensor(c)
        assert (fs.layout, fs.nnz, fs.device, fs.shape) == (md.sparse_coo, 3, md.Device(CPU),
                                                           (2, 3))
        assert fc.layout is md.sparse_csr and fc.requires_grad
        assert "layout=md.sparse_csr, nnz=3" in repr(fc)
        y = fc @ md.ones((3, 2), device=CPU)
        assert type(y).__name__ == "FakeTensor" and y.shape == (2, 2) and y.device == CPU
        z = (fs * 2).to_sparse_csr()
        assert type(z).__name__ == "FakeTensor" and (z.layout, z.nnz) == (md.sparse_csr, 3)
        md.sum(y).backward(md.ones((), device=CPU))
        assert fc.grad.layout is md.sparse_csr and fc.grad.nnz == 3
        with pytest.raises(NotImplementedError, match="matmul of two sparse tensors"):
            fs @ fs.mT


def test_logging_mode_shows_sparse_ops_and_layouts():
    s, w = _sparse("coo"), dense(W)
    with LoggingMode() as m:
        md.sum(s.to_sparse_csr() @ w)
    assert m.log[0] == "aten::_to_sparse(float64[2, 3](sparse_coo), md.sparse_csr) -> " \
                       "float64[2, 3](sparse_csr)"
    assert m.log[1].startswith("aten::matmul(float64[2, 3](sparse_csr), float64[3, 2])")


# ---------------------------------------------------------------------------------------
# to(device)


def test_to_device_moves_sparse_tensors_through_their_parts():
    s = md.sparse_coo_tensor(dense([[0, 0], [1, 1]]), dense([1.0, 2.0]), (2, 2))  # duplicates
    assert s.to(CPU) is s
    c = s.to(CPU, copy=True)
    assert c is not s and c.layout is md.sparse_coo and c.to_dense().tolist() == \
        s.to_dense().tolist()
    m = s.to("meta")
    assert (m.nnz, m.is_coalesced()) == (2, False)
    r = _sparse("csr").to("meta")
    assert (r.layout, r.nnz) == (md.sparse_csr, 3)


# ---------------------------------------------------------------------------------------
# The version counter shared through values()


@pytest.mark.parametrize("how", ["coo", "csr"])
def test_a_write_through_values_bumps_the_sparse_tensors_version(how):
    s = _sparse(how)
    before = s._version
    s.values().mul_(2)
    assert s._version == before + 1
    close = s.to_dense().numpy()
    np.testing.assert_allclose(close, 2 * A)
    a = _sparse(how).requires_grad_()
    y = a @ dense(W).requires_grad_()  # W's gradient reads a: a is saved
    a.detach().values().add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        md.sum(y).backward()


# ---------------------------------------------------------------------------------------
# md.save / md.load


@settings(max_examples=20, deadline=None)
@given(shape=st.tuples(st.integers(0, 5), st.integers(0, 5)),
       density=st.sampled_from([0.0, 0.3, 1.0]), how=st.sampled_from(["coo", "csr", "raw"]),
       seed=st.integers(0, 2**16))
def test_save_and_load_keep_sparse_tensors(shape, density, how, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * (rng.random(shape) < density)
    if how == "raw":  # uncoalesced, duplicates kept
        idx = np.nonzero(a)
        t = md.sparse_coo_tensor(dense(np.concatenate([np.stack(idx)] * 2, axis=1)),
                                 dense(np.concatenate([a[idx]] * 2)), shape)
    else:
        t = dense(a).to_sparse() if how == "coo" else dense(a).to_sparse_csr()
    t.requires_grad_(bool(seed % 2))
    buf = io.BytesIO()
    md.save({"t": t, "same": t, "d": dense(a)}, buf)
    buf.seek(0)
    got = md.load(buf)
    r = got["t"]
    assert got["same"] is r
    assert (r.layout, r.shape, r.dtype, r.nnz, r.requires_grad) == (
        t.layout, t.shape, t.dtype, t.nnz, t.requires_grad)
    if t.layout is md.sparse_coo:
        assert r.is_coalesced() == t.is_coalesced()
        assert r._indices().tolist() == t._indices().tolist()
    np.testing.assert_array_equal(r.detach().to_dense().numpy(), t.detach().to_dense().numpy())
    buf.seek(0)
    m = md.load(buf, map_location="meta")["t"]
    assert (m.device, m.layout, m.nnz) == (md.Device("meta"), t.layout, t.nnz)


def test_loading_a_bad_sparse_entry_is_a_named_error():
    import json
    import zipfile

    buf = io.BytesIO()
    md.save(_sparse("coo"), buf)
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(buf.getvalue())) as zin, \
            zipfile.ZipFile(out, "w") as zout:
        for name in zin.namelist():
            data = zin.read(name)
            if name == "manifest.json":
                manifest = json.loads(data)
                manifest["tensors"][-1]["shape"] = [1, 1]  # too small for the indices
                data = json.dumps(manifest).encode()
            zout.writestr(name, data)
    out.seek(0)
    with pytest.raises(ValueError, match="load: .*its parts do not make a sparse tensor "
                                         ".*sparse_coo_tensor: size"):
        md.load(out)
    with pytest.raises(ValueError, match="save: meta tensors have no data"):
        md.save(_sparse("coo").to("meta"), io.BytesIO())


# ---------------------------------------------------------------------------------------
# addmm


@settings(max_examples=30, deadline=None)
@given(n=st.integers(0, 4), k=st.integers(0, 4), p=st.integers(0, 3),
       density=st.sampled_from([0.0, 0.5, 1.0]), how=st.sampled_from(["coo", "csr"]),
       beta=st.sampled_from([0.0, 1.0, 0.5]), alpha=st.sampled_from([1.0, -2.0]),
       seed=st.integers(0, 2**16))
def test_addmm_with_a_sparse_operand_matches_dense(n, k, p, density, how, beta, alpha, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, k)) * (rng.random((n, k)) < density)
    b, c = rng.standard_normal((k, p)), rng.standard_normal((n, p))
    s = dense(a).to_sparse() if how == "coo" else dense(a).to_sparse_csr()
    want = (beta * c if beta else 0) + alpha * (a @ b)
    got = md.addmm(dense(c), s, dense(b), beta=beta, alpha=alpha)
    assert got.layout is md.strided
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    right = md.addmm(dense(c.T), dense(b.T), s.mT, beta=beta, alpha=alpha)
    np.testing.assert_allclose(right.numpy(), want.T, rtol=1e-5, atol=1e-5)


def test_addmm_gradients_keep_the_pattern_and_gradcheck():
    idx = dense([[0, 1, 1], [2, 0, 1]])
    v = dense([1.0, -2.0, 0.5], md.float64).requires_grad_()
    w = dense(W, md.float64).requires_grad_()
    c = dense(np.ones((2, 2)), md.float64).requires_grad_()
    assert gradcheck(lambda v, w, c: md.addmm(c, md.sparse_coo_tensor(idx, v, (2, 3)), w,
                                              beta=0.5, alpha=2.0), (v, w, c))
    a = md.sparse_coo_tensor(idx, v.detach(), (2, 3)).coalesce().requires_grad_()
    md.sum(md.addmm(c, a, w)).backward()
    assert a.grad.layout is md.sparse_coo and a.grad.nnz == 3
    np.testing.assert_allclose(c.grad.numpy(), np.ones((2, 2)))
    with pytest.raises(ValueError, match="addmm: self of shape \\(3,\\) does not broadcast"):
        md.addmm(dense(np.ones(3)), a.detach(), w.detach())
