"""Write the type stubs of mdtensor's generated API, from the op catalogue.

    python tools/gen_stubs.py          # (re)write the stubs
    python tools/gen_stubs.py --check  # write nothing; exit 1 naming any stale stub

The namespace functions (``md.add``), ``md.linalg``/``md.fft`` and most of Tensor's methods,
operators and properties are bound at import (``ops/_methods.py``), so no type checker or
IDE can see them in the source.  This script imports mdtensor and writes them out:

- ``mdtensor/__init__.pyi``: every name of ``md.__all__``.  A catalogue function is typed
  from its schemas, one ``@overload`` per schema overload (``add.Tensor``, ``add.Scalar``,
  ``add.out``, ...) plus one with the torch keyword aliases (``dim=`` for ``axis=``);
  every other name is re-exported from the module that defines it, whose source the
  checkers read;
- ``mdtensor/linalg.pyi``, ``mdtensor/fft.pyi``: the extension namespaces, alike;
- ``mdtensor/_tensor_methods.pyi``: ``TensorMethods``, what is set on Tensor at import:
  catalogue methods typed from their schemas, the operators from their ops' overloads, the
  hand-written rest from ``inspect.signature`` and its annotations.  Tensor derives from it
  for type checkers only (Note [Stubs] in ``mdtensor/tensors/tensor.py``);
- ``mdtensor/_typing.pyi``: the types the stubs share: what a call accepts for each schema
  type (``Scalar``, ``IntList``, ...) and the named tuples of named returns (``max.dim`` ->
  ``MaxResult(values, indices)``).

tests/test_stubs.py checks that the files are current and that a type checker sees them.
"""

from __future__ import annotations

import argparse
import inspect
import keyword
import re
import sys
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMAND = "python tools/gen_stubs.py"
LINE_LENGTH = 100

#: Schema type -> what a call may pass (mdtensor/_typing.pyi, after ``resolution._py_type``);
#: Layout, Generator, MemoryFormat and Dimname are passed through as they are: Any.
_ARG_TYPES = {
    "Tensor": "Tensor", "Scalar": "Scalar", "int": "Int", "SymInt": "Int", "float": "Float",
    "bool": "Bool", "str": "str", "ScalarType": "DTypeLike", "Device": "DeviceLike",
}
_ALIASES = ("Bool", "DTypeLike", "DeviceLike", "Float", "Int", "IntList", "Scalar")
#: Schema type -> what a call returns.
_RETURN_TYPES = {
    "Tensor": "Tensor", "int": "int", "SymInt": "int", "float": "float", "bool": "bool",
    "str": "str", "Scalar": "bool | int | float | complex",
}
_BUILTINS = frozenset({"bool", "complex", "dict", "float", "int", "list", "object", "str",
                       "tuple", "type"})

_TYPING_STUB = '''\
from collections.abc import Sequence
from typing import Any, NamedTuple, TypeAlias

import numpy as np

from ._dtypes import DType
from .tensors.device import Device
from .tensors.tensor import Tensor

# What a call may pass for each schema type (the overload resolution's types,
# mdtensor/dispatch/resolution.py _py_type).
Bool: TypeAlias = bool | np.bool_
Int: TypeAlias = int | np.integer[Any]
Float: TypeAlias = float | np.floating[Any] | np.integer[Any]
Scalar: TypeAlias = bool | int | float | complex | np.generic
# int[] and int[N]: a sequence, or one int as in PyTorch's x.sum(0)
IntList: TypeAlias = Int | Sequence[Int]
DTypeLike: TypeAlias = DType | type | str | np.dtype[Any]
DeviceLike: TypeAlias = Device | str
'''


def _header(about: str) -> list[str]:
    return ["# Generated from mdtensor's op catalogue by tools/gen_stubs.py; do not edit.",
            f"# After adding or changing an op, run: {COMMAND}", "", f'"""{about}"""', ""]


# ---------------------------------------------------------------------------------------
# Signatures: a small model, rendered as stub text


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: bool = False
    kind: str = "pos"  # "posonly", "pos", "var" (*args), "kw", "varkw" (**kwargs)


