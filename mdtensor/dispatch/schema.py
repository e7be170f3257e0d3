"""Operator schemas: the model and the parser.

The language is PyTorch's (native_functions.yaml)::

    add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor
    add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)
    split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]
    max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)

``parse_schema(text)`` returns a frozen ``FunctionSchema``; ``str(schema)`` prints the
canonical text, and ``parse_schema(str(s)) == s``.  A malformed schema raises
``SchemaParseError`` quoting the schema with a caret under the offending character.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, field

__all__ = [
    "NO_DEFAULT",
    "AliasInfo",
    "Argument",
    "FunctionSchema",
    "Return",
    "SchemaParseError",
    "SchemaType",
    "Symbol",
    "parse_schema",
]

BASE_TYPES = frozenset({
    "Tensor", "Scalar", "int", "SymInt", "float", "bool", "str", "ScalarType", "Device",
    "Layout", "Generator", "MemoryFormat", "Dimname",
    # Any: an arbitrary Python object (an index key, a pytree); mdtensor's extension.
    "Any",
})


class SchemaParseError(ValueError):
    """A malformed schema; the message shows the schema and a caret at the problem."""

    def __init__(self, message: str, text: str, pos: int):
        self.text = text
        self.pos = pos
        super().__init__(f"{message}\n  {text}\n  {' ' * pos}^")


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self):
        return "NO_DEFAULT"


#: The default of an argument that has none.
NO_DEFAULT = _NoDefault()


@dataclass(frozen=True)
class Symbol:
    """A bare-identifier default such as ``contiguous_format`` or ``long``."""

    name: str

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class AliasInfo:
    """An alias annotation: ``(a)``, ``(a!)`` or ``(a -> *)``."""

    before: tuple[str, ...]
    after: tuple[str, ...]
    is_write: bool

    def __str__(self) -> str:
        bang = "!" if self.is_write else ""
        b = "|".join(self.before)
        if self.after != self.before:
            return f"({b}{bang} -> {'|'.join(self.after)})"
        return f"({b}{bang})"


@dataclass(frozen=True)
class SchemaType:
    """An argument or return type: base name, list-ness, optionality, alias annotation."""

    base: str
    optional: bool = False
    is_list: bool = False
    list_size: int | None = None
    elem_optional: bool = False
    alias: AliasInfo | None = None

    @property
    def is_tensor(self) -> bool:
        return self.base == "Tensor" and not self.is_list

    @property
    def is_tensor_list(self) -> bool:
        return self.base == "Tensor" and self.is_list

    @property
    def is_tensor_like(self) -> bool:
        return self.base == "Tensor"

    def __str__(self) -> str:
        s = self.base + (str(self.alias) if self.alias else "")
        if self.is_list:
            if self.elem_optional:
                s += "?"
            s += f"[{self.list_size}]" if self.list_size is not None else "[]"
        if self.optional:
            s += "?"
        return s


def _default_key(v):
    """Equality key for defaults: NaN equals NaN, 1 and 1.0 and True stay distinct."""
    if isinstance(v, float) and math.isnan(v):
        return ("nan",)
    if isinstance(v, (list, tuple)):
        return ("list", tuple(_default_key(x) for x in v))
    return (type(v).__name__, v)


@dataclass(frozen=True)
class Argument:
    """One argument of a schema."""

    name: str
    type: SchemaType
    default: object = field(default=NO_DEFAULT, compare=False)
    kwarg_only: bool = False
    _default_key: tuple = field(default=(), repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_default_key", _default_key(self.default)
                           if self.default is not NO_DEFAULT else ())

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    @property
    def alias(self) -> AliasInfo | None:
        return self.type.alias

    @functools.cached_property
    def is_mutable(self) -> bool:
        return self.type.alias is not None and self.type.alias.is_write

    def __str__(self) -> str:
        s = f"{self.type} {self.name}"
        if self.has_default:
            s += "=" + _format_default(self.default)
        return s


@dataclass(frozen=True)
class Return:
    """One return value: its type and optional name."""

    name: str | None
    type: SchemaType

    def __str__(self) -> str:
        return f"{self.type} {self.name}" if self.name else str(self.type)


@dataclass(frozen=True)
class FunctionSchema:
    """A parsed operator schema and the facts derived from it."""

    namespace: str
    name: str
    overload_name: str
    arguments: tuple[Argument, ...]
    returns: tuple[Return, ...]
    returns_tuple: bool = False

    @property
    def qualified_name(self) -> str:
        """``'aten::add'``"""
        return f"{self.namespace}::{self.name}"

    @property
    def full_name(self) -> str:
        """``'aten::add.Tensor'`` (no dot for the default overload)."""
        ov = f".{self.overload_name}" if self.overload_name else ""
        return f"{self.namespace}::{self.name}{ov}"

    overload_qualified_name = full_name

    @functools.cached_property
    def binding(self) -> tuple[tuple[str, bool, bool, object], ...]:
        """``(name, kwarg_only, has_default, default)`` per argument, the default as a call
        receives it (a symbolic default such as ``dtype=None``'s reads None)."""
        return tuple((a.name, a.kwarg_only, a.default is not NO_DEFAULT,
                      None if isinstance(a.default, Symbol) else a.default)
                     for a in self.arguments)

    @functools.cached_property
    def signature(self):
        """The Python signature of a call, for ``inspect.signature`` of the op (defaults
        that are not plain values read None)."""
        import inspect

        params = []
        for a in self.arguments:
            kind = (inspect.Parameter.KEYWORD_ONLY if a.kwarg_only
                    else inspect.Parameter.POSITIONAL_OR_KEYWORD)
            default = inspect.Parameter.empty
            if a.has_default:
                d = a.default
                default = d if isinstance(d, (bool, int, float, str, type(None), list)) else None
            params.append(inspect.Parameter(a.name, kind, default=default))
        return inspect.Signature(params)

    def _bound(self, args, kwargs):
        """``(name, kwarg_only, value)`` of each argument given or defaulted, in order."""
        n = len(args)
        for i, (name, kwarg_only, has_default, default) in enumerate(self.binding):
            if not kwarg_only and i < n:
                yield name, kwarg_only, args[i]
            elif name in kwargs:
                yield name, kwarg_only, kwargs[name]
            elif has_default:
                yield name, kwarg_only, default

    def bind(self, args, kwargs) -> dict:
        """The call's arguments by name, defaults filled in (an argument without a default
        that was not given is left out)."""
        return {name: value for name, _, value in self._bound(args, kwargs)}

    def normalize(self, args, kwargs) -> tuple[tuple, dict]:
        """``(args, kwargs)`` in schema form: every positional parameter given or defaulted
        positionally, every keyword-only one by keyword, defaults filled in."""
        pos, kw = [], {}
        for name, kwarg_only, value in self._bound(args, kwargs):
            if kwarg_only:
                kw[name] = value
            else:
                pos.append(value)
        return tuple(pos), kw

    @functools.cached_property
    def positional(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if not a.kwarg_only)

    @functools.cached_property
    def kwarg_only(self) -> tuple[Argument, ...]:
        return tuple(a for a in self.arguments if a.kwarg_only)

    @functools.cached_property
    def tensor_arg_indices(self) -> tuple[int, ...]:
        return tuple(i for i, a in enumerate(self.arguments) if a.type.is_tensor_like)

    @functools.cached_property
    def mutated_args(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.arguments if a.is_mutable)

    @functools.cached_property
    def is_mutable(self) -> bool:
        return any(a.is_mutable for a in self.arguments)

    @functools.cached_property
    def is_inplace(self) -> bool:
        if not (self.name.endswith("_") and not self.name.endswith("__")):
            return False
        if not self.arguments or not self.arguments[0].is_mutable:
            return False
        return self.returns_alias_of(0) == self.arguments[0].name if self.returns else True

    @functools.cached_property
    def is_out(self) -> bool:
        return any(a.kwarg_only and a.is_mutable and a.type.is_tensor_like
                   for a in self.arguments)

    @functools.cached_property
    def is_view(self) -> bool:
        if self.is_mutable:
            return False
        return any(r.type.alias is not None and not r.type.alias.is_write
                   and self.returns_alias_of(i) is not None
                   for i, r in enumerate(self.returns))

    @property
    def base_name(self) -> str:
        return self.name[:-1] if self.is_inplace else self.name

    def returns_alias_of(self, i: int) -> str | None:
        """The argument whose alias set return ``i`` shares, or None."""
        alias = self.returns[i].type.alias
        if alias is None:
            return None
        for a in self.arguments:
            if a.type.alias is not None and set(a.type.alias.before) & set(alias.before):
                return a.name
        return None

    def __str__(self) -> str:
        ns = "" if self.namespace == "aten" else f"{self.namespace}::"
        ov = f".{self.overload_name}" if self.overload_name else ""
        parts = []
        star = False
        for a in self.arguments:
            if a.kwarg_only and not star:
                parts.append("*")
                star = True
            parts.append(str(a))
        rets = ", ".join(str(r) for r in self.returns)
        if self.returns_tuple or len(self.returns) != 1:
            rets = f"({rets})"
        return f"{ns}{self.name}{ov}({', '.join(parts)}) -> {rets}"


def _format_default(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_format_default(x) for x in v) + "]"
    return str(v)


# ---------------------------------------------------------------------------------------
# The parser: a small recursive-descent parser over the text with one position.

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"-?(?:\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+|\.\d+|\d+)")

