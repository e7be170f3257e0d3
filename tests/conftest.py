"""Shared fixtures.

``MDTENSOR_TEST_BACKEND=<device>`` (``jax``, ``loopback``, ``cuda``, ...) runs the whole
suite with that device as the default (``md.set_default_device``): every factory call
without ``device=`` then creates tensors there.  Unset, the default is ``cpu`` (NumPy).
The ``device`` fixture gives tests the device string under test, for explicit use; ``lib``
(a library in a fresh namespace) and ``aten_impl`` (overrides of built-in kernels) undo
their registrations after each test; ``torch`` is PyTorch, for comparisons with it (the
test skipped without it; hypothesis tests, which cannot take function-scoped fixtures,
import it themselves).

``_helpers.py`` has what tests need to hold on every device: ``to_numpy`` (values of a
tensor anywhere; ``Tensor.numpy()`` refuses non-CPU tensors, as in PyTorch), the backend
capabilities (``writes_in_place``, ``shares_views``), and ``xfail_on``/``skip_on`` with the
known bugs and limits of backends that several tests share.  Tests about the CPU backend
itself (memory shared with NumPy, user kernels registered for ``"CPU"``) pin
``device="cpu"``.
"""

from __future__ import annotations

import itertools
import os

import pytest
from _helpers import DASK_TEST_CHUNK_SIZE, TEST_DEVICE

TEST_BACKEND = None if TEST_DEVICE == "cpu" else TEST_DEVICE

# On a GPU machine each test worker's JAX would take 75% of the GPU's memory when it starts
# (Note [JAX on GPUs] in backends/jax_backend.py); tests that use JAX directly, before
# mdtensor's JAX backend loads, need this as much as the backend does.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def pytest_configure(config):
    if TEST_BACKEND is None:
        return
    import mdtensor as md

    # Raise here (not per test) so a typo or a missing backend stops the run at once.
    md.set_default_device(TEST_BACKEND)
    md.asarray([0.0])  # loads the backend now: a load failure is reported before any test


def pytest_report_header(config):
    return f"mdtensor test backend: {TEST_BACKEND or 'cpu (default)'}"


@pytest.fixture(autouse=True)
def _dask_chunks_of_a_few_elements(request):
    """Tests on the Dask backend (``MDTENSOR_TEST_BACKEND=dask`` or a ``device="dask"``
    parameter) split arrays into chunks of a few elements (Dask's ``array.chunk-size`` of
    16 bytes), so that every op meets chunk boundaries, as it does at scale.  (By
    default a test-sized array is one chunk.)"""
    params = getattr(getattr(request.node, "callspec", None), "params", {})
    if TEST_BACKEND != "dask" and params.get("device") != "dask":
        yield
        return
    import dask

    with dask.config.set({"array.chunk-size": DASK_TEST_CHUNK_SIZE}):
        yield


@pytest.fixture
def device() -> str:
    """The device string under test (``MDTENSOR_TEST_BACKEND``, default ``'cpu'``)."""
    return TEST_BACKEND or "cpu"


_libraries = itertools.count()


@pytest.fixture
def lib():
    """A ``DEF`` library in a namespace of its own (``lib.ns``), destroyed after the test
    with every registration it made."""
    import mdtensor as md

    with md.library.Library(f"testlib{next(_libraries)}", "DEF") as library:
        yield library


@pytest.fixture
def torch():
    """PyTorch, the reference the ``*_matches_torch`` tests compare with (the test is skipped
    where it is not installed)."""
    return pytest.importorskip("torch")


@pytest.fixture
def aten_impl():
    """An ``IMPL`` library for ``aten``: the test's overrides of built-in kernels, undone
    after it."""
    import mdtensor as md

    with md.library.Library("aten", "IMPL") as library:
        yield library
