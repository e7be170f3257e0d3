"""What the derivative rules share: the rules table ``DERIVATIVES`` (its contract is in
ops/derivatives.py, which loads the chapters that fill it), the marks a formula carries
(``rule``, ``uses_out``, ``uses_mask``, ``reads``, ``analytic``), and the helpers of more than
one chapter: a gradient reduced to its argument (``grad_for``, ``as_grad_of``), complex
factors (``conj_factor``, ``mH``), reductions' gradients (``expand_back``,
``prod_of_others``).
"""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.formulas import reduce_to as _reduce_to

__all__ = [
    "DERIVATIVES",
    "analytic",
    "as_grad_of",
    "conj_factor",
    "expand_back",
    "grad_for",
    "in_dtype_of",
    "inverse_permutation",
    "is_complex",
    "mH",
    "prod_of_others",
    "reads",
    "real_floats",
    "rule",
    "sgn",
    "uses_mask",
    "uses_out",
]

#: op name -> formula (the contract: ops/derivatives.py); ``rule`` fills it
DERIVATIVES: dict = {}


def uses_out(fn=None, /, *outputs):
    """Mark a formula that reads the op's output (so the Autograd kernel saves it):
    ``@uses_out``; for an op of several outputs, ``@uses_out(1, 2)`` names the ones it
    reads, and the others reach it as None (Note [Saving several outputs] in
    mdtensor/layers/autograd/kernels.py)."""
    if callable(fn):
        fn.uses_out = True
        return fn
    read = frozenset((fn, *outputs))

    def mark(f):
        f.uses_out = read
        return f
    return mark


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


def grad_for(g, x):
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


def is_complex(x) -> bool:
    """Whether Tensor ``x`` is complex, read from the native dtype (no md dtype lookup on
    the real path) where it has a NumPy-style ``kind``."""
    kind = getattr(x._data.dtype, "kind", None)
    return (x.dtype.kind if kind is None else kind) == "c"


def real_floats(a, b) -> bool:
    """Whether Tensors ``a`` and ``b`` are both real floating: the backward ops' condition
    (Note [Backward ops] in ops/nn.py), read from the native dtypes where they have a
    NumPy-style ``kind`` (two ``Tensor.dtype`` lookups cost twice as much)."""
    ka = getattr(a._data.dtype, "kind", None)
    kb = getattr(b._data.dtype, "kind", None)
    if ka is None or kb is None:
        return a.dtype.kind == "f" and b.dtype.kind == "f"
    return ka == "f" and kb == "f"


def conj_factor(v):
    """The complex conjugate of a multiplier (PyTorch's convention: a gradient is the
    conjugate Wirtinger derivative, so products use the conjugate of the other factor)."""
    if hasattr(v, "_ks"):
        return aten.conj(v) if is_complex(v) else v
    return v.conjugate() if isinstance(v, complex) else v


def as_grad_of(gx, x):
    """``gx`` for argument ``x``: its real part when ``x`` is real and ``gx`` complex (a
    product of a real and a complex operand), else ``gx`` itself."""
    if gx is not None and gx._data.dtype != x._data.dtype and is_complex(gx) \
            and not is_complex(x):
        return aten.real(gx)
    return gx


def in_dtype_of(gx, x):
    """The gradient of ``x``, an input promoted with others (cat, stack, hstack): the real
    part of a complex gradient for a real ``x``, in ``x``'s dtype (PyTorch's behaviour)."""
    gx = as_grad_of(gx, x)
    return gx if gx._data.dtype == x._data.dtype else aten.astype(gx, x.dtype)


# Note [Derivatives of analytic functions]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# For a complex input, PyTorch's gradient of an analytic function f is g * conj(f'(z))
# (the conjugate Wirtinger convention, as ``conj_factor`` gives products of complex factors).  The
# formulas below are written g * f'(z); f has real Taylor coefficients (exp, sin, log, ...
# commute with conjugation), so evaluating a formula at conj(z) -- and conj(out) -- gives
# g * f'(conj z) = g * conj(f'(z)).  ``analytic`` wraps a formula that way; real inputs
# take the formula as it is, for one dtype check.


def analytic(fn):
    """Mark a unary formula ``g * f'(z)`` of an analytic ``f`` (Note [Derivatives of
    analytic functions]); put it above ``uses_out``/``reads``."""
    reads_input = getattr(fn, "reads", None) != frozenset()

    def formula(g, out, a):
        if is_complex(out if out is not None else a):
            return fn(g, None if out is None else aten.conj(out),
                      aten.conj(a) if reads_input else a)
        return fn(g, out, a)

    for attr in ("uses_out", "reads", "uses_mask"):
        if hasattr(fn, attr):
            setattr(formula, attr, getattr(fn, attr))
    formula.__name__ = fn.__name__
    return formula


def sgn(a):
    """PyTorch's sgn, the derivative of abs: sign(a), and 0 at a real nan (a nan input gets
    no gradient from abs, not nan)."""
    s = aten.sign(a)
    return s if is_complex(a) else aten.where(aten.isnan(a), 0.0, s)


def expand_back(g, x, axis, keepdims):
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


# Note [Products of the others]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of a product with respect to one factor is the product of the others.
# ``out / x`` gives it only where x is not 0 (PyTorch's prod_backward divides only when no
# factor is 0); here it is always the product of the exclusive prefix and suffix
# products along the reduced elements (``cumulative_prod`` with ``include_initial``), with
# no division: ``[2, 0, 3]`` gets ``[0, 6, 0]``.  Several reduced axes are moved last and
# flattened into one.  The determinant's gradient uses it on singular values.


def prod_of_others(x, axis=None):
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
        r = aten.permute(r, inverse_permutation(order))
    return r


def _normalized_axes(axis, nd):
    if axis is None:
        return tuple(range(nd))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return tuple(sorted({a % nd for a in axes}))


def inverse_permutation(order):
    inv = [0] * len(order)
    for i, d in enumerate(order):
        inv[d] = i
    return tuple(inv)


def mH(x):
    return aten.matrix_transpose(aten.conj(x) if is_complex(x) else x)
