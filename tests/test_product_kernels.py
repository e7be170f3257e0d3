"""The CPU kernels of the products and norms (Notes [mm, bmm and dot on NumPy], [linalg.cross
on NumPy] and [linalg.norm on NumPy] in ops/linalg.py and ops/norms.py) compute what the
generic kernels and the Meta functions say: the same values, dtypes (mixed dtypes by the
project's promotion, docs/ARCHITECTURE.md), shapes and errors; PyTorch agrees on values and
gradients."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from mdtensor.ops._decl import CATALOGUE

import mdtensor as md
from mdtensor import _dtypes as dt
from mdtensor.dispatch.keys import DispatchKey

#: dtype pairs: one dtype, and mixed ones (int32 with float32 is float64: NumPy's rule for
#: tensors of different kinds)
PAIRS = [("float32", "float32"), ("float64", "float64"), ("int64", "int64"),
         ("complex64", "complex64"), ("float16", "float16"), ("int32", "float32"),
         ("int64", "float32"), ("int8", "uint8"), ("float32", "float64"),
         ("float32", "complex64"), ("uint8", "float16"), ("bool", "bool"),
         ("bool", "float32")]

#: (op, shapes of its operands): products the fast kernels take, and ones they leave
PRODUCTS = [("mm", (2, 3), (3, 4)), ("mm", (1, 1), (1, 1)), ("mm", (2, 0), (0, 3)),
            ("mm", (2, 3), (2, 3)), ("mm", (3,), (3, 4)), ("mm", (2, 2, 3), (2, 3, 4)),
            ("bmm", (2, 2, 3), (2, 3, 4)), ("bmm", (2, 2, 3), (1, 3, 4)),
            ("bmm", (2, 2, 3), (2, 2, 4)), ("bmm", (2, 3), (3, 4)), ("bmm", (0, 2, 3),
                                                                      (0, 3, 1)),
            ("dot", (3,), (3,)), ("dot", (0,), (0,)), ("dot", (3,), (4,)),
            ("dot", (2, 3), (3,)), ("dot", (), ())]


def _kernels(key):
    op = CATALOGUE[key].functional[0]
    cpu = op.kernels_for(DispatchKey.CPU)[-1].fn
    assert cpu.__name__.startswith("cpu["), cpu.__name__  # the kernel under test is there
    return cpu, op.kernels_for(DispatchKey.ArrayAPI)[-1].fn


def _outcome(fn, *args, **kwargs):
    """``fn``'s result, or its error's class and message."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            return type(e), str(e)


def _same(a, b):
    if type(a) is tuple or type(b) is tuple:  # the same error
        assert a == b
        return
    x, y = a.numpy(), b.numpy()
    assert (x.dtype, x.shape) == (y.dtype, y.shape)
    # (the generic sum of products rounds in another order)
    tol = 8 * np.finfo(x.dtype).eps if x.dtype.kind in "fc" else 0
    np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


def _array(shape, dtype, rng):
    a = rng.integers(-3, 4, shape)
    return md.asarray(a > 0 if dtype == "bool" else a.astype(dtype), device="cpu")


def _meta(t):
    return md.empty(tuple(t.shape), dtype=t.dtype, device="meta")


@pytest.mark.parametrize(("p", "q"), PAIRS)
@pytest.mark.parametrize(("name", "sa", "sb"), PRODUCTS)
def test_products_agree_with_the_generic_kernel_and_meta(name, sa, sb, p, q):
    rng = np.random.default_rng(0)
    a, b = _array(sa, p, rng), _array(sb, q, rng)
    cpu, generic = _kernels(f"aten::{name}")
    fast = _outcome(cpu, a, b)
    _same(fast, _outcome(generic, a, b))
    _same(_outcome(getattr(md, name), a, b), fast)  # through the dispatcher
    meta = _outcome(getattr(md, name), _meta(a), _meta(b))
    if type(fast) is tuple:
        assert type(meta) is tuple
    else:  # the Meta function's dtype: the project's promotion
        assert (fast.dtype, tuple(fast.shape)) == (meta.dtype, tuple(meta.shape))
        assert fast.dtype == dt.result_type(a.dtype, b.dtype)


def test_mixed_products_promote_to_float64():
    # int32 @ float32 is float64 on every path (NumPy's rule for tensors of different
    # kinds; PyTorch says float32): the fast kernels, the generic ones, Meta, matmul
    for name, sa, sb in [("mm", (2, 3), (3, 4)), ("bmm", (2, 2, 3), (2, 3, 4)),
                         ("dot", (3,), (3,))]:
        a = md.ones(sa, dtype=md.int32)
        b = md.ones(sb, dtype=md.float32)
        cpu, generic = _kernels(f"aten::{name}")
        assert getattr(md, name)(a, b).dtype == md.float64
        assert cpu(a, b).dtype == generic(a, b).dtype == md.float64
        assert getattr(md, name)(_meta(a), _meta(b)).dtype == md.float64
        assert md.matmul(a, b).dtype == md.float64


