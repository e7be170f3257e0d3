"""``md.nn``: the Module API, layers, functional ops and init, against PyTorch where it is
installed (values and gradients), on the device under test."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest
from _helpers import TEST_DEVICE, to_numpy

import mdtensor as md
from mdtensor import nn
from mdtensor.nn import functional as F


def _np(t):
    return to_numpy(t.detach())


def test_import_mdtensor_does_not_import_nn_optim_or_serialization():
    code = """
        import sys, mdtensor as md
        lazy = ("mdtensor.nn", "mdtensor.optim", "mdtensor._serialization")
        print([m for m in lazy if m in sys.modules])
        md.nn.Linear(2, 2), md.optim.SGD, md.save
        print("mdtensor.nn" in sys.modules, "mdtensor.optim" in sys.modules,
              any(m in sys.modules for m in ("jax", "torch", "cupy")))
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split("\n")[:2] == ["[]", "True True False"], r.stderr


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 4)
        self.scale = nn.Parameter(md.ones(4))
        self.register_buffer("running", md.zeros(4))
        self.register_buffer("scratch", md.zeros(2), persistent=False)
        self.blocks = nn.ModuleList([nn.Linear(4, 4), nn.Tanh()])

    def forward(self, x):
        x = self.fc(x) * self.scale
        for block in self.blocks:
            x = block(x)
        return x


def test_registration_and_traversal():
    net = Net()
    assert [n for n, _ in net.named_parameters()] == [
        "scale", "fc.weight", "fc.bias", "blocks.0.weight", "blocks.0.bias"]
    assert [n for n, _ in net.named_buffers()] == ["running", "scratch"]
    assert [n for n, _ in net.named_children()] == ["fc", "blocks"]
    assert [n for n, _ in net.named_modules()] == ["", "fc", "blocks", "blocks.0", "blocks.1"]
    assert list(net.state_dict()) == ["scale", "running", "fc.weight", "fc.bias",
                                      "blocks.0.weight", "blocks.0.bias"]
    assert net.get_submodule("blocks.0") is net.blocks[0]
    assert net.get_parameter("fc.bias") is net.fc.bias
    assert net.get_buffer("running") is net.running
    assert "fc" in dir(net) and "running" in dir(net)
    assert net(md.ones((2, 3))).shape == (2, 4)
    assert all(type(p) is nn.Parameter and p.requires_grad for p in net.parameters())
    assert not net.running.requires_grad


def test_same_key_order_as_torch(torch):

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(3, 4)
            self.scale = torch.nn.Parameter(torch.ones(4))
            self.register_buffer("running", torch.zeros(4))
            self.register_buffer("scratch", torch.zeros(2), persistent=False)
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Tanh()])

    t, m = TNet(), Net()
    for method in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        assert [n for n, _ in getattr(m, method)()] == [n for n, _ in getattr(t, method)()]
    assert list(m.state_dict()) == list(t.state_dict())
    assert [tuple(v.shape) for v in m.state_dict().values()] == [
        tuple(v.shape) for v in t.state_dict().values()]


def test_shared_modules_and_parameters_are_listed_once():
    lin = nn.Linear(2, 2)
    seq = nn.Sequential(lin, nn.ReLU(), lin)
    assert len(list(seq.parameters())) == 2
    assert len(list(seq.named_parameters(remove_duplicate=False))) == 4
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert len(list(seq.modules())) == 3


