"""The Python key: dispatch modes and tensor subclasses with ``__md_dispatch__``.

Note [Python key]
~~~~~~~~~~~~~~~~~
The Python key is in a call's key set when a dispatch mode is active (the mode stack puts it
in the thread-local include set) or when an argument is a Tensor subclass defining
``__md_dispatch__`` (its instances carry the key).  It sits below Autograd and
Functionalize, so handlers see the ops that actually execute -- backward ops included --
as with PyTorch's ``__torch_dispatch__``.

The fallback runs the innermost mode, popped while its handler runs (so ``func(*args)``
inside reaches the next mode, or the kernels below the Python key).  With no mode left it
asks the subclasses among the arguments, in order; ``NotImplemented`` defers to the next.
With neither, the call continues below the Python key.  ``func`` is the ``OpOverload``
with its arguments normalized: positional parameters positional, keyword-only ones in
``kwargs``, defaults filled in.

Note [Tensor subclasses]
~~~~~~~~~~~~~~~~~~~~~~~~
The public pieces, as PyTorch's: ``Tensor._make_wrapper_subclass(cls, inner)`` makes an
instance of ``cls`` standing for the tensor ``inner`` (its shape, dtype, device, array and
version counter, plus the Python key), ``md.modes.unwrap(t)`` gives ``inner`` back (a
plain tensor of the same data for other subclass instances), and ``x.as_subclass(cls)``
views ``x`` as ``cls`` (attached to the autograd graph).  A subclass's ``__md_dispatch__``
runs with the Python key excluded, as a mode's handler runs with the mode popped: calling
``func(*args)`` on the subclass instances themselves computes on their arrays and returns
plain tensors, instead of reaching the handler again (a RecursionError before), so a
handler unwraps with ``tree_map(unwrap, args)`` or not at all and rewraps what it wants.
"""

from __future__ import annotations

from contextvars import ContextVar

from mdtensor.dispatch.kernel import Kernel
from mdtensor.dispatch.keys import AFTER_FUNCTIONALIZE, AFTER_PYTHON, DispatchKey
from mdtensor.dispatch.operators import register_fallback
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.tensors.tensor import Tensor

__all__ = ["mode_stack", "normalize", "push_mode"]

PYTHON = DispatchKey.Python.value

#: The active modes, innermost last.
mode_stack: ContextVar[tuple] = ContextVar("mdtensor_mode_stack", default=())


def normalize(op, args, kwargs):
    """``(args, kwargs)`` in schema form with defaults (Note [Python key])."""
    return op.schema.normalize(args, kwargs)


def _subclass_types(args, kwargs):
    seen = []
    for v in (*args, *kwargs.values()):
        items = v if isinstance(v, (list, tuple)) else (v,)
        for t in items:
            cls = type(t)
            if cls is not Tensor and isinstance(t, Tensor) and \
                    hasattr(cls, "__md_dispatch__") and cls not in seen:
                seen.append(cls)
    return tuple(seen)


def _checked(op, result, who):
    """A handler's result, checked against the op's schema: a Tensor where it returns one
    Tensor, a tuple or list where it returns several (a mode returning None for an op
    whose input required grad failed later in autograd, naming nothing)."""
    returns = op.schema.returns
    if len(returns) == 1 and returns[0].type.is_tensor and not returns[0].type.is_tensor_list:
        if not isinstance(result, Tensor):
            raise TypeError(f"{op.name}: {who} returned {type(result).__name__}; expected a "
                            f"Tensor (the schema returns {returns[0].type})")
    elif len(returns) > 1 or (returns and returns[0].type.is_tensor_list):
        if not isinstance(result, (tuple, list)):
            raise TypeError(f"{op.name}: {who} returned {type(result).__name__}; expected a "
                            f"tuple or list of {len(returns)} result(s)")
    return result


# Note [Mode handlers]
# ~~~~~~~~~~~~~~~~~~~~
# A mode's handler runs with the layers above the Python key excluded, as PyTorch's
# ``__torch_dispatch__`` runs below autograd: they did their part before the call reached
# the mode, so ``func(*args)`` in the handler must not run them again (ADInplaceOrView
# bumped an in-place op's version counter a second time: ``x.add_(1)`` under a mode moved
# it by 2).


def _python_fallback(op, ks, args, kwargs):
    stack = mode_stack.get()
    types = _subclass_types(args, kwargs)
    if stack:
        mode = stack[-1]
        token = mode_stack.set(stack[:-1])
        inc, keep = dispatch_tls.get()
        below = dispatch_tls.set((inc, keep & AFTER_FUNCTIONALIZE))  # Note [Mode handlers]
        try:
            nargs, nkwargs = normalize(op, args, kwargs)
            result = mode.__md_dispatch__(op, types, nargs, nkwargs)
        finally:
            dispatch_tls.reset(below)
            mode_stack.reset(token)
        if result is not NotImplemented:
            return _checked(op, result, f"the dispatch mode {type(mode).__name__}")
    if types:
        nargs, nkwargs = normalize(op, args, kwargs)
        inc, keep = dispatch_tls.get()
        token = dispatch_tls.set((inc & ~PYTHON, keep & ~PYTHON))  # Note [Tensor subclasses]
        try:
            for cls in types:
                result = cls.__md_dispatch__(op, types, nargs, nkwargs)
                if result is not NotImplemented:
                    return _checked(op, result, f"{cls.__name__}.__md_dispatch__")
        finally:
            dispatch_tls.reset(token)
        raise TypeError(
            f"{op.name}: no __md_dispatch__ handler accepted the call; every subclass "
            f"({', '.join(c.__name__ for c in types)}) returned NotImplemented")
    return op.redispatch(ks & AFTER_PYTHON, *args, **kwargs)


# Note [Modes exited out of order]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A mode leaving in order restores the exact state it replaced (ContextVar tokens).  One
# that leaves while a mode entered after it is still on (``a.__enter__(); b.__enter__();
# a.__exit__(); b.__exit__()``) cannot: resetting its tokens would bring back the state
# before it, and ``b``'s exit then the state with ``a`` on, for good.  Out of order, a mode
# removes itself from the stack instead, and the Python key stays included while the stack
# is not empty -- so the stack ends empty, as PyTorch's does.


class push_mode:
    """Push ``mode`` for the ``with`` block: the mode stack and the Python key in TLS."""

    __slots__ = ("mode", "_tokens")

    def __init__(self, mode):
        self.mode = mode
        self._tokens = []

    def __enter__(self):
        inc, keep = dispatch_tls.get()
        stack = mode_stack.get() + (self.mode,)
        t1 = mode_stack.set(stack)
        t2 = dispatch_tls.set((inc | PYTHON, keep | PYTHON))
        self._tokens.append((t1, t2, stack))
        return self.mode

    def __exit__(self, *exc):
        t1, t2, stack = self._tokens.pop()
        if mode_stack.get() is stack:  # in order: the exact state from before
            dispatch_tls.reset(t2)
            mode_stack.reset(t1)
            return
        # Note [Modes exited out of order]
        now = list(mode_stack.get())
        for i in range(len(now) - 1, -1, -1):
            if now[i] is self.mode:
                del now[i]
                break
        mode_stack.set(tuple(now))
        if not now:  # only modes include the Python key in the thread-local state
            inc, keep = dispatch_tls.get()
            dispatch_tls.set((inc & ~PYTHON, keep))



def install() -> None:
    # Called once, by mdtensor.layers.install (which is guarded).
    register_fallback(Kernel(_python_fallback, DispatchKey.Python, boxed=True,
                             name="python_dispatch"))
