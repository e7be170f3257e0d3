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
on Meta.  What is checked is the dtype the op computes in: the promoted dtype of its
``self`` and ``other`` (Tensors or Python scalars), as PyTorch checks the dtype its kernel
runs in (a bool tensor shifted by an int is an int64 shift; two bools are refused).  The
choice follows the Array API where it specifies the op (``maximum``, the order
comparisons, ``floor``: real numbers) and PyTorch for its own ops (``mean`` of integers,
``softmax`` of complex numbers).

The generic kernels check before calling the impl (``with_accepted_kinds``; an op with
one checked operand remembers the operand dtypes it accepted, so a call pays one set
lookup), the Meta kernels before the meta function, the JAX backend's jitted kernels when
they trace; the
CPU ufunc kernels call NumPy directly only for the accepted kinds (``Ufunc(kinds=...)``)
and send the rest to the checking generic kernel, so calls with accepted dtypes pay nothing
on NumPy.
"""

from __future__ import annotations

from mdtensor import _dtypes as dt

from ._promotion import dtype_of

__all__ = ["check_kinds", "computed_dtype", "describe", "operand_positions",
           "refuse_bfloat16", "unchecked", "with_accepted_kinds"]

_SCALAR_KINDS = {bool: "b", int: "i", float: "f", complex: "c"}
_WORDS = {
    "biuf": "real (not complex)",
    "biu": "integer or bool",
    "iuf": "integer or floating-point",
    "iu": "integer",
    "iufc": "numeric (not bool)",
    "c": "complex",
    "fc": "floating-point or complex",
    "f": "real floating-point",
}


def describe(accepts: str) -> str:
    """``accepts`` in words (``"fc"`` -> ``"floating-point or complex"``)."""
    return _WORDS.get(accepts, f"dtype kinds {accepts!r}")


def computed_dtype(values):
    """The dtype an op computes in from its operands -- tensors, raw arrays, Python
    scalars (weak) -- by mdtensor's promotion; None when there is no array among them."""
    dtypes, scalars = [], []
    for v in values:
        if type(v) in _SCALAR_KINDS:
            scalars.append(v)
            continue
        dtype = getattr(v, "dtype", None)
        if dtype is None:
            continue
        dtypes.append(dtype if isinstance(dtype, dt.DType) else dtype_of(v))
    if not dtypes:
        return None
    if len(dtypes) == 1 and not scalars:
        return dtypes[0]
    return dt.result_type(*dtypes, *scalars)


def check_kinds(op: str, accepts: str, values) -> None:
    """TypeError naming ``op`` when the dtype it computes in (``computed_dtype`` of its
    operands ``values``) is of a kind ``accepts`` lacks."""
    dtype = computed_dtype(values)
    if dtype is not None and dtype.kind not in accepts:
        raise TypeError(f"{op}: expected {describe(accepts)} tensors, got {dtype.name}")


# Note [Ops without bfloat16]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's CPU kernels of the matrix factorizations and solvers (``inv``, ``det``, ``svd``,
# ``eigh``, ``solve``, ``qr``, ``cholesky``, ``pinv``, ``lstsq``, ...) and of the FFTs refuse
# bfloat16; NumPy's (through ml_dtypes) would compute in float64 and return float64, JAX's in
# float32.  mdtensor refuses them as PyTorch does, the same on every backend and on Meta:
# a TypeError naming the op and saying to cast to float32.  Products, norms, reductions and
# the elementwise functions take bfloat16.
def refuse_bfloat16(op: str, values) -> None:
    """TypeError naming ``op`` when one of ``values`` (tensors, arrays, ArraySpecs) is
    bfloat16 (Note [Ops without bfloat16])."""
    from mdtensor import _dtypes as dt

    for v in values:
        dtype = getattr(v, "dtype", None)
        if dtype is None:
            continue
        if (dtype if isinstance(dtype, dt.DType) else dtype_of(v)) is dt.bfloat16:
            raise TypeError(f"{op}: bfloat16 is not supported (as in PyTorch); cast to "
                            f"float32 first (x.float())")


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
    # The (class, dtype) pairs of a lone operand already accepted: what the check decides
    # depends on nothing else, and the pair (not the dtype alone) is the key because
    # array_api_strict's dtypes hash like NumPy's but warn when compared with them.
    # Two operands that are both arrays: the pair of their pairs (promotion depends on
    # nothing else); a Python scalar among them takes the full check.
    accepted: set = set()
    lone = positions[0] + offset if len(positions) == 1 else 1 << 30
    first, second = ((positions[0] + offset, positions[1] + offset) if len(positions) == 2
                     else (1 << 30, 1 << 30))

    def checked(*args, **kwargs):
        if lone < len(args):
            dtype = getattr(args[lone], "dtype", None)
            key = (dtype.__class__, dtype)
            if key in accepted:
                return fn(*args, **kwargs)
            check_kinds(op, accepts, (args[lone],))
            if dtype is not None:
                accepted.add(key)
            return fn(*args, **kwargs)
        if second < len(args):
            d1, d2 = getattr(args[first], "dtype", None), getattr(args[second], "dtype", None)
            key = (d1.__class__, d1, d2.__class__, d2)
            if key in accepted:
                return fn(*args, **kwargs)
            check_kinds(op, accepts, (args[first], args[second]))
            if d1 is not None and d2 is not None:
                accepted.add(key)
            return fn(*args, **kwargs)
        check_kinds(op, accepts, [args[i + offset] for i in positions
                                  if i + offset < len(args)])
        return fn(*args, **kwargs)

    checked.__name__ = getattr(fn, "__name__", "impl")
    checked.__qualname__ = checked.__name__
    checked.__wrapped__ = fn  # for a call whose kinds were accepted (Note [Array calls])
    checked.lone, checked.accepted = lone, accepted  # for ``unchecked``
    return checked


def unchecked(impl, index: int):
    """``(fn, accepted)`` when ``impl`` is ``with_accepted_kinds``'s check of one operand,
    its argument ``index``: a call whose operand's ``(dtype.__class__, dtype)`` is in the set
    ``accepted`` (which grows as calls are checked) may call ``fn``, the impl unchecked,
    without the wrapper's frame; else None."""
    if getattr(impl, "lone", None) == index:
        return impl.__wrapped__, impl.accepted
    return None
