"""Reads: relations (tables and ScyllaDB CDC logs), SELECT, and SHOW."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from changefeed.engine.catalog import Role, TableSchema
from changefeed.engine.privileges import Privilege, check_any_table_privilege
from changefeed.engine.storage import TableStore, token
from changefeed.engine.txn import Transaction
from changefeed.engine.types import SqlType
from changefeed.exceptions import (
    UndefinedTable,
    UnsupportedFeature,
)
from changefeed.sql import ast
from changefeed.sql.evaluator import (
    Evaluator,
    Params,
    RowMap,
    Scope,
    check_names,
    has_aggregate,
    order_key,
    subexpressions,
)
from changefeed.sql.functions import EvalContext
from changefeed.sql.result import Result
from changefeed.sql.session import Session, StatementFamily
from changefeed.sql.statements import (
    grouping_sets,
    joins,
    lateral,
    select_clauses,
    subqueries,
    table_functions,
    windows,
)
from changefeed.sql.statements.cdc_log import LogColumns, LogView
from changefeed.sql.statements.common import LOG_SUFFIX, key_values, log_base_table
from changefeed.sql.statements.select_types import expr_type

FAMILY = StatementFamily("select")


@dataclass
class Relation:
    """Something a SELECT reads: named, typed columns and rows of Python values."""

    name: str
    columns: list[str]
    types: list[SqlType | None]
    rows: Callable[[list[tuple[Any, ...]] | None], Iterable[tuple[Any, ...]]]
    #: Partition-key column names, for pushing ``pk = x`` / ``pk IN (...)`` down to storage.
    pk_columns: list[str] = field(default_factory=list)
    star: list[str] | None = None  # column order of ``SELECT *`` when it differs from ``columns``
    #: Rows for a WHERE, when the relation pushes restrictions down itself (ScyllaDB CDC logs),
    #: and the part of the WHERE it did not apply, to be evaluated on every row it returns.
    scan: Callable[[ast.Expr | None, Evaluator], tuple[Iterable[tuple[Any, ...]], ast.Expr | None]] | None = (
        None
    )
    #: Joined tables (``sql.statements.joins``): every name a column answers to (``a.c``, and
    #: ``c`` when one table alone has it) and the names ``SELECT *`` shows.
    names: Mapping[str, int] | None = None
    labels: list[str] | None = None


#: Relations that are not tables (the CQL endpoint's ``system`` keyspaces): each returns the
#: relation a name stands for, or None to leave it to the next (and finally to the tables).
VirtualRelation = Callable[[Session, Transaction, str], "Relation | None"]
VIRTUAL_RELATIONS: list[VirtualRelation] = []


#: System views by lower-cased name (``.sys/async_replications``, ``SYSTEM.CDC_STREAM``...): a
#: family registers what it owns; a SELECT reads them like any table (WHERE, ORDER BY, LIMIT..).
SYSTEM_VIEWS: dict[str, Callable[[Session, Transaction], Relation]] = {}


def relation(session: Session, txn: Transaction, q: ast.QName) -> Relation:
    name = session.table_name(q)
    view = SYSTEM_VIEWS.get(".".join(session.ident(p) for p in q.parts).lower())
    if view is not None:
        return view(session, txn)
    for virtual in VIRTUAL_RELATIONS:
        found = virtual(session, txn, name)
        if found is not None:
            return found
    base = _log_base(session, txn, q)
    if base is not None:
        return _log_relation(session, txn, base)
    schema = session.resolve_table(txn, q)
    session.require(txn, schema, Privilege.SELECT)
    return _table_relation(session, txn, schema)


def _log_base(session: Session, txn: Transaction, q: ast.QName) -> TableSchema | None:
    """The base table of the CDC log ``q`` names, its SELECT privilege checked (a CDC log is read
    with its table's SELECT); None when ``q`` names no CDC log."""
    name = session.table_name(q)
    if not name.endswith(LOG_SUFFIX) or session.db.find_table(name) is not None:
        return None
    return log_base_table(session, txn, q, Privilege.SELECT)


def select_log_columns(session: Session, s: ast.Select, params: Sequence[Any] = ()) -> LogColumns | None:
    """Run a SELECT that reads a window of a CDC log and nothing more (``*`` or plain columns, a
    WHERE the log applies entirely: streams and ``cdc$time`` bounds; no ORDER BY, GROUP BY,
    DISTINCT, LIMIT or aggregates) and return its result column-wise, as :func:`select` would
    return it row by row (privileges included). None for any other statement: run it with
    ``Session.execute``."""
    if (
        s.table is None
        or s.source is not None
        or s.as_of is not None
        or s.distinct
        or s.group_by
        or s.order_by
        or s.limit is not None
        or s.offset is not None
        or s.having is not None
        or s.joins
        or not s.items
    ):
        return None
    if not session.table_name(s.table).endswith(LOG_SUFFIX) or any(
        claim(session, s) for claim in SELECT_CLAIMS
    ):
        return None
    found: list[LogColumns] = []

    def read(txn: Transaction) -> Result:
        q = s.table
        assert q is not None
        if SYSTEM_VIEWS.get(".".join(session.ident(p) for p in q.parts).lower()) is not None or any(
            virtual(session, txn, session.table_name(q)) is not None for virtual in VIRTUAL_RELATIONS
        ):
            return Result()
        base = _log_base(session, txn, q)
        if base is None:
            return Result()
        view = LogView(txn, base)
        index = {n: i for i, n in enumerate(view.names)}
        lower_index: dict[str, int] = {}
        for n, i in index.items():
            lower_index.setdefault(n.lower(), i)
        picked: list[tuple[str, int]] = []
        for it in s.items:
            if isinstance(it.expr, ast.Star):
                picked.extend((n, index[n]) for n in view.names)
                continue
            at = select_clauses.column_at(session, it.expr, index, lower_index)
            if at is None:
                return Result()  # an expression or an unknown column: the row-wise path says what
            picked.append((select_clauses.label(session, it), at))
        evaluator = Evaluator(session, Params(params), EvalContext(txn.now_ns, session.dialect, txn.ts))
        window = view.window(session, s.where, evaluator)
        if window.residual is not None:
            return Result()
        cols = view.columns(window)
        found.append(
            LogColumns(
                [n for n, _ in picked],
                [cols.types[i] for _, i in picked],
                cols.rows,
                [cols.values[i] for _, i in picked],
            )
        )
        return Result()

    session.run(read, write=False)
    return found[0] if found else None


def _table_relation(session: Session, txn: Transaction, schema: TableSchema) -> Relation:
    st = txn.store(schema)
    cols = list(schema.columns)
    names = [c.name for c in cols]
    if schema.is_cql:
        star = (
            [c.name for c in schema.key]
            + sorted(c.name for c in schema.statics)
            + sorted(c.name for c in schema.regulars)
        )
    else:
        star = names

    plain = not any(c.virtual for c in cols)  # no computed columns: convert by position
    convert = [(c.id, c.type.from_db) for c in cols]
    ids = [c.id for c in cols]
    # Columns whose stored value is already the Python value (integers, text, JSON ..).
    changing = [(i, c.type.from_db) for i, c in enumerate(cols) if not c.type.stored_as_is]
    tuples = plain and not st.static_cols

    def rows(pks: list[tuple[Any, ...]] | None) -> Iterator[tuple[Any, ...]]:
        parts: list[tuple[Any, ...] | None] = list(pks) if pks is not None else [None]
        for pk in parts:
            if tuples:
                if not changing:
                    yield from st.scan_tuples(txn.conn, txn.now_ns, ids, pk)
                    continue
                for raw in st.scan_tuples(txn.conn, txn.now_ns, ids, pk):
                    out = list(raw)
                    for i, f in changing:
                        out[i] = f(out[i])
                    yield tuple(out)
                continue
            if plain:
                for row in _merged_rows(session, txn, schema, st, pk):
                    yield tuple([f(row.get(i)) for i, f in convert])
                continue
            for row in _merged_rows(session, txn, schema, st, pk):
                py = session.py_row(schema, row)
                yield tuple(py.get(n) for n in names)

    return Relation(
        schema.name, names, [c.type for c in cols], rows, [c.name for c in schema.partition_key], star
    )


def _merged_rows(
    session: Session, txn: Transaction, schema: TableSchema, st: TableStore, pk: tuple[Any, ...] | None
) -> Iterator[dict[int, Any]]:
    """Clustering rows with their partition's static row mixed in, as CQL shows them."""
    if not st.static_cols:
        yield from st.scan_rows(txn.conn, txn.now_ns, pk)
        return
    statics = {tuple(r[c.id] for c in st.pk_cols): r for r in st.scan_statics(txn.conn, txn.now_ns, pk)}
    emitted: set[tuple[Any, ...]] = set()
    pending = [(token(k), k) for k in statics]
    pending.sort()
    pi = 0
    for row in st.scan_rows(txn.conn, txn.now_ns, pk):
        k = tuple(row[c.id] for c in st.pk_cols)
        tok = token(k)
        while pi < len(pending) and pending[pi][0] < tok:
            if pending[pi][1] not in emitted:
                yield dict(statics[pending[pi][1]])
                emitted.add(pending[pi][1])
            pi += 1
        s = statics.get(k)
        emitted.add(k)
        yield {**row, **s} if s else row
    for _, k in pending[pi:]:
        if k not in emitted:
            yield dict(statics[k])


def _log_relation(session: Session, txn: Transaction, base: TableSchema) -> Relation:
    view = LogView(txn, base)

    def scan(
        where: ast.Expr | None, evaluator: Evaluator
    ) -> tuple[Iterable[tuple[Any, ...]], ast.Expr | None]:
        window = view.window(session, where, evaluator)
        return view.rows(window), window.residual

    return Relation(base.name + LOG_SUFFIX, view.names, view.types, lambda _: view.rows(), [], scan=scan)


def statement_relation(session: Session, txn: Transaction, stmt: ast.Statement, ev: Params) -> Relation:
    """CockroachDB's statement source, ``SELECT .. FROM [SHOW JOBS]``: the rows the bracketed
    statement returns, run in the same transaction. Only statements that change nothing."""
    handler = session.statements.handler(stmt)
    if handler.write:
        raise UnsupportedFeature(
            "a statement source (FROM [ ... ]) must be a statement that returns rows and changes nothing"
        )
    res = handler.run(session, txn, stmt, ev)
    types: list[SqlType | None] = list(res.types) if res.types else [None] * len(res.columns)
    rows = list(res.rows)
    return Relation("", list(res.columns), types, lambda _: rows)


#: Other families' claims on a SELECT whose FROM names something that is not a table (Apache
#: Phoenix's CDC objects): each returns the result, or None to leave the statement to this family.
SelectHook = Callable[[Session, Transaction, ast.Select, Params], Result | None]
SELECT_HOOKS: list[SelectHook] = []
#: What each hook claims, without running it (``point.plan_point`` plans only what none claims).
SelectClaim = Callable[[Session, ast.Select], bool]
SELECT_CLAIMS: list[SelectClaim] = []


@FAMILY.statement(ast.Select, write=False)
def select(session: Session, txn: Transaction, s: ast.Select, ev: Params) -> Result:
    if s.grouping_sets:  # ROLLUP, CUBE, GROUPING SETS: a run for each set
        stmt = grouping_sets.run(session, s)
        if isinstance(stmt, ast.Select):
            return select(session, txn, stmt, ev)
        return session.statements.handler(stmt).run(session, txn, stmt, ev)
    if s.table is not None:
        for hook in SELECT_HOOKS:
            claimed = hook(session, txn, s, ev)
            if claimed is not None:
                return claimed
    if s.as_of is not None:
        raise UnsupportedFeature(
            "AS OF SYSTEM TIME is not supported: the store keeps no MVCC history of base tables"
        )
    if s.joins:
        rel = _joined_relation(session, txn, s, ev)
    elif s.source is not None:  # CockroachDB's FROM [SHOW JOBS], a WITH query
        rel = statement_relation(session, txn, s.source, ev)
    elif s.table is None:
        rel = Relation("", [], [], lambda _: iter([()]))
    else:
        rel = relation(session, txn, s.table)
    return select_over(session, txn, s, ev, rel)


def _check_qualifiers(session: Session, s: ast.Select) -> None:
    """Every ``x.col`` names a table of the FROM, by its alias or name (PostgreSQL's 42P01
    ``missing FROM-clause entry``): a subquery's ``outer.col`` must not read its own table's."""
    exprs: list[Any] = [*(it.expr for it in s.items), s.where, s.having, *(o.expr for o in s.order_by)]
    exprs += [j.on for j in s.joins]
    check_qualifiers(session, from_tables(s), exprs)


def from_tables(s: ast.Select) -> list[tuple[ast.QName | None, ast.Ident | None]]:
    """The (name, alias) of each table of ``s``'s FROM and joins."""
    return [(s.table, s.alias), *((j.table, j.alias) for j in s.joins)]


def check_qualifiers(
    session: Session, tables: Sequence[tuple[ast.QName | None, ast.Ident | None]], exprs: Sequence[Any]
) -> None:
    """Every ``x.col`` of ``exprs`` names one of ``tables``, by its alias or name (42P01)."""
    known = set()
    for q, alias in tables:
        shown = alias if alias is not None else q.parts[-1] if q is not None else None
        if shown is not None:
            known.add(session.ident(shown).lower())
    stack = [e for e in exprs if e is not None]
    while stack:
        e = stack.pop()
        if isinstance(e, ast.Column) and e.table is not None and session.ident(e.table).lower() not in known:
            raise UndefinedTable(f'missing FROM-clause entry for table "{session.ident(e.table)}"')
        stack.extend(subexpressions(e))


class StatementSubqueries:
    """How a statement's subqueries run (``subqueries.Subqueries``): as SELECTs in its
    transaction, with its parameters."""

    def __init__(self, session: Session, txn: Transaction, ev: Params) -> None:
        self.session = session
        self.txn = txn
        self.ev = ev
        #: The columns of the statement sources met (a derived table, a WITH query), by node:
        #: learned once, not by running the source again for each subquery that reads it.
        self._source_columns: dict[int, tuple[ast.Statement, list[str]]] = {}

    def run(self, query: ast.Select | ast.SetOperation) -> Result:
        if isinstance(query, ast.Select):
            return select(self.session, self.txn, query, self.ev)
        return self.session.statements.handler(query).run(self.session, self.txn, query, self.ev)

    def outer_refs(self, query: ast.Select | ast.SetOperation) -> tuple[ast.Column, ...]:
        """The columns ``query`` reads that no table of its FROM has (nor its select list names,
        for its ORDER BY): those of the query around it, as SQL resolves a name in the innermost
        query that has it. Its own subqueries' outer columns count too, unless its FROM has them.
        Of a UNION (INTERSECT, EXCEPT): those of its queries."""
        if isinstance(query, ast.SetOperation):
            refs = self.outer_refs(query.left) + self.outer_refs(query.right)
            return tuple(dict.fromkeys(refs))
        if query.table is not None and any(claim(self.session, query) for claim in SELECT_CLAIMS):
            return ()  # another family's object (a Phoenix CDC): run once, as it reads itself
        quals, names = self._visible(query)
        labels = {self.session.ident(it.alias).lower() for it in query.items if it.alias is not None}
        found: list[ast.Column] = []

        def inner(c: ast.Column) -> bool:
            if c.table is not None:
                return self.session.ident(c.table).lower() in quals
            name = self.session.ident(c.name).lower()
            return name in names or name in labels

        def visit(e: Any) -> None:
            if isinstance(e, ast.Column):
                if not inner(e) and e not in found:
                    found.append(e)
            elif isinstance(e, ast.Subquery):
                for c in self.outer_refs(e.query):
                    visit(c)
                if e.expr is not None:
                    visit(e.expr)
            else:
                for x in subexpressions(e):
                    visit(x)

        visit(query)
        return tuple(found)

    def _visible(self, query: ast.Select) -> tuple[set[str], set[str]]:
        """The qualifiers (tables, aliases) and column names ``query``'s FROM makes visible."""
        session = self.session
        quals: set[str] = set()
        names: set[str] = set()
        froms: list[tuple[ast.QName | None, ast.Ident | None, ast.Statement | None]] = []
        if query.table is not None or query.source is not None:
            froms.append((query.table, query.alias, query.source))
        froms += [(j.table, j.alias, j.source) for j in query.joins]
        for q, alias, source in froms:
            shown = alias if alias is not None else q.parts[-1] if q is not None else None
            if shown is not None:
                quals.add(session.ident(shown).lower())
            if source is not None:
                columns = self._columns_of(source)
            else:
                assert q is not None
                columns = relation(session, self.txn, q).columns
            names.update(n.lower() for n in columns)
        return quals, names

    def _columns_of(self, source: ast.Statement) -> list[str]:
        known = self._source_columns.get(id(source))
        if known is not None and known[0] is source:
            return known[1]
        if isinstance(source, ast.WorkingTable):  # changes every round: not kept
            return statement_relation(self.session, self.txn, source, self.ev).columns
        if isinstance(source, ast.TableFunction):  # named without running it: its arguments
            return table_functions.columns_of(source)[0]  # may read the outer query's columns
        columns = statement_relation(self.session, self.txn, source, self.ev).columns
        self._source_columns[id(source)] = (source, columns)
        return columns


def run_in(session: Session, txn: Transaction, ev: Params) -> StatementSubqueries:
    """How a statement's subqueries run: as SELECTs in its transaction, with its parameters."""
    return StatementSubqueries(session, txn, ev)


def _joined_relation(session: Session, txn: Transaction, s: ast.Select, ev: Params) -> Relation:
    """The rows of ``s``'s tables joined (``sql.statements.joins``)."""
    joined = joined_tables(session, txn, s, ev)
    rows_out = joined.rows
    return Relation(
        "",
        joined.columns,
        joined.types,
        lambda _: rows_out,
        star=joined.star,
        names=joined.names,
        labels=joined.labels,
    )


def joined_tables(session: Session, txn: Transaction, s: ast.Select, ev: Params) -> joins.Joined:
    """The FROM of ``s`` (a table, a query or WITH query, and its joins) read and joined."""
    evaluator = Evaluator(session, ev, EvalContext(txn.now_ns, session.dialect, txn.ts))

    def read(
        q: ast.QName | None, alias: ast.Ident | None, source: ast.Statement | None
    ) -> tuple[str, Relation, list[tuple[Any, ...]]]:
        if source is not None:  # a WITH query
            rel = statement_relation(session, txn, source, ev)
        else:
            assert q is not None
            rel = relation(session, txn, q)
        shown = alias if alias is not None else q.parts[-1] if q is not None else None
        name = session.ident(shown) if shown is not None else ""
        return name, rel, [tuple(r) for r in rel.rows(None)]

    name, rel, rows = read(s.table, s.alias, s.source)
    joined = joins.start(name, rel.columns, rel.types, rows)
    for j in s.joins:
        on = subqueries.fold(j.on, run_in(session, txn, ev))
        if lateral.runs_per_row(j):
            joined = lateral.join_function(session, joined, j, on, s.where, evaluator)
            continue
        name, rel, rows = read(j.table, j.alias, j.source)
        using = lateral.using_names(session, j, joined, rel.columns)
        joined = joins.join(joined, j.kind, name, rel.columns, rel.types, rows, on, evaluator, using)
    return joined


def select_over(session: Session, txn: Transaction, s: ast.Select, ev: Params, rel: Relation) -> Result:
    """Run ``s`` over the rows of ``rel``: WHERE, projection, aggregates, ORDER BY, LIMIT."""
    ctx = EvalContext(txn.now_ns, session.dialect, txn.ts)
    evaluator = Evaluator(session, ev, ctx)
    labels = [select_clauses.label(session, it) for it in s.items]  # before subqueries become their values
    if subqueries.has_subquery((s.items, s.where, s.having, s.order_by)):
        run = run_in(session, txn, ev)
        s = replace(
            s,
            items=subqueries.fold(s.items, run),
            where=subqueries.fold(s.where, run),
            having=subqueries.fold(s.having, run),
            order_by=subqueries.fold(s.order_by, run),
        )
        evaluator.correlated = subqueries.evaluator_hook(evaluator, run)
    if session.dialect == "sql" and (s.table is not None or s.joins):
        _check_qualifiers(session, s)
    index = {n: i for i, n in enumerate(rel.columns)}
    if rel.names is not None:
        index.update(rel.names)
    lower_index: dict[str, int] = {}
    for n, i in index.items():
        lower_index.setdefault(n.lower(), i)

    def scope(row: tuple[Any, ...]) -> Scope:
        return Scope(RowMap(row, index, lower_index))

    # Expand the select list.
    items: list[tuple[str, ast.Expr, SqlType | None]] = []
    #: Row positions of the select list when it holds only ``*`` and plain columns (no per-row
    #: evaluation needed).
    star_at: list[int] | None = [] if s.items else None
    for it, label_of in zip(s.items, labels, strict=True):
        if isinstance(it.expr, ast.Star):
            for n in rel.star or rel.columns:
                label = rel.labels[index[n]] if rel.labels is not None else n
                items.append((label, ast.Column(ast.Ident(n, True)), rel.types[index[n]]))
                if star_at is not None:
                    star_at.append(index[n])
        elif isinstance(it.expr, ast.QualifiedStar):
            for i in _qualified_star(session, s, rel, it.expr):
                label = rel.labels[i] if rel.labels is not None else rel.columns[i]
                items.append((label, ast.Column(ast.Ident(rel.columns[i], True)), rel.types[i]))
                if star_at is not None:
                    star_at.append(i)
        else:
            items.append((label_of, it.expr, expr_type(session, it.expr, rel.types, index)))
            at = select_clauses.column_at(session, it.expr, index, lower_index)
            if at is None:
                star_at = None
            elif star_at is not None:
                star_at.append(at)
    aggregate = any(has_aggregate(e) for _, e, _ in items)
    if s.having is not None and not s.group_by and not aggregate:
        aggregate = True  # ``SELECT 1 FROM t HAVING count(*) > 0``: one group of every row
    lim = select_clauses.limit_count(evaluator, s.limit, "LIMIT")
    skip = select_clauses.limit_count(evaluator, s.offset, "OFFSET") or 0
    order_by = tuple(select_clauses.order_item(session, o, items) for o in s.order_by)
    if s.distinct and order_by:
        select_clauses.check_distinct_order(session, order_by, items, index, lower_index)
    windows.refuse_in("WHERE", s.where)
    windows.refuse_in("GROUP BY", s.group_by)
    windows.refuse_in("HAVING", s.having)
    group_by = tuple(select_clauses.group_item(session, g, items, index, lower_index) for g in s.group_by)
    if session.dialect == "sql":  # names bound before any row is read, as PostgreSQL plans them
        selected = [e for _, e, _ in items]
        check_names(
            session,
            [*selected, s.where, *group_by, s.having, *(o.expr for o in order_by)],
            index,
            lower_index,
        )
    calls = windows.window_calls([*(e for _, e, _ in items), *(o.expr for o in order_by)])
    srfs = table_functions.set_returning_calls([*(e for _, e, _ in items), *(o.expr for o in order_by)])
    if srfs and (group_by or aggregate or calls):
        raise UnsupportedFeature(
            "set-returning functions in a SELECT list with GROUP BY, aggregates or window functions are not supported"
        )
    if s.distinct_on and (group_by or aggregate):
        raise UnsupportedFeature("DISTINCT ON in a query with GROUP BY or aggregates is not supported")
    where = s.where
    scanned: Iterable[tuple[Any, ...]]
    if rel.scan is not None:
        scanned, where = rel.scan(s.where, evaluator)
    else:
        scanned = rel.rows(_pushdown(session, rel, s.where, evaluator))
    if where is not None:
        scanned = (r for r in scanned if evaluator.eval(where, scope(r)) is True)
    early = not (aggregate or group_by or order_by or s.distinct or s.distinct_on or calls or srfs)
    if lim is not None and early:
        scanned = islice(scanned, skip + lim)  # rows come in output order: stop the scan early
    rows = list(scanned)
    width = len(rel.columns)
    if calls and (group_by or aggregate):
        # Windows over groups: group first, into rows of what the query reads of each group (its
        # aggregates and grouped columns), then go on as a SELECT over those rows.
        if session.dialect == "sql" and rel.names is None:
            exprs = [e for _, e, _ in items]
            select_clauses.check_grouped(
                session,
                rel.pk_columns,
                (*exprs, s.having, *(o.expr for o in order_by)),
                group_by,
                index,
                lower_index,
            )
        lifted, per_group = windows.lift_groups([e for _, e, _ in items] + [o.expr for o in order_by])
        rows = select_clauses.grouped(
            evaluator, [scope(r) for r in rows], group_by, per_group, s.having, whole=not group_by
        )
        index = {windows.group_column(k): k for k in range(len(per_group))}
        lower_index = dict(index)
        width = len(per_group)
        items = [(label, e, t) for (label, _, t), e in zip(items, lifted, strict=False)]
        order_by = tuple(replace(o, expr=e) for o, e in zip(order_by, lifted[len(items) :], strict=True))
        calls = windows.window_calls([*(e for _, e, _ in items), *(o.expr for o in order_by)])
        group_by, aggregate, star_at = (), False, None
    if srfs:  # each row repeated for its set-returning calls' values, in a column each

        def srf_values(r: tuple[Any, ...], c: ast.FuncCall) -> list[Any]:
            sc = scope(r)
            return table_functions.list_values(c, [evaluator.eval(a, sc) for a in c.args])

        rows = table_functions.expand(rows, srfs, srf_values)
        produced: dict[ast.FuncCall, ast.Expr] = {}
        for k, fc in enumerate(srfs):
            name = f"\0set {k}"
            index[name] = lower_index[name] = width + k
            produced[fc] = ast.Column(ast.Ident(name, True))
        width += len(srfs)
        items = [(label, table_functions.substitute(e, produced), t) for label, e, t in items]
        order_by = tuple(replace(o, expr=table_functions.substitute(o.expr, produced)) for o in order_by)
        star_at = None
    if calls:  # each row gains a column per window call, which the select list and ORDER BY read
        scopes = [scope(r) for r in rows]
        values = [windows.compute(evaluator, scopes, c) for c in calls]
        columns: dict[ast.WindowCall, ast.Expr] = {}
        for k, c in enumerate(calls):
            name = f"\0window {k}"
            index[name] = lower_index[name] = width + k
            columns[c] = ast.Column(ast.Ident(name, True))
        rows = [(*r, *w) for r, *w in zip(rows, *values, strict=True)]
        items = [(label, windows.substitute(e, columns), t) for label, e, t in items]
        order_by = tuple(replace(o, expr=windows.substitute(o.expr, columns)) for o in order_by)
        star_at = None
    if group_by or aggregate:
        exprs = [e for _, e, _ in items]
        names = [n for n, _, _ in items]
        # ORDER BY expressions the select list lacks (``ORDER BY count(*) DESC``): computed per
        # group as hidden columns, dropped once sorted
        lowered = [n.lower() for n in names]
        hidden: list[ast.Expr] = []
        for o in order_by:
            e = o.expr
            named = isinstance(e, ast.Column) and e.name.name.lower() in lowered
            if e not in exprs and e not in hidden and not named:
                hidden.append(e)
        if session.dialect == "sql" and rel.names is None:
            select_clauses.check_grouped(
                session, rel.pk_columns, (*exprs, s.having, *hidden), group_by, index, lower_index
            )
        computed = exprs + hidden
        if group_by:
            out_rows = select_clauses.grouped(
                evaluator, [scope(r) for r in rows], group_by, computed, s.having
            )
        else:
            out_rows = select_clauses.grouped(
                evaluator, [scope(r) for r in rows], (), computed, s.having, whole=True
            )
        if order_by:
            out_rows = select_clauses.order_output(out_rows, order_by, computed, names + [""] * len(hidden))
        if hidden:
            out_rows = [r[: len(exprs)] for r in out_rows]
        if s.distinct:
            out_rows = list(dict.fromkeys(out_rows))
    else:
        if order_by:
            for o in reversed(order_by):

                def by(r: tuple[Any, ...], o: ast.OrderItem = o) -> tuple[int, Any]:
                    return order_key(evaluator.eval(o.expr, scope(r)), o)

                rows.sort(key=by, reverse=o.descending)
        if s.distinct_on:
            rows = select_clauses.distinct_on(session, evaluator, rows, scope, s.distinct_on, order_by, items)
        if star_at is not None and star_at == list(range(width)):
            out_rows = rows
        elif star_at is not None:
            out_rows = [tuple(r[i] for i in star_at) for r in rows]
        else:
            out_rows = [tuple(evaluator.eval(e, scope(r)) for _, e, _ in items) for r in rows]
        if s.distinct:
            out_rows = list(dict.fromkeys(out_rows))
    if skip or lim is not None:
        out_rows = out_rows[skip : None if lim is None else skip + lim]
    return Result(
        columns=[n for n, _, _ in items],
        rows=out_rows,
        types=[t for _, _, t in items],
        status=f"SELECT {len(out_rows)}",
        rowcount=len(out_rows),
    )


def _qualified_star(session: Session, s: ast.Select, rel: Relation, star: ast.QualifiedStar) -> list[int]:
    """The row positions ``t.*`` reads: the columns of the joined table ``t``, or all of them when
    ``t`` names the FROM's one table (or its alias); CockroachDB's 42P01 when it names none."""
    wanted = session.ident(star.table)
    if rel.names is not None:  # joined: columns are named alias.column
        prefix = f"{wanted}.".lower()
        found = [i for i, c in enumerate(rel.columns) if c.lower().startswith(prefix)]
    else:
        names = [s.alias] if s.alias is not None else []
        if s.table is not None and s.alias is None:
            names.append(s.table.last)
        found = (
            list(range(len(rel.columns)))
            if any(session.ident(n).lower() == wanted.lower() for n in names)
            else []
        )
    if not found:
        raise UndefinedTable(f"no data source matches pattern: {wanted}.*")
    return found


def _pushdown(
    session: Session, rel: Relation, where: ast.Expr | None, evaluator: Evaluator
) -> list[tuple[Any, ...]] | None:
    """The partitions a SELECT's WHERE pins down (None: scan them all)."""
    if where is None or not rel.pk_columns:
        return None
    schema = session.db.find_table(rel.name)
    return None if schema is None else key_values(session, schema.partition_key, where, evaluator)


# ------------------------------------------------------------------ SHOW
@FAMILY.statement(ast.Show, write=False)
def show(session: Session, txn: Transaction, s: ast.Show, ev: Params) -> Result:
    """``SHOW <what>``: each family registers the targets it owns."""
    run = session.statements.shows.get(s.what)
    if run is None:
        raise UnsupportedFeature(f"SHOW {s.what.upper()} is not supported")
    return run(session, txn, s)


@FAMILY.show("tables")
def show_tables(session: Session, txn: Transaction, s: ast.Show) -> Result:
    names = [t.name for t in session.db.tables()]
    return Result(
        columns=["table_name"], rows=[(n,) for n in names], types=[None], status=f"SHOW {len(names)}"
    )


@FAMILY.show("columns")
def show_columns(session: Session, txn: Transaction, s: ast.Show) -> Result:
    schema = _shown_table(session, txn, s)
    rows = [(c.name, c.type.name, not c.not_null and not c.is_key, c.role.value) for c in schema.columns]
    return Result(columns=["column_name", "data_type", "is_nullable", "kind"], rows=rows, types=[None] * 4)


@FAMILY.show("create table")
def show_create_table(session: Session, txn: Transaction, s: ast.Show) -> Result:
    schema = _shown_table(session, txn, s)
    return Result(
        columns=["table_name", "create_statement"], rows=[(schema.name, describe(schema))], types=[None, None]
    )


def _shown_table(session: Session, txn: Transaction, s: ast.Show) -> TableSchema:
    if s.name is None:
        raise UnsupportedFeature(f"SHOW {s.what.upper()} needs a table name")
    schema = session.resolve_table(txn, s.name)
    check_any_table_privilege(session.privileges(txn), schema)
    return schema


def describe(schema: TableSchema) -> str:
    cols = []
    for c in schema.columns:
        extra = " static" if c.role is Role.STATIC else ""
        cols.append(f"    {c.name} {c.type.name}{extra}")
    if schema.is_cql:
        part = ", ".join(c.name for c in schema.partition_key)
        part = f"({part})" if len(schema.partition_key) > 1 else part
        key = ", ".join([part] + [c.name for c in schema.clustering_key])
    else:
        key = ", ".join(c.name for c in schema.key)
    body = ",\n".join([*cols, f"    PRIMARY KEY ({key})"])
    text = f"CREATE TABLE {schema.name} (\n{body}\n)"
    if schema.cdc.enabled:
        text += f" WITH cdc = {{'enabled': 'true', 'preimage': '{schema.cdc.preimage}', 'postimage': '{str(schema.cdc.postimage).lower()}', 'delta': '{schema.cdc.delta}', 'ttl': '{schema.cdc.ttl}'}}"
    return text + ";"
