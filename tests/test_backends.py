"""Backend discovery: entry points, lazy loading, broken plug-ins, renaming PrivateUse1."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap

import pytest
from plugin_dists import make_dist, run

import mdtensor as md


def test_available_lists_builtins_without_importing_them():
    rows = {r["name"]: r for r in md.backends.available()}
    assert {"numpy", "jax", "cupy", "dask"} <= set(rows)
    assert rows["numpy"]["device_type"] == "cpu" and rows["numpy"]["key"] == "CPU"
    assert rows["cupy"]["distribution"] == "mdtensor"


def test_broken_plugin_warns_and_everything_else_works(tmp_path):
    make_dist(tmp_path, "broken_backend", """
        from mdtensor.backends import BackendInfo
        INFO = BackendInfo("broken", "brokendev", "PrivateUse2")
        import this_module_does_not_exist  # the deliberate import error
    """, """
        [mdtensor.backend_info]
        broken = broken_backend:INFO
        [mdtensor.backends]
        broken = broken_backend:Backend
    """)
    r = run(tmp_path, """
        import mdtensor as md
        x = md.asarray([1.0, 2.0]) + 1
        print("ok", x.tolist())
        print(sorted(row["name"] for row in md.backends.available()))
    """)
    assert r.returncode == 0, r.stderr
    assert "ok [2.0, 3.0]" in r.stdout
    assert "skipping backend plug-in 'broken' from broken_backend" in r.stderr
    assert "ModuleNotFoundError" in r.stderr


def test_duplicate_name_plugin_is_skipped_with_warning(tmp_path):
    make_dist(tmp_path, "dup_backend", """
        from mdtensor.backends import BackendInfo
        INFO = BackendInfo("dupdev", "cpu", "PrivateUse2")
    """, """
        [mdtensor.backend_info]
        dupdev = dup_backend:INFO
        [mdtensor.backends]
        dupdev = dup_backend:INFO
    """)
    r = run(tmp_path, """
        import mdtensor as md
        print(md.asarray([1.0]).device, md.asarray([1.0]).device.backend.name)
    """)
    assert r.returncode == 0, r.stderr
    assert "cpu numpy" in r.stdout
    assert "skipping backend plug-in 'dupdev' from dup_backend" in r.stderr
    assert "device type 'cpu' is already served by backend 'numpy'" in r.stderr


def test_plugin_that_fails_at_load_reports_on_use(tmp_path):
    make_dist(tmp_path, "late_backend", """
        from mdtensor.backends import BackendInfo
        INFO = BackendInfo("late", "latedev", "PrivateUse3")
        class Backend:
            def __init__(self):
                raise RuntimeError("no device attached")
    """, """
        [mdtensor.backend_info]
        late = late_backend:INFO
        [mdtensor.backends]
        late = late_backend:Backend
    """)
    r = run(tmp_path, """
        import mdtensor as md
        try:
            md.asarray([1.0], device="latedev")
        except RuntimeError as e:
            print("error:", e)
        print(md.asarray([2.0]).tolist())
    """)
    assert r.returncode == 0, r.stderr
    assert "backend 'late' for device type 'latedev' (from late_backend) failed to load" \
        in r.stdout
    assert "no device attached" in r.stdout and "[2.0]" in r.stdout


@pytest.mark.parametrize("device, modules", [("jax", ("jax",)),
                                             ("dask", ("dask", "distributed"))])
def test_a_backend_library_is_imported_only_when_its_first_tensor_is_created(device, modules):
    if importlib.util.find_spec(modules[0]) is None:
        pytest.skip(f"{modules[0]} not installed")
    code = f"""
        import sys, mdtensor as md
        md.backends.available(); (md.asarray([1.0]) + 1).tolist(); md.dask
        before = [m for m in {modules!r} if m in sys.modules]
        x = md.asarray([1.0], device={device!r})
        print(before, {modules[0]!r} in sys.modules, x.device)
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.stdout.split() == ["[]", "True", f"{device}:0"], r.stderr


def test_unknown_device_and_bad_registration():
    with pytest.raises(ValueError, match="unknown device type 'tpu'"):
        md.asarray([1.0], device="tpu")

    class Bad(md.backends.Backend):
        name, device_type, key = "bad", "baddev", "Dense"

        def namespace(self):
            return None

    with pytest.raises(ValueError, match="names backend key 'Dense'"):
        md.backends.register(Bad())
    assert "bad" not in {r["name"] for r in md.backends.available()}


def test_programmatic_registration_and_privateuse_rename():
    import numpy as np

    class Host(md.backends.Backend):
        """NumPy arrays again, as a PrivateUse2 device (a programmatic plug-in)."""
        name, device_type, key = "host2", "host2", "PrivateUse2"
        array_type = np.ndarray

        def __init__(self):
            import array_api_compat.numpy as xp
            self._xp = xp

        def namespace(self):
            return self._xp

        def ensure_array(self, r):
            return np.asarray(r)

    md.backends.register(Host())
    try:
        x = md.asarray([1.0, 2.0], device="host2")
        y = (x * 3).sum()
        assert y.item() == 9.0 and y.device.type == "host2"
        assert "PrivateUse2" in repr(x.keyset)
    finally:
        md.backends.unregister("host2")


def test_rename_privateuse1_in_subprocess():
    code = """
        import mdtensor as md
        md.backends.rename_privateuse1("mydevice")
        print(md.DispatchKey.AutogradPrivateUse1.display_name())
        K = md.DispatchKey
        print(repr(md.DispatchKeySet([K.PrivateUse1, K.AutogradPrivateUse1])))
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["AutogradMydevice",
                                     "DispatchKeySet(AutogradMydevice, Mydevice)"]


