"""Derivative rules of ``md.linalg`` (``ops/linalg.py``) and the matrix ops ``tril`` and
``triu``: inverses, determinants and solves, norms, matrix powers, and the decompositions
(Cholesky, eigen, SVD, QR) with PyTorch's formulas and its checks of the complex gauge."""

from __future__ import annotations

import math

from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.formulas import sum_to

from ._derivative_helpers import (
    as_grad_of,
    conj_factor,
    expand_back,
    is_complex,
    mH,
    prod_of_others,
    reads,
    rule,
    sgn,
    uses_out,
)

__all__: list[str] = []


@rule("linalg_inv")
@uses_out
def _inv(g, out, a):
    t = mH(out)
    return (aten.neg(aten.matmul(aten.matmul(t, g), t)),)


@rule("linalg_det")
@uses_out
def _det(g, out, a):
    # g * conj(det) * A^-H where every matrix is invertible; PyTorch's singular formula
    # otherwise (Note [Determinants of singular matrices])
    gd = aten.mul(g, conj_factor(out))
    if bool(aten.any(aten.eq(out, 0)).item()):
        return (_det_grad_svd(g, a),)
    inv_h = mH(aten.linalg_inv(a))
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(gd, -1), -1), inv_h),)


# Note [Determinants of singular matrices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# The gradient of det(A) is the cofactor matrix, conj(det(A)) A^-H only where A is
# invertible.  For a singular A (det 0 exactly: A^-1 does not exist, and NumPy's inv
# raises) it comes from the SVD A = U S V^H, as PyTorch's linalg_det_backward does:
# det(A) = det(U) det(V^H) prod(S), so the gradient is U diag(g * conj(det(U) det(V^H)) *
# prod of the other singular values) V^H -- the products of the others without division
# (Note [Products of the others]).  The check reads one bool from the backend; a batch
# with any singular matrix takes this formula for all of them (it is exact for every
# matrix, only slower).


def _det_grad_svd(g, a):
    u, s, vh = aten.linalg_svd(a, full_matrices=False)
    alpha = conj_factor(aten.mul(aten.linalg_det(u), aten.linalg_det(vh)))
    d = aten.mul(aten.unsqueeze(aten.mul(g, alpha), -1), prod_of_others(s, -1))
    if d.dtype != u.dtype:
        d = aten.astype(d, u.dtype)
    return aten.matmul(aten.mul(u, aten.unsqueeze(d, -2)), vh)


@rule("linalg_solve")
@uses_out
def _solve(g, out, a, b):
    # X = A^-1 B: gB = A^-H g, gA = -gB X^H
    vec = b.ndim == 1
    gb = aten.linalg_solve(mH(a), g)
    if vec:
        ga = aten.neg(aten.outer(gb, conj_factor(out)))
    else:
        ga = aten.neg(aten.matmul(gb, mH(out)))
    return as_grad_of(ga, a), as_grad_of(gb, b)


@rule("linalg_trace")
def _trace(g, out, a, offset=0, dtype=None):
    n, m = a.shape[-2], a.shape[-1]
    eye = aten.eye(n, m, k=offset, dtype=g.dtype, device=g.device)
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(g, -1), -1), eye),)


@rule("tril")
@reads()
def _tril(g, out, x, k=0):
    return (aten.tril(g, k=k),)


@rule("triu")
@reads()
def _triu(g, out, x, k=0):
    return (aten.triu(g, k=k),)


def _mT(x):
    return aten.matrix_transpose(x)


def _mm(*xs):
    r = xs[0]
    for x in xs[1:]:
        r = aten.matmul(r, x)
    return r


def _diag_embed(v):
    n = v.shape[-1]
    return aten.mul(aten.unsqueeze(v, -1), aten.eye(n, dtype=v.dtype, device=v.device))


def _eye_like(x, n):
    return aten.eye(n, dtype=x.dtype, device=x.device)


