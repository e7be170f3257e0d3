"""Batching rules: how each op of the catalogue runs on a batch under ``md.func.vmap``.

A rule takes a ``BatchedCall`` (mdtensor/layers/vmap.py: the op, the level, the batch size and
the bound arguments) and returns the op's result wrapped at the call's level.  Every
batched argument's inner tensor has the batch dimension first, so most rules only say how
the op's other arguments move when a dimension is put in front: an axis ``a >= 0`` of the
logical tensor is ``a + 1`` of the inner one, a negative axis stays as it is.  Ops without
a rule here decompose (CompositeImplicitAutograd) or run once per batch element (the
layer's fallback, with a warning), so this table is about speed, never about coverage;
tests/test_vmap.py checks every rule against the loop.

Note [Batching rules: when a rule gives up]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A rule handles the common cases and calls ``call.loop()`` (the fallback) for the rest: an
axis out of range (so the error is the op's own, raised on one element), a batched index
tensor, an ``axis=None`` with flattening semantics.  The loop computes the right answer,
only more slowly.
"""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.vmap import register_rule

from ._decl import CATALOGUE

__all__ = ["register"]


class _GiveUp(Exception):
    """A case the rule leaves to the fallback (Note [Batching rules: when a rule gives
    up])."""


def register(*names):
    def deco(rule):
        def guarded(call):
            try:
                return rule(call)
            except _GiveUp:
                return call.loop()

        guarded.__name__ = guarded.__qualname__ = f"batching_rule[{rule.__name__}]"
        for name in names:
            register_rule(name, guarded)
        return rule

    return deco


def _axis(a: int, ndim: int) -> int:
    """Logical axis ``a`` of a rank-``ndim`` tensor as an axis of its inner tensor."""
    if not -ndim <= a < max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
        raise _GiveUp
    if ndim == 0:
        raise _GiveUp
    return a + 1 if a >= 0 else a


def _axes(v, ndim: int):
    if isinstance(v, (list, tuple)):
        return type(v)(_axis(a, ndim) for a in v)
    return _axis(v, ndim)


def _pad(inner, ndim: int, rank: int):
    """``inner`` (batch first, logical rank ``ndim``) with size-1 dimensions after the
    batch dimension up to logical rank ``rank``, so it broadcasts as the logical tensor."""
    if ndim >= rank:
        return inner
    shape = tuple(inner.shape)
    return inner.reshape((shape[0], *([1] * (rank - ndim)), *shape[1:]))


def _result(call, out):
    """The op's result: the batched ``self``/``out`` of an in-place or ``out=`` op, else
    ``out`` wrapped."""
    schema = call.op.schema
    if schema.is_inplace:
        return call.args[schema.arguments[0].name]
    if schema.is_out:
        mutated = [call.args[a.name] for a in schema.arguments if a.is_mutable]
        return mutated[0] if len(mutated) == 1 else tuple(mutated)
    return call.wrap(out)


# ---------------------------------------------------------------------------------------
# Elementwise ops (with broadcasting)


def _broadcasting(call, **values):
    """The op on inner tensors brought to a common logical rank: the batched ones padded
    after the batch dimension, the unbatched ones as they are (they broadcast from the
    right)."""
    names = call.tensors()
    rank = max((call.ndim(n) for n in names), default=0)
    new = {}
    for n in names:
        if call.batched(n):
            new[n] = _pad(call.inner(n), call.ndim(n), rank)
    new.update(values)
    return call.call(**new), rank


def elementwise(call):
    out, _ = _broadcasting(call)
    return _result(call, out)


def _pointwise_names():
    return [name.split("::", 1)[1] for name, d in CATALOGUE.items() if "pointwise" in d.tags]


for _name in (*_pointwise_names(), "where", "clone", "contiguous",
              "contiguous_copy", "lift_fresh", "astype", "to_device_copy", "zeros_like",
              "ones_like", "empty_like", "full_like", "detach", "alias"):
    register(_name)(elementwise)


@register("sigmoid_backward", "tanh_backward")
def _same_shapes(call):
    """Backward helpers whose operands have one shape (their own derivatives assume it):
    an unbatched operand is expanded along the batch, not broadcast."""
    names = call.tensors()
    if len({call.ndim(n) for n in names}) != 1:
        raise _GiveUp
    return call.wrap(call.call(**{n: call.expanded(call.args[n]) for n in names}))


