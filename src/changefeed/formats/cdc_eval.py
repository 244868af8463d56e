"""Evaluating a CDC query (:class:`~changefeed.feeds.cdc_plan.CdcQuery`) over change rows: the
predicate keeps rows, the projection adds one column per output (:func:`output_columns`) of the
type the encoders render.

Two faces, one semantics:

* :func:`evaluate_batch` (Python): over an Arrow batch of change rows (the core changefeed, the
  column-wise encoders, scans). Each expression is compiled once into Python closures over the
  batch's columns, decoded lazily into the value domains of :mod:`changefeed.formats.cdc_casts`;
* :func:`apply_spark` (Spark): the same expressions as Spark column expressions (built-in
  functions only, no Python UDF), a ``where`` and one ``withColumns``; Spark prunes the columns
  the query does not read and evaluates the projection only for the rows the predicate keeps.

The event a row is: ``op`` (CHANGE_ERASE a delete, CHANGE_SNAPSHOT a scan row, else an upsert),
``ox`` (the row existed before), the new image ``c<id>`` (a delete keeps only its key: the other
columns read NULL), the old image ``o<id>``, the commit time ``ts``/``lg`` (a scan row's is the
scan's). SQL's three-valued logic holds: a NULL predicate drops the row.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT
from changefeed.engine.patterns import like as sql_like
from changefeed.engine.storage import CHANGE_ERASE
from changefeed.engine.types import Kind, SqlType
from changefeed.exceptions import ChangefeedFailed
from changefeed.feeds.cdc_plan import (
    COL,
    FN,
    LIT,
    META,
    META_CREATION_TS,
    META_EVENT_TZ,
    META_MVCC,
    META_OP,
    META_PREV_MVCC,
    META_SCHEMA_TS,
    PREV,
    PREVROW,
    CdcQuery,
    PExpr,
)
from changefeed.formats import cdc_casts as C, crdb_values as V
from changefeed.formats.cdc_functions import SIGS

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import Column, DataFrame

#: Output column ``i`` of a projection is column ``c<PROJECTED_BASE + i>`` of the evaluated batch
#: or DataFrame (far above any table's column ids): the encoders read it as they read a column.
PROJECTED_BASE = 1 << 20

#: Operators and forms the evaluator implements itself (not strict, or not typed by class).
SPECIAL = frozenset(
    {
        "and", "or", "not", "is_null", "is_not_null", "is_true", "is_not_true", "is_false",
        "is_not_false", "distinct", "not_distinct", "case", "in", "not_in", "like", "not_like",
        "ilike", "not_ilike", "cast", "=", "!=", "<", "<=", ">", ">=",
    }
)  # fmt: skip


def out_name(i: int) -> str:
    return f"c{PROJECTED_BASE + i}"


def output_columns(q: CdcQuery) -> tuple[ColumnSchema, ...]:
    """The projection as columns (what the encoders render), in the query's order."""
    return tuple(
        ColumnSchema(id=PROJECTED_BASE + i, name=c.name, type=c.expr.type, role=Role.REGULAR)
        for i, c in enumerate(q.columns)
    )


def _lit_py(e: PExpr) -> Any:
    v, t = e.value, e.type
    if v is None:
        return None
    k = t.kind
    if k is Kind.DECIMAL:
        return Decimal(v)
    if k is Kind.BYTES:
        return bytes.fromhex(v)
    if k is Kind.FLOAT and isinstance(v, str):
        return float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[v])
    if k is Kind.FLOAT:
        return float(v)
    return v


def hlc_decimal(wall: int, logical: int) -> Decimal:
    return Decimal(f"{wall}.{logical:010d}")


# ============================================================================ Python face


