"""Operators: ``OpOverload`` -- one schema's kernels, its dispatch table and the ladder
that fills it -- and the registry of overloads and backend fallbacks (``dispatcher``).

Note [Dispatch table]
~~~~~~~~~~~~~~~~~~~~~
The table maps a *call key set* straight to a ready-to-call entry.  It is filled lazily: a
miss takes the highest runtime key of the set, resolves it through the precedence ladder
(``resolve``, cached per runtime key), skips fallthrough kernels by removing their key
and trying again, and stores the first real kernel -- wrapped so that layer kernels receive
the key set (``with_keyset``) and boxed fallbacks receive ``(op, ks, args, kwargs)``.  Any
registration change clears every table it can affect.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from .callers import fast_tensor_positions, make_caller
from .contracts import checked
from .kernel import LEAF_KERNELS, Kernel
from .keys import (
    BACKEND_COMPONENTS,
    BACKEND_MASK,
    FULL,
    FUNC_BIT,
    FUNCTIONALITIES,
    PER_BACKEND_MASK,
    RUNTIME_KEYS,
    DispatchKey,
    DispatchKeySet,
    highest_key,
    remove_key,
    runtime_keys,
)
from .schema import FunctionSchema
from .tls import dispatch_tls

if TYPE_CHECKING:
    from .namespaces import OpOverloadPacket

__all__ = ["OpOverload", "dispatcher", "flip_gates", "register_fallback", "remove_fallback"]


# Rung labels (DESIGN.md section 2); dump() shows them next to every table entry.
RUNG_DIRECT = "1. direct registration"
RUNG_CEA = "2. CompositeExplicitAutograd"
RUNG_ARRAY_API = "2. ArrayAPI"
RUNG_CIA = "3. CompositeImplicitAutograd"
RUNG_AUTOGRAD_ALIAS = "4. Autograd alias"
RUNG_FALLBACK = "5. backend fallback"
RUNG_MISSING = "6. missing"


class _Dispatcher:
    """Global registry state: overloads by name, backend fallbacks, the trace switch."""

    def __init__(self):
        self.overloads: dict[str, OpOverload] = {}
        self.fallbacks: dict[DispatchKey, list[Kernel]] = {}
        # Backend components whose arrays speak the Array API (ArrayAPI alias covers them).
        self.array_api_backends: set[str] = set()
        self.trace = os.environ.get("MDTENSOR_SHOW_DISPATCH_TRACE", "") not in ("", "0")
        self.trace_depth = 0
        # Layers that generate per-op kernels (ADInplaceOrView, Autograd) subscribe here.
        self.define_hooks: list[Callable[[OpOverload], None]] = []
        # Backend component -> the type of its devices ("CPU" -> "cpu"), for error messages:
        # each Device records its own when it is made (mdtensor/tensors/device.py).
        self.device_types: dict[str, str] = {"Meta": "meta"}
        #: counts the changes of table entries (a registration, the trace turned on, a
        #: gate flipped): a caller holding entries across calls (md.compile's replay)
        #: looks again only when it moved
        self.generation = 0

    def invalidate_all(self) -> None:
        for op in self.overloads.values():
            op._invalidate()

    def set_trace(self, enabled: bool) -> bool:
        """Turn the dispatch trace on or off; returns the previous setting."""
        old, self.trace = self.trace, bool(enabled)
        if old != self.trace:
            self.invalidate_all()
        return old


dispatcher = _Dispatcher()


# ---------------------------------------------------------------------------------------
# Overloads


# Note [The operator API]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# Everything outside the dispatcher (this package) that registers kernels or reads an
# overload's table does it through the public methods and attributes that ``OpOverload``
# and ``OpOverloadPacket`` document -- ``md.library``, the layers, the catalogue, the
# built-in backends and a third-party backend alike; no module outside the package
# touches ``_kernels`` or ``_resolved`` (tests/test_structure.py greps for it).  The table
# API (``table``, ``mask``, ``fill_entry``) exists for callers that inline the dispatch
# (Note [Inline dispatch] in inline.py): their four lines are
#
#     ks = (tensor keys | included) & keep & op.mask
#     entry = op.table.get(ks) or op.fill_entry(ks)
#
# ``table`` may be held across calls (it is cleared in place, never replaced); ``mask`` is
# reassigned when registrations change, so it is read on each call.


class OpOverload:
    """One operator overload: a schema, its kernels per key, and its dispatch table.

    Calling it dispatches (see Note [The hot path]); ``redispatch(ks, ...)`` continues a
    call below a layer with a key set the layer computed.  The operator API -- what
    ``md.library``, the layers, the built-in backends and third-party code use (Note [The
    operator API]):

    - registration: ``register_kernel(kernel)``, ``remove_kernel(kernel)``;
    - reading it: ``kernels_for(key)``, ``has_kernel_for(key)``, ``registered()``,
      ``resolve(key)``, ``computed_table()``;
    - the table, for a caller that inlines the dispatch: ``table`` (masked key set ->
      entry; cleared in place, never replaced), ``mask`` (the key bits the op does not
      skip; reassigned) and ``fill_entry(ks)`` (the entry for a key set not in ``table``).
    """

    def __init__(self, schema: FunctionSchema, packet: OpOverloadPacket):
        self._schema = schema
        self._packet = packet
        self._name = schema.full_name if hasattr(schema, "full_name") else str(schema.name)
        self._kernels: dict[DispatchKey, list[Kernel]] = {}
        self._resolved: dict[DispatchKey, tuple[Kernel | None, str]] = {}
        self.table: dict[int, Callable] = {}
        self.mask = FULL
        self._dirty = True
        self.tags: frozenset[str] = frozenset()
        self.decl: Any = None  # the catalogue declaration (meta, derivative, OpInfo data)
        # Schema facts used on the slow path, computed once.
        self._tensor_args = tuple(
            (i, a.name, a.type.is_tensor_list, a.kwarg_only)
            for i, a in enumerate(schema.arguments)
            if a.type.is_tensor_like
        )
        self.fast_positions = fast_tensor_positions(schema)
        self._caller = make_caller(self)
        self.__name__ = schema.name
        self.__qualname__ = self._name

    # -- identity -------------------------------------------------------------------------
    @property
    def schema(self) -> FunctionSchema:
        return self._schema

    @property
    def name(self) -> str:
        """``'aten::add.Tensor'``"""
        return self._name

    @property
    def overloadpacket(self) -> OpOverloadPacket:
        return self._packet

    @property
    def caller(self) -> Callable:
        """The overload's call as a plain function (``op(...)`` without the bound-method
        hop): the fastest way to call one overload from Python."""
        return self._caller

    @property
    def overload_name(self) -> str:
        return self._schema.overload_name or "default"

    def __repr__(self) -> str:
        return f"<OpOverload {self._name}>"

    @property
    def __signature__(self):
        """The schema's Python signature (``inspect.signature(md.ops.aten.add.Tensor)``)."""
        return self._schema.signature

    #: ``op(...)`` calls ``op._caller`` itself: the call slot reads ``__call__`` through this
    #: property, in C, and calls what it gives with the call's own arguments, without a
    #: forwarding frame and its star call (as ``OpOverloadPacket.__call__``)
    __call__ = property(attrgetter("_caller"))

    # -- dispatch ---------------------------------------------------------------------------
    def redispatch(self, ks: int, *args, **kwargs):
        """Call the kernel for key set ``ks`` (an int) without recomputing it from the args."""
        ks &= self.mask
        kernel = self.table.get(ks)
        if kernel is None:
            kernel = self.fill_entry(ks)
        return kernel(*args, **kwargs)

    def _keyset_of(self, args, kwargs) -> int:
        """The call key set, computed from the arguments (the slow, general path)."""
        inc, keep = dispatch_tls.get()
        return (self._slow_keyset(args, kwargs) | inc) & keep & self.mask

    def _slow_keyset(self, args, kwargs) -> int:
        ks = 0
        nargs = len(args)
        for i, name, is_list, kwarg_only in self._tensor_args:
            v = args[i] if (i < nargs and not kwarg_only) else kwargs.get(name)
            if v is None:
                continue
            if is_list:
                for t in v:
                    if t is not None:
                        ks |= _ks_of(self, name, t)
            else:
                ks |= _ks_of(self, name, v)
        return ks

    # Note [Mixed devices]
    # ~~~~~~~~~~~~~~~~~~~~
    # Tensors of two backends that reach a per-backend key get an entry that raises (modes
    # and the layers above may still have handled them).  Every key set is checked once, when
    # its entry is made, so calls on one device pay nothing for the check.
    def fill_entry(self, ks: int) -> Callable:
        """Fill the table entry for key set ``ks`` (see Note [Dispatch table])."""
        if self._dirty:
            self._recompute_mask()
            ks &= self.mask
            hit = self.table.get(ks)
            if hit is not None:
                return hit
        backends = ks & BACKEND_MASK
        mixed = backends & (backends - 1)
        k = ks
        while True:
            key = highest_key(k)
            if key is None:
                composite = None if backends else self._keyless_composite()
                if composite is None:
                    raise _missing_error(self, ks, None)
                kernel, key = composite
                entry = _make_entry(self, kernel, k, key)
                self.table[ks] = entry
                return entry
            kernel, rung = self.resolve(key)
            if kernel is None:
                raise _missing_error(self, ks, key)
            if kernel.is_fallthrough:
                k = remove_key(k, key)
                continue
            if mixed and key.value & PER_BACKEND_MASK:
                # tensors of two backends at a per-backend key (Note [Mixed devices])
                entry = _mixed_devices_entry(self, backends)
                self.table[ks] = entry
                return entry
            entry = _make_entry(self, kernel, k, key)
            gate = kernel.gate
            if gate is not None:  # Note [Gated kernels]
                below = self._entry(remove_key(k, key))
                _GATED[(self, ks)] = (gate, entry, below)
                if not gate[0]:
                    entry = below
            self.table[ks] = entry
            return entry

    # Note [Calls without a key]
    # ~~~~~~~~~~~~~~~~~~~~~~~~~~~
    # A call whose Tensors are all in lists, every list empty (``md.broadcast_arrays()``),
    # has no backend and so no runtime key.  PyTorch dispatches such a call on its Undefined
    # key, which the composite kernels serve: ``torch.broadcast_tensors()`` runs its
    # CompositeImplicitAutograd decomposition and returns ``()``, while ``torch.cat([])``,
    # which has backend kernels only, raises.  The same here: the op's
    # CompositeImplicitAutograd kernel, else its CompositeExplicitAutograd one, serves the
    # key set without a backend; an op with neither raises ``_missing_error``'s "expected a
    # non-empty list".  A decomposition that needs a Tensor raises its own error.
    def _keyless_composite(self) -> tuple[Kernel, DispatchKey] | None:
        """The composite kernel that serves a call without a backend, and its alias key
        (Note [Calls without a key])."""
        for alias in (DispatchKey.CompositeImplicitAutograd,
                      DispatchKey.CompositeExplicitAutograd):
            stack = self._kernels.get(alias)
            if stack:
                return stack[-1], alias
        return None

    def _entry(self, ks: int) -> Callable:
        """The table entry for the (masked) key set ``ks``, filled on a miss."""
        entry = self.table.get(ks)
        return entry if entry is not None else self.fill_entry(ks)

    # -- the precedence ladder ------------------------------------------------------------
    def resolve(self, key: DispatchKey) -> tuple[Kernel | None, str]:
        """The kernel (and its rung) that serves runtime key ``key``; cached."""
        hit = self._resolved.get(key)
        if hit is None:
            hit = self._resolved[key] = self._compute_kernel(key)
        return hit

    def _compute_kernel(self, key: DispatchKey) -> tuple[Kernel | None, str]:
        D = DispatchKey
        kernels = self._kernels
        backend = key.backend
        func = key.functionality
        is_backend_key = func in ("Dense", "Sparse")
        # 1. A kernel registered directly for this runtime key.
        if key in kernels:
            return kernels[key][-1], RUNG_DIRECT
        # 2. CompositeExplicitAutograd serves every backend key; then ArrayAPI serves the
        #    Dense key of each backend that declares it speaks the Array API standard.
        if is_backend_key:
            if D.CompositeExplicitAutograd in kernels:
                return kernels[D.CompositeExplicitAutograd][-1], RUNG_CEA
            if (func == "Dense" and D.ArrayAPI in kernels
                    and backend in dispatcher.array_api_backends):
                return kernels[D.ArrayAPI][-1], RUNG_ARRAY_API
        # 3. CompositeImplicitAutograd serves backend keys, Functionalize and Python -- and
        #    autograd keys only while the backend (or CEA) has no kernel of its own, since a
        #    backend kernel needs a real derivative rather than its decomposition's.
        if D.CompositeImplicitAutograd in kernels:
            if is_backend_key or func in ("Functionalize", "Python"):
                return kernels[D.CompositeImplicitAutograd][-1], RUNG_CIA
            if func == "AutogradFunctionality" and not self._has_backend_kernel(backend):
                return kernels[D.CompositeImplicitAutograd][-1], RUNG_CIA
        # 4. The Autograd alias kernel serves every autograd key.
        if func == "AutogradFunctionality" and D.Autograd in kernels:
            return kernels[D.Autograd][-1], RUNG_AUTOGRAD_ALIAS
        # 5. The backend fallback registered for this key (boxed kernel or fallthrough).
        fallback = dispatcher.fallbacks.get(key)
        if fallback:
            return fallback[-1], RUNG_FALLBACK
        # 6. Missing: calling with this key raises NotImplementedError.
        return None, RUNG_MISSING

    def _has_backend_kernel(self, backend: str) -> bool:
        D = DispatchKey
        k = self._kernels
        return (
            D[backend] in k
            or D["Sparse" + backend] in k
            or D.CompositeExplicitAutograd in k
            or (D.ArrayAPI in k and backend in dispatcher.array_api_backends)
        )

    def _recompute_mask(self) -> None:
        """Drop fallthrough functionalities from the op's mask (Note [Dispatch table])."""
        mask = FULL
        for fname, per_backend in FUNCTIONALITIES:
            if per_backend:
                continue
            kernel, _ = self.resolve(DispatchKey[fname])
            if kernel is not None and kernel.is_fallthrough:
                mask &= ~(1 << FUNC_BIT[fname])
        self.mask = mask
        self._dirty = False

    def _invalidate(self) -> None:
        dispatcher.generation += 1
        self._resolved.clear()
        self.table.clear()
        self.mask = FULL
        self._dirty = True

    # -- registration (used by md.library) ------------------------------------------------
    def register_kernel(self, kernel: Kernel) -> None:
        stack = self._kernels.setdefault(kernel.key, [])
        users = [i for i, k in enumerate(stack) if k.user]
        if users and not kernel.user:
            # a backend that loads after a user registered a kernel for its key stays
            # below that kernel (Note [Backend kernels] in mdtensor/library.py)
            stack.insert(users[0], kernel)
        else:
            stack.append(kernel)
        self._invalidate()

    def remove_kernel(self, kernel: Kernel) -> None:
        stack = self._kernels.get(kernel.key, [])
        if kernel in stack:
            stack.remove(kernel)
            if not stack:
                del self._kernels[kernel.key]
            self._invalidate()

    def has_kernel_for(self, key: DispatchKey) -> bool:
        return key in self._kernels

    def kernels_for(self, key: DispatchKey) -> tuple[Kernel, ...]:
        """The kernels registered for ``key``, the serving one last."""
        return tuple(self._kernels.get(key, ()))

    def registered(self) -> dict[DispatchKey, tuple[Kernel, ...]]:
        """Every registration: key -> its kernels, the serving one last (a copy)."""
        return {key: tuple(stack) for key, stack in self._kernels.items()}

    def computed_table(self) -> dict[DispatchKey, tuple[Kernel | None, str]]:
        """Runtime key -> (kernel, rung) for every runtime key (for ``dump``)."""
        return {key: self.resolve(key) for key in RUNTIME_KEYS}


