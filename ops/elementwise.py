"""Elementwise ops: the Array API's elementwise functions plus torch spellings.

Binary ops get three overloads -- ``.Tensor`` (tensor, tensor), ``.Scalar`` (tensor,
Python scalar) and ``.Scalar_Tensor`` (Python scalar, tensor) -- so Python scalars reach
the backend as scalars and stay *weak* in type promotion (Array API 2024.12 / NEP 50).
``.Tensor`` and ``.Scalar`` are structured: in-place (``add_``) and ``out=`` variants come
from the same impl, writing straight into the destination with ``out=`` on NumPy.

Note [Integer inputs of float functions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``exp``, ``sin``, ``sqrt``, true division, ... of integer or bool tensors return the
default float dtype (float32), as in PyTorch; NumPy alone would give float64.  The Array
API leaves this unspecified.  One rule for every op whose result is floating for a
floating input: the reductions ``mean``, ``var``, ``std``, ``logsumexp``, ``softmax``,
``log_softmax``, ``gelu``, ``silu``, the floating ``linalg`` functions and the FFTs cast
integer and bool inputs with ``to_float`` first (so an FFT gives complex64), and their meta
functions say so (``_meta_fns.unary_float``, ``float_reduction``).
"""

from __future__ import annotations

import math
from operator import attrgetter

import numpy as np

from mdtensor import _dtypes as dt
from mdtensor.dispatch.keys import DispatchKey

from . import _meta_fns as mf
from . import _special, special_values
from ._accepted import computed_dtype
from ._bools import as_numbers, is_bool, with_bools_as_numbers
from ._cpu_kernels import register_cpu, register_direct
from ._decl import CATALOGUE, OpInfo, Ufunc, defop
from ._promotion import (
    bfloat16_via_float32,
    dtype_of,
    promote_arrays,
    promote_scalar,
    with_array,
)
from ._samples import binary_samples, unary_samples
from ._scipy_special import unary_kernel

__all__ = [
    "ALL",
    "BOOL",
    "COMPAT_WRAPPED",
    "COMPLEX",
    "FLOATING",
    "FLOATS",
    "INTS",
    "NUMERIC",
    "REAL",
    "binary",
    "to_float",
    "unary",
]

BOOL = (dt.bool_,)
INTS = (dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint16, dt.uint32, dt.uint64)
FLOATS = (dt.float32, dt.float64)
COMPLEX = (dt.complex64, dt.complex128)
REAL = INTS + FLOATS
NUMERIC = REAL + COMPLEX
ALL = BOOL + NUMERIC
FLOATING = FLOATS + COMPLEX
#: ``accepts=`` kinds (Note [Accepted dtypes] in ops/_accepted.py)
REAL_KINDS, INT_KINDS, FLOAT_KINDS, NUMBER_KINDS = "biuf", "biu", "fc", "iuf"


_INT_LIKE: dict = {}  # native dtype -> is bool/integer (filled on first sight of a dtype)


def _int_like(a) -> bool:
    dtype = a.dtype
    # Keyed with the dtype's class too: array_api_strict dtypes hash like NumPy's but
    # compare unequal to them (with a warning), so keys of two libraries must never meet.
    key = (dtype.__class__, dtype)
    hit = _INT_LIKE.get(key)
    if hit is None:
        from mdtensor._dtypes import as_dtype

        hit = _INT_LIKE[key] = as_dtype(dtype).kind in ("b", "i", "u")
    return hit


def _declaration(name):
    """The catalogue's declaration of ``aten::name``."""
    return CATALOGUE[f"aten::{name}"]


def _is_ufunc(name: str) -> bool:
    """Whether backends with ``ufunc_out`` take ``out=`` for ``name`` (NumPy decides;
    array-api-compat re-exports NumPy's ufuncs unchanged, and is not imported here so that
    ``import mdtensor`` stays light)."""
    return isinstance(getattr(np, name, None), np.ufunc)


#: NumPy ufuncs that array-api-compat's NumPy namespace wraps (its ``ceil`` of an integer
#: array returns it unchanged; its ``sign`` of a complex number is ``z/|z|``): their CPU
#: kernels keep the generic impl.  tests/test_opinfo.py checks this list against
#: array-api-compat.
COMPAT_WRAPPED = frozenset({"ceil", "floor", "trunc", "sign"})
#: the dtype kinds for which array-api-compat's wrapper of a ``COMPAT_WRAPPED`` ufunc calls
#: the ufunc as it is (NumPy >= 2 rounds integers to themselves; ``sign`` differs for
#: complex numbers only): their CPU kernels call the ufunc for these kinds (tests/
#: test_opinfo.py checks they agree)
COMPAT_SAME_KINDS = {"ceil": "iuf", "floor": "iuf", "trunc": "iuf", "sign": "iuf"}


def _cpu_ufunc(name: str, floats_only: bool, kinds: str = "fc") -> Ufunc | None:
    """The direct CPU kernel of ``name`` (Note [NumPy fast impls] in ops/_decl.py)."""
    fn = getattr(np, name, None)
    if not isinstance(fn, np.ufunc):
        return None
    if name in COMPAT_WRAPPED:
        same = COMPAT_SAME_KINDS.get(name)
        if same is None:
            return None
        return Ufunc(fn, True, "".join(k for k in kinds if k in same) if floats_only else same)
    return Ufunc(fn, floats_only, kinds)


_TAKES_OUT: dict = {}


def _takes_out(f) -> bool:
    """Whether the backend function ``f`` is a ufunc taking ``out=`` (a compat wrapper,
    e.g. array-api-compat's ``ceil``, is not)."""
    hit = _TAKES_OUT.get(f)
    if hit is None:
        hit = _TAKES_OUT[f] = isinstance(f, np.ufunc) or type(f).__name__ == "ufunc"
    return hit


