"""The backend contract (docs/BACKENDS.md is the user-facing version of this).

A backend is a small object describing one array library on one kind of device.  What it
must provide is marked *required*; everything else has a default.  What it gets for free:
every ArrayAPI kernel of the op catalogue, autograd, modes, functionalization and meta.
"""

from __future__ import annotations

from typing import Any

from mdtensor import _dtypes
from mdtensor._dtypes import as_dtype
from mdtensor.dispatch.kernel import Kernel
from mdtensor.dispatch.keys import DispatchKey

__all__ = ["Backend", "BackendInfo", "Capabilities", "draw", "push_backend_kernel"]


class Capabilities:
    """What a backend's arrays can do.

    Attributes:
        views: slicing/reshape/transpose return arrays that share memory with their input.
        inplace: arrays can be written in place (``x[...] = y``).  Backends without it
            (JAX) get the Functionalize key on every tensor.
        ufunc_out: elementwise functions accept ``out=`` (in-place ops allocate nothing).
        float64 / complex128: the 64-bit dtypes are available.
        fancy_setitem: ``x[key] = v`` takes integer index arrays with NumPy's semantics
            (several, mixed with slices; an index out of bounds raises IndexError; of
            repeated indices the last write wins), so mdtensor passes such writes on as
            they are.  The Array API specifies only basic keys and a sole boolean mask;
            without this, mdtensor computes such writes itself, with those semantics (Note
            [Writes through index arrays] in ops/indexing.py).
        fancy_getitem: ``x[key]`` takes a tuple of integer index arrays, one per dimension,
            with NumPy's (pointwise) semantics; without it such reads are spelled with
            ``take`` (Note [Advanced indexing] in ops/indexing.py).
        lazy: ops build a graph and values are computed only when asked for (``to``,
            ``tolist``, ``item``): ``repr`` then shows the values of small tensors only.
        chunked: arrays are split into chunks: ``md.asarray(x, chunks=...)`` passes
            ``chunks`` to the backend's ``asarray`` and ``Tensor.chunks`` reads
            ``Backend.chunks(array)``.
    """

    def __init__(self, *, views=True, inplace=True, ufunc_out=False, float64=True,
                 complex128=True, fancy_setitem=False, fancy_getitem=False, lazy=False,
                 chunked=False):
        self.views = views
        self.inplace = inplace
        self.ufunc_out = ufunc_out
        self.fancy_setitem = fancy_setitem
        self.fancy_getitem = fancy_getitem
        self.float64 = float64
        self.complex128 = complex128
        self.lazy = lazy
        self.chunked = chunked

    def __repr__(self) -> str:
        flags = ", ".join(f"{k}={v}" for k, v in vars(self).items())
        return f"Capabilities({flags})"


class BackendInfo:
    """Metadata readable without importing the backend's array library.

    Attributes:
        name: the backend's name (``'numpy'``).
        device_type: the device string it serves (``'cpu'``, ``'cuda'``, ``'jax'``).
        key: its backend component (``'CPU'``, ``'CUDA'``, ``'JAX'`` or ``'PrivateUseN'``).
        requires: import names of the packages it needs (to report "installed or not").
        dlpack_device_types: the DLPack device types (``__dlpack_device__()[0]``: 1 CPU,
            2 CUDA, ...) whose arrays this backend imports as its own, with the same device
            index: ``md.from_dlpack(x)`` puts ``x`` on this backend's device.  Empty for a
            backend that claims none (JAX's arrays live on CPUs or GPUs of other
            backends' types).
    """

    def __init__(self, name: str, device_type: str, key: str, requires: tuple[str, ...] = (),
                 dlpack_device_types: tuple[int, ...] = ()):
        self.name = name
        self.device_type = device_type
        self.key = key
        self.requires = tuple(requires)
        self.dlpack_device_types = tuple(dlpack_device_types)

    def __repr__(self) -> str:
        return f"BackendInfo({self.name!r}, device_type={self.device_type!r}, key={self.key!r})"


