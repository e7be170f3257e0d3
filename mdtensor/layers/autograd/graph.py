"""The autograd graph and the reverse-mode engine.

A ``Node`` is created by the Autograd kernel of an op whose inputs require grad.  It holds
the op's derivative formula, what the formula needs (the inputs, and the output when the
formula uses it, each with its version at save time), and one *edge* per Tensor input: the
``(node, output_nr)`` that receives that input's gradient (a leaf's ``AccumulateGrad``).

Note [Engine]
~~~~~~~~~~~~~
Every node gets a sequence number when it is made, newer nodes smaller ones (``seq``), and
an edge always leads to an older node (an op's inputs exist before its node).
``run_backward`` keeps the nodes that received a gradient in a heap and always runs the
newest: every node that can still send it a gradient is newer, reachable only through a
node in the heap that is newer still, so it has run -- a node runs once, with all its
gradients summed per output, and no dependency count is needed (PyTorch's engine orders
its ready queue by the same sequence numbers, and counts dependencies besides).  A node
that receives no gradient does not run.  Leaf
gradients are collected and only written to ``.grad`` after the whole pass succeeded, so a
failed backward leaves every ``.grad`` as it was.  Without ``retain_graph`` each node drops
its saved tensors as soon as it ran (so a backward that fails half-way has freed the nodes
it ran, as in PyTorch); running one again raises PyTorch's error.  Without
``create_graph`` formulas run with autograd excluded (they record nothing).
"""

from __future__ import annotations

import weakref
from contextvars import ContextVar
from heapq import heappop, heappush
from itertools import count, repeat
from operator import is_not

from mdtensor.dispatch.kernel import own_code
from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.tensors.autograd_meta import AutogradMeta
from mdtensor.tensors.tensor import capture_hooks
from mdtensor.tensors.version_counter import counter

from .grad_mode import enable_grad

__all__ = ["AccumulateGrad", "MaskedNode", "Node", "ViewNode", "accumulate_grads",
           "grad_fn_of", "grad_sink", "gradient_edge", "hooks_of", "move_retained",
           "run_backward"]

_FREED = ("Trying to backward through the graph a second time (or directly access saved "
          "tensors after they have already been freed). Saved intermediate values of the "
          "graph are freed when you call .backward() or autograd.grad(). Specify "
          "retain_graph=True if you need to backward through the graph a second time or if "
          "you need to access saved tensors after calling backward.")


_NONE = repeat(None)  # endless: map(is_not, edges, _NONE) stops with the edges
#: the next node's sequence number: -1, -2, ... (newer nodes first in a min-heap)
next_seq = count(-1, -1).__next__


class Node:
    """One recorded op: its derivative formula, saved values and input edges."""

    __slots__ = ("_name", "formula", "args", "kwargs", "out", "saved", "next_functions",
                 "n_outputs", "seq", "__weakref__")

    #: The formula takes first ``needs``, which edges are live (MaskedNode).
    masked = False
    #: The op returns a list of outputs, perhaps of one (ListNode, Note [Saved outputs]).
    listed = False

    # No ``__init__`` (Note [Class calls] in mdtensor/tensors/tensor.py): the autograd kernels
    # fill the slots of ``node_class()`` themselves; elsewhere ``new``, and subclasses
    # with an ``__init__`` of their own call ``_fill``.

    @classmethod
    def new(cls, name, formula, args, kwargs, out, saved, edges, n_outputs):
        node = cls()
        node._fill(name, formula, args, kwargs, out, saved, edges, n_outputs)
        return node

    def _fill(self, name, formula, args, kwargs, out, saved, edges, n_outputs):
        self._name = name
        self.formula = formula
        self.args = args
        self.kwargs = kwargs
        self.out = out
        self.saved = saved
        self.next_functions = edges
        self.n_outputs = n_outputs
        self.seq = next_seq()

    def name(self) -> str:
        """PyTorch-style name: ``AddBackward0`` for ``aten::add``."""
        return self._name

    def __repr__(self) -> str:
        return f"<{self._name}>"

    # ``apply(grads, release=False)``: the input gradients (a list aligned with
    # ``next_functions``) from the output gradients; with ``release``, the saved values are
    # dropped once the formula has run (the engine's ``retain_graph=False``).  Made by
    # ``_make_apply`` below, which also makes each op's own.

    def release(self) -> None:
        self.args = self.kwargs = self.out = None
        self.saved = ()

    def register_hook(self, fn) -> None:
        """``fn(grad_inputs, grad_outputs)`` after the node ran (PyTorch's Node hooks)."""
        raise NotImplementedError("Node.register_hook: use Tensor.register_hook")


