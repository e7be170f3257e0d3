"""Elementwise ops (``ops/elementwise.py``): values the OpInfo sweep's random samples do not
reach -- special values, extreme magnitudes, mixed dtypes -- on the device under test."""

from __future__ import annotations

import math

import numpy as np
from _helpers import to_numpy

import mdtensor as md

inf, nan = math.inf, math.nan


def _values(t):
    return to_numpy(t).tolist()


def test_fmod_is_exact_with_the_dividends_sign():
    # fmod computed as remainder(a, b) - b rounded 1e-20 away and gave nan for
    # an infinite divisor
    a = md.asarray([1e-20, 3.0, -3.0, -4.0, 4.0, -0.0, inf, 5.5], dtype=md.float64)
    b = md.asarray([-1.0, -1e17, 1e17, inf, -inf, 2.0, 2.0, 0.0], dtype=md.float64)
    got = to_numpy(md.fmod(a, b))
    np.testing.assert_array_equal(got, [1e-20, 3.0, -3.0, -4.0, 4.0, -0.0, nan, nan])
    assert np.signbit(got[5])
    assert _values(md.fmod(md.asarray([-7, 7, -7, 0]), md.asarray([2, -2, -2, 3]))) == \
        [-1, 1, -1, 0]
    assert _values(md.fmod(md.asarray([-7.5, 7.5]), 2)) == [-1.5, 1.5]
    assert _values(md.fmod(md.asarray([-1e-30], dtype=md.float32), -1.0)) == \
        [np.float32(-1e-30)]
