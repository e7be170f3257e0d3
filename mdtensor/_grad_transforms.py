"""Differentiation transforms: ``md.func.grad``, ``grad_and_value``, ``vjp``, ``jvp``,
``jacrev``, ``jacfwd`` and ``hessian``, with torch.func's signatures, over pytrees of
tensors (Note [Pytrees] in mdtensor/_pytree.py), on the autograd engine (Note
[Differentiation transforms] below).
"""

from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar

from mdtensor.tensors.tensor import Tensor

from ._pytree import leaf_paths, tree_flatten, tree_leaves, tree_map, tree_unflatten
from .autograd import enable_grad, is_grad_enabled, is_inference_mode_enabled
from .autograd import grad as autograd_grad
from .dispatch.namespaces import aten_calls as aten
from .layers.vmap import BatchedTensor, batch_variable, engine_grad, vmap

__all__ = ["grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp"]

# Note [Differentiation transforms]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Each transform runs ``f`` on new graph nodes standing for the arguments it differentiates
# and asks the engine (``md.autograd.grad``) for the derivatives; it adds no dispatch layer,
# so every backend and every op with a derivative formula gets it.
#
# * **Variables.** An argument leaf becomes a fresh leaf ``x.detach().requires_grad_()``
#   or, when the result must stay differentiable with respect to ``x`` (below), a view
#   ``x.view(x.shape)``, which records an edge to ``x``.  Either way the derivative is taken
#   with respect to that node alone: a nested transform whose ``f`` closes over the outer
#   one's variable sees two variables, not one (no perturbation confusion), and the outer
#   transform differentiates through the inner one's recorded backward.  The node shares
#   ``x``'s memory, so ``f`` may not modify it in place (autograd's leaf/view-of-leaf error).
# * **Functional.** Only ``autograd.grad`` runs, which writes no ``.grad``.  ``f`` runs
#   under ``enable_grad`` (a transform computes the same inside ``md.no_grad()``, as
#   torch.func's do), and the grad mode and nesting depth are restored on every exit.
#   ``inference_mode`` records no graph at all, so the transforms refuse to run in it.
# * **Nesting.** ``_depth`` (a ContextVar) counts the transforms running.  Inside another
#   transform every derivative is taken with ``create_graph=True``, so the outer one can
#   differentiate it (``hessian = jacfwd(jacrev(f))``, ``grad(grad(f))``, to any depth).  At
#   the outermost level the graph is recorded only when the caller records one (grad mode
#   on and an argument requires grad: then results are differentiable by ``backward()``);
#   otherwise results are detached, so ``md.func.grad(f)(x)`` is a plain tensor.  Limit of
#   this rule: at the outermost level, a tensor ``f`` closes over that requires grad is not
#   connected to the results unless an argument requires grad too.
# * **Forward mode by double vjp** (``jvp``, ``jacfwd``).  There are no JVP formulas yet; the
#   linearity trick computes ``J t`` with two reverse passes.  With ``u`` a dummy cotangent
#   (a leaf requiring grad), ``g(u) = vjp(u) = J^T u`` is recorded with ``create_graph``; it
#   is linear in ``u``, and the vjp of ``u -> g(u)`` with cotangent ``t`` is
#   ``(J^T)^T t = J t``.  (For complex tensors the engine's vjp is the adjoint of the
#   real-linear derivative, and the adjoint of the adjoint is the derivative itself, so the
#   same holds.)  Cost: the forward, one backward recording its graph, one backward of that
#   graph -- measured in docs/TRANSFORMS.md.  ``jacfwd`` records ``g`` once and runs the last
#   backward once per input element.  It is right wherever each formula's backward is
#   recorded as a function of its cotangent, which the OpInfo sweep checks for every op
#   (``gradgradcheck``, Note [Second derivatives] in mdtensor/testing.py).  Real
#   dual-number forward mode (a JVP formula per op) would need no backward graph; it is
#   future work.
# * **Complex numbers.**  ``grad`` wants a real scalar output; ``vjp`` and ``jvp`` take
#   complex tensors (PyTorch's conjugate Wirtinger convention); ``jacrev``/``jacfwd``/
#   ``hessian`` refuse complex inputs and ``jacrev`` complex outputs, as torch.func does.
# * **Jacobians row by row.** ``jacrev`` runs one backward per output element (one-hot
#   cotangents), ``jacfwd`` one per input element, and stacks the rows; ``vmap`` will batch
#   them into one pass.
# * **argnums and pytrees.**  ``_argnums`` checks the ``argnums`` a transform is made with;
#   ``_Inputs`` picks those positional arguments, flattens each into leaves and rebuilds the
#   results in the same structure (an int ``argnums``: the argument's pytree; a tuple: a
#   tuple of them), the handling ``vmap`` will reuse for ``in_dims``.  Output pytrees are
#   flattened the same way; a Jacobian is the output structure with, at each output leaf,
#   the argnums structure of blocks of shape ``output.shape + input.shape`` (torch.func's).

