"""``md.func``: program transforms built on the dispatcher (tracing, functionalization).

``functionalize(f, remove=...)`` runs ``f`` with every mutation replaced by functional ops
(mdtensor._functionalize, Note [Functionalize]); ``trace(functionalize(f), x)`` records the
functional program.

``trace(f, *example_args)`` runs ``f`` under a recording mode and returns a ``Graph`` of the
``OpOverload`` calls that executed -- after autograd, so a ``backward()`` inside ``f`` is
recorded too (forward and backward in one graph).  The graph prints as readable Python and
replays on new inputs of the same shapes without overload resolution or mode overhead.
"""

from __future__ import annotations

from ._functionalize import FunctionalTensor, functionalize
from ._tensor import Tensor
from .modes import DispatchMode, tree_map

__all__ = ["FunctionalTensor", "Graph", "functionalize", "trace"]


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
            lines.append(f"    {target} = md.ops.{op.schema.namespace}.{op.schema.name}."
                         f"{op.overload_name}({', '.join(parts)})")
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


class _Recorder(DispatchMode):
    def __init__(self, graph: Graph, inputs):
        self.graph = graph
        self.names: dict[int, str] = {}
        self.keep = []  # keeps traced tensors alive so ids stay unique
        for i, t in enumerate(inputs):
            name = f"x{i}"
            graph.inputs.append(name)
            self.names[id(t)] = name
            self.keep.append(t)

    def _ref(self, v):
        if not isinstance(v, Tensor):
            return v
        name = self.names.get(id(v))
        if name is None:
            name = f"c{len(self.graph.constants)}"
            self.graph.constants[name] = v
            self.names[id(v)] = name
            self.keep.append(v)
        return _Ref(name)

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
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
                self.names[id(r)] = name
                self.keep.append(r)
                names.append(name)
            else:
                names.append(None)
        self.graph.calls.append((func, rargs, rkwargs, names))
        return out


def trace(f, *example_args) -> Graph:
    """Record the ops ``f(*example_args)`` runs into a ``Graph`` (see the module doc)."""
    graph = Graph()
    rec = _Recorder(graph, example_args)
    with rec:
        out = f(*example_args)
    graph.outputs = tree_map(lambda v: rec._ref(v) if isinstance(v, Tensor) else v, out)
    return graph
