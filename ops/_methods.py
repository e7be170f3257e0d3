"""Namespace functions, Tensor methods and Python operators, generated from the catalogue.

Nothing here is written per op: ``install`` walks ``CATALOGUE`` and binds each declaration's
``names`` into the ``mdtensor`` namespace and its ``methods`` onto ``Tensor`` (plus the
``_``-suffixed in-place method when the op has an in-place variant), and binds the Python
operators from the one table below.
"""

from __future__ import annotations

from mdtensor.dispatch.inline import dispatch_kernel, inline_dispatch
from mdtensor.dispatch.namespaces import lookup
from mdtensor.dispatch.resolution import resolve
from mdtensor.tensors.tensor import Tensor

from ._decl import CATALOGUE

__all__ = ["OPERATORS", "install"]

#: Python operator -> (op packet name, kind); kind is "binary", "reflected", "inplace" or
#: "unary".  This table is the only place operators are spelled out.
OPERATORS: dict[str, tuple[str, str]] = {
    "__add__": ("add", "binary"), "__radd__": ("add", "reflected"),
    "__iadd__": ("add_", "inplace"),
    "__sub__": ("sub", "binary"), "__rsub__": ("sub", "reflected"),
    "__isub__": ("sub_", "inplace"),
    "__mul__": ("mul", "binary"), "__rmul__": ("mul", "reflected"),
    "__imul__": ("mul_", "inplace"),
    "__truediv__": ("div", "binary"), "__rtruediv__": ("div", "reflected"),
    "__itruediv__": ("div_", "inplace"),
    "__floordiv__": ("floor_divide", "binary"), "__rfloordiv__": ("floor_divide", "reflected"),
    "__ifloordiv__": ("floor_divide_", "inplace"),
    "__mod__": ("remainder", "binary"), "__rmod__": ("remainder", "reflected"),
    "__imod__": ("remainder_", "inplace"),
    "__pow__": ("pow", "binary"), "__rpow__": ("pow", "reflected"),
    "__ipow__": ("pow_", "inplace"),
    "__matmul__": ("matmul", "binary"), "__rmatmul__": ("matmul", "reflected"),
    "__and__": ("bitwise_and", "binary"), "__rand__": ("bitwise_and", "reflected"),
    "__iand__": ("bitwise_and_", "inplace"),
    "__or__": ("bitwise_or", "binary"), "__ror__": ("bitwise_or", "reflected"),
    "__ior__": ("bitwise_or_", "inplace"),
    "__xor__": ("bitwise_xor", "binary"), "__rxor__": ("bitwise_xor", "reflected"),
    "__ixor__": ("bitwise_xor_", "inplace"),
    "__lshift__": ("bitwise_left_shift", "binary"),
    "__rlshift__": ("bitwise_left_shift", "reflected"),
    "__ilshift__": ("bitwise_left_shift_", "inplace"),
    "__rshift__": ("bitwise_right_shift", "binary"),
    "__rrshift__": ("bitwise_right_shift", "reflected"),
    "__irshift__": ("bitwise_right_shift_", "inplace"),
    "__eq__": ("eq", "binary"), "__ne__": ("ne", "binary"),
    "__lt__": ("lt", "binary"), "__le__": ("le", "binary"),
    "__gt__": ("gt", "binary"), "__ge__": ("ge", "binary"),
    "__neg__": ("neg", "unary"), "__pos__": ("positive", "unary"),
    "__abs__": ("abs", "unary"), "__invert__": ("bitwise_not", "unary"),
}


