"""How each catalogue op is called in mdtensor and in its reference, and what inputs it gets:
the op table of the differential suite (``tests/test_differential.py``).

Each ``Ref`` names a catalogue op (``aten::<op>``), says how to call it in mdtensor and in
PyTorch (``fn(lib, *args, **kwargs)``, ``lib`` being ``md`` or ``torch``; NumPy arrays in
the arguments become tensors of that library first), and gives a hypothesis strategy of
``Sample``s: shapes with 0-d and empty tensors, broadcasting, several dtypes, special
values (nan, +-inf, -0.0, huge and tiny magnitudes, ties).  Ops PyTorch lacks compare with a
NumPy reference (``numpy=``); ops whose outputs are defined up to a gauge (eigenvectors,
singular vectors) compare gauge-free quantities (``post=``).  ``EXCLUDED`` lists the
catalogue ops no ``Ref`` calls directly, each with the reason and the ``Ref`` that covers
it; a test checks that the two together are the whole catalogue.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

__all__ = ["EXCLUDED", "REFS", "Ref", "Sample"]


@dataclass
class Sample:
    """One call: ``op(*args, **kwargs)``; NumPy arrays are tensors in the call."""

    args: tuple
    kwargs: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        def show(v):
            if isinstance(v, np.ndarray):
                return f"array({v.tolist()!r}, dtype={v.dtype.name})"
            if isinstance(v, (list, tuple)):
                return type(v)(show(x) for x in v).__repr__()
            return repr(v)

        parts = [show(a) for a in self.args] + [f"{k}={show(v)}" for k, v in
                                                 self.kwargs.items()]
        return f"({', '.join(parts)})"


@dataclass
class Ref:
    """A catalogue op and its reference (see the module docstring).

    Attributes:
        op: the catalogue name (``aten::<op>``).
        md: ``md(md_module, *args, **kwargs)``.
        torch: ``torch(torch_module, *args, **kwargs)``, or None where PyTorch has no
            counterpart (then ``numpy`` is the reference).
        sample: a strategy of ``Sample``s.
        grad: compare float64 gradients with PyTorch's.
        numpy: ``numpy(*args, **kwargs)`` on NumPy arrays: the reference of ops PyTorch
            lacks, and what rows of the differences table may compare with.
        post: maps each library's outputs (NumPy arrays) to the quantities compared.
        tol: a relative tolerance multiplier for ops whose algorithms differ (linalg).
    """

    op: str
    md: Callable
    torch: Callable | None
    sample: st.SearchStrategy
    grad: bool = True
    numpy: Callable | None = None
    post: Callable | None = None
    tol: float = 1.0
    name: str = ""  # a distinct test id where one op has several Refs

    @property
    def id(self) -> str:
        return self.name or self.op


# ---------------------------------------------------------------------------------------
# Values and arrays

BOOL, INTS, UINTS = ("bool",), ("int32", "int64"), ("uint8",)
FLOATS, COMPLEX = ("float32", "float64"), ("complex64", "complex128")
REAL = BOOL + UINTS + INTS + FLOATS
ALL = REAL + COMPLEX
NUMERIC = UINTS + INTS + FLOATS + COMPLEX
INTEGER = BOOL + UINTS + INTS


def _floats(dtype: str, special: bool, lo: float, hi: float, magnitudes: bool = True):
    width = 32 if dtype in ("float32", "complex64") else 64
    big = 1e30 if width == 32 else 1e300
    small = 1e-30 if width == 32 else 1e-300
    parts = [st.integers(int(math.ceil(lo)), int(math.floor(hi))).map(float),  # ties
             st.floats(lo, hi, width=width)]
    if special:
        parts.append(st.sampled_from([0.0, -0.0, math.inf, -math.inf, math.nan] +
                                     ([big, -big, small, -small] if magnitudes else [])))
    return st.one_of(*parts)


def _no_tiny(v: float) -> float:
    return 0.0 if abs(v) < 1e-6 else v


def elements(dtype: str, special: bool = True, lo: float = -4.0, hi: float = 4.0,
             magnitudes: bool = True):
    """Element values of ``dtype``: small integers (ties), uniform floats and, with
    ``special``, nan, +-inf, -0.0 and (with ``magnitudes``) huge and tiny magnitudes."""
    if dtype == "bool":
        return st.booleans()
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return st.integers(max(info.min, int(lo)), min(info.max, int(hi)))
    f = _floats(dtype, special, lo, hi, magnitudes)
    if not special:  # moderate values: no subnormal noise either (linear algebra)
        f = f.map(_no_tiny)
    if dtype.startswith("complex"):
        return st.builds(complex, f, f)
    return f


def arrays(dtypes, shape=None, special=True, lo=-4.0, hi=4.0, dtype=None):
    """A strategy of NumPy arrays of one of ``dtypes`` (or ``dtype``, a strategy of dtype
    names), of ``shape`` (a tuple or a strategy; default: 0 to 3 dimensions of 0 to 4)."""
    shape = SHAPES if shape is None else shape

    @st.composite
    def build(draw):
        d = draw(dtype) if dtype is not None else draw(st.sampled_from(dtypes))
        s = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
        return draw(hnp.arrays(np.dtype(d), s, elements=elements(d, special, lo, hi)))

    return build()


SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
NONEMPTY = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


@st.composite
def unary(draw, dtypes=ALL, special=True, lo=-4.0, hi=4.0, kwargs=None, shape=None):
    x = draw(arrays(dtypes, shape, special, lo, hi))
    kw = draw(kwargs(x)) if kwargs is not None else {}
    return Sample((x,), kw)


@st.composite
def pairs(draw, dtypes=ALL, special=True, lo=-4.0, hi=4.0, same_dtype=False,
          scalars=True, lo2=None, hi2=None, dtypes2=None, scalar_first=True):
    """Two operands: broadcastable shapes (now and then shapes that do not broadcast),
    dtypes of one kind or mixed, and now and then a Python scalar for one of them (the
    second only, without ``scalar_first``: ops with no ``Scalar_Tensor`` overload)."""
    if draw(st.integers(0, 9)) == 0:
        shapes = (draw(SHAPES), draw(SHAPES))
    else:
        shapes = draw(hnp.mutually_broadcastable_shapes(
            num_shapes=2, min_dims=0, max_dims=3, min_side=0, max_side=3)).input_shapes
    d1 = draw(st.sampled_from(dtypes))
    d2 = d1 if same_dtype or draw(st.booleans()) else draw(st.sampled_from(dtypes2 or dtypes))
    lo2 = lo if lo2 is None else lo2
    hi2 = hi if hi2 is None else hi2
    a = draw(hnp.arrays(np.dtype(d1), shapes[0], elements=elements(d1, special, lo, hi)))
    b = draw(hnp.arrays(np.dtype(d2), shapes[1], elements=elements(d2, special, lo2, hi2)))
    if scalars and draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(["bool", "int", "float"]))
        # no huge or tiny scalars: PyTorch would round them to the tensor's dtype first
        value = draw(st.booleans() if kind == "bool" else
                     st.integers(int(lo2), int(hi2)) if kind == "int" else
                     st.one_of(_floats("float64", False, lo2, hi2),
                               st.sampled_from([math.inf, -math.inf, math.nan, -0.0]))
                     if special else _floats("float64", False, lo2, hi2))
        if not scalar_first or draw(st.booleans()):
            return Sample((a, value))
        return Sample((value, b))
    return Sample((a, b))


def _axis_kwargs(single=False, keep=True, none=True, names=("axis", "keepdims")):
    """``kwargs(x)``: an axis of ``x`` (an int, now and then a tuple, None or out of
    range) and keepdims."""
    def kwargs(x):
        @st.composite
        def build(draw):
            n = max(x.ndim, 1)
            choices = [st.integers(-n, n - 1)]
            if not single:
                choices.append(st.lists(st.integers(-n, n - 1), max_size=n, unique_by=lambda
                                        v: v % n).map(tuple))
            if none:
                choices.append(st.none())
            choices.append(st.sampled_from([n, -n - 1]))  # out of range
            axis = draw(st.one_of(*choices))
            kw = {names[0]: axis}
            if keep and draw(st.booleans()):
                kw[names[1]] = True
            return kw
        return build()
    return kwargs


def _torch_axis(kw, names=("dim", "keepdim")):
    out = {}
    if "axis" in kw and kw["axis"] is not None:
        out[names[0]] = kw["axis"]
    if kw.get("keepdims"):
        out[names[1]] = True
    return out


# ---------------------------------------------------------------------------------------
# The table

REFS: list[Ref] = []
#: catalogue ops no Ref calls directly: {op: the reason, naming what covers it}
EXCLUDED: dict[str, str] = {}


def ref(op, md, torch, sample, **kw):
    REFS.append(Ref(op, md, torch, sample, **kw))


def view_ref(op, md, torch, sample, **kw):
    """``ref`` for a view op and for its ``<op>_copy`` (the copying op Functionalize
    rewrites it to), which are called alike; the copy is compared with the PyTorch call
    followed by ``clone`` (a copy, as ``<op>_copy`` makes: the sweep times the same work)."""
    ref(op, md, torch, sample, **kw)
    ref(f"{op}_copy", _fn(f"ops.aten.{op}_copy"), _cloned(torch), sample, **kw)


def _cloned(torch):
    """``torch(lib, ...)`` followed by ``clone`` of its result (each piece of a list)."""
    def call(lib, *a, **k):
        r = torch(lib, *a, **k)
        return type(r)(t.clone() for t in r) if isinstance(r, (tuple, list)) else r.clone()

    return call


def _fn(name):
    """``fn(lib, *args, **kwargs)``: ``lib.<name>(*args, **kwargs)`` (a dotted name)."""
    return lambda lib, *a, **k: _attr(lib, name)(*a, **k)


def _lib_fn(name, torch_name=None, exact_scalars=False):
    """``(md_fn, torch_fn)`` calling ``lib.<name>`` (``torch.<torch_name>``).  PyTorch's
    functions take no Python scalar for some operands (``torch.atan2(x, 1.0)``): scalars
    become 0-d tensors of the dtype PyTorch would promote them to
    (``_wrapped_number``); with ``exact_scalars`` (ops giving bools from their operands'
    truth, which promotion does not change) 0-d tensors holding them exactly."""
    tname = torch_name or name

    def m(lib, *a, **k):
        return getattr(lib, name)(*a, **k)

    def t(lib, *a, **k):
        tensors = [v for v in a if isinstance(v, lib.Tensor)]
        if tensors and any(isinstance(v, (bool, int, float, complex)) for v in a):
            a = tuple((lib.tensor(v) if exact_scalars and not isinstance(v, float) else
                       lib.tensor(v, dtype=lib.float64) if exact_scalars else
                       _wrapped_number(lib, v, tensors[0]))
                      if isinstance(v, (bool, int, float, complex)) else v for v in a)
        return _attr(lib, tname)(*a, **k)

    return m, t


def _wrapped_number(lib, v, beside):
    """A Python scalar as a 0-d tensor that promotes beside the tensor ``beside`` as the
    scalar would (of their ``result_type``: a 0-d tensor of its own default dtype would
    widen a 0-d ``beside``)."""
    return lib.tensor(v, dtype=lib.result_type(beside, v))


def _attr(lib, dotted):
    for part in dotted.split("."):
        lib = getattr(lib, part)
    return lib


# -- elementwise ---------------------------------------------------------------------------

_UNARY = {  # op: (torch name, dtypes, domain (lo, hi), differentiable)
    "abs": ("abs", ALL, None, True), "neg": ("neg", NUMERIC + BOOL, None, True),
    "positive": ("positive", NUMERIC, None, True), "sign": ("sign", ALL, None, False),
    "square": ("square", ALL, None, True), "ceil": ("ceil", ALL, None, False),
    "floor": ("floor", ALL, None, False), "trunc": ("trunc", ALL, None, False),
    "round": ("round", ALL, None, False), "conj": ("conj_physical", ALL, None, True),
    "bitwise_not": ("bitwise_not", ALL, None, False),
    "logical_not": ("logical_not", ALL, None, False),
    "exp": ("exp", ALL, None, True), "expm1": ("expm1", ALL, None, True),
    "log": ("log", ALL, None, True), "log1p": ("log1p", ALL, None, True),
    "log2": ("log2", ALL, None, True), "log10": ("log10", ALL, None, True),
    "sqrt": ("sqrt", ALL, None, True), "sin": ("sin", ALL, None, True),
    "cos": ("cos", ALL, None, True), "tan": ("tan", ALL, None, True),
    "asin": ("asin", ALL, None, True), "acos": ("acos", ALL, None, True),
    "atan": ("atan", ALL, None, True), "sinh": ("sinh", ALL, None, True),
    "cosh": ("cosh", ALL, None, True), "tanh": ("tanh", ALL, None, True),
    "asinh": ("asinh", ALL, None, True), "acosh": ("acosh", ALL, None, True),
    "atanh": ("atanh", ALL, None, True), "reciprocal": ("reciprocal", ALL, None, True),
    "rsqrt": ("rsqrt", ALL, None, True), "sigmoid": ("sigmoid", ALL, None, True),
    "erf": ("erf", ALL, None, True), "isfinite": ("isfinite", ALL, None, False),
    "isinf": ("isinf", ALL, None, False), "isnan": ("isnan", ALL, None, False),
    "signbit": ("signbit", ALL, None, False), "real": ("real", ALL, None, True),
    "imag": ("imag", ALL, None, True), "relu": ("relu", ALL, None, True),
    "silu": ("nn.functional.silu", ALL, None, True),
}

#: NumPy's names of the elementwise ops (their functions are the rows' references)
_NP_NAMES = {"neg": "negative", "conj": "conjugate", "bitwise_not": "invert",
             "asin": "arcsin", "acos": "arccos", "atan": "arctan", "asinh": "arcsinh",
             "acosh": "arccosh", "atanh": "arctanh", "sub": "subtract", "mul": "multiply",
             "div": "true_divide", "pow": "power", "atan2": "arctan2",
             "bitwise_left_shift": "left_shift", "bitwise_right_shift": "right_shift",
             "eq": "equal", "ne": "not_equal", "lt": "less", "le": "less_equal",
             "gt": "greater", "ge": "greater_equal"}


def _np_fn(op):
    fn = getattr(np, _NP_NAMES.get(op, op), None)
    return fn if isinstance(fn, np.ufunc) or op == "round" else None


for _op, (_t, _dtypes, _dom, _grad) in _UNARY.items():
    _m, _tf = _lib_fn(_op, _t)
    ref(_op, _m, _tf, unary(_dtypes), grad=_grad, numpy=_np_fn(_op))

ref("gelu", lambda lib, x, **k: lib.gelu(x, **k),
    lambda lib, x, **k: lib.nn.functional.gelu(x, **k),
    unary(ALL, kwargs=lambda x: st.sampled_from([{}, {"approximate": "tanh"}])))

_BINARY = {  # op: (md name, torch name, dtypes, differentiable, pairs options)
    "add": ("add", "add", ALL, True, {}), "sub": ("sub", "sub", ALL, True, {}),
    "mul": ("mul", "mul", ALL, True, {}), "div": ("div", "div", ALL, True, {}),
    "floor_divide": ("floor_divide", "floor_divide", REAL, False, {}),
    "remainder": ("remainder", "remainder", REAL, True, {}),
    "fmod": ("fmod", "fmod", REAL, True, {"scalar_first": False}),
    "pow": ("pow", "pow", ALL, True, {"lo2": -3, "hi2": 3}),
    "atan2": ("atan2", "atan2", ALL, True, {}), "hypot": ("hypot", "hypot", ALL, True, {}),
    "copysign": ("copysign", "copysign", ALL, True, {}),
    "nextafter": ("nextafter", "nextafter", ALL, False, {}),
    "logaddexp": ("logaddexp", "logaddexp", ALL, True, {}),
    "maximum": ("maximum", "maximum", ALL, True, {}),
    "minimum": ("minimum", "minimum", ALL, True, {}),
    "bitwise_and": ("bitwise_and", "bitwise_and", ALL, False, {}),
    "bitwise_or": ("bitwise_or", "bitwise_or", ALL, False, {}),
    "bitwise_xor": ("bitwise_xor", "bitwise_xor", ALL, False, {}),
    "bitwise_left_shift": ("bitwise_left_shift", "bitwise_left_shift", INTEGER, False,
                           {"lo2": 0, "hi2": 6}),
    "bitwise_right_shift": ("bitwise_right_shift", "bitwise_right_shift", INTEGER, False,
                            {"lo2": 0, "hi2": 6}),
    "eq": ("eq", "eq", ALL, False, {}), "ne": ("ne", "ne", ALL, False, {}),
    "lt": ("lt", "lt", ALL, False, {}), "le": ("le", "le", ALL, False, {}),
    "gt": ("gt", "gt", ALL, False, {}), "ge": ("ge", "ge", ALL, False, {}),
    "logical_and": ("logical_and", "logical_and", ALL, False, {}),
    "logical_or": ("logical_or", "logical_or", ALL, False, {}),
    "logical_xor": ("logical_xor", "logical_xor", ALL, False, {}),
}

for _op, (_mn, _tn, _dtypes, _grad, _opts) in _BINARY.items():
    _m, _tf = _lib_fn(_mn, _tn, exact_scalars=_op.startswith("logical"))
    ref(_op, _m, _tf, pairs(_dtypes, **_opts), grad=_grad, numpy=_np_fn(_op))


def _alpha(draw_alpha):
    @st.composite
    def build(draw):
        s = draw(pairs(ALL, scalars=False))
        return Sample(s.args, {"alpha": draw(draw_alpha)})
    return build()


ref("add", lambda lib, a, b, alpha: lib.add(a, b, alpha=alpha),
    lambda lib, a, b, alpha: lib.add(a, b, alpha=alpha),
    _alpha(st.sampled_from([2, -1, 0.5, True])), name="add-alpha")


# -- reductions ------------------------------------------------------------------------------


def _full_dims(x, kw):
    """PyTorch's spelling of ``axis=None`` with keepdims: every dimension."""
    return tuple(range(x.ndim)) if kw.get("axis") is None else kw["axis"]


