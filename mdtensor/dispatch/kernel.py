"""Kernels: what a registration holds (``Kernel``), and the helpers kernels are made with.

A ``Kernel`` is one function registered for one dispatch key (a runtime key or an alias
key), with how the table entry calls it; ``fallthrough_kernel`` marks a key the op skips;
``own_code`` gives a closure made once per op a code object of its own where that pays (Note
[Own code objects]).  ``LEAF_KERNELS`` are the kernels that run no further dispatch.
"""

from __future__ import annotations

__all__ = ["LEAF_KERNELS", "Kernel", "array_call", "fallthrough_kernel", "named", "own_code",
           "with_array_call"]


#: Kernel functions that compute on raw arrays and call no op (the catalogue's backend
#: kernels), and the table entries of passthrough kernels over them (``Kernel``).  A table
#: entry that *is* one of them runs no further dispatch, so a layer above may call it
#: without first changing the thread-local key state (the Autograd kernels skip their
#: exclude guard then; Note [Autograd kernels] in
#: mdtensor/layers/autograd/kernels.py).
LEAF_KERNELS: set = set()


# Note [Own code objects]
# ~~~~~~~~~~~~~~~~~~~~~~~
# CPython 3.11 specializes each instruction of a code object for what it has seen there: a
# call site for the one function it calls (CALL_PY_EXACT_ARGS checks the function's
# version), an attribute site for one type (LOAD_ATTR_SLOT checks the type's version).  A
# site that sees many functions or types misses, falls back to the generic instruction
# (``PyObject_GetAttr``, ``_PyType_Lookup``, ``_PyFunction_Vectorcall``) and, after enough
# misses, is respecialized for whatever comes next.  The hot path is made of closures
# built once per op -- the packet function, the overload's caller, the backend kernel, the
# Autograd kernel -- and every closure of one ``def`` shares that ``def``'s code object:
# ``kernel(a, b)`` in the caller, ``node.args = args`` in the Autograd kernel saw every
# op's kernel and every op's Node class, and missed on most calls.  ``own_code(fn)`` gives
# a closure a copy of its code object, so its sites see its own op only and stay
# specialized.  Measured on the 16-16-16-4 MLP training step (cachegrind, fixed hash
# seed, mean over three memory layouts, which move it by +-4%): 938K -> 908K instructions
# with the engine's ``type(node)`` tests; the 784-256-256-10 step went from 1.157x to
# 1.141x NumPy's.  A copy starts unspecialized: it warms up on its own op's calls.
#
# Kept only where it pays.  Instructions per 16-16-16-4 MLP training step (callgrind,
# counted inside the timed loop only), with every ``own_code`` site: 924K; without any:
# 963K (+4.2%).  Without one group at a time: the Autograd kernels +1.85%, the Nodes'
# ``apply`` (autograd/graph.py) +2.4%; the backend and factory kernels made from impls
# (ops/) +0.08%, the overload callers and packet functions +0.08%, the Python operators and
# Tensor methods +0.18%, the ADInplaceOrView kernels +0.13% -- noise beside what a change of
# memory layout does, so those four kinds take their ``def``'s shared code object (a kernel
# is still named for its op: ``ufunc[aten::exp]``).


def own_code(fn, name: str | None = None):
    """``fn`` with a code object of its own (Note [Own code objects]): the same closure,
    defaults and attributes; named ``name`` when given (``__name__`` and ``__qualname__``,
    as kernels are: ``"ufunc[aten::exp]"``)."""
    copy = type(fn)(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__,
                    fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = fn.__qualname__
    copy.__doc__ = fn.__doc__
    copy.__dict__.update(fn.__dict__)
    if name is not None:
        copy.__name__ = copy.__qualname__ = name
    return copy


def named(fn, name: str):
    """``fn`` named ``name`` (``__name__`` and ``__qualname__``), as kernels are in traces and
    tables: ``"ufunc[aten::exp]"``."""
    fn.__name__ = fn.__qualname__ = name
    return fn


# Note [Array calls]
# ~~~~~~~~~~~~~~~~~~
# A backend kernel computes on its tensors' arrays and wraps the result.  ``md.compile``'s
# replay on NumPy-like backends (Note [Replaying on arrays] in mdtensor/compiler/arrays.py)
# works on the arrays themselves, so a kernel may say what its call comes to on arrays:
# ``with_array_call(kernel, specialize)`` attaches ``specialize(args, kwargs)``, which for
# one call of the kernel (its Tensors and other arguments) returns ``(fn, args2,
# kwargs2)``: ``fn(*args2, **kwargs2)``, with each Tensor among them (they are the call's
# own) replaced by its array, computes the kernel's result's arrays -- an array (or a 0-d
# NumPy scalar) for a Tensor, a tuple with None for an undefined result -- for every call
# whose Tensors have the same shapes, dtypes and devices and whose other arguments are
# equal; or None where the kernel cannot promise that (it would take its generic path).
# The specialization is done once, at the capture; the checks the kernel makes on every
# call are made then, and ``fn`` is often the NumPy function itself (``np.add``).


def with_array_call(kernel, specialize):
    """Attach ``specialize`` to ``kernel`` (Note [Array calls]); returns ``kernel``."""
    kernel.array_call = specialize
    return kernel


def array_call(kernel, args: tuple, kwargs: dict):
    """``(fn, args, kwargs)`` computing ``kernel(*args, **kwargs)`` on arrays, or None
    (Note [Array calls])."""
    specialize = getattr(kernel, "array_call", None)
    return None if specialize is None else specialize(args, kwargs)


def fallthrough_kernel(*args, **kwargs):
    """Marker kernel: the dispatcher skips a key whose kernel is this, at no per-call cost."""
    raise AssertionError("fallthrough_kernel is a marker and is never called")


class Kernel:
    """One registered kernel.

    Attributes:
        fn: the callable.
        key: the key it was registered for (a runtime key or an alias key).
        with_keyset: the kernel takes the call's int key set as its first argument.
        boxed: a fallback that takes ``(op, keyset, args, kwargs)``.
        origin: who registered it (``"mdtensor"`` for built-ins, else the Library/file).
        user: registered from user code (its results are checked against the schema).
        gate: a one-item list; while ``gate[0]`` is falsy the kernel falls through (Note
            [Gated kernels]).  None: always active.
        factory: ``fn`` is a factory, ``fn(below) -> entry``: a layer kernel that calls
            the table entry below its key -- ADInplaceOrView's and Autograd's kernels --
            gets that entry when its own is made, instead of looking it up on every call
            (Note [Wrapper kernels]).  With ``leaf`` (it calls nothing else, no op) its
            entry is a leaf when ``below`` is one.
    """

    __slots__ = ("fn", "key", "with_keyset", "boxed", "origin", "user", "name", "gate",
                 "factory", "leaf")

    def __init__(self, fn, key, *, with_keyset=False, boxed=False, origin="mdtensor",
                 user=False, name=None, leaf=False, gate=None, factory=False):
        self.fn = fn
        self.key = key
        self.with_keyset = with_keyset
        self.boxed = boxed
        self.origin = origin
        self.user = user
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        self.gate = gate
        self.factory = factory
        self.leaf = leaf and not (with_keyset or boxed or user)
        if self.leaf and not factory:
            LEAF_KERNELS.add(fn)

    @property
    def is_fallthrough(self) -> bool:
        return self.fn is fallthrough_kernel

    def __repr__(self) -> str:
        return f"<kernel {self.name} for {self.key.name} from {self.origin}>"
