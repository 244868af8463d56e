"""The Spark pipeline: journal source, changefeed job (exactly-once), resolved timestamps, initial
scan, ``changefeed run`` / ``changefeed feeds``."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.topics import TopicStore

pytestmark = pytest.mark.spark

try:
    from changefeed.formats import debezium, ydb_json  # noqa: F401

    REAL_ENCODER = True
except ImportError:  # the formats are written in parallel: fall back to a small Spark encoder
    REAL_ENCODER = False


def _install_fallback_encoder() -> None:
    import types

    from changefeed.formats import base

    if REAL_ENCODER:
        return

    class FallbackYdbJson(base.Encoder):
        name = "ydb-json"

        def encode_spark(self, df: Any, table: Any, feed: Any) -> Any:
            from pyspark.sql import functions as F

            keys = F.array(*[F.col(c.db).cast("long") for c in table.key])
            vals = [c for c in table.stored if not c.is_key]
            value = F.to_json(
                F.struct(
                    keys.alias("key"),
                    F.when(F.col("op") != 11, F.struct()).alias("update"),
                    F.when(F.col("op") == 11, F.struct()).alias("erase"),
                    F.when(F.col("op") != 11, F.struct(*[F.col(c.db).alias(c.name) for c in vals])).alias(
                        "newImage"
                    ),
                    F.when(
                        F.col("ox") & (F.col("op") != 12),
                        F.struct(*[F.col(f"o{c.id}").alias(c.name) for c in vals]),
                    ).alias("oldImage"),
                    F.array((F.col("ts") / 1_000_000).cast("long"), F.col("tx")).alias("ts"),
                )
            )
            kb = F.to_json(keys).cast("binary")
            return df.select(
                F.pmod(F.xxhash64(kb), F.lit(feed.partitions)).cast("int").alias("partition"),
                kb.alias("key"),
                value.cast("binary").alias("value"),
                F.col("ts"),
            )

        def encode_python(self, batch: Any, table: Any, feed: Any) -> list[base.Record]:
            raise NotImplementedError

        def resolved(self, ts: Any, tx: int, feed: Any) -> bytes:
            return orjson.dumps({"resolved": [ts.millis, tx]})

    for name in ("ydb_json", "debezium"):
        mod = types.ModuleType(f"changefeed.formats.{name}")
        sys.modules[f"changefeed.formats.{name}"] = mod
    base.REGISTRY["ydb-json"] = FallbackYdbJson


_install_fallback_encoder()

FEED = "ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT='JSON', MODE='NEW_AND_OLD_IMAGES', VIRTUAL_TIMESTAMPS=TRUE{extra})"


def make_db(path: Path, extra: str = "", rows_before: int = 0) -> Any:
    conn = changefeed.connect(str(path))
    conn.execute("CREATE TABLE t (id Uint64, v Utf8, n Int64, PRIMARY KEY (id))")
    if rows_before:
        upsert(conn, range(rows_before), "init")
    conn.execute(FEED.format(extra=extra))
    return conn


def upsert(conn: Any, ids: Any, tag: str) -> None:
    vals = ", ".join(f"({i}, '{tag}{i}', {i})" for i in ids)
    conn.execute(f"UPSERT INTO t (id, v, n) VALUES {vals}")


def journal(db: Path) -> list[tuple[int, int, int, int]]:
    """(seq, tx, key, op) of every change row."""
    c = sqlite3.connect(db / "changefeed.db")
    try:
        rows = c.execute("SELECT seq, tx, c0, op FROM x1 ORDER BY seq").fetchall()
    finally:
        c.close()
    return [(s, tx, k + (1 << 63), op) for s, tx, k, op in rows]  # Uint64 storage is biased


def topic_records(db: Path, topic: str = "t/f") -> dict[int, list[dict[str, Any]]]:
    store = TopicStore(db)
    out: dict[int, list[dict[str, Any]]] = {}
    for p in range(store.topic(topic).partitions):
        recs = store.read(topic, p, 0, 10_000_000)
        out[p] = [orjson.loads(r.value) | {"_key": r.key} for r in recs]
    return out


def data_by_key(db: Path) -> dict[int, list[dict[str, Any]]]:
    per: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for recs in topic_records(db).values():
        for v in recs:
            if "resolved" in v:
                continue
            per[int(v["key"][0])].append(v)
    return per


def expected_by_key(db: Path, after_seq: int = 0) -> dict[int, list[int]]:
    per: dict[int, list[int]] = defaultdict(list)
    for _, tx, k, _op in journal(db):
        per[k].append(tx)
    return per


def check_exactly_once(db: Path, want: dict[int, list[int]] | None = None) -> int:
    got = data_by_key(db)
    want = expected_by_key(db) if want is None else want
    assert set(got) == set(want)
    for k, txs in want.items():
        assert [v["ts"][1] for v in got[k]] == txs, k
    return sum(len(v) for v in want.values())


# ----------------------------------------------------------------------------- journal source
def test_journal_source_batch_and_stream(spark: Any, tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = make_db(db)
    sizes = [3, 7, 1, 12, 5, 5, 2, 9]
    base = 0
    for n in sizes:
        with conn.transaction():
            upsert(conn, range(base, base + n), "a")
        base += n
    conn.close()
    df = spark.read.format("changefeed-journal").option("path", str(db)).option("table_id", "1").load()
    got = sorted(r["seq"] for r in df.select("seq").collect())
    assert got == [s for s, *_ in journal(db)]
    sq = sqlite3.connect(db / "changefeed.db")
    from changefeed.pipeline.sources.journal import load_table

    want = read_changes(sq, load_table(db, 1), 0, 10**9)
    assert df.orderBy("seq").toArrow().to_pylist() == want.to_pylist()

    batches: list[list[tuple[int, int]]] = []

    def collect(bdf: Any, bid: int) -> None:
        batches.append([(r["seq"], r["tx"]) for r in bdf.select("seq", "tx").collect()])

    q = (
        spark.readStream.format("changefeed-journal")
        .option("path", str(db))
        .option("table_id", "1")
        .option("maxRowsPerBatch", "5")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    batches = [b for b in batches if b]
    flat = sorted(s for b in batches for s, _ in b)
    assert flat == [s for s, *_ in journal(db)]
    seen: dict[int, int] = {}
    for i, b in enumerate(batches):
        for _, tx in b:
            assert seen.setdefault(tx, i) == i, "a transaction was split across micro-batches"
    assert len(batches) >= 5


# ----------------------------------------------------------------------------- end to end
def test_end_to_end_exactly_once(spark: Any, tmp_path: Path) -> None:
    from changefeed.pipeline.runner import run_until_idle

    db = tmp_path / "db"
    conn = make_db(db)
    for i in range(5):
        with conn.transaction():
            upsert(conn, range(i * 10, i * 10 + 30), f"w{i}")
    conn.execute("DELETE FROM t WHERE id = 3")
    run_until_idle(db, spark=spark, max_rows=40, gc=False)
    n1 = check_exactly_once(db)
    assert n1 == len(journal(db))
    erase = [v for v in data_by_key(db)[3] if "erase" in v]
    assert len(erase) == 1 and erase[0]["oldImage"]["v"] == "w0" + "3"
    # again: nothing new, nothing duplicated
    run_until_idle(db, spark=spark, gc=False)
    assert check_exactly_once(db) == n1
    # more writes: only the new ones
    upsert(conn, range(100, 110), "late")
    conn.execute("UPDATE t SET n = 7 WHERE id = 5")
    run_until_idle(db, spark=spark, gc=False)
    assert check_exactly_once(db) == n1 + 11
    v5 = data_by_key(db)[5][-1]
    assert v5["newImage"]["n"] == 7 and v5["oldImage"]["n"] == 5
    conn.close()

    from click.testing import CliRunner

    from changefeed.cli.main import cli

    res = CliRunner().invoke(cli, ["feeds", "--db", str(db), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output.strip().splitlines()[0])
    assert info["topic"] == "t/f" and info["state"] == "running" and info["lag_s"] == 0
    assert info["delivered_seq"] == journal(db)[-1][0]
    assert info["high_water_crdb"].endswith(".0000000000") or "." in info["high_water_crdb"]
    res = CliRunner().invoke(cli, ["feeds", "--db", str(db)])
    assert res.exit_code == 0 and "t/f" in res.output and "NEW_AND_OLD_IMAGES" in res.output
    res = CliRunner().invoke(cli, ["feeds", "--db", str(tmp_path / "missing")])
    assert res.exit_code == 1 and "ERROR:" in res.output


# ----------------------------------------------------------------------------- resolved timestamps
def test_a_resolved_record_follows_what_it_covers_and_precedes_what_it_does_not() -> None:
    import pyarrow as pa

    from changefeed.pipeline.delivery.append import RECORDS, with_resolved

    def keys(ts: list[int], resolved: int) -> list[bytes | None]:
        t = pa.table({"key": [b"%d" % x for x in ts], "value": [b""] * len(ts), "ts": ts}, schema=RECORDS)
        return with_resolved(t, (b"r", resolved)).column("key").to_pylist()

    assert keys([1, 2, 4, 5], 3) == [b"1", b"2", None, b"4", b"5"]
    assert keys([1, 3, 3], 3) == [b"1", b"3", b"3", None]  # at the resolved time: covered
    assert keys([5, 6], 3) == [None, b"5", b"6"]
    assert keys([], 3) == [None]


def test_resolved_in_every_partition(spark: Any, tmp_path: Path) -> None:
    from changefeed.pipeline.runner import run_until_idle

    db = tmp_path / "db"
    conn = make_db(db, extra=", RESOLVED_TIMESTAMPS=Interval('PT1S'), TOPIC_MIN_ACTIVE_PARTITIONS=3")
    upsert(conn, range(50), "a")
    run_until_idle(db, spark=spark, gc=False)
    recs = topic_records(db)
    assert len(recs) == 3
    last_data_ts = max(s[1] for s in journal_ts(db))
    for p, vals in recs.items():
        assert any("resolved" in v for v in vals), p
        # YDB's partition order: every change below a barrier comes before it, and a change at or
        # after its step (committed after the barrier's interval began: barriers round down)
        # comes after it, though the same micro-batch delivered both
        for i, bar in enumerate(vals):
            if "resolved" in bar:
                step = bar["resolved"][0]
                assert all(v["ts"][0] <= step for v in vals[:i] if "resolved" not in v), p
                assert all(v["ts"][0] >= step for v in vals[i + 1 :] if "resolved" not in v), p
    assert check_exactly_once(db) == 50
    # a barrier falls on a whole interval (YDB's [step, 0]): the last one is the last whole second
    # closed, at most one interval before the newest change
    barrier = [v for v in recs[0] if "resolved" in v][-1]["resolved"][0]
    assert barrier % 1000 == 0 and last_data_ts // 1_000_000 - 1000 < barrier
    # the resolved record is emitted once per close, not repeated
    run_until_idle(db, spark=spark, gc=False)
    recs2 = topic_records(db)
    for p in recs:
        assert sum("resolved" in v for v in recs2[p]) == 2
    conn.close()


# ----------------------------------------------------------------------------- schema changes
def test_ydb_feed_messages_keep_the_schema_they_were_committed_in(spark: Any, tmp_path: Path) -> None:
    """ADD COLUMN then DROP COLUMN between two runs: each change is encoded in the schema of its
    commit (the dropped column stays in the messages written before the drop)."""
    from changefeed.pipeline.runner import run_until_idle

    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute(
        "CREATE TABLE t (k Uint64, v Utf8, PRIMARY KEY (k));"
        " ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES');"
    )
    conn.execute("UPSERT INTO t (k, v) VALUES (1, 'a')")
    run_until_idle(db, spark=spark, gc=False)
    for sql in (
        "ALTER TABLE t ADD COLUMN w Int64",
        "UPSERT INTO t (k, v, w) VALUES (2, 'b', 5)",
        "UPSERT INTO t (k, v, w) VALUES (1, 'c', 6)",
        "ALTER TABLE t DROP COLUMN v",
        "UPSERT INTO t (k, w) VALUES (3, 7)",
        "UPSERT INTO t (k, w) VALUES (1, 8)",
    ):
        conn.execute(sql)
    run_until_idle(db, spark=spark, gc=False)
    store = TopicStore(db)
    try:
        values = [orjson.loads(r.value) for r in store.read("t/f", 0, 0, 100)]
    finally:
        store.close()
    assert [v["newImage"] for v in values] == [
        {"v": "a"},
        {"v": "b", "w": 5},
        {"v": "c", "w": 6},
        {"w": 7},
        {"w": 8},
    ]
    assert values[2]["oldImage"] == {"v": "a", "w": None} and values[4]["oldImage"] == {"w": 6}
    conn.close()


def journal_ts(db: Path) -> list[tuple[int, int]]:
    c = sqlite3.connect(db / "changefeed.db")
    try:
        return c.execute("SELECT seq, ts FROM x1").fetchall()
    finally:
        c.close()


# ----------------------------------------------------------------------------- initial scan
def test_initial_scan_precedes_updates(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from changefeed.pipeline.runner import run_until_idle
    from changefeed.pipeline.snapshot import chunks

    monkeypatch.setattr(chunks, "CHUNK_ROWS", 40)
    db = tmp_path / "db"
    conn = make_db(db, extra=", INITIAL_SCAN=TRUE", rows_before=300)
    # changes after the snapshot, before and during the scan
    upsert(conn, range(0, 20), "upd")
    conn.execute("DELETE FROM t WHERE id >= 290")
    stop = threading.Event()

    def writer() -> None:
        c = changefeed.connect(str(db))
        i = 0
        while not stop.is_set():
            upsert(c, [i % 300, 400 + i], "bg")
            i += 1
            time.sleep(0.01)
        c.close()

    th = threading.Thread(target=writer)
    th.start()
    try:
        from changefeed.pipeline.snapshot.scan import run_initial_scan

        spec = _feed(db)
        run_initial_scan(spark, db, spec, chunk_rows=40)
    finally:
        stop.set()
        th.join()
    run_until_idle(db, spark=spark, gc=False)
    per = data_by_key(db)
    created_tx = spec.created_tx
    for k in range(300):
        recs = per[k]
        assert recs[0]["ts"][1] == created_tx, (k, recs[0])
        assert recs[0]["newImage"]["v"] == f"init{k}"
        assert all(r["ts"][1] != created_tx for r in recs[1:])
    # keys created after the snapshot have no snapshot record
    for k, recs in per.items():
        if k >= 400:
            assert all(r["ts"][1] != created_tx for r in recs)
    # updates after the snapshot are delivered exactly once, in order
    want = expected_by_key(db)
    for k, txs in want.items():
        assert [r["ts"][1] for r in per[k] if r["ts"][1] != created_tx] == txs
    c = sqlite3.connect(db / "changefeed.db")
    assert c.execute("SELECT state FROM _feeds").fetchone()[0] == "running"
    conn.close()


def _feed(db: Path) -> Any:
    from changefeed.pipeline.delivery.progress import active_feeds

    return active_feeds(db)[0].spec


# ----------------------------------------------------------------------------- CLI and crashes
ROOT = str(Path(__file__).resolve().parent.parent)


def _cli(*args: str) -> list[str]:
    if REAL_ENCODER:
        return [sys.executable, "-m", "changefeed.cli.main", *args]
    # without the real encoders, the subprocess installs this module's fallback first
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); import tests.test_pipeline; "
        f"from changefeed.cli.main import main; sys.argv = ['changefeed', *{list(args)!r}]; main()"
    )
    return [sys.executable, "-c", code]


def test_cli_run_kill9_then_until_idle(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = make_db(db)
    for b in range(60):
        with conn.transaction():
            upsert(conn, range(b * 500, b * 500 + 500), f"b{b}")
    conn.close()
    want = expected_by_key(db)  # before a run's GC may trim the journal
    env = {**os.environ, "CHANGEFEED_MAX_ROWS_PER_BATCH": "3000"}
    p = subprocess.Popen(
        _cli("run", "--db", str(db)), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    store = TopicStore(db)
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.5)
        try:
            if store.offsets("t/f")[0][1] >= 6000:
                break
        except Exception:
            pass
    os.kill(p.pid, signal.SIGKILL)
    p.wait()
    out = subprocess.run(
        _cli("run", "--db", str(db), "--until-idle"), env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert check_exactly_once(db, want) == 30000


def test_cli_run_until_idle_subprocess(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = make_db(db)
    upsert(conn, range(20), "x")
    conn.close()
    want = expected_by_key(db)
    out = subprocess.run(
        _cli("run", "--db", str(db), "--until-idle"), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert check_exactly_once(db, want) == 20
    out = subprocess.run(
        _cli("run", "--db", str(tmp_path / "nope"), "--until-idle"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and out.stderr.startswith("ERROR:")


# ----------------------------------------------------------------------------- checkpoints
def test_damaged_checkpoint_is_a_clear_error_and_a_deleted_one_resumes_without_loss(
    spark: Any, tmp_path: Path
) -> None:
    import shutil

    from changefeed.exceptions import PipelineError
    from changefeed.pipeline.delivery.progress import checkpoint_dir
    from changefeed.pipeline.runner import run_until_idle

    db = tmp_path / "db"
    conn = make_db(db)
    for i in range(3):
        upsert(conn, range(i * 10, i * 10 + 10), f"a{i}")
    run_until_idle(db, spark=spark, max_rows=10, gc=False)
    ckpt = checkpoint_dir(db.absolute(), 1)
    offsets = sorted((ckpt / "offsets").iterdir(), key=lambda p: int(p.name) if p.name.isdigit() else -1)
    last = offsets[-1]
    good = last.read_bytes()
    last.write_bytes(b"\x00garbage")
    upsert(conn, range(100, 105), "b")
    with pytest.raises(PipelineError, match="checkpoint") as info:
        run_until_idle(db, spark=spark, gc=False)
    assert "delete" in str(info.value)
    last.write_bytes(good)
    # Deleting the checkpoint (as the error suggests): the feed resumes from its recorded progress
    # with a new writer epoch, so the new query's batch ids (from 0 again) are not mistaken for
    # the old ones, and every change is in the topic exactly once.
    shutil.rmtree(ckpt)
    upsert(conn, range(200, 210), "c")
    run_until_idle(db, spark=spark, max_rows=10, gc=False)
    assert check_exactly_once(db) == len(journal(db))
