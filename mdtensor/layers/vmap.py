"""``md.func.vmap``: the Batched layer.

Note [The Batched layer]
~~~~~~~~~~~~~~~~~~~~~~~~
``vmap(f)(x)`` calls ``f`` once, on a ``BatchedTensor``: a wrapper that stands for one
element of the batch (its *logical* shape is ``x``'s without the mapped dimension) and
holds the whole batch as its *inner* tensor, with the batch dimension first.  A wrapper
carries the ``Batched`` key, which is above Autograd, ADInplaceOrView and the backends
(DESIGN.md section 2), so every op with a wrapper among its arguments reaches this layer
first.  The layer looks up the op's *batching rule* (``rules``, filled by the catalogue:
ops/batching.py) and the rule computes the op on the inner tensors -- a full dispatch, so
autograd records it, modes see it and every backend runs it -- and wraps the result.  An
op without a rule runs once per batch element and the results are stacked (``loop``),
with a one-time performance warning naming the op, as PyTorch's fallback does: every op
works under ``vmap``, the common ones in one call.

* **Levels.**  Each ``vmap`` call has a level (its depth, from 1).  A wrapper records its
  level; a nested ``vmap`` wraps wrappers of the outer one, so the outermost wrapper has
  the highest level and its inner tensor is a wrapper of the next level down.  The layer
  handles the highest level among an op's arguments, treating wrappers of lower levels as
  plain tensors; the op it calls on their inner tensors reaches the layer again for the
  next level.  The physical tensor of a value batched at levels 1..n has the batch
  dimensions of levels 1..n first, in that order.
* **Autograd under the layer.**  Because autograd is below, it records physical ops on
  physical tensors: ``grad(vmap(f))`` differentiates through the batched computation, and
  in ``vmap(grad(f))`` the transform's variables are batched (an unbatched argument is
  expanded along every active level first, so its gradient is per batch element:
  ``batch_variable``), and ``engine_grad`` runs the engine on the physical tensors and
  wraps the gradients as their variables are wrapped.  A cotangent batched over a graph
  recorded outside ``vmap`` (``vmap(vjp_fn)``) reaches the engine as a wrapper, and the
  formulas run on it through this layer.
* **What cannot be batched** is refused with PyTorch's errors: data-dependent Python
  control flow (``bool``, ``item`` of a wrapper), an in-place op writing a batched value
  into an unbatched tensor, random ops with ``randomness="error"``.
"""

from __future__ import annotations

import functools
import warnings
from contextvars import ContextVar

from mdtensor._pytree import tree_flatten, tree_unflatten
from mdtensor.dispatch.keys import AFTER_BATCHED, DispatchKey
from mdtensor.tensors.tensor import Tensor

__all__ = ["BatchedTensor", "batch_size", "register_rule", "rules", "vmap"]

_BATCHED = DispatchKey.Batched.value

#: the running ``vmap`` calls, innermost last: ``(level, batch size, randomness)``
_levels: ContextVar[tuple] = ContextVar("mdtensor_vmap_levels", default=())

#: op declaration name (``"add"``) or overload name (``"aten::add.Tensor"``) -> batching
#: rule ``rule(call: BatchedCall)``; filled by the catalogue (ops/batching.py) and by
#: ``md.library`` users (``register_vmap``)
rules: dict = {}


def register_rule(name: str, rule) -> None:
    """Make ``rule`` the batching rule of ``name`` (a declaration or overload name)."""
    rules[name] = rule
    _rule_of.clear()


#: ops the fallback has warned about (once per op and process)
_warned: set = set()


class _Logical:
    """What a wrapper's ``_data`` is: the logical shape and dtype (Tensor's metadata
    properties read them); any other use of its array is a bug below the layer."""

    __slots__ = ("shape", "dtype")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getattr__(self, name):
        raise RuntimeError(
            f"vmap: a batched tensor reached a kernel below the Batched layer (it read "
            f"{name!r}): it was passed where the dispatcher does not look for tensors, such "
            f"as an index tensor inside the key of x[key] with x unbatched; batch the "
            f"indexed tensor too (md.func.vmap's in_dims), or use md.take_along_axis")


