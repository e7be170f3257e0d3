#!/usr/bin/env bash
# The GPU check: the whole test suite on device "cuda" and the GPU benchmarks, in one run
# on a bare GPU machine without network (CuPy, PyTorch and JAX with CUDA installed; see
# ../shared/tools/gpu/README.md for what such a machine has).
#
#   tools/gpu_prepare.sh .gpu          # here, first: wheels, tests and benchmarks
#   bash .gpu/gpu_check.sh [LOGDIR]    # there, from the project's root
#
# Installs the prepared wheels into a private folder, runs the suite with
# MDTENSOR_TEST_BACKEND=cuda (JAX preallocation off) and `python -m benchmarks --device
# cuda`, and writes pytest_cuda.log, bench_cuda.log, bench_cuda.json and env.log to LOGDIR
# (default $OUT, else .gpu/logs).  Sized to finish in about 5 minutes on an H100/H200;
# TEST_TIMEOUT, BENCH_TIMEOUT, WORKERS and PYTEST_ARGS adjust it.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
logs="${1:-${OUT:-$here/logs}}"
mkdir -p "$logs"
py="${PYTHON:-python3}"
start=$SECONDS

"$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/mdtensor-site "$here"/whl/*.whl || exit 1
export PYTHONPATH=/tmp/mdtensor-site${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
cd "$here/t" || exit 1
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  "$py" - <<'PY'
import importlib
for m in ("numpy", "cupy", "torch", "jax", "plum", "mdtensor"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:  # noqa: BLE001
        print(m, "n/a", type(e).__name__, e)
PY
} > "$logs/env.log" 2>&1
cat "$logs/env.log"

MDTENSOR_TEST_BACKEND=cuda timeout "${TEST_TIMEOUT:-270}" "$py" -m pytest -q \
    -p no:cacheprovider -n "${WORKERS:-8}" --timeout 120 -rfE --tb=short \
    ${PYTEST_ARGS:-tests} > "$logs/pytest_cuda.log" 2>&1
echo "pytest rc=$? after $((SECONDS - start)) s"
tail -n 3 "$logs/pytest_cuda.log"

timeout "${BENCH_TIMEOUT:-150}" "$py" -m benchmarks --device cuda \
    --json "$logs/bench_cuda.json" > "$logs/bench_cuda.log" 2>&1
echo "benchmarks rc=$? after $((SECONDS - start)) s"
grep '^|\|^#' "$logs/bench_cuda.log"
