"""Benchmark cases: small ops, large ops, MLP training steps, layer costs.

Every implementation of a case does the same work on the same data.  Libraries that are not
installed are reported as n/a.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
from collections.abc import Callable

import numpy as np

from .harness import Case


def try_import(name: str):
    try:
        return importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - reported as n/a
        return e


def libraries() -> dict:
    libs = {"numpy": np}
    md = try_import("mdtensor")
    libs["mdtensor"] = md
    torch = try_import("torch")
    if not isinstance(torch, Exception):
        torch.set_num_threads(1)
    libs["torch"] = torch
    libs["autograd"] = try_import("autograd")
    jax = try_import("jax")
    libs["jax"] = jax
    return libs


def make_case(name, group, libs, builders: dict[str, Callable], sync=None) -> Case:
    """A case of the implementations whose library is in ``libs``; the others (and those
    whose setup fails) are reported as missing."""
    case = Case(name, group, sync=sync)
    for impl, build in builders.items():
        lib_name = impl.split("-")[0]  # "jax-jit" and "mdtensor-loop" use jax, mdtensor
        lib = libs.get(lib_name)
        if isinstance(lib, Exception) or lib is None:
            case.missing[impl] = f"not installed ({lib})"
            continue
        try:
            case.impls[impl] = build()
        except Exception as e:  # noqa: BLE001
            case.missing[impl] = f"setup failed: {type(e).__name__}: {e}"
    return case


# ---------------------------------------------------------------------------------------
# Small and large ops


def random_data(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# Note [Shared inputs]
# ~~~~~~~~~~~~~~~~~~~~
# A large op runs at the speed of its memory: the same ``np.exp`` on its own copy of a 4M
# element input measured 1.00-1.03x itself in one process, steady at a value that depends
# on where each copy lies.  So the large ops' NumPy, mdtensor and PyTorch implementations
# read the very same input arrays (``md.asarray`` and ``torch.from_numpy`` share NumPy's
# memory on the CPU), as a user passing NumPy data would; then the same comparison gave
# 1.006-1.007x.  The small ops keep copies of their own: ``a += b`` writes its input.


def _op_builders(libs, fn_name, shape_a, shape_b=None, grad=False, share=False):
    """``share``: the implementations read the same input arrays (Note [Shared inputs])."""
    a_np = random_data(shape_a, 0)
    b_np = random_data(shape_b, 1) if shape_b else None
    md = libs["mdtensor"]
    torch = libs["torch"]
    jax = libs["jax"]

    def inputs():
        if share:
            return a_np, b_np
        return a_np.copy(), None if b_np is None else b_np.copy()

    def numpy():
        a, b = inputs()
        return SMALL_OPS[fn_name]["numpy"](np, a, b)

    def mdt():
        a, b = inputs()
        a = md.asarray(a, requires_grad=grad)
        b = None if b is None else md.asarray(b, requires_grad=grad)
        return SMALL_OPS[fn_name]["mdtensor"](md, a, b)

    def tor():
        a, b = inputs()
        make = torch.from_numpy if share else torch.tensor  # shared memory, or a copy
        a = make(a).requires_grad_(grad)
        b = None if b is None else make(b).requires_grad_(grad)
        return SMALL_OPS[fn_name]["torch"](torch, a, b)

    def jx():
        import jax.numpy as jnp

        a = jnp.asarray(a_np)
        b = None if b_np is None else jnp.asarray(b_np)
        f = SMALL_OPS[fn_name].get("jax")
        if f is None:
            raise RuntimeError("no JAX form (immutable arrays)")
        fn = f(jnp, a, b)
        return lambda: fn().block_until_ready()

    builders = {"mdtensor": mdt, "torch": tor}
    if not grad:
        builders = {"numpy": numpy, **builders, "jax": jx}
    del jax
    return builders


def _binary(op):
    return {
        "numpy": lambda np_, a, b: (lambda: op(a, b)),
        "mdtensor": lambda md, a, b: (lambda: op(a, b)),
        "torch": lambda t, a, b: (lambda: op(a, b)),
        "jax": lambda jnp, a, b: (lambda: op(a, b)),
    }


def _iadd(a, b):
    a += b


SMALL_OPS = {
    "a + b": _binary(lambda a, b: a + b),
    "a * b": _binary(lambda a, b: a * b),
    "a @ b": _binary(lambda a, b: a @ b),
    "exp(a)": {
        "numpy": lambda np_, a, b: (lambda: np_.exp(a)),
        "mdtensor": lambda md, a, b: (lambda: md.exp(a)),
        "torch": lambda t, a, b: (lambda: t.exp(a)),
        "jax": lambda jnp, a, b: (lambda: jnp.exp(a)),
    },
    "sum(a)": {
        "numpy": lambda np_, a, b: (lambda: np_.sum(a)),
        "mdtensor": lambda md, a, b: (lambda: md.sum(a)),
        "torch": lambda t, a, b: (lambda: t.sum(a)),
        "jax": lambda jnp, a, b: (lambda: jnp.sum(a)),
    },
    "sum(a, axis=0)": {
        "numpy": lambda np_, a, b: (lambda: np_.sum(a, axis=0)),
        "mdtensor": lambda md, a, b: (lambda: md.sum(a, axis=0)),
        "torch": lambda t, a, b: (lambda: t.sum(a, dim=0)),
        "jax": lambda jnp, a, b: (lambda: jnp.sum(a, axis=0)),
    },
    "a += b": {
        "numpy": lambda np_, a, b: (lambda: _iadd(a, b)),
        "mdtensor": lambda md, a, b: (lambda: _iadd(a, b)),
        "torch": lambda t, a, b: (lambda: _iadd(a, b)),
    },
    "a[1:3]": {
        "numpy": lambda np_, a, b: (lambda: a[1:3]),
        "mdtensor": lambda md, a, b: (lambda: a[1:3]),
        "torch": lambda t, a, b: (lambda: a[1:3]),
        "jax": lambda jnp, a, b: (lambda: a[1:3]),
    },
}

_SMALL_SHAPES = {"a @ b": ((8, 8), (8, 8)), "sum(a, axis=0)": ((2, 4), None),
                 "exp(a)": ((8,), None), "sum(a)": ((8,), None), "a[1:3]": ((8,), None)}


def small_op_cases(libs) -> list[Case]:
    cases = []
    for grad in (False, True):
        for name in SMALL_OPS:
            if grad and name == "a += b":
                continue  # in-place on a leaf that requires grad is an error
            sa, sb = _SMALL_SHAPES.get(name, ((8,), (8,)))
            label = f"{name} [8 f32{', grad' if grad else ''}]"
            cases.append(make_case(label, "small", libs,
                                   _op_builders(libs, name, sa, sb, grad=grad)))
    return cases


def large_op_cases(libs) -> list[Case]:
    n = 4 * 1024 * 1024
    return [
        make_case("add [4M f32]", "large", libs,
                  _op_builders(libs, "a + b", (n,), (n,), share=True)),
        make_case("exp [4M f32]", "large", libs,
                  _op_builders(libs, "exp(a)", (n,), share=True)),
        make_case("matmul [1024x1024 f32]", "large", libs,
                  _op_builders(libs, "a @ b", (1024, 1024), (1024, 1024), share=True)),
    ]


# ---------------------------------------------------------------------------------------
# MLP training step: forward + backward of every weight and bias


def mlp_data(sizes, batch, seed=0):
    rng = np.random.default_rng(seed)
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in))
                      .astype(np.float32))
        params.append(np.zeros(fan_out, np.float32))
    x = rng.standard_normal((batch, sizes[0])).astype(np.float32)
    labels = rng.integers(0, sizes[-1], batch)
    onehot = np.eye(sizes[-1], dtype=np.float32)[labels]
    return params, x, onehot


def numpy_mlp_step(params, x, onehot, xp=np):
    """Forward and hand-written backward; returns (loss, grads).  ``xp``: NumPy, or a
    library with its array methods (CuPy for the GPU cases)."""
    W1, b1, W2, b2, W3, b3 = params
    batch = x.shape[0]
    h1 = xp.tanh(x @ W1 + b1)
    h2 = xp.tanh(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    zmax = z.max(axis=-1, keepdims=True)
    e = xp.exp(z - zmax)
    s = e.sum(axis=-1, keepdims=True)
    logp = z - zmax - xp.log(s)
    loss = -(onehot * logp).sum() / batch
    dz = (e / s - onehot) / batch
    dW3 = h2.T @ dz
    db3 = dz.sum(0)
    da2 = (dz @ W3.T) * (1 - h2 * h2)
    dW2 = h1.T @ da2
    db2 = da2.sum(0)
    da1 = (da2 @ W2.T) * (1 - h1 * h1)
    dW1 = x.T @ da1
    db1 = da1.sum(0)
    return loss, [dW1, db1, dW2, db2, dW3, db3]


def mlp_loss(lib, log_softmax, params, x, onehot):
    W1, b1, W2, b2, W3, b3 = params
    h1 = lib.tanh(x @ W1 + b1)
    h2 = lib.tanh(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    return -lib.sum(onehot * log_softmax(z)) / x.shape[0]


def training_step(lib, params, x, onehot):
    """An MLP training step of an autograd library with torch's API (mdtensor, PyTorch):
    clear the gradients, forward, backward."""
    def step():
        for p in params:
            p.grad = None
        loss = mlp_loss(lib, lambda z: lib.log_softmax(z, dim=-1), params, x, onehot)
        loss.backward()
        return loss
    return step


def mlp_builders(libs, sizes, batch):
    params_np, x_np, onehot_np = mlp_data(sizes, batch)

    def numpy():
        return lambda: numpy_mlp_step(params_np, x_np, onehot_np)

    def mdt():
        md = libs["mdtensor"]
        params = [md.asarray(p.copy(), requires_grad=True) for p in params_np]
        return training_step(md, params, md.asarray(x_np), md.asarray(onehot_np))

    def tor():
        torch = libs["torch"]
        params = [torch.tensor(p.copy(), requires_grad=True) for p in params_np]
        return training_step(torch, params, torch.tensor(x_np), torch.tensor(onehot_np))

    def hips():
        import autograd
        import autograd.numpy as anp

        def log_softmax(z):
            zmax = anp.max(z, axis=-1, keepdims=True)
            return z - zmax - anp.log(anp.sum(anp.exp(z - zmax), axis=-1, keepdims=True))

        grad = autograd.grad(lambda ps: mlp_loss(anp, log_softmax, ps, x_np, onehot_np))
        return lambda: grad(list(params_np))

    def _jax_grad():
        import jax
        import jax.numpy as jnp

        params = [jnp.asarray(p) for p in params_np]
        x, onehot = jnp.asarray(x_np), jnp.asarray(onehot_np)
        g = jax.grad(lambda ps: mlp_loss(jnp, lambda z: jax.nn.log_softmax(z, axis=-1),
                                          ps, x, onehot))
        return jax, g, params

    def jx():
        jax, g, params = _jax_grad()
        return lambda: jax.block_until_ready(g(params))

    def jxjit():
        jax, g, params = _jax_grad()
        gj = jax.jit(g)
        return lambda: jax.block_until_ready(gj(params))

    return {"numpy": numpy, "mdtensor": mdt, "torch": tor, "autograd": hips, "jax": jx,
            "jax-jit": jxjit}


def check_numpy_mlp(libs) -> str:
    """Compare the hand-written NumPy gradients with torch's (when torch is installed)."""
    torch = libs["torch"]
    if isinstance(torch, Exception):
        return "skipped (torch not installed)"
    params_np, x_np, onehot_np = mlp_data((16, 16, 16, 4), 8)
    loss, grads = numpy_mlp_step(params_np, x_np, onehot_np)
    params = [torch.tensor(p, requires_grad=True) for p in params_np]
    tl = mlp_loss(torch, lambda z: torch.log_softmax(z, dim=-1), params,
                   torch.tensor(x_np), torch.tensor(onehot_np))
    tl.backward()
    worst = max(float(np.abs(g - p.grad.numpy()).max()) for g, p in zip(grads, params))
    assert abs(float(tl) - loss) < 1e-5 and worst < 1e-5, (float(tl), loss, worst)
    return f"ok (max |grad difference| {worst:.1e})"


