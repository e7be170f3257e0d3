"""How an operator is declared in the catalogue.

Every op is declared once, with ``defop``::

    defop("exp(Tensor self) -> Tensor",
          impl=lambda xp, x: xp.exp(x),      # on raw arrays, against the Array API
          structured=True,                     # also exp_ and exp.out, from the same impl
          meta=meta.unary_float,               # shape/dtype inference without data
          tags=("pointwise",),
          info=OpInfo(ref=np.exp, dtypes=FLOATING, samples=samples.unary))

From that one declaration come: the overloads (``exp``, ``exp_``, ``exp.out``), their
ArrayAPI kernels (the impl wrapped to unwrap tensors, check devices and wrap results), the
Meta kernels (from ``meta``), the ADInplaceOrView kernels of in-place, ``out=`` and view
overloads, the namespace functions and Tensor methods (``ops._methods``), and the OpInfo
sweep's test data.  Derivative formulas are not declared here: they live in
``ops/derivatives.py``, the Autograd layer's rules table, by op name.

Note [NumPy fast impls]
~~~~~~~~~~~~~~~~~~~~~~~
A few hot ops give ``cpu_impl=``: the same computation written against NumPy directly,
registered for the CPU key.  array-api-compat wraps some NumPy functions (``matmul``) and
``np.sum`` goes through Python-level dispatch; on 8-element inputs those layers cost as
much as the arithmetic.  The generic impl still serves every other backend, and the OpInfo
sweep checks both agree with the reference.

Note [Structured ops]
~~~~~~~~~~~~~~~~~~~~~
A structured op gives one functional schema and one impl; its in-place and ``out=`` variants
follow PyTorch's rules: the in-place result must have ``self``'s shape (the other operands
may broadcast to it) and be castable to ``self``'s dtype (``same_kind``); ``out=`` checks the
device, requires the result be castable to ``out``'s dtype, and resizes a wrongly shaped
``out`` -- silently when it was empty, with a warning otherwise.  On backends whose
elementwise functions take ``out=`` (NumPy, CuPy) an op that declares ``inplace_impl``
writes straight into the destination, allocating nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NoReturn

from mdtensor._dtypes import can_cast
from mdtensor.dispatch.callers import _NO
from mdtensor.dispatch.kernel import Kernel, own_code
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import define
from mdtensor.dispatch.operators import dispatcher
from mdtensor.dispatch.schema import FunctionSchema, parse_schema
from mdtensor.tensors.tensor import Tensor

from ._accepted import with_accepted_kinds
from ._meta_fns import check_has_dimension, normalize_axes
from ._promotion import with_scalar_promotion

__all__ = [
    "CATALOGUE",
    "ErrorInput",
    "OpDecl",
    "OpInfo",
    "SampleInput",
    "Ufunc",
    "defop",
    "impl_kernel",
    "structured_variants",
]


@dataclass
class SampleInput:
    """One call of an op in the OpInfo sweep: ``op(*args, **kwargs)``.

    Tensor arguments are NumPy arrays here; the sweep converts them to tensors on the
    device under test and the NumPy reference receives them as they are.
    """

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    name: str = ""


@dataclass
class ErrorInput:
    """A call that must raise ``error`` with a message matching ``match`` (a regex)."""

    sample: SampleInput
    error: type = Exception
    match: str = ""


@dataclass
class OpInfo:
    """Test data for the OpInfo sweep.

    Attributes:
        ref: NumPy reference taking the sample's arguments (NumPy arrays) and returning
            what the op returns (arrays).  None: no reference comparison.
        dtypes: the dtypes the op supports (mdtensor DTypes).
        samples: ``samples(dtype, rng) -> iterable of SampleInput``.
        errors: ``errors() -> iterable of ErrorInput``.
        rtol/atol: comparison tolerances per dtype kind ('f', 'c'), or overrides.
        differentiable: gradcheck the op in float64.
        supports_out/inplace: sweep the generated variants (structured ops).
    """

    ref: Callable | None = None
    dtypes: tuple = ()
    samples: Callable | None = None
    errors: Callable | None = None
    rtol: float | None = None
    atol: float | None = None
    differentiable: bool = True
    skip: tuple = ()  # names of sweep checks to skip, each with a reason in a comment


@dataclass
class OpDecl:
    """A catalogue entry (see the module docstring)."""

    name: str
    overloads: list = field(default_factory=list)  # every OpOverload it defined
    functional: list = field(default_factory=list)
    inplace: list = field(default_factory=list)
    out: list = field(default_factory=list)
    impl: Callable | None = None
    meta: Callable | None = None
    tags: tuple = ()
    info: OpInfo | None = None
    names: tuple = ()  # namespace function names
    methods: tuple = ()  # Tensor method names
    kwarg_aliases: dict = field(default_factory=dict)
    varargs: bool = False  # methods take x.view(2, 3) as well as x.view((2, 3))
    star_args: bool = False  # the namespace function takes *tensors (meshgrid, ...)
    #: the overloads Tensor methods resolve among (Note [Torch methods] in ops/_methods.py);
    #: empty: all of them
    method_overloads: tuple = ()
    accepts: str | None = None  # Note [Accepted dtypes] in ops/_accepted.py


CATALOGUE: dict[str, OpDecl] = {}


# ---------------------------------------------------------------------------------------
# Errors shared by generated kernels


def device_mismatch(op_name: str, a, b) -> ValueError:
    return ValueError(
        f"{op_name}: expected all tensors to be on the same device, but found tensors on "
        f"{a} and {b}"
    )


def broadcast_error(op_name: str, shapes) -> ValueError | None:
    """PyTorch's error for ``shapes`` that do not broadcast together (None when they do):
    the first mismatch between the shapes broadcast so far (tensor a) and the next one
    (tensor b), as PyTorch's ``infer_size`` words it."""
    a = ()
    for k, b in enumerate(shapes):
        b = tuple(b)
        if k:
            n = max(len(a), len(b))
            a1, b1 = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
            for dim in range(n - 1, -1, -1):
                x, y = a1[dim], b1[dim]
                if x != y and x != 1 and y != 1:
                    return ValueError(
                        f"{op_name}: The size of tensor a ({x}) must match the size of "
                        f"tensor b ({y}) at non-singleton dimension {dim}")
            b = tuple(y if x == 1 else x for x, y in zip(a1, b1))
        a = b
    return None


