"""``UPDATE t SET .. FROM a [JOIN b ..] WHERE ..`` and ``DELETE FROM t USING a .. WHERE ..``:
the rows of ``t`` that the WHERE joins to the other tables, as PostgreSQL (and CockroachDB)
define them.

The other tables are read and joined as a SELECT's FROM is (``select.joined_tables``); the
target table is then joined to them with the WHERE as the join condition (a hash join on an
equality between the two sides, ``joins.join``). Each target row the join keeps is updated once,
from the first row it joined (PostgreSQL leaves which one unspecified), with every table's
columns in scope for SET; or deleted once. RETURNING sees the target table's columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.engine.txn import Transaction
from changefeed.sql import ast
from changefeed.sql.evaluator import Evaluator, Params, RowMap, Scope, check_names
from changefeed.sql.session import Session
from changefeed.sql.statements import joins
from changefeed.sql.statements.select import Relation, check_qualifiers, from_tables, joined_tables

__all__ = ["JoinedTargets", "joined_targets"]


@dataclass(frozen=True)
class JoinedTargets:
    """The target rows the WHERE joined, and the join they came from."""

    #: (key, stored row, its first joined row) of each target row, in join order.
    targets: list[tuple[tuple[Any, ...], dict[int, Any], tuple[Any, ...]]]
    joined: joins.Joined
    #: Where the target's columns start in a joined row, and their names in order.
    width: int
    columns: list[str]
    #: ``SELECT *`` of the other tables (their keys in ``joined.columns``).
    other_star: list[str]

    def scope(self, row: tuple[Any, ...]) -> Scope:
        lower = {k.lower(): i for k, i in self.joined.names.items()}
        return Scope(RowMap(row, self.joined.names, lower))

    def returning(self, written: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> Relation:
        """What RETURNING reads: each written target row (its key and its columns as written)
        beside the other tables' row it joined; ``*`` is the target's columns, then theirs."""
        first = {key: joined_row for key, _, joined_row in self.targets}
        rows = [
            first[key][: self.width]
            + tuple(values.get(n) for n in self.columns)
            + first[key][self.width + len(self.columns) :]
            for key, values in written
        ]
        j = self.joined
        target_keys = j.columns[self.width : self.width + len(self.columns)]
        return Relation(
            "",
            j.columns,
            j.types,
            lambda _: rows,
            star=target_keys + self.other_star,
            names=j.names,
            labels=j.labels,
        )


def joined_targets(
    session: Session,
    txn: Transaction,
    schema: TableSchema,
    s: ast.Update | ast.Delete,
    ev: Params,
    evaluator: Evaluator,
    *,
    shape_only: bool = False,
) -> JoinedTargets:
    """Each row of ``schema`` (the table of ``s``, known by its alias, else by its name) that
    the WHERE of ``s`` joins to the rows of its other tables (``FROM``/``USING``), with the
    first row it joined (``shape_only``: none, for the shape of a RETURNING before the statement
    runs). Every ``x.col`` of the WHERE, the SET and RETURNING must name one of the tables
    (42P01)."""
    assert s.source is not None
    source, alias, where = s.source, s.alias, s.where
    assignments = s.assignments if isinstance(s, ast.Update) else ()
    bound = [where, *(e for _, e in assignments)]  # RETURNING: select_over checks its names
    check_qualifiers(
        session, [(s.table, alias), *from_tables(source)], [*bound, *(i.expr for i in s.returning)]
    )
    other = joined_tables(session, txn, source, ev)
    name = session.ident(alias) if alias is not None else schema.name.rsplit(".", 1)[-1]
    st = txn.store(schema)
    stored = [] if shape_only else list(st.scan_rows(txn.conn, txn.now_ns))
    shown = [session.py_row(schema, r) for r in stored]
    columns = list(shown[0]) if shown else [c.name for c in schema.columns]
    types = [next((c.type for c in schema.columns if c.name == n), None) for n in columns]
    rows = [tuple(r[n] for n in columns) for r in shown]
    joined = joins.join(other, "inner", name, columns, types, rows, where, evaluator)
    check_names(session, bound, joined.names, {k.lower(): i for k, i in joined.names.items()})
    width = len(other.columns)
    at_key = [width + columns.index(c.name) for c in schema.key]
    by_key = {tuple(s[c.name] for c in schema.key): r for s, r in zip(shown, stored, strict=True)}
    done: set[tuple[Any, ...]] = set()
    targets: list[tuple[tuple[Any, ...], dict[int, Any], tuple[Any, ...]]] = []
    for row in joined.rows:
        shown_key = tuple(row[i] for i in at_key)
        if shown_key in done:
            continue
        done.add(shown_key)
        stored_row = by_key[shown_key]
        targets.append((tuple(stored_row[c.id] for c in schema.key), stored_row, row))
    return JoinedTargets(targets, joined, width, columns, other.star or list(other.columns))
