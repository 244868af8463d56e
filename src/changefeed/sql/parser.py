"""Statement parser for both dialects: CQL (ScyllaDB/Cassandra) and SQL (YDB's YQL + CockroachDB).

``parse(text, dialect)`` turns a script (statements separated by ``;``) into :mod:`changefeed.sql.ast`
statements; ``parse_one`` insists on exactly one statement. The grammars live next to this module
(``grammar_common.lark`` plus ``grammar_cql.lark`` or ``grammar_sql.lark``) and are compiled lazily,
once per dialect, into lark LALR(1) parsers with a contextual lexer. Results are memoised on
``(text, dialect)`` because prepared statements are parsed again and again.

Every failure is reported as :class:`~changefeed.exceptions.StatementSyntaxError` with a 1-based
line/column, the human-readable set of expected tokens and a message such as
``unexpected 'FROMM', expected one of: FROM, ','``.
"""

from __future__ import annotations

import contextvars
import copy
import decimal
import functools
import math
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any, Literal, NamedTuple, get_args

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.lark import PostLex
from lark.lexer import PatternStr
from lark.parsers.lalr_analysis import Shift

from changefeed.exceptions import StatementSyntaxError, StatementTooComplex
from changefeed.sql import ast

__all__ = ["Dialect", "parse", "parse_one"]

Dialect = Literal["sql", "cql"]
_DIALECTS: tuple[str, ...] = get_args(Dialect)

#: YQL constructors whose double-quoted arguments are strings, not identifiers.
_TYPED_CONSTRUCTORS = frozenset(
    name.casefold()
    for name in [
        "Date",
        "Datetime",
        "Timestamp",
        "Interval",
        "Decimal",
        "Json",
        "Utf8",
        "String",
        "Uuid",
        "Int8",
        "Int16",
        "Int32",
        "Int64",
        "Uint8",
        "Uint16",
        "Uint32",
        "Uint64",
        "Float",
        "Double",
        "Bool",
        "JsonDocument",
        "Yson",
        "TzTimestamp",
        "TzDate",
        "TzDatetime",
        "Date32",
        "Datetime64",
        "Timestamp64",
        "Interval64",
        "Text",
        "Bytes",
        "DyNumber",
    ]
)

#: Display names for the regular-expression terminals in error messages.
_TERMINAL_NAMES = {
    "IDENT": "identifier",
    "QIDENT": "quoted identifier",
    "BQIDENT": "quoted identifier",
    "STRING": "string",
    "NUMBER": "number",
    "SUFFIXED_INT": "number",
    "HEXNUM": "number",
    "BYTESTR": "byte string",
    "UUID": "uuid",
    "BLOB": "blob",
    "PARAM_NUM": "parameter",
    "$END": "end of input",
}

_CACHE_SIZE = 512


# --------------------------------------------------------------------------------------------------
# Grammar loading


#: Words that are never read as unquoted identifiers, so that ``UPDATE t SET WHERE`` reports the
#: misplaced keyword instead of treating it as a column. Every other keyword is "soft": it is an
#: identifier wherever the grammar does not expect the keyword (``key``, ``value``, ``user``...).
_RESERVED = frozenset(
    [
        "SELECT",
        "FROM",
        "WHERE",
        "AND",
        "OR",
        "NOT",
        "INSERT",
        "UPDATE",
        "DELETE",
        "INTO",
        "VALUES",
        "CREATE",
        "DROP",
        "ALTER",
        "TABLE",
        "ORDER",
        "BY",
        "LIMIT",
        "IS",
        "IN",
        "BETWEEN",
        "NULL",
        "TRUE",
        "FALSE",
        "AS",
        "ON",
        "PRIMARY",
        "WITH",
        "USING",
        "CAST",
        "DISTINCT",
        "GRANT",
        "REVOKE",
        "RETURNING",
        "ALLOW",
        "APPLY",
        "BATCH",
    ]
)

#: Of those, the words that are unreserved keywords in PostgreSQL's grammar (``kwlist.h``) or
#: CockroachDB's (``sql.y``): in the SQL dialect they are names wherever a name fits
#: (``CREATE TABLE t (id INT PRIMARY KEY, by BYTES)``). CQL reserves them, as Cassandra does.
_UNRESERVED_SQL = frozenset(
    ["BY", "INSERT", "UPDATE", "DELETE", "DROP", "ALTER", "REVOKE", "ALLOW", "APPLY", "BATCH"]
)
_RESERVED_BY_DIALECT = {"cql": _RESERVED, "sql": _RESERVED - _UNRESERVED_SQL}

#: Parses tried per text when soft keywords could also be names (``CREATE TABLE if (if INT ..)``,
#: ``CREATE TABLE t (family INT ..)``): see :class:`_KeywordChoices`.
_MAX_ATTEMPTS = 16


