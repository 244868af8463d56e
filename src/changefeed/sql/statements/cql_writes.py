"""CQL's writes (ScyllaDB semantics): an ``INSERT`` writes the row marker and the named cells
(``IF NOT EXISTS`` answers with the row already there), an ``UPDATE`` writes cells without a
marker (counters add), a ``DELETE`` removes rows, ranges of a partition, or cells; each ``WHERE``
names partitions and a clustering prefix or range (:func:`cql_where`), never a scan."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from changefeed.engine.catalog import ColumnSchema, Role, TableSchema
from changefeed.engine.storage import OP_INSERT, OP_UPDATE, Row
from changefeed.engine.txn import Bound, Transaction
from changefeed.exceptions import InvalidStatement
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, conjuncts
from changefeed.sql.result import Result
from changefeed.sql.session import Session
from changefeed.sql.statements import counters
from changefeed.sql.statements.common import bool_type, coerce
from changefeed.sql.statements.row_values import key_of, ttl_seconds

__all__ = ["CqlTarget", "cql_delete", "cql_insert", "cql_update", "cql_where", "lwt_result"]


@dataclass
class CqlTarget:
    """What a CQL WHERE selects: partitions, a clustering prefix, and an optional range."""

    partitions: list[tuple[Any, ...]]
    prefix_cols: list[ColumnSchema]
    prefixes: list[tuple[Any, ...]]
    range: ColumnSchema | None
    lower: Bound | None
    upper: Bound | None


def lwt_result(session: Session, schema: TableSchema, outcome: tuple[bool, Row | None]) -> Result:
    """``INSERT .. IF NOT EXISTS``'s answer as ScyllaDB gives it: ``[applied]``, and when it
    was not applied, the row that was there (its columns after ``[applied]``)."""
    applied, existing = outcome
    if applied or existing is None:
        return Result(columns=["[applied]"], rows=[(True,)], types=[bool_type()])
    cols = [c for c in schema.columns if not c.virtual]
    values = session.py_row(schema, existing)
    return Result(
        columns=["[applied]", *(c.name for c in cols)],
        rows=[(False, *(values.get(c.name) for c in cols))],
        types=[bool_type(), *(c.type for c in cols)],
    )


def cql_insert(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    given: dict[int, Any],
    ttl: int | None,
    if_not_exists: bool,
) -> Row | None:
    """Write a CQL INSERT; with ``if_not_exists``, the row (or static row) already there
    instead, unwritten; None once written."""
    pk = tuple(given.get(c.id) for c in schema.partition_key)
    if any(v is None for v in pk):
        missing = [c.name for c in schema.partition_key if given.get(c.id) is None]
        raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing[0]}")
    statics = {i: v for i, v in given.items() if schema.column_by_id(i).role is Role.STATIC}
    regular = {i: v for i, v in given.items() if schema.column_by_id(i).role is Role.REGULAR}
    ck_given = [c for c in schema.clustering_key if given.get(c.id) is not None]
    st = txn.store(schema)
    if not ck_given and schema.clustering_key:
        if regular or not statics:
            raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {schema.clustering_key[0].name}")
        if if_not_exists and (there := st.get_static(txn.conn, pk, txn.now_ns)) is not None:
            return there
        txn.write_static(schema, pk, statics, ttl=ttl)
        return None
    if len(ck_given) != len(schema.clustering_key):
        missing = [c.name for c in schema.clustering_key if given.get(c.id) is None]
        raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing[0]}")
    key = key_of(session, schema, given)
    if if_not_exists and (there := st.get_row(txn.conn, key, txn.now_ns)) is not None:
        return there
    if statics:
        txn.write_static(schema, pk, statics, ttl=ttl)
    txn.write_row(schema, key, regular, marker=True, op=OP_INSERT, ttl=ttl)
    return None


def cql_update(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    assigns: list[tuple[ColumnSchema, ast.Expr]],
    s: ast.Update,
    evaluator: Evaluator,
) -> Result:
    target = cql_where(session, schema, s.where, evaluator)
    ttl = ttl_seconds(session, s.ttl, evaluator)
    statics: dict[int, Any] = {}
    regular: dict[int, Any] = {}
    steps: dict[int, tuple[ColumnSchema, int]] = {}  # counters: ``c = c + n``
    for c, e in assigns:
        n = counters.step(c, e, evaluator)
        if n is not None:
            steps[c.id] = (c, n)
            continue
        v = coerce(c, evaluator.eval(e, None))
        (statics if c.role is Role.STATIC else regular)[c.id] = v
    st = txn.store(schema)
    if (regular or steps) and (
        target.range is not None or len(target.prefix_cols) < len(schema.clustering_key)
    ):
        missing = schema.clustering_key[len(target.prefix_cols)] if target.range is None else target.range
        raise InvalidStatement(f"Missing mandatory PRIMARY KEY part {missing.name}")
    applied = True
    for pk in target.partitions:
        if statics:
            if s.if_exists and st.get_static(txn.conn, pk, txn.now_ns) is None and not regular:
                applied = False
                continue
            txn.write_static(schema, pk, statics, ttl=ttl)
        if regular or steps:
            for prefix in target.prefixes:
                key = pk + prefix
                if s.if_exists and st.get_row(txn.conn, key, txn.now_ns) is None:
                    applied = False
                    continue
                cells = regular
                if steps:  # read, add, write: in the statement's transaction
                    now = st.get_row(txn.conn, key, txn.now_ns) or {}
                    cells = {
                        **regular,
                        **{i: coerce(c, (now.get(i) or 0) + n) for i, (c, n) in steps.items()},
                    }
                txn.write_row(schema, key, cells, marker=False, op=OP_UPDATE, ttl=ttl)
    if s.if_exists:
        return Result(columns=["[applied]"], rows=[(applied,)], types=[bool_type()])
    return Result(status="UPDATE")


def cql_delete(
    session: Session, txn: Transaction, schema: TableSchema, s: ast.Delete, evaluator: Evaluator
) -> Result:
    target = cql_where(session, schema, s.where, evaluator)
    st = txn.store(schema)
    if s.columns:
        cols = [session.column(schema, i) for i in s.columns]
        for c in cols:
            if c.is_key:
                raise InvalidStatement(
                    f"invalid identifier {c.name} for deletion (should not be a PRIMARY KEY part)"
                )
        statics = {c.id: None for c in cols if c.role is Role.STATIC}
        regular = {c.id: None for c in cols if c.role is Role.REGULAR}
        if regular and (target.range is not None or len(target.prefix_cols) < len(schema.clustering_key)):
            raise InvalidStatement("column deletions need the full primary key")
        for pk in target.partitions:
            if statics:
                txn.write_static(schema, pk, statics)
            for prefix in target.prefixes if regular else ():
                txn.write_row(schema, pk + prefix, regular, marker=False, op=OP_UPDATE)
        return Result(status="DELETE")
    full = target.range is None and len(target.prefix_cols) == len(schema.clustering_key)
    for pk in target.partitions:
        if not schema.clustering_key:
            txn.delete_row(schema, pk)
        elif full:
            for prefix in target.prefixes:
                if s.if_exists and st.get_row(txn.conn, pk + prefix, txn.now_ns) is None:
                    return Result(columns=["[applied]"], rows=[(False,)], types=[bool_type()])
                txn.delete_row(schema, pk + prefix)
        elif not target.prefix_cols and target.range is None:
            txn.delete_partition(schema, pk)
        else:
            for prefix in target.prefixes:
                txn.delete_range(schema, pk, prefix, target.lower, target.upper)
    if s.if_exists:
        return Result(columns=["[applied]"], rows=[(True,)], types=[bool_type()])
    return Result(status="DELETE")


def cql_where(
    session: Session, schema: TableSchema, where: ast.Expr | None, evaluator: Evaluator
) -> CqlTarget:
    """Split a CQL WHERE into partitions, a clustering prefix and an optional range."""
    if where is None:
        raise InvalidStatement("a WHERE clause restricting the partition key is required")
    eq: dict[int, list[Any]] = {}
    lower: tuple[ColumnSchema, Bound] | None = None
    upper: tuple[ColumnSchema, Bound] | None = None
    for rel in conjuncts(where):
        if isinstance(rel, ast.InList) and isinstance(rel.expr, ast.Column) and not rel.negated:
            c = session.column(schema, rel.expr.name)
            vals = [coerce(c, evaluator.eval(x, None)) for x in rel.items]
            _restrict(eq, c, vals)
            continue
        if not isinstance(rel, ast.BinaryOp) or rel.op not in ("=", "<", "<=", ">", ">="):
            raise InvalidStatement("only =, IN, <, <=, >, >= relations joined by AND are supported here")
        left, right, op = rel.left, rel.right, rel.op
        if not isinstance(left, ast.Column) and isinstance(right, ast.Column):
            left, right = right, left
            op = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}[op]  # type: ignore[assignment]
        if not isinstance(left, ast.Column):
            raise InvalidStatement("a WHERE relation must compare a column with a value")
        c = session.column(schema, left.name)
        v = coerce(c, evaluator.eval(right, None))
        if v is None:
            raise InvalidStatement(f"invalid null value in condition for column {c.name}")
        if op == "=":
            _restrict(eq, c, [v])
        else:
            if c.role is not Role.CLUSTERING:
                raise InvalidStatement(
                    f"only clustering key columns can be restricted by a range, not {c.name}"
                )
            b = Bound(v, op in ("<=", ">="))
            if op in (">", ">="):
                if lower is not None:
                    raise InvalidStatement(f"more than one lower bound on {c.name}")
                lower = (c, b)
            else:
                if upper is not None:
                    raise InvalidStatement(f"more than one upper bound on {c.name}")
                upper = (c, b)
    for c in schema.columns:
        if c.id in eq and not c.is_key:
            raise InvalidStatement(f"non-primary-key column {c.name} cannot be restricted here")
    for c in schema.partition_key:
        if c.id not in eq:
            raise InvalidStatement(f"partition key column {c.name} must be restricted by = or IN")
    prefix_cols: list[ColumnSchema] = []
    for c in schema.clustering_key:
        if c.id in eq:
            prefix_cols.append(c)
        else:
            break
    if any(c.id in eq for c in schema.clustering_key[len(prefix_cols) :]):
        gap = schema.clustering_key[len(prefix_cols)]
        raise InvalidStatement(
            f"PRIMARY KEY column {gap.name} cannot be skipped: it must be restricted because a later column is"
        )
    range_col = None
    for side in (lower, upper):
        if side is not None:
            if (
                len(prefix_cols) >= len(schema.clustering_key)
                or side[0].id != schema.clustering_key[len(prefix_cols)].id
            ):
                raise InvalidStatement(
                    f"clustering column {side[0].name} can only be ranged after equality on every clustering column before it"
                )
            range_col = side[0]
    # IN lists name each partition and prefix once, however often a value repeats.
    partitions = list(dict.fromkeys(itertools.product(*(eq[c.id] for c in schema.partition_key))))
    prefixes = list(dict.fromkeys(itertools.product(*(eq[c.id] for c in prefix_cols))))
    return CqlTarget(
        partitions=partitions,
        prefix_cols=prefix_cols,
        prefixes=prefixes,
        range=range_col,
        lower=lower[1] if lower else None,
        upper=upper[1] if upper else None,
    )


def _restrict(eq: dict[int, list[Any]], c: ColumnSchema, vals: list[Any]) -> None:
    if c.id in eq:
        raise InvalidStatement(f"column {c.name} is restricted more than once")
    eq[c.id] = vals
