"""Torch-style nn ops (``ops/nn.py``: gelu, softmax, ...; ``md.nn`` is tests/test_nn.py):
values at special inputs and in float64, on the device under test."""

from __future__ import annotations

import math

import numpy as np
from _helpers import to_numpy

import mdtensor as md

inf, nan = math.inf, math.nan


def test_exact_gelu_and_its_gradient_in_float64():
    # Note [erf] in ops/_special.py: an Abramowitz-Stegun erf was off by ~1e-8 here
    xs = [-6.0, -3.0, -1.0, -0.25, 0.0, 1e-3, 0.7, 2.5, 5.0]
    x = md.asarray(xs, dtype=md.float64, requires_grad=True)
    y = md.gelu(x)
    y.sum().backward()
    cdf = [0.5 * (1 + math.erf(v / math.sqrt(2))) for v in xs]
    pdf = [math.exp(-v * v / 2) / math.sqrt(2 * math.pi) for v in xs]
    np.testing.assert_allclose(to_numpy(y.detach()), [v * c for v, c in zip(xs, cdf)],
                               rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(to_numpy(x.grad), [c + v * p for v, c, p in zip(xs, cdf, pdf)],
                               rtol=1e-14)
    assert md.gelu(md.asarray(-1.0, dtype=md.float64)).item() == -0.15865525393145707



def test_several_results_of_the_direct_kernels():
    # The CPU kernels of ops/_cpu_kernels.py's register_arrays_direct wrap two or three
    # results themselves, None among them, in the op's result type.
    rng = np.random.default_rng(0)
    xn = rng.random((4, 3, 2), dtype=np.float32)
    x, g = md.asarray(xn), md.asarray(rng.random((4, 3, 2), dtype=np.float32))
    w = md.asarray(rng.random(3, dtype=np.float32))
    out, mean, invstd = md.ops.aten._native_batch_norm_legit.no_stats(x, w, None, True, 0.1,
                                                                      1e-5)
    np.testing.assert_allclose(to_numpy(mean), xn.mean(axis=(0, 2)), rtol=1e-6)
    full = md.ops.aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True,
                                                  1e-5, [True, True, True])
    some = md.ops.aten.native_batch_norm_backward(g, x, w, None, None, mean, invstd, True,
                                                  1e-5, [False, True, False])
    assert type(full) is tuple and all(isinstance(t, md.Tensor) for t in full)
    assert some[0] is None and some[2] is None
    np.testing.assert_array_equal(to_numpy(some[1]), to_numpy(full[1]))
    target = np.array([0, 2, 1, 1])
    loss = md.ops.aten.nll_loss_forward(x[:, :, 0], md.asarray(target), None, 1, -100)
    assert loss._fields == ("output", "total_weight") and loss.total_weight.item() == 4.0
    np.testing.assert_allclose(loss.output.item(), -xn[np.arange(4), target, 0].mean(),
                               rtol=1e-6)
