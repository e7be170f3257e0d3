"""Indexing: x[key], x[key] = v, take/gather/index_select, where, masked_fill, argmax.

Also the masked_fill override story (Note [masked_fill is clone + masked_fill_]): a user
kernel for ``masked_fill_`` on CPU changes ``masked_fill``, and a kernel that breaks the
in-place alias contract is caught with a message naming it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import (
    shares_memory,
    shares_views,
    to_numpy,
)
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md


def _t(a, device=None):
    return md.asarray(np.asarray(a).copy(), device=device)


def _grid(shape=(4, 5)):
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


# ---------------------------------------------------------------------------------------
# Basic indexing: views


BASIC_KEYS = [0, -1, slice(1, 3), slice(None, None, 2), (1, 2), (Ellipsis, 1), (None, 0),
              (slice(None), None, slice(1, None)), Ellipsis, (), (slice(3, 1),),
              (1, slice(None, None, -1))]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=repr)
def test_basic_index_matches_numpy(key):
    a = _grid()
    got = _t(a)[key]
    np.testing.assert_array_equal(to_numpy(got), a[key])
    assert got.shape == a[key].shape


@pytest.mark.parametrize("key", [0, slice(1, 3), (Ellipsis, 1), (None, 0), (1, 2)], ids=repr)
def test_basic_index_is_a_view_sharing_memory_and_version(key):
    x = _t(_grid())
    v = x[key]
    assert v._base is x
    if shares_views(x):  # JAX: a view is a copy kept in sync by Functionalize
        assert shares_memory(v, x)
    before = x._version
    v[...] = -7.0
    assert x._version == v._version == before + 1
    assert np.all(to_numpy(x)[key] == -7.0)
    x[...] = 3.0  # mutation of the base shows in the view
    assert np.all(to_numpy(v) == 3.0)
    assert v._version == x._version


@pytest.mark.parametrize("key,match", [
    ((0, 0, 0), "too many indices"),
    (7, "index 7 is out of bounds for dimension 0 with size 4"),
    ((0, -6), "index -6 is out of bounds for dimension 1 with size 5"),
    ((Ellipsis, 5), "index 5 is out of bounds for dimension 1 with size 5"),
    ((Ellipsis, 0, Ellipsis), "single ellipsis"),
])
def test_basic_index_errors(key, match):
    x = _t(_grid())
    with pytest.raises(IndexError, match=match):
        x[key]
    assert x._version == 0


def test_a_slice_of_a_0d_tensor_is_refused_naming_the_op():
    # the CPU kernel's fast path for a sole slice raised NumPy's own message
    with pytest.raises(IndexError, match="^__getitem__: too many indices for tensor of "
                                         "dimension 0"):
        _t(np.asarray(2.0))[:]


@settings(max_examples=40, deadline=None)
@given(st.integers(-6, 6), st.integers(-6, 6), st.integers(-3, 3).filter(bool))
def test_slices_match_numpy(start, stop, step):
    a = _grid((5, 3))
    np.testing.assert_array_equal(to_numpy(_t(a)[start:stop:step]), a[start:stop:step])
    np.testing.assert_array_equal(to_numpy(_t(a)[:, start:stop:step]), a[:, start:stop:step])


def test_slice_bounds_past_the_end_are_clipped_on_read_and_write():
    a = _grid((3, 3))
    x = _t(a)
    np.testing.assert_array_equal(to_numpy(x[:, 0:4]), a[:, 0:4])
    np.testing.assert_array_equal(to_numpy(x[-9:2, ::-4]), a[-9:2, ::-4])
    x[1:7, -9:2] = -1.0
    a[1:7, -9:2] = -1.0
    np.testing.assert_array_equal(to_numpy(x), a)


# ---------------------------------------------------------------------------------------
# Advanced indexing: copies


@pytest.mark.parametrize("key", [
    pytest.param([0, 2, 2], id="list"),
    pytest.param(np.array([3, 0]), id="array"),
    pytest.param((slice(None), [1, 0]), id="slice-list"),
    pytest.param(([0, 1], [2, 3]), id="two-lists"),
    pytest.param(np.array([True, False, True, False]), id="bool-mask"),
    pytest.param((np.array([[0], [3]]), np.array([1, 4])), id="broadcast-arrays"),
    pytest.param(([-1, 0], slice(1, 9)), id="list-then-slice-past-the-end"),
    pytest.param((slice(None, None, -1), [4, -5]), id="reversed-slice-list"),
    pytest.param((Ellipsis, np.array([[0, 1], [2, 2]])), id="ellipsis-2d-array"),
    pytest.param(([1, 2], None, 0), id="separated-by-none"),
    pytest.param((np.array([True, False, True, True]), [0, 4, 1]), id="mask-and-list"),
    pytest.param((np.array([], dtype=np.int64),), id="empty"),
    pytest.param((np.array([0, 3], dtype=np.int32), 2), id="int32-array-and-int"),
])
def test_advanced_index_matches_numpy_and_copies(key):
    a = _grid()
    x = _t(a)
    mdkey = tuple(md.asarray(k) if isinstance(k, np.ndarray) else k for k in key) \
        if isinstance(key, tuple) else (md.asarray(key) if isinstance(key, np.ndarray) else key)
    got = x[mdkey]
    np.testing.assert_array_equal(to_numpy(got), a[key])
    assert not shares_memory(got, x)
    assert got._base is None


def test_boolean_mask_from_comparison():
    a = _grid()
    x = _t(a)
    np.testing.assert_array_equal(to_numpy(x[x > 7.5]), a[a > 7.5])


def test_advanced_index_errors():
    x = _t(_grid())
    with pytest.raises(IndexError,
                       match="index 9 is out of bounds for dimension 0 with size 4"):
        x[md.asarray(np.array([0, 9]))]
    with pytest.raises(IndexError,
                       match="index -6 is out of bounds for dimension 1 with size 5"):
        x[[0, 1], [2, -6]]
    with pytest.raises(IndexError,
                       match="index 5 is out of bounds for dimension 1 with size 5"):
        x[:, [5]]
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        x[4, [0]]
    with pytest.raises(IndexError, match="shape mismatch"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="too many indices"):
        x[[0], 0, 0]


# Multi-dimensional keys: NumPy's placement rule (advanced indices next to each other keep
# their place; separated by a slice or None, their dimensions come first).
MULTI_KEYS = [
    (slice(None), [0, 2], [1, 3]),
    ([1, 0], slice(None), [3, 2]),
    (0, slice(None), [1, 2]),
    (slice(None), 0, slice(None), [1, 2]),
    ([0, 1], None, [1, 2]),
    (None, [1], slice(1, 3), [2]),
    ([[0, 1], [1, 0]], [[2, 2], [0, 1]], slice(0, 9)),
    (Ellipsis, [4, -1]),
    (slice(None), np.array([[True, False, True, False]] * 3)),
]


@pytest.mark.parametrize("key", MULTI_KEYS, ids=repr)
def test_advanced_index_placement_matches_numpy(key):
    a = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    mdkey = tuple(md.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    got = _t(a)[mdkey]
    assert got.shape == a[key].shape
    np.testing.assert_array_equal(to_numpy(got), a[key])


def test_boolean_mask_of_the_wrong_length_raises():
    x = _t(_grid())
    with pytest.raises(IndexError):
        x[md.asarray(np.array([True, False]))]


@pytest.mark.parametrize("shape, mask_shape, rest", [
    ((0, 5), (0, 0), ()), ((2, 5), (2, 0), ()), ((3, 4, 5), (3, 0), ()),
    ((3, 4, 5), (0, 4, 0), ()), ((3, 4, 5), (3, 0), (Ellipsis, 1)),
    ((2, 5), (3, 0), ()), ((2, 5), (0, 3), ())])
def test_a_mask_dimension_of_size_zero_selects_nothing(shape, mask_shape, rest):
    # As NumPy (and the conformance suite): each mask dimension has the tensor's size or
    # size 0; any other size is an IndexError.
    a, m = np.zeros(shape), np.zeros(mask_shape, dtype=bool)
    key = (md.asarray(m),) + rest if rest else md.asarray(m)
    try:
        expected = a[(m,) + rest].shape
    except IndexError:
        with pytest.raises(IndexError, match="__getitem__: .*(mask|boolean)"):
            _t(a)[key]
        return
    assert _t(a)[key].shape == expected
    x = _t(a)
    x[md.asarray(m)] = 1.0  # writes nothing
    assert not to_numpy(x).any()


# ---------------------------------------------------------------------------------------
# setitem


def test_setitem_basic_scalar_tensor_and_broadcast():
    a = _grid()
    x = _t(a)
    x[1] = 0.5
    a[1] = 0.5
    x[:, 2] = md.asarray(np.arange(4.0))
    a[:, 2] = np.arange(4.0)
    x[2:, 1:3] = md.asarray(np.array([9.0, 8.0]))  # broadcast over rows
    a[2:, 1:3] = np.array([9.0, 8.0])
    np.testing.assert_array_equal(to_numpy(x), a)
    assert x._version == 3


@pytest.mark.parametrize("key, value", [
    ((slice(None), None), np.arange(4.0)[:, None, None]),  # value with the new axis
    ((None, 1), np.array([9.0, 8.0, 7.0, 6.0, 5.0])),
    ((Ellipsis, None), 2.5),
    ((1, None, slice(1, 3), None), np.array([[1.0], [2.0]])),
])
def test_setitem_with_new_axes_matches_numpy(key, value):
    # Note: array_api_strict refuses None in __setitem__; the key is spelled without it
    a = _grid()
    x = _t(a)
    x[key] = md.asarray(value) if isinstance(value, np.ndarray) else value
    a[key] = value
    np.testing.assert_array_equal(to_numpy(x), a)
    with pytest.raises(ValueError, match=r"__setitem__: shape mismatch: value tensor of "
                                         r"shape \[3\] cannot be broadcast"):
        x[:, None] = md.ones(3)
    np.testing.assert_array_equal(to_numpy(x), a)


def test_backward_through_new_axes():
    x = md.asarray(np.arange(3.0), requires_grad=True)
    (x[:, None] * md.asarray([[1.0, 2.0]])).sum().backward()
    np.testing.assert_array_equal(to_numpy(x.grad), [3.0, 3.0, 3.0])


def test_setitem_advanced_and_mask():
    a = _grid()
    x = _t(a)
    x[[0, 3]] = -1.0
    a[[0, 3]] = -1.0
    x[x > 15] = 0.0
    a[a > 15] = 0.0
    np.testing.assert_array_equal(to_numpy(x), a)


SETITEM_CASES = [
    pytest.param(([0, 1], [2, 3]), np.array([7.0, 8.0]), id="two-lists"),
    pytest.param((slice(None), [1, 3, 0]), np.array([1.0, 2.0, 3.0]), id="slice-list"),
    pytest.param((np.array([[0], [2]]), np.array([1, 4])), 5.0, id="broadcast-arrays"),
    pytest.param((np.array([True, False, True, False]), [0, 4]), np.array([9.0, 8.0]),
                 id="mask-and-list"),
    pytest.param((1, [0, -1]), np.array([-5.0, -6.0]), id="int-and-list"),
    pytest.param(([1, 2], slice(0, 9)), np.ones((1, 2, 5)), id="slice-past-the-end"),
    pytest.param(([2, 0, 2],), np.arange(15.0).reshape(3, 5), id="repeated-last-wins"),
    pytest.param((np.array([], dtype=np.int64),), 3.0, id="empty"),
]


@pytest.mark.parametrize("key,value", SETITEM_CASES)
def test_setitem_and_index_put_through_index_arrays_match_numpy(key, value):
    a = _grid()
    want = a.copy()
    want[key] = value
    mdkey = tuple(md.asarray(k) if isinstance(k, np.ndarray) else k for k in key)
    mdvalue = md.asarray(value) if isinstance(value, np.ndarray) else value
    x = _t(a)
    x[mdkey] = mdvalue
    np.testing.assert_array_equal(to_numpy(x), want)
    assert x._version == 1
    y = md.ops.aten.index_put(_t(a), mdkey, md.asarray(np.asarray(value)))
    np.testing.assert_array_equal(to_numpy(y), want)


def test_setitem_through_index_arrays_errors_leave_tensor_unchanged():
    a = _grid()
    x = _t(a)
    with pytest.raises(IndexError, match="index 9 is out of bounds for dimension 0 with size 4"):
        x[[0, 9]] = 1.0
    with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 1 with size 5"):
        x[[0], [-6]] = 1.0
    with pytest.raises(IndexError, match="index 4 is out of bounds for dimension 0 with size 4"):
        md.ops.aten.index_put(x, (md.asarray(np.array([4])),), md.asarray(np.array(1.0)))
    with pytest.raises(ValueError, match=r"shape mismatch: value (tensor|array) of shape "
                                         r"\(?\[?3"):
        x[[0, 1]] = md.asarray(np.ones(3))
    np.testing.assert_array_equal(to_numpy(x), a)
    assert x._version == 0


def test_setitem_through_a_view_writes_the_base():
    x = _t(_grid())
    row = x[2]
    row[1:3] = 100.0
    assert to_numpy(x)[2, 1] == 100.0 and to_numpy(x)[2, 2] == 100.0
    assert x._version == row._version == 1


def test_setitem_errors_leave_tensor_unchanged():
    a = _grid()
    x = _t(a)
    with pytest.raises(IndexError, match="out of bounds"):
        x[10] = 1.0
    with pytest.raises(ValueError):
        x[0] = md.asarray(np.ones(3))  # (3,) does not broadcast to (5,)
    np.testing.assert_array_equal(to_numpy(x), a)
    assert x._version == 0


# ---------------------------------------------------------------------------------------
# take, take_along_axis/gather, index_select, where


def test_take_and_index_select():
    a = _grid()
    idx = np.array([3, 0, 0])
    np.testing.assert_array_equal(to_numpy(md.take(_t(a), md.asarray(idx), axis=0)),
                                  np.take(a, idx, axis=0))
    np.testing.assert_array_equal(to_numpy(md.index_select(_t(a), 1, md.asarray(idx))),
                                  np.take(a, idx, axis=1))
    np.testing.assert_array_equal(to_numpy(_t(a).index_select(0, md.asarray(idx))), a[idx])
    with pytest.raises(ValueError, match="take: axis is required"):
        md.take(_t(a), md.asarray(idx))
    with pytest.raises(TypeError, match="index_select: expected an integer index"):
        md.index_select(_t(a), 0, md.asarray(np.ones(2)))


def test_gather_is_torch_gather():
    # Note [gather is PyTorch's]: md.gather was take_along_axis (the index broadcast, the
    # positional form raised, negative indices wrapped)
    a = _grid((3, 4))
    idx = np.array([[0, 3], [1, 1], [2, 0]])
    want = np.take_along_axis(a, idx, axis=1)
    for got in (md.gather(_t(a), 1, md.asarray(idx)), _t(a).gather(1, md.asarray(idx)),
                md.gather(_t(a), dim=1, index=md.asarray(idx))):
        np.testing.assert_array_equal(to_numpy(got), want)
    # a smaller index does not broadcast: the result has the index's shape
    assert md.gather(_t(_grid((1, 4))), 1, md.asarray([[0]])).shape == (1, 1)
    assert md.gather(_t(a), 0, md.asarray([[2], [0], [1], [2], [0]])).shape == (5, 1)
    assert md.gather(_t(a), 1, md.asarray(np.zeros((3, 0), np.int64))).shape == (3, 0)
    assert md.gather(md.asarray(5.0), 0, md.asarray(0)).item() == 5.0
    np.testing.assert_array_equal(
        to_numpy(md.take_along_axis(_t(a), md.asarray(idx), axis=1)),
        np.take_along_axis(a, idx, axis=1))
    with pytest.raises(IndexError, match="gather: index -1 is out of bounds for dimension 1 "
                                         "with size 4"):
        md.gather(_t(a), 1, md.asarray([[-1]]))
    with pytest.raises(ValueError, match=r"gather: the index of shape \[4, 1\] must be no "
                                         r"larger than the tensor's shape \[3, 4\] apart "
                                         r"from dimension 1"):
        md.gather(_t(a), 1, md.asarray([[0], [0], [0], [0]]))
    with pytest.raises(TypeError, match="gather: expected an integer index tensor"):
        md.gather(_t(a), 1, md.asarray([[0.0]]))
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], dtype=md.float64, requires_grad=True)
    md.gather(x, 1, md.asarray([[1, 1]])).sum().backward()
    assert to_numpy(x.grad).tolist() == [[0.0, 2.0], [0.0, 0.0]]


def test_an_empty_list_index_selects_nothing():
    # [] made a float64 index array, which NumPy refuses
    a = md.arange(6).reshape(3, 2)
    assert a[[]].shape == (0, 2)
    assert a[[], 0].shape == (0,)
    assert a[[], []].shape == (0,)
    assert a[[]].dtype == a.dtype
    assert md.arange(6, device="meta").reshape(3, 2)[[]].shape == (0, 2)
    b = md.zeros(3)
    b[[]] = 1.0
    assert to_numpy(b).tolist() == [0.0, 0.0, 0.0]


def test_where_overloads():
    c = np.array([[True, False, True], [False, True, False]])
    a = _grid((2, 3))
    b = -_grid((3,))
    np.testing.assert_array_equal(to_numpy(md.where(md.asarray(c), _t(a), _t(b))),
                                  np.where(c, a, b))
    np.testing.assert_array_equal(to_numpy(md.where(md.asarray(c), _t(a), 0.5)),
                                  np.where(c, a, 0.5))
    np.testing.assert_array_equal(to_numpy(md.where(md.asarray(c), 2.0, _t(a))),
                                  np.where(c, 2.0, a))
    r = md.where(md.asarray(c), 1, 0)
    np.testing.assert_array_equal(to_numpy(r), np.where(c, 1, 0))
    assert r.dtype is md.int64


# ---------------------------------------------------------------------------------------
# argmax / argmin / searchsorted


def test_argmax_argmin_axis_dim_keepdims():
    a = np.array([[1.0, 5.0, 5.0], [7.0, -1.0, 7.0]])
    x = _t(a)
    assert md.argmax(x).item() == np.argmax(a)
    np.testing.assert_array_equal(to_numpy(md.argmax(x, axis=1)), np.argmax(a, axis=1))
    np.testing.assert_array_equal(to_numpy(md.argmin(x, dim=0, keepdim=True)),
                                  np.argmin(a, axis=0, keepdims=True))
    np.testing.assert_array_equal(to_numpy(x.argmax(1, keepdims=True)),
                                  np.argmax(a, axis=1, keepdims=True))
    assert md.argmax(x).dtype is md.int64
    with pytest.raises(ValueError, match="argmax: expected reduction dim to be specified for an "
                                         "empty tensor"):
        md.argmax(md.asarray(np.zeros((0,))))
    with pytest.raises(IndexError):
        md.argmax(x, axis=2)


def test_searchsorted_sides():
    s = np.array([1.0, 2.0, 2.0, 5.0])
    v = np.array([2.0, 0.0, 6.0])
    for side in ("left", "right"):
        np.testing.assert_array_equal(
            to_numpy(md.searchsorted(_t(s), _t(v), side=side)), np.searchsorted(s, v, side=side))
    with pytest.raises(ValueError, match="side must be 'left' or 'right'"):
        md.searchsorted(_t(s), _t(v), side="middle")


# ---------------------------------------------------------------------------------------
# masked_fill and the override story


MASK = np.array([[True, False, True], [False, False, True]])


def test_masked_fill_out_of_place_and_in_place():
    a = _grid((2, 3))
    x = _t(a)
    y = md.masked_fill(x, md.asarray(MASK), -1.0)
    np.testing.assert_array_equal(to_numpy(y), np.where(MASK, -1.0, a))
    np.testing.assert_array_equal(to_numpy(x), a)  # functional: x untouched
    assert x._version == 0
    np.testing.assert_array_equal(to_numpy(x.masked_fill(md.asarray(MASK[0]), 9)),
                                  np.where(MASK[0], 9.0, a))  # mask broadcasts
    r = x.masked_fill_(md.asarray(MASK), md.asarray(np.array(4.0)))
    assert r is x and x._version == 1
    np.testing.assert_array_equal(to_numpy(x), np.where(MASK, 4.0, a))


def test_masked_fill_errors_leave_state_unchanged():
    a = _grid((2, 3))
    x = _t(a)
    with pytest.raises(TypeError, match="masked_fill: expected a bool mask, got float64"):
        md.masked_fill(x, _t(np.ones((2, 3))), 1.0)
    np.testing.assert_array_equal(to_numpy(x), a)
    assert x._version == 0


def test_overriding_masked_fill_inplace_changes_masked_fill(aten_impl):
    calls = []

    def my_masked_fill_(self, mask, value):
        calls.append(value)
        self._data[mask._data] = 42.0  # a "CPU kernel": writes into self's array
        return self

    with pytest.warns(UserWarning) as record:
        handle = aten_impl.impl("masked_fill_.Scalar", my_masked_fill_, "CPU")
    msg = str(record[0].message)
    assert "aten::masked_fill_.Scalar" in msg and "my_masked_fill_" in msg
    assert "array_api_inplace[aten::masked_fill_.Scalar]" in msg

    a = _grid((2, 3))
    x = _t(a, "cpu")  # the override is a CPU kernel
    y = md.masked_fill(x, md.asarray(MASK, device="cpu"), 1.0)
    assert calls == [1.0]  # masked_fill = clone + masked_fill_, through the dispatcher
    np.testing.assert_array_equal(to_numpy(y), np.where(MASK, 42.0, a))
    np.testing.assert_array_equal(to_numpy(x), a)  # the clone was mutated, not x
    # The Tensor overload is not overridden.
    mask = md.asarray(MASK, device="cpu")
    np.testing.assert_array_equal(
        to_numpy(md.masked_fill(x, mask, md.asarray(np.array(1.0), device="cpu"))),
        np.where(MASK, 1.0, a))

    handle.remove()
    np.testing.assert_array_equal(to_numpy(md.masked_fill(x, mask, 1.0)),
                                  np.where(MASK, 1.0, a))
    assert calls == [1.0]


def test_inplace_override_returning_a_new_tensor_breaks_the_alias_contract(aten_impl):
    def wrong_masked_fill_(self, mask, value):
        return md.where(mask, value, self)  # a new tensor: not self

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        handle = aten_impl.impl("masked_fill_.Scalar", wrong_masked_fill_, "CPU")
    x = _t(_grid((2, 3)), "cpu")  # the override is a CPU kernel
    mask = md.asarray(MASK, device="cpu")
    with pytest.raises(RuntimeError, match=r"aten::masked_fill_\.Scalar: the kernel "
                                           r"\S*wrong_masked_fill_ broke the schema's alias "
                                           r"contract.*returned a new tensor"):
        md.masked_fill(x, mask, 1.0)
    handle.remove()
    np.testing.assert_array_equal(to_numpy(md.masked_fill(x, mask, 1.0)),
                                  np.where(MASK, 1.0, _grid((2, 3))))


def test_index_put_of_a_one_element_value_into_one_element():
    # NumPy refuses a (1,) array assigned to one element, with a ValueError for real dtypes
    # and a TypeError for complex ones; the CPU kernel hands both to the generic kernel
    for dtype in ("float32", "complex64", "int64"):
        x = md.asarray(np.arange(3).astype(dtype), device="cpu")
        v = md.asarray(np.asarray([7], dtype=dtype), device="cpu")
        got = md.ops.aten.index_put(x, 1, v)
        assert got.tolist() == np.asarray([0, 7, 2], dtype=dtype).tolist()
        assert got.dtype == x.dtype and x.tolist() == np.arange(3).astype(dtype).tolist()
