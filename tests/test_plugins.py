"""Third-party backend plug-ins, through real (throwaway) installed distributions.

Each test writes a module plus a ``*.dist-info`` directory with ``entry_points.txt`` into a
temporary directory, puts it on ``sys.path`` of a fresh interpreter and checks what
``import mdtensor`` and the backend registry do with it.
"""

from __future__ import annotations

import importlib.util

import pytest
from plugin_dists import entry_points, make_dist, run

import mdtensor as md


def test_import_mdtensor_imports_no_optional_array_library():
    r = run(None, """
        import sys, mdtensor as md
        md.backends.available()
        (md.asarray([1.0]) + 1).tolist()
        print(sorted(m for m in ("jax", "cupy", "dask", "array_api_strict") if m in sys.modules))
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_missing_backend_info_attribute_warns_and_is_skipped(tmp_path):
    make_dist(tmp_path, "noattr_backend", """
        X = 1
    """, """
        [mdtensor.backend_info]
        noattr = noattr_backend:INFO
        [mdtensor.backends]
        noattr = noattr_backend:Backend
    """)
    r = run(tmp_path, """
        import mdtensor as md
        print([row["name"] for row in md.backends.available()])
        print(md.asarray([1.0, 2.0]).sum().item())
    """)
    assert r.returncode == 0, r.stderr
    assert "skipping backend plug-in 'noattr' from noattr_backend" in r.stderr
    assert "AttributeError" in r.stderr
    assert "'noattr'" not in r.stdout.splitlines()[0] and "3.0" in r.stdout


def test_backend_object_missing_required_attribute_fails_on_use_only(tmp_path):
    make_dist(tmp_path, "half_backend", """
        from mdtensor.backends import Backend, BackendInfo
        INFO = BackendInfo("half", "halfdev", "PrivateUse2")
        class HalfBackend(Backend):
            name = "half"
            device_type = "halfdev"
            key = "PrivateUse2"   # but no namespace(): the base raises NotImplementedError
    """, """
        [mdtensor.backend_info]
        half = half_backend:INFO
        [mdtensor.backends]
        half = half_backend:HalfBackend
    """)
    r = run(tmp_path, """
        import mdtensor as md
        row = next(r for r in md.backends.available() if r["name"] == "half")
        print("listed", row["loaded"])
        try:
            md.asarray([1.0], device="halfdev")
        except RuntimeError as e:
            print("error:", e)
        print(md.asarray([2.0]).tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert "listed False" in r.stdout
    assert ("backend 'half' for device type 'halfdev' (from half_backend) failed to load: "
            "TypeError: backend 'half' does not define namespace()") in r.stdout
    assert "[2.0]" in r.stdout


def test_info_without_factory_and_bad_key_are_skipped(tmp_path):
    make_dist(tmp_path, "odd_backend", """
        from mdtensor.backends import BackendInfo
        ONLY_INFO = BackendInfo("onlyinfo", "onlyinfodev", "PrivateUse2")
        BAD_KEY = BackendInfo("badkey", "badkeydev", "Autograd")
    """, """
        [mdtensor.backend_info]
        onlyinfo = odd_backend:ONLY_INFO
        badkey = odd_backend:BAD_KEY
        [mdtensor.backends]
        badkey = odd_backend:BAD_KEY
    """)
    r = run(tmp_path, """
        import mdtensor as md
        names = {row["name"] for row in md.backends.available()}
        print("onlyinfo" in names, "badkey" in names, "numpy" in names)
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "True"]
    assert "'onlyinfo' from odd_backend: it declares mdtensor.backend_info but no " \
           "mdtensor.backends entry point" in r.stderr
    assert "names backend key 'Autograd'" in r.stderr


def test_duplicate_plugin_name_between_two_distributions(tmp_path):
    for dist in ("first_backend", "second_backend"):
        make_dist(tmp_path, dist, f"""
            from mdtensor.backends import BackendInfo
            INFO = BackendInfo("twin", "twindev_{dist}", "PrivateUse3")
        """, f"""
            [mdtensor.backend_info]
            twin = {dist}:INFO
            [mdtensor.backends]
            twin = {dist}:INFO
        """)
    r = run(tmp_path, """
        import mdtensor as md
        rows = [r for r in md.backends.available() if r["name"] == "twin"]
        print(len(rows), md.asarray([1.0]).device)
    """)
    assert r.returncode == 0, r.stderr
    # One of the two wins; the other is reported by name, with the winner's distribution.
    assert r.stdout.split() == ["1", "cpu"]
    assert "backend name 'twin' is already registered by" in r.stderr


@pytest.mark.skipif(importlib.util.find_spec("mdtensor_loopback") is None,
                    reason="loopback plug-in not installed (pip install -e "
                           "plugins/mdtensor_loopback)")
def test_loopback_plugin_is_discovered_through_its_entry_points():
    rows = {r["name"]: r for r in md.backends.available()}
    row = rows["loopback"]
    assert row["distribution"] == "mdtensor-loopback"
    assert row["key"] == "PrivateUse1" and row["device_type"] == "loopback"
    r = run(None, """
        import sys, mdtensor as md
        before = "array_api_strict" in sys.modules
        x = md.asarray([1.0, 2.0], device="loopback")
        v = x[1:]
        v.add_(1)
        print(before, "array_api_strict" in sys.modules, type(x._data).__module__,
              x.tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "True", "array_api_strict._array_object",
                                "[1.0,", "3.0]"]


def test_an_interrupted_discovery_is_not_done(tmp_path):
    # issue 25 item 16: a KeyboardInterrupt importing a plug-in left no backend at all
    make_dist(tmp_path, "intr_backend", """
        import os
        marker = os.path.join(os.path.dirname(__file__), "interrupted-once")
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise KeyboardInterrupt
        from mdtensor.backends import BackendInfo
        INFO = BackendInfo("intr", "intrdev", "PrivateUse3")
    """, entry_points("intr_backend", {"intr": "INFO"}))
    r = run(tmp_path, """
        import mdtensor.backends as backends
        try:
            backends.available()
        except KeyboardInterrupt:
            print("interrupted")
        import mdtensor as md
        print(md.asarray([1.0]).device, "intr" in {r["name"] for r in md.backends.available()})
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["interrupted", "cpu", "True"]


def test_plugins_claiming_taken_keys_or_device_types_are_skipped(tmp_path):
    make_dist(tmp_path, "greedy_backend", """
        from mdtensor.backends import BackendInfo
        CPU_KEY = BackendInfo("cpukey", "cpukeydev", "CPU")
        META = BackendInfo("metadev", "meta", "PrivateUse2")
        EMPTY = BackendInfo("emptydev", "", "PrivateUse3")
        TAKEN_PU1 = BackendInfo("pu1", "pu1dev", "PrivateUse1")
        BROKEN = BackendInfo("broken", "broken", "PrivateUse2")
    """, entry_points("greedy_backend", infos := {
        "cpukey": "CPU_KEY", "metadev": "META", "emptydev": "EMPTY", "pu1": "TAKEN_PU1",
        "broken": "NOT_THERE"}, {**infos, "broken": "BROKEN"}))
    r = run(tmp_path, """
        import importlib.util
        import mdtensor as md
        names = {row["name"] for row in md.backends.available()}
        print(sorted(names & {"cpukey", "metadev", "emptydev", "pu1", "broken"}))
        print(md.asarray([1.0]).device, md.empty(2, device="meta").device)
        try:
            md.asarray([1.0], device="broken")
        except ValueError as e:
            print("broken:", e)
        print("loopback" in names, importlib.util.find_spec("mdtensor_loopback") is not None)
    """)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    loopback = lines[-1] == "True True"
    assert lines[0] == ("[]" if loopback else "['pu1']")
    assert lines[1] == "cpu meta"
    assert "backend key 'CPU' is already taken by backend 'numpy'" in r.stderr
    assert "device type 'meta' is mdtensor's own" in r.stderr
    assert "its device_type must be a non-empty str" in r.stderr
    if loopback:
        assert "backend key 'PrivateUse1' is already taken by backend 'loopback'" in r.stderr
    assert lines[2].startswith("broken: device type 'broken': its backend plug-in was "
                               "skipped: its backend_info failed to load (AttributeError")


def test_a_backend_object_whose_name_or_namespace_disagrees_names_the_plugin(tmp_path):
    make_dist(tmp_path, "liar_backend", """
        from mdtensor.backends import Backend, BackendInfo
        INFO = BackendInfo("liar", "liardev", "PrivateUse3")
        INFO2 = BackendInfo("nsfail", "nsfaildev", "PrivateUse2")
        class Liar(Backend):
            name, device_type, key, array_type = "other", "liardev", "PrivateUse3", list
            def namespace(self):
                import numpy
                return numpy
        class NsFail(Backend):
            name, device_type, key, array_type = "nsfail", "nsfaildev", "PrivateUse2", list
            def namespace(self):
                raise ImportError("the array library is broken")
    """, entry_points("liar_backend", {"liar": "INFO", "nsfail": "INFO2"},
                      {"liar": "Liar", "nsfail": "NsFail"}))
    r = run(tmp_path, """
        import mdtensor as md
        for dev in ("liardev", "nsfaildev"):
            try:
                md.asarray([1.0], device=dev)
            except RuntimeError as e:
                print(e)
    """)
    assert r.returncode == 0, r.stderr
    liar, nsfail = r.stdout.splitlines()
    assert "backend 'liar'" in liar and "(from liar_backend)" in liar and \
        "name='other'" in liar
    assert "backend 'nsfail'" in nsfail and "(from liar_backend)" in nsfail and \
        "the array library is broken" in nsfail
