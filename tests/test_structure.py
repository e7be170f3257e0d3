"""The code's structure, checked (issue 33): what the built-in layers, the catalogue and the
backends use of the operator registry is the public operator API (Note [The operator API]
in mdtensor/dispatch/operators.py), the one third-party code gets."""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the package that owns the registry's private state: operators and their tables, the
#: callers, packets and namespaces, and overload resolution (which fills the packets'
#: resolution caches)
DISPATCHER = "mdtensor/dispatch/"

#: private attributes of OpOverload and OpOverloadPacket (each name is used by no other
#: class in the project, so a match is an access to the registry's privates)
_PRIVATE = re.compile(
    r"\.(_kernels|_resolved|_push_kernel|_pop_kernel|_table|_mask|_miss|_entry|_invalidate"
    r"|_recompute_mask|_keyset_of|_slow_keyset|_tensor_args|_caller|_overloads"
    r"|_resolution_cache|_on_change|_on_resolve|_by_position|_kwarg_aliases"
    r"|_plum_signatures|_fast_positions|_qualified_name)\b")


def _sources():
    for folder in ("mdtensor", "ops", "backends", "plugins", "benchmarks", "tools"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(DISPATCHER) and ".venv" not in rel:
                yield rel, path.read_text()


def test_no_module_reads_the_registrys_privates():
    found = [f"{rel}:{n}: {line.strip()}"
             for rel, text in _sources()
             for n, line in enumerate(text.splitlines(), 1)
             if _PRIVATE.search(line)]
    assert not found, "private operator state read outside the dispatcher:\n" + "\n".join(found)


def test_the_check_finds_private_access():
    # the pattern is not vacuous: the dispatcher itself uses these names
    text = "".join(p.read_text() for p in sorted((ROOT / DISPATCHER).glob("*.py")))
    assert len(_PRIVATE.findall(text)) > 20
    assert _PRIVATE.search("stack = op._kernels.get(key)")
    assert not _PRIVATE.search("stack = op.kernels_for(key)")


# Note [Class calls] (mdtensor/tensors/tensor.py): Tensors, AutogradMeta and ViewInfo have no
# __init__; the hot path builds them by hand, slot by slot, in several places (a call to a
# constructor would cost a frame per op).  A slot one copy forgets is an AttributeError on
# first read, far from the construction: each copy must fill every slot of its class.

def _constructions(tree):
    """``(function, variable, class name, {attributes assigned to variable})`` for each
    ``variable = new(Cls)`` / ``object.__new__(Cls)`` / ``Cls()`` of the classes built by
    hand, in every function of ``tree``."""
    import ast

    built = {"Tensor", "FakeTensor", "FunctionalTensor", "AutogradMeta", "ViewInfo"}
    # in Tensor's own classmethods, object.__new__(cls) builds a Tensor (or a subclass)
    in_tensor = {id(f) for c in ast.walk(tree) if isinstance(c, ast.ClassDef)
                 and c.name == "Tensor" for f in c.body if isinstance(f, ast.FunctionDef)}
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = built | {"cls"} if id(fn) in in_tensor else built
        made = {}
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                continue
            call = node.value
            name = None
            if isinstance(call.func, ast.Name) and call.func.id in built and not call.args:
                name = call.func.id  # Cls()
            elif (call.args and isinstance(call.args[0], ast.Name)
                  and call.args[0].id in names
                  and (isinstance(call.func, ast.Name) and call.func.id in ("new", "_new")
                       or isinstance(call.func, ast.Attribute)
                       and call.func.attr == "__new__")):
                name = call.args[0].id.replace("cls", "Tensor")  # new(Cls), ...
            if name is not None:
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        made[target.id] = name
        if not made:
            continue
        assigned = {var: set() for var in made}
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for t in target.elts if isinstance(target, ast.Tuple) else (target,):
                        if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                and t.value.id in assigned):
                            assigned[t.value.id].add(t.attr)
        for var, cls in made.items():
            yield fn.name, var, cls, assigned[var]


def _slots(cls_name):
    import mdtensor as md
    from mdtensor.layers.functionalize import FunctionalTensor
    from mdtensor.modes import FakeTensor
    from mdtensor.tensors.autograd_meta import AutogradMeta
    from mdtensor.tensors.tensor import ViewInfo

    cls = {"Tensor": md.Tensor, "FakeTensor": FakeTensor, "FunctionalTensor": FunctionalTensor,
           "AutogradMeta": AutogradMeta, "ViewInfo": ViewInfo}[cls_name]
    return {s for c in cls.__mro__ for s in getattr(c, "__slots__", ())} - {"__weakref__"}


