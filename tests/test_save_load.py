"""``md.save`` / ``md.load``: round trips on the device under test, aliasing, and files
from elsewhere that must be refused without running anything (mdtensor/_serialization.py).
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import subprocess
import sys
import textwrap
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from _helpers import backend_params, to_numpy

import mdtensor as md

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]


def _same(a, b) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype and a.device == b.device
    np.testing.assert_array_equal(to_numpy(a.detach()), to_numpy(b.detach()))


def _round_trip(obj, **kwargs):
    buf = io.BytesIO()
    md.save(obj, buf)
    buf.seek(0)
    return md.load(buf, **kwargs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_round_trips(dtype, device):
    if dtype == "float16" and device.startswith("loopback"):
        pytest.skip("array_api_strict (the loopback backend) has no float16")
    rng = np.random.default_rng(0)
    data = (rng.standard_normal((3, 4)) * 50).astype(dtype)
    if dtype.startswith("complex"):
        data = data + 1j * data[::-1]
    t = md.asarray(data, device=device)
    _same(_round_trip(t), t)


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3), (1,), (2, 3, 4)])
def test_shapes_round_trip(shape, device):
    t = md.ones(shape, device=device) * 1.5
    _same(_round_trip(t), t)


def test_nested_containers_round_trip(tmp_path, device):
    t = md.arange(6, device=device).reshape(2, 3)
    obj = {"a": [1, 2.5, True, None, "s", (3, t)], 7: {"nested": OrderedDict(x=1, y=[t])},
           (1, "k"): -0.0, "nan": math.nan, "inf": -math.inf, "c": 1 + 2j, "empty": ([], {}, ())}
    path = tmp_path / "obj.mdt"
    md.save(obj, path)
    out = md.load(str(path))
    assert out.keys() == obj.keys()
    assert out["a"][:5] == [1, 2.5, True, None, "s"] and type(out["a"][1]) is float
    assert type(out["a"]) is list and type(out["a"][5]) is tuple
    assert type(out[7]["nested"]) is OrderedDict and list(out[7]["nested"]) == ["x", "y"]
    assert math.copysign(1, out[(1, "k")]) == -1 and math.isnan(out["nan"])
    assert out["inf"] == -math.inf and out["c"] == 1 + 2j and out["empty"] == ([], {}, ())
    _same(out["a"][5][1], t)
    assert out["a"][5][1] is out[7]["nested"]["y"][0]  # one object saved twice: one loaded


def test_views_load_as_views_of_one_base(device):
    root = md.arange(24, dtype=md.float32, device=device)
    base = root.reshape(2, 3, 4)  # itself a view of root
    views = {"mT": base.mT, "slice": base[:, 1:, ::2], "negative": base[::-1, :, 1],
             "expand": base[:, :1, :2].expand(2, 5, 2), "scalar": base[1, 2, 3],
             "permute": base.permute(2, 0, 1), "unsqueeze": base[0].unsqueeze(1)[:, :, 1:3],
             "flat": base.reshape(24), "alias": root.detach(), "base": base, "root": root}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # every one of these is saved as a view
        out = _round_trip(views)
    for name, v in views.items():
        _same(out[name], v)
    with md.no_grad():
        out["root"].add_(100)  # every loaded view sees the write, on every backend
    for name, v in views.items():
        np.testing.assert_array_equal(to_numpy(out[name]), to_numpy(v) + 100, err_msg=name)


def test_a_view_saved_alone_brings_its_base(device):
    w = md.ones((3, 4), device=device)
    out = _round_trip([w[0], w[2]])
    assert out[0]._base is out[1]._base and out[0]._base is not None
    assert out[0]._base.shape == (3, 4)  # the whole storage, as PyTorch saves it
    with md.no_grad():
        out[0][1] = -1.0
    assert float(out[0]._base[0, 1]) == -1.0


def test_tied_parameters_and_state_dict_aliases_stay_tied(device):
    emb = md.nn.Embedding(5, 3)
    head = md.nn.Linear(3, 5, bias=False)
    head.weight = emb.weight  # tied, as language models tie input and output embeddings
    model = md.nn.ModuleDict({"emb": emb, "head": head}).to(device)
    sd = model.state_dict()
    assert sd["emb.weight"] is not sd["head.weight"]  # two detach()-ed aliases
    out = _round_trip(sd)
    _same(out["emb.weight"], sd["emb.weight"])
    with md.no_grad():
        out["emb.weight"].mul_(0)
    assert float(md.sum(md.abs(out["head.weight"]))) == 0.0


def test_requires_grad_and_parameters_are_kept(device):
    p = md.nn.Parameter(md.ones(3, device=device))
    frozen = md.nn.Parameter(md.ones(2, device=device), requires_grad=False)
    x = md.ones(2, device=device, requires_grad=True)
    out = _round_trip({"p": p, "frozen": frozen, "x": x, "plain": md.ones(1, device=device)})
    assert type(out["p"]) is md.nn.Parameter and out["p"].requires_grad
    assert type(out["frozen"]) is md.nn.Parameter and not out["frozen"].requires_grad
    assert type(out["x"]) is md.Tensor and out["x"].requires_grad and out["x"].is_leaf
    assert not out["plain"].requires_grad


def test_model_and_optimizer_checkpoint_round_trip(tmp_path, device):
    md.manual_seed(0)
    model = md.nn.Sequential(md.nn.Linear(4, 8), md.nn.LayerNorm(8), md.nn.GELU(),
                             md.nn.Linear(8, 2)).to(device)
    opt = md.optim.Adam(model.parameters(), lr=0.01)
    x = md.randn(5, 4, device=device)
    model(x).sum().backward()
    opt.step()
    path = tmp_path / "ckpt.mdt"
    md.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 1}, path)
    ckpt = md.load(path)
    fresh = md.nn.Sequential(md.nn.Linear(4, 8), md.nn.LayerNorm(8), md.nn.GELU(),
                             md.nn.Linear(8, 2)).to(device)
    fresh.load_state_dict(ckpt["model"])
    np.testing.assert_array_equal(to_numpy(fresh(x).detach()), to_numpy(model(x).detach()))
    opt2 = md.optim.Adam(fresh.parameters(), lr=0.5)
    opt2.load_state_dict(ckpt["opt"])
    assert opt2.param_groups[0]["lr"] == 0.01 and opt2.state[fresh[0].weight]["step"] == 1
    assert ckpt["epoch"] == 1


@pytest.mark.parametrize("target", backend_params("cpu", "jax", "loopback"))
def test_map_location_moves_every_tensor(target, device):
    obj = {"a": md.ones(3, device=device), "v": None}
    obj["v"] = obj["a"][1:]
    for location in (target, md.Device(target), {str(obj["a"].device): target}):
        out = _round_trip(obj, map_location=location)
        assert out["a"].device == md.Device(target) == out["v"].device
        assert out["v"]._base is out["a"]


def test_unavailable_saved_device_says_map_location(tmp_path):
    path = tmp_path / "t.mdt"
    md.save(md.ones(2, device="cpu"), path)
    with zipfile.ZipFile(path) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        npy = zf.read("storages/0.npy")
    manifest["storages"][0]["device"] = "tpu:0"
    _write_archive(path, manifest, {"storages/0.npy": npy})
    with pytest.raises(ValueError, match=r"load: .*'tpu:0'.*map_location='cpu'"):
        md.load(path)
    _same(md.load(path, map_location="cpu"), md.ones(2, device="cpu"))


def test_the_file_is_an_npz_without_pickles(tmp_path, device):
    path = tmp_path / "t.npz"
    md.save({"w": md.arange(4, device=device)}, path)
    with np.load(path, allow_pickle=False) as npz:
        np.testing.assert_array_equal(npz["storages/0"], np.arange(4))
    with zipfile.ZipFile(path) as zf:
        assert not any(n.endswith(".pkl") for n in zf.namelist())
        assert json.loads(zf.read("manifest.json"))["format"] == "mdtensor"


def test_save_refuses_what_it_cannot_store(tmp_path):
    path = tmp_path / "x"
    with pytest.raises(TypeError, match=r"save: cannot save an object of type Linear; save "
                                        r"its state_dict\(\) instead"):
        md.save(md.nn.Linear(2, 2), path)
    for bad in ({1, 2}, object(), np.ones(2), np.float32(1)):
        with pytest.raises(TypeError, match=f"save: cannot save an object of type "
                                            f"{type(bad).__name__}"):
            md.save({"x": bad}, path)
    with pytest.raises(TypeError, match="save: cannot save a dict key of type frozenset"):
        md.save({frozenset(): 1}, path)
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="save: the object contains itself"):
        md.save(loop, path)
    with pytest.raises(ValueError, match="save: meta tensors have no data"):
        md.save(md.ones(2, device="meta"), path)


def test_empty_views_save_without_a_warning(device):
    x = md.ones((3, 4), device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = _round_trip([x, x[:, 4:], x[3:]])
    assert out[1].shape == (3, 0) and out[2].shape == (0, 4)


# -- files from elsewhere -------------------------------------------------------------------

MARKER = "mdtensor_payload_ran"


class _Payload:
    """Unpickling this creates a marker file (what a malicious checkpoint would do)."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _write_archive(path, manifest, members: dict) -> None:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            zf.writestr(name, data)


