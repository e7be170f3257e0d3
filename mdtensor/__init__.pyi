# Generated from mdtensor's op catalogue by tools/gen_stubs.py; do not edit.
# After adding or changing an op, run: python tools/gen_stubs.py

"""mdtensor: a NumPy-like tensor library with a PyTorch-style dispatcher."""

import builtins
from collections.abc import Sequence
from typing import Any, overload

from . import autograd as autograd
from . import backends as backends
from . import dask as dask
from . import fft as fft
from . import func as func
from . import library as library
from . import linalg as linalg
from . import modes as modes
from . import nn as nn
from . import ops as ops
from . import optim as optim
from . import random as random
from . import sparse as sparse
from . import testing as testing
from ._dtypes import DType as DType
from ._dtypes import bfloat16 as bfloat16
from ._dtypes import bool_ as bool
from ._dtypes import complex64 as cfloat
from ._dtypes import complex64 as complex64
from ._dtypes import complex128 as cdouble
from ._dtypes import complex128 as complex128
from ._dtypes import float16 as float16
from ._dtypes import float16 as half
from ._dtypes import float32 as float
from ._dtypes import float32 as float32
from ._dtypes import float64 as double
from ._dtypes import float64 as float64
from ._dtypes import get_default_dtype as get_default_dtype
from ._dtypes import int8 as int8
from ._dtypes import int16 as int16
from ._dtypes import int16 as short
from ._dtypes import int32 as int
from ._dtypes import int32 as int32
from ._dtypes import int64 as int64
from ._dtypes import int64 as long
from ._dtypes import set_default_dtype as set_default_dtype
from ._dtypes import uint8 as uint8
from ._dtypes import uint16 as uint16
from ._dtypes import uint32 as uint32
from ._dtypes import uint64 as uint64
from ._namespace import __array_namespace_info__ as __array_namespace_info__
from ._namespace import can_cast as can_cast
from ._namespace import e as e
from ._namespace import finfo as finfo
from ._namespace import iinfo as iinfo
from ._namespace import inf as inf
from ._namespace import isdtype as isdtype
from ._namespace import nan as nan
from ._namespace import newaxis as newaxis
from ._namespace import pi as pi
from ._namespace import result_type as result_type
from ._sampling import bernoulli as bernoulli
from ._sampling import multinomial as multinomial
from ._sampling import normal as normal
from ._sampling import rand_like as rand_like
from ._sampling import randint_like as randint_like
from ._sampling import randn_like as randn_like
from ._sampling import randperm as randperm
from ._serialization import load as load
from ._serialization import save as save
from ._typing import (
    Bool,
    CummaxResult,
    CumminResult,
    DeviceLike,
    DTypeLike,
    Float,
    Int,
    IntList,
    KthvalueResult,
    MaxResult,
    MedianResult,
    MinResult,
    Scalar,
    SortResult,
    TopkResult,
    UniqueAllResult,
    UniqueCountsResult,
    UniqueInverseResult,
)
from .compiler.compiled import compile as compile
from .dispatch.keys import DispatchKey as DispatchKey
from .dispatch.keys import DispatchKeySet as DispatchKeySet
from .layers.autograd.grad_mode import enable_grad as enable_grad
from .layers.autograd.grad_mode import inference_mode as inference_mode
from .layers.autograd.grad_mode import is_grad_enabled as is_grad_enabled
from .layers.autograd.grad_mode import is_inference_mode_enabled as is_inference_mode_enabled
from .layers.autograd.grad_mode import no_grad as no_grad
from .layers.autograd.grad_mode import set_grad_enabled as set_grad_enabled
from .modes import DispatchMode as DispatchMode
from .ops.manipulation import broadcast_shapes as broadcast_shapes
from .ops.sparse import sparse_coo_tensor as sparse_coo_tensor
from .ops.sparse import sparse_csr_tensor as sparse_csr_tensor
from .random import Generator as Generator
from .random import manual_seed as manual_seed
from .random import rand as rand
from .random import randint as randint
from .random import randn as randn
from .tensors.device import Device as Device
from .tensors.device import set_default_device as set_default_device
from .tensors.factories import asarray as asarray
from .tensors.factories import from_dlpack as from_dlpack
from .tensors.factories import from_numpy as from_numpy
from .tensors.factories import tensor as tensor
from .tensors.format import get_printoptions as get_printoptions
from .tensors.format import set_printoptions as set_printoptions
from .tensors.layout import Layout as Layout
from .tensors.layout import sparse_coo as sparse_coo
from .tensors.layout import sparse_csr as sparse_csr
from .tensors.layout import strided as strided
from .tensors.tensor import Tensor as Tensor

