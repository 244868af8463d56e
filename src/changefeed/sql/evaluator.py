"""Expression evaluation: SQL three-valued logic over Python values, bind parameters, and the
small expression analyses (conjuncts, constants, aggregates) the statement families share."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import ROUND_HALF_UP, Decimal
from typing import Any, Protocol

from changefeed.engine import json_doc
from changefeed.engine.array_text import array_literal
from changefeed.engine.clock import timeuuid_key
from changefeed.engine.database import Database
from changefeed.engine.intervals import Interval
from changefeed.engine.json_doc import JsonText
from changefeed.engine.patterns import like, regex_search
from changefeed.engine.storage import token
from changefeed.engine.temporal_text import parse_interval, parse_timestamp
from changefeed.engine.type_errors import crdb_parse_error, value_type
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType, is_ydb_type
from changefeed.exceptions import (
    AmbiguousColumn,
    ChangefeedError,
    ColumnCountMismatch,
    DatatypeMismatch,
    InvalidEscape,
    InvalidStatement,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    TypeMismatch,
    UndefinedColumn,
    UndefinedFunction,
    UnsupportedFeature,
    WindowingError,
    WrongObjectType,
)
from changefeed.sql import ast
from changefeed.sql.arithmetic import INT64_MAX, INT64_MIN, arithmetic
from changefeed.sql.array_functions import ARRAY_OPERATORS, array_operator
from changefeed.sql.builtins_more import json_array_of, json_object_of
from changefeed.sql.function_errors import invalid_argument
from changefeed.sql.functions import AGGREGATES, SET_RETURNING, WINDOW_FUNCTIONS, EvalContext, call
from changefeed.sql.json_ops import (
    JSON_OPERATORS,
    apply as json_apply,
    concat as json_concat,
    delete as json_delete,
)
from changefeed.sql.numeric import exact_sum, numeric_div
from changefeed.sql.statistics import STATISTICS, statistic
from changefeed.sql.text_out import float4_text, to_text


class NameScope(Protocol):
    """What evaluation needs of a session: its dialect, its database's enums, identifier folding."""

    @property
    def dialect(self) -> str: ...

    @property
    def db(self) -> Database: ...

    def ident(self, i: ast.Ident) -> str: ...


def conjuncts(e: ast.Expr) -> list[ast.Expr]:
    if isinstance(e, ast.BinaryOp) and e.op == "AND":
        return conjuncts(e.left) + conjuncts(e.right)
    return [e]


def is_const(e: ast.Expr) -> bool:
    if isinstance(e, ast.Literal | ast.Param):
        return True
    if isinstance(e, ast.FuncCall):
        return e.name.lower() not in AGGREGATES and all(is_const(a) for a in e.args)
    if isinstance(e, ast.UnaryOp):
        return is_const(e.operand)
    if isinstance(e, ast.Cast):
        return is_const(e.expr)
    if isinstance(e, ast.BinaryOp):
        return is_const(e.left) and is_const(e.right)
    if isinstance(e, ast.ArrayLit | ast.TupleLit):
        return all(is_const(x) for x in e.items)
    return False


def has_aggregate(e: Any) -> bool:
    """Whether an expression calls an aggregate anywhere in it (not as a window call: ``sum(n)
    OVER ()`` is computed per row)."""
    if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
        return True
    if isinstance(e, ast.WindowCall):
        return False
    return any(has_aggregate(x) for x in subexpressions(e))


def subexpressions(e: Any) -> Iterator[Any]:
    """The expressions directly inside ``e`` (in tuples too: a CASE's WHEN pairs), never a
    subquery's SELECT: the one walk of an expression tree that the analyses here, the subquery
    fold and the FROM check share."""
    if isinstance(e, tuple):
        for x in e:
            yield from subexpressions(x) if isinstance(x, tuple) else (x,)
        return
    if dataclasses.is_dataclass(e) and not isinstance(e, type):
        for f in dataclasses.fields(e):
            v = getattr(e, f.name)
            if isinstance(v, tuple):
                yield from subexpressions(v)
            elif dataclasses.is_dataclass(v) and not isinstance(v, ast.Ident | ast.TypeName | ast.Select):
                yield v  # not into a subquery's SELECT: its aggregates are its own


def distinct_key(v: Any) -> tuple[bool, Any]:
    """``v`` as a key of a partition, group or DISTINCT ON: ``true`` and ``1`` (equal in Python)
    kept apart."""
    return (type(v) is bool, v)


def order_key(v: Any, o: ast.OrderItem) -> tuple[int, Any]:
    """The sort key of ``v`` under ORDER BY item ``o``: :func:`sort_key` with ``NULLS FIRST`` /
    ``LAST`` applied (the caller reverses the sort for DESC)."""
    key = sort_key(v)
    if o.nulls_first is None or key[0] != 0:
        return key
    first = o.nulls_first != o.descending
    return (-1 if first else 2, key[1])


