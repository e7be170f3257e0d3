"""Sparse layouts (docs/SPARSE.md): every sparse op against its dense equivalent over shapes
and densities (empty and full included), gradients against dense gradients and gradcheck,
the missing-kernel error, memory at scale.  Sparse tensors have kernels on the CPU
(SparseCPU, SciPy) and on JAX (SparseJAX, ``jax.experimental.sparse``): these tests run on
the device under test where it is JAX, and on the CPU otherwise."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from _helpers import TEST_DEVICE, TEST_DEVICE_TYPE, skip_on
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.testing import gradcheck

# Sparse layouts have kernels on the CPU and JAX (docs/SPARSE.md); on another device under
# test the constructors and conversions have no kernel, which test_dask checks for Dask.
pytestmark = skip_on("dask", "loopback", "cuda",
                     reason="sparse layouts have kernels on the CPU and JAX only")

pytest.importorskip("scipy.sparse")

#: the device the sparse tensors live on, its Dense and Sparse keys, and how the dtype
#: error names it
CPU = TEST_DEVICE if TEST_DEVICE_TYPE == "jax" else "cpu"
#: hypothesis examples per property: JAX compiles its kernels for each new shape (seconds
#: per example), so it sees fewer
EXAMPLES = 6 if TEST_DEVICE_TYPE == "jax" else 40
DENSE_KEY, KEY, WHERE = (("JAX", "SparseJAX", "JAX") if TEST_DEVICE_TYPE == "jax" else
                         ("CPU", "SparseCPU", "the CPU"))


def dense(a, dtype=None):
    return md.asarray(a, dtype=dtype, device=CPU)


@st.composite
def sparse_arrays(draw, min_dims=2, max_dims=2, dtype=np.float64):
    """A NumPy array with about ``density`` of its elements non-zero (0 and 1 included)."""
    ndim = draw(st.integers(min_dims, max_dims))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=ndim, max_size=ndim)))
    density = draw(st.sampled_from([0.0, 0.2, 0.5, 1.0]))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape).astype(dtype) + (rng.random(shape) > 0.5)
    a[rng.random(shape) >= density] = 0
    return a


LAYOUTS = ["to_sparse", "to_sparse_csr"]


def as_sparse(a, how):
    """``a`` made sparse by ``how``; COO where CSR cannot hold it (not 2-D)."""
    if how == "to_sparse_csr" and np.ndim(a) != 2:
        how = "to_sparse"
    return getattr(dense(a), how)()


def close(t, want, **kw):
    t = t.detach()
    got = t.to_dense().numpy(force=True) if t.layout is not md.strided else t.numpy(force=True)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9, **kw)


# ---------------------------------------------------------------------------------------
# Layouts, keys, construction


def test_import_mdtensor_imports_no_sparse_library():
    code = """
        import sys, mdtensor as md
        (md.asarray([1.0]) + 1).tolist()
        print([m for m in ("scipy", "sparse", "cupy", "cupyx") if m in sys.modules])
        x = md.sparse_coo_tensor([[0]], [1.0], (2,))
        h = md.sparse_coo_tensor([[0]], [[1.0, 2.0]], (2, 2))  # hybrid
        print("scipy.sparse" in sys.modules, x.layout, h.layout, "cupy" in sys.modules)
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split() == ["[]", "True", "md.sparse_coo", "md.sparse_coo", "False"], \
        r.stderr


