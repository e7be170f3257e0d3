"""GPU benchmark cases: ``python -m benchmarks --device cuda``.

mdtensor on ``device="cuda"`` (the CuPy backend) against CuPy itself and PyTorch CUDA,
where installed: small ops (the cost of dispatch and launch), 16M-element elementwise ops
(memory bandwidth), a large matmul and MLP training steps.  Every case waits for the GPU
after each timed loop (Note [Timing asynchronous devices] in harness.py).
"""

from __future__ import annotations

import numpy as np

from .cases import (
    make_case,
    mlp_data,
    mlp_loss,
    numpy_mlp_step,
    random_data,
    training_step,
    try_import,
)
from .harness import Case

IMPLS = ("cupy", "mdtensor", "torch")
REFS = ("cupy", "torch")

_BIG = 16 * 1024 * 1024


def libraries() -> dict:
    """mdtensor, CuPy and PyTorch, each an Exception when not usable on a GPU."""
    libs = {"mdtensor": try_import("mdtensor"), "cupy": try_import("cupy")}
    if not isinstance(libs["cupy"], Exception):
        try:
            libs["cupy"].cuda.runtime.getDeviceCount()
        except Exception as e:  # noqa: BLE001 - no driver, no device
            libs["cupy"] = e
    torch = try_import("torch")
    if not isinstance(torch, Exception) and not torch.cuda.is_available():
        torch = RuntimeError("torch has no CUDA device")
    libs["torch"] = torch
    return libs


def gpu_name(libs) -> str:
    cp = libs["cupy"]
    if isinstance(cp, Exception):
        return f"n/a ({cp})"
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


# Each op: how each library spells it, given its two inputs.
_OPS = {
    "a + b": lambda lib, a, b: (lambda: a + b),
    "sum(a, axis=0)": lambda lib, a, b: (
        (lambda: lib.sum(a, dim=0)) if lib.__name__ == "torch" else (lambda: lib.sum(a, axis=0))),
    "exp(a)": lambda lib, a, b: (lambda: lib.exp(a)),
    "a.add_(b)": lambda lib, a, b: (
        (lambda: lib.add(a, b, out=a)) if lib.__name__ == "cupy" else (lambda: a.add_(b))),
    "a @ b": lambda lib, a, b: (lambda: a @ b),
}


def _op_builders(libs, op, shape_a, shape_b=None, grad=False):
    a_np = random_data(shape_a, 0)
    b_np = random_data(shape_b or shape_a, 1)
    md, cp, torch = libs["mdtensor"], libs["cupy"], libs["torch"]

    def mdt():
        a = md.asarray(a_np, device="cuda", requires_grad=grad)
        b = md.asarray(b_np, device="cuda", requires_grad=grad)
        return _OPS[op](md, a, b)

    def cupy():
        return _OPS[op](cp, cp.asarray(a_np), cp.asarray(b_np))

    def tor():
        a = torch.tensor(a_np, device="cuda", requires_grad=grad)
        b = torch.tensor(b_np, device="cuda", requires_grad=grad)
        return _OPS[op](torch, a, b)

    builders = {"mdtensor": mdt, "torch": tor}
    return builders if grad else {"cupy": cupy, **builders}


def _mlp_builders(libs, sizes, batch):
    params_np, x_np, onehot_np = mlp_data(sizes, batch)
    md, cp, torch = libs["mdtensor"], libs["cupy"], libs["torch"]

    def cupy():  # the hand-written forward and backward (benchmarks/cases.py)
        params = [cp.asarray(p) for p in params_np]
        x, onehot = cp.asarray(x_np), cp.asarray(onehot_np)
        return lambda: numpy_mlp_step(params, x, onehot, xp=cp)

    def mdt():
        params = [md.asarray(p, device="cuda", requires_grad=True) for p in params_np]
        return training_step(md, params, md.asarray(x_np, device="cuda"),
                             md.asarray(onehot_np, device="cuda"))

    def tor():
        params = [torch.tensor(p, device="cuda", requires_grad=True) for p in params_np]
        return training_step(torch, params, torch.tensor(x_np, device="cuda"),
                             torch.tensor(onehot_np, device="cuda"))

    return {"cupy": cupy, "mdtensor": mdt, "torch": tor}


def check_mlp(libs) -> str:
    """mdtensor's MLP step computes the hand-written CuPy step's gradients (float32,
    784-256-256-10)."""
    md, cp = libs["mdtensor"], libs["cupy"]
    if any(isinstance(lib, Exception) for lib in (md, cp)):
        return "skipped (mdtensor or CuPy not usable)"
    params_np, x_np, onehot_np = mlp_data((784, 256, 256, 10), 64)
    _, grads = numpy_mlp_step([cp.asarray(p) for p in params_np], cp.asarray(x_np),
                              cp.asarray(onehot_np), xp=cp)
    params = [md.asarray(p, device="cuda", requires_grad=True) for p in params_np]
    mlp_loss(md, lambda z: md.log_softmax(z, dim=-1), params,
             md.asarray(x_np, device="cuda"), md.asarray(onehot_np, device="cuda")).backward()
    worst = max(float(np.abs(cp.asnumpy(g) - p.grad.to("cpu").numpy()).max())
                for g, p in zip(grads, params))
    assert worst < 1e-4, worst
    return f"ok (max |grad difference| mdtensor vs hand-written CuPy {worst:.1e})"


def cases(libs) -> list[Case]:
    cp = libs["cupy"]
    sync = None if isinstance(cp, Exception) else cp.cuda.runtime.deviceSynchronize
    out = [
        make_case("a + b [8 f32]", "small", libs, _op_builders(libs, "a + b", (8,)), sync),
        make_case("a + b [8 f32, grad]", "small", libs,
                  _op_builders(libs, "a + b", (8,), grad=True), sync),
        make_case("exp(a) [8 f32]", "small", libs, _op_builders(libs, "exp(a)", (8,)), sync),
        make_case("sum(a, axis=0) [2x4 f32]", "small", libs,
                  _op_builders(libs, "sum(a, axis=0)", (2, 4)), sync),
        make_case("a.add_(b) [8 f32]", "small", libs, _op_builders(libs, "a.add_(b)", (8,)), sync),
        make_case("a + b [16M f32]", "large", libs, _op_builders(libs, "a + b", (_BIG,)), sync),
        make_case("exp(a) [16M f32]", "large", libs, _op_builders(libs, "exp(a)", (_BIG,)), sync),
        make_case("a.add_(b) [16M f32]", "large", libs,
                  _op_builders(libs, "a.add_(b)", (_BIG,)), sync),
        make_case("matmul [4096x4096 f32]", "large", libs,
                  _op_builders(libs, "a @ b", (4096, 4096)), sync),
        make_case("MLP 784-256-256-10, batch 64", "mlp", libs,
                  _mlp_builders(libs, (784, 256, 256, 10), 64), sync),
        make_case("MLP 784-4096-4096-10, batch 4096", "mlp", libs,
                  _mlp_builders(libs, (784, 4096, 4096, 10), 4096), sync),
    ]
    return out
