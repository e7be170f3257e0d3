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

#: Dask's ``array.chunk-size`` in tests on the Dask backend (conftest.py): a few elements
DASK_TEST_CHUNK_SIZE = "16B"


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


def shares_memory(t, u) -> bool:
    """Whether tensors ``t`` and ``u`` share memory: NumPy's exact check on host arrays;
    for CuPy's (whose memory NumPy cannot read, and whose ``shares_memory`` answers wrongly
    for 0-d arrays in CuPy 14.2) whether their byte ranges overlap; on a lazy backend
    (Dask), whose arrays are graphs that own no memory until computed, whether both hold
    the same array (``detach`` shares it; a copy is another array, even of the same
    graph, and Functionalize keeps writes to either from the other)."""
    a, b = t._data, u._data
    if t.device.backend.capabilities.lazy:
        return a is b
    if type(a).__module__.split(".")[0] == "cupy":
        (lo_a, hi_a), (lo_b, hi_b) = _byte_range(a), _byte_range(b)
        return lo_a < hi_b and lo_b < hi_a
    import numpy as np

    return bool(np.shares_memory(a, b))


def _byte_range(a) -> tuple[int, int]:
    lo = hi = a.data.ptr
    if a.size == 0:
        return lo, lo
    for n, stride in zip(a.shape, a.strides):
        if stride < 0:
            lo += (n - 1) * stride
        else:
            hi += (n - 1) * stride
    return lo, hi + a.itemsize


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
# A bug found on one backend gets its reason constant here.

INPLACE_ALPHA = ("an in-place op with alpha= (x.add_(y, alpha=2)) on JAX: Functionalize calls "
                 "the functional overload with alpha positionally and the JAX backend's jitted "
                 "add.Tensor takes two positional arguments (TypeError); md.optim composes "
                 "add_(y * alpha) instead (Note [In-place updates])")

# -- documented limits (reasons for skip_on) ---------------------------------------------

NO_EINSUM = ("einsum is not in the Array API standard: array_api_strict has none, and "
             "mdtensor's einsum raises NotImplementedError there by design (ops/linalg.py)")


def sample_on(v, device: str):
    """An OpInfo sample argument on ``device``: a NumPy array (or a list or tuple of them)
    becomes a tensor (a copy), anything else stays as it is."""
    import numpy as np

    import mdtensor as md

    if isinstance(v, np.ndarray):
        return md.asarray(v.copy(), device=device)
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
        return type(v)(md.asarray(x.copy(), device=device) for x in v)
    return v


def backend_installed(device: str) -> bool:
    """Whether the backend plug-in of ``device`` is installed and loads."""
    import mdtensor as md

    row = next((r for r in md.backends.available() if r["device_type"] == device), None)
    return row is not None and row["installed"]


def backend_params(*devices: str) -> list:
    """``devices`` as pytest parameters, each skipped with the reason where its backend is
    not installed (the plug-in, or its array library)."""
    params = []
    for device in devices:
        installed = device == "cpu" or backend_installed(device)
        params.append(pytest.param(device, marks=pytest.mark.skipif(
            not installed, reason=f"the {device} backend is not installed (its plug-in or "
                                  f"its array library)")))
    return params