def sort_key(v: Any) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, uuid.UUID):
        return (1, timeuuid_key(v)) if v.version == 1 else (1, (-1, str(v)))
    return (1, v)


# ===================================================================================== evaluation


class Params:
    def __init__(self, values: Sequence[Any]) -> None:
        self.values = list(values)

    def get(self, i: int) -> Any:
        if i >= len(self.values):
            raise InvalidStatement(f"bind parameter {i + 1} has no value ({len(self.values)} given)")
        return self.values[i]


#: SQL's functions called without parentheses (when no column has the name).
_NILADIC = frozenset({"current_date", "current_timestamp", "current_time", "localtimestamp", "localtime"})


def check_names(
    session: NameScope, exprs: Iterable[Any], index: Mapping[str, int], lower: Mapping[str, int]
) -> None:
    """Every column ``exprs`` name (not inside a subquery's own SELECT) is one of ``index``'s
    (or ``lower``'s, lower-cased), resolved as :meth:`Evaluator.eval` resolves it, checked
    before any row is read, as PostgreSQL binds names when it plans: a misspelt column is 42703
    (an ambiguous one 42702) on an empty table, or behind ``false AND``, too."""
    stack = [e for e in exprs if e is not None]
    while stack:
        e = stack.pop()
        if not isinstance(e, ast.Column):
            stack.extend(subexpressions(e))
            continue
        name = session.ident(e.name)
        keys = [f"{session.ident(e.table)}.{name}", name] if e.table is not None else [name]
        for key in keys:
            at = index.get(key)
            if at is None:
                at = lower.get(key.lower())
            if at == AMBIGUOUS:
                raise AmbiguousColumn(f'column reference "{key}" is ambiguous')
            if at is not None:
                break
        else:
            if e.name.quoted and session.dialect == "sql":
                continue  # YQL: "text" is a string literal
            if not e.name.quoted and e.table is None and name.lower() in _NILADIC:
                continue
            raise UndefinedColumn(f'column "{name}" does not exist')


#: The position of a column name that more than one joined table has (``sql.statements.joins``).
AMBIGUOUS = -1


class RowMap(Mapping[str, Any]):
    __slots__ = ("index", "lower", "row")

    def __init__(self, row: tuple[Any, ...], index: Mapping[str, int], lower: Mapping[str, int]) -> None:
        self.row, self.index, self.lower = row, index, lower

    def __getitem__(self, k: str) -> Any:
        i = self.index[k]
        if i == AMBIGUOUS:
            raise AmbiguousColumn(f'column reference "{k}" is ambiguous')
        return self.row[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


class Scope:
    """Column values visible to an expression."""

    __slots__ = ("values",)

    def __init__(self, values: Mapping[str, Any]) -> None:
        self.values = values

    def lookup(self, name: str, quoted: bool) -> tuple[bool, Any]:
        v = self.values
        if name in v:
            return True, v[name]
        if isinstance(v, RowMap):
            i = v.lower.get(name.lower())
            if i == AMBIGUOUS:
                raise AmbiguousColumn(f'column reference "{name}" is ambiguous')
            return (True, v.row[i]) if i is not None else (False, None)
        lowered = name.lower()
        for k, x in v.items():
            if k.lower() == lowered:
                return True, x
        return False, None


def explicit_cast(v: Any, t: SqlType) -> Any:
    """What an explicit ``CAST`` converts before the target type's own checks, beyond what an
    assignment takes, as PostgreSQL and CockroachDB cast: a number to an integer rounds (a
    decimal half away from zero, a float half to even), a boolean is 0 or 1, an integer is a
    boolean (non-zero: true), text longer than a ``VARCHAR(n)``/``CHAR(n)`` is cut to ``n``."""
    kind = t.kind
    if kind is Kind.TEXT and t.length is not None and isinstance(v, str):
        return v[: t.length]
    if kind in (Kind.INT, Kind.UINT):
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, Decimal) and v.is_finite():
            return int(v.to_integral_value(rounding=ROUND_HALF_UP))
        if isinstance(v, float):
            if not math.isfinite(v):
                raise NumericValueOutOfRange("integer out of range")
            return round(v)
    elif kind is Kind.BOOL and isinstance(v, int) and not isinstance(v, bool):
        return v != 0
    return v


