"""The autograd engine's entry points: ``backward`` and ``grad``, and Tensor's autograd
methods (``backward``, ``register_hook``, ``retain_grad``, ``detach``, ``detach_``,
``retains_grad``, ``grad_fn``), set on the class when the layers are installed.
"""

from __future__ import annotations

import math as _math
import weakref as _weakref

from mdtensor.dispatch.keys import AUTOGRAD_FUNCTIONALITY
from mdtensor.dispatch.namespaces import aten_calls
from mdtensor.tensors.autograd_meta import requires_grad
from mdtensor.tensors.tensor import Tensor
from mdtensor.tensors.version_counter import counter

from .graph import grad_fn_of, gradient_edge, hooks_of, run_backward

__all__ = ["backward", "grad", "install_tensor_methods"]


def _as_list(x):
    if x is None:
        return []
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _root_grads(outputs, grad_outputs, where):
    grads = _as_list(grad_outputs) or [None] * len(outputs)
    if len(grads) != len(outputs):
        raise RuntimeError(f"{where}: got {len(grads)} grad_outputs for {len(outputs)} "
                           f"outputs")
    return [_root(t, g, where) for t, g in zip(outputs, grads)]


def _root(t, g, where):
    """``(edge, gradient)`` where the engine starts from output ``t``: ``g``, or for a
    scalar ``ones_like(t)``, dispatched (a mode sees it), as PyTorch's ``_make_grads``."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{where}: expected Tensors, got {type(t).__name__}")
    edge = gradient_edge(t)
    if edge is None:
        raise RuntimeError(f"{where}: element 0 of tensors does not require grad and "
                           f"does not have a grad_fn")
    if g is None:
        shape = t._data.shape
        if shape and _math.prod(shape) != 1:
            raise RuntimeError(f"{where}: grad can be implicitly created only for "
                               f"scalar outputs")
        g = aten_calls.ones_like(t)
    elif tuple(g.shape) != tuple(t.shape):
        raise RuntimeError(f"{where}: Mismatch in shape: grad_output has a shape of "
                           f"{tuple(g.shape)} and output has a shape of {tuple(t.shape)}")
    return edge, g


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False,
             inputs=None) -> None:
    """Accumulate gradients of ``tensors`` into the ``.grad`` of the leaves, or only of
    ``inputs`` (tensors, leaves or not) when given: then only the nodes on the way to them
    run (Note [Needed nodes])."""
    tensors = _as_list(tensors)
    nodes = None
    if inputs is not None:
        inputs = _as_list(inputs)
        if not inputs:
            raise RuntimeError("backward: `inputs` argument to `backward()` cannot be empty.")
        for t in inputs:
            if not isinstance(t, Tensor):
                raise TypeError(f"backward: inputs must be Tensors, got {type(t).__name__}")
            if not requires_grad(t):
                raise RuntimeError("backward: one of the inputs does not require grad (can't "
                                   "retain_grad on Tensor that has requires_grad=False)")
    roots = _root_grads(tensors, grad_tensors, "backward")
    if inputs is not None:
        # As PyTorch: a non-leaf input keeps its gradient from now on (retain_grad).
        nodes = set()
        for t in inputs:
            if grad_fn_of(t) is not None:
                _retain_grad(t)
            nodes.add(gradient_edge(t)[0])
    if retain_graph is None:
        retain_graph = create_graph
    run_backward(roots, retain_graph, create_graph, inputs=nodes)


def _recorded(t):
    """The tensor the graph is recorded on: a wrapper's inner tensor where the wrapper
    type says so (``_recorded_on``: ``FunctionalTensor``, Note [Functionalize])."""
    if type(t) is Tensor:
        return t
    inner = getattr(type(t), "_recorded_on", None)
    return t if inner is None else inner(t)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Gradients of ``outputs`` with respect to ``inputs`` (``.grad`` is not touched)."""
    outputs = [_recorded(t) for t in _as_list(outputs)]
    inputs_l = [_recorded(t) for t in _as_list(inputs)]
    roots = _root_grads(outputs, grad_outputs, "grad")
    capture = {}  # one capture per distinct edge: an input given twice gets it twice
    where = []
    for t in inputs_l:
        edge = gradient_edge(t)
        if edge is None:
            raise RuntimeError("grad: One of the differentiated Tensors does not require grad")
        where.append(capture.setdefault(edge, len(capture)))
    if retain_graph is None:
        retain_graph = create_graph
    got = run_backward(roots, retain_graph, create_graph, capture=capture, accumulate=False)
    got = [got[k] for k in where]
    for i, g in enumerate(got):
        if g is None and not allow_unused:
            raise RuntimeError(
                "grad: One of the differentiated Tensors appears to not have been used in the "
                "graph. Set allow_unused=True if this is the desired behavior.")
        if g is not None and not create_graph:
            got[i] = g.detach()
    return tuple(got)


