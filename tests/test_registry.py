"""The registry: ops, overloads, packets, dispatch tables, the precedence ladder, fallbacks,
fallthrough, redispatch, with_keyset kernels and the dispatch trace."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.dispatch import keys as _keys
from mdtensor.dispatch import tls as _tls
from mdtensor.dispatch.keys import DispatchKey as K
from mdtensor.dispatch.keys import DispatchKeySet
from mdtensor.dispatch.namespaces import OpOverloadPacket, lookup
from mdtensor.dispatch.operators import dispatcher

_counter = itertools.count()


def _ns(lib):
    return getattr(md.ops, lib.ns)


def _snapshot(op):
    return {k: list(v) for k, v in op.registered().items()}


def _fallback_snapshot():
    return {k: list(v) for k, v in dispatcher.fallbacks.items() if v}


# ---------------------------------------------------------------------------------------
# Ops, overloads and packets


def test_define_creates_packet_and_overloads(lib):
    lib.define("f(Tensor x) -> Tensor")
    lib.define("f.Scalar(Tensor x, Scalar s) -> Tensor")
    packet = _ns(lib).f
    assert isinstance(packet, OpOverloadPacket)
    assert sorted(packet.overloads()) == ["Scalar", "default"]
    assert packet.default.name == f"{lib.ns}::f"
    assert packet.Scalar.name == f"{lib.ns}::f.Scalar"
    assert packet.Scalar.overloadpacket is packet
    assert packet.Scalar.overload_name == "Scalar" and packet.default.overload_name == "default"
    assert lookup(f"{lib.ns}::f.Scalar") is packet.Scalar
    assert lookup(f"{lib.ns}::f") is packet
    with pytest.raises(ValueError, match="has no overload 'nope'"):
        lookup(f"{lib.ns}::f.nope")
    with pytest.raises(ValueError, match="no operator named"):
        lookup(f"{lib.ns}::missing")


def test_top_level_functions_call_the_aten_packets():
    assert md.add.op is md.ops.aten.add and md.add is md.ops.aten.add._call
    assert md.ops.aten.add.Tensor.name == "aten::add.Tensor"
    assert lookup("add") is md.ops.aten.add
    assert lookup("aten::add.Tensor") is md.ops.aten.add.Tensor


def test_destroy_removes_ops_and_packets():
    lib = md.library.Library(f"regtest{next(_counter)}", "DEF")
    lib.define("g(Tensor x) -> Tensor")
    ns = lib.ns
    assert f"{ns}::g" in dispatcher.overloads
    lib._destroy()
    assert f"{ns}::g" not in dispatcher.overloads
    with pytest.raises(AttributeError, match="does not exist"):
        getattr(md.ops, ns).g  # noqa: B018


def test_define_twice_is_an_error_and_changes_nothing(lib):
    lib.define("h(Tensor x) -> Tensor")
    op = _ns(lib).h.default
    before = dict(dispatcher.overloads)
    with pytest.raises(RuntimeError, match="already defined"):
        lib.define("h(Tensor y) -> Tensor")
    assert dispatcher.overloads == before
    assert _ns(lib).h.default is op


# ---------------------------------------------------------------------------------------
# The ladder against a reference model written from DESIGN.md section 2 and
# docs/ARCHITECTURE.md "The precedence ladder" (not from _ops).

_BACKENDS = _keys.BACKEND_COMPONENTS


def _kind(key):
    """('dense'|'sparse'|'autograd'|'other', backend or None) from the key's *name*."""
    name = key.name
    for b in _BACKENDS:
        if name == b:
            return "dense", b
        if name == "Sparse" + b:
            return "sparse", b
        if name == "Autograd" + b:
            return "autograd", b
    return "other", None


