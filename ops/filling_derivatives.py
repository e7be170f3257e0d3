"""Derivative rules of ``ops/filling.py``: a filled tensor no longer depends on its old
values (PyTorch's ``FillBackward``/``ZeroBackward``: a zero gradient for ``self``)."""

from __future__ import annotations

from mdtensor.ops import aten_calls as aten

from ._derivative_helpers import is_complex, reads, rule

__all__: list[str] = []


@rule("fill", "zero")
@reads()
def _fill(g, out, x, *rest):
    return (aten.zeros_like(g), *(None for _ in rest))


@rule("fill.Tensor")
@reads()
def _fill_tensor(g, out, x, value):
    # the value receives the sum of the gradient, in its own dtype (Note [Filling with a
    # Tensor] in ops/filling.py); a real value filled into a complex tensor its real part
    total = aten.sum(g)
    if is_complex(total) and not is_complex(value):
        total = aten.real(total)
    if total.dtype != value.dtype:
        total = aten.astype(total, value.dtype)
    return aten.zeros_like(g), total
