"""Tensor basics: metadata, interop, repr, operators, devices, dtypes, errors."""

from __future__ import annotations

import pickle
import subprocess
import sys

import numpy as np
import pytest
from _helpers import backend_params, shares_memory

import mdtensor as md


def test_metadata_and_keyset():
    x = md.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], device="cpu")
    assert x.shape == (2, 3)
    assert x.ndim == 2 and x.dim() == 2
    assert x.size == 6 and x.size() == (2, 3) and x.size(1) == 3
    assert x.numel() == 6 and len(x) == 2
    assert x.dtype is md.float32
    assert x.device == md.Device("cpu") == "cpu"
    assert repr(x.keyset) == "DispatchKeySet(ADInplaceOrView, CPU)"
    assert md.DispatchKey.CPU in x.keyset


def test_tensor_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="md.tensor"):
        md.Tensor([1, 2])


def test_default_dtypes_follow_pytorch():
    assert md.asarray([1.0, 2.0]).dtype is md.float32
    assert md.asarray([1, 2]).dtype is md.int64
    assert md.asarray(True).dtype is md.bool
    assert md.asarray(1.5).dtype is md.float32
    assert md.asarray(np.arange(3.0)).dtype is md.float64  # arrays keep their dtype
    assert md.zeros(3).dtype is md.float32
    assert md.arange(3).dtype is md.int64


def test_numpy_shares_memory_on_cpu():
    x = md.asarray([1.0, 2.0], device="cpu")
    arr = x.numpy()
    arr[0] = 10.0
    assert x.tolist() == [10.0, 2.0]
    a = np.arange(3.0)
    t = md.from_numpy(a)
    a[1] = 7
    assert t.tolist() == [0.0, 7.0, 2.0]


def test_item_tolist_conversions():
    x = md.asarray([[1, 2], [3, 4]])
    assert x.tolist() == [[1, 2], [3, 4]]
    one = md.asarray([2.5])
    assert one.item() == 2.5 and float(one) == 2.5 and int(md.asarray(3)) == 3
    assert bool(md.asarray(True))
    assert md.asarray(3).__index__() == 3
    with pytest.raises(ValueError, match="item\\(\\): a tensor with 4 elements"):
        x.item()
    with pytest.raises(ValueError, match="ambiguous"):
        bool(x)
    with pytest.raises(TypeError, match="__index__"):
        md.asarray(1.5).__index__()


def test_repr_like_pytorch(device):
    # As PyTorch: a tensor off the CPU names its device, before the dtype; a chunked
    # backend's tensor its largest chunks (Note [Lazy reprs] in mdtensor/tensors/format.py).
    def dev(t):
        chunks = "" if t.chunks is None else f", chunksize={tuple(max(c) for c in t.chunks)}"
        return ("" if device == "cpu" else f", device='{t.device}'") + chunks  # 'jax:0'

    x = md.asarray([1.0, 2.0])
    assert repr(x) == f"tensor([1., 2.]{dev(x)})"
    x = md.asarray(np.array([1.0, 2.0]))
    assert repr(x) == f"tensor([1., 2.]{dev(x)}, dtype=md.float64)"
    x = md.asarray([1, 2])
    assert repr(x) == f"tensor([1, 2]{dev(x)})"
    x = md.asarray([1, 2], dtype=md.int32)
    assert repr(x) == f"tensor([1, 2]{dev(x)}, dtype=md.int32)"
    if device == "cpu":  # PyTorch's empty tensors: the size unless (0,), a dtype not default
        assert repr(md.zeros(0)) == "tensor([])"
        assert repr(md.zeros((0, 3))) == "tensor([], size=(0, 3))"
        assert repr(md.zeros(0, dtype=md.int64)) == "tensor([], dtype=md.int64)"


def test_array_protocols():
    x = md.asarray([1.0, 2.0], device="cpu")
    assert x.__array_namespace__() is md
    assert x.__array_namespace__(api_version="2024.12") is md
    with pytest.raises(ValueError, match="unsupported api_version"):
        x.__array_namespace__(api_version="1999.01")
    np.testing.assert_array_equal(np.asarray(x), [1.0, 2.0])
    y = np.from_dlpack(x)
    np.testing.assert_array_equal(y, [1.0, 2.0])
    assert x.__dlpack_device__()[0] == 1  # kDLCPU


@pytest.mark.parametrize("device", backend_params("cpu", "loopback", "jax"))
def test_dunder_dlpack_follows_the_standard(device):
    # Every max_version (a producer exports its own version to a consumer of its major
    # version: JAX's legacy capsule for (0, 0)), copy and the CPU dl_device export; a
    # device the backend cannot export to is a BufferError, bad arguments a TypeError.
    x = md.asarray([[1.0, 2.0]], device=device)
    for max_version in (None, (0, 0), (0, 5), (1, 0), (2, 0)):
        for copy in (None, True, False):
            for dl_device in (None, (1, 0)):
                x.__dlpack__(max_version=max_version, copy=copy, dl_device=dl_device)
    np.testing.assert_array_equal(np.from_dlpack(x), [[1.0, 2.0]])
    for copy in (None, False):
        with pytest.raises(BufferError):
            x.__dlpack__(dl_device=(14, 0), copy=copy)  # oneAPI: not on this machine
    with pytest.raises(TypeError, match="__dlpack__: max_version must be"):
        x.__dlpack__(max_version=1)
    with pytest.raises(TypeError, match="__dlpack__: copy must be"):
        x.__dlpack__(copy="yes")


