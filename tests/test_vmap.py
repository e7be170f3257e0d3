"""``md.func.vmap``: every catalogue op under vmap equals the loop over the batch; the
transforms compose (per-sample gradients, Jacobians); errors are PyTorch's."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st
from mdtensor.ops import CATALOGUE

import mdtensor as md
from mdtensor.layers.vmap import PerformanceWarning, rules

F = md.func
B = 3

#: ops whose samples cannot be compared with a loop: random
_RANDOM = {"dropout"}
#: ops whose results are sparse: vmap stacks dense results (PyTorch's vmap takes no sparse
#: tensors either; docs/SPARSE.md)
_SPARSE_RESULTS = {"to_sparse", "to_sparse_csr"}


def _decls():
    out = []
    for key, decl in sorted(CATALOGUE.items()):
        info = decl.info
        if info is None or info.samples is None or not decl.functional:
            continue
        if decl.name in _RANDOM or decl.name in _SPARSE_RESULTS:
            continue
        out.append(pytest.param(decl, id=key.split("::")[-1]))
    return out


def _dtype(decl):
    dtypes = decl.info.dtypes or (md.float64,)
    for want in (md.float64, md.float32, md.int64):
        if want in dtypes:
            return want
    return dtypes[0]


def _structure(v):
    if isinstance(v, np.ndarray):
        return ("a", v.shape, v.dtype.str)
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
        return tuple(_structure(x) for x in v)
    return ("v", repr(v))


def _batches(decl):
    """Samples of ``decl``, each with ``B`` variants (samples of other seeds with the same
    shapes, else copies), so batch elements differ where the sampler allows."""
    dtype = _dtype(decl)
    draws = [list(decl.info.samples(dtype, np.random.default_rng(1234 + k)))
             for k in range(B)]
    out = []
    for i, s0 in enumerate(draws[0][:4]):
        variants = [s0]
        for d in draws[1:]:
            s = d[i] if i < len(d) else s0
            same = (len(s.args) == len(s0.args) and s.kwargs.keys() == s0.kwargs.keys()
                    and all(_structure(a) == _structure(b) for a, b in zip(s.args, s0.args))
                    and all(_structure(s.kwargs[k]) == _structure(s0.kwargs[k])
                            for k in s0.kwargs))
            variants.append(s if same else s0)
        out.append(variants)
    return out


def _is_array(v):
    return isinstance(v, np.ndarray)


def _is_array_list(v):
    return isinstance(v, (list, tuple)) and v and all(_is_array(x) for x in v)


def _md(v):
    if _is_array(v):
        return md.asarray(v.copy())
    if _is_array_list(v):
        return type(v)(md.asarray(x.copy()) for x in v)
    return v


def _packet(decl):
    return decl.functional[0].overloadpacket


def _run_one(decl, sample):
    args = [_md(a) for a in sample.args]
    kwargs = {k: _md(v) for k, v in sample.kwargs.items()}
    return _packet(decl)(*args, **kwargs)


def _stacked(values, axis):
    if _is_array(values[0]):
        return md.asarray(np.stack(values, axis=min(axis, values[0].ndim)))
    if _is_array_list(values[0]):
        return type(values[0])(md.asarray(np.stack(col, axis=min(axis, col[0].ndim)))
                               for col in zip(*values))
    return values[0]


def _flat(result):
    if isinstance(result, md.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for r in result for t in _flat(r)]
    return []


def _layout_rounding(decl) -> bool:
    """The FFTs round with the layout of their batch: a small transform is a product with a
    matrix, which BLAS sums in an order that depends on the rows, and a transform of other
    axes is pocketfft's (Note [Small FFTs as products] in ops/fft.py).  Their errors scale
    with the largest value, not each element's: compared to the largest value."""
    return decl.name.startswith("fft_")


