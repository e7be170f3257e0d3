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

from ._keys import DispatchKey
from ._ops import Kernel, fallthrough_kernel, register_fallback

__all__ = ["install"]

_FALLTHROUGH_BY_DEFAULT = ("PreDispatch", "Autocast", "BackendSelect")

_installed = False


def install() -> None:
    global _installed
    if _installed:
        return
    _installed = True
    for name in _FALLTHROUGH_BY_DEFAULT:
        register_fallback(Kernel(fallthrough_kernel, DispatchKey[name], name="fallthrough"))
    from . import _functionalize, _inplace_or_view, _python_dispatch, _vmap, autograd

    _inplace_or_view.install()
    autograd.install()
    _python_dispatch.install()
    _functionalize.install()
    _vmap.install()
    _install_backend_hook()


def _install_backend_hook() -> None:
    from mdtensor import backends

    from ._ops import dispatcher

    def on_load(backend) -> None:
        if backend.array_api:
            dispatcher.array_api_backends.add(backend.key)
            dispatcher.invalidate_all()

    backends.on_load(on_load)
