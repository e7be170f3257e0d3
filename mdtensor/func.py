"""``md.func``: program transforms built on the dispatcher (tracing, functionalization)
and on the autograd engine (``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian``: mdtensor/_grad_transforms.py, docs/TRANSFORMS.md).

``functionalize(f, remove=...)`` runs ``f`` with every mutation replaced by functional ops
(Note [Functionalize] in mdtensor/layers/functionalize.py); ``trace(functionalize(f), x)``
records the functional program.

``trace(f, *example_args)`` runs ``f`` under a recording mode and returns a ``Graph`` of the
``OpOverload`` calls that executed -- after autograd, so a ``backward()`` inside ``f`` is
recorded too (forward and backward in one graph).  The graph prints as readable Python and
replays on new inputs of the same shapes without overload resolution or mode overhead.

Note [Tracing backward]
~~~~~~~~~~~~~~~~~~~~~~~
A backward pass inside ``f`` runs its formulas on tensors the autograd layer rebuilt from
what the forward saved (Note [Saved outputs] in mdtensor/layers/autograd/graph.py), and
``autograd.grad`` returns detached gradients: new Tensor objects around the arrays of
recorded values.  The recorder therefore names a value by its array as well as by its
Tensor, so such a tensor refers to the recorded value and a replay computes the backward
from the replayed forward (not from trace-time constants).  The ``.grad`` writes, which are
no op, reach the recorder through the engine's gradient sink (Note [Gradient sinks]) and
become an ``accumulate_grads`` step of the graph.
"""

from __future__ import annotations

from mdtensor.layers.autograd.graph import accumulate_grads, grad_sink
from mdtensor.layers.functionalize import FunctionalTensor, functionalize
from mdtensor.tensors.tensor import Tensor

from ._grad_transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .layers.vmap import BatchedTensor, vmap
from .modes import DispatchMode, tree_map

__all__ = ["BatchedTensor", "FunctionalTensor", "Graph", "functionalize", "grad",
           "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "trace", "vjp", "vmap"]


class _Ref:
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Graph:
    """A recorded program: inputs, op calls, outputs."""

    def __init__(self):
        self.inputs: list[str] = []
        self.calls: list[tuple] = []  # (op, args, kwargs, output names)
        self.constants: dict[str, Tensor] = {}
        self.outputs = None

    def __str__(self) -> str:
        lines = [f"def traced({', '.join(self.inputs)}):"]
        for op, args, kwargs, outs in self.calls:
            parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
            target = ", ".join(o or "_" for o in outs) if outs else "_"
            name = (f"md.ops.{op.schema.namespace}.{op.schema.name}.{op.overload_name}"
                    if hasattr(op, "schema") else op.path)
            lines.append(f"    {target} = {name}({', '.join(parts)})")
        lines.append(f"    return {self.outputs!r}")
        return "\n".join(lines)

    __repr__ = __str__

    def __call__(self, *inputs):
        if len(inputs) != len(self.inputs):
            raise TypeError(f"traced graph takes {len(self.inputs)} inputs, got {len(inputs)}")
        env = dict(zip(self.inputs, inputs))
        env.update(self.constants)

        def value(v):
            return tree_map(lambda x: env[x.name] if isinstance(x, _Ref) else x, v)

        for op, args, kwargs, outs in self.calls:
            out = op(*value(args), **value(kwargs))
            results = out if isinstance(out, (tuple, list)) else (out,)
            for name, r in zip(outs, results):
                if name:
                    env[name] = r
        return value(self.outputs)


class _Step:
    """A recorded step that is no op (Note [Tracing backward]): ``name`` as an op's,
    ``path`` for printing."""

    __slots__ = ("fn", "name", "path")

    def __init__(self, fn, name, path):
        self.fn, self.name, self.path = fn, name, path

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)


_ACCUMULATE = _Step(accumulate_grads, "autograd::accumulate_grads",
                    "mdtensor.layers.autograd.graph.accumulate_grads")
_DETACH = _Step(Tensor.detach, "autograd::detach", "md.Tensor.detach")


