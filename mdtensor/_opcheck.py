"""``md.library.opcheck``: check an op's kernels against its schema.

Checks, on copies of the arguments: (1) the real kernel keeps the schema's alias contract
(Note [Alias contracts]); (2) it mutates exactly the arguments the schema marks ``(a!)``;
(3) when a floating input requires grad, a derivative is registered (a formula, an
Autograd kernel, or a CompositeImplicitAutograd decomposition); (4) the Meta kernel infers
the real output's shapes and dtypes.
"""

from __future__ import annotations

import numpy as np

from mdtensor.backends.meta_backend import MetaArray
from mdtensor.dispatch.contracts import check_result
from mdtensor.dispatch.keys import DispatchKey
from mdtensor.tensors.device import Device
from mdtensor.tensors.tensor import Tensor

from ._pytree import tree_map

__all__ = ["opcheck"]


def _clone_args(args, kwargs):
    def c(v):
        return v.detach().clone() if isinstance(v, Tensor) else v
    return tree_map(c, args), tree_map(c, kwargs)


def _snapshot(v):
    return np.array(v._device.backend.to_numpy(v._data), copy=True)


def opcheck(op, args, kwargs) -> dict:
    report = {}
    cargs, ckwargs = _clone_args(args, kwargs)
    tensors = {}
    for i, a in enumerate(op.schema.arguments):
        v = cargs[i] if i < len(cargs) and not a.kwarg_only else ckwargs.get(a.name)
        if isinstance(v, Tensor):
            tensors[a.name] = (v, _snapshot(v))
    out = op(*cargs, **ckwargs)
    check_result(op, "the registered kernel", cargs, ckwargs, out)
    report["alias_contract"] = "ok"
    mutated = set(op.schema.mutated_args)
    for name, (t, before) in tensors.items():
        changed = not np.array_equal(_snapshot(t), before, equal_nan=True)
        if changed and name not in mutated:
            raise RuntimeError(f"opcheck {op.name}: argument '{name}' was modified, but the "
                               f"schema does not mark it mutable (a!)")
    report["mutation"] = "ok"
    float_in = [v for v, _ in tensors.values() if v.dtype.kind in "fc"]
    if float_in:
        keys = op.registered()
        has = (DispatchKey.Autograd in keys
               or DispatchKey.CompositeImplicitAutograd in keys
               or any(k.functionality == "AutogradFunctionality" for k in keys))
        if not has:
            raise RuntimeError(f"opcheck {op.name}: floating inputs, but no derivative is "
                               f"registered (use md.library.register_autograd)")
        report["autograd_registration"] = "ok"
    else:
        report["autograd_registration"] = "skipped: no floating inputs"
    if op.resolve(DispatchKey.Meta)[0] is None:
        report["meta"] = "skipped: no Meta kernel"
        return report
    margs = tree_map(lambda v: _meta(v) if isinstance(v, Tensor) else v, args)
    mkwargs = tree_map(lambda v: _meta(v) if isinstance(v, Tensor) else v, kwargs)
    mout = op(*margs, **mkwargs)
    reals = out if isinstance(out, (tuple, list)) else (out,)
    metas = mout if isinstance(mout, (tuple, list)) else (mout,)
    for r, m in zip(reals, metas):
        if isinstance(r, Tensor) and (r.shape != m.shape or r.dtype is not m.dtype):
            raise RuntimeError(f"opcheck {op.name}: the Meta kernel says {m.shape} "
                               f"{m.dtype.name}, the real kernel gave {r.shape} "
                               f"{r.dtype.name}")
    report["meta"] = "ok"
    return report


def _meta(t):
    return Device("meta").wrap(MetaArray(t.shape, t.dtype.numpy))
