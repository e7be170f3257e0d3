"""Printing (mdtensor/tensors/format.py): PyTorch's number format and print options, and the
default dtype's part in a repr."""

from __future__ import annotations

import numpy as np
import pytest

import mdtensor as md

_RNG = np.random.default_rng(0)
_CASES = [
    np.asarray([0.0, 1.5], np.float32), np.asarray([1e-8, 1.0], np.float32),
    np.arange(2000.0, dtype=np.float32), np.asarray([1, 2]), np.asarray(3.0, np.float32),
    np.zeros(0, np.float32), np.zeros((0, 3), np.float32), np.zeros(0, np.int64),
    np.asarray([[1.5, 2], [3, 4]]), np.asarray([1 + 2j, -3.5j], np.complex64),
    (np.arange(30.0).reshape(3, 10) * 1000.3).astype(np.float32), np.asarray([True, False]),
    np.asarray([np.nan, np.inf, 1.0], np.float32), np.asarray([1e9, 1.0], np.float32),
    _RNG.standard_normal((40, 40)).astype(np.float32),
    _RNG.standard_normal((3, 4, 5)).astype(np.float32), _RNG.integers(-1000, 1000, (10, 30)),
    np.asarray([-0.0, 0.0], np.float32), np.asarray([1e-5, 2e-5], np.float32),
    _RNG.standard_normal((2, 1000)).astype(np.float32),
    np.asarray([100000.5, 1.25], np.float32),
    (_RNG.standard_normal(7) + 1j * _RNG.standard_normal(7)).astype(np.complex64),
    np.asarray(-2.5, np.float32), np.asarray([np.nan, np.nan], np.float32),
    np.asarray([1, -1], np.int8), np.asarray([1.0], np.float16),
    np.asarray([[1e-20, 1.0]], np.float64)]
_OPTIONS = [{}, {"precision": 2}, {"threshold": 5}, {"edgeitems": 1, "threshold": 10},
            {"linewidth": 40}, {"sci_mode": True}, {"sci_mode": False}, {"profile": "short"},
            {"profile": "full"}, {"edgeitems": 0, "threshold": 3}]


@pytest.fixture
def restore():
    yield
    md.set_printoptions(profile="default")
    md.set_default_dtype(md.float32)


@pytest.mark.parametrize("options", _OPTIONS, ids=str)
def test_reprs_read_as_pytorchs(options, restore):
    torch = pytest.importorskip("torch")
    md.set_printoptions(**options)
    torch.set_printoptions(**options)
    try:
        for a in _CASES:
            want = repr(torch.from_numpy(a.copy())).replace("torch.", "md.")
            assert repr(md.asarray(a.copy(), device="cpu")) == want
    finally:
        torch.set_printoptions(profile="default")


def test_printoptions_are_checked_and_kept_on_bad_input(restore):
    md.set_printoptions(precision=2)
    assert md.get_printoptions()["precision"] == 2
    for bad in ({"precision": -1}, {"linewidth": 1.5}, {"profile": "long"},
                {"sci_mode": "yes"}, {"threshold": -3}):
        with pytest.raises(ValueError, match="set_printoptions: "):
            md.set_printoptions(**bad)
    assert md.get_printoptions() == {"precision": 2, "threshold": 1000, "edgeitems": 3,
                                     "linewidth": 80, "sci_mode": None}
    assert repr(md.asarray([1.0 / 3], device="cpu")) == "tensor([0.33])"


def test_default_dtype_reaches_factories_conversions_and_reprs(restore):
    assert md.get_default_dtype() is md.float32
    md.set_default_dtype(md.float64)
    assert md.zeros(2).dtype is md.float64 and md.asarray([1.5]).dtype is md.float64
    assert md.arange(0.5, 2).dtype is md.float64 and md.rand(2).dtype is md.float64
    assert md.sqrt(md.asarray([1, 4])).dtype is md.float64
    assert (md.asarray([1]) * 0.5).dtype is md.float64
    assert md.asarray([1j]).dtype is md.complex128
    assert md.zeros(2, device="meta").dtype is md.float64
    assert md.__array_namespace_info__().default_dtypes()["real floating"] is md.float64
    assert repr(md.asarray([1.5], device="cpu")) == "tensor([1.5000])"
    assert repr(md.asarray([1.5], dtype=md.float32, device="cpu")) == \
        "tensor([1.5000], dtype=md.float32)"
    with pytest.raises(TypeError, match="set_default_dtype: only float32 and float64"):
        md.set_default_dtype(md.int64)
    assert md.get_default_dtype() is md.float64  # unchanged by the refused call
    md.set_default_dtype(md.float32)
    assert md.zeros(2).dtype is md.float32 and (md.asarray([1]) * 0.5).dtype is md.float32
