"""Timing harness: interleaved repeats, medians, a table and a JSON record.

Each case is a set of zero-argument callables, one per implementation (``numpy``,
``mdtensor``, ``torch``, ...). Implementations whose library is missing are "n/a". Rounds
run every implementation once each, in a shuffled order, so that machine noise hits them
alike; the reported time is the median time per call.

A ratio between two implementations is the median of the per-round ratios (Note [Paired
ratios]), not the ratio of the two medians.
"""

from __future__ import annotations

import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

IMPLS = ("numpy", "mdtensor", "torch", "autograd", "jax", "jax-jit")
#: the columns of the CPU table's ratios (mdtensor over each)
REFS = ("torch", "numpy", "jax")


@dataclass
class Case:
    """A benchmark case: a name, a group, and a callable per implementation."""

    name: str
    group: str
    impls: dict[str, Callable[[], object]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)  # impl -> why not available
    medians: dict[str, float] = field(default_factory=dict)  # impl -> seconds per call
    samples: dict[str, list[float]] = field(default_factory=dict)  # impl -> one per round
    #: called after each timed loop (a GPU case waits for its queued work: Note [Timing
    #: asynchronous devices])
    sync: Callable[[], object] | None = None

    def ratio(self, impl: str, ref: str) -> float | None:
        """``impl``'s time over ``ref``'s: the median of the rounds' ratios."""
        a, b = self.samples.get(impl), self.samples.get(ref)
        if not a or not b:
            return None
        return statistics.median(x / y for x, y in zip(a, b))


# Note [Paired ratios]
# ~~~~~~~~~~~~~~~~~~~~
# The development machines are shared virtual machines whose speed drifts by tens of
# percent within seconds (8-element np.add took 0.6 us in one run and 1.2 us in the next).
# A round runs every implementation back to back, so the two times of one round saw nearly
# the same machine: their ratio cancels the drift that the ratio of two medians, each
# taken over the whole run, keeps.  Short rounds (many of them) make the pairs closer in
# time.  The table's ratio columns are medians of these per-round ratios; the times are
# plain medians.
#
# Each round runs the implementations in a new (seeded) random order: where an
# implementation runs in a round, and after which other one, matters by itself.  With a
# fixed order, exp on 4M float32 elements measured 1.02-1.11x NumPy when mdtensor ran right
# after NumPy and 0.95-1.00x when it ran first, for the same np.exp call; rotating the
# order kept mdtensor after NumPy in most rounds and still gave 0.96-1.06x.


# Note [Timing asynchronous devices]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A GPU call returns once its kernels are queued.  A case on such a device has a ``sync``
# (wait for the device to finish everything queued) run after every timed loop of ``n``
# calls, inside the timed region: the loop's time is then the device's time for ``n`` calls
# or the host's time to queue them, whichever is longer -- the per-call cost a program
# that calls the op in a loop pays.  Small ops measure the host side (dispatch and launch),
# large ones the kernels.


def _timed_loop(fn: Callable[[], object], n: int, sync) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    if sync is not None:
        sync()
    return time.perf_counter() - t0


def _calibrate(fn: Callable[[], object], target: float, sync=None) -> int:
    """How many calls take about ``target`` seconds."""
    n = 1
    while True:
        dt = _timed_loop(fn, n, sync)
        if dt >= target / 4 or n >= 1 << 22:
            return max(1, int(n * target / max(dt, 1e-9)))
        n *= 4


def run_case(case: Case, repeats: int, target: float) -> None:
    """Measure every implementation of ``case`` (medians in ``case.medians``)."""
    numbers = {}
    for impl, fn in list(case.impls.items()):
        try:
            fn()  # warm up (first-call resolution, compilation)
            numbers[impl] = _calibrate(fn, target, case.sync)
        except Exception as e:  # noqa: BLE001 - report and go on
            case.missing[impl] = f"error: {type(e).__name__}: {e}"
            del case.impls[impl]
    samples: dict[str, list[float]] = {impl: [] for impl in case.impls}
    order = list(case.impls.items())
    shuffle = random.Random(0).shuffle
    for _ in range(repeats):
        shuffle(order)  # Note [Paired ratios]: no fixed place or neighbour in a round
        for impl, fn in order:
            n = numbers[impl]
            samples[impl].append(_timed_loop(fn, n, case.sync) / n)
    case.samples = samples
    case.medians = {impl: statistics.median(v) for impl, v in samples.items()}


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "n/a"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.2f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def fmt_ratio(r: float | None) -> str:
    return "" if r is None else f"{r:.2f}x"


def table(cases: list[Case], impls=IMPLS, refs=REFS) -> str:
    """A markdown table of medians and mdtensor's ratios to each of ``refs`` (Note [Paired
    ratios]); by default torch, numpy and eager jax.numpy."""
    head = ["case", *impls, *(f"md/{r}" for r in refs)]
    rows = [head, ["---"] * len(head)]
    for c in cases:
        m = c.medians
        rows.append([c.name, *(fmt(m.get(i)) if i in m else "n/a" for i in impls),
                     *(fmt_ratio(c.ratio("mdtensor", r)) for r in refs)])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


#: the compile table's columns, and its ratios (``md.compile``'s step over each)
COMPILE_IMPLS = ("numpy", "mdtensor", "mdtensor-compile", "jax-jit")


def compile_table(cases: list[Case], capture_seconds: dict) -> str:
    """A markdown table of the compiled cases: medians, the compiled step's ratios to
    jax.jit, NumPy and mdtensor eager (Note [Paired ratios]), and its capture time."""
    head = ["case", *COMPILE_IMPLS, "compiled/jax-jit", "compiled/numpy", "compiled/eager",
            "capture"]
    rows = [head, ["---"] * len(head)]
    for c in cases:
        m = c.medians
        rows.append([c.name, *(fmt(m.get(i)) if i in m else "n/a" for i in COMPILE_IMPLS),
                     *(fmt_ratio(c.ratio("mdtensor-compile", r))
                       for r in ("jax-jit", "numpy", "mdtensor")),
                     fmt(capture_seconds.get(c.name))])
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def machine_info() -> dict:
    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    versions = {}
    for mod in ("numpy", "mdtensor", "torch", "autograd", "jax", "plum", "cupy"):
        m = sys.modules.get(mod)
        if m is not None:
            versions[mod] = getattr(m, "__version__", "?")
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": versions,
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "threads": {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                    "MKL_NUM_THREADS")},
    }


def write_json(path: str, cases: list[Case], extra: dict, impls=IMPLS) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    record = {
        "machine": machine_info(),
        "cases": [{"name": c.name, "group": c.group, "seconds": c.medians,
                   "ratios": {f"{impl}/{ref}": r
                              for impl in ("mdtensor", "mdtensor-compile")
                              for ref in (*impls, "mdtensor")
                              if ref != impl and (r := c.ratio(impl, ref)) is not None},
                   "rounds": len(c.samples.get("mdtensor", ())),
                   "missing": c.missing} for c in cases],
        **extra,
    }
    with open(path, "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
