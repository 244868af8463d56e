"""Writes: INSERT/UPSERT/REPLACE, UPDATE, DELETE and CQL BATCH, with each dialect's semantics.

``cql`` (ScyllaDB/Cassandra): INSERT creates the row marker, UPDATE does not, a row without a live
marker vanishes with its last non-null regular cell, UPDATE is an upsert, ``DELETE c FROM`` sets
null, and row/range/partition deletes, static rows, batches and ``USING TTL``.

``sql`` (YDB YQL and CockroachDB): every row exists once written; INSERT fails on an existing key,
UPSERT writes the named columns, REPLACE the whole row, UPDATE/DELETE touch the rows their WHERE
selects.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from operator import itemgetter
from typing import Any

from changefeed.engine import replicas
from changefeed.engine.catalog import Role, TableSchema
from changefeed.engine.privileges import Privilege
from changefeed.engine.storage import OP_INSERT, OP_UPDATE, Row
from changefeed.engine.txn import Transaction
from changefeed.engine.types import is_ydb_type
from changefeed.exceptions import (
    ChangefeedError,
    ColumnCountMismatch,
    DuplicateColumn,
    GroupingError,
    InvalidStatement,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Params, Scope, check_names, has_aggregate
from changefeed.sql.functions import EvalContext
from changefeed.sql.param_columns import ParamColumns, stored_as_given
from changefeed.sql.result import Result
from changefeed.sql.session import BulkWriter, Planned, RowMark, Session, StatementFamily
from changefeed.sql.statements import counters, key_moves, subqueries
from changefeed.sql.statements.cdc_log import LogView
from changefeed.sql.statements.common import (
    LOG_SUFFIX,
    coerce,
    key_values,
    log_base_table,
    unique_violation,
)
from changefeed.sql.statements.cql_writes import (
    cql_delete,
    cql_insert,
    cql_update,
    lwt_result,
)
from changefeed.sql.statements.on_conflict import ConflictUpdate
from changefeed.sql.statements.other_tables import JoinedTargets, joined_targets
from changefeed.sql.statements.row_values import (
    check_not_null,
    default_expr,
    default_value,
    key_of,
    missing_key,
    ttl_seconds,
    with_computed,
)
from changefeed.sql.statements.select import Relation, check_qualifiers, run_in, select_over

FAMILY = StatementFamily("dml")


# ------------------------------------------------------------------ privileges
def _insert_privileges(session: Session, s: ast.Insert) -> tuple[Privilege, ...]:
    """CockroachDB: INSERT; ON CONFLICT and RETURNING also SELECT; UPSERT (and YQL REPLACE)
    INSERT, SELECT and UPDATE. CQL: INSERT, and SELECT for IF NOT EXISTS (a read)."""
    if session.dialect == "cql":
        return (Privilege.INSERT, Privilege.SELECT) if s.if_not_exists else (Privilege.INSERT,)
    if s.mode != "insert" or s.on_conflict_update is not None:
        return (Privilege.INSERT, Privilege.SELECT, Privilege.UPDATE)
    if s.on_conflict_do_nothing or s.returning:
        return (Privilege.INSERT, Privilege.SELECT)
    return (Privilege.INSERT,)


def _reading(session: Session, s: ast.Update | ast.Delete, write: Privilege) -> tuple[Privilege, ...]:
    """CockroachDB's UPDATE and DELETE read the rows they change: SELECT too. CQL writes blind,
    except with IF EXISTS."""
    if session.dialect == "cql" and not s.if_exists:
        return (write,)
    return (write, Privilege.SELECT)


def insert_plan(session: Session, txn: Transaction, s: ast.Insert) -> BulkWriter | None:
    """Compile a single-row INSERT of parameters/literals into a bulk writer, or None."""
    if len(s.rows) != 1 or s.if_not_exists or s.returning or s.on_conflict_update is not None:
        return None
    if not all(isinstance(v, ast.Param | ast.Literal) for v in s.rows[0]) or s.timestamp is not None:
        return None
    if s.ttl is not None and not isinstance(s.ttl, ast.Literal):
        return None
    schema = session.resolve_table(txn, s.table)
    session.require(txn, schema, *_insert_privileges(session, s))
    replicas.check_writable(schema)  # issue 20: whatever rows the statement would touch
    counters.check_insert(schema)
    cols = (
        [session.column(schema, i) for i in s.columns]
        if s.columns
        else [c for c in schema.columns if c.computed is None]
    )
    if len(cols) != len(s.rows[0]) or len({c.id for c in cols}) != len(cols):
        return None
    if any(c.role is Role.STATIC or c.computed is not None for c in cols):
        return None
    given = {c.id for c in cols}
    key_pos = []
    for k in schema.key:
        if k.id not in given:
            return None
        key_pos.append(next(i for i, c in enumerate(cols) if c.id == k.id))
    value_pos = [(i, c.id) for i, c in enumerate(cols) if not c.is_key]
    missing = [c for c in schema.stored_values if c.id not in given]
    if any(
        c.default is not None or c.not_null or c.computed is not None
        for c in missing + [c for c in schema.columns if c.virtual]
    ):
        return None
    if any(c.not_null for c in cols if not c.is_key):
        return None
    if (
        session.dialect == "cql"
        and any(c.role is Role.STATIC for c in schema.columns)
        and not schema.clustering_key
    ):
        return None
    fill = [c.id for c in missing] if (session.dialect == "sql" and s.mode == "replace") else []
    storers = [c.type.storer(f"column {c.name}") for c in cols]
    types = [c.type for c in cols]
    consts = [v.value if isinstance(v, ast.Literal) else None for v in s.rows[0]]
    params_at = [v.index if isinstance(v, ast.Param) else -1 for v in s.rows[0]]
    last_param = max(params_at)
    ttl = ttl_seconds(session, s.ttl, Evaluator(session, Params(()), EvalContext(0, session.dialect)))
    mode, dialect, version = s.mode, session.dialect, schema.version

    def check_rows(rows: Sequence[Sequence[Any]]) -> None:
        with RowMark() as at:
            for at.r, params in enumerate(rows):
                vals = [
                    store(params[pi] if pi >= 0 else const)
                    for store, pi, const in zip(storers, params_at, consts, strict=True)
                ]
                for i, c in zip(key_pos, schema.key, strict=True):
                    if vals[i] is None:
                        raise missing_key(session, schema, c.name)

    def run(t: Transaction, rows: Sequence[Sequence[Any]]) -> int:
        current = t.db.table_by_id(schema.id)
        if current.version != version:
            raise InvalidStatement(f"table {schema.name} changed while the statement was prepared; retry")
        n = len(rows)
        if n == 0:
            return 0
        given = rows if isinstance(rows, ParamColumns) and len(rows.columns) > last_param else None
        if given is None:
            with RowMark() as at:
                for at.r, params in enumerate(rows):
                    if len(params) <= last_param:
                        Params(params).get(last_param)  # raises: a parameter has no value
        try:
            # Column-wise: each value column is checked and converted in one pass over the rows;
            # a column of parameters whose facts show that every value is stored as it is, as is.
            vals: list[list[Any]] = []
            for store, ty, pi, const in zip(storers, types, params_at, consts, strict=True):
                if pi < 0:
                    vals.append([store(const)] * n)
                elif given is None:
                    vals.append(list(map(store, map(itemgetter(pi), rows))))
                elif stored_as_given(ty, given.facts[pi]):
                    vals.append(given.columns[pi])
                else:
                    vals.append(list(map(store, given.columns[pi])))
            for i, c in zip(key_pos, schema.key, strict=True):
                if None in vals[i]:
                    raise missing_key(session, schema, c.name)
        except ChangefeedError:
            check_rows(rows)  # raises the error of the first bad row, as row by row would
            raise
        keys = list(zip(*(vals[i] for i in key_pos), strict=True))
        cells = {cid: vals[i] for i, cid in value_pos}
        for cid in fill:
            cells[cid] = [None] * n
        if len(set(keys)) != n:
            written = 0
            with RowMark() as at:
                for at.r, params in enumerate(rows):  # the same key twice: statement order, row by row
                    written += insert(session, t, s, Params(params)).rowcount
            return written
        olds = None
        if dialect == "sql" and mode == "insert":
            olds = t.store(current).get_rows(t.conn, keys, t.now_ns)
            if olds:
                if not s.on_conflict_do_nothing:
                    # The first row in statement order whose key is there, as row by row.
                    r = next(r for r, k in enumerate(keys) if k in olds)
                    with RowMark(r):
                        raise unique_violation(current, keys[r])
                keep = [r for r, k in enumerate(keys) if k not in olds]
                keys = [keys[r] for r in keep]
                cells = {cid: [col[r] for r in keep] for cid, col in cells.items()}
        t.write_rows(
            current,
            keys,
            cells,
            marker=True,
            op=OP_INSERT,
            ttl=ttl,
            # INSERT read the keys already: every key left has no row (no second read).
            olds={} if olds is not None else None,
        )
        return len(keys)

    return run


#: An INSERT's command tag by its mode.
_TAGS = {"insert": "INSERT", "upsert": "UPSERT", "replace": "REPLACE"}


def insert_one_plan(session: Session, txn: Transaction, s: ast.Insert) -> Planned | None:
    """A single-row INSERT/UPSERT/REPLACE of parameters and literals compiled to run again and
    again (the bulk writer of :func:`insert_plan`, one row at a time), or None."""
    write = insert_plan(session, txn, s)
    if write is None:
        return None
    tag = _TAGS[s.mode]

    def run(t: Transaction, params: Sequence[Any]) -> Result:
        try:
            n = write(t, (params,))
        except ChangefeedError as exc:
            exc.row = None  # a statement's own error, not one of a row of a bulk statement
            raise
        return Result(status=f"{tag} {n}", rowcount=n)

    return run


@FAMILY.statement(ast.Insert, plan_many=insert_plan, plan_one=insert_one_plan)
def insert(session: Session, txn: Transaction, s: ast.Insert, ev: Params) -> Result:
    if subqueries.has_subquery((s.rows, s.returning, s.on_conflict_update)):
        # Run before the write: RETURNING's subqueries see the table as the statement began, as
        # in PostgreSQL (every subquery of a statement reads its snapshot, not its own writes).
        run = run_in(session, txn, ev)
        s = replace(
            s,
            rows=subqueries.fold(s.rows, run),
            returning=subqueries.fold(s.returning, run),
            on_conflict_update=subqueries.fold(s.on_conflict_update, run),
        )
    bulk = _insert_rows_in_bulk(session, txn, s, ev)
    if bulk is not None:
        return bulk
    schema = session.resolve_table(txn, s.table)
    session.require(txn, schema, *_insert_privileges(session, s))
    replicas.check_writable(schema)  # issue 20: whatever rows the statement would touch
    counters.check_insert(schema)
    if s.columns:
        cols = [session.column(schema, i) for i in s.columns]
    else:
        cols = [c for c in schema.columns if c.computed is None]
    seen: set[int] = set()
    for c in cols:
        if c.id in seen:
            raise DuplicateColumn(f'column "{c.name}" specified more than once')
        seen.add(c.id)
    if len({len(values) for values in s.rows}) > 1:
        raise ColumnCountMismatch("VALUES lists must all be the same length")
    if s.rows and not s.columns and len(s.rows[0]) < len(cols):
        cols = cols[: len(s.rows[0])]  # no column list: the first columns, the rest their defaults
    for c in cols:
        if c.computed is not None:
            raise InvalidStatement(f"cannot write to computed column {c.name}")
    ctx = EvalContext(txn.now_ns, session.dialect, txn.ts)
    evaluator = Evaluator(session, ev, ctx)
    ttl = ttl_seconds(session, s.ttl, evaluator)
    conflict = None
    if s.on_conflict_update is not None and session.dialect == "sql":
        conflict = ConflictUpdate(session, schema, s.on_conflict_update)
    lwt: tuple[bool, Row | None] = (True, None)  # the last row's IF NOT EXISTS outcome
    written: list[dict[int, Any]] = []
    for values in s.rows:
        if len(values) != len(cols):
            more = (
                "expressions than target columns"
                if len(values) > len(cols)
                else "target columns than expressions"
            )
            raise ColumnCountMismatch(
                f"INSERT has more {more}, {len(values)} expressions for {len(cols)} targets"
            )
        given = {
            c.id: (
                default_value(session, c, ev, ctx)  # DEFAULT: written (an UPSERT too), as in CockroachDB
                if type(v) is ast.DefaultValue
                else coerce(c, evaluator.eval(v, None))
            )
            for c, v in zip(cols, values, strict=True)
        }
        if session.dialect == "cql":
            existing = cql_insert(session, txn, schema, given, ttl, s.if_not_exists)
            if s.if_not_exists:
                lwt = (existing is None, existing)
        else:
            row = _sql_insert(session, txn, schema, given, s, ev, ctx, conflict)
            if row is not None:
                written.append(row)
    if s.if_not_exists and session.dialect == "cql":
        return lwt_result(session, schema, lwt)
    n = len(written) if session.dialect == "sql" else len(s.rows)
    return _returning(session, txn, schema, s.returning, written, ev, f"{_TAGS[s.mode]} {n}", n)


def returning_shape(
    session: Session, txn: Transaction, s: ast.Insert | ast.Update | ast.Delete | ast.UpsertSelect
) -> Result:
    """The columns and types a write's ``RETURNING`` list gives, without writing (a client that
    prepares the statement learns them before running it); no columns without ``RETURNING``."""
    if not s.returning:
        return Result()
    schema = session.resolve_table(txn, s.table)
    if isinstance(s, ast.Update | ast.Delete) and s.source is not None:  # the other tables' columns too
        ev = Params(())
        evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
        other = joined_targets(session, txn, schema, s, ev, evaluator, shape_only=True)
        return _returning_joined(session, txn, schema, s.returning, other, [], ev, "")
    return _returning(session, txn, schema, s.returning, [], Params(()), "", 0)


def _returning_joined(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    items: tuple[ast.SelectItem, ...],
    other: JoinedTargets,
    written: list[tuple[tuple[Any, ...], dict[int, Any]]],
    ev: Params,
    status: str,
) -> Result:
    """RETURNING of an ``UPDATE .. FROM`` or ``DELETE .. USING``: over each written row (its
    key before, its row after an UPDATE, before a DELETE) and the other tables' row it joined,
    as PostgreSQL returns them."""
    for it in items:
        if has_aggregate(it.expr):
            raise GroupingError("aggregate functions are not allowed in RETURNING")
    rel = other.returning([(key, session.py_row(schema, row)) for key, row in written])
    out = select_over(session, txn, ast.Select(items=items, table=None), ev, rel)
    n = len(written)
    return Result(columns=out.columns, rows=out.rows, types=out.types, status=status, rowcount=n)


def _returning(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    items: tuple[ast.SelectItem, ...],
    rows: list[dict[int, Any]],
    ev: Params,
    status: str,
    count: int,
) -> Result:
    """A write's result: its command tag, and with ``RETURNING`` the rows it wrote (the row as
    written: after an INSERT, UPSERT or UPDATE; before a DELETE) projected by the list, which
    takes what a select list takes over the table's columns (``*``, expressions, aliases, not
    aggregates)."""
    if not items:
        return Result(status=status, rowcount=count)
    for it in items:
        if has_aggregate(it.expr):
            raise GroupingError("aggregate functions are not allowed in RETURNING")
    names = [c.name for c in schema.columns]
    values = [tuple(py.get(n) for n in names) for py in (session.py_row(schema, r) for r in rows)]
    rel = Relation(schema.name, names, [c.type for c in schema.columns], lambda _: values)
    out = select_over(session, txn, ast.Select(items=items, table=None), ev, rel)
    return Result(columns=out.columns, rows=out.rows, types=out.types, status=status, rowcount=count)


def _insert_rows_in_bulk(session: Session, txn: Transaction, s: ast.Insert, ev: Params) -> Result | None:
    """A multi-row ``INSERT``/``UPSERT`` whose values are all bind parameters (``VALUES ($1, $2),
    ($3, $4), ..``, as pgjdbc's ``reWriteBatchedInserts`` sends a batch) written as the bulk write
    of ``executemany``: its rows as the parameter rows of the one-row statement it repeats
    (:func:`insert_plan`, which says None for whatever it does not take: then row by row)."""
    if session.dialect != "sql" or len(s.rows) < 2 or not s.rows[0]:
        return None
    width = len(s.rows[0])
    if any(len(row) != width for row in s.rows):
        return None  # row by row names the row of the wrong width
    values = [v for row in s.rows for v in row]
    if not all(type(v) is ast.Param for v in values):
        return None
    one = replace(s, rows=(tuple(ast.Param(i) for i in range(width)),))
    plan = insert_plan(session, txn, one)
    if plan is None:
        return None
    at = [v.index for v in values if isinstance(v, ast.Param)]  # each value's parameter number
    given = ev.values
    if max(at) >= len(given):
        ev.get(max(at))  # raises: a parameter has no value
    flat = itemgetter(*at)(given)
    rows = [flat[r : r + width] for r in range(0, len(flat), width)]
    try:
        n = plan(txn, rows)
    except ChangefeedError as exc:
        exc.row = None  # a row of this statement, not of an executemany around it
        raise
    return Result(status=f"{_TAGS[s.mode]} {n}", rowcount=n)


def _sql_insert(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    given: dict[int, Any],
    s: ast.Insert,
    ev: Params,
    ctx: EvalContext,
    conflict: ConflictUpdate | None = None,
) -> dict[int, Any] | None:
    """Write one row of an INSERT/UPSERT/REPLACE; the row as written (with ``RETURNING``; its
    written cells otherwise), None if nothing was (``ON CONFLICT DO NOTHING`` on a key that is
    there, or ``DO UPDATE .. WHERE`` not true)."""
    st = txn.store(schema)
    # Key columns not given take their DEFAULT (e.g. unique_rowid()).
    for c in schema.key:
        if c.id not in given:
            given[c.id] = default_value(session, c, ev, ctx)
    key = key_of(session, schema, given)
    old = st.get_row(txn.conn, key, txn.now_ns)
    conflicts = s.mode == "insert" and old is not None
    if conflicts and conflict is None:
        if s.on_conflict_do_nothing:
            return None
        raise unique_violation(schema, [given[c.id] for c in schema.key])
    # The cells the statement writes: what it names; REPLACE also every other column (its
    # DEFAULT or NULL); a new row also the columns that have a DEFAULT. Columns left out of a
    # new row are NULL without being "written", so UPDATES-mode feeds list only real writes.
    cells: dict[int, Any] = {}
    for c in schema.stored_values:
        if c.id in given:
            cells[c.id] = given[c.id]
        elif c.computed is None and (
            s.mode == "replace" or (c.default is not None and (old is None or s.mode == "insert"))
        ):
            cells[c.id] = default_value(session, c, ev, ctx)
    key_cells = dict(zip((c.id for c in schema.key), key, strict=True))
    if conflicts and conflict is not None and old is not None:
        # ON CONFLICT DO UPDATE: the proposed row is ``excluded``; the existing one is updated
        proposed = {**key_cells, **with_computed(session, schema, key, cells, None, ev, ctx)}
        update = conflict.update(key, old, proposed, session.ident(s.table.last), ev, ctx)
        if update is None:
            return None
        txn.write_row(schema, key, update, marker=True, op=OP_UPDATE, old=old)
        return {**old, **key_cells, **update} if s.returning else update
    cells = with_computed(session, schema, key, cells, old, ev, ctx)
    check_not_null(session, schema, {**(old or {}), **cells} if s.mode == "upsert" else cells)
    txn.write_row(schema, key, cells, marker=True, op=OP_INSERT, old=old)
    if conflict is not None:
        conflict.inserted(key)
    if not s.returning:
        return cells  # written; the whole row is wanted only by RETURNING
    kept = old if (old is not None and s.mode == "upsert") else {}
    return {**kept, **key_cells, **cells}


@FAMILY.statement(ast.Update)
def update(session: Session, txn: Transaction, s: ast.Update, ev: Params) -> Result:
    ctx = EvalContext(txn.now_ns, session.dialect, txn.ts)
    evaluator = Evaluator(session, ev, ctx)
    if subqueries.has_subquery((s.where, s.assignments, s.returning)):
        run = run_in(session, txn, ev)  # before the write (see insert)
        s = replace(
            s,
            where=subqueries.fold(s.where, run),
            assignments=subqueries.fold(s.assignments, run),
            returning=subqueries.fold(s.returning, run),
        )
        evaluator.correlated = subqueries.evaluator_hook(evaluator, run)
    schema = session.resolve_table(txn, s.table)
    session.require(txn, schema, *_reading(session, s, Privilege.UPDATE))
    replicas.check_writable(schema)  # issue 20: whatever rows the statement would touch
    if any(type(e) is ast.DefaultValue for _, e in s.assignments):  # SET c = DEFAULT
        s = replace(
            s,
            assignments=tuple(
                (i, default_expr(session.column(schema, i)) if type(e) is ast.DefaultValue else e)
                for i, e in s.assignments
            ),
        )
    assigns = [(session.column(schema, i), e) for i, e in s.assignments]
    for c, _ in assigns:
        if c.is_key and session.dialect == "cql":
            raise InvalidStatement(f"PRIMARY KEY part {c.name} found in SET part")
        if c.is_key and any(is_ydb_type(x.type) for x in schema.columns):  # a YDB table, as YDB says
            raise InvalidStatement(f"Cannot update primary key column: {c.name}")
        if c.computed is not None:
            raise InvalidStatement(f"cannot write to computed column {c.name}")
    if session.dialect == "cql":
        return cql_update(session, txn, schema, assigns, s, evaluator)
    # Every row is computed from the statement's snapshot first, then written in bulk: a
    # failing row (a NOT NULL, a bad value, a key taken) stops the statement before anything
    # is written.
    groups: dict[tuple[int, ...], tuple[list[tuple[Any, ...]], list[dict[int, Any]]]] = {}
    olds: dict[tuple[Any, ...], dict[int, Any]] = {}
    news: list[dict[int, Any]] = []
    moves: list[key_moves.Move] = []
    key_ids = {c.id for c in schema.key} if any(c.is_key for c, _ in assigns) else set()
    other = joined_targets(session, txn, schema, s, ev, evaluator) if s.source is not None else None
    if other is None and session.dialect == "sql":
        _check_names(session, schema, s.table, s.alias, [s.where, *(e for _, e in s.assignments)])
    targets = (
        [(key, row, other.scope(joined)) for key, row, joined in other.targets]
        if other is not None
        else [
            (key, row, _scope(session, schema, row, s.alias))
            for key, row in _matching_rows(session, txn, schema, s.where, evaluator, s.alias)
        ]
    )
    written: list[tuple[tuple[Any, ...], dict[int, Any]]] = []  # (key before, row after): RETURNING
    for key, row, scope in targets:
        cells = {c.id: coerce(c, evaluator.eval(e, scope)) for c, e in assigns}
        new_key = key
        if key_ids:  # ``SET id = ..``: the row moves if its key changes
            new_key = tuple(cells.pop(c.id, k) for c, k in zip(schema.key, key, strict=True))
            for c, v in zip(schema.key, new_key, strict=True):
                if v is None:
                    raise missing_key(session, schema, c.name)
        cells = with_computed(session, schema, new_key, cells, row, ev, ctx)
        check_not_null(session, schema, {**row, **cells})
        olds[key] = row
        if s.returning:
            news.append({**row, **cells, **dict(zip((c.id for c in schema.key), new_key, strict=True))})
            written.append((key, news[-1]))
        if new_key != key:
            moves.append(key_moves.Move(key, row, new_key, cells))
            continue
        keys, values = groups.setdefault(tuple(cells), ([], []))
        keys.append(key)
        values.append(cells)
    if moves:
        key_moves.check(txn, schema, moves, {k for keys, _ in groups.values() for k in keys})
    for ids, (keys, values) in groups.items():
        columns = {i: [v[i] for v in values] for i in ids}
        txn.write_rows(schema, keys, columns, marker=True, op=OP_UPDATE, olds=olds)
    if moves:
        key_moves.apply(txn, schema, moves)
    n = len(olds)
    if other is not None and s.returning:
        return _returning_joined(session, txn, schema, s.returning, other, written, ev, f"UPDATE {n}")
    return _returning(session, txn, schema, s.returning, news, ev, f"UPDATE {n}", n)


@FAMILY.statement(ast.Delete)
def delete(session: Session, txn: Transaction, s: ast.Delete, ev: Params) -> Result:
    name = session.table_name(s.table)
    if name.endswith(LOG_SUFFIX) and session.db.find_table(name) is None:
        return _delete_from_log(session, txn, s, ev)
    schema = session.resolve_table(txn, s.table)
    session.require(txn, schema, *_reading(session, s, Privilege.DELETE))
    replicas.check_writable(schema)  # issue 20: whatever rows the statement would touch
    ctx = EvalContext(txn.now_ns, session.dialect, txn.ts)
    evaluator = Evaluator(session, ev, ctx)
    if session.dialect == "cql":
        return cql_delete(session, txn, schema, s, evaluator)
    if s.columns:
        raise InvalidStatement("DELETE of individual columns is CQL; use UPDATE .. SET c = NULL")
    if subqueries.has_subquery((s.where, s.returning)):
        run = run_in(session, txn, ev)  # before the write (see insert)
        s = replace(s, where=subqueries.fold(s.where, run), returning=subqueries.fold(s.returning, run))
        evaluator.correlated = subqueries.evaluator_hook(evaluator, run)
    other = None
    if s.source is None:
        _check_names(session, schema, s.table, s.alias, [s.where])
    if s.source is not None:
        other = joined_targets(session, txn, schema, s, ev, evaluator)
        olds = {key: row for key, row, _ in other.targets}
    else:
        olds = dict(_matching_rows(session, txn, schema, s.where, evaluator, s.alias))
    txn.delete_rows(schema, list(olds), olds=olds)
    n = len(olds)
    if other is not None and s.returning:
        return _returning_joined(
            session, txn, schema, s.returning, other, list(olds.items()), ev, f"DELETE {n}"
        )
    return _returning(session, txn, schema, s.returning, list(olds.values()), ev, f"DELETE {n}", n)


def _check_names(
    session: Session, schema: TableSchema, table: ast.QName, alias: ast.Ident | None, exprs: list[Any]
) -> None:
    """The WHERE's and SET's columns are the table's, checked before any row is read (42703 on
    an empty table too), and ``x.col`` names the table (42P01), as PostgreSQL binds them."""
    check_qualifiers(session, [(table, alias)], exprs)
    names = [c.name for c in schema.columns]
    index = {n: i for i, n in enumerate(names)}
    check_names(session, exprs, index, {n.lower(): i for n, i in index.items()})


def _scope(session: Session, schema: TableSchema, row: dict[int, Any], alias: ast.Ident | None) -> Scope:
    """A target row's columns by name, and by ``alias.name`` when the statement names one
    (``UPDATE t AS x .. WHERE x.id = 1``)."""
    named = session.py_row(schema, row)
    if alias is not None:
        a = session.ident(alias)
        named.update({f"{a}.{k}": v for k, v in list(named.items())})
    return Scope(named)


def _matching_rows(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    where: ast.Expr | None,
    evaluator: Evaluator,
    alias: ast.Ident | None = None,
) -> Iterator[tuple[tuple[Any, ...], dict[int, Any]]]:
    st = txn.store(schema)
    point = _point_keys(session, schema, where, evaluator)
    rows: Iterable[dict[int, Any]]
    if point is not None:
        rows = (r for r in (st.get_row(txn.conn, k, txn.now_ns) for k in point) if r is not None)
    else:
        rows = st.scan_rows(txn.conn, txn.now_ns)
    for row in rows:
        if where is not None and evaluator.eval(where, _scope(session, schema, row, alias)) is not True:
            continue
        yield tuple(row[c.id] for c in schema.key), row


def _point_keys(
    session: Session, schema: TableSchema, where: ast.Expr | None, evaluator: Evaluator
) -> list[tuple[Any, ...]] | None:
    """The full primary keys the WHERE pins down, or None when it does not pin every key column."""
    return key_values(session, schema.key, where, evaluator)


@FAMILY.statement(ast.Batch)
def batch(session: Session, txn: Transaction, s: ast.Batch, ev: Params) -> Result:
    for stmt in s.statements:
        session.statements.handler(stmt).run(session, txn, stmt, ev)
    return Result(status="BATCH")


def _delete_from_log(session: Session, txn: Transaction, s: ast.Delete, ev: Params) -> Result:
    """``DELETE FROM ks.t_scylla_cdc_log WHERE "cdc$stream_id" = ..``: ScyllaDB lets a user delete
    log rows (whole streams, or rows of one by ``cdc$time`` / ``cdc$batch_seq_no``); it takes the
    base table's DELETE privilege. The base table and the change stream are not touched."""
    base = log_base_table(session, txn, s.table, Privilege.DELETE)
    if s.columns:
        raise InvalidStatement("a CDC log's rows are deleted whole: DELETE FROM .. WHERE, without columns")
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))
    n = LogView(txn, base).delete(session, s.where, evaluator)
    return Result(status=f"DELETE {n}", rowcount=n)
