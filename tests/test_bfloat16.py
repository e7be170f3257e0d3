"""md.bfloat16: PyTorch's promotion, values against torch.bfloat16, autograd, save/load,
and an ``import mdtensor`` that does not import ml_dtypes (Note [bfloat16 through ml_dtypes]
in mdtensor/_dtypes.py)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import mdtensor as md
from mdtensor import _dtypes

pytest.importorskip("ml_dtypes")

# bfloat16 keeps 8 significant bits: one rounding is a relative error of 2 ** -8
_RTOL = 2.0 ** -7

_OTHERS = [md.bool, md.int8, md.int16, md.int32, md.int64, md.uint8, md.float16, md.float32,
           md.float64, md.complex64, md.complex128, md.bfloat16]


@pytest.fixture
def bf_device(device):
    if device == "loopback":
        pytest.skip("array_api_strict (the loopback backend) has no bfloat16")
    return device


def _torch_dtype(torch, d):
    return getattr(torch, {"bool": "bool"}.get(d.name, d.name))


def test_import_mdtensor_does_not_import_ml_dtypes():
    code = ("import sys, mdtensor as md; print('ml_dtypes' in sys.modules); "
            "x = md.ones(2).bfloat16() + 1; print('ml_dtypes' in sys.modules, x.dtype)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True", "md.bfloat16"]


def test_dtype_object():
    bf = md.bfloat16
    assert (bf.name, bf.kind, bf.itemsize, bf._torch_name) == ("bfloat16", "f", 2, "BFloat16")
    assert bf.is_floating_point and not bf.is_complex
    assert repr(bf) == "md.bfloat16"
    import ml_dtypes

    assert bf.numpy == np.dtype(ml_dtypes.bfloat16)
    assert _dtypes.as_dtype("bfloat16") is bf
    assert _dtypes.as_dtype(ml_dtypes.bfloat16) is bf
    assert _dtypes.as_dtype(np.dtype(ml_dtypes.bfloat16)) is bf
    assert bf not in _dtypes.all_dtypes  # the Array API's dtypes and float16 only


def test_promotion_table_is_pytorchs(torch):
    tb = torch.bfloat16
    for other in _OTHERS:
        want = torch.promote_types(tb, _torch_dtype(torch, other))
        assert md.result_type(md.bfloat16, other).name == str(want).split(".")[1], other
        assert md.result_type(other, md.bfloat16).name == str(want).split(".")[1], other


def test_python_scalars_are_weak(torch):
    x = md.ones(2, dtype=md.bfloat16, device="cpu")  # (test_kernels_agree_with_meta: others)
    t = torch.ones(2, dtype=torch.bfloat16)
    for s in (True, 2, 0.5, 1j):
        assert (x + s).dtype.name == str((t + s).dtype).split(".")[1], s
        assert (s * x).dtype.name == str((s * t).dtype).split(".")[1], s
    assert md.result_type(md.bfloat16, 0.5) is md.bfloat16


def test_kernels_agree_with_meta(bf_device):
    x = md.asarray([1.5, 2.25, -3.0], dtype=md.bfloat16, device=bf_device)
    for other in _OTHERS:
        if other.kind == "b":
            continue
        o = md.asarray([1, 2, 3], dtype=other, device=bf_device)
        want = md.result_type(md.bfloat16, other)
        for r in (x + o, o * x, x - o, md.maximum(x, o) if other.kind != "c" else x + o,
                  md.where(x > 0, x, o), md.concat([x, o])):
            assert r.dtype is want, (other, r.dtype)
        if other.kind in "iuf":
            assert (x @ o).dtype is want
    assert md.where(x > 0, x, 0.5).dtype is md.bfloat16
    meta = md.zeros(3, dtype=md.bfloat16, device="meta")
    assert (meta + md.zeros(3, dtype=md.int64, device="meta")).dtype is md.bfloat16
    assert (meta + md.zeros(3, dtype=md.float16, device="meta")).dtype is md.float32
    assert (meta + 0.5).dtype is md.bfloat16


def _close(r, t, rtol=_RTOL):
    assert str(r.dtype).split(".")[1] == str(t.dtype).split(".")[1]
    np.testing.assert_allclose(np.asarray(r.to("cpu").float()), t.float().numpy(), rtol=rtol,
                               atol=1e-2)


@pytest.mark.parametrize("fn", ["exp", "log", "sqrt", "tanh", "sin", "abs", "neg", "floor",
                                "relu", "square", "reciprocal"])
def test_unary_values(torch, bf_device, fn):
    values = [0.25, 1.5, 2.75, 3.0, 10.0, 0.1]
    x = md.asarray(values, dtype=md.bfloat16, device=bf_device)
    t = torch.tensor(values, dtype=torch.bfloat16)
    f = getattr(md, fn, None) or getattr(md.nn.functional, fn)
    _close(f(x), getattr(torch, fn)(t))


def test_binary_reductions_matmul_values(torch, bf_device):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 8)), rng.standard_normal((8, 5))
    x, y = (md.asarray(v, device=bf_device).bfloat16() for v in (a, b))
    tx, ty = (torch.tensor(v).bfloat16() for v in (a, b))
    _close(x @ y, tx @ ty, rtol=2 ** -5)
    _close(x * 3 + 0.5, tx * 3 + 0.5)
    _close(x / (x.abs() + 1), tx / (tx.abs() + 1))
    _close(x.sum(), tx.sum(), rtol=2 ** -5)
    _close(x.mean(1), tx.mean(1), rtol=2 ** -5)
    _close(md.max(x, 0).values, tx.amax(0))
    _close(md.var(x, 0, correction=1), tx.var(0), rtol=2 ** -5)
    _close(md.std(x), tx.std(), rtol=2 ** -5)
    _close(md.linalg.vector_norm(x), torch.linalg.vector_norm(tx), rtol=2 ** -5)
    assert md.argmax(x.reshape(-1)).item() == int(tx.reshape(-1).argmax())


def test_sums_accumulate_in_float32(torch, bf_device):
    x = md.ones(1000, dtype=md.bfloat16, device=bf_device)
    t = torch.ones(1000, dtype=torch.bfloat16)
    assert x.sum().item() == t.sum().item() == 1000.0
    assert x.mean().item() == 1.0
    big = md.ones((64, 64), dtype=md.bfloat16, device=bf_device)
    assert (big @ big).dtype is md.bfloat16
    assert float((big @ big)[0, 0].item()) == 64.0


def test_casts_and_methods(torch, bf_device):
    x = md.asarray([1.0, 2.5, -3.75], device=bf_device)
    b = x.bfloat16()
    assert b.dtype is md.bfloat16
    assert x.astype(md.bfloat16).dtype is md.bfloat16
    assert x.to(md.bfloat16).dtype is md.bfloat16
    assert md.asarray([1, 2], dtype=md.bfloat16, device=bf_device).dtype is md.bfloat16
    assert md.zeros(2, dtype="bfloat16", device=bf_device).dtype is md.bfloat16
    assert b.float().dtype is md.float32
    assert b.to(md.int32).tolist() == [1, 2, -3]
    assert b.tolist() == [1.0, 2.5, -3.75]
    assert md.asarray([1.0 + 1 / 256], dtype=md.bfloat16).item() == 1.0  # rounded to 8 bits


def test_finfo(torch):
    fi, tf = md.finfo(md.bfloat16), torch.finfo(torch.bfloat16)
    assert (fi.bits, fi.eps, fi.max, fi.min, fi.smallest_normal) == (
        tf.bits, tf.eps, tf.max, tf.min, tf.smallest_normal)
    assert fi.eps == 0.0078125 and fi.dtype is md.bfloat16


def test_repr_matches_pytorch(torch):
    values = [1.5, 2.0, -3.25]
    x = md.asarray(values, dtype=md.bfloat16, device="cpu")  # (other devices are named)
    t = torch.tensor(values, dtype=torch.bfloat16)
    assert repr(x) == repr(t).replace("torch.", "md.")


def test_autograd_gradients_are_bfloat16(torch, bf_device):
    values = [0.5, 1.25, -2.0]
    x = md.asarray(values, dtype=md.bfloat16, device=bf_device).requires_grad_()
    (md.exp(x) * x).sum().backward()
    t = torch.tensor(values, dtype=torch.bfloat16, requires_grad=True)
    (torch.exp(t) * t).sum().backward()
    _close(x.grad, t.grad, rtol=2 ** -5)
    assert x.grad.dtype is md.bfloat16


@pytest.mark.parametrize("fn", [lambda m: md.linalg.inv(m), lambda m: md.linalg.svd(m),
                                lambda m: md.linalg.det(m), lambda m: md.linalg.solve(m, m),
                                lambda m: md.fft.fft(m)])
def test_ops_pytorch_refuses(bf_device, fn):
    m = md.eye(3, dtype=md.bfloat16, device=bf_device)
    with pytest.raises(TypeError, match="bfloat16 is not supported"):
        fn(m)
    with pytest.raises(TypeError, match="bfloat16 is not supported"):
        fn(md.eye(3, dtype=md.bfloat16, device="meta"))


def test_save_load_round_trip(tmp_path, bf_device):
    x = md.asarray([1.5, 2.25, -3.0, 1e30], dtype=md.bfloat16, device=bf_device)
    path = tmp_path / "bf.md"
    md.save({"x": x, "view": x[1:]}, path)
    back = md.load(path)
    assert back["x"].dtype is md.bfloat16 and back["view"].dtype is md.bfloat16
    assert back["x"].tolist() == x.tolist()
    assert back["view"].tolist() == x[1:].tolist()


def test_numpy_interop():
    """The CPU tensor's NumPy array is ml_dtypes'; NumPy reads no bfloat16 through DLPack,
    so a CPU ``from_dlpack`` of one says to copy it with ``asarray``."""
    import ml_dtypes

    x = md.asarray([1.5, -2.0], dtype=md.bfloat16, device="cpu")
    assert np.asarray(x).dtype == ml_dtypes.bfloat16
    assert md.asarray(np.array([1.0], ml_dtypes.bfloat16), device="cpu").dtype is md.bfloat16


def test_missing_ml_dtypes_is_a_clear_error():
    code = ("import sys; sys.modules['ml_dtypes'] = None\n"
            "import mdtensor as md\n"
            "try:\n    md.zeros(2, dtype=md.bfloat16)\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "ml_dtypes" in out and "mdtensor[bfloat16]" in out


def test_from_dlpack_of_a_bfloat16_array_says_what_to_do():
    jnp = pytest.importorskip("jax.numpy")
    a = jnp.ones(2, jnp.bfloat16)
    with pytest.raises(BufferError, match="bfloat16.*md.asarray"):
        md.from_dlpack(a)
    assert md.asarray(a, device="cpu").dtype is md.bfloat16


def test_functions_computed_through_float32(torch, bf_device):
    """Impls whose NumPy arithmetic would widen bfloat16 (Python floats, ml_dtypes' loops)
    compute in float32 and round, as PyTorch's CPU kernels do."""
    values = [[0.25, 1.5, 2.75], [3.0, -0.5, 0.1]]
    x = md.asarray(values, dtype=md.bfloat16, device=bf_device)
    t = torch.tensor(values, dtype=torch.bfloat16)
    _close(md.erf(x), torch.erf(t))
    _close(md.lgamma(x.abs() + 0.5), torch.lgamma(t.abs() + 0.5))
    _close(md.clamp(x, 0.2, 1.0), torch.clamp(t, 0.2, 1.0))
    _close(md.nn.functional.gelu(x), torch.nn.functional.gelu(t))
    _close(md.mm(x, x.mT), torch.mm(t, t.mT), rtol=2 ** -5)
    _close(md.bmm(x[None], x.mT[None]), torch.bmm(t[None], t.mT[None]), rtol=2 ** -5)
    inf = md.asarray([float("inf"), float("nan")], dtype=md.bfloat16, device=bf_device)
    tinf = torch.tensor([float("inf"), float("nan")], dtype=torch.bfloat16)
    _close(md.nan_to_num(inf), torch.nan_to_num(tinf))


def test_matmul_gradients_are_bfloat16(torch, bf_device):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 2))
    x = md.asarray(a, device=bf_device).bfloat16().requires_grad_()
    w = md.asarray(b, device=bf_device).bfloat16().requires_grad_()
    (x @ w).sum().backward()
    tx = torch.tensor(a).bfloat16().requires_grad_()
    tw = torch.tensor(b).bfloat16().requires_grad_()
    (tx @ tw).sum().backward()
    _close(x.grad, tx.grad, rtol=2 ** -5)
    _close(w.grad, tw.grad, rtol=2 ** -5)


