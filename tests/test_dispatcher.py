"""Keys, key sets, thread-local state, the registry, dispatch tables and redispatch."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor.dispatch import keys as _keys
from mdtensor.dispatch import tls as _tls
from mdtensor.dispatch.keys import DispatchKey as K
from mdtensor.dispatch.keys import DispatchKeySet
from mdtensor.dispatch.operators import dispatcher

# ---------------------------------------------------------------------------------------
# Keys


def test_key_order_is_the_design_order():
    order = [name for name, _ in reversed(_keys.FUNCTIONALITIES)]
    assert order == ["PreDispatch", "Batched", "Autocast", "AutogradFunctionality",
                     "ADInplaceOrView", "Functionalize", "Python", "BackendSelect", "Sparse",
                     "Dense"]
    assert _keys.BACKEND_COMPONENTS[-1] == "Meta"


def test_runtime_keys_and_properties():
    assert K.AutogradCPU.functionality == "AutogradFunctionality"
    assert K.AutogradCPU.backend == "CPU"
    assert K.CPU.is_runtime and K.SparseJAX.is_runtime and K.Python.is_runtime
    assert not K.Dense.is_runtime and not K.CPUBit.is_runtime
    assert K.Autograd.is_alias and K.ArrayAPI.is_alias
    assert _keys.runtime_keys(K.Autograd) == _keys.AUTOGRAD_KEYS
    assert K.CPU in _keys.runtime_keys(K.CompositeExplicitAutograd)
    with pytest.raises(ValueError, match="not a runtime or alias key"):
        _keys.runtime_keys(K.Dense)


def test_keyset_operations_and_repr():
    ks = DispatchKeySet([K.CPU, K.AutogradCPU, K.ADInplaceOrView])
    assert repr(ks) == "DispatchKeySet(AutogradCPU, ADInplaceOrView, CPU)"
    assert ks.highest_priority_key() is K.AutogradCPU
    assert list(ks) == [K.AutogradCPU, K.ADInplaceOrView, K.CPU]
    assert K.CPU in ks and K.AutogradJAX not in ks
    assert (ks - K.AutogradCPU).highest_priority_key() is K.ADInplaceOrView
    assert (ks | K.Python) == DispatchKeySet([K.CPU, K.AutogradCPU, K.ADInplaceOrView, K.Python])
    assert DispatchKeySet(ks.raw & _keys.AFTER_AUTOGRAD) == DispatchKeySet(
        [K.ADInplaceOrView, K.CPU])
    with pytest.raises(AttributeError):
        ks._bits = 0
    meta_cpu = DispatchKeySet([K.CPU, K.Meta])
    assert meta_cpu.highest_priority_key() is K.Meta  # Meta is the highest backend bit


@given(st.sets(st.sampled_from(list(_keys.RUNTIME_KEYS)), max_size=6))
def test_keyset_iteration_is_priority_order(keys):
    ks = DispatchKeySet(keys)
    listed = list(ks)
    ranks = [_keys.RUNTIME_KEYS.index(k) for k in listed]
    assert ranks == sorted(ranks)
    if listed:
        assert ks.highest_priority_key() is listed[0]


# ---------------------------------------------------------------------------------------
# Thread-local state


def test_guards_restore_exactly_even_on_error():
    before = _tls.local_state()
    with pytest.raises(RuntimeError):
        with _tls.ExcludeGuard(K.AutogradFunctionality), _tls.IncludeGuard(K.Python):
            assert K.Python in _tls.included()
            raise RuntimeError("boom")
    assert _tls.local_state() == before


def test_tls_and_modes_do_not_leak_across_threads():
    seen = {}
    barrier = threading.Barrier(2)

    def other():
        barrier.wait()
        seen["inc"], seen["exc"] = _tls.local_state()
        seen["modes"] = md.modes.active_modes()
        seen["grad"] = md.is_grad_enabled()

    t = threading.Thread(target=other)
    t.start()
    with md.no_grad(), _tls.IncludeGuard(K.Python), md.modes.LoggingMode():
        barrier.wait()
        t.join()
    assert K.Python not in seen["inc"] and seen["modes"] == () and seen["grad"] is True


# ---------------------------------------------------------------------------------------
# Registry and call path


def _cpu(fn):
    return fn


def test_namespace_functions_are_the_packets_calls():
    # Note [Packet functions]: md.sum is a plain function standing for md.ops.aten.sum.
    import inspect

    packet = md.ops.aten.sum
    assert md.sum.op is packet and md.sum is packet.function and md.sum.__name__ == "sum"
    assert str(inspect.signature(md.sum)) == str(inspect.signature(packet))
    assert "sum(Tensor self" in md.sum.__doc__
    assert md.library.dump_text(md.sum) == md.library.dump_text(packet)
    assert md.linalg.inv.op is md.ops.aten.linalg_inv
    x = md.asarray([1.0, 2.0], device="cpu")
    assert md.sum(x).item() == packet(x).item() == 3.0
    # an overload is called through its caller too, and shows its schema's signature
    add = md.ops.aten.add.Tensor
    assert str(inspect.signature(add)) == "(self, other, *, alpha=1)"
    assert add(x, x, alpha=2).tolist() == [3.0, 6.0] and callable(add)
    with pytest.raises(AttributeError, match="'aten::nope' does not exist"):
        md.ops.aten._calls.nope  # noqa: B018


def test_define_and_namespaces(lib):
    name = lib.define("twice(Tensor x) -> Tensor")
    assert name == "twice"
    packet = getattr(md.ops, lib.ns).twice
    op = packet.default
    assert op.name == f"{lib.ns}::twice" and packet.overloads() == ["default"]
    assert md.add.op is md.ops.aten.add and md.ops.aten.add.Tensor.name == "aten::add.Tensor"
    with pytest.raises(AttributeError, match="does not exist"):
        getattr(md.ops, lib.ns).nope  # noqa: B018


def test_missing_kernel_error_names_op_key_and_registered_keys(lib):
    lib.define("only_meta(Tensor x) -> Tensor")
    lib.impl("only_meta", lambda x: x.device.wrap(x._data), "Meta")
    x = md.asarray([1.0])
    with pytest.raises(NotImplementedError) as info:
        getattr(md.ops, lib.ns).only_meta(x)
    msg = str(info.value)
    key = x.device.backend.key  # CPU, JAX, PrivateUse1 (loopback), ...
    assert f"{lib.ns}::only_meta" in msg and f"needed a kernel for {key}" in msg
    assert "Meta" in msg and f"Library('{lib.ns}', 'IMPL')" in msg
    assert msg.count(",") < 20  # short, not a wall of keys


def test_a_call_without_tensors_runs_the_composite_kernel(lib):
    # Note [Calls without a key]: an empty Tensor list gives no backend; the composite
    # kernel serves the call (PyTorch's Undefined key), an op with backend kernels raises
    assert md.broadcast_arrays() == [] and md.broadcast_arrays(md.ones(2))[0].shape == (2,)
    lib.define("total(Tensor[] ts) -> Tensor[]")
    lib.define("joined(Tensor[] ts) -> Tensor[]")
    lib.define("backend_only(Tensor[] ts) -> Tensor[]")
    ns = getattr(md.ops, lib.ns)
    lib.impl("total", lambda ts: [md.sum(t) for t in ts], "CompositeImplicitAutograd")
    lib.impl("joined", lambda ts: list(ts), "CompositeExplicitAutograd")
    lib.impl("backend_only", lambda ts: list(ts), "CPU")
    assert ns.total([]) == [] and ns.joined([]) == []
    assert ns.total([md.ones(3)])[0].item() == 3.0
    with pytest.raises(ValueError, match=f"{lib.ns}::backend_only: expected a non-empty list"):
        ns.backend_only([])
    with pytest.raises(ValueError, match="cat: expected a non-empty list"):
        md.concat([])  # torch.cat([]) raises too: cat has backend kernels only


def test_redispatch_with_keyset_kernel(lib):
    lib.define("layered(Tensor x) -> Tensor")
    calls = []

    def below(x):
        calls.append("cpu")
        return x.device.wrap(x._data + 1)

    def above(ks, x):
        calls.append(("python", DispatchKeySet(ks)))
        return getattr(md.ops, lib.ns).layered.default.redispatch(ks & _keys.AFTER_PYTHON, x)

    lib.impl("layered", below, "CPU")
    lib.impl("layered", above, "Python", with_keyset=True)
    with _tls.IncludeGuard(K.Python):
        out = getattr(md.ops, lib.ns).layered(md.asarray([1.0], device="cpu"))
    assert out.tolist() == [2.0]
    assert calls[0][0] == "python" and K.Python in calls[0][1] and calls[1] == "cpu"


def test_fallthrough_removes_key_from_mask(lib):
    lib.define("ft(Tensor x) -> Tensor")
    lib.impl("ft", lambda x: x.device.wrap(x._data * 2), "CPU")
    op = getattr(md.ops, lib.ns).ft.default
    op(md.asarray([1.0], device="cpu"))
    assert not op.mask & K.ADInplaceOrView.value  # fallthrough by default
    assert not op.mask & K.BackendSelect.value


def test_boxed_fallback_receives_op_keyset_args(lib):
    lib.define("fb(Tensor x, int k=3) -> Tensor")
    lib.impl("fb", lambda x, k=3: x.device.wrap(x._data + k), "CPU")
    seen = []

    def fallback(op, ks, args, kwargs):
        seen.append((op.name, args[1:], kwargs))
        return op.redispatch(ks & _keys.after_mask("PreDispatch"), *args, **kwargs)

    with _tls.IncludeGuard(K.PreDispatch):
        with lib.fallback(fallback, "PreDispatch"):
            out = getattr(md.ops, lib.ns).fb(md.asarray([1.0], device="cpu"), k=5)
    # k is positional in the schema, so it arrives positionally (as in PyTorch)
    assert out.tolist() == [6.0] and seen == [(f"{lib.ns}::fb", (5,), {})]
    assert dispatcher.fallbacks[K.PreDispatch][-1].is_fallthrough


def test_trace_env_var_prints_hops():
    code = ("import mdtensor as md; x = md.asarray([1.0], requires_grad=True); md.add(x, 2)")
    env = dict(os.environ, MDTENSOR_SHOW_DISPATCH_TRACE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       check=True)
    lines = [ln for ln in r.stderr.splitlines() if "aten::add.Scalar" in ln]
    assert "-> AutogradCPU" in lines[0] and "-> CPU" in lines[1]
    assert "DispatchKeySet(AutogradCPU, CPU)" in lines[0]


def test_failed_call_leaves_state_unchanged():
    x = md.asarray([1, 2])
    state = _tls.local_state()
    with pytest.raises(RuntimeError):
        x.add_(0.5)
    with pytest.raises(TypeError, match="no overload matches"):
        md.add(x, "a")
    assert _tls.local_state() == state
    assert x.tolist() == [1, 2] and x._version == 0


# ---------------------------------------------------------------------------------------
# The ladder against a reference model


def model(key, registered, fallbacks, array_api_backends):
    """DESIGN.md section 2's ladder, restated as a list of (applies?, kernel) rules."""
    func, backend = key.functionality, key.backend
    backend_key = func in ("Dense", "Sparse")
    autograd_key = func == "AutogradFunctionality"
    has_backend = backend is not None and (
        K[backend] in registered or K["Sparse" + backend] in registered
        or K.CompositeExplicitAutograd in registered
        or (K.ArrayAPI in registered and backend in array_api_backends))
    rules = [
        (key in registered, key),
        (backend_key and K.CompositeExplicitAutograd in registered,
         K.CompositeExplicitAutograd),
        (func == "Dense" and K.ArrayAPI in registered and backend in array_api_backends,
         K.ArrayAPI),
        (K.CompositeImplicitAutograd in registered and (
            backend_key or func in ("Functionalize", "Python")
            or (autograd_key and not has_backend)), K.CompositeImplicitAutograd),
        (autograd_key and K.Autograd in registered, K.Autograd),
        (bool(fallbacks.get(key)), "fallback"),
    ]
    for applies, result in rules:
        if applies:
            return result
    return None


