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