def test_loopback_has_no_bfloat16():
    from _helpers import backend_installed

    if not backend_installed("loopback"):
        pytest.skip("the loopback plugin is not installed")
    with pytest.raises(TypeError, match="bfloat16"):
        md.ones(2, device="loopback").bfloat16()
    with pytest.raises(TypeError, match="loopback.*bfloat16"):
        md.ones(2, device="loopback", dtype=md.bfloat16)


def test_norms_and_distances(torch, bf_device):
    values = [[0.25, 1.5, 2.75], [3.0, -0.5, 0.1]]
    x = md.asarray(values, dtype=md.bfloat16, device=bf_device)
    t = torch.tensor(values, dtype=torch.bfloat16)
    _close(md.linalg.matrix_norm(x), torch.linalg.matrix_norm(t), rtol=2 ** -5)
    _close(md.linalg.vecdot(x, x), torch.linalg.vecdot(t, t), rtol=2 ** -5)
    # PyTorch's CPU cdist refuses bfloat16; mdtensor's computes it in float32 and rounds
    _close(md.cdist(x, x), torch.cdist(t.float(), t.float()).bfloat16(), rtol=2 ** -5)


def test_einsum_multiplies_in_float32(torch, bf_device):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    x = md.asarray(a, device=bf_device).bfloat16()
    t = torch.tensor(a).bfloat16()
    _close(md.einsum("ij,jk->ik", x, md.asarray(b, device=bf_device).bfloat16()),
           torch.einsum("ij,jk->ik", t, torch.tensor(b).bfloat16()), rtol=2 ** -5)
    assert md.einsum("ij,ij->i", x, x).dtype is md.bfloat16
    # with a wider operand the result is that dtype, as promotion says
    assert md.einsum("ij,jk->ik", x, md.asarray(b, device=bf_device,
                                               dtype=md.float32)).dtype is md.float32


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_batch_norm_in_low_precision(torch, bf_device, dtype):
    """PyTorch's CPU batch norm takes float16 and bfloat16 and computes in float32: the
    output, the saved statistics, the running statistics and the gradients keep the
    input's dtype (Note [Batch norm in low precision] in ops/normalization.py)."""
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 3, 5)) * 2 + 1).astype(np.float32)
    md_dtype, t_dtype = getattr(md, dtype), getattr(torch, dtype)
    try:
        x = md.asarray(a, device=bf_device).astype(md_dtype).requires_grad_()
    except TypeError as e:  # the Dask backend's namespace has no float16
        pytest.skip(str(e))
    w = md.ones(3, dtype=md_dtype, device=bf_device, requires_grad=True)
    rm, rv = md.zeros(3, dtype=md_dtype, device=bf_device), md.ones(3, dtype=md_dtype,
                                                                     device=bf_device)
    y = md.nn.functional.batch_norm(x, rm, rv, w, w, training=True)
    (y * y).sum().backward()
    tx = torch.tensor(a).to(t_dtype).requires_grad_()
    tw = torch.ones(3, dtype=t_dtype, requires_grad=True)
    trm, trv = torch.zeros(3, dtype=t_dtype), torch.ones(3, dtype=t_dtype)
    ty = torch.nn.functional.batch_norm(tx, trm, trv, tw, tw, training=True)
    (ty * ty).sum().backward()
    for got, want in ((y, ty), (rm, trm), (rv, trv), (x.grad, tx.grad), (w.grad, tw.grad)):
        assert got.dtype is md_dtype
        _close(got.detach(), want.detach(), rtol=2 ** -5)
    saved = md.ops.aten._native_batch_norm_legit.no_stats(x.detach(), None, None, True, 0.1,
                                                          1e-5)
    assert [s.dtype for s in saved] == [md_dtype] * 3


def test_multi_output_ops_record_bfloat16(bf_device):
    """A bfloat16 output is floating: ops with several outputs record it for backward."""
    x = md.asarray([[0.5, 2.0], [1.5, -1.0]], dtype=md.bfloat16,
                   device=bf_device).requires_grad_()
    values, _ = md.topk(x, 1, dim=1)
    assert values.grad_fn is not None
    values.sum().backward()
    assert x.grad.dtype is md.bfloat16
    assert x.grad.tolist() == [[0.0, 1.0], [1.0, 0.0]]
