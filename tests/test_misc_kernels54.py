"""The CPU kernels reworked for small-input speed (issue 32) compute what the kernels under
them compute -- the same values, dtypes, shapes and errors -- and what PyTorch computes,
gradients included; the calls they do not take still work: the scans' and selections'
kernel (``register_cpu_kernel`` in ops/_cpu_kernels.py: ``cummax``, ``cummin``,
``median``, ``cumsum``), the vector norm's tuples of axes (Note [Axes of the vector norm]
in ops/linalg.py), ``linalg.cross``'s computation and ``median``'s 0-d result."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from mdtensor.ops._decl import CATALOGUE

import mdtensor as md
from mdtensor.dispatch.keys import DispatchKey

torch = pytest.importorskip("torch")

REAL_DTYPES = ["int8", "uint8", "int32", "int64", "float16", "float32", "float64"]


def _kernel(key, dispatch_key, overload=0):
    return CATALOGUE[key].functional[overload].kernels_for(dispatch_key)[-1].fn


def _outcome(fn, *args, **kwargs):
    """``fn``'s result, or the exception it raised."""
    with warnings.catch_warnings(action="ignore"), np.errstate(all="ignore"):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (compared by ``_same``)
            return e


def _same(a, b):
    """Two outcomes agree: errors of one class and message, or Tensors (or tuples of
    them) of one dtype, shape and values."""
    if isinstance(a, Exception) or isinstance(b, Exception):
        assert (type(a), str(a)) == (type(b), str(b))
    elif isinstance(b, tuple):
        assert type(a) is type(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        x, y = a.numpy(), b.numpy()
        assert (x.dtype, x.shape) == (y.dtype, y.shape)
        np.testing.assert_array_equal(x, y)


def _check(key, *args, **kwargs):
    """The CPU kernel and the generic (ArrayAPI) one agree on this call."""
    cpu, generic = _kernel(key, DispatchKey.CPU), _kernel(key, DispatchKey.ArrayAPI)
    assert cpu.__name__.startswith("cpu["), cpu.__name__
    _same(_outcome(cpu, *args, **kwargs), _outcome(generic, *args, **kwargs))


def _t(a, **kw):
    return md.asarray(a, device="cpu", **kw)  # the CPU kernels, whatever the default device


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _against_torch(got, expected, rtol=1e-6):
    x, y = _np(got), _np(expected)
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
    np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol, equal_nan=True)


