"""``python -m mdtensor``: a short tour on the default NumPy backend.

Lists the backends found, computes a little (with autograd), shows the dispatch trace of
one call and the dispatch table of one op.
"""

from __future__ import annotations

import contextlib
import io
import sys


def main(argv=None) -> int:
    import mdtensor as md

    print(f"mdtensor {md.__version__} (Array API {md.__array_api_version__})")
    print("\nBackends found (entry point group 'mdtensor.backends'):")
    for row in md.backends.available():
        state = "loaded" if row["loaded"] else ("installed" if row["installed"]
                                                 else "not installed")
        print(f"  {row['name']:<10} device={row['device_type']!r:<8} key={row['key']:<12} "
              f"{state}  ({row['distribution']})")

    print("\nA small computation on device 'cpu':")
    x = md.asarray([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    w = md.asarray([0.5, -1.0])
    y = md.tanh(x @ w).sum()
    print(f"  x = {x}")
    print(f"  y = tanh(x @ w).sum() = {y}")
    y.backward()
    print(f"  dy/dx = {x.grad}")
    print(f"  x.keyset = {x.keyset}")

    print("\nDispatch trace of md.add(x, 2) with x requiring grad:")
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf), md.library.dispatch_trace():
        md.add(x, 2)
    for line in buf.getvalue().splitlines():
        print("  " + line)

    print("\nDispatch table of aten::masked_fill.Scalar:")
    for line in md.library.dump_text("aten::masked_fill.Scalar").splitlines():
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
