"""Filling a tensor with one value: ``fill`` / ``fill_`` and ``zero`` / ``zero_``.

``p.grad.zero_()`` and ``x.fill_(v)`` are PyTorch's idioms; both are structured ops (the
in-place method is the one people call; the functional form is what Functionalize rewrites
it to on immutable backends).  The derivative rules are in ``ops/filling_derivatives.py``.
"""

from __future__ import annotations

import numpy as np

from mdtensor import _dtypes as dt

from . import _meta_fns as mf
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import ALL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names


def _value_for(name, dtype, value):
    """``value`` converted as PyTorch converts a fill value to the tensor's dtype: floats
    truncate toward zero for integer tensors, anything nonzero is True for bools; a complex
    value for a real tensor is refused."""
    kind = dtype.kind
    if isinstance(value, complex) and kind != "c":
        raise TypeError(f"{name}: can't fill a tensor of dtype {dtype.name} with the complex "
                        f"value {value!r}")
    if kind == "b":
        return bool(value)
    if kind in "iu":
        if isinstance(value, float) and not np.isfinite(value):
            raise ValueError(f"{name}: can't fill a tensor of dtype {dtype.name} with "
                             f"{value!r}")
        v = int(value)
        info = np.iinfo(dtype.numpy)
        if kind == "u" and -info.max <= v < 0:
            v += info.max + 1  # PyTorch wraps negative integers into unsigned dtypes
        if not info.min <= v <= info.max:
            raise ValueError(f"{name}: value {value!r} cannot be converted to type "
                             f"{dtype.name} without overflow")
        return v
    return value


def _fill(xp, x, value):
    d = dt.as_dtype(x.dtype)
    v = _value_for("fill", d, value)
    return xp.full(tuple(x.shape), v, dtype=x.dtype, device=getattr(x, "device", None))


def _zero(xp, x):
    return xp.zeros(tuple(x.shape), dtype=x.dtype, device=getattr(x, "device", None))


# On NumPy (Note [NumPy fast impls] in ops/_decl.py): ``np.full`` and array-api-compat's
# ``full``/``zeros`` are Python functions over ``empty`` + ``fill`` (1-3 us on a small
# array, 0.3 us done directly); in place, ``fill_`` and ``zero_`` write the value into the
# tensor's array (the structured in-place kernel otherwise computes a new one and copies).

_FILLS = (bool, int, float)


def _np_fill(xp, x, value):
    if type(value) not in _FILLS or x.dtype.kind not in "fc":
        return _fill(xp, x, value)  # converted (and checked) as PyTorch converts
    r = np.empty(x.shape, x.dtype)
    r.fill(value)
    return r


def _fill_into(xp, out, x, value):
    if type(value) in _FILLS and out.dtype.kind in "fc":
        out.fill(value)  # a real value into a floating or complex array: as it is
    else:
        out.fill(_value_for("fill", dt.as_dtype(out.dtype), value))
    return True


def _np_zero(xp, x):
    return np.zeros(x.shape, x.dtype)


def _zero_into(xp, out, x):
    out.fill(0)
    return True


def _fill_samples(dtype, rng):
    value = {"b": True, "i": 3, "u": 3, "f": 1.5, "c": 1.5 - 2j}[dtype.kind]
    return [SampleInput((make_array((2, 3), dtype, rng), value)),
            SampleInput((make_array((), dtype, rng), value)),
            SampleInput((make_array((0, 2), dtype, rng), value))]


def _fill_ref(x, value):
    return np.full(x.shape, value, dtype=x.dtype)


_fill_scalar = defop(
    "fill.Scalar(Tensor self, Scalar value) -> Tensor", impl=_fill, structured=True,
    cpu_impl=_np_fill, inplace_impl=_fill_into,
    meta=mf.same, methods=("fill_",), names=("fill",), promote_scalars=False,
    info=OpInfo(ref=_fill_ref, dtypes=ALL, samples=_fill_samples,
                errors=lambda: [ErrorInput(SampleInput((np.zeros(2), 1j)), TypeError,
                                           "fill: can't fill a tensor of dtype float64 "
                                           "with the complex value")]))


# Note [Filling with a Tensor]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``x.fill_(v)`` with a 0-d Tensor ``v`` is PyTorch's ``fill_.Tensor``: the value is converted
# to the tensor's dtype as a scalar value would be (a float into an int tensor truncates, a
# complex one into a real tensor is refused) and stays on the device -- it is never read
# into Python, so filling from a lazy or device tensor syncs nothing.  ``v`` receives the
# gradient (the sum of the output's); ``self`` none, as for a scalar.


def _fill_tensor(xp, x, value):
    if value.ndim != 0:
        raise ValueError(f"fill: expected a 0-dimensional value tensor, got one of "
                         f"{value.ndim} dimensions (shape {tuple(value.shape)})")
    d, vd = dt.as_dtype(x.dtype), dt.as_dtype(value.dtype)
    if vd.kind == "c" and d.kind != "c":
        raise TypeError(f"fill: can't fill a tensor of dtype {d.name} with a complex value "
                        f"tensor ({vd.name})")
    v = value if vd == d else xp.astype(value, x.dtype)
    return xp.asarray(xp.broadcast_to(v, tuple(x.shape)), copy=True)


def _fill_tensor_samples(dtype, rng):
    return [SampleInput((make_array((2, 3), dtype, rng), make_array((), dtype, rng))),
            SampleInput((make_array((), dtype, rng), make_array((), dtype, rng))),
            SampleInput((make_array((0, 2), dtype, rng), make_array((), dtype, rng))),
            SampleInput((make_array((2, 3), dtype, rng), np.asarray(2.0)))]


defop("fill.Tensor(Tensor self, Tensor value) -> Tensor", impl=_fill_tensor, structured=True,
      meta=mf.same, decl=_fill_scalar, promote_scalars=False,
      info=OpInfo(ref=lambda x, v: np.full(x.shape, v, dtype=x.dtype), dtypes=ALL,
                  samples=_fill_tensor_samples,
                  errors=lambda: [
                      ErrorInput(SampleInput((np.zeros(2), np.ones(2))), ValueError,
                                 "fill: expected a 0-dimensional value tensor, got one of 1"),
                      ErrorInput(SampleInput((np.zeros(2), np.asarray(1j))), TypeError,
                                 "fill: can't fill a tensor of dtype float64 with a complex "
                                 "value tensor")]))
defop("zero(Tensor self) -> Tensor", impl=_zero, structured=True, meta=mf.same,
      cpu_impl=_np_zero, inplace_impl=_zero_into,
      methods=("zero_",), names=(),
      info=OpInfo(ref=lambda x: np.zeros_like(x), dtypes=ALL,
                  samples=lambda d, rng: [SampleInput((make_array((2, 3), d, rng),)),
                                          SampleInput((make_array((), d, rng),))]))
