"""Python scalars meeting tensors: every backend gives the dtypes ``result_type`` (and so
the Meta device) gives -- PyTorch's rule (Note [Scalars of a higher kind] in
mdtensor/_dtypes.py) -- with the values NumPy computes in that dtype (Note [Python scalars
on strict backends] in ops/_promotion.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import to_numpy
from mdtensor.ops._promotion import promote_scalar

import mdtensor as md

_DTYPES = ["bool", "int8", "int32", "int64", "uint8", "float32", "float64", "complex64"]
_SCALARS = [True, 2, 0.5, 1j]
_OPS = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "eq": np.equal}
_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
_SCALAR_RANK = {bool: 0, int: 1, float: 2, complex: 3}


def expected_dtype(dtype_name, scalar):
    """PyTorch's result dtype of a tensor and a Python scalar, written out: a scalar of the
    tensor's kind or a lower one is weak; one of a higher kind gives its kind's default
    dtype (int64, float32, complex64 -- complex128 with a float64 tensor)."""
    dtype = np.dtype(dtype_name)
    rank = _SCALAR_RANK[type(scalar)]
    if rank <= _RANK[dtype.kind]:
        return np.result_type(np.empty(0, dtype), scalar)
    if rank == 3:
        return np.dtype("complex128" if dtype == np.float64 else "complex64")
    return np.dtype({1: "int64", 2: "float32"}[rank])


def _array(dtype_name):
    return np.asarray([0, 1, 3], dtype=dtype_name)


def _check(got, want, what):
    assert got.dtype.name == want.dtype.name, what
    np.testing.assert_array_equal(to_numpy(got), want, err_msg=what)


@pytest.mark.parametrize("op", sorted(_OPS))
@pytest.mark.parametrize("dtype_name", _DTYPES)
def test_tensor_with_python_scalar_follows_pytorchs_rule_and_meta(op, dtype_name):
    a = _array(dtype_name)
    fn = getattr(md, op)
    for s in _SCALARS:
        if op != "eq" and dtype_name == "bool" and isinstance(s, bool):
            # bool - bool is an error in NumPy and PyTorch alike; bool + bool and bool * bool
            # are not scalar promotion (the Array API has no arithmetic on bools)
            continue
        want_dtype = expected_dtype(dtype_name, s)
        x = a.astype(want_dtype)
        for got, want, meta in (
                (fn(md.asarray(a), s), _OPS[op](x, s), fn(md.empty(3, dtype=md.asarray(a).dtype,
                                                                   device="meta"), s)),
                (fn(s, md.asarray(a)), _OPS[op](s, x), fn(s, md.empty(3, device="meta",
                                                                      dtype=md.asarray(a).dtype)))):
            if op == "eq":
                want_dtype = np.dtype(bool)
            assert got.dtype.name == want_dtype.name, f"{op}({dtype_name}, {s!r})"
            _check(got, want, f"{op}({dtype_name}, {s!r})")
            assert meta.dtype == got.dtype, f"{op}({dtype_name}, {s!r}): meta"


@pytest.mark.parametrize("dtype_name", _DTYPES)
def test_scalar_promotion_equals_pytorchs(dtype_name, torch):
    t = torch.tensor(_array(dtype_name))
    for s in _SCALARS:
        for op in ("add", "mul"):
            if dtype_name == "bool" and isinstance(s, bool):
                continue
            want = getattr(torch, op)(t, s)
            got = getattr(md, op)(md.asarray(_array(dtype_name)), s)
            assert str(want.dtype).replace("torch.", "") == got.dtype.name, (dtype_name, s)
        want = torch.where(t != 0, t, s)
        got = md.where(md.asarray(_array(dtype_name)) != 0, md.asarray(_array(dtype_name)), s)
        assert str(want.dtype).replace("torch.", "") == got.dtype.name, (dtype_name, s)
        assert str(torch.result_type(t, s)).replace("torch.", "") == \
            md.result_type(md.asarray(_array(dtype_name)), s).name


def test_an_integer_tensor_with_a_float_scalar_is_the_default_float_everywhere():
    x = md.asarray([1, 2, 3])
    for r in (md.add(x, 0.5), 0.5 + x, x * 1.5, md.maximum(x, 1.5), md.pow(x, 0.5),
              md.remainder(x, 1.5), md.floor_divide(x, 0.5), md.div(x, 0.5), x / 2,
              md.where(x > 1, x, 0.5)):
        assert r.dtype is md.float32
    np.testing.assert_array_equal(to_numpy(md.maximum(x, 1.5)), [1.5, 2.0, 3.0])
    assert (x < 1.5).tolist() == [True, False, False]
    assert (x + 1j).dtype is md.complex64
    assert md.div(md.ones(2), 1j).dtype is md.complex64
    assert (md.ones(2, dtype=md.float64) * 1j).dtype is md.complex128
    assert md.result_type(x, 0.5) is md.float32 and md.result_type(1, 0.5) is md.float32


def test_scalars_keep_the_tensor_dtype_of_their_kind():
    for dtype in (md.int8, md.int32, md.uint8):
        assert (md.asarray([1, 2], dtype=dtype) + 1).dtype is dtype
        assert (md.asarray([1, 2], dtype=dtype) + True).dtype is dtype
    assert (md.asarray([1.0], dtype=md.float32) * 2).dtype is md.float32
    assert (md.asarray([True]) | True).dtype is md.bool


def test_alpha_times_a_scalar_stays_weak():
    i32 = md.asarray([1, 2, 4], dtype=md.int32)
    r = md.sub(i32, 1, alpha=2)
    assert r.dtype is md.int32 and r.tolist() == [-1, 0, 2]
    f32 = md.ones(3)
    r = md.add(f32, 1, alpha=2)
    assert r.dtype is md.float32 and r.tolist() == [3.0, 3.0, 3.0]
    # alpha does not promote (PyTorch: "For integral input tensors, argument alpha must not
    # be a floating point number"); a float operand does
    with pytest.raises(TypeError, match="add: for int64 tensors alpha must not be a float"):
        md.add(md.asarray([1, 2]), 1, alpha=0.5)
    r = md.add(md.asarray([1, 2]), 1.0, alpha=0.5)
    assert r.dtype is md.float32 and r.tolist() == [1.5, 2.5]
    assert md.add(md.asarray([True]), md.asarray([True]), alpha=2).dtype is md.bool
    r = md.sub(1, f32, alpha=2)
    assert r.dtype is md.float32 and r.tolist() == [-1.0, -1.0, -1.0]
    f32.sub_(1, alpha=2)
    assert f32.dtype is md.float32 and f32.tolist() == [-1.0, -1.0, -1.0]


def test_where_of_two_scalars():
    c = md.asarray([True, False])
    # two scalars: the default dtype of the higher kind, as torch.where
    for a, b, dtype, values in ((1, 0, md.int64, [1, 0]), (1.0, 0, md.float32, [1.0, 0.0]),
                                (True, 0, md.int64, [1, 0]), (2, 0.5, md.float32, [2.0, 0.5]),
                                (True, False, md.bool, [True, False]),
                                (1j, 0, md.complex64, [1j, 0j])):
        r = md.where(c, a, b)
        assert r.dtype is dtype and r.tolist() == values, (a, b)
    r = md.where(c, md.asarray([1, 2], dtype=md.int32), 0.5)
    assert r.dtype is md.float32 and r.tolist() == [1.0, 0.5]


def test_inplace_and_out_with_a_promoting_scalar():
    x = md.asarray([1, 2])
    with pytest.raises(RuntimeError, match=r"aten::add_\.Scalar: result type float32 can't "
                                           r"be cast to the desired output type int64"):
        x.add_(0.5)
    with pytest.raises(RuntimeError, match="result type complex64 can't be cast"):
        md.ones(2).mul_(1j)
    assert x.tolist() == [1, 2] and x._version == 0
    out = md.empty(2, dtype=md.float64)  # out= casts the float32 result
    assert md.add(x, 0.5, out=out) is out and out.tolist() == [1.5, 2.5]
    b = md.asarray([True, False])
    with pytest.raises(RuntimeError, match="result type int64 can't be cast"):
        b.add_(1)


def test_order_comparisons_of_bools_with_scalars():
    b = md.asarray([False, True])
    assert md.lt(b, True).tolist() == [True, False]
    assert md.ge(True, b).tolist() == [True, True]
    assert (b > 0.5).tolist() == [False, True]
    assert md.le(b, md.asarray([1, 0])).tolist() == [True, False]


def test_promote_scalar_gives_pairs_array_api_strict_accepts():
    xp = pytest.importorskip("array_api_strict")
    i = xp.asarray([1, 2])
    b = xp.asarray([True, False])
    a, s = promote_scalar(xp, i, 0.5)
    assert a.dtype == xp.float32 and s == 0.5
    assert xp.add(a, s).dtype == xp.float32
    s, a = promote_scalar(xp, 1j, i)
    assert a.dtype == xp.complex64 and xp.multiply(s, a).dtype == xp.complex64
    a, s = promote_scalar(xp, i, True)
    assert a is i and s == 1 and type(s) is int
    a, s = promote_scalar(xp, b, True)
    assert a is b and s is True
    a, s = promote_scalar(xp, b, 2)
    assert a.dtype == xp.int64
    a, s = promote_scalar(xp, 1, 0.5)
    assert a.dtype == xp.float32 and a.ndim == 0 and s == 0.5
    a, s = promote_scalar(xp, 1, True)
    assert a.dtype == xp.int64 and s == 1
    assert promote_scalar(xp, i, b) == (i, b)  # two arrays: unchanged



def test_operands_given_by_keyword_are_promoted_too():
    # The frontend passes positional parameters positionally; a kernel called with them by
    # keyword still promotes (impls name their parameters freely: where's are x and y).
    xp = pytest.importorskip("array_api_strict")
    from mdtensor.ops._promotion import with_scalar_promotion

    def impl(xp, condition, x, y):
        return xp.where(condition, x, y)

    c, i = xp.asarray([True, False]), xp.asarray([1, 2])
    for schema in (md.ops.aten.where.ScalarOther.schema, md.ops.aten.where.Scalar.schema):
        where = with_scalar_promotion(impl, schema)
        x = i if "ScalarOther" in str(schema) else 1
        r = where(xp, c, x, other=0.5)
        assert r.dtype == xp.float32 and np.asarray(r).tolist() == [1.0, 0.5]
        r = where(xp, condition=c, self=x, other=0.5)
        assert r.dtype == xp.float32


def test_where_dtypes_match_numpy_and_meta_for_every_pairing():
    # The CPU where calls np.where itself; its result dtypes must be the Meta kernels'
    # (result_type: PyTorch's rule for scalars of a higher kind), for every pairing.
    import itertools

    c = md.asarray([True, False], device="cpu")
    values = [1, 1.0, True, 1j,
              md.asarray([1, 2], dtype=md.int8, device="cpu"),
              md.asarray([1.0, 2.0], dtype=md.float32, device="cpu"),
              md.asarray([1, 2], device="cpu"), md.asarray([True, False], device="cpu")]

    def on(v, device):
        return v.to(device) if isinstance(v, md.Tensor) else v

    for x, y in itertools.product(values, values):
        got = md.where(c, x, y)
        ref = np.where(c.numpy(), x.numpy() if isinstance(x, md.Tensor) else x,
                       y.numpy() if isinstance(y, md.Tensor) else y)
        meta = md.where(c.to("meta"), on(x, "meta"), on(y, "meta"))
        if isinstance(x, md.Tensor) and not isinstance(y, md.Tensor):
            want = expected_dtype(x.dtype.name, y)
        elif isinstance(y, md.Tensor) and not isinstance(x, md.Tensor):
            want = expected_dtype(y.dtype.name, x)
        elif isinstance(x, md.Tensor):
            want = ref.dtype
        else:  # two scalars: the default dtype of the higher kind
            want = {0: "bool", 1: "int64", 2: "float32", 3: "complex64"}[
                max(_SCALAR_RANK[type(x)], _SCALAR_RANK[type(y)])]
        assert got.dtype.name == np.dtype(want).name == meta.dtype.name, (x, y)
        np.testing.assert_array_equal(to_numpy(got), ref.astype(want))


# (call, result dtype, whether the Meta device has the op)
_FLOAT_FUNCTIONS = {
    "exp": (md.exp, md.float32, True), "sqrt": (md.sqrt, md.float32, True),
    "mean": (md.mean, md.float32, True), "mean-axis": (lambda x: md.mean(x, axis=0),
                                                       md.float32, True),
    "std": (md.std, md.float32, True), "var": (md.var, md.float32, True),
    "Tensor.std": (lambda x: x.std(), md.float32, True),
    "Tensor.var": (lambda x: x.var(1), md.float32, True),
    "softmax": (md.softmax, md.float32, True), "log_softmax": (md.log_softmax, md.float32, True),
    "logsumexp": (md.logsumexp, md.float32, True), "gelu": (md.gelu, md.float32, True),
    "silu": (md.silu, md.float32, True), "inv": (md.linalg.inv, md.float32, True),
    "det": (md.linalg.det, md.float32, True),
    "vector_norm": (md.linalg.vector_norm, md.float32, False),
    "svdvals": (md.linalg.svdvals, md.float32, False),
    "ihfft": (lambda x: md.fft.ihfft(x[0]), md.complex64, False),
    "rfft": (lambda x: md.fft.rfft(x[0]), md.complex64, False),
}


@pytest.mark.parametrize("name", list(_FLOAT_FUNCTIONS))
@pytest.mark.parametrize("dtype", ["int64", "int32", "bool"])
def test_integer_inputs_of_float_functions_give_float32(name, dtype):
    # issue 25 item 5: one rule (Note [Integer inputs of float functions]); mean, std, var,
    # softmax, log_softmax gave float64
    call, want, on_meta = _FLOAT_FUNCTIONS[name]
    x = md.asarray(np.array([[2, 0], [1, 3]]).astype(dtype))
    assert call(x).dtype is want
    if on_meta:
        assert call(md.empty((2, 2), dtype=x.dtype, device="meta")).dtype is want
