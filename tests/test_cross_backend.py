"""Every catalogue op gives the NumPy backend's results on the other backends.

Backends under test: the loopback plug-in (``array_api_strict`` under PrivateUse1,
installed from ``plugins/mdtensor_loopback``) and JAX when installed.  Inputs are each op's
OpInfo samples plus hypothesis-generated arrays for pointwise and reduction ops; gradients
are compared too.  A backend that is not installed skips with the reason.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import backend_params, sample_on
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from mdtensor.ops import CATALOGUE

import mdtensor as md

BACKENDS = backend_params("loopback", "jax", "dask")

# Ops whose results legitimately differ across backends, each with the reason.
SKIP = {
    "nonzero": "returns a tuple of index arrays; compared in test_indexing",
    "dropout": "random",
    "linalg_eig": "eigenvector order/phase is implementation-defined",
    "linalg_eigh": "eigenvector signs are implementation-defined",
    "linalg_qr": "signs are implementation-defined",
    "linalg_svd": "signs are implementation-defined",
    "einsum": "not in the Array API standard",
}
#: ops without a kernel on some backends, by design (docs/SPARSE.md: sparse layouts have
#: kernels on the CPU, CUDA and JAX; tests/test_dask.py checks the missing-kernel error)
_NO_KERNEL_ON = {name: ("loopback", "dask") for name in ("to_sparse", "to_sparse_csr")}
# Ops whose in-place/mutating forms JAX runs through Functionalize (not implemented yet).
_MUTATING_ON_IMMUTABLE = {"index_put_"}


def _decls():
    out = []
    for _key, decl in sorted(CATALOGUE.items()):
        if decl.info is None or decl.info.samples is None or not decl.functional:
            continue
        if decl.name in SKIP:
            continue
        out.append(pytest.param(decl, id=decl.name))
    return out



def _host(x):
    if isinstance(x, md.Tensor) and x.layout is not md.strided:  # sparse: its dense copy
        x = x.to_dense()
    if isinstance(x, md.Tensor):
        return np.asarray(x.to("cpu").numpy(force=True))
    if isinstance(x, (tuple, list)):
        return [_host(v) for v in x]
    return x


def _compare(a, b, what):
    if isinstance(a, list):
        assert len(a) == len(b), what
        for x, y in zip(a, b):
            _compare(x, y, what)
        return
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape, f"{what}: shape {b.shape} vs NumPy backend {a.shape}"
    assert a.dtype == b.dtype, f"{what}: dtype {b.dtype} vs NumPy backend {a.dtype}"
    if a.dtype.kind in "fc":
        tol = 1e-5 if a.dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(b, a, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(b, a, err_msg=what)


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("decl", _decls())
def test_op_matches_numpy_backend(decl, device):
    if device in _NO_KERNEL_ON.get(decl.name, ()):
        pytest.skip(f"{decl.name} has no kernel on {device} (docs/SPARSE.md)")
    packet = decl.functional[0].overloadpacket
    rng = np.random.default_rng(0)
    checked = 0
    # JAX compiles every new (primitive, shape, dtype) eagerly: fewer dtypes keep it fast.
    for dtype in decl.info.dtypes[:3 if device == "jax" else 6]:
        for sample in decl.info.samples(dtype, rng):
            args_cpu = [sample_on(a, "cpu") for a in sample.args]
            kw_cpu = {k: sample_on(v, "cpu") for k, v in sample.kwargs.items()}
            try:
                expected = packet(*args_cpu, **kw_cpu)
            except Exception:  # noqa: BLE001 - samples the NumPy backend rejects
                continue
            args = [sample_on(a, device) for a in sample.args]
            kw = {k: sample_on(v, device) for k, v in sample.kwargs.items()}
            if "factory" in decl.tags:  # no tensor argument carries the device
                kw["device"] = device
            got = packet(*args, **kw)
            what = f"{decl.name}[{dtype.name}] on {device}, sample {sample.name}"
            outs = got if isinstance(got, (tuple, list)) else (got,)
            for o in outs:
                if isinstance(o, md.Tensor):
                    assert o.device.type == device, what
            _compare(_host(expected), _host(got), what)
            checked += 1
    if not checked:
        pytest.skip("no sample runs on the NumPy backend")


_FLOAT_OPS = ["add", "mul", "sub", "div", "maximum", "exp", "tanh", "sin", "sqrt", "abs"]
_INT_OPS = ["add", "mul", "sub", "maximum", "abs"]
_UNARY = {"exp", "tanh", "sin", "sqrt", "abs"}
_REDUCTIONS = ["sum", "prod", "mean", "max", "min"]


@pytest.mark.parametrize("device", BACKENDS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_pointwise_and_reductions_property(device, data):
    dtype = data.draw(st.sampled_from([np.float32, np.float64, np.int64]))
    is_int = dtype == np.int64
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    if is_int:
        elements = st.integers(-1000, 1000)
    else:
        # No subnormal inputs: XLA on CPU flushes them to zero (JAX gives 0 / 1e-45 = nan
        # where NumPy gives 0), a property of the platform rather than of mdtensor.
        elements = (st.floats(-1e3, 1e3, width=32, allow_subnormal=False)
                    | st.sampled_from([np.nan, np.inf, -np.inf, 0.0, -0.0]))
    a = data.draw(hnp.arrays(dtype, shape, elements=elements))
    b = data.draw(hnp.arrays(dtype, hnp.broadcastable_shapes(shape, min_side=0, max_side=4),
                             elements=elements))
    name = data.draw(st.sampled_from(_INT_OPS if is_int else _FLOAT_OPS))
    fn = getattr(md, name)
    nargs = 1 if name in _UNARY else 2
    with np.errstate(all="ignore"):
        expected = fn(*[md.asarray(x, device="cpu") for x in (a, b)[:nargs]])
        got = fn(*[md.asarray(x, device=device) for x in (a, b)[:nargs]])
        _compare(_host(expected), _host(got), f"{name} on {device}")
        if not a.ndim:
            return
        axis = data.draw(st.integers(-a.ndim, a.ndim - 1))
        red = data.draw(st.sampled_from(_REDUCTIONS[:2] if is_int else _REDUCTIONS))
        if red in ("max", "min") and a.shape[axis] == 0:
            return  # an error on every backend (no identity); covered by the OpInfo errors
        if red == "prod" and not is_int:
            a = np.clip(a, -2, 2)  # keep the products finite and well-conditioned
        rfn = getattr(md, red)
        _compare(_host(rfn(md.asarray(a, device="cpu"), axis=axis)),
                 _host(rfn(md.asarray(a, device=device), axis=axis)), f"{red} on {device}")


def _grad_decls():
    out = []
    for _key, decl in sorted(CATALOGUE.items()):
        info = decl.info
        if (info is None or info.samples is None or not decl.functional or not
                info.differentiable or decl.name in SKIP
                or md.float64 not in info.dtypes):
            continue
        out.append(pytest.param(decl, id=decl.name))
    return out


def _grads_of(packet, sample, device):
    """Gradients of sum(float outputs) w.r.t. every float array argument, on ``device``."""
    leaves = []

    def conv(v):
        if isinstance(v, np.ndarray) and v.dtype.kind == "f":
            t = md.asarray(v.copy(), device=device, requires_grad=True)
            leaves.append(t)
            return t
        return sample_on(v, device)

    args = [conv(a) for a in sample.args]
    kw = {k: conv(v) for k, v in sample.kwargs.items()}
    got = packet(*args, **kw)
    outs = [o for o in (got if isinstance(got, (tuple, list)) else (got,))
            if isinstance(o, md.Tensor) and o.dtype in (md.float32, md.float64)]
    if not leaves or not outs:
        return None
    loss = md.sum(outs[0])
    for o in outs[1:]:
        loss = loss + md.sum(o)
    loss.backward()
    return [_host(t.grad) if t.grad is not None else None for t in leaves]


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("decl", _grad_decls())
def test_op_gradients_match_numpy_backend(decl, device):
    packet = decl.functional[0].overloadpacket
    rng = np.random.default_rng(0)
    checked = 0
    for sample in list(decl.info.samples(md.float64, rng))[:2]:
        try:
            with np.errstate(all="ignore"):
                expected = _grads_of(packet, sample, "cpu")
        except Exception:  # noqa: BLE001 - samples the NumPy backend cannot differentiate
            continue
        if expected is None:
            continue
        with np.errstate(all="ignore"):
            got = _grads_of(packet, sample, device)
        what = f"grad of {decl.name} on {device}, sample {sample.name}"
        assert len(got) == len(expected), what
        for e, g in zip(expected, got):
            assert (e is None) == (g is None), what
            if e is not None:
                _compare(e, g, what)
        checked += 1
    if not checked:
        pytest.skip("no differentiable float64 sample runs on the NumPy backend")


@pytest.mark.parametrize("device", BACKENDS)
def test_gradients_match_numpy_backend(device):
    rng = np.random.default_rng(1)
    w_np, x_np = rng.standard_normal((4, 3)), rng.standard_normal((5, 4))

    def grads(dev):
        w = md.asarray(w_np, device=dev, requires_grad=True)
        x = md.asarray(x_np, device=dev)
        loss = md.sum(md.log_softmax(md.tanh(x @ w), dim=-1) * 0.5)
        loss.backward()
        return _host(w.grad)

    _compare(grads("cpu"), grads(device), f"MLP gradient on {device}")


@pytest.mark.parametrize("device", BACKENDS)
def test_views_and_inplace_behave_like_numpy(device):
    x = md.asarray([1.0, 2.0, 3.0], device=device)
    v = x[1:]
    v.add_(1)
    assert _host(x).tolist() == [1.0, 3.0, 4.0]
    x[0] = 10.0
    assert _host(x).tolist() == [10.0, 3.0, 4.0] and x._version == 2


@pytest.mark.parametrize("device", BACKENDS)
def test_uint64_values_above_int64_keep_their_value(device):
    # Regression (loopback): Python ints went through NumPy's inference (float64) first.
    big = 2**63 + 1
    for values in ([big, 1], big):
        x = md.asarray(values, dtype=md.uint64, device=device)
        assert x.dtype is md.uint64 and x.tolist() == values


_GATHERS = {
    "take": lambda x, i: md.take(x, i, axis=1),
    "take_along_axis": lambda x, i: md.take_along_axis(x, md.broadcast_to(i, (2, 2)), axis=1),
    "index_select": lambda x, i: md.index_select(x, 1, i),
    "getitem": lambda x, i: x[:, i],
    "setitem": lambda x, i: x.__setitem__((slice(None), i), 0.0),
}


@pytest.mark.parametrize("device", BACKENDS + ["cpu"])
@pytest.mark.parametrize("name", list(_GATHERS))
@settings(max_examples=25, deadline=None)
@given(index=st.integers(-8, 8))
def test_out_of_bounds_indices_raise_on_every_backend(device, name, index):
    # Note [Gathers check their indices]: CuPy wraps, JAX returns NaN or clamps; every
    # backend raises NumPy's IndexError, named, and leaves its input as it was.
    x = md.asarray(np.arange(6.0).reshape(2, 3), device=device)
    i = md.asarray([0, index], device=device)
    # index_select is PyTorch's: its indices lie in [0, size), a negative one raises
    if -3 <= index < 3 and not (name == "index_select" and index < 0):
        _GATHERS[name](x, i)
        if name != "setitem":
            got = np.asarray(_host(_GATHERS[name](x, i)))
            want = np.asarray(_host(_GATHERS[name](md.asarray(_host(x)), md.asarray([0, index]))))
            np.testing.assert_array_equal(got, want)
        return
    version = x._version
    with pytest.raises(IndexError, match=f"index {index} is out of bounds for dimension 1 "
                                         f"with size 3"):
        _GATHERS[name](x, i)
    assert x._version == version
    np.testing.assert_array_equal(_host(x), np.arange(6.0).reshape(2, 3))


# -- sizes no array can have (issue 25 item 8; Note [Allocation sizes] in ops/_factory.py) --


def _run_isolated(code: str) -> str:
    """Run ``code`` in a fresh interpreter: an abort must not take the test run with it."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.parametrize("device", ["cpu", *BACKENDS])
