"""An axis out of range names the op, on every backend (Note [Axis errors] in ops/_errors.py).

Every catalogue op whose ``axis``/``dim`` argument is an axis of its first Tensor is called
with an OpInfo sample whose axis is replaced by one out of range: each backend must raise
PyTorch's IndexError naming the op, whatever its array library raised, and leave the input
as it was.
"""

from __future__ import annotations

import numpy as np
import pytest
from _helpers import backend_params, sample_on
from mdtensor.ops import CATALOGUE
from mdtensor.ops._errors import axis_check

import mdtensor as md

DEVICES = ["cpu", "meta", *backend_params("loopback", "jax", "dask")]


def _axis_ops():
    out = []
    for _key, decl in sorted(CATALOGUE.items()):
        if decl.info is None or decl.info.samples is None or not decl.functional:
            continue
        op = decl.functional[0]
        if axis_check(op.schema) is not None:
            out.append(pytest.param(decl, id=decl.name))
    return out


AXIS_OPS = _axis_ops()


def test_the_sweep_covers_the_reductions_and_more():
    names = {p.values[0].name for p in AXIS_OPS}
    assert {"sum", "mean", "prod", "std", "var", "argmax", "cumulative_sum", "flip",
            "softmax", "log_softmax", "fft_fft", "amax", "logsumexp", "roll"} <= names
    assert "unsqueeze" not in names  # its axis counts the result's dimensions


def _bad_call(decl):
    """(args, kwargs, bad axis, ndim) from the op's first sample with a Tensor first."""
    schema = decl.functional[0].schema
    i, a = next((i, a) for i, a in enumerate(schema.arguments) if a.name in ("axis", "dim"))
    rng = np.random.default_rng(0)
    for sample in decl.info.samples(decl.info.dtypes[0], rng):
        if not sample.args or not isinstance(sample.args[0], np.ndarray):
            continue
        ndim = sample.args[0].ndim
        bad = ndim + 3
        args, kwargs = list(sample.args), dict(sample.kwargs)
        kwargs.pop("dim" if a.name == "axis" else "axis", None)  # the alias, if used
        if a.name in kwargs:
            kwargs[a.name] = bad
        elif not a.kwarg_only and i < len(args):
            args[i] = bad
        elif not a.kwarg_only and i == len(args):
            args.append(bad)
        else:
            kwargs[a.name] = bad
        if decl.name == "roll" and "shifts" not in kwargs and len(args) > 1:
            args[1] = 1  # one shift for the one axis
        return args, kwargs, bad, ndim
    pytest.skip(f"{decl.name}: no sample with a Tensor first")



@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("decl", AXIS_OPS)
def test_axis_out_of_range_names_the_op(decl, device):
    args, kwargs, bad, ndim = _bad_call(decl)
    args = [sample_on(v, device) for v in args]
    kwargs = {k: sample_on(v, device) for k, v in kwargs.items()}
    x = args[0]
    version = x._version
    before = None if device == "meta" else np.asarray(x.to("cpu").numpy(force=True)).copy()
    op = decl.functional[0]
    if device == "meta" and not op.has_kernel_for(md.library.DispatchKey.Meta):
        pytest.skip(f"{decl.name} has no Meta kernel")
    packet = op.overloadpacket
    n = max(ndim, 1)
    name = op.schema.name.removesuffix("_copy")  # squeeze_copy's errors are squeeze's
    expected = (rf"^{name}(_copy)?: axis {bad} is out of range for a tensor of dimension "
                rf"{ndim} \(expected to be in range \[{-n}, {n - 1}\]\)")
    with pytest.raises(IndexError, match=expected):
        packet(*args, **kwargs)
    assert x._version == version
    if before is not None:
        np.testing.assert_array_equal(np.asarray(x.to("cpu").numpy(force=True)), before)


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_axes_name_the_op(device):
    x = md.ones((2, 3), device=device)
    for f, name in ((lambda: md.sum(x, axis=(0, 0)), "sum"),
                    (lambda: md.mean(x, axis=(1, -1)), "mean"),
                    (lambda: md.flip(x, axis=(0, -2)), "flip")):
        with pytest.raises(ValueError, match=rf"^{name}: duplicate axes in "):
            f()


@pytest.mark.parametrize("device", DEVICES)
def test_roll_takes_an_axis_twice(device):
    # as PyTorch: each (shift, axis) pair rolls in turn
    x = md.reshape(md.arange(6.0, device=device), (2, 3))
    y = md.roll(x, (1, 2), axis=(1, 1))
    assert tuple(y.shape) == (2, 3)
    if device != "meta":
        np.testing.assert_array_equal(np.asarray(y.to("cpu").numpy(force=True)),
                                      np.roll(np.arange(6.0).reshape(2, 3), 3, axis=1))


@pytest.mark.parametrize("device", DEVICES)
def test_method_spellings_and_the_dim_alias(device):
    x = md.ones((2, 3), device=device)
    with pytest.raises(IndexError, match=r"^sum: axis -3 is out of range"):
        x.sum(dim=-3)
    with pytest.raises(IndexError, match=r"^mean: axis 2 is out of range"):
        x.mean(2)
    with pytest.raises(IndexError, match=r"^sum: axis 1 is out of range for a tensor of "
                                         r"dimension 0 \(expected to be in range \[-1, 0\]\)"):
        md.sum(md.ones((), device=device), axis=1)
    if device in ("cpu", "meta"):  # JAX refuses axis 0 of a 0-d array (PyTorch allows it)
        assert tuple(md.sum(md.ones((), device=device), axis=0).shape) == ()


def test_a_failed_reduction_records_nothing():
    x = md.ones((2, 3), requires_grad=True)
    with pytest.raises(IndexError, match="^sum: axis 2 is out of range"):
        md.sum(x * 2, axis=2)
    y = md.sum(x * 2, axis=1)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(force=True), np.full((2, 3), 2.0))
