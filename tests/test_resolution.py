"""Overload resolution with plum: Tensor vs scalar vs sequence vs None, the per-packet
cache, the TypeError listing candidate schemas, and keyword aliases."""

from __future__ import annotations

import pytest

import mdtensor as md
from mdtensor.dispatch.namespaces import lookup


def _tag(name):
    def fn(*args, **kwargs):
        return name
    fn.__qualname__ = name
    return fn


def test_tensor_vs_scalar_vs_none(lib):
    lib.define("f.Tensor(Tensor x, Tensor other) -> Tensor")
    lib.define("f.Scalar(Tensor x, Scalar other) -> Tensor")
    lib.define("f.none(Tensor x, int? other) -> Tensor")
    for name in ("Tensor", "Scalar", "none"):
        lib.impl(f"f.{name}", _tag(name), "CPU")
    f = getattr(md.ops, lib.ns).f
    x = md.asarray([1.0], device="cpu")
    assert f(x, x) == "Tensor"
    assert f(x, 2.5) == "Scalar"
    assert f(x, None) == "none"
    assert f(x, 3) in ("Scalar", "none")  # both bind; the catalogue-order tie rule
    assert f(x, 3) == f(x, 3)  # cached: same answer


def test_resolution_is_cached_per_type_tuple(lib):
    lib.define("g.a(Tensor x) -> Tensor")
    lib.define("g.b(Tensor x, int k) -> Tensor")
    lib.impl("g.a", _tag("a"), "CPU")
    lib.impl("g.b", _tag("b"), "CPU")
    g = getattr(md.ops, lib.ns).g
    x = md.asarray([1.0], device="cpu")
    assert g(x) == "a" and g(x, 1) == "b" and g(x, k=1) == "b"
    cache = g.resolution_cache
    # One positional argument: its type; more: a tuple of types; keywords: the types,
    # then the keyword names, then the keyword values' types.
    assert md.Tensor in cache and (md.Tensor, int) in cache
    assert (md.Tensor, "k", int) in cache
    assert cache[md.Tensor] is g.a._caller


def test_sequence_contents_pick_the_overload(lib):
    """Regression: the type key (Tensor, list) must not send [x, x] to the int[] overload
    cached by an earlier [1, 2] call."""
    lib.define("h.ints(Tensor x, int[] s) -> Tensor")
    lib.define("h.tens(Tensor x, Tensor[] ts) -> Tensor")
    lib.impl("h.ints", _tag("ints"), "CPU")
    lib.impl("h.tens", _tag("tens"), "CPU")
    h = getattr(md.ops, lib.ns).h
    x = md.asarray([1.0], device="cpu")
    assert h(x, [1, 2]) == "ints"
    assert h(x, [x, x]) == "tens"
    assert h(x, [3]) == "ints" and h(x, (x,)) == "tens"
    with pytest.raises(TypeError, match="no overload matches"):
        h(x, ["a"])


def test_overload_changes_refresh_signatures(lib):
    """Regression: removing one overload and adding another (same count) must not reuse
    the old plum signatures."""
    frag = md.library.Library(lib.ns, "FRAGMENT")
    frag.define("k.a(Tensor x) -> Tensor")
    lib.define("k.b(Tensor x, int n) -> Tensor")
    lib.impl("k.a", _tag("a"), "CPU")
    lib.impl("k.b", _tag("b"), "CPU")
    k = getattr(md.ops, lib.ns).k
    x = md.asarray([1.0], device="cpu")
    assert k(x) == "a" and k(x, 1) == "b"
    frag._destroy()
    lib.define("k.c(Tensor x, str s) -> Tensor")
    lib.impl("k.c", _tag("c"), "CPU")
    assert k(x, "s") == "c"
    with pytest.raises(TypeError, match="no overload matches"):
        k(x)


