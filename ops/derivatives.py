"""Derivative formulas of the catalogue's ops (the Autograd layer's rules table).

``DERIVATIVES[name]`` is ``formula(g, out, *args, **kwargs) -> tuple``: given the gradient
``g`` of the output (a tuple for several outputs), the output ``out`` (only for formulas
marked ``@uses_out``; else None) and the op's arguments, it returns one entry per
positional argument: the gradient of a Tensor argument (a list for ``Tensor[]``), or None.
Names are packet names (``"mul"``) or overload names (``"max.dim"``); an in-place op
(``mul_``) uses its functional op's formula with the value ``self`` had before.  Formulas
use md ops, so ``create_graph=True`` differentiates them again.

``NONDIFFERENTIABLE`` ops give outputs that never require grad (integer results, masks).
"""

from __future__ import annotations

import cmath
import importlib
import math

from mdtensor.ops._meta_fns import broadcast_shapes as _broadcast_shapes

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY as _AUTOGRAD
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.layers.autograd.formulas import reduce_to as _reduce_to
from mdtensor.layers.autograd.formulas import register_formulas, sum_to
from mdtensor.tensors.tensor import Tensor

_tls_get = dispatch_tls.get

__all__ = ["DERIVATIVES", "NONDIFFERENTIABLE", "reads", "sum_to", "uses_mask", "uses_out"]

DERIVATIVES: dict = {}
NONDIFFERENTIABLE = frozenset({
    "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
    "logical_not", "isfinite", "isinf", "isnan", "signbit", "argmax", "argmin", "argsort",
    "count_nonzero", "nonzero", "argwhere", "lift_fresh", "searchsorted", "all", "any",
    "unique_values",
    "unique_counts", "unique_inverse", "unique_all", "floor_divide", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "bitwise_left_shift", "bitwise_right_shift",
    "sign", "ceil", "floor", "trunc", "round", "detach", "zeros", "ones", "empty", "full",
    "arange", "linspace", "eye", "nextafter", "zeros_like", "ones_like", "empty_like",
    "full_like", "isin", "isclose", "allclose", "fft_fftfreq", "fft_rfftfreq", "linalg_matrix_rank",
})


def uses_out(fn):
    """Mark a formula that reads the op's output (so the Autograd kernel saves it)."""
    fn.uses_out = True
    return fn


def uses_mask(fn):
    """Mark a formula that takes first ``needs``: which of its Tensor arguments need a
    gradient (PyTorch's output mask), so it can skip the work for the others -- matmul's
    backward need not compute the gradient of a constant input.  ``needs`` is a tuple of
    bools with an entry per Tensor argument and a False after them (``needs[1]`` is False
    for ``add(x, 2)``), all True when the caller does not know."""
    fn.uses_mask = True
    return fn


def reads(*positions):
    """Mark a formula that reads the values of only the Tensor arguments at ``positions``
    (indices into the op's arguments) -- of the others only their shape and dtype -- so
    only those are saved and version-checked (Note [Saved inputs] in
    mdtensor/layers/autograd/kernels.py).  Unmarked formulas save every Tensor argument.

    ``reads({0: (1,), 1: (0,)})``: what the gradient of each argument reads (mul's
    gradient of ``self`` reads ``other``, and the other way round); an argument is then
    saved only when a gradient that needs it will be computed.
    """
    def mark(fn):
        if len(positions) == 1 and isinstance(positions[0], dict):
            fn.reads = {i: frozenset(v) for i, v in positions[0].items()}
        else:
            fn.reads = frozenset(positions)
        return fn
    return mark


def rule(*names):
    def register(fn):
        for n in names:
            DERIVATIVES[n] = fn
        return fn
    return register


def _shape(x):
    return tuple(x.shape) if hasattr(x, "shape") else ()


def _g(g, x):
    """``g`` reduced to the shape of argument ``x`` (None for non-tensor ``x``); a real
    ``x`` gets the real part of a complex gradient, as in PyTorch."""
    try:
        xd = x._data
    except AttributeError:  # not a Tensor
        return None
    gd = g._data
    if gd.dtype != xd.dtype and g.dtype.kind == "c" and x.dtype.kind != "c":
        g = aten.real(g)
        gd = g._data
    # sum_to(g, xd.shape) without its frame: the backends' shapes compare as they come
    # (tuples: Array API), and only a gradient to reduce has them made tuples
    gshape = gd.shape
    if gshape == xd.shape:
        return g
    return _reduce_to(g, tuple(gshape), tuple(xd.shape))


def _is_complex(x) -> bool:
    """Whether Tensor ``x`` is complex, read from the native dtype (no md dtype lookup on
    the real path) where it has a NumPy-style ``kind``."""
    kind = getattr(x._data.dtype, "kind", None)
    return (x.dtype.kind if kind is None else kind) == "c"


def _real_floats(a, b) -> bool:
    """Whether Tensors ``a`` and ``b`` are both real floating: the backward ops' condition
    (Note [Backward ops] in ops/nn.py), read from the native dtypes where they have a
    NumPy-style ``kind`` (two ``Tensor.dtype`` lookups cost twice as much)."""
    ka = getattr(a._data.dtype, "kind", None)
    kb = getattr(b._data.dtype, "kind", None)
    if ka is None or kb is None:
        return a.dtype.kind == "f" and b.dtype.kind == "f"
    return ka == "f" and kb == "f"


def _cj(v):
    """The complex conjugate of a multiplier (PyTorch's convention: a gradient is the
    conjugate Wirtinger derivative, so products use the conjugate of the other factor)."""
    if hasattr(v, "_ks"):
        return aten.conj(v) if _is_complex(v) else v
    return v.conjugate() if isinstance(v, complex) else v


def _as(gx, x):
    """``gx`` for argument ``x``: its real part when ``x`` is real and ``gx`` complex (a
    product of a real and a complex operand), else ``gx`` itself."""
    if gx is not None and gx._data.dtype != x._data.dtype and _is_complex(gx) \
            and not _is_complex(x):
        return aten.real(gx)
    return gx


# Note [Derivatives of analytic functions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# For a complex input, PyTorch's gradient of an analytic function f is g * conj(f'(z))
# (the conjugate Wirtinger convention, as ``_cj`` gives products of complex factors).  The
# formulas below are written g * f'(z); f has real Taylor coefficients (exp, sin, log, ...
# commute with conjugation), so evaluating a formula at conj(z) -- and conj(out) -- gives
# g * f'(conj z) = g * conj(f'(z)).  ``analytic`` wraps a formula that way; real inputs
# take the formula as it is, for one dtype check.


def analytic(fn):
    """Mark a unary formula ``g * f'(z)`` of an analytic ``f`` (Note [Derivatives of
    analytic functions]); put it above ``uses_out``/``reads``."""
    reads_input = getattr(fn, "reads", None) != frozenset()

    def formula(g, out, a):
        if _is_complex(out if out is not None else a):
            return fn(g, None if out is None else aten.conj(out),
                      aten.conj(a) if reads_input else a)
        return fn(g, out, a)

    for attr in ("uses_out", "reads", "uses_mask"):
        if hasattr(fn, attr):
            setattr(formula, attr, getattr(fn, attr))
    formula.__name__ = fn.__name__
    return formula


# -- arithmetic -------------------------------------------------------------------------


@rule("add")
@reads()
@uses_mask
def _add(needs, g, out, a, b, alpha=1):
    gb = None
    if needs[1]:
        gb = _g(g if alpha == 1 else aten.mul(g, alpha), b)
    return (_g(g, a) if needs[0] else None), gb, None


@rule("sub")
@reads()
@uses_mask
def _sub(needs, g, out, a, b, alpha=1):
    gb = None
    if needs[1]:
        gb = _g(aten.neg(g) if alpha == 1 else aten.mul(g, -alpha), b)
    return (_g(g, a) if needs[0] else None), gb, None


@rule("mul")
@reads({0: (1,), 1: (0,)})
@uses_mask
def _mul(needs, g, out, a, b):
    return (_g(aten.mul(g, _cj(b)), a) if needs[0] and hasattr(a, "_ks") else None,
            _g(aten.mul(g, _cj(a)), b) if needs[1] and hasattr(b, "_ks") else None)


@rule("div")
@reads({0: (1,), 1: (0, 1)})
@uses_mask
def _div(needs, g, out, a, b):
    ga = _g(aten.div(g, _cj(b)), a) if needs[0] and hasattr(a, "_ks") else None
    gb = None
    if needs[1] and hasattr(b, "_ks"):
        # PyTorch's -g * ((a / b) / b): b * b would underflow where b is tiny
        gb = _g(aten.neg(aten.mul(g, _cj(aten.div(aten.div(a, b), b)))), b)
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
            d = aten.mul(g, _cj(aten.mul(aten.pow(a, aten.sub(b, 1) if hasattr(b, "_ks")
                                                  else b - 1), b)))
            if hasattr(b, "_ks"):
                d = aten.where(aten.eq(b, 0), 0.0, d)
            ga = _g(d, a)
    if hasattr(b, "_ks"):
        # PyTorch's condition: a real non-negative exponent (imag 0, real >= 0)
        real_nonneg = aten.logical_and(aten.eq(aten.imag(b), 0), aten.ge(aten.real(b), 0)) \
            if _is_complex(b) else aten.ge(b, 0)
        if hasattr(a, "_ks"):
            d = aten.mul(g, _cj(aten.mul(aten.pow(a, b), aten.log(a))))
            d = aten.where(aten.logical_and(aten.eq(a, 0), real_nonneg), 0.0, d)
        elif a == 0:
            d = aten.where(real_nonneg, 0.0, aten.mul(aten.mul(g, aten.pow(a, b)), -math.inf))
        else:
            d = aten.mul(g, _cj(aten.mul(aten.pow(a, b), cmath.log(a) if isinstance(a, complex)
                                         else math.log(a))))
        gb = _g(d, b)
    return ga, gb


def _sgn(a):
    """PyTorch's sgn, the derivative of abs: sign(a), and 0 at a real nan (a nan input gets
    no gradient from abs, not nan)."""
    s = aten.sign(a)
    return s if _is_complex(a) else aten.where(aten.isnan(a), 0.0, s)