def test_impossible_sizes_raise_value_error_on_every_backend(device):
    out = _run_isolated(f"""
import mdtensor as md
calls = [lambda: md.zeros((10**10, 10**10), device={device!r}),
         lambda: md.ones((2**62, 4), device={device!r}),
         lambda: md.full((10**10, 10**10), 1.0, device={device!r}),
         lambda: md.arange(10**19, device={device!r}),
         lambda: md.randn(10**10, 10**10, device={device!r}),
         lambda: md.empty((10**10, 10**10), device="meta")]
for call in calls:
    try:
        call()
    except ValueError as e:
        assert "larger than the largest possible size" in str(e), e
        print(str(e).split(": ")[0])
""")
    assert out.split() == ["aten::zeros", "aten::ones", "aten::full", "aten::arange", "randn",
                           "aten::empty"]


# -- one behaviour per case on every backend (issue 25 item 9) -----------------------------


@pytest.mark.parametrize("device", ["cpu", *BACKENDS])
def test_integer_division_by_zero_raises_on_every_backend(device):
    x = md.asarray([5, -5], device=device)
    for call in (lambda: x // 0, lambda: x % 0, lambda: x // md.asarray([0, 1], device=device),
                 lambda: md.fmod(x, 0), lambda: md.floor_divide(5, md.asarray([0, 1],
                                                                           device=device))):
        with pytest.raises(ZeroDivisionError, match="integer division by zero"):
            call()
    with pytest.raises(ZeroDivisionError):
        x //= 0
    assert x.tolist() == [5, -5] and x._version == 0
    assert (md.asarray([5.0], device=device) // 0).tolist() == [float("inf")]
    assert (x // 2).tolist() == [2, -3] and (x % 3).tolist() == [2, 1]


@pytest.mark.parametrize("device", ["cpu", *BACKENDS])
def test_python_ints_out_of_an_integer_dtypes_range(device):
    # arithmetic wraps (PyTorch, JAX); comparisons are exact (Note [Integers out of range])
    a = md.asarray([1, 50], dtype=md.int8, device=device)
    assert (a + 300).tolist() == [45, 94] and (a + 300).dtype is md.int8
    assert (a * 300).tolist() == [44, -104] and (300 - a).tolist() == [43, -6]
    assert (a < 300).tolist() == [True, True] and (a == 44).tolist() == [False, False]
    assert (a > -200).tolist() == [True, True]
    a.add_(300)
    assert a.tolist() == [45, 94]


@pytest.mark.parametrize("device", ["cpu", *BACKENDS])
def test_view_needing_a_copy_raises_on_every_backend(device):
    m = md.zeros((2, 3), device=device)
    for call in (lambda: m.mT.view(6), lambda: m[:, :2].view(4)):
        with pytest.raises(ValueError, match="not compatible with the shape"):
            call()
    assert m.mT.reshape(6).shape == (6,) and m[0].view(3, 1).shape == (3, 1)
    assert m.mT.mT.view(6).shape == (6,)


@pytest.mark.parametrize("device", ["cpu", *BACKENDS])
def test_scalars_written_into_tensors_convert_alike(device):
    # Note [Scalars written into tensors]: PyTorch's rule on every backend
    x = md.zeros(3, device=device)
    for call in (lambda: x.__setitem__(0, 1j), lambda: x.masked_fill_(x == 0, 1j),
                 lambda: x.__setitem__(0, None)):
        with pytest.raises(TypeError, match="can't assign"):
            call()
    assert x.tolist() == [0.0, 0.0, 0.0] and x._version == 0
    y = md.zeros(3, dtype=md.int64, device=device)
    y[:] = 2.5
    assert y.tolist() == [2, 2, 2]
    y.masked_fill_(y == 2, -3.7)
    assert y.tolist() == [-3, -3, -3]
    i8 = md.zeros(2, dtype=md.int8, device=device)
    with pytest.raises(OverflowError, match="without overflow"):
        i8[0] = 300
    b = md.zeros(2, dtype=md.bool, device=device)
    b[0] = 2.5
    assert b.tolist() == [True, False]


def _t(device, values, dtype=None):
    return md.asarray(np.asarray(values, dtype=dtype), device=device)


# Calls the Array API leaves out (bool arithmetic, integer inputs of float predicates) or
# where a backend's own function departs from NumPy's (JAX's infinities for singular
# matrices, its power of uint8): every backend gives the NumPy backend's result, or
# raises the same error (Note [Arithmetic of bools] in ops/_bools.py, Note [Singular
# matrices] in ops/linalg.py).
_CALLS = {
    "add of bools": lambda d: md.add(_t(d, [True, False]), _t(d, [True, True])),
    "mul of bools": lambda d: md.mul(_t(d, [True, False]), _t(d, [True, True])),
    "maximum of bools": lambda d: md.maximum(_t(d, [True, False]), _t(d, [False, False])),
    "sum of bools": lambda d: md.sum(_t(d, [[True, False], [True, True]]), axis=0),
    "prod of bools": lambda d: md.prod(_t(d, [True, False])),
    "max of bools": lambda d: md.max(_t(d, [[True, False], [False, False]]), axis=1),
    "max.dim of bools": lambda d: list(md.max(_t(d, [[False, True], [False, False]]), dim=1)),
    "clamp of bools": lambda d: md.clamp(_t(d, [True, False]), min=1),
    "clamp with min above max": lambda d: md.clamp(_t(d, [1.0, 5.0]), min=3, max=2),
    "isfinite of ints": lambda d: md.isfinite(_t(d, [1, -2], "int32")),
    "isnan of bools": lambda d: md.isnan(_t(d, [True])),
    "signbit of ints": lambda d: md.signbit(_t(d, [1, -2, 0], "int64")),
    "isin of floats": lambda d: md.isin(_t(d, [1.0, 2.5]), _t(d, [2.5, 3.0])),
    "isin of a 0-d tensor": lambda d: md.isin(_t(d, 2), _t(d, [2, 3]), invert=True),
    "isin of no test elements": lambda d: md.isin(_t(d, [1, 2]), _t(d, [], "int64")),
    "fft of ints": lambda d: md.fft.fft(_t(d, [1, 2, 3], "int32")),
    "rfft of float64": lambda d: md.fft.rfft(_t(d, [1.0, 2.0, 3.0])),
    "fftshift of ints": lambda d: md.fft.fftshift(_t(d, [[1, 2, 3], [4, 5, 6]])),
    "astype of complex to float": lambda d: md.astype(_t(d, [1 + 2j, -3j]), md.float32),
    "astype of complex to bool": lambda d: md.astype(_t(d, [0j, -3j]), md.bool),
    "cumulative_sum of complex as float": lambda d: md.cumulative_sum(
        _t(d, [1 + 2j, 3 - 1j]), dtype=md.float64),
    "real of floats": lambda d: md.real(_t(d, [1.5, -2.0])),
    "sign of complex": lambda d: md.sign(_t(d, [3 + 4j, 0j])),
    "logsumexp of complex": lambda d: md.logsumexp(_t(d, [1 + 1j, 2 - 1j])),
    "uint8 to an int power": lambda d: md.pow(_t(d, [2, 3], "uint8"), 2),
    "ints to negative powers": lambda d: md.pow(_t(d, [2, 3]), _t(d, [-1, 1])),
    "complex powers of 0": lambda d: md.pow(_t(d, [0j] * 5, "complex64"),
                                            _t(d, [0j, 2, 1 + 1j, -1, 1j], "complex64")),
    "floor_divide of bools": lambda d: md.floor_divide(_t(d, [True]), _t(d, [True])),
    "remainder of bools": lambda d: md.remainder(_t(d, [False]), _t(d, [True])),
    "inv of a singular matrix": lambda d: md.linalg.inv(_t(d, [[1.0, 2.0], [2.0, 4.0]])),
    "solve with a singular matrix": lambda d: md.linalg.solve(
        _t(d, [[1.0, 2.0], [2.0, 4.0]]), _t(d, [1.0, 1.0])),
    "cholesky of an indefinite matrix": lambda d: md.linalg.cholesky(
        _t(d, [[1.0, 2.0], [2.0, 1.0]])),
    "matrix_power of ints": lambda d: md.linalg.matrix_power(_t(d, [[1, 1], [1, 0]]), 5),
    "matrix_power of a singular matrix": lambda d: md.linalg.matrix_power(
        _t(d, [[1.0, 2.0], [2.0, 4.0]]), -1),
    "trace of bools": lambda d: md.linalg.trace(_t(d, [[True, False], [True, True]])),
    "mm of mismatched matrices": lambda d: md.mm(_t(d, [[1.0, 2.0]]), _t(d, [[1.0, 2.0]])),
    "take_along_axis out of range": lambda d: md.take_along_axis(
        _t(d, [1.0, 2.0]), _t(d, [2]), axis=0),
}


def _outcome(call, device):
    try:
        with np.errstate(all="ignore"):
            return _host(call(device))
    except (TypeError, ValueError, IndexError) as e:
        return e


@pytest.mark.parametrize("device", BACKENDS)
@pytest.mark.parametrize("name", list(_CALLS))
def test_calls_outside_the_standard_match_the_numpy_backend(name, device):
    expected, got = _outcome(_CALLS[name], "cpu"), _outcome(_CALLS[name], device)
    if isinstance(expected, Exception) or isinstance(got, Exception):
        assert type(got) is type(expected), f"{name} on {device}: {got!r}, NumPy backend " \
                                             f"{expected!r}"
        return
    _compare(expected, got, f"{name} on {device}")