@dataclass(frozen=True)
class Sig:
    params: tuple[Param, ...]
    ret: str


def _render_params(sig: Sig, method: bool) -> list[str]:
    out = ["self"] if method else []
    star = False
    for i, p in enumerate(sig.params):
        if p.kind == "kw" and not star:
            out.append("*")
        star = star or p.kind in ("var", "kw")
        prefix = {"var": "*", "varkw": "**"}.get(p.kind, "")
        out.append(f"{prefix}{p.name}: {p.type}{' = ...' if p.default else ''}")
        last = i + 1 == len(sig.params) or sig.params[i + 1].kind != "posonly"
        if p.kind == "posonly" and last:
            out.append("/")
    return out


def _render_def(name: str, sig: Sig, *, method: bool = False,
                overload: bool = False, spell=None) -> list[str]:
    """The stub lines of one signature; ``spell`` (a ``Spelling``) is applied before the
    line length is measured."""
    spell = spell or (lambda text: text)
    indent = "    " if method else ""
    params = [spell(p) for p in _render_params(sig, method)]
    tail = spell(f" -> {sig.ret}: ...")
    head = [f"{indent}@overload"] if overload else []
    one = f"{indent}def {name}({', '.join(params)}){tail}"
    if len(one) <= LINE_LENGTH:
        return [*head, one]
    return [*head, f"{indent}def {name}(", *[f"{indent}    {p}," for p in params],
            f"{indent}){tail}"]


def _render_function(name: str, sigs, *, method: bool = False) -> list[str]:
    """A def, or one ``@overload`` per signature where there are several."""
    return [line for sig in sigs
            for line in _render_def(name, sig, method=method, overload=len(sigs) > 1)]


class Spelling:
    """How one stub spells builtin types: ``builtins.float`` where the stub (or the class
    being written) has a name ``float`` of its own (``md.float`` is a dtype, and a method
    ``bool`` would shadow the type inside a class body); a method's own name (``def
    bool(``) stays as it is."""

    def __init__(self, own_names):
        self.shadowed = _BUILTINS & set(own_names)
        names = "|".join(sorted(self.shadowed))
        self._re = re.compile(r"(?<![\w.])(?<!def )(" + names + r")\b") if self.shadowed \
            else None

    def __call__(self, text: str) -> str:
        return self._re.sub(r"builtins.\1", text) if self._re else text


# ---------------------------------------------------------------------------------------
# Catalogue signatures


def _arg_type(t) -> str:
    if t.base == "Tensor":
        elem = "Tensor | None" if t.elem_optional else "Tensor"
    else:
        elem = _ARG_TYPES.get(t.base, "Any")
    if t.is_list:
        text = "IntList" if t.base in ("int", "SymInt") else f"Sequence[{elem}]"
    else:
        text = elem
    return f"{text} | None" if t.optional and text != "Any" else text


def _return_type(t) -> str:
    if t.is_list:
        return f"tuple[{_return_type(replace(t, is_list=False, optional=t.elem_optional))}, ...]"
    text = _RETURN_TYPES.get(t.base, "Any")
    return f"{text} | None" if t.optional and text != "Any" else text