#: how many differentiation transforms are running in this thread/context
_depth: ContextVar = ContextVar("mdtensor_transform_depth", default=0)


# ---------------------------------------------------------------------------------------
# Arguments, outputs and messages


def _describe(v) -> str:
    if isinstance(v, Tensor):
        return f"a Tensor of shape {tuple(v.shape)} and dtype {v.dtype.name}"
    if v is None:
        return "None"
    kind = type(v).__name__
    return f"{'an' if kind[0] in 'aeiouAEIOU' else 'a'} {kind}"


def _argnums(name: str, argnums) -> tuple[tuple[int, ...], bool]:
    """``(argnums as a tuple, whether a tuple was given)``; raises for any other type."""
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        return (argnums,), False
    if isinstance(argnums, tuple):
        if not argnums:
            raise ValueError(f"{name}: argnums must be an int or a non-empty tuple of ints, "
                             f"got ()")
        if all(isinstance(a, int) and not isinstance(a, bool) for a in argnums):
            return argnums, True
    raise TypeError(f"{name}: argnums must be an int or a tuple of ints, got {argnums!r}")


def _positions(name: str, argnums: tuple[int, ...], nargs: int) -> list[int]:
    """``argnums`` as non-negative positions among ``nargs`` positional arguments."""
    bad = [a for a in argnums if not -nargs <= a < nargs]
    if bad:
        allowed = f" (expected in range [{-nargs}, {nargs - 1}])" if nargs else ""
        raise ValueError(f"{name}: argnums {bad[0]} is out of range for a call with {nargs} "
                         f"positional argument{'' if nargs == 1 else 's'}{allowed}")
    out = [a % nargs for a in argnums]
    if len(set(out)) != len(out):
        raise ValueError(f"{name}: argnums must name each argument once, got {argnums!r}")
    return out


def _is_differentiable(t: Tensor) -> bool:
    return t.dtype.kind in ("f", "c")


class _Inputs:
    """The positional arguments of one call, those to differentiate replaced by variables
    (Note [Differentiation transforms]).

    Attributes:
        args: the arguments to call ``f`` with.
        variables: the variables, flat, argument after argument.
    """

    def __init__(self, name: str, args, positions, as_tuple: bool, create: bool,
                 real: bool = False):
        self.args = list(args)
        self.variables: list[Tensor] = []
        self.specs = []
        self.as_tuple = as_tuple
        for p in positions:
            leaves, spec = tree_flatten(args[p])
            made = [_variable(name, v, path, create, real)
                    for v, path in zip(leaves, leaf_paths(spec, f"argument {p}"))]
            self.args[p] = tree_unflatten(made, spec)
            self.variables += made
            self.specs.append(spec)

    def rebuild(self, flat: list):
        """One value per variable, back in the structure of the differentiated
        arguments: the argument's pytree, or a tuple of them for tuple argnums."""
        out, i = [], 0
        for spec in self.specs:
            out.append(tree_unflatten(flat[i:i + spec.num_leaves], spec))
            i += spec.num_leaves
        return tuple(out) if self.as_tuple else out[0]


def _variable(name: str, x, where: str, create: bool, real: bool) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}: expected {where} to be a Tensor (or a tuple, list or dict "
                        f"of Tensors), got {_describe(x)}")
    if not _is_differentiable(x):
        raise TypeError(f"{name}: only floating-point and complex Tensors can be "
                        f"differentiated, got {where} of dtype {x.dtype.name}")
    if real and x.dtype.kind == "c":
        _complex_jacobian(name, f"{where} of dtype {x.dtype.name}")
    x = batch_variable(x)  # inside vmap: per-sample (Note [The Batched layer])
    if create and x.requires_grad:
        return x.view(tuple(x.shape))  # an edge to x (Note [Differentiation transforms])
    return x.detach().requires_grad_()


def _complex_jacobian(name: str, got: str):
    raise TypeError(f"{name}: Jacobians of complex inputs (and, by reverse mode, of complex "
                    f"outputs) are not defined, as in torch.func; got {got}")