@register("masked_fill", "masked_fill_", "copy", "copy_")
def _into_self(call):
    """Ops whose result has ``self``'s shape, the other operands broadcast into it: an
    unbatched ``self`` of a functional op is expanded along the batch first."""
    if not call.batched("self") and not call.op.schema.is_inplace:
        return elementwise_into(call, self=call.expanded(call.args["self"]))
    return elementwise(call)


def elementwise_into(call, **values):
    names = call.tensors()
    rank = max((call.ndim(n) for n in names), default=0)
    new = {n: _pad(call.inner(n), call.ndim(n), rank) for n in names
           if call.batched(n) and n not in values}
    for n, v in values.items():
        new[n] = _pad(v, call.ndim(n), rank)
    return call.wrap(call.call(**new))


@register("linalg_cross")
def _cross(call):
    na, nb = call.ndim("self"), call.ndim("other")
    rank = max(na, nb)
    axis = call.args["axis"]
    if not -min(na, nb) <= axis < min(na, nb):
        raise _GiveUp
    a = _pad(call.expanded(call.args["self"]), na, rank)
    b = _pad(call.expanded(call.args["other"]), nb, rank)
    return call.wrap(call.call(self=a, other=b, axis=axis - rank if axis >= 0 else axis))


# ---------------------------------------------------------------------------------------
# Ops along axes of one tensor


def _along(call, name: str, none: str):
    """Rule factory input: argument ``name`` holds axes; ``none`` says what None means:
    ``"all"`` (every logical axis), ``"keep"`` (None stays None), ``"flat"`` (the op
    flattens: the rule gives up)."""
    x = call.tensors()[0]
    ndim = call.ndim(x)
    v = call.args.get(name)
    if v is None:
        if none == "all":
            return tuple(range(1, ndim + 1))
        if none == "keep":
            return None
        raise _GiveUp
    return _axes(v, ndim)


def _axis_rule(name: str, none: str = "all"):
    def rule(call):
        x = call.tensors()[0]
        if len([n for n in call.tensors() if call.batched(n)]) != 1 or not call.batched(x):
            raise _GiveUp
        axes = _along(call, name, none)
        return _result(call, call.call(**{x: call.inner(x), name: axes}))
    rule.__name__ = f"along_{name}"
    return rule


_REDUCE = _axis_rule("axis")
for _name in ("sum", "mean", "prod", "amax", "amin", "all", "any", "count_nonzero",
              "logsumexp", "linalg_vector_norm", "aten::max", "aten::min", "aten::std",
              "aten::var", "flip"):
    register(_name)(_REDUCE)
register("fft_fftshift", "fft_ifftshift")(_axis_rule("axes"))
register("aten::std.correction", "aten::var.correction", "aten::std.dim",
         "aten::var.dim")(_axis_rule("dim"))
register("aten::max.dim", "aten::min.dim", "softmax", "log_softmax", "aten::sort.dim",
         "narrow", "narrow_copy")(_axis_rule("dim", "flat"))
for _name in ("argmax", "argmin"):
    register(_name)(_axis_rule("axis", "flat"))
for _name in ("argsort", "aten::sort", "fft_fft", "fft_ifft", "fft_hfft", "fft_ihfft",
              "fft_rfft", "fft_irfft", "chunk", "chunk_copy", "split", "split_copy",
              "unbind", "unbind_copy"):
    register(_name)(_axis_rule("axis", "flat"))


@register("cumulative_sum", "cumulative_prod")
def _scan(call):
    ndim = call.ndim("self")
    if call.args.get("axis") is None and ndim == 1:
        return call.wrap(call.call(self=call.inner("self"), axis=1))
    return _axis_rule("axis", "flat")(call)


@register("fft_fftn", "fft_ifftn", "fft_rfftn", "fft_irfftn")
def _fftn(call):
    ndim = call.ndim("self")
    axes = call.args.get("axes")
    s = call.args.get("s")
    if axes is None:
        axes = tuple(range(-len(s), 0)) if s is not None else tuple(range(ndim))
    if not call.batched("self"):
        raise _GiveUp
    return call.wrap(call.call(self=call.inner("self"), axes=_axes(tuple(axes), ndim)))


@register("fft_fft2", "fft_ifft2", "fft_rfft2", "fft_irfft2")
def _fft2(call):
    axes = call.args.get("axes")
    if not call.batched("self"):
        raise _GiveUp
    axes = (-2, -1) if axes is None else tuple(axes)
    return call.wrap(call.call(self=call.inner("self"), axes=_axes(axes, call.ndim("self"))))


