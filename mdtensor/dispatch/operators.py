"""Operators, overloads and the dispatcher.

Namespaces hold operator *packets* (``md.ops.aten.add``); a packet holds one *overload* per
schema (``md.ops.aten.add.Tensor``).  Calling a packet resolves the overload from the Python
argument types (see ``_frontend``); calling an overload computes the call's key set and runs
the kernel its dispatch table names for that key set.

Note [The hot path]
~~~~~~~~~~~~~~~~~~~
``OpOverload.__call__`` is a closure made once per overload (``_make_caller``).  For the
common case -- all Tensor arguments are required positional arguments, passed positionally
-- it does::

    def call(a=_NO, b=_NO, /, *args, **kwargs):   # add.Tensor: Tensors at 0 and 1
        inc, keep = dispatch_tls.get()
        ks = (a._ks | b._ks | inc) & keep & op.mask
        kernel = table.get(ks) or op.fill_entry(ks)
        return kernel(a, b)                         # (a, b, *args, **kwargs) if any

No binding, no string work, no exceptions when the arguments are Tensors.  Anything else (a
Tensor passed by keyword, ``Tensor?``/``Tensor[]`` arguments, a non-Tensor where a Tensor
is expected) takes ``_slow_keyset``, which walks the schema.

Above it, a packet call (``md.exp(x)``) finds the overload's caller in a dict keyed by the
argument types: for one positional argument the key is the type itself, for two a pair,
and the caller is then called with the arguments spread (``caller(a)``), not re-packed.

Note [Packet functions]
~~~~~~~~~~~~~~~~~~~~~~
Calling an instance of a Python class goes through its type's ``__call__`` slot: CPython
packs the arguments into a tuple and a dict and looks the method up, about 0.1 us more than
calling a function, which takes the vectorcall path.  So a packet's call is a closure,
``packet._call``, and that closure is what the namespaces hold: ``md.sum`` is
``md.ops.aten.sum._call`` (``md.sum.op`` is the packet, as ``torch.add`` is a builtin and
``torch.ops.aten.add`` the packet), and hot code inside mdtensor -- derivative formulas, the
engine, Functionalize -- calls ``from mdtensor.ops import aten_calls as aten``, the same
functions by name.  ``OpOverloadPacket.__call__`` forwards to ``_call`` for everyone else
(``md.ops.aten.sum(x)``).  Measured in one process on 8-element float32 tensors, packet
then function: ``md.exp(x)`` 1.21 -> 1.06 us, ``md.sum(x, axis=0)`` 2.47 -> 2.28 us.

Note [Dispatch table]
~~~~~~~~~~~~~~~~~~~~~
The table maps a *call key set* straight to a ready-to-call entry.  It is filled lazily: a
miss takes the highest runtime key of the set, resolves it through the precedence ladder
(``_resolve_key``, cached per runtime key), skips fallthrough kernels by removing their key
and trying again, and stores the first real kernel -- wrapped so that layer kernels receive
the key set (``with_keyset``) and boxed fallbacks receive ``(op, ks, args, kwargs)``.  Any
registration change clears every table it can affect.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any

from mdtensor.dispatch.keys import (
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
from mdtensor.dispatch.schema import FunctionSchema, parse_schema
from mdtensor.dispatch.tls import dispatch_tls

__all__ = [
    "Kernel",
    "OpNamespace",
    "OpOverload",
    "OpOverloadPacket",
    "fallthrough_kernel",
    "ops",
]


#: Kernel functions that compute on raw arrays and call no op (the catalogue's backend
#: kernels), and the table entries of passthrough kernels over them (``Kernel``).  A table
#: entry that *is* one of them runs no further dispatch, so a layer above may call it
#: without first changing the thread-local key state (the Autograd kernels skip their
#: exclude guard then; Note [Autograd kernels] in mdtensor/autograd).
LEAF_KERNELS: set = set()


# Note [Own code objects]
# ~~~~~~~~~~~~~~~~~~~~~~~
# CPython 3.11 specializes each instruction of a code object for what it has seen there: a
# call site for the one function it calls (CALL_PY_EXACT_ARGS checks the function's
# version), an attribute site for one type (LOAD_ATTR_SLOT checks the type's version).  A
# site that sees many functions or types misses, falls back to the generic instruction
# (``PyObject_GetAttr``, ``_PyType_Lookup``, ``_PyFunction_Vectorcall``) and, after enough
# misses, is respecialized for whatever comes next.  The hot path is made of closures
# built once per op -- the packet function, the overload's caller, the backend kernel, the
# Autograd kernel -- and every closure of one ``def`` shares that ``def``'s code object:
# ``kernel(a, b)`` in the caller, ``node.args = args`` in the Autograd kernel saw every
# op's kernel and every op's Node class, and missed on most calls.  ``own_code(fn)`` gives
# a closure a copy of its code object, so its sites see its own op only and stay
# specialized.  Measured on the 16-16-16-4 MLP training step (cachegrind, fixed hash
# seed, mean over three memory layouts, which move it by +-4%): 938K -> 908K instructions
# with the engine's ``type(node)`` tests; the 784-256-256-10 step went from 1.157x to
# 1.141x NumPy's.  A copy starts unspecialized: it warms up on its own op's calls.


def own_code(fn, name: str | None = None):
    """``fn`` with a code object of its own (Note [Own code objects]): the same closure,
    defaults and attributes; named ``name`` when given (``__name__`` and ``__qualname__``,
    as kernels are: ``"ufunc[aten::exp]"``)."""
    copy = type(fn)(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__,
                    fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__dict__.update(fn.__dict__)
    if name is not None:
        copy.__name__ = copy.__qualname__ = name
    return copy


def fallthrough_kernel(*args, **kwargs):
    """Marker kernel: the dispatcher skips a key whose kernel is this, at no per-call cost."""
    raise AssertionError("fallthrough_kernel is a marker and is never called")


class Kernel:
    """One registered kernel.

    Attributes:
        fn: the callable.
        key: the key it was registered for (a runtime key or an alias key).
        with_keyset: the kernel takes the call's int key set as its first argument.
        boxed: a fallback that takes ``(op, keyset, args, kwargs)``.
        origin: who registered it (``"mdtensor"`` for built-ins, else the Library/file).
        user: registered from user code (its results are checked against the schema).
        gate: a one-item list; while ``gate[0]`` is falsy the kernel falls through (Note
            [Gated kernels]).  None: always active.
        factory: ``fn`` is a factory, ``fn(below) -> entry``: a layer kernel that calls
            the table entry below its key -- ADInplaceOrView's and Autograd's kernels --
            gets that entry when its own is made, instead of looking it up on every call
            (Note [Wrapper kernels]).  With ``leaf`` (it calls nothing else, no op) its
            entry is a leaf when ``below`` is one.
    """

    __slots__ = ("fn", "key", "with_keyset", "boxed", "origin", "user", "name", "gate",
                 "factory", "leaf")

    def __init__(self, fn, key, *, with_keyset=False, boxed=False, origin="mdtensor",
                 user=False, name=None, leaf=False, gate=None, factory=False):
        self.fn = fn
        self.key = key
        self.with_keyset = with_keyset
        self.boxed = boxed
        self.origin = origin
        self.user = user
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.gate = gate
        self.factory = factory
        self.leaf = leaf and not (with_keyset or boxed or user)
        if self.leaf and not factory:
            LEAF_KERNELS.add(fn)

    @property
    def is_fallthrough(self) -> bool:
        return self.fn is fallthrough_kernel

    def __repr__(self) -> str:
        return f"<kernel {self.name} for {self.key.name} from {self.origin}>"


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
# Everything outside this module that registers kernels or reads an overload's table does
# it through the public methods and attributes that ``OpOverload`` and
# ``OpOverloadPacket`` document -- ``md.library``, the layers, the catalogue, the built-in
# backends and a third-party backend alike; no other module touches ``_kernels`` or
# ``_resolved`` (tests/test_structure.py greps for it).  The table API (``table``,
# ``mask``, ``fill_entry``) exists for callers that inline the dispatch (Note [Inline
# dispatch], Note [Inline operators] in ops/_methods.py): their four lines are
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
        self.fast_positions = _fast_tensor_positions(schema)
        self._caller = _make_caller(self)
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

    def __call__(self, /, *args, **kwargs):  # positional-only: a schema may name 'self'
        return self._caller(*args, **kwargs)

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
                raise _missing_error(self, ks, None)
            kernel, rung = self.resolve(key)
            if kernel is None:
                raise _missing_error(self, ks, key)
            if kernel.is_fallthrough:
                k = remove_key(k, key)
                continue
            if mixed and key.value & PER_BACKEND_MASK:
                # Note [Mixed devices]: tensors of two backends reached a per-backend key
                # (modes and other layers above may still handle them).  Every key set is
                # checked once, here, so calls on one device pay nothing for the check.
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


def _fast_tensor_positions(schema: FunctionSchema) -> tuple[int, ...] | None:
    """Positions of the Tensor arguments when the fast caller applies, else None.

    It applies when every Tensor-like argument is a plain, required, positional ``Tensor``
    (no ``Tensor?``, no ``Tensor[]``, no keyword-only Tensor such as ``out=``).
    """
    positions = []
    for i, a in enumerate(schema.arguments):
        if not a.type.is_tensor_like:
            continue
        if a.kwarg_only or a.type.is_tensor_list or a.type.optional or a.has_default:
            return None
        positions.append(i)
    if len(positions) > 3:
        return None
    return tuple(positions)


_NO = object()  # an argument the caller did not pass (see _make_caller)


# Note [Star calls]
# ~~~~~~~~~~~~~~~~~~
# Forwarding ``*args, **kwargs`` is the dearest thing a forwarding function does: the call
# ``f(a, *args, **kwargs)`` builds a fresh tuple and copies the dict (CALL_FUNCTION_EX), and
# the callee packs them again.  A forwarder that names the argument instead --
# ``def call(a, b=_NO, /, *args, **kwargs)`` calling ``kernel(a, b)`` -- costs 0.23 us
# against 0.56 us for the star form (CPython 3.11, same machine).  ``md.sum(x, 0)``,
# ``x[1:3]`` and ``x.transpose(0, 1)`` pass one argument after the Tensor through the
# caller, the generic kernel and the view kernel, so each names it.


def _make_caller(op: OpOverload) -> Callable:
    """Build the per-overload entry point (see Note [The hot path])."""
    tls_get = dispatch_tls.get
    table = op.table  # cleared in place on invalidation, never replaced
    miss = op.fill_entry
    slow = op._keyset_of
    pos = op.fast_positions

    # The leading Tensor parameters are positional-only (a schema argument may itself be
    # called ``a``); ``_NO`` marks one the caller did not pass, which the slow path sorts
    # out (a Tensor by keyword, too few arguments, a non-Tensor).
    params = op._schema.arguments

    def slow_call(head, args, kwargs):
        args = tuple(x for x in head if x is not _NO) + args
        if kwargs:
            # Positional parameters given by keyword go positionally, as PyTorch's argument
            # parser passes them (op(self=x, dim0=0, dim1=1)): kernels take them by position.
            moved = []
            for a in params[len(args):]:
                if a.kwarg_only or a.name not in kwargs:
                    break
                moved.append(a.name)
            if moved:
                kwargs = dict(kwargs)
                args += tuple(kwargs.pop(name) for name in moved)
        ks = slow(args, kwargs)
        kernel = table.get(ks)
        if kernel is None:
            kernel = miss(ks)
        return kernel(*args, **kwargs)

    if pos == (0,) and len(params) > 1 and not params[1].kwarg_only:
        # One more positional parameter (sum's axis, the index of x[1:3]): a named
        # parameter, so the commonest calls forward no *args (Note [Star calls]).
        def call(a=_NO, b=_NO, /, *args, **kwargs):
            inc, keep = tls_get()
            try:
                ks = (a._ks | inc) & keep & op.mask
            except AttributeError:
                return slow_call((a, b), args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            if b is _NO:
                return kernel(a, **kwargs) if kwargs else kernel(a)
            if args or kwargs:
                return kernel(a, b, *args, **kwargs)
            return kernel(a, b)
    elif pos == (0,):
        def call(a=_NO, /, *args, **kwargs):
            inc, keep = tls_get()
            try:
                ks = (a._ks | inc) & keep & op.mask
            except AttributeError:
                return slow_call((a,), args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            if args or kwargs:
                return kernel(a, *args, **kwargs)
            return kernel(a)
    elif pos == (0, 1):
        def call(a=_NO, b=_NO, /, *args, **kwargs):
            inc, keep = tls_get()
            try:
                ks = (a._ks | b._ks | inc) & keep & op.mask
            except AttributeError:
                return slow_call((a, b), args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            if args or kwargs:
                return kernel(a, b, *args, **kwargs)
            return kernel(a, b)
    elif pos == (0, 1, 2):
        def call(a=_NO, b=_NO, c=_NO, /, *args, **kwargs):
            inc, keep = tls_get()
            try:
                ks = (a._ks | b._ks | c._ks | inc) & keep & op.mask
            except AttributeError:
                return slow_call((a, b, c), args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            return kernel(a, b, c, *args, **kwargs)
    elif pos == ():  # no Tensor arguments (factories): the thread-local keys alone
        def call(*args, **kwargs):
            inc, keep = tls_get()
            ks = inc & keep & op.mask
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            return kernel(*args, **kwargs)
    else:
        def call(*args, **kwargs):
            ks = slow(args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            return kernel(*args, **kwargs)
    call = own_code(call)  # Note [Own code objects]
    call.__name__ = op._schema.name
    call.__qualname__ = op._name
    call.op = op  # for the Python operators' inline dispatch (ops/_methods.py)
    return call


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
        from mdtensor.dispatch.contracts import checked

        entry = checked(op, kernel, entry)
    if dispatcher.trace:
        entry = _traced(op, kernel, entry, ks, key)
    return entry


def _wrapper_entry(op: OpOverload, kernel: Kernel, below_ks: int) -> Callable:
    """The table entry of a wrapper kernel: its factory applied to the entry below."""
    below = op._entry(below_ks)
    if (op, below_ks) in _GATED:  # swapped in place by flip_gates: look it up per call
        return kernel.fn(lambda *args, **kwargs: op._entry(below_ks)(*args, **kwargs))
    entry = kernel.fn(below)
    if kernel.leaf and below in LEAF_KERNELS:
        LEAF_KERNELS.add(entry)
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
    if component == "Meta":
        return "meta"
    from mdtensor import backends

    for row in backends.available():
        if row["key"] == component:
            return row["device_type"]
    return component


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


# ---------------------------------------------------------------------------------------
# Packets and namespaces


class OpOverloadPacket:
    """All overloads of one operator name; calling it resolves the overload (``_frontend``).

    ``md.add.Tensor`` is the ``add.Tensor`` overload; ``md.add.overloads()`` lists names.
    """

    def __init__(self, namespace: str, name: str):
        self._qualified_name = f"{namespace}::{name}"
        self._namespace = namespace
        self._name = name
        self._overloads: dict[str, OpOverload] = {}
        self.resolution_cache: dict = {}
        #: called whenever the overloads change (what was resolved is void): the Python
        #: operators' inline dispatch (Note [Inline operators] in ops/_methods.py)
        self.on_change: list = []
        #: ``hook(key, caller)`` for each resolution ``_frontend.resolve`` caches (Note
        #: [Inline dispatch])
        self.on_resolve: list = []
        #: keys (Tensor type, keyword name, value type) whose keyword is the parameter right
        #: after the Tensor: the overload's caller, to call as ``caller(x, value)``
        self._by_position: dict = {}
        self._kwarg_aliases: dict[str, str] = {}
        #: the call as a plain function: ``md.<name>``, ``ops.aten_calls.<name>``
        self._call = _packet_function(self)
        self.__name__ = name
        self.__qualname__ = name
        self.__doc__ = None

    def __repr__(self) -> str:
        return f"<OpOverloadPacket {self._qualified_name}>"

    def overloads(self) -> list[str]:
        """The overload names (PyTorch's spelling): ``['Tensor', 'Scalar', 'out']``."""
        return list(self._overloads)

    def all_overloads(self) -> list[OpOverload]:
        """Every overload, in the order they were defined."""
        return list(self._overloads.values())

    @property
    def namespace(self) -> str:
        return self._namespace

    def add_kwarg_aliases(self, aliases: dict[str, str]) -> None:
        """Torch-style keyword spellings the overload resolution accepts, ``{"dim": "axis"}``."""
        self._kwarg_aliases.update(aliases)

    @property
    def function(self) -> Callable:
        """The call as a plain function (``md.<name>``, ``ops.aten_calls.<name>``)."""
        return self._call

    @property
    def __signature__(self):
        """The Python signature of the primary (first functional) overload's schema, so
        ``inspect.signature(md.sum)`` shows ``(self, axis=None, keepdims=False, *,
        dtype=None)``."""
        import inspect

        ops_ = [o for o in self._overloads.values()
                if not (o.schema.is_out or o.schema.is_inplace)] or list(self._overloads.values())
        schema = ops_[0].schema
        params = []
        for a in schema.arguments:
            kind = (inspect.Parameter.KEYWORD_ONLY if a.kwarg_only
                    else inspect.Parameter.POSITIONAL_OR_KEYWORD)
            default = inspect.Parameter.empty
            if a.has_default:
                d = a.default
                default = d if isinstance(d, (bool, int, float, str, type(None), list)) else None
            params.append(inspect.Parameter(a.name, kind, default=default))
        return inspect.Signature(params)

    @property
    def name(self) -> str:
        return self._qualified_name

    def __call__(self, /, *args, **kwargs):  # positional-only: a schema may name 'self'
        return self._call(*args, **kwargs)

    def _add_overload(self, op: OpOverload) -> None:
        name = op.schema.overload_name or "default"
        self._overloads[name] = op
        setattr(self, name, op)
        self.resolution_cache.clear()
        self._by_position.clear()
        self.__dict__.pop("_plum_signatures", None)  # _frontend's, built from the overloads
        for hook in self.on_change:
            hook()

    def _remove_overload(self, op: OpOverload) -> None:
        name = op.schema.overload_name or "default"
        self._overloads.pop(name, None)
        if getattr(self, name, None) is op:
            delattr(self, name)
        self.resolution_cache.clear()
        self._by_position.clear()
        self.__dict__.pop("_plum_signatures", None)
        for hook in self.on_change:
            hook()


# Note [Inline dispatch]
# ~~~~~~~~~~~~~~~~~~~~~~
# ``md.exp(x)`` and ``aten.mul(g, y)`` in a formula call a packet function with one Tensor
# or two.  Once ``_frontend.resolve`` has resolved the key ``Tensor`` or ``(Tensor,
# Tensor)`` (its ``on_resolve`` hooks), the packet function does the overload caller's
# four lines itself -- thread-local keys, key set, table entry, kernel -- instead of
# looking the caller up and calling it: one dict lookup and one frame less per op (0.2-0.3
# us on the 2-core EPYC).  A Tensor and one argument of another type (``sum(g, (0,))``,
# ``div(g, 8)``: a formula's reductions and scalars) are learned the same way, by that
# argument's type.  Only for the exact class Tensor (a subclass resolves as before)
# and an overload whose Tensors are its leading positional parameters; forgotten when the
# packet's overloads change (``on_change``).  The table is the overload's own, so every
# layer sees the call as before.  The Python operators do the same for ``a * b`` (Note
# [Inline operators] in ops/_methods.py).


def _packet_function(packet: OpOverloadPacket) -> Callable:
    """Build ``packet._call``: resolve the overload of a call, then call its caller.

    It is a plain function, not the packet's ``__call__``, so that the namespace functions
    (``md.exp``) and the formulas' ``aten`` calls are vectorcalls (Note [Packet
    functions]).
    """
    cache = packet.resolution_cache  # both cleared in place, never replaced
    by_position = packet._by_position

    tls_get = dispatch_tls.get
    # Note [Inline dispatch]: the overloads that one Tensor and a pair of Tensors resolved
    # to; the types stay None (matching no argument) until then, and again after the
    # packet's overloads change.
    one_type = one_op = one_table = None
    two_type = two_op = two_table = None
    # And the overloads of a Tensor and one argument of another type (``sum(g, (0,))``,
    # ``div(g, 8)``), by that type, {type: (op, table)}, or given by the keyword of the
    # next parameter (``sum(x, axis=0)``), by name and type, {name: {type: (op, table)}};
    # ``mixed_first`` is Tensor once one is known.
    mixed: dict = {}
    mixed_kw: dict = {}
    mixed_first = None

    def learn(key, caller):
        nonlocal one_type, one_op, one_table, two_type, two_op, two_table, mixed_first
        from mdtensor._tensor import Tensor

        op = getattr(caller, "op", None)
        if op is None:
            return
        if key is Tensor and op.fast_positions == (0,):
            one_op, one_table, one_type = op, op.table, Tensor
        elif key == (Tensor, Tensor) and op.fast_positions == (0, 1):
            two_op, two_table, two_type = op, op.table, Tensor
        elif (type(key) is tuple and key[0] is Tensor and op.fast_positions == (0,)
                and (len(key) == 2 or (len(key) == 3 and type(key[1]) is str))
                and isinstance(key[-1], type) and not issubclass(key[-1], Tensor)):
            # (Tensor, type) positionally, or (Tensor, name, type) for by_position's calls
            if len(key) == 2:
                mixed[key[1]] = (op, op.table)
            else:
                mixed_kw.setdefault(key[1], {})[key[2]] = (op, op.table)
            mixed_first = Tensor

    def forget():
        nonlocal one_type, one_op, one_table, two_type, two_op, two_table, mixed_first
        one_type = one_op = one_table = two_type = two_op = two_table = mixed_first = None
        mixed.clear()
        mixed_kw.clear()

    packet.on_change.append(forget)
    packet.on_resolve.append(learn)

    def call(a=_NO, b=_NO, /, *args, **kwargs):
        # Resolution keys (Note [The hot path]): one positional argument's key is its type
        # itself, no tuple; two positional arguments' a pair of types.  The common calls
        # then call the caller with the arguments named, not through *args (Note [Star
        # calls]).
        hit = None  # a Tensor and one other argument: Note [Inline dispatch]
        if kwargs:
            if b is _NO and a is not _NO and len(kwargs) == 1:  # md.sum(x, axis=0)
                # Keyword names and *types* matter too: f(x, other=2) and f(x, other=x)
                # differ.  Flat, and still unambiguous: argument types, then the names
                # (strings, never equal to a type), then as many value types as names.
                # ``kwargs`` is this call's own dict: popping its one item is the
                # cheapest way to read it (0.4K instructions against 1K for unpacking
                # ``items()``), and it is put back if the call goes on.
                k, b = kwargs.popitem()
                if type(a) is mixed_first:
                    by_type = mixed_kw.get(k)
                    if by_type is not None:
                        hit = by_type.get(type(b))
                if hit is None:
                    key = (type(a), k, type(b))
                    caller = by_position.get(key)  # the keyword is the next parameter
                    if caller is not None:
                        return caller(a, b)
                    kwargs[k] = b
                    caller = cache.get(key)
                    if caller is not None:
                        return caller(a, **kwargs)
                    b = _NO
        elif b is not _NO:
            if not args:
                if type(a) is two_type and type(b) is two_type:  # Note [Inline dispatch]
                    inc, keep = tls_get()
                    ks = (a._ks | b._ks | inc) & keep & two_op.mask
                    kernel = two_table.get(ks)
                    if kernel is None:
                        kernel = two_op.fill_entry(ks)
                    return kernel(a, b)
                if type(a) is mixed_first:
                    hit = mixed.get(type(b))
                if hit is None:
                    caller = cache.get((type(a), type(b)))
                    if caller is not None:
                        return caller(a, b)
            elif len(args) == 1:  # the backward ops' (grad, self, dim) and the like
                c = args[0]
                caller = cache.get((type(a), type(b), type(c)))
                if caller is not None:
                    return caller(a, b, c)
            elif len(args) == 2:
                c, d = args
                caller = cache.get((type(a), type(b), type(c), type(d)))
                if caller is not None:
                    return caller(a, b, c, d)
        elif type(a) is one_type:  # Note [Inline dispatch]
            inc, keep = tls_get()
            ks = (a._ks | inc) & keep & one_op.mask
            kernel = one_table.get(ks)
            if kernel is None:
                kernel = one_op.fill_entry(ks)
            return kernel(a)
        elif a is not _NO:
            caller = cache.get(type(a))
            if caller is not None:
                return caller(a)
        if hit is not None:  # (Tensor, value), positionally or by keyword
            op, table = hit
            inc, keep = tls_get()
            ks = (a._ks | inc) & keep & op.mask
            kernel = table.get(ks)
            if kernel is None:
                kernel = op.fill_entry(ks)
            return kernel(a, b)
        args = (a, b, *args) if b is not _NO else (a,) if a is not _NO else ()
        n = len(args)
        if kwargs:
            key = (*map(type, args), *kwargs, *map(type, kwargs.values()))
        else:
            key = type(a) if n == 1 else (type(a), type(b)) if n == 2 else tuple(map(type, args))
        caller = cache.get(key)
        if caller is None:
            from mdtensor.dispatch.resolution import resolve

            caller = resolve(packet, args, kwargs, key)
        return caller(*args, **kwargs)

    call = own_code(call)  # Note [Own code objects]
    call.__name__ = call.__qualname__ = packet._name
    call.op = packet
    call.__wrapped__ = packet  # inspect.signature(md.sum): the packet's __signature__
    return call


class OpCalls:
    """The operators of one namespace as plain functions: ``aten._calls.mul`` is
    ``md.ops.aten.mul._call`` (Note [Packet functions])."""

    def __init__(self, ns: str):
        self.__dict__["_calls_of"] = ns

    def __getattr__(self, name: str):
        raise AttributeError(f"operator '{self.__dict__['_calls_of']}::{name}' does not exist")


class OpNamespace:
    """``md.ops.<ns>``: attribute access gives the namespace's packets."""

    def __init__(self, name: str):
        self._ns = name
        self._packets: dict[str, OpOverloadPacket] = {}
        #: the same operators as plain functions (``aten._calls.mul(x, y)``), for hot code
        #: inside mdtensor (Note [Packet functions])
        self._calls = OpCalls(name)

    # Packets also live in the instance ``__dict__``: ``aten.mul`` is then an ordinary
    # attribute hit (a miss would raise AttributeError internally before ``__getattr__``,
    # which costs more than the op's whole dispatch).
    def _add_packet(self, packet: OpOverloadPacket) -> None:
        self._packets[packet._name] = packet
        self._calls.__dict__[packet._name] = packet._call
        if packet._name not in ("_ns", "_packets", "_calls"):
            self.__dict__[packet._name] = packet

    def _remove_packet(self, name: str) -> None:
        self._calls.__dict__.pop(name, None)
        if self._packets.pop(name, None) is not None and name not in ("_ns", "_packets",
                                                                      "_calls"):
            self.__dict__.pop(name, None)

    def __getattr__(self, name: str) -> OpOverloadPacket:
        try:
            return self.__dict__["_packets"][name]
        except KeyError:
            raise AttributeError(
                f"operator '{self.__dict__.get('_ns')}::{name}' does not exist"
            ) from None

    def __dir__(self):
        return sorted(self._packets)

    def __repr__(self) -> str:
        return f"<OpNamespace '{self._ns}' with {len(self._packets)} operators>"


class _Ops:
    """``md.ops``: ``md.ops.aten.add``, ``md.ops.mylib.foo``."""

    def __init__(self):
        self._namespaces: dict[str, OpNamespace] = {}

    def __getattr__(self, ns: str) -> OpNamespace:
        spaces = self.__dict__["_namespaces"]
        if ns not in spaces:
            if ns.startswith("__"):
                raise AttributeError(ns)
            spaces[ns] = OpNamespace(ns)
            self.__dict__[ns] = spaces[ns]  # later lookups are plain attribute hits
        return spaces[ns]

    def __dir__(self):
        return sorted(self._namespaces)


ops = _Ops()


def define(schema: str | FunctionSchema, *, tags=()) -> OpOverload:
    """Create the overload for ``schema`` (an error if it exists already)."""
    if isinstance(schema, str):
        schema = parse_schema(schema)
    full = schema.full_name
    if isinstance(tags, str):  # one tag, as PyTorch takes one Tag
        tags = (tags,)
    try:
        tags = frozenset(tags)
    except TypeError:
        raise TypeError(f"define {full}: tags must be a tag name or a sequence of them, got "
                        f"{type(tags).__name__}") from None
    if not all(isinstance(t, str) for t in tags):
        raise TypeError(f"define {full}: tags must be strings, got "
                        f"{sorted(type(t).__name__ for t in tags)}")
    if full in dispatcher.overloads:
        raise RuntimeError(f"operator {full} is already defined; use a new overload name")
    ns = getattr(ops, schema.namespace)
    packet = ns._packets.get(schema.name)
    if packet is None:
        packet = OpOverloadPacket(schema.namespace, schema.name)
        ns._add_packet(packet)
    op = OpOverload(schema, packet)
    op.tags = tags
    dispatcher.overloads[full] = op
    packet._add_overload(op)
    try:
        for hook in dispatcher.define_hooks:
            hook(op)
    except BaseException:
        undefine(op)  # a failed define leaves nothing behind
        raise
    return op


def undefine(op: OpOverload) -> None:
    """Remove an overload again (undoes ``define``)."""
    dispatcher.overloads.pop(op.name, None)
    packet = op._packet
    packet._remove_overload(op)
    if not packet._overloads:
        getattr(ops, op.schema.namespace)._remove_packet(op.schema.name)


def lookup(name: str) -> OpOverload | OpOverloadPacket:
    """``'aten::add.Tensor'`` -> overload; ``'aten::add'`` or ``'add'`` -> packet
    (``'aten::matmul.default'`` names the default overload)."""
    if "::" not in name:
        name = "aten::" + name
    ns, _, rest = name.partition("::")
    if "." in rest and name in dispatcher.overloads:
        return dispatcher.overloads[name]
    base, _, overload = rest.partition(".")
    packet = getattr(ops, ns)._packets.get(base)
    if packet is None:
        raise ValueError(f"no operator named {name!r}")
    if overload:
        try:
            return packet._overloads[overload]
        except KeyError:
            raise ValueError(
                f"operator {ns}::{base} has no overload {overload!r}; "
                f"it has {', '.join(packet._overloads)}"
            ) from None
    return packet


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
