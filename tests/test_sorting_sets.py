"""Sorting, sets, all/any, diff, nonzero/count_nonzero, and dtype/device conversion
(astype, to, to_device)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import shares_memory, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import mdtensor as md


def _t(a, device=None):
    return md.asarray(np.asarray(a).copy(), device=device)


# ---------------------------------------------------------------------------------------
# sort / argsort


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.int64, hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.integers(-3, 3)), st.booleans(), st.integers(-1, 0))
def test_sort_argsort_stable_both_directions(a, descending, axis):
    x = _t(a)
    got = to_numpy(md.argsort(x, axis=axis, descending=descending))
    if descending:
        # Stable descending keeps equal elements in their original order.
        n = a.shape[axis]
        want = np.flip(n - 1 - np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)
    else:
        want = np.argsort(a, axis=axis, kind="stable")
    np.testing.assert_array_equal(got, want)
    sorted_ = to_numpy(md.sort(x, axis=axis, descending=descending))
    np.testing.assert_array_equal(sorted_, np.take_along_axis(a, want, axis))


def test_sort_torch_spelling_and_dtype():
    a = np.array([[3.0, 1.0, 2.0], [0.0, -1.0, 5.0]])
    x = _t(a)
    values, indices = x.sort(dim=0)  # PyTorch's: (values, indices)
    np.testing.assert_array_equal(to_numpy(values), np.sort(a, axis=0))
    np.testing.assert_array_equal(to_numpy(indices), np.argsort(a, axis=0, kind="stable"))
    assert md.argsort(x).dtype is md.int64
    with pytest.raises(IndexError):
        md.sort(x, axis=3)


@pytest.mark.parametrize("name", ["sort", "argsort"])
@pytest.mark.parametrize("device_kind", ["default", "meta"])
def test_sort_axis_out_of_range_is_an_index_error_naming_the_op(name, device_kind):
    x = md.zeros((2, 3), device="meta") if device_kind == "meta" else md.zeros((2, 3))
    for axis in (2, -3, 3):
        with pytest.raises(IndexError, match=rf"^{name}: axis {axis} is out of range for a "
                                             rf"tensor of dimension 2 \(expected to be in "
                                             rf"range \[-2, 1\]\)"):
            getattr(md, name)(x, axis=axis)
    assert tuple(getattr(md, name)(x, axis=-2).shape) == (2, 3)


# ---------------------------------------------------------------------------------------
# unique_*


def test_unique_family_named_fields():
    a = np.array([3, 1, 3, 2, 1, 3])
    x = _t(a)
    vals, idx, inv, counts = np.unique(a, return_index=True, return_inverse=True,
                                       return_counts=True)
    np.testing.assert_array_equal(to_numpy(md.unique_values(x)), vals)
    uc = md.unique_counts(x)
    np.testing.assert_array_equal(to_numpy(uc.values), vals)
    np.testing.assert_array_equal(to_numpy(uc.counts), counts)
    ui = md.unique_inverse(x)
    np.testing.assert_array_equal(to_numpy(ui.inverse_indices), inv)
    ua = md.unique_all(x)
    assert ua._fields == ("values", "indices", "inverse_indices", "counts")
    np.testing.assert_array_equal(to_numpy(ua.indices), idx)
    np.testing.assert_array_equal(to_numpy(ua.values)[to_numpy(ua.inverse_indices)], a)


def test_unique_inverse_keeps_input_shape():
    a = np.array([[2, 1], [1, 2]])
    ui = md.unique_inverse(_t(a))
    assert ui.inverse_indices.shape == (2, 2)
    np.testing.assert_array_equal(to_numpy(ui.values)[to_numpy(ui.inverse_indices)], a)


# ---------------------------------------------------------------------------------------
# all / any / count_nonzero / nonzero / diff


@pytest.mark.parametrize("kw", [{}, {"axis": 0}, {"axis": (0, 1)}, {"dim": 1, "keepdim": True}])
def test_all_any_count_nonzero(kw):
    a = np.array([[0, 1, 2], [3, 0, 0]])
    npkw = {"axis": kw.get("axis", kw.get("dim")), "keepdims": kw.get("keepdim", False)}
    x = _t(a)
    np.testing.assert_array_equal(to_numpy(md.all(x, **kw)), np.all(a, **npkw))
    np.testing.assert_array_equal(to_numpy(md.any(x, **kw)), np.any(a, **npkw))
    np.testing.assert_array_equal(to_numpy(md.count_nonzero(x, **kw)),
                                  np.count_nonzero(a, **npkw))
    assert md.all(x, **kw).dtype is md.bool


def test_nonzero_tuple_and_error():
    a = np.array([[0, 1, 2], [3, 0, 0]])
    got = md.nonzero(_t(a))  # the Array API's; x.nonzero() is PyTorch's (argwhere)
    np.testing.assert_array_equal(to_numpy(_t(a).nonzero()), np.argwhere(a))
    assert isinstance(got, tuple) and len(got) == 2
    for g, w in zip(got, np.nonzero(a)):
        np.testing.assert_array_equal(to_numpy(g), w)
    with pytest.raises(ValueError, match="nonzero: zero-dimensional"):
        md.nonzero(_t(np.array(1)))


def test_diff_with_prepend_append_and_errors():
    a = np.array([[1.0, 4.0, 9.0], [2.0, 2.0, 0.0]])
    x = _t(a)
    np.testing.assert_array_equal(to_numpy(md.diff(x)), np.diff(a))
    np.testing.assert_array_equal(to_numpy(md.diff(x, axis=0)), np.diff(a, axis=0))
    np.testing.assert_array_equal(to_numpy(x.diff(n=2)), np.diff(a, n=2))
    p = np.zeros((2, 1))
    np.testing.assert_array_equal(to_numpy(md.diff(x, prepend=_t(p), append=_t(p))),
                                  np.diff(a, prepend=p, append=p))
    with pytest.raises(ValueError, match="diff: order n must be non-negative"):
        md.diff(x, n=-1)
    m = md.empty((2, 3), device="meta")
    assert md.diff(m, n=2).shape == (2, 1)
    assert md.diff(m, axis=0, prepend=md.empty((1, 3), device="meta")).shape == (2, 3)


# ---------------------------------------------------------------------------------------
# astype / to / to_device


def test_astype_copies_and_casts():
    a = np.array([1.5, -2.5, 3.0])
    x = _t(a)
    y = md.astype(x, md.int32)
    assert y.dtype is md.int32
    np.testing.assert_array_equal(to_numpy(y), a.astype(np.int32))
    z = x.astype(md.float64)
    assert z is not x and not shares_memory(z, x)
    assert md.astype(x, md.float64, copy=False)._data is x._data
    with pytest.raises(TypeError):
        md.astype(x, "not-a-dtype")



def test_astype_cpu_impl_gives_the_generic_results():
    # the CPU impl (ndarray.astype to the target's NumPy dtype) and the generic impl it
    # leaves complex inputs, bfloat16 and other dtype spellings to agree
    from mdtensor.ops.searching import _astype, _np_astype

    from mdtensor import _dtypes as dt

    xp = md.Device("cpu").xp
    a = np.array([[1.5, -2.5, 0.0], [np.nan, np.inf, 300.0]], np.float32)
    for target in dt.all_dtypes:
        with np.errstate(invalid="ignore"):
            fast, generic = _np_astype(xp, a, target), _astype(xp, a, target)
        assert fast.dtype == generic.dtype == target.numpy
        np.testing.assert_array_equal(fast, generic)
    assert _np_astype(xp, a, md.float32, copy=False) is a
    assert _np_astype(xp, a, md.float32) is not a
    c = md.asarray(np.array([1 + 2j, -3 - 1j], np.complex64))
    np.testing.assert_array_equal(to_numpy(md.astype(c, md.float32)), [1.0, -3.0])
    assert md.astype(_t(a), "float64").dtype is md.float64

def test_to_follows_pytorch(device):
    x = _t(np.arange(3.0))
    assert x.to(device) is x  # same device and dtype: self
    assert x.to(md.float64) is x
    assert x.to(md.float64, copy=True) is not x
    y = x.to(md.float32)
    assert y.dtype is md.float32 and y.device == x.device
    c = x.to(dtype=md.int64, device="cpu")
    assert c.dtype is md.int64 and c.device.type == "cpu"
    assert x.to(y).dtype is md.float32  # another tensor's device and dtype
    with pytest.raises(TypeError, match="to\\(\\): expected a device, a dtype or a tensor"):
        x.to(3)


def test_to_device_and_back_via_meta(device):
    x = _t(np.arange(6.0).reshape(2, 3))
    m = x.to_device("meta")
    assert m.device.type == "meta" and m.shape == (2, 3) and m.dtype is md.float64
    assert x.to_device(device) is x
    if device == "cpu":
        assert x.cpu() is x
    else:
        assert x.cpu().device.type == "cpu"


def test_detach_shares_storage():
    x = _t(np.arange(3.0))
    x.requires_grad_(True)
    d = x.detach()
    assert not d.requires_grad
    assert shares_memory(d, x)


def test_cross_device_to_copies():
    pytest.importorskip("jax")
    a = np.arange(6.0).reshape(2, 3)
    x = _t(a, "cpu")  # from the CPU to JAX and back
    j = x.to("jax")
    assert j.device.type == "jax"
    c = j.to("cpu")
    assert c is not x and not shares_memory(c, x)
    c[0, 0] = 100.0  # the CPU copy is independent of the JAX tensor
    x[0, 1] = -1.0  # and the JAX tensor of its source
    np.testing.assert_array_equal(to_numpy(j), a)