def raise_named(op_name: str, exc: Exception, *operands) -> NoReturn:
    """Raise ``exc`` (raised by the backend while computing ``op_name`` on the arrays
    ``operands``; call this in its ``except`` block) as an error that names the op.

    Note [Broadcasting errors]: a failure whose message speaks of broadcasting, on operands
    whose shapes do not broadcast, becomes PyTorch's ValueError (``The size of tensor a (4)
    must match the size of tensor b (3) at non-singleton dimension 0``) whatever the backend
    raised (NumPy: ValueError, JAX: TypeError).  The kernels call this only once the
    backend has failed, so a call that succeeds pays nothing.  Any other ValueError gets the
    op's name in front; any other exception is raised as it is.
    """
    msg = str(exc)
    if "broadcast" in msg.lower():
        shapes = [s for s in (getattr(o, "shape", None) for o in operands) if s is not None]
        err = broadcast_error(op_name, shapes)
        if err is not None:
            raise err from None
    if not isinstance(exc, ValueError) or msg.startswith(op_name):
        raise exc
    raise type(exc)(f"{op_name}: {msg}") from None


# Note [Errors from the backend]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A call the backend refuses must not show the backend's own words (NumPy's gufunc
# signatures, JAX's ``dot_general``, array_api_strict's dtype lists): the error names the op,
# what it expected and what it got, and has the same type on every backend.  The kernels do
# not check before computing (a call that succeeds pays nothing); one whose backend failed
# calls ``raise_from_backend``, which asks, in order:
#
# 1. broadcasting (Note [Broadcasting errors]);
# 2. the op's Meta kernel, run on stand-ins of the arrays (their shape and dtype) with the
#    same other arguments: the meta functions check shapes (``matmul``'s inner sizes, the
#    square matrices of ``inv``) and raise the op's own message;
# 3. for a TypeError, the dtypes the op's declaration supports (its OpInfo ``dtypes``): a
#    TypeError naming the op, the dtypes it takes and the one it got (``bitwise_and`` of
#    float32);
# 4. otherwise the backend's error, of its type, with the op's name in front.


