"""The Autograd layer's kernels: one per op with a derivative formula, registered for the
``Autograd`` alias key (rung 4 of the ladder), plus a boxed fallback for ops without one.

Each kernel runs the op below the layer, then records a ``Node`` of the graph (graph.py).
The formulas come from the registry the catalogue fills (formulas.py).  A tensor carries the
Autograd key only while it requires grad (Note [Autograd key] in
mdtensor/tensors/autograd_meta.py), so these kernels run only when some input requires grad.
"""

from __future__ import annotations

import functools as _functools
import re as _re

from mdtensor.dispatch.callers import _NO
from mdtensor.dispatch.kernel import LEAF_KERNELS, Kernel, own_code
from mdtensor.dispatch.keys import AFTER_AUTOGRAD, AUTOGRAD_FUNCTIONALITY, DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.operators import dispatcher, register_fallback
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.tensors.autograd_meta import (
    AutogradMeta,
    inference_saved,
    requires_grad,
    saved_version,
)
from mdtensor.tensors.tensor import Tensor
from mdtensor.tensors.version_counter import INFERENCE, VersionCounter, counter

from .formulas import formula_for, is_nondifferentiable
from .grad_mode import no_grad
from .graph import (
    _FREED,
    ListNode,
    MaskedNode,
    Node,
    ViewNode,
    attach,
    grad_fn_of,
    gradient_edge,
    move_retained,
    next_seq,
    save_output,
    single_output_apply,
)

__all__ = ["below_autograd", "install", "install_formulas", "register_for"]


def below_autograd(op, ks, args, kwargs):
    """Run ``op`` below the Autograd layer with Autograd excluded meanwhile, so composite
    kernels underneath (clone + masked_fill_, ...) record nothing themselves."""
    inc, keep = dispatch_tls.get()
    token = dispatch_tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY))
    try:
        return op.redispatch(ks & AFTER_AUTOGRAD, *args, **kwargs)
    finally:
        dispatch_tls.reset(token)


def _node_name(op) -> str:
    base = op.schema.name.rstrip("_")
    camel = "".join(p[:1].upper() + p[1:] for p in _re.split(r"_+", base) if p)
    return f"{camel}Backward0"


def _is_float(t) -> bool:
    return t.dtype.kind in "fc"


# Note [Autograd kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~
# One kernel per op with a formula.  It runs the op below the Autograd layer, then records
# a Node: one edge per positional Tensor argument (``gradient_edge``), the inputs whose
# values the formula reads saved with their versions (Note [Saved inputs]), and the output
# when the formula reads it.  Below-autograd dispatch is
# inlined: when the entry below is a leaf backend kernel (``_ops.LEAF_KERNELS``: it calls no
# op) it is called directly; anything else (composites, modes, ADInplaceOrView) runs with
# Autograd excluded from the thread-local state, so what it calls records nothing.  An
# output saved for backward is kept outside autograd (Note [Saved outputs] in _graph.py),
# never as the output itself, which would make a reference cycle output -> grad_fn ->
# output.


# Note [Recording]
# ~~~~~~~~~~~~~~~~
# The kernel of the common case (one output, the Tensor arguments first) runs on every op
# whose input requires grad, and its cost is counted in lines: about 0.05-0.1 us each on the
# 2-core EPYC, with the op's own NumPy call at 1-3 us.  So what can be decided when the
# kernel is made is: whether the op has one, two or more Tensor arguments, and which of
# them each combination of live edges needs saved, as bits (bit 0 the first argument, bit 1
# the second; ``save_bits[mask]`` for two arguments).  The call then computes the one or
# two edges inline and builds ``saved`` as one tuple, with no loop, list or bounds check.
# An op whose one Tensor is its second argument (``md.sub(2, x)``, ``polygamma(n, x)``:
# ``plan.second``) takes the same kernel, the Tensor read from the second argument and its
# node's formula the flattened one (a gradient per edge).  On the generic recording kernel
# ``1.0 - x`` with grad cost 7.2K instructions more than ``x - 1.0``.  So do ops whose
# other Tensors follow ``self`` at other positions (``gather(x, dim, index)``,
# ``index_add(x, dim, index, source)``: ``plan.spread``), through the loop by position of
# the branch for three or more: ``md.index_select(xg, 0, i)`` 41.7K -> 37.5K.


# Note [Saved inputs]
# ~~~~~~~~~~~~~~~~~~~
# As in PyTorch, backward raises "modified by an inplace operation" only for a tensor whose
# *value* the formula needs: ``y = x + 1; x.add_(1)`` leaves add's gradient exact, since it
# reads only ``x``'s shape and dtype (PyTorch's AddBackward0 saves sizes, not tensors).  A
# formula declares the Tensor arguments whose values it reads with
# ``derivatives.reads(...)``; without the mark every Tensor argument is saved (the safe
# default).  ``reads({0: (1,), 1: (0,)})`` says what each argument's gradient reads: mul
# saves ``other`` only when ``self`` needs a gradient, and nothing of ``x * 2`` (PyTorch's
# codegen saves an input only if a gradient that will be computed uses it).  The node
# still references the others, for their metadata: in-place ops never
# change a tensor's shape or dtype, and ``out=`` (which may resize) refuses tensors that
# require grad.  An in-place op whose formula does not read ``self`` saves an alias of it
# instead of a copy of its old value.


INF = INFERENCE  # Note [Inference tensors]: the version counter that cannot be saved
_ALL_NEEDED = (True,) * 4  # needs for a formula whose caller has no mask


