"""The differential suite's table, continued: the everyday kit of issue 30 (filling,
stacking, statistics, scatters, special functions, ...).  Imported by ``_reference_ops``,
whose ``REFS`` and ``EXCLUDED`` these rows join."""

from __future__ import annotations

from _reference_ops import ALL, Sample, arrays, ref, unary
from hypothesis import strategies as st

__all__: list[str] = []


# -- filling ---------------------------------------------------------------------------------


@st.composite
def _fill_sample(draw):
    x = draw(arrays(ALL))
    kind = x.dtype.kind
    value = draw(st.booleans() if kind == "b" else st.integers(-3, 3) if kind in "iu"
                 else st.sampled_from([1.5, -0.0, float("inf"), 2]))
    return Sample((x, value))


# PyTorch has no derivative for a value's change, and fill's gradient of self is zero
ref("fill", lambda lib, x, v: x.clone().fill_(v), lambda lib, x, v: x.clone().fill_(v),
    _fill_sample())
ref("zero", lambda lib, x: x.clone().zero_(), lambda lib, x: x.clone().zero_(), unary(ALL))
ref("ravel", lambda lib, x: lib.ravel(x), lambda lib, x: lib.ravel(x), unary(ALL))