def _stand_in(v):
    """A meta tensor with the shape and dtype of the backend array ``v`` (lists mapped)."""
    if isinstance(v, (list, tuple)):
        return type(v)(_stand_in(x) for x in v)
    if isinstance(v, Tensor) or not (hasattr(v, "shape") and hasattr(v, "dtype")):
        return v
    from mdtensor.backends.meta_backend import MetaArray

    from mdtensor.tensors.device import Device

    from ._promotion import dtype_of

    return Device("meta").wrap(MetaArray(tuple(v.shape), dtype_of(v).numpy))


def _arrays(args, kwargs):
    for v in (*args, *kwargs.values()):
        for x in (v if isinstance(v, (list, tuple)) else (v,)):
            if hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, Tensor):
                yield x


def _names_op(msg: str, op_name: str) -> bool:
    """Whether ``msg`` starts by naming the op (``aten::linalg_inv``, ``linalg_inv``,
    ``linalg.inv``, ``inv``)."""
    short = op_name.split("::")[-1].split(".")[0]
    names = {op_name, op_name.split(".")[0], short, short.replace("linalg_", "linalg."),
             short.removeprefix("linalg_")}
    return any(msg.startswith(n + ":") for n in names)


def _named(op_name: str, e: Exception) -> Exception:
    msg = str(e)
    if isinstance(e, IndexError):  # PyTorch's wording
        msg = msg.replace("for axis", "for dimension")
    return e if _names_op(msg, op_name) and msg == str(e) else type(e)(
        msg if _names_op(msg, op_name) else f"{op_name}: {msg}")


def raise_from_backend(op_name: str, exc: Exception, args, kwargs=None) -> NoReturn:
    """Raise the op's error for a call its backend refused with ``exc`` (Note [Errors from
    the backend]); ``args``/``kwargs`` are the call's arguments with tensors as arrays."""
    kwargs = kwargs or {}
    arrays = list(_arrays(args, kwargs))
    if "broadcast" in str(exc).lower():
        err = broadcast_error(op_name, [tuple(a.shape) for a in arrays])
        if err is not None:
            raise err from None
    op = dispatcher.overloads.get(op_name)
    metas = op.kernels_for(DispatchKey.Meta) if op is not None else None
    if metas:
        try:
            metas[-1].fn(*_stand_in(list(args)), **{k: _stand_in(v) for k, v in
                                                     kwargs.items()})
        except NotImplementedError:
            pass  # a meta function that cannot tell (a data-dependent shape)
        except (ValueError, TypeError, IndexError, RuntimeError) as e:
            msg = str(e)
            if "positional argument" not in msg and "keyword argument" not in msg:
                raise _named(op_name, e) from None
    decl = getattr(op, "decl", None)
    info = getattr(decl, "info", None)
    if info is not None and info.dtypes and isinstance(exc, TypeError):
        # a dtype refused (a ValueError is about values: linalg.inv of a singular complex
        # matrix is no dtype the op lacks, whatever dtypes its OpInfo samples)
        from ._promotion import dtype_of

        for a in arrays:
            d = dtype_of(a)
            if d not in info.dtypes:
                raise TypeError(f"{op_name}: expected tensors of dtype "
                                f"{', '.join(t.name for t in info.dtypes)}; got {d.name}"
                                ) from None
    if not isinstance(exc, (ValueError, TypeError, IndexError)):
        raise exc
    err = _named(op_name, exc)
    if err is exc:
        raise exc
    raise err from None


