"""Grad modes: whether ops record the graph (``no_grad``, ``enable_grad``,
``set_grad_enabled``) and inference mode (``inference_mode``), as the thread-local state.
"""

from __future__ import annotations

import functools as _functools
from collections.abc import Callable as _Callable
from contextvars import ContextVar
from typing import Any as _Any
from typing import TypeVar as _TypeVar
from typing import overload as _overload

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.dispatch.tls import dispatch_tls
from mdtensor.tensors.version_counter import INFERENCE, creation_counter, new_counter

__all__ = ["enable_grad", "inference_mode", "is_grad_enabled", "is_inference_mode_enabled",
           "no_grad", "set_grad_enabled"]


def is_grad_enabled() -> bool:
    return bool(dispatch_tls.get()[1] & AUTOGRAD_FUNCTIONALITY)


def is_inference_mode_enabled() -> bool:
    return new_counter() is INFERENCE


# Note [Grad modes]
# ~~~~~~~~~~~~~~~~~
# Grad mode is the Autograd key's exclusion in the thread-local state (``no_grad`` excludes
# it).  Inference mode excludes it too and makes the tensors made meanwhile inference
# tensors (Note [Inference tensors] in mdtensor/tensors/version_counter.py); as in PyTorch,
# where inference mode excludes the autograd keys beneath grad mode, ``enable_grad`` and
# ``set_grad_enabled(True)`` inside it record nothing, and ``inference_mode(False)`` inside
# it restores the grad mode it was entered with (kept in ``_inference_outer``).  Unlike
# PyTorch's, mdtensor's inference mode keeps ADInplaceOrView: ordinary tensors mutated in it
# bump their version counters (PyTorch's do too: their key set has the key), and the kernels
# of that layer skip inference tensors.  Each mode restores, on exit, exactly the state it
# replaced (ContextVar tokens), so modes exited in order leave nothing behind.

#: None outside inference mode; in it, the Autograd bit of ``keep`` outside it.
_inference_outer: ContextVar = ContextVar("mdtensor_inference_outer", default=None)


_Mode = _TypeVar("_Mode", bound="_GradModeBase")
_Fn = _TypeVar("_Fn", bound=_Callable[..., _Any])


class _GradModeBase:
    """Context manager and decorator restoring exactly what it changed; re-entrant (each
    ``with`` keeps its own tokens).  ``@md.no_grad`` without parentheses decorates as
    ``@md.no_grad()`` does (as PyTorch's)."""

    #: the mode can be made without arguments, so ``@mode`` on a function means ``@mode()``
    _bare_decorator = True

    # For type checkers: ``no_grad()`` is a mode (the ``with`` statement needs its
    # ``__enter__``), ``no_grad(fn)`` the decorated function.
    @_overload
    def __new__(cls, fn: _Fn, /) -> _Fn: ...
    @_overload
    def __new__(cls: type[_Mode], *args: _Any, **kwargs: _Any) -> _Mode: ...

    def __new__(cls, *args, **kwargs):
        if (cls._bare_decorator and len(args) == 1 and not kwargs and callable(args[0])
                and not isinstance(args[0], (bool, int))):
            return cls()(args[0])  # a function, not an instance: __init__ is not called
        return super().__new__(cls)

    def _enter(self):
        """Set the state; returns what ``_exit`` needs to restore it."""
        raise NotImplementedError

    @staticmethod
    def _exit(tokens) -> None:
        tls_token, *rest = tokens
        dispatch_tls.reset(tls_token)
        for var, token in zip((creation_counter, _inference_outer), rest):
            var.reset(token)

    def __enter__(self):
        if not hasattr(self, "_stack"):
            self._stack = []
        self._stack.append(self._enter())
        return self

    def __exit__(self, *exc):
        self._exit(self._stack.pop())

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError(f"{type(self).__name__}: a decorator takes a function, got "
                            f"{type(fn).__name__}")

        @_functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)(*self._args()):
                return fn(*args, **kwargs)
        return wrapper

    def _args(self):
        return ()


def _set_grad_state(enabled: bool):
    """Set grad mode in this context; the ContextVar token (Note [Grad modes])."""
    inc, keep = dispatch_tls.get()
    if enabled:
        if keep & AUTOGRAD_FUNCTIONALITY or _inference_outer.get() is not None:
            return dispatch_tls.set((inc, keep))
        return dispatch_tls.set((inc, keep | AUTOGRAD_FUNCTIONALITY))
    return dispatch_tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY))


class no_grad(_GradModeBase):
    """Ops inside record no graph (the Autograd key is excluded)."""

    def _enter(self):
        return (_set_grad_state(False),)


class enable_grad(_GradModeBase):
    """Re-enables recording inside ``no_grad`` (not inside ``inference_mode``: Note [Grad
    modes])."""

    def _enter(self):
        return (_set_grad_state(True),)


class set_grad_enabled(_GradModeBase):
    """``set_grad_enabled(mode)`` sets grad mode at once, as PyTorch's does: a plain call
    switches it for the rest of this thread/context; as a context manager it restores, on
    exit, the mode from before the call, and as a decorator it sets the mode per call."""

    _bare_decorator = False  # it needs its mode

    def __init__(self, mode: bool):
        if not isinstance(mode, (bool, int)):
            raise TypeError(f"set_grad_enabled: mode must be a bool, got "
                            f"{type(mode).__name__}")
        self.mode = bool(mode)
        self.prev = is_grad_enabled()
        _set_grad_state(self.mode)  # no token: the call itself sets the mode

    def _args(self):
        return (self.mode,)

    def __call__(self, fn):
        _set_grad_state(self.prev)  # a decorator sets the mode per call only
        return super().__call__(fn)

    def _enter(self):
        return (_set_grad_state(self.mode),)

    def __exit__(self, *exc):
        super().__exit__(*exc)
        _set_grad_state(self.prev)  # the mode from before this object was made


class inference_mode(_GradModeBase):
    """Like ``no_grad``, and the tensors made inside are inference tensors: they cannot be
    saved for backward, and in-place ops on them outside inference mode raise (Note
    [Inference tensors] in mdtensor/tensors/version_counter.py)."""

    def __init__(self, mode: bool = True):
        self.mode = bool(mode)

    def _args(self):
        return (self.mode,)

    def _enter(self):
        inc, keep = dispatch_tls.get()
        outer = _inference_outer.get()
        if self.mode:
            if outer is None:
                outer = keep & AUTOGRAD_FUNCTIONALITY
            return (dispatch_tls.set((inc, keep & ~AUTOGRAD_FUNCTIONALITY)),
                    creation_counter.set(INFERENCE), _inference_outer.set(outer))
        if outer is None:  # not in inference mode: nothing to undo
            return (dispatch_tls.set((inc, keep)),)
        return (dispatch_tls.set((inc, keep | outer)), creation_counter.set(None),
                _inference_outer.set(None))