def _grads(md_fn, torch_fn, a, rtol=1e-6):
    """The gradients of ``md_fn`` and ``torch_fn`` at ``a`` (weighted) agree."""
    x, tx = _t(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = md_fn(x), torch_fn(tx)
    _against_torch(y, ty, rtol)
    w = np.random.default_rng(0).standard_normal(tuple(y.shape)).astype(_np(ty).dtype)
    (y * _t(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    _against_torch(x.grad, tx.grad, rtol)


def _arrays(dtype, shapes=((3, 5), (6,), (2, 3, 4), (1, 1), (0, 3))):
    rng = np.random.default_rng(0)
    for shape in shapes:
        a = rng.integers(-3, 4, shape) if dtype[0] in "iu" else rng.standard_normal(shape)
        a = np.abs(a).astype(dtype) if dtype[0] == "u" else a.astype(dtype)
        if dtype[0] == "f" and a.size >= 4:  # NaNs, ties and a signed zero
            a.reshape(-1)[:4] = [np.nan, 1.0, 1.0, -0.0]
        yield a


# -- register_cpu_kernel: cummax, cummin, median, the scans ---------------------------------


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@pytest.mark.parametrize("dtype", REAL_DTYPES)
def test_cumextreme_fast_path_matches_the_generic_kernel(name, dtype):
    for a in _arrays(dtype):
        for dim in range(-a.ndim, a.ndim):
            _check(f"aten::{name}", _t(a), dim)
        _check(f"aten::{name}", _t(a), a.ndim)  # the generic kernel's IndexError
        _check(f"aten::{name}", _t(a), dim=0)  # by keyword: the kernel's star call


@pytest.mark.parametrize("name", ["cummax", "cummin"])
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_cumextreme_matches_torch(name, data):
    dtype = data.draw(st.sampled_from(["int64", "float32", "float64"]))
    a = data.draw(hnp.arrays(dtype, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                             elements=st.sampled_from([0, 1, -2, 3]) if dtype == "int64"
                             else st.sampled_from([0.0, -0.0, 1.5, -2.0, np.nan, np.inf])))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    got = getattr(md, name)(_t(a), dim)
    expected = getattr(torch, name)(torch.from_numpy(a.copy()), dim)
    _against_torch(got.values, expected.values)
    _against_torch(got.indices, expected.indices)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_cumextreme_gradient_and_calls_the_kernel_does_not_take(name):
    a = np.random.default_rng(1).standard_normal((3, 5))
    _grads(lambda x: getattr(md, name)(x, 1).values,
           lambda x: getattr(torch, name)(x, 1).values, a)
    r = getattr(_t(a), name)(dim=-1)  # the method, by keyword
    _against_torch(r.indices, getattr(torch, name)(torch.from_numpy(a), dim=-1).indices)
    b = _t(np.array([True, False, True]))  # bool: the generic kernel's
    _check(f"aten::{name}", b, 0)
    r0 = getattr(md, name)(_t(np.float32(2.5)), 0)  # 0-d: the generic kernel's
    assert r0.values.shape == () and int(r0.indices) == 0


@pytest.mark.parametrize("dtype", REAL_DTYPES)
def test_median_fast_path_matches_the_generic_kernel(dtype):
    for a in _arrays(dtype):
        _check("aten::median", _t(a))
        r = md.median(_t(a)) if a.size else None
        if r is not None:
            assert r.shape == () and r.dtype == md.asarray(a).dtype
            _against_torch(r, torch.median(torch.from_numpy(a.copy())))


def test_median_result_owns_no_input_memory_and_keeps_gradients():
    a = np.array([3.0, 1.0, 2.0, 5.0])
    x = _t(a)
    r = md.median(x)
    r += 1  # the result is a view of the kernel's own sorted copy, never of ``x``
    np.testing.assert_array_equal(x.numpy(), a)
    assert float(r) == 3.0
    _grads(md.median, torch.median, np.random.default_rng(2).standard_normal((3, 4)))


def test_scans_through_the_kernel_forms():
    a = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    for args, kwargs in [((1,), {}), ((), {"dim": 1}), ((1,), {"dtype": md.float64})]:
        got = md.cumsum(_t(a), *args, **kwargs)
        expected = torch.cumsum(torch.from_numpy(a), *args, **(
            {"dtype": torch.float64} if "dtype" in kwargs else
            {"dim": 1} if "dim" in kwargs else {}))
        _against_torch(got, expected, 1e-5)
    topk = md.topk(_t(a), 2)
    _against_torch(topk.values, torch.topk(torch.from_numpy(a), 2).values)


# -- linalg.norm and vector_norm: tuples of axes -------------------------------------------


_AXES = [(0, 2), (2, 0), (-1, 0), (0, 1, 2), (1,), (-3, -1), (0, 0), (0, 3), (-4, 1),
         (1.0, 2), (True, 2), (0, 2.0), (), (0, None)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int64"])
def test_vector_norm_axes_match_the_generic_kernel(dtype):
    a = _t(np.random.default_rng(4).standard_normal((2, 3, 4)).astype(dtype))
    for axis in _AXES * 2:  # twice: the second time from the kept axes
        for keepdims in (False, True):
            cpu = _outcome(_kernel("aten::linalg_vector_norm", DispatchKey.CPU), a,
                           axis=axis, keepdims=keepdims)
            generic = _outcome(_kernel("aten::linalg_vector_norm", DispatchKey.ArrayAPI), a,
                               axis=axis, keepdims=keepdims)
            if isinstance(generic, Exception):
                _same(cpu, generic)
            else:  # (the fast path's scaled sum may round apart by an ulp)
                x, y = cpu.numpy(), generic.numpy()
                assert x.dtype == y.dtype and x.shape == y.shape
                np.testing.assert_allclose(x, y, rtol=1e-6)


@pytest.mark.parametrize("dim", [(0, 2), (2, 0), (-1, -3), (1, 2), (1,), [0, 2]])
@pytest.mark.parametrize("keepdim", [False, True])
def test_linalg_norm_axes_match_torch_with_gradients(dim, keepdim):
    a = np.random.default_rng(5).standard_normal((2, 3, 4))
    for _ in range(2):
        _grads(lambda x: md.linalg.norm(x, None, dim, keepdim),
               lambda x: torch.linalg.norm(x, None, dim, keepdim), a)
    f = a.astype(np.float32)
    _against_torch(md.linalg.norm(_t(f), None, dim, keepdim),
                   torch.linalg.norm(torch.from_numpy(f), None, dim, keepdim), 1e-6)


def test_linalg_norm_axes_not_taken():
    a = _t(np.ones((2, 3, 4)))
    md.linalg.norm(a, None, (0, 2))  # the axes kept for (0, 2)
    decomposition = _kernel("aten::linalg_norm", DispatchKey.CompositeImplicitAutograd)
    for dim in [(0, 0), (0, 3), (1.0, 2), (True, 2)]:  # the decomposition's errors
        _same(_outcome(md.linalg.norm, a, None, dim), _outcome(decomposition, a, None, dim))
    assert float(md.linalg.norm(a, None, (0, 1, 2))) == pytest.approx(np.sqrt(24))


# -- linalg.cross ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int64", "uint8",
                                   "complex64"])
def test_cross_fast_path_matches_the_generic_kernel(dtype):
    rng = np.random.default_rng(6)
    for shape, axes in [((4, 3), (-1, 1, 0, -2)), ((3,), (0, -1)), ((3, 4), (0, -2, 1)),
                        ((2, 3, 5), (1, -2, 2)), ((2, 5, 3), (2, -1, 0)), ((0, 3), (-1,))]:
        a = (rng.standard_normal(shape) * 50).astype(dtype)
        b = (rng.standard_normal(shape) * 50).astype(dtype)
        for axis in axes:
            _check("aten::linalg_cross", _t(a), _t(b), axis=axis)
            if a.shape[axis % a.ndim] == 3:
                assert np.array_equal(md.linalg.cross(_t(a), _t(b), axis=axis).numpy(),
                                      np.cross(a, b, axis=axis))


@given(hnp.arrays(st.sampled_from([np.float32, np.float64]),
                  st.tuples(st.integers(0, 3), st.just(3)), elements=st.integers(-300, 300)),
       hnp.arrays(np.float32, st.just(3), elements=st.integers(-300, 300)))
@settings(max_examples=40, deadline=None)
def test_cross_matches_torch(a, v):
    # (integers: exact products, where PyTorch's fused multiply-adds round apart)
    b = np.broadcast_to(v, a.shape).astype(a.dtype)
    _against_torch(md.linalg.cross(_t(a), _t(b)),
                   torch.linalg.cross(torch.from_numpy(a), torch.from_numpy(b)), 1e-5)


def test_cross_gradient_and_calls_the_kernel_does_not_take():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    _grads(lambda x: md.linalg.cross(x, _t(b)), lambda x: torch.linalg.cross(
        x, torch.from_numpy(b)), a)
    # broadcasting, mixed dtypes and a bad length: the generic kernel's
    _check("aten::linalg_cross", _t(a), _t(b[:1]))
    _check("aten::linalg_cross", _t(a.astype(np.float32)), _t(b))
    _check("aten::linalg_cross", _t(a[:, :2]), _t(b[:, :2]))


# -- tril and triu ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tril", "triu"])
@pytest.mark.parametrize("dtype", REAL_DTYPES + ["bool", "complex64", "bfloat16"])
def test_tri_fast_path_matches_the_generic_kernel(name, dtype):
    rng = np.random.default_rng(8)
    for shape in [(3, 4), (2, 3, 3), (4, 2), (0, 3), (1, 1), (2, 0, 2), (4,), ()]:
        a = _t(rng.standard_normal(shape) * 3).astype(getattr(md, dtype))
        for k in range(-5, 6):
            _check(f"aten::{name}", a, k=k)
        _check(f"aten::{name}", a)
        _check(f"aten::{name}", a, k=True)  # not an int: the kernel under it


@pytest.mark.parametrize("name", ["tril", "triu"])
@given(hnp.arrays(st.sampled_from([np.float32, np.int64]),
                  hnp.array_shapes(min_dims=2, max_dims=4, max_side=5)),
       st.integers(-6, 6))
@settings(max_examples=40, deadline=None)
def test_tri_matches_torch(name, a, k):
    got = getattr(md, name)(_t(a), k=k)
    _same(got, _t(getattr(torch, name)(torch.from_numpy(a), diagonal=k).numpy()))
    _same(getattr(_t(a), name)(diagonal=k), got)


@pytest.mark.parametrize("name", ["tril", "triu"])
def test_tri_gradient_and_calls_the_kernel_does_not_take(name):
    a = np.random.default_rng(9).standard_normal((2, 3, 4))
    _grads(lambda x: getattr(md, name)(x, k=1), lambda x: getattr(torch, name)(x, 1), a)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        getattr(md, name)(_t(np.ones(3)), k=0)


# -- moveaxis: the kept permutations -----------------------------------------------------------


def test_moveaxis_fast_path_matches_numpy_and_the_generic_kernel():
    generic = _kernel("aten::moveaxis", DispatchKey.ArrayAPI)
    for shape in [(2, 3, 4), (5,), (2, 3), (1, 2, 3, 4)]:
        a = np.random.default_rng(10).standard_normal(shape)
        n = len(shape)
        for _ in range(2):  # the second time from the kept permutations
            for s in range(-n - 1, n + 1):
                for d in range(-n - 1, n + 1):
                    _moved_as_generic(generic, _t(a), s, d)
    a = _t(np.ones((2, 3, 4)))
    md.moveaxis(a, 1, 2)
    for s, d in [(True, 2), ((0, 1), (2, 0))]:  # the generic kernel's
        _moved_as_generic(generic, a, s, d)
    for s, d in [(1.0, 2), (1, 2.0)]:  # the dispatcher's
        with pytest.raises(TypeError, match="no overload matches"):
            md.moveaxis(a, s, d)


def _moved_as_generic(generic, a, s, d):
    """``md.moveaxis(a, s, d)`` is the generic kernel's result, or its error (which the
    generic kernel prefixes with the op's name; the view's impl, called directly, not)."""
    got, expected = _outcome(md.moveaxis, a, s, d), _outcome(generic, a, s, d)
    if isinstance(expected, Exception):
        assert type(got) is type(expected) and str(got) in str(expected), (got, expected)
    else:
        _same(got, expected)
        assert np.array_equal(got.numpy(), np.moveaxis(a.numpy(), s, d))


def test_moveaxis_is_a_view_with_gradients():
    a = _t(np.zeros((2, 3, 4)))
    v = md.moveaxis(a, 0, 2)
    v[0, 0, 1] = 5.0
    assert float(a[1, 0, 0]) == 5.0
    _grads(lambda x: md.moveaxis(x, -1, 0), lambda x: torch.moveaxis(x, -1, 0),
           np.random.default_rng(11).standard_normal((2, 3, 4)))