# Note [Kernel plans]
# ~~~~~~~~~~~~~~~~~~~~
# An op's Autograd kernel is made in two steps.  ``_Plan`` reads once per op what its schema and
# formula say: which arguments are Tensors, whose values the formula reads (Note [Saved
# inputs]), which gradient reads which input, what the node's class is.  A builder then makes
# the kernel from the plan: ``_recording_kernel`` serves every op (a keyset kernel: in-place,
# ``out=``, Tensor lists), and ``_functional_factory`` the common case -- Tensor outputs (one,
# or several as cummax's), the Tensor arguments first (or one Tensor second), not in-place
# -- as a wrapper kernel (Note [Wrapper kernels] in mdtensor/dispatch/operators.py) with the
# recording kernel's steps decided ahead (Note [Recording]).  The builders copy the plan's
# fields into locals first: a kernel reads closure cells, not attributes of the plan (an
# attribute read on every recorded op for each of a dozen fields).


# Note [Keyword-only Tensor arguments]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``diff(x, prepend=p, append=a)``: the edges of keyword-only Tensor arguments follow the
# positional ones, in schema order, for the ones the call passed; the formula returns their
# gradients as a dict by name after the positional ones (``_Plan.kw_tensors``).


class _Plan:
    """What the Autograd kernel of one op needs to know, read from its schema and formula
    once (Note [Kernel plans])."""

    def __init__(self, op, formula):
        schema = op.schema
        self.name = _node_name(op)
        self.formula = formula
        self.tensor_pos = [(i, a.type.is_tensor_list) for i, a in enumerate(schema.arguments)
                           if a.type.is_tensor_like and not a.kwarg_only]
        self.is_inplace = schema.is_inplace
        self.is_out = schema.is_out
        self.uses_out = getattr(formula, "uses_out", False)
        # the arguments whose values the formula reads are saved (Note [Saved inputs])
        reads = getattr(formula, "reads", None)
        self.by_grad = None  # {i: what the gradient of argument i reads}: per call
        if reads is None:
            reads = frozenset(i for i, _ in enumerate(schema.arguments))
        elif isinstance(reads, dict):
            self.by_grad = reads
        self.reads = reads
        self.n_outputs = len(schema.returns)
        # keyword-only Tensor arguments (Note [Keyword-only Tensor arguments])
        self.kw_tensors = () if self.is_out else tuple(
            a.name for a in schema.arguments
            if a.type.is_tensor_like and a.kwarg_only and not a.type.is_tensor_list)
        self.simple = all(not is_list for _, is_list in self.tensor_pos)
        self.positions = tuple(i for i, _ in self.tensor_pos)
        # The engine pairs a node's edges with its formula's results in order, so a formula
        # whose Tensor arguments are the leading positional ones is used as it is.
        prefix = (self.simple and self.positions == tuple(range(len(self.positions)))
                  and not self.kw_tensors)
        # one Tensor, the second argument (Note [Recording])
        self.second = self.simple and self.positions == (1,) and not self.kw_tensors
        # ``self`` first and the other Tensors spread out (gather's and index_select's
        # index at 2, index_add's at 2 and 3): the functional kernel's loop by position
        self.spread = (self.simple and not prefix and len(self.positions) > 1
                       and self.positions[0] == 0 and not self.kw_tensors)
        # A formula taking ``needs`` (derivatives.uses_mask) gets the real mask on the
        # functional path (MaskedNode), and "all" elsewhere.
        self.uses_mask = getattr(formula, "uses_mask", False)
        plain = _functools.partial(formula, _ALL_NEEDED) if self.uses_mask else formula
        self.flat_formula = (plain if prefix
                             else _flatten_formula(plain, self.tensor_pos, self.kw_tensors))
        returns = schema.returns
        # one Tensor list returned, a formula that reads no output: a ListNode of as many
        # outputs (Note [List outputs]); one that reads them keeps the recording kernel
        self.listed = (len(returns) == 1 and returns[0].type.is_tensor_list
                       and not self.uses_out)
        # a Tensor list first and no other Tensor, one Tensor (or a list) returned, a
        # formula that reads no values (cat, stack: Note [Recording Tensor lists])
        first = schema.arguments[0] if schema.arguments else None
        self.list_first = (
            self.tensor_pos == [(0, True)] and not self.kw_tensors and not self.is_inplace
            and not self.is_out and not first.type.elem_optional and not first.type.optional
            and len(returns) == 1 and (returns[0].type.is_tensor or self.listed)
            and not (0 in reads if self.by_grad is None else self.by_grad.get(0)))
        # an in-place op on ``self`` with at most one other Tensor, both leading, one output
        # (Note [In-place recording])
        self.inplace_self = (
            self.is_inplace and not self.is_out and prefix and 0 < len(self.positions) <= 2
            and len(returns) == 1 and returns[0].type.is_tensor
            and (a0 := schema.arguments[0].type.alias) is not None and a0.is_write)
        self.save_bits = self._save_bits() if (
            not self.is_inplace and not self.is_out and (prefix or self.second or self.spread)
            and returns
            and (self.listed or all(r.type.is_tensor for r in returns))) else None

    @property
    def functional(self) -> bool:
        """Whether the op gets the functional wrapper kernel (Note [Recording])."""
        return self.save_bits is not None

    def _save_bits(self):
        """What the functional kernel saves (Note [Recording]): for one Tensor argument, its
        bit or 0; for two, a tuple indexed by which edges are live (0b01: the first, ...);
        -1 for more (saved by position: ``saved_positions``, or with reads per gradient
        ``saved_by_mask[live edges]``); None where the functional kernel does not apply
        (no Tensor argument)."""
        positions, by_grad, reads = self.positions, self.by_grad, self.reads
        n = len(positions)
        self.saved_positions = self.saved_by_mask = None
        if n == 0:
            return None
        if by_grad is None:
            self.saved_positions = tuple(i for i in positions if i in reads)
        elif n == 1:  # mul.Scalar: its one gradient reads the scalar
            self.saved_positions = tuple(i for i in positions if i in by_grad.get(positions[0], ()))
        else:  # reads per gradient: what the live edges' gradients read, per set of edges
            self.saved_by_mask = tuple(
                tuple(i for i in positions
                      if any(i in by_grad.get(j, ()) for k, j in enumerate(positions)
                             if mask >> k & 1))
                for mask in range(1 << n))
            if n > 2:  # addmm: by position
                return -1

        def bits(saved):  # the first and second Tensor argument as bits 0 and 1
            return sum(1 << positions.index(i) for i in saved)

        if self.saved_positions is None:  # two arguments
            return tuple(map(bits, self.saved_by_mask))
        if n > 2:
            return -1
        save = bits(self.saved_positions)
        return (save,) * 4 if n == 2 else save

    def node_class(self, flat: bool = False):
        """Note [Node classes]: the op's own Node subclass (``type(y.grad_fn).__name__`` is
        ``ExpBackward0``, as in PyTorch) holds what every node of the op shares; MaskedNode
        formulas read the real ``needs`` from the node's edges when it runs.  Its ``apply``
        is the op's own (``single_output_apply``).  With ``flat``, the formula is the one
        giving a gradient per edge (a Tensor list's, one per Tensor: ``flat_formula``).
        An op returning a Tensor list gets a ListNode, whose output count each call sets
        (Note [List outputs])."""
        name, n = self.name, self.n_outputs
        formula, masked = (self.flat_formula, False) if flat else (self.formula, self.uses_mask)
        fields = {"__slots__": (), "_name": name, "formula": staticmethod(formula),
                  "__module__": "mdtensor.autograd"}
        if self.listed:  # Node's own apply, which takes the outputs as a tuple
            return type(name, (MaskedNode, ListNode) if masked else (ListNode,), fields)
        fields["n_outputs"] = n
        if n == 1:  # several outputs take Node's own apply, which takes them as a tuple
            fields["apply"] = single_output_apply(formula, masked)
        return type(name, (MaskedNode if masked else Node,), fields)


