"""Reducing values into positions of a flat array: the computation under ``scatter``,
``scatter_add``, ``scatter_reduce``, ``index_add``, ``index_copy``, ``bincount`` and
``histc`` (``ops/scatter.py``, ``ops/histograms.py``).

Note [Scatters without scatter functions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The Array API has no scatter: ``put(data, positions, values, reduce)`` -- ``data`` flat,
``positions`` int64 indices into it, repeated ones combining by ``reduce`` ("set": the last
value wins, as on PyTorch's CPU; "sum", "prod", "amax", "amin"), the data's old value taken
in too -- is computed

1. with the backend's own scatter where its arrays have one: NumPy's ``ufunc.at`` on a copy
   (``np.add.at``; the last write wins for ``x[p] = v``), JAX's ``x.at[p].add(v)``;
2. otherwise with Array API functions only (array_api_strict, Dask: lazily, chunked):
   the positions are sorted (stably, so equal positions keep their order), a *segmented
   scan* combines each run of equal positions in ``log2(n)`` steps of whole-array ops
   (Hillis and Steele's scan on pairs ``(starts a run, value)``: ``(f1, v1) . (f2, v2) =
   (f1 | f2, v2 if f2 else v1 op v2)``, associative), the last element of each run is its
   total, and each element of ``data`` finds the end of its run by a binary search in the
   sorted positions, as ``_scatter`` in ops/indexing.py finds its last write.

The sums of step 2 add in a tree's order, not one after another: float results may differ
from step 1's in the last bits, as PyTorch's CUDA and CPU scatters differ.
"""

from __future__ import annotations

__all__ = ["REDUCTIONS", "put"]

#: the reductions ``put`` knows
REDUCTIONS = ("set", "sum", "prod", "amax", "amin")

_NP_UFUNC = {"sum": "add", "prod": "multiply", "amax": "maximum", "amin": "minimum"}
_JAX_AT = {"set": "set", "sum": "add", "prod": "multiply", "amax": "max", "amin": "min"}


def put(xp, data, positions, values, reduce: str):
    """``data`` (1-D) with ``values`` (1-D, ``data``'s dtype) combined into it at
    ``positions`` (1-D int64, in bounds) by ``reduce`` (Note [Scatters without scatter
    functions]); a new array, ``data`` unchanged."""
    if reduce not in REDUCTIONS:
        raise ValueError(f"put: unknown reduction {reduce!r}")
    if positions.shape[0] == 0:
        return xp.asarray(data, copy=True)
    at = getattr(data, "at", None)
    if at is not None and not isinstance(at, type(put)):  # JAX
        return getattr(at[positions], _JAX_AT[reduce])(values)
    if type(data).__module__ == "numpy":
        import numpy as np

        out = np.array(data, copy=True)
        if reduce == "set":
            out[positions] = values  # NumPy assigns in order: the last write wins
        else:
            getattr(np, _NP_UFUNC[reduce]).at(out, positions, values)
        return out
    return _put_generic(xp, data, positions, values, reduce)


def _combine(xp, reduce, a, b):
    if reduce == "set":
        return b
    if reduce == "sum":
        return a + b
    if reduce == "prod":
        return a * b
    return (xp.maximum if reduce == "amax" else xp.minimum)(a, b)


def _shift(xp, v, s, fill):
    """``v`` moved ``s`` places toward the end, ``fill`` in front."""
    head = xp.full((s,), fill, dtype=v.dtype, device=_device(v))
    return xp.concat([head, v[:-s]])


def _device(a):
    dev = getattr(a, "device", None)
    if dev is None:
        from array_api_compat import device

        dev = device(a)
    return dev


def _put_generic(xp, data, positions, values, reduce):
    n = positions.shape[0]
    order = xp.argsort(positions, stable=True)
    pos = xp.take(positions, order)
    val = xp.take(values, order)
    starts = xp.concat([xp.asarray([True], device=_device(pos)), pos[1:] != pos[:-1]])
    flags, s = starts, 1
    while s < n:  # segmented inclusive scan (Hillis-Steele)
        prev_v = _shift(xp, val, s, 0)
        prev_f = _shift(xp, flags, s, True)
        val = xp.where(flags, val, _combine(xp, reduce, prev_v, val))
        flags = flags | prev_f
        s *= 2
    # each element's run ends at the last sorted position not above it
    ids = xp.arange(data.shape[0], dtype=pos.dtype, device=_device(pos))
    k = xp.searchsorted(pos, ids, side="right") - 1
    k = xp.where(k < 0, xp.zeros_like(k), k)
    hit = xp.take(pos, k) == ids
    new = xp.take(val, k)
    if reduce != "set":
        new = _combine(xp, reduce, data, new)
    return xp.where(hit, new, data)
