"""Apache Phoenix statements: Phoenix CREATE TABLE, ALTER TABLE .. SET, CREATE/DROP CDC, UPSERT ..
SELECT, and CDC queries (``SELECT .. FROM <cdc> WHERE PHOENIX_ROW_TIMESTAMP() >= TO_DATE(..)``).

Identifier rules: a table created with Phoenix-only syntax (see ``ast.PhoenixCreateTable``) is a
Phoenix table and folds its unquoted identifiers to upper case, as Phoenix does, so ``v1`` is
stored (and shown in CDC images) as ``V1``; CDC object names always follow Phoenix's rule. Other
tables keep the shared ``sql`` dialect's rule (names as written), so a CDC on a YDB or CockroachDB
table shows their names as they were declared. Lookups stay case-insensitive when unambiguous.

The storage side (time index, max lookback) is ``changefeed.engine.phoenix``; the JSON is
``changefeed.formats.phoenix_json``.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from decimal import Decimal
from typing import Any

from changefeed.engine import phoenix, replicas
from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.phoenix import CdcObject, PhoenixTable
from changefeed.engine.phoenix_types import resolve_phoenix_type
from changefeed.engine.privileges import Privilege
from changefeed.engine.storage import TableStore
from changefeed.engine.txn import Transaction
from changefeed.engine.type_errors import sql_text
from changefeed.engine.types import SqlType
from changefeed.exceptions import (
    CdcAlreadyEnabled,
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    PhoenixSyntaxError,
    PhoenixTableAlreadyExists,
    PhoenixTableUndefined,
    UndefinedColumn,
    UnknownChangeScope,
    UnsupportedFeature,
)
from changefeed.formats import phoenix_json
from changefeed.formats.phoenix_batch import cdc_rows
from changefeed.formats.phoenix_json import CDC_JSON, ROW_TIMESTAMP, cdc_columns
from changefeed.sql import ast, astjson
from changefeed.sql.evaluator import Evaluator, Params, Scope, conjuncts, has_aggregate, sort_key
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import ddl, dml, select, select_clauses, set_operations

FAMILY = StatementFamily("phoenix")

MAX_SALT_BUCKETS = 256


# ===================================================================================== names


def pident(i: ast.Ident) -> str:
    """Phoenix's rule: unquoted names are upper-cased, quoted ones kept."""
    return i.name if i.quoted else i.name.upper()


def _table_name(q: ast.QName) -> str:
    return ".".join(pident(p) for p in q.parts)


def _resolve(session: Session, txn: Transaction, q: ast.QName) -> TableSchema | None:
    """A table named by ``q`` under either rule (Phoenix's upper case, or as written)."""
    for name in (_table_name(q), session.table_name(q)):
        schema = session.db.find_table(name)
        if schema is not None:
            return schema
    return None


def find_cdc(session: Session, q: ast.QName) -> tuple[TableSchema, CdcObject] | None:
    """The data table and CDC object a query's FROM names, or None when it names no CDC."""
    wanted = pident(q.parts[-1])
    schema_prefix = ".".join(pident(p) for p in q.parts[:-1])
    hits = []
    for t in session.db.tables():
        cdc = phoenix.cdc_of(t)
        if cdc is None or (t.keyspace or "").upper() != schema_prefix.upper():
            continue
        if cdc.name == wanted or (not q.parts[-1].quoted and cdc.name.upper() == wanted):
            hits.append((t, cdc))
    return hits[0] if len(hits) == 1 else None


# ===================================================================================== properties


def _prop_value(session: Session, p: ast.PhoenixProperty, ev: Params) -> Any:
    return session.option_value(p.value, ev)