class BatchedTensor(Tensor):
    """One element of a batch inside ``md.func.vmap`` (Note [The Batched layer])."""

    __slots__ = ("_inner", "_level")

    def __repr__(self) -> str:
        return f"BatchedTensor(level={self._level}, bdim=0, value={self._inner!r})"

    __str__ = __repr__

    # autograd answers for the inner tensor, which the graph is recorded on
    @property
    def requires_grad(self) -> bool:
        return self._inner.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._inner.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> BatchedTensor:
        self._inner.requires_grad_(requires_grad)
        return self

    @property
    def grad_fn(self):
        return self._inner.grad_fn

    def detach(self) -> BatchedTensor:
        return _wrap(self._inner.detach(), self._level)

    @property
    def is_leaf(self) -> bool:
        return self._inner.is_leaf

    @property
    def grad(self):
        g = self._inner.grad
        return None if g is None else _wrap(g, self._level)

    @grad.setter
    def grad(self, value) -> None:
        raise RuntimeError("vmap: setting .grad of a batched tensor is not supported")

    def backward(self, gradient=None, retain_graph=None, create_graph=False) -> None:
        raise RuntimeError("vmap: backward() of a batched tensor is not supported inside "
                           "vmap; use md.func.grad or md.func.vjp, whose variables are "
                           "batched (per-sample gradients)")

    # data-dependent control flow
    def _data_dependent(self, what: str):
        raise RuntimeError(f"vmap: {what} of a batched tensor is data-dependent control "
                           f"flow, which vmap does not support: the value differs between "
                           f"batch elements (compute with md.where instead, or move the "
                           f"computation outside vmap)")

    def item(self):
        self._data_dependent("item()")

    def tolist(self):
        self._data_dependent("tolist()")

    def __bool__(self) -> bool:
        self._data_dependent("bool()")

    def __int__(self) -> int:
        self._data_dependent("int()")

    def __float__(self) -> float:
        self._data_dependent("float()")

    def __complex__(self) -> complex:
        self._data_dependent("complex()")

    def __index__(self) -> int:
        self._data_dependent("an index (__index__)")

    def numpy(self, *, force: bool = False):
        self._data_dependent("numpy()")

    def __array__(self, dtype=None, copy=None):
        self._data_dependent("conversion to an array")

    def __dlpack__(self, *args, **kwargs):
        self._data_dependent("__dlpack__")

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)


def _wrap(inner: Tensor, level: int) -> BatchedTensor:
    """The wrapper of ``inner`` (batch dimension first) at ``level``."""
    t = object.__new__(BatchedTensor)
    logical = object.__new__(_Logical)
    logical.shape = tuple(inner.shape)[1:]
    logical.dtype = inner._data.dtype
    t._data = logical
    t._inner = inner
    t._level = level
    t._device = inner._device
    t._ks = inner._ks | _BATCHED
    t._vc = None
    t._view = None
    t._ag = None
    return t


def batch_size(level: int) -> int:
    for lvl, size, _ in _levels.get():
        if lvl == level:
            return size
    raise RuntimeError(f"vmap: a batched tensor of level {level} was used outside its vmap")


def _is_batched(v, level: int) -> bool:
    return type(v) is BatchedTensor and v._level == level


def _levels_of(t) -> list[int]:
    out = []
    while type(t) is BatchedTensor:
        out.append(t._level)
        t = t._inner
    return out[::-1]


def _physical(t):
    while type(t) is BatchedTensor:
        t = t._inner
    return t


# ---------------------------------------------------------------------------------------
# The layer's kernel


def _top_level(args, kwargs) -> int:
    level = 0
    for v in (*args, *kwargs.values()):
        if type(v) is BatchedTensor:
            level = max(level, v._level)
        elif isinstance(v, (list, tuple)):
            for x in v:
                if type(x) is BatchedTensor:
                    level = max(level, x._level)
    return level


