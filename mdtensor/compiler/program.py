"""A captured program, ready to replay: the recorded kernels called directly.

Note [Replaying kernels]
~~~~~~~~~~~~~~~~~~~~~~~~
A capture (mdtensor/compiler/capture.py) records each op below Autograd and Functionalize,
with the key set its backend kernels ran under.  A ``Program`` calls, for each recorded op,
the dispatch-table entry of that key set (``op.table``/``fill_entry``, the operator API) --
the backend kernel itself, or BackendSelect's for a factory -- from one generated Python
function: no overload resolution, no key-set computation, no autograd recording, no mode.
The steps that are no op (``accumulate_grads``, ``.grad`` reads and writes) are called as
recorded; ``detach`` of a saved value is the value itself (replayed tensors have no
history).  What the layers above the backend did to the function's own tensors is redone
at the end: version counters move by what the capture counted, and on an immutable backend
each mutated input takes the array its last write made (Note [Writes that swap arrays] in
mdtensor/compiler/capture.py).

Table entries go stale when a registration changes (a user kernel, the dispatch trace
turned on): every replay first checks that each op's table still holds the entry it
called, and takes the new ones if not.

A program whose outputs have autograd history and which ran no backward itself (the
caller will differentiate its result) replays through the dispatcher instead
(``differentiable``): every op is called as an ``OpOverload``, so autograd records the
replayed forward.
"""

from __future__ import annotations

import keyword

from mdtensor._pytree import tree_flatten, tree_unflatten
from mdtensor.dispatch.operators import dispatcher
from mdtensor.dispatch.schema import NO_DEFAULT, Symbol
from mdtensor.tensors.tensor import Tensor
from mdtensor.tensors.version_counter import counter

from .capture import DETACH, Call, Graph, Ref, Step

__all__ = ["Program"]


#: the entry of an op not looked up yet (no table holds it)
_UNSET = object()


def _identity(t):
    return t


def _is_default(v, default) -> bool:
    """Whether argument value ``v`` is the schema's ``default`` (as the Python key's
    ``normalize`` fills it in: None for a symbolic default)."""
    if default is NO_DEFAULT:
        return False
    if isinstance(default, Symbol):
        default = None
    if v is None or default is None:
        return v is default
    return type(v) is type(default) and type(v) in (bool, int, float, str) and v == default


