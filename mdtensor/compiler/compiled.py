"""``md.compile``: capture a function once per input signature, replay it afterwards.

Note [Compiled functions]
~~~~~~~~~~~~~~~~~~~~~~~~~
``md.compile(fn)`` returns a ``CompiledFunction``.  Each call computes the call's
*signature* -- the structure of the arguments; each tensor's type, shape, dtype, device,
``requires_grad`` and whether it has a ``.grad``; the value of every other argument; how
the arguments alias each other; and the context: the thread's dispatch key state (grad
mode, autocast, transforms), the active dispatch modes, inference mode and the default
device -- and looks it up in the function's cache:

1. a signature seen for the first time runs ``fn`` eagerly (a warm-up: state ``fn`` makes
   lazily, an optimizer's buffers, exists before the capture);
2. the second call with it runs ``fn`` under a ``Recorder`` (mdtensor/compiler/capture.py):
   an ordinary eager call whose ops are recorded, backward included.  A clean capture
   becomes a ``Program`` (Note [Replaying kernels] in mdtensor/compiler/program.py); a
   graph break (Note [Graph breaks] in mdtensor/compiler/capture.py) makes the signature
   run eagerly from then on, the reason kept (``explain()``), or raises with
   ``fullgraph=True``;
3. later calls replay the program, after checking the guards of the tensors the capture
   met outside the arguments (closure parameters: their shape, dtype, device,
   ``requires_grad`` and ``.grad`` presence); a failed guard captures again.  A program
   that read values on the host stops where the call's values differ (Note [Values read
   on the host] in mdtensor/compiler/capture.py): the next capture of the signature is
   tried, or, up to ``_VARIANTS`` of them, one is made; past that the signature runs
   eagerly.

The cache holds ``cache_size_limit`` signatures (8, as ``torch.compile``'s recompile
limit); past it, new signatures run eagerly with one warning.  A compiled function called
while another capture runs (a compiled function inside a compiled function, or inside
``md.func.trace``) runs eagerly, so the outer capture records its ops.
"""

from __future__ import annotations

import builtins
import functools
import sys
import warnings

from mdtensor._pytree import tree_flatten
from mdtensor.dispatch.operators import dispatcher
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.layers.autograd.grad_mode import is_grad_enabled
from mdtensor.modes import active_modes
from mdtensor.tensors.device import default_device
from mdtensor.tensors.tensor import Tensor, capture_hooks
from mdtensor.tensors.version_counter import new_counter

from .capture import Diverged, Graph, GraphBreak, Recorder
from .program import Program

__all__ = ["CompiledFunction", "compile"]

_BACKENDS = (None, "replay", "eager")


def _leaf_guard(v):
    if isinstance(v, Tensor):  # tensor_guard's, the device by id (its hash is Python's)
        ag, data = v._ag, v._data
        return (type(v), data.shape, data.dtype, id(v._device),
                ag is not None and ag.requires_grad, ag is None or ag.grad is None)
    try:
        hash(v)
    except TypeError:
        return (type(v), id(v))
    return (type(v), v)


def _aliases(leaves) -> tuple:
    """Which argument each tensor argument is the same object as (its first place)."""
    first: dict = {}
    return tuple(first.setdefault(id(v), i) for i, v in enumerate(leaves)
                 if isinstance(v, Tensor))


def _context() -> tuple:
    return (dispatch_tls.get(), tuple(map(id, active_modes())), new_counter(),
            id(default_device()))  # devices are canonical: one object per device


#: captures kept per signature that differ by the values they read on the host (Note
#: [Values read on the host] in mdtensor/compiler/capture.py): the two ways of an ``if``,
#: a few more
_VARIANTS = 4


class _Entry:
    """One signature's state: warmed up, captured (``variants``: ``(program, check)`` --
    ``check()`` tells whether the constants still match their guards) or eager
    (``reason``)."""

    __slots__ = ("reason", "variants")

    def __init__(self):
        self.variants: list = []
        self.reason: str | None = None

    @property
    def program(self) -> Program | None:
        return self.variants[0][0] if self.variants else None


def _no_guards() -> bool:
    return True


