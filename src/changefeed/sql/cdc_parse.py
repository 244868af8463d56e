"""CockroachDB CDC queries, parsed: the ``SELECT projection FROM table [WHERE predicate]`` of
``CREATE CHANGEFEED .. AS SELECT``.

:func:`parse_query` turns the clause's text (captured whole by the statement grammar) into the
raw syntax tree below, with :file:`grammar_cdc.lark` (CockroachDB's expression syntax and
precedence). Names are folded as CockroachDB folds them: unquoted identifiers lower-cased,
double-quoted ones kept. Nothing is resolved here; :mod:`changefeed.sql.cdc_check` resolves
names against the target table, checks functions and types, and produces the plan the
encoders evaluate (:mod:`changefeed.feeds.cdc_plan`).

Syntax errors are :class:`~changefeed.exceptions.StatementSyntaxError` with the line and column
in the whole statement (``offset`` is where the clause starts in it).
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from changefeed.exceptions import StatementSyntaxError

# ==================================================================================== the tree


@dataclass(frozen=True, slots=True)
class Node:
    """Base of the raw CDC query tree; ``at`` is the character offset in the clause."""


@dataclass(frozen=True, slots=True)
class Lit(Node):
    """A literal: ``kind`` is number, string, bytes, bool, null or placeholder."""

    kind: str
    value: Any
    text: str = ""  # a number as written (its scale matters to DECIMAL)


@dataclass(frozen=True, slots=True)
class TypeRef(Node):
    """A type as written: ``STRING``, ``DECIMAL(10,2)``, ``TIMESTAMP WITH TIME ZONE``, ``INT[]``."""

    name: str  # words joined by one space, as written
    params: tuple[int, ...] = ()
    array: int = 0

    def sql(self) -> str:
        out = self.name.upper()
        if self.params:
            out += "(" + ",".join(str(p) for p in self.params) + ")"
        return out + "[]" * self.array


@dataclass(frozen=True, slots=True)
class Ref(Node):
    """A column reference: ``a``, ``t.a``, ``db.t.a`` (names folded)."""

    parts: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Field(Node):
    """``(expr).name``: a field of a tuple (``(cdc_prev).status``)."""

    expr: Node
    name: str


@dataclass(frozen=True, slots=True)
class FieldStar(Node):
    """``(expr).*``: every field of a tuple."""

    expr: Node


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A function call. ``name`` is folded and dotted (``crdb_internal.cluster_id``)."""

    name: str
    args: tuple[Node, ...] = ()
    star: bool = False  # count(*)
    distinct: bool = False
    window: bool = False  # ... OVER (..)
    filtered: bool = False  # ... FILTER (WHERE ..)
    ordered: bool = False  # array_agg(x ORDER BY y)


@dataclass(frozen=True, slots=True)
class Unary(Node):
    op: str  # "-", "+", "~", "NOT"
    arg: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    """Arithmetic, comparison, ``||``, JSON and bitwise operators, ``AND``/``OR``."""

    op: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class IsTest(Node):
    """``IS [NOT] NULL`` (``what`` null), ``IS [NOT] TRUE/FALSE``."""

    arg: Node
    what: str  # "null" | "true" | "false"
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Distinct(Node):
    """``a IS [NOT] DISTINCT FROM b``."""

    left: Node
    right: Node
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Like(Node):
    """``LIKE``/``ILIKE``/``SIMILAR TO``, optionally ``NOT`` and with ``ESCAPE``."""

    arg: Node
    pattern: Node
    kind: str  # "like" | "ilike" | "similar"
    negated: bool = False
    escape: Node | None = None