# ---------------------------------------------------------------------------------------
# Tensor methods


def _tensor_backward(self, gradient: Tensor | None = None, retain_graph: bool | None = None,
                     create_graph: bool = False, inputs=None) -> None:
    """Compute the gradient of this tensor w.r.t. the graph leaves, or ``inputs``, into
    their ``.grad``."""
    if inputs is None:  # backward() without its list handling: one output, every leaf
        run_backward([_root(self, gradient, "backward")],
                     create_graph if retain_graph is None else retain_graph, create_graph)
        return
    backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
             inputs)


def _register_hook(self, hook) -> _HookHandle:
    """Call ``hook(grad)`` when this tensor's gradient is computed; a returned tensor
    replaces the gradient.  Returns a handle with ``remove()``."""
    if not requires_grad(self):
        raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't "
                           "require gradient")
    ag = self._ag
    node = grad_fn_of(self)
    if node is None:
        hooks = ag.hooks = ag.hooks or []
        if ag.leaf_edge is not None:  # Note [Leaf references] in _graph.py
            ag.leaf_edge[0]._hold = self
    else:  # Note [Node hooks] in _graph.py
        hooks = hooks_of(node, create=True).pre_hooks.setdefault(ag.output_nr, [])
    hooks.append(hook)
    return _HookHandle(hooks, hook)


class _HookHandle:
    def __init__(self, hooks, hook):
        self._hooks = hooks
        self._hook = hook

    def remove(self):
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)


def _retain_grad(self) -> None:
    """Keep this non-leaf's gradient in ``.grad`` on backward."""
    if not requires_grad(self):
        raise RuntimeError("retain_grad: can't retain_grad on Tensor that has "
                           "requires_grad=False")
    ag = self._ag
    node = grad_fn_of(self)
    if node is None:
        return
    ag.retains_grad = True
    hooks_of(node, create=True).retained[ag.output_nr] = _weakref.ref(self)


def _detach(self) -> Tensor:
    """A tensor sharing data and version counter with this one, outside autograd."""
    out = self._device.wrap(self._data)  # a plain Tensor: the device's key set
    out._vc = counter(self)
    return out


def _retains_grad(self) -> bool:
    return self._ag is not None and self._ag.retains_grad


def _detach_(self) -> Tensor:
    if self._view is not None and requires_grad(self):
        raise RuntimeError("detach_: can't detach views in-place. Use detach() instead.")
    self._ag = None
    self._ks &= ~AUTOGRAD_FUNCTIONALITY
    return self


def install_tensor_methods() -> None:
    """Set Tensor's autograd methods (called once, by ``mdtensor.layers.install``)."""
    Tensor.backward = _tensor_backward
    Tensor.register_hook = _register_hook
    Tensor.retain_grad = _retain_grad
    Tensor.detach = _detach
    Tensor.detach_ = _detach_
    Tensor.retains_grad = property(_retains_grad)
    Tensor.grad_fn = property(grad_fn_of, doc="The node that made this tensor (None for a "
                              "leaf); a view's is remade after in-place changes to its base.")

