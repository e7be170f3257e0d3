"""Python scalars meeting arrays in the generic kernels.

Note [Python scalars on strict backends]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The ``.Scalar`` overloads pass Python scalars to the backend as they are, so that they stay
weak in promotion (``int8 tensor + 1`` is int8).  The Array API specifies a Python scalar
only next to an array, and only with an array of the scalar's kind or a higher one: a
``bool`` with a bool array, an ``int`` with an integer or floating array, a ``float`` with
a floating array, a ``complex`` with a complex array.  NumPy and JAX accept the other pairs;
array_api_strict raises TypeError.  mdtensor's result dtypes do not depend on the backend
(the Meta kernels compute them with ``result_type``, PyTorch's rule: Note [Scalars of a
higher kind] in mdtensor/_dtypes.py): an int64 tensor plus 0.5 is float32,
``where(c, 1, 0)`` is int64.  So the generic kernels turn the other pairs into specified
ones before the backend sees them:

* a scalar of a higher kind than its array: the array is cast to the pair's
  ``result_type`` (the scalar then meets an array of its own kind, and stays weak);
* a bool scalar with a numeric array: the scalar becomes the int of the same value (the
  same result: a bool scalar is as weak as an int);
* two scalars: the first becomes a 0-d array of the pair's ``result_type``.

Pairs the standard specifies pass unchanged, so each backend computes them as before.

Note [Integers out of range]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A Python int outside the range of the integer tensor it meets (``int8_tensor + 300``) is
wrapped into that dtype first (two's complement: 300 is 44 for int8), as PyTorch and JAX
do, on every backend (NumPy raises OverflowError, array_api_strict too).  Comparisons are
exact instead (``int8_tensor < 300`` is all True, as NumPy says; the array is compared as
int64): PyTorch wraps there too and compares with 44, a silently wrong answer mdtensor does
not copy.  NumPy's ufunc kernels call NumPy directly (exact comparisons) and come here
when it raises.  The
kernels of every overload with a ``Scalar self`` or ``Scalar other`` (PyTorch's names for a
binary op's operands: ``add.Scalar``, ``where.ScalarOther``) apply ``promote_scalar`` to
those two arguments (``defop(promote_scalars=...)``); an impl that converts its operands
itself (float functions, logical ops) opts out and calls it where it needs it, and ``alpha=``
promotes the scalar it scaled once more.  The CPU ufunc kernels call NumPy directly and
come here only for a scalar of a higher kind than its array (NumPy's rule differs there).

Note [Tensors of different kinds]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Two tensors of different kinds (bool, signed or unsigned integer, floating, complex)
promote by NumPy's rule, the Meta kernels' (``result_type``: int32 with float32 is
float64).  The Array API leaves such pairs unspecified, and backends differ: JAX gives
float32, array_api_strict raises.  So the generic kernels of an overload whose ``self``
and ``other`` are both Tensors cast them to their ``result_type`` first when their kinds
differ (``promote_arrays``); pairs of one kind pass unchanged, and cost one dtype
comparison.  The float functions (``div``, ``atan2``, ...) then meet two operands of one
kind: integers become the default float dtype, as for one operand.  bfloat16 with another
floating dtype is cast too: ml_dtypes' loops would widen it by NumPy's rule (with float16 in
``matmul``: float64), not PyTorch's.
"""

from __future__ import annotations

import math

from mdtensor import _dtypes as dt

__all__ = [
    "bfloat16_via_float32",
    "half_via_float32",
    "dtype_of",
    "astype_as_pytorch",
    "promote_arrays",
    "promote_scalar",
    "scalar_into",
    "scalar_operands",
    "with_array",
    "with_scalar_promotion",
]

_SCALARS = (bool, int, float, complex)
#: the order of kinds: a scalar may meet an array of its kind's rank or higher
_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
_SCALAR_RANK = {bool: 0, int: 1, float: 2, complex: 3}

_DTYPES: dict = {}  # (native dtype class, native dtype) -> mdtensor DType
_ARRAY_RANK: dict = {}  # (native dtype class, native dtype) -> rank of its kind
_SCALAR_PAIRS: dict = {}  # (type, type) -> the dtype name two scalars promote to


def dtype_of(a) -> dt.DType:
    """The mdtensor dtype of a backend array (cached per native dtype)."""
    native = a.dtype
    # Keyed with the dtype's class: array_api_strict dtypes hash like NumPy's but compare
    # unequal to them (with a warning).
    key = (native.__class__, native)
    hit = _DTYPES.get(key)
    if hit is None:
        hit = _DTYPES[key] = dt.as_dtype(native)
    return hit


