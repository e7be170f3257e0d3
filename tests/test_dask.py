"""The Dask backend (device ``"dask"``, docs/SCALE.md): chunks, laziness (counted graph
computations), in-place and view semantics, autograd, ``md.dask`` (compute, persist,
rechunk, schedulers), data-dependent shapes, the catalogue ops without OpInfo samples, and
the same programs on a real ``dask.distributed.LocalCluster`` with two worker processes.
Results are compared with the NumPy backend's.  Skips as a whole without Dask."""

from __future__ import annotations

import numpy as np
import pytest

import mdtensor as md

pytest.importorskip("dask.array", reason="Dask not installed (pip install -e '.[dask]')")

import dask  # noqa: E402
import dask.array as da  # noqa: E402
from dask.callbacks import Callback  # noqa: E402


class Computations(Callback):
    """Counts the graphs Dask's local schedulers compute (one per ``compute`` call)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def _start(self, dsk):
        self.count += 1


def host(t):
    return np.asarray(t.detach().to("cpu").numpy())


def both(fn):
    """``fn(device)`` on the NumPy backend and on Dask, as host arrays (tuples kept)."""
    out = []
    for device in ("cpu", "dask"):
        r = fn(device)
        out.append(tuple(host(x) for x in r) if isinstance(r, tuple) else host(r))
    return out


# ---------------------------------------------------------------------------------------
# The backend and its key (that importing mdtensor imports no Dask: tests/test_backends.py)


def test_listed_as_a_builtin_backend_with_its_own_key():
    row = next(r for r in md.backends.available() if r["name"] == "dask")
    assert row["device_type"] == "dask" and row["key"] == "Dask"
    assert row["distribution"] == "mdtensor" and row["installed"]
    x = md.ones(3, device="dask")
    assert md.DispatchKey.Dask in x.keyset and md.DispatchKey.Functionalize in x.keyset
    assert repr(md.asarray([1.0], device="dask", requires_grad=True).keyset) == (
        "DispatchKeySet(AutogradDask, ADInplaceOrView, Functionalize, Dask)")
    assert type(x._data) is da.Array


def test_mixing_dask_and_cpu_tensors_names_both_devices():
    with pytest.raises(ValueError, match="same device.*(cpu and dask|dask and cpu)"):
        md.ops.aten.add.Tensor(md.ones(2, device="dask"), md.ones(2, device="cpu"))


# ---------------------------------------------------------------------------------------
# Chunks


def test_chunks_from_asarray_and_the_default():
    x = md.asarray(np.arange(10.0), device="dask", chunks=4)
    assert x.chunks == ((4, 4, 2),) and x.dtype is md.float64
    y = md.asarray([[1.0, 2.0, 3.0]] * 4, device="dask", chunks=(2, 3))
    assert y.chunks == ((2, 2), (3,)) and y.dtype is md.float32  # Python floats: float32
    with dask.config.set({"array.chunk-size": "128MiB"}):  # the default: Dask's "auto"
        assert md.asarray(np.zeros((100, 3)), device="dask").chunks == ((100,), (3,))
    assert md.ones(3, device="cpu").chunks is None


def test_rechunk_is_an_op_that_autograd_records():
    w = md.asarray(np.arange(12.0), device="dask", chunks=12, requires_grad=True)
    r = md.dask.rechunk(w, 5)
    assert r.chunks == ((5, 5, 2),) and r.grad_fn is not None
    (r * r).sum().backward()
    assert w.grad.chunks == ((12,),)
    np.testing.assert_array_equal(host(w.grad), 2 * np.arange(12.0))
    # asarray of a tensor with chunks= rechunks it; requires_grad makes a leaf
    v = md.asarray(md.arange(6.0), device="dask", chunks=2, requires_grad=True)
    assert v.chunks == ((2, 2, 2),) and v.is_leaf and v.requires_grad


def test_chunks_errors_name_the_function():
    with pytest.raises(ValueError, match="asarray: chunks= applies to chunked backends such "
                                         "as 'dask'; device cpu has no chunks"):
        md.asarray([1.0], device="cpu", chunks=2)
    with pytest.raises(ValueError, match="rechunk: expected a tensor on device 'dask', got "
                                         "one on cpu"):
        md.dask.rechunk(md.ones(3, device="cpu"), 2)
    x = md.ones(4, device="dask")
    with pytest.raises(ValueError, match=r"rechunk: Dask refused chunks=\(\(3, 3\),\) for "
                                         r"a tensor of shape \(4,\): Chunks do not add up"):
        md.dask.rechunk(x, ((3, 3),))
    with pytest.raises(ValueError, match="asarray: copy=False, but host data must be copied"):
        md.asarray(np.ones(3), device="dask", copy=False)


# ---------------------------------------------------------------------------------------
# Laziness


def _program(device):
    """In-place ops through views, setitem, ops and autograd: a program that builds a
    graph on Dask and computes nothing."""
    x = md.asarray(np.arange(24.0).reshape(6, 4), device=device)
    if device == "dask":
        x = md.dask.rechunk(x, (2, 3))
    w = md.asarray(np.linspace(-1, 1, 4), device=device, requires_grad=True)
    row = x[1]
    row.mul_(2)                        # through a view: the base follows
    x[0, 1:3] = -1.0                   # setitem
    x.T[2].add_(md.tanh(x[:, 0] / 10))  # a view of a view, with a tensor operand
    h = md.tanh(x @ w / 10)
    loss = (h * h).mean() + md.sum(md.softmax(x * w, dim=-1)[:, 0])
    loss.backward()
    return x, row, w.grad, loss


def test_building_a_program_computes_nothing_and_gives_numpys_values():
    with Computations() as c:
        x, row, grad, loss = _program("dask")
        assert c.count == 0, "building the program computed a graph"
        assert type(grad._data) is da.Array and grad.device.type == "dask"  # lazy .grad
    with Computations() as c:
        got = md.dask.compute(x, row, grad, loss)
        assert c.count == 1  # one pass for the four tensors
    want = _program("cpu")
    for g, w in zip(got, want):
        assert g.device.type == "cpu"
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-12)


def test_values_materialise_when_asked_for():
    x = md.asarray([[1.5, 2.0], [3.0, 4.0]], device="dask") * 2
    with Computations() as c:
        assert x.tolist() == [[3.0, 4.0], [6.0, 8.0]]
        assert x[0, 0].item() == 3.0 and float(x.sum()) == 21.0
        assert host(x).tolist() == [[3.0, 4.0], [6.0, 8.0]]  # x.to("cpu")
        assert c.count == 4
    # .numpy() refuses every non-CPU tensor, as in PyTorch: .to("cpu").numpy() or force=True
    with pytest.raises(TypeError, match="numpy\\(\\): the tensor is on device dask"):
        x.numpy()
    assert x.numpy(force=True).tolist() == [[3.0, 4.0], [6.0, 8.0]]


def test_repr_computes_only_small_tensors():
    small = md.asarray([1.0, 2.0], device="dask", chunks=1)
    with Computations() as c:
        assert repr(small) == "tensor([1., 2.], device='dask:0', chunksize=(1,))"
        assert c.count == 1
    with dask.config.set({"array.chunk-size": "128MiB"}):  # (tests may make it tiny)
        big = md.zeros((1000, 32), device="dask")
    with Computations() as c:
        assert repr(big) == ("tensor(..., size=(1000, 32), device='dask:0', chunksize=(1000, "
                             "32), dtype=md.float32)")
        assert c.count == 0


# ---------------------------------------------------------------------------------------
# In-place ops and views (Functionalize writes them back into the graph)


def test_mutations_through_views_match_numpy():
    def run(device):
        x = md.asarray(np.arange(12.0).reshape(3, 4), device=device)
        if device == "dask":
            x = md.dask.rechunk(x, (2, 3))
        a, b, c = x[1], x[:, 1:3], x.T[3]
        a.add_(10)
        b.mul_(-1)
        c[0] = 100.0
        md.ops.aten.exp.out(md.zeros(2, device=device), out=x[2, :2])
        x.clamp_(max=50.0)
        return x, a, b, c

    cpu, dask_ = both(run)
    for g, w in zip(dask_, cpu):
        np.testing.assert_allclose(g, w)


def test_version_counters_and_dtype_rules_of_inplace_ops():
    x = md.asarray([1.0, 2.0, 3.0], device="dask")
    v0 = x._version
    x.add_(1)
    x[1] = 0.0
    assert x._version == v0 + 2 and x.tolist() == [2.0, 0.0, 4.0]
    i = md.asarray([1, 2], device="dask")
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        i.add_(0.5)
    assert i.tolist() == [1, 2] and i._version == 0  # state unchanged


def test_setitem_with_index_tensors_and_masks():
    def run(device):
        x = md.asarray(np.arange(10.0), device=device)
        x[md.asarray([1, 3, 3], device=device)] = md.asarray([5.0, 6.0, 7.0], device=device)
        x[x > 8] = 0.0
        return x

    cpu, dask_ = both(run)
    np.testing.assert_array_equal(dask_, cpu)


# ---------------------------------------------------------------------------------------
# Autograd


def _logistic_step(device, chunks=None):
    rng = np.random.default_rng(0)
    X_np = rng.standard_normal((64, 5)).astype(np.float32)
    y_np = (rng.random(64) < 0.5).astype(np.float32)
    X = md.asarray(X_np, device=device, chunks=chunks)
    y = md.asarray(y_np, device=device)
    w = md.zeros(5, device=device, requires_grad=True)
    b = md.zeros((), device=device, requires_grad=True)
    p = md.sigmoid(X @ w + b)
    loss = -(y * md.log(p) + (1 - y) * md.log(1 - p)).mean()
    loss.backward()
    return loss, w.grad, b.grad


def test_logistic_regression_gradients_match_numpy():
    cpu = _logistic_step("cpu")
    with Computations() as c:
        got = _logistic_step("dask", chunks=(16, 5))
        assert c.count == 0
    for g, w in zip(md.dask.compute(*got), cpu):
        np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_mlp_step_runs_unchanged_on_dask():
    def step(device):
        rng = np.random.default_rng(1)
        params = [md.asarray(rng.standard_normal(s).astype(np.float32) * 0.3, device=device,
                             requires_grad=True) for s in ((8, 16), (16,), (16, 4), (4,))]
        x = md.asarray(rng.standard_normal((32, 8)).astype(np.float32), device=device)
        labels = md.asarray(rng.integers(0, 4, 32), device=device)
        w1, b1, w2, b2 = params
        logits = md.tanh(x @ w1 + b1) @ w2 + b2
        logp = md.log_softmax(logits, dim=-1)
        loss = -md.take_along_axis(logp, labels[:, None], axis=1).mean()
        loss.backward()
        with md.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        return (loss, *params)

    cpu, dask_ = both(step)
    for g, w in zip(dask_, cpu):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------
# md.dask: compute, persist, schedulers


def test_compute_and_persist():
    x = md.asarray(np.arange(8.0), device="dask", chunks=3, requires_grad=True)
    y = (x * 2).exp()
    with Computations() as c:
        lo, hi = md.dask.compute(y.min(), y.max())
        assert c.count == 1 and lo.device.type == "cpu" and hi.item() == pytest.approx(
            np.exp(14.0))
    fn, graph = y.grad_fn, y._data
    with Computations() as c:
        assert md.dask.persist(y) is y
        assert c.count == 1
    assert y.grad_fn is fn and y._data is not graph and len(y._data.dask) == len(
        y.chunks[0])  # one task per chunk: the computed values
    with Computations() as c:
        np.testing.assert_allclose(host(y.detach()), np.exp(2 * np.arange(8.0)))
        y.sum().backward()
        np.testing.assert_allclose(host(x.grad), 2 * np.exp(2 * np.arange(8.0)))
        assert c.count == 2


def test_compute_and_persist_errors():
    with pytest.raises(ValueError, match="md.dask.compute: expected tensors on device "
                                         "'dask', got one on cpu \\(argument 1\\)"):
        md.dask.compute(md.ones(1, device="dask"), md.ones(1, device="cpu"))
    with pytest.raises(TypeError, match="md.dask.persist: expected tensors, got list"):
        md.dask.persist([md.ones(1, device="dask")])
    with pytest.raises(TypeError, match="md.dask.from_dask: expected a dask.array.Array, "
                                        "got ndarray"):
        md.dask.from_dask(np.ones(2))


def test_to_dask_and_from_dask():
    arr = da.arange(6, chunks=2)
    t = md.dask.from_dask(arr)
    assert md.dask.to_dask(t) is arr and t.chunks == ((2, 2, 2),) and t.dtype is md.int64
    assert (t * 2).tolist() == [0, 2, 4, 6, 8, 10]


def test_use_chooses_the_scheduler_and_a_with_block_restores_it():
    assert md.dask.scheduler() is None
    with md.dask.use("synchronous"):
        assert md.dask.scheduler() == "synchronous"
        with Computations() as c:  # the local schedulers all report to callbacks
            assert (md.ones(3, device="dask") * 2).tolist() == [2.0, 2.0, 2.0]
            assert c.count == 1
    assert md.dask.scheduler() is None
    with pytest.raises(TypeError, match="md.dask.use: expected a dask.distributed Client, a "
                                        "scheduler name or None, got int"):
        md.dask.use(42)
    with pytest.raises(ValueError, match="md.dask.use: unknown scheduler name 'gpu'"):
        md.dask.use("gpu")
    assert md.dask.scheduler() is None


# ---------------------------------------------------------------------------------------
# Random numbers (Note [Random numbers on Dask])


def test_random_numbers_are_drawn_chunk_by_chunk():
    with dask.config.set({"array.chunk-size": "1KiB"}):
        md.manual_seed(3)
        a = md.randn(1000, 8, device="dask")
        b = md.rand(1000, 8, device="dask")
        md.manual_seed(3)
        a2 = md.randn(1000, 8, device="dask")
    assert len(a.chunks[0]) > 1 and a.dtype is md.float32
    assert len(a._data.dask) == len(a.chunks[0]) * len(a.chunks[1])  # no whole array
    va, vb = host(a), host(b)
    np.testing.assert_array_equal(host(a2), va)  # same seed, same chunks: same numbers
    assert abs(va.mean()) < 0.05 and abs(va.std() - 1) < 0.05
    assert 0 <= vb.min() and vb.max() < 1 and abs(vb.mean() - 0.5) < 0.05
    assert not np.array_equal(va, host(md.randn(1000, 8, device="dask")))
    n = host(md.randint(0, 5, (200,), device="dask"))
    assert n.dtype == np.int64 and set(n.tolist()) == {0, 1, 2, 3, 4}


# ---------------------------------------------------------------------------------------
# Data-dependent shapes (Note [Data-dependent shapes on Dask])


def test_data_dependent_shapes_are_computed_at_the_call():
    x_np = np.array([3, 0, 2, 3, 0, 5, 2, 3])
    x = md.asarray(x_np, device="dask", chunks=3)
    with Computations() as c:
        nz = md.nonzero(x)[0]
        masked = x[x > 1]
        u = md.unique_counts(x)
        assert c.count == 4  # the sizes (unique_counts: values and counts), no values
    assert nz.shape == (6,) and masked.shape == (6,) and u.values.shape == (4,)
    assert nz.tolist() == np.nonzero(x_np)[0].tolist()
    assert masked.tolist() == x_np[x_np > 1].tolist()
    assert u.values.tolist() == [0, 2, 3, 5] and u.counts.tolist() == [2, 2, 3, 1]
    assert md.unique_values(x).tolist() == [0, 2, 3, 5]


# ---------------------------------------------------------------------------------------
# What the Array API conformance suite found on Dask (docs/CONFORMANCE.md)


def test_empty_inputs_zero_d_masks_and_sorters_give_numpys_results():
    def run(device):
        empty = md.zeros((0, 0), device=device)
        return (
            md.linalg.inv(empty), md.linalg.cholesky(empty), md.linalg.det(empty),
            md.linalg.solve(empty, md.zeros(0, device=device)),
            md.linalg.cross(md.zeros((0, 3), device=device), md.ones((1, 3), device=device)),
            md.take_along_axis(md.ones(1, device=device),
                               md.asarray(np.zeros(0, np.int64), device=device), axis=0),
            md.repeat(md.zeros((5, 0, 2), device=device), 6),
            md.asarray(3.0, device=device)[md.asarray(True, device=device)],
            md.ones((2, 3), device=device)[md.asarray(False, device=device)],
            md.searchsorted(md.asarray([9, 1, 16, 3], device=device), 4,
                            sorter=md.asarray([1, 3, 0, 2], device=device)),
            md.take(md.asarray([1, 2, 3], device=device), md.asarray([2], device=device)),
            md.ones((3, 0), device=device) @ md.ones((0, 4), device=device),
            md.tensordot(md.ones((0, 2, 1, 0), device=device),
                         md.ones((0, 2, 1, 0), device=device), axes=((0, -1), (0, 3))),
            md.linspace(3294243405692928.0, 1.0, 24, device=device),
            empty_setitem(device),
            md.roll(md.zeros((2, 0), device=device), 1),
            md.linalg.solve(md.ones((1, 1), device=device), md.ones((1, 0), device=device)),
        )

    def empty_setitem(device):
        x = md.zeros((0, 2), dtype=md.bool, device=device)
        x[:, :] = md.zeros((0, 2), dtype=md.bool, device=device)
        x[md.zeros(0, dtype=md.bool, device=device)] = False
        return x

    for g, w in zip(*both(run)):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    for device in ("cpu", "dask"):  # NumPy's shape checks, empty operands included
        with pytest.raises(ValueError, match="matmul"):
            md.ones(2, device=device) @ md.ones((1, 0), device=device)
        with pytest.raises(ValueError, match="matmul"):  # Dask broadcasts a 1 against 2
            md.ones((2, 1), device=device) @ md.ones(2, device=device)
        with pytest.raises(ValueError, match="shape mismatch"):
            md.zeros((0, 2), device=device)[:, :] = md.zeros(3, device=device)


def test_a_singular_matrix_raises_when_computed_with_the_cpu_backends_error():
    a = md.asarray([[1.0, 2.0], [2.0, 4.0]], device="dask")
    with Computations() as c:  # Note [Singular matrices]: no value read at the call
        inv, x, low = (md.linalg.inv(a), md.linalg.solve(a, md.ones(2, device="dask")),
                       md.linalg.cholesky(a))
        assert c.count == 0
    for t, message in ((inv, "linalg.inv: Singular matrix"),
                       (x, "linalg.solve: Singular matrix"),
                       (low, "linalg.cholesky: Matrix is not positive definite")):
        with pytest.raises(ValueError, match=message):
            t.tolist()


def test_dlpack_exports_the_computed_values_from_host_memory():
    x = md.asarray(np.arange(6.0), device="dask", chunks=2) * 2
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU
    with Computations() as c:
        np.testing.assert_array_equal(np.from_dlpack(x), 2 * np.arange(6.0))
        assert c.count == 1
    x.__dlpack__(copy=False, max_version=(1, 0), dl_device=(1, 0))


# ---------------------------------------------------------------------------------------
# The catalogue ops the OpInfo sweeps cannot run (no samples)


def test_factories_on_dask_are_lazy_and_chunked():
    with dask.config.set({"array.chunk-size": "16B"}):
        made = {
            "zeros": md.zeros((4, 4), device="dask"),
            "ones": md.ones(10, device="dask"),
            "full": md.full((3,), 7.0, device="dask"),
            "empty": md.empty(5, device="dask"),
            "arange": md.arange(0, 20, 2, device="dask"),
            "linspace": md.linspace(0, 1, 11, device="dask"),
            "eye": md.eye(4, device="dask"),
        }
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="dask")
    made.update(zeros_like=md.zeros_like(x), ones_like=md.ones_like(x),
                full_like=md.full_like(x, 2.0), empty_like=md.empty_like(x),
                fftfreq=md.fft.fftfreq(6, device="dask"),
                rfftfreq=md.fft.rfftfreq(6, device="dask"))
    seen = []

    class Seen(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Seen():  # data made into a tensor while a mode is on: lift_fresh (Note [lift_fresh])
        made["lift_fresh"] = md.asarray([[1.0, 2.0]], device="dask")
    assert seen == ["aten::lift_fresh"]
    for name, t in made.items():
        assert t.device.type == "dask" and type(t._data) is da.Array, name
    assert len(made["zeros"].chunks[0]) > 1 and made["arange"].tolist() == list(range(0, 20, 2))
    np.testing.assert_allclose(host(made["linspace"]), np.linspace(0, 1, 11))
    np.testing.assert_array_equal(host(made["eye"]), np.eye(4))
    np.testing.assert_allclose(host(made["fftfreq"]), np.fft.fftfreq(6))


def test_decompositions_and_the_ops_dask_cannot_run_lazily():
    rng = np.random.default_rng(2)
    a_np = rng.standard_normal((3, 4, 4))
    a = md.dask.rechunk(md.asarray(a_np, device="dask"), (1, 2, 2))
    s = a @ a.mT
    w, v = md.linalg.eigh(s)
    np.testing.assert_allclose(host(v @ (w[..., None] * v.mT)), host(s), atol=1e-10)
    q, r = md.linalg.qr(a)
    np.testing.assert_allclose(host(q @ r), a_np, atol=1e-10)
    u, sv, vh = md.linalg.svd(a, full_matrices=False)
    np.testing.assert_allclose(host((u * sv[..., None, :]) @ vh), a_np, atol=1e-10)
    tall = md.asarray(rng.standard_normal((40, 3)), device="dask", chunks=(10, 3))
    q, r = md.linalg.qr(tall)  # Dask's own TSQR (Note [Dask linear algebra])
    np.testing.assert_allclose(host(q.mT @ q), np.eye(3), atol=1e-10)
    np.testing.assert_allclose(host(q @ r), host(tall), atol=1e-10)
    # eig of a real input is complex whatever the values (the standard's rule): lazy too
    for x in (a.to(md.float32), a + 1j * a.mT):
        w, v = md.linalg.eig(x)
        assert w.dtype is v.dtype is md.linalg.eigvals(x).dtype is md.linalg.eig(
            x.to("cpu"))[0].dtype
        np.testing.assert_allclose(host(x @ v), host(v * w[..., None, :]), atol=1e-4)
        np.testing.assert_allclose(np.sort_complex(host(md.linalg.eigvals(x))),
                                   np.sort_complex(host(md.linalg.eigvals(x.to("cpu")))),
                                   rtol=1e-4, atol=1e-5)
    x = md.ones((100,), device="dask")
    kept = md.dropout(x, p=0.5, train=True)
    assert type(kept._data) is da.Array and set(host(kept).tolist()) <= {0.0, 2.0}
    b = md.asarray(np.arange(12.0).reshape(4, 3), device="dask", chunks=2)
    np.testing.assert_allclose(host(md.einsum("bij,jk->bik", [a, b])),
                               np.einsum("bij,jk->bik", a_np, np.arange(12.0).reshape(4, 3)))
    y = md.asarray([1.0, 2.0, 3.0], device="dask", chunks=1)
    y.masked_fill_(y > 1.5, 0.0)
    md.ops.aten.index_put_(y, (md.asarray([0], device="dask"),), md.asarray([7.0], device="dask"))
    assert y.tolist() == [7.0, 0.0, 0.0]


#: the sparse layouts' ops (ops/sparse.py), run below
SPARSE_OPS = {"_indices", "_to_dense", "_to_sparse", "_values", "_sparse_sum",
              "_sparse_sum_backward", "coalesce", "col_indices",
              "crow_indices", "indices", "is_coalesced", "sparse_coo_tensor",
              "sparse_csr_tensor", "sparse_mask", "to_dense", "to_sparse", "to_sparse_csr",
              "values"}


def test_sparse_layouts_have_no_dask_kernels():
    """Sparse tensors live on the CPU (docs/SPARSE.md): on Dask the conversions and
    constructors have no kernel (the error names the Dask key), the parts of a sparse
    tensor are refused for a strided one, and to_dense gives a strided tensor itself."""
    x = md.asarray([[0.0, 1.0]], device="dask")
    assert x.to_dense() is x and x.layout is md.strided
    for call, name in ((x.to_sparse, "_to_sparse"), (x.to_sparse_csr, "_to_sparse"),
                       (lambda: md.sparse_coo_tensor(md.asarray([[0]], device="dask"), x[0, :1]),
                        "sparse_coo_tensor"),
                       (lambda: md.sparse_csr_tensor(md.asarray([0, 1], device="dask"),
                                                     md.asarray([0], device="dask"), x[0, :1]),
                        "sparse_csr_tensor")):
        with pytest.raises(NotImplementedError, match=f"aten::{name}: .*kernel for Dask"):
            call()
    for name in ("indices", "values", "_indices", "_values", "crow_indices", "col_indices",
                 "coalesce", "is_coalesced"):
        with pytest.raises(TypeError, match=f"{name}: expected a sparse tensor"):
            getattr(x, name)()
    with pytest.raises(TypeError, match="sparse_mask: expected a sparse tensor"):
        x.sparse_mask(x)
    with pytest.raises(TypeError, match="_sparse_sum: expected a sparse tensor"):
        md.sparse.sum(x, 0)
    with pytest.raises(TypeError, match="_sparse_sum_backward: expected a sparse tensor"):
        md.ops.aten._sparse_sum_backward(x, x, [0])


#: the catalogue ops without OpInfo samples (the sweeps cannot run them), run above
_RUN_HERE = {"arange", "dropout", "einsum", "empty", "empty_like", "eye", "fft_fftfreq",
             "fft_rfftfreq", "full", "full_like", "index_put_", "lift_fresh", "linalg_eig",
             "linalg_eigh", "linalg_eigvals", "linalg_qr", "linalg_svd", "linspace",
             "masked_fill_", "ones", "ones_like", "to_device_copy", "zeros", "zeros_like",
             "nonzero", *SPARSE_OPS}


def test_every_op_the_sweeps_cannot_run_is_run_here():
    from mdtensor.ops import CATALOGUE

    unswept = {d.name for d in CATALOGUE.values() if d.info is None or d.info.samples is None}
    assert unswept <= _RUN_HERE, f"add a Dask test for {sorted(unswept - _RUN_HERE)}"


# ---------------------------------------------------------------------------------------
# A real cluster: two worker processes on the loopback interface


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed", reason="dask.distributed not installed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address="127.0.0.1:0",
                                  silence_logs=40) as lc:
        yield lc


def test_the_same_program_runs_on_a_local_cluster(cluster):
    from distributed import Client, get_task_stream

    want = _program("cpu")
    with Client(cluster, set_as_default=False) as client, md.dask.use(client):
        x, row, grad, loss = _program("dask")
        with get_task_stream(client) as ts:
            got = md.dask.compute(x, row, grad, loss)
        assert {t["worker"] for t in ts.data} == set(client.scheduler_info()["workers"])
        for g, w in zip(got, want):
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-12)
        step = _logistic_step("dask", chunks=(16, 5))
        for g, w in zip(md.dask.compute(*step), _logistic_step("cpu")):
            np.testing.assert_allclose(g.numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert md.dask.scheduler() is None


def test_an_active_client_is_used_without_use_and_persist_keeps_data_on_the_workers(
        cluster):
    import distributed
    from distributed import Client

    with Client(cluster) as client:  # set_as_default: Dask's default while open
        md.manual_seed(0)
        x = md.randn(2000, 4, device="dask")
        m = md.dask.rechunk(x, (500, 4)).mean(axis=0)
        distributed.wait(md.dask.to_dask(md.dask.persist(x)))  # persist runs in the background
        assert sum(len(keys) for keys in client.has_what().values()) >= len(x.chunks[0])
        a, b = md.dask.compute(m, md.unique_values(md.asarray([3, 1, 3], device="dask")))
        assert a.shape == (4,) and np.all(np.abs(a.numpy()) < 0.1)
        assert b.tolist() == [1, 3]
        assert x.sum().item() == pytest.approx(float(host(x).sum()), rel=1e-4)


# ---------------------------------------------------------------------------------------
# benchmarks/dask_bench.py: the step it times is the one written by hand in dask.array


def test_the_benchmarked_step_matches_dask_array_and_runs_no_more_tasks():
    from benchmarks.dask_bench import dask_step, md_step, task_counts

    X = da.random.default_rng(0).standard_normal((4000, 32), dtype=np.float32, chunks=(500, 32))
    y = (X[:, 0] > 0).astype(np.float32)
    X, y = dask.persist(X, y)
    mine = [md.dask.to_dask(t) for t in md_step(md, md.dask.from_dask(X), md.dask.from_dask(y))]
    theirs = dask_step(da, X, y)
    for a, b in zip(dask.compute(*mine), dask.compute(*theirs)):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7)
    built, run = task_counts(*mine)
    assert run <= task_counts(*theirs)[1], (built, run, task_counts(*theirs))