class Catalogue:
    """Stub signatures of the catalogue's functions, methods and operators."""

    def __init__(self, md):
        #: the declaration of each packet (``'aten::add'``); in-place packets have none
        self.decls = {d.overloads[0].overloadpacket.name: d
                      for d in md.ops.CATALOGUE.values() if d.overloads}
        self.aten = md.ops.aten
        #: named-tuple title -> its fields, for the named returns met so far
        self.results: dict[str, tuple] = {}

    def _returns(self, schema) -> str:
        rets = schema.returns
        if not rets:
            return "None"
        if len(rets) == 1 and not schema.returns_tuple:
            return _return_type(rets[0].type)
        if not all(r.name for r in rets):
            return f"tuple[{', '.join(_return_type(r.type) for r in rets)}]"
        # the named tuple ops/_impl_kernels.py _result_tuple makes: max.dim -> MaxResult
        title = "".join(p.capitalize() for p in schema.name.split("_")) + "Result"
        fields = tuple((r.name, _return_type(r.type)) for r in rets)
        if self.results.setdefault(title, fields) != fields:
            raise ValueError(f"gen_stubs: two different named results are both called "
                             f"{title} ({schema})")
        return title

    def signatures(self, packet, *, only=None, method=False, aliases=None) -> list[Sig]:
        """A Sig per overload of ``packet`` (those named in ``only`` if given) and, where
        the packet has torch keyword aliases, one with them in place of the names they
        stand for; identical ones once.  A method's Sig leaves out the tensor itself (the
        first positional argument) and the overloads where that cannot be a Tensor."""
        sigs = []
        for overload in packet.overloads():
            if only is not None and overload not in only:
                continue
            schema = getattr(packet, overload).schema
            args = list(schema.arguments)
            if method:
                if not args or args[0].kwarg_only or not args[0].type.is_tensor:
                    continue
                args = args[1:]
            bad = [a.name for a in args if keyword.iskeyword(a.name)]
            if bad:
                raise ValueError(f"gen_stubs: {schema} has an argument called {bad[0]!r}")
            params = tuple(Param(a.name, _arg_type(a.type), a.has_default,
                                 "kw" if a.kwarg_only else "pos") for a in args)
            sig = Sig(params, self._returns(schema))
            sigs.append(sig)
            names = {p.name for p in params}
            renamed = {v: k for k, v in (aliases or {}).items()
                       if v in names and k not in names}
            if renamed:
                sigs.append(Sig(tuple(replace(p, name=renamed.get(p.name, p.name))
                                      for p in params), sig.ret))
        return list(dict.fromkeys(sigs))

    def function(self, name: str, packet) -> list[str]:
        decl = self.decls.get(packet.name)
        sigs = self.signatures(packet, aliases=decl and decl.kwarg_aliases)
        if decl is not None and decl.star_args:
            sigs = [form for sig in sigs for form in _star_forms(sig)]
        return _render_function(name, sigs)

    def method(self, name: str, packet, decl) -> list[str]:
        only = set(decl.method_overloads) if decl.method_overloads and \
            not name.endswith("_") else None  # Note [Torch methods] in ops/_methods.py
        sigs = self.signatures(packet, only=only, method=True, aliases=decl.kwarg_aliases)
        if decl.varargs:  # x.view(2, 3) as well as x.view((2, 3)) (ops/_methods._method)
            first = next((s.params[0] for s in sigs
                          if s.params and s.params[0].type.startswith("IntList")), None)
            if first is not None:
                sigs.append(Sig((Param(first.name, "Int", kind="var"),), sigs[0].ret))
        return _render_function(name, sigs, method=True)

    def operator(self, dunder: str, op_name: str, kind: str) -> list[str]:
        """A Python operator: ``other`` takes what the op's overloads take beside a Tensor
        (ops/_methods.py OPERATORS)."""
        packet = getattr(self.aten, op_name)
        if kind == "unary":
            return [f"    def {dunder}(self) -> Tensor: ..."]
        mine = 1 if kind == "reflected" else 0  # the position of the tensor itself
        other = []
        for overload in packet.overloads():
            schema = getattr(packet, overload).schema
            args = [a for a in schema.arguments if not a.kwarg_only]
            if not schema.is_out and len(args) >= 2 and args[mine].type.is_tensor:
                other.append(_arg_type(args[1 - mine].type))
        other = " | ".join(dict.fromkeys(other)) or "Any"
        # Note: __eq__ and __ne__ return a Tensor, as NumPy's and PyTorch's do
        ignore = "  # type: ignore[override]" if dunder in ("__eq__", "__ne__") else ""
        return [f"    def {dunder}(self, other: {other}) -> Tensor: ...{ignore}"]


def _star_forms(sig: Sig) -> list[Sig]:
    """An op taking a ``Tensor[]`` as ``f(*tensors)`` or ``f(tensors)`` (ops/_methods._star):
    the arguments before the list positional-only, those after it keyword-only."""
    i = next(k for k, p in enumerate(sig.params) if p.type.startswith("Sequence[Tensor"))
    head = tuple(replace(p, kind="posonly") for p in sig.params[:i])
    tail = tuple(replace(p, kind="kw") for p in sig.params[i + 1:])
    lst = sig.params[i]
    elem = lst.type[len("Sequence["):-1]
    return [Sig((*head, replace(lst, type=elem, kind="var"), *tail), sig.ret),
            Sig((*head, replace(lst, kind="posonly"), *tail), sig.ret)]


