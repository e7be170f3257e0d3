"""The errors of the catalogue's kernels, in PyTorch's words and naming the op, whatever the
backend raised: devices that differ, shapes that do not broadcast (Note [Broadcasting
errors]), a call the backend refused (Note [Errors from the backend]), an axis out of range
(Note [Axis errors]).  The kernels check nothing before computing; they call these once the
backend has failed, so a call that succeeds pays nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.operators import dispatcher
from mdtensor.dispatch.schema import FunctionSchema
from mdtensor.tensors.tensor import Tensor

from ._meta_fns import check_has_dimension, normalize_axes

__all__ = [
    "NEEDS_DIMENSION",
    "axis_check",
    "broadcast_error",
    "device_mismatch",
    "raise_from_backend",
    "raise_named",
]


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


#: ops users call through a Python operator: their messages name the operator
_OPERATOR_NAMES = {"basic_index": "__getitem__", "index": "__getitem__",
                   "index_put": "__setitem__"}


def _names_op(msg: str, op_name: str) -> bool:
    """Whether ``msg`` starts by naming the op (``aten::linalg_inv``, ``linalg_inv``,
    ``linalg.inv``, ``inv``; ``__getitem__`` for the indexing ops)."""
    short = op_name.split("::")[-1].split(".")[0]
    names = {op_name, op_name.split(".")[0], short, short.replace("linalg_", "linalg."),
             short.removeprefix("linalg_"), _OPERATOR_NAMES.get(short, short)}
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
