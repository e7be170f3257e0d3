"""The differentiation transforms (``md.func.grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd``, ``hessian``; mdtensor/_grad_transforms.py) against torch.func as
the reference, against each other (``jacrev == jacfwd`` on random programs), and against
finite differences (``hessian`` of random scalar programs); their errors, and that they
leave the grad mode and the inputs' ``.grad`` as they were.  Every test runs on the device
under test (``MDTENSOR_TEST_BACKEND``).
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor._pytree import tree_flatten
from mdtensor.dispatch.tls import dispatch_tls

F = md.func

# torch's forward mode loads its JVP decompositions through torch.jit.script on first use
pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning")


def rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _on(lib, tree):
    """NumPy arrays of ``tree`` as float64 (complex128) tensors of ``lib``."""
    from mdtensor.modes import tree_map

    if lib is md:
        return tree_map(lambda a: md.asarray(a) if isinstance(a, np.ndarray) else a, tree)
    return tree_map(lambda a: lib.tensor(a) if isinstance(a, np.ndarray) else a, tree)


def _numpy(v):
    if isinstance(v, md.Tensor):
        return to_numpy(v.detach())
    if hasattr(v, "detach"):  # a torch tensor
        return v.detach().numpy()
    return v


def assert_trees_close(got, want, rtol=1e-10, atol=1e-12):
    """The same pytree structure, and leaves equal within tolerance."""
    got_leaves, got_spec = tree_flatten(got)
    want_leaves, want_spec = tree_flatten(want)
    assert got_spec == want_spec, (got_spec, want_spec)
    for g, w in zip(got_leaves, want_leaves):
        g, w = _numpy(g), _numpy(w)
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------------------
# Against torch.func: the same function written once for both libraries


def mlp(lib):
    def f(params, x):
        h = lib.tanh(x @ params["w1"] + params["b1"])
        return (lib.sin(h @ params["w2"]) ** 2).sum()
    return f


def mlp_params():
    return {"w1": rand(3, 4, seed=1), "b1": rand(4, seed=2), "w2": rand(4, 2, seed=3)}


def many_outputs(lib):
    def f(x, y):
        return {"s": lib.sin(x) * y.sum(), "t": (x.sum() * y, x[:2] * x[:2]),
                "m": lib.exp(x[:, None] * 0.3) @ y[None, :]}
    return f


def scalar(lib):
    return lambda x: (lib.exp(x * 0.3) * lib.sin(x).sum() + x ** 3).sum()


def two_args(lib):
    return lambda x, y: (x ** 2 * y.sum() ** 3 + lib.tanh(x)).sum() * y.prod()


X4, Y2, V4 = rand(4, seed=4), rand(2, seed=5) + 0.5, rand(4, seed=6)

CASES = {
    "grad of a dict of parameters": (
        lambda lib, T: T.grad(mlp(lib))(*_on(lib, (mlp_params(), rand(5, 3)))), ),
    "grad argnums tuple": (
        lambda lib, T: T.grad(mlp(lib), argnums=(0, 1))(*_on(lib, (mlp_params(), rand(5, 3)))),),
    "grad negative argnums": (
        lambda lib, T: T.grad(two_args(lib), argnums=-1)(*_on(lib, (X4, Y2))),),
    "grad has_aux": (
        lambda lib, T: T.grad(lambda x: (scalar(lib)(x), {"double": x * 2}), has_aux=True)(
            *_on(lib, (X4,))),),
    "grad_and_value": (
        lambda lib, T: T.grad_and_value(two_args(lib), argnums=(0, 1))(*_on(lib, (X4, Y2))),),
    "grad_and_value has_aux": (
        lambda lib, T: T.grad_and_value(lambda x: (scalar(lib)(x), [x.sum()]), has_aux=True)(
            *_on(lib, (X4,))),),
    "vjp of a pytree output": (
        lambda lib, T: T.vjp(many_outputs(lib), *_on(lib, (X4, Y2)))[1](_on(lib, {
            "s": rand(4, seed=7), "t": (rand(2, seed=8), rand(2, seed=9)),
            "m": rand(4, 2, seed=10)})),),
    "vjp output and aux": (
        lambda lib, T: (lambda o, fn, aux: (o, fn(o * 2), aux))(
            *T.vjp(lambda x: (lib.sin(x), x.sum()), *_on(lib, (X4,)), has_aux=True)),),
    "jvp": (lambda lib, T: T.jvp(scalar(lib), *_on(lib, ((X4,), (V4,)))),),
    "jvp of a pytree output with aux": (
        lambda lib, T: T.jvp(lambda x, y: (many_outputs(lib)(x, y), y * 3),
                             *_on(lib, ((X4, Y2), (V4, rand(2, seed=11)))), has_aux=True),),
    "jacrev": (lambda lib, T: T.jacrev(lambda x: lib.sin(x) * x.sum())(*_on(lib, (X4,))),),
    "jacrev pytree outputs, argnums tuple": (
        lambda lib, T: T.jacrev(many_outputs(lib), argnums=(0, 1))(*_on(lib, (X4, Y2))),),
    "jacrev of a dict argument with aux": (
        lambda lib, T: T.jacrev(lambda p: (p["a"] * p["b"].sum(), p["a"]), has_aux=True)(
            _on(lib, {"a": X4, "b": Y2})),),
    "jacfwd": (lambda lib, T: T.jacfwd(lambda x: lib.sin(x) * x.sum())(*_on(lib, (X4,))),),
    "jacfwd pytree outputs, argnums tuple": (
        lambda lib, T: T.jacfwd(many_outputs(lib), argnums=(0, 1))(*_on(lib, (X4, Y2))),),
    "jacfwd of a 0-d input": (
        lambda lib, T: T.jacfwd(lambda s: lib.sin(s) * lib.exp(s))(*_on(lib, (np.array(0.7),))),),
    "hessian": (lambda lib, T: T.hessian(scalar(lib))(*_on(lib, (X4,))),),
    "hessian argnums tuple": (
        lambda lib, T: T.hessian(two_args(lib), argnums=(0, 1))(*_on(lib, (X4, Y2))),),
    "hessian of an MLP's parameters": (
        lambda lib, T: T.hessian(mlp(lib))(*_on(lib, (mlp_params(), rand(5, 3)))),),
}


@pytest.mark.parametrize("case", list(CASES))
def test_transforms_match_torch_func(case, torch):
    (run,) = CASES[case]
    assert_trees_close(run(md, md.func), run(torch, torch.func))


COMPOSED = {
    "grad of grad of grad": lambda lib, T: T.grad(lambda x: T.grad(
        lambda y: T.grad(lambda z: (z ** 5).sum())(y).sum())(x).sum()),
    "jacfwd of jacfwd of jacrev": lambda lib, T: T.jacfwd(T.jacfwd(T.jacrev(
        lambda x: lib.sin(x).prod()))),
    "jacrev of jacrev": lambda lib, T: T.jacrev(T.jacrev(lambda x: lib.tanh(x) * x.sum())),
    "jacrev of hessian": lambda lib, T: T.jacrev(T.hessian(lambda x: (x ** 4).sum())),
    "hessian-vector product, jvp of grad": lambda lib, T: lambda x: T.jvp(
        T.grad(scalar(lib)), (x,), (x * 0.5 + 1,)),
    "grad of a vjp": lambda lib, T: T.grad(
        lambda x: T.vjp(lambda y: lib.sin(y) * y, x)[1](x * x)[0].sum()),
    "grad of a jvp": lambda lib, T: T.grad(
        lambda x: T.jvp(lambda y: lib.exp(y * 0.2) * y, (x,), (x,))[1].sum()),
    # a nested transform's f closes over the outer one's input: two variables, not one
    "closure over the outer variable": lambda lib, T: T.grad(
        lambda x: T.grad(lambda y: (x * y ** 2).sum())(x).sum()),
    "closure, perturbations kept apart": lambda lib, T: lambda x: T.grad(
        lambda y: (x * y).sum() + T.grad(lambda z: (x * z * y).sum())(y).sum())(x),
}


@pytest.mark.parametrize("case", list(COMPOSED))
def test_composed_transforms_match_torch_func(case, torch):
    build = COMPOSED[case]
    got = build(md, md.func)(md.asarray(X4))
    want = build(torch, torch.func)(torch.tensor(X4))
    assert_trees_close(got, want)


@pytest.mark.parametrize("fn", [lambda z: z * z * 1j, lambda z: (z * z).conj() + z.abs() * z],
                         ids=["holomorphic", "not holomorphic"])
def test_jvp_and_vjp_of_complex_functions_match_torch_func(fn, torch):
    z, t = rand(3, seed=1) + 1j * rand(3, seed=2), rand(3, seed=3) - 1j * rand(3, seed=4)
    assert_trees_close(F.jvp(fn, *_on(md, ((z,), (t,)))), torch.func.jvp(fn, *_on(torch, (
        (z,), (t,)))))
    got_out, got_fn = F.vjp(fn, md.asarray(z))
    want_out, want_fn = torch.func.vjp(fn, torch.tensor(z))
    assert_trees_close(got_fn(md.asarray(t)), want_fn(torch.tensor(t)))


def test_results_are_differentiable_when_an_input_requires_grad(torch):
    # outside any transform, a caller recording a graph can backward through the results
    got_x, want_x = md.asarray(X4, requires_grad=True), torch.tensor(X4, requires_grad=True)
    for x, T, lib in ((got_x, md.func, md), (want_x, torch.func, torch)):
        g = T.grad(scalar(lib))(x)
        jac = T.jacfwd(lambda x, lib=lib: lib.sin(x) * x)(x)
        (g.sum() + jac.sum()).backward()
    assert_trees_close(got_x.grad, want_x.grad)


def test_a_custom_function_composes_with_the_transforms():
    class Exp(md.autograd.Function):  # its backward reads its saved output
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(y := md.exp(x))
            return y

        @staticmethod
        def backward(ctx, g):
            return g * ctx.saved_tensors[0]

    x = md.asarray(X4)
    assert_trees_close(F.grad(lambda x: Exp.apply(x * 2).sum())(x), 2 * np.exp(2 * X4))
    assert_trees_close(F.jacfwd(lambda x: Exp.apply(x * 2))(x), np.diag(2 * np.exp(2 * X4)))
    assert_trees_close(F.hessian(lambda x: Exp.apply(x * 2).sum())(x),
                       np.diag(4 * np.exp(2 * X4)))


# ---------------------------------------------------------------------------------------
# Random programs: jacrev == jacfwd (and torch.func), hessian == finite differences

SMOOTH = ("sin", "tanh", "exp", "sigmoid", "square", "add", "mul", "div", "reduce",
          "matmul", "transpose", "gather", "cat")
STEPS = SMOOTH + ("where", "abs")


def run_program(lib, program, x, y):
    """A program of ``steps`` on a pool of (2, 3) tensors that starts from ``x`` (2, 3)
    and ``y`` (3,); returns the pool."""
    pool = [x, x * y]
    for step, i, j in program:
        a, b = pool[i % len(pool)], pool[j % len(pool)]
        if step in ("sin", "tanh", "sigmoid"):
            r = getattr(lib, step)(a)
        elif step == "exp":
            r = lib.exp(a * 0.3)
        elif step == "square":
            r = a * a
        elif step == "add":
            r = a + b + y
        elif step == "mul":
            r = a * b
        elif step == "div":
            r = a / (b * b + 1)
        elif step == "reduce":
            r = lib.sum(a, dim=j % 2, keepdim=True) * b
        elif step == "matmul":
            r = (a @ b.mT) @ a * 0.5
        elif step == "transpose":
            r = a.mT.reshape(2, 3)
        elif step == "gather":
            r = a[:, [2, 0, 1]] - b
        elif step == "cat":
            r = lib.cat([a[:1], b[1:]])
        elif step == "where":
            r = lib.where(a > 0, a, b * 2)
        else:
            r = lib.abs(a) * b
        pool.append(r)
    return pool


programs = st.lists(st.tuples(st.sampled_from(STEPS), st.integers(0, 12),
                              st.integers(0, 12)), min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(program=programs, seed=st.integers(0, 2**16))
def test_jacrev_equals_jacfwd_on_random_programs(program, seed):
    x, y = rand(2, 3, seed=seed), rand(3, seed=seed + 1)

    def f(x, y):
        pool = run_program(md, program, x, y)
        return {"last": pool[-1], "rows": (pool[-2].sum(0), pool[len(pool) // 2])}

    args = (md.asarray(x), md.asarray(y))
    rev = F.jacrev(f, argnums=(0, 1))(*args)
    fwd = F.jacfwd(f, argnums=(0, 1))(*args)
    assert_trees_close(rev, fwd, rtol=1e-9, atol=1e-9)
    torch = pytest.importorskip("torch")

    def g(x, y):
        pool = run_program(torch, program, x, y)
        return {"last": pool[-1], "rows": (pool[-2].sum(0), pool[len(pool) // 2])}

    assert_trees_close(rev, torch.func.jacrev(g, argnums=(0, 1))(*_on(torch, (x, y))),
                       rtol=1e-9, atol=1e-9)


smooth_programs = st.lists(st.tuples(st.sampled_from(SMOOTH), st.integers(0, 12),
                                     st.integers(0, 12)), min_size=1, max_size=5)


@settings(max_examples=15, deadline=None)
@given(program=smooth_programs, seed=st.integers(0, 2**16))
def test_hessian_of_random_scalar_programs_matches_finite_differences(program, seed):
    y = md.asarray(rand(3, seed=seed + 1) * 0.5)

    def f(flat):
        pool = run_program(md, program, flat.reshape(2, 3), y)
        return sum(((k + 1) * 0.1 * p).sum() for k, p in enumerate(pool))

    x = rand(6, seed=seed) * 0.5
    got = to_numpy(F.hessian(f)(md.asarray(x)))
    h, n = 1e-3, x.size
    value = lambda v: float(f(md.asarray(v)))
    want = np.empty((n, n))
    for i in range(n):
        for j in range(i, n):
            e_i, e_j = np.eye(n)[i] * h, np.eye(n)[j] * h
            want[i, j] = want[j, i] = (value(x + e_i + e_j) - value(x + e_i - e_j)
                                       - value(x - e_i + e_j) + value(x - e_i - e_j)) / (4 * h * h)
    np.testing.assert_allclose(got, got.T, rtol=1e-9, atol=1e-9)  # a Hessian is symmetric
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * max(1.0, np.abs(want).max()))


# ---------------------------------------------------------------------------------------
# Functional: no .grad, any grad mode, nested depth back to zero


def _state():
    return dispatch_tls.get(), md.autograd.is_grad_enabled()


ALL_TRANSFORMS = {
    "grad": lambda f, x: F.grad(f)(x),
    "grad_and_value": lambda f, x: F.grad_and_value(f)(x),
    "vjp": lambda f, x: F.vjp(f, x)[1](md.ones_like(x).sum()),
    "jvp": lambda f, x: F.jvp(f, (x,), (md.ones_like(x),)),
    "jacrev": lambda f, x: F.jacrev(f)(x),
    "jacfwd": lambda f, x: F.jacfwd(f)(x),
    "hessian": lambda f, x: F.hessian(f)(x),
}


@pytest.mark.parametrize("grad_mode", ["enabled", "no_grad"])
@pytest.mark.parametrize("name", list(ALL_TRANSFORMS))
def test_transforms_touch_no_grad_and_give_plain_results(name, grad_mode):
    x = md.asarray(X4, requires_grad=grad_mode == "enabled")
    f = lambda x: (md.sin(x) * x).sum()
    with md.no_grad() if grad_mode == "no_grad" else md.enable_grad():
        before = _state()
        result = ALL_TRANSFORMS[name](f, md.asarray(X4))  # an input without grad
        assert _state() == before
        for leaf in tree_flatten(result)[0]:
            assert not leaf.requires_grad and leaf.grad_fn is None
        ALL_TRANSFORMS[name](f, x)
        assert x.grad is None and _state() == before
    want = {"grad": np.sin(X4) + X4 * np.cos(X4)}
    if name in want:
        assert_trees_close(result, want[name])


def test_transforms_refuse_inference_mode():
    x = md.asarray(X4)
    with md.inference_mode():
        before = _state()
        with pytest.raises(RuntimeError, match=r"md.func.grad: cannot differentiate inside "
                                               r"md.inference_mode\(\)"):
            F.grad(lambda x: x.sum())(x)
        assert _state() == before


def test_vjp_fn_can_be_called_again_and_keeps_its_graph_on_request():
    x = md.asarray(X4)
    out, fn = F.vjp(lambda x: md.sin(x) * x, x)
    first, again = fn(md.ones_like(out)), fn(md.ones_like(out))
    assert_trees_close(first, again)
    assert_trees_close(first, (np.sin(X4) + X4 * np.cos(X4),))
    (kept,) = fn(md.ones_like(out), create_graph=True)
    assert kept.requires_grad


def test_jvp_strict_needs_every_output_to_depend_on_the_primals():
    x = md.asarray(X4)
    out, tangent = F.jvp(lambda x: (x * 2, md.ones(3)), (x,), (x,))
    assert_trees_close(tangent, (2 * X4, np.zeros(3)))
    with pytest.raises(RuntimeError, match=r"md.func.jvp: with strict=True, every output must "
                                           r"depend on the primals; output 1 \(flattened\)"):
        F.jvp(lambda x: (x * 2, md.ones(3)), (x,), (x,), strict=True)


def test_outputs_and_inputs_off_the_graph_get_zero_derivatives():
    x, y = md.asarray(X4), md.asarray(Y2)
    jac = F.jacrev(lambda x, y: (x * 2, md.ones(2)), argnums=(0, 1))(x, y)
    assert_trees_close(jac, ((2 * np.eye(4), np.zeros((4, 2))), (np.zeros((2, 4)),
                                                                  np.zeros((2, 2)))))
    assert_trees_close(F.grad(lambda x: md.asarray(3.0))(x), np.zeros(4))


# ---------------------------------------------------------------------------------------
# Errors: the transform, what it expected, what it got; nothing changed

x3 = md.asarray([1.0, 2.0, 3.0])

ERRORS = [
    (lambda: F.grad(lambda x: x)(x3), ValueError,
     r"md.func.grad: expected f to return a scalar Tensor \(0 dimensions\), got a Tensor of "
     r"shape \(3,\) and dtype float32; for other outputs use md.func.vjp or md.func.jacrev"),
    (lambda: F.grad_and_value(lambda x: 3.0)(x3), TypeError,
     r"md.func.grad_and_value: expected f to return a scalar Tensor, got a float"),
    (lambda: F.grad(lambda x: (x * 1j).sum())(x3), TypeError,
     r"md.func.grad: expected f to return a real scalar Tensor, got a Tensor of shape \(\) "
     r"and dtype complex64"),
    (lambda: F.grad(lambda x: x.sum(), argnums=2)(x3), ValueError,
     r"md.func.grad: argnums 2 is out of range for a call with 1 positional argument "
     r"\(expected in range \[-1, 0\]\)"),
    (lambda: F.jacrev(lambda x, y: x, argnums=(0, -2))(x3, x3), ValueError,
     r"md.func.jacrev: argnums must name each argument once, got \(0, -2\)"),
    (lambda: F.grad(lambda x: x.sum(), argnums=()), ValueError,
     r"md.func.grad: argnums must be an int or a non-empty tuple of ints, got \(\)"),
    (lambda: F.jacfwd(lambda x: x, argnums=1.0), TypeError,
     r"md.func.jacfwd: argnums must be an int or a tuple of ints, got 1.0"),
    (lambda: F.hessian(lambda x: x.sum(), argnums=3)(x3), ValueError,
     r"md.func.hessian: argnums 3 is out of range"),
    (lambda: F.grad(lambda x: x.sum())(md.arange(3)), TypeError,
     r"md.func.grad: only floating-point and complex Tensors can be differentiated, got "
     r"argument 0 of dtype int64"),
    (lambda: F.grad(lambda p: p["a"].sum())({"a": x3, "n": 1}), TypeError,
     r"md.func.grad: expected argument 0\['n'\] to be a Tensor \(or a tuple, list or dict of "
     r"Tensors\), got an int"),
    (lambda: F.grad(lambda x: x.sum(), has_aux=True)(x3), TypeError,
     r"md.func.grad: with has_aux=True, f must return a tuple \(output, aux\), got a Tensor "
     r"of shape \(\)"),
    (lambda: F.vjp(lambda x: (x, 2.0), x3), TypeError,
     r"md.func.vjp: expected f to return Tensors \(or tuples, lists or dicts of Tensors\), "
     r"got a float as output\[1\]"),
    (lambda: F.jacrev(lambda x: {"a": x, "b": None})(x3), TypeError,
     r"md.func.jacrev: expected f to return Tensors .*, got None as output\['b'\]"),
    (lambda: F.vjp(lambda x: x, x3)[1](md.ones(2)), ValueError,
     r"md.func.vjp: cotangents has shape \(2,\), expected \(3,\) \(the shape of the output "
     r"it stands for\)"),
    (lambda: F.vjp(lambda x: (x, x), x3)[1](x3), ValueError,
     r"md.func.vjp: expected cotangents with the structure of the outputs \(\*, \*\), got \*"),
    (lambda: F.jvp(lambda x: x, [x3], [x3]), TypeError,
     r"md.func.jvp: expected primals to be a tuple \(f is called as f\(\*primals\)\), got a "
     r"list"),
    (lambda: F.jvp(lambda x: x, (x3,), (x3.to(md.float64),)), TypeError,
     r"md.func.jvp: tangents\[0\] has dtype float64, expected float32"),
    (lambda: F.jvp(lambda x: x, (x3,), ([x3],)), ValueError,
     r"md.func.jvp: expected tangents with the structure of the primals \(\*,\), got "
     r"\(\[\*\],\)"),
    (lambda: F.jacrev(lambda x: x * 1j)(x3), TypeError,
     r"md.func.jacrev: Jacobians of complex inputs \(and, by reverse mode, of complex "
     r"outputs\) are not defined, as in torch.func; got output of dtype complex64"),
    (lambda: F.jacfwd(lambda x: x)(x3 * 1j), TypeError,
     r"md.func.jacfwd: Jacobians of complex inputs .* got argument 0 of dtype complex64"),
    (lambda: F.jacrev(lambda x: x, chunk_size=0), ValueError,
     r"md.func.jacrev: chunk_size must be None or a positive int, got 0"),
    (lambda: F.jacfwd(lambda x: x, randomness="sometimes"), ValueError,
     r"md.func.jacfwd: randomness must be 'error', 'different' or 'same', got 'sometimes'"),
]


@pytest.mark.parametrize("grad_mode", ["enabled", "no_grad"])
@pytest.mark.parametrize("call, error, message", ERRORS)
def test_errors_name_the_transform_and_change_nothing(call, error, message, grad_mode):
    with md.no_grad() if grad_mode == "no_grad" else md.enable_grad():
        before = _state()
        with pytest.raises(error, match=message):
            call()
        assert _state() == before
    assert x3.grad is None and not x3.requires_grad


def test_an_error_inside_f_leaves_no_transform_running():
    x = md.asarray(X4)

    def broken(x):
        raise KeyError("inside f")

    with pytest.raises(KeyError, match="inside f"):
        F.grad(lambda x: F.grad(broken)(x).sum())(x)
    # back at the outermost level: results are plain tensors again (no graph is kept)
    assert not F.grad(lambda x: (x * x).sum())(x).requires_grad