def to_float(xp, a):
    """``a`` as the default float dtype if it is an integer or bool array, else ``a``
    (Note [Integer inputs of float functions])."""
    if _int_like(a):
        return xp.astype(a, getattr(xp, dt.get_default_dtype().name))
    return a


# ---------------------------------------------------------------------------------------
# Declaration helpers


def unary(name, *, xp_name=None, float_fn=False, meta=None, dtypes=NUMERIC, ref=None,
          names=None, methods=None, structured=True, domain=None, complex_special=False,
          generic=None, accepts=None, cpu_kinds=None, cpu_ufunc=None):
    """A pointwise unary op.  ``complex_special``: NumPy's function misses the standard's
    complex special values too, so the generic impl applies them for every backend (Note
    [Special values] in ops/special_values.py; the CPU ufunc kernel then serves real
    dtypes only, and complex out=/in-place calls compute and copy).  ``generic(xp, a)``
    replaces the backend function ``xp.<xp_name>`` of a function that is not a float
    function in the generic impl (the CPU ufunc kernel still calls NumPy's, for the dtype
    kinds ``cpu_kinds`` only when given).  ``cpu_ufunc``: the NumPy ufunc the CPU kernel
    calls where NumPy's function of the name is none (``round``: ``rint``), for
    ``cpu_kinds``."""
    if float_fn and generic is not None:
        raise ValueError(f"unary {name!r}: generic= is for functions that are not float_fn")
    fn = attrgetter(xp_name or name)
    if float_fn:
        def impl(xp, a):
            if _int_like(a):
                a = to_float(xp, a)
            return fn(xp)(a)
    elif generic is not None:
        impl = generic
    else:
        def impl(xp, a):
            return fn(xp)(a)
    if complex_special:
        impl = special_values.fixed(name, impl)
    impl.__name__ = name
    inplace_impl = None
    if structured and _is_ufunc(xp_name or name):
        def inplace_impl(xp, out, a):
            f = fn(xp)
            if not _takes_out(f) or (complex_special and _is_complex(a)):
                return False
            f(a, out=out)
            return True
    ref = ref if ref is not None else getattr(np, xp_name or name, None)
    # With a complex fix the ufunc kernel serves real floats only (complex takes ``impl``).
    cpu = (Ufunc(cpu_ufunc, True, cpu_kinds) if cpu_ufunc is not None else
           _cpu_ufunc(xp_name or name, float_fn or complex_special or bool(cpu_kinds),
                      kinds=cpu_kinds or ("f" if complex_special else "fc")))
    return defop(
        f"{name}(Tensor self) -> Tensor",
        impl=impl, inplace_impl=inplace_impl, structured=structured,
        cpu_impl=cpu,
        meta=meta or (mf.unary_float if float_fn else mf.same),
        tags=("pointwise",),
        info=OpInfo(ref=ref, dtypes=dtypes, samples=unary_samples(domain)),
        names=names, methods=methods if methods is not None else (name,), accepts=accepts,
    )


def binary(name, *, xp_name=None, float_fn=False, meta=mf.binary, dtypes=NUMERIC, ref=None,
           names=None, methods=None, structured=True, domain=None, reflected=True,
           impl=None, generic=None, comparison=False, tags=(), accepts=None, cpu=None):
    """A pointwise binary op with its Tensor, Scalar and reflected overloads.  ``impl``
    replaces the backend function ``xp.<xp_name>``; it then serves every backend (no
    ufunc CPU kernel unless ``cpu`` gives one: a ``Ufunc`` for the dtype kinds where NumPy's
    ufunc computes what ``impl`` does) and out=/in-place variants compute it and copy.
    ``generic(xp, a, b)`` replaces it in the generic impl only (the CPU ufunc kernel still
    calls NumPy's)."""
    fn = attrgetter(xp_name or name)
    own = impl is not None
    if not own and float_fn:
        # Integer operands become floats first (Note [Integer inputs of float functions]),
        # so Python scalars are promoted after that, here.
        def impl(xp, a, b):
            return fn(xp)(*promote_scalar(xp, _to_float_any(xp, a), _to_float_any(xp, b)))
    elif generic is not None:
        impl = generic
    elif not own:
        def impl(xp, a, b):
            return fn(xp)(a, b)
    impl.__name__ = name

    def inplace_impl(xp, out, a, b):
        f = fn(xp)
        if not _takes_out(f):
            return False
        f(a, b, out=out)
        return True

    if own or not _is_ufunc(xp_name or name):
        inplace_impl = None

    ref = ref if ref is not None else getattr(np, xp_name or name, None)
    info = OpInfo(ref=ref, dtypes=dtypes, samples=binary_samples(domain))
    if cpu is None and not own:
        cpu = _cpu_ufunc(xp_name or name, float_fn)
    promote = ("exact" if comparison else True) if not float_fn or own else False
    decl = defop(
        f"{name}.Tensor(Tensor self, Tensor other) -> Tensor",
        impl=impl, inplace_impl=inplace_impl, structured=structured, meta=meta, cpu_impl=cpu,
        tags=("pointwise", *tags), info=info, names=names,
        methods=methods if methods is not None else (name,), accepts=accepts,
    )
    defop(f"{name}.Scalar(Tensor self, Scalar other) -> Tensor", impl=impl,
          inplace_impl=inplace_impl, structured=structured, meta=meta, cpu_impl=cpu,
          tags=("pointwise", *tags), decl=decl, promote_scalars=promote)
    if reflected:
        defop(f"{name}.Scalar_Tensor(Scalar self, Tensor other) -> Tensor", impl=impl,
              meta=meta, cpu_impl=cpu, tags=("pointwise", *tags), decl=decl,
              promote_scalars=promote)
    return decl


def _to_float_any(xp, a):
    if isinstance(a, (bool, int)):
        return float(a)
    if isinstance(a, (float, complex)):
        return a
    return to_float(xp, a)


