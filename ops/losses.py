"""The negative log-likelihood loss: ``nll_loss_forward`` and ``nll_loss_backward``
(PyTorch's ops and schemas).

Note [nll_loss kernels]
~~~~~~~~~~~~~~~~~~~~~~~
``md.nn.functional.nll_loss`` (and so ``cross_entropy``, ``log_softmax`` then this) on an
``(N, C)`` or ``(C,)`` input is PyTorch's pair of kernels rather than a composition: as some
fifteen dispatched ops (mask the ignored targets, check the bounds, gather, weigh, sum,
divide) the CNN example's loss took 5x PyTorch's time forward and backward.  The forward
returns the loss and ``total_weight``, the summed weights of the targets that are not
``ignore_index`` (PyTorch's second output; with ``reduction=none`` 0 for an ``(N, C)``
input); ``reduction`` is PyTorch's enum (0 none, 1 mean, 2 sum).  The backward scatters
``-weight[t] * grad`` (over ``total_weight`` for the mean) into zeros of the input's shape.
Both are linear in what they differentiate: the forward's derivative is the backward op, the
backward's derivative for its ``grad_output`` the forward applied to the incoming gradient
(its derivative for the input is zero), so every order differentiates
(ops/losses_derivatives.py).  Inputs with more dimensions (``(N, C, d1, ...)``) keep
``F.nll_loss``'s composition.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ._cpu_kernels import register_arrays_direct
from ._decl import CATALOGUE, ErrorInput, OpInfo, SampleInput, defop
from ._meta_fns import ArraySpec
from ._samples import make_array
from .elementwise import FLOATS

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

_REDUCTIONS = (0, 1, 2)  # none, mean, sum


def _check(op: str, x, target, weight, reduction) -> int:
    """The number of classes, checked."""
    if x.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point input, got {x.dtype.name}")
    if target.dtype.kind not in "iu":
        raise TypeError(f"{op}: expected an integer target of class indices, got "
                        f"{target.dtype.name}")
    if x.ndim not in (1, 2):
        raise ValueError(f"{op}: expected an input of shape (C,) or (N, C), got shape "
                         f"{list(x.shape)}")
    expected = tuple(x.shape[:1]) if x.ndim == 2 else ()
    if tuple(target.shape) != expected:
        raise ValueError(f"{op}: expected target of shape {list(expected)} for input of "
                         f"shape {list(x.shape)}, got {list(target.shape)}")
    classes = x.shape[-1]
    if weight is not None and tuple(weight.shape) != (classes,):
        raise ValueError(f"{op}: expected weight of shape [{classes}] (one per class), got "
                         f"{list(weight.shape)}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: expected reduction 0 (none), 1 (mean) or 2 (sum), got "
                         f"{reduction!r}")
    return classes


def _out_of_bounds(target, classes: int) -> IndexError:
    return IndexError(f"nll_loss: target {int(target)} is out of bounds for {classes} "
                      f"classes")


def _forward_meta(x, target, weight, reduction, ignore_index):
    _check("nll_loss", x, target, weight, reduction)
    shape = tuple(target.shape) if reduction == 0 else ()
    return [(shape, x.dtype), ((), x.dtype)]


def _backward_meta(g, x, target, weight, reduction, ignore_index, total_weight):
    _check("nll_loss_backward", x, target, weight, reduction)
    want = tuple(target.shape) if reduction == 0 else ()
    if tuple(g.shape) != want:
        raise ValueError(f"nll_loss_backward: expected grad_output of shape {list(want)}, got "
                         f"{list(g.shape)}")
    return tuple(x.shape), x.dtype


def _picks(xp, x, target, weight, ignore_index):
    """``(flat indices of the picked entries, their weights, not-ignored mask)`` over
    ``x`` as ``(N, C)``: ignored targets pick entry 0 of their row with weight 0."""
    classes = x.shape[-1]
    t = xp.reshape(target, (-1,))
    valid = t != ignore_index
    safe = xp.where(valid, t, xp.zeros_like(t))
    bad = (safe < 0) | (safe >= classes)
    if bool(xp.any(bad)):
        raise _out_of_bounds(safe[xp.argmax(xp.astype(bad, xp.int8))], classes)
    rows = xp.arange(t.shape[0], dtype=t.dtype, device=_device(x)) * classes
    zero = xp.zeros(t.shape, dtype=x.dtype, device=_device(x))
    w = xp.ones(t.shape, dtype=x.dtype, device=_device(x)) if weight is None else \
        xp.take(weight, safe, axis=0)
    return rows + safe, xp.where(valid, w, zero), valid


def _device(a):
    from array_api_compat import device

    return device(a)


def _forward(xp, x, target, weight, reduction, ignore_index):
    _check("nll_loss", ArraySpec(x), ArraySpec(target), weight, reduction)
    flat, w, _ = _picks(xp, x, target, weight, ignore_index)
    losses = -xp.take(xp.reshape(x, (-1,)), flat, axis=0) * w
    total = xp.sum(w)
    if reduction == 0:  # PyTorch's total_weight: 0, except for a (C,) input
        return xp.reshape(losses, tuple(target.shape)), \
            total if x.ndim == 1 else xp.zeros((), dtype=x.dtype, device=_device(x))
    loss = xp.sum(losses)
    return (loss / total if reduction == 1 else loss), total


def _backward(xp, g, x, target, weight, reduction, ignore_index, total_weight):
    _backward_meta(ArraySpec(g), ArraySpec(x), ArraySpec(target), weight, reduction,
                   ignore_index, total_weight)
    flat, w, valid = _picks(xp, x, target, weight, ignore_index)
    scale = xp.reshape(g, (-1,)) if reduction == 0 else \
        (g / total_weight if reduction == 1 else g)
    # an ignored target's row stays zero, whatever the scale (PyTorch skips it)
    values = xp.where(valid, -w * scale, xp.zeros((), dtype=x.dtype, device=_device(x)))
    # one entry per row, at distinct flat positions: a one-hot sum over the classes
    positions = xp.arange(x.shape[-1] * flat.shape[0], dtype=flat.dtype, device=_device(x))
    hits = xp.reshape(positions, (flat.shape[0], -1)) == xp.reshape(flat, (-1, 1))
    out = xp.where(hits, xp.reshape(values, (-1, 1)), xp.zeros((), dtype=x.dtype,
                                                               device=_device(x)))
    return xp.reshape(out, tuple(x.shape))


# Note [NumPy fast impls]: the same computations with fancy indexing.


# Note [nll_loss's common case]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# When ``ignore_index`` is no class (PyTorch's default -100), a target is ignored or out of
# bounds exactly when it is outside ``[0, classes)``, and one maximum over the targets seen
# as unsigned integers checks that (a negative one is a huge unsigned one; for a few
# targets, the minimum and maximum of their list, ``_in_classes``): below ``classes``, every
# target is a valid class and the picks need no mask.  Any other call takes the masked
# path, which finds the offending target.


def _np_picks(x, target, weight, ignore_index):
    """``(rows, classes picked, weights or None for all ones, not-ignored mask or None for
    all)``."""
    classes = x.shape[-1]
    t = target.reshape(-1)
    n = t.shape[0]
    rows = _ROWS.get(n)
    if rows is None:
        rows = _ROWS[n] = np.arange(n)
        rows.flags.writeable = False
    if n and not 0 <= ignore_index < classes and _in_classes(t, classes):
        return rows, t, None if weight is None else weight[t], None
    valid = t != ignore_index
    safe = t if valid.all() else np.where(valid, t, 0)
    if safe.size and (safe.min() < 0 or safe.max() >= classes):
        raise _out_of_bounds(safe[(safe < 0) | (safe >= classes)][0], classes)
    if weight is None:
        w = valid.astype(x.dtype)
    else:
        w = weight[safe]
        w[~valid] = 0
    return rows, safe, w, valid


def _in_classes(t, classes: int) -> bool:
    """Whether every target of the 1-d ``t`` lies in ``[0, classes)``: for a few targets from
    their list (``tolist`` and ``min``/``max`` cost a third of the reduction's 10K
    instructions at 5 targets), else one maximum of them as unsigned integers (Note
    [nll_loss's common case])."""
    if t.shape[0] <= 64:
        listed = t.tolist()
        return min(listed) >= 0 and max(listed) < classes
    return _umax(t.view(_UNSIGNED.get(t.dtype.char, t.dtype))) < classes


_ROWS: dict = {}  # n -> arange(n), read-only
_UNSIGNED = {"b": np.uint8, "h": np.uint16, "i": np.uint32, "l": np.uint64, "q": np.uint64}
_umax = np.maximum.reduce


def _np_forward(xp, x, target, weight, reduction, ignore_index):
    _check("nll_loss", x, target, weight, reduction)
    rows, safe, w, _ = _np_picks(x, target, weight, ignore_index)
    matrix = x.ndim == 2
    picked = (x if matrix else x.reshape(1, -1))[rows, safe]
    losses = np.negative(picked, picked) if w is None else picked * -w
    if reduction == 0 and matrix:  # PyTorch's total_weight: 0, except for a (C,) input
        return losses, np.zeros((), x.dtype)  # (losses has the target's shape, (N,))
    total = x.dtype.type(rows.shape[0]) if w is None else np.add.reduce(w)
    if reduction == 0:
        return losses.reshape(target.shape), total
    loss = np.add.reduce(losses)
    if reduction == 2:
        return loss, total
    if total and abs(total) != np.inf:  # the common case: nothing to silence
        return loss / total, total
    with np.errstate(invalid="ignore", divide="ignore"):  # no weight: nan, as PyTorch's
        return loss / total, total


def _np_backward(xp, g, x, target, weight, reduction, ignore_index, total_weight):
    _backward_meta(g, x, target, weight, reduction, ignore_index, total_weight)
    rows, safe, w, valid = _np_picks(x, target, weight, ignore_index)
    if reduction != 1 or (total_weight and abs(total_weight) != np.inf):
        scale = g.reshape(-1) if reduction == 0 else (g / total_weight if reduction == 1 else g)
        values = -scale if w is None else -w * scale
    else:
        with np.errstate(invalid="ignore", divide="ignore"):  # no weight: nan
            scale = g / total_weight
            values = -scale if w is None else -w * scale
    out = np.zeros((rows.shape[0], x.shape[-1]), x.dtype)
    if valid is not None and not valid.all():  # an ignored target's row stays zero
        rows, safe, values = rows[valid], safe[valid], np.broadcast_to(values, w.shape)[valid]
    out[rows, safe] = values
    return out.reshape(x.shape)


# -- test data -------------------------------------------------------------------------------


def _forward_ref(x, target, weight, reduction, ignore_index):
    x2, t = x.reshape(-1, x.shape[-1]).astype(np.float64), target.reshape(-1)
    w = np.array([0.0 if c == ignore_index else (1.0 if weight is None else weight[c])
                  for c in t])
    losses = np.array([-x2[n, c] * w[n] if c != ignore_index else 0.0
                       for n, c in enumerate(t)])
    total = w.sum()
    if reduction == 0:
        return losses.reshape(target.shape).astype(x.dtype), \
            np.asarray(total if x.ndim == 1 else 0, x.dtype)
    loss = losses.sum() / total if reduction == 1 else losses.sum()
    return np.asarray(loss, x.dtype), np.asarray(total, x.dtype)


def _targets(n, classes, rng, ignore=None):
    t = rng.integers(0, classes, n).astype(np.int64)
    if ignore is not None:
        t[0] = ignore
    return t


def _forward_samples(dtype, rng):
    # The gradcheck sweep differentiates every float argument of the first samples: those
    # have no weight (not differentiated, as in PyTorch); the backward op's first three
    # (below) also no mean, whose total_weight is not differentiated either.
    out = []
    for reduction in (0, 2, 1):
        out.append(SampleInput((make_array((5, 4), dtype, rng), _targets(5, 4, rng), None,
                                reduction, -100), name=f"(5, 4) reduction={reduction}"))
    out.append(SampleInput((make_array((3,), dtype, rng), np.asarray(1), None, 1, -100),
                           name="(3,)"))
    out.append(SampleInput((make_array((5, 4), dtype, rng), _targets(5, 4, rng, 2), None, 0,
                            2), name="(5, 4) ignore 2, reduction=0"))
    for reduction in _REDUCTIONS:
        w = np.abs(make_array((4,), dtype, rng)) + 0.5
        out.append(SampleInput((make_array((5, 4), dtype, rng), _targets(5, 4, rng, 2), w,
                                reduction, 2),
                               name=f"(5, 4) weight, ignore 2, reduction={reduction}"))
    return out


def _backward_ref(g, x, target, weight, reduction, ignore_index, total_weight):
    x2, t = x.reshape(-1, x.shape[-1]), target.reshape(-1)
    out = np.zeros(x2.shape, np.float64)
    gs = g.reshape(-1)
    for n, c in enumerate(t):
        if c == ignore_index:
            continue
        w = 1.0 if weight is None else weight[c]
        scale = gs[n] if reduction == 0 else (gs[0] / total_weight if reduction == 1
                                              else gs[0])
        out[n, c] = -w * scale
    return out.reshape(x.shape).astype(x.dtype)


def _backward_samples(dtype, rng):
    out = []
    for s in _forward_samples(dtype, rng):
        loss, total = _forward_ref(*s.args)
        g = make_array(loss.shape, dtype, rng)
        out.append(SampleInput((g, *s.args, total), name=s.name))
    return out[:2] + out[4:5] + out[2:4] + out[5:]  # no mean in the first three


def _errors():
    x = np.ones((3, 4), np.float32)
    cases = [([0, 4, 1], 1, IndexError, "nll_loss: target 4 is out of bounds for 4 classes"),
             ([0, -1, 1], 1, IndexError, "nll_loss: target -1 is out of bounds"),
             ([0, 1], 1, ValueError, r"nll_loss: expected target of shape \[3\]"),
             ([0.0, 1.0, 2.0], 1, TypeError, "nll_loss: expected an integer target"),
             ([0, 1, 2], 3, ValueError, "nll_loss: expected reduction 0")]
    return [ErrorInput(SampleInput((x, np.asarray(t), None, reduction, -100)), error, match)
            for t, reduction, error, match in cases]


defop("nll_loss_forward(Tensor self, Tensor target, Tensor? weight, int reduction, "
      "int ignore_index) -> (Tensor output, Tensor total_weight)",
      impl=_forward, cpu_impl=_np_forward, meta=_forward_meta, names=(),
      info=OpInfo(ref=_forward_ref, dtypes=FLOATS, samples=_forward_samples, errors=_errors))
# its three Tensors' arrays read directly: the generic kernel's unwrapping of an optional
# Tensor and its named-tuple result cost as much as the loss (Note [Hand-written CPU kernels])
register_arrays_direct(CATALOGUE["aten::nll_loss_forward"].functional[0],
                         partial(_np_forward, np))
defop("nll_loss_backward(Tensor grad_output, Tensor self, Tensor target, Tensor? weight, "
      "int reduction, int ignore_index, Tensor total_weight) -> Tensor",
      impl=_backward, cpu_impl=_np_backward, meta=_backward_meta, names=(),
      info=OpInfo(ref=_backward_ref, dtypes=FLOATS, samples=_backward_samples))
