"""The Dask backend: device ``"dask"``, backend component Dask (docs/SCALE.md).

Tensors wrap lazy, chunked ``dask.array`` arrays; every op builds the graph and nothing is
computed until values are asked for (``.to("cpu")``, ``.tolist()``, ``.item()``, a small
``repr``, ``md.dask.compute``).  Dask arrays are immutable, so every Dask tensor carries
the Functionalize key (Note [Immutable backends] in mdtensor/tensors/device.py): in-place ops,
``__setitem__`` and views behave as on NumPy, written back into the lazy graph.  The
generic ArrayAPI kernels serve the catalogue through ``array_api_compat.dask.array``;
what Dask cannot do lazily raises (Note [What Dask cannot do]).

Note [Dask chunks]
~~~~~~~~~~~~~~~~~~
``md.asarray(x, device="dask", chunks=...)`` takes anything ``dask.array.from_array``
takes (an int, a tuple per dimension, ``"auto"``); without it the chunks are Dask's
``"auto"``, sized by Dask's ``array.chunk-size`` setting (128 MiB unless configured), which
is the backend default.  Factories (``zeros``, ``arange``, ...) chunk the same way, and
results take the chunks Dask gives them (elementwise ops keep their inputs', reductions
and products combine them).  ``x.chunks`` shows them; ``md.dask.rechunk(x, chunks)``
changes them, as an op that autograd records.

Note [Random numbers on Dask]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``md.rand``/``randn``/``randint`` on the host draw the whole array from one PCG64 stream
and copy it to the device; on Dask that would hold the whole array in memory, which is
what the backend exists to avoid.  So a Dask draw takes one 64-bit seed from the device's
generator (advancing it, so the next draw differs) and every chunk draws from its own
PCG64 stream, spawned from that seed and the chunk's position
(``SeedSequence(seed, spawn_key=position)``): chunks are made independently, in any
order, on any worker, and the same seed and chunks give the same numbers.  They are not
the CPU's numbers for the same seed (a documented difference, docs/SCALE.md).

Note [DLPack on Dask]
~~~~~~~~~~~~~~~~~~~~~
A lazy array has no memory to share, so ``__dlpack__`` computes the values (one pass, on
``md.dask``'s scheduler: a materialisation point like ``to("cpu")``) and NumPy exports
them; ``__dlpack_device__`` is the CPU's.  ``copy=False`` is honoured: no copy is made
beyond computing, and nothing can write to the exported values through the Dask tensor,
which is immutable.  (``np.from_dlpack(t)`` of a Dask tensor is a NumPy array.)
"""

from __future__ import annotations

from ._base import Backend, BackendInfo, Capabilities, draw, push_backend_kernel

INFO = BackendInfo("dask", "dask", "Dask", requires=("dask",))

__all__ = ["INFO", "DaskBackend", "backend"]


