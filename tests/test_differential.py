"""The differential suite: every catalogue op against PyTorch (and NumPy where PyTorch has
no counterpart), on hypothesis-generated inputs.

For each ``Ref`` of ``_reference_ops.REFS`` and each drawn ``Sample`` the op runs in
mdtensor (on the device under test) and in the reference, and must agree with it on
whether it raises (mdtensor's message then names the op), on the number, shapes and dtypes
of the outputs, on their values, and -- for float64 inputs of differentiable ops -- on the
gradients of a weighted sum of the outputs.  A mismatch passes only where a row of
``_reference_differences.DIFFERENCES`` explains it, and then mdtensor's outcome is compared
with the row's own reference (NumPy or the Array API) instead.  The same call on the Meta
device must give the real outputs' shapes and dtypes, and raise no more than the real one
does.

``MDTENSOR_DIFF_EXAMPLES`` sets the examples per op (30 by default, as in CI; 400 for a
thorough local run).  The examples are derandomized, so a run is reproducible; set
``MDTENSOR_DIFF_RANDOM=1`` to explore other inputs.  Skipped without PyTorch.
"""

from __future__ import annotations

import dataclasses
import os
import warnings

import numpy as np
import pytest
from _helpers import NO_EINSUM, TEST_DEVICE, skip_on, to_numpy
from _reference_differences import DIFFERENCES, DOC, RAISES, Case, matching, render, weights
from _reference_ops import EXCLUDED, REFS, Sample
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mdtensor.ops import CATALOGUE

import mdtensor as md

torch = pytest.importorskip("torch")

EXAMPLES = int(os.environ.get("MDTENSOR_DIFF_EXAMPLES", "30"))
RANDOM = os.environ.get("MDTENSOR_DIFF_RANDOM", "") not in ("", "0")

#: ops without a Meta kernel (calling them on "meta" raises NotImplementedError); a test
#: keeps this list exact
NO_META: frozenset[str] = frozenset()
#: documented limits of one backend, by op
MARKS = {"einsum": skip_on("loopback", reason=NO_EINSUM)}


# ---------------------------------------------------------------------------------------
# Running one library


def _to_torch(v):
    if isinstance(v, np.ndarray):
        return torch.from_numpy(v.copy())
    if isinstance(v, (list, tuple)) and any(isinstance(x, np.ndarray) for x in v):
        return type(v)(_to_torch(x) for x in v)
    return v


def _to_md(v, device):
    if isinstance(v, np.ndarray):
        return md.asarray(v.copy(), device=device)
    if isinstance(v, (list, tuple)) and any(isinstance(x, np.ndarray) for x in v):
        return type(v)(_to_md(x, device) for x in v)
    return v


def _leaves(args, kwargs, requires_grad):
    """The float64/complex128 tensors among the arguments, made to require grad."""
    out = []
    for v in (*args, *kwargs.values()):
        for t in (v if isinstance(v, (list, tuple)) else (v,)):
            if isinstance(t, (md.Tensor, torch.Tensor)) and str(t.dtype).endswith(
                    ("float64", "complex128")):
                requires_grad(t)
                out.append(t)
    return out


def _flat(r):
    """A call's result as a list of outputs (tensors or Python values)."""
    if isinstance(r, (tuple, list)):
        return [x for v in r for x in _flat(v)]
    return [r]


def _np(t):
    if isinstance(t, torch.Tensor):
        return t.detach().resolve_conj().resolve_neg().cpu().numpy()
    if isinstance(t, md.Tensor):
        if str(t.device) == "meta":  # shape and dtype only
            return np.lib.stride_tricks.as_strided(np.zeros(1, t.dtype.numpy), t.shape,
                                                   (0,) * t.ndim)
        return to_numpy(t.detach())
    return np.asarray(t)


