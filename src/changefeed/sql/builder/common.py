"""What the rule families of :mod:`changefeed.sql.builder` share: the :class:`Rules` base, the
:class:`Clause` a sub-rule hands to its statement rule, and the helpers for positions, string
constants, numbers and option values."""

from __future__ import annotations

import decimal
import re
from collections.abc import Sequence
from typing import Any

from lark import Token, Transformer

from changefeed.exceptions import StatementSyntaxError
from changefeed.sql import ast

__all__ = [
    "Clause",
    "Rules",
    "clauses",
    "first",
    "option_value",
    "parse_number",
    "position",
    "syntax_error_at",
    "unbackslash",
    "unquote_single",
]


class Clause:
    """An optional clause produced by a sub-rule, collected by the statement rule."""

    __slots__ = ("key", "value")

    def __init__(self, key: str, value: Any) -> None:
        self.key = key
        self.value = value


def clauses(children: Sequence[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in children:
        if isinstance(c, Clause):
            out[c.key] = c.value
        elif isinstance(c, list):
            out.update((x.key, x.value) for x in c if isinstance(x, Clause))
    return out


def first(children: Sequence[Any], cls: type[Any]) -> Any:
    for c in children:
        if isinstance(c, cls):
            return c
    return None


def position(meta: Any) -> ast.Pos:
    return ast.Pos(getattr(meta, "line", 0) or 0, getattr(meta, "column", 0) or 0)


_BACKSLASH_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "b": "\b", "f": "\f", "a": "\a", "v": "\v"}
_BACKSLASH_RE = re.compile(r"\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[\s\S])")


def unbackslash(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        e = m.group(1)
        if len(e) > 1:
            return chr(int(e[1:], 16))
        return _BACKSLASH_ESCAPES.get(e, e)

    return _BACKSLASH_RE.sub(repl, s)


def unquote_single(tok: str) -> str:
    """The text of a string constant: ``'it''s'``, or PostgreSQL's dollar-quoted ``$$it's$$`` and
    ``$tag$it's$tag$`` (the SQL dialect), whose body is taken as it is."""
    if tok.startswith("$"):
        end = tok.index("$", 1) + 1  # the opening delimiter, tag included
        return tok[end:-end]
    return tok[1:-1].replace("''", "'")


_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([\s\S]))|''"
)


def unescape_string(tok: str) -> str:
    """The text of PostgreSQL's escape string constant ``E'a\\nb'``: ``\\b \\f \\n \\r \\t``,
    octal ``\\ooo``, ``\\xhh``, ``\\uxxxx``, ``\\Uxxxxxxxx``, any other character after a backslash
    as itself (``\\'``, ``\\\\``), and ``''`` as a quote."""

    def one(m: re.Match[str]) -> str:
        octal, hex2, u4, u8, other = m.groups()
        if m.group(0) == "''":
            return "'"
        if octal is not None:
            return chr(int(octal, 8))
        code = hex2 or u4 or u8
        if code is not None:
            return chr(int(code, 16))
        return _ESCAPES.get(other, other)

    return _ESCAPE.sub(one, tok[2:-1])


def parse_number(text: str) -> int | float | decimal.Decimal:
    if "e" in text or "E" in text:
        return float(text)
    if "." in text:
        return decimal.Decimal(text)
    return int(text)


def option_value(value: ast.Expr | None) -> ast.Expr | None:
    """A bare or quoted identifier used as an option value is a string: ``format = avro``."""
    if isinstance(value, ast.Column) and value.table is None:
        return ast.Literal(value.name.name)
    return value


def syntax_error_at(tok: Token, message: str) -> StatementSyntaxError:
    return StatementSyntaxError(message, line=tok.line or 0, column=tok.column or 0)


class Rules(Transformer[Token, Any]):
    """The base of every rule family: one statement's parse tree to AST nodes, in ``dialect``.
    ``?`` parameters are numbered per statement, so a fresh builder is used for each top-level
    statement."""

    def __init__(self, dialect: str) -> None:
        super().__init__(visit_tokens=False)
        self.dialect = dialect
        self.next_param = 0
