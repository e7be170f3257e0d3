"""The Functionalize layer: mutations become functional ops plus a write-back.

Note [Functionalize]
~~~~~~~~~~~~~~~~~~~~
Two kinds of tensors carry the Functionalize key, and the layer treats both the same way:
a *mutating* op (in-place ``add_``, ``out=``, ``x[k] = v``, ``copy_``) runs its functional
counterpart (``add``, ``index_put``, ``copy``) and the result replaces the mutated tensor's
value; if the mutated tensor is a view, the new value is scattered into its base, and every
other live view of that base is regenerated from the new base.  Aliasing is therefore exact
although no buffer is ever written.

* **Tensors of immutable backends** (JAX) carry the key on every tensor.  Their views are
  recorded by ADInplaceOrView (``ViewInfo``: root base + replay) and registered on the
  base's version counter (``track_view``); values are replaced below the dispatcher, on raw
  arrays.  Non-mutating ops fall through the layer (a gated kernel: Note [Gated kernels] in
  mdtensor/dispatch/operators.py).
* **Functional wrappers** (``FunctionalTensor``), made by ``md.func.functionalize(f)``: a
  wrapper holds an ordinary inner tensor, and every op on wrappers reaches this layer, which
  runs the op (or its functional form) on the inner tensors through a full dispatch -- so
  autograd records on the inner tensors and a mode or tracer below sees only functional ops.
  A wrapper view remembers how it was made from its root base (``_steps``), and is replayed
  with the view op, or with its ``_copy`` twin under ``remove="mutations_and_views"``.

The inverse of a view (how to scatter a view's new value into its base) is computed once per
view, generically: replaying the view on ``arange(base.numel())`` tells which base element
each view element is (``_index_key``); the write-back is ``index_put(base, key, value)``.
Every view op of the catalogue selects elements (slices, transposes, expand, ...), so this
covers them all; a view that is not a selection would need its own inverse.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar

import numpy as np

from mdtensor._dtypes import can_cast
from mdtensor._pytree import tree_map
from mdtensor.dispatch.kernel import Kernel
from mdtensor.dispatch.keys import AFTER_FUNCTIONALIZE, AFTER_PYTHON, DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.namespaces import lookup
from mdtensor.dispatch.operators import dispatcher, flip_gates, register_fallback
from mdtensor.dispatch.tls import ExcludeGuard, IncludeGuard, RestoreGuard, dispatch_tls
from mdtensor.tensors.device import Device
from mdtensor.tensors.tensor import Tensor

__all__ = ["FunctionalTensor", "functionalize", "install", "track_view", "use_catalogue"]

_FZ = DispatchKey.Functionalize.value
#: every functionality from Python up: a raw replay runs only the backend kernels
_ABOVE_BACKEND = ~AFTER_PYTHON & ((1 << 64) - 1)

# Note [Transforms in other threads]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Whether a ``functionalize()`` transform runs is per thread/context (``_transforms``, a
# ContextVar): the layer's kernel wraps factory results and sees captured tensors only for the
# context running the transform.  The gate of its table entries (Note [Gated kernels] in
# mdtensor/dispatch/operators.py) is process-wide -- the tables are -- so it counts the
# transforms running in any thread (``_live``, changed under ``_gate_lock``); while it is open,
# ops of other threads reach the kernel too, find no transform in their own context and go on as
# plain calls.  (Before, the kernel read the process-wide count itself, so a transform in one
# thread made JAX tensors in another come out as FunctionalTensors.)

#: number of functionalize() transforms running in any thread: the gate (while 0, ops on
#: plain tensors of immutable backends skip the layer's kernel)
_live = [0]
_gate_lock = threading.Lock()

#: number of functionalize() transforms running in this thread/context
_transforms: ContextVar[int] = ContextVar("mdtensor_functionalize_depth", default=0)

#: whether wrappers made now replace views by their _copy ops (the innermost transform's
#: ``remove=``)
_remove_views: ContextVar[bool] = ContextVar("mdtensor_functionalize_remove_views",
                                             default=False)

_functional_cache: dict = {}


def _without_transform_include() -> RestoreGuard:
    """A guard dropping the transform's include of Functionalize: inner tensors, factory
    results being wrapped and the backward pass run unfunctionalized (only wrappers and
    tensors of immutable backends carry the key themselves)."""
    inc, keep = dispatch_tls.get()
    return RestoreGuard((inc & ~_FZ, keep))


def _arguments(schema) -> tuple:
    """What a mutating overload and its functional counterpart have in common: the names
    and types of the arguments, without ``out=`` and alias annotations (a structured op's
    variants move arguments behind ``*``, so that is left out too)."""
    return tuple((a.name, a.type.base, a.type.optional, a.type.is_list, a.type.elem_optional)
                 for a in schema.arguments
                 if not (schema.is_out and a.kwarg_only and a.is_mutable))


def _functional_of(op):
    """The functional overload of a mutating ``op`` (``add_.Tensor`` -> ``add.Tensor``,
    ``add.out`` -> ``add.Tensor``, ``clamp.out`` -> ``clamp``): among the declaration's
    functional overloads, the one taking the same arguments (its overload name decides
    between several); by overload name alone where none does."""
    hit = _functional_cache.get(op)
    if hit is not None:
        return hit
    schema = op.schema
    decl = op.decl
    candidates = list(decl.functional) if decl is not None else []
    want = schema.overload_name
    if schema.is_out:
        want = "" if want == "out" else want[:-4] if want.endswith("_out") else want
        if want == "" and any(c.schema.overload_name == "Tensor" for c in candidates):
            want = "Tensor"
    arguments = _arguments(schema)
    same = [c for c in candidates if _arguments(c.schema) == arguments]
    if same:
        candidates = same
    best = next((c for c in candidates if c.schema.overload_name == want),
                same[0] if same else None)
    if best is None and schema.is_inplace:
        try:
            packet = lookup(f"{schema.namespace}::{schema.name[:-1]}")
            best = next((o for o in packet.all_overloads()
                         if o.overload_name == (want or "default")), None)
        except ValueError:
            best = None
    if best is None:
        raise NotImplementedError(
            f"{op.name}: functionalization needs a functional counterpart of this mutating "
            f"op, and none was found")
    _functional_cache[op] = best
    return best


# Note [What Functionalize takes from the catalogue]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Writing a new value back, this layer applies what the catalogue's own kernels apply: the
# in-place and out= checks (PyTorch's shape, casting and resize rules), the gather and the
# scatter through index arrays of the indexing kernels (Note [Writes through index arrays]
# in ops/indexing.py), the ``_copy`` twin of each view op (ops/view_copy.py), and the
# functional form of a mutating op whose functional op is itself a composite of the
# mutation (``masked_fill`` is ``clone`` + ``masked_fill_``).  The catalogue sits above the
# layers and hands them over when it is imported (``use_catalogue``, in ops/__init__.py):
# this layer never imports it.


class _CatalogueHelpers:
    """What Functionalize uses of the op catalogue (Note [What Functionalize takes from the
    catalogue]); filled by ``use_catalogue``."""

    #: ``(name, tensor, array, backend)``: raise if the array cannot be written in place
    check_inplace_result: Callable
    #: ``(name, out, shape)``: PyTorch's warning for an out= tensor resized to ``shape``
    warn_if_resized: Callable
    #: ``(device, array, index arrays)``: the elements the index arrays select
    gather_at: Callable
    #: ``(device, array, index arrays, value, *, check)``: a new array with them written
    scatter_set: Callable
    #: view packet name -> the name of its ``_copy`` twin
    view_copies: dict
    #: mutating packet name -> its functional form, ``(*args, **kwargs) -> value``
    rewrites: dict


_from_catalogue = _CatalogueHelpers()


def use_catalogue(**helpers) -> None:
    """Hand this layer the catalogue's helpers (the names of ``_CatalogueHelpers``)."""
    for name, value in helpers.items():
        if name not in _CatalogueHelpers.__annotations__:
            raise TypeError(f"use_catalogue: unknown helper {name!r}")
        setattr(_from_catalogue, name, value)