_REG_KEYS = [K.CPU, K.SparseCPU, K.AutogradCPU, K.Meta, K.Python, K.Functionalize,
             K.CompositeExplicitAutograd, K.CompositeImplicitAutograd, K.ArrayAPI, K.Autograd]
_CHECK_KEYS = [K.CPU, K.SparseCPU, K.AutogradCPU, K.Meta, K.AutogradMeta, K.Functionalize,
               K.Python, K.PrivateUse3, K.AutogradPrivateUse3, K.ADInplaceOrView,
               K.BackendSelect]
_counter = itertools.count()


@settings(max_examples=60, deadline=None)
@given(registered=st.sets(st.sampled_from(_REG_KEYS)),
       fallback_keys=st.sets(st.sampled_from([K.PrivateUse3, K.Functionalize])))
def test_table_matches_reference_model(registered, fallback_keys):
    with md.library.Library(f"ladder{next(_counter)}", "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        kernels = {}
        for key in registered:
            fn = lambda *a, _k=key, **k: _k  # noqa: E731
            fn.__qualname__ = f"k_{key.name}"
            lib.impl("f", fn, key)
            kernels[key] = fn
        for key in fallback_keys:
            lib.fallback(lambda op, ks, a, kw: None, key)
        op = lib._handles[0]  # noqa: F841 - keep the definition handle alive
        ov = md.ops.__getattr__(lib.ns).f.default
        fallbacks = dispatcher.fallbacks
        for key in _CHECK_KEYS:
            kernel, rung = ov.resolve(key)
            expected = model(key, registered, fallbacks, dispatcher.array_api_backends)
            if expected is None:
                assert kernel is None, (key, rung)
            elif expected == "fallback":
                assert kernel is fallbacks[key][-1], (key, rung)
            else:
                assert kernel.fn is kernels[expected], (key, kernel, rung)


def test_dump_labels_rungs():
    text = md.library.dump_text("aten::masked_fill.Scalar")
    assert "CompositeExplicitAutograd" in text
    assert "2. CompositeExplicitAutograd" in text and "4. Autograd alias" in text
    assert "1. direct registration" in text  # the Meta kernel


def test_numpy_dispatch_overhead_stays_off_plum_after_first_call():
    x = md.asarray(np.ones(3, np.float32))
    md.add(x, x)
    key = (md.Tensor, md.Tensor)
    assert key in md.ops.aten.add.resolution_cache


def test_tensor_arguments_by_keyword():
    # PyTorch's argument parser binds keywords to positions; so does the slow path, and a
    # view made that way replays from a new base (ViewInfo.replay).
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    v = md.ops.aten.transpose.int(self=x, dim0=0, dim1=1)
    assert v.tolist() == [[1.0, 3.0], [2.0, 4.0]]
    assert v._view.base is x
    assert v._view.replay(md.asarray([[5.0, 6.0], [7.0, 8.0]], device="cpu")).tolist() == [
        [5.0, 7.0], [6.0, 8.0]]
    assert md.ops.aten.add(self=x, other=x, alpha=2).tolist() == [[3.0, 6.0], [9.0, 12.0]]
    assert md.add(x, other=x).tolist() == [[2.0, 4.0], [6.0, 8.0]]


def test_operators_dispatch_inline_through_the_same_table():
    # Note [Inline operators]: once (Tensor, Tensor) is resolved, ``a * b`` dispatches
    # itself -- a kernel registered afterwards, a mode and a changed set of overloads are
    # all seen (a subclass resolves as before: test_modes).
    a, b = md.asarray([1.0, 2.0], device="cpu"), md.asarray([3.0, 4.0], device="cpu")
    assert (a * b).tolist() == [3.0, 8.0]  # resolves and learns the overload
    assert md.mul(a, b).tolist() == [3.0, 8.0]  # the packet function: Note [Inline dispatch]
    with md.library.Library("aten", "IMPL") as lib:
        seen = []

        def my_mul(x, y):
            seen.append("cpu")
            return md.asarray(np.asarray(x._data) * np.asarray(y._data) + 1)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # replacing a built-in kernel warns
            lib.impl("mul.Tensor", my_mul, "CPU")
        assert (a * b).tolist() == [4.0, 9.0] and seen == ["cpu"]
        assert (b.__rmul__(a)).tolist() == [4.0, 9.0]
        assert md.mul(a, b).tolist() == [4.0, 9.0]
    assert (a * b).tolist() == [3.0, 8.0]

    class Recorder(md.modes.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Recorder():
        a @ md.asarray([1.0, 1.0], device="cpu")
    assert seen[-1] == "aten::matmul"

    packet = md.ops.aten.mul
    for hook in packet.on_change:  # as a new overload of aten::mul would
        hook()
    assert (a * b).tolist() == [3.0, 8.0] and md.mul(a, b).tolist() == [3.0, 8.0]

    # One Tensor: md.exp(x) after a kernel is registered for it
    assert md.exp(a).tolist() == pytest.approx(np.exp([1.0, 2.0]).tolist())
    with md.library.Library("aten", "IMPL") as lib:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("exp", lambda x: md.asarray([0.0, 0.0]), "CPU")
        assert md.exp(a).tolist() == [0.0, 0.0]
    assert md.exp(a).tolist() == pytest.approx(np.exp([1.0, 2.0]).tolist())


def test_getitem_dispatches_inline_through_the_same_table():
    # Tensor.__getitem__ runs basic_index's table itself: a kernel registered after the
    # table was filled, a mode and autograd all see x[1:3].
    x = md.asarray([1.0, 2.0, 3.0, 4.0], device="cpu")
    assert x[1:3].tolist() == [2.0, 3.0]  # fills the table
    with md.library.Library("aten", "IMPL") as lib:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # replacing a built-in kernel warns
            lib.impl("basic_index", lambda t, key: md.asarray([9.0]), "CPU")
        assert x[1:3].tolist() == [9.0]
    assert x[1:3].tolist() == [2.0, 3.0]
    with md.modes.LoggingMode() as m:
        x[::2]
    assert [line.split("(")[0] for line in m.log] == ["aten::basic_index"]
    w = md.asarray([1.0, 2.0, 3.0], requires_grad=True)
    v = w[1:]
    assert v.grad_fn.name() == "BasicIndexBackward0" and v._base is w


def test_packet_function_inlines_a_tensor_and_another_argument():
    # Note [Inline dispatch]: md.sum(x, 0) and md.sum(x, (0,)) learn their overloads by
    # the second argument's type; a kernel registered afterwards, a mode and a change of
    # the packet's overloads are all seen, and a bool is not taken for an int.
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    assert md.sum(x, 0).tolist() == [4.0, 6.0]
    assert md.sum(x, (1,)).tolist() == [3.0, 7.0]
    packet = md.ops.aten.sum
    assert md.sum(x, 0).tolist() == [4.0, 6.0]  # inline now
    with md.library.Library("aten", "IMPL") as lib:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("sum", lambda t, *a, **k: md.asarray([-1.0]), "CPU")
        assert md.sum(x, 0).tolist() == [-1.0] and md.sum(x, (1,)).tolist() == [-1.0]
    seen = []

    class Recorder(md.modes.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Recorder():
        assert md.sum(x, 0).tolist() == [4.0, 6.0]
    assert seen == ["aten::sum"]
    for hook in packet.on_change:  # as a new overload of aten::sum would
        hook()
    assert md.sum(x, (0,)).tolist() == [4.0, 6.0] and md.sum(x, 1).tolist() == [3.0, 7.0]
    with pytest.raises(TypeError):
        md.sum(x, 1.5)


def test_packet_function_inlines_a_keyword_for_the_next_parameter():
    # md.sum(x, axis=0) is md.sum(x, 0) (the keyword names the next parameter): learned
    # by (name, type) and dispatched through the same table
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    assert md.sum(x, axis=0).tolist() == [4.0, 6.0]
    assert md.sum(x, axis=0).tolist() == [4.0, 6.0]  # inline now
    assert md.sum(x, axis=(1,)).tolist() == [3.0, 7.0]
    with md.library.Library("aten", "IMPL") as lib:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("sum", lambda t, *a, **k: md.asarray([-1.0]), "CPU")
        assert md.sum(x, axis=0).tolist() == [-1.0]
    y = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cpu", requires_grad=True)
    md.sum(y, axis=0).sum().backward()  # Autograd still sees the call
    assert y.grad.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    with pytest.raises(TypeError, match="keepdim|no overload|sum"):
        md.sum(x, bogus=0)