def _reduction(op, md_fn, torch_fn, dtypes=ALL, single=False, none=True, keep=True, grad=True,
               special=True, extra=None):
    @st.composite
    def sample(draw):
        x = draw(arrays(dtypes, special=special))
        kw = draw(_axis_kwargs(single=single, keep=keep, none=none)(x))
        if extra is not None:
            kw.update(draw(extra(x)))
        return Sample((x,), kw)

    ref(op, md_fn, torch_fn, sample(), grad=grad)


_reduction("sum", lambda lib, x, **k: lib.sum(x, **k),
           lambda lib, x, **k: lib.sum(x, dim=_full_dims(x, k), keepdim=k.get("keepdims",
                                                                              False)))
def _torch_prod(lib, x, **k):
    if k.get("axis") is None:  # PyTorch's prod takes keepdim with a dim only
        r = lib.prod(x)
        return r.reshape((1,) * x.ndim) if k.get("keepdims") else r
    return lib.prod(x, **_torch_axis(k))


_reduction("prod", lambda lib, x, **k: lib.prod(x, **k), _torch_prod, single=True)
_reduction("mean", lambda lib, x, **k: lib.mean(x, **k),
           lambda lib, x, **k: lib.mean(x, dim=_full_dims(x, k),
                                        keepdim=k.get("keepdims", False)))
for _n in ("var", "std"):
    _reduction(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **k),
               lambda lib, x, _n=_n, **k: getattr(lib, _n)(
                   x, dim=_full_dims(x, k), keepdim=k.get("keepdims", False),
                   correction=k.get("correction", 0)),
               extra=lambda x: st.sampled_from([{}, {"correction": 1}, {"correction": 0.5}]))
for _n, _t in (("max", "amax"), ("min", "amin"), ("amax", "amax"), ("amin", "amin")):
    _reduction(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **k),
               lambda lib, x, _t=_t, **k: getattr(lib, _t)(
                   x, dim=_full_dims(x, k), keepdim=k.get("keepdims", False)),
               dtypes=REAL)
