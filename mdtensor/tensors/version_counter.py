"""Version counters: how in-place writes are counted, and inference tensors.

A tensor's ``_vc`` is ``None`` (version 0, never written) until a write or a view needs a
counter (``counter``), then a ``VersionCounter`` shared with every view of the same base.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = ["INFERENCE", "VersionCounter", "counter", "creation_counter", "new_counter"]


class VersionCounter:
    """Counts in-place writes; shared by a tensor and all its views."""

    __slots__ = ("value", "views")  # views: weak refs to live views (Functionalize only)

    # No ``__init__`` (Note [Class calls]): ``VersionCounter()`` then fill both slots.


# Note [Inference tensors]
# ~~~~~~~~~~~~~~~~~~~~~~~~
# As in PyTorch, a tensor made under ``md.inference_mode()`` is an *inference tensor*: it
# keeps no version counter, so it may not be saved for backward, and an in-place op on it
# outside inference mode is an error (its old readers could not notice the change).  Its
# mark is its version counter: the shared ``INFERENCE`` object (version 0 for ever), which
# its views share as any view shares its base's counter.  ``Device.wrap`` reads the counter
# of new tensors from ``new_counter`` (None, or ``INFERENCE`` while inference mode is on):
# one ContextVar read per tensor made, as PyTorch's TensorImpl reads InferenceMode's
# thread-local state when it makes one.  The checks cost nothing on ordinary tensors: the
# in-place kernels and saving for backward test ``vc is INFERENCE`` only when a tensor has a
# counter at all (it was mutated, or is a view).

#: The version counter of inference tensors (Note [Inference tensors]).
INFERENCE = VersionCounter()
INFERENCE.value = 0
INFERENCE.views = None

#: The version counter new tensors start with: None, or ``INFERENCE`` in inference mode.
creation_counter: ContextVar = ContextVar("mdtensor_creation_counter", default=None)
new_counter = creation_counter.get


# Note [Version counters]
# ~~~~~~~~~~~~~~~~~~~~~~~
# A tensor's counter is created lazily (``_vc is None`` means version 0) and is shared with
# all views of the same base.  Autograd saves ``(tensor, version)`` and compares on backward
# (PyTorch's "modified by an inplace operation" error).


def counter(t: Tensor) -> VersionCounter:
    """``t``'s version counter, made on first use (Note [Version counters]): a view's is
    its base's."""
    vc = t._vc
    if vc is None:
        base = t._view.base if t._view is not None else None
        if base is not None:
            vc = counter(base)
        else:
            vc = VersionCounter()
            vc.value = 0
            vc.views = None
        t._vc = vc
    return vc