@rule("linalg_cross")
def _cross(g, out, a, b, axis=-1):
    return (as_grad_of(sum_to(aten.linalg_cross(conj_factor(b), g, axis=axis), a.shape), a),
            as_grad_of(sum_to(aten.linalg_cross(g, conj_factor(a), axis=axis), b.shape), b))


@rule("linalg_diagonal")
def _linalg_diagonal(g, out, x, offset=0):
    # z = R^T diag(g) C with 0/1 selection matrices (no scatter: works on every backend)
    n, m = x.shape[-2], x.shape[-1]
    r0 = max(0, -offset)
    k = g.shape[-1]
    rows = aten.eye(k, n, k=r0, dtype=g.dtype, device=g.device)
    cols = aten.eye(k, m, k=r0 + offset, dtype=g.dtype, device=g.device)
    return (aten.matmul(aten.mul(_mT(rows), aten.unsqueeze(g, -2)), cols),)


@rule("linalg_vector_norm")
@uses_out
def _vector_norm(g, out, x, axis=None, keepdims=False, ord=2):
    import math

    gx = expand_back(g, x, axis, keepdims)
    nx = expand_back(out, x, axis, keepdims)
    ax = aten.abs(x)
    if ord == 2:
        zero = aten.eq(nx, 0)
        r = aten.div(x, aten.where(zero, 1.0, nx))
    elif ord == 1:
        r = sgn(x)
    elif ord == 0:  # a count: zero everywhere (x * 0 was nan at an infinity)
        r = aten.zeros_like(x)
    elif ord in (math.inf, -math.inf):
        # the elements that are the norm share the gradient; the others, and all of a nan
        # norm, get 0 (as PyTorch's, not 0 / 0)
        hit = aten.eq(ax, nx)
        count = expand_back(aten.sum(aten.astype(hit, ax.dtype), axis, keepdims), x, axis,
                             keepdims)
        r = aten.where(hit, aten.div(sgn(x), count), 0.0)
    else:
        # as PyTorch, a zero norm gives a zero gradient (not 0/0), and for p < 1 so does a
        # zero element (0 * |0|^(p - 1) is 0 * inf)
        p = float(ord)
        r = aten.div(aten.mul(aten.sign(x), aten.pow(ax, p - 1)),
                     aten.pow(nx, p - 1))
        r = aten.where(aten.eq(nx, 0), 0.0, r)
        if p < 1:
            r = aten.where(aten.eq(x, 0), 0.0, r)
    return (aten.mul(gx, r),)


@rule("linalg_matrix_norm")
@uses_out
def _matrix_norm(g, out, x, keepdims=False, ord="fro"):
    gx = g if keepdims else aten.unsqueeze(aten.unsqueeze(g, -1), -1)
    nx = out if keepdims else aten.unsqueeze(aten.unsqueeze(out, -1), -1)
    if ord == "fro":  # a zero matrix: a zero gradient, as PyTorch (not 0/0)
        return (aten.mul(gx, aten.div(x, aten.where(aten.eq(nx, 0), 1.0, nx))),)
    if ord in ("nuc", 2, -2):
        u, s, vh = aten.linalg_svd(x, full_matrices=False)
        if ord == "nuc":
            return (aten.mul(gx, aten.matmul(u, vh)),)
        k = 0 if ord == 2 else s.shape[-1] - 1
        uk = aten.narrow(u, -1, k, 1)
        vk = aten.narrow(vh, -2, k, 1)
        return (aten.mul(gx, aten.matmul(uk, vk)),)
    if ord in (1, -1, math.inf, -math.inf):
        return (_abs_sum_extreme_grad(gx, x, -2 if ord in (1, -1) else -1, ord > 0),)
    raise NotImplementedError(f"linalg_matrix_norm: the derivative for ord={ord!r} is not "
                              f"implemented (fro, nuc, 1, -1, 2, -2, inf and -inf are)")


