"""``md.nn``'s convolution, pooling, normalization and attention layers, and the losses and
activations beyond tests/test_nn.py's: values, gradients and errors against PyTorch where it
is installed, gradcheck in float64, on the device under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import TEST_DEVICE, to_numpy
from hypothesis import given, settings
from hypothesis import strategies as st

import mdtensor as md
from mdtensor import nn
from mdtensor.nn import functional as F
from mdtensor.testing import gradcheck, gradgradcheck


def _np(t):
    return to_numpy(t.detach())


def _compare(torch, name, arrays, kwargs=None, rtol=1e-5, atol=1e-6, index_out=False):
    """``F.<name>(*arrays, **kwargs)`` in mdtensor and PyTorch: the same values (and
    indices) and the same gradients of ``sum(out * probe)`` for every float array."""
    kwargs = kwargs or {}
    ours = [md.asarray(a, requires_grad=a.dtype.kind == "f", device=TEST_DEVICE)
            if isinstance(a, np.ndarray) else a for a in arrays]
    theirs = [torch.tensor(a, requires_grad=a.dtype.kind == "f")
              if isinstance(a, np.ndarray) else a for a in arrays]
    out_a = getattr(F, name)(*ours, **kwargs)
    out_b = getattr(torch.nn.functional, name)(*theirs, **kwargs)
    if index_out:
        np.testing.assert_array_equal(to_numpy(out_a[1]), out_b[1].numpy())
        out_a, out_b = out_a[0], out_b[0]
    np.testing.assert_allclose(_np(out_a), out_b.detach().numpy(), rtol=rtol, atol=atol)
    probe = np.random.default_rng(1).standard_normal(tuple(out_b.shape)).astype(
        out_b.detach().numpy().dtype)
    (out_a * md.asarray(probe, device=TEST_DEVICE)).sum().backward()
    (out_b * torch.tensor(probe)).sum().backward()
    for a, b in zip(ours, theirs):
        if isinstance(a, md.Tensor) and a.requires_grad:
            np.testing.assert_allclose(to_numpy(a.grad), b.grad.numpy(), rtol=rtol, atol=atol)


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- convolution -----------------------------------------------------------------------------

CONV2D = [
    ((2, 3, 7, 6), (4, 3, 3, 3), {}),
    ((2, 4, 9, 8), (6, 2, 3, 2), {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2),
                                  "groups": 2}),
    ((1, 2, 5, 5), (2, 1, 2, 2), {"padding": "same", "groups": 2}),
    ((1, 2, 6, 5), (3, 2, 3, 1), {"padding": "valid", "stride": 2}),
    ((3, 5, 4), (2, 3, 1, 2), {"padding": 1}),  # unbatched
    ((2, 1, 8, 8), (4, 1, 4, 4), {"padding": "same", "dilation": 2}),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("x,w,kwargs", CONV2D, ids=[str(k) for _, _, k in CONV2D])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_matches_torch(x, w, kwargs, bias, torch):
    if x[-3] != w[1] * kwargs.get("groups", 1):  # the unbatched case: C is x[0]
        x = (w[1] * kwargs.get("groups", 1),) + x[1:]
    arrays = [_rand(*x), _rand(*w, seed=1)]
    if bias:
        arrays.append(_rand(w[0], seed=2))
    _compare(torch, "conv2d", arrays, kwargs, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("kwargs", [{}, {"stride": 2, "padding": 1, "dilation": 2},
                                    {"padding": "same"}, {"groups": 2, "padding": 2}])
def test_conv1d_matches_torch(kwargs, torch):
    groups = kwargs.get("groups", 1)
    _compare(torch, "conv1d", [_rand(2, 4, 11), _rand(6, 4 // groups, 3, seed=1),
                               _rand(6, seed=2)], kwargs, rtol=1e-4, atol=1e-5)


@settings(max_examples=25 if TEST_DEVICE == "cpu" else 5, deadline=None)
@given(st.data())
def test_conv2d_property_matches_torch(data):
    torch = pytest.importorskip("torch")
    groups = data.draw(st.sampled_from([1, 2]))
    cin, cout = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2))
    k = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    d = data.draw(st.tuples(st.integers(1, 2), st.integers(1, 2)))
    s = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    p = data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2)))
    size = [(kk - 1) * dd + 1 - 2 * pp + data.draw(st.integers(0, 4))
            for kk, dd, pp in zip(k, d, p)]
    size = [max(1, v) for v in size]
    x = _rand(data.draw(st.integers(1, 2)), cin, *size, dtype=np.float64)
    w = _rand(cout, cin // groups, *k, seed=1, dtype=np.float64)
    kwargs = {"stride": s, "padding": p, "dilation": d, "groups": groups}
    try:
        torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), **kwargs)
    except RuntimeError:
        with pytest.raises(ValueError, match="conv2d"):
            F.conv2d(md.asarray(x), md.asarray(w), **kwargs)
        return
    _compare(torch, "conv2d", [x, w], kwargs, rtol=1e-10, atol=1e-10)


def test_convolution_gradcheck_first_and_second_order():
    rng = np.random.default_rng(0)
    x = md.asarray(rng.standard_normal((1, 4, 5, 6)), requires_grad=True, device=TEST_DEVICE)
    w = md.asarray(rng.standard_normal((2, 2, 2, 3)), requires_grad=True, device=TEST_DEVICE)
    b = md.asarray(rng.standard_normal(2), requires_grad=True, device=TEST_DEVICE)

    def conv(x, w, b):
        return F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0), dilation=(1, 2), groups=2)

    assert gradcheck(conv, (x, w, b))
    assert gradgradcheck(conv, (x, w, b))


def test_conv_errors_name_the_function(torch):
    x, w = md.ones((1, 3, 5, 5)), md.ones((4, 3, 3, 3))
    with pytest.raises(ValueError, match=r"conv2d: given groups=1, weight of size \[4, 2, 3, "
                                         r"3\], expected input\[1, 3, 5, 5\] to have 2 "
                                         r"channels, but got 3 channels instead"):
        F.conv2d(x, md.ones((4, 2, 3, 3)))
    with pytest.raises(ValueError, match="conv2d: given groups=3, expected weight to be "
                                         "divisible by 3 at dimension 0"):
        F.conv2d(x, md.ones((4, 1, 3, 3)), groups=3)
    with pytest.raises(ValueError, match="conv2d: kernel size can't be greater than actual "
                                         "input size|conv2d: calculated padded input size"):
        F.conv2d(x, md.ones((4, 3, 6, 6)))
    with pytest.raises(ValueError, match="conv2d: padding='same' is not supported for "
                                         "strided convolutions"):
        F.conv2d(x, w, stride=2, padding="same")
    with pytest.raises(ValueError, match="conv2d: expected 3-D \\(unbatched\\) or 4-D"):
        F.conv2d(md.ones((5, 5)), w)
    with pytest.raises(TypeError, match=r"conv2d: input type \(float32\) and weight/bias "
                                        r"type \(float64\) should be the same"):
        F.conv2d(x, md.ones((4, 3, 3, 3), dtype=md.float64))
    with pytest.raises(ValueError, match="conv2d: stride must be positive"):
        F.conv2d(x, w, stride=0)
    with pytest.raises(NotImplementedError, match="padding_mode='reflect' is not supported"):
        nn.Conv2d(3, 4, 3, padding_mode="reflect")


# -- unfold / fold -------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{"kernel_size": 2}, {"kernel_size": (2, 3), "stride": 2,
                                                          "padding": 1, "dilation": (2, 1)}])
def test_unfold_and_fold_match_torch(kwargs, torch):
    x = _rand(2, 3, 6, 7)
    _compare(torch, "unfold", [x], kwargs)
    cols = F.unfold(md.asarray(x), **kwargs)
    _compare(torch, "fold", [_np(cols)], {"output_size": (6, 7), **kwargs})


def _col2im_by_definition(cols, size, k, d, p, s):
    """Every column entry added to its pixel, window position by window position."""
    blocks = [(size[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in (0, 1)]
    c = cols.reshape(cols.shape[:-2] + (-1, k[0], k[1], blocks[0], blocks[1]))
    out = np.zeros(cols.shape[:-2] + (c.shape[-5],) + tuple(size), cols.dtype)
    for i, j, y, z in np.ndindex(k[0], k[1], blocks[0], blocks[1]):
        r, q = y * s[0] + i * d[0] - p[0], z * s[1] + j * d[1] - p[1]
        if 0 <= r < size[0] and 0 <= q < size[1]:
            out[..., r, q] += c[..., i, j, y, z]
    return out


@pytest.mark.parametrize("batch", [1, 8], ids=["scatter", "additions"])
@pytest.mark.parametrize("window", [((2, 3), (1, 1), (0, 0), (1, 1)),
                                    ((3, 2), (2, 1), (1, 1), (2, 1)),
                                    ((2, 2), (1, 1), (1, 0), (2, 2))])
def test_col2im_sums_in_window_order(batch, window):
    # small columns are one np.add.at, larger ones window-by-window additions (Note [Small
    # col2im as one scatter] in ops/convolution.py): both sum each pixel's entries in the
    # order of their window positions, the definition's sums to the bit
    k, d, p, s = window
    size = (9, 10)
    blocks = [(size[a] + 2 * p[a] - d[a] * (k[a] - 1) - 1) // s[a] + 1 for a in (0, 1)]
    rng = np.random.default_rng(0)
    cols = (rng.standard_normal((batch, 6 * k[0] * k[1], blocks[0] * blocks[1])) * 1e3
            ).astype(np.float32)
    got = md.ops.aten.col2im(md.asarray(cols, device="cpu"), size, k, d, p, s)
    np.testing.assert_array_equal(to_numpy(got), _col2im_by_definition(cols, size, k, d, p, s))


# -- pooling ---------------------------------------------------------------------------------

MAX_POOL = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": (2, 3), "stride": (1, 2), "padding": (1, 1), "dilation": (2, 1)},
    {"kernel_size": 3, "stride": 1, "padding": 1},
]


@pytest.mark.parametrize("kwargs", MAX_POOL, ids=[str(k) for k in MAX_POOL])
@pytest.mark.parametrize("shape", [(2, 3, 9, 8), (3, 7, 6)], ids=["batched", "unbatched"])
def test_max_pool2d_matches_torch(kwargs, shape, torch):
    _compare(torch, "max_pool2d", [_rand(*shape)], {**kwargs, "return_indices": True},
             index_out=True)


def test_max_pool_ties_nan_and_inf_pick_what_torch_picks(torch):
    x = np.array([[[[1.0, 1.0, 0.0], [1.0, np.nan, 2.0], [-np.inf, -np.inf, -np.inf]]]],
                 np.float32)
    for kwargs in ({"kernel_size": 2, "stride": 1}, {"kernel_size": 3, "padding": 1}):
        a, ia = F.max_pool2d(md.asarray(x), return_indices=True, **kwargs)
        b, ib = torch.nn.functional.max_pool2d(torch.tensor(x), return_indices=True, **kwargs)
        np.testing.assert_array_equal(to_numpy(a), b.numpy())
        np.testing.assert_array_equal(to_numpy(ia), ib.numpy())
    # the gradient of tied maxima goes to the first one only, as PyTorch's
    _compare(torch, "max_pool2d", [np.ones((1, 1, 4, 4), np.float32)], {"kernel_size": 2})


def test_max_pool_2x2_tiling_with_nan_and_ties_picks_what_torch_picks(torch):
    # the NumPy kernel's argmax (Note [Max pooling as one argmax]) hands NaN inputs to
    # PyTorch's scan; ties and NaN windows among ordinary ones
    x = np.array([[[[1.0, 1.0, 0.0, 3.0], [1.0, 1.0, np.nan, 2.0],
                    [-np.inf, -np.inf, 5.0, 4.0], [-np.inf, -np.inf, 4.0, 5.0]]]], np.float32)
    for a in (x, np.nan_to_num(x, nan=2.0)):
        m, im = F.max_pool2d(md.asarray(a, device=TEST_DEVICE), 2, return_indices=True)
        t, it = torch.nn.functional.max_pool2d(torch.tensor(a), 2, return_indices=True)
        np.testing.assert_array_equal(to_numpy(m), t.numpy())
        np.testing.assert_array_equal(to_numpy(im), it.numpy())
        _compare(torch, "max_pool2d", [a], {"kernel_size": 2})


def test_max_pool_2x2_of_large_and_small_inputs_picks_what_torch_picks(torch):
    # the 2x2 path above 1024 elements, the argmax below (Note [Max pooling as one
    # argmax]): ties, NaN and infinite windows among ordinary ones, in both
    tile = np.array([[1.0, 1.0, 0.0, 3.0], [1.0, 1.0, np.nan, 2.0],
                     [-np.inf, -np.inf, 5.0, 4.0], [-np.inf, -np.inf, 4.0, 5.0]], np.float32)
    for reps in ((1, 1, 2, 2), (2, 8, 4, 4)):
        x = np.tile(tile, reps)
        for a in (x, np.nan_to_num(x, nan=2.0)):
            m, im = F.max_pool2d(md.asarray(a, device=TEST_DEVICE), 2, return_indices=True)
            t, it = torch.nn.functional.max_pool2d(torch.tensor(a), 2, return_indices=True)
            np.testing.assert_array_equal(to_numpy(m), t.numpy())
            np.testing.assert_array_equal(to_numpy(im), it.numpy())


def test_max_pool1d_matches_torch(torch):
    _compare(torch, "max_pool1d", [_rand(2, 3, 11)], {"kernel_size": 3, "stride": 2,
                                                      "padding": 1, "ceil_mode": True,
                                                      "return_indices": True}, index_out=True)


AVG_POOL = [
    {"kernel_size": 2},
    {"kernel_size": 3, "stride": 2, "padding": 1},
    {"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True},
    {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
     "count_include_pad": False},
    {"kernel_size": (2, 3), "divisor_override": 5},
]


@pytest.mark.parametrize("kwargs", AVG_POOL, ids=[str(k) for k in AVG_POOL])
def test_avg_pool2d_matches_torch(kwargs, torch):
    _compare(torch, "avg_pool2d", [_rand(2, 3, 9, 8)], kwargs)


def test_avg_pool1d_matches_torch(torch):
    _compare(torch, "avg_pool1d", [_rand(2, 3, 11)], {"kernel_size": 4, "stride": 3,
                                                      "padding": 2, "ceil_mode": True,
                                                      "count_include_pad": False})


@settings(max_examples=25 if TEST_DEVICE == "cpu" else 5, deadline=None)
@given(st.data())
def test_pooling_property_matches_torch(data):
    torch = pytest.importorskip("torch")
    k = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    p = tuple(data.draw(st.integers(0, kk // 2)) for kk in k)
    s = data.draw(st.tuples(st.integers(1, 3), st.integers(1, 3)))
    size = data.draw(st.tuples(st.integers(1, 7), st.integers(1, 7)))
    ceil = data.draw(st.booleans())
    x = _rand(1, 2, *size, dtype=np.float64)
    kind = data.draw(st.sampled_from(["max", "avg"]))
    kwargs = {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": ceil}
    if kind == "avg":
        kwargs["count_include_pad"] = data.draw(st.booleans())
    name = f"{kind}_pool2d"
    try:
        getattr(torch.nn.functional, name)(torch.tensor(x), **kwargs)
    except RuntimeError:
        with pytest.raises(ValueError, match=name):
            getattr(F, name)(md.asarray(x), **kwargs)
        return
    _compare(torch, name, [x], kwargs, rtol=1e-10, atol=1e-12)


def test_pooling_gradcheck():
    x = md.asarray(np.random.default_rng(0).standard_normal((1, 2, 5, 5)), requires_grad=True,
                   device=TEST_DEVICE)
    assert gradcheck(lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True), (x,))
    assert gradcheck(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True,
                                            count_include_pad=False), (x,))
    assert gradgradcheck(lambda t: F.avg_pool2d(t, 2), (x,))


def test_pooling_errors():
    x = md.ones((1, 1, 4, 4))
    with pytest.raises(ValueError, match="max_pool2d: pad should be at most half of effective "
                                         "kernel size, but got pad=2, kernel_size=2"):
        F.max_pool2d(x, 2, padding=2)
    with pytest.raises(ValueError, match="avg_pool2d: given input of size"):
        F.avg_pool2d(md.ones((1, 1, 1, 1)), 2)
    with pytest.raises(TypeError, match="max_pool2d: expected a real"):
        F.max_pool2d(md.ones((1, 1, 4, 4), dtype=md.bool), 2)
    with pytest.raises(TypeError, match="avg_pool2d: expected a floating-point input"):
        F.avg_pool2d(md.ones((1, 1, 4, 4), dtype=md.int64), 2)
    with pytest.raises(ValueError, match="avg_pool2d: divisor must be not zero"):
        F.avg_pool2d(x, 2, divisor_override=0)


# -- normalization ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(shape, training, torch):
    x = _rand(*shape) * 2 + 1
    rm, rv = _rand(3, seed=3), np.abs(_rand(3, seed=4)) + 0.5
    w, b = _rand(3, seed=5), _rand(3, seed=6)
    ours_rm, ours_rv = md.asarray(rm, device=TEST_DEVICE), md.asarray(rv, device=TEST_DEVICE)
    theirs_rm, theirs_rv = torch.tensor(rm), torch.tensor(rv)
    xa = md.asarray(x, requires_grad=True, device=TEST_DEVICE)
    wa, ba = (md.asarray(v, requires_grad=True, device=TEST_DEVICE) for v in (w, b))
    xb, wb, bb = (torch.tensor(v, requires_grad=True) for v in (x, w, b))
    out_a = F.batch_norm(xa, ours_rm, ours_rv, wa, ba, training, 0.3, 1e-3)
    out_b = torch.nn.functional.batch_norm(xb, theirs_rm, theirs_rv, wb, bb, training, 0.3,
                                           1e-3)
    np.testing.assert_allclose(_np(out_a), out_b.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(to_numpy(ours_rm), theirs_rm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_numpy(ours_rv), theirs_rv.numpy(), rtol=1e-5, atol=1e-6)
    probe = _rand(*shape, seed=9)
    (out_a * md.asarray(probe, device=TEST_DEVICE)).sum().backward()
    (out_b * torch.tensor(probe)).sum().backward()
    for a, b_ in ((xa, xb), (wa, wb), (ba, bb)):
        np.testing.assert_allclose(to_numpy(a.grad), b_.grad.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_modules_track_what_torch_tracks(momentum, torch):
    ours, theirs = nn.BatchNorm2d(3, momentum=momentum), torch.nn.BatchNorm2d(
        3, momentum=momentum)
    ours.to(TEST_DEVICE)
    for seed in range(3):
        x = _rand(4, 3, 2, 2, seed=seed) * (seed + 1)
        np.testing.assert_allclose(_np(ours(md.asarray(x, device=TEST_DEVICE))),
                                   theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4,
                                   atol=1e-5)
    for key, value in theirs.state_dict().items():
        np.testing.assert_allclose(to_numpy(ours.state_dict()[key]), value.numpy(), rtol=1e-5,
                                   atol=1e-6, err_msg=key)
    ours.eval(), theirs.eval()
    x = _rand(2, 3, 2, 2, seed=7)
    np.testing.assert_allclose(_np(ours(md.asarray(x, device=TEST_DEVICE))),
                               theirs(torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    free, free_t = nn.BatchNorm1d(3, track_running_stats=False, affine=False), \
        torch.nn.BatchNorm1d(3, track_running_stats=False, affine=False)
    free.eval(), free_t.eval()  # no running statistics: batch statistics in eval too
    x = _rand(5, 3, seed=8)
    np.testing.assert_allclose(_np(free(md.asarray(x))), free_t(torch.tensor(x)).numpy(),
                               rtol=1e-4, atol=1e-5)
    assert list(free.state_dict()) == list(free_t.state_dict()) == []


@pytest.mark.parametrize("shape", [(2, 3, 4, 4), (8, 3, 16, 16)], ids=["small", "large"])
def test_batch_norm_kernels_of_both_sizes_match_torch(shape, torch):
    # the CPU kernels' small-array calls up to 4096 elements, the large ones above (Note
    # [Batch norm on NumPy]), with and without affine parameters
    x, g = _rand(*shape) * 3 + 1, _rand(*shape, seed=1)
    for w, b in ((None, None), (_rand(3, seed=2), _rand(3, seed=3))):
        ours = md.ops.aten._native_batch_norm_legit.no_stats(
            md.asarray(x), None if w is None else md.asarray(w),
            None if b is None else md.asarray(b), True, 0.1, 1e-3)
        theirs = torch.ops.aten._native_batch_norm_legit.no_stats(
            torch.tensor(x), None if w is None else torch.tensor(w),
            None if b is None else torch.tensor(b), True, 0.1, 1e-3)
        for a, t in zip(ours, theirs):
            np.testing.assert_allclose(_np(a), t.numpy(), rtol=1e-4, atol=1e-5)
        args = (None if w is None else md.asarray(w), None, None, ours[1], ours[2], True,
                1e-3, [True, w is not None, True])
        grads = md.ops.aten.native_batch_norm_backward(md.asarray(g), md.asarray(x), *args)
        expected = torch.ops.aten.native_batch_norm_backward(
            torch.tensor(g), torch.tensor(x), None if w is None else torch.tensor(w), None,
            None, theirs[1], theirs[2], True, 1e-3, [True, w is not None, True])
        for a, t in zip(grads, expected):
            assert (a is None) == (t is None)
            if a is not None:
                np.testing.assert_allclose(_np(a), t.numpy(), rtol=1e-4, atol=1e-4)


def test_batch_norm_and_nll_loss_kernels_hand_on_what_they_do_not_compute():
    # keyword calls, Tensors of another dtype and bad arguments take the generic kernel
    # (Note [Hand-written CPU kernels]): the same values, the op's own errors
    bn = md.ops.aten._native_batch_norm_legit.no_stats
    x = md.asarray(_rand(4, 3, 2))
    by_position = bn(x, None, None, True, 0.1, 1e-3)
    by_keyword = bn(x, None, None, True, momentum=0.1, eps=1e-3)
    for a, b in zip(by_position, by_keyword):
        np.testing.assert_array_equal(_np(a), _np(b))
    half = bn(md.asarray(_rand(4, 3, 2).astype(np.float16)), None, None, True, 0.1, 1e-3)
    assert all(t.dtype == md.float16 for t in half)
    with pytest.raises(ValueError, match=r"batch_norm: expected weight of shape \[3\]"):
        bn(x, md.ones(2), None, True, 0.1, 1e-3)
    with pytest.raises(ValueError, match="batch_norm: running_mean and running_var"):
        bn(x, None, None, False, 0.1, 1e-3)
    nll = md.ops.aten.nll_loss_forward
    logits, target = md.asarray(_rand(3, 4)), md.asarray(np.array([0, 3, 1]))
    loss, total = nll(logits, target, None, 1, -100)
    named = nll(logits, target, None, reduction=1, ignore_index=-100)
    assert type(named) is type(nll(logits, target, None, 1, -100))
    np.testing.assert_array_equal(_np(loss), _np(named.output))
    assert float(total) == 3.0
    with pytest.raises(IndexError, match="nll_loss: target 4 is out of bounds for 4 classes"):
        nll(logits, md.asarray(np.array([0, 4, 1])), None, 1, -100)
    with pytest.raises(TypeError, match="nll_loss: expected an integer target"):
        nll(logits, md.asarray(np.array([0.0, 1.0, 2.0])), None, 1, -100)
    with pytest.raises(TypeError):
        nll(logits, [0, 1, 2], None, 1, -100)


def test_batch_norm_errors():
    with pytest.raises(ValueError, match=r"batch_norm: expected more than 1 value per channel "
                                         r"when training, got input size \[1, 3\]"):
        F.batch_norm(md.ones((1, 3)), None, None, training=True)
    with pytest.raises(ValueError, match="BatchNorm2d: expected 4D input \\(got 3D input\\)"):
        nn.BatchNorm2d(3)(md.ones((2, 3, 4)))
    with pytest.raises(ValueError, match="batch_norm: running_mean and running_var must be "
                                         "defined in evaluation mode"):
        F.batch_norm(md.ones((2, 3)), None, None)
    with pytest.raises(ValueError, match=r"batch_norm: expected weight of shape \[3\]"):
        F.batch_norm(md.ones((2, 3)), md.zeros(3), md.ones(3), weight=md.ones(2))


@pytest.mark.parametrize("groups", [1, 2, 6])
def test_group_norm_matches_torch(groups, torch):
    _compare(torch, "group_norm", [_rand(2, 6, 3, 4) * 3, groups, _rand(6, seed=1),
                                   _rand(6, seed=2)], {"eps": 1e-3}, rtol=1e-4, atol=1e-5)
    module, module_t = nn.GroupNorm(groups, 6), torch.nn.GroupNorm(groups, 6)
    x = _rand(2, 6, 5)
    np.testing.assert_allclose(_np(module(md.asarray(x))), module_t(
        torch.tensor(x)).detach().numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="group_norm: expected number of channels in input "
                                         "to be divisible by num_groups"):
        F.group_norm(md.ones((2, 6, 3)), 4)


def test_instance_norm_matches_torch(torch):
    _compare(torch, "instance_norm", [_rand(2, 3, 4, 5) * 2], {}, rtol=1e-4, atol=1e-5)


def test_normalization_gradcheck():
    rng = np.random.default_rng(0)
    x = md.asarray(rng.standard_normal((3, 2, 4)), requires_grad=True, device=TEST_DEVICE)
    w = md.asarray(rng.standard_normal(2), requires_grad=True, device=TEST_DEVICE)
    assert gradcheck(lambda t, w: F.batch_norm(t, None, None, w, None, True), (x, w))
    assert gradcheck(lambda t, w: F.group_norm(t, 2, w), (x, w))
    assert gradgradcheck(lambda t, w: F.batch_norm(t, None, None, w, None, True), (x, w))


# -- attention -------------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs", [{}, {"is_causal": True}, {"scale": 0.3}, {"mask": "bool"},
                                    {"mask": "float"}, {"mask": "dead"}, {"gqa": True}])
def test_scaled_dot_product_attention_matches_torch(kwargs, torch):
    kwargs = dict(kwargs)
    q, k, v = _rand(2, 4, 5, 3), _rand(2, 4, 6, 3, seed=1), _rand(2, 4, 6, 2, seed=2)
    mask = kwargs.pop("mask", None)
    if kwargs.pop("gqa", False):
        k, v = k[:, :2], v[:, :2]
        kwargs["enable_gqa"] = True
    arrays = [q, k, v]
    if mask == "bool":
        arrays.append(np.random.default_rng(3).random((5, 6)) > 0.3)
    elif mask == "float":
        arrays.append(_rand(5, 6, seed=3))
    elif mask == "dead":  # a row with every position masked gives zeros
        m = np.ones((5, 6), bool)
        m[2] = False
        arrays.append(m)
    _compare(torch, "scaled_dot_product_attention", arrays, kwargs, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="explicit attn_mask should not be set"):
        F.scaled_dot_product_attention(md.asarray(q), md.asarray(q), md.asarray(q),
                                       md.ones((5, 5), dtype=md.bool), is_causal=True)


def test_attention_gradcheck():
    rng = np.random.default_rng(0)
    q, k, v = (md.asarray(rng.standard_normal(s), requires_grad=True, device=TEST_DEVICE)
               for s in ((2, 3, 2), (2, 4, 2), (2, 4, 3)))
    assert gradcheck(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                     (q, k, v))


# -- losses and activations ------------------------------------------------------------------

LOSSES = [
    ("smooth_l1_loss", {}), ("smooth_l1_loss", {"beta": 0.5, "reduction": "sum"}),
    ("smooth_l1_loss", {"beta": 0.0}), ("huber_loss", {"delta": 0.7}),
    ("huber_loss", {"reduction": "none"}),
    ("binary_cross_entropy", {}), ("binary_cross_entropy", {"weight": True, "reduction": "sum"}),
    ("binary_cross_entropy_with_logits", {}),
    ("binary_cross_entropy_with_logits", {"pos_weight": True, "weight": True,
                                          "reduction": "none"}),
]


@pytest.mark.parametrize("name,kwargs", LOSSES, ids=[f"{n}-{sorted(k)}" for n, k in LOSSES])
def test_losses_match_torch(name, kwargs, torch):
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((4, 3)) * 2).astype(np.float32)
    target = rng.random((4, 3)).astype(np.float32)
    if name == "binary_cross_entropy":
        x = 1 / (1 + np.exp(-x))
    elif name != "binary_cross_entropy_with_logits":
        target = target * 4 - 2
    kwargs = dict(kwargs)
    arrays = [x, target]
    ours_kw, theirs_kw = {}, {}
    for key in ("weight", "pos_weight"):
        if kwargs.pop(key, False):
            w = rng.random(3).astype(np.float32) + 0.5
            ours_kw[key], theirs_kw[key] = md.asarray(w, device=TEST_DEVICE), torch.tensor(w)
    xa = md.asarray(x, requires_grad=True, device=TEST_DEVICE)
    xb = torch.tensor(x, requires_grad=True)
    out_a = getattr(F, name)(xa, md.asarray(target, device=TEST_DEVICE), **kwargs, **ours_kw)
    out_b = getattr(torch.nn.functional, name)(xb, torch.tensor(target), **kwargs, **theirs_kw)
    np.testing.assert_allclose(_np(out_a), out_b.detach().numpy(), rtol=1e-5, atol=1e-6)
    out_a.sum().backward()
    out_b.sum().backward()
    np.testing.assert_allclose(to_numpy(xa.grad), xb.grad.numpy(), rtol=1e-4, atol=1e-6)
    del arrays


def test_loss_modules_and_errors(torch):
    x, y = md.asarray([[0.2, 0.9]]), md.asarray([[0.0, 1.0]])
    for ours, theirs in ((nn.BCELoss(), torch.nn.BCELoss()),
                         (nn.BCEWithLogitsLoss(), torch.nn.BCEWithLogitsLoss()),
                         (nn.SmoothL1Loss(beta=0.5), torch.nn.SmoothL1Loss(beta=0.5)),
                         (nn.HuberLoss(delta=0.5), torch.nn.HuberLoss(delta=0.5))):
        assert float(ours(x, y)) == pytest.approx(float(theirs(torch.tensor([[0.2, 0.9]]),
                                                               torch.tensor([[0.0, 1.0]]))))
    with pytest.raises(ValueError, match="binary_cross_entropy: all elements of input should "
                                         "be between 0 and 1"):
        F.binary_cross_entropy(md.asarray([1.5]), md.asarray([1.0]))
    with pytest.raises(ValueError, match=r"binary_cross_entropy_with_logits: using a target "
                                         r"size \(\[2\]\) that is different to the input size"):
        F.binary_cross_entropy_with_logits(md.ones(3), md.ones(2))
    with pytest.raises(ValueError, match="smooth_l1_loss: does not support negative values "
                                         "for beta"):
        F.smooth_l1_loss(md.ones(2), md.ones(2), beta=-1.0)


def test_binary_cross_entropy_clamps_its_logs(torch):
    x = np.array([0.0, 1.0, 0.5, 1e-30], np.float32)
    t = np.array([1.0, 0.0, 1.0, 1.0], np.float32)
    ours = F.binary_cross_entropy(md.asarray(x), md.asarray(t), reduction="none")
    theirs = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t),
                                                      reduction="none")
    np.testing.assert_allclose(_np(ours), theirs.numpy(), rtol=1e-6)
    xa = md.asarray(x, requires_grad=True)
    F.binary_cross_entropy(xa, md.asarray(t)).backward()
    assert bool(md.all(md.isfinite(xa.grad)))


ACTIVATIONS = [
    ("relu6", {}), ("hardtanh", {"min_val": -0.5, "max_val": 2.0}), ("hardsigmoid", {}),
    ("hardswish", {}), ("logsigmoid", {}), ("mish", {}), ("selu", {}), ("softsign", {}),
    ("normalize", {"dim": 1}), ("normalize", {"p": 1.0, "dim": 0}),
]


@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=[f"{n}{k}" for n, k in ACTIVATIONS])
def test_activations_match_torch(name, kwargs, torch):
    # the kinks (-3, 0, 3, 6, the hardtanh bounds) included: PyTorch's gradients there
    x = np.array([[-40.0, -3.0, -1.0, -0.5, 0.0], [0.5, 2.0, 3.0, 6.0, 40.0]], np.float32)
    _compare(torch, name, [x], kwargs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape", [(10,), (64, 8, 12, 12)], ids=["small", "cnn-sized"])
def test_relu_gradient_is_threshold_backward_as_torch(shape, torch):
    """Note [threshold_backward] in ops/nn.py: relu's gradient is one op; zeros, NaN and
    infinities (in the input and in the gradient) get PyTorch's values; the small and the
    bit-masking CPU kernels agree; second order goes through the op's own derivative."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal(shape).astype(np.float32)
    g = rng.standard_normal(shape).astype(np.float32)
    flat_x, flat_g = x.reshape(-1), g.reshape(-1)
    flat_x[:5] = [0.0, -0.0, np.nan, np.inf, -np.inf]
    flat_g[5:9] = [np.nan, np.inf, np.nan, -np.inf]
    flat_x[5:9] = [1.0, 2.0, -1.0, 0.0]
    ours = md.asarray(x, requires_grad=True, device=TEST_DEVICE)
    md.relu(ours).backward(md.asarray(g, device=TEST_DEVICE))
    theirs = torch.tensor(x, requires_grad=True)
    torch.relu(theirs).backward(torch.tensor(g))
    np.testing.assert_array_equal(to_numpy(ours.grad), theirs.grad.numpy())
    assert not np.signbit(to_numpy(ours.grad)).any() or np.isnan(g).any()
    y = md.asarray(x, device=TEST_DEVICE)
    for t in (0.0, 0.5):
        want = torch.ops.aten.threshold_backward(torch.tensor(g), torch.tensor(x), t)
        np.testing.assert_array_equal(
            to_numpy(md.ops.aten.threshold_backward(md.asarray(g, device=TEST_DEVICE), y, t)),
            want.numpy())
    x64 = md.asarray(rng.standard_normal((3, 4)), requires_grad=True, device=TEST_DEVICE)
    w = md.asarray(rng.standard_normal((3, 4)), device=TEST_DEVICE)
    assert gradgradcheck(lambda t: (md.relu(t) * w).sum(), [x64])
    seen = []

    class Log(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    with Log():
        md.relu(x64).sum().backward()
    assert "aten::threshold_backward" in seen and "aten::where" not in seen


def test_activation_modules_match_torch_and_repr(torch):
    x = np.linspace(-5, 5, 11, dtype=np.float32)
    names = ["ReLU6", "Hardtanh", "Hardsigmoid", "Hardswish", "LogSigmoid", "Mish", "SELU",
             "Softsign"]
    for name in names:
        ours, theirs = getattr(nn, name)(), getattr(torch.nn, name)()
        np.testing.assert_allclose(_np(ours(md.asarray(x))), theirs(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=name)
        assert repr(ours) == repr(theirs)


def test_layer_reprs_and_state_dicts_match_torch(torch):
    def build(lib):
        return lib.Sequential(
            lib.Conv2d(1, 8, 3, padding=1), lib.BatchNorm2d(8), lib.ReLU(), lib.MaxPool2d(2),
            lib.Conv2d(8, 16, (3, 2), stride=2, dilation=(1, 2), groups=2, bias=False),
            lib.Conv2d(16, 4, 3, padding="same"), lib.GroupNorm(2, 4), lib.AvgPool2d(2),
            lib.Conv1d(4, 2, 3), lib.BatchNorm1d(2, momentum=None, affine=False),
            lib.MaxPool1d(3, stride=2, padding=1), lib.AvgPool1d(2), lib.Hardtanh(-2.0, 2.0),
            lib.SmoothL1Loss(), lib.BCEWithLogitsLoss(), lib.MaxPool2d(3, 1, 1, ceil_mode=True))

    ours, theirs = build(nn), build(torch.nn)
    assert repr(ours) == repr(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    for (name, a), (_, b) in zip(ours.state_dict().items(), theirs.state_dict().items()):
        assert tuple(a.shape) == tuple(b.shape), name


def test_conv_initialization_has_torch_bounds():
    conv = nn.Conv2d(4, 6, 3, groups=2)
    bound = 1 / math.sqrt(2 * 9)  # fan_in = in_channels / groups * kernel size
    assert float(md.max(md.abs(conv.weight))) <= bound
    assert float(md.max(md.abs(conv.bias))) <= bound
    assert conv.weight.shape == (6, 2, 3, 3)


def test_small_cnn_trains_on_the_device_under_test():
    md.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 2)).to(TEST_DEVICE)
    x = md.randn((16, 1, 4, 4), device=TEST_DEVICE)
    y = (md.sum(x[:, 0, :2], axis=(1, 2)) > md.sum(x[:, 0, 2:], axis=(1, 2))).astype(md.int64)
    opt = md.optim.Adam(model.parameters(), lr=0.05)
    first = None
    for _ in range(30):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        first = float(loss) if first is None else first
    assert float(loss) < first / 4


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8])
@pytest.mark.parametrize("args", [((2, 2), (), (0, 0), (1, 1), False),
                                  ((3, 3), (2, 2), (1, 1), (1, 1), True),
                                  ((2, 3), (1, 2), (1, 1), (2, 1), False),
                                  ((3, 2), (2, 2), (0, 0), (1, 2), True)], ids=str)
