"""``md.library.register_autograd``: derivatives for custom ops.

Note [Custom op derivatives]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The Autograd kernel registered for a custom op runs the op below Autograd, then, when a
Tensor it differentiates requires grad, records one node whose formula calls the user's
``backward(ctx, *grads)``, as PyTorch's ``torch.library.register_autograd``:

- The differentiable inputs are the op's positional ``Tensor``, ``Tensor?`` and
  ``Tensor[]`` arguments; each Tensor of a list is an input of its own (one edge each,
  in order), a None optional Tensor none.
- ``backward`` receives one gradient per output of the schema -- a list of gradients for a
  ``Tensor[]`` output -- with zeros for an output nothing flowed into (PyTorch's
  ``materialize_grads``), and returns one gradient per positional argument (None for
  the others; extra trailing Nones are dropped): for a ``Tensor[]`` argument None or a
  list of one gradient (or None) per Tensor of the list.
- The gradients are checked as ``md.autograd.Function``'s (``validate_gradients``): an
  error names the argument's index, and the element's for a list.
"""

from __future__ import annotations

from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.graph import Node, attach, gradient_edge
from mdtensor.layers.autograd.kernels import below_autograd
from mdtensor.tensors.tensor import Tensor

from .function import validate_gradients

__all__ = ["register_autograd"]


class _Ctx:
    """The ``ctx`` of ``setup_context``/``backward`` (attributes are free-form)."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def _meta(t):
    return (tuple(t.shape), t.dtype, t.device) if isinstance(t, Tensor) else None


def _flat_outputs(out) -> tuple[list, list]:
    """``(the Tensors of out in order, the schema's outputs as slices of that list)``: a
    ``Tensor[]`` output is its elements, a non-Tensor output (an int) none."""
    flat, spans = [], []
    for o in (out if isinstance(out, tuple) else (out,)):
        start = len(flat)
        if isinstance(o, list):
            flat.extend(o)
            spans.append(slice(start, len(flat)))
        else:
            if isinstance(o, Tensor):
                flat.append(o)
            spans.append(start if isinstance(o, Tensor) else None)
    return flat, spans


def _input_gradients(name, grads, metas, lists) -> list:
    """The gradients of the flat inputs from ``backward``'s result: one per positional
    argument, checked, those of each ``Tensor[]`` argument (``lists``: position -> the
    metadata of its Tensors) spread."""
    if not isinstance(grads, tuple):
        grads = (grads,)
    top = validate_gradients(name, grads, metas)  # a list argument's meta is None
    flat = []
    for i, g in enumerate(top):
        if i in lists:
            elems = lists[i]
            g = grads[i]
            if g is None:
                flat.extend([None] * len(elems))
                continue
            if not isinstance(g, (list, tuple)) or len(g) != len(elems):
                got = f"{len(g)} gradients" if isinstance(g, (list, tuple)) else \
                    type(g).__name__
                raise RuntimeError(
                    f"function {name} returned an invalid gradient at index {i} - expected "
                    f"None or a list of {len(elems)} gradients for the Tensor[] argument, got "
                    f"{got}")
            flat.extend(validate_gradients(name, tuple(g), elems, f"index {i}, element "))
        elif metas[i] is not None:
            flat.append(g)
    return flat


def register_autograd(op, backward, setup_context, lib):
    """Register an Autograd kernel for ``op`` built from ``backward``/``setup_context``
    (Note [Custom op derivatives])."""
    schema = op.schema
    positional = [a for a in schema.arguments if not a.kwarg_only]
    differentiable = [i for i, a in enumerate(positional)
                      if a.type.is_tensor or a.type.is_tensor_list]
    list_positions = {i for i in differentiable if positional[i].type.is_tensor_list}
    name = f"{schema.name}Backward"

    def kernel(ks, *args, **kwargs):
        out = below_autograd(op, ks, args, kwargs)
        inputs = []
        for i in differentiable:
            if i < len(args):
                a = args[i]
                if i in list_positions:
                    inputs.extend(a)
                elif isinstance(a, Tensor):
                    inputs.append(a)
        if not any(t._ag is not None and t._ag.requires_grad for t in inputs):
            return out
        ctx = _Ctx()
        if setup_context is not None:
            setup_context(ctx, args, out)

        padded = (*args, *(None,) * (len(positional) - len(args)))
        metas = [None if i in list_positions else _meta(a) for i, a in enumerate(padded)]
        lists = {i: [_meta(t) for t in padded[i]] for i in list_positions if i < len(args)}
        outs, spans = _flat_outputs(out)
        out_metas = [_meta(o) for o in outs]

        def formula(g, o):
            gs = g if len(outs) != 1 else (g,)
            gs = [aten.zeros(shape, dtype=dtype, device=device) if x is None else x
                  for x, (shape, dtype, device) in zip(gs, out_metas)]
            per_output = [None if s is None else gs[s] for s in spans]
            return _input_gradients(name, backward(ctx, *per_output), metas, lists)

        node = Node.new(name, None, (), {}, None, (), [gradient_edge(t) for t in inputs],
                        len(outs))
        node.formula = lambda g, o, *a, **k: formula(g, o)
        for k, o in enumerate(outs):
            if o.dtype.kind in "fc":
                attach(o, node, k)
        return out

    kernel.__qualname__ = f"autograd[{op.name}]:{getattr(backward, '__qualname__', backward)}"
    return lib.impl(op, kernel, "Autograd", with_keyset=True, allow_override=True)