def test_layouts_and_key_sets():
    x = dense([[0.0, 1.0], [2.0, 0.0]])
    assert x.layout is md.strided and not x.is_sparse
    s, c = x.to_sparse(), x.to_sparse_csr()
    assert s.layout is md.sparse_coo and s.is_sparse
    assert c.layout is md.sparse_csr and not c.is_sparse
    for t in (s, c):
        assert md.DispatchKey[KEY] in t.keyset and md.DispatchKey[DENSE_KEY] not in t.keyset
        below = t.keyset - md.DispatchKey.ADInplaceOrView
        assert below.highest_priority_key() == md.DispatchKey[KEY]
        assert t.device == md.Device(CPU) and t.shape == (2, 2) and t.dtype == md.float32
        assert t.nnz == 2
    r = s.requires_grad_()
    assert r.keyset.highest_priority_key() == md.DispatchKey["Autograd" + DENSE_KEY]
    assert (repr(md.strided), repr(md.sparse_coo), repr(md.sparse_csr)) == (
        "md.strided", "md.sparse_coo", "md.sparse_csr")
    import pickle
    assert pickle.loads(pickle.dumps(md.sparse_csr)) is md.sparse_csr


def test_sparse_coo_tensor_and_its_parts():
    x = md.sparse_coo_tensor([[0, 1, 1], [2, 0, 2]], [3.0, 4.0, 5.0], (2, 3))
    assert not x.is_coalesced()
    with pytest.raises(RuntimeError, match="values: cannot get values on an uncoalesced"):
        x.values()
    c = x.coalesce()
    assert c.is_coalesced() and c.indices().dtype == md.int64
    assert c.coalesce().is_coalesced() and c.clone().is_coalesced()
    assert c.indices().tolist() == [[0, 1, 1], [2, 0, 2]]
    assert c.values().tolist() == [3.0, 4.0, 5.0]
    assert x.to_dense().tolist() == [[0, 0, 3], [4, 0, 5]]
    dup = md.sparse_coo_tensor([[0, 0], [1, 1]], [1.0, 2.0])  # size inferred; duplicates add
    assert dup.shape == (1, 2) and dup.nnz == 2 and dup.coalesce().nnz == 1
    assert dup.to_dense().tolist() == [[0.0, 3.0]]
    assert md.sparse_coo_tensor([[0]], [1], (3,), dtype=md.float64).dtype == md.float64


def test_sparse_csr_tensor_and_its_parts():
    x = md.sparse_csr_tensor([0, 1, 3], [2, 0, 2], [3.0, 4.0, 5.0], (2, 3))
    assert x.layout is md.sparse_csr and x.nnz == 3
    assert x.crow_indices().tolist() == [0, 1, 3] and x.col_indices().tolist() == [2, 0, 2]
    assert x.values().tolist() == [3.0, 4.0, 5.0]
    assert x.to_dense().tolist() == [[0, 0, 3], [4, 0, 5]]
    assert x.to_sparse().indices().tolist() == [[0, 1, 1], [2, 0, 2]]
    with pytest.raises(TypeError, match="indices: expected a sparse COO tensor, got layout "
                                        "md.sparse_csr"):
        x.indices()
    with pytest.raises(TypeError, match="crow_indices: expected a sparse CSR tensor"):
        x.to_sparse().crow_indices()


@pytest.mark.parametrize("call, error, message", [
    (lambda: md.sparse_coo_tensor([[0, 1]], [1.0], (2,)), ValueError,
     "sparse_coo_tensor: indices give 2 elements but values 1"),
    (lambda: md.sparse_coo_tensor([[0, 5]], [1.0, 2.0], (3,)), ValueError,
     "sparse_coo_tensor: size \\(3,\\) is too small for the indices"),
    (lambda: md.sparse_coo_tensor([[-1]], [1.0], (3,)), ValueError,
     "sparse_coo_tensor: indices must be non-negative"),
    (lambda: md.sparse_coo_tensor([[0.5]], [1.0], (3,)), TypeError,
     "sparse_coo_tensor: indices must be an integer tensor"),
    (lambda: md.sparse_coo_tensor([0, 1], [1.0, 2.0]), ValueError,
     "sparse_coo_tensor: indices must have 2 dimensions"),
    (lambda: md.sparse_csr_tensor([0, 2, 1], [0, 1], [1.0, 2.0]), ValueError,
     "sparse_csr_tensor: crow_indices must start at 0, not decrease"),
    (lambda: dense([1.0, 2.0]).to_sparse_csr(), ValueError,
     "to_sparse_csr: a sparse CSR tensor has 2 dimensions"),
    (lambda: dense(1.0).to_sparse(), ValueError,
     "to_sparse: a sparse COO tensor needs at least one dimension"),
    (lambda: dense([1.0], dtype=md.float16).to_sparse(), TypeError,
     f"to_sparse: sparse tensors on {WHERE} take bool, integer, float32"),
    (lambda: dense([1.0]).indices(), TypeError,
     "indices: expected a sparse tensor, got layout md.strided"),
    (lambda: dense([1.0]).nnz, TypeError, "nnz: expected a sparse tensor"),
    (lambda: dense([1.0]).to_sparse().numpy(force=True), TypeError,
     "numpy\\(\\): a sparse tensor has no dense array"),
    (lambda: dense([1.0]).to_sparse().tolist(), TypeError, "tolist\\(\\): a sparse tensor"),
])
def test_bad_construction_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def _repr(t):
    """``repr(t)`` less the device (shown for a tensor not on the CPU, parts included)."""
    return repr(t).replace(f", device='{t.device}'", "")


