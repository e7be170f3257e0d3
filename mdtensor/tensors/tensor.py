"""The Tensor class.

A Tensor wraps one backend array.  Its slots are few and cheap to fill (Note [Tensor
creation]); its methods and Python operators are generated from the op catalogue
(``mdtensor.ops._methods``), not written here.

Note [Tensor creation]
~~~~~~~~~~~~~~~~~~~~~~
Kernels create result tensors through ``Device.wrap`` (``make_wrap`` below), which sets the
slots directly on ``object.__new__(Tensor)``: no ``__init__``, no argument parsing.  The
autograd meta (``_ag``), view info (``_view``) and version counter (``_vc``) stay ``None``
until a tensor requires grad, becomes a view, or is mutated.

Note [Class calls]
~~~~~~~~~~~~~~~~~~
The other objects made on every recorded op -- ``Node`` (each op's subclass),
``AutogradMeta``, ``VersionCounter``, ``ViewInfo`` -- have no ``__init__`` and are made by
calling the class with no arguments, then filling every slot.  With neither ``__new__``
nor ``__init__`` in Python, ``Cls()`` goes straight to ``object``'s C slots;
``object.__new__(Cls)`` goes through ``tp_new_wrapper`` and an argument tuple, about 0.4K
instructions more per object (cachegrind, CPython 3.11: 0.9K against 1.3K for a class of
six slots), four objects on a recorded op.  ``Tensor`` keeps ``object.__new__``: its own
``__new__`` exists to tell a user who calls ``md.Tensor(data)`` to use a factory.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from mdtensor._dtypes import DType
from mdtensor.backends.meta_backend import MetaArray
from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY, DispatchKey, DispatchKeySet
from mdtensor.dispatch.namespaces import aten_calls
from mdtensor.dispatch.resolution import register_schema_class
from mdtensor.dispatch.tls import ExcludeGuard
from mdtensor.tensors.autograd_meta import set_grad, set_requires_grad
from mdtensor.tensors.format import tensor_repr
from mdtensor.tensors.layout import SPARSE, SPARSE_ARRAYS, Layout, layout_of, sparse_keys
from mdtensor.tensors.version_counter import INFERENCE, counter, new_counter

# Note [Stubs]
# ~~~~~~~~~~~~
# Most of Tensor's API is set on the class at import (ops/_methods.py binds the catalogue's
# methods and operators, autograd and ops/manipulation.py a few hand-written ones), so no
# type checker or IDE could see it.  tools/gen_stubs.py writes that API from the catalogue
# as the class ``TensorMethods`` in the stub-only module ``mdtensor/_tensor_methods.pyi``,
# and Tensor derives from it for type checkers only: at runtime the base is ``object``, as
# before.  What is written in the class body below the checkers read here.  The namespace
# (``mdtensor/__init__.pyi``, ``linalg.pyi``, ``fft.pyi``) comes from the same script.
if TYPE_CHECKING:
    from mdtensor._tensor_methods import TensorMethods as _Generated
    from mdtensor.layers.autograd.graph import Node
    from mdtensor.tensors.device import Device
else:
    _Generated = object

__all__ = ["Tensor", "ViewInfo", "capture_hooks", "make_wrap", "new_like", "requires_grad_bit"]


# Note [Capture hooks]
# ~~~~~~~~~~~~~~~~~~~~
# A program capture (``md.func.trace``, ``md.compile``: mdtensor/compiler/capture.py) sees
# every op through a dispatch mode, but a few things a function does to tensors are no op:
# reading a value on the host (``item()``, ``bool(t)``, ``tolist()``, ``numpy()``,
# printing), which makes the Python that follows depend on the data; reading and writing
# ``.grad``; and turning ``requires_grad`` on or off.  While a capture runs,
# ``capture_hooks`` holds its recorder and these methods tell it (``host_read(t, what)``,
# ``get_grad(t, g)``, ``set_grad(t, g)``, ``set_requires_grad(t)``); outside one they pay
# a ContextVar read.  The autograd engine tells it of a backward pass the same way
# (``backward(create_graph)``, mdtensor/layers/autograd/graph.py), and ``md.random`` of
# numbers drawn on the host (``random_draw(what)``: a replay would reuse them).

#: None, or the recorder of the capture running in this context (Note [Capture hooks]).
capture_hooks: ContextVar = ContextVar("mdtensor_capture_hooks", default=None)


class ViewInfo:
    """How a view relates to its base: the base (always a non-view) and how to replay it.

    ``replay(base) -> view`` regenerates the view from a (new) base; functionalization and
    autograd (CopySlices) use it.
    """

    __slots__ = ("base", "index", "ag_version", "_replay", "_op", "_args", "_kwargs")

    # No ``__init__`` (Note [Class calls]): the view kernels fill the slots of
    # ``ViewInfo()`` themselves; elsewhere ``ViewInfo.of``.

    @staticmethod
    def of(base: Tensor, replay, version: int = 0) -> ViewInfo:
        info = ViewInfo()
        info.base = base
        info._replay = replay
        info._op = info._args = info._kwargs = None  # only for views made by a view op
        info.index = None  # Functionalize: the base indices this view selects
        # the version at which the view's autograd history was last made (Note [Stale
        # views] in mdtensor/layers/autograd/graph.py)
        info.ag_version = version
        return info

    @property
    def replay(self):
        """``replay(base) -> view``.  A view op made directly from its base records only
        ``(op, args after the base, kwargs)`` and the function is built here, on first
        use (most views are never replayed: building it on every view op cost ~0.2 us)."""
        r = self._replay
        if r is None:
            op, rest, kwargs = self._op, self._args, self._kwargs

            def r(b):
                return op(b, *rest, **kwargs)

            self._replay = r
        return r


class Tensor(_Generated):
    """An n-dimensional array on a device, with autograd, views and in-place ops.

    Create tensors with factories (``md.asarray``, ``md.tensor``, ``md.zeros``, ...).
    """

    __slots__ = ("_data", "_ks", "_device", "_vc", "_view", "_ag", "__weakref__")

    # Array libraries (NumPy) must defer to Tensor's reflected operators.
    __array_priority__ = 1000
    __array_ufunc__ = None

    def __new__(cls, *args, **kwargs):
        raise TypeError(
            "Tensor cannot be constructed directly; use md.tensor(data), md.asarray(data) "
            "or another factory (subclasses: Tensor._make_subclass(cls, data))"
        )

    def __init__(self, *args, **kwargs):
        pass  # subclasses' __new__ builds instances with _make_subclass

    @staticmethod
    def _make_subclass(cls, data: Tensor, require_grad: bool = False) -> Tensor:
        """An instance of subclass ``cls`` sharing ``data``'s array and version counter.

        A subclass defining ``__md_dispatch__`` gets the Python key, so every op on its
        instances reaches its handler (docs/MODES.md).
        """
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"_make_subclass: expected a Tensor subclass, got {cls!r}")
        t = object.__new__(cls)
        t._data = data._data
        t._device = data._device
        t._ks = data._device.ks
        if hasattr(cls, "__md_dispatch__"):
            t._ks |= DispatchKey.Python.value
        t._vc = counter(data)
        t._view = None
        t._ag = None
        if require_grad:
            t.requires_grad_(True)
        return t

    @staticmethod
    def _make_wrapper_subclass(cls, inner: Tensor, *, requires_grad: bool = False) -> Tensor:
        """An instance of ``cls`` standing for ``inner`` (PyTorch's
        ``_make_wrapper_subclass``): ``inner``'s shape, dtype and device, its array and
        version counter, and the Python key, so every op on it reaches
        ``cls.__md_dispatch__``.  ``md.modes.unwrap(t)`` gives ``inner`` back (Note
        [Tensor subclasses] in mdtensor/layers/python_dispatch.py)."""
        if not isinstance(inner, Tensor):
            raise TypeError(f"_make_wrapper_subclass: expected the inner Tensor, got "
                            f"{type(inner).__name__}")
        t = Tensor._make_subclass(cls, inner, requires_grad)
        t.__dict__["__md_inner__"] = inner
        return t

    def as_subclass(self, cls) -> Tensor:
        """This tensor as an instance of ``cls`` (PyTorch's ``as_subclass``): a view of it
        sharing its data and version counter, and attached to the autograd graph (its
        gradient flows to this tensor)."""
        if not (isinstance(cls, type) and issubclass(cls, Tensor)):
            raise TypeError(f"as_subclass: expected a Tensor subclass, got {cls!r}")
        with ExcludeGuard(DispatchKey.Python):  # the data itself, not a handler's answer
            v = aten_calls.view(self, self.shape)  # an alias: a view with its own history
        t = object.__new__(cls)
        t._data, t._device, t._vc, t._view, t._ag = v._data, v._device, v._vc, v._view, v._ag
        t._ks = v._ks
        if cls is not Tensor and hasattr(cls, "__md_dispatch__"):
            t._ks |= DispatchKey.Python.value
        return t

    # -- metadata -------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._data.shape)

    @property
    def dtype(self) -> DType:
        native = self._data.dtype
        dtypes = self._device.dtypes
        hit = dtypes.get(native)
        if hit is None:
            hit = dtypes[native] = self._device.backend.dtype_from_native(native)
        return hit

    def _is_floating(self) -> bool:
        """Floating or complex (the dtypes that can require grad)."""
        native = self._data.dtype
        kind = getattr(native, "kind", None)  # NumPy-style dtypes (NumPy, CuPy, JAX)
        if kind is None or kind == "V":  # "V": ml_dtypes' bfloat16 (Note [bfloat16 through
            kind = self._device.backend.dtype_from_native(native).kind  # ml_dtypes])
        return kind in "fc"

    @property
    def ndim(self) -> int:
        return len(self._data.shape)

    @property
    def size(self) -> int:
        """Number of elements (Array API: an int attribute; ``size()`` also works)."""
        return _Size(self._data.shape)

    def numel(self) -> int:
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    def dim(self) -> int:
        return len(self._data.shape)

    def __len__(self) -> int:
        if not self._data.shape:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    @property
    def device(self) -> Device:
        return self._device

    @property
    def chunks(self):
        """The chunks of a tensor on a chunked backend (Dask: a tuple of block sizes per
        dimension, as ``dask.array``'s); None elsewhere."""
        return self._device.backend.chunks(self._data)

    @property
    def layout(self) -> Layout:
        """``md.strided``, ``md.sparse_coo`` or ``md.sparse_csr`` (docs/SPARSE.md)."""
        return layout_of(self)

    @property
    def is_sparse(self) -> bool:
        """Whether the layout is sparse COO (PyTorch's ``is_sparse``; CSR has
        ``layout == md.sparse_csr``)."""
        return bool(self._ks & SPARSE) and layout_of(self).name == "sparse_coo"

    @property
    def keyset(self) -> DispatchKeySet:
        """The tensor's dispatch key set."""
        return DispatchKeySet(self._ks)

    @property
    def is_meta(self) -> bool:
        return self._device.type == "meta"

    @property
    def _version(self) -> int:
        vc = self._vc
        if vc is INFERENCE:
            raise RuntimeError("Inference tensors do not track version counter.")
        return 0 if vc is None else vc.value

    def is_inference(self) -> bool:
        """Whether this tensor was made in inference mode (Note [Inference tensors])."""
        return self._vc is INFERENCE

    @property
    def _base(self):
        view = self._view
        return None if view is None else view.base

    def _is_view(self) -> bool:
        return self._view is not None

    # -- interop --------------------------------------------------------------------------
    def __array_namespace__(self, *, api_version: str | None = None):
        # The namespace is the package itself, complete before any tensor exists: found in
        # sys.modules, not imported (it imports this module).
        mdtensor = sys.modules["mdtensor"]
        if api_version is not None and api_version not in mdtensor._SUPPORTED_API_VERSIONS:
            raise ValueError(
                f"__array_namespace__: unsupported api_version {api_version!r}; mdtensor "
                f"supports {', '.join(mdtensor._SUPPORTED_API_VERSIONS)}"
            )
        return mdtensor

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if self._device.type == "meta":
            raise BufferError("__dlpack__: meta tensors have no data to export")
        for name, value in (("max_version", max_version), ("dl_device", dl_device)):
            if value is not None and not (isinstance(value, tuple) and len(value) == 2
                                          and all(isinstance(v, int) for v in value)):
                raise TypeError(f"__dlpack__: {name} must be None or a tuple of two ints, "
                                f"got {value!r}")
        if copy is not None and not isinstance(copy, bool):
            raise TypeError(f"__dlpack__: copy must be None or a bool, got {copy!r}")
        return self._device.backend.to_dlpack(self._data, stream=stream,
                                              max_version=max_version,
                                              dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self._device.backend.dlpack_device(self._data)

    def __array__(self, dtype=None, copy=None):
        if self._ks & SPARSE:
            _no_sparse_numpy("__array__")
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.host_read(self, "__array__()")
        if self._device.type == "meta":
            raise TypeError("__array__: meta tensors have no data (only a shape and a "
                            "dtype); make the tensor on a real device instead")
        if self._device.type != "cpu":
            raise TypeError(
                f"__array__: can't convert a tensor on device {self._device} to a NumPy "
                f"array; use tensor.to('cpu') first"
            )
        import numpy as np

        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        return np.asarray(self._data, dtype=dtype)

    def numpy(self, *, force: bool = False):
        """The data as a NumPy array, sharing memory on the CPU (as in PyTorch).

        Raises:
            RuntimeError: the tensor requires grad (call ``.detach().numpy()``), or lives on
                another device and ``force`` is False.
        """
        if self._ag is not None and self._ag.requires_grad and not force:
            raise RuntimeError(
                "numpy(): can't call numpy() on a tensor that requires grad; use "
                "tensor.detach().numpy() instead"
            )
        if self._ks & SPARSE:
            _no_sparse_numpy("numpy()")
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.host_read(self, "numpy()")
        if self._device.type == "meta":
            raise TypeError("numpy(): meta tensors have no data (only a shape and a dtype); "
                            "make the tensor on a real device instead")
        if self._device.type != "cpu":
            if not force:
                raise TypeError(
                    f"numpy(): the tensor is on device {self._device}; use "
                    f"tensor.to('cpu').numpy() or numpy(force=True)"
                )
            return self._device.backend.to_numpy(self._data)
        return self._data

    def item(self):
        """The value of a one-element tensor as a Python scalar."""
        if self._ks & SPARSE:
            _no_sparse_numpy("item()")
        if self.numel() != 1:
            raise ValueError(
                f"item(): a tensor with {self.numel()} elements cannot be converted to a "
                f"Python scalar"
            )
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.host_read(self, "item()")
        return self._device.backend.to_numpy(self._data).reshape(()).item()

    def tolist(self):
        if self._ks & SPARSE:
            _no_sparse_numpy("tolist()")
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.host_read(self, "tolist()")
        return self._device.backend.to_numpy(self._data).tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(
                f"__bool__: the truth value of a tensor with {self.numel()} elements is "
                f"ambiguous; use .any() or .all()"
            )
        return bool(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __complex__(self) -> complex:
        return complex(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "iu" or self.numel() != 1:
            raise TypeError(
                f"__index__: only integer tensors of a single element can be converted to "
                f"an index; got a {self.dtype.name} tensor of shape {self.shape}"
            )
        return int(self.item())

    def __hash__(self) -> int:
        return id(self)

    def __iter__(self) -> Iterator[Tensor]:
        if not self._data.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    def __deepcopy__(self, memo):
        """PyTorch's deepcopy: graph leaves only (a non-leaf raises); a leaf keeps
        ``requires_grad`` and a copy of its ``.grad``; a view is copied as a view of its
        base's copy, so copies made together keep sharing memory; a subclass instance keeps
        its class and a copy of its attributes."""
        import copy

        hit = memo.get(id(self))
        if hit is not None:
            return hit
        if not self.is_leaf:
            raise RuntimeError(
                "Only Tensors created explicitly by the user (graph leaves) support the "
                "deepcopy protocol at the moment. If you want to copy a computed tensor, use "
                "x.detach().clone()")
        view = self._view
        if view is not None:

            base = copy.deepcopy(view.base, memo)
            with ExcludeGuard(AUTOGRAD_FUNCTIONALITY):  # no_grad
                new = view.replay(base)
        elif self._device.type == "meta":
            new = self._device.wrap(MetaArray(self.shape, self._data.dtype))
        elif self._ks & SPARSE:
            with ExcludeGuard(AUTOGRAD_FUNCTIONALITY):
                new = aten_calls.clone(self)
        else:
            new = self._device.wrap(self._device.backend.asarray(
                self._data, index=self._device.index, copy=True))
        if type(self) is not Tensor:
            new = Tensor._make_subclass(type(self), new)
            for k, v in getattr(self, "__dict__", {}).items():
                new.__dict__[k] = copy.deepcopy(v, memo)
        memo[id(self)] = new
        if self.requires_grad:
            new.requires_grad_(True)
        grad = self._ag.grad if self._ag is not None else None
        if grad is not None:
            new.grad = copy.deepcopy(grad, memo)
        return new

    def __repr__(self) -> str:
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.host_read(self, "printing a tensor")
        return tensor_repr(self)

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        """As PyTorch's: a 0-d tensor formats as its value (``f"{x:.2f}"``); a format
        spec for a tensor with dimensions is a TypeError (it was ignored)."""
        if self.ndim == 0 and self._device.type != "meta":
            return format(self.item(), spec)
        if spec:
            raise TypeError(f"unsupported format string {spec!r} passed to Tensor.__format__ "
                            f"(a tensor of shape {self.shape}; format x.item() or the "
                            f"elements of x.tolist())")
        return repr(self)

    # -- autograd (the engine lives in mdtensor.autograd) --------------------------------
    @property
    def requires_grad(self) -> bool:
        ag = self._ag
        return ag is not None and ag.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.set_requires_grad(self)
        set_requires_grad(self, requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        ag = self._ag
        if ag is None:
            return None
        g = ag.grad
        if g is None and ag.grad_fn is not None and not ag.retains_grad:
            _warn_non_leaf_grad()
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.get_grad(self, g)
        return g

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        hooks = capture_hooks.get()
        if hooks is not None:  # Note [Capture hooks]
            hooks.set_grad(self, value)
        if value is None:  # the optimizer's zero_grad(set_to_none=True), every step
            ag = self._ag
            if ag is not None:
                ag.grad = None
            return
        if not isinstance(value, Tensor):
            raise TypeError(f"grad: assigned grad must be a Tensor or None, got "
                            f"{type(value).__name__}")
        set_grad(self, value)

    @property
    def grad_fn(self) -> Node | None:
        ag = self._ag
        return None if ag is None else ag.grad_fn

    @property
    def is_leaf(self) -> bool:
        ag = self._ag
        return ag is None or ag.grad_fn is None

    @property
    def data(self) -> Tensor:
        """A tensor sharing this one's storage, outside autograd (like ``detach``)."""
        return self.detach()


def _no_sparse_numpy(name: str):
    raise TypeError(f"{name}: a sparse tensor has no dense array to give; use "
                    f"tensor.to_dense() first (or indices() and values())")


def _warn_non_leaf_grad() -> None:
    import warnings

    warnings.warn("The .grad attribute of a Tensor that is not a leaf Tensor is being "
                  "accessed. Its .grad attribute won't be populated during backward(). If "
                  "you indeed want the .grad field to be populated for a non-leaf Tensor, use "
                  ".retain_grad() on the non-leaf Tensor. If you access the non-leaf Tensor "
                  "by mistake, make sure you access the leaf Tensor instead.", UserWarning,
                  stacklevel=3)


register_schema_class("Tensor", Tensor)  # Note [Schema classes] in mdtensor/dispatch/resolution.py


class _Size(int):
    """``x.size`` is an int (Array API) that can also be called like PyTorch's ``x.size()``."""

    def __new__(cls, shape):
        n = 1
        for s in shape:
            if s is None:
                return None  # unknown size (Array API: None when data-dependent)
            n *= s
        self = int.__new__(cls, n)
        self._shape = tuple(shape)
        return self

    def __call__(self, dim: int | None = None):
        if dim is None:
            return self._shape
        return self._shape[dim]


_new = object.__new__


def make_wrap(device) -> Any:
    """Build ``device.wrap(array) -> Tensor`` (see Note [Tensor creation])."""
    array_type = device.backend.array_type
    ensure = device.backend.ensure_array
    ks = device.ks
    sparse_ks = sparse_keys(ks)
    counter = new_counter

    def wrap(data):
        if type(data) is not array_type:
            if type(data) in SPARSE_ARRAYS:  # Note [Layouts in the key set]
                return _sparse_tensor(data, sparse_ks, device)
            data = ensure(data)
        t = _new(Tensor)  # Note [Class calls]: Tensor(...) is the users' error
        t._data = data
        t._ks = ks
        t._device = device
        t._vc = counter()  # Note [Inference tensors]
        t._view = None
        t._ag = None
        return t

    return wrap


def _sparse_tensor(data, ks: int, device) -> Tensor:
    """``Device.wrap`` of a sparse array: its key set has the Sparse key."""
    t = _new(Tensor)
    t._data, t._ks, t._device = data, ks, device
    t._vc, t._view, t._ag = new_counter(), None, None
    return t


def new_like(t: Tensor, data) -> Tensor:
    """A fresh tensor on ``t``'s device holding ``data`` (no autograd, no view info)."""
    return t._device.wrap(data)


def requires_grad_bit(t: Tensor) -> int:
    return t._ks & AUTOGRAD_FUNCTIONALITY