def _run(ref, lib, sample, device=None):
    """The op's outputs (NumPy arrays) in ``lib`` (``md``, ``torch`` or ``np``), or the
    exception it raised."""
    if lib is md:
        args = tuple(_to_md(a, device) for a in sample.args)
        kwargs = {k: _to_md(v, device) for k, v in sample.kwargs.items()}
        fn = ref.md
    elif lib is torch:
        args = tuple(_to_torch(a) for a in sample.args)
        kwargs = {k: _to_torch(v) for k, v in sample.kwargs.items()}
        fn = ref.torch
    else:
        args = tuple(a.copy() if isinstance(a, np.ndarray) else a for a in sample.args)
        kwargs = dict(sample.kwargs)
        fn = lambda _, *a, **k: ref.numpy(*a, **k)  # noqa: E731
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = [_np(o) for o in _flat(fn(lib, *args, **kwargs))]
    except Exception as e:  # noqa: BLE001 - any exception is an outcome to compare
        return e
    return ref.post(outs) if ref.post is not None else outs


def _grads(ref, lib, sample, device=None):
    """Gradients of ``sum(w * out)`` over the floating outputs with respect to the float64
    inputs, as NumPy arrays (None where an input gets none); None when nothing is
    differentiable; the exception if one is raised."""
    if lib is md:
        args = tuple(_to_md(a, device) for a in sample.args)
        kwargs = {k: _to_md(v, device) for k, v in sample.kwargs.items()}
        leaves = _leaves(args, kwargs, lambda t: t.requires_grad_(True))
    else:
        args = tuple(_to_torch(a) for a in sample.args)
        kwargs = {k: _to_torch(v) for k, v in sample.kwargs.items()}
        leaves = _leaves(args, kwargs, lambda t: t.requires_grad_(True))
    if not leaves:
        return None
    fn = ref.md if lib is md else ref.torch
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            outs = [o for o in _flat(fn(lib, *args, **kwargs))
                    if hasattr(o, "requires_grad") and o.requires_grad
                    and str(o.dtype).endswith(("float32", "float64", "complex64",
                                               "complex128"))]
            if not outs:
                return None
            loss = 0
            for i, o in enumerate(outs):
                w = weights(tuple(o.shape), i)
                if "complex" in str(o.dtype):
                    re, im = lib.real(o), lib.imag(o)
                    loss = loss + (re * lib.asarray(w, dtype=re.dtype, device=re.device)
                                   ).sum()
                    w2 = weights(tuple(o.shape), i + 0.5)
                    loss = loss + (im * lib.asarray(w2, dtype=im.dtype, device=im.device)
                                   ).sum()
                else:
                    loss = loss + (o * lib.asarray(w, dtype=o.dtype, device=o.device)).sum()
            autograd = md.autograd if lib is md else torch.autograd
            gs = autograd.grad(loss, leaves, allow_unused=True)
    except Exception as e:  # noqa: BLE001
        return e
    return [None if g is None else _np(g) for g in gs]


# ---------------------------------------------------------------------------------------
# Comparing


def _tolerances(dtype, scale):
    if dtype.kind in "fc":
        if dtype.itemsize <= 8 and not (dtype.kind == "c" and dtype.itemsize == 16):
            return 3e-5 * scale, 1e-6 * scale
        return 1e-9 * scale, 1e-12 * scale
    return 0, 0


def _mismatch(got, want, scale=1.0):
    """The first aspect (shape, dtype, values) in which output lists differ, or None."""
    if len(got) != len(want):
        return "shape", f"{len(got)} outputs, reference {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return "shape", f"output {i}: shape {g.shape}, reference {w.shape}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype != w.dtype:
            return "dtype", f"output {i}: dtype {g.dtype}, reference {w.dtype}"
    for i, (g, w) in enumerate(zip(got, want)):
        problem = _value_mismatch(g, w, scale)
        if problem:
            return "values", f"output {i}: {problem}"
    return None


def _value_mismatch(g, w, scale):
    if g.dtype.kind in "fc" or w.dtype.kind in "fc":
        rtol, atol = _tolerances(np.dtype(g.dtype), scale)
        try:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
        except AssertionError as e:
            return str(e).strip().splitlines()[-3:]
        return None
    if not np.array_equal(g, w):
        return f"{g.tolist()} != {w.tolist()}"
    return None