@rule("abs")
def _abs(g, out, a):
    return (aten.mul(g, _sgn(a)),)


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
        ga = _g(aten.where(aten.logical_and(differ, aten.eq(out, b)), 0.0, share), a)
    if hasattr(b, "_ks"):
        gb = _g(aten.where(aten.logical_and(differ, aten.eq(out, a)), 0.0, share), b)
    return ga, gb


_maxmin.uses_out = True


@rule("clamp")
def _clamp(g, out, a, min=None, max=None):
    mask = aten.ones(a.shape, dtype=g.dtype, device=g.device)
    if min is not None:
        mask = aten.mul(mask, aten.astype(aten.ge(a, min), g.dtype))
    if max is not None:
        mask = aten.mul(mask, aten.astype(aten.le(a, max), g.dtype))
    return aten.mul(g, mask), None, None


# -- unary functions ----------------------------------------------------------------------


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
    if _real_floats(out, g):
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
    if not _is_complex(a):
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
    if _real_floats(out, g):
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
    return (_g(aten.mul(aten.mul(g, b), recip), a) if hasattr(a, "_ks") else None,
            _g(aten.mul(aten.mul(g, aten.neg(a) if hasattr(a, "_ks") else -a), recip), b)
            if hasattr(b, "_ks") else None)


@rule("hypot")
@uses_out
def _hypot(g, out, a, b):
    return (_g(aten.div(aten.mul(g, a), out), a) if hasattr(a, "_ks") else None,
            _g(aten.div(aten.mul(g, b), out), b) if hasattr(b, "_ks") else None)


@rule("logaddexp")
def _logaddexp(g, out, a, b):
    # PyTorch's: g / (1 + exp(b - a)) for a, not g exp(a - out), which is exp(inf - inf) =
    # nan where the other operand is finite and a is inf (the gradient is then g)
    return (_g(aten.div(g, aten.add(aten.exp(aten.sub(b, a)), 1)), a) if hasattr(a, "_ks")
            else None,
            _g(aten.div(g, aten.add(aten.exp(aten.sub(a, b)), 1)), b) if hasattr(b, "_ks")
            else None)


@rule("relu")
@uses_out
@reads()  # the output only
def _relu(g, out, a):
    # PyTorch's threshold_backward: zero where out <= 0, so a nan passes the gradient
    return (aten.where(aten.le(out, 0), 0.0, g),)


@rule("silu")
@analytic
def _silu(g, out, a):
    s = aten.sigmoid(a)
    return (aten.mul(g, aten.mul(s, aten.add(aten.mul(a, aten.sub(1, s)), 1))),)


@rule("gelu")
def _gelu(g, out, a, approximate="none"):
    if approximate == "tanh":
        c = math.sqrt(2.0 / math.pi)
        inner = aten.mul(aten.add(a, aten.mul(aten.pow(a, 3), 0.044715)), c)
        t = aten.tanh(inner)
        dinner = aten.mul(aten.add(aten.mul(aten.mul(a, a), 3 * 0.044715), 1), c)
        d = aten.add(aten.mul(aten.add(t, 1), 0.5),
                     aten.mul(aten.mul(aten.mul(a, 0.5), aten.sub(1, aten.mul(t, t))), dinner))
        return (aten.mul(g, d),)
    cdf = aten.mul(aten.add(aten.erf(aten.mul(a, _SQRT1_2)), 1), 0.5)
    pdf = aten.mul(aten.exp(aten.mul(aten.mul(a, a), -0.5)), 1 / math.sqrt(2 * math.pi))
    return (aten.mul(g, aten.add(cdf, aten.mul(a, pdf))),)


_SQRT1_2 = 1 / math.sqrt(2.0)


@rule("erf")
def _erf(g, out, a):
    return (aten.mul(g, aten.mul(aten.exp(aten.neg(aten.mul(a, a))), 2 / math.sqrt(math.pi))),)


@rule("softmax")
@uses_out
@reads()  # the output only
def _softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    if _real_floats(out, g):
        return aten._softmax_backward_data(g, out, dim), None
    s = aten.sum(aten.mul(g, out), dim, True)
    return aten.mul(out, aten.sub(g, s)), None


@rule("log_softmax")
@uses_out
@reads()  # the output only
def _log_softmax(g, out, a, dim=-1):
    if a.ndim == 0:
        return (aten.mul(g, 0.0), None)
    if _real_floats(out, g):
        return aten._log_softmax_backward_data(g, out, dim), None
    return aten.sub(g, aten.mul(aten.exp(out), aten.sum(g, dim, True))), None


# Derivatives of the backward ops (Note [Backward ops] in ops/nn.py), for double backward.


@rule("tanh_backward")
def _tanh_backward(c, out, g, y):
    # f = g * (1 - y^2)
    return aten.tanh_backward(c, y), aten.mul(aten.mul(c, g), aten.mul(y, -2.0))


@rule("sigmoid_backward")
def _sigmoid_backward(c, out, g, y):
    # f = g * y * (1 - y)
    return aten.sigmoid_backward(c, y), aten.mul(aten.mul(c, g), aten.sub(1, aten.mul(y, 2.0)))


@rule("_softmax_backward_data")
def _softmax_backward_data(c, out, g, y, dim):
    # f = y * g - y * S(g * y), S summing over dim (kept)
    gy = aten.sum(aten.mul(g, y), dim, True)
    cy = aten.sum(aten.mul(c, y), dim, True)
    grad_y = aten.sub(aten.mul(c, aten.sub(g, gy)), aten.mul(g, cy))
    return aten._softmax_backward_data(c, y, dim), grad_y, None


@rule("_log_softmax_backward_data")
def _log_softmax_backward_data(c, out, g, y, dim):
    # f = g - exp(y) * S(g)
    e = aten.exp(y)
    grad_g = aten.sub(c, aten.sum(aten.mul(e, c), dim, True))
    grad_y = aten.neg(aten.mul(aten.mul(c, e), aten.sum(g, dim, True)))
    return grad_g, grad_y, None


# -- reductions ---------------------------------------------------------------------------


def _expand_back(g, x, axis, keepdims):
    """Broadcast a reduced gradient back to ``x``'s shape."""
    shape = tuple(x._data.shape)
    ndim = len(shape)
    if not ndim:
        return g
    # expand adds leading dimensions itself: reshape only when a reduced axis is not one of
    # the leading ones (sum(x) and a bias's sum(g, 0) need no reshape).
    if axis is not None and not keepdims:
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = sorted(a % ndim for a in axes)
        if axes != list(range(len(axes))):
            g = aten.reshape(g, tuple(1 if i in axes else s for i, s in enumerate(shape)))
    return aten.expand(g, shape)


@rule("sum")
@reads()
def _sum(g, out, x, axis=None, keepdims=False, *, dtype=None):
    gx = _expand_back(g, x, axis, keepdims)
    # sum(x, dtype=...): the gradient goes back to x's dtype (native dtypes compared: the
    # same dtype is one object, and a needless astype would only cost a copy)
    if g._data.dtype is not x._data.dtype:
        gx = aten.astype(gx, x.dtype)
    return gx, None, None


def _count(x, axis):
    if axis is None or not x.ndim:  # a 0-d tensor's axis 0 is its element
        return max(x.numel(), 1) if x.numel() else 1
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    n = 1
    for a in axes:
        n *= x.shape[a]
    return n


@rule("mean")
@reads()
def _mean(g, out, x, axis=None, keepdims=False):
    return aten.div(_expand_back(g, x, axis, keepdims), _count(x, axis)), None, None


@rule("prod")
def _prod(g, out, x, axis=None, keepdims=False, *, dtype=None):
    # Note [Products of the others]: no division by x, so zeros get their gradient
    gx = aten.mul(_expand_back(g, x, axis, keepdims), _cj(_prod_of_others(x, axis)))
    if gx.dtype != x.dtype:  # prod(x, dtype=...): back to x's dtype
        gx = aten.astype(gx, x.dtype)
    return gx, None, None


# Note [Products of the others]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of a product with respect to one factor is the product of the others.
# ``out / x`` gives it only where x is not 0 (PyTorch's prod_backward divides only when no
# factor is 0); here it is always the product of the exclusive prefix and suffix
# products along the reduced elements (``cumulative_prod`` with ``include_initial``), with
# no division: ``[2, 0, 3]`` gets ``[0, 6, 0]``.  Several reduced axes are moved last and
# flattened into one.  The determinant's gradient uses it on singular values.


def _prod_of_others(x, axis=None):
    """For each element of ``x``, the product of the other elements of its slice along
    ``axis`` (all axes when None), shaped like ``x`` (Note [Products of the others])."""
    nd = x.ndim
    if not nd:
        return aten.ones_like(x)
    axes = _normalized_axes(axis, nd)
    if not axes:
        return aten.ones_like(x)
    keep = [i for i in range(nd) if i not in axes]
    order = keep + list(axes)
    y = aten.permute(x, order) if order != list(range(nd)) else x
    moved = tuple(y.shape)
    n = 1
    for a in axes:
        n *= x.shape[a]
    y = aten.reshape(y, moved[:len(keep)] + (n,))
    left = aten.narrow(aten.cumulative_prod(y, -1, include_initial=True), -1, 0, n)
    rev = aten.flip(y, (-1,))
    right = aten.flip(aten.narrow(aten.cumulative_prod(rev, -1, include_initial=True),
                                  -1, 0, n), (-1,))
    r = aten.reshape(aten.mul(left, right), moved)
    if order != list(range(nd)):
        r = aten.permute(r, _inverse_perm(order))
    return r


def _normalized_axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted({a % nd for a in axes}))