for _n in ("max", "min"):
    _reduction(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(
        x, dim=k["axis"], keepdim=k.get("keepdims", False)),
        lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, k["axis"],
                                                    keepdim=k.get("keepdims", False)),
        dtypes=REAL, single=True, none=False)
    REFS[-1].name = f"{_n}.dim"
for _n in ("argmax", "argmin"):
    _reduction(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **k),
               lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **_torch_axis(k)),
               dtypes=REAL, single=True, grad=False)
for _n in ("all", "any"):
    _reduction(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **k),
               lambda lib, x, _n=_n, **k: getattr(lib, _n)(
                   x, dim=_full_dims(x, k), keepdim=k.get("keepdims", False)), grad=False)
_reduction("count_nonzero", lambda lib, x, **k: lib.count_nonzero(x, **k),
           lambda lib, x, **k: lib.count_nonzero(x, dim=k.get("axis")), keep=False,
           grad=False)
_reduction("logsumexp", lambda lib, x, **k: lib.logsumexp(x, **k),
           lambda lib, x, **k: lib.logsumexp(x, dim=_full_dims(x, k),
                                             keepdim=k.get("keepdims", False)))
_reduction("linalg_vector_norm", lambda lib, x, **k: lib.linalg.vector_norm(x, **k),
           lambda lib, x, **k: lib.linalg.vector_norm(
               x, ord=k.get("ord", 2), dim=k.get("axis"), keepdim=k.get("keepdims", False)),
           extra=lambda x: st.sampled_from([{}, {"ord": 1}, {"ord": math.inf},
                                            {"ord": -math.inf}, {"ord": 0}, {"ord": 3},
                                            {"ord": 0.5}, {"ord": -1}]))


def _cumulative_sample(dtypes=ALL, dtype_kw=True):
    @st.composite
    def sample(draw):
        x = draw(arrays(dtypes))
        n = max(x.ndim, 1)
        kw = {"axis": draw(st.integers(-n, n - 1) | st.sampled_from([n]) |
                           (st.none() if x.ndim <= 1 else st.nothing()))}
        if dtype_kw and draw(st.integers(0, 4)) == 0:
            kw["dtype"] = draw(st.sampled_from(["int64", "float64"]))
        return Sample((x,), kw)
    return sample()


def _torch_cum(name):
    def fn(lib, x, axis=None, dtype=None):
        return getattr(lib, name)(x, dim=0 if axis is None else axis,
                                  dtype=None if dtype is None else getattr(lib, dtype))
    return fn


for _n, _t in (("cumulative_sum", "cumsum"), ("cumulative_prod", "cumprod")):
    ref(_n, lambda lib, x, axis=None, _n=_n, **k: getattr(lib, _n)(x, axis=axis, **k),
        _torch_cum(_t),
        _cumulative_sample())
    ref(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **k, include_initial=True), None,
        _cumulative_sample(dtype_kw=False),
        numpy=lambda x, _n=_n, **k: getattr(np, _n)(x, **k, include_initial=True),
        grad=False, name=f"{_n}-include_initial")


# -- shapes and views ------------------------------------------------------------------------


@st.composite
def _reshape_sample(draw, allow_infer=True):
    x = draw(arrays(ALL))
    n = x.size
    dims = []
    rest = n
    for _ in range(draw(st.integers(0, 3))):
        divisors = [d for d in range(1, 5) if rest % d == 0] if rest else [0, 1, 2]
        d = draw(st.sampled_from(divisors))
        dims.append(d)
        rest = rest // d if d else rest
    if rest != 1 or not dims or draw(st.booleans()):
        dims.append(rest if rest or not n else 1)
    if allow_infer and dims and n and draw(st.booleans()):
        dims[draw(st.integers(0, len(dims) - 1))] = -1
    if draw(st.integers(0, 9)) == 0:
        dims = [n + 1]  # does not fit
    return Sample((x, tuple(dims)))


ref("reshape", lambda lib, x, s: lib.reshape(x, s), lambda lib, x, s: lib.reshape(x, s),
    _reshape_sample())
view_ref("view", lambda lib, x, s: x.view(s), lambda lib, x, s: x.view(s), _reshape_sample())


@st.composite
def _one_axis(draw, dtypes=ALL, special=True, shape=None):
    x = draw(arrays(dtypes, shape, special))
    n = max(x.ndim, 1)
    return x, draw(st.integers(-n, n - 1) | st.sampled_from([n, -n - 1]))


@st.composite
def _flatten_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    a, b = draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1))
    return Sample((x, a, b))


ref("flatten", lambda lib, x, a=0, b=-1: lib.flatten(x, a, b),
    lambda lib, x, a=0, b=-1: lib.flatten(x, a, b), _flatten_sample())


@st.composite
def _squeeze_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                 max_side=2)))
    n = max(x.ndim, 1)
    axis = draw(st.none() | st.integers(-n, n - 1) | st.lists(
        st.integers(-n, n - 1), min_size=1, max_size=2, unique_by=lambda v: v % n).map(tuple))
    return Sample((x,), {} if axis is None else {"axis": axis})


def _torch_squeeze(lib, x, axis=None):
    return lib.squeeze(x) if axis is None else lib.squeeze(x, axis)


view_ref("squeeze", _fn("squeeze"), _torch_squeeze, _squeeze_sample())


@st.composite
def _unsqueeze_sample(draw):
    x = draw(arrays(ALL))
    n = x.ndim + 1
    return Sample((x, draw(st.integers(-n, n - 1) | st.just(n))))


view_ref("unsqueeze", _fn("unsqueeze"), _fn("unsqueeze"), _unsqueeze_sample())


@st.composite
def _expand_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0,
                                                 max_side=2)))
    lead = draw(st.lists(st.integers(0, 3), max_size=2))
    tail = [draw(st.sampled_from([d, -1] if d != 1 else [1, 3, -1])) for d in x.shape]
    if draw(st.integers(0, 9)) == 0 and tail:
        tail[0] = 5  # does not broadcast
    return Sample((x, tuple(lead + tail)))


view_ref("expand", lambda lib, x, s: x.expand(s), lambda lib, x, s: x.expand(s),
         _expand_sample())
view_ref("broadcast_to", _fn("broadcast_to"), _fn("broadcast_to"), _expand_sample().map(
    lambda s: Sample((s.args[0], tuple(abs(d) for d in s.args[1])))))  # no -1 sizes


@st.composite
def _permute_sample(draw):
    x = draw(arrays(ALL))
    perm = draw(st.permutations(range(x.ndim)))
    perm = [p - x.ndim if draw(st.booleans()) else p for p in perm]
    if draw(st.integers(0, 9)) == 0:
        perm = perm[:-1] if perm else [0]
    return Sample((x, tuple(perm)))


view_ref("permute", _fn("permute"), _fn("permute"), _permute_sample())


@st.composite
def _transpose_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    return Sample((x, draw(st.integers(-n, n - 1)), draw(st.integers(-n, n - 1))))


view_ref("transpose", _fn("transpose"), _fn("transpose"), _transpose_sample())
view_ref("t", _fn("t"), _fn("t"), unary(ALL))
view_ref("matrix_transpose", lambda lib, x: x.mT, lambda lib, x: x.mT, unary(ALL))


@st.composite
def _moveaxis_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    k = draw(st.integers(1, n))
    src = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k, unique=True))
    dst = draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k,
                        unique_by=lambda v: v % n))
    return Sample((x, tuple(src), tuple(dst)))


view_ref("moveaxis", _fn("moveaxis"), _fn("movedim"), _moveaxis_sample())


@st.composite
def _flip_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    axis = draw(st.none() | st.lists(st.integers(-n, n - 1), max_size=n,
                                     unique_by=lambda v: v % n).map(tuple))
    return Sample((x,), {"axis": axis})


ref("flip", lambda lib, x, axis=None: lib.flip(x, axis=axis),
    lambda lib, x, axis=None: lib.flip(x, tuple(range(x.ndim)) if axis is None else axis),
    _flip_sample())


@st.composite
def _roll_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    if draw(st.booleans()):
        return Sample((x, draw(st.integers(-5, 5))), {})
    k = draw(st.integers(1, 2))
    axes = draw(st.lists(st.integers(-n, n - 1), min_size=k, max_size=k))
    shifts = draw(st.lists(st.integers(-5, 5), min_size=k, max_size=k))
    return Sample((x, tuple(shifts)), {"axis": tuple(axes)})


ref("roll", lambda lib, x, s, **k: lib.roll(x, s, **k),
    lambda lib, x, s, axis=None: lib.roll(x, s, () if axis is None else axis), _roll_sample())


@st.composite
def _tensor_list(draw, same_dtype=False):
    base = draw(SHAPES)
    k = draw(st.integers(1, 3))
    d1 = draw(st.sampled_from(ALL))
    out = []
    for _ in range(k):
        shape = list(base)
        if shape and draw(st.booleans()):
            i = draw(st.integers(0, len(shape) - 1))
            shape[i] = draw(st.integers(0, 3))
        d = d1 if same_dtype or draw(st.integers(0, 3)) else draw(st.sampled_from(ALL))
        out.append(draw(hnp.arrays(np.dtype(d), tuple(shape), elements=elements(d))))
    n = max(len(base), 1)
    return out, draw(st.integers(-n - 1, n))


@st.composite
def _cat_sample(draw):
    ts, axis = draw(_tensor_list())
    return Sample((ts,), {"axis": axis})


ref("cat", lambda lib, ts, axis=0: lib.cat(ts, axis=axis),
    lambda lib, ts, axis=0: lib.cat(ts, dim=axis), _cat_sample())
ref("stack", lambda lib, ts, axis=0: lib.stack(ts, axis=axis),
    lambda lib, ts, axis=0: lib.stack(ts, dim=axis), _cat_sample())