def test_dot_is_a_0d_tensor_of_the_operands_dtype():
    for dtype in (md.float32, md.float64, md.int64, md.complex64, md.float16):
        a = md.asarray([1, 2, 3], dtype=dtype)
        r = md.dot(a, a)
        assert r.shape == () and r.dtype == dtype and r.item() == 14
        assert type(r.numpy()) is np.ndarray
    x = md.asarray([1 + 2j, 3j], dtype=md.complex64)
    assert md.dot(x, x).item() == (1 + 2j) ** 2 + (3j) ** 2  # no conjugation (PyTorch)


def test_products_not_taken_still_work():
    x = md.ones((2, 3), dtype=md.bfloat16)
    y = md.ones((3, 4), dtype=md.bfloat16)
    r = md.mm(x, y)  # Note [Products of bfloat16]: the generic kernel's rounding
    assert r.dtype == md.bfloat16 and r.numpy().astype(np.float32).tolist() == [[3.0] * 4] * 2
    assert md.dot(md.ones(3, dtype=md.bfloat16), md.ones(3, dtype=md.bfloat16)).item() == 3
    with pytest.raises(TypeError):  # bool products are refused (Note [Accepted dtypes])
        md.mm(md.ones((2, 2), dtype=md.bool), md.ones((2, 2), dtype=md.bool))


def test_large_products_take_matmul():
    # Note [Large products through np.matmul]: the same values either way
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(70, 5)), rng.normal(size=(5, 70))
    np.testing.assert_allclose(md.mm(md.asarray(a), md.asarray(b)).numpy(), a @ b,
                               rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 5), k=st.integers(0, 5), m=st.integers(0, 5),
       batch=st.integers(0, 3), dtype=st.sampled_from(["float32", "float64"]))
def test_products_match_torch(n, k, m, batch, dtype):
    rng = np.random.default_rng(n * 100 + k * 10 + m)

    def normal(*shape):
        return rng.normal(size=shape).astype(dtype)

    tol = 1e-5 if dtype == "float32" else 1e-12
    pairs = [("bmm", normal(batch, n, k), normal(batch, k, m)),
             ("mm", normal(n, k), normal(k, m)), ("dot", normal(k), normal(k))]
    for name, x, y in pairs:
        got = getattr(md, name)(md.asarray(x), md.asarray(y))
        want = getattr(torch, name)(torch.from_numpy(x), torch.from_numpy(y)).numpy()
        assert got.dtype == getattr(md, dtype) and got.shape == want.shape
        np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["mm", "bmm", "dot"])
def test_product_gradients_match_torch(name):
    shapes = {"mm": ((2, 3), (3, 4)), "bmm": ((2, 2, 3), (2, 3, 4)), "dot": ((3,), (3,))}
    rng = np.random.default_rng(2)
    a, b = (rng.normal(size=s) for s in shapes[name])
    x, y = md.asarray(a, requires_grad=True), md.asarray(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    getattr(md, name)(x, y).sum().backward()
    getattr(torch, name)(tx, ty).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


# -- linalg.cross -----------------------------------------------------------------------------

CROSSES = [((4, 3), (4, 3), {}), ((3,), (3,), {}), ((2, 3, 4), (2, 3, 4), {"axis": 1}),
           ((3, 2), (3, 2), {"axis": 0}), ((3, 2), (3, 2), {"axis": -2}),
           ((1, 3), (4, 3), {}), ((4, 3), (3,), {}), ((4, 2), (4, 2), {}),
           ((4, 3), (4, 3), {"axis": 0}), ((4, 3), (4, 3), {"axis": 2}),
           ((0, 3), (0, 3), {})]


@pytest.mark.parametrize(("p", "q"), PAIRS)
@pytest.mark.parametrize(("sa", "sb", "kw"), CROSSES)
def test_cross_agrees_with_the_generic_kernel_and_meta(sa, sb, kw, p, q):
    rng = np.random.default_rng(3)
    a, b = _array(sa, p, rng), _array(sb, q, rng)
    cpu, generic = _kernels("aten::linalg_cross")
    fast = _outcome(cpu, a, b, **kw)
    _same(fast, _outcome(generic, a, b, **kw))
    _same(_outcome(md.linalg.cross, a, b, **kw), fast)
    meta = _outcome(md.linalg.cross, _meta(a), _meta(b), **kw)
    if type(fast) is tuple:  # the same error on the Meta device (bool operands too)
        assert meta == fast
    else:
        assert (fast.dtype, tuple(fast.shape)) == (meta.dtype, tuple(meta.shape))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_cross_matches_torch(dtype):
    rng = np.random.default_rng(4)
    a = rng.integers(-5, 6, (2, 4, 3)).astype(dtype)
    b = rng.integers(-5, 6, (2, 4, 3)).astype(dtype)
    for axis in (-1, 2):
        got = md.linalg.cross(md.asarray(a), md.asarray(b), axis=axis)
        want = torch.linalg.cross(torch.from_numpy(a), torch.from_numpy(b), dim=axis).numpy()
        assert got.dtype == getattr(md, dtype)
        np.testing.assert_array_equal(got.numpy(), want)
    x, y = md.asarray(a.transpose(0, 2, 1)), md.asarray(b.transpose(0, 2, 1))
    np.testing.assert_array_equal(md.linalg.cross(x, y, axis=1).numpy(),
                                  np.cross(a.transpose(0, 2, 1), b.transpose(0, 2, 1),
                                           axis=1))


def test_cross_gradients_match_torch():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    x, y = md.asarray(a, requires_grad=True), md.asarray(b, requires_grad=True)
    tx, ty = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    w = rng.normal(size=(4, 3))
    (md.linalg.cross(x, y) * md.asarray(w)).sum().backward()
    (torch.linalg.cross(tx, ty) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-12)


# -- norms ----------------------------------------------------------------------------------

NORM_SHAPES = [(2, 3), (5,), (1,), (2, 3, 4), (0, 3)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "float16", "int64"])
@pytest.mark.parametrize("shape", NORM_SHAPES)
@pytest.mark.parametrize("kw", [{}, {"keepdims": True}, {"axis": 1}, {"axis": (0,)},
                                {"axis": -1, "keepdims": True}, {"axis": (0, 1)},
                                {"axis": (1, 1)}, {"axis": 5}, {"ord": 1}])