class BatchedCall:
    """One call of an op at one vmap level, as a batching rule sees it.

    Attributes:
        op: the ``OpOverload``.
        level: the level handled (the highest among the arguments).
        size: the batch size of that level.
        args: ``{argument name: value}`` in schema order, defaults filled in.
    """

    __slots__ = ("op", "level", "size", "args", "_given")

    def __init__(self, op, level: int, args: tuple, kwargs: dict):
        self.op = op
        self.level = level
        self.size = batch_size(level)
        self.args = op.schema.bind(args, kwargs)
        #: the arguments the caller passed (the others are defaults, not passed on)
        self._given = frozenset(kwargs).union(
            name for (name, kwarg_only, _, _), _ in zip(op.schema.binding, args)
            if not kwarg_only)

    def batched(self, name: str) -> bool:
        v = self.args.get(name)
        if isinstance(v, (list, tuple)):
            return any(_is_batched(x, self.level) for x in v)
        return _is_batched(v, self.level)

    def batched_value(self, v) -> bool:
        """Whether the value ``v`` is batched at this level."""
        return _is_batched(v, self.level)

    def ndim(self, name: str) -> int:
        """The logical rank of Tensor argument ``name``."""
        return self.args[name].ndim

    def inner(self, name: str):
        """Argument ``name``'s inner tensor (batch first) if it is batched at this level,
        else its value."""
        v = self.args[name]
        return v._inner if _is_batched(v, self.level) else v

    def expanded(self, v):
        """A tensor value batched at this level: its inner tensor, or an unbatched one
        expanded along a new first dimension of the batch size."""
        if _is_batched(v, self.level):
            return v._inner
        return v.unsqueeze(0).expand((self.size, *v.shape))

    def tensors(self) -> list[str]:
        """The names of the arguments holding a single Tensor."""
        return [a.name for a in self.op.schema.arguments
                if a.type.base == "Tensor" and not a.type.is_list
                and isinstance(self.args.get(a.name), Tensor)]

    def call(this, /, **values):  # noqa: N805 (arguments may be named ``self``)
        """The op with ``values`` replacing arguments (defaults the caller left out stay
        out, unless replaced)."""
        given = this._given
        args = {k: v for k, v in this.args.items() if k in given}
        args.update(values)
        return _invoke(this.op, args)

    def wrap(self, result):
        """Tensors of ``result`` wrapped at this level."""
        return _wrap_result(result, self.level)

    def loop(self):
        return loop(self)


#: op -> its mutable arguments; its rule (None: the fallback)
_mutable: dict = {}
_rule_of: dict = {}


def _invoke(op, args: dict):
    """``op`` called with ``args`` (by name): positionally up to the last positional one
    given (defaults filling the gaps before it), keyword-only ones by keyword."""
    pos, kw, gap = [], {}, []
    for name, kwarg_only, has_default, default in op.schema.binding:
        if kwarg_only:
            if name in args:
                kw[name] = args[name]
        elif name in args:
            pos += gap
            gap = []
            pos.append(args[name])
        elif has_default:
            gap.append(default)
    return op(*pos, **kw)


def _wrap_result(result, level: int):
    if isinstance(result, Tensor):
        return _wrap(result, level)
    if isinstance(result, (list, tuple)):
        return _same_kind(result, [_wrap_result(r, level) for r in result])
    return result


def _same_kind(like, items):
    """``items`` as a list, tuple or named tuple like ``like``."""
    if hasattr(like, "_fields"):
        return type(like)(*items)
    return type(like)(items)


def _mutated(call: BatchedCall) -> list[str]:
    names = _mutable.get(call.op)
    if names is None:
        names = _mutable[call.op] = tuple(a.name for a in call.op.schema.arguments
                                          if a.is_mutable)
    return [n for n in names if n in call.args]