def _make_apply(formula=None, masked: bool = False):
    """A Node class's ``apply``.  Without ``formula``, ``Node.apply``: the node's own
    formula, any number of outputs.  With it, the ``apply`` of an op's own Node class
    (``single_output_apply``): one output, and the formula a closure variable called with
    its arguments spread when they are one or two and no keywords -- specialized for that
    formula, where ``self.formula(g, out, *args, **self.kwargs)`` looks up a static method
    and makes a star call on every node."""
    generic = formula is None

    def apply(self, grads, release=False):
        args = self.args
        if args is None:
            raise RuntimeError(_FREED)
        for t, version in self.saved:
            vc = t._vc  # t._version, inlined
            if (0 if vc is None else vc.value) != version:
                raise RuntimeError(_modified_message(t, self, version))
        out = self.out
        if generic and (self.n_outputs != 1 or self.listed):
            g = tuple(grads)
            if out is not None:
                out = _restore_outputs(out, self)
        else:
            g = grads[0]
            if out is not None:  # the saved output (Note [Saved outputs])
                data, device, vc, version = out
                out = device.wrap(data)
                out._vc = vc
                if vc.value != version:
                    raise RuntimeError(_modified_message(out, self, version))
                if dispatch_tls.get()[1] & AUTOGRAD_FUNCTIONALITY:
                    out._ag = AutogradMeta.make(True, self, 0)
                    out._ks |= AUTOGRAD_FUNCTIONALITY
        kwargs = self.kwargs
        if generic:
            if self.masked:
                # an entry per edge and one False more (derivatives.uses_mask)
                needs = (*map(is_not, self.next_functions, _NONE), False)
                in_grads = self.formula(needs, g, out, *args, **kwargs)
            else:
                in_grads = self.formula(g, out, *args, **kwargs)
        elif masked:
            needs = (*map(is_not, self.next_functions, _NONE), False)
            if kwargs or len(args) != 2:
                in_grads = formula(needs, g, out, *args, **kwargs)
            else:
                in_grads = formula(needs, g, out, args[0], args[1])
        elif kwargs or len(args) > 2:
            in_grads = formula(g, out, *args, **kwargs)
        elif len(args) == 1:
            in_grads = formula(g, out, args[0])
        else:
            in_grads = formula(g, out, args[0], args[1])
        if release:
            self.args = self.kwargs = self.out = None
            self.saved = ()
        return in_grads

    apply.__doc__ = (
        "Input gradients (a list aligned with ``next_functions``) from the output gradients; "
        "with ``release``, the saved values are dropped once the formula has run.")
    return apply


Node.apply = _make_apply()


def single_output_apply(formula, masked: bool):
    """The ``apply`` of an op's own Node class (Note [Node classes] in kernels.py), with a
    code object of its own (Note [Own code objects] in mdtensor/dispatch/kernel.py)."""
    return own_code(_make_apply(formula, masked))


class MaskedNode(Node):
    """A Node whose formula takes first ``needs`` (``derivatives.uses_mask``): which of
    its Tensor inputs need a gradient, read from its edges when it runs rather than
    computed (and bound with ``functools.partial``) on every recorded op."""

    __slots__ = ()
    masked = True


class ListNode(Node):
    """A Node of an op that returns a list of Tensors (``unbind``, ``split``): its formula
    takes a tuple of gradients and of outputs even when the list has one entry."""

    __slots__ = ()
    listed = True