@st.composite
def _split_sample(draw):
    x, axis = draw(_one_axis())
    size = x.shape[axis] if x.ndim and -x.ndim <= axis < x.ndim else 0
    if draw(st.booleans()):
        s = draw(st.integers(0, 4))
    else:
        parts = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
        if draw(st.integers(0, 4)) and parts:
            parts[-1] = max(size - sum(parts[:-1]), 0)
        s = tuple(parts)
    return Sample((x, s, axis))


view_ref("split", _fn("split"), _fn("split"), _split_sample())


@st.composite
def _chunk_sample(draw):
    x, axis = draw(_one_axis())
    return Sample((x, draw(st.integers(0, 5)), axis))


view_ref("chunk", _fn("chunk"), _fn("chunk"), _chunk_sample())


@st.composite
def _axis_sample(draw):
    x, axis = draw(_one_axis())
    return Sample((x, axis))


view_ref("unbind", _fn("unbind"), _fn("unbind"), _axis_sample())


@st.composite
def _narrow_sample(draw):
    x, axis = draw(_one_axis())
    size = x.shape[axis] if x.ndim and -x.ndim <= axis < x.ndim else 1
    start = draw(st.integers(-size - 1, size + 1))
    return Sample((x, axis, start, draw(st.integers(0, size + 1))))


view_ref("narrow", _fn("narrow"), _fn("narrow"), _narrow_sample())


@st.composite
def _reps_sample(draw):
    x = draw(arrays(ALL))
    return Sample((x, tuple(draw(st.lists(st.integers(0, 3), max_size=4)))))


ref("tile", lambda lib, x, r: lib.tile(x, r), lambda lib, x, r: lib.tile(x, r), _reps_sample())
ref("repeat_tensor", lambda lib, x, r: x.repeat(r), lambda lib, x, r: x.repeat(r),
    _reps_sample())


@st.composite
def _repeat_interleave_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    axis = draw(st.none() | st.integers(-n, n - 1))
    size = x.size if axis is None else (x.shape[axis] if x.ndim else 1)
    if draw(st.booleans()):
        reps = draw(st.integers(0, 3))
    else:
        reps = np.asarray(draw(st.lists(st.integers(0, 3), min_size=size, max_size=size)),
                          dtype=np.int64)
    return Sample((x, reps), {"axis": axis})


ref("repeat_interleave", lambda lib, x, r, axis: lib.repeat_interleave(x, r, axis=axis),
    lambda lib, x, r, axis: lib.repeat_interleave(x, r, dim=axis),
    _repeat_interleave_sample())


@st.composite
def _meshgrid_sample(draw):
    ts = [draw(arrays(ALL, shape=st.sampled_from([(), (0,), (1,), (2,), (3,)]), dtype=st.just(d)))
          for d in [draw(st.sampled_from(ALL))] * draw(st.integers(1, 3))]
    return Sample(tuple(ts), {"indexing": draw(st.sampled_from(["xy", "ij"]))})


ref("meshgrid", lambda lib, *ts, **k: lib.meshgrid(*ts, **k),
    lambda lib, *ts, **k: lib.meshgrid(*ts, **k), _meshgrid_sample())


@st.composite
def _broadcast_arrays_sample(draw):
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=draw(st.integers(1, 3)),
                                                    max_dims=3, max_side=3)).input_shapes
    d = draw(st.sampled_from(ALL))
    return Sample(tuple(draw(hnp.arrays(np.dtype(d), s, elements=elements(d)))
                        for s in shapes))


ref("broadcast_arrays", lambda lib, *ts: lib.broadcast_arrays(*ts),
    lambda lib, *ts: lib.broadcast_tensors(*ts), _broadcast_arrays_sample())


@st.composite
def _tri_sample(draw):
    x = draw(arrays(ALL))
    return Sample((x,), {"k": draw(st.integers(-3, 3))})


ref("tril", lambda lib, x, k: lib.tril(x, k=k), lambda lib, x, k: lib.tril(x, diagonal=k),
    _tri_sample())
ref("triu", lambda lib, x, k: lib.triu(x, k=k), lambda lib, x, k: lib.triu(x, diagonal=k),
    _tri_sample())


@st.composite
def _diff_sample(draw):
    x, axis = draw(_one_axis())
    kw = {"axis": axis, "n": draw(st.integers(0, 3))}
    if x.ndim and -x.ndim <= axis < x.ndim and draw(st.booleans()):
        shape = list(x.shape)
        shape[axis] = draw(st.integers(0, 2))
        kw[draw(st.sampled_from(["prepend", "append"]))] = draw(hnp.arrays(
            x.dtype, tuple(shape), elements=elements(x.dtype.name)))
    return Sample((x,), kw)


ref("diff", lambda lib, x, **k: lib.diff(x, **k),
    lambda lib, x, axis=-1, n=1, **k: lib.diff(x, n=n, dim=axis, **k), _diff_sample())
ref("clone", lambda lib, x: lib.clone(x), lambda lib, x: lib.clone(x), unary(ALL))
view_ref("contiguous", lambda lib, x: x.contiguous(), lambda lib, x: x.contiguous(),
         unary(ALL))


def _dtype_in(lib, d):
    """The dtype named ``d`` (a name, or a dtype of any library) in ``lib``."""
    return getattr(lib, d if isinstance(d, str) else d.name)


@st.composite
def _astype_sample(draw):
    x = draw(arrays(ALL))
    return Sample((x, draw(st.sampled_from(ALL))))


ref("astype", lambda lib, x, d: lib.astype(x, _dtype_in(lib, d)),
    lambda lib, x, d: x.to(_dtype_in(lib, d)), _astype_sample())


@st.composite
def _copy_sample(draw):
    s = draw(pairs(ALL, scalars=False))
    return s


# PyTorch has no derivative for aten::copy: gradients are not compared
ref("copy", lambda lib, a, b: lib.ops.aten.copy(a, b), lambda lib, a, b: lib.ops.aten.copy(a, b),
    _copy_sample(), grad=False)


# -- indexing ---------------------------------------------------------------------------------


@st.composite
def _basic_key(draw, shape):
    """A basic index of ``shape``: ints (in and out of bounds), slices (negative steps
    too), None and an Ellipsis."""
    parts = []
    dims = list(shape)
    for _ in range(draw(st.integers(0, len(dims) + 1))):
        kind = draw(st.sampled_from(["int", "slice", "slice", "none", "ellipsis"]))
        size = dims.pop(0) if dims and kind in ("int", "slice") else 3
        if kind == "int":
            parts.append(draw(st.integers(-size - 1, size)))
        elif kind == "slice":
            b = st.none() | st.integers(-size - 2, size + 2)
            parts.append(slice(draw(b), draw(b), draw(st.none() | st.sampled_from(
                [1, 2, 3, -1, -2]))))
        elif kind == "none":
            parts.append(None)
        elif Ellipsis not in parts:
            parts.append(Ellipsis)
    return parts[0] if len(parts) == 1 and draw(st.booleans()) else tuple(parts)


@st.composite
def _basic_index_sample(draw):
    x = draw(arrays(ALL))
    return Sample((x, draw(_basic_key(x.shape))))


def _getitem(lib, x, key):
    return x[key]


view_ref("basic_index", _getitem, _getitem, _basic_index_sample())


@st.composite
def _advanced_key(draw, shape):
    """An index with integer arrays (and lists), boolean masks, mixed with basic parts."""
    parts = []
    dims = list(shape)
    while dims and draw(st.booleans()) or not parts:
        size = dims.pop(0) if dims else 1
        kind = draw(st.sampled_from(["ints", "list", "mask", "int", "slice"]))
        if kind == "ints":
            parts.append(draw(hnp.arrays(np.int64, draw(st.sampled_from([(), (2,), (0,),
                                                                          (2, 2)])),
                                         elements=st.integers(-size - 1, size))))
        elif kind == "list":
            parts.append(draw(st.lists(st.integers(-size, max(size - 1, 0)), max_size=3)))
        elif kind == "mask":
            parts.append(draw(hnp.arrays(np.bool_, (size,))))
        elif kind == "int":
            parts.append(draw(st.integers(-size, max(size - 1, 0))))
        else:
            parts.append(slice(None, None, draw(st.sampled_from([1, 2]))))
    return parts[0] if len(parts) == 1 else tuple(parts)


@st.composite
def _index_sample(draw):
    x = draw(arrays(ALL, shape=NONEMPTY))
    key = draw(_advanced_key(x.shape))
    return Sample((x, key))


def _md_key(lib, key, device):
    return key


ref("index", _getitem, _getitem, _index_sample())


@st.composite
def _setitem_sample(draw):
    s = draw(_index_sample())
    x, key = s.args
    value = draw(arrays((x.dtype.name,), shape=st.sampled_from([(), (1,)])))
    return Sample((x, key, value))


def _setitem(lib, x, key, value):
    y = lib.clone(x)
    y[key] = value
    return y


def _index_put(lib, x, key, value):
    return lib.ops.aten.index_put(x, key, value)


def _index_put_(lib, x, key, value):
    return lib.ops.aten.index_put_(lib.clone(x), key, value)


ref("index_put", _index_put, _setitem, _setitem_sample())
ref("index_put_", _index_put_, _setitem, _setitem_sample(), grad=False)


@st.composite
def _take_sample(draw):
    x = draw(arrays(ALL, shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=0,
                                                 max_side=4)))
    n = x.ndim
    axis = draw(st.integers(-n, n - 1)) if n > 1 or draw(st.booleans()) else None
    size = x.shape[0 if axis is None else axis]
    # indices in range: out-of-bounds take (JAX clamps) is another issue's
    idx = draw(hnp.arrays(np.int64, (draw(st.integers(0, 4)) if size else 0,),
                          elements=st.integers(0, max(size - 1, 0))))
    return Sample((x, idx), {} if axis is None else {"axis": axis})


ref("take", lambda lib, x, i, **k: lib.take(x, i, **k),
    lambda lib, x, i, axis=0: lib.index_select(x, axis, i), _take_sample())


