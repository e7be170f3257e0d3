"""Derivative formulas the OpInfo sweep cannot check alone: complex FFTs (through a real
loss of real parameters), symmetric-input linalg (eigh, cholesky), multi-output
decompositions (every output, with gauge-invariant losses), the complex eigendecomposition
(eig/eigvals, against torch), complex cholesky/eigh/svd/qr (against torch, phase checks),
complex products and linalg (PyTorch's conjugate Wirtinger convention, against torch and
finite differences), einsum/tensordot equations (diagonals, ellipses), gathers, norms and
dropout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _helpers import NO_EINSUM, skip_on, to_numpy

import mdtensor as md
from mdtensor.testing import gradcheck, gradgradcheck

try:  # the reference for complex and tie-breaking gradients (an optional dependency)
    import torch
except ImportError:  # pragma: no cover
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is the reference")
no_einsum = skip_on("loopback", reason=NO_EINSUM)

aten = md.ops.aten
RNG = np.random.default_rng(11)


def _param(*shape):
    return md.asarray(RNG.standard_normal(shape), requires_grad=True)


def _const(*shape):
    return md.asarray(RNG.standard_normal(shape))


def _real_loss(y, a, b):
    """A real scalar from a complex (or real) ``y``, weighting both parts."""
    if y.dtype.kind == "c":
        return (md.real(y) * a).sum() + (md.imag(y) * b).sum()
    return (y * a).sum()


# -- FFTs -----------------------------------------------------------------------------------

_ONE = ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"]
_MANY = ["fftn", "ifftn", "rfftn", "irfftn"]
_REAL_IN = {"rfft", "ihfft", "rfftn"}


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("n", [None, 5, 9])
@pytest.mark.parametrize("name", _ONE)
def test_fft_gradients(name, n, norm):
    op = getattr(aten, f"fft_{name}")
    shape = (2, 6)
    probe = op(md.zeros(shape, dtype=md.complex128) if name not in _REAL_IN
               else md.zeros(shape), n, -1, norm)
    a, b = _const(*probe.shape), _const(*probe.shape)

    if name in _REAL_IN:
        def f(xr):
            return _real_loss(op(xr, n, -1, norm), a, b)
        inputs = (_param(*shape),)
    else:
        def f(xr, xi):
            return _real_loss(op(aten.add(xr, aten.mul(xi, 1j)), n, -1, norm), a, b)
        inputs = (_param(*shape), _param(*shape))
    assert gradcheck(f, inputs)


@pytest.mark.parametrize("norm", ["backward", "ortho"])
@pytest.mark.parametrize("s", [None, (3, 8)])
@pytest.mark.parametrize("name", _MANY)
def test_fftn_gradients(name, s, norm):
    op = getattr(aten, f"fft_{name}")
    shape = (3, 4)
    axes = None if s is None else (0, 1)
    real_in = name in _REAL_IN
    probe = op(md.zeros(shape) if real_in else md.zeros(shape, dtype=md.complex128), s, axes,
               norm)
    a, b = _const(*probe.shape), _const(*probe.shape)
    if real_in:
        def f(xr):
            return _real_loss(op(xr, s, axes, norm), a, b)
        inputs = (_param(*shape),)
    else:
        def f(xr, xi):
            return _real_loss(op(aten.add(xr, aten.mul(xi, 1j)), s, axes, norm), a, b)
        inputs = (_param(*shape), _param(*shape))
    assert gradcheck(f, inputs)


def test_fftshift_gradients():
    a = _const(3, 4)
    assert gradcheck(lambda x: (md.fft.fftshift(x, axes=(0,)) * a).sum(), (_param(3, 4),))
    assert gradcheck(lambda x: (md.fft.ifftshift(x) * a).sum(), (_param(3, 4),))


# -- linalg ----------------------------------------------------------------------------------


def _spd(a):
    n = a.shape[-1]
    return aten.add(aten.matmul(a, aten.matrix_transpose(a)), md.eye(n, dtype=md.float64) * n)


def test_eigh_gradients_of_both_outputs():
    c1, c2 = _const(4), _const(4, 4)

    def f(a):
        w, v = md.linalg.eigh(_spd(a))
        return (w * c1).sum() + (v * v * c2).sum()  # v*v: invariant to eigenvector signs

    assert gradcheck(f, (_param(4, 4),))
    assert gradcheck(lambda a: (md.linalg.eigvalsh(_spd(a)) * c1).sum(), (_param(4, 4),))


def _eig_loss(lib, which):
    """A real loss of eig's outputs that depends neither on the eigenvalues' order nor on
    the eigenvectors' phases: sum f(L_i) + sum_ij w_i |V_ij|^2 Re(L_j)."""
    real, imag, conj = ((md.real, md.imag, md.conj) if lib is md else
                        (torch.real, torch.imag, torch.conj))

    def loss(a, w):
        if which == "eigvals":
            L = lib.linalg.eigvals(a)
        else:
            L, V = lib.linalg.eig(a)
        total = (real(L) ** 2 + real(L) * imag(L) ** 2 + 0.3 * imag(L)).sum()
        if which == "eigvectors":
            total = total * 0.0
        if which != "eigvals":
            total = total + (real(V * conj(V)) * w * lib.unsqueeze(real(L), -2)).sum()
        return total

    return loss


@needs_torch
@pytest.mark.parametrize("which", ["eigvals", "eig", "eigvectors"])
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_gradients_match_torch(which, shape, complex_input):
    a = RNG.standard_normal(shape)
    if complex_input:
        a = a + 1j * RNG.standard_normal(shape)
    w = RNG.standard_normal(shape[:-1] + (1,))
    got = _md_grad(lambda x: _eig_loss(md, which)(x, md.asarray(w)), a)
    want = _torch_grad(lambda x: _eig_loss(torch, which)(x, torch.tensor(w)), a)
    assert got[0].dtype == a.dtype
    np.testing.assert_allclose(got[0], want[0], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("which", ["eigvals", "eig"])
def test_eig_gradcheck(which):
    w = _const(4, 1)
    loss = _eig_loss(md, which)
    assert gradcheck(lambda a: loss(a, w), (_param(4, 4),))
    # a complex input through its real and imaginary parts
    assert gradcheck(lambda xr, xi: loss(aten.add(xr, aten.mul(xi, 1j)), w),
                     (_param(4, 4), _param(4, 4)))


def test_eig_gradient_of_a_phase_dependent_loss_is_refused():
    a = md.asarray(RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3)),
                   requires_grad=True)
    _, v = md.linalg.eig(a)
    with pytest.raises(RuntimeError, match=r"linalg_eig: .*e\^\{i phi\}"):
        md.imag(v).sum().backward()


