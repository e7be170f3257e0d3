"""``md.dask``: what the Dask backend (device ``"dask"``) adds to the tensor API.

Dask tensors are lazy: ops build a graph, and values are computed when asked for
(docs/SCALE.md).  This module chooses *where* graphs run and computes several tensors in
one pass:

* ``use(scheduler)``: Dask's local threaded scheduler by default (nothing to start); a
  ``dask.distributed.Client`` (or ``"threads"``, ``"synchronous"``, ``"processes"``) for
  every computation made from here on, or inside a ``with`` block;
* ``compute(*tensors)``: their values, as CPU tensors, from one pass over one graph (work
  the tensors share is done once);
* ``persist(*tensors)``: compute them and keep the values in memory (the workers' memory
  on a cluster), so later graphs start from there;
* ``rechunk(x, chunks)``: an op (``md.ops.dask.rechunk``) that autograd records;
* ``to_dask(x)`` / ``from_dask(array)``: the ``dask.array`` under a tensor and back.

Importing this module imports no Dask: the backend loads on the first use of the device.

Note [Schedulers]
~~~~~~~~~~~~~~~~~
Every computation of a Dask tensor's values -- ``to("cpu")``, ``tolist``, ``item``, a
small ``repr``, ``compute``, ``persist`` -- goes through ``compute_arrays`` or
``persist``, which pass the scheduler chosen with ``use`` to Dask.  Without one, Dask
decides as it always does: a ``dask.distributed`` Client made with the default
``set_as_default=True`` is used while it is open, otherwise the local threaded scheduler.
The choice lives in a ``ContextVar``, so a ``with use(client):`` block is confined to its
thread or task.
"""

from __future__ import annotations

import contextlib
import threading
from contextvars import ContextVar

from mdtensor.dispatch.namespaces import lookup
from mdtensor.tensors.device import Device
from mdtensor.tensors.factories import asarray
from mdtensor.tensors.tensor import Tensor

from . import library

__all__ = ["compute", "compute_arrays", "compute_chunk_sizes", "from_dask", "persist",
           "rechunk", "scheduler", "to_dask", "use"]

#: Note [Schedulers]: None leaves the choice to Dask
_scheduler: ContextVar = ContextVar("mdtensor_dask_scheduler", default=None)

_NAMED = ("threads", "threading", "synchronous", "sync", "single-threaded", "processes",
          "multiprocessing", "distributed", "dask.distributed")


class use:
    """Run Dask tensors' computations on ``scheduler`` (Note [Schedulers]).

    ``md.dask.use(client)`` applies from then on (in this thread or task);
    ``with md.dask.use(client): ...`` only inside the block.  ``None`` gives the choice back
    to Dask (an active Client, else the local threaded scheduler).

    Args:
        scheduler: a ``dask.distributed.Client``, one of Dask's scheduler names
            (``"threads"``, ``"synchronous"``, ``"processes"``, ``"distributed"``), or None.

    Raises:
        TypeError: ``scheduler`` is neither a Client, a string nor None.
        ValueError: a name Dask does not know.
    """

    def __init__(self, scheduler):
        if isinstance(scheduler, str) and scheduler.lower() not in _NAMED:
            raise ValueError(f"md.dask.use: unknown scheduler name {scheduler!r}; expected "
                             f"'threads', 'synchronous', 'processes' or 'distributed'")
        if not (scheduler is None or isinstance(scheduler, str) or _is_client(scheduler)):
            raise TypeError(
                f"md.dask.use: expected a dask.distributed Client, a scheduler name or None, "
                f"got {type(scheduler).__name__}")
        self.scheduler = scheduler
        self._token = _scheduler.set(scheduler)

    def __enter__(self):
        return self.scheduler

    def __exit__(self, *exc) -> None:
        _scheduler.reset(self._token)

    def __repr__(self) -> str:
        return f"md.dask.use({self.scheduler!r})"


def _is_client(obj) -> bool:
    # A Client without importing distributed (Dask's own test: get_scheduler).
    return "Client" in type(obj).__name__ and callable(getattr(obj, "get", None))


def scheduler():
    """The scheduler chosen with ``use`` (None: Dask's default, Note [Schedulers])."""
    return _scheduler.get()


# ---------------------------------------------------------------------------------------
# Computing


def compute_arrays(*arrays) -> list:
    """NumPy arrays of the values of Dask ``arrays``, computed in one pass on the chosen
    scheduler (what the backend's ``to_numpy`` calls)."""
    import dask
    import numpy as np

    from mdtensor.backends.dask_buffers import reusing_buffers

    with reusing_buffers():
        values = dask.compute(*arrays, scheduler=_scheduler.get())
    return [np.asarray(v) for v in values]