def test_python_operators_and_reflected():
    x = md.asarray([1.0, 2.0, 4.0])
    assert (x + 1).tolist() == [2.0, 3.0, 5.0]
    assert (1 + x).tolist() == [2.0, 3.0, 5.0]
    assert (1 - x).tolist() == [0.0, -1.0, -3.0]
    assert (2 / x).tolist() == [2.0, 1.0, 0.5]
    assert (x ** 2).tolist() == [1.0, 4.0, 16.0]
    assert (2 ** x).tolist() == [2.0, 4.0, 16.0]
    assert (-x).tolist() == [-1.0, -2.0, -4.0]
    assert (x > 1).tolist() == [False, True, True]
    assert (x == x).dtype is md.bool
    i = md.asarray([6, 3])
    assert (i // 2).tolist() == [3, 1] and (i % 4).tolist() == [2, 3]
    assert (i & 2).tolist() == [2, 2] and (~i).tolist() == [-7, -4]


def test_unsupported_operand_returns_notimplemented():
    x = md.asarray([1.0])
    with pytest.raises(TypeError, match="unsupported operand"):
        x + "a"
    assert (x == None) is False  # noqa: E711 - identity fallback, as for any object


def test_scalars_are_weak_in_promotion():
    x = md.asarray([1, 2], dtype=md.int8)
    assert (x + 1).dtype is md.int8
    f = md.asarray([1.0], dtype=md.float32)
    assert (f * 2.5).dtype is md.float32
    assert (2.5 * f).dtype is md.float32


def test_inplace_keeps_buffer_and_bumps_version():
    x = md.asarray([1.0, 2.0], device="cpu")
    buf = x._data
    x += 1
    x.mul_(2)
    assert x._data is buf
    assert x._version == 2
    assert x.tolist() == [4.0, 6.0]


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "recorded"])
def test_inplace_ops_on_large_tensors_allocate_no_buffer(grad):
    # DESIGN.md section 8: in-place ops allocate nothing on NumPy (4M float32 elements,
    # 16 MB; NumPy reports its buffers to tracemalloc).  Recorded: an in-place op on a
    # non-leaf that requires grad, whose formula reads nothing (add_, sub_) or the other
    # operand (mul_), which already exists.
    import tracemalloc

    n = 1 << 22
    y = md.ones(n, device="cpu")
    for op in ("add_", "iadd", "add_scalar", "mul_", "sub_"):
        w = md.zeros(n, requires_grad=grad, device="cpu")
        x = w * 1 if grad else w
        buf, version = x._data, x._version
        tracemalloc.start()
        try:
            if op == "iadd":
                x += y
            elif op == "add_scalar":
                x.add_(2)
            else:
                getattr(x, op)(y)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert x._data is buf and x._version == version + 1, op
        assert peak < n, f"{op}: {peak} bytes allocated for an in-place op on {4 * n}"


def test_out_variants_of_elementwise_ops_write_into_out():
    # DESIGN.md section 8, no extra copies: on NumPy an elementwise op's out= variant
    # computes into ``out`` (it used to compute a new array and copy it), with PyTorch's
    # rules for what NumPy cannot write: a dtype out cannot hold, a resize.
    import tracemalloc

    n = 1 << 22
    x, y, o = (md.ones(n, device="cpu") for _ in range(3))
    for name, call in (("add", lambda: md.add(x, y, out=o)),
                       ("mul", lambda: md.multiply(x, y, out=o)),
                       ("exp", lambda: md.exp(x, out=o)), ("sqrt", lambda: md.sqrt(x, out=o))):
        buf, version = o._data, o._version
        tracemalloc.start()
        try:
            assert call() is o
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert o._data is buf and o._version == version + 1, name
        assert peak < n, f"{name}: {peak} bytes allocated for an out= op on {4 * n}"
    a = md.asarray([[1.0, 2.0], [3.0, 4.0]], device="cpu")
    b = md.asarray([10.0, 20.0], device="cpu")
    out = md.empty((2, 2), device="cpu")
    assert md.add(a, b, out=out).tolist() == [[11.0, 22.0], [13.0, 24.0]]
    ints = md.asarray([1, 2], device="cpu")
    assert md.add(ints, ints, out=md.empty(2, device="cpu")).tolist() == [2.0, 4.0]
    with pytest.raises(RuntimeError, match="add.out: result type float32 can't be cast to the "
                                           "desired output type int64"):
        md.add(a, b, out=md.empty((2, 2), dtype=md.int64, device="cpu"))
    small = md.empty((2,), device="cpu")
    with pytest.warns(UserWarning, match="resized"):
        assert md.add(a, b, out=small).shape == (2, 2)