def test_cholesky_gradients():
    c = _const(3, 3)
    assert gradcheck(lambda a: (md.linalg.cholesky(_spd(a)) * c).sum(), (_param(3, 3),))
    assert gradcheck(lambda a: (aten.linalg_cholesky(_spd(a), upper=True) * c).sum(),
                     (_param(3, 3),))


@pytest.mark.parametrize("shape", [(4, 4), (5, 3), (3, 5), (2, 4, 3)])
def test_svd_gradients_of_every_output(shape):
    k = min(shape[-2:])
    cu = _const(*shape[:-1], k)
    cs = _const(*shape[:-2], k)
    cv = _const(*shape[:-2], k, shape[-1])

    def f(a):
        u, s, vh = md.linalg.svd(a, full_matrices=False)
        return (u * u * cu).sum() + (s * cs).sum() + (vh * vh * cv).sum()

    assert gradcheck(f, (_param(*shape),))
    assert gradcheck(lambda a: (md.linalg.svdvals(a) * cs).sum(), (_param(*shape),))


def test_full_svd_of_a_non_square_matrix_through_u_is_refused():
    a = _param(4, 3)
    u, s, vh = md.linalg.svd(a)
    with pytest.raises(NotImplementedError, match="linalg_svd: .*full_matrices=False"):
        u.sum().backward()


@pytest.mark.parametrize("shape", [(4, 4), (5, 3)])
def test_qr_gradients(shape):
    cq, cr = _const(shape[0], shape[1]), _const(shape[1], shape[1])

    def f(a):
        q, r = md.linalg.qr(a)
        return (q * cq).sum() + (r * cr).sum()

    assert gradcheck(f, (_param(*shape),))


def test_slogdet_pinv_matrix_power_gradients():
    a = md.asarray(RNG.standard_normal((3, 3)) + 3 * np.eye(3), requires_grad=True)
    assert gradcheck(lambda x: md.linalg.slogdet(x)[1], (a,))
    c = _const(3, 3)
    assert gradcheck(lambda x: (md.linalg.pinv(x) * c).sum(), (a,))
    tall = _param(5, 3)
    assert gradcheck(lambda x: (md.linalg.pinv(x) * _c53t).sum(), (tall,))
    for n in (0, 1, 2, 4, -1, -2):
        assert gradcheck(lambda x, n=n: (md.linalg.matrix_power(x, n) * c).sum(), (a,))
    # log|det| of a singular matrix is -inf: no gradient, and the error names slogdet (it
    # named the linalg.inv of the formula)
    singular = md.asarray([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    with pytest.raises(ValueError, match="^linalg.slogdet: no gradient at a singular"):
        md.linalg.slogdet(singular)[1].backward()


_c53t = _const(3, 5)


@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, np.inf, -np.inf])
def test_matrix_norm_gradients(ord):
    a = _param(3, 4)
    assert gradcheck(lambda x: md.linalg.matrix_norm(x, ord=ord), (a,))
    c = _const(2, 1, 1)
    assert gradcheck(lambda x: (md.linalg.matrix_norm(x, ord=ord, keepdims=True) * c).sum(),
                     (_param(2, 3, 3),))


def _torch_grad(fn, *arrays):
    ts = [torch.tensor(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [to_numpy(t.grad) for t in ts]


def _md_grad(fn, *arrays):
    ts = [md.asarray(a, requires_grad=True) for a in arrays]
    fn(*ts).backward()
    return [to_numpy(t.grad) for t in ts]


@needs_torch
@pytest.mark.parametrize("ord", [1, -1, np.inf, -np.inf])
def test_matrix_norm_abs_sum_gradients_match_torch(ord):
    # Ties (columns 0 and 1 of a, rows 0 and 1 of its transpose) split the gradient evenly,
    # as PyTorch's amax/amin; a complex input gets g * sgn(x).
    tied = np.array([[1.0, -2.0, 0.5], [2.0, 1.0, -0.25]])
    cplx = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    for a in (tied, tied.T.copy(), cplx):
        got = _md_grad(lambda x: md.linalg.matrix_norm(x, ord=ord), a)
        want = _torch_grad(lambda x: torch.linalg.matrix_norm(x, ord=ord), a)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ord", [2, 1, 3, 0.5, float("inf"), -float("inf")])
def test_vector_norm_gradients(ord):
    x = md.asarray(RNG.standard_normal((3, 4)) + 0.1, requires_grad=True)
    c = _const(3)
    assert gradcheck(lambda t: (md.linalg.vector_norm(t, axis=1, ord=ord) * c).sum(), (x,))


def test_cross_and_diagonal_gradients():
    c = _const(4, 3)
    assert gradcheck(lambda a, b: (md.linalg.cross(a, b) * c).sum(),
                     (_param(4, 3), _param(4, 3)))
    for off in (0, 1, -2):
        assert gradcheck(lambda a, off=off: (md.linalg.diagonal(a, offset=off) ** 2).sum(),
                         (_param(2, 3, 4),))


# -- einsum, tensordot ------------------------------------------------------------------------


@no_einsum
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij->i", [(2, 3)]),
    ("i,i->", [(4,), (4,)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij,kj", [(2, 3), (4, 3)]),  # implicit output
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("ijk->", [(2, 3, 2)]),
    ("ij,k->ijk", [(2, 3), (2,)]),
    # repeated indices within an operand (diagonals)
    ("ii->i", [(3, 3)]),
    ("ii->", [(3, 3)]),
    ("ii", [(3, 3)]),  # implicit: the trace
    ("iij->j", [(3, 3, 2)]),
    ("iji->j", [(2, 3, 2)]),
    ("iii->i", [(2, 2, 2)]),
    ("ij,jj->i", [(2, 3), (3, 3)]),
    ("ii,i->", [(3, 3), (3,)]),
    # ellipses, broadcasting between operands, size-1 labelled dimensions
    ("...ij,...jk->...ik", [(2, 2, 3), (3, 4)]),
    ("...ii->...i", [(2, 3, 3)]),
    ("i...,i...", [(2, 3), (2, 1)]),  # implicit with '...'
    ("...,...", [(2, 3), (3,)]),
    ("b...i,b...i->b...", [(2, 3, 4), (2, 1, 4)]),
    ("i,...->...i", [(3,), ()]),
    ("ij,ij->", [(2, 3), (1, 3)]),
])
def test_einsum_gradients(eq, shapes):
    params = tuple(_param(*s) for s in shapes)

    def f(*ts):
        return (md.einsum(eq, list(ts)) ** 2).sum()

    assert gradcheck(f, params)
    if torch is None:
        return
    arrays = [to_numpy(p.detach()) for p in params]
    got = _md_grad(f, *arrays)
    want = _torch_grad(lambda *ts: (torch.einsum(eq, *ts) ** 2).sum(), *arrays)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@no_einsum
@pytest.mark.parametrize("eq,shapes", [("ii->i", [(3, 3)]), ("...ij,...j", [(2, 3, 3), (3,)])])
def test_einsum_second_derivatives(eq, shapes):
    params = tuple(_param(*s) for s in shapes)
    assert gradgradcheck(lambda *ts: (md.einsum(eq, list(ts)) ** 2).sum(), params)


@no_einsum
@needs_torch
@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ii,i->i", [(3, 3), (3,)]),
    ("...ij,...j", [(2, 3, 3), (3,)]),
])
def test_complex_einsum_gradients_match_torch(eq, shapes):
    arrays = [RNG.standard_normal(s) + 1j * RNG.standard_normal(s) for s in shapes]
    arrays[-1] = arrays[-1].real.copy()  # a real operand gets the real part

    def f(*ts):
        o = md.einsum(eq, list(ts))
        return md.real(o * md.conj(o)).sum()

    def ref(*ts):  # torch.einsum wants one dtype: promote the real operand first
        o = torch.einsum(eq, *(t.to(torch.complex128) for t in ts))
        return (o * o.conj()).real.sum()

    for g, w in zip(_md_grad(f, *arrays), _torch_grad(ref, *arrays)):
        assert g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("axes", [2, 1, 0, ([0, 2], [1, 0])])
