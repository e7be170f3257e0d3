"""The replay of a captured program on its tensors' arrays.

Note [Replaying on arrays]
~~~~~~~~~~~~~~~~~~~~~~~~~
Replaying the recorded kernels (Note [Replaying kernels] in mdtensor/compiler/program.py)
still pays each kernel's checks and a Tensor around every value it makes.  Where the
program's values need no Tensor -- it ran its backward itself, and is not lowered to
``jax.jit`` -- the replay is one generated function over arrays:

- the function's tensors (``x0``, ``c0``, ...) are read once, as arrays, at the start;
- each recorded op is the call its kernel specialized for the capture's shapes, dtypes and
  arguments (Note [Array calls] in mdtensor/dispatch/kernel.py): ``np.dot(a, b)`` for a
  product, the ufunc itself for an elementwise op.  A kernel that does not specialize, or a
  call it does not promise to compute the same way, is called as it is on Tensors made
  around the arrays (``adapted``), its results unwrapped;
- ``detach`` of a saved value is the array itself; a 0-d result a NumPy function returned
  as a NumPy scalar becomes a 0-d array again, as ``Device.wrap`` makes it;
- an intermediate of ``_FREE_AT`` elements or more is deleted after its last use, so the
  allocator reuses its memory for the next one (what stays in cache in a large step);
- the steps that are no op take Tensors: a ``.grad`` written or accumulated from a value
  gets a Tensor made once per value (two uses see one Tensor, as in the eager call),
  ``.grad`` read gives its Tensor and its array; the results are wrapped at the end.

A kernel that raises on a replay (an index out of range: the data changed) raised NumPy's
message, not the op's: the replay then calls that op's kernel on Tensors around the same
arrays, which raises the op's own error (``explain_failure``).
"""

from __future__ import annotations

import keyword

from mdtensor.dispatch.kernel import array_call
from mdtensor.layers.autograd.graph import accumulate_grads
from mdtensor.tensors.tensor import Tensor

from .capture import ACCUMULATE, DETACH, GET_GRAD, HOST_READ, SET_GRAD, Call, Ref, Step

__all__ = ["ArraySource", "accumulate_one", "adapted", "explain_failure"]

#: intermediates at least this large are freed after their last use (Note [Replaying on
#: arrays]); smaller ones cost a ``del`` more than their memory is worth
_FREE_AT = 4096


def accumulate_one(t, g, device, create_graph: bool) -> None:
    """``accumulate_grads`` of one gradient ``g`` (an array) that cannot become ``t.grad``
    as it is: ``t`` has a ``.grad`` to add to, or ``g`` is held elsewhere (Note [Leaf
    gradients] in mdtensor/layers/autograd/graph.py)."""
    wrapped = device.wrap(g)
    accumulate_grads(((t, wrapped),), (wrapped,), create_graph)


def _ref_names(v) -> list:
    if isinstance(v, Ref):
        return [v.name]
    if isinstance(v, (list, tuple)):
        return [n for x in v for n in _ref_names(x)]
    if isinstance(v, dict):
        return [n for x in v.values() for n in _ref_names(x)]
    return []


def explain_failure(error: BaseException, code, specialized: dict, devices: dict):
    """The op's own error for ``error``, raised by a specialized call of the replay whose
    code is ``code`` (Note [Replaying on arrays]): that op's kernel called on Tensors
    around the same arrays.  Returns None where the failure was elsewhere or the kernel
    does not raise."""
    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code is not code:
        tb = tb.tb_next
    if tb is None or tb.tb_lineno not in specialized:
        return None
    entry, call, variables = specialized[tb.tb_lineno]
    local = tb.tb_frame.f_locals
    try:
        arrays = {n: local[v] for n, v in variables.items()}
    except KeyError:
        return None

    def value(v):
        if isinstance(v, Ref):
            return devices[v.name].wrap(arrays[v.name])
        if isinstance(v, (list, tuple)):
            return type(v)(map(value, v))
        return v

    try:
        entry(*value(call.args), **{k: value(v) for k, v in call.kwargs.items()})
    except Exception as own:  # noqa: BLE001 - the op's error, as an eager call raises it
        return own
    return None


def _unwrap(r):
    if isinstance(r, Tensor):
        return r._data
    if isinstance(r, (tuple, list)):
        return tuple(x._data if isinstance(x, Tensor) else x for x in r)
    return r