# ---------------------------------------------------------------------------------------
# Hand-written functions: inspect.signature, the annotations rendered as stub text


class Annotations:
    """Renders the annotations of hand-written functions; collects the imports they need.

    An annotation that does not evaluate, or names a type this cannot spell, is ``Any``."""

    def __init__(self, known: dict, imports: Imports):
        self.known = known  # name -> class: the mdtensor types, imported or not at runtime
        self.imports = imports

    def render(self, hint) -> str:
        if hint is None or hint is type(None):
            return "None"
        if hint is typing.Any:
            return "Any"
        origin = typing.get_origin(hint)
        if origin is typing.Union or origin is types.UnionType:
            return " | ".join(self.render(a) for a in typing.get_args(hint))
        if origin is not None:
            args = typing.get_args(hint)
            head = self.render(origin)
            if head == "Any":
                return head
            if origin is Callable and args and args[0] is not Ellipsis:
                params = ", ".join(self.render(a) for a in args[0])
                return f"{head}[[{params}], {self.render(args[1])}]"
            rendered = ["..." if a is Ellipsis else self.render(a) for a in args]
            return f"{head}[{', '.join(rendered)}]" if args else head
        if not isinstance(hint, type):
            return "Any"
        module = hint.__module__
        if module == "builtins":
            return hint.__qualname__
        if module == "collections.abc" or (module.startswith("mdtensor")
                                           and "." not in hint.__qualname__):
            self.imports.add(module, hint.__name__)
            return hint.__name__
        return "Any"

    def evaluate(self, fn) -> dict:
        ns = {**self.known, **getattr(fn, "__globals__", {})}
        out = {}
        for name, text in getattr(fn, "__annotations__", {}).items():
            try:
                out[name] = eval(text, ns) if isinstance(text, str) else text  # noqa: S307
            except Exception:  # a name imported for type checkers only: Any
                pass
        return out

    def signature(self, fn, *, method: bool) -> Sig:
        kinds = {inspect.Parameter.POSITIONAL_ONLY: "posonly",
                 inspect.Parameter.POSITIONAL_OR_KEYWORD: "pos",
                 inspect.Parameter.VAR_POSITIONAL: "var",
                 inspect.Parameter.KEYWORD_ONLY: "kw",
                 inspect.Parameter.VAR_KEYWORD: "varkw"}
        hints = self.evaluate(fn)
        params = list(inspect.signature(fn).parameters.values())[1 if method else 0:]
        return Sig(tuple(Param(p.name, self.render(hints.get(p.name, typing.Any)),
                               p.default is not p.empty, kinds[p.kind]) for p in params),
                   self.render(hints.get("return", typing.Any)))


# ---------------------------------------------------------------------------------------
# Imports, ordered as ruff's isort orders them (the stubs pass `ruff check`)


def _natural(text: str):
    return [int(c) if c.isdigit() else c for c in re.split(r"(\d+)", text.lower())]


def _member_key(name: str):
    kind = 0 if len(name) > 1 and name.isupper() else 1 if name[:1].isupper() else 2
    return (kind, _natural(name), name)