def check_writes(call: BatchedCall) -> None:
    """An in-place or ``out=`` op may write a batched value only into a batched tensor
    (PyTorch's error)."""
    mutated = _mutated(call)
    if not mutated:
        return
    for name in mutated:
        if not call.batched(name):
            others = [a for a in call.args if a not in mutated and call.batched(a)]
            raise RuntimeError(
                f"vmap: {call.op.name}: an in-place write of a batched value into an "
                f"unbatched tensor is not possible: '{name}' is not batched but "
                f"{', '.join(repr(o) for o in others)} is (each batch element would write "
                f"its own value into the same tensor); make '{name}' batched, or use the "
                f"out-of-place op")


def _kernel(op, ks, args, kwargs):
    level = _top_level(args, kwargs)
    if not level:  # the key came from the thread-local include set, not from a tensor
        return op.redispatch(ks & AFTER_BATCHED, *args, **kwargs)
    call = BatchedCall(op, level, args, kwargs)
    check_writes(call)
    rule = _rule_of.get(op, _rule_of)
    if rule is _rule_of:
        decl = op.decl
        rule = rules.get(op.name)
        if rule is None and decl is not None:
            rule = rules.get(decl.name)
        _rule_of[op] = rule
    if rule is None:
        composite = op.kernels_for(DispatchKey.CompositeImplicitAutograd)
        if composite:  # decomposed: its parts reach the layer (PyTorch's functorch too)
            return composite[-1].fn(*args, **kwargs)
        return loop(call)
    return rule(call)


class VmapInfo:
    """What a user's batching rule is told about the vmap (torch.library's
    ``VmapInfo``)."""

    __slots__ = ("batch_size", "randomness")

    def __init__(self, batch_size: int, randomness: str):
        self.batch_size = batch_size
        self.randomness = randomness


def user_rule(op, func):
    """A rule calling ``func(info, in_dims, *args, **kwargs) -> (output, out_dims)``
    (``md.library.register_vmap``)."""

    def rule(call: BatchedCall):
        pos, kw, dims = [], {}, []
        for name, kwarg_only, _, _ in op.schema.binding:
            if name not in call.args:
                continue
            if kwarg_only:
                kw[name] = call.inner(name)
            else:
                pos.append(call.inner(name))
                dims.append(0 if call.batched(name) else None)
        randomness = next(r for lvl, _, r in _levels.get() if lvl == call.level)
        out, out_dims = func(VmapInfo(call.size, randomness), tuple(dims), *pos, **kw)
        single = isinstance(out, Tensor)
        outs = [out] if single else list(out)
        if isinstance(out_dims, int) or out_dims is None:
            out_dims = [out_dims] * len(outs)
        if len(out_dims) != len(outs):
            raise ValueError(f"vmap: the batching rule of {op.name} returned {len(outs)} "
                             f"outputs but {len(out_dims)} out_dims")
        moved = []
        for o, d in zip(outs, out_dims):
            if d is None:
                o = o.unsqueeze(0).expand((call.size, *o.shape))
            elif d % o.ndim:
                o = _aten("moveaxis")(o, [d], [0])
            moved.append(_wrap(o, call.level))
        return moved[0] if single else _same_kind(out, moved)

    rule.__name__ = rule.__qualname__ = f"user_batching_rule[{op.name}]"
    return rule


# ---------------------------------------------------------------------------------------
# md.autograd.Function under vmap


class _AtLevel:
    """The vmap level ``level`` running for a block (entered again if it has ended: the
    backward of ``grad(vmap(f))`` runs after ``vmap`` returned)."""

    __slots__ = ("entry", "token")

    def __init__(self, entry):
        self.entry = entry
        self.token = None

    def __enter__(self):
        stack = _levels.get()
        if not any(lvl == self.entry[0] for lvl, _, _ in stack):
            self.token = _levels.set((*stack, self.entry))

    def __exit__(self, *exc):
        if self.token is not None:
            _levels.reset(self.token)


