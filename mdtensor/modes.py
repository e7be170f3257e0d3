"""``md.modes``: dispatch modes, tensor-subclass helpers, logging/profiling and fake modes.

A mode sees every op that executes (Note [Python key] in ``mdtensor/layers/python_dispatch.py``)::

    class Counter(md.modes.DispatchMode):
        def __init__(self):
            self.n = 0
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            self.n += 1
            return func(*args, **(kwargs or {}))

    with Counter() as c:
        md.exp(x) + 1
    c.n  # 2
"""

from __future__ import annotations

import time as _time
from collections import defaultdict

from mdtensor.backends.meta_backend import MetaArray
from mdtensor.layers.python_dispatch import mode_stack, push_mode
from mdtensor.tensors.device import Device, as_device
from mdtensor.tensors.layout import SPARSE, layout_of, sparse_csr, sparse_keys
from mdtensor.tensors.tensor import Tensor

from ._pytree import tree_map

__all__ = [
    "DispatchMode",
    "FakeTensor",
    "FakeTensorMode",
    "LoggingMode",
    "ProfilingMode",
    "active_modes",
    "tree_map",
    "unwrap",
]


class DispatchMode:
    """Base class of dispatch modes: override ``__md_dispatch__``.

    ``with mode:`` pushes it (modes nest; the innermost runs first).  While its handler runs
    the mode is popped, so calling ``func`` reaches the next mode or the kernels.  A mode
    instance can be entered again after it exits, and re-entered while active.
    """

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        guards = self.__dict__.setdefault("_mode_guards", [])
        g = push_mode(self)
        guards.append(g)
        g.__enter__()
        return self

    def __exit__(self, *exc):
        self.__dict__["_mode_guards"].pop().__exit__(*exc)


def unwrap(t):
    """The tensor a subclass instance stands for (Note [Tensor subclasses] in
    mdtensor/layers/python_dispatch.py): a wrapper's inner tensor, another subclass instance as a
    plain tensor of the same data; anything else as it is.  ``tree_map(unwrap, args)``
    unwraps a handler's arguments."""
    if not isinstance(t, Tensor) or type(t) is Tensor:
        return t
    inner = getattr(t, "__dict__", {}).get("__md_inner__")
    if inner is not None:
        return inner
    return t.as_subclass(Tensor)


def active_modes() -> tuple:
    """The modes active in this thread/context, innermost last."""
    return mode_stack.get()


def _describe(v) -> str:
    if isinstance(v, Tensor):
        if v._ks & SPARSE:  # the layout, as PyTorch's LoggingTensor shows it
            return f"{v.dtype.name}{list(v.shape)}({layout_of(v).name})"
        return f"{v.dtype.name}{list(v.shape)}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_describe(x) for x in v) + "]"
    return repr(v)


class LoggingMode(DispatchMode):
    """Records every op: name, input shapes/dtypes and output (``log``, or printed)."""

    def __init__(self, print_fn=None):
        self.log: list[str] = []
        self._print = print_fn

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = ", ".join([_describe(a) for a in args]
                           + [f"{k}={_describe(v)}" for k, v in kwargs.items()])
        line = f"{func.name}({inputs}) -> {_describe(out)}"
        self.log.append(line)
        if self._print is not None:
            self._print(line)
        return out