def bfloat16_via_float32(xp, fn, a, *args):
    """``fn(xp, a, *args)`` for a bfloat16 array ``a``: computed on a float32 copy and
    rounded back, as PyTorch's CPU kernels compute bfloat16 (ml_dtypes' loops would widen
    some results to float64, and NumPy's ``clip`` has none); None for another dtype."""
    if dtype_of(a) is not dt.bfloat16:
        return None
    return xp.astype(fn(xp, xp.astype(a, xp.float32), *args), a.dtype)


def half_via_float32(xp, fn, a, *args):
    """``bfloat16_via_float32`` for float16 arrays as well (Note [Half precision special
    functions] in ops/special_functions.py); None for another dtype."""
    if dtype_of(a) not in (dt.bfloat16, dt.float16):
        return None
    return xp.astype(fn(xp, xp.astype(a, xp.float32), *args), a.dtype)


def _scalar_rank(s) -> int | None:
    rank = _SCALAR_RANK.get(type(s))
    if rank is None and isinstance(s, _SCALARS):  # a subclass (np.float64 is a float)
        rank = 0 if isinstance(s, bool) else 1 if isinstance(s, int) else \
            2 if isinstance(s, float) else 3
    return rank


_INT_RANGE: dict = {}  # (native dtype class, native dtype) -> (min, max)


def _int_range(key, arr):
    hit = _INT_RANGE.get(key)
    if hit is None:
        import numpy as np

        info = np.iinfo(dtype_of(arr).numpy)
        hit = _INT_RANGE[key] = (int(info.min), int(info.max))
    return hit


def with_array(xp, arr, s, exact=False):
    """``(arr, s)`` brought into the pairs the Array API specifies (``s`` a scalar; one
    that is no Python number, a NumPy integer say, is left to the backend); an int out of
    the range of an integer ``arr`` wraps, or with ``exact`` (comparisons) meets ``arr``
    as int64 (Note [Integers out of range])."""
    native = arr.dtype
    key = (native.__class__, native)  # as in dtype_of
    arank = _ARRAY_RANK.get(key)
    if arank is None:
        arank = _ARRAY_RANK[key] = _RANK[dtype_of(arr).kind]
    rank = _SCALAR_RANK.get(type(s))
    if rank is None:
        rank = _scalar_rank(s)
    if rank == 1 and arank == 1:  # an int beside an integer array
        lo, hi = _int_range(key, arr)
        if not lo <= s <= hi:  # Note [Integers out of range]
            if exact:
                return xp.astype(arr, xp.int64), s
            s = (s - lo) % (hi - lo + 1) + lo
        return arr, s
    if rank == 2 and arank == 2 and dtype_of(arr) is dt.bfloat16:
        # ml_dtypes' bfloat16 beside a Python float: NumPy gives float32; PyTorch keeps
        # bfloat16 (Note [Promotion of bfloat16] in mdtensor/_dtypes.py)
        return arr, xp.asarray(s, dtype=native)
    if rank is None or rank == arank or (rank and rank < arank):
        return arr, s
    if rank:  # a scalar of a higher kind
        return xp.astype(arr, getattr(xp, dt.result_type(dtype_of(arr), s).name)), s
    return arr, int(s)  # a bool beside numbers


_BOUNDS: dict = {}  # DType -> (low, 2 ** bits)
_FLOAT_MAX = {"float16": 65504.0, "float32": 3.4028234663852886e38,
              "complex64": 3.4028234663852886e38}


def _bounds(dtype) -> tuple[int, int]:
    """``(lowest, 2 ** bits)`` of an integer dtype."""
    bounds = _BOUNDS.get(dtype)
    if bounds is None:
        import numpy as np

        info = np.iinfo(dtype.numpy)
        bounds = _BOUNDS[dtype] = (int(info.min), int(info.max) - int(info.min) + 1)
    return bounds


def astype_as_pytorch(xp, x, target):
    """Array ``x`` cast to the mdtensor dtype ``target`` as PyTorch casts: a complex number
    becomes real by its real part (bool: its truth), which the Array API leaves out (and
    array_api_strict refuses)."""
    native = getattr(xp, target.name)
    if x.dtype == native:
        return x
    if target.kind != "c" and dtype_of(x).kind == "c":
        x = xp.not_equal(x, 0) if target.kind == "b" else xp.real(x)
    return xp.astype(x, native)