@dataclass(frozen=True, slots=True)
class InList(Node):
    arg: Node
    items: tuple[Node, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class Between(Node):
    arg: Node
    low: Node
    high: Node
    negated: bool = False
    symmetric: bool = False


@dataclass(frozen=True, slots=True)
class Cast(Node):
    """``x::T``, ``CAST(x AS T)``; ``annotate`` for ``x:::T``."""

    arg: Node
    type: TypeRef
    annotate: bool = False


@dataclass(frozen=True, slots=True)
class Case(Node):
    operand: Node | None
    whens: tuple[tuple[Node, Node], ...]
    default: Node | None


@dataclass(frozen=True, slots=True)
class ArrayLit(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class TupleLit(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Subscript(Node):
    arg: Node
    index: Node


@dataclass(frozen=True, slots=True)
class Collate(Node):
    arg: Node
    collation: str


@dataclass(frozen=True, slots=True)
class Subquery(Node):
    """``(SELECT ..)``, ``EXISTS (..)``, ``IN (SELECT ..)``: CDC queries refuse them."""

    exists: bool = False


@dataclass(frozen=True, slots=True)
class Star(Node):
    """``*`` (``table`` set: ``t.*``) in the target list."""

    table: str | None = None


@dataclass(frozen=True, slots=True)
class Target:
    expr: Node
    alias: str | None = None
    text: str = ""  # the expression as written (error messages)


@dataclass(frozen=True, slots=True)
class TableRef:
    name: tuple[str, ...]
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class Query:
    """A parsed CDC query: its targets, the tables it names, its predicate."""

    targets: tuple[Target, ...]
    tables: tuple[TableRef, ...]
    joins: bool
    where: Node | None
    text: str = field(default="", compare=False)


# ==================================================================================== parsing

_GRAMMAR_LOCK = threading.Lock()


#: CockroachDB's reserved keywords that the CDC grammar's contextual lexer would otherwise take
#: for names where no keyword is expected (``SELECT DISTINCT a``, ``.. GROUP BY a``).
_RESERVED = frozenset(
    [
        "all",
        "analyse",
        "analyze",
        "asc",
        "check",
        "constraint",
        "create",
        "default",
        "desc",
        "distinct",
        "except",
        "fetch",
        "for",
        "foreign",
        "grant",
        "group",
        "having",
        "intersect",
        "into",
        "lateral",
        "limit",
        "offset",
        "only",
        "order",
        "primary",
        "references",
        "returning",
        "select",
        "table",
        "union",
        "unique",
        "variadic",
        "window",
        "with",
    ]
)


class _ReservedWord(Exception):
    def __init__(self, tok: Token) -> None:
        super().__init__(str(tok))
        self.tok = tok


@functools.cache
def _lark() -> Lark:
    with _GRAMMAR_LOCK:
        text = resources.files("changefeed.sql").joinpath("grammar_cdc.lark").read_text(encoding="utf-8")
        return Lark(text, parser="lalr", lexer="contextual", propagate_positions=True)


def _fold(tok: Token) -> str:
    """CockroachDB's name folding: unquoted lower-cased, ``"Quoted"`` kept (``""`` unescaped)."""
    s = str(tok)
    if tok.type == "QIDENT":
        return s[1:-1].replace('""', '"')
    return s.lower()


def _unquote(s: str) -> str:
    return s[1:-1].replace("''", "'")


_E_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", "'": "'", '"': '"'}


def _unescape(body: str) -> str:
    """CockroachDB's ``e'..'`` escapes: ``\\n``, ``\\t``, ``\\xhh``, ``\\uhhhh``, octal."""
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "'" and body[i : i + 2] == "''":
            out.append("'")
            i += 2
            continue
        if ch != "\\" or i + 1 >= len(body):
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _E_ESCAPES:
            out.append(_E_ESCAPES[nxt])
            i += 2
        elif nxt == "x" and i + 3 < len(body) + 1:
            out.append(chr(int(body[i + 2 : i + 4], 16)))
            i += 4
        elif nxt in "uU":
            n = 4 if nxt == "u" else 8
            out.append(chr(int(body[i + 2 : i + 2 + n], 16)))
            i += 2 + n
        elif nxt in "01234567":
            j = i + 1
            while j < len(body) and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8)))
            i = j
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