def test_repr_shows_the_layout():
    x = md.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), dtype=md.float64)
    assert _repr(x) == textwrap.dedent("""\
        tensor(indices=tensor([[0, 1],
                               [1, 0]]),
               values=tensor([1., 2.]),
               size=(2, 2), nnz=2, dtype=md.float64, layout=md.sparse_coo)""")
    u = md.sparse_coo_tensor([[1, 1]], [1.0, 2.0], (3,)).requires_grad_()
    assert _repr(u) == textwrap.dedent("""\
        tensor(indices=tensor([[1, 1]]),
               values=tensor([1., 2.]),
               size=(3,), nnz=2, layout=md.sparse_coo, requires_grad=True)""")
    c = dense([[0.0, 1.0], [2.0, 0.0]]).to_sparse_csr().requires_grad_()
    assert _repr(c) == textwrap.dedent("""\
        tensor(crow_indices=tensor([0, 1, 2]),
               col_indices=tensor([1, 0]),
               values=tensor([1., 2.]),
               size=(2, 2), nnz=2, layout=md.sparse_csr, requires_grad=True)""")


# ---------------------------------------------------------------------------------------
# Every op against its dense equivalent


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS))
def test_conversions_round_trip(a, how):
    s = as_sparse(a, how)
    assert s.nnz == np.count_nonzero(a)
    close(s, a)
    close(s.to_sparse(), a)
    close(s.to_sparse_csr() if a.ndim == 2 else s, a)
    assert s.to_dense().layout is md.strided
    assert s.to_sparse(layout=s.layout) is s  # already in that layout: itself, as PyTorch


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(), k=st.integers(0, 4), how=st.sampled_from(LAYOUTS),
       seed=st.integers(0, 99))