#: ops whose ``axis`` is not an axis of their first Tensor: of their result (one dimension
#: more than ``self``), or of their operands' broadcast shape (Array API vecdot, cross)
_NOT_SELF_AXIS = frozenset({"unsqueeze", "unsqueeze_copy", "vecdot", "linalg_cross"})
#: ops that take an axis more than once (``roll(x, (1, 1), axis=(0, 0))``, as PyTorch)
_REPEATS = frozenset({"roll"})
#: ops that need a dimension to work along: a 0-d tensor has no axis 0 for them (PyTorch's
#: ``Dimension specified as 0 but tensor has no dimensions``), where reductions, sort, flip
#: and softmax take a 0-d tensor's axis 0 or -1 as its element (Note [Axes of 0-d tensors]
#: in ops/_meta_fns.py)
NEEDS_DIMENSION = frozenset({
    "roll", "unbind", "unbind_copy", "narrow", "narrow_copy", "split", "split_copy", "chunk",
    "chunk_copy", "repeat_interleave", "take", "fft_fft", "fft_ifft", "fft_rfft",
    "fft_irfft", "fft_hfft", "fft_ihfft"})


def axis_check(schema: FunctionSchema) -> Callable | None:
    """``check(ndim, rest, kwargs)`` for an op whose ``axis``/``dim`` argument is an axis of
    its first argument, a Tensor of ``ndim`` dimensions (None for other ops): it raises
    PyTorch's IndexError naming the op when that axis is out of range (``sum: axis 5 is
    out of range for a tensor of dimension 2 (expected to be in range [-2, 1])``), a
    ValueError naming it for repeated axes, and returns otherwise.  ``rest`` and
    ``kwargs`` are the arguments after the Tensor.

    Note [Axis errors]: the backend kernels do not check axes before computing.  One
    whose backend failed runs the check in its ``except`` block; when the axis is in range
    the kernel re-raises the original error.  So an axis
    out of range gives the same error, naming the op, whatever the backend raised (NumPy:
    AxisError, JAX: ValueError, an impl's own shape arithmetic: IndexError), as PyTorch
    checks dimensions before anything else; and a call that succeeds pays nothing.  The
    Meta kernels check first, as they compute nothing.
    """
    args = schema.arguments
    if not args or not args[0].type.is_tensor or schema.name in _NOT_SELF_AXIS:
        return None
    found = [(i, a) for i, a in enumerate(args)
             if a.name in ("axis", "dim") and a.type.base == "int"]
    if not found:
        return None
    i, a = found[0]
    op = schema.name
    name = a.name
    pos = None if a.kwarg_only else i - 1  # index into ``rest``
    default = a.default
    repeats = op in _REPEATS
    needs_dim = op in NEEDS_DIMENSION

    def check(ndim: int, rest, kwargs) -> None:
        if pos is not None and pos < len(rest):
            axis = rest[pos]
        else:
            axis = kwargs.get(name, default)
        if needs_dim:
            check_has_dimension(op, ndim, axis)
        if isinstance(axis, int):
            normalize_axes(op, axis, ndim)
        elif isinstance(axis, (list, tuple)) and all(isinstance(v, int) for v in axis):
            if repeats:
                for v in axis:
                    normalize_axes(op, v, ndim)
            else:
                normalize_axes(op, axis, ndim)

    return check