class _Build(Transformer[Token, Any]):
    def __init__(self, text: str) -> None:
        super().__init__(visit_tokens=False)
        self.text = text

    # -- query
    def start(self, c: list[Any]) -> Query:
        targets, (tables, joins) = c[0], c[1]
        return Query(tuple(targets), tuple(tables), joins, c[2], self.text)

    def target_list(self, c: list[Any]) -> list[Target]:
        return c

    def star(self, c: list[Any]) -> Target:
        return Target(Star(), None, "*")

    def table_star(self, c: list[Any]) -> Target:
        return Target(Star(c[0]), None, f"{c[0]}.*")

    @v_args(meta=True)
    def aliased(self, meta: Any, c: list[Any]) -> Target:
        return Target(c[0], c[1], self.text[meta.start_pos : meta.end_pos])

    @v_args(meta=True)
    def unaliased(self, meta: Any, c: list[Any]) -> Target:
        return Target(c[0], None, self.text[meta.start_pos : meta.end_pos])

    def from_clause(self, c: list[Any]) -> tuple[list[TableRef], bool]:
        tables: list[TableRef] = []
        joins = False
        for t in c:
            if isinstance(t, tuple):
                tables.extend(t[0])
                joins = True
            else:
                tables.append(t)
        return tables, joins

    def table(self, c: list[Any]) -> TableRef:
        return TableRef(c[0], c[1])

    def join(self, c: list[Any]) -> tuple[list[TableRef], bool]:
        out: list[TableRef] = []
        for t in c:
            if isinstance(t, TableRef):
                out.append(t)
            elif isinstance(t, tuple):
                out.extend(t[0])
        return out, True

    def join_kind(self, c: list[Any]) -> None:
        return None

    def join_cond(self, c: list[Any]) -> None:
        return None

    def where_clause(self, c: list[Any]) -> Node:
        return c[0]  # type: ignore[no-any-return]

    def qname(self, c: list[str]) -> tuple[str, ...]:
        return tuple(c)

    def col_label(self, c: list[Token]) -> str:
        return _fold(c[0])

    def ident(self, c: list[Token]) -> str:
        if c[0].type == "IDENT" and str(c[0]).lower() in _RESERVED:
            raise _ReservedWord(c[0])
        return _fold(c[0])

    # -- expressions
    def or_op(self, c: list[Node]) -> Node:
        return Binary("OR", c[0], c[1])

    def and_op(self, c: list[Node]) -> Node:
        return Binary("AND", c[0], c[1])

    def not_op(self, c: list[Node]) -> Node:
        return Unary("NOT", c[0])

    def is_null(self, c: list[Node]) -> Node:
        return IsTest(c[0], "null")

    def is_not_null(self, c: list[Node]) -> Node:
        return IsTest(c[0], "null", negated=True)

    def is_true(self, c: list[Node]) -> Node:
        return IsTest(c[0], "true")

    def is_not_true(self, c: list[Node]) -> Node:
        return IsTest(c[0], "true", negated=True)

    def is_false(self, c: list[Node]) -> Node:
        return IsTest(c[0], "false")

    def is_not_false(self, c: list[Node]) -> Node:
        return IsTest(c[0], "false", negated=True)

    def is_distinct(self, c: list[Node]) -> Node:
        return Distinct(c[0], c[1])

    def is_not_distinct(self, c: list[Node]) -> Node:
        return Distinct(c[0], c[1], negated=True)

    def compare(self, c: list[Any]) -> Node:
        op = str(c[1])
        return Binary("!=" if op == "<>" else op, c[0], c[2])

    def escape(self, c: list[Node]) -> Node:
        return c[0]

    def like(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "like", escape=c[2])

    def not_like(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "like", negated=True, escape=c[2])

    def ilike(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "ilike", escape=c[2])

    def not_ilike(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "ilike", negated=True, escape=c[2])

    def similar(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "similar", escape=c[2])

    def not_similar(self, c: list[Any]) -> Node:
        return Like(c[0], c[1], "similar", negated=True, escape=c[2])

    def in_list(self, c: list[Node]) -> tuple[Node, ...]:
        return tuple(c)

    def in_op(self, c: list[Any]) -> Node:
        if isinstance(c[1], Subquery):
            return c[1]
        return InList(c[0], c[1])

    def not_in_op(self, c: list[Any]) -> Node:
        if isinstance(c[1], Subquery):
            return c[1]
        return InList(c[0], c[1], negated=True)

    def between(self, c: list[Any]) -> Node:
        return Between(c[0], c[-2], c[-1], symmetric=len(c) == 4 and c[1] is not None)

    def not_between(self, c: list[Any]) -> Node:
        return Between(c[0], c[-2], c[-1], negated=True, symmetric=len(c) == 4 and c[1] is not None)

    def binop(self, c: list[Any]) -> Node:
        return Binary(str(c[1]), c[0], c[2])

    def pow_op(self, c: list[Node]) -> Node:
        return Binary("^", c[0], c[1])

    def neg(self, c: list[Node]) -> Node:
        e = c[0]
        if isinstance(e, Lit) and e.kind == "number":
            return Lit("number", -e.value, "-" + e.text)
        return Unary("-", e)

    def pos(self, c: list[Node]) -> Node:
        return Unary("+", c[0])

    def bitnot(self, c: list[Node]) -> Node:
        return Unary("~", c[0])

    def cast(self, c: list[Any]) -> Node:
        return Cast(c[0], c[1])

    def annotate(self, c: list[Any]) -> Node:
        return Cast(c[0], c[1], annotate=True)

    def subscript(self, c: list[Node]) -> Node:
        return Subscript(c[0], c[1])

    def collate(self, c: list[Any]) -> Node:
        return Collate(c[0], c[1])

    def field(self, c: list[Any]) -> Node:
        return Field(c[0], c[1])

    def field_star(self, c: list[Any]) -> Node:
        return FieldStar(c[0])

    def tuple_lit(self, c: list[Any]) -> Node:
        return TupleLit(tuple(x for x in c if isinstance(x, Node)))

    def when_clause(self, c: list[Node]) -> tuple[Node, Node]:
        return (c[0], c[1])

    def case(self, c: list[Any]) -> Node:
        operand = c[0]
        whens = tuple(x for x in c[1:] if isinstance(x, tuple))
        default = c[-1] if not isinstance(c[-1], tuple) else None
        return Case(operand, whens, default)

    def array_lit(self, c: list[Any]) -> Node:
        return ArrayLit(tuple(x for x in c if x is not None))

    def exists(self, c: list[Any]) -> Node:
        return Subquery(exists=True)

    def subquery(self, c: list[Any]) -> Node:
        return Subquery()

    def balanced(self, c: list[Any]) -> None:
        return None

    def extract_field(self, c: list[Token]) -> str:
        s = str(c[0])
        return _unquote(s).lower() if s.startswith("'") else s.lower()

    def extract(self, c: list[Any]) -> Node:
        return Call("extract", (Lit("string", c[0]), c[1]))

    def extract_args(self, c: list[Any]) -> Node:
        return Call("extract", (c[0], c[1]))

    def position(self, c: list[Node]) -> Node:
        return Call("strpos", (c[1], c[0]))

    def substring_from(self, c: list[Any]) -> Node:
        args = (c[0], c[1]) if c[2] is None else (c[0], c[1], c[2])
        return Call("substring", args)

    def substring_for(self, c: list[Any]) -> Node:
        return Call("substring", (c[0], Lit("number", 1, "1"), c[1]))

    def substring_args(self, c: list[Any]) -> Node:
        return Call("substring", tuple(x for x in c if x is not None))

    def trim_from(self, c: list[Any]) -> Node:
        kind = str(c[0]).lower() if c[0] is not None else "both"
        fn = {"both": "btrim", "leading": "ltrim", "trailing": "rtrim"}[kind]
        chars, arg = c[1], c[2]
        return Call(fn, (arg,) if chars is None else (arg, chars))

    def trim_args(self, c: list[Any]) -> Node:
        kind = str(c[0]).lower() if c[0] is not None else "both"
        fn = {"both": "btrim", "leading": "ltrim", "trailing": "rtrim"}[kind]
        return Call(fn, tuple(x for x in c[1:] if x is not None))

    def overlay(self, c: list[Any]) -> Node:
        return Call("overlay", tuple(x for x in c if x is not None))

    def special_func(self, c: list[Token]) -> Node:
        return Call(str(c[0]).lower())

    def typed_string(self, c: list[Token]) -> Node:
        return Cast(Lit("string", _unquote(str(c[1]))), TypeRef(str(c[0]).lower()))

    def column_ref(self, c: list[str]) -> Node:
        return Ref(tuple(c))

    def qfunc(self, c: list[str]) -> str:
        return ".".join(c)

    def func_call(self, c: list[Any]) -> Node:
        name, args, filt, over = c[0], c[1], c[2], c[3]
        if args is None:
            args = {"args": (), "star": False, "distinct": False, "ordered": False}
        return Call(
            name,
            args["args"],
            star=args["star"],
            distinct=args["distinct"],
            window=over is not None,
            filtered=filt is not None,
            ordered=args["ordered"],
        )

    def star_arg(self, c: list[Any]) -> dict[str, Any]:
        return {"args": (), "star": True, "distinct": False, "ordered": False}

    def args(self, c: list[Any]) -> dict[str, Any]:
        distinct = c[0] is not None and str(c[0]).upper() == "DISTINCT"
        ordered = bool(c) and c[-1] == "ORDERED"
        return {
            "args": tuple(x for x in c[1:] if isinstance(x, Node)),
            "star": False,
            "distinct": distinct,
            "ordered": ordered,
        }

    def order_by(self, c: list[Any]) -> str:
        return "ORDERED"

    def filter_clause(self, c: list[Any]) -> bool:
        return True

    def over_clause(self, c: list[Any]) -> bool:
        return True

    # -- types
    def type_name(self, c: list[Any]) -> TypeRef:
        words = [w for w in c if isinstance(w, str)]
        params: tuple[int, ...] = ()
        arrays = 0
        for x in c:
            if isinstance(x, tuple):
                params = x
            elif x is True:
                arrays += 1
        return TypeRef(" ".join(words).lower(), params, arrays)

    def type_word(self, c: list[Token]) -> str:
        return str(c[0])

    def type_params(self, c: list[Token]) -> tuple[int, ...]:
        return tuple(int(str(t)) for t in c)

    def type_array(self, c: list[Token]) -> bool:
        return True

    # -- literals
    def number(self, c: list[Token]) -> Node:
        s = str(c[0])
        if s[:2].lower() == "0x":
            return Lit("number", int(s, 16), str(int(s, 16)))
        if "." in s or "e" in s or "E" in s:
            return Lit("number", Decimal(s), s)
        return Lit("number", int(s), s)

    def string(self, c: list[Token]) -> Node:
        return Lit("string", _unquote(str(c[0])))

    def estring(self, c: list[Token]) -> Node:
        return Lit("string", _unescape(str(c[0])[2:-1]))

    def bstring(self, c: list[Token]) -> Node:
        return Lit("bytes", _unquote(str(c[0])[1:]).encode())

    def xstring(self, c: list[Token]) -> Node:
        body = _unquote(str(c[0])[1:])
        try:
            return Lit("bytes", bytes.fromhex(body))
        except ValueError:
            raise ValueError(f"could not parse {str(c[0])!r} as a hexadecimal byte string") from None

    def null(self, c: list[Any]) -> Node:
        return Lit("null", None)

    def true(self, c: list[Any]) -> Node:
        return Lit("bool", True)

    def false(self, c: list[Any]) -> Node:
        return Lit("bool", False)

    def placeholder(self, c: list[Token]) -> Node:
        return Lit("placeholder", int(str(c[0])[1:]))


