"""The CPU kernels of max pooling (Notes [Max pooling as one argmax] and [2x2 max pooling on
NumPy] in ops/pooling.py) and of the scatters (Note [Scatters on NumPy] in ops/scatter.py)
compute what the generic kernels compute -- the same values, dtypes, shapes and errors --
and PyTorch agrees on values and gradients; calls the fast paths do not take (NaN maxima,
padding-only windows, negative or past-the-end indices) still work."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mdtensor.ops._decl import CATALOGUE

import mdtensor as md
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.nn import functional as F


def _kernels(name):
    """The CPU kernel under test and the generic (ArrayAPI) kernel of ``aten::name``."""
    op = CATALOGUE[f"aten::{name}"].functional[0]
    cpu = op.kernels_for(DispatchKey.CPU)[-1].fn
    assert cpu.__name__.startswith("cpu["), cpu.__name__
    return cpu, op.kernels_for(DispatchKey.ArrayAPI)[-1].fn


def _outcome(fn, *args, **kwargs):
    """``fn``'s results as arrays, or its error's class and message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = fn(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the error is the outcome
            return type(e), str(e)
    return tuple(t.numpy() for t in out) if isinstance(out, tuple) else (out.numpy(),)


def _same(a, b, loose=False):
    """The same error, or arrays of the same dtype, shape and values (NaN where NaN; with
    ``loose``, within a few of the dtype's epsilons)."""
    if type(a[0]) is type:
        assert a == b
        return
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.dtype, x.shape) == (y.dtype, y.shape)
        if loose:
            tol = 4 * np.finfo(x.dtype).eps
            np.testing.assert_allclose(x, y, rtol=tol, atol=tol)
        else:
            np.testing.assert_array_equal(x, y)


def _agree(name, *args, **kwargs):
    cpu, generic = _kernels(name)
    _same(_outcome(cpu, *args, **kwargs), _outcome(generic, *args, **kwargs))


def _agree_backward(*args):
    """The pooling backward's kernels: the CPU kernel sums a pixel's gradients from
    overlapping windows in another order than the generic kernel's ``col2im``."""
    cpu, generic = _kernels("max_pool2d_with_indices_backward")
    _same(_outcome(cpu, *args), _outcome(generic, *args), loose=True)


def _t(a):
    return md.asarray(a, device="cpu")


# -- max pooling -------------------------------------------------------------------------------

#: (input shape, kernel_size, stride, padding, dilation, ceil_mode): the sweep's (2x2 of 6x6
#: planes), padded, dilated, ceil_mode, and the 2x2 path's large input
POOLS = [((2, 3, 6, 6), (2, 2), (), (0, 0), (1, 1), False),
         ((1, 2, 7, 6), (3, 3), (2, 2), (1, 1), (1, 1), True),
         ((2, 5, 4), (2, 3), (1, 2), (1, 1), (2, 1), False),
         ((1, 1, 5, 5), (3, 2), (1, 1), (1, 0), (1, 2), True),
         ((2, 4, 16, 16), (2, 2), (), (0, 0), (1, 1), False)]


