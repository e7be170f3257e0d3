"""The Functionalize layer (first part): mutations on immutable backends.

Note [Functionalize]
~~~~~~~~~~~~~~~~~~~~
Tensors of backends whose arrays cannot be written (JAX) carry the Functionalize key.  Its
boxed fallback runs every op below the layer; a *mutating* op (in-place ``add_``, ``out=``,
``x[k] = v``) instead runs its functional counterpart (``add``) and writes the result back
by replacing the mutated tensor's array -- so in-place ops and ``__setitem__`` work on JAX
as they do on NumPy, and the ADInplaceOrView layer above has already bumped the version.

Not done yet (see docs/ARCHITECTURE.md): views of a functionalized tensor are copies, so a
mutation through a view does not reach its base, and ``md.func.functionalize(f)`` (the
user-facing transform with view replay) is not implemented.
"""

from __future__ import annotations

from ._keys import AFTER_FUNCTIONALIZE, DispatchKey
from ._ops import Kernel, dispatcher, fallthrough_kernel, lookup, register_fallback

__all__ = ["install"]

_functional_cache: dict = {}


def _functional_of(op):
    """The functional overload of a mutating ``op`` (``add_.Tensor`` -> ``add.Tensor``,
    ``add.out`` -> ``add.Tensor``)."""
    hit = _functional_cache.get(op)
    if hit is not None:
        return hit
    schema = op.schema
    decl = op.decl
    candidates = list(decl.functional) if decl is not None else []
    want = schema.overload_name
    if schema.is_out:
        want = "" if want == "out" else want[:-4] if want.endswith("_out") else want
        if want == "" and any(c.schema.overload_name == "Tensor" for c in candidates):
            want = "Tensor"
    best = next((c for c in candidates if c.schema.overload_name == want), None)
    if best is None and schema.is_inplace:
        try:
            packet = lookup(f"{schema.namespace}::{schema.name[:-1]}")
            best = packet._overloads.get(want or "default")
        except ValueError:
            best = None
    if best is None:
        raise NotImplementedError(
            f"{op.name}: functionalization needs a functional counterpart of this mutating "
            f"op, and none was found")
    _functional_cache[op] = best
    return best


def _write_back(t, value) -> None:
    """Replace ``t``'s array with ``value``'s, keeping ``t``'s dtype."""
    xp = t._device.xp
    data = value._data if hasattr(value, "_data") else value
    if data.dtype != t._data.dtype:
        data = xp.astype(data, t._data.dtype)
    if tuple(data.shape) != tuple(t._data.shape):
        data = xp.broadcast_to(data, tuple(t._data.shape))
    t._data = data


def _functionalize_fallback(op, ks, args, kwargs):
    schema = op.schema
    below = ks & AFTER_FUNCTIONALIZE
    if not schema.is_mutable:
        return op.redispatch(below, *args, **kwargs)
    if schema.name == "index_put_":
        return _index_put(op, args)
    rewrite = _REWRITES.get(schema.name)
    if rewrite is not None:
        self = args[0]
        _write_back(self, rewrite(*args, **kwargs))
        return self
    functional = _functional_of(op)
    if schema.is_out:
        out = kwargs.pop("out")
        result = functional.redispatch(below, *args, **kwargs)
        _write_back(out, result)
        return out
    self = args[0]
    result = functional.redispatch(below, *args, **kwargs)
    _write_back(self, result)
    return self


def _index_put(op, args):
    """``x[key] = v`` functionally: JAX's ``.at[key].set(v)``."""
    from mdtensor.ops.indexing import _full_key, _raw, is_basic_key

    self, key, value = args
    data = self._data
    if not hasattr(data, "at"):
        raise NotImplementedError(
            f"{op.name}: the {self._device.backend.name} backend's arrays are immutable and "
            f"have no functional update (.at[...].set)")
    raw = _full_key(key) if is_basic_key(key) else _raw(key)
    v = value._data if hasattr(value, "_data") else value
    self._data = data.at[raw].set(v)
    return self


def _masked_fill(self, mask, value):
    from mdtensor.ops import aten

    return aten.where(mask, value, self)


#: Mutating ops whose functional op is itself a composite of the mutation
#: (masked_fill = clone + masked_fill_): their functional form, written directly.
_REWRITES = {"masked_fill_": _masked_fill}


def _register_for(op) -> None:
    """Non-mutating ops fall through Functionalize: the key leaves their mask once, so a
    functional op on a JAX tensor costs no extra hop (Note [Functionalize])."""
    # Built-in ops only: user ops keep exactly the registrations their library made (the
    # boxed fallback redispatches their functional calls correctly, one hop slower).
    if op.schema.namespace != "aten":
        return
    if not op.schema.is_mutable and DispatchKey.Functionalize not in op._kernels:
        op._push_kernel(Kernel(fallthrough_kernel, DispatchKey.Functionalize,
                               name="fallthrough"))


def install() -> None:
    # Called once, by mdtensor._layers.install (which is guarded).
    register_fallback(Kernel(_functionalize_fallback, DispatchKey.Functionalize, boxed=True,
                             name="functionalize"))
    for op in list(dispatcher.overloads.values()):
        _register_for(op)
    dispatcher.define_hooks.append(_register_for)
