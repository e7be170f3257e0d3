"""The NumPy kernels of ``ops/float_values.py`` against NumPy's own functions and the
generic impl (the loopback backend runs it on array_api_strict)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import to_numpy

import mdtensor as md

_VALUES = [math.nan, -math.nan, math.inf, -math.inf, 0.0, -0.0, 1.5, -2.0, 1e30, -1e30]


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}, {"nan": None}, {"nan": -0.0}, {"nan": 0},
                                    {"posinf": 9.0, "neginf": -9.0}, {"posinf": math.nan},
                                    {"nan": 2.0, "neginf": -1e300}])
def test_nan_to_num_matches_numpy_and_the_generic_impl(dtype, kwargs):
    with np.errstate(over="ignore"):
        x = np.array(_VALUES, dtype).reshape(2, 5)
    expected = np.nan_to_num(x, nan=math.nan if kwargs.get("nan", 0) is None else
                             kwargs.get("nan", 0.0), posinf=kwargs.get("posinf"),
                             neginf=kwargs.get("neginf"))
    for device in ("cpu",) if dtype == "float16" else ("cpu", "loopback"):  # (no float16)
        with np.errstate(over="ignore"):
            got = to_numpy(md.nan_to_num(md.asarray(x, device=device), **kwargs))
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, expected)
        assert (np.signbit(got) == np.signbit(expected))[~np.isnan(expected)].all()


def test_nan_to_num_of_finite_values_is_a_copy():
    x = md.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = md.nan_to_num(x)
    y[0, 0] = 7.0
    assert float(x[0, 0]) == 0.0


@pytest.mark.parametrize("kwargs", [{}, {"nan": 1.5}])
def test_nan_to_num_bounds_are_not_shared_with_results(kwargs):
    # the NumPy kernel keeps each dtype's finite range as 0-d arrays across calls: writing
    # into one result leaves the next call's bounds as they were
    x = md.asarray(np.array([math.inf, -math.inf, math.nan], np.float32))
    y = md.nan_to_num(x, **kwargs)
    y.fill_(3.0)
    z = to_numpy(md.nan_to_num(x, **kwargs))
    info = np.finfo(np.float32)
    np.testing.assert_array_equal(z, [info.max, info.min, kwargs.get("nan", 0.0)])
