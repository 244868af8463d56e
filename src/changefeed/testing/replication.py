"""Validators for asynchronous replication (issue 20): the replica against its source.

* :func:`check_at_barrier` — a ``GLOBAL`` replication: one snapshot read of the destination (every
  replica and the barrier they were applied to, in the same read transaction), one snapshot read of
  the source (every source table and its change stream), and the source *as of the barrier*
  (its rows with every change at or after the barrier undone through the change stream's old
  images) must equal the replicas, every item;
* :func:`check_equal` — replicas equal their source tables now (after ``STATE = "DONE"`` on a quiet
  source, or a ``ROW`` replication that caught up);
* :func:`wait_caught_up` — polls until the replication applied everything its source committed.

Rows compare as storage values by column id (a replica keeps its source's column ids).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.engine.database import DB_FILE, open_sqlite
from changefeed.engine.storage import TableStore
from changefeed.feeds import replication as R

Rows = dict[tuple[Any, ...], tuple[Any, ...]]


@dataclass
class Mismatch:
    item: str
    key: tuple[Any, ...]
    replica: tuple[Any, ...] | None
    source: tuple[Any, ...] | None


@dataclass
class Check:
    barrier: int = 0  # GLOBAL: the barrier checked (wall ns); 0 before the first
    rows: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def __str__(self) -> str:
        head = f"barrier {self.barrier}, {self.rows} rows, {len(self.mismatches)} mismatches"
        return "\n".join([head, *(str(m) for m in self.mismatches[:20])])


def _catalog(conn: Any) -> dict[int, TableSchema]:
    import orjson

    return {
        int(i): TableSchema.from_json(orjson.loads(s))
        for i, s in conn.execute("SELECT id, spec FROM _catalog")
    }


def table_rows(conn: Any, schema: TableSchema) -> Rows:
    """Every live row of a table: key -> stored values of its value columns, in one read."""
    st = TableStore(schema)
    kids = [c.id for c in schema.key]
    vids = [c.id for c in schema.stored_values]
    out: Rows = {}
    for row in st.scan_rows(conn, time.time_ns()):
        out[tuple(row.get(i) for i in kids)] = tuple(row.get(i) for i in vids)
    return out


def rows_as_of(conn: Any, schema: TableSchema, barrier_ns: int) -> Rows:
    """A table's rows as they were before ``barrier_ns``: the current rows, then every change
    committed at or after it undone newest first (the old image back, or the row gone)."""
    rows = table_rows(conn, schema)
    kids = [c.db for c in schema.key]
    vals = schema.stored_values
    cols = ", ".join(["ox", *kids, *(f"o{c.id}" for c in vals)])
    nk = len(kids)
    for r in conn.execute(f"SELECT {cols} FROM x{schema.id} WHERE ts >= ? ORDER BY seq DESC", (barrier_ns,)):
        key = tuple(r[1 : 1 + nk])
        if r[0]:
            rows[key] = tuple(r[1 + nk :])
        else:
            rows.pop(key, None)
    return rows


def _compare(item: str, replica: Rows, source: Rows, out: Check) -> None:
    out.rows += len(source)
    for k in replica.keys() | source.keys():
        a, b = replica.get(k), source.get(k)
        if a != b:
            out.mismatches.append(Mismatch(item, k, a, b))


def _read_replicas(dst: Path, name: str) -> tuple[R.Replication, dict[int, Rows]]:
    conn = open_sqlite(dst / DB_FILE, readonly=True)
    try:
        conn.execute("BEGIN")
        rep = R.find(conn, name)
        if rep is None:
            raise LookupError(f"no asynchronous replication {name!r} in {dst}")
        cat = _catalog(conn)
        replicas = {it.item_id: table_rows(conn, cat[it.target_table_id]) for it in rep.items}
        conn.execute("COMMIT")
        return rep, replicas
    finally:
        conn.close()


def check_at_barrier(src: str | Path, dst: str | Path, name: str) -> Check:
    """A GLOBAL replication's replicas equal the source as of the barrier they were applied to."""
    rep, replicas = _read_replicas(Path(dst), name)
    out = Check(barrier=rep.applied_wall)
    if not rep.applied_wall:
        return out
    conn = open_sqlite(Path(src) / DB_FILE, readonly=True)
    try:
        conn.execute("BEGIN")
        cat = _catalog(conn)
        for it in rep.items:
            _compare(
                it.target_name,
                replicas[it.item_id],
                rows_as_of(conn, cat[it.source_table_id], rep.applied_wall),
                out,
            )
        conn.execute("COMMIT")
    finally:
        conn.close()
    return out


def check_equal(src: str | Path, dst: str | Path, name: str) -> Check:
    """Every replica equals its source table now."""
    rep, replicas = _read_replicas(Path(dst), name)
    out = Check(barrier=rep.applied_wall)
    conn = open_sqlite(Path(src) / DB_FILE, readonly=True)
    try:
        conn.execute("BEGIN")
        cat = _catalog(conn)
        for it in rep.items:
            _compare(it.target_name, replicas[it.item_id], table_rows(conn, cat[it.source_table_id]), out)
        conn.execute("COMMIT")
    finally:
        conn.close()
    return out


def source_last_commit(src: str | Path, rep: R.Replication) -> int:
    """The newest commit time among the replication's source tables' changes (0: none)."""
    conn = open_sqlite(Path(src) / DB_FILE, readonly=True)
    try:
        newest = 0
        for it in rep.items:
            row = conn.execute(f"SELECT MAX(ts) FROM x{it.source_table_id}").fetchone()
            newest = max(newest, int(row[0] or 0))
        return newest
    finally:
        conn.close()


def wait_caught_up(src: str | Path, dst: str | Path, name: str, timeout_s: float = 120.0) -> R.Replication:
    """Wait until the replication applied everything its source committed: GLOBAL, a barrier
    past the source's newest change; ROW, that change applied. Raises TimeoutError."""
    deadline = time.monotonic() + timeout_s
    while True:
        conn = open_sqlite(Path(dst) / DB_FILE, readonly=True)
        try:
            rep = R.find(conn, name)
        finally:
            conn.close()
        if rep is None:
            raise LookupError(f"no asynchronous replication {name!r} in {dst}")
        newest = source_last_commit(src, rep)
        if rep.spec.global_ and rep.applied_wall > newest:
            return rep
        if not rep.spec.global_ and rep.applied_wall >= newest and rep.applied_ns:
            return rep
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"replication {name} not caught up after {timeout_s} s: applied to {rep.applied_wall}, source at {newest}"
            )
        time.sleep(0.1)


__all__ = [
    "Check",
    "Mismatch",
    "check_at_barrier",
    "check_equal",
    "rows_as_of",
    "source_last_commit",
    "table_rows",
    "wait_caught_up",
]