def test_max_pool_lowest_values_ties_and_empty_batches_pick_what_torch_picks(dtype, args,
                                                                            torch):
    # Note [Max pooling as one argmax]: windows whose maximum is the dtype's lowest value
    # next to padding (PyTorch names the first position inside the input), ties, and a
    # batch of no planes
    rng = np.random.default_rng(0)
    lowest = -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
    x = rng.integers(0, 3, (2, 3, 7, 6)).astype(dtype)
    x[0, 0] = lowest
    x[1, 2, :3] = lowest
    for a in (x, x[:0], np.where(x == lowest, 1, x).astype(dtype)):
        m, im = md.ops.aten.max_pool2d_with_indices(md.asarray(a, device=TEST_DEVICE), *args)
        t, it = torch.ops.aten.max_pool2d_with_indices(torch.tensor(a), *args)
        np.testing.assert_array_equal(to_numpy(m), t.numpy())
        np.testing.assert_array_equal(to_numpy(im), it.numpy())
        assert to_numpy(m).dtype == a.dtype


def test_max_pool_of_integers_and_of_padding_only_windows(torch):
    x = np.arange(30, dtype=np.int64).reshape(1, 1, 5, 6) % 7
    a, ia = F.max_pool2d(md.asarray(x, device=TEST_DEVICE), 3, 2, 1, return_indices=True)
    b, ib = torch.nn.functional.max_pool2d(torch.tensor(x), 3, 2, 1, return_indices=True)
    np.testing.assert_array_equal(to_numpy(a), b.numpy())
    np.testing.assert_array_equal(to_numpy(ia), ib.numpy())
    # a window that holds padding only: -inf and PyTorch's index (outside the plane); its
    # gradient goes nowhere (PyTorch's backward would write outside the plane)
    one = np.ones((1, 1, 1, 1), np.float32)
    args = ((1, 2), (1, 1), (0, 1), (1, 2), False)
    a, ia = md.ops.aten.max_pool2d_with_indices(md.asarray(one, device=TEST_DEVICE), *args)
    b, ib = torch.ops.aten.max_pool2d_with_indices(torch.tensor(one), *args)
    np.testing.assert_array_equal(to_numpy(a), b.numpy())
    np.testing.assert_array_equal(to_numpy(ia), ib.numpy())
    grad = md.ops.aten.max_pool2d_with_indices_backward(md.ones_like(a), md.asarray(
        one, device=TEST_DEVICE), *args, ia)
    np.testing.assert_array_equal(to_numpy(grad), [[[[0.0]]]])