def _guard_function(guards):
    """A function telling whether each ``(tensor, tensor_guard(tensor))`` of ``guards``
    still holds, in one generated function (a replay checks it first: a ``tensor_guard``
    call per closure tensor cost 0.3 us).  An array already checked is not again (an
    array's shape and dtype do not change): on JAX, reading them costs a property each."""
    if not guards:
        return _no_guards
    ns: dict = {"seen": [None] * len(guards)}
    lines = ["def check():"]
    for i, (t, (typ, shape, dtype, device, requires_grad, no_grad)) in enumerate(guards):
        ns.update({f"t{i}": t, f"T{i}": typ, f"S{i}": shape, f"D{i}": dtype, f"V{i}": device})
        lines += [f"    if type(t{i}) is not T{i} or t{i}._device is not V{i}: return False",
                  f"    a = t{i}._data",
                  f"    if a is not seen[{i}]:",
                  f"        if a.shape != S{i} or a.dtype != D{i}: return False",
                  f"        seen[{i}] = a",
                  f"    ag = t{i}._ag"]
        lines.append("    if ag is None or not ag.requires_grad: return False" if requires_grad
                     else "    if ag is not None and ag.requires_grad: return False")
        lines.append("    if ag is not None and ag.grad is not None: return False" if no_grad
                     else "    if ag is None or ag.grad is None: return False")
    lines.append("    return True")
    exec(builtins.compile("\n".join(lines), "<mdtensor.compile guards>", "exec"), ns)
    return ns["check"]


class CompiledFunction:
    """A function compiled with ``md.compile`` (Note [Compiled functions]).

    Calling it runs the function (captured, replayed or eager); ``graph(*args)`` gives the
    capture for those arguments, ``explain()`` what each signature does and why.
    """

    def __init__(self, fn, *, backend=None, fullgraph: bool = False,
                 cache_size_limit: int = 8):
        self.fn = fn
        self.backend = backend
        self.fullgraph = fullgraph
        self.cache_size_limit = cache_size_limit
        self._cache: dict = {}
        self._warned = False
        functools.update_wrapper(self, fn, updated=())
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)

    def _key(self, args, kwargs):
        if not kwargs:
            for a in args:
                if isinstance(a, (list, tuple, dict)):
                    break
            else:  # flat positional arguments: no TreeSpec
                if not args:
                    return args, (0, _context())
                return args, (len(args), _context(), _aliases(args), *map(_leaf_guard, args))
        leaves, spec = tree_flatten((args, kwargs))
        return leaves, (spec, _context(), _aliases(leaves), *map(_leaf_guard, leaves))

    def __call__(self, *args, **kwargs):
        if self.backend == "eager" or capture_hooks.get() is not None:
            return self.fn(*args, **kwargs)
        leaves, key = self._key(args, kwargs)
        entry = self._cache.get(key)
        if entry is not None:
            if entry.variants:
                return self._replay(entry, leaves, args, kwargs)
            if entry.reason is None:
                return self._capture(entry, leaves, args, kwargs)
            self._note("eager", entry.reason)
            return self.fn(*args, **kwargs)
        if len(self._cache) >= self.cache_size_limit:
            if not self._warned:
                self._warned = True
                warnings.warn(
                    f"md.compile: {self.__name__} reached its cache size limit "
                    f"({self.cache_size_limit} signatures); new signatures run eagerly. "
                    f"explain() lists what each signature did", stacklevel=2)
            return self.fn(*args, **kwargs)
        self._cache[key] = _Entry()  # Note [Compiled functions], 1: the warm-up
        self._note("warm-up", "first call with this signature")
        return self.fn(*args, **kwargs)

    def _replay(self, entry: _Entry, leaves, args, kwargs):
        """Replay the first capture of ``entry`` whose values read on the host are the
        call's (Note [Values read on the host] in mdtensor/compiler/capture.py)."""
        for program, check in entry.variants:
            if not check():
                entry.variants = []
                return self._capture(entry, leaves, args, kwargs,
                                     "a tensor the function reads changed")
            if dispatcher.trace:
                print(f"[compile] replay {self.__name__}", file=sys.stderr)
            try:
                return program(leaves)
            except Diverged:
                continue
        if len(entry.variants) < _VARIANTS:
            return self._capture(entry, leaves, args, kwargs,
                                 "a value read on the host differs from the captures'")
        entry.variants = []
        entry.reason = (f"the values read on the host differ from those of its last "
                        f"{_VARIANTS} captures (item() of a changing value?)")
        self._note("eager", entry.reason)
        return self.fn(*args, **kwargs)

    def _note(self, what: str, why: str) -> None:
        if dispatcher.trace:
            print(f"[compile] {what} {self.__name__}: {why}", file=sys.stderr)

    def _capture(self, entry: _Entry, leaves, args, kwargs, why: str = "second call"):
        self._note("capture", why)
        graph = Graph()
        rec = Recorder(graph, leaves, strict=self.fullgraph,
                       guard_host_reads=not self.fullgraph)
        with rec:
            out = self.fn(*args, **kwargs)
        out_leaves, out_spec = tree_flatten(out)
        rec.finish(tuple(out_leaves))
        effects = _effects(rec)
        if rec.broken is not None:
            entry.variants, entry.reason = [], rec.broken
            self._note("eager", rec.broken)
            return out
        differentiable = (is_grad_enabled() and not rec.ran_backward
                          and any(isinstance(o, Tensor) and o.grad_fn is not None
                                  for o in out_leaves))
        program = Program(graph, effects, out_spec, differentiable=differentiable,
                          lower_to_jax=(self.backend is None and not differentiable
                                        and _on_jax(rec)),
                          arrays=(rec.meta, rec.examples))
        check = _guard_function([(t, guard) for t, _, _, guard in
                                 (rec.external[n] for n in graph.constants)])
        entry.variants.append((program, check))
        return out

    def graph(self, *args, **kwargs) -> Graph:
        """The capture for these arguments (calling the function as many times as it takes
        to capture it: its effects happen).

        Raises:
            GraphBreak: the function does not capture for these arguments (the reason).
        """
        for _ in range(3):
            leaves, key = self._key(args, kwargs)
            entry = self._cache.get(key)
            if entry is not None and entry.program is not None:
                return entry.program.graph
            if entry is not None and entry.reason is not None:
                raise GraphBreak(f"{self.__name__}: graph break: {entry.reason}")
            self(*args, **kwargs)
        raise GraphBreak(f"{self.__name__}: no capture for these arguments (the cache is "
                         f"full, or the backend is 'eager')")

    def explain(self) -> list[str]:
        """One line per signature in the cache: replayed (ops, steps), eager (why) or
        warmed up."""
        lines = []
        for entry in self._cache.values():
            if entry.program is not None:
                g = entry.program.graph
                kind = ("through the dispatcher (differentiable)"
                        if entry.program.differentiable else "kernels")
                regions = entry.program.regions
                if regions:
                    jitted = sum(r.jitted is True for r in regions)
                    kind += (f", {len(regions)} region(s) lowered to jax.jit "
                             f"({jitted} traced)")
                if len(entry.variants) > 1:
                    kind += (f", {len(entry.variants)} captures by the values read on the "
                             f"host")
                lines.append(f"replay of {len(g.calls)} recorded calls, {kind}")
            elif entry.reason is not None:
                lines.append(f"eager: {entry.reason}")
            else:
                lines.append("warmed up, captured on the next call")
        return lines

    def reset(self) -> None:
        """Forget every capture."""
        self._cache.clear()
        self._warned = False