def reference(key, registered, fallbacks, array_api):
    """Which registration serves runtime key ``key``: a key of ``registered``,
    ``"fallback"``, or None (missing)."""
    kind, backend = _kind(key)
    # 1. direct
    if key in registered:
        return key
    # 2. CEA for backend keys, then ArrayAPI for Dense keys of Array API backends
    if kind in ("dense", "sparse") and K.CompositeExplicitAutograd in registered:
        return K.CompositeExplicitAutograd
    if kind == "dense" and K.ArrayAPI in registered and backend in array_api:
        return K.ArrayAPI
    # 3. CIA: backend keys, Functionalize, Python; autograd keys only when the backend
    #    has no kernel of its own (direct dense/sparse, CEA, or ArrayAPI for that backend)
    if K.CompositeImplicitAutograd in registered:
        if kind in ("dense", "sparse") or key in (K.Functionalize, K.Python):
            return K.CompositeImplicitAutograd
        if kind == "autograd":
            own = ({K[backend], K["Sparse" + backend], K.CompositeExplicitAutograd}
                   & set(registered))
            if own or (K.ArrayAPI in registered and backend in array_api):
                pass
            else:
                return K.CompositeImplicitAutograd
    # 4. Autograd alias
    if kind == "autograd" and K.Autograd in registered:
        return K.Autograd
    # 5. backend fallback
    if fallbacks.get(key):
        return "fallback"
    # 6. missing
    return None


_DIRECT = [K.CPU, K.SparseCPU, K.AutogradCPU, K.Meta, K.AutogradMeta, K.JAX,
           K.PrivateUse1, K.Python, K.Functionalize, K.Batched]
_ALIASES = [K.CompositeExplicitAutograd, K.CompositeImplicitAutograd, K.ArrayAPI, K.Autograd]
_FALLBACK_KEYS = [K.PrivateUse3, K.SparsePrivateUse3, K.AutogradPrivateUse3, K.Batched,
                  K.PreDispatch]


def _kernel_fn(tag):
    def fn(*args, **kwargs):
        return tag
    fn.__qualname__ = f"kernel_{tag}"
    return fn


@settings(max_examples=40, deadline=None)
@given(registered=st.sets(st.sampled_from(_DIRECT + _ALIASES)),
       fallbacks=st.dictionaries(st.sampled_from(_FALLBACK_KEYS), st.booleans(),
                                 max_size=3))
