"""normal, bernoulli, randperm, multinomial and the *_like factories (mdtensor/_sampling.py):
distributions checked on seeded draws, reproducibility, PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import TEST_DEVICE, to_numpy

import mdtensor as md


def _seeded(fn, seed=7):
    md.manual_seed(seed)
    return to_numpy(fn())


def test_normal_of_tensors_and_of_numbers():
    mean = md.full((2000,), 3.0, dtype=md.float64, device=TEST_DEVICE)
    a = _seeded(lambda: md.normal(mean, 0.5))
    assert a.shape == (2000,) and abs(a.mean() - 3.0) < 0.05 and abs(a.std() - 0.5) < 0.05
    b = _seeded(lambda: md.normal(-1.0, 2.0, (3000,), device=TEST_DEVICE))
    assert abs(b.mean() + 1.0) < 0.15 and abs(b.std() - 2.0) < 0.1
    np.testing.assert_array_equal(a, _seeded(lambda: md.normal(mean, 0.5)))
    std = md.asarray([[0.0], [1.0]], dtype=md.float64, device=TEST_DEVICE)
    c = _seeded(lambda: md.normal(md.zeros(3, dtype=md.float64, device=TEST_DEVICE), std))
    assert c.shape == (2, 3) and (c[0] == 0).all()  # broadcast; std 0 gives the mean
    with pytest.raises(ValueError, match="normal: expects std >= 0.0"):
        md.normal(0.0, -1.0, (2,))
    with pytest.raises(TypeError, match="normal: with float mean and std, give size="):
        md.normal(0.0, 1.0)


def test_normal_gives_no_gradient_path():
    mean = md.zeros(3, requires_grad=True)
    assert not md.normal(mean, 1.0).requires_grad


def test_bernoulli():
    p = md.full((5000,), 0.3, dtype=md.float64, device=TEST_DEVICE)
    a = _seeded(lambda: md.bernoulli(p))
    assert a.dtype == np.float64 and set(np.unique(a)) <= {0.0, 1.0}
    assert abs(a.mean() - 0.3) < 0.03
    edges = to_numpy(md.bernoulli(md.asarray([0.0, 1.0], device=TEST_DEVICE)))
    assert edges.tolist() == [0.0, 1.0]
    with pytest.raises(ValueError, match="bernoulli: expected all probabilities in"):
        md.bernoulli(md.asarray([1.5], device=TEST_DEVICE))


def test_randperm_is_a_permutation_and_reproducible():
    a = _seeded(lambda: md.randperm(50, device=TEST_DEVICE))
    assert a.dtype == np.int64 and sorted(a.tolist()) == list(range(50))
    np.testing.assert_array_equal(a, _seeded(lambda: md.randperm(50, device=TEST_DEVICE)))
    assert not np.array_equal(a, _seeded(lambda: md.randperm(50, device=TEST_DEVICE), 8))
    assert to_numpy(md.randperm(0, device=TEST_DEVICE)).shape == (0,)
    g = md.Generator(TEST_DEVICE).manual_seed(3)
    h = md.Generator(TEST_DEVICE).manual_seed(3)
    np.testing.assert_array_equal(to_numpy(md.randperm(9, generator=g, device=TEST_DEVICE)),
                                  to_numpy(md.randperm(9, generator=h, device=TEST_DEVICE)))
    with pytest.raises(ValueError, match="randperm: n must be a non-negative int"):
        md.randperm(-1)


def test_multinomial_frequencies_follow_the_weights():
    w = md.asarray([0.0, 1.0, 3.0], dtype=md.float64, device=TEST_DEVICE)
    with_r = _seeded(lambda: md.multinomial(w, 4000, replacement=True))
    freq = np.bincount(with_r, minlength=3) / 4000
    assert freq[0] == 0 and abs(freq[2] - 0.75) < 0.03
    rows = md.broadcast_to(w, (3000, 3)).contiguous()
    first = _seeded(lambda: md.multinomial(rows, 1))
    freq = np.bincount(first.ravel(), minlength=3) / 3000
    assert freq[0] == 0 and abs(freq[2] - 0.75) < 0.03


def test_multinomial_without_replacement_draws_distinct_categories():
    w = md.asarray([[1.0, 1.0, 1.0, 1.0], [5.0, 0.0, 1.0, 1.0]], device=TEST_DEVICE)
    a = _seeded(lambda: md.multinomial(w, 3))
    assert a.shape == (2, 3)
    for row in a:
        assert len(set(row.tolist())) == 3
    assert 1 not in a[1].tolist()  # a zero weight is never drawn
    with pytest.raises(ValueError, match="not enough non-negative category to sample"):
        md.multinomial(w, 4)
    with pytest.raises(ValueError, match="element < 0"):
        md.multinomial(md.asarray([1.0, -1.0], device=TEST_DEVICE), 1)
    with pytest.raises(ValueError, match="prob_dist must be 1 or 2 dim"):
        md.multinomial(md.ones((2, 2, 2), device=TEST_DEVICE), 1)


def test_like_factories_take_shape_dtype_and_device():
    x = md.zeros((2, 3), dtype=md.float64, device=TEST_DEVICE)
    for t in (md.rand_like(x), md.randn_like(x), md.randint_like(x, 5),
              md.randint_like(x, 2, 4)):
        assert (t.shape, t.dtype, t.device) == ((2, 3), md.float64, x.device)
    r = to_numpy(md.randint_like(x, 2, 4))
    assert r.min() >= 2 and r.max() < 4
    assert md.rand_like(x, dtype=md.float32).dtype is md.float32
    assert md.randn_like(x, requires_grad=True).requires_grad
