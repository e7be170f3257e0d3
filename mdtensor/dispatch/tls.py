"""Thread-local (context-local) dispatch state: the included and excluded key sets.

The state is one immutable pair ``(included, keep)`` in a ``ContextVar``, where ``keep`` is
``FULL & ~excluded``; the hot path reads it with a single ``ContextVar.get`` and computes::

    ks = (tensor key sets | included) & keep & op mask

Guards replace the pair and restore the *exact* previous pair on exit (by ContextVar token),
even when the body raises, so nesting and exceptions can never leave keys behind.  Each
thread starts from the defaults; a context copied with ``contextvars.copy_context`` sees the
copying thread's state, as asyncio tasks do.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar

from .keys import BACKEND_MASK, FULL, DispatchKey, DispatchKeySet, _bits_of

__all__ = [
    "ExcludeGuard",
    "IncludeGuard",
    "excluded",
    "included",
    "local_state",
]

DEFAULT_INCLUDED = DispatchKey.BackendSelect.value | DispatchKey.ADInplaceOrView.value
DEFAULT_EXCLUDED = DispatchKey.Autocast.value

#: (included, keep) -- see the module docstring.  Read on every op call.
dispatch_tls: ContextVar[tuple[int, int]] = ContextVar(
    "mdtensor_dispatch_tls", default=(DEFAULT_INCLUDED, FULL & ~DEFAULT_EXCLUDED)
)


def _bits(keys) -> int:
    if isinstance(keys, (int, DispatchKeySet)) or hasattr(keys, "is_alias"):
        return _bits_of(keys)
    bits = 0
    for k in keys:
        bits |= _bits_of(k)
    return bits


def included() -> DispatchKeySet:
    """The key set added to every call in this thread/context."""
    return DispatchKeySet(dispatch_tls.get()[0])


def excluded() -> DispatchKeySet:
    """The key set removed from every call in this thread/context."""
    return DispatchKeySet(FULL & ~dispatch_tls.get()[1])


def local_state() -> tuple[DispatchKeySet, DispatchKeySet]:
    """``(included, excluded)`` for this thread/context."""
    inc, keep = dispatch_tls.get()
    return DispatchKeySet(inc), DispatchKeySet(FULL & ~keep)


class _Guard:
    """Base of the include/exclude guards: a re-usable, exactly-restoring context manager."""

    __slots__ = ("_bits", "_tokens")

    def __init__(self, keys: DispatchKey | DispatchKeySet | Iterable[DispatchKey] | int):
        self._bits = _bits(keys)
        self._tokens: list = []

    def _new_state(self, inc: int, keep: int) -> tuple[int, int]:
        raise NotImplementedError

    def __enter__(self):
        inc, keep = dispatch_tls.get()
        self._tokens.append(dispatch_tls.set(self._new_state(inc, keep)))
        return self

    def __exit__(self, *exc) -> None:
        dispatch_tls.reset(self._tokens.pop())


class IncludeGuard(_Guard):
    """Adds keys to the included set (and un-excludes them) while active."""

    __slots__ = ()

    def _new_state(self, inc: int, keep: int) -> tuple[int, int]:
        return inc | self._bits, keep | self._bits


class ExcludeGuard(_Guard):
    """Adds keys to the excluded set while active (e.g. ``no_grad`` excludes Autograd)."""

    __slots__ = ()

    def _new_state(self, inc: int, keep: int) -> tuple[int, int]:
        # Only the functionalities are excluded (AutogradCPU excludes Autograd, not the
        # CPU backend bit), unless only backend bits were given -- as in PyTorch, and as
        # ``DispatchKeySet.__sub__`` does.
        func = self._bits & ~BACKEND_MASK
        return inc, keep & ~(func if func else self._bits)


class RestoreGuard(_Guard):
    """Sets the whole state to a saved ``(included, keep)`` pair while active."""

    __slots__ = ("_state",)

    def __init__(self, state: tuple[int, int]):
        super().__init__(0)
        self._state = state

    def _new_state(self, inc: int, keep: int) -> tuple[int, int]:
        return self._state