@st.composite
def _along_sample(draw, torch_gather=False):
    x = draw(arrays(ALL, shape=NONEMPTY))
    n = x.ndim
    axis = draw(st.integers(-n, n - 1))
    shape = [draw(st.integers(0, s if torch_gather else 1)) if i != axis % n else
             draw(st.integers(0, 4)) for i, s in enumerate(x.shape)]
    size = x.shape[axis]
    idx = draw(hnp.arrays(np.int64, tuple(shape), elements=st.integers(
        -size if not torch_gather else -1, size - 1 if draw(st.integers(0, 9)) else size)))
    return Sample((x, idx, axis))


ref("take_along_axis", lambda lib, x, i, axis: lib.take_along_axis(x, i, axis),
    lambda lib, x, i, axis: lib.take_along_dim(x, i, axis), _along_sample())
ref("gather", lambda lib, x, i, a: lib.gather(x, a, i), lambda lib, x, i, a: lib.gather(x, a, i),
    _along_sample(torch_gather=True))


@st.composite
def _index_select_sample(draw):
    x, axis = draw(_one_axis())
    size = x.shape[axis] if x.ndim and -x.ndim <= axis < x.ndim else 1
    idx = draw(hnp.arrays(np.int64, draw(st.sampled_from([(), (0,), (3,)])),
                          elements=st.integers(-size if draw(st.integers(0, 9)) == 0 else 0,
                                               max(size - 1, 0))))
    return Sample((x, axis, idx))


ref("index_select", lambda lib, x, a, i: lib.index_select(x, a, i),
    lambda lib, x, a, i: lib.index_select(x, a, i), _index_select_sample())


@st.composite
def _where_sample(draw):
    s = draw(pairs(ALL))
    shapes = [np.shape(v) for v in s.args]
    cond = draw(hnp.arrays(np.bool_, draw(st.sampled_from(shapes + [()]))))
    return Sample((cond, *s.args))


def _torch_where(lib, c, a, b):
    return lib.where(c, a, b)


ref("where", lambda lib, c, a, b: lib.where(c, a, b), _torch_where, _where_sample())


@st.composite
def _masked_fill_sample(draw):
    x = draw(arrays(ALL))
    mask = draw(hnp.arrays(np.bool_, draw(st.sampled_from([x.shape, x.shape[1:], ()]))))
    value = draw(st.booleans() | st.integers(-3, 3) | _floats("float64", True, -3, 3))
    return Sample((x, mask, value))


ref("masked_fill", lambda lib, x, m, v: lib.masked_fill(x, m, v),
    lambda lib, x, m, v: lib.masked_fill(x, m, v), _masked_fill_sample())
ref("masked_fill_", lambda lib, x, m, v: lib.clone(x).masked_fill_(m, v),
    lambda lib, x, m, v: lib.clone(x).masked_fill_(m, v), _masked_fill_sample(), grad=False)
ref("nonzero", lambda lib, x: lib.nonzero(x), lambda lib, x: lib.nonzero(x, as_tuple=True),
    unary(ALL), grad=False)
ref("argwhere", _fn("argwhere"), _fn("argwhere"), unary(ALL), grad=False)
# the identity a fresh tensor passes through under a dispatch mode (Note [lift_fresh])
ref("lift_fresh", _fn("ops.aten.lift_fresh"), _fn("ops.aten.lift_fresh"), unary(ALL))


@st.composite
def _searchsorted_sample(draw):
    d = draw(st.sampled_from(REAL[1:]))
    seq = np.sort(draw(hnp.arrays(np.dtype(d), (draw(st.integers(0, 5)),),
                                  elements=elements(d))))
    x = draw(hnp.arrays(np.dtype(d), draw(SHAPES), elements=elements(d)))
    return Sample((seq, x), {"side": draw(st.sampled_from(["left", "right"]))})


ref("searchsorted", lambda lib, s, x, side="left": lib.searchsorted(s, x, side=side),
    lambda lib, s, x, side="left": lib.searchsorted(s, x, side=side), _searchsorted_sample(),
    grad=False)


@st.composite
def _sort_sample(draw):
    x, axis = draw(_one_axis())
    return Sample((x,), {"axis": axis, "descending": draw(st.booleans())})


ref("sort", lambda lib, x, **k: lib.sort(x, **k),
    lambda lib, x, axis=-1, descending=False: lib.sort(x, dim=axis, descending=descending,
                                              stable=True).values, _sort_sample())
ref("argsort", lambda lib, x, **k: lib.argsort(x, **k),
    lambda lib, x, axis=-1, descending=False: lib.argsort(x, dim=axis, descending=descending,
                                                 stable=True), _sort_sample(), grad=False)


def _torch_unique(counts=False, inverse=False):
    def fn(lib, x):
        out = lib.unique(x, sorted=True, return_inverse=inverse, return_counts=counts)
        return out
    return fn


ref("unique_values", lambda lib, x: lib.unique_values(x), _torch_unique(), unary(REAL),
    grad=False)
ref("unique_counts", lambda lib, x: lib.unique_counts(x), _torch_unique(counts=True),
    unary(REAL), grad=False)
ref("unique_inverse", lambda lib, x: lib.unique_inverse(x), _torch_unique(inverse=True),
    unary(REAL), grad=False)


def _np_unique_all(x):
    values, index, inverse, counts = np.unique(x.reshape(-1), return_index=True,
                                               return_inverse=True, return_counts=True,
                                               equal_nan=False)
    return values, index, inverse.reshape(x.shape), counts


ref("unique_all", lambda lib, x: lib.unique_all(x), None, unary(REAL), grad=False,
    numpy=_np_unique_all)


@st.composite
def _isin_sample(draw):
    s = draw(pairs(REAL, scalars=False))
    return Sample(s.args, {"invert": draw(st.booleans())})


ref("isin", lambda lib, a, b, invert=False: lib.isin(a, b, invert=invert),
    lambda lib, a, b, invert=False: lib.isin(a, b, invert=invert), _isin_sample(), grad=False,
    numpy=lambda a, b, invert: np.isin(a, b, invert=invert))


# -- linear algebra -------------------------------------------------------------------------

LINALG = FLOATS + COMPLEX


@st.composite
def _matmul_sample(draw, dtypes=ALL, ndims=(0, 1, 2, 3), same=False):
    d1 = draw(st.sampled_from(dtypes))
    d2 = d1 if same or draw(st.booleans()) else draw(st.sampled_from(dtypes))
    na, nb = draw(st.sampled_from(ndims)), draw(st.sampled_from(ndims))
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    if draw(st.integers(0, 9)) == 0:
        k2 = draw(st.integers(0, 3))  # inner sizes that may not agree
    else:
        k2 = k
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=2)
                 ).input_shapes
    sa = () if na == 0 else (k,) if na == 1 else batch[0][:na - 2] + (m, k)
    sb = () if nb == 0 else (k2,) if nb == 1 else batch[1][:nb - 2] + (k2, n)
    a = draw(hnp.arrays(np.dtype(d1), sa, elements=elements(d1, special=False)))
    b = draw(hnp.arrays(np.dtype(d2), sb, elements=elements(d2, special=False)))
    return Sample((a, b))


ref("matmul", lambda lib, a, b: lib.matmul(a, b), lambda lib, a, b: lib.matmul(a, b),
    _matmul_sample())
ref("mm", lambda lib, a, b: lib.mm(a, b), lambda lib, a, b: lib.mm(a, b),
    _matmul_sample(ndims=(1, 2, 3)))
ref("bmm", lambda lib, a, b: lib.bmm(a, b), lambda lib, a, b: lib.bmm(a, b),
    _matmul_sample(ndims=(2, 3)))
ref("dot", lambda lib, a, b: lib.dot(a, b), lambda lib, a, b: lib.dot(a, b),
    _matmul_sample(ndims=(0, 1, 2)))
ref("outer", lambda lib, a, b: lib.outer(a, b), lambda lib, a, b: lib.outer(a, b),
    _matmul_sample(ndims=(0, 1, 2)))


@st.composite
def _addmm_sample(draw):
    """``addmm(self, mat1, mat2, beta=, alpha=)``: one floating dtype, ``self`` of the
    product's shape or broadcasting to it."""
    d = np.dtype(draw(st.sampled_from(FLOATS)))
    m, k, n = (draw(st.integers(0, 3)) for _ in range(3))
    shape = draw(st.sampled_from([(m, n), (n,), (1, n), ()]))
    arrays = [draw(hnp.arrays(d, sh, elements=elements(d.name, special=False)))
              for sh in (shape, (m, k), (k, n))]
    kwargs = {"beta": draw(st.sampled_from([1, 0, 0.5])),
              "alpha": draw(st.sampled_from([1, -2.0]))}
    return Sample(tuple(arrays), kwargs)


ref("addmm", lambda lib, s, a, b, **kw: lib.addmm(s, a, b, **kw),
    lambda lib, s, a, b, **kw: lib.addmm(s, a, b, **kw), _addmm_sample())


@st.composite
def _vecdot_sample(draw):
    s = draw(pairs(ALL, special=False, scalars=False))
    a, b = s.args
    n = max(a.ndim, b.ndim, 1)
    return Sample((a, b), {"axis": draw(st.integers(-n, -1))})


def _torch_vecdot(lib, a, b, axis=-1):
    return lib.linalg.vecdot(a, b, dim=axis)


ref("vecdot", lambda lib, a, b, axis=-1: lib.vecdot(a, b, axis=axis), _torch_vecdot,
    _vecdot_sample())


@st.composite
def _tensordot_sample(draw):
    d = draw(st.sampled_from(FLOATS + COMPLEX + INTS))
    k = draw(st.integers(0, 2))
    inner = tuple(draw(st.integers(0, 3)) for _ in range(k))
    a = draw(hnp.arrays(np.dtype(d), tuple(draw(st.lists(st.integers(0, 3), max_size=2)))
                        + inner, elements=elements(d, special=False)))
    b = draw(hnp.arrays(np.dtype(d), inner + tuple(draw(st.lists(st.integers(0, 3),
                                                                  max_size=2))),
                        elements=elements(d, special=False)))
    return Sample((a, b), {"axes": k})


ref("tensordot", lambda lib, a, b, axes=2: lib.tensordot(a, b, axes=axes),
    lambda lib, a, b, axes=2: lib.tensordot(a, b, dims=axes), _tensordot_sample())


