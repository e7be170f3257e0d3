"""The kernels ``defop`` builds from an ``impl`` written against the Array API: they unwrap
the tensors' arrays (checking their devices), call ``impl(xp, *arrays, ...)`` and wrap the
result -- fast kernels for the common schema shapes (Note [The hot path] in
mdtensor/dispatch/callers.py), generic ones for the rest, the in-place and ``out=`` kernels of
structured ops (Note [Structured ops]), and the Meta kernels from a declaration's ``meta``.
A backend builds its own kernels from an impl with ``impl_kernel`` (ops/special_values.py).
What they raise when the backend fails is in ops/_errors.py (Notes [Errors from the
backend], [Axis errors] and [Broadcasting errors]).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from mdtensor._dtypes import can_cast
from mdtensor.dispatch.callers import _NO
from mdtensor.dispatch.kernel import named, with_array_call
from mdtensor.dispatch.schema import FunctionSchema
from mdtensor.tensors.tensor import Tensor

from ._accepted import unchecked, with_accepted_kinds
from ._errors import axis_check, device_mismatch, raise_from_backend, raise_named
from ._promotion import with_scalar_promotion

__all__ = [
    "array_api_kernel",
    "check_inplace_result",
    "impl_kernel",
    "meta_kernel",
    "prepared_impl",
    "prepared_kernel",
    "result_tuple",
    "warn_if_resized",
]


# ---------------------------------------------------------------------------------------
# Unwrapping tensors, wrapping results


def _returns_kind(schema: FunctionSchema) -> str:
    rets = schema.returns
    if not rets:
        return "none"
    if len(rets) == 1 and not schema.returns_tuple:
        t = rets[0].type
        if t.is_tensor_list:
            return "list"
        return "tensor" if t.is_tensor else "value"
    return "tuple"


_RESULT_TYPES: dict = {}


def result_tuple(schema: FunctionSchema):
    """A named tuple for returns that all have names (``max.dim`` -> ``(values,
    indices)``, as PyTorch's ``torch.return_types`` and the Array API's ``unique_*``)."""
    names = tuple(r.name for r in schema.returns)
    if not all(names):
        return lambda *xs: tuple(xs)
    key = (schema.name, names)
    cls = _RESULT_TYPES.get(key)
    if cls is None:
        import collections

        title = "".join(p.capitalize() for p in schema.name.split("_")) + "Result"
        cls = _RESULT_TYPES[key] = collections.namedtuple(title, names)
    return cls


def _wrap_out(dev, kind: str, schema: FunctionSchema):
    wrap = dev.wrap
    if kind == "tensor":
        return wrap
    if kind == "list":  # Tensor[] returns are tuples, as PyTorch's split and the Array API's
        return lambda r: tuple(wrap(x) for x in r)
    if kind == "tuple":
        flags = [ret.type.is_tensor for ret in schema.returns]
        result_type = result_tuple(schema)
        if flags == [True, True]:  # (values, indices), (Q, R), ... without the generator
            def wrap_pair(r):
                a, b = r
                return result_type(None if a is None else wrap(a), None if b is None else wrap(b))
            return wrap_pair
        # None is an undefined output (matmul_backward's masked-out gradient)
        return lambda r: result_type(*(wrap(x) if f and x is not None else x
                                       for x, f in zip(r, flags)))
    return lambda r: r


def array_api_kernel(schema: FunctionSchema, impl: Callable) -> Callable:
    """Wrap ``impl(xp, *arrays, ...)`` into a kernel taking and returning Tensors (a
    ``Ufunc``'s kernel is ``ufunc_kernel``, ops/_ufunc_kernels.py)."""
    name = schema.full_name
    kind = _returns_kind(schema)
    tensor_args = [(i, a) for i, a in enumerate(schema.arguments) if a.type.is_tensor_like]
    simple = [i for i, a in tensor_args
              if not (a.kwarg_only or a.type.is_tensor_list or a.type.optional or a.has_default)]
    if kind == "tensor" and len(simple) == len(tensor_args) and simple in ([0], [1], [0, 1]):
        n_positional = sum(1 for a in schema.arguments if not a.kwarg_only)
        return _fast_kernel(name, impl, tuple(simple), extra=n_positional > len(simple),
                            check=axis_check(schema))
    return _generic_kernel(schema, impl, kind, tensor_args)


# Note [Checked impls on the fast kernels]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An op declaring the kinds it accepts has its impl wrapped in the check (Note [Accepted
# dtypes] in ops/_accepted.py), a frame with a star call in and out around every call:
# ``relu``, ``gelu``, ``erf``, ``angle``, ``clamp``, and ``threshold_backward``, relu's
# gradient.  Where the check reads one operand, which the fast kernel holds as an array,
# the kernel looks the operand's dtype up in the check's set of accepted ones itself and
# calls the impl unchecked; a dtype not seen yet goes through the check, which raises the
# op's error or adds it to the set (``md.ops.aten.relu(x)``, 16x16 float32: 23.6K -> 21.7K
# instructions).  Other impls pay one test of a closure variable.


def _fast_kernel(name, impl, pos, extra, check=None):
    """Kernels for the common shapes of schema (Note [The hot path] in
    mdtensor/dispatch/callers.py).

    ``extra``: the schema has positional non-Tensor arguments after the tensors, so the
    kernel forwards ``*rest``; without them it avoids building the tuple, and it calls
    ``impl`` without ``**kwargs`` when none were given.  ``check``: the op's
    ``axis_check`` (Note [Axis errors]).  Note [Checked impls on the fast kernels]: ``raw``
    and ``accepted``.
    """
    raw, accepted = unchecked(impl, pos[-1] + 1) or (None, None)
    if pos == (0, 1) and not extra:
        def kernel(a, b, **kwargs):
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            try:
                if kwargs:
                    return d.wrap(impl(d.xp, a._data, b._data, **kwargs))
                return d.wrap(impl(d.xp, a._data, b._data))
            except Exception as e:
                if check is not None:  # Note [Axis errors]
                    check(len(a._data.shape), (b,), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data, b._data), kwargs)
    elif pos == (0,) and not extra:
        def kernel(a, **kwargs):
            d = a._device
            f = impl
            if raw is not None:
                dtype = a._data.dtype
                if (dtype.__class__, dtype) in accepted:
                    f = raw
            try:
                if kwargs:
                    return d.wrap(f(d.xp, a._data, **kwargs))
                return d.wrap(f(d.xp, a._data))
            except Exception as e:
                if check is not None:
                    check(len(a._data.shape), (), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data,), kwargs)
    elif pos == (0,):
        # See Note [Star calls] in mdtensor/dispatch/callers.py
        def kernel(a, b=_NO, /, *rest, **kwargs):
            d = a._device
            f = impl
            if raw is not None:
                dtype = a._data.dtype
                if (dtype.__class__, dtype) in accepted:
                    f = raw
            try:
                if b is _NO:
                    if kwargs:
                        return d.wrap(f(d.xp, a._data, **kwargs))
                    return d.wrap(f(d.xp, a._data))
                if rest or kwargs:
                    return d.wrap(f(d.xp, a._data, b, *rest, **kwargs))
                return d.wrap(f(d.xp, a._data, b))
            except Exception as e:
                if check is not None:
                    check(len(a._data.shape), () if b is _NO else (b, *rest), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data,) if b is _NO else (a._data, b, *rest),
                                   kwargs)
    elif pos == (1,):
        def kernel(s, a, *rest, **kwargs):
            d = a._device
            try:
                return d.wrap(impl(d.xp, s, a._data, *rest, **kwargs))
            except (ValueError, TypeError) as e:
                raise_from_backend(name, e, (s, a._data, *rest), kwargs)
    else:
        def kernel(a, b, *rest, **kwargs):
            d = a._device
            if b._device is not d:
                raise device_mismatch(name, d, b._device)
            f = impl
            if raw is not None:  # the second operand checked (threshold_backward's self)
                dtype = b._data.dtype
                if (dtype.__class__, dtype) in accepted:
                    f = raw
            try:
                return d.wrap(f(d.xp, a._data, b._data, *rest, **kwargs))
            except Exception as e:
                if check is not None:
                    check(len(a._data.shape), (b, *rest), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data, b._data, *rest), kwargs)
    kernel = named(kernel, f"array_api[{name}]")
    if pos == (0,):
        # ``impl(xp, array, *rest, **kwargs)`` wrapped by ``device.wrap``, for a layer
        # that fuses it into its own kernel (Note [Fused view kernels] in
        # mdtensor/layers/inplace_or_view.py)
        kernel.array_impl = impl
    return with_array_call(kernel, _impl_call(impl, pos))


