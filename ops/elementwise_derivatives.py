"""Derivative rules of the elementwise ops (``ops/elementwise.py``): arithmetic, the
unary functions (exp, log, the trigonometric and hyperbolic functions, ...), the binary
functions (``atan2``, ``hypot``, ``logaddexp``, ``copysign``, the remainders) and the complex
parts (``conj``, ``real``, ``imag``).  A complex input's gradient follows PyTorch's conjugate
Wirtinger convention (``conj_factor``; Note [Derivatives of analytic functions] in
ops/_derivative_helpers.py)."""

from __future__ import annotations

import cmath
import math

from mdtensor.dispatch.namespaces import aten_calls as aten

from ._derivative_helpers import (
    DERIVATIVES,
    analytic,
    conj_factor,
    grad_for,
    is_complex,
    reads,
    real_floats,
    rule,
    sgn,
    uses_mask,
    uses_out,
)

__all__: list[str] = []


@rule("add")
@reads()
@uses_mask
def _add(needs, g, out, a, b, alpha=1):
    gb = None
    if needs[1]:
        gb = grad_for(g if alpha == 1 else aten.mul(g, alpha), b)
    return (grad_for(g, a) if needs[0] else None), gb, None


@rule("sub")
@reads()
@uses_mask
def _sub(needs, g, out, a, b, alpha=1):
    gb = None
    if needs[1]:
        gb = grad_for(aten.neg(g) if alpha == 1 else aten.mul(g, -alpha), b)
    return (grad_for(g, a) if needs[0] else None), gb, None


@rule("mul")
@reads({0: (1,), 1: (0,)})
@uses_mask
def _mul(needs, g, out, a, b):
    return (grad_for(aten.mul(g, conj_factor(b)), a) if needs[0] and hasattr(a, "_ks") else None,
            grad_for(aten.mul(g, conj_factor(a)), b) if needs[1] and hasattr(b, "_ks") else None)


@rule("div")
@reads({0: (1,), 1: (0, 1)})
@uses_mask
def _div(needs, g, out, a, b):
    ga = grad_for(aten.div(g, conj_factor(b)), a) if needs[0] and hasattr(a, "_ks") else None
    gb = None
    if needs[1] and hasattr(b, "_ks"):
        # PyTorch's -g * ((a / b) / b): b * b would underflow where b is tiny
        gb = grad_for(aten.neg(aten.mul(g, conj_factor(aten.div(aten.div(a, b), b)))), b)
    return ga, gb


@rule("neg")
@reads()
def _neg(g, out, a):
    return (aten.neg(g),)


@rule("positive", "clone", "contiguous")
@reads()
def _identity(g, out, a, *args, **kwargs):
    return (g,)


@rule("pow")
def _pow(g, out, a, b):
    # PyTorch's pow_backward: a zero exponent gives the base a zero gradient (not 0 * 0^-1),
    # and a zero base with a non-negative exponent gives the exponent a zero gradient (not
    # 0 * log 0)
    ga = gb = None
    if hasattr(a, "_ks"):
        if not hasattr(b, "_ks") and b == 0:
            ga = aten.zeros_like(a)
        else:
            d = aten.mul(g, conj_factor(aten.mul(aten.pow(a, aten.sub(b, 1) if hasattr(b, "_ks")
                                                  else b - 1), b)))
            if hasattr(b, "_ks"):
                d = aten.where(aten.eq(b, 0), 0.0, d)
            ga = grad_for(d, a)
    if hasattr(b, "_ks"):
        # PyTorch's condition: a real non-negative exponent (imag 0, real >= 0)
        real_nonneg = aten.logical_and(aten.eq(aten.imag(b), 0), aten.ge(aten.real(b), 0)) \
            if is_complex(b) else aten.ge(b, 0)
        if hasattr(a, "_ks"):
            d = aten.mul(g, conj_factor(aten.mul(aten.pow(a, b), aten.log(a))))
            d = aten.where(aten.logical_and(aten.eq(a, 0), real_nonneg), 0.0, d)
        elif a == 0:
            d = aten.where(real_nonneg, 0.0, aten.mul(aten.mul(g, aten.pow(a, b)), -math.inf))
        else:
            log_a = cmath.log(a) if isinstance(a, complex) else math.log(a)
            d = aten.mul(g, conj_factor(aten.mul(aten.pow(a, b), log_a)))
        gb = grad_for(d, b)
    return ga, gb


