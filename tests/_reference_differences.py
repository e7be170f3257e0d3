"""mdtensor's deliberate differences from PyTorch: the one table the differential suite
(``tests/test_differential.py``) reads and ``docs/DIFFERENCES.md`` renders.

Each ``Difference`` says for which ops and which aspect of a call (the dtype, the values,
the shape, whether it raises, the gradient) mdtensor departs from PyTorch, when
(``applies(case)``, on the inputs and both outcomes), and what mdtensor must give instead
(``expect(case)``: NumPy's or the Array API's result, computed here, which the suite then
compares with mdtensor's as it would with PyTorch's).  A mismatch no entry explains fails
the suite.

``python tests/_reference_differences.py`` rewrites ``docs/DIFFERENCES.md`` from this
table; a test fails while the page and the table disagree.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["DIFFERENCES", "Case", "Difference", "render", "weights"]

#: aspects a difference can be about
ASPECTS = ("dtype", "values", "shape", "raises", "gradient")


@dataclass
class Case:
    """One call compared: the op, its inputs (NumPy arrays and Python values) and each
    library's outcome -- a list of NumPy arrays, or the exception it raised."""

    op: str
    args: tuple
    kwargs: dict
    torch_out: object = None
    md_out: object = None
    #: ``rerun(args, kwargs)``: the reference's outcome on other inputs (set by the suite)
    rerun: Callable | None = None
    #: ``rerun_grads(args, kwargs)``: PyTorch's gradients on other inputs (the same loss)
    rerun_grads: Callable | None = None
    #: ``numpy(args, kwargs)``: the op's NumPy counterpart's outcome, where it has one
    numpy: Callable | None = None
    #: the device mdtensor ran on (the suite's device under test)
    device: str = "cpu"
    #: the op's relative tolerance multiplier (``Ref.tol``)
    tol: float = 1.0
    #: the aspect a row's ``expect`` is asked about (its ``aspects`` may be several):
    #: for "gradient", ``torch_out`` and ``md_out`` are the gradients, and so is ``expect``'s
    aspect: str = ""

    @property
    def arrays(self):
        out = [a for a in self.args if isinstance(a, np.ndarray)]
        for a in self.args:
            if isinstance(a, (list, tuple)):
                out += [x for x in a if isinstance(x, np.ndarray)]
        return out + [v for v in self.kwargs.values() if isinstance(v, np.ndarray)]

    @property
    def kinds(self) -> set[str]:
        return {a.dtype.kind for a in self.arrays}

    @property
    def torch_raised(self) -> bool:
        return isinstance(self.torch_out, BaseException)

    @property
    def md_raised(self) -> bool:
        return isinstance(self.md_out, BaseException)


@dataclass
class Difference:
    """One deliberate difference (see the module docstring)."""

    key: str
    ops: tuple[str, ...]
    aspects: tuple[str, ...]
    mdtensor: str  # what mdtensor does
    pytorch: str  # what PyTorch does
    applies: Callable[[Case], bool]
    expect: Callable[[Case], object] | None  # mdtensor's result: arrays, or RAISES
    reference: str  # what ``expect`` computes: "NumPy", "the Array API", ...

    def covers(self, op: str) -> bool:
        return op in self.ops or "*" in self.ops


#: ``expect`` for differences where mdtensor raises and PyTorch does not
RAISES = "raises"


def weights(shape, salt):
    """The weights of an output in the loss whose gradients the suite compares:
    ``sum(weights(out.shape, i) * out)`` over the outputs ``i`` (for a complex output, of
    its real part, and of its imaginary part with ``salt`` ``i + 0.5``)."""
    n = int(np.prod(shape))
    return (np.cos(np.arange(n) * 0.7 + salt) + 1.5).reshape(shape)

DIFFERENCES: list[Difference] = []


def _dims(c: Case):
    """A reduction's ``dim`` (positional or keyword) as NumPy's axis."""
    dim = c.args[1] if len(c.args) > 1 else c.kwargs.get("dim")
    return tuple(dim) if isinstance(dim, (list, tuple)) else dim


def difference(key, ops, aspects, mdtensor, pytorch, applies, expect, reference):
    aspects = (aspects,) if isinstance(aspects, str) else tuple(aspects)
    for aspect in aspects:
        if aspect not in ASPECTS:
            raise ValueError(f"difference {key}: aspect {aspect!r} is not one of {ASPECTS}")
    DIFFERENCES.append(Difference(key, tuple(ops), aspects, mdtensor, pytorch, applies,
                                  expect, reference))


def matching(case: Case, aspect: str) -> list[Difference]:
    """The differences that explain ``aspect`` of ``case``."""
    return [d for d in DIFFERENCES if aspect in d.aspects and d.covers(case.op)
            and d.applies(case)]


# ---------------------------------------------------------------------------------------
# Helpers for the rows


def _category(dtype) -> int:
    """The promotion category of a NumPy dtype: bool and integers, floating, complex."""
    return {"b": 1, "i": 1, "u": 1, "f": 2, "c": 3}[np.dtype(dtype).kind]


def _operands(case):
    """The arrays an op promotes together (``where``'s condition is not one; ``cat`` and
    ``stack`` promote the tensors of their list)."""
    args = case.args[1:] if case.op == "where" else case.args
    if case.op in ("cat", "stack", *STACKING):
        args = case.args[0]
    return [a for a in args if isinstance(a, np.ndarray)]


def _recast(case, dtype, arrays=None):
    """The reference's outcome with the operand arrays (all arrays by default) cast to
    ``dtype``."""
    arrays = _operands(case) if arrays is None else arrays
    ids = {id(a) for a in arrays}
    kind = np.dtype(dtype).kind

    def cast(a):
        if isinstance(a, np.ndarray) and id(a) in ids:
            return a.astype(dtype)
        if isinstance(a, list):
            return [cast(v) for v in a]
        return int(a) if isinstance(a, bool) and kind != "b" else a

    return case.rerun([cast(a) for a in case.args], case.kwargs)


def _refused_dtype(case) -> bool:
    """PyTorch refused an input dtype (its kernel is not built for it)."""
    msg = str(case.torch_out)
    return case.torch_raised and any(m in msg for m in (
        "not implemented for", "not supported", "could not infer output dtype",
        "only support floating point", "Expected a floating point or complex tensor"))


BINARY = ("add", "sub", "mul", "div", "floor_divide", "remainder", "fmod", "pow", "atan2",
          "hypot", "copysign", "nextafter", "logaddexp", "maximum", "minimum", "bitwise_and",
          "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift", "eq",
          "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "where",
          "matmul", "mm", "bmm", "dot", "vecdot", "outer", "tensordot", "linalg_cross",
          "linalg_solve", "cat", "stack", "hstack", "vstack", "dstack", "column_stack")
#: ops that promote the tensors of their list, as ``cat`` does
STACKING = ("hstack", "vstack", "dstack", "column_stack")

# ---------------------------------------------------------------------------------------
# The table