def test_computed_table_equals_reference_model(registered, fallbacks):
    with md.library.Library(f"ladder_ref{next(_counter)}", "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        fns = {}
        for key in registered:
            fns[key] = _kernel_fn(key.name)
            lib.impl("f", fns[key], key)
        fb_kernels = {}
        for key, through in fallbacks.items():
            fn = md.library.fallthrough_kernel if through else (
                lambda op, ks, args, kwargs: "boxed")
            lib.fallback(fn, key)
            fb_kernels[key] = fn
        op = _ns(lib).f.default
        array_api = set(dispatcher.array_api_backends)
        table = op.computed_table()
        assert set(table) == set(_keys.RUNTIME_KEYS)
        for key, (kernel, rung) in table.items():
            expected = reference(key, registered, dispatcher.fallbacks, array_api)
            assert op.resolve(key) == (kernel, rung)
            if expected is None:
                assert kernel is None and rung.startswith("6."), (key, kernel, rung)
            elif expected == "fallback":
                assert kernel is dispatcher.fallbacks[key][-1], (key, rung)
                assert rung.startswith("5.")
                if key in fb_kernels:
                    assert kernel.fn is fb_kernels[key]
            else:
                assert kernel is not None and kernel.fn is fns[expected], (key, kernel, rung)
                assert kernel.key is expected
    # cleanup restored the global fallbacks
    for key in fallbacks:
        assert all(k.origin != repr(lib) for k in dispatcher.fallbacks.get(key, []))


@settings(max_examples=25, deadline=None)
@given(registered=st.sets(st.sampled_from([K.CPU, K.AutogradCPU, K.Python,
                                           K.CompositeExplicitAutograd,
                                           K.CompositeImplicitAutograd, K.Autograd]),
                          min_size=1),
       include_python=st.booleans(), requires_grad=st.booleans())
def test_calls_run_the_kernel_the_model_picks(registered, include_python, requires_grad):
    """End to end: the call key set's highest key, skipping fallthroughs, runs the kernel
    the reference ladder picks for it."""
    with md.library.Library(f"ladder_call{next(_counter)}", "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        for key in registered:
            lib.impl("f", _kernel_fn(key.name), key)
        op = _ns(lib).f.default
        x = md.asarray([1.0], requires_grad=requires_grad)
        ks = x._ks | _tls.dispatch_tls.get()[0]
        if include_python:
            ks |= K.Python.value
        ks &= _tls.dispatch_tls.get()[1]
        array_api = dispatcher.array_api_backends
        expected = "missing"
        while True:
            key = _keys.highest_key(ks)
            if key is None:
                break
            who = reference(key, registered, dispatcher.fallbacks, array_api)
            if who == "fallback":
                if dispatcher.fallbacks[key][-1].is_fallthrough:
                    ks = _keys.remove_key(ks, key)
                    continue
                expected = "boxed"
            elif who is not None:
                expected = who.name
            break
        guard = _tls.IncludeGuard(K.Python) if include_python else _tls.IncludeGuard(0)
        with guard:
            if expected == "missing":
                with pytest.raises(NotImplementedError, match=op.name):
                    op(x)
            elif expected != "boxed":
                assert op(x) == expected


# ---------------------------------------------------------------------------------------
# Fallbacks, fallthrough, redispatch, with_keyset


def test_fallthrough_direct_registration_is_masked_out(lib):
    lib.define("ft(Tensor x) -> Tensor")
    lib.impl("ft", lambda x: x.device.wrap(x._data * 2), "CPU")
    op = _ns(lib).ft.default
    with lib.impl("ft", md.library.fallthrough_kernel, "Python"):
        with _tls.IncludeGuard(K.Python):
            assert op(md.asarray([1.0], device="cpu")).tolist() == [2.0]
        assert not op.mask & K.Python.value
    op(md.asarray([1.0], device="cpu"))
    assert op.mask & K.Python.value  # the registration's removal restored the key


def test_fallthrough_for_backend_key_skips_to_next_key(lib):
    lib.define("fts(Tensor x) -> Tensor")
    calls = []
    lib.impl("fts", lambda x: calls.append("cpu") or x.device.wrap(x._data), "CPU")
    lib.impl("fts", lambda ks, x: calls.append("python") or
             _ns(lib).fts.default.redispatch(ks & _keys.AFTER_PYTHON, x),
             "Python", with_keyset=True)
    with _tls.IncludeGuard(K.Python):
        _ns(lib).fts(md.asarray([1.0], device="cpu"))
    assert calls == ["python", "cpu"]


def test_boxed_fallback_and_removal(lib):
    lib.define("bf(Tensor x, *, int k=1) -> Tensor")
    lib.impl("bf", lambda x, k=1: x.device.wrap(x._data + k), "CPU")
    seen = []

    def boxed(op, ks, args, kwargs):
        seen.append((op, DispatchKeySet(ks), len(args), dict(kwargs)))
        return op.redispatch(ks & _keys.AFTER_BATCHED, *args, **kwargs)

    op = _ns(lib).bf.default
    before = _fallback_snapshot()
    with _tls.IncludeGuard(K.Batched):
        with lib.fallback(boxed, "Batched"):
            out = op(md.asarray([1.0], device="cpu"), k=4)
        assert _fallback_snapshot() == before
        out2 = op(md.asarray([1.0], device="cpu"), k=4)  # the built-in Batched fallback again
    assert out.tolist() == [5.0] and out2.tolist() == [5.0]
    assert len(seen) == 1 and seen[0][0] is op and K.Batched in seen[0][1]
    assert seen[0][2:] == (1, {"k": 4})


def test_redispatch_does_not_recompute_keyset(lib):
    lib.define("rd(Tensor x) -> Tensor")
    lib.impl("rd", lambda x: "cpu", "CPU")
    lib.impl("rd", lambda x: "meta", "Meta")
    op = _ns(lib).rd.default
    x = md.asarray([1.0], device="cpu")
    # A key set naming Meta runs the Meta kernel even though x is a CPU tensor.
    assert op.redispatch(K.Meta.value, x) == "meta"
    assert op.redispatch(K.CPU.value, x) == "cpu"
    assert op(x) == "cpu"


def test_with_keyset_kernel_receives_int_keyset(lib):
    lib.define("wk(Tensor x) -> Tensor")
    got = []
    lib.impl("wk", lambda ks, x: got.append(ks) or "ok", "CPU", with_keyset=True)
    x = md.asarray([1.0], device="cpu")
    assert _ns(lib).wk(x) == "ok"
    assert isinstance(got[0], int) and K.CPU in DispatchKeySet(got[0])


def test_table_is_cached_and_cleared_on_registration(lib):
    lib.define("tc(Tensor x) -> Tensor")
    lib.impl("tc", lambda x: "first", "CompositeExplicitAutograd")
    op = _ns(lib).tc.default
    x = md.asarray([1.0], device="cpu")
    assert op(x) == "first"
    assert op.table  # filled
    with lib.impl("tc", lambda x: "direct", "CPU"):
        assert op(x) == "direct"
    assert op(x) == "first"


def test_mixed_devices_error(lib):
    lib.define("mx(Tensor a, Tensor b) -> Tensor")
    lib.impl("mx", lambda a, b: "cpu", "CPU")
    lib.impl("mx", lambda a, b: "meta", "Meta")
    a = md.asarray([1.0])
    b = md.empty((1,), device="meta")
    with pytest.raises(ValueError, match="same device"):
        _ns(lib).mx(a, b)


# ---------------------------------------------------------------------------------------
# Errors leave everything unchanged


def test_missing_kernel_names_op_key_and_registered_keys(lib):
    lib.define("miss(Tensor x) -> Tensor")
    lib.impl("miss", lambda x: x, "SparseMeta")
    lib.impl("miss", lambda x: x, "AutogradJAX")
    x = md.asarray([1.0, 2.0])
    op = _ns(lib).miss.default
    kernels = _snapshot(op)
    state = _tls.local_state()
    with pytest.raises(NotImplementedError) as info:
        op(x)
    msg = str(info.value)
    assert op.name in msg and f"needed a kernel for {x.device.backend.key}" in msg
    assert "SparseMeta" in msg and "AutogradJAX" in msg
    assert _snapshot(op) == kernels and _tls.local_state() == state
    assert x.tolist() == [1.0, 2.0] and x._version == 0


def test_registering_for_non_runtime_key_is_an_error(lib):
    lib.define("nr(Tensor x) -> Tensor")
    op = _ns(lib).nr.default
    for bad in ("CPUBit", "Dense", "AutogradFunctionality"):
        before = _snapshot(op)
        with pytest.raises(ValueError, match="not a runtime or alias key"):
            lib.impl("nr", lambda x: x, bad)
        assert _snapshot(op) == before
    with pytest.raises(ValueError, match="unknown dispatch key"):
        lib.impl("nr", lambda x: x, "CPUU")
    assert _snapshot(op) == {}
    before = _fallback_snapshot()
    with pytest.raises(ValueError, match="not a runtime or alias key"):
        lib.fallback(lambda *a: None, "Dense")
    assert _fallback_snapshot() == before


def test_non_tensor_argument_for_tensor_param(lib):
    lib.define("tt(Tensor x, Tensor y) -> Tensor")
    lib.impl("tt", lambda x, y: "ok", "CPU")
    op = _ns(lib).tt.default
    with pytest.raises(TypeError, match=r"argument 'y' must be a Tensor, got int"):
        op(md.asarray([1.0]), 3)


def test_trace_switch_prints_each_hop(lib, capsys):
    lib.define("tr(Tensor x) -> Tensor")
    lib.impl("tr", lambda x: x.device.wrap(x._data), "CPU")
    old = md.library.set_dispatch_trace(True)
    try:
        _ns(lib).tr(md.asarray([1.0], device="cpu"))
    finally:
        md.library.set_dispatch_trace(old)
    err = capsys.readouterr().err
    assert f"{lib.ns}::tr" in err and "-> CPU" in err and "DispatchKeySet(" in err
    _ns(lib).tr(md.asarray([1.0], device="cpu"))
    assert f"{lib.ns}::tr" not in capsys.readouterr().err
