"""``md.asarray`` and ``md.tensor``: tensors from Python data, arrays and other tensors.

These are Python functions rather than catalogue ops (as ``torch.tensor`` is not an aten
op): their input is arbitrary Python data.  Tensors passed in go through ops (``to``,
``clone``), so autograd and modes see those; a tensor made from data goes through
``lift_fresh`` while a mode is active (Note [lift_fresh] in ops/creation.py).
"""

from __future__ import annotations

import numpy as np

from mdtensor import backends
from mdtensor._dtypes import as_dtype, default_complex_dtype, get_default_dtype, int64
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.tensors.device import Device, as_device
from mdtensor.tensors.tensor import Tensor

_PYTHON = DispatchKey.Python.value

__all__ = ["asarray", "check_size", "from_dlpack", "from_numpy", "tensor"]


def _py_default_dtype(obj):
    """Note [Default dtypes] (ops/creation.py): Python floats -> the default float dtype,
    ints -> int64."""
    if isinstance(obj, bool):
        return None
    if isinstance(obj, float):
        return get_default_dtype()
    if isinstance(obj, int):
        return int64
    if isinstance(obj, complex):
        return default_complex_dtype()
    return None


def _infer_from_sequence(obj):
    arr = np.asarray(obj)
    if arr.dtype == np.float64:
        return get_default_dtype()
    if arr.dtype == np.complex128:
        return default_complex_dtype()
    if arr.dtype.kind in "iu" and arr.dtype != np.uint64:
        return int64
    if arr.dtype.kind == "O":
        raise TypeError(f"asarray: cannot convert {type(obj).__name__} of mixed or "
                        f"non-numeric elements to a tensor")
    return None


def asarray(obj, /, *, dtype=None, device=None, copy=None, requires_grad=False,
            chunks=None) -> Tensor:
    """Convert ``obj`` to a tensor (Array API ``asarray`` plus ``requires_grad`` and
    ``chunks``).

    Args:
        obj: a Tensor, an array of any library supporting DLPack or the buffer protocol,
            a Python scalar, or a (nested) sequence of them.
        dtype: the result dtype; inferred when None (Python floats give the default float dtype).
        device: the result device; ``obj``'s device for tensors, else the default.
        copy: True always copies; False never copies (ValueError if it must); None copies
            only when needed.
        requires_grad: make the result a leaf that requires grad.
        chunks: how a chunked backend (``device="dask"``) splits the result: anything
            ``dask.array.from_array`` takes (default: the backend's, Note [Dask chunks] in
            backends/dask_backend.py).

    Raises:
        ValueError: ``copy=False`` but a copy is needed; ``chunks`` for a device whose
            backend has no chunks.
        TypeError: ``obj`` cannot be converted.
    """
    if dtype is not None:
        dtype = as_dtype(dtype)
    if chunks is not None:
        return _chunked(obj, dtype, device, copy, requires_grad, chunks)
    if isinstance(obj, Tensor):
        out = obj
        dev = as_device(device) if device is not None else obj._device
        if dev is not obj._device:
            if copy is False:
                raise ValueError("asarray: copy=False but the tensor is on another device")
            out = out.to(dev)
        if dtype is not None and dtype is not out.dtype:
            if copy is False:
                raise ValueError("asarray: copy=False but a dtype conversion is needed")
            out = out.to(dtype=dtype)
        elif copy and out is obj:
            out = out.clone()
        if requires_grad:
            out = out.detach() if out is obj else out
            out.requires_grad_(True)
        return out
    dev = as_device(device)
    backend = dev.backend
    if not isinstance(obj, (np.ndarray, list, tuple)) and _foreign(obj, backend):
        # Note [Arrays of other devices]
        return asarray(from_dlpack(obj), dtype=dtype, device=dev,
                       copy=None if copy is None else copy, requires_grad=requires_grad)
    if dtype is None and not hasattr(obj, "__array_namespace__") and not isinstance(
            obj, np.ndarray) and not isinstance(obj, np.generic):
        dtype = _py_default_dtype(obj)
        if dtype is None and isinstance(obj, (list, tuple)):
            try:
                dtype = _infer_from_sequence(obj)
            except ValueError as e:  # ragged
                raise _conversion_error(obj, e) from None
    native = backend.native_dtype(dtype) if dtype is not None else None
    if isinstance(obj, (str, bytes)) or obj is None:
        raise TypeError(f"asarray: can't convert a {type(obj).__name__} to a tensor; "
                        f"expected numbers, (nested) sequences of numbers, or arrays")
    try:
        if copy is False:
            data = backend.asarray(obj, dtype=native, index=dev.index, copy=False)
        else:
            if isinstance(obj, (list, tuple)) and any(isinstance(x, Tensor)
                                                      for x in _flat(obj)):
                obj = [_to_host(x) for x in obj]
            data = backend.asarray(obj, dtype=native, index=dev.index, copy=copy)
    except (ValueError, TypeError) as e:
        raise _conversion_error(obj, e) from None
    try:
        t = dev.wrap(data)
        t.dtype  # noqa: B018 - a dtype mdtensor has no match for (object, str, ...) raises
    except TypeError as e:
        raise _conversion_error(obj, e) from None
    if dispatch_tls.get()[0] & _PYTHON:  # a mode is on: Note [lift_fresh] in ops/creation.py
        t = aten_calls.lift_fresh(t)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _chunked(obj, dtype, device, copy, requires_grad, chunks) -> Tensor:
    """``asarray`` with ``chunks=``: host data is split into chunks as it becomes a device
    array; a tensor is converted first, then rechunked by its backend (``Backend.rechunk``:
    Dask's runs the op ``md.dask.rechunk``)."""
    src = obj._device if isinstance(obj, Tensor) else None
    dev = as_device(device) if device is not None else src or as_device(None)
    if not dev.backend.capabilities.chunked:
        raise ValueError(f"asarray: chunks= applies to chunked backends such as 'dask'; "
                         f"device {dev} has no chunks")
    if isinstance(obj, Tensor):
        out = dev.backend.rechunk(asarray(obj, dtype=dtype, device=dev, copy=copy), chunks)
        if requires_grad:
            out.requires_grad_(True)
        return out
    if not isinstance(obj, dev.backend.array_type):
        # host data first, with mdtensor's dtype rules (Python floats give the default float dtype)
        obj = asarray(obj, dtype=dtype, device="cpu", copy=False if copy is False else None
                      )._data
    native = dev.backend.native_dtype(dtype) if dtype is not None else None
    t = dev.wrap(dev.backend.asarray(obj, dtype=native, index=dev.index, copy=copy,
                                     chunks=chunks))
    if requires_grad:
        t.requires_grad_(True)
    return t


