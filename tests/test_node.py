"""One node (``changefeed start``) as a user runs it, driven through real clients only: psycopg on
its pg endpoint, confluent-kafka on its Kafka endpoint, httpx on /metrics and /health, headless
Chromium on the console; and ``kill -9`` of the node during a random psycopg workload, each
followed by a restart, with the topics validated after (YDB feed: exactly once; CockroachDB
job: the at-least-once checks). ``CHANGEFEED_NODE_KILLS`` rounds (3 in ``make test``, 10 in
``make soak``)."""

from __future__ import annotations

import contextlib
import os
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from confluent_kafka import Consumer, TopicPartition
from prometheus_client.parser import text_string_to_metric_families

from changefeed.testing import validators as v
from tests.node_process import NodeProcess

pytestmark = pytest.mark.slow

YDB_TOPIC, JOB_TOPIC = "t/f", "t"


def _consumer(node: NodeProcess) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": node.kafka,
            "group.id": f"g{random.random()}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "log_level": 3,
        }
    )


def _read(
    node: NodeProcess, topic: str, want: int, timeout: float = 60
) -> list[tuple[int, int, bytes | None, bytes, int]]:
    """Records of ``topic`` through the node's Kafka endpoint until ``want`` data records came."""
    c = _consumer(node)
    try:
        meta = c.list_topics(topic, timeout=30).topics[topic]
        c.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[tuple[int, int, bytes | None, bytes, int]] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and sum(1 for r in out if r[2] is not None) < want:
            for m in c.consume(500, timeout=0.5):
                if m.error() is None:
                    out.append(
                        (m.partition(), m.offset(), m.key(), m.value() or b"", m.timestamp()[1] * 1_000_000)
                    )
        return out
    finally:
        c.close()


def _metric(node: NodeProcess, name: str) -> dict[str, float]:
    text = httpx.get(node.http + "/metrics", timeout=30).text
    for fam in text_string_to_metric_families(text):
        if fam.name == name:
            return {s.labels.get("feed", ""): s.value for s in fam.samples}
    return {}


def _status(conn: psycopg.Connection[Any], job: int) -> str:
    cur = conn.execute(f"SHOW CHANGEFEED JOB {job}")
    names = [d.name for d in cur.description or ()]
    return str(cur.fetchone()[names.index("status")])  # type: ignore[index]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeProcess]:
    n = NodeProcess(tmp_path / "db", tmp_path / "node.log")
    n.start()
    try:
        yield n
    finally:
        if n.proc is not None and n.proc.poll() is None:
            n.stop()


def _setup(conn: psycopg.Connection[Any]) -> int:
    conn.execute("CREATE TABLE t (k Uint64, a Utf8, b Int64, PRIMARY KEY (k))")
    conn.execute("ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'NEW_AND_OLD_IMAGES')")
    return int(
        conn.execute("CREATE CHANGEFEED FOR TABLE t INTO 'topics://' WITH updated, diff").fetchone()[0]
    )  # type: ignore[index]


def test_a_node_delivers_pauses_resumes_and_shows_it(node: NodeProcess, tmp_path: Path) -> None:
    with psycopg.connect(node.dsn(), autocommit=True) as conn:
        job = _setup(conn)
        with conn.transaction():
            for k in range(1000):
                conn.execute("UPSERT INTO t (k, a, b) VALUES (%s, %s, %s)", (k, f"v{k}", k))
    ydb = _read(node, YDB_TOPIC, 1000)
    crdb = _read(node, JOB_TOPIC, 1000)
    assert sum(1 for r in ydb if r[2] is not None) == 1000
    assert sum(1 for r in crdb if r[2] is not None) == 1000
    # /metrics counts what was delivered, per feed and per job
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        emitted = _metric(node, "changefeed_emitted_messages")
        if emitted.get(YDB_TOPIC) == len(ydb) and emitted.get(str(job)) == len(crdb):
            break
        time.sleep(0.2)
    assert emitted[YDB_TOPIC] == len(ydb) and emitted[str(job)] == len(crdb), emitted
    assert _metric(node, "changefeed_running") == {YDB_TOPIC: 1.0, str(job): 1.0}
    assert httpx.get(node.http + "/health?ready=1", timeout=10).status_code == 200

    # PAUSE JOB stops the job's output (the YDB feed goes on); RESUME delivers what it missed
    with psycopg.connect(node.dsn(), autocommit=True) as conn:
        conn.execute(f"PAUSE JOB {job}")
        deadline = time.monotonic() + 30
        while _status(conn, job) != "paused":
            assert time.monotonic() < deadline, "the job did not pause"
            time.sleep(0.1)
        with conn.transaction():
            for k in range(1000, 1100):
                conn.execute("UPSERT INTO t (k, a, b) VALUES (%s, %s, %s)", (k, f"v{k}", k))
        assert sum(1 for r in _read(node, YDB_TOPIC, 1100) if r[2] is not None) == 1100
        time.sleep(1.0)
        assert sum(1 for r in _read(node, JOB_TOPIC, 1001, timeout=3) if r[2] is not None) == 1000
        conn.execute(f"RESUME JOB {job}")
    crdb = _read(node, JOB_TOPIC, 1100)
    assert sum(1 for r in crdb if r[2] is not None) == 1100
    rep = v.validate_records(node.db, _feed_id(node.db), crdb, at_least_once=True)
    assert rep.ok, str(rep)

    # the console lists both and plots throughput (a point every SAMPLE_S s)
    from tests.test_node_http import _dump_dom

    time.sleep(6)
    dom = _dump_dom(node.http + "/", tmp_path)
    assert f'data-feed="{YDB_TOPIC}"' in dom and f'data-feed="{job}"' in dom
    throughput = dom[dom.index('id="throughput"') : dom.index('id="lag"')]
    assert throughput.count('class="point"') >= 2, "no data points in the throughput plot"
    assert node.stop() == 0