def _impl_call(impl, pos):
    """The fast kernels' specialization (Note [Array calls] in
    mdtensor/dispatch/kernel.py): ``impl`` on the device's namespace and the arrays."""
    def specialize(args, kwargs):
        tensors = [args[i] for i in pos if i < len(args)]
        if len(tensors) != len(pos) or any(type(t) is not Tensor for t in tensors):
            return None
        d = tensors[0]._device
        if any(t._device is not d for t in tensors):
            return None
        return unchecked, (d.xp, *args), kwargs

    # the kinds of the capture's operands were accepted when it ran; so are the replay's
    unchecked = getattr(impl, "__wrapped__", impl)
    return specialize


# Note [Unwrapping by layout]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The generic kernels serve every schema the fast kernels do not: Tensor lists, optional
# and keyword Tensors, tuple returns.  Walking the schema's Tensor arguments on every call
# cost 1.1 us of ``md.concat([x, x])``'s 2.9 (16x16 float32), as much as NumPy's
# concatenate.  So the unwrapper is chosen per schema when the kernel is built: the two
# commonest layouts -- a lone ``Tensor[]`` first (``cat``, ``stack``, ``meshgrid``) and a
# lone plain ``Tensor`` first (ops with list or tuple returns, ``max.dim``, ``unbind``) --
# get a function that reads just that argument when it is passed positionally, and so do
# plain Tensors at fixed positions (``where(c, x, y)``, ``index_select(x, 0, i)``: read by
# position, no schema walk); any other call (a keyword, a missing argument, a non-Tensor)
# takes the general walk, which also gives the errors.  The walk itself reads each
# argument's flags from a tuple made once, not from the schema's properties.