def test_products_match_dense(a, k, how, seed):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal((a.shape[1], k))
    c = rng.standard_normal((k, a.shape[0]))
    v = rng.standard_normal(a.shape[1])
    s = as_sparse(a, how)
    close(s @ dense(b), a @ b)
    close(md.mm(s, dense(b)), a @ b)
    close(s @ dense(v), a @ v)
    close(dense(c) @ s, c @ a)
    both = s @ as_sparse(a.T.copy(), how)
    assert both.layout is s.layout
    close(both, a @ a.T)


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS), keep=st.booleans())
def test_sums_match_dense(a, how, keep):
    s = as_sparse(a, how)
    total = md.sum(s)
    assert total.layout is md.strided and total.dtype == md.float64
    np.testing.assert_allclose(total.item(), a.sum())
    for axis in [*range(a.ndim), -1, tuple(range(a.ndim))]:
        r = md.sum(s, axis=axis, keepdims=keep)
        assert r.layout is md.strided
        close(r, a.sum(axis=axis, keepdims=keep))
    ints = as_sparse((a != 0).astype(np.int32), how)
    assert md.sum(ints).dtype == md.sum(dense((a != 0).astype(np.int32))).dtype


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS), scalar=st.sampled_from([2, -0.5]))
def test_zero_preserving_elementwise_ops_match_dense(a, how, scalar):
    s = as_sparse(a, how)
    d = dense(a)
    for name in ("neg", "abs", "sin", "tanh", "relu", "sign", "square", "expm1", "sinh",
                 "atan", "asinh", "trunc", "floor", "ceil"):
        r = getattr(md, name)(s)
        assert r.layout is s.layout, name
        close(r, getattr(md, name)(d).numpy(force=True))
    close(md.sqrt(md.abs(s)), np.sqrt(np.abs(a)))
    close(s * scalar, a * scalar)
    close(scalar * s, a * scalar)
    close(s / 4, a / 4)
    close(s ** 2, a ** 2)
    close(-s, -a)
    close(s * d, a * a)
    close(d * s, a * a)
    close(s * s, a * a)
    if a.ndim:
        row = np.arange(a.shape[-1], dtype=np.float64)
        close(s * dense(row), a * row)  # a dense factor that broadcasts
    assert (s * d).layout is s.layout
    close(md.astype(s, md.float32), a.astype(np.float32))


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS), seed=st.integers(0, 99))
def test_add_and_sub_match_dense(a, how, seed):
    rng = np.random.default_rng(seed)
    b = np.where(rng.random(a.shape) < 0.3, rng.standard_normal(a.shape), 0.0)
    s, t = as_sparse(a, how), as_sparse(b, how)
    for r, want in ((s + t, a + b), (s - t, a - b), (md.add(s, t, alpha=2), a + 2 * b),
                    (md.sub(s, t, alpha=3), a - 3 * b)):
        assert r.layout is s.layout
        close(r, want)
    mixed = s + dense(b)  # sparse + dense is dense, as in PyTorch
    assert mixed.layout is md.strided
    close(mixed, a + b)


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(2, 3), how=st.sampled_from(LAYOUTS))
def test_transpose_and_reshape_match_dense(a, how):
    s = as_sparse(a, how)
    close(s.mT, np.swapaxes(a, -1, -2))
    assert s.mT.layout is s.layout
    close(md.transpose(s, 0, -1), np.swapaxes(a, 0, -1))
    close(md.permute(s, tuple(reversed(range(a.ndim)))), a.transpose())
    if a.ndim == 2:
        close(s.t(), a.T)
        close(md.reshape(s, (a.shape[1], a.shape[0])), a.reshape(a.shape[1], a.shape[0]))
    if how == "to_sparse":
        close(md.reshape(s, (-1,)), a.reshape(-1))


def test_zeros_like_is_sparse_and_empty():
    s = dense([[0.0, 1.0]]).to_sparse_csr()
    z = md.zeros_like(s)
    assert z.layout is md.sparse_csr and z.nnz == 0 and z.shape == (1, 2)
    assert md.zeros_like(s.to_sparse(), dtype=md.float64).dtype == md.float64


# ---------------------------------------------------------------------------------------
# Gradients


@pytest.mark.parametrize("how", LAYOUTS)
def test_product_gradients_match_dense_ones_and_keep_the_pattern(how):
    rng = np.random.default_rng(0)
    a = np.where(rng.random((6, 5)) < 0.4, rng.standard_normal((6, 5)), 0.0)
    b, g = rng.standard_normal((5, 3)), rng.standard_normal((6, 3))
    s = as_sparse(a, how).requires_grad_()
    w = dense(b).requires_grad_()
    (s @ w).backward(dense(g))
    assert s.grad.layout is s.layout  # the sparse operand's gradient: its pattern
    np.testing.assert_array_equal(s.grad.to_dense().numpy(force=True) != 0,
                                  (g @ b.T) * (a != 0) != 0)
    close(s.grad, (g @ b.T) * (a != 0))
    close(w.grad, a.T @ g)
    # dense @ sparse
    x = dense(b.T.copy()).requires_grad_()
    t = as_sparse(a.T.copy(), how).requires_grad_()
    (x @ t).backward(dense(g.T.copy()))
    close(x.grad, g.T @ a)
    assert t.grad.layout is t.layout
    close(t.grad, (b @ g.T) * (a.T != 0))


