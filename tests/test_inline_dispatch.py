"""The inline-dispatch generator (Note [Inline dispatch] in mdtensor/dispatch/inline.py)."""

import os
import subprocess
import sys
import traceback

import pytest

import mdtensor as md
from mdtensor.dispatch.inline import dispatch_kernel, inline_dispatch


def _code_objects(code):
    yield code
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            yield from _code_objects(c)


@inline_dispatch
def _make(op):
    table = op.table

    def call(a, b):
        kernel = dispatch_kernel(op, table, a, b)
        return kernel(a, b)
    return call


@inline_dispatch
def _make_list(op):
    table = op.table

    def call(tensors):
        kernel = dispatch_kernel(op, table, *tensors)
        return kernel(tensors)
    return call


def test_a_starred_list_is_dispatched_on_its_tensors():
    # dispatch_kernel(op, table, *tensors): the key sets of a list's Tensors, in a loop
    assert "dispatch_kernel" not in _make_list.__code__.co_names
    op = md.ops.aten.stack.default
    call = _make_list(op)
    a, b = md.asarray([1.0, 2.0]), md.asarray([3.0, 4.0], requires_grad=True)
    assert call([a, a]).grad_fn is None and call([a, b]).grad_fn is not None
    assert call((b, a)).tolist() == [[3.0, 4.0], [1.0, 2.0]]
    with pytest.raises(AttributeError):  # as a non-Tensor named argument
        call([a, 2.0])


def test_the_fast_callers_run_the_lines_in_their_own_frame():
    # No code object of a fast caller calls dispatch_kernel: the lines are compiled in.
    from mdtensor.ops import _methods, indexing

    from mdtensor.dispatch import callers

    for fn in (callers.make_caller, callers.packet_function, _methods._binary,
               indexing.getitem, _make, _make_list):
        names = {n for c in _code_objects(fn.__code__) for n in c.co_names}
        assert "dispatch_kernel" not in names, fn
        assert "_inline_tls_get" in names, fn


def test_an_inlined_caller_dispatches_as_the_overloads_own():
    op = md.ops.aten.mul.Tensor
    call = _make(op)
    a, b = md.asarray([1.0, 2.0]), md.asarray([3.0, 4.0], requires_grad=True)
    assert call(a, b).tolist() == [3.0, 8.0]
    assert call(a, b).grad_fn is not None  # the Autograd entry of the same table
    assert dispatch_kernel(op, op.table, a, b)(a, b).tolist() == [3.0, 8.0]
    with md.no_grad():
        assert call(a, b).grad_fn is None  # thread-local keys read on each call


def test_tracebacks_point_at_the_source_line():
    op = md.ops.aten.mul.Tensor
    call = _make(op)
    try:
        call(md.asarray([1.0]), "not a tensor")
    except AttributeError:
        frames = traceback.extract_tb(sys.exc_info()[2])
    line = next(f for f in frames if f.name == "call")
    assert line.filename == __file__
    assert "dispatch_kernel(op, table, a, b)" in line.line


def test_misuse_is_refused_when_the_module_loads():
    def closure_maker():
        x = 1

        def inner():
            return x
        return inner

    with pytest.raises(TypeError, match="is a closure"):
        inline_dispatch(closure_maker())
    import linecache

    path = os.path.join(os.path.dirname(__file__), "_inline_bad_source.py")
    for body in ("kernel = dispatch_kernel(op, op.table, t)",  # an attribute, not a name
                 "return dispatch_kernel(op, table, t)"):     # not an assignment
        source = f"def bad(op, table, t):\n    {body}\n"
        namespace: dict = {"dispatch_kernel": dispatch_kernel}
        exec(compile(source, path, "exec"), namespace)
        linecache.cache[path] = (len(source), None, source.splitlines(True), path)
        try:
            with pytest.raises(SyntaxError, match="as a statement, with plain names"):
                inline_dispatch(namespace["bad"])
        finally:
            del linecache.cache[path]


def test_without_inlining_the_results_are_the_same():
    program = ("import mdtensor as md\n"
               "a = md.asarray([1.0, 2.0], requires_grad=True)\n"
               "y = md.sum(md.exp(a * a)[0:1], axis=0)\n"
               "y.backward()\n"
               "from mdtensor.dispatch import callers\n"
               "names = callers.make_caller.__code__.co_consts\n"
               "print(round(y.item(), 4), a.grad.tolist(), "
               "'dispatch_kernel' in str([c.co_names for c in names if hasattr(c, 'co_names')]))")
    outs = []
    for flag in ("", "1"):
        env = dict(os.environ, MDTENSOR_NO_INLINE=flag)
        outs.append(subprocess.run([sys.executable, "-c", program], env=env, check=True,
                                   capture_output=True, text=True).stdout.split())
    assert outs[0][:3] == outs[1][:3]
    assert (outs[0][-1], outs[1][-1]) == ("False", "True")


