"""Hand-written CPU kernels: the registration they share.

Note [Hand-written CPU kernels]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``defop(cpu_impl=...)`` (Note [NumPy fast impls] in ops/_decl.py) serves ops whose
Tensor arguments come first and whose operands the accepted-dtype check can see.  Ops whose
Tensors lie elsewhere in the schema (``index_select(self, dim, index)``), whose common case
is a few checks away from one NumPy call, or whose functional form is a composite
(``masked_fill``) get a CPU kernel written by hand instead: it computes the common case
directly on the arrays -- operands on one device, of the dtypes and shapes the op expects --
and hands every other call, unchanged, to the kernel the op had (its ArrayAPI kernel, or
its CompositeExplicitAutograd one), whose checks raise the op's errors.  So the errors,
the other backends and the Meta kernels stay as they were, and the OpInfo sweep and the
differential tests compare the fast case against the same references.
"""

from __future__ import annotations

from collections.abc import Callable

from mdtensor.dispatch.keys import DispatchKey

from ._decl import register_leaf

__all__ = ["register_cpu"]


def register_cpu(op, build: Callable, fallback: DispatchKey = DispatchKey.ArrayAPI) -> None:
    """Register ``build(generic)`` as ``op``'s CPU kernel, where ``generic`` is the kernel
    ``op`` has for ``fallback`` (Note [Hand-written CPU kernels])."""
    kernel = build(op.kernels_for(fallback)[-1].fn)
    kernel.__qualname__ = kernel.__name__ = f"cpu[{op.name}]"
    register_leaf(op, kernel, DispatchKey.CPU)