@rule("linalg_norm")
@uses_out
def _linalg_norm(g, out, x, ord=None, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    # The CPU kernel's formula (Note [linalg.norm on NumPy] in ops/norms.py): the gradient
    # its decomposition records -- the vector or the matrix norm's formula, through the
    # moved axes and the cast
    from .norms import norm_plan

    xd = x if dtype is None else aten.astype(x, dtype)
    vector, dims = norm_plan(x.ndim, ord, dim)
    if vector:
        (gx,) = _vector_norm(g, out, xd, axis=dims, keepdims=keepdim,
                             ord=2 if ord is None else ord)
    else:
        a, b = dims
        if keepdim:
            g, out = aten.squeeze(g, (a, b)), aten.squeeze(out, (a, b))
        (gm,) = _matrix_norm(g, out, aten.moveaxis(xd, [a, b], [-2, -1]), keepdims=False,
                             ord=ord)
        gx = aten.moveaxis(gm, [-2, -1], [a, b])
    if gx.dtype != x.dtype:
        gx = aten.astype(aten.real(gx) if gx.dtype.kind == "c" and x.dtype.kind != "c"
                         else gx, x.dtype)
    return gx, None, None, None


def _abs_sum_extreme_grad(gx, x, axis, largest):
    """Gradient of the largest (smallest) column (``axis=-2``) or row (``axis=-1``) sum of
    ``|x|``, as PyTorch's ``amax(abs(x).sum(axis))``: the selected columns (rows) get
    ``g * sgn(x)``, split evenly among ties.  The extreme is taken again here rather than
    compared with the forward's output, whose rounding may differ on another backend."""
    sums = aten.sum(aten.abs(x), axis, True)
    pick = aten.amax(sums, (-2, -1), True) if largest else aten.amin(sums, (-2, -1), True)
    hit = aten.astype(aten.eq(sums, pick), sums.dtype)
    share = aten.div(hit, aten.sum(hit, (-2, -1), True))
    return aten.mul(aten.mul(gx, share), aten.sign(x))


@rule("linalg_matrix_power")
def _matrix_power(g, out, x, n):
    if n == 0:
        return aten.mul(x, 0.0), None
    if n < 0:
        inv = aten.linalg_inv(x)
        gi, _ = _matrix_power(g, None, inv, -n)
        t = mH(inv)
        return aten.neg(_mm(t, gi, t)), None
    # d(x^n) = sum_k x^k dx x^(n-1-k)  =>  gx = sum_k (x^k)^H g (x^(n-1-k))^H
    acc = x
    pw = {1: x}
    for k in range(2, n):
        acc = aten.matmul(acc, x)
        pw[k] = acc
    total = None
    for k in range(n):
        left = pw.get(k)
        right = pw.get(n - 1 - k)
        term = g
        if left is not None:
            term = aten.matmul(mH(left), term)
        if right is not None:
            term = aten.matmul(term, mH(right))
        total = term if total is None else aten.add(total, term)
    return total, None


@rule("linalg_slogdet")
def _slogdet(g, out, x):
    # d log det(A) = tr(A^-1 dA): the gradient of log det is gw A^-H with gw = g_logabsdet
    # (its real part) + i g_theta (its imaginary part, the sign's phase theta: sign =
    # e^{i theta}, so g_theta = Im(g_sign conj(sign))).  A real sign is piecewise constant.
    gsign, glog = g
    if not is_complex(x):
        if glog is None:
            return (None,)
        return (aten.mul(aten.unsqueeze(aten.unsqueeze(glog, -1), -1),
                         _mT(_slogdet_inv(x))),)
    if glog is None and gsign is None:
        return (None,)
    gw = None
    if gsign is not None:
        sign = aten.linalg_slogdet(x)[0]
        gw = aten.mul(aten.imag(aten.mul(gsign, aten.conj(sign))), 1j)
        if glog is not None:
            gw = aten.add(gw, glog)
    else:
        gw = glog
    return (aten.mul(aten.unsqueeze(aten.unsqueeze(gw, -1), -1), mH(_slogdet_inv(x))),)


def _slogdet_inv(x):
    """A^-1 for slogdet's gradient; for a singular A (logabsdet -inf) the error names
    slogdet, whose gradient does not exist there."""
    try:
        return aten.linalg_inv(x)
    except ValueError as e:
        raise ValueError(f"linalg.slogdet: no gradient at a singular matrix (log|det| is "
                         f"-inf): {e}") from None


@rule("linalg_cholesky")
@uses_out
def _cholesky(g, out, x, upper=False):
    # PyTorch's formula (the input is taken as Hermitian): with L = cholesky(A),
    # gA = L^-H Phi(L^H gL) L^-1, made Hermitian, Phi = lower triangle with a halved
    # diagonal.  (PyTorch keeps the imaginary part of Phi's diagonal, which only adds a
    # skew-Hermitian part orthogonal to every Hermitian perturbation; this is the Hermitian
    # part of its gradient.)  H is T for a real input.
    L = mH(out) if upper else out
    gL = mH(g) if upper else g
    phi = aten.tril(aten.matmul(mH(L), gL))
    phi = aten.sub(phi, aten.mul(_diag_embed(aten.linalg_diagonal(phi)), 0.5))
    Linv = aten.linalg_inv(L)
    ga = _mm(mH(Linv), phi, Linv)
    return (aten.mul(aten.add(ga, mH(ga)), 0.5),)


def _eigh_grad(gw, gv, w, v):
    # PyTorch's linalg_eig_backward, Hermitian case: gA = V (diag(gw) + skew(V^H gV) / E) V^H
    # with skew(K) = (K - K^H) / 2, E_ij = w_j - w_i (off the diagonal); here as the Hermitian
    # part of V (diag(gw) + (V^H gV) / E) V^H, which is the same.  For a complex input the
    # loss must not depend on the eigenvectors' phases (checked as PyTorch).
    terms = None
    if gw is not None:
        terms = _diag_embed(gw)
    if gv is not None:
        vh_gv = aten.matmul(mH(v), gv)
        if is_complex(vh_gv):
            _check_eig_gauge(aten.linalg_diagonal(vh_gv), "linalg_eigh")
        diff = aten.sub(aten.unsqueeze(w, -2), aten.unsqueeze(w, -1))  # w_j - w_i
        n = w.shape[-1]
        eye = _eye_like(w, n)
        f = aten.div(aten.sub(1.0, eye), aten.add(diff, eye))  # 0 on the diagonal
        t = aten.mul(f, vh_gv)
        terms = t if terms is None else aten.add(terms, t)
    if terms is None:
        return None
    ga = _mm(v, terms, mH(v))
    return aten.mul(aten.add(ga, mH(ga)), 0.5)


@rule("linalg_eigh")
@uses_out
def _eigh(g, out, x):
    return (_eigh_grad(g[0], g[1], out[0], out[1]),)


@rule("linalg_eigvalsh")
def _eigvalsh(g, out, x):
    w, v = aten.linalg_eigh(x)
    return (_eigh_grad(g, None, w, v),)


_EIG_GAUGE = ("{op}: the eigenvectors in the complex case are specified up to "
              "multiplication by e^{{i phi}}. The specified loss function depends on this "
              "quantity, so it is ill-defined.")


_SVD_GAUGE = ("linalg_svd: the singular vectors in the complex case are specified up to "
              "multiplication by e^{i phi}. The specified loss function depends on this "
              "phase term, making it ill-defined.")


def _imag_close(a, b=None):
    """Whether the imaginary parts of ``a`` and ``-b`` (or 0) agree to 1e-2, as PyTorch's
    allclose in its phase checks (True on the meta device: no values to check)."""
    import numpy as np

    if a.device.type == "meta":
        return True
    be = a.device.backend
    im = np.asarray(be.to_numpy(aten.imag(a)._data))
    other = 0.0 if b is None else -np.asarray(be.to_numpy(aten.imag(b)._data))
    return bool(np.allclose(im, other, rtol=1e-2, atol=1e-2))


def _check_eig_gauge(diag, op="linalg_eig"):
    """PyTorch's check that the loss is invariant to V -> V e^{i phi}: the imaginary part
    of diag(V^H gV) must vanish (to 1e-2, as PyTorch's allclose)."""
    if not _imag_close(diag):
        raise RuntimeError(_EIG_GAUGE.format(op=op))


def _eig_grad(gL, gV, L, V, x):
    """PyTorch's linalg_eig_backward for A = V diag(L) V^-1 (unit-norm eigenvectors):
    gA = V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(E)) V^H, with
    E_ij = L_j - L_i off the diagonal (whose terms are replaced by gL); the second term
    removes the part of gV along each eigenvector's own norm.  A real ``x`` gets the real
    part."""
    if gL is None and gV is None:
        return None
    Vh = mH(V)
    if gV is None:  # eigvals: V^-H diag(gL) V^H
        inner = aten.mul(aten.unsqueeze(gL, -1), Vh)
    else:
        VhgV = aten.matmul(Vh, gV)
        diag = aten.linalg_diagonal(VhgV)
        _check_eig_gauge(diag)
        VhgV = aten.sub(VhgV, aten.matmul(Vh, aten.mul(V, aten.unsqueeze(aten.real(diag), -2))))
        Lc = aten.conj(L)
        eye = _eye_like(VhgV, L.shape[-1])
        econj = aten.add(aten.sub(aten.unsqueeze(Lc, -2), aten.unsqueeze(Lc, -1)), eye)
        inner = aten.div(VhgV, econj)
        if gL is not None:
            inner = aten.add(aten.mul(inner, aten.sub(1.0, eye)), _diag_embed(gL))
        inner = aten.matmul(inner, Vh)
    ga = aten.linalg_solve(Vh, inner)
    return aten.real(ga) if x.dtype.kind != "c" else ga


@rule("linalg_eig")
@uses_out
def _eig(g, out, x):
    return (_eig_grad(g[0], g[1], out[0], out[1], x),)


@rule("linalg_eigvals")
def _eigvals(g, out, x):
    L, V = aten.linalg_eig(x)
    return (_eig_grad(g, None, L, V, x),)


@rule("linalg_svdvals")
def _svdvals(g, out, x):
    u, s, vh = aten.linalg_svd(x, full_matrices=False)
    return (_mm(u, _diag_embed(g), vh),)


@rule("linalg_svd")
@uses_out
def _svd(g, out, x, full_matrices=True):
    # PyTorch's svd_backward: with skew(K) = K - K^H, E_ij = s_j^2 - s_i^2 (off the diagonal),
    # gA = U [(skew(U^H gU) / E) S + S (skew(V^H gV) / E) + diag(gS)] V^H
    #      + (I_m - U U^H) gU S^-1 V^H + U S^-1 gVh (I_n - V V^H)
    # and, for a complex input, i Im(diag(U^H gU)) / S on the diagonal (when both gU and gVh
    # are given), after checking that the loss does not depend on the singular vectors'
    # phases: Im(diag(U^H gU)) = -Im(diag(V^H gV)).  H is T for a real input.
    gu, gs, gvh = g
    u, s, vh = out
    m, n = x.shape[-2], x.shape[-1]
    k = s.shape[-1]
    if full_matrices and m != n:
        if gu is not None or gvh is not None:
            raise NotImplementedError(
                "linalg_svd: the derivative through U or Vh of a full_matrices=True SVD of a "
                "non-square matrix is not implemented (use full_matrices=False)")
    u = aten.narrow(u, -1, 0, k)
    vh = aten.narrow(vh, -2, 0, k)
    gu = aten.narrow(gu, -1, 0, k) if gu is not None else None
    gvh = aten.narrow(gvh, -2, 0, k) if gvh is not None else None
    v = mH(vh)
    inner = _diag_embed(gs) if gs is not None else aten.mul(_diag_embed(s), 0.0)
    s2 = aten.mul(s, s)
    eye = _eye_like(s, k)
    f = aten.div(aten.sub(1.0, eye),
                 aten.add(aten.sub(aten.unsqueeze(s2, -2), aten.unsqueeze(s2, -1)), eye))
    S = _diag_embed(s)
    sinv = _diag_embed(aten.div(1.0, s))
    complex_ = is_complex(u)
    sk_u = sk_v = extra = None
    if gu is not None:
        uh_gu = aten.matmul(mH(u), gu)
        sk_u = aten.sub(uh_gu, mH(uh_gu))
        inner = aten.add(inner, aten.matmul(aten.mul(f, sk_u), S))
        if m > k:
            proj = aten.sub(_eye_like(x, m), aten.matmul(u, mH(u)))
            extra = _mm(proj, gu, sinv, vh)
    if gvh is not None:
        gv = mH(gvh)
        vh_gv = aten.matmul(mH(v), gv)
        sk_v = aten.sub(vh_gv, mH(vh_gv))
        inner = aten.add(inner, aten.matmul(S, aten.mul(f, sk_v)))
        if n > k:
            proj = aten.sub(_eye_like(x, n), aten.matmul(v, vh))
            term = _mm(u, sinv, mH(gv), proj)
            extra = term if extra is None else aten.add(extra, term)
    if complex_:
        du = aten.linalg_diagonal(sk_u) if sk_u is not None else None
        dv = aten.linalg_diagonal(sk_v) if sk_v is not None else None
        if not (_imag_close(du, dv) if du is not None and dv is not None else
                _imag_close(du if du is not None else dv)):
            raise RuntimeError(_SVD_GAUGE)
        if du is not None and dv is not None:  # i Im(diag(U^H gU)) / S
            inner = aten.add(inner, _diag_embed(aten.div(du, aten.mul(s, 2.0))))
    ga = _mm(u, inner, vh)
    return (ga if extra is None else aten.add(ga, extra),)


@rule("linalg_qr")
@uses_out
def _qr(g, out, x, mode="reduced"):
    # PyTorch's linalg_qr_backward (rows >= columns): with M = R gR^H - gQ^H Q,
    # gA = (gQ + Q copyltu(M)) R^-H, copyltu(M) = tril(M, -1) + tril(M, -1)^H + Re(diag(M)).
    # H is T for a real input.
    gq, gr = g
    q, r = out
    m, n = x.shape[-2], x.shape[-1]
    if mode != "reduced" or m < n:
        raise NotImplementedError("linalg_qr: the derivative is implemented for "
                                  "mode='reduced' with rows >= columns")
    gq = gq if gq is not None else aten.mul(q, 0.0)
    gr = gr if gr is not None else aten.mul(r, 0.0)
    M = aten.sub(aten.matmul(r, mH(gr)), aten.matmul(mH(gq), q))
    low = aten.tril(M, k=-1)
    dm = aten.linalg_diagonal(M)
    if is_complex(dm):
        dm = aten.real(dm)
    copyltu = aten.add(aten.add(low, mH(low)), _diag_embed(dm))
    b = aten.add(gq, aten.matmul(q, copyltu))
    # gA = b R^-H  (R is invertible for a full-rank input)
    return (aten.matmul(b, mH(aten.linalg_inv(r))),)


@rule("linalg_pinv")
@uses_out
def _pinv(g, out, x, rtol=None):
    p = out
    pt = mH(p)  # H: conjugate transposes for a complex input
    m, n = x.shape[-2], x.shape[-1]
    gt = mH(g)
    t1 = aten.neg(_mm(pt, g, pt))
    t2 = _mm(aten.sub(_eye_like(x, m), aten.matmul(x, p)), gt, p, pt)
    t3 = _mm(pt, p, gt, aten.sub(_eye_like(x, n), aten.matmul(p, x)))
    return aten.add(aten.add(t1, t2), t3), None
