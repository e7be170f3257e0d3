"""mdtensor's dtype objects and type promotion.

``md.float32`` and friends are singletons of ``DType``.  Each backend maps its native dtypes
to them (``Backend.dtype_from_native`` / ``Backend.native_dtype``).  Promotion follows the
Array API standard's table for same-kind pairs and NumPy's rules across kinds (NumPy is the
reference backend; e.g. ``int64 + float32 -> float64``), so the Meta device agrees with the
NumPy backend.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "DType",
    "all_dtypes",
    "bfloat16",
    "bool_",
    "complex64",
    "complex128",
    "dtype_from_name",
    "float16",
    "float32",
    "float64",
    "get_default_dtype",
    "int8",
    "int16",
    "int32",
    "int64",
    "result_type",
    "set_default_dtype",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]


class DType:
    """An mdtensor dtype (an immutable singleton per name).

    Attributes:
        name: ``'float32'``.
        kind: ``'b'`` bool, ``'i'`` signed, ``'u'`` unsigned, ``'f'`` real floating,
            ``'c'`` complex floating.
        itemsize: bytes per element.
        numpy: the equivalent NumPy dtype (the reference used by promotion and tests).
    """

    __slots__ = ("name", "kind", "itemsize", "numpy", "_torch_name")

    def __init__(self, name: str, kind: str, torch_name: str):
        self.name = name
        self.kind = kind
        self.numpy = np.dtype(name.rstrip("_"))
        self.itemsize = self.numpy.itemsize
        self._torch_name = torch_name

    @property
    def is_floating_point(self) -> bool:
        return self.kind == "f"

    @property
    def is_complex(self) -> bool:
        return self.kind == "c"

    @property
    def is_signed(self) -> bool:
        return self.kind in "ifc"

    def __repr__(self) -> str:
        return f"md.{self.name}"

    def __reduce__(self):
        return dtype_from_name, (self.name,)

    def __eq__(self, other) -> bool:
        if isinstance(other, DType):
            return other is self
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)


# Note [bfloat16 through ml_dtypes]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy has no bfloat16; ``ml_dtypes`` (installed with JAX; the ``bfloat16`` extra) adds one
# as a NumPy user dtype with ufunc loops and casts, and ``jnp.bfloat16`` is that same type.
# ``import mdtensor`` must stay light, so ``md.bfloat16.numpy`` imports ml_dtypes on first
# use (an ImportError naming the extra when it is missing) and only then registers it for
# ``from_numpy_dtype`` and with the backends that asked (``on_bfloat16``: the NumPy and Dask
# namespaces get a ``bfloat16`` attribute, as jax.numpy has).  bfloat16 is not in
# ``all_dtypes`` (the Array API's dtypes and float16): loops over every dtype would import
# ml_dtypes, and array_api_strict (the loopback backend) has no bfloat16.  Its promotion is
# PyTorch's, not ml_dtypes' (NumPy's would give float64 with int64, and refuses float16):
# Note [Promotion of bfloat16].
class _LazyDType(DType):
    """A DType whose NumPy dtype comes from an optional package, imported on first use."""

    __slots__ = ("_numpy_dtype", "_load")

    def __init__(self, name: str, kind: str, torch_name: str, itemsize: int, load):
        self.name = name
        self.kind = kind
        self.itemsize = itemsize
        self._torch_name = torch_name
        self._numpy_dtype = None
        self._load = load

    @property
    def numpy(self):  # type: ignore[override]
        hit = self._numpy_dtype
        if hit is None:
            hit = self._numpy_dtype = np.dtype(self._load())
            _BY_NUMPY[hit] = self
            for hook in _ON_BFLOAT16:
                hook(hit)
        return hit


def _load_bfloat16():
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError("md.bfloat16 on NumPy needs the ml_dtypes package: pip install "
                          "'mdtensor[bfloat16]' (or ml_dtypes; JAX installs it)") from None
    return ml_dtypes.bfloat16


#: callbacks taking the NumPy bfloat16 dtype when ml_dtypes is first loaded
_ON_BFLOAT16: list = []


def on_bfloat16(hook) -> None:
    """Call ``hook(numpy_bfloat16_dtype)`` once bfloat16 resolves (now, if it already has):
    a backend namespace without bfloat16 registers it there (Note [bfloat16 through
    ml_dtypes])."""
    _ON_BFLOAT16.append(hook)
    if bfloat16._numpy_dtype is not None:
        hook(bfloat16._numpy_dtype)


bool_ = DType("bool", "b", "Bool")
int8 = DType("int8", "i", "Char")
int16 = DType("int16", "i", "Short")
int32 = DType("int32", "i", "Int")
int64 = DType("int64", "i", "Long")
uint8 = DType("uint8", "u", "Byte")
uint16 = DType("uint16", "u", "UInt16")
uint32 = DType("uint32", "u", "UInt32")
uint64 = DType("uint64", "u", "UInt64")
float16 = DType("float16", "f", "Half")
float32 = DType("float32", "f", "Float")
float64 = DType("float64", "f", "Double")
complex64 = DType("complex64", "c", "ComplexFloat")
complex128 = DType("complex128", "c", "ComplexDouble")
bfloat16 = _LazyDType("bfloat16", "f", "BFloat16", 2, _load_bfloat16)

all_dtypes: tuple[DType, ...] = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float16, float32, float64, complex64, complex128,
)
_BY_NAME = {d.name: d for d in all_dtypes}
_BY_NAME["bool_"] = bool_
_BY_NAME["bfloat16"] = bfloat16
# PyTorch spellings, so torch users can say md.float / md.long.
_ALIASES = {"float": float32, "double": float64, "half": float16, "long": int64, "int": int32,
            "short": int16, "cfloat": complex64, "cdouble": complex128}
_BY_NUMPY = {d.numpy: d for d in all_dtypes}
#: the classes of those NumPy dtypes (``numpy.dtypes.Float32DType``, ...): ``as_dtype`` of a
#: native dtype, the kernels' common call, is one set test and one lookup
_NUMPY_DTYPE_CLASSES = frozenset(type(d) for d in _BY_NUMPY)


# Note [The default dtype]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# ``md.set_default_dtype(md.float64)`` makes float64 what PyTorch's does: the dtype of the
# floating factories without ``dtype=`` (``zeros``, ``rand``, ``arange(0.5)``, ...), of
# Python floats in ``asarray``, of integer inputs to float functions (``sqrt``, ``mean``),
# and of a Python float meeting an integer tensor; complex128 becomes the default complex
# dtype with it.  Only float32 and float64 are accepted, as in PyTorch.  The setting is
# process-wide, as PyTorch's (one list ``_DEFAULT``, read with no lock: a call sees the value
# of the last ``set_default_dtype``, from whichever thread).
_DEFAULT = [float32, complex64]


def get_default_dtype() -> DType:
    """The default floating dtype (float32 unless ``set_default_dtype`` changed it)."""
    return _DEFAULT[0]


def default_complex_dtype() -> DType:
    """The complex dtype matching the default floating dtype (complex64 or complex128)."""
    return _DEFAULT[1]


def set_default_dtype(d) -> None:
    """Set the default floating dtype, as ``torch.set_default_dtype`` (Note [The default
    dtype]).

    Args:
        d: ``md.float32`` or ``md.float64`` (or their names).

    Raises:
        TypeError: any other dtype.
    """
    try:
        new = as_dtype(d)
    except (TypeError, ValueError):
        new = None
    if new not in (float32, float64):
        raise TypeError(f"set_default_dtype: only float32 and float64 are supported as the "
                        f"default dtype, got {d!r}")
    _DEFAULT[:] = [new, complex128 if new is float64 else complex64]


def dtype_from_name(name: str) -> DType:
    try:
        return _named(_BY_NAME.get(name) or _ALIASES[name])
    except KeyError:
        raise TypeError(f"unknown dtype name {name!r}") from None


def _named(d: DType) -> DType:
    """``d``, found by its name; bfloat16 resolved first, so that the backends that wait
    for it have registered it before its arrays reach them (Note [bfloat16 through
    ml_dtypes])."""
    if d is bfloat16 and bfloat16._numpy_dtype is None:
        bfloat16.numpy  # noqa: B018 - resolves it
    return d


def from_numpy_dtype(dt) -> DType:
    """The DType for a NumPy dtype (or anything ``np.dtype`` accepts)."""
    try:
        return _BY_NUMPY[dt]
    except (KeyError, TypeError):
        pass
    try:
        npdt = np.dtype(dt)
    except TypeError:
        npdt = None
    found = _BY_NUMPY.get(npdt) if npdt is not None else None
    if found is None and npdt is not None and npdt.name == "bfloat16":
        found = bfloat16 if bfloat16.numpy == npdt else None  # ml_dtypes' (Note above)
    if found is None:
        raise TypeError(f"mdtensor has no dtype matching {dt!r}") from None
    return found


def as_dtype(dt) -> DType:
    """Accept an md dtype, a NumPy dtype, a dtype name, or a Python type (``float``)."""
    if type(dt) is DType:
        return dt
    if type(dt) in _NUMPY_DTYPE_CLASSES:  # a native dtype (a non-native byte order: below)
        found = _BY_NUMPY.get(dt)
        if found is not None:
            return found
    if dt is bfloat16:  # resolved before a kernel names it (Note [bfloat16 through ml_dtypes])
        return _named(dt)
    if isinstance(dt, str):
        return dtype_from_name(dt)
    if dt is bool:
        return bool_
    if dt is int:
        return int64
    if dt is float:
        return float64
    if dt is complex:
        return complex128
    if isinstance(dt, np.dtype):  # before ``.name``, which NumPy computes in Python
        found = _BY_NUMPY.get(dt)
        if found is not None:
            return found
    name = getattr(dt, "name", None)  # another library's dtype object (jnp, torch-like)
    if isinstance(name, str) and name in _BY_NAME:
        return _named(_BY_NAME[name])
    if not isinstance(dt, (np.dtype, type)):
        # Dtype objects of other Array API libraries print as "<library>.<name>"
        # (array_api_strict.float32); they must not be compared with NumPy's.
        text = str(dt).rsplit(".", 1)[-1]
        if text in _BY_NAME:
            return _named(_BY_NAME[text])
    return from_numpy_dtype(dt)


_promotion_cache: dict[tuple[DType, DType], DType] = {}


# Note [Promotion of bfloat16]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# PyTorch's rule, in a table of its own (NumPy's, through ml_dtypes, refuses float16 and
# gives float64 with int64): bfloat16 with bool or any integer is bfloat16, with float16
# float32 (neither holds the other), with float32, float64 and the complex dtypes the wider
# one (complex64 keeps bfloat16's values).  A Python float is weak beside it (``x + 0.5``
# stays bfloat16), a complex scalar gives complex64 (Note [Scalars of a higher kind]).
def _promote_bfloat16(other: DType) -> DType:
    if other.kind in "biu" or other is bfloat16:
        return bfloat16
    if other is float16:
        return float32
    return other


def promote_types(a: DType, b: DType) -> DType:
    """Array API promotion for same-kind pairs, NumPy's across kinds (bfloat16: Note
    [Promotion of bfloat16])."""
    key = (a, b)
    hit = _promotion_cache.get(key)
    if hit is None:
        if a is bfloat16 or b is bfloat16:
            hit = _promote_bfloat16(b if a is bfloat16 else a)
        else:
            hit = _BY_NUMPY[np.promote_types(a.numpy, b.numpy)]
        _promotion_cache[key] = hit
    return hit


def result_type(*args) -> DType:
    """The dtype of combining ``args`` (dtypes, tensors, or Python scalars).

    Python scalars are *weak*: they do not widen the dtype of an array operand of the same
    or a higher kind (Array API 2024.12 rules, NEP 50); one of a higher kind gives its
    kind's default dtype, as in PyTorch (Note [Scalars of a higher kind] below).

    Raises:
        TypeError: if no argument is given, or an argument is neither a dtype, a tensor nor
            a Python scalar.
    """
    dtypes = []
    scalars = []
    for a in args:
        if isinstance(a, DType):
            dtypes.append(a)
        elif isinstance(a, (bool, int, float, complex)):
            scalars.append(a)
        elif hasattr(a, "dtype") and isinstance(a.dtype, DType):
            dtypes.append(a.dtype)
        else:
            try:
                dtypes.append(as_dtype(a))
            except TypeError:
                raise TypeError(
                    f"result_type: expected dtypes, tensors or Python scalars, got "
                    f"{type(a).__name__}"
                ) from None
    if not dtypes and not scalars:
        raise TypeError("result_type: at least one dtype, tensor or scalar is required")
    if not dtypes:  # scalars only: the default dtype of the highest kind
        return _scalar_default(max(_SCALAR_RANK[type(s)] for s in scalars))
    out = dtypes[0]
    for d in dtypes[1:]:
        out = promote_types(out, d)
    if scalars:
        # Note [Scalars of a higher kind]: PyTorch's rule.  A scalar of the tensors' kind
        # or a lower one is weak (int8 + 1 is int8, float16 + 0.5 float16); one of a
        # higher kind gives that kind's default dtype -- an int64 tensor plus 0.5 is
        # float32 (the default float dtype), plus 1j complex64 (complex128 for a float64
        # tensor, its complex counterpart); NumPy would give float64 and complex128.
        rank = max(_SCALAR_RANK[type(s)] for s in scalars)
        if rank > _KIND_RANK[out.kind]:
            if rank == 3 and out.kind == "f":
                return complex128 if out is float64 else complex64
            return _scalar_default(rank)
        if out is bfloat16:  # Note [Promotion of bfloat16]: weak scalars of its kind or lower
            return out
        out = from_numpy_dtype(np.result_type(np.empty(0, out.numpy), *scalars))
    return out


def can_cast(from_: DType, to: DType, casting: str = "same_kind") -> bool:
    if bfloat16 in (from_, to) and from_ is not to:
        return _can_cast_bfloat16(from_, to, casting)
    return bool(np.can_cast(from_.numpy, to.numpy, casting=casting))


def _can_cast_bfloat16(from_: DType, to: DType, casting: str) -> bool:
    """``can_cast`` with bfloat16 on one side, without ml_dtypes: "safe" when every value
    survives (bool, int8 and uint8 into bfloat16; bfloat16 into float32, float64 and the
    complex dtypes), "same_kind" also within a kind or to a higher one."""
    if casting == "unsafe":
        return True
    if from_ is bfloat16:
        safe = to.kind == "c" or to in (float32, float64)
    else:
        safe = from_ in (bool_, int8, uint8)
    if safe or casting in ("no", "equiv", "safe"):
        return safe
    return _KIND_RANK[from_.kind] <= _KIND_RANK[to.kind]


_SCALAR_RANK = {bool: 0, int: 1, float: 2, complex: 3}
_KIND_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def _scalar_default(rank: int) -> DType:
    """The dtype of a Python scalar of ``rank`` (bool, int, float, complex) standing alone or
    beside tensors of a lower kind (Note [The default dtype])."""
    return (bool_, int64, *_DEFAULT)[rank]
