"""Sparse CUDA kernels: the ``SparseCUDA`` key, computed with ``cupyx.scipy.sparse``.

Loaded on the first sparse tensor made on a ``"cuda"`` device, never by ``import
mdtensor`` (nor by the CPU's sparse tensors): it imports CuPy and runs the source of
backends/scipy_sparse.py a second time with CuPy's modules (Note [One source for SciPy and
CuPy] there), so the CUDA kernels are the CPU's code path, which the CPU tests exercise.
What only a GPU can check -- that CuPy's functions behave as NumPy's and SciPy's there --
is tests/test_cupy.py's, skipped without one.
"""

from __future__ import annotations

import importlib.util

import cupy
import cupyx.scipy.sparse as csp

__all__ = ["check_dtype", "from_dense", "make_coo", "make_csr"]

_spec = importlib.util.find_spec("mdtensor.backends.scipy_sparse")
_cuda = importlib.util.module_from_spec(_spec)  # a module object of its own
_cuda.LIBRARY = (cupy, csp, "SparseCUDA", "CUDA", "cupyx.scipy.sparse")
_spec.loader.exec_module(_cuda)

check_dtype = _cuda.check_dtype
from_dense = _cuda.from_dense
make_coo = _cuda.make_coo
make_csr = _cuda.make_csr