def _complex_nonfinite(case) -> bool:
    """A complex operand or result with an infinite or nan part."""
    vals = [a for a in case.arrays if a.dtype.kind == "c"]
    vals += [v for v in case.args if isinstance(v, complex)]
    for out in (case.md_out, case.torch_out):
        if isinstance(out, list):
            vals += [o for o in out if o is not None and np.asarray(o).dtype.kind == "c"]
    return any(not np.all(np.isfinite(np.asarray(v))) for v in vals)


def _huge(case, limit=1e150) -> bool:
    return any(a.dtype.kind in "fc" and np.any(np.abs(a[np.isfinite(a)]) > limit)
               for a in case.arrays)


def _same_nonfinite(case) -> bool:
    """Both gradients are non-finite exactly where the other is (inf against nan)."""
    try:
        return all(g is not None and w is not None and np.array_equal(
            np.isfinite(g), np.isfinite(w)) for g, w in zip(case.md_out, case.torch_out))
    except TypeError:
        return False


def _numpy_values_if_any(case):
    """NumPy's outcome where the op has a NumPy counterpart; None (not compared) else."""
    return None if case.numpy is None else _numpy_values(case)


def _standard_values(case):
    """NumPy's outcome (elementwise ops; None for others), with the Array API's special
    values where the standard tabulates them for the op (``TABLES`` of
    ops/special_values.py, the standard's tables as data; NumPy misses them for expm1, tanh
    and sign, and mdtensor gives them on every backend: Note [Special values])."""
    from mdtensor.ops.special_values import TABLES

    out = _numpy_values_if_any(case)
    table = TABLES.get(case.op)
    if table is None or not isinstance(out, list) or len(case.args) != 1 or \
            case.args[0].dtype.kind != "c":
        return out
    with np.errstate(all="ignore"):
        r = table(np, lambda xp, z: np.asarray(case.numpy([z], case.kwargs)[0]),
                  case.args[0])
    return [np.asarray(r).astype(out[0].dtype)]


def _not_where_finite_inputs_overflow(case, want):
    """``want`` (a unary elementwise op's expected outputs) with mdtensor's own values where
    a finite input gives a non-finite part: an overflow, whose nan or zero parts each
    library computes its own way (expm1(1e30 + 0j) is inf + nan j in NumPy, inf + 0j in
    XLA) -- neither the standard's tables nor a reference decide them."""
    if not isinstance(want, list) or len(case.args) != 1 or case.md_raised or \
            len(case.md_out) != len(want):
        return want
    z = np.asarray(case.args[0])
    out = []
    for w, got in zip(want, case.md_out):
        w = np.asarray(w)
        if w.shape != got.shape or w.dtype != got.dtype:
            out.append(w)
            continue
        with np.errstate(all="ignore"):
            overflow = np.isfinite(z) & ~np.isfinite(w)
        out.append(np.where(overflow, got, w))
    return out


def _numpy_values(case):
    """NumPy's outcome, with Python ints beside integer arrays cast to their dtype first
    (NumPy refuses one out of their range; mdtensor and PyTorch wrap it: Note [Integers
    out of range] in ops/_promotion.py)."""
    ints = [a.dtype for a in case.arrays if a.dtype.kind in "iu"]
    args = [np.asarray(v).astype(ints[0]) if ints and type(v) is int else v
            for v in case.args]
    return case.numpy(args, case.kwargs)


def _as_md_dtype(case):
    """The reference on the operand arrays cast to the dtype mdtensor computed in."""
    return _recast(case, case.md_out[0].dtype)


UNARY_ANALYTIC = ("abs", "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "sin", "cos",
                  "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
                  "atanh", "reciprocal", "rsqrt", "sigmoid", "square", "silu")

difference(
    "mixed-kinds", BINARY, ("dtype", "values"),
    "two tensors of different kinds (integer, floating, complex) promote by NumPy's rule: "
    "int32 with float32 is float64, int32 with complex64 complex128 (and comparisons "
    "compare in that dtype)",
    "the higher kind's dtype: float32, complex64",
    lambda c: len({_category(a.dtype) for a in _operands(c)}) > 1,
    lambda c: _recast(c, np.result_type(*_operands(c))),
    "PyTorch on the operands cast to NumPy's result_type")
difference(
    "zero-dim-promotion", BINARY, ("dtype", "values"),
    "a 0-d tensor promotes as any tensor does (NumPy 2, the Array API): uint8 with a 0-d "
    "int32 is int32, and complex64 with a 0-d float64 compares in complex128",
    "a 0-d tensor does not widen a dimensioned tensor of its kind (uint8)",
    lambda c: len({a.ndim == 0 for a in _operands(c)}) > 1,
    lambda c: _recast(c, np.result_type(*_operands(c))),
    "PyTorch on the operands cast to NumPy's result_type")
difference(
    "round-of-complex", ("round",), "raises",
    "rounds both parts of a complex number (the Array API)", "refuses complex tensors",
    lambda c: "c" in c.kinds, _numpy_values, "NumPy")
def _floor_of_quotient(case):
    """The Array API's floor_divide where an operand is infinite: the limit floor(a / b)
    (+inf // 2 is +inf, -1 // +inf is -0), NumPy's floor_divide elsewhere."""
    a, b = (np.asarray(v) for v in case.args[:2])
    with np.errstate(all="ignore"):
        q = np.floor_divide(a, b) if a.dtype.kind in "fc" or b.dtype.kind in "fc" else None
        if q is None or not (np.isinf(a).any() or np.isinf(b).any()):
            return _numpy_values(case)
        return [np.where(np.isinf(a) | np.isinf(b), np.floor(np.true_divide(a, b)), q)
                .astype(case.md_out[0].dtype)]


def _out_of_range_integer(case) -> bool:
    """A Python int beside an integer tensor whose dtype cannot hold it."""
    arrays = [a for a in case.args[:2] if isinstance(a, np.ndarray) and a.dtype.kind in "iu"]
    ints = [v for v in case.args[:2] if type(v) is int]
    return any(not np.iinfo(a.dtype).min <= v <= np.iinfo(a.dtype).max
               for a in arrays for v in ints)


def _numpy_comparison(case):
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal}[case.op]
    return [np.asarray(fn(*case.args[:2]))]


def _infinite_float_operand(case) -> bool:
    vals = [np.asarray(v) for v in case.args[:2]]
    return any(v.dtype.kind == "f" and np.isinf(v).any() for v in vals)


difference(
    "floor-divide-by-infinity", ("floor_divide",), "values",
    "an infinite operand gives the Array API's limit floor(a / b): -1 // inf is -0, "
    "inf // 2 is inf (Note [floor_divide of infinities])",
    "Python's: -1 // inf is -1, inf // 2 is nan", _infinite_float_operand, _floor_of_quotient,
    "the Array API's special cases")
difference(
    "remainder-gradient-at-infinity", ("remainder",), "gradient",
    "the gradient of the divisor is -floor(a / b) with floor_divide's limits (-inf for inf "
    "and 1)", "nan there (Python's inf // 1)", _infinite_float_operand, None, "not compared")