def _ks_of(op, name, value) -> int:
    ks = getattr(value, "_ks", None)
    if ks is None:
        raise TypeError(
            f"{op.name}: argument '{name}' must be a Tensor, got {type(value).__name__}"
        )
    return ks


# Note [Gated kernels]
# ~~~~~~~~~~~~~~~~~~~~
# A kernel with a ``gate`` runs only while ``gate[0]`` is set; otherwise its key falls
# through.  A table entry that reaches it is made twice -- the kernel's entry and the entry
# of the key set below it -- and the table holds the one the gate selects; whoever flips
# the gate calls ``flip_gates``, which swaps the entries made so far (only those: a handful
# of ops per program) instead of clearing every table.  Calls pay nothing for the gate.
# Functionalize's kernel for non-mutating ops is gated on a ``functionalize()`` transform
# running, so tensors of immutable backends fall through it at no cost outside one.

#: (op, table key set) -> (gate, active entry, entry below): the table entries made by
#: gated kernels (stale ones, whose table was cleared since, are dropped by flip_gates)
_GATED: dict = {}


def flip_gates(gate: list) -> None:
    """Point every table entry made by a kernel gated on ``gate`` at what ``gate[0]``
    selects now (Note [Gated kernels])."""
    on = bool(gate[0])
    dispatcher.generation += 1
    for (op, ks), (g, active, below) in list(_GATED.items()):
        if g is not gate:
            continue
        current = op.table.get(ks)
        if current is not active and current is not below:
            del _GATED[(op, ks)]  # the table was cleared since: the next miss remakes it
            continue
        op.table[ks] = active if on else below


