"""The OpInfo sweep: every catalogue op against its NumPy reference.

For each declaration in ``mdtensor.ops.CATALOGUE`` with OpInfo data, over its dtypes and
sample inputs: the functional op matches the reference; the in-place variant writes into
``self``'s buffer and returns ``self``; the ``out=`` variant writes into and returns ``out``;
the Meta kernel infers the real output's shape and dtype; error inputs raise as declared;
and differentiable ops pass gradcheck in float64.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import (
    NO_EINSUM,
    skip_on,
    to_numpy,
    writes_in_place,
)
from mdtensor.ops import CATALOGUE
from mdtensor.ops._decl import SparseInput

import mdtensor as md

RNG_SEED = 1234

# Known bugs and limits of one backend, by op: {op name: marks} per test.

_NO_SPARSE = skip_on("dask", "loopback", "cuda",
                     reason="sparse layouts have kernels on the CPU and JAX only")
MARKS = {
    "test_matches_reference": {
        "einsum": skip_on("loopback", reason=NO_EINSUM),
        "to_sparse": _NO_SPARSE, "to_sparse_csr": _NO_SPARSE, "to_dense": _NO_SPARSE,
    },
}


def _decls(need_ref=True, test=None):
    marks = MARKS.get(test, {})
    out = []
    for key, decl in sorted(CATALOGUE.items()):
        info = decl.info
        if info is None or info.samples is None or not decl.functional:
            continue
        if need_ref and info.ref is None:
            continue
        out.append(pytest.param(decl, id=key.split("::")[-1],
                                marks=marks.get(decl.name, ())))
    return out


def _to_md(v, device=None):
    if isinstance(v, SparseInput):  # a sparse tensor (the reference gets the array)
        return md.asarray(np.asarray(v).copy(), device=device).to_sparse(
            layout=getattr(md, v.layout))
    if isinstance(v, np.ndarray):
        return md.asarray(v.copy(), device=device)
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
        return type(v)(md.asarray(x.copy(), device=device) for x in v)
    return v


def _samples(decl, dtype):
    rng = np.random.default_rng(RNG_SEED)
    return list(decl.info.samples(dtype, rng))


def _call(decl, sample, device=None, **extra):
    packet = decl.functional[0].overloadpacket
    args = tuple(_to_md(a, device) for a in sample.args)
    kwargs = {k: _to_md(v, device) for k, v in sample.kwargs.items()}
    kwargs.update(extra)
    if device is not None and "factory" in decl.functional[0].tags:
        kwargs.setdefault("device", device)  # a factory has no tensor to take it from
    return packet(*args, **kwargs)


def _tolerances(decl, dtype):
    info = decl.info
    if dtype.kind in "fc":
        rtol = info.rtol if info.rtol is not None else (1e-4 if dtype.itemsize <= 8 and
                                                        dtype.kind == "f" and
                                                        dtype.itemsize == 4 else 1e-7)
        if dtype.kind == "c" and dtype.itemsize == 8:
            rtol = info.rtol if info.rtol is not None else 1e-4
        atol = info.atol if info.atol is not None else rtol
        return rtol, atol
    return 0, 0


def _as_numpy(x):
    if isinstance(x, md.Tensor) and x.layout is not md.strided:  # sparse: its dense copy
        x = x.to_dense()
    if isinstance(x, md.Tensor):
        return np.asarray(x.numpy(force=True) if x.requires_grad else to_numpy(x))
    return np.asarray(x)


def _compare(decl, dtype, got, expected, what):
    if isinstance(expected, (tuple, list)) and not isinstance(got, md.Tensor):
        assert len(got) == len(expected), f"{what}: {len(got)} outputs, expected {len(expected)}"
        for g, e in zip(got, expected):
            _compare(decl, dtype, g, e, what)
        return
    g = _as_numpy(got)
    e = np.asarray(expected)
    assert g.shape == e.shape, f"{what}: shape {g.shape}, reference {e.shape}"
    rtol, atol = _tolerances(decl, dtype)
    if g.dtype.kind in "fc" or e.dtype.kind in "fc":
        np.testing.assert_allclose(g, e.astype(g.dtype) if e.dtype != g.dtype and
                                   g.dtype.kind in "fc" else e,
                                   rtol=max(rtol, 1e-6 if g.dtype == np.float32 else rtol),
                                   atol=max(atol, 1e-6 if g.dtype == np.float32 else atol),
                                   equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(g, e, err_msg=what)


@pytest.mark.parametrize("decl", _decls(test="test_matches_reference"))
def test_matches_reference(decl):
    for dtype in decl.info.dtypes:
        for sample in _samples(decl, dtype):
            what = f"{decl.name}[{dtype.name}] sample {sample.name or sample.args}"
            with np.errstate(all="ignore"):
                expected = decl.info.ref(*sample.args, **sample.kwargs)
            got = _call(decl, sample)
            _compare(decl, dtype, got, expected, what)


@pytest.mark.parametrize("decl", [p for p in _decls(test="test_inplace_variant")
                                  if p.values[0].inplace])
def test_inplace_variant(decl):
    inplace = decl.inplace[0].overloadpacket
    checked = 0
    for dtype in decl.info.dtypes:
        for sample in _samples(decl, dtype):
            if not sample.args or not isinstance(sample.args[0], np.ndarray):
                continue
            with np.errstate(all="ignore"):
                expected = np.asarray(decl.info.ref(*sample.args, **sample.kwargs))
            first = sample.args[0]
            if expected.shape != first.shape or not np.can_cast(expected.dtype, first.dtype,
                                                                "same_kind"):
                continue
            args = [_to_md(a) for a in sample.args]
            kwargs = {k: _to_md(v) for k, v in sample.kwargs.items()}
            self_t = args[0]
            buffer = self_t._data
            version = self_t._version
            out = inplace(*args, **kwargs)
            what = f"{decl.name}_ [{dtype.name}] sample {sample.name}"
            assert out is self_t, f"{what}: in-place op must return self"
            if writes_in_place(self_t):  # JAX: Functionalize swaps in a new array
                assert self_t._data is buffer, f"{what}: in-place op replaced the buffer"
            assert self_t._version == version + 1, f"{what}: version counter not bumped"
            _compare(decl, dtype, self_t, expected.astype(first.dtype), what)
            checked += 1
    if not checked:
        pytest.skip("no sample keeps self's shape and dtype")


@pytest.mark.parametrize("decl", [p for p in _decls(test="test_out_variant")
                                  if p.values[0].out])
def test_out_variant(decl):
    out_packet = decl.functional[0].overloadpacket
    for dtype in decl.info.dtypes[:3]:
        for sample in _samples(decl, dtype):
            with np.errstate(all="ignore"):
                expected = np.asarray(decl.info.ref(*sample.args, **sample.kwargs))
            real = _call(decl, sample)
            if not isinstance(real, md.Tensor):
                continue
            out = md.empty(real.shape, dtype=real.dtype)
            args = tuple(_to_md(a) for a in sample.args)
            kwargs = {k: _to_md(v) for k, v in sample.kwargs.items()}
            got = out_packet(*args, out=out, **kwargs)
            what = f"{decl.name}(out=) [{dtype.name}] sample {sample.name}"
            assert got is out, f"{what}: out= variant must return out"
            _compare(decl, dtype, out, expected, what)


def test_out_resize_warns_and_empty_out_resizes_silently():
    a = md.asarray([1.0, 2.0, 3.0])
    out = md.empty((2,))
    with pytest.warns(UserWarning, match=r"aten::add\.out: An output with one or more "
                                         r"elements was resized since it had shape \[2\], "
                                         r"which does not match the required output shape "
                                         r"\[3\]") as record:
        md.add(a, a, out=out)
    assert out.shape == (3,)
    np.testing.assert_array_equal(to_numpy(out), [2.0, 4.0, 6.0])
    assert record[0].filename == __file__  # the caller's line, not a layer's

    def f(x):
        o = md.empty((2,))
        md.add(x, x, out=o)
        return o

    with pytest.warns(UserWarning, match="was resized") as record:
        got = md.func.functionalize(f)(a)
    assert record[0].filename == __file__
    np.testing.assert_array_equal(to_numpy(got), [2.0, 4.0, 6.0])
    empty = md.empty((0,))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        md.add(a, a, out=empty)
    np.testing.assert_array_equal(to_numpy(empty), [2.0, 4.0, 6.0])


def test_out_dtype_that_cannot_hold_result_raises():
    a = md.asarray([1.5, 2.5])
    out = md.zeros((2,), dtype=md.int64)
    before = to_numpy(out).copy()
    with pytest.raises(RuntimeError, match="can't be cast"):
        md.add(a, a, out=out)
    np.testing.assert_array_equal(to_numpy(out), before)


def test_inplace_shape_mismatch_raises_and_leaves_self():
    a = md.asarray([1.0, 2.0, 3.0])
    b = md.ones((2, 3))
    with pytest.raises(RuntimeError, match=r"doesn't match the broadcast shape \[2, 3\]"):
        a.add_(b)
    np.testing.assert_array_equal(to_numpy(a), [1.0, 2.0, 3.0])
    assert a._version == 0


@pytest.mark.parametrize("decl", _decls(need_ref=False))
def test_meta_matches_real(decl):
    op = decl.functional[0]
    if decl.meta is None and not op.has_kernel_for(md.DispatchKey.Meta):
        pytest.skip("no meta function")
    for dtype in decl.info.dtypes[:4]:
        for sample in _samples(decl, dtype):
            try:
                real = _call(decl, sample)
            except Exception:  # noqa: BLE001 - error samples are tested elsewhere
                continue
            if "dynamic_output_shape" in op.tags:
                # Data-dependent output shapes: meta either infers it or names the op.
                try:
                    fake = _call(decl, sample, device="meta")
                except NotImplementedError as e:
                    assert decl.name in str(e)
                    continue
            else:
                fake = _call(decl, sample, device="meta")
            reals = real if isinstance(real, (tuple, list)) else (real,)
            fakes = fake if isinstance(fake, (tuple, list)) else (fake,)
            for r, f in zip(reals, fakes):
                if not isinstance(r, md.Tensor):
                    continue
                what = f"{decl.name}[{dtype.name}] sample {sample.name}"
                assert f.device.type == "meta", what
                assert f.shape == r.shape, f"{what}: meta shape {f.shape}, real {r.shape}"
                assert f.dtype is r.dtype, f"{what}: meta dtype {f.dtype}, real {r.dtype}"


@pytest.mark.parametrize("decl", [p for p in _decls(need_ref=False, test="test_error_inputs")
                                  if p.values[0].info.errors is not None])
def test_error_inputs(decl):
    for err in decl.info.errors():
        with pytest.raises(err.error, match=err.match):
            _call(decl, err.sample)


def _differentiable(decl):
    from mdtensor.ops.derivatives import NONDIFFERENTIABLE

    info = decl.info
    return (info.differentiable and decl.name not in NONDIFFERENTIABLE
            and any(d is md.float64 for d in info.dtypes))


@pytest.mark.parametrize("order", ["grad", "gradgrad"])
@pytest.mark.parametrize("decl", [p for p in _decls(need_ref=False)
                                  if _differentiable(p.values[0])])
def test_gradcheck(decl, order):
    """First derivatives on three samples; second derivatives (create_graph=True through
    every formula) on two."""
    testing = pytest.importorskip("mdtensor.testing")
    check = testing.gradcheck if order == "grad" else testing.gradgradcheck
    packet = decl.functional[0].overloadpacket
    n = 0
    for sample in _samples(decl, md.float64)[:3 if order == "grad" else 2]:
        arrays = [i for i, a in enumerate(sample.args)
                  if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        if not arrays or any(sample.args[i].size == 0 for i in arrays):
            continue
        inputs = tuple(md.asarray(sample.args[i].copy(), requires_grad=True) for i in arrays)

        def fn(*ts, _sample=sample, _arrays=arrays):
            args = [_to_md(a) for a in _sample.args]
            for i, t in zip(_arrays, ts):
                args[i] = t
            out = packet(*args, **_sample.kwargs)
            return out[0] if isinstance(out, (tuple, list)) else out

        assert check(fn, inputs), f"{decl.name}: {order}check failed"
        n += 1
    if not n:
        pytest.skip("no non-empty float64 sample")


def test_cpu_ufunc_kernels_compute_what_the_generic_kernels_compute():
    """Note [NumPy fast impls]: a direct CPU ufunc kernel is only correct where
    array-api-compat's NumPy namespace (the generic kernels' ``xp``) hands out that very
    ufunc; ``COMPAT_WRAPPED`` must name every other one, and a direct kernel of one of
    those serves only the dtype kinds where the wrapper computes what the ufunc does
    (``COMPAT_SAME_KINDS``)."""
    import array_api_compat.numpy as compat
    from mdtensor.ops.elementwise import COMPAT_SAME_KINDS, COMPAT_WRAPPED

    from mdtensor.dispatch.keys import DispatchKey

    direct = set()
    for decl in CATALOGUE.values():
        for op in decl.functional:
            stack = op.kernels_for(DispatchKey.CPU)
            if stack and stack[-1].fn.__name__.startswith("ufunc["):
                direct.add(decl.name)
    assert {"add", "mul", "exp", "div"} <= direct
    for name in dir(compat):
        fn = getattr(np, name, None)
        if isinstance(fn, np.ufunc) and getattr(compat, name) is not fn:
            assert name in COMPAT_WRAPPED | {"matmul"}, name
    assert not (COMPAT_WRAPPED - set(COMPAT_SAME_KINDS)) & direct
    values = {"i": np.array([-3, 0, 2], np.int16), "u": np.array([0, 7], np.uint8),
              "f": np.array([-2.5, -0.0, 0.5, 1.5, np.nan, -np.inf], np.float32),
              "b": np.array([True, False]), "c": np.array([1.5 - 2.5j, 0j], np.complex64)}
    for name, kinds in COMPAT_SAME_KINDS.items():
        for kind in kinds:
            want, got = getattr(compat, name)(values[kind]), getattr(np, name)(values[kind])
            assert want.dtype == got.dtype and np.array_equal(want, got, equal_nan=True), \
                (name, kind)


def test_cpu_matmul_kernel_refuses_bools():
    # Note [Accepted dtypes] in ops/_accepted.py: PyTorch's matmul has no bool kernel
    t = md.asarray([True, False], device="cpu")
    with pytest.raises(TypeError, match="matmul: expected numeric \\(not bool\\) tensors"):
        t @ t


@pytest.mark.parametrize("dtype", ["int8", "int64", "float32", "float64", "complex64"])
def test_cpu_matmul_kernel_computes_what_np_matmul_computes(dtype):
    # Note [Matrix products through np.dot]: 1-D and 2-D operands take np.dot, the rest
    # np.matmul, and so do large products (Note [Large products through np.matmul]);
    # results, dtypes and errors are np.matmul's.
    rng = np.random.default_rng(0)
    shapes = [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)), ((0, 4), (4, 3)),
              ((2, 3, 4), (4, 5)), ((4, 3), (4, 5)), ((64, 7), (7, 64)), ((7, 64), (7, 80))]
    for sa, sb in shapes:
        a = (rng.standard_normal(sa) * 3).astype(dtype)
        b = (rng.standard_normal(sb) * 3).astype(dtype)
        if sa in ((4, 3), (7, 64)):
            a = a.T  # a transposed view
        got = md.asarray(a, device="cpu") @ md.asarray(b, device="cpu")
        want = np.matmul(a, b)
        assert to_numpy(got).dtype == want.dtype and got.shape == want.shape, (sa, sb)
        np.testing.assert_allclose(to_numpy(got), want, rtol=1e-5, atol=1e-5)
    x = md.asarray(np.ones((3, 4), dtype), device="cpu")
    with pytest.raises(ValueError, match=r"matmul: shapes \(3, 4\) and \(5, 2\) are not aligned"):
        x @ md.asarray(np.ones((5, 2), dtype), device="cpu")
    with pytest.raises(ValueError, match=r"matmul: both arguments must be at least 1-D"):
        x @ md.asarray(np.ones((), dtype), device="cpu")


@pytest.mark.parametrize("m", [8, 80])
def test_cpu_matmul_backward_kernel_small_and_large(m):
    # both paths of the CPU matmul_backward kernel (np.dot below 4096 output elements,
    # np.matmul from there): the weights' gradient is x.T @ g, the input's g @ w.T
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, 60)).astype(np.float32)
    w = rng.standard_normal((60, 70)).astype(np.float32)
    g = rng.standard_normal((m, 70)).astype(np.float32)
    xt, wt = md.asarray(x, requires_grad=True), md.asarray(w, requires_grad=True)
    (xt @ wt).backward(md.asarray(g))
    np.testing.assert_allclose(to_numpy(wt.grad), x.T @ g, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(to_numpy(xt.grad), g @ w.T, rtol=1e-5, atol=1e-4)
    assert to_numpy(wt.grad).flags.writeable


@pytest.mark.parametrize("name", ["div", "exp", "sub"])
def test_cpu_ufunc_kernels_fall_back_for_integer_inputs_and_alpha(name):
    x = md.asarray([1, 2, 4])
    if name == "div":
        assert md.div(x, x).dtype == md.float32
        assert md.div(x, 2).dtype == md.float32
        assert md.div(2, x).dtype == md.float32
    elif name == "exp":
        assert md.exp(x).dtype == md.float32
    else:
        assert md.sub(x, x, alpha=2).tolist() == [-1, -2, -4]
        assert md.sub(x, 1, 2).tolist() == [-1, 0, 2]


@pytest.mark.parametrize("call", ["functional", "inplace", "out"])
def test_broadcast_errors_name_the_op_and_leave_tensors_alone(call):
    a = md.ones((4, 8))
    b = md.ones((3, 8))
    before = a._version
    with pytest.raises(ValueError, match=r"aten::add(_|\.out)?\.?\w*: The size of tensor a "
                                         r"\(4\) must match the size of tensor b \(3\) at "
                                         r"non-singleton dimension 0"):
        if call == "functional":
            a + b
        elif call == "inplace":
            a.add_(b)
        else:
            md.add(a, b, out=md.zeros((4, 8)))
    assert a._version == before
    np.testing.assert_array_equal(to_numpy(a), np.ones((4, 8)))


_BROADCAST = (r"The size of tensor a \({}\) must match the size of tensor b \({}\) at "
              r"non-singleton dimension {}$")


@pytest.mark.parametrize("call, op", [
    (lambda a, b: md.mul(a, b), "mul"), (lambda a, b: a < b, "lt"),
    (lambda a, b: md.logical_and(a, b), "logical_and"), (lambda a, b: md.div(a, b), "div"),
    (lambda a, b: md.sub(a, b, alpha=2), "sub"), (lambda a, b: md.fmod(a, b), "fmod"),
    (lambda a, b: md.floor_divide(a, b), "floor_divide"), (lambda a, b: a.mul_(b), "mul"),
    (lambda a, b: a.pow_(b), "pow"), (lambda a, b: md.atan2(a, b, out=md.zeros((4, 8))),
                                      "atan2"),
    (lambda a, b: md.where(md.ones((4, 8)) > 0, a, b), "where"),
    (lambda a, b: md.where(md.ones((4, 8)) > 0, 1.0, b), "where"),
])
def test_broadcast_errors_read_as_pytorch_on_every_backend(call, op):
    a, b = md.ones((4, 8)), md.ones((3, 8))
    with pytest.raises(ValueError, match=rf"^aten::{op}_?\.?\w*: " + _BROADCAST.format(4, 3, 0)):
        call(a, b)
    assert a.tolist() == md.ones((4, 8)).tolist() and a._version == 0


def test_broadcast_error_names_the_first_mismatch_of_the_shapes_broadcast_so_far():
    from mdtensor.ops._errors import broadcast_error

    assert broadcast_error("op", [(4, 1), (1, 8), (4, 8)]) is None
    err = broadcast_error("op", [(4, 1), (1, 8), (3, 8)])
    assert isinstance(err, ValueError)
    assert str(err) == ("op: The size of tensor a (4) must match the size of tensor b (3) "
                        "at non-singleton dimension 0")
    err = broadcast_error("op", [(2, 3), (5, 1, 4)])
    assert str(err).endswith("tensor a (3) must match the size of tensor b (4) at "
                             "non-singleton dimension 2")
    # where: the condition first, then self and other
    c = md.ones((2, 1, 3)) > 0
    with pytest.raises(ValueError, match=r"^aten::where\.self: " + _BROADCAST.format(3, 2, 2)):
        md.where(c, md.ones((5, 3)), md.ones(2))


def test_errors_that_are_not_broadcasting_keep_their_words():
    # matmul's operands do not broadcast as a whole: its error is the backend's
    with pytest.raises((ValueError, TypeError)) as info:
        md.matmul(md.ones((4, 8)), md.ones((3, 8)))
    assert "The size of tensor a" not in str(info.value)


def test_inplace_ufunc_kernel_writes_into_the_buffer_and_refuses_what_torch_refuses():
    a = md.ones(8)
    buf = a._data
    a.mul_(md.full((8,), 3.0))
    a.add_(1)
    assert a.tolist() == [4.0] * 8
    if writes_in_place(a):  # JAX: Functionalize swaps in a new array
        assert a._data is buf
    i = md.asarray([1, 2, 3])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        i.add_(1.5)
    assert i.tolist() == [1, 2, 3]
    v = md.asarray([1.0, 2.0])
    with pytest.raises(RuntimeError, match=r"output with shape \[\] doesn't match"):
        md.asarray(1.0).add_(v)
    # a generalized ufunc (matmul) broadcasts into out=; the in-place op must not
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        v.matmul_(v)
    assert v.tolist() == [1.0, 2.0]


def _reads_of(decl):
    from mdtensor.layers.autograd.formulas import formula_for as _formula_for

    formula = _formula_for(decl.functional[0])
    return getattr(formula, "reads", None)


@pytest.mark.parametrize("decl", [p for p in _decls(need_ref=False)
                                  if _differentiable(p.values[0])
                                  and _reads_of(p.values[0]) is not None])
def test_inputs_a_formula_does_not_read_may_change_before_backward(decl):
    """``derivatives.reads`` is honest: changing in place every Tensor input the formula
    says it does not read (Note [Saved inputs]) leaves the gradients exactly as they were,
    and backward does not complain."""
    packet = decl.functional[0].overloadpacket
    reads = _reads_of(decl)
    n = 0
    for sample in _samples(decl, md.float64)[:3]:
        positions = [i for i, a in enumerate(sample.args)
                     if isinstance(a, np.ndarray) and a.dtype.kind == "f" and a.size]
        if not positions:
            continue
        leaves = {i: md.asarray(sample.args[i].copy(), requires_grad=True) for i in positions}

        def run(change, sample=sample, leaves=leaves, positions=positions):
            for t in leaves.values():
                t.grad = None
            args = [_to_md(a) for a in sample.args]
            for i, t in leaves.items():
                args[i] = t * 1  # a non-leaf, which may be changed in place
            out = packet(*args, **sample.kwargs)
            out = out[0] if isinstance(out, (tuple, list)) else out
            if change:
                for i in positions:
                    if i not in reads:
                        args[i].add_(1.5)
            out.sum().backward()
            return [to_numpy(t.grad) if t.grad is not None else None
                    for t in leaves.values()]

        for before, after in zip(run(False), run(True)):
            if before is None:
                assert after is None
            else:
                np.testing.assert_array_equal(after, before)
        n += 1
    if not n:
        pytest.skip("no non-empty float64 sample")