def apply_function(cls, args, kwargs, function_base):
    """``cls.apply(*args)`` of an ``md.autograd.Function`` with batched arguments
    (PyTorch's ``generate_vmap_rule = True``): ``forward`` and ``backward`` run on
    batched tensors, through the Batched layer, inside a Function of the physical tensors
    that autograd records (``function_base``: ``md.autograd.Function``, which calls this)."""
    level = _top_level(args, kwargs)
    name = cls.__name__
    if not getattr(cls, "generate_vmap_rule", False):
        raise RuntimeError(
            f"vmap: the autograd.Function {name} has no vmap support: set "
            f"generate_vmap_rule = True on it (forward and backward are then run on "
            f"batched tensors), as in PyTorch")
    entry = next(e for e in _levels.get() if e[0] == level)
    size = entry[1]
    batched = [_is_batched(a, level) for a in args]
    kw_batched = {k for k, v in kwargs.items() if _is_batched(v, level)}
    if kw_batched:
        raise RuntimeError(f"vmap: {name}.apply got batched keyword arguments "
                           f"({', '.join(sorted(kw_batched))}); pass tensors positionally")
    shape = {}

    def to_physical(out):
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        shape["single"] = single
        phys = tuple(o._inner if _is_batched(o, level) else
                     o.unsqueeze(0).expand((size, *o.shape)) if isinstance(o, Tensor) else o
                     for o in outs)
        return phys[0] if single else phys

    class Batched(function_base):
        @staticmethod
        def forward(ctx, *phys):
            ctx.inner_ctx = ctx
            with _AtLevel(entry):
                wrapped = [_wrap(p, level) if b else p for p, b in zip(phys, batched)]
                return to_physical(cls.forward(ctx, *wrapped, **kwargs))

        @staticmethod
        def backward(ctx, *grads):
            with _AtLevel(entry):
                res = cls.backward(ctx, *(None if g is None else _wrap(g, level)
                                          for g in grads))
            res = res if isinstance(res, tuple) else (res,)
            out = []
            for g, b in zip(res, batched):
                if not isinstance(g, Tensor):
                    out.append(g)
                elif _is_batched(g, level):  # per element; summed for a shared input
                    out.append(g._inner if b else g._inner.sum(axis=0))
                else:  # the same for every element
                    out.append(g.unsqueeze(0).expand((size, *g.shape)) if b else g * size)
            return tuple(out) + tuple(res[len(batched):])

    Batched.__name__ = Batched.__qualname__ = name
    phys = Batched.apply(*(a._inner if b else a for a, b in zip(args, batched)))
    if shape["single"]:
        return _wrap(phys, level)
    return tuple(_wrap(p, level) if isinstance(p, Tensor) else p for p in phys)


# ---------------------------------------------------------------------------------------
# The fallback: one call per batch element


class PerformanceWarning(UserWarning):
    """An op without a batching rule ran once per batch element under ``vmap``."""


def loop(call: BatchedCall):
    """Run the op once per batch element and stack the results (Note [The Batched
    layer])."""
    op = call.op
    if op.name not in _warned:
        _warned.add(op.name)
        warnings.warn(f"vmap: there is no batching rule for {op.name}; it runs once per "
                      f"batch element and the results are stacked, which is slow. (This "
                      f"warning is shown once per op.)", PerformanceWarning, stacklevel=4)
    level = call.level

    def element(v, i):
        if _is_batched(v, level):
            return v._inner[i]
        if isinstance(v, (list, tuple)) and any(_is_batched(x, level) for x in v):
            return type(v)(element(x, i) for x in v)
        return v

    if call.size == 0:
        raise RuntimeError(f"vmap: {op.name} has no batching rule, and its fallback cannot "
                           f"run over a batch of size 0")
    results = [_invoke(op, {k: element(v, i) for k, v in call.args.items()})
               for i in range(call.size)]
    mutated = _mutated(call)
    if mutated and (op.schema.is_inplace or op.schema.is_out):
        # each element wrote into its own slice of the batched tensor(s)
        outs = [call.args[n] for n in mutated]
        return outs[0] if len(outs) == 1 else tuple(outs)
    return _stack_results(op, results, level)


