"""Every catalogue op gives the same result whatever the memory layout of its inputs.

The CPU kernels read NumPy arrays directly (Note [Hand-written CPU kernels] in
``ops/_cpu_kernels.py``), and some write into positional ``out`` arrays; a fast path that
assumed row-major memory would give wrong values, silently, for a view.  Each OpInfo sample
is run on contiguous tensors and again with every array argument (lists' included) made a
view of the same values in another layout:

- ``strided``: every other element of a base twice as wide in its last axis;
- ``reversed``: a view with a negative stride in its first axis;
- ``transposed``: column-major memory (the permuted view of a permuted copy).

The values, dtypes and shapes must agree (to the last bits that a summation order may
change), and the bases of the views must be unchanged.  In-place ops applied to such a view,
and ``out=`` given one, must write the contiguous call's values into the view and nothing
outside it.  The same calls also run with their memory shared: ``out=`` one of the inputs
(``md.add(x, y, out=x)``), and an in-place op given its own self as another argument
(``x.mul_(x)``); both must give the functional call's values.  And a differentiable op's
backward, handed its incoming gradient as a transposed or reversed view (the output used
through ``permute_dims`` or ``flip``), must give the gradients of the contiguous case.
Pinned to the CPU: the layouts are NumPy's strides.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from mdtensor.ops import CATALOGUE

import mdtensor as md

LAYOUTS = ("strided", "reversed", "transposed")
#: ops whose results are drawn at random; ``view`` refuses a layout it cannot view without
#: a copy (NotViewableError, as PyTorch), and ``view_copy`` is its copy
_SKIP = {"dropout", "view", "view_copy"}


def _decls(which):
    out = []
    for _key, decl in sorted(CATALOGUE.items()):
        info = decl.info
        if (info is None or info.samples is None or not getattr(decl, which)
                or decl.name in _SKIP or "random" in decl.tags):
            continue
        out.append(pytest.param(decl, id=decl.name))
    return out


def _view(a: np.ndarray, layout: str):
    """``(view, base)``: a CPU tensor with ``a``'s values in ``layout``, viewing ``base``;
    None for a 0-d or empty array."""
    if a.ndim == 0 or a.size == 0:
        return None
    if layout == "strided":
        wide = np.ones(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        wide[..., ::2] = a
        base = md.asarray(wide, device="cpu")
        return base[..., ::2], base
    if layout == "reversed":
        base = md.asarray(np.ascontiguousarray(a[::-1]), device="cpu")
        return base[::-1], base
    if a.ndim < 2:
        return None
    axes = tuple(reversed(range(a.ndim)))
    base = md.asarray(np.ascontiguousarray(a.transpose(axes)), device="cpu")
    return md.permute_dims(base, axes), base


def _copy(v):
    if isinstance(v, np.ndarray):
        return md.asarray(v.copy(), device="cpu")
    if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
        return type(v)(md.asarray(x.copy(), device="cpu") for x in v)
    return v


class _Views:
    """The arguments of one sample with every array made a view in ``layout``, and the
    bases of those views with their values before the call."""

    def __init__(self, values, layout):
        self.bases = []
        self.values = [self._convert(v, layout) for v in values]

    def _convert(self, v, layout):
        if isinstance(v, np.ndarray):
            made = _view(v, layout)
            if made is None:
                return _copy(v)
            self.bases.append((made[1], _host(made[1])))
            return made[0]
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
            return type(v)(self._convert(x, layout) for x in v)
        return v

    def check_bases(self, what):
        for base, before in self.bases:
            _same(before, _host(base), f"{what}: the base of an input view changed")


def _host(x):
    if isinstance(x, md.Tensor):
        if x.layout is not md.strided:
            x = x.to_dense()
        return np.array(x.numpy(force=True))
    if isinstance(x, (tuple, list)):
        return [_host(v) for v in x]
    return x


def _same(want, got, what):
    if isinstance(want, list):
        assert isinstance(got, list) and len(want) == len(got), what
        for w, g in zip(want, got):
            _same(w, g, what)
        return
    want, got = np.asarray(want), np.asarray(got)
    assert (got.shape, got.dtype) == (want.shape, want.dtype), what
    if want.dtype.kind in "fc":
        tol = 1e-5 if want.dtype in (np.float32, np.complex64) else 1e-10
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _calls(decl):
    """``(dtype name, sample index, sample)`` of the op's samples with an array argument."""
    rng = np.random.default_rng(0)
    for dtype in decl.info.dtypes[:6]:
        for i, s in enumerate(decl.info.samples(dtype, rng)):
            if any(isinstance(v, (np.ndarray, list, tuple)) for v in s.args):
                yield dtype.name, i, s


