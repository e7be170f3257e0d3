"""The derivative formulas the Autograd layer reads, by op name: a registry the op
catalogue fills (``register_formulas``, from ops/derivatives.py), so the layer never imports
the catalogue; and ``sum_to``, which the formulas and ``md.autograd.Function`` share.
"""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten

__all__ = ["formula_for", "is_nondifferentiable", "reduce_to", "register_formulas", "sum_to"]

#: ``(formulas, nondifferentiable)`` pairs, in registration order: formulas by packet name
#: (``"mul"``) or overload name (``"max.dim"``), and the names of ops whose outputs never
#: require grad.  Held, not copied: a formula added to a table later is found too.
_TABLES: list[tuple[dict, frozenset]] = []


def register_formulas(formulas: dict, nondifferentiable=frozenset()) -> None:
    """Make ``formulas`` (name -> ``formula(g, out, *args, **kwargs)``, the contract in
    ops/derivatives.py) and the ``nondifferentiable`` op names known to the Autograd layer.
    Ops defined afterwards get their kernels when they are defined; ops defined before, when
    the layer is installed (``mdtensor.layers.install``)."""
    _TABLES.append((formulas, nondifferentiable))


def _base_name(op) -> str:
    schema = op.schema
    return schema.name[:-1] if schema.is_inplace else schema.name  # mul_ uses mul's


def formula_for(op):
    """The formula of ``op`` (an in-place op's is its functional op's), or None."""
    base = _base_name(op)
    overload = f"{base}.{op.schema.overload_name}"
    for formulas, _ in _TABLES:
        formula = formulas.get(overload) or formulas.get(base)
        if formula is not None:
            return formula
    return None


def is_nondifferentiable(op) -> bool:
    """Whether ``op``'s outputs never require grad (Note [Non-differentiable ops] in
    kernels.py)."""
    base = _base_name(op)
    return any(base in names for _, names in _TABLES)


def sum_to(g, shape):
    """Reduce a broadcast gradient back to ``shape``."""
    if g is None:
        return None
    gshape = tuple(g._data.shape)
    shape = tuple(shape)
    if gshape == shape:
        return g
    return reduce_to(g, gshape, shape)


def reduce_to(g, gshape, shape):
    lead = len(gshape) - len(shape)
    if 1 in shape:  # broadcast size-1 dimensions are summed and kept
        ones = _broadcast_ones(gshape, shape, lead)
        if ones:
            g = aten.sum(g, ones, True)
    if lead:  # the broadcast leading dimensions go away
        g = aten.sum(g, _LEADING[lead] if lead < 8 else tuple(range(lead)))
    return g


def _broadcast_ones(gshape, shape, lead):
    # Not inline in sum_to: a generator there makes its locals cells, built on every call
    # (Note [Cell variables] in mdtensor/layers/inplace_or_view.py).
    return tuple(i + lead for i, s in enumerate(shape) if s == 1 and gshape[i + lead] != 1)


_LEADING = [tuple(range(n)) for n in range(8)]
