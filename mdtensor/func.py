"""``md.func``: program transforms built on the dispatcher (tracing, functionalization)
and on the autograd engine (``grad``, ``grad_and_value``, ``vjp``, ``jvp``, ``jacrev``,
``jacfwd``, ``hessian``: mdtensor/_grad_transforms.py, docs/TRANSFORMS.md).

``functionalize(f, remove=...)`` runs ``f`` with every mutation replaced by functional ops
(Note [Functionalize] in mdtensor/layers/functionalize.py); ``trace(functionalize(f), x)``
records the functional program.

``trace(f, *example_args)`` runs ``f`` under a recording mode and returns a ``Graph`` of the
``OpOverload`` calls that executed -- after autograd, so a ``backward()`` inside ``f`` is
recorded too (forward and backward in one graph).  The graph prints as readable Python and
replays on new inputs of the same shapes (mdtensor/compiler/capture.py: Note [Tracing
backward], Note [Graph breaks]); ``md.compile`` replays the same captures without the
dispatcher (docs/COMPILE.md).
"""

from __future__ import annotations

from mdtensor.compiler.capture import Graph, GraphBreak, trace
from mdtensor.layers.functionalize import FunctionalTensor, functionalize

from ._grad_transforms import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp
from .layers.vmap import BatchedTensor, vmap

__all__ = ["BatchedTensor", "FunctionalTensor", "Graph", "GraphBreak", "functionalize", "grad",
           "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "trace", "vjp", "vmap"]