def test_gradients_through_conversions_and_sums_match_dense():
    rng = np.random.default_rng(1)
    a = np.where(rng.random((4, 3)) < 0.5, rng.standard_normal((4, 3)), 0.0)
    x = dense(a).requires_grad_()
    (x.to_sparse().to_dense() * dense(a)).sum().backward()
    close(x.grad, a * (a != 0))  # to_sparse's gradient is dense; to_dense's keeps the pattern
    s = dense(a).to_sparse_csr().requires_grad_()
    md.sum(md.sum(s, axis=1) ** 2).backward()
    assert s.grad.layout is md.strided  # a reduction's gradient is dense, as in PyTorch
    close(s.grad, np.broadcast_to(2 * a.sum(1, keepdims=True), a.shape))


@pytest.mark.parametrize("fn", [
    lambda v, w: md.sparse_coo_tensor(IDX, v, (3, 3)) @ w,
    lambda v, w: md.sparse_coo_tensor(IDX, v, (3, 3)).to_sparse_csr() @ w,
    lambda v, w: w.mT @ md.sparse_coo_tensor(IDX, v, (3, 3)),
    lambda v, w: md.sum(md.sparse_coo_tensor(IDX, v, (3, 3)), axis=0) * w[0, 0],
    lambda v, w: (md.sparse_coo_tensor(IDX, v, (3, 3)).coalesce() * 3).values(),
    lambda v, w: (md.sparse_coo_tensor(IDX, v, (3, 3)) - md.sparse_coo_tensor(IDX, v, (3, 3))
                  .mT * 2).to_dense() @ w,
    lambda v, w: md.neg(md.sparse_coo_tensor(IDX, v, (3, 3))).to_dense(),
], ids=["coo@dense", "csr@dense", "dense@coo", "sum", "values", "sub-mT", "neg"])
def test_gradcheck(fn):
    rng = np.random.default_rng(2)
    v = dense(rng.standard_normal(5)).requires_grad_()  # IDX repeats (0, 1): uncoalesced
    w = dense(rng.standard_normal((3, 2))).requires_grad_()
    assert gradcheck(fn, (v, w))


IDX = [[0, 1, 1, 2, 0], [1, 0, 2, 2, 1]]


@pytest.mark.parametrize("how", LAYOUTS)
def test_gradcheck_through_to_sparse(how):
    rng = np.random.default_rng(3)
    x = dense(rng.standard_normal((3, 4))).requires_grad_()
    w = dense(rng.standard_normal((4, 2))).requires_grad_()
    assert gradcheck(lambda x, w: getattr(x, how)() @ w, (x, w))
    assert gradcheck(lambda x, w: (getattr(x, how)() * 2).to_dense(), (x, w))


# ---------------------------------------------------------------------------------------
# Missing kernels


def test_an_op_without_a_sparse_kernel_names_the_op_and_the_key():
    s = dense([[0.0, 1.0]]).to_sparse()
    with pytest.raises(NotImplementedError, match="aten::exp: no kernel for this call; it "
                                                  f"needed a kernel for {KEY}"):
        md.exp(s)
    with pytest.raises(NotImplementedError, match=f"aten::cumulative_sum: .*{KEY}"):
        md.cumulative_sum(s, axis=1)
    with pytest.raises(NotImplementedError, match="aten::view: no kernel for a sparse tensor "
                                                  f"\\({KEY}\\)"):
        s.view(2)
    with pytest.raises(NotImplementedError, match="pow: a sparse tensor to the power -1"):
        s ** -1


