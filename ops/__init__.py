"""The op catalogue, and ``md.ops``: the operator namespaces.

Each module declares one chapter of ops with ``defop`` (``_decl``); importing this package
declares them all.  ``md.ops.aten.add`` (and ``md.ops.<ns>.<op>`` for custom namespaces)
is served by the module-level ``__getattr__`` below, so the catalogue package is also the
root of the operator namespaces, as ``torch.ops`` is.
"""

from __future__ import annotations

from mdtensor._ops import ops as _namespaces

from . import (  # noqa: F401  (imported for their declarations)
    closeness,
    convolution,
    creation,
    diagonals,
    elementwise,
    fft,
    fft_planes,
    filling,
    float_values,
    indexing,
    joining,
    linalg,
    manipulation,
    nn,
    normalization,
    norms,
    padding,
    pooling,
    reductions,
    scatter,
    searching,
    statistics,
    torch_overloads,
    view_copy,  # generated from the view ops declared above
)
from ._decl import CATALOGUE, OpDecl, OpInfo, SampleInput, defop  # noqa: F401

__all__ = ["CATALOGUE", "OpDecl", "OpInfo", "SampleInput", "aten", "aten_calls", "defop"]

aten = _namespaces.aten  # a module attribute: ``from mdtensor.ops import aten``
#: the aten operators as plain functions, for hot code inside mdtensor (derivative formulas,
#: the engine): ``from mdtensor.ops import aten_calls as aten`` (Note [Packet functions])
aten_calls = aten._calls

from . import batching  # noqa: E402,F401  (vmap's rules for the ops declared above)


def __getattr__(name: str):
    if name.startswith("_"):  # private names are submodules, never op namespaces
        raise AttributeError(f"module 'mdtensor.ops' has no attribute {name!r}")
    return getattr(_namespaces, name)


def __dir__():
    return sorted(set(globals()) | set(dir(_namespaces)))
