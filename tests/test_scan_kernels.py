"""The one-frame CPU kernels of clamp, isin, the scans (``cumulative_sum``,
``cumulative_prod``, ``logcumsumexp``: Note [CPU scan kernels] in ops/_cpu_reductions.py),
nansum and nanmean (leaf kernels: Note [Composite ops with CPU kernels]), angle and
nan_to_num (Note [One-frame kernels of nan_to_num and angle] in ops/float_values.py) and
lgamma compute what the kernels under them compute -- the same values, dtypes, shapes and
errors -- and what PyTorch computes, gradients included; the calls they do not take still
work."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from mdtensor.ops._decl import CATALOGUE

import mdtensor as md
from mdtensor.dispatch.kernel import LEAF_KERNELS
from mdtensor.dispatch.keys import DispatchKey

torch = pytest.importorskip("torch")

FLOAT_DTYPES = ["float16", "float32", "float64"]
SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0]


def _op(key, overload=0):
    return CATALOGUE[key].functional[overload]


def _cpu(key):
    """The op's CPU kernel: the hand-written one under test."""
    kernel = _op(key).kernels_for(DispatchKey.CPU)[-1].fn
    assert kernel.__name__.startswith("cpu["), kernel.__name__
    return kernel


def _generic(key):
    """The kernel the op had before the CPU kernel: its ArrayAPI kernel, else its
    decomposition."""
    op = _op(key)
    return (op.kernels_for(DispatchKey.ArrayAPI)
            or op.kernels_for(DispatchKey.CompositeImplicitAutograd))[-1].fn


def _outcome(fn, *args, **kwargs):
    """``fn``'s result, or the exception it raised (``_same`` compares its class and
    message)."""
    with warnings.catch_warnings(action="ignore"), np.errstate(all="ignore"):
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001
            return e


def _same(a, b, exact=True):
    if isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert not isinstance(a, Exception), (a, b)
    x, y = np.asarray(a.numpy()), np.asarray(b.numpy())
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
    if exact or x.dtype.kind not in "fc":
        np.testing.assert_array_equal(x, y)
    else:  # sums in another order round apart
        tol = 8 * np.finfo(x.dtype).eps
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol, equal_nan=True)


def _check(key, *args, exact=True, **kwargs):
    """The CPU kernel and the generic one agree on this call (values or errors)."""
    _same(_outcome(_cpu(key), *args, **kwargs), _outcome(_generic(key), *args, **kwargs),
          exact)


def _t(a, **kw):
    return md.asarray(a, device="cpu", **kw)  # the CPU kernels, whatever the default device


def _against_torch(got, expected, rtol=1e-6):
    x = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    y = expected.detach().numpy()
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
    np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol, equal_nan=True)


