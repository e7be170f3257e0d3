"""Alias contracts of user kernels (Note [Alias contracts])."""

from __future__ import annotations

import pytest

import mdtensor as md
from mdtensor.dispatch import tls as _tls


def _op(lib, name):
    return getattr(getattr(md.ops, lib.ns), name)


def test_inplace_kernel_returning_new_tensor(lib):
    lib.define("fill_(Tensor(a!) self, Scalar v) -> Tensor(a!)")

    def bad_fill_(self, v):
        return self.device.wrap(self._data * 0 + v)

    lib.impl("fill_", bad_fill_, "CPU")
    x = md.asarray([1.0, 2.0], device="cpu")
    state = _tls.local_state()
    with pytest.raises(RuntimeError) as info:
        _op(lib, "fill_")(x, 3.0)
    msg = str(info.value)
    assert f"{lib.ns}::fill_" in msg and "bad_fill_" in msg
    assert "argument 'self'" in msg and "a new tensor" in msg
    assert _tls.local_state() == state


def test_inplace_kernel_returning_its_input_is_fine(lib):
    lib.define("ok_(Tensor(a!) self) -> Tensor(a!)")
    lib.impl("ok_", lambda self: self, "CPU")
    x = md.asarray([1.0], device="cpu")
    assert _op(lib, "ok_")(x) is x


def test_functional_kernel_returning_input(lib):
    lib.define("ident(Tensor x) -> Tensor")

    def lazy_ident(x):
        return x

    lib.impl("ident", lazy_ident, "CPU")
    with pytest.raises(RuntimeError) as info:
        _op(lib, "ident")(md.asarray([1.0], device="cpu"))
    msg = str(info.value)
    assert f"{lib.ns}::ident" in msg and "lazy_ident" in msg and "functional" in msg


def test_functional_kernel_returning_input_inside_tuple(lib):
    lib.define("pair(Tensor x) -> (Tensor, Tensor)")
    lib.impl("pair", lambda x: (x.device.wrap(x._data.copy()), x), "CPU")
    with pytest.raises(RuntimeError, match="functional op"):
        _op(lib, "pair")(md.asarray([1.0], device="cpu"))


def test_view_kernel_may_return_input(lib):
    lib.define("alias(Tensor(a) x) -> Tensor(a)")
    lib.impl("alias", lambda x: x, "CPU")
    x = md.asarray([1.0], device="cpu")
    assert _op(lib, "alias")(x) is x


def test_out_kernel_must_return_out(lib):
    lib.define("cp.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")

    def cp_out_bad(x, *, out):
        return x.device.wrap(x._data.copy())

    lib.impl("cp.out", cp_out_bad, "CPU")
    x, out = md.asarray([1.0], device="cpu"), md.asarray([0.0], device="cpu")
    with pytest.raises(RuntimeError) as info:
        _op(lib, "cp").out(x, out=out)
    msg = str(info.value)
    assert f"{lib.ns}::cp.out" in msg and "cp_out_bad" in msg and "'out'" in msg


def test_builtin_kernels_are_not_wrapped(lib):
    from mdtensor.dispatch.kernel import Kernel
    from mdtensor.dispatch.keys import DispatchKey

    lib.define("raw(Tensor x) -> Tensor")
    op = _op(lib, "raw").default
    fn = lambda x: x  # noqa: E731
    k = Kernel(fn, DispatchKey.CPU, user=False)
    op.register_kernel(k)
    try:
        x = md.asarray([1.0], device="cpu")
        assert op(x) is x
        assert op.table[next(iter(op.table))] is fn
    finally:
        op.remove_kernel(k)