class Imports:
    """The imports of one stub: ``add(module)`` or ``add(module, name[, as_name])``; an
    mdtensor module is imported relatively (every stub sits in ``mdtensor/``)."""

    _STDLIB = ("builtins", "collections", "typing")

    def __init__(self):
        self.modules: set[str] = set()
        self.names: set[tuple[str, str, str | None]] = set()

    def add(self, module: str, name: str | None = None, as_name: str | None = None):
        if module == "mdtensor" or module.startswith("mdtensor."):
            module = "." + module[len("mdtensor."):] if "." in module else "."
        if name is None:
            self.modules.add(module)
        else:
            self.names.add((module, name, as_name))

    def _section(self, module: str) -> int:
        """0: the standard library, 1: third-party, 2: mdtensor (relative)."""
        if module.startswith("."):
            return 2
        return 0 if module.split(".")[0] in self._STDLIB else 1

    def lines(self) -> list[str]:
        out: list[str] = []
        for section in range(3):
            plain = [f"import {m}" for m in sorted(self.modules, key=_natural)
                     if self._section(m) == section]
            froms = []
            for module in sorted({m for m, _, _ in self.names if self._section(m) == section},
                                 key=_natural):
                names = [(n, a) for m, n, a in self.names if m == module]
                together = sorted((n for n, a in names if a is None), key=_member_key)
                if together:
                    froms.append(_from(module, together))
                for n, a in sorted(((n, a) for n, a in names if a is not None),
                                   key=lambda na: (_member_key(na[0]), _member_key(na[1]))):
                    froms.append(f"from {module} import {n} as {a}")
            if plain or froms:
                out += [*plain, *froms, ""]
        return out


def _from(module: str, names) -> str:
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= LINE_LENGTH:
        return line
    return "\n".join([f"from {module} import (", *[f"    {n}," for n in names], ")"])


def _uses(text: str, word: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(word)}\b", text) is not None


def _finish(lines, body: list[str], imports: Imports, results) -> str:
    """The stub: its header ``lines``, the imports ``body`` needs, then ``body``."""
    text = "\n".join(body)
    if "builtins." in text:
        imports.add("builtins")
    if _uses(text, "Sequence"):
        imports.add("collections.abc", "Sequence")
    for name in ("Any", "overload"):
        if _uses(text, name):
            imports.add("typing", name)
    for name in (*_ALIASES, *results):
        if _uses(text, name):
            imports.add("mdtensor._typing", name)
    return "\n".join([*lines, *imports.lines(), *body]).rstrip("\n") + "\n"


# ---------------------------------------------------------------------------------------
# The stubs