def mlp_cases(libs) -> list[Case]:
    return [
        make_case("MLP 16-16-16-4, batch 8", "mlp", libs, mlp_builders(libs, (16, 16, 16, 4), 8)),
        make_case("MLP 784-256-256-10, batch 64", "mlp", libs,
                  mlp_builders(libs, (784, 256, 256, 10), 64)),
    ]


# ---------------------------------------------------------------------------------------
# md.compile: the MLP training step captured once and replayed (docs/COMPILE.md)

#: case name -> seconds the capture of its compiled step took (the call that records it)
CAPTURE_SECONDS: dict[str, float] = {}


def compile_builders(libs, name, sizes, batch):
    """The MLP step of ``mlp_builders``: NumPy by hand, mdtensor eager, the same step under
    ``md.compile`` (warmed up and captured before timing), ``jax.jit(jax.grad)``."""
    import time

    eager = mlp_builders(libs, sizes, batch)

    def compiled():
        md = libs["mdtensor"]
        params_np, x_np, onehot_np = mlp_data(sizes, batch)
        params = [md.asarray(p.copy(), requires_grad=True) for p in params_np]
        step = md.compile(training_step(md, params, md.asarray(x_np), md.asarray(onehot_np)),
                          fullgraph=True)
        step()  # the warm-up
        t0 = time.perf_counter()
        step()  # the capture
        CAPTURE_SECONDS[name] = time.perf_counter() - t0
        return step

    return {"numpy": eager["numpy"], "mdtensor": eager["mdtensor"],
            "mdtensor-compile": compiled, "jax-jit": eager["jax-jit"]}