difference(
    "complex-nonfinite", ("abs", "sign", "sqrt", "exp", "expm1", "tanh", "log", "log1p",
                          "log2", "log10",
                          "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                          "asinh", "acosh", "atanh", "reciprocal", "square", "add", "sub",
                          "mul", "div", "pow", "prod", "cumulative_prod", "sum",
                          "cumulative_sum", "mean", "matmul", "dot", "vecdot", "outer", "diff",
                          "sigmoid", "silu", "rsqrt", "logsumexp",
                          "tensordot", "mm", "bmm", "einsum"), "values",
    "a complex operand with an infinite or nan part gives the Array API's special values "
    "(C99 Annex G: Note [Special values]) and otherwise NumPy's (where a finite input "
    "overflows, the nan or zero parts are the backend's); for products and reductions, the "
    "order of the complex products",
    "its own (nan parts where C99 gives infinities, or the reverse)",
    _complex_nonfinite, lambda c: _not_where_finite_inputs_overflow(c, _standard_values(c)),
    "NumPy with the standard's special-value tables (elementwise ops; others not compared)")
difference(
    "complex-power-of-zero", ("pow",), "values",
    "0 ** w of complex numbers is NumPy's (1 for w = 0)", "nan",
    lambda c: any(a.dtype.kind == "c" for a in c.arrays) and any(
        np.any(np.asarray(v) == 0) for v in c.args[:1]), _numpy_values, "NumPy")
difference(
    "complex-singular-gradients", UNARY_ANALYTIC + (
        "div", "pow", "linalg_vector_norm", "linalg_matrix_norm", "prod", "cumulative_prod",
        "var", "std", "logsumexp"),
    "gradient",
    "at a complex singular point (log at 0, asin at 1, ...) or with non-finite or huge "
    "(> 1e150) parts, the gradient's infinities and nans fall where its formula puts them",
    "the same points non-finite, with other infinities and nans (or nan where the "
    "formula gives 0)",
    lambda c: any(a.dtype.kind == "c" for a in c.arrays) and (
        _same_nonfinite(c) or _complex_nonfinite(c) or _huge(c)), None, "not compared")
difference(
    "sign-of-nan", ("sign",), "values", "sign(nan) is nan (the Array API, NumPy)", "0",
    lambda c: any(a.dtype.kind == "f" and np.isnan(a).any() for a in c.arrays),
    _numpy_values, "NumPy")
difference(
    "sign-of-complex", ("sign",), "raises",
    "sign(z) = z / |z| (the Array API), 0 at 0", "refuses complex (torch.sgn instead)",
    lambda c: "c" in c.kinds, _numpy_values, "NumPy (the Array API's sign)")
difference(
    "complex-gradients-pytorch-lacks", ("silu", "lift_fresh", "nan_to_num"), "gradient",
    "differentiates silu (x * sigmoid(x)), lift_fresh (the identity) and nan_to_num (the "
    "identity where finite) of complex tensors",
    "refuses: they do not support automatic differentiation for complex outputs",
    lambda c: "does not support automatic differentiation for outputs with complex" in str(
        c.torch_out), None, "not compared")
difference(
    "subtracting-bools", ("sub",), "raises",
    "a bool tensor minus a number computes in the promoted integer dtype",
    "refuses any bool operand of subtraction", _refused_dtype, _as_md_dtype,
    "PyTorch on the bool operands cast to mdtensor's result dtype")
difference(
    "float-functions-of-integers", ("hypot", "logaddexp", "mean", "var", "std", "logsumexp",
                                    "softmax", "log_softmax", "gelu", "silu",
                                    "linalg_vector_norm"), ("raises", "dtype"),
    "integer and bool tensors compute in the default float dtype (float32), as every float "
    "function does (Note [Integer inputs of float functions]), empty ones too",
    "refuses integer and bool tensors (an empty one keeps its dtype in softmax)",
    lambda c: _refused_dtype(c) or (c.kinds <= set("biu") and not c.torch_raised),
    _as_md_dtype, "PyTorch on the operands cast to float32")
difference(
    "integer-negative-powers", ("pow",), "raises",
    "raises for an integer base with a negative integer exponent (NumPy)",
    "computes 1 // x**-n (0 for |x| > 1)",
    lambda c: not c.torch_raised and all(a.dtype.kind in "biu" for a in c.arrays) and any(
        np.any(np.asarray(v) < 0) for v in c.args[1:2]), lambda c: RAISES, "NumPy")
difference(
    "abs-of-bool", ("abs",), "raises", "abs of a bool tensor is the tensor (NumPy, JAX)",
    "refuses bool tensors", _refused_dtype, _numpy_values, "NumPy")
difference(
    "logaddexp-of-complex", ("logaddexp",), "raises",
    "refuses complex tensors (the Array API and NumPy: real floating-point only)",
    "computes log(exp(a) + exp(b)) of complex numbers",
    lambda c: "c" in c.kinds or any(isinstance(v, complex) for v in c.args),
    lambda c: RAISES, "the Array API")
REDUCTIONS = ("sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "all", "any",
              "count_nonzero", "logsumexp", "linalg_vector_norm")


def _each_element_alone(case):
    """A reduction over no axis: the reference reducing each element alone (over a new
    axis of size 1), its integers as mdtensor accumulates them (and as a float function
    takes them: float32, row float-functions-of-integers)."""
    x = case.args[0]
    if x.dtype.kind in "biu" and not case.md_raised and case.md_out[0].dtype.kind == "f":
        x = x.astype(case.md_out[0].dtype)
    kwargs = {k: v for k, v in case.kwargs.items() if k not in ("axis", "keepdims")}
    out = case.rerun([x[..., None], *case.args[1:]], dict(kwargs, axis=-1))
    if _unsigned(case) and case.op in ("sum", "prod") and isinstance(out, list):
        out = [np.asarray(o).astype(np.uint64) for o in out]
    return out


def _unsigned(case) -> bool:
    return any(a.dtype.kind == "u" for a in case.arrays) and case.kwargs.get("dtype") is None


difference(
    "reducing-no-axis", REDUCTIONS, ("shape", "raises"),
    "axis=() reduces no axis: each element alone (the Array API, NumPy)",
    "dim=() reduces every axis (as dim=None)",
    lambda c: c.kwargs.get("axis") == (), _each_element_alone,
    "PyTorch reducing each element over an axis of its own (PyTorch 2.13's logsumexp "
    "raises for dim=())")
difference(
    "squeezing-non-unit-axes", ("squeeze", "squeeze_copy"), "raises",
    "raises for an axis whose size is not 1 (the Array API)",
    "leaves such an axis as it is",
    lambda c: c.kwargs.get("axis") is not None and c.args[0].ndim and any(
        c.args[0].shape[a] != 1 for a in (c.kwargs["axis"] if isinstance(
            c.kwargs["axis"], tuple) else (c.kwargs["axis"],))
        if -c.args[0].ndim <= a < c.args[0].ndim), lambda c: RAISES, "the Array API")