def test_no_match_lists_candidates_and_changes_nothing(lib):
    lib.define("m.one(Tensor x, int n) -> Tensor")
    lib.define("m.two(Tensor x, Tensor y) -> Tensor")
    m = getattr(md.ops, lib.ns).m
    x = md.asarray([1.0, 2.0])
    cache = dict(m.resolution_cache)
    with pytest.raises(TypeError) as info:
        m(x, "s", extra=1)
    msg = str(info.value)
    assert "m(): no overload matches the arguments (Tensor, str, extra=int)" in msg
    assert f"{lib.ns}::m.one(Tensor x, int n) -> Tensor" in msg
    assert f"{lib.ns}::m.two(Tensor x, Tensor y) -> Tensor" in msg
    assert m.resolution_cache == cache
    assert x.tolist() == [1.0, 2.0] and x._version == 0


def test_builtin_kwarg_aliases():
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert md.sum(x, dim=0).tolist() == md.sum(x, axis=0).tolist() == [4.0, 6.0]
    assert md.sum(x, 1).tolist() == [3.0, 7.0]
    with pytest.raises(TypeError, match="no overload matches"):
        md.sum(x, axis=0, dim=0)  # the same argument twice


def test_builtin_scalar_vs_tensor():
    x = md.asarray([1.0, 2.0])
    assert md.add(x, 2).tolist() == [3.0, 4.0]
    assert md.add(x, x).tolist() == [2.0, 4.0]
    assert lookup("aten::add.Tensor") is md.ops.aten.add.Tensor


def test_keyword_value_types_pick_the_overload(lib):
    """Regression: the cache key must include keyword value types, or f(x, other=2)
    followed by f(x, other=x) reuses the Scalar overload."""
    lib.define("kw.T(Tensor x, Tensor other) -> Tensor")
    lib.define("kw.S(Tensor x, Scalar other) -> Tensor")
    lib.impl("kw.T", _tag("T"), "CPU")
    lib.impl("kw.S", _tag("S"), "CPU")
    f = getattr(md.ops, lib.ns).kw
    x = md.asarray([1.0], device="cpu")
    assert f(x, other=2) == "S" and f(x, other=x) == "T" and f(x, other=2.5) == "S"


def test_positional_parameters_given_by_keyword_reach_kernels_positionally(lib):
    lib.define("pk(Tensor x, Tensor y, int n=1, *, int k=0) -> Tensor")
    seen = []

    def kernel(a, b, n=1, *, k=0):  # parameter names differ from the schema's
        seen.append((n, k))
        return a.device.wrap(a._data + b._data)

    lib.impl("pk", kernel, "CPU")
    f = getattr(md.ops, lib.ns).pk
    x = md.asarray([1.0], device="cpu")
    assert f(x, y=x).tolist() == [2.0]
    assert f(y=x, x=x, n=3, k=2).tolist() == [2.0]
    assert seen == [(1, 0), (3, 2)]
    # built-in kernels too
    assert md.add(md.asarray([1.0, 2.0]), other=2).tolist() == [3.0, 4.0]
    assert md.add(md.asarray([1.0]), other=md.asarray([1.0]), alpha=3).tolist() == [4.0]


def test_one_keyword_calls_go_positional_only_where_the_keyword_is_next(lib):
    """The packet's one-keyword fast path (Note [The hot path]): ``g(x, k=1)`` calls the
    overload as ``(x, 1)`` when ``k`` is the parameter after ``x``; a keyword-only or a
    later parameter stays a keyword; a new overload clears what was cached."""
    seen = []

    def record(*args, **kwargs):
        seen.append((args[1:], kwargs))
        return "r"

    lib.define("g(Tensor x, int k=0, int j=0, *, int m=0) -> Tensor")
    lib.impl("g", record, "CPU")
    g = getattr(md.ops, lib.ns).g
    x = md.asarray([1.0], device="cpu")
    for _ in range(2):  # the first call resolves, the second takes the cached path
        assert g(x, k=1) == g(x, j=2) == g(x, m=3) == "r"
    assert seen == [((1,), {}), ((), {"j": 2}), ((), {"m": 3})] * 2
    assert list(g._by_position) == [(md.Tensor, "k", int)]
    lib.define("g.other(Tensor x, Tensor k) -> Tensor")
    assert not g._by_position and not g.resolution_cache
    lib.impl("g.other", _tag("other"), "CPU")
    assert g(x, k=x) == "other" and g(x, k=1) == "r"


