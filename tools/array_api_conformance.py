"""Run the Array API conformance suite against mdtensor on every installed backend.

The suite (data-apis/array-api-tests) is not on PyPI and is not part of this repository:
give the path of a checkout of it, with the spec repository (data-apis/array-api) in its
``array-api`` folder (the suite's git submodule), and an interpreter that has the suite's
requirements and mdtensor installed::

    python tools/array_api_conformance.py ../array-api-tests --python ../aat-venv/bin/python

For each backend that is installed and loads (``md.backends.available()``: cpu, jax,
loopback, cuda where CuPy finds a GPU, ...) it runs the whole suite with that backend's
device as mdtensor's default (``MDTENSOR_DEFAULT_DEVICE``) and prints one line::

    cpu       1379 passed, 0 failed, 5 skipped   (100 examples, 212 s)

The full pytest output of each run goes to ``--log-dir``.  Exit status: 0 when no backend
failed a test, 1 otherwise, 2 when the suite could not run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: run in the suite's interpreter: the device types of the backends that load there
_PROBE = """
import json, mdtensor as md
ok = {}
for row in md.backends.available():
    if not row["installed"]:
        continue
    try:
        md.zeros(1, device=row["device_type"])
    except Exception as e:  # a backend whose library is installed but cannot run here
        ok[row["device_type"]] = f"{type(e).__name__}: {e}"
    else:
        ok[row["device_type"]] = None
print(json.dumps(ok))
"""

_COUNTS = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")


def _backends(python: str) -> dict[str, str | None]:
    """Device type -> None where the backend loads, else why it does not."""
    out = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True)
    if out.returncode:
        sys.exit(f"array_api_conformance: mdtensor does not import in {python}:\n"
                 f"{out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _summary(log: str) -> dict[str, int]:
    """The counts of pytest's last summary line (``error`` also when there is none)."""
    counts = dict.fromkeys(("passed", "failed", "skipped", "xfailed", "xpassed", "error"), 0)
    last = next((line for line in reversed(log.splitlines()) if _COUNTS.search(line)), None)
    if last is None:
        counts["error"] = 1
        return counts
    for n, kind in _COUNTS.findall(last):
        counts["error" if kind.startswith("error") else kind] += int(n)
    return counts


def _has_xdist(python: str) -> bool:
    return subprocess.run([python, "-c", "import xdist"], capture_output=True).returncode == 0


def run(suite: Path, device: str, args, log_dir: Path) -> tuple[dict[str, int], str, Path]:
    """Run the suite with ``device`` as mdtensor's default device."""
    cmd = [args.python, "-m", "pytest", "array_api_tests/", "-q", "-rfEs",
           "-p", "no:cacheprovider", f"--max-examples={args.max_examples}",
           "--disable-deadline"]
    if args.jobs > 1 and _has_xdist(args.python):
        cmd += ["-n", str(args.jobs)]
    if args.xfails:
        cmd += ["--xfails-file", str(Path(args.xfails).resolve())]
    env = dict(os.environ, ARRAY_API_TESTS_MODULE="mdtensor", MDTENSOR_DEFAULT_DEVICE=device)
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=suite, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - start
    log = proc.stdout + proc.stderr
    path = log_dir / f"array-api-tests-{device}.log"
    path.write_text(" ".join(cmd) + f"\n(cwd {suite}, MDTENSOR_DEFAULT_DEVICE={device})\n\n"
                    + log)
    return _summary(log), f"{seconds:.0f} s", path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, help="a checkout of data-apis/array-api-tests")
    parser.add_argument("--python", default=sys.executable,
                        help="an interpreter with the suite's requirements and mdtensor "
                             "(default: this one)")
    parser.add_argument("--max-examples", type=int, default=100,
                        help="hypothesis examples per test (the suite's default: 100)")
    parser.add_argument("--jobs", type=int, default=2, help="pytest-xdist workers")
    parser.add_argument("--backends", help="device types to run, comma-separated "
                                           "(default: every installed backend)")
    parser.add_argument("--xfails", help="an xfails file of the suite's format")
    parser.add_argument("--log-dir", type=Path, default=Path(tempfile.gettempdir()),
                        help="where the full output of each run goes (default: %(default)s)")
    args = parser.parse_args(argv)
    suite = args.suite.resolve()
    if not (suite / "array_api_tests").is_dir() or not (suite / "array-api").is_dir():
        print(f"array_api_conformance: {suite} is not a checkout of data-apis/array-api-"
              f"tests with the spec in its array-api folder", file=sys.stderr)
        return 2
    args.log_dir.mkdir(parents=True, exist_ok=True)
    found = _backends(args.python)
    wanted = args.backends.split(",") if args.backends else sorted(found)
    status = 0
    for device in wanted:
        if device not in found:
            print(f"{device:<9} not installed")
            status = max(status, 1)
            continue
        if found[device] is not None:
            print(f"{device:<9} does not load here ({found[device]})")
            continue
        counts, took, log = run(suite, device, args, args.log_dir)
        extra = "".join(f", {counts[k]} {k}" for k in ("xfailed", "xpassed", "error")
                        if counts[k])
        print(f"{device:<9} {counts['passed']} passed, {counts['failed']} failed, "
              f"{counts['skipped']} skipped{extra}   ({args.max_examples} examples, {took}; "
              f"{log})", flush=True)
        if counts["failed"] or counts["error"] or counts["xpassed"]:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