def _make_kernel(op, formula):
    """``(kernel, wrapper)``: the Autograd kernel of ``op``; for the common functional case
    a wrapper factory (Note [Wrapper kernels] in mdtensor/dispatch/operators.py), else a keyset
    kernel."""
    plan = _Plan(op, formula)
    if plan.functional:
        return _functional_factory(op, plan), True
    if plan.list_first:
        return _list_factory(op, plan), True
    if plan.inplace_self:
        return _inplace_factory(op, plan), True
    return _recording_kernel(op, plan), False


def _recording_kernel(op, plan):
    """The keyset kernel recording any call of ``op`` (Note [Autograd kernels])."""
    name, flat_formula, tensor_pos, positions = (plan.name, plan.flat_formula,
                                                 plan.tensor_pos, plan.positions)
    is_inplace, is_out, uses_out, simple = (plan.is_inplace, plan.is_out, plan.uses_out,
                                            plan.simple)
    reads, by_grad, kw_tensors, n_outputs = (plan.reads, plan.by_grad, plan.kw_tensors,
                                             plan.n_outputs)
    table = op.table
    miss = op.fill_entry
    leaf = LEAF_KERNELS
    tls = dispatch_tls

    def autograd_kernel(ks, *args, **kwargs):
        # This kernel runs only when an argument carries the Autograd key, i.e. requires
        # grad, so there is nothing to check before recording (Note [Autograd key]).
        if is_out:
            raise RuntimeError(
                f"{op.name}: functions with out=... arguments don't support automatic "
                f"differentiation, but one of the arguments requires grad.")
        now = reads if by_grad is None else _needed_reads(by_grad, args, positions)
        if is_inplace:
            if now:  # before the op runs: nothing changes
                _check_saveable(args, tensor_pos, now)
            saved_args = _check_inplace(op, args, now)
        else:
            saved_args = args
        below = ks & AFTER_AUTOGRAD & op.mask
        entry = table.get(below)
        if entry is None:
            entry = miss(below)
        if entry in leaf:
            out = entry(*args, **kwargs)
        else:
            inc, keep = tls.get()
            token = tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY))
            try:
                out = entry(*args, **kwargs)
            finally:
                tls.reset(token)
        single = n_outputs == 1 and type(out) is not tuple and type(out) is not list
        if single:
            if not out._is_floating():
                return out
        elif is_inplace:  # (_record_outputs tests the others' outputs)
            flags = _floating_flags(out)
            if True not in flags:
                return out
        if simple:
            edges = []
            saved = []
            nargs = len(saved_args)
            for i in positions:
                if i < nargs:
                    v = saved_args[i]
                    if v is None:  # an omitted ``Tensor?`` argument: no edge, nothing saved
                        edges.append(None)
                        continue
                    edges.append(gradient_edge(v))
                    if i in now:
                        vc = v._vc
                        saved.append((v, 0 if vc is None else vc.value if vc is not INF
                                          else inference_saved()))
        else:
            edges, saved = _edges_and_saved(saved_args, tensor_pos, now)
        for k in kw_tensors:
            v = kwargs.get(k)
            if v is not None:
                edges.append(gradient_edge(v))
                saved.append((v, saved_version(v)))
        node = Node() if single else ListNode()  # Node.new, inlined (Note [Class calls])
        node._name = name
        node.formula = flat_formula
        node.n_outputs = 1 if single else len(out)
        if not (single or is_inplace):
            return _record_outputs(node, out, saved_args, kwargs, edges, saved, uses_out)
        saved_out = None
        if uses_out:
            saved_out = save_output(out) if single else \
                _save_outputs(out, flags, saved, uses_out)
        node.args = saved_args
        node.kwargs = kwargs
        node.out = saved_out
        node.saved = saved
        node.next_functions = edges
        node.seq = next_seq()
        if is_inplace:
            _rebase(args[0], node)
        else:
            attach(out, node, 0)
        return out

    autograd_kernel = own_code(autograd_kernel)  # Note [Own code objects]
    autograd_kernel.__qualname__ = f"autograd[{op.name}]"
    return autograd_kernel


