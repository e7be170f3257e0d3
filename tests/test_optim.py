"""``md.optim``: the same model and data through mdtensor's and PyTorch's optimizers and
schedulers give the same parameters (float32 rounding), on the device under test."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import INPLACE_ALPHA, to_numpy, xfail_on

import mdtensor as md
from mdtensor import nn

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(0)
W1 = RNG.standard_normal((8, 4)).astype(np.float32)
B1 = RNG.standard_normal(8).astype(np.float32)
W2 = RNG.standard_normal((3, 8)).astype(np.float32)
X = RNG.standard_normal((16, 4)).astype(np.float32)
Y = RNG.integers(0, 3, 16)


def _md_model():
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3, bias=False))
    model.load_state_dict({"0.weight": md.asarray(W1), "0.bias": md.asarray(B1),
                           "2.weight": md.asarray(W2)})
    return model


def _torch_model():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(),
                                torch.nn.Linear(8, 3, bias=False))
    model.load_state_dict({"0.weight": torch.tensor(W1), "0.bias": torch.tensor(B1),
                           "2.weight": torch.tensor(W2)})
    return model


def _groups(model, split):
    params = list(model.parameters())
    if not split:
        return params
    return [{"params": params[:2]}, {"params": params[2:], "lr": 0.003}]


def _train(lib, model, opt, sched=None, steps=12):
    x, y = (md.asarray(X), md.asarray(Y)) if lib is md else (torch.tensor(X), torch.tensor(Y))
    cross_entropy = nn.functional.cross_entropy if lib is md else torch.nn.functional.cross_entropy
    lrs = []
    for _ in range(steps):
        opt.zero_grad()
        cross_entropy(model(x), y).backward()
        opt.step()
        if sched is not None:
            sched.step()
            lrs.append(sched.get_last_lr())
    return lrs


def _params(model):
    return [to_numpy(p.detach()) if isinstance(p, md.Tensor) else p.detach().numpy()
            for p in model.parameters()]


CASES = [
    ("SGD", {"lr": 0.1}),
    ("SGD", {"lr": 0.1, "momentum": 0.9}),
    ("SGD", {"lr": 0.1, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.01}),
    ("SGD", {"lr": 0.05, "momentum": 0.8, "nesterov": True, "weight_decay": 0.1}),
    ("SGD", {"lr": 0.05, "momentum": 0.5, "maximize": True}),
    ("Adam", {"lr": 0.01}),
    ("Adam", {"lr": 0.01, "betas": (0.8, 0.9), "eps": 1e-6, "weight_decay": 0.1}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("Adam", {"lr": 0.01, "weight_decay": 0.1, "decoupled_weight_decay": True}),
    ("AdamW", {"lr": 0.01}),
    ("AdamW", {"lr": 0.02, "weight_decay": 0.3, "amsgrad": True, "maximize": True}),
    ("RMSprop", {"lr": 0.01}),
    ("RMSprop", {"lr": 0.01, "alpha": 0.9, "centered": True}),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "weight_decay": 0.1}),
    ("RMSprop", {"lr": 0.005, "momentum": 0.5, "centered": True, "eps": 1e-4}),
    ("Adagrad", {"lr": 0.1}),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.2, "eps": 1e-6}),
]


@pytest.mark.parametrize("split", [False, True], ids=["one-group", "two-groups"])
@pytest.mark.parametrize("name,kwargs", CASES, ids=[f"{n}-{sorted(k.items())}" for n, k in CASES])
def test_optimizers_match_torch(name, kwargs, split):
    ours, theirs = _md_model(), _torch_model()
    _train(md, ours, getattr(md.optim, name)(_groups(ours, split), **kwargs))
    _train(torch, theirs, getattr(torch.optim, name)(_groups(theirs, split), **kwargs))
    for a, b in zip(_params(ours), _params(theirs)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


SCHEDULERS = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}),
    ("StepLR", {"step_size": 1}),
    ("CosineAnnealingLR", {"T_max": 7}),
    ("CosineAnnealingLR", {"T_max": 5, "eta_min": 0.01}),
    ("LambdaLR", {"lr_lambda": lambda epoch: 0.9 ** epoch}),
    ("LambdaLR", {"lr_lambda": [lambda e: 1 / (e + 1), lambda e: 1.0 + e]}),
]


@pytest.mark.parametrize("name,kwargs", SCHEDULERS, ids=[f"{n}-{i}" for i, (n, _) in
                                                         enumerate(SCHEDULERS)])
def test_schedulers_match_torch(name, kwargs):
    ours, theirs = _md_model(), _torch_model()
    opt_a = md.optim.SGD(_groups(ours, True), lr=0.1, momentum=0.9)
    opt_b = torch.optim.SGD(_groups(theirs, True), lr=0.1, momentum=0.9)
    sched_a = getattr(md.optim.lr_scheduler, name)(opt_a, **kwargs)
    sched_b = getattr(torch.optim.lr_scheduler, name)(opt_b, **kwargs)
    assert sched_a.get_last_lr() == sched_b.get_last_lr()
    lrs_a = _train(md, ours, opt_a, sched_a, steps=16)  # past T_max: the cosine turns up
    lrs_b = _train(torch, theirs, opt_b, sched_b, steps=16)
    assert lrs_a == lrs_b  # the same Python floats, step for step
    for a, b in zip(_params(ours), _params(theirs)):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)


def test_scheduler_state_dict_resumes_the_schedule():
    def fresh():
        model = _md_model()
        opt = md.optim.SGD(model.parameters(), lr=0.1)
        return opt, md.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, eta_min=0.001)

    opt, sched = fresh()
    for _ in range(4):
        opt.step()
        sched.step()
    opt2, sched2 = fresh()
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    for _ in range(5):
        sched.step()
        sched2.step()
        assert sched.get_last_lr() == sched2.get_last_lr() == [opt2.param_groups[0]["lr"]]
    assert "optimizer" not in sched.state_dict() and sched.state_dict()["last_epoch"] == 9
    resumed = md.optim.lr_scheduler.StepLR(opt2, step_size=2, last_epoch=9)
    assert resumed.last_epoch == 10
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in "
                                       r"param_groups\[0\]"):
        md.optim.lr_scheduler.StepLR(md.optim.SGD([nn.Parameter(md.ones(1))]), 2, last_epoch=3)


def test_lambda_lr_state_dict_keeps_callable_objects_only():
    class Warmup:
        def __init__(self):
            self.factor = 0.5

        def __call__(self, epoch):
            return self.factor * (epoch + 1)

    opt = md.optim.SGD([nn.Parameter(md.ones(1))], lr=1.0)
    warm = Warmup()
    sched = md.optim.lr_scheduler.LambdaLR(opt, warm)
    warm.factor = 2.0
    state = sched.state_dict()
    assert state["lr_lambdas"] == [{"factor": 2.0}]
    other = Warmup()
    sched2 = md.optim.lr_scheduler.LambdaLR(md.optim.SGD([nn.Parameter(md.ones(1))]), other)
    sched2.load_state_dict(state)
    assert other.factor == 2.0
    assert md.optim.lr_scheduler.LambdaLR(opt, lambda e: 1.0).state_dict()["lr_lambdas"] == [None]
    with pytest.raises(ValueError, match="LambdaLR: expected 1 lr_lambdas, but got 2"):
        md.optim.lr_scheduler.LambdaLR(opt, [warm, warm])
    with pytest.raises(TypeError, match="StepLR: Linear is not an Optimizer"):
        md.optim.lr_scheduler.StepLR(nn.Linear(1, 1), 2)


@pytest.mark.parametrize("name,kwargs", [("SGD", {"lr": 0.1, "momentum": 0.9}),
                                         ("Adam", {"lr": 0.01, "amsgrad": True}),
                                         ("RMSprop", {"lr": 0.01, "centered": True,
                                                      "momentum": 0.5}),
                                         ("Adagrad", {"lr": 0.1})])
def test_state_dict_round_trip_continues_exactly(name, kwargs):
    straight = _md_model()
    opt = getattr(md.optim, name)(straight.parameters(), **kwargs)
    _train(md, straight, opt, steps=8)

    first = _md_model()
    opt1 = getattr(md.optim, name)(first.parameters(), **kwargs)
    _train(md, first, opt1, steps=4)
    second = _md_model()
    second.load_state_dict(first.state_dict())
    opt2 = getattr(md.optim, name)(second.parameters(), lr=123.0)
    opt2.load_state_dict(_through_a_file(opt1.state_dict()))
    assert opt2.param_groups[0]["lr"] == kwargs["lr"]
    _train(md, second, opt2, steps=4)
    for a, b in zip(_params(straight), _params(second)):
        np.testing.assert_array_equal(a, b)
    _train(md, first, opt1, steps=1)  # the loaded state is a copy: opt1 is not changed
    np.testing.assert_array_equal(_params(second)[0], _params(straight)[0])


def _through_a_file(state_dict):
    import io

    buf = io.BytesIO()
    md.save(state_dict, buf)
    buf.seek(0)
    return md.load(buf)


def test_state_dict_layout_is_torchs():
    ours, theirs = _md_model(), _torch_model()
    opt_a = md.optim.Adam(_groups(ours, True), lr=0.01)
    opt_b = torch.optim.Adam(_groups(theirs, True), lr=0.01)
    _train(md, ours, opt_a, steps=2)
    _train(torch, theirs, opt_b, steps=2)
    sd_a, sd_b = opt_a.state_dict(), opt_b.state_dict()
    assert sd_a["state"].keys() == sd_b["state"].keys()
    assert [g["params"] for g in sd_a["param_groups"]] == [g["params"]
                                                          for g in sd_b["param_groups"]]
    assert sd_a["state"][0].keys() == sd_b["state"][0].keys()
    assert set(sd_a["param_groups"][1]) <= set(sd_b["param_groups"][1])
    assert sd_a["state"][0]["step"] == 2 == int(sd_b["state"][0]["step"])


def test_updates_are_in_place_and_skip_params_without_grad(device):
    p = nn.Parameter(md.ones(4))
    frozen = nn.Parameter(md.ones(2))
    view = p.detach()[1:3]
    opt = md.optim.SGD([p, frozen], lr=0.5)
    (p * p).sum().backward()
    opt.step()
    assert float(p[0]) == 0.0 and float(view[0]) == 0.0  # the view sees the update
    assert frozen.grad is None and float(frozen[0]) == 1.0
    assert p.is_leaf and p.requires_grad and type(p) is nn.Parameter
    opt.zero_grad(set_to_none=False)
    assert float(md.sum(p.grad)) == 0.0
    opt.zero_grad()
    assert p.grad is None


def test_closure_and_add_param_group():
    p = nn.Parameter(md.asarray([2.0]))
    opt = md.optim.SGD([p], lr=0.25)

    def closure():
        opt.zero_grad()
        loss = (p * p).sum()
        loss.backward()
        return loss

    assert float(opt.step(closure)) == 4.0 and float(p[0]) == 1.0
    q = nn.Parameter(md.asarray([1.0]))
    opt.add_param_group({"params": q, "lr": 1.0})
    assert opt.param_groups[1]["lr"] == 1.0 and opt.param_groups[1]["momentum"] == 0.0
    assert "Parameter Group 1" in repr(opt)


def test_errors_name_the_optimizer():
    p = nn.Parameter(md.ones(2))
    with pytest.raises(ValueError, match="SGD: optimizer got an empty parameter list"):
        md.optim.SGD([])
    with pytest.raises(TypeError, match="Adam: params argument given to the optimizer should "
                                        "be an iterable of Tensors or dicts, but got a Tensor"):
        md.optim.Adam(p)
    with pytest.raises(TypeError, match="SGD: optimizer parameters need to be organized in "
                                        "ordered collections"):
        md.optim.SGD({p})
    with pytest.raises(TypeError, match="SGD: optimizer can only optimize Tensors, but one of "
                                        "the params is int"):
        md.optim.SGD([1])
    with pytest.raises(ValueError, match="Adam: can't optimize a non-leaf Tensor"):
        md.optim.Adam([p * 2])
    with pytest.raises(ValueError, match="SGD: some parameters appear in more than one"):
        md.optim.SGD([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="SGD: invalid learning rate value: -1"):
        md.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Adam: invalid beta parameter at index 1: 1.0"):
        md.optim.Adam([p], betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="SGD: Nesterov momentum requires a momentum and zero "
                                         "dampening"):
        md.optim.SGD([p], nesterov=True)
    with pytest.raises(ValueError, match="RMSprop: invalid alpha value: -0.5"):
        md.optim.RMSprop([p], alpha=-0.5)
    opt = md.optim.SGD([p])
    with pytest.raises(ValueError, match="SGD: loaded state dict has a different number of "
                                         "parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})
    with pytest.raises(ValueError, match="SGD: loaded state dict contains a parameter group "
                                         "that doesn't match the size"):
        opt.load_state_dict({"state": {}, "param_groups": [{"params": [0, 1], "lr": 1}]})
    z = nn.Parameter(md.ones(2, dtype=md.complex64))
    c = md.optim.Adam([z])
    z.grad = md.ones(2, dtype=md.complex64)
    with pytest.raises(TypeError, match="Adam: expected real floating parameters, got a "
                                        "complex64 parameter"):
        c.step()


def test_learning_rates_of_a_cosine_schedule_are_pytorchs_formula():
    opt = md.optim.SGD([nn.Parameter(md.ones(1))], lr=1.0)
    sched = md.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=4, eta_min=0.0)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(4):
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    expected = [(1 + math.cos(math.pi * t / 4)) / 2 for t in range(5)]
    np.testing.assert_allclose(lrs, expected, atol=1e-12)


@xfail_on("jax", reason=INPLACE_ALPHA)
def test_in_place_add_with_alpha():
    x = md.ones(3)
    with md.no_grad():
        x.add_(md.ones(3), alpha=2)
    assert to_numpy(x).tolist() == [3.0, 3.0, 3.0]
