"""Sampling beyond ``rand``/``randn``/``randint``: ``normal``, ``bernoulli``, ``randperm``,
``multinomial`` and the ``*_like`` factories, as PyTorch's.

Each is written with the generators' three draws (uniform, standard normal, integers: Note
[Seeding threads] in mdtensor/random.py) and catalogue ops, so a seed gives the same numbers
on every backend (Dask's chunks aside, which draw streams of their own) and the
computation runs where the tensors live:

* ``normal(mean, std)``: ``mean + std * randn`` over the broadcast shape;
* ``bernoulli(p)``: ``rand < p``, in ``p``'s dtype;
* ``randperm(n)``: the order that sorts ``n`` uniform draws (a uniformly random
  permutation: ties have probability zero in float64);
* ``multinomial(w, k)``: with replacement, the inverse of each row's cumulative
  distribution at ``k`` uniform draws; without, the ``k`` smallest exponential "arrival
  times" ``-log(u) / w`` (an exponential race: the category that arrives first is drawn
  with probability ``w_i / sum(w)``, then the next among the rest, which is sampling
  without replacement).

As PyTorch's, the results do not require grad (``normal``'s gradient with respect to its
parameters is not defined by PyTorch either: it gives zeros).
"""

from __future__ import annotations

import math

from ._dtypes import as_dtype, float64, int64
from .autograd import no_grad

__all__ = ["bernoulli", "multinomial", "normal", "rand_like", "randint_like", "randn_like",
           "randperm"]


def _aten():
    from mdtensor.dispatch.namespaces import aten_calls

    return aten_calls


def _is_tensor(v) -> bool:
    from .tensors.tensor import Tensor

    return isinstance(v, Tensor)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None):
    """Samples of ``N(mean, std**2)``: ``mean`` and ``std`` tensors (broadcast together) or
    numbers (then ``size`` gives the shape)."""
    from . import random

    aten = _aten()
    tensors = [v for v in (mean, std) if _is_tensor(v)]
    if tensors:
        if size is not None:
            raise TypeError("normal: size= is for float mean and std; the shape of tensor "
                            "arguments is their broadcast shape")
        shape = _broadcast(*(tuple(t.shape) for t in tensors))
        for t in tensors:
            if t.dtype.kind not in "fc":
                raise TypeError(f"normal: expected floating mean and std, got {t.dtype.name}")
        dtype = dtype if dtype is not None else tensors[0].dtype
        device = device if device is not None else tensors[0].device
    else:
        if size is None:
            raise TypeError("normal: with float mean and std, give size= (the shape)")
        shape = (size,) if isinstance(size, int) else tuple(size)
    if _is_tensor(std):
        if bool(aten.any(aten.lt(std.detach(), 0))):
            raise ValueError("normal: expected all elements of std >= 0.0")
    elif std < 0:
        raise ValueError(f"normal: expects std >= 0.0, but found std {std}")
    with no_grad():
        z = random.randn(shape, dtype=dtype, device=device, generator=generator)
        m = mean.detach() if _is_tensor(mean) else mean
        s = std.detach() if _is_tensor(std) else std
        return z * s + m


