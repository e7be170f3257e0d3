"""Dispatch modes, tensor subclasses, fake tensors, tracing and opcheck."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from _helpers import to_numpy, writes_in_place

import mdtensor as md


class Recorder(md.DispatchMode):
    def __init__(self, tag, log):
        self.tag, self.log = tag, log

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        self.log.append((self.tag, func.name))
        return func(*args, **(kwargs or {}))


def test_mode_sees_ops_with_overload_and_normalized_args():
    seen = []

    class Spy(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append((func, args, kwargs))
            return func(*args, **kwargs)

    x = md.asarray([1.0, 2.0])
    with Spy():
        md.sum(x)
    func, args, kwargs = seen[0]
    assert isinstance(func, md.dispatch.operators.OpOverload) and func.name == "aten::sum"
    assert args == (x, None, False) and kwargs == {"dtype": None}


def test_innermost_mode_runs_first_and_is_popped_while_running():
    log = []
    x = md.asarray([1.0])
    with Recorder("outer", log), Recorder("inner", log):
        md.exp(x)
    assert log == [("inner", "aten::exp"), ("outer", "aten::exp")]
    assert md.modes.active_modes() == ()
    assert md.DispatchKey.Python not in md.dispatch.tls.included()


def test_modes_see_backward_ops():
    log = []
    x = md.asarray([1.0, 2.0], requires_grad=True)
    with Recorder("m", log):
        md.exp(x).sum().backward()
    names = [n for _, n in log]
    assert names[:2] == ["aten::exp", "aten::sum"]
    assert "aten::mul.Tensor" in names[2:]  # exp's backward: g * out


def test_mode_can_replace_results():
    class Zero(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **kwargs)
            return md.zeros(out.shape) if func.name == "aten::exp" else out

    with Zero():
        y = md.exp(md.asarray([1.0]))
    assert y.tolist() == [0.0]


def test_modes_do_not_leak_across_threads_or_exceptions():
    log = []
    seen = []
    with Recorder("main", log):
        t = threading.Thread(target=lambda: seen.append(md.modes.active_modes()))
        t.start()
        t.join()
    assert seen == [()]
    with pytest.raises(ZeroDivisionError):
        with Recorder("m", log):
            raise ZeroDivisionError("inside a mode")
    assert md.modes.active_modes() == ()


def test_logging_and_profiling_modes():
    x = md.asarray([1.0, 2.0])
    with md.modes.LoggingMode() as m:
        md.exp(x) + 1
    assert m.log == ["aten::exp(float32[2]) -> float32[2]",
                     "aten::add.Scalar(float32[2], 1, 1) -> float32[2]"]
    with md.modes.ProfilingMode() as p:
        for _ in range(3):
            md.exp(x)
    assert p.counts["aten::exp"] == 3
    assert p.report().splitlines()[1].startswith("aten::exp")


class Scaled(md.Tensor):
    """A wrapper subclass: stands for ``inner * scale`` (the public pieces: Note [Tensor
    subclasses])."""

    @staticmethod
    def wrap(inner, scale):
        t = md.Tensor._make_wrapper_subclass(Scaled, inner)
        t.inner, t.scale = inner, scale
        return t

    @classmethod
    def __md_dispatch__(cls, func, types, args=(), kwargs=None):
        if func.name not in ("aten::mul.Scalar", "aten::add.Tensor"):
            return NotImplemented
        unwrapped = md.modes.tree_map(
            lambda v: md.modes.unwrap(v) * v.scale if isinstance(v, Scaled) else v, args)
        return Scaled.wrap(func(*unwrapped, **kwargs), 1.0)


def test_tensor_subclass_dispatch_and_notimplemented():
    s = Scaled.wrap(md.asarray([1.0, 2.0]), 10.0)
    out = s * 2
    assert isinstance(out, Scaled) and out.inner.tolist() == [20.0, 40.0]
    t = md.asarray([1.0, 1.0])
    assert (t + t).tolist() == [2.0, 2.0]  # Tensor + Tensor: the inline operator path
    out = s + t  # a subclass operand is resolved, not dispatched inline
    assert isinstance(out, Scaled) and out.inner.tolist() == [11.0, 21.0]
    with pytest.raises(TypeError, match="returned NotImplemented"):
        md.exp(s)


def test_a_naive_subclass_handler_computes_instead_of_recursing():
    # issue 25 item 13: func(*args) on the instances recursed to a RecursionError
    class Naive(md.Tensor):
        @classmethod
        def __md_dispatch__(cls, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = md.asarray([1.0, 2.0], requires_grad=True)
    n = x.as_subclass(Naive)
    assert type(n) is Naive and n.requires_grad and n.grad_fn is not None
    out = n * 2
    assert type(out) is md.Tensor and out.tolist() == [2.0, 4.0]
    out.sum().backward()  # as_subclass is attached to the graph (PyTorch's alias)
    assert x.grad.tolist() == [2.0, 2.0]
    assert type(md.modes.unwrap(n)) is md.Tensor and md.modes.unwrap(n).tolist() == [1, 2]
    s = Scaled.wrap(md.asarray([3.0]), 2.0)
    assert md.modes.unwrap(s) is s.inner and s.shape == (1,) and s.device == s.inner.device


def test_mode_and_subclass_order():
    log = []
    s = Scaled.wrap(md.asarray([1.0]), 2.0)
    with Recorder("mode", log):
        out = s * 3
    assert log[0] == ("mode", "aten::mul.Scalar")  # the mode first, then the subclass
    assert isinstance(out, Scaled)


def test_fake_tensor_mode():
    mode = md.modes.FakeTensorMode()
    real = md.zeros((4, 3))
    with mode:
        f = mode.from_tensor(real)
        out = md.exp(f) @ mode.from_tensor(md.zeros((3, 5)))
        assert out.shape == (4, 5) and out.device == real.device
        with pytest.raises(RuntimeError, match="mixing fake and real"):
            f + real
        with pytest.raises(NotImplementedError, match="depends on the data"):
            f[f > 0]


def test_meta_matmul_is_instant():
    a = md.empty((10**6, 10**6), device="meta")
    b = md.empty((10**6, 10), device="meta")
    assert (a @ b).shape == (10**6, 10)


def test_trace_records_and_replays():
    def f(x, w):
        return md.tanh(x @ w).sum()

    x, w = md.asarray([[1.0, 2.0], [3.0, 4.0]]), md.asarray([0.5, 1.0])
    g = md.func.trace(f, x, w)
    text = str(g)
    assert "md.ops.aten.matmul.default(x0, x1)" in text and "tanh" in text
    x2 = md.asarray([[0.0, 1.0], [1.0, 0.0]])
    np.testing.assert_allclose(to_numpy(g(x2, w)), to_numpy(f(x2, w)))


def test_trace_records_forward_and_backward():
    w = md.asarray([1.0, 2.0], requires_grad=True)

    def step(x):
        loss = (x * w).sum()
        loss.backward()
        return loss

    g = md.func.trace(step, md.asarray([3.0, 4.0]))
    ops = [c[0].name for c in g.calls]
    assert ops[:2] == ["aten::mul.Tensor", "aten::sum"]
    assert len(ops) > 2  # backward ops recorded too


def test_trace_replays_autograd_grad_on_the_new_inputs():
    # issue 25 item 1: the backward's ops read the replayed forward, not trace-time constants
    w = md.asarray([0.5, -1.0, 2.0], requires_grad=True)

    def step(x, w):
        (g,) = md.autograd.grad(md.tanh(x * w).sum(), [w])
        return g

    g = md.func.trace(step, md.asarray([1.0, 2.0, 3.0]), w)
    assert g.constants == {}
    x2 = md.asarray([3.0, 1.0, 0.0])
    np.testing.assert_allclose(to_numpy(g(x2, w)), to_numpy(step(x2, w)), rtol=1e-6)


def test_trace_replays_backward_into_grad():
    w = md.asarray([0.5, -1.0, 2.0], requires_grad=True)

    def step(x, w):
        loss = md.tanh(x * w).sum()
        loss.backward()
        return loss

    g = md.func.trace(step, md.asarray([1.0, 2.0, 3.0]), w)
    assert "accumulate_grads(((x1, t" in str(g)
    x2 = md.asarray([3.0, 1.0, 0.0])
    w.grad = None
    g(x2, w)
    expected = to_numpy(md.autograd.grad(md.tanh(x2 * w).sum(), [w])[0])
    np.testing.assert_allclose(to_numpy(w.grad), expected, rtol=1e-6)
    g(x2, w)  # accumulates, as a second backward would
    np.testing.assert_allclose(to_numpy(w.grad), 2 * expected, rtol=1e-6)


@pytest.mark.parametrize("device", ["cpu", "jax"])
def test_trace_backward_through_a_write_replays_the_new_inputs(device):
    # issue 34 item 2: the backward of an indexing writes its gradient into a zeros tensor
    # in place; on JAX that write swaps the tensor's array (Functionalize), and the replay
    # read the array from before the write -- the trace-time gradient -- instead of the
    # replayed one
    if device == "jax":
        pytest.importorskip("jax")
    w = md.asarray([[0.5, -1.0], [2.0, 1.5]], requires_grad=True, device=device)

    def step(x, w):
        (g,) = md.autograd.grad((x * w)[1:, ::2].sum() + (x * w).sum(), [w])
        return g

    g = md.func.trace(step, md.asarray([[1.0, 2.0], [3.0, 4.0]], device=device), w)
    for x2 in ([[3.0, 1.0], [0.0, -2.0]], [[-1.0, 5.0], [7.0, 0.5]]):
        x2 = md.asarray(x2, device=device)
        np.testing.assert_allclose(to_numpy(g(x2, w)), to_numpy(step(x2, w)), rtol=1e-6)


def test_opcheck_passes_builtin_and_catches_bad_kernel():
    x = md.asarray([1.0, 2.0])
    assert md.library.opcheck("aten::mul.Tensor", (x, x))["meta"] == "ok"
    with md.library.Library("opc", "DEF") as lib:
        lib.define("sneaky(Tensor x) -> Tensor")

        def sneaky(t):
            t._data[0] = 99.0  # mutates an input the schema does not mark (a!)
            return t.device.wrap(t._data.copy())

        lib.impl("sneaky", sneaky, "CPU")
        with pytest.raises(RuntimeError, match="was modified, but the schema does not mark"):
            md.library.opcheck("opc::sneaky", (md.asarray([1.0, 2.0], device="cpu"),))


def test_modes_and_autograd_see_views_and_inplace_ops_after_fast_calls():
    """Wrapper entries (ADInplaceOrView over a leaf kernel) are called by the Autograd
    kernel directly; a mode entered afterwards must still see every op, and autograd must
    still record views and in-place ops on them."""
    x = md.asarray([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    for _ in range(2):  # the second round runs from filled tables
        y = x * 1.0
        v = y[1:3]  # a view of a non-leaf, through the wrapper entry
        v.mul_(3.0)  # in-place on the view: CopySlices
        y.sum().backward()
        assert x.grad.tolist() == [1.0, 3.0, 3.0, 1.0]
        x.grad = None
    with md.modes.LoggingMode() as m:
        y = x * 1.0
        y[1:3].mul_(3.0)
    names = [line.split("(")[0] for line in m.log]
    # On JAX the tensor's Functionalize layer, above the mode's Python key (as in
    # PyTorch), hands the mode the functional op.
    inplace = "aten::mul_.Scalar" if writes_in_place(x) else "aten::mul.Scalar"
    assert names[0] == "aten::mul.Scalar" and names[-1] == inplace
    assert "aten::basic_index" in names, names
    y.sum().backward()
    assert x.grad.tolist() == [1.0, 3.0, 3.0, 1.0]


def test_modes_exited_out_of_order_leave_an_empty_stack():
    # issue 25 item 7: the outer mode stayed on for good (its exit reset a token)
    from mdtensor.modes import LoggingMode, active_modes

    before = md.DispatchKey.Python in md.dispatch.tls.included()
    a, b = LoggingMode(), LoggingMode()
    a.__enter__()
    b.__enter__()
    a.__exit__(None, None, None)
    assert active_modes() == (b,)
    b.__exit__(None, None, None)
    assert active_modes() == ()
    assert (md.DispatchKey.Python in md.dispatch.tls.included()) == before
    x = md.ones(2)
    md.exp(x)
    assert a.log == [] and b.log == []
    with a:  # in order: exact restore, as before
        with b:
            md.exp(x)
    assert active_modes() == () and len(b.log) == len(a.log) == 1


def test_factories_inside_fake_tensor_mode_make_fakes():
    # issue 25 item 11: md.ones inside the mode was real ('mixing fake and real')
    from mdtensor.modes import FakeTensor, FakeTensorMode

    with FakeTensorMode() as mode:
        a = md.ones((4, 5))
        x = md.asarray([[1.0, 2.0, 3.0, 4.0]])  # data: through lift_fresh
        r = md.randn(3, 4)
        assert all(isinstance(t, FakeTensor) for t in (a, x, r, md.arange(5),
                                                          md.zeros_like(a)))
        assert (x @ a).shape == (1, 5) and (r @ a).shape == (3, 5)
        assert md.zeros((2,), device="meta").device.type == "meta"
        f = mode.from_tensor(md.asarray([1.0, 2.0]))  # a real tensor made in the mode
        assert isinstance(f, FakeTensor)
        w = md.ones((5,), requires_grad=True)
        assert isinstance(w, FakeTensor) and w.requires_grad
        (a @ w).sum().backward()
        assert isinstance(w.grad, FakeTensor) and w.grad.shape == (5,)
    assert type(md.ones(2)) is md.Tensor