def test_inplace_dtype_error_leaves_tensor_unchanged():
    x = md.asarray([1, 2])
    with pytest.raises(RuntimeError, match="result type float32 can't be cast to the desired "
                                           "output type int64"):
        x.add_(1.5)
    assert x.tolist() == [1, 2] and x._version == 0


def test_pickle_roundtrip():
    x = md.asarray([[1.0, 2.0]])
    y = pickle.loads(pickle.dumps(x))
    assert y.tolist() == x.tolist() and y.dtype is x.dtype


def test_device_objects():
    assert md.Device("cpu") is md.Device("cpu")
    assert str(md.Device("cpu")) == "cpu"
    assert repr(md.Device("cpu")) == "device(type='cpu')"
    with pytest.raises(ValueError, match="unknown device type 'nope'"):
        md.Device("nope")
    with pytest.raises(ValueError, match="invalid device string"):
        md.Device("cpu:x")
    with pytest.raises(ValueError, match="does not exist"):
        md.Device("cpu:3")


def test_meta_device_has_no_data():
    m = md.zeros((1_000_000, 1_000_000), device="meta")
    w = md.zeros((1_000_000, 10), device="meta")
    out = m @ w
    assert out.shape == (1_000_000, 10) and out.device.type == "meta"
    with pytest.raises(RuntimeError, match="meta tensors have no data"):
        out.tolist()


def test_device_mismatch_names_both_devices(device):
    a = md.asarray([1.0, 2.0])
    b = md.zeros(2, device="meta")
    with pytest.raises(ValueError, match=f"same device.*({device}.*meta|meta.*{device})"):
        md.ops.aten.add.Tensor(a, b)


def test_import_does_not_import_jax_or_cupy_or_dask_or_plum():
    code = ("import sys, mdtensor; "
            "print(','.join(m for m in ('jax', 'cupy', 'dask', 'distributed', 'torch', 'plum') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == ""


def test_namespace_basics():
    assert md.__array_api_version__ == "2025.12"
    info = md.__array_namespace_info__()
    assert info.default_dtypes()["real floating"] is md.float32
    assert md.isdtype(md.float32, "real floating")
    assert not md.isdtype(md.int8, ("real floating", "complex floating"))
    assert md.result_type(md.int8, md.int16) is md.int16
    assert md.result_type(md.asarray([1], dtype=md.int8), 1) is md.int8
    assert md.can_cast(md.int8, md.int16) and not md.can_cast(md.float64, md.float32)
    assert md.finfo(md.float32).eps == np.finfo(np.float32).eps
    assert md.iinfo(md.int8).max == 127
    with pytest.raises(TypeError, match="finfo: expected a floating-point dtype"):
        md.finfo(md.int32)


@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "empty_like"])
def test_like_factories_keep_shape_dtype_and_device(name):
    # The CPU kernels fill NumPy's empty_like; a call with dtype=/device=/requires_grad=
    # takes the composite (factory of the shape on the target device).
    base = np.arange(12, dtype=np.float64).reshape(3, 4)
    for a in (base, np.asfortranarray(base), base[:, ::2], np.float32(2.5) * np.ones(()),
              np.array([True, False]), np.array([1, 2], dtype=np.int8),
              np.array([1 + 2j], dtype=np.complex64)):
        x = md.asarray(a)
        y = getattr(md, name)(x)
        assert y.shape == x.shape and y.dtype is x.dtype and y.device == x.device
        assert y._data is not a and not shares_memory(y, x)
        if name != "empty_like":
            ref = getattr(np, name)(a)
            assert y.tolist() == ref.tolist()
    x = md.asarray([1, 2, 3])
    y = getattr(md, name)(x, dtype=md.float32, requires_grad=True)
    assert y.dtype is md.float32 and y.requires_grad and y.shape == (3,)


def test_meta_tensors_cannot_be_copied_out_but_pickle():
    # issue 25 item 12: .to("cpu") stayed on meta; numpy() advised the circular .to('cpu')
    import pickle

    m = md.empty((3, 4), device="meta")
    for call in (lambda: m.to("cpu"), m.cpu, lambda: md.asarray(m, device="cpu")):
        with pytest.raises(NotImplementedError, match="Cannot copy out of meta tensor"):
            call()
    for call in (m.numpy, m.__array__):
        with pytest.raises(TypeError, match="meta tensors have no data") as e:
            call()
        assert ".to('cpu')" not in str(e.value)
    with pytest.raises(BufferError):
        m.__dlpack__()
    back = pickle.loads(pickle.dumps(m))
    assert back.device.type == "meta" and back.shape == (3, 4) and back.dtype is md.float32
    g = pickle.loads(pickle.dumps(md.ones(2, device="meta", requires_grad=True)))
    assert g.requires_grad and g.is_meta
    assert md.ones(2).to("meta").is_meta and m.to("meta").is_meta
