"""The import graph of the ``mdtensor`` package, read from its sources with ``ast``.

Every module of the installed package is covered: ``mdtensor/``, the catalogue ``ops/``
(``mdtensor.ops``) and ``backends/`` (``mdtensor.backends``).  An edge is an import of
one of these modules by another, at module level or inside a function -- both run, sooner
or later, so a circle through either is a circle -- except imports under
``if TYPE_CHECKING:`` (never run).  Importing ``a.b.c`` also runs the packages ``a.b``
and ``a``: an edge goes to each enclosing package the importer is not itself inside,
except the root ``mdtensor`` (whose ``__init__`` is the assembly point, importing every
public module).

``python tools/import_graph.py`` prints the figures (tests/test_structure.py checks them):
modules, edges, circles (strongly connected components of two or more modules), back-edges
(the edges a depth-first walk finds running back up), the number of floors (the longest
chain of imports), function-level imports of the package's own modules, and the imports
from the core into the op catalogue.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: source folder -> the package it is installed as (pyproject's ``package-dir``)
FOLDERS = {"mdtensor": "mdtensor", "ops": "mdtensor.ops", "backends": "mdtensor.backends"}

#: the op catalogue: the core (everything else but the modules in ASSEMBLY) never imports it
CATALOGUE = "mdtensor.ops"

#: the modules allowed to import the catalogue: the package's assembly point, the
#: user-facing namespaces that are chapters of the catalogue (``md.linalg``, ``md.fft``),
#: and the built-in backends, which generate kernels from it: like any plug-in they are
#: loaded by name on the first use of their device (``_BUILTIN`` in backends/__init__.py),
#: never imported by the core
ASSEMBLY = {"mdtensor", "mdtensor.linalg", "mdtensor.fft"}
PLUGINS = {f"mdtensor.backends.{m}" for m in (
    "numpy_backend", "jax_backend", "cupy_backend", "cupy_kernels", "dask_backend",
    "dask_namespace")}


@dataclass(frozen=True)
class Import:
    source: str  # importing module
    target: str  # imported module
    line: int
    in_function: bool
    implicit: bool = False  # an enclosing package run by importing a submodule


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Module name -> source file, for every module of the package."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if any(p.startswith(".") or p == "__pycache__" for p in parts):
                continue
            found[".".join([package, *parts])] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING"
            or isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _walk(node, in_function=False):
    """``(import node, in_function)`` for every import run by the module's code."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for sub in child.orelse:
                yield from _walk_one(sub, in_function)
            continue
        yield from _walk_one(child, in_function)


def _walk_one(node, in_function):
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node, in_function
    elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        yield from _walk(node, True)
    else:
        yield from _walk(node, in_function)


def _package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def imports(known: dict[str, Path]) -> list[Import]:
    """Every import of a package module by a package module."""
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        package = _package_of(name, path)
        for node, in_function in _walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = package.split(".")
                    base = base[:len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                for alias in node.names:
                    sub = f"{module}.{alias.name}"
                    targets.append(sub if sub in known else module)
            for target in targets:
                if target not in known or target == name:
                    continue
                found.append(Import(name, target, node.lineno, in_function))
                parts = target.split(".")
                for i in range(2, len(parts)):
                    parent = ".".join(parts[:i])
                    if parent in known and not (name + ".").startswith(parent + "."):
                        found.append(Import(name, parent, node.lineno, in_function, True))
    return found


def graph(edges: list[Import]) -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for e in edges:
        g.setdefault(e.source, set()).add(e.target)
    return g


def circles(nodes, g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of two or more modules (Tarjan), largest first."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(max(10000, sys.getrecursionlimit()))

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


def back_edges(nodes, g: dict[str, set[str]]) -> list[tuple[str, str]]:
    """The edges a depth-first walk (in name order) finds pointing at a module still on its
    path: each closes a circle."""
    state: dict[str, int] = {}  # 1 on the path, 2 done
    found = []

    def visit(v):
        state[v] = 1
        for w in sorted(g.get(v, ())):
            s = state.get(w)
            if s is None:
                visit(w)
            elif s == 1:
                found.append((v, w))
        state[v] = 2

    for v in sorted(nodes):
        if v not in state:
            visit(v)
    return found


def floors(nodes, g: dict[str, set[str]]) -> int:
    """The longest chain of imports, counted in modules, over the graph of circles
    (each circle one node)."""
    comp = {}
    for i, c in enumerate(circles(nodes, g)):
        for v in c:
            comp[v] = f"#circle{i}"
    cg: dict[str, set[str]] = {}
    for v in nodes:
        for w in g.get(v, ()):
            a, b = comp.get(v, v), comp.get(w, w)
            if a != b:
                cg.setdefault(a, set()).add(b)
    depth: dict[str, int] = {}

    def height(v):
        if v not in depth:
            depth[v] = 1 + max((height(w) for w in cg.get(v, ())), default=0)
        return depth[v]

    return max((height(comp.get(v, v)) for v in nodes), default=0)


def core_to_catalogue(edges: list[Import]) -> list[Import]:
    """Imports of the op catalogue by core modules (neither in it, nor in ASSEMBLY or
    PLUGINS)."""
    def inside(name, package):
        return name == package or name.startswith(package + ".")

    return [e for e in edges if inside(e.target, CATALOGUE) and not inside(e.source, CATALOGUE)
            and e.source not in ASSEMBLY | PLUGINS and not e.implicit]


def _once(edges: list[Import]) -> list[Import]:
    """One per import statement and module imported (``from m import a, b`` is one)."""
    seen, out = set(), []
    for e in edges:
        if (e.source, e.line, e.target) not in seen:
            seen.add((e.source, e.line, e.target))
            out.append(e)
    return out


def report(root: Path = ROOT) -> dict:
    known = modules(root)
    edges = imports(known)
    g = graph(edges)
    return {
        "modules": len(known),
        "edges": len({(e.source, e.target) for e in edges}),
        "circles": circles(known, g),
        "back_edges": back_edges(known, g),
        "floors": floors(known, g),
        "function_level": _once([e for e in edges if e.in_function and not e.implicit]),
        "core_to_catalogue": _once(core_to_catalogue(edges)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="list the back-edges, function-level and core->catalogue imports")
    args = parser.parse_args(argv)
    r = report()
    print(f"modules {r['modules']}, edges {r['edges']}, floors {r['floors']}")
    print(f"circles {len(r['circles'])} "
          f"(sizes {[len(c) for c in r['circles']]}), back-edges {len(r['back_edges'])}")
    print(f"function-level imports of own modules {len(r['function_level'])}")
    print(f"core -> catalogue imports {len(r['core_to_catalogue'])}")
    for c in r["circles"]:
        print("  circle:", " ".join(c))
    if args.verbose:
        for a, b in r["back_edges"]:
            print(f"  back-edge: {a} -> {b}")
        for e in r["function_level"]:
            print(f"  in a function: {e.source}:{e.line} -> {e.target}")
        for e in r["core_to_catalogue"]:
            print(f"  core -> catalogue: {e.source}:{e.line} -> {e.target}")
    return 1 if r["circles"] or r["core_to_catalogue"] else 0


if __name__ == "__main__":
    sys.exit(main())
