"""Tensor methods PyTorch code expects that are spellings of other ops, not ops themselves.

``x.float()`` is ``x.to(md.float32)``, ``x.new_zeros(shape)`` is ``md.zeros(shape,
dtype=x.dtype, device=x.device)``, ``x.expand_as(y)`` is ``x.expand(y.shape)``: each is
written here once in terms of catalogue ops, so autograd, modes and every backend see the
op it stands for (a trace shows ``astype``, not ``float``).  ``install`` binds them onto
Tensor (called from ``ops._methods.install``).

Note [Strides]
~~~~~~~~~~~~~~
``stride()`` and ``is_contiguous()`` answer as PyTorch would for the same tensor, in
elements.  On backends whose arrays are views with strides (NumPy, CuPy) they are read from
the array (a transpose is not contiguous, an expanded dimension has stride 0).  Arrays
of the other backends (JAX, Dask, array_api_strict) have no strides to show: every array is
laid out as a new contiguous one, so they report contiguous strides -- what
``contiguous()`` would give.  ``is_contiguous()`` compares the strides with the contiguous
ones, ignoring dimensions of size 1 (PyTorch's rule).
"""

from __future__ import annotations

import mdtensor._dtypes as _dtypes
from mdtensor.tensors.tensor import Tensor

__all__ = ["install"]


def _aten():
    from mdtensor.ops import aten_calls

    return aten_calls


# -- dtype conversions ---------------------------------------------------------------------


def _converter(dtype_name: str, torch_name: str):
    dtype = getattr(_dtypes, dtype_name)

    def convert(self, memory_format=None) -> Tensor:
        return self.to(dtype)

    convert.__name__ = torch_name
    convert.__doc__ = f"``self.to(md.{dtype_name})`` (PyTorch's ``Tensor.{torch_name}()``)."
    return convert


_CONVERSIONS = {"float": "float32", "double": "float64", "half": "float16",
                "bfloat16": "bfloat16", "long": "int64",
                "int": "int32", "short": "int16", "bool": "bool_", "cfloat": "complex64",
                "cdouble": "complex128"}


def type_as(self, other: Tensor) -> Tensor:
    """``self.to(other.dtype)``."""
    if not isinstance(other, Tensor):
        raise TypeError(f"type_as: expected a Tensor, got {type(other).__name__}")
    return self.to(other.dtype)


# -- real and imaginary parts ----------------------------------------------------------------


def _real(self) -> Tensor:
    # PyTorch: the real part of a complex tensor; a real tensor itself
    return _aten().real(self) if self.dtype.kind == "c" else self


def _imag(self) -> Tensor:
    if self.dtype.kind != "c":
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _aten().imag(self)


# -- new tensors like self -------------------------------------------------------------------