difference(
    "unsigned-accumulation", ("sum", "prod", "cumulative_sum", "cumulative_prod",
                              "linalg_trace"), "dtype",
    "unsigned integers accumulate in uint64 (the Array API)", "in int64", _unsigned,
    lambda c: [np.asarray(o).astype(np.uint64) for o in c.torch_out],
    "PyTorch's values as uint64")
difference(
    "any-all-of-uint8", ("any", "all"), "dtype", "any and all give bool (the Array API)",
    "uint8 for a uint8 tensor", lambda c: c.args[0].dtype == np.uint8,
    lambda c: [np.asarray(o).astype(bool) for o in c.torch_out], "PyTorch's values as bool")
difference(
    "vecdot-of-integers", ("vecdot",), "raises",
    "takes integer tensors (the Array API: numeric dtypes)",
    "refuses all but floating-point and complex tensors",
    lambda c: c.kinds <= set("biu") and c.torch_raised,
    lambda c: [np.sum(np.broadcast_arrays(*c.args[:2])[0] *
                      np.broadcast_arrays(*c.args[:2])[1], axis=c.kwargs.get("axis", -1))
               .astype(np.result_type(*c.args[:2]))], "NumPy")
difference(
    "products-of-mixed-dtypes", ("matmul", "mm", "bmm", "dot", "vecdot", "outer",
                                 "tensordot", "linalg_cross"), "raises",
    "operands of different dtypes promote (NumPy's result_type)",
    "requires one dtype (expected m1 and m2 to have the same dtype)",
    lambda c: len({a.dtype for a in _operands(c)}) > 1 and c.torch_raised,
    lambda c: _recast(c, np.result_type(*_operands(c))),
    "PyTorch on the operands cast to NumPy's result_type")
difference(
    "cross-of-different-ranks", ("linalg_cross",), "raises",
    "stacks of vectors of different ranks broadcast (the Array API), for a negative axis",
    "requires the same number of dimensions",
    lambda c: len({a.ndim for a in _operands(c)}) > 1 and c.torch_raised,
    lambda c: [np.cross(*c.args[:2], axis=c.kwargs.get("axis", -1))
               .astype(np.result_type(*c.args[:2]))], "NumPy")
difference(
    "singular-determinant-gradient", ("linalg_det",), "gradient",
    "the cofactor matrix (Note [Determinants of singular matrices]; "
    "tests/test_autograd_formulas.py gradchecks it)",
    "zeros from its fast path (its create_graph path and its gradcheck give the cofactor)",
    lambda c: bool(np.any(np.linalg.det(c.args[0]) == 0)), None, "not compared")
difference(
    "nanmean-gradient-of-all-nan-slices", ("nanmean",), "gradient",
    "0 across a slice of NaNs only, on every backend (the gradient of its decomposition, "
    "nansum over the count of non-NaN elements, which no backend divides by zero)",
    "NaN across such a slice (nansum's gradient times 1 / 0)",
    lambda c: bool(np.any(np.all(np.isnan(c.args[0]), axis=_dims(c)))), None,
    "not compared")
difference(
    "gelu-of-infinity", ("gelu",), "values",
    "gelu(inf) is inf (its limit; tanh-gelu's too)", "nan (x times the normal CDF, as its "
    "erf form computes it)", lambda c: bool(np.isposinf(c.args[0]).any()),
    lambda c: [np.where(np.isposinf(c.args[0]), c.args[0], np.asarray(c.torch_out[0]))],
    "PyTorch with inf at the infinite inputs")
difference(
    "comparisons-with-out-of-range-integers", ("eq", "ne", "lt", "le", "gt", "ge"), "values",
    "a Python integer outside an integer tensor's range compares by its value (NumPy 2): "
    "-1 > uint8 0 is False", "converts it into the tensor's dtype first (-1 is 255 as uint8)",
    _out_of_range_integer, _numpy_comparison, "NumPy")
def _pad_as_uint8(case):
    """PyTorch's pad of the bool tensor as uint8 (0 and 1), read back as bool."""
    out = case.rerun([case.args[0].astype(np.uint8), *case.args[1:]], case.kwargs)
    return out if isinstance(out, Exception) else [np.asarray(o).astype(bool) for o in out]