def test_vector_norm_agrees_with_the_generic_kernel(shape, dtype, kw):
    rng = np.random.default_rng(6)
    x = md.asarray(rng.normal(size=shape).astype(dtype), device="cpu")
    cpu, generic = _kernels("aten::linalg_vector_norm")
    fast = _outcome(cpu, x, **kw)
    _same(fast, _outcome(generic, x, **kw))
    if type(fast) is not tuple:
        assert type(fast.numpy()) is np.ndarray


def test_whole_vector_norm_is_a_0d_array():
    for dtype in (md.float32, md.float64):
        x = md.asarray([[3.0, 4.0]], dtype=dtype)
        r = md.linalg.vector_norm(x)
        assert r.shape == () and r.dtype == dtype and r.item() == 5.0
        assert type(r._data) is np.ndarray
        k = md.linalg.vector_norm(x, keepdims=True)
        assert k.shape == (1, 1) and k.dtype == dtype and k.item() == 5.0


@pytest.mark.parametrize(("args", "kw"), [((), {}), ((None, 1), {}), ((2, 0), {"keepdim": True}),
                                          ((1,), {}), (("fro", (0, 1)), {}),
                                          ((None, None), {"dtype": md.float64})])
def test_norm_gradients_match_torch(args, kw):
    # the leaf kernel's own cases and the decomposition (ord=1, "fro", dtype=): the Autograd
    # kernel records linalg_norm's formula, the decomposition's ops nothing of their own
    rng = np.random.default_rng(7)
    a = rng.normal(size=(3, 4))
    x = md.asarray(a, requires_grad=True)
    tx = torch.tensor(a, requires_grad=True)
    tkw = dict(kw)
    if "dtype" in tkw:
        tkw["dtype"] = torch.float64
    r = md.linalg.norm(x, *args, **kw)
    t = torch.linalg.norm(tx, *args, **tkw)
    assert type(r.grad_fn).__name__ == "LinalgNormBackward0"
    np.testing.assert_allclose(r.detach().numpy(), t.detach().numpy(), rtol=1e-12)
    r.backward(md.ones_like(r))
    t.backward(torch.ones_like(t))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10)
    with md.no_grad():
        assert md.linalg.norm(x, *args, **kw).grad_fn is None


def test_norm_errors_are_unchanged():
    with pytest.raises(ValueError, match="If dim is not specified but ord is"):
        md.linalg.norm(md.ones((2, 2, 2), requires_grad=True), 2)
    with pytest.raises(ValueError, match="order fro not supported for vector norms"):
        md.linalg.norm(md.ones((3,)), "fro", 0)


# -- register_direct's calls ----------------------------------------------------------------

def test_direct_kernels_with_and_without_keywords():
    # ops/_cpu_kernels.py: register_direct's kernels call ``direct(x, y)`` without a star
    # call, and pass the other arguments where there are some
    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    x, y = md.asarray(a), md.asarray(b)
    np.testing.assert_allclose(md.linalg.vecdot(x, y).numpy(), np.sum(a * b, axis=-1))
    np.testing.assert_allclose(md.linalg.vecdot(x, y, axis=0).numpy(), np.sum(a * b, axis=0))
    np.testing.assert_allclose(md.linalg.tensordot(x, y, axes=([0, 1], [0, 1])).numpy(),
                               np.tensordot(a, b, axes=([0, 1], [0, 1])))
    np.testing.assert_allclose(md.linalg.outer(x[0], y[1]).numpy(), np.outer(a[0], b[1]))
    np.testing.assert_allclose(md.linalg.vector_norm(x, ord=2, axis=1).numpy(),
                               np.linalg.norm(a, axis=1))