# ---------------------------------------------------------------------------------------
# Scale


@skip_on("jax", reason="tracemalloc sees NumPy's allocations, not XLA's: measured on the "
                       "CPU")
def test_a_large_sparse_product_and_its_backward_stay_small():
    """The issue's matrix: 100,000 x 100,000 with 1,000,000 non-zeros (dense: 40 GB),
    summed by rows and multiplied by a 100,000 x 16 dense matrix, forward and backward,
    peaks well under 1 GB (tracemalloc sees NumPy's allocations).  The rows are summed by
    ``md.sparse.sum``, whose gradient keeps the pattern; ``md.sum``'s is dense, as
    PyTorch's ``torch.sum`` (docs/SPARSE.md)."""
    import tracemalloc

    n, nnz = 100_000, 1_000_000
    rng = np.random.default_rng(0)
    tracemalloc.start()
    try:
        idx = dense(rng.integers(0, n, (2, nnz)))
        a = md.sparse_coo_tensor(idx, dense(rng.standard_normal(nnz).astype(np.float32)),
                                 (n, n)).coalesce().requires_grad_()
        b = dense(rng.standard_normal((n, 16)).astype(np.float32)).requires_grad_()
        rows = md.sparse.sum(a, 1)
        dense_rows = md.sum(a.detach(), axis=1)
        y = a @ b
        (md.sum(y) + md.sum(rows.to_dense() * 2)).backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert rows.shape == (n,) and rows.layout is md.sparse_coo
    np.testing.assert_allclose(rows.detach().to_dense().numpy(force=True),
                               dense_rows.numpy(force=True), rtol=1e-5, atol=1e-5)
    assert dense_rows.layout is md.strided
    assert a.grad.layout is md.sparse_coo and a.grad.nnz == a.nnz
    assert b.grad.shape == (n, 16)
    assert peak < 400 * 2**20, f"peak {peak / 2**20:.0f} MiB"


# ---------------------------------------------------------------------------------------
# PyTorch


def test_matches_pytorchs_sparse_tensors():
    torch = pytest.importorskip("torch")
    idx, vals = [[0, 2, 1, 0], [1, 0, 2, 1]], [1.0, 2.0, 3.0, 4.0]
    w = np.arange(6.0).reshape(3, 2)
    g = np.linspace(-1, 1, 6).reshape(3, 2)
    m = md.sparse_coo_tensor(idx, dense(vals, md.float64), (3, 3))
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(vals, dtype=torch.float64),
                                (3, 3))
    assert m.is_coalesced() == t.is_coalesced() and m.nnz == t._nnz()
    mc, tc = m.coalesce(), t.coalesce()
    assert mc.indices().tolist() == tc.indices().tolist()
    assert mc.values().tolist() == tc.values().tolist()
    mr, tr = mc.to_sparse_csr(), tc.to_sparse_csr()
    assert mr.crow_indices().tolist() == tr.crow_indices().tolist()
    assert mr.col_indices().tolist() == tr.col_indices().tolist()
    assert m.to_dense().tolist() == t.to_dense().tolist()
    assert md.sum(m, axis=0).tolist() == torch.sum(t, dim=0).to_dense().tolist()
    mw, tw = dense(w).requires_grad_(), torch.tensor(w, requires_grad=True)
    ma, ta = mc.requires_grad_(), tc.requires_grad_()
    (ma @ mw).backward(dense(g))
    torch.sparse.mm(ta, tw).backward(torch.tensor(g))
    np.testing.assert_allclose(mw.grad.numpy(force=True), tw.grad.numpy(force=True))
    np.testing.assert_allclose(ma.grad.to_dense().numpy(force=True),
                               ta.grad.to_dense().numpy(force=True))
    assert ma.grad.coalesce().indices().tolist() == ta.grad.coalesce().indices().tolist()
    mz, tz = md.zeros_like(mc), torch.zeros_like(tc)
    assert (mz.layout, mz.nnz) == (md.sparse_coo, tz._nnz())


