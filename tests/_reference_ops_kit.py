"""The differential suite's table, continued: the everyday kit of issue 30 (filling,
stacking, statistics, scatters, special functions, ...).  Imported by ``_reference_ops``,
whose ``REFS`` and ``EXCLUDED`` these rows join."""

from __future__ import annotations

import numpy as np
from _reference_ops import ALL, Sample, arrays, elements, ref, unary
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

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


# -- joining ---------------------------------------------------------------------------------


@st.composite
def _same_shapes(draw, max_dims=3):
    """One to three tensors of one shape (now and then one of another shape), of one dtype
    or mixed."""
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=3))
    k = draw(st.integers(1, 3))
    d1 = draw(st.sampled_from(ALL))
    out = []
    for i in range(k):
        s = shape
        if i and draw(st.integers(0, 7)) == 0:
            s = draw(hnp.array_shapes(min_dims=0, max_dims=max_dims, min_side=0, max_side=3))
        d = d1 if draw(st.integers(0, 3)) else draw(st.sampled_from(ALL))
        out.append(draw(hnp.arrays(np.dtype(d), s, elements=elements(d))))
    return Sample((out,))


for _n in ("hstack", "vstack", "dstack", "column_stack"):
    ref(_n, lambda lib, ts, _n=_n: getattr(lib, _n)(ts),
        lambda lib, ts, _n=_n: getattr(lib, _n)(ts), _same_shapes())