def _names(op):
    """The names an error of ``op`` may give: its catalogue names, the view op a ``_copy``
    op copies, the indexing operators."""
    base = op.removesuffix("_copy").removesuffix("_")
    decl = CATALOGUE.get(f"aten::{base}")
    names = {op, base, base.removeprefix("linalg_"), base.removeprefix("fft_"),
             base.removesuffix("_like")}
    if base in ("basic_index", "index", "index_put", "index_put_"):
        names |= {"__getitem__", "__setitem__"}
    if decl is not None:
        names |= set(decl.names) | set(decl.methods)
    return names


def _explained(case, aspect, what, used=()):
    """The difference explaining ``aspect`` of ``case``, or an AssertionError naming the
    unexplained mismatch.  A row explains it when mdtensor's outcome is the row's
    expectation; where several rows apply, the first whose expectation holds (the error
    names the first's failure when none does).  Rows compose: where mdtensor's result
    differs from a row's expectation in another aspect (``mixed-kinds`` recomputes
    PyTorch's result in NumPy's dtype, and a complex ``0 ** 0`` in it is still PyTorch's
    nan), another row must explain that difference, against the first row's expectation.
    ``used``: the rows already applied."""
    found = [d for d in matching(case, aspect) if d not in used]
    if not found:
        raise AssertionError(f"{case.op}: unexplained {aspect} mismatch with the reference: "
                             f"{what}")
    failures = []
    for d in found:
        try:
            _holds(d, dataclasses.replace(case, aspect=aspect), aspect, used)
        except AssertionError as e:
            failures.append(e)
            continue
        return d
    raise failures[0]


def _holds(d, case, aspect, used):
    """Check that mdtensor's outcome is the expectation of the difference ``d``."""
    if d.expect is None:
        return
    want = d.expect(case)
    if want is None:  # the row compares nothing for this call
        return
    if want is RAISES or isinstance(want, Exception):
        assert case.md_raised, f"{case.op}: difference {d.key} says mdtensor raises " \
                               f"({d.reference}), it returned"
        _check_names_op(case.op, case.md_out)
        return
    assert not case.md_raised, f"{case.op}: difference {d.key} expects a result; " \
                               f"mdtensor raised {case.md_out!r}"
    if aspect == "gradient":
        problem = _grad_mismatch(case.md_out, want, 10 * case.tol)
    else:
        want = [np.asarray(w) for w in (want if isinstance(want, (list, tuple)) else [want])]
        problem = _mismatch(case.md_out, want, case.tol)
    if problem is not None:
        _explained(dataclasses.replace(case, torch_out=want), problem[0],
                   f"difference {d.key} ({d.reference}): {problem[1]}", (*used, d))


def _check_names_op(op, error):
    assert any(n in str(error) for n in _names(op)), \
        f"{op}: the error does not name the op: {error!r}"


def _outcome(out) -> str:
    return f"raised {out!r}" if isinstance(out, BaseException) else "returned"


def check(ref, sample, device):
    """Compare one call (see the module docstring)."""
    case = Case(ref.op, sample.args, sample.kwargs, device=str(device), tol=ref.tol)
    reference = torch if ref.torch is not None else np
    case.rerun = lambda args, kwargs: _run(ref, reference, Sample(tuple(args), dict(kwargs)))
    case.rerun_grads = lambda args, kwargs: _grads(ref, torch, Sample(tuple(args),
                                                                      dict(kwargs)))
    if ref.numpy is not None:
        case.numpy = lambda args, kwargs: _run(ref, np, Sample(tuple(args), dict(kwargs)))
    case.torch_out = _run(ref, reference, sample)
    case.md_out = _run(ref, md, sample, device)
    _check_meta(ref, sample, case)
    if case.torch_raised or case.md_raised:
        if case.torch_raised and case.md_raised:
            _check_names_op(ref.op, case.md_out)
            return
        _explained(case, "raises", f"mdtensor {_outcome(case.md_out)}, the reference "
                                   f"{_outcome(case.torch_out)}")
        return
    problem = _mismatch(case.md_out, case.torch_out, ref.tol)
    if problem is not None:
        _explained(case, problem[0], problem[1])
        return
    if ref.grad and ref.torch is not None:
        _check_grads(ref, sample, case, device)


def _check_grads(ref, sample, case, device):
    want = _grads(ref, torch, sample)
    if want is None:
        return
    got = _grads(ref, md, sample, device)
    case.torch_out, case.md_out = want, got
    problem = _grad_mismatch(got, want, 10 * ref.tol)
    if problem is not None:
        _explained(case, "gradient", problem[1])