def _pool_input(shape, dtype, rng, special):
    x = rng.standard_normal(shape) * 4
    if np.dtype(dtype).kind in "iu":
        return x.astype(dtype)
    x = x.astype(dtype)
    flat = x.reshape(-1)
    if special == "nan":
        flat[rng.integers(0, flat.size, 3)] = np.nan
    elif special == "inf":
        flat[rng.integers(0, flat.size, 3)] = -np.inf
        flat[rng.integers(0, flat.size, 2)] = np.inf
    elif special == "lowest":  # windows whose maximum is the padding's value
        flat[:] = -np.inf
    elif special == "ties":
        flat[:] = np.round(flat)
    return x


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int64", "int32"])
@pytest.mark.parametrize("special", [None, "nan", "inf", "lowest", "ties"])
@pytest.mark.parametrize("case", POOLS)
def test_max_pool_agrees_with_the_generic_kernel_and_torch(case, special, dtype, torch):
    shape, *params = case
    if special and np.dtype(dtype).kind != "f":
        pytest.skip("only float inputs hold NaN and infinities")
    x = _pool_input(shape, dtype, np.random.default_rng(0), special)
    _agree("max_pool2d_with_indices", _t(x), *params)
    values, index = md.ops.aten.max_pool2d_with_indices(_t(x), *params)
    k, s, p, d, ceil = params
    if dtype != "float16":  # (PyTorch's CPU max pooling has float16 too, but not everywhere)
        tv, ti = torch.ops.aten.max_pool2d_with_indices(torch.from_numpy(x), list(k), list(s),
                                                        list(p), list(d), ceil)
        np.testing.assert_array_equal(values.numpy(), tv.numpy())
        np.testing.assert_array_equal(index.numpy(), ti.numpy())
    assert values.dtype == md.asarray(x).dtype and index.dtype == md.int64
    # the backward, with the indices the forward found
    g = np.random.default_rng(1).standard_normal(tuple(values.shape)).astype(
        "float64" if np.dtype(dtype).kind != "f" else dtype)
    if np.dtype(dtype).kind == "f":
        _agree_backward(_t(g), _t(x), k, s, p, d, ceil, index)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 9), st.integers(1, 3),
       st.integers(1, 3), st.integers(1, 3), st.integers(0, 1), st.booleans(),
       st.sampled_from(["float32", "float64"]), st.integers(0, 2 ** 16))
