"""Checks of the engine's change stream (the journal ``x<id>``), independent of any changefeed.

* :func:`change_rows` — the change stream of a table as :class:`ChangeRow` s (JSON-normalised);
* :func:`check_change_stream` — replaying the change stream (upsert the new image, delete on
  erase) reproduces the table; per key, each old image equals the previous new image; with a
  workload :class:`~changefeed.testing.workload.History`, each old image equals the table read
  before the transaction and each new image the table read after it.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from changefeed.connection import Connection
from changefeed.engine.catalog import TableSchema
from changefeed.engine.changes import CHANGE_SNAPSHOT, read_changes
from changefeed.testing.validators.report import Report
from changefeed.testing.validators.values import Image, Key, norm, norm_image, norm_key

__all__ = [
    "CHANGE_ERASE",
    "CHANGE_UPSERT",
    "ChangeRow",
    "change_rows",
    "check_change_stream",
    "table_schema",
    "table_state",
]

CHANGE_UPSERT = 10
CHANGE_ERASE = 11


@dataclass(frozen=True)
class ChangeRow:
    seq: int
    ts: int
    lg: int
    tx: int
    op: int
    static: bool
    key: Key
    new: Image | None  # value columns after (None: erased)
    old: Image | None  # value columns before (None: the row did not exist)
    written: frozenset[str]

    @property
    def order(self) -> tuple[int, int, int]:
        return (self.ts, self.lg, self.tx)


def table_schema(conn: Connection, table: str) -> TableSchema:
    """The schema of ``table`` (the catalog refreshed first); ``LookupError`` when it does not exist."""
    conn.db.refresh_catalog()
    schema = conn.db.find_table(table)
    if schema is None:
        raise LookupError(f"table {table!r} does not exist")
    return schema


def change_rows(conn: Connection, table: str, start_seq: int = 0) -> list[ChangeRow]:
    """The change stream of ``table`` after ``start_seq`` as Python objects (JSON-normalised)."""
    schema = table_schema(conn, table)
    batch = read_changes(conn.db.conn, schema, start_seq, 1 << 62)
    cols = batch.to_pydict()
    keys = [c for c in schema.stored if c.is_key]
    vals = [c for c in schema.stored if not c.is_key]
    out: list[ChangeRow] = []
    for i in range(batch.num_rows):
        op = cols["op"][i]
        key = norm_key(cols[c.db][i] for c in keys)
        new = None if op == CHANGE_ERASE else {c.name: norm(cols[c.db][i]) for c in vals}
        old = {c.name: norm(cols[f"o{c.id}"][i]) for c in vals} if cols["ox"][i] else None
        written = frozenset(c.name for c in vals if cols[f"u{c.id}"][i])
        out.append(
            ChangeRow(
                cols["seq"][i],
                cols["ts"][i],
                cols["lg"][i],
                cols["tx"][i],
                op,
                bool(cols["st"][i]),
                key,
                new,
                old,
                written,
            )
        )
    return out


def table_state(conn: Connection, schema: TableSchema) -> dict[Key, Image]:
    """The rows of the table now: key -> value columns (JSON-normalised)."""
    nk = len([c for c in schema.stored if c.is_key])
    res = conn.execute(f"SELECT * FROM {schema.name}")
    names = res.columns
    return {norm_key(r[:nk]): {n: norm(v) for n, v in zip(names[nk:], r[nk:], strict=True)} for r in res.rows}


def check_change_stream(conn: Connection, table: str = "t", history: Any = None) -> Report:
    """Replay ``x<id>`` into a dict and compare with the table; check images (see module doc).

    ``history`` is a :class:`changefeed.testing.workload.History` (table states per transaction)."""
    rep = Report()
    schema = table_schema(conn, table)
    rows = change_rows(conn, table)
    state: dict[Key, Image] = {}
    prev_order: tuple[int, int, int] | None = None
    seen_tx_keys: set[tuple[int, Key]] = set()
    known: set[Key] = set()
    for r in rows:
        if r.op == CHANGE_SNAPSHOT:
            continue
        if prev_order is not None and r.order < prev_order:
            rep.add(
                "stream_order",
                r.key,
                f"seq {r.seq} has commit ts {r.order} before the previous row's {prev_order}",
            )
        prev_order = r.order
        if (r.tx, r.key) in seen_tx_keys:
            rep.add("stream_dup", r.key, f"transaction {r.tx} has two change rows for the key")
        seen_tx_keys.add((r.tx, r.key))
        before = state.get(r.key)
        # A key's first change may carry an old image written before the change stream existed.
        if r.key in known and r.old != before:
            rep.add(
                "stream_old_image",
                r.key,
                f"seq {r.seq} tx {r.tx}: old image {r.old} but the previous new image is {before}",
            )
        known.add(r.key)
        if r.new is None:
            state.pop(r.key, None)
        else:
            state[r.key] = r.new
        if history is not None:
            after = history.state_after(r.tx)
            if after is None:
                rep.add(
                    "history",
                    r.key,
                    f"transaction {r.tx} is not in the workload's history (not committed by it?)",
                )
            else:
                exp_new = norm_image(after.get(r.key))
                exp_old = norm_image(history.state_before(r.tx).get(r.key))
                if r.new != exp_new:
                    rep.add(
                        "new_image",
                        r.key,
                        f"tx {r.tx}: new image {r.new}, table after the transaction {exp_new}",
                    )
                if r.old != exp_old:
                    rep.add(
                        "old_image",
                        r.key,
                        f"tx {r.tx}: old image {r.old}, table before the transaction {exp_old}",
                    )
    table_rows = table_state(conn, schema)
    for k in sorted(set(table_rows) | set(state), key=repr):
        if table_rows.get(k) != state.get(k):
            rep.add("stream_replay", k, f"replayed {state.get(k)} but the table has {table_rows.get(k)}")
    if history is not None:
        # Every committed transaction that changed a row shows up in the stream, with every key it changed.
        prev = history.initial
        by_tx: dict[int, set[Key]] = defaultdict(set)
        for r in rows:
            by_tx[r.tx].add(r.key)
        for txid, st in history.after:
            changed = {
                norm_key(k) for k in set(st) | set(prev) if norm_image(st.get(k)) != norm_image(prev.get(k))
            }
            missing = changed - by_tx.get(txid, set())
            for k in sorted(missing, key=repr):
                rep.add(
                    "stream_gap", k, f"transaction {txid} changed the row but the stream has no change for it"
                )
            prev = st
    rep.stats["change_rows"] = len(rows)
    return rep