# Note [Saved outputs]
# ~~~~~~~~~~~~~~~~~~~~
# A node keeps its saved output outside autograd: the output itself would make a reference
# cycle output -> node -> output.  A single output is saved as the record ``(data, device,
# version counter, version)`` (``save_output``) -- its raw array, not a tensor: most graphs
# are never differentiated, and making the tensor only when the formula runs saves a tensor
# and its attributes on every recorded op (0.1-0.2 us).  Several outputs are saved as a
# tuple (a tuple of one too: ListNode) of such records for the floating ones, the others as
# they are with their versions in ``saved`` (Note [Saving several outputs] in kernels.py).
# When the formula runs with autograd on (``create_graph=True``), the output it gets is a
# fresh tensor whose history is this node -- as PyTorch's SavedVariable restores an
# output's grad_fn on unpacking -- so a second derivative flows through the output as well
# (tanh's gradient reads tanh's output).


def save_output(out):
    """The record a node keeps of its single output ``out`` (Note [Saved outputs])."""
    vc = out._vc
    if vc is None:
        vc = out._vc = counter(out)
    return (out._data, out._device, vc, vc.value)


def _restore_outputs(out: tuple, node) -> tuple:
    """The outputs a node of several saved (Note [Saved outputs]): each floating one's
    record made a tensor again and checked against its version, with ``node`` as its
    history when autograd is on (``create_graph``); the others as they were saved."""
    history = dispatch_tls.get()[1] & AUTOGRAD_FUNCTIONALITY
    restored = []
    k = 0
    for o in out:
        if type(o) is tuple:  # (data, device, version counter, version)
            data, device, vc, version = o
            o = device.wrap(data)
            o._vc = vc
            if vc.value != version:
                raise RuntimeError(_modified_message(o, node, version))
            if history:
                o._ag = AutogradMeta.make(True, node, k)
                o._ks |= AUTOGRAD_FUNCTIONALITY
        restored.append(o)
        k += 1
    return tuple(restored)


def _modified_message(t, node, expected) -> str:
    shape = "[" + ", ".join(str(s) for s in t.shape) + "]"
    return (f"one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [md.{t.dtype.name} {shape}], which is used by "
            f"{node.name()}, is at version {t._version}; expected version {expected} "
            f"instead. Hint: the backtrace further above shows the operation that failed to "
            f"compute its gradient. The variable in question was changed in there or "
            f"anywhere later. Good luck!")


# Note [Leaf references]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A leaf keeps its AccumulateGrad node (in ``AutogradMeta.leaf_edge``, the edge
# ``(node, 0)`` itself: the hot path reads it on every op with the leaf as input, so it is
# a plain reference, and recording builds no edge tuple) and the graph's edges keep
# the node.  Were the node to hold the leaf too, every leaf used by an op would sit in a
# reference cycle and its array would outlive ``del x`` until the cycle collector ran.
# PyTorch breaks the cycle on the other side (the tensor's grad accumulator is a weak
# pointer, remade when it expired); here the node refers to its leaf weakly, which costs
# only the engine a weak-reference call per leaf gradient.  A gradient that reaches the node
# of a leaf that is gone is dropped: nothing can read that ``.grad``.  The one observable
# difference would be a hook registered on the leaf, which PyTorch runs even when the leaf
# is otherwise unreachable: so while a leaf has hooks, its node holds it (``_hold``), as
# PyTorch's does.


class AccumulateGrad:
    """The node of a leaf: its gradient goes to ``leaf.grad``.  It refers to the leaf
    weakly, and holds it only while the leaf has hooks (Note [Leaf references])."""

    __slots__ = ("_ref", "_hold", "seq", "__weakref__")
    next_functions = ()
    n_outputs = 1

    def __init__(self, variable):
        self._ref = weakref.ref(variable)
        self._hold = variable if variable._ag.hooks else None
        self.seq = next_seq()

    @property
    def variable(self):
        """The leaf (None once it is gone: Note [Leaf references])."""
        return self._ref()

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return "<AccumulateGrad>"