@rule("var")
def _var(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    n = _count(x, axis)
    mean = aten.mean(x, axis, True)
    # PyTorch's 2 / (n - correction): inf (a nan gradient) without degrees of freedom
    scale = 2.0 / (n - correction) if n != correction else math.inf
    return (aten.mul(aten.mul(_expand_back(g, x, axis, keepdims), aten.sub(x, mean)), scale),
            None, None)


@rule("std")
@uses_out
def _std(g, out, x, axis=None, keepdims=False, *, correction=0.0):
    # As PyTorch, a zero standard deviation (a constant input) gives a zero gradient, the
    # subgradient, rather than 0/0
    gvar = aten.where(aten.eq(out, 0), 0.0, aten.div(g, aten.mul(out, 2)))
    return _var(gvar, None, x, axis, keepdims, correction=correction)


def _select_extreme(g, out, x, axis, keepdims):
    """Gradient of max/min/amax/amin: split evenly among the tied extreme elements."""
    full = _expand_back(out, x, axis, keepdims)
    mask = aten.astype(aten.eq(x, full), g.dtype)
    count = _expand_back(aten.sum(mask, axis, keepdims), x, axis, keepdims)
    return aten.div(aten.mul(_expand_back(g, x, axis, keepdims), mask), count)


@rule("max", "min", "amax", "amin")
@uses_out
def _max(g, out, x, axis=None, keepdims=False):
    return _select_extreme(g, out, x, axis, keepdims), None, None


@rule("max.dim", "min.dim")
@uses_out
def _max_dim(g, out, x, dim, keepdim=False):
    # PyTorch's value_selecting_reduction_backward: the gradient goes to the index max.dim
    # returned, not split among ties as for max(x) and amax
    if not x.ndim:
        return g[0], None, None
    d = dim % x.ndim
    idx, gv = out[1], g[0]
    if not keepdim:
        idx, gv = aten.unsqueeze(idx, d), aten.unsqueeze(gv, d)
    pos = aten.arange(x.shape[d], device=x.device)
    pos = aten.reshape(pos, (x.shape[d],) + (1,) * (x.ndim - d - 1))
    return aten.where(aten.eq(pos, idx), gv, 0.0), None, None


@rule("logsumexp")
@uses_out
def _logsumexp(g, out, x, axis=None, keepdims=False):
    return (aten.mul(_expand_back(g, x, axis, keepdims),
                     aten.exp(aten.sub(x, _expand_back(out, x, axis, keepdims)))), None, None)


@rule("cumulative_sum")
def _cumsum(g, out, x, axis=None, *, dtype=None, include_initial=False):
    a = 0 if axis is None else axis
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
    rev = aten.flip(aten.cumulative_sum(aten.flip(g, a), a), a)
    return rev, None


# -- linear algebra ----------------------------------------------------------------------


@rule("matmul")
@reads({0: (1,), 1: (0,)})
@uses_mask
def _matmul(needs, g, out, a, b):
    # Note [matmul_backward] in ops/linalg.py: one op when backward records nothing
    if _tls_get()[1] & _AUTOGRAD:  # create_graph: composed of differentiable ops
        return matmul_gradients(needs, g, a, b)
    return aten.matmul_backward(g, a, b, needs[:2])


def matmul_gradients(needs, g, a, b):
    """matmul's two gradients from dispatched ops (each differentiable; a batched ``g``
    under vmap goes through the batching rules: ops/batching.py)."""
    # Complex operands: ga = g @ b^H, gb = a^H @ g (PyTorch's convention); a real operand
    # is used as it is (no conj) and a real input of a mixed product gets the real part.
    need_a, need_b = needs[0], needs[1]
    ad, bd = a._data, b._data
    if ad.ndim == 2 and bd.ndim == 2 and getattr(ad.dtype, "kind", "c") == "f" and \
            getattr(bd.dtype, "kind", "c") == "f":
        # Real matrices (a layer's weights): no broadcast dimension to sum, no conjugate,
        # no real part to take -- the two products alone.
        return (aten.matmul(g, aten.matrix_transpose(b)) if need_a else None,
                aten.matmul(aten.matrix_transpose(a), g) if need_b else None)
    a_vec = ad.ndim == 1
    b_vec = bd.ndim == 1
    if a_vec and b_vec:
        return (_as(aten.mul(g, _cj(b)), a) if need_a else None,
                _as(aten.mul(g, _cj(a)), b) if need_b else None)
    a2 = aten.unsqueeze(a, 0) if a_vec else a
    b2 = aten.unsqueeze(b, -1) if b_vec else b
    g2 = g
    if a_vec:
        g2 = aten.unsqueeze(g2, -2)
    if b_vec:
        g2 = aten.unsqueeze(g2, -1)
    ga = gb = None
    if need_a:
        ga = aten.matmul(g2, _mH(b2))
        if a_vec:
            ga = aten.squeeze(ga, -2)
        ga = _as(sum_to(ga, a._data.shape), a)
    if need_b:
        gb = aten.matmul(_mH(a2), g2)
        if b_vec:
            gb = aten.squeeze(gb, -1)
        gb = _as(sum_to(gb, b._data.shape), b)
    return ga, gb


@rule("matmul_backward")
def _matmul_backward(c, out, g, a, b, mask):
    # Note [matmul_backward]: each product is linear in each of its factors, so the
    # gradient with respect to one factor is the vector-Jacobian product of the composite
    # formula at a zero leaf put in its place, the other factors kept as they are (with
    # their history, so that create_graph differentiates further).  Rarely run: matmul's
    # own formula composes ops whenever backward records.
    from mdtensor.autograd import enable_grad, grad

    create_graph = bool(_tls_get()[1] & _AUTOGRAD)

    def vjp(i):
        args = [g, a, b]
        leaf = aten.zeros_like(args[i])
        leaf.requires_grad_(True)
        args[i] = leaf
        with enable_grad():
            outs = matmul_gradients(mask, *args)
        pairs = [(o, t) for o, t in zip(outs, c)  # c: the two outputs' gradients
                 if o is not None and t is not None and o.requires_grad]
        if not pairs:
            return None
        (gx,) = grad([o for o, _ in pairs], [leaf], [t for _, t in pairs],
                     create_graph=create_graph, allow_unused=True)
        return gx

    return vjp(0), vjp(1), vjp(2), None


# -- shape and view ops -------------------------------------------------------------------


@rule("transpose")
@reads()
def _transpose(g, out, x, d0, d1):
    return aten.transpose(g, d0, d1), None, None


@rule("permute")
@reads()
def _permute(g, out, x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return aten.permute(g, tuple(inv)), None


@rule("matrix_transpose")
@reads()
def _mt(g, out, x):
    return (aten.matrix_transpose(g),)


@rule("t")
@reads()
def _t(g, out, x):
    return (aten.t(g),)


@rule("view", "reshape", "flatten", "squeeze", "unsqueeze")
@reads()
def _reshape(g, out, x, *args, **kwargs):
    return (aten.reshape(g, tuple(x.shape)),) + (None,) * len(args)


@rule("expand", "broadcast_to")
@reads()
def _expand(g, out, x, shape):
    return sum_to(g, x.shape), None


@rule("moveaxis")
@reads()
def _moveaxis(g, out, x, source, destination):
    return aten.moveaxis(g, destination, source), None, None


@rule("flip")
@reads()
def _flip(g, out, x, axis=None):
    return aten.flip(g, axis), None


@rule("roll")
@reads()
def _roll(g, out, x, shift, axis=None):
    neg = -shift if isinstance(shift, int) else tuple(-s for s in shift)
    return aten.roll(g, neg, axis), None, None


# Note [Writing a gradient into zeros]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The backward of a selection (``x[key]``, ``narrow``) writes ``g`` into zeros of ``x``'s
# shape: in place into fresh zeros for a plain ``g`` (no copy), with the functional
# ``index_put`` for a wrapper subclass -- a batched cotangent under ``vmap`` cannot be
# written into unbatched zeros in place (mdtensor/layers/vmap.py), the functional op batches
# the zeros instead.
def _into_zeros(shape, key, g):
    z = aten.zeros(shape, dtype=g.dtype, device=g.device)
    if type(g) is not Tensor:
        return aten.index_put(z, key, g)
    aten.index_put_(z, key, g)
    return z


def _scatter_into_zeros(x, key, g, basic):
    if basic:
        return _into_zeros(tuple(x.shape), key, g)
    # Repeated indices accumulate (np.add.at semantics), as PyTorch's index backward.
    return _scatter_add(tuple(x.shape), key, g)


# Note [Gather backward]
# ~~~~~~~~~~~~~~~~~~~~~~
# The gradient of a gather (``x[index]``, ``take``, ``index_select``, ``take_along_axis``,
# ``repeat_interleave``) adds ``g`` at the gathered positions into zeros, repeated indices
# accumulating -- ``np.add.at``, which no Array API function does, so ``_index_add`` runs
# it on raw (host) arrays and records nothing.  That was invisible to a Hessian through
# the gather's *input* (the scatter is constant in ``x``) but lost every derivative
# through ``g``: ``jvp`` by double vjp and Hessians whose first gradient flows through a
# gather (``sin(x[idx])``) came out zero there.  Under ``create_graph`` the scatter is
# therefore a step of its own, ``ScatterAdd``, linear in ``g``: its backward is the gather
# ``gg[key]`` again, a recorded op, so the chain differentiates to any order (PyTorch's
# ``index_put(..., accumulate=True)`` has that derivative).


def _scatter_add(shape, key, g):
    """``zeros(shape)`` with ``g`` added at ``key``, repeated indices accumulating;
    differentiable in ``g`` under ``create_graph`` (Note [Gather backward])."""
    if type(g) is not Tensor:  # differentiable as it is (recorded ops)
        return _index_add_dispatched(aten.zeros(shape, dtype=g.dtype, device=g.device),
                                     key, g)
    if g.requires_grad and _tls_get()[1] & _AUTOGRAD:
        return _scatter_add_function().apply(g, shape, key)
    return _index_add(aten.zeros(shape, dtype=g.dtype, device=g.device), key, g)


_ScatterAdd = None


def _scatter_add_function():
    global _ScatterAdd
    if _ScatterAdd is None:
        from mdtensor.autograd import Function

        class ScatterAdd(Function):
            @staticmethod
            def forward(ctx, g, shape, key):
                ctx.key = key
                return _index_add(aten.zeros(shape, dtype=g.dtype, device=g.device), key, g)

            @staticmethod
            def backward(ctx, gg):
                return gg[ctx.key], None, None

        _ScatterAdd = ScatterAdd
    return _ScatterAdd


def _index_add_dispatched(z, key, g):
    """``_index_add`` by dispatched ops, for a ``g`` whose array a kernel may not read
    (a batched cotangent: Note [Writing a gradient into zeros]): the values sorted by the
    flat position they go to, summed per position as differences of a running sum."""
    n = z.numel()
    flat = aten.reshape(aten.arange(n, device=z.device).reshape(tuple(z.shape))[key], (-1,))
    order = aten.argsort(flat, stable=True)
    vals = aten.reshape(g, (-1,))[order]
    running = aten.cumulative_sum(vals, include_initial=True)
    bounds = aten.searchsorted(flat[order], aten.arange(n + 1, device=z.device))
    return z + aten.reshape(running[bounds[1:]] - running[bounds[:-1]], tuple(z.shape))


def _index_add(z, key, g):
    """``z`` with ``g`` scatter-added at ``key`` (a new tensor off the CPU backend)."""
    import numpy as np
    from mdtensor.ops.indexing import _raw

    if type(g) is not Tensor:  # a wrapper (a batched cotangent): dispatched ops only
        return _index_add_dispatched(z, key, g)
    raw = _raw(key)
    if z.device.type == "cpu":
        np.add.at(z._data, raw, g._data)
        return z
    # The Array API has no scatter-add, and index + index_put_ would lose repeated indices
    # (the last write wins), so other backends accumulate on the host.
    b = z.device.backend
    parts = raw if isinstance(raw, tuple) else (raw,)
    host_key = tuple(b.to_numpy(k) if isinstance(k, b.array_type) else k for k in parts)
    acc = np.array(b.to_numpy(z._data), copy=True)
    np.add.at(acc, host_key, b.to_numpy(g._data))
    return z._device.wrap(b.asarray(acc, index=z._device.index))


@rule("basic_index")
@reads()
def _basic_index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, True), None


@rule("index")
def _index(g, out, x, key):
    return _scatter_into_zeros(x, key, g, False), None


@rule("narrow")
@reads()
def _narrow(g, out, x, dim, start, length):
    d = dim % x.ndim
    start = start % x.shape[d] if start < 0 else start
    key = (slice(None),) * d + (slice(start, start + length),)
    return _into_zeros(tuple(x.shape), key, g), None, None, None


@rule("cat")
@reads()
def _cat(g, out, tensors, axis=0):
    if axis is None:
        grads, start = [], 0
        for t in tensors:
            n = t.numel()
            grads.append(_in_dtype_of(aten.reshape(aten.narrow(g, 0, start, n),
                                                   tuple(t.shape)), t))
            start += n
        return grads, None
    grads, start = [], 0
    a = axis % tensors[0].ndim
    for t in tensors:
        n = t.shape[a]
        grads.append(_in_dtype_of(aten.narrow(g, a, start, n), t))
        start += n
    return grads, None


def _in_dtype_of(gx, x):
    """The gradient of ``x``, an input promoted with others (cat, stack): the real part of
    a complex gradient for a real ``x``, in ``x``'s dtype (PyTorch's behaviour)."""
    gx = _as(gx, x)
    return gx if gx._data.dtype == x._data.dtype else aten.astype(gx, x.dtype)


@rule("stack")
@reads()
def _stack(g, out, tensors, axis=0):
    return [_in_dtype_of(gi, t) for gi, t in
            zip(aten.unbind(g, axis % (tensors[0].ndim + 1)), tensors)], None


def _list_grads(g, out, x, *rest, axis=0):
    grads = [gi if gi is not None else aten.mul(o, 0.0) for gi, o in zip(g, out)]
    return aten.cat(grads, axis)


@rule("split")
@uses_out
def _split(g, out, x, sizes, axis=0):
    return _list_grads(g, out, x, axis=axis), None, None


@rule("chunk")
@uses_out
def _chunk(g, out, x, chunks, axis=0):
    return _list_grads(g, out, x, axis=axis), None, None


@rule("unbind")
@uses_out
def _unbind(g, out, x, axis=0):
    grads = [gi if gi is not None else aten.mul(o, 0.0) for gi, o in zip(g, out)]
    return aten.stack(grads, axis), None


@rule("where")
@reads(0)
def _where(g, out, cond, a, b):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    return (None,
            _g(aten.where(cond, g, zero), a) if hasattr(a, "_ks") else None,
            _g(aten.where(cond, zero, g), b) if hasattr(b, "_ks") else None)


@rule("masked_fill")
@reads(1)
def _masked_fill(g, out, x, mask, value):
    zero = aten.zeros((), dtype=g.dtype, device=g.device)
    gv = aten.sum(aten.where(mask, g, zero)) if hasattr(value, "_ks") else None
    return aten.where(mask, zero, g), None, gv


@rule("index_put")
def _index_put(g, out, x, key, value):
    """``x[key] = value`` (in place): the overwritten part of x gets no gradient."""
    gx = aten.clone(g)
    aten.index_put_(gx, key, 0.0)
    gv = None
    if hasattr(value, "_ks"):
        sel = aten.basic_index(g, key) if _basic(key) else aten.index(g, key)
        # the forward broadcast the value without its leading 1s (a (1,) value into x[0])
        shape = tuple(value.shape)
        while shape and shape[0] == 1 and len(shape) > len(sel.shape):
            shape = shape[1:]
        gv = sum_to(sel, shape)
        if shape != tuple(value.shape):
            gv = aten.reshape(gv, tuple(value.shape))
    return gx, None, gv


def _basic(key):
    from mdtensor.ops.indexing import is_basic_key

    return is_basic_key(key)


@rule("take_along_axis")
def _take_along_axis(g, out, x, indices, axis=-1):
    return _scatter_add_along(g, x, indices, axis), None, None


@rule("gather")
def _gather(g, out, x, dim, index, *, sparse_grad=False):
    return _scatter_add_along(g, x, index, dim), None, None


def _scatter_add_along(g, x, indices, axis):
    """``zeros(x.shape)`` with ``g`` added at ``indices`` along ``axis`` (the indices cover
    ``g``'s shape, at most ``x``'s in the other dimensions): the gradient of
    take_along_axis and gather."""
    import numpy as np

    shape = tuple(x.shape)
    if not shape:  # a 0-d tensor's dimension 0 is its element
        return aten.sum(g)
    if not g.ndim:
        g = aten.reshape(g, (1,))
    gshape = tuple(g.shape)
    a = axis % len(shape)
    # take_along_axis broadcasts the tensor and the indices against each other (but along
    # ``axis``): scatter into the tensor broadcast to g's shape, then sum back to x's.
    # np.put_along_axis would drop repeated indices; a scatter-add at the positions (Note
    # [Gather backward]) accumulates them.
    wide = tuple(n if i == a else max(n, m) for i, (n, m) in enumerate(zip(shape, gshape)))
    idx_data = np.asarray(indices.device.backend.to_numpy(indices._data))
    idx_data = np.broadcast_to(idx_data.reshape(idx_data.shape or (1,)), gshape)
    idx = list(np.ix_(*[np.arange(s) for s in gshape]))
    idx[a] = idx_data
    acc = _scatter_add(wide, tuple(idx), g)
    ones = tuple(i for i, (n, w) in enumerate(zip(shape, wide)) if n != w)
    return aten.sum(acc, ones, True) if ones else acc


@rule("astype")
@reads()
def _astype(g, out, x, dtype, *, copy=True, device=None):
    if _is_complex(g) and not _is_complex(x):  # a real input gets the real part
        g = aten.real(g)
    return aten.astype(g, x.dtype), None


@rule("copy")
@reads()
def _copy(g, out, self, src):
    gs = sum_to(g, src.shape)
    return None, gs if gs.dtype == src.dtype else aten.astype(gs, src.dtype)


@rule("conj")
@reads()
def _conj(g, out, a):
    return (aten.conj(g),)


@rule("copysign")
@uses_out
def _copysign(g, out, a, b):
    ga = None
    if hasattr(a, "_ks"):
        ga = _g(aten.mul(g, aten.mul(aten.sign(a), aten.sign(out))), a)
    return ga, (_g(aten.mul(g, 0.0), b) if hasattr(b, "_ks") else None)


def _mod_rule(rounding):
    def formula(g, out, a, b):
        gb = None
        if hasattr(b, "_ks"):
            q = rounding(aten.div(a, b))
            gb = _g(aten.neg(aten.mul(g, q)), b)
        return (_g(g, a) if hasattr(a, "_ks") else None), gb
    return formula


DERIVATIVES["remainder"] = _mod_rule(aten.floor)
DERIVATIVES["fmod"] = _mod_rule(aten.trunc)


@rule("cumulative_prod")
@uses_out
def _cumprod(g, out, x, axis=None, *, dtype=None, include_initial=False):
    # As PyTorch's cumprod_backward: out / x only before the first zero of a slice (a sum of
    # that range's terms only: an output past a zero may be 0 * inf = nan); at the first
    # zero the products that skip it up to the second zero -- the product of the factors
    # before it times the cumulative products of those after it, each with its gradient,
    # the rest of the slice masked to 1 (factors) and 0 (gradients), as PyTorch masks; after
    # it nothing, as every product there has that zero in it.
    if not x.ndim:
        return (g if not include_initial else aten.reshape(aten.narrow(g, 0, 1, 1), ())), None
    a = 0 if axis is None else axis % x.ndim
    if include_initial:
        g = aten.narrow(g, a, 1, g.shape[a] - 1)
        out = aten.narrow(out, a, 1, out.shape[a] - 1)
    if x.shape[a] <= 1:  # the product of one factor is the factor (an inf or a 0 too)
        return (g if g.dtype == x.dtype else aten.astype(g, x.dtype)), None
    zero = aten.eq(x, 0)
    seen = aten.cumulative_sum(zero, a)
    before = aten.eq(seen, 0)
    first = aten.logical_and(zero, aten.eq(seen, 1))
    to_second = aten.eq(seen, 1)  # from the first zero to the second
    after_first = aten.cumulative_prod(
        aten.where(aten.logical_and(to_second, aten.logical_not(first)), x, 1.0), a)
    before_first = aten.prod(aten.where(before, x, 1.0), a, True)
    at_first = aten.mul(aten.sum(aten.mul(after_first, aten.where(to_second, g, 0.0)), a,
                                 True), before_first)
    if at_first.dtype != g.dtype:
        at_first = aten.astype(at_first, g.dtype)
    until_zero = aten.div(_reverse_cumsum(aten.where(before, aten.mul(g, out), 0.0), a),
                          aten.where(before, x, 1.0))
    gx = aten.where(before, until_zero, aten.where(first, at_first, 0.0))
    return (gx if gx.dtype == x.dtype else aten.astype(gx, x.dtype)), None


def _reverse_cumsum(v, a):
    return aten.flip(aten.cumulative_sum(aten.flip(v, a), a), a)


def _tile_grad(g, x, reps):
    reps = (reps,) if isinstance(reps, int) else tuple(reps)
    n = max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    shape = (1,) * (n - x.ndim) + tuple(x.shape)
    inter = []
    for r, s in zip(reps, shape):
        inter += [r, s]
    g = aten.reshape(g, tuple(inter))
    g = aten.sum(g, tuple(range(0, 2 * n, 2)))
    return aten.reshape(g, tuple(x.shape))


@rule("tile")
def _tile(g, out, x, reps):
    return _tile_grad(g, x, reps), None


@rule("repeat_tensor")
def _repeat_tensor(g, out, x, repeats):
    return _tile_grad(g, x, repeats), None


@rule("sort")
def _sort(g, out, x, axis=-1, descending=False, *, stable=True):
    if not x.ndim:  # sorting one element moves nothing
        return g, None, None
    idx = aten.argsort(x, axis, descending, stable=True)
    inverse = aten.argsort(idx, axis)
    return aten.take_along_axis(g, inverse, axis), None, None


@rule("sort.dim")
@uses_out
def _sort_dim(g, out, x, dim=-1, descending=False, *, stable=None):
    # scatter the values' gradient back through the indices: g at the inverse permutation
    if x.ndim == 0:
        return g[0], None, None
    return aten.take_along_axis(g[0], aten.argsort(out[1], dim), dim), None, None


@rule("take")
def _take(g, out, x, indices, axis=None):
    a = 0 if axis is None else axis % x.ndim
    key = (slice(None),) * a + (indices,)
    return _scatter_into_zeros(x, key, g, False), None


# -- linear algebra extension -------------------------------------------------------------

DERIVATIVES["mm"] = DERIVATIVES["bmm"] = DERIVATIVES["matmul"]


@rule("dot")
@reads({0: (1,), 1: (0,)})
def _dot(g, out, a, b):
    # sum(a * b), no conjugation (PyTorch's dot): the products' gradients
    return _as(aten.mul(g, _cj(b)), a), _as(aten.mul(g, _cj(a)), b)


@rule("vecdot")
@reads({0: (1,), 1: (0,)})
def _vecdot(g, out, a, b, axis=-1):
    # The forward conjugates its first argument (Array API vecdot: sum(conj(a) * b)):
    # ga = conj(g) * b, gb = g * a, each summed back to its operand's shape (broadcast)
    full = _broadcast_shapes("vecdot", tuple(a.shape), tuple(b.shape))
    ge = aten.broadcast_to(aten.unsqueeze(g, axis), full)
    return (_as(sum_to(aten.mul(_cj(ge), b), a.shape), a),
            _as(sum_to(aten.mul(ge, a), b.shape), b))


@rule("dot")
@reads({0: (1,), 1: (0,)})
def _dot(g, out, a, b):
    # PyTorch's dot, sum(a * b), no conjugation: ga = g * conj(b), gb = g * conj(a).
    return _as(aten.mul(g, _cj(b)), a), _as(aten.mul(g, _cj(a)), b)


@rule("outer")
@reads({0: (1,), 1: (0,)})
def _outer(g, out, a, b):
    return (_as(aten.matmul(g, _cj(b)), a),
            _as(aten.matmul(aten.matrix_transpose(g), _cj(a)), b))


@rule("linalg_inv")
@uses_out
def _inv(g, out, a):
    t = _mH(out)
    return (aten.neg(aten.matmul(aten.matmul(t, g), t)),)


@rule("linalg_det")
@uses_out
def _det(g, out, a):
    # g * conj(det) * A^-H where every matrix is invertible; PyTorch's singular formula
    # otherwise (Note [Determinants of singular matrices])
    gd = aten.mul(g, _cj(out))
    if bool(aten.any(aten.eq(out, 0)).item()):
        return (_det_grad_svd(g, a),)
    inv_h = _mH(aten.linalg_inv(a))
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(gd, -1), -1), inv_h),)


