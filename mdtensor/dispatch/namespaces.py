"""Packets and namespaces: ``md.ops.aten.add`` (a packet: every overload of one name),
``md.ops.aten`` (a namespace), ``md.ops`` (the namespaces), and ``define``/``lookup``.

The catalogue and ``md.library`` define operators here; the rest of mdtensor calls them
through these registries -- ``aten_calls.mul(x, y)``, ``lookup("aten::add.Tensor")`` --
never by importing the catalogue (Note [Packet functions] in callers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter

from .callers import packet_function
from .operators import OpOverload, dispatcher
from .schema import FunctionSchema, parse_schema

__all__ = ["OpCalls", "OpNamespace", "OpNamespaces", "OpOverloadPacket", "aten_calls",
           "define", "lookup", "namespaces", "undefine"]


class OpOverloadPacket:
    """All overloads of one operator name; calling it resolves the overload (``resolution``).

    ``md.add.Tensor`` is the ``add.Tensor`` overload; ``md.add.overloads()`` lists names.
    """

    def __init__(self, namespace: str, name: str):
        self._qualified_name = f"{namespace}::{name}"
        self._namespace = namespace
        self._name = name
        self._overloads: dict[str, OpOverload] = {}
        self.resolution_cache: dict = {}
        #: called whenever the overloads change (what was resolved is void): the Python
        #: inline dispatch of the packet function and the Python operators (Note [Inline
        #: dispatch] in inline.py)
        self.on_change: list = []
        #: ``hook(key, caller)`` for each resolution ``resolution.resolve`` caches (Note
        #: [Inline dispatch] in inline.py)
        self.on_resolve: list = []
        #: keys (Tensor type, keyword name, value type) whose keyword is the parameter right
        #: after the Tensor: the overload's caller, to call as ``caller(x, value)``
        self._by_position: dict = {}
        #: keys of calls whose keywords all name the positional parameters after the
        #: positional arguments (``md.sum(x, 1, keepdims=True)``), for overloads with one
        #: leading Tensor: ``(overload, its table, the keyword names in parameter order)``
        #: (Note [Keyword calls] in callers.py)
        self._by_keywords: dict = {}
        #: keys (Tensor type, keyword name, value type) of calls of an overload with one
        #: leading Tensor whose one keyword is keyword-only (``md.tril(x, k=1)``): ``(overload,
        #: its table)``, for the packet function to dispatch inline (Note [Keyword calls])
        self._by_keyword_only: dict = {}
        self._kwarg_aliases: dict[str, str] = {}
        #: the call as a plain function: ``md.<name>``, ``ops.aten_calls.<name>``
        self._call = packet_function(self)
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
        ops_ = [o for o in self._overloads.values()
                if not (o.schema.is_out or o.schema.is_inplace)] or list(self._overloads.values())
        return ops_[0].schema.signature

    @property
    def name(self) -> str:
        return self._qualified_name

    #: ``packet(...)`` calls ``packet._call`` itself: the call slot reads ``__call__``
    #: through this property, in C, and calls what it gives with the call's own arguments,
    #: without a forwarding frame and its star call (Note [Packet functions] in callers.py)
    __call__ = property(attrgetter("_call"))

    def _add_overload(self, op: OpOverload) -> None:
        name = op.schema.overload_name or "default"
        self._overloads[name] = op
        setattr(self, name, op)
        self.resolution_cache.clear()
        self._by_position.clear()
        self._by_keywords.clear()
        self._by_keyword_only.clear()
        self.__dict__.pop("_plum_signatures", None)  # resolution.py's, built from the overloads
        for hook in self.on_change:
            hook()

    def _remove_overload(self, op: OpOverload) -> None:
        name = op.schema.overload_name or "default"
        self._overloads.pop(name, None)
        if getattr(self, name, None) is op:
            delattr(self, name)
        self.resolution_cache.clear()
        self._by_position.clear()
        self._by_keywords.clear()
        self._by_keyword_only.clear()
        self.__dict__.pop("_plum_signatures", None)
        for hook in self.on_change:
            hook()


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


class OpNamespaces:
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


namespaces = OpNamespaces()

#: the aten operators as plain functions, for hot code inside mdtensor (derivative formulas,
#: the engine, the layers): ``aten_calls.mul(x, y)`` (Note [Packet functions] in callers.py)
aten_calls = namespaces.aten._calls


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
    ns = getattr(namespaces, schema.namespace)
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
        getattr(namespaces, op.schema.namespace)._remove_packet(op.schema.name)


def lookup(name: str) -> OpOverload | OpOverloadPacket:
    """``'aten::add.Tensor'`` -> overload; ``'aten::add'`` or ``'add'`` -> packet
    (``'aten::matmul.default'`` names the default overload)."""
    if "::" not in name:
        name = "aten::" + name
    ns, _, rest = name.partition("::")
    if "." in rest and name in dispatcher.overloads:
        return dispatcher.overloads[name]
    base, _, overload = rest.partition(".")
    packet = getattr(namespaces, ns)._packets.get(base)
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
