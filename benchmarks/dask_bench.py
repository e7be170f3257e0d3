"""The Dask backend's benchmarks (docs/SCALE.md): ``python -m benchmarks.dask_bench CASE``.

One full-batch gradient step of logistic regression -- the mean binary cross-entropy of
``z = X @ w + b`` written with logits (``logaddexp(0, z) - y * z``, PyTorch's
``BCEWithLogitsLoss``; no log of a saturated probability), its gradient with respect to
``w`` and ``b`` -- computed in one pass with the loss:

* ``step [--rows 10000000]``: a float32 design matrix of ``rows`` x 32, generated once and
  held in memory (``persist``), so the step itself is timed.  mdtensor on
  ``device="dask"`` (autograd builds the gradient) against the same step written directly
  with ``dask.array`` (the gradient by hand, ``X.T @ (sigmoid(z) - y) / n``), both on
  Dask's threaded scheduler over the same chunks, in interleaved rounds (Note [Paired
  ratios] in benchmarks/harness.py), wall and CPU time; the number of tasks in each graph,
  as built and as Dask runs it (after its optimisation, which fuses chains of blockwise
  tasks); mdtensor's graph run by ``dask.compute`` itself, without the buffer reuse of
  ``md.dask.compute`` (Note [Temporaries in fused Dask tasks] in
  backends/dask_buffers.py); the calls and fresh chunk-sized arrays per chunk in each
  graph's tasks (counted, not timed); and the NumPy backend (``device="cpu"``, autograd)
  on the same data as one NumPy array.
* ``out-of-core [--rows 100000000]``: the step on 100,000,000 x 32 float32 (12.8 GB) made
  chunk by chunk on the Dask device (``md.rand``), never whole in memory, on this
  machine's cores: the wall time and the peak resident memory (``ru_maxrss`` of the
  process and of its children).
  Run it alone: it takes minutes and every core.

BLAS threads are pinned to 1 (as in ``python -m benchmarks``): Dask's scheduler runs one
chunk per core, and NumPy's single-threaded time is the reference of the other cases.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time

if __name__ == "__main__":  # before NumPy is imported (not when a test imports the steps)
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

COLS = 32


def initial_w():
    """The weights the step starts from (the same on every side).  Not ``zeros``: Dask
    makes a chunk of zeros by broadcasting one zero, and NumPy multiplies a matrix by such
    a stride-0 vector without BLAS, ten times slower."""
    import numpy as np

    return np.random.default_rng(1).standard_normal(COLS).astype(np.float32) * 0.01


def md_step(md, X, y):
    """The step on mdtensor tensors (any device): loss, grad w, grad b (lazy on Dask)."""
    w = md.asarray(initial_w(), device=X.device, requires_grad=True)
    b = md.zeros((), device=X.device, requires_grad=True)
    z = X @ w + b
    loss = (md.logaddexp(0, z) - y * z).mean()
    loss.backward()
    return loss, w.grad, b.grad


def dask_step(da, X, y):
    """The same step written directly with dask.array (lazy): loss, grad w, grad b."""
    import numpy as np

    w = da.from_array(initial_w())
    b = np.float32(0)
    z = X @ w + b
    loss = (da.logaddexp(0, z) - y * z).mean()
    r = (1 / (1 + da.exp(-z)) - y) / np.float32(X.shape[0])
    return loss, X.T @ r, r.sum()


def task_counts(*arrays) -> tuple[int, int]:
    """Tasks in the graph of ``arrays`` (shared tasks once): as built, and after Dask's
    optimisation (``dask.optimize`` of them together, what ``dask.compute`` runs)."""
    import dask

    def tasks(collections) -> int:
        keys = set()
        for a in collections:
            keys.update(a.__dask_graph__().keys())
        return len(keys)

    return tasks(arrays), tasks(dask.optimize(*arrays))


def chunk_work(arrays, chunk_bytes: int, reuse: bool) -> tuple[int, int]:
    """What the tasks of ``arrays``' graph do, counted while Dask computes it on the
    synchronous scheduler, as optimised by Dask (``reuse``: then rewritten as mdtensor
    computes it, Note [Temporaries in fused Dask tasks] in backends/dask_buffers.py): the
    calls of the tasks' functions (NumPy's, mostly), and how many of them returned a fresh
    array of ``chunk_bytes`` or more, sharing no memory with their arguments.  Counts,
    not times: the same on a loaded machine."""
    import contextlib

    import dask
    import dask.array as da
    import numpy as np
    from dask._task_spec import Task, _execute_subgraph
    from mdtensor.backends.dask_buffers import reusing_buffers

    counts = [0, 0]

    def arrays_in(v):
        if isinstance(v, np.ndarray):
            yield v
        elif isinstance(v, (list, tuple)):
            for x in v:
                yield from arrays_in(x)

    def counted(fn):
        def call(*args, **kwargs):
            out = fn(*args, **kwargs)
            counts[0] += 1
            counts[1] += any(o.nbytes >= chunk_bytes
                             and not any(np.shares_memory(o, a) for a in arrays_in(args))
                             for o in arrays_in(out))
            return out
        return call

    def instrumented(node):
        if type(node) is not Task:
            return node
        if node.func is _execute_subgraph:
            inner, *rest = node.args
            return Task(node.key, _execute_subgraph,
                        {k: instrumented(v) for k, v in inner.items()}, *rest)
        return Task(node.key, counted(node.func), *node.args, **node.kwargs)

    with reusing_buffers() if reuse else contextlib.nullcontext():
        optimize = da.Array.__dask_optimize__
    with dask.config.set(array_optimize=lambda dsk, keys, **kw: {
            k: instrumented(v) for k, v in optimize(dsk, keys, **kw).items()}):
        dask.compute(*arrays, scheduler="sync")
    return counts[0], counts[1]


def cpu_timed(record: dict, name: str, fn, faults: dict | None = None):
    """``fn``, recording the CPU time of every call (all the process's threads: less
    sensitive than wall time to other processes on a shared machine), and in ``faults``
    the page faults it took (minor: fresh memory the kernel maps and zeroes)."""
    times = record.setdefault(name, [])
    minflt = (faults if faults is not None else {}).setdefault(name, [])

    def run():
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
        minflt.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)

    return run


def peak_rss_gb() -> float:
    """The peak resident memory of this process, or of its largest child process if that
    was larger (Dask's threaded scheduler runs in this process; a ``"processes"`` one in
    children), in GB (``ru_maxrss`` is in KiB on Linux)."""
    return max(resource.getrusage(who).ru_maxrss
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)) * 1024 / 1e9


def load() -> str:
    """The machine's load averages (1, 5, 15 minutes): timings on a shared machine say
    what else ran."""
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def step(rows: int, repeats: int) -> int:
    import dask
    import dask.array as da
    import numpy as np

    import mdtensor as md

    from .harness import Case, fmt, fmt_ratio, run_case, table

    rng = da.random.default_rng(0)
    X = rng.standard_normal((rows, COLS), dtype=np.float32)
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(np.float32)
    X, y = dask.persist(X, y)
    Xt, yt = md.dask.from_dask(X), md.dask.from_dask(y)
    X_np, y_np = dask.compute(X, y)
    Xc, yc = md.asarray(X_np), md.asarray(y_np)
    print(f"# {rows} x {COLS} float32, chunks {X.chunksize} ({len(X.chunks[0])} chunks), "
          f"{os.cpu_count()} cores, {load()}")

    want = [np.asarray(v) for v in dask.compute(*dask_step(da, X, y))]
    got = [t.numpy() for t in md.dask.compute(*md_step(md, Xt, yt))]
    cpu = [t.item() if t.ndim == 0 else t.numpy() for t in md_step(md, Xc, yc)]
    for a, b, c in zip(want, got, cpu):
        np.testing.assert_allclose(b, a, rtol=2e-3, atol=1e-6)
        np.testing.assert_allclose(c, a, rtol=2e-3, atol=1e-6)
    print("# results agree (loss, grad w, grad b) across dask.array, md on dask, md on cpu")

    md_counts = task_counts(*(md.dask.to_dask(t) for t in md_step(md, Xt, yt)))
    dask_counts = task_counts(*dask_step(da, X, y))
    print(f"# tasks (as built / as run): mdtensor {md_counts[0]} / {md_counts[1]}, "
          f"dask.array {dask_counts[0]} / {dask_counts[1]}")
    n, size = len(X.chunks[0]), X.chunksize[0] * np.dtype(np.float32).itemsize
    md_work = chunk_work([md.dask.to_dask(t) for t in md_step(md, Xt, yt)], size, True)
    dask_work = chunk_work(dask_step(da, X, y), size, False)
    print(f"# per chunk, in the tasks Dask runs: calls / fresh chunk-sized arrays (of "
          f"{size / 2**20:.0f} MiB): mdtensor {md_work[0] / n:.1f} / {md_work[1] / n:.1f}, "
          f"dask.array {dask_work[0] / n:.1f} / {dask_work[1] / n:.1f}")

    cpu: dict[str, list[float]] = {}
    faults: dict[str, list[int]] = {}
    case = Case(f"logistic step [{rows}x{COLS} f32]", "dask", impls={
        "dask": cpu_timed(cpu, "dask", lambda: dask.compute(*dask_step(da, X, y)), faults),
        "mdtensor": cpu_timed(cpu, "mdtensor", lambda: md.dask.compute(*md_step(md, Xt, yt)),
                              faults),
        # mdtensor's graph run as Dask runs it, without the buffer reuse of md.dask.compute
        "md_graph_by_dask": cpu_timed(cpu, "md_graph_by_dask", lambda: dask.compute(
            *(md.dask.to_dask(t) for t in md_step(md, Xt, yt))), faults),
        "numpy": cpu_timed(cpu, "numpy", lambda: [t.item() if t.ndim == 0 else t.numpy()
                                                  for t in md_step(md, Xc, yc)], faults),
    })
    run_case(case, repeats, target=0.0)
    print(table([case], impls=("dask", "mdtensor", "numpy"), refs=("dask", "numpy")))
    rounds = zip(case.samples["mdtensor"], case.samples["dask"])
    print("per-round mdtensor/dask.array: " + " ".join(f"{a / b:.2f}" for a, b in rounds))
    med = {k: statistics.median(v) for k, v in cpu.items()}
    print("CPU time per step (all threads, median): " + ", ".join(
        f"{k} {fmt(v)}" for k, v in med.items())
        + f"; mdtensor/dask.array {med['mdtensor'] / med['dask']:.2f}x")
    for name in ("mdtensor", "md_graph_by_dask"):
        ratios = sorted(a / b for a, b in zip(case.samples[name], case.samples["dask"]))
        cpus = sorted(a / b for a, b in zip(cpu[name][-repeats:], cpu["dask"][-repeats:]))
        print(f"{name}/dask.array per round, median (range): wall "
              f"{statistics.median(ratios):.2f}x ({ratios[0]:.2f}-{ratios[-1]:.2f}), CPU "
              f"{statistics.median(cpus):.2f}x ({cpus[0]:.2f}-{cpus[-1]:.2f})")
    print("page faults per step (median): " + ", ".join(
        f"{k} {statistics.median(v):.0f}" for k, v in faults.items()))
    print(f"\nmdtensor/dask.array {fmt_ratio(case.ratio('mdtensor', 'dask'))}; "
          f"NumPy backend {fmt(case.medians['numpy'])}; peak RSS {peak_rss_gb():.2f} GB; "
          f"{load()}")
    return 0


def out_of_core(rows: int) -> int:
    import mdtensor as md

    t0 = time.perf_counter()
    md.manual_seed(0)
    X = md.rand(rows, COLS, device="dask") - 0.5
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).to(md.float32)
    loss, gw, gb = md_step(md, X, y)
    built = time.perf_counter() - t0
    chunks = X.chunks
    print(f"# {rows} x {COLS} float32 = {rows * COLS * 4 / 1e9:.1f} GB, chunks of "
          f"{max(chunks[0])} rows ({len(chunks[0])} chunks), {os.cpu_count()} cores, "
          f"{load()}; graph built in {built:.2f} s")
    t0 = time.perf_counter()
    loss, gw, gb = md.dask.compute(loss, gw, gb)
    took = time.perf_counter() - t0
    print(f"# loss {loss.item():.6f}, |grad w| {float((gw * gw).sum()) ** 0.5:.6f}, "
          f"grad b {gb.item():.6f}")
    print(f"out-of-core logistic step [{rows}x{COLS} f32]: {took:.1f} s, peak RSS "
          f"{peak_rss_gb():.2f} GB; {load()}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.dask_bench", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("case", choices=("step", "out-of-core"))
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--repeats", type=int, default=7, help="rounds of the step case")
    args = p.parse_args(argv)
    if args.case == "step":
        return step(args.rows or 10_000_000, args.repeats)
    return out_of_core(args.rows or 100_000_000)


if __name__ == "__main__":
    sys.exit(main())
