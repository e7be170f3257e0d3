"""Schema parsing: the model, derived facts, errors with carets, round trips."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mdtensor._schema import (
    NO_DEFAULT,
    AliasInfo,
    SchemaParseError,
    Symbol,
    parse_schema,
)

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
    assert foo.arguments[1].default == [1, 1]
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