@inline_dispatch
def _binary(packet, reflected: bool):
    cache = packet.resolution_cache
    # See Note [Inline dispatch] in mdtensor/dispatch/inline.py: the overload ``Tensor op
    # Tensor`` resolved to, for the dispatch inlined below; forgotten whenever the packet's
    # overloads change.
    tt_op = tt_table = None

    def learn(key, caller):
        nonlocal tt_op, tt_table
        op = getattr(caller, "op", None)
        if key == _TT and op is not None and op.fast_positions == (0, 1):
            tt_op, tt_table = op, op.table

    def forget():
        nonlocal tt_op, tt_table
        tt_op = tt_table = None

    packet.on_change.append(forget)
    packet.on_resolve.append(learn)
    if _TT in cache:  # resolved before the operators were installed
        learn(_TT, cache[_TT])

    if reflected:
        def operator(self, other):
            if tt_op is not None and type(self) is Tensor and type(other) is Tensor:
                kernel = dispatch_kernel(tt_op, tt_table, other, self)
                return kernel(other, self)
            key = (type(other), type(self))
            caller = cache.get(key)
            if caller is None:
                try:
                    caller = resolve(packet, (other, self), {}, key)
                except TypeError:
                    return NotImplemented
            return caller(other, self)
    else:
        def operator(self, other):
            if tt_op is not None and type(self) is Tensor and type(other) is Tensor:
                kernel = dispatch_kernel(tt_op, tt_table, self, other)
                return kernel(self, other)
            key = (type(self), type(other))
            caller = cache.get(key)
            if caller is None:
                try:
                    caller = resolve(packet, (self, other), {}, key)
                except TypeError:
                    return NotImplemented
            return caller(self, other)
    return operator


_TT = (Tensor, Tensor)

def _unary(packet):
    cache = packet.resolution_cache

    def operator(self):
        caller = cache.get(type(self))
        if caller is None:
            return packet(self)
        return caller(self)
    return operator


def _method(packet, varargs: bool):
    cache = packet.resolution_cache
    if varargs:
        def method(self, *args, **kwargs):
            # x.view(2, 3) is x.view((2, 3)); then the cache lookups below, for one argument
            if len(args) > 1:
                for a in args:
                    if not isinstance(a, int):
                        return packet(self, *args, **kwargs)
                args = (args,)
            if kwargs or len(args) != 1:
                return packet(self, *args, **kwargs)
            (b,) = args
            caller = cache.get((type(self), type(b)))
            if caller is None:
                return packet(self, b)
            return caller(self, b)
    else:
        def method(self, *args, **kwargs):
            # The packet's own resolution cache, looked up without the packet's __call__
            # (same keys as OpOverloadPacket.__call__).
            if kwargs:
                return packet(self, *args, **kwargs)
            if not args:
                caller = cache.get(type(self))
                if caller is None:
                    return packet(self)
                return caller(self)
            if len(args) == 1:
                (b,) = args
                caller = cache.get((type(self), type(b)))
                if caller is None:
                    return packet(self, b)
                return caller(self, b)  # Note [Star calls] in mdtensor/dispatch/callers.py
            caller = cache.get((type(self), *map(type, args)))
            if caller is None:
                return packet(self, *args)
            return caller(self, *args)
    method.__name__ = packet.__name__
    method.__doc__ = packet.__doc__
    return method


# Note [Torch methods]
# ~~~~~~~~~~~~~~~~~~~~
# The rule for a name that the Array API and PyTorch both use with different meanings
# (docs/ARCHITECTURE.md, "One name, two meanings"): the namespace function follows the Array
# API where the standard defines the call, and Tensor methods and PyTorch-only spellings
# (a positional ``dim``, ``dim=``, ``keepdim=``, ``unbiased=``) follow PyTorch.  Such an op
# declares its PyTorch overloads beside the Array API one (``std.correction``,
# ``sort.dim``); the namespace function resolves among all of them -- the Array API call
# binds only the standard's overload, a PyTorch spelling only PyTorch's -- and its Tensor
# method only among the PyTorch ones (``method_overloads``), so ``x.std()`` is PyTorch's
# (``correction=1``) while ``md.std(x)`` is the standard's (``correction=0``).  A call
# mixing both spellings binds no overload and raises.