class ViewNode(Node):
    """The history of a view remade from its base's (PyTorch's AsStridedBackward0): the
    gradient of ``replay`` (the view ops from the base to the view) at the base's shape,
    computed by differentiating the replay itself, so every view op's own formula applies
    (an ``expand`` sums, a slice scatters)."""

    __slots__ = ("replay", "shape")

    def __init__(self, base_edge, replay, shape):
        self._fill("AsStridedBackward0", None, (), {}, None, (), [base_edge], 1)
        self.replay = replay
        self.shape = shape

    def apply(self, grads, release=False):
        g = grads[0]
        create_graph = bool(dispatch_tls.get()[1] & AUTOGRAD_FUNCTIONALITY)
        with enable_grad():
            b = aten.zeros(self.shape, dtype=g.dtype, device=g.device)
            b.requires_grad_(True)
            # md.autograd.grad(self.replay(b), b, g), through the engine itself
            (gb,) = run_backward([(gradient_edge(self.replay(b)), g)], create_graph,
                                 create_graph, capture={gradient_edge(b): 0},
                                 accumulate=False)
            if gb is not None and not create_graph:
                gb = gb.detach()
        if release:
            self.release()
        return [gb]


# Note [Stale views]
# ~~~~~~~~~~~~~~~~~~
# A view's grad_fn records how it was made from its base *then*.  An in-place op on the
# base, or on another view of it, changes the view's values and bumps the version counter
# they share; the view's history must now lead to the base's new one.  As PyTorch does
# (VariableHooks::grad_fn), the view remembers the version its history was made at
# (``ViewInfo.ag_version``) and, when it is read at another version, remakes it from the
# base's current history (``ViewNode``).  Everything that reads a view's history goes
# through ``grad_fn_of``/``gradient_edge``: the autograd kernels, ``Tensor.grad_fn``,
# ``register_hook``, ``retain_grad``, in-place checks.


def grad_fn_of(t) -> Node | None:
    """``t``'s grad_fn, remade first if ``t`` is a stale view (Note [Stale views])."""
    ag = t._ag
    if ag is None:
        return None
    if t._view is not None:
        _refresh_view(t, ag)
    return ag.grad_fn


def _refresh_view(t, ag) -> None:
    view = t._view
    vc = t._vc
    version = 0 if vc is None else vc.value
    if view.ag_version == version:
        return
    view.ag_version = version
    base = view.base
    bag = base._ag
    if ag.grad_fn is None or bag is None or not bag.requires_grad:
        return
    old, old_nr = ag.grad_fn, ag.output_nr
    ag.grad_fn = ViewNode(gradient_edge(base), view.replay, tuple(base._data.shape))
    ag.output_nr = 0
    move_retained(t, old, old_nr)


# Note [Node hooks]
# ~~~~~~~~~~~~~~~~~
# The tensor hooks of a node's outputs (``register_hook`` on a non-leaf) and the outputs
# whose gradient is retained (``retain_grad``) are kept outside the node, in ``_HOOKS``,
# weakly keyed by node: most graphs have neither, and a pass over a graph that has none
# tests one dict per node instead of reading two attributes of every node (attributes of
# the per-op Node classes, a generic load each: Note [Own code objects] in
# mdtensor/dispatch/operators.py), and recording stores nothing for them.


class _Hooks:
    """The hooks and retained gradients of one node's outputs (Note [Node hooks])."""

    __slots__ = ("pre_hooks", "retained")

    def __init__(self):
        self.pre_hooks = {}  # output_nr -> [hook]
        self.retained = {}  # output_nr -> weakref to the tensor


_HOOKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def hooks_of(node, create: bool = False):
    """``node``'s ``_Hooks`` (made when ``create``), or None (Note [Node hooks])."""
    h = _HOOKS.get(node)
    if h is None and create:
        h = _HOOKS[node] = _Hooks()
    return h


def move_retained(t, old, old_nr) -> None:
    """``retain_grad`` follows ``t`` to its new grad_fn (PyTorch keeps the gradient of a
    tensor's latest version)."""
    ag = t._ag
    if not ag.retains_grad or old is None or ag.grad_fn is old:
        return
    h = hooks_of(old)
    if h is not None:
        ref = h.retained.get(old_nr)
        if ref is not None and ref() is t:
            del h.retained[old_nr]
    hooks_of(ag.grad_fn, create=True).retained[ag.output_nr] = weakref.ref(t)


