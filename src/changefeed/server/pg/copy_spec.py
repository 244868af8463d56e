"""The ``COPY`` statement of the PostgreSQL endpoint: its grammar and its options.

``COPY t [(a, b)] FROM STDIN`` and ``COPY t [(a, b)] | (query) TO STDOUT``, with PostgreSQL's
option list (``WITH (FORMAT csv, HEADER true, DELIMITER ';', NULL '', QUOTE '"', ESCAPE '\\',
ENCODING 'UTF8')``) or its older form (``[BINARY] [DELIMITER [AS] ','] [NULL [AS] ''] [CSV
[HEADER] [QUOTE [AS] '"'] [ESCAPE [AS] '\\']]``, what psql's ``\\copy .. csv header`` sends).
Parsed with a small lark grammar of its own, as ``commands.py`` parses the session statements;
the options are checked as PostgreSQL checks them, with its words and codes. A server-side file
or program (``FROM 'file'``, ``PROGRAM``) is refused: the data comes over the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import LarkError, VisitError

from changefeed.exceptions import (
    ChangefeedError,
    InvalidOption,
    PermissionDenied,
    StatementSyntaxError,
    UnsupportedFeature,
)

__all__ = ["FORMATS", "CopySpec", "parse_copy"]

#: COPY's data formats.
FORMATS = ("text", "csv", "binary")

_GRAMMAR = r"""
start: "COPY"i source [columns] direction [options]
source: name ("." name)*                        -> table
      | QUERY                                   -> query
columns: "(" name ("," name)* ")"
direction: "FROM"i "STDIN"i                     -> from_stdin
         | "TO"i "STDOUT"i                      -> to_stdout
         | ("FROM"i | "TO"i) STRING             -> file
         | ("FROM"i | "TO"i) "PROGRAM"i STRING  -> program
options: ["WITH"i] "(" option ("," option)* ")" -> option_list
       | ["WITH"i] legacy+                      -> legacy_list
option: WORD [value]
?value: STRING | NUMBER | WORD | "(" name ("," name)* ")" -> names
legacy: "BINARY"i                               -> l_binary
      | "CSV"i                                  -> l_csv
      | "HEADER"i                               -> l_header
      | "DELIMITER"i ["AS"i] STRING             -> l_delimiter
      | "NULL"i ["AS"i] STRING                  -> l_null
      | "QUOTE"i ["AS"i] STRING                 -> l_quote
      | "ESCAPE"i ["AS"i] STRING                -> l_escape
      | "FORCE"i WORD+                          -> l_force
