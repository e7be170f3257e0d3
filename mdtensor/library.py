"""``md.library``: define ops, register kernels and fallbacks, inspect the dispatcher.

Mirrors ``torch.library``::

    lib = md.library.Library("mylib", "DEF")
    lib.define("foo(Tensor x, float eps=1e-05) -> Tensor")
    lib.impl("foo", foo_cpu, "CPU")
    md.ops.mylib.foo(x)

    @md.library.custom_op("mylib::scale", mutates_args=())
    def scale(x: md.Tensor, k: float) -> md.Tensor: ...

Every registration returns a handle that undoes it (``handle.remove()`` or ``with``);
destroying a Library undoes all of its registrations.  A handle keeps its library alive, so
``handle = md.library.Library("aten", "IMPL").impl(...)`` lasts as long as ``handle``
(dropping both undoes it, as in PyTorch, whose libraries deregister when collected).
Overriding a built-in kernel warns naming the old and the new kernel and takes effect (as in
PyTorch); registering the same (op, key) twice from user code is an error.
"""

from __future__ import annotations

import inspect as _inspect
import sys as _sys
import types as _types
import typing as _typing
import warnings as _warnings
import weakref as _weakref
from collections.abc import Callable, Sequence

from mdtensor import backends
from mdtensor.dispatch.kernel import Kernel, fallthrough_kernel
from mdtensor.dispatch.keys import DispatchKey, key_from_name, runtime_keys
from mdtensor.dispatch.namespaces import OpOverloadPacket, lookup
from mdtensor.dispatch.namespaces import define as define_op
from mdtensor.dispatch.namespaces import undefine as undefine_op
from mdtensor.dispatch.operators import OpOverload, dispatcher, register_fallback, remove_fallback
from mdtensor.dispatch.schema import SchemaParseError, parse_schema
from mdtensor.tensors.tensor import Tensor

from ._dtypes import DType
from ._opcheck import opcheck as _opcheck
from .autograd import _custom

__all__ = [
    "Library",
    "RegistrationHandle",
    "custom_op",
    "define",
    "dump",
    "dump_text",
    "fallthrough_kernel",
    "impl",
    "opcheck",
    "register_autograd",
    "register_fake",
    "register_kernel",
    "register_vmap",
    "set_dispatch_trace",
]

_DEVICE_TO_KEY = {"cpu": "CPU", "cuda": "CUDA", "jax": "JAX", "dask": "Dask", "meta": "Meta"}
_def_namespaces: dict[str, _weakref.ref[Library]] = {}


class RegistrationHandle:
    """Undoes one registration: ``remove()``, or leave a ``with`` block.  It keeps the
    library that made it alive (a library undoes its registrations when collected)."""

    def __init__(self, undo: Callable[[], None], what: str, library=None):
        self._undo = undo
        self._what = what
        self._library = library
        self.removed = False

    def remove(self) -> None:
        if not self.removed:
            self.removed = True
            self._undo()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    def __repr__(self) -> str:
        state = "removed" if self.removed else "active"
        return f"<RegistrationHandle {self._what} ({state})>"


def _key(key) -> DispatchKey:
    if isinstance(key, DispatchKey):
        return key
    if not isinstance(key, str):
        raise TypeError(f"dispatch key must be a DispatchKey or its name, got "
                        f"{type(key).__name__}")
    if key == "":
        return DispatchKey.CompositeImplicitAutograd
    if key.lower() in _DEVICE_TO_KEY:
        key = _DEVICE_TO_KEY[key.lower()]
    return key_from_name(key)