_DISPLAY = {
    "IDENT": "identifier",
    "QIDENT": "identifier",
    "STRING": "string",
    "NUMBER": "number",
    "$END": "end of input",
    "COMP_OP": "comparison operator",
    "OTHER_OP": "operator",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '%'",
}


def parse_query(text: str, *, line: int = 1, column: int = 1) -> Query:
    """Parse the CDC query ``text`` (from ``SELECT`` on); ``line``/``column`` place its start in
    the statement for error positions."""
    return _parse_cached(text, line, column)


@functools.lru_cache(maxsize=256)
def _parse_cached(text: str, line: int, column: int) -> Query:
    try:
        tree = _lark().parse(text)
        result = _Build(text).transform(tree)
    except UnexpectedInput as e:
        raise _syntax_error(e, text, line, column) from None
    except VisitError as e:
        if isinstance(e.orig_exc, _ReservedWord):
            ln, col = _where(text, e.orig_exc.tok.start_pos or 0, line, column)
            raise StatementSyntaxError(
                f"unexpected {str(e.orig_exc.tok)!r}: a reserved keyword", line=ln, column=col
            ) from None
        raise StatementSyntaxError(str(e.orig_exc), line=line, column=column) from None
    assert isinstance(result, Query)
    return result


def _where(text: str, pos: int, line: int, column: int) -> tuple[int, int]:
    before = text[:pos]
    nl = before.count("\n")
    if nl == 0:
        return line, column + pos
    return line + nl, pos - before.rfind("\n")


