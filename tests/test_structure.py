"""The code's structure, checked (issue 33): what the built-in layers, the catalogue and the
backends use of the operator registry is the public operator API (Note [The operator API]
in mdtensor/_ops.py), the one third-party code gets."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the modules that own the registry's private state: operators and their tables, and
#: overload resolution (which fills the packets' resolution caches)
DISPATCHER = {"mdtensor/_ops.py", "mdtensor/_frontend.py"}

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
            if rel not in DISPATCHER and ".venv" not in rel:
                yield rel, path.read_text()


def test_no_module_reads_the_registrys_privates():
    found = [f"{rel}:{n}: {line.strip()}"
             for rel, text in _sources()
             for n, line in enumerate(text.splitlines(), 1)
             if _PRIVATE.search(line)]
    assert not found, "private operator state read outside the dispatcher:\n" + "\n".join(found)


def test_the_check_finds_private_access():
    # the pattern is not vacuous: the dispatcher itself uses these names
    text = (ROOT / "mdtensor/_ops.py").read_text()
    assert len(_PRIVATE.findall(text)) > 20
    assert _PRIVATE.search("stack = op._kernels.get(key)")
    assert not _PRIVATE.search("stack = op.kernels_for(key)")
