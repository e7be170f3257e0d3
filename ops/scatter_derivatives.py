"""Derivative rules of ``ops/scatter.py`` (PyTorch's formulas, in md ops so that
``create_graph`` differentiates them again).

A scatter is linear in ``src``: the gradient of ``src`` is ``g`` gathered at the written
positions (``gather``; zeros where ``src`` is larger than ``index``, which PyTorch refuses
in backward), and the gradient of ``self`` is ``g`` with the overwritten positions zeroed
(``scatter(g, dim, index, 0)``).  ``scatter_reduce``'s ``amax``/``amin`` share the gradient
evenly among the elements equal to the result, as PyTorch's; ``prod`` divides the result by
each factor, with PyTorch's handling of zeros.
"""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import reads, rule, uses_out

__all__: list[str] = []


def _to_shape(gs, shape):
    """``gs`` (an index's shape) padded with zeros at the end of each dimension to
    ``shape`` (the ``src`` it is the gradient of)."""
    for d, (have, want) in enumerate(zip(tuple(gs.shape), shape)):
        if have != want:
            pad_shape = list(gs.shape)
            pad_shape[d] = want - have
            gs = aten.cat([gs, aten.zeros(tuple(pad_shape), dtype=gs.dtype,
                                          device=gs.device)], axis=d)
    return gs


def _gathered(g, dim, index, src):
    return _to_shape(aten.gather(g, dim, index), tuple(src.shape))


def _zero_written(g, dim, index):
    return aten.scatter(g, dim, index, 0)


@rule("scatter.src")
@reads(2)
def _scatter_src(g, out, x, dim, index, src):
    return _zero_written(g, dim, index), None, None, _gathered(g, dim, index, src)


@rule("scatter.value")
@reads(2)
def _scatter_value(g, out, x, dim, index, value):
    return _zero_written(g, dim, index), None, None, None


@rule("scatter_add")
@reads(2)
def _scatter_add(g, out, x, dim, index, src):
    return g, None, None, _gathered(g, dim, index, src)


def _cut(src, index):
    """The part of ``src`` that ``index`` covers."""
    if tuple(src.shape) == tuple(index.shape):
        return src
    return src[tuple(slice(0, k) for k in index.shape)]


@rule("scatter_reduce.two")
@uses_out
def _scatter_reduce(g, out, x, dim, index, src, reduce, *, include_self=True):
    src_c = _cut(src, index)
    if reduce == "sum":
        gx, gs = g, aten.gather(g, dim, index)
    elif reduce == "mean":
        count = aten.scatter_reduce(aten.ones_like(x), dim, index, aten.ones_like(src_c),
                                    "sum", include_self=include_self)
        gx = aten.div(g, count)
        gs = aten.gather(gx, dim, index)
    elif reduce in ("amax", "amin"):
        value = aten.gather(out, dim, index)
        self_is = aten.astype(aten.eq(x, out), x.dtype)
        src_is = aten.astype(aten.eq(src_c, value), x.dtype)
        spread = aten.div(g, aten.scatter_add(self_is, dim, index, src_is))
        gx = aten.mul(self_is, spread)
        gs = aten.mul(src_is, aten.gather(spread, dim, index))
    elif reduce == "prod":
        gx, gs = _prod_grads(g, out, x, dim, index, src_c, include_self)
    else:
        raise ValueError(f"scatter_reduce: unknown reduce {reduce!r}")
    if not include_self:
        gx = _zero_written(gx, dim, index)
    return gx, None, None, _to_shape(gs, tuple(src.shape)), None


def _prod_grads(g, out, x, dim, index, src, include_self):
    """PyTorch's gradient of a product scatter: the product of the *other* factors, kept
    exact where one factor is zero (dividing the result by it would give 0/0)."""
    masked_x = aten.where(aten.eq(x, 0), aten.ones_like(x), x)
    masked_x_result = aten.scatter_reduce(masked_x, dim, index, src, "prod",
                                          include_self=include_self)
    gx = aten.div(aten.mul(g, masked_x_result), masked_x)
    src_zero = aten.eq(src, 0)
    zeros_per_slot = aten.gather(aten.scatter_add(aten.zeros_like(x), dim, index,
                                                  aten.astype(src_zero, x.dtype)),
                                 dim, index)
    single_zero = aten.logical_and(src_zero, aten.eq(zeros_per_slot, 1))
    masked_src = aten.where(single_zero, aten.ones_like(src), src)
    masked_src_result = aten.scatter_reduce(x, dim, index, masked_src, "prod",
                                            include_self=include_self)
    others = aten.gather(aten.mul(g, masked_src_result), dim, index)
    divided = aten.div(aten.gather(aten.mul(g, out), dim, index),
                       aten.where(src_zero, aten.ones_like(src), src))
    return gx, aten.where(single_zero, others, divided)


@rule("index_add")
@reads(2)
def _index_add(g, out, x, dim, index, source, *, alpha=1):
    gs = aten.index_select(g, dim, index)
    if alpha != 1:
        gs = aten.mul(gs, alpha)
    return g, None, None, aten.reshape(gs, tuple(source.shape))


@rule("index_copy")
@reads(2)
def _index_copy(g, out, x, dim, index, source):
    gs = aten.reshape(aten.index_select(g, dim, index), tuple(source.shape))
    return aten.index_fill(g, dim, index, 0), None, None, gs


@rule("index_fill.int_Scalar")
@reads(2)
def _index_fill(g, out, x, dim, index, value):
    return aten.index_fill(g, dim, index, 0), None, None, None