class _AlwaysAcceptIdent(PostLex):
    """Makes every parser state's lexer recognise identifiers, so that a misspelt keyword such as
    'FROMM' is one word and keywords a state does not expect are plain identifiers."""

    always_accept = ("IDENT",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        return stream


def _can_shift(states: Any, stack: list[Any], terminal: str) -> bool:
    """Whether the LALR parser with ``stack`` would shift ``terminal`` (after any reductions)."""
    stack = list(stack)
    while True:
        action = states[stack[-1]].get(terminal)
        if action is None:
            return False
        kind, arg = action
        if kind is Shift:
            return True
        size = len(arg.expansion)
        if size:
            del stack[-size:]
        stack.append(states[stack[-1]][arg.origin.name][1])


class _KeywordChoices:
    """One parse attempt's keyword-or-name decisions. A soft keyword where the parser could take
    the keyword and also a name is read as the keyword; ``ambiguous`` records where that
    happened, and a retry lists in ``as_name`` the positions to read as names instead (one LALR
    token of look-ahead cannot tell ``FAMILY f (a, b)`` from a column named ``family``)."""

    __slots__ = ("ambiguous", "as_name")

    def __init__(self, as_name: frozenset[int]) -> None:
        self.as_name = as_name
        self.ambiguous: list[int] = []


_choices: contextvars.ContextVar[_KeywordChoices | None] = contextvars.ContextVar(
    "changefeed_sql_keyword_choices", default=None
)


class _KeywordLexer:
    """Wraps lark's contextual lexer to settle keyword-versus-identifier.

    The contextual lexer picks keywords by the parser state *before* pending reductions, and
    LALR merges look-aheads, so a word such as ``set`` in ``c set<int>`` may come out as a keyword
    where only an identifier fits. Here a non-reserved keyword the parser cannot shift becomes an
    identifier when an identifier can be shifted; where both can, the keyword is taken and the
    choice recorded (:class:`_KeywordChoices`) so that a failed parse is retried with the word as
    a name. An identifier spelling a reserved word becomes that keyword, so ``UPDATE t SET
    WHERE`` reports 'WHERE' instead of reading it as a column."""

    def __init__(self, inner: Any, keywords: dict[str, str], reserved: frozenset[str]) -> None:
        self.inner = inner
        self.keywords = frozenset(keywords.values())
        self.reserved = {word: name for word, name in keywords.items() if word in reserved}
        self.soft = self.keywords - frozenset(self.reserved.values())

    def lex(self, lexer_state: Any, parser_state: Any) -> Iterator[Token]:
        states = parser_state.parse_conf.states
        choices = _choices.get()
        for tok in self.inner.lex(lexer_state, parser_state):
            if tok.type == "IDENT":
                kw = self.reserved.get(tok.value.upper())
                if kw is not None:
                    tok.type = kw
            elif tok.type in self.soft:
                stack = parser_state.state_stack
                if _can_shift(states, stack, tok.type):
                    if _can_shift(states, stack, "IDENT") and choices is not None:
                        if tok.start_pos in choices.as_name:
                            tok.type = "IDENT"
                        else:
                            choices.ambiguous.append(tok.start_pos)
                elif _can_shift(states, stack, "IDENT"):
                    tok.type = "IDENT"
            yield tok


def _check_block_comment(token: Token) -> Token:
    if not token.value.endswith("*/") or len(token.value) < 4:
        raise StatementSyntaxError(
            "unterminated comment", line=token.line or 0, column=token.column or 0, expected=("*/",)
        )
    return token


class _Grammar(NamedTuple):
    lark: Lark
    display: dict[str, str]  # terminal name -> how error messages show it


_grammars: dict[str, _Grammar] = {}
_grammar_lock = threading.Lock()


def _cache_file(text: str) -> str | bool:
    """Where lark keeps this grammar's analysed tables between processes (a CLI start then
    loads them instead of building the LALR tables again); keyed by the grammar text and lark's
    version. ``False`` (no cache) when no writable cache directory exists."""
    import hashlib
    import os
    import tempfile

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    for root in (
        os.path.join(base, "changefeed"),
        os.path.join(tempfile.gettempdir(), f"changefeed-{os.getuid()}"),
    ):
        try:
            os.makedirs(root, exist_ok=True)
        except OSError:
            continue
        if os.access(root, os.W_OK):
            digest = hashlib.sha256(f"{lark.__version__}\n{text}".encode()).hexdigest()[:24]
            return os.path.join(root, f"grammar-{digest}.lark-cache")
    return False


def _grammar(dialect: str) -> _Grammar:
    g = _grammars.get(dialect)
    if g is not None:
        return g
    with _grammar_lock:
        g = _grammars.get(dialect)
        if g is None:
            files = resources.files("changefeed.sql")
            text = (
                files.joinpath("grammar_common.lark").read_text(encoding="utf-8")
                + "\n"
                + files.joinpath(f"grammar_{dialect}.lark").read_text(encoding="utf-8")
            )
            parser = Lark(
                text,
                parser="lalr",
                lexer="contextual",
                propagate_positions=True,
                maybe_placeholders=True,
                postlex=_AlwaysAcceptIdent(),
                lexer_callbacks={"BLOCK_COMMENT": _check_block_comment},
                cache=_cache_file(text),
            )
            display: dict[str, str] = dict(_TERMINAL_NAMES)
            keywords: dict[str, str] = {}  # upper-cased word -> terminal name
            for term in parser.terminals:
                if isinstance(term.pattern, PatternStr):
                    value = term.pattern.value
                    display[term.name] = value.upper() if value.isidentifier() else f"'{value}'"
                    if value.isidentifier():
                        keywords[value.upper()] = term.name
                else:
                    display.setdefault(term.name, term.name.lower().replace("_", " "))
            frontend = parser.parser
            frontend.lexer = _KeywordLexer(frontend.lexer, keywords, _RESERVED_BY_DIALECT[dialect])
            g = _Grammar(parser, display)
            _grammars[dialect] = g
    return g


# --------------------------------------------------------------------------------------------------
# Tree -> AST


class _C:
    """An optional clause produced by a sub-rule, collected by the statement rule."""

    __slots__ = ("key", "value")

    def __init__(self, key: str, value: Any) -> None:
        self.key = key
        self.value = value


def _clauses(children: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in children:
        if isinstance(c, _C):
            out[c.key] = c.value
        elif isinstance(c, list):
            out.update((x.key, x.value) for x in c if isinstance(x, _C))
    return out


def _first(children: Sequence[Any], cls: type[Any]) -> Any:
    for c in children:
        if isinstance(c, cls):
            return c
    return None


def _pos(meta: Any) -> ast.Pos:
    return ast.Pos(getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


_BACKSLASH_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}
_BACKSLASH_RE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[\s\S])")


def _unbackslash(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        e = m.group(1)
        if len(e) > 1:
            return chr(int(e[1:], 16))
        return _BACKSLASH_ESCAPES.get(e, e)

    return _BACKSLASH_RE.sub(repl, s)


def _unquote_single(tok: str) -> str:
    """The text of a string constant: ``'it''s'``, or PostgreSQL's dollar-quoted ``$$it's$$`` and
    ``$tag$it's$tag$`` (the SQL dialect), whose body is taken as it is."""
    if tok.startswith("$"):
        end = tok.index("$", 1) + 1  # the opening delimiter, tag included
        return tok[end:-end]
    return tok[1:-1].replace("''", "'")


#: The start of a dollar-quoted string constant (PostgreSQL's scan.l: ``$tag$``, the tag an
#: identifier without ``$``, or empty).
_DOLLAR_OPEN = re.compile(r"\$(?:[^\W\d]\w*)?\$")


def _number(text: str) -> int | float | decimal.Decimal:
    if "e" in text or "E" in text:
        return float(text)
    if "." in text:
        return decimal.Decimal(text)
    return int(text)


def _option_value(value: ast.Expr | None) -> ast.Expr | None:
    """A bare or quoted identifier used as an option value is a string: ``format = avro``."""
    if isinstance(value, ast.Column) and value.table is None:
        return ast.Literal(value.name.name)
    return value


def _syntax_error_at(tok: Token, message: str) -> StatementSyntaxError:
    return StatementSyntaxError(message, line=tok.line or 0, column=tok.column or 0)


class _Builder(Transformer[Token, Any]):
    """Turns one statement's parse tree into AST nodes. ``?`` parameters are numbered per
    statement, so a fresh builder (or :meth:`reset`) is used for each top-level statement."""

    def __init__(self, dialect: str) -> None:
        super().__init__(visit_tokens=False)
        self.dialect = dialect
        self.next_param = 0

    # -- names ------------------------------------------------------------------------------------

    def ident(self, c: list[Token]) -> ast.Ident:
        tok = c[0]
        if tok.type == "IDENT":
            return ast.Ident(str(tok))
        body = tok[1:-1]
        if tok.type == "BQIDENT":
            return ast.Ident(body.replace("``", "`"), quoted=True)
        body = body.replace('""', '"')
        if self.dialect == "sql" and "\\" in body:
            body = _unbackslash(body)
        return ast.Ident(body, quoted=True)

    def qname(self, c: list[ast.Ident]) -> ast.QName:
        return ast.QName(tuple(c))

    def ident_list(self, c: list[ast.Ident]) -> tuple[ast.Ident, ...]:
        return tuple(c)

    def column_list(self, c: list[ast.Ident]) -> _C:
        return _C("columns", tuple(c))

    def family_item(self, c: list[ast.Ident]) -> ast.Ident:
        """Apache Phoenix ``B.vb`` in a column list: the column (names are unique across
        families here), checked against its family by the Phoenix statements."""
        if self.dialect != "sql":
            raise ValueError(f"unexpected '.' in column name {c[0].name}.{c[1].name}")
        return c[1]

    # -- clauses ----------------------------------------------------------------------------------

    def if_not_exists(self, c: list[Any]) -> _C:
        return _C("if_not_exists", True)

    def if_exists(self, c: list[Any]) -> _C:
        return _C("if_exists", True)

    def distinct(self, c: list[Any]) -> _C:
        return _C("distinct", True)

    def allow_filtering(self, c: list[Any]) -> _C:
        return _C("allow_filtering", True)

    def bypass_cache(self, c: list[Any]) -> _C:
        return _C("bypass_cache", True)

    def where_clause(self, c: list[ast.Expr]) -> _C:
        return _C("where", c[0])

    def order_by(self, c: list[ast.OrderItem]) -> _C:
        return _C("order_by", tuple(c))

    def group_by(self, c: list[tuple[ast.Expr, ...]]) -> _C:
        return _C("group_by", tuple(c[0]))

    def order_item(self, c: list[Any]) -> ast.OrderItem:
        return ast.OrderItem(c[0], descending=c[1] == "DESC")

    def order_dir(self, c: list[Token]) -> str:
        return str(c[0]).upper()

    def limit_clause(self, c: list[ast.Expr]) -> _C:
        return _C("limit", c[0])

    def select_list(self, c: list[ast.SelectItem]) -> tuple[ast.SelectItem, ...]:
        return tuple(c)

    def star_item(self, c: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(ast.Star())

    def select_item(self, c: list[Any]) -> ast.SelectItem:
        return ast.SelectItem(c[0], c[1])

    def alias(self, c: list[ast.Ident]) -> ast.Ident:
        return c[-1]

    def assignments(self, c: list[tuple[ast.Ident, ast.Expr]]) -> _C:
        return _C("assignments", tuple(c))

    def assignment(self, c: list[Any]) -> tuple[ast.Ident, ast.Expr]:
        return (c[0], c[1])

    def option_kv(self, c: list[Any]) -> ast.Option:
        return (c[0].name.lower(), _option_value(c[1]))

    def returning(self, c: list[tuple[ast.SelectItem, ...]]) -> _C:
        return _C("returning", c[0])

    # -- expressions ------------------------------------------------------------------------------

    def or_op(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.BinaryOp("OR", c[0], c[1])

    def and_op(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.BinaryOp("AND", c[0], c[1])

    def not_op(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.UnaryOp("NOT", c[0])

    def comp_op(self, c: list[Token]) -> str:
        op = str(c[0])
        return "!=" if op == "<>" else op

    def add_op(self, c: list[Token]) -> str:
        return str(c[0])

    def mul_op(self, c: list[Token]) -> str:
        return str(c[0])

    def compare(self, c: list[Any]) -> ast.Expr:
        return ast.BinaryOp(c[1], c[0], c[2])

    def arith(self, c: list[Any]) -> ast.Expr:
        return ast.BinaryOp(c[1], c[0], c[2])

    def concat_op(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.BinaryOp("||", c[0], c[1])

    def is_null(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsNull(c[0])

    def is_not_null(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsNull(c[0], negated=True)

    def in_list(self, c: list[Any]) -> ast.Expr:
        return ast.InList(c[0], c[1])

    def not_in_list(self, c: list[Any]) -> ast.Expr:
        return ast.InList(c[0], c[1], negated=True)

    def between(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.Between(c[0], c[1], c[2])

    def not_between(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.Between(c[0], c[1], c[2], negated=True)

    def neg(self, c: list[ast.Expr]) -> ast.Expr:
        e = c[0]
        if (
            isinstance(e, ast.Literal)
            and isinstance(e.value, (int, float, decimal.Decimal))
            and not isinstance(e.value, bool)
        ):
            return ast.Literal(-e.value, e.suffix)
        return ast.UnaryOp("-", e)

    def pos(self, c: list[ast.Expr]) -> ast.Expr:
        e = c[0]
        if (
            isinstance(e, ast.Literal)
            and isinstance(e.value, (int, float, decimal.Decimal))
            and not isinstance(e.value, bool)
        ):
            return e
        return ast.UnaryOp("+", e)

    def expr_list(self, c: list[ast.Expr]) -> tuple[ast.Expr, ...]:
        return tuple(c)

    def qparam(self, c: list[Any]) -> ast.Expr:
        p = ast.Param(self.next_param)
        self.next_param += 1
        return p

    def nparam(self, c: list[Token]) -> ast.Expr:
        n = int(c[0][1:])
        if n < 1:
            raise _syntax_error_at(c[0], f"invalid parameter {c[0]}: parameters are numbered from $1")
        return ast.Param(n - 1)

    def column_ref(self, c: list[ast.Ident]) -> ast.Expr:
        if len(c) == 1:
            return ast.Column(c[0])
        return ast.Column(c[1], table=c[0])

    def func_call(self, c: list[Any]) -> ast.Expr:
        name = str(c[0])
        args: tuple[ast.Expr, ...] = c[1] or ()
        if self.dialect == "sql" and name.casefold() in _TYPED_CONSTRUCTORS:
            args = tuple(
                ast.Literal(a.name.name)
                if isinstance(a, ast.Column) and a.table is None and a.name.quoted
                else a
                for a in args
            )
        return ast.FuncCall(name, args)

    def star_arg(self, c: list[Any]) -> tuple[ast.Expr, ...]:
        return (ast.Star(),)

    def args(self, c: list[ast.Expr]) -> tuple[ast.Expr, ...]:
        return tuple(c)

    def tuple_lit(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.TupleLit(tuple(c))

    def cast(self, c: list[Any]) -> ast.Expr:
        return ast.Cast(c[0], c[1])

    def pg_cast(self, c: list[Any]) -> ast.Expr:
        return ast.Cast(c[0], c[1])

    def number(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(_number(str(c[0])))

    def string(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(_unquote_single(str(c[0])))

    def null(self, c: list[Any]) -> ast.Expr:
        return ast.Literal(None)

    def true(self, c: list[Any]) -> ast.Expr:
        return ast.Literal(True)

    def false(self, c: list[Any]) -> ast.Expr:
        return ast.Literal(False)

    # CQL literals
    def uuid_lit(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(uuid.UUID(str(c[0])))

    def blob_lit(self, c: list[Token]) -> ast.Expr:
        digits = str(c[0])[2:]
        if len(digits) % 2:
            raise _syntax_error_at(c[0], f"invalid blob literal {c[0]}: odd number of hex digits")
        return ast.Literal(bytes.fromhex(digits))

    def nan(self, c: list[Any]) -> ast.Expr:
        return ast.Literal(math.nan)

    def infinity(self, c: list[Any]) -> ast.Expr:
        return ast.Literal(math.inf)

    def map_lit(self, c: list[Any]) -> ast.Expr:
        return ast.MapLit(tuple(x for x in c if x is not None))

    def map_item(self, c: list[ast.Expr]) -> tuple[ast.Expr, ast.Expr]:
        return (c[0], c[1])

    def list_lit(self, c: list[Any]) -> ast.Expr:
        return ast.ArrayLit(tuple(x for x in c if x is not None))

    # SQL literals
    def array_lit(self, c: list[Any]) -> ast.Expr:
        return ast.ArrayLit(tuple(x for x in c if x is not None))

    def bytes_lit(self, c: list[Token]) -> ast.Expr:
        tok = str(c[0])
        body = _unquote_single(tok[1:])
        if tok[0] in "xX":
            try:
                return ast.Literal(bytes.fromhex(body))
            except ValueError:
                raise _syntax_error_at(c[0], f"invalid hex byte string {tok}") from None
        return ast.Literal(body.encode())

    def hex_lit(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(int(str(c[0]), 16))

    def suffixed_int(self, c: list[Token]) -> ast.Expr:
        m = re.fullmatch(r"(\d+)([a-zA-Z]+)", str(c[0]))
        assert m is not None
        return ast.Literal(int(m.group(1)), suffix=m.group(2).lower())

    def typed_string(self, c: list[Token]) -> ast.Expr:
        return ast.Cast(ast.Literal(_unquote_single(str(c[1]))), ast.TypeName(str(c[0])))

    # -- types ------------------------------------------------------------------------------------

    def type_name(self, c: list[Any]) -> ast.TypeName:
        if self.dialect == "cql":
            name = str(c[0])
            if c[1]:
                name += "<" + ", ".join(t.name for t in c[1]) + ">"
            return ast.TypeName(name)
        params: tuple[int, ...] = c[1] or ()
        return ast.TypeName(c[0], params, array=len(c) > 2)

    def type_args(self, c: list[ast.TypeName]) -> tuple[ast.TypeName, ...]:
        return tuple(c)

    def type_base(self, c: list[Token]) -> str:
        return " ".join(str(t) for t in c)

    def type_params(self, c: list[Token]) -> tuple[int, ...]:
        out = []
        for t in c:
            v = _number(str(t))
            if not isinstance(v, int):
                raise _syntax_error_at(t, f"type parameters must be integers, not {t}")
            out.append(v)
        return tuple(out)

    def type_array(self, c: list[Token]) -> bool:
        return True

    # -- DDL --------------------------------------------------------------------------------------

    def _create_table(self, meta: Any, c: list[Any], extra: dict[str, Any]) -> ast.CreateTable:
        cl = _clauses(c)
        pks = [x for x in c if isinstance(x, ast.PrimaryKey)]
        if len(pks) > 1:
            raise StatementSyntaxError(
                "more than one PRIMARY KEY clause", line=_pos(meta).line, column=_pos(meta).column
            )
        return ast.CreateTable(
            name=_first(c, ast.QName),
            columns=tuple(x for x in c if isinstance(x, ast.ColumnDef)),
            primary_key=pks[0] if pks else None,
            families=tuple(x for x in c if isinstance(x, ast.FamilyDef)),
            options=cl.get("options", ()),
            clustering_order=cl.get("clustering_order", ()),
            if_not_exists=cl.get("if_not_exists", False),
            pos=_pos(meta),
            **extra,
        )

    @v_args(meta=True)
    def create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        phoenix_pk = any(isinstance(x, _ColumnThenKey) for x in c)
        table = self._create_table(meta, _flatten_column_then_key(c), {})
        if phoenix_pk or _phoenix_only(table):  # Apache Phoenix (issue 11): a Phoenix table
            return ast.PhoenixCreateTable(table, pos=table.pos)
        return table

    @v_args(meta=True)
    def cql_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._create_table(meta, c, {})

    def column_def(self, c: list[Any]) -> ast.ColumnDef:
        q = _clauses(c[2:])
        computed = q.get("computed")
        return ast.ColumnDef(
            name=c[0],
            type=c[1],
            primary_key=q.get("primary_key", False),
            not_null=q.get("not_null", False),
            default=q.get("default"),
            computed=computed[0] if computed else None,
            virtual=bool(computed and computed[1]),
            family=q.get("family"),
        )

    def cq_primary_key(self, c: list[Any]) -> _C:
        return _C("primary_key", True)

    def cq_not_null(self, c: list[Any]) -> _C:
        return _C("not_null", True)

    def cq_null(self, c: list[Any]) -> _C:
        return _C("not_null", False)

    def cq_default(self, c: list[ast.Expr]) -> _C:
        return _C("default", c[0])

    def cq_computed(self, c: list[Any]) -> _C:
        return _C("computed", (c[0], c[1] == "VIRTUAL"))

    def computed_kind(self, c: list[Token]) -> str:
        return str(c[0]).upper()

    def cq_family(self, c: list[ast.Ident]) -> _C:
        return _C("family", c[0])

    def pk_def(self, c: list[Any]) -> ast.PrimaryKey:
        return ast.PrimaryKey(partition=c[-1])

    def pk_cols(self, c: list[ast.Ident]) -> tuple[ast.Ident, ...]:
        return tuple(c)

    def pk_col(self, c: list[Any]) -> ast.Ident:
        name: ast.Ident = c[0]  # the ASC/DESC that may follow is irrelevant to the key
        return name

    def family_def(self, c: list[Any]) -> ast.FamilyDef:
        return ast.FamilyDef(c[0], c[1])

    def table_with(self, c: list[ast.Option]) -> _C:
        return _C("options", tuple(c))

    def cql_column_def(self, c: list[Any]) -> ast.ColumnDef:
        return ast.ColumnDef(name=c[0], type=c[1], static=c[2] is not None, primary_key=c[3] is not None)

    def static(self, c: list[Any]) -> bool:
        return True

    def inline_pk(self, c: list[Any]) -> bool:
        return True

    def cql_pk_def(self, c: list[Any]) -> ast.PrimaryKey:
        return ast.PrimaryKey(partition=c[0], clustering=tuple(c[1:]))

    def pk_partition(self, c: list[Any]) -> tuple[ast.Ident, ...]:
        return c[0] if isinstance(c[0], tuple) else (c[0],)

    def cql_table_props(self, c: list[Any]) -> list[_C]:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, _C))
        order: tuple[ast.ClusteringOrder, ...] = ()
        for x in c:
            if isinstance(x, _C):
                order += x.value
        return [_C("options", options), _C("clustering_order", order)]

    def clustering_order(self, c: list[ast.ClusteringOrder]) -> _C:
        return _C("clustering_order", tuple(c))

    def clustering_item(self, c: list[Any]) -> ast.ClusteringOrder:
        return ast.ClusteringOrder(c[0], descending=c[1] == "DESC")

    @v_args(meta=True)
    def create_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, _C))
        return ast.CreateKeyspace(
            _first(c, ast.Ident), cl.get("if_not_exists", False), options, pos=_pos(meta)
        )

    @v_args(meta=True)
    def create_database(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.CreateKeyspace(_first(c, ast.Ident), cl.get("if_not_exists", False), pos=_pos(meta))

    @v_args(meta=True)
    def drop_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropKeyspace(_first(c, ast.Ident), _clauses(c).get("if_exists", False), pos=_pos(meta))

    drop_database = drop_keyspace

    @v_args(meta=True)
    def drop_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropTable(_first(c, ast.QName), _clauses(c).get("if_exists", False), pos=_pos(meta))

    def drop_behavior(self, c: list[Any]) -> None:
        return None

    @v_args(meta=True)
    def use_ks(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.UseKeyspace(_first(c, ast.Ident), pos=_pos(meta))

    use_db = use_ks

    @v_args(meta=True)
    def create_enum(self, meta: Any, c: list[Any]) -> ast.Statement:
        labels = tuple(_unquote_single(str(t)) for t in c if isinstance(t, Token))
        return ast.CreateEnum(
            _first(c, ast.QName), labels, _clauses(c).get("if_not_exists", False), pos=_pos(meta)
        )

    # ALTER TABLE
    @v_args(meta=True)
    def alter_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterTable(c[0], tuple(c[1:]), pos=_pos(meta))

    @v_args(meta=True)
    def cql_alter_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterTable(c[0], tuple(c[1]), pos=_pos(meta))

    def add_column(self, c: list[Any]) -> ast.AlterAction:
        return ast.AddColumn(_first(c, ast.ColumnDef), _clauses(c).get("if_not_exists", False))

    def drop_column(self, c: list[Any]) -> ast.AlterAction:
        return ast.DropColumn(_first(c, ast.Ident), _clauses(c).get("if_exists", False))

    def add_changefeed(self, c: list[Any]) -> ast.AlterAction:
        return ast.AddChangefeed(c[0], tuple(c[1:]))

    def drop_changefeed(self, c: list[Any]) -> ast.AlterAction:
        return ast.DropChangefeed(c[0])

    def set_options(self, c: list[ast.Option]) -> ast.AlterAction:
        return ast.SetOptions(tuple(c))

    def cql_add(self, c: list[ast.ColumnDef]) -> list[ast.AlterAction]:
        return [ast.AddColumn(x) for x in c]

    def cql_drop(self, c: list[Any]) -> list[ast.AlterAction]:
        names = c[0] if isinstance(c[0], tuple) else (c[0],)
        return [ast.DropColumn(x) for x in names]

    def cql_set_props(self, c: list[ast.Option]) -> list[ast.AlterAction]:
        return [ast.SetOptions(tuple(c))]

    # users, grants, changefeeds
    @v_args(meta=True)
    def create_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, _C))
        return ast.CreateUser(
            _first(c, ast.Ident), _clauses(c).get("if_not_exists", False), options, pos=_pos(meta)
        )

    def role_opt(self, c: list[Any]) -> ast.Option:
        return (str(c[0]).lower(), c[1])

    def privileges(self, c: list[str]) -> tuple[str, ...]:
        return tuple(c)

    def privilege(self, c: list[Token]) -> str:
        word = str(c[0]).upper()
        return word

    def _grant(self, meta: Any, c: list[Any], revoke: bool, default: bool) -> ast.Grant:
        privileges: tuple[str, ...] = c[0]
        grantees: tuple[ast.Ident, ...] = c[-1]
        tables = () if default else tuple(x for x in c if isinstance(x, ast.QName))
        return ast.Grant(privileges, tables, grantees, revoke=revoke, pos=_pos(meta))

    @v_args(meta=True)
    def grant(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=False, default=False)

    @v_args(meta=True)
    def revoke(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=True, default=False)

    @v_args(meta=True)
    def default_grant(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=False, default=True)

    @v_args(meta=True)
    def default_revoke(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant(meta, c, revoke=True, default=True)

    @v_args(meta=True)
    def create_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.CreateChangefeed(c[0], cl.get("sink"), cl.get("options", ()), pos=_pos(meta))

    @v_args(meta=True)
    def create_changefeed_query(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        tok = c[-1]
        return ast.CreateChangefeed(
            (),
            cl.get("sink"),
            cl.get("options", ()),
            pos=_pos(meta),
            query=str(tok).rstrip(),
            query_pos=ast.Pos(tok.line or 0, tok.column or 0),
        )

    @v_args(meta=True)
    def experimental_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.CreateChangefeed(c[0], None, _clauses(c).get("options", ()), core=True, pos=_pos(meta))

    def cf_targets(self, c: list[ast.ChangefeedTarget]) -> tuple[ast.ChangefeedTarget, ...]:
        return tuple(c)

    def cf_target(self, c: list[Any]) -> ast.ChangefeedTarget:
        return ast.ChangefeedTarget(_first(c, ast.QName), _first(c, ast.Ident))

    def cf_into(self, c: list[ast.Expr]) -> _C:
        return _C("sink", _option_value(c[0]))

    def cf_with(self, c: list[ast.Option]) -> _C:
        return _C("options", tuple(c))

    def cf_option(self, c: list[Any]) -> ast.Option:
        return (c[0].name.lower(), _option_value(c[1]))

    # -- DML --------------------------------------------------------------------------------------

    @v_args(meta=True)
    def insert(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.Insert(
            table=c[1],
            columns=cl.get("columns", ()),
            rows=cl["rows"],
            mode=c[0],
            on_conflict_do_nothing="on_conflict" in cl,
            returning=cl.get("returning", ()),
            pos=_pos(meta),
        )

    def insert_verb(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def insert_rows(self, c: list[tuple[ast.Expr, ...]]) -> _C:
        return _C("rows", tuple(c))

    def row(self, c: list[tuple[ast.Expr, ...]]) -> tuple[ast.Expr, ...]:
        return c[0]

    def on_conflict(self, c: list[Any]) -> _C:
        return _C("on_conflict", True)

    @v_args(meta=True)
    def cql_insert(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        using = cl.get("using", {})
        return ast.Insert(
            table=c[0],
            columns=cl["columns"],
            rows=cl["rows"],
            if_not_exists=cl.get("if_not_exists", False),
            ttl=using.get("ttl"),
            timestamp=using.get("timestamp"),
            pos=_pos(meta),
        )

    def cql_values(self, c: list[tuple[ast.Expr, ...]]) -> _C:
        return _C("rows", (c[0],))

    def using_clause(self, c: list[tuple[str, ast.Expr]]) -> _C:
        return _C("using", dict(c))

    def using_ttl(self, c: list[ast.Expr]) -> tuple[str, ast.Expr]:
        return ("ttl", c[0])

    def using_timestamp(self, c: list[ast.Expr]) -> tuple[str, ast.Expr]:
        return ("timestamp", c[0])

    def using_timeout(self, c: list[Any]) -> tuple[str, Any]:
        # ScyllaDB's per-statement timeout: accepted; statements here are not cut short by time
        return ("timeout", None)

    @v_args(meta=True)
    def update(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.Update(
            table=c[0],
            assignments=cl["assignments"],
            where=cl.get("where"),
            returning=cl.get("returning", ()),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def cql_update(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        using = cl.get("using", {})
        return ast.Update(
            table=c[0],
            assignments=cl["assignments"],
            where=cl.get("where"),
            if_exists=cl.get("if_exists", False),
            ttl=using.get("ttl"),
            timestamp=using.get("timestamp"),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def delete(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.Delete(
            table=c[0], where=cl.get("where"), returning=cl.get("returning", ()), pos=_pos(meta)
        )

    @v_args(meta=True)
    def cql_delete(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        using = cl.get("using", {})
        if "ttl" in using:
            raise StatementSyntaxError(
                "DELETE does not accept USING TTL", line=_pos(meta).line, column=_pos(meta).column
            )
        return ast.Delete(
            table=c[1],
            columns=c[0] or (),
            where=cl.get("where"),
            if_exists=cl.get("if_exists", False),
            timestamp=using.get("timestamp"),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def select(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._select(meta, c)

    def _select(self, meta: Any, c: list[Any]) -> ast.Select:
        cl = _clauses(c)
        return ast.Select(
            items=_first(c, tuple),
            table=cl.get("table"),
            where=cl.get("where"),
            order_by=cl.get("order_by", ()),
            limit=cl.get("limit"),
            distinct=cl.get("distinct", False),
            allow_filtering=cl.get("allow_filtering", False),
            group_by=cl.get("group_by", ()),
            as_of=cl.get("as_of"),
            pos=_pos(meta),
            source=cl.get("source"),
        )

    @v_args(meta=True)
    def cql_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._select(meta, [*c, _C("table", _first(c, ast.QName))])

    def from_clause(self, c: list[Any]) -> list[_C]:
        out = [_C("table", c[0])]
        if c[1] is not None:
            out.append(c[1])
        return out

    def from_statement(self, c: list[Any]) -> _C:
        """CockroachDB's ``FROM [<statement>]``: the statement's rows are the relation."""
        return _C("source", c[0])

    def as_of(self, c: list[ast.Expr]) -> _C:
        return _C("as_of", c[0])

    @v_args(meta=True)
    def batch(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        using = cl.get("using", {})
        if "ttl" in using:
            raise StatementSyntaxError(
                "BATCH does not accept USING TTL", line=_pos(meta).line, column=_pos(meta).column
            )
        kind: Literal["logged", "unlogged", "counter"] = c[0] or "logged"
        return ast.Batch(cl["statements"], kind, using.get("timestamp"), pos=_pos(meta))

    def batch_kind(self, c: list[Token]) -> str:
        return str(c[0]).lower()

    def batch_body(self, c: list[Any]) -> _C:
        return _C("statements", tuple(c))

    # -- sessions ---------------------------------------------------------------------------------

    @v_args(meta=True)
    def begin(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Begin(pos=_pos(meta))

    @v_args(meta=True)
    def commit(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Commit(pos=_pos(meta))

    @v_args(meta=True)
    def rollback(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Rollback(pos=_pos(meta))

    def txn_word(self, c: list[Any]) -> None:
        return None

    def _show(self, meta: Any, what: str, c: list[Any]) -> ast.Show:
        return ast.Show(what, _first(c, ast.QName), pos=_pos(meta))

    # ---- CockroachDB changefeed jobs and zone configurations (jobs) ----------------------------
    def string_label(self, c: list[Token]) -> ast.Ident:
        return ast.Ident(_unquote_single(str(c[0])), quoted=True)

    @v_args(meta=True)
    def create_external_connection(self, meta: Any, c: list[Any]) -> ast.Statement:
        label = _first(c, ast.Ident)
        return ast.CreateExternalConnection(
            label.name if label.quoted else label.name.lower(),
            c[-1],
            _clauses(c).get("if_not_exists", False),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def drop_external_connection(self, meta: Any, c: list[Any]) -> ast.Statement:
        label = _first(c, ast.Ident)
        return ast.DropExternalConnection(
            label.name if label.quoted else label.name.lower(),
            _clauses(c).get("if_exists", False),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def pause_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("pause", c[0], pos=_pos(meta))

    @v_args(meta=True)
    def resume_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("resume", c[0], pos=_pos(meta))

    @v_args(meta=True)
    def cancel_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.JobControl("cancel", c[0], pos=_pos(meta))

    @v_args(meta=True)
    def show_changefeed_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowChangefeedJob(c[0], pos=_pos(meta))

    def when_complete(self, c: list[Any]) -> _C:
        return _C("block", True)

    @v_args(meta=True)
    def show_job(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(job_id=c[-1], block=c[0] is not None, pos=_pos(meta))

    @v_args(meta=True)
    def show_jobs_of(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(query=c[-1], block=c[0] is not None, pos=_pos(meta))

    @v_args(meta=True)
    def show_changefeed_jobs_of(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.ShowJobsOf(query=c[0], changefeed=True, pos=_pos(meta))

    @v_args(meta=True)
    def alter_changefeed(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.AlterChangefeed(c[0], tuple(c[1:]), pos=_pos(meta))

    def alter_cf_add(self, c: list[Any]) -> ast.AlterChangefeedCmd:
        targets = tuple(x for x in c if isinstance(x, ast.ChangefeedTarget))
        return ast.AlterChangefeedCmd("add", targets, _clauses(c).get("options", ()))

    def alter_cf_drop(self, c: list[Any]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("drop", tuple(c))

    def alter_cf_set(self, c: list[ast.Option]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("set", options=tuple(c))

    def alter_cf_unset(self, c: list[ast.Ident]) -> ast.AlterChangefeedCmd:
        return ast.AlterChangefeedCmd("unset", names=tuple(i.name.lower() for i in c))

    def configure_zone(self, c: list[ast.Option]) -> ast.AlterAction:
        return ast.ConfigureZone(tuple(c))

    def zone_kv(self, c: list[Any]) -> ast.Option:
        return (".".join(i.name.lower() for i in c[:-1]), c[-1])

    # ---- end of jobs block

    @v_args(meta=True)
    def show_tables(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "tables", c)

    @v_args(meta=True)
    def show_changefeed_jobs(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "changefeed jobs", c)

    @v_args(meta=True)
    def show_jobs(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "jobs", c)

    @v_args(meta=True)
    def show_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "create table", c)

    @v_args(meta=True)
    def show_columns(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "columns", c)

    @v_args(meta=True)
    def show_databases(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "databases", c)

    describe_table = show_create_table
    describe_tables = show_tables

    @v_args(meta=True)
    def describe_keyspace(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.Show("create keyspace", ast.QName((c[0],)), pos=_pos(meta))

    @v_args(meta=True)
    def describe_keyspaces(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._show(meta, "keyspaces", c)

    # -- access: users, roles, SHOW GRANTS ------------------------------------------------------
    @v_args(meta=True)
    def drop_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropUser(_first(c, tuple), _clauses(c).get("if_exists", False), pos=_pos(meta))

    @v_args(meta=True)
    def alter_user(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple) and not isinstance(x, _C))
        return ast.AlterUser(
            _first(c, ast.Ident), options, _clauses(c).get("if_exists", False), pos=_pos(meta)
        )

    def with_admin_option(self, c: list[Any]) -> _C:
        return _C("admin_option", True)

    def _grant_role(self, meta: Any, c: list[Any], revoke: bool) -> ast.GrantRole:
        roles = tuple(ast.Ident(p.lower(), False) for p in next(x for x in c if isinstance(x, tuple)))
        members: tuple[ast.Ident, ...] = [x for x in c if isinstance(x, tuple)][-1]
        admin = _clauses(c).get("admin_option", False)
        return ast.GrantRole(roles, members, revoke=revoke, admin_option=admin, pos=_pos(meta))

    @v_args(meta=True)
    def revoke_admin_option(self, meta: Any, c: list[Any]) -> ast.Statement:
        if c[0] != "ADMIN":
            raise StatementSyntaxError(
                f"expected ADMIN OPTION FOR, found {c[0]} OPTION FOR", line=meta.line, column=meta.column
            )
        g = self._grant_role(meta, c[1:], revoke=True)
        return ast.GrantRole(g.roles, g.members, revoke=True, admin_option=True, pos=g.pos)

    @v_args(meta=True)
    def grant_role(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant_role(meta, c, revoke=False)

    @v_args(meta=True)
    def revoke_role(self, meta: Any, c: list[Any]) -> ast.Statement:
        return self._grant_role(meta, c, revoke=True)

    def grants_on(self, c: list[Any]) -> _C:
        return _C("tables", tuple(c))

    def grants_for(self, c: list[Any]) -> _C:
        return _C("grantees", c[0])

    @v_args(meta=True)
    def show_grants(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.ShowGrants(cl.get("tables", ()), cl.get("grantees", ()), pos=_pos(meta))

    # -- Apache Phoenix (issue 11) -----------------------------------------------------------------

    def phoenix_family_column(self, c: list[Any]) -> ast.ColumnDef:
        col = self.column_def(c[1:])
        return ast.FamilyColumnDef(
            name=col.name,
            type=col.type,
            primary_key=col.primary_key,
            not_null=col.not_null,
            default=col.default,
            family=c[0],
        )

    def phoenix_immutable(self, c: list[Any]) -> _C:
        return _C("immutable", True)

    def phoenix_props(self, c: list[ast.PhoenixProperty]) -> _C:
        return _C("phoenix_props", tuple(c))

    def phoenix_prop(self, c: list[Any]) -> ast.PhoenixProperty:
        if c[1] is None:
            return ast.PhoenixProperty(c[0], c[2])
        return ast.PhoenixProperty(c[1], c[2], family=c[0])

    def phoenix_column_pk(self, c: list[Any]) -> _ColumnThenKey:
        return _ColumnThenKey((c[0], ast.PrimaryKey(partition=c[-1])))

    @v_args(meta=True)
    def phoenix_create_table(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        table = self._create_table(meta, _flatten_column_then_key(c), {})
        return ast.PhoenixCreateTable(
            table, cl.get("phoenix_props", ()), bool(cl.get("immutable")), pos=_pos(meta)
        )

    def phoenix_set(self, c: list[ast.PhoenixProperty]) -> ast.AlterAction:
        return ast.PhoenixSetProperties(tuple(c))

    def cdc_include(self, c: list[ast.Ident]) -> _C:
        return _C("include", tuple(c))

    # -- YDB asynchronous replication (issue 20) ---------------------------------------------------

    def repl_item(self, c: list[ast.QName]) -> ast.ReplicationItem:
        return ast.ReplicationItem(c[0], c[1])

    def repl_cascade(self, c: list[Any]) -> _C:
        return _C("cascade", True)

    def or_replace(self, c: list[Any]) -> _C:
        return _C("or_replace", True)

    @v_args(meta=True)
    def create_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        items = tuple(x for x in c if isinstance(x, ast.ReplicationItem))
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.CreateAsyncReplication(_first(c, ast.QName), items, options, pos=_pos(meta))

    @v_args(meta=True)
    def alter_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.AlterAsyncReplication(_first(c, ast.QName), options, pos=_pos(meta))

    @v_args(meta=True)
    def drop_async_replication(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropAsyncReplication(
            _first(c, ast.QName), _clauses(c).get("cascade", False), pos=_pos(meta)
        )

    @v_args(meta=True)
    def create_secret(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        options = tuple(x for x in c if isinstance(x, tuple))
        return ast.CreateSecret(
            _first(c, ast.QName),
            options,
            or_replace=cl.get("or_replace", False),
            if_not_exists=cl.get("if_not_exists", False),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def drop_secret(self, meta: Any, c: list[Any]) -> ast.Statement:
        return ast.DropSecret(_first(c, ast.QName), _clauses(c).get("if_exists", False), pos=_pos(meta))

    @v_args(meta=True)
    def create_cdc(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        idents = [x for x in c if isinstance(x, ast.Ident)]
        return ast.CreateCdc(
            name=idents[0],
            table=_first(c, ast.QName),
            include=cl.get("include"),
            properties=cl.get("phoenix_props", ()),
            if_not_exists=cl.get("if_not_exists", False),
            pos=_pos(meta),
        )

    @v_args(meta=True)
    def drop_cdc(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        return ast.DropCdc(
            _first(c, ast.Ident), _first(c, ast.QName), cl.get("if_exists", False), pos=_pos(meta)
        )

    @v_args(meta=True)
    def upsert_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        cl = _clauses(c)
        if c[0] != "upsert":
            raise StatementSyntaxError(
                f"{c[0].upper()} INTO .. SELECT is not supported; use UPSERT INTO .. SELECT",
                line=_pos(meta).line,
                column=_pos(meta).column,
            )
        return ast.UpsertSelect(c[1], cl.get("columns", ()), _first(c, ast.Select), pos=_pos(meta))

    @v_args(meta=True)
    def hinted_select(self, meta: Any, c: list[Any]) -> ast.Statement:
        hint = str(c[0])[3:-2].strip()
        return ast.HintedSelect(self._select(meta, c[1:]), hint, pos=_pos(meta))


class _ColumnThenKey(tuple[Any, ...]):
    """Phoenix's ``v BIGINT CONSTRAINT pk PRIMARY KEY (k)``: a column, then the key, no comma."""


def _flatten_column_then_key(c: list[Any]) -> list[Any]:
    out: list[Any] = []
    for x in c:
        out.extend(x) if isinstance(x, _ColumnThenKey) else out.append(x)
    return out


def _phoenix_only(table: ast.CreateTable) -> bool:
    """Apache Phoenix (issue 11): whether a CREATE TABLE uses syntax only Phoenix has: a column in
    a named column family (``B.vb INTEGER``) or a Phoenix-only type (``TINYINT``, ``UNSIGNED_INT``,
    ``VARBINARY``, ``BINARY(n)``...)."""
    from changefeed.engine.phoenix_types import is_phoenix_only_type

    return any(
        isinstance(cd, ast.FamilyColumnDef) or is_phoenix_only_type(cd.type.name) for cd in table.columns
    )


# --------------------------------------------------------------------------------------------------
# Errors


def _acceptable(state: Any) -> set[str]:
    """The terminals that really let the parser advance from ``state`` (LALR tables merge
    look-aheads, so the raw table row may list tokens that would fail after a reduction)."""
    row = state.parse_conf.states[state.position]
    conf = copy.copy(state.parse_conf)
    conf.callbacks = {}
    out: set[str] = set()
    for name in row:
        if not name.isupper():  # a non-terminal (goto entry)
            continue
        trial = type(state)(conf, state.lexer, list(state.state_stack), list(state.value_stack))
        try:
            trial.feed_token(Token(name, ""), is_end=name == "$END")
        except UnexpectedToken:
            continue
        except (AssertionError, KeyError):
            pass  # reached the accepting state
        out.add(name)
    return out or {n for n in row if n.isupper()}


def _expected(exc: UnexpectedInput, display: dict[str, str]) -> tuple[str, ...]:
    state = getattr(exc, "state", None)
    try:
        names = _acceptable(state)
    except Exception:  # no parser state to look at: use what lark offers
        names = set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
    shown = {display.get(n, n.lower()) for n in names}

    def order(s: str) -> tuple[int, str]:
        if s.isupper():
            return (0, s)  # keywords
        if s.startswith("'"):
            return (1, s)  # punctuation
        return (2, s)  # identifier, number, string, end of input...

    return tuple(sorted(shown, key=order))


def _describe_token(tok: Token) -> str:
    text = str(tok)
    if len(text) > 40:
        text = text[:37] + "..."
    if tok.type == "STRING":
        return f"string {text}"
    if tok.type in ("QIDENT", "BQIDENT"):
        return f"quoted name {text}"
    return f"'{text}'"


def _end_position(text: str) -> tuple[int, int]:
    """1-based position just after the last non-blank character of ``text``."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column


def _convert_error(
    exc: UnexpectedInput, text: str, dialect: str, display: dict[str, str]
) -> StatementSyntaxError:
    expected = _expected(exc, display)
    tail = ""
    if expected:
        tail = f", expected {'one of: ' if len(expected) > 1 else ''}{', '.join(expected)}"
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        if tok.type == "$END":
            line, column = _end_position(text)
            return StatementSyntaxError(
                f"unexpected end of input{tail}", line=line, column=column, expected=expected
            )
        return StatementSyntaxError(
            f"unexpected {_describe_token(tok)}{tail}",
            line=tok.line or 0,
            column=tok.column or 0,
            expected=expected,
        )
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else 0
        ch = text[pos] if 0 <= pos < len(text) else ""
        if ch == "'":
            message = "unterminated string literal"
        elif ch == "$" and dialect == "sql" and _DOLLAR_OPEN.match(text, pos):
            message = "unterminated dollar-quoted string"
        elif ch == "`" or (ch == '"' and dialect == "cql"):
            message = "unterminated quoted identifier"
        elif ch == '"':
            message = "unterminated double-quoted string or identifier"
        else:
            message = f"unexpected character {ch!r}{tail}"
        return StatementSyntaxError(message, line=exc.line, column=exc.column, expected=expected)
    return StatementSyntaxError(
        str(exc), line=getattr(exc, "line", 0) or 0, column=getattr(exc, "column", 0) or 0
    )


# --------------------------------------------------------------------------------------------------
# Public API


def _check_dialect(dialect: str) -> None:
    if dialect not in _DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {', '.join(_DIALECTS)}")


def _parse_tree(grammar: _Grammar, text: str) -> Tree[Token]:
    """Parse ``text``; where a soft keyword could also have been a name and the parse failed,
    try again reading such words as names, latest first (at most ``_MAX_ATTEMPTS`` parses). The
    error reported is the first attempt's."""
    pending: list[frozenset[int]] = [frozenset()]
    seen: set[frozenset[int]] = set()
    first: UnexpectedInput | None = None
    attempts = 0
    while pending and attempts < _MAX_ATTEMPTS:
        as_name = pending.pop()
        if as_name in seen:
            continue
        seen.add(as_name)
        attempts += 1
        choices = _KeywordChoices(as_name)
        reset = _choices.set(choices)
        try:
            return grammar.lark.parse(text)
        except UnexpectedInput as e:
            if first is None:
                first = e
            at = _error_offset(e)
            # the latest choice before the error is the likeliest wrong one: it is tried first
            pending.extend(as_name | {p} for p in choices.ambiguous if p < at and p not in as_name)
        finally:
            _choices.reset(reset)
    assert first is not None
    raise first


def _error_offset(e: UnexpectedInput) -> int:
    tok = getattr(e, "token", None)
    if tok is not None and getattr(tok, "start_pos", None) is not None:
        return int(tok.start_pos) if tok.type != "$END" else 1 << 62
    pos = getattr(e, "pos_in_stream", None)
    return int(pos) if pos is not None else 1 << 62


def _parse_uncached(text: str, dialect: str) -> tuple[ast.Statement, ...]:
    grammar = _grammar(dialect)
    try:
        tree = _parse_tree(grammar, text)
        out: list[ast.Statement] = []
        for stmt_tree in tree.children:
            assert isinstance(stmt_tree, Tree)
            out.append(_Builder(dialect).transform(stmt_tree))
        return tuple(out)
    except StatementSyntaxError:
        raise
    except UnexpectedInput as e:
        raise _convert_error(e, text, dialect, grammar.display) from None
    except VisitError as e:
        if isinstance(e.orig_exc, StatementSyntaxError):
            raise e.orig_exc from None
        if isinstance(e.orig_exc, ValueError):
            raise StatementSyntaxError(str(e.orig_exc)) from None
        raise
    except LarkError as e:
        raise StatementSyntaxError(str(e)) from None
    except RecursionError:
        raise StatementTooComplex(
            "stack depth limit exceeded: the statement nests too deeply (a long chain of AND/OR?)"
        ) from None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_cached(text: str, dialect: str) -> tuple[ast.Statement, ...]:
    return _parse_uncached(text, dialect)


def parse(text: str, dialect: Dialect) -> list[ast.Statement]:
    """Parse a script: statements separated by ``;`` (a trailing ``;`` is optional and empty
    statements are ignored). Results are cached on ``(text, dialect)``."""
    _check_dialect(dialect)
    return list(_parse_cached(text, dialect))


def parse_one(text: str, dialect: Dialect) -> ast.Statement:
    """Parse exactly one statement (a trailing ``;`` is allowed)."""
    _check_dialect(dialect)
    statements = _parse_cached(text, dialect)
    if len(statements) == 1:
        return statements[0]
    if not statements:
        line, column = _end_position(text)
        raise StatementSyntaxError("empty statement: expected one statement", line=line, column=column)
    second = statements[1].pos
    raise StatementSyntaxError(
        f"expected a single statement, found {len(statements)}", line=second.line, column=second.column
    )


def cache_info() -> Any:
    """Statistics of the parse cache (``functools.lru_cache`` ``cache_info()``)."""
    return _parse_cached.cache_info()


def clear_cache() -> None:
    _parse_cached.cache_clear()
