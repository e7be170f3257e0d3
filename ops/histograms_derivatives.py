"""Derivatives of ``ops/histograms.py``: ``histc``'s counts never require grad (PyTorch's
neither); ``bincount`` has no rule, so asking for the gradient of its summed weights raises
"the derivative for 'bincount' is not implemented", as in PyTorch."""

from __future__ import annotations

from mdtensor.layers.autograd.formulas import register_formulas

__all__: list[str] = []

register_formulas({}, frozenset({"histc"}))