def test_keyword_calls_dispatch_from_the_packet_in_parameter_order(lib):
    """Note [Keyword calls]: keywords that all name the parameters after the positional
    arguments reach the kernel positionally, in the schema's order whatever the call's,
    from the packet's own path once resolved (a mode still sees the call); a keyword-only
    argument keeps the adapter; a new overload clears the plans."""
    seen = []

    def record(*args, **kwargs):
        seen.append((args[1:], kwargs))
        return md.asarray([float(len(seen))])

    lib.define("h(Tensor x, int k=0, int j=0, *, int m=0) -> Tensor")
    lib.impl("h", record, "CPU")
    h = getattr(md.ops, lib.ns).h
    x = md.asarray([1.0], device="cpu")
    for _ in range(2):  # the first call resolves, the second takes the plan
        h(x, j=2, k=1), h(x, 1, j=2), h(x, k=1, j=2, m=3)
    assert seen == [((1, 2), {}), ((1, 2), {}), ((1, 2), {"m": 3})] * 2
    assert set(h._by_keywords) == {(md.Tensor, "j", "k", int, int),
                                   (md.Tensor, int, "j", int)}

    class Count(md.DispatchMode):
        calls = 0

        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            Count.calls += 1
            return func(*args, **(kwargs or {}))

    with Count():
        assert h(x, j=2, k=1).tolist() == [7.0]
    assert Count.calls == 1 and seen[-1][0] == (1, 2)
    del seen[:]
    for _ in range(2):  # two keywords in the schema's order; a name no plan knows
        h(x, k=1, j=2)
        with pytest.raises(TypeError, match="q"):
            h(x, k=1, q=2)
    assert seen == [((1, 2), {})] * 2
    lib.define("h.other(Tensor x, Tensor k) -> Tensor")
    assert not h._by_keywords
    # the built-in reductions: the same values as positional calls
    y = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert md.sum(y, 1, keepdims=True).tolist() == [[3.0], [7.0]]
    assert md.sum(y, keepdims=True, axis=0).tolist() == [[4.0, 6.0]]
    assert md.sum(y, 0, keepdims=True).tolist() == [[4.0, 6.0]]


# -- one name, two meanings (issue 25 item 4; Note [Torch methods] in ops/_methods.py) ------


def _np(t):
    from _helpers import to_numpy

    return to_numpy(t)


def test_sort_method_and_torch_spellings_return_values_and_indices():
    import numpy as np

    a = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    x = md.asarray(a)
    for got in (x.sort(dim=1), x.sort(1), x.sort(), md.sort(x, dim=1), md.sort(x, 1)):
        values, indices = got  # unpacking gives (values, indices), never rows
        np.testing.assert_array_equal(_np(values), np.sort(a, axis=1))
        np.testing.assert_array_equal(_np(indices), np.argsort(a, axis=1))
    assert got.values is values and got.indices is indices
    for got in (md.sort(x), md.sort(x, axis=1)):  # the Array API's: values only
        assert isinstance(got, md.Tensor)
        np.testing.assert_array_equal(_np(got), np.sort(a, axis=1))
    values, _ = x.sort(0, descending=True)
    np.testing.assert_array_equal(_np(values), -np.sort(-a, axis=0))