def test_attribute_rules_and_errors():
    net = Net()
    with pytest.raises(TypeError, match=r"cannot assign 'Tensor' as parameter 'scale' "
                                        r"\(md.nn.Parameter or None expected\)"):
        net.scale = md.ones(4)
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'fc'"):
        net.fc = 3
    with pytest.raises(TypeError, match="cannot assign 'list' as buffer 'running'"):
        net.running = [1]
    net.running = md.ones(4)  # a tensor replaces a buffer
    assert "running" in dict(net.named_buffers()) and float(net.running[0]) == 1.0
    net.scale = None
    assert net.scale is None and "scale" not in net.state_dict()
    with pytest.raises(KeyError, match="attribute 'forward' already exists"):
        net.register_buffer("forward", md.ones(1))
    with pytest.raises(KeyError, match='contain "\\."'):
        net.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="cannot assign 'Tensor' object to parameter 'w'"):
        net.register_parameter("w", nn.Parameter(md.ones(2)) * 2)
    with pytest.raises(AttributeError, match="'Net' object has no attribute 'nope'"):
        net.nope  # noqa: B018
    del net.fc
    assert "fc" not in dict(net.named_children())

    class Forgot(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(md.ones(1))

    with pytest.raises(AttributeError, match=r"before Module.__init__\(\) call"):
        Forgot()
    with pytest.raises(NotImplementedError, match='Module \\[Module\\] is missing the required '
                                                  '"forward" function'):
        nn.Module()(1)
    b = nn.Module()
    b.stats = nn.Buffer(md.zeros(2), persistent=False)
    assert "stats" in dict(b.named_buffers()) and "stats" not in b.state_dict()


def test_load_state_dict_checks_everything_before_copying():
    net = Net()
    before = {k: _np(v).copy() for k, v in net.state_dict().items()}
    bad = dict(net.state_dict())
    bad["fc.weight"] = md.ones((5, 5))
    bad["extra"] = md.ones(1)
    del bad["running"]
    bad["scale"] = md.zeros(4)  # would change, but the call fails first
    with pytest.raises(ValueError) as e:
        net.load_state_dict(bad)
    assert str(e.value) == (
        'Error(s) in loading state_dict for Net:\n\tUnexpected key(s) in state_dict: "extra". '
        '\n\tMissing key(s) in state_dict: "running". \n\tsize mismatch for fc.weight: copying '
        'a param with shape [5, 5] from checkpoint, the shape in current model is [4, 3].')
    assert all(np.array_equal(_np(v), before[k]) for k, v in net.state_dict().items())
    del bad["fc.weight"]
    result = net.load_state_dict(bad, strict=False)
    assert result.missing_keys == ["running", "fc.weight"] and result.unexpected_keys == ["extra"]
    assert float(net.scale[0]) == 0.0
    assert repr(net.load_state_dict(net.state_dict())) == "<All keys matched successfully>"
    with pytest.raises(ValueError, match='expected Tensor from checkpoint but received int'):
        net.load_state_dict({**net.state_dict(), "scale": 1})
    with pytest.raises(TypeError, match="load_state_dict: expected state_dict to be dict-like"):
        net.load_state_dict([1])


def test_load_state_dict_casts_copies_in_place_or_assigns():
    net = Net()
    scale = net.scale
    sd = {k: v.astype(md.float64) * 0 + 2 for k, v in net.state_dict().items()}
    net.load_state_dict(sd)
    assert net.scale is scale and net.scale.dtype == md.float32 and float(net.scale[0]) == 2
    assert net.scale.requires_grad and net.scale.is_leaf
    new = md.full((4,), 3.0)
    net.load_state_dict({**net.state_dict(), "scale": new}, assign=True)
    assert type(net.scale) is nn.Parameter and float(net.scale[0]) == 3.0


def test_modes_hooks_and_zero_grad():
    net = Net()
    assert net.training and all(m.training for m in net.modules())
    net.eval()
    assert not any(m.training for m in net.modules())
    net.train()
    assert all(m.training for m in net.modules())
    with pytest.raises(ValueError, match="train: training mode is expected to be a bool"):
        net.train("no")
    net(md.ones((1, 3))).sum().backward()
    assert all(p.grad is not None for p in net.parameters())
    net.zero_grad(set_to_none=False)
    assert all(float(md.sum(md.abs(p.grad))) == 0 for p in net.parameters())
    net.zero_grad()
    assert all(p.grad is None for p in net.parameters())
    net.requires_grad_(False)
    assert not any(p.requires_grad for p in net.parameters())


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    h1 = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    h2 = lin.register_forward_hook(lambda m, args, out: calls.append("post") or out + 1)
    h3 = lin.register_forward_hook(lambda m, args, out: calls.append("first"), prepend=True)
    out = lin(md.ones((1, 2)))
    np.testing.assert_allclose(_np(out), _np(lin.bias)[None] + 1, rtol=1e-6)
    assert calls == ["first", "post"]
    for h in (h1, h2, h3):
        h.remove()
    np.testing.assert_allclose(_np(lin(md.zeros((1, 2)))), _np(lin.bias)[None], rtol=1e-6)

    def pre(m, args, kwargs):
        return (args[0] + 1,), kwargs

    with lin.register_forward_pre_hook(pre, with_kwargs=True):
        np.testing.assert_allclose(_np(lin(md.full((1, 2), -1.0))), _np(lin.bias)[None],
                                   rtol=1e-6)
    assert not lin._forward_pre_hooks

    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom")

    seen = []
    boom = Boom()
    boom.register_forward_hook(lambda m, a, out: seen.append(out), always_call=True)
    with pytest.raises(RuntimeError, match="boom"):
        boom(1)
    assert seen == [None]
    bad = nn.Linear(2, 2)
    bad.register_forward_pre_hook(lambda m, a, k: 1, with_kwargs=True)
    with pytest.raises(TypeError, match=r"forward pre-hook must return None or a tuple of "
                                        r"\(new_args, new_kwargs\)"):
        bad(md.ones(2))


def test_to_moves_and_casts_parameters_buffers_and_grads():
    net = Net()
    net(md.ones((1, 3))).sum().backward()
    net.double()
    assert all(p.dtype == md.float64 for p in net.parameters())
    assert all(p.grad.dtype == md.float64 for p in net.parameters())
    assert net.running.dtype == md.float64 and type(net.fc.weight) is nn.Parameter
    ints = nn.Module()
    ints.register_buffer("counts", md.zeros(2, dtype=md.int64))
    assert ints.to(md.float32).counts.dtype == md.int64
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        net.to(md.int32)
    same = net.fc.weight
    net.to(net.fc.weight.device)
    assert net.fc.weight is same  # nothing changed: the same Parameter objects
    cpu = Net().to("cpu")
    assert all(p.device == md.Device("cpu") for p in cpu.parameters())


def test_parameter_basics():
    p = nn.Parameter(md.asarray([1.0, 2.0]))
    assert repr(p).startswith("Parameter containing:\ntensor([1., 2.]") and str(p) == repr(p)
    assert isinstance(p, md.Tensor) and p.requires_grad and p.is_leaf
    assert type(p * 2) is md.Tensor
    q = copy.deepcopy(p)
    assert type(q) is nn.Parameter and q.requires_grad and q is not p
    assert nn.Parameter().shape == (0,)
    with pytest.raises(TypeError, match="Parameter: expected a Tensor as data, got list"):
        nn.Parameter([1.0])
    m = nn.Linear(2, 2)
    copied = copy.deepcopy(m)
    assert copied.weight is not m.weight and np.array_equal(_np(copied.weight), _np(m.weight))


def test_containers():
    a, b, c = nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)
    seq = nn.Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    assert isinstance(seq[1:], nn.Sequential) and list(seq[1:]) == [b, c]
    named = nn.Sequential(OrderedDict(first=a, act=b))
    assert list(named.state_dict()) == ["first.weight", "first.bias"]
    seq.append(nn.Tanh())
    del seq[1]
    assert [n for n, _ in seq.named_children()] == ["0", "1", "2"] and seq[1] is c
    with pytest.raises(IndexError, match="Sequential: index 5 is out of range for 3 modules"):
        seq[5]  # noqa: B018
    ml = nn.ModuleList([a])
    ml += [c]
    ml.insert(1, b)
    assert list(ml) == [a, b, c] and ml[-1] is c and len(ml[:2]) == 2
    with pytest.raises(TypeError, match="ModuleList indices must be integers or slices"):
        ml["x"]  # noqa: B018
    md_ = nn.ModuleDict({"lin": a, "act": b})
    md_["out"] = c
    assert list(md_) == ["lin", "act", "out"] and "act" in md_ and md_.pop("act") is b
    assert [k for k, _ in md_.items()] == ["lin", "out"]
    assert [n for n, _ in md_.named_parameters()] == ["lin.weight", "lin.bias", "out.weight",
                                                      "out.bias"]


