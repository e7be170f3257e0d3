"""The Array API's special values on every backend (Note [Special values] in
ops/special_values.py).

CI cannot fetch the official suite (data-apis/array-api-tests), so these tests hold every
backend to the standard's special cases themselves: hypothesis draws arguments satisfying
the rows of ``special_values.TABLES`` (the standard's tables of complex functions) and
checks each backend's result, functional, ``out=`` and in-place, against the row; the
symmetries the standard requires are checked on arbitrary arguments, each backend's
results against the CPU backend's, and the sign of zero results of ``sign``, ``%``,
``//`` and ``fmod`` against their rules.  On the CPU the complex functions are NumPy's
(glibc's), computed without the tables (but for ``expm1`` and ``tanh``), so there the rows
are checked against values they did not produce.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import backend_params, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st
from mdtensor.ops import special_values

import mdtensor as md

DEVICES = backend_params("cpu", "loopback", "jax")
_INF, _NAN = math.inf, math.nan
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's invalid/divide

# -- the standard's conditions, on Python floats, and arguments that satisfy them -------

_HOLDS = {
    "+0": lambda v: v == 0 and math.copysign(1, v) > 0,
    "-0": lambda v: v == 0 and math.copysign(1, v) < 0,
    "±0": lambda v: v == 0,
    "+inf": lambda v: v == _INF,
    "-inf": lambda v: v == -_INF,
    "±inf": math.isinf,
    "NaN": math.isnan,
    "finite": math.isfinite,
    "nonzero finite": lambda v: math.isfinite(v) and v != 0,
    "positive finite": lambda v: math.isfinite(v) and v > 0,
    "nonzero": lambda v: v != 0,  # NaN included: "not equal to 0"
    "nonzero number": lambda v: v != 0 and not math.isnan(v),
    "1": lambda v: v == 1,
    "-1": lambda v: v == -1,
    "any": lambda v: True,
}
# No subnormals: XLA on CPU flushes them to zero (a property of the platform).
_FINITE = st.floats(allow_nan=False, allow_infinity=False, width=32, allow_subnormal=False)
_SPECIAL = st.sampled_from([0.0, -0.0, _INF, -_INF, _NAN])
_DRAW = {
    "+0": st.just(0.0),
    "-0": st.just(-0.0),
    "±0": st.sampled_from([0.0, -0.0]),
    "+inf": st.just(_INF),
    "-inf": st.just(-_INF),
    "±inf": st.sampled_from([_INF, -_INF]),
    "NaN": st.just(_NAN),
    "finite": _FINITE,
    "nonzero finite": _FINITE.filter(bool),
    "positive finite": _FINITE.filter(lambda v: v > 0),
    "nonzero": _FINITE.filter(bool) | st.sampled_from([_INF, -_INF, _NAN]),
    "nonzero number": _FINITE.filter(bool) | st.sampled_from([_INF, -_INF]),
    "1": st.just(1.0),
    "-1": st.just(-1.0),
    "any": _FINITE | _SPECIAL,
}
_N = 12  # arguments per example (one shape: JAX compiles once per shape)


def _row_of(table, a: float, b: float):
    """The first row of ``table`` whose conditions ``a + b j`` satisfies (or None)."""
    return next((row for row in table.rows if _HOLDS[row[0]](a) and _HOLDS[row[1]](b)),
                None)


def _row_value(row, a: float, b: float):
    value = row[2]
    if isinstance(value, special_values.Cis):  # scale * cis(b) + shift
        re = value.scale * math.cos(b)
        if value.shift:
            re += value.shift
        return complex(re, value.scale * math.sin(b))
    if isinstance(value, tuple):
        return complex(*value)
    if value in ("abs(a)", "abs(b)"):
        return abs(a if value == "abs(a)" else b)
    return value


def _expected(table, a: float, b: float):
    """The standard's value of ``a + b j`` and the parts whose sign it leaves open, or
    None: the rows describe the quadrant ``b >= +0`` (and ``a >= +0`` for odd and even
    functions), the symmetries the rest (``sqrt(NaN - inf j)`` is ``conj(sqrt(NaN + inf
    j))``, ``+inf - inf j``)."""
    odd_even = "odd" in table.symmetry or "even" in table.symmetry
    flip = odd_even and math.copysign(1, a) < 0
    if flip:
        a, b = -a, -b
    conj = "conj" in table.symmetry and math.copysign(1, b) < 0
    if conj:
        b = -b
    row = _row_of(table, a, b)
    if row is None:
        return None
    value = _row_value(row, a, b)
    if conj:
        value = value.conjugate()
    if flip and "odd" in table.symmetry:
        value = -value
    return value, row[3] if len(row) > 3 else ""


def _part_agrees(got: float, want: float, sign_given: bool, rtol: float) -> bool:
    if math.isnan(want):
        return math.isnan(got)
    if want == 0 or math.isinf(want):
        if not sign_given:
            return abs(got) == abs(want)
        return got == want and math.copysign(1, got) == math.copysign(1, want)
    return got == pytest.approx(want, rel=rtol)


def _agrees(got, want, unspecified: str = "", rtol: float = 1e-12) -> bool:
    got, want = complex(got), complex(want)
    return (_part_agrees(got.real, want.real, unspecified not in ("re", "both"), rtol)
            and _part_agrees(got.imag, want.imag, unspecified not in ("im", "both"), rtol))


def _outputs(name: str, z):
    """``name`` of ``z`` as a function, with ``out=``, and in place (where it has one)."""
    fn = getattr(md, name)
    r = fn(z)
    outs = [r, fn(z, out=md.empty_like(r))]
    if name != "abs":  # abs of complex is real: its in-place form would keep complex
        outs.append(getattr(z.clone(), name + "_")())
    return outs


# ---------------------------------------------------------------------------------------
# Complex functions: the standard's tables


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", sorted(special_values.TABLES))
@settings(max_examples=12, deadline=None)
@given(data=st.data())
def test_rows_of_the_standards_tables(name, dtype, device, data):
    table = special_values.TABLES[name]
    rows = data.draw(st.lists(st.sampled_from(table.rows), min_size=_N, max_size=_N))
    parts = [(data.draw(_DRAW[row[0]]), data.draw(_DRAW[row[1]])) for row in rows]
    z = md.asarray([complex(a, b) for a, b in parts], dtype=getattr(md, dtype),
                   device=device)
    rtol = 1e-6 if dtype == "complex64" else 1e-12
    for out in _outputs(name, z):
        assert out.device.type == device
        for (a, b), got in zip(parts, out.tolist()):
            # an earlier row may apply (the first one wins), or a symmetric one
            want, unspecified = _expected(table, a, b)
            assert _agrees(got, want, unspecified, rtol), (
                f"{name}({complex(a, b)}) on {device} [{dtype}] is {got}; the standard "
                f"says {want}")


_PARTS = [0.0, -0.0, _INF, -_INF, _NAN, 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 2.0, -2.0]


def _grid(dtype="complex128", device="cpu"):
    values = [complex(a, b) for a in _PARTS for b in _PARTS]
    return md.asarray(values, dtype=getattr(md, dtype), device=device), values


def _same_up_to_nan_neighbours(x: complex, y: complex) -> bool:
    """Equal (zeros with their signs, NaN as NaN), except that a part beside a NaN part
    is compared without its sign (the standard leaves those open)."""
    x, y = complex(x), complex(y)
    nan = math.isnan(x.real) or math.isnan(x.imag)
    return (_part_agrees(x.real, y.real, not nan, 1e-12)
            and _part_agrees(x.imag, y.imag, not nan, 1e-12))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(special_values.TABLES))
def test_the_symmetries_the_standard_requires(name, device):
    # f(conj(z)) == conj(f(z)); asinh, atanh, sinh, tanh odd and cosh even (C99), on
    # every argument: the tables give one quadrant, the symmetries the others.
    symmetry = special_values.TABLES[name].symmetry
    fn = getattr(md, name)
    z, values = _grid(device=device)
    r = fn(z).tolist()
    conj = fn(md.conj(z)).tolist()
    neg = fn(md.negative(z)).tolist()
    for v, f, fc, fn_ in zip(values, r, conj, neg):
        if math.isnan(v.real) or math.isnan(v.imag):
            continue  # -NaN is NaN: the symmetries say nothing there (the rows do)
        if "conj" in symmetry:
            assert _same_up_to_nan_neighbours(complex(fc).conjugate(), f), (name, v, f, fc)
        if "odd" in symmetry:
            assert _same_up_to_nan_neighbours(-complex(fn_), f), (name, v, f, fn_)
        if "even" in symmetry:
            assert _same_up_to_nan_neighbours(fn_, f), (name, v, f, fn_)


@pytest.mark.parametrize("device", DEVICES[1:])
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
@pytest.mark.parametrize("name", sorted(special_values.TABLES))
def test_every_backend_gives_the_cpu_backends_values(name, dtype, device):
    # At every pair of these parts: NaN where the CPU has NaN, the same infinities, the
    # same finite values, and the same zeros -- signed where the standard gives the sign.
    table = special_values.TABLES[name]
    z_cpu, values = _grid(dtype)
    z, _ = _grid(dtype, device)
    rtol = 1e-6 if dtype == "complex64" else 1e-12
    fn = getattr(md, name)
    for v, want, got in zip(values, fn(z_cpu).tolist(), fn(z).tolist()):
        expected = _expected(table, v.real, v.imag)
        signed = expected is not None and not expected[1]
        ok = all(_part_agrees(g, w, signed and not math.isnan(other), rtol)
                 for g, w, other in ((complex(got).real, complex(want).real,
                                      complex(want).imag),
                                     (complex(got).imag, complex(want).imag,
                                      complex(want).real)))
        assert ok, f"{name}({v}) on {device} [{dtype}] is {got}, on the CPU {want}"


def test_the_tables_serve_the_catalogues_expm1_and_tanh_with_numpys_precision():
    # NumPy misses these two functions' special values too, so the catalogue's own impl
    # applies their tables (every backend); real dtypes keep NumPy's ufunc.
    z = md.asarray([complex(1e-10, 1e-10), complex(2.0, 3.0)], dtype=md.complex128)
    np.testing.assert_allclose(to_numpy(md.expm1(z)), np.expm1(to_numpy(z)), rtol=1e-15)
    np.testing.assert_allclose(to_numpy(md.tanh(z)), np.tanh(to_numpy(z)), rtol=1e-15)
    assert md.expm1(md.asarray([0.0, -0.0])).tolist() == [0.0, -0.0]
    assert np.signbit(to_numpy(md.expm1(md.asarray([-0.0])))).all()


def test_fixed_names_the_functions_it_knows():
    with pytest.raises(ValueError, match=r"no special values for 'cos'.*acos"):
        special_values.fixed("cos", lambda xp, a: a)


# ---------------------------------------------------------------------------------------
# Real rules: the sign of a zero result


@pytest.mark.parametrize("device", DEVICES)
def test_the_sign_of_zero_is_positive_zero(device):
    for dtype in (md.float32, md.float64):
        x = md.asarray([0.0, -0.0, 2.0, -3.0, _NAN], dtype=dtype, device=device)
        for got in (md.sign(x), md.sign(x, out=md.empty_like(x)), x.clone().sign_()):
            v = got.tolist()
            assert v[:4] == [0.0, 0.0, 1.0, -1.0] and math.isnan(v[4])
            assert not np.signbit(v[:2]).any(), (device, dtype, v)
    for dtype in (md.complex64, md.complex128):
        z = md.asarray([complex(a, b) for a in (0.0, -0.0) for b in (0.0, -0.0)],
                       dtype=dtype, device=device)
        for got in (md.sign(z), z.clone().sign_()):
            for v in got.tolist():
                assert v == 0 and not np.signbit([v.real, v.imag]).any(), (device, v)


_REAL = st.floats(-8, 8, width=32, allow_subnormal=False) | _SPECIAL


def _floats(data, label):
    return data.draw(st.lists(_REAL, min_size=_N, max_size=_N), label=label)


def _identical(got: list, want: list) -> bool:
    return all(_part_agrees(g, w, True, 0.0) for g, w in zip(got, want))


@pytest.mark.parametrize("device", DEVICES)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_zero_results_of_remainder_and_floor_division(device, data):
    # x % y has the sign of y, a zero too; a zero x // y has the sign of x / y; a zero
    # fmod(x, y) the sign of x (C's fmod).  Every form, every backend, the CPU's values.
    dtype = data.draw(st.sampled_from([md.float32, md.float64]), label="dtype")
    a, b = _floats(data, "a"), _floats(data, "b")
    s = data.draw(_REAL, label="scalar")
    x, y = (md.asarray(v, dtype=dtype, device=device) for v in (a, b))
    xc, yc = (md.asarray(v, dtype=dtype) for v in (a, b))
    sign_of_zero = {
        "remainder": lambda p, q, r: math.copysign(1, q),
        "floor_divide": lambda p, q, r: math.copysign(1, p) * math.copysign(1, q),
        "fmod": lambda p, q, r: math.copysign(1, p),
    }
    for name, rule in sign_of_zero.items():
        fn = getattr(md, name)
        forms = {"tensors": (fn(x, y), fn(xc, yc), a, b),
                 "tensor, scalar": (fn(x, s), fn(xc, s), a, [s] * _N)}
        if name != "fmod":  # torch's fmod takes no scalar dividend
            forms["scalar, tensor"] = (fn(s, y), fn(s, yc), [s] * _N, b)
        if name != "fmod":  # not structured: no in-place or out= form
            forms["in place"] = (getattr(x.clone(), name + "_")(y), fn(xc, yc), a, b)
            forms["out="] = (fn(x, y, out=md.empty_like(x)), fn(xc, yc), a, b)
        for form, (got, want, p, q) in forms.items():
            got, want = got.tolist(), want.tolist()
            assert _identical(got, want), (name, form, device, got, want)
            for pi, qi, r in zip(p, q, got):
                if r == 0:
                    assert math.copysign(1, r) == rule(pi, qi, r), (name, form, pi, qi, r)
    cpu_fmod = md.fmod(xc, yc).tolist()
    with np.errstate(all="ignore"):
        assert _identical(cpu_fmod, np.fmod(np.asarray(a, dtype=dtype.numpy),
                                            np.asarray(b, dtype=dtype.numpy)).tolist())


@pytest.mark.parametrize("device", DEVICES)
def test_operators_of_zeros(device):
    # The operators the suite checks: -0 % 2 is +0, 0 % -2 is -0, -0 // 2 is -0,
    # -0 // -2 is +0; %= and //= too.
    x = md.asarray([-0.0, 0.0, -0.0, 0.0], device=device)
    y = md.asarray([2.0, -2.0, -2.0, 2.0], device=device)
    for r in (x % y, x.clone().__imod__(y)):
        assert np.signbit(r.tolist()).tolist() == [False, True, True, False]
    for q in (x // y, x.clone().__ifloordiv__(y)):
        assert np.signbit(q.tolist()).tolist() == [True, True, False, False]
    ints = md.asarray([7, -7], device=device)
    assert (ints % 3).tolist() == [1, 2] and (ints // 3).tolist() == [2, -3]


# ---------------------------------------------------------------------------------------
# Registration


@pytest.mark.parametrize("device", DEVICES[1:])
def test_backends_register_their_special_values_for_their_own_key(device):
    from mdtensor.dispatch.keys import DispatchKey

    md.zeros(1, device=device)  # loads the backend, which registers its kernels
    backend = md.backends.get(device)
    assert backend.special_values and set(backend.special_values) <= set(
        special_values.names())
    for name in backend.special_values:
        for op in _overloads(name):
            kernel, rung = op.resolve(DispatchKey[backend.key])
            assert rung.startswith("1.") and not kernel.user, (op.name, rung)
            assert kernel.name in (f"special_values[{op.name}]", f"jax_jit[{op.name}]")


def _overloads(name):
    from mdtensor.ops import CATALOGUE

    return CATALOGUE[f"aten::{name}"].overloads


def test_special_values_are_computed_without_numpy_warnings():
    """As in PyTorch, ``x / 0``, ``log(0)``, ``sqrt(-1)`` give inf and nan silently; the
    user's own NumPy calls still warn, and ``-W error`` still turns ours into errors (Note
    [Floating-point warnings] in backends/numpy_backend.py).  In a fresh interpreter: the
    test session's own warning filters would hide the difference."""
    import subprocess
    import sys

    code = ("import numpy as np, mdtensor as md\n"
            "x = md.asarray([1.0, 0.0, -1.0])\n"
            "y = (x / 0, md.log(x), md.sqrt(x), md.exp(x * 1e6), x // 0, md.remainder(x, 0),"
            " md.asarray([0.0]) * float('inf'))\n"
            "assert str(y[0]) == 'tensor([inf, nan, -inf])', y[0]\n"
            "print('user', end='')\n"
            "np.log(np.zeros(1))\n")
    import os

    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=env)
    assert run.stdout == "user"
    # exactly one warning, the user's own np.log
    assert run.stderr.count("RuntimeWarning") == 1 and "<string>:6" in run.stderr, run.stderr
    strict = subprocess.run([sys.executable, "-W", "error", "-c",
                             "import mdtensor as md\nmd.asarray([1.0]) / 0"],
                            capture_output=True, text=True, env=env)
    assert strict.returncode != 0 and "divide by zero" in strict.stderr