class Backend:
    """Base class of backends.

    Required: ``name``, ``device_type``, ``key``, ``namespace()``, ``array_type``.
    Optional, with defaults: ``capabilities``, ``device_count``, ``device_index``,
    ``asarray``, ``to_numpy``, ``from_dlpack``, ``to_dlpack``, ``dlpack_device``,
    ``ensure_array``, ``owns_dense``, ``native_dtype`` / ``dtype_from_native``,
    ``copy_into``, ``default_float``, ``chunks``, ``random``.
    """

    name: str = ""
    device_type: str = ""
    key: str = ""
    capabilities = Capabilities()
    #: True when the namespace follows the Array API standard (the ArrayAPI alias covers it)
    array_api: bool = True
    #: the concrete array class (used by plum; never an abstract/meta class)
    array_type: type = object

    def namespace(self) -> Any:
        """The Array API namespace of this backend's arrays. Required."""
        raise NotImplementedError(f"backend {self.name!r} does not define namespace()")

    # -- devices ------------------------------------------------------------------------
    def device_count(self) -> int:
        return 1

    def native_device(self, index: int) -> Any:
        """The library's device object for ``index`` (passed to ``xp`` as ``device=``)."""
        return None

    def device_index(self, array) -> int:
        """Which of this backend's devices ``array`` lives on."""
        return 0

    # -- arrays -------------------------------------------------------------------------
    def ensure_array(self, result):
        """Turn a kernel result into an array (NumPy returns scalars for 0-d results)."""
        return result

    def asarray(self, obj, dtype=None, index: int = 0, copy=None):
        xp = self.namespace()
        return xp.asarray(obj, dtype=dtype, device=self.native_device(index), copy=copy)

    def to_numpy(self, array):
        import numpy as np

        return np.asarray(array)

    def from_dlpack(self, obj, index: int = 0):
        return self.namespace().from_dlpack(obj)

    def to_dlpack(self, array, *, stream=None, max_version=None, dl_device=None, copy=None):
        """``Tensor.__dlpack__``: export ``array`` as a DLPack capsule, following the
        standard's rules for ``max_version``, ``dl_device`` and ``copy`` (a producer that
        cannot export to ``dl_device``, or not without the copy ``copy=False`` forbids,
        raises ``BufferError``).  The default hands the arguments given to the array's own
        ``__dlpack__``."""
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                    ("dl_device", dl_device), ("copy", copy))
                  if v is not None}
        return array.__dlpack__(**kwargs)

    def dlpack_device(self, array) -> tuple[int, int]:
        """``Tensor.__dlpack_device__``: the DLPack device ``to_dlpack`` exports to.  The
        default asks the array."""
        return array.__dlpack_device__()

    def owns_dense(self, array) -> bool:
        """Whether ``array`` is dense and writable: C-contiguous, no broadcast (zero)
        strides, not read-only, so that it may become a leaf's ``.grad`` without a copy
        (Note [Leaf gradients] in mdtensor/layers/autograd/graph.py).  The default reads NumPy-style
        ``flags`` where the array has them (an immutable array has nothing to protect)."""
        flags = getattr(array, "flags", None)
        return flags is None or (flags.c_contiguous and getattr(flags, "writeable", True))

    def copy_into(self, dst, src) -> None:
        """Write ``src`` into ``dst`` in place (mutable backends only)."""
        dst[...] = src

    def chunks(self, array):
        """The chunks of ``array`` (``capabilities.chunked`` backends), else None."""
        return None

    def rechunk(self, tensor, chunks):
        """``tensor`` (on this backend) split into ``chunks``, as an op autograd records:
        ``md.asarray(t, chunks=...)`` (``capabilities.chunked`` backends)."""
        raise ValueError(f"rechunk: the {self.name} backend has no chunks")

    def random(self, rng, method: str, shape: tuple, dtype, params: dict):
        """Random numbers for ``md.rand``/``randn``/``randint``: ``method`` (``"random"``,
        ``"standard_normal"``, ``"integers"`` with ``params`` ``low``/``high``) of the NumPy
        generator ``rng``, ``shape`` and NumPy ``dtype``, as an array ``asarray`` takes.
        The default draws on the host, so every backend gives the CPU's numbers for a
        seed; a backend that must not hold the whole array draws its own way."""
        return draw(rng, method, shape, dtype, params)

    # -- dtypes -------------------------------------------------------------------------
    def native_dtype(self, dtype):
        """The library's dtype for an mdtensor DType."""
        return getattr(self.namespace(), dtype.name)

    def dtype_from_native(self, native):
        """The mdtensor DType of a native dtype (cached per backend: ``Tensor.dtype`` calls
        this on every access)."""
        cache = self.__dict__.get("_dtype_cache")
        if cache is None:
            cache = self.__dict__["_dtype_cache"] = {}
        hit = cache.get(native)
        if hit is None:
            hit = cache[native] = as_dtype(native)
        return hit

    def default_float(self):
        return _dtypes.float64 if self.capabilities.float64 else _dtypes.float32

    def __repr__(self) -> str:
        return f"<backend {self.name} device_type={self.device_type!r} key={self.key}>"


def push_backend_kernel(op, fn, key: str, origin: str) -> None:
    """Register ``fn`` as a backend's own kernel of ``op`` for the backend key ``key``
    (rung 1 of the ladder), through the operator API (``op.register_kernel``), as
    ``md.library``'s backend registration does (``Library.impl(..., backend=True)``, Note
    [Backend kernels] in mdtensor/library.py): a leaf kernel that computes on raw arrays
    and calls no op, as the catalogue's own kernels are, below any kernel a user registers
    for the key, before or after, and kept for the process.  Used by the built-in backends
    (the JAX backend's jitted kernels, the CuPy backend's vectorised ones) when they load;
    ``origin`` names them in dumps."""
    op.register_kernel(Kernel(fn, DispatchKey[key], origin=origin, leaf=True))


def draw(rng, method: str, shape, dtype, params: dict):
    """``shape`` numbers of NumPy ``dtype`` from the NumPy generator ``rng`` (see
    ``Backend.random``)."""
    if method == "random":
        return rng.random(shape).astype(dtype)
    if method == "standard_normal":
        return rng.standard_normal(shape).astype(dtype)
    if method == "integers":
        return rng.integers(params["low"], params["high"], size=shape).astype(dtype)
    raise ValueError(f"random: unknown method {method!r}")