def _mutated_and_value(op, call, args, kwargs):
    """Run a mutating ``op`` functionally with ``call(functional_op, args, kwargs)``;
    return (the mutated argument, its new value, whether it was written in place)."""
    schema = op.schema
    if schema.is_out:
        kwargs = dict(kwargs)
        out = kwargs.pop("out")
        return out, call(_functional_of(op), args, kwargs), False
    if not schema.is_inplace:
        raise NotImplementedError(
            f"{op.name}: functionalization handles in-place ops (self mutated) and out= "
            f"ops; this op mutates other arguments")
    rewrite = _from_catalogue.rewrites.get(schema.name)
    if rewrite is not None:
        return args[0], rewrite(*args, **kwargs), True
    return args[0], call(_functional_of(op), args, kwargs), True


def _check_new_value(op, t, value, inplace: bool) -> None:
    """PyTorch's in-place and out= rules (shape and casting; the warning for an out=
    tensor with elements that will be resized), before anything is written."""
    if inplace:
        _from_catalogue.check_inplace_result(op.name, t, value._data, t._device.backend)
    else:
        if not can_cast(value.dtype, t.dtype):
            raise RuntimeError(f"{op.name}: result type {value.dtype.name} can't be cast to "
                               f"the desired output type {t.dtype.name}")
        if tuple(value.shape) != tuple(t.shape):
            _from_catalogue.warn_if_resized(op.name, t, value.shape)