def _pad_empties_a_dimension(case) -> bool:
    """A pad whose crops, or whose result, leave a padded dimension with no element."""
    x, pad = case.args[0], case.args[1]
    for i in range(len(pad) // 2):
        n, before, after = x.shape[x.ndim - 1 - i], pad[2 * i], pad[2 * i + 1]
        if n + min(before, 0) + min(after, 0) <= 0 or n + before + after <= 0:
            return True
    return False


difference(
    "pads-that-empty-a-dimension", ("pad",), "raises",
    "a pad whose crops or result leave a padded dimension empty gives an empty result, or "
    "raises naming pad where nothing is left to reflect, replicate or wrap around",
    "raises or returns case by case (input too small, negative dimension, an element of "
    "an empty dimension)", _pad_empties_a_dimension, None, "not compared")
def _circular_pad_beyond_the_kept(case) -> bool:
    """A circular pad, beside a crop, larger than what the crops keep of its dimension."""
    x, pad = case.args[0], case.args[1]
    if len(case.args) < 3 or case.args[2] != "circular":
        return False
    for i in range(len(pad) // 2):
        n, before, after = x.shape[x.ndim - 1 - i], pad[2 * i], pad[2 * i + 1]
        if min(before, after) < 0 and max(before, after) > n + min(before, 0) + min(after, 0):
            return True
    return False


difference(
    "circular-pads-beyond-the-crops", ("pad",), ("raises", "values", "gradient"),
    "raises: a circular pad wraps at most once around what the crops keep of its dimension",
    "checks the pad against the uncropped size: refuses some such pads (some elements of "
    "the input tensor and the written-to tensor refer to a single memory location) and "
    "gives others values read outside the kept elements", _circular_pad_beyond_the_kept,
    lambda c: RAISES, "the rule")
difference(
    "reflect-and-replicate-pads-of-bools", ("pad",), "raises",
    "pads bool tensors in every mode (NumPy)", "has no reflect or replicate pad for bool "
    "tensors", lambda c: "not implemented for 'Bool'" in str(c.torch_out), _pad_as_uint8,
    "PyTorch on the tensor as uint8")
difference(
    "quantile-gradient-of-nan-slices", ("quantile",), "gradient",
    "none for a slice holding a NaN (its quantile is NaN whatever its other values), as "
    "nanmean's", "the last NaN gets the gradient, and a Tensor q NaN", lambda c: bool(
        np.isnan(c.args[0]).any()), None, "not compared")
difference(
    "order-statistics-gradient-at-ties", ("quantile", "kthvalue", "median", "topk"),
    "gradient", "an order statistic of equal values passes its gradient to the first of them "
    "(a stable sort's, as md.sort)", "to one of them its sort picks (not a stable one)",
    lambda c: np.unique(c.args[0]).size < c.args[0].size, None, "not compared")
difference(
    "arange-of-an-empty-range", ("arange",), "raises",
    "an empty range (stop before start for a positive step) gives an empty tensor (the "
    "Array API, NumPy)", "raises: upper bound and lower bound inconsistent with step sign",
    lambda c: "inconsistent with step sign" in str(c.torch_out),
    lambda c: [np.arange(*c.args).astype(c.md_out[0].dtype)], "NumPy")
difference(
    "clip-without-bounds", ("clamp",), "raises",
    "clamp/clip with neither bound returns a copy (the Array API's clip)",
    "raises: at least one of min and max must not be None",
    lambda c: c.kwargs.get("min") is None and c.kwargs.get("max") is None,
    lambda c: [c.args[0]], "the Array API")
difference(
    "matrix-transpose-of-vectors", ("matrix_transpose", "matrix_transpose_copy"), "raises",
    "raises for fewer than 2 dimensions (the Array API)", "returns a 0-d tensor as it is",
    lambda c: c.args[0].ndim < 2, lambda c: RAISES, "the Array API")
difference(
    "dtype-checks-of-empty-tensors", ("*",), "raises",
    "an op refuses a dtype it does not take (Note [Accepted dtypes]), empty tensors too",
    "checks no dtype of an empty tensor in some kernels (softmax, mm, bmm)",
    lambda c: isinstance(c.md_out, TypeError) and not c.torch_raised and any(
        a.size == 0 for a in c.arrays), lambda c: RAISES, "PyTorch's rule for non-empty "
    "tensors")
difference(
    "cat-of-empty-vectors", ("cat", "hstack"), "raises",
    "checks every tensor, empty ones too (the Array API)",
    "skips 1-d empty tensors (a legacy rule), whatever the axis",
    lambda c: any(a.ndim == 1 and a.size == 0 for a in c.args[0]), lambda c: RAISES,
    "the Array API")
difference(
    "negative-step-slices", ("basic_index", "basic_index_copy"), "raises",
    "slices step down as NumPy's (x[::-1])", "refuses a negative step",
    lambda c: "step must be greater than zero" in str(c.torch_out),
    lambda c: [c.args[0][c.args[1]]], "NumPy")
difference(
    "vecdot-of-0d-tensors", ("vecdot",), "raises",
    "needs an axis to contract (the Array API: at least one dimension)",
    "contracts the broadcast 0-d tensors as scalars",
    lambda c: all(a.ndim == 0 for a in c.args[:2]), lambda c: RAISES, "the Array API")
def _reduced_axes(case) -> tuple[int, ...]:
    """The axes a reduction (``axis=``, ``keepdims=``; matrix_norm's last two) reduces."""
    x = case.args[0]
    if case.op == "linalg_matrix_norm":
        return (x.ndim - 2, x.ndim - 1)
    axis = case.kwargs.get("axis")
    if axis is None:
        return tuple(range(x.ndim))
    return tuple(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))) \
        if x.ndim else ()


def _extreme_magnitudes(case) -> bool:
    """A floating input with finite nonzero magnitudes whose squares (or cubes) overflow or
    underflow its dtype."""
    for a in case.arrays:
        if a.dtype.kind in "fc" and a.size:
            m = np.abs(a[np.isfinite(a) & (a != 0)])
            lo, hi = (1e-10, 1e10) if a.dtype in (np.float32, np.complex64) else \
                (1e-100, 1e100)
            if m.size and (m.min() < lo or m.max() > hi):
                return True
    return False


def _scaled(case):
    """PyTorch on the input divided by its largest finite magnitude along the reduced axes
    (times it): norms and standard deviations are homogeneous, f(x) = s f(x / s) and
    f'(x) = f'(x / s), and nothing overflows or underflows in the scaled powers."""
    x = case.args[0]
    axes = _reduced_axes(case)
    s = np.max(np.where(np.isfinite(x), np.abs(x), 0), axis=axes, keepdims=True)
    s = np.where(s == 0, 1, s).astype(np.abs(x).dtype)
    args = [x / s, *case.args[1:]]
    if case.aspect == "gradient":
        return case.rerun_grads(args, case.kwargs)
    out = case.rerun(args, case.kwargs)
    return out if isinstance(out, Exception) else [o * s.reshape(o.shape) for o in out]


difference(
    "no-overflow-in-intermediates", ("linalg_vector_norm", "linalg_matrix_norm", "std"),
    ("values", "gradient"),
    "norms scale by the largest magnitude (Note [Scaled norms]), float32 moments compute in "
    "float64 (Note [Variance in double precision]): no overflow or underflow in the powers "
    "of huge or tiny elements, nor in the gradients",
    "overflows or underflows in |x|^p: vector_norm(float32 [2e30, 3e30]) is inf, that of "
    "float64 [1e-200] is 0 and its gradient 0", _extreme_magnitudes, _scaled,
    "PyTorch on the input divided by its largest magnitude, times it")
difference(
    "nonzero-of-0d", ("nonzero",), "raises",
    "refuses a 0-d tensor (the Array API)", "treats it as a 1-element tensor",
    lambda c: c.args[0].ndim == 0, lambda c: RAISES, "the Array API")
difference(
    "isin-of-bools", ("isin",), "raises", "takes bool tensors (NumPy)", "refuses them",
    lambda c: "b" in c.kinds, _numpy_values, "NumPy")
difference(
    "out-of-bounds-gathers", ("take_along_axis",), "raises",
    "an index out of range raises an IndexError", "reads whatever lies there (no check)",
    lambda c: bool(np.any(c.args[1] >= c.args[0].shape[c.args[2]])) if c.args[0].ndim and
    c.args[1].size else False, lambda c: RAISES, "NumPy")
difference(
    "clip-keeps-the-dtype", ("clamp",), "dtype",
    "the result has the tensor's dtype (the Array API's clip)",
    "promotes the tensor with the bounds (a bool tensor with an int bound is int64)",
    lambda c: True, lambda c: [np.asarray(o).astype(c.args[0].dtype) for o in c.torch_out],
    "PyTorch's values in the tensor's dtype")
difference(
    "integer-results-record-nothing", ("cumulative_sum", "cumulative_prod", "sum", "prod"),
    "gradient", "an integer dtype= result of a float input is not differentiable: no "
    "gradient", "refuses autograd for it (Autograd not support dtype: Long)",
    lambda c: "Autograd not support dtype" in str(c.torch_out), None, "not compared")


def _hermitian_part(case):
    return [None if g is None else (g + np.conj(np.swapaxes(g, -1, -2))) / 2
            for g in case.torch_out]


difference(
    "hermitian-input-gradients", ("linalg_cholesky", "linalg_eigvalsh"), "gradient",
    "the gradient of a function of Hermitian matrices is Hermitian (the derivative within "
    "them: these ops read one triangle)", "not symmetrized", lambda c: True,
    _hermitian_part, "the Hermitian part of PyTorch's gradient")