def _size_arg(name, size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    for s in size:
        if isinstance(s, bool) or not isinstance(s, int):
            raise TypeError(f"{name}: size must be a tuple of ints, got {size!r}")
    return tuple(size)


def _new(factory):
    def new(self, *size, dtype=None, device=None, requires_grad=False) -> Tensor:
        shape = _size_arg(f"new_{factory}", size)
        return getattr(_aten(), factory)(
            shape, dtype=dtype if dtype is not None else self.dtype,
            device=device if device is not None else self.device, requires_grad=requires_grad)

    new.__name__ = f"new_{factory}"
    new.__doc__ = (f"``md.{factory}(size)`` with ``self``'s dtype and device unless given "
                   f"(PyTorch's ``Tensor.new_{factory}``).")
    return new


def new_full(self, size, fill_value, *, dtype=None, device=None,
             requires_grad=False) -> Tensor:
    """``md.full(size, fill_value)`` with ``self``'s dtype and device unless given."""
    shape = _size_arg("new_full", (size,))
    return _aten().full(shape, fill_value, dtype=dtype if dtype is not None else self.dtype,
                        device=device if device is not None else self.device,
                        requires_grad=requires_grad)


# -- shapes of other tensors -----------------------------------------------------------------


def _as(method_name: str, op_name: str):
    def method(self, other: Tensor) -> Tensor:
        if not isinstance(other, Tensor):
            raise TypeError(f"{method_name}: expected a Tensor, got {type(other).__name__}")
        return getattr(_aten(), op_name)(self, tuple(other.shape))

    method.__name__ = method_name
    method.__doc__ = f"``self.{op_name}(other.shape)``."
    return method


# -- strides -----------------------------------------------------------------------------------


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def stride(self, dim: int | None = None) -> tuple[int, ...] | int:
    """The strides of ``self`` in elements, as PyTorch's (Note [Strides]); with ``dim``,
    the stride of that dimension."""
    shape = tuple(self.shape)
    data = self._data
    native = getattr(data, "strides", None)
    itemsize = self.dtype.itemsize
    contiguous = _contiguous_strides(shape)
    if (isinstance(native, tuple) and len(native) == len(shape) and itemsize
            and 0 not in shape):  # an empty array's strides are NumPy's zeros
        out = tuple(s // itemsize for s in native)
    else:
        out = contiguous
    if dim is None:
        return out
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"stride: dim must be an int, got {type(dim).__name__}")
    n = len(shape)
    if not -max(n, 1) <= dim < max(n, 1):
        raise IndexError(f"stride: Dimension out of range (expected to be in range of "
                         f"[{-max(n, 1)}, {max(n, 1) - 1}], but got {dim})")
    return out[dim] if n else 1


def is_contiguous(self, memory_format=None) -> bool:
    """Whether ``self``'s elements lie in row-major order without gaps (Note [Strides])."""
    shape = tuple(self.shape)
    if 0 in shape:
        return True
    return all(s == c for n, s, c in zip(shape, stride(self), _contiguous_strides(shape))
               if n != 1)


# -- random fills --------------------------------------------------------------------------------


def _fill_with(self, sample):
    """``self`` overwritten with ``sample`` (drawn outside autograd) through ``copy_``."""
    from mdtensor.autograd import no_grad

    with no_grad():
        return self.copy_(sample)


def normal_(self, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with samples of the normal distribution ``N(mean, std**2)``."""
    import mdtensor.random as random

    if self.dtype.kind not in "fc":
        raise TypeError(f"normal_: expected a floating tensor, got {self.dtype.name}")
    if std < 0:
        raise ValueError(f"normal_: expects std >= 0.0, but found std {std}")
    sample = random.randn(tuple(self.shape), dtype=self.dtype, device=self.device,
                          generator=generator)
    return _fill_with(self, sample * std + mean)


def uniform_(self, a: float = 0.0, b: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` with samples of the uniform distribution on ``[a, b)``."""
    import mdtensor.random as random

    if self.dtype.kind not in "fc":
        raise TypeError(f"uniform_: expected a floating tensor, got {self.dtype.name}")
    if a > b:
        raise ValueError(f"uniform_: expects to return a [from, to) range, but found "
                         f"from={a} > to={b}")
    sample = random.rand(tuple(self.shape), dtype=self.dtype, device=self.device,
                         generator=generator)
    return _fill_with(self, sample * (b - a) + a)


def install() -> None:
    """Bind the methods onto Tensor."""
    for torch_name, dtype_name in _CONVERSIONS.items():
        setattr(Tensor, torch_name, _converter(dtype_name, torch_name))
    Tensor.type_as = type_as
    Tensor.real = property(_real, doc="The real part (``self`` for a real tensor).")
    Tensor.imag = property(_imag, doc="The imaginary part of a complex tensor.")
    for factory in ("zeros", "ones", "empty"):
        setattr(Tensor, f"new_{factory}", _new(factory))
    Tensor.new_full = new_full
    Tensor.expand_as = _as("expand_as", "expand")
    Tensor.view_as = _as("view_as", "view")
    Tensor.reshape_as = _as("reshape_as", "reshape")
    Tensor.stride = stride
    Tensor.is_contiguous = is_contiguous
    Tensor.normal_ = normal_
    Tensor.uniform_ = uniform_