def test_std_and_var_methods_default_to_bessels_correction():
    import numpy as np

    a = np.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    x = md.asarray(a)
    for name in ("std", "var"):
        ref = getattr(np, name)
        meth, fn = getattr(x, name), getattr(md, name)
        cases = [  # (result, ddof, axis)
            (meth(), 1, None), (meth(1), 1, 1), (meth(dim=1, keepdim=True), 1, 1),
            (meth(unbiased=False), 0, None), (meth(0, False), 0, 0),
            (fn(x, dim=0, correction=0), 0, 0), (fn(x, 1), 1, 1),
            (fn(x), 0, None),  # the Array API's
            (fn(x, axis=1, correction=1), 1, 1),
        ]
        for got, ddof, axis in cases:
            np.testing.assert_allclose(_np(got).reshape(-1),
                                       ref(a, axis=axis, ddof=ddof).reshape(-1), rtol=1e-6)
        with pytest.raises(TypeError, match="no overload matches"):  # mixed spellings
            getattr(md, name)(x, axis=1, keepdim=True)


def test_nonzero_method_dot_einsum_tensordot_randint_as_pytorch():
    import numpy as np

    a = np.array([[0.0, 1.0, 2.0], [3.0, 0.0, 0.0]])
    x = md.asarray(a)
    np.testing.assert_array_equal(_np(x.nonzero()), np.argwhere(a))  # (n, ndim)
    assert isinstance(md.nonzero(x), tuple)  # the Array API's
    c = md.asarray([1j, 2.0])
    assert md.dot(c, c).item() == 3.0  # torch.dot: no conjugation (vecdot conjugates)
    assert md.vecdot(c, c).item() == 5.0
    x = md.asarray(a, device="cpu")  # einsum is not in the standard (the loopback has none)
    y = md.asarray(np.arange(6.0).reshape(2, 3), device="cpu")
    for got in (md.einsum("ij,kj->ik", x, y), md.einsum("ij,kj->ik", [x, y]),
                md.tensordot(x, y.mT, dims=1)):
        np.testing.assert_allclose(_np(got), a @ np.arange(6.0).reshape(2, 3).T)
    r = md.randint(10, (3,))
    assert r.shape == (3,) and r.dtype is md.int64 and 0 <= int(r.min()) <= int(r.max()) < 10
    assert md.randint(5, 7, (4,)).shape == (4,)


def _frames_entered(fn):
    """The code objects of the Python frames ``fn()`` enters."""
    import sys

    seen = set()

    def profile(frame, event, arg):
        if event == "call":
            seen.add(frame.f_code)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return seen


def test_long_calls_run_a_learned_plan_by_their_types(lib):
    """Note [Plans of long calls]: a call of five positional arguments, with or without a
    keyword-only argument too, resolves once; then the packet function dispatches on the
    Tensors the key's types place (a None skipped) and calls the kernel itself, without
    the overload's caller."""
    seen = []

    def cpu(x, w, n, e, t, **kwargs):
        seen.append(("cpu", w is None, n, e, t, kwargs))
        return "cpu"

    def autograd(x, w, n, e, t, **kwargs):
        seen.append(("autograd", w is None, n, e, t, kwargs))
        return "autograd"

    lib.define("lp(Tensor x, Tensor? w, int n, float e, bool t, *, int k=0) -> Tensor")
    lib.impl("lp", cpu, "CPU")
    lib.impl("lp", autograd, "Autograd")
    f = getattr(md.ops, lib.ns).lp
    caller = f.default.caller.__code__
    x = md.asarray([1.0], device="cpu")
    w, wg = md.asarray([2.0], device="cpu"), md.asarray([2.0], device="cpu",
                                                       requires_grad=True)
    assert f(x, None, 1, 0.5, True) == "cpu"  # resolves
    frames = _frames_entered(lambda: f(x, None, 1, 0.5, True))
    assert caller not in frames and cpu.__code__ in frames
    # A Tensor where None was is another key: its plan reads w's keys
    assert f(x, wg, 1, 0.5, True) == f(x, wg, 1, 0.5, True) == "autograd"
    assert f(x, w, 1, 0.5, True) == "cpu"
    # Keyword-only arguments reach the kernel as keywords
    assert f(x, None, 1, 0.5, True, k=3) == "cpu"
    frames = _frames_entered(lambda: f(x, None, 1, 0.5, True, k=3))
    assert caller not in frames
    assert seen[-1] == ("cpu", True, 1, 0.5, True, {"k": 3})
    # A type the learned key does not have resolves, and raises as before
    with pytest.raises(TypeError, match="no overload matches"):
        f(x, None, 1, 0.5, "yes")
    with pytest.raises(TypeError, match="no overload matches"):
        f(x, None, 1.5, 0.5, True)  # a float where the int was

    class Sub(md.Tensor):
        pass

    s = x.as_subclass(Sub)
    for _ in range(2):  # a subclass keeps the caller
        frames = _frames_entered(lambda: f(s, None, 1, 0.5, True))
        assert caller in frames
    with md.no_grad():  # the thread-local keys are read on each call
        assert f(x, wg, 1, 0.5, True) == "cpu"