def test_tensordot_gradients(axes):
    a = _param(2, 3, 4)
    b = _param(4, 2, 5) if axes != 2 else _param(3, 4, 2)
    if axes == 1:
        b = _param(4, 2)
    if axes == 0:
        b = _param(2,)
    assert gradcheck(lambda x, y: (md.tensordot(x, y, axes=axes) ** 2).sum(), (a, b))


# -- complex products and linalg: PyTorch's conjugate Wirtinger convention ---------------------
# For a complex input the gradient is the conjugate Wirtinger derivative: a product's formula
# takes the conjugate of the other factor (matmul: ga = g @ b^H, gb = a^H @ g), and md's
# vecdot conjugates its first argument in the forward (Array API vecdot; md.dot is torch.dot,
# which does not).  A real operand of a mixed product gets the real part.


def _cplx(*shape):
    return RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)


def _cplx_square(*shape):  # well conditioned
    return _cplx(*shape) + 3 * np.eye(shape[-1])


def _to_complex(t, *others):  # torch products want one dtype
    return t.to(others[0].dtype)


def _slogdet_md(a):
    s, la = md.linalg.slogdet(a)
    return s * (2 + 1j) + la * 0.7


def _slogdet_torch(th, a):
    s, la = th.linalg.slogdet(a)
    return s * (2 + 1j) + la * 0.7


