"""md.compile's replay on arrays (Note [Replaying on arrays] in mdtensor/compiler/arrays.py):
the kernels' specializations (Note [Array calls] in mdtensor/dispatch/kernel.py) compute
what the kernels do, over random programs, dtypes and shapes; what a replay must read anew
on every call; the identity of its results; the op's own errors; freeing intermediates.

Every comparison is with the same function run eagerly, on the device under test
(``MDTENSOR_TEST_BACKEND``), over several calls with new inputs: the first call warms up,
the second captures, the rest replay.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import TEST_DEVICE_TYPE, skip_on, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md

CALLS = 5  # warm-up, capture, three replays

#: examples of the random programs: the Dask test chunks of a few elements make every op
#: a graph of many tasks
EXAMPLES = 6 if TEST_DEVICE_TYPE == "dask" else 40


def same(a, b) -> None:
    """``a`` and ``b`` have one shape, dtype and (nearly) the same values (``jax.jit``
    may fuse and reorder float arithmetic)."""
    assert a.shape == b.shape and a.dtype == b.dtype, (a, b)
    x, y = to_numpy(a.detach()), to_numpy(b.detach())
    if x.dtype.kind in "fc":
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(x, y)


# -- random programs ---------------------------------------------------------------------

#: (name, arity, fn): elementwise ops with tensors and Python scalars, reductions, products
_UNARY = [
    ("neg", lambda a: -a), ("tanh", md.tanh), ("exp", lambda a: md.exp(a * 0.1)),
    ("add int", lambda a: a + 3), ("mul float", lambda a: a * 0.5), ("rsub", lambda a: 2 - a),
    ("div int", lambda a: a / 4), ("square", lambda a: a * a), ("abs", md.abs),
    ("sum rows", lambda a: a.sum(0, keepdims=True) + a), ("sum all", lambda a: a.sum() + a),
    ("log_softmax", lambda a: md.nn.functional.log_softmax(a.to(md.float32), dim=-1)),
    ("ones_like", lambda a: md.ones_like(a) + a), ("expand", lambda a: a[:1].expand(a.shape)),
    ("transpose product", lambda a: (a @ a.T)[:, :1] + a[:1]),
]
_BINARY = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("div", lambda a, b: a / (md.abs(b) + 1)), ("maximum", md.maximum),
]
_DTYPES = [np.float32, np.float64, np.int64, np.int32]


def _program(draw):
    steps = []
    for _ in range(draw(st.integers(1, 7))):
        if draw(st.booleans()):
            steps.append(("u", draw(st.integers(0, len(_UNARY) - 1)), None))
        else:
            steps.append(("b", draw(st.integers(0, len(_BINARY) - 1)),
                          draw(st.booleans())))  # the other operand: the input or a row
    return steps


def _run(steps, x, row):
    v = x
    for kind, i, with_row in steps:
        if kind == "u":
            v = _UNARY[i][1](v)
        else:
            v = _BINARY[i][1](v, row if with_row else x)
    return v


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.data())
def test_random_programs_replay_as_eager(data):
    steps = _program(data.draw)
    dtype = data.draw(st.sampled_from(_DTYPES))
    shape = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31 - 1)))
    compiled = md.compile(lambda x, row: _run(steps, x, row))
    for _ in range(CALLS):
        x = md.asarray((rng.standard_normal(shape) * 3).astype(dtype))
        row = md.asarray((rng.standard_normal(shape[1:]) * 3).astype(dtype))
        same(compiled(x, row), _run(steps, x, row))
    assert compiled.explain()[0].startswith("replay of"), compiled.explain()


@settings(max_examples=EXAMPLES * 2 // 3, deadline=None)
@given(st.data())
def test_random_programs_with_backward_replay_as_eager(data):
    steps = [s for s in _program(data.draw)
             if s[0] == "b" or _UNARY[s[1]][0] not in ("ones_like",)]
    dtype = data.draw(st.sampled_from([np.float32, np.float64]))
    shape = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 5)))
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 31 - 1)))
    w = md.asarray(rng.standard_normal(shape[1:]).astype(dtype), requires_grad=True)
    w_eager = w.detach().clone().requires_grad_()

    def step(x, w):
        w.grad = None
        loss = (_run(steps, x * w, w) ** 2).sum()
        loss.backward()
        return loss.detach(), w.grad

    compiled = md.compile(lambda x: step(x, w))
    for _ in range(CALLS):
        x = md.asarray(rng.standard_normal(shape).astype(dtype))
        (loss, grad), (loss_e, grad_e) = compiled(x), step(x, w_eager)
        same(loss, loss_e)
        same(grad, grad_e)
        assert grad is w.grad  # the result is the .grad itself, as in the eager call
    assert compiled.explain()[0].startswith("replay of"), compiled.explain()


# -- what a replay reads anew ------------------------------------------------------------

def test_closure_tensors_changed_in_place_between_calls_are_read_anew():
    w = md.asarray(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    b = md.asarray(np.ones(3, np.float32))
    f = md.compile(lambda x: md.tanh(x @ w + b).sum(0))
    x = md.asarray(np.full((4, 2), 0.1, np.float32))
    for i in range(CALLS):
        with md.no_grad():
            w.mul_(0.5)
            b.add_(float(i))
        same(f(x), md.tanh(x @ w + b).sum(0))
    assert f.explain()[0].startswith("replay of 4 recorded calls")


@skip_on("dask", reason="the test chunks of a few elements make 64 x 128 arrays thousands "
                        "of tasks")
def test_large_intermediates_are_freed_and_results_stay_right():
    # 64 x 128 intermediates: each is deleted after its last use (Note [Replaying on arrays])
    rng = np.random.default_rng(1)
    w = md.asarray(rng.standard_normal((128, 128)).astype(np.float32), requires_grad=True)
    w2 = w.detach().clone().requires_grad_()

    def step(x, w):
        w.grad = None
        h = md.tanh(x @ w)
        loss = (md.tanh(h @ w) * h).sum()
        loss.backward()
        return loss.detach()

    f = md.compile(lambda x: step(x, w))
    for _ in range(CALLS):
        x = md.asarray(rng.standard_normal((64, 128)).astype(np.float32))
        same(f(x), step(x, w2))
        same(w.grad, w2.grad)
    source = next(iter(f._cache.values())).program.source
    assert "    del t" in source


# -- results and side effects ------------------------------------------------------------

def test_results_keep_their_identities():
    def f(x, y):
        z = x * 2
        y.add_(1)
        return z, z, x, y, z.sum()

    compiled = md.compile(f)
    for _ in range(CALLS):
        x, y = md.asarray([1.0, 2.0]), md.asarray([3.0, 4.0])
        y_eager = md.asarray([3.0, 4.0])
        out, eager = compiled(x, y), f(x, y_eager)
        assert out[0] is out[1] and out[2] is x and out[3] is y
        for a, b in zip(out, eager):
            same(a, b)
        assert y._version == y_eager._version


def test_a_gradient_that_is_also_a_result_is_not_shared_with_the_grad():
    # the gradient of ``w`` is the root gradient's array: never stolen (Note [Leaf
    # gradients]), so updating .grad in place leaves the result alone, as in eager
    w = md.asarray([1.0, 2.0], requires_grad=True)

    def f(g):
        w.grad = None
        (w * 1).backward(g)
        return g

    compiled = md.compile(f)
    for i in range(CALLS):
        g = md.asarray([float(i), 1.0])
        out = compiled(g)
        with md.no_grad():
            w.grad.add_(100)
        same(out, md.asarray([float(i), 1.0]))


def test_an_error_of_a_specialized_call_is_the_ops_own():
    f = md.compile(lambda x, i: x[i] * 2)
    x = md.asarray([1.0, 2.0, 3.0])
    for _ in range(3):
        f(x, md.asarray([0, 2]))
    bad = md.asarray([0, 7])
    with pytest.raises(IndexError) as eager:
        x[bad] * 2
    with pytest.raises(IndexError) as compiled:
        f(x, bad)
    assert str(compiled.value) == str(eager.value)



def test_random_numbers_are_drawn_on_every_call():
    # md.randn draws on the host, outside the dispatcher: a graph break, never a constant
    f = md.compile(lambda x: x + md.randn(3))
    draws = [to_numpy(f(md.zeros(3))) for _ in range(CALLS)]
    assert all(not np.array_equal(a, b) for a, b in zip(draws, draws[1:]))
    assert "random numbers" in f.explain()[0]
    g = md.compile(lambda x: x * md.rand(3), fullgraph=True)
    g(md.ones(3))
    with pytest.raises(md.func.GraphBreak, match="random numbers"):
        g(md.ones(3))