def _caller_location() -> str:
    # The first frame outside this module: the user's call site.  (A fixed depth broke
    # at the top level of a script, where the stack is shallower.)
    frame = _sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename == __file__:
        frame = frame.f_back
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Library:
    """A set of registrations for one namespace.

    Args:
        ns: the namespace (``"aten"`` for built-in ops, or your own).
        kind: ``"DEF"`` (owns the namespace: may define ops; one per namespace),
            ``"IMPL"`` (only registers kernels) or ``"FRAGMENT"`` (defines ops in a
            namespace another library owns, or adds to it).
        dispatch_key: default key for ``impl`` calls that give none.
    """

    def __init__(self, ns: str, kind: str, dispatch_key: str = ""):
        if kind not in ("DEF", "IMPL", "FRAGMENT"):
            raise ValueError(f"Library: kind must be 'DEF', 'IMPL' or 'FRAGMENT', got {kind!r}")
        if not isinstance(ns, str):
            raise TypeError(f"Library: the namespace must be a str, got {type(ns).__name__}")
        if not ns.isidentifier():
            raise ValueError(f"Library: namespace {ns!r} is not a valid identifier")
        if kind == "DEF":
            if ns == "aten":
                raise ValueError("Library: the 'aten' namespace is mdtensor's own; use "
                                 "kind='IMPL' to register kernels for its ops")
            owner = _def_namespaces.get(ns)
            if owner is not None and owner() is not None and not owner()._destroyed:
                raise ValueError(
                    f"Library: namespace {ns!r} already has a DEF library; use "
                    f"'FRAGMENT' to add to it")
            _def_namespaces[ns] = _weakref.ref(self)
        self.ns = ns
        self.kind = kind
        self.dispatch_key = dispatch_key
        self._handles: list[RegistrationHandle] = []
        self._destroyed = False
        self._where = _caller_location() if _sys._getframe(1) else "?"

    def __repr__(self) -> str:
        return f"Library(ns={self.ns!r}, kind={self.kind!r})"

    # -- define -------------------------------------------------------------------------
    def define(self, schema: str, *, tags: Sequence[str] = ()) -> str:
        """Define an op from a schema (without namespace: it gets this library's).

        Returns:
            the op's name (``"foo"`` or ``"foo.overload"``).

        Raises:
            SchemaParseError: the schema is malformed.
            RuntimeError: the op exists already, or this library cannot define.
        """
        self._check_alive()
        if self.kind == "IMPL":
            raise RuntimeError(f"{self!r}: an IMPL library cannot define ops; use 'DEF' or "
                               f"'FRAGMENT'")
        parsed = parse_schema(schema, default_namespace=self.ns)
        if parsed.namespace != self.ns:
            raise RuntimeError(f"{self!r}: cannot define {parsed.full_name} in another "
                               f"namespace")
        op = define_op(parsed, tags=tags)
        self._handles.append(RegistrationHandle(lambda: undefine_op(op), f"def {op.name}"))
        return parsed.name + ("." + parsed.overload_name if parsed.overload_name else "")

    # -- impl ---------------------------------------------------------------------------
    # Note [Backend kernels]
    # ~~~~~~~~~~~~~~~~~~~~~~
    # A backend registers kernels for its own key where its library needs them -- for
    # speed (the JAX backend's jitted kernels) or for the standard's answers (Note
    # [Special values] in ops/special_values.py) -- with ``impl(..., backend=True)``, the
    # same call a user makes.  Such a kernel is part of the backend, not an override:
    # it computes on its tensors' arrays and calls no op (a leaf kernel: the Autograd
    # kernels call it without their exclude guard), its results are not checked on every
    # call as a user kernel's are (Note [Alias contracts]; the backend's tests and
    # ``opcheck`` check it), replacing a catalogue kernel does not warn, and it stays
    # below every user kernel for the key, so a user's kernel wins whenever the backend
    # loads.
    def impl(self, op_name, fn: Callable, dispatch_key: str | DispatchKey = "", *,
             with_keyset: bool = False, allow_override: bool = False,
             backend: bool = False, origin: str | None = None) -> RegistrationHandle:
        """Register ``fn`` as the kernel of ``op_name`` for ``dispatch_key``.

        Args:
            op_name: ``"foo"``, ``"foo.overload"`` or an OpOverload (in this namespace).
            fn: the kernel; ``fallthrough_kernel`` makes the key fall through.
            dispatch_key: a runtime or alias key name (``"CPU"``, ``"AutogradCPU"``,
                ``"CompositeExplicitAutograd"``); device names (``"cpu"``) also work.
                Empty: the library's default, else CompositeImplicitAutograd.
            with_keyset: ``fn`` receives the call's key set (an int) first, for
                ``op.redispatch``.
            allow_override: replace another user registration for the same key.
            backend: ``fn`` is a backend's own kernel for its backend key (Note [Backend
                kernels]): it computes on raw arrays and calls no op.
            origin: who registers it, as ``dump`` shows (default: this library and the
                calling line).

        Raises:
            RuntimeError: a user kernel is registered already for this (op, key).
            ValueError: ``backend=True`` for a key that is not a backend's.
        """
        self._check_alive()
        op = self._overload(op_name)
        if op.schema.namespace != self.ns:  # as PyTorch: a library registers in its own
            raise ValueError(
                f"{self!r}.impl: {op.name} is in namespace {op.schema.namespace!r}, not "
                f"{self.ns!r}; register it with md.library.Library("
                f"{op.schema.namespace!r}, 'IMPL')")
        key = _key(dispatch_key or self.dispatch_key)
        if backend and (key.functionality != "Dense" or key.backend is None or with_keyset):
            raise ValueError(
                f"Library.impl: backend=True registers a backend's own kernel for its "
                f"backend key (CPU, JAX, PrivateUse1, ...) without with_keyset; got "
                f"{key.name}{' with with_keyset=True' if with_keyset else ''}")
        existing = op.kernels_for(key)
        user_existing = [k for k in existing if k.user]
        if user_existing and not allow_override and not backend:
            raise RuntimeError(
                f"{op.name}: a kernel is already registered for {key.name} from "
                f"{user_existing[-1].origin} ({user_existing[-1].name}); registering "
                f"{getattr(fn, '__qualname__', fn)!r} too is not allowed. Remove the first "
                f"registration, or pass allow_override=True.")
        where = _caller_location()
        kernel = Kernel(fn, key, with_keyset=with_keyset,
                        origin=origin or f"{self!r} at {where}",
                        user=fn is not fallthrough_kernel and not backend, leaf=backend)
        _load_backend_of(key)  # so the override of a built-in kernel is seen (and warned)
        # runtime_keys raises ValueError for a key no kernel can be registered for
        # (CPUBit, Dense, ...), before anything changes.
        before = {k: op.resolve(k)[0] for k in runtime_keys(key)}
        op.register_kernel(kernel)
        own = {id(k) for stack in op.registered().values() for k in stack}
        for rk, old in before.items():
            new = op.resolve(rk)[0]
            # Only replacing one of the op's own built-in kernels warns (not a fallback).
            if (not backend and old is not None and not old.user and id(old) in own
                    and new is kernel and old is not kernel):
                try:
                    _warnings.warn(
                        f"Overriding a previously registered kernel for the same operator "
                        f"and the same dispatch key\n  operator: {op.name}\n  dispatch key: "
                        f"{rk.display_name()}\n  previous kernel: {old.name} (from "
                        f"{old.origin})\n  new kernel: {kernel.name} (from {kernel.origin})",
                        UserWarning, stacklevel=2)
                except BaseException:
                    op.remove_kernel(kernel)  # warnings as errors: the registration failed
                    raise
                break
        handle = RegistrationHandle(lambda: op.remove_kernel(kernel),
                                    f"impl {op.name} for {key.name}", self)
        self._handles.append(handle)
        return handle

    def fallback(self, fn: Callable, dispatch_key: str | DispatchKey, *,
                 with_keyset: bool = False) -> RegistrationHandle:
        """Register a backend fallback for ``dispatch_key`` (every op, this key).

        ``fn(op, keyset, args, kwargs)`` is boxed: it gets the OpOverload, the call's key
        set (int), and the arguments.  ``fallthrough_kernel`` makes the key fall through.
        """
        self._check_alive()
        key = _key(dispatch_key)
        kernel = Kernel(fn, key, boxed=fn is not fallthrough_kernel,
                        origin=f"{self!r} at {_caller_location()}")
        register_fallback(kernel)
        handle = RegistrationHandle(lambda: remove_fallback(kernel),
                                    f"fallback for {key.name}", self)
        self._handles.append(handle)
        return handle

    def _overload(self, op_name) -> OpOverload:
        op_name = _packet_of(op_name)
        if isinstance(op_name, OpOverload):
            return op_name
        if isinstance(op_name, OpOverloadPacket):
            op_name = op_name.__name__
        name = op_name if "::" in op_name else f"{self.ns}::{op_name}"
        found = lookup(name)
        if isinstance(found, OpOverloadPacket):
            names = found.overloads()
            if "default" in names:
                return found.default
            raise ValueError(f"{name} has several overloads ({', '.join(names)}); "
                             f"name one, e.g. '{op_name}.{names[0]}'")
        return found

    # -- lifetime -----------------------------------------------------------------------
    def _check_alive(self) -> None:
        if self._destroyed:
            raise RuntimeError(f"{self!r} was destroyed")

    def _destroy(self) -> None:
        """Undo every registration of this library (newest first)."""
        if self._destroyed:
            return
        self._destroyed = True
        for handle in reversed(self._handles):
            handle.remove()
        self._handles.clear()

    def __del__(self):
        try:
            self._destroy()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self._destroy()