def _floating_flags(outs) -> list:
    """Whether each of ``outs`` is a floating Tensor (``_is_floating``, inlined for dtypes
    with NumPy's ``kind`` as in the functional kernel: one frame for the list)."""
    flags = []
    for o in outs:
        if isinstance(o, Tensor):
            try:
                f = o._data.dtype.kind in "fcV"
            except AttributeError:
                f = o._is_floating()
        else:
            f = False
        flags.append(f)
    return flags


# Note [Saving several outputs]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A formula that reads the outputs of an op with several (cummax's indices, the statistics
# of batch norm) gets them as a tuple.  A floating output becomes an output of the node, so
# it is saved outside autograd, as the record a single output's is (Note [Saved outputs]
# in graph.py: the output itself would make a cycle; the tensor is made again only if the
# formula runs).  Any other output (cummax's indices) never refers to the node and is
# saved as it is, with its version: a record of it would only cost a tensor later.
# A formula marked ``@uses_out(1, 2)`` reads only those outputs (batch norm's statistics,
# not its result): the others are kept as None, neither aliased nor versioned (0.2 us an
# output).


def _save_outputs(outs, flags, saved, read=True) -> tuple:
    """The outputs a node of several keeps (Note [Saving several outputs]): those in
    ``read`` (True: all), a floating one as its record, another Tensor as it is with its
    version appended to ``saved``."""
    kept = []
    k = 0
    for o in outs:
        if read is not True and k not in read:
            o = None
        elif flags[k]:  # save_output(o), inlined
            vc = o._vc
            if vc is None:
                vc = counter(o)
            o = (o._data, o._device, vc, vc.value)
        elif isinstance(o, Tensor):
            vc = o._vc
            saved.append((o, 0 if vc is None else vc.value))
        kept.append(o)
        k += 1
    return tuple(kept)


def _functional_factory(op, plan):
    """The wrapper factory of an op with Tensor outputs and its Tensor arguments first (or
    its one Tensor second: Note [Recording]): given the table entry below Autograd, the
    kernel that calls it and records the call.  Several outputs (cummax's values and
    indices) end in ``_record_outputs``."""
    n_tensors = len(plan.positions)
    spread = plan.spread  # the Tensors after ``self`` at any positions
    two = n_tensors == 2 and not spread
    many = n_tensors > 2 or spread
    later = plan.positions[1:]
    save_bits, saved_positions, uses_out = plan.save_bits, plan.saved_positions, plan.uses_out
    by_mask = plan.saved_by_mask
    second = plan.second  # the one Tensor is the second argument (Note [Recording])
    node_class = plan.node_class(flat=second or spread)
    listed = plan.listed
    several = plan.n_outputs > 1 or listed

    def factory(entry):
        # ``entry`` is the table entry below Autograd for this key set (Note [Wrapper
        # kernels] in mdtensor/dispatch/operators.py).  A leaf computes and records nothing:
        # it runs as it is; anything else runs with the Autograd key excluded.
        entry = _run_below(entry)

        def autograd_kernel_functional(v, b=_NO, c=_NO, /, *rest, **kwargs):
            # autograd_kernel for the common case (one output, Tensor arguments first, not
            # in-place): the same steps without the branches (Note [Recording]).  The
            # first three arguments are named, so the common calls reach ``entry`` without
            # a star call (Note [Star calls] in mdtensor/dispatch/callers.py): three for
            # ``transpose(x, 0, 1)`` and ``moveaxis``, whose star call and ``(v, b,
            # *rest)`` (a list, then a tuple) cost 0.8K instructions
            if b is _NO:
                args = (v,)
                out = entry(v, **kwargs) if kwargs else entry(v)
            elif c is _NO:
                args = (v, b)
                out = entry(v, b, **kwargs) if kwargs else entry(v, b)
            elif rest or kwargs:
                args = (v, b, c, *rest)
                out = entry(*args, **kwargs) if kwargs else entry(*args)
            else:
                args = (v, b, c)
                out = entry(v, b, c)
            if not several:  # several: _record_outputs tests each
                try:  # out._is_floating(), inlined for dtypes with NumPy's ``kind``
                    # ("V": ml_dtypes' bfloat16, Note [bfloat16 through ml_dtypes])
                    floating = out._data.dtype.kind in "fcV"
                except AttributeError:  # (array_api_strict's have none)
                    floating = out._is_floating()
                if not floating:
                    return out
            if second:  # (``args`` holds the arguments in order)
                v = b
            # gradient_edge(v) of the first (and second) Tensor argument, inlined
            ag = v._ag
            if ag is None or not ag.requires_grad:
                e = None
            elif ag.grad_fn is not None and (
                    (view := v._view) is None  # a view read at its history's version is
                    or ((vc := v._vc) is not None  # current (Note [Stale views]): inline
                        and view.ag_version == vc.value)):
                e = (ag.grad_fn, ag.output_nr)
            elif ag.leaf_edge is not None:
                e = ag.leaf_edge
            else:
                e = gradient_edge(v)
            if two:
                w = b
                ag = w._ag
                if ag is None or not ag.requires_grad:
                    f = None
                elif ag.grad_fn is not None and (
                        (view := w._view) is None
                        or ((vc := w._vc) is not None and view.ag_version == vc.value)):
                    f = (ag.grad_fn, ag.output_nr)
                elif ag.leaf_edge is not None:
                    f = ag.leaf_edge
                else:
                    f = gradient_edge(w)
                edges = [e, f]
                # what the live edges' gradients read: bit 0 the first argument, bit 1
                # the second
                save = save_bits[(e is not None) | (f is not None) << 1]
            elif many:
                # an omitted ``Tensor?`` argument (convolution's bias), or one that needs
                # no grad (where's condition): no edge; a loop, not a comprehension (a
                # frame, ~0.1 us)
                edges = [e]
                nargs = len(args)
                for i in later:
                    if i >= nargs:  # omitted: no edge
                        break
                    a = args[i]
                    ag = None if a is None else a._ag
                    if ag is None or not ag.requires_grad:
                        edges.append(None)
                    elif a._view is not None:  # its history perhaps stale: remade first
                        edges.append(gradient_edge(a))
                    elif ag.grad_fn is not None:  # gradient_edge(a), inlined as for ``v``
                        edges.append((ag.grad_fn, ag.output_nr))
                    elif ag.leaf_edge is not None:
                        edges.append(ag.leaf_edge)
                    else:
                        edges.append(gradient_edge(a))
                save = -1
                at = saved_positions
                if by_mask is not None:  # reads per gradient: by the live edges
                    mask = 0
                    bit = 1
                    for f in edges:
                        if f is not None:
                            mask |= bit
                        bit <<= 1
                    at = by_mask[mask]
            else:
                edges = [e]
                save = save_bits
            if save == 0:
                saved = ()
            elif save == 1:
                vc = v._vc
                saved = ((v, 0 if vc is None else vc.value if vc is not INF
                          else inference_saved()),)
            elif save == 3:
                vc = v._vc
                wc = w._vc
                saved = ((v, 0 if vc is None else vc.value if vc is not INF
                          else inference_saved()),
                         (w, 0 if wc is None else wc.value if wc is not INF
                          else inference_saved()))
            elif save == 2:
                wc = w._vc
                saved = ((w, 0 if wc is None else wc.value if wc is not INF
                          else inference_saved()),)
            else:
                saved = []  # saved_version(t) of each, inlined as above
                for i in at:
                    t = args[i]
                    if t is None:  # an omitted ``Tensor?`` argument (batch norm's weight)
                        continue
                    vc = t._vc
                    saved.append((t, 0 if vc is None else vc.value if vc is not INF
                                  else inference_saved()))
                saved = tuple(saved)
            if several:
                node = node_class()
                if listed:  # Note [List outputs]
                    node.n_outputs = len(out)
                return _record_outputs(node, out, args, kwargs, edges, saved, uses_out)
            saved_out = None
            if uses_out:
                # save_output(out), inlined
                vc = out._vc
                if vc is None:
                    if out._view is None:
                        vc = VersionCounter()
                        vc.value = 0
                        vc.views = None
                    else:
                        vc = counter(out)
                    out._vc = vc
                saved_out = (out._data, out._device, vc, vc.value)
            # Node.new(...), AutogradMeta.make(True, node, 0) and attach(out, node, 0),
            # inlined: a frame each costs ~0.1 us on every recorded op (DESIGN.md section 8);
            # the node's class carries its name, formula and output count
            node = node_class()
            node.args = args
            node.kwargs = kwargs
            node.out = saved_out
            node.saved = saved
            node.next_functions = edges
            node.seq = next_seq()  # Note [Engine]
            if out._ag is None:  # ``out`` is fresh from a functional kernel
                meta = AutogradMeta()
                meta.requires_grad = True
                meta.grad = None
                meta.grad_fn = node
                meta.output_nr = 0
                meta.retains_grad = False
                meta.hooks = None
                meta.leaf_edge = None
                out._ag = meta
                out._ks |= AUTOGRAD_FUNCTIONALITY
            else:
                attach(out, node, 0)
            return out

        return _own_kernel(autograd_kernel_functional, op)

    factory.__qualname__ = f"autograd[{op.name}]"
    return factory