# ---------------------------------------------------------------------------------------
# add / sub take alpha (torch): other is scaled by alpha first.


def _times_alpha(name, xp, a, b, alpha):
    """``(a, b * alpha)``, computed in the dtype of ``a`` and ``b``, which ``alpha`` does not
    change (PyTorch: ``add(bool, bool, alpha=2)`` is bool, ``add(int, int, alpha=0.5)``
    raises, and so does a bool alpha beside numbers).  A Python scalar ``b`` is multiplied
    in Python and stays weak (NumPy's multiply of two scalars gives a NumPy scalar, which
    promotes like an array: an int32 tensor minus ``1 * 2`` would be int64); the scaled
    scalar then meets ``a`` as the Array API specifies (Note [Python scalars on strict
    backends] in ops/_promotion.py; the kernels promoted ``b`` itself before)."""
    kind = computed_dtype([a, b]).kind
    if isinstance(alpha, bool) and kind != "b":
        raise TypeError(f"{name}: a bool alpha is only supported for bool results, got "
                        f"{computed_dtype([a, b]).name}")
    if (isinstance(alpha, float) and kind in "biu") or (
            isinstance(alpha, complex) and kind != "c"):
        raise TypeError(f"{name}: for {computed_dtype([a, b]).name} tensors alpha must not "
                        f"be a {type(alpha).__name__}")
    if kind == "b":  # b * alpha as a bool: b itself, or nothing
        if alpha:
            return a, b
        return a, False if isinstance(b, (bool, int)) else xp.zeros_like(b)
    if isinstance(b, (bool, int, float, complex)):
        return with_array(xp, a, b * alpha)
    return a, xp.multiply(*with_array(xp, b, alpha))


def _scales(alpha) -> bool:
    """Whether ``alpha`` is anything but the int 1 (even 1.0 and True are checked)."""
    return type(alpha) is not int or alpha != 1


def _add(xp, a, b, alpha=1):
    if _scales(alpha):
        a, b = _times_alpha("add", xp, a, b, alpha)
    if is_bool(a) and is_bool(b):  # Note [Arithmetic of bools] in ops/_bools.py
        return xp.not_equal(xp.add(*as_numbers(xp, a, b)), 0)
    return xp.add(a, b)


def _add_out(xp, out, a, b, alpha=1):
    if _scales(alpha):
        a, b = _times_alpha("add", xp, a, b, alpha)
    xp.add(a, b, out=out)
    return True


def _sub(xp, a, b, alpha=1):
    if _scales(alpha):
        a, b = _times_alpha("sub", xp, a, b, alpha)
    return xp.subtract(a, b)


def _sub_out(xp, out, a, b, alpha=1):
    if _scales(alpha):
        a, b = _times_alpha("sub", xp, a, b, alpha)
    xp.subtract(a, b, out=out)
    return True


def _alpha_ref(fn):
    def ref(a, b, alpha=1):
        return fn(a, np.multiply(b, alpha) if alpha != 1 else b)
    return ref


def _alpha_op(name, impl, impl_out, ref, names):
    info = OpInfo(ref=_alpha_ref(ref), dtypes=NUMERIC, samples=binary_samples(None))
    cpu = Ufunc(ref)  # alpha= (keyword or positional) takes the generic impl
    decl = defop(f"{name}.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
                 impl=impl, inplace_impl=impl_out, structured=True, meta=mf.binary,
                 cpu_impl=cpu, tags=("pointwise",), info=info, names=names, methods=(name,))
    defop(f"{name}.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor", impl=impl,
          inplace_impl=impl_out, structured=True, meta=mf.binary, cpu_impl=cpu,
          tags=("pointwise",), decl=decl)
    defop(f"{name}.Scalar_Tensor(Scalar self, Tensor other, Scalar alpha=1) -> Tensor",
          impl=impl, meta=mf.binary, cpu_impl=cpu, tags=("pointwise",), decl=decl)
    return decl


_alpha_op("add", _add, _add_out, np.add, ("add",))
_alpha_op("sub", _sub, _sub_out, np.subtract, ("sub", "subtract"))


binary("mul", xp_name="multiply", names=("mul", "multiply"), methods=("mul", "multiply"),
       generic=with_bools_as_numbers(lambda xp, a, b: xp.multiply(a, b), True, 2))


def _div_meta(a, b, *args, **kwargs):
    shape, dtype = mf.binary(a, b)
    return shape, dt.get_default_dtype() if dtype.kind in "biu" else dtype


binary("div", xp_name="divide", float_fn=True, meta=_div_meta, names=("div", "divide"),
       methods=("div", "divide", "true_divide"), ref=np.true_divide)


# Note [Integer division by zero]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy gives 0 for an integer divided by zero (with a RuntimeWarning), JAX -1 or -2 from
# its own formula; PyTorch raises.  mdtensor raises ZeroDivisionError naming the op on
# every backend, for floor_divide, remainder and fmod of integer operands (float operands
# give inf/nan, as everywhere).  The check reads the divisor's values, so these impls are
# tagged ``checks_values``: the JAX backend does not trace them under jax.jit.


def _int_divisor_check(name, xp, a, b) -> None:
    """Raise if ``b`` has a zero and ``a // b`` is an integer division (Note [Integer
    division by zero])."""
    if _has_float(a) or _has_float(b):
        return
    if any(not isinstance(v, (bool, int)) and 0 in v.shape for v in (a, b)):
        return  # nothing is divided (PyTorch: an empty result)
    if isinstance(b, (bool, int)):
        zero = b == 0
    else:
        zero = bool(xp.any(b == 0))
    if zero:
        raise ZeroDivisionError(f"{name}: integer division by zero")


