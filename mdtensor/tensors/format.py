"""PyTorch-style tensor repr: ``tensor([1., 2.], dtype=md.float64)``, and the print options
(``md.set_printoptions``).

Note [Lazy reprs]
~~~~~~~~~~~~~~~~~
A tensor of a lazy backend (Dask) has no values until they are computed, and computing a
large one in a ``repr`` (a debugger, a notebook cell) could take minutes.  Its repr shows
the values only up to ``LAZY_REPR_LIMIT`` elements (what NumPy prints without eliding),
and otherwise ``...`` with the size and dtype, as a meta tensor's; a chunked backend's
tensors also show their largest chunk per dimension (``chunksize=``).  A small result
still computes its graph, however large the inputs behind it (``repr(loss)``).

Note [PyTorch's number format]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The values print as ``torch/_tensor_str.py`` prints them, so a session reads the same in
both libraries: one format for the whole tensor, chosen from its nonzero finite values (of
the elided tensor when it has more than ``threshold`` elements).  Floats that are all
integers print as ``1.`` (``int_mode``); other floats with ``precision`` decimals
(``0.0000, 1.5000``); either switches to ``1.0000e+08`` notation when the largest magnitude
exceeds 1e8 or 1000 times the smallest, or the smallest is below 1e-4, unless ``sci_mode``
says otherwise.  Every element is padded to the widest; rows are
wrapped at ``linewidth`` and elided to ``edgeitems`` at each end of each dimension.
Complex numbers format their real and imaginary parts apart (``1.0000+2.0000j``).
The options are process-wide, as PyTorch's are (a thread started before
``set_printoptions`` prints with the new options too), so they live in one module-level
object rather than in a context variable.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from mdtensor import _dtypes
from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.dispatch.tls import ExcludeGuard
from mdtensor.tensors.layout import SPARSE, layout_of, sparse_csr

__all__ = ["get_printoptions", "set_printoptions", "tensor_repr"]


@dataclasses.dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


_OPTS = _PrintOptions()  # Note [PyTorch's number format]: process-wide, as PyTorch's
_PROFILES = {"default": _PrintOptions(), "short": _PrintOptions(precision=2, edgeitems=2),
             "full": _PrintOptions(threshold=math.inf)}


def set_printoptions(precision: int | None = None, threshold: float | None = None,
                     edgeitems: int | None = None, linewidth: int | None = None,
                     profile: str | None = None, sci_mode: bool | None = None) -> None:
    """Set how tensors print, as ``torch.set_printoptions`` (Note [PyTorch's number format]).

    Args:
        precision: digits after the decimal point (4).
        threshold: the number of elements above which a repr elides (1000).
        edgeitems: the items shown at each end of each elided dimension (3).
        linewidth: the characters per line (80).
        profile: ``"default"``, ``"short"`` or ``"full"``: a preset for the four above,
            applied before them.
        sci_mode: True or False to force or forbid scientific notation; None (the default,
            and what any call without it sets) lets each tensor choose.

    Raises:
        ValueError: an unknown profile, or a negative or non-integer count.
    """
    if profile is not None:
        if profile not in _PROFILES:
            raise ValueError(f"set_printoptions: profile must be one of "
                             f"{', '.join(map(repr, _PROFILES))}, got {profile!r}")
        base = _PROFILES[profile]
        precision = base.precision if precision is None else precision
        threshold = base.threshold if threshold is None else threshold
        edgeitems = base.edgeitems if edgeitems is None else edgeitems
        linewidth = base.linewidth if linewidth is None else linewidth
    for name, v in (("precision", precision), ("edgeitems", edgeitems),
                    ("linewidth", linewidth)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"set_printoptions: {name} must be a non-negative int, got {v!r}")
    if threshold is not None and not threshold >= 0:
        raise ValueError(f"set_printoptions: threshold must be non-negative, got {threshold!r}")
    if sci_mode not in (None, True, False):
        raise ValueError(f"set_printoptions: sci_mode must be True, False or None, got "
                         f"{sci_mode!r}")
    new = dataclasses.replace(_OPTS, **{k: v for k, v in (
        ("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
        ("linewidth", linewidth)) if v is not None}, sci_mode=sci_mode)
    for field in dataclasses.fields(new):  # all checked: nothing changes on bad input
        setattr(_OPTS, field.name, getattr(new, field.name))


def get_printoptions() -> dict:
    """The current print options, as a dict of ``set_printoptions``' arguments."""
    return dataclasses.asdict(_OPTS)


def _implicit_dtypes() -> tuple:
    """The dtypes PyTorch's repr leaves implicit: the default float dtype and its complex
    one, int64 and bool."""
    default = _dtypes.get_default_dtype()
    complex_ = _dtypes.complex128 if default is _dtypes.float64 else _dtypes.complex64
    return default, complex_, _dtypes.int64, _dtypes.bool_

#: Note [Lazy reprs]
LAZY_REPR_LIMIT = 1000


def tensor_repr(t) -> str:
    if t._ks & SPARSE:
        return _sparse_repr(t)
    dtype = t.dtype
    extras = []
    if t._device.type != "cpu":
        extras.append(f"device='{t._device}'")
    caps = t._device.backend.capabilities
    lazy = t._device.type == "meta" or (caps.lazy and t.numel() > LAZY_REPR_LIMIT)
    if lazy:
        extras.insert(0, f"size={t.shape}")
        body = "..."
    else:
        arr = np.asarray(t._device.backend.to_numpy(t._data))
        if arr.size == 0:
            if arr.ndim != 1:  # PyTorch's: the size of an empty tensor but (0,)
                extras.insert(0, f"size={tuple(arr.shape)}")
            body = "[]"
        else:
            if not _OPTS.edgeitems:  # PyTorch's: nothing shown, so the size is
                extras.append(f"size={tuple(arr.shape)}")
            body = _tensor_str(arr, len("tensor("))
    if caps.chunked:
        extras.append(f"chunksize={_chunksize(t.chunks)}")
    if lazy or (dtype not in _implicit_dtypes() if t.numel() else
                dtype is not _dtypes.get_default_dtype()):
        extras.append(f"dtype=md.{dtype.name}")
    _autograd_extras(t, extras)
    return "tensor(" + _with_suffixes(body, extras, len("tensor(")) + ")"


def _autograd_extras(t, extras) -> None:
    ag = t._ag
    if ag is not None:
        grad_fn = t.grad_fn  # a stale view's remade history (Note [Stale views])
        if grad_fn is not None:
            extras.append(f"grad_fn=<{grad_fn.name()}>")
        elif ag.requires_grad:
            extras.append("requires_grad=True")


def _with_suffixes(body: str, suffixes: list, indent: int) -> str:
    """PyTorch's ``_add_suffixes``: each on the last line while it fits ``linewidth``."""
    out = [body]
    last = len(body) - body.rfind("\n") + 1
    for suffix in suffixes:
        if last + len(suffix) + 2 > _OPTS.linewidth:
            out.append(",\n" + " " * indent + suffix)
            last = indent + len(suffix)
        else:
            out.append(", " + suffix)
            last += len(suffix) + 2
    return "".join(out)


# -- the values (Note [PyTorch's number format]) ---------------------------------------------


class _Formatter:
    """One number format for a whole (real) array: PyTorch's ``_Formatter``."""

    def __init__(self, arr: np.ndarray):
        self.floating = arr.dtype.kind == "f"
        self.int_mode, self.sci_mode, self.width = True, False, 1
        p = _OPTS.precision
        if not self.floating:
            for v in arr.reshape(-1).tolist():
                self.width = max(self.width, len(f"{v}"))
        else:
            flat = arr.reshape(-1)
            vals = flat[np.isfinite(flat) & (flat != 0)].astype(np.float64)
            if not vals.size:
                return  # PyTorch's: no number to choose a format by, nor sci_mode's
            mags = np.abs(vals)
            lo, hi = float(mags.min()), float(mags.max())
            self.int_mode = bool(np.all(vals == np.ceil(vals)))
            self.sci_mode = (hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4) \
                if _OPTS.sci_mode is None else _OPTS.sci_mode
            for v in vals.tolist():
                if self.sci_mode:
                    w = len(f"{v:.{p}e}")
                elif self.int_mode:
                    w = len(f"{v:.0f}") + 1
                else:
                    w = len(f"{v:.{p}f}")
                self.width = max(self.width, w)

    def format(self, v) -> str:
        p = _OPTS.precision
        if not self.floating:
            s = f"{v}"
        elif self.sci_mode:
            s = f"{v:{self.width}.{p}e}"
        elif self.int_mode:
            s = f"{v:.0f}" + ("" if math.isinf(v) or math.isnan(v) else ".")
        else:
            s = f"{v:.{p}f}"
        return " " * (self.width - len(s)) + s


def _summarized(arr: np.ndarray) -> np.ndarray:
    """The elements a summarized repr shows (PyTorch's ``get_summarized_data``)."""
    e = _OPTS.edgeitems
    if arr.ndim == 0:
        return arr
    if arr.ndim == 1:
        return np.concatenate([arr[:e], arr[-e:]]) if arr.shape[0] > 2 * e else arr
    if not e:
        return arr[tuple(slice(0, 0) for _ in arr.shape)]
    rows = list(range(e)) + list(range(arr.shape[0] - e, arr.shape[0])) \
        if arr.shape[0] > 2 * e else range(arr.shape[0])
    return np.stack([_summarized(arr[i]) for i in rows])


def _tensor_str(arr: np.ndarray, indent: int) -> str:
    if arr.dtype.kind == "f" and arr.dtype.itemsize < 4 or arr.dtype.name == "bfloat16":
        arr = arr.astype(np.float32)
    summarize = arr.size > _OPTS.threshold
    shown = _summarized(arr) if summarize else arr
    if arr.dtype.kind == "c":
        fmt = (_Formatter(np.real(shown)), _Formatter(np.imag(shown)))
    else:
        fmt = (_Formatter(shown), None)
    return _nested(arr, indent, summarize, fmt)


def _value(v, fmt) -> str:
    real, imag = fmt
    if imag is None:
        return real.format(v)
    im = (imag.format(v.imag) + "j").lstrip()
    return real.format(v.real) + (im if im[0] in "+-" else "+" + im)


def _nested(arr: np.ndarray, indent: int, summarize: bool, fmt) -> str:
    e = _OPTS.edgeitems
    if arr.ndim == 0:
        return _value(arr.item(), fmt)
    if arr.ndim == 1:
        width = fmt[0].width + 2 + (fmt[1].width + 1 if fmt[1] is not None else 0)
        per_line = max(1, (_OPTS.linewidth - indent) // width)
        if summarize and not e:
            data = ["..."]
        elif summarize and arr.shape[0] > 2 * e:
            data = [_value(v, fmt) for v in arr[:e].tolist()] + [" ..."] + \
                [_value(v, fmt) for v in arr[-e:].tolist()]
        else:
            data = [_value(v, fmt) for v in arr.tolist()]
        lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    n = arr.shape[0]
    if summarize and n > 2 * e:
        slices = [_nested(arr[i], indent + 1, summarize, fmt) for i in range(e)] + ["..."] + \
            [_nested(arr[i], indent + 1, summarize, fmt) for i in range(n - e, n)]
    else:
        slices = [_nested(arr[i], indent + 1, summarize, fmt) for i in range(n)]
    return "[" + ("," + "\n" * (arr.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _sparse_repr(t) -> str:
    """PyTorch's: the index and value tensors, then size, nnz and layout."""
    layout = layout_of(t)
    with ExcludeGuard(AUTOGRAD_FUNCTIONALITY):  # the parts, not a record of reading them
        if layout is sparse_csr:
            parts = [("crow_indices", aten.crow_indices(t)), ("col_indices",
                                                            aten.col_indices(t))]
        else:  # as stored, coalesced or not (PyTorch shows _indices() and _values())
            parts = [("indices", aten._indices(t))]
        parts.append(("values", aten._values(t)))
    pad = " " * len("tensor(")
    lines = []
    dtype_text = f", dtype=md.{t.dtype.name})"
    for name, part in parts:
        text = tensor_repr(part)
        if name == "values" and text.endswith(dtype_text):  # shown once, below
            text = text[:-len(dtype_text)] + ")"
        lines.append(name + "=" + text.replace("\n", "\n" + " " * (len(name) + 1) + pad))
    extras = [f"size={t.shape}", f"nnz={t.nnz}"]
    if t.dtype not in _implicit_dtypes():
        extras.append(f"dtype=md.{t.dtype.name}")
    extras.append(f"layout={layout!r}")
    if t._device.type != "cpu":
        extras.append(f"device='{t._device}'")
    _autograd_extras(t, extras)
    return "tensor(" + (",\n" + pad).join(lines + [", ".join(extras)]) + ")"


def _chunksize(chunks) -> tuple:
    """The largest chunk along each dimension (Dask's ``chunksize``)."""
    return tuple(max(c) if c else 0 for c in chunks)
