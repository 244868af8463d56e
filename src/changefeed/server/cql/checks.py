"""What ScyllaDB checks of a request before and after running it, that the engine does not:

* statements this endpoint does not build (``CREATE INDEX``, materialized views, types, roles ..)
  are recognised by their leading keywords and answered ``Invalid`` with one sentence, instead
  of the parser's list of expected tokens;
* consistency levels a read may not use (``ANY``, ``EACH_QUORUM``) and a plain write may not use
  (``SERIAL``, ``LOCAL_SERIAL``);
* literals in a SELECT's WHERE are typed by the column they are compared with, as ScyllaDB types
  them when it prepares the statement: ``ts = 1704164645678`` is a timestamp in milliseconds, and
  a literal no column type reads is that type's error, in CQL's words;
* a ``sum()`` of an integer type is of that type, and one that does not fit it is ScyllaDB's
  overflow error.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import InvalidStatement
from changefeed.server.cql.types import CqlType
from changefeed.sql import ast
from changefeed.sql.session import Session
from changefeed.sql.statements.cdc_log import META_COLUMNS
from changefeed.sql.statements.common import LOG_SUFFIX

__all__ = ["check_consistency", "check_sums", "cql_words", "typed_literals", "unbuilt_statement"]

# ====================================================================== statements not built
#: Leading keywords of the CQL statements this endpoint does not build, and how the answer names
#: them. Tried in order: the first that matches names the statement.
_UNBUILT: tuple[tuple[str, str], ...] = (
    (r"CREATE (?:CUSTOM )?INDEX", "CREATE INDEX"),
    (r"DROP INDEX", "DROP INDEX"),
    (r"(CREATE|ALTER|DROP) MATERIALIZED VIEW", r"\1 MATERIALIZED VIEW"),
    (r"PRUNE MATERIALIZED VIEW", "PRUNE MATERIALIZED VIEW"),
    (r"(CREATE|ALTER|DROP) TYPE", r"\1 TYPE"),
    (r"CREATE (?:OR REPLACE )?(FUNCTION|AGGREGATE)", r"CREATE \1"),
    (r"DROP (FUNCTION|AGGREGATE)", r"DROP \1"),
    (r"(CREATE|DROP) TRIGGER", r"\1 TRIGGER"),
    (r"(CREATE|ALTER|DROP) (ROLE|USER)", r"\1 \2"),
    (r"(GRANT|REVOKE)", r"\1"),
    (r"LIST (ROLES|USERS|PERMISSIONS|ALL)", r"LIST \1"),
    (r"ALTER KEYSPACE", "ALTER KEYSPACE"),
    (r"(CREATE|ALTER|DROP|ATTACH|DETACH|LIST) SERVICE_?LEVEL", r"\1 SERVICE LEVEL"),
    (r"(LIST) (?:ATTACHED |EFFECTIVE )?SERVICE_?LEVEL", r"\1 SERVICE LEVEL"),
)
_UNBUILT_RE = [(re.compile(p + r"\b", re.IGNORECASE), shown) for p, shown in _UNBUILT]
_COMMENTS = re.compile(r"(?:\s+|--[^\n]*|//[^\n]*|/\*.*?\*/)+", re.DOTALL)


def unbuilt_statement(query: str) -> str | None:
    """The name of the unbuilt statement ``query`` starts with (``CREATE INDEX``), or None."""
    head = _COMMENTS.sub(" ", query).strip()
    for pattern, shown in _UNBUILT_RE:
        m = pattern.match(head)
        if m is not None:
            return m.expand(shown).upper()
    return None


# ====================================================================== consistency levels
ANY, EACH_QUORUM, SERIAL, LOCAL_SERIAL = 0x0000, 0x0007, 0x0008, 0x0009


def check_consistency(stmt: ast.Statement, consistency: int) -> None:
    """ScyllaDB's checks of a statement's consistency level (its ``validate_for_read`` and
    ``validate_for_write``): a read at ``ANY`` or ``EACH_QUORUM``, a write that is not conditional
    at ``SERIAL`` or ``LOCAL_SERIAL``."""
    if isinstance(stmt, ast.Select | ast.CqlSelect):
        if consistency == ANY:
            raise InvalidStatement("ANY ConsistencyLevel is only supported for writes")
        if consistency == EACH_QUORUM:
            raise InvalidStatement("EACH_QUORUM ConsistencyLevel is only supported for writes")
    elif isinstance(stmt, ast.Insert | ast.InsertJson | ast.Update | ast.Delete) and consistency in (
        SERIAL,
        LOCAL_SERIAL,
    ):
        conditional = getattr(stmt, "if_not_exists", False) or getattr(stmt, "if_exists", False)
        if not conditional:
            raise InvalidStatement("You must use conditional updates for serializable writes")


# ====================================================================== typed literals
def typed_literals(session: Session, stmt: ast.Statement) -> ast.Statement:
    """``stmt`` with each literal its SELECT's WHERE compares with a column read as that column's
    type (see the module's docstring); other statements as they are (their WHERE names keys,
    which they read so already)."""
    sel = stmt.select if isinstance(stmt, ast.CqlSelect) else stmt
    if not isinstance(sel, ast.Select) or sel.table is None:
        return stmt
    numeric = [it.expr for it in sel.items if _numeric_aggregate(it.expr)]
    if not numeric and (sel.where is None or not _has_literal(sel.where)):
        return stmt
    types = _column_types(session, sel.table)
    if not types:
        return stmt
    for call in numeric:
        _check_numeric_argument(session, call, types)
    if sel.where is None:
        return stmt
    where = _typed(session, sel.where, types)
    if where is sel.where:
        return stmt
    typed = dataclasses.replace(sel, where=where)
    return dataclasses.replace(stmt, select=typed) if isinstance(stmt, ast.CqlSelect) else typed


#: The aggregates of numbers and the types ScyllaDB declares them for.
_NUMERIC_AGGREGATES = frozenset({"sum", "avg"})
_NUMBER_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "varint", "decimal")


def _numeric_aggregate(e: ast.Expr) -> bool:
    return isinstance(e, ast.FuncCall) and e.name.lower() in _NUMERIC_AGGREGATES and len(e.args) == 1


def _check_numeric_argument(session: Session, call: ast.Expr, types: dict[str, SqlType]) -> None:
    """``sum``/``avg`` of a column that is no number: ScyllaDB's error for a call no signature of
    the function takes."""
    assert isinstance(call, ast.FuncCall)
    arg = call.args[0]
    if not isinstance(arg, ast.Column):
        return
    t = _type_of(session, arg, types)
    if t is None or t.kind in (Kind.INT, Kind.UINT, Kind.VARINT, Kind.FLOAT, Kind.DECIMAL):
        return
    name = call.name.lower()
    known = ", ".join(f"system.{name} : ({n}) -> {n}" for n in _NUMBER_TYPES)
    raise InvalidStatement(
        f"Invalid call to function {name}, none of its type signatures match (known type signatures: {known})"
    )


def _type_of(session: Session, column: ast.Column, types: dict[str, SqlType]) -> SqlType | None:
    name = session.ident(column.name)
    t = types.get(name)
    if t is None and not column.name.quoted:
        t = next((v for k, v in types.items() if k.lower() == name.lower()), None)
    return t


def _has_literal(e: ast.Expr) -> bool:
    if isinstance(e, ast.Literal):
        return e.value is not None
    if isinstance(e, ast.BinaryOp):
        return _has_literal(e.left) or _has_literal(e.right)
    if isinstance(e, ast.UnaryOp):
        return _has_literal(e.operand)
    if isinstance(e, ast.InList):
        return any(_has_literal(x) for x in e.items)
    if isinstance(e, ast.Between):
        return _has_literal(e.low) or _has_literal(e.high)
    return False


def _column_types(session: Session, q: ast.QName) -> dict[str, SqlType]:
    """The types of the columns of the table (or CDC log) ``q`` names; {} for anything else."""
    session.db.refresh_catalog()
    name = session.table_name(q)
    schema = session.db.find_table(name)
    if schema is not None:
        return {c.name: c.type for c in schema.columns}
    if name.endswith(LOG_SUFFIX):
        base = session.db.find_table(name[: -len(LOG_SUFFIX)])
        if base is not None and base.cdc.enabled:
            out = {n: resolve_type(t, dialect="cql") for n, t in META_COLUMNS}
            out.update((c.name, c.type) for c in base.columns if not c.virtual)
            return out
    return {}


def _typed(session: Session, e: ast.Expr, types: dict[str, SqlType]) -> ast.Expr:
    if isinstance(e, ast.BinaryOp):
        if e.op in ("AND", "OR"):
            left, right = _typed(session, e.left, types), _typed(session, e.right, types)
            if left is e.left and right is e.right:
                return e
            return ast.BinaryOp(e.op, left, right)
        if e.op in ("=", "!=", "<>", "<", "<=", ">", ">="):
            token = {"token": _TOKEN_TYPE}
            for tok, other, put in ((e.left, e.right, "right"), (e.right, e.left, "left")):
                if _is_token(tok) and isinstance(other, ast.Literal | ast.UnaryOp):
                    typed = _as_column_type(session, other, ast.Column(ast.Ident("token", True)), token)
                    if typed is other:
                        return e
                    return (
                        ast.BinaryOp(e.op, e.left, typed)
                        if put == "right"
                        else ast.BinaryOp(e.op, typed, e.right)
                    )
            if isinstance(e.left, ast.Column):
                right = _as_column_type(session, e.right, e.left, types)
                return e if right is e.right else ast.BinaryOp(e.op, e.left, right)
            if isinstance(e.right, ast.Column):
                left = _as_column_type(session, e.left, e.right, types)
                return e if left is e.left else ast.BinaryOp(e.op, left, e.right)
        return e
    if isinstance(e, ast.InList) and isinstance(e.expr, ast.Column):
        column = e.expr
        items = tuple(_as_column_type(session, x, column, types) for x in e.items)
        if all(a is b for a, b in zip(items, e.items, strict=True)):
            return e
        return ast.InList(e.expr, items, e.negated)
    return e


_TOKEN_TYPE = resolve_type("bigint", dialect="cql")


def _is_token(e: ast.Expr) -> bool:
    return isinstance(e, ast.FuncCall) and e.name.lower() == "token"


def _as_column_type(session: Session, e: ast.Expr, column: ast.Column, types: dict[str, SqlType]) -> ast.Expr:
    """A literal as ``column``'s type reads it (its error when it cannot); anything else as it is."""
    value: Any
    if isinstance(e, ast.Literal):
        value = e.value
    elif (
        isinstance(e, ast.UnaryOp)
        and e.op == "-"
        and isinstance(e.operand, ast.Literal)
        and isinstance(e.operand.value, int | float)
        and not isinstance(e.operand.value, bool)
    ):
        value = -e.operand.value
    else:
        return e
    if value is None or column.table is not None:
        return e
    t = _type_of(session, column, types)
    if t is None:
        return e
    return ast.Literal(t.coerce(value, f"column {session.ident(column.name)}"))