def _floor_divide(xp, a, b):
    _int_divisor_check("floor_divide", xp, a, b)
    # Note [floor_divide of infinities]: NumPy (as Python and PyTorch) computes floor
    # division through fmod, so an infinite operand gives NaN or a finite value where the
    # Array API specifies the limit: floor_divide(+inf, 2) is +inf, floor_divide(1, -inf)
    # is -0.  Where an operand is infinite the result is floor(a / b), which is the limit.
    q = xp.floor_divide(a, b)
    if not _has_float(a) and not _has_float(b):
        return q
    if any(isinstance(v, float) and math.isinf(v) for v in (a, b)):
        return xp.floor(xp.divide(a, b))  # every element has an infinite operand
    inf = _isinf(xp, a, b)
    if inf is None:
        return q
    return xp.where(inf, xp.floor(xp.divide(a, b)), q)


def _has_float(v):
    if isinstance(v, float):
        return True
    return not isinstance(v, (bool, int)) and dt.as_dtype(v.dtype).kind == "f"


def _isinf(xp, a, b):
    """Where the float arrays among ``a`` and ``b`` are infinite (None if neither is one)."""
    masks = [xp.isinf(v) for v in (a, b)
             if not isinstance(v, (bool, int, float)) and _has_float(v)]
    if not masks:
        return None
    if len(masks) == 2:
        m = xp.logical_or(masks[0], masks[1])
    else:
        m = masks[0]
    return m


def _remainder(xp, a, b):
    _int_divisor_check("remainder", xp, a, b)
    return xp.remainder(a, b)


# Note [floor_divide on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The generic impl's infinity fix (Note [floor_divide of infinities]) is six array ops,
# 3 us on a small array, beside NumPy's floor_divide itself (2.9 us for 256 float32).  On
# NumPy, float32 and float64 operands first ask whether they have an infinity at all: a
# dot product of the two (of each with itself where they broadcast), which is finite only
# when every element of both is (an infinity times anything is infinite or NaN, and so is
# any sum with it).  A finite one means NumPy's floor_divide is the result; anything else
# (an infinity, a NaN, a sum that overflows) takes the generic impl, as do other dtypes.


def _floor_divide_cpu(xp, a, b):
    """floor_divide's CPU impl (Note [floor_divide on NumPy]); its Scalar overloads'
    operands come unpromoted, as the ``cpu_impl`` of ``defop`` gets them."""
    ta, tb = type(a), type(b)
    if ta is np.ndarray and a.dtype.char in "fd":
        if tb is np.ndarray:
            if b.dtype is a.dtype and math.isfinite(
                    np.vdot(a, b) if a.shape == b.shape else np.vdot(a, a) + np.vdot(b, b)):
                return np.floor_divide(a, b)
        elif _finite_scalar(b) and math.isfinite(np.vdot(a, a)):
            return np.floor_divide(a, b)
    elif tb is np.ndarray and b.dtype.char in "fd" and _finite_scalar(a) \
            and math.isfinite(np.vdot(b, b)):
        return np.floor_divide(a, b)
    if ta is np.ndarray and tb is np.ndarray:
        a, b = promote_arrays(xp, a, b)
    else:
        a, b = promote_scalar(xp, a, b)
    return _floor_divide(xp, a, b)


def _finite_scalar(v) -> bool:
    """A Python float or int that a float array's floor_divide takes as it is (a float of
    the array's dtype, exactly for the ints): the Note's fast path."""
    t = type(v)
    return (t is float and math.isfinite(v)) or (t is int and -(1 << 24) < v < 1 << 24)


binary("floor_divide", dtypes=REAL, domain="nonzero", impl=_floor_divide, accepts=NUMBER_KINDS,
       ref=lambda a, b: _floor_divide(np, a, b), tags=("checks_values",),
       cpu=_floor_divide_cpu)
# Floating operands divide by zero without an error (Note [Integer division by zero]):
# NumPy's ufunc is the impl for them.
binary("remainder", dtypes=REAL, domain="nonzero", names=("remainder",), accepts=NUMBER_KINDS,
       methods=("remainder",), impl=_remainder, ref=np.remainder, tags=("checks_values",),
       cpu=Ufunc(np.remainder, True, "f"))


def _fmod(xp, a, b):
    # Not in the Array API: C's fmod, the remainder with the dividend's sign.  For floats,
    # the remainder of the magnitudes given the sign of a: exact (remainder's correction
    # step, for operands of different signs, rounds: fmod(1.7952956, -4) in float32), a
    # zero gets the dividend's sign (fmod(-0.0, 2) is -0) and fmod(x, +-inf) is x.
    _int_divisor_check("fmod", xp, a, b)
    if _has_float(a) or _has_float(b):
        r = xp.remainder(xp.abs(a), abs(b) if isinstance(b, (int, float)) else xp.abs(b))
        return xp.copysign(r, a if a.dtype == r.dtype else xp.astype(a, r.dtype))
    r = xp.remainder(a, b)
    a_neg = (a < 0) if not isinstance(a, (int, float)) else xp.asarray(a < 0)
    fix = xp.logical_and(r != 0, xp.logical_xor(a_neg, r < 0))
    return xp.where(fix, r - b, r)


# On NumPy, floating operands take C's fmod itself (np.fmod), which is exact and gives
# what the generic impl computes: the dividend's sign, fmod(x, +-inf) = x, nan at 0.
_fmod_cpu = Ufunc(np.fmod, True, "f")
defop("fmod.Tensor(Tensor self, Tensor other) -> Tensor", impl=_fmod, meta=mf.binary,
      cpu_impl=_fmod_cpu,
      tags=("pointwise", "checks_values"), accepts=NUMBER_KINDS, methods=("fmod",),
      names=("fmod",),
      info=OpInfo(ref=np.fmod, dtypes=REAL, samples=binary_samples("nonzero")))
