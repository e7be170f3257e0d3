"""Derivative formulas of the catalogue's ops (the Autograd layer's rules table).

``DERIVATIVES[name]`` is ``formula(g, out, *args, **kwargs) -> tuple``: given the gradient
``g`` of the output (a tuple for several outputs), the output ``out`` (only for formulas
marked ``@uses_out``; else None) and the op's arguments, it returns one entry per
positional argument: the gradient of a Tensor argument (a list for ``Tensor[]``), or None.
Names are packet names (``"mul"``) or overload names (``"max.dim"``); an in-place op
(``mul_``) uses its functional op's formula with the value ``self`` had before.  Formulas
use md ops, so ``create_graph=True`` differentiates them again.

``NONDIFFERENTIABLE`` ops give outputs that never require grad (integer results, masks).

The formulas live by chapter, each beside the catalogue chapter it differentiates
(``ops/<chapter>_derivatives.py``; ``products`` and ``linalg`` both differentiate
``ops/linalg.py``); what they share -- the table, the marks ``rule``, ``uses_out``,
``uses_mask``, ``reads``, ``analytic`` and a few helpers -- is in ops/_derivative_helpers.py.
This module loads the chapters and registers the table with the Autograd layer.
"""

from __future__ import annotations

import importlib

from mdtensor.layers.autograd.formulas import register_formulas, sum_to

from ._derivative_helpers import DERIVATIVES, reads, rule, uses_mask, uses_out

__all__ = ["DERIVATIVES", "NONDIFFERENTIABLE", "reads", "rule", "sum_to", "uses_mask",
           "uses_out"]

NONDIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "isfinite", "isinf", "isnan", "signbit", "argmax", "argmin", "argsort",
    "count_nonzero", "nonzero", "argwhere", "lift_fresh", "searchsorted", "all", "any",
    "unique_values",
    "unique_counts", "unique_inverse", "unique_all", "floor_divide", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "sign", "ceil", "floor", "trunc", "round", "detach", "zeros", "ones", "empty", "full",
    "arange", "linspace", "eye", "nextafter", "zeros_like", "ones_like", "empty_like",
    "full_like", "isin", "isclose", "allclose", "fft_fftfreq", "fft_rfftfreq", "linalg_matrix_rank",
})


# Importing a chapter registers its rules in ``DERIVATIVES`` (by module path: a plain name
# would be read as an operator namespace, ``md.ops.<ns>``).  A new catalogue chapter
# ``ops/<chapter>.py`` puts its rules in ``ops/<chapter>_derivatives.py`` and its name here.
_CHAPTERS = ("conv", "convolution", "diagonals", "distances", "elementwise", "fft", "filling",
             "float_values", "histograms", "indexing", "joining", "least_squares", "linalg",
             "losses", "manipulation", "nn", "normalization", "padding", "pooling", "products",
             "reductions", "scatter", "searching", "special_functions", "statistics")
for _chapter in _CHAPTERS:
    importlib.import_module(f"mdtensor.ops.{_chapter}_derivatives")


def _view_copy_rules() -> None:
    """``<view>_copy`` ops differentiate like their views (ops/view_copy.py)."""
    from mdtensor.ops.view_copy import VIEW_COPY

    for view, copy in VIEW_COPY.items():
        for name in [n for n in DERIVATIVES if n == view or n.startswith(view + ".")]:
            DERIVATIVES[copy + name[len(view):]] = DERIVATIVES[name]


_view_copy_rules()

register_formulas(DERIVATIVES, NONDIFFERENTIABLE)  # the Autograd layer reads them there
