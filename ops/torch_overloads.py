"""PyTorch's extra spellings of ops the Array API defines: ``round(x, decimals=n)`` and the
one-argument ``where(condition)`` (``nonzero`` as a tuple of index tensors, NumPy's too).

Each is declared as one more overload of the op it extends, so ``md.round`` and
``md.where`` resolve among the standard's overloads and these (Note [Torch methods] in
ops/_methods.py): the standard's calls bind the standard's overload as before.
"""

from __future__ import annotations

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._decl import CATALOGUE, defop

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _round_decimals(xp, x, *, decimals=0):
    """PyTorch's: ``round(x * 10**d) / 10**d`` (for negative ``d``, ``round(x / 10**-d) *
    10**-d``), halves to even."""
    if dt.as_dtype(x.dtype).kind not in "f":
        raise TypeError(f"round: decimals= needs a floating tensor, got "
                        f"{dt.as_dtype(x.dtype).name}")
    if decimals == 0:
        return xp.round(x)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return xp.round(x * scale) / scale
    return xp.round(x / scale) * scale


defop("round.decimals(Tensor self, *, int decimals) -> Tensor", impl=_round_decimals,
      meta=mf.same, decl=CATALOGUE["aten::round"])


def _where_cond(xp, condition):
    if condition.ndim == 0:
        raise ValueError("where: a 0-d condition has no indices (nonzero of a 0-d tensor; "
                         "use nonzero(atleast_1d(c)))")
    return [xp.astype(i, xp.int64) for i in xp.nonzero(condition)]


defop("where.cond(Tensor condition) -> Tensor[]", impl=_where_cond,
      tags=("dynamic_output_shape",), decl=CATALOGUE["aten::where"])