defop("fmod.Scalar(Tensor self, Scalar other) -> Tensor", impl=_fmod, meta=mf.binary,
      cpu_impl=_fmod_cpu, tags=("pointwise",), decl=_declaration("fmod"))


def _pow(xp, a, b):
    # Both operands in the result's dtype first (JAX's power widens a uint8 tensor raised
    # to a Python int's power); an integer raised to a negative integer power raises, as
    # NumPy (one min read, so the impl is tagged checks_values: JAX would give garbage),
    # where PyTorch computes 1 // x**-n.
    dtype = computed_dtype([a, b])
    a, b = (xp.asarray(v, dtype=getattr(xp, dtype.name)) if isinstance(v, (bool, int, float,
                                                                           complex))
            else v for v in (a, b))
    if dtype.kind in "iu" and (bool(xp.min(b) < 0) if math.prod(b.shape) else False):
        raise ValueError("pow: integers to negative integer powers are not allowed")
    r = xp.pow(a, b)
    if dtype.kind == "c":  # 0 ** w as NumPy's on every backend (JAX: nan for 0 ** (1 + 1j)):
        zero = a == 0  # 1 at w = 0, 0 where Re(w) > 0 (the limit), nan elsewhere
        r = xp.where(xp.logical_and(zero, xp.real(b) > 0), xp.zeros_like(r), r)
        r = xp.where(xp.logical_and(zero, b == 0), xp.ones_like(r), r)
    return r


binary("pow", dtypes=NUMERIC, domain="pow", methods=("pow",), names=("pow",),
       accepts="iufc", generic=_pow, tags=("checks_values",))
binary("atan2", float_fn=True, meta=_div_meta, dtypes=FLOATS, ref=np.arctan2, accepts=REAL_KINDS,
       methods=("atan2", "arctan2"), names=("atan2", "arctan2"))
binary("hypot", float_fn=True, meta=_div_meta, dtypes=FLOATS, accepts=REAL_KINDS)
binary("copysign", float_fn=True, meta=_div_meta, dtypes=FLOATS, accepts=REAL_KINDS)
binary("nextafter", dtypes=FLOATS, accepts="f")
binary("logaddexp", float_fn=True, meta=_div_meta, dtypes=FLOATS, accepts=REAL_KINDS)
binary("maximum", dtypes=REAL, accepts=REAL_KINDS,
       generic=with_bools_as_numbers(lambda xp, a, b: xp.maximum(a, b), True, 2))
binary("minimum", dtypes=REAL, accepts=REAL_KINDS,
       generic=with_bools_as_numbers(lambda xp, a, b: xp.minimum(a, b), True, 2))
binary("bitwise_and", dtypes=BOOL + INTS, accepts=INT_KINDS)
binary("bitwise_or", dtypes=BOOL + INTS, accepts=INT_KINDS)
binary("bitwise_xor", dtypes=BOOL + INTS, accepts=INT_KINDS)
binary("bitwise_left_shift", dtypes=INTS, domain="shift", ref=np.left_shift,
       accepts="iu")
binary("bitwise_right_shift", dtypes=INTS, domain="shift", ref=np.right_shift,
       accepts="iu")


def _is_bool_array(v) -> bool:
    return not isinstance(v, (bool, int, float, complex)) and dtype_of(v).kind == "b"


def _as_orderable(xp, v, other):
    """``v``, an operand of an order comparison, as a number if it is a bool: the Array
    API orders real numbers only; NumPy and JAX order bools too (False < True).  A bool
    array takes the dtype of a numeric array ``other`` (``int8`` beside a bool or a
    scalar); a bool scalar becomes an int."""
    if isinstance(v, bool):
        return int(v)
    if not _is_bool_array(v):
        return v
    if isinstance(other, (bool, int, float, complex)) or _is_bool_array(other):
        return xp.astype(v, xp.int8)
    return xp.astype(v, other.dtype)


def _order(xp_name):
    fn = attrgetter(xp_name)

    def generic(xp, a, b):
        return fn(xp)(_as_orderable(xp, a, b), _as_orderable(xp, b, a))

    return generic


def _compare(name, xp_name, names, generic=None, accepts=None):
    binary(name, xp_name=xp_name, meta=mf.compare, dtypes=REAL + BOOL, structured=False,
           names=names, methods=names, generic=generic, comparison=True, accepts=accepts)


_compare("eq", "equal", ("eq", "equal"))
_compare("ne", "not_equal", ("ne", "not_equal"))
_compare("lt", "less", ("lt", "less"), _order("less"),
         REAL_KINDS)
_compare("le", "less_equal", ("le", "less_equal"), _order("less_equal"),
         REAL_KINDS)
_compare("gt", "greater", ("gt", "greater"), _order("greater"),
         REAL_KINDS)
_compare("ge", "greater_equal", ("ge", "greater_equal"), _order("greater_equal"),
         REAL_KINDS)

def _as_bool(xp, a):
    """PyTorch's logical ops take any dtype (nonzero is True); the Array API's take bool.
    ``a != 0`` rather than ``astype``: the standard leaves a cast of complex to bool
    unspecified (array_api_strict refuses it)."""
    if isinstance(a, (bool, int, float, complex)):
        return bool(a)
    return a if a.dtype == xp.bool else xp.not_equal(a, 0)


def _logical(name):
    fn = attrgetter(name)

    def impl(xp, a, b):
        return fn(xp)(_as_bool(xp, a), _as_bool(xp, b))

    impl.__name__ = name
    info = OpInfo(ref=getattr(np, name), dtypes=ALL, samples=binary_samples(None))
    # NumPy's logical ufuncs take any dtype as PyTorch's do (nonzero is True, nan too)
    cpu = Ufunc(getattr(np, name))
    decl = defop(f"{name}.Tensor(Tensor self, Tensor other) -> Tensor", impl=impl,
                 cpu_impl=cpu, meta=mf.compare, tags=("pointwise",), info=info,
                 methods=(name,))
    # the impl makes both operands bool itself: no scalar promotion first
    defop(f"{name}.Scalar(Tensor self, Scalar other) -> Tensor", impl=impl, meta=mf.compare,
          cpu_impl=cpu, tags=("pointwise",), decl=decl, promote_scalars=False)
    defop(f"{name}.Scalar_Tensor(Scalar self, Tensor other) -> Tensor", impl=impl,
          cpu_impl=cpu, meta=mf.compare, tags=("pointwise",), decl=decl,
          promote_scalars=False)