# Note [Determinants of singular matrices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of det(A) is the cofactor matrix, conj(det(A)) A^-H only where A is
# invertible.  For a singular A (det 0 exactly: A^-1 does not exist, and NumPy's inv
# raises) it comes from the SVD A = U S V^H, as PyTorch's linalg_det_backward does:
# det(A) = det(U) det(V^H) prod(S), so the gradient is U diag(g * conj(det(U) det(V^H)) *
# prod of the other singular values) V^H -- the products of the others without division
# (Note [Products of the others]).  The check reads one bool from the backend; a batch
# with any singular matrix takes this formula for all of them (it is exact for every
# matrix, only slower).


def _det_grad_svd(g, a):
    u, s, vh = aten.linalg_svd(a, full_matrices=False)
    alpha = _cj(aten.mul(aten.linalg_det(u), aten.linalg_det(vh)))
    d = aten.mul(aten.unsqueeze(aten.mul(g, alpha), -1), _prod_of_others(s, -1))
    if d.dtype != u.dtype:
        d = aten.astype(d, u.dtype)
    return aten.matmul(aten.mul(u, aten.unsqueeze(d, -2)), vh)


@rule("linalg_solve")
@uses_out
def _solve(g, out, a, b):
    # X = A^-1 B: gB = A^-H g, gA = -gB X^H
    vec = b.ndim == 1
    gb = aten.linalg_solve(_mH(a), g)
    if vec:
        ga = aten.neg(aten.outer(gb, _cj(out)))
    else:
        ga = aten.neg(aten.matmul(gb, _mH(out)))
    return _as(ga, a), _as(gb, b)