def test_repr_matches_torch(torch):
    def build(lib):
        return lib.Sequential(
            lib.Linear(3, 4), lib.ReLU(), lib.Dropout(0.1), lib.LayerNorm(4),
            lib.LayerNorm((2, 4), elementwise_affine=False), lib.Embedding(5, 2, padding_idx=0),
            lib.Embedding(5, 2, max_norm=1.0, norm_type=1.0), lib.GELU(), lib.Softmax(dim=1),
            lib.Sequential(lib.Linear(4, 2, bias=False), lib.Tanh()), lib.Flatten(),
            lib.Softplus(), lib.ELU(), lib.LeakyReLU(), lib.SiLU(), lib.ReLU(inplace=True),
            lib.Identity(), lib.CrossEntropyLoss(), lib.LogSoftmax(1), lib.Sigmoid(),
            lib.ModuleList([lib.Tanh()]), lib.ModuleDict({"a": lib.ReLU()}))

    assert repr(build(nn)) == repr(build(torch.nn))


# -- layers and functional against PyTorch -------------------------------------------------


def _pair(torch, array, requires_grad=True):
    ours = md.asarray(array, requires_grad=requires_grad)
    theirs = torch.tensor(array, requires_grad=requires_grad)
    return ours, theirs


def _check(ours, theirs, inputs, rtol=1e-5, atol=1e-6):
    """Same values, and the same gradients of ``sum(out * probe)`` for each input pair."""
    np.testing.assert_allclose(_np(ours), theirs.detach().numpy(), rtol=rtol, atol=atol)
    probe = np.random.default_rng(1).standard_normal(theirs.shape).astype(np.float32)
    import torch as th

    (ours * md.asarray(probe)).sum().backward()
    (theirs * th.tensor(probe)).sum().backward()
    for a, b in inputs:
        np.testing.assert_allclose(_np(a.grad), b.grad.numpy(), rtol=rtol, atol=atol)


