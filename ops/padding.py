"""``pad``: PyTorch's ``nn.functional.pad`` (``md.pad``): ``pad`` lists (before, after)
amounts for the last dimension first, then the one before it, ...; ``mode`` is
``"constant"`` (``value``, 0 by default; negative amounts crop), ``"reflect"`` (mirrored
without repeating the edge), ``"replicate"`` (the edge repeated) or ``"circular"`` (wrapped).

CompositeImplicitAutograd: a constant pad is ``cat`` with filled blocks (``narrow`` for a
crop), the other modes a ``take`` of computed indices along each padded dimension, so
gradients (the scatter-add of ``take``'s rule for the repeated elements), Meta kernels and
every backend come from those ops.  PyTorch's rules are kept: an even-length ``pad`` of at
most twice the dimensions; for the other modes 1, 2 or 3 padded dimensions of a tensor with
one or two more dimensions (batched or not), non-empty, and for ``reflect`` amounts smaller
than the size (``circular``: no larger).
"""

from __future__ import annotations

import numpy as np

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import namespaces as _namespaces

from ._composite import names_op
from ._cpu_kernels import register_cpu
from ._decl import ErrorInput, OpInfo, SampleInput, defop
from ._samples import make_array
from .elementwise import ALL

__all__: list[str] = []  # importing the chapter declares its ops; it exports no names

aten = _namespaces.aten._calls

_MODES = ("constant", "reflect", "replicate", "circular")


def _check(x, pad, mode):
    if mode not in _MODES:
        raise ValueError(f"pad: mode must be one of {', '.join(_MODES)}, got '{mode}'")
    if len(pad) % 2:
        raise ValueError("pad: Padding length must be divisible by 2")
    k = len(pad) // 2
    if k > x.ndim:
        raise ValueError(f"pad: Padding length should be less than or equal to two times the "
                         f"input dimension but got padding length {len(pad)} and input of "
                         f"dimension {x.ndim}")
    if mode != "constant":
        if k not in (1, 2, 3) or x.ndim not in (k + 1, k + 2):
            raise ValueError(f"pad: Padding size {len(pad)} is not supported for {x.ndim}D "
                             f"input tensor (mode '{mode}' pads 1, 2 or 3 trailing dimensions "
                             f"of a tensor with one or two more)")
        if mode != "circular" and any(  # (the batch may be empty)
                s == 0 for s in tuple(x.shape)[x.ndim - k - 1:]):
            raise ValueError(f"pad: Expected a tensor with possibly 0 batch size and other "
                             f"non-zero dimensions for input, but got: {list(x.shape)}")
    return k


def _pad(x, pad, mode="constant", value=None):
    from mdtensor.tensors.factories import asarray

    pad = [int(p) for p in pad]
    k = _check(x, pad, mode)
    if mode == "constant":
        fill = 0 if value is None else value
        if type(fill) is int and x.dtype.kind in "iu" and max(pad) > 0:  # a value it fills
            info = np.iinfo(np.dtype(x.dtype.numpy))  # is in range, as PyTorch's
            if not info.min <= fill <= info.max:
                raise OverflowError(f"pad: value {fill} cannot be converted to "
                                    f"{x.dtype.name} without overflow (range [{info.min}, "
                                    f"{info.max}])")
        for i in range(k):
            d = x.ndim - 1 - i
            before, after = pad[2 * i], pad[2 * i + 1]
            if x.shape[d] + min(before, 0) + min(after, 0) < 0:  # the crops take the input's
                raise ValueError(f"pad: the negative padding ({before}, {after}) crops more "
                                 f"than the input size {x.shape[d]} of dimension {d}")
            x = _constant_side(x, d, before, fill, front=True)
            x = _constant_side(x, d, after, fill, front=False)
        return x
    if value is not None and value != 0:
        raise ValueError(f"pad: Padding mode \"{mode}\" doesn't take in value argument")
    for i in range(k):
        d = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        n = x.shape[d]
        if mode == "reflect" and (before >= n or after >= n):
            raise ValueError(f"pad: Padding size should be less than the corresponding input "
                             f"dimension, but got: padding ({before}, {after}) at dimension "
                             f"{d} of input {list(x.shape)}")
        kept = n + min(before, 0) + min(after, 0)  # (circular pads wrap around it)
        if mode == "circular" and (kept < 0 or kept == 0 and max(before, after) > 0):
            raise ValueError(f"pad: the negative padding ({before}, {after}) leaves dimension "
                             f"{d} of input {list(x.shape)} nothing to wrap around")
        if mode == "circular" and (before > kept or after > kept):
            raise ValueError("pad: Padding value causes wrapping around more than once.")
        x = aten.take(x, asarray(indices(mode, n, before, after), device=x.device), axis=d)
    return x


