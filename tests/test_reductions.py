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
    # Note [Aliases per overload] in mdtensor/_frontend.py: keepdim= was renamed keepdims=
    # for every overload, which max.dim does not have
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
