"""``md.sparse``: what sparse layouts add beyond the tensor methods (docs/SPARSE.md).

``densify_fallback()`` is the opt-in answer to an op without a sparse kernel: by default
such an op raises ``NotImplementedError`` naming the op and the key (``SparseCPU``), as
PyTorch's do; inside ``with md.sparse.densify_fallback():`` it runs on dense copies of its
sparse arguments instead, warning once per op.

Note [The densify fallback]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
A backend fallback for ``SparseCPU`` (rung 5 of the ladder), registered with
``md.library`` like any user's: it serves only ops that have no kernel of their own, no
CompositeExplicitAutograd and no CompositeImplicitAutograd kernel for the key.  It is
boxed: it gets the op, the call's key set and the arguments, replaces every sparse tensor
argument by its dense copy and redispatches with the Sparse functionality swapped for
Dense, so the backend's dense kernel runs.  It runs below Autograd, so the op's derivative
formula records the call as usual (and may itself be densified in backward).  The result
is dense, and dense copies cost memory: ``n x n`` elements of a sparse ``n x n`` matrix.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator

from mdtensor.tensors.layout import DENSE, SPARSE
from mdtensor.tensors.tensor import Tensor

__all__ = ["densify_fallback", "sum"]


def sum(input, axis=None, dtype=None):  # noqa: A001  (torch.sparse.sum's name)
    """The sum of a sparse tensor's elements over ``axis`` (default: all), as
    ``torch.sparse.sum``: a sparse COO tensor over the dimensions left (a dense 0-d tensor
    when none is), whose gradient has the input's sparsity pattern -- where ``md.sum``
    gives a dense result and a dense gradient.

    Examples:
        >>> x = md.asarray([[0.0, 1.0], [2.0, 3.0]]).to_sparse()
        >>> md.sparse.sum(x, 1).to_dense().tolist()
        [1.0, 5.0]
    """
    from mdtensor.dispatch.namespaces import aten_calls as aten

    if axis is None:
        axis = tuple(range(input.ndim))
    out = aten._sparse_sum(input, axis)
    return out if dtype is None else aten.astype(out, dtype)


def _dense(v):
    if isinstance(v, Tensor) and v._ks & SPARSE:
        d = v._data  # SciPy's arrays have toarray(), JAX's todense(); a hybrid its kernel
        if hasattr(d, "toarray"):
            return v._device.wrap(d.toarray())
        if hasattr(d, "todense"):
            return v._device.wrap(d.todense())
        from mdtensor.dispatch.namespaces import aten_calls as aten

        return aten._to_dense(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_dense(x) for x in v)
    return v


#: the sparse keys with kernels (and so dense copies): the CPU's, JAX's and CUDA's
_KEYS = ("SparseCPU", "SparseJAX", "SparseCUDA")


@contextlib.contextmanager
def densify_fallback(key: str | None = None) -> Iterator[None]:
    """Run ops that have no kernel for a sparse key (``key``, default: ``SparseCPU`` and
    ``SparseJAX``) on dense copies of their sparse arguments (Note [The densify
    fallback]), warning once per op.

    Examples:
        >>> x = md.asarray([[0.0, 1.0]]).to_sparse()
        >>> with md.sparse.densify_fallback():
        ...     md.exp(x).tolist()
        [[1.0, 2.718281828459045]]
    """
    from mdtensor.library import Library

    warned: set[str] = set()

    def fallback(name):
        def densify(op, ks, args, kwargs):
            if op.name not in warned:
                warned.add(op.name)
                warnings.warn(f"{op.name}: no {name} kernel; running the dense kernel on "
                              f"dense copies of its sparse arguments "
                              f"(md.sparse.densify_fallback)", UserWarning, stacklevel=3)
            args = [_dense(a) for a in args]
            kwargs = {k: _dense(v) for k, v in kwargs.items()}
            return op.redispatch((ks & ~SPARSE) | DENSE, *args, **kwargs)

        return densify

    with Library("aten", "FRAGMENT") as lib:
        for name in _KEYS if key is None else (key,):
            lib.fallback(fallback(name), name)
        yield
