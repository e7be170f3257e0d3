"""Program capture: run a function once under a recording mode and keep the ops it ran.

``Recorder`` is a dispatch mode below Autograd and Functionalize (Note [Python key] in
mdtensor/layers/python_dispatch.py), so it sees what actually executes -- the backward's ops
included -- and writes a ``Graph``: named inputs, one ``Call`` per op (with the key set of
the backend kernels below the mode, for ``md.compile``'s replay), named outputs.
``md.func.trace`` returns that graph; ``md.compile`` turns it into a ``Program``
(mdtensor/compiler/program.py).

Note [Tracing backward]
~~~~~~~~~~~~~~~~~~~~~~~
A backward pass inside ``f`` runs its formulas on tensors the autograd layer rebuilt from
what the forward saved (Note [Saved outputs] in mdtensor/layers/autograd/graph.py), and
``autograd.grad`` returns detached gradients: new Tensor objects around the arrays of
recorded values.  The recorder therefore names a value by its array as well as by its
Tensor, so such a tensor refers to the recorded value and a replay computes the backward
from the replayed forward (not from trace-time constants).  The ``.grad`` writes, which are
no op, reach the recorder through the engine's gradient sink (Note [Gradient sinks]) and
become an ``accumulate_grads`` step of the graph; reading and assigning ``.grad`` become
``get_grad``/``set_grad`` steps (Note [Capture hooks] in mdtensor/tensors/tensor.py).

Note [Values read on the host]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A value read on the host (``if x.sum() > 0``, ``item()``, ``tolist()``) makes the Python
that follows depend on the data.  ``md.compile`` (without ``fullgraph``) records the read
as a ``host_value`` step holding the value read: a replay reads the same tensor and, where
it holds the same value, the Python would have done what it did at the capture, so the
replay goes on; where it differs the replay stops (``Diverged``) and the call runs another
capture of the function for this signature, or captures one (Note [Compiled functions] in
mdtensor/compiler/compiled.py).  So a replay must be able to stop there as if it had not
run: a read after a recorded call that changed state (an in-place op, a ``.grad`` write, a
backward) is a graph break, as is printing (the print would be lost).

Note [Graph breaks]
~~~~~~~~~~~~~~~~~~~
What a replay of recorded kernels cannot reproduce ends the capture: a tensor's value read
on the host (``item()``, ``bool(t)`` in an ``if``, printing: the Python that follows
depends on the data), an op whose output shape depends on the data, an op returning a
Python value, a tensor subclass with its own dispatch, another dispatch mode, a backward
with ``create_graph``, ``requires_grad_`` inside the function, and a value replaced below
the dispatcher (Note [Writes that swap arrays]), random numbers drawn on the host
(``md.randn``: drawn once, they would be replayed).  The recorder stops recording and the
function runs on, eagerly; ``broken`` says why.  ``md.func.trace`` and
``md.compile(fullgraph=True)`` raise ``GraphBreak`` instead, at the break.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mdtensor._dtypes import bool_
from mdtensor.dispatch.keys import AFTER_PYTHON
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.layers.autograd.graph import accumulate_grads, grad_sink
from mdtensor.modes import DispatchMode, active_modes, tree_map
from mdtensor.tensors.tensor import Tensor, capture_hooks

__all__ = ["Call", "Diverged", "Graph", "GraphBreak", "HostValue", "Recorder", "Ref", "Step",
           "tensor_guard", "trace"]


class GraphBreak(RuntimeError):
    """A function did something a capture cannot record (Note [Graph breaks])."""


class Diverged(Exception):
    """A replay read a value on the host that differs from the capture's (Note [Values
    read on the host])."""


class HostValue:
    """The value a capture read on the host from a tensor (Note [Values read on the
    host]): ``check(array, backend)`` raises ``Diverged`` where a replay's differs."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def check(self, array, backend) -> None:
        v, e = backend.to_numpy(array), self.value
        if v.shape != e.shape or v.dtype != e.dtype or not np.array_equal(
                v, e, equal_nan=e.dtype.kind in "fc"):
            raise Diverged

    def __repr__(self) -> str:
        return f"<read on the host: {np.array2string(self.value, threshold=6)}>"


def _check_host_value(t, expected: HostValue) -> None:
    expected.check(t._data, t._device.backend)