class Evaluator:
    """Evaluates expressions over Python values with SQL three-valued logic."""

    def __init__(self, session: NameScope, params: Params, ctx: EvalContext) -> None:
        self.session = session
        self.params = params
        self.ctx = ctx
        #: Runs a correlated subquery for a row (set by the statements that run them:
        #: ``sql.statements.subqueries.evaluator_hook``).
        self.correlated: Callable[[ast.Subquery, Scope | None], Any] | None = None
        self._in_sets: dict[int, tuple[ast.InList, _LiteralSet | None]] = {}

    def eval(self, e: ast.Expr, scope: Scope | None) -> Any:
        if isinstance(e, ast.Literal):
            return e.value
        if isinstance(e, ast.Column):
            name = self.session.ident(e.name)
            if scope is not None:
                if e.table is not None:  # ``a.c``: a joined table's column, else (one table) ``c``
                    found, v = scope.lookup(f"{self.session.ident(e.table)}.{name}", e.name.quoted)
                    if found:
                        return v
                found, v = scope.lookup(name, e.name.quoted)
                if found:
                    return v
            if e.name.quoted and self.session.dialect == "sql":
                return e.name.name  # YQL: "text" is a string literal
            if not e.name.quoted and e.table is None and name.lower() in _NILADIC:
                return call(name, [], self.ctx)  # CURRENT_DATE, CURRENT_TIMESTAMP: no parentheses
            raise UndefinedColumn(f'column "{name}" does not exist')
        if isinstance(e, ast.Param):
            return self.params.get(e.index)
        if isinstance(e, ast.BinaryOp):
            return self._binary(e, scope)
        if isinstance(e, ast.UnaryOp):
            v = self.eval(e.operand, scope)
            if e.op == "NOT":
                return None if v is None else not _truth(v, "NOT")
            if v is None:
                return None
            if isinstance(v, dt.timedelta | Interval):
                return -v if e.op == "-" else v
            if e.op == "~":  # bitwise not of an integer
                if not isinstance(v, int) or isinstance(v, bool):
                    raise UndefinedFunction(f"unsupported unary operator: ~<{value_type(v)}>")
                return ~v
            if not isinstance(v, int | float | Decimal) or isinstance(v, bool):
                raise UndefinedFunction(f"unsupported unary operator: {e.op}<{value_type(v)}>")
            if e.op != "-":
                return v
            if type(v) is int and v == INT64_MIN:  # -INT8's smallest is past INT8
                raise NumericValueOutOfRange("integer out of range")
            return -v
        if isinstance(e, ast.IsNull):
            v = self.eval(e.expr, scope)
            return (v is not None) if e.negated else (v is None)
        if isinstance(e, ast.Quantified):
            return self._quantified(e, scope)
        if isinstance(e, ast.IsDistinct):
            a, b = self.eval(e.left, scope), self.eval(e.right, scope)
            distinct = (a is None) != (b is None) if a is None or b is None else compare(a, b, "!=") != 0
            return distinct != e.negated
        if isinstance(e, ast.InList):
            v = self.eval(e.expr, scope)
            if v is None:  # unknown, unless the list (a subquery's rows) is empty: NULL IN () is false
                return e.negated if not e.items else None
            known = self._literal_set(e) if len(e.items) >= _SET_FROM else None
            if known is not None and known[0](v):
                hit = v in known[1]
                if not hit and known[2]:
                    return None
                return (not hit) if e.negated else hit
            items = [self.eval(x, scope) for x in e.items]
            if isinstance(v, tuple):  # (a, b) IN ((1, 'x'), ..): row comparisons, three-valued
                results = [None if x is None else row_compare(v, x, "=") for x in items]
                hit = any(r is True for r in results)
                if not hit and any(r is None for r in results):
                    return None
                return (not hit) if e.negated else hit
            hit = any(_eq(v, x) for x in items if x is not None)
            if not hit and any(x is None for x in items):
                return None
            return (not hit) if e.negated else hit
        if isinstance(e, ast.Case):
            if e.operand is not None:
                v = self.eval(e.operand, scope)
                for when, then in e.whens:
                    if v is not None and _eq(v, self.eval(when, scope)):
                        return self.eval(then, scope)
            else:
                for when, then in e.whens:
                    hit = self.eval(when, scope)
                    if hit is not None and _truth(hit, "CASE/WHEN"):
                        return self.eval(then, scope)
            return None if e.default is None else self.eval(e.default, scope)
        if isinstance(e, ast.Like):
            v, pattern = self.eval(e.expr, scope), self.eval(e.pattern, scope)
            if v is None or pattern is None:
                return None
            if not isinstance(v, str) or not isinstance(pattern, str):
                word = "ILIKE" if e.insensitive else "LIKE"
                raise UndefinedFunction(
                    f"unsupported comparison operator: <{value_type(v)}> {word} <{value_type(pattern)}>"
                )
            escape = "\\" if e.escape is None else self.eval(e.escape, scope)
            if escape is None:
                return None
            if not isinstance(escape, str) or len(escape) > 1:
                raise InvalidEscape("invalid escape string: must be empty or one character")
            return like(v, pattern, insensitive=e.insensitive, escape=escape) != e.negated
        if isinstance(e, ast.Between):
            v, lo, hi = (self.eval(x, scope) for x in (e.expr, e.low, e.high))
            r = _within(v, lo, hi)
            if e.symmetric and r is not True:
                other = _within(v, hi, lo)
                r = True if other is True else (None if r is None or other is None else False)
            return None if r is None else (not r) if e.negated else r
        if isinstance(e, ast.RegexMatch):
            v, pattern = self.eval(e.expr, scope), self.eval(e.pattern, scope)
            if v is None or pattern is None:
                return None
            if not isinstance(v, str) or not isinstance(pattern, str):
                op = ("!" if e.negated else "") + "~" + ("*" if e.insensitive else "")
                raise UndefinedFunction(
                    f"unsupported comparison operator: <{value_type(v)}> {op} <{value_type(pattern)}>"
                )
            return regex_search(pattern, v, e.insensitive) != e.negated
        if isinstance(e, ast.FuncCall):
            if e.name.lower() in AGGREGATES:
                raise InvalidStatement(f"aggregate {e.name}() is not allowed here")
            if e.name.lower() in WINDOW_FUNCTIONS:
                raise WrongObjectType(f"window function {e.name} requires an OVER clause")
            if e.name.lower() in SET_RETURNING:  # a SELECT list expands them first
                raise UnsupportedFeature(f"set-returning function {e.name}() is not allowed here")
            if e.name.lower() == "token" and scope is not None:
                return token([self.eval(a, scope) for a in e.args])
            return call(
                e.name, [self.eval(a, scope) for a in e.args if not isinstance(a, ast.Star)], self.ctx
            )
        if isinstance(e, ast.Subquery):  # a correlated one (the others are values by now)
            if self.correlated is None:
                raise UnsupportedFeature(
                    "a subquery that reads the outer query's columns is not supported here"
                )
            return self.correlated(e, scope)
        if isinstance(e, ast.WindowCall):  # a SELECT computes them before (statements.windows)
            raise WindowingError("window functions are not allowed here")
        if isinstance(e, ast.Cast):
            v = self.eval(e.expr, scope)
            t = resolve_type(
                e.type.name,
                e.type.params,
                e.type.array,
                dialect=self.session.dialect,
                enums=self.session.db.enums,
            )
            if t.kind is Kind.TEXT and isinstance(v, JsonText):  # jsonb's text: PostgreSQL's form
                v = json_doc.spaced(json_doc.loads(v), pg_order=True)
            elif t.kind in _JSON_SCALARS and isinstance(v, JsonText):
                v = _json_scalar(v, t)
            elif t.kind is Kind.TEXT and type(v) is float and self._single(e.expr):
                v = float4_text(v)  # x::float4::text: single precision's shortest digits
            elif t.kind is Kind.TEXT and isinstance(v, bytes) and is_ydb_type(t):
                pass  # YQL's CAST(s AS Utf8) reads the bytes as UTF-8 (the coercion does)
            elif t.kind is Kind.TEXT and v is not None and not isinstance(v, str):
                v = to_text(v)  # bytes as \x and hex, as PostgreSQL's and CockroachDB's casts
            return t.coerce(explicit_cast(v, t), "CAST")
        if isinstance(e, ast.Subscript):
            return self._subscript(e, scope)
        if isinstance(e, ast.ArrayLit):
            return [self.eval(x, scope) for x in e.items]
        if isinstance(e, ast.TupleLit):
            return tuple(self.eval(x, scope) for x in e.items)
        if isinstance(e, ast.MapLit):
            return {self.eval(k, scope): self.eval(v, scope) for k, v in e.items}
        if isinstance(e, ast.Star):
            raise InvalidStatement("* is not allowed here")
        raise UnsupportedFeature(f"expression {type(e).__name__}")

    def _subscript(self, e: ast.Subscript, scope: Scope | None) -> Any:
        """``a[i]``: 1-based, NULL outside the array (or for a NULL index); ``a[lo:hi]``: the
        elements from ``lo`` to ``hi``, clipped to the array, as PostgreSQL subscripts."""
        arr = self.eval(e.expr, scope)
        bounds = [None if x is None else _subscript_bound(self.eval(x, scope)) for x in (e.index, e.upper)]
        if arr is None:
            return None
        if not isinstance(arr, list | tuple):
            raise DatatypeMismatch(f"cannot subscript type {value_type(arr)} because it is not an array")
        lo, hi = bounds
        if not e.is_slice:
            if lo is None or not 1 <= lo <= len(arr):
                return None
            return arr[lo - 1]
        if (e.index is not None and lo is None) or (e.upper is not None and hi is None):
            return None  # a NULL bound
        start = 1 if lo is None else max(lo, 1)
        end = len(arr) if hi is None else min(hi, len(arr))
        return list(arr[start - 1 : end]) if start <= end else []

    def _binary(self, e: ast.BinaryOp, scope: Scope | None) -> Any:
        op = e.op
        if op == "AND":
            left = self.eval(e.left, scope)
            if left is not None and not _truth(left, "AND"):
                return False
            right = self.eval(e.right, scope)
            if right is not None and not _truth(right, "AND"):
                return False
            return None if left is None or right is None else True
        if op == "OR":
            left = self.eval(e.left, scope)
            if left is not None and _truth(left, "OR"):
                return True
            right = self.eval(e.right, scope)
            if right is not None and _truth(right, "OR"):
                return True
            return None if left is None or right is None else False
        a, b = self.eval(e.left, scope), self.eval(e.right, scope)
        if isinstance(a, tuple) and isinstance(b, tuple) and op in _ROW_OPS:
            return row_compare(a, b, op)
        if a is None or b is None:
            return None
        if op in ("=", "!=", "<", "<=", ">", ">="):
            c = compare(a, b, op)
            return _holds(c, op)
        if op == "||":
            if isinstance(a, JsonText) or isinstance(b, JsonText):  # jsonb || jsonb
                return json_concat(a, b)
            if isinstance(a, list) or isinstance(b, list):  # arrays: concatenated, or an element added
                return [*(a if isinstance(a, list) else [a]), *(b if isinstance(b, list) else [b])]
            if (
                self.session.dialect == "sql"
                and not self.ctx.phoenix
                and not isinstance(a, str | bytes)
                and not isinstance(b, str | bytes)
            ):
                raise UndefinedFunction(
                    f"unsupported binary operator: <{value_type(a)}> || <{value_type(b)}>"
                )
            if isinstance(a, bytes) and isinstance(b, bytes):  # bytea || bytea, YQL's String || String
                return a + b
            return _operand_text(a) + _operand_text(b)
        if op == "-" and isinstance(a, JsonText):  # jsonb - key, index or keys
            return json_delete(a, b)
        if op == "^":  # PostgreSQL's exponentiation operator: power()
            return call("power", [a, b], self.ctx)
        if op in _BITWISE:
            return _bitwise(op, a, b)
        if op in ("+", "-", "*", "/", "%"):
            return arithmetic(op, a, b, phoenix=self.ctx.phoenix, dialect=self.ctx.dialect)
        if op in ARRAY_OPERATORS and (
            isinstance(a, list | tuple) or isinstance(b, list | tuple) or op == "&&"
        ):
            return array_operator(op, a, b)
        if op in JSON_OPERATORS:
            return json_apply(op, a, b)
        raise UnsupportedFeature(f"operator {op}")

    def _single(self, e: ast.Expr) -> bool:
        """``e`` is a cast to a single-precision float (``x::float4``, ``CAST(x AS REAL)``)."""
        if not isinstance(e, ast.Cast) or e.type.array:
            return False
        try:
            t = resolve_type(e.type.name, e.type.params, dialect=self.session.dialect)
        except ChangefeedError:
            return False
        return t.kind is Kind.FLOAT and t.bits <= 32

    def _quantified(self, e: ast.Quantified, scope: Scope | None) -> bool | None:
        items = self.eval(e.right, scope)
        if items is None:
            return None
        if isinstance(items, str):  # an array's text (an untyped parameter or literal)
            items = array_literal(items)
        if not isinstance(items, list | tuple):
            raise DatatypeMismatch(f"op {e.quantifier.upper()} requires array on right side")
        if not items:
            return e.quantifier == "all"
        left = self.eval(e.left, scope)
        unknown = False
        for item in items:
            if left is None or item is None:
                unknown = True
                continue
            c = compare(left, item, e.op)
            holds = _holds(c, e.op)
            if holds and e.quantifier == "any":
                return True
            if not holds and e.quantifier == "all":
                return False
        return None if unknown else e.quantifier == "all"

    def _literal_set(self, e: ast.InList) -> _LiteralSet | None:
        """For an ``IN`` list of literals of one plain kind (numbers, text or booleans; an
        ``IN (SELECT ..)`` is one): which values it can answer by a set lookup, the set, and
        whether a NULL is among them, built once per list (None: compare one by one)."""
        cache = self._in_sets
        got = cache.get(id(e))
        if got is not None and got[0] is e:
            answer: _LiteralSet | None = got[1]
            return answer
        values = [x.value for x in e.items if isinstance(x, ast.Literal)]
        known: _LiteralSet | None = None
        if len(values) == len(e.items):
            present = [x for x in values if x is not None]
            for accepts in _SET_KINDS:
                if all(accepts(x) for x in present):
                    known = (accepts, frozenset(present), len(present) != len(values))
                    break
        cache[id(e)] = (e, known)
        return known

    def eval_aggregate(self, e: ast.Expr, scopes: list[Scope]) -> Any:
        if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
            return reduce_aggregate(e, self.aggregate_inputs(e, scopes), self.session.dialect)
        if has_aggregate(e):  # e.g. ``sum(n) * 2``, ``count(*) > 1``: aggregates first, then the rest
            e = self._fold_aggregates(e, scopes)
        return self.eval(e, scopes[0] if scopes else None)

    def _fold_aggregates(self, e: Any, scopes: list[Scope]) -> Any:
        """``e`` with each aggregate call in it replaced by its value over ``scopes``."""
        if isinstance(e, ast.FuncCall) and e.name.lower() in AGGREGATES:
            return ast.Literal(self.eval_aggregate(e, scopes))
        if isinstance(e, tuple):
            return tuple(self._fold_aggregates(x, scopes) for x in e)
        if not dataclasses.is_dataclass(e) or isinstance(e, type) or not has_aggregate(e):
            return e
        changes = {f.name: self._fold_aggregates(getattr(e, f.name), scopes) for f in dataclasses.fields(e)}
        return dataclasses.replace(e, **changes)

    def aggregate_inputs(self, e: ast.FuncCall, scopes: Sequence[Scope]) -> list[Any]:
        """What aggregate call ``e`` takes from each of ``scopes`` (those its FILTER holds for):
        its argument's value, ``(value, delimiter)`` for ``string_agg``, 1 for ``count(*)``;
        :func:`reduce_aggregate` folds them."""
        name = e.name.lower()
        if e.filter is not None:  # FILTER (WHERE ..): only the rows it holds for
            scopes = [s for s in scopes if self.eval(e.filter, s) is True]
        if e.order_by:  # ``string_agg(s, ',' ORDER BY s)``: the rows in that order
            scopes = list(scopes)
            for o in reversed(e.order_by):
                keys = [order_key(self.eval(o.expr, s), o) for s in scopes]
                at = sorted(range(len(scopes)), key=keys.__getitem__, reverse=o.descending)
                scopes = [scopes[i] for i in at]
        if name == "count" and (not e.args or isinstance(e.args[0], ast.Star)):
            return [1] * len(scopes)
        if name in _AGGREGATE_ARITY and len(e.args) != _AGGREGATE_ARITY[name]:
            shown = ", ".join("..." for _ in e.args)
            raise UndefinedFunction(f"unknown signature: {name}({shown})")
        if name in ("string_agg", "json_object_agg", "jsonb_object_agg"):
            return [(self.eval(e.args[0], s), self.eval(e.args[1], s)) for s in scopes]
        return [self.eval(e.args[0], s) for s in scopes]