def jax_compile_builders(libs, name, sizes, batch):
    """The MLP step on mdtensor's JAX backend, eager and under ``md.compile`` (lowered to
    ``jax.jit``: docs/COMPILE.md), against ``jax.jit(jax.grad)`` of the same function in
    ``jax.numpy``; every call waits for its gradients."""
    import time

    eager = mlp_builders(libs, sizes, batch)

    def on_jax(compiled):
        def build():
            import jax

            md = libs["mdtensor"]
            params_np, x_np, onehot_np = mlp_data(sizes, batch)
            params = [md.asarray(p.copy(), requires_grad=True, device="jax")
                      for p in params_np]
            step = training_step(md, params, md.asarray(x_np, device="jax"),
                                 md.asarray(onehot_np, device="jax"))
            if compiled:
                step = md.compile(step, fullgraph=True)
                step()  # the warm-up
                t0 = time.perf_counter()
                step()  # the capture
                CAPTURE_SECONDS[name] = time.perf_counter() - t0

            def run():
                step()
                return jax.block_until_ready([p.grad._data for p in params])

            return run
        return build

    return {"mdtensor": on_jax(False), "mdtensor-compile": on_jax(True),
            "jax-jit": eager["jax-jit"]}


def compile_cases(libs) -> list[Case]:
    cases = []
    for sizes, batch in (((16, 16, 16, 4), 8), ((784, 256, 256, 10), 64)):
        name = f"compiled MLP {'-'.join(map(str, sizes))}, batch {batch}"
        cases.append(make_case(name, "compile", libs,
                               compile_builders(libs, name, sizes, batch)))
    name = "compiled MLP 16-16-16-4, batch 8, JAX backend"
    cases.append(make_case(name, "compile", libs,  # without JAX: "setup failed"
                           jax_compile_builders(libs, name, (16, 16, 16, 4), 8)))
    return cases