def _aten(name: str):
    """The operator packet ``aten::name`` (from the dispatcher's registry: the core does
    not import the catalogue)."""
    from mdtensor.dispatch.namespaces import lookup

    return lookup(f"aten::{name}")


def _stack_results(op, results, level):
    first = results[0]
    if isinstance(first, Tensor):
        shapes = {tuple(r.shape) for r in results}
        if len(shapes) > 1:
            raise RuntimeError(
                f"vmap: {op.name} gave results of different shapes for different batch "
                f"elements ({', '.join(str(s) for s in sorted(shapes))}): its output shape "
                f"depends on the values, which vmap cannot batch")
        return _wrap(_aten("stack")(list(results)), level)
    if isinstance(first, (list, tuple)):
        if len({len(r) for r in results}) > 1:
            raise RuntimeError(f"vmap: {op.name} gave a different number of results for "
                               f"different batch elements; vmap cannot batch it")
        return _same_kind(first, [_stack_results(op, [r[j] for r in results], level)
                                  for j in range(len(first))])
    if all(r == first for r in results):
        return first
    raise RuntimeError(f"vmap: {op.name} returned {type(first).__name__} values that differ "
                       f"between batch elements; vmap needs Tensor results")


# ---------------------------------------------------------------------------------------
# vmap


def _check_randomness(randomness) -> None:
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"vmap: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")


def random_batch() -> tuple:
    """The leading shape a random op inside ``vmap`` draws (the batch sizes of the levels
    with ``randomness="different"``, outermost first) and those levels; raises for
    ``randomness="error"``.  ``((), ())`` outside vmap."""
    shape, levels = [], []
    for level, size, randomness in _levels.get():
        if randomness == "error":
            raise RuntimeError("vmap: called a random operation while in vmap with "
                               "randomness='error'; pass randomness='different' (a separate "
                               "draw per batch element) or 'same' (one draw for the batch)")
        if randomness == "different":
            shape.append(size)
            levels.append(level)
    return tuple(shape), tuple(levels)


def wrap_levels(t: Tensor, levels: tuple) -> Tensor:
    """``t``, whose leading dimensions are the batches of ``levels`` (ascending), as a
    batched tensor of those levels."""
    for level in levels:
        t = _wrap(t, level)
    return t