def _compact(op, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The recorded call without the arguments that are the schema's defaults (Note
    [Compact calls])."""
    arguments = op.schema.arguments
    kwargs = {k: v for k, v in kwargs.items()
              if not any(a.name == k and _is_default(v, a.default) for a in arguments)}
    positional = [a for a in arguments if not a.kwarg_only]
    n = len(args)
    while n and n <= len(positional) and _is_default(args[n - 1], positional[n - 1].default):
        n -= 1
    return args[:n], kwargs


# Note [Compact calls]
# ~~~~~~~~~~~~~~~~~~~~
# A mode receives every call normalized, defaults filled in (Note [Python key] in
# mdtensor/layers/python_dispatch.py): ``add.Tensor(a, b, alpha=1)``, ``sum(t, None,
# False, dtype=None)``.  The backend kernels have fast paths for the arguments a user
# passes, positional and without defaults; a keyword argument sends them down the general
# path (NumPy's ``add`` kernel: 1.3 us for ``(a, b)``, 4.9 us with ``alpha=1``).  So the
# replay drops every argument equal to its default, as the call was most likely written.


class _Source:
    """Python source of the replay function, and the objects it names."""

    def __init__(self):
        self.lines: list[str] = []
        self.ns: dict = {}

    def const(self, v, prefix: str = "k") -> str:
        name = f"{prefix}{len(self.ns)}"
        self.ns[name] = v
        return name

    def render(self, v) -> str:
        if isinstance(v, Ref):
            return v.name
        if v is None or type(v) is bool or type(v) is int or type(v) is str:
            return repr(v)
        if type(v) is tuple:
            items = [self.render(x) for x in v]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if type(v) is list:
            return "[" + ", ".join(self.render(x) for x in v) + "]"
        if type(v) is dict:
            return "{" + ", ".join(f"{self.render(k)}: {self.render(x)}"
                                   for k, x in v.items()) + "}"
        if isinstance(v, tuple) and hasattr(v, "_fields"):  # a named tuple
            return f"{self.const(type(v))}({', '.join(self.render(x) for x in v)})"
        return self.const(v)

    def assign(self, call: Call, expr: str) -> None:
        """The line running ``expr`` and naming the results of ``call``."""
        kept = [o or "_" for o in call.outs]
        if call.multi and any(call.outs):
            self.lines.append(f"    {', '.join(kept)}, = {expr}")
        elif call.outs and call.outs[0]:
            self.lines.append(f"    {call.outs[0]} = {expr}")
        else:
            self.lines.append(f"    {expr}")

    def call(self, fn_name: str, call: Call) -> str:
        parts = [self.render(a) for a in call.args]
        for k, v in call.kwargs.items():
            if k.isidentifier() and not keyword.iskeyword(k):
                parts.append(f"{k}={self.render(v)}")
            else:
                parts.append(f"**{{{k!r}: {self.render(v)}}}")
        return f"{fn_name}({', '.join(parts)})"


def _names(v, into: set) -> set:
    """The names of the ``Ref``s in ``v`` (a pytree), added to ``into``."""
    if isinstance(v, Ref):
        into.add(v.name)
    elif isinstance(v, (list, tuple)):
        for x in v:
            _names(x, into)
    elif isinstance(v, dict):
        for x in v.values():
            _names(x, into)
    return into


#: the fewest op calls lowered to one ``jax.jit`` function: calling one costs ~10 us, more
#: than a couple of eager JAX kernels (an SGD update, ``p - lr * p.grad``, stays as it is)
_MIN_REGION = 4


def _regions(calls, graph: Graph, writes) -> dict:
    """``{start: (end, live_in, live_out)}``: the runs of ``_MIN_REGION`` op calls or more
    (``detach`` included) between steps that are no op, with the names each reads from before it
    and the names read after it (Note [Lowering to jax.jit] in
    mdtensor/compiler/jax_lowering.py)."""
    reads = [_names((c.args, c.kwargs), set()) for c in calls]
    final = _names(tuple(graph.outputs), set()) | {n for w in writes for n in w}
    runs, start = [], None
    for i, call in enumerate([*calls, None]):
        pure = call is not None and (not isinstance(call.op, Step) or call.op is DETACH)
        if pure and start is None:
            start = i
        elif not pure and start is not None:
            if i - start >= _MIN_REGION:
                runs.append((start, i))
            start = None
    regions = {}
    for start, end in runs:
        made = {o for c in calls[start:end] for o in c.outs if o}
        live_in = sorted(set().union(*reads[start:end]) - made)
        later = final.union(*reads[end:])
        live_out = [o for c in calls[start:end] for o in c.outs if o and o in later]
        if live_in:
            regions[start] = (end, live_in, live_out)
    return regions


class Program:
    """A ``Graph`` compiled for replay (Note [Replaying kernels]).

    Args:
        graph: the capture.
        effects: ``(versions, writes)``: ``[(name, delta)]`` version counters to move,
            ``[(name, value name)]`` arrays to write back into the function's tensors.
        out_spec: the structure of the function's result (its leaves are ``graph.outputs``,
            flat).
        differentiable: replay through the dispatcher (autograd records the replay).
    """

    def __init__(self, graph: Graph, effects, out_spec, *, differentiable: bool = False,
                 lower_to_jax: bool = False, arrays=None):
        self.graph = graph
        self.differentiable = differentiable
        self.out_spec = out_spec
        self._checks: list = []  # [op, masked key set, entry, global name, key set]
        self._fresh: list = [({}, -1, _UNSET)]  # filled by _refresh on the first call
        self.regions: list = []  # JitRegions (Note [Lowering to jax.jit])
        self._generation = -1  # dispatcher.generation when the entries were last checked
        self._leaf = out_spec.is_leaf()  # the result is one value, not a container
        self._effects = effects
        #: (meta, examples) of a replay on arrays (Note [Replaying on arrays]), else None
        self._arrays = None if differentiable else arrays
        self.on_arrays = self._arrays is not None
        self._lower = lower_to_jax and self.on_arrays
        calls = [call if isinstance(call.op, Step) or differentiable
                 else call._replace(**dict(zip(("args", "kwargs"),
                                               _compact(call.op, call.args, call.kwargs))))
                 for call in graph.calls]
        self._calls = calls
        if self.on_arrays:
            self._build_on_arrays(specialize=True)
            self._arrays = (arrays[0], {})  # the examples are no longer needed
        else:
            self._build()

    def _exec(self, src: _Source) -> None:
        self.source = "\n".join(src.lines)
        self._ns = src.ns
        exec(compile(self.source, f"<mdtensor.compile replay {id(self):x}>", "exec"), src.ns)
        self._replay = src.ns["replay"]

    def _effect_lines(self, src: _Source, array_of) -> None:
        versions, writes = self._effects
        for name, new in writes:
            src.lines.append(f"    {name}._data = {array_of(new)}")
        if versions and not self.differentiable:
            src.ns["_counter"] = counter
            for name, delta in versions:
                src.lines.append(f"    _counter({name}).value += {delta}")

    def _build(self) -> None:
        """The replay on Tensors (Note [Replaying kernels])."""
        graph, calls = self.graph, self._calls
        src = _Source()
        src.ns.update(graph.constants)
        src.lines.append(f"def replay({', '.join(graph.inputs)}):")
        i = 0
        while i < len(calls):
            call = calls[i]
            src.assign(call, src.call(self._callable(src, i, call), call))
            i += 1
        self._effect_lines(src, lambda name: f"{name}._data")
        src.lines.append(f"    return {src.render(tuple(graph.outputs))}")
        self._exec(src)

    def _build_on_arrays(self, specialize: bool) -> None:
        """The replay on arrays (Note [Replaying on arrays] in mdtensor/compiler/arrays.py);
        ``specialize``: take the kernels' specializations (else every op is ``adapted``)."""
        from .arrays import ArraySource, adapted

        graph, calls = self.graph, self._calls
        meta, examples = self._arrays
        src = _Source()
        src.ns.update(graph.constants)
        externals = [*graph.inputs, *graph.constants]
        if specialize:
            examples = {i: _compact(calls[i].op, *examples[i]) for i in examples}
        arr = ArraySource(src, graph, calls, meta, externals, examples if specialize else {})
        devices = {n: m[0] for n, m in meta.items()}
        root: dict = {}  # a detached value's array is its source's (Note [Replaying on arrays])
        last_use: dict = {}
        for i, call in enumerate(calls):
            if call.op is DETACH:
                root[call.outs[0]] = root.get(call.args[0].name, call.args[0].name)
            for n in _names((call.args, call.kwargs), set()):
                last_use[root.get(n, n)] = i
        for n in _names(tuple(graph.outputs), set()) | {n for w in self._effects[1] for n in w}:
            last_use[root.get(n, n)] = len(calls)
        freed: dict = {}
        for n, i in last_use.items():
            freed.setdefault(i, []).append(n)
        src.lines.append(f"def replay({', '.join(graph.inputs)}):")
        self._checks = []
        self.regions = []
        regions = _regions(calls, graph, self._effects[1]) if self._lower else {}
        region_end = 0
        for i, call in enumerate(calls):
            op = call.op
            if i in regions:
                region_end = self._region(src, arr, calls, i, *regions[i])
            if i < region_end:
                pass
            elif isinstance(op, Step):
                arr.emit_step(call, src.const(op.fn, "s"))
            else:
                name = f"e{i}"
                mk = call.ks & op.mask
                entry = op.table.get(mk) or op.fill_entry(mk)
                self._checks.append([op, mk, entry, name, call.ks])
                spec = arr.specialize(i, call, entry)
                if spec is None:
                    src.ns[name] = adapted(entry, call, devices)
                arr.emit_op(i, call, name, spec, entry)
            arr.free(i, freed)
        self._effect_lines(src, arr.array_of)
        out = arr.render(tuple(graph.outputs), tensors=True)
        src.lines.append(f"    return {out}")
        self._exec(src)
        self._specialized, self._devices = arr.specialized, devices
        self._fresh = list({(id(op.table), mk): (op.table, mk, entry)
                            for op, mk, entry, _, _ in self._checks}.values())

    def _region(self, src: _Source, arr, calls, start: int, end: int, live_in,
                live_out) -> int:
        """Emit calls ``start:end`` as one ``JitRegion`` on arrays; returns ``end``."""
        from .jax_lowering import JitRegion

        members = []
        for i in range(start, end):
            call = calls[i]
            op = call.op
            if isinstance(op, Step):  # a detach: the value itself
                members.append((_identity, call))
                continue
            mk = call.ks & op.mask
            entry = op.table.get(mk) or op.fill_entry(mk)
            self._checks.append([op, mk, entry, None, call.ks])
            members.append((entry, call))
        meta = self._arrays[0]
        region = JitRegion(members, live_in, live_out, [meta[n][0] for n in live_in])
        self.regions.append(region)
        fn = src.const(region, "r")
        target = ", ".join(live_out) + "," if live_out else "_"
        args = ", ".join(arr.array_of(n) for n in live_in)
        src.lines.append(f"    {target} = {fn}({args})")
        for o in live_out:
            arr.array_forms[o] = o
        return end

    def _callable(self, src: _Source, i: int, call: Call) -> str:
        op = call.op
        if isinstance(op, Step):
            if op is DETACH and not self.differentiable:
                return src.const(_identity, "s")
            return src.const(op.fn, "s")
        if self.differentiable:
            return src.const(op.caller, "op")
        name = f"e{i}"
        self._checks.append([op, -1, _UNSET, name, call.ks])  # filled by the first replay
        src.ns[name] = None
        return name

    def _refresh(self) -> None:
        """Point the replay at the current table entries (Note [Replaying kernels])."""
        if self.on_arrays:  # every op called as its entry now is (the capture's examples
            self._build_on_arrays(specialize=False)  # are gone)
            return
        ns = self._ns
        for check in self._checks:
            op, mk, entry, name, ks = check
            if op.table.get(mk) is entry:
                continue
            mk = ks & op.mask
            entry = op.table.get(mk) or op.fill_entry(mk)
            check[1], check[2] = ks & op.mask, entry
            ns[name] = entry
        # what __call__ checks: each (table, key set) once (tables are cleared in place)
        self._fresh = list({(id(op.table), mk): (op.table, mk, entry)
                            for op, mk, entry, _, _ in self._checks}.values())

    def __call__(self, leaves):
        if dispatcher.generation != self._generation:  # a table changed: ours too?
            for table, mk, entry in self._fresh:
                if table.get(mk) is not entry:
                    self._refresh()
                    break
            self._generation = dispatcher.generation
        try:
            out = self._replay(*leaves)
        except Exception as e:
            if self.on_arrays:  # the op's own error, not NumPy's (Note [Replaying on arrays])
                from .arrays import explain_failure

                own = explain_failure(e, self._replay.__code__, self._specialized,
                                      self._devices)
                if own is not None:
                    raise own from None
            raise
        return out[0] if self._leaf else tree_unflatten(out, self.out_spec)

    def __str__(self) -> str:
        return str(self.graph)


def out_leaves(out):
    """The leaves and structure of a function's result."""
    return tree_flatten(out)


def is_tensor(v) -> bool:
    return isinstance(v, Tensor)