def indices(mode: str, n: int, before: int, after: int) -> np.ndarray:
    """The positions along a dimension of size ``n`` that a ``mode`` pad of ``(before,
    after)`` takes, as int64 (the composite's ``take``; the gradient's ``index_add``)."""
    if mode == "circular":  # around what the crops keep, as PyTorch's: (1, -1) of 0 1 2 3
        kept = n + min(before, 0) + min(after, 0)  # is 2 0 1 2
        idx = max(-before, 0) + np.arange(-max(before, 0), kept + max(after, 0)) % kept
        return idx.astype(np.int64)
    idx = np.arange(-before, n + after)
    if mode == "reflect":
        idx = np.abs(idx)
        idx = np.where(idx > n - 1, 2 * (n - 1) - idx, idx)
    else:
        idx = np.clip(idx, 0, n - 1)
    return idx.astype(np.int64)


def _constant_side(x, d, amount, fill, front):
    if amount == 0:
        return x
    n = x.shape[d]
    if amount < 0:  # a crop
        keep = max(n + amount, 0)
        return aten.narrow(x, d, min(-amount, n) if front else 0, keep)
    shape = list(x.shape)
    shape[d] = amount
    block = aten.full(tuple(shape), fill, dtype=x.dtype, device=x.device)
    return aten.cat([block, x] if front else [x, block], axis=d)


def _ref(x, pad, mode="constant", value=None):
    k = len(pad) // 2
    width = [(0, 0)] * (x.ndim - k) + [(pad[2 * i], pad[2 * i + 1]) for i in
                                       reversed(range(k))]
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
               "circular": "wrap"}[mode]
    if mode == "constant":
        crop = tuple(slice(-b if b < 0 else None, a if a < 0 else None) for b, a in width)
        width = [(max(b, 0), max(a, 0)) for b, a in width]
        return np.pad(x[crop], width, constant_values=0 if value is None else value)
    return np.pad(x, width, mode=np_mode)


def _samples(dtype, rng):
    x = make_array((2, 3, 4), dtype, rng)
    return [SampleInput((x, (1, 2))), SampleInput((x, (1, 1, 2, 0), "reflect")),
            SampleInput((x, (2, 3), "replicate")), SampleInput((x, (1, 2, 0, 1), "circular")),
            SampleInput((x, (-1, 2, 1, 0)), {"value": 1})]


_decl = defop(
    "pad(Tensor self, int[] pad, str mode=\"constant\", Scalar? value=None) -> Tensor",
    composite=names_op("pad")(_pad),
    info=OpInfo(ref=_ref, dtypes=ALL, samples=_samples, errors=lambda: [
        ErrorInput(SampleInput((np.zeros((2, 3)), (1,))), ValueError,
                   "pad: Padding length must be divisible by 2"),
        ErrorInput(SampleInput((np.zeros((2, 2)), (1, 1, 1, 1, 1, 1))), ValueError,
                   "pad: Padding length should be less than or equal to two times"),
        ErrorInput(SampleInput((np.zeros((1, 3)), (3, 0), "reflect")), ValueError,
                   "Padding size should be less than the corresponding input dimension"),
        ErrorInput(SampleInput((np.zeros(5), (1, 1), "replicate")), ValueError,
                   "pad: Padding size 2 is not supported for 1D input tensor"),
        # the crops take the input's own elements, as PyTorch's: (2, -1) of an empty axis
        ErrorInput(SampleInput((np.zeros((2, 0)), (2, -1))), ValueError,
                   r"pad: the negative padding \(2, -1\) crops more than the input size 0")]))


# Note [The CPU kernel of pad]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A constant pad that crops nothing, of a NumPy array by a value of its kind (an int for an
# integer tensor, an int or float for a floating one; 0 by default), is one ``np.full`` of
# the result's shape with the input copied into its middle: the composite's ``full`` and
# ``cat`` per side redispatch four to eight ops.  Every other call -- the other modes, crops,
# bad arguments -- goes to the composite, whose checks raise the op's errors.  As for
# PyTorch's ``constant_pad_nd``, a backend kernel means a real derivative
# (ops/padding_derivatives.py) rather than the decomposition's, on the CPU.

_FILLS = {"f": (int, float), "c": (int, float), "i": (int,), "u": (int,)}


def _cpu_pad(generic):
    def kernel(x, pad, mode="constant", value=None):
        a = x._data
        kinds = _FILLS.get(a.dtype.kind)
        if (mode == "constant" and kinds is not None
                and (value is None or type(value) in kinds)
                and len(pad) % 2 == 0 and len(pad) // 2 <= a.ndim):
            shape = list(a.shape)
            middle = [slice(None)] * a.ndim
            for i in range(len(pad) // 2):
                before, after = pad[2 * i], pad[2 * i + 1]
                if type(before) is not int or type(after) is not int or before < 0 or after < 0:
                    break
                d = a.ndim - 1 - i
                middle[d] = slice(before, before + shape[d])
                shape[d] += before + after
            else:
                try:
                    out = np.full(shape, 0 if value is None else value, a.dtype)
                except (OverflowError, ValueError, TypeError):  # the composite's error
                    return generic(x, pad, mode, value)
                out[tuple(middle)] = a
                return x._device.wrap(out)
        return generic(x, pad, mode, value)
    return kernel


register_cpu(_decl.functional[0], _cpu_pad, DispatchKey.CompositeImplicitAutograd)
