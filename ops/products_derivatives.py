"""Derivative rules of the products (``matmul``, ``mm``, ``bmm``, ``dot``, ``vecdot``,
``outer``, ``einsum``, ``tensordot``).  ``matmul``'s formula runs as one op,
``matmul_backward``, when backward records nothing (Note [matmul_backward] in
ops/linalg.py)."""

from __future__ import annotations

from mdtensor.ops._meta_fns import broadcast_shapes as _broadcast_shapes

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY as _AUTOGRAD
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.layers.autograd.formulas import sum_to

from ._derivative_helpers import (
    DERIVATIVES,
    as_grad_of,
    conj_factor,
    grad_for,
    inverse_permutation,
    mH,
    reads,
    rule,
    uses_mask,
)

_tls_get = dispatch_tls.get

__all__: list[str] = []


@rule("matmul")
@reads({0: (1,), 1: (0,)})
@uses_mask
def _matmul(needs, g, out, a, b):
    # See Note [matmul_backward] in ops/linalg.py: one op when backward records nothing
    if _tls_get()[1] & _AUTOGRAD:  # create_graph: composed of differentiable ops
        return matmul_gradients(needs, g, a, b)
    return aten.matmul_backward(g, a, b, needs[:2])


def matmul_gradients(needs, g, a, b):
    """matmul's two gradients from dispatched ops (each differentiable; a batched ``g``
    under vmap goes through the batching rules: ops/batching.py)."""
    # Complex operands: ga = g @ b^H, gb = a^H @ g (PyTorch's convention); a real operand
    # is used as it is (no conj) and a real input of a mixed product gets the real part.
    need_a, need_b = needs[0], needs[1]
    ad, bd = a._data, b._data
    if ad.ndim == 2 and bd.ndim == 2 and getattr(ad.dtype, "kind", "c") == "f" and \
            getattr(bd.dtype, "kind", "c") == "f":
        # Real matrices (a layer's weights): no broadcast dimension to sum, no conjugate,
        # no real part to take -- the two products alone.
        return (aten.matmul(g, aten.matrix_transpose(b)) if need_a else None,
                aten.matmul(aten.matrix_transpose(a), g) if need_b else None)
    a_vec = ad.ndim == 1
    b_vec = bd.ndim == 1
    if a_vec and b_vec:
        return (as_grad_of(aten.mul(g, conj_factor(b)), a) if need_a else None,
                as_grad_of(aten.mul(g, conj_factor(a)), b) if need_b else None)
    a2 = aten.unsqueeze(a, 0) if a_vec else a
    b2 = aten.unsqueeze(b, -1) if b_vec else b
    g2 = g
    if a_vec:
        g2 = aten.unsqueeze(g2, -2)
    if b_vec:
        g2 = aten.unsqueeze(g2, -1)
    ga = gb = None
    if need_a:
        ga = aten.matmul(g2, mH(b2))
        if a_vec:
            ga = aten.squeeze(ga, -2)
        ga = as_grad_of(sum_to(ga, a._data.shape), a)
    if need_b:
        gb = aten.matmul(mH(a2), g2)
        if b_vec:
            gb = aten.squeeze(gb, -1)
        gb = as_grad_of(sum_to(gb, b._data.shape), b)
    return ga, gb


@rule("matmul_backward")
def _matmul_backward(c, out, g, a, b, mask):
    # See Note [matmul_backward]: each product is linear in each of its factors, so the
    # gradient with respect to one factor is the vector-Jacobian product of the composite
    # formula at a zero leaf put in its place, the other factors kept as they are (with
    # their history, so that create_graph differentiates further).  Rarely run: matmul's
    # own formula composes ops whenever backward records.
    from mdtensor.autograd import enable_grad, grad

    create_graph = bool(_tls_get()[1] & _AUTOGRAD)

    def vjp(i):
        args = [g, a, b]
        leaf = aten.zeros_like(args[i])
        leaf.requires_grad_(True)
        args[i] = leaf
        with enable_grad():
            outs = matmul_gradients(mask, *args)
        pairs = [(o, t) for o, t in zip(outs, c)  # c: the two outputs' gradients
                 if o is not None and t is not None and o.requires_grad]
        if not pairs:
            return None
        (gx,) = grad([o for o, _ in pairs], [leaf], [t for _, t in pairs],
                     create_graph=create_graph, allow_unused=True)
        return gx

    return vjp(0), vjp(1), vjp(2), None