def reduce_aggregate(e: ast.FuncCall, inputs: Sequence[Any], dialect: str) -> Any:
    """Aggregate call ``e`` over its inputs (:meth:`Evaluator.aggregate_inputs`): NULLs are
    skipped (``array_agg`` keeps them), and no value left is NULL (0 for ``count``)."""
    name = e.name.lower()
    if name == "array_agg":  # NULLs kept, as PostgreSQL keeps them; no rows: NULL
        return (list(dict.fromkeys(inputs)) if e.distinct else list(inputs)) or None
    if name == "string_agg":
        return _string_agg(list(inputs))
    if name in ("json_agg", "jsonb_agg"):  # NULLs kept as JSON nulls; no rows: NULL
        return json_array_of(list(dict.fromkeys(inputs)) if e.distinct else list(inputs)) if inputs else None
    if name in ("json_object_agg", "jsonb_object_agg"):
        return json_object_of(list(inputs)) if inputs else None
    vals = [v for v in inputs if v is not None]
    if e.distinct:
        vals = list(dict.fromkeys(vals))
    if name == "count":
        return len(vals)
    if not vals:
        # ScyllaDB: a sum or average of no values is 0, of the argument's type
        return 0 if dialect == "cql" and name in ("sum", "avg") else None
    if name == "min":
        return min(vals)
    if name == "max":
        return max(vals)
    if name == "sum":
        return widened_sum(exact_sum(vals), dialect)
    if name in STATISTICS:
        return statistic(name, vals)
    if name in ("bool_and", "every", "bool_or"):
        for v in vals:
            if not isinstance(v, bool):
                raise UndefinedFunction(f"unknown signature: {name}({value_type(v)})")
        return all(vals) if name != "bool_or" else any(vals)
    return average(
        exact_sum(vals), len(vals), exact=all(isinstance(v, int | Decimal) for v in vals), dialect=dialect
    )


