"""Reusing the buffers of dying temporaries inside fused Dask tasks.

Note [Temporaries in fused Dask tasks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Dask's optimisation fuses a chain of blockwise layers into one task per chunk (a
``_execute_subgraph`` task: a small graph run inside the task, its intermediates private
to it and released as soon as their last consumer has run).  Every elementwise op of the
chain still allocates a fresh chunk-sized result: a gradient of 1M-row chunks allocates a
4 MB array for each ``exp``, ``add``, ``divide``...  Fresh memory is not free: the
allocator hands large blocks back to the operating system once freed (glibc trims the top
of its heap, and maps blocks above its threshold directly), so the next chunk's
temporaries fault their pages in again, zeroed by the kernel.  Autograd's gradients make
this worse than hand-written formulas: the gradient of a sum of terms adds two full-size
temporaries (``g / (1 + exp(-z)) + (-g) * y`` for ``logaddexp(0, z) - y * z``), three
chunk-sized arrays alive at once where ``(sigmoid(z) - y) / n`` needs two.

So before a graph runs, mdtensor rewrites each fused task's inner graph: an
elementwise NumPy ufunc (one output; called plainly, or through Dask's ``_enforce_dtype``)
whose operand is produced *inside the same task* by another such ufunc, and read by no
other node of the task, writes its result into that operand (``out=``) -- the operand dies
with this call anyway.  At run time the write happens only when it cannot be seen: the
operand is a plain, writeable ``ndarray`` owning its memory, with the result's shape, and
NumPy resolves the ufunc to the same loop with and without it, the result's dtype being
the operand's (otherwise the ufunc allocates as usual).  Values are bit for bit the same
(the same loop on the same inputs; elementwise ufuncs allow their output to be one of
their inputs).  Inputs of a task (its dependencies: persisted chunks, other tasks'
results), constants and the task's own result are never written to.  Dask's own
arithmetic on ``dask.array`` (operators, ``da.exp``) is unchanged; mdtensor applies this to
the graphs it computes (``md.dask.compute``, ``persist`` and every materialisation).

On the logistic-regression step of benchmarks/dask_bench.py, a chunk's tasks make 6
chunk-sized arrays instead of 11 (the same step written by hand in ``dask.array``: 11), and
the process faults in fewer pages than Dask's own (benchmarks/README.md, "Dask results").

The rewrite runs inside Dask's optimisation (``reusing_buffers`` sets Dask's
``array_optimize`` for the duration of a ``compute`` or ``persist``), so the graph is
optimised once, as ``dask.compute`` does, and runs rewritten on any scheduler, a
``dask.distributed`` cluster included.  The setting is Dask's global configuration: a
thread computing Dask arrays at the same moment may run them rewritten too, with the same
values.
"""

from __future__ import annotations

import contextlib
import functools
import itertools

import dask
import dask.array as da
import numpy as np
from dask._task_spec import DataNode, Task, TaskRef, _execute_subgraph
from dask.array.core import _enforce_dtype

__all__ = ["IntoOperand", "reusing_buffers"]


@contextlib.contextmanager
def reusing_buffers():
    """Inside the block, Dask arrays computed (or persisted) are optimised as Dask does,
    then their fused tasks rewritten to reuse their dying temporaries (Note [Temporaries in
    fused Dask tasks]).  Through Dask's ``array_optimize`` setting, so the graph is
    optimised once, as ``dask.compute`` does, wherever it runs (a ``dask.distributed``
    Client included)."""
    optimize = da.Array.__dask_optimize__  # what Dask would use here (its own, or the user's)

    def reusing(dsk, keys, **kwargs):
        dsk = optimize(dsk, keys, **kwargs)
        if type(dsk) is not dict:  # not fused into tasks (fusion switched off)
            return dsk
        return {k: _rewritten(node) for k, node in dsk.items()}

    with dask.config.set(array_optimize=reusing):
        yield


def _rewritten(node):
    """``node``, or, for a fused task, the same task with its inner graph rewritten."""
    if not (isinstance(node, Task) and node.func is _execute_subgraph):
        return node
    inner, outkey, inkeys, *deps = node.args
    if not isinstance(inner, dict):
        return node
    inner = {k: _rewritten(v) for k, v in _inlined(inner).items()}
    readers: dict = {}
    for v in inner.values():
        for d in v.dependencies:
            readers[d] = readers.get(d, 0) + 1
    calls = {k: c for k, v in inner.items() if (c := _ufunc_call(v)) is not None}
    out = {}
    for k, v in inner.items():
        slots = tuple(i for i, a in enumerate(v.args)
                      if isinstance(a, TaskRef) and a.key in calls and readers[a.key] == 1
                      and a.key != outkey) if k in calls else ()
        out[k] = Task(k, IntoOperand(*calls[k], slots), *v.args) if slots else v
    return Task(node.key, _execute_subgraph, out, outkey, inkeys, *deps)