# name -> (md function, torch function (torch module first), input factory)
_COMPLEX_PRODUCTS = {
    "matmul": (md.matmul, lambda th, a, b: th.matmul(a, b), lambda: [_cplx(3, 4), _cplx(4, 2)]),
    "matmul-vec-mat": (md.matmul, lambda th, a, b: th.matmul(a, b),
                       lambda: [_cplx(4), _cplx(2, 4, 3)]),
    "matmul-mat-vec": (md.matmul, lambda th, a, b: th.matmul(a, b),
                       lambda: [_cplx(2, 3, 4), _cplx(4)]),
    "matmul-vec-vec": (md.matmul, lambda th, a, b: th.matmul(a, b),
                       lambda: [_cplx(4), _cplx(4)]),
    "matmul-broadcast": (md.matmul, lambda th, a, b: th.matmul(a, b),
                         lambda: [_cplx(2, 1, 3, 4), _cplx(5, 4, 2)]),
    "matmul-real-complex": (md.matmul, lambda th, a, b: th.matmul(_to_complex(a, b), b),
                            lambda: [RNG.standard_normal((3, 4)), _cplx(4, 2)]),
    "linalg.matmul": (md.linalg.matmul, lambda th, a, b: th.linalg.matmul(a, b),
                      lambda: [_cplx(2, 3, 4), _cplx(4, 5)]),
    "mm": (lambda a, b: a.mm(b), lambda th, a, b: th.mm(a, b),
           lambda: [_cplx(2, 3), _cplx(3, 4)]),
    "bmm": (lambda a, b: a.bmm(b), lambda th, a, b: th.bmm(a, b),
            lambda: [_cplx(2, 2, 3), _cplx(2, 3, 4)]),
    "dot": (md.dot, lambda th, a, b: th.dot(a, b), lambda: [_cplx(5), _cplx(5)]),
    "vecdot": (md.vecdot, lambda th, a, b: th.linalg.vecdot(a, b),
               lambda: [_cplx(2, 3), _cplx(2, 3)]),
    "vecdot-broadcast": (md.linalg.vecdot, lambda th, a, b: th.linalg.vecdot(a, b),
                         lambda: [_cplx(3), _cplx(2, 3)]),
    "vecdot-axis": (lambda a, b: md.vecdot(a, b, axis=-2),
                    lambda th, a, b: th.linalg.vecdot(a, b, dim=-2),
                    lambda: [_cplx(3, 4), _cplx(2, 3, 4)]),
    "vecdot-real-complex": (md.vecdot, lambda th, a, b: th.linalg.vecdot(_to_complex(a, b), b),
                            lambda: [RNG.standard_normal((2, 3)), _cplx(2, 3)]),
    "outer": (md.outer, lambda th, a, b: th.outer(a, b), lambda: [_cplx(3), _cplx(4)]),
    "linalg.outer": (md.linalg.outer, lambda th, a, b: th.outer(a, b),
                     lambda: [_cplx(3), _cplx(4)]),
    "tensordot": (md.tensordot, lambda th, a, b: th.tensordot(a, b, dims=2),
                  lambda: [_cplx(2, 3, 4), _cplx(3, 4, 5)]),
    "tensordot-pairs": (lambda a, b: md.tensordot(a, b, axes=([0, 2], [1, 0])),
                        lambda th, a, b: th.tensordot(a, b, dims=([0, 2], [1, 0])),
                        lambda: [_cplx(2, 3, 4), _cplx(4, 2, 5)]),
    "inv": (md.linalg.inv, lambda th, a: th.linalg.inv(a), lambda: [_cplx_square(2, 3, 3)]),
    "det": (md.linalg.det, lambda th, a: th.linalg.det(a), lambda: [_cplx(2, 3, 3)]),
    "slogdet": (_slogdet_md, _slogdet_torch, lambda: [_cplx(2, 3, 3)]),
    "solve": (md.linalg.solve, lambda th, a, b: th.linalg.solve(a, b),
              lambda: [_cplx_square(2, 3, 3), _cplx(2, 3, 2)]),
    "solve-vector": (md.linalg.solve, lambda th, a, b: th.linalg.solve(a, b),
                     lambda: [_cplx_square(3, 3), _cplx(3)]),
    "solve-real-complex": (md.linalg.solve,
                           lambda th, a, b: th.linalg.solve(_to_complex(a, b), b),
                           lambda: [_cplx_square(3, 3).real.copy(), _cplx(3, 2)]),
    "matrix_power": (lambda a: md.linalg.matrix_power(a, 3),
                     lambda th, a: th.linalg.matrix_power(a, 3), lambda: [_cplx(3, 3)]),
    "matrix_power-negative": (lambda a: md.linalg.matrix_power(a, -2),
                              lambda th, a: th.linalg.matrix_power(a, -2),
                              lambda: [_cplx_square(3, 3)]),
    "pinv": (md.linalg.pinv, lambda th, a: th.linalg.pinv(a), lambda: [_cplx(3, 5)]),
    "cross": (md.linalg.cross, lambda th, a, b: th.linalg.cross(a, b),
              lambda: [_cplx(4, 3), _cplx(4, 3)]),
}


@pytest.mark.parametrize("name", list(_COMPLEX_PRODUCTS))
def test_complex_product_gradients_match_torch(name):
    th = pytest.importorskip("torch")
    md_fn, torch_fn, make = _COMPLEX_PRODUCTS[name]
    arrays = make()
    ts = [th.tensor(a, requires_grad=True) for a in arrays]
    out = torch_fn(th, *ts)
    seed = _cplx(*out.shape) if out.is_complex() else RNG.standard_normal(tuple(out.shape))
    want = th.autograd.grad(out, ts, th.tensor(seed))
    xs = [md.asarray(a, requires_grad=True) for a in arrays]
    y = md_fn(*xs)
    np.testing.assert_allclose(to_numpy(y.detach()), to_numpy(out.detach()), rtol=1e-10,
                               atol=1e-12)
    got = md.autograd.grad([y], xs, [md.asarray(seed)])
    for g, w in zip(got, want):
        w = to_numpy(w.resolve_conj())
        assert to_numpy(g).dtype == w.dtype
        np.testing.assert_allclose(to_numpy(g), w, rtol=1e-9, atol=1e-11)


def _abs2_loss(fn, *xs):
    y = fn(*xs)
    return md.real(y * md.conj(y)).sum() if y.dtype.kind == "c" else (y * y).sum()


def _wirtinger_fd(fn, arrays, i, eps=1e-6):
    """Central differences of the real loss sum(|fn(x)|^2) along the real and imaginary
    parts of argument i: dL/dRe + 1j dL/dIm, the gradient PyTorch's convention gives."""
    def loss(k, step):
        xs = list(arrays)
        x = xs[i].astype(np.result_type(xs[i], step)).copy()
        x.reshape(-1)[k] += step
        xs[i] = x
        return float(to_numpy(_abs2_loss(fn, *(md.asarray(a) for a in xs))))

    base = arrays[i]
    grad = np.zeros(base.shape, dtype=base.dtype)
    for k in range(base.size):
        d = (loss(k, eps) - loss(k, -eps)) / (2 * eps)
        if base.dtype.kind == "c":
            d = d + 1j * (loss(k, 1j * eps) - loss(k, -1j * eps)) / (2 * eps)
        grad.reshape(-1)[k] = d
    return grad


@pytest.mark.parametrize("name", list(_COMPLEX_PRODUCTS))
def test_complex_product_gradients_finite_differences(name):
    # torch-free: sum(|f(x)|^2) seeds each formula with the complex gradient 2 f(x)
    md_fn, _, make = _COMPLEX_PRODUCTS[name]
    arrays = make()
    xs = [md.asarray(a, requires_grad=True) for a in arrays]
    got = md.autograd.grad([_abs2_loss(md_fn, *xs)], xs)
    for i, g in enumerate(got):
        assert to_numpy(g).dtype == arrays[i].dtype
        np.testing.assert_allclose(to_numpy(g), _wirtinger_fd(md_fn, arrays, i), rtol=1e-6,
                                   atol=1e-6)


_SECOND = ["matmul", "matmul-vec-vec", "mm", "bmm", "dot", "vecdot-broadcast", "outer",
           "tensordot-pairs", "inv", "det", "solve", "solve-vector", "cross"]


