"""``md.library.register_autograd``: derivatives for custom ops."""

from __future__ import annotations

from mdtensor.layers.autograd.graph import Node, attach, gradient_edge
from mdtensor.layers.autograd.kernels import below_autograd
from mdtensor.tensors.tensor import Tensor

from .function import validate_gradients

__all__ = ["register_autograd"]


class _Ctx:
    """The ``ctx`` of ``setup_context``/``backward`` (attributes are free-form)."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def register_autograd(op, backward, setup_context, lib):
    """Register an Autograd kernel for ``op`` built from ``backward``/``setup_context``."""
    schema = op.schema
    tensor_pos = [i for i, a in enumerate(schema.arguments)
                  if a.type.is_tensor and not a.kwarg_only]
    n_positional = sum(1 for a in schema.arguments if not a.kwarg_only)
    name = f"{schema.name}Backward"

    def kernel(ks, *args, **kwargs):
        out = below_autograd(op, ks, args, kwargs)
        inputs = [args[i] for i in tensor_pos if i < len(args)]
        if not any(t._ag is not None and t._ag.requires_grad for t in inputs):
            return out
        ctx = _Ctx()
        if setup_context is not None:
            setup_context(ctx, args, out)

        metas = [(tuple(a.shape), a.dtype, a.device) if isinstance(a, Tensor) else None
                 for a in (*args, *(None,) * (n_positional - len(args)))]

        def formula(g, o):
            res = validate_gradients(name, backward(ctx, g), metas)
            return [res[i] for i in tensor_pos]

        node = Node.new(name, None, (), {}, None, (),
                        [gradient_edge(t) for t in inputs], 1)
        node.formula = lambda g, o, *a, **k: formula(g, o)
        outs = out if isinstance(out, tuple) else (out,)
        for k, o in enumerate(outs):
            if isinstance(o, Tensor) and o.dtype.kind in "fc":
                attach(o, node, k)
        return out

    kernel.__qualname__ = f"autograd[{op.name}]:{getattr(backward, '__qualname__', backward)}"
    return lib.impl(op, kernel, "Autograd", with_keyset=True, allow_override=True)