def _make_entry(op: OpOverload, kernel: Kernel, ks: int, key: DispatchKey) -> Callable:
    """Wrap a kernel into a table entry for key set ``ks`` (dispatched as ``key``)."""
    fn = kernel.fn
    if kernel.factory:
        entry = _wrapper_entry(op, kernel, remove_key(ks, key))
    elif kernel.boxed:
        def entry(*args, **kwargs):
            return fn(op, ks, args, kwargs)
    elif kernel.with_keyset:
        entry = functools.partial(fn, ks)
    else:
        entry = fn
    if kernel.user:
        entry = checked(op, kernel, entry)
    if dispatcher.trace:
        entry = _traced(op, kernel, entry, ks, key)
    return entry


# Note [Wrapper kernels]
# ~~~~~~~~~~~~~~~~~~~~~~
# ADInplaceOrView's kernels only wrap the entry below their key: bump version counters
# after it, or record view metadata on its result; the Autograd kernel of a functional op
# calls it and records a node.  Looking that entry up on every call --
# take the key set, mask it, probe the table -- cost as much as the wrapping itself, and
# the answer never changes: the entry below lives in the same table, and anything that
# could change it (a registration, a mode or trace toggled) clears the whole table, this
# entry included.  So such a kernel is a *factory* (``Kernel(factory=True)``): when its
# entry is made, ``_wrapper_entry`` resolves the entry below once and passes it in.  One
# exception: a gated entry below (Note [Gated kernels]) is swapped in place when a
# transform starts or ends, so over it the factory gets a function that looks it up per
# call.  Over a leaf, ADInplaceOrView's entry is a leaf too (``Kernel(leaf=True)``: it runs
# no further dispatch), so an Autograd kernel may call ``x[1:3]``'s entry without its
# guard; the Autograd kernel picks, once, between calling the entry below as it is (a leaf)
# and through its exclude guard.


