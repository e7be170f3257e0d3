"""``md.optim.Optimizer``: parameter groups, per-parameter state, state dicts.

Subclasses implement ``_update(group, params_with_grads)``; ``step`` runs it under
``no_grad`` for every group.  Updates are in-place ops on the parameters and on the state
tensors (Note [In-place updates]).
"""

from __future__ import annotations

import copy
from collections import defaultdict
from itertools import chain

from mdtensor.tensors.tensor import Tensor

from ..autograd import enable_grad, no_grad
from ..nn._module import zero_grad_

__all__ = ["Optimizer", "required"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


#: A default that a parameter group must give itself (SGD's ``lr`` in PyTorch < 2.2).
required = _Required()

# Note [In-place updates]
# ~~~~~~~~~~~~~~~~~~~~~~~
# An optimizer writes its result into each parameter with in-place ops under ``no_grad``
# (``p.add_(...)``, ``buf.mul_(...)``, ``copy_``): NumPy and plug-in backends write into
# the parameter's buffer, JAX's immutable arrays go through functionalization, and every
# view and alias of the parameter sees the new value, as in PyTorch.  PyTorch's fused
# in-place ops are composed from the ops mdtensor has, in PyTorch's order of rounding:
# ``addcmul_(a, b, value=v)`` is ``add_((a * v) * b)``, ``addcdiv_(a, b, value=v)`` is
# ``add_((a * v) / b)``, ``lerp_(end, w)`` with ``w < 0.5`` is ``add_((end - self) * w)``,
# ``add_(x, alpha=a)`` is ``add_(x * a)`` (the last because ``alpha=`` of an in-place op
# fails on JAX, a backend bug).  Results agree with PyTorch's to float32 rounding
# (tests/test_optim.py runs the same model and data through both for N steps).


class Optimizer:
    """Base class of optimizers.

    Args:
        params: an iterable of tensors, or of dicts (parameter groups) with a
            ``"params"`` entry and per-group options.
        defaults: the options groups do not give.

    Raises:
        TypeError: ``params`` is a Tensor, a set, or holds something other than tensors.
        ValueError: no parameters, a non-leaf tensor, a parameter in two groups, or a
            group without a required option.
    """

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict] = []
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(f"{name}: params argument given to the optimizer should be an "
                            f"iterable of Tensors or dicts, but got a Tensor")
        if isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: optimizer parameters need to be organized in ordered "
                            f"collections, but the ordering of tensors in sets will change "
                            f"between runs. Please use a list instead.")
        groups = list(params)
        if not groups:
            raise ValueError(f"{name}: optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"

    def add_param_group(self, param_group: dict) -> None:
        """Add a group of parameters with its own options (fine-tuning layers with
        another learning rate); options it does not give come from ``defaults``."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: param_group must be a dict, but got "
                            f"{type(param_group).__name__}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: optimizer parameters need to be organized in ordered "
                            f"collections, but the ordering of tensors in sets will change "
                            f"between runs. Please use a list instead.")
        params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: optimizer can only optimize Tensors, but one of the "
                                f"params is {type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor")
        param_group = {**param_group, "params": params}
        for key, default in self.defaults.items():
            if default is required and key not in param_group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            param_group.setdefault(key, default)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear in more than one parameter "
                             f"group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop (the default) or zero the ``.grad`` of every parameter."""
        for group in self.param_groups:
            for p in group["params"]:
                zero_grad_(p, set_to_none)

    def step(self, closure=None):
        """One update of every parameter that has a ``.grad``.

        Args:
            closure: a function that recomputes the loss (called with grad enabled);
                its result is returned.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        with no_grad():
            for group in self.param_groups:
                params = [p for p in group["params"] if p.grad is not None]
                if params:
                    self._update(group, params)
        return loss

    def _update(self, group: dict, params: list) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement _update")

    # -- state dicts ----------------------------------------------------------------------
    def state_dict(self) -> dict:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``,
        parameters numbered in group order (PyTorch's layout).  State tensors are the
        optimizer's own (not copies); ``md.save`` writes them."""
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: s for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore options and state from ``state_dict``; state tensors are copied and
        moved to each parameter's device (floating ones to its dtype).

        Raises:
            ValueError: the number of groups or of parameters in a group differs.
        """
        name = type(self).__name__
        saved_groups = copy.deepcopy(list(state_dict["param_groups"]))
        if len(saved_groups) != len(self.param_groups):
            raise ValueError(f"{name}: loaded state dict has a different number of parameter "
                             f"groups ({len(saved_groups)}, this optimizer has "
                             f"{len(self.param_groups)})")
        for saved, group in zip(saved_groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError(f"{name}: loaded state dict contains a parameter group that "
                                 f"doesn't match the size of optimizer's group "
                                 f"({len(saved['params'])} against {len(group['params'])})")
        by_index = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in self.param_groups)))
        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            p = by_index.get(key)
            if p is None:
                state[key] = value
            else:
                state[p] = {k: _cast_state(p, k, v) for k, v in value.items()}
        self.state = state
        self.param_groups = [{**saved, "params": group["params"]}
                             for saved, group in zip(saved_groups, self.param_groups)]


def _cast_state(p: Tensor, key, value):
    """A copy of a state value on ``p``'s device (floating tensors in ``p``'s dtype)."""
    if isinstance(value, Tensor):
        dtype = p.dtype if value.dtype.kind in "fc" and p.dtype.kind in "fc" else value.dtype
        return value.to(p.device, dtype, copy=True)
    if isinstance(value, dict):
        return {k: _cast_state(p, k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(p, key, v) for v in value)
    return value