def _compare(got, want_per_element, axis=0, layout_rounding=False):
    got = _flat(got)
    wants = [_flat(w) for w in want_per_element]
    assert len(got) == len(wants[0])
    for j, g in enumerate(got):
        want = np.stack([to_numpy(w[j]) for w in wants])
        g = np.moveaxis(to_numpy(g), axis, 0) if axis else to_numpy(g)
        assert g.shape == want.shape, (g.shape, want.shape)
        assert g.dtype == want.dtype, (g.dtype, want.dtype)
        if want.dtype.kind in "fc":
            atol = 1e-6 * float(np.abs(want).max(initial=0)) if layout_rounding else 1e-9
            np.testing.assert_allclose(g, want, rtol=1e-6, atol=max(atol, 1e-9),
                                       equal_nan=True)
        else:
            np.testing.assert_array_equal(g, want)


def _rank(v):
    return v.ndim if _is_array(v) else v[0].ndim


def _positions(sample):
    return [i for i, a in enumerate(sample.args) if _is_array(a) or _is_array_list(a)]


#: (op, which in_dims) -> the error vmap gives where the loop over unbatched samples
#: computes: PyTorch refuses these too
_REFUSED = {
    # the inner tensor of an argument mapped over dimension 1 is not contiguous
    ("view", "first-1"): "view: the tensor's memory layout",
    # an index tensor inside a key is not seen by the dispatcher
    ("index", "last-0"): "vmap: a batched tensor reached a kernel below the Batched layer",
    # a Python bool of the values; q read as numbers: data-dependent, as in PyTorch
    ("allclose", "*"): "data-dependent control flow",
    ("quantile", ""): "tolist\\(\\) of a batched tensor",
    ("quantile", "last-0"): "tolist\\(\\) of a batched tensor",
}

#: the refusals above that depend on the sample: op -> whether this sample is refused
_REFUSED_IF = {
    "quantile": lambda s: len(s.args) > 1 and _is_array(s.args[1]),  # a tensor q
}

#: ops whose result is a Python value of the elements' data (refused inside vmap)
_DATA_DEPENDENT = {"allclose"}


def _check(decl, variants, in_dims_of, case=""):
    """vmap of the op with ``in_dims_of(position, n_positions)`` for each tensor argument
    against the loop over the batch."""
    s0 = variants[0]
    pos = _positions(s0)
    if not pos:
        pytest.skip("no tensor arguments")
    dims = {p: in_dims_of(k, len(pos)) for k, p in enumerate(pos)}
    try:
        loop = []
        for i in range(B):
            args = [variants[i].args[p] if dims.get(p) is not None else s0.args[p]
                    if p in dims else a for p, a in enumerate(s0.args)]
            loop.append(_run_one(decl, type(s0)(tuple(args), s0.kwargs)))
    except Exception:
        return  # the op refuses these elements (the loop does too); nothing to compare
    shapes = {tuple(t.shape) for r in loop for t in _flat(r)[:1]}
    batched_args = []
    for p, a in enumerate(s0.args):
        d = dims.get(p)
        if d is None:
            batched_args.append(_md(a))
        else:
            batched_args.append(_stacked([variants[i].args[p] for i in range(B)], d))
    in_dims = tuple(None if dims.get(p) is None else min(dims[p], _rank(s0.args[p]))
                    for p in range(len(s0.args)))
    kwargs = {k: _md(v) for k, v in s0.kwargs.items()}

    def f(*args):
        return _packet(decl)(*args, **kwargs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PerformanceWarning)
        refused = _REFUSED.get((decl.name, case)) or _REFUSED.get((decl.name, "*"))
        if refused and not _REFUSED_IF.get(decl.name, lambda s: True)(s0):
            refused = None
        if refused:
            with pytest.raises(Exception, match=refused):
                F.vmap(f, in_dims=in_dims)(*batched_args)
            return
        if len(shapes) > 1:  # a data-dependent output shape: vmap refuses
            with pytest.raises(RuntimeError, match="vmap"):
                F.vmap(f, in_dims=in_dims)(*batched_args)
            return
        got = F.vmap(f, in_dims=in_dims)(*batched_args)
    _compare(got, loop, layout_rounding=_layout_rounding(decl))


