"""``md.nn.functional.scaled_dot_product_attention``: PyTorch's reference ("math")
formulation as a composition of ``matmul``, ``softmax`` and ``dropout``."""

from __future__ import annotations

import math

from mdtensor.tensors.tensor import Tensor

__all__ = ["scaled_dot_product_attention"]


def _md():
    import mdtensor

    return mdtensor


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, dropout_p: float = 0.0,
                                 is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """``softmax(query @ key.mT * scale + mask) @ value`` over the last two dimensions
    (``(..., L, E)``, ``(..., S, E)``, ``(..., S, Ev)`` -> ``(..., L, Ev)``).

    ``scale`` defaults to ``1 / sqrt(E)``.  ``attn_mask`` is boolean (True: take part) or
    added to the scores; ``is_causal`` masks the upper triangle; a row with every position
    masked gives zeros (PyTorch's ``_safe_softmax``).  ``dropout_p`` drops attention weights
    (``dropout`` with ``training=True``, as PyTorch's).  ``enable_gqa`` repeats the key and
    value heads (dimension -3) to match the query's.

    Raises:
        ValueError: ``attn_mask`` together with ``is_causal``, head counts that do not
            divide, or mismatched feature sizes.
    """
    md = _md()
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise ValueError("scaled_dot_product_attention: expected query, key and value of 2 "
                         "or more dimensions")
    if query.shape[-1] != key.shape[-1] or key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: expected query (..., L, E), key "
                         f"(..., S, E) and value (..., S, Ev), got {list(query.shape)}, "
                         f"{list(key.shape)} and {list(value.shape)}")
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: explicit attn_mask should not be set "
                         "when is_causal=True")
    if enable_gqa:
        key, value = _repeat_heads(query, key), _repeat_heads(query, value)
    length, source = query.shape[-2], key.shape[-2]
    factor = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = md.matmul(query, key.mT) * factor
    if is_causal:
        attn_mask = md.tril(md.ones((length, source), dtype=md.bool, device=query.device))
    if attn_mask is not None:
        if attn_mask.dtype == md.bool:
            scores = md.where(attn_mask, scores, -math.inf)
        else:
            scores = scores + attn_mask
        weights = _safe_softmax(scores)
    else:
        weights = md.softmax(scores, -1)
    if dropout_p > 0.0:
        weights = md.dropout(weights, float(dropout_p), True)
    return md.matmul(weights, value)


def _safe_softmax(scores: Tensor) -> Tensor:
    """softmax over the last dimension, zeros in rows where every score is -inf (their
    scores replaced before the softmax, so no NaN reaches a gradient either)."""
    md = _md()
    dead = md.all(scores == -math.inf, axis=-1, keepdims=True)
    return md.where(dead, 0.0, md.softmax(md.where(dead, 0.0, scores), -1))


def _repeat_heads(query: Tensor, kv: Tensor) -> Tensor:
    md = _md()
    heads, kv_heads = query.shape[-3], kv.shape[-3]
    if query.ndim < 3 or kv.ndim < 3 or heads % kv_heads:
        raise ValueError(f"scaled_dot_product_attention: with enable_gqa, the query's heads "
                         f"(dimension -3) must be a multiple of the key's and value's, got "
                         f"{list(query.shape)} and {list(kv.shape)}")
    return md.repeat(kv, heads // kv_heads, axis=-3) if heads != kv_heads else kv