def define(qualname: str, schema: str, *, lib=None, tags=()) -> str:
    """``md.library.define("mylib::foo", "(Tensor x) -> Tensor")`` (torch.library's form).

    The definition lives as long as ``lib`` (default: a library kept for the process).
    """
    if not isinstance(qualname, str) or not isinstance(schema, str):
        raise TypeError(f"define: expected a 'namespace::name' str and a schema str, got "
                        f"{type(qualname).__name__} and {type(schema).__name__}")
    ns, sep, name = qualname.partition("::")
    if not sep:
        raise ValueError(f"define: expected 'namespace::name', got {qualname!r}")
    library = lib or _global_library(ns)
    return library.define(name + schema if schema.startswith("(") else schema, tags=tags)


def impl(qualname: str, dispatch_key: str, fn: Callable | None = None, *, lib=None):
    """``md.library.impl("aten::masked_fill_.Scalar", "CPU", fn)``; a decorator without fn.

    The registration lives as long as ``lib`` (default: a library kept for the process).
    """
    def register(f):
        ns = qualname.split("::", 1)[0] if "::" in qualname else "aten"
        library = lib or _global_library(ns)
        return library.impl(qualname, f, dispatch_key)

    return register(fn) if fn is not None else register


_global_libs: dict[str, Library] = {}