def _int_prop(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidOption(f"table property {name} must be an integer, not {sql_text(value)}")
    try:
        n = int(value)
    except ValueError:
        raise InvalidOption(f"table property {name} must be an integer, not {sql_text(value)}") from None
    if n < lo or (hi is not None and n > hi):
        raise InvalidOption(f"table property {name} must be between {lo} and {hi}, not {n}")
    return n


def apply_properties(
    session: Session, pt: PhoenixTable, props: Sequence[ast.PhoenixProperty], ev: Params
) -> PhoenixTable:
    """Table properties on CREATE TABLE or ALTER TABLE .. SET: the ones that change what CDC
    sees are interpreted, every other is kept as written."""
    out = pt
    extra = dict(pt.properties)
    for p in props:
        raw = p.name.name
        key = raw if p.name.quoted else raw.upper()
        value = _prop_value(session, p, ev)
        if key.lower() == phoenix.META_MAX_LOOKBACK:
            out = replace(out, max_lookback_ms=_int_prop(raw, value, 0) * 1000)
        elif key == "MAX_LOOKBACK_AGE":
            out = replace(out, max_lookback_ms=_int_prop(raw, value, 0))
        elif key == "TTL":
            if isinstance(value, str) and value.upper() == "FOREVER":
                out = replace(out, ttl_s=None)
            elif isinstance(value, int) and not isinstance(value, bool):
                out = replace(out, ttl_s=_int_prop(raw, value, 1) if value else None)
            else:  # conditional TTL expressions are kept but not evaluated
                extra["TTL"] = value
        elif key == "SALT_BUCKETS":
            out = replace(out, salt_buckets=_int_prop(raw, value, 0, MAX_SALT_BUCKETS))
        elif key == "IMMUTABLE_ROWS":
            out = replace(out, immutable_rows=str(value).lower() in ("true", "1"))
        else:
            extra[key] = value if isinstance(value, bool | int | float | str) or value is None else str(value)
    return replace(out, properties=extra)


# ===================================================================================== CREATE TABLE


@FAMILY.statement(ast.PhoenixCreateTable)
def create_table(session: Session, txn: Transaction, s: ast.PhoenixCreateTable, ev: Params) -> Result:
    t = s.table
    name = _table_name(t.name)
    existing = session.db.find_table(name)
    if existing is not None and existing.name.upper() == name.upper():
        if t.if_not_exists:
            return Result(status="CREATE TABLE")
        raise PhoenixTableAlreadyExists(f" tableName={name}")
    inline = [c for c in t.columns if c.primary_key]
    if t.primary_key is not None and inline:
        raise InvalidStatement("the primary key is declared twice (inline and as a constraint)")
    if t.primary_key is not None:
        key_names = [pident(i) for i in t.primary_key.partition + t.primary_key.clustering]
    elif len(inline) == 1:
        key_names = [pident(inline[0].name)]
    else:
        raise InvalidStatement(f"table {name} must have one PRIMARY KEY column or a PRIMARY KEY constraint")
    columns: list[ColumnSchema] = []
    seen: set[str] = set()
    for i, cd in enumerate(t.columns):
        cname = pident(cd.name)
        family = pident(cd.family) if cd.family is not None else None
        shown = f"{family}.{cname}" if family else cname
        if shown in seen or cname in seen:
            raise DuplicateObject(f'column "{shown}" is declared twice in table {name}')
        seen.add(cname)
        ctype = resolve_phoenix_type(cd.type.name, cd.type.params, cd.type.array)
        key = cname in key_names
        if key and family is not None:
            raise InvalidStatement(f"primary key column {cname} cannot have a column family")
        columns.append(
            ColumnSchema(
                id=i,
                name=cname,
                type=ctype,
                role=Role.PARTITION if key else Role.REGULAR,
                not_null=cd.not_null,
                default=astjson.to_json(cd.default) if cd.default is not None else None,
                family=family,
            )
        )
    by_name = {c.name: c for c in columns}
    missing = [k for k in key_names if k not in by_name]
    if missing:
        raise UndefinedColumn(f'primary key column "{missing[0]}" is not a column of table {name}')
    keyed = [by_name[k] for k in key_names]
    if any(c.type.name.endswith(" ARRAY") or c.type.name == "JSON" for c in keyed):
        raise InvalidStatement("array and JSON columns cannot be part of a primary key")
    columns = keyed + [c for c in columns if c.name not in key_names]
    pt = apply_properties(session, PhoenixTable(ddl=True, immutable_rows=s.immutable), s.properties, ev)
    schema = TableSchema(
        id=session.db.next_table_id(),
        name=name,
        dialect="sql",
        columns=tuple(columns),
        options={"phoenix": pt.to_json()},
        next_column_id=len(columns),
    )
    for stmt in TableStore(schema).create_sql():
        txn.conn.execute(stmt)
    session.db.save_table(schema)
    ddl.initial_grants(session, txn, schema)
    return Result(status="CREATE TABLE")


@FAMILY.alter_action(ast.PhoenixSetProperties)
def set_properties(
    session: Session, txn: Transaction, schema: TableSchema, action: ast.PhoenixSetProperties, ev: Params
) -> TableSchema:
    session.require(txn, schema, Privilege.CREATE)
    pt = apply_properties(session, phoenix.phoenix_of(schema), action.properties, ev)
    new = phoenix.with_phoenix(schema, pt)
    session.db.save_table(new)
    session.db.refresh_catalog()
    return session.db.table_by_id(new.id)


@FAMILY.on_drop_table
def drop_table(session: Session, txn: Transaction, schema: TableSchema) -> None:
    """Dropping a table drops its CDC object and time index, as Phoenix does."""
    txn.conn.execute(phoenix.index_drop_sql(schema))


# ===================================================================================== CREATE/DROP CDC


def _set_changes(session: Session, txn: Transaction, schema: TableSchema, on: bool) -> TableSchema:
    if on and not schema.changes:
        txn.conn.execute(
            TableStore(schema).changes_create_sql().replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS", 1)
        )
    if not on and schema.changes:
        txn.conn.execute(f"DROP TABLE IF EXISTS x{schema.id}")
    return replace(schema, changes=on)


def _scopes_of(words: Sequence[ast.Ident]) -> tuple[str, ...]:
    try:
        return tuple(sorted(phoenix_json.parse_scopes(w.name for w in words)))
    except ValueError as exc:
        raise PhoenixSyntaxError(
            f' Encountered "{exc}": INCLUDE takes PRE, POST and CHANGE (Unknown change scope {exc})'
        ) from None


@FAMILY.statement(ast.CreateCdc)
def create_cdc(session: Session, txn: Transaction, s: ast.CreateCdc, ev: Params) -> Result:
    cdc_name = pident(s.name)
    include = _scopes_of(s.include) if s.include is not None else ()
    salt = 0
    for p in s.properties:
        key = p.name.name if p.name.quoted else p.name.name.upper()
        if key == "SALT_BUCKETS":
            salt = _int_prop("SALT_BUCKETS", _prop_value(session, p, ev), 0, MAX_SALT_BUCKETS)
    schema = _resolve(session, txn, s.table)
    if schema is None:
        if find_cdc(session, s.table) is not None:
            raise PhoenixTableUndefined(f" tableName={_table_name(s.table)} (a CDC object, not a table)")
        raise PhoenixTableUndefined(f" tableName={_table_name(s.table)}")
    if schema.is_cql:
        raise PhoenixTableUndefined(f" tableName={schema.name} (a CQL table: CDC is ScyllaDB's log there)")
    session.require(txn, schema, Privilege.CREATE)
    replicas.check_schema_change(schema)
    live = [st for st in phoenix.phoenix_of(schema).streams if st.status != phoenix.STREAM_DISABLED]
    if phoenix.cdc_of(schema) is not None or live:
        # Phoenix names the enabled stream (``getStreamNameIfCDCEnabled``)
        raise CdcAlreadyEnabled(f" tableName={live[-1].name if live else schema.name}")
    prefix = schema.keyspace
    qualified = f"{prefix}.{cdc_name}" if prefix else cdc_name
    clash = session.db.find_table(qualified)
    other = find_cdc(session, ast.QName((*s.table.parts[:-1], ast.Ident(cdc_name, True))))
    if (clash is not None and clash.name.upper() == qualified.upper()) or other is not None:
        if s.if_not_exists:
            return Result(status="CREATE CDC")
        raise PhoenixTableAlreadyExists(f" tableName={cdc_name}")
    assert txn.ts is not None
    created = txn.ts.wall // phoenix.NS_PER_MS
    cdc = CdcObject(cdc_name, include, salt, created, phoenix.table_regions(schema))
    pt = phoenix.phoenix_of(schema)
    # Phoenix 5.3's stream: its partitions are the table's regions now; Phoenix fills them in a
    # background task (ENABLING, then ENABLED), here they are known at once.
    stream = phoenix.Stream(
        phoenix.stream_name(schema.name, cdc_name, created), phoenix.STREAM_ENABLED, cdc.regions, created
    )
    schema = _set_changes(session, txn, schema, True)
    new = phoenix.with_phoenix(schema, replace(pt, cdc=(cdc,), streams=(*pt.streams, stream)))
    txn.conn.execute(phoenix.index_create_sql(new))
    session.db.save_table(new)
    session.db.refresh_catalog()
    return Result(status="CREATE CDC")


@FAMILY.statement(ast.DropCdc)
def drop_cdc(session: Session, txn: Transaction, s: ast.DropCdc, ev: Params) -> Result:
    cdc_name = pident(s.name)
    schema = _resolve(session, txn, s.table)
    cdc = phoenix.cdc_of(schema) if schema is not None else None
    if schema is None or cdc is None or cdc.name != cdc_name:
        if s.if_exists:
            return Result(status="DROP CDC")
        raise PhoenixTableUndefined(f" tableName={cdc_name}")
    session.require(txn, schema, Privilege.CREATE)
    txn.conn.execute(phoenix.index_drop_sql(schema))
    pt = phoenix.phoenix_of(schema)
    has_feeds = txn.conn.execute("SELECT 1 FROM _feeds WHERE table_id = ?", (schema.id,)).fetchone()
    if has_feeds is None and not schema.options.get("changes"):
        schema = _set_changes(session, txn, schema, False)
    streams = tuple(
        replace(st, status=phoenix.STREAM_DISABLED) if st.status != phoenix.STREAM_DISABLED else st
        for st in pt.streams
    )
    session.db.save_table(phoenix.with_phoenix(schema, replace(pt, cdc=(), streams=streams)))
    session.db.refresh_catalog()
    return Result(status="DROP CDC")


# ===================================================================================== UPSERT SELECT


@FAMILY.statement(ast.UpsertSelect)
def upsert_select(session: Session, txn: Transaction, s: ast.UpsertSelect, ev: Params) -> Result:
    if isinstance(s.query, ast.SetOperation):
        rows = set_operations.set_operation(session, txn, s.query, ev).rows
    else:
        rows = select.select(session, txn, s.query, ev).rows
    tag = s.mode.upper()
    if not rows:
        if s.returning:  # no rows, the columns all the same
            shape = dml.returning_shape(session, txn, s)
            return replace(shape, status=f"{tag} 0", rowcount=0)
        return Result(status=f"{tag} 0")
    values = tuple(tuple(ast.Literal(v) for v in r) for r in rows)
    insert = ast.Insert(
        s.table,
        s.columns,
        values,
        mode=s.mode,
        on_conflict_do_nothing=s.on_conflict_do_nothing,
        on_conflict_update=s.on_conflict_update,
        returning=s.returning,
        pos=s.pos,
    )
    # The RETURNING list's subqueries see the table as the SELECT did, before the write (dml.insert)
    res = dml.insert(session, txn, insert, ev)
    return replace(res, status=f"{tag} {res.rowcount}")


# ===================================================================================== CDC queries


_HINT = re.compile(r"CDC_INCLUDE\s*\(([^)]*)\)", re.I)


def hint_scopes(hint: str) -> frozenset[str] | None:
    """The scopes of a ``CDC_INCLUDE(..)`` hint (None when the hint has none). Phoenix splits the
    argument on commas and trims; anything else (``PRE POST``) is error 10958 naming it."""
    m = _HINT.search(hint)
    if m is None:
        return None
    out = set()
    for word in m.group(1).split(","):
        w = " ".join(word.split()).upper()
        if not w:
            continue
        if w not in phoenix_json.SCOPES:
            raise UnknownChangeScope(f": {w}")
        out.add(w)
    return frozenset(out)


@FAMILY.statement(ast.HintedSelect, write=False)
def hinted_select(session: Session, txn: Transaction, s: ast.HintedSelect, ev: Params) -> Result:
    if s.select.table is not None:
        found = find_cdc(session, s.select.table)
        if found is not None:
            return cdc_query(session, txn, found[0], found[1], s.select, ev, hint_scopes(s.hint))
    return select.select(session, txn, s.select, ev)  # other hints are ignored, as Phoenix does


#: The hidden column of a CDC row that ``PARTITION_ID()`` reads (Phoenix 5.3).
PARTITION_COLUMN = "PARTITION_ID()"


def _rewrite(e: Any) -> Any:
    """``PHOENIX_ROW_TIMESTAMP()`` and ``PARTITION_ID()`` calls become references to the CDC
    row's time and partition columns."""
    if isinstance(e, ast.FuncCall) and e.name.upper() == "PHOENIX_ROW_TIMESTAMP" and not e.args:
        return ast.Column(ast.Ident(ROW_TIMESTAMP, True))
    if isinstance(e, ast.FuncCall) and e.name.upper() == "PARTITION_ID" and not e.args:
        return ast.Column(ast.Ident(PARTITION_COLUMN, True))
    if isinstance(e, ast.FuncCall):
        return ast.FuncCall(e.name, tuple(_rewrite(a) for a in e.args))
    if isinstance(e, ast.BinaryOp):
        return ast.BinaryOp(e.op, _rewrite(e.left), _rewrite(e.right))
    if isinstance(e, ast.UnaryOp):
        return ast.UnaryOp(e.op, _rewrite(e.operand))
    if isinstance(e, ast.Between):
        return ast.Between(_rewrite(e.expr), _rewrite(e.low), _rewrite(e.high), e.negated)
    if isinstance(e, ast.Like):
        return replace(e, expr=_rewrite(e.expr), pattern=_rewrite(e.pattern))
    if isinstance(e, ast.InList):
        return ast.InList(_rewrite(e.expr), tuple(_rewrite(x) for x in e.items), e.negated)
    if isinstance(e, ast.IsNull):
        return ast.IsNull(_rewrite(e.expr), e.negated)
    if isinstance(e, ast.IsDistinct):
        return ast.IsDistinct(_rewrite(e.left), _rewrite(e.right), e.negated)
    if isinstance(e, ast.Cast):
        return ast.Cast(_rewrite(e.expr), e.type)
    return e


def _is_ts(e: Any) -> bool:
    return isinstance(e, ast.Column) and e.name.quoted and e.name.name == ROW_TIMESTAMP


def _is_pid(e: Any) -> bool:
    return isinstance(e, ast.Column) and e.name.quoted and e.name.name == PARTITION_COLUMN


def _mentions_pid(e: Any) -> bool:
    """Whether an expression (already rewritten) reads ``PARTITION_ID()``."""
    if _is_pid(e):
        return True
    if isinstance(e, ast.FuncCall):
        return any(_mentions_pid(a) for a in e.args)
    if isinstance(e, ast.BinaryOp):
        return _mentions_pid(e.left) or _mentions_pid(e.right)
    if isinstance(e, ast.UnaryOp):
        return _mentions_pid(e.operand)
    if isinstance(e, ast.Between):
        return _mentions_pid(e.expr) or _mentions_pid(e.low) or _mentions_pid(e.high)
    if isinstance(e, ast.Like):
        return _mentions_pid(e.expr) or _mentions_pid(e.pattern)
    if isinstance(e, ast.InList):
        return _mentions_pid(e.expr) or any(_mentions_pid(x) for x in e.items)
    if isinstance(e, ast.IsNull | ast.Cast):
        return _mentions_pid(e.expr)
    if isinstance(e, ast.IsDistinct):
        return _mentions_pid(e.left) or _mentions_pid(e.right)
    return False


def partitions_wanted(where: Any, evaluate: Any) -> set[str] | None:
    """The partition ids ``PARTITION_ID() = ..`` / ``IN (..)`` conjuncts allow (None: all)."""
    out: set[str] | None = None
    for rel in conjuncts(where) if where is not None else ():
        ids: set[str] | None = None
        if isinstance(rel, ast.BinaryOp) and rel.op == "=":
            if _is_pid(rel.left) and _const(rel.right):
                ids = {str(evaluate(rel.right))}
            elif _is_pid(rel.right) and _const(rel.left):
                ids = {str(evaluate(rel.left))}
        elif (
            isinstance(rel, ast.InList)
            and not rel.negated
            and _is_pid(rel.expr)
            and all(_const(x) for x in rel.items)
        ):
            ids = {str(evaluate(x)) for x in rel.items}
        if ids is not None:
            out = ids if out is None else out & ids
    return out


def _ms(v: Any) -> float:
    """A bound's value as (possibly fractional) epoch milliseconds."""
    if isinstance(v, dt.datetime):
        aware = v if v.tzinfo is not None else v.replace(tzinfo=dt.UTC)
        return (aware - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) / dt.timedelta(milliseconds=1)
    if isinstance(v, dt.date):
        return _ms(dt.datetime(v.year, v.month, v.day))
    if isinstance(v, int | float | Decimal) and not isinstance(v, bool):
        return float(v)
    raise InvalidStatement(f"PHOENIX_ROW_TIMESTAMP() compares with a date or timestamp, not {sql_text(v)}")


_FLIP = {">=": "<=", ">": "<", "<=": ">=", "<": ">", "=": "="}


def time_range(where: Any, evaluate: Any) -> tuple[int | None, int | None]:
    """``[lo, hi)`` in ms from the ``PHOENIX_ROW_TIMESTAMP() op const`` conjuncts of ``where``."""
    lo: int | None = None
    hi: int | None = None

    def bound(op: str, v: float) -> None:
        nonlocal lo, hi
        if op in (">=", ">", "="):
            x = math.ceil(v) if op != ">" else math.floor(v) + 1
            lo = x if lo is None else max(lo, x)
        if op in ("<", "<=", "="):
            y = math.ceil(v) if op == "<" else math.floor(v) + 1
            hi = y if hi is None else min(hi, y)

    for rel in conjuncts(where) if where is not None else ():
        if isinstance(rel, ast.BinaryOp) and rel.op in _FLIP:
            if _is_ts(rel.left) and _const(rel.right):
                v = evaluate(rel.right)
                if v is not None:
                    bound(rel.op, _ms(v))
            elif _is_ts(rel.right) and _const(rel.left):
                v = evaluate(rel.left)
                if v is not None:
                    bound(_FLIP[rel.op], _ms(v))
        elif (
            isinstance(rel, ast.Between)
            and not rel.negated
            and _is_ts(rel.expr)
            and _const(rel.low)
            and _const(rel.high)
        ):
            lo_v, hi_v = evaluate(rel.low), evaluate(rel.high)
            if lo_v is not None and hi_v is not None:
                bound(">=", _ms(lo_v))
                bound("<=", _ms(hi_v))
    return lo, hi


def _const(e: Any) -> bool:
    from changefeed.sql.evaluator import is_const

    return bool(is_const(e))


def _key_eq(schema: TableSchema, where: Any, evaluate: Any) -> dict[int, Any]:
    """Key columns pinned by ``K = const`` (column id -> storage value)."""
    out: dict[int, Any] = {}
    keys = {c.name.upper(): c for c in schema.key}
    for rel in conjuncts(where) if where is not None else ():
        if not (isinstance(rel, ast.BinaryOp) and rel.op == "="):
            continue
        col, val = (rel.left, rel.right) if isinstance(rel.left, ast.Column) else (rel.right, rel.left)
        if not isinstance(col, ast.Column) or not _const(val) or _is_ts(col):
            continue
        c = (
            keys.get(col.name.name.upper())
            if not col.name.quoted
            else next((k for k in schema.key if k.name == col.name.name), None)
        )
        if c is None or c.id in out:
            continue
        v = evaluate(val)
        try:
            out[c.id] = c.type.to_db(c.type.coerce(v, f"column {c.name}"))
        except Exception:  # a value of another type: leave it to the row filter
            continue
    return out


def _natural_order(order_by: Sequence[ast.OrderItem], schema: TableSchema) -> bool | None:
    """True/False when ORDER BY is the index order ascending/descending (or a prefix of it:
    time, then the key columns in order); None when rows must be sorted."""
    if not order_by:
        return False
    wanted = [ROW_TIMESTAMP, *(c.name.upper() for c in schema.key)]
    desc = order_by[0].descending
    for item, name in zip(order_by, wanted, strict=False):
        e = _rewrite(item.expr)
        got = ROW_TIMESTAMP if _is_ts(e) else e.name.name.upper() if isinstance(e, ast.Column) else None
        if got != name or item.descending != desc:
            return None
    if len(order_by) > len(wanted):
        return None
    return desc


def cdc_query(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    cdc: CdcObject,
    s: ast.Select,
    ev: Params,
    hinted: frozenset[str] | None,
) -> Result:
    """A SELECT over a CDC object: one row per change in the time range, in change order."""
    session.require(txn, schema, Privilege.SELECT)
    scopes = hinted if hinted is not None else frozenset(cdc.include)
    ctx = EvalContext(txn.now_ns, session.dialect, txn.ts, phoenix=True)
    evaluator = Evaluator(session, ev, ctx)
    where = _rewrite(s.where) if s.where is not None else None

    def evaluate(e: Any) -> Any:
        return evaluator.eval(e, None)

    lo, hi = time_range(where, evaluate)
    names, types = cdc_columns(schema)
    star_names, star_types = list(names), list(types)
    group_by = tuple(_rewrite(g) for g in s.group_by)
    # Phoenix 5.3: PARTITION_ID() anywhere reads partition by partition, in index order
    # (partition id, then time, then key), each row with its partition's id.
    partitioned = any(
        _mentions_pid(x)
        for x in [
            *(_rewrite(it.expr) for it in s.items),
            *([where] if where is not None else []),
            *group_by,
            *(_rewrite(o.expr) for o in s.order_by),
        ]
    )
    if partitioned:
        names, types = [*names, PARTITION_COLUMN], [*types, resolve_phoenix_type("CHAR", (32,), False)]
    index = {n: i for i, n in enumerate(names)}
    upper = {n.upper(): i for i, n in enumerate(names)}

    def scope(row: tuple[Any, ...]) -> Scope:
        return Scope(_CdcRow(row, index, upper))

    order = _natural_order(s.order_by, schema) if not partitioned else (False if not s.order_by else None)
    limit = None
    if s.limit is not None:
        limit = evaluate(s.limit)
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise InvalidStatement(f"LIMIT must be a non-negative integer, not {sql_text(limit)}")
    items: list[tuple[str, Any, SqlType | None]] = []
    for it in s.items:
        if isinstance(it.expr, ast.Star):
            items.extend(
                (n, ast.Column(ast.Ident(n, True)), t) for n, t in zip(star_names, star_types, strict=True)
            )
        else:
            e = _rewrite(it.expr)
            label = session.ident(it.alias) if it.alias is not None else _label(it.expr, e, names)
            t = types[index[label]] if label in index else None
            items.append((label, e, t))
    rows: list[tuple[Any, ...]] = []
    key_eq = _key_eq(schema, where, evaluate)
    source: Iterator[tuple[Any, ...]]
    if partitioned:
        source = _partitioned_rows(
            txn, schema, cdc, scopes, lo, hi, key_eq, partitions_wanted(where, evaluate)
        )
    else:
        source = cdc_rows(txn.conn, schema, scopes, lo, hi, key_eq=key_eq, descending=bool(order))
    aggregate = any(has_aggregate(e) for _, e, _ in items)
    stop_early = order is not None and limit is not None and not aggregate and not s.distinct and not group_by
    # the conjuncts the read answers exactly (time bounds, partitions) are not evaluated per row
    residual = [c for c in conjuncts(where) if not _pushed(c, evaluate)] if where is not None else []
    for r in source:
        if residual:
            sc = scope(r)
            if not all(evaluator.eval(c, sc) is True for c in residual):
                continue
        rows.append(r)
        if stop_early and limit is not None and len(rows) >= limit:
            break
    if group_by:
        out = select_clauses.grouped(evaluator, [scope(r) for r in rows], group_by, [e for _, e, _ in items])
        if s.order_by:
            order_items = tuple(ast.OrderItem(_rewrite(o.expr), o.descending) for o in s.order_by)
            out = select_clauses.order_output(
                out, order_items, [e for _, e, _ in items], [n for n, _, _ in items]
            )
        if s.distinct:
            out = list(dict.fromkeys(out))
    elif aggregate:
        out = [tuple(evaluator.eval_aggregate(e, [scope(r) for r in rows]) for _, e, _ in items)]
    else:
        if order is None:
            for o in reversed(s.order_by):
                expr = _rewrite(o.expr)

                def order_key(r: tuple[Any, ...], x: Any = expr) -> tuple[int, Any]:
                    return sort_key(evaluator.eval(x, scope(r)))

                rows.sort(key=order_key, reverse=o.descending)
        picks = [_column_index(session, e, index) for _, e, _ in items]
        if all(i is not None for i in picks):  # plain columns (SELECT *): no evaluator per row
            cols = [i for i in picks if i is not None]
            out = [tuple([r[i] for i in cols]) for r in rows]
        else:
            out = [tuple(evaluator.eval(e, scope(r)) for _, e, _ in items) for r in rows]
        if s.distinct:
            out = list(dict.fromkeys(out))
    if limit is not None:
        out = out[:limit]
    return Result(
        columns=[n for n, _, _ in items],
        rows=out,
        types=[t for _, _, t in items],
        status=f"SELECT {len(out)}",
        rowcount=len(out),
    )


def _pushed(rel: Any, evaluate: Any) -> bool:
    """Whether the read answers conjunct ``rel`` exactly: a ``PHOENIX_ROW_TIMESTAMP()`` bound
    (:func:`time_range`; rows are whole milliseconds) or ``PARTITION_ID() = / IN`` constants
    (:func:`partitions_wanted`). A bound that is NULL is not pushed (it filters every row)."""
    if isinstance(rel, ast.BinaryOp) and rel.op in _FLIP:
        for a, b in ((rel.left, rel.right), (rel.right, rel.left)):
            if _is_ts(a) and _const(b):
                return evaluate(b) is not None
            if _is_pid(a) and rel.op == "=" and _const(b):
                return True
        return False
    if isinstance(rel, ast.Between) and not rel.negated and _is_ts(rel.expr):
        return (
            _const(rel.low)
            and _const(rel.high)
            and evaluate(rel.low) is not None
            and evaluate(rel.high) is not None
        )
    return (
        isinstance(rel, ast.InList)
        and not rel.negated
        and _is_pid(rel.expr)
        and all(_const(x) for x in rel.items)
    )


def _column_index(session: Session, e: Any, index: Mapping[str, int]) -> int | None:
    """The row index of a plain column reference (as the evaluator resolves it), else None."""
    if isinstance(e, ast.Column) and e.table is None:
        return index.get(session.ident(e.name))
    return None


def _partitioned_rows(
    txn: Transaction,
    schema: TableSchema,
    cdc: CdcObject,
    scopes: frozenset[str],
    lo: int | None,
    hi: int | None,
    key_eq: Mapping[int, Any],
    wanted: set[str] | None,
) -> Iterator[tuple[Any, ...]]:
    """The CDC rows of each partition in turn (ordered by partition id, as Phoenix's index key
    starts with it), each row ending with its partition id."""
    ids = phoenix.partition_ids(schema.name, cdc)
    for pid, region in sorted((pid, r) for r, pid in enumerate(ids)):
        if wanted is not None and pid not in wanted:
            continue
        for row in cdc_rows(
            txn.conn, schema, scopes, lo, hi, key_eq=key_eq, buckets=cdc.region_buckets(region)
        ):
            yield (*row, pid)


def _label(original: Any, e: Any, names: Sequence[str]) -> str:
    if _is_ts(e):
        return ROW_TIMESTAMP
    if _is_pid(e):
        return PARTITION_COLUMN
    if isinstance(e, ast.Column):
        n = e.name.name
        for x in names:
            if x == n or (not e.name.quoted and x.upper() == n.upper()):
                return x
        return n if e.name.quoted else n.upper()
    if isinstance(original, ast.Literal) and isinstance(original.value, str):
        return f"'{original.value}'"
    if isinstance(original, ast.Literal):
        return str(original.value)
    if isinstance(original, ast.FuncCall):
        return (
            f"{original.name.upper()}({'*' if any(isinstance(a, ast.Star) for a in original.args) else ''})"
        )
    return "?column?"


class _CdcRow(Mapping[str, Any]):
    """A CDC row by column name: exact, then case-insensitively (Phoenix folds unquoted names)."""

    __slots__ = ("index", "row", "upper")

    def __init__(self, row: tuple[Any, ...], index: Mapping[str, int], upper: Mapping[str, int]) -> None:
        self.row, self.index, self.upper = row, index, upper

    def __getitem__(self, k: str) -> Any:
        i = self.index.get(k)
        if i is None:
            i = self.upper.get(k.upper())
        if i is None:
            raise KeyError(k)
        return self.row[i]

    def __contains__(self, k: object) -> bool:
        return isinstance(k, str) and (k in self.index or k.upper() in self.upper)

    def __iter__(self) -> Iterator[str]:
        return iter(self.index)

    def __len__(self) -> int:
        return len(self.index)


def select_cdc(session: Session, txn: Transaction, s: ast.Select, ev: Params) -> Result | None:
    """The select family's hook: run ``s`` as a CDC query when its FROM names a CDC object."""
    if s.table is None:
        return None
    found = find_cdc(session, s.table)
    if found is None:
        return None
    if s.offset is not None or s.having is not None or s.joins:
        raise UnsupportedFeature("a CDC query takes no OFFSET, HAVING or JOIN")
    return cdc_query(session, txn, found[0], found[1], s, ev, None)


select.SELECT_HOOKS.append(select_cdc)
select.SELECT_CLAIMS.append(lambda session, s: s.table is not None and find_cdc(session, s.table) is not None)


# ===================================================================================== stream tables

#: Phoenix 5.3's ``SYSTEM.CDC_STREAM_STATUS`` and ``SYSTEM.CDC_STREAM`` columns (QueryConstants).
STREAM_STATUS_COLUMNS = (
    ("TABLE_NAME", "VARCHAR"),
    ("STREAM_NAME", "VARCHAR"),
    ("STREAM_STATUS", "VARCHAR"),
    ("STREAM_TYPE", "VARCHAR"),
)
STREAM_COLUMNS = (
    ("TABLE_NAME", "VARCHAR"),
    ("STREAM_NAME", "VARCHAR"),
    ("PARTITION_ID", "VARCHAR"),
    ("PARENT_PARTITION_ID", "VARCHAR"),
    ("PARTITION_START_TIME", "BIGINT"),
    ("PARTITION_END_TIME", "BIGINT"),
    ("PARTITION_START_KEY", "VARBINARY_ENCODED"),
    ("PARTITION_END_KEY", "VARBINARY_ENCODED"),
    ("PARENT_PARTITION_START_TIME", "BIGINT"),
)


def _visible_tables(session: Session, txn: Transaction) -> list[TableSchema]:
    from changefeed.engine.privileges import check_any_table_privilege
    from changefeed.exceptions import PermissionDenied

    privs = session.privileges(txn)
    out = []
    for t in session.db.tables():
        try:
            check_any_table_privilege(privs, t)
        except PermissionDenied:
            continue
        out.append(t)
    return out


def _relation(name: str, columns: Sequence[tuple[str, str]], rows: list[tuple[Any, ...]]) -> select.Relation:
    return select.Relation(
        name,
        [c for c, _ in columns],
        [resolve_phoenix_type(t, (), False) for _, t in columns],
        lambda _: iter(sorted(rows, key=lambda r: tuple("" if v is None else v for v in r[:4]))),
    )


def stream_status_view(session: Session, txn: Transaction) -> select.Relation:
    """``SYSTEM.CDC_STREAM_STATUS``: each table's CDC streams (DROP CDC leaves its stream
    DISABLED; DROP TABLE forgets them). ``STREAM_TYPE`` is NULL, as Phoenix writes it."""
    rows = [
        (t.name, st.name, st.status, None)
        for t in _visible_tables(session, txn)
        for st in phoenix.phoenix_of(t).streams
    ]
    return _relation("SYSTEM.CDC_STREAM_STATUS", STREAM_STATUS_COLUMNS, rows)


def stream_view(session: Session, txn: Transaction) -> select.Relation:
    """``SYSTEM.CDC_STREAM``: one row per partition (region) of each stream, all opened when the
    stream was (``PARTITION_START_TIME``: the region id Phoenix uses) and never split here, so
    no parent and no end time."""
    rows = []
    for t in _visible_tables(session, txn):
        for st in phoenix.phoenix_of(t).streams:
            for r in range(max(1, st.regions)):
                start, end = phoenix.region_keys(r, st.regions)
                pid = phoenix.partition_id(t.name, r, st.regions, st.created_ms)
                rows.append((t.name, st.name, pid, None, st.created_ms, None, start, end, None))
    return _relation("SYSTEM.CDC_STREAM", STREAM_COLUMNS, rows)


select.SYSTEM_VIEWS["system.cdc_stream_status"] = stream_status_view
select.SYSTEM_VIEWS["system.cdc_stream"] = stream_view


__all__ = [
    "CDC_JSON",
    "FAMILY",
    "PARTITION_COLUMN",
    "ROW_TIMESTAMP",
    "cdc_query",
    "find_cdc",
    "hint_scopes",
    "partitions_wanted",
    "pident",
    "select_cdc",
    "stream_status_view",
    "stream_view",
    "time_range",
]
