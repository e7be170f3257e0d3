"""``md.nn.Parameter``: a Tensor that a Module registers as one of its parameters."""

from __future__ import annotations

from mdtensor.tensors.tensor import Tensor

__all__ = ["Buffer", "Parameter"]


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one to a ``Module`` attribute
    registers it (``named_parameters``, ``state_dict``, optimizers).

    ``Parameter(data)`` shares ``data``'s memory and version counter (as PyTorch's) and
    requires grad unless ``requires_grad=False``.  Ops on a Parameter return plain
    tensors.

    Args:
        data: the initial value (a Tensor); None gives an empty float32 tensor.
        requires_grad: whether the parameter requires grad (default True).

    Raises:
        TypeError: ``data`` is not a Tensor.
    """

    def __new__(cls, data=None, requires_grad: bool = True):
        if data is None:
            from .. import empty

            data = empty((0,))
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter: expected a Tensor as data, got "
                            f"{type(data).__name__} (make one with md.asarray first)")
        return Tensor._make_subclass(cls, data.detach(), requires_grad)

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__


class Buffer:
    """Marks a tensor as a buffer when assigned to a Module attribute (PyTorch's
    ``nn.Buffer``): ``self.running = md.nn.Buffer(md.zeros(3))`` is
    ``self.register_buffer("running", md.zeros(3))``.

    Args:
        data: the tensor.
        persistent: whether the buffer is part of ``state_dict`` (default True).
    """

    __slots__ = ("data", "persistent")

    def __init__(self, data, *, persistent: bool = True):
        if not isinstance(data, Tensor):
            raise TypeError(f"Buffer: expected a Tensor, got {type(data).__name__}")
        self.data = data
        self.persistent = persistent