def _in_dims(in_dims, args):
    """One in_dim (int or None) per flattened argument leaf."""
    if isinstance(in_dims, int) or in_dims is None:
        leaves, spec = tree_flatten(args)
        return leaves, spec, [in_dims] * len(leaves)
    if not isinstance(in_dims, tuple):
        raise ValueError(f"vmap: in_dims must be an int, None or a tuple matching the "
                         f"positional arguments, got {type(in_dims).__name__}")
    if len(in_dims) != len(args):
        raise ValueError(f"vmap: in_dims is a tuple of {len(in_dims)} but the function was "
                         f"called with {len(args)} positional arguments; they must match")
    leaves, dims = [], []
    for a, d in zip(args, in_dims):
        a_leaves, _ = tree_flatten(a)
        if isinstance(d, int) or d is None:
            dims += [d] * len(a_leaves)
        else:
            d_leaves, d_spec = tree_flatten(d)
            _, a_spec = tree_flatten(a)
            if d_spec != a_spec:
                raise ValueError(f"vmap: in_dims {d!r} does not match the structure of its "
                                 f"argument")
            dims += d_leaves
        leaves += a_leaves
    _, spec = tree_flatten(args)
    return leaves, spec, dims


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size=None):
    """Vectorize ``func`` over a dimension of its inputs (torch.func's ``vmap``).

    Args:
        func: a function of tensors (pytrees of tensors) returning tensors.
        in_dims: the mapped dimension of each positional argument: an int (every tensor),
            None (not mapped), or a tuple with one entry per argument (each an int, None,
            or a pytree matching the argument).
        out_dims: where the batch dimension goes in each output (int, or a tuple matching
            the outputs).
        randomness: what random ops inside do: ``"error"``, ``"different"`` (a separate
            draw per element) or ``"same"``.
        chunk_size: None (the whole batch at once) or a positive int: the batch is
            processed that many elements at a time (less memory).

    Returns:
        the batched function.
    """
    _check_randomness(randomness)
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"vmap: chunk_size must be None or a positive int, got "
                         f"{chunk_size!r}")
    if not callable(func):
        raise TypeError(f"vmap: expected a function, got {type(func).__name__}")

    @functools.wraps(func)
    def batched(*args, **kwargs):
        leaves, spec, dims = _in_dims(in_dims, args)
        size = None
        for v, d in zip(leaves, dims):
            if d is None:
                continue
            if not isinstance(v, Tensor):
                raise ValueError(f"vmap: in_dim {d} was given for a {type(v).__name__} "
                                 f"argument; only Tensors can be mapped (use None)")
            if not isinstance(d, int) or not -v.ndim <= d < max(v.ndim, 1) or v.ndim == 0:
                raise ValueError(f"vmap: in_dim {d!r} is out of range for a Tensor of shape "
                                 f"{tuple(v.shape)}")
            n = v.shape[d]
            if size is not None and n != size:
                raise ValueError(f"vmap: the mapped dimensions of the inputs have different "
                                 f"sizes ({size} and {n}); they must be equal")
            size = n
        if size is None:
            raise ValueError("vmap: at least one input must be a Tensor mapped over (all "
                             "in_dims are None, or no Tensor was passed)")
        if chunk_size is None or chunk_size >= size:
            return _run(func, leaves, spec, dims, kwargs, size, out_dims, randomness)
        parts = []
        for start in range(0, size, chunk_size):
            n = min(chunk_size, size - start)
            part = [v.narrow(d, start, n) if d is not None else v
                    for v, d in zip(leaves, dims)]
            parts.append(_run(func, part, spec, dims, kwargs, n, out_dims, randomness))
        return _concat_chunks(parts, out_dims)

    return batched


def _run(func, leaves, spec, dims, kwargs, size, out_dims, randomness):
    stack = _levels.get()
    level = len(stack) + 1
    token = _levels.set((*stack, (level, size, randomness)))
    try:
        wrapped = [v if d is None else _wrap(_aten("moveaxis")(v, [d], [0]), level)
                   for v, d in zip(leaves, dims)]
        out = func(*tree_unflatten(wrapped, spec), **kwargs)
    finally:
        _levels.reset(token)
    return _unwrap_outputs(out, out_dims, level, size)


def _unwrap_outputs(out, out_dims, level, size):
    leaves, spec = tree_flatten(out)
    if isinstance(out_dims, int) or out_dims is None:
        dims = [out_dims] * len(leaves)
    else:
        d_leaves, d_spec = tree_flatten(out_dims)
        if d_spec == spec:
            dims = d_leaves
        elif isinstance(out_dims, tuple) and isinstance(out, tuple) and \
                len(out_dims) == len(out):
            dims = []
            for o, d in zip(out, out_dims):
                dims += [d] * len(tree_flatten(o)[0])
        else:
            raise ValueError(f"vmap: out_dims {out_dims!r} does not match the structure of "
                             f"the outputs")
    result = []
    for v, d in zip(leaves, dims):
        if v is None:  # an op's undefined output (a masked-out gradient)
            result.append(v)
            continue
        if not isinstance(v, Tensor):
            raise ValueError(f"vmap: the function must return Tensors (or pytrees of "
                             f"Tensors), got {type(v).__name__}")
        if _is_batched(v, level):
            inner = v._inner
            if d is None:
                raise ValueError("vmap: out_dims is None for an output that is batched; "
                                 "None is only for outputs that do not depend on the "
                                 "mapped inputs")
        else:
            if d is None:
                result.append(v)
                continue
            inner = v.unsqueeze(0).expand((size, *v.shape))
        nd = inner.ndim
        if not -nd <= d < nd:
            raise ValueError(f"vmap: out_dim {d} is out of range for an output of "
                             f"{nd - 1} dimensions")
        result.append(inner if d % nd == 0 else _aten("moveaxis")(inner, [0], [d]))
    return tree_unflatten(result, spec)


