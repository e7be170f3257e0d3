"""The dtypes an op accepts (``defop(accepts=...)``).

Note [Accepted dtypes]
~~~~~~~~~~~~~~~~~~~~~~
Most ops take every dtype their backend function takes, but backends take more than the
Array API specifies, and differently: NumPy's ``maximum`` orders complex numbers, JAX's
``atan2`` takes them while NumPy's raises its own TypeError, ``np.mean`` of integers gives
float64 where the Meta kernel said int64.  An op that specifies the kinds it accepts
(``accepts="biuf"``: bool, signed and unsigned integers, real floating; ``"fc"``:
floating or complex; ...) refuses the others itself, with a TypeError naming the op, what
it accepts and what it got, before any backend sees them -- the same on every backend and
on Meta.  The checked operands are the op's ``self`` and ``other`` (Tensors or Python
scalars).  The choice follows the Array API where it specifies the op (``maximum``, the
order comparisons, ``floor``: real numbers) and PyTorch for its own ops (``mean`` of
integers, ``softmax`` of complex numbers).

The generic kernels check before calling the impl (``with_accepted_kinds``), the Meta
kernels before the meta function, the JAX backend's jitted kernels when they trace; the
CPU ufunc kernels call NumPy directly only for the accepted kinds (``Ufunc(kinds=...)``)
and send the rest to the checking generic kernel, so calls with accepted dtypes pay nothing
on NumPy.
"""

from __future__ import annotations

from ._promotion import dtype_of

__all__ = ["check_kinds", "describe", "kind_of", "operand_positions", "with_accepted_kinds"]

_SCALAR_KINDS = {bool: "b", int: "i", float: "f", complex: "c"}
_WORDS = {
    "biuf": "real (not complex)",
    "biu": "integer or bool",
    "iuf": "integer or floating-point",
    "fc": "floating-point or complex",
    "f": "real floating-point",
}


def describe(accepts: str) -> str:
    """``accepts`` in words (``"fc"`` -> ``"floating-point or complex"``)."""
    return _WORDS.get(accepts, f"dtype kinds {accepts!r}")


def kind_of(v) -> str | None:
    """The dtype kind of a tensor, raw array or Python scalar (None for anything else)."""
    kind = _SCALAR_KINDS.get(type(v))
    if kind is not None:
        return kind
    dtype = getattr(v, "dtype", None)
    if dtype is None:
        return None
    kind = getattr(dtype, "kind", None)  # mdtensor and NumPy dtypes
    if kind is None or not isinstance(kind, str) or kind not in "biufc":
        kind = dtype_of(v).kind  # another library's dtype
    return kind


def check_kinds(op: str, accepts: str, values) -> None:
    """TypeError naming ``op`` for the first of ``values`` whose kind ``accepts`` lacks."""
    for v in values:
        kind = kind_of(v)
        if kind is not None and kind not in accepts:
            raise TypeError(f"{op}: expected {describe(accepts)} tensors, got "
                            f"{_name(v)}")


def _name(v) -> str:
    if type(v) in _SCALAR_KINDS:
        return f"a Python {type(v).__name__}"
    dtype = v.dtype
    name = getattr(dtype, "name", None)
    if isinstance(name, str) and not hasattr(v, "_data"):
        return name
    return dtype_of(v).name if not hasattr(v, "_data") else v.dtype.name


def operand_positions(schema) -> tuple[int, ...]:
    """The positions of the checked operands: positional ``self`` and ``other``."""
    return tuple(i for i, a in enumerate(schema.arguments)
                 if not a.kwarg_only and a.name in ("self", "other")
                 and a.type.base in ("Tensor", "Scalar"))


def with_accepted_kinds(fn, schema, accepts: str | None, offset: int = 1):
    """``fn`` checking its operands' kinds first (Note [Accepted dtypes]): an impl
    ``fn(xp, *args)`` (``offset=1``), a meta function ``fn(*args)`` (0) or an in-place
    impl ``fn(xp, out, *args)`` (2)."""
    if not accepts or fn is None:
        return fn
    positions = operand_positions(schema)
    op = schema.name

    def checked(*args, **kwargs):
        check_kinds(op, accepts, [args[i + offset] for i in positions
                                  if i + offset < len(args)])
        return fn(*args, **kwargs)

    checked.__name__ = getattr(fn, "__name__", "impl")
    checked.__qualname__ = checked.__name__
    return checked
