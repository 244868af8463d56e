"""``ordering = 'total'`` (this product's extension): a multi-table job's changes in one commit
order, each transaction contiguous and marked, a gapless sequence; exactly once into the embedded
topic across ``kill -9`` of ``changefeed run`` (two kills here, five in the soak)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import changefeed
from changefeed.exceptions import InvalidOption
from changefeed.pipeline import total_order
from changefeed.testing import validators as v

SRC = str(Path(__file__).resolve().parents[1] / "src")
TABLES = ("a", "b", "c")


def _setup(db: Path, rows: int = 30) -> tuple[changefeed.Connection, int, str]:
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE a (id INT PRIMARY KEY, v STRING)")
    conn.execute("CREATE TABLE b (id INT PRIMARY KEY, n INT, note STRING)")
    conn.execute("CREATE TABLE c (k STRING PRIMARY KEY, x FLOAT)")
    for i in range(rows):
        conn.execute("INSERT INTO a (id, v) VALUES (?, ?)", (i, f"a{i}"))
        conn.execute("INSERT INTO c (k, x) VALUES (?, ?)", (f"k{i}", i / 2))
    (job_id,) = conn.execute(
        "CREATE CHANGEFEED FOR TABLE a, b, c INTO 'topics://?topic_name=ordered' WITH ordering = 'total', diff"
    ).rows[0]
    return conn, job_id, "ordered"


def _workload(
    conn: changefeed.Connection, rng: random.Random, txns: int, stop: threading.Event | None = None
) -> int:
    done = 0
    for _ in range(txns):
        if stop is not None and stop.is_set():
            break
        with conn.transaction():
            for _ in range(rng.randint(1, 6)):
                t = rng.choice(TABLES)
                k = rng.randrange(40)
                if rng.random() < 0.2:
                    key = f"'k{k}'" if t == "c" else str(k)
                    conn.execute(f"DELETE FROM {t} WHERE {'k' if t == 'c' else 'id'} = {key}")
                elif t == "a":
                    conn.execute("UPSERT INTO a (id, v) VALUES (?, ?)", (k, f"v{rng.randrange(10**6)}"))
                elif t == "b":
                    conn.execute(
                        "UPSERT INTO b (id, n, note) VALUES (?, ?, ?)", (k, rng.randrange(100), None)
                    )
                else:
                    conn.execute("UPSERT INTO c (k, x) VALUES (?, ?)", (f"k{k}", rng.random()))
        done += 1
    return done


def _expected(db: Path, job_id: int) -> list[list[tuple[str, str, str]]]:
    """Every transaction after the job's start (the scan first), as (table, key, hlc) lists, in
    commit order, read from the tables' change streams."""
    from changefeed.engine.changes import read_changes
    from changefeed.feeds import jobs as J
    from changefeed.formats import crdb_values as V

    conn = changefeed.connect(db)
    try:
        job = J.load_job(conn.db.conn, job_id)
        conn.db.refresh_catalog()
        by_ts: dict[tuple[int, int], list[tuple[int, int, str, str]]] = defaultdict(list)
        for ti, name in enumerate(TABLES):
            t = conn.db.find_table(name)
            assert t is not None
            b = read_changes(conn.db.conn, t, 0, 1 << 62)
            keys = [V.python_values(b.column(c.db), c.type) for c in t.key]
            for r, (ts, lg, seq) in enumerate(
                zip(
                    b.column("ts").to_pylist(),
                    b.column("lg").to_pylist(),
                    b.column("seq").to_pylist(),
                    strict=True,
                )
            ):
                if (ts, lg) > (job.start.wall, job.start.logical):
                    key = "[" + ", ".join(k[r] for k in keys) + "]"
                    by_ts[(ts, lg)].append((ti, seq, name, key))
        return [
            [(name, key, f"{ts}.{lg:010d}") for _ti, _seq, name, key in sorted(rows)]
            for (ts, lg), rows in sorted(by_ts.items())
        ]
    finally:
        conn.close()