class ProfilingMode(DispatchMode):
    """Counts ops and times them; ``report()`` is a table sorted by total _time."""

    def __init__(self):
        self.counts: dict[str, int] = defaultdict(int)
        self.seconds: dict[str, float] = defaultdict(float)

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        t0 = _time.perf_counter()
        out = func(*args, **(kwargs or {}))
        self.seconds[func.name] += _time.perf_counter() - t0
        self.counts[func.name] += 1
        return out

    def report(self) -> str:
        rows = sorted(self.counts, key=lambda n: -self.seconds[n])
        lines = [f"{'op':<32} {'calls':>7} {'total ms':>10} {'mean us':>10}"]
        for n in rows:
            total = self.seconds[n]
            lines.append(f"{n:<32} {self.counts[n]:>7} {total * 1e3:>10.3f} "
                         f"{total / self.counts[n] * 1e6:>10.2f}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Fake tensors


class FakeTensor(Tensor):
    """A meta tensor that remembers the device of the real tensor it stands for."""

    __slots__ = ("fake_device",)

    @property
    def device(self):
        return self.fake_device

    def __repr__(self) -> str:
        sparse = f", layout={layout_of(self)!r}, nnz={self.nnz}" if self._ks & SPARSE else ""
        return (f"FakeTensor(size={self.shape}, dtype=md.{self.dtype.name}, "
                f"device='{self.fake_device}'{sparse})")

    __str__ = __repr__


def _to_fake(t: Tensor, device) -> FakeTensor:
    meta = Device("meta")
    f = object.__new__(FakeTensor)
    if t._ks & SPARSE:  # shape, layout and nnz (backends/meta_sparse.py)
        f._data, f._ks = _fake_sparse(t), sparse_keys(meta.ks)
    else:
        f._data, f._ks = MetaArray(t.shape, t.dtype.numpy), meta.ks
    f._device = meta
    f._vc = None
    f._view = None
    f._ag = None
    f.fake_device = device
    if t.requires_grad and t.is_leaf:  # a leaf's requires_grad is part of what it is
        f.requires_grad_(True)
    return f


def _fake_sparse(t: Tensor):
    """The meta array of sparse ``t``: its shape, dtype, layout, nnz and coalescedness."""
    from mdtensor.backends.meta_sparse import meta_like

    layout = layout_of(t)
    coalesced = layout is sparse_csr or bool(t.is_coalesced())
    return meta_like(t.shape, t.dtype.numpy, t.nnz, layout, coalesced, t.dense_dim())


class FakeTensorMode(DispatchMode):
    """Run ops on fake tensors: shapes and dtypes only, through the meta kernels.

    ``mode.from_tensor(real)`` makes a fake twin; ops on fakes give fakes on the same fake
    device.  Factories (``md.ones``, ``md.asarray`` through ``lift_fresh``) inside the mode
    make fakes, as in PyTorch.  Ops whose output shape depends on data (``nonzero``,
    boolean-mask indexing, ``unique_*``) raise naming the op; mixing fake and real tensors
    raises.
    """

    def from_tensor(self, t: Tensor) -> FakeTensor:
        if isinstance(t, FakeTensor):
            return t
        return _to_fake(t, t.device)

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "factory" in func.tags:  # md.ones(...) inside the mode is fake, as in PyTorch
            device = as_device(kwargs.get("device"))
            out = func(*args, **{**kwargs, "device": "meta"})
            return tree_map(lambda v: _to_fake(v, device) if isinstance(v, Tensor) else v,
                            out)
        if func.name == "aten::lift_fresh":  # md.asarray(data): Note [lift_fresh]
            return self.from_tensor(args[0])
        if func.name == "aten::to_device_copy" and isinstance(args[0], FakeTensor):
            return _to_fake(args[0], as_device(args[1]))  # a fake on the other device
        fakes, reals = [], []
        tree_map(lambda v: (fakes if isinstance(v, FakeTensor) else reals).append(v)
                 if isinstance(v, Tensor) else None, (args, kwargs))
        if fakes and reals:
            raise RuntimeError(
                f"{func.name}: mixing fake and real tensors; convert real tensors with "
                f"FakeTensorMode.from_tensor first")
        if not fakes:
            return func(*args, **kwargs)
        if "dynamic_output_shape" in func.tags:
            raise NotImplementedError(
                f"{func.name}: the output shape depends on the data, which fake tensors "
                f"do not have")
        device = fakes[0].fake_device
        for f in fakes[1:]:
            if f.fake_device != device:
                raise ValueError(f"{func.name}: expected all tensors to be on the same "
                                 f"device, but found tensors on {device} and "
                                 f"{f.fake_device}")
        out = func(*args, **kwargs)
        return tree_map(lambda v: _to_fake(v, device) if isinstance(v, Tensor) and
                        not isinstance(v, FakeTensor) else v, out)