def _manifest(**storage):
    rec = {"file": "storages/0.npy", "dtype": "float32", "shape": [2], "device": "cpu"}
    rec.update(storage)
    return {"format": "mdtensor", "version": 1, "storages": [rec],
            "tensors": [{"storage": 0, "view": None, "dtype": rec["dtype"],
                         "shape": rec["shape"], "requires_grad": False, "parameter": False}],
            "object": {"tensor": 0}}


def _npy(array, allow_pickle=False) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=allow_pickle)
    return buf.getvalue()


def test_a_pickle_file_is_refused_and_runs_nothing(tmp_path):
    marker = tmp_path / MARKER
    path = tmp_path / "evil.pt"
    path.write_bytes(pickle.dumps({"w": _Payload(str(marker))}))
    with pytest.raises(ValueError, match=r"load: .*it is a pickle, not a zip archive; md.load "
                                         r"reads only files written by md.save"):
        md.load(path)
    assert not marker.exists()


def test_torch_save_files_are_refused(tmp_path, torch):
    marker = tmp_path / MARKER
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "payload": _Payload(str(marker))}, path)
    with pytest.raises(ValueError, match=r"it holds a pickle \(.*data.pkl\), as torch.save "
                                         r"writes; md.load never unpickles"):
        md.load(path)
    assert not marker.exists()