@pytest.mark.parametrize("name", _SECOND)
def test_product_second_derivatives(name):
    md_fn, _, make = _COMPLEX_PRODUCTS[name]
    arrays = make()
    # real inputs (the formulas must still differentiate twice) ...
    real = tuple(md.asarray(a.real.copy(), requires_grad=True) for a in arrays)
    assert gradgradcheck(lambda *xs: md_fn(*xs) ** 2, real)
    # ... and complex ones, through their real and imaginary parts
    parts = tuple(md.asarray(p.copy(), requires_grad=True) for a in arrays
                  for p in (a.real, a.imag))

    def f(*ps):
        xs = [aten.add(ps[k], aten.mul(ps[k + 1], 1j)) for k in range(0, len(ps), 2)]
        y = md_fn(*xs)
        return md.real(y * md.conj(y))

    assert gradgradcheck(f, parts)


def test_eig_second_derivatives_of_a_complex_input():
    # they go through the complex matmul and solve formulas
    w = _const(3, 1)
    loss = _eig_loss(md, "eig")
    a = _cplx(3, 3)
    parts = (md.asarray(a.real, requires_grad=True), md.asarray(a.imag, requires_grad=True))
    assert gradgradcheck(lambda xr, xi: loss(aten.add(xr, aten.mul(xi, 1j)), w), parts)


@pytest.mark.parametrize("which", ["eigvals", "eig"])
@pytest.mark.parametrize("complex_input", [False, True])
def test_eig_second_derivatives_match_torch(which, complex_input):
    th = pytest.importorskip("torch")
    a = RNG.standard_normal((4, 4))
    if complex_input:
        a = a + 1j * RNG.standard_normal((4, 4))
    w = RNG.standard_normal((4, 1))
    v = _cplx(4, 4) if complex_input else RNG.standard_normal((4, 4))

    x = md.asarray(a, requires_grad=True)  # <grad L, v>'s gradient (a Hessian product)
    g, = md.autograd.grad([_eig_loss(md, which)(x, md.asarray(w))], [x], create_graph=True)
    got, = md.autograd.grad([md.real(g * md.conj(md.asarray(v))).sum()], [x])
    t = th.tensor(a, requires_grad=True)
    g, = th.autograd.grad(_eig_loss(th, which)(t, th.tensor(w)), [t], create_graph=True)
    want, = th.autograd.grad(th.real(g * th.conj(th.tensor(v))).sum(), [t])
    np.testing.assert_allclose(to_numpy(got), to_numpy(want.resolve_conj()), rtol=1e-8,
                               atol=1e-10)


# -- complex cholesky, eigh/eigvalsh, svd, qr: PyTorch's formulas with conjugate transposes ---
# Each loss is real and invariant to the eigenvector / singular vector phases; cholesky and
# eigh get a Hermitian positive-definite B B^H + n I built from a free complex B.


def _lib_mH(lib, x):
    return x.mH if lib is not md else md.conj(md.matrix_transpose(x))


def _lib_t(lib, a):
    return md.asarray(a) if lib is md else torch.tensor(a)


def _hpd(lib, b):
    n = b.shape[-1]
    return lib.matmul(b, _lib_mH(lib, b)) + n * lib.eye(n, dtype=lib.float64)


def _cholesky_loss(upper):
    def loss(lib, a, c):
        if lib is md:
            L = aten.linalg_cholesky(a, upper=upper)
        else:
            L = torch.linalg.cholesky(a, upper=upper)
        L = L * _lib_t(lib, c)
        return lib.real(L).sum() + 0.5 * lib.imag(L).sum()
    return loss


def _eigh_loss(which):
    def loss(lib, a, c):
        if which == "eigvalsh":
            return (lib.linalg.eigvalsh(a) ** 2 * _lib_t(lib, c[..., 0, :])).sum()
        w, v = lib.linalg.eigh(a)
        total = (lib.real(v * lib.conj(v)) * _lib_t(lib, c)).sum()  # |V|^2: phase-free
        if which == "eigh":
            total = total + (w * _lib_t(lib, c[..., 0, :])).sum() + (w ** 2).sum() * 0.1
        return total
    return loss


def _svd_loss(which):
    def loss(lib, a, cu, cs, cv, cw):
        u, s, vh = lib.linalg.svd(a, full_matrices=False)
        total = (s * _lib_t(lib, cs)).sum()
        if which in ("all", "u"):
            total = total + (lib.real(u * lib.conj(u)) * _lib_t(lib, cu)).sum()
        if which in ("all", "vh"):
            total = total + (lib.real(vh * lib.conj(vh)) * _lib_t(lib, cv)).sum()
        if which in ("all", "uvh"):  # U diag(cs) Vh: each phase cancels between U and Vh
            usv = lib.matmul(u * lib.unsqueeze(_lib_t(lib, cs), -2), vh)
            total = total + lib.real(usv * _lib_t(lib, cw)).sum()
        return total
    return loss


def _qr_loss(lib, a, cq, cr):
    q, r = lib.linalg.qr(a)
    return (lib.real(q * _lib_t(lib, cq)).sum() + lib.real(r * _lib_t(lib, cr)).sum()
            + lib.imag(r * _lib_t(lib, cr)).sum() * 0.3)


def _svd_consts(shape):
    k = min(shape[-2:])
    return (RNG.standard_normal(shape[:-1] + (k,)), RNG.standard_normal(shape[:-2] + (k,)),
            RNG.standard_normal(shape[:-2] + (k, shape[-1])), _cplx(*shape))


# name -> (loss(lib, a, *consts), input shape, constants, whether a is B B^H + n I)
_COMPLEX_DECOMPOSITIONS = {
    "cholesky": (_cholesky_loss(False), (4, 4), [_cplx(4, 4)], True),
    "cholesky-upper": (_cholesky_loss(True), (2, 3, 3), [_cplx(2, 3, 3)], True),
    "eigh": (_eigh_loss("eigh"), (4, 4), [RNG.standard_normal((4, 4))], True),
    "eigh-vectors": (_eigh_loss("eigvectors"), (2, 3, 3), [RNG.standard_normal((2, 3, 3))],
                     True),
    "eigvalsh": (_eigh_loss("eigvalsh"), (2, 4, 4), [RNG.standard_normal((2, 4, 4))], True),
    **{f"svd-{which}-{'x'.join(map(str, shape))}":
       (_svd_loss(which), shape, _svd_consts(shape), False)
       for which in ("all", "u", "vh", "uvh")
       for shape in ((4, 4), (5, 3), (3, 5), (2, 4, 3))},
    "qr": (_qr_loss, (4, 4), [_cplx(4, 4), _cplx(4, 4)], False),
    "qr-tall": (_qr_loss, (2, 5, 3), [_cplx(2, 5, 3), _cplx(2, 3, 3)], False),
}