__all__ = [
    "DType",
    "Device",
    "DispatchKey",
    "DispatchKeySet",
    "DispatchMode",
    "Generator",
    "Layout",
    "Tensor",
    "__array_namespace_info__",
    "abs",
    "absolute",
    "acos",
    "acosh",
    "add",
    "addmm",
    "all",
    "allclose",
    "amax",
    "amin",
    "angle",
    "any",
    "arange",
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "argmax",
    "argmin",
    "argsort",
    "argwhere",
    "asarray",
    "asin",
    "asinh",
    "astype",
    "atan",
    "atan2",
    "atanh",
    "autograd",
    "backends",
    "bernoulli",
    "bfloat16",
    "bincount",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_not",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "bmm",
    "bool",
    "broadcast_arrays",
    "broadcast_shapes",
    "broadcast_to",
    "can_cast",
    "cat",
    "cdist",
    "cdouble",
    "ceil",
    "cfloat",
    "chunk",
    "clamp",
    "clip",
    "clone",
    "column_stack",
    "compile",
    "complex128",
    "complex64",
    "concat",
    "concatenate",
    "conj",
    "contiguous",
    "copysign",
    "cos",
    "cosh",
    "count_nonzero",
    "cummax",
    "cummin",
    "cumprod",
    "cumsum",
    "cumulative_prod",
    "cumulative_sum",
    "dask",
    "diag",
    "diagonal",
    "diff",
    "digamma",
    "div",
    "divide",
    "dot",
    "double",
    "dropout",
    "dstack",
    "e",
    "einsum",
    "empty",
    "empty_like",
    "enable_grad",
    "eq",
    "equal",
    "erf",
    "erfc",
    "erfinv",
    "exp",
    "expand",
    "expand_dims",
    "expm1",
    "eye",
    "fft",
    "fill",
    "finfo",
    "flatten",
    "flip",
    "float",
    "float16",
    "float32",
    "float64",
    "floor",
    "floor_divide",
    "fmod",
    "from_dlpack",
    "from_numpy",
    "full",
    "full_like",
    "func",
    "gather",
    "ge",
    "gelu",
    "get_default_dtype",
    "get_printoptions",
    "greater",
    "greater_equal",
    "gt",
    "half",
    "histc",
    "hstack",
    "hypot",
    "iinfo",
    "imag",
    "index_add",
    "index_copy",
    "index_fill",
    "index_select",
    "inf",
    "inference_mode",
    "int",
    "int16",
    "int32",
    "int64",
    "int8",
    "is_grad_enabled",
    "is_inference_mode_enabled",
    "isclose",
    "isdtype",
    "isfinite",
    "isin",
    "isinf",
    "isnan",
    "kthvalue",
    "le",
    "less",
    "less_equal",
    "lgamma",
    "library",
    "linalg",
    "linspace",
    "load",
    "log",
    "log10",
    "log1p",
    "log2",
    "log_softmax",
    "logaddexp",
    "logcumsumexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "logsumexp",
    "long",
    "lt",
    "manual_seed",
    "masked_fill",
    "matmul",
    "matrix_transpose",
    "max",
    "maximum",
    "mean",
    "median",
    "meshgrid",
    "min",
    "minimum",
    "mm",
    "modes",
    "moveaxis",
    "movedim",
    "mul",
    "multinomial",
    "multiply",
    "nan",
    "nan_to_num",
    "nanmean",
    "nansum",
    "narrow",
    "ne",
    "neg",
    "negative",
    "newaxis",
    "nextafter",
    "nn",
    "no_grad",
    "nonzero",
    "normal",
    "not_equal",
    "ones",
    "ones_like",
    "ops",
    "optim",
    "outer",
    "pad",
    "permute",
    "permute_dims",
    "pi",
    "polygamma",
    "positive",
    "pow",
    "prod",
    "quantile",
    "rand",
    "rand_like",
    "randint",
    "randint_like",
    "randn",
    "randn_like",
    "random",
    "randperm",
    "ravel",
    "real",
    "reciprocal",
    "relu",
    "remainder",
    "repeat",
    "repeat_interleave",
    "reshape",
    "result_type",
    "roll",
    "round",
    "rsqrt",
    "save",
    "scatter",
    "scatter_add",
    "scatter_reduce",
    "searchsorted",
    "set_default_device",
    "set_default_dtype",
    "set_grad_enabled",
    "set_printoptions",
    "short",
    "sigmoid",
    "sign",
    "signbit",
    "silu",
    "sin",
    "sinh",
    "softmax",
    "sort",
    "sparse",
    "sparse_coo",
    "sparse_coo_tensor",
    "sparse_csr",
    "sparse_csr_tensor",
    "split",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "strided",
    "sub",
    "subtract",
    "sum",
    "t",
    "take",
    "take_along_axis",
    "tan",
    "tanh",
    "tensor",
    "tensordot",
    "testing",
    "tile",
    "topk",
    "transpose",
    "tril",
    "tril_indices",
    "triu",
    "triu_indices",
    "trunc",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
    "unbind",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "unsqueeze",
    "unstack",
    "var",
    "vecdot",
    "vstack",
    "where",
    "zeros",
    "zeros_like",
]

__version__: str
__array_api_version__: str