def _syntax_error(e: UnexpectedInput, text: str, line: int, column: int) -> StatementSyntaxError:
    if isinstance(e, UnexpectedToken) and e.token.type == "$END":
        pos = len(text.rstrip())
        ln, col = _where(text, pos, line, column)
        expected = sorted({_DISPLAY.get(t, t.lower()) for t in e.expected})
        return StatementSyntaxError(
            f"unexpected end of input, expected one of: {', '.join(expected)}", line=ln, column=col
        )
    if isinstance(e, UnexpectedToken):
        tok = e.token
        ln, col = _where(text, tok.start_pos or 0, line, column)
        expected = sorted({_DISPLAY.get(t, t.lower() if not t.isupper() else t) for t in e.expected})
        shown = ", ".join(x for x in expected if not x.startswith("__"))
        return StatementSyntaxError(f"unexpected {str(tok)!r}, expected one of: {shown}", line=ln, column=col)
    if isinstance(e, UnexpectedCharacters):
        ln, col = _where(text, e.pos_in_stream or 0, line, column)
        ch = text[e.pos_in_stream] if e.pos_in_stream is not None and e.pos_in_stream < len(text) else ""
        if ch == "'":
            return StatementSyntaxError("unterminated string literal", line=ln, column=col)
        if ch == '"':
            return StatementSyntaxError("unterminated quoted identifier", line=ln, column=col)
        return StatementSyntaxError(f"unexpected character {ch!r}", line=ln, column=col)
    return StatementSyntaxError(str(e), line=line, column=column)


def walk(node: Node) -> list[Node]:
    """Every node of an expression, pre-order."""
    out: list[Node] = []
    stack: list[Node] = [node]
    while stack:
        n = stack.pop()
        out.append(n)
        for v in _children(n):
            stack.append(v)
    return out


def _children(n: Node) -> list[Node]:
    kids: list[Node] = []
    for name in getattr(n, "__slots__", ()):
        v = getattr(n, name)
        if isinstance(v, Node):
            kids.append(v)
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Node):
                    kids.append(x)
                elif isinstance(x, tuple):
                    kids.extend(y for y in x if isinstance(y, Node))
    return kids


__all__ = [
    "ArrayLit",
    "Between",
    "Binary",
    "Call",
    "Case",
    "Cast",
    "Collate",
    "Distinct",
    "Field",
    "FieldStar",
    "InList",
    "IsTest",
    "Like",
    "Lit",
    "Node",
    "Query",
    "Ref",
    "Star",
    "Subquery",
    "Subscript",
    "TableRef",
    "Target",
    "TupleLit",
    "TypeRef",
    "Unary",
    "parse_query",
    "walk",
]