def _on_jax(rec: Recorder) -> bool:
    """Whether every tensor the capture met outside it is on the JAX backend (Note
    [Lowering to jax.jit] in mdtensor/compiler/jax_lowering.py)."""
    devices = {t._device.type for t, _, _, _ in rec.external.values()}
    return devices == {"jax"}


def _effects(rec: Recorder):
    """``(versions, writes)`` of a capture (Note [Replaying kernels] in
    mdtensor/compiler/program.py), from the function's own tensors; a write the replay
    cannot redo is a graph break."""
    versions, writes, counted = [], [], set()
    for name, (t, v0, data0, _) in rec.external.items():
        if t._data is not data0:
            new = rec.name_of(t)
            views = t._vc.views if t._vc is not None else None
            if new is None or t._view is not None or any(r() is not None for r in views or ()):
                rec.graph_break("an in-place write to a view, or to a tensor with views, on "
                                "an immutable backend")
                break
            writes.append((name, new))
        vc = t._vc
        if vc is not None and id(vc) not in counted:
            counted.add(id(vc))
            if vc.value != v0:
                versions.append((name, vc.value - v0))
    return versions, writes


def compile(fn=None, *, backend=None, dynamic: bool = False, fullgraph: bool = False,
            cache_size_limit: int = 8):
    """Compile ``fn``: capture it once per input signature and replay the recorded
    kernels (docs/COMPILE.md).

    Args:
        fn: the function (or use ``@md.compile(...)`` as a decorator factory).
        backend: ``None`` / ``"replay"`` (replay the recorded kernels) or ``"eager"``
            (run ``fn`` as it is: for debugging).
        dynamic: must be False: every shape is captured on its own.
        fullgraph: raise ``md.func.GraphBreak`` at a graph break instead of running the
            signature eagerly.
        cache_size_limit: signatures captured per function before new ones run eagerly.

    Returns:
        a ``CompiledFunction``.

    Raises:
        ValueError: an unknown backend.
        NotImplementedError: ``dynamic=True``.
    """
    if backend not in _BACKENDS:
        raise ValueError(f"md.compile: backend must be one of None, 'replay', 'eager'; got "
                         f"{backend!r}")
    if dynamic:
        raise NotImplementedError(
            "md.compile: dynamic=True (shape-polymorphic captures) is not supported; each "
            "input shape is captured on its own (dynamic=False)")
    if fn is None:
        return functools.partial(compile, backend=backend, fullgraph=fullgraph,
                                 cache_size_limit=cache_size_limit)
    return CompiledFunction(fn, backend=backend, fullgraph=fullgraph,
                            cache_size_limit=cache_size_limit)