def _global_library(ns: str) -> Library:
    lib = _global_libs.get(ns)
    if lib is None:
        lib = _global_libs[ns] = Library(ns, "FRAGMENT" if ns != "aten" else "IMPL")
    return lib


# ---------------------------------------------------------------------------------------
# High level: custom_op


def _hint_to_type(hint, name: str, where: str) -> str:
    origin = _typing.get_origin(hint)
    args = _typing.get_args(hint)
    if origin in (_typing.Union, _types.UnionType) and type(None) in args:  # X | None too
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _hint_to_type(inner[0], name, where) + "?"
    if hint is Tensor:
        return "Tensor"
    if hint is int:
        return "int"
    if hint is float:
        return "float"
    if hint is bool:
        return "bool"
    if hint is str:
        return "str"
    if hint is DType:
        return "ScalarType"
    if origin in (list, tuple, Sequence, _typing.Sequence):
        elem = args[0] if args else None
        if elem is Tensor:
            return "Tensor[]"
        if elem is int:
            return "int[]"
        if elem is float:
            return "float[]"
        if elem is bool:
            return "bool[]"
    raise TypeError(f"{where}: cannot infer a schema type for parameter '{name}' with type "
                    f"hint {hint!r}; supported: Tensor, int, float, bool, str, md.DType, "
                    f"Optional[...] and Sequence/list of Tensor, int, float, bool")