def _feed_id(db: Path) -> int:
    import changefeed

    with changefeed.connect(db) as c:
        return int(c.db.conn.execute("SELECT id FROM _feeds WHERE kind = 'crdb'").fetchone()[0])


class Writer(threading.Thread):
    """Random transactions through psycopg until stopped; reconnects while the node is down."""

    def __init__(self, node: NodeProcess, seed: int) -> None:
        super().__init__(daemon=True)
        self.node, self.rng = node, random.Random(seed)
        self.stop = threading.Event()
        self.committed = 0
        self.reconnects = 0

    def run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        while not self.stop.is_set():
            try:
                if conn is None:
                    conn = psycopg.connect(self.node.dsn(), autocommit=True, connect_timeout=2)
                with conn.transaction():
                    for _ in range(self.rng.randint(1, 3)):
                        k = self.rng.randrange(60)
                        if self.rng.random() < 0.2:
                            conn.execute("DELETE FROM t WHERE k = %s", (k,))
                        else:
                            conn.execute(
                                "UPSERT INTO t (k, a, b) VALUES (%s, %s, %s)",
                                (k, f"x{self.rng.randrange(1000)}", self.rng.randrange(-99, 99)),
                            )
                self.committed += 1
                time.sleep(0.01)
            except psycopg.Error:
                if conn is not None:
                    with contextlib.suppress(psycopg.Error):
                        conn.close()
                conn = None
                self.reconnects += 1
                time.sleep(0.2)
        if conn is not None:
            conn.close()


def _topic_total(db: Path, topic: str) -> int:
    from changefeed.topics import TopicStore

    store = TopicStore(db)
    try:
        return sum(n for _, n in store.offsets(topic).values())
    except Exception:
        return 0
    finally:
        store.close()


def test_kill_9_of_a_node_during_a_workload(tmp_path: Path) -> None:
    kills = int(os.environ.get("CHANGEFEED_NODE_KILLS", "3"))
    rng = random.Random(16)
    node = NodeProcess(tmp_path / "db", tmp_path / "node.log")
    node.start()
    with psycopg.connect(node.dsn(), autocommit=True) as conn:
        _setup(conn)
    writer = Writer(node, 7)
    writer.start()
    try:
        for _ in range(kills):
            before = _topic_total(node.db, YDB_TOPIC)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and _topic_total(node.db, YDB_TOPIC) == before:
                time.sleep(0.05)
            time.sleep(rng.uniform(0.0, 2.0))
            node.kill9()
            node.start()
        committed = writer.committed
        deadline = time.monotonic() + 30
        while writer.committed < committed + 20 and time.monotonic() < deadline:
            time.sleep(0.1)  # the client reconnected to the restarted node and writes again
        assert writer.committed >= committed + 20, "the psycopg client did not reconnect"
    finally:
        writer.stop.set()
        writer.join(30)
    assert writer.committed > 50 and writer.reconnects >= 1
    # everything delivered: nothing pending on either feed
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        rows = httpx.get(node.http + "/api/console", timeout=10).json()["feeds"]
        if rows and not any(r["pending_changes"] for r in rows):
            break
        time.sleep(0.2)
    ydb_topic, crdb_topic = v.read_topic(node.db, YDB_TOPIC), v.read_topic(node.db, JOB_TOPIC)
    ydb = _read(node, YDB_TOPIC, len(ydb_topic), timeout=60)
    crdb = _read(node, JOB_TOPIC, len(crdb_topic), timeout=60)
    assert node.stop() == 0
    # a Kafka consumer of the node reads the topics record for record (Kafka's timestamps are
    # milliseconds: the validators take the topics' own nanosecond commit times)
    assert [r[:4] for r in ydb] == [r[:4] for r in ydb_topic]
    assert [r[:4] for r in crdb] == [r[:4] for r in crdb_topic]
    rep = v.validate_records(node.db, "f", ydb_topic)
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] >= rep.stats["change_rows"] > 50
    rep = v.validate_records(node.db, _feed_id(node.db), crdb_topic, at_least_once=True)
    assert rep.ok, str(rep)


@pytest.mark.soak
def test_ten_kill_9_of_a_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CHANGEFEED_NODE_KILLS", "10")
    test_kill_9_of_a_node_during_a_workload(tmp_path)