@rule("abs")
def _abs(g, out, a):
    return (aten.mul(g, sgn(a)),)


@rule("square")
@analytic
def _square(g, out, a):
    return (aten.mul(g, aten.mul(a, 2)),)


@rule("maximum", "minimum")
def _maxmin(g, out, a, b):
    # PyTorch's: the losing argument gets nothing, a tie splits the gradient evenly, and a
    # nan (which neither wins nor loses: the comparisons are false) gives both the whole
    # gradient.  The loser is the argument the output is not, where they differ.
    differ = aten.ne(a, b)
    share = aten.where(differ, g, aten.mul(g, 0.5))
    ga = gb = None
    if hasattr(a, "_ks"):
        ga = grad_for(aten.where(aten.logical_and(differ, aten.eq(out, b)), 0.0, share), a)
    if hasattr(b, "_ks"):
        gb = grad_for(aten.where(aten.logical_and(differ, aten.eq(out, a)), 0.0, share), b)
    return ga, gb


_maxmin.uses_out = True


@rule("clamp")
def _clamp(g, out, a, min=None, max=None):
    # PyTorch's clamp_backward: the gradient passes where min <= a <= max, 0 elsewhere (a
    # nan input gets none); one where, not a product with a mask (g * 0 is nan at g = inf)
    if min is None and max is None:
        return g, None, None
    if min is None:
        mask = aten.le(a, max)
    elif max is None:
        mask = aten.ge(a, min)
    else:
        mask = aten.logical_and(aten.ge(a, min), aten.le(a, max))
    return aten.where(mask, g, 0.0), None, None


@rule("exp")
@analytic
@uses_out
@reads()  # the output only
def _exp(g, out, a):
    return (aten.mul(g, out),)


@rule("expm1")
@analytic
@uses_out
@reads()  # the output only
def _expm1(g, out, a):
    return (aten.mul(g, aten.add(out, 1)),)


@rule("log")
@analytic
def _log(g, out, a):
    return (aten.div(g, a),)


@rule("log2")
@analytic
def _log2(g, out, a):
    return (aten.div(g, aten.mul(a, math.log(2.0))),)


@rule("log10")
@analytic
def _log10(g, out, a):
    return (aten.div(g, aten.mul(a, math.log(10.0))),)


@rule("log1p")
@analytic
def _log1p(g, out, a):
    return (aten.div(g, aten.add(a, 1)),)


@rule("sqrt")
@analytic
@uses_out
@reads()  # the output only
def _sqrt(g, out, a):
    return (aten.div(g, aten.mul(out, 2)),)


@rule("rsqrt")
@analytic
@uses_out
@reads()  # the output only
def _rsqrt(g, out, a):
    return (aten.mul(g, aten.mul(aten.pow(out, 3), -0.5)),)


@rule("reciprocal")
@analytic
@uses_out
@reads()  # the output only
def _reciprocal(g, out, a):
    return (aten.neg(aten.mul(g, aten.mul(out, out))),)


@rule("sin")
@analytic
def _sin(g, out, a):
    return (aten.mul(g, aten.cos(a)),)


@rule("cos")
@analytic
def _cos(g, out, a):
    return (aten.neg(aten.mul(g, aten.sin(a))),)


@rule("tan")
@analytic
@uses_out
@reads()  # the output only
def _tan(g, out, a):
    return (aten.mul(g, aten.add(aten.mul(out, out), 1)),)


@rule("asin")
@analytic
def _asin(g, out, a):
    return (aten.div(g, aten.sqrt(aten.sub(1, aten.mul(a, a)))),)


@rule("acos")
@analytic
def _acos(g, out, a):
    return (aten.neg(aten.div(g, aten.sqrt(aten.sub(1, aten.mul(a, a))))),)


@rule("atan")
@analytic
def _atan(g, out, a):
    return (aten.div(g, aten.add(aten.mul(a, a), 1)),)


@rule("sinh")
@analytic
def _sinh(g, out, a):
    return (aten.mul(g, aten.cosh(a)),)


@rule("cosh")
@analytic
def _cosh(g, out, a):
    return (aten.mul(g, aten.sinh(a)),)


@rule("tanh")
@analytic
@uses_out
@reads()  # the output only
def _tanh(g, out, a):
    if real_floats(out, g):
        return (aten.tanh_backward(g, out),)  # Note [Backward ops] in ops/nn.py
    return (aten.mul(g, aten.sub(1, aten.mul(out, out))),)