# Note [Writes that swap arrays]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On an immutable backend (JAX) an in-place op runs its functional form -- the op the
# recorder sees, below Functionalize -- and the mutated tensor takes the result's array
# (Note [Functionalize] in mdtensor/layers/functionalize.py).  A tensor is therefore named
# together with the array it held: a tensor whose array changed since is the value of the
# op that made its new array (a backward's ``zeros`` + ``index_put_`` reads the replayed
# ``index_put``, not the trace-time zeros).  An array no recorded op made (a view of a
# mutated base regenerated below the dispatcher) cannot be replayed: an error, never a
# stale constant.

_UNRECORDED_WRITE = (
    "trace: a tensor's value was replaced below the dispatcher by a write no recorded op "
    "made (an in-place write through a view on an immutable backend); such a program "
    "cannot be replayed")


class _Recorder(DispatchMode):
    def __init__(self, graph: Graph, inputs):
        self.graph = graph
        self.names: dict[int, tuple] = {}  # id(tensor) -> (name, its array when named)
        self.by_array: dict[int, str] = {}  # id(tensor._data) -> name (Note [Tracing backward])
        self.keep = []  # keeps traced tensors and their arrays alive so ids stay unique
        self.paused = False
        for i, t in enumerate(inputs):
            name = f"x{i}"
            graph.inputs.append(name)
            self._name(t, name)

    def _name(self, t, name) -> None:
        data = getattr(t, "_data", None)
        self.names[id(t)] = (name, data)
        if isinstance(t, Tensor):
            self.by_array[id(data)] = name
            self.keep.append(data)
        self.keep.append(t)

    def _ref(self, v):
        if not isinstance(v, Tensor):
            return v
        hit = self.names.get(id(v))
        name = None
        if hit is not None:
            name, data = hit
            if data is not v._data:  # Note [Writes that swap arrays]
                name = self.by_array.get(id(v._data))
                if name is None:
                    raise RuntimeError(_UNRECORDED_WRITE)
        if name is None and id(v._data) in self.by_array:  # Note [Tracing backward]
            name = self.by_array[id(v._data)]
            if not v.requires_grad:  # a saved value, a detached gradient
                detached = f"t{len(self.graph.calls)}_0"
                self.graph.calls.append((_DETACH, (_Ref(name),), {}, [detached]))
                name = detached
            self._name(v, name)
        if name is None:
            name = f"c{len(self.graph.constants)}"
            self.graph.constants[name] = v
            self._name(v, name)
        return _Ref(name)

    def sink(self, pairs, held, create_graph) -> None:
        """The engine's gradient sink while tracing (Note [Tracing backward])."""
        args = (tuple(tree_map(self._ref, pairs)), tuple(map(self._ref, held)), create_graph)
        self.graph.calls.append((_ACCUMULATE, args, {}, []))
        self.paused = True  # what accumulating dispatches is part of that step
        try:
            accumulate_grads(pairs, held, create_graph)
        finally:
            self.paused = False

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        rargs = tree_map(self._ref, args)
        rkwargs = tree_map(self._ref, kwargs)
        out = func(*args, **kwargs)
        results = out if isinstance(out, (tuple, list)) else (out,)
        names = []
        for r in results:
            if isinstance(r, Tensor):
                if id(r) in self.names and func.schema.is_mutable:
                    names.append(None)
                    continue
                name = f"t{len(self.graph.calls)}_{len(names)}"
                self._name(r, name)
                names.append(name)
            else:
                names.append(None)
        self.graph.calls.append((func, rargs, rkwargs, names))
        return out


def trace(f, *example_args) -> Graph:
    """Record the ops ``f(*example_args)`` runs into a ``Graph`` (see the module doc)."""
    graph = Graph()
    rec = _Recorder(graph, example_args)
    token = grad_sink.set(rec.sink)
    try:
        with rec:
            out = f(*example_args)
    finally:
        grad_sink.reset(token)
    graph.outputs = tree_map(lambda v: rec._ref(v) if isinstance(v, Tensor) else v, out)
    return graph