class Generator:
    def __init__(self):
        from mdtensor.ops._methods import OPERATORS

        import mdtensor as md
        from mdtensor.tensors.tensor import Tensor

        self.md = md
        self.Tensor = Tensor
        self.operators = OPERATORS
        self.catalogue = Catalogue(md)
        #: for annotations naming a type their module imports for type checkers only
        self.known = {"Tensor": Tensor, "Device": md.Device, "DType": md.DType}

    def files(self) -> dict[str, str]:
        """Every stub: its path in the repository -> its text."""
        out = {"mdtensor/__init__.pyi": self.namespace(self.md, extra=(
                   "__version__: str", "__array_api_version__: str")),
               "mdtensor/linalg.pyi": self.namespace(self.md.linalg),
               "mdtensor/fft.pyi": self.namespace(self.md.fft),
               "mdtensor/_tensor_methods.pyi": self.tensor_methods()}
        out["mdtensor/_typing.pyi"] = self.shared_types()  # last: it has the results met above
        return dict(sorted(out.items()))

    # -- namespaces -----------------------------------------------------------------------
    def namespace(self, module, extra=()) -> str:
        """A module's stub: catalogue functions typed from their schemas, the rest
        re-exported from where it is defined."""
        spell = Spelling(module.__all__)
        imports = Imports()
        body: list[str] = []
        for name in sorted(module.__all__):
            value = getattr(module, name)
            packet = getattr(value, "op", None)  # md.add.op is md.ops.aten.add
            if isinstance(packet, type(self.md.ops.aten.add)):
                body += ["", *map(spell, self.catalogue.function(name, packet))]
            else:
                imports.add(*self._home(module, name, value), name)
        if _uses("\n".join(body), "Tensor") and "Tensor" not in module.__all__:
            imports.add("mdtensor.tensors.tensor", "Tensor")
        all_lines = ["__all__ = [", *[f'    "{n}",' for n in sorted(module.__all__)], "]"]
        doc = module.__doc__.strip().splitlines()[0]
        return _finish(_header(doc), [*all_lines, *([""] if extra else []), *extra, *body],
                       imports, self.catalogue.results)

    def _home(self, module, name: str, value) -> tuple[str, str]:
        """``(module, attribute)`` that binds ``value``, a name of ``module`` that is not an
        op: a submodule, a class or function where it is defined, an object (a dtype, a
        constant) in the mdtensor module that lists it in ``__all__`` (by its own name where
        one does: ``float64``; else by the first: ``md.double`` is ``float64``)."""
        if isinstance(value, types.ModuleType):
            return tuple(value.__name__.rsplit(".", 1))
        home = getattr(value, "__module__", None)
        if isinstance(value, (type, types.FunctionType)) and home and \
                getattr(sys.modules.get(home), value.__name__, None) is value:
            return home, value.__name__
        candidates = [(0 if attr == name else 1, mod_name, attr)
                      for mod_name, mod in sorted(sys.modules.items())
                      if mod_name.startswith("mdtensor.") and mod is not module
                      for attr in getattr(mod, "__all__", ())
                      if getattr(mod, attr, None) is value]
        if not candidates:
            raise ValueError(f"gen_stubs: cannot tell where {module.__name__}.{name} is "
                             f"defined; list it in its module's __all__")
        _, mod_name, attr = min(candidates)
        return mod_name, attr

    # -- Tensor ---------------------------------------------------------------------------
    def tensor_members(self) -> list[str]:
        """Tensor's public attributes (and dunders) that are set at import: everything but
        what the class body in mdtensor/tensors/tensor.py writes (the checkers read that)."""
        out = []
        for name, value in vars(self.Tensor).items():
            private = name.startswith("_") and not (name.startswith("__")
                                                    and name.endswith("__"))
            fn = value.fget if isinstance(value, property) else value
            fn = getattr(fn, "__func__", fn)  # a staticmethod's function
            in_body = getattr(fn, "__qualname__", "").startswith("Tensor.") and \
                getattr(fn, "__module__", None) == self.Tensor.__module__
            if not private and not in_body and callable(fn):
                out.append(name)
        return sorted(out)

    def tensor_methods(self) -> str:
        methods = {}  # method name -> (packet, decl)
        for decl in self.catalogue.decls.values():
            packet = decl.overloads[0].overloadpacket
            for m in decl.methods if packet.name.startswith("aten::") else ():
                inplace = decl.inplace[0].overloadpacket if decl.inplace else None
                if m.endswith("_"):  # an in-place method only (copy_)
                    methods[m] = (inplace, decl)
                    continue
                methods[m] = (packet, decl)
                if inplace is not None:
                    methods[m + "_"] = (inplace, decl)
        members = self.tensor_members()
        spell = Spelling(members)
        imports = Imports()
        imports.add("mdtensor.tensors.tensor", "Tensor")
        annotations = Annotations(self.known, imports)
        body = ["class TensorMethods:"]
        for name in members:
            value = vars(self.Tensor)[name]
            if name in self.operators:
                lines = self.catalogue.operator(name, *self.operators[name])
            elif name in methods:
                lines = self.catalogue.method(name, *methods[name])
            elif isinstance(value, property):
                sig = annotations.signature(value.fget, method=True)
                lines = ["    @property", f"    def {name}(self) -> {sig.ret}: ..."]
            else:
                lines = _render_def(name, annotations.signature(value, method=True),
                                    method=True, spell=spell)
            body += map(spell, lines)
        doc = ("What mdtensor sets on Tensor at import: Tensor's base class for type "
               "checkers\n(Note [Stubs] in mdtensor/tensors/tensor.py).")
        return _finish(_header(doc), body, imports, self.catalogue.results)

    def shared_types(self) -> str:
        lines = [*_header("Types the generated stubs share (a stub-only module)."),
                 _TYPING_STUB.rstrip("\n")]
        for title, fields in sorted(self.catalogue.results.items()):
            lines += ["", f"class {title}(NamedTuple):",
                      *[f"    {name}: {t}" for name, t in fields]]
        return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming any stub that is out of date")
    args = parser.parse_args(argv)
    files = Generator().files()
    stale = [path for path, text in files.items()
             if not (ROOT / path).exists() or (ROOT / path).read_text() != text]
    for path in stale:
        if args.check:
            print(f"{path} is out of date; run: {COMMAND}", file=sys.stderr)
        else:
            (ROOT / path).write_text(files[path])
            print(f"wrote {path}")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