def _unwrapper(schema: FunctionSchema, tensor_args):
    """``unwrap(args, kwargs) -> (device, args, kwargs)`` with arrays in place of tensors
    (Note [Unwrapping by layout]); ``kwargs`` must be the caller's own dict (it is
    updated in place)."""
    name = schema.full_name
    general = _general_unwrapper(name, tensor_args)
    if len(tensor_args) > 1:
        return _positional_unwrapper(name, tensor_args, general)
    if len(tensor_args) != 1 or tensor_args[0][0] != 0:
        return general
    arg = tensor_args[0][1]
    if arg.kwarg_only or arg.type.optional or arg.type.elem_optional:
        return general
    if arg.type.is_tensor_list:
        def unwrap(args, kwargs):
            if not args:
                return general(args, kwargs)
            raw = []
            dev = None
            for t in args[0]:
                if type(t) is not Tensor:
                    return general(args, kwargs)
                if t._device is not dev:
                    if dev is not None:
                        raise device_mismatch(name, dev, t._device)
                    dev = t._device
                raw.append(t._data)
            return dev, (raw, *args[1:]), kwargs
    else:
        def unwrap(args, kwargs):
            if not args or type(args[0]) is not Tensor:
                return general(args, kwargs)
            t = args[0]
            return t._device, (t._data, *args[1:]), kwargs
    return unwrap