# ====================================================================== sums
_INT_RANGES = {
    "tinyint": 8,
    "smallint": 16,
    "int": 32,
    "bigint": 64,
    "counter": 64,
}


def check_sums(stmt: ast.Statement, types: Sequence[CqlType], rows: Sequence[Sequence[Any]]) -> None:
    """A ``sum()`` whose value its (integer) type cannot hold: ScyllaDB's overflow error."""
    sel = stmt.select if isinstance(stmt, ast.CqlSelect) else stmt
    if not isinstance(sel, ast.Select) or any(isinstance(it.expr, ast.Star) for it in sel.items):
        return
    if len(sel.items) != len(types):
        return
    for i, (it, t) in enumerate(zip(sel.items, types, strict=True)):
        bits = _INT_RANGES.get(t.name)
        if bits is None or not (isinstance(it.expr, ast.FuncCall) and it.expr.name.lower() == "sum"):
            continue
        lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
        for r in rows:
            v = r[i]
            if isinstance(v, int) and not lo <= v <= hi:
                raise InvalidStatement("Sum overflow. Values should be casted to a wider type.")


# ====================================================================== messages
#: The engine's names of values' types (CockroachDB's, ``engine.type_errors.value_type``) that
#: a message shows between angle brackets, and the CQL type of such a value.
_CQL_NAMES = {
    "timestamptz": "timestamp",
    "string": "text",
    "bytes": "blob",
    "bool": "boolean",
    "float": "double",
    "interval": "duration",
    "jsonb": "text",
    "unknown": "null",
}
_ANGLED = re.compile(r"<([a-z]+)(\[\])?>")


def cql_words(message: str) -> str:
    """``message`` with the value types it names (``<timestamptz>``) in CQL's names."""

    def name(m: re.Match[str]) -> str:
        t = _CQL_NAMES.get(m.group(1), m.group(1))
        return f"<list<{t}>>" if m.group(2) else f"<{t}>"

    return _ANGLED.sub(name, message)
