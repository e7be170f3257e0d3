"""Schema alias contracts, checked around user-registered kernels.

Note [Alias contracts]
~~~~~~~~~~~~~~~~~~~~~~
A schema promises how outputs alias inputs: an in-place overload (``Tensor(a!) self ->
Tensor(a!)``) returns its mutated input; an ``out=`` overload returns ``out``; a functional
overload returns fresh tensors, never one of its inputs.  A kernel that breaks the promise
corrupts everything above it silently -- a ``masked_fill_`` override that returns a new
tensor makes ``masked_fill`` (``clone`` + ``masked_fill_``) return the unfilled clone.  So
every kernel registered from user code is wrapped by ``checked`` and a broken promise raises
naming the op and the kernel.  Built-in kernels are not wrapped (no per-call cost); the
OpInfo sweep and ``md.library.opcheck`` check them.
"""

from __future__ import annotations

from .resolution import schema_class

__all__ = ["check_result", "checked"]


def _tensors(value):
    Tensor = schema_class("Tensor")  # Note [Schema classes] in resolution.py
    if isinstance(value, Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, Tensor)]
    return []


def check_result(op, kernel_name: str, args, kwargs, result) -> None:
    """Raise RuntimeError if ``result`` breaks ``op``'s alias contract."""
    schema = op.schema
    bound = {}
    for i, a in enumerate(schema.arguments):
        if i < len(args) and not a.kwarg_only:
            bound[a.name] = args[i]
        elif a.name in kwargs:
            bound[a.name] = kwargs[a.name]
    outs = result if isinstance(result, (tuple, list)) and schema.returns_tuple else (result,)
    where = f"{op.name}: the kernel {kernel_name}"
    for i, ret in enumerate(schema.returns):
        if i >= len(outs):
            break
        alias = ret.type.alias
        out = outs[i]
        if alias is not None and alias.is_write:
            src = schema.returns_alias_of(i)
            expected = bound.get(src)
            if expected is not None and out is not expected:
                raise RuntimeError(
                    f"{where} broke the schema's alias contract: the schema says return "
                    f"{i} is argument '{src}' itself, mutated in place "
                    f"({ret.type}), but the kernel returned "
                    f"{'a new tensor' if out is not None else 'None'}. An in-place or out= "
                    f"kernel must write into '{src}' and return it."
                )
    if schema.is_mutable or schema.is_view:
        return
    inputs = {id(t) for v in bound.values() for t in _tensors(v)}
    for out in _tensors(result):
        if id(out) in inputs:
            raise RuntimeError(
                f"{where} broke the schema's alias contract: {schema.full_name} is a "
                f"functional op, so it must return a new tensor, but the kernel returned one "
                f"of its inputs. Return a copy (e.g. x.clone()) instead."
            )


def checked(op, kernel, entry):
    """Wrap table entry ``entry`` so every result is checked against ``op``'s schema."""

    def checked_kernel(*args, **kwargs):
        result = entry(*args, **kwargs)
        check_result(op, kernel.name, args, kwargs, result)
        return result

    return checked_kernel