def _split_aux(name: str, result, has_aux: bool):
    if not has_aux:
        return result, None
    if not (isinstance(result, tuple) and len(result) == 2):
        got = (f"a tuple of {len(result)}" if isinstance(result, tuple)
               else _describe(result))
        raise TypeError(f"{name}: with has_aux=True, f must return a tuple (output, aux), "
                        f"got {got}")
    return result


def _output_leaves(name: str, out) -> tuple[list[Tensor], object]:
    leaves, spec = tree_flatten(out)
    for v, path in zip(leaves, leaf_paths(spec, "output")):
        if not isinstance(v, Tensor):
            raise TypeError(f"{name}: expected f to return Tensors (or tuples, lists or dicts "
                            f"of Tensors), got {_describe(v)} as {path}")
    return leaves, spec


def _like(name: str, what: str, given, leaves, spec, where: str) -> list[Tensor]:
    """The leaves of ``given`` (cotangents or tangents), checked against ``leaves``, the
    ``where`` they stand for (primal, output): the same structure, Tensors of the same
    shapes and dtypes."""
    got, got_spec = tree_flatten(given)
    if got_spec != spec:
        raise ValueError(f"{name}: expected {what} with the structure of the {where}s "
                         f"{spec}, got {got_spec}")
    for g, ref, path in zip(got, leaves, leaf_paths(spec, what)):
        if not isinstance(g, Tensor):
            raise TypeError(f"{name}: expected {path} to be a Tensor, got {_describe(g)}")
        if tuple(g.shape) != tuple(ref.shape):
            raise ValueError(f"{name}: {path} has shape {tuple(g.shape)}, expected "
                             f"{tuple(ref.shape)} (the shape of the {where} it stands for)")
        if g.dtype != ref.dtype:
            raise TypeError(f"{name}: {path} has dtype {g.dtype.name}, expected "
                            f"{ref.dtype.name} (the dtype of the {where} it stands for)")
    return got


def _result(tree, create: bool):
    """Results as the caller sees them: detached unless the graph is kept (Note
    [Differentiation transforms])."""
    if create:
        return tree
    return tree_map(lambda v: v.detach() if isinstance(v, Tensor) and v.requires_grad
                    else v, tree)


@contextmanager
def _transform(name: str, args, kwargs):
    """Run one transform: grad mode on, one level deeper; yields whether derivatives keep
    their graph (Note [Differentiation transforms])."""
    if is_inference_mode_enabled():
        raise RuntimeError(f"{name}: cannot differentiate inside md.inference_mode(), which "
                           f"records no graph; use md.no_grad() instead (the transform "
                           f"records its own graph inside it)")
    depth = _depth.get()
    create = depth > 0 or (is_grad_enabled() and any(
        isinstance(v, Tensor) and v.requires_grad for v in tree_leaves((args, kwargs))))
    token = _depth.set(depth + 1)
    try:
        with enable_grad():
            yield create
    finally:
        _depth.reset(token)


# ---------------------------------------------------------------------------------------
# Derivatives on flat lists


def _vjp(outputs, variables, cotangents, create: bool, retain: bool) -> list[Tensor]:
    """``autograd.grad`` of ``outputs`` with respect to ``variables`` given ``cotangents``;
    zeros where no gradient arrives (an output or a variable off the graph)."""
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    got = [None] * len(variables)
    if pairs and variables:
        got = _engine([o for o, _ in pairs], variables, [c for _, c in pairs],
                            retain_graph=retain, create_graph=create, allow_unused=True)
    zeros_like = aten.zeros_like
    return [zeros_like(v) if g is None else g for g, v in zip(got, variables)]


def _engine(outputs, inputs, grad_outputs, **kwargs):
    """``autograd.grad``, on the physical tensors of batched ones (mdtensor/layers/vmap.py)."""
    return engine_grad(autograd_grad, outputs, inputs, grad_outputs, **kwargs)