def promote_scalar(xp, a, b):
    """``(a, b)`` -- arrays or Python scalars, at least one array unless both are scalars
    -- as the Array API specifies them (Note [Python scalars on strict backends])."""
    sa, sb = isinstance(a, _SCALARS), isinstance(b, _SCALARS)
    if sa == sb:
        if not sa:
            return a, b
        key = (type(a), type(b), dt.get_default_dtype())
        name = _SCALAR_PAIRS.get(key)
        if name is None:  # the same for every value of these types (and default dtype)
            name = _SCALAR_PAIRS[key] = dt.result_type(a, b).name
        a = xp.asarray(a, dtype=getattr(xp, name))
        b = with_array(xp, a, b)[1]
        return a, b
    if sa:
        b, a = with_array(xp, b, a)
        return a, b
    return with_array(xp, a, b)


def promote_arrays(xp, a, b):
    """Arrays ``a`` and ``b`` cast to their ``result_type`` when their kinds differ (Note
    [Tensors of different kinds]); themselves otherwise."""
    if a.dtype == b.dtype:
        return a, b
    da, db = dtype_of(a), dtype_of(b)
    if da.kind == db.kind and da is not dt.bfloat16 and db is not dt.bfloat16:
        return a, b  # (bfloat16's pairs: Note [Promotion of bfloat16] in _dtypes.py)
    target = dt.promote_types(da, db)
    native = getattr(xp, target.name)
    return (a if da is target else xp.astype(a, native),
            b if db is target else xp.astype(b, native))


def _scalar_self(xp, s, a):
    a, s = with_array(xp, a, s)
    return s, a



def scalar_operands(schema) -> tuple[str, str] | None:
    """The operand names of an overload whose ``self`` or ``other`` is a ``Scalar`` (None
    for any other overload)."""
    args = {a.name: a for a in schema.arguments if not a.kwarg_only}
    if "self" in args and "other" in args and "Scalar" in (args["self"].type.base,
                                                          args["other"].type.base):
        return "self", "other"
    return None


def tensor_operands(schema) -> tuple[int, int] | None:
    """The positions of an overload's ``self`` and ``other`` (``mat2``, ``tensor``) when
    both are Tensors (``add.Tensor``, ``matmul``, ``mm``, ``where.self``), else None."""
    positional = [a for a in schema.arguments if not a.kwarg_only]
    names = [a.name for a in positional]
    second = next((n for n in ("other", "mat2", "tensor") if n in names), None)
    if "self" not in names or second is None:  # mm(self, mat2), dot(self, tensor)
        return None
    i, j = names.index("self"), names.index(second)
    others = [a for k, a in enumerate(schema.arguments) if k not in (i, j)
              and a.type.is_tensor_like and a.name != "condition"]
    if others:  # matmul_backward(grad_out, self, other): not a pair of operands
        return None
    if all(positional[k].type.is_tensor and not positional[k].type.optional for k in (i, j)):
        return i, j
    return None