class Ref:
    """A named value of a graph (an input, an op's result, a constant)."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __repr__(self) -> str:
        return self.name


class Call(NamedTuple):
    """One recorded call: ``op(*args, **kwargs)`` (``Ref`` for values) naming its results
    ``outs`` (None for a result not kept); ``ks``: the key set of the backend kernels below
    the recorder (without the op's mask); ``multi``: the op returned a tuple or list."""

    op: Any
    args: tuple
    kwargs: dict
    outs: list
    ks: int = 0
    multi: bool = False


class Graph:
    """A recorded program: inputs, op calls, outputs."""

    def __init__(self):
        self.inputs: list[str] = []
        self.calls: list[Call] = []
        self.constants: dict[str, Tensor] = {}
        self.outputs = None

    def __str__(self) -> str:
        lines = [f"def traced({', '.join(self.inputs)}):"]
        for call in self.calls:
            parts = ([repr(a) for a in call.args]
                     + [f"{k}={v!r}" for k, v in call.kwargs.items()])
            target = ", ".join(o or "_" for o in call.outs) if call.outs else "_"
            op = call.op
            name = (f"md.ops.{op.schema.namespace}.{op.schema.name}.{op.overload_name}"
                    if hasattr(op, "schema") else op.path)
            lines.append(f"    {target} = {name}({', '.join(parts)})")
        lines.append(f"    return {self.outputs!r}")
        return "\n".join(lines)

    __repr__ = __str__

    def __call__(self, *inputs):
        """Replay through the dispatcher (every op dispatched again, autograd included)."""
        if len(inputs) != len(self.inputs):
            raise TypeError(f"traced graph takes {len(self.inputs)} inputs, got {len(inputs)}")
        env = dict(zip(self.inputs, inputs))
        env.update(self.constants)

        def value(v):
            return tree_map(lambda x: env[x.name] if isinstance(x, Ref) else x, v)

        for call in self.calls:
            out = call.op(*value(call.args), **value(call.kwargs))
            results = out if call.multi else (out,)
            for name, r in zip(call.outs, results):
                if name:
                    env[name] = r
        return value(self.outputs)


class Step:
    """A recorded step that is no op (Note [Tracing backward]): ``name`` as an op's,
    ``path`` for printing."""

    __slots__ = ("fn", "name", "path")

    def __init__(self, fn, name, path):
        self.fn, self.name, self.path = fn, name, path

    def __call__(self, *args, **kwargs):
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<step {self.name}>"


def _get_grad(t):
    return t.grad


def _set_grad(t, g) -> None:
    t.grad = g


ACCUMULATE = Step(accumulate_grads, "autograd::accumulate_grads",
                  "mdtensor.layers.autograd.graph.accumulate_grads")
DETACH = Step(Tensor.detach, "autograd::detach", "md.Tensor.detach")
GET_GRAD = Step(_get_grad, "autograd::get_grad", "md.Tensor.grad.fget")
SET_GRAD = Step(_set_grad, "autograd::set_grad", "md.Tensor.grad.fset")
HOST_READ = Step(_check_host_value, "compile::host_value", "mdtensor.compiler.host_value")


# Note [Writes that swap arrays]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# On an immutable backend (JAX) an in-place op runs its functional form -- the op the
# recorder sees, below Functionalize -- and the mutated tensor takes the result's array
# (Note [Functionalize] in mdtensor/layers/functionalize.py).  A tensor is therefore named
# together with the array it held: a tensor whose array changed since is the value of the
# op that made its new array (a backward's ``zeros`` + ``index_put_`` reads the replayed
# ``index_put``, not the trace-time zeros).  An array no recorded op made (a view of a
# mutated base regenerated below the dispatcher) cannot be replayed: a graph break, never a
# stale constant.


def tensor_guard(t: Tensor) -> tuple:
    """What a capture assumes of a tensor it did not make: its type, shape, dtype, device,
    ``requires_grad`` and whether it has a ``.grad`` (Note [Compiled functions] in
    mdtensor/compiler/compiled.py)."""
    ag = t._ag
    return (type(t), t._data.shape, t._data.dtype, t._device,
            ag is not None and ag.requires_grad, ag is None or ag.grad is None)


def _tensor_keys(args, kwargs) -> int:
    ks = 0
    for v in (*args, *kwargs.values()):
        if isinstance(v, Tensor):
            ks |= v._ks
        elif isinstance(v, (list, tuple)):
            for t in v:
                if isinstance(t, Tensor):
                    ks |= t._ks
    return ks


def _data_dependent(func, args) -> bool:
    """Whether a call of an op tagged ``dynamic_output_shape`` has a shape read from the
    data: always, except ``index`` without a boolean mask (integer and slice keys give
    shapes from the key's shapes, as its meta function says)."""
    if func.name != "aten::index" or len(args) < 2:
        return True
    key = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(k, Tensor) and k.dtype is bool_
               or isinstance(k, np.ndarray) and k.dtype == np.bool_ for k in key)