def _positional_unwrapper(name: str, tensor_args, general):
    """The unwrapper of plain Tensors at fixed positions (Note [Unwrapping by layout]), or
    ``general`` where the schema has another kind of Tensor argument."""
    if any(a.kwarg_only or a.type.optional or a.type.is_tensor_list for _, a in tensor_args):
        return general
    positions = tuple(i for i, _ in tensor_args)
    last = positions[-1]

    def unwrap(args, kwargs):
        if len(args) <= last:
            return general(args, kwargs)
        raw = list(args)
        dev = None
        for i in positions:
            t = raw[i]
            if type(t) is not Tensor:
                return general(args, kwargs)
            if t._device is not dev:
                if dev is not None:
                    raise device_mismatch(name, dev, t._device)
                dev = t._device
            raw[i] = t._data
        return dev, raw, kwargs

    return unwrap


def _general_unwrapper(name: str, tensor_args):
    flags = tuple((i, a.name, a.kwarg_only, a.type.is_tensor_list) for i, a in tensor_args)

    def unwrap(args, kwargs):
        dev = None
        args = list(args)
        for i, arg_name, kwarg_only, is_list in flags:
            if i < len(args) and not kwarg_only:
                holder, slot = args, i
            elif arg_name in kwargs:
                holder, slot = kwargs, arg_name
            else:
                continue
            v = holder[slot]
            if v is None:
                continue
            if is_list:
                raw = []
                for t in v:
                    if t is None:
                        raw.append(None)
                        continue
                    if dev is None:
                        dev = t._device
                    elif t._device is not dev:
                        raise device_mismatch(name, dev, t._device)
                    raw.append(t._data)
                holder[slot] = raw
            else:
                if not isinstance(v, Tensor):
                    raise TypeError(f"{name}: argument '{arg_name}' must be a Tensor, got "
                                    f"{type(v).__name__}")
                if dev is None:
                    dev = v._device
                elif v._device is not dev:
                    raise device_mismatch(name, dev, v._device)
                holder[slot] = v._data
        return dev, args, kwargs

    return unwrap


def _operands(schema, tensor_args):
    """``operands(args, kwargs)``: the arrays of the plain Tensor arguments (those that
    broadcast together in a pointwise op), from unwrapped arguments."""
    plain = [(i, a.name) for i, a in tensor_args
             if not (a.type.is_tensor_list or a.kwarg_only)]

    def operands(args, kwargs):
        return [args[i] if i < len(args) else kwargs.get(n) for i, n in plain]

    return operands


def _generic_kernel(schema, impl, kind, tensor_args):
    unwrap = _unwrapper(schema, tensor_args)
    name = schema.full_name
    check = axis_check(schema)

    # The last device seen and its result wrapper (_wrap_out): one device, nearly always
    # (Device's __hash__ is a Python method, so a dict of them costs a call).  One tuple,
    # read and replaced whole, so threads on other devices never mix the two.
    last = [(None, None)]

    def kernel(*args, **kwargs):
        dev, args, kwargs = unwrap(args, kwargs)  # ``kwargs`` is this call's own dict
        if dev is None:
            raise TypeError(f"{name}: needs at least one tensor argument")
        try:
            r = impl(dev.xp, *args, **kwargs)
        except Exception as e:
            if check is not None and args:  # Note [Axis errors]
                check(len(args[0].shape), args[1:], kwargs)
            if not isinstance(e, (ValueError, TypeError, IndexError)):
                raise
            raise_from_backend(name, e, args, kwargs)  # Note [Errors from the backend]
        seen, wrap = last[0]
        if seen is not dev:
            wrap = _wrap_out(dev, kind, schema)
            last[0] = (dev, wrap)
        return wrap(r)

    kernel = named(kernel, f"array_api[{name}]")
    if kind == "list" and [i for i, a in tensor_args] == [0] and not (
            tensor_args[0][1].kwarg_only or tensor_args[0][1].type.is_tensor_list
            or tensor_args[0][1].type.optional):
        # ``impl(xp, array, *rest, **kwargs)`` returning a list of arrays, for a layer that
        # fuses it into its own kernel (Note [Fused view kernels] in
        # mdtensor/layers/inplace_or_view.py: split, chunk, unbind)
        kernel.list_impl = impl
    return kernel


# ---------------------------------------------------------------------------------------
# In-place and out= kernels


