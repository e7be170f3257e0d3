"""The CPU kernels of a ``cpu_impl=Ufunc(np.<ufunc>)`` declaration (Note [NumPy fast impls]
in ops/_decl.py): the ufunc called on the tensors' arrays with no Python frame between the
kernel and NumPy -- functional, in-place (``ufunc(self, other, self)``) and ``out=``
(``ufunc(x, y, out)``) -- each handing the calls it cannot serve to the generic kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from mdtensor.dispatch.kernel import named, with_array_call
from mdtensor.dispatch.schema import FunctionSchema
from mdtensor.tensors.tensor import Tensor

from ._errors import device_mismatch, raise_from_backend
from ._impl_kernels import array_api_kernel

__all__ = ["Ufunc", "ufunc_inplace_kernel", "ufunc_kernel", "ufunc_out_kernel"]


class Ufunc:
    """``cpu_impl=Ufunc(np.exp)``: the NumPy ufunc itself is the CPU kernel's computation
    (Note [NumPy fast impls] in ops/_decl.py), with no Python frame between the kernel and NumPy.

    Calls it cannot serve as they are -- keyword arguments (``alpha=``), or, with
    ``floats_only``, a tensor whose dtype kind is not in ``kinds`` (floating and complex by
    default: Note [Integer inputs of float functions] in ops/elementwise.py; ``"f"`` where
    the generic impl fixes NumPy's complex results) -- take the generic ``impl``.
    """

    __slots__ = ("fn", "floats_only", "kinds")

    def __init__(self, fn, floats_only: bool = False, kinds: str = "fc"):
        self.fn = fn
        self.floats_only = floats_only
        self.kinds = kinds


#: the array dtype kinds a Python scalar is of a higher kind than: NumPy would promote
#: such pairs by its own rule (int64 + 0.5 is float64), mdtensor by PyTorch's (Note
#: [Scalars of a higher kind] in mdtensor/_dtypes.py), so the ufunc kernels send them to
#: the generic impl, whose scalar promotion follows the Meta kernels
_HIGHER = {int: "b", float: "biuV", complex: "biuf"}
# (``"V"``: NumPy's kind of ml_dtypes' bfloat16, which NumPy widens to float32 beside a
# Python float: Note [bfloat16 in the ufunc kernels])

# Note [bfloat16 in the ufunc kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ml_dtypes' loops promote bfloat16 by NumPy's rule, not PyTorch's (Note [Promotion of
# bfloat16] in mdtensor/_dtypes.py): with int16 and wider integers to float32 or float64,
# with a Python float to float32.  Its arrays are of NumPy kind ``"V"``, so the kernels of
# two tensors of different dtypes, one of them of that kind, and a bfloat16 tensor with a
# Python float, take the generic impl, which casts as the Meta kernels say.  Pairs of one
# dtype, and every call without bfloat16, pay one dtype comparison.


def _mixed_bfloat16(x, y) -> bool:
    """Two arrays of different dtypes, one of them bfloat16 (Note [bfloat16 in the ufunc
    kernels])."""
    return x.dtype.kind == "V" or y.dtype.kind == "V"


def _scalar_failure(e, name, fallback, args, arrays):
    """A ufunc kernel's call with a Python scalar failed: an int out of its tensor's range
    takes the generic impl (Note [Integers out of range]), a refused call is explained
    (Note [Errors from the backend]); anything else propagates."""
    if isinstance(e, OverflowError):
        return fallback(*args)
    if isinstance(e, (ValueError, TypeError)):
        raise_from_backend(name, e, arrays)
    raise e


def ufunc_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
    name = schema.full_name
    fallback = array_api_kernel(schema, generic)
    uf = spec.fn
    kinds = spec.kinds
    floats = spec.floats_only
    pos = tuple(i for i, a in enumerate(schema.arguments) if a.type.is_tensor_like)
    if floats and pos == (0, 1):
        def kernel(a, b, *rest, **kwargs):
            x, y = a._data, b._data
            if rest or kwargs or x.dtype.kind not in kinds or y.dtype.kind not in kinds:
                return fallback(a, b, *rest, **kwargs)
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            try:
                return d.wrap(uf(x, y))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (x, y))
    elif pos == (0,) and len(schema.arguments) == 1:
        # the schema's one argument is a Tensor, which callers pass positionally: no
        # **kwargs, whose dict a call would build (0.02 us)
        def kernel(a):
            x = a._data
            if floats and x.dtype.kind not in kinds:
                return fallback(a)
            try:
                return a._device.wrap(uf(x))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (x,))
    elif pos == (0,):
        def kernel(a, s, *rest, **kwargs):
            x = a._data
            k = x.dtype.kind
            if rest or kwargs or (floats and k not in kinds) or k in _HIGHER.get(type(s), ""):
                return fallback(a, s, *rest, **kwargs)
            try:
                return a._device.wrap(uf(x, s))
            except Exception as e:
                return _scalar_failure(e, name, fallback, (a, s), (x, s))
    elif pos == (1,):
        def kernel(s, a, *rest, **kwargs):
            x = a._data
            k = x.dtype.kind
            if rest or kwargs or (floats and k not in kinds) or k in _HIGHER.get(type(s), ""):
                return fallback(s, a, *rest, **kwargs)
            try:
                return a._device.wrap(uf(s, x))
            except Exception as e:
                return _scalar_failure(e, name, fallback, (s, a), (s, x))
    elif pos == (0, 1) and len(schema.arguments) == 2:
        # Nothing but the two Tensors (matmul, mul.Tensor): no *rest or **kwargs, whose
        # empty tuple and dict a call would build (0.1 us); the dispatcher's callers pass
        # exactly what the schema has.
        def kernel(a, b):
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            x, y = a._data, b._data
            if x.dtype is not y.dtype and _mixed_bfloat16(x, y):
                return fallback(a, b)
            try:
                return d.wrap(uf(x, y))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data, b._data))
    elif pos == (0, 1):
        def kernel(a, b, *rest, **kwargs):
            if rest or kwargs or (a._data.dtype is not b._data.dtype
                                  and _mixed_bfloat16(a._data, b._data)):
                return fallback(a, b, *rest, **kwargs)
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            try:
                return d.wrap(uf(a._data, b._data))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data, b._data))
    else:
        raise ValueError(f"{name}: Ufunc kernels take one or two operands")
    kernel = named(kernel, f"ufunc[{name}]")
    arity = 1 if pos == (0,) and len(schema.arguments) == 1 else 2
    return with_array_call(kernel, _array_call(uf, pos, arity, floats and kinds, False))


def _fits(uf, operands, out: bool) -> bool:
    """Whether NumPy takes ``uf`` on arrays of the dtypes of ``operands`` (arrays; Python
    scalars as they are), writing into the first when ``out``: an int out of its dtype's
    range, a cast ``same_kind`` refuses, raise."""
    probe = [np.ones(1, x.dtype) if hasattr(x, "dtype") else x for x in operands]
    try:
        with np.errstate(all="ignore"):
            uf(*probe, probe[0]) if out else uf(*probe)
    except Exception:  # noqa: BLE001 - the kernel takes its generic path for this call
        return False
    return True


def _array_call(uf, pos, arity: int, kinds, inplace: bool):
    """The ufunc kernels' specialization (Note [Array calls] in
    mdtensor/dispatch/kernel.py): the calls of ``arity`` positional arguments (Tensors at
    ``pos``) that the kernel computes with the ufunc; ``kinds``: a float function's dtype
    kinds (else falsy); ``inplace``: the kernel writes into its first operand."""
    def specialize(args, kwargs):
        if kwargs or len(args) != arity or any(type(args[i]) is not Tensor for i in pos):
            return None
        tensors = [args[i] for i in pos]
        arrays = [t._data for t in tensors]
        d = tensors[0]._device
        if any(t._device is not d for t in tensors):
            return None
        if kinds and any(x.dtype.kind not in kinds for x in arrays):
            return None
        if len(arrays) == 2 and arrays[0].dtype is not arrays[1].dtype and _mixed_bfloat16(
                *arrays):
            return None
        operands = [a._data if isinstance(a, Tensor) else a for a in args]
        if len(pos) < arity:  # one Tensor and a Scalar
            k = arrays[0].dtype.kind
            if not inplace and k in _HIGHER.get(type(args[1 - pos[0]]), ""):
                return None
            if not _fits(uf, operands, inplace):
                return None
        if inplace:
            x = arrays[0]
            if (np.broadcast_shapes(*(np.shape(o) for o in operands)) != x.shape
                    or not _fits(uf, operands, True)):
                return None
            return uf, (*args, args[0]), {}
        return uf, args, {}

    return specialize


def _positional_out(uf):
    """``uf`` callable as ``uf(*inputs, out)``: NumPy 2.4 deprecates a positional out= for
    maximum and minimum (a third input, meant?), which get a keyword one."""
    if uf.nin == 2 and uf.__name__ in ("maximum", "minimum"):
        def with_out(a, b, out):
            return uf(a, b, out=out)
        return with_out
    return uf


def ufunc_inplace_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
    """``self.op_(other)`` on NumPy as ``ufunc(self, other, self)`` (out= passed
    positionally); anything else --
    keywords, a non-floating operand of a float function, a result NumPy refuses to write
    (shape or casting; ``generic`` then raises PyTorch's message) -- takes ``generic``."""
    name = schema.full_name
    uf = _positional_out(spec.fn)
    floats = spec.floats_only
    kinds = spec.kinds
    pos = tuple(i for i, a in enumerate(schema.arguments) if a.type.is_tensor_like)
    if pos == (0, 1):
        def kernel(self, other, *rest, **kwargs):
            data = self._data
            d = self._device
            if rest or kwargs or other._device is not d or (
                    floats and (data.dtype.kind not in kinds
                                or other._data.dtype.kind not in kinds)):
                return generic(self, other, *rest, **kwargs)
            try:
                uf(data, other._data, data)  # out= positionally: no keyword parsing
            except (TypeError, ValueError):
                return generic(self, other)
            return self
    elif pos == (0,) and len(schema.arguments) == 1:
        def kernel(self, **kwargs):
            data = self._data
            if kwargs or (floats and data.dtype.kind not in kinds):
                return generic(self, **kwargs)
            try:
                uf(data, data)
            except (TypeError, ValueError):
                return generic(self)
            return self
    elif pos == (0,):
        def kernel(self, s, *rest, **kwargs):
            data = self._data
            if rest or kwargs or (floats and data.dtype.kind not in kinds):
                return generic(self, s, *rest, **kwargs)
            try:
                uf(data, s, data)
            except (TypeError, ValueError, OverflowError):
                return generic(self, s)
            return self
    else:
        return generic
    kernel = named(kernel, f"ufunc_inplace[{name}]")
    arity = 1 if pos == (0,) and len(schema.arguments) == 1 else 2
    return with_array_call(kernel, _array_call(uf, pos, arity, floats and kinds, True))


def ufunc_out_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
    """``op(x, y, out=o)`` on NumPy as ``ufunc(x, y, o)``: the result written into ``out``
    directly, where the generic out= kernel computes a new array and copies it (a 4M-element
    ``add`` allocated 16 MB).  NumPy's ``same_kind`` casting into ``out`` is PyTorch's rule
    for out= as for in-place ops (``ufunc_inplace_kernel``).  An operand of ``out``'s shape
    is required (then NumPy writes only a result of exactly that shape, where PyTorch would
    resize a smaller ``out``); keywords, other devices, non-floating operands of a float
    function and whatever NumPy refuses take ``generic``, which raises PyTorch's messages."""
    name = schema.full_name
    uf = _positional_out(spec.fn)
    floats = spec.floats_only
    kinds = spec.kinds
    pos = tuple(i for i, a in enumerate(schema.arguments)
                if a.type.is_tensor_like and a.name != "out")
    n_positional = sum(1 for a in schema.arguments if not a.kwarg_only)
    if pos == (0, 1) and n_positional == 2:  # keywords (add's alpha=) take ``generic``
        def kernel(a, b, *, out=None, **kwargs):
            if kwargs or type(out) is not Tensor:
                return generic(a, b, out=out, **kwargs)
            d = out._device
            x, y, o = a._data, b._data, out._data
            if (a._device is not d or b._device is not d
                    or (floats and (x.dtype.kind not in kinds or y.dtype.kind not in kinds))
                    or (x.shape != o.shape and y.shape != o.shape)):
                return generic(a, b, out=out)
            try:
                uf(x, y, o)
            except (TypeError, ValueError):
                return generic(a, b, out=out)
            return out
    elif pos == (0,) and n_positional == 1:
        def kernel(a, *, out=None, **kwargs):
            if kwargs or type(out) is not Tensor:
                return generic(a, out=out, **kwargs)
            x, o = a._data, out._data
            if (a._device is not out._device or (floats and x.dtype.kind not in kinds)
                    or x.shape != o.shape):
                return generic(a, out=out)
            try:
                uf(x, o)
            except (TypeError, ValueError):
                return generic(a, out=out)
            return out
    else:
        return generic
    kernel = named(kernel, f"ufunc_out[{name}]")
    return kernel
