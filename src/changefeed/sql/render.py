"""AST expressions back to SQL text, as PostgreSQL's ``pg_get_expr`` shows a column's DEFAULT or
generation expression (``now()``, ``(id * 10)``, ``'x'::STRING``): for catalogs and ``psql``'s
``\\d``, never parsed back (the catalog keeps the AST itself, ``sql.astjson``)."""

from __future__ import annotations

import re
from decimal import Decimal

from changefeed.sql import ast

#: An identifier that needs no quotes: lower case, a letter or underscore first.
_PLAIN = re.compile(r"[a-z_][a-z0-9_$]*\Z")


def expr_sql(e: ast.Expr) -> str:
    """The SQL text of ``e``; binary operations parenthesised, as PostgreSQL prints them."""
    if isinstance(e, ast.Literal):
        return _literal(e.value)
    if isinstance(e, ast.Column):
        name = ident_sql(e.name)
        return f"{ident_sql(e.table)}.{name}" if e.table is not None else name
    if isinstance(e, ast.Param):
        return f"${e.index + 1}"
    if isinstance(e, ast.Star):
        return "*"
    if isinstance(e, ast.FuncCall):
        return f"{e.name}({'DISTINCT ' if e.distinct else ''}{', '.join(expr_sql(a) for a in e.args)})"
    if isinstance(e, ast.Cast):
        return f"{_operand(e.expr)}::{_type_sql(e.type)}"
    if isinstance(e, ast.BinaryOp):
        return f"({expr_sql(e.left)} {e.op} {expr_sql(e.right)})"
    if isinstance(e, ast.UnaryOp):
        return f"(NOT {expr_sql(e.operand)})" if e.op == "NOT" else f"({e.op}{_operand(e.operand)})"
    if isinstance(e, ast.InList):
        items = ", ".join(expr_sql(i) for i in e.items)
        return f"({expr_sql(e.expr)} {'NOT IN' if e.negated else 'IN'} ({items}))"
    if isinstance(e, ast.IsNull):
        return f"({expr_sql(e.expr)} IS {'NOT NULL' if e.negated else 'NULL'})"
    if isinstance(e, ast.Quantified):
        return f"({expr_sql(e.left)} {e.op} {e.quantifier.upper()} ({expr_sql(e.right)}))"
    if isinstance(e, ast.IsDistinct):
        word = "IS NOT DISTINCT FROM" if e.negated else "IS DISTINCT FROM"
        return f"({expr_sql(e.left)} {word} {expr_sql(e.right)})"
    if isinstance(e, ast.Between):
        word = "NOT BETWEEN" if e.negated else "BETWEEN"
        return f"({expr_sql(e.expr)} {word} {expr_sql(e.low)} AND {expr_sql(e.high)})"
    if isinstance(e, ast.Case):
        parts = ["CASE"] + ([expr_sql(e.operand)] if e.operand is not None else [])
        parts += [f"WHEN {expr_sql(w)} THEN {expr_sql(t)}" for w, t in e.whens]
        parts += [f"ELSE {expr_sql(e.default)}"] if e.default is not None else []
        return " ".join([*parts, "END"])
    if isinstance(e, ast.Like):
        word = ("NOT " if e.negated else "") + ("ILIKE" if e.insensitive else "LIKE")
        escape = f" ESCAPE {expr_sql(e.escape)}" if e.escape is not None else ""
        return f"({expr_sql(e.expr)} {word} {expr_sql(e.pattern)}{escape})"
    if isinstance(e, ast.ArrayLit):
        return f"ARRAY[{', '.join(expr_sql(i) for i in e.items)}]"
    if isinstance(e, ast.TupleLit):
        return f"({', '.join(expr_sql(i) for i in e.items)})"
    if isinstance(e, ast.MapLit):
        return "{" + ", ".join(f"{expr_sql(k)}: {expr_sql(v)}" for k, v in e.items) + "}"
    raise TypeError(f"no SQL text for {type(e).__name__}")


def ident_sql(name: ast.Ident) -> str:
    """An identifier as SQL: quoted unless it reads the same unquoted."""
    text = name.name
    if _PLAIN.match(text) and not name.quoted:
        return text
    return '"' + text.replace('"', '""') + '"'


def _operand(e: ast.Expr) -> str:
    """``e`` where an operator binds to it: anything but a name, a number or a call in parentheses."""
    text = expr_sql(e)
    simple = isinstance(e, ast.Column | ast.Param | ast.FuncCall | ast.Literal)
    return text if simple or text.startswith("(") else f"({text})"


def _type_sql(t: ast.TypeName) -> str:
    params = f"({', '.join(str(p) for p in t.params)})" if t.params else ""
    return f"{t.name}{params}{'[]' if t.array else ''}"


def _literal(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float | Decimal):
        return str(v)
    if isinstance(v, bytes):
        return f"'\\x{v.hex()}'::BYTES"
    text = str(v)  # strings, and the dates, times and UUIDs of typed literals
    return "'" + text.replace("'", "''") + "'"