@rule("linalg_trace")
def _trace(g, out, a, offset=0, dtype=None):
    n, m = a.shape[-2], a.shape[-1]
    eye = aten.eye(n, m, k=offset, dtype=g.dtype, device=g.device)
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(g, -1), -1), eye),)


@rule("to_device_copy")
@reads()
def _to_device(g, out, x, device):
    return aten.to_device_copy(g, x.device), None


@rule("tril")
@reads()
def _tril(g, out, x, k=0):
    return (aten.tril(g, k=k),)


@rule("triu")
@reads()
def _triu(g, out, x, k=0):
    return (aten.triu(g, k=k),)


# -- complex parts, broadcasting lists ---------------------------------------------------


@rule("real")
@reads()
def _real(g, out, x):
    return (aten.astype(g, x.dtype) if x.dtype.kind == "c" else g,)


@rule("imag")
@reads()
def _imag(g, out, x):
    # d imag(z) / dz in PyTorch's convention: the gradient is i * g.
    return (aten.mul(aten.astype(g, x.dtype), 1j),)


@rule("broadcast_arrays")
@reads()
def _broadcast_arrays(g, out, tensors):
    return [sum_to(gi, t.shape) if gi is not None else None
            for gi, t in zip(g, tensors)], None


@rule("meshgrid")
def _meshgrid(g, out, tensors, indexing="xy"):
    grads = []
    n = len(tensors)
    for j, gj in enumerate(g):
        if gj is None:
            grads.append(None)
            continue
        axis = j
        if indexing == "xy" and n >= 2 and j < 2:
            axis = 1 - j
        others = tuple(a for a in range(gj.ndim) if a != axis)
        grads.append(aten.reshape(aten.sum(gj, others) if others else gj,
                                  tuple(tensors[j].shape)))
    return grads, None


# -- gathers ---------------------------------------------------------------------------------


@rule("index_select")
def _index_select(g, out, x, dim, index):
    if not x.ndim:  # one element selected (Note [Axes of 0-d tensors])
        return g, None, None
    d = dim % x.ndim
    if not index.ndim:  # a 0-d index selects like a 1-element one
        index = aten.reshape(index, (1,))
    return _scatter_add(tuple(x.shape), (slice(None),) * d + (index,), g), None, None


@rule("repeat_interleave")
def _repeat_interleave(g, out, x, repeats, axis=None):
    import numpy as np

    src = x if axis is not None else aten.reshape(x, (-1,))
    a = 0 if axis is None else axis % x.ndim
    n = src.shape[a]
    reps = repeats.tolist() if hasattr(repeats, "_ks") else repeats
    owner = np.repeat(np.arange(n), reps)  # the source index of every output element
    gx = _scatter_add(tuple(src.shape), (slice(None),) * a + (owner,), g)
    return aten.reshape(gx, tuple(x.shape)) if axis is None else gx, None, None


@rule("diff")
def _diff(g, out, x, axis=-1, n=1, *, prepend=None, append=None):
    if n == 0:  # the input itself: prepend and append are not used (NumPy, PyTorch)
        return g, None, None, {"prepend": None, "append": None}
    parts = [t for t in (prepend, x, append) if t is not None]
    a = axis % x.ndim
    for _ in range(n):
        # y = z[1:] - z[:-1] along a  =>  dz = pad(g, before) - pad(g, after)
        zero = aten.zeros(tuple(1 if i == a else s for i, s in enumerate(g.shape)),
                          dtype=g.dtype, device=g.device)
        g = aten.sub(aten.cat([zero, g], axis=a), aten.cat([g, zero], axis=a))
    grads, start = [], 0
    for t in parts:
        width = t.shape[a] if t.ndim else 1  # a 0-d prepend/append is one slice
        gt = aten.narrow(g, a, start, width)
        grads.append(gt if t.ndim else aten.sum(gt))
        start += width
    gx = grads[1] if prepend is not None else grads[0]
    # Note [Keyword-only Tensor arguments] in mdtensor/layers/autograd/kernels.py
    return gx, None, None, {"prepend": grads[0] if prepend is not None else None,
                            "append": grads[-1] if append is not None else None}