ACTIVATIONS = [
    ("relu", {}), ("leaky_relu", {"negative_slope": 0.2}), ("elu", {"alpha": 0.7}),
    ("gelu", {}), ("gelu", {"approximate": "tanh"}), ("silu", {}), ("sigmoid", {}),
    ("tanh", {}), ("softplus", {"beta": 2.0, "threshold": 3.0}), ("softmax", {"dim": 1}),
    ("log_softmax", {"dim": 0}),
]


@pytest.mark.parametrize("name,kwargs", ACTIVATIONS, ids=[f"{n}{k}" for n, k in ACTIVATIONS])
def test_activations_match_torch(name, kwargs, torch):
    x = np.array([[-3.0, -0.5, 0.0, 0.5, 2.0], [40.0, -40.0, 1.5, 0.0, -1.0]], np.float32)
    a, b = _pair(torch, x)
    _check(getattr(F, name)(a, **kwargs), getattr(torch.nn.functional, name)(b, **kwargs),
           [(a, b)])


def test_activation_modules_match_functional(torch):
    x = md.asarray([[-1.0, 0.0, 2.0]])
    pairs = [(nn.ReLU(), F.relu), (nn.Tanh(), F.tanh), (nn.Sigmoid(), F.sigmoid),
             (nn.GELU(), F.gelu), (nn.SiLU(), F.silu), (nn.Softplus(), F.softplus),
             (nn.LeakyReLU(0.1), lambda t: F.leaky_relu(t, 0.1)), (nn.ELU(), F.elu),
             (nn.Softmax(1), lambda t: F.softmax(t, 1)),
             (nn.LogSoftmax(1), lambda t: F.log_softmax(t, 1)), (nn.Identity(3), lambda t: t)]
    for module, fn in pairs:
        np.testing.assert_array_equal(_np(module(x)), _np(fn(x)))
    with pytest.warns(UserWarning, match="Implicit dimension choice for softmax"):
        F.softmax(x)