for _name in ("logical_and", "logical_or", "logical_xor"):
    _logical(_name)

# ---------------------------------------------------------------------------------------
# Unary

def _abs(xp, a):
    # The Array API's abs takes numeric dtypes; NumPy and JAX take bool too (|b| is b).
    if _is_bool_array(a):
        return xp.asarray(a, copy=True)
    return xp.abs(a)


def _abs_meta(x, *args, **kwargs):
    return x.shape, mf.real_dtype(x.dtype)  # |z| is real


unary("abs", dtypes=NUMERIC + BOOL, methods=("abs", "absolute"), names=("abs", "absolute"),
      meta=_abs_meta,
      generic=_abs)
unary("neg", xp_name="negative", dtypes=NUMERIC, names=("neg", "negative"),
      methods=("neg", "negative"))
unary("positive", dtypes=NUMERIC, structured=False)
def _sign(xp, a):
    # The Array API's sign takes numeric dtypes; PyTorch's takes bool too (sign(b) is b).
    if _is_bool_array(a):
        return xp.asarray(a, copy=True)
    if _is_complex(a):
        return _complex_sign(xp, a)
    return xp.sign(a)


def _complex_sign(xp, z):
    """The Array API's sign, z / |z|, in real divisions by the larger part first: the
    backends' complex division by |z| overflows for a subnormal |z| (NumPy's sign(1e-40j)
    in complex64 was nan + inf j) and |z| itself for parts near the largest float.  0 at
    +-0 (a positive zero), nan + nan j where a part is infinite or nan (the standard's
    values: Note [Special values] in ops/special_values.py)."""
    re, im = xp.real(z), xp.imag(z)
    s = xp.maximum(xp.abs(re), xp.abs(im))
    zero = s == 0
    a, b = (p / xp.where(zero, xp.ones_like(s), s) for p in (re, im))  # within [-1, 1]
    m = xp.sqrt(a * a + b * b)  # >= 1 where s > 0
    m = xp.where(zero, xp.ones_like(m), m)
    unit = xp.asarray(1j, dtype=z.dtype)
    r = xp.astype(a / m, z.dtype) + xp.astype(b / m, z.dtype) * unit
    r = xp.where(zero, xp.zeros_like(z), r)
    finite = xp.logical_and(xp.isfinite(re), xp.isfinite(im))
    return xp.where(finite, r, xp.full_like(z, complex(math.nan, math.nan)))


unary("sign", dtypes=NUMERIC, generic=_sign)
def _square(xp, a):
    # PyTorch's square of a bool tensor is pow(x, 2): int64 (NumPy's gives int8)
    if _is_bool_array(a):
        a = xp.astype(a, xp.int64)
    return xp.square(a)


def _square_meta(x, *args, **kwargs):
    return x.shape, dt.int64 if x.dtype is dt.bool_ else x.dtype


unary("square", dtypes=NUMERIC, generic=_square, meta=_square_meta, cpu_kinds="iufc")
unary("ceil", dtypes=REAL, accepts=NUMBER_KINDS)
unary("floor", dtypes=REAL, accepts=NUMBER_KINDS)
unary("trunc", dtypes=REAL, accepts=NUMBER_KINDS)
unary("round", dtypes=NUMERIC, accepts="iufc", cpu_ufunc=np.rint, cpu_kinds="fc")
def _conj(xp, a):
    # The conjugate of a real number is itself, in its own dtype (NumPy's conjugate of a
    # bool is int8)
    return xp.conj(a) if _is_complex(a) else xp.asarray(a, copy=True)


unary("conj", dtypes=NUMERIC, structured=False, generic=_conj, cpu_kinds="iufc")
unary("bitwise_not", xp_name="bitwise_invert", dtypes=BOOL + INTS,
      names=("bitwise_not", "bitwise_invert"), methods=("bitwise_not", "bitwise_invert"),
      ref=np.invert, accepts=INT_KINDS)
defop("logical_not(Tensor self) -> Tensor",
      impl=lambda xp, a: xp.logical_not(_as_bool(xp, a)), meta=mf.compare_unary,
      cpu_impl=Ufunc(np.logical_not),
      tags=("pointwise",), methods=("logical_not",),
      info=OpInfo(ref=np.logical_not, dtypes=ALL, samples=unary_samples(None)))

_FLOAT_UNARY = {
    "exp": None, "expm1": None, "log": "positive", "log1p": "gt_minus_one",
    "log2": "positive", "log10": "positive", "sqrt": "nonnegative", "sin": None,
    "cos": None, "tan": None, "asin": "unit", "acos": "unit", "atan": None,
    "sinh": None, "cosh": None, "tanh": None, "asinh": None, "acosh": "ge_one",
    "atanh": "open_unit", "reciprocal": "nonzero", "rsqrt": "positive",
    "sigmoid": None,
}
_NP_NAMES = {"asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
             "acosh": "arccosh", "atanh": "arctanh"}


def _is_complex(a) -> bool:
    return not isinstance(a, (bool, int, float)) and dt.as_dtype(a.dtype).kind == "c"


def _rsqrt(xp, a):
    a = to_float(xp, a)
    return xp.divide(1, xp.sqrt(a))


def _sigmoid(xp, a):
    a = to_float(xp, a)
    return xp.divide(1, xp.add(1, xp.exp(xp.negative(a))))


