"""Shape manipulation: views share memory and version counters, copies do not; varargs
methods; reshape's view-or-copy (Note [reshape: a view when possible]); T and mT."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import shares_memory, shares_views, skip_without_views, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md


def _t(a):
    return md.asarray(np.asarray(a).copy())


def _grid(shape=(2, 3, 4)):
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)


# (name, fn on a (2, 3, 4) tensor, NumPy equivalent)
VIEWS = [
    ("permute", lambda x: x.permute(2, 0, 1), lambda a: np.transpose(a, (2, 0, 1))),
    ("permute_dims", lambda x: md.permute_dims(x, (1, 0, 2)), lambda a: a.transpose(1, 0, 2)),
    ("transpose", lambda x: x.transpose(0, 2), lambda a: np.swapaxes(a, 0, 2)),
    ("swapaxes", lambda x: x.swapaxes(-1, 0), lambda a: np.swapaxes(a, -1, 0)),
    ("moveaxis", lambda x: md.moveaxis(x, 0, -1), lambda a: np.moveaxis(a, 0, -1)),
    ("expand", lambda x: x[:, :1].expand(2, 5, 4), lambda a: np.broadcast_to(a[:, :1],
                                                                            (2, 5, 4))),
    ("broadcast_to", lambda x: md.broadcast_to(x, (3, 2, 3, 4)),
     lambda a: np.broadcast_to(a, (3, 2, 3, 4))),
    ("unsqueeze", lambda x: x.unsqueeze(1), lambda a: a[:, None]),
    ("expand_dims", lambda x: md.expand_dims(x, axis=-1), lambda a: a[..., None]),
    ("squeeze", lambda x: md.squeeze(x[:, :1], axis=1), lambda a: a[:, 0]),
    ("narrow", lambda x: x.narrow(2, 1, 2), lambda a: a[:, :, 1:3]),
    ("view", lambda x: x.view(6, 4), lambda a: a.reshape(6, 4)),
    ("reshape", lambda x: x.reshape(4, 6), lambda a: a.reshape(4, 6)),
    ("flatten", lambda x: x.flatten(1), lambda a: a.reshape(2, 12)),
    ("t", lambda x: x[0].t(), lambda a: a[0].T),
    ("matrix_transpose", lambda x: md.matrix_transpose(x), lambda a: np.swapaxes(a, -1, -2)),
    ("mT", lambda x: x.mT, lambda a: np.swapaxes(a, -1, -2)),
    ("T", lambda x: x[1].T, lambda a: a[1].T),
]


@pytest.mark.parametrize("name,fn,ref", VIEWS, ids=[v[0] for v in VIEWS])
def test_view_ops_match_numpy_and_share_memory(name, fn, ref):
    a = _grid()
    x = _t(a)
    v = fn(x)
    np.testing.assert_array_equal(to_numpy(v), ref(a))
    if shares_views(x):  # JAX: a view is a copy kept in sync by Functionalize
        assert shares_memory(v, x), name
    assert v._version == x._version == 0


@pytest.mark.parametrize("name,fn,ref", [v for v in VIEWS if v[0] not in
                                         ("expand", "broadcast_to")],
                         ids=[v[0] for v in VIEWS if v[0] not in ("expand", "broadcast_to")])
def test_mutation_through_view_shows_in_base(name, fn, ref):
    x = _t(_grid())
    v = fn(x)
    v.mul_(-1.0)
    assert x._version == v._version == 1
    want = _grid()
    ref(want)[...] *= -1.0  # NumPy views too
    np.testing.assert_array_equal(to_numpy(x), want)
    x.add_(1.0)  # and the base's mutation shows in the view, with the shared counter
    assert v._version == 2
    np.testing.assert_array_equal(to_numpy(v), ref(want + 1.0))


@pytest.mark.parametrize("fn,n", [
    (lambda x: x.unbind(1), 3), (lambda x: md.unstack(x, axis=2), 4),
    (lambda x: x.split(2, dim=2), 2), (lambda x: x.split([1, 2], dim=1), 2),
    (lambda x: x.chunk(3, dim=1), 3)])
def test_list_views_share_memory(fn, n):
    x = _t(_grid())
    parts = fn(x)
    assert isinstance(parts, tuple) and len(parts) == n
    for p in parts:
        assert not shares_views(x) or shares_memory(p, x)
    parts[-1].mul_(0.0)
    assert x._version == 1 and all(p._version == 1 for p in parts)
    assert np.all(to_numpy(parts[-1]) == 0)


def test_split_chunk_unbind_values():
    a = _grid((5, 2))
    x = _t(a)
    for got, want in zip(x.split(2), np.split(a, [2, 4])):
        np.testing.assert_array_equal(to_numpy(got), want)
    for got, want in zip(md.chunk(x, 2), np.array_split(a, 2)):
        np.testing.assert_array_equal(to_numpy(got), want)
    with pytest.raises(ValueError, match="split: split sizes"):
        x.split([1, 1])
    with pytest.raises(ValueError, match="chunk: chunks must be positive"):
        x.chunk(0)


@pytest.mark.parametrize("fn", [lambda x: md.unbind(x, 1), lambda x: md.split(x, 2, axis=2),
                                lambda x: x.chunk(3, 0)])
def test_several_views_replay_from_their_base(fn):
    # each of several views records how to make it again from the base (its index among
    # the op's results): what functionalize and CopySlices replay
    x = _t(_grid())
    for p in fn(x):
        assert p._base is x
        np.testing.assert_array_equal(to_numpy(p._view.replay(x)), to_numpy(p))


def test_contiguous_returns_a_row_major_tensor_itself():
    # PyTorch: x.contiguous() is x when x already is row-major; else a row-major copy
    x = _t(_grid((2, 3)))
    assert x.contiguous() is x
    assert md.contiguous(x)._base is x  # the op: a view
    y = x.mT.contiguous()
    assert y is not x and y.is_contiguous()
    np.testing.assert_array_equal(to_numpy(y), _grid((2, 3)).T)


# ---------------------------------------------------------------------------------------
# reshape: a view when possible, else a copy


@skip_without_views("a view of any shape is possible there, so reshape never copies "
                    "(Note [reshape: a view when possible], ops/manipulation.py)")
def test_reshape_views_when_possible_and_copies_otherwise():
    x = _t(_grid((2, 3)))
    v = x.reshape(3, 2)
    assert v._base is x and shares_memory(v, x)
    c = x.t().reshape(6)  # not expressible as a view of the transposed layout
    np.testing.assert_array_equal(to_numpy(c), _grid((2, 3)).T.reshape(6))
    assert not shares_memory(c, x)
    assert c._base is not x
    c.mul_(0.0)
    assert x._version == 0 and np.all(to_numpy(x) == _grid((2, 3)))
    f = x.t().flatten()
    assert not shares_memory(f, x)


@skip_without_views("a view of any shape is possible there, so ravel never copies")
def test_ravel_and_T_view_their_input_through_the_inline_dispatch():
    # Note [Views dispatched inline] in ops/manipulation.py: the same aliasing as the ops
    x = _t(_grid((2, 3)))
    for v in (md.ravel(x), x.T, x.mT, md.reshape(x, (3, 2))):
        assert v._base is x and shares_memory(v, x)
    r = md.ravel(x.T)  # not a view of the transposed layout: a view of a private copy
    np.testing.assert_array_equal(to_numpy(r), _grid((2, 3)).T.ravel())
    assert r._base is not x and not shares_memory(r, x)
    x.T.mul_(2.0)  # in place through the view: the base's version counter moves
    assert x._version == 1 and to_numpy(x).tolist() == (2 * _grid((2, 3))).tolist()


def test_T_of_a_subclass_reaches_its_dispatch():
    seen = []

    class Logged(md.Tensor):
        @staticmethod
        def __new__(cls, data):
            return md.Tensor._make_subclass(cls, data)

        @classmethod
        def __md_dispatch__(cls, func, types, args=(), kwargs=None):
            seen.append(func.name)
            args = tuple(a.data if isinstance(a, Logged) else a for a in args)
            return func(*args, **(kwargs or {}))

    s = Logged(_t(_grid((2, 3))))
    np.testing.assert_array_equal(to_numpy(s.T), _grid((2, 3)).T)
    np.testing.assert_array_equal(to_numpy(s.mT), _grid((2, 3)).T)
    np.testing.assert_array_equal(to_numpy(md.ravel(s)), _grid((2, 3)).ravel())
    # ravel is CompositeImplicitAutograd: the subclass sees the view it dispatches inline
    assert seen == ["aten::matrix_transpose", "aten::matrix_transpose", "aten::view"]


def test_squeeze_without_axis_and_expand_to_leading_dimensions():
    for shape in [(2, 1, 3, 1), (1, 1), (1,), (), (2, 3)]:
        x = _t(np.arange(float(np.prod(shape))).reshape(shape))
        got = md.squeeze(x)
        assert got.shape == tuple(d for d in shape if d != 1)
        assert got._base is x
        np.testing.assert_array_equal(to_numpy(got), np.squeeze(to_numpy(x)))
    x = _t(_grid((2, 3)))
    e = md.expand(x, (4, 2, 3))
    np.testing.assert_array_equal(to_numpy(e), np.broadcast_to(_grid((2, 3)), (4, 2, 3)))
    assert e._base is x
    with pytest.raises(ValueError, match="isn't allowed in a leading, non-existing dimension"):
        md.expand(x, (-1, 2, 3))
    with pytest.raises(ValueError, match="broadcast_to: a tensor of shape"):
        md.broadcast_to(x, (-4, 2, 3))
    assert x._version == 0


def test_reshape_copy_argument_and_errors():
    x = _t(_grid((2, 3)))
    c = md.reshape(x, (6,), copy=True)
    assert not shares_memory(c, x)
    c.mul_(0.0)
    assert x._version == 0 and to_numpy(x).tolist() == _grid((2, 3)).tolist()
    if shares_views(x):  # memory layout; JAX has none (any view is possible there)
        with pytest.raises(ValueError, match=r"reshape: cannot reshape .* without a copy"):
            md.reshape(x.t(), (6,), copy=False)
        with pytest.raises(ValueError, match="view: the tensor's memory layout"):
            x.t().view(6)
    with pytest.raises(ValueError, match="reshape: shape .* is invalid for input of size 6"):
        x.reshape(4)
    with pytest.raises(ValueError, match="only one dimension can be inferred"):
        x.reshape(-1, -1)
    assert x._version == 0


def test_reshape_gradient_through_copy_path():
    w = _t(_grid((2, 3)))
    w.requires_grad_(True)
    (w.t().reshape(6) * md.asarray(np.arange(6.0))).sum().backward()
    np.testing.assert_array_equal(to_numpy(w.grad), np.arange(6.0).reshape(3, 2).T)


@settings(max_examples=30, deadline=None)
@given(st.permutations([0, 1, 2]), st.sampled_from([(24,), (4, 6), (2, -1), (3, 2, 2, 2)]))
def test_permute_then_reshape_matches_numpy(perm, shape):
    a = _grid()
    got = _t(a).permute(*perm).reshape(*shape)
    np.testing.assert_array_equal(to_numpy(got), a.transpose(perm).reshape(shape))


# ---------------------------------------------------------------------------------------
# Varargs methods, T/mT


def test_varargs_methods_accept_both_spellings():
    a = _grid((2, 3))
    x = _t(a)
    np.testing.assert_array_equal(to_numpy(x.permute(1, 0)), to_numpy(x.permute((1, 0))))
    np.testing.assert_array_equal(to_numpy(x.reshape(3, 2)), to_numpy(x.reshape((3, 2))))
    np.testing.assert_array_equal(to_numpy(x[:1].expand(4, 3)), np.broadcast_to(a[:1], (4, 3)))
    np.testing.assert_array_equal(to_numpy(x.repeat(2, 1)), np.tile(a, (2, 1)))
    np.testing.assert_array_equal(to_numpy(x.repeat((1, 2))), np.tile(a, (1, 2)))


def test_T_is_2d_only_and_mT_batches():
    x = _t(_grid())
    with pytest.raises(ValueError, match=r"Tensor.T: expected a 2-D tensor, got 3-D"):
        _ = x.T
    with pytest.raises(ValueError, match="matrix_transpose: expected a tensor with at least 2"):
        _ = x[0, 0].mT
    assert x.mT.shape == (2, 4, 3)


# ---------------------------------------------------------------------------------------
# Copies


COPIES = [
    ("concat", lambda ts: md.concat(ts, axis=1), lambda as_: np.concatenate(as_, axis=1)),
    ("cat-dim", lambda ts: md.cat(ts, dim=0), lambda as_: np.concatenate(as_, axis=0)),
    ("cat-None", lambda ts: md.concat(ts, axis=None), lambda as_: np.concatenate(as_, None)),
    ("stack", lambda ts: md.stack(ts, axis=-1), lambda as_: np.stack(as_, axis=-1)),
    ("stack-0", lambda ts: md.stack(ts, axis=0), lambda as_: np.stack(as_, axis=0)),
    ("flip", lambda ts: md.flip(ts[0], axis=1), lambda as_: np.flip(as_[0], 1)),
    ("flip-all", lambda ts: ts[0].flip(), lambda as_: np.flip(as_[0])),
    ("roll", lambda ts: md.roll(ts[0], 2, axis=1), lambda as_: np.roll(as_[0], 2, 1)),
    ("roll-flat", lambda ts: md.roll(ts[0], -1), lambda as_: np.roll(as_[0], -1)),
    ("repeat", lambda ts: md.repeat(ts[0], 2, axis=0), lambda as_: np.repeat(as_[0], 2, 0)),
    ("repeat-tensor", lambda ts: md.repeat(ts[0], md.asarray(np.array([1, 0, 2])), axis=1),
     lambda as_: np.repeat(as_[0], [1, 0, 2], 1)),
    ("tile", lambda ts: md.tile(ts[0], (2, 1, 1)), lambda as_: np.tile(as_[0], (2, 1, 1))),
]


@pytest.mark.parametrize("name,fn,ref", COPIES, ids=[c[0] for c in COPIES])
def test_copy_ops_match_numpy_and_do_not_alias(name, fn, ref):
    arrays = [_grid((2, 3)), -_grid((2, 3))]
    ts = [_t(a) for a in arrays]
    got = fn(ts)
    np.testing.assert_array_equal(to_numpy(got), ref(arrays))
    assert all(not shares_memory(got, t) for t in ts)
    assert got._base is None


def test_stack_kernel_every_axis_dtype_and_rank():
    # The CPU kernel stacks along axis 0 with one np.array call and along the others by a
    # concatenation: each axis, 0-d and empty operands, and the dtypes it passes on
    import ml_dtypes

    for shape in ((), (0,), (2, 3), (2, 1, 3)):
        for dtype in (np.float32, np.int64, np.bool_, np.complex64, ml_dtypes.bfloat16):
            arrays = [np.arange(1, 1 + np.prod(shape, dtype=int) * k, k).reshape(shape)
                      .astype(dtype) for k in (1, 2, 3)]
            ts = [md.asarray(a) for a in arrays]
            for axis in range(-len(shape) - 1, len(shape) + 1):
                got = md.stack(ts, axis=axis)
                want = np.stack(arrays, axis=axis)
                assert got.dtype == ts[0].dtype and got.shape == want.shape
                np.testing.assert_array_equal(to_numpy(got).astype(np.float64),
                                              want.astype(np.float64))
                assert to_numpy(got).flags.c_contiguous
    # mixed dtypes promote by the project's rules; different shapes: the op's error
    got = md.stack([md.asarray(np.ones(2, np.float32)), md.asarray(np.ones(2, np.float64))])
    assert got.dtype == md.float64
    for axis in (0, -2, 1):
        with pytest.raises(ValueError, match="stack: all tensors must have the same shape"):
            md.stack([_t(_grid((2, 3))), _t(_grid((3, 2)))], axis=axis)


def test_broadcast_views_by_shape_strides_and_item_size():
    # Note [Broadcast strides]: the strides are looked up by the target shape and the
    # source's shape, strides and item size; each of these differing gives its own view
    a = np.arange(3.0).reshape(3, 1)
    for src in (a.astype(np.float32), a, np.ascontiguousarray(a.T).T, a.T.copy(),
                np.arange(6.0).reshape(3, 2)[:, :1]):
        x = md.asarray(src)
        for shape in ((2, 3, 4), (3, 4), (3, 1), (1, 3, 1)):
            try:
                want = np.broadcast_to(src, shape)
            except ValueError:
                with pytest.raises(ValueError, match="broadcast_to: a tensor of shape"):
                    md.broadcast_to(x, shape)
                continue
            got = md.broadcast_to(x, shape)
            assert got.dtype == x.dtype
            np.testing.assert_array_equal(to_numpy(got), want)
            np.testing.assert_array_equal(to_numpy(x.expand(*shape)), want)


def test_broadcast_arrays_star_and_list():
    a, b = _grid((2, 1)), _grid((1, 3))
    for got in (md.broadcast_arrays(_t(a), _t(b)), md.broadcast_arrays([_t(a), _t(b)])):
        want = np.broadcast_arrays(a, b)
        assert len(got) == 2
        for g, w in zip(got, want):
            np.testing.assert_array_equal(to_numpy(g), w)
    with pytest.raises(ValueError):
        md.broadcast_arrays(_t(_grid((2, 3))), _t(_grid((4,))))
    assert md.broadcast_shapes((2, 1), (3,)) == (2, 3)


@pytest.mark.parametrize("call,err,match", [
    (lambda x: md.concat([x, x[:, :1]], axis=0), ValueError, "concat: tensors must have"),
    (lambda x: md.stack([x, x[:1]]), ValueError, "stack: all tensors must have the same"),
    (lambda x: md.stack([x, x], axis=4), IndexError, "stack: axis 4 is out of range"),
    # NumPy's C concatenate refuses these in the CPU kernels: the op's own errors instead
    (lambda x: md.cat([x, x], axis=5), IndexError, "concat: axis 5 is out of range"),
    (lambda x: md.hstack([x, x[:1]]), ValueError, "hstack: the tensors, as 2-d tensors"),
    (lambda x: md.dstack([x, x[:1]]), ValueError, "dstack: the tensors, as 3-d tensors"),
    (lambda x: md.squeeze(x, axis=0), ValueError, "squeeze: cannot select an axis"),
    (lambda x: x.unsqueeze(5), IndexError, "unsqueeze: axis 5 is out of range"),
    (lambda x: x.permute(0, 0), ValueError, "permute: duplicate axes"),
    (lambda x: x.permute(0), ValueError, r"permute: the number of dims \(1\) must equal"),
    (lambda x: x.expand(3), ValueError, "expand: the number of sizes provided"),
    (lambda x: x.expand(-1, 2, 3), ValueError, r"expand: the expanded size of the tensor "
     r"\(-1\) isn't allowed in a leading, non-existing dimension \(dimension 0\)"),
    (lambda x: x.expand(2, -2), ValueError, r"expand: the expanded size of the tensor "
     r"\(-2\) isn't allowed here \(dimension 1\)"),
    (lambda x: x.sum().expand(-1, 3), ValueError, "leading, non-existing dimension"),
    (lambda x: x.narrow(1, 2, 5), IndexError, "narrow: start"),
    (lambda x: x.repeat(2), ValueError, "repeat: number of repeat dims"),
    (lambda x: x.transpose(0, 5), IndexError, "out of range"),
])
def test_errors_leave_tensor_unchanged(call, err, match):
    a = _grid((2, 3))
    x = _t(a)
    with pytest.raises(err, match=match):
        call(x)
    np.testing.assert_array_equal(to_numpy(x), a)
    assert x._version == 0 and x._base is None


# ---------------------------------------------------------------------------------------
# Meta tensors infer shapes without data


@pytest.mark.parametrize("fn,shape", [
    (lambda m: m.t().reshape(6), (6,)), (lambda m: m.flatten(), (6,)),
    (lambda m: md.tile(m, (2, 2)), (4, 6)), (lambda m: m.repeat(1, 2, 1), (1, 4, 3)),
    (lambda m: md.repeat(m, 3, axis=1), (2, 9)), (lambda m: md.repeat(m, 2), (12,)),
    (lambda m: md.broadcast_arrays(m, md.empty((4, 1, 1), device="meta"))[0], (4, 2, 3)),
])
def test_meta_shapes(fn, shape):
    m = md.empty((2, 3), device="meta")
    out = fn(m)
    assert out.device.type == "meta" and out.shape == shape


def test_meta_repeat_with_tensor_repeats_is_data_dependent():
    m = md.empty((3,), device="meta")
    with pytest.raises(NotImplementedError, match="repeat_interleave: .*data-dependent"):
        md.repeat(m, md.empty((3,), dtype=md.int64, device="meta"))


@pytest.mark.parametrize("pad, mode, value", [
    ((1, 2), "constant", None), ((1, 2, 0, 3), "constant", 2.5), ((0, 1), "constant", 3),
    ((-1, 2, 1, 0), "constant", 1.0), ((1, 1), "reflect", None), ((2, 3), "replicate", None),
    ((1, 2, 0, 1), "circular", None)])
def test_pad_and_its_gradient_match_pytorch_on_the_cpu_kernel_and_the_composite(pad, mode,
                                                                                 value):
    # The CPU kernel (Note [The CPU kernel of pad]) serves the constant pads that crop
    # nothing; its derivative rule serves every CPU call that records.
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(0).random((2, 3, 4))
    w = np.random.default_rng(1).random(tuple(
        torch.nn.functional.pad(torch.from_numpy(x), pad, mode, value).shape))
    kw = {} if value is None else {"value": value}
    a = md.asarray(x).requires_grad_()
    t = torch.from_numpy(x.copy()).requires_grad_()
    out, ref = md.pad(a, list(pad), mode, **kw), torch.nn.functional.pad(t, pad, mode, **kw)
    (out * md.asarray(w)).sum().backward()
    (ref * torch.from_numpy(w)).sum().backward()
    np.testing.assert_allclose(to_numpy(out.detach()), ref.detach().numpy())
    np.testing.assert_allclose(to_numpy(a.grad), t.grad.numpy())
    plain = md.pad(md.asarray(x), list(pad), mode, **kw)
    np.testing.assert_array_equal(to_numpy(plain), ref.detach().numpy())


def test_pad_of_an_integer_tensor_keeps_its_dtype_and_refuses_bad_pads_by_name():
    x = md.asarray(np.arange(6).reshape(2, 3))
    out = md.pad(x, [1, 1], value=7)
    assert out.dtype == x.dtype
    np.testing.assert_array_equal(to_numpy(out), np.pad(np.arange(6).reshape(2, 3), [(0, 0),
                                                        (1, 1)], constant_values=7))
    with pytest.raises(ValueError, match="pad: Padding length must be divisible by 2"):
        md.pad(x, [1])
    with pytest.raises(ValueError, match="pad: Padding length should be less than"):
        md.pad(x, [1, 1, 1, 1, 1, 1])


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("shapes", [[(3,), (2,)], [(3,)], [()], [(3,), (2,), (4,)], [(), (3,)],
                                    [(3,), ()], [(0,), (3,)]])
def test_meshgrid_matches_numpy_and_the_generic_impl(shapes, indexing):
    arrays = [np.arange(1, 1 + int(np.prod(s)), dtype=np.float32).reshape(s) for s in shapes]
    expected = np.meshgrid(*arrays, indexing=indexing)
    for device in ("cpu", "loopback"):
        tensors = [md.asarray(a, device=device) for a in arrays]
        got = md.meshgrid(*tensors, indexing=indexing)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(to_numpy(g), e)
            assert tuple(g.shape) == e.shape
        # fresh tensors: writing into one changes no input
        got[0][...] = 0
        assert all(np.array_equal(to_numpy(t), a) for t, a in zip(tensors, arrays))


def test_meshgrid_of_a_strided_vector():
    x = md.asarray(np.arange(6, dtype=np.float32))[::2]
    got = md.meshgrid(x, md.asarray(np.ones(2, np.float32)))
    np.testing.assert_array_equal(to_numpy(got[0]), [[0, 2, 4], [0, 2, 4]])


@pytest.mark.parametrize("args", [(), (1,), (-1,), (5,), (0, 0, 1), (1, 2, 0), (-1, -1, 0),
                                  (0, -3, -1), (0, 1, 1), (0, 3, 0), (0, True, 2),
                                  (0, np.int64(1), 2)])
def test_diagonal_matches_the_generic_impl(args):
    a = _grid()
    outs = []
    for device in ("cpu", "loopback"):
        try:
            outs.append(to_numpy(md.diagonal(md.asarray(a, device=device), *args)))
        except (ValueError, IndexError, TypeError) as e:
            outs.append((type(e), str(e)))
    if isinstance(outs[0], tuple):
        assert outs[0] == outs[1]
    else:
        np.testing.assert_array_equal(outs[0], outs[1])
        np.testing.assert_array_equal(outs[0], np.diagonal(a, *args))


def test_diagonal_by_keyword_of_any_dtype_is_a_copy():
    # the CPU kernel's common case (ops/diagonals.py) by keyword, of bool, and fresh
    a = _grid()
    x = md.asarray(a)
    np.testing.assert_array_equal(to_numpy(md.diagonal(x, dim1=1, dim2=2)),
                                  np.diagonal(a, 0, 1, 2))
    np.testing.assert_array_equal(to_numpy(md.diagonal(x, offset=-1)), np.diagonal(a, -1))
    np.testing.assert_array_equal(to_numpy(md.diagonal(md.asarray(a > 3), 1, 0, 2)),
                                  np.diagonal(a > 3, 1, 0, 2))
    y = md.diagonal(x)
    y[...] = -1
    np.testing.assert_array_equal(to_numpy(x), a)
    with pytest.raises(ValueError, match="diagonal: expected a tensor of at least 2"):
        md.diagonal(md.asarray(np.arange(3.0)), 0, 0, -1)
    with pytest.raises(TypeError):
        md.diagonal(x, 0, 0, 1, 2)


_ISIN_CASES = [  # (elements, test elements, invert): the CPU kernel's case and the others
    (np.array([[1, 2, 3], [4, 5, 6]], np.int8), np.array([1, 5, 7, 9], np.int8), False),
    (np.array([[1, 2, 3], [4, 5, 6]], np.int8), np.array([1, 5, 7, 9], np.int8), True),
    (np.array([1, 2, 300]), np.array([300, 1], np.int16), False),  # promoted
    (np.array([1, 2, 3], np.uint8), np.array([], np.uint8), False),  # no test elements
    (np.array(2), np.array([1, 2]), True),  # 0-d elements
    (np.array([1.5, 2.0, np.nan]), np.array([2.0, np.nan]), False),  # floats: compared
    (np.array([1 + 2j, 3j], np.complex64), np.array([[3j], [1]], np.complex64), True),
    (np.array([[0, 5], [7, -3]]), np.array([[-3], [7]]), False),  # 2-D test elements
    # many elements: NumPy's isin
    (np.arange(-300, 300, dtype=np.int16), np.array([-7, 0, 299, 5000], np.int16), False),
    (np.arange(-300, 300, dtype=np.int16), np.array([-7, 0, 299, 5000], np.int16), True),
    (np.arange(600, dtype=np.uint64).reshape(20, 30), np.array([], np.uint64), True),
]


@pytest.mark.parametrize(("a", "b", "invert"), _ISIN_CASES)
def test_isin_on_the_cpu_matches_the_generic_kernel_and_numpy(a, b, invert):
    outs = [to_numpy(md.isin(md.asarray(a, device=device), md.asarray(b, device=device),
                             invert=invert)) for device in ("cpu", "loopback")]
    for got in outs:
        assert got.dtype == np.bool_ and got.shape == a.shape
        np.testing.assert_array_equal(got, np.isin(a, b, invert=invert))