def test_every_hand_built_object_fills_every_slot():
    import ast

    seen, missing = [], []
    for rel, text in _sources():
        for fn, var, cls, assigned in _constructions(ast.parse(text)):
            seen.append((rel, fn, cls))
            lacking = _slots(cls) - assigned
            if lacking:
                missing.append(f"{rel}:{fn}: {var} = {cls}: no {sorted(lacking)}")
    assert not missing, "hand-built objects with unfilled slots:\n" + "\n".join(missing)
    # the scan finds the copies it exists for (the test is not vacuous)
    found = {cls for _, _, cls in seen}
    assert {"Tensor", "AutogradMeta", "ViewInfo"} <= found and len(seen) >= 10, seen


# ---------------------------------------------------------------------------------------
# The import graph (tools/import_graph.py): module- and function-level imports, with ast

def _import_graph():
    import importlib.util

    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "tools/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", module)  # for its dataclass
    spec.loader.exec_module(module)
    return module


def test_the_import_graph_has_no_circle():
    report = _import_graph().report()
    assert report["circles"] == [], report["circles"]
    assert report["back_edges"] == [], report["back_edges"]


def test_the_core_does_not_import_the_catalogue():
    # the catalogue registers into the core (formulas, Functionalize's helpers); the core
    # calls ops through the dispatcher's namespaces
    found = [f"{e.source}:{e.line} imports {e.target}"
             for e in _import_graph().report()["core_to_catalogue"]]
    assert found == [], "\n".join(found)


def test_the_graph_check_finds_circles_and_catalogue_imports(tmp_path):
    # not vacuous: a circle through a function-level import, an import of the catalogue and
    # an import for type checkers only (which never runs, so is no edge)
    pkg = tmp_path / "mdtensor"
    (pkg / "sub").mkdir(parents=True)
    (tmp_path / "ops").mkdir()
    (tmp_path / "backends").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from mdtensor import c\n")
    (pkg / "c.py").write_text("from mdtensor import a\nfrom mdtensor.ops import x\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                              "    from mdtensor import a\n")
    (tmp_path / "ops" / "__init__.py").write_text("")
    (tmp_path / "ops" / "x.py").write_text("from mdtensor import d\n")
    report = _import_graph().report(tmp_path)
    assert report["circles"] == [["mdtensor.a", "mdtensor.c", "mdtensor.sub.b"]]
    assert len(report["back_edges"]) == 1
    assert [(e.source, e.target) for e in report["core_to_catalogue"]] == [
        ("mdtensor.c", "mdtensor.ops.x")]
    assert [e.source for e in report["function_level"]] == ["mdtensor.sub.b"]


# ---------------------------------------------------------------------------------------
# Notes: a citation that names a file names the one that holds the Note

_NOTE_DEF = re.compile(r"^\s*(?:#\s*)?Note \[([^\]]+)\]\s*\n\s*(?:#\s*)?~{4,}", re.M)
_NOTE_CITE = re.compile(
    r"Note\s+\[([^\]]+)\]\s*(?:\(|in\s+)`*((?:mdtensor|ops|backends)/[\w/]+\.py)\b")


def _note_sources():
    for folder in ("mdtensor", "ops", "backends", "tests", "docs", "tools", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".py", ".md") and ".venv" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_every_note_is_written_once_and_cited_where_it_is():
    defined = {}
    for rel, text in _note_sources():
        for m in _NOTE_DEF.finditer(text):
            defined.setdefault(" ".join(m.group(1).split()), []).append(rel)
    twice = {title: files for title, files in defined.items() if len(files) > 1}
    assert not twice, f"Notes written more than once: {twice}"
    wrong = []
    for rel, text in _note_sources():
        for m in _NOTE_CITE.finditer(text):
            title = " ".join(re.sub(r"\n\s*#?", " ", m.group(1)).split())
            home = defined.get(title)
            if home is not None and m.group(2) not in home:
                wrong.append(f"{rel}: Note [{title}] cited in {m.group(2)}, written in {home[0]}")
    assert not wrong, "\n".join(wrong)
    assert len(defined) > 50 and "The hot path" in defined  # the scan finds the Notes


def test_every_package_is_installed():
    # pyproject.toml lists the packages a wheel holds: a new subpackage missing there would
    # work in an editable install and be absent from the wheel
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())
                 ["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts)
             for p in (ROOT / "mdtensor").rglob("__init__.py")} | {"mdtensor.ops",
                                                                    "mdtensor.backends"}
    assert found - listed == set(), sorted(found - listed)