def _np_sigmoid(xp, a):
    """sigmoid on NumPy without SciPy (Note [SciPy on NumPy] in ops/_scipy_special.py):
    ``1 / (1 + exp(-a))`` in one temporary."""
    if a.dtype.kind != "f":
        return _sigmoid(xp, a)
    t = np.negative(a)
    np.exp(t, t)
    one = np.ones((), t.dtype)
    np.add(t, one, t)
    return np.divide(one, t, t)


def _erf(xp, a):
    r = bfloat16_via_float32(xp, _special.erf, a)
    return _special.erf(xp, to_float(xp, a)) if r is None else r


def _erf_ref(a):
    return np.vectorize(math.erf, otypes=[np.float64])(a).astype(a.dtype)


_erf_impl = unary_kernel("erf", _erf)
defop("erf(Tensor self) -> Tensor", impl=_erf_impl, structured=True, meta=mf.unary_float,
      cpu_impl=_erf_impl,
      tags=("pointwise",), names=("erf",), methods=("erf",), accepts=REAL_KINDS,
      info=OpInfo(ref=_erf_ref, dtypes=FLOATS, samples=unary_samples(None)))


for _name, _domain in _FLOAT_UNARY.items():
    _np_name = _NP_NAMES.get(_name, _name)
    _names = (_name, _np_name) if _np_name != _name else (_name,)
    if _name == "rsqrt":
        defop("rsqrt(Tensor self) -> Tensor", impl=_rsqrt, structured=True,
              meta=mf.unary_float, tags=("pointwise",),
              info=OpInfo(ref=lambda a: 1 / np.sqrt(a), dtypes=FLOATS,
                          samples=unary_samples("positive")), methods=("rsqrt",))
        continue
    if _name == "sigmoid":
        defop("sigmoid(Tensor self) -> Tensor", impl=unary_kernel("expit", _sigmoid),
              structured=True, cpu_impl=unary_kernel("expit", _np_sigmoid),
              meta=mf.unary_float, tags=("pointwise",),
              info=OpInfo(ref=lambda a: 1 / (1 + np.exp(-a)), dtypes=FLOATS,
                          samples=unary_samples(None)), methods=("sigmoid",))
        continue
    unary(_name, float_fn=True, dtypes=FLOATING, domain=_domain, names=_names,
          methods=_names, ref=getattr(np, _np_name, None),
          complex_special=_name in ("expm1", "tanh"))


# Note [rsqrt and silu on NumPy]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Their generic impls go through array-api-compat's wrappers, and NumPy converts a Python
# scalar operand (the 1 of ``1 / sqrt(a)``) on every call.  Their CPU kernels
# (``register_direct``) compute the same operations in the same order on float arrays, in
# one temporary, against a 0-d array of the dtype's one: 2 ufunc calls for ``rsqrt``, 4
# for ``silu`` (ops/nn.py), 0.6-1.2 us less on a small tensor.  0-d tensors (whose ufunc
# results are NumPy scalars) and the other dtypes take the generic kernel.

#: the 0-d ones of the float dtypes (by dtype character), read-only
FLOAT_ONES = {c: np.ones((), c) for c in "efd"}
for _v in FLOAT_ONES.values():
    _v.flags.writeable = False


def _np_rsqrt(x):
    one = FLOAT_ONES.get(x.dtype.char)
    if one is None or not x.ndim:
        return None
    t = np.sqrt(x)
    return np.divide(one, t, t)


register_direct(CATALOGUE["aten::rsqrt"].functional[0], _np_rsqrt)


def _bool_unary(name, of_integers):
    """isfinite/isinf/isnan/signbit: ``of_integers(xp, a)`` for bool and integer tensors,
    which the Array API leaves out (isfinite of an integer is True, signbit ``a < 0``)."""
    fn = attrgetter(name)

    def generic(xp, a):
        return of_integers(xp, a) if _int_like(a) else fn(xp)(a)

    real_only = name == "signbit"  # the Array API's signbit takes real numbers only
    unary(name, meta=mf.compare_unary, dtypes=REAL if real_only else NUMERIC,
          structured=False, generic=generic, cpu_kinds="fc",
          accepts=REAL_KINDS if real_only else None)


_bool_unary("isfinite", lambda xp, a: xp.ones(a.shape, dtype=xp.bool))
_bool_unary("isinf", lambda xp, a: xp.zeros(a.shape, dtype=xp.bool))
_bool_unary("isnan", lambda xp, a: xp.zeros(a.shape, dtype=xp.bool))
_bool_unary("signbit", lambda xp, a: xp.zeros(a.shape, dtype=xp.bool) if _is_bool_array(a)
            else a < 0)


def _real_meta(x, *args, **kwargs):
    return x.shape, mf.real_dtype(x.dtype)


def _xp_call(name):
    fn = attrgetter(name)

    def impl(xp, a):
        if name == "real" and not _is_complex(a):  # the Array API's real takes numbers only
            return xp.asarray(a, copy=True)
        return fn(xp)(a)

    impl.__name__ = name
    return impl


for _name in ("real", "imag"):
    # the Array API's imag takes complex numbers only (PyTorch's too); real takes any number
    defop(f"{_name}(Tensor self) -> Tensor", impl=_xp_call(_name),
          meta=_real_meta, tags=("pointwise",), accepts="c" if _name == "imag" else None,
          info=OpInfo(ref=getattr(np, _name), dtypes=COMPLEX, samples=unary_samples(None)),
          methods=())  # x.real and x.imag are properties (ops/_torch_methods.py)