def _grads(md_fn, torch_fn, a, rtol=1e-6):
    """The gradients of ``md_fn`` and ``torch_fn`` at ``a`` (weighted: every element's
    gradient counts) agree."""
    x, tx = _t(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = md_fn(x), torch_fn(tx)
    _against_torch(y, ty, rtol)
    w = np.random.default_rng(0).standard_normal(tuple(y.shape)).astype(
        ty.detach().numpy().dtype)
    (y * _t(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    _against_torch(x.grad, tx.grad, rtol)


def _float_cases():
    rng = np.random.default_rng(0)
    for dtype in FLOAT_DTYPES:
        for shape in [(4, 5), (7,), (), (0, 3), (2, 3, 4)]:
            a = rng.standard_normal(shape).astype(dtype)
            if a.size >= len(SPECIALS):
                a.reshape(-1)[:len(SPECIALS)] = SPECIALS
            yield a


# -- clamp ---------------------------------------------------------------------------------


_BOUNDS = [(-0.5, 0.5), (0, 1), (1.0, -1.0), (-1, 2.5), (0.5, 0.5), (-70000, 70000),
           (float("nan"), 1.0), (-math.inf, 0.0)]


def test_clamp_fast_path_matches_the_generic_kernel():
    for a in _float_cases():
        x = _t(a)
        for lo, hi in _BOUNDS:
            _check("aten::clamp", x, lo, hi)
            _check("aten::clamp", x, min=lo, max=hi)
        _check("aten::clamp", x, None, 0.5)  # one bound: the kernel under it
        _check("aten::clamp", x, -0.5)
        _check("aten::clamp", x)


@given(hnp.arrays(st.sampled_from([np.float32, np.float64]), hnp.array_shapes(max_dims=3),
                  elements=st.floats(-1e6, 1e6, width=32)),
       st.floats(-10, 10, width=32), st.floats(-10, 10, width=32))
@settings(max_examples=60, deadline=None)
def test_clamp_matches_torch(a, lo, hi):
    got = md.clamp(_t(a), lo, hi)
    _against_torch(got, torch.clamp(torch.tensor(a), lo, hi))
    _same(got, _generic("aten::clamp")(_t(a), lo, hi))


def test_clamp_calls_the_kernel_does_not_take():
    x = _t(np.array([[-2, 0, 3]], np.int32))
    _check("aten::clamp", x, -1, 1)  # integers: their bounds' own rules
    _check("aten::clamp", x, 0.5, 1.5)
    _check("aten::clamp", _t(np.array([True, False])), 0, 1)  # bools
    _check("aten::clamp", _t(np.array([1 + 1j], np.complex64)), 0.0, 1.0)  # the op's error
    _check("aten::clamp", _t(np.array([1.0, 2.0])), True, 1.5)  # a bool bound
    y = md.clamp(_t(np.array([-1.0, 0.5, 3.0])), _t(np.array(0.0)), _t(np.array(1.0)))
    np.testing.assert_array_equal(y.numpy(), [0.0, 0.5, 1.0])  # tensor bounds
    with pytest.raises(ValueError, match="clamp"):
        md.clamp(_t(np.ones(2)), "a", 1.0)
    with pytest.raises(TypeError, match="complex"):
        md.clamp(_t(np.ones(2, np.complex64)), 0.0, 1.0)


def test_clamp_gradient_matches_torch():
    a = np.array([[-1.0, -0.5, 0.0, 0.25, 0.5, 2.0]])
    for dtype in ("float32", "float64"):
        _grads(lambda x: md.clamp(x, -0.5, 0.5), lambda x: torch.clamp(x, -0.5, 0.5),
               a.astype(dtype))


# -- isin ----------------------------------------------------------------------------------


_ISIN_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint64", "float32", "float64",
                "complex64"]


def test_isin_fast_path_matches_the_generic_kernel():
    rng = np.random.default_rng(1)
    for dtype in _ISIN_DTYPES:
        for shape, test_shape in [((2, 3), (4,)), ((), (3,)), ((5,), (2, 2)), ((4,), (0,)),
                                  ((0, 2), (3,)), ((3,), ()), ((600,), (20,))]:
            a = rng.integers(0, 9, shape).astype(dtype)
            b = rng.integers(0, 9, test_shape).astype(dtype)
            for invert in (False, True):
                _check("aten::isin", _t(a), _t(b), invert=invert)
            _check("aten::isin", _t(a), _t(b))


@given(st.sampled_from(["int8", "int32", "int64", "uint8", "float32", "float64"]),
       hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=6),
       st.integers(0, 12), st.booleans(), st.data())
@settings(max_examples=60, deadline=None)
def test_isin_matches_torch(dtype, shape, n, invert, data):
    a = data.draw(hnp.arrays(dtype, shape, elements=st.integers(0, 10)))
    b = data.draw(hnp.arrays(dtype, (n,), elements=st.integers(0, 10)))
    got = md.isin(_t(a), _t(b), invert=invert)
    expected = torch.isin(torch.tensor(a), torch.tensor(b), invert=invert)
    _against_torch(got, expected)
    _same(got, _generic("aten::isin")(_t(a), _t(b), invert=invert))


def test_isin_calls_the_kernel_does_not_take():
    a = np.array([[1, 2], [3, 4]], np.int8)
    _check("aten::isin", _t(a), _t(np.array([2, 300], np.int16)))  # mixed dtypes: promoted
    _check("aten::isin", _t(a > 2), _t(np.array([True])))  # bools
    _check("aten::isin", _t(a), _t(np.array([1], np.int8)), invert=1)
    got = md.isin(_t(a), 3)  # a scalar: isin.Scalar
    np.testing.assert_array_equal(got.numpy(), np.isin(a, 3))
    got = md.isin(_t(a).astype(md.bfloat16), _t(np.array([2.0], np.float32)))
    np.testing.assert_array_equal(got.numpy(), np.isin(a, 2))


# -- scans ---------------------------------------------------------------------------------


_SCANS = ["cumulative_sum", "cumulative_prod", "logcumsumexp"]
_TORCH_SCANS = {"cumulative_sum": "cumsum", "cumulative_prod": "cumprod",
                "logcumsumexp": "logcumsumexp"}


@pytest.mark.parametrize("name", _SCANS)
def test_scan_fast_path_matches_the_generic_kernel(name):
    key = f"aten::{name}"
    rng = np.random.default_rng(2)
    for dtype in [*FLOAT_DTYPES, "int64", "int32", "uint8", "complex64", "bool"]:
        for shape in [(4, 5), (7,), (), (0, 3), (2, 3, 4)]:
            a = (rng.standard_normal(shape) * 3).astype(dtype)
            if a.dtype.kind == "f" and a.size >= len(SPECIALS):
                a.reshape(-1)[:len(SPECIALS)] = SPECIALS
            x = _t(a)
            for axis in [None, *range(-len(shape) - 1, len(shape) + 1), 1.0, True]:
                if name == "logcumsumexp" and axis is None:
                    continue
                _check(key, x, axis, exact=False)
            if name != "logcumsumexp":
                _check(key, x, exact=False)  # no axis
                _check(key, x, axis=0, exact=False)
                _check(key, x, 0, dtype=md.float64, exact=False)
                _check(key, x, 0, include_initial=True, exact=False)
            else:
                _check(key, x, dim=0, exact=False)


@pytest.mark.parametrize("name", _SCANS)
def test_scans_match_torch_with_gradients(name):
    fn, tfn = getattr(md, name), getattr(torch, _TORCH_SCANS[name])
    rng = np.random.default_rng(3)
    for dtype in ("float32", "float64"):
        a = rng.uniform(0.5, 1.5, (3, 4)).astype(dtype)
        for dim in (0, 1, -1):
            _against_torch(fn(_t(a), dim), tfn(torch.tensor(a), dim), 1e-5)
            _grads(lambda x, dim=dim: fn(x, dim), lambda x, dim=dim: tfn(x, dim), a, 1e-5)
    a = np.arange(6).reshape(2, 3)
    if name != "logcumsumexp":  # int64 accumulates in int64
        _against_torch(fn(_t(a), 1), tfn(torch.tensor(a), 1))


def test_scans_through_methods_and_keywords():
    a = np.arange(1.0, 7.0, dtype=np.float32).reshape(2, 3)
    x = _t(a)
    for got in (md.cumulative_sum(x, axis=1), x.cumsum(dim=1), x.cumsum(1),
                md.cumulative_sum(x, dim=1)):
        np.testing.assert_array_equal(got.numpy(), np.cumsum(a, axis=1))
    np.testing.assert_array_equal(md.cumulative_sum(_t(a[0])).numpy(), np.cumsum(a[0]))
    with pytest.raises(ValueError):
        md.cumulative_sum(x)  # an n-d tensor needs its axis
    with pytest.raises((ValueError, IndexError)):
        md.cumulative_sum(x, 2)


# -- nansum, nanmean -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_nan_reductions_are_leaf_kernels_matching_the_decomposition(name):
    key = f"aten::{name}"
    assert _cpu(key) in LEAF_KERNELS
    for a in _float_cases():
        x = _t(a)
        n = a.ndim
        for dim in [None, 0, -1, n, (0,), ()]:
            for keep in (False, True):
                _check(key, x, dim=dim, keepdim=keep, exact=False)
        _check(key, x, dtype=md.float64, exact=False)  # an option: the decomposition's


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_nan_reductions_match_torch_with_gradients(name):
    fn, tfn = getattr(md, name), getattr(torch, name)
    # (no slice of NaNs only: nanmean's gradient there is 0, PyTorch's NaN)
    a = np.array([[1.0, np.nan, 3.0], [np.nan, 2.0, np.nan], [0.5, -2.0, 4.0]])
    for dtype in ("float32", "float64"):
        b = a.astype(dtype)
        _grads(fn, tfn, b)
        _grads(lambda x: fn(x, 1), lambda x: tfn(x, 1), b)
        _grads(lambda x: fn(x, 0, True), lambda x: tfn(x, 0, True), b)


@pytest.mark.parametrize("name", ["nansum", "nanmean"])
def test_nan_reductions_decomposition_records_nothing_of_its_own(name):
    # a call the CPU kernel leaves to the decomposition runs it with autograd excluded:
    # one node, the op's own formula's
    a = np.array([[1.0, np.nan], [3.0, 4.0]], np.float32)
    x = _t(a, requires_grad=True)
    y = getattr(md, name)(x, dtype=md.float64)
    assert type(y.grad_fn).__name__.lower().startswith(name)
    assert [type(f).__name__ for f, _ in y.grad_fn.next_functions if f is not None] == \
        ["AccumulateGrad"]
    y.backward()
    tx = torch.tensor(a, requires_grad=True)
    getattr(torch, name)(tx, dtype=torch.float64).backward()
    _against_torch(x.grad, tx.grad)
    z = getattr(md, name)(_t(a, requires_grad=True))  # recording still on afterwards
    assert z.requires_grad


# -- angle, nan_to_num -----------------------------------------------------------------------


def test_angle_fast_path_matches_the_generic_kernel():
    for a in _float_cases():
        _check("aten::angle", _t(a))
    for a in (np.array([1 + 1j, -2j, 0j], np.complex64), np.array([-2, 0, 3]),
              np.array([True, False]), np.float32(-2.0), np.array([-1.0], np.float64)):
        _check("aten::angle", _t(a))  # complex, integers, bools, 0-d: the kernel under it


def test_angle_of_reals_is_pi_below_zero_only():
    a = np.array([-3.0, -0.0, 0.0, 2.0, np.inf, -np.inf, np.nan], np.float32)
    got = md.angle(_t(a)).numpy()
    np.testing.assert_array_equal(got, np.array([math.pi, 0, 0, 0, 0, math.pi, np.nan],
                                                np.float32))
    assert not np.signbit(got[1])


def test_angle_matches_torch_with_gradients():
    a = np.array([[-3.0, -0.5, 0.0, 2.0, np.inf, np.nan]])
    for dtype in ("float32", "float64"):
        _grads(md.angle, torch.angle, a.astype(dtype))
    z = np.array([1 + 1j, -2 + 0.5j], np.complex64)
    _grads(lambda x: md.angle(x), torch.angle, z, 1e-5)


_NAN_TO_NUM_OPTIONS = [{}, {"nan": 0.0}, {"nan": 1.5}, {"posinf": 9.0}, {"neginf": -9.0},
                       {"nan": 2.0, "posinf": 1.0, "neginf": -1.0}, {"nan": -0.0}]


def test_nan_to_num_fast_path_matches_the_generic_kernel():
    for a in _float_cases():
        for kwargs in _NAN_TO_NUM_OPTIONS:
            _check("aten::nan_to_num", _t(a), **kwargs)
        _check("aten::nan_to_num", _t(a), 0.0, None, None)
    for a in (np.array([1 + 1j, np.nan * 1j], np.complex64), np.array([-2, 0, 3]),
              np.array([True, False]), np.float32(np.nan)):
        _check("aten::nan_to_num", _t(a))  # the kernel under it


def test_nan_to_num_matches_torch_with_gradients():
    a = np.array([[np.nan, np.inf, -np.inf, -0.0, 1.5]])
    for dtype in ("float16", "float32", "float64"):
        for kwargs in _NAN_TO_NUM_OPTIONS:
            got = md.nan_to_num(_t(a.astype(dtype)), **kwargs)
            _against_torch(got, torch.nan_to_num(torch.tensor(a.astype(dtype)), **kwargs))
    for dtype in ("float32", "float64"):
        _grads(md.nan_to_num, torch.nan_to_num, a.astype(dtype))


def test_nan_to_num_result_is_not_its_input():
    a = np.array([1.0, 2.0], np.float32)
    x = _t(a)
    y = md.nan_to_num(x)
    y.numpy()[0] = 5.0
    np.testing.assert_array_equal(x.numpy(), a)


# -- lgamma ----------------------------------------------------------------------------------


def test_lgamma_matches_the_generic_kernel_and_torch():
    for a in _float_cases():
        b = np.concatenate([a.reshape(-1), [-1.0, -2.5, 6e4, 3.0]]).astype(a.dtype)
        _check("aten::lgamma", _t(b))
        if a.dtype != np.float16:
            _against_torch(md.lgamma(_t(b)), torch.lgamma(torch.tensor(b)), 1e-5)
    a = np.array([0.5, 1.5, 4.0, -1.5])
    for dtype in ("float32", "float64"):
        _grads(md.lgamma, torch.lgamma, a.astype(dtype), 1e-5)