def _own_kernel(kernel, op):
    """``kernel`` with the op's own call and slot sites (Note [Own code objects] in
    mdtensor/dispatch/kernel.py) and its name."""
    kernel = own_code(kernel)
    kernel.__qualname__ = f"autograd[{op.name}]"
    return kernel


# Note [Recording Tensor lists]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``cat``, ``stack`` and the other joins take their Tensors as one list, an edge each.  The
# recording kernel served them with a generator of ``gradient_edge`` frames, a flattening
# formula call and ``attach``: 17.4K instructions for ``md.stack([a, b])`` of two (2, 3)
# tensors requiring grad, twice what ``exp`` records in.  Their formulas read only the Tensors'
# shapes and dtypes (``derivatives.reads()``, as PyTorch's CatBackward0 saves sizes), so
# their wrapper kernel does the functional kernel's steps with a loop over the list for the
# edges, saves nothing, and makes a node of the op's own class with the flattening formula
# (a gradient per Tensor of the list).  A list op whose formula reads values keeps the
# recording kernel.


def _list_factory(op, plan):
    """The wrapper factory of an op whose only Tensor argument is a leading Tensor list
    and whose output is one Tensor (Note [Recording Tensor lists])."""
    uses_out = plan.uses_out
    node_class = plan.node_class(flat=True)
    listed = plan.listed
    make_meta = AutogradMeta.make

    def factory(entry):
        entry = _run_below(entry)

        def autograd_kernel_list(tensors, b=_NO, /, *rest, **kwargs):
            if b is _NO:
                args = (tensors,)
                out = entry(tensors, **kwargs) if kwargs else entry(tensors)
            else:
                args = (tensors, b, *rest)
                out = entry(*args, **kwargs) if rest or kwargs else entry(tensors, b)
            if not listed:  # (_record_outputs tests each of a list)
                try:  # out._is_floating(), inlined as in the functional kernel
                    floating = out._data.dtype.kind in "fcV"
                except AttributeError:
                    floating = out._is_floating()
                if not floating:
                    return out
            edges = []
            for t in tensors:  # (a loop, not a comprehension's frame)
                ag = t._ag
                edges.append(None if ag is None or not ag.requires_grad
                             else gradient_edge(t))
            node = node_class()
            if listed:  # meshgrid (Note [List outputs])
                node.n_outputs = len(out)
                return _record_outputs(node, out, args, kwargs, edges, (), uses_out)
            node.args = args
            node.kwargs = kwargs
            node.out = save_output(out) if uses_out else None
            node.saved = ()
            node.next_functions = edges
            node.seq = next_seq()
            if out._ag is None:  # attach(out, node, 0), inlined for a fresh output
                out._ag = make_meta(True, node, 0)
                out._ks |= AUTOGRAD_FUNCTIONALITY
            else:
                attach(out, node, 0)
            return out

        return _own_kernel(autograd_kernel_list, op)

    factory.__qualname__ = f"autograd[{op.name}]"
    return factory