# ---------------------------------------------------------------------------------------
# The densify fallback


def test_the_densify_fallback_runs_dense_kernels_and_warns_once_per_op():
    a = np.array([[0.0, 1.0], [2.0, 0.0]])
    s = dense(a).to_sparse().requires_grad_()
    with md.sparse.densify_fallback(), pytest.warns(UserWarning) as caught:
        y = md.exp(s)
        md.exp(s)  # no second warning for exp
        z = md.cumulative_sum(s, axis=1)
        (y.sum() + z.sum()).backward()
    assert [str(w.message).split(": ")[0] for w in caught] == ["aten::exp",
                                                              "aten::cumulative_sum"]
    assert f"no {KEY} kernel; running the dense kernel" in str(caught[0].message)
    assert y.layout is md.strided
    close(y, np.exp(a))
    close(z, np.cumsum(a, axis=1))
    close(s.grad, np.exp(a) + np.array([[2.0, 1.0], [2.0, 1.0]]))
    # ops with sparse kernels keep them; after the block, the error is back
    with md.sparse.densify_fallback():
        assert (s.detach() * 2).layout is md.sparse_coo
    with pytest.raises(NotImplementedError, match=f"aten::exp: .*{KEY}"):
        md.exp(s)


def test_deepcopy_and_modes_see_sparse_tensors():
    import copy

    from mdtensor.modes import LoggingMode

    s = dense([[0.0, 1.0], [2.0, 0.0]]).to_sparse().requires_grad_()
    c = copy.deepcopy(s)
    assert c.layout is md.sparse_coo and c.requires_grad and c.is_coalesced()
    close(c, [[0.0, 1.0], [2.0, 0.0]])
    w = dense([[1.0], [2.0]])
    with LoggingMode() as m:
        md.sum(s.detach() @ w)
    assert [line.split("(")[0] for line in m.log] == ["aten::matmul", "aten::sum"]


# ---------------------------------------------------------------------------------------
# Softmax over a sparse dimension (Note [Sparse softmax])


def _dense_sparse_softmax(a, axis):
    """torch.sparse.softmax's meaning, densely: unstored elements count as -inf."""
    if a.size == 0:
        return a.copy()
    filled = np.where(a != 0, a, -np.inf)
    top = np.max(filled, axis=axis, keepdims=True)
    e = np.where(a != 0, np.exp(filled - np.where(np.isfinite(top), top, 0)), 0.0)
    total = e.sum(axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS))
def test_softmax_over_a_sparse_dimension_matches_its_dense_meaning(a, how):
    s = as_sparse(a, how)
    for axis in range(-1, a.ndim):
        r = md.softmax(s, axis)
        assert r.layout is s.layout and r.nnz == s.nnz
        close(r, _dense_sparse_softmax(a, axis))


def test_softmax_matches_torch_sparse_softmax_and_gradchecks():
    torch = pytest.importorskip("torch")
    v = [1.0, 2.0, 3.0, -1.0, 0.5, 4.0]
    m = md.sparse_coo_tensor(SOFTMAX_IDX, dense(v, md.float64), (4, 3))
    t = torch.sparse_coo_tensor(torch.tensor(SOFTMAX_IDX), torch.tensor(v, dtype=torch.float64),
                                (4, 3))
    for dim in (0, 1):
        np.testing.assert_allclose(md.softmax(m, dim).to_dense().numpy(force=True),
                                   torch.sparse.softmax(t, dim).to_dense().numpy(force=True))
    x = dense(v, md.float64).requires_grad_()
    w = dense(np.arange(12.0).reshape(4, 3))
    assert gradcheck(lambda x: md.softmax(md.sparse_coo_tensor(SOFTMAX_IDX, x, (4, 3)), 1)
                     .to_dense() * w, (x,))
    assert gradcheck(lambda x: md.softmax(md.sparse_coo_tensor(SOFTMAX_IDX, x, (4, 3))
                                          .to_sparse_csr(), 0).to_dense() * w, (x,))
    with pytest.raises(TypeError, match="softmax: a sparse softmax takes floating tensors"):
        md.softmax(md.sparse_coo_tensor([[0]], [1], (2,)), 0)