def _decomposition_fn(name, lib):
    loss, _, consts, hermitian = _COMPLEX_DECOMPOSITIONS[name]
    return lambda x: loss(lib, _hpd(lib, x) if hermitian else x, *consts)


@pytest.mark.parametrize("name", list(_COMPLEX_DECOMPOSITIONS))
def test_complex_decomposition_gradients_match_torch(name):
    th = pytest.importorskip("torch")
    a = _cplx(*_COMPLEX_DECOMPOSITIONS[name][1])
    x = md.asarray(a, requires_grad=True)
    _decomposition_fn(name, md)(x).backward()
    t = th.tensor(a, requires_grad=True)
    _decomposition_fn(name, th)(t).backward()
    assert to_numpy(x.grad).dtype == np.complex128
    np.testing.assert_allclose(to_numpy(x.grad), to_numpy(t.grad), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", ["cholesky", "cholesky-upper", "eigh", "eigh-vectors",
                                  "eigvalsh"])
def test_complex_hermitian_input_gradients(name):
    # Through the Hermitian input itself: md's gradient is Hermitian, and it is the
    # Hermitian part of torch's (torch's cholesky gradient may add a skew-Hermitian part,
    # which is orthogonal to every Hermitian perturbation).
    th = pytest.importorskip("torch")
    loss, shape, consts, _ = _COMPLEX_DECOMPOSITIONS[name]
    b = _cplx(*shape)
    a = b @ np.conj(np.swapaxes(b, -1, -2)) + shape[-1] * np.eye(shape[-1])
    x = md.asarray(a, requires_grad=True)
    loss(md, x, *consts).backward()
    t = th.tensor(a, requires_grad=True)
    loss(th, t, *consts).backward()
    got, want = to_numpy(x.grad), to_numpy(t.grad)
    np.testing.assert_allclose(got, np.conj(np.swapaxes(got, -1, -2)), rtol=0, atol=1e-12)
    want = (want + np.conj(np.swapaxes(want, -1, -2))) / 2
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-10)


def _through_parts(name):
    f = _decomposition_fn(name, md)
    a = _cplx(*_COMPLEX_DECOMPOSITIONS[name][1])
    parts = (md.asarray(a.real.copy(), requires_grad=True),
             md.asarray(a.imag.copy(), requires_grad=True))
    return (lambda xr, xi: f(aten.add(xr, aten.mul(xi, 1j)))), parts


@pytest.mark.parametrize("name", ["cholesky", "cholesky-upper", "eigh", "eigh-vectors",
                                  "eigvalsh", "svd-all-4x4", "svd-u-5x3", "svd-vh-3x5",
                                  "svd-uvh-2x4x3", "qr", "qr-tall"])
def test_complex_decomposition_gradcheck(name):
    # torch-free: a complex input through its real and imaginary parts
    assert gradcheck(*_through_parts(name))


@pytest.mark.parametrize("name", ["cholesky", "eigh", "svd-uvh-4x4", "qr"])
def test_complex_decomposition_second_derivatives(name):
    assert gradgradcheck(*_through_parts(name))


def test_complex_eigh_and_svd_refuse_phase_dependent_losses():
    b = _cplx(3, 3)
    a = md.asarray(b @ b.conj().T + 3 * np.eye(3), requires_grad=True)
    _, v = md.linalg.eigh(a)
    with pytest.raises(RuntimeError, match=r"linalg_eigh: .*e\^\{i phi\}"):
        md.imag(v).sum().backward()
    x = md.asarray(_cplx(4, 3), requires_grad=True)
    for pick in ("u", "vh", "both"):  # through U, Vh, or both (the phases add up)
        u, s, vh = md.linalg.svd(x, full_matrices=False)
        if pick == "u":
            loss = md.imag(u).sum()
        elif pick == "vh":
            loss = md.real(vh).sum()
        else:  # u[0, 0] * vh[0, 0] would be phase-free: U e^{i phi}, Vh e^{-i phi}
            loss = md.imag(u[0, 0] * md.conj(vh[0, 0]))
        with pytest.raises(RuntimeError, match=r"linalg_svd: .*e\^\{i phi\}"):
            loss.backward()
    # ... while phase-free ones go through: |U|^2 and U diag(s) Vh
    u, s, vh = md.linalg.svd(x, full_matrices=False)
    (md.real(u * md.conj(u)).sum() + md.real(md.matmul(u * md.unsqueeze(s, -2), vh)).sum()
     ).backward()
    assert np.isfinite(to_numpy(x.grad)).all()


# -- gathers, broadcasting, complex parts ---------------------------------------------------


def test_index_select_and_repeat_interleave_gradients():
    idx = md.asarray([2, 0, 2])
    assert gradcheck(lambda x: (aten.index_select(x, 1, idx) ** 2).sum(), (_param(2, 3),))
    assert gradcheck(lambda x: (md.repeat_interleave(x, 2, axis=1) ** 2).sum(),
                     (_param(2, 3),))
    assert gradcheck(lambda x: (md.repeat_interleave(x, md.asarray([1, 0, 3])) ** 2).sum(),
                     (_param(3),))
    assert gradcheck(lambda x: (md.repeat_interleave(x, 2) ** 2).sum(), (_param(2, 2),))