difference(
    "singular-slogdet-gradient", ("linalg_slogdet",), "gradient",
    "raises: log|det| of a singular matrix is -inf, its gradient does not exist",
    "returns infinities", lambda c: bool(np.any(np.linalg.det(c.args[0]) == 0)),
    lambda c: RAISES, "PyTorch's forward (logabsdet -inf)")
difference(
    "ffts-of-empty-tensors", ("fft_fftn", "fft_ifftn", "fft_rfftn", "fft_irfftn", "fft_fft",
                              "fft_ifft", "fft_rfft", "fft_irfft", "fft_hfft", "fft_ihfft"),
    ("raises", "values"),
    "transforms an empty tensor (zeros where a size n pads it)",
    "its MKL backend raises (Inconsistent configuration parameters)",
    lambda c: c.args[0].size == 0,
    lambda c: [np.zeros(m.shape, m.dtype) for m in c.md_out] if not c.md_raised else RAISES,
    "zeros of the Meta kernel's shape")
difference(
    "diff-of-order-0", ("diff",), "raises",
    "checks the axis also for n=0", "returns the input unchecked for n=0",
    lambda c: c.kwargs.get("n") == 0, lambda c: RAISES, "the Array API")
def _arange_of_floats(case):
    """The rule PyTorch's int8..int32 arange follows: n values counted from the bounds as
    given, start + i * step computed from start and step truncated."""
    start, end, step = (list(case.args) + [1])[:3] if len(case.args) > 1 else \
        (0, case.args[0], 1)
    n = max(0, int(np.ceil((end - start) / step)))
    return [(np.arange(n) * int(step) + int(start)).astype(case.md_out[0].dtype)]


difference(
    "arange-of-float-bounds-in-int64", ("arange",), ("values", "shape", "raises"),
    "an integer dtype with non-integer bounds counts the values from the bounds as given "
    "and computes them from start and step truncated, for every integer dtype",
    "does so for int8 to int32, but its int64 truncates the bounds first "
    "(arange(-1.5, 1.5, dtype=int64) is [-1, 0], with int32 [-1, 0, 1]; a step of 0.5 "
    "becomes 0 and raises)",
    lambda c: c.kwargs.get("dtype") == "int64" and any(isinstance(v, float)
                                                       for v in c.args),
    _arange_of_floats, "PyTorch's rule for int32")
def _subnormal(case) -> bool:
    return any(a.dtype.kind in "fc" and np.any((np.abs(a) > 0) & (np.abs(a) < np.finfo(
        a.dtype).tiny)) for a in case.arrays)


difference(
    "subnormals-on-jax", ("*",), ("values", "gradient"),
    "on the JAX backend, subnormal floats are flushed to zero (XLA's CPU kernels), so "
    "comparisons and results involving them differ", "keeps subnormals",
    lambda c: c.device.startswith("jax") and _subnormal(c), None, "not compared")
difference(
    "complex-pow-at-infinity-on-jax", ("pow",), "values",
    "on the JAX backend, a complex operand with an infinite part gives XLA's power: nan "
    "parts where C99's cpow (NumPy's) has limits ((inf j) ** -1.5 is nan, NumPy's 0)",
    "C99's limits (as NumPy)", lambda c: c.device.startswith("jax") and _complex_nonfinite(c),
    None, "not compared")
difference(
    "bool-operand-gradients", ("logaddexp", "pow"), "gradient",
    "differentiates with respect to the float operand beside a bool scalar",
    "its backward subtracts the bool operand, which it refuses",
    lambda c: "Subtraction, the `-` operator, with a bool tensor" in str(c.torch_out),
    None, "not compared")

def _zero_d_integer_index(case) -> bool:
    key = case.args[1]
    return any(isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu"
               for k in (key if isinstance(key, tuple) else (key,)))


def _numpy_indexing(case):
    """NumPy's ``x[key]`` (``index``), or ``x`` after ``x[key] = value`` (``index_put``)."""
    x, key = case.args[:2]
    if case.op == "index":
        return [x[key]]
    y = x.copy()
    y[key] = case.args[2]
    return [y]


difference(
    "0d-integer-index-arrays", ("index", "index_put", "index_put_"), ("shape", "values"),
    "a 0-d integer tensor in a key is an index array (NumPy): it broadcasts with the other "
    "index arrays, and where they stand apart the indexed dimensions come first",
    "takes a 0-d integer tensor as an int: x[t(0), :, idx] selects, then indexes with idx "
    "in place", _zero_d_integer_index, _numpy_indexing, "NumPy")
difference(
    "searchsorted-with-nan", ("searchsorted",), "values",
    "nan sorts after every number, as md.sort puts it (the Array API asks for the order of "
    "sort; NumPy)", "its binary search compares with nan as false: a nan in the sorted "
    "sequence counts as smaller than every value", lambda c: any(
        a.dtype.kind == "f" and np.isnan(a).any() for a in c.arrays),
    lambda c: [np.searchsorted(c.args[0], c.args[1], side=c.kwargs["side"])],
    "NumPy")
difference(
    "vecdot-contracted-axes", ("vecdot",), "raises",
    "the contracted axes have one size (the Array API, NumPy): they do not broadcast",
    "broadcasts them for operands of 2 or more dimensions (raises for vectors)",
    lambda c: "contracted axis" in str(c.md_out), lambda c: RAISES, "the Array API")


def _leaf_arrays(case):
    """The arrays that are the gradients' inputs, in the suite's order (its ``_leaves``:
    the float64 and complex128 arrays among the arguments, lists flattened in place)."""
    return [t for v in (*case.args, *case.kwargs.values())
            for t in (v if isinstance(v, (list, tuple)) else (v,))
            if isinstance(t, np.ndarray) and t.dtype in (np.float64, np.complex128)]


def _real_parts_of_complex_gradients(case):
    """PyTorch's gradients with the float64 operands made complex128, real parts for them."""
    args = [a.astype(np.complex128) if isinstance(a, np.ndarray) and a.dtype == np.float64
            else a for a in case.args]
    grads = case.rerun_grads(args, case.kwargs)
    if isinstance(grads, Exception):
        return grads
    return [None if g is None else np.real(g) if a.dtype.kind == "f" else g
            for g, a in zip(grads, _leaf_arrays(case))]


difference(
    "gradients-of-mixed-products", ("matmul", "mm", "bmm", "dot", "vecdot", "outer",
                                    "tensordot"), "gradient",
    "a float64 operand beside a complex128 one (products-of-mixed-dtypes) gets the real part "
    "of its gradient", "refuses the product (expected m1 and m2 to have the same dtype)",
    lambda c: {a.dtype.name for a in _operands(c)} == {"float64", "complex128"}
    and "same dtype" in str(c.torch_out),
    _real_parts_of_complex_gradients, "PyTorch with the real operands made complex")