@pytest.mark.parametrize("n", [5, 6, 7, 9])
def test_long_calls_of_each_length_run_their_plan(lib, n):
    """Five and six positional arguments build their key and arguments without a star
    unpacking, longer ones with it (Note [Plans of long calls]): each reaches the kernel
    with its arguments in order, runs its plan from the second call, and a type off the
    key resolves and raises."""
    ints = ", ".join(f"int a{i}" for i in range(n - 2))
    lib.define(f"ll{n}(Tensor x, Tensor? w, {ints}) -> Tensor")
    seen = []

    def cpu(*args):
        seen.append(args)
        return "cpu"

    lib.impl(f"ll{n}", cpu, "CPU")
    f = getattr(getattr(md.ops, lib.ns), f"ll{n}")
    caller = f.default.caller.__code__
    x = md.asarray([1.0], device="cpu")
    rest = tuple(range(10, 10 + n - 2))
    for w in (None, x):
        assert f(x, w, *rest) == "cpu"
        frames = _frames_entered(lambda w=w: f(x, w, *rest))
        assert caller not in frames and seen[-1] == (x, w, *rest)
    with pytest.raises(TypeError, match="no overload matches"):
        f(x, None, *rest[:-1], "no")
    assert len(seen) == 4


def test_long_call_plans_follow_the_types_and_the_overloads(lib):
    """A float where an int was picks its own overload; a more specific overload defined
    after the plans were learned replaces them (``on_change``)."""
    lib.define("lo.scalar(Tensor x, Tensor y, Tensor z, Scalar n, Scalar m) -> Tensor")
    lib.impl("lo.scalar", _tag("scalar"), "CPU")
    f = getattr(md.ops, lib.ns).lo
    x = md.asarray([1.0], device="cpu")
    for _ in range(2):
        assert f(x, x, x, 1, 2) == f(x, x, x, 1.5, 2) == "scalar"
    lib.define("lo.ints(Tensor x, Tensor y, Tensor z, int n, int m) -> Tensor")
    lib.impl("lo.ints", _tag("ints"), "CPU")
    for _ in range(2):
        assert f(x, x, x, 1, 2) == "ints" and f(x, x, x, 1.5, 2) == "scalar"
    y = md.asarray([[1.0], [1.0], [1.0], [1.0]], device="cpu")
    args = ([2, 2], [2, 2], [1, 1], [0, 0], [1, 1])
    assert md.ops.aten.col2im(y, *args).shape == md.ops.aten.col2im(y, *args).shape
    handle = md.library.Library("aten", "IMPL")
    with pytest.warns(UserWarning, match="Overriding"):
        h = handle.impl("col2im", lambda *args: "replaced", "CPU")
    try:  # a kernel registered after the plan was learned is called
        assert md.ops.aten.col2im(y, *args) == "replaced"
    finally:
        h.remove()
    assert md.ops.aten.col2im(y, *args).shape == (1, 2, 2)


