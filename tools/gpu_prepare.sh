#!/usr/bin/env bash
# Prepare a GPU check (run here, on a machine with network access; see tools/gpu_check.sh).
#
#   tools/gpu_prepare.sh [DIR]        # DIR defaults to .gpu (ignored by git: add it to
#                                     # .git/info/exclude)
#
# Fills DIR with what a bare GPU machine without network lacks, as wheels for its Python
# (3.12, manylinux x86-64): mdtensor itself, the loopback plug-in, plum-dispatch, beartype,
# array-api-compat and array-api-strict; and a copy of the tests and benchmarks (run from a
# folder without mdtensor/ in it, so the installed wheel and its entry points are used).
# Rebuild after every change you want to check.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-.gpu}"
py="${PYTHON:-python3}"
rm -rf "$dir/whl" "$dir/t"
mkdir -p "$dir/whl" "$dir/t"
"$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
    -d "$dir/whl" "plum-dispatch>=2.5" beartype "array-api-compat>=1.11" "array-api-strict>=2.3"
"$py" -m pip wheel -q --no-deps . -w "$dir/whl"
"$py" -m pip wheel -q --no-deps plugins/mdtensor_loopback -w "$dir/whl"
cp -r tests benchmarks pyproject.toml "$dir/t/"
rm -rf "$dir/t/benchmarks/results"
cp tools/gpu_check.sh "$dir/"
du -sh "$dir"
