# Generated from mdtensor's op catalogue by tools/gen_stubs.py; do not edit.
# After adding or changing an op, run: python tools/gen_stubs.py

"""``md.linalg``: the Array API linear-algebra extension."""

from typing import Any, overload

from ._typing import (
    Bool,
    DTypeLike,
    Float,
    Int,
    IntList,
    LinalgEighResult,
    LinalgEigResult,
    LinalgLstsqResult,
    LinalgQrResult,
    LinalgSlogdetResult,
    LinalgSvdResult,
)
from .tensors.tensor import Tensor

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "lstsq",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "norm",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
]

def cholesky(self: Tensor, *, upper: Bool = ...) -> Tensor: ...

def cross(self: Tensor, other: Tensor, *, axis: Int = ...) -> Tensor: ...

def det(self: Tensor) -> Tensor: ...

def diagonal(self: Tensor, *, offset: Int = ...) -> Tensor: ...

def eig(self: Tensor) -> LinalgEigResult: ...

def eigh(self: Tensor) -> LinalgEighResult: ...

def eigvals(self: Tensor) -> Tensor: ...

def eigvalsh(self: Tensor) -> Tensor: ...

def inv(self: Tensor) -> Tensor: ...

def lstsq(
    self: Tensor,
    b: Tensor,
    rcond: Float | None = ...,
    *,
    driver: str | None = ...,
) -> LinalgLstsqResult: ...

@overload
def matmul(self: Tensor, other: Tensor) -> Tensor: ...
@overload
def matmul(self: Tensor, other: Tensor, *, out: Tensor) -> Tensor: ...

def matrix_norm(self: Tensor, *, keepdims: Bool = ..., ord: Any = ...) -> Tensor: ...

def matrix_power(self: Tensor, n: Int) -> Tensor: ...

def matrix_rank(self: Tensor, *, rtol: Any = ...) -> Tensor: ...

def matrix_transpose(self: Tensor) -> Tensor: ...

def norm(
    self: Tensor,
    ord: Any = ...,
    dim: IntList | None = ...,
    keepdim: Bool = ...,
    *,
    dtype: DTypeLike | None = ...,
) -> Tensor: ...

def outer(self: Tensor, other: Tensor) -> Tensor: ...

def pinv(self: Tensor, *, rtol: Any = ...) -> Tensor: ...

def qr(self: Tensor, *, mode: str = ...) -> LinalgQrResult: ...

def slogdet(self: Tensor) -> LinalgSlogdetResult: ...

def solve(self: Tensor, other: Tensor) -> Tensor: ...

def svd(self: Tensor, *, full_matrices: Bool = ...) -> LinalgSvdResult: ...

def svdvals(self: Tensor) -> Tensor: ...

@overload
def tensordot(self: Tensor, other: Tensor, *, axes: Any = ...) -> Tensor: ...
@overload
def tensordot(self: Tensor, other: Tensor, *, dims: Any = ...) -> Tensor: ...

def trace(self: Tensor, *, offset: Int = ..., dtype: DTypeLike | None = ...) -> Tensor: ...

def vecdot(self: Tensor, other: Tensor, *, axis: Int = ...) -> Tensor: ...

def vector_norm(
    self: Tensor,
    *,
    axis: IntList | None = ...,
    keepdims: Bool = ...,
    ord: Any = ...,
) -> Tensor: ...