#: names for the nodes spliced into a fused task's graph, unique in the process (a
#: nested task's own keys may repeat its parent's)
_NAMES = itertools.count()


def _inlined(inner: dict) -> dict:
    """``inner`` with the graphs of the fused tasks nested in it spliced in: a nested
    task's nodes under new keys, its result under the nested task's own key, its inputs
    read from where the nested task read them (Note [Temporaries in fused Dask tasks]).
    One graph runs where several did, and its temporaries are seen whole."""
    out = {}
    for k, v in inner.items():
        if not (type(v) is Task and v.func is _execute_subgraph and not v.kwargs):
            out[k] = v
            continue
        sub, sub_out, sub_in, *deps = v.args
        if not (isinstance(sub, dict) and sub_out in sub
                and all(isinstance(d, (TaskRef, DataNode)) for d in deps)):
            out[k] = v
            continue
        sub = _inlined(sub)
        names = {sk: k if sk == sub_out else f"inlined-{next(_NAMES)}" for sk in sub}
        subs = dict(names)
        for ik, d in zip(sub_in, deps, strict=True):
            if isinstance(d, TaskRef):
                subs[ik] = d.key
            else:
                subs[ik] = name = f"inlined-{next(_NAMES)}"
                out[name] = DataNode(name, d.value)
        for sk, sv in sub.items():
            out[names[sk]] = sv.substitute(subs, key=names[sk])
    return out


def _ufunc_call(node):
    """``(ufunc, dtype)`` for a node of a fused task that calls a ufunc with positional
    operands only, directly (``dtype`` None) or through ``_enforce_dtype`` (Dask's cast of
    the result to the ``dtype`` it announced); None for any other node."""
    if type(node) is not Task:  # not List, Dict, DataNode, Alias
        return None
    fn, kwargs, dtype = node.func, node.kwargs, None
    if isinstance(fn, IntoOperand):
        return fn.ufunc, fn.dtype
    if fn is _enforce_dtype:
        if set(kwargs) != {"enforce_dtype", "enforce_dtype_function"}:
            return None
        fn, dtype, kwargs = kwargs["enforce_dtype_function"], kwargs["enforce_dtype"], {}
    if isinstance(fn, np.ufunc) and fn.nout == 1 and not kwargs:
        return fn, dtype
    return None


class IntoOperand:
    """``ufunc(*operands)``, written into the operand at one of ``slots`` where that cannot
    be seen (Note [Temporaries in fused Dask tasks]); the result cast to ``dtype`` (the
    dtype Dask announced) when given, as ``_enforce_dtype`` does."""

    def __init__(self, ufunc, dtype, slots):
        self.ufunc, self.dtype, self.slots = ufunc, dtype, slots

    def __call__(self, *operands):
        buf = self._buffer(operands)
        if buf is not None:
            return self.ufunc(*operands, out=buf)
        if self.dtype is None:
            return self.ufunc(*operands)
        return _enforce_dtype(*operands, enforce_dtype=self.dtype,
                              enforce_dtype_function=self.ufunc)

    def _buffer(self, operands):
        for i in self.slots:
            buf = operands[i]
            if not (type(buf) is np.ndarray and buf.base is None and buf.flags.writeable):
                continue
            if self.dtype is not None and np.dtype(self.dtype) != buf.dtype:
                continue
            try:
                if (np.broadcast_shapes(*(np.shape(a) for a in operands)) == buf.shape
                        and _same_loop(self.ufunc, tuple(_dtype_of(a) for a in operands),
                                       buf.dtype)):
                    return buf
            except (TypeError, ValueError):  # an operand NumPy's resolution does not take
                return None
        return None

    def __repr__(self) -> str:
        return f"into_operand[{self.ufunc.__name__}]"

    def __dask_tokenize__(self):
        return ("into_operand", self.ufunc.__name__, str(self.dtype), self.slots)


def _dtype_of(a):
    """What ``ufunc.resolve_dtypes`` takes for an operand: its dtype, or for a Python
    number its type (a "weak" scalar, NEP 50)."""
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype
    if type(a) in (int, float, complex):
        return type(a)
    raise TypeError(f"no dtype for {type(a).__name__}")


@functools.lru_cache(maxsize=1024)
def _same_loop(ufunc, dtypes: tuple, out) -> bool:
    """Whether ``ufunc`` on operands of ``dtypes`` gives a result of dtype ``out`` through
    the same loop whether or not ``out`` is passed as its output."""
    plain = ufunc.resolve_dtypes(dtypes + (None,))
    return plain[-1] == out and ufunc.resolve_dtypes(dtypes + (out,)) == plain