DERIVATIVES["mm"] = DERIVATIVES["bmm"] = DERIVATIVES["matmul"]


def _times_conj(g, c):
    """``g * conj(c)`` for a Python scalar ``c`` (``g`` itself for 1)."""
    if c == 1:
        return g
    return aten.mul(g, c.conjugate() if isinstance(c, complex) else c)


@rule("addmm")
@reads({0: (), 1: (2,), 2: (1,)})
@uses_mask
def _addmm(needs, g, out, self, mat1, mat2, *, beta=1, alpha=1):
    # The CPU kernel's formula (Note [addmm on NumPy] in ops/linalg.py), the gradients its
    # decomposition would record: ``beta * self`` plus ``alpha`` times ``mm``'s product
    # (mm's own formula); with ``beta == 0`` self is not read and gets no gradient.
    gs = None
    if needs[0] and beta != 0:
        gs = _times_conj(grad_for(g, self), beta)
    ga = gb = None
    if needs[1] or needs[2]:
        ga, gb = _matmul((needs[1], needs[2], False), _times_conj(g, alpha), None, mat1, mat2)
    return gs, ga, gb


@rule("vecdot")
@reads({0: (1,), 1: (0,)})
def _vecdot(g, out, a, b, axis=-1):
    # The forward conjugates its first argument (Array API vecdot: sum(conj(a) * b)):
    # ga = conj(g) * b, gb = g * a, each summed back to its operand's shape (broadcast)
    full = _broadcast_shapes("vecdot", tuple(a.shape), tuple(b.shape))
    ge = aten.broadcast_to(aten.unsqueeze(g, axis), full)
    return (as_grad_of(sum_to(aten.mul(conj_factor(ge), b), a.shape), a),
            as_grad_of(sum_to(aten.mul(ge, a), b.shape), b))


@rule("dot")
@reads({0: (1,), 1: (0,)})
def _dot(g, out, a, b):
    # PyTorch's dot, sum(a * b), no conjugation: ga = g * conj(b), gb = g * conj(a).
    return as_grad_of(aten.mul(g, conj_factor(b)), a), as_grad_of(aten.mul(g, conj_factor(a)), b)


@rule("outer")
@reads({0: (1,), 1: (0,)})
def _outer(g, out, a, b):
    return (as_grad_of(aten.matmul(g, conj_factor(b)), a),
            as_grad_of(aten.matmul(aten.matrix_transpose(g), conj_factor(a)), b))


# Note [einsum derivative]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# The equation is first spelled out: ``...`` becomes fresh letters (an operand with fewer
# ellipsis dimensions takes the last ones, as broadcasting aligns them on the right) and an
# implicit output becomes explicit.  Operand i's gradient is then that of its diagonal
# ``uniq`` (its letters, each once): an einsum of g with the other operands (conjugated,
# PyTorch's convention for complex inputs) down to the letters of ``uniq`` that appear
# elsewhere, summed over dimensions the operand broadcast from size 1 and broadcast over
# letters it alone sums.  A repeated letter ("ii", "iij") then puts that gradient back on
# the diagonal: an einsum with identity matrices, one per repeat.


