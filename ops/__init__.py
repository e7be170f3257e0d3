"""The op catalogue, and ``md.ops``: the operator namespaces.

Each module declares one chapter of ops with ``defop`` (``_decl``); importing this package
declares them all.  ``md.ops.aten.add`` (and ``md.ops.<ns>.<op>`` for custom namespaces)
is served by the module-level ``__getattr__`` below, so the catalogue package is also the
root of the operator namespaces, as ``torch.ops`` is.
"""

from __future__ import annotations

from mdtensor.dispatch.namespaces import namespaces as _namespaces
from mdtensor.layers import functionalize as _functionalize

from . import (  # noqa: F401  (imported for their declarations)
    _decl,
    closeness,
    conv,
    convolution,
    creation,
    diagonals,
    distances,
    elementwise,
    fft,
    fft_planes,
    filling,
    float_values,
    histograms,
    indexing,
    joining,
    least_squares,
    linalg,
    losses,
    manipulation,
    nn,
    normalization,
    norms,
    padding,
    pooling,
    reductions,
    scatter,
    searching,
    sparse,
    special_functions,
    statistics,
    torch_overloads,
    view_copy,  # generated from the view ops declared above
)
from ._decl import CATALOGUE, OpDecl, OpInfo, SampleInput, defop  # noqa: F401
from ._impl_kernels import check_inplace_result, warn_if_resized

__all__ = ["CATALOGUE", "OpDecl", "OpInfo", "SampleInput", "aten", "aten_calls", "defop"]

aten = _namespaces.aten  # a module attribute: ``from mdtensor.ops import aten``
#: the aten operators as plain functions (Note [Packet functions] in
#: mdtensor/dispatch/callers.py); inside mdtensor, ``mdtensor.dispatch.namespaces.aten_calls``
aten_calls = aten._calls

# The catalogue registers into the layers below it, which never import it: the derivative
# formulas (ops/derivatives.py registers them with the Autograd layer on import) and what
# Functionalize takes from the kernels (Note [What Functionalize takes from the catalogue]
# in mdtensor/layers/functionalize.py).
from . import derivatives  # noqa: E402,F401

_functionalize.use_catalogue(
    check_inplace_result=check_inplace_result, warn_if_resized=warn_if_resized,
    gather_at=indexing.gather_at, scatter_set=indexing.scatter_set,
    view_copies=view_copy.VIEW_COPY, rewrites={"masked_fill_": indexing.masked_fill_functional})

from . import batching  # noqa: E402,F401  (vmap's rules for the ops declared above)


def __getattr__(name: str):
    if name.startswith("_"):  # private names are submodules, never op namespaces
        raise AttributeError(f"module 'mdtensor.ops' has no attribute {name!r}")
    return getattr(_namespaces, name)


def __dir__():
    return sorted(set(globals()) | set(dir(_namespaces)))
