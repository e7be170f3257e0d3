"""md.func.functionalize: mutations become functional ops, views are replayed, inputs are
written back; results equal the unfunctionalized run (Note [Functionalize])."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from _helpers import (
    to_numpy,
    writes_in_place,
)
from mdtensor.ops import CATALOGUE

import mdtensor as md
from mdtensor.func import FunctionalTensor, functionalize, trace

aten = md.ops.aten
RNG_SEED = 7


def _np(t):
    return np.asarray(to_numpy(t.detach()))


def _mutating(graph, allow_input_copy=True):
    """The mutating ops a traced graph calls (the final write-back copy_ excepted)."""
    calls = [op for op, *_ in graph.calls if hasattr(op, "schema") and op.schema.is_mutable]
    if allow_input_copy:
        calls = [op for op in calls if op.schema.name != "copy_"]
    return calls


def _views(graph):
    return [op for op, *_ in graph.calls if hasattr(op, "schema") and op.schema.is_view]


# -- every in-place op of the catalogue ---------------------------------------------------


def _inplace_decls():
    out = []
    for key, decl in sorted(CATALOGUE.items()):
        info = decl.info
        if decl.inplace and info is not None and info.samples is not None and info.ref:
            out.append(pytest.param(decl, id=key.split("::")[-1]))
    return out


def _to_md(v):
    return md.asarray(v.copy()) if isinstance(v, np.ndarray) else v


@pytest.mark.parametrize("decl", _inplace_decls())
def test_every_inplace_op_functionalizes_to_the_same_result(decl):
    inplace = decl.inplace[0].overloadpacket
    checked = 0
    for dtype in decl.info.dtypes[:3]:
        rng = np.random.default_rng(RNG_SEED)
        for sample in decl.info.samples(dtype, rng):
            if not sample.args or not isinstance(sample.args[0], np.ndarray):
                continue

            def f(x, *rest, **kw):
                y = x * 1  # a fresh tensor made inside, mutated through a view
                inplace(y[...], *rest, **kw)
                inplace(x, *rest, **kw)
                return y

            args = [_to_md(a) for a in sample.args]
            kwargs = {k: _to_md(v) for k, v in sample.kwargs.items()}
            eager_x = args[0].clone()
            try:
                with np.errstate(all="ignore"):
                    expected = f(eager_x, *args[1:], **kwargs)
            except (RuntimeError, TypeError, ValueError) as e:
                with pytest.raises(type(e)), np.errstate(all="ignore"):
                    functionalize(f)(args[0].clone(), *args[1:], **kwargs)
                continue
            x = args[0].clone()
            buffer = x._data
            with np.errstate(all="ignore"):
                got = functionalize(f)(x, *args[1:], **kwargs)
            what = f"{decl.name}_ [{dtype.name}]"
            assert not isinstance(got, FunctionalTensor), what
            np.testing.assert_array_equal(_np(got), _np(expected), err_msg=what)
            np.testing.assert_array_equal(_np(x), _np(eager_x), err_msg=what + " (input)")
            if writes_in_place(x):  # JAX: the write-back swaps in a new array
                assert x._data is buffer, f"{what}: the input is written back in place"
            with np.errstate(all="ignore"):
                g = trace(functionalize(f), args[0].clone(), *args[1:])
            assert not _mutating(g), f"{what}: traced program mutates: {_mutating(g)}"
            checked += 1
    if not checked:
        pytest.skip("no sample runs in place")


# -- views ----------------------------------------------------------------------------------


def _views_program(x):
    y = x * 2
    row = y[1]  # a view
    col = y.T[:, 0]  # a view of a view
    row.add_(10)  # mutation through a view reaches y, col
    sub = row[1:]  # a view of a view of y
    sub.mul_(-1)
    y[0, 0] = 100.0  # setitem on the base updates all views
    return y, row, col, sub


def test_mutation_through_views_of_views_matches_eager():
    x = md.arange(6.0).reshape(2, 3)
    expected = _views_program(x.clone())
    for remove in ("mutations", "mutations_and_views"):
        got = functionalize(_views_program, remove=remove)(x.clone())
        for g, e in zip(got, expected):
            np.testing.assert_array_equal(_np(g), _np(e))


def test_views_read_after_a_mutation_see_it_without_another_op():
    def f(x):
        v = x[1:]
        x.add_(1)
        return v.tolist(), float(v.sum().item())

    assert functionalize(f)(md.asarray([1.0, 2.0, 3.0])) == ([3.0, 4.0], 7.0)


def test_split_and_unbind_views_write_back():
    def f(x):
        a, b = x.split([1, 2])
        b.mul_(10)
        r0 = x.reshape(3, 1).unbind(1)[0]
        r0.add_(1)  # a view from unbind, of a view from reshape
        return x.clone(), a

    x = md.asarray([1.0, 2.0, 3.0])
    got = functionalize(f)(x.clone())
    expected = f(x.clone())
    np.testing.assert_array_equal(_np(got[0]), _np(expected[0]))
    np.testing.assert_array_equal(_np(got[1]), _np(expected[1]))


def test_input_mutation_is_written_back_and_bumps_the_version():
    def f(x, y):
        x[1:].add_(y)
        return x.sum()

    x, y = md.asarray([1.0, 2.0, 3.0]), md.asarray([10.0, 20.0])
    v0 = x._version
    view = x[1:]
    s = functionalize(f)(x, y)
    assert x.tolist() == [1.0, 12.0, 23.0] and float(s.item()) == 36.0
    assert x._version > v0
    assert view.tolist() == [12.0, 23.0]  # the input's own views see the write-back
    assert y.tolist() == [10.0, 20.0]


def test_unmutated_inputs_are_left_alone():
    x = md.asarray([1.0, 2.0])
    v0 = x._version
    out = functionalize(lambda t: t * 2)(x)
    assert out.tolist() == [2.0, 4.0] and x._version == v0


def test_outputs_are_plain_tensors_and_nested_structures_are_unwrapped():
    out = functionalize(lambda x: {"a": [x + 1, x[0]], "b": (x.sum(), 3)})(md.ones(2))
    assert type(out["a"][0]) is md.Tensor and type(out["a"][1]) is md.Tensor
    assert out["b"][1] == 3


def test_factories_inside_are_functionalized():
    def f(x):
        buf = md.zeros(3)
        buf[0] = x.sum()
        buf[1:].add_(x[:2])
        return buf

    x = md.asarray([1.0, 2.0, 3.0])
    assert functionalize(f)(x).tolist() == f(x).tolist() == [6.0, 1.0, 2.0]
    g = trace(functionalize(f), x)
    assert not _mutating(g, allow_input_copy=False)


def test_captured_tensors_are_mutated_for_real():
    captured = md.zeros(2)

    def f(x):
        captured.add_(1)
        return x + captured

    assert functionalize(f)(md.ones(2)).tolist() == [2.0, 2.0]
    assert captured.tolist() == [1.0, 1.0]


def test_captured_tensor_mutated_with_a_functional_tensor_raises():
    captured = md.zeros(2)
    v0 = captured._version

    def f(x):
        captured.add_(x)
        return x

    with pytest.raises(RuntimeError, match="add_.*captured"):
        functionalize(f)(md.ones(2))
    assert captured.tolist() == [0.0, 0.0] and captured._version == v0


def test_bad_remove_and_non_callable_are_rejected():
    with pytest.raises(ValueError, match="functionalize: remove must be .* got 'views'"):
        functionalize(lambda x: x, remove="views")
    with pytest.raises(TypeError, match="functionalize: expected a callable, got int"):
        functionalize(3)


def test_inplace_rules_still_apply_inside():
    def widen(x):
        x.add_(md.ones((2, 3)))

    def narrow(x):
        x.add_(0.5)

    x = md.ones(3)
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        functionalize(widen)(x)
    xi = md.asarray([1, 2])
    with pytest.raises(RuntimeError, match="result type float.* can't be cast"):
        functionalize(narrow)(xi)
    assert x.tolist() == [1.0, 1.0, 1.0] and xi.tolist() == [1, 2]


def test_an_error_inside_leaves_the_inputs_and_state_unchanged():
    from mdtensor.dispatch import tls as _tls
    from mdtensor.layers.functionalize import _live

    x = md.asarray([1.0, 2.0])
    before = _tls.local_state()

    def f(t):
        t.mul_(5)
        raise KeyError("boom")

    with pytest.raises(KeyError):
        functionalize(f)(x)
    assert x.tolist() == [1.0, 2.0] and _tls.local_state() == before and _live[0] == 0


def test_out_variant_functionalizes():
    def f(x, out):
        md.ops.aten.exp.out(x, out=out)
        return out * 1

    x, out = md.asarray([0.0, 1.0]), md.zeros(2)
    got = functionalize(f)(x, out)
    np.testing.assert_allclose(_np(got), np.exp([0.0, 1.0]))
    np.testing.assert_allclose(_np(out), np.exp([0.0, 1.0]))


def test_mutating_overloads_functionalize_to_the_overload_taking_their_arguments():
    from mdtensor.layers.functionalize import _functional_of

    assert _functional_of(aten.clamp.out) is aten.clamp.default  # not clamp.Tensor
    assert _functional_of(aten.clamp_.default) is aten.clamp.default
    assert _functional_of(aten.add.out) is aten.add.Tensor
    assert _functional_of(aten.add.Scalar_out) is aten.add.Scalar
    assert _functional_of(aten.add_.Scalar) is aten.add.Scalar

    def f(x, out):
        md.clamp(x, 0.5, 1.5, out=out)
        x.clamp_(max=1.0)
        return out * 1

    x, out = md.asarray([0.0, 1.0, 2.0]), md.zeros(3)
    got = functionalize(f)(x, out)
    assert _np(got).tolist() == [0.5, 1.0, 1.5] and x.tolist() == [0.0, 1.0, 1.0]


# -- tracing below functionalization ------------------------------------------------------


def test_trace_of_functionalized_program_has_no_mutations_and_replays():
    x = md.arange(6.0).reshape(2, 3)
    g = trace(functionalize(_views_program), x.clone())
    assert not _mutating(g)
    assert _views(g)  # remove="mutations" keeps views
    text = str(g)
    assert "index_put.Tensor" in text and "add_" not in text
    new = md.arange(6.0).reshape(2, 3) + 1
    for got, e in zip(g(new.clone()), _views_program(new.clone())):
        np.testing.assert_array_equal(_np(got), _np(e))


def test_trace_with_views_removed_has_no_views():
    x = md.arange(6.0).reshape(2, 3)
    g = trace(functionalize(_views_program, remove="mutations_and_views"), x.clone())
    assert not _mutating(g) and not _views(g)
    assert "_copy" in str(g)
    for got, e in zip(g(x.clone()), _views_program(x.clone())):
        np.testing.assert_array_equal(_np(got), _np(e))


def test_input_write_back_shows_as_a_final_copy():
    def f(x):
        x.mul_(2)

    x = md.ones(2)
    g = trace(functionalize(f), x)
    ops = [op.name for op, *_ in g.calls]
    # On JAX the input's own Functionalize layer turns the write-back into aten::copy.
    assert ops == ["aten::mul.Scalar", "aten::copy_" if writes_in_place(x) else "aten::copy"]


# -- autograd ---------------------------------------------------------------------------------


def _grad_program(x):
    y = x * 2
    y[1:].mul_(3)
    y[0] = 5 * x[2]
    return (y * y).sum()


@pytest.mark.parametrize("remove", ["mutations", "mutations_and_views"])
def test_composes_with_autograd(remove):
    x0 = md.asarray([1.0, 2.0, 3.0], requires_grad=True)
    _grad_program(x0).backward()
    x1 = md.asarray([1.0, 2.0, 3.0], requires_grad=True)
    out = functionalize(_grad_program, remove=remove)(x1)
    assert out.grad_fn is not None
    out.backward()
    np.testing.assert_allclose(_np(x1.grad), _np(x0.grad))


def test_backward_inside_the_function_is_traced_with_the_forward():
    def step(x):
        loss = _grad_program(x)
        assert loss.requires_grad and not loss.is_leaf
        loss.backward()
        return loss

    x = md.asarray([1.0, 2.0, 3.0], requires_grad=True)
    g = trace(functionalize(step), x)
    names = [op.name for op, *_ in g.calls]
    assert "aten::index_put.Tensor" in names and "aten::ones_like" in names  # fwd and bwd
    expected = md.asarray([1.0, 2.0, 3.0], requires_grad=True)
    _grad_program(expected).backward()
    np.testing.assert_allclose(_np(x.grad), _np(expected.grad))


def test_gradcheck_through_functionalize():
    from mdtensor.testing import gradcheck

    x = md.asarray(np.random.default_rng(0).standard_normal(3), requires_grad=True)
    assert gradcheck(functionalize(_grad_program), (x,))


def test_modes_see_functional_ops():
    from mdtensor.modes import LoggingMode

    def f(x):
        x.add_(1)
        return x

    lines = []
    with LoggingMode(print_fn=lines.append):
        functionalize(f)(md.ones(2))
    text = "\n".join(map(str, lines))
    assert "aten::add.Scalar" in text and "add_" not in text.replace("copy_", "")


def test_functionalize_on_jax_inputs():
    pytest.importorskip("jax")
    x = md.arange(6.0, device="jax").reshape(2, 3)
    expected = _views_program(x.clone())
    got = functionalize(_views_program, remove="mutations_and_views")(x.clone())
    for g, e in zip(got, expected):
        assert g.device.type == "jax" and g.tolist() == e.tolist()


def test_entering_a_transform_swaps_gated_entries_and_clears_no_table():
    """Note [Gated kernels]: Functionalize's kernel for non-mutating ops is active only
    while a transform runs.  Entering and leaving one swaps the few table entries that
    reach it, leaves every other table as it was, and the results stay right either way."""
    from mdtensor.dispatch import operators as _ops
    exp = md.ops.aten.exp.default
    x = md.asarray([0.0, 1.0])
    md.exp(x)
    before = dict(exp.table)
    assert before  # the plain CPU entry

    def f(t):
        y = md.exp(t)
        y.add_(1)
        return y

    for _ in range(2):
        got = functionalize(f)(x)
        assert isinstance(got, md.Tensor) and not isinstance(got, FunctionalTensor)
        assert got.tolist() == pytest.approx([2.0, 1.0 + np.e])
    # The CPU entry outside transforms is the very same object: no table was cleared
    ks = next(iter(before))
    assert exp.table[ks] is before[ks]
    gated = [(op, k) for (op, k), (g, active, below) in _ops._GATED.items()
             if op is exp and op.table.get(k) in (active, below)]
    assert gated and all(exp.table[k] is _ops._GATED[(exp, k)][2] for _, k in gated)
    if md.backends.available() and any(b["name"] == "jax" and b["installed"]
                                       for b in md.backends.available()):
        j = md.asarray([0.0, 1.0], device="jax")
        inside = functionalize(lambda t: md.exp(t))(j)
        assert inside.device.type == "jax" and md.exp(j).tolist() == inside.tolist()


def test_gated_entries_flip_under_the_table_key_when_a_key_above_falls_through(aten_impl):
    """Regression: a fallthrough above Functionalize (here a user's AutogradJAX
    fallthrough) makes the table key differ from the key set the gated kernel served;
    entering and leaving a transform must swap the entry stored under the table key."""
    pytest.importorskip("jax")
    import warnings

    from mdtensor.dispatch import operators as _ops
    exp = md.ops.aten.exp.default
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        aten_impl.impl("exp", md.library.fallthrough_kernel, "AutogradJAX")
    x = md.asarray([0.0, 1.0], device="jax", requires_grad=True)
    assert md.exp(x).tolist() == pytest.approx([1.0, np.e])  # fills the entry
    ks = x._ks & exp.mask
    assert ks & md.DispatchKey.AutogradJAX.value
    gate, active, below = _ops._GATED[(exp, ks)]
    assert exp.table[ks] is below
    seen = []

    def f(t):
        seen.append(exp.table[ks])
        return md.exp(x) + t

    got = functionalize(f)(md.asarray([0.0, 0.0], device="jax"))
    assert got.tolist() == pytest.approx([1.0, np.e])
    assert seen == [active] and exp.table[ks] is below


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX not installed")
def test_a_transform_in_one_thread_leaves_other_threads_alone():
    # issue 25 item 17: the process-wide count of running transforms made JAX tensors of
    # other threads come out as FunctionalTensors (Note [Transforms in other threads])
    import threading

    done = threading.Event()
    seen, calls = [], [0]

    def other_thread():
        while not done.is_set() or calls[0] < 50:
            x = md.asarray([1.0, 2.0], device="jax")
            y = x.clone()
            y.add_(1)
            for t in (x + 1, md.zeros(2, device="jax"), md.exp(x), y):
                seen.append(type(t))
            assert y.tolist() == [2.0, 3.0]
            calls[0] += 1

    def step(x):
        y = x * 2
        y.add_(1)
        return md.zeros(2, device="jax") + y

    t = threading.Thread(target=other_thread)
    t.start()
    try:
        for _ in range(100):
            out = functionalize(step)(md.asarray([1.0, 2.0], device="jax"))
            assert type(out) is md.Tensor and out.tolist() == [3.0, 5.0]
    finally:
        done.set()
        t.join()
    assert set(seen) == {md.Tensor} and calls[0] >= 50
