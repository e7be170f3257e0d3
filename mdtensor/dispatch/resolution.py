"""Overload resolution: from Python arguments to an ``OpOverload``, with plum.

Note [Overload resolution]
~~~~~~~~~~~~~~~~~~~~~~~~~~
A packet call looks its argument *types* (plus keyword names) up in a per-packet dict; only
a miss comes here.  On a miss every overload is a candidate whose schema the call can bind
to (positional count, keyword names, required arguments).  Each candidate's bound values are
matched against a ``plum.Signature`` built from its schema types (``Tensor`` ->
``md.Tensor``, ``Scalar`` -> ``bool | int | float | complex``, ``int[]`` ->
``int | Sequence[int]``, ``T?`` -> ``T | None``, ...), and plum's specificity order picks the
most specific match, exactly as plum resolves its own methods.  Ties keep catalogue order
(``add.Tensor`` before ``add.Scalar``), as PyTorch's argument parser does.  The result --
the overload's caller, plus a keyword-renaming adapter for torch-style argument aliases
(``dim=`` for ``axis=``) -- is cached for that key.

Matching binds by name, so ``md.sum(x, axis=0)`` and ``md.sum(x, 0)`` resolve alike; the
cache key includes keyword names because they change which overloads bind.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Optional, Union

import numpy as np

from mdtensor._dtypes import DType

from .schema import NO_DEFAULT, FunctionSchema

__all__ = ["plum_signature", "register_schema_class", "resolve", "schema_class"]

_Scalar = Union[bool, int, float, complex, np.generic]


# Note [Schema classes]
# ~~~~~~~~~~~~~~~~~~~~~
# Two schema types name classes that sit above the dispatcher: ``Tensor`` (mdtensor/tensors/
# tensor.py) and ``Device`` (tensors/device.py) import the dispatcher, so it cannot import
# them.  Each registers its class here when its module is imported
# (``register_schema_class``); resolution reads them on a miss, never per call, and the
# packet functions learn their inline dispatch for the exact class registered as "Tensor"
# (Note [Inline dispatch] in inline.py).
_SCHEMA_CLASSES: dict[str, type] = {}


def register_schema_class(name: str, cls: type) -> None:
    """Make ``cls`` the Python class of schema type ``name`` (``"Tensor"``, ``"Device"``)."""
    _SCHEMA_CLASSES[name] = cls


def schema_class(name: str) -> type:
    """The class registered for schema type ``name`` (Note [Schema classes])."""
    try:
        return _SCHEMA_CLASSES[name]
    except KeyError:
        raise RuntimeError(f"no class is registered for the schema type {name!r} (its "
                           f"module registers it when imported)") from None


def _py_type(t):
    """The plum type hint for a ``SchemaType``."""
    Tensor = schema_class("Tensor")
    Device = schema_class("Device")
    base = t.base
    if base == "Tensor":
        elem = Optional[Tensor] if t.elem_optional else Tensor
    elif base == "Scalar":
        elem = _Scalar
    elif base in ("int", "SymInt"):
        elem = Union[int, np.integer]
    elif base == "float":
        elem = Union[float, int, np.floating, np.integer]
    elif base == "bool":
        elem = Union[bool, np.bool_]
    elif base == "str":
        elem = str
    elif base == "ScalarType":
        elem = Union[DType, type, str, np.dtype]
    elif base == "Device":
        elem = Union[str, Device]
    else:  # Layout, Generator, MemoryFormat, Dimname: accepted as-is
        elem = object
    if t.is_list:
        if base in ("int", "SymInt"):
            # PyTorch accepts a single int where an int list is expected (x.sum(0)).
            hint = Union[elem, Sequence[elem]]
        else:
            hint = Sequence[elem]
    else:
        hint = elem
    if t.optional:
        hint = Optional[hint]
    return hint


def plum_signature(schema: FunctionSchema):
    """A plum signature over all of ``schema``'s arguments, in order.

    plum is imported here, on the first resolution, not at ``import mdtensor``.
    """
    import plum

    return plum.Signature(*(_py_type(a.type) for a in schema.arguments))


def _own_aliases(schema: FunctionSchema, aliases: dict) -> dict:
    """The packet's keyword aliases that apply to ``schema``: an alias never renames a
    keyword the overload has itself.

    Note [Aliases per overload]: the aliases are the packet's (one table for ``md.max``),
    but its overloads name their parameters differently: ``max(*, axis, keepdims)`` takes
    ``keepdim=`` for ``keepdims=``, while ``max.dim(dim, keepdim)`` has ``keepdim`` itself,
    so ``md.max(x, dim=0, keepdim=True)`` must reach it unrenamed.
    """
    if not aliases:
        return aliases
    names = {a.name for a in schema.arguments}
    return {k: v for k, v in aliases.items() if k not in names}


def _bind(schema: FunctionSchema, args, kwargs, aliases) -> list | None:
    """Bind a call to ``schema``; the values in schema order, or None if it cannot bind."""
    params = schema.arguments
    npos = sum(1 for a in params if not a.kwarg_only)
    if len(args) > npos:
        return None
    values = list(args)
    names = {a.name for a in params}
    aliases = _own_aliases(schema, aliases)
    kw = {aliases.get(k, k): v for k, v in kwargs.items()}
    if len(kw) != len(kwargs):
        return None  # an argument given under both its name and its alias
    if any(k not in names for k in kw):
        return None
    for i, a in enumerate(params):
        if i < len(args):
            if a.name in kw:
                return None  # given twice
            continue
        if a.name in kw:
            values.append(kw[a.name])
        elif a.has_default:
            values.append(None if a.default is NO_DEFAULT else _default_value(a))
        else:
            return None
    return values


def _default_value(arg):
    d = arg.default
    # Symbolic defaults (e.g. 'contiguous_format') are passed as None for matching.
    return d if isinstance(d, (bool, int, float, complex, str, list, tuple, type(None))) else None


def _signatures(packet):
    sigs = packet.__dict__.get("_plum_signatures")
    if sigs is None or len(sigs) != len(packet._overloads):
        sigs = [(op, plum_signature(op.schema)) for op in packet._overloads.values()]
        packet._plum_signatures = sigs
    return sigs


def resolve(packet, args, kwargs, key, candidates=None):
    """Pick the overload for this call and cache its caller under ``key``.

    Args:
        candidates: the overload names to choose among (default: all); a Tensor method
            resolves among its op's PyTorch overloads only (Note [Torch methods] in
            ops/_methods.py).  With candidates, nothing is cached in the packet.

    Raises:
        TypeError: no overload matches; the message lists the candidate schemas.
    """
    aliases = packet._kwarg_aliases
    matches = []
    for op, sig in _signatures(packet):
        if candidates is not None and (op.schema.overload_name or "default") not in candidates:
            continue
        values = _bind(op.schema, args, kwargs, aliases)
        if values is not None and sig.match(tuple(values)):
            matches.append((op, sig))
    if not matches:
        raise _no_match(packet, args, kwargs, candidates)
    best_op, best_sig = matches[0]
    for op, sig in matches[1:]:
        if sig <= best_sig and not best_sig <= sig:
            best_op, best_sig = op, sig
    caller = _positional_by_keyword(best_op.schema, best_op._caller, len(args), kwargs,
                                    _own_aliases(best_op.schema, aliases))
    if key is not None and candidates is None:
        if _lists_of_tensors(packet) and _has_sequence(args, kwargs):
            # The type key cannot tell [1, 2] from [x, y]: resolve by contents too.
            packet.resolution_cache[key] = _by_contents(packet, {_contents(args, kwargs):
                                                                   caller})
        else:
            packet.resolution_cache[key] = caller
            learned = None if kwargs else caller
            inner = getattr(caller, "positional_of", None)
            if inner is not None and len(args) == 1 and len(kwargs) == 1:
                packet._by_position[key] = learned = inner
            elif (inner is not None and args and type(args[0]) is schema_class("Tensor")
                    and getattr(inner, "op", None) is not None
                    and inner.op.fast_positions == (0,)):
                packet._by_keywords[key] = (inner.op, inner.op.table, caller.moved)
            elif (caller is best_op._caller and len(args) == 1 and len(kwargs) == 1
                    and type(args[0]) is schema_class("Tensor")
                    and best_op.fast_positions == (0,)):
                # the one keyword is keyword-only (Note [Keyword calls] in callers.py)
                packet._by_keyword_only[key] = (best_op, best_op.table)
            if learned is not None:
                for hook in packet.on_resolve:  # Note [Inline dispatch] in inline.py
                    hook(key, learned)
    return caller


def _lists_of_tensors(packet) -> bool:
    """Whether the packet's overloads take ``Tensor[]`` somewhere and there is more than
    one overload (only then can a list argument's element types change the overload)."""
    return len(packet._overloads) > 1 and any(
        a.type.is_tensor_list for op in packet._overloads.values()
        for a in op.schema.arguments)


def _has_sequence(args, kwargs) -> bool:
    return any(isinstance(v, (list, tuple)) for v in (*args, *kwargs.values()))


def _contents(args, kwargs):
    return tuple(frozenset(map(type, v)) if isinstance(v, (list, tuple)) else None
                 for v in (*args, *kwargs.values()))


def _by_contents(packet, cache):
    """A cached caller for type keys with sequence arguments: the overload also depends
    on the element types (``int[]`` vs ``Tensor[]``), so those pick the caller."""

    def by_contents(*args, **kwargs):
        ck = _contents(args, kwargs)
        caller = cache.get(ck)
        if caller is None:
            caller = cache[ck] = resolve(packet, args, kwargs, None)
        return caller(*args, **kwargs)

    return by_contents


def _positional_by_keyword(schema, caller, nargs, kwargs, aliases):
    """Pass positional parameters given by keyword positionally, as PyTorch's argument
    parser does, so kernels (which may name their parameters differently) never see them
    as keywords: ``md.add(x, other=2)`` calls the kernel as ``(x, 2)``.  Only the run of
    parameters right after the positional arguments moves (no defaults are filled in)."""
    names = {aliases.get(k, k): k for k in kwargs}
    moved = []
    for a in schema.arguments[nargs:]:
        if a.kwarg_only or a.name not in names:
            break
        moved.append(names[a.name])
    if len(moved) < len(kwargs) and any(k in aliases for k in kwargs):
        caller = _renaming(caller, aliases)  # keywords left for the kernel: rename them
    if not moved:
        return caller
    moved = tuple(moved)
    # The adapter serves calls with exactly these keyword names (they are part of the
    # resolution key), so the common shapes need no dict work at all.
    if len(moved) == len(kwargs):
        if len(moved) == 1:
            (k0,) = moved

            def positional(*args, **kw):
                return caller(*args, kw[k0])

        elif len(moved) == 2:
            k0, k1 = moved

            def positional(*args, **kw):
                return caller(*args, kw[k0], kw[k1])
        else:
            def positional(*args, **kw):
                return caller(*args, *[kw[k] for k in moved])
        # for the packet's own fast paths (Note [Keyword calls] in callers.py)
        positional.positional_of, positional.moved = caller, moved
    else:
        # Keywords stay for the kernel: pop the moved ones (by the name the caller used;
        # the renaming adapter below this one renames the rest).
        def positional(*args, **kw):
            return caller(*args, *[kw.pop(k) for k in moved], **kw)

    return positional


def _renaming(caller, aliases):
    def renamed(*args, **kwargs):
        return caller(*args, **{aliases.get(k, k): v for k, v in kwargs.items()})

    return renamed


def _type_name(v) -> str:
    if isinstance(v, (list, tuple)):
        inner = ", ".join(sorted({_type_name(x) for x in v})) or ""
        return f"{type(v).__name__}[{inner}]"
    if isinstance(v, numbers.Number) and not isinstance(v, np.generic):
        return type(v).__name__
    return type(v).__name__


def _no_match(packet, args, kwargs, candidates=None) -> TypeError:
    got = ", ".join([_type_name(a) for a in args] + [f"{k}={_type_name(v)}"
                                                     for k, v in kwargs.items()])
    cands = "\n".join(f"    {op.schema}" for name, op in packet._overloads.items()
                      if candidates is None or name in candidates)
    return TypeError(
        f"{packet._name}(): no overload matches the arguments ({got}).\n"
        f"  Candidates:\n{cands}"
    )