def widened_sum(total: Any, dialect: str) -> Any:
    """In SQL a sum of integers past INT8 is a DECIMAL (PostgreSQL's ``sum(int8)`` is numeric,
    CockroachDB's ``sum(INT)`` DECIMAL): never an INT8 that no client can decode."""
    if dialect == "sql" and type(total) is int and not INT64_MIN <= total <= INT64_MAX:
        return Decimal(total)
    return total


def average(total: Any, count: int, *, exact: bool, dialect: str) -> Any:
    """``avg``: of integers and decimals a DECIMAL in SQL, PostgreSQL's numeric quotient of the
    sum and the count (``numeric_div``), else the quotient of the values' own type; in CQL
    (ScyllaDB's) of integers an integer truncated toward zero, of decimals a decimal of the
    sum's scale, rounded half to even."""
    if dialect == "sql" and exact:
        return numeric_div(Decimal(total), Decimal(count))
    if dialect == "cql" and type(total) is int:
        q = abs(total) // count
        return q if total >= 0 else -q
    if dialect == "cql" and isinstance(total, Decimal) and total.is_finite():
        sign, digits, exponent = total.as_tuple()
        assert isinstance(exponent, int)
        q, r = divmod(int("".join(map(str, digits)) or "0"), count)
        if 2 * r > count or (2 * r == count and q % 2 == 1):
            q += 1
        return Decimal((sign, tuple(int(d) for d in str(q)), exponent))
    return total / count