def with_scalar_promotion(impl, schema, exact=False):
    """``impl`` with its Scalar operands promoted first (Note [Python scalars on strict
    backends]), or its two Tensor operands (Note [Tensors of different kinds]); ``impl``
    itself for overloads without such operands.  ``exact``: a comparison (Note [Integers
    out of range])."""
    if scalar_operands(schema) is None:
        pair = tensor_operands(schema)
        if pair == (0, 1):
            def promoting(xp, self, other, *rest, **kwargs):
                self, other = promote_arrays(xp, self, other)
                return impl(xp, self, other, *rest, **kwargs)
        elif pair is not None:
            i, j = pair

            def promoting(xp, *args, **kwargs):
                if len(args) > max(i, j):
                    args = list(args)
                    args[i], args[j] = promote_arrays(xp, args[i], args[j])
                return impl(xp, *args, **kwargs)
        else:
            return impl
        promoting.__name__ = getattr(impl, "__name__", "impl")
        promoting.__qualname__ = promoting.__name__
        return promoting
    positional = [a for a in schema.arguments if not a.kwarg_only]
    names = [a.name for a in positional]
    defaults = {a.name: a.default for a in positional if a.has_default}
    i, j = names.index("self"), names.index("other")
    last = max(i, j)
    scalar_self = positional[i].type.base == "Scalar"
    scalar_other = positional[j].type.base == "Scalar"

    if (i, j) == (0, 1) and scalar_other and not scalar_self:  # add.Scalar, add_.Scalar, ...
        def promoting(xp, self, other, *rest, **kwargs):
            self, other = with_array(xp, self, other, exact)
            return impl(xp, self, other, *rest, **kwargs)
    elif (i, j) == (0, 1) and scalar_self and not scalar_other:  # add.Scalar_Tensor, ...
        def promoting(xp, self, other, *rest, **kwargs):
            other, self = with_array(xp, other, self, exact)
            return impl(xp, self, other, *rest, **kwargs)
    else:  # where.Scalar*: the operands follow the condition
        pair = (promote_scalar if scalar_self and scalar_other
                else with_array if scalar_other else _scalar_self)

        def promoting(xp, *args, **kwargs):
            if len(args) <= last:
                args, kwargs = _positional(names, defaults, args, kwargs)
            a, b = args[i], args[j]
            pa, pb = pair(xp, a, b)
            if pa is not a or pb is not b:
                args = list(args)
                args[i], args[j] = pa, pb
            return impl(xp, *args, **kwargs)

    promoting.__name__ = getattr(impl, "__name__", "impl")
    promoting.__qualname__ = promoting.__name__
    return promoting


# Note [Scalars written into tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x[k] = v``, ``masked_fill(mask, v)`` and ``full(shape, v, dtype=...)`` write a Python
# scalar into a dtype that never changes.  Backends disagreed (NumPy raised for ``1j`` into
# float32, JAX dropped the imaginary part; array_api_strict refused ``2.5`` into int64, NumPy
# and JAX truncated); the one rule is PyTorch's ``checked_convert``: a complex scalar into a
# tensor that is not complex is a TypeError; into a bool tensor a number is ``bool(v)``; a
# float into an integer tensor is compared with the dtype's range first (c10's
# ``overflows``: -0.5 does not fit uint8, it is 0 in int8) and then truncated toward zero (a
# non-finite one is a ValueError); an int outside an integer dtype's range is an
# OverflowError (PyTorch: "value cannot be converted to type int8_t without overflow"),
# except that an unsigned dtype takes an int down to minus its maximum as two's complement
# (-1 is 255 in uint8, as PyTorch); a finite float beyond a single-precision dtype (1e300
# into float32) is an OverflowError too; anything that is not a number (None) is a
# TypeError.  The value is converted here, before anything is written.


def scalar_into(name: str, value, dtype: dt.DType):
    """The Python scalar ``value`` as written into a tensor of ``dtype`` (Note [Scalars
    written into tensors])."""
    if not isinstance(value, _SCALARS):
        raise TypeError(f"{name}: can't assign a {type(value).__name__} to a {dtype.name} "
                        f"tensor; expected a number or a Tensor")
    kind = dtype.kind
    if kind != "c" and isinstance(value, complex):
        raise TypeError(f"{name}: can't assign the complex value {value!r} to a "
                        f"{dtype.name} tensor")
    if kind == "b":
        return bool(value)
    if kind in "fc":
        big = _FLOAT_MAX.get(dtype.name)
        parts = (value.real, value.imag) if isinstance(value, complex) else (value,)
        if big is not None and any(math.isfinite(p) and abs(p) > big for p in parts):
            raise OverflowError(f"{name}: value {value!r} cannot be converted to "
                                f"{dtype.name} without overflow")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: can't assign {value!r} to a {dtype.name} tensor")
    low, span = _bounds(dtype)
    high = low + span - 1
    if low <= value <= high:  # a float before it is truncated (-0.5 for uint8 is not)
        return int(value)
    if kind == "u" and not isinstance(value, float) and -high <= value < 0:
        return int(value) + span  # two's complement
    raise OverflowError(f"{name}: value {value!r} cannot be converted to {dtype.name} "
                        f"without overflow (range [{low}, {high}])")


def _positional(names, defaults, args, kwargs):
    """A call with positional parameters given by keyword, made positional (impls name
    their parameters freely)."""
    kwargs = dict(kwargs)
    given = [k for k, n in enumerate(names) if n in kwargs]
    args = list(args)
    for n in names[len(args):max(given, default=-1) + 1]:
        args.append(kwargs.pop(n) if n in kwargs else defaults[n])
    return args, kwargs