# Note [Schema limits]
# ~~~~~~~~~~~~~~~~~~~~
# Every malformed schema is a SchemaParseError with a caret, never another exception: the
# parser recurses into list defaults (a deep nesting was a RecursionError) and converts
# number literals with int() (5,000 digits were Python's ValueError about its digit
# limit).  So a schema is at most MAX_SCHEMA_LENGTH characters, a list default nests at most
# MAX_DEFAULT_DEPTH deep, a number literal has at most MAX_NUMBER_LENGTH characters, and
# anything else that escapes the parser is reported at the position it reached.
MAX_SCHEMA_LENGTH = 10_000
MAX_DEFAULT_DEPTH = 16
MAX_NUMBER_LENGTH = 64


class _Parser:
    def __init__(self, text: str, default_namespace: str):
        self.text = text
        self.pos = 0
        self.ns = default_namespace
        self.depth = 0  # of list defaults (Note [Schema limits])

    def error(self, msg: str, pos: int | None = None) -> SchemaParseError:
        return SchemaParseError(msg, self.text, self.pos if pos is None else pos)

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t\n":
            self.pos += 1

    def peek(self, s: str) -> bool:
        self.ws()
        return self.text.startswith(s, self.pos)

    def eat(self, s: str) -> bool:
        if self.peek(s):
            self.pos += len(s)
            return True
        return False

    def expect(self, s: str, what: str) -> None:
        if not self.eat(s):
            got = self.text[self.pos] if self.pos < len(self.text) else "end of schema"
            raise self.error(f"expected {what} {s!r}, got {got!r}")

    def ident(self, what: str) -> str:
        self.ws()
        m = _IDENT.match(self.text, self.pos)
        if not m:
            raise self.error(f"expected {what}")
        self.pos = m.end()
        return m.group()

    # schema := [ns '::'] name ['.' overload] '(' args ')' '->' returns
    def schema(self) -> FunctionSchema:
        start = self.pos
        name = self.ident("an operator name")
        ns = self.ns
        if self.text.startswith("::", self.pos):
            self.pos += 2
            ns, name = name, self.ident("an operator name after '::'")
        overload = ""
        if self.text.startswith(".", self.pos):
            self.pos += 1
            overload = self.ident("an overload name after '.'")
        del start
        self.expect("(", "argument list")
        args = self.arguments()
        self.expect(")", "end of the argument list")
        self.expect("->", "return arrow")
        returns, as_tuple = self.returns()
        self.ws()
        if self.pos != len(self.text):
            raise self.error("unexpected text after the returns")
        return FunctionSchema(ns, name, overload, tuple(args), tuple(returns), as_tuple)

    def arguments(self) -> list[Argument]:
        args: list[Argument] = []
        kwarg_only = False
        seen: set[str] = set()
        if self.peek(")"):
            return args
        while True:
            if self.peek("*") and not self.peek("**"):
                star = self.pos
                self.pos += 1
                if kwarg_only:
                    raise self.error("'*' appears twice", star)
                kwarg_only = True
            else:
                tpos = self.pos
                t = self.type()
                self.ws()
                npos = self.pos
                name = self.ident("an argument name")
                if name in seen:
                    raise self.error(f"duplicate argument name {name!r}", npos)
                seen.add(name)
                default = NO_DEFAULT
                if self.eat("="):
                    dpos = self.pos
                    default = self.default()
                    _check_default(self, t, default, dpos)
                if t.alias is not None and t.alias.is_write and t.base != "Tensor":
                    raise self.error("only Tensor arguments can be mutable (a!)", tpos)
                args.append(Argument(name, t, default, kwarg_only))
            if self.eat(","):
                continue
            return args

    def type(self) -> SchemaType:
        self.ws()
        pos = self.pos
        base = self.ident("a type")
        if base not in BASE_TYPES:
            raise self.error(f"unknown type {base!r}", pos)
        alias = None
        if self.text.startswith("(", self.pos):
            alias = self.alias()
        elem_optional = optional = is_list = False
        size = None
        if self.text.startswith("?[", self.pos):
            self.pos += 1
            elem_optional = True
        if self.text.startswith("[", self.pos):
            self.pos += 1
            is_list = True
            m = re.compile(r"\d+").match(self.text, self.pos)
            if m:
                size = int(m.group())
                self.pos = m.end()
            if not self.text.startswith("]", self.pos):
                raise self.error("expected ']' closing the list type")
            self.pos += 1
        if self.text.startswith("?", self.pos):
            self.pos += 1
            optional = True
        if alias is not None and base != "Tensor":
            raise self.error("alias annotations are only allowed on Tensor", pos)
        return SchemaType(base, optional, is_list, size, elem_optional, alias)

    def alias(self) -> AliasInfo:
        start = self.pos
        self.pos += 1  # '('
        before = [self.ident("an alias set name")]
        while self.text.startswith("|", self.pos):
            self.pos += 1
            before.append(self.ident("an alias set name"))
        is_write = self.eat("!")
        after = before
        if self.eat("->"):
            self.ws()
            if self.text.startswith("*", self.pos):
                self.pos += 1
                after = ["*"]
            else:
                after = [self.ident("an alias set name")]
        if not self.eat(")"):
            raise self.error("bad alias annotation: expected ')'", start)
        return AliasInfo(tuple(before), tuple(after), is_write)

    def default(self):
        self.ws()
        t = self.text
        if t.startswith('"', self.pos) or t.startswith("'", self.pos):
            return self.string()
        if t.startswith("[", self.pos):
            if self.depth >= MAX_DEFAULT_DEPTH:  # Note [Schema limits]
                raise self.error(f"list default nested more than {MAX_DEFAULT_DEPTH} deep")
            self.pos += 1
            items = []
            if self.eat("]"):
                return ()
            self.depth += 1
            while True:
                items.append(self.default())
                if self.eat(","):
                    continue
                self.expect("]", "end of the list default")
                self.depth -= 1
                # a tuple: one default object serves every call, so it must not change
                # (a kernel appending to a list default changed the schema's)
                return tuple(items)
        for word, value in (("True", True), ("False", False), ("None", None),
                            ("-inf", -math.inf), ("inf", math.inf), ("nan", math.nan)):
            if t.startswith(word, self.pos) and not _IDENT.match(t, self.pos + len(word)) \
                    and not t[self.pos + len(word): self.pos + len(word) + 1].isdigit():
                self.pos += len(word)
                return value
        m = _NUMBER.match(t, self.pos)
        if m:
            if m.end() - m.start() > MAX_NUMBER_LENGTH:  # Note [Schema limits]
                raise self.error(f"number literal longer than {MAX_NUMBER_LENGTH} characters")
            self.pos = m.end()
            s = m.group()
            return float(s) if any(c in s for c in ".eE") else int(s)
        m = _IDENT.match(t, self.pos)
        if m:
            self.pos = m.end()
            return Symbol(m.group())
        raise self.error("expected a default value")

    def string(self) -> str:
        quote = self.text[self.pos]
        start = self.pos
        self.pos += 1
        out = []
        while self.pos < len(self.text):
            c = self.text[self.pos]
            if c == "\\" and self.pos + 1 < len(self.text):
                out.append(self.text[self.pos + 1])
                self.pos += 2
                continue
            if c == quote:
                self.pos += 1
                return "".join(out)
            out.append(c)
            self.pos += 1
        raise self.error("unterminated string", start)

    def returns(self) -> tuple[list[Return], bool]:
        if self.eat("("):
            rets = []
            if self.eat(")"):
                return rets, True
            while True:
                rets.append(self.one_return())
                if self.eat(","):
                    continue
                self.expect(")", "end of the returns")
                return rets, True
        return [self.one_return()], False

    def one_return(self) -> Return:
        t = self.type()
        self.ws()
        m = _IDENT.match(self.text, self.pos)
        name = None
        if m:
            name = m.group()
            self.pos = m.end()
        return Return(name, t)


