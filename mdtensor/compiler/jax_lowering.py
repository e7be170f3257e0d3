"""Lowering a captured program on the JAX backend to ``jax.jit``.

Note [Lowering to jax.jit]
~~~~~~~~~~~~~~~~~~~~~~~~~~
On the JAX backend every recorded op is functional (Functionalize turned each mutation
into its functional op plus a write-back: Note [Writes that swap arrays] in
mdtensor/compiler/capture.py), and the JAX kernels compute with ``jax.numpy`` on the
tensors' arrays.  So a run of recorded ops between two steps that are no op (``.grad``
reads and writes, ``accumulate_grads``) is a pure function of the arrays it reads: a
``JitRegion`` runs those ops' kernels on tensors wrapping JAX tracers under ``jax.jit``,
once, and every later replay calls the one XLA executable with the live arrays (the
function's inputs, its constants such as closure parameters, values made before the
region) and hands on the arrays it returns that anything after the region reads: the
region is one call in the replay on arrays (Note [Replaying on arrays] in
mdtensor/compiler/arrays.py), whose ``.grad`` steps, write-backs and results stay in
Python around it; a training step (clear the grads, forward, backward, accumulate) is one
region.  A region whose kernels cannot be traced runs its kernels one by one, on tensors
around the arrays, from then on.
"""

from __future__ import annotations

from mdtensor._pytree import tree_map

from .capture import Ref

__all__ = ["JitRegion"]


class JitRegion:
    """Recorded calls ``[(entry, call)]`` as one jitted function of the arrays of
    ``live_in`` (on ``devices``) returning those of ``live_out`` (Note [Lowering to
    jax.jit])."""

    def __init__(self, calls, live_in: list[str], live_out: list[str], devices):
        self.calls = calls
        self.live_in = live_in
        self.live_out = live_out
        self.wraps = [d.wrap for d in devices]
        self._run = None
        self.jitted = None  # True once traced, False where tracing failed

    def _pure(self):
        calls, live_in, live_out, wraps = self.calls, self.live_in, self.live_out, self.wraps

        def pure(*arrays):
            env = {n: w(a) for n, w, a in zip(live_in, wraps, arrays)}

            def value(v):
                return env[v.name] if isinstance(v, Ref) else v

            for fn, call in calls:
                out = fn(*tree_map(value, call.args), **tree_map(value, call.kwargs))
                results = out if call.multi else (out,)
                for name, r in zip(call.outs, results):
                    if name:
                        env[name] = r
            return tuple(env[n]._data for n in live_out)

        return pure

    def __call__(self, *arrays):
        run = self._run
        if run is not None:
            return run(*arrays)
        import jax

        pure = self._pure()
        try:
            jitted = jax.jit(pure)
            outs = jitted(*arrays)
            self._run, self.jitted = jitted, True
        except Exception:  # noqa: BLE001 - an untraceable kernel: run them one by one
            self._run, self.jitted = pure, False
            outs = pure(*arrays)
        return outs
