"""Rules for expressions, literals of both dialects, parameters and type names."""

from __future__ import annotations

import decimal
import math
import re
import uuid
from dataclasses import dataclass, replace
from typing import Any, cast

from lark import Token

from changefeed.exceptions import UnsupportedFeature, WrongObjectType
from changefeed.sql import ast
from changefeed.sql.builder.common import (
    Clause,
    Rules,
    parse_number,
    syntax_error_at,
    unescape_string,
    unquote_single,
)
from changefeed.sql.functions import AGGREGATES

__all__ = ["ExpressionRules"]


@dataclass(frozen=True, slots=True)
class DistinctArg:
    """``DISTINCT x`` as a call's argument list (``count(DISTINCT x)``)."""

    arg: ast.Expr


@dataclass(frozen=True, slots=True)
class OrderedArgs:
    """Arguments and an ORDER BY as a call's argument list (``string_agg(s, ',' ORDER BY s)``)."""

    args: tuple[ast.Expr, ...]
    order_by: tuple[ast.OrderItem, ...]


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


class ExpressionRules(Rules):
    """Expressions, literals and type names."""

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

    def filtered_call(self, c: list[Any]) -> ast.Expr:
        call = c[0]
        if not isinstance(call, ast.FuncCall) or call.name.casefold() not in AGGREGATES:
            name = call.name if isinstance(call, ast.FuncCall) else "the call"
            raise UnsupportedFeature(f"FILTER specified, but {name} is not an aggregate function")
        return replace(call, filter=c[1])

    def quantifier(self, c: list[Token]) -> str:
        return "all" if str(c[0]).lower() == "all" else "any"

    def quantified(self, c: list[Any]) -> ast.Expr:
        return ast.Quantified(c[1], c[0], c[2], c[3])

    def quantified_subquery(self, c: list[Any]) -> ast.Expr:
        return ast.Quantified(c[1], c[0], c[2], ast.Subquery(c[3], "array"))

    def is_distinct_from(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], c[1])

    def is_not_distinct_from(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], c[1], negated=True)

    # ``x IS [NOT] TRUE/FALSE``: never NULL, as ``x IS [NOT] DISTINCT FROM true/false``
    def is_true(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], ast.Literal(True), negated=True)

    def is_not_true(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], ast.Literal(True))

    def is_false(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], ast.Literal(False), negated=True)

    def is_not_false(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.IsDistinct(c[0], ast.Literal(False))

    def in_list(self, c: list[Any]) -> ast.Expr:
        return ast.InList(c[0], c[1])

    def not_in_list(self, c: list[Any]) -> ast.Expr:
        return ast.InList(c[0], c[1], negated=True)

    def between(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.Between(c[0], c[1], c[2])

    def not_between(self, c: list[ast.Expr]) -> ast.Expr:
        return ast.Between(c[0], c[1], c[2], negated=True)

    def between_kind(self, c: list[Token]) -> bool:
        return str(c[0]).upper() == "SYMMETRIC"

    def between_sym(self, c: list[Any]) -> ast.Expr:
        return ast.Between(c[0], c[2], c[3], symmetric=c[1])

    def not_between_sym(self, c: list[Any]) -> ast.Expr:
        return ast.Between(c[0], c[2], c[3], negated=True, symmetric=c[1])

    def regex_match(self, c: list[Any]) -> ast.Expr:
        op = str(c[1])
        negated, insensitive = op.startswith("!"), op.endswith("*")
        if "~~" in op:  # PostgreSQL's operator names of LIKE and ILIKE
            return ast.Like(c[0], c[2], negated=negated, insensitive=insensitive)
        return ast.RegexMatch(c[0], c[2], negated=negated, insensitive=insensitive)

    def power_op(self, c: list[Any]) -> ast.Expr:
        return ast.BinaryOp("^", c[0], c[1])

    def bit_op(self, c: list[Any]) -> ast.Expr:
        return ast.BinaryOp(cast("ast.BinOpName", str(c[1])), c[0], c[2])

    def bit_not(self, c: list[Any]) -> ast.Expr:
        return ast.UnaryOp("~", c[0])

    def similar_to(self, c: list[Any]) -> ast.Expr:
        """``x SIMILAR TO p``: ``x ~ similar_to_escape(p)``, as PostgreSQL rewrites it."""
        return ast.RegexMatch(
            c[0], ast.FuncCall("similar_to_escape", tuple(x for x in c[1:] if x is not None))
        )

    def not_similar_to(self, c: list[Any]) -> ast.Expr:
        pattern = ast.FuncCall("similar_to_escape", tuple(x for x in c[1:] if x is not None))
        return ast.RegexMatch(c[0], pattern, negated=True)

    def json_op(self, c: list[Any]) -> ast.Expr:
        return ast.BinaryOp(cast("ast.BinOpName", str(c[1])), c[0], c[2])

    def substring_from(self, c: list[Any]) -> ast.Expr:
        return ast.FuncCall("substring", tuple(x for x in c if x is not None))

    def overlay_call(self, c: list[Any]) -> ast.Expr:
        return ast.FuncCall("overlay", tuple(x for x in c if x is not None))

    def substring_for(self, c: list[Any]) -> ast.Expr:
        return ast.FuncCall("substring", (c[0], ast.Literal(1), c[1]))

    def trim_side(self, c: list[Token]) -> str:
        return str(c[0]).upper()

    def trim_from(self, c: list[Any]) -> ast.Expr:
        side, chars, text = c
        return _trim_call(side or "BOTH", text, chars)

    def trim_side_only(self, c: list[Any]) -> ast.Expr:
        return _trim_call(c[0], c[1], None)

    def like_escape(self, c: list[ast.Expr]) -> ast.Expr:
        return c[0]

    def like(self, c: list[Any]) -> ast.Expr:
        return ast.Like(c[0], c[1], escape=c[2])

    def not_like(self, c: list[Any]) -> ast.Expr:
        return ast.Like(c[0], c[1], negated=True, escape=c[2])

    def ilike(self, c: list[Any]) -> ast.Expr:
        return ast.Like(c[0], c[1], insensitive=True, escape=c[2])

    def not_ilike(self, c: list[Any]) -> ast.Expr:
        return ast.Like(c[0], c[1], negated=True, insensitive=True, escape=c[2])

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

    def named_param(self, c: list[Token]) -> ast.Expr:
        p = ast.Param(self.next_param, name=str(c[0])[1:])
        self.next_param += 1
        return p

    def nparam(self, c: list[Token]) -> ast.Expr:
        n = int(c[0][1:])
        if n < 1:
            raise syntax_error_at(c[0], f"invalid parameter {c[0]}: parameters are numbered from $1")
        return ast.Param(n - 1)

    def column_ref(self, c: list[ast.Ident]) -> ast.Expr:
        if len(c) == 1:
            return ast.Column(c[0])
        return ast.Column(c[1], table=c[0])

    def func_call(self, c: list[Any]) -> ast.Expr:
        name = str(c[0])
        if isinstance(c[1], DistinctArg):
            if name.casefold() not in AGGREGATES:
                raise syntax_error_at(c[0], f"DISTINCT specified, but {name} is not an aggregate function")
            return ast.FuncCall(name, (c[1].arg,), distinct=True)
        if isinstance(c[1], OrderedArgs):
            if name.casefold() not in AGGREGATES:
                raise WrongObjectType(f"ORDER BY specified, but {name} is not an aggregate function")
            return ast.FuncCall(name, c[1].args, order_by=c[1].order_by)
        args: tuple[ast.Expr, ...] = c[1] or ()
        if self.dialect == "sql" and name.casefold() == "trim":
            name = "btrim"  # PostgreSQL's function behind TRIM(..), and the column's name
        if self.dialect == "sql" and name.casefold() in _TYPED_CONSTRUCTORS:
            args = tuple(
                ast.Literal(a.name.name)
                if isinstance(a, ast.Column) and a.table is None and a.name.quoted
                else a
                for a in args
            )
        return ast.FuncCall(name, args)

    def distinct_arg(self, c: list[ast.Expr]) -> DistinctArg:
        return DistinctArg(c[0])

    def ordered_args(self, c: list[Any]) -> OrderedArgs:
        order = c[-1]
        assert isinstance(order, Clause)
        return OrderedArgs(tuple(c[:-1]), order.value)

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

    def subscript(self, c: list[Any]) -> ast.Expr:
        return ast.Subscript(c[0], c[1])

    def slice(self, c: list[Any]) -> ast.Expr:
        return ast.Subscript(c[0], c[1], c[2], is_slice=True)

    def number(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(parse_number(str(c[0])))

    def string(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(unquote_single(str(c[0])))

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
            raise syntax_error_at(c[0], f"invalid blob literal {c[0]}: odd number of hex digits")
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
        body = unquote_single(tok[1:])
        if tok[0] in "xX":
            try:
                return ast.Literal(bytes.fromhex(body))
            except ValueError:
                raise syntax_error_at(c[0], f"invalid hex byte string {tok}") from None
        return ast.Literal(body.encode())

    def hex_lit(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(int(str(c[0]), 16))

    def suffixed_int(self, c: list[Token]) -> ast.Expr:
        m = re.fullmatch(r"(\d+)([a-zA-Z]+)", str(c[0]))
        assert m is not None
        return ast.Literal(int(m.group(1)), suffix=m.group(2).lower())

    def extract_call(self, c: list[Any]) -> ast.Expr:
        """``EXTRACT(year FROM t)``: ``date_part('year', t)``."""
        return ast.FuncCall("extract", (ast.Literal(c[0].name.lower()), c[1]))

    def position_call(self, c: list[ast.Expr]) -> ast.Expr:
        """``POSITION(a IN b)``: ``strpos(b, a)``, named ``position`` as PostgreSQL names it."""
        return ast.FuncCall("position", (c[1], c[0]))

    def case_when(self, c: list[ast.Expr]) -> tuple[ast.Expr, ast.Expr]:
        return (c[0], c[1])

    def case_expr(self, c: list[Any]) -> ast.Expr:
        whens = tuple(x for x in c[1:] if isinstance(x, tuple))
        tail = c[-1]
        return ast.Case(c[0], whens, None if isinstance(tail, tuple) else tail)

    def escape_string(self, c: list[Token]) -> ast.Expr:
        return ast.Literal(unescape_string(str(c[0])))

    def typed_string(self, c: list[Token]) -> ast.Expr:
        return ast.Cast(ast.Literal(unquote_single(str(c[1]))), ast.TypeName(str(c[0])))

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
            v = parse_number(str(t))
            if not isinstance(v, int):
                raise syntax_error_at(t, f"type parameters must be integers, not {t}")
            out.append(v)
        return tuple(out)

    def type_array(self, c: list[Token]) -> bool:
        return True


def _trim_call(side: str, text: ast.Expr, chars: ast.Expr | None) -> ast.FuncCall:
    """``trim([BOTH|LEADING|TRAILING] [chars] FROM text)`` as the function PostgreSQL maps it to."""
    name = {"BOTH": "btrim", "LEADING": "ltrim", "TRAILING": "rtrim"}[side]
    return ast.FuncCall(name, (text,) if chars is None else (text, chars))