# Note [List outputs]
# ~~~~~~~~~~~~~~~~~~~
# ``unbind``, ``split`` and ``chunk`` (a Tensor first) and ``meshgrid`` (a Tensor list
# first) return a list of Tensors (``broadcast_arrays`` too, but it is a composite of
# ``expand``s: Note [broadcast_arrays: views of its inputs]).  They take the
# functional and the Tensor-list wrapper kernels, as ops of one output do, and end in
# ``_record_outputs``: one node of the op's own ListNode class (``UnbindBackward0``, its
# output count set per call), each floating piece its output in order.  The view metadata
# of ``unbind``'s pieces is the ADInplaceOrView kernel's below, untouched.  The recording
# kernel served them with a keyset call, its branches and a ``gradient_edge`` frame: the
# sweep's ``md.unbind`` of (2, 3) requiring grad went from 53.3K to 49.3K instructions,
# ``md.chunk`` from 56.9K to 52.8K (PyTorch: 30.5K, 33.7K).  A list op whose formula
# reads its outputs keeps the recording kernel.


def _record_outputs(node, outs, args, kwargs, edges, saved, read):
    """The end of a recording kernel for an op of several Tensor outputs (cummax, the
    statistics of batch norm, split's pieces): ``node`` filled and set as the history of
    each floating output, the outputs in ``read`` saved (Note [Saving several outputs]).
    Nothing is recorded where no output is floating.  One frame and one pass over the
    outputs: the floating test, ``_save_outputs`` and ``attach`` are inlined (cummax with
    grad: 601 -> 555 Python opcodes; the version before had three loops and two frames)."""
    kept = []
    more = []  # the versions of the non-floating outputs read
    floating = False
    k = 0
    for o in outs:
        try:  # o._is_floating(), inlined as in the functional kernel
            f = o._data.dtype.kind in "fcV"
        except AttributeError:  # not a Tensor, or an array without NumPy's ``kind``
            f = isinstance(o, Tensor) and o._is_floating()
        if f:
            floating = True
            if not read:  # (split's pieces: no formula reads them)
                pass
            elif read is True or k in read:  # its record (save_output, inlined)
                vc = o._vc
                if vc is None:
                    vc = counter(o)
                kept.append((o._data, o._device, vc, vc.value))
            else:
                kept.append(None)
            if o._ag is None:  # fresh from the kernel: attach(o, node, k), inlined
                o._ag = AutogradMeta.make(True, node, k)
                o._ks |= AUTOGRAD_FUNCTIONALITY
            else:
                attach(o, node, k)
        elif not read:
            pass
        elif read is True or k in read:  # kept as it is, with its version
            if isinstance(o, Tensor):
                vc = o._vc
                more.append((o, 0 if vc is None else vc.value))
            kept.append(o)
        else:
            kept.append(None)
        k += 1
    if not floating:
        return outs
    node.out = tuple(kept) if read else None
    node.args = args
    node.kwargs = kwargs
    node.saved = (*saved, *more) if more else saved
    node.next_functions = edges
    node.seq = next_seq()
    return outs


def _run_below(entry):
    """How a wrapper kernel calls the table entry below Autograd: a leaf as it is (it
    computes and records nothing), anything else with the Autograd key excluded."""
    return entry if entry in LEAF_KERNELS else _excluding_autograd(entry)


def _excluding_autograd(entry):
    """``entry`` called with the Autograd key excluded (what it calls records nothing)."""
    tls = dispatch_tls

    def excluding_autograd(*args, **kwargs):
        inc, keep = tls.get()
        token = tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY))
        try:
            return entry(*args, **kwargs)
        finally:
            tls.reset(token)

    return excluding_autograd


def _needed_reads(by_grad, args, positions):
    """The arguments read by the gradients this call needs (its inputs requiring grad)."""
    out = set()
    for i in positions:
        if i < len(args):
            v = args[i]
            if (any(requires_grad(t) for t in v) if isinstance(v, (list, tuple))
                    else requires_grad(v)):
                out.update(by_grad.get(i, ()))
    return out


def _edges_and_saved(args, tensor_pos, reads):
    edges, saved = [], []
    for i, is_list in tensor_pos:
        if i >= len(args):
            continue
        v = args[i]
        if is_list:
            edges.extend(gradient_edge(t) if t is not None else None for t in v)
            if i in reads:
                saved.extend((t, saved_version(t)) for t in v if t is not None)
        else:
            edges.append(gradient_edge(v))
            if i in reads:
                saved.append((v, saved_version(v)))
    return edges, saved


def _flatten_formula(formula, tensor_pos, kw_tensors=()):
    """Adapt a formula's per-argument result to the node's flat edge list (Note
    [Keyword-only Tensor arguments]: their gradients come last, as a dict by name)."""
    def flat(g, out, *args, **kwargs):
        res = formula(g, out, *args, **kwargs)
        grads = []
        for i, is_list in tensor_pos:
            if i >= len(args):
                continue
            gi = res[i] if i < len(res) else None
            if is_list:
                grads.extend(gi if gi is not None else [None] * len(args[i]))
            else:
                grads.append(gi)
        if kw_tensors:
            by_name = res[-1] if res and isinstance(res[-1], dict) else {}
            grads.extend(by_name.get(k) for k in kw_tensors if kwargs.get(k) is not None)
        return grads
    return flat