def _einsum_parts(equation, tensors):
    """(operand subscripts, output subscripts) with ``...`` spelled out in letters and an
    implicit output made explicit (see Note [einsum derivative])."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    ins = lhs.split(",")
    if not arrow:
        counts = {}
        for c in lhs.replace(",", "").replace(".", ""):
            counts[c] = counts.get(c, 0) + 1
        rhs = ("..." if "..." in lhs else "") + "".join(
            sorted(c for c, k in counts.items() if k == 1))
    if "..." not in eq:
        return ins, rhs
    n_ell = [t.ndim - (len(s) - 3) if "..." in s else 0 for s, t in zip(ins, tensors)]
    width = max(n_ell, default=0)
    letters = "".join([c for c in _EINSUM_LETTERS if c not in eq][:width])
    ins = [s.replace("...", letters[width - k:]) for s, k in zip(ins, n_ell)]
    return ins, rhs.replace("...", letters)


_EINSUM_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _unbroadcast(gi, letters, size):
    """``gi`` (subscripts ``letters``) summed where the operand had size 1 and reshaped and
    broadcast to the operand's sizes ``size`` over the letters of ``size`` (in order)."""
    ones = tuple(k for k, c in enumerate(letters) if size[c] == 1 and gi.shape[k] != 1)
    if ones:
        gi = aten.sum(gi, ones, True)
    kept = tuple(gi.shape[letters.index(c)] if c in letters else 1 for c in size)
    if kept != tuple(gi.shape):
        gi = aten.reshape(gi, kept)
    shape = tuple(size.values())
    return aten.expand(gi, shape) if kept != shape else gi


def _onto_diagonal(gd, uniq, spec, size):
    """The gradient ``gd`` of the diagonal ``uniq`` put back onto an operand with repeated
    subscripts ``spec``: each repeat of a letter gets a fresh letter tied to it by eye."""
    fresh = iter(c for c in _EINSUM_LETTERS if c not in spec)
    subs, ops, seen, out = [uniq], [gd], set(), []
    for c in spec:
        if c in seen:
            f = next(fresh)
            subs.append(c + f)
            ops.append(aten.eye(size[c], dtype=gd.dtype, device=gd.device))
            out.append(f)
        else:
            seen.add(c)
            out.append(c)
    return aten.einsum(",".join(subs) + "->" + "".join(out), ops)


@rule("einsum")
def _einsum(g, out, equation, tensors):
    ins, rhs = _einsum_parts(equation, tensors)
    grads = []
    for i, (spec, t) in enumerate(zip(ins, tensors)):
        size = {}
        for c, s in zip(spec, t.shape):
            size.setdefault(c, s)
        uniq = "".join(size)
        others = [(s, u) for j, (s, u) in enumerate(zip(ins, tensors)) if j != i]
        present = set(rhs) | {c for s, _ in others for c in s}
        target = "".join(c for c in uniq if c in present)
        eq = ",".join([rhs] + [s for s, _ in others]) + "->" + target
        gi = _unbroadcast(aten.einsum(eq, [g] + [conj_factor(u) for _, u in others]), target, size)
        if uniq != spec:
            gi = _onto_diagonal(gi, uniq, spec, size)
        if gi.dtype.kind == "c" and t.dtype.kind != "c":
            gi = aten.real(gi)
        grads.append(gi)
    return None, grads


def _tensordot_axes(a_ndim, b_ndim, axes):
    if isinstance(axes, int):
        return list(range(a_ndim - axes, a_ndim)), list(range(axes))
    ax_a = [axes[0]] if isinstance(axes[0], int) else list(axes[0])
    ax_b = [axes[1]] if isinstance(axes[1], int) else list(axes[1])
    return [x % a_ndim for x in ax_a], [x % b_ndim for x in ax_b]


@rule("tensordot")
def _tensordot(g, out, a, b, axes=2):
    ax_a, ax_b = _tensordot_axes(a.ndim, b.ndim, axes)
    free_a = [d for d in range(a.ndim) if d not in ax_a]
    free_b = [d for d in range(b.ndim) if d not in ax_b]
    nfa = len(free_a)
    # g's dims are a's free dims then b's free dims; contract g with the other operand's
    # free dims (conjugated when complex), then put the result's dims back in the
    # operand's order.
    ga = aten.tensordot(g, conj_factor(b), axes=(list(range(nfa, g.ndim)), free_b))
    dims_a = free_a + [ax_a[ax_b.index(d)] for d in sorted(ax_b)]
    gb = aten.tensordot(conj_factor(a), g, axes=(free_a, list(range(nfa))))
    dims_b = [ax_b[ax_a.index(d)] for d in sorted(ax_a)] + free_b
    return (as_grad_of(aten.permute(ga, inverse_permutation(dims_a)), a),
            as_grad_of(aten.permute(gb, inverse_permutation(dims_b)), b))