def _within(v: Any, lo: Any, hi: Any) -> bool | None:
    """``lo <= v AND v <= hi`` in three-valued logic (a NULL leaves it open unless the other
    comparison is false)."""
    ge = None if v is None or lo is None else compare(lo, v) <= 0
    le = None if v is None or hi is None else compare(hi, v) >= 0
    if ge is False or le is False:
        return False
    return None if ge is None or le is None else True


#: What answers an IN list by a set lookup: the values it can answer, the set, whether the list
#: holds a NULL.
_LiteralSet = tuple[Callable[[Any], bool], frozenset[Any], bool]
#: IN lists of at least this many literals are looked up in a set (see _literal_set).
_SET_FROM = 8
#: The kinds of values a set lookup compares as SQL does (numbers of every type alike).
_SET_KINDS: tuple[Callable[[Any], bool], ...] = (
    lambda x: isinstance(x, int | float | Decimal) and not isinstance(x, bool) and x == x,  # not NaN
    lambda x: isinstance(x, str),
    lambda x: isinstance(x, bool),
)


def _holds(c: int, op: str) -> bool:
    """Whether comparison ``op`` holds for a ``compare`` result ``c`` (negative, 0, positive)."""
    return {"=": c == 0, "!=": c != 0, "<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[op]


#: Aggregates whose argument count is fixed (count, min, .. take one, checked elsewhere).
_AGGREGATE_ARITY = {"string_agg": 2, "array_agg": 1, "bool_and": 1, "bool_or": 1, "every": 1,
                    "json_agg": 1, "jsonb_agg": 1, "json_object_agg": 2, "jsonb_object_agg": 2}  # fmt: skip


def _string_agg(pairs: list[tuple[Any, Any]]) -> str | None:
    """``string_agg(v, d)``: the non-NULL values joined, each but the first after its own row's
    delimiter; no value: NULL."""
    kept = [(v, d) for v, d in pairs if v is not None]
    if not kept:
        return None
    out = [to_text(kept[0][0])]
    for v, d in kept[1:]:
        out.append("" if d is None else to_text(d))
        out.append(to_text(v))
    return "".join(out)


def _truth(v: Any, where: str = "WHERE") -> bool:
    if isinstance(v, bool):
        return v
    raise DatatypeMismatch(f"argument of {where} must be type bool, not type {value_type(v)}")


#: The comparisons of two rows, ``(a, b) < (c, d)``.
_ROW_OPS = frozenset({"=", "!=", "<", "<=", ">", ">="})


def row_compare(a: tuple[Any, ...], b: Any, op: str) -> bool | None:
    """``a op b`` of two rows, as PostgreSQL compares them: ``=`` false once a pair differs,
    else NULL if a pair has a NULL; the orderings decided by the first pair that is not equal
    (NULL if that pair has a NULL); rows of different lengths 42601."""
    if not isinstance(b, tuple):
        raise _incomparable(a, b, op)
    if len(a) != len(b):
        raise ColumnCountMismatch("unequal number of entries in row expressions")
    if op in ("=", "!="):
        unknown = False
        for x, y in zip(a, b, strict=True):
            same = (
                row_compare(x, y, "=")
                if isinstance(x, tuple)
                else None
                if x is None or y is None
                else compare(x, y, op) == 0
            )
            if same is False:
                return op == "!="
            unknown = unknown or same is None
        return None if unknown else op == "="
    for x, y in zip(a, b, strict=True):
        if x is None or y is None:
            return None
        c = compare(x, y, op)
        if c != 0:
            return _holds(c, op)
    return op in ("<=", ">=")


def _operand_text(v: Any) -> str:
    """An operand of ``||`` as text: bytes with text read as UTF-8 (YQL's String with Utf8)."""
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else to_text(v)


def _eq(a: Any, b: Any) -> bool:
    try:
        return compare(a, b) == 0
    except TypeMismatch:
        return False


def _subscript_bound(b: Any) -> int | None:
    """An array subscript's value as an integer: text is read as one (an untyped literal or
    parameter, as PostgreSQL casts it), anything else but an integer is 42804."""
    if b is None or (isinstance(b, int) and not isinstance(b, bool)):
        return b
    if isinstance(b, str):
        try:
            return int(b.strip())
        except ValueError:
            raise InvalidTextRepresentation(f'invalid input syntax for type integer: "{b}"') from None
    raise DatatypeMismatch(f"array subscript must have type integer, not {value_type(b)}")


def _incomparable(a: Any, b: Any, op: str) -> UndefinedFunction:
    return UndefinedFunction(f"unsupported comparison operator: <{value_type(a)}> {op} <{value_type(b)}>")


def compare(a: Any, b: Any, op: str = "=") -> int:
    if isinstance(a, bool) != isinstance(b, bool) and not isinstance(a, str) and not isinstance(b, str):
        raise _incomparable(a, b, op)
    if isinstance(a, str) and not isinstance(b, str):
        return -compare(b, a, _FLIPPED.get(op, op))
    if isinstance(b, str) and not isinstance(a, str):
        b = _coerce_like(a, b)
    if isinstance(a, uuid.UUID) and isinstance(b, uuid.UUID):
        if a.version == 1 and b.version == 1:  # timeuuids: by time, as ScyllaDB orders them
            a, b = timeuuid_key(a), timeuuid_key(b)
        else:
            a, b = str(a), str(b)
    if (
        isinstance(a, JsonText)
        and isinstance(b, JsonText)
        and json_doc.equal(json_doc.loads(a), json_doc.loads(b))
    ):
        return 0  # jsonb equality: numbers by value, objects in any key order
    if (
        isinstance(a, dt.date)
        and isinstance(b, dt.date)
        and isinstance(a, dt.datetime) != isinstance(b, dt.datetime)
    ):
        a, b = _midnight(a, b), _midnight(b, a)  # a date with a timestamp: the date's midnight
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime) and (a.tzinfo is None) != (b.tzinfo is None):
        a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
    try:
        return (a > b) - (a < b)  # type: ignore[no-any-return]
    except TypeError:
        raise _incomparable(a, b, op) from None