def _clip(xp, a, min=None, max=None):
    r = bfloat16_via_float32(xp, _clip, a, min, max)
    if r is not None:
        return r
    if _int_like(a):  # an int bound takes the tensor's dtype, as a scalar operand does
        min, max = (with_array(xp, a, v)[1] if type(v) is int else v for v in (min, max))
    if isinstance(min, (int, float)) and isinstance(max, (int, float)) and min > max:
        # PyTorch: min(max(a, min), max) is max (array_api_strict refuses the bounds)
        return xp.clip(xp.clip(a, min, None), None, max)
    return xp.clip(a, min, max)


_clip = with_bools_as_numbers(_clip, True)  # Note [Arithmetic of bools] in ops/_bools.py


# Note [The CPU kernel of clamp]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``np.clip`` is a Python function over ``ndarray.clip`` (2.3 us on 256 elements) and
# array-api-compat's ``clip`` broadcasts its bounds first (13 us); NumPy's ``clip`` ufunc,
# which both end in, takes 0.3 us given bounds already in the tensor's dtype (0-d arrays:
# a Python float costs it the weak-scalar conversion).  The CPU kernel calls it for the
# common case -- a real floating tensor and int or float bounds -- and leaves the rest
# (integers and bools, whose bounds follow the generic impl's rules, tensor bounds) to the
# generic impl.  The ufunc is ``min(max(x, min), max)``, as PyTorch's clamp: a nan (input or
# bound) propagates and ``min > max`` gives ``max``.  It lives in NumPy's private
# ``_core.umath`` (NumPy >= 2); where that is missing, ``maximum`` then ``minimum`` written
# into the result compute the same in two passes.  The commonest call -- a floating tensor
# and two int or float bounds -- is one CPU kernel's frame over the ufunc
# (``_cpu_clamp``, registered above the kernel made from ``_clip_cpu``, which takes every
# other call): without the impl's frame under the generic kernel, ``md.clamp(x, 0.0,
# 1.0)`` of a 16x16 float32 tensor takes 18.3K instructions, against 21.9K.

_CLIP_UFUNC = getattr(getattr(getattr(np, "_core", None), "umath", None), "clip", None)
_asarray = np.asarray
_BOUND = (float, int)  # not bool: True beside a float tensor is 1.0, but type() says bool


def _float_bounds(a, min, max):
    """``(min, max)`` as 0-d arrays of ``a``'s dtype (None stays None), or None when the
    CPU kernel leaves the call to the generic impl (Note [The CPU kernel of clamp])."""
    dtype = a.dtype
    if dtype.kind != "f" or (min is None and max is None):
        return None
    lo = hi = None
    if min is not None:
        if type(min) not in _BOUND:
            return None
        lo = _asarray(min, dtype)
    if max is not None:
        if type(max) not in _BOUND:
            return None
        hi = _asarray(max, dtype)
    return lo, hi


def _clip_into(a, lo, hi, out=None):
    """``a`` clamped to the 0-d bounds ``lo``/``hi`` (either may be None), into ``out``."""
    if lo is None:
        return np.minimum(a, hi, out=out)
    if hi is None:
        return np.maximum(a, lo, out=out)
    if _CLIP_UFUNC is not None:
        return _CLIP_UFUNC(a, lo, hi, out=out)
    r = np.maximum(a, lo, out=out)
    return np.minimum(r, hi, out=r)


def _clip_cpu(xp, a, min=None, max=None):
    dtype = a.dtype
    if _CLIP_UFUNC is not None and dtype.kind == "f" and type(min) in _BOUND \
            and type(max) in _BOUND:  # the commonest call, in one frame
        return _CLIP_UFUNC(a, _asarray(min, dtype), _asarray(max, dtype))
    bounds = _float_bounds(a, min, max)
    if bounds is None:
        return _clip(xp, a, min, max)
    return _clip_into(a, *bounds)


def _clip_out(xp, out, a, min=None, max=None):
    """The in-place and out= impl of clamp on NumPy: the result written into ``out``."""
    if not isinstance(a, np.ndarray) or not isinstance(out, np.ndarray) \
            or out.dtype != a.dtype:
        return False
    bounds = _float_bounds(a, min, max)
    if bounds is None:
        return False
    _clip_into(a, *bounds, out=out)
    return True


_clamp = defop("clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor", impl=_clip,
      cpu_impl=_clip_cpu, inplace_impl=_clip_out,
      structured=True, meta=mf.same, tags=("pointwise",), names=("clamp", "clip"),
      methods=("clamp", "clip"), accepts=REAL_KINDS,
      info=OpInfo(ref=lambda a, min=None, max=None: np.clip(a, min, max), dtypes=FLOATS,
                  samples=unary_samples(None, kwargs=({"min": -0.5, "max": 0.5},))))


def _cpu_clamp(generic):
    """The CPU kernel of clamp's commonest call, in one frame (Note [The CPU kernel of
    clamp]); ``generic``: the kernel made from ``_clip_cpu``."""
    def kernel(a, min=None, max=None):
        x = a._data
        dtype = x.dtype
        if dtype.kind == "f" and type(min) in _BOUND and type(max) in _BOUND:
            return a._device.wrap(_CLIP_UFUNC(x, _asarray(min, dtype), _asarray(max, dtype)))
        return generic(a, min, max)
    return kernel


if _CLIP_UFUNC is not None:
    register_cpu(_clamp.functional[0], _cpu_clamp, DispatchKey.CPU)


def _clip_any(xp, a, min=None, max=None):
    # A mix of tensors and scalars (Array API clip): tensors arrive unwrapped by name.
    return xp.clip(a, getattr(min, "_data", min), getattr(max, "_data", max))


defop("clamp.Tensor(Tensor self, Tensor? min=None, Tensor? max=None) -> Tensor", impl=_clip,
      meta=mf.same, tags=("pointwise",), decl=_clamp)
defop("clamp.Mixed(Tensor self, Any? min=None, Any? max=None) -> Tensor", impl=_clip_any,
      meta=mf.same, tags=("pointwise",), decl=_clamp)