def test_diff_gradients_with_prepend_and_append():
    assert gradcheck(lambda x: (md.diff(x, n=2, axis=0) ** 2).sum(), (_param(5, 3),))
    p, q = _const(2, 1), _const(2, 2)
    assert gradcheck(lambda x: (md.diff(x, axis=-1, prepend=p, append=q) ** 2).sum(),
                     (_param(2, 4),))
    # Keyword-only Tensor arguments get edges too (Note [Keyword-only Tensor arguments])
    assert gradcheck(lambda x, p, q: (md.diff(x, axis=1, n=2, prepend=p, append=q) ** 2)
                     .sum(), (_param(2, 4), _param(2, 1), _param(2, 2)))
    assert gradcheck(lambda x, q: (md.diff(x, axis=0, append=q) ** 2).sum(),
                     (_param(3, 2), _param(1, 2)))
    assert gradcheck(lambda x, s: (md.diff(x, prepend=s) ** 2).sum(),  # 0-d: broadcast
                     (_param(4), _param()))
    assert gradgradcheck(lambda x, p: (md.diff(x, prepend=p) ** 3).sum(),
                         (_param(2, 3), _param(2, 1)))
    # Only what requires grad gets a gradient; a constant prepend changes nothing
    x, p = _param(2, 4), _param(2, 1)
    md.diff(x, prepend=_const(2, 1), append=p).sum().backward()
    assert x.grad is not None and p.grad is not None
    assert p.grad.tolist() == [[1.0], [1.0]]  # d/dp of sum(diff([..., p])) = 1
    # n=0 is the input itself, prepend unused: its gradient is g (it narrowed past the end)
    x, p = _param(0), _param(1)
    md.diff(x, n=0, prepend=p).sum().backward()
    assert x.grad.shape == (0,) and p.grad is None


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_and_broadcast_arrays_gradients(indexing):
    c = _const(3, 4, 2) if indexing == "ij" else _const(4, 3, 2)
    assert gradcheck(lambda a, b, d: sum((t * c).sum() for t in
                                         md.meshgrid(a, b, d, indexing=indexing)),
                     (_param(3), _param(4), _param(2)))
    assert gradcheck(lambda a, b: sum((t ** 2).sum() for t in md.broadcast_arrays(a, b)),
                     (_param(3, 1), _param(4)))


def test_real_and_imag_gradients():
    a, b = _const(3), _const(3)

    def f(xr, xi):
        z = aten.add(xr, aten.mul(xi, 1j))
        return (md.real(z) * a).sum() + (md.imag(z * z) * b).sum()

    assert gradcheck(f, (_param(3), _param(3)))


def test_dropout_gradient_uses_the_same_mask():
    md.random.manual_seed(0)
    x = md.asarray(RNG.uniform(1.0, 2.0, (50,)), requires_grad=True)
    y = md.dropout(x, 0.25) if hasattr(md, "dropout") else aten.dropout(x, 0.25)
    y.sum().backward()
    kept = to_numpy(y != 0)
    np.testing.assert_allclose(to_numpy(x.grad), kept / 0.75)
    assert 0 < kept.sum() < 50


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "softmax", "log_softmax"])
def test_fused_backward_ops_differentiate_twice(name):
    """Note [Backward ops]: tanh/sigmoid/softmax/log_softmax backward run as one op each,
    and second derivatives go through that op's own formula."""
    rng = np.random.default_rng(0)
    x = md.asarray(rng.uniform(-1, 1, (3, 4)), requires_grad=True)
    fn = (lambda t: getattr(md, name)(t, dim=-1)) if "softmax" in name else getattr(md, name)
    w = md.asarray(rng.uniform(-1, 1, (3, 4)))
    assert md.testing.gradgradcheck(lambda t: (fn(t) * w).sum(), [x])
    seen = []

    class Log(md.DispatchMode):
        def __md_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func.name)
            return func(*args, **(kwargs or {}))

    y = fn(x).sum()
    with Log():
        y.backward()
    fused = {"tanh": "aten::tanh_backward", "sigmoid": "aten::sigmoid_backward",
             "softmax": "aten::_softmax_backward_data",
             "log_softmax": "aten::_log_softmax_backward_data"}[name]
    assert fused in seen


@pytest.mark.parametrize("name", ["exp", "sqrt", "tanh"])
def test_second_derivatives_flow_through_saved_outputs(name):
    """Note [Saved outputs]: a formula reading the op's output differentiates through it
    with create_graph=True (the saved alias gets the node as its history)."""
    x = md.asarray(np.array([0.3, 0.7]), requires_grad=True)
    g, = md.autograd.grad(getattr(md, name)(x).sum(), [x], create_graph=True)
    g2, = md.autograd.grad(g.sum(), [x])
    t = np.array([0.3, 0.7])
    want = {"exp": np.exp(t), "sqrt": -0.25 * t ** -1.5,
            "tanh": -2 * np.tanh(t) * (1 - np.tanh(t) ** 2)}[name]
    np.testing.assert_allclose(to_numpy(g2), want, rtol=1e-12)


# -- subgradients and zeros (values checked by hand; PyTorch gives the same) -----------------


def _grad(fn, *values):
    xs = [md.asarray(v, dtype=md.float64, requires_grad=True) for v in values]
    fn(*xs).sum().backward()
    return [to_numpy(x.grad).tolist() for x in xs]


def test_prod_and_cumulative_prod_gradients_at_zero():
    # Note [Products of the others]: out / x gave nan where x is 0
    assert _grad(md.prod, [2.0, 0.0, 3.0]) == [[0.0, 6.0, 0.0]]
    assert _grad(md.prod, [0.0, 0.0, 3.0]) == [[0.0, 0.0, 0.0]]
    assert _grad(lambda x: md.prod(x.reshape(2, 3), axis=1),
                 [1.0, 0.0, 3.0, 0.0, 0.0, 2.0]) == [[0.0, 3.0, 0.0, 0.0, 0.0, 0.0]]
    assert _grad(lambda x: md.prod(x.reshape(2, 3), axis=(0,), keepdims=True),
                 [1.0, 0.0, 3.0, 0.0, 0.0, 2.0]) == [[0.0, 0.0, 2.0, 1.0, 0.0, 3.0]]
    # d/dx (x0 + x0 x1 + x0 x1 x2) at [2, 0, 3]
    assert _grad(md.cumulative_prod, [2.0, 0.0, 3.0]) == [[1.0, 8.0, 0.0]]
    assert _grad(lambda x: md.cumulative_prod(x.reshape(2, 3), axis=1),
                 [1.0, 0.0, 3.0, 0.0, 0.0, 2.0]) == [[1.0, 4.0, 0.0, 1.0, 0.0, 0.0]]
    # PyTorch's ranges: before the first zero, from it to the second zero, nothing after;
    # an output past a zero (0 * inf = nan) no longer leaks into the earlier sums
    with np.errstate(all="ignore"):
        assert _grad(md.cumulative_prod, [0.0, 0.0, math.inf]) == [[1.0, 0.0, 0.0]]
        assert _grad(md.cumulative_prod, [2.0, 0.0, math.inf]) == [[1.0, math.inf, 0.0]]
    x = md.asarray([2.0, 0.0, 3.0, 0.5], dtype=md.float64, requires_grad=True)
    assert gradcheck(lambda t: md.cumulative_prod(t), (x,))
    assert gradcheck(lambda t: md.prod(t), (x,))