class _Rows:
    """The columns of one batch as Python lists, decoded on first use."""

    def __init__(self, batch: pa.RecordBatch, table: TableSchema, diff: bool) -> None:
        self.batch = batch
        self.table = table
        self.diff = diff
        self.n = batch.num_rows
        self._cache: dict[tuple[str, int], list[Any]] = {}
        self.op: list[int] = batch.column("op").to_pylist()
        self.ox: list[bool] = batch.column("ox").to_pylist()
        self.ts: list[int] = batch.column("ts").to_pylist()
        self.lg: list[int] = batch.column("lg").to_pylist()

    def column(self, cid: int) -> list[Any]:
        got = self._cache.get(("c", cid))
        if got is None:
            c = self.table.column_by_id(cid)
            values = C.from_arrow(self.batch.column(c.db), c.type)
            if not c.is_key:
                values = [None if o == CHANGE_ERASE else v for v, o in zip(values, self.op, strict=True)]
            got = self._cache[("c", cid)] = values
        return got

    def had_prev(self, i: int) -> bool:
        return bool(self.ox[i]) and self.op[i] != CHANGE_SNAPSHOT

    def prev(self, cid: int) -> list[Any]:
        got = self._cache.get(("o", cid))
        if got is None:
            c = self.table.column_by_id(cid)
            name = c.db if c.is_key else f"o{cid}"
            values = C.from_arrow(self.batch.column(name), c.type)
            got = self._cache[("o", cid)] = [v if self.had_prev(i) else None for i, v in enumerate(values)]
        return got


def _prev_columns(table: TableSchema) -> list[Any]:
    cols = [c for c in table.stored]
    return sorted(cols, key=lambda c: c.name.encode())


def _compile_py(e: PExpr, rows: _Rows, q: CdcQuery) -> Callable[[int], Any]:
    op = e.op
    if op == LIT:
        v = _lit_py(e)
        return lambda i: v
    if op == COL:
        col = rows.column(e.value)
        return col.__getitem__
    if op == PREV:
        pcol = rows.prev(e.value)
        return pcol.__getitem__
    if op == PREVROW:
        cols = _prev_columns(rows.table)
        lists = [rows.prev(c.id) for c in cols]
        prefixes = [V.json_string(c.name) + ": " for c in cols]
        types = [c.type for c in cols]

        def prevrow(i: int) -> str | None:
            if not rows.had_prev(i):
                return None
            parts = [p + C.json_text(lst[i], t) for p, lst, t in zip(prefixes, lists, types, strict=True)]
            return "{" + ", ".join(parts) + "}"

        return prevrow
    if op == META:
        return _meta_py(e.value, rows, q)
    assert op == FN, op
    key = e.value
    if key in SPECIAL:
        return _special_py(e, rows, q)
    sig = SIGS[key]
    args = [_compile_py(a, rows, q) for a in e.args]
    impl = sig.py([a.type for a in e.args], e.type)
    if not sig.strict:
        return lambda i: impl(*[a(i) for a in args])
    if len(args) == 1:
        (a0,) = args
        return lambda i: None if (v := a0(i)) is None else impl(v)
    if len(args) == 2:
        a0, a1 = args

        def two(i: int) -> Any:
            x = a0(i)
            if x is None:
                return None
            y = a1(i)
            return None if y is None else impl(x, y)

        return two

    def strict(i: int) -> Any:
        vals = [a(i) for a in args]
        return None if any(v is None for v in vals) else impl(*vals)

    return strict


def _meta_py(name: str, rows: _Rows, q: CdcQuery) -> Callable[[int], Any]:
    if name in (META_MVCC, META_SCHEMA_TS):
        return lambda i: hlc_decimal(rows.ts[i], rows.lg[i])
    if name == META_PREV_MVCC:
        return lambda i: Decimal("0E-10") if rows.had_prev(i) else None
    if name == META_CREATION_TS:
        v = hlc_decimal(q.creation_wall, q.creation_logical)
        return lambda i: v
    if name == META_EVENT_TZ:
        return lambda i: (rows.ts[i] + 500) // 1000
    if name == META_OP:
        diff = rows.diff or q.uses_prev

        def event_op(i: int) -> str:
            if rows.op[i] == CHANGE_ERASE:
                return "delete"
            if not diff:
                return "upsert"
            return "update" if rows.had_prev(i) else "insert"

        return event_op
    raise ChangefeedFailed(f"unknown CDC value {name}")


def _truth(v: Any) -> bool | None:
    return None if v is None else bool(v)


