"""``UPDATE`` of primary key columns (SQL tables), as CockroachDB runs it: each row whose key
changes is deleted under its old key and inserted whole under its new one, so that every
changefeed carries a delete of the old key and a new row of the new key (CockroachDB's
changefeeds, Debezium and YDB's do the same for a key update). The statement's rows move
together: a new key may be one another row of the statement leaves (``SET id = id + 1`` over the
whole table), but not one a row keeps, nor one two rows move to (23505)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from changefeed.engine.catalog import TableSchema
from changefeed.engine.storage import OP_INSERT
from changefeed.engine.txn import Transaction
from changefeed.sql.statements.common import unique_violation


class Move(NamedTuple):
    """One row of the statement whose key changes: its old key and row, its new key and the
    cells (value columns) the statement sets."""

    old: tuple[Any, ...]
    row: dict[int, Any]
    new: tuple[Any, ...]
    cells: dict[int, Any]


def check(txn: Transaction, schema: TableSchema, moves: Sequence[Move], kept: set[tuple[Any, ...]]) -> None:
    """23505 if a new key is another move's, or a row's that stays (``kept``: the keys the
    statement updates in place; any other row there is found in the table) — before anything is
    written."""
    seen: set[tuple[Any, ...]] = set()
    leaving = {m.old for m in moves}
    for m in moves:
        if m.new in seen or m.new in kept:
            raise unique_violation(schema, m.new)
        seen.add(m.new)
    free = [m.new for m in moves if m.new not in leaving]
    there = txn.store(schema).get_rows(txn.conn, free, txn.now_ns) if free else {}
    for m in moves:
        if m.new in there:
            raise unique_violation(schema, m.new)


def apply(txn: Transaction, schema: TableSchema, moves: Sequence[Move]) -> None:
    """Delete every moved row under its old key, then write it whole under its new one."""
    txn.delete_rows(schema, [m.old for m in moves], olds={m.old: m.row for m in moves})
    stored = [c.id for c in schema.columns if not c.is_key and not c.virtual]
    columns = {i: [{**m.row, **m.cells}.get(i) for m in moves] for i in stored}
    txn.write_rows(schema, [m.new for m in moves], columns, marker=True, op=OP_INSERT, olds={})