# ---------------------------------------------------------------------------------------
# The inverse of a view: which base elements a view selects


def _raw_index(base_shape, steps) -> tuple:
    """NumPy index arrays (one per base dimension, each of the view's shape) naming, for
    each element of the view made by ``steps(b)``, the base element it aliases."""
    n = 1
    for s in base_shape:
        n *= s
    ids = Device("cpu").wrap(np.arange(n, dtype=np.int64).reshape(base_shape))
    with ExcludeGuard(_ABOVE_BACKEND):
        flat = np.asarray(steps(ids)._data)
    return np.unravel_index(flat, base_shape)


# ---------------------------------------------------------------------------------------
# Immutable backends: plain tensors with the key


def track_view(base: Tensor, view: Tensor) -> None:
    """Called by ADInplaceOrView for views of Functionalize tensors: register ``view`` with
    its base so a mutation of any alias regenerates it."""
    if isinstance(base, FunctionalTensor):
        return  # wrappers track their own views (below)
    vc = view._vc
    if vc.views is None:
        vc.views = []
    vc.views.append(weakref.ref(view))


def _live_views(vc):
    views = vc.views
    if not views:
        return []
    alive = [v for v in (r() for r in views) if v is not None]
    if len(alive) != len(views):
        vc.views = [weakref.ref(v) for v in alive]
    return alive


def _on_device(device, raw) -> tuple:
    """NumPy index arrays as arrays of ``device``'s backend."""
    return tuple(device.backend.asarray(k, index=device.index) for k in raw)


def _plain_key(t) -> tuple:
    info = t._view
    if info.index is None:
        info.index = _on_device(t._device, _raw_index(tuple(info.base._data.shape),
                                                      info.replay))
    return info.index


def _commit_plain(op, t: Tensor, value, inplace: bool) -> None:
    """``t`` takes ``value`` (a Tensor of the same backend); its aliases follow."""
    _check_new_value(op, t, value, inplace)
    xp = t._device.xp
    data = value._data
    if data.dtype != t._data.dtype:
        data = xp.astype(data, t._data.dtype)
    if tuple(data.shape) != tuple(t._data.shape):
        if inplace or t._view is not None:
            data = xp.broadcast_to(data, tuple(t._data.shape))
        # out= with a different shape on a base: resized (_check_new_value warned)
    info = t._view
    if info is None:
        base = t
        t._data = data
    elif info.base._data.ndim == 0:  # every element of a view of a 0-d base aliases it
        base = info.base
        if data.size:  # the last write wins, as in scatter_set
            base._data = xp.reshape(data, (-1,))[-1]
        t._data = data
    else:
        base = info.base
        base._data = _from_catalogue.scatter_set(t._device, base._data, _plain_key(t), data,
                                                 check=False)
        t._data = data
    scalar_base = base._data.ndim == 0
    for v in _live_views(base._vc) if base._vc is not None else ():
        if v is not t:
            v._data = xp.broadcast_to(base._data, tuple(v._data.shape)) if scalar_base \
                else _from_catalogue.gather_at(v._device, base._data, _plain_key(v))