#: The kinds a jsonb scalar casts to (its number or boolean), and its JSON kind for each.
_JSON_SCALARS = {
    Kind.INT: "number",
    Kind.UINT: "number",
    Kind.FLOAT: "number",
    Kind.DECIMAL: "number",
    Kind.BOOL: "boolean",
}


def _json_scalar(v: JsonText, t: SqlType) -> Any:
    """A jsonb number or boolean cast to ``t``: its value (then the cast's own rules); any
    other jsonb value is 22023, as PostgreSQL says it."""
    doc = json_doc.loads(v)
    if isinstance(doc, bool):
        kind = "boolean"
    elif isinstance(doc, int | float | Decimal):
        kind = "number"
    else:
        kind = (
            "null"
            if doc is None
            else "string"
            if isinstance(doc, str)
            else "object"
            if isinstance(doc, dict)
            else "array"
        )
    if kind != _JSON_SCALARS[t.kind]:
        target = (
            "boolean" if t.kind is Kind.BOOL else "integer" if t.kind in (Kind.INT, Kind.UINT) else "numeric"
        )
        raise invalid_argument(f"cannot cast jsonb {kind} to type {target}", "22023")
    return doc


_BITWISE = frozenset({"&", "|", "#", "<<", ">>"})


def _bitwise(op: str, a: Any, b: Any) -> Any:
    """``&``, ``|``, ``#`` (xor), ``<<``, ``>>`` of integers, shifts wrapping in INT8 as
    PostgreSQL's int8shl does."""
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
        raise UndefinedFunction(f"unsupported binary operator: <{value_type(a)}> {op} <{value_type(b)}>")
    if op == "&":
        return a & b
    if op == "|":
        return a | b
    if op == "#":
        return a ^ b
    out: int = (a << b) if op == "<<" else (a >> b)
    out &= (1 << 64) - 1
    return out - (1 << 64) if out >= 1 << 63 else out