# Note [Structured ops]
# ~~~~~~~~~~~~~~~~~~~~~
# A structured op gives one functional schema and one impl; its in-place and ``out=`` variants
# follow PyTorch's rules: the in-place result must have ``self``'s shape (the other operands
# may broadcast to it) and be castable to ``self``'s dtype (``same_kind``); ``out=`` checks the
# device, requires the result be castable to ``out``'s dtype, and resizes a wrongly shaped
# ``out`` -- silently when it was empty, with a warning otherwise.  On backends whose
# elementwise functions take ``out=`` (NumPy, CuPy) an op that declares ``inplace_impl``
# writes straight into the destination, allocating nothing.


def _inplace_kernel(schema, impl, inplace_impl, tensor_args):
    positions = [i for i, a in tensor_args
                 if not (a.kwarg_only or a.type.is_tensor_list or a.type.optional)]
    if len(positions) == len(tensor_args) and positions in ([0], [0, 1]):
        return _fast_inplace_kernel(schema.full_name, impl, inplace_impl, len(positions) == 2)
    unwrap = _unwrapper(schema, tensor_args)
    operands = _operands(schema, tensor_args)
    name = schema.full_name

    def kernel(self, *args, **kwargs):
        dev = self._device
        backend = dev.backend
        _, rargs, rkwargs = unwrap((self, *args), dict(kwargs))
        if rargs[0] is not self._data:
            raise AssertionError("in-place self must be positional")
        for t in (*args, *kwargs.values()):
            if isinstance(t, Tensor) and t._device is not dev:
                raise device_mismatch(name, dev, t._device)
        if not backend.capabilities.inplace:
            raise RuntimeError(f"{name}: the {backend.name} backend's arrays are immutable; "
                               f"in-place ops on it run through Functionalize")
        if inplace_impl is not None and backend.capabilities.ufunc_out:
            try:
                if inplace_impl(dev.xp, self._data, *rargs, **rkwargs):
                    return self
            except OverflowError:  # Note [Integers out of range]: ``impl`` wraps it
                pass
            except (TypeError, ValueError) as e:
                _raise_inplace_error(name, dev, self, impl, rargs, rkwargs, e)
        try:
            r = backend.ensure_array(impl(dev.xp, *rargs, **rkwargs))
        except (ValueError, TypeError) as e:  # Note [Broadcasting errors]
            raise_named(name, e, *operands(rargs, rkwargs))
        check_inplace_result(name, self, r, backend)
        backend.copy_into(self._data, r)
        return self

    kernel = named(kernel, f"array_api_inplace[{name}]")
    return kernel


def _fast_inplace_kernel(name, impl, inplace_impl, two_tensors: bool):
    """In-place kernel when ``self`` (and maybe ``other``) are the only, positional,
    Tensor arguments (Note [The hot path] in mdtensor/dispatch/callers.py)."""

    def kernel(self, *args, **kwargs):
        dev = self._device
        backend = dev.backend
        if two_tensors:
            other = args[0]
            if other._device is not dev:
                raise device_mismatch(name, dev, other._device)
            args = (other._data, *args[1:])
        if inplace_impl is not None and backend.capabilities.ufunc_out:
            data = self._data
            try:
                if inplace_impl(dev.xp, data, data, *args, **kwargs):
                    return self
            except OverflowError:  # Note [Integers out of range]: ``impl`` wraps it
                pass
            except (TypeError, ValueError) as e:
                _raise_inplace_error(name, dev, self, impl, [data, *args], kwargs, e)
        if not backend.capabilities.inplace:
            raise RuntimeError(f"{name}: the {backend.name} backend's arrays are immutable; "
                               f"in-place ops on it run through Functionalize")
        try:
            r = backend.ensure_array(impl(dev.xp, self._data, *args, **kwargs))
        except (ValueError, TypeError) as e:  # Note [Broadcasting errors]
            raise_named(name, e, self._data, args[0] if two_tensors else None)
        check_inplace_result(name, self, r, backend)
        backend.copy_into(self._data, r)
        return self

    kernel = named(kernel, f"array_api_inplace[{name}]")
    return kernel


