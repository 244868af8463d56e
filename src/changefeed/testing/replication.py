"""Validators for asynchronous replication (issue 20): the replica against its source.

* :func:`check_at_barrier` — a ``GLOBAL`` replication: one snapshot read of the destination (every
  replica and the barrier they were applied to, in the same read transaction), one snapshot read of
  the source (every source table and its change stream), and the source *as of the barrier*
  (its rows with every change at or after the barrier undone through the change stream's old
  images) must equal the replicas, every item;
* :func:`check_equal` — replicas equal their source tables now (after ``STATE = "DONE"`` on a quiet
  source, or a ``ROW`` replication that caught up);
* :func:`wait_caught_up` — polls until the replication applied everything its source committed;
* a multi-table transactional workload for the source (:func:`setup_bank`, :func:`bank_transactions`,
  :class:`BankWorkload` in background processes): transfers between accounts with a move row in the
  same transaction, inserts, deletes, REPLACE, range deletes.

Rows compare as storage values by column id (a replica keeps its source's column ids).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import changefeed
from changefeed.connection import Connection
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


def row_caught_up(src: str | Path, dst: str | Path, rep: R.Replication) -> bool:
    """Whether every change of the source's tables is applied: each item's changefeed delivered
    the table's whole change stream, and every partition of its topic is applied to its end.
    (The newest commit applied is not enough: one item's or partition's records may lag another's.)"""
    from changefeed.feeds.store import all_feeds
    from changefeed.topics.store import TopicStore

    conn = open_sqlite(Path(src) / DB_FILE, readonly=True)
    try:
        feeds = {(f.spec.table_id, f.spec.name): f.spec.id for f in all_feeds(conn)}
        for it in rep.items:
            fid = feeds.get((it.source_table_id, it.changefeed))
            if fid is None:
                return False
            top = int(conn.execute(f"SELECT COALESCE(MAX(seq), 0) FROM x{it.source_table_id}").fetchone()[0])
            row = conn.execute("SELECT seq FROM _progress WHERE feed_id = ?", (fid,)).fetchone()
            if row is None or int(row[0]) < top:
                return False
    finally:
        conn.close()
    dconn = open_sqlite(Path(dst) / DB_FILE, readonly=True)
    try:
        pos = R.positions(dconn, rep.id)
    finally:
        dconn.close()
    store = TopicStore(src)
    try:
        for it in rep.items:
            for p in range(it.partitions):
                end = store.partition_offsets(it.topic, p)[1]
                got = pos.get((it.item_id, p))
                if got is None or got.next_offset < end:
                    return False
    finally:
        store.close()
    return True


def wait_caught_up(src: str | Path, dst: str | Path, name: str, timeout_s: float = 120.0) -> R.Replication:
    """Wait until the replication applied everything its source committed: GLOBAL, a barrier
    past the source's newest change; ROW, every change (:func:`row_caught_up`). Raises
    TimeoutError."""
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
        if not rep.spec.global_ and row_caught_up(src, dst, rep):
            return rep
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"replication {name} not caught up after {timeout_s} s: applied to {rep.applied_wall}, source at {newest}"
            )
        time.sleep(0.1)


# ------------------------------------------------------------------------------ the workload
BANK_TABLES = (
    "CREATE TABLE accounts (id Uint64, owner Utf8, balance Int64, PRIMARY KEY (id)) WITH (UNIFORM_PARTITIONS = 3)",
    "CREATE TABLE moves (acct Uint64, n Int32, amount Double, note Utf8, PRIMARY KEY (acct, n))",
)


def setup_bank(db: str | os.PathLike[str], accounts: int = 20) -> None:
    c = changefeed.connect(db)
    try:
        for t in BANK_TABLES:
            c.execute(t)
        c.executemany(
            "UPSERT INTO accounts (id, owner, balance) VALUES (?, ?, ?)",
            [(i, f"o{i}", 100) for i in range(accounts)],
        )
    finally:
        c.close()


def bank_transactions(c: Connection, rng: random.Random, txns: int, keys: int = 30) -> int:
    """``txns`` random transactions over both tables; returns how many committed."""
    done = 0
    for _ in range(txns):
        with c.transaction():
            for _ in range(rng.randint(1, 5)):
                r = rng.random()
                a, b = rng.randrange(keys), rng.randrange(keys)
                if r < 0.35:  # a transfer: two accounts and a move, atomically
                    amt = rng.randint(1, 9)
                    c.execute("UPDATE accounts SET balance = balance - ? WHERE id = ?", (amt, a))
                    c.execute("UPDATE accounts SET balance = balance + ? WHERE id = ?", (amt, b))
                    c.execute(
                        "UPSERT INTO moves (acct, n, amount, note) VALUES (?, ?, ?, ?)",
                        (a, rng.randrange(5), amt * 1.5, rng.choice([None, "t", "é"])),
                    )
                elif r < 0.6:
                    c.execute("UPSERT INTO accounts (id, owner) VALUES (?, ?)", (a, f"n{rng.randrange(9)}"))
                elif r < 0.75:
                    c.execute("DELETE FROM accounts WHERE id = ?", (a,))
                elif r < 0.9:
                    c.execute("DELETE FROM moves WHERE acct = ?", (a,))
                else:
                    c.execute("REPLACE INTO accounts (id, balance) VALUES (?, ?)", (a, rng.randint(0, 50)))
        done += 1
    return done


def _bank_worker(args: tuple[str, int, float, float, int]) -> int:
    db, seed, duration, sleep, keys = args
    rng = random.Random(seed)
    c = changefeed.connect(db)
    done = 0
    deadline = time.monotonic() + duration
    try:
        while time.monotonic() < deadline:
            done += bank_transactions(c, rng, 1, keys)
            if sleep:
                time.sleep(sleep)
    finally:
        c.close()
    return done


class BankWorkload:
    """:func:`bank_transactions` in background processes (one per seed) for ``duration`` s."""

    def __init__(
        self,
        db: str | os.PathLike[str],
        *,
        seeds: list[int],
        duration: float,
        sleep: float = 0.0,
        keys: int = 30,
    ) -> None:
        ctx = mp.get_context("spawn")
        self._pool = ctx.Pool(len(seeds))
        self._result = self._pool.map_async(
            _bank_worker, [(str(db), s, duration, sleep, keys) for s in seeds]
        )

    def join(self, timeout: float | None = None) -> int:
        n = sum(self._result.get(timeout))
        self._pool.close()
        self._pool.join()
        return n


__all__ = [
    "BANK_TABLES",
    "BankWorkload",
    "Check",
    "Mismatch",
    "bank_transactions",
    "check_at_barrier",
    "check_equal",
    "row_caught_up",
    "rows_as_of",
    "setup_bank",
    "source_last_commit",
    "table_rows",
    "wait_caught_up",
]
