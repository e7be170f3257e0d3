"""Dispatcher overhead: an op whose CPU kernel returns its input, vs the kernel itself.

    python benchmarks/bench_dispatch.py

Defines ``bench::ident(Tensor x) -> Tensor`` and registers its CPU kernel as a built-in
``Kernel`` (``user=False``): a user registration would be wrapped by the alias-contract
checker, which rejects a functional kernel returning its input (Note [Alias contracts]),
and a view schema would add the ADInplaceOrView hop; neither is dispatch cost.
The figures are the cost of the dispatcher itself, each minus the direct kernel call
(medians of interleaved repeats in one run): the overload's caller (dispatch only), the
namespace function a user calls (``md.<name>`` is ``packet._call``: overload resolution
cache + dispatch), and the packet and overload objects called as such (each adds Python's
``__call__`` slot and a frame; Note [Packet functions]).
"""

from __future__ import annotations

import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import statistics  # noqa: E402
import timeit  # noqa: E402

import numpy as np  # noqa: E402

import mdtensor as md  # noqa: E402
from mdtensor.dispatch.kernel import Kernel  # noqa: E402
from mdtensor.dispatch.keys import DispatchKey  # noqa: E402


def main() -> None:
    lib = md.library.Library("bench", "DEF")
    lib.define("ident(Tensor x) -> Tensor")
    overload = md.ops.bench.ident.default
    packet = md.ops.bench.ident

    def kernel(x):
        return x

    overload.register_kernel(Kernel(kernel, DispatchKey.CPU, name="ident_cpu"))
    x = md.asarray(np.ones(8, np.float32))
    assert packet(x) is x and overload(x) is x
    caller, function = overload.caller, packet.function
    cases = {"kernel directly": lambda: kernel(x), "overload caller": lambda: caller(x),
             "namespace function": lambda: function(x), "overload object": lambda: overload(x),
             "packet object": lambda: packet(x)}
    n = 200_000
    samples = {k: [] for k in cases}
    for _ in range(9):
        for name, fn in cases.items():
            samples[name].append(timeit.timeit(fn, number=n) / n * 1e6)
    med = {k: statistics.median(v) for k, v in samples.items()}
    base = med["kernel directly"]
    print(f"{'call':<18} {'us/call':>8} {'overhead us':>12}")
    for name, t in med.items():
        print(f"{name:<18} {t:>8.3f} {t - base:>12.3f}")
    lib._destroy()


if __name__ == "__main__":
    main()