def _plain_fallback(op, ks, args, kwargs):
    below = ks & AFTER_FUNCTIONALIZE
    if not op.schema.is_mutable:
        return op.redispatch(below, *args, **kwargs)
    if _transforms.get():  # Note [Transforms in other threads]
        target = kwargs.get("out") if op.schema.is_out else args[0]
        if isinstance(target, Tensor) and not target._ks & _FZ:
            # A tensor captured by a functionalize()d function (the key came from the
            # thread's include set): mutated for real, as without the transform.
            return op.redispatch(below, *args, **kwargs)

    def call(f, a, k):
        return f.redispatch(below, *a, **k)

    target, value, inplace = _mutated_and_value(op, call, args, kwargs)
    _commit_plain(op, target, value, inplace)
    return target


# ---------------------------------------------------------------------------------------
# Functional wrappers (md.func.functionalize)


class _Storage:
    """What a root wrapper and its views share: the root and the live views."""

    __slots__ = ("base", "views", "remove_views")

    def __init__(self, base, remove_views: bool):
        self.base = base
        self.views: list = []
        self.remove_views = remove_views


class FunctionalTensor(Tensor):
    """A tensor inside ``md.func.functionalize``: an inner tensor that is never mutated
    (mutations replace it) and, for a view, how to make it from its root base."""

    __slots__ = ("_inner", "_storage", "_steps", "_index")

    def __repr__(self) -> str:
        return f"FunctionalTensor({self._inner!r})"

    # Autograd records on the inner tensors (Note [Functionalize]); a wrapper answers for
    # its inner tensor.
    @property
    def requires_grad(self) -> bool:
        return self._inner.requires_grad

    def requires_grad_(self, requires_grad: bool = True) -> FunctionalTensor:
        self._inner.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._inner.grad_fn

    @property
    def is_leaf(self) -> bool:
        return self._inner.is_leaf

    @property
    def grad(self):
        return self._inner.grad

    def detach(self) -> FunctionalTensor:
        """A wrapper of the detached inner tensor (``Tensor.detach`` would give a plain
        tensor around the wrapper's array, outside the transform).  Limit: it is a new
        value, not an alias -- an in-place change of it does not reach this tensor."""
        return _new_wrapper(self._inner.detach(), None, ())

    def _recorded_on(self) -> Tensor:
        """What ``md.autograd.grad`` differentiates (autograd records on the inner
        tensors)."""
        return self._inner

    def backward(self, gradient=None, retain_graph=None, create_graph=False) -> None:
        # The backward ops run on the inner tensors, outside the transform's include (the
        # engine's own buffers are not functionalized).
        with _without_transform_include():
            self._inner.backward(_unwrap(gradient), retain_graph, create_graph)


def _new_wrapper(inner: Tensor, storage: _Storage | None, steps: tuple) -> FunctionalTensor:
    w = object.__new__(FunctionalTensor)
    w._inner = inner
    w._data = inner._data
    w._device = inner._device
    w._ks = inner._device.ks | _FZ
    w._vc = None
    w._view = None
    w._ag = None
    w._steps = steps
    w._index = None
    if storage is None:
        storage = _Storage(w, _remove_views.get())
    else:
        storage.views.append(weakref.ref(w))
    w._storage = storage
    return w


def _unwrap(v):
    if isinstance(v, FunctionalTensor):
        return v._inner
    if isinstance(v, (list, tuple)) and any(isinstance(x, FunctionalTensor) for x in v):
        return type(v)(_unwrap(x) for x in v)
    return v


def _wrappers_in(args, kwargs):
    """The FunctionalTensors among the arguments (and inside Tensor[] arguments)."""
    for v in (*args, *kwargs.values()):
        if isinstance(v, FunctionalTensor):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (x for x in v if isinstance(x, FunctionalTensor))