_FAILED = object()


def _result(fn, *args, **kwargs):
    """``fn``'s result read back to NumPy, or ``_FAILED`` where it raises (a sample that
    checks an error)."""
    try:
        return _host(fn(*args, **kwargs))
    except Exception:  # noqa: BLE001
        return _FAILED


@pytest.fixture(autouse=True)
def _quiet():
    """The samples' special values warn in NumPy; the results are what is compared."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        yield


def _skip_unless(checked: int, what: str) -> None:
    if not checked:
        pytest.skip(f"no sample {what}")


@pytest.mark.parametrize("decl", _decls("functional"))
def test_results_do_not_depend_on_the_inputs_layout(decl):
    op = decl.functional[0].overloadpacket
    checked = 0
    for dtype, i, s in _calls(decl):
        kwargs = {k: _copy(v) for k, v in s.kwargs.items()}
        want = _result(op, *[_copy(a) for a in s.args], **kwargs)
        if want is _FAILED:
            continue
        for layout in LAYOUTS:
            views = _Views(s.args, layout)
            if views.bases:
                what = f"{decl.name}[{dtype}] sample {i}, {layout} inputs"
                _same(want, _host(op(*views.values, **kwargs)), what)
                views.check_bases(what)
                checked += 1
    _skip_unless(checked, "with an array that has another layout")


@pytest.mark.parametrize("decl", _decls("inplace"))
def test_inplace_ops_write_into_a_view_only(decl):
    op = decl.inplace[0]
    checked = 0
    for dtype, i, s in _calls(decl):
        if not isinstance(s.args[0], np.ndarray):
            continue
        rest = [_copy(a) for a in s.args[1:]]
        kwargs = {k: _copy(v) for k, v in s.kwargs.items()}
        want = _result(op, _copy(s.args[0]), *rest, **kwargs)  # (in place: self's values)
        if want is _FAILED:
            continue
        for layout in LAYOUTS:
            checked += _written_only_into_the_view(
                s.args[0], layout, functools.partial(_into_self, op, rest, kwargs), want,
                f"{decl.name}_[{dtype}] sample {i}, {layout} self")
    _skip_unless(checked, "whose self is an array")


@pytest.mark.parametrize("decl", _decls("out"))
def test_out_variants_write_into_a_view_only(decl):
    op, functional = decl.out[0], decl.functional[0]
    checked = 0
    for dtype, i, s in _calls(decl):
        args = [_copy(a) for a in s.args]
        kwargs = {k: _copy(v) for k, v in s.kwargs.items()}
        want = _result(functional, *args, **kwargs)
        if want is _FAILED or isinstance(want, list):  # several outputs: out= takes a tuple
            continue
        for layout in LAYOUTS:
            checked += _written_only_into_the_view(
                np.zeros_like(want), layout, functools.partial(_into_out, op, args, kwargs),
                want, f"{decl.name}(out=)[{dtype}] sample {i}, {layout} out")
    _skip_unless(checked, "with a single array result")


def _into_self(op, rest, kwargs, view):
    op(view, *rest, **kwargs)


def _into_out(op, args, kwargs, view):
    op(*args, **kwargs, out=view)


def _written_only_into_the_view(a, layout, write, want, what) -> bool:
    """``write(view)`` into a view of ``a``'s layout gives ``want`` and leaves the elements
    between the view's as they were; False where ``a`` has no such view."""
    made = _view(a, layout)
    if made is None:
        return False
    view, base = made
    before = _host(base)
    write(view)
    _same(want, _host(view), what)
    if layout == "strided":  # the elements between the view's
        _same(before[..., 1::2], _host(base)[..., 1::2], f"{what}: wrote outside the view")
    return True


def _like(a, want) -> bool:
    """``a`` is an array of ``want``'s shape and dtype."""
    return (isinstance(a, np.ndarray) and isinstance(want, np.ndarray)
            and (a.shape, a.dtype) == (want.shape, want.dtype))


