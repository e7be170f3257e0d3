"""``md.autograd.Function``: user-defined differentiable functions (PyTorch's API).

Example:
    >>> class Exp(md.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         y = md.exp(x)
    ...         ctx.save_for_backward(y)
    ...         return y
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (y,) = ctx.saved_tensors
    ...         return g * y
    >>> Exp.apply(md.asarray([0.0], requires_grad=True))
"""

from __future__ import annotations

from mdtensor.dispatch.keys import DispatchKey
from mdtensor.dispatch.namespaces import aten_calls as aten
from mdtensor.layers.autograd.formulas import sum_to
from mdtensor.layers.autograd.grad_mode import no_grad
from mdtensor.layers.autograd.graph import _FREED, Node, attach, gradient_edge
from mdtensor.tensors.autograd_meta import saved_version
from mdtensor.tensors.tensor import Tensor

__all__ = ["Function", "FunctionCtx", "validate_gradients"]

_BATCHED = DispatchKey.Batched.value


def validate_gradients(name: str, grads, inputs, where: str = "index ") -> list:
    """A user backward's gradients checked as PyTorch's engine checks them
    (``validate_outputs``): one per input (``(shape, dtype, device)`` or None for a
    non-Tensor), each None or a Tensor on the input's device, its shape the input's or
    expandable to it (then summed to it), cast to the input's dtype (a complex gradient of
    a real input gives its real part).  ``where`` begins the errors' position ("index 1"),
    "index 1, element " for the gradients of a Tensor list's elements."""
    if not isinstance(grads, tuple):
        grads = (grads,)
    n = len(inputs)
    if len(grads) > n and all(g is None for g in grads[n:]):
        grads = grads[:n]
    if len(grads) != n:
        raise RuntimeError(f"function {name} returned an incorrect number of gradients "
                           f"(expected {n}, got {len(grads)})")
    out = []
    for i, (g, meta) in enumerate(zip(grads, inputs)):
        if g is None or meta is None:
            out.append(None)
            continue
        if not isinstance(g, Tensor):
            raise TypeError(f"function {name} returned an invalid gradient at {where}{i} - "
                            f"expected a Tensor or None, got {type(g).__name__}")
        shape, dtype, device = meta
        if g.device != device:
            raise RuntimeError(f"function {name} returned an invalid gradient at {where}{i} - "
                               f"expected device {device} but got {g.device}")
        if tuple(g.shape) != shape:
            try:
                reduced = sum_to(g, shape)
            except (ValueError, IndexError):
                reduced = None
            if reduced is None or tuple(reduced.shape) != shape:
                raise RuntimeError(
                    f"function {name} returned an invalid gradient at {where}{i} - got "
                    f"{list(g.shape)} but expected shape compatible with {list(shape)}")
            g = reduced
        if g.dtype is not dtype:
            if g.dtype.kind == "c" and dtype.kind != "c":
                g = aten.real(g)
            g = aten.astype(g, dtype)
        out.append(g)
    return out


class FunctionCtx:
    """The ``ctx`` of ``forward``/``backward``."""

    def __init__(self, needs_input_grad):
        self.needs_input_grad = needs_input_grad
        self._saved = ()
        self._versions = ()
        self._dirty = ()
        self._non_diff = ()
        self._freed = False
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self._saved = tensors
        self._versions = tuple(saved_version(t) if isinstance(t, Tensor) else None
                               for t in tensors)

    @property
    def saved_tensors(self):
        if self._freed:
            raise RuntimeError(_FREED)
        for t, v in zip(self._saved, self._versions):
            if isinstance(t, Tensor) and t._version != v:
                raise RuntimeError(
                    f"one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [md.{t.dtype.name} {list(t.shape)}] is at "
                    f"version {t._version}; expected version {v} instead.")
        return self._saved

    def mark_dirty(self, *tensors) -> None:
        self._dirty = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        self._non_diff = tensors

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = bool(value)


class _FunctionNode(Node):
    __slots__ = ("ctx", "cls", "n_inputs_pos", "inputs")

    def apply(self, grads, release=False):
        ctx = self.ctx
        if ctx._freed:
            raise RuntimeError(_FREED)
        if ctx.materialize_grads:
            grads = [g if g is not None else aten.zeros(tuple(o.shape), dtype=o.dtype,
                                                        device=o.device)
                     for g, o in zip(grads, self.out)]
        res = validate_gradients(self._name, self.cls.backward(ctx, *grads), self.inputs)
        if release:
            self.release()
        return [res[i] for i in self.n_inputs_pos]

    def release(self) -> None:
        self.ctx._freed = True
        self.out = None


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grads)``; call
    ``apply``."""

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must implement forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function subclasses must implement backward")

    #: under ``md.func.vmap``, run ``forward`` and ``backward`` on batched tensors (else
    #: ``vmap`` refuses the Function, as PyTorch does)
    generate_vmap_rule = False

    @classmethod
    def apply(cls, *args, **kwargs):
        if any(getattr(a, "_ks", 0) & _BATCHED for a in args) or any(
                getattr(v, "_ks", 0) & _BATCHED for v in kwargs.values()):
            from mdtensor.layers.vmap import apply_function

            return apply_function(cls, args, kwargs, Function)

        tensor_pos = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        needs = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        ctx = FunctionCtx(needs)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not any(needs):
            return out
        outs = out if isinstance(out, tuple) else (out,)
        node = _FunctionNode.new(f"{cls.__name__}Backward", None, (), {}, None, (),
                                 [gradient_edge(args[i]) for i in tensor_pos], len(outs))
        node.args = ()
        node.ctx = ctx
        node.cls = cls
        node.n_inputs_pos = tensor_pos
        node.inputs = [(tuple(a.shape), a.dtype, a.device) if isinstance(a, Tensor) else None
                       for a in args]
        node.out = [o.detach() if isinstance(o, Tensor) else o for o in outs]
        non_diff = {id(t) for t in ctx._non_diff}
        for k, o in enumerate(outs):
            if isinstance(o, Tensor) and id(o) not in non_diff and o.dtype.kind in "fc":
                attach(o, node, k)
        return out
