"""The PostgreSQL endpoint served by worker processes (``changefeed.server.pg.cluster``): what spans
workers (CancelRequest, CANCEL QUERY, SHOW QUERIES), a worker that dies, and the cross-process
write gate and durability board underneath. One two-worker server for the module."""

from __future__ import annotations

import mmap
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

import changefeed
from changefeed.engine.database import WriteGate
from changefeed.server.pg import cluster
from changefeed.sqlite_wal import BOARD_SLOT, WalSync
from tests.pg_server import RunningServer, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    db = tmp_path_factory.mktemp("pgw") / "db"
    with changefeed.connect(db) as conn:
        conn.execute("CREATE TABLE kv (k BIGINT PRIMARY KEY, v TEXT)")
    old = os.environ.get(cluster.WORKERS_ENV)
    os.environ[cluster.WORKERS_ENV] = "2"
    try:
        srv = start_server(db)
    finally:
        if old is None:
            os.environ.pop(cluster.WORKERS_ENV, None)
        else:
            os.environ[cluster.WORKERS_ENV] = old
    yield srv
    srv.stop()


def _workers() -> list[int]:
    """Process ids of this test process's pg workers."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{d}/cmdline").read_bytes()
            ppid = int(Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"changefeed.server.pg.worker" in cmd:
            out.append(int(d))
    return out


def _stream(
    conn: psycopg.Connection[tuple[object, ...]], table: str, errors: list[BaseException]
) -> threading.Thread:
    def consume() -> None:
        try:
            with conn.cursor() as cur:
                for _ in cur.stream(f"EXPERIMENTAL CHANGEFEED FOR {table}"):
                    pass
        except psycopg.Error as exc:
            errors.append(exc)

    th = threading.Thread(target=consume)
    th.start()
    return th


def _running(conn: psycopg.Connection[tuple[object, ...]], text: str) -> list[tuple[object, ...]]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        rows = [r for r in conn.execute("SHOW QUERIES").fetchall() if text in str(r[5])]
        if rows:
            return rows
        time.sleep(0.05)
    return []


def test_cancel_and_show_queries_span_workers(server: RunningServer) -> None:
    a = psycopg.connect(server.dsn(), autocommit=True)
    b = psycopg.connect(server.dsn(), autocommit=True)
    c = psycopg.connect(server.dsn(), autocommit=True)  # so the next connection goes to b's worker
    try:
        assert len(_workers()) == 2
        # each connection goes to the worker with the fewest: a and b on different workers
        assert a.info.backend_pid & 0xFF != b.info.backend_pid & 0xFF
        b.execute("CREATE TABLE feed_w (k BIGINT PRIMARY KEY)")
        # CANCEL QUERY from another worker's connection, found through SHOW QUERIES there
        errors: list[BaseException] = []
        th = _stream(a, "feed_w", errors)
        rows = _running(b, "CHANGEFEED FOR feed_w")
        assert len(rows) == 1 and rows[0][3] == "root"
        b.execute(f"CANCEL QUERY '{rows[0][0]}'")
        th.join(20)
        assert not th.is_alive() and isinstance(errors[0], psycopg.errors.QueryCanceled)
        assert a.execute("SELECT 1").fetchone() == (1,)  # the connection goes on
        # a CancelRequest that arrives at the other worker is handed to a's
        errors.clear()
        th = _stream(a, "feed_w", errors)
        assert _running(b, "CHANGEFEED FOR feed_w")
        a.cancel_safe()
        th.join(20)
        assert not th.is_alive() and isinstance(errors[0], psycopg.errors.QueryCanceled)
        with pytest.raises(psycopg.Error) as err:
            b.execute("CANCEL QUERY '00000000000000000000000000000000'")
        assert err.value.sqlstate == "42704"
    finally:
        for x in (a, b, c):
            x.close()


def test_writes_of_both_workers_are_durable_and_visible(server: RunningServer) -> None:
    conns = [psycopg.connect(server.dsn(), autocommit=True) for _ in range(4)]
    try:
        assert {c.info.backend_pid & 0xFF for c in conns} == {0, 1}
        errors: list[BaseException] = []

        def write(i: int) -> None:
            try:
                for k in range(50):
                    conns[i].execute("UPSERT INTO kv (k, v) VALUES (%s, %s)", (i * 1000 + k, f"w{i}"))
                with conns[i].transaction():
                    for k in range(50, 60):
                        conns[i].execute("INSERT INTO kv (k, v) VALUES (%s, %s)", (i * 1000 + k, "t"))
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert not errors
        for c in conns:  # every worker sees every commit
            assert c.execute("SELECT count(*) FROM kv WHERE k < 4000").fetchone() == (240,)
    finally:
        for c in conns:
            c.close()


def test_a_worker_that_dies_is_replaced(server: RunningServer) -> None:
    before = _workers()
    assert len(before) == 2
    os.kill(before[0], signal.SIGKILL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        now = _workers()
        if len(now) == 2 and before[0] not in now:
            break
        time.sleep(0.1)
    assert len(_workers()) == 2 and before[0] not in _workers()
    for _ in range(4):  # both workers serve
        with psycopg.connect(server.dsn(), autocommit=True) as c:
            assert c.execute("SELECT count(*) FROM kv").fetchone() is not None


def test_the_shared_write_gate_excludes_across_open_files(tmp_path: Path) -> None:
    # flock is per open file: two gates of one file behave as two processes' gates
    one, two = WriteGate(str(tmp_path / "x.db"), True), WriteGate(str(tmp_path / "x.db"), True)
    assert one.acquire()
    assert not two.acquire(blocking=False)
    got = threading.Event()

    def wait() -> None:
        two.acquire()
        got.set()
        two.release()

    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.2)
    assert not got.is_set()
    one.release()
    assert got.wait(5)
    th.join(5)


def test_the_durability_board_holds_replies_for_other_processes_commits(tmp_path: Path) -> None:
    board = mmap.mmap(-1, 2 * BOARD_SLOT)
    (tmp_path / "x.db-wal").write_bytes(b"wal")
    a, b = WalSync(str(tmp_path / "x.db")), WalSync(str(tmp_path / "x.db"))
    a.share(board, 0, 2)
    b.share(board, 1, 2)
    assert a.pending() == 0 and b.pending() == 0
    a.announce()  # a commit of a is writing its frames: b's replies wait for a sync
    held = b.pending()
    assert held > 0
    b.wait(held)
    ticket = a.ticket()  # committed, not yet synced by a
    assert a.pending() == ticket
    held = b.pending()
    assert held > 0
    b.wait(held)  # b's sync makes a's frames durable too, but a has not seen it: b still waits
    a.wait(ticket)
    assert a.pending() == 0 and b.pending() == 0
    a.announce()
    a.withdraw()  # the commit failed
    assert b.pending() == 0


def test_each_worker_runs_on_a_core_of_its_own(server: RunningServer) -> None:
    """``CHANGEFEED_PG_PIN=auto`` (the default): with no more workers than cores, each worker is
    pinned to a core of its own; otherwise they are left to the scheduler."""
    expected = cluster.worker_cpus(2)
    want = sorted((cpu,) for cpu in expected)
    deadline = time.monotonic() + 60  # a worker started by an earlier test pins itself once set up
    while True:
        got = sorted(
            tuple(sorted(os.sched_getaffinity(int(tid))))
            for pid in _workers()
            for tid in os.listdir(f"/proc/{pid}/task")[:1]
        )
        threads = {
            tuple(sorted(os.sched_getaffinity(int(tid))))
            for pid in _workers()
            for tid in os.listdir(f"/proc/{pid}/task")
        }
        if got == want or not expected or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if expected:
        assert got == sorted((cpu,) for cpu in expected)
        assert threads == {(cpu,) for cpu in expected}  # every thread of each worker
        assert len(set(expected)) == 2
    else:
        assert got == [tuple(sorted(os.sched_getaffinity(0)))] * 2


def test_pin_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    monkeypatch.setenv(cluster.PIN_ENV, "on")
    assert cluster.worker_cpus(3) == [cpus[i % len(cpus)] for i in range(3)]
    assert cluster.worker_cpus(1) == []  # one worker: nothing to keep apart
    monkeypatch.setenv(cluster.PIN_ENV, "off")
    assert cluster.worker_cpus(2) == []
    monkeypatch.setenv(cluster.PIN_ENV, "auto")
    assert cluster.worker_cpus(len(cpus) + 1) == []
    monkeypatch.setenv(cluster.PIN_ENV, "sometimes")
    with pytest.raises(changefeed.exceptions.InvalidOption, match="expected auto, on or off"):
        cluster.worker_cpus(2)