def test_two_tensors_and_a_keyword_run_their_plan(lib):
    """Two positional arguments and one keyword (``isin(x, t, invert=True)``) look their
    plan up by the general key, built without its star unpacking: the kernel is called
    from the packet function with the keyword, a None or another type resolves again."""
    seen = []

    def cpu(x, y, *, flag=False):
        seen.append(("cpu", flag))
        return "cpu"

    lib.define("kw2(Tensor x, Tensor? y, *, bool flag=False) -> Tensor")
    lib.impl("kw2", cpu, "CPU")
    lib.impl("kw2", lambda x, y, *, flag=False: "autograd", "Autograd")
    f = getattr(md.ops, lib.ns).kw2
    caller = f.default.caller.__code__
    x = md.asarray([1.0], device="cpu")
    xg = md.asarray([1.0], device="cpu", requires_grad=True)
    assert f(x, x, flag=True) == "cpu"  # resolves and learns
    frames = _frames_entered(lambda: f(x, x, flag=True))
    assert caller not in frames and cpu.__code__ in frames and seen[-1] == ("cpu", True)
    assert f(x, xg, flag=True) == f(xg, x, flag=False) == "autograd"  # keys of both
    assert f(x, None, flag=True) == f(x, None, flag=True) == "cpu"  # a plan of its own
    with pytest.raises(TypeError, match="no overload matches"):
        f(x, x, flag="yes")


def test_an_omitted_trailing_optional_tensor_keeps_the_fast_caller():
    """A ``Tensor?`` with a default left out (``bincount(x)``) is read as None by the
    caller, without the slow key-set walk; given by keyword it is still dispatched on."""
    x = md.asarray([0, 1, 1, 3], device="cpu")
    w = md.asarray([1.0, 2.0, 3.0, 4.0], device="cpu", requires_grad=True)
    assert md.bincount(x).tolist() == [1, 2, 0, 1]
    y = md.bincount(x, weights=w)
    assert y.tolist() == [1.0, 5.0, 0.0, 4.0] and y.grad_fn is not None
    assert md.bincount(x, None, 6).tolist() == [1, 2, 0, 1, 0, 0]


def test_two_keywords_off_the_positional_order_run_their_plan(lib):
    """Two keywords that are not the next parameters (``matrix_norm(x, ord=1,
    keepdims=True)``) miss the keyword plans and run the long calls' plan, by the key the
    two-keyword branch built: either order, each value type, and grad, as resolved."""
    seen = []

    def cpu(x, n=1, d=0, *, k=False, m=None):
        seen.append((n, d, k, m))
        return "cpu"

    lib.define("kw3(Tensor x, int n=1, int d=0, *, bool k=False, Scalar? m=None) -> Tensor")
    lib.impl("kw3", cpu, "CPU")
    lib.impl("kw3", lambda x, n=1, d=0, *, k=False, m=None: "autograd", "Autograd")
    f = getattr(md.ops, lib.ns).kw3
    x = md.asarray([1.0], device="cpu")
    xg = md.asarray([1.0], device="cpu", requires_grad=True)
    for _ in range(2):
        assert f(x, k=True, m=2) == f(x, m=2.5, k=False) == "cpu"
        assert f(xg, k=True, m=2) == "autograd"
    assert seen[-2:] == [(1, 0, True, 2), (1, 0, False, 2.5)]
    with pytest.raises(TypeError, match="no overload matches"):
        f(x, k="yes", m=2)
    a = md.asarray([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    for _ in range(2):
        assert md.linalg.matrix_norm(a, ord=1, keepdims=True).tolist() == [[15.0]]
        assert md.linalg.matrix_norm(a, keepdims=False, ord=float("inf")).tolist() == 21.0