def gradient_edge(t):
    """Where the gradient of tensor ``t`` goes: ``(node, output_nr)`` or None."""
    ag = t._ag
    if ag is None or not ag.requires_grad:
        return None
    if t._view is not None:
        _refresh_view(t, ag)
    if ag.grad_fn is not None:
        return (ag.grad_fn, ag.output_nr)
    edge = ag.leaf_edge
    if edge is None:
        edge = ag.leaf_edge = (AccumulateGrad(t), 0)
    return edge


def attach(out, node, output_nr: int) -> None:
    """Make ``out`` an output of ``node`` (requires grad, has grad_fn)."""
    ag = out._ag
    if ag is None:
        out._ag = AutogradMeta.make(True, node, output_nr)
    else:
        ag.requires_grad = True
        ag.grad_fn = node
        ag.output_nr = output_nr
    out._ks |= AUTOGRAD_FUNCTIONALITY


# ---------------------------------------------------------------------------------------


def _add(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return aten.add(a, b)


def _hook_result(hook, new, old):
    """A tensor hook's replacement gradient ``new`` for ``old``, checked as PyTorch checks
    it: a Tensor of the same shape, dtype and device."""
    name = getattr(hook, "__name__", type(hook).__name__)
    if not hasattr(new, "_ks"):
        raise TypeError(f"backward: hook '{name}' returned {type(new).__name__}; expected a "
                        f"Tensor or None")
    if tuple(new.shape) != tuple(old.shape):
        raise RuntimeError(f"backward: hook '{name}' has changed the size of value (was "
                           f"{tuple(old.shape)}, got {tuple(new.shape)})")
    if new.dtype != old.dtype or new._device != old._device:
        raise RuntimeError(f"backward: hook '{name}' has changed the type of value (was "
                           f"{old.dtype.name} on {old._device}, got {new.dtype.name} on "
                           f"{new._device})")
    return new


# Note [Needed nodes]
# ~~~~~~~~~~~~~~~~~~~
# ``autograd.grad(outputs, inputs)`` and ``backward(inputs=...)`` run only what the inputs'
# gradients need, as PyTorch's engine does (``GraphTask::init_to_execute``): the target
# nodes (the nodes of the inputs' gradient edges) and the nodes with a path to one.  A
# captured node that leads to no other target is not run: its gradient is taken (after
# its tensor hooks) and the walk stops there; a node of ``backward(inputs=...)`` runs (a
# non-leaf input's gradient reaches ``.grad`` as a retained gradient, a leaf's through its
# accumulator).  Edges into nodes off these paths are dropped, so their hooks do not fire,
# their leaves get no gradient and their saved tensors are not released.  A plain
# ``backward()`` has no targets and runs every node it reaches.


def _needed(roots, targets) -> set:
    """The nodes reachable from ``roots`` that have a path of one or more edges to a node
    of ``targets`` (PyTorch's ``exec_info``: the nodes ``autograd.grad`` and
    ``backward(inputs=...)`` must run).  An iterative depth-first walk: a node is needed
    once one of its edges leads to a target or to a needed node."""
    needed: dict = {}
    for root in dict.fromkeys(n for n, _ in roots):
        if root in needed:
            continue
        needed[root] = False
        stack = [(root, iter(root.next_functions))]
        while stack:
            node, edges = stack[-1]
            for edge in edges:
                if edge is None:
                    continue
                nxt = edge[0]
                if nxt in targets:
                    needed[node] = True
                seen = needed.get(nxt)
                if seen is None:  # first visit: walk it before going on with ``node``
                    needed[nxt] = False
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
                if seen:
                    needed[node] = True
            else:
                stack.pop()
                if stack and needed[node]:
                    needed[stack[-1][0]] = True
    return {n for n, v in needed.items() if v}


# Note [Leaves without hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf's AccumulateGrad node only sums what arrives and hands it to ``accumulate_grads`` after
# the pass; only its tensor hooks, a capture (``autograd.grad``) or a restricted run
# (``inputs=``) make it more.  Without them the engine sums a leaf's gradients into
# ``leaf_grads`` as they arrive, instead of pushing the node on the heap and popping it
# again: the same sum, without the heap, the buffer and the node's turn (about 60
# bytecodes a leaf; an MLP step has one leaf per weight and bias).  A hook registered on
# the leaf during the pass, by another hook, after a gradient already arrived, does not
# see that gradient (PyTorch's would, as its AccumulateGrad reads the hooks when it runs).


def run_backward(roots, retain_graph: bool, create_graph: bool, capture=None,
                 accumulate: bool = True, inputs=None):
    """Run the engine (Note [Engine]).

    Args:
        roots: ``[(edge, grad)]`` to start from.
        capture: ``{edge: index}``: gradients arriving at these edges are returned
            (``autograd.grad``) instead of, or besides, being accumulated.
        accumulate: write leaf gradients into ``.grad``.
        inputs: the nodes of ``backward(inputs=...)``: only they, and the nodes on the
            way to them, run (Note [Needed nodes]).

    Returns:
        the list of captured gradients (None where nothing arrived).
    """
    hooks = capture_hooks.get()
    if hooks is not None:  # Note [Capture hooks] in mdtensor/tensors/tensor.py
        hooks.backward(create_graph)
    root_nodes = [edge for edge, _ in roots]
    run = needed = None
    if capture or inputs:  # Note [Needed nodes]
        targets = {edge[0] for edge in capture} if capture else set()
        if inputs:
            targets |= inputs
        needed = _needed(root_nodes, targets)
        run = needed | targets
        if inputs:
            needed |= inputs
    buffers: dict = {}
    heap: list = []  # (seq, node): the newest node first (Note [Engine])
    for (node, nr), g in roots:
        buf = buffers.get(node)
        if buf is None:
            if run is not None and node not in run:
                continue
            buf = buffers[node] = [None] * node.n_outputs
            heappush(heap, (node.seq, node))
        buf[nr] = _add(buf[nr], g)
    captured = [None] * (len(capture) if capture else 0)
    leaf_grads: dict = {}
    # a gradient for a leaf without hooks goes straight to leaf_grads when no gradient
    # is captured and every node runs (Note [Leaves without hooks])
    direct = accumulate and run is None and not capture
    plain = not capture and needed is None
    hooked = _HOOKS.data  # truthy while some node has hooks (Note [Node hooks])
    release = not retain_graph
    token = None
    if not create_graph:  # ExcludeGuard(AUTOGRAD_FUNCTIONALITY), inlined
        inc, keep = dispatch_tls.get()
        token = dispatch_tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY))
    try:
        while heap:
            node = heappop(heap)[1]
            grads = buffers.pop(node)
            if type(node) is AccumulateGrad:
                g = grads[0]
                if g is not None:
                    # A leaf's hooks run before its gradient is accumulated or captured.
                    idx = capture.get((node, 0)) if capture else None
                    t = node._ref()
                    if t is None:  # Note [Leaf references]
                        continue
                    if accumulate or idx is not None:
                        hooks = t._ag.hooks
                        if hooks:
                            for hook in hooks:
                                new = hook(g)
                                if new is not None:
                                    g = _hook_result(hook, new, g)
                    if idx is not None:
                        captured[idx] = _add(captured[idx], g)
                    if accumulate:
                        prev = leaf_grads.get(id(t))
                        leaf_grads[id(t)] = (t, g if prev is None else _add(prev[1], g))
                continue
            if hooked or not plain:
                h = _HOOKS.get(node) if hooked else None
                # Tensor hooks of the node's outputs first: autograd.grad's captured
                # gradients and retain_grad see what the hooks returned, as in PyTorch.
                if h is not None and h.pre_hooks:
                    for nr, hooks in list(h.pre_hooks.items()):
                        for hook in list(hooks):
                            if grads[nr] is not None:
                                new = hook(grads[nr])
                                if new is not None:
                                    grads[nr] = _hook_result(hook, new, grads[nr])
                if capture:
                    for nr in range(node.n_outputs):
                        idx = capture.get((node, nr))
                        if idx is not None:
                            captured[idx] = _add(captured[idx], grads[nr])
                if h is not None and h.retained and accumulate:
                    for nr, ref in h.retained.items():
                        t = ref()
                        if t is not None and grads[nr] is not None:
                            leaf_grads[id(t)] = (t, _add(leaf_grads.get(id(t), (t, None))[1],
                                                         grads[nr]))
                if needed is not None and node not in needed:
                    continue  # captured, not on the way to another target: it does not run
            # with release, the node drops its saved values as soon as it ran, as
            # PyTorch's engine does
            in_grads = node.apply(grads, release)
            # A formula may return entries past its last edge (non-Tensor arguments) or,
            # for trailing optional Tensors, fewer than the edges.
            for edge, g in zip(node.next_functions, in_grads):
                if g is None or edge is None:
                    continue
                nxt, nr = edge
                if direct and type(nxt) is AccumulateGrad:
                    t = nxt._ref()
                    if t is None:  # Note [Leaf references]
                        continue
                    if not t._ag.hooks:
                        prev = leaf_grads.get(id(t))
                        leaf_grads[id(t)] = (t, g if prev is None else _add(prev[1], g))
                        continue
                buf = buffers.get(nxt)
                if buf is None:
                    if run is not None and nxt not in run:
                        continue
                    buf = buffers[nxt] = [None] * nxt.n_outputs
                    heappush(heap, (nxt.seq, nxt))
                    buf[nr] = g
                else:
                    prev = buf[nr]
                    buf[nr] = g if prev is None else _add(prev, g)
    finally:
        if token is not None:
            dispatch_tls.reset(token)
    # Only now, with the whole pass done, touch .grad.
    if leaf_grads:
        held = tuple(g for _, g in roots if g is not None)
        sink = grad_sink.get()
        if sink is None:
            accumulate_grads(leaf_grads.values(), held, create_graph)
        else:  # Note [Gradient sinks]
            sink(tuple(leaf_grads.values()), held, create_graph)
    return captured