def _apply_steps(steps, x, copies: bool):
    """Replay view ``steps`` on ``x`` -- with the ``_copy`` twins when ``copies``."""
    for op, rest, kwargs, j in steps:
        if copies:
            copies = _from_catalogue.view_copies
            op = getattr(lookup(f"aten::{copies[op.schema.name]}"), op.overload_name)
        r = op(x, *rest, **kwargs)
        x = r if j is None else r[j]
    return x


def _wrapper_key(w) -> tuple:
    """The view's base indices as tensors of the inner device (for ``index_put``)."""
    if w._index is None:
        steps = w._steps
        w._index = _raw_index(tuple(w._storage.base._inner.shape),
                              lambda b: _apply_steps(steps, b, False))
    dev = w._inner._device
    return tuple(dev.wrap(k) for k in _on_device(dev, w._index))


def _commit_wrapper(op, w: FunctionalTensor, value: Tensor, inplace: bool) -> None:
    _check_new_value(op, w, value, inplace)
    if value.dtype != w.dtype:
        value = aten.astype(value, w.dtype)
    if tuple(value.shape) != tuple(w.shape) and (inplace or w._steps):
        value = aten.broadcast_to(value, tuple(w.shape))
    storage = w._storage
    base = storage.base
    if w._steps:
        base._inner = aten.index_put(base._inner, _wrapper_key(w), value)
        base._data = base._inner._data
    else:
        base = w
    w._inner = value
    w._data = value._data
    alive = []
    for r in storage.views:
        v = r()
        if v is None:
            continue
        alive.append(r)
        if v is not w:
            v._inner = _apply_steps(v._steps, base._inner, storage.remove_views)
            v._data = v._inner._data
    storage.views = alive


def _wrap_result(r, inputs):
    if isinstance(r, Tensor):
        for w in inputs:
            if r is w._inner:
                return w
        return _new_wrapper(r, None, ())
    if isinstance(r, (list, tuple)):
        return type(r)(_wrap_result(x, inputs) for x in r)
    return r


def _wrapper_fallback(op, args, kwargs):
    with _without_transform_include():
        return _on_inner(op, args, kwargs)


def _on_inner(op, args, kwargs):
    schema = op.schema
    inputs = list(_wrappers_in(args, kwargs))
    uargs = [_unwrap(a) for a in args]
    ukwargs = {k: _unwrap(v) for k, v in kwargs.items()}

    if schema.is_mutable:
        target = kwargs["out"] if schema.is_out else args[0]
        if not isinstance(target, FunctionalTensor):
            raise RuntimeError(
                f"{op.name}: inside functionalize, a tensor that was neither an input nor "
                f"created inside the function (a captured {type(target).__name__}) cannot "
                f"be mutated")
        _, value, inplace = _mutated_and_value(
            op, lambda f, a, k: f(*a, **k), uargs, ukwargs)
        _commit_wrapper(op, target, value, inplace)
        return target

    if schema.is_view and isinstance(args[0], FunctionalTensor):
        src = args[0]
        storage = src._storage
        r = _apply_steps(((op, tuple(uargs[1:]), ukwargs, None),), src._inner,
                         storage.remove_views)
        if r is src._inner:
            return src
        rest = tuple(args[1:])
        if isinstance(r, Tensor):
            return _new_wrapper(r, storage, src._steps + ((op, rest, kwargs, None),))
        return type(r)(_new_wrapper(x, storage, src._steps + ((op, rest, kwargs, j),))
                       for j, x in enumerate(r))

    return _wrap_result(op(*uargs, **ukwargs), inputs)


# ---------------------------------------------------------------------------------------
# The layer's kernels


def _functionalize_fallback(op, ks, args, kwargs):
    if _transforms.get():  # Note [Transforms in other threads]
        if next(_wrappers_in(args, kwargs), None) is not None:
            return _wrapper_fallback(op, args, kwargs)
        if not any(a.type.is_tensor_like for a in op.schema.arguments):
            # A factory inside functionalize(f): its result is a functional tensor too (made
            # without the include, as BackendSelect calls the op again).
            with _without_transform_include():
                r = op.redispatch(ks & AFTER_FUNCTIONALIZE, *args, **kwargs)
            if isinstance(r, FunctionalTensor):
                # on JAX, whose device key set has Functionalize, BackendSelect's call of
                # the op came back here and wrapped it already (it was wrapped twice)
                return r
            return _wrap_result(r, ())
    return _plain_fallback(op, ks, args, kwargs)