def infer_schema(fn: Callable, name: str, mutates_args) -> str:
    """The schema string of ``fn`` from its type hints (``mutates_args`` get ``(a!)``)."""
    where = f"custom_op {name}"
    sig = _inspect.signature(fn)
    hints = _typing.get_type_hints(fn)
    mutated = set(mutates_args)
    unknown = mutated - set(sig.parameters)
    if unknown:
        raise ValueError(f"{where}: mutates_args names {sorted(unknown)}, which are not "
                         f"parameters of {fn.__name__}")
    parts = []
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    kw_started = False
    for pname, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"{where}: *args and **kwargs are not supported")
        if pname not in hints:
            raise TypeError(f"{where}: parameter '{pname}' needs a type hint")
        t = _hint_to_type(hints[pname], pname, where)
        if pname in mutated:
            if not t.startswith("Tensor"):
                raise TypeError(f"{where}: mutated argument '{pname}' must be a Tensor")
            t = t.replace("Tensor", f"Tensor({next(alias)}!)", 1)
        if p.kind == p.KEYWORD_ONLY and not kw_started:
            parts.append("*")
            kw_started = True
        text = f"{t} {pname}"
        if p.default is not p.empty:
            d = p.default
            text += "=" + (repr(d) if not isinstance(d, str) else
                           '"' + d.replace("\\", "\\\\").replace('"', '\\"') + '"')
        parts.append(text)
    ret = hints.get("return", type(None))
    if ret is type(None):
        rets = "()"
    elif _typing.get_origin(ret) is tuple:
        rets = "(" + ", ".join(_hint_to_type(a, "return", where)
                               for a in _typing.get_args(ret)) + ")"
    else:
        rets = _hint_to_type(ret, "return", where)
    short = name.split("::", 1)[1]
    return f"{short}({', '.join(parts)}) -> {rets}"


class CustomOpDef:
    """What ``custom_op`` returns: call it like the op; register more kernels on it."""

    def __init__(self, qualname: str, fn: Callable, mutates_args, schema: str | None,
                 device_types):
        ns, _, short = qualname.partition("::")
        if not short:
            raise ValueError(f"custom_op: name must be 'namespace::name', got {qualname!r}")
        self._qualname = qualname
        self._lib = Library(ns, "FRAGMENT")
        schema = schema or infer_schema(fn, qualname, mutates_args)
        self._lib.define(schema)
        self._op = lookup(qualname + "")
        if isinstance(self._op, OpOverloadPacket):
            self._op = self._op.default
        self.__name__ = short
        self.__doc__ = fn.__doc__
        self._init_fn = fn
        if device_types is None:
            self._lib.impl(self._op, fn, "CompositeExplicitAutograd")
        else:
            for d in ([device_types] if isinstance(device_types, str) else device_types):
                self._lib.impl(self._op, fn, d)

    @property
    def op(self) -> OpOverload:
        return self._op

    def __call__(self, *args, **kwargs):
        return self._op(*args, **kwargs)

    def register_kernel(self, device_types, fn: Callable | None = None):
        def reg(f):
            for d in ([device_types] if isinstance(device_types, str) else device_types):
                self._lib.impl(self._op, f, d, allow_override=True)
            return f
        return reg(fn) if fn is not None else reg

    def register_fake(self, fn: Callable | None = None):
        def reg(f):
            self._lib.impl(self._op, _fake_kernel(self._op, f), "Meta", allow_override=True)
            self._fake = f
            return f
        return reg(fn) if fn is not None else reg

    def register_autograd(self, backward: Callable, *, setup_context: Callable | None = None):
        return register_autograd(self._op, backward, setup_context=setup_context,
                                 lib=self._lib)

    def register_vmap(self, fn: Callable | None = None):
        return register_vmap(self._op, fn)

    def __repr__(self) -> str:
        return f"<CustomOpDef {self._qualname}: {self._op.schema}>"