def _shape_str(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _dtype_torch(dt) -> str:
    from mdtensor._dtypes import as_dtype

    return as_dtype(dt).name


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


def _result_tuple(schema: FunctionSchema):
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
        result_type = _result_tuple(schema)
        # None is an undefined output (matmul_backward's masked-out gradient)
        return lambda r: result_type(*(wrap(x) if f and x is not None else x
                                       for x, f in zip(r, flags)))
    return lambda r: r


class Ufunc:
    """``cpu_impl=Ufunc(np.exp)``: the NumPy ufunc itself is the CPU kernel's computation
    (Note [NumPy fast impls]), with no Python frame between the kernel and NumPy.

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


def array_api_kernel(schema: FunctionSchema, impl: Callable, generic: Callable | None = None
                     ) -> Callable:
    """Wrap ``impl(xp, *arrays, ...)`` into a kernel taking and returning Tensors.

    ``impl`` may be a ``Ufunc``; ``generic`` is then the impl for the calls it cannot serve.
    """
    if isinstance(impl, Ufunc):
        return _ufunc_kernel(schema, impl, generic)
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


#: the array dtype kinds a Python scalar is of a higher kind than: NumPy would promote
#: such pairs by its own rule (int64 + 0.5 is float64), mdtensor by PyTorch's (Note
#: [Scalars of a higher kind] in mdtensor/_dtypes.py), so the ufunc kernels send them to
#: the generic impl, whose scalar promotion follows the Meta kernels
_HIGHER = {int: "b", float: "biu", complex: "biuf"}


def _scalar_failure(e, name, fallback, args, arrays):
    """A ufunc kernel's call with a Python scalar failed: an int out of its tensor's range
    takes the generic impl (Note [Integers out of range]), a refused call is explained
    (Note [Errors from the backend]); anything else propagates."""
    if isinstance(e, OverflowError):
        return fallback(*args)
    if isinstance(e, (ValueError, TypeError)):
        raise_from_backend(name, e, arrays)
    raise e


def _ufunc_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
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
            try:
                return d.wrap(uf(a._data, b._data))
            except (ValueError, TypeError) as e:  # Note [Errors from the backend]
                raise_from_backend(name, e, (a._data, b._data))
    elif pos == (0, 1):
        def kernel(a, b, *rest, **kwargs):
            if rest or kwargs:
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
    kernel = own_code(kernel, f"ufunc[{name}]")  # Note [Own code objects]
    return kernel


def _positional_out(uf):
    """``uf`` callable as ``uf(*inputs, out)``: NumPy 2.4 deprecates a positional out= for
    maximum and minimum (a third input, meant?), which get a keyword one."""
    if uf.nin == 2 and uf.__name__ in ("maximum", "minimum"):
        def with_out(a, b, out):
            return uf(a, b, out=out)
        return with_out
    return uf


def _ufunc_inplace_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
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
    kernel = own_code(kernel, f"ufunc_inplace[{name}]")  # Note [Own code objects]
    return kernel


def _ufunc_out_kernel(schema: FunctionSchema, spec: Ufunc, generic: Callable) -> Callable:
    """``op(x, y, out=o)`` on NumPy as ``ufunc(x, y, o)``: the result written into ``out``
    directly, where the generic out= kernel computes a new array and copies it (a 4M-element
    ``add`` allocated 16 MB).  NumPy's ``same_kind`` casting into ``out`` is PyTorch's rule
    for out= as for in-place ops (``_ufunc_inplace_kernel``).  An operand of ``out``'s shape
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
    kernel = own_code(kernel, f"ufunc_out[{name}]")  # Note [Own code objects]
    return kernel


def _fast_kernel(name, impl, pos, extra, check=None):
    """Kernels for the common shapes of schema (Note [The hot path] in
    mdtensor/dispatch/callers.py).

    ``extra``: the schema has positional non-Tensor arguments after the tensors, so the
    kernel forwards ``*rest``; without them it avoids building the tuple, and it calls
    ``impl`` without ``**kwargs`` when none were given.  ``check``: the op's
    ``axis_check`` (Note [Axis errors]).
    """
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
            try:
                if kwargs:
                    return d.wrap(impl(d.xp, a._data, **kwargs))
                return d.wrap(impl(d.xp, a._data))
            except Exception as e:
                if check is not None:
                    check(len(a._data.shape), (), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data,), kwargs)
    elif pos == (0,):
        # Note [Star calls] in mdtensor/dispatch/callers.py
        def kernel(a, b=_NO, /, *rest, **kwargs):
            d = a._device
            try:
                if b is _NO:
                    if kwargs:
                        return d.wrap(impl(d.xp, a._data, **kwargs))
                    return d.wrap(impl(d.xp, a._data))
                if rest or kwargs:
                    return d.wrap(impl(d.xp, a._data, b, *rest, **kwargs))
                return d.wrap(impl(d.xp, a._data, b))
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
            try:
                return d.wrap(impl(d.xp, a._data, b._data, *rest, **kwargs))
            except Exception as e:
                if check is not None:
                    check(len(a._data.shape), (b, *rest), kwargs)
                if not isinstance(e, (ValueError, TypeError, IndexError)):
                    raise
                raise_from_backend(name, e, (a._data, b._data, *rest), kwargs)
    kernel = own_code(kernel, f"array_api[{name}]")  # Note [Own code objects]
    if pos == (0,):
        # ``impl(xp, array, *rest, **kwargs)`` wrapped by ``device.wrap``, for a layer
        # that fuses it into its own kernel (Note [Fused view kernels] in
        # mdtensor/layers/inplace_or_view.py)
        kernel.array_impl = impl
    return kernel


