"""``python -m benchmarks [--quick] [--json PATH] [--filter TEXT] [--check] [--sweep]
[--device cuda]``.

Pins BLAS/OpenMP threads to 1 before any array library is imported, runs every case with
interleaved repeats, prints a markdown table and writes a JSON record.  ``--sweep`` times
every catalogue op instead (benchmarks/sweep.py; ``--filter`` selects ops by name), and
``--check`` runs the sweep after the cases.  ``--device cuda`` runs the GPU cases instead
(benchmarks/gpu.py: mdtensor on CUDA against CuPy and PyTorch).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import sys  # noqa: E402

from . import cases as C  # noqa: E402
from .harness import compile_table, fmt, run_case, table, write_json  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repeats, shorter runs")
    p.add_argument("--json", default=None,
                   help="where to write the record (default: benchmarks/results/latest.json "
                        "for a full run, benchmarks/results/partial/latest.json for a "
                        "--filter or --quick one)")
    p.add_argument("--filter", default="", help="only cases whose name contains TEXT")
    p.add_argument("--check", action="store_true",
                   help="check the hand-written NumPy MLP gradients against torch first")
    p.add_argument("--sweep", action="store_true",
                   help="every catalogue op's overhead against PyTorch (benchmarks/sweep.py)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="cpu: the CPU cases; cuda: the GPU cases (needs CuPy and a GPU)")
    args = p.parse_args(argv)
    if args.json is None:
        # Only a full run replaces the committed record; a filtered or quick one (made while
        # working on a few cases) goes to an untracked folder beside it.
        folder = "partial/" if args.filter or args.quick else ""
        args.json = f"benchmarks/results/{folder}latest.json"
    if args.device == "cuda":
        return _main_gpu(args)
    if args.sweep:
        return _main_sweep(args)

    libs = C.libraries()
    for name, lib in libs.items():
        if isinstance(lib, Exception):
            print(f"# {name}: n/a ({type(lib).__name__}: {lib})")
    if args.check:
        print("# numpy MLP gradient check:", C.check_numpy_mlp(libs))

    # Many short rounds: each round's ratio compares nearly simultaneous times (Note
    # [Paired ratios] in harness.py).
    repeats, target = (9, 0.01) if args.quick else (31, 0.035)
    all_cases = (C.small_op_cases(libs) + C.large_op_cases(libs) + C.mlp_cases(libs)
                 + C.cnn_cases(libs) + C.layer_cases(libs) + C.transform_cases(libs)
                 + C.compile_cases(libs))
    selected = [c for c in all_cases if args.filter in c.name]
    for case in selected:
        run_case(case, repeats, target)
        print(f"# {case.name}: " + ", ".join(f"{k}={fmt(v)}" for k, v in case.medians.items()),
              file=sys.stderr)
    imports = C.import_times(3 if args.quick else 5)
    compiled = [c for c in selected if c.group == "compile"]
    others = [c for c in selected if c.group != "compile"]
    if others:
        print(table(others))
    if compiled:
        print()
        print(compile_table(compiled, C.CAPTURE_SECONDS))
    print()
    print("import time: " + ", ".join(f"{k} {fmt(v)}" for k, v in imports.items()))
    write_json(args.json, selected, {"import_seconds": imports,
                                     "capture_seconds": C.CAPTURE_SECONDS})
    print(f"\n(JSON written to {args.json})")
    if args.check:
        print()
        _main_sweep(argparse.Namespace(quick=args.quick, filter="", json=args.json))
    return 0


def _main_sweep(args) -> int:
    from . import sweep

    repeats, target = (3, 0.002) if args.quick else (5, 0.004)
    rows = sweep.run_sweep(repeats, target, only=args.filter)
    print(sweep.report(rows))
    path = args.json.replace("latest.json", "sweep.json")
    write_json(path, [], {"sweep": sweep.record(rows)})
    print(f"\n(JSON written to {path})")
    return 0


def _main_gpu(args) -> int:
    from . import gpu

    libs = gpu.libraries()
    for name, lib in libs.items():
        if isinstance(lib, Exception):
            print(f"# {name}: n/a ({type(lib).__name__}: {lib})")
    if isinstance(libs["cupy"], Exception) or isinstance(libs["mdtensor"], Exception):
        print("no usable GPU: --device cuda needs mdtensor, CuPy and a CUDA device",
              file=sys.stderr)
        return 1
    name = gpu.gpu_name(libs)
    print(f"# GPU: {name}")
    print("# MLP gradient check:", gpu.check_mlp(libs))
    repeats, target = (5, 0.01) if args.quick else (11, 0.03)
    selected = [c for c in gpu.cases(libs) if args.filter in c.name]
    for case in selected:
        run_case(case, repeats, target)
        print(f"# {case.name}: " + ", ".join(f"{k}={fmt(v)}" for k, v in case.medians.items()),
              file=sys.stderr)
    print(table(selected, gpu.IMPLS, gpu.REFS))
    path = args.json.replace("latest.json", "latest_cuda.json")
    write_json(path, selected, {"gpu": name}, gpu.IMPLS)
    print(f"\n(JSON written to {path})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