# ---------------------------------------------------------------------------------------
# The CNN example: one training epoch of examples/train_cnn.py and of its PyTorch twin


def cnn_cases(libs) -> list[Case]:
    """One epoch (2048 images, 32 minibatches of 64) of ``examples/train_cnn.py``'s training
    loop on the CPU, and of ``benchmarks/cnn_torch.py``, the same program in PyTorch."""

    def build_md():
        from .cnn_torch import example

        ex = example()
        md = libs["mdtensor"]
        x, y = ex.load_data(2048, 1, "cpu")
        md.manual_seed(0)
        model = ex.make_model("cpu")
        opt, _ = ex.make_training(model)
        shuffle = md.Generator().manual_seed(2)
        return lambda: ex.train_epoch(model, opt, x, y, shuffle)

    def build_torch():
        from . import cnn_torch

        ex = cnn_torch.example()
        torch = libs["torch"]
        x, y = cnn_torch.load_data(ex, 2048, 1)
        torch.manual_seed(0)
        model = cnn_torch.make_model(ex.CLASSES)
        opt, _ = cnn_torch.make_training(model)
        shuffle = torch.Generator().manual_seed(2)
        return lambda: cnn_torch.train_epoch(model, opt, x, y, shuffle, ex.BATCH)

    return [make_case("CNN epoch (examples/train_cnn.py)", "cnn", libs,
                      {"mdtensor": build_md, "torch": build_torch})]