def adapted(entry, call: Call, devices: dict):
    """``entry`` (a table entry taking Tensors) called on arrays: the arrays of ``call``'s
    values are wrapped on their devices, the results unwrapped (Note [Replaying on
    arrays])."""
    slots = []  # (container path, device) of the Refs

    def template(v, path):
        if isinstance(v, Ref):
            slots.append((path, devices[v.name]))
        elif isinstance(v, (list, tuple)):
            for i, x in enumerate(v):
                template(x, (*path, i))

    for i, a in enumerate(call.args):
        template(a, ("a", i))
    for k, v in call.kwargs.items():
        template(v, ("k", k))
    if not any(len(p) > 2 for p, _ in slots) and not call.kwargs:
        wraps = [None] * len(call.args)
        for (_, i), d in slots:
            wraps[i] = d.wrap

        def run(*args):
            return _unwrap(entry(*[a if w is None else w(a) for w, a in zip(wraps, args)]))
        return run

    def rebuild(v, path, by_path):
        if path in by_path:
            return by_path[path](v)
        if isinstance(v, (list, tuple)):
            return type(v)(rebuild(x, (*path, i), by_path) for i, x in enumerate(v))
        return v

    by_path = {p: d.wrap for p, d in slots}

    def run_general(*args, **kwargs):
        args = [rebuild(a, ("a", i), by_path) for i, a in enumerate(args)]
        kwargs = {k: rebuild(v, ("k", k), by_path) for k, v in kwargs.items()}
        return _unwrap(entry(*args, **kwargs))
    return run_general