def _broadcast(*shapes):
    """The broadcast shape of ``shapes`` (the Array API's rule), or a ValueError."""
    ndim = max((len(s) for s in shapes), default=0)
    out = []
    for i in range(-ndim, 0):
        sizes = {s[i] for s in shapes if len(s) >= -i} - {1}
        if len(sizes) > 1:
            raise ValueError(f"shapes {', '.join(str(tuple(s)) for s in shapes)} cannot be "
                             f"broadcast together")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def bernoulli(input, p=None, *, generator=None):
    """0s and 1s in ``input``'s dtype, each 1 with probability ``input`` (or ``p``)."""
    from . import random

    aten = _aten()
    if not _is_tensor(input):
        raise TypeError(f"bernoulli: expected a Tensor of probabilities, got "
                        f"{type(input).__name__}")
    if input.dtype.kind != "f":
        raise TypeError(f"bernoulli: expected a floating tensor, got {input.dtype.name}")
    probs = input.detach() if p is None else p
    if not _is_tensor(probs) and not 0 <= probs <= 1:
        raise ValueError(f"bernoulli: expects 0 <= p <= 1, but got p={probs}")
    if _is_tensor(probs) and input.numel() and bool(aten.any(aten.logical_or(
            aten.lt(probs, 0), aten.gt(probs, 1)))):
        raise ValueError("bernoulli: expected all probabilities in [0, 1]")
    with no_grad():
        u = random.rand(tuple(input.shape), dtype=float64, device=input.device,
                        generator=generator)
        return aten.astype(aten.lt(u, probs), input.dtype)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1``."""
    from . import random

    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
    u = random.rand(n, dtype=float64, device=device, generator=generator)
    out = _aten().argsort(u)
    d = as_dtype(dtype) if dtype is not None else int64
    return out if d is int64 else _aten().astype(out, d)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """Indices drawn from the categories of each row of ``input`` (non-negative weights,
    1-D or 2-D) with probability proportional to the weights."""
    from . import random

    aten = _aten()
    if not _is_tensor(input) or input.ndim not in (1, 2):
        raise ValueError("multinomial: prob_dist must be 1 or 2 dim")
    if input.dtype.kind != "f":
        raise TypeError(f"multinomial: expected a floating tensor, got {input.dtype.name}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
        raise ValueError(f"multinomial: cannot sample n_sample <= 0 samples, got "
                         f"{num_samples!r}")
    w = aten.astype(input.detach(), float64)
    rows = w if w.ndim == 2 else aten.reshape(w, (1, -1))
    k = rows.shape[1]
    if bool(aten.any(aten.lt(rows, 0))) or not bool(aten.all(aten.isfinite(rows))):
        raise ValueError("multinomial: probability tensor contains either inf, nan or "
                         "element < 0")
    positive = aten.sum(aten.astype(aten.gt(rows, 0), int64), 1)
    if bool(aten.any(aten.eq(positive, 0))):
        raise ValueError("multinomial: invalid multinomial distribution (sum of "
                         "probabilities <= 0)")
    if not replacement and (num_samples > k or bool(aten.any(aten.lt(positive, num_samples)))):
        raise ValueError("multinomial: invalid multinomial distribution (with "
                         "replacement=False, not enough non-negative category to sample)")
    u = random.rand((rows.shape[0], num_samples if replacement else k), dtype=float64,
                    device=input.device, generator=generator)
    if replacement:
        cdf = aten.cumulative_sum(rows, 1)
        cdf = aten.div(cdf, aten.narrow(cdf, 1, k - 1, 1))
        idx = aten.stack([aten.searchsorted(aten.contiguous(cdf[i]), u[i], side="right")
                          for i in range(rows.shape[0])])
        idx = aten.clamp(idx, max=k - 1)
    else:
        # the exponential race: arrival -log(u) / w (a zero weight never arrives)
        live = aten.gt(rows, 0)
        arrival = aten.where(live, aten.div(aten.neg(aten.log1p(aten.neg(u))),
                                            aten.where(live, rows, 1.0)), math.inf)
        idx = aten.topk(arrival, num_samples, 1, False)[1]
    return idx if input.ndim == 2 else aten.reshape(idx, (-1,))


def _like(name, draw):
    def like(input, *args, dtype=None, device=None, generator=None, requires_grad=False,
             **kwargs):
        return draw(input, *args, dtype=dtype if dtype is not None else input.dtype,
                    device=device if device is not None else input.device,
                    generator=generator, requires_grad=requires_grad, **kwargs)
    like.__name__ = like.__qualname__ = name
    like.__doc__ = f"``{name[:-5]}`` of ``input``'s shape, dtype and device (PyTorch's)."
    return like


def _rand(input, *, dtype, device, generator, requires_grad):
    from . import random

    return random.rand(tuple(input.shape), dtype=dtype, device=device, generator=generator,
                       requires_grad=requires_grad)


def _randn(input, *, dtype, device, generator, requires_grad):
    from . import random

    return random.randn(tuple(input.shape), dtype=dtype, device=device, generator=generator,
                        requires_grad=requires_grad)


def _randint(input, low=0, high=None, *, dtype, device, generator, requires_grad):
    from . import random

    if high is None:
        low, high = 0, low
    out = random.randint(low, high, tuple(input.shape), dtype=dtype, device=device,
                         generator=generator)
    if requires_grad:
        out.requires_grad_(True)
    return out


rand_like = _like("rand_like", _rand)
randn_like = _like("randn_like", _randn)
randint_like = _like("randint_like", _randint)