def test_linear_matches_torch(torch):
    rng = np.random.default_rng(0)
    x, w, bias = (rng.standard_normal(s).astype(np.float32) for s in ((5, 2, 3), (4, 3), (4,)))
    (xa, xb), (wa, wb), (ba, bb) = (_pair(torch, v) for v in (x, w, bias))
    _check(F.linear(xa, wa, ba), torch.nn.functional.linear(xb, wb, bb),
           [(xa, xb), (wa, wb), (ba, bb)])
    lin = nn.Linear(3, 4)
    lin.load_state_dict({"weight": md.asarray(w), "bias": md.asarray(bias)})
    np.testing.assert_allclose(_np(lin(md.asarray(x))), _np(F.linear(md.asarray(x),
                               md.asarray(w), md.asarray(bias))))


def test_layer_norm_matches_torch(torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4, 5)).astype(np.float32) * 3 + 1
    w, bias = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal((4, 5))
    (xa, xb), (wa, wb), (ba, bb) = _pair(torch, x), _pair(torch, w), _pair(
        torch, bias.astype(np.float32))
    _check(F.layer_norm(xa, (4, 5), wa, ba, eps=1e-3),
           torch.nn.functional.layer_norm(xb, (4, 5), wb, bb, eps=1e-3),
           [(xa, xb), (wa, wb), (ba, bb)], rtol=1e-4, atol=1e-5)
    ln = nn.LayerNorm(5, elementwise_affine=False)
    assert ln.weight is None and list(ln.parameters()) == []
    np.testing.assert_allclose(_np(ln(md.asarray(x))), torch.nn.functional.layer_norm(
        torch.tensor(x), (5,)).numpy(), rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"layer_norm: given normalized_shape=\[4\], expected "
                                         r"input with shape \[\*, 4\], but got input of size"):
        F.layer_norm(md.ones((2, 5)), 4)


def test_embedding_matches_torch(torch):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3)).astype(np.float32) * 3
    idx = np.array([[0, 2, 2], [5, 1, 0]])
    for kwargs in ({}, {"padding_idx": 2}, {"padding_idx": -1}, {"max_norm": 1.5},
                   {"max_norm": 1.0, "norm_type": 1.0}):
        wa, wb = _pair(torch, w.copy())
        out_a = F.embedding(md.asarray(idx), wa, **kwargs)
        out_b = torch.nn.functional.embedding(torch.tensor(idx), wb, **kwargs)
        _check(out_a, out_b, [(wa, wb)])
        np.testing.assert_allclose(_np(wa), wb.detach().numpy(), rtol=1e-6)  # max_norm
    emb = nn.Embedding(10, 4, padding_idx=3)
    assert float(md.sum(md.abs(emb.weight[3]))) == 0.0
    frozen = nn.Embedding.from_pretrained(md.ones((2, 2)))
    assert not frozen.weight.requires_grad
    with pytest.raises(TypeError, match="embedding: expected an integer index tensor"):
        emb(md.ones(2))
    with pytest.raises(IndexError, match="embedding: index 10 is out of range for 10"):
        emb(md.asarray([1, 10]))
    with pytest.raises(ValueError, match="embedding: padding_idx must be within"):
        nn.Embedding(3, 2, padding_idx=3)


