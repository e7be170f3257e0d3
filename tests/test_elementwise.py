"""Elementwise ops (``ops/elementwise.py``): values the OpInfo sweep's random samples do not
reach -- special values, extreme magnitudes, mixed dtypes -- on the device under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import backend_params, to_numpy

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


@pytest.mark.parametrize("dtype", [md.float32, md.float64])
def test_floor_divide_of_infinities_is_the_limit_on_every_path(dtype):
    # Note [floor_divide on NumPy]: the CPU kernel's dot-product screen sends arrays with
    # an infinity (or NaN) to the generic fix; same shapes, broadcast and scalar operands
    a = md.asarray([1.0, -1.0, inf, -inf, 5.0, -3.0, 7.0, nan], dtype=dtype)
    b = md.asarray([inf, inf, 2.0, 2.0, 0.0, 2.0, -inf, 1.0], dtype=dtype)
    got = to_numpy(md.floor_divide(a, b))
    np.testing.assert_array_equal(got, [0.0, -0.0, inf, -inf, inf, -2.0, -0.0, nan])
    assert np.signbit(got[1]) and np.signbit(got[6])
    assert _values(md.floor_divide(md.asarray([[inf], [3.0]], dtype=dtype),
                                   md.asarray([2.0, -2.0], dtype=dtype))) == \
        [[inf, -inf], [1.0, -2.0]]
    assert _values(md.floor_divide(md.asarray([inf, 3.0], dtype=dtype), 2.0)) == [inf, 1.0]
    assert _values(md.floor_divide(md.asarray([-1.0, 3.0], dtype=dtype), inf)) == [-0.0, 0.0]
    assert np.signbit(to_numpy(md.floor_divide(-1.0, md.asarray([inf], dtype=dtype)))[0])
    assert _values(md.floor_divide(7, md.asarray([2.0, -inf], dtype=dtype))) == [3.0, -0.0]
    assert md.floor_divide(md.asarray([3.0], dtype=dtype), 2).dtype == dtype
    # a sum of finite values that overflows takes the generic path and the same result
    big = md.asarray([3e38, 3e38], dtype=dtype)
    assert _values(md.floor_divide(big, big)) == [1.0, 1.0]


_REAL_PAIRS = [(md.float32, md.int32), (md.int64, md.float32), (md.float32, md.bool),
               (md.uint8, md.float64), (md.uint64, md.int64)]
_COMPLEX_PAIRS = [(md.complex64, md.int32), (md.float64, md.complex64)]
_REAL_OPS = ["atan2", "copysign", "hypot", "logaddexp", "maximum", "fmod", "remainder"]
_ANY_OPS = ["add", "multiply", "divide", "pow", "eq", "matmul"]


@pytest.mark.parametrize("name, pair", [
    (n, p) for n in _REAL_OPS + _ANY_OPS for p in _REAL_PAIRS] + [
    (n, p) for n in _ANY_OPS for p in _COMPLEX_PAIRS],
    ids=lambda v: v if isinstance(v, str) else f"{v[0].name}-{v[1].name}")
def test_tensors_of_different_kinds_give_the_meta_dtype(name, pair):
    # Note [Tensors of different kinds]: div/atan2/... computed float32 on every backend,
    # JAX did so for every op, array_api_strict raised
    fn = getattr(md, name)
    a = md.asarray([[1, 2], [3, 1]], dtype=pair[0])
    b = md.asarray([[3, 1], [1, 2]], dtype=pair[1])
    want = fn(a.to("meta"), b.to("meta")).dtype
    got = fn(a, b)
    assert got.dtype == want, (name, pair, got.dtype, want)
    assert want == md.result_type(pair[0], pair[1]) or name == "eq" or (
        name == "divide" and want == md.float32)


def test_int_by_float_division_is_computed_in_the_promoted_dtype():
    got = md.divide(md.asarray([-19], dtype=md.int32), md.asarray([-1.1754944e-38]))
    assert got.dtype == md.float64
    np.testing.assert_allclose(to_numpy(got), [-19 / np.float64(np.float32(-1.1754944e-38))])


def test_erf_is_correctly_rounded_in_float64_and_float32():
    # Note [erf] in ops/_special.py: three ranges, and the infinities and nan
    xs = np.concatenate([np.linspace(-7, 7, 2801), [1e-300, -1e-300, 0.5, 4.0, 27.0, -30.0]])
    got = to_numpy(md.erf(md.asarray(xs, dtype=md.float64)))
    want = [math.erf(v) for v in xs]
    np.testing.assert_allclose(got, want, rtol=5e-16, atol=0)
    special = to_numpy(md.erf(md.asarray([inf, -inf, nan, -0.0], dtype=md.float64)))
    np.testing.assert_array_equal(special, [1.0, -1.0, nan, -0.0])
    assert np.signbit(special[3])
    f32 = md.erf(md.asarray(xs, dtype=md.float32))
    assert f32.dtype == md.float32
    np.testing.assert_allclose(to_numpy(f32), np.float32(want), rtol=2e-7, atol=1e-7)
    assert md.erf(md.asarray([0, 1])).dtype == md.float32  # an integer input: the default


def test_python_ints_out_of_an_integer_dtypes_range_wrap_as_in_pytorch():
    # Note [Integers out of range] in ops/_promotion.py: NumPy and array_api_strict raised
    # OverflowError, JAX wrapped
    u8 = md.asarray([0, 1], dtype=md.uint8)
    assert _values(md.add(u8, -1)) == [255, 0]
    assert _values(md.add(md.asarray([0], dtype=md.int8), 300)) == [44]
    assert _values(md.maximum(u8, -1)) == [255, 255]
    assert _values(md.sub(300, md.asarray([0], dtype=md.int8))) == [44]
    y = md.asarray([1], dtype=md.uint8)
    y.add_(-1)
    assert _values(y) == [0]
    # fill values follow PyTorch's checked conversion: an int an unsigned dtype can take
    # two's complement of wraps, anything else out of range raises naming the op
    assert _values(md.full((2,), -1, dtype=md.uint8)) == [255, 255]
    with pytest.raises(OverflowError, match="full: value 300 cannot be converted to uint8"):
        md.full((2,), 300, dtype=md.uint8)
    with pytest.raises(OverflowError, match="masked_fill: value -1.0 cannot be converted"):
        md.masked_fill(u8, md.asarray([True, False]), -1.0)
    with pytest.raises(OverflowError, match="full: value 1e\\+300 cannot be converted to "
                                            "float32"):
        md.full((1,), 1e300, dtype=md.float32)
    with pytest.raises(OverflowError, match="full: value 1e\\+300 cannot be converted to "
                                            "float32"):
        md.full((1,), 1e300)  # the default float dtype (it gave inf)
    # a float is compared with the dtype's range before it is truncated (c10's overflows):
    # -0.5 is refused for uint8 (it truncated to 0), taken as 0 for int8; nan never fits
    with pytest.raises(OverflowError, match="full: value -0.5 cannot be converted to uint8"):
        md.full_like(u8, -0.5)
    assert _values(md.full((1,), -0.5, dtype=md.int8)) == [0]
    with pytest.raises(ValueError, match="full: can't assign nan to a int32 tensor"):
        md.full((1,), math.nan, dtype=md.int32)


@pytest.mark.parametrize("call", [
    lambda z: md.maximum(z, z), lambda z: md.atan2(z, z), lambda z: md.lt(z, z),
    lambda z: md.floor(z), lambda z: md.clamp(z, 0, 1), lambda z: md.sort(z),
    lambda z: md.argmax(z)], ids=["maximum", "atan2", "lt", "floor", "clamp", "sort",
                                  "argmax"])
def test_real_only_ops_refuse_complex_tensors_on_every_device(call):
    # Note [Accepted dtypes] in ops/_accepted.py: NumPy raised its own TypeError, JAX
    # computed, Meta gave a complex dtype
    for z in (md.asarray([1 + 1j]), md.asarray([1 + 1j], device="meta")):
        with pytest.raises(TypeError, match="expected real \\(not complex\\) tensors, got "
                                            "complex64|expected integer or floating-point"):
            call(z)


@pytest.mark.parametrize("device", backend_params("cpu", "loopback"))
def test_sign_of_complex_numbers_at_extreme_magnitudes(device):
    # z / |z| as a complex division overflowed for a subnormal |z| (sign(1.7e-40j) in
    # complex64 was nan + inf j, PyTorch's sgn too) and |z| itself near the largest float;
    # the parts are divided by the larger one first.  (XLA flushes subnormals to zero and
    # folds the divisions back into one, so JAX is left out.)
    zs = np.asarray([1.72853e-40j, 3e38 + 3e38j, -1e-45 + 2e-45j, -0.0 + 0j, 3 + 4j],
                    dtype=np.complex64)
    got = to_numpy(md.sign(md.asarray(zs, device=device)))
    wide = zs.astype(np.complex128)  # z / |z| in double precision, where nothing overflows
    with np.errstate(invalid="ignore"):
        want = np.where(wide == 0, 0, wide / np.abs(wide))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert not np.signbit(got[3].real)  # +0, the standard's sign(-0 + 0j)