difference(
    "real-inputs-of-complex-results", ("where", "fill"), "gradient",
    "a real operand beside a complex one, or a real value filled into a complex tensor, "
    "gets the real part of its gradient (PyTorch's rule for the other ops)",
    "raises in backward (its formula hands the real operand a complex gradient)",
    lambda c: "input_is_complex == grad_is_complex" in str(c.torch_out),
    _real_parts_of_complex_gradients, "PyTorch with the real operands made complex")


def _degenerate_blocks(a, tol=1e-8):
    """``(U, V)`` spanning the left and right singular vectors of each repeated or zero
    singular value of the matrix ``a`` (a zero one: the whole null spaces)."""
    u, sv, vh = np.linalg.svd(a)
    top = max(sv.max(initial=0.0), 1.0)
    blocks, i = [], 0
    while i < sv.size:
        j = i + 1
        while j < sv.size and abs(sv[j] - sv[i]) <= tol * top:
            j += 1
        if sv[i] <= tol * top:
            blocks.append((u[:, i:], np.conj(vh[i:, :]).T))
            break
        if j - i > 1:
            blocks.append((u[:, i:j], np.conj(vh[i:j, :]).T))
        i = j
    return blocks


def _gauge_free_svd_gradient(case):
    """PyTorch's gradient of the singular values, but mdtensor's in the blocks of a repeated
    or zero singular value: there the singular vectors, and so the gradient U diag(g) V^H
    (a subgradient at zero), depend on the SVD routine's choice of basis."""
    a = case.args[0]
    want, got = np.array(case.torch_out[0]), case.md_out[0]
    flat = a.reshape(-1, *a.shape[-2:])
    fw, fg = want.reshape(flat.shape), got.reshape(flat.shape)
    for k in range(flat.shape[0]):
        for u, v in _degenerate_blocks(flat[k]):
            pu, pv = u @ np.conj(u).T, v @ np.conj(v).T
            fw[k] = fw[k] + pu @ (fg[k] - fw[k]) @ pv
    return [want]


difference(
    "degenerate-singular-value-gradients", ("linalg_svdvals",), "gradient",
    "at a repeated or zero singular value, the gradient within its singular subspaces is "
    "that of NumPy's SVD's basis", "that of its own SVD's basis (both are subgradients: the "
    "singular vectors are not unique there)",
    lambda c: any(_degenerate_blocks(m) for m in c.args[0].reshape(
        -1, *c.args[0].shape[-2:])) if c.args[0].size else False, _gauge_free_svd_gradient,
    "PyTorch's gradient outside those subspaces")


def _products_of_the_others(case):
    """The gradient of prod as the weights times the product of the other elements of each
    reduced slice, multiplied out (no division)."""
    x = case.args[0]
    axes = _reduced_axes(case)
    others = np.empty_like(x)
    for idx in np.ndindex(x.shape):
        y = x.copy()
        y[idx] = 1
        p = np.prod(y, axis=axes, keepdims=True)
        others[idx] = p[tuple(0 if d in axes else i for d, i in enumerate(idx))]
    w = weights(tuple(n for d, n in enumerate(x.shape) if d not in axes), 0)
    return [others * np.expand_dims(w, axes)]


difference(
    "prod-gradient-of-non-finite-elements", ("prod",), "gradient",
    "the product of the other elements, also beside an infinity or nan (Note [Products of "
    "the others]): prod([inf, 2]) has gradient [2, inf]",
    "out / x where no element is 0 (nan at an infinite x: [nan, inf]), zeros for a whole "
    "tensor with two zeros", lambda c: any(a.dtype.kind == "f" and not np.isfinite(a).all()
                                           for a in c.arrays),
    _products_of_the_others, "the products of the others, multiplied out in NumPy")

def _infinite_first_operand(case) -> bool:
    a = case.args[0]
    if isinstance(a, float):
        return math.isinf(a)
    return isinstance(a, np.ndarray) and a.dtype.kind == "f" and bool(np.isinf(a).any())


def _infinities_as_ones(case):
    """PyTorch's gradients with the first operand's infinities replaced by +-1 (copysign's
    gradient, sign(a) sign(copysign(a, b)), does not depend on |a|)."""
    a = case.args[0]
    a = math.copysign(1.0, a) if isinstance(a, float) else np.where(np.isinf(a), np.sign(a), a)
    return case.rerun_grads([a, *case.args[1:]], case.kwargs)


difference(
    "copysign-gradient-at-infinity", ("copysign",), "gradient",
    "sign(a) sign(copysign(a, b)) times the gradient, an infinite a too",
    "copysign(a, b) / a times the gradient: nan at an infinite a", _infinite_first_operand,
    _infinities_as_ones, "PyTorch with the infinities of the first operand replaced by +-1")



def _src_larger_than_index(case) -> bool:
    src, index = case.args[3], case.args[2]
    return (isinstance(src, np.ndarray) and isinstance(index, np.ndarray)
            and src.shape != index.shape)


def _src_cut_to_index(case):
    """PyTorch's gradients with src cut to the index's shape, the src gradient padded with
    zeros back to src's shape (the elements no index reaches do not change the output)."""
    x, dim, index, src, *rest = case.args
    cut = src[tuple(slice(0, k) for k in index.shape)]
    grads = case.rerun_grads([x, dim, index, cut, *rest], case.kwargs)
    if isinstance(grads, Exception) or grads[-1].shape == src.shape:
        return grads
    padded = np.zeros(src.shape, dtype=grads[-1].dtype)
    padded[tuple(slice(0, k) for k in index.shape)] = grads[-1]
    return [*grads[:-1], padded]


difference(
    "scatter-src-larger-than-index", ("scatter", "scatter_add", "scatter_reduce"),
    "gradient",
    "the gradient of a src larger than the index: g gathered at the written positions, "
    "zeros for the elements no index reaches",
    "refuses it in backward (ScatterBackward0 returned an invalid gradient)",
    _src_larger_than_index, _src_cut_to_index,
    "PyTorch with src cut to the index's shape, the gradient padded with zeros")

def _complex_nonfinite_source(case) -> bool:
    src = case.args[3]
    return (isinstance(src, np.ndarray) and src.dtype.kind == "c"
            and not bool(np.isfinite(src).all()))


def _index_add_in_numpy(case):
    x, dim, index, src = case.args
    alpha = case.kwargs.get("alpha", 1)
    out = np.array(x, copy=True).reshape(x.shape or (1,))
    s = np.asarray(src).reshape(np.shape(src) or (1,))
    d = dim % out.ndim
    for i, k in enumerate(np.asarray(index).reshape(-1)):
        part = np.take(s, [i], axis=d)
        out[(slice(None),) * d + (slice(k, k + 1),)] += part if alpha == 1 else part * alpha
    return [out.reshape(x.shape)]


difference(
    "index-add-alpha-one", ("index_add",), "values",
    "adds the source as it is when alpha is 1: 0 + (0+inf j) is 0+inf j",
    "multiplies the source by alpha, 1 too: (0+inf j) * 1 is nan+inf j",
    _complex_nonfinite_source, _index_add_in_numpy, "NumPy, adding source (times alpha)")