def _check_saveable(args, tensor_pos, reads) -> None:
    """Raise if an argument that would be saved is an inference tensor (Note [Inference
    tensors] in mdtensor/tensors/version_counter.py)."""
    for i, is_list in tensor_pos:
        if i in reads and i < len(args):
            for t in (args[i] if is_list else (args[i],)):
                if t is not None and t._vc is INF:
                    inference_saved()


def _check_inplace(op, args, reads):
    """PyTorch's checks for in-place ops under autograd; returns the args to save, with
    ``self`` replaced by a copy of its value before the op -- or, when the formula reads
    only its shape and dtype (Note [Saved inputs]), by an alias: no copy."""
    self = args[0]
    ag = self._ag
    grad_fn = grad_fn_of(self)  # a stale view's history remade first (Note [Stale views])
    if ag is not None and ag.requires_grad and grad_fn is None:
        if self._view is not None:
            raise RuntimeError(
                f"{op.name}: a view of a leaf Variable that requires grad is being used in "
                f"an in-place operation.")
        raise RuntimeError(
            f"{op.name}: a leaf Variable that requires grad is being used in an in-place "
            f"operation.")
    view = self._view
    if view is not None and requires_grad(view.base) and view.base._ag.grad_fn is None:
        raise RuntimeError(
            f"{op.name}: a view of a leaf Variable that requires grad is being used in an "
            f"in-place operation.")
    if 0 in reads:
        with no_grad():
            old = aten.clone(self)
    else:
        old = self._device.wrap(self._data)  # outside autograd and version tracking
    ag = self._ag
    if ag is not None and ag.requires_grad:
        old._ag = AutogradMeta.make(True, grad_fn, ag.output_nr)
        old._ks |= AUTOGRAD_FUNCTIONALITY
    if len(args) == 1:
        return (old,)
    # An argument that *is* self (``y.mul_(y)``) also means its value before the op.
    return (old, *(old if a is self else a for a in args[1:]))


# Note [In-place recording]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x.zero_()``, ``x.fill_(v)``, ``x.add_(y)`` with grad: an in-place op whose Tensor arguments
# are ``self`` and at most one other, leading, and which returns ``self``.  The recording
# kernel served them as a keyset kernel: a star call, the table probe below Autograd, then
# ``_check_inplace``, ``grad_fn_of``, ``gradient_edge``, ``_is_floating``, ``_rebase`` and
# ``attach``, a frame each.  Their wrapper kernel does the same steps with those frames
# inlined for the common ``self``, one that is not a view: its history is read as it is
# (no stale view to remake), the alias or clone of its old value takes ``self``'s edge, and
# the node becomes ``self``'s history in place (``_rebase`` without the CopySlices branch).
# A view ``self`` takes the functions themselves, as before.  The alias of a ``self`` whose
# value the formula does not read gets no autograd state: nothing differentiates through
# it.  Callgrind, a 16x16 float32 ``xg`` requiring grad: ``xg.clone().zero_()`` 55.7K ->
# 44.6K instructions (PyTorch: 29.8K), ``.fill_(0.5)`` 61.8K -> 47.8K, ``.add_(x)`` 61.0K ->
# 46.7K, ``.mul_(xg)`` (which clones ``self``) 97.3K -> 90.4K.


def _inplace_factory(op, plan):
    """The wrapper factory of an in-place op on ``self`` with at most one other Tensor
    argument, both leading (Note [In-place recording])."""
    reads, by_grad, positions, tensor_pos = (plan.reads, plan.by_grad, plan.positions,
                                             plan.tensor_pos)
    two = len(positions) == 2
    uses_out = plan.uses_out
    node_class = plan.node_class(flat=True)
    make_meta = AutogradMeta.make

    def factory(entry):
        entry = _run_below(entry)

        def autograd_kernel_inplace(v, b=_NO, /, *rest, **kwargs):
            # ``self``'s dtype is the output's: a node only for a floating one
            try:  # v._is_floating(), inlined as in the functional kernel
                floating = v._data.dtype.kind in "fcV"
            except AttributeError:
                floating = v._is_floating()
            args = (v,) if b is _NO else (v, b, *rest)
            now = reads if by_grad is None else _needed_reads(by_grad, args, positions)
            if now:  # before the op runs: nothing changes
                _check_saveable(args, tensor_pos, now)
            plain = v._view is None  # not a view: no stale history, no CopySlices
            if plain:  # _check_inplace, inlined
                ag = v._ag
                if ag is None or not ag.requires_grad:
                    e = None
                elif ag.grad_fn is None:  # a leaf: raises
                    _check_inplace(op, args, now)
                else:
                    e = (ag.grad_fn, ag.output_nr)
                if 0 in now:
                    with no_grad():
                        old = aten.clone(v)
                    if e is not None:  # a formula reading its value differentiates it
                        old._ag = make_meta(True, e[0], e[1])
                        old._ks |= AUTOGRAD_FUNCTIONALITY
                else:  # read for its shape and dtype only: an alias outside autograd
                    old = v._device.wrap(v._data)
                saved_args = ((old,) if b is _NO
                              else (old, old if b is v else b, *rest))
            else:
                saved_args = _check_inplace(op, args, now)
                e = gradient_edge(saved_args[0])
            if b is _NO:
                out = entry(v, **kwargs) if kwargs else entry(v)
            else:
                out = entry(*args, **kwargs) if rest or kwargs else entry(v, b)
            if not floating:
                return out
            if two:
                w = saved_args[1] if len(saved_args) > 1 else None
                edges = [e, None if w is None else gradient_edge(w)]
            else:
                edges = [e]
            if not now:
                saved = ()
            else:
                saved = tuple((saved_args[i], saved_version(saved_args[i]))
                              for i in positions if i in now and i < len(saved_args)
                              and saved_args[i] is not None)
            node = node_class()
            node.args = saved_args
            node.kwargs = kwargs
            node.out = save_output(out) if uses_out else None
            node.saved = saved
            node.next_functions = edges
            node.seq = next_seq()
            if not plain:
                _rebase(v, node)
                return out
            ag = v._ag  # _rebase(v, node) for a tensor that is not a view, inlined
            if ag is None:
                v._ag = make_meta(True, node, 0)
            else:
                old_fn, old_nr = ag.grad_fn, ag.output_nr
                ag.requires_grad = True
                ag.grad_fn = node
                ag.output_nr = 0
                if ag.retains_grad:
                    move_retained(v, old_fn, old_nr)
            v._ks |= AUTOGRAD_FUNCTIONALITY
            return out

        return _own_kernel(autograd_kernel_inplace, op)

    factory.__qualname__ = f"autograd[{op.name}]"
    return factory