def test_max_dim_sends_the_gradient_to_the_index_it_returns():
    # PyTorch's max.dim gives the returned index the whole gradient; max(x) splits it
    assert _grad(lambda x: md.max(x, dim=0).values, [3.0, 1.0, 3.0]) == [[1.0, 0.0, 0.0]]
    assert _grad(lambda x: md.min(x.reshape(2, 2), dim=1, keepdim=True).values,
                 [1.0, 1.0, 2.0, 0.0]) == [[1.0, 0.0, 0.0, 1.0]]
    assert _grad(md.max, [3.0, 1.0, 3.0]) == [[0.5, 0.0, 0.5]]
    assert _grad(lambda x: md.amax(x, axis=0), [3.0, 1.0, 3.0]) == [[0.5, 0.0, 0.5]]


def test_zero_gradients_where_the_formula_is_zero_over_zero():
    # PyTorch's subgradients: std of a constant, norms of zeros, pow at 0, atan2 at 0
    assert _grad(md.std, [1.0, 1.0, 1.0]) == [[0.0, 0.0, 0.0]]
    assert _grad(lambda x: md.linalg.matrix_norm(x.reshape(2, 2)), [0.0] * 4) == [[0.0] * 4]
    for p in (2, 3, 0.5):
        assert _grad(lambda x, p=p: md.linalg.vector_norm(x, ord=p), [0.0, 0.0]) == \
            [[0.0, 0.0]]
    assert _grad(lambda x: md.pow(x, 0.0), [0.0, 1.0]) == [[0.0, 0.0]]
    assert _grad(md.pow, [0.0, 0.0, 2.0], [0.0, 2.0, 0.0])[0] == [0.0, 0.0, 0.0]
    assert _grad(md.pow, [0.0, 0.0], [0.0, 2.0])[1] == [0.0, 0.0]
    assert _grad(md.atan2, [0.0], [0.0]) == [[0.0], [0.0]]


def test_vector_norm_gradients_at_zeros_and_nans_as_pytorch():
    # p < 1 at a zero element: 0 (sign(0) |0|^(p - 1) was 0 * inf); ord=1 at a nan: 0, as
    # abs's; inf norms of a nan: 0 (0 / 0 for every element); ord=0: 0 (x * 0 at an inf)
    def norm(ord):
        return lambda x: md.linalg.vector_norm(x, ord=ord)

    with np.errstate(all="ignore"):
        assert _grad(norm(0.5), [0.0, 1.0]) == [[0.0, 1.0]]
        assert _grad(norm(1), [math.nan, -2.0]) == [[0.0, -1.0]]
        assert _grad(norm(math.inf), [math.nan, 1.0, 2.0]) == [[0.0, 0.0, 0.0]]
        assert _grad(norm(-math.inf), [3.0, -1.0, 1.0]) == [[0.0, -0.5, 0.5]]
        assert _grad(norm(0), [math.inf, 1.0]) == [[0.0, 0.0]]


def test_real_gradients_off_the_formulas_domain_as_pytorch():
    # acosh: PyTorch's rsqrt(x^2 - 1) for real x (1 / (sqrt(x - 1) sqrt(x + 1)) gave nan
    # below -1); logaddexp: g / (1 + exp(b - a)) (g exp(a - out) was exp(inf - inf) = nan)
    with np.errstate(all="ignore"):
        got = _grad(md.acosh, [-2.0, -math.inf, 3.0])[0]
        assert np.allclose(got, [3 ** -0.5, 0.0, 8 ** -0.5])
        assert _grad(md.logaddexp, [math.inf, 0.0, 5.0], [0.0, math.inf, -math.inf]) == \
            [[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]


def test_det_gradient_of_singular_matrices_is_the_cofactor_matrix():
    # Note [Determinants of singular matrices]: inv raised LinAlgError
    assert np.allclose(_grad(md.linalg.det, [[1.0, 2.0], [2.0, 4.0]])[0],
                       [[4.0, -2.0], [-2.0, 1.0]])
    assert np.allclose(_grad(md.linalg.det, [[1.0, 0.0], [0.0, 0.0]])[0],
                       [[0.0, 0.0], [0.0, 1.0]])
    batch = [[[1.0, 2.0], [3.0, 4.0]], [[1.0, 2.0], [2.0, 4.0]]]
    assert np.allclose(_grad(md.linalg.det, batch)[0],
                       [[[4.0, -3.0], [-2.0, 1.0]], [[4.0, -2.0], [-2.0, 1.0]]])
    x = md.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], dtype=md.float64,
                   requires_grad=True)
    assert gradcheck(md.linalg.det, (x,))


@needs_torch
@pytest.mark.parametrize("name", ["exp", "expm1", "log", "log1p", "log2", "log10", "sqrt",
                                  "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                  "tanh", "asinh", "acosh", "atanh", "reciprocal", "rsqrt",
                                  "sigmoid", "square"])
def test_complex_gradients_of_analytic_functions_are_conjugated(name):
    # Note [Derivatives of analytic functions]: g * f'(z) was missing the conjugate
    z = np.asarray([0.3 + 0.4j, -0.5 + 1.2j, 1.1 - 0.7j])
    w_re, w_im = np.asarray([1.0, 2.0, -0.5]), np.asarray([0.5, -1.0, 3.0])
    x = md.asarray(z, requires_grad=True)
    y = getattr(md, name)(x)
    ((md.real(y) * md.asarray(w_re)).sum() + (md.imag(y) * md.asarray(w_im)).sum()).backward()
    t = torch.tensor(z, requires_grad=True)
    u = getattr(torch, name)(t)
    ((u.real * torch.tensor(w_re)).sum() + (u.imag * torch.tensor(w_im)).sum()).backward()
    np.testing.assert_allclose(to_numpy(x.grad), t.grad.numpy(), rtol=1e-10, atol=1e-12)