def custom_op(name: str, fn: Callable | None = None, /, *, mutates_args=(),
              device_types=None, schema: str | None = None):
    """Define a custom op from a Python function; its schema comes from the type hints.

    Args:
        name: ``"mylib::foo"``.
        mutates_args: names of the Tensor arguments the function writes to (required to
            be accurate: they get ``(a!)`` and bump version counters).
        device_types: register ``fn`` only for these devices (default: every backend, as
            CompositeExplicitAutograd).
        schema: give the schema explicitly instead of inferring it.

    Example:
        >>> @md.library.custom_op("mylib::twice", mutates_args=())
        ... def twice(x: md.Tensor) -> md.Tensor:
        ...     return x * 2
    """
    if mutates_args == "unknown" or not isinstance(mutates_args, (tuple, list, set,
                                                                  frozenset)):
        raise TypeError(f"custom_op {name}: mutates_args must be a tuple of argument names, "
                        f"got {mutates_args!r}")

    def wrap(f):
        return CustomOpDef(name, f, mutates_args, schema, device_types)

    return wrap(fn) if fn is not None else wrap


def _fake_kernel(op: OpOverload, fake_fn: Callable) -> Callable:
    def fake(*args, **kwargs):
        return fake_fn(*args, **kwargs)
    fake.__qualname__ = f"fake[{op.name}]:{getattr(fake_fn, '__qualname__', fake_fn)}"
    return fake


def _packet_of(op):
    """A namespace function (``md.sum``) stands for its packet (``md.ops.aten.sum``)."""
    inner = getattr(op, "op", None)
    return inner if isinstance(inner, OpOverloadPacket) else op


def _resolve_op(op) -> OpOverload:
    if isinstance(op, CustomOpDef):
        return op.op
    op = _packet_of(op)
    if isinstance(op, str):
        op = lookup(op)
    if isinstance(op, OpOverloadPacket):
        if len(op.overloads()) != 1:
            raise ValueError(f"{op.name} has several overloads; pass one "
                             f"({', '.join(op.overloads())})")
        op = op.all_overloads()[0]
    if not isinstance(op, OpOverload):
        raise TypeError(f"expected an op (name, OpOverload or custom op), got "
                        f"{type(op).__name__}")
    return op


def register_kernel(op, device_types, fn: Callable | None = None, *, lib=None):
    """Register ``fn`` as ``op``'s kernel for a device type (``"cpu"``, ``"jax"``, ...)."""
    op = _resolve_op(op)

    def reg(f):
        library = lib or _global_library(op.schema.namespace)
        for d in ([device_types] if isinstance(device_types, str) else device_types):
            library.impl(op, f, d, allow_override=True)
        return f

    return reg(fn) if fn is not None else reg


def register_fake(op, fn: Callable | None = None, *, lib=None):
    """Register a fake (meta) implementation: shapes and dtypes from meta inputs."""
    op = _resolve_op(op)

    def reg(f):
        library = lib or _global_library(op.schema.namespace)
        library.impl(op, _fake_kernel(op, f), "Meta", allow_override=True)
        return f

    return reg(fn) if fn is not None else reg


def register_autograd(op, backward: Callable, *, setup_context: Callable | None = None,
                      lib=None):
    """Give ``op`` a derivative: ``backward(ctx, *grads) -> input grads``.

    ``setup_context(ctx, inputs, output)`` saves what backward needs (as in PyTorch).
    """
    op = _resolve_op(op)
    return _custom.register_autograd(op, backward, setup_context,
                                     lib or _global_library(op.schema.namespace))


def register_vmap(op, func: Callable | None = None):
    """Give ``op`` a batching rule for ``md.func.vmap`` (torch.library's
    ``register_vmap``): ``func(info, in_dims, *args, **kwargs) -> (output, out_dims)``,
    where ``in_dims`` has, per positional argument, the batch dimension of its tensor (0)
    or None, ``info.batch_size`` and ``info.randomness`` describe the vmap, and ``out_dims``
    (an int, None, or a tuple per output) says where the batch dimension of each output is.
    Without one, the op runs once per batch element under vmap (docs/TRANSFORMS.md)."""
    from .layers import vmap as _vmap

    op = _resolve_op(op)

    def reg(f):
        _vmap.register_rule(op.name, _vmap.user_rule(op, f))
        return f

    return reg(func) if func is not None else reg


