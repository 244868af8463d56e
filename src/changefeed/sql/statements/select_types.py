"""The types of a SELECT list's columns where an expression's shape says them: what a client
that prepares a statement learns before any row exists (RowDescription, CQL's result metadata)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal

from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedError
from changefeed.sql import ast
from changefeed.sql.builtins_more import JSON_RESULTS
from changefeed.sql.evaluator import AMBIGUOUS
from changefeed.sql.session import Session


def expr_type(
    session: Session, e: ast.Expr, types: Sequence[SqlType | None], index: Mapping[str, int]
) -> SqlType | None:
    if isinstance(e, ast.Column):
        name = session.ident(e.name)
        i = index.get(f"{session.ident(e.table)}.{name}") if e.table is not None else None
        if i is None:
            i = index.get(name)
        if i == AMBIGUOUS:
            return None
        if i is None:
            for n, j in index.items():
                if n.lower() == name.lower():
                    i = j
                    break
        return types[i] if i is not None else None
    if isinstance(e, ast.WindowCall):
        name = e.call.name.lower()
        if name in _RANKS:
            return resolve_type("INT8", dialect="sql")
        if name in ("percent_rank", "cume_dist"):
            return resolve_type("FLOAT8", dialect="sql")
        if name in _VALUES and e.call.args:
            return expr_type(session, e.call.args[0], types, index)
        e = e.call  # an aggregate: the type it has without OVER
    if isinstance(e, ast.FuncCall) and e.name.lower() == "count":
        return resolve_type("bigint", dialect="cql")
    if session.dialect != "sql":
        if isinstance(e, ast.FuncCall) and e.name.lower() in _CQL_SAME_TYPE and len(e.args) == 1:
            return expr_type(session, e.args[0], types, index)  # ScyllaDB: the argument's type
        return None
    return _sql_expr_type(session, e, types, index)


#: CQL aggregates whose result has their argument's type (ScyllaDB's ``sum(int)`` is an int).
_CQL_SAME_TYPE = frozenset({"sum", "avg", "min", "max"})
#: Window functions numbering rows (INT8), and those returning a row's value of their argument.
_RANKS = frozenset({"row_number", "rank", "dense_rank", "ntile"})
_VALUES = frozenset({"lag", "lead", "first_value", "last_value", "nth_value"})
#: Result types of SQL expressions whose type follows from their shape (see _sql_expr_type).
_SQL_TYPE = {
    n: resolve_type(n, dialect="sql")
    for n in ("INT8", "FLOAT8", "DECIMAL", "STRING", "BOOL", "BYTES", "TIMESTAMPTZ")
}
_LITERAL_TYPE = {
    bool: "BOOL",
    int: "INT8",
    float: "FLOAT8",
    Decimal: "DECIMAL",
    str: "STRING",
    bytes: "BYTES",
}
_PREDICATES = frozenset({"=", "!=", "<", "<=", ">", ">=", "AND", "OR", "@>", "<@", "&&", "?", "?|", "?&"})
_CLOCKS = frozenset({"now", "current_timestamp", "transaction_timestamp", "statement_timestamp"})
_LENGTHS = frozenset({"length", "char_length", "character_length", "octet_length", "strpos", "ascii",
                      "cardinality", "array_position", "jsonb_array_length", "json_array_length", "position",
                      "bit_length", "scale", "width_bucket"})  # fmt: skip
_TEXTS = frozenset(
    {"lower", "upper", "trim", "btrim", "ltrim", "rtrim", "concat", "concat_ws", "substr", "substring",
     "replace", "lpad", "rpad", "reverse", "repeat", "initcap", "left", "right", "split_part", "md5",
     "sha256", "to_hex", "chr", "regexp_replace", "translate", "format", "quote_ident", "array_to_string",
     "jsonb_typeof", "json_typeof", "to_char", "overlay", "quote_literal", "quote_nullable"}
)  # fmt: skip
#: The integer kinds (PostgreSQL's rounding functions take them as double precision).
_INTEGERS = frozenset({Kind.INT, Kind.UINT, Kind.VARINT})
#: Functions whose result has their (first) argument's number type.
_SAME_NUMBER = frozenset({"abs", "ceil", "ceiling", "floor", "sign"})


def _sql_expr_type(
    session: Session, e: ast.Expr, types: Sequence[SqlType | None], index: Mapping[str, int]
) -> SqlType | None:
    """The type an expression of a SQL select list evaluates to, where its shape says it (a
    client that prepares the statement learns the columns' types before any row exists): a
    literal's, a cast's target, predicates BOOL, ``||`` of text STRING, arithmetic of integers
    INT8 (``/`` too: the evaluator divides integers as PostgreSQL does), with a DECIMAL DECIMAL,
    else with a FLOAT FLOAT8 (as the evaluator computes them), the length functions INT8, text
    functions STRING, ``now()`` TIMESTAMPTZ; None otherwise (the first value's type then)."""
    if isinstance(e, ast.Subscript):  # an element of the array (a slice: the array's type)
        base = expr_type(session, e.expr, types, index)
        if base is None or base.kind is not Kind.ARRAY or e.is_slice:
            return base
        return base.element
    if isinstance(e, ast.Literal):
        name = _LITERAL_TYPE.get(type(e.value))
        return _SQL_TYPE[name] if name is not None else None
    if isinstance(e, ast.Cast):
        try:
            return resolve_type(e.type.name, e.type.params, e.type.array, dialect="sql")
        except ChangefeedError:
            return None
    if isinstance(e, ast.Case):
        # the type its branches agree on (NULL branches aside)
        branches = [then for _, then in e.whens] + ([e.default] if e.default is not None else [])
        agreed = {
            expr_type(session, b, types, index)
            for b in branches
            if not (isinstance(b, ast.Literal) and b.value is None)
        }
        return agreed.pop() if len(agreed) == 1 else None
    if isinstance(
        e, ast.InList | ast.IsNull | ast.IsDistinct | ast.Quantified | ast.Between | ast.Like | ast.RegexMatch
    ):
        return _SQL_TYPE["BOOL"]
    if isinstance(e, ast.UnaryOp):
        if e.op == "NOT":
            return _SQL_TYPE["BOOL"]
        inner = expr_type(session, e.operand, types, index)
        return _arithmetic(inner, inner)
    if isinstance(e, ast.BinaryOp):
        if e.op in _PREDICATES:
            return _SQL_TYPE["BOOL"]
        left = expr_type(session, e.left, types, index)
        right = expr_type(session, e.right, types, index)
        if e.op in ("->", "#>"):
            return resolve_type("JSONB", dialect="sql")
        if e.op in ("->>", "#>>"):
            return _SQL_TYPE["STRING"]
        if e.op == "||":
            kinds = {left.kind if left is not None else None, right.kind if right is not None else None}
            return _SQL_TYPE["STRING"] if kinds == {Kind.TEXT} else None
        return _arithmetic(left, right)
    if isinstance(e, ast.FuncCall):
        name = e.name.lower()
        if name in _LENGTHS:
            return _SQL_TYPE["INT8"]
        if name in _TEXTS:
            return _SQL_TYPE["STRING"]
        if name in JSON_RESULTS:
            return resolve_type("JSONB", dialect="sql")
        if name in _CLOCKS and not e.args:
            return _SQL_TYPE["TIMESTAMPTZ"]
        if name in _SAME_NUMBER and len(e.args) == 1:
            arg = expr_type(session, e.args[0], types, index)
            if name != "abs" and arg is not None and arg.kind in _INTEGERS:
                return _SQL_TYPE["FLOAT8"]  # PostgreSQL's ceil, floor, sign of an integer: double
            return _arithmetic(arg, arg)
        if name in ("round", "trunc") and e.args:
            arg = expr_type(session, e.args[0], types, index)
            if arg is not None and arg.kind in _INTEGERS:
                return _SQL_TYPE["FLOAT8"] if len(e.args) == 1 else _SQL_TYPE["DECIMAL"]
        if name in ("mod", "div") and len(e.args) == 2:
            return _arithmetic(
                expr_type(session, e.args[0], types, index), expr_type(session, e.args[1], types, index)
            )
        if name in ("starts_with", "bool_and", "bool_or", "every"):
            return _SQL_TYPE["BOOL"]
        if name == "string_agg":
            return _SQL_TYPE["STRING"]
        if name in ("sum", "min", "max") and len(e.args) == 1:  # of a real: a real, as PostgreSQL's
            arg = expr_type(session, e.args[0], types, index)
            if arg is not None and arg.kind is Kind.FLOAT and arg.bits <= 32:
                return arg
    return None


def _arithmetic(left: SqlType | None, right: SqlType | None) -> SqlType | None:
    if left is None or right is None:
        return None
    kinds = {left.kind, right.kind}
    if kinds == {Kind.INT}:
        return _SQL_TYPE["INT8"]
    if Kind.FLOAT in kinds and kinds <= {Kind.INT, Kind.FLOAT, Kind.DECIMAL}:
        return _SQL_TYPE["FLOAT8"]  # float8 with numeric is float8, as in PostgreSQL
    if Kind.DECIMAL in kinds and kinds <= {Kind.INT, Kind.DECIMAL}:
        return _SQL_TYPE["DECIMAL"]  # the evaluator keeps a DECIMAL operand's exactness
    return None
