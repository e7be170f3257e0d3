"""Throwaway plug-in distributions for backend-discovery tests.

``make_dist`` writes a module and a ``*.dist-info`` with entry points into a directory;
``run`` executes code in a fresh interpreter with that directory first on ``sys.path``, so
``importlib.metadata`` finds the distribution exactly as it would an installed one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def make_dist(root, dist, module_src, entry_points):
    (root / f"{dist}.py").write_text(textwrap.dedent(module_src))
    info = root / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))


def entry_points(module, infos, factories=None):
    """The ``entry_points.txt`` of a plug-in distribution: ``infos`` maps each backend name
    to its ``BackendInfo`` attribute of ``module``, ``factories`` to its backend factory
    attribute (default: the same attribute, which fails to load as a backend)."""
    factories = factories or infos
    lines = ["[mdtensor.backend_info]"] + [f"{n} = {module}:{a}" for n, a in infos.items()]
    lines += ["[mdtensor.backends]"] + [f"{n} = {module}:{a}" for n, a in factories.items()]
    return "\n".join(lines) + "\n"


def run(root, code):
    prelude = f"import sys; sys.path.insert(0, {str(root)!r})\n" if root else ""
    return subprocess.run([sys.executable, "-W", "always", "-c",
                           prelude + textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120)