@pytest.mark.parametrize("decl", _decls("out"))
def test_out_may_be_one_of_the_inputs(decl):
    op, functional = decl.out[0], decl.functional[0]
    checked = 0
    for dtype, i, s in _calls(decl):
        kwargs = {k: _copy(v) for k, v in s.kwargs.items()}
        want = _result(functional, *[_copy(a) for a in s.args], **kwargs)
        for j in [j for j, a in enumerate(s.args) if _like(a, want)]:
            args = [_copy(v) for v in s.args]
            op(*args, **kwargs, out=args[j])
            _same(want, _host(args[j]), f"{decl.name}(out= argument {j})[{dtype}] sample {i}")
            checked += 1
    _skip_unless(checked, "with an input of the result's shape and dtype")


def _grads(decl, sample, layout):
    """Gradients of ``sum(w * out)`` over the float64 outputs with respect to the float64
    arrays, the outputs used in ``layout`` (their gradients arriving as such views)."""
    leaves = []

    def leaf(v):
        if isinstance(v, np.ndarray) and v.dtype == np.float64:
            leaves.append(md.asarray(v.copy(), device="cpu", requires_grad=True))
            return leaves[-1]
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, np.ndarray) for x in v):
            return type(v)(leaf(x) for x in v)
        return _copy(v)

    out = decl.functional[0](*[leaf(a) for a in sample.args],
                             **{k: leaf(v) for k, v in sample.kwargs.items()})
    outs = [o for o in (out if isinstance(out, (list, tuple)) else [out])
            if isinstance(o, md.Tensor) and o.dtype == md.float64 and o.requires_grad]
    if not outs or not leaves:
        return None
    loss = 0
    for k, o in enumerate(outs):
        w = np.linspace(0.5, 1.5, o.size).reshape(o.shape) + k
        if layout == "transposed" and o.ndim >= 2:
            axes = tuple(reversed(range(o.ndim)))
            o, w = md.permute_dims(o, axes), w.transpose(axes)
        elif layout == "reversed" and o.ndim:
            o, w = md.flip(o, axis=0), w[::-1]
        loss = loss + md.sum(o * md.asarray(np.ascontiguousarray(w), device="cpu"))
    return [None if g is None else _host(g)
            for g in md.autograd.grad(loss, leaves, allow_unused=True)]


def _differentiable():
    return [p for p in _decls("functional")
            if p.values[0].info.differentiable and md.float64 in p.values[0].info.dtypes]


@pytest.mark.parametrize("decl", _differentiable())
def test_gradients_do_not_depend_on_the_incoming_gradients_layout(decl):
    checked = 0
    for i, s in enumerate(decl.info.samples(md.float64, np.random.default_rng(0))):
        want = _result(_grads, decl, s, "contiguous")
        if want is _FAILED or want is None:
            continue
        for layout in ("transposed", "reversed"):
            got = _grads(decl, s, layout)
            for w, g in zip(want, got):
                assert (w is None) == (g is None), f"{decl.name} sample {i}, {layout}"
                if w is not None:
                    _same(w, g, f"{decl.name} sample {i}: gradients, {layout} outputs")
            checked += 1
    _skip_unless(checked, "in float64 with a gradient")


@pytest.mark.parametrize("decl", _decls("inplace"))
def test_inplace_ops_may_read_their_self_as_another_argument(decl):
    checked = 0
    for dtype, i, s in _calls(decl):
        x = s.args[0]  # j: an argument that could be self, and is made self
        for j in [j for j, a in enumerate(s.args[1:], 1) if _like(a, x)]:
            kwargs = {k: _copy(v) for k, v in s.kwargs.items()}
            want = _result(decl.functional[0], *[_copy(x if k == j else v)
                                                 for k, v in enumerate(s.args)], **kwargs)
            if not _like(x, want):
                continue
            args = [_copy(v) for v in s.args]
            args[j] = args[0]
            decl.inplace[0](*args, **kwargs)
            _same(want, _host(args[0]), f"{decl.name}_(self as argument {j})[{dtype}] "
                                        f"sample {i}")
            checked += 1
    _skip_unless(checked, "with another argument of self's shape and dtype")