SOFTMAX_IDX = [[0, 0, 1, 2, 2, 2], [0, 2, 1, 0, 1, 2]]


# ---------------------------------------------------------------------------------------
# Indexing


_INDEX_PARTS = st.one_of(st.integers(-3, 2), st.builds(slice, st.none() | st.integers(-3, 3),
                                                      st.none() | st.integers(-3, 3),
                                                      st.none() | st.integers(1, 2)))


@settings(max_examples=EXAMPLES * 3 // 2, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS),
       parts=st.lists(_INDEX_PARTS, min_size=1, max_size=3), ellipsis=st.booleans())
def test_indexing_with_ints_and_slices_matches_dense(a, how, parts, ellipsis):
    key = tuple(parts[: a.ndim])
    if ellipsis:
        key = (..., *key[1:])
    s = as_sparse(a, how)
    try:
        want = a[key]
    except IndexError:
        with pytest.raises(IndexError, match="__getitem__: index .* is out of range for a "
                                             "sparse tensor"):
            s[key]
        return
    r = s[key]
    if r.layout is md.strided:
        assert r.ndim == 0
    close(r, want)


def test_indexing_a_sparse_tensor_differentiates():
    a = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    x = dense(a).to_sparse_csr().requires_grad_()
    r = x[1]
    assert r.layout is md.sparse_coo
    md.sum(r * 2).backward()  # sum's gradient is dense, and so is the row's here
    close(x.grad, [[0.0, 0.0, 0.0], [2.0, 2.0, 2.0]])


# ---------------------------------------------------------------------------------------
# md.sparse.sum


@settings(max_examples=EXAMPLES, deadline=None)
@given(a=sparse_arrays(1, 3), how=st.sampled_from(LAYOUTS))
def test_sparse_sum_matches_dense_and_keeps_the_pattern_in_its_gradient(a, how):
    s = as_sparse(a, how)
    for axis in [None, *range(a.ndim), tuple(range(a.ndim))[:2]]:
        r = md.sparse.sum(s, axis)
        want = a.sum(axis=axis)
        assert (r.layout is md.strided) == (np.ndim(want) == 0)
        close(r, want)
    x = s.detach().requires_grad_()
    md.sum(md.sparse.sum(x, 0).to_dense() * 3).backward() if a.ndim > 1 else \
        md.sparse.sum(x).backward()
    assert x.grad.layout is s.layout and x.grad.nnz == s.nnz
    close(x.grad, (3.0 if a.ndim > 1 else 1.0) * (a != 0))


@pytest.mark.parametrize("fn", [
    lambda v: md.sparse.sum(md.sparse_coo_tensor(IDX, v, (3, 3)), 1).to_dense(),
    lambda v: md.sparse.sum(md.sparse_coo_tensor(IDX, v, (3, 3))),
    lambda v: md.sparse.sum(md.sparse_coo_tensor(IDX, v, (3, 3)).to_sparse_csr(), 0)
    .to_dense() * dense([1.0, 2.0, 3.0]),
])
def test_sparse_sum_gradchecks_and_matches_torch(fn):
    v = dense(np.arange(1.0, 6.0)).requires_grad_()
    assert gradcheck(fn, (v,))
    torch = pytest.importorskip("torch")
    t = torch.tensor(np.arange(1.0, 6.0)).reshape(5)
    want = torch.sparse.sum(torch.sparse_coo_tensor(torch.tensor(IDX), t, (3, 3)), 1)
    got = md.sparse.sum(md.sparse_coo_tensor(IDX, dense(np.arange(1.0, 6.0)), (3, 3)), 1)
    assert got.to_dense().tolist() == want.to_dense().tolist()