def _midnight(d: dt.date, other: dt.date) -> dt.date:
    """A date beside a timestamp as the timestamp of its midnight (in UTC beside a zoned one), as
    PostgreSQL casts a date to compare it with a timestamp."""
    if isinstance(d, dt.datetime):
        return d
    tz = other.tzinfo if isinstance(other, dt.datetime) else None
    return dt.datetime(d.year, d.month, d.day, tzinfo=dt.UTC if tz is not None else None)


_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}

#: Kinds (as in ``changefeed.engine.types.Kind``) of the values a string literal is read as.
_KIND_OF = {bool: "bool", int: "int", float: "float", Decimal: "decimal", dt.datetime: "timestamp",
            dt.date: "date", uuid.UUID: "uuid", dt.timedelta: "interval"}  # fmt: skip


def _coerce_like(a: Any, s: str) -> Any:
    """Compare a string literal with a typed value the way SQL casts the literal."""
    try:
        if isinstance(a, bool):
            if s.lower() not in ("true", "t", "false", "f"):
                raise ValueError(s)
            return s.lower() in ("true", "t")
        if isinstance(a, int):
            return int(s)
        if isinstance(a, float):
            return float(s)
        if isinstance(a, Decimal):
            return Decimal(s)
        if isinstance(a, dt.datetime):
            return parse_timestamp(s)
        if isinstance(a, dt.date):
            return dt.date.fromisoformat(s)
        if isinstance(a, uuid.UUID):
            return uuid.UUID(s)
        if isinstance(a, dt.timedelta):
            return parse_interval(s)
    except (ValueError, ArithmeticError):
        kind = next((k for t, k in _KIND_OF.items() if isinstance(a, t)), "string")
        raise crdb_parse_error(kind, value_type(a), s) from None
    return s
