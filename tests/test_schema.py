"""Schema parsing: the model, derived facts, errors with carets, round trips."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdtensor.dispatch.schema import NO_DEFAULT, AliasInfo, SchemaParseError, Symbol, parse_schema

EXAMPLES = [
    "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
    "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
    "add.out(Tensor self, Tensor other, *, Scalar alpha=1, Tensor(a!) out) -> Tensor(a!)",
    "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
    'mylib::foo(Tensor x, int[] dims, float eps=1e-05, bool flag=True, str mode="mean", '
    "ScalarType? dtype=None) -> (Tensor, Tensor)",
    "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
    "cat(Tensor[] tensors, int dim=0) -> Tensor",
    "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
    "sum.dim_IntList(Tensor self, int[1]? dim, bool keepdim=False, *, ScalarType? dtype=None)"
    " -> Tensor",
    "zeros(int[] size, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
    "bool? pin_memory=None) -> Tensor",
    "clamp(Tensor self, Scalar? min=None, Scalar? max=None) -> Tensor",
    "foo(Tensor self, int[2] stride=[1, 1], float[] w=[], Generator? generator=None, "
    "MemoryFormat? memory_format=contiguous_format) -> ()",
    "_foo(Tensor(a!)[] self) -> ()",
]


@pytest.mark.parametrize("text", EXAMPLES)
def test_examples_round_trip(text):
    s = parse_schema(text)
    assert parse_schema(str(s)) == s
    assert str(parse_schema(str(s))) == str(s)


def test_fields_and_derived_facts():
    s = parse_schema(EXAMPLES[0])
    assert (s.namespace, s.name, s.overload_name) == ("aten", "add", "Tensor")
    assert s.full_name == "aten::add.Tensor" and s.qualified_name == "aten::add"
    assert [a.name for a in s.positional] == ["self", "other"]
    assert [a.name for a in s.kwarg_only] == ["alpha"] and s.arguments[2].default == 1
    assert s.tensor_arg_indices == (0, 1)
    assert not (s.is_inplace or s.is_out or s.is_view or s.is_mutable)

    inplace = parse_schema(EXAMPLES[1])
    assert inplace.is_inplace and inplace.mutated_args == ("self",)
    assert inplace.returns_alias_of(0) == "self" and inplace.base_name == "add"
    assert inplace.arguments[0].type.alias == AliasInfo(("a",), ("a",), True)

    out = parse_schema(EXAMPLES[2])
    assert out.is_out and not out.is_inplace and out.mutated_args == ("out",)

    view = parse_schema(EXAMPLES[3])
    assert view.is_view and view.returns_alias_of(0) == "self"

    custom = parse_schema(EXAMPLES[4])
    assert custom.namespace == "mylib" and custom.overload_name == ""
    assert custom.full_name == "mylib::foo" and len(custom.returns) == 2
    assert custom.arguments[2].default == 1e-05 and custom.arguments[4].default == "mean"

    split = parse_schema(EXAMPLES[6])
    assert split.arguments[0].type.alias == AliasInfo(("a",), ("*",), False)
    assert split.returns[0].type.is_tensor_list and split.is_view

    sum_ = parse_schema(EXAMPLES[9])
    t = sum_.arguments[1].type
    assert t.is_list and t.list_size == 1 and t.optional and not sum_.arguments[1].has_default

    idx = parse_schema(EXAMPLES[8]).arguments[1].type
    assert idx.elem_optional and idx.is_tensor_list

    foo = parse_schema(EXAMPLES[12])
    assert foo.arguments[1].default == (1, 1)  # list defaults are tuples: immutable
    assert foo.arguments[4].default == Symbol("contiguous_format")
    assert foo.returns == () and foo.returns_tuple


def test_special_float_defaults():
    s = parse_schema("f(float a=inf, float b=-inf, float c=nan, float d=-0.5) -> ()")
    a, b, c, d = (x.default for x in s.arguments)
    assert a == math.inf and b == -math.inf and math.isnan(c) and d == -0.5
    assert parse_schema(str(s)) == s


@pytest.mark.parametrize("text, message, column", [
    ("f(Tensr x) -> Tensor", "unknown type 'Tensr'", 2),
    ("f(Tensor x -> Tensor", "expected end of the argument list", 11),
    ('f(str s="abc) -> ()', "unterminated string", 8),
    ("f(Tensor(a x) -> Tensor", "bad alias annotation", 8),
    ("f(Tensor x, Tensor x) -> ()", "duplicate argument name 'x'", 19),
    ("f(Tensor x, *, int a, *, int b) -> ()", "'*' appears twice", 22),
    ("(Tensor x) -> ()", "expected an operator name", 0),
    ("f(Tensor x) -> Tensor y z", "unexpected text after the returns", 24),
    ("f(int(a!) x) -> ()", "alias annotations are only allowed on Tensor", 2),
    ('f(int x="s") -> ()', "does not fit type int", 8),
    ("f(Tensor x=1) -> ()", "cannot default to 1", 11),
    ("f(Tensor x=None) -> ()", "optional", 11),
])
def test_errors_show_schema_and_caret(text, message, column):
    with pytest.raises(SchemaParseError) as info:
        parse_schema(text)
    msg = str(info.value)
    assert message in msg
    lines = msg.splitlines()
    assert lines[1].strip() == text
    caret_line = lines[2]
    assert caret_line.index("^") - lines[1].index(text[0]) == column


# ---------------------------------------------------------------------------------------
# Property test: parse(str(parse(text))) == parse(text) over the whole language, with the
# text rendered by a renderer written independently of FunctionSchema.__str__.

_IDENT = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
_BASES = ["Tensor", "Scalar", "int", "SymInt", "float", "bool", "str", "ScalarType",
          "Device", "Layout", "Generator", "MemoryFormat"]


@st.composite
def arg_type(draw, allow_alias=True):
    base = draw(st.sampled_from(_BASES))
    alias = ""
    if base == "Tensor" and allow_alias and draw(st.booleans()):
        name = draw(st.sampled_from("abc"))
        alias = draw(st.sampled_from([f"({name})", f"({name}!)", f"({name} -> *)"]))
    is_list = draw(st.booleans())
    text = base + alias
    elem_opt = False
    if is_list:
        if base == "Tensor" and not alias and draw(st.booleans()):
            text += "?"
            elem_opt = True
        text += draw(st.sampled_from(["[]", "[1]", "[3]"]))
    optional = draw(st.booleans())
    if optional:
        text += "?"
    return text, base, is_list, optional, elem_opt


def _default_for(draw, base, is_list, optional):
    choices = []
    if optional:
        choices.append("None")
    if is_list and base in ("int", "SymInt"):
        choices.append("[" + ", ".join(str(draw(st.integers(-5, 5))) for _ in
                                       range(draw(st.integers(0, 3)))) + "]")
    elif not is_list:
        if base in ("int", "SymInt"):
            choices.append(str(draw(st.integers(-1000, 1000))))
        elif base == "float":
            choices.append(draw(st.sampled_from(["1.5", "-0.25", "1e-05", "inf", "-inf",
                                                 "nan", "2"])))
        elif base == "bool":
            choices.append(draw(st.sampled_from(["True", "False"])))
        elif base == "str":
            choices.append('"' + draw(st.sampled_from(["mean", "", "a b", "x\\\"y"])) + '"')
        elif base == "Scalar":
            choices.append(draw(st.sampled_from(["1", "0.5", "-2"])))
        elif base in ("ScalarType", "Layout", "MemoryFormat"):
            choices.append(draw(st.sampled_from(["long", "strided", "contiguous_format"])))
    if not choices or draw(st.booleans()):
        return None
    return draw(st.sampled_from(choices))


@st.composite
def schema_text(draw):
    ns = draw(st.sampled_from(["", "mylib::", "aten::"]))
    name = draw(_IDENT) + draw(st.sampled_from(["", "_"]))
    overload = draw(st.sampled_from(["", ".Tensor", ".out", ".dim_IntList"]))
    n = draw(st.integers(0, 5))
    names = draw(st.lists(_IDENT, min_size=n, max_size=n, unique=True))
    star_at = draw(st.integers(0, n)) if draw(st.booleans()) else None
    parts = []
    for i, arg in enumerate(names):
        if star_at == i:
            parts.append("*")
        t, base, is_list, optional, _ = draw(arg_type())
        d = _default_for(draw, base, is_list, optional)
        parts.append(f"{t} {arg}" + (f"={d}" if d is not None else ""))
    if star_at == n and n:
        parts.append("*")
    if parts and parts[-1] == "*":
        parts.pop()
    k = draw(st.integers(0, 3))
    rets = []
    for _ in range(k):
        t, *_rest = draw(arg_type())
        rname = draw(st.sampled_from(["", " values", " indices"]))
        rets.append(t + rname)
    if k == 1 and draw(st.booleans()) and " " not in rets[0]:
        ret_text = rets[0]
    else:
        ret_text = "(" + ", ".join(rets) + ")"
    return f"{ns}{name}{overload}({', '.join(parts)}) -> {ret_text}"


@settings(max_examples=200, deadline=None)
@given(schema_text())
def test_parse_print_parse_is_identity(text):
    try:
        s = parse_schema(text)
    except SchemaParseError as e:
        # The generator may produce a mutable alias on a non-Tensor list etc.; such
        # rejections must still point into the text.
        assert 0 <= e.pos <= len(text)
        return
    again = parse_schema(str(s))
    assert again == s
    assert str(again) == str(s)


def test_no_default_sentinel_repr():
    assert repr(NO_DEFAULT) == "NO_DEFAULT"
    assert not parse_schema("f(Tensor x) -> Tensor").arguments[0].has_default


# ---------------------------------------------------------------------------------------
# Property test over a *model*: draw a schema as plain data, render it with the renderer
# below (written from DESIGN.md section 3, not from FunctionSchema.__str__), parse it, and
# check that every parsed field equals the model; then parse(str(s)) == s.  Every drawn
# schema is valid, so no parse error is tolerated.

_NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,5}", fullmatch=True).filter(
    lambda s: s not in ("inf", "nan"))
_NONTENSOR = ["Scalar", "int", "SymInt", "float", "bool", "str", "ScalarType", "Device",
              "Layout", "Generator", "MemoryFormat"]


@st.composite
def _alias(draw, write_ok=True):
    before = draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=2, unique=True))
    is_write = write_ok and draw(st.booleans())
    after = before
    if draw(st.integers(0, 3)) == 0:
        after = [draw(st.sampled_from(["*", "e"]))]
    return tuple(before), tuple(after), is_write


@st.composite
def _type_model(draw):
    base = draw(st.sampled_from(["Tensor"] * 4 + _NONTENSOR))
    alias = draw(_alias()) if base == "Tensor" and draw(st.booleans()) else None
    is_list = draw(st.booleans())
    elem_optional = is_list and base == "Tensor" and draw(st.booleans())
    size = draw(st.sampled_from([None, 1, 2, 4])) if is_list else None
    optional = draw(st.booleans())
    return dict(base=base, alias=alias, is_list=is_list, elem_optional=elem_optional,
                size=size, optional=optional)


def _render_type(t):
    out = t["base"]
    if t["alias"]:
        before, after, w = t["alias"]
        out += "(" + "|".join(before) + ("!" if w else "")
        out += (" -> " + "|".join(after) if after != before else "") + ")"
    if t["is_list"]:
        out += ("?" if t["elem_optional"] else "") + (
            f"[{t['size']}]" if t["size"] is not None else "[]")
    return out + ("?" if t["optional"] else "")


_STR_CHARS = st.text(alphabet='ab ,()"\\=-', max_size=6)


def _default_model(draw, t):
    """(present, value, rendered text) -- a default of the right kind for type t."""
    options = []
    if t["optional"]:
        options.append((None, "None"))
    base = t["base"]
    if t["is_list"]:
        if base in ("int", "SymInt"):
            vals = draw(st.lists(st.integers(-9, 99), max_size=3))
            options.append((vals, "[" + ", ".join(map(str, vals)) + "]"))
        elif base == "float":
            vals = draw(st.lists(st.sampled_from([0.5, -1.25, 3.0]), max_size=2))
            options.append((vals, "[" + ", ".join(map(repr, vals)) + "]"))
    elif base in ("int", "SymInt"):
        v = draw(st.integers(-10**6, 10**6))
        options.append((v, str(v)))
    elif base == "float":
        v = draw(st.sampled_from([0.0, 1.5, -2.5, 1e-05, 3e+20, math.inf, -math.inf]))
        options.append((v, {math.inf: "inf", -math.inf: "-inf"}.get(v, repr(v))))
    elif base == "bool":
        v = draw(st.booleans())
        options.append((v, str(v)))
    elif base == "str":
        v = draw(_STR_CHARS)
        options.append((v, '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'))
    elif base == "Scalar":
        v = draw(st.sampled_from([1, -3, 0.5, 2.0]))
        options.append((v, repr(v)))
    elif base in ("ScalarType", "Layout", "MemoryFormat"):
        v = draw(st.sampled_from(["long", "strided", "contiguous_format"]))
        options.append((Symbol(v), v))
    if not options or draw(st.booleans()):
        return False, None, ""
    value, text = draw(st.sampled_from(options))
    return True, value, text


@st.composite
def schema_model(draw):
    ns = draw(st.one_of(st.none(), _NAME))
    name = draw(_NAME)
    overload = draw(st.one_of(st.just(""), _NAME))
    arg_names = draw(st.lists(_NAME, max_size=5, unique=True))
    n_pos = draw(st.integers(0, len(arg_names)))
    args = []
    for i, an in enumerate(arg_names):
        t = draw(_type_model())
        present, value, text = _default_model(draw, t)
        args.append(dict(name=an, type=t, has_default=present, default=value,
                         default_text=text, kwarg_only=i >= n_pos))
    rets = []
    for _ in range(draw(st.integers(0, 3))):
        t = draw(_type_model())
        rets.append(dict(type=t, name=draw(st.one_of(st.none(), _NAME))))
    as_tuple = len(rets) != 1 or rets[0]["name"] is not None or draw(st.booleans())
    return dict(ns=ns, name=name, overload=overload, args=args, rets=rets, tuple=as_tuple)


def render_model(m):
    head = (f"{m['ns']}::" if m["ns"] else "") + m["name"]
    head += f".{m['overload']}" if m["overload"] else ""
    parts, star = [], False
    for a in m["args"]:
        if a["kwarg_only"] and not star:
            parts.append("*")
            star = True
        s = f"{_render_type(a['type'])} {a['name']}"
        parts.append(s + (f"={a['default_text']}" if a["has_default"] else ""))
    rets = [_render_type(r["type"]) + (f" {r['name']}" if r["name"] else "")
            for r in m["rets"]]
    ret = "(" + ", ".join(rets) + ")" if m["tuple"] else rets[0]
    return f"{head}({', '.join(parts)}) -> {ret}"


def _check_type(parsed, t):
    assert parsed.base == t["base"]
    assert parsed.optional == t["optional"] and parsed.is_list == t["is_list"]
    assert parsed.list_size == t["size"] and parsed.elem_optional == t["elem_optional"]
    if t["alias"] is None:
        assert parsed.alias is None
    else:
        assert parsed.alias == AliasInfo(*t["alias"])


def _same_default(got, want):
    if isinstance(want, float) and math.isnan(want):
        return isinstance(got, float) and math.isnan(got)
    if isinstance(want, list):  # list defaults parse to tuples (immutable)
        return type(got) is tuple and len(got) == len(want) and all(
            _same_default(g, w) for g, w in zip(got, want))
    return type(got) is type(want) and got == want


@settings(max_examples=150, deadline=None)
@given(schema_model())
def test_model_render_parse_matches_and_round_trips(m):
    text = render_model(m)
    s = parse_schema(text)
    assert s.namespace == (m["ns"] or "aten") and s.name == m["name"]
    assert s.overload_name == m["overload"]
    assert [a.name for a in s.arguments] == [a["name"] for a in m["args"]]
    for parsed, a in zip(s.arguments, m["args"]):
        _check_type(parsed.type, a["type"])
        assert parsed.kwarg_only == a["kwarg_only"]
        assert parsed.has_default == a["has_default"]
        if a["has_default"]:
            assert _same_default(parsed.default, a["default"]), (parsed.default, a)
    assert len(s.returns) == len(m["rets"]) and s.returns_tuple == m["tuple"]
    for parsed, r in zip(s.returns, m["rets"]):
        _check_type(parsed.type, r["type"])
        assert parsed.name == r["name"]
    # Derived facts agree with the model.
    mutated = tuple(a["name"] for a in m["args"]
                    if a["type"]["alias"] and a["type"]["alias"][2])
    assert s.mutated_args == mutated
    assert s.tensor_arg_indices == tuple(i for i, a in enumerate(m["args"])
                                         if a["type"]["base"] == "Tensor"
                                         and not a["type"]["is_list"]) or \
        s.tensor_arg_indices == tuple(i for i, a in enumerate(m["args"])
                                      if a["type"]["base"] == "Tensor")
    again = parse_schema(str(s))
    assert again == s and str(again) == str(s)
    assert [a.default for a in again.arguments if a.has_default and not (
        isinstance(a.default, float) and math.isnan(a.default))] == [
        a.default for a in s.arguments if a.has_default and not (
            isinstance(a.default, float) and math.isnan(a.default))]


def test_failed_parse_changes_nothing_and_reports_position():
    text = "mylib::f(Tensor x, int y=1.5) -> Tensor"
    with pytest.raises(SchemaParseError) as info:
        parse_schema(text)
    assert info.value.pos == text.index("1.5")
    assert isinstance(info.value, ValueError)
    with pytest.raises(TypeError, match="expected a schema str"):
        parse_schema(3)


@pytest.mark.parametrize("text, where", [
    ("f(int[] x=" + "[" * 3000 + "]" * 3000 + ") -> Tensor", "nested more than 16 deep"),
    ("f(int x=" + "1" * 5000 + ") -> Tensor", "number literal longer than 64"),
    ("f(" + "int a, " * 3000 + ") -> Tensor", "schema longer than 10000"),
])
def test_schema_limits_give_schema_parse_errors(text, where):
    # issue 25 item 15: RecursionError, Python's digit-limit ValueError, ... (Note [Schema
    # limits])
    with pytest.raises(SchemaParseError, match=where) as e:
        parse_schema(text)
    assert "^" in str(e.value)


def test_a_schema_that_is_not_a_str_is_a_type_error():
    for bad in (["f() -> Tensor"], None, 5):
        with pytest.raises(TypeError, match="expected a schema str"):
            parse_schema(bad)


def test_bind_and_normalize_fill_defaults_by_name():
    # One schema binding for the Python key's handlers and the Batched layer's rules.
    s = parse_schema("f(Tensor self, int dim=-1, bool keepdim=False, *, ScalarType? dtype=None,"
                     " Tensor(a!) out) -> Tensor")
    x, out = object(), object()
    assert s.bind((x,), {"out": out}) == {"self": x, "dim": -1, "keepdim": False,
                                          "dtype": None, "out": out}
    assert s.bind((x, 2), {"keepdim": True}) == {"self": x, "dim": 2, "keepdim": True,
                                                 "dtype": None}
    assert s.normalize((x,), {"keepdim": True, "out": out}) == (
        (x, -1, True), {"dtype": None, "out": out})
    assert s.normalize((), {}) == ((-1, False), {"dtype": None})  # `self` missing: left out