@st.composite
def _einsum_sample(draw):
    eq, shapes = draw(st.sampled_from([
        ("ij,jk->ik", [(2, 3), (3, 2)]), ("ii->i", [(3, 3)]), ("ii", [(2, 2)]),
        ("i,i->", [(3,), (3,)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 1)]),
        ("...i,...i->...", [(2, 3), (3,)]), ("ij->ji", [(0, 2)]), ("i,j->ij", [(2,), (3,)])]))
    d = draw(st.sampled_from(FLOATS + COMPLEX))
    return Sample((eq, [draw(hnp.arrays(np.dtype(d), s, elements=elements(d, special=False)))
                        for s in shapes]))


ref("einsum", lambda lib, eq, ts: lib.einsum(eq, ts),
    lambda lib, eq, ts: lib.einsum(eq, *ts), _einsum_sample())


def _square_matrices(draw, dtypes=LINALG, spd=False, batch=True, n=None):
    d = draw(st.sampled_from(dtypes))
    n = draw(st.integers(0, 3)) if n is None else n
    lead = tuple(draw(st.lists(st.integers(0, 2), max_size=1))) if batch else ()
    a = draw(hnp.arrays(np.dtype(d), lead + (n, n), elements=elements(d, special=False)))
    if spd:
        a = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n, dtype=a.dtype)
    return a


@st.composite
def _square_sample(draw, dtypes=LINALG, spd=False, kwargs=None):
    a = _square_matrices(draw, dtypes, spd)
    return Sample((a,), draw(kwargs) if kwargs is not None else {})


def _linalg_ref(op, name=None, sample=None, torch_name=None, **kw):
    name = name or op.removeprefix("linalg_")
    tname = torch_name or f"linalg.{name}"
    ref(op, lambda lib, *a, _n=name, **k: getattr(lib.linalg, _n)(*a, **k),
        lambda lib, *a, _t=tname, **k: _attr(lib, _t)(*a, **k),
        sample if sample is not None else _square_sample(), **kw)


def _sym_post(outs):
    """eigh's eigenvalues and the matrix they rebuild (eigenvectors have a gauge)."""
    w, v = outs
    return [w, (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))]


def _eig_post(outs):
    return [np.sort(outs[0], axis=-1)]  # eigenvalues in a canonical order


def _svd_post(outs):
    u, s, vh = outs
    return [s, (u[..., :, :s.shape[-1]] * s[..., None, :]) @ vh[..., :s.shape[-1], :]]


def _qr_post(outs):
    q, r = outs
    return [q @ r, np.abs(np.diagonal(r, axis1=-2, axis2=-1))]


@st.composite
def _hermitian_sample(draw):
    a = _square_matrices(draw)
    return Sample(((a + np.conj(np.swapaxes(a, -1, -2))) / 2,))


_linalg_ref("linalg_cholesky", sample=_square_sample(spd=True,
                                                     kwargs=st.sampled_from([{}, {"upper": True}])))
_linalg_ref("linalg_det")
_linalg_ref("linalg_inv")
_linalg_ref("linalg_slogdet")
_linalg_ref("linalg_eigh", sample=_hermitian_sample(), post=_sym_post, grad=False, tol=1e3)
_linalg_ref("linalg_eigvalsh", sample=_hermitian_sample(), tol=1e3)
_linalg_ref("linalg_eig", post=_eig_post, grad=False, tol=1e3)
_linalg_ref("linalg_eigvals", post=_eig_post, grad=False, tol=1e3)
_linalg_ref("linalg_svdvals", tol=1e3)


@st.composite
def _general_matrices(draw, dtypes=LINALG, kwargs=None):
    d = draw(st.sampled_from(dtypes))
    lead = tuple(draw(st.lists(st.integers(0, 2), max_size=1)))
    shape = lead + (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    a = draw(hnp.arrays(np.dtype(d), shape, elements=elements(d, special=False)))
    return Sample((a,), draw(kwargs) if kwargs is not None else {})


_linalg_ref("linalg_svd", sample=_general_matrices(kwargs=st.just({"full_matrices": False})),
            post=_svd_post, grad=False, tol=1e3)
_linalg_ref("linalg_qr", sample=_general_matrices(), post=_qr_post, grad=False, tol=1e3)
_linalg_ref("linalg_pinv", sample=_general_matrices(), tol=1e3, grad=False)
_linalg_ref("linalg_matrix_rank", sample=_general_matrices(), grad=False)
_linalg_ref("linalg_matrix_norm", sample=_general_matrices(kwargs=st.sampled_from(
    [{}, {"ord": 1}, {"ord": -1}, {"ord": math.inf}, {"ord": -math.inf}, {"ord": "nuc"},
     {"ord": 2}, {"ord": -2}, {"keepdims": True}])), tol=1e2)
_linalg_ref("linalg_matrix_power", sample=st.builds(
    lambda s, n: Sample((s.args[0], n)), _square_sample(LINALG + INTS), st.integers(-2, 3)))
_linalg_ref("linalg_diagonal", sample=_general_matrices(ALL, kwargs=st.builds(
    lambda k: {"offset": k}, st.integers(-2, 2))),
    torch_name="diagonal")
REFS[-1].torch = lambda lib, x, offset=0: lib.diagonal(x, offset, -2, -1)
_linalg_ref("linalg_trace", sample=_general_matrices(ALL, kwargs=st.builds(
    lambda k: {"offset": k}, st.integers(-2, 2))))
REFS[-1].torch = lambda lib, x, offset=0: lib.diagonal(x, offset, -2, -1).sum(-1)


@st.composite
def _solve_sample(draw):
    a = _square_matrices(draw, batch=False)
    a = a + (a.shape[-1] + 1) * np.eye(a.shape[-1], dtype=a.dtype)  # invertible
    b = draw(hnp.arrays(a.dtype, draw(st.sampled_from([(a.shape[-1],), (a.shape[-1], 2)])),
                        elements=elements(a.dtype.name, special=False)))
    return Sample((a, b))


_linalg_ref("linalg_solve", sample=_solve_sample())


@st.composite
def _cross_sample(draw):
    d = draw(st.sampled_from(REAL[1:] + COMPLEX))
    size = draw(st.sampled_from([3, 3, 2]))
    lead = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=2, max_side=2)
                ).input_shapes
    # no huge magnitudes: a x a is 0, and 1e30 * 3 - 3 * 1e30 in float32 is rounding noise
    # of either library (PyTorch's -1.5e23); nan and infinities stay
    a = draw(hnp.arrays(np.dtype(d), lead[0] + (size,), elements=elements(d, magnitudes=False)))
    b = draw(hnp.arrays(np.dtype(d), lead[1] + (size,), elements=elements(d, magnitudes=False)))
    return Sample((a, b))


_linalg_ref("linalg_cross", sample=_cross_sample())


# -- FFTs ------------------------------------------------------------------------------------

@st.composite
def _fft_sample(draw, dtypes=FLOATS + COMPLEX):
    x, axis = draw(_one_axis(dtypes, special=False))
    kw = {"axis": axis, "norm": draw(st.sampled_from(["backward", "ortho", "forward"]))}
    if draw(st.booleans()):
        kw["n"] = draw(st.integers(0, 5))
    return Sample((x,), kw)


for _n in ("fft", "ifft", "rfft", "irfft", "hfft", "ihfft"):
    ref(f"fft_{_n}", lambda lib, x, _n=_n, **k: getattr(lib.fft, _n)(x, **k),
        lambda lib, x, _n=_n, axis=-1, **k: getattr(lib.fft, _n)(x, dim=axis, **k),
        _fft_sample(), tol=10)


@st.composite
def _fftn_sample(draw):
    x = draw(arrays(FLOATS + COMPLEX, special=False))
    n = max(x.ndim, 1)
    axes = draw(st.none() | st.lists(st.integers(-n, n - 1), min_size=1, max_size=2,
                                     unique_by=lambda v: v % n).map(tuple))
    kw = {"axes": axes}
    if axes is not None and draw(st.booleans()):
        kw["s"] = tuple(draw(st.integers(1, 4)) for _ in axes)
    return Sample((x,), kw)


for _n in ("fftn", "ifftn", "rfftn", "irfftn"):
    ref(f"fft_{_n}", lambda lib, x, _n=_n, **k: getattr(lib.fft, _n)(x, **k),
        lambda lib, x, _n=_n, axes=None, **k: getattr(lib.fft, _n)(x, dim=axes, **k),
        _fftn_sample(), tol=10)


@st.composite
def _shift_sample(draw):
    x = draw(arrays(ALL))
    n = max(x.ndim, 1)
    return Sample((x,), {"axes": draw(st.none() | st.integers(-n, n - 1))})


for _n in ("fftshift", "ifftshift"):
    ref(f"fft_{_n}", lambda lib, x, _n=_n, **k: getattr(lib.fft, _n)(x, **k),
        lambda lib, x, _n=_n, axes=None: getattr(lib.fft, _n)(x, dim=axes), _shift_sample())

_FREQ = st.builds(lambda n, d: Sample((n,), {"d": d}), st.integers(0, 6),
                  st.sampled_from([1.0, 0.5, 2.0]))
ref("fft_fftfreq", lambda lib, n, d: lib.fft.fftfreq(n, d=d),
    lambda lib, n, d: lib.fft.fftfreq(n, d=d), _FREQ, grad=False)
ref("fft_rfftfreq", lambda lib, n, d: lib.fft.rfftfreq(n, d=d),
    lambda lib, n, d: lib.fft.rfftfreq(n, d=d), _FREQ, grad=False)


# -- nn ---------------------------------------------------------------------------------------


@st.composite
def _dim_sample(draw, dtypes=ALL):
    x, axis = draw(_one_axis(dtypes))
    return Sample((x, axis))


ref("softmax", lambda lib, x, d: lib.softmax(x, d), lambda lib, x, d: lib.softmax(x, d),
    _dim_sample())
ref("log_softmax", lambda lib, x, d: lib.log_softmax(x, d),
    lambda lib, x, d: lib.log_softmax(x, d), _dim_sample())