LOSSES = [
    ("cross_entropy", "int", {}),
    ("cross_entropy", "int", {"reduction": "sum", "label_smoothing": 0.2}),
    ("cross_entropy", "int", {"weight": True, "ignore_index": 1}),
    ("cross_entropy", "int", {"weight": True, "ignore_index": 1, "label_smoothing": 0.1}),
    ("cross_entropy", "int", {"reduction": "none", "label_smoothing": 0.3, "weight": True}),
    ("cross_entropy", "prob", {}),
    ("cross_entropy", "prob", {"weight": True, "label_smoothing": 0.2}),
    ("cross_entropy", "prob", {"reduction": "none"}),
    ("nll_loss", "int", {}),
    ("nll_loss", "int", {"weight": True, "reduction": "sum", "ignore_index": 0}),
    ("mse_loss", "float", {}), ("mse_loss", "float", {"reduction": "none"}),
    ("l1_loss", "float", {"reduction": "sum"}),
]


@pytest.mark.parametrize("name,kind,kwargs", LOSSES, ids=[f"{n}-{k}-{sorted(a)}"
                                                          for n, k, a in LOSSES])
@pytest.mark.parametrize("shape", [(6, 4), (3, 4, 2), (4,)], ids=["NC", "NCd", "C"])
def test_losses_match_torch(name, kind, kwargs, shape, torch):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    classes = shape[0] if len(shape) == 1 else shape[1]
    target_shape = shape[:1] * (len(shape) > 1) + shape[2:]
    if kind == "int":
        target = rng.integers(0, classes, target_shape)
        ta, tb = md.asarray(target), torch.tensor(target)
    else:
        target = rng.random(shape).astype(np.float32)
        if kind == "prob":
            target = target / target.sum(axis=0 if len(shape) == 1 else 1, keepdims=True)
        ta, tb = md.asarray(target), torch.tensor(target)
    kw_a, kw_b = dict(kwargs), dict(kwargs)
    if kwargs.get("weight"):
        w = rng.random(classes).astype(np.float32) + 0.5
        kw_a["weight"], kw_b["weight"] = md.asarray(w), torch.tensor(w)
    if name == "nll_loss":
        x = np.log(np.exp(x) / np.exp(x).sum(axis=0 if len(shape) == 1 else 1, keepdims=True))
    xa, xb = _pair(torch, x)
    _check(getattr(F, name)(xa, ta, **kw_a), getattr(torch.nn.functional, name)(xb, tb, **kw_b),
           [(xa, xb)], rtol=1e-5, atol=1e-6)


def test_loss_modules_and_errors(torch):
    x, y = md.asarray([[1.0, 2.0, 0.5]]), md.asarray([1])
    assert float(nn.CrossEntropyLoss()(x, y)) == pytest.approx(float(F.cross_entropy(x, y)))
    assert float(nn.NLLLoss()(x, y)) == -2.0
    assert float(nn.MSELoss(reduction="sum")(x, x * 0)) == pytest.approx(5.25)
    assert float(nn.L1Loss()(x, x * 0)) == pytest.approx(3.5 / 3)
    with pytest.raises(ValueError, match="CrossEntropyLoss: 'avg' is not a valid value for "
                                         "reduction"):
        nn.CrossEntropyLoss(reduction="avg")
    with pytest.raises(IndexError, match="cross_entropy: target 3 is out of bounds for 3 "
                                         "classes|nll_loss: target 3 is out of bounds"):
        F.cross_entropy(x, md.asarray([3]))
    with pytest.raises(TypeError, match="nll_loss: expected an integer target"):
        F.nll_loss(x, md.asarray([1.0]))
    with pytest.raises(ValueError, match=r"nll_loss: expected target of shape \[1\] for input "
                                         r"of shape \[1, 3\], got \[2\]"):
        F.nll_loss(x, md.asarray([1, 2]))
    with pytest.raises(ValueError, match="cross_entropy: label_smoothing must be between"):
        F.cross_entropy(x, y, label_smoothing=1.5)
    with np.errstate(invalid="ignore"):
        ignored = F.cross_entropy(x, md.asarray([-100]))
    assert math.isnan(float(ignored))  # all targets ignored: 0 / 0, as PyTorch


