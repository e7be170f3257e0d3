"""Installs the functionality layers: each layer's backend fallback and per-op kernels.

Until a layer has real work for an op, its key falls through (``fallthrough_kernel``): the
key is dropped from the op's key set mask once, so it costs nothing per call.

| key             | fallback                                    | per-op kernels          |
|-----------------|---------------------------------------------|-------------------------|
| PreDispatch     | fallthrough (modes push their handler)      |                         |
| Batched         | ``vmap`` boxed fallback (rule, or a loop)   | batching rules          |
| Autocast        | fallthrough                                 | cast rules for its list |
| Autograd        | ``autograd`` fallback (errors on backward)  | derivative formulas     |
| ADInplaceOrView | fallthrough                                 | in-place / view ops     |
| Functionalize   | ``functionalize`` boxed fallback            |                         |
| Python          | modes / subclasses boxed fallback           |                         |
| BackendSelect   | fallthrough                                 | factories               |
"""

from __future__ import annotations

from mdtensor.dispatch.kernel import Kernel, fallthrough_kernel
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.operators import register_fallback

from . import functionalize, inplace_or_view, python_dispatch, vmap
from .autograd import api as autograd_api
from .autograd import kernels as autograd_kernels

__all__ = ["install"]

_FALLTHROUGH_BY_DEFAULT = ("PreDispatch", "Autocast", "BackendSelect")

_installed = False


def install() -> None:
    """Register every layer's fallback and per-op kernels (once; ``import mdtensor`` calls
    it after the catalogue is declared, so the per-op kernels cover the catalogue's ops, and
    each layer's define hook covers ops defined later)."""
    global _installed
    if _installed:
        return
    _installed = True
    for name in _FALLTHROUGH_BY_DEFAULT:
        register_fallback(Kernel(fallthrough_kernel, DispatchKey[name], name="fallthrough"))
    inplace_or_view.install()
    autograd_kernels.install()
    autograd_api.install_tensor_methods()
    python_dispatch.install()
    functionalize.install()
    vmap.install()