# ---------------------------------------------------------------------------------------
# Inspection


def dump(op, *, file=None) -> None:
    """Print the registrations and computed dispatch table of ``op``, each entry with its
    rung (``dump_text`` returns the same text).

    ``op`` is a name (``"aten::masked_fill_.Scalar"``; a packet name dumps every
    overload), an OpOverload or a packet; ``file`` defaults to ``_sys.stdout``.
    """
    print(dump_text(op), file=file)


def dump_text(op) -> str:
    """The text ``dump`` prints."""
    if isinstance(op, str):
        op = lookup(op)
    op = _packet_of(op)
    if isinstance(op, OpOverloadPacket):
        return "\n\n".join(dump_text(o) for o in op.all_overloads())
    if isinstance(op, CustomOpDef):
        op = op.op
    lines = [f"{op.name}: {op.schema}", "registrations:"]
    for key, stack in op.registered().items():
        for i, k in enumerate(stack):
            shadow = "" if i == len(stack) - 1 else "  (overridden)"
            lines.append(f"  {key.name:<28} {k.name}  [{k.origin}]{shadow}")
    lines.append("computed table (runtime key -> kernel, rung):")
    loaded = _loaded_backend_keys()  # before computing: loading a backend changes tables
    for key, (kernel, rung) in op.computed_table().items():
        if kernel is None:
            continue
        if key.backend is not None and key.backend not in loaded \
                and key.backend != "Meta":
            continue
        shown = "fallthrough" if kernel.is_fallthrough else kernel.name
        lines.append(f"  {key.display_name():<28} {shown:<48} {rung}")
    return "\n".join(lines)


def _load_backend_of(key: DispatchKey) -> None:
    """Load the installed backend of a per-backend key (``CPU``, ``AutogradJAX``), so its
    ArrayAPI kernels are in the table an override replaces: otherwise overriding a built-in
    kernel before the first tensor of that device warned about nothing (alias keys load
    nothing: registering a CompositeExplicitAutograd kernel must not import JAX)."""
    if key.is_alias or key.backend is None or key.backend == "Meta":
        return
    for row in backends.available():
        if row["key"] == key.backend and row["installed"] and not row["loaded"]:
            try:
                backends.get(row["device_type"])
            except Exception:  # noqa: BLE001 - a backend that fails to load stays unloaded
                pass


def _loaded_backend_keys() -> set[str]:
    # The CPU backend is always there; load it so a dump in a fresh interpreter shows the
    # CPU rows (and the ArrayAPI kernels it enables) instead of leaving them out.
    backends.get("cpu")
    return {b.key for b in backends.loaded()}


def set_dispatch_trace(enabled: bool = True) -> bool:
    """Print every dispatcher hop (op, key set, key, kernel) to stderr; returns the old
    setting.  ``MDTENSOR_SHOW_DISPATCH_TRACE=1`` turns it on at import."""
    return dispatcher.set_trace(enabled)


class dispatch_trace:
    """Context manager: the dispatch trace on inside the block."""

    def __enter__(self):
        self._old = dispatcher.set_trace(True)
        return self

    def __exit__(self, *exc):
        dispatcher.set_trace(self._old)


def opcheck(op, args=(), kwargs=None) -> dict:
    """Check an op's implementation against its schema (see docs/MODES.md).

    Checks: the alias/mutation contract of the real kernel, that mutated arguments were
    actually mutated (and nothing else was), that an autograd formula exists when inputs
    require grad, and that the Meta/fake kernel's output shapes and dtypes match the real
    kernel's.  Returns ``{check: "ok" | "skipped: why"}``; raises on the first failure.
    """
    return _opcheck(_resolve_op(op), args, kwargs or {})


# Re-exported for users writing fallbacks.
SchemaParseError = SchemaParseError