def test_one_hot(torch):
    t = md.asarray([[0, 2], [1, 1]])
    np.testing.assert_array_equal(_np(F.one_hot(t)), torch.nn.functional.one_hot(
        torch.tensor([[0, 2], [1, 1]])).numpy())
    assert F.one_hot(t, 5).shape == (2, 2, 5) and F.one_hot(t).dtype == md.int64
    with pytest.raises(ValueError, match=r"one_hot: class values must be smaller than "
                                         r"num_classes \(2\), got 2"):
        F.one_hot(t, 2)


def test_dropout_train_and_eval():
    md.manual_seed(0)
    x = md.ones((200, 50))
    drop = nn.Dropout(0.25)
    y = _np(drop(x))
    kept = y != 0
    assert 0.7 < kept.mean() < 0.8 and np.allclose(y[kept], 1 / 0.75)
    drop.eval()
    assert drop(x) is x
    assert F.dropout(x, 0.0) is x and float(md.sum(F.dropout(x, 1.0))) == 0.0
    with pytest.raises(ValueError, match="Dropout: dropout probability has to be between"):
        nn.Dropout(1.5)
    w = md.ones(10, requires_grad=True)
    F.dropout(w * 1, 0.5).sum().backward()
    g = _np(w.grad)
    assert set(np.unique(g)) <= {0.0, 2.0}


# -- init -----------------------------------------------------------------------------------


@pytest.mark.parametrize("nonlinearity,param", [
    ("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
    ("leaky_relu", None), ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu", None)])
def test_calculate_gain_matches_torch(nonlinearity, param, torch):
    assert nn.init.calculate_gain(nonlinearity, param) == torch.nn.init.calculate_gain(
        nonlinearity, param)


@pytest.mark.parametrize("shape", [(4, 3), (8, 3, 5), (2, 6, 3, 3), (5, 1, 2, 2, 2)])
def test_fans_match_torch(shape, torch):
    assert nn.init.fan_in_and_fan_out(md.empty(shape)) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))


@pytest.mark.parametrize("fn,kwargs,bound", [
    ("uniform_", {"a": -2.0, "b": 3.0}, (-2.0, 3.0)),
    ("xavier_uniform_", {"gain": 2.0}, 2.0 * math.sqrt(6 / (300 + 200))),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, 1 / math.sqrt(300)),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"},
     math.sqrt(2) * math.sqrt(3 / 200)),
])
def test_uniform_inits_fill_their_bounds(fn, kwargs, bound):
    w = md.empty((200, 300))
    assert getattr(nn.init, fn)(w, **kwargs) is w
    lo, hi = bound if isinstance(bound, tuple) else (-bound, bound)
    v = _np(w)
    assert lo <= v.min() < lo + 0.01 * (hi - lo) and hi - 0.01 * (hi - lo) < v.max() <= hi


@pytest.mark.parametrize("fn,kwargs,std", [
    ("normal_", {"mean": 1.0, "std": 0.5}, 0.5),
    ("xavier_normal_", {}, math.sqrt(2 / 500)),
    ("kaiming_normal_", {"nonlinearity": "relu"}, math.sqrt(2) / math.sqrt(300)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "tanh"}, 5 / 3 / math.sqrt(200)),
])
def test_normal_inits_have_their_std(fn, kwargs, std):
    w = md.empty((200, 300))
    getattr(nn.init, fn)(w, **kwargs)
    v = _np(w)
    assert abs(v.std() - std) < 0.03 * std and abs(v.mean() - kwargs.get("mean", 0)) < 0.1 * std


