"""Shared fixtures.

``MDTENSOR_TEST_BACKEND=<device>`` (``jax``, ``loopback``, ``cuda``, ...) runs the whole
suite with that device as the default (``md.set_default_device``): every factory call
without ``device=`` then creates tensors there.  Unset, the default is ``cpu`` (NumPy).
The ``device`` fixture gives tests the device string under test, for explicit use.
"""

from __future__ import annotations

import os

import pytest

TEST_BACKEND = os.environ.get("MDTENSOR_TEST_BACKEND", "").strip() or None


def pytest_configure(config):
    if TEST_BACKEND is None:
        return
    import mdtensor as md

    # Raise here (not per test) so a typo or a missing backend stops the run at once.
    md.set_default_device(TEST_BACKEND)
    md.asarray([0.0])  # loads the backend now: a load failure is reported before any test


def pytest_report_header(config):
    return f"mdtensor test backend: {TEST_BACKEND or 'cpu (default)'}"


@pytest.fixture
def device() -> str:
    """The device string under test (``MDTENSOR_TEST_BACKEND``, default ``'cpu'``)."""
    return TEST_BACKEND or "cpu"
