"""The type stubs of the generated API (tools/gen_stubs.py): current, complete, and seen by
a type checker on a user's script.  Also: every module declares ``__all__``."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mdtensor as md

ROOT = Path(__file__).resolve().parent.parent
STUBS = ROOT / "mdtensor"


def _module_names(tree: ast.Module) -> set[str]:
    """The names a module (or stub, or class body) binds at its top level, in ``if`` and
    ``try`` blocks too."""
    out = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {a.asname or a.name.split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                     *[s for h in getattr(node, "handlers", []) for s in h.body]]
    return out


def _class_names(tree: ast.Module, cls: str) -> set[str]:
    (node,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    return _module_names(ast.Module(node.body, []))


def _assigns_all(node) -> bool:
    targets = node.targets if isinstance(node, ast.Assign) else \
        [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(getattr(t, "id", None) == "__all__" for t in targets)


def _literal_all(tree: ast.Module):
    """A module's ``__all__`` if it is a literal list, else None."""
    for node in tree.body:
        if _assigns_all(node):
            try:
                return ast.literal_eval(node.value)
            except ValueError:  # computed: sorted(_NAMES)
                return None
    return None


def test_the_stubs_are_current():
    # a fresh interpreter: the tests register ops of their own into this one
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, (
        "the type stubs do not match the op catalogue; regenerate them with "
        f"`python tools/gen_stubs.py`:\n{proc.stderr}")


def test_every_stub_is_generated():
    """No stub left behind by a renamed module: each .pyi is one the script writes."""
    text = (ROOT / "tools" / "gen_stubs.py").read_text()
    for path in STUBS.glob("*.pyi"):
        assert f'"mdtensor/{path.name}"' in text, f"{path} is not written by gen_stubs.py"
        assert path.read_text().startswith("# Generated from mdtensor's op catalogue by "
                                           "tools/gen_stubs.py; do not edit.")


@pytest.mark.parametrize("module,stub", [(md, "__init__.pyi"), (md.linalg, "linalg.pyi"),
                                         (md.fft, "fft.pyi")])
def test_a_namespace_stub_names_every_public_name(module, stub):
    tree = ast.parse((STUBS / stub).read_text())
    assert _literal_all(tree) == sorted(module.__all__)
    assert set(module.__all__) <= _module_names(tree)


def test_the_stubs_name_every_tensor_attribute():
    """What type checkers see of Tensor, the class body in tensors/tensor.py plus the generated
    base class, has every public attribute (and dunder) Tensor has at runtime."""
    seen = _class_names(ast.parse((STUBS / "tensors" / "tensor.py").read_text()), "Tensor") \
        | _class_names(ast.parse((STUBS / "_tensor_methods.pyi").read_text()), "TensorMethods")
    machinery = {"__module__", "__doc__", "__slots__", "__weakref__", "__dict__"}
    public = {n for n in vars(md.Tensor) if not n.startswith("_") or (
        n.startswith("__") and n.endswith("__") and n not in machinery)}
    assert public - seen == set()
    assert {"add", "add_", "sum", "__add__", "__radd__", "__iadd__", "__getitem__",
            "__setitem__", "__eq__", "__lt__", "T", "mT", "grad", "backward", "to"} \
        <= seen & public


# ---------------------------------------------------------------------------------------
# A type checker on a user's script

_GOOD = '''\
import mdtensor as md

x = md.ones((2, 3), requires_grad=True)
y = md.add(x, 1).sum(axis=0)
z = x.sum(dim=1, keepdim=True) * 2 + x[0]
g = x.grad
inv = md.linalg.inv(md.eye(3, dtype=md.float64))
values, indices = md.max(x, 0)
w = (x @ x.mT).exp_()
h = md.fft.fft(x, n=4)
parts = md.split(x, 1, dim=0)
v = x.view(3, 2).to("cpu")
md.meshgrid(x[0], x[1], indexing="ij")
y.backward()
with md.no_grad():
    x -= 0.1 * x
reveal_type(y)
reveal_type(g)
reveal_type(md.max(x, 0))
reveal_type(parts)
'''

_BAD = '''\
import mdtensor as md

x = md.ones((2, 3))
md.add(x, "a", "b", "c")
md.nonexistent(x)
x.nosuchmethod()
md.linalg.inv(x, 2)
'''


def _installed_layout(tmp_path: Path) -> Path:
    """The package as a wheel installs it (``ops/`` and ``backends/`` inside
    ``mdtensor/``), made of links: the editable install's import hook is invisible to
    type checkers."""
    site = tmp_path / "site"
    pkg = site / "mdtensor"
    pkg.mkdir(parents=True)
    for entry in STUBS.iterdir():
        if entry.name != "__pycache__":
            (pkg / entry.name).symlink_to(entry)
    (pkg / "ops").symlink_to(ROOT / "ops")
    (pkg / "backends").symlink_to(ROOT / "backends")
    return site


def test_a_type_checker_sees_the_api(tmp_path):
    pytest.importorskip("mypy", reason='mypy is in the test extra: pip install -e ".[test]"')
    site = _installed_layout(tmp_path)
    (tmp_path / "good.py").write_text(_GOOD)
    (tmp_path / "bad.py").write_text(_BAD)
    env = {**os.environ, "MYPYPATH": str(site)}
    # the stubs are checked too: they must have no error of their own
    modules = ["mdtensor", "mdtensor._tensor_methods", "mdtensor._typing", "mdtensor.linalg",
               "mdtensor.fft", "good", "bad"]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-error-summary",
         "--cache-dir", str(tmp_path / "cache"), *[a for m in modules for a in ("-m", m)]],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out  # 1: errors found (2 would be mypy's own failure)
    errors = re.findall(r"^(\S+?):(\d+): error: (.*)$", out, re.M)
    assert [e for e in errors if not e[0].endswith("bad.py")] == [], out
    assert {int(line) for _, line, _ in errors} == {4, 5, 6, 7}, out
    revealed = re.findall(r"good\.py:\d+: note: Revealed type is \"(.*)\"", out)
    assert revealed[0] == "mdtensor.tensors.tensor.Tensor", out
    assert revealed[1] in ("mdtensor.tensors.tensor.Tensor | None",  # older mypy: Union[...]
                           "Union[mdtensor.tensors.tensor.Tensor, None]"), out
    assert "mdtensor._typing.MaxResult" in revealed[2], out
    assert revealed[3].endswith("tuple[mdtensor.tensors.tensor.Tensor, ...]"), out


# ---------------------------------------------------------------------------------------
# __all__


def _modules():
    for folder in ("mdtensor", "ops", "backends"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.name != "__main__.py":
                yield path


@pytest.mark.parametrize("path", list(_modules()), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_declares_all(path):
    tree = ast.parse(path.read_text())
    assert any(map(_assigns_all, tree.body)), f"{path.relative_to(ROOT)} has no __all__"
    names = _literal_all(tree)
    if names is not None:  # a literal list: each name is bound in the module
        assert set(names) - _module_names(tree) == set(), path
