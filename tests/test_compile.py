"""md.compile: captures, replays, guards, side effects and graph breaks (docs/COMPILE.md).

Every test compares a compiled function with the same function run eagerly, over many calls
with new inputs (a replay that kept trace-time values would fail), on the device under test
(``MDTENSOR_TEST_BACKEND``).  A compiled function's Python body runs only when it is warmed
up or captured (Note [Compiled functions] in mdtensor/compiler/compiled.py): counting the
runs tells captures from replays.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from _helpers import TEST_DEVICE, to_numpy

import mdtensor as md

RNG = np.random.default_rng(0)


def rand(*shape, requires_grad=False, dtype=np.float32):
    return md.asarray(RNG.standard_normal(shape).astype(dtype), requires_grad=requires_grad)


def close(a, b):
    np.testing.assert_allclose(to_numpy(a.detach()), to_numpy(b.detach()), rtol=1e-5,
                               atol=1e-6)


class Counted:
    """``fn`` counting how often its Python body runs."""

    def __init__(self, fn):
        self.fn, self.runs = fn, 0

    def __call__(self, *args, **kwargs):
        self.runs += 1
        return self.fn(*args, **kwargs)


def _mlp_params():
    shapes = [(16, 16), (16,), (16, 4), (4,)]
    return [rand(*s, requires_grad=True) for s in shapes]


def _sgd_step(params):
    """A training step over closure parameters: clear the grads, forward, backward, SGD."""

    def step(x, y):
        W1, b1, W2, b2 = params
        for p in params:
            p.grad = None
        h = md.tanh(x @ W1 + b1)
        logp = md.nn.functional.log_softmax(h @ W2 + b2, dim=-1)
        loss = -(logp * y).sum() / x.shape[0]
        loss.backward()
        with md.no_grad():
            for p in params:
                p.sub_(0.1 * p.grad)
        return loss

    return step


def test_training_step_matches_eager_over_many_calls():
    params = _mlp_params()
    twins = [p.detach().clone().requires_grad_() for p in params]
    body = Counted(_sgd_step(params))
    compiled = md.compile(body)
    eager = _sgd_step(twins)
    for _ in range(8):
        x, y = rand(8, 16), rand(8, 4)
        close(compiled(x, y), eager(x, y))
        for p, q in zip(params, twins):
            close(p, q)
            close(p.grad, q.grad)
            assert p._version == q._version
    assert body.runs == 2  # warm-up and capture; six replays
    assert compiled.explain() == [compiled.explain()[0]]
    assert compiled.explain()[0].startswith("replay of")


def test_autograd_grad_inside_reads_the_new_inputs():
    def f(x, w):
        (g,) = md.autograd.grad((md.sigmoid(x @ w) ** 2).sum(), [w])
        return g, g * x.sum()

    compiled = md.compile(f)
    w = rand(3, 2, requires_grad=True)
    for _ in range(6):
        x = rand(5, 3)
        for a, b in zip(compiled(x, w), f(x, w)):
            close(a, b)


def test_backward_accumulates_into_grad_as_eager():
    # no zeroing: .grad accumulates over the calls, the first call's grad made from None
    def f(x, w):
        loss = (md.exp(x * w) * x).sum()
        loss.backward()
        return loss.detach()

    w1, w2 = rand(4, requires_grad=True), None
    w2 = w1.detach().clone().requires_grad_()
    compiled = md.compile(f)
    for _ in range(6):
        x = rand(4)
        close(compiled(x, w1), f(x, w2))
        close(w1.grad, w2.grad)


def test_outputs_with_history_replay_differentiably():
    # no backward inside: the caller differentiates the result, so the replay records
    def f(x, w):
        return (md.tanh(x @ w) ** 2).mean()

    compiled = md.compile(f)
    w1 = rand(3, 3, requires_grad=True)
    w2 = w1.detach().clone().requires_grad_()
    for _ in range(5):
        x = rand(4, 3)
        a, b = compiled(x, w1), f(x, w2)
        close(a, b)
        a.backward()
        b.backward()
        close(w1.grad, w2.grad)
    assert any("differentiable" in line for line in compiled.explain())


def test_inplace_update_of_an_input_and_its_version():
    def f(x, y):
        x.mul_(2).add_(y)
        return x * y

    compiled = md.compile(f)
    x1 = rand(3)
    x2 = x1.clone()
    for _ in range(5):
        y = rand(3)
        close(compiled(x1, y), f(x2, y))
        close(x1, x2)
        assert x1._version == x2._version


def test_sgd_step_under_no_grad_mutates_the_parameters():
    def sgd(params, lr):
        with md.no_grad():
            for p in params:
                p.sub_(lr * p.grad)

    params = _mlp_params()
    twins = [p.detach().clone().requires_grad_() for p in params]
    compiled = md.compile(sgd)
    for _ in range(5):
        for p, q in zip(params, twins):
            g = rand(*p.shape)
            p.grad, q.grad = g, g.clone()
        compiled(params, 0.5)
        sgd(twins, 0.5)
        for p, q in zip(params, twins):
            close(p, q)
            assert p._version == q._version


def test_guards_recapture_on_shape_dtype_and_requires_grad():
    body = Counted(lambda x: (x * x + 1).sum())
    compiled = md.compile(body)
    signatures = [lambda: rand(3), lambda: rand(4), lambda: rand(3, dtype=np.float64),
                  lambda: rand(3, requires_grad=True)]
    for make in signatures:
        before = body.runs
        for _ in range(4):
            x = make()
            close(compiled(x), body.fn(x))
        assert body.runs - before == 2  # each signature warms up and captures once
    assert len(compiled.explain()) == 4


def test_guards_on_non_tensor_arguments_and_grad_mode():
    body = Counted(lambda x, k: md.sum(x ** k))
    compiled = md.compile(body)
    x = rand(3, requires_grad=True)
    for k in (2, 3, 2):
        for _ in range(3):
            close(compiled(x, k), body.fn(x, k))
    assert body.runs == 4  # k=2 and k=3 captured once each; k=2 again replays
    with md.no_grad():
        out = compiled(x, 2)
        assert out.grad_fn is None
    assert body.runs == 5  # grad mode is part of the signature: a warm-up


@pytest.mark.skipif(TEST_DEVICE == "cpu", reason="needs a second device (set "
                    "MDTENSOR_TEST_BACKEND)")
def test_guards_on_device():
    body = Counted(lambda x: md.exp(x) * 2)
    compiled = md.compile(body)
    for device in ("cpu", TEST_DEVICE, "cpu"):
        for _ in range(3):
            x = md.asarray(RNG.standard_normal(3).astype(np.float32), device=device)
            out = compiled(x)
            assert out.device == x.device
            close(out, body.fn(x))
    assert body.runs == 4  # two devices captured; back on cpu it replays


def test_on_jax_the_training_step_is_one_jitted_function():
    pytest.importorskip("jax")
    params = [md.asarray(RNG.standard_normal(p.shape).astype(np.float32), device="jax",
                         requires_grad=True) for p in _mlp_params()]
    twins = [p.detach().clone().requires_grad_() for p in params]
    compiled = md.compile(_sgd_step(params))
    eager = _sgd_step(twins)
    for _ in range(5):
        x = md.asarray(RNG.standard_normal((8, 16)).astype(np.float32), device="jax")
        y = md.asarray(RNG.standard_normal((8, 4)).astype(np.float32), device="jax")
        close(compiled(x, y), eager(x, y))
        for p, q in zip(params, twins):
            close(p, q)
            close(p.grad, q.grad)
            assert p._version == q._version
    # clear the grads | forward and backward: one XLA executable | accumulate | SGD
    assert "1 region(s) lowered to jax.jit (1 traced)" in compiled.explain()[0]


def test_a_dispatch_mode_sees_the_ops_and_leaving_it_replays_again():
    body = Counted(lambda x: md.exp(x) + 1)
    compiled = md.compile(body)
    x = rand(3)
    for _ in range(3):
        compiled(x)
    with md.modes.LoggingMode() as log:
        close(compiled(x), body.fn(x))
        close(compiled(x), body.fn(x))
    assert any("aten::exp" in line for line in log.log)
    runs = body.runs
    compiled(x)
    assert body.runs == runs  # outside the mode: the capture from before


def test_a_branch_on_a_value_read_on_the_host_replays_each_way():
    # Note [Values read on the host]: one capture per way the branch went
    body = Counted(lambda x: x * 2 if x.sum() > 0 else x - 1)
    compiled = md.compile(body)
    for sign in (1, -1, 1, -1, 1, -1, 1, -1):
        x = md.abs(rand(3)) * sign
        close(compiled(x), body.fn(x))
    assert body.runs == 3  # warm-up, capture, capture of the other way; five replays
    assert compiled.explain() == [
        "replay of 4 recorded calls, kernels, 2 captures by the values read on the host"]


def test_a_value_read_after_a_change_of_state_is_a_graph_break():
    w = rand(3, requires_grad=True)

    def step(x):
        w.grad = None
        loss = (x * w).sum()
        loss.backward()
        if loss > 0:  # after the backward wrote .grad: the replay could not stop here
            return loss.detach() * 2
        return loss.detach()

    compiled = md.compile(step)
    for _ in range(4):
        x = rand(3)
        close(compiled(x), step(x))
    assert compiled.explain()[0].startswith("eager") and "item()" in compiled.explain()[0]


def test_a_value_that_changes_on_every_call_ends_in_eager_calls():
    body = Counted(lambda x: x * x.sum().item())
    compiled = md.compile(body)
    for _ in range(8):
        x = rand(3)
        close(compiled(x), body.fn(x))
    assert compiled.explain()[0].startswith("eager: the values read on the host differ")


@pytest.mark.parametrize("body, cause", [
    (lambda x: x * x.sum().item(), "item()"),
    (lambda x: x[x > 0] * 2, "depends on the data"),
    (lambda x: print(x) or x + 1, "printing"),
    (lambda x: x + md.asarray(x.tolist()), "tolist()"),
])
def test_fullgraph_raises_naming_the_cause(body, cause, capsys):
    x = rand(4)
    md.compile(body)(x)  # the warm-up runs eagerly
    with pytest.raises(md.func.GraphBreak, match=cause.replace("(", r"\(").replace(")", r"\)")):
        compiled = md.compile(body, fullgraph=True)
        compiled(x)
        compiled(x)
    compiled = md.compile(body)
    for _ in range(3):
        x = rand(4)
        close(compiled(x), body(x))


def test_cache_size_limit_warns_and_runs_eagerly():
    body = Counted(lambda x: x + 1)
    compiled = md.compile(body, cache_size_limit=2)
    for n in (1, 2):
        compiled(rand(n))
    with pytest.warns(UserWarning, match="cache size limit"):
        out = compiled(rand(3))
    assert out.shape == (3,)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once
        x = rand(5)
        close(compiled(x), x + 1)


def test_graph_prints_the_capture_and_replays_with_the_dispatch_trace(capsys):
    compiled = md.compile(lambda x, w: md.tanh(x @ w).sum())
    x, w = rand(2, 3), rand(3, 2)
    g = compiled.graph(x, w)
    assert "md.ops.aten.matmul.default(x0, x1)" in str(g) and "tanh" in str(g)
    old = md.library.set_dispatch_trace(True)
    try:
        compiled(x, w)
    finally:
        md.library.set_dispatch_trace(old)
    assert "[compile] replay" in capsys.readouterr().err


def test_compile_of_a_transformed_function():
    def loss(w, x):
        return (md.tanh(x @ w) ** 2).sum()

    compiled = md.compile(md.func.grad(loss))
    w = rand(3, 2)
    for _ in range(4):
        x = rand(4, 3)
        close(compiled(w, x), md.func.grad(loss)(w, x))


def test_compile_of_a_vmapped_function():
    W = rand(3, 3)

    def per_row(r):
        return md.tanh(W @ r).sum()

    counted = Counted(md.func.vmap(per_row))
    compiled = md.compile(counted)
    for _ in range(5):
        x = rand(6, 3)
        close(compiled(x), md.func.vmap(per_row)(x))
    assert counted.runs == 2  # warm-up and capture; the other three calls replayed


def test_a_custom_op_is_replayed_with_its_kernel_and_its_gradient():
    @md.library.custom_op("test_compile::scale", mutates_args=())
    def scale(x: md.Tensor, k: float) -> md.Tensor:
        return x * k

    @scale.register_fake
    def _(x, k):
        return md.empty_like(x)

    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    scale.register_autograd(lambda ctx, g: (g * ctx.k, None), setup_context=setup_context)

    w = rand(4, requires_grad=True)
    w_eager = md.asarray(to_numpy(w.detach()), requires_grad=True)

    def step(x, w):
        w.grad = None
        loss = md.tanh(scale(x * w, 3.0)).sum()
        loss.backward()
        return loss.detach(), w.grad

    counted = Counted(step)
    compiled = md.compile(counted)
    for _ in range(5):
        x = rand(4)
        loss, grad = compiled(x, w)
        eager_loss, eager_grad = step(x, w_eager)
        close(loss, eager_loss)
        close(grad, eager_grad)
    # the first call's signature has no w.grad, the later calls' one: a warm-up of each
    # and a capture; calls 4 and 5 replayed
    assert counted.runs == 3


def test_inside_a_trace_the_compiled_function_is_recorded():
    compiled = md.compile(lambda x: md.exp(x) * 3)
    x = rand(3)
    for _ in range(3):
        compiled(x)
    g = md.func.trace(lambda x: compiled(x) + 1, x)
    assert "exp" in str(g)
    x2 = rand(3)
    close(g(x2), md.exp(x2) * 3 + 1)


def test_trace_raises_at_a_graph_break():
    with pytest.raises(md.func.GraphBreak, match=r"item\(\)"):
        md.func.trace(lambda x: x * float(x.sum()), rand(3))


def test_bad_arguments():
    with pytest.raises(ValueError, match="backend must be one of"):
        md.compile(lambda x: x, backend="inductor")
    with pytest.raises(NotImplementedError, match="dynamic=True"):
        md.compile(lambda x: x, dynamic=True)
    assert md.compile(lambda x: x + 1, backend="eager")(md.asarray([1.0])).shape == (1,)
