"""md.library: define/impl/fallback, handles, overrides, custom_op, contracts, the
masked_fill override story."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mdtensor as md
from mdtensor.dispatch.kernel import LEAF_KERNELS
from mdtensor.dispatch.keys import DispatchKey as K
from mdtensor.dispatch.operators import dispatcher


def _kernels_snapshot(op):
    return {k: list(v) for k, v in op.registered().items()}


def test_library_kinds_and_errors():
    with pytest.raises(ValueError, match="kind must be"):
        md.library.Library("x1", "NOPE")
    with pytest.raises(ValueError, match="'aten' namespace is mdtensor's own"):
        md.library.Library("aten", "DEF")
    with md.library.Library("libtest_a", "DEF") as lib:
        with pytest.raises(ValueError, match="already has a DEF library"):
            md.library.Library("libtest_a", "DEF")
        frag = md.library.Library("libtest_a", "FRAGMENT")
        frag.define("g(Tensor x) -> Tensor")
        impl_lib = md.library.Library("libtest_a", "IMPL")
        with pytest.raises(RuntimeError, match="IMPL library cannot define"):
            impl_lib.define("h(Tensor x) -> Tensor")
        lib.define("f(Tensor x) -> Tensor")
        with pytest.raises(RuntimeError, match="already defined"):
            lib.define("f(Tensor y) -> Tensor")
        with pytest.raises(md.library.SchemaParseError):
            lib.define("broken(Tensr x) -> Tensor")
        frag._destroy()
    with pytest.raises(AttributeError):
        md.ops.libtest_a.f  # noqa: B018 - destroyed with its library


def test_handles_undo_registrations():
    with md.library.Library("libtest_b", "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        op = md.ops.libtest_b.f.default
        with lib.impl("f", lambda x: x.device.wrap(x._data + 1), "CPU"):
            assert md.ops.libtest_b.f(md.asarray([1.0], device="cpu")).tolist() == [2.0]
        with pytest.raises(NotImplementedError):
            md.ops.libtest_b.f(md.asarray([1.0], device="cpu"))
        h = lib.impl("f", lambda x: x.device.wrap(x._data + 2), "CPU")
        h.remove()
        h.remove()  # idempotent
        assert not op.has_kernel_for(K.CPU)


def test_second_user_registration_is_an_error_and_changes_nothing():
    with md.library.Library("libtest_c", "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        op = md.ops.libtest_c.f.default
        lib.impl("f", lambda x: x.device.wrap(x._data * 2), "CPU")
        before = _kernels_snapshot(op)
        with pytest.raises(RuntimeError, match="already registered for CPU"):
            lib.impl("f", lambda x: x, "CPU")
        assert _kernels_snapshot(op) == before
        lib.impl("f", lambda x: x.device.wrap(x._data * 3), "CPU", allow_override=True)
        assert md.ops.libtest_c.f(md.asarray([1.0], device="cpu")).tolist() == [3.0]
        with pytest.raises(ValueError, match="unknown dispatch key"):
            lib.impl("f", lambda x: x, "NotAKey")


def test_custom_op_infers_schema_and_registers():
    @md.library.custom_op("libtest_d::scale", mutates_args=())
    def scale(x: md.Tensor, k: float = 2.0) -> md.Tensor:
        return x * k

    try:
        assert str(scale.op.schema) == "libtest_d::scale(Tensor x, float k=2.0) -> Tensor"
        assert scale(md.asarray([1.0, 2.0])).tolist() == [2.0, 4.0]
        assert md.ops.libtest_d.scale(md.asarray([1.0]), 3.0).tolist() == [3.0]

        @scale.register_fake
        def _(x, k=2.0):
            return md.empty(x.shape, device="meta")

        assert md.ops.libtest_d.scale(md.empty((5, 2), device="meta")).shape == (5, 2)
    finally:
        scale._lib._destroy()


def test_custom_op_mutation_and_errors():
    @md.library.custom_op("libtest_e::fill_", mutates_args=("x",))
    def fill_(x: md.Tensor, v: float) -> None:
        x._data[...] = v

    try:
        assert "Tensor(a!) x" in str(fill_.op.schema)
        t = md.zeros(3, device="cpu")
        fill_(t, 4.0)
        assert t.tolist() == [4.0] * 3 and t._version == 1
    finally:
        fill_._lib._destroy()
    with pytest.raises(TypeError, match="needs a type hint"):
        md.library.custom_op("libtest_f::bad", lambda x: x, mutates_args=())
    with pytest.raises(ValueError, match="not parameters"):
        md.library.custom_op("libtest_g::bad", mutates_args=("nope",))(
            lambda x: x)  # noqa: E731
    with pytest.raises(TypeError, match="mutates_args must be a tuple"):
        md.library.custom_op("libtest_h::bad", mutates_args="unknown")


def test_alias_contract_errors_for_user_kernels():
    with md.library.Library("libtest_i", "DEF") as lib:
        lib.define("fresh(Tensor x) -> Tensor")
        lib.define("inplace_(Tensor(a!) x) -> Tensor(a!)")
        lib.define("outy(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        lib.impl("fresh", lambda x: x, "CPU")
        lib.impl("inplace_", lambda x: x.device.wrap(x._data + 1), "CPU")
        lib.impl("outy", lambda x, *, out: x, "CPU")
        x = md.asarray([1.0], device="cpu")
        with pytest.raises(RuntimeError, match="libtest_i::fresh.*returned one of its inputs"):
            md.ops.libtest_i.fresh(x)
        with pytest.raises(RuntimeError, match="libtest_i::inplace_.*returned a new tensor"):
            md.ops.libtest_i.inplace_(x)
        with pytest.raises(RuntimeError, match="'out' itself"):
            md.ops.libtest_i.outy(x, out=md.zeros(1, device="cpu"))


def test_masked_fill_override_story():
    """Overriding masked_fill_ for CPU changes masked_fill (clone + masked_fill_), with a
    warning naming both kernels, a clear error for a kernel breaking the contract, and
    remove() restoring the built-in."""
    x = md.asarray([1.0, 2.0, 3.0], device="cpu")
    mask = md.asarray([True, False, True], device="cpu")
    with md.library.Library("aten", "IMPL") as lib:
        def fill_with_minus_one(self, mask, value):
            self._data[mask._data] = -1.0
            return self

        with pytest.warns(UserWarning) as rec:
            h = lib.impl("masked_fill_.Scalar", fill_with_minus_one, "CPU")
        msg = str(rec[0].message)
        assert "aten::masked_fill_.Scalar" in msg
        assert "array_api_inplace[aten::masked_fill_.Scalar]" in msg
        assert "fill_with_minus_one" in msg
        assert md.masked_fill(x, mask, 9.0).tolist() == [-1.0, 2.0, -1.0]
        assert "fill_with_minus_one" in md.library.dump_text("aten::masked_fill_.Scalar")
        h.remove()
        assert md.masked_fill(x, mask, 9.0).tolist() == [9.0, 2.0, 9.0]

        def returns_new(self, mask, value):
            return self.device.wrap(np.where(mask._data, value, self._data))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("masked_fill_.Scalar", returns_new, "CPU")
        with pytest.raises(RuntimeError, match="returns_new broke the schema's alias contract"):
            md.masked_fill(x, mask, 9.0)
    assert md.masked_fill(x, mask, 9.0).tolist() == [9.0, 2.0, 9.0]
    assert x.tolist() == [1.0, 2.0, 3.0]


def test_no_overload_match_lists_candidates():
    with pytest.raises(TypeError) as info:
        md.add("a", "b")
    msg = str(info.value)
    assert "add(): no overload matches the arguments (str, str)" in msg
    assert "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor" in msg


def test_kwarg_aliases_and_resolution():
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]])
    assert md.sum(x, dim=0).tolist() == md.sum(x, axis=0).tolist() == [4.0, 6.0]
    assert x.sum(1, keepdim=True).shape == (2, 1)
    assert md.max(x, dim=0).indices.tolist() == [1, 1]
    assert md.max(x, axis=0).tolist() == [3.0, 4.0]
    with pytest.raises(TypeError, match="no overload matches"):
        md.sum(x, nonsense=1)


def test_registry_unchanged_after_failed_registration():
    n_overloads = len(dispatcher.overloads)
    fallbacks = {k: list(v) for k, v in dispatcher.fallbacks.items()}
    lib = md.library.Library("libtest_j", "DEF")
    with pytest.raises(md.library.SchemaParseError):
        lib.define("x(Tensor a) -> Tensr")
    with pytest.raises(ValueError):
        lib.impl("missing_op", lambda x: x, "CPU")
    lib._destroy()
    assert len(dispatcher.overloads) == n_overloads
    assert {k: list(v) for k, v in dispatcher.fallbacks.items()} == fallbacks


# ---------------------------------------------------------------------------------------
# More of md.library: destroy, overrides of built-in kernels, dump rungs, register_kernel /
# register_fake, custom_op hints, the dispatch trace.

import itertools  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import typing  # noqa: E402

from mdtensor.dispatch.kernel import Kernel  # noqa: E402

_n = itertools.count()


def _fresh_ns(prefix):
    return f"{prefix}{next(_n)}"


def test_destroy_undoes_everything_and_disables_the_library():
    ns = _fresh_ns("libdestroy")
    n_overloads = len(dispatcher.overloads)
    fallbacks = {k: list(v) for k, v in dispatcher.fallbacks.items()}
    lib = md.library.Library(ns, "DEF")
    lib.define("f(Tensor x) -> Tensor")
    lib.impl("f", lambda x: x.device.wrap(x._data), "CPU")
    lib.fallback(lambda op, ks, a, kw: None, "PrivateUse3")
    add_lib = md.library.Library("aten", "IMPL")
    add_lib.impl("add.Tensor", md.library.fallthrough_kernel, "PrivateUse3")
    assert md.ops.aten.add.Tensor.has_kernel_for(K.PrivateUse3)
    lib._destroy()
    add_lib._destroy()
    assert len(dispatcher.overloads) == n_overloads
    assert {k: list(v) for k, v in dispatcher.fallbacks.items() if v} == \
        {k: v for k, v in fallbacks.items() if v}
    assert not md.ops.aten.add.Tensor.has_kernel_for(K.PrivateUse3)
    with pytest.raises(RuntimeError, match="was destroyed"):
        lib.define("g(Tensor x) -> Tensor")
    # the namespace can be defined again
    again = md.library.Library(ns, "DEF")
    again._destroy()


def test_overriding_builtin_kernel_warns_naming_both_and_takes_effect():
    ns = _fresh_ns("liboverride")
    with md.library.Library(ns, "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        op = getattr(md.ops, ns).f.default

        def builtin_f(x):
            return "builtin"

        op.register_kernel(Kernel(builtin_f, K.CPU, user=False))

        def users_f(x):
            return x.device.wrap(x._data * 10)

        with pytest.warns(UserWarning) as rec:
            h = lib.impl("f", users_f, "CPU")
        msg = str(rec[0].message)
        assert f"{ns}::f" in msg and "builtin_f" in msg and "users_f" in msg
        assert "CPU" in msg
        assert op(md.asarray([1.0], device="cpu")).tolist() == [10.0]
        h.remove()
        assert op(md.asarray([1.0], device="cpu")) == "builtin"
        # A CEA kernel that shadows only keys without built-ins does not warn.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            lib.impl("f", lambda x: x.device.wrap(x._data), "CompositeExplicitAutograd")


def test_user_registration_twice_for_alias_key_errors_and_changes_nothing():
    ns = _fresh_ns("libtwice")
    with md.library.Library(ns, "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        op = getattr(md.ops, ns).f.default
        lib.impl("f", lambda x: x.device.wrap(x._data), "CompositeExplicitAutograd")
        other = md.library.Library(ns, "IMPL")
        before = _kernels_snapshot(op)
        table = op.computed_table()
        with pytest.raises(RuntimeError, match="already registered for CompositeExplicit"):
            other.impl("f", lambda x: x, "CompositeExplicitAutograd")
        assert _kernels_snapshot(op) == before and op.computed_table() == table
        other._destroy()


def test_dump_lists_registrations_and_rungs():
    ns = _fresh_ns("libdump")
    with md.library.Library(ns, "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")

        def f_cpu(x):
            return x

        def f_cea(x):
            return x

        def f_autograd(x):
            return x

        lib.impl("f", f_cpu, "CPU")
        lib.impl("f", f_cea, "CompositeExplicitAutograd")
        lib.impl("f", f_autograd, "Autograd")
        text = md.library.dump_text(f"{ns}::f")
        assert text.startswith(f"{ns}::f: {ns}::f(Tensor x) -> Tensor")
        table_part = text.split("computed table")[1]
        cpu_row = next(ln for ln in table_part.splitlines() if ln.split()[:1] == ["CPU"])
        meta_row = next(ln for ln in table_part.splitlines() if ln.split()[:1] == ["Meta"])
        ag_row = next(ln for ln in table_part.splitlines()
                      if ln.split()[:1] == ["AutogradCPU"])
        assert "f_cpu" in cpu_row and "1. direct registration" in cpu_row
        assert "f_cea" in meta_row and "2. CompositeExplicitAutograd" in meta_row
        assert "f_autograd" in ag_row and "4. Autograd alias" in ag_row
        regs = text.split("computed table")[0].splitlines()[2:]
        assert [(ln.split()[0], ln.split()[1].rsplit(".", 1)[-1]) for ln in regs] == [
            ("CPU", "f_cpu"), ("CompositeExplicitAutograd", "f_cea"), ("Autograd", "f_autograd")]
        assert md.library.dump_text(getattr(md.ops, ns).f) == text


def test_register_kernel_and_register_fake_on_a_library_op():
    ns = _fresh_ns("libreg")
    lib = md.library.Library(ns, "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        name = f"{ns}::twice"

        @md.library.register_kernel(name, "cpu")
        def twice_cpu(x):
            return x.device.wrap(x._data * 2)

        @md.library.register_fake(name)
        def twice_fake(x):
            return md.empty(x.shape, device="meta")

        x = md.asarray([1.0, 2.0], device="cpu")  # a kernel for "cpu"
        assert getattr(md.ops, ns).twice(x).tolist() == [2.0, 4.0]
        out = getattr(md.ops, ns).twice(md.empty((3, 4), device="meta"))
        assert out.shape == (3, 4) and out.device.type == "meta"
        with pytest.raises(TypeError, match="expected an op"):
            md.library.register_kernel(3, "cpu", twice_cpu)
    finally:
        lib._destroy()
        md.library._global_libs.pop(ns, None)


def test_custom_op_schema_inference_from_hints():
    @md.library.custom_op(f"{_fresh_ns('libhints')}::f", mutates_args=("out",))
    def f(x: md.Tensor, ys: list[md.Tensor], dims: typing.Sequence[int],
          w: typing.Optional[md.Tensor] = None, v: md.Tensor | None = None,  # noqa: UP045
          *, scale: float = 0.5, flag: bool = True, mode: str = 'say "hi"',
          out: md.Tensor) -> tuple[md.Tensor, md.Tensor]:
        return out, out

    try:
        s = f.op.schema
        ns = s.namespace
        assert str(s) == (
            f'{ns}::f(Tensor x, Tensor[] ys, int[] dims, Tensor? w=None, Tensor? v=None, *, '
            f'float scale=0.5, bool flag=True, str mode="say \\"hi\\"", Tensor(a!) out) '
            f'-> (Tensor, Tensor)')
        assert s.arguments[7].default == 'say "hi"'
        assert s.mutated_args == ("out",)
    finally:
        f._lib._destroy()


def test_failed_custom_op_leaves_registry_unchanged():
    n = len(dispatcher.overloads)
    with pytest.raises(TypeError, match="parameter 'x' needs a type hint"):
        md.library.custom_op("libbad_x::f", mutates_args=())(
            lambda x, k: x)
    with pytest.raises(TypeError, match="cannot infer a schema type for parameter 'k'"):
        def g(x: md.Tensor, k: dict) -> md.Tensor: ...
        md.library.custom_op("libbad_y::g", g, mutates_args=())
    assert len(dispatcher.overloads) == n


def test_set_dispatch_trace_and_context_manager(capsys):
    x = md.asarray([1.0])
    key = x.device.backend.key
    old = md.library.set_dispatch_trace(True)
    try:
        md.add(x, x)
    finally:
        assert md.library.set_dispatch_trace(old) is True
    err = capsys.readouterr().err
    assert "aten::add.Tensor" in err and f"-> {key}" in err
    with md.library.dispatch_trace():
        md.mul(x, x)
    err = capsys.readouterr().err
    assert "aten::mul.Tensor" in err
    md.mul(x, x)
    assert "aten::mul" not in capsys.readouterr().err


def test_trace_env_var_shows_user_op_hops():
    code = (
        "import mdtensor as md\n"
        "lib = md.library.Library('tracetest', 'DEF')\n"
        "lib.define('f(Tensor x) -> Tensor')\n"
        "def my_cpu_kernel(x):\n"
        "    return x.device.wrap(x._data + 1)\n"
        "lib.impl('f', my_cpu_kernel, 'CPU')\n"
        "md.ops.tracetest.f(md.asarray([1.0]))\n")
    env = dict(os.environ, MDTENSOR_SHOW_DISPATCH_TRACE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, check=True, timeout=120)
    lines = [ln for ln in r.stderr.splitlines() if "tracetest::f" in ln]
    assert len(lines) == 1
    assert "DispatchKeySet(" in lines[0] and "-> CPU" in lines[0]
    assert "my_cpu_kernel" in lines[0]
    env["MDTENSOR_SHOW_DISPATCH_TRACE"] = "0"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, check=True, timeout=120)
    assert "tracetest::f" not in r.stderr


def test_override_warning_as_error_leaves_registry_unchanged():
    ns = _fresh_ns("libwarnerr")
    with md.library.Library(ns, "DEF") as lib:
        lib.define("f(Tensor x) -> Tensor")
        op = getattr(md.ops, ns).f.default

        def builtin_f(x):
            return "builtin"

        op.register_kernel(Kernel(builtin_f, K.CPU, user=False))
        before = _kernels_snapshot(op)
        n_handles = len(lib._handles)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(UserWarning, match="builtin_f"):
                lib.impl("f", lambda x: "user", "CPU")
        assert _kernels_snapshot(op) == before and len(lib._handles) == n_handles
        assert op(md.asarray([1.0], device="cpu")) == "builtin"


def test_a_handle_keeps_its_library_alive_and_overrides_warn_before_any_tensor(capsys):
    # issue 25 item 10: the README's one-liner registered nothing (the temporary Library was
    # collected at once), and the override warning needed a CPU tensor made before impl
    import subprocess
    import sys

    code = """