def _enter():
    """Note [Transforms in other threads]: returns the token ``_exit`` restores."""
    token = _transforms.set(_transforms.get() + 1)
    with _gate_lock:
        _live[0] += 1
        if _live[0] == 1:
            flip_gates(_live)  # Note [Gated kernels] in mdtensor/dispatch/operators.py
    return token


def _exit(token) -> None:
    _transforms.reset(token)
    with _gate_lock:
        _live[0] -= 1
        if _live[0] == 0:
            flip_gates(_live)


def _register_for(op) -> None:
    """Non-mutating built-in ops fall through unless a transform runs (Note [Functionalize])."""
    # Built-in ops only: user ops keep exactly the registrations their library made (the
    # boxed fallback handles them).
    if op.schema.namespace != "aten":
        return
    kernels = op.registered()
    if (not op.schema.is_mutable and DispatchKey.Functionalize not in kernels
            # a CompositeImplicitAutograd op decomposes at this key (wrappers then see the
            # view ops it is made of, e.g. reshape's view)
            and DispatchKey.CompositeImplicitAutograd not in kernels):
        # Functionalize's kernel for non-mutating built-in ops falls through -- tensors of
        # immutable backends pay one check -- except while a ``functionalize()`` transform
        # runs, when it is the boxed fallback (wrappers need every op): Note [Gated
        # kernels] in mdtensor/dispatch/operators.py.
        op.register_kernel(Kernel(
            _functionalize_fallback, DispatchKey.Functionalize, boxed=True, gate=_live,
            name="fallthrough (functionalize while a transform runs)"))


def install() -> None:
    # Called once, by mdtensor.layers.install (which is guarded).
    register_fallback(Kernel(_functionalize_fallback, DispatchKey.Functionalize, boxed=True,
                             name="functionalize"))
    for op in list(dispatcher.overloads.values()):
        _register_for(op)
    dispatcher.define_hooks.append(_register_for)


# ---------------------------------------------------------------------------------------
# md.func.functionalize

_REMOVE = ("mutations", "mutations_and_views")


def functionalize(f, *, remove: str = "mutations"):
    """``f`` with every mutation replaced by functional ops (see docs/MODES.md).

    Inside, tensors are ``FunctionalTensor`` wrappers: in-place ops, ``out=`` and
    ``x[k] = v`` run their functional ops; mutations through a view reach the base and every
    other view; mutations of the inputs are written back into them (``copy_``) when ``f``
    returns.  ``remove="mutations_and_views"`` also replaces view ops by their ``_copy``
    twins, so traced programs hold no aliasing.  Outputs are plain tensors.
    """
    if remove not in _REMOVE:
        raise ValueError(f"functionalize: remove must be 'mutations' or "
                         f"'mutations_and_views', got {remove!r}")
    if not callable(f):
        raise TypeError(f"functionalize: expected a callable, got {type(f).__name__}")
    remove_views = remove == "mutations_and_views"

    @functools.wraps(f)
    def functionalized(*args, **kwargs):
        wrappers: list[tuple[Tensor, FunctionalTensor]] = []

        def wrap(v):
            if isinstance(v, Tensor) and not isinstance(v, FunctionalTensor):
                w = _new_wrapper(v, None, ())
                wrappers.append((v, w))
                return w
            return v

        depth = _enter()
        token = _remove_views.set(remove_views)
        try:
            with IncludeGuard(DispatchKey.Functionalize):
                wargs = tree_map(wrap, args)
                wkwargs = tree_map(wrap, kwargs)
                out = f(*wargs, **wkwargs)
            result = tree_map(_unwrap, out)
            for original, w in wrappers:
                if w._inner is not original:
                    original.copy_(w._inner)
        finally:
            _remove_views.reset(token)
            _exit(depth)
        return result

    return functionalized
