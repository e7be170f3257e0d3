"""Reductions (``ops/reductions.py``, and the searching/sorting reductions): 0-d and empty
inputs, PyTorch's keyword spellings, extreme magnitudes, on the device under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import to_numpy

import mdtensor as md

inf, nan = math.inf, math.nan


@pytest.mark.parametrize("name", ["max", "min"])
def test_max_and_min_with_dim_and_keepdim_keywords(name):
    # See Note [Aliases per overload] in mdtensor/dispatch/resolution.py: keepdim= was
    # renamed keepdims= for every overload, which max.dim does not have
    x = md.asarray([[1.0, 5.0], [3.0, 2.0]])
    ref = getattr(np, name)(to_numpy(x), axis=0, keepdims=True)
    arg = (np.argmax if name == "max" else np.argmin)(to_numpy(x), axis=0, keepdims=True)
    for got in (getattr(md, name)(x, dim=0, keepdim=True), getattr(x, name)(dim=0, keepdim=True),
                getattr(x, name)(0, keepdim=True)):
        np.testing.assert_array_equal(to_numpy(got.values), ref)
        np.testing.assert_array_equal(to_numpy(got.indices), arg)
    # the Array API overload still takes keepdim= for keepdims=
    np.testing.assert_array_equal(to_numpy(getattr(md, name)(x, axis=1, keepdim=True)),
                                  getattr(np, name)(to_numpy(x), axis=1, keepdims=True))


_ZERO_D = [
    ("sum", lambda x, a, k: md.sum(x, axis=a, keepdims=k), 2.5),
    ("prod", lambda x, a, k: md.prod(x, axis=a, keepdims=k), 2.5),
    ("mean", lambda x, a, k: md.mean(x, axis=a, keepdims=k), 2.5),
    ("var", lambda x, a, k: md.var(x, axis=a, keepdims=k), 0.0),
    ("std", lambda x, a, k: md.std(x, axis=a, keepdims=k), 0.0),
    ("max", lambda x, a, k: md.max(x, axis=a, keepdims=k), 2.5),
    ("amin", lambda x, a, k: md.amin(x, axis=a, keepdims=k), 2.5),
    ("max.dim", lambda x, a, k: md.max(x, dim=a, keepdim=k).values, 2.5),
    ("min.dim", lambda x, a, k: md.min(x, a, k).indices, 0),
    ("argmax", lambda x, a, k: md.argmax(x, axis=a, keepdims=k), 0),
    ("all", lambda x, a, k: md.all(x, axis=a, keepdims=k), True),
    ("count_nonzero", lambda x, a, k: md.count_nonzero(x, axis=a, keepdims=k), 1),
    ("logsumexp", lambda x, a, k: md.logsumexp(x, axis=a, keepdims=k), 2.5),
    ("vector_norm", lambda x, a, k: md.linalg.vector_norm(x, axis=a, keepdims=k), 2.5),
    ("cumulative_sum", lambda x, a, k: md.cumulative_sum(x, axis=a), 2.5),
    ("cumulative_prod", lambda x, a, k: md.cumulative_prod(x, axis=a), 2.5),
    ("sort", lambda x, a, k: md.sort(x, axis=a), 2.5),
    ("argsort", lambda x, a, k: md.argsort(x, axis=a), 0),
    ("flip", lambda x, a, k: md.flip(x, axis=a if isinstance(a, tuple) else (a,)), 2.5),
    ("softmax", lambda x, a, k: md.softmax(x, a), 1.0),
    ("squeeze", lambda x, a, k: md.squeeze(x, a), 2.5),
]


@pytest.mark.parametrize("name, fn, want", _ZERO_D, ids=[c[0] for c in _ZERO_D])
@pytest.mark.parametrize("axis", [0, -1, (0,)], ids=["0", "-1", "(0,)"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_a_0d_tensors_axis_0_is_its_element(name, fn, want, axis, keepdims):
    # Note [Axes of 0-d tensors] in ops/_meta_fns.py: NumPy raised AxisError, JAX
    # ValueError, max/min IndexError, argsort gave shape (1,)
    if isinstance(axis, tuple) and name in ("max.dim", "min.dim", "argmax", "cumulative_sum",
                                            "cumulative_prod", "sort", "argsort", "softmax"):
        return  # these take one int axis
    x = md.asarray(2.5)
    got = fn(x, axis, keepdims)
    meta = fn(x.to("meta"), axis, keepdims)
    assert got.shape == () and meta.shape == ()
    assert got.dtype == meta.dtype
    assert got.item() == want
    with pytest.raises(IndexError, match="out of range for a tensor of dimension 0"):
        fn(x, 1, keepdims)


def test_0d_values_count():
    # softmax of a 0-d tensor is exp(x - x) / exp(x - x): nan for nan and inf, as PyTorch
    assert math.isnan(md.softmax(md.asarray(nan)).item())
    assert math.isnan(md.log_softmax(md.asarray(inf)).item())
    assert md.log_softmax(md.asarray(3.0)).item() == 0.0


@pytest.mark.parametrize("name", ["roll", "unbind", "narrow", "split", "chunk",
                                  "repeat_interleave", "take"])
def test_ops_needing_a_dimension_refuse_a_0d_tensors_axis(name):
    calls = {"roll": lambda x: md.roll(x, 1, axis=0),
             "unbind": lambda x: md.unbind(x, 0), "narrow": lambda x: md.narrow(x, 0, 0, 1),
             "split": lambda x: md.split(x, 1, 0), "chunk": lambda x: md.chunk(x, 1, 0),
             "repeat_interleave": lambda x: md.repeat_interleave(x, 2, axis=0),
             "take": lambda x: md.take(x, md.asarray([0], device=x.device), axis=0)}
    for x in (md.asarray(2.5), md.asarray(2.5, device="meta")):
        with pytest.raises(IndexError, match=f"^{name}: a 0-d tensor has no dimension 0"):
            calls[name](x)


def test_softmax_and_logsumexp_over_an_empty_axis():
    x = md.zeros((2, 0))
    for f in (md.softmax, md.log_softmax):
        for t in (x, x.to("meta")):
            assert f(t, dim=1).shape == (2, 0)
    np.testing.assert_array_equal(to_numpy(md.logsumexp(x, axis=1)), [-inf, -inf])
    assert md.logsumexp(md.zeros((0, 3)), axis=0, keepdims=True).shape == (1, 3)
    assert md.logsumexp(md.zeros((2, 0)), axis=0).shape == (0,)


def test_reductions_without_identity_check_only_the_reduced_axes():
    assert md.argmax(md.zeros((3, 0, 3)), axis=2).shape == (3, 0)
    assert md.max(md.zeros((0, 2)), axis=()).shape == (0, 2)
    assert md.amin(md.zeros((0, 2)), axis=1).shape == (0,)
    assert md.max(md.zeros((3, 0)), dim=0).indices.shape == (0,)
    for fn in (lambda x: md.max(x, axis=0), lambda x: md.argmin(x), lambda x: md.max(x),
               lambda x: md.max(x, dim=0)):
        with pytest.raises(ValueError, match="to have non-zero size|to be specified"):
            fn(md.zeros((0, 2)))


def test_std_of_float32_does_not_overflow_in_the_squares():
    # Note [Variance in double precision]: the squares overflowed float32
    got = md.std(md.asarray([3e37, -3e37], dtype=md.float32))
    assert got.dtype == md.float32
    np.testing.assert_allclose(to_numpy(got), 3e37, rtol=1e-6)
    assert md.var(md.asarray([3e37, -3e37], dtype=md.float32)).item() == inf  # 9e74
    np.testing.assert_allclose(to_numpy(md.std(md.asarray([1e-30, -1e-30]))), 1e-30, rtol=1e-6)
    assert md.std(md.asarray([1 + 1j, -1 - 1j], dtype=md.complex64)).dtype == md.float32
