"""The bad-input sweep (issue 25): wrong calls on every installed backend.

Each case is one wrong call; on every device it must raise a clear error of the right type
-- naming the op (or the function) and what was expected, never a raw NumPy, JAX or
array_api_strict message (Note [Errors from the backend] in ops/_errors.py) -- and leave the
state as it was: the tensors the calls use (values, version counters, ``.grad``), the
operator registry, the thread-local dispatch state, the mode stack and the grad modes.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from _helpers import TEST_DEVICE, to_numpy

import mdtensor as md
from mdtensor.dispatch.operators import dispatcher

_DEVICES = ["cpu"] + [row["device_type"] for row in md.backends.available()
                      if row["installed"] and row["device_type"] in ("jax", "loopback")]

#: phrases of the backends' own messages that must never reach a user
_RAW = re.compile(r"ufunc|gufunc|dot_general|array_api_strict|jnp\.|inhomogeneous|"
                  r"could not convert|cannot be interpreted|shape-mismatch|StatusOr|"
                  r"object has no attribute|not subscriptable|unhashable|dtype\('|"
                  r"Traceback|NoneType' object")


class Tensors:
    """The tensors the calls use, made once per device (so a failed call that changed one
    would show)."""

    def __init__(self, d):
        self.d = d
        self.x = md.ones((2, 3), device=d)
        self.y = md.ones((4, 5), device=d)
        self.i = md.asarray([0, 1], device=d)
        self.v = md.zeros(3, device=d)
        self.n = md.asarray([5, 6], device=d)
        self.i8 = md.zeros(3, dtype=md.int8, device=d)
        self.w = md.ones(3, device=d, requires_grad=True)
        self.w.grad = md.ones(3, device=d)
        self.c = md.asarray([1j], device=d)

    def all(self):
        return [self.x, self.y, self.i, self.v, self.n, self.i8, self.w, self.c]


def _inference_save(t):
    with md.inference_mode():
        a = md.ones(2, device=t.d)
    return md.ones(2, device=t.d, requires_grad=True) * a


def _define(schema, **kw):
    with md.library.Library("sweepdef", "FRAGMENT") as lib:
        return lib.define(schema, **kw)


def _impl_foreign():
    with md.library.Library("sweepforeign", "DEF") as lib:
        return lib.impl("aten::exp", lambda x: x, "CPU")


def _mode_returns_none(t):
    class Bad(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            return None

    with Bad():
        return md.exp(t.w)


_SHAPES = r"shape|size|dimension"
# id -> (call, error type, what the message must say)
CASES = {
    "matmul-shapes": (lambda t: t.x @ t.y, ValueError, r"matmul: shapes \(2, 3\) and \(4, 5\)"),
    "matmul-0d": (lambda t: t.x @ md.asarray(1.0, device=t.d), ValueError,
                  r"matmul: both arguments must be at least 1-D"),
    "add-broadcast": (lambda t: t.x + t.y, ValueError, r"add.*size of tensor a \(3\)"),
    "mul-broadcast": (lambda t: md.mul(t.x, t.y), ValueError, r"mul.*must match the size"),
    "add-str": (lambda t: t.x + "a", TypeError, r"unsupported operand"),
    "add-list-of-str": (lambda t: md.add(t.x, ["a"]), TypeError, r"add\(\): no overload"),
    "inv-nonsquare": (lambda t: md.linalg.inv(t.x), ValueError,
                      r"linalg.inv: expected a square matrix.*\(2, 3\)"),
    "det-1d": (lambda t: md.linalg.det(t.v), ValueError, r"linalg.det: expected a square"),
    "cholesky-nonsquare": (lambda t: md.linalg.cholesky(t.x), ValueError,
                           r"linalg.cholesky: expected a square"),
    "solve-nonsquare": (lambda t: md.linalg.solve(t.x, t.v[:2]), ValueError,
                        r"linalg.solve: expected a square"),
    "bitwise-float": (lambda t: t.x & t.x, TypeError, r"bitwise_and.*expected.*got float32"),
    "invert-float": (lambda t: ~t.x, TypeError, r"bitwise_not.*expected.*got float32"),
    "lshift-float": (lambda t: t.x << 1, TypeError, r"bitwise_left_shift.*got float32"),
    "floor-complex": (lambda t: md.floor(t.c), TypeError, r"floor.*got complex64"),
    "ceil-complex": (lambda t: md.ceil(t.c), TypeError, r"ceil.*got complex64"),
    "asarray-ragged": (lambda t: md.asarray([[1, 2], [3]], device=t.d), ValueError,
                       r"asarray: the nested sequence is ragged"),
    "asarray-object": (lambda t: md.asarray(object(), device=t.d), TypeError,
                       r"asarray: can't convert"),
    "asarray-str": (lambda t: md.asarray("abc", device=t.d), TypeError,
                    r"asarray: can't convert a str"),
    "asarray-mixed": (lambda t: md.asarray([1, None], device=t.d), TypeError, r"asarray"),
    "asarray-bad-dtype": (lambda t: md.asarray([1.0], dtype="float128x", device=t.d),
                          TypeError, r"unknown dtype name 'float128x'"),
    "cat-empty": (lambda t: md.cat([]), ValueError, r"cat: expected a non-empty list"),
    "stack-empty": (lambda t: md.stack([]), ValueError, r"stack: expected a non-empty list"),
    "cat-shapes": (lambda t: md.cat([t.x, t.y]), ValueError, r"cat.*same shape"),
    "stack-shapes": (lambda t: md.stack([t.x, t.y]), ValueError, r"stack.*same shape"),
    "cat-devices": (lambda t: md.cat([t.x, md.ones((2, 3), device="meta")]), ValueError,
                    r"cat: expected all tensors to be on the same device"),
    "reshape-huge": (lambda t: md.ones(0, device=t.d).reshape(2**62, 0), ValueError,
                     r"reshape: a tensor of shape .* is larger than the largest possible size"),
    "reshape-bad": (lambda t: t.x.reshape(4, 2), ValueError, r"shape \(4, 2\) is invalid"),
    "view-bad": (lambda t: t.x.view(5), ValueError, r"view: shape \(5,\) is invalid"),
    "view-two-minus-one": (lambda t: t.x.view(-1, -1), ValueError,
                           r"view: only one dimension can be inferred"),
    "view-needs-copy": (lambda t: t.x.mT.view(6), ValueError, r"view: .*without a copy"),
    "expand-bad": (lambda t: t.x.expand(3, 3), ValueError, r"expand: the expanded size"),
    "expand-huge": (lambda t: t.v[:1].expand(2**62, 4), ValueError,
                    r"expand: .*larger than the largest possible size"),
    "permute-bad": (lambda t: t.x.permute(0, 0), ValueError, r"permute: duplicate axes"),
    "permute-short": (lambda t: t.x.permute(0), ValueError, r"permute: the number of dims"),
    "transpose-axis": (lambda t: t.x.transpose(0, 5), IndexError,
                       r"transpose: axis 5 is out of range"),
    "squeeze-axis": (lambda t: md.squeeze(t.x, axis=0), ValueError, r"squeeze: .*size"),
    "sum-axis": (lambda t: md.sum(t.x, axis=5), IndexError, r"sum: axis 5 is out of range"),
    "sum-axis-repeat": (lambda t: md.sum(t.x, axis=(0, 0)), ValueError,
                        r"sum: duplicate axes"),
    "mean-axis-str": (lambda t: md.mean(t.x, axis="a"), TypeError, r"mean\(\): no overload"),
    "softmax-dim": (lambda t: md.softmax(t.x, 3), IndexError, r"softmax: axis 3"),
    "argmax-axis": (lambda t: md.argmax(t.x, axis=2), IndexError, r"argmax: axis 2"),
    "sort-axis": (lambda t: md.sort(t.x, axis=4), IndexError, r"sort: axis 4"),
    "where-float-cond": (lambda t: md.where(t.x, t.x, t.x), TypeError,
                         r"where: expected a bool condition, got float32"),
    "where-shapes": (lambda t: md.where(t.x > 0, t.x, t.y), ValueError,
                     r"where.*must match the size"),
    "masked-fill-float-mask": (lambda t: md.masked_fill(t.x, t.x, 0.0), TypeError,
                               r"masked_fill: expected a bool mask, got float32"),
    "masked-fill-complex": (lambda t: t.v.masked_fill_(t.v == 0, 1j), TypeError,
                            r"masked_fill: can't assign the complex value 1j"),
    "setitem-complex": (lambda t: t.v.__setitem__(0, 1j), TypeError,
                        r"__setitem__: can't assign the complex value 1j to a float32"),
    "setitem-none": (lambda t: t.v.__setitem__(0, None), TypeError,
                     r"__setitem__: can't assign a NoneType"),
    "setitem-str": (lambda t: t.v.__setitem__(0, "a"), TypeError,
                    r"__setitem__: can't assign a str"),
    "setitem-shape": (lambda t: t.v.__setitem__(slice(None), md.ones(2, device=t.d)),
                      ValueError, r"shape mismatch: value tensor of shape \[2\] cannot be "
                                  r"broadcast to indexing result of shape \[3\]"),
    "setitem-int8-overflow": (lambda t: t.i8.__setitem__(0, 300), OverflowError,
                              r"__setitem__: value 300 cannot be converted to int8"),
    "getitem-oob": (lambda t: t.x[5], IndexError, r"index 5 is out of bounds for dimension 0"),
    "getitem-too-many": (lambda t: t.x[0, 0, 0], IndexError, r"too many indices"),
    "getitem-float-key": (lambda t: t.x[1.5], IndexError, r"valid indices"),
    "getitem-str-key": (lambda t: t.x["a"], IndexError, r"valid indices"),
    "take-2d-no-axis": (lambda t: md.take(t.x, t.i), ValueError, r"take: axis is required"),
    "index-select-float-idx": (lambda t: md.index_select(t.x, 0, t.x[0, :1]), TypeError,
                               r"index_select: expected an integer index tensor"),
    "floordiv-zero": (lambda t: t.n // 0, ZeroDivisionError, r"floor_divide: integer "
                                                             r"division by zero"),
    "remainder-zero": (lambda t: t.n % 0, ZeroDivisionError, r"remainder: integer division"),
    "floordiv-zero-inplace": (lambda t: t.n.__ifloordiv__(md.asarray([1, 0], device=t.d)),
                              ZeroDivisionError, r"floor_divide: integer division by zero"),
    "zeros-negative": (lambda t: md.zeros((-1, 2), device=t.d), ValueError,
                       r"zeros: negative dimension -1"),
    "zeros-huge": (lambda t: md.zeros((10**10, 10**10), device=t.d), ValueError,
                   r"zeros: a tensor of shape .* larger than the largest possible size"),
    "zeros-float-shape": (lambda t: md.zeros((2.5,), device=t.d), TypeError,
                          r"zeros(\(\): no overload|: expected a shape of ints)"),
    "zeros-str-shape": (lambda t: md.zeros("a", device=t.d), TypeError, r"zeros"),
    "ones-bad-dtype": (lambda t: md.ones(2, dtype="notadtype", device=t.d), TypeError,
                       r"unknown dtype name 'notadtype'"),
    "arange-zero-step": (lambda t: md.arange(0, 5, 0, device=t.d), ValueError,
                         r"arange: step must be nonzero"),
    "arange-huge": (lambda t: md.arange(10**19, device=t.d), ValueError,
                    r"arange: .*larger than the largest possible size"),
    "eye-negative": (lambda t: md.eye(-2, device=t.d), ValueError,
                     r"eye: negative dimension -2"),
    "full-complex-into-int": (lambda t: md.full((2,), 1j, dtype=md.int64, device=t.d),
                              TypeError, r"full: can't assign the complex value 1j"),
    "linspace-negative-num": (lambda t: md.linspace(0, 1, -1, device=t.d), ValueError,
                              r"linspace: num must be non-negative"),
    "randn-negative": (lambda t: md.randn(2, -1, device=t.d), ValueError,
                       r"randn: negative dimension -1"),
    "randn-huge": (lambda t: md.randn(10**10, 10**10, device=t.d), ValueError,
                   r"randn: .*larger than the largest possible size"),
    "randint-low-high": (lambda t: md.randint(5, 2, (3,), device=t.d), ValueError,
                         r"randint: expected low < high"),
    "randint-float": (lambda t: md.randint(10.5, (2,), device=t.d), TypeError,
                      r"randint: high must be an int"),
    "device-unknown": (lambda t: md.ones(2, device="nosuchdevice"), ValueError,
                       r"unknown device type 'nosuchdevice'"),
    "device-bad-index": (lambda t: md.ones(2, device=f"{t.d}:99"), ValueError,
                         r"Device: \w+:99 does not exist"),
    "device-bad-string": (lambda t: md.ones(2, device="cpu:x"), ValueError,
                          r"Device: invalid device string 'cpu:x'"),
    "to-bad-arg": (lambda t: t.x.to(5), TypeError, r"to\(\): expected a device, a dtype"),
    "astype-bad": (lambda t: md.astype(t.x, "nope"), TypeError, r"unknown dtype name 'nope'"),
    "requires-grad-int": (lambda t: t.n.requires_grad_(), RuntimeError,
                          r"requires_grad_\(\): only Tensors of floating point"),
    "backward-nonscalar": (lambda t: (t.w * 2).backward(), RuntimeError,
                           r"backward: grad can be implicitly created only for scalar"),
    "backward-no-grad": (lambda t: t.x.sum().backward(), RuntimeError,
                         r"backward: element 0 of tensors does not require grad"),
    "grad-unused": (lambda t: md.autograd.grad((t.w * 2).sum(), [md.ones(
        2, device=t.d, requires_grad=True)]), RuntimeError, r"grad: One of the differentiated"),
    "inplace-leaf": (lambda t: t.w.add_(1), RuntimeError, r"add_.*a leaf Variable that "
                                                         r"requires grad"),
    "out-with-grad": (lambda t: md.add(t.w, 1, out=md.empty(3, device=t.d)), RuntimeError,
                      r"add.*out=.* don't support automatic differentiation"),
    "numpy-requires-grad": (lambda t: t.w.numpy(), RuntimeError, r"numpy\(\): can't call"),
    "item-many": (lambda t: t.x.item(), ValueError, r"item\(\): a tensor with 6 elements"),
    "bool-many": (lambda t: bool(t.x), ValueError, r"__bool__: the truth value"),
    "len-0d": (lambda t: len(md.asarray(1.0, device=t.d)), TypeError, r"len\(\) of a 0-d"),
    "iter-0d": (lambda t: iter(md.asarray(1.0, device=t.d)), TypeError, r"iteration over a "
                                                                       r"0-d tensor"),
    "index-float-tensor": (lambda t: [1, 2, 3][md.asarray(1.5, device=t.d)], TypeError,
                           r"__index__: only integer tensors"),
    "format-vector": (lambda t: format(t.x, ".2f"), TypeError,
                      r"unsupported format string '.2f' passed to Tensor.__format__"),
    "einsum-bad": (lambda t: md.einsum("ij,jk->ik", md.ones((2, 3), device="cpu"),
                                       md.ones((4, 2), device="cpu")), ValueError,
                   r"einsum.*size of tensor"),
    "tensordot-bad": (lambda t: md.tensordot(t.x, t.y, axes=1), ValueError,
                      r"tensordot: contracted dimension 1 of the first tensor \(size 3\)"),
    "tensordot-axes": (lambda t: md.tensordot(t.x, t.x, axes=3), ValueError,
                       r"tensordot: axes=3 is out of range"),
    "clamp-shapes": (lambda t: md.clamp(t.x, md.ones(5, device=t.d)), ValueError,
                     r"clamp.*must match the size"),
    "sort-method-axis": (lambda t: t.x.sort(axis=1), TypeError, r"sort\(\): no overload"),
    "std-mixed-spellings": (lambda t: md.std(t.x, axis=1, keepdim=True), TypeError,
                            r"std\(\): no overload"),
    "no-overload": (lambda t: md.exp("a"), TypeError, r"exp\(\): no overload"),
    "no-overload-kw": (lambda t: md.sum(t.x, nonsense=1), TypeError, r"sum\(\): no overload"),
    "deepcopy-nonleaf": (lambda t: copy.deepcopy(t.w * 2), RuntimeError,
                         r"Only Tensors created explicitly by the user \(graph leaves\)"),
    "meta-to-device": (lambda t: md.empty((2, 2), device="meta").to(t.d), NotImplementedError,
                       r"Cannot copy out of meta tensor"),
    "meta-numpy": (lambda t: md.empty(2, device="meta").numpy(), TypeError,
                   r"numpy\(\): meta tensors have no data"),
    "inference-save": (_inference_save, RuntimeError, r"Inference tensors cannot be saved"),
    "inference-inplace": (lambda t: _inference_inplace(t), RuntimeError,
                          r"Inplace update to inference tensor outside InferenceMode"),
    "library-bad-ns": (lambda t: md.library.Library(5, "DEF"), TypeError,
                       r"Library: the namespace must be a str"),
    "library-bad-kind": (lambda t: md.library.Library("sweepns", "NOPE"), ValueError,
                         r"Library: kind must be"),
    "library-bad-schema": (lambda t: _define("sweepbad(Tensor x -> Tensor"),
                           md.library.SchemaParseError, r"expected end of the argument list"),
    "library-bad-tags": (lambda t: _define("sweeptags(Tensor x) -> Tensor", tags=5),
                         TypeError, r"define sweepdef::sweeptags: tags must be"),
    "library-impl-foreign": (lambda t: _impl_foreign(), ValueError,
                             r"aten::exp is in namespace 'aten', not 'sweepforeign'"),
    "library-impl-unknown-op": (lambda t: md.library.Library("aten", "IMPL").impl(
        "nosuchop", lambda x: x, "CPU"), ValueError, r"no operator named 'aten::nosuchop'"),
    "library-impl-bad-key": (lambda t: md.library.Library("aten", "IMPL").impl(
        "exp", lambda x: x, "NoSuchKey"), ValueError, r"unknown dispatch key 'NoSuchKey'"),
    "schema-not-str": (lambda t: md.library.define("sweep::f", ["(Tensor x) -> Tensor"]),
                       TypeError, r"define: expected .* a schema str"),
    "set-grad-enabled-str": (lambda t: md.set_grad_enabled("yes"), TypeError,
                             r"set_grad_enabled: mode must be a bool"),
    "no-grad-decorate-int": (lambda t: md.no_grad()(5), TypeError,
                             r"no_grad: a decorator takes a function"),
    "functionalize-bad-remove": (lambda t: md.func.functionalize(lambda v: v, remove="all"),
                                 ValueError, r"functionalize: remove must be"),
    "gradcheck-float32": (lambda t: md.testing.gradcheck(lambda v: v * 2, (md.ones(
        2, device=t.d, requires_grad=True),)), TypeError, r"gradcheck: input 0 is float32"),
    "manual-seed-str": (lambda t: md.manual_seed("a"), TypeError,
                        r"manual_seed: expected an int seed"),
    "custom-op-bad-mutates": (lambda t: md.library.custom_op(
        "sweep::g", lambda v: v, mutates_args="unknown"), TypeError,
        r"custom_op sweep::g: mutates_args must be"),
    "mode-returns-none": (_mode_returns_none, TypeError,
                          r"exp: the dispatch mode Bad returned NoneType; expected a Tensor"),
}


def _inference_inplace(t):
    with md.inference_mode():
        a = md.ones(2, device=t.d)
    a.mul_(2)


def test_the_sweep_has_at_least_80_calls():
    assert len(CASES) >= 80


def _state(t):
    from mdtensor.dispatch import tls as _tls

    return {
        "values": [to_numpy(a.detach()).tolist() for a in t.all()],
        "versions": [a._version for a in t.all()],
        "grad": to_numpy(t.w.grad).tolist(),
        "requires_grad": [a.requires_grad for a in t.all()],
        "registry": sorted(dispatcher.overloads),
        "exp": md.library.dump_text("aten::exp"),
        "tls": _tls.local_state(),
        "modes": md.modes.active_modes(),
        "grad_mode": (md.is_grad_enabled(), md.is_inference_mode_enabled()),
        "backends": sorted(r["name"] for r in md.backends.available()),
    }


_TENSORS: dict = {}


@pytest.mark.parametrize("device", _DEVICES)
@pytest.mark.parametrize("case", list(CASES))
def test_wrong_call_raises_a_clear_error_and_changes_nothing(case, device):
    if TEST_DEVICE != "cpu" and device not in ("cpu", TEST_DEVICE):
        pytest.skip("the sweep of another device runs in its own suite run")
    t = _TENSORS.get(device)
    if t is None:
        t = _TENSORS[device] = Tensors(device)
    call, error, what = CASES[case]
    before = _state(t)
    with _no_raw_warnings():
        with pytest.raises(error) as info:
            call(t)
    message = str(info.value)
    assert type(info.value) is error or isinstance(info.value, error), info.value
    assert re.search(what, message), f"{case} on {device}: {message!r}"
    assert not _RAW.search(message), f"{case} on {device} leaks: {message!r}"
    assert _state(t) == before, f"{case} on {device} changed the state"


class _no_raw_warnings:
    """No NumPy or backend warning escapes a failed call either."""

    def __enter__(self):
        import warnings

        self._catch = warnings.catch_warnings(record=True)
        self._seen = self._catch.__enter__()
        warnings.simplefilter("always")
        return self

    def __exit__(self, *exc):
        self._catch.__exit__(*exc)
        leaked = [w for w in self._seen if issubclass(w.category, RuntimeWarning)
                  or "numpy" in (w.filename or "") or "jax" in (w.filename or "")]
        assert not leaked, [str(w.message) for w in leaked]
        return False


# -- the error-leak list of issue 25, beyond the sweep -----------------------------------


@pytest.mark.parametrize("device", _DEVICES)
def test_mean_and_std_of_too_few_elements_warn_no_numpy_warning(device):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(md.mean(md.ones(0, device=device)).item())
        assert np.isnan(to_numpy(md.mean(md.ones((2, 0), device=device), axis=1))).all()
    with pytest.warns(UserWarning, match=r"std\(\): degrees of freedom is <= 0"):
        assert np.isnan(md.ones(1, device=device).std().item())


@pytest.mark.parametrize("device", _DEVICES)
def test_deepcopy_keeps_leaves_grads_and_sharing(device):
    w = md.ones(2, device=device, requires_grad=True)
    w.grad = md.full((2,), 3.0, device=device)
    c = copy.deepcopy(w)
    assert c.requires_grad and c.is_leaf and c.grad.tolist() == [3.0, 3.0]
    assert c.grad is not w.grad
    base = md.zeros(3, device=device)
    view = base[1:]
    b2, v2 = copy.deepcopy((base, view))
    v2.add_(1)
    assert b2.tolist() == [0.0, 1.0, 1.0] and base.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("device", _DEVICES)
def test_format_and_device_index(device):
    assert f"{md.asarray(1.23456, device=device):.2f}" == "1.23"
    if device != "cpu":
        t = md.ones(2, device=f"{device}:0")
        assert str(t.device) == f"{device}:0" and f"device='{device}:0'" in repr(t)


def test_no_grad_without_parentheses_decorates():
    x = md.ones(2, requires_grad=True)

    @md.no_grad
    def f(v):
        return v * 2

    @md.inference_mode
    def g(v):
        return v * 2

    assert not f(x).requires_grad and g(x).is_inference() and f.__name__ == "f"


def test_public_namespaces_have_explicit_all_and_no_clutter():
    import importlib

    for name in ("mdtensor", "mdtensor.random", "mdtensor.autograd", "mdtensor.library",
                 "mdtensor.linalg", "mdtensor.fft", "mdtensor.func", "mdtensor.modes",
                 "mdtensor.testing", "mdtensor.backends", "mdtensor.ops"):
        module = importlib.import_module(name)
        assert isinstance(module.__all__, list) and module.__all__, name
        for public in module.__all__:
            assert hasattr(module, public), (name, public)
    assert "annotations" not in dir(md)
    for module, clutter in ((md.random, "np"), (md.random, "threading"),
                            (md.autograd, "re"), (md.library, "sys"), (md.testing, "np")):
        assert not hasattr(module, clutter), (module.__name__, clutter)