def _torch_method(packet, candidates, varargs: bool):
    """A Tensor method resolving among ``candidates`` only (Note [Torch methods])."""
    cache: dict = {}
    packet.on_change.append(cache.clear)

    def method(self, *args, **kwargs):
        if varargs and len(args) > 1 and all(isinstance(a, int) for a in args):
            args = (args,)
        key = (type(self), *map(type, args), *kwargs)
        caller = cache.get(key)
        if caller is None:
            caller = cache[key] = resolve(packet, (self, *args), kwargs, None, candidates)
        return caller(self, *args, **kwargs)

    method.__name__ = packet.__name__
    method.__doc__ = packet.__doc__
    return method


def _star(packet, name):
    """The namespace form of an op taking a ``Tensor[]``: ``f(*tensors, **kwargs)`` (Array
    API ``meshgrid(*arrays, indexing=...)``, ``broadcast_arrays(*arrays)``), after the
    arguments before the list (PyTorch's ``einsum(equation, *operands)``); one list or
    tuple in its place is taken as the tensors too."""
    import inspect

    call = packet.function
    sig = packet.__signature__
    params = list(sig.parameters.values())
    schema = packet.all_overloads()[0].schema
    pos = next(i for i, a in enumerate(schema.arguments) if a.type.is_tensor_list)

    def function(*args, **kwargs):
        head, tensors = args[:pos], args[pos:]
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        return call(*head, list(tensors), **kwargs)

    star = params[pos].replace(kind=inspect.Parameter.VAR_POSITIONAL,
                               default=inspect.Parameter.empty)
    function.__signature__ = sig.replace(parameters=[*params[:pos], star, *params[pos + 1:]])
    function.__name__ = function.__qualname__ = name
    function.__doc__ = packet.__doc__
    function.op = packet
    return function


def _packet(name):
    try:
        return lookup(name)
    except ValueError:
        return None


def install(namespace: dict) -> None:
    """Bind namespace functions into ``namespace`` and methods/operators onto Tensor."""
    for decl in CATALOGUE.values():
        if not decl.overloads:
            continue
        packet = decl.overloads[0].overloadpacket
        if packet.namespace != "aten":
            continue
        packet.__doc__ = packet.function.__doc__ = _doc(decl)
        for name in decl.names:
            namespace[name] = _star(packet, name) if decl.star_args else packet.function
        varargs = getattr(decl, "varargs", False)
        for m in decl.methods:
            if m.endswith("_"):  # only the in-place method (copy_ has no method copy)
                setattr(Tensor, m, _method(decl.inplace[0].overloadpacket, varargs))
                continue
            setattr(Tensor, m, _torch_method(packet, set(decl.method_overloads), varargs)
                    if decl.method_overloads else _method(packet, varargs))
            if decl.inplace:
                inplace_packet = decl.inplace[0].overloadpacket
                setattr(Tensor, m + "_", _method(inplace_packet, varargs))
    for dunder, (name, kind) in OPERATORS.items():
        packet = _packet(name)
        if packet is None:
            continue
        if kind in ("binary", "inplace"):
            setattr(Tensor, dunder, _binary(packet, False))
        elif kind == "reflected":
            setattr(Tensor, dunder, _binary(packet, True))
        else:
            assert kind == "unary", (dunder, kind)
            setattr(Tensor, dunder, _unary(packet))
    from .indexing import getitem, setitem
    from .manipulation import install_tensor_methods

    install_tensor_methods()
    from . import _torch_methods

    _torch_methods.install()

    Tensor.__getitem__ = getitem
    Tensor.__setitem__ = setitem
    Tensor.__hash__ = Tensor.__dict__.get("__hash__") or object.__hash__


def _doc(decl) -> str:
    lines = [f"``{decl.name}``: mdtensor operator (schemas below).", ""]
    lines += [f"    {op.schema}" for op in decl.overloads]
    if decl.kwarg_aliases:
        lines += ["", "Keyword aliases: " + ", ".join(f"{k}= for {v}="
                                                      for k, v in decl.kwarg_aliases.items())]
    return "\n".join(lines)