@pytest.mark.parametrize("decl", _decls())
def test_every_op_under_vmap_equals_the_loop(decl):
    for variants in _batches(decl):
        _check(decl, variants, lambda k, n: 0)


@pytest.mark.parametrize("decl", _decls())
def test_every_op_with_in_dims_1_and_none(decl):
    for variants in _batches(decl):
        # the first tensor argument mapped over its dimension 1 (or 0 for a vector), the
        # others not mapped
        _check(decl, variants, lambda k, n: 1 if k == 0 else None, "first-1")
        if len(_positions(variants[0])) > 1:  # only the last one mapped
            _check(decl, variants, lambda k, n: 0 if k == n - 1 else None, "last-0")


@pytest.mark.parametrize("decl", _decls())
def test_every_op_under_nested_vmap(decl):
    for variants in _batches(decl)[:2]:
        s0 = variants[0]
        pos = _positions(s0)
        if not pos or not all(_is_array(s0.args[p]) for p in pos):
            continue
        if decl.name in _DATA_DEPENDENT or _REFUSED_IF.get(decl.name, lambda s: False)(s0):
            continue  # refused under vmap: the cases above check the error
        try:
            loop = [[_run_one(decl, variants[(i + j) % B]) for j in range(2)]
                    for i in range(2)]
        except Exception:
            continue
        if len({tuple(t.shape) for row in loop for r in row for t in _flat(r)[:1]}) > 1:
            continue
        args = [md.asarray(np.stack([np.stack([variants[(i + j) % B].args[p]
                                               for j in range(2)]) for i in range(2)]))
                if p in pos else _md(a) for p, a in enumerate(s0.args)]
        in_dims = tuple(0 if p in pos else None for p in range(len(s0.args)))
        kwargs = {k: _md(v) for k, v in s0.kwargs.items()}

        def f(*a, kwargs=kwargs):
            return _packet(decl)(*a, **kwargs)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", PerformanceWarning)
            got = F.vmap(F.vmap(f, in_dims=in_dims), in_dims=in_dims)(*args)
        for i in range(2):
            sub = [g[i] for g in _flat(got)]
            _compare(sub if len(sub) > 1 else sub[0], loop[i],
                     layout_rounding=_layout_rounding(decl))


def test_the_common_ops_have_rules_not_the_loop():
    """The ops a model uses run in one call (no fallback warning)."""
    x = md.asarray(np.random.default_rng(0).standard_normal((4, 3, 5)))
    w = md.asarray(np.random.default_rng(1).standard_normal((5, 2)))

    def f(t):
        h = md.tanh(t @ w) + md.relu(t[:, :2].sum(axis=1, keepdims=True))
        h = md.softmax(h, dim=-1).reshape(-1).unsqueeze(0).T
        return md.mean(md.where(h > 0, h, -h) ** 2) + md.linalg.vector_norm(h)

    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        got = F.vmap(f)(x)
    want = md.stack([f(x[i]) for i in range(4)])
    np.testing.assert_allclose(to_numpy(got), to_numpy(want), rtol=1e-12)


def test_fallback_warns_once_per_op_naming_it():
    from mdtensor.layers import vmap as vmap_layer

    vmap_layer._warned.discard("aten::unique_values")
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    with pytest.warns(PerformanceWarning, match="aten::unique_values"):
        F.vmap(md.unique_values)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerformanceWarning)
        F.vmap(md.unique_values)(x)  # once


# ---------------------------------------------------------------------------------------
# Transforms together


def _mlp_loss(params, x, y):
    w1, b1, w2 = params
    h = md.tanh(x @ w1 + b1)
    return ((h @ w2 - y) ** 2).mean()


def _mlp(seed=0, n=6):
    rng = np.random.default_rng(seed)
    params = tuple(md.asarray(rng.standard_normal(s) * 0.3) for s in ((4, 5), (5,), (5, 2)))
    x = md.asarray(rng.standard_normal((n, 4)))
    y = md.asarray(rng.standard_normal((n, 2)))
    return params, x, y