# -- einsum and tensordot --------------------------------------------------------------------


# Note [einsum derivative]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The equation is first spelled out: ``...`` becomes fresh letters (an operand with fewer
# ellipsis dimensions takes the last ones, as broadcasting aligns them on the right) and an
# implicit output becomes explicit.  Operand i's gradient is then that of its diagonal
# ``uniq`` (its letters, each once): an einsum of g with the other operands (conjugated,
# PyTorch's convention for complex inputs) down to the letters of ``uniq`` that appear
# elsewhere, summed over dimensions the operand broadcast from size 1 and broadcast over
# letters it alone sums.  A repeated letter ("ii", "iij") then puts that gradient back on
# the diagonal: an einsum with identity matrices, one per repeat.


def _einsum_parts(equation, tensors):
    """(operand subscripts, output subscripts) with ``...`` spelled out in letters and an
    implicit output made explicit (see Note [einsum derivative])."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if not arrow:
        counts = {}
        for c in lhs.replace(",", "").replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
        rhs = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c, k in counts.items() if k == 1))
    if "..." not in eq:
        return ins, rhs
    n_ell = [t.ndim - (len(s) - 3) if "..." in s else 0 for s, t in zip(ins, tensors)]
    width = max(n_ell, default=0)
    letters = "".join([c for c in _EINSUM_LETTERS if c not in eq][:width])
    ins = [s.replace("...", letters[width - k:]) for s, k in zip(ins, n_ell)]
    return ins, rhs.replace("...", letters)


_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _unbroadcast(gi, letters, size):
    """``gi`` (subscripts ``letters``) summed where the operand had size 1 and reshaped and
    broadcast to the operand's sizes ``size`` over the letters of ``size`` (in order)."""
    ones = tuple(k for k, c in enumerate(letters) if size[c] == 1 and gi.shape[k] != 1)
    if ones:
        gi = aten.sum(gi, ones, True)
    kept = tuple(gi.shape[letters.index(c)] if c in letters else 1 for c in size)
    if kept != tuple(gi.shape):
        gi = aten.reshape(gi, kept)
    shape = tuple(size.values())
    return aten.expand(gi, shape) if kept != shape else gi


def _onto_diagonal(gd, uniq, spec, size):
    """The gradient ``gd`` of the diagonal ``uniq`` put back onto an operand with repeated
    subscripts ``spec``: each repeat of a letter gets a fresh letter tied to it by eye."""
    fresh = iter(c for c in _EINSUM_LETTERS if c not in spec)
    subs, ops, seen, out = [uniq], [gd], set(), []
    for c in spec:
        if c in seen:
            f = next(fresh)
            subs.append(c + f)
            ops.append(aten.eye(size[c], dtype=gd.dtype, device=gd.device))
            out.append(f)
        else:
            seen.add(c)
            out.append(c)
    return aten.einsum(",".join(subs) + "->" + "".join(out), ops)


@rule("einsum")
def _einsum(g, out, equation, tensors):
    ins, rhs = _einsum_parts(equation, tensors)
    grads = []
    for i, (spec, t) in enumerate(zip(ins, tensors)):
        size = {}
        for c, s in zip(spec, t.shape):
            size.setdefault(c, s)
        uniq = "".join(size)
        others = [(s, u) for j, (s, u) in enumerate(zip(ins, tensors)) if j != i]
        present = set(rhs) | {c for s, _ in others for c in s}
        target = "".join(c for c in uniq if c in present)
        eq = ",".join([rhs] + [s for s, _ in others]) + "->" + target
        gi = _unbroadcast(aten.einsum(eq, [g] + [_cj(u) for _, u in others]), target, size)
        if uniq != spec:
            gi = _onto_diagonal(gi, uniq, spec, size)
        if gi.dtype.kind == "c" and t.dtype.kind != "c":
            gi = aten.real(gi)
        grads.append(gi)
    return None, grads


def _tensordot_axes(a_ndim, b_ndim, axes):
    if isinstance(axes, int):
        return list(range(a_ndim - axes, a_ndim)), list(range(axes))
    ax_a = [axes[0]] if isinstance(axes[0], int) else list(axes[0])
    ax_b = [axes[1]] if isinstance(axes[1], int) else list(axes[1])
    return [x % a_ndim for x in ax_a], [x % b_ndim for x in ax_b]


def _inverse_perm(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


@rule("tensordot")
def _tensordot(g, out, a, b, axes=2):
    ax_a, ax_b = _tensordot_axes(a.ndim, b.ndim, axes)
    free_a = [d for d in range(a.ndim) if d not in ax_a]
    free_b = [d for d in range(b.ndim) if d not in ax_b]
    nfa = len(free_a)
    # g's dims are a's free dims then b's free dims; contract g with the other operand's
    # free dims (conjugated when complex), then put the result's dims back in the
    # operand's order.
    ga = aten.tensordot(g, _cj(b), axes=(list(range(nfa, g.ndim)), free_b))
    dims_a = free_a + [ax_a[ax_b.index(d)] for d in sorted(ax_b)]
    gb = aten.tensordot(_cj(a), g, axes=(free_a, list(range(nfa))))
    dims_b = [ax_b[ax_a.index(d)] for d in sorted(ax_a)] + free_b
    return (_as(aten.permute(ga, _inverse_perm(dims_a)), a),
            _as(aten.permute(gb, _inverse_perm(dims_b)), b))


# -- linalg ------------------------------------------------------------------------------------


def _mT(x):
    return aten.matrix_transpose(x)


def _mm(*xs):
    r = xs[0]
    for x in xs[1:]:
        r = aten.matmul(r, x)
    return r


def _diag_embed(v):
    n = v.shape[-1]
    return aten.mul(aten.unsqueeze(v, -1), aten.eye(n, dtype=v.dtype, device=v.device))


def _eye_like(x, n):
    return aten.eye(n, dtype=x.dtype, device=x.device)


@rule("linalg_cross")
def _cross(g, out, a, b, axis=-1):
    return (_as(sum_to(aten.linalg_cross(_cj(b), g, axis=axis), a.shape), a),
            _as(sum_to(aten.linalg_cross(g, _cj(a), axis=axis), b.shape), b))


@rule("linalg_diagonal")
def _linalg_diagonal(g, out, x, offset=0):
    # z = R^T diag(g) C with 0/1 selection matrices (no scatter: works on every backend)
    n, m = x.shape[-2], x.shape[-1]
    r0 = max(0, -offset)
    k = g.shape[-1]
    rows = aten.eye(k, n, k=r0, dtype=g.dtype, device=g.device)
    cols = aten.eye(k, m, k=r0 + offset, dtype=g.dtype, device=g.device)
    return (aten.matmul(aten.mul(_mT(rows), aten.unsqueeze(g, -2)), cols),)


@rule("linalg_vector_norm")
@uses_out
def _vector_norm(g, out, x, axis=None, keepdims=False, ord=2):
    import math

    gx = _expand_back(g, x, axis, keepdims)
    nx = _expand_back(out, x, axis, keepdims)
    ax = aten.abs(x)
    if ord == 2:
        zero = aten.eq(nx, 0)
        r = aten.div(x, aten.where(zero, 1.0, nx))
    elif ord == 1:
        r = _sgn(x)
    elif ord == 0:  # a count: zero everywhere (x * 0 was nan at an infinity)
        r = aten.zeros_like(x)
    elif ord in (math.inf, -math.inf):
        # the elements that are the norm share the gradient; the others, and all of a nan
        # norm, get 0 (as PyTorch's, not 0 / 0)
        hit = aten.eq(ax, nx)
        count = _expand_back(aten.sum(aten.astype(hit, ax.dtype), axis, keepdims), x, axis,
                             keepdims)
        r = aten.where(hit, aten.div(_sgn(x), count), 0.0)
    else:
        # as PyTorch, a zero norm gives a zero gradient (not 0/0), and for p < 1 so does a
        # zero element (0 * |0|^(p - 1) is 0 * inf)
        p = float(ord)
        r = aten.div(aten.mul(aten.sign(x), aten.pow(ax, p - 1)),
                     aten.pow(nx, p - 1))
        r = aten.where(aten.eq(nx, 0), 0.0, r)
        if p < 1:
            r = aten.where(aten.eq(x, 0), 0.0, r)
    return (aten.mul(gx, r),)


@rule("linalg_matrix_norm")
@uses_out
def _matrix_norm(g, out, x, keepdims=False, ord="fro"):
    gx = g if keepdims else aten.unsqueeze(aten.unsqueeze(g, -1), -1)
    nx = out if keepdims else aten.unsqueeze(aten.unsqueeze(out, -1), -1)
    if ord == "fro":  # a zero matrix: a zero gradient, as PyTorch (not 0/0)
        return (aten.mul(gx, aten.div(x, aten.where(aten.eq(nx, 0), 1.0, nx))),)
    if ord in ("nuc", 2, -2):
        u, s, vh = aten.linalg_svd(x, full_matrices=False)
        if ord == "nuc":
            return (aten.mul(gx, aten.matmul(u, vh)),)
        k = 0 if ord == 2 else s.shape[-1] - 1
        uk = aten.narrow(u, -1, k, 1)
        vk = aten.narrow(vh, -2, k, 1)
        return (aten.mul(gx, aten.matmul(uk, vk)),)
    if ord in (1, -1, math.inf, -math.inf):
        return (_abs_sum_extreme_grad(gx, x, -2 if ord in (1, -1) else -1, ord > 0),)
    raise NotImplementedError(f"linalg_matrix_norm: the derivative for ord={ord!r} is not "
                              f"implemented (fro, nuc, 1, -1, 2, -2, inf and -inf are)")


def _abs_sum_extreme_grad(gx, x, axis, largest):
    """Gradient of the largest (smallest) column (``axis=-2``) or row (``axis=-1``) sum of
    ``|x|``, as PyTorch's ``amax(abs(x).sum(axis))``: the selected columns (rows) get
    ``g * sgn(x)``, split evenly among ties.  The extreme is taken again here rather than
    compared with the forward's output, whose rounding may differ on another backend."""
    sums = aten.sum(aten.abs(x), axis, True)
    pick = aten.amax(sums, (-2, -1), True) if largest else aten.amin(sums, (-2, -1), True)
    hit = aten.astype(aten.eq(sums, pick), sums.dtype)
    share = aten.div(hit, aten.sum(hit, (-2, -1), True))
    return aten.mul(aten.mul(gx, share), aten.sign(x))


@rule("linalg_matrix_power")
def _matrix_power(g, out, x, n):
    if n == 0:
        return aten.mul(x, 0.0), None
    if n < 0:
        inv = aten.linalg_inv(x)
        gi, _ = _matrix_power(g, None, inv, -n)
        t = _mH(inv)
        return aten.neg(_mm(t, gi, t)), None
    # d(x^n) = sum_k x^k dx x^(n-1-k)  =>  gx = sum_k (x^k)^H g (x^(n-1-k))^H
    acc = x
    pw = {1: x}
    for k in range(2, n):
        acc = aten.matmul(acc, x)
        pw[k] = acc
    total = None
    for k in range(n):
        left = pw.get(k)
        right = pw.get(n - 1 - k)
        term = g
        if left is not None:
            term = aten.matmul(_mH(left), term)
        if right is not None:
            term = aten.matmul(term, _mH(right))
        total = term if total is None else aten.add(total, term)
    return total, None


@rule("linalg_slogdet")
def _slogdet(g, out, x):
    # d log det(A) = tr(A^-1 dA): the gradient of log det is gw A^-H with gw = g_logabsdet
    # (its real part) + i g_theta (its imaginary part, the sign's phase theta: sign =
    # e^{i theta}, so g_theta = Im(g_sign conj(sign))).  A real sign is piecewise constant.
    gsign, glog = g
    if not _is_complex(x):
        if glog is None:
            return (None,)
        return (aten.mul(aten.unsqueeze(aten.unsqueeze(glog, -1), -1),
                         _mT(_slogdet_inv(x))),)
    if glog is None and gsign is None:
        return (None,)
    gw = None
    if gsign is not None:
        sign = aten.linalg_slogdet(x)[0]
        gw = aten.mul(aten.imag(aten.mul(gsign, aten.conj(sign))), 1j)
        if glog is not None:
            gw = aten.add(gw, glog)
    else:
        gw = glog
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(gw, -1), -1), _mH(_slogdet_inv(x))),)