class _Linearized:
    """The derivative of ``outputs`` at ``variables`` as a linear map of tangents, by
    double vjp (Note [Differentiation transforms])."""

    def __init__(self, outputs, variables):
        self.outputs = outputs
        self.live = [i for i, o in enumerate(outputs) if o.requires_grad]
        zeros_like = aten.zeros_like
        self.dummies = [zeros_like(outputs[i]).requires_grad_() for i in self.live]
        #: g_j(u) = J_j^T u for each variable j, recorded as a function of the dummies u
        self.vjps = _vjp([outputs[i] for i in self.live], variables, self.dummies,
                         create=True, retain=True)

    def __call__(self, tangents: dict, create: bool, name: str = "", strict: bool = False):
        """``J t`` per output, for ``tangents`` ``{variable index: tangent}`` (the other
        variables' tangents are zero)."""
        pairs = [(self.vjps[j], t) for j, t in tangents.items() if self.vjps[j].requires_grad]
        got = [None] * len(self.dummies)
        if pairs:
            got = _engine([g for g, _ in pairs], self.dummies, [t for _, t in pairs],
                                retain_graph=True, create_graph=create, allow_unused=True)
        out: list = [None] * len(self.outputs)
        for k, i in enumerate(self.live):
            out[i] = got[k]
        if strict and None in out:
            raise RuntimeError(f"{name}: with strict=True, every output must depend on the "
                               f"primals; output {out.index(None)} (flattened) does not")
        zeros_like = aten.zeros_like
        return [zeros_like(o) if t is None else t for t, o in zip(out, self.outputs)]


def _blocks(rows, out: Tensor, var: Tensor, axis: int, dtype) -> Tensor:
    """Rows (``axis=0``) or columns (``axis=-1``) stacked into a Jacobian block of shape
    ``out.shape + var.shape``."""
    shape = tuple(out.shape) + tuple(var.shape)
    if not rows:  # an empty output or input
        return aten.zeros(shape, dtype=dtype, device=out.device)
    return aten.stack(rows, axis=axis).reshape(shape)


def _basis(t: Tensor):
    """One-hot tensors of ``t``'s shape, dtype and device, one per element, in order."""
    n = t.numel()
    eye = aten.eye(n, dtype=t.dtype, device=t.device)
    shape = tuple(t.shape)
    return [eye[i].reshape(shape) for i in range(n)]


# ---------------------------------------------------------------------------------------
# The transforms