def _grad_mismatch(got, want, scale):
    """``("gradient", what)`` where gradient lists (or the exceptions raised) differ, or
    None; an input without a gradient and one with a zero gradient agree."""
    if isinstance(want, Exception) or isinstance(got, Exception) or got is None:
        if isinstance(want, Exception) and isinstance(got, Exception):
            return None
        return "gradient", f"mdtensor {got!r}, PyTorch {want!r}"
    for i, (g, w) in enumerate(zip(got, want)):
        if (g is None) != (w is None):
            if not np.any(w if g is None else g):
                continue
            return "gradient", f"input {i}: mdtensor {g}, PyTorch {w}"
        if g is None:
            continue
        if g.shape != w.shape:
            return "gradient", f"input {i}: shape {g.shape}, PyTorch {w.shape}"
        problem = _value_mismatch(g, w, scale)
        if problem:
            return "gradient", f"input {i}: {problem}"
    return None


def _check_meta(ref, sample, case):
    if ref.post is not None:
        return  # gauge-fixed outputs: the meta shapes are those of the raw outputs
    meta = _run(ref, md, sample, "meta")
    if isinstance(meta, NotImplementedError) and "data-dependent" in str(meta):
        return  # nonzero, unique, repeats from a tensor: no shape without the values
    if isinstance(meta, NotImplementedError) and "Meta" in str(meta):
        assert ref.op in NO_META, f"{ref.op}: no Meta kernel ({meta})"
        return
    if case.md_raised:
        return  # the real call raised: the Meta one may not see why (index values)
    assert not isinstance(meta, Exception), \
        f"{ref.op}: the Meta kernel raised {meta!r} where the real kernel returned"
    real = case.md_out
    assert len(meta) == len(real), f"{ref.op}: Meta gives {len(meta)} outputs, real {len(real)}"
    for i, (m, r) in enumerate(zip(meta, real)):
        assert (m.shape, m.dtype) == (r.shape, r.dtype), \
            f"{ref.op}: output {i}: Meta {m.shape} {m.dtype}, real {r.shape} {r.dtype}"


# ---------------------------------------------------------------------------------------
# The tests


def _settings():
    return settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM,
                    database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("ref", [pytest.param(r, id=r.id, marks=MARKS.get(r.op, ()))
                                 for r in REFS])
def test_op_matches_reference(ref):
    @_settings()
    @given(data=st.data())
    def run(data):
        sample = data.draw(ref.sample, label="sample")
        assert isinstance(sample, Sample)
        check(ref, sample, TEST_DEVICE)

    run()


def test_every_catalogue_op_is_compared():
    called = {r.op for r in REFS}
    missing = sorted(k.split("::")[1] for k in CATALOGUE
                     if k.split("::")[1] not in called and k.split("::")[1] not in EXCLUDED)
    assert not missing, f"catalogue ops neither compared nor excluded: {missing}"
    stale = sorted(set(EXCLUDED) & called)
    assert not stale, f"excluded ops that are compared after all: {stale}"


def test_differences_page_is_rendered_from_the_table():
    assert DOC.read_text() == render(), (
        "docs/DIFFERENCES.md is not the table's rendering: run python "
        "tests/_reference_differences.py")


def test_every_difference_names_catalogue_ops():
    ops = {k.split("::")[1] for k in CATALOGUE}
    for d in DIFFERENCES:
        assert set(d.ops) <= ops | {"*"}, f"difference {d.key}: unknown ops {set(d.ops) - ops}"
    assert len({d.key for d in DIFFERENCES}) == len(DIFFERENCES), "difference keys repeat"


def test_coming_from_pytorch_lists_every_difference():
    """docs/FROM_PYTORCH.md lists every deliberate difference: each row of the table by its
    key (a new row needs its line there too)."""
    page = (DOC.parent / "FROM_PYTORCH.md").read_text()
    missing = [d.key for d in DIFFERENCES if f"`{d.key}`" not in page]
    assert not missing, f"docs/FROM_PYTORCH.md does not list the differences {missing}"