@register("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(call):
    ndim = max(call.ndim("grad_output"), call.ndim("output"))
    if call.ndim("grad_output") != call.ndim("output"):
        raise _GiveUp
    return call.wrap(call.call(grad_output=call.expanded(call.args["grad_output"]),
                               output=call.expanded(call.args["output"]),
                               dim=_axis(call.args["dim"], ndim)))


@register("diff")
def _diff(call):
    ndim = call.ndim("self")
    extra = {k: call.expanded(call.args[k]) for k in ("prepend", "append")
             if call.args.get(k) is not None}
    if any(call.args[k].ndim != ndim for k in extra):
        raise _GiveUp
    return call.wrap(call.call(self=call.expanded(call.args["self"]),
                               axis=_axis(call.args["axis"], ndim), **extra))


@register("take_along_axis", "gather")
def _take_along(call):
    name = "axis" if "axis" in call.args else "dim"
    ndim = call.ndim("self")
    index = "indices" if "indices" in call.args else "index"
    if call.ndim(index) != ndim:
        raise _GiveUp
    return call.wrap(call.call(self=call.expanded(call.args["self"]),
                               **{index: call.expanded(call.args[index]),
                                  name: _axis(call.args[name], ndim)}))


@register("index_select")
def _index_select(call):
    if call.batched("index") or not call.batched("self"):
        raise _GiveUp
    return call.wrap(call.call(self=call.inner("self"),
                               dim=_axis(call.args["dim"], call.ndim("self"))))


# ---------------------------------------------------------------------------------------
# Views and shape ops


def _tuple(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v,)


def _only_self(call):
    if not call.batched("self"):
        raise _GiveUp
    return call.inner("self"), call.ndim("self")


@register("reshape", "view")
def _reshape(call):
    inner, _ = _only_self(call)
    return call.wrap(call.call(self=inner, shape=(call.size, *_tuple(call.args["shape"]))))


@register("view_copy")
def _view_copy(call):
    """A copy, so any layout of the inner tensor will do (``view`` of an inner tensor
    whose batch dimension was moved may need one, and raises as PyTorch's does)."""
    inner, _ = _only_self(call)
    return call.wrap(aten.reshape(inner, (call.size, *_tuple(call.args["shape"])),
                                  copy=True))


@register("expand", "expand_copy", "broadcast_to", "broadcast_to_copy")
def _expand(call):
    inner, ndim = _only_self(call)
    name = "size" if "size" in call.args else "shape"
    shape = _tuple(call.args[name])
    if len(shape) < ndim:
        raise _GiveUp
    return call.wrap(call.call(self=_pad(inner, ndim, len(shape)),
                               **{name: (call.size, *shape)}))


@register("permute", "permute_copy")
def _permute(call):
    inner, ndim = _only_self(call)
    axes = _tuple(call.args["axes"])
    if len(axes) != ndim:
        raise _GiveUp
    return call.wrap(call.call(self=inner, axes=(0, *(_axis(a, ndim) for a in axes))))


@register("transpose", "transpose_copy")
def _transpose(call):
    inner, ndim = _only_self(call)
    return call.wrap(call.call(self=inner, dim0=_axis(call.args["dim0"], ndim),
                               dim1=_axis(call.args["dim1"], ndim)))


@register("diagonal")
def _diagonal(call):
    inner, ndim = _only_self(call)
    return call.wrap(call.call(self=inner, offset=call.args["offset"],
                               dim1=_axis(call.args["dim1"], ndim),
                               dim2=_axis(call.args["dim2"], ndim)))


@register("moveaxis", "moveaxis_copy")
def _moveaxis(call):
    inner, ndim = _only_self(call)
    return call.wrap(call.call(self=inner, source=_axes(call.args["source"], ndim),
                               destination=_axes(call.args["destination"], ndim)))


@register("unsqueeze", "unsqueeze_copy")
def _unsqueeze(call):
    inner, ndim = _only_self(call)
    axis = call.args["axis"]
    axes = axis if isinstance(axis, (list, tuple)) else (axis,)
    out_ndim = ndim + len(axes)
    if not all(-out_ndim <= a < out_ndim for a in axes):
        raise _GiveUp
    moved = [a + 1 if a >= 0 else a for a in axes]
    return call.wrap(call.call(self=inner, axis=type(axis)(moved)
                               if isinstance(axis, (list, tuple)) else moved[0]))


@register("squeeze", "squeeze_copy")
def _squeeze(call):
    inner, ndim = _only_self(call)
    axis = call.args.get("axis")
    if axis is None:
        shape = call.args["self"].shape
        axis = tuple(i for i in range(ndim) if shape[i] == 1)
    return call.wrap(call.call(self=inner, axis=_axes(axis, ndim)))


@register("flatten")
def _flatten(call):
    inner, ndim = _only_self(call)
    if ndim == 0:
        raise _GiveUp
    return call.wrap(call.call(self=inner, start_dim=_axis(call.args["start_dim"], ndim),
                               end_dim=_axis(call.args["end_dim"], ndim)))


@register("matrix_transpose", "matrix_transpose_copy", "tril", "triu", "linalg_cholesky",
          "linalg_det", "linalg_diagonal", "linalg_eig", "linalg_eigh", "linalg_eigvals",
          "linalg_eigvalsh", "linalg_inv", "linalg_matrix_norm", "linalg_matrix_power",
          "linalg_qr", "linalg_slogdet", "linalg_svd", "linalg_svdvals", "linalg_trace")
def _matrices(call):
    """Ops on the last two dimensions, batched over any leading ones."""
    inner, ndim = _only_self(call)
    if ndim < 2 or len(call.tensors()) != 1:
        raise _GiveUp
    return call.wrap(call.call(self=inner))


@register("t", "t_copy")
def _t(call):
    inner, ndim = _only_self(call)
    if ndim < 2:  # t of a vector or a scalar is itself (a view)
        return call.wrap(aten.basic_index(inner, (Ellipsis,)))
    return call.wrap(aten.transpose(inner, 1, 2))


@register("tile", "repeat_tensor")
def _tile(call):
    inner, ndim = _only_self(call)
    name = "reps" if "reps" in call.args else "repeats"
    reps = _tuple(call.args[name])
    rank = max(ndim, len(reps))
    reps = (1, *([1] * (rank - len(reps))), *reps)
    return call.wrap(call.call(self=_pad(inner, ndim, rank), **{name: reps}))


@register("basic_index", "basic_index_copy", "index")
def _index(call):
    """``x[key]``: the key after a full slice over the batch dimension.  Index tensors
    that are batched, and advanced indices that NumPy would move to the front, are left
    to the fallback."""
    inner, _ = _only_self(call)
    key = call.args["key"]
    key = key if isinstance(key, tuple) else (key,)
    from mdtensor.tensors.tensor import Tensor

    advanced = [i for i, k in enumerate(key)
                if isinstance(k, (Tensor, list)) and not isinstance(k, slice)]
    if any(isinstance(k, Tensor) and call.batched_value(k) for k in key):
        raise _GiveUp
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise _GiveUp
    return call.wrap(call.call(self=inner, key=(slice(None), *key)))


# ---------------------------------------------------------------------------------------
# Ops of several tensors


@register("cat", "stack")
def _concatenate(call):
    tensors = call.args["tensors"]
    if not tensors:
        raise _GiveUp
    ndim = tensors[0].ndim
    axis = call.args.get("axis")
    if axis is None:  # cat(axis=None) flattens
        raise _GiveUp
    out_ndim = ndim + (1 if call.op.schema.name == "stack" else 0)
    if not -out_ndim <= axis < max(out_ndim, 1):
        raise _GiveUp
    inner = [call.expanded(t) for t in tensors]
    return call.wrap(call.call(tensors=inner, axis=axis + 1 if axis >= 0 else axis))


@register("broadcast_arrays")
def _broadcast_arrays(call):
    tensors = call.args["tensors"]
    rank = max((t.ndim for t in tensors), default=0)
    inner = [_pad(call.expanded(t), t.ndim, rank) for t in tensors]
    return call.wrap(call.call(tensors=inner))


@register("matmul", "mm", "bmm", "dot", "vecdot", "outer")
def _matmul(call):
    """Products: ``matmul`` on the inner tensors, with vectors as matrices and the
    batched operand's leading dimensions padded to the other's."""
    a, b = call.tensors()[:2]
    na, nb = call.ndim(a), call.ndim(b)
    name = call.op.schema.name
    if name == "vecdot":
        axis = call.args.get("axis", -1)
        rank = max(na, nb)
        if axis >= 0:
            axis -= rank
        if not -min(na, nb) <= axis < 0:
            raise _GiveUp
        out, _ = _broadcasting(call, axis=axis)
        return call.wrap(out)
    if name == "outer":
        if na != 1 or nb != 1:
            raise _GiveUp
        x = call.expanded(call.args[a]).unsqueeze(-1)
        y = call.expanded(call.args[b]).unsqueeze(-2)
        return call.wrap(aten.mul(x, y))
    if name in ("mm", "bmm") and (na, nb) != ((2, 2) if name == "mm" else (3, 3)):
        raise _GiveUp
    if name == "dot" and (na, nb) != (1, 1):
        raise _GiveUp
    if na == 0 or nb == 0:
        raise _GiveUp
    x = call.args[a]
    y = call.args[b]
    xb, yb = call.batched(a), call.batched(b)
    xi = call.inner(a) if xb else x
    yi = call.inner(b) if yb else y
    if na == 1:  # a row vector
        xi = xi.unsqueeze(-2)
    if nb == 1:  # a column vector
        yi = yi.unsqueeze(-1)
    ra, rb = max(na, 2), max(nb, 2)
    rank = max(ra, rb)
    if xb:
        xi = _pad(xi, ra, rank)
    if yb:
        yi = _pad(yi, rb, rank)
    out = aten.matmul(xi, yi)
    if na == 1:
        out = out.squeeze(-2)
    if nb == 1:
        out = out.squeeze(-1)
    return call.wrap(out)


@register("matmul_backward")
def _matmul_backward(call):
    """Both gradients of a product from the products themselves (batched by ``_matmul``),
    not one call per batch element."""
    from .products_derivatives import matmul_gradients

    mask = tuple(call.args["mask"])
    return tuple(matmul_gradients(mask, call.args["grad_out"], call.args["self"],
                                  call.args["other"]))


@register("linalg_solve")
def _solve(call):
    na, nb = call.ndim("self"), call.ndim("other")
    if na < 2 or nb < 1:
        raise _GiveUp
    a = call.expanded(call.args["self"])
    b = call.expanded(call.args["other"])
    if nb == 1:
        return call.wrap(aten.linalg_solve(a, b.unsqueeze(-1)).squeeze(-1))
    rank = max(na, nb)
    return call.wrap(call.call(self=_pad(a, na, rank), other=_pad(b, nb, rank)))


@register("einsum")
def _einsum(call):
    """A letter for the batch dimension, in front of each batched operand's subscripts and
    of the output's."""
    equation = call.args["equation"].replace(" ", "")
    tensors = call.args["tensors"]
    if "..." in equation or "->" not in equation:
        raise _GiveUp
    lhs, rhs = equation.split("->")
    subs = lhs.split(",")
    if len(subs) != len(tensors):
        raise _GiveUp
    used = set(equation)
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA"
                  if c not in used)
    new_subs, inner = [], []
    for s, t in zip(subs, tensors):
        if call.batched_value(t):
            new_subs.append(letter + s)
            inner.append(t._inner)
        else:
            new_subs.append(s)
            inner.append(t)
    return call.wrap(call.call(equation=f"{','.join(new_subs)}->{letter}{rhs}",
                               tensors=inner))


@register("index_put", "index_put_")
def _index_put(call):
    """``x[key] = value`` (and its functional form): the key after a full slice over the
    batch dimension; the value as its logical shape broadcasts against ``x[key]``."""
    inplace = call.op.schema.is_inplace
    if not call.batched("self") and inplace:
        raise _GiveUp
    key = call.args["key"]
    key = key if isinstance(key, tuple) else (key,)
    from mdtensor.tensors.tensor import Tensor

    advanced = [i for i, k in enumerate(key) if isinstance(k, (Tensor, list))]
    if any(isinstance(k, Tensor) and call.batched_value(k) for k in key):
        raise _GiveUp
    if advanced and advanced != list(range(advanced[0], advanced[-1] + 1)):
        raise _GiveUp
    value = call.args["value"]
    this = call.expanded(call.args["self"])  # functional: an unbatched self is copied
    if isinstance(value, Tensor) and call.batched_value(value):
        target = this[(slice(None), *key)]
        value = _pad(value._inner, value.ndim, target.ndim - 1)
    out = call.call(self=this, key=(slice(None), *key), value=value)
    return _result(call, out)