def test_expansions_are_cached_beside_the_bytecode(tmp_path):
    # See Note [Cached expansions]: written once, reused while the sources are unchanged,
    # rebuilt when stale.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    program = "import mdtensor as md; print((md.asarray([2.0]) * md.asarray([3.0])).item())"

    def run():
        out = subprocess.run([sys.executable, "-c", program], env=env, check=True,
                             capture_output=True, text=True).stdout
        assert out.split() == ["6.0"]
        return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in tmp_path.rglob("*.inline")}

    first = run()
    names = sorted(p.name.split(".cpython")[0] for p in first)
    assert names == ["_methods._binary", "callers.make_caller", "callers.packet_function",
                     "indexing.getitem", "manipulation._T", "manipulation._broadcast_arrays",
                     "manipulation._flatten", "manipulation._mT", "manipulation._reshape"]
    assert run() == first  # read, not rewritten
    stale = next(p for p in first if p.name.startswith("callers.make_caller"))
    stale.write_bytes(b"0 0 0 0 0\n" + first[stale][1].partition(b"\n")[2])
    third = run()
    assert third[stale][1] == first[stale][1]  # rebuilt under the right key


@pytest.mark.parametrize("call, overload", [
    (lambda x: md.exp(x), "exp"),                                 # one Tensor
    (lambda x: md.sum(x, 0), "sum"),                               # a Tensor and a value
    (lambda x: md.transpose(x, 0, 1), "transpose.int"),           # a Tensor and two values
    (lambda x: md.diagonal(x, 0, 0, 1), "diagonal"),              # a Tensor and three values
    (lambda x: md.tril(x, k=1), "tril"),                          # a keyword-only value
    (lambda x: md.polygamma(1, x), "polygamma"),                  # a value, then a Tensor
    (lambda x: md.stack([x, x]), "stack"),                        # a list of Tensors
    (lambda x: md.ops.aten.threshold_backward(x, x, 2.5), "threshold_backward"),
    (lambda x: md.where(x > 2, x, x), "where.self"),              # three Tensors
    (lambda x: md.ops.aten._softmax_backward_data(x, x, 1),        # two Tensors, a value
     "_softmax_backward_data"),
    (lambda x: md.isclose(x, x + 1, 0.5, 1.0), "isclose"),          # two Tensors, two values
])
def test_the_learned_overloads_see_later_registrations(call, overload):
    # The packet function calls the overload a call's types resolved to inline (Note
    # [Inline dispatch]); a kernel registered afterwards is used, and once it is removed
    # the built-in one again.
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    before = call(x).tolist()
    assert call(x).tolist() == before  # learned by now
    lib = md.library.Library("aten", "IMPL")
    with pytest.warns(UserWarning, match="Overriding"):
        handle = lib.impl(overload, lambda *args, **kwargs: md.zeros(()), "CPU")
    try:
        if x.device.type == "cpu":
            assert call(x).tolist() == 0.0
    finally:
        handle.remove()
    assert call(x).tolist() == before


def test_leading_tensors_are_all_dispatched_on():
    # threshold_backward(g, x, v) and where(c, x, y), once learned, dispatch inline on every
    # leading Tensor: one requiring grad in the last Tensor position alone still records.
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    g = md.asarray([[1.0, 2.0], [3.0, 4.0]]).requires_grad_()
    for _ in range(3):  # the second and third calls take the learned overload
        assert md.where(x > 2, x, x).grad_fn is None
        assert md.where(x > 2, x, g).grad_fn.name() == "WhereBackward0"
        assert md.ops.aten.threshold_backward(x, x, 2.5).grad_fn is None
        assert md.ops.aten.threshold_backward(x, g, 2.5).grad_fn is not None
        assert md.isclose(x, g, 0.5, 1.0).tolist() == [[True, True], [True, True]]
    with pytest.raises(TypeError, match="no overload"):
        md.ops.aten.threshold_backward(x, x, "2.5")


def test_keyword_tensors_still_dispatch_after_positional_calls_were_learned():
    # searchsorted(s, v) and diff(x), once learned from positional calls, dispatch inline;
    # a keyword-only Tensor (sorter, prepend) given later is still read for the key set:
    # a meta one reaches the mixed-devices check, a Tensor requiring grad records.
    s = md.asarray([1.0, 2.0, 3.0])
    v = md.asarray([2.5])
    for _ in range(3):  # the second and third calls take the learned overload
        assert md.searchsorted(s, v).tolist() == [2]
        assert md.diff(s).tolist() == [1.0, 1.0]
    meta = md.empty(3, dtype=md.int64, device="meta")
    with pytest.raises(ValueError, match="searchsorted: expected all tensors to be on the same"):
        md.searchsorted(s, v, sorter=meta)
    p = md.asarray([0.0]).requires_grad_()
    assert md.diff(s, prepend=p).grad_fn is not None


