"""``md.testing``: gradient checks against finite differences.

``gradcheck(fn, inputs)`` compares the analytical gradient (reverse mode, one backward per
output element) with central finite differences in float64, and raises ``GradcheckError``
naming the first mismatching element (input, index, numerical and analytical values).

Note [Complex outputs]
~~~~~~~~~~~~~~~~~~~~~~
A complex output is checked as two real outputs, its real and its imaginary part, as
PyTorch's gradcheck does: a backward that is right for one part only (``md.real(g)`` for
``x * (1 + 2j)``) fails.  The parts are taken with ``md.real``/``md.imag``, whose own
formulas carry the output gradient into the function's backward (for the imaginary part,
``g = 1j * seed``), so every output element is seeded through both parts.
"""

from __future__ import annotations

import numpy as _numpy

from mdtensor._dtypes import float64
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.api import grad as _autograd_grad
from mdtensor.tensors.factories import asarray
from mdtensor.tensors.tensor import Tensor

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(RuntimeError):
    """An analytical gradient disagrees with finite differences."""


def _np(t):
    """A tensor's values as a NumPy array, from any device (a copy off the CPU)."""
    return t.detach().numpy(force=True)


def _outputs(fn, inputs):
    """``fn``'s outputs, a complex one as its real and imaginary parts (Note [Complex
    outputs])."""
    out = fn(*inputs)
    outs = []
    for o in out if isinstance(out, (tuple, list)) else (out,):
        if isinstance(o, Tensor) and o.dtype.kind == "c":
            outs += [aten.real(o), aten.imag(o)]
        else:
            outs.append(o)
    return outs


def _numerical(fn, inputs, i, eps):
    x = inputs[i]
    base = _np(x).astype(_numpy.float64).copy()
    outs0 = [_np(o) for o in _outputs(fn, inputs)]
    jac = [_numpy.zeros((base.size, o.size)) for o in outs0]
    for k in range(base.size):
        vals = []
        for sign in (1, -1):
            pert = base.copy().reshape(-1)
            pert[k] += sign * eps
            xs = list(inputs)
            # Perturbed inputs keep requires_grad: fn may itself differentiate
            # (gradgradcheck); outputs are read detached.
            xs[i] = asarray(pert.reshape(base.shape), dtype=x.dtype, device=x.device,
                               requires_grad=x.requires_grad)
            vals.append([_np(o).astype(_numpy.float64).reshape(-1)
                         for o in _outputs(fn, xs)])
        for j in range(len(outs0)):
            jac[j][k] = (vals[0][j] - vals[1][j]) / (2 * eps)
    return jac


def _analytical(fn, inputs):
    outs = _outputs(fn, inputs)
    jacs = [[_numpy.zeros((x.numel(), o.numel())) for o in outs] for x in inputs]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue
        for m in range(o.numel()):
            seed = _numpy.zeros(o.numel())
            seed[m] = 1.0
            g = asarray(seed.reshape(o.shape), dtype=o.dtype, device=o.device)
            grads = _autograd_grad([o], list(inputs), [g], retain_graph=True,
                                     allow_unused=True)
            for i, gi in enumerate(grads):
                if gi is not None:
                    if gi.dtype.kind == "c" and inputs[i].dtype.kind != "c":
                        raise GradcheckError(
                            f"gradcheck: the gradient of input {i} ({inputs[i].dtype.name}) "
                            f"is {gi.dtype.name}; a real input's gradient must be real")
                    jacs[i][j][:, m] = _np(gi).astype(_numpy.float64).reshape(-1)
    return jacs


def gradcheck(fn, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True) -> bool:
    """Check ``fn``'s gradients w.r.t. the float64 ``inputs`` that require grad.

    Raises:
        GradcheckError: the first mismatching element (when ``raise_exception``).
    """
    inputs = tuple(inputs)
    diff = [i for i, x in enumerate(inputs) if getattr(x, "requires_grad", False)]
    for i in diff:
        if inputs[i].dtype.name != "float64":
            raise TypeError(f"gradcheck: input {i} is {inputs[i].dtype.name}; use float64 "
                            f"inputs for finite differences")
    analytical = _analytical(fn, [inputs[i] for i in diff] and inputs)
    for i in diff:
        numerical = _numerical(fn, inputs, i, eps)
        for j, (num, ana) in enumerate(zip(numerical, analytical[i])):
            bad = ~_numpy.isclose(ana, num, atol=atol, rtol=rtol)
            if bad.any():
                k, m = map(int, _numpy.argwhere(bad)[0])
                msg = (f"gradcheck: Jacobian mismatch for output {j} with respect to input "
                       f"{i}: d(output[{m}])/d(input[{k}]) numerical {num[k, m]:.6g}, "
                       f"analytical {ana[k, m]:.6g}")
                if raise_exception:
                    raise GradcheckError(msg)
                return False
    return True


def gradgradcheck(fn, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, raise_exception: bool = True) -> bool:
    """Check second derivatives: gradcheck of the vjp of ``fn`` (``create_graph=True``)
    with respect to the inputs and to the cotangents (Note [Second derivatives]).

    Args:
        grad_outputs: one float64 cotangent per output (a complex output counts as two,
            Note [Complex outputs]); random ones (fixed seed) when None.
    """
    inputs = tuple(inputs)
    if grad_outputs is None:
        rng = _numpy.random.default_rng(0)
        grad_outputs = tuple(
            asarray(rng.standard_normal(tuple(o.shape)), dtype=float64,
                       device=o.device, requires_grad=True)
            for o in _outputs(fn, inputs))
    grad_outputs = tuple(grad_outputs)
    n = len(inputs)

    def vjp(*args):
        xs, vs = args[:n], args[n:]
        pairs = [(o, v) for o, v in zip(_outputs(fn, xs), vs) if o.requires_grad]
        if not pairs:
            return ()
        grads = _autograd_grad([o for o, _ in pairs], list(xs), [v for _, v in pairs],
                                 create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(vjp, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)


# Note [Second derivatives]
# ~~~~~~~~~~~~~~~~~~~~~~~~~
# As PyTorch's gradgradcheck: the function checked is ``(x, v) -> vjp_x(v)``, the
# backward with ``create_graph=True`` and cotangents ``v`` that require grad, so the check
# covers both what a Hessian needs (the derivative through ``x``) and what forward mode by
# double vjp needs (the derivative through ``v``: ``md.func.jvp``, Note [Differentiation
# transforms] in mdtensor/_grad_transforms.py).  A backward that computes on raw arrays
# without recording (a scatter-add by ``np.add.at``) passes the first and fails the second:
# its result looks constant in ``v``.