def _wrapper_entry(op: OpOverload, kernel: Kernel, below_ks: int) -> Callable:
    """The table entry of a wrapper kernel: its factory applied to the entry below."""
    below = op._entry(below_ks)
    if (op, below_ks) in _GATED:  # swapped in place by flip_gates: look it up per call
        return kernel.fn(lambda *args, **kwargs: op._entry(below_ks)(*args, **kwargs))
    entry = kernel.fn(below)
    if kernel.leaf and below in LEAF_KERNELS:
        LEAF_KERNELS.add(entry)
    return entry


def _traced(op, kernel, entry, ks, key):
    label = f"{op.name}  {DispatchKeySet(ks)!r}  -> {key.display_name()}  [{kernel.name}]"

    def traced(*args, **kwargs):
        indent = "  " * dispatcher.trace_depth
        print(f"[dispatch] {indent}{label}", file=sys.stderr)
        dispatcher.trace_depth += 1
        try:
            return entry(*args, **kwargs)
        finally:
            dispatcher.trace_depth -= 1

    return traced


def _mixed_devices_entry(op: OpOverload, backends: int) -> Callable:
    names = []
    for i, comp in enumerate(BACKEND_COMPONENTS):
        if backends & (1 << i):
            names.append(_device_type_of(comp))
    message = (f"{op.name}: expected all tensors to be on the same device, but found "
               f"tensors on {' and '.join(names)}")

    def mixed_devices(*args, **kwargs):
        raise ValueError(message)

    return mixed_devices


