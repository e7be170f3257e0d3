"""Callers: the functions an operator call runs before its kernel.

An overload's *caller* (``OpOverload.caller``, ``make_caller``) computes the call's key
set and calls the table entry for it; a packet's *function* (``md.exp``,
``OpOverloadPacket.function``, ``packet_function``) resolves the overload of a call from
its argument types (``resolution``) and calls that overload's caller -- or, for the commonest
calls, does the caller's work itself (Note [Inline dispatch] in inline.py).

Note [The hot path]
~~~~~~~~~~~~~~~~~~~
``OpOverload.__call__`` is a closure made once per overload (``make_caller``).  For the
common case -- all Tensor arguments are required positional arguments, passed positionally
-- it does::

    def call(a=_NO, b=_NO, /, *args, **kwargs):   # add.Tensor: Tensors at 0 and 1
        kernel = dispatch_kernel(op, table, a, b)   # inlined: Note [Inline dispatch]
        return kernel(a, b)                         # (a, b, *args, **kwargs) if any

No binding, no string work, no exceptions when the arguments are Tensors.  Positional
``Tensor?`` arguments, or more than three Tensors (batch norm's input, weight, bias and
running statistics), are read by position with ``None`` skipped where the schema allows it.
Anything else (a Tensor passed by keyword or omitted, ``Tensor[]`` arguments, a non-Tensor
where a Tensor is expected) takes ``_slow_keyset``, which walks the schema.

Above it, a packet call (``md.exp(x)``) finds the overload's caller in a dict keyed by the
argument types: for one positional argument the key is the type itself, for two a pair,
and the caller is then called with the arguments spread (``caller(a)``), not re-packed.
Longer calls, and calls with keywords, skip the caller once their key has a plan (Note
[Plans of long calls]).

Note [Packet functions]
~~~~~~~~~~~~~~~~~~~~~~
Calling an instance of a Python class goes through its type's ``__call__`` slot: CPython
packs the arguments into a tuple and a dict and looks the method up, about 0.1 us more than
calling a function, which takes the vectorcall path.  So a packet's call is a closure,
``packet._call``, and that closure is what the namespaces hold: ``md.sum`` is
``md.ops.aten.sum._call`` (``md.sum.op`` is the packet, as ``torch.add`` is a builtin and
``torch.ops.aten.add`` the packet), and hot code inside mdtensor -- derivative formulas, the
engine, Functionalize -- calls ``aten_calls`` (``from mdtensor.dispatch.namespaces import
aten_calls as aten``), the same
functions by name.  Measured in one process on 8-element float32 tensors, packet then
function: ``md.exp(x)`` 1.21 -> 1.06 us, ``md.sum(x, axis=0)`` 2.47 -> 2.28 us.  Everyone
else calls the packet (``md.ops.aten.sum(x)``, ``md.nn.functional``'s kernels, the sweep),
so ``OpOverloadPacket.__call__`` is a property giving ``_call``: the type's call slot reads
it in C and calls the function with the call's own arguments, where a forwarding method
cost a frame and a star call (``md.ops.aten.exp(x)``: 1.33 -> 1.20 us, best of 9).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .inline import dispatch_kernel, inline_dispatch
from .resolution import resolve, schema_class
from .schema import FunctionSchema
from .tls import dispatch_tls

if TYPE_CHECKING:
    from .namespaces import OpOverloadPacket
    from .operators import OpOverload

__all__ = ["fast_tensor_positions", "make_caller", "packet_function"]


def fast_tensor_positions(schema: FunctionSchema) -> tuple[int, ...] | None:
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


def positional_tensor_positions(schema: FunctionSchema):
    """``(positions, optional, keyword)``: the positions of the Tensor arguments, those
    among them that may be None, and the names of the keyword-only ``Tensor?`` arguments
    (``searchsorted``'s ``sorter``), when every other Tensor-like argument is a positional
    ``Tensor`` or ``Tensor?`` (no ``Tensor[]``, no other keyword-only Tensor); else None.
    A call passing a keyword-only Tensor is not read by position: its caller takes the
    slow path, and no plan serves it."""
    positions, optional, keyword = [], [], []
    for i, a in enumerate(schema.arguments):
        if not a.type.is_tensor_like:
            continue
        if a.type.is_tensor_list or a.kwarg_only and (not a.type.optional or schema.is_out):
            return None
        if a.kwarg_only:
            keyword.append(a.name)
            continue
        positions.append(i)
        if a.type.optional:
            optional.append(i)
    return (tuple(positions), frozenset(optional), tuple(keyword)) if positions else None


_NO = object()  # an argument the caller did not pass (see make_caller)

#: the Tensors' positions of the three- and four-argument calls the packet function learns
#: (``leading`` in packet_function), each kept as one object, which the call tests by identity
_AB, _ABC, _AC, _ACD = (0, 1), (0, 1, 2), (0, 2), (0, 2, 3)
_LEARNED_POSITIONS = {at: at for at in (_AB, _ABC, _AC, _ACD)}
_tls_get = dispatch_tls.get


def _lone_list_first(params) -> bool:
    """Whether the schema's only Tensor-like argument is a positional ``Tensor[]`` first."""
    lists = [a for a in params if a.type.is_tensor_like]
    return (len(lists) == 1 and params and params[0] is lists[0] and lists[0].type.is_list
            and not (params[0].kwarg_only or params[0].type.optional
                     or params[0].type.elem_optional))


# Note [Star calls]
# ~~~~~~~~~~~~~~~~~~
# Forwarding ``*args, **kwargs`` is the dearest thing a forwarding function does: the call
# ``f(a, *args, **kwargs)`` builds a fresh tuple and copies the dict (CALL_FUNCTION_EX), and
# the callee packs them again.  A forwarder that names the argument instead --
# ``def call(a, b=_NO, /, *args, **kwargs)`` calling ``kernel(a, b)`` -- costs 0.23 us
# against 0.56 us for the star form (CPython 3.11, same machine).  ``md.sum(x, 0)``,
# ``x[1:3]`` and ``x.transpose(0, 1)`` pass one argument after the Tensor through the
# caller, the generic kernel and the view kernel, so each names it.


@inline_dispatch
def make_caller(op: OpOverload) -> Callable:
    """Build the per-overload entry point (see Note [The hot path])."""
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
            try:
                kernel = dispatch_kernel(op, table, a)
            except AttributeError:
                return slow_call((a, b), args, kwargs)
            if b is _NO:
                return kernel(a, **kwargs) if kwargs else kernel(a)
            if args or kwargs:
                return kernel(a, b, *args, **kwargs)
            return kernel(a, b)
    elif pos == (0,):
        def call(a=_NO, /, *args, **kwargs):
            try:
                kernel = dispatch_kernel(op, table, a)
            except AttributeError:
                return slow_call((a,), args, kwargs)
            if args or kwargs:
                return kernel(a, *args, **kwargs)
            return kernel(a)
    elif pos == (0, 1):
        def call(a=_NO, b=_NO, /, *args, **kwargs):
            try:
                kernel = dispatch_kernel(op, table, a, b)
            except AttributeError:
                return slow_call((a, b), args, kwargs)
            if args or kwargs:
                return kernel(a, b, *args, **kwargs)
            return kernel(a, b)
    elif pos == (0, 1, 2):
        def call(a=_NO, b=_NO, c=_NO, /, *args, **kwargs):
            try:
                kernel = dispatch_kernel(op, table, a, b, c)
            except AttributeError:
                return slow_call((a, b, c), args, kwargs)
            return kernel(a, b, c, *args, **kwargs)
    elif pos or (loose := positional_tensor_positions(op._schema)) is not None:
        # Tensors at other positions (index_select's self and index: 0 and 2), Tensor?
        # arguments or more than three Tensors: their key sets read by position, without
        # walking the schema, None skipped where the schema allows it, and a trailing
        # ``Tensor?`` left out too (``bincount(x)``: 3.27 -> 2.20 us, as ``bincount(x,
        # None)``); a Tensor by keyword, too few arguments or a non-Tensor take the slow
        # path and its errors.
        at, optional, keyword = (pos, frozenset(), ()) if pos else loose
        omittable = {i: params[i].name for i in optional if params[i].has_default}

        def call(*args, **kwargs):
            if keyword and kwargs:  # a keyword-only Tensor passed: the schema's walk
                for name in keyword:
                    if kwargs.get(name) is not None:
                        return slow_call((), args, kwargs)
            ks = 0
            n = len(args)
            try:
                for i in at:
                    if i < n:
                        v = args[i]
                        if v is not None or i not in optional:
                            ks |= v._ks
                    elif i not in omittable or omittable[i] in kwargs:
                        return slow_call((), args, kwargs)
            except AttributeError:
                return slow_call((), args, kwargs)
            inc, keep = _tls_get()
            ks = (ks | inc) & keep & op.mask
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            return kernel(*args, **kwargs)
    elif _lone_list_first(params):
        # A Tensor[] first and no other Tensor (cat, stack, meshgrid): the key set from the
        # list's Tensors without walking the schema; anything else (a generator, a
        # non-Tensor element, a keyword) takes the slow path and its errors.
        def call(tensors=_NO, /, *args, **kwargs):
            if type(tensors) is list or type(tensors) is tuple:
                try:
                    kernel = dispatch_kernel(op, table, *tensors)
                except AttributeError:
                    return slow_call((tensors,), args, kwargs)
                return kernel(tensors, *args, **kwargs)
            return slow_call((tensors,), args, kwargs)
    elif pos == ():  # no Tensor arguments (factories): the thread-local keys alone
        def call(*args, **kwargs):
            kernel = dispatch_kernel(op, table)
            return kernel(*args, **kwargs)
    else:
        def call(*args, **kwargs):
            ks = slow(args, kwargs)
            kernel = table.get(ks)
            if kernel is None:
                kernel = miss(ks)
            return kernel(*args, **kwargs)
    call.__name__ = op._schema.name
    call.__qualname__ = op._name
    call.op = op  # for the Python operators' inline dispatch (ops/_methods.py)
    return call


# Note [Keyword calls]
# ~~~~~~~~~~~~~~~~~~~~
# PyTorch's argument parser passes positional parameters given by keyword positionally, and
# so does resolution (``_positional_by_keyword`` in resolution.py): ``md.sum(x, 1,
# keepdims=True)`` resolves to an adapter that calls the overload's caller as ``(x, 1,
# True)``.  Two frames and two star calls for a call with keywords cost as much as
# the rest of ``sum``, so when every keyword moves and the overload's one Tensor leads,
# resolution also records ``(overload, table, keyword names)`` under the call's key
# (``packet._by_keywords``), and the packet function dispatches inline and calls the kernel
# with the keywords' values in parameter order.  One keyword naming the next parameter
# (``md.sum(x, axis=0)``) has its own, cheaper path above (``_by_position``), and so has one
# keyword-only argument after the Tensor (``md.tril(x, k=1)``, the standard's
# ``vector_norm(x, axis=1)``): resolution records ``(overload, table)`` under the call's key
# (``packet._by_keyword_only``) and the packet function calls the kernel with the call's
# own kwargs, skipping the overload's caller and its star call (30.6K -> 28.2K
# instructions for ``md.tril(x, k=0)``).


# Note [Plans of long calls]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# A call of five or more positional arguments (``native_batch_norm_backward``'s ten,
# ``col2im``'s six), or one with keywords that the paths above leave (``addmm(s, a, b,
# beta=0.5, alpha=2)``), went from its resolution key to the overload's caller with a star
# call, and the caller made another into the kernel: about 1.5 us of frames and packing
# around kernels of a few microseconds.  The resolution key says more than which overload:
# it holds each argument's type, so at the overload's Tensor positions it tells a Tensor
# from a None.  So the first such call of a key also learns a *plan*, ``(overload, table,
# positions of the Tensors)`` (``_plan``), and later calls of that key read the key set from
# those positions, look the kernel up in the overload's table and call it with the call's
# own arguments -- the caller's work, without its frame and star call.  Another type is
# another key: a float where an int was, a Tensor where None was, a subclass (learned as no
# plan: ``False``) resolve and run as before.  Only an overload's own caller is planned,
# when it reads its Tensors by position (``fast_tensor_positions`` or
# ``positional_tensor_positions``); an adapter that moves or renames keywords, an overload
# picked by the contents of a list, a Tensor omitted, a ``Tensor[]``, a keyword-only Tensor
# passed (``searchsorted``'s ``sorter=``, read by the caller's schema walk) keep the caller
# (``md.searchsorted(s, q, side="right")``, which took that walk on every call: 33.6K ->
# 23.5K instructions).  The
# table is the overload's own, so modes, autograd, vmap and traces see the same call, and
# the plans are forgotten when the packet's overloads change (``on_change``).  Three and
# four positional arguments have no plan: there a plan's loop over positions cost as much
# as the frame it saves (``md.where(c, x, y)``: 2.12 -> 2.21 us).  The packet function
# learns their overloads instead when their Tensors lead (``mixed3``, ``leading``, ...),
# and dispatches on those Tensors by name, unrolled: ``threshold_backward(g, x, 0.5)``
# 45.8K -> 43.8K instructions, ``where(c, x, y)`` 43.7K -> 42.1K (16x16 float32, ``c``
# made in the call); any other keeps its named call of the caller.
# Callgrind, per call of the sweep's samples: ``native_batch_norm_backward`` 144.7K ->
# 140.5K, ``nll_loss_forward`` 81.1K -> 77.6K, ``col2im`` 187.2K -> 184.1K instructions.
# Five and six positional arguments build the call's tuple and its key from the unpacked
# arguments, not with a star unpacking and ``map(type, ...)`` (the call of
# ``nll_loss_forward``'s five: 60.4K -> 59.3K; ``col2im``'s six: 82.2K -> 81.5K).


def _plan(caller, cached, key, nargs: int):
    """``(overload, its table, the positions of its Tensors)`` for calls of resolution key
    ``key`` (``nargs`` positional arguments), when ``caller`` -- which resolution cached
    under ``key`` as ``cached`` -- is an overload's own caller reading its Tensors by
    position and ``key`` says which are Tensors and which None; else False (Note [Plans of
    long calls])."""
    op = getattr(caller, "op", None)
    if op is None or caller is not cached or caller is not op.caller:
        return False  # an adapter (keywords moved or renamed), or resolved by contents
    at, optional = op.fast_positions, ()
    if at is None:
        loose = positional_tensor_positions(op.schema)
        if loose is None:
            return False  # a Tensor[] or a keyword-only Tensor: the caller's schema walk
        at, optional, keyword = loose
        if keyword and type(key) is tuple and any(name in key for name in keyword):
            return False  # ``sorter=`` given: the caller's schema walk reads it
    Tensor = schema_class("Tensor")  # Note [Schema classes] in resolution.py
    tensors = []
    for i in at:
        if i >= nargs:
            return False  # omitted: the caller's slow path
        if key[i] is Tensor:
            tensors.append(i)
        elif not (key[i] is type(None) and i in optional):
            return False  # a subclass: the caller, as before
    return op, op.table, tuple(tensors)


@inline_dispatch
def packet_function(packet: OpOverloadPacket) -> Callable:
    """Build ``packet._call``: resolve the overload of a call, then call its caller.

    It is a plain function, not the packet's ``__call__``, so that the namespace functions
    (``md.exp``) and the formulas' ``aten`` calls are vectorcalls (Note [Packet
    functions]).
    """
    cache = packet.resolution_cache  # all three cleared in place, never replaced
    by_position = packet._by_position
    by_keywords = packet._by_keywords
    by_keyword_only = packet._by_keyword_only

    # See Note [Inline dispatch] in inline.py: the overloads that one Tensor and a pair of
    # Tensors resolved to; the types stay None (matching no argument) until then, and again
    # after the packet's overloads change.
    one_type = one_op = one_table = None
    two_type = two_op = two_table = None
    # And the overloads of a Tensor and one argument of another type (``sum(g, (0,))``,
    # ``div(g, 8)``), by that type, {type: (op, table)}, or given by the keyword of the
    # next parameter (``sum(x, axis=0)``), by name and type, {name: {type: (op, table)}};
    # ``mixed_first`` is Tensor once one is known.
    mixed: dict = {}
    mixed_kw: dict = {}
    mixed_first = None
    # And those of a Tensor and two positional arguments of other types (``transpose(x,
    # 0, 1)``, ``narrow(x, 0, 2, 4)``'s first three, the backward ops' ``(g, sizes, dim)``),
    # by the pair of types, {(type, type): (op, table)}: without it such a call went
    # through the overload's caller, one frame and a star call more (17.3K -> 15.1K
    # instructions for ``md.transpose(x, 0, 1)``).  Likewise three after the Tensor
    # (``narrow(x, 0, 2, 4)``, ``diagonal(x, 1, 2, 0)``), by the triple of types.
    mixed3: dict = {}
    mixed4: dict = {}
    # And those of two or three Tensors among three or four positional arguments, leading
    # (``threshold_backward(g, x, 0)``, relu's gradient; ``where(c, x, y)``;
    # ``isclose(a, b, rtol, atol)``) or after a dimension (``gather(x, 1, index)``,
    # ``scatter_add(x, 0, index, src)``: Tensors at 0 and 2, or 0, 2 and 3), by the
    # arguments' types, {types: (op, table, positions)}: the overload's caller did the same
    # dispatch one frame and a star call deeper (Note [Plans of long calls] says why no loop
    # over positions: each pattern of positions is a branch of its own).
    leading: dict = {}
    # And those of another type then a Tensor (``polygamma(1, x)``), by the first
    # argument's type; ``mixed_second`` is Tensor once one is known.
    mixed_rev: dict = {}
    mixed_second = None
    # And the overload a list alone resolved to, when its Tensor list is its only Tensor
    # argument (``stack([a, b])``, ``cat([a, b])``): the key set read from the list here,
    # without the list caller's frame (31.4K -> 29.3K instructions for ``md.stack([a, b])``
    # of two (2, 3) tensors); ``list_type`` is list once one is known.
    list_type = list_op = list_table = None
    # And those of a list and the keyword of the next parameter (``stack([a, b], axis=0)``,
    # ``concat(ts, axis=1)``), {name: {type: (op, table)}}: without them such a call went
    # through the overload's caller (38.5K -> 36.8K instructions for ``md.stack([x, x],
    # axis=0)`` of two 16x16 tensors); ``list_kw_first`` is list once one is known.
    list_kw: dict = {}
    list_kw_first = None
    # And the plans of calls of five or more positional arguments, or with keywords the
    # other paths leave, by their resolution key (Note [Plans of long calls]).
    plans: dict = {}

    def learn(key, caller):
        nonlocal one_type, one_op, one_table, two_type, two_op, two_table, mixed_first
        nonlocal mixed_second, list_type, list_op, list_table, list_kw_first
        Tensor = schema_class("Tensor")  # Note [Schema classes] in resolution.py
        op = getattr(caller, "op", None)
        if op is None:
            return
        at = op.fast_positions
        if at is None:
            # Tensors at fixed positions, none optional, and keyword-only ones
            # (``searchsorted``'s sorter, ``diff``'s prepend): the calls learned here pass
            # no keyword Tensor, so their positions are the key set's
            loose = positional_tensor_positions(op.schema)
            if loose is not None and not loose[1]:
                at = loose[0]
        if key is Tensor and at == (0,):
            one_op, one_table, one_type = op, op.table, Tensor
        elif key == (Tensor, Tensor) and at == (0, 1):
            two_op, two_table, two_type = op, op.table, Tensor
        elif (type(key) is tuple and key[0] is Tensor and at == (0,)
                and (len(key) == 2 or (len(key) == 3 and type(key[1]) is str))
                and isinstance(key[-1], type) and not issubclass(key[-1], Tensor)):
            # (Tensor, type) positionally, or (Tensor, name, type) for by_position's calls
            if len(key) == 2:
                mixed[key[1]] = (op, op.table)
            else:
                mixed_kw.setdefault(key[1], {})[key[2]] = (op, op.table)
            mixed_first = Tensor
        elif (type(key) is tuple and len(key) in (3, 4) and key[0] is Tensor
                and at == (0,)
                and all(isinstance(k, type) and not issubclass(k, Tensor) for k in key[1:])):
            # (Tensor, type, type) or (Tensor, type, type, type) positionally
            (mixed3 if len(key) == 3 else mixed4)[key[1:]] = (op, op.table)
            mixed_first = Tensor
        elif (type(key) is tuple and len(key) in (3, 4) and caller is op.caller
                and at in _LEARNED_POSITIONS
                and at[-1] < len(key)
                and all((k is Tensor) if i in at else
                        (isinstance(k, type) and not issubclass(k, Tensor))
                        for i, k in enumerate(key))):
            # (Tensor, Tensor, type...), (Tensor, Tensor, Tensor, type?), (Tensor, type,
            # Tensor, Tensor?) positionally
            leading[key] = (op, op.table, _LEARNED_POSITIONS[at])
        elif (type(key) is tuple and len(key) == 2 and key[1] is Tensor
                and at == (1,)
                and isinstance(key[0], type) and not issubclass(key[0], Tensor)):
            mixed_rev[key[0]] = (op, op.table)  # (type, Tensor) positionally
            mixed_second = Tensor
        elif (type(key) is tuple and len(key) == 3 and key[0] is list
                and type(key[1]) is str and _lone_list_first(op.schema.arguments)):
            list_kw.setdefault(key[1], {})[key[2]] = (op, op.table)  # by_position's key
            list_kw_first = list
        elif key is list and _lone_list_first(op.schema.arguments):
            list_op, list_table, list_type = op, op.table, list

    def forget():
        nonlocal one_type, one_op, one_table, two_type, two_op, two_table, mixed_first
        nonlocal mixed_second, list_type, list_op, list_table, list_kw_first
        one_type = one_op = one_table = two_type = two_op = two_table = mixed_first = None
        mixed_second = list_type = list_op = list_table = list_kw_first = None
        mixed.clear()
        list_kw.clear()
        mixed_kw.clear()
        mixed3.clear()
        mixed4.clear()
        leading.clear()
        mixed_rev.clear()
        plans.clear()

    packet.on_change.append(forget)
    packet.on_resolve.append(learn)

    def call(a=_NO, b=_NO, /, *args, **kwargs):
        # Resolution keys (Note [The hot path]): one positional argument's key is its type
        # itself, no tuple; two positional arguments' a pair of types.  The common calls
        # then call the caller with the arguments named, not through *args (Note [Star
        # calls]).
        hit = None  # a Tensor and one other argument: Note [Inline dispatch]
        key = None
        long = False  # a plan's call (Note [Plans of long calls])
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
                elif type(a) is list_kw_first:  # stack(ts, axis=0): the list's dispatch
                    by_type = list_kw.get(k)
                    if by_type is not None:
                        listed = by_type.get(type(b))
                        if listed is not None:
                            op, table = listed
                            try:
                                kernel = dispatch_kernel(op, table, *a)
                            except AttributeError:  # not a Tensor: the caller's errors
                                kernel = None
                            if kernel is not None:
                                return kernel(a, b)
                if hit is None:
                    key = (type(a), k, type(b))
                    caller = by_position.get(key)  # the keyword is the next parameter
                    if caller is not None:
                        return caller(a, b)
                    kwargs[k] = b
                    plan = by_keyword_only.get(key)
                    if plan is not None:  # See Note [Keyword calls]
                        op, table = plan
                        kernel = dispatch_kernel(op, table, a)
                        return kernel(a, **kwargs)
                    caller = cache.get(key)
                    if caller is not None:
                        return caller(a, **kwargs)
                    b = _NO
            elif b is _NO and a is not _NO and len(kwargs) == 2:  # clamp(x, min=0, max=1)
                # by_keywords' key, as below, without the star calls and maps: the
                # keyword names and value types, popped and put back if no plan matches
                # (the key then serves the long calls' plans below)
                k2, v2 = kwargs.popitem()
                k1, v1 = kwargs.popitem()
                key = (type(a), k1, k2, type(v1), type(v2))
                plan = by_keywords.get(key)
                if plan is not None:  # See Note [Keyword calls]
                    op, table, moved = plan
                    kernel = dispatch_kernel(op, table, a)
                    if moved[0] == k1:
                        return kernel(a, v1, v2)
                    return kernel(a, v2, v1)
                kwargs[k1] = v1
                kwargs[k2] = v2
            elif not args and len(kwargs) == 1:  # isin(x, t, invert=True): the key below,
                (k,) = kwargs  # without its star unpacking, and its plan for the Tensors
                key = (type(a), type(b), k, type(kwargs[k]))  # at 0 (and 1)
                plan = plans.get(key)
                if plan:
                    op, table, at = plan
                    if at == (0, 1):
                        kernel = dispatch_kernel(op, table, a, b)
                        return kernel(a, b, **kwargs)
                    if at == (0,):
                        kernel = dispatch_kernel(op, table, a)
                        return kernel(a, b, **kwargs)
        elif b is not _NO:
            if not args:
                if type(a) is two_type and type(b) is two_type:  # Note [Inline dispatch]
                    kernel = dispatch_kernel(two_op, two_table, a, b)
                    return kernel(a, b)
                if type(a) is mixed_first:
                    hit = mixed.get(type(b))
                elif type(b) is mixed_second:
                    rev = mixed_rev.get(type(a))
                    if rev is not None:
                        op, table = rev
                        kernel = dispatch_kernel(op, table, b)
                        return kernel(a, b)
                if hit is None:
                    caller = cache.get((type(a), type(b)))
                    if caller is not None:
                        return caller(a, b)
            elif len(args) <= 2:  # the backward ops' (grad, self, dim) and the like
                if len(args) == 1:
                    c = args[0]
                    d = _NO
                    if type(a) is mixed_first:
                        three = mixed3.get((type(b), type(c)))
                        if three is not None:
                            op, table = three
                            kernel = dispatch_kernel(op, table, a)
                            return kernel(a, b, c)
                    key = (type(a), type(b), type(c))
                else:
                    c, d = args
                    if type(a) is mixed_first:
                        four = mixed4.get((type(b), type(c), type(d)))
                        if four is not None:
                            op, table = four
                            kernel = dispatch_kernel(op, table, a)
                            return kernel(a, b, c, d)
                    key = (type(a), type(b), type(c), type(d))
                lead = leading.get(key)
                if lead is not None:
                    op, table, at = lead
                    if at is _AB:
                        kernel = dispatch_kernel(op, table, a, b)
                    elif at is _AC:
                        kernel = dispatch_kernel(op, table, a, c)
                    elif at is _ACD:
                        kernel = dispatch_kernel(op, table, a, c, d)
                    else:
                        kernel = dispatch_kernel(op, table, a, b, c)
                    return kernel(a, b, c) if d is _NO else kernel(a, b, c, d)
                # three or four positional arguments: the caller, named (Note [Plans of
                # long calls]: a plan's loop over positions costs as much as its frame)
                caller = cache.get(key)
                if caller is not None:
                    return caller(a, b, c) if d is _NO else caller(a, b, c, d)
            else:  # five or more: the plan's key, then its plan below
                if len(args) == 3:  # five and six: the tuples without a map or a list
                    c, d, e = args
                    args = (a, b, c, d, e)
                    key = (type(a), type(b), type(c), type(d), type(e))
                elif len(args) == 4:
                    c, d, e, f = args
                    args = (a, b, c, d, e, f)
                    key = (type(a), type(b), type(c), type(d), type(e), type(f))
                else:
                    args = (a, b, *args)
                    key = tuple(map(type, args))
                long = True
        elif type(a) is one_type:  # Note [Inline dispatch]
            kernel = dispatch_kernel(one_op, one_table, a)
            return kernel(a)
        elif type(a) is list_type:  # the list caller's dispatch, inline
            try:
                kernel = dispatch_kernel(list_op, list_table, *a)
            except AttributeError:  # not a Tensor: the caller's slow path and its errors
                kernel = None
            if kernel is not None:
                return kernel(a)
            caller = cache.get(list)
            if caller is not None:
                return caller(a)
        elif a is not _NO:
            caller = cache.get(type(a))
            if caller is not None:
                return caller(a)
        if hit is not None:  # (Tensor, value), positionally or by keyword
            op, table = hit
            kernel = dispatch_kernel(op, table, a)
            return kernel(a, b)
        if not long:
            args = (a, b, *args) if b is not _NO else (a,) if a is not _NO else ()
            if kwargs:
                if key is None:
                    key = (*map(type, args), *kwargs, *map(type, kwargs.values()))
                plan = by_keywords.get(key)
                if plan is not None:  # See Note [Keyword calls]
                    op, table, moved = plan
                    kernel = dispatch_kernel(op, table, a)
                    return kernel(*args, *map(kwargs.__getitem__, moved))
                long = True
            else:
                n = len(args)
                key = type(a) if n == 1 else (type(a), type(b)) if n == 2 else tuple(
                    map(type, args))
        if long:  # five or more positional arguments, or keywords: Note [Plans of long calls]
            plan = plans.get(key)
            if plan:
                op, table, at = plan
                inc, keep = _tls_get()
                ks = inc
                for i in at:
                    ks |= args[i]._ks
                ks &= keep & op.mask
                kernel = table.get(ks)
                if kernel is None:
                    kernel = op.fill_entry(ks)
                return kernel(*args, **kwargs) if kwargs else kernel(*args)
            caller = cache.get(key)
            if caller is None:
                caller = resolve(packet, args, kwargs, key)
            if plan is None:  # not yet known: learned once, False where none applies
                plans[key] = _plan(caller, cache.get(key), key, len(args))
            return caller(*args, **kwargs)
        caller = cache.get(key)
        if caller is None:
            caller = resolve(packet, args, kwargs, key)
        return caller(*args, **kwargs)

    call.__name__ = call.__qualname__ = packet._name
    call.op = packet
    call.__wrapped__ = packet  # inspect.signature(md.sum): the packet's __signature__
    return call
