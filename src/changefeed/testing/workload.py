"""A seeded random workload (CockroachDB cdctest's "nemesis", reduced to what our engine does).

Two shapes, both driven through the public API (``changefeed.connect``):

* SQL (YDB style): table ``t (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k))`` with a
  changefeed; UPSERT / INSERT / REPLACE / UPDATE (NULLs, expressions, by key and by predicate) /
  DELETE (by key and by predicate), single statements and multi-statement transactions, some of
  which roll back (an exception inside ``with conn.transaction():``).
* CQL (ScyllaDB style): ``ks.t (pk int, ck int, s int static, v1 int, v2 text, PRIMARY KEY (pk, ck))``
  with ``cdc = {'enabled': true, 'preimage': 'full', 'postimage': true}``; INSERT / UPDATE (NULLs),
  column deletes, row / range / partition deletes, static columns, ``BEGIN UNLOGGED BATCH`` and
  ``USING TTL`` (long TTLs only, so nothing expires while a test runs).

With ``snapshots=True`` (single process only) the SQL workload keeps a shadow history: after every
committed transaction it reads the whole table and records ``(txid, state)``, an independent
reference for the images the journal carries. :func:`run_parallel` runs several writer processes
at once, each with its own connection and seed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import random
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import changefeed
from changefeed.connection import Connection

__all__ = [
    "CQL_TABLE",
    "SQL_TABLE",
    "History",
    "Rollback",
    "WorkloadStats",
    "add_feed",
    "current_txid",
    "run_cql",
    "run_parallel",
    "run_sql",
    "setup_cql",
    "setup_sql",
    "table_state",
]

SQL_TABLE = "CREATE TABLE {table} (k Uint64, a Utf8, b Int64, c Double, PRIMARY KEY (k))"
FEED_OPTIONS = "FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES', VIRTUAL_TIMESTAMPS = TRUE"
CQL_KEYSPACE = "CREATE KEYSPACE IF NOT EXISTS {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}"
CQL_TABLE = (
    "CREATE TABLE {ks}.{table} (pk int, ck int, s int static, v1 int, v2 text, PRIMARY KEY (pk, ck))"
    " WITH cdc = {{'enabled': true, 'preimage': 'full', 'postimage': true}}"
)
#: Long enough that nothing written with a TTL expires during a test.
LONG_TTL = 86_400 * 30

State = dict[tuple[Any, ...], dict[str, Any]]


class Rollback(Exception):
    """Raised inside ``with conn.transaction():`` to make the workload roll a transaction back."""


@dataclass
class WorkloadStats:
    seed: int = 0
    committed: int = 0
    rolled_back: int = 0
    failed: int = 0  # statements the engine rejected (e.g. INSERT of an existing key)
    statements: int = 0
    savepoints: int = 0  # SAVEPOINTs taken (``savepoint_rate``)
    rolled_back_to: int = 0  # ROLLBACK TO SAVEPOINT, after a failed statement or at random


@dataclass
class History:
    """Shadow model: the table state after each committed transaction, by transaction id."""

    initial: State = field(default_factory=dict)
    initial_txid: int = 0
    after: list[tuple[int, State]] = field(default_factory=list)

    def state_before(self, txid: int) -> State:
        prev = self.initial
        for t, st in self.after:
            if t >= txid:
                break
            prev = st
        return prev

    def state_after(self, txid: int) -> State | None:
        for t, st in self.after:
            if t == txid:
                return st
        return None


# ------------------------------------------------------------------------------------ helpers
def current_txid(conn: Connection) -> int:
    """The id of the last committed transaction (the commit clock's counter)."""
    return int(conn.db.conn.execute("SELECT txid FROM _clock WHERE id = 0").fetchone()[0])


def table_state(conn: Connection, table: str = "t", key_columns: int = 1) -> State:
    """``SELECT *`` of a table as {key tuple: {column: value}} (non-key columns only)."""
    res = conn.execute(f"SELECT * FROM {table}")
    out: State = {}
    for row in res.rows:
        key = tuple(row[:key_columns])
        out[key] = dict(zip(res.columns[key_columns:], row[key_columns:], strict=True))
    return out


def setup_sql(
    db: str | os.PathLike[str],
    table: str = "t",
    feed: str | None = "f",
    *,
    feed_options: str = "",
    initial_rows: int = 0,
    seed: int = 0,
) -> None:
    """Create the SQL table (optionally pre-filled, before the feed exists) and its changefeed."""
    with changefeed.connect(db) as conn:
        conn.execute(SQL_TABLE.format(table=table))
        if initial_rows:
            rng = random.Random(seed)
            conn.executemany(
                f"UPSERT INTO {table} (k, a, b, c) VALUES (?, ?, ?, ?)",
                [(k, _text(rng), rng.randint(-100, 100), _double(rng)) for k in range(initial_rows)],
            )
        if feed is not None:
            add_feed(conn, table, feed, feed_options)


def add_feed(conn: Connection, table: str = "t", feed: str = "f", extra: str = "") -> None:
    opts = FEED_OPTIONS + (", " + extra if extra else "")
    conn.execute(f"ALTER TABLE {table} ADD CHANGEFEED {feed} WITH ({opts})")


def setup_cql(db: str | os.PathLike[str], table: str = "t", keyspace: str = "ks") -> None:
    with changefeed.connect(db, dialect="cql") as conn:
        conn.execute(CQL_KEYSPACE.format(ks=keyspace))
        conn.execute(CQL_TABLE.format(ks=keyspace, table=table))


def _text(rng: random.Random) -> str | None:
    r = rng.random()
    if r < 0.1:
        return None
    if r < 0.15:
        return 'it\'s "q" ü'
    return "".join(rng.choice("abcdefgh") for _ in range(rng.randint(0, 6)))


def _double(rng: random.Random) -> float | None:
    if rng.random() < 0.1:
        return None
    return rng.randint(-1000, 1000) / 8.0


def _maybe(rng: random.Random, v: Any, p_null: float = 0.15) -> Any:
    return None if rng.random() < p_null else v


# ------------------------------------------------------------------------------------ SQL
def _sql_statement(rng: random.Random, table: str, keys: int) -> tuple[str, list[Any]]:
    k = rng.randrange(keys)
    r = rng.random()
    if r < 0.30:
        cols = ["k", *rng.sample(["a", "b", "c"], rng.randint(0, 3))]
        vals = [k] + [
            _text(rng) if c == "a" else _maybe(rng, rng.randint(-100, 100)) if c == "b" else _double(rng)
            for c in cols[1:]
        ]
        rows = 1 if rng.random() < 0.7 else 3
        allvals = list(vals)
        seen = {k}
        for _ in range(rows - 1):
            k2 = rng.randrange(keys)
            if k2 in seen:
                continue
            seen.add(k2)
            allvals += [k2, *vals[1:]]
        n = len(allvals) // len(cols)
        ph = ", ".join("(" + ", ".join("?" for _ in cols) + ")" for _ in range(n))
        return f"UPSERT INTO {table} ({', '.join(cols)}) VALUES {ph}", allvals
    if r < 0.40:
        return f"INSERT INTO {table} (k, a, b) VALUES (?, ?, ?)", [k, _text(rng), rng.randint(-100, 100)]
    if r < 0.50:
        cols = ["k", *rng.sample(["a", "b", "c"], rng.randint(0, 2))]
        vals = [k] + [
            _text(rng) if c == "a" else rng.randint(-100, 100) if c == "b" else _double(rng) for c in cols[1:]
        ]
        return f"REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)})", vals
    if r < 0.65:
        sets = rng.choice(["a = NULL", "b = b + 1", "c = NULL, a = 'u'", "b = NULL", "c = 2.5, b = 7"])
        return f"UPDATE {table} SET {sets} WHERE k = ?", [k]
    if r < 0.72:
        lo = rng.randint(-100, 100)
        return f"UPDATE {table} SET c = ?, a = NULL WHERE b > ? AND b < ?", [_double(rng), lo, lo + 15]
    if r < 0.90:
        return f"DELETE FROM {table} WHERE k = ?", [k]
    lo = rng.randint(-100, 100)
    return f"DELETE FROM {table} WHERE b >= ? AND b <= ?", [lo, lo + 10]


def _over(deadline: float | None, stop_file: str | None) -> bool:
    if deadline is not None and time.monotonic() >= deadline:
        return True
    return stop_file is not None and os.path.exists(stop_file)


def run_sql(
    db: str | os.PathLike[str],
    *,
    seed: int,
    txns: int | None = 200,
    duration: float | None = None,
    table: str = "t",
    keys: int = 40,
    rollback_rate: float = 0.1,
    multi_rate: float = 0.35,
    snapshots: bool = False,
    history: History | None = None,
    sleep: float = 0.0,
    stop_file: str | None = None,
    savepoint_rate: float = 0.0,
) -> WorkloadStats:
    """Run ``txns`` random transactions (or until ``duration`` seconds have passed, or
    ``stop_file`` exists).

    ``snapshots`` (single writer only) fills ``history`` with the table state after each commit.
    ``savepoint_rate``: in transactions of several statements, the chance of a ``SAVEPOINT``
    before a statement and of a ``ROLLBACK TO`` or ``RELEASE`` of a random one after it; a
    statement that fails after a savepoint is undone with ``ROLLBACK TO`` its latest one (the
    transaction goes on, as PostgreSQL's and CockroachDB's clients recover)."""
    rng = random.Random(seed)
    stats = WorkloadStats(seed=seed)
    deadline = None if duration is None else time.monotonic() + duration
    with changefeed.connect(db) as conn:
        if snapshots and history is not None:
            history.initial = table_state(conn, table)
            history.initial_txid = current_txid(conn)
        i = 0
        while (txns is None or i < txns) and not _over(deadline, stop_file):
            i += 1
            multi = rng.random() < multi_rate
            n = rng.randint(2, 5) if multi else 1
            rollback = multi and rng.random() < rollback_rate / multi_rate
            stmts = [_sql_statement(rng, table, keys) for _ in range(n)]
            if multi and savepoint_rate:
                ok = _run_txn_savepoints(conn, stmts, rollback, stats, rng, savepoint_rate)
            else:
                ok = _run_txn(conn, stmts, multi, rollback, stats)
            if ok and snapshots and history is not None:
                history.after.append((current_txid(conn), table_state(conn, table)))
            if sleep:
                time.sleep(sleep)
    return stats


def _run_txn(
    conn: Connection, stmts: list[tuple[str, list[Any]]], multi: bool, rollback: bool, stats: WorkloadStats
) -> bool:
    """Run statements (in one transaction if ``multi``); True if something committed."""
    from changefeed.exceptions import ChangefeedError

    stats.statements += len(stmts)
    if not multi:
        sql, params = stmts[0]
        try:
            conn.execute(sql, params)
        except ChangefeedError:
            stats.failed += 1
            return False
        stats.committed += 1
        return True
    try:
        with conn.transaction():
            for sql, params in stmts:
                conn.execute(sql, params)
            if rollback:
                raise Rollback
    except Rollback:
        stats.rolled_back += 1
        return False
    except ChangefeedError:
        stats.failed += 1
        stats.rolled_back += 1
        return False
    stats.committed += 1
    return True


def _run_txn_savepoints(
    conn: Connection,
    stmts: list[tuple[str, list[Any]]],
    rollback: bool,
    stats: WorkloadStats,
    rng: random.Random,
    rate: float,
) -> bool:
    """One transaction of ``stmts`` with random savepoints (see :func:`run_sql`)."""
    from changefeed.exceptions import ChangefeedError

    stats.statements += len(stmts)
    marks: list[str] = []
    try:
        with conn.transaction():
            for sql, params in stmts:
                if rng.random() < rate:
                    marks.append(f"sp{stats.savepoints}")
                    stats.savepoints += 1
                    conn.execute(f"SAVEPOINT {marks[-1]}")
                try:
                    conn.execute(sql, params)
                except ChangefeedError:
                    stats.failed += 1
                    if not marks:
                        raise
                    conn.execute(f"ROLLBACK TO SAVEPOINT {marks[-1]}")
                    stats.rolled_back_to += 1
                    continue
                if marks and rng.random() < rate:
                    at = rng.randrange(len(marks))
                    if rng.random() < 0.6:
                        conn.execute(f"ROLLBACK TO SAVEPOINT {marks[at]}")
                        stats.rolled_back_to += 1
                        del marks[at + 1 :]
                    else:
                        conn.execute(f"RELEASE SAVEPOINT {marks[at]}")
                        del marks[at:]
            if rollback:
                raise Rollback
    except Rollback:
        stats.rolled_back += 1
        return False
    except ChangefeedError:
        stats.rolled_back += 1
        return False
    stats.committed += 1
    return True


# ------------------------------------------------------------------------------------ CQL
def _cql_statement(
    rng: random.Random, t: str, pks: int, cks: int, *, in_batch: bool = False
) -> tuple[str, list[Any]]:
    pk, ck = rng.randrange(pks), rng.randrange(cks)
    ttl = f" USING TTL {LONG_TTL}" if rng.random() < 0.15 else ""
    r = rng.random()
    v1 = _maybe(rng, rng.randint(-50, 50))
    v2 = _maybe(rng, rng.choice(["x", "yy", "z z", "it's"]))
    if r < 0.25:
        if rng.random() < 0.3:
            return f"INSERT INTO {t} (pk, ck, s, v1, v2) VALUES (?, ?, ?, ?, ?){ttl}", [
                pk,
                ck,
                rng.randint(0, 9),
                v1,
                v2,
            ]
        return f"INSERT INTO {t} (pk, ck, v1, v2) VALUES (?, ?, ?, ?){ttl}", [pk, ck, v1, v2]
    if r < 0.30:
        return f"INSERT INTO {t} (pk, ck, v1) VALUES (?, ?, ?){ttl}", [pk, ck, v1]
    if r < 0.50:
        if rng.random() < 0.5:
            return f"UPDATE {t}{ttl} SET v1 = ?, v2 = ? WHERE pk = ? AND ck = ?", [v1, v2, pk, ck]
        return f"UPDATE {t}{ttl} SET v2 = ? WHERE pk = ? AND ck = ?", [v2, pk, ck]
    if r < 0.58:
        return f"UPDATE {t}{ttl} SET s = ? WHERE pk = ?", [_maybe(rng, rng.randint(0, 9)), pk]
    if r < 0.66:
        return f"DELETE {rng.choice(['v1', 'v2', 'v1, v2'])} FROM {t} WHERE pk = ? AND ck = ?", [pk, ck]
    if r < 0.70:
        return f"DELETE s FROM {t} WHERE pk = ?", [pk]
    if r < 0.82:
        return f"DELETE FROM {t} WHERE pk = ? AND ck = ?", [pk, ck]
    if r < 0.93:
        lo = rng.randrange(cks)
        form = rng.randrange(3)
        if form == 0:
            return f"DELETE FROM {t} WHERE pk = ? AND ck >= ? AND ck < ?", [pk, lo, lo + rng.randint(1, 3)]
        if form == 1:
            return f"DELETE FROM {t} WHERE pk = ? AND ck > ?", [pk, lo]
        return f"DELETE FROM {t} WHERE pk = ? AND ck <= ?", [pk, lo]
    return f"DELETE FROM {t} WHERE pk = ?", [pk]


def _inline(sql: str, params: list[Any]) -> str:
    """Substitute parameters as CQL literals (batches are sent as one statement text)."""
    parts = sql.split("?")
    out = [parts[0]]
    for p, rest in zip(params, parts[1:], strict=True):
        if p is None:
            out.append("null")
        elif isinstance(p, str):
            out.append("'" + p.replace("'", "''") + "'")
        else:
            out.append(str(p))
        out.append(rest)
    return "".join(out)


def run_cql(
    db: str | os.PathLike[str],
    *,
    seed: int,
    ops: int | None = 200,
    duration: float | None = None,
    table: str = "ks.t",
    pks: int = 5,
    cks: int = 8,
    batch_rate: float = 0.2,
    stop_file: str | None = None,
) -> WorkloadStats:
    """Run ``ops`` random CQL statements or ``BEGIN UNLOGGED BATCH`` batches (until ``duration``
    seconds have passed or ``stop_file`` exists, with ``ops=None``)."""
    from changefeed.exceptions import ChangefeedError

    rng = random.Random(seed)
    stats = WorkloadStats(seed=seed)
    deadline = None if duration is None else time.monotonic() + duration
    with changefeed.connect(db, dialect="cql") as conn:
        i = 0
        while (ops is None or i < ops) and not _over(deadline, stop_file):
            i += 1
            if rng.random() < batch_rate:
                body = []
                ranged: set[str] = set()
                for _ in range(rng.randint(2, 4)):
                    stmt = _inline(*_cql_statement(rng, table, pks, cks, in_batch=True))
                    # The ScyllaDB log gives a range delete as its bound entries only, so two
                    # one-sided range deletes of one partition in one batch (left bound, then right
                    # bound) read exactly like one two-sided range: keep one range delete per
                    # partition per batch, so a replay of the log is unambiguous.
                    if " AND ck " in stmt and stmt.startswith("DELETE FROM") and " ck = " not in stmt:
                        pk = stmt.split("pk = ", 1)[1].split(" ", 1)[0]
                        if pk in ranged:
                            continue
                        ranged.add(pk)
                    body.append(stmt)
                # Range/partition deletes are fine in a batch; keep inserts/updates and deletes mixed.
                sql = "BEGIN UNLOGGED BATCH " + "; ".join(body) + "; APPLY BATCH"
                params: list[Any] = []
                stats.statements += len(body)
            else:
                sql, params = _cql_statement(rng, table, pks, cks)
                stats.statements += 1
            try:
                conn.execute(sql, params)
            except ChangefeedError:
                stats.failed += 1
                continue
            stats.committed += 1
    return stats


# ------------------------------------------------------------------------------------ processes
def _worker(args: tuple[str, str, int, dict[str, Any]]) -> WorkloadStats:
    dialect, db, seed, kw = args
    fn: Callable[..., WorkloadStats] = run_cql if dialect == "cql" else run_sql
    return fn(db, seed=seed, **kw)


def run_parallel(
    db: str | os.PathLike[str], *, dialect: str = "sql", seeds: list[int], **kw: Any
) -> list[WorkloadStats]:
    """Run one writer process per seed at once (spawned, each with its own connection)."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(len(seeds)) as pool:
        return pool.map(_worker, [(dialect, str(db), s, kw) for s in seeds])


class Background:
    """Writer processes running a workload in the background (for fault injection)."""

    def __init__(
        self, db: str | os.PathLike[str], *, dialect: str = "sql", seeds: list[int], **kw: Any
    ) -> None:
        ctx = mp.get_context("spawn")
        fd, self._stop_file = tempfile.mkstemp(prefix="workload-stop-")
        os.close(fd)
        os.unlink(self._stop_file)  # its existence is the signal
        kw = {**kw, "stop_file": self._stop_file}
        self._pool = ctx.Pool(len(seeds))
        self._result = self._pool.map_async(_worker, [(dialect, str(db), s, kw) for s in seeds])

    def stop(self) -> None:
        """Ask the writers to end after their current transaction (before ``duration``)."""
        with open(self._stop_file, "w"):
            pass

    def ready(self) -> bool:
        return self._result.ready()

    def join(self, timeout: float | None = None) -> list[WorkloadStats]:
        try:
            res: list[WorkloadStats] = self._result.get(timeout)
            self._pool.close()
            self._pool.join()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self._stop_file)
        return res