def _check_default(p: _Parser, t: SchemaType, d, pos: int) -> None:
    if d is None:
        if not t.optional and t.base not in ("Tensor",):
            # PyTorch allows None only for optional types.
            raise p.error(f"default None needs an optional type, got {t}", pos)
        if t.base == "Tensor" and not t.optional:
            raise p.error("a Tensor argument can only default to None if it is optional "
                          "(Tensor?)", pos)
        return
    if isinstance(d, Symbol):
        return
    if t.base == "Tensor":
        raise p.error(f"a Tensor argument cannot default to {_format_default(d)}", pos)
    if t.is_list:
        if isinstance(d, tuple):
            return
        if isinstance(d, (int, float)) and not isinstance(d, bool) and t.list_size:
            return  # int[2] stride=1 broadcasts, as in PyTorch
        raise p.error(f"default of a list type {t} must be a list", pos)
    base = t.base
    ok = {
        "int": lambda v: isinstance(v, int),
        "SymInt": lambda v: isinstance(v, int),
        "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str": lambda v: isinstance(v, str),
        "Scalar": lambda v: isinstance(v, (int, float)),
    }.get(base, lambda v: True)
    if not ok(d):
        raise p.error(f"default {_format_default(d)} does not fit type {t}", pos)


def parse_schema(text: str, default_namespace: str = "aten") -> FunctionSchema:
    """Parse a schema string.

    Args:
        text: the schema, e.g. ``"add.Tensor(Tensor self, Tensor other) -> Tensor"``.
        default_namespace: namespace for a name without ``ns::``.

    Raises:
        TypeError: ``text`` is not a str.
        SchemaParseError: with the schema and a caret under the problem (Note [Schema
            limits]).
    """
    if not isinstance(text, str):  # before the cache, which would hash it
        raise TypeError(f"parse_schema: expected a schema str, got {type(text).__name__}")
    if not isinstance(default_namespace, str):
        raise TypeError(f"parse_schema: expected a namespace str, got "
                        f"{type(default_namespace).__name__}")
    return _parse_cached(text, default_namespace)


@functools.lru_cache(maxsize=4096)
def _parse_cached(text: str, default_namespace: str) -> FunctionSchema:
    if len(text) > MAX_SCHEMA_LENGTH:
        raise SchemaParseError(f"schema longer than {MAX_SCHEMA_LENGTH} characters",
                               text[:80] + "...", 80)
    parser = _Parser(text, default_namespace)
    try:
        return parser.schema()
    except SchemaParseError:
        raise
    except (RecursionError, ValueError, OverflowError, MemoryError) as e:
        raise SchemaParseError(f"malformed schema ({type(e).__name__}: {e})", text,
                               min(parser.pos, len(text))) from None
