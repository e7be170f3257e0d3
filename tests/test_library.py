"""md.library: define/impl/fallback, handles, overrides, custom_op, contracts, the
masked_fill override story."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import mdtensor as md
from mdtensor import _ops
from mdtensor._keys import DispatchKey as K


def _kernels_snapshot(op):
    return {k: list(v) for k, v in op._kernels.items()}


def test_library_kinds_and_errors():
    with pytest.raises(ValueError, match="kind must be"):
        md.library.Library("x1", "NOPE")
    with pytest.raises(ValueError, match="'aten' namespace is mdtensor's own"):
        md.library.Library("aten", "DEF")
    lib = md.library.Library("libtest_a", "DEF")
    try:
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
    finally:
        lib._destroy()
    with pytest.raises(AttributeError):
        md.ops.libtest_a.f  # noqa: B018 - destroyed with its library


def test_handles_undo_registrations():
    lib = md.library.Library("libtest_b", "DEF")
    try:
        lib.define("f(Tensor x) -> Tensor")
        op = md.ops.libtest_b.f.default
        with lib.impl("f", lambda x: x._device.wrap(x._data + 1), "CPU"):
            assert md.ops.libtest_b.f(md.asarray([1.0])).tolist() == [2.0]
        with pytest.raises(NotImplementedError):
            md.ops.libtest_b.f(md.asarray([1.0]))
        h = lib.impl("f", lambda x: x._device.wrap(x._data + 2), "CPU")
        h.remove()
        h.remove()  # idempotent
        assert K.CPU not in op._kernels
    finally:
        lib._destroy()


def test_second_user_registration_is_an_error_and_changes_nothing():
    lib = md.library.Library("libtest_c", "DEF")
    try:
        lib.define("f(Tensor x) -> Tensor")
        op = md.ops.libtest_c.f.default
        lib.impl("f", lambda x: x._device.wrap(x._data * 2), "CPU")
        before = _kernels_snapshot(op)
        with pytest.raises(RuntimeError, match="already registered for CPU"):
            lib.impl("f", lambda x: x, "CPU")
        assert _kernels_snapshot(op) == before
        lib.impl("f", lambda x: x._device.wrap(x._data * 3), "CPU", allow_override=True)
        assert md.ops.libtest_c.f(md.asarray([1.0])).tolist() == [3.0]
        with pytest.raises(ValueError, match="unknown dispatch key"):
            lib.impl("f", lambda x: x, "NotAKey")
    finally:
        lib._destroy()


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
        t = md.zeros(3)
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
    lib = md.library.Library("libtest_i", "DEF")
    try:
        lib.define("fresh(Tensor x) -> Tensor")
        lib.define("inplace_(Tensor(a!) x) -> Tensor(a!)")
        lib.define("outy(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
        lib.impl("fresh", lambda x: x, "CPU")
        lib.impl("inplace_", lambda x: x._device.wrap(x._data + 1), "CPU")
        lib.impl("outy", lambda x, *, out: x, "CPU")
        x = md.asarray([1.0])
        with pytest.raises(RuntimeError, match="libtest_i::fresh.*returned one of its inputs"):
            md.ops.libtest_i.fresh(x)
        with pytest.raises(RuntimeError, match="libtest_i::inplace_.*returned a new tensor"):
            md.ops.libtest_i.inplace_(x)
        with pytest.raises(RuntimeError, match="'out' itself"):
            md.ops.libtest_i.outy(x, out=md.zeros(1))
    finally:
        lib._destroy()


def test_masked_fill_override_story():
    """Overriding masked_fill_ for CPU changes masked_fill (clone + masked_fill_), with a
    warning naming both kernels, a clear error for a kernel breaking the contract, and
    remove() restoring the built-in."""
    x = md.asarray([1.0, 2.0, 3.0])
    mask = md.asarray([True, False, True])
    lib = md.library.Library("aten", "IMPL")
    try:
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
        assert "fill_with_minus_one" in md.library.dump("aten::masked_fill_.Scalar")
        h.remove()
        assert md.masked_fill(x, mask, 9.0).tolist() == [9.0, 2.0, 9.0]

        def returns_new(self, mask, value):
            return self._device.wrap(np.where(mask._data, value, self._data))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lib.impl("masked_fill_.Scalar", returns_new, "CPU")
        with pytest.raises(RuntimeError, match="returns_new broke the schema's alias contract"):
            md.masked_fill(x, mask, 9.0)
    finally:
        lib._destroy()
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
    n_overloads = len(_ops.dispatcher.overloads)
    fallbacks = {k: list(v) for k, v in _ops.dispatcher.fallbacks.items()}
    lib = md.library.Library("libtest_j", "DEF")
    with pytest.raises(md.library.SchemaParseError):
        lib.define("x(Tensor a) -> Tensr")
    with pytest.raises(ValueError):
        lib.impl("missing_op", lambda x: x, "CPU")
    lib._destroy()
    assert len(_ops.dispatcher.overloads) == n_overloads
    assert {k: list(v) for k, v in _ops.dispatcher.fallbacks.items()} == fallbacks
