"""Tensor methods that spell other ops (ops/_torch_methods.py), against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import TEST_DEVICE_TYPE, to_numpy

import mdtensor as md

torch = pytest.importorskip("torch")


def _has_float16() -> bool:
    try:
        md.zeros(1).half()
    except (AttributeError, TypeError):
        return False
    return True


@pytest.mark.parametrize("name", ["float", "double", "half", "long", "int", "short", "bool",
                                  "cfloat", "cdouble"])
def test_dtype_conversions_are_pytorchs(name):
    if name == "half" and not _has_float16():
        pytest.skip("the backend has no float16")
    data = np.asarray([[0.0, 1.5], [-2.7, 3.0]])
    got = getattr(md.asarray(data), name)()
    want = getattr(torch.from_numpy(data), name)()
    assert got.dtype.name == str(want.dtype).removeprefix("torch.").replace(
        "float16", "float16")
    np.testing.assert_array_equal(to_numpy(got), want.numpy())


def test_type_as_takes_the_other_tensors_dtype():
    x = md.asarray([1.7, -2.2])
    assert x.type_as(md.zeros(1, dtype=md.int64)).tolist() == [1, -2]
    with pytest.raises(TypeError, match="type_as: expected a Tensor"):
        x.type_as(md.int64)


def test_real_and_imag_are_properties():
    z = md.asarray([1 + 2j, -3 - 4j])
    assert z.real.tolist() == [1.0, -3.0]
    assert z.imag.tolist() == [2.0, -4.0]
    x = md.asarray([1.0, 2.0])
    assert x.real is x  # PyTorch: a real tensor's real part is the tensor itself
    with pytest.raises(RuntimeError, match="imag is not implemented"):
        _ = x.imag


def test_new_factories_take_dtype_and_device_from_self():
    x = md.asarray([1, 2], dtype=md.int16)
    for t, shape in ((x.new_zeros(2, 3), (2, 3)), (x.new_ones((3,)), (3,)),
                     (x.new_empty([0, 2]), (0, 2)), (x.new_full((2,), 7), (2,))):
        assert (t.shape, t.dtype, t.device) == (shape, md.int16, x.device)
    assert x.new_full((2,), 7).tolist() == [7, 7]
    assert x.new_ones(2, dtype=md.float64).dtype is md.float64
    assert x.new_zeros(2, requires_grad=False).requires_grad is False
    with pytest.raises(TypeError, match="new_zeros: size must be a tuple of ints"):
        x.new_zeros(2.0)


def test_shape_of_another_tensor():
    x = md.asarray([[1.0], [2.0]])
    assert x.expand_as(md.zeros((3, 2, 4))).shape == (3, 2, 4)
    assert x.view_as(md.zeros(2)).shape == (2,)
    assert x.T.reshape_as(md.zeros((2, 1))).shape == (2, 1)
    with pytest.raises(TypeError, match="view_as: expected a Tensor"):
        x.view_as((2,))


def test_expand_as_is_differentiable():
    x = md.asarray([[1.0], [2.0]], requires_grad=True)
    x.expand_as(md.zeros((2, 3))).sum().backward()
    assert x.grad.tolist() == [[3.0], [3.0]]


@pytest.mark.skipif(TEST_DEVICE_TYPE not in ("cpu", "cuda"), reason="the backend's arrays "
                    "have no strides: contiguous strides (Note [Strides])")
@pytest.mark.parametrize("make", [
    lambda lib: lib.zeros((2, 3, 4)),
    lambda lib: lib.zeros((2, 3, 4)).permute(2, 0, 1),
    lambda lib: lib.zeros((2, 3, 4))[:, 1],
    lambda lib: lib.zeros((2, 3, 4))[:, :, ::2],
    lambda lib: lib.zeros((2, 1, 4)).expand(2, 5, 4),
    lambda lib: lib.zeros((1, 3)),
    lambda lib: lib.zeros((1, 3)).t(),
    lambda lib: lib.zeros(()),
    lambda lib: lib.zeros((0, 3)),
])
def test_strides_and_contiguity_are_pytorchs(make):
    got, want = make(md), make(torch)
    assert got.stride() == want.stride()
    assert got.is_contiguous() == want.is_contiguous()
    for d in range(-got.ndim, got.ndim):
        assert got.stride(d) == want.stride(d)


def test_strides_without_views_are_contiguous():
    x = md.zeros((2, 3, 4)).permute(2, 0, 1)
    assert x.contiguous().stride() == (6, 3, 1)
    assert x.contiguous().is_contiguous()
    with pytest.raises(IndexError, match="stride: Dimension out of range"):
        x.stride(3)


def test_ravel_flattens_in_row_major_order():
    x = md.asarray([[1, 2], [3, 4]])
    assert x.T.ravel().tolist() == [1, 3, 2, 4]
    assert md.ravel(md.asarray(5)).shape == (1,)


def test_zero_and_fill_write_in_place():
    x = md.asarray([1.0, 2.0])
    assert x.fill_(3) is x and x.tolist() == [3.0, 3.0]
    assert x.zero_() is x and x.tolist() == [0.0, 0.0]
    assert md.asarray([1, 2]).fill_(2.9).tolist() == [2, 2]  # truncated, as PyTorch
    assert md.asarray([1], dtype=md.uint8).fill_(-1).tolist() == [255]
    with pytest.raises(ValueError, match="fill: value 1099511627776 cannot be converted"):
        md.asarray([1], dtype=md.int32).fill_(2**40)


def test_grad_zero_idiom():
    w = md.asarray([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    w.grad.zero_()
    assert w.grad.tolist() == [0.0, 0.0]


def test_fill_of_a_non_leaf_cuts_the_gradient():
    a = md.asarray([1.0, 2.0], requires_grad=True)
    b = a * 2
    b.fill_(1.0)
    (b * a).sum().backward()
    assert a.grad.tolist() == [1.0, 1.0]  # only through the second factor


def test_normal_and_uniform_fill_in_place_reproducibly():
    x = md.zeros(1000, dtype=md.float64)
    md.manual_seed(3)
    assert x.normal_(2.0, 0.5) is x
    a = to_numpy(x).copy()
    assert abs(a.mean() - 2.0) < 0.1 and abs(a.std() - 0.5) < 0.05
    md.manual_seed(3)
    np.testing.assert_array_equal(to_numpy(md.zeros(1000, dtype=md.float64).normal_(2.0, 0.5)),
                                  a)
    u = to_numpy(md.zeros(1000).uniform_(-1.0, 3.0))
    assert u.min() >= -1.0 and u.max() < 3.0 and abs(u.mean() - 1.0) < 0.2
    g = md.Generator().manual_seed(1)
    b1 = to_numpy(md.zeros(5).uniform_(generator=g))
    b2 = to_numpy(md.zeros(5).uniform_(generator=md.Generator().manual_seed(1)))
    np.testing.assert_array_equal(b1, b2)
    with pytest.raises(TypeError, match="normal_: expected a floating tensor"):
        md.zeros(2, dtype=md.int64).normal_()
    with pytest.raises(ValueError, match="normal_: expects std >= 0.0"):
        md.zeros(2).normal_(0.0, -1.0)


def test_init_of_a_parameter_under_no_grad():
    w = md.zeros(3, requires_grad=True)
    with md.no_grad():
        w.uniform_(-0.1, 0.1)
    assert w.is_leaf and w.requires_grad
    assert float(md.max(md.abs(w.detach()))) <= 0.1