class ArraySource:
    """The source of a replay on arrays (Note [Replaying on arrays]).

    Args:
        src: the ``_Source`` (mdtensor/compiler/program.py) to write into.
        graph: the capture; ``calls``: its calls, compacted.
        meta: ``{name: (device, ndim, size)}`` of every value, from the capture.
        externals: the names of the function's tensors (inputs and constants).
        examples: ``{call index: (args, kwargs)}``: the capture's own arguments of each op
            call, compacted as ``calls`` are, for the kernels' specializations.
    """

    def __init__(self, src, graph, calls, meta, externals, examples):
        self.src, self.graph, self.calls = src, graph, calls
        self.meta, self.externals, self.examples = meta, set(externals), examples
        self.tensor_forms: dict[str, str] = {n: n for n in externals}
        #: line number -> (entry, call, {value name: variable}) of the specialized calls
        self.specialized: dict[int, tuple] = {}
        self.array_forms: dict[str, str] = {}
        self.lines = src.lines

    # -- names ------------------------------------------------------------------------------
    def array_of(self, name: str) -> str:
        form = self.array_forms.get(name)
        if form is None:  # an external tensor: read once, before its first use
            form = self.array_forms[name] = f"a_{name}"
            self.lines.append(f"    {form} = {self.tensor_forms[name]}._data")
        return form

    def tensor_of(self, name: str) -> str:
        form = self.tensor_forms.get(name)
        if form is None:
            form = self.tensor_forms[name] = f"T_{name}"
            wrap = self.src.const(self.meta[name][0].wrap, "w")
            self.lines.append(f"    {form} = {wrap}({self.array_forms[name]})")
        return form

    def render(self, v, tensors: bool = False) -> str:
        """``v`` (a recorded argument) as source: Refs as arrays, or as Tensors."""
        if isinstance(v, Ref):
            return self.tensor_of(v.name) if tensors else self.array_of(v.name)
        if type(v) is tuple:
            items = [self.render(x, tensors) for x in v]
            return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"
        if type(v) is list:
            return "[" + ", ".join(self.render(x, tensors) for x in v) + "]"
        return self.src.render(v)

    def call_expr(self, fn_name: str, args, kwargs, tensors: bool = False) -> str:
        parts = [self.render(a, tensors) for a in args]
        for k, v in kwargs.items():
            if k.isidentifier() and not keyword.iskeyword(k):
                parts.append(f"{k}={self.render(v, tensors)}")
            else:
                parts.append(f"**{{{k!r}: {self.render(v, tensors)}}}")
        return f"{fn_name}({', '.join(parts)})"

    # -- the calls --------------------------------------------------------------------------
    def specialize(self, i: int, call: Call, entry):
        """``(fn, args, kwargs)`` of call ``i`` on arrays (Refs in place of the capture's
        Tensors), or None."""
        args, kwargs = self.examples.get(i, (None, None))
        if args is None:
            return None
        try:
            spec = array_call(entry, args, kwargs)
        except Exception:  # noqa: BLE001 - a kernel that cannot say: called as it is
            return None
        if spec is None:
            return None
        refs = {}

        def collect(example, recorded):
            if isinstance(example, Tensor):
                refs[id(example)] = recorded
            elif isinstance(example, (list, tuple)) and isinstance(recorded, (list, tuple)):
                for e, r in zip(example, recorded):
                    collect(e, r)

        collect(args, call.args)
        collect(tuple(kwargs.values()), tuple(call.kwargs.get(k) for k in kwargs))

        def to_refs(v):
            if isinstance(v, Tensor):
                r = refs.get(id(v))
                if r is None:
                    raise LookupError
                return r
            if isinstance(v, (list, tuple)):
                return type(v)(map(to_refs, v))
            return v

        fn, args2, kwargs2 = spec
        try:
            return fn, tuple(map(to_refs, args2)), {k: to_refs(v) for k, v in kwargs2.items()}
        except LookupError:
            return None

    def emit_op(self, i: int, call: Call, fn_name: str, spec, entry) -> None:
        if spec is not None:
            fn, args, kwargs = spec
            self.src.ns[fn_name] = fn
            # what explain_failure needs of the call's line: the call and its variables
            variables = {n: self.array_of(n) for n in _ref_names((call.args, call.kwargs))}
            self.specialized[len(self.lines) + 1] = (entry, call, variables)
        else:
            args, kwargs = call.args, call.kwargs
        self.src.assign(call, self.call_expr(fn_name, args, kwargs))
        for o in call.outs:
            if o:
                self.array_forms[o] = o
                device, ndim, _ = self.meta[o]
                if ndim == 0:  # a NumPy scalar back to a 0-d array (Device.wrap's ensure)
                    ensure = self.src.const(device.backend.ensure_array, "n")
                    self.lines.append(f"    {o} = {ensure}({o})")

    def emit_step(self, call: Call, fn_name: str) -> None:
        op = call.op
        if op is DETACH:  # a saved value: the array itself
            (src,), (out,) = call.args, call.outs
            self.array_forms[out] = self.array_of(src.name)
            return
        if op is ACCUMULATE:
            self.emit_accumulate(call)
            return
        if op is HOST_READ:  # Note [Values read on the host] in mdtensor/compiler/capture.py
            t, value = call.args
            backend = self.src.const(self.meta[t.name][0].backend, "b")
            self.lines.append(f"    {self.src.const(value, 'h')}.check({self.array_of(t.name)}, "
                              f"{backend})")
            return
        if op is SET_GRAD and call.args[1] is None:  # the setter's ``None`` branch
            (t, _) = call.args
            self.lines.append(f"    ag = {self.tensor_of(t.name)}._ag")
            self.lines.append("    if ag is not None:")
            self.lines.append("        ag.grad = None")
            return
        expr = self.call_expr(fn_name, call.args, call.kwargs, tensors=True)
        if op is GET_GRAD:
            (out,) = call.outs
            self.lines.append(f"    T_{out} = {expr}")
            self.tensor_forms[out] = f"T_{out}"
            self.lines.append(f"    {out} = T_{out}._data")
            self.array_forms[out] = out
        else:
            assert op in (SET_GRAD, ACCUMULATE) or isinstance(op, Step)
            self.lines.append(f"    {expr}")

    def emit_accumulate(self, call: Call) -> None:
        """``accumulate_grads`` on arrays, inline (Note [Leaf gradients] in
        mdtensor/layers/autograd/graph.py): a first gradient nothing else holds -- not a
        root gradient, another leaf's, a result (a gradient that is also a result stays
        the result's own), nor a view -- becomes ``.grad`` around its array; any other
        takes ``accumulate_one``."""
        pairs, held, create_graph = call.args
        outputs = [o.name for o in self.graph.outputs
                   if isinstance(o, Ref) and o.name in self.array_forms]
        held_forms = [self.array_of(h.name) for h in held] + [
            self.array_forms[o] for o in outputs]
        self.lines.append(f"    taken = {{{', '.join(f'id({h})' for h in held_forms)}}}"
                          if held_forms else "    taken = set()")
        slow = self.src.const(accumulate_one, "s")
        for t, g in pairs:
            if g is None:
                continue
            device = self.meta[g.name][0]
            tensor, array = self.tensor_of(t.name), self.array_of(g.name)
            wrap, d = self.src.const(device.wrap, "w"), self.src.const(device, "d")
            owned = ""
            if device.backend.capabilities.inplace:  # else: nothing to protect
                owned = f" and {self.src.const(device.backend.owns_dense, 'o')}({array})"
            self.lines += [f"    ag = {tensor}._ag",
                           f"    if ag.grad is None and id({array}) not in taken{owned}:",
                           f"        taken.add(id({array}))",
                           f"        ag.grad = {wrap}({array})",
                           "    else:",
                           f"        {slow}({tensor}, {array}, {d}, {create_graph!r})"]

    def free(self, start: int, last_use: dict) -> None:
        """``del`` the large intermediates whose last use was call ``start``."""
        for name in last_use.get(start, ()):
            if name in self.array_forms and name not in self.externals:
                meta = self.meta.get(name)
                if meta is not None and meta[2] >= _FREE_AT:
                    form = self.array_forms[name]
                    if form == name:
                        self.lines.append(f"    del {name}")
