"""Checking a CDC query against its table: names resolved, functions allowed, types inferred,
with CockroachDB's error texts; the result is the plan the encoders evaluate
(:class:`~changefeed.feeds.cdc_plan.CdcQuery`).

What CockroachDB refuses, and how it says so:

* more than one table or a join: ``CREATE CHANGEFEED ... AS SELECT ... is not supported for
  more than 1 table``;
* sub-queries: ``sub-query expressions not supported by CDC``;
* volatile functions, stable ones off its list, aggregates, window functions, generators:
  ``function "now" unsupported by CDC`` (SQLSTATE 42883);
* unknown functions: ``unknown function: f()``; no matching overload: ``unknown signature:
  btrim(int)``; bad operands: ``unsupported binary operator: <int> + <string>``;
* unknown columns: ``column "x" does not exist``; ``cdc_prev.x``: ``no data source matches
  prefix: cdc_prev in this context`` (hint: access tuple content with ``(cdc_prev).x``);
* a predicate that can never hold: ``changefeed expression .. does not match any rows``.

Names as CockroachDB gives them: a column its name, ``(cdc_prev).x`` ``x``, a function call the
function's name, a cast its operand's name, anything else ``?column?``; repeated names get
``_1``, ``_2``... as CockroachDB's projection does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from changefeed.engine.catalog import ColumnSchema, TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.type_names import resolve_type
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import (
    ChangefeedError,
    ChangefeedFailed,
    InvalidStatement,
    StatementSyntaxError,
    TypeMismatch,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedObject,
    UndefinedTable,
    UndefinedType,
    UnsupportedFeature,
)
from changefeed.feeds.cdc_plan import (
    BOOL,
    COL,
    DECIMAL,
    FLOAT8,
    FN,
    HLC_DECIMAL,
    INT8,
    JSONB_CANONICAL,
    META,
    META_CREATION_TS,
    META_EVENT_TZ,
    META_MVCC,
    META_OP,
    META_PREV_MVCC,
    META_SCHEMA_TS,
    PREV,
    PREVROW,
    STRING,
    TIMESTAMPTZ,
    UUID,
    CdcQuery,
    OutputColumn,
    PExpr,
    lit,
)
from changefeed.formats import cdc_casts as C
from changefeed.formats.cdc_decimal import divisible
from changefeed.formats.cdc_functions import CLASS_TYPES, FUNCTIONS, Sig, matches
from changefeed.formats.cdc_functions_more import DENIED, UNSUPPORTED_HERE
from changefeed.sql import cdc_parse as P

MVCC_COLUMN = "crdb_internal_mvcc_timestamp"
ORIGIN_COLUMN = "crdb_internal_origin_timestamp"
PREV_NAME = "cdc_prev"
PREV_NAME_ALT = "crdb_internal_cdc_prev"
UNNAMED = "?column?"

#: CockroachDB's CDC functions: name -> (meta value, type).
CDC_FUNCTIONS: dict[str, tuple[str, SqlType]] = {
    "event_op": (META_OP, STRING),
    "event_schema_timestamp": (META_SCHEMA_TS, HLC_DECIMAL),
    "changefeed_creation_timestamp": (META_CREATION_TS, HLC_DECIMAL),
    "statement_timestamp": (META_EVENT_TZ, TIMESTAMPTZ),
    "transaction_timestamp": (META_EVENT_TZ, TIMESTAMPTZ),
}

_MULTI_TABLE = "CREATE CHANGEFEED ... AS SELECT ... is not supported for more than 1 table"


@dataclass(frozen=True, slots=True)
class Typed:
    """A checked expression; ``const`` the literal while its type may still adapt."""

    expr: PExpr
    name: str = UNNAMED
    const: P.Lit | None = None

    @property
    def type(self) -> SqlType:
        return self.expr.type


def _family(t: SqlType) -> str:
    return C.type_family(t)


class Checker:
    """Checks one CDC query against ``table`` (its current schema)."""

    def __init__(
        self,
        table: TableSchema,
        *,
        enums: dict[str, tuple[str, ...]] | None = None,
        creation: CommitTs | None = None,
        cluster_id: str = "",
    ) -> None:
        self.table = table
        self.enums = enums or {}
        self.creation = creation or CommitTs(0, 0)
        self.cluster_id = cluster_id
        self.alias = table.short_name
        names = {c.name for c in table.columns}
        self.prev_name = PREV_NAME if PREV_NAME not in names else PREV_NAME_ALT
        if PREV_NAME in names and PREV_NAME_ALT in names:
            raise InvalidStatement(
                "changefeeds employ an internal, hidden column called cdc_prev, or crdb_internal_cdc_prev if "
                "cdc_prev already exists. Either cdc_prev or crdb_internal_cdc_prev columns must be renamed or "
                f"dropped from the target table {table.short_name} in order to run changefeed against it"
            )

    # ------------------------------------------------------------------ the query
    def check(self, q: P.Query) -> CdcQuery:
        if len(q.tables) != 1 or q.joins:
            raise UnsupportedFeature(_MULTI_TABLE)
        ref = q.tables[0]
        self.alias = ref.alias or ref.name[-1]
        columns: list[OutputColumn] = []
        used: dict[str, int] = {}

        def add(name: str, expr: PExpr) -> None:
            n = used.get(name, 0)
            used[name] = n + 1
            columns.append(OutputColumn(name if n == 0 else f"{name}_{n}", expr))

        for target in q.targets:
            if isinstance(target.expr, P.Star):
                if target.expr.table is not None and target.expr.table != self.alias:
                    raise UndefinedTable(f"no data source matches pattern: {target.expr.table}.*")
                for c in self._visible():
                    add(c.name, PExpr(COL, c.type, c.id))
                continue
            if isinstance(target.expr, P.FieldStar):
                base = self.expr(target.expr.expr)
                if base.expr.op != PREVROW:
                    raise TypeMismatch(f"type {_family(base.type)} is not composite")
                for c in self._visible():
                    add(c.name, PExpr(PREV, c.type, c.id))
                continue
            t = self.expr(target.expr)
            expr = self.settle(t)
            add(target.alias or t.name, expr)
        where: PExpr | None = None
        if q.where is not None:
            w = self.expr(q.where)
            if w.const is not None and w.const.kind == "null":
                w = Typed(lit(None, BOOL))
            if w.type.kind is not Kind.BOOL:
                raise TypeMismatch(f"argument of WHERE must be type bool, not type {_family(w.type)}")
            where = w.expr
            if (not _reads_row(where) and constant_value(where) is not True) or self._contradiction(where):
                raise InvalidStatement(f"changefeed expression {q.text} does not match any rows")
        query = CdcQuery(
            text=q.text,
            table_id=self.table.id,
            columns=tuple(columns),
            where=where,
            creation_wall=self.creation.wall,
            creation_logical=self.creation.logical,
            cluster_id=self.cluster_id,
        )
        uses_prev = bool(query.referenced(PREV) or query.referenced(PREVROW)) or (
            META_PREV_MVCC in query.referenced(META)
        )
        return CdcQuery(
            text=query.text,
            table_id=query.table_id,
            columns=query.columns,
            where=query.where,
            uses_prev=uses_prev,
            creation_wall=query.creation_wall,
            creation_logical=query.creation_logical,
            cluster_id=query.cluster_id,
        )

    def _contradiction(self, where: PExpr) -> bool:
        """A conjunct no row satisfies: ``k IS NULL`` of a NOT NULL (or key) column (what
        CockroachDB's optimizer finds as an empty span for ``WHERE a IS NULL``)."""
        if where.op == FN and where.value == "and":
            return any(self._contradiction(a) for a in where.args)
        if where.op == FN and where.value == "is_null" and where.args[0].op == COL:
            col = next(c for c in self.table.columns if c.id == where.args[0].value)
            return col.not_null or col.is_key
        return False

    def _visible(self) -> list[ColumnSchema]:
        """The columns ``*`` selects: stored ones (virtual columns are not in CDC queries)."""
        return [c for c in self.table.columns if not c.virtual]

    # ------------------------------------------------------------------ expressions
    def expr(self, n: P.Node) -> Typed:
        method: Callable[[Any], Typed] | None = getattr(self, "_" + type(n).__name__.lower(), None)
        if method is None:
            raise UnsupportedFeature(f"{type(n).__name__} expressions are not supported in CDC queries here")
        return method(n)

    def _lit(self, n: P.Lit) -> Typed:
        if n.kind == "placeholder":
            raise InvalidStatement(f"no value provided for placeholder: ${n.value}")
        if n.kind == "bool":
            return Typed(lit(n.value, BOOL))
        if n.kind == "bytes":
            return Typed(lit(n.value, CLASS_TYPES["bytes"]))
        return Typed(self._default_const(n), const=n)

    def _default_const(self, n: P.Lit) -> PExpr:
        if n.kind == "null":
            return lit(None, STRING)
        if n.kind == "string":
            return lit(n.value, STRING)
        if isinstance(n.value, int):
            return lit(n.value, INT8)
        return lit(Decimal(n.text or str(n.value)), DECIMAL)

    def _ref(self, n: P.Ref) -> Typed:
        parts = n.parts
        if len(parts) > 1:
            prefix = parts[:-1]
            if prefix[-1] != self.alias and prefix[-1] != self.table.short_name:
                hint = ""
                if prefix[-1] in (PREV_NAME, PREV_NAME_ALT):
                    hint = "\nHINT: cdc_prev is a tuple; access tuple content with (cdc_prev).x"
                raise UndefinedTable(
                    f"no data source matches prefix: {'.'.join(prefix)} in this context{hint}"
                )
        name = parts[-1]
        col = self.table.find_column(name)
        if col is not None and not col.virtual:
            return Typed(PExpr(COL, col.type, col.id), col.name)
        if name == self.prev_name and len(parts) == 1:
            return Typed(PExpr(PREVROW, JSONB_CANONICAL), name)
        if name == MVCC_COLUMN:
            return Typed(PExpr(META, HLC_DECIMAL, META_MVCC), name)
        if name == ORIGIN_COLUMN:
            return Typed(lit(None, DECIMAL), name)
        if name == "tableoid":
            return Typed(lit(self.table.id, INT8), name)
        raise UndefinedColumn(f'column "{name}" does not exist')

    def _field(self, n: P.Field) -> Typed:
        base = self.expr(n.expr)
        if base.expr.op != PREVROW:
            raise TypeMismatch(f"type {_family(base.type)} is not composite")
        if n.name == MVCC_COLUMN:
            return Typed(PExpr(META, HLC_DECIMAL, META_PREV_MVCC), n.name)
        col = self.table.find_column(n.name)
        if col is None or col.virtual:
            labels = ", ".join(f"{_family(c.type)} AS {c.name}" for c in self._visible())
            raise UndefinedColumn(f'could not identify column "{n.name}" in tuple{{{labels}}}')
        return Typed(PExpr(PREV, col.type, col.id), col.name)

    def _fieldstar(self, n: P.FieldStar) -> Typed:
        base = self.expr(n.expr)
        if base.expr.op != PREVROW:
            raise TypeMismatch(f"type {_family(base.type)} is not composite")
        return Typed(base.expr, self.prev_name)

    def _subquery(self, n: P.Subquery) -> Typed:
        raise UnsupportedFeature("sub-query expressions not supported by CDC")

    def _star(self, n: P.Star) -> Typed:
        raise StatementSyntaxError("* is only allowed in the select list or count(*)")

    def _cast(self, n: P.Cast) -> Typed:
        arg = self.expr(n.arg)
        target = self.resolve_type(n.type)
        name = arg.name if arg.name != UNNAMED else C.pg_type_name(target).split(" ")[0]
        if arg.const is not None:
            return Typed(self.const_as(arg.const, target, explicit=True), name)
        if arg.type == target:
            return Typed(arg.expr, name)
        if not C.castable(arg.type, target):
            raise TypeMismatch(f"invalid cast: {_family(arg.type)} -> {_family(target)}")
        return Typed(PExpr(FN, target, "cast", (arg.expr,)), name)

    def _unary(self, n: P.Unary) -> Typed:
        if n.op == "NOT":
            a = self.boolean(self.expr(n.arg), "NOT")
            return Typed(PExpr(FN, BOOL, "not", (a,)))
        if n.op == "+":
            return self.expr(n.arg)
        arg = self.expr(n.arg)
        name = "neg" if n.op == "-" else "bitnot"
        try:
            return self.call(name, [arg])
        except UndefinedFunction:
            raise UndefinedFunction(f"unsupported unary operator: {n.op}<{_family(arg.type)}>") from None

    def _binary(self, n: P.Binary) -> Typed:
        if n.op in ("AND", "OR"):
            a = self.boolean(self.expr(n.left), n.op)
            b = self.boolean(self.expr(n.right), n.op)
            return Typed(PExpr(FN, BOOL, n.op.lower(), (a, b)))
        left, right = self.expr(n.left), self.expr(n.right)
        if n.op in ("=", "!=", "<", "<=", ">", ">="):
            a, b = self.comparable(left, right, n.op)
            return Typed(PExpr(FN, BOOL, n.op, (a, b)))
        if n.op == "/":
            for side in (left, right):
                if side.const is None and side.type.kind is Kind.DECIMAL and not divisible(side.type):
                    raise UnsupportedFeature(
                        "division of a DECIMAL without a declared precision of at most 19 digits is not "
                        "supported in CDC queries here (cast it to DECIMAL(p,s) or FLOAT first)"
                    )
        if n.op in ("+", "-", "*", "%", "^", "//"):
            for side in (left, right):
                if side.const is None and side.type.kind is Kind.DECIMAL and side.type.precision is None:
                    raise UnsupportedFeature(
                        f"arithmetic ({n.op}) on a DECIMAL without a declared precision and scale is not "
                        "supported in CDC queries here (cast it to DECIMAL(p,s) first)"
                    )
        if n.op == "%" and left.type.kind is Kind.TEXT and right.type.kind is Kind.TEXT:
            raise UnsupportedFeature(
                "trigram similarity (string % string) is not supported in CDC queries here"
            )
        try:
            return self.call(n.op, [left, right])
        except UndefinedFunction:
            raise UndefinedFunction(
                f"unsupported binary operator: <{_family(left.type)}> {n.op} <{_family(right.type)}>"
            ) from None

    def _istest(self, n: P.IsTest) -> Typed:
        arg = self.expr(n.arg)
        if n.what == "null":
            key = "is_not_null" if n.negated else "is_null"
            return Typed(PExpr(FN, BOOL, key, (self.settle(arg),)))
        a = self.boolean(arg, "IS")
        key = ("is_not_" if n.negated else "is_") + n.what
        return Typed(PExpr(FN, BOOL, key, (a,)))

    def _distinct(self, n: P.Distinct) -> Typed:
        a, b = self.comparable(self.expr(n.left), self.expr(n.right), "IS DISTINCT FROM")
        return Typed(PExpr(FN, BOOL, "not_distinct" if n.negated else "distinct", (a, b)))

    def _like(self, n: P.Like) -> Typed:
        if n.kind == "similar":
            raise UnsupportedFeature("SIMILAR TO is not supported in CDC queries here")
        s = self.as_type(self.expr(n.arg), STRING, "LIKE")
        p = self.as_type(self.expr(n.pattern), STRING, "LIKE")
        args = [s, p]
        if n.escape is not None:
            args.append(self.as_type(self.expr(n.escape), STRING, "LIKE"))
        key = ("not_" if n.negated else "") + n.kind
        return Typed(PExpr(FN, BOOL, key, tuple(args)))

    def _inlist(self, n: P.InList) -> Typed:
        arg = self.expr(n.arg)
        items = [self.expr(x) for x in n.items]
        anchor = arg if arg.const is None else next((x for x in items if x.const is None), arg)
        target = anchor.type if anchor.const is None else self.settle(anchor).type
        out = [self.adapt(arg, target, "IN")] + [self.adapt(x, target, "IN") for x in items]
        return Typed(PExpr(FN, BOOL, "not_in" if n.negated else "in", tuple(out)))

    def _between(self, n: P.Between) -> Typed:
        x = n.arg

        def between(lo: P.Node, hi: P.Node) -> P.Node:
            return P.Binary("AND", P.Binary(">=", x, lo), P.Binary("<=", x, hi))

        node: P.Node = between(n.low, n.high)
        if n.symmetric:
            node = P.Binary("OR", node, between(n.high, n.low))
        if n.negated:
            node = P.Unary("NOT", node)
        return self.expr(node)

    def _case(self, n: P.Case) -> Typed:
        conds: list[PExpr] = []
        values: list[Typed] = []
        for when, then in n.whens:
            if n.operand is not None:
                cond = self.expr(P.Binary("=", n.operand, when))
            else:
                cond = Typed(self.boolean(self.expr(when), "CASE"))
            conds.append(cond.expr)
            values.append(self.expr(then))
        if n.default is not None:
            values.append(self.expr(n.default))
        target = self.common_type(values, "CASE")
        args: list[PExpr] = []
        for c_expr, value in zip(conds, values, strict=False):
            args += [c_expr, self.adapt(value, target, "CASE")]
        if n.default is not None:
            args.append(self.adapt(values[-1], target, "CASE"))
        return Typed(PExpr(FN, target, "case", tuple(args)), "case")

    def _call(self, n: P.Call) -> Typed:
        name = n.name
        short = name.rsplit(".", 1)[-1]
        if name in DENIED or (n.window and name not in FUNCTIONS):
            if name in DENIED:
                raise UndefinedFunction(f'function "{name}" unsupported by CDC')
            raise InvalidStatement(
                f"OVER specified, but {name}() is neither a window function nor an aggregate function"
            )
        if n.window or n.filtered or n.distinct or n.star or n.ordered:
            raise InvalidStatement(f"{name}() is not an aggregate function")
        if name in CDC_FUNCTIONS:
            if n.args:
                raise UndefinedFunction(f"unknown signature: {name}({self._sig_text(n.args)})")
            meta, t = CDC_FUNCTIONS[name]
            return Typed(PExpr(META, t, meta), name)
        if name in (PREV_NAME, PREV_NAME_ALT, "cdc_is_delete", "cdc_mvcc_timestamp", "cdc_updated_timestamp"):
            raise UndefinedFunction(f"unknown function: {name}()")
        if name == "pg_typeof":
            if len(n.args) != 1:
                raise UndefinedFunction(f"unknown signature: pg_typeof({self._sig_text(n.args)})")
            arg = self.expr(n.args[0])
            return Typed(lit(C.pg_type_name(self.settle(arg).type), STRING), name)
        if name == "crdb_internal.cluster_id":
            return Typed(lit(self.cluster_id, UUID), "cluster_id")
        if name in UNSUPPORTED_HERE:
            raise UnsupportedFeature(
                f"function {name}() is not supported in CDC queries by this implementation"
            )
        if name not in FUNCTIONS:
            raise UndefinedFunction(f"unknown function: {name}()")
        args = [self.expr(a) for a in n.args]
        called = self.call(name, args)
        return Typed(called.expr, short)

    def _arraylit(self, n: P.ArrayLit) -> Typed:
        raise UnsupportedFeature("ARRAY constructors are not supported in CDC queries here")

    def _tuplelit(self, n: P.TupleLit) -> Typed:
        raise UnsupportedFeature("tuple constructors are not supported in CDC queries here")

    def _subscript(self, n: P.Subscript) -> Typed:
        raise UnsupportedFeature("array subscripts are not supported in CDC queries here")

    def _collate(self, n: P.Collate) -> Typed:
        raise UnsupportedFeature("COLLATE is not supported in CDC queries here")

    # ------------------------------------------------------------------ typing
    def resolve_type(self, ref: P.TypeRef) -> SqlType:
        try:
            return resolve_type(ref.name, ref.params, bool(ref.array), dialect="sql", enums=self.enums)
        except (UndefinedObject, TypeMismatch):
            raise UndefinedType(f'type "{ref.name}" does not exist') from None

    def const_as(self, c: P.Lit, t: SqlType, *, explicit: bool = False) -> PExpr:
        """The literal ``c`` as a constant of type ``t`` (parsed now: errors at CREATE time)."""
        if c.kind == "null":
            return lit(None, t)
        try:
            if c.kind == "string":
                if t.kind is Kind.TEXT:
                    return lit(C.truncate(c.value, t) if explicit else c.value, t)
                return lit(C.parse_text(c.value, t), t)
            value = c.value
            k = t.kind
            if k in (Kind.INT, Kind.UINT):
                if isinstance(value, Decimal):
                    if not explicit and value != value.to_integral_value():
                        raise TypeMismatch(f"could not parse {c.text} as type int")
                    return lit(C.cast_py(DECIMAL, t)(value), t)
                return lit(C.cast_py(INT8, t)(value), t)
            if k is Kind.FLOAT:
                return lit(float(value), t)
            if k is Kind.DECIMAL:
                d = C.quantize(Decimal(c.text or str(value)), t)
                if t.precision is None:  # a literal has the precision and scale it is written with
                    t = _literal_decimal_type(d)
                return lit(d, t)
            if explicit and C.castable(INT8 if isinstance(value, int) else DECIMAL, t):
                src = INT8 if isinstance(value, int) else DECIMAL
                return lit(C.cast_py(src, t)(value if isinstance(value, int) else Decimal(c.text)), t)
        except ChangefeedFailed as e:
            raise TypeMismatch(str(e)) from None
        raise TypeMismatch(f"could not convert constant {c.text or c.value!r} to type {_family(t)}")

    def fits(self, a: Typed, cls: str) -> bool:
        if a.const is None:
            return matches(cls, a.type)
        c = a.const
        if c.kind == "null" or cls in ("any", "anynonarray"):
            return True
        if cls == "array":
            return False
        if c.kind == "string":
            try:
                self.const_as(c, CLASS_TYPES[cls])
                return True
            except ChangefeedError:
                return False
        if cls == "int":
            return isinstance(c.value, int)
        return cls in ("float", "decimal")

    def settle(self, a: Typed) -> PExpr:
        """An expression with its final type (constants take their default type)."""
        return a.expr

    def adapt(self, a: Typed, t: SqlType, what: str) -> PExpr:
        if a.const is not None:
            return self.const_as(a.const, t)
        if a.type == t:
            return a.expr
        if (_numeric(a.type) and _numeric(t)) or (a.type.kind is t.kind):
            return PExpr(FN, t, "cast", (a.expr,))
        raise TypeMismatch(f"incompatible {what} types {_family(a.type)} and {_family(t)}")

    def as_type(self, a: Typed, t: SqlType, what: str) -> PExpr:
        if a.const is not None:
            return self.const_as(a.const, t)
        if a.type.kind is not t.kind:
            raise UndefinedFunction(
                f"unsupported comparison operator: <{_family(a.type)}> {what} <{_family(t)}>"
            )
        return a.expr

    def boolean(self, a: Typed, what: str) -> PExpr:
        if a.const is not None and a.const.kind == "null":
            return lit(None, BOOL)
        if a.const is not None and a.const.kind == "string":
            return self.const_as(a.const, BOOL)
        if a.type.kind is not Kind.BOOL:
            raise TypeMismatch(f"argument of {what} must be type bool, not type {_family(a.type)}")
        return a.expr

    def common_type(self, values: Sequence[Typed], what: str) -> SqlType:
        typed = [v for v in values if v.const is None]
        if not typed:
            return values[0].type if values else STRING
        t = typed[0].type
        for v in typed[1:]:
            if v.type == t:
                continue
            if _numeric(v.type) and _numeric(t):
                t = _wider(t, v.type)
            elif v.type.kind is t.kind:
                t = CLASS_TYPES.get(_class(t), t)
            else:
                raise TypeMismatch(f"incompatible {what} types {_family(t)} and {_family(v.type)}")
        return t

    def comparable(self, left: Typed, right: Typed, op: str) -> tuple[PExpr, PExpr]:
        if left.const is not None and right.const is not None:
            return left.expr, self.adapt(right, left.type, op)
        if left.const is not None:
            return self.const_as(left.const, right.type), right.expr
        if right.const is not None:
            return left.expr, self.const_as(right.const, left.type)
        a, b = left.type, right.type
        if a == b or (a.kind is b.kind and a.kind not in (Kind.DECIMAL, Kind.TIMESTAMP)):
            return left.expr, right.expr
        if _numeric(a) and _numeric(b):
            t = _wider(a, b)
            return self.adapt(left, t, op), self.adapt(right, t, op)
        if a.kind is b.kind:  # DECIMALs of other scales, TIMESTAMP vs TIMESTAMPTZ: same instants
            return left.expr, right.expr
        if {a.kind, b.kind} == {Kind.DATE, Kind.TIMESTAMP}:
            t = a if a.kind is Kind.TIMESTAMP else b
            return self.adapt_date(left, t), self.adapt_date(right, t)
        if {a.kind, b.kind} <= {Kind.TEXT, Kind.ENUM}:
            return left.expr, right.expr
        raise UndefinedFunction(f"unsupported comparison operator: <{_family(a)}> {op} <{_family(b)}>")

    def adapt_date(self, a: Typed, t: SqlType) -> PExpr:
        if a.type.kind is Kind.DATE:
            return PExpr(FN, t, "cast", (a.expr,))
        return a.expr

    def call(self, name: str, args: list[Typed]) -> Typed:
        for sig in FUNCTIONS.get(name, ()):
            if not sig.arity_ok(len(args)):
                continue
            if all(self.fits(a, sig.param(i)) for i, a in enumerate(args)):
                return self.apply(sig, args)
        raise UndefinedFunction(f"unknown signature: {name}({', '.join(_family(a.type) for a in args)})")

    def apply(self, sig: Sig, args: list[Typed]) -> Typed:
        exprs: list[PExpr] = []
        for i, a in enumerate(args):
            cls = sig.param(i)
            if a.const is None or cls in ("any", "anynonarray"):
                exprs.append(a.expr)
            else:
                exprs.append(self.const_as(a.const, CLASS_TYPES[cls]))
        ret = sig.result([e.type for e in exprs])
        if sig.same and isinstance(sig.ret, str) and sig.ret in CLASS_TYPES:
            for i, e in enumerate(exprs):
                if sig.param(i) == sig.ret and args[i].const is None and e.type.kind is ret.kind:
                    ret = e.type  # keep the argument's precision (coalesce(d, 0) stays DECIMAL(10,2))
                    break
            exprs = [
                self.const_as(given, ret)
                if (given := args[i].const) is not None and sig.param(i) == sig.ret
                else e
                for i, e in enumerate(exprs)
            ]
        return Typed(PExpr(FN, ret, sig.key, tuple(exprs)))

    def _sig_text(self, args: Sequence[P.Node]) -> str:
        return ", ".join(_family(self.expr(a).type) for a in args)


def _literal_decimal_type(d: Decimal) -> SqlType:
    """DECIMAL(p, s) of a decimal literal: its digits and its scale (``1.50`` is DECIMAL(3,2))."""
    _, digits, exp = d.as_tuple()
    assert isinstance(exp, int)
    scale = max(-exp, 0)
    precision = max(len(digits) + max(exp, 0), scale, 1)
    if precision > 38:
        return DECIMAL
    return SqlType(Kind.DECIMAL, f"DECIMAL({precision},{scale})", precision=precision, scale=scale)


def _numeric(t: SqlType) -> bool:
    return t.kind in (Kind.INT, Kind.UINT, Kind.FLOAT, Kind.DECIMAL)


def _class(t: SqlType) -> str:
    for name in CLASS_TYPES:
        if matches(name, t):
            return name
    return "any"


def _wider(a: SqlType, b: SqlType) -> SqlType:
    kinds = {a.kind, b.kind}
    if Kind.FLOAT in kinds:
        return FLOAT8
    if Kind.DECIMAL in kinds:
        return DECIMAL
    return INT8


def _reads_row(e: PExpr) -> bool:
    return any(
        n.op in (COL, PREV, PREVROW) or (n.op == META and n.value != META_CREATION_TS) for n in e.walk()
    )


def constant_value(e: PExpr) -> Any:
    """The value of an expression that reads no row (the predicate check)."""
    import pyarrow as pa

    from changefeed.formats.cdc_eval import evaluate_batch

    probe = CdcQuery(text="", table_id=0, columns=(OutputColumn("v", e),))
    empty = TableSchema(id=0, name="probe", dialect="sql", columns=())
    batch = pa.RecordBatch.from_arrays(
        [pa.array([0], pa.int64()), pa.array([0], pa.int32()), pa.array([0], pa.int8()), pa.array([False])],
        names=["ts", "lg", "op", "ox"],
    )
    try:
        out = evaluate_batch(probe, batch, empty, diff=False)
    except ChangefeedFailed:
        return None
    return out.column(out.num_columns - 1)[0].as_py()


def check_query(
    q: P.Query,
    table: TableSchema,
    *,
    enums: dict[str, tuple[str, ...]] | None = None,
    creation: CommitTs | None = None,
    cluster_id: str = "",
) -> CdcQuery:
    """Check a parsed CDC query against ``table``; raises CockroachDB's errors."""
    return Checker(table, enums=enums, creation=creation, cluster_id=cluster_id).check(q)


__all__ = ["CDC_FUNCTIONS", "MVCC_COLUMN", "Checker", "Typed", "check_query", "constant_value"]
