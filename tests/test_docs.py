"""Every code block of README.md and docs/*.md runs as a test (issue 25 item 10).

Python blocks of one page run in order in one namespace (a page's examples build on each
other), each in a fresh namespace per page.  A statement whose trailing comment looks like
a value (``c.counts  # {'aten::exp': 1}``, ``loss.grad_fn  # <SumBackward0>``) is checked
against the ``repr`` of its value, and a ``print(...)`` followed by comment lines against
what it printed; a comment in prose (``# d loss / d w``) is left alone.  TOML blocks must
parse and name entry points the loopback plug-in declares; bash blocks must name modules
that exist (``python -m mdtensor`` is run) and scripts of the repository that exist
(``python tools/gen_stubs.py``).  Registrations a page makes are undone after it (its
libraries are destroyed).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import mdtensor as md

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_VALUE = re.compile(r"^(\{|\[|\(|<|tensor\(|[A-Z]\w*\()")


def _blocks(page: Path):
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(page.read_text())]


def _all_blocks():
    out = []
    for page in PAGES:
        for lang in sorted({lang for lang, _ in _blocks(page)}):
            out.append(pytest.param(page, lang, id=f"{page.name}-{lang or 'text'}"))
    return out


def test_every_page_has_its_blocks_collected():
    assert sum(len(_blocks(p)) for p in PAGES) >= 10
    assert all(lang in ("python", "bash", "toml") for p in PAGES for lang, _ in _blocks(p))


def _statements(code: str):
    """``(statement source, trailing comment lines)`` for each top-level statement: the
    comment on the statement's last line plus the comment lines right after it."""
    lines = code.splitlines()
    tree = ast.parse(code)
    out = []
    for k, node in enumerate(tree.body):
        end = node.end_lineno
        nxt = tree.body[k + 1].lineno - 1 if k + 1 < len(tree.body) else len(lines)
        last = lines[end - 1]
        comments = []
        if "#" in last[node.end_col_offset:]:
            comments.append(last[node.end_col_offset:].split("#", 1)[1].strip())
        for line in lines[end:nxt]:
            if line.startswith("# "):
                comments.append(line[2:])
            elif line.strip():
                break
        out.append((node, ast.get_source_segment(code, node), comments))
    return out


def _run_python(code: str, ns: dict, where: str) -> None:
    for node, src, comments in _statements(code):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and getattr(
                node.value.func, "id", None) == "print":
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(compile(ast.Module([node], []), where, "exec"), ns)
            if len(comments) > 1:  # a printed block shown as comments below the print
                assert buf.getvalue().rstrip("\n").splitlines() == comments, where
        elif isinstance(node, ast.Expr):
            value = eval(compile(ast.Expression(node.value), where, "eval"), ns)
            if comments and _VALUE.match(comments[0]):
                assert repr(value) == comments[0], f"{where}: {src} gave {value!r}"
        else:
            exec(compile(ast.Module([node], []), where, "exec"), ns)


def _cleanup(ns: dict) -> None:
    for v in ns.values():
        if isinstance(v, md.library.RegistrationHandle):
            v.remove()
    for v in ns.values():
        if isinstance(v, md.library.Library):
            v._destroy()


#: the optional packages a page's examples need (installed by .ci/run): without them the
#: page's blocks skip
_NEEDS = {"SCALE.md": ("dask.array", "distributed")}


@pytest.fixture
def on_cpu():
    """The pages show the CPU backend (``MDTENSOR_TEST_BACKEND`` changes the default) and
    Dask's own chunk size (tests on the Dask backend make it a few bytes: conftest.py)."""
    from mdtensor.tensors.device import default_device

    before = default_device()
    md.set_default_device("cpu")
    with contextlib.ExitStack() as stack:
        if "dask" in sys.modules:
            import dask.config

            default = dask.config.merge(*dask.config.defaults)["array"]["chunk-size"]
            stack.enter_context(dask.config.set({"array.chunk-size": default}))
        yield
    md.set_default_device(before)


@pytest.mark.parametrize("page,lang", _all_blocks())
def test_code_blocks_run(page, lang, on_cpu):
    for module in _NEEDS.get(page.name, ()):
        pytest.importorskip(module, reason=f"{page.name} needs {module}")
    blocks = [code for block_lang, code in _blocks(page) if block_lang == lang]
    if lang == "python":
        ns: dict = {"__name__": f"docs_{page.stem}"}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # override warnings shown
                for i, code in enumerate(blocks):
                    _run_python(code, ns, f"{page.name} python block {i + 1}")
        finally:
            _cleanup(ns)
            for name in [n for n in md.library._global_libs if n == "mylib"]:
                md.library._global_libs.pop(name)._destroy()
    elif lang == "toml":
        tomllib = pytest.importorskip("tomllib")  # Python 3.11+
        loopback = tomllib.loads(
            (ROOT / "plugins/mdtensor_loopback/pyproject.toml").read_text())
        declared = loopback["project"]["entry-points"]
        for code in blocks:
            for group, eps in tomllib.loads(code)["project"]["entry-points"].items():
                assert eps == declared[group], (page.name, group)
    else:
        for code in blocks:
            for line in code.splitlines():
                cmd = line.split("#", 1)[0].split()
                if cmd[:1] == ["python"] and len(cmd) > 1 and cmd[1].endswith(".py"):
                    assert (ROOT / cmd[1]).is_file(), line  # a script of the repository
                elif cmd[:2] == ["python", "-m"]:
                    module = cmd[2]
                    if module == "mdtensor":
                        proc = subprocess.run([sys.executable, "-m", "mdtensor"],
                                              capture_output=True, text=True, timeout=300)
                        assert proc.returncode == 0, proc.stderr[-2000:]
                    else:
                        import importlib.util

                        assert importlib.util.find_spec(module) is not None, line