# ---------------------------------------------------------------------------------------
# Layer costs


def layer_cases(libs) -> list[Case]:
    md = libs["mdtensor"]
    cases = []
    a_np, b_np = random_data((8,), 0), random_data((8,), 1)

    # Note: a mode must be active only while its own case runs, so these cases time 100
    # ops per call, entering the mode inside the call (its cost amortised over the 100).
    def hundred_adds(a, b):
        for _ in range(100):
            a + b

    def plain():
        a, b = md.asarray(a_np), md.asarray(b_np)
        return lambda: hundred_adds(a, b)

    def with_mode():
        a, b = md.asarray(a_np), md.asarray(b_np)

        class NoOp(md.modes.DispatchMode):
            def __md_dispatch__(self, func, types, args=(), kwargs=None):
                return func(*args, **(kwargs or {}))

        mode = NoOp()

        def run():
            with mode:
                hundred_adds(a, b)
        return run

    cases.append(make_case("100 x (a + b), no mode [8 f32]", "layers", libs, {"mdtensor": plain}))
    cases.append(make_case("100 x (a + b), active no-op DispatchMode", "layers", libs,
                           {"mdtensor": with_mode}))

    def step(x, w):
        y = x * w
        y.add_(1)
        return y.sum()

    def plain_step():
        x, w = md.asarray(a_np), md.asarray(b_np)
        return lambda: step(x, w)

    def functional_step():
        x, w = md.asarray(a_np), md.asarray(b_np)
        f = md.func.functionalize(step)
        return lambda: f(x, w)

    cases.append(make_case("x*w; add_(1); sum(): plain", "layers", libs, {"mdtensor": plain_step}))
    cases.append(make_case("x*w; add_(1); sum(): functionalized", "layers", libs,
                           {"mdtensor": functional_step}))

    def md_jax(op):
        def build():
            a = md.asarray(a_np, device="jax")
            b = md.asarray(b_np, device="jax")
            f = {"add": lambda: a + b, "exp": lambda: md.exp(a), "sum": lambda: md.sum(a)}[op]
            return lambda: f()._data.block_until_ready()
        return build

    def raw_jax(op):
        def build():
            import jax.numpy as jnp

            a, b = jnp.asarray(a_np), jnp.asarray(b_np)
            f = {"add": lambda: a + b, "exp": lambda: jnp.exp(a), "sum": lambda: jnp.sum(a)}[op]
            return lambda: f().block_until_ready()
        return build

    for op in ("add", "exp", "sum"):
        cases.append(make_case(f"JAX backend {op} [8 f32]", "layers", libs,
                               {"mdtensor": md_jax(op), "jax": raw_jax(op)}))
    return cases


# ---------------------------------------------------------------------------------------
# Function transforms


TRANSFORMS = ("vjp", "jvp", "jacrev", "jacfwd")


def transform_cases(libs) -> list[Case]:
    """A vjp, a jvp and both Jacobians of a 64 -> 64 tanh layer ``tanh(W @ x + b)`` at one
    input, with each library's function transforms.  mdtensor computes ``jvp``/``jacfwd``
    by double vjp and the Jacobians one row (column) at a time (Note [Differentiation
    transforms] in mdtensor/_grad_transforms.py); torch.func and JAX batch them with vmap."""
    n = 64
    w_np = random_data((n, n), 2) / 8
    b_np, x_np, v_np = random_data((n,), 3), random_data((n,), 4), random_data((n,), 5)

    def calls(T, f, x, v):
        return {"vjp": lambda: T.vjp(f, x)[1](v), "jvp": lambda: T.jvp(f, (x,), (v,)),
                "jacrev": lambda: T.jacrev(f)(x), "jacfwd": lambda: T.jacfwd(f)(x)}

    def eager(name, kind):  # mdtensor and torch: the same calls
        def build():
            lib = libs[name]
            w, b, x, v = (lib.asarray(a) for a in (w_np, b_np, x_np, v_np))
            return calls(lib.func, lambda x: lib.tanh(w @ x + b), x, v)[kind]
        return build

    def jx(kind, jit):
        def build():
            import jax
            import jax.numpy as jnp

            w, b, x, v = (jnp.asarray(a) for a in (w_np, b_np, x_np, v_np))
            call = calls(jax, lambda x: jnp.tanh(w @ x + b), x, v)[kind]
            if jit:
                compiled = jax.jit(lambda x, v: calls(
                    jax, lambda x: jnp.tanh(w @ x + b), x, v)[kind]())
                return lambda: jax.block_until_ready(compiled(x, v))
            return lambda: jax.block_until_ready(call())
        return build

    return [make_case(f"{kind} of tanh(W @ x + b), 64 -> 64", "transforms", libs,
                      {"mdtensor": eager("mdtensor", kind), "torch": eager("torch", kind),
                       "jax": jx(kind, False),
                       "jax-jit": jx(kind, True)})
            for kind in TRANSFORMS] + [per_sample_case(libs)]