def _device_type_of(component: str) -> str:
    return dispatcher.device_types.get(component, component)


def _short_name(op: OpOverload) -> str:
    """``'add.Tensor'`` (the name ``Library.impl`` takes)."""
    ov = op.schema.overload_name
    return op.schema.name + ("." + ov if ov else "")


def _missing_error(op: OpOverload, ks: int, key: DispatchKey | None) -> Exception:
    tensor_args = [a for a in op.schema.arguments if a.type.is_tensor_like]
    if (key is None and not ks & BACKEND_MASK and tensor_args
            and all(a.type.is_tensor_list for a in tensor_args)):
        # every Tensor argument is a list, and none held a tensor: md.cat([]), as PyTorch
        names = ", ".join(f"'{a.name}'" for a in tensor_args)
        return ValueError(f"{op.name}: expected a non-empty list of Tensors for {names}")
    have = sorted({k.name for k in op._kernels})
    fallbacks = sorted({(k.functionality or k.name).replace("AutogradFunctionality", "Autograd")
                        for k, stack in dispatcher.fallbacks.items()
                        if stack and not stack[-1].is_fallthrough})
    if key is None:
        needed = f"the key set {DispatchKeySet(ks)!r} names no runtime key"
        if not ks & BACKEND_MASK and ks & PER_BACKEND_MASK:
            needed += " (no tensor argument gave a backend: pass a tensor or device=)"
    else:
        needed = f"it needed a kernel for {key.display_name()}"
    return NotImplementedError(
        f"{op.name}: no kernel for this call; {needed}. "
        f"Kernels are registered for: {', '.join(have) or 'nothing'} "
        f"(fallbacks: {', '.join(fallbacks) or 'none'}). "
        f"Register one with md.library.Library('{op.schema.namespace}', 'IMPL')"
        f".impl('{_short_name(op)}'"
        f", fn, '{key.display_name() if key else 'CPU'}')."
    )


def register_fallback(kernel: Kernel) -> None:
    for key in runtime_keys(kernel.key):
        dispatcher.fallbacks.setdefault(key, []).append(kernel)
    dispatcher.invalidate_all()


def remove_fallback(kernel: Kernel) -> None:
    for key in runtime_keys(kernel.key):
        stack = dispatcher.fallbacks.get(key, [])
        if kernel in stack:
            stack.remove(kernel)
    dispatcher.invalidate_all()