def compute_chunk_sizes(*arrays) -> tuple:
    """Dask ``arrays`` with their unknown (NaN) chunk sizes computed, on the chosen
    scheduler (Note [Data-dependent shapes on Dask] in backends/dask_namespace.py)."""
    import math

    import dask

    s = _scheduler.get()
    with dask.config.set(scheduler=s) if s is not None else contextlib.nullcontext():
        for a in arrays:
            if any(math.isnan(n) for c in a.chunks for n in c):
                a.compute_chunk_sizes()
    return arrays


def _dask_tensors(fn: str, tensors) -> list:
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"md.dask.{fn}: expected tensors, got {type(t).__name__} as "
                            f"argument {i}")
        if t.device.type != "dask":
            raise ValueError(f"md.dask.{fn}: expected tensors on device 'dask', got one on "
                             f"{t.device} (argument {i})")
    return list(tensors)


def compute(*tensors):
    """The values of Dask ``tensors`` as CPU tensors, computed in one pass (a graph the
    tensors share is computed once).

    Example:
        >>> x = md.arange(6.0, device="dask")
        >>> lo, hi = md.dask.compute(x.min(), x.max())
        >>> lo.item(), hi.item()
        (0.0, 5.0)

    Raises:
        TypeError, ValueError: an argument is not a tensor on device ``"dask"``.
    """
    tensors = _dask_tensors("compute", tensors)
    cpu = Device("cpu")
    return tuple(cpu.wrap(v) for v in compute_arrays(*(t._data for t in tensors)))


def persist(*tensors):
    """Compute Dask ``tensors`` and keep their values in memory (on the workers with a
    distributed scheduler): each tensor's graph becomes its computed chunks, so what is
    built from it later starts there.  The tensors are updated in place (same values,
    same autograd history and views) and returned.

    Raises:
        TypeError, ValueError: an argument is not a tensor on device ``"dask"``.
    """
    import dask

    from mdtensor.backends.dask_buffers import reusing_buffers

    tensors = _dask_tensors("persist", tensors)
    with reusing_buffers():
        arrays = dask.persist(*(t._data for t in tensors), scheduler=_scheduler.get())
    for t, a in zip(tensors, arrays):
        t._data = a
    return tensors[0] if len(tensors) == 1 else tuple(tensors)


# ---------------------------------------------------------------------------------------
# Arrays and chunks


def to_dask(t):
    """The lazy ``dask.array.Array`` holding a Dask tensor's values (not a copy; Dask
    arrays are immutable)."""
    return _dask_tensors("to_dask", (t,))[0]._data


def from_dask(array, *, requires_grad: bool = False):
    """A Dask tensor holding the ``dask.array.Array`` ``array`` (lazy, not computed)."""
    if not hasattr(array, "__dask_graph__") or not hasattr(array, "chunks"):
        raise TypeError(f"md.dask.from_dask: expected a dask.array.Array, got "
                        f"{type(array).__name__}")
    return asarray(array, device="dask", requires_grad=requires_grad)


def rechunk(x, chunks):
    """``x`` split into ``chunks`` (anything ``dask.array.Array.rechunk`` takes: an int, a
    tuple per dimension, a dict, ``"auto"``); recorded by autograd (the gradient takes
    ``x``'s chunks back).

    Raises:
        ValueError: ``x`` is not on device ``"dask"``, or Dask refuses ``chunks``.
    """
    return _rechunk_op()(x, chunks)


#: the op and the Library that defined it (a Library undoes its registrations when
#: destroyed, so it is kept here)
_defined: dict = {}
_define_lock = threading.Lock()


def _rechunk_op():
    """``md.ops.dask.rechunk``, defined through ``md.library`` on first use."""
    op = _defined.get("op")
    if op is not None:
        return op
    with _define_lock:
        if "op" not in _defined:
            _define_rechunk()
    return _defined["op"]


def _define_rechunk() -> None:
    lib = library.Library("dask", "DEF")
    lib.define("rechunk(Tensor self, Any chunks) -> Tensor")
    lib.impl("rechunk", _rechunk_kernel, "Dask")
    lib.impl("rechunk", _rechunk_elsewhere, "CompositeExplicitAutograd")
    op = lookup("dask::rechunk.default")
    library.register_autograd(op, _rechunk_backward, setup_context=_rechunk_setup, lib=lib)
    _defined.update(op=op, library=lib)


def _rechunk_kernel(x, chunks):
    try:
        data = x._data.rechunk(chunks)
    except (ValueError, TypeError) as e:
        raise ValueError(f"rechunk: Dask refused chunks={chunks!r} for a tensor of shape "
                         f"{tuple(x.shape)}: {e}") from None
    return x._device.wrap(data)


def _rechunk_elsewhere(x, chunks):
    raise ValueError(f"rechunk: expected a tensor on device 'dask', got one on {x.device} "
                     f"(only Dask tensors have chunks)")


def _rechunk_setup(ctx, inputs, output):
    ctx.chunks = inputs[0]._data.chunks


def _rechunk_backward(ctx, grad):
    return rechunk(grad, ctx.chunks), None
