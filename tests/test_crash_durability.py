"""Crash consistency of durable commits: power loss below the file system (issue 22).

A writer process commits transactions from three threads (each: a ledger row, three new rows of
``t`` and an update of the thread's counter row, all tagged with the transaction's id) and prints
``ack <id>`` once ``commit`` returned, while a fourth thread delivers the YDB changefeed on ``t``
to its topic with the baseline loop (topic appends and feed progress). It runs under the crashfs
shim (``tests/crashfs``), which logs every write and sync the process makes to the database
directory. The test kills it with SIGKILL at a random moment and rebuilds what the disk would hold
had the power failed then: everything up to each file's last sync, and a random part of the rest.

On the rebuilt database: every acknowledged transaction is present; every transaction present is
whole (its ledger row, its three rows, the counter at least as new); the change stream replays
to the table; and after delivering what is left, the feed's exactly-once, order and image
validators pass over the topic: no change delivered that the power loss took back, none twice.
The control: with ``CHANGEFEED_SYNCHRONOUS=NORMAL`` and nothing unsynced surviving, acknowledged
commits are lost (the test can see a loss).
"""

from __future__ import annotations

import ctypes
import errno
import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import changefeed
from tests import crashfs

WRITERS = 3
WRITER = textwrap.dedent(
    """
    import sys, threading, time
    import changefeed
    from changefeed.pipeline.baseline import deliver_all

    db = sys.argv[1]
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    conn.execute("CREATE TABLE ledger (id INT PRIMARY KEY, w INT)")
    conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
    for w in range({writers}):
        conn.execute("UPSERT INTO t (k, v) VALUES (?, ?)", (-1 - w, -1))
    out = threading.Lock()

    def say(text):
        with out:
            sys.stdout.write(text + "\\n")
            sys.stdout.flush()

    def writer(w):
        c = changefeed.connect(db)
        i = 0
        while True:
            tid = w * 1_000_000 + i
            with c.transaction():
                c.execute("INSERT INTO ledger (id, w) VALUES (?, ?)", (tid, w))
                for j in range(3):
                    c.execute("INSERT INTO t (k, v) VALUES (?, ?)", (tid * 3 + j, tid))
                c.execute("UPDATE t SET v = ? WHERE k = ?", (tid, -1 - w))
            say(f"ack {{tid}}")
            i += 1

    def deliverer():
        while True:
            deliver_all(db, batch_rows=25)
            time.sleep(0.005)

    for w in range({writers}):
        threading.Thread(target=writer, args=(w,), daemon=True).start()
    threading.Thread(target=deliverer, daemon=True).start()
    say("ready")
    time.sleep(3600)
    """
).format(writers=WRITERS)


def _run_and_cut(tmp: Path, seconds: float, sync_mode: str) -> tuple[Path, Path, set[int]]:
    db = tmp / "db"
    db.mkdir(parents=True)
    log = tmp / "crashfs.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(crashfs.ROOT / "src") + os.pathsep + str(crashfs.ROOT),
        "CHANGEFEED_SYNCHRONOUS": sync_mode,
        **crashfs.environment(db, log),
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None
    acked: set[int] = set()
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while "ready\n" not in lines and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    assert "ready\n" in lines, "the writer did not start"
    time.sleep(seconds)
    os.kill(proc.pid, signal.SIGKILL)  # the power fails now
    proc.wait()
    reader.join(10)
    for line in lines:
        if line.startswith("ack ") and line.endswith("\n"):
            acked.add(int(line.split()[1]))
    return db, log, acked


def _round(tmp: Path, seed: int) -> int:
    rng = random.Random(seed)
    db, log, acked = _run_and_cut(tmp, rng.uniform(0.5, 2.5), "FULL")
    assert acked, "nothing was acknowledged before the cut"
    recovered = tmp / "recovered"
    stats = crashfs.power_loss(log, db, recovered, keep=rng.choice([0.0, 0.5, 0.9]), seed=seed)
    assert stats["ops"] > 0
    crashfs.check_ledger_workload(recovered, acked, WRITERS)
    return len(acked)


@pytest.mark.parametrize("seed", [1, 2])
def test_power_loss_keeps_every_acknowledged_commit(tmp_path: Path, seed: int) -> None:
    assert _round(tmp_path, seed) > 0


@pytest.mark.soak
def test_power_loss_soak(tmp_path: Path) -> None:
    for seed in range(100, 120):
        _round(tmp_path / str(seed), seed)


def test_control_normal_loses_acknowledged_commits(tmp_path: Path) -> None:
    """With synchronous=NORMAL a commit is acknowledged before it is durable: the same cut loses
    some (so the test above can tell durable from not)."""
    db, log, acked = _run_and_cut(tmp_path, 1.0, "NORMAL")
    recovered = tmp_path / "recovered"
    crashfs.power_loss(log, db, recovered, keep=0.0)
    ledger: set[int] = set()
    if (recovered / "changefeed.db").exists():
        with changefeed.connect(recovered) as conn:
            if conn.db.find_table("ledger") is not None:
                ledger = {r[0] for r in conn.execute("SELECT id FROM ledger").rows}
    assert acked - ledger, "synchronous=NORMAL lost nothing: the cut did not model a power loss"