import gc, warnings
import mdtensor as md
def fill(self, mask, value):
    return self
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    handle = md.library.Library("aten", "IMPL").impl("masked_fill_.Scalar", fill, "CPU")
gc.collect()
assert any("Overriding a previously registered kernel" in str(x.message) for x in w), w
x = md.zeros(3)
assert x.masked_fill_(x == 0, 5.0).tolist() == [0.0, 0.0, 0.0]  # the override ran
handle.remove()
assert x.masked_fill_(x == 0, 5.0).tolist() == [5.0, 5.0, 5.0]
print("ok")
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.strip() == "ok", proc.stderr[-2000:]


def test_dump_prints_and_dump_text_returns(capsys):
    md.library.dump("aten::masked_fill_.Scalar")
    printed = capsys.readouterr().out
    assert printed == md.library.dump_text("aten::masked_fill_.Scalar") + "\n"
    assert "computed table" in printed


def test_registry_refuses_bad_definitions_and_foreign_namespaces():
    # issue 25 item 14
    with md.library.Library("regcheck", "DEF") as lib:
        with pytest.raises(TypeError, match="tags must be"):
            lib.define("foo(Tensor x) -> Tensor", tags=5)
        assert not hasattr(md.ops.regcheck, "foo")  # a failed define leaves nothing
        lib.define("foo(Tensor x) -> Tensor")  # and the name is free
        lib.define("bar(Tensor x) -> Tensor", tags="dynamic_output_shape")
        assert md.ops.regcheck.bar.default.tags == {"dynamic_output_shape"}
        with pytest.raises(ValueError, match="is in namespace 'aten', not 'regcheck'"):
            lib.impl("aten::exp", lambda x: x, "CPU")
        assert "regcheck" not in md.library.dump_text("aten::exp")
        lib.define("baz(Tensor x, int[] s=[1, 2]) -> Tensor")
        seen = []

        class Appender(md.DispatchMode):  # a mode gets the defaults filled in
            def __md_dispatch__(self, func, types, args=(), kwargs=None):
                if func.name == "regcheck::baz":
                    seen.append(args[1])
                    return args[0]
                return func(*args, **(kwargs or {}))

        with Appender():
            md.ops.regcheck.baz(md.ones(1))
        assert seen == [(1, 2)] and isinstance(seen[0], tuple)  # not a shared mutable list
    with pytest.raises(TypeError, match="namespace must be a str"):
        md.library.Library(5, "DEF")


def test_a_backend_kernel_is_not_a_user_override():
    # Note [Backend kernels]: no warning over a catalogue kernel, a leaf, below a user's
    # kernel whenever it is registered, and only for backend keys.
    def backend_sign(x):
        return md.asarray([7.0])

    def user_sign(x):
        return md.asarray([8.0])

    x = md.asarray([-2.0], device="cpu")
    user = md.library.Library("aten", "IMPL")
    lib = md.library.Library("aten", "IMPL")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's override warns, as it should
            user.impl("sign", user_sign, "CPU")
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the backend's kernel does not
            lib.impl("sign", backend_sign, "CPU", backend=True)
        assert md.sign(x).tolist() == [8.0]  # the user's kernel, registered first, wins
        user._destroy()
        assert md.sign(x).tolist() == [7.0]
        assert backend_sign in LEAF_KERNELS
        with pytest.raises(ValueError, match="backend=True.*AutogradCPU"):
            lib.impl("sign", backend_sign, "AutogradCPU", backend=True)
    finally:
        user._destroy()
        lib._destroy()
    assert md.sign(x).tolist() == [-1.0]
