"""Crash consistency of the PostgreSQL endpoint's commits: power loss under a running server
(issue 22), with commit groups (``server.pg.write_group``) and explicit transactions at once.

``changefeed serve --pg`` runs with two worker processes under the crashfs shim
(``tests/crashfs``): the listening process, the workers and their durability sync processes
all append every write and sync they make in the database directory to one log. Eight client
threads of this test write through it with psycopg: six send single-row autocommit ``INSERT``s
(which the workers commit in groups), two send explicit transactions of several statements.
A client counts a commit as acknowledged once its reply arrived. The test kills the server's
processes with SIGKILL at a random moment, takes the log as it is at that moment, and rebuilds
what the disk would hold had the power failed then. On the rebuilt database: every acknowledged
commit is present, every transaction present is whole, the change stream replays to the
table, and a YDB changefeed delivered over it passes the exactly-once validators.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

import changefeed
from changefeed.server.pg import cluster
from tests import crashfs
from tests.node_process import free_port

SINGLE, BLOCKS = 6, 2
#: Transaction ids of the single-row clients are below this; the blocks' are above.
SINGLE_BELOW = 100_000_000


def _serve(db: Path, log: Path, sync_mode: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    env = {
        **os.environ,
        cluster.WORKERS_ENV: "2",
        "CHANGEFEED_SYNCHRONOUS": sync_mode,
        **crashfs.environment(db, log),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--pg", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: one kill takes the workers too
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            psycopg.connect(
                f"host=127.0.0.1 port={port} user=root dbname=defaultdb", connect_timeout=2
            ).close()
            return proc, port
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.1)


def _family(pid: int) -> list[int]:
    """``pid`` and every process below it (the sync processes are session leaders of their
    own, out of the server's process group)."""
    children: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def _run_and_cut(tmp: Path, seconds: float, sync_mode: str = "FULL") -> tuple[Path, set[int]]:
    db = tmp / "db"  # created by the server: everything in it is in the log
    log = tmp / "crashfs.log"
    proc, port = _serve(db, log, sync_mode)
    dsn = f"host=127.0.0.1 port={port} user=root dbname=defaultdb"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        c.execute("CREATE TABLE ledger (id INT PRIMARY KEY, w INT)")
        c.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
        for w in range(BLOCKS):
            c.execute("UPSERT INTO t (k, v) VALUES (%s, %s)", (-1 - w, -1))
    acked: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()

    def single(w: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            i = 0
            while not stop.is_set():
                tid = (1 + w) * 1_000_000 + i
                try:
                    c.execute("INSERT INTO t (k, v) VALUES (%s, %s)", (tid * 3, tid))
                except psycopg.Error:
                    return  # the server is gone
                with lock:
                    acked.add(tid)
                i += 1

    def blocks(w: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as c:
            i = 0
            while not stop.is_set():
                tid = SINGLE_BELOW + w * 1_000_000 + i
                try:
                    with c.transaction():
                        c.execute("INSERT INTO ledger (id, w) VALUES (%s, %s)", (tid, w))
                        for j in range(3):
                            c.execute("INSERT INTO t (k, v) VALUES (%s, %s)", (tid * 3 + j, tid))
                        c.execute("UPDATE t SET v = %s WHERE k = %s", (tid, -1 - w))
                except psycopg.Error:
                    return
                with lock:
                    acked.add(tid)
                i += 1

    threads = [threading.Thread(target=single, args=(w,), daemon=True) for w in range(SINGLE)]
    threads += [threading.Thread(target=blocks, args=(w,), daemon=True) for w in range(BLOCKS)]
    for th in threads:
        th.start()
    time.sleep(seconds)
    family = _family(proc.pid)  # before the kill: orphans are adopted by init
    os.killpg(proc.pid, signal.SIGKILL)  # the power fails now
    for pid in family:  # and the sync processes, in sessions of their own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    cut = tmp / "crashfs.cut"
    shutil.copyfile(log, cut)  # the log as the disk saw it when the power failed
    with lock:
        acked_at_cut = set(acked)
    stop.set()
    proc.wait()
    for th in threads:
        th.join(10)
    return cut, acked_at_cut


@pytest.mark.parametrize("seed", [1, 2])
def test_power_loss_under_the_pg_endpoint_keeps_every_acknowledged_commit(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    log, acked = _run_and_cut(tmp_path, rng.uniform(1.0, 2.5))
    assert len(acked) > 50, "too little was acknowledged before the cut"
    recovered = tmp_path / "recovered"
    stats = crashfs.power_loss(log, tmp_path / "db", recovered, keep=rng.choice([0.0, 0.5, 0.9]), seed=seed)
    assert stats["ops"] > 0
    crashfs.check_ledger_workload(recovered, acked, BLOCKS, single_below=SINGLE_BELOW)


@pytest.mark.soak
def test_power_loss_under_the_pg_endpoint_soak(tmp_path: Path) -> None:
    for seed in range(100, 110):
        rng = random.Random(seed)
        log, acked = _run_and_cut(tmp_path / str(seed), rng.uniform(0.5, 3.0))
        recovered = tmp_path / str(seed) / "recovered"
        crashfs.power_loss(log, tmp_path / str(seed) / "db", recovered, keep=rng.random(), seed=seed)
        crashfs.check_ledger_workload(recovered, acked, BLOCKS, single_below=SINGLE_BELOW)


def test_control_normal_loses_acknowledged_commits(tmp_path: Path) -> None:
    """The check can see a loss: with ``NORMAL`` (no sync before the reply) and nothing unsynced
    surviving the power loss, acknowledged commits are gone."""
    log, acked = _run_and_cut(tmp_path, 1.5, "NORMAL")
    recovered = tmp_path / "recovered"
    crashfs.power_loss(log, tmp_path / "db", recovered, keep=0.0)
    present: set[int] = set()
    if (recovered / "changefeed.db").exists():
        with changefeed.connect(recovered) as conn:
            if conn.db.find_table("t") is not None:
                present |= {v for k, v in conn.execute("SELECT k, v FROM t").rows if k >= 0}
            if conn.db.find_table("ledger") is not None:
                present |= {r[0] for r in conn.execute("SELECT id FROM ledger").rows}
    assert acked - present, "synchronous=NORMAL lost nothing: the cut did not model a power loss"
