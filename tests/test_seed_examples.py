"""The seed document's examples (shared/seeds/001, sections 4 and 9) in mdtensor's spelling."""

from __future__ import annotations

import time

import mdtensor as md


def test_custom_op_with_per_device_kernels(capsys):
    md.library.define("seedlib::custom_add", "(Tensor x, Tensor y) -> Tensor")

    @md.library.impl("seedlib::custom_add", "CPU")
    def custom_add_cpu(x, y):
        print("CPU implementation")
        return md.ops.aten.add.Tensor(x.detach(), y.detach())

    x, y = md.randn(10, device="cpu"), md.randn(10, device="cpu")  # a CPU kernel
    out = md.ops.seedlib.custom_add(x, y)
    assert "CPU implementation" in capsys.readouterr().out
    assert out.tolist() == (x + y).tolist()


def test_logging_mode_example(capsys):
    class LoggingMode(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            print(f"call: {func.__name__}")
            print(f"  input shapes: {[a.shape if isinstance(a, md.Tensor) else a for a in args]}")
            result = func(*args, **(kwargs or {}))
            print(f"  output shape: {result.shape if isinstance(result, md.Tensor) else result}")
            return result

    with LoggingMode():
        x = md.randn(3, 4)
        y = x + 1
        y * 2
    out = capsys.readouterr().out
    assert "call: add\n  input shapes: [(3, 4), 1, 1]\n  output shape: (3, 4)" in out
    assert "call: mul" in out


class MyTensor(md.Tensor):
    """The seed's subclass: unwraps, runs the op, wraps the result back."""

    @staticmethod
    def __new__(cls, data):
        return md.Tensor._make_subclass(cls, data)

    def __repr__(self):
        return f"MyTensor({super().__repr__()})"

    @classmethod
    def __md_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(x):
            return x.data if isinstance(x, MyTensor) else x

        def wrap(x):
            return MyTensor(x) if isinstance(x, md.Tensor) else x

        args = tuple(unwrap(a) for a in args)
        kwargs = {k: unwrap(v) for k, v in (kwargs or {}).items()}
        return wrap(func(*args, **kwargs))


def test_tensor_subclass_example():
    x = MyTensor(md.randn(3, 4))
    y = x + 1
    assert type(y) is MyTensor
    assert repr(y).startswith("MyTensor(tensor(")
    assert md.DispatchKey.Python in y.keyset


def test_profiling_mode_example():
    class ProfilingMode(md.DispatchMode):
        def __init__(self):
            self.op_counts, self.op_times = {}, {}

        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.__name__
            self.op_counts[name] = self.op_counts.get(name, 0) + 1
            start = time.time()
            result = func(*args, **(kwargs or {}))
            self.op_times[name] = self.op_times.get(name, 0) + time.time() - start
            return result

    profiler = ProfilingMode()
    w = md.randn(4, 2, requires_grad=True)
    with profiler:
        md.tanh(md.randn(3, 4) @ w).sum().backward()
    # forward, then backward's one matmul_backward, which computes only the product w needs
    # (the constant input's is skipped, as PyTorch's output mask does)
    assert profiler.op_counts["matmul"] == 1
    assert profiler.op_counts["matmul_backward"] == 1
    assert profiler.op_counts["tanh"] == 1


def test_fake_tensor_mode_example():
    mode = md.modes.FakeTensorMode()
    with mode:
        real = md.randn(1024, 1024)
        x = mode.from_tensor(real)
        y = x @ x
    assert y.shape == (1024, 1024) and y.device == real.device