def _slogdet_inv(x):
    """A^-1 for slogdet's gradient; for a singular A (logabsdet -inf) the error names
    slogdet, whose gradient does not exist there."""
    try:
        return aten.linalg_inv(x)
    except ValueError as e:
        raise ValueError(f"linalg.slogdet: no gradient at a singular matrix (log|det| is "
                         f"-inf): {e}") from None


@rule("linalg_cholesky")
@uses_out
def _cholesky(g, out, x, upper=False):
    # PyTorch's formula (the input is taken as Hermitian): with L = cholesky(A),
    # gA = L^-H Phi(L^H gL) L^-1, made Hermitian, Phi = lower triangle with a halved
    # diagonal.  (PyTorch keeps the imaginary part of Phi's diagonal, which only adds a
    # skew-Hermitian part orthogonal to every Hermitian perturbation; this is the Hermitian
    # part of its gradient.)  H is T for a real input.
    L = _mH(out) if upper else out
    gL = _mH(g) if upper else g
    phi = aten.tril(aten.matmul(_mH(L), gL))
    phi = aten.sub(phi, aten.mul(_diag_embed(aten.linalg_diagonal(phi)), 0.5))
    Linv = aten.linalg_inv(L)
    ga = _mm(_mH(Linv), phi, Linv)
    return (aten.mul(aten.add(ga, _mH(ga)), 0.5),)


def _eigh_grad(gw, gv, w, v):
    # PyTorch's linalg_eig_backward, Hermitian case: gA = V (diag(gw) + skew(V^H gV) / E) V^H
    # with skew(K) = (K - K^H) / 2, E_ij = w_j - w_i (off the diagonal); here as the Hermitian
    # part of V (diag(gw) + (V^H gV) / E) V^H, which is the same.  For a complex input the
    # loss must not depend on the eigenvectors' phases (checked as PyTorch).
    terms = None
    if gw is not None:
        terms = _diag_embed(gw)
    if gv is not None:
        vh_gv = aten.matmul(_mH(v), gv)
        if _is_complex(vh_gv):
            _check_eig_gauge(aten.linalg_diagonal(vh_gv), "linalg_eigh")
        diff = aten.sub(aten.unsqueeze(w, -2), aten.unsqueeze(w, -1))  # w_j - w_i
        n = w.shape[-1]
        eye = _eye_like(w, n)
        f = aten.div(aten.sub(1.0, eye), aten.add(diff, eye))  # 0 on the diagonal
        t = aten.mul(f, vh_gv)
        terms = t if terms is None else aten.add(terms, t)
    if terms is None:
        return None
    ga = _mm(v, terms, _mH(v))
    return aten.mul(aten.add(ga, _mH(ga)), 0.5)


@rule("linalg_eigh")
@uses_out
def _eigh(g, out, x):
    return (_eigh_grad(g[0], g[1], out[0], out[1]),)


@rule("linalg_eigvalsh")
def _eigvalsh(g, out, x):
    w, v = aten.linalg_eigh(x)
    return (_eigh_grad(g, None, w, v),)


def _mH(x):
    return aten.matrix_transpose(aten.conj(x) if _is_complex(x) else x)


_EIG_GAUGE = ("{op}: the eigenvectors in the complex case are specified up to "
              "multiplication by e^{{i phi}}. The specified loss function depends on this "
              "quantity, so it is ill-defined.")
_SVD_GAUGE = ("linalg_svd: the singular vectors in the complex case are specified up to "
              "multiplication by e^{i phi}. The specified loss function depends on this "
              "phase term, making it ill-defined.")


def _imag_close(a, b=None):
    """Whether the imaginary parts of ``a`` and ``-b`` (or 0) agree to 1e-2, as PyTorch's
    allclose in its phase checks (True on the meta device: no values to check)."""
    import numpy as np

    if a.device.type == "meta":
        return True
    be = a.device.backend
    im = np.asarray(be.to_numpy(aten.imag(a)._data))
    other = 0.0 if b is None else -np.asarray(be.to_numpy(aten.imag(b)._data))
    return bool(np.allclose(im, other, rtol=1e-2, atol=1e-2))


def _check_eig_gauge(diag, op="linalg_eig"):
    """PyTorch's check that the loss is invariant to V -> V e^{i phi}: the imaginary part
    of diag(V^H gV) must vanish (to 1e-2, as PyTorch's allclose)."""
    if not _imag_close(diag):
        raise RuntimeError(_EIG_GAUGE.format(op=op))


def _eig_grad(gL, gV, L, V, x):
    """PyTorch's linalg_eig_backward for A = V diag(L) V^-1 (unit-norm eigenvectors):
    gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(E)) V^H, with
    E_ij = L_j - L_i off the diagonal (whose terms are replaced by gL); the second term
    removes the part of gV along each eigenvector's own norm.  A real ``x`` gets the real
    part."""
    if gL is None and gV is None:
        return None
    Vh = _mH(V)
    if gV is None:  # eigvals: V^-H diag(gL) V^H
        inner = aten.mul(aten.unsqueeze(gL, -1), Vh)
    else:
        VhgV = aten.matmul(Vh, gV)
        diag = aten.linalg_diagonal(VhgV)
        _check_eig_gauge(diag)
        VhgV = aten.sub(VhgV, aten.matmul(Vh, aten.mul(V, aten.unsqueeze(aten.real(diag), -2))))
        Lc = aten.conj(L)
        eye = _eye_like(VhgV, L.shape[-1])
        econj = aten.add(aten.sub(aten.unsqueeze(Lc, -2), aten.unsqueeze(Lc, -1)), eye)
        inner = aten.div(VhgV, econj)
        if gL is not None:
            inner = aten.add(aten.mul(inner, aten.sub(1.0, eye)), _diag_embed(gL))
        inner = aten.matmul(inner, Vh)
    ga = aten.linalg_solve(Vh, inner)
    return aten.real(ga) if x.dtype.kind != "c" else ga


@rule("linalg_eig")
@uses_out
def _eig(g, out, x):
    return (_eig_grad(g[0], g[1], out[0], out[1], x),)


@rule("linalg_eigvals")
def _eigvals(g, out, x):
    L, V = aten.linalg_eig(x)
    return (_eig_grad(g, None, L, V, x),)


@rule("linalg_svdvals")
def _svdvals(g, out, x):
    u, s, vh = aten.linalg_svd(x, full_matrices=False)
    return (_mm(u, _diag_embed(g), vh),)