# Note [Gradient sinks]
# ~~~~~~~~~~~~~~~~~~~~~~
# Writing ``.grad`` is the one effect of a backward pass that is not an op: a program
# recorder (``md.func.trace``) would miss it, and a replay would compute the gradients and
# drop them.  While ``grad_sink`` holds a function, the engine hands it the pass's leaf
# gradients instead of writing them, and the sink calls ``accumulate_grads`` itself (the
# recorder records that call as a step of the program, with the gradients' names, so the
# replay accumulates the replayed gradients into the leaves' ``.grad`` then).

#: None, or ``sink(pairs, held, create_graph)`` called instead of ``accumulate_grads``.
grad_sink: ContextVar = ContextVar("mdtensor_grad_sink", default=None)


# Note [Leaf gradients]
# ~~~~~~~~~~~~~~~~~~~~~
# As PyTorch's AccumulateGrad: a leaf's first gradient becomes its ``.grad`` only when
# nothing else can see it -- not a view (an expanded gradient, say), a dense writeable
# array, not handed to another leaf in the same pass, not a root gradient the caller
# holds; otherwise ``.grad`` is a copy.  So ``.grad`` is always a tensor of its own that
# an optimizer may update in place.  With ``create_graph`` the gradient keeps its history
# (and is cloned the same way, differentiably).


def accumulate_grads(pairs, held=(), create_graph: bool = False) -> None:
    """Add each ``(tensor, gradient)`` of ``pairs`` into ``tensor.grad`` as AccumulateGrad
    does (Note [Leaf gradients]); ``held`` are the root gradients the caller holds (never
    stolen)."""
    taken = {id(g._data) for g in held}  # the arrays already given away: root gradients...
    for t, g in pairs:
        if g is None:
            continue
        ag = t._ag
        if ag.grad is not None:
            ag.grad = _add(ag.grad, g if create_graph else g.detach())
            continue
        data = g._data
        if (g._view is not None or id(data) in taken
                or not g._device.backend.owns_dense(data)):
            g = aten.clone(g)  # not stealable (Note [Leaf gradients])
            if not create_graph and g._ag is not None:
                g = g.detach()
        elif not create_graph and g._ag is not None:  # a hook's or the caller's tensor
            g = g.detach()
        taken.add(id(g._data))  # ...and the other leaves' gradients
        ag.grad = g