def _rebase(self, node) -> None:
    """Point ``self``'s history at ``node``; for a view, rebase its base (CopySlices) --
    which then requires grad, even if it did not before (``x[0:2].add_(w)``)."""
    ag = self._ag
    old, old_nr = (None, 0) if ag is None else (ag.grad_fn, ag.output_nr)
    view = self._view
    if view is not None:
        base = view.base
        bag = base._ag
        base_old = (None, 0) if bag is None else (bag.grad_fn, bag.output_nr)
        copy = CopySlicesNode(base, view.replay, node)
        attach(base, copy, 0)
        move_retained(base, *base_old)
        attach(self, ViewNode((copy, 0), view.replay, tuple(base._data.shape)), 0)
        view.ag_version = self._vc.value  # Note [Stale views]: made at this version
    else:
        attach(self, node, 0)
    if self._ag.retains_grad:
        move_retained(self, old, old_nr)


class CopySlicesNode(Node):
    """Gradient of a base whose view was modified in place (PyTorch's CopySlices): the
    view's region flows through the in-place op's node, the rest to the base's history."""

    __slots__ = ("replay",)

    def __init__(self, base, replay, inner):
        self._fill("CopySlices", None, (), {}, None, (),
                   [gradient_edge(base), *inner.next_functions[1:]], 1)
        self.replay = replay
        self.formula = self._formula(inner)
        self.args = ()

    def _formula(self, inner):
        replay = self.replay

        def formula(g, out):
            g_base = aten.clone(g)
            region = replay(g_base)
            inner_grads = inner.apply([aten.clone(region)])
            aten.index_put_(region, Ellipsis, 0.0 if inner_grads[0] is None
                            else inner_grads[0])
            return [g_base, *inner_grads[1:]]
        return formula

    def apply(self, grads, release=False):
        if self.args is None:
            raise RuntimeError(_FREED)
        in_grads = self.formula(grads[0], None)
        if release:
            self.release()
        return in_grads


def _fallback(op, ks, args, kwargs):
    """Autograd fallback: ops with no formula.  Outputs of differentiable type get a node
    that raises on backward, naming the op; non-differentiable ops pass through."""
    out = below_autograd(op, ks, args, kwargs)
    if is_nondifferentiable(op):
        return out
    inputs = [v for v in list(args) + list(kwargs.values())
              if isinstance(v, Tensor) and requires_grad(v)]
    if not inputs:
        return out
    if op.schema.is_out:
        raise RuntimeError(
            f"{op.name}: functions with out=... arguments don't support automatic "
            f"differentiation, but one of the arguments requires grad.")
    name = op.name

    def not_implemented(g, o, *a, **k):
        raise NotImplementedError(f"the derivative for '{name}' is not implemented")

    node = Node.new(_node_name(op), not_implemented, (), {}, None, (),
                    [gradient_edge(t) for t in inputs], 1)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for k, o in enumerate(outs):
        if isinstance(o, Tensor) and _is_float(o):
            attach(o, node, k)
    return out


# Note [Non-differentiable ops]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An op in ``derivatives.NONDIFFERENTIABLE`` (comparisons, ``argmax``, the ``*_like`` factories,
# ...) records nothing: its outputs never require grad.  Called on a tensor that requires grad
# it still reaches the Autograd key, where the boxed fallback used to pass it through
# (thread-local guard, a boxed redispatch, a test of the op's name: 2-3 us).  It gets a wrapper
# kernel instead (Note [Wrapper kernels] in mdtensor/dispatch/operators.py) whose entry is the
# entry below Autograd itself when that is a leaf backend kernel -- which computes on arrays and
# returns tensors without autograd state -- and that entry with the Autograd key excluded
# otherwise (a composite's inner ops record nothing), as the fallback did.


_nondifferentiable_factory = _run_below


def register_for(op) -> None:
    if op.schema.namespace != "aten":
        return
    formula = formula_for(op)
    if formula is None:
        if is_nondifferentiable(op):  # Note [Non-differentiable ops]
            op.register_kernel(Kernel(_nondifferentiable_factory, DispatchKey.Autograd,
                                   factory=True, leaf=True,
                                   name=f"autograd_nondifferentiable[{op.name}]"))
        return
    kernel, wrapper = _make_kernel(op, formula)  # Note [Wrapper kernels]
    op.register_kernel(Kernel(kernel, DispatchKey.Autograd, with_keyset=not wrapper,
                           factory=wrapper, name=f"autograd[{op.name}]"))



def install() -> None:
    """Register the Autograd layer: per-op kernels from formulas, and the fallback."""
    # Called once, by mdtensor.layers.install (which is guarded).
    register_fallback(Kernel(_fallback, DispatchKey.Autograd, boxed=True,
                             name="autograd_fallback"))
    dispatcher.define_hooks.append(register_for)
    install_formulas()


def install_formulas() -> None:
    """Called once the catalogue is declared: kernels for every op with a formula."""
    for op in list(dispatcher.overloads.values()):
        if not op.has_kernel_for(DispatchKey.Autograd):
            register_for(op)