# ------------------------------------------------------------------ configuration and group commit
def test_topics_name_the_engine_file() -> None:
    from changefeed.engine.database import DB_FILE
    from changefeed.topics.store import ENGINE_FILE

    assert ENGINE_FILE == DB_FILE


def test_an_unknown_synchronous_mode_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from changefeed.exceptions import DatabaseError

    monkeypatch.setenv("CHANGEFEED_SYNCHRONOUS", "SOMETIMES")
    with pytest.raises(DatabaseError, match="CHANGEFEED_SYNCHRONOUS='SOMETIMES' is not a synchronous mode"):
        changefeed.connect(tmp_path / "db")


def test_concurrent_commits_share_syncs(tmp_path: Path) -> None:
    """Eight threads committing single rows: every commit is acknowledged after a sync that began
    after it, and they need fewer syncs than commits."""
    from changefeed.sqlite_wal import wal_sync

    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    syncer = wal_sync(db / "changefeed.db")
    syncs0, tickets0 = syncer.syncs, syncer.ticket()

    def work(w: int) -> None:
        with changefeed.connect(db) as c:
            for i in range(60):
                c.execute("UPSERT INTO t (k, v) VALUES (?, ?)", (w * 1000 + i, i))

    threads = [threading.Thread(target=work, args=(w,)) for w in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not syncer.pending()  # every commit acknowledged was synced
    commits = syncer.ticket() - tickets0 - 1
    assert commits >= 480
    assert syncer.syncs - syncs0 < commits


def test_event_loop_commits_are_synced_by_the_sync_process(tmp_path: Path) -> None:
    """An event loop's waiters are answered by the loop's sync process (one request in flight,
    the commits arriving meanwhile are the next group), which is started again if it dies with
    waiters, and replaced when a later loop asks."""
    import asyncio

    from changefeed.sqlite_wal import wal_sync

    db = tmp_path / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
    syncer = wal_sync(db / "changefeed.db")
    conns = [changefeed.connect(db) for _ in range(4)]
    for c in conns:
        c.db.defer_durable = True  # as a server's session: the commit leaves its ticket

    async def session(c: changefeed.Connection, w: int, n: int) -> None:
        for i in range(n):
            c.execute("UPSERT INTO t (k, v) VALUES (?, ?)", (w * 1000 + i, i))
            ticket, c.db.pending_durable = c.db.pending_durable, 0
            assert ticket
            await syncer.wait_async(ticket)
            assert not syncer.pending() or syncer.pending() > ticket  # acknowledged once synced

    async def run(n: int) -> tuple[int, int]:
        syncs0 = syncer.syncs
        await asyncio.gather(*(session(c, w, n) for w, c in enumerate(conns)))
        return syncer.syncs - syncs0, n * len(conns)

    try:
        syncs, waits = asyncio.run(run(50))
        assert waits >= 200 and 0 < syncs < waits
        proc = syncer.sync_process
        assert proc is not None
        first = proc.pid

        async def killed_midway() -> None:
            task = asyncio.ensure_future(run(50))
            await asyncio.sleep(0.05)
            live = syncer.sync_process
            assert live is not None
            os.kill(live.pid, signal.SIGKILL)
            await task

        asyncio.run(asyncio.wait_for(killed_midway(), 60))
        proc = syncer.sync_process
        assert proc is not None and proc.pid != first
        assert not syncer.pending()
    finally:
        for c in conns:
            c.close()
    with changefeed.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM t").rows == [(200,)]


def _fail_next_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    import errno

    from changefeed import sqlite_wal

    real = sqlite_wal.sync_wal
    calls = {"n": 0}

    def failing(wal: str, directory: str, inode: tuple[int, int] | None) -> tuple[int, int] | None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError(errno.EIO, "Input/output error")
        return real(wal, directory, inode)

    monkeypatch.setattr(sqlite_wal, "sync_wal", failing)


def test_a_failed_sync_fails_its_commits_for_good(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A commit covered by a failed sync is never acknowledged, by a thread's wait or an event
    loop's, even when a later sync succeeds (after a failed fdatasync the kernel may have dropped
    the pages it could not write); commits after the failure are acknowledged as usual."""
    import asyncio

    from changefeed.exceptions import DatabaseError
    from changefeed.sqlite_wal import WalSync

    (tmp_path / "x.db-wal").write_bytes(b"")
    syncer = WalSync(str(tmp_path / "x.db"))
    early = syncer.ticket()
    syncer.wait(early)  # durable before the failure: stays so
    doomed = syncer.ticket()
    _fail_next_sync(monkeypatch)
    with pytest.raises(DatabaseError, match="could not be made durable"):
        syncer.wait(doomed)
    later = syncer.ticket()
    syncer.wait(later)  # a later sync succeeds...
    with pytest.raises(DatabaseError, match="could not be made durable"):
        syncer.wait(doomed)  # ...and says nothing about the failed one's commits
    syncer.wait(early)

    async def on_a_loop() -> None:
        with pytest.raises(DatabaseError, match="could not be made durable"):
            await syncer.wait_async(doomed)
        await asyncio.wait_for(syncer.wait_async(syncer.ticket()), 30)

    asyncio.run(on_a_loop())


def test_a_failed_sync_of_the_process_fails_its_waiters(tmp_path: Path) -> None:
    """An answer with an errno fails the waiters it covers with the durability error, as a
    failed sync of a thread does, and later ones are asked for again."""
    import asyncio
    import errno

    from changefeed.exceptions import DatabaseError
    from changefeed.sqlite_wal import WalSync

    (tmp_path / "x.db-wal").write_bytes(b"")
    syncer = WalSync(str(tmp_path / "x.db"))

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        first_ticket = syncer.ticket()
        first = loop.create_task(syncer.wait_async(first_ticket))
        await asyncio.sleep(0)
        later_ticket = syncer.ticket()
        assert syncer.sync_process is not None
        syncer._answered(first_ticket, errno.EIO)  # as if the process had answered so
        with pytest.raises(DatabaseError, match="could not be made durable"):
            await first
        await asyncio.wait_for(syncer.wait_async(later_ticket), 30)  # the real answer
        with pytest.raises(DatabaseError, match="could not be made durable"):
            await syncer.wait_async(first_ticket)  # the process's real answer changed nothing

    asyncio.run(scenario())


def test_a_sync_process_that_cannot_run_hands_over_to_a_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync process that ends without answering is started again a few times, then the waiters
    (and every later one) go to the thread: no waiter hangs, no endless restarts."""
    import asyncio

    from changefeed import sqlite_wal
    from changefeed.sqlite_wal import WalSync

    monkeypatch.setattr(sqlite_wal.sys, "executable", "/bin/false")
    (tmp_path / "x.db-wal").write_bytes(b"")
    syncer = WalSync(str(tmp_path / "x.db"))
    started: list[int] = []
    real_init = sqlite_wal.SyncProcess.__init__

    def counting(self: sqlite_wal.SyncProcess, *args: Any) -> None:
        real_init(self, *args)
        started.append(self.pid)

    monkeypatch.setattr(sqlite_wal.SyncProcess, "__init__", counting)

    async def scenario() -> None:
        await asyncio.wait_for(syncer.wait_async(syncer.ticket()), 30)
        await asyncio.wait_for(syncer.wait_async(syncer.ticket()), 30)

    asyncio.run(scenario())
    assert len(started) == sqlite_wal.PROCESS_DEATHS
    assert syncer.sync_process is None


def test_sync_processes_of_closed_loops_are_closed_and_reaped(tmp_path: Path) -> None:
    """A process that runs one server loop after another (a test suite) keeps no process, pipe
    or zombie per closed loop: starting a process sweeps those of closed loops."""
    import asyncio

    from changefeed import sqlite_wal
    from changefeed.sqlite_wal import WalSync

    pids = []
    for i in range(6):
        (tmp_path / f"{i}.db-wal").write_bytes(b"")
        syncer = WalSync(str(tmp_path / f"{i}.db"))

        async def one(s: WalSync = syncer) -> None:
            await asyncio.wait_for(s.wait_async(s.ticket()), 30)

        asyncio.run(one())
        proc = syncer.sync_process
        assert proc is not None
        pids.append(proc.pid)
    live = [p for p in sqlite_wal._processes if p.loop.is_closed()]
    assert len(live) <= 1  # only the last loop's, swept when the next one starts
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        sqlite_wal._sweep()
        states = []
        for pid in pids[:-1]:
            try:
                states.append(Path(f"/proc/{pid}/stat").read_text().split()[2])
            except FileNotFoundError:
                states.append("gone")
        if all(s == "gone" for s in states):
            break
        time.sleep(0.1)
    assert all(s == "gone" for s in states), states  # exited and reaped: no zombie


def test_file_identity_matches_stat_without_reading_timestamps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The identity the syncs and the WAL reserve compare (device, inode, size) is stat's, read
    by statx without asking for timestamps (asking for them makes the next write dirty the
    inode on file systems with multigrain timestamps); without statx it falls back to stat."""
    from changefeed import wal_syncer

    f = tmp_path / "x-wal"
    f.write_bytes(b"\0" * 12345)
    st = os.stat(f)
    want = ((st.st_dev, st.st_ino), st.st_size)
    assert wal_syncer.file_identity(str(f)) == want
    fd = os.open(f, os.O_RDONLY)
    try:
        assert wal_syncer.file_identity(fd=fd) == want
        monkeypatch.setattr(wal_syncer, "_statx", None)
        assert wal_syncer.file_identity(str(f)) == want
        assert wal_syncer.file_identity(fd=fd) == want

        def refused(*_: Any) -> int:  # statx not allowed here (a seccomp filter): stat instead
            ctypes.set_errno(errno.EPERM)
            return -1

        monkeypatch.setattr(wal_syncer, "_statx", refused)
        assert wal_syncer.file_identity(str(f)) == want
        assert wal_syncer._statx is None
    finally:
        os.close(fd)
    monkeypatch.undo()
    with pytest.raises(FileNotFoundError):
        wal_syncer.file_identity(str(tmp_path / "missing"))