def grad_and_value(func, argnums=0, has_aux: bool = False):
    """The gradient of a scalar function and its value (torch.func's ``grad_and_value``).

    Args:
        func: returns a real 0-d Tensor (or ``(output, aux)`` with ``has_aux``).
        argnums: the positional argument(s) to differentiate: an int, or a tuple of ints
            (then the gradient is a tuple); each may be a pytree of Tensors.
        has_aux: ``func`` returns ``(output, aux)``; ``aux`` is returned, not differentiated.

    Returns:
        a function returning ``(gradient, value)``, or ``(gradient, (value, aux))``.
    """
    nums, as_tuple = _argnums("md.func.grad_and_value", argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        return _grad_and_value("md.func.grad_and_value", func, nums, as_tuple, has_aux,
                               args, kwargs)
    return wrapper


def grad(func, argnums=0, has_aux: bool = False):
    """The gradient of a scalar function (torch.func's ``grad``).

    ``md.func.grad(f)(x)`` is ``df/dx`` with the structure of ``x``; it composes with the
    other transforms (``grad(grad(f))`` is the second derivative).  Arguments as
    ``grad_and_value``'s.

    Returns:
        a function returning the gradient, or ``(gradient, aux)`` with ``has_aux``.

    Example:
        >>> import mdtensor as md
        >>> md.func.grad(lambda x: (x ** 3).sum())(md.asarray([1.0, 2.0]))
        tensor([ 3., 12.])
    """
    nums, as_tuple = _argnums("md.func.grad", argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = _grad_and_value("md.func.grad", func, nums, as_tuple, has_aux, args,
                                   kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def _grad_and_value(name, func, argnums, as_tuple, has_aux, args, kwargs):
    positions = _positions(name, argnums, len(args))
    with _transform(name, args, kwargs) as create:
        inputs = _Inputs(name, args, positions, as_tuple, create)
        out, aux = _split_aux(name, func(*inputs.args, **kwargs), has_aux)
        if not isinstance(out, Tensor):
            raise TypeError(f"{name}: expected f to return a scalar Tensor, got "
                            f"{_describe(out)}")
        if out.ndim != 0:
            raise ValueError(f"{name}: expected f to return a scalar Tensor (0 dimensions), "
                             f"got {_describe(out)}; for other outputs use md.func.vjp or "
                             f"md.func.jacrev")
        if out.dtype.kind == "c":
            raise TypeError(f"{name}: expected f to return a real scalar Tensor, got "
                            f"{_describe(out)}; differentiate its real part or abs()")
        one = aten.ones_like(out)
        grads = _vjp([out], inputs.variables, [one], create, retain=create)
    value = _result(out, create)
    return inputs.rebuild(grads), ((value, _result(aux, create)) if has_aux else value)


def vjp(func, *primals, has_aux: bool = False):
    """``f(*primals)`` and its vector-Jacobian product function (torch.func's ``vjp``).

    Returns:
        ``(output, vjp_fn)`` or ``(output, vjp_fn, aux)``.  ``vjp_fn(cotangents)``
        takes cotangents with the structure, shapes and dtypes of ``output`` and returns a
        tuple with one gradient per primal (each with its primal's structure); it may be
        called many times.
    """
    name = "md.func.vjp"
    with _transform(name, primals, {}) as create:
        inputs = _Inputs(name, primals, range(len(primals)), True, create)
        out, aux = _split_aux(name, func(*inputs.args), has_aux)
        leaves, spec = _output_leaves(name, out)

    def vjp_fn(cotangents, retain_graph: bool = True, create_graph: bool | None = None):
        cots = _like(name, "cotangents", cotangents, leaves, spec, "output")
        keep = create_graph
        if keep is None:  # as a transform decides (Note [Differentiation transforms])
            keep = create or _depth.get() > 0 or (
                is_grad_enabled() and any(c.requires_grad for c in cots))
        with enable_grad() if keep else nullcontext():
            grads = _vjp(leaves, inputs.variables, cots, keep, retain_graph)
        return inputs.rebuild(grads)

    results = (_result(out, create), vjp_fn)
    return results + (_result(aux, create),) if has_aux else results


def jvp(func, primals, tangents, *, strict: bool = False, has_aux: bool = False):
    """``f(*primals)`` and its Jacobian-vector product with ``tangents`` (torch.func's
    ``jvp``), computed by double vjp (Note [Differentiation transforms]).

    Args:
        primals: a tuple of arguments (pytrees of Tensors).
        tangents: a tuple of the same structure, shapes and dtypes.
        strict: raise if an output does not depend on the primals.
        has_aux: ``func`` returns ``(output, aux)``.

    Returns:
        ``(output, jvp_out)`` or ``(output, jvp_out, aux)``.
    """
    name = "md.func.jvp"
    for what, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, tuple):
            raise TypeError(f"{name}: expected {what} to be a tuple (f is called as "
                            f"f(*primals)), got {_describe(v)}")
    p_leaves, p_spec = tree_flatten(primals)
    with _transform(name, (primals, tangents), {}) as create:
        inputs = _Inputs(name, primals, range(len(primals)), True, create)
        t_leaves = _like(name, "tangents", tangents, p_leaves, p_spec, "primal")
        out, aux = _split_aux(name, func(*inputs.args), has_aux)
        leaves, spec = _output_leaves(name, out)
        linear = _Linearized(leaves, inputs.variables)
        tangents_out = linear(dict(enumerate(t_leaves)), create, name, strict)
    results = (_result(out, create), tree_unflatten(tangents_out, spec))
    return results + (_result(aux, create),) if has_aux else results


def jacrev(func, argnums=0, *, has_aux: bool = False, chunk_size: int | None = None):
    """The Jacobian of ``func`` by reverse mode (torch.func's ``jacrev``): one backward
    per output element.

    Args:
        argnums: the positional argument(s) to differentiate (an int or a tuple of ints).
        has_aux: ``func`` returns ``(output, aux)``.
        chunk_size: accepted for torch.func's signature (None or a positive int); rows are
            computed one backward each until ``vmap`` batches them.

    Returns:
        a function returning the Jacobian (or ``(jacobian, aux)``): ``func``'s output
        structure with, at each output leaf, the argnums structure of blocks of shape
        ``output.shape + input.shape``.
    """
    name = "md.func.jacrev"
    if chunk_size is not None and (isinstance(chunk_size, bool)
                                   or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"{name}: chunk_size must be None or a positive int, got "
                         f"{chunk_size!r}")
    return _jacobian(name, func, argnums, has_aux, reverse=True)


def jacfwd(func, argnums=0, has_aux: bool = False, *, randomness: str = "error"):
    """The Jacobian of ``func`` by forward mode (torch.func's ``jacfwd``): one
    Jacobian-vector product per input element, by double vjp (Note [Differentiation
    transforms]).  Arguments and result as ``jacrev``'s.

    Args:
        randomness: accepted for torch.func's signature (``"error"``, ``"different"`` or
            ``"same"``); it will matter once ``vmap`` computes the columns.
    """
    name = "md.func.jacfwd"
    if randomness not in ("error", "different", "same"):
        raise ValueError(f"{name}: randomness must be 'error', 'different' or 'same', got "
                         f"{randomness!r}")
    return _jacobian(name, func, argnums, has_aux, reverse=False)


def hessian(func, argnums=0):
    """The Hessian of a scalar function: ``jacfwd(jacrev(func, argnums), argnums)``
    (torch.func's ``hessian``); blocks of shape ``input.shape + input.shape``."""
    name = "md.func.hessian"
    return _jacobian(name, _jacobian(name, func, argnums, False, reverse=True), argnums,
                     False, reverse=False)


def _jacobian(name: str, func, argnums, has_aux: bool, reverse: bool):
    nums, as_tuple = _argnums(name, argnums)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        positions = _positions(name, nums, len(args))
        with _transform(name, args, kwargs) as create:
            inputs = _Inputs(name, args, positions, as_tuple, create, real=True)
            out, aux = _split_aux(name, func(*inputs.args, **kwargs), has_aux)
            leaves, spec = _output_leaves(name, out)
            if reverse:
                blocks = _by_rows(name, leaves, spec, inputs.variables, create)
            else:
                blocks = _by_columns(leaves, inputs.variables, create)
            jac = tree_unflatten([inputs.rebuild(b) for b in blocks], spec)
        return (jac, _result(aux, create)) if has_aux else jac
    return wrapper


def _by_rows(name: str, outputs, spec, variables, create: bool) -> list[list[Tensor]]:
    """Per output, its Jacobian blocks for each variable: one backward per output
    element (a one-hot cotangent)."""
    for o, path in zip(outputs, leaf_paths(spec, "output")):
        if o.dtype.kind == "c":
            _complex_jacobian(name, f"{path} of dtype {o.dtype.name}")
    jac = []
    for o in outputs:
        if _batchable(outputs, variables, create):  # Note [Jacobians in one pass]
            rows = vmap(lambda e, o=o: _vjp([o], variables, [e], create, retain=True))(
                _basis_batch(o))
            jac.append([r.reshape(tuple(o.shape) + tuple(v.shape))
                        for r, v in zip(rows, variables)])
            continue
        rows = [_vjp([o], variables, [e], create, retain=True) for e in _basis(o)]
        jac.append([_blocks([r[j] for r in rows], o, v, 0, v.dtype)
                    for j, v in enumerate(variables)])
    return jac


def _by_columns(outputs, variables, create: bool) -> list[list[Tensor]]:
    """Per output, its Jacobian blocks for each variable: one Jacobian-vector product
    per variable element (a one-hot tangent), through one linearization."""
    linear = _Linearized(outputs, variables)
    if _batchable(outputs, variables, create):  # Note [Jacobians in one pass]
        columns = [vmap(lambda e, j=j: linear({j: e}, create), out_dims=-1)(_basis_batch(v))
                   for j, v in enumerate(variables)]
        return [[cols[k].reshape(tuple(o.shape) + tuple(v.shape))
                 for cols, v in zip(columns, variables)]
                for k, o in enumerate(outputs)]
    columns = [[linear({j: e}, create) for e in _basis(v)] for j, v in enumerate(variables)]
    return [[_blocks([c[k] for c in cols], o, v, -1, o.dtype)
             for cols, v in zip(columns, variables)]
            for k, o in enumerate(outputs)]


# Note [Jacobians in one pass]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``jacrev`` computes its rows as ``vmap`` of the vjp over the one-hot cotangents (the
# rows of an identity matrix), ``jacfwd`` its columns as ``vmap`` of the linearized map
# over one-hot tangents: one backward pass whose formulas run on batched cotangents
# (mdtensor/layers/vmap.py), instead of one pass per element.  Inside another ``vmap`` (the
# outputs or variables are batched), the rows are computed one by one, as before:
# batching cotangents over a graph that is itself batched at a lower level is not
# supported by the engine yet.


def _batchable(outputs, variables, create: bool) -> bool:
    return all(t.numel() for t in (*outputs, *variables)) and \
        not any(isinstance(t, BatchedTensor) for t in (*outputs, *variables))


def _basis_batch(t: Tensor) -> Tensor:
    """The one-hot tensors of ``t``'s shape stacked: ``eye(n)`` as ``(n, *t.shape)``."""
    n = t.numel()
    return aten.eye(n, dtype=t.dtype, device=t.device).reshape((n, *t.shape))
