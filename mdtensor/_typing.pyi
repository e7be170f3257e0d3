# Generated from mdtensor's op catalogue by tools/gen_stubs.py; do not edit.
# After adding or changing an op, run: python tools/gen_stubs.py

"""Types the generated stubs share (a stub-only module)."""

from collections.abc import Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np

from ._dtypes import DType
from .tensors.device import Device
from .tensors.tensor import Tensor

# What a call may pass for each schema type (the overload resolution's types,
# mdtensor/dispatch/resolution.py _py_type).
Bool: TypeAlias = bool | np.bool_
Int: TypeAlias = int | np.integer[Any]
Float: TypeAlias = float | np.floating[Any] | np.integer[Any]
Scalar: TypeAlias = bool | int | float | complex | np.generic
# int[] and int[N]: a sequence, or one int as in PyTorch's x.sum(0)
IntList: TypeAlias = Int | Sequence[Int]
DTypeLike: TypeAlias = DType | type | str | np.dtype[Any]
DeviceLike: TypeAlias = Device | str

class CummaxResult(NamedTuple):
    values: Tensor
    indices: Tensor

class CumminResult(NamedTuple):
    values: Tensor
    indices: Tensor

class KthvalueResult(NamedTuple):
    values: Tensor
    indices: Tensor

class LinalgEigResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor

class LinalgEighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor

class LinalgLstsqResult(NamedTuple):
    solution: Tensor
    residuals: Tensor
    rank: Tensor
    singular_values: Tensor

class LinalgQrResult(NamedTuple):
    Q: Tensor
    R: Tensor

class LinalgSlogdetResult(NamedTuple):
    sign: Tensor
    logabsdet: Tensor

class LinalgSvdResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor

class MaxResult(NamedTuple):
    values: Tensor
    indices: Tensor

class MedianResult(NamedTuple):
    values: Tensor
    indices: Tensor

class MinResult(NamedTuple):
    values: Tensor
    indices: Tensor

class SortResult(NamedTuple):
    values: Tensor
    indices: Tensor

class TopkResult(NamedTuple):
    values: Tensor
    indices: Tensor

class UniqueAllResult(NamedTuple):
    values: Tensor
    indices: Tensor
    inverse_indices: Tensor
    counts: Tensor

class UniqueCountsResult(NamedTuple):
    values: Tensor
    counts: Tensor

class UniqueInverseResult(NamedTuple):
    values: Tensor
    inverse_indices: Tensor