def per_sample_case(libs) -> Case:
    """Per-sample gradients of the MLP 16-16-16-4 loss over a batch of 64: ``vmap(grad)``
    in mdtensor, torch.func and JAX (eager and jit), and mdtensor's loop of ``grad`` over
    the samples."""
    shapes = ((16, 16), (16,), (16, 16), (16,), (16, 4), (4,))
    params_np = [random_data(s, 10 + i) * 0.25 for i, s in enumerate(shapes)]
    x_np, y_np = random_data((64, 16), 20), random_data((64, 4), 21)

    def loss(lib, p, x, y):
        h = lib.tanh(x @ p[0] + p[1])
        h = lib.tanh(h @ p[2] + p[3])
        return ((h @ p[4] + p[5] - y) ** 2).mean()

    def eager(name):
        def build():
            lib = libs[name]
            p = tuple(lib.asarray(a) for a in params_np)
            x, y = lib.asarray(x_np), lib.asarray(y_np)
            f = lib.func.vmap(lib.func.grad(lambda p, x, y: loss(lib, p, x, y)),
                              in_dims=(None, 0, 0))
            return lambda: f(p, x, y)
        return build

    def loop():
        md = libs["mdtensor"]
        p = tuple(md.asarray(a) for a in params_np)
        x, y = md.asarray(x_np), md.asarray(y_np)
        g = md.func.grad(lambda p, x, y: loss(md, p, x, y))
        return lambda: [g(p, x[i], y[i]) for i in range(64)]

    def jx(jit):
        def build():
            import jax
            import jax.numpy as jnp

            p = tuple(jnp.asarray(a) for a in params_np)
            x, y = jnp.asarray(x_np), jnp.asarray(y_np)
            f = jax.vmap(jax.grad(lambda p, x, y: loss(jnp, p, x, y)), in_axes=(None, 0, 0))
            f = jax.jit(f) if jit else f
            return lambda: jax.block_until_ready(f(p, x, y))
        return build

    return make_case("per-sample grads, MLP 16-16-16-4, batch 64", "transforms", libs,
                     {"mdtensor": eager("mdtensor"), "torch": eager("torch"),
                      "jax": jx(False), "jax-jit": jx(True), "mdtensor-loop": loop})


def import_times(repeats: int = 5) -> dict[str, float]:
    """Median wall time of ``import X`` in a fresh interpreter, in seconds.

    Measured with cached bytecode, as after ``pip install`` (which compiles it): the
    interpreters get a private ``PYTHONPYCACHEPREFIX``, filled by one unmeasured import of
    each module first, and ``PYTHONDONTWRITEBYTECODE`` is lifted.  Without that an
    environment that sets it compiles mdtensor's source on every import (about half of the
    time on the 2-core development machine) while numpy and torch load their installed
    ``.pyc`` files.
    """
    import os
    import tempfile

    out = {}
    with tempfile.TemporaryDirectory(prefix="mdtensor-bench-pycache-") as cache:
        env = dict(os.environ, PYTHONPYCACHEPREFIX=cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for mod in ("numpy", "mdtensor", "torch"):
            code = (f"import time; t=time.perf_counter(); import {mod}; "
                    f"print(time.perf_counter()-t)")
            times = []
            for _ in range(repeats + 1):  # the first one writes the bytecode
                r = subprocess.run([sys.executable, "-c", code], capture_output=True,
                                   text=True, env=env)
                if r.returncode != 0:
                    break
                times.append(float(r.stdout.strip().splitlines()[-1]))
            times = sorted(times[1:])
            if times:
                out[mod] = times[len(times) // 2]
    return out