def test_per_sample_gradients_equal_the_loop():
    params, x, y = _mlp()
    got = F.vmap(F.grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, y)
    for j, g in enumerate(got):
        want = md.stack([F.grad(_mlp_loss)(params, x[i], y[i])[j] for i in range(6)])
        np.testing.assert_allclose(to_numpy(g), to_numpy(want), rtol=1e-12, atol=1e-14)


def test_per_sample_gradients_match_torch_func(torch):
    params, x, y = _mlp()
    got = F.vmap(F.grad(_mlp_loss), in_dims=(None, 0, 0))(params, x, y)

    def tloss(p, xx, yy):
        w1, b1, w2 = p
        return ((torch.tanh(xx @ w1 + b1) @ w2 - yy) ** 2).mean()

    tp = tuple(torch.from_numpy(to_numpy(p)) for p in params)
    want = torch.func.vmap(torch.func.grad(tloss), in_dims=(None, 0, 0))(
        tp, torch.from_numpy(to_numpy(x)), torch.from_numpy(to_numpy(y)))
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), w.numpy(), rtol=1e-12, atol=1e-14)


def test_grad_of_vmap_and_vmap_of_grad_of_grad():
    params, x, y = _mlp()
    w1 = params[0]
    g = F.grad(lambda w: F.vmap(lambda xi: md.tanh(xi @ w).sum())(x).sum())(w1)
    want = F.grad(lambda w: md.tanh(x @ w).sum())(w1)
    np.testing.assert_allclose(to_numpy(g), to_numpy(want), rtol=1e-12)
    # second derivatives per sample
    xs = md.asarray([0.5, 1.0, 2.0])
    got = F.vmap(F.grad(F.grad(lambda t: t ** 3)))(xs)
    np.testing.assert_allclose(to_numpy(got), 6 * to_numpy(xs))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(1, 4), st.integers(0, 2 ** 31 - 1))