def _check(db: Path, topic: str, job_id: int, scan_rows: int) -> list[dict[str, Any]]:
    records = [json.loads(val) for _p, _o, _k, val, _ts in v.read_topic(db, topic)]
    data = [r for r in records if "seq" in r]
    assert [r["seq"] for r in data] == list(range(1, len(data) + 1)), "the sequence has a gap or repeats"
    txns: list[list[dict[str, Any]]] = []
    for r in data:
        if r["txn_index"] == 0:
            txns.append([])
        assert txns and r["txn"] == len(txns) and r["txn_index"] == len(txns[-1])
        txns[-1].append(r)
    assert all(t[-1]["txn_end"] and not any(x["txn_end"] for x in t[:-1]) for t in txns)
    assert all(len({x["hlc"] for x in t}) == 1 for t in txns)  # one commit time per transaction
    hlcs = [t[0]["hlc"] for t in txns]
    assert hlcs == sorted(hlcs, key=lambda h: tuple(map(int, h.split(".")))) and len(set(hlcs)) == len(hlcs)
    scan, changes = (txns[0], txns[1:]) if scan_rows else ([], txns)
    assert len(scan) == scan_rows
    assert [[(x["table"], json.dumps(x["key"]), x["hlc"]) for x in t] for t in changes] == _expected(
        db, job_id
    )
    return data


def test_total_order_options(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE a (id INT PRIMARY KEY)")
    with pytest.raises(InvalidOption, match="ordering = 'total' needs a changefeed job"):
        conn.stream("CREATE CHANGEFEED FOR a WITH ordering = 'total'")
    with pytest.raises(InvalidOption, match="only usable with format=json"):
        conn.execute("CREATE CHANGEFEED FOR a INTO 'nodelocal://1/x' WITH ordering = 'total', format = csv")
    with pytest.raises(InvalidOption, match="unknown ordering: nope"):
        conn.execute("CREATE CHANGEFEED FOR a INTO 'topics://' WITH ordering = 'nope'")
    conn.close()


def test_total_order_random_workload(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn, job_id, topic = _setup(db)
    rng = random.Random(3)
    for _ in range(4):  # deliveries interleaved with writes
        _workload(conn, rng, 60)
        total_order.deliver_all(db)
    _workload(conn, rng, 30)
    conn.close()
    total_order.deliver_all(db)
    data = _check(db, topic, job_id, scan_rows=60)
    assert data[60]["message"]["before"] is not None or data[60]["message"]["after"] is not None
    # delivered again: nothing new
    assert total_order.deliver_all(db) == 0


def _runner(db: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": SRC, "CHANGEFEED_TOTAL_ORDER_ROWS": "200"}
    return subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "run", "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _kill_cycles(tmp_path: Path, kills: int, seed: int) -> None:
    db = tmp_path / "db"
    conn, job_id, topic = _setup(db, rows=3000)  # a scan of 6,000 rows: some kills land in it
    rng = random.Random(seed)
    stop = threading.Event()
    writer_conn = changefeed.connect(db)
    writer = threading.Thread(target=_workload, args=(writer_conn, random.Random(seed + 1), 10**6, stop))
    writer.start()
    kills_mid_delivery = 0
    try:
        for _ in range(kills):
            before = len(v.read_topic(db, topic))
            proc = _runner(db)
            deadline = time.monotonic() + 60
            while len(v.read_topic(db, topic)) == before and time.monotonic() < deadline:
                time.sleep(0.05)  # until this run delivers: the kill then lands mid-stream
            time.sleep(rng.uniform(0.0, 1.0))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills_mid_delivery += len(v.read_topic(db, topic)) > before
    finally:
        stop.set()
        writer.join()
        writer_conn.close()
    conn.close()
    assert kills_mid_delivery == kills
    total_order.deliver_all(db)  # what the killed runs left
    _check(db, topic, job_id, scan_rows=6000)


def test_total_order_exactly_once_across_kill_9(tmp_path: Path) -> None:
    _kill_cycles(tmp_path, kills=2, seed=11)


@pytest.mark.soak
def test_total_order_exactly_once_across_five_kill_9(tmp_path: Path) -> None:
    _kill_cycles(tmp_path, kills=5, seed=23)