def _unwrapper(schema: FunctionSchema, tensor_args):
    """``unwrap(args, kwargs) -> (device, args, kwargs)`` with arrays in place of tensors."""
    name = schema.full_name

    def unwrap(args, kwargs):
        dev = None
        args = list(args)
        for i, a in tensor_args:
            if i < len(args) and not a.kwarg_only:
                holder, slot = args, i
            elif a.name in kwargs:
                if kwargs is not None and not isinstance(kwargs, dict):
                    kwargs = dict(kwargs)
                holder, slot = kwargs, a.name
            else:
                continue
            v = holder[slot]
            if v is None:
                continue
            if a.type.is_tensor_list:
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
                    raise TypeError(f"{name}: argument '{a.name}' must be a Tensor, got "
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

    def kernel(*args, **kwargs):
        kwargs = dict(kwargs)
        dev, args, kwargs = unwrap(args, kwargs)
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
        return _wrap_out(dev, kind, schema)(r)

    kernel = own_code(kernel, f"array_api[{name}]")  # Note [Own code objects]
    return kernel


# ---------------------------------------------------------------------------------------
# Structured variants


def structured_variants(schema: FunctionSchema) -> tuple[str, str]:
    """The in-place and out= schema strings of a functional schema."""
    args = [str(a) for a in schema.arguments]
    positional = [str(a) for a in schema.arguments if not a.kwarg_only]
    kwonly = [str(a) for a in schema.arguments if a.kwarg_only]
    ns = "" if schema.namespace == "aten" else schema.namespace + "::"
    ov = schema.overload_name
    self_arg = schema.arguments[0]
    inplace_first = str(self_arg).replace(str(self_arg.type), "Tensor(a!)", 1)
    inplace = (f"{ns}{schema.name}_{'.' + ov if ov else ''}"
               f"({', '.join([inplace_first] + args[1:])}) -> Tensor(a!)")
    out_ov = "out" if ov in ("", "Tensor") else f"{ov}_out"
    out_args = positional + ["*"] + kwonly + ["Tensor(a!) out"]
    out = f"{ns}{schema.name}.{out_ov}({', '.join(out_args)}) -> Tensor(a!)"
    return inplace, out


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
        _check_inplace_result(name, self, r, backend)
        backend.copy_into(self._data, r)
        return self

    kernel = own_code(kernel, f"array_api_inplace[{name}]")  # Note [Own code objects]
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
        _check_inplace_result(name, self, r, backend)
        backend.copy_into(self._data, r)
        return self

    kernel = own_code(kernel, f"array_api_inplace[{name}]")  # Note [Own code objects]
    return kernel


def _check_inplace_result(name, self, r, backend) -> None:
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
    _check_inplace_result(name, self, r, backend)
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

    kernel = own_code(kernel, f"array_api_out[{name}]")  # Note [Own code objects]
    return kernel


# ---------------------------------------------------------------------------------------
# Registration


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
    return _impl_kernel(schema, impl, inplace_impl)


def _impl_kernel(schema, kimpl, inplace_impl):
    tensor_args = [(i, a) for i, a in enumerate(schema.arguments) if a.type.is_tensor_like]
    if schema.is_inplace:
        return _inplace_kernel(schema, kimpl, inplace_impl, tensor_args)
    if schema.is_out:
        return _out_kernel(schema, kimpl, inplace_impl, tensor_args)
    return array_api_kernel(schema, kimpl)


def _register(op, fn, key, **kw) -> None:
    op.register_kernel(Kernel(fn, key, origin="mdtensor", **kw))


def _register_leaf(op, fn, key) -> None:
    """A kernel built from an ``impl``: it computes on raw arrays and calls no op."""
    _register(op, fn, key, leaf=True)


def defop(
    schema: str,
    *,
    impl: Callable | None = None,
    structured: bool = False,
    inplace_impl: Callable | None = None,
    composite: Callable | None = None,
    explicit: Callable | None = None,
    kernels: dict | None = None,
    meta: Callable | None = None,
    tags: Iterable[str] = (),
    info: OpInfo | None = None,
    names: Iterable[str] | None = None,
    methods: Iterable[str] | None = None,
    kwarg_aliases: dict | None = None,
    decl: OpDecl | None = None,
    varargs: bool = False,
    cpu_impl: Callable | None = None,
    star_args: bool = False,
    promote_scalars: bool | str = True,
    method_overloads: Iterable[str] = (),
    accepts: str | None = None,
) -> OpDecl:
    """Declare an op (see the module docstring).

    Args:
        schema: the functional schema (for structured ops) or the op's only schema.
        impl: ``impl(xp, *args, **kwargs)`` on raw arrays; registered for ArrayAPI.
        structured: also define the in-place and ``out=`` variants from ``impl``.
        inplace_impl: ``inplace_impl(xp, out_array, *args, **kwargs)`` writing into
            ``out_array`` with the backend's ``out=`` (backends with ``ufunc_out``); it
            returns False when this backend's function takes no ``out=``, and the kernel
            computes and copies instead.
        composite: CompositeImplicitAutograd kernel (in terms of other md ops).
        explicit: CompositeExplicitAutograd kernel (other md ops; own derivative).
        kernels: extra kernels, ``{key name: fn}`` (e.g. a NumPy-specific ``"CPU"``).
        meta: ``meta(*args, **kwargs)`` -> ``(shape, dtype)`` (or a list/tuple of them).
        tags: PyTorch-style tags: pointwise, reduction, view, inplace, factory, ...
        info: OpInfo test data.
        names: namespace function names (default: the op name).
        methods: Tensor method names (default: none).
        kwarg_aliases: torch-style keyword spellings, ``{"dim": "axis"}``.
        decl: add this schema as one more overload of an existing declaration.
        varargs: Tensor methods also accept the int list as separate arguments.
        method_overloads: the overloads (names) Tensor methods resolve among, where the
            Array API and PyTorch give one call two meanings (Note [Torch methods] in
            ops/_methods.py).
        cpu_impl: an impl for the NumPy backend only (a direct CPU kernel, rung 1), where
            NumPy's own function is much faster than the generic one (Note [NumPy fast
            impls]).
        promote_scalars: the kernels bring a ``Scalar self``/``Scalar other`` and the other
            operand into the pairs the Array API specifies before calling ``impl`` (Note
            [Python scalars on strict backends] in ops/_promotion.py); False for an impl
            that converts its operands itself; ``"exact"`` for a comparison (Note
            [Integers out of range]).
        accepts: the dtype kinds the op's ``self`` and ``other`` may have (``"biuf"``:
            real; ``"fc"``: floating or complex); others raise TypeError naming the op
            (Note [Accepted dtypes] in ops/_accepted.py).  None: whatever the backend takes.
    """
    fschema = parse_schema(schema)
    tags = tuple(tags)
    if decl is None:
        decl = OpDecl(name=fschema.name, impl=impl, meta=meta, tags=tags, info=info,
                      names=tuple(names) if names is not None else (fschema.name,),
                      methods=tuple(methods or ()), kwarg_aliases=dict(kwarg_aliases or {}),
                      varargs=varargs, star_args=star_args,
                      method_overloads=tuple(method_overloads), accepts=accepts)
        key = f"{fschema.namespace}::{fschema.name}"
        if key in CATALOGUE:
            raise RuntimeError(f"{key} is declared twice in the catalogue")
        CATALOGUE[key] = decl
    view = fschema.is_view
    if view and "view" not in tags:
        tags = tags + ("view",)
    op = define(fschema, tags=tags)
    op.decl = decl
    decl.overloads.append(op)
    (decl.inplace if fschema.is_inplace else decl.out if fschema.is_out
     else decl.functional).append(op)
    # the impl the kernels call (the structured variants below wrap ``impl`` for their own
    # schemas)
    accepts = decl.accepts
    kimpl = prepared_impl(impl, fschema, accepts, promote_scalars)
    raw_inplace_impl = inplace_impl  # for the structured variants, which check for themselves
    inplace_impl = with_accepted_kinds(inplace_impl, fschema, accepts, offset=2)
    if isinstance(cpu_impl, Ufunc) and accepts:
        # the ufunc serves the accepted kinds only; the rest reach the checking impl
        cpu_impl = Ufunc(cpu_impl.fn, True, "".join(k for k in cpu_impl.kinds if k in accepts)
                         if cpu_impl.floats_only else accepts)
    elif cpu_impl is not None:
        cpu_impl = with_accepted_kinds(cpu_impl, fschema, accepts)
    if impl is not None:
        _register_leaf(op, _impl_kernel(fschema, kimpl, inplace_impl), DispatchKey.ArrayAPI)
    if cpu_impl is not None and not (fschema.is_inplace or fschema.is_out):
        _register_leaf(op, array_api_kernel(fschema, cpu_impl, kimpl), DispatchKey.CPU)
    elif (isinstance(cpu_impl, Ufunc) and fschema.is_inplace and impl is not None
          and cpu_impl.fn.signature is None):
        # Elementwise ufuncs only: a generalized ufunc (matmul) broadcasts its result into
        # ``out``, where PyTorch's in-place rule wants an error.
        generic = _impl_kernel(fschema, kimpl, inplace_impl)
        _register_leaf(op, _ufunc_inplace_kernel(fschema, cpu_impl, generic), DispatchKey.CPU)
    elif (isinstance(cpu_impl, Ufunc) and fschema.is_out and impl is not None
          and cpu_impl.fn.signature is None):
        generic = _impl_kernel(fschema, kimpl, inplace_impl)
        _register_leaf(op, _ufunc_out_kernel(fschema, cpu_impl, generic), DispatchKey.CPU)
    if composite is not None:
        _register(op, composite, DispatchKey.CompositeImplicitAutograd)
    if explicit is not None:
        _register(op, explicit, DispatchKey.CompositeExplicitAutograd)
    for key_name, fn in (kernels or {}).items():
        _register(op, fn, DispatchKey[key_name])
    if meta is None and "dynamic_output_shape" in tags:
        meta = _data_dependent(fschema.name)
    if meta is not None and "Meta" not in (kernels or {}):
        _register(op, _meta_kernel(fschema, with_accepted_kinds(meta, fschema, accepts, 0)),
                  DispatchKey.Meta)
    _packet_aliases(op, decl)
    if structured:
        if not impl:
            raise ValueError(f"{fschema.full_name}: a structured op needs impl=")
        inplace_s, out_s = structured_variants(fschema)
        for s in (inplace_s, out_s):
            defop(s, impl=impl, inplace_impl=raw_inplace_impl, meta=meta, tags=tags, decl=decl,
                  cpu_impl=cpu_impl if isinstance(cpu_impl, Ufunc) else None,
                  promote_scalars=promote_scalars)
        if not any(t == "inplace" for t in tags):
            decl.inplace[-1].tags = decl.inplace[-1].tags | {"inplace"}
    return decl


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


def _data_dependent(name: str) -> Callable:
    """The meta function of an op whose output shape depends on the values (nonzero,
    unique): it raises, as PyTorch's Meta kernels of such ops do, saying why."""
    def meta(*args, **kwargs):
        raise NotImplementedError(f"{name}: the output shape is data-dependent; meta and "
                                  f"fake tensors cannot compute it")
    return meta


def _packet_aliases(op, decl) -> None:
    if decl.kwarg_aliases:
        op.overloadpacket.add_kwarg_aliases(decl.kwarg_aliases)


# ---------------------------------------------------------------------------------------
# Meta kernels (from the declaration's meta function)


def _meta_kernel(schema: FunctionSchema, meta: Callable) -> Callable:
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
        result_type = _result_tuple(schema) if kind == "tuple" else None

        def kernel(*args, **kwargs):
            if check is not None and args:  # Note [Axis errors]: the op's name
                check(len(args[0].shape), args[1:], kwargs)
            spec = meta(*args, **kwargs)
            if kind == "tensor":
                return make(spec)
            if kind == "list":
                return tuple(make(s) for s in spec)  # as the real kernels' Tensor[] returns
            return result_type(*(make(s) if s is not None else None for s in spec))

    kernel = own_code(kernel, f"meta[{name}]")  # Note [Own code objects]
    return kernel
