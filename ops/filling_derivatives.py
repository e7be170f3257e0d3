"""Derivative rules of ``ops/filling.py``: a filled tensor no longer depends on its old
values (PyTorch's ``FillBackward``/``ZeroBackward``: a zero gradient for ``self``)."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import reads, rule

__all__: list[str] = []


@rule("fill", "zero")
@reads()
def _fill(g, out, x, *rest):
    return (aten.zeros_like(g), *(None for _ in rest))