def test_jacrev_equals_jacfwd_under_vmap(n, m, seed):
    rng = np.random.default_rng(seed)
    w = md.asarray(rng.standard_normal((n, m)))
    xs = md.asarray(rng.standard_normal((3, n)))

    def f(v):
        return md.sin(v @ w) * md.exp(-v.sum())

    a = F.vmap(F.jacrev(f))(xs)
    b = F.vmap(F.jacfwd(f))(xs)
    loop = md.stack([F.jacrev(f)(xs[i]) for i in range(3)])
    np.testing.assert_allclose(to_numpy(a), to_numpy(b), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(to_numpy(a), to_numpy(loop), rtol=1e-10, atol=1e-12)


def test_vmap_of_vjp_function_batches_cotangents():
    """vmap over a vjp function made outside vmap: the formulas run on batched
    cotangents (the rows of a Jacobian in one pass)."""
    x = md.asarray([0.1, 0.2, 0.3], dtype=md.float64)
    out, vjp_fn = F.vjp(lambda t: md.sin(t) * t.sum(), x)
    rows = F.vmap(vjp_fn)(md.eye(3, dtype=md.float64))[0]
    np.testing.assert_allclose(to_numpy(rows), to_numpy(F.jacrev(
        lambda t: md.sin(t) * t.sum())(x)), rtol=1e-12)


def test_modes_see_the_batched_ops():
    seen = []

    class Log(md.modes.DispatchMode):
        def __md_dispatch__(self, op, types, args, kwargs):
            seen.append((op.name, tuple(args[0].shape)))
            return op(*args, **kwargs)

    x = md.ones((5, 3))
    with Log():
        F.vmap(lambda t: md.exp(t))(x)
    assert ("aten::exp", (5, 3)) in seen


def test_functionalize_of_vmap_of_grad():
    params, x, y = _mlp()
    f = F.vmap(F.grad(_mlp_loss), in_dims=(None, 0, 0))
    got = F.functionalize(f)(params, x, y)
    want = f(params, x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(to_numpy(g), to_numpy(w), rtol=1e-12)


# ---------------------------------------------------------------------------------------
# in_dims, out_dims, in-place, randomness, errors


def test_in_dims_out_dims_and_pytrees():
    x = md.asarray(np.arange(6.0).reshape(2, 3))
    got = F.vmap(lambda d: {"s": d["a"] + d["b"]}, in_dims=({"a": 1, "b": None},))(
        {"a": x, "b": md.asarray(10.0)})
    np.testing.assert_array_equal(to_numpy(got["s"]), to_numpy(x).T + 10)
    got = F.vmap(lambda t: (t, t * 2), out_dims=(0, 1))(x)
    np.testing.assert_array_equal(to_numpy(got[1]), (to_numpy(x) * 2).T)
    # an output that does not depend on the input is expanded along the batch
    got = F.vmap(lambda t: md.asarray(1.0))(x)
    assert tuple(got.shape) == (2,)


def test_chunk_size_gives_the_same_answer():
    x = md.asarray(np.random.default_rng(0).standard_normal((7, 3)))
    a = F.vmap(lambda t: md.softmax(t, dim=0), chunk_size=3)(x)
    b = F.vmap(lambda t: md.softmax(t, dim=0))(x)
    np.testing.assert_allclose(to_numpy(a), to_numpy(b))


def test_in_place_ops_write_through_to_the_input():
    x = md.zeros((2, 3))
    F.vmap(lambda t: t.add_(md.asarray([1.0, 2.0, 3.0])))(x)
    np.testing.assert_array_equal(to_numpy(x), [[1, 2, 3], [1, 2, 3]])

    def f(t):
        t[1] = 5.0
        t[0:1] = md.asarray([7.0])
        return t

    x = md.zeros((2, 3))
    F.vmap(f)(x)
    np.testing.assert_array_equal(to_numpy(x), [[7, 5, 0], [7, 5, 0]])


def test_in_place_write_of_a_batched_value_into_an_unbatched_tensor_raises():
    z = md.zeros(3)
    with pytest.raises(RuntimeError, match="vmap: aten::add_.Tensor: an in-place write of "
                                           "a batched value into an unbatched tensor"):
        F.vmap(lambda t: z.add_(t))(md.ones((2, 3)))
    np.testing.assert_array_equal(to_numpy(z), [0, 0, 0])


def test_data_dependent_control_flow_raises():
    with pytest.raises(RuntimeError, match="vmap: bool\\(\\) of a batched tensor is "
                                           "data-dependent control flow"):
        F.vmap(lambda t: t if t.sum() > 0 else -t)(md.ones((2, 3)))
    with pytest.raises(RuntimeError, match="item\\(\\)"):
        F.vmap(lambda t: t.sum().item())(md.ones((2, 3)))


def test_randomness():
    with pytest.raises(RuntimeError, match="randomness='error'"):
        F.vmap(lambda t: t + md.rand(3))(md.zeros((4, 3)))
    different = to_numpy(F.vmap(lambda t: t + md.rand(3), randomness="different")(
        md.zeros((4, 3))))
    assert len({tuple(r) for r in different}) == 4
    same = to_numpy(F.vmap(lambda t: t + md.rand(3), randomness="same")(md.zeros((4, 3))))
    assert len({tuple(r) for r in same}) == 1
    drop = to_numpy(F.vmap(lambda t: md.nn.functional.dropout(t, 0.5),
                           randomness="different")(md.ones((8, 50))))
    assert len({tuple(r) for r in drop}) == 8


def test_bad_arguments():
    x = md.ones((2, 3))
    with pytest.raises(ValueError, match="vmap: the mapped dimensions of the inputs have "
                                         "different sizes \\(2 and 3\\)"):
        F.vmap(lambda a, b: a + b)(x, md.ones((3, 3)))
    with pytest.raises(ValueError, match="in_dim 2 is out of range"):
        F.vmap(lambda a: a, in_dims=2)(x)
    with pytest.raises(ValueError, match="at least one input must be a Tensor mapped"):
        F.vmap(lambda a: a, in_dims=None)(x)
    with pytest.raises(ValueError, match="randomness must be"):
        F.vmap(lambda a: a, randomness="sometimes")
    with pytest.raises(ValueError, match="in_dims is a tuple of 2 but the function was "
                                         "called with 1"):
        F.vmap(lambda a: a, in_dims=(0, 0))(x)
    with pytest.raises(ValueError, match="must return Tensors"):
        F.vmap(lambda a: 3)(x)


def test_batched_tensor_metadata_is_logical():
    def f(t):
        assert tuple(t.shape) == (3, 4) and t.ndim == 2 and t.dtype == md.float32
        assert "BatchedTensor(level=1" in repr(t)
        return t

    F.vmap(f)(md.ones((2, 3, 4)))


def test_a_rule_for_every_common_op_kind_is_registered():
    for name in ("add", "matmul", "sum", "reshape", "permute", "cat", "stack", "index",
                 "basic_index", "index_put_", "einsum", "linalg_inv", "softmax", "where"):
        assert name in rules, name


def test_register_vmap_for_a_custom_op():
    calls = []

    @md.library.custom_op("vmaptest::scale", mutates_args=())
    def scale(x: md.Tensor, k: float) -> md.Tensor:
        calls.append(tuple(x.shape))
        return x * k

    x = md.asarray(np.arange(6.0).reshape(3, 2))
    with pytest.warns(PerformanceWarning, match="vmaptest::scale"):  # the loop
        np.testing.assert_array_equal(to_numpy(F.vmap(lambda t: scale(t, 2.0))(x)),
                                      to_numpy(x) * 2)
    assert calls == [(2,)] * 3

    @scale.register_vmap
    def _(info, in_dims, x, k):
        assert info.batch_size == 3 and info.randomness == "error"
        assert in_dims == (0, None)
        return scale(x, k), 0

    calls.clear()
    got = F.vmap(lambda t: scale(t, 3.0), in_dims=1, out_dims=1)(x.T)
    np.testing.assert_array_equal(to_numpy(got), to_numpy(x).T * 3)
    assert calls == [(3, 2)]  # one call on the whole batch


class _Cube(md.autograd.Function):
    generate_vmap_rule = True

    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k = k
        return x ** 3 * k

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * 3 * x ** 2 * ctx.k, None


def test_autograd_function_under_vmap():
    xs = md.asarray([0.5, 1.0, 2.0], dtype=md.float64)
    np.testing.assert_allclose(to_numpy(F.vmap(lambda t: _Cube.apply(t, 2.0))(xs)),
                               2 * to_numpy(xs) ** 3)
    # per-sample gradients through the Function's own backward, and grad of vmap
    got = F.vmap(F.grad(lambda t: _Cube.apply(t, 2.0)))(xs)
    np.testing.assert_allclose(to_numpy(got), 6 * to_numpy(xs) ** 2)
    got = F.grad(lambda t: F.vmap(lambda u: _Cube.apply(u, 1.0))(t).sum())(xs)
    np.testing.assert_allclose(to_numpy(got), 3 * to_numpy(xs) ** 2)
    # a shared (unbatched) input's gradient sums the elements'
    w = md.asarray(2.0, dtype=md.float64)
    got = F.grad(lambda w: F.vmap(lambda u: _Cube.apply(u * w, 1.0))(xs).sum())(w)
    np.testing.assert_allclose(float(got), float((3 * (to_numpy(xs) * 2) ** 2
                                                  * to_numpy(xs)).sum()))


def test_autograd_function_without_vmap_support_is_refused():
    class Plain(md.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    with pytest.raises(RuntimeError, match="vmap: the autograd.Function Plain has no vmap "
                                           "support: set generate_vmap_rule = True"):
        F.vmap(Plain.apply)(md.ones((2, 3)))
