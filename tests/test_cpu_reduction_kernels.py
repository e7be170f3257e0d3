"""The CPU kernels of reductions, scans, order statistics and sets (Note [CPU reduction
kernels] in ops/_cpu_reductions.py) compute what the generic kernels compute: the same
values, dtypes, shapes and errors, over dtypes, axes, ties, NaNs, empty and 0-d tensors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from mdtensor.ops._decl import CATALOGUE

import mdtensor as md
from mdtensor.dispatch.keys import DispatchKey

DTYPES = ["float32", "float64", "float16", "int64", "int32", "uint8", "bool", "complex64"]
SHAPES = [(6, 7), (3, 4, 5), (8,), (0, 3), (), (1,)]


def _kernels(key, overload=0):
    op = CATALOGUE[key].functional[overload]
    cpu = op.kernels_for(DispatchKey.CPU)[-1].fn
    assert cpu.__name__.startswith("cpu["), cpu.__name__  # the kernel under test is there
    generic = op.kernels_for(DispatchKey.ArrayAPI) or op.kernels_for(
        DispatchKey.CompositeImplicitAutograd)
    return cpu, generic[-1].fn


def _outcome(fn, args, kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return fn(*args, **kwargs)
        except Exception as e:  # compared below: the same class and message
            return e


def _same(a, b):
    if isinstance(b, Exception):
        assert type(a) is type(b) and str(a) == str(b), (a, b)
        return
    assert not isinstance(a, Exception), (a, b)
    if isinstance(b, tuple):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    x, y = np.asarray(a.numpy()), np.asarray(b.numpy())
    assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, y.dtype, x.shape, y.shape)
    if x.dtype.kind in "fc":  # sums in another order (the norms: unscaled) round apart
        tol = 8 * np.finfo(x.dtype).eps
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(x, y)


def _check(key, overload, x, *args, **kwargs):
    cpu, generic = _kernels(key, overload)
    _same(_outcome(cpu, (x, *args), kwargs), _outcome(generic, (x, *args), kwargs))


def _inputs(dtype, shape, rng):
    a = rng.integers(-2, 4, shape)  # small integers: ties everywhere
    if dtype == "bool":
        return md.asarray(a > 0, device="cpu")
    a = a.astype(dtype)
    if a.dtype.kind in "fc" and a.size:
        a[rng.random(shape) < 0.15] = np.nan
        a.reshape(-1)[0] = -0.0
    return md.asarray(a, device="cpu")  # the CPU kernels, whatever the default device


def _cases():
    rng = np.random.default_rng(0)
    for dtype in DTYPES:
        for shape in SHAPES:
            yield dtype, shape, _inputs(dtype, shape, rng)


_REDUCTIONS = ["max", "min", "amax", "amin", "mean", "var", "std", "prod", "argmax", "argmin",
               "any", "all", "linalg_vector_norm", "nansum", "nanmean", "logsumexp"]


@pytest.mark.parametrize("name", _REDUCTIONS)
def test_reductions(name):
    kw = ("dim", "keepdim") if name in ("nansum", "nanmean") else ("axis", "keepdims")
    for _, shape, x in _cases():
        n = len(shape)
        axes = [None, 0, -1, n, -n - 1, (0,), (), [0, -1], (0, 0)]
        if name in ("argmax", "argmin"):
            axes = [None, 0, -1, n]
        for axis in axes:
            for keep in (False, True):
                _check(f"aten::{name}", 0, x, **{kw[0]: axis, kw[1]: keep})
        if name in ("var", "std"):
            _check(f"aten::{name}", 0, x, axis=0, correction=1)
            _check(f"aten::{name}", 0, x, correction=2.5, keepdims=True)


@pytest.mark.parametrize("key", ["aten::max", "aten::min", "aten::median"])
def test_values_and_indices_along_a_dim(key):
    for _, shape, x in _cases():
        for dim in range(-len(shape) - 1, len(shape) + 1):
            for keep in (False, True):
                _check(key, 1, x, dim, keep)


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod", "cummax", "cummin",
                                  "logcumsumexp"])
def test_scans(name):
    for _, shape, x in _cases():
        for dim in [None, *range(-len(shape) - 1, len(shape) + 1)]:
            if dim is None and name not in ("cumulative_sum", "cumulative_prod"):
                continue
            _check(f"aten::{name}", 0, x, dim)


@pytest.mark.parametrize("name", ["cummax", "cummin"])
def test_running_extremes_on_each_path(name):
    # Note [Running extremes on NumPy]: a dim of at most 256 takes uint8 positions, a longer
    # one int64 positions, a large tensor broadcast ones; ties of zeros and infinities
    rng = np.random.default_rng(1)
    pool = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 2.0])
    arrays = [rng.choice(pool, (5, 9)), rng.choice(pool[:4], (5, 9)).astype("float16"),
              rng.integers(-2, 3, (3, 300)).astype("int8"), rng.integers(0, 3, (70, 80)),
              rng.choice(pool, (4, 6)).T, rng.standard_normal((300, 2)).astype("float32")]
    arrays[-1][150, 1] = np.nan
    for a in arrays:
        for dim in range(-a.ndim, a.ndim):
            _check(f"aten::{name}", 0, md.asarray(a, device="cpu"), dim)


def test_order_statistics():
    for _, shape, x in _cases():
        for dim in range(-len(shape) - 1, len(shape) + 1):
            for k in (0, 1, 3, 9):
                for largest in (True, False):
                    _check("aten::topk", 0, x, k, dim, largest)
                for keep in (False, True):
                    _check("aten::kthvalue", 0, x, k, dim, keep)
        _check("aten::median", 0, x)


def test_sets_differences_and_searches():
    for _, shape, x in _cases():
        for name in ("unique_values", "unique_counts", "unique_inverse", "unique_all"):
            _check(f"aten::{name}", 0, x)
        for axis in range(-len(shape) - 1, len(shape) + 1):
            _check("aten::diff", 0, x, axis)
            _check("aten::diff", 0, x, axis, 2)
        for offset in (0, 1, -1):
            _check("aten::linalg_trace", 0, x, offset=offset)
        for ord in ("fro", 1):
            for keep in (False, True):
                _check("aten::linalg_matrix_norm", 0, x, keepdims=keep, ord=ord)
        flat = md.asarray(np.sort(x.numpy().reshape(-1)), device="cpu")
        for side in ("left", "right", "middle"):
            _check("aten::searchsorted", 0, flat, x, side=side)


def test_norms_out_of_the_plain_range():
    # The norms' CPU kernels (ops/linalg.py): magnitudes whose squares over- or underflow
    # take the scaled path, whose values the generic kernel gives
    for values in ([2e245, 3e245], [1e-200, 1e-201], [0.0, 0.0], [np.inf, 1.0], [1e150, 1.0],
                   [3e38, 3e38], [1e-30, 1e-30]):
        for dtype in ("float32", "float64"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                x = md.asarray(np.asarray(values, dtype=dtype), device="cpu")
            _check("aten::linalg_vector_norm", 0, x)
            _check("aten::linalg_matrix_norm", 0, md.reshape(x, (1, 2)))


def test_median_of_a_large_tensor():
    # the whole-tensor median partitions a large copy where it sorts a small one (Note
    # [Order statistics on NumPy]): NaNs and ties as the generic kernel has them
    rng = np.random.default_rng(1)
    for dtype in ("float32", "float64", "int64", "uint8"):
        a = rng.integers(-50, 50, 3001).astype(dtype)
        _check("aten::median", 0, md.asarray(a, device="cpu"))
        _check("aten::median", 0, md.asarray(a[:2000].reshape(40, 50), device="cpu"))
        if a.dtype.kind == "f":
            a[1234] = np.nan
            _check("aten::median", 0, md.asarray(a, device="cpu"))


def test_quantile():
    # Note [The CPU kernel of quantile]: the kernel against the decomposition it stands for,
    # a float q and Tensor ones (0-d, 1-d, out of range, another dtype), every interpolation
    qs = [0.0, 0.3, 0.5, 1.0, 5e-324, 1.5, np.nan]
    for dtype, shape, x in _cases():
        tensors = [md.asarray(np.asarray(q, dtype=dtype), device="cpu")
                   for q in (0.75, [0.0, 0.4, 1.0], [[0.5]], [0.2, 2.0])
                   if dtype not in ("bool", "uint8")]
        tensors.append(md.asarray(np.asarray([0.5], dtype="float64"), device="cpu"))
        for dim in [None, *range(-len(shape) - 1, len(shape) + 1)]:
            for keep in (False, True):
                for mode in ("linear", "lower", "higher", "midpoint", "nearest", "cubic"):
                    for q in qs:
                        _check("aten::quantile", 1, x, q, dim, keep, interpolation=mode)
                    for q in tensors:
                        _check("aten::quantile", 0, x, q, dim, keep, interpolation=mode)
    infinite = md.asarray(np.array([[0.0, 0.0, 0.0, -np.inf], [np.inf, 1.0, np.inf, 2.0]],
                                   dtype="float32"), device="cpu")
    for q in (0.0, 0.25, 0.5, 0.75, 1.0):
        _check("aten::quantile", 1, infinite, q, 1)