name: WORD | QUOTED
WORD: /[A-Za-z_][A-Za-z0-9_$]*/
QUOTED: /"(?:[^"]|"")+"/
STRING: /[Ee]'(?:[^'\\]|''|\\.)*'/ | /'(?:[^']|'')*'/
NUMBER: /[+-]?\d+(\.\d+)?/
QUERY: /\((?s:.)+\)(?=\s+TO\s)/i
%import common.WS
%ignore WS
"""

_PARSER = Lark(_GRAMMAR, parser="earley", lexer="dynamic", maybe_placeholders=True)


@dataclass(frozen=True, slots=True)
class CopySpec:
    """One ``COPY`` statement: what it reads or writes and how the data is laid out. ``table``
    and ``columns`` are as written (quoted names keep their quotes), ``query`` the text of
    ``COPY (query) TO STDOUT``'s query."""

    to: bool  # TO STDOUT; else FROM STDIN
    table: str = ""
    columns: tuple[str, ...] = ()
    query: str = ""
    format: str = "text"
    delimiter: str = "\t"
    null: str = "\\N"
    header: bool = False
    quote: str = '"'
    escape: str = '"'

    @property
    def binary(self) -> bool:
        return self.format == "binary"

    @property
    def target(self) -> str:
        """How PostgreSQL names the statement in an error's context (``COPY t``)."""
        return f"COPY {self.table}" if self.table else "COPY"


def _string(tok: Token) -> str:
    text = str(tok)
    if text[:1] in "eE":
        body = text[2:-1]
        return body.encode("latin-1", "backslashreplace").decode("unicode_escape").replace("''", "'")
    return text[1:-1].replace("''", "'")


def _bool(name: str, v: Any) -> bool:
    text = str(v).lower() if v is not None else "true"
    if text in ("true", "on", "1", "yes"):
        return True
    if text in ("false", "off", "0", "no"):
        return False
    raise InvalidOption(f"{name} requires a Boolean value")


class _Build(Transformer[Token, Any]):
    def name(self, items: list[Token]) -> str:
        return str(items[0])

    def table(self, items: list[str]) -> tuple[str, str]:
        return ("table", ".".join(items))

    def query(self, items: list[Token]) -> tuple[str, str]:
        return ("query", str(items[0])[1:-1].strip())

    def columns(self, items: list[str]) -> tuple[str, ...]:
        return tuple(items)

    def from_stdin(self, _: list[Any]) -> bool:
        return False

    def to_stdout(self, _: list[Any]) -> bool:
        return True

    def file(self, _: list[Any]) -> bool:
        raise PermissionDenied(
            "COPY to or from a file on the server is not allowed: use COPY .. FROM STDIN or TO STDOUT"
            " (psql's \\copy reads and writes the client's files)"
        )

    def program(self, _: list[Any]) -> bool:
        raise PermissionDenied("COPY to or from a program on the server is not allowed")

    def STRING(self, tok: Token) -> str:
        return _string(tok)

    def names(self, items: list[str]) -> tuple[str, ...]:
        return tuple(items)

    def option(self, items: list[Any]) -> tuple[str, Any]:
        return (str(items[0]).lower(), None if items[1] is None else items[1])

    def option_list(self, items: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
        return items

    legacy_list = option_list  # the older form gives the same (name, value) pairs

    def l_binary(self, _: list[Any]) -> tuple[str, Any]:
        return ("format", "binary")

    def l_csv(self, _: list[Any]) -> tuple[str, Any]:
        return ("format", "csv")

    def l_header(self, _: list[Any]) -> tuple[str, Any]:
        return ("header", "true")

    def l_delimiter(self, items: list[Any]) -> tuple[str, Any]:
        return ("delimiter", items[-1])

    def l_null(self, items: list[Any]) -> tuple[str, Any]:
        return ("null", items[-1])

    def l_quote(self, items: list[Any]) -> tuple[str, Any]:
        return ("quote", items[-1])

    def l_escape(self, items: list[Any]) -> tuple[str, Any]:
        return ("escape", items[-1])

    def l_force(self, items: list[Token]) -> tuple[str, Any]:
        return ("force_" + "_".join(str(t).lower() for t in items[:2]), None)

    def start(self, items: list[Any]) -> CopySpec:
        (kind, what), columns, to, options = items
        return _spec(
            to, what if kind == "table" else "", columns or (), what if kind == "query" else "", options or []
        )


def _char(name: str, v: Any) -> str:
    text = str(v)
    if len(text.encode()) != 1:
        raise UnsupportedFeature(f"COPY {name} must be a single one-byte character")
    return text


def _spec(
    to: bool, table: str, columns: tuple[str, ...], query: str, options: list[tuple[str, Any]]
) -> CopySpec:
    if query and not to:
        raise StatementSyntaxError("COPY (query) FROM is not possible: a query can only be copied TO STDOUT")
    if query and columns:
        raise StatementSyntaxError("COPY (query) takes no column list")
    seen: dict[str, Any] = {}
    for name, value in options:
        if name in seen:
            raise StatementSyntaxError("conflicting or redundant options")
        seen[name] = value
    fmt = str(seen.pop("format", "text")).lower()
    if fmt not in FORMATS:
        raise UnsupportedFeature(f'COPY format "{fmt}" not recognized')
    csv = fmt == "csv"
    out: dict[str, Any] = {"format": fmt, "delimiter": "," if csv else "\t", "null": "" if csv else "\\N"}
    for name, value in seen.items():
        if name in ("delimiter", "null", "header") and fmt == "binary":
            raise StatementSyntaxError(f"cannot specify {name.upper()} in BINARY mode")
        if name in ("quote", "escape") and not csv:
            raise UnsupportedFeature(f"COPY {name} available only in CSV mode")
        if name == "delimiter":
            out[name] = _char("delimiter", value)
        elif name in ("quote", "escape"):
            out[name] = _char(name, value)
        elif name == "null":
            out[name] = str(value)
        elif name == "header":
            if str(value).lower() == "match":
                raise UnsupportedFeature("COPY HEADER MATCH is not supported")
            out[name] = _bool("header", value)
        elif name == "encoding":
            if str(value).replace("-", "").replace("_", "").upper() != "UTF8":
                raise UnsupportedFeature(f'COPY encoding "{value}" is not supported: the data is UTF8')
        elif name in ("freeze", "oids", "force_not_null", "force_null", "force_quote", "on_error", "default"):
            raise UnsupportedFeature(f"COPY option {name.upper()} is not supported")
        else:
            raise StatementSyntaxError(f'option "{name}" not recognized')
    if csv:
        out.setdefault("quote", '"')
        out.setdefault("escape", out["quote"])
        if out["delimiter"] == out["quote"]:
            raise UnsupportedFeature("COPY delimiter and quote must be different")
        if out["escape"] != out["quote"]:
            # PostgreSQL honours it only inside quotes and only before the quote or itself;
            # refused rather than read by other rules.
            raise UnsupportedFeature("COPY ESCAPE other than the QUOTE character is not supported")
        if out["quote"] in out["null"]:
            raise InvalidOption("CSV quote character must not appear in the NULL specification")
    if fmt != "binary":
        if out["delimiter"] in "\r\n":
            raise InvalidOption("COPY delimiter cannot be newline or carriage return")
        if not csv and out["delimiter"] in "\\.abcdefghijklmnopqrstuvwxyz0123456789":
            raise InvalidOption(f'COPY delimiter cannot be "{out["delimiter"]}"')
        if out["delimiter"] in out["null"]:
            raise UnsupportedFeature("COPY delimiter must not appear in the NULL specification")
    return CopySpec(to, table, columns, query, **out)


def parse_copy(sql: str) -> CopySpec | None:
    """The ``COPY`` statement ``sql`` is, or None when it is not one (the engine's parser takes
    it). A malformed COPY raises ``42601``; options PostgreSQL refuses raise its errors."""
    words = sql.split(None, 1)
    if not words or words[0].upper() != "COPY":
        return None
    try:
        tree = _PARSER.parse(sql.strip().rstrip(";").strip())
        spec = _Build().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, ChangefeedError):
            raise exc.orig_exc from None
        raise
    except LarkError as exc:
        raise StatementSyntaxError(f"at or near COPY: {str(exc).splitlines()[0]}") from None
    assert isinstance(spec, CopySpec)
    return spec