def test_an_object_array_inside_the_archive_is_refused(tmp_path):
    marker = tmp_path / MARKER
    payload = np.empty(2, dtype=object)
    payload[:] = [_Payload(str(marker)), 1]
    path = tmp_path / "evil.mdt"
    _write_archive(path, _manifest(), {"storages/0.npy": _npy(payload, allow_pickle=True)})
    with pytest.raises(ValueError, match=r"storages/0.npy holds an object array \(pickled "
                                         r"Python objects\); md.load never unpickles"):
        md.load(path)
    for dtype in ("object", "<U3", "datetime64[s]"):  # the manifest cannot ask for one
        _write_archive(path, _manifest(dtype=dtype), {"storages/0.npy": _npy(np.zeros(2))})
        with pytest.raises(ValueError, match="is not a tensor dtype|unknown dtype"):
            md.load(path)
    assert not marker.exists()


def test_loading_in_a_fresh_process_imports_no_pickle_machinery(tmp_path):
    """The refusal happens before anything would unpickle: a loader that sees an object
    array raises, and ``pickle.loads`` is never called (checked by replacing it)."""
    marker = tmp_path / MARKER
    payload = np.empty(1, dtype=object)
    payload[0] = _Payload(str(marker))
    path = tmp_path / "evil.mdt"
    _write_archive(path, _manifest(shape=[1]), {"storages/0.npy": _npy(payload, True)})
    code = f"""
        import pickle
        def refuse(*a, **k):
            raise SystemExit("pickle.loads was called")
        pickle.loads = pickle.load = pickle.Unpickler = refuse
        import mdtensor as md
        try:
            md.load({str(path)!r})
        except ValueError as e:
            print("refused:", e)
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "refused:" in r.stdout and "object array" in r.stdout, r
    assert not marker.exists()


def _nested(depth: int):
    node = None
    for _ in range(depth):
        node = {"list": [node]}
    return node


@pytest.mark.parametrize("change,match", [
    (lambda m: m.update(object={"eval": "__import__('os')"}), "unknown value in manifest"),
    (lambda m: m.update(object={"tensor": 5}), "tensor 5 is not in the manifest"),
    (lambda m: m.update(object={"tensor": True}), "unknown value in manifest"),
    (lambda m: m.update(object={"dict": [[{"list": []}, 1]]}), "a dict key must be"),
    (lambda m: m.update(format="pickle"), "does not describe an mdtensor file"),
    (lambda m: m.update(object=_nested(300)), "nested more than 200 levels deep"),
    (lambda m: m.update(version=99), "format version 99 is not supported"),
    (lambda m: m["storages"][0].update(file="../../etc/passwd"), "not in the archive"),
    (lambda m: m["storages"][0].update(shape=[3]), "holds an array of shape"),
    (lambda m: m["storages"][0].update(shape=[-1]), "bad shape"),
    (lambda m: m["storages"][0].update(dtype="float64"), "holds a float32 array"),
    (lambda m: m["tensors"][0].update(view=[["exec", "x"]]), "bad view step"),
    (lambda m: m["tensors"][0].update(view=[["slice", 9, 0, 1, 1]]), "view steps do not apply"),
    (lambda m: m["tensors"][0].update(view=[["view", [5]]]), "view steps do not apply"),
    (lambda m: m["tensors"][0].update(shape=[3]), "the manifest says float32 of shape"),
    (lambda m: m["tensors"][0].update(requires_grad="yes"), "field 'requires_grad'"),
])
def test_malformed_manifests_are_refused(tmp_path, change, match):
    manifest = _manifest()
    change(manifest)
    path = tmp_path / "bad.mdt"
    _write_archive(path, manifest, {"storages/0.npy": _npy(np.zeros(2, np.float32))})
    with pytest.raises(ValueError, match=match):
        md.load(path)


def test_oversized_members_and_other_files_are_refused(tmp_path):
    path = tmp_path / "big.mdt"
    _write_archive(path, _manifest(), {"storages/0.npy": _npy(np.zeros(40000, np.float32))})
    with pytest.raises(ValueError, match=r"holds \d+ bytes, more than its shape \[2\]"):
        md.load(path)
    path.write_bytes(b"\x00\x01not a zip at all")
    with pytest.raises(ValueError, match="not a zip archive"):
        md.load(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("something.txt", "hi")
    with pytest.raises(ValueError, match="it has no manifest.json"):
        md.load(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", "{not json")
    with pytest.raises(ValueError, match="manifest.json is not valid JSON"):
        md.load(path)
    with pytest.raises(ValueError, match="weights_only=False is not supported"):
        md.load(path, weights_only=False)


def test_save_writes_nothing_outside_its_file(tmp_path):
    before = set(os.listdir(tmp_path))
    md.save({"a": md.ones(2)}, tmp_path / "one.mdt")
    assert set(os.listdir(tmp_path)) - before == {"one.mdt"}