def check_inplace_result(name, self, r, backend) -> None:
    if tuple(r.shape) != tuple(self._data.shape):
        raise RuntimeError(
            f"{name}: output with shape {_shape_str(self._data.shape)} doesn't match the "
            f"broadcast shape {_shape_str(r.shape)}"
        )
    rd = backend.dtype_from_native(r.dtype)
    sd = backend.dtype_from_native(self._data.dtype)
    if not can_cast(rd, sd):
        raise RuntimeError(
            f"{name}: result type {rd.name} can't be cast to the desired output type "
            f"{sd.name}"
        )


def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def warn_if_resized(name: str, out, shape) -> None:
    """PyTorch's warning for an ``out=`` tensor with elements resized to ``shape`` (an
    empty one is resized silently); the out= kernels and Functionalize's out= path call
    it.  The warning points at the caller's line, however many layers lie between."""
    if out.numel() != 0:
        warnings.warn(
            f"{name}: An output with one or more elements was resized since it had "
            f"shape {_shape_str(out.shape)}, which does not match the required "
            f"output shape {_shape_str(shape)}. This behavior is deprecated, and in "
            f"a future release outputs will not be resized unless they have zero "
            f"elements.", UserWarning, stacklevel=_caller_stacklevel())


def _caller_stacklevel() -> int:
    """The ``stacklevel`` of the first frame outside mdtensor, for a warning issued by the
    function that calls this (Python 3.12's ``skip_file_prefixes``, by hand)."""
    import os
    import sys

    inside = tuple(os.path.dirname(m.__file__) + os.sep for m in (
        sys.modules["mdtensor"], sys.modules[__package__], sys.modules["mdtensor.backends"]))
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level


def _raise_inplace_error(name, dev, self, impl, rargs, rkwargs, cause):
    # The ufunc refused (shape or casting): recompute to produce PyTorch's message.
    backend = dev.backend
    rargs = list(rargs)
    try:
        r = backend.ensure_array(impl(dev.xp, *rargs, **rkwargs))
    except (ValueError, TypeError) as e:  # Note [Broadcasting errors]
        raise_named(name, e, rargs[0], rargs[1] if len(rargs) > 1 else None)
    check_inplace_result(name, self, r, backend)
    flags = getattr(self._data, "flags", None)
    if flags is not None and not flags.writeable:  # an expanded view (NumPy's are read-only)
        raise RuntimeError(
            f"{name}: unsupported operation: more than one element of the written-to tensor "
            f"refers to a single memory location. Please clone() the tensor before "
            f"performing the operation.") from None
    raise cause


def _out_kernel(schema, impl, inplace_impl, tensor_args):
    # tensor_args of the out schema include 'out' itself; unwrap the inputs only.
    inputs = [(i, a) for i, a in tensor_args if a.name != "out"]
    unwrap = _unwrapper(schema, inputs)
    operands = _operands(schema, inputs)
    name = schema.full_name

    def kernel(*args, out, **kwargs):
        dev, rargs, rkwargs = unwrap(args, dict(kwargs))
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}: argument 'out' must be a Tensor, got "
                            f"{type(out).__name__}")
        if dev is not None and out._device is not dev:
            raise device_mismatch(name, dev, out._device)
        dev = out._device
        backend = dev.backend
        try:
            r = backend.ensure_array(impl(dev.xp, *rargs, **rkwargs))
        except (ValueError, TypeError) as e:  # Note [Broadcasting errors]
            raise_named(name, e, *operands(rargs, rkwargs))
        rd = backend.dtype_from_native(r.dtype)
        od = backend.dtype_from_native(out._data.dtype)
        if not can_cast(rd, od):
            raise RuntimeError(f"{name}: result type {rd.name} can't be cast to the desired "
                               f"output type {od.name}")
        if tuple(out._data.shape) != tuple(r.shape):
            warn_if_resized(name, out, r.shape)
            if backend.capabilities.inplace:
                out._data = dev.xp.empty(r.shape, dtype=out._data.dtype, device=dev.native)
            else:
                out._data = dev.xp.astype(r, out._data.dtype)
                return out
        backend.copy_into(out._data, r) if backend.capabilities.inplace else setattr(
            out, "_data", dev.xp.astype(r, out._data.dtype))
        return out

    kernel = named(kernel, f"array_api_out[{name}]")
    return kernel