# Note [Arrays of other devices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``md.asarray(cupy_array)`` with the CPU as default device, or ``md.asarray(numpy_array,
# device="cuda")``: the target backend's own ``asarray`` takes what lives where it
# computes, but NumPy refuses device memory ("implicit conversion to a NumPy array is not
# allowed").  An array that says (``__dlpack_device__``) it lives on another backend's
# device is imported there first, sharing its memory (``from_dlpack``), then moved with
# ``to`` -- the copy PyTorch's ``torch.asarray(x, device=...)`` makes too.


def _foreign(obj, backend) -> bool:
    """Whether ``obj`` is an array that another loadable backend's device holds."""
    dev = getattr(obj, "__dlpack_device__", None)
    if dev is None or isinstance(obj, (Tensor, backend.array_type)):
        return False
    try:
        dl_type = int(dev()[0])
    except Exception:  # noqa: BLE001 - not a usable DLPack producer: the backend decides
        return False
    kind = backends.device_type_for_dlpack(dl_type)
    if kind in (None, backend.device_type):
        return False
    try:
        backends.get(kind)
    except (RuntimeError, ValueError):  # not installed here: the target backend decides
        return False
    return True


def _conversion_error(obj, e: Exception) -> Exception:
    """asarray's own error for data the backend refused (Note [Errors from the backend] in
    ops/_errors.py): a ragged sequence, elements that are not numbers."""
    if isinstance(obj, (list, tuple)):
        try:
            shape = np.asarray(obj, dtype=object).shape
        except ValueError:
            shape = None
        lengths = {len(x) if isinstance(x, (list, tuple)) else None for x in obj}
        if len(lengths) > 1 or shape is None or "inhomogeneous" in str(e):
            return ValueError("asarray: the nested sequence is ragged (its rows have "
                              "different lengths); expected a rectangular sequence")
    if isinstance(e, ValueError) and "copy" in str(e).lower():
        return ValueError(f"asarray: {e}")
    return TypeError(f"asarray: can't convert a {type(obj).__name__} to a tensor (its "
                     f"elements are not numbers); expected numbers, (nested) sequences of "
                     f"numbers, or arrays")