def test_init_on_parameters_generators_and_errors():
    lin = nn.Linear(300, 10)
    bound = 1 / math.sqrt(300)  # PyTorch's default Linear init
    assert np.abs(_np(lin.weight)).max() <= bound and np.abs(_np(lin.bias)).max() <= bound
    assert _np(lin.weight).std() > bound / 2 and lin.weight.is_leaf and lin.weight.requires_grad
    g1, g2 = md.Generator().manual_seed(3), md.Generator().manual_seed(3)
    a, b = md.empty((3, 4)), md.empty((3, 4))
    nn.init.kaiming_uniform_(a, generator=g1)
    nn.init.kaiming_uniform_(b, generator=g2)
    np.testing.assert_array_equal(_np(a), _np(b))
    np.testing.assert_array_equal(_np(nn.init.eye_(md.empty((2, 3)))), np.eye(2, 3))
    np.testing.assert_array_equal(_np(nn.init.constant_(md.empty(2), 0.5)), [0.5, 0.5])
    assert float(md.sum(nn.init.zeros_(md.ones(3)))) == 0 and float(
        md.sum(nn.init.ones_(md.zeros(3)))) == 3
    with pytest.raises(ValueError, match="xavier_uniform_: fan in and fan out can not be "
                                         "computed for a tensor with fewer than 2 dimensions"):
        nn.init.xavier_uniform_(md.empty(3))
    with pytest.raises(ValueError, match="kaiming_normal_: mode 'fan_avg' is not supported"):
        nn.init.kaiming_normal_(md.empty((2, 2)), mode="fan_avg")
    with pytest.raises(ValueError, match="calculate_gain: unsupported nonlinearity 'swish'"):
        nn.init.calculate_gain("swish")
    with pytest.raises(TypeError, match="uniform_: expected a real floating tensor, got int64"):
        nn.init.uniform_(md.zeros(2, dtype=md.int64))
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        nn.init.kaiming_uniform_(md.empty((0, 3)))


def test_training_a_small_model_on_the_device_under_test():
    md.manual_seed(0)
    x = md.randn(64, 2)
    y = (md.sum(x * x, axis=1) > 1.0).astype(md.int64)
    model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 2))
    opt = md.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(60):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    accuracy = float(md.mean((md.argmax(model(x), axis=1) == y).astype(md.float32)))
    assert accuracy > 0.9, (TEST_DEVICE, accuracy)


def test_public_namespaces_have_explicit_all():
    import importlib

    for name in ("mdtensor.nn", "mdtensor.nn.functional", "mdtensor.nn.init",
                 "mdtensor.optim", "mdtensor.optim.lr_scheduler"):
        module = importlib.import_module(name)
        assert isinstance(module.__all__, list) and module.__all__, name
        assert all(hasattr(module, public) for public in module.__all__), name
    assert {"nn", "optim", "save", "load"} <= set(md.__all__)


def test_a_refused_dtype_stays_refused_after_accepted_calls():
    # relu and threshold_backward skip their dtype check's frame for a dtype already
    # accepted (Note [Checked impls on the fast kernels]); a refused one raises every time.
    x = md.asarray([1.0, -2.0])
    z = md.asarray([1 + 1j, -1j])
    for _ in range(3):
        assert md.ops.aten.relu(x).tolist() == [1.0, 0.0]
        assert md.ops.aten.threshold_backward(x, x, 0.0).tolist() == [1.0, 0.0]
        with pytest.raises(TypeError, match="relu: expected integer or floating-point "
                                            "tensors, got complex64"):
            md.ops.aten.relu(z)
        with pytest.raises(TypeError, match="threshold_backward: expected integer or "
                                            "floating-point tensors, got bool"):
            md.ops.aten.threshold_backward(x, x > 0, 0.0)