def test_max_pool_of_any_geometry_agrees_with_the_generic_kernel(n, h, w, kh, kw, stride, pad,
                                                                 ceil, dtype, seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.standard_normal((n, 2, h, w)) * 2).astype(dtype)  # (ties)
    params = ((kh, kw), (stride, stride), (min(pad, kh // 2), min(pad, kw // 2)), (1, 1), ceil)
    _agree("max_pool2d_with_indices", _t(x), *params)
    out = _outcome(_kernels("max_pool2d_with_indices")[0], _t(x), *params)
    if type(out[0]) is not type:
        g = rng.standard_normal(out[0].shape).astype(dtype)
        _agree_backward(_t(g), _t(x), *params, _t(out[1]))


def test_max_pool_backward_of_indices_outside_the_plane_agrees_with_the_generic_kernel():
    x = np.zeros((1, 2, 4, 4), np.float32)
    g = np.ones((1, 2, 2, 2), np.float32)
    params = ((2, 2), (2, 2), (0, 0), (1, 1), False)
    for index in ([[0, 2], [8, 10]], [[-1, 2], [8, 10]], [[0, 2], [8, 16]],
                  [[0, 2], [8, 2 ** 40]]):
        i = np.broadcast_to(np.asarray(index, np.int64), (1, 2, 2, 2)).copy()
        _agree_backward(_t(g), _t(x), *params, _t(i))
    i32 = np.zeros((1, 2, 2, 2), np.int32)
    _agree_backward(_t(g), _t(x), *params, _t(i32))


def test_max_pool_errors_are_unchanged():
    x = _t(np.ones((1, 1, 4, 4), np.float32))
    for args in [((2, 2), (), (2, 2)), ((5, 5),), ((2, 2), (2.0, 2.0)), ((True, 2),),
                 ((2, 2), (), (0, 0), (0, 1))]:
        _agree("max_pool2d_with_indices", x, *args)
    _agree("max_pool2d_with_indices", _t(np.ones((4, 4), np.float32)), (2, 2))
    _agree("max_pool2d_with_indices", _t(np.ones((1, 1, 4, 4), bool)), (2, 2))


@pytest.mark.parametrize("case", POOLS[:4])
def test_max_pool_gradients_match_torch(case, torch):
    shape, k, s, p, d, ceil = case
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    a = md.asarray(x, requires_grad=True, device="cpu")
    b = torch.tensor(x, requires_grad=True)
    out_a = F.max_pool2d(a, k, s or None, p, d, ceil_mode=ceil)
    out_b = torch.nn.functional.max_pool2d(b, k, s or None, p, d, ceil_mode=ceil)
    probe = np.random.default_rng(3).standard_normal(tuple(out_b.shape)).astype(np.float32)
    (out_a * md.asarray(probe)).sum().backward()
    (out_b * torch.tensor(probe)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-6, atol=1e-6)


# -- scatters ----------------------------------------------------------------------------------

SCATTER_INDICES = [np.asarray([[0, 1, 2, 0], [2, 0, 0, 1]]),
                   np.asarray([[0, 1, 2, 0], [2, 0, 0, 1]], np.int32),
                   np.asarray([[0, 1, -1, 0], [2, 0, 0, 1]]),  # negative: the generic error
                   np.asarray([[0, 1, -4, 0], [2, 0, 0, 1]]),
                   np.asarray([[0, 1, 3, 0], [2, 0, 0, 1]]),  # past the end
                   np.zeros((0, 4), np.int64),
                   np.random.default_rng(4).integers(0, 3, (3, 4))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("index", SCATTER_INDICES, ids=range(len(SCATTER_INDICES)))
def test_scatters_agree_with_the_generic_kernels_and_torch(index, dtype, torch):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((3, 4)) * 4).astype(dtype)
    src = (rng.standard_normal((3, 4)) * 4).astype(dtype)[:index.shape[0]]
    args = (_t(x), 0, _t(index), _t(src))
    cases = [("scatter_add", args, {})] + [
        ("scatter_reduce", args + (reduce,), {"include_self": include_self})
        for reduce in ("sum", "prod", "amax", "amin") for include_self in (True, False)]
    for name, a, kw in cases:
        _agree(name, *a, **kw)
        out = _outcome(_kernels(name)[0], *a, **kw)
        if type(out[0]) is type:
            continue
        ta = (torch.from_numpy(x), 0, torch.from_numpy(index.astype(np.int64)),
              torch.from_numpy(src)) + a[4:]
        want = getattr(torch, name)(*ta, **kw).numpy()
        np.testing.assert_allclose(out[0], want, rtol=1e-6, atol=1e-6)


INDEX_INDICES = [np.asarray([3, 0, 3]), np.asarray([3, 0, 3], np.int32), np.asarray([3, -1, 0]),
                 np.asarray([3, 4, 0]), np.zeros(0, np.int64), np.asarray([2, 1, 0])]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
@pytest.mark.parametrize("index", INDEX_INDICES, ids=range(len(INDEX_INDICES)))
def test_index_add_and_copy_agree_with_the_generic_kernels_and_torch(index, dtype, torch):
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((4, 3)) * 4).astype(dtype)
    source = (rng.standard_normal((index.shape[0], 3)) * 4).astype(dtype)
    for name, kw in (("index_add", {}), ("index_add", {"alpha": 2}), ("index_copy", {})):
        args = (_t(x), 0, _t(index), _t(source))
        _agree(name, *args, **kw)
        out = _outcome(_kernels(name)[0], *args, **kw)
        if type(out[0]) is type:
            continue
        if name == "index_copy" and len(set(index.tolist())) < index.size:
            continue  # (PyTorch leaves repeated positions' order undefined)
        want = getattr(torch, name)(torch.from_numpy(x), 0,
                                    torch.from_numpy(index.astype(np.int64)),
                                    torch.from_numpy(source), **kw).numpy()
        np.testing.assert_allclose(out[0], want, rtol=1e-6, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 5), min_size=1, max_size=40), st.integers(0, 2 ** 16))
def test_scatter_add_of_any_index_agrees_with_the_generic_kernel(entries, seed):
    rng = np.random.default_rng(seed)
    index = np.asarray(entries, np.int64).reshape(-1, 1)
    x = rng.standard_normal((4, 1)).astype(np.float32)
    src = rng.standard_normal(index.shape).astype(np.float32)
    _agree("scatter_add", _t(x), 0, _t(index), _t(src))
    _agree("index_add", _t(x), 0, _t(index.reshape(-1)), _t(src))


def test_scatter_gradients_match_torch(torch):
    rng = np.random.default_rng(7)
    x, src = rng.standard_normal((3, 4)), rng.standard_normal((2, 4))
    index = SCATTER_INDICES[0]
    a, s = md.asarray(x, requires_grad=True), md.asarray(src, requires_grad=True)
    b, t = torch.tensor(x, requires_grad=True), torch.tensor(src, requires_grad=True)
    (md.scatter_add(a, 0, md.asarray(index), s) * md.asarray(x)).sum().backward()
    (torch.scatter_add(b, 0, torch.from_numpy(index), t) * torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy())
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy())