@overload
def abs(self: Tensor) -> Tensor: ...
@overload
def abs(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def absolute(self: Tensor) -> Tensor: ...
@overload
def absolute(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def acos(self: Tensor) -> Tensor: ...
@overload
def acos(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def acosh(self: Tensor) -> Tensor: ...
@overload
def acosh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def add(self: Tensor, other: Tensor, *, alpha: Scalar = ...) -> Tensor: ...
@overload
def add(self: Tensor, other: Tensor, *, alpha: Scalar = ..., out: Tensor) -> Tensor: ...
@overload
def add(self: Tensor, other: Scalar, alpha: Scalar = ...) -> Tensor: ...
@overload
def add(self: Tensor, other: Scalar, alpha: Scalar = ..., *, out: Tensor) -> Tensor: ...
@overload
def add(self: Scalar, other: Tensor, alpha: Scalar = ...) -> Tensor: ...

def addmm(
    self: Tensor,
    mat1: Tensor,
    mat2: Tensor,
    *,
    beta: Scalar = ...,
    alpha: Scalar = ...,
) -> Tensor: ...

@overload
def all(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def all(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

def allclose(
    self: Tensor,
    other: Tensor,
    rtol: Float = ...,
    atol: Float = ...,
    equal_nan: Bool = ...,
) -> builtins.bool: ...

@overload
def amax(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def amax(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def amin(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def amin(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

def angle(self: Tensor) -> Tensor: ...

@overload
def any(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def any(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def arange(
    start: Scalar,
    stop: Scalar | None = ...,
    step: Scalar = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def arange(
    start: Scalar,
    end: Scalar | None = ...,
    step: Scalar = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def arccos(self: Tensor) -> Tensor: ...
@overload
def arccos(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def arccosh(self: Tensor) -> Tensor: ...
@overload
def arccosh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def arcsin(self: Tensor) -> Tensor: ...
@overload
def arcsin(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def arcsinh(self: Tensor) -> Tensor: ...
@overload
def arcsinh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def arctan(self: Tensor) -> Tensor: ...
@overload
def arctan(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def arctan2(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def arctan2(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def arctan2(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def arctan2(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def arctan2(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def arctanh(self: Tensor) -> Tensor: ...
@overload
def arctanh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def argmax(self: Tensor, axis: Int | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def argmax(self: Tensor, dim: Int | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def argmin(self: Tensor, axis: Int | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def argmin(self: Tensor, dim: Int | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def argsort(
    self: Tensor,
    axis: Int = ...,
    descending: Bool = ...,
    *,
    stable: Bool = ...,
) -> Tensor: ...
@overload
def argsort(
    self: Tensor,
    dim: Int = ...,
    descending: Bool = ...,
    *,
    stable: Bool = ...,
) -> Tensor: ...

def argwhere(self: Tensor) -> Tensor: ...

@overload
def asin(self: Tensor) -> Tensor: ...
@overload
def asin(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def asinh(self: Tensor) -> Tensor: ...
@overload
def asinh(self: Tensor, *, out: Tensor) -> Tensor: ...

def astype(
    self: Tensor,
    dtype: DTypeLike,
    *,
    copy: Bool = ...,
    device: DeviceLike | None = ...,
) -> Tensor: ...

@overload
def atan(self: Tensor) -> Tensor: ...
@overload
def atan(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def atan2(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def atan2(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def atan2(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def atan2(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def atan2(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def atanh(self: Tensor) -> Tensor: ...
@overload
def atanh(self: Tensor, *, out: Tensor) -> Tensor: ...

def bincount(self: Tensor, weights: Tensor | None = ..., minlength: Int = ...) -> Tensor: ...

@overload
def bitwise_and(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def bitwise_and(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_and(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def bitwise_and(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_and(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def bitwise_invert(self: Tensor) -> Tensor: ...
@overload
def bitwise_invert(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def bitwise_left_shift(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def bitwise_left_shift(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_left_shift(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def bitwise_left_shift(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_left_shift(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def bitwise_not(self: Tensor) -> Tensor: ...
@overload
def bitwise_not(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def bitwise_or(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def bitwise_or(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_or(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def bitwise_or(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_or(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def bitwise_right_shift(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def bitwise_right_shift(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_right_shift(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def bitwise_right_shift(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_right_shift(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def bitwise_xor(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def bitwise_xor(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_xor(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def bitwise_xor(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def bitwise_xor(self: Scalar, other: Tensor) -> Tensor: ...

def bmm(self: Tensor, mat2: Tensor) -> Tensor: ...

@overload
def broadcast_arrays(*tensors: Tensor) -> tuple[Tensor, ...]: ...
@overload
def broadcast_arrays(tensors: Sequence[Tensor], /) -> tuple[Tensor, ...]: ...

def broadcast_to(self: Tensor, shape: IntList) -> Tensor: ...

@overload
def cat(tensors: Sequence[Tensor], axis: Int | None = ...) -> Tensor: ...
@overload
def cat(tensors: Sequence[Tensor], dim: Int | None = ...) -> Tensor: ...

def cdist(x1: Tensor, x2: Tensor, p: Float = ..., compute_mode: str | None = ...) -> Tensor: ...

@overload
def ceil(self: Tensor) -> Tensor: ...
@overload
def ceil(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def chunk(self: Tensor, chunks: Int, axis: Int = ...) -> tuple[Tensor, ...]: ...
@overload
def chunk(self: Tensor, chunks: Int, dim: Int = ...) -> tuple[Tensor, ...]: ...

@overload
def clamp(self: Tensor, min: Scalar | None = ..., max: Scalar | None = ...) -> Tensor: ...
@overload
def clamp(
    self: Tensor,
    min: Scalar | None = ...,
    max: Scalar | None = ...,
    *,
    out: Tensor,
) -> Tensor: ...
@overload
def clamp(self: Tensor, min: Tensor | None = ..., max: Tensor | None = ...) -> Tensor: ...
@overload
def clamp(self: Tensor, min: Any = ..., max: Any = ...) -> Tensor: ...

@overload
def clip(self: Tensor, min: Scalar | None = ..., max: Scalar | None = ...) -> Tensor: ...
@overload
def clip(
    self: Tensor,
    min: Scalar | None = ...,
    max: Scalar | None = ...,
    *,
    out: Tensor,
) -> Tensor: ...
@overload
def clip(self: Tensor, min: Tensor | None = ..., max: Tensor | None = ...) -> Tensor: ...
@overload
def clip(self: Tensor, min: Any = ..., max: Any = ...) -> Tensor: ...

def clone(self: Tensor) -> Tensor: ...

def column_stack(tensors: Sequence[Tensor]) -> Tensor: ...

@overload
def concat(tensors: Sequence[Tensor], axis: Int | None = ...) -> Tensor: ...
@overload
def concat(tensors: Sequence[Tensor], dim: Int | None = ...) -> Tensor: ...

@overload
def concatenate(tensors: Sequence[Tensor], axis: Int | None = ...) -> Tensor: ...
@overload
def concatenate(tensors: Sequence[Tensor], dim: Int | None = ...) -> Tensor: ...

def conj(self: Tensor) -> Tensor: ...

def contiguous(self: Tensor) -> Tensor: ...

@overload
def copysign(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def copysign(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def copysign(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def copysign(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def copysign(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def cos(self: Tensor) -> Tensor: ...
@overload
def cos(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def cosh(self: Tensor) -> Tensor: ...
@overload
def cosh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def count_nonzero(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def count_nonzero(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

def cummax(self: Tensor, dim: Int) -> CummaxResult: ...

def cummin(self: Tensor, dim: Int) -> CumminResult: ...

@overload
def cumprod(
    self: Tensor,
    axis: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...
@overload
def cumprod(
    self: Tensor,
    dim: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...

@overload
def cumsum(
    self: Tensor,
    axis: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...
@overload
def cumsum(
    self: Tensor,
    dim: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...

@overload
def cumulative_prod(
    self: Tensor,
    axis: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...
@overload
def cumulative_prod(
    self: Tensor,
    dim: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...

@overload
def cumulative_sum(
    self: Tensor,
    axis: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...
@overload
def cumulative_sum(
    self: Tensor,
    dim: Int | None = ...,
    *,
    dtype: DTypeLike | None = ...,
    include_initial: Bool = ...,
) -> Tensor: ...

def diag(self: Tensor, diagonal: Int = ...) -> Tensor: ...

def diagonal(self: Tensor, offset: Int = ..., dim1: Int = ..., dim2: Int = ...) -> Tensor: ...

@overload
def diff(
    self: Tensor,
    axis: Int = ...,
    n: Int = ...,
    *,
    prepend: Tensor | None = ...,
    append: Tensor | None = ...,
) -> Tensor: ...
@overload
def diff(
    self: Tensor,
    dim: Int = ...,
    n: Int = ...,
    *,
    prepend: Tensor | None = ...,
    append: Tensor | None = ...,
) -> Tensor: ...

@overload
def digamma(self: Tensor) -> Tensor: ...
@overload
def digamma(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def div(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def div(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def div(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def div(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def div(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def divide(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def divide(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def divide(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def divide(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def divide(self: Scalar, other: Tensor) -> Tensor: ...

def dot(self: Tensor, tensor: Tensor) -> Tensor: ...

def dropout(input: Tensor, p: Float = ..., train: Bool = ...) -> Tensor: ...

def dstack(tensors: Sequence[Tensor]) -> Tensor: ...

@overload
def einsum(equation: str, /, *tensors: Tensor) -> Tensor: ...
@overload
def einsum(equation: str, tensors: Sequence[Tensor], /) -> Tensor: ...

@overload
def empty(
    shape: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def empty(
    size: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def empty_like(
    self: Tensor,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def eq(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def eq(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def eq(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def equal(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def equal(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def equal(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def erf(self: Tensor) -> Tensor: ...
@overload
def erf(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def erfc(self: Tensor) -> Tensor: ...
@overload
def erfc(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def erfinv(self: Tensor) -> Tensor: ...
@overload
def erfinv(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def exp(self: Tensor) -> Tensor: ...
@overload
def exp(self: Tensor, *, out: Tensor) -> Tensor: ...

def expand(self: Tensor, size: IntList) -> Tensor: ...

@overload
def expand_dims(self: Tensor, axis: IntList) -> Tensor: ...
@overload
def expand_dims(self: Tensor, dim: IntList) -> Tensor: ...

@overload
def expm1(self: Tensor) -> Tensor: ...
@overload
def expm1(self: Tensor, *, out: Tensor) -> Tensor: ...

def eye(
    n_rows: Int,
    n_cols: Int | None = ...,
    *,
    k: Int = ...,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def fill(self: Tensor, value: Scalar) -> Tensor: ...
@overload
def fill(self: Tensor, value: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def fill(self: Tensor, value: Tensor) -> Tensor: ...
@overload
def fill(self: Tensor, value: Tensor, *, out: Tensor) -> Tensor: ...

def flatten(self: Tensor, start_dim: Int = ..., end_dim: Int = ...) -> Tensor: ...

@overload
def flip(self: Tensor, axis: IntList | None = ...) -> Tensor: ...
@overload
def flip(self: Tensor, dims: IntList | None = ...) -> Tensor: ...

@overload
def floor(self: Tensor) -> Tensor: ...
@overload
def floor(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def floor_divide(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def floor_divide(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def floor_divide(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def floor_divide(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def floor_divide(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def fmod(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def fmod(self: Tensor, other: Scalar) -> Tensor: ...

@overload
def full(
    shape: IntList,
    fill_value: Scalar,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def full(
    size: IntList,
    fill_value: Scalar,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def full_like(
    self: Tensor,
    fill_value: Scalar,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def gather(self: Tensor, dim: Int, index: Tensor, *, sparse_grad: Bool = ...) -> Tensor: ...
@overload
def gather(self: Tensor, axis: Int, index: Tensor, *, sparse_grad: Bool = ...) -> Tensor: ...

@overload
def ge(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def ge(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def ge(self: Scalar, other: Tensor) -> Tensor: ...

def gelu(self: Tensor, *, approximate: str = ...) -> Tensor: ...

@overload
def greater(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def greater(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def greater(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def greater_equal(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def greater_equal(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def greater_equal(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def gt(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def gt(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def gt(self: Scalar, other: Tensor) -> Tensor: ...

def histc(self: Tensor, bins: Int = ..., min: Scalar = ..., max: Scalar = ...) -> Tensor: ...

def hstack(tensors: Sequence[Tensor]) -> Tensor: ...

@overload
def hypot(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def hypot(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def hypot(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def hypot(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def hypot(self: Scalar, other: Tensor) -> Tensor: ...

def imag(self: Tensor) -> Tensor: ...

@overload
def index_add(
    self: Tensor,
    dim: Int,
    index: Tensor,
    source: Tensor,
    *,
    alpha: Scalar = ...,
) -> Tensor: ...
@overload
def index_add(
    self: Tensor,
    dim: Int,
    index: Tensor,
    source: Tensor,
    *,
    alpha: Scalar = ...,
    out: Tensor,
) -> Tensor: ...

@overload
def index_copy(self: Tensor, dim: Int, index: Tensor, source: Tensor) -> Tensor: ...
@overload
def index_copy(self: Tensor, dim: Int, index: Tensor, source: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def index_fill(self: Tensor, dim: Int, index: Tensor, value: Scalar) -> Tensor: ...
@overload
def index_fill(self: Tensor, dim: Int, index: Tensor, value: Scalar, *, out: Tensor) -> Tensor: ...

@overload
def index_select(self: Tensor, dim: Int, index: Tensor) -> Tensor: ...
@overload
def index_select(self: Tensor, axis: Int, index: Tensor) -> Tensor: ...

def isclose(
    self: Tensor,
    other: Tensor,
    rtol: Float = ...,
    atol: Float = ...,
    equal_nan: Bool = ...,
) -> Tensor: ...

def isfinite(self: Tensor) -> Tensor: ...

@overload
def isin(elements: Tensor, test_elements: Tensor, *, invert: Bool = ...) -> Tensor: ...
@overload
def isin(elements: Tensor, test_elements: Scalar, *, invert: Bool = ...) -> Tensor: ...
@overload
def isin(elements: Scalar, test_elements: Tensor, *, invert: Bool = ...) -> Tensor: ...

def isinf(self: Tensor) -> Tensor: ...

def isnan(self: Tensor) -> Tensor: ...

def kthvalue(self: Tensor, k: Int, dim: Int = ..., keepdim: Bool = ...) -> KthvalueResult: ...

@overload
def le(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def le(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def le(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def less(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def less(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def less(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def less_equal(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def less_equal(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def less_equal(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def lgamma(self: Tensor) -> Tensor: ...
@overload
def lgamma(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def linspace(
    start: Scalar,
    stop: Scalar,
    num: Int,
    *,
    endpoint: Bool = ...,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def linspace(
    start: Scalar,
    end: Scalar,
    num: Int,
    *,
    endpoint: Bool = ...,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def log(self: Tensor) -> Tensor: ...
@overload
def log(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def log10(self: Tensor) -> Tensor: ...
@overload
def log10(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def log1p(self: Tensor) -> Tensor: ...
@overload
def log1p(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def log2(self: Tensor) -> Tensor: ...
@overload
def log2(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def log_softmax(self: Tensor, dim: Int = ...) -> Tensor: ...
@overload
def log_softmax(self: Tensor, axis: Int = ...) -> Tensor: ...

@overload
def logaddexp(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def logaddexp(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def logaddexp(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def logaddexp(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def logaddexp(self: Scalar, other: Tensor) -> Tensor: ...

def logcumsumexp(self: Tensor, dim: Int) -> Tensor: ...

@overload
def logical_and(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def logical_and(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def logical_and(self: Scalar, other: Tensor) -> Tensor: ...

def logical_not(self: Tensor) -> Tensor: ...

@overload
def logical_or(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def logical_or(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def logical_or(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def logical_xor(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def logical_xor(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def logical_xor(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def logsumexp(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def logsumexp(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def lt(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def lt(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def lt(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def masked_fill(self: Tensor, mask: Tensor, value: Scalar) -> Tensor: ...
@overload
def masked_fill(self: Tensor, mask: Tensor, value: Tensor) -> Tensor: ...

@overload
def matmul(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def matmul(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...

def matrix_transpose(self: Tensor) -> Tensor: ...

@overload
def max(self: Tensor, *, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def max(self: Tensor, *, axis: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...
@overload
def max(self: Tensor, dim: Int, keepdim: Bool = ...) -> MaxResult: ...

@overload
def maximum(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def maximum(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def maximum(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def maximum(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def maximum(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def mean(self: Tensor, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def mean(self: Tensor, dim: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def median(self: Tensor) -> Tensor: ...
@overload
def median(self: Tensor, dim: Int, keepdim: Bool = ...) -> MedianResult: ...

@overload
def meshgrid(*tensors: Tensor, indexing: str = ...) -> tuple[Tensor, ...]: ...
@overload
def meshgrid(tensors: Sequence[Tensor], /, *, indexing: str = ...) -> tuple[Tensor, ...]: ...

@overload
def min(self: Tensor, *, axis: IntList | None = ..., keepdims: Bool = ...) -> Tensor: ...
@overload
def min(self: Tensor, *, axis: IntList | None = ..., keepdim: Bool = ...) -> Tensor: ...
@overload
def min(self: Tensor, dim: Int, keepdim: Bool = ...) -> MinResult: ...

@overload
def minimum(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def minimum(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def minimum(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def minimum(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def minimum(self: Scalar, other: Tensor) -> Tensor: ...

def mm(self: Tensor, mat2: Tensor) -> Tensor: ...

def moveaxis(self: Tensor, source: IntList, destination: IntList) -> Tensor: ...

def movedim(self: Tensor, source: IntList, destination: IntList) -> Tensor: ...

@overload
def mul(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def mul(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def mul(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def mul(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def mul(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def multiply(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def multiply(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def multiply(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def multiply(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def multiply(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def nan_to_num(
    self: Tensor,
    nan: Float | None = ...,
    posinf: Float | None = ...,
    neginf: Float | None = ...,
) -> Tensor: ...
@overload
def nan_to_num(
    self: Tensor,
    nan: Float | None = ...,
    posinf: Float | None = ...,
    neginf: Float | None = ...,
    *,
    out: Tensor,
) -> Tensor: ...

@overload
def nanmean(
    self: Tensor,
    dim: IntList | None = ...,
    keepdim: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...
@overload
def nanmean(
    self: Tensor,
    axis: IntList | None = ...,
    keepdims: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...

@overload
def nansum(
    self: Tensor,
    dim: IntList | None = ...,
    keepdim: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...
@overload
def nansum(
    self: Tensor,
    axis: IntList | None = ...,
    keepdims: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...

def narrow(self: Tensor, dim: Int, start: Int, length: Int) -> Tensor: ...

@overload
def ne(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def ne(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def ne(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def neg(self: Tensor) -> Tensor: ...
@overload
def neg(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def negative(self: Tensor) -> Tensor: ...
@overload
def negative(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def nextafter(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def nextafter(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def nextafter(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def nextafter(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def nextafter(self: Scalar, other: Tensor) -> Tensor: ...

def nonzero(self: Tensor) -> tuple[Tensor, ...]: ...

@overload
def not_equal(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def not_equal(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def not_equal(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def ones(
    shape: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def ones(
    size: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def ones_like(
    self: Tensor,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def outer(self: Tensor, other: Tensor) -> Tensor: ...

def pad(self: Tensor, pad: IntList, mode: str = ..., value: Scalar | None = ...) -> Tensor: ...

@overload
def permute(self: Tensor, axes: IntList) -> Tensor: ...
@overload
def permute(self: Tensor, dims: IntList) -> Tensor: ...

@overload
def permute_dims(self: Tensor, axes: IntList) -> Tensor: ...
@overload
def permute_dims(self: Tensor, dims: IntList) -> Tensor: ...

@overload
def polygamma(n: Int, self: Tensor) -> Tensor: ...
@overload
def polygamma(n: Int, self: Tensor, *, out: Tensor) -> Tensor: ...

def positive(self: Tensor) -> Tensor: ...

@overload
def pow(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def pow(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def pow(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def pow(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def pow(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def prod(
    self: Tensor,
    axis: IntList | None = ...,
    keepdims: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...
@overload
def prod(
    self: Tensor,
    dim: IntList | None = ...,
    keepdim: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...

@overload
def quantile(
    self: Tensor,
    q: Tensor,
    dim: Int | None = ...,
    keepdim: Bool = ...,
    *,
    interpolation: str = ...,
) -> Tensor: ...
@overload
def quantile(
    self: Tensor,
    q: Float,
    dim: Int | None = ...,
    keepdim: Bool = ...,
    *,
    interpolation: str = ...,
) -> Tensor: ...

def ravel(self: Tensor) -> Tensor: ...

def real(self: Tensor) -> Tensor: ...

@overload
def reciprocal(self: Tensor) -> Tensor: ...
@overload
def reciprocal(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def relu(self: Tensor) -> Tensor: ...
@overload
def relu(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def remainder(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def remainder(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def remainder(self: Tensor, other: Scalar) -> Tensor: ...
@overload
def remainder(self: Tensor, other: Scalar, *, out: Tensor) -> Tensor: ...
@overload
def remainder(self: Scalar, other: Tensor) -> Tensor: ...

@overload
def repeat(self: Tensor, repeats: Any, *, axis: Int | None = ...) -> Tensor: ...
@overload
def repeat(self: Tensor, repeats: Any, *, dim: Int | None = ...) -> Tensor: ...

@overload
def repeat_interleave(self: Tensor, repeats: Any, *, axis: Int | None = ...) -> Tensor: ...
@overload
def repeat_interleave(self: Tensor, repeats: Any, *, dim: Int | None = ...) -> Tensor: ...

@overload
def reshape(self: Tensor, shape: IntList, *, copy: Bool | None = ...) -> Tensor: ...
@overload
def reshape(self: Tensor, newshape: IntList, *, copy: Bool | None = ...) -> Tensor: ...

@overload
def roll(self: Tensor, shift: IntList, axis: IntList | None = ...) -> Tensor: ...
@overload
def roll(self: Tensor, shifts: IntList, dims: IntList | None = ...) -> Tensor: ...

@overload
def round(self: Tensor) -> Tensor: ...
@overload
def round(self: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def round(self: Tensor, *, decimals: Int) -> Tensor: ...

@overload
def rsqrt(self: Tensor) -> Tensor: ...
@overload
def rsqrt(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def scatter(self: Tensor, dim: Int, index: Tensor, src: Tensor) -> Tensor: ...
@overload
def scatter(self: Tensor, dim: Int, index: Tensor, src: Tensor, *, out: Tensor) -> Tensor: ...
@overload
def scatter(self: Tensor, dim: Int, index: Tensor, value: Scalar) -> Tensor: ...
@overload
def scatter(self: Tensor, dim: Int, index: Tensor, value: Scalar, *, out: Tensor) -> Tensor: ...

@overload
def scatter_add(self: Tensor, dim: Int, index: Tensor, src: Tensor) -> Tensor: ...
@overload
def scatter_add(self: Tensor, dim: Int, index: Tensor, src: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def scatter_reduce(
    self: Tensor,
    dim: Int,
    index: Tensor,
    src: Tensor,
    reduce: str,
    *,
    include_self: Bool = ...,
) -> Tensor: ...
@overload
def scatter_reduce(
    self: Tensor,
    dim: Int,
    index: Tensor,
    src: Tensor,
    reduce: str,
    *,
    include_self: Bool = ...,
    out: Tensor,
) -> Tensor: ...

@overload
def searchsorted(
    sorted_sequence: Tensor,
    self: Tensor,
    *,
    side: str = ...,
    sorter: Tensor | None = ...,
) -> Tensor: ...
@overload
def searchsorted(
    sorted_sequence: Tensor,
    self: Scalar,
    *,
    side: str = ...,
    sorter: Tensor | None = ...,
) -> Tensor: ...

@overload
def sigmoid(self: Tensor) -> Tensor: ...
@overload
def sigmoid(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def sign(self: Tensor) -> Tensor: ...
@overload
def sign(self: Tensor, *, out: Tensor) -> Tensor: ...

def signbit(self: Tensor) -> Tensor: ...

def silu(self: Tensor) -> Tensor: ...

@overload
def sin(self: Tensor) -> Tensor: ...
@overload
def sin(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def sinh(self: Tensor) -> Tensor: ...
@overload
def sinh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def softmax(self: Tensor, dim: Int = ...) -> Tensor: ...
@overload
def softmax(self: Tensor, axis: Int = ...) -> Tensor: ...

@overload
def sort(
    self: Tensor,
    *,
    axis: Int = ...,
    descending: Bool = ...,
    stable: Bool = ...,
) -> Tensor: ...
@overload
def sort(
    self: Tensor,
    dim: Int = ...,
    descending: Bool = ...,
    *,
    stable: Bool | None = ...,
) -> SortResult: ...

@overload
def split(self: Tensor, split_size_or_sections: IntList, axis: Int = ...) -> tuple[Tensor, ...]: ...
@overload
def split(self: Tensor, split_size: IntList, dim: Int = ...) -> tuple[Tensor, ...]: ...

@overload
def sqrt(self: Tensor) -> Tensor: ...
@overload
def sqrt(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def square(self: Tensor) -> Tensor: ...
@overload
def square(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def squeeze(self: Tensor, axis: IntList | None = ...) -> Tensor: ...
@overload
def squeeze(self: Tensor, dim: IntList | None = ...) -> Tensor: ...

@overload
def stack(tensors: Sequence[Tensor], axis: Int = ...) -> Tensor: ...
@overload
def stack(tensors: Sequence[Tensor], dim: Int = ...) -> Tensor: ...

@overload
def std(
    self: Tensor,
    *,
    axis: IntList | None = ...,
    correction: Float = ...,
    keepdims: Bool = ...,
) -> Tensor: ...
@overload
def std(self: Tensor, unbiased: Bool = ...) -> Tensor: ...
@overload
def std(
    self: Tensor,
    dim: IntList | None = ...,
    *,
    correction: Scalar | None = ...,
    keepdim: Bool = ...,
) -> Tensor: ...
@overload
def std(self: Tensor, dim: IntList | None, unbiased: Bool = ..., keepdim: Bool = ...) -> Tensor: ...

@overload
def sub(self: Tensor, other: Tensor, *, alpha: Scalar = ...) -> Tensor: ...
@overload
def sub(self: Tensor, other: Tensor, *, alpha: Scalar = ..., out: Tensor) -> Tensor: ...
@overload
def sub(self: Tensor, other: Scalar, alpha: Scalar = ...) -> Tensor: ...
@overload
def sub(self: Tensor, other: Scalar, alpha: Scalar = ..., *, out: Tensor) -> Tensor: ...
@overload
def sub(self: Scalar, other: Tensor, alpha: Scalar = ...) -> Tensor: ...

@overload
def subtract(self: Tensor, other: Tensor, *, alpha: Scalar = ...) -> Tensor: ...
@overload
def subtract(self: Tensor, other: Tensor, *, alpha: Scalar = ..., out: Tensor) -> Tensor: ...
@overload
def subtract(self: Tensor, other: Scalar, alpha: Scalar = ...) -> Tensor: ...
@overload
def subtract(self: Tensor, other: Scalar, alpha: Scalar = ..., *, out: Tensor) -> Tensor: ...
@overload
def subtract(self: Scalar, other: Tensor, alpha: Scalar = ...) -> Tensor: ...

@overload
def sum(
    self: Tensor,
    axis: IntList | None = ...,
    keepdims: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...
@overload
def sum(
    self: Tensor,
    dim: IntList | None = ...,
    keepdim: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...

def t(self: Tensor) -> Tensor: ...

@overload
def take(self: Tensor, indices: Tensor, *, axis: Int | None = ...) -> Tensor: ...
@overload
def take(self: Tensor, indices: Tensor, *, dim: Int | None = ...) -> Tensor: ...

@overload
def take_along_axis(self: Tensor, indices: Tensor, axis: Int = ...) -> Tensor: ...
@overload
def take_along_axis(self: Tensor, index: Tensor, dim: Int = ...) -> Tensor: ...

@overload
def tan(self: Tensor) -> Tensor: ...
@overload
def tan(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def tanh(self: Tensor) -> Tensor: ...
@overload
def tanh(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def tensordot(self: Tensor, other: Tensor, *, axes: Any = ...) -> Tensor: ...
@overload
def tensordot(self: Tensor, other: Tensor, *, dims: Any = ...) -> Tensor: ...

@overload
def tile(self: Tensor, reps: IntList) -> Tensor: ...
@overload
def tile(self: Tensor, dims: IntList) -> Tensor: ...

def topk(
    self: Tensor,
    k: Int,
    dim: Int = ...,
    largest: Bool = ...,
    sorted: Bool = ...,
) -> TopkResult: ...

def transpose(self: Tensor, dim0: Int, dim1: Int) -> Tensor: ...

@overload
def tril(self: Tensor, *, k: Int = ...) -> Tensor: ...
@overload
def tril(self: Tensor, *, diagonal: Int = ...) -> Tensor: ...

def tril_indices(
    row: Int,
    col: Int,
    offset: Int = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def triu(self: Tensor, *, k: Int = ...) -> Tensor: ...
@overload
def triu(self: Tensor, *, diagonal: Int = ...) -> Tensor: ...

def triu_indices(
    row: Int,
    col: Int,
    offset: Int = ...,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

@overload
def trunc(self: Tensor) -> Tensor: ...
@overload
def trunc(self: Tensor, *, out: Tensor) -> Tensor: ...

@overload
def unbind(self: Tensor, axis: Int = ...) -> tuple[Tensor, ...]: ...
@overload
def unbind(self: Tensor, dim: Int = ...) -> tuple[Tensor, ...]: ...

def unique_all(self: Tensor) -> UniqueAllResult: ...

def unique_counts(self: Tensor) -> UniqueCountsResult: ...

def unique_inverse(self: Tensor) -> UniqueInverseResult: ...

def unique_values(self: Tensor) -> Tensor: ...

@overload
def unsqueeze(self: Tensor, axis: IntList) -> Tensor: ...
@overload
def unsqueeze(self: Tensor, dim: IntList) -> Tensor: ...

@overload
def unstack(self: Tensor, axis: Int = ...) -> tuple[Tensor, ...]: ...
@overload
def unstack(self: Tensor, dim: Int = ...) -> tuple[Tensor, ...]: ...

@overload
def var(
    self: Tensor,
    *,
    axis: IntList | None = ...,
    correction: Float = ...,
    keepdims: Bool = ...,
) -> Tensor: ...
@overload
def var(self: Tensor, unbiased: Bool = ...) -> Tensor: ...
@overload
def var(
    self: Tensor,
    dim: IntList | None = ...,
    *,
    correction: Scalar | None = ...,
    keepdim: Bool = ...,
) -> Tensor: ...
@overload
def var(self: Tensor, dim: IntList | None, unbiased: Bool = ..., keepdim: Bool = ...) -> Tensor: ...

def vecdot(self: Tensor, other: Tensor, *, axis: Int = ...) -> Tensor: ...

def vstack(tensors: Sequence[Tensor]) -> Tensor: ...

@overload
def where(condition: Tensor, self: Tensor, other: Tensor) -> Tensor: ...
@overload
def where(condition: Tensor, self: Tensor, other: Scalar) -> Tensor: ...
@overload
def where(condition: Tensor, self: Scalar, other: Tensor) -> Tensor: ...
@overload
def where(condition: Tensor, self: Scalar, other: Scalar) -> Tensor: ...
@overload
def where(condition: Tensor) -> tuple[Tensor, ...]: ...

@overload
def zeros(
    shape: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
@overload
def zeros(
    size: IntList,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...

def zeros_like(
    self: Tensor,
    *,
    dtype: DTypeLike | None = ...,
    device: DeviceLike | None = ...,
    requires_grad: Bool = ...,
) -> Tensor: ...