def _cmp_key(v: Any, t: SqlType) -> Any:
    if t.kind is Kind.FLOAT:
        return (v != v, v if v == v else 0.0)  # NaN sorts last and equals NaN
    if t.kind is Kind.DECIMAL and v.is_nan():
        return (True, Decimal(0))
    if t.kind is Kind.DECIMAL:
        return (False, v)
    if t.kind is Kind.TEXT or t.kind is Kind.ENUM:
        return v.encode()
    return v


def _special_py(e: PExpr, rows: _Rows, q: CdcQuery) -> Callable[[int], Any]:
    key = e.value
    args = [_compile_py(a, rows, q) for a in e.args]
    if key == "and":
        a, b = args

        def and_(i: int) -> bool | None:
            x = _truth(a(i))
            if x is False:
                return False
            y = _truth(b(i))
            if y is False:
                return False
            return None if x is None or y is None else True

        return and_
    if key == "or":
        a, b = args

        def or_(i: int) -> bool | None:
            x = _truth(a(i))
            if x is True:
                return True
            y = _truth(b(i))
            if y is True:
                return True
            return None if x is None or y is None else False

        return or_
    if key == "not":
        (a,) = args
        return lambda i: None if (v := a(i)) is None else not v
    if key in ("is_null", "is_not_null"):
        (a,) = args
        want = key == "is_null"
        return lambda i: (a(i) is None) == want
    if key in ("is_true", "is_not_true", "is_false", "is_not_false"):
        (a,) = args
        target = key.endswith("true")
        neg = "_not_" in key
        return lambda i: (a(i) is target) != neg
    if key in ("distinct", "not_distinct"):
        a, b = args
        t = e.args[0].type
        neg = key == "not_distinct"

        def distinct(i: int) -> bool:
            x, y = a(i), b(i)
            nulls = x is None or y is None
            same = (x is None and y is None) if nulls else _cmp_key(x, t) == _cmp_key(y, t)
            return same if neg else not same

        return distinct
    if key in ("=", "!=", "<", "<=", ">", ">="):
        a, b = args
        t = e.args[0].type
        test: Callable[[Any, Any], bool] = {
            "=": lambda x, y: x == y,
            "!=": lambda x, y: x != y,
            "<": lambda x, y: x < y,
            "<=": lambda x, y: x <= y,
            ">": lambda x, y: x > y,
            ">=": lambda x, y: x >= y,
        }[key]

        def compare(i: int) -> bool | None:
            x = a(i)
            if x is None:
                return None
            y = b(i)
            if y is None:
                return None
            return test(_cmp_key(x, t), _cmp_key(y, t))

        return compare
    if key in ("in", "not_in"):
        first, items = args[0], args[1:]
        t = e.args[0].type
        neg = key == "not_in"

        def in_(i: int) -> bool | None:
            x = first(i)
            if x is None:
                return None
            seen_null = False
            kx = _cmp_key(x, t)
            for it in items:
                y = it(i)
                if y is None:
                    seen_null = True
                elif _cmp_key(y, t) == kx:
                    return not neg
            return None if seen_null else neg

        return in_
    if key in ("like", "not_like", "ilike", "not_ilike"):
        s, pattern = args[0], args[1]
        esc = args[2] if len(args) > 2 else None
        insensitive = "ilike" in key
        neg = key.startswith("not")

        def like(i: int) -> bool | None:
            x, p = s(i), pattern(i)
            if x is None or p is None:
                return None
            ch = "\\" if esc is None else esc(i)
            return bool(sql_like(x, p, insensitive=insensitive, escape=ch) != neg)

        return like
    if key == "case":
        # args: cond1, value1, cond2, value2, ..., [default]
        pairs = list(zip(args[0::2], args[1::2], strict=False))
        default = args[-1] if len(args) % 2 else None
        if len(args) % 2:
            pairs = pairs[: len(args) // 2]

        def case(i: int) -> Any:
            for cond, value in pairs:
                if cond(i) is True:
                    return value(i)
            return None if default is None else default(i)

        return case
    if key == "cast":
        (a,) = args
        f = C.cast_py(e.args[0].type, e.type)
        return lambda i: None if (v := a(i)) is None else f(v)
    raise ChangefeedFailed(f"unknown CDC query operator {key}")


def evaluate_batch(q: CdcQuery, batch: pa.RecordBatch, table: TableSchema, *, diff: bool) -> pa.RecordBatch:
    """The rows of ``batch`` the query keeps, with its projection added (:func:`output_columns`)."""
    import pyarrow as pa

    rows = _Rows(batch, table, diff)
    if q.where is not None and rows.n:
        pred = _compile_py(q.where, rows, q)
        keep = [pred(i) is True for i in range(rows.n)]
        if not all(keep):
            batch = batch.filter(pa.array(keep, pa.bool_()))
            rows = _Rows(batch, table, diff)
    n = batch.num_rows
    arrays = list(batch.columns)
    names = list(batch.schema.names)
    for j, col in enumerate(q.columns):
        f = _compile_py(col.expr, rows, q)
        arrays.append(C.to_arrow([f(i) for i in range(n)], col.expr.type))
        names.append(out_name(j))
    return pa.RecordBatch.from_arrays(arrays, names=names)


# ============================================================================ Spark face


class _Frame:
    def __init__(self, table: TableSchema, diff: bool, q: CdcQuery) -> None:
        from pyspark.sql import functions as F

        self.table = table
        self.diff = diff or q.uses_prev
        self.q = q
        self.op = F.col("op")
        self.erased = self.op == CHANGE_ERASE
        self.had_prev = F.col("ox") & (self.op != CHANGE_SNAPSHOT)

    def column(self, cid: int) -> Column:
        from pyspark.sql import functions as F

        c = self.table.column_by_id(cid)
        col = F.col(c.db)
        return col if c.is_key else F.when(~self.erased, col)

    def prev(self, cid: int) -> Column:
        from pyspark.sql import functions as F

        c = self.table.column_by_id(cid)
        return F.when(self.had_prev, F.col(c.db if c.is_key else f"o{cid}"))


def _hlc_spark(ts: Column, lg: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(ts.cast("string"), F.lit("."), F.lpad(lg.cast("string"), 10, "0")).cast("decimal(30,10)")


def _compile_spark(e: PExpr, fr: _Frame) -> Column:
    from pyspark.sql import functions as F

    op = e.op
    if op == LIT:
        v = _lit_py(e)
        if v is None:
            return F.lit(None).cast(C.spark_type(e.type))
        t = e.type
        if t.kind in (Kind.TIMESTAMP,):
            return F.timestamp_micros(F.lit(v))
        if t.kind is Kind.DATE:
            return F.date_from_unix_date(F.lit(v))
        if t.kind is Kind.DECIMAL:
            return (
                F.lit(str(v)).cast(C.spark_type(t)) if t.precision is not None else F.lit(C.decimal_string(v))
            )
        if t.kind is Kind.BYTES:
            return F.unhex(F.lit(bytes(v).hex()))
        if t.kind is Kind.JSON:
            return F.lit(v)
        return F.lit(v).cast(C.spark_type(t))
    if op == COL:
        return fr.column(e.value)
    if op == PREV:
        return fr.prev(e.value)
    if op == PREVROW:
        parts: list[Column] = []
        for j, c in enumerate(_prev_columns(fr.table)):
            parts.append(F.lit(("{" if j == 0 else ", ") + V.json_string(c.name) + ": "))
            parts.append(C.spark_json(fr.prev(c.id), c.type))
        body = F.concat(*parts, F.lit("}")) if parts else F.lit("{}")
        return F.when(fr.had_prev, body)
    if op == META:
        return _meta_spark(e.value, fr)
    key = e.value
    if key in SPECIAL:
        return _special_spark(e, fr)
    sig = SIGS[key]
    cols = [_compile_spark(a, fr) for a in e.args]
    consts = [(_lit_py(a) if a.op == LIT else _NOT_CONST) for a in e.args]
    return sig.spark(cols, [a.type for a in e.args], e.type, consts)


_NOT_CONST = object()


def _meta_spark(name: str, fr: _Frame) -> Column:
    from pyspark.sql import functions as F

    if name in (META_MVCC, META_SCHEMA_TS):
        return _hlc_spark(F.col("ts"), F.col("lg"))
    if name == META_PREV_MVCC:
        return F.when(fr.had_prev, F.lit("0").cast("decimal(30,10)"))
    if name == META_CREATION_TS:
        q = fr.q
        return F.lit(str(hlc_decimal(q.creation_wall, q.creation_logical))).cast("decimal(30,10)")
    if name == META_EVENT_TZ:
        x = F.col("ts") + F.lit(500)
        return F.timestamp_micros(((x - F.pmod(x, F.lit(1000))).cast("decimal(20,0)") / 1000).cast("bigint"))
    if name == META_OP:
        if not fr.diff:
            return F.when(fr.erased, F.lit("delete")).otherwise(F.lit("upsert"))
        return (
            F.when(fr.erased, F.lit("delete")).when(fr.had_prev, F.lit("update")).otherwise(F.lit("insert"))
        )
    raise ChangefeedFailed(f"unknown CDC value {name}")


def _spark_cmp_operand(c: Column, t: SqlType) -> Column:
    if t.kind is Kind.DECIMAL and t.precision is None:
        return c.cast("decimal(38,18)")
    return c


def _special_spark(e: PExpr, fr: _Frame) -> Column:
    from pyspark.sql import functions as F

    key = e.value
    args = [_compile_spark(a, fr) for a in e.args]
    if key == "and":
        return args[0] & args[1]
    if key == "or":
        return args[0] | args[1]
    if key == "not":
        return ~args[0]
    if key == "is_null":
        return args[0].isNull()
    if key == "is_not_null":
        return args[0].isNotNull()
    if key in ("is_true", "is_not_true", "is_false", "is_not_false"):
        target = key.endswith("true")
        hit = F.coalesce(args[0] == F.lit(target), F.lit(False))
        return ~hit if "_not_" in key else hit
    t = e.args[0].type if e.args else None
    if key in ("distinct", "not_distinct"):
        assert t is not None
        a, b = (_spark_cmp_operand(x, t) for x in args)
        same = a.eqNullSafe(b)
        return same if key == "not_distinct" else ~same
    if key in ("=", "!=", "<", "<=", ">", ">="):
        assert t is not None
        a, b = (_spark_cmp_operand(x, t) for x in args)
        return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[key]
    if key in ("in", "not_in"):
        assert t is not None
        first = _spark_cmp_operand(args[0], t)
        items = [_spark_cmp_operand(x, t) for x in args[1:]]
        hit = first.isin(*items)
        return ~hit if key == "not_in" else hit
    if key in ("like", "not_like", "ilike", "not_ilike"):
        esc = e.args[2] if len(e.args) > 2 else None
        esc_char: str | None = None
        if esc is not None:
            if esc.op != LIT or not isinstance(esc.value, str) or len(esc.value) != 1:
                return F.raise_error(F.lit("LIKE .. ESCAPE on Spark needs a one-character constant"))
            esc_char = esc.value
        f = F.ilike if "ilike" in key else F.like
        hit = f(args[0], args[1], F.lit(esc_char)) if esc_char is not None else f(args[0], args[1])
        return ~hit if key.startswith("not") else hit
    if key == "case":
        default = args[-1] if len(args) % 2 else None
        conds = args[: len(args) - (1 if default is not None else 0)]
        out = F.when(conds[0], conds[1])
        for j in range(2, len(conds), 2):
            out = out.when(conds[j], conds[j + 1])
        return out.otherwise(default) if default is not None else out
    if key == "cast":
        return C.cast_spark(args[0], e.args[0].type, e.type)
    raise ChangefeedFailed(f"unknown CDC query operator {key}")


def apply_spark(q: CdcQuery, df: DataFrame, table: TableSchema, *, diff: bool) -> DataFrame:
    """The Spark face of :func:`evaluate_batch`: ``df`` filtered by the predicate, with the
    projection added (:func:`output_columns`)."""
    fr = _Frame(table, diff, q)
    if q.where is not None:
        df = df.where(_compile_spark(q.where, fr))
    return df.withColumns(
        {
            out_name(j): _compile_spark(c.expr, fr).cast(C.spark_type(c.expr.type))
            for j, c in enumerate(q.columns)
        }
    )


__all__ = [
    "PROJECTED_BASE",
    "SPECIAL",
    "apply_spark",
    "evaluate_batch",
    "hlc_decimal",
    "out_name",
    "output_columns",
]