def _concat_chunks(parts, out_dims):
    leaves0, spec = tree_flatten(parts[0])
    if isinstance(out_dims, int) or out_dims is None:
        dims = [out_dims] * len(leaves0)
    else:
        dims = tree_flatten(out_dims)[0]
        if len(dims) != len(leaves0):
            dims = [d for o, d in zip(parts[0], out_dims) for _ in tree_flatten(o)[0]]
    flat = [tree_flatten(p)[0] for p in parts]
    out = []
    for j, d in enumerate(dims):
        pieces = [f[j] for f in flat]
        out.append(pieces[0] if d is None else _aten("cat")(pieces, axis=d))
    return tree_unflatten(out, spec)


# ---------------------------------------------------------------------------------------
# The autograd engine on batched tensors (Note [The Batched layer])


def active_levels() -> tuple:
    """``((level, size), ...)`` of the running vmap calls, outermost first."""
    return tuple((lvl, size) for lvl, size, _ in _levels.get())


def with_levels(t: Tensor, levels) -> Tensor:
    """``t`` batched at every one of ``levels`` (``[(level, size)]`` ascending): where it
    is not, expanded along a new batch dimension (a view)."""
    if not levels:
        return t
    level, size = levels[-1]
    if _is_batched(t, level):
        return _wrap(with_levels(t._inner, levels[:-1]), level)
    inner = with_levels(t, levels[:-1])
    return _wrap(inner.unsqueeze(0).expand((size, *inner.shape)), level)


def batch_variable(x: Tensor) -> Tensor:
    """A differentiation transform's argument ``x``, batched at every running vmap level
    (the per-sample rule of Note [The Batched layer])."""
    levels = active_levels()
    if not levels:
        return x
    return with_levels(x, levels)


def _union_levels(tensors) -> list:
    sizes = dict(active_levels())
    seen = set()
    for t in tensors:
        seen.update(_levels_of(t))
    return [(lvl, sizes[lvl]) for lvl in sorted(seen) if lvl in sizes]


def engine_grad(grad_fn, outputs, inputs, grad_outputs, **kwargs):
    """``grad_fn(outputs, inputs, grad_outputs, **kwargs)`` (``md.autograd.grad``) where
    outputs or inputs may be batched: run on the physical tensors, the gradients wrapped as
    their inputs are."""
    if not any(type(t) is BatchedTensor for t in (*outputs, *inputs)):
        return grad_fn(outputs, inputs, grad_outputs, **kwargs)
    levels = _union_levels([*outputs, *inputs])
    for t in inputs:
        if len(_levels_of(t)) != len(levels):
            raise RuntimeError("vmap: differentiating with respect to a tensor that is not "
                               "batched at every vmap level of the outputs is not supported "
                               "(use md.func.grad/vjp inside vmap: their variables are "
                               "batched)")
    outs = [_physical(with_levels(o, levels)) for o in outputs]
    if grad_outputs is None:
        grad_outputs = [None] * len(outputs)
    cots = []
    for o, c in zip(outputs, grad_outputs):
        if c is None:  # the implicit gradient of a (logical) scalar output
            if o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            c = _aten("ones_like")(o)
        cots.append(_physical(with_levels(c, levels)))
    ins = [_physical(t) for t in inputs]
    got = grad_fn(outs, ins, cots, **kwargs)
    return [None if g is None else wrap_levels(g, tuple(_levels_of(t)))
            for g, t in zip(got, inputs)]


def install() -> None:
    """Register the layer's kernel as the Batched key's fallback (mdtensor/_layers.py)."""
    from mdtensor.dispatch.kernel import Kernel
    from mdtensor.dispatch.operators import register_fallback

    register_fallback(Kernel(_kernel, DispatchKey.Batched, boxed=True, name="vmap"))
    from mdtensor import random

    random._under_vmap[:] = [random_batch, wrap_levels]  # random ops inside vmap
