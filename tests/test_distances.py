"""``cdist`` (ops/distances.py) beyond the differential suite: the matrix-product form."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import to_numpy

import mdtensor as md


def test_cdist_by_matrix_products_matches_pytorch():
    """Note [Euclidean distances by matrix products]: more than 25 rows take PyTorch's
    product form, and so does compute_mode="use_mm_for_euclid_dist"."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((40, 3)).astype(np.float32), rng.standard_normal((7, 3))
    b = b.astype(np.float32)
    for mode in (None, "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        got = md.cdist(md.asarray(a), md.asarray(b), compute_mode=mode)
        want = torch.cdist(torch.from_numpy(a), torch.from_numpy(b), compute_mode=mode or
                           "use_mm_for_euclid_dist_if_necessary")
        np.testing.assert_allclose(to_numpy(got), want.numpy(), rtol=1e-5, atol=1e-6)
    same = md.cdist(md.asarray(a[:2]), md.asarray(a[:2]), compute_mode="use_mm_for_euclid_dist")
    assert float(same[0, 0]) < 1e-3  # cancellation: about 0, not exactly
