"""``python -m benchmarks.sparse [--n N] [--nnz NNZ] [--k K] [--rounds R] [--libraries]``.

The sparse @ dense product of issue 28 -- an ``n x n`` matrix with ``nnz`` non-zeros
(default 100,000 x 100,000, 1,000,000) times an ``n x k`` dense matrix (k = 16), float32 --
forward, and forward + backward (the dense operand's gradient and the sparse operand's,
on its pattern), for mdtensor (SparseCPU: scipy.sparse), ``scipy.sparse`` done by hand
(the same products and the sampled product for the sparse gradient) and PyTorch's
``torch.sparse.mm`` of a coalesced COO tensor.  Threads are pinned to 1 before any array
library loads; each implementation runs in interleaved rounds (a new order per round) and
the table shows the median milliseconds and mdtensor's ratios (its COO and CSR layouts).
PyTorch's backward allocates the sparse operand's gradient densely (``n x n``: 40 GB at
the default size), so it is reported as not run when that would not fit in a quarter of
this machine's memory.

``--libraries`` times the array libraries' own kernels instead -- the measurement that chose
SciPy for the CPU's sparse kernels (backends/scipy_sparse.py): the product and the
transposed product of backward with ``scipy.sparse`` CSR and COO and pydata ``sparse`` COO
and GCXS (where installed), best of ``rounds``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402


def _problem(n, nnz, k, seed=0):
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, n, nnz)
    cols = rng.integers(0, n, nnz)
    vals = rng.standard_normal(nnz).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    g = rng.standard_normal((n, k)).astype(np.float32)
    return rows, cols, vals, b, g


def _scipy(rows, cols, vals, b, g, n):
    import scipy.sparse as sp

    a = sp.coo_array((vals, (rows, cols)), shape=(n, n))
    a.sum_duplicates()
    csr = a.tocsr()

    def forward():
        return csr @ b

    def backward():
        csr @ b
        gb = csr.T @ g
        r, c = a.coords
        ga = np.empty(a.nnz, np.float32)
        for s in range(0, a.nnz, 1 << 16):
            e = s + (1 << 16)
            ga[s:e] = np.einsum("ij,ij->i", g[r[s:e]], b[c[s:e]])
        return ga, gb

    return forward, backward


def _mdtensor(rows, cols, vals, b, g, n, csr=False):
    import mdtensor as md

    a = md.sparse_coo_tensor(md.asarray(np.stack([rows, cols])), md.asarray(vals),
                             (n, n)).coalesce()
    if csr:
        a = a.to_sparse_csr()
    bt, gt = md.asarray(b), md.asarray(g)

    def forward():
        return a @ bt

    a_grad = a.detach().requires_grad_()
    b_grad = md.asarray(b).requires_grad_()

    def backward():
        a_grad.grad = b_grad.grad = None
        (a_grad @ b_grad).backward(gt)

    return forward, backward


def _torch(rows, cols, vals, b, g, n):
    import torch

    torch.set_num_threads(1)
    idx = torch.from_numpy(np.stack([rows, cols]).astype(np.int64))
    a = torch.sparse_coo_tensor(idx, torch.from_numpy(vals), (n, n),
                                check_invariants=False).coalesce()
    bt, gt = torch.from_numpy(b), torch.from_numpy(g)

    def forward():
        return torch.sparse.mm(a, bt)

    dense_bytes = n * n * 4
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if dense_bytes > total // 4:
        return forward, None
    a_grad = a.detach().requires_grad_()
    b_grad = bt.clone().requires_grad_()

    def backward():
        a_grad.grad = b_grad.grad = None
        torch.sparse.mm(a_grad, b_grad).backward(gt)

    return forward, backward


def _best(fn, rounds):
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def libraries(n, nnz, k, rounds) -> None:
    """The libraries' own sparse @ dense kernels (``--libraries``)."""
    import scipy.sparse as sp

    rows, cols, vals, b, g = _problem(n, nnz, k)
    coo = sp.coo_array((vals, (rows, cols)), shape=(n, n))
    coo.sum_duplicates()
    csr = coo.tocsr()
    cases = {"scipy CSR": (lambda: csr @ b, lambda: csr.T @ g),
             "scipy COO": (lambda: coo @ b, lambda: coo.T @ g)}
    try:
        import sparse

        pc = sparse.COO(np.stack(coo.coords), coo.data, shape=(n, n))
        pg = sparse.GCXS.from_coo(pc, compressed_axes=[0])
        cases["pydata COO"] = (lambda: pc @ b, lambda: pc.T @ g)
        cases["pydata GCXS"] = (lambda: pg @ b, lambda: pg.T @ g)
    except ImportError:
        print("pydata sparse: not installed")
    print(f"library kernels, {n} x {n}, {nnz} non-zeros, by {n} x {k}, float32, 1 thread, "
          f"best of {rounds} (ms)\n")
    print("| | A @ B | A.T @ G |")
    print("|---|---|---|")
    for name, (fwd, bwd) in cases.items():
        print(f"| {name} | {_best(fwd, rounds):.1f} | {_best(bwd, rounds):.1f} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sparse", description=__doc__)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--nnz", type=int, default=1_000_000)
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--libraries", action="store_true",
                   help="time the libraries' own kernels (scipy.sparse, pydata sparse)")
    args = p.parse_args(argv)
    if args.libraries:
        libraries(args.n, args.nnz, args.k, args.rounds)
        return 0
    data = _problem(args.n, args.nnz, args.k)
    impls = {"md COO": _mdtensor, "md CSR": lambda *a: _mdtensor(*a, csr=True),
             "scipy": _scipy, "torch": _torch}
    fns = {}
    for name, make in impls.items():
        try:
            fns[name] = make(*data, args.n)
        except ImportError as e:
            print(f"{name}: not installed ({e})")
    times = {(name, which): [] for name in fns for which in (0, 1)}
    rng = random.Random(0)
    for _ in range(args.rounds + 1):  # the first round warms up
        order = [(name, which) for name in fns for which in (0, 1) if fns[name][which]]
        rng.shuffle(order)
        for name, which in order:
            t = time.perf_counter()
            fns[name][which]()
            times[(name, which)].append(time.perf_counter() - t)
    print(f"sparse @ dense: {args.n} x {args.n}, {args.nnz} non-zeros, by {args.n} x "
          f"{args.k}, float32, 1 thread, median of {args.rounds} rounds (ms)\n")
    print("| | md COO | md CSR | scipy CSR by hand | torch.sparse.mm (COO) | md CSR/scipy "
          "| md COO/scipy | md COO/torch |")
    print("|---|---|---|---|---|---|---|---|")
    for which, label in ((0, "forward"), (1, "forward + backward")):
        med = {name: statistics.median(times[(name, which)][1:])
               if times[(name, which)] else None for name in fns}

        def cell(name, med=med):
            v = med.get(name)
            return f"{v * 1e3:.1f}" if v is not None else "not run"

        def ratio(md_name, name, med=med):
            v, m = med.get(name), med.get(md_name)
            return f"{m / v:.2f}" if v and m else "n/a"

        print(f"| {label} | {cell('md COO')} | {cell('md CSR')} | {cell('scipy')} | "
              f"{cell('torch')} | {ratio('md CSR', 'scipy')} | {ratio('md COO', 'scipy')} | "
              f"{ratio('md COO', 'torch')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