# ---------------------------------------------------------------------------------------
# The kernel of an impl


def prepared_impl(impl, schema, accepts=None, promote_scalars=True):
    """``impl`` as the generic kernels of ``schema`` call it: operands checked (Note
    [Accepted dtypes] in ops/_accepted.py), then promoted (Notes [Python scalars on strict
    backends] and [Tensors of different kinds] in ops/_promotion.py).  The JAX backend
    traces the same."""
    if impl is None:
        return None
    if promote_scalars:
        impl = with_scalar_promotion(impl, schema, exact=promote_scalars == "exact")
    return with_accepted_kinds(impl, schema, accepts)


def impl_kernel(schema: FunctionSchema, impl: Callable, inplace_impl: Callable | None = None,
                *, promote_scalars: bool = True, accepts: str | None = None) -> Callable:
    """The kernel of the overload ``schema`` that computes ``impl(xp, *arrays, ...)`` on
    its tensors' arrays: what ``defop`` registers for ArrayAPI, functional, in-place or
    ``out=`` by the schema; a backend registers such kernels for its own key (ops/
    special_values.py).  ``promote_scalars``: Note [Python scalars on strict backends];
    ``accepts``: the op's accepted dtype kinds (Note [Accepted dtypes] in
    ops/_accepted.py), checked first as the catalogue's own kernels check them."""
    impl = prepared_impl(impl, schema, accepts, promote_scalars)
    inplace_impl = with_accepted_kinds(inplace_impl, schema, accepts, offset=2)
    return prepared_kernel(schema, impl, inplace_impl)


def prepared_kernel(schema, kimpl, inplace_impl):
    tensor_args = [(i, a) for i, a in enumerate(schema.arguments) if a.type.is_tensor_like]
    if schema.is_inplace:
        return _inplace_kernel(schema, kimpl, inplace_impl, tensor_args)
    if schema.is_out:
        return _out_kernel(schema, kimpl, inplace_impl, tensor_args)
    return array_api_kernel(schema, kimpl)


# ---------------------------------------------------------------------------------------
# Meta kernels (from the declaration's meta function)


def meta_kernel(schema: FunctionSchema, meta: Callable) -> Callable:
    """A Meta-key kernel: run ``meta`` and make meta tensors of the inferred specs."""
    from mdtensor.backends.meta_backend import MetaArray

    from mdtensor.tensors.device import Device

    name = schema.full_name
    kind = _returns_kind(schema)
    check = axis_check(schema)

    def make(spec):
        shape, dtype = spec
        return Device("meta").wrap(MetaArray(shape, dtype.numpy))

    if schema.is_inplace:
        def kernel(self, *args, **kwargs):
            shape, dtype = meta(self, *args, **kwargs)
            if tuple(shape) != tuple(self.shape):
                raise RuntimeError(
                    f"{name}: output with shape {_shape_str(self.shape)} doesn't match the "
                    f"broadcast shape {_shape_str(shape)}")
            return self
    elif schema.is_out:
        def kernel(*args, out, **kwargs):
            shape, dtype = meta(*args, **kwargs)
            if tuple(out.shape) != tuple(shape):
                out._data = MetaArray(shape, out._data.dtype)
            return out
    else:
        result_type = result_tuple(schema) if kind == "tuple" else None

        def kernel(*args, **kwargs):
            if check is not None and args:  # Note [Axis errors]: the op's name
                check(len(args[0].shape), args[1:], kwargs)
            spec = meta(*args, **kwargs)
            if kind == "tensor":
                return make(spec)
            if kind == "list":
                return tuple(make(s) for s in spec)  # as the real kernels' Tensor[] returns
            return result_type(*(make(s) if s is not None else None for s in spec))

    kernel = named(kernel, f"meta[{name}]")
    return kernel