@st.composite
def _clamp_sample(draw):
    x = draw(arrays(ALL))
    # bounds a bool or unsigned tensor can hold (others are cast: unspecified)
    ints = st.integers(0, 1) if x.dtype.kind == "b" else st.integers(
        0 if x.dtype.kind == "u" else -3, 3)
    bound = st.none() | ints | (_floats("float64", False, -3, 3) if x.dtype.kind in "fc"
                                else st.nothing())
    return Sample((x,), {"min": draw(bound), "max": draw(bound)})


def _torch_clamp(lib, x, min=None, max=None):
    return lib.clamp(x, min, max)


ref("clamp", lambda lib, x, **k: lib.clamp(x, **k), _torch_clamp, _clamp_sample())


@st.composite
def _dropout_sample(draw):
    x = draw(arrays(FLOATS))
    return Sample((x,), draw(st.sampled_from([{"p": 0.0}, {"p": 0.5, "train": False},
                                              {"p": 1.0}, {"p": 1.5}])))


def _torch_dropout(lib, x, p=0.5, train=True):
    return lib.nn.functional.dropout(x, p, training=train)


ref("dropout", lambda lib, x, **k: lib.dropout(x, **k), _torch_dropout, _dropout_sample())


# -- sliding windows (ops/convolution.py) ---------------------------------------------------


@st.composite
def _window_params(draw):
    """kernel_size, dilation, padding, stride: pairs, sometimes out of range (both raise)."""
    def pair(lo, hi):
        return tuple(draw(st.lists(st.integers(lo, hi), min_size=2, max_size=2)))
    return pair(1, 3), pair(1, 2), pair(0, 2) if draw(st.integers(0, 9)) else pair(-1, 0), \
        pair(1, 3) if draw(st.integers(0, 9)) else pair(0, 1)


@st.composite
def _im2col_sample(draw):
    lead = draw(st.sampled_from([(), (1,), (2,)]))
    shape = lead + (draw(st.integers(1, 2)),) + tuple(draw(st.lists(
        st.integers(1, 5), min_size=2, max_size=2)))
    x = draw(arrays(FLOATS + ("int64",), shape=shape))
    return Sample((x, *draw(_window_params())))