@rule("asinh")
@analytic
def _asinh(g, out, a):
    return (aten.div(g, aten.sqrt(aten.add(aten.mul(a, a), 1))),)


@rule("acosh")
@analytic
def _acosh(g, out, a):
    # PyTorch's: for complex a 1 / (sqrt(a - 1) sqrt(a + 1)), on the principal branch; for
    # real a rsqrt(a^2 - 1), which is also defined below -1 (1/sqrt(3) at -2, 0 at -inf)
    if not is_complex(a):
        return (aten.mul(g, aten.rsqrt(aten.sub(aten.mul(a, a), 1))),)
    return (aten.div(g, aten.mul(aten.sqrt(aten.sub(a, 1)), aten.sqrt(aten.add(a, 1)))),)


@rule("atanh")
@analytic
def _atanh(g, out, a):
    return (aten.div(g, aten.sub(1, aten.mul(a, a))),)


@rule("sigmoid")
@analytic
@uses_out
@reads()  # the output only
def _sigmoid(g, out, a):
    if real_floats(out, g):
        return (aten.sigmoid_backward(g, out),)
    return (aten.mul(g, aten.mul(out, aten.sub(1, out))),)


def _squared(v):
    """``v * v`` of a tensor or a Python scalar operand."""
    return aten.mul(v, v) if hasattr(v, "_ks") else v * v


@rule("atan2")
def _atan2(g, out, a, b):
    # PyTorch's atan2_backward: 1 / (a^2 + b^2) is taken as 0 where it is infinite (the
    # origin), so atan2(0, 0) has a zero gradient
    denom = aten.add(_squared(a), _squared(b))
    recip = aten.where(aten.eq(denom, 0), 0.0, aten.reciprocal(denom))
    return (grad_for(aten.mul(aten.mul(g, b), recip), a) if hasattr(a, "_ks") else None,
            grad_for(aten.mul(aten.mul(g, aten.neg(a) if hasattr(a, "_ks") else -a), recip), b)
            if hasattr(b, "_ks") else None)


@rule("hypot")
@uses_out
def _hypot(g, out, a, b):
    return (grad_for(aten.div(aten.mul(g, a), out), a) if hasattr(a, "_ks") else None,
            grad_for(aten.div(aten.mul(g, b), out), b) if hasattr(b, "_ks") else None)


@rule("logaddexp")
def _logaddexp(g, out, a, b):
    # PyTorch's: g / (1 + exp(b - a)) for a, not g exp(a - out), which is exp(inf - inf) =
    # nan where the other operand is finite and a is inf (the gradient is then g)
    return (grad_for(aten.div(g, aten.add(aten.exp(aten.sub(b, a)), 1)), a) if hasattr(a, "_ks")
            else None,
            grad_for(aten.div(g, aten.add(aten.exp(aten.sub(a, b)), 1)), b) if hasattr(b, "_ks")
            else None)


@rule("erf")
def _erf(g, out, a):
    return (aten.mul(g, aten.mul(aten.exp(aten.neg(aten.mul(a, a))), 2 / math.sqrt(math.pi))),)


@rule("conj")
@reads()
def _conj(g, out, a):
    return (aten.conj(g),)


@rule("copysign")
@uses_out
def _copysign(g, out, a, b):
    ga = None
    if hasattr(a, "_ks"):
        ga = grad_for(aten.mul(g, aten.mul(aten.sign(a), aten.sign(out))), a)
    return ga, (grad_for(aten.mul(g, 0.0), b) if hasattr(b, "_ks") else None)


def _mod_rule(rounding):
    def formula(g, out, a, b):
        gb = None
        if hasattr(b, "_ks"):
            q = rounding(aten.div(a, b))
            gb = grad_for(aten.neg(aten.mul(g, q)), b)
        return (grad_for(g, a) if hasattr(a, "_ks") else None), gb
    return formula


DERIVATIVES["remainder"] = _mod_rule(aten.floor)


DERIVATIVES["fmod"] = _mod_rule(aten.trunc)


@rule("real")
@reads()
def _real(g, out, x):
    return (aten.astype(g, x.dtype) if x.dtype.kind == "c" else g,)


@rule("imag")
@reads()
def _imag(g, out, x):
    # d imag(z) / dz in PyTorch's convention: the gradient is i * g.
    return (aten.mul(aten.astype(g, x.dtype), 1j),)
