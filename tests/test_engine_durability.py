"""Transactions are atomic across kill -9, and several processes can write at once."""

from __future__ import annotations

import multiprocessing as mp
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import changefeed
from changefeed.engine.database import Database
from changefeed.engine.txn import Transaction

WRITER = textwrap.dedent(
    """
    import sys, changefeed
    conn = changefeed.connect(sys.argv[1], dialect="cql")
    conn.execute("INSERT INTO ks.t (k, v) VALUES (0, 'committed before')")
    with conn.transaction():
        for i in range(1, 1_000_000):
            conn.execute("INSERT INTO ks.t (k, v) VALUES (?, ?)", (i, "x" * 100))
            if i == 5000:
                print("mid-transaction", flush=True)
    """
)


def test_kill_9_mid_transaction_leaves_nothing(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db, dialect="cql") as conn:
        conn.execute(
            "CREATE TABLE ks.t (k int PRIMARY KEY, v text) WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
        )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "mid-transaction"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with changefeed.connect(db, dialect="cql") as conn:
        rows = conn.execute("SELECT k, v FROM ks.t").rows
        assert rows == [(0, "committed before")]
        log = conn.execute('SELECT k, "cdc$operation" FROM ks.t_scylla_cdc_log').rows
        assert log == [(0, 2), (0, 9)]
        # The database is fully usable afterwards.
        conn.execute("INSERT INTO ks.t (k, v) VALUES (1, 'after')")
        assert len(conn.execute("SELECT * FROM ks.t").rows) == 2


def _writer(db: str, worker: int, n: int) -> None:
    conn = changefeed.connect(db)
    for i in range(n):
        if i % 10 == 9:
            with conn.transaction():
                conn.execute("UPSERT INTO t (k, w, i) VALUES (?, ?, ?)", (worker * 100_000 + i, worker, i))
                conn.execute("UPDATE t SET i = i + 1000 WHERE k = ?", (worker * 100_000 + i,))
        else:
            conn.execute("UPSERT INTO t (k, w, i) VALUES (?, ?, ?)", (worker * 100_000 + i, worker, i))
    conn.close()


def test_concurrent_processes_serialise_with_increasing_commit_timestamps(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k Int64, w Int64, i Int64, PRIMARY KEY (k)) WITH (CHANGES = TRUE)")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(db), w, 150)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    d = Database(db, create=False)
    d.refresh_catalog()
    schema = d.find_table("t")
    assert schema is not None
    assert d.conn.execute(f"SELECT count(*) FROM t{schema.id}").fetchone()[0] == 600
    changes = d.conn.execute(f"SELECT seq, ts, lg, tx FROM x{schema.id} ORDER BY seq").fetchall()
    assert len(changes) == 600  # one change per transaction and key: the 2-statement txns give one
    stamps = [(ts, lg) for _, ts, lg, _ in changes]
    txids = [tx for *_, tx in changes]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)
    assert txids == sorted(txids)
    d.close()


def _open_new_files(args: tuple[str, float]) -> str:
    """Open a fresh database, topic store and schema registry at the moment ``start``."""
    import time

    from changefeed.server.registry.store import RegistryStore
    from changefeed.topics.store import TopicStore

    root, start = args
    while time.time() < start:
        pass
    with changefeed.connect(Path(root) / "db") as conn:
        conn.execute("SELECT 1")
    topics = TopicStore(Path(root) / "db")
    topics.ensure_topic("t", 2)
    topics.close()
    RegistryStore(Path(root) / "registry").close()
    return "ok"


def test_processes_creating_the_same_new_files_at_once_all_succeed(tmp_path: Path) -> None:
    """Four processes open one new database directory at the same instant, twenty times over.

    Switching a new SQLite file to WAL and bootstrapping it race between processes; the loser of
    SQLite's lock-upgrade deadlock gets "database is locked" without waiting, and one process
    could see the other's half-made file. Every open must succeed and agree on one file.
    """
    import time

    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_open_new_files, [(str(tmp_path / "warm"), 0.0)] * 4)  # imports done
        for i in range(20):
            root = str(tmp_path / f"r{i}")
            start = time.time() + 0.1
            assert pool.map(_open_new_files, [(root, start)] * 4) == ["ok"] * 4


def test_wal_reserve_keeps_zeros_ahead_and_a_copy_recovers(tmp_path: Path) -> None:
    """Commits overwrite zeros kept past the WAL's last frame (``WalSync.reserve``); a copy of
    the files as a crash leaves them (no ``-shm``, zeros after the last frame) recovers every
    commit, and SQLite's integrity check passes."""
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v TEXT)")
    for i in range(300):
        conn.execute("UPSERT INTO t (k, v) VALUES ($1, 'x')", (i,))
    wal = (db / "changefeed.db-wal").read_bytes()
    assert len(wal) > 300 * 4096 and wal[-4096:] == bytes(4096)  # zeros ahead of the frames
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(db / "changefeed.db", copy / "changefeed.db")
    (copy / "changefeed.db-wal").write_bytes(wal)
    conn.close()
    raw = sqlite3.connect(copy / "changefeed.db")
    assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    raw.close()
    with changefeed.connect(copy) as again:
        assert again.execute("SELECT count(*) FROM t").rows == [(300,)]


def test_wal_reserve_only_under_the_write_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Zeros are written ahead of the WAL only by a transaction that holds SQLite's write lock:
    a read-only transaction's commit holds none, and another connection may then be appending
    frames where the zeros would go."""
    from changefeed.sqlite_wal import WalSync

    calls: list[str] = []
    real = WalSync.reserve

    def spy(self: WalSync) -> None:
        calls.append("reserve")
        real(self)

    monkeypatch.setattr(WalSync, "reserve", spy)
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v TEXT)")
    conn.execute("UPSERT INTO t (k, v) VALUES (1, 'x')")
    calls.clear()
    read = Transaction(conn.db, write=False)
    read.commit()
    assert calls == []
    conn.execute("BEGIN")  # an explicit transaction begins with BEGIN IMMEDIATE: it holds the lock
    conn.execute("SELECT count(*) FROM t")
    conn.execute("COMMIT")
    conn.execute("UPSERT INTO t (k, v) VALUES (2, 'y')")
    assert calls == ["reserve", "reserve"]
    conn.close()