@rule("linalg_svd")
@uses_out
def _svd(g, out, x, full_matrices=True):
    # PyTorch's svd_backward: with skew(K) = K - K^H, E_ij = s_j^2 - s_i^2 (off the diagonal),
    # gA = U [(skew(U^H gU) / E) S + S (skew(V^H gV) / E) + diag(gS)] V^H
    #      + (I_m - U U^H) gU S^-1 V^H + U S^-1 gVh (I_n - V V^H)
    # and, for a complex input, i Im(diag(U^H gU)) / S on the diagonal (when both gU and gVh
    # are given), after checking that the loss does not depend on the singular vectors'
    # phases: Im(diag(U^H gU)) = -Im(diag(V^H gV)).  H is T for a real input.
    gu, gs, gvh = g
    u, s, vh = out
    m, n = x.shape[-2], x.shape[-1]
    k = s.shape[-1]
    if full_matrices and m != n:
        if gu is not None or gvh is not None:
            raise NotImplementedError(
                "linalg_svd: the derivative through U or Vh of a full_matrices=True SVD of a "
                "non-square matrix is not implemented (use full_matrices=False)")
    u = aten.narrow(u, -1, 0, k)
    vh = aten.narrow(vh, -2, 0, k)
    gu = aten.narrow(gu, -1, 0, k) if gu is not None else None
    gvh = aten.narrow(gvh, -2, 0, k) if gvh is not None else None
    v = _mH(vh)
    inner = _diag_embed(gs) if gs is not None else aten.mul(_diag_embed(s), 0.0)
    s2 = aten.mul(s, s)
    eye = _eye_like(s, k)
    f = aten.div(aten.sub(1.0, eye),
                 aten.add(aten.sub(aten.unsqueeze(s2, -2), aten.unsqueeze(s2, -1)), eye))
    S = _diag_embed(s)
    sinv = _diag_embed(aten.div(1.0, s))
    complex_ = _is_complex(u)
    sk_u = sk_v = extra = None
    if gu is not None:
        uh_gu = aten.matmul(_mH(u), gu)
        sk_u = aten.sub(uh_gu, _mH(uh_gu))
        inner = aten.add(inner, aten.matmul(aten.mul(f, sk_u), S))
        if m > k:
            proj = aten.sub(_eye_like(x, m), aten.matmul(u, _mH(u)))
            extra = _mm(proj, gu, sinv, vh)
    if gvh is not None:
        gv = _mH(gvh)
        vh_gv = aten.matmul(_mH(v), gv)
        sk_v = aten.sub(vh_gv, _mH(vh_gv))
        inner = aten.add(inner, aten.matmul(S, aten.mul(f, sk_v)))
        if n > k:
            proj = aten.sub(_eye_like(x, n), aten.matmul(v, vh))
            term = _mm(u, sinv, _mH(gv), proj)
            extra = term if extra is None else aten.add(extra, term)
    if complex_:
        du = aten.linalg_diagonal(sk_u) if sk_u is not None else None
        dv = aten.linalg_diagonal(sk_v) if sk_v is not None else None
        if not (_imag_close(du, dv) if du is not None and dv is not None else
                _imag_close(du if du is not None else dv)):
            raise RuntimeError(_SVD_GAUGE)
        if du is not None and dv is not None:  # i Im(diag(U^H gU)) / S
            inner = aten.add(inner, _diag_embed(aten.div(du, aten.mul(s, 2.0))))
    ga = _mm(u, inner, vh)
    return (ga if extra is None else aten.add(ga, extra),)


@rule("linalg_qr")
@uses_out
def _qr(g, out, x, mode="reduced"):
    # PyTorch's linalg_qr_backward (rows >= columns): with M = R gR^H - gQ^H Q,
    # gA = (gQ + Q copyltu(M)) R^-H, copyltu(M) = tril(M, -1) + tril(M, -1)^H + Re(diag(M)).
    # H is T for a real input.
    gq, gr = g
    q, r = out
    m, n = x.shape[-2], x.shape[-1]
    if mode != "reduced" or m < n:
        raise NotImplementedError("linalg_qr: the derivative is implemented for "
                                  "mode='reduced' with rows >= columns")
    gq = gq if gq is not None else aten.mul(q, 0.0)
    gr = gr if gr is not None else aten.mul(r, 0.0)
    M = aten.sub(aten.matmul(r, _mH(gr)), aten.matmul(_mH(gq), q))
    low = aten.tril(M, k=-1)
    dm = aten.linalg_diagonal(M)
    if _is_complex(dm):
        dm = aten.real(dm)
    copyltu = aten.add(aten.add(low, _mH(low)), _diag_embed(dm))
    b = aten.add(gq, aten.matmul(q, copyltu))
    # gA = b R^-H  (R is invertible for a full-rank input)
    return (aten.matmul(b, _mH(aten.linalg_inv(r))),)


@rule("linalg_pinv")
@uses_out
def _pinv(g, out, x, rtol=None):
    p = out
    pt = _mH(p)  # H: conjugate transposes for a complex input
    m, n = x.shape[-2], x.shape[-1]
    gt = _mH(g)
    t1 = aten.neg(_mm(pt, g, pt))
    t2 = _mm(aten.sub(_eye_like(x, m), aten.matmul(x, p)), gt, p, pt)
    t3 = _mm(pt, p, gt, aten.sub(_eye_like(x, n), aten.matmul(p, x)))
    return aten.add(aten.add(t1, t2), t3), None


# -- fft ---------------------------------------------------------------------------------------

_DUAL_NORM = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _fit(t, axis, size):
    """``t`` cut or zero-padded to ``size`` along ``axis``."""
    have = t.shape[axis]
    if have == size:
        return t
    if have > size:
        return aten.narrow(t, axis, 0, size)
    shape = tuple(size - have if i == axis % t.ndim else s for i, s in enumerate(t.shape))
    return aten.cat([t, aten.zeros(shape, dtype=t.dtype, device=t.device)], axis=axis)


def _real_if(x, gx):
    return aten.real(gx) if x.dtype.kind != "c" else gx


def _c2c_rule(inverse_of):
    def formula(g, out, x, n=None, axis=-1, norm="backward"):
        gx = getattr(aten, inverse_of)(g, None, axis, _DUAL_NORM[norm])
        return (_real_if(x, _fit(gx, axis, x.shape[axis])), None, None, None)
    return formula


def _c2c_n_rule(inverse_of):
    def formula(g, out, x, s=None, axes=None, norm="backward"):
        axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
        if s is not None and axes is None:
            axes_ = list(range(x.ndim - len(s), x.ndim))
        gx = getattr(aten, inverse_of)(g, None, axes_, _DUAL_NORM[norm])
        for a in axes_:
            gx = _fit(gx, a, x.shape[a])
        return (_real_if(x, gx), None, None, None)
    return formula


DERIVATIVES["fft_fft"] = _c2c_rule("fft_ifft")
DERIVATIVES["fft_ifft"] = _c2c_rule("fft_fft")
DERIVATIVES["fft_fftn"] = _c2c_n_rule("fft_ifftn")
DERIVATIVES["fft_ifftn"] = _c2c_n_rule("fft_fftn")


@rule("fft_rfft")
def _rfft(g, out, x, n=None, axis=-1, norm="backward"):
    size = n if n is not None else x.shape[axis]
    full = aten.fft_ifft(_fit(g, axis, size), None, axis, _DUAL_NORM[norm])
    return (aten.real(_fit(full, axis, x.shape[axis])), None, None, None)


@rule("fft_rfftn")
def _rfftn(g, out, x, s=None, axes=None, norm="backward"):
    axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    if s is not None and axes is None:
        axes_ = list(range(x.ndim - len(s), x.ndim))
    sizes = list(s) if s is not None else [x.shape[a] for a in axes_]
    full = _fit(g, axes_[-1], sizes[-1])
    full = aten.fft_ifftn(full, sizes, axes_, _DUAL_NORM[norm])
    for a in axes_:
        full = _fit(full, a, x.shape[a])
    return (aten.real(full), None, None, None)


def _double_inner_bins(gx, axis, n):
    """irfft reads bins 1..ceil(n/2)-1 twice (as themselves and as their mirror)."""
    half = gx.shape[axis]
    double = n - half
    if double <= 0:
        return gx
    parts = [aten.narrow(gx, axis, 0, 1), aten.mul(aten.narrow(gx, axis, 1, double), 2.0)]
    if half - 1 - double > 0:
        parts.append(aten.narrow(gx, axis, 1 + double, half - 1 - double))
    return aten.cat(parts, axis=axis)


@rule("fft_irfft")
def _irfft(g, out, x, n=None, axis=-1, norm="backward"):
    size = n if n is not None else 2 * (x.shape[axis] - 1)
    gx = aten.fft_rfft(g, None, axis, _DUAL_NORM[norm])
    gx = _double_inner_bins(gx, axis, size)
    return (_real_if(x, _fit(gx, axis, x.shape[axis])), None, None, None)


@rule("fft_irfftn")
def _irfftn(g, out, x, s=None, axes=None, norm="backward"):
    axes_ = list(range(x.ndim)) if axes is None else [a % x.ndim for a in axes]
    if s is not None and axes is None:
        axes_ = list(range(x.ndim - len(s), x.ndim))
    last = axes_[-1]
    size = s[-1] if s is not None else 2 * (x.shape[last] - 1)
    gx = aten.fft_rfftn(g, None, axes_, _DUAL_NORM[norm])
    gx = _double_inner_bins(gx, last, size)
    for a in axes_:
        gx = _fit(gx, a, x.shape[a])
    return (_real_if(x, gx), None, None, None)  # a real input (an irfft of reals) gets reals


@rule("fft_hfft")
def _hfft(g, out, x, n=None, axis=-1, norm="backward"):
    # hfft(x) = irfft(conj(x)) with the normalization direction swapped
    (gx, *_rest) = _irfft(g, None, x, n, axis, _DUAL_NORM[norm])
    return (aten.conj(gx) if _is_complex(gx) else gx, None, None, None)


@rule("fft_ihfft")
def _ihfft(g, out, x, n=None, axis=-1, norm="backward"):
    # ihfft(x) = conj(rfft(x)) with the normalization direction swapped
    return _rfft(aten.conj(g), None, x, n, axis, _DUAL_NORM[norm])


@rule("fft_fftshift")
@reads()
def _fftshift(g, out, x, axes=None):
    return aten.fft_ifftshift(g, axes), None


@rule("fft_ifftshift")
@reads()
def _ifftshift(g, out, x, axes=None):
    return aten.fft_fftshift(g, axes), None


def _view_copy_rules() -> None:
    """``<view>_copy`` ops differentiate like their views (ops/view_copy.py)."""
    from mdtensor.ops.view_copy import VIEW_COPY

    for view, copy in VIEW_COPY.items():
        for name in [n for n in DERIVATIVES if n == view or n.startswith(view + ".")]:
            DERIVATIVES[copy + name[len(view):]] = DERIVATIVES[name]


_view_copy_rules()


# The rules of newer catalogue chapters live beside them (``ops/<chapter>_derivatives.py``);
# importing them here registers them in ``DERIVATIVES`` (by module path: a plain name would
# be read as an operator namespace, ``md.ops.<ns>``).
_CHAPTERS = ("convolution", "distances", "filling", "float_values", "histograms",
             "least_squares", "normalization", "pooling", "scatter", "special_functions",
             "statistics")
for _chapter in _CHAPTERS:
    importlib.import_module(f"mdtensor.ops.{_chapter}_derivatives")

register_formulas(DERIVATIVES, NONDIFFERENTIABLE)  # the Autograd layer reads them there