def test_tensors_after_a_dimension_are_all_dispatched_on():
    # gather(x, dim, index) and scatter_add(x, dim, index, src), once learned, dispatch
    # inline on the Tensors at 0 and 2 (and 3): a source requiring grad alone still
    # records, a meta index still reaches the mixed-devices check, and a non-Tensor where a
    # Tensor belongs still takes the caller's path and its error.
    x = md.zeros((2, 2))
    i = md.asarray([[0, 1], [1, 0]])
    s = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    g = md.asarray([[1.0, 2.0], [3.0, 4.0]]).requires_grad_()
    for _ in range(3):  # the second and third calls take the learned overload
        assert md.gather(s, 1, i).tolist() == [[1.0, 2.0], [4.0, 3.0]]
        assert md.gather(g, 1, i).grad_fn is not None
        assert md.scatter_add(x, 0, i, s).tolist() == [[1.0, 4.0], [3.0, 2.0]]
        assert md.scatter_add(x, 0, i, s).grad_fn is None
        y = md.scatter_add(x, 0, i, g)
        assert y.grad_fn is not None
        y.sum().backward()
        assert g.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
        g.grad = None
        assert md.scatter(x, 0, i, 5.0).tolist() == [[5.0, 5.0], [5.0, 5.0]]
    with pytest.raises(ValueError, match="scatter_add"):
        md.scatter_add(x, 0, md.empty((2, 2), dtype=md.int64, device="meta"), s)
    with pytest.raises(TypeError, match="scatter_add"):
        md.scatter_add(x, 0, [[0, 1], [1, 0]], s)


def test_a_list_alone_dispatches_as_through_its_caller():
    # The packet function reads a lone list's key set itself once a list resolved; a list
    # holding something else still takes the caller and raises the op's own error, and a
    # Tensor requiring grad still records.
    x = md.asarray([1.0, 2.0])
    assert md.stack([x, x]).tolist() == [[1.0, 2.0], [1.0, 2.0]]
    with pytest.raises(TypeError, match="stack: argument 'tensors' must be a Tensor"):
        md.stack([x, 1])
    with pytest.raises(ValueError, match="stack: expected a non-empty list"):
        md.stack([])
    g = md.asarray([1.0, 2.0]).requires_grad_()
    assert md.stack([x, g]).grad_fn.name() == "StackBackward0"


def test_a_list_and_a_keyword_dispatch_as_through_the_caller():
    # stack(ts, axis=1): the packet function dispatches on the list's Tensors itself once
    # the call resolved; another value type, a non-Tensor element, an empty list and a
    # Tensor requiring grad behave as through the caller.
    x = md.asarray([[1.0, 2.0]])
    for _ in range(3):  # the second and third calls take the learned overload
        assert md.stack([x, x], axis=1).tolist() == [[[1.0, 2.0], [1.0, 2.0]]]
        assert md.concat([x, x], axis=1).tolist() == [[1.0, 2.0, 1.0, 2.0]]
    with pytest.raises(TypeError, match="stack: argument 'tensors' must be a Tensor"):
        md.stack([x, 1], axis=0)
    with pytest.raises(ValueError, match="stack: expected a non-empty list"):
        md.stack([], axis=0)
    with pytest.raises(TypeError, match="no overload|axis"):
        md.stack([x, x], axis="0")
    g = md.asarray([[1.0, 2.0]]).requires_grad_()
    y = md.stack([x, g], axis=0)
    assert y.grad_fn.name() == "StackBackward0"
    y.sum().backward()
    assert g.grad.tolist() == [[1.0, 1.0]]


def test_a_keyword_only_tensor_is_dispatched_on():
    # searchsorted's sorter= and diff's prepend=/append= are keyword-only Tensor? arguments:
    # a call without them reads its Tensors by position (and, once learned, dispatches
    # inline), one that passes them takes their key sets too -- here the Autograd key of a
    # prepend requiring grad, where x does not.
    x = md.asarray([1.0, 4.0, 9.0])
    s = md.asarray([3.0, 1.0, 2.0])
    q = md.asarray([2.5, 0.5])
    order = md.asarray([1, 2, 0])
    for _ in range(3):  # the calls are learned after the first
        assert md.searchsorted(md.sort(s), q, side="right").tolist() == [2, 0]
        assert md.searchsorted(s, q, sorter=order).tolist() == [2, 0]
        assert md.searchsorted(s, q, side="right", sorter=order).tolist() == [2, 0]
        p = md.asarray([0.5]).requires_grad_()
        assert not md.diff(x).requires_grad
        y = md.diff(x, prepend=p)
        assert y.requires_grad and y.tolist() == [0.5, 3.0, 5.0]
        y.sum().backward()
        assert p.grad.tolist() == [-1.0]