class Recorder(DispatchMode):
    """Records the ops that run into ``graph`` (see the module doc).

    Args:
        graph: the ``Graph`` to fill; its inputs are named ``x0``, ``x1``, ...
        inputs: the values standing for the graph's inputs.
        strict: raise ``GraphBreak`` at a break (else stop recording, Note [Graph breaks]).
    """

    def __init__(self, graph: Graph, inputs, *, strict: bool = True,
                 guard_host_reads: bool = False):
        self.graph = graph
        self.strict = strict
        self.guard_host_reads = guard_host_reads
        self.effects = False  # a recorded call changed state (Note [Values read on the host])
        self.broken: str | None = None
        self.ran_backward = False
        self.names: dict[int, tuple] = {}  # id(tensor) -> (name, its array when named)
        #: name -> (device, ndim, size) of each value named (Note [Replaying on arrays] in
        #: mdtensor/compiler/arrays.py)
        self.meta: dict[str, tuple] = {}
        #: call index -> the (args, kwargs) of that op call, as the recorder got them
        self.examples: dict[int, tuple] = {}
        self.by_array: dict[int, str] = {}  # id(tensor._data) -> name (Note [Tracing backward])
        #: name -> (tensor, version, array, guard) when an input or constant was named
        self.external: dict[str, tuple] = {}
        self.keep = []  # keeps traced tensors and their arrays alive so ids stay unique
        self.paused = False
        self.outer_modes = active_modes()
        for i, t in enumerate(inputs):
            name = f"x{i}"
            graph.inputs.append(name)
            self._name(t, name)
            if isinstance(t, Tensor):
                self.external[name] = (t, t._version, t._data, tensor_guard(t))

    def _name(self, t, name) -> None:
        data = getattr(t, "_data", None)
        self.names[id(t)] = (name, data)
        if isinstance(t, Tensor):
            self.by_array[id(data)] = name
            self.keep.append(data)
            shape = data.shape
            size = 1
            for n in shape:
                size *= n if type(n) is int else 0
            self.meta[name] = (t._device, len(shape), size)
        self.keep.append(t)

    def name_of(self, v) -> str | None:
        """The name ``v`` has in the graph now, or None."""
        hit = self.names.get(id(v))
        if hit is not None and hit[1] is v._data:
            return hit[0]
        return self.by_array.get(id(v._data))

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
                    self.graph_break("a tensor's value was replaced below the dispatcher "
                                     "(an in-place write through a view on an immutable "
                                     "backend)")
        if name is None and id(v._data) in self.by_array:  # Note [Tracing backward]
            name = self.by_array[id(v._data)]
            if not v.requires_grad:  # a saved value, a detached gradient
                detached = f"t{len(self.graph.calls)}_0"
                self.graph.calls.append(Call(DETACH, (Ref(name),), {}, [detached]))
                name = detached
            self._name(v, name)
        if name is None:
            name = f"c{len(self.graph.constants)}"
            self.graph.constants[name] = v
            self._name(v, name)
            self.external[name] = (v, v._version, v._data, tensor_guard(v))
        return Ref(name)

    # -- graph breaks (Note [Graph breaks]) ---------------------------------------------
    def graph_break(self, reason: str) -> None:
        if self.broken is not None:
            return
        self.broken = reason
        if self.strict:
            raise GraphBreak(f"graph break: {reason}")

    @property
    def recording(self) -> bool:
        return self.broken is None and not self.paused

    # -- the capture hooks (Note [Capture hooks] in mdtensor/tensors/tensor.py) ----------
    def host_read(self, t, what: str) -> None:
        if not self.recording:
            return
        if self.guard_host_reads and not self.effects and what != "printing a tensor":
            ref = self._ref(t)  # Note [Values read on the host]
            value = HostValue(t._device.backend.to_numpy(t._data).copy())
            self.graph.calls.append(Call(HOST_READ, (ref, value), {}, []))
            return
        self.graph_break(f"{what} reads a tensor's value on the host (the Python that "
                         f"follows depends on the data)")

    def random_draw(self, what: str) -> None:
        if self.recording:
            self.graph_break(f"random numbers drawn on the host ({what}): a replay would "
                             f"reuse the capture's numbers")

    def set_requires_grad(self, t) -> None:
        if self.recording:
            self.graph_break("requires_grad_() changes what autograd records")

    def backward(self, create_graph: bool) -> None:
        if not self.recording:
            return
        self.effects = True
        if create_graph:
            self.graph_break("a backward with create_graph=True (its gradients have history)")
        self.ran_backward = True

    def get_grad(self, t, g) -> None:
        if not self.recording or g is None:
            return
        name = f"t{len(self.graph.calls)}_0"
        self.graph.calls.append(Call(GET_GRAD, (self._ref(t),), {}, [name]))
        self._name(g, name)

    def set_grad(self, t, g) -> None:
        if self.recording:
            self.effects = True
            self.graph.calls.append(Call(SET_GRAD, (self._ref(t), self._ref(g)), {}, []))

    def sink(self, pairs, held, create_graph) -> None:
        """The engine's gradient sink while tracing (Note [Tracing backward])."""
        if self.recording:
            self.effects = True
            args = (tuple(tree_map(self._ref, pairs)), tuple(map(self._ref, held)),
                    create_graph)
            self.graph.calls.append(Call(ACCUMULATE, args, {}, []))
        paused, self.paused = self.paused, True  # what accumulating dispatches is that step
        try:
            accumulate_grads(pairs, held, create_graph)
        finally:
            self.paused = paused

    # -- the mode -------------------------------------------------------------------------
    def _check_call(self, func, types, args) -> None:
        if types:
            self.graph_break(f"{func.name} has a tensor subclass argument with its own "
                             f"dispatch ({', '.join(t.__name__ for t in types)})")
        elif self.outer_modes:
            self.graph_break(f"a dispatch mode is active "
                             f"({', '.join(type(m).__name__ for m in self.outer_modes)})")
        elif "dynamic_output_shape" in func.tags and _data_dependent(func, args):
            self.graph_break(f"{func.name}: its output shape depends on the data")

    def __md_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.recording:
            self._check_call(func, types, args)
        if not self.recording:
            return func(*args, **kwargs)
        rargs = tree_map(self._ref, args)
        rkwargs = tree_map(self._ref, kwargs)
        if func.schema.is_mutable:
            self.effects = True
        inc, keep = dispatch_tls.get()
        ks = (_tensor_keys(args, kwargs) | inc) & keep & AFTER_PYTHON
        out = func(*args, **kwargs)
        multi = isinstance(out, (tuple, list))
        results = out if multi else (out,)
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
                if r is not None:
                    self.graph_break(f"{func.name} returns a Python value "
                                     f"({type(r).__name__})")
                names.append(None)
        self.examples[len(self.graph.calls)] = (args, kwargs)
        self.graph.calls.append(Call(func, rargs, rkwargs, names, ks, multi))
        return out

    def __enter__(self):
        self._tokens = (grad_sink.set(self.sink), capture_hooks.set(self))
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            super().__exit__(*exc)
        finally:
            sink_token, hooks_token = self._tokens
            capture_hooks.reset(hooks_token)
            grad_sink.reset(sink_token)

    def finish(self, out) -> None:
        """Name the function's result ``out`` as the graph's outputs."""
        if self.broken is None:
            self.graph.outputs = tree_map(
                lambda v: self._out_ref(v) if isinstance(v, Tensor) else v, out)

    def _out_ref(self, v: Tensor) -> Ref:
        """A result's name: a tensor of the function's own is itself, even where its array
        was swapped by an in-place write (Note [Writes that swap arrays])."""
        hit = self.names.get(id(v))
        if hit is not None and hit[0] in self.external and self.external[hit[0]][0] is v:
            return Ref(hit[0])
        return self._ref(v)


def trace(f, *example_args) -> Graph:
    """Record the ops ``f(*example_args)`` runs into a ``Graph`` (the module doc); raises
    ``GraphBreak`` where ``f`` does what a replay cannot (Note [Graph breaks])."""
    graph = Graph()
    rec = Recorder(graph, example_args, strict=True)
    with rec:
        out = f(*example_args)
    rec.finish(out)
    return graph