def _dim_out_of_range_of_empty(case) -> bool:
    x, dim = case.args[0], case.args[1]
    n = max(x.ndim, 1)
    return x.size == 0 and not -n <= dim < n


difference(
    "running-extremes-of-empty-tensors", ("cummax", "cummin"), "raises",
    "checks the dimension of an empty tensor too: cummax(empty, 1) of a 1-d tensor raises",
    "returns the empty tensor for any dimension", _dim_out_of_range_of_empty,
    lambda c: RAISES, "every other op's dimension check")

def _near_a_pole(case) -> bool:
    """An input on a negative integer, or (float64) within 1e-6 of a non-positive integer:
    where PyTorch's reflections lose their relative accuracy (Note [Gamma functions without
    loops])."""
    x = case.args[-1]
    if not isinstance(x, np.ndarray) or x.dtype.kind not in "iuf":
        return False
    with np.errstate(all="ignore"):
        d = np.abs(x - np.round(x))
        near = (d > 0) & (d < 1e-6) if x.dtype == np.float64 else np.zeros(x.shape, bool)
        return bool(np.any((x < 0.5) & near) or np.any((x < 0) & (d == 0)))


def _mpmath_psi(case):
    """The op's values (or gradients) by mpmath: ``log|Gamma|`` or the polygamma function
    of the order the op (or its gradient) computes; on the poles, +inf for the odd orders
    (PyTorch's trigamma gives a huge finite number there), PyTorch's value otherwise."""
    import mpmath

    x = case.args[-1]
    order = {"lgamma": -1, "digamma": 0}.get(case.op, case.args[0] if len(case.args) > 1
                                             else 0)
    order += case.aspect == "gradient"

    def f(v):
        if not math.isfinite(v) or v == 0:
            return math.nan  # PyTorch's
        if v < 0 and v == round(v):
            return math.inf if order % 2 and order > 0 else math.nan
        if order < 0:
            return float(mpmath.log(abs(mpmath.gamma(v))))
        return float(mpmath.psi(order, v))

    want = np.vectorize(f, otypes=[np.float64])(x).reshape(x.shape)
    torch_out = case.torch_out[-1] if case.aspect == "gradient" else case.torch_out[0]
    if case.aspect == "gradient":
        want = want * weights(x.shape, 0)
    out = np.where(np.isnan(want), torch_out, want).astype(torch_out.dtype)
    return [*case.torch_out[:-1], out] if case.aspect == "gradient" else [out]


difference(
    "gamma-functions-near-poles", ("digamma", "lgamma", "polygamma"), ("values", "gradient"),
    "reflects with sin/tan of pi (x - round(x)), which is exact: digamma, trigamma and the "
    "gradients that use them stay accurate near the poles (the non-positive integers), and "
    "trigamma is +inf on them",
    "takes tan of pi times the fractional part and sin of pi x: digamma(-2 + 4e-16) is 4% "
    "off, trigamma(-1) is 1.6e33", _near_a_pole, _mpmath_psi,
    "mpmath's log-gamma and polygamma (PyTorch's value at 0 and where it is not finite)")


def _gelsy_rank_differs(case) -> bool:
    """PyTorch's default driver (gelsy) found another rank than the SVD does."""
    if case.torch_raised or case.md_raised or case.kwargs.get("driver") not in (None, "gelsy"):
        return False
    return not np.array_equal(case.torch_out[2], case.md_out[2])


difference(
    "least-squares-by-the-svd", ("linalg_lstsq",), "values",
    "computes through the SVD (LAPACK's gelsd algorithm, Note [Least squares through the "
    "SVD]): the rank and minimum-norm solution of lstsq([[0, 1]], [[1]]) are 1 and [0, 1]",
    "the default CPU driver gelsy can find another rank, and then another solution: rank 0 "
    "and [0, 0] there", _gelsy_rank_differs, _numpy_values, "NumPy's lstsq (gelsd)")


difference(
    "nan-in-the-largest-distance", ("cdist",), "values",
    "a NaN difference (a NaN coordinate, inf - inf) makes the p = inf distance NaN, as for "
    "every other p (and as linalg.vector_norm's)",
    "skips NaN differences when p = inf: cdist([[nan]], [[0]], inf) is 0",
    lambda c: c.kwargs.get("p") == math.inf and any(
        not np.isfinite(a).all() for a in c.arrays if a.dtype.kind == "f"),
    _numpy_values, "NumPy's max")


def _histc_range_is_a_point(case) -> bool:
    """histc's range, taken from the data and widened by 1 on each side, is still one
    point (the data are one value too large for +-1 to change it)."""
    x = case.args[0]
    lo, hi = float(case.kwargs.get("min", 0)), float(case.kwargs.get("max", 0))
    if lo == hi and x.size and x.dtype.kind == "f" and not np.isnan(x).any():
        lo, hi = float(x.min()), float(x.max())
    return lo == hi and math.isfinite(lo) and lo - 1 == lo


difference(
    "histc-of-a-point-range", ("histc",), "raises",
    "raises where the range stays one point when widened (histc of [1e30]): max must be larger "
    "than min", "divides by the empty range and puts the elements in some bin",
    _histc_range_is_a_point, lambda c: RAISES, "PyTorch's own check of the range")


# ---------------------------------------------------------------------------------------
# Rendering

_HEADER = """# Deliberate differences from PyTorch

Where mdtensor's result differs from PyTorch's on purpose. This page is generated from the
table in `tests/_reference_differences.py` (`python tests/_reference_differences.py`), the
one the differential suite (`tests/test_differential.py`) reads: every op of the catalogue
is called with hypothesis-generated inputs in mdtensor and in PyTorch 2.13, and values,
dtypes, shapes, errors and float64 gradients must agree unless a row below explains the
mismatch -- and then mdtensor's result is compared with the reference the row names
instead. Conventions that hold everywhere (error types: mdtensor raises `TypeError`,
`ValueError` or `IndexError` naming the op where PyTorch raises `RuntimeError`; reduction
arguments are `axis`/`keepdims`) are in `docs/ARCHITECTURE.md`.

| key | ops | aspect | mdtensor | PyTorch | checked against |
|---|---|---|---|---|---|
"""


def render() -> str:
    rows = []
    for d in DIFFERENCES:
        ops = ", ".join(f"`{o}`" for o in d.ops) if "*" not in d.ops else "every op"
        rows.append(f"| {d.key} | {ops} | {', '.join(d.aspects)} | {d.mdtensor} | "
                    f"{d.pytorch} | {d.reference} |")
    return _HEADER + "\n".join(rows) + "\n"


DOC = Path(__file__).resolve().parent.parent / "docs" / "DIFFERENCES.md"

if __name__ == "__main__":
    DOC.write_text(render())
    sys.stdout.write(f"wrote {DOC}\n")
