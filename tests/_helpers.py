"""Helpers shared by the tests (``from _helpers import ...``: pytest puts ``tests/`` on
``sys.path``, as for ``plugin_dists``).

``TEST_DEVICE`` is the device under test (``MDTENSOR_TEST_BACKEND``, default ``'cpu'``),
which ``conftest.py`` makes the default device.  Tests that compare values read tensors
with ``to_numpy``; tests about the CPU/NumPy backend itself (memory shared with NumPy,
CPU kernels of user ops, CPU dispatch keys) pin ``device="cpu"`` and so run, on the CPU,
under every setting.

Known bugs that fail a test on some backends are named once here and marked with
``xfail_on`` (strict: the test reports XPASS, an error, once the bug is fixed).
"""

from __future__ import annotations

import os

import pytest

TEST_DEVICE = os.environ.get("MDTENSOR_TEST_BACKEND", "").strip() or "cpu"
TEST_DEVICE_TYPE = TEST_DEVICE.split(":")[0]


def to_numpy(t):
    """A tensor's values as a NumPy array, whatever its device: ``t.to("cpu").numpy()``.

    On the CPU this is ``t.numpy()`` itself (the same memory, and the same refusal for a
    tensor that requires grad); on another device, a copy.
    """
    return t.to("cpu").numpy()


def writes_in_place(t) -> bool:
    """Whether ``t``'s backend writes in-place ops into the same buffer (NumPy, CuPy,
    loopback); JAX's arrays are immutable, so there Functionalize swaps in a new one."""
    return t.device.backend.capabilities.inplace


def shares_views(t) -> bool:
    """Whether views of ``t`` share its buffer (``capabilities.views``); on JAX a view is a
    copy kept in sync by Functionalize."""
    return t.device.backend.capabilities.views


def skip_without_views(reason: str):
    """Skip where the backend under test has no views sharing memory (JAX): for tests of
    memory layout, e.g. which reshapes can be views."""
    import mdtensor as md

    views = md.backends.get(TEST_DEVICE_TYPE).capabilities.views
    return pytest.mark.skipif(not views, reason=f"{TEST_DEVICE_TYPE} has no views sharing "
                                                f"memory: {reason}")


def xfail_on(*devices: str, reason: str):
    """A strict xfail where the device type under test is one of ``devices``."""
    return pytest.mark.xfail(TEST_DEVICE_TYPE in devices, reason=reason, strict=True)


def skip_on(*devices: str, reason: str):
    """A skip where the device type under test is one of ``devices`` (a documented limit
    of that backend, not a bug)."""
    return pytest.mark.skipif(TEST_DEVICE_TYPE in devices, reason=reason)


# -- known bugs (each one a reason for xfail_on) -----------------------------------------

JAX_INDEX_OUT_OF_BOUNDS = (
    "bug: on JAX an out-of-bounds index gives a value instead of IndexError (x[7] of 4 rows "
    "is the last row, x[[0, 9]] gathers NaN): the generic basic_index and index kernels "
    "(ops/indexing.py _basic_index, _index) rely on the backend raising, and JAX clamps")

LOOPBACK_FANCY_SETITEM = (
    "bug: on loopback, writes through integer index arrays (x[[0, 3]] = v, index_put, and "
    "Functionalize's write-back of a mutated view: mdtensor/_functionalize.py "
    "_commit_wrapper) raise array_api_strict's IndexError 'Fancy indexing __setitem__ is "
    "not supported' (ops/indexing.py scatter_set, _index_put_kernel)")

LOOPBACK_MULTI_INDEX_ARRAYS = (
    "bug: on loopback, x[[0, 1], [2, 3]] (several integer index arrays) raises "
    "array_api_strict's IndexError 'Integer index arrays are only allowed with integer "
    "indices': ops/indexing.py _index passes them to __getitem__ as they are")

LOOPBACK_SLICE_BOUNDS = (
    "bug: on loopback, a slice bound past the end (x[:, 0:4] of 3 columns) raises "
    "array_api_strict's IndexError instead of clipping as NumPy and PyTorch do "
    "(ops/indexing.py _basic_index passes slices on unclipped)")

# -- documented limits (reasons for skip_on) ---------------------------------------------

NO_EINSUM = ("einsum is not in the Array API standard: array_api_strict has none, and "
             "mdtensor's einsum raises NotImplementedError there by design (ops/linalg.py)")
