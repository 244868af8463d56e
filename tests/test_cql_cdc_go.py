"""ScyllaDB's own CDC library, scylla-cdc-go (built from tests/cdc_go by `make setup`), reads the
CDC log through the CQL endpoint: generations, streams, time windows, changes in order per stream,
exactly as ``SELECT * FROM ks.w_scylla_cdc_log`` lists them, including changes written while it
runs."""

from __future__ import annotations

import os
import random
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile, Session
from cassandra.policies import DCAwareRoundRobinPolicy, TokenAwarePolicy

import changefeed
from tests.cql_server import RunningServer, cdc_go_path, start_server

#: Statements of the random workload, before and while the consumer runs (`make soak`: more).
OPS = int(os.environ.get("CHANGEFEED_CQL_CDC_OPS", "300"))
SEED = int(os.environ.get("CHANGEFEED_CQL_CDC_SEED", "18"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    srv = start_server(tmp_path_factory.mktemp("cqlgo") / "db")
    yield srv
    srv.stop()


def _statement(rng: random.Random, table: str) -> str:
    pk, ck = rng.randrange(8), rng.randrange(8)
    v = rng.choice(["null", str(rng.randrange(1000))])
    t = rng.choice(["null", f"'t{rng.randrange(100)}'"])
    kind = rng.choices(
        ["insert", "update", "static", "row", "range", "partition", "column"], [5, 4, 2, 2, 1, 1, 1]
    )[0]
    if kind == "insert":
        return f"INSERT INTO ks.{table} (pk, ck, v, t) VALUES ({pk}, {ck}, {v}, {t})"
    if kind == "update":
        return f"UPDATE ks.{table} SET v = {v}, t = {t} WHERE pk = {pk} AND ck = {ck}"
    if kind == "static":
        return f"UPDATE ks.{table} SET s = {rng.randrange(50)} WHERE pk = {pk}"
    if kind == "row":
        return f"DELETE FROM ks.{table} WHERE pk = {pk} AND ck = {ck}"
    if kind == "range":
        return f"DELETE FROM ks.{table} WHERE pk = {pk} AND ck > {ck} AND ck <= {ck + rng.randrange(1, 4)}"
    if kind == "partition":
        return f"DELETE FROM ks.{table} WHERE pk = {pk}"
    return f"DELETE t FROM ks.{table} WHERE pk = {pk} AND ck = {ck}"


def _workload(s: Session, rng: random.Random, table: str, n: int) -> None:
    for _ in range(n):
        if rng.random() < 0.15:
            body = "; ".join(_statement(rng, table) for _ in range(rng.randint(2, 4)))
            kind = rng.choice(["", "UNLOGGED "])
            s.execute(f"BEGIN {kind}BATCH {body}; APPLY BATCH")
        else:
            s.execute(_statement(rng, table))


def _jsonable(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.hex()
    return v


def _log(srv: RunningServer, table: str) -> list[dict[str, Any]]:
    conn = changefeed.connect(srv.db, dialect="cql")
    try:
        res = conn.execute(f"SELECT * FROM ks.{table}_scylla_cdc_log")
    finally:
        conn.close()
    out = []
    for row in res.rows:
        r = dict(zip(res.columns, row, strict=True))
        cols = {
            k: _jsonable(v) for k, v in r.items() if not k.startswith("cdc$") or k.startswith("cdc$deleted_")
        }
        out.append(
            {
                "stream": r["cdc$stream_id"].hex(),
                "time": str(r["cdc$time"]),
                "seq": r["cdc$batch_seq_no"],
                "end": bool(r["cdc$end_of_batch"]),
                "op": r["cdc$operation"],
                "ttl": r["cdc$ttl"] or 0,
                "cols": cols,
            }
        )
    return out


def _by_stream(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["stream"]].append(r)
    return dict(out)


def test_scylla_cdc_go_reads_the_log_in_order(server: RunningServer, tmp_path: Path) -> None:
    _read_with_cdc_go(server, tmp_path, "w", OPS, SEED)


@pytest.mark.soak
def test_scylla_cdc_go_reads_a_long_workload(server: RunningServer, tmp_path: Path) -> None:
    _read_with_cdc_go(server, tmp_path, "w2", 6000, SEED + 1)


def _read_with_cdc_go(server: RunningServer, tmp_path: Path, table: str, ops: int, seed: int) -> None:
    rng = random.Random(seed)
    profile = ExecutionProfile(load_balancing_policy=TokenAwarePolicy(DCAwareRoundRobinPolicy()))
    c = Cluster([server.host], port=server.port, execution_profiles={EXEC_PROFILE_DEFAULT: profile})
    s = c.connect()
    try:
        s.execute(
            f"CREATE TABLE ks.{table} (pk int, ck int, s int static, v int, t text, PRIMARY KEY (pk, ck))"
            " WITH cdc = {'enabled': true, 'preimage': true, 'postimage': true}"
        )
        _workload(s, rng, table, ops // 2)
        log_file = tmp_path / "cdc-go.log"  # a file: a full stderr pipe would stall the reader
        proc = subprocess.Popen(
            [cdc_go_path(), "-port", str(server.port), "-table", f"ks.{table}", "-timeout", "300s"],
            stdout=subprocess.PIPE,
            stderr=log_file.open("wb"),
        )
        got: list[dict[str, Any]] = []

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                got.append(orjson.loads(line))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        _workload(s, rng, table, ops - ops // 2)  # while the consumer runs
        expected = _log(server, table)
        deadline = time.time() + 90
        while len(got) < len(expected) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        time.sleep(0.3)  # nothing more may come
        proc.terminate()
        proc.wait(30)
        reader.join(10)
        err = log_file.read_text()
    finally:
        c.shutdown()
    assert len(got) == len(expected), "\n".join(x for x in err.splitlines() if "keep up" not in x)[-3000:]
    want = _by_stream(expected)
    have = _by_stream(got)
    assert set(have) == set(want)
    for stream, rows in want.items():
        assert have[stream] == rows, stream
    ops = {r["op"] for r in expected}
    assert {0, 1, 2, 3, 4, 9} <= ops and ({5, 6} & ops) and ({7, 8} & ops)