class DaskBackend(Backend):
    name = "dask"
    device_type = "dask"
    key = "Dask"
    capabilities = Capabilities(views=False, inplace=False, ufunc_out=False, lazy=True,
                                chunked=True)

    def __init__(self):
        try:
            import dask.array as da
        except ImportError as e:
            raise ImportError(f"the Dask backend needs dask[array] (pip install "
                              f"'mdtensor[dask]'): {e}") from e

        from mdtensor._dtypes import on_bfloat16

        from . import dask_namespace

        self._da = da
        self._xp = dask_namespace.namespace
        # as the NumPy backend's (Note [bfloat16 through ml_dtypes] in mdtensor/_dtypes.py)
        on_bfloat16(lambda native: setattr(self._xp, "bfloat16", native))
        self.array_type = da.Array
        _install_kernels()

    def namespace(self):
        return self._xp

    # -- arrays ---------------------------------------------------------------------------
    def ensure_array(self, result):
        if type(result) is self.array_type:
            return result
        return self._da.asarray(result)

    def asarray(self, obj, dtype=None, index: int = 0, copy=None, chunks=None):
        """A Dask array of ``obj``: a Dask array stays lazy (rechunked when ``chunks`` is
        given), anything else is copied into host memory once and split into ``chunks``
        (Note [Dask chunks])."""
        import numpy as np

        da = self._da
        if isinstance(obj, da.Array):
            if dtype is not None and obj.dtype != dtype:
                if copy is False:
                    raise ValueError("asarray: copy=False but a dtype conversion is needed")
                obj = obj.astype(dtype)
            return obj if chunks is None else obj.rechunk(chunks)
        if copy is False:
            raise ValueError("asarray: copy=False, but host data must be copied to become a "
                             "Dask array")
        arr = np.array(obj, dtype=dtype, copy=True)
        if chunks is None:
            # Dask's "auto" divides by the block size: an empty array is one (empty) chunk
            chunks = "auto" if arr.size else -1
        return da.from_array(arr, chunks=chunks)

    def to_numpy(self, array):
        from mdtensor import dask as md_dask

        return md_dask.compute_arrays(array)[0]

    def from_dlpack(self, obj, index: int = 0):
        import numpy as np

        return self.asarray(np.from_dlpack(obj), copy=True)

    def to_dlpack(self, array, *, stream=None, max_version=None, dl_device=None, copy=None):
        """The computed values, exported by NumPy (Note [DLPack on Dask])."""
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError(f"__dlpack__: the dask backend exports computed values from "
                              f"host memory (DLPack device (1, 0)), not to DLPack device "
                              f"{tuple(dl_device)}")
        values = self.to_numpy(array)
        if not values.flags.writeable:  # DLPack cannot say read-only before version 1
            values = values.copy()
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version),
                                    ("dl_device", dl_device), ("copy", copy))
                  if v is not None}
        return values.__dlpack__(**kwargs)

    def dlpack_device(self, array) -> tuple[int, int]:
        return (1, 0)  # kDLCPU: the values are computed into this process's memory

    def copy_into(self, dst, src) -> None:
        raise RuntimeError("Dask arrays are immutable; in-place ops run through Functionalize")

    def chunks(self, array):
        return array.chunks

    def rechunk(self, tensor, chunks):
        from mdtensor import dask as md_dask

        return md_dask.rechunk(tensor, chunks)

    def native_dtype(self, dtype):
        return dtype.numpy

    # -- random numbers (Note [Random numbers on Dask]) -------------------------------------
    def random(self, rng, method: str, shape: tuple, dtype, params: dict):
        seed = int(rng.integers(0, 1 << 63))
        return _chunked_random(self._da, seed, method, shape, dtype, params)


# ---------------------------------------------------------------------------------------
# Kernels of the backend's own

_installed: list = []


def _install_kernels() -> None:
    """Register, once per process, a Dask-key kernel for every op of the catalogue tagged
    ``dynamic_output_shape`` (nonzero, unique_*, indexing): the generic kernel, then the
    sizes of its results computed (Note [Data-dependent shapes on Dask] in
    backends/dask_namespace.py; the namespace does it for the functions it wraps, this
    covers ``x[mask]``, which is Dask's own ``__getitem__``)."""
    if _installed:
        return
    from mdtensor.ops._decl import CATALOGUE

    from mdtensor.dispatch.keys import DispatchKey

    for decl in list(CATALOGUE.values()):
        for op in decl.functional:
            entry = op.resolve(DispatchKey.ArrayAPI)[0] \
                if "dynamic_output_shape" in op.tags else None
            if entry is not None:  # a composite (allclose) runs ops that have their own
                generic = entry.fn
                push_backend_kernel(op, _with_known_sizes(op, generic), "Dask",
                                    "mdtensor (Dask backend)")
                _installed.append(op)
    _installed.append(None)


def _with_known_sizes(op, generic):
    from mdtensor import dask as md_dask
    from mdtensor.tensors.tensor import Tensor

    def kernel(*args, **kwargs):
        out = generic(*args, **kwargs)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        md_dask.compute_chunk_sizes(*(t._data for t in outs if isinstance(t, Tensor)))
        return out

    kernel.__qualname__ = kernel.__name__ = f"dask_known_sizes[{op.name}]"
    return kernel


def _chunked_random(da, seed: int, method: str, shape: tuple, dtype, params: dict):
    """A Dask array of ``shape`` whose chunks each draw from their own stream."""
    import numpy as np

    chunks = da.core.normalize_chunks("auto", shape, dtype=dtype)

    def block(block_info=None):
        info = block_info[None]
        rng = np.random.Generator(np.random.PCG64(
            np.random.SeedSequence(seed, spawn_key=tuple(info["chunk-location"]))))
        return draw(rng, method, info["chunk-shape"], dtype, params)

    return da.map_blocks(block, chunks=chunks, dtype=dtype, meta=np.empty((0,) * len(shape),
                                                                          dtype))


backend = DaskBackend