def _flat(seq):
    for x in seq:
        if isinstance(x, (list, tuple)):
            yield from _flat(x)
        else:
            yield x


def _to_host(x):
    if isinstance(x, Tensor):
        return x._device.backend.to_numpy(x._data)
    if isinstance(x, (list, tuple)):
        return [_to_host(y) for y in x]
    return x


def tensor(data, *, dtype=None, device=None, requires_grad=False) -> Tensor:
    """A new tensor holding a copy of ``data`` (PyTorch's ``torch.tensor``)."""
    return asarray(data, dtype=dtype, device=device, copy=True, requires_grad=requires_grad)


def from_numpy(array: np.ndarray) -> Tensor:
    """A CPU tensor sharing memory with ``array``."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy: expected np.ndarray, got {type(array).__name__}")
    return as_device("cpu").wrap(array)


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    """Array API ``from_dlpack``: a tensor from any object with ``__dlpack__``.

    Without ``device=`` the tensor is on the device ``x`` lives on (a CuPy array or a JAX
    array on a GPU gives a ``"cuda"`` tensor, a NumPy array a ``"cpu"`` one), sharing its
    memory unless ``copy=True``; with ``device=``, on that device (a copy when it is
    another one).

    Raises:
        TypeError: ``x`` has no ``__dlpack__``.
        BufferError: no installed backend serves ``x``'s device.
        ValueError: ``copy=False`` but ``device=`` names another device.
    """
    if isinstance(x, Tensor):
        return asarray(x, device=device, copy=copy)
    if not (hasattr(x, "__dlpack__") and hasattr(x, "__dlpack_device__")):
        raise TypeError(f"from_dlpack: expected an object with __dlpack__ and "
                        f"__dlpack_device__, got {type(x).__name__}")
    dl_type, dl_index = x.__dlpack_device__()
    kind = backends.device_type_for_dlpack(int(dl_type))
    if kind is None:
        raise BufferError(f"from_dlpack: no mdtensor backend imports arrays of DLPack "
                          f"device type {int(dl_type)} (a {type(x).__name__})")
    src = Device(f"{kind}:{int(dl_index)}")
    dst = as_device(device) if device is not None else src
    if dst is not src and copy is False:
        raise ValueError(f"from_dlpack: copy=False, but the array is on {src} and "
                         f"device={dst} was asked for")
    t = src.wrap(src.backend.from_dlpack(x, src.index))
    if dst is not src:
        return t.to(dst)
    return t.clone() if copy else t


_MAX_BYTES = 2**63 - 1


def check_size(name: str, shape, dtype) -> None:
    """Raise ``ValueError`` naming ``name`` if ``shape`` of ``dtype`` is larger than any
    array can be (Note [Allocation sizes] in ops/_factory.py: factories and ``md.random``
    check before the backend sees the shape).  Zero dimensions are left out of the product,
    as NumPy leaves them (``(2**62, 0)`` of float64 is refused: NumPy cannot make it)."""
    n = 1
    for s in shape:
        n *= s or 1
    if n * dtype.itemsize > _MAX_BYTES:
        raise ValueError(f"{name}: a tensor of shape {tuple(shape)} and dtype {dtype.name} "
                         f"is larger than the largest possible size ({_MAX_BYTES} bytes)")


# Note [Pickling tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A pickled tensor is its values as a NumPy array, its device and ``requires_grad``, rebuilt
# by ``asarray``; a meta tensor is its shape and dtype, rebuilt by ``empty`` -- as PyTorch
# pickles them.  ``Tensor.__reduce_ex__`` is set here, beside the functions unpickling calls:
# the Tensor's own module sits below this one (the factories make tensors through ops).


def _reduce_ex(self, protocol):
    if self._device.type == "meta":  # shape and dtype only, as PyTorch pickles them
        return _rebuild_meta, (self.shape, self.dtype.name, self.requires_grad)
    return _rebuild, (self._device.backend.to_numpy(self._data), str(self._device),
                      self.requires_grad)


Tensor.__reduce_ex__ = _reduce_ex


def _rebuild_meta(shape, dtype, requires_grad):
    return aten_calls.empty(shape, dtype=dtype, device="meta", requires_grad=requires_grad)


def _rebuild(array, device, requires_grad):
    return asarray(array, device=device, copy=True, requires_grad=requires_grad)