@st.composite
def _col2im_sample(draw):
    k, d, p, s = draw(_window_params())
    size = tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=2)))
    blocks = [max(1, (size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // max(s[i], 1) + 1)
              for i in range(2)]
    rows = draw(st.integers(1, 2)) * k[0] * k[1] + draw(st.sampled_from([0, 0, 0, 1]))
    lead = draw(st.sampled_from([(), (1,), (2,)]))
    x = draw(arrays(FLOATS, shape=lead + (rows, blocks[0] * blocks[1])))
    return Sample((x, size, k, d, p, s))


ref("im2col", lambda lib, x, *a: lib.ops.aten.im2col(x, *a),
    lambda lib, x, *a: lib.ops.aten.im2col(x, *a), _im2col_sample())
ref("col2im", lambda lib, x, *a: lib.ops.aten.col2im(x, *a),
    lambda lib, x, *a: lib.ops.aten.col2im(x, *a), _col2im_sample())


def _outputs_in_mask(fn):
    def call(lib, *a):
        return [o for o, m in zip(fn(lib, *a), a[-1]) if m]
    return call


@st.composite
def _convolution_sample(draw):
    spatial, groups = draw(st.integers(1, 2)), draw(st.integers(1, 2))

    def ints(lo, hi):
        return list(draw(st.lists(st.integers(lo, hi), min_size=spatial, max_size=spatial)))

    n, per_group, out_per_group = draw(st.integers(1, 2)), draw(st.integers(1, 2)), \
        draw(st.integers(1, 2))
    x = draw(arrays(FLOATS, shape=(n, per_group * groups, *ints(1, 5)), special=False))
    w = draw(arrays((x.dtype.name,), shape=(out_per_group * groups, per_group, *ints(1, 3)),
                    special=False))
    b = draw(arrays((x.dtype.name,), shape=(w.shape[0],), special=False)) \
        if draw(st.booleans()) else None
    # kernels larger than the padded input sometimes: both raise
    return Sample((x, w, b, ints(1, 2), ints(0, 2), ints(1, 2), False, [0] * spatial, groups))


ref("convolution", lambda lib, *a: lib.ops.aten.convolution(*a),
    lambda lib, *a: lib.ops.aten.convolution(*a), _convolution_sample(), tol=10.0)


@st.composite
def _convolution_backward_sample(draw):
    import torch

    x, w, b, *params = draw(_convolution_sample()).args
    try:
        shape = tuple(torch.ops.aten.convolution(torch.tensor(x), torch.tensor(w), None,
                                                 *params).shape)
    except RuntimeError:
        shape = (1,) * x.ndim
    g = draw(arrays((x.dtype.name,), shape=shape, special=False))
    mask = draw(st.sampled_from([(True, True, True), (True, False, False),
                                 (False, True, True)]))
    return Sample((g, x, w, None if b is None else list(b.shape), *params, mask))


ref("convolution_backward",
    _outputs_in_mask(lambda lib, *a: lib.ops.aten.convolution_backward(*a)),
    _outputs_in_mask(lambda lib, *a: lib.ops.aten.convolution_backward(*a)),
    _convolution_backward_sample(), tol=10.0)


@st.composite
def _max_pool_sample(draw):
    lead = draw(st.sampled_from([(), (1,), (2,)]))
    shape = lead + (draw(st.integers(1, 2)),) + tuple(draw(st.lists(
        st.integers(1, 5), min_size=2, max_size=2)))
    x = draw(arrays(FLOATS + ("int64", "bool"), shape=shape))
    k, d, _, s = draw(_window_params())
    p = tuple(draw(st.integers(0, kk // 2 + (draw(st.integers(0, 9)) == 0))) for kk in k)
    return Sample((x, k, s, p, d, draw(st.booleans())))


ref("max_pool2d_with_indices", lambda lib, x, *a: lib.ops.aten.max_pool2d_with_indices(x, *a),
    lambda lib, x, *a: lib.ops.aten.max_pool2d_with_indices(x, *a), _max_pool_sample())


@st.composite
def _max_pool_backward_sample(draw):
    import torch

    x, *params = draw(_max_pool_sample()).args
    from hypothesis import assume

    try:
        _, indices = torch.ops.aten.max_pool2d_with_indices(torch.tensor(x), *params)
    except RuntimeError:
        indices = torch.zeros((1,) * x.ndim, dtype=torch.int64)
    # a window of padding only gets an index outside the plane, and PyTorch's backward
    # then writes outside it (mdtensor drops that gradient: tests/test_nn_layers.py)
    assume(bool(((indices >= 0) & (indices < x.shape[-1] * x.shape[-2])).all()))
    g = draw(arrays(FLOATS, shape=tuple(indices.shape), special=False))
    return Sample((g, np.asarray(x, dtype=g.dtype), *params, np.asarray(indices)))


ref("max_pool2d_with_indices_backward",
    lambda lib, g, x, *a: lib.ops.aten.max_pool2d_with_indices_backward(g, x, *a),
    lambda lib, g, x, *a: lib.ops.aten.max_pool2d_with_indices_backward(g, x, *a),
    _max_pool_backward_sample())


@st.composite
def _batch_norm_sample(draw):
    # two or more values per channel (F.batch_norm refuses one, as PyTorch's)
    shape = (draw(st.integers(2, 3)),) + tuple(draw(st.lists(st.integers(1, 3), min_size=1,
                                                               max_size=3)))
    x = draw(arrays(FLOATS, shape=shape, special=False))
    affine = draw(st.booleans())
    w = draw(arrays((x.dtype.name,), shape=shape[1:2], special=False)) if affine else None
    b = draw(arrays((x.dtype.name,), shape=shape[1:2], special=False)) if affine else None
    return Sample((x, w, b, True, 0.1, draw(st.sampled_from([1e-5, 1e-3, 0.5]))))


ref("_native_batch_norm_legit",
    lambda lib, *a: lib.ops.aten._native_batch_norm_legit.no_stats(*a),
    lambda lib, *a: lib.ops.aten._native_batch_norm_legit.no_stats(*a), _batch_norm_sample(),
    tol=100.0)  # x * invstd - mean * invstd cancels: float32 rounding of |x| * invstd


@st.composite
def _batch_norm_backward_sample(draw):
    import torch

    x, w, _, _, _, eps = draw(_batch_norm_sample()).args
    try:
        _, mean, invstd = torch.ops.aten._native_batch_norm_legit.no_stats(
            torch.tensor(x), None if w is None else torch.tensor(w), None, True, 0.1, eps)
    except RuntimeError:
        mean = invstd = torch.zeros(x.shape[1], dtype=getattr(torch, x.dtype.name))
    g = draw(arrays((x.dtype.name,), shape=x.shape, special=False))
    mask = draw(st.sampled_from([(True, True, True), (True, False, True), (False, True,
                                                                          False)]))
    return Sample((g, x, w, None, None, mean.numpy(), invstd.numpy(), True, eps, mask))


# The gradients differ on purpose: mdtensor differentiates the op as the function of its
# arguments it computes (the saved statistics are inputs); PyTorch's double backward
# recomputes them from the input (Note [Batch norm kernels] in ops/normalization.py).
ref("native_batch_norm_backward",
    _outputs_in_mask(lambda lib, *a: lib.ops.aten.native_batch_norm_backward(*a)),
    _outputs_in_mask(lambda lib, *a: lib.ops.aten.native_batch_norm_backward(*a)),
    _batch_norm_backward_sample(), grad=False, tol=10.0)


# -- internal ops (the backward ops PyTorch also has) -------------------------------------


@st.composite
def _backward_pair(draw, dim=False):
    # finite gradients and outputs in the ops' range (they are called with softmax's
    # output, in [0, 1]): other values only test the order of the arithmetic
    d = draw(st.sampled_from(FLOATS))
    shape = draw(NONEMPTY)
    g = draw(hnp.arrays(np.dtype(d), shape, elements=elements(d, special=False)))
    y = draw(hnp.arrays(np.dtype(d), shape, elements=elements(d, special=False, lo=0, hi=1)))
    if dim:
        return Sample((g, y, draw(st.integers(-len(shape), len(shape) - 1))))
    return Sample((g, y))


ref("tanh_backward", lambda lib, g, y: lib.ops.aten.tanh_backward(g, y),
    lambda lib, g, y: lib.ops.aten.tanh_backward(g, y), _backward_pair())
ref("sigmoid_backward", lambda lib, g, y: lib.ops.aten.sigmoid_backward(g, y),
    lambda lib, g, y: lib.ops.aten.sigmoid_backward(g, y), _backward_pair())
ref("_softmax_backward_data",
    lambda lib, g, y, d: lib.ops.aten._softmax_backward_data(g, y, d),
    lambda lib, g, y, d: lib.ops.aten._softmax_backward_data(g, y, d, y.dtype),
    _backward_pair(dim=True))
ref("_log_softmax_backward_data",
    lambda lib, g, y, d: lib.ops.aten._log_softmax_backward_data(g, y, d),
    lambda lib, g, y, d: lib.ops.aten._log_softmax_backward_data(g, y, d, y.dtype),
    _backward_pair(dim=True))



@st.composite
def _threshold_backward_sample(draw):
    s = draw(_backward_pair())
    return Sample((*s.args, draw(st.sampled_from([0, 0.0, 0.5, -1]))))


ref("threshold_backward", lambda lib, g, x, t: lib.ops.aten.threshold_backward(g, x, t),
    lambda lib, g, x, t: lib.ops.aten.threshold_backward(g, x, t),
    _threshold_backward_sample())


@st.composite
def _nll_loss_sample(draw):
    d = draw(st.sampled_from(FLOATS))
    n, classes = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    shape = draw(st.sampled_from([(n, classes), (classes,)]))
    x = draw(hnp.arrays(np.dtype(d), shape, elements=elements(d, special=False)))
    ignore = draw(st.sampled_from([-100, 0, 1]))
    target = np.asarray(draw(st.lists(st.integers(0, classes - 1), min_size=n, max_size=n))
                        if len(shape) == 2 else draw(st.integers(0, classes - 1)))
    w = draw(st.none() | hnp.arrays(np.dtype(d), (classes,),
                                    elements=elements(d, special=False, lo=0.5, hi=2)))
    return Sample((x, target, w, draw(st.sampled_from([0, 1, 2])), ignore))


ref("nll_loss_forward",
    lambda lib, *a: lib.ops.aten.nll_loss_forward(*a),
    lambda lib, *a: lib.ops.aten.nll_loss_forward(*a), _nll_loss_sample(), grad=False)


@st.composite
def _nll_loss_backward_sample(draw):
    x, target, w, reduction, ignore = draw(_nll_loss_sample()).args
    shape = target.shape if reduction == 0 else ()
    g = draw(hnp.arrays(x.dtype, shape, elements=elements(x.dtype.name, special=False)))
    return Sample((g, x, target, w, reduction, ignore))


def _nll_loss_backward(lib, g, x, target, w, reduction, ignore):
    # total_weight as the forward computes it, from the same library
    total = lib.ops.aten.nll_loss_forward(x, target, w, reduction, ignore)[1]
    return lib.ops.aten.nll_loss_backward(g, x, target, w, reduction, ignore, total)


ref("nll_loss_backward", _nll_loss_backward, _nll_loss_backward,
    _nll_loss_backward_sample(), grad=False)

@st.composite
def _matmul_backward_sample(draw):
    s = draw(_matmul_sample(dtypes=LINALG, ndims=(1, 2, 3), same=True))
    a, b = s.args
    try:
        out_shape = np.matmul(a, b).shape
    except ValueError:
        out_shape = ()
    g = draw(hnp.arrays(a.dtype, out_shape, elements=elements(a.dtype.name, special=False)))
    return Sample((g, a, b, draw(st.sampled_from([(True, True), (True, False),
                                                  (False, True)]))))


def _outputs_of_mask(outs_fn):
    def fn(lib, g, a, b, mask):
        return [o for o, m in zip(outs_fn(lib, g, a, b, mask), mask) if m]
    return fn


def _torch_matmul_backward(lib, g, a, b, mask):
    """PyTorch's matmul_backward has no CPU kernel: the gradients of matmul itself."""
    a, b = a.detach().requires_grad_(mask[0]), b.detach().requires_grad_(mask[1])
    inputs = [t for t, m in zip((a, b), mask) if m]
    return lib.autograd.grad(lib.matmul(a, b), inputs, g)


ref("matmul_backward",
    _outputs_of_mask(lambda lib, g, a, b, m: lib.ops.aten.matmul_backward(g, a, b, m)),
    _torch_matmul_backward, _matmul_backward_sample(), grad=False)


# -- factories ---------------------------------------------------------------------------------

_DTYPE_NAMES = st.none() | st.sampled_from(ALL)


def _dtype_kw(lib, kw):
    kw = dict(kw)
    if kw.get("dtype") is not None:
        kw["dtype"] = getattr(lib, kw["dtype"])
    else:
        kw.pop("dtype", None)
    return kw


_SHAPE_ARG = st.lists(st.integers(0, 3), max_size=3).map(tuple)
for _n in ("zeros", "ones"):
    ref(_n, lambda lib, s, _n=_n, **k: getattr(lib, _n)(s, **_dtype_kw(lib, k)),
        lambda lib, s, _n=_n, **k: getattr(lib, _n)(s, **_dtype_kw(lib, k)),
        st.builds(lambda s, d: Sample((s,), {"dtype": d}), _SHAPE_ARG, _DTYPE_NAMES),
        grad=False)
ref("empty", lambda lib, s, **k: lib.zeros_like(lib.empty(s, **_dtype_kw(lib, k))),
    lambda lib, s, **k: lib.zeros_like(lib.empty(s, **_dtype_kw(lib, k))),
    st.builds(lambda s, d: Sample((s,), {"dtype": d}), _SHAPE_ARG, _DTYPE_NAMES), grad=False)
_FILL = st.booleans() | st.integers(-3, 3) | _floats("float64", True, -3, 3)
ref("full", lambda lib, s, v, **k: lib.full(s, v, **_dtype_kw(lib, k)),
    lambda lib, s, v, **k: lib.full(s, v, **_dtype_kw(lib, k)),
    st.builds(lambda s, v, d: Sample((s, v), {"dtype": d}), _SHAPE_ARG, _FILL, _DTYPE_NAMES),
    grad=False)
for _n in ("zeros_like", "ones_like"):
    ref(_n, lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **_dtype_kw(lib, k)),
        lambda lib, x, _n=_n, **k: getattr(lib, _n)(x, **_dtype_kw(lib, k)),
        unary(ALL, kwargs=lambda x: st.builds(lambda d: {"dtype": d}, _DTYPE_NAMES)),
        grad=False)
ref("empty_like", lambda lib, x, **k: lib.zeros_like(lib.empty_like(x, **_dtype_kw(lib, k))),
    lambda lib, x, **k: lib.zeros_like(lib.empty_like(x, **_dtype_kw(lib, k))),
    unary(ALL, kwargs=lambda x: st.builds(lambda d: {"dtype": d}, _DTYPE_NAMES)), grad=False)
ref("full_like", lambda lib, x, v, **k: lib.full_like(x, v, **_dtype_kw(lib, k)),
    lambda lib, x, v, **k: lib.full_like(x, v, **_dtype_kw(lib, k)),
    st.builds(lambda s, v, d: Sample((s.args[0], v), {"dtype": d}), unary(ALL), _FILL,
              _DTYPE_NAMES), grad=False)


@st.composite
def _arange_sample(draw):
    num = st.integers(-5, 5) | st.sampled_from([0.5, -1.5, 2.25])
    args = tuple(draw(st.lists(num, min_size=1, max_size=3)))
    if len(args) == 3 and args[2] == 0:
        args = args[:2]
    return Sample(args, {"dtype": draw(st.none() | st.sampled_from(REAL[1:]))})


ref("arange", lambda lib, *a, **k: lib.arange(*a, **_dtype_kw(lib, k)),
    lambda lib, *a, **k: lib.arange(*a, **_dtype_kw(lib, k)), _arange_sample(), grad=False)
ref("linspace", lambda lib, a, b, n, **k: lib.linspace(a, b, n, **_dtype_kw(lib, k)),
    lambda lib, a, b, n, **k: lib.linspace(a, b, n, **_dtype_kw(lib, k)),
    st.builds(lambda a, b, n, d: Sample((a, b, n), {"dtype": d}), st.integers(-3, 3),
              st.integers(-3, 3) | st.just(2.5), st.integers(0, 5),
              st.none() | st.sampled_from(FLOATS + COMPLEX)), grad=False)
ref("eye", lambda lib, n, m=None, **k: lib.eye(n, m, **_dtype_kw(lib, k)), None,
    st.builds(lambda n, m, k, d: Sample((n, m), {"k": k, "dtype": d}), st.integers(0, 4),
              st.none() | st.integers(0, 4), st.integers(-3, 3), _DTYPE_NAMES),
    numpy=lambda n, m=None, k=0, dtype=None: np.eye(n, m, k, dtype=dtype or "float32"),
    grad=False)

EXCLUDED.update({
    **{op: "a sparse layout's op: tests/test_sparse.py compares it with its dense "
           "equivalent and with PyTorch's sparse tensors"
       for op in ("_indices", "_to_dense", "_to_sparse", "_values", "_sparse_sum",
                  "_sparse_sum_backward", "coalesce", "col_indices",
                  "crow_indices", "indices", "is_coalesced", "sparse_coo_tensor",
                  "sparse_csr_tensor", "sparse_mask", "to_dense", "to_sparse", "to_sparse_csr",
                  "values")},
    "to_device_copy": "a transfer between devices (Tensor.to): tests/test_backends.py and "
                      "the cross-backend suite compare it; PyTorch's devices differ",
})

import _reference_ops_kit  # noqa: E402,F401  (the everyday kit's rows)
