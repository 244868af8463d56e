"""The Kafka endpoint against real clients: confluent-kafka (librdkafka) and kafka-python.

One endpoint per module on a loopback port 0, its asyncio loop in a background thread. A YDB
feed's topic is filled by the plain-Python baseline pipeline (no Spark here).
"""

from __future__ import annotations

import asyncio
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin as ck_admin
import kafka as kp
import kafka.admin as kp_admin
import kafka.errors as kp_errors
import pyarrow as pa
import pytest

import changefeed
from changefeed.server import EndpointConfig
from changefeed.server.kafka import KafkaEndpoint, create
from changefeed.topics import TopicStore

ROWS = 120
FEED_TOPIC = "t/f"


class LoopThread:
    """An asyncio loop in a daemon thread; endpoints start and stop on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def call(self, coro: Any, timeout: float = 30) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def start(self, ep: KafkaEndpoint) -> int:
        return int(self.call(ep.start())[1])

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    lt = LoopThread()
    yield lt
    lt.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kafka") / "db"
    conn = changefeed.connect(str(path))
    conn.execute("CREATE TABLE t (id Uint64, v Utf8, PRIMARY KEY (id))")
    conn.execute(
        "ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT='DEBEZIUM_JSON', MODE='NEW_AND_OLD_IMAGES', "
        "RESOLVED_TIMESTAMPS=Interval('PT1S'), TOPIC_MIN_ACTIVE_PARTITIONS=3)"
    )
    for start in range(0, ROWS, 40):
        conn.execute(
            "UPSERT INTO t (id, v) VALUES "
            + ", ".join(f"({i}, 'value {i}')" for i in range(start, start + 40))
        )
    conn.execute("DELETE FROM t WHERE id = 7")
    conn.execute("CREATE USER alice WITH PASSWORD 'wonderland'")
    conn.close()
    env = {**os.environ, "PYTHONPATH": str(Path(changefeed.__file__).parents[1])}
    subprocess.run(
        [sys.executable, "-m", "changefeed.pipeline.baseline", "--db", str(path)],
        check=True,
        env=env,
        capture_output=True,
        timeout=120,
    )
    return path


@pytest.fixture(scope="module")
def port(db: Path, loop_thread: LoopThread) -> Iterator[int]:
    ep = create(EndpointConfig(db=db))
    p = loop_thread.start(ep)
    yield p
    loop_thread.call(ep.stop())


def stored(db: Path, topic: str) -> dict[tuple[int, int], tuple[bytes | None, bytes, int]]:
    st = TopicStore(db)
    out = {}
    for p in range(st.topic(topic).partitions):
        for r in st.read(topic, p, 0, 1_000_000):
            out[(p, r.offset)] = (r.key, r.value, r.ts // 1_000_000)
    return out


def confluent_consumer(port: int, group: str, **extra: Any) -> Any:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }
    return ck.Consumer(conf)


def drain(consumer: Any, want: int, timeout: float = 20) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        for m in consumer.consume(500, 0.5):
            assert m.error() is None, m.error()
            got.append(m)
    return got


# -- reading a YDB feed ------------------------------------------------------------------------


def test_confluent_reads_feed_from_beginning_and_by_group_offsets(db: Path, port: int) -> None:
    expected = stored(db, FEED_TOPIC)
    assert len(expected) >= ROWS + 1
    c = confluent_consumer(port, "conf-readers")
    c.subscribe([FEED_TOPIC])
    msgs = drain(c, len(expected))
    got = {(m.partition(), m.offset()): (m.key(), m.value(), m.timestamp()[1]) for m in msgs}
    assert got == expected
    assert len(msgs) == len(expected)
    assert {m.topic() for m in msgs} == {FEED_TOPIC}
    # Debezium records keyed by the primary key, as YDB's Kafka API presents them.
    # (a barrier may come first in a partition: it precedes the changes committed after its step)
    key = next(k for _, (k, _v, _t) in sorted(expected.items()) if k is not None)
    assert key.startswith(b'{"payload":{"id":')
    # Resolved messages, as the feed emits them: no key, in every partition.
    resolved = [m for m in msgs if m.key() is None]
    assert {m.partition() for m in resolved} == {0, 1, 2}
    assert all(m.value().startswith(b'{"payload":{"resolved":') for m in resolved)
    c.commit(asynchronous=False)
    c.close()
    st = TopicStore(db)
    ends = {p: nxt for p, (_, nxt) in st.offsets(FEED_TOPIC).items()}
    assert st.committed_offsets("conf-readers", FEED_TOPIC) == ends
    # Same group again: starts at the committed offsets, sees only what was appended since.
    st.append(FEED_TOPIC, 1, "test-writer", 1, pa.table({"key": [b"k"], "value": [b"later"], "ts": [1]}))
    c = confluent_consumer(port, "conf-readers")
    c.subscribe([FEED_TOPIC])
    later = drain(c, 1)
    assert [(m.partition(), m.offset(), m.value()) for m in later] == [(1, ends[1], b"later")]
    assert drain(c, 1, timeout=1.5) == []
    c.close()


def test_kafka_python_reads_feed(db: Path, port: int) -> None:
    expected = stored(db, FEED_TOPIC)
    # kafka-python refuses '/' in topic names: the endpoint resolves "t.f" to "t/f".
    tps = [kp.TopicPartition("t.f", p) for p in range(3)]
    c = kp.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id="kp-readers",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    c.assign(tps)
    got: dict[tuple[int, int], tuple[bytes | None, bytes, int]] = {}
    deadline = time.monotonic() + 20
    while len(got) < len(expected) and time.monotonic() < deadline:
        for batch in c.poll(500).values():
            for m in batch:
                got[(m.partition, m.offset)] = (m.key, m.value, m.timestamp)
    assert got == expected
    # Commit only partition 0's position, then a new consumer of the group resumes there.
    c.commit({tps[0]: kp.OffsetAndMetadata(2, "", -1)})
    c.close()
    assert TopicStore(db).committed_offsets("kp-readers", FEED_TOPIC)[0] == 2
    c = kp.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}", group_id="kp-readers", enable_auto_commit=False
    )
    c.assign([tps[0]])
    first = []
    deadline = time.monotonic() + 10
    while not first and time.monotonic() < deadline:
        first = [m for batch in c.poll(500).values() for m in batch]
    assert first[0].offset == 2
    c.close()


def test_list_offsets_and_watermarks(db: Path, port: int) -> None:
    c = confluent_consumer(port, "watermarks")
    st = TopicStore(db)
    for p, (earliest, nxt) in st.offsets(FEED_TOPIC).items():
        assert c.get_watermark_offsets(ck.TopicPartition(FEED_TOPIC, p), timeout=10) == (earliest, nxt)
    recs = st.read(FEED_TOPIC, 0, 0, 10)
    tp = ck.TopicPartition(FEED_TOPIC, 0, recs[3].ts // 1_000_000)
    (found,) = c.offsets_for_times([tp], timeout=10)
    assert found.offset <= recs[3].offset and found.error is None
    c.close()


def test_aiokafka_reads_feed_and_produces(db: Path, port: int) -> None:
    import aiokafka

    expected = stored(db, FEED_TOPIC)

    async def scenario() -> dict[tuple[int, int], tuple[bytes | None, bytes, int]]:
        consumer = aiokafka.AIOKafkaConsumer(
            FEED_TOPIC,
            bootstrap_servers=f"127.0.0.1:{port}",
            group_id="aio-readers",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        await consumer.start()
        got = {}
        try:
            while len(got) < len(expected):
                batches = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                for batch in batches.values():
                    for m in batch:
                        got[(m.partition, m.offset)] = (m.key, m.value, m.timestamp)
            await consumer.commit()
        finally:
            await consumer.stop()
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", enable_idempotence=True)
        await producer.start()
        try:
            meta = await producer.send_and_wait("split-aio", b"hello", key=b"k", partition=0)
            assert meta.offset == 0
        finally:
            await producer.stop()
        return got

    TopicStore(db).ensure_topic("split-aio", 1)
    assert asyncio.run(scenario()) == expected
    assert TopicStore(db).read("split-aio", 0, 0)[0].value == b"hello"


def test_offsets_removed_by_retention_are_out_of_range(db: Path, port: int) -> None:
    # written two hours ago and now, kept an hour: what the endpoint's own retention pass (real
    # time) would delete is exactly what this pass deletes
    now = [time.time_ns() - 7200 * 10**9]
    st = TopicStore(db, clock=lambda: now[0])
    st.ensure_topic("retained", 1, retention_ns=3600 * 10**9)
    rows = pa.table({"key": [b"k"] * 10, "value": [b"old"] * 10, "ts": [time.time_ns()] * 10})
    st.append("retained", 0, "w", 1, rows)
    now[0] = time.time_ns()
    st.append("retained", 0, "w", 2, rows.set_column(1, "value", pa.array([b"new"] * 10)))
    assert st.apply_retention(now[0]) == 10  # the first ten, read or not
    st.commit_offsets("retention-group", "retained", {0: 3})  # a position retention removed
    for reset, first in (("earliest", 10), ("latest", None)):
        c = confluent_consumer(port, "retention-group", **{"auto.offset.reset": reset})
        c.subscribe(["retained"])
        msgs = drain(c, 1, timeout=4 if first is not None else 2)
        c.close()
        assert [m.offset() for m in msgs[:1]] == ([first] if first is not None else [])
    # kafka-python sees the same: OFFSET_OUT_OF_RANGE, then its reset policy.
    c = kp.KafkaConsumer(bootstrap_servers=f"127.0.0.1:{port}", auto_offset_reset="earliest")
    tp = kp.TopicPartition("retained", 0)
    c.assign([tp])
    c.seek(tp, 3)
    got = []
    deadline = time.monotonic() + 10
    while not got and time.monotonic() < deadline:
        got = [m.offset for batch in c.poll(500).values() for m in batch]
    c.close()
    assert got[0] == 10


# -- consumer groups ---------------------------------------------------------------------------


def test_group_splits_partitions_and_takes_over_on_close(db: Path, port: int) -> None:
    st = TopicStore(db)
    st.ensure_topic("split", 6)
    for p in range(6):
        st.append(
            "split",
            p,
            "w",
            1,
            pa.table(
                {
                    "key": [b"%d" % i for i in range(50)],
                    "value": [b"p%d-%d" % (p, i) for i in range(50)],
                    "ts": [time.time_ns()] * 50,
                }
            ),
        )
    consumers = [confluent_consumer(port, "split-group", **{"session.timeout.ms": 6000}) for _ in range(3)]
    try:
        _split_and_take_over(consumers)
    finally:
        for c in consumers:
            c.close()


def _split_and_take_over(consumers: list[Any]) -> None:
    uncommitted: set[tuple[int, int]] = set()

    def commit(c: Any, m: Any) -> None:
        try:
            c.commit(message=m, asynchronous=False)
        except ck.KafkaException as exc:  # a commit racing a rebalance: the record may come again
            assert exc.args[0].code() in (
                ck.KafkaError.REBALANCE_IN_PROGRESS,
                ck.KafkaError.ILLEGAL_GENERATION,
            )
            uncommitted.add((m.partition(), m.offset()))

    assigned: dict[int, set[int]] = {i: set() for i in range(3)}

    def on_assign(i: int) -> Any:
        def cb(consumer: Any, parts: list[Any]) -> None:
            assigned[i] = {tp.partition for tp in parts}

        return cb

    for i, c in enumerate(consumers):
        c.subscribe(["split"], on_assign=on_assign(i))
    seen: list[tuple[int, int]] = []
    # Phase 1: everyone joined one generation and reads a little, committing what it processed.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (
        sum(len(a) for a in assigned.values()) < 6 or any(len(a) != 2 for a in assigned.values())
    ):
        for c in consumers:
            for m in c.consume(5, 0.1):
                assert m.error() is None
                seen.append((m.partition(), m.offset()))
                commit(c, m)
    assert sorted(p for a in assigned.values() for p in a) == list(range(6))
    assert all(len(a) == 2 for a in assigned.values())
    # The third consumer leaves; its partitions go to the other two, from committed offsets.
    consumers.pop().close()
    survivors = consumers
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and len(set(seen)) < 300:
        for c in survivors:
            for m in c.consume(100, 0.1):
                assert m.error() is None
                seen.append((m.partition(), m.offset()))
                commit(c, m)
    assert set(seen) == {(p, o) for p in range(6) for o in range(50)}
    # Every processed message was committed, so none is read twice (except after a commit
    # that lost a race with the rebalance).
    assert len(seen) - 300 <= len(uncommitted)
    assert sorted(assigned[0] | assigned[1]) == list(range(6))


_VICTIM = """
import sys, time
from confluent_kafka import Consumer
port, per = int(sys.argv[1]), int(sys.argv[2])
c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "kill-group",
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              "session.timeout.ms": 2000, "heartbeat.interval.ms": 300})
c.subscribe(["kill"])
done = {}
while len(done) < 4 or any(n < per for n in done.values()):
    for m in c.consume(1, 0.2):
        assert m.error() is None, m.error()
        if done.get(m.partition(), 0) < per:
            done[m.partition()] = done.get(m.partition(), 0) + 1
            c.commit(message=m, asynchronous=False)
print("ready", flush=True)
time.sleep(600)
"""


def test_killed_member_partitions_resume_from_committed_offsets(db: Path, port: int) -> None:
    st = TopicStore(db)
    st.ensure_topic("kill", 4)
    for p in range(4):
        st.append(
            "kill",
            p,
            "w",
            1,
            pa.table(
                {"key": [b"k"] * 30, "value": [b"%d" % i for i in range(30)], "ts": [time.time_ns()] * 30}
            ),
        )
    env = {**os.environ, "PYTHONPATH": str(Path(changefeed.__file__).parents[1])}
    victim = subprocess.Popen(
        [sys.executable, "-c", _VICTIM, str(port), "5"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert victim.stdout is not None
        assert victim.stdout.readline().strip() == "ready"
    finally:
        victim.kill()  # no LeaveGroup: its session has to time out
        victim.wait(10)
    committed = st.committed_offsets("kill-group", "kill")
    assert committed == {p: 5 for p in range(4)}
    survivors = [confluent_consumer(port, "kill-group") for _ in range(2)]
    try:
        for c in survivors:
            c.subscribe(["kill"])
        seen: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 100:
            for c in survivors:
                seen += [(m.partition(), m.offset()) for m in c.consume(100, 0.1) if m.error() is None]
        assert sorted(seen) == [(p, o) for p in range(4) for o in range(5, 30)]
    finally:
        for c in survivors:
            c.close()


# -- producing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("n", [3000, pytest.param(100_000, marks=[pytest.mark.slow, pytest.mark.soak])])
def test_idempotent_producer_exactly_once_across_restart(db: Path, loop_thread: LoopThread, n: int) -> None:
    topic = f"produced-{n}"
    ep = create(EndpointConfig(db=db))
    port = loop_thread.start(ep)
    admin = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([ck_admin.NewTopic(topic, 3, 1)])[topic].result(10)
    producer = ck.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "enable.idempotence": True,
            "linger.ms": 5,
            "batch.num.messages": 200,
            "message.timeout.ms": 120000,
        }
    )
    errors: list[Any] = []
    restarts = {n // 3, n // 2, 2 * n // 3} if n > 10_000 else {n // 2}
    try:
        for i in range(n):
            if i in restarts:
                producer.flush(0.05)
                loop_thread.call(ep.stop())  # connections drop with requests in flight
                ep = create(EndpointConfig(db=db, port=port))
                loop_thread.start(ep)
            while True:
                try:
                    producer.produce(
                        topic,
                        key=b"%d" % (i % 17),
                        value=b"m%06d" % i,
                        on_delivery=lambda err, msg: errors.append(err) if err else None,
                    )
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        assert producer.flush(120) == 0
    finally:
        loop_thread.call(ep.stop())
    assert errors == []
    values = [v for (_, v, _) in stored(db, topic).values()]
    assert len(values) == n
    assert sorted(values) == [b"m%06d" % i for i in range(n)]


def test_kafka_python_producer_and_admin(db: Path, port: int) -> None:
    admin = kp.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    admin.create_topics([kp_admin.NewTopic("kp-produced", 2, 1)])
    assert "kp-produced" in admin.list_topics()
    producer = kp.KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}", enable_idempotence=True)
    for i in range(200):
        producer.send("kp-produced", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    got = stored(db, "kp-produced")
    assert sorted(v for _, v, _ in got.values()) == sorted(b"v%d" % i for i in range(200))
    admin.delete_topics(["kp-produced"])
    assert "kp-produced" not in admin.list_topics()
    # A feed's topic belongs to the feed: DROP CHANGEFEED removes it, DeleteTopics may not.
    with pytest.raises(kp_errors.PolicyViolationError):
        admin.delete_topics(["t.f"])
    assert FEED_TOPIC in [t.name for t in TopicStore(db).topics()]
    admin.close()


@pytest.mark.spark
def test_pipeline_run_keeps_topics_kafka_clients_created(db: Path, port: int, spark: Any) -> None:
    """Issue 21: ``changefeed run`` once dropped every topic that belonged to no feed, records too."""
    from changefeed.pipeline.runner import run_until_idle

    admin = kp.KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{port}")
    admin.create_topics([kp_admin.NewTopic("kp-kept", 2, 1)])
    producer = kp.KafkaProducer(bootstrap_servers=f"127.0.0.1:{port}")
    for i in range(50):
        producer.send("kp-kept", key=b"k%d" % i, value=b"v%d" % i, partition=i % 2)
    producer.flush()
    producer.close()
    before = stored(db, "kp-kept")
    assert len(before) == 50
    run_until_idle(db, spark=spark)
    assert "kp-kept" in admin.list_topics()
    assert stored(db, "kp-kept") == before
    admin.delete_topics(["kp-kept"])
    admin.close()


def test_acks_compression_and_configs(db: Path, port: int) -> None:
    TopicStore(db).ensure_topic("codecs", 1)
    sent: dict[str, dict[str, Any]] = {"none-acks0": {"acks": 0}}
    sent |= {c: {"compression.codec": c} for c in ("gzip", "snappy", "lz4", "zstd")}
    for label, conf in sent.items():
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", **conf})
        for i in range(50):
            p.produce("codecs", b"%s-%d" % (label.encode(), i), partition=0)
        assert p.flush(10) == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and TopicStore(db).partition_offsets("codecs", 0)[1] < 250:
        time.sleep(0.05)  # acks=0: nothing to wait for but the log itself
    values = sorted(v for _, v, _ in stored(db, "codecs").values())
    assert values == sorted(b"%s-%d" % (label.encode(), i) for label in sent for i in range(50))
    # DescribeConfigs, as admin clients ask it.
    admin = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    res = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, "codecs")
    configs = admin.describe_configs([res])[res].result(10)
    assert configs["retention.ms"].value == str(24 * 3600 * 1000)
    assert configs["cleanup.policy"].value == "delete"
    assert configs["compression.type"].value == "producer"  # kept as produced, any codec


# -- authentication ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def auth_port(db: Path, loop_thread: LoopThread) -> Iterator[int]:
    ep = create(EndpointConfig(db=db), allow_anonymous=False)
    p = loop_thread.start(ep)
    yield p
    loop_thread.call(ep.stop())


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_good_and_bad_credentials(auth_port: int, mechanism: str) -> None:
    def meta(password: str, timeout: float = 5) -> Any:
        admin = ck_admin.AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{auth_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": mechanism,
                "sasl.username": "alice",
                "sasl.password": password,
            }
        )
        return admin.list_topics(timeout=timeout)

    assert meta("wonderland").brokers
    with pytest.raises(ck.KafkaException):
        meta("looking-glass", timeout=1.5)


def test_topic_privileges_follow_the_feed_table(db: Path, auth_port: int) -> None:
    def consumer() -> Any:
        return confluent_consumer(
            auth_port,
            "alice-group",
            **{
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": "alice",
                "sasl.password": "wonderland",
            },
        )

    c = consumer()
    md = c.list_topics(FEED_TOPIC, timeout=5)
    assert md.topics[FEED_TOPIC].error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    c.close()
    conn = changefeed.connect(str(db))
    conn.execute("GRANT SELECT ON t TO alice")
    conn.close()
    time.sleep(1.1)  # cached answers live a second
    c = consumer()
    c.assign([ck.TopicPartition(FEED_TOPIC, 0, 0)])
    msgs = drain(c, 1)
    assert msgs and msgs[0].offset() == 0
    c.close()


def test_nologin_users_and_non_admins(db: Path, auth_port: int) -> None:
    conn = changefeed.connect(str(db))
    conn.execute("CREATE USER bob WITH PASSWORD 'builder' NOLOGIN")
    conn.close()

    def admin(user: str, password: str) -> Any:
        return ck_admin.AdminClient(
            {
                "bootstrap.servers": f"127.0.0.1:{auth_port}",
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.username": user,
                "sasl.password": password,
            }
        )

    with pytest.raises(ck.KafkaException):
        admin("bob", "builder").list_topics(timeout=1.5)
    alice = admin("alice", "wonderland")
    fut = alice.create_topics([ck_admin.NewTopic("alices", 1, 1)])["alices"]
    with pytest.raises(ck.KafkaException) as exc:
        fut.result(10)
    assert exc.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert "alices" not in [t.name for t in TopicStore(db).topics()]


def test_anonymous_refused_when_not_allowed(auth_port: int) -> None:
    c = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{auth_port}"})
    with pytest.raises(ck.KafkaException):
        c.list_topics(timeout=3)


def test_kafka_python_scram(auth_port: int) -> None:
    c = kp.KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{auth_port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="wonderland",
    )
    assert isinstance(c.topics(), set)
    c.close()


# -- bad input ---------------------------------------------------------------------------------


def _request(api_key: int, version: int, body: bytes, corr: int = 7) -> bytes:
    head = struct.pack(">hhih", api_key, version, corr, 4) + b"test"
    return struct.pack(">i", len(head) + len(body)) + head + body


def _exchange(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)  # a truncated request ends here
        chunks = []
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
                buf = b"".join(chunks)
                if len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">i", buf[:4])[0]:
                    break
        except TimeoutError:
            pass
        return b"".join(chunks)


def test_unsupported_api_versions_version_is_answered_like_kafka(port: int) -> None:
    resp = _exchange(port, _request(18, 9, b""))
    _size, corr, error, n, key, lo, hi = struct.unpack(">iihihhh", resp[:20])
    assert (corr, error, n, key, lo) == (7, 35, 1, 18, 0)
    assert hi >= 0


@pytest.mark.parametrize(
    "data",
    [
        _request(3, 99, b""),  # unsupported Metadata version
        _request(3, 1, b"\x00\x00\x00\x05\x00"),  # array longer than the request
        _request(99, 0, b""),  # unknown API
        struct.pack(">i", 2) + b"\x00",  # truncated frame
        struct.pack(">i", -5),  # negative size
    ],
)
def test_bad_requests_close_only_that_connection(port: int, data: bytes) -> None:
    assert _exchange(port, data) == b""
    # The endpoint still serves others.
    c = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    assert FEED_TOPIC in c.list_topics(timeout=5).topics


def test_unknown_topic_is_created_at_once_or_refused_at_once(db: Path, port: int, auth_port: int) -> None:
    """Issue 21: producing to a topic that does not exist answers at once. As Kafka's default
    auto.create.topics.enable, a producer's metadata request creates it (1 partition); a user
    who may not create topics gets TOPIC_AUTHORIZATION_FAILED, a name Kafka refuses
    TOPIC_EXCEPTION, both at once instead of after librdkafka's 30 s propagation wait."""
    assert "auto-new" not in {t.name for t in TopicStore(db).topics()}
    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
    got: list[Any] = []
    start = time.monotonic()
    p.produce("auto-new", b"x", on_delivery=lambda err, msg: got.append((msg.topic(), err)))
    p.produce("bad/name", b"x", on_delivery=lambda err, msg: got.append((msg.topic(), err)))
    p.flush(10)
    assert time.monotonic() - start < 5
    errs = dict(got)
    assert errs["auto-new"] is None and errs["bad/name"].code() == ck.KafkaError.TOPIC_EXCEPTION, got
    assert TopicStore(db).topic("auto-new").partitions == 1
    alice = ck.Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{auth_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "wonderland",
        }
    )
    refused: list[Any] = []
    start = time.monotonic()
    alice.produce("alice-new", b"x", on_delivery=lambda err, msg: refused.append(err))
    alice.flush(10)
    assert time.monotonic() - start < 5
    assert refused and refused[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, refused
    assert "alice-new" not in {t.name for t in TopicStore(db).topics()}


def test_corrupt_record_batch_is_refused(db: Path, port: int) -> None:
    before = TopicStore(db).partition_offsets(FEED_TOPIC, 0)
    topic = FEED_TOPIC.encode()
    batch = struct.pack(">qiibI", 0, 49, 0, 2, 12345) + b"\x00" * 45  # CRC does not match
    body = (
        struct.pack(">hhi", -1, 1, 1000)
        + struct.pack(">ih", 1, len(topic))
        + topic
        + struct.pack(">iii", 1, 0, len(batch))
        + batch
    )
    resp = _exchange(port, _request(0, 7, body))
    # correlation id, one topic, its name, one partition: index, error CORRUPT_MESSAGE
    at = 4 + 4 + 4 + 2 + len(topic) + 4
    assert struct.unpack(">ih", resp[at : at + 6]) == (0, 2)
    assert TopicStore(db).partition_offsets(FEED_TOPIC, 0) == before


# -- the serve command -------------------------------------------------------------------------


def test_serve_command_serves_kafka_until_sigterm(db: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(changefeed.__file__).parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--kafka", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("kafka: listening on 127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        c = confluent_consumer(port, "serve-cmd")
        c.assign([ck.TopicPartition(FEED_TOPIC, 0, 0)])
        assert drain(c, 1)
        c.close()
    finally:
        proc.terminate()
        assert proc.wait(20) == 0


def test_retention_check_interval_is_an_option(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """How often the endpoint applies retention: Kafka's default, the environment, or the
    factory's argument, each checked (a whole number of ms from 1 on); ``serve`` refuses a bad
    one with one ERROR line before it listens."""
    from changefeed.exceptions import InvalidOption
    from changefeed.server.kafka import retention as R

    monkeypatch.delenv(R.CHECK_INTERVAL_ENV, raising=False)
    assert R.check_interval_ms() == R.DEFAULT_CHECK_INTERVAL_MS == 300_000
    assert create(EndpointConfig(db=db)).retention_check_ms == 300_000
    monkeypatch.setenv(R.CHECK_INTERVAL_ENV, " 250 ")
    assert create(EndpointConfig(db=db)).retention_check_ms == 250
    assert create(EndpointConfig(db=db), retention_check_ms=40).retention_check_ms == 40
    for bad in ("0", "-5", "1.5", "abc", str(1 << 41)):
        monkeypatch.setenv(R.CHECK_INTERVAL_ENV, bad)
        with pytest.raises(InvalidOption, match=R.CHECK_INTERVAL_ENV):
            create(EndpointConfig(db=db))
    monkeypatch.delenv(R.CHECK_INTERVAL_ENV)
    for wrong in (0, -1, True):
        with pytest.raises(InvalidOption, match="retention check interval"):
            create(EndpointConfig(db=db), retention_check_ms=wrong)
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(changefeed.__file__).parents[1]),
        R.CHECK_INTERVAL_ENV: "0",
    }
    res = subprocess.run(
        [sys.executable, "-m", "changefeed.cli.main", "serve", "--db", str(db), "--kafka", "127.0.0.1:0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert res.returncode == 1
    assert res.stderr.startswith(f"ERROR: {R.CHECK_INTERVAL_ENV}='0': expected a number of milliseconds"), (
        res.stderr
    )


def test_endpoint_applies_retention_on_its_own(tmp_path: Path, loop_thread: LoopThread) -> None:
    """Without a node's pipeline, the endpoint deletes what is past a topic's retention.ms every
    check interval: the log start moves (ListOffsets earliest), offsets go on where they were."""
    path = tmp_path / "db"
    changefeed.connect(str(path)).close()
    ep = create(EndpointConfig(db=path), retention_check_ms=100)
    port = loop_thread.start(ep)
    try:
        admin = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
        new = ck_admin.NewTopic("short", 1, 1, config={"retention.ms": "300"})
        admin.create_topics([new])["short"].result(10)
        p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}"})
        for i in range(3):
            p.produce("short", b"v%d" % i, partition=0)
        assert p.flush(10) == 0
        c = confluent_consumer(port, "retention-own")
        tp = ck.TopicPartition("short", 0)
        deadline = time.monotonic() + 20
        while c.get_watermark_offsets(tp, timeout=5, cached=False) != (3, 3) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert c.get_watermark_offsets(tp, timeout=5, cached=False) == (3, 3)
        c.close()
        assert TopicStore(path).partition_offsets("short", 0) == (3, 3)
        assert ep.retention is not None and ep.retention.passes >= 1
    finally:
        loop_thread.call(ep.stop())
    assert ep.retention is None


# -- group membership expiry -------------------------------------------------------------------


def test_member_without_heartbeats_is_removed_and_group_rebalances() -> None:
    from changefeed.server.kafka.groups import Coordinator

    async def scenario() -> None:
        co = Coordinator()
        co.start()
        proto = [("range", b"meta")]
        a, b = await asyncio.gather(
            co.join("g", "", "a", "h", 1000, 5000, "consumer", proto),
            co.join("g", "", "b", "h", 1000, 5000, "consumer", proto),
        )
        assert a.generation == b.generation == 1
        leader = a if a.members else b
        other = b if leader is a else a
        assigned = {leader.member_id: b"L", other.member_id: b"O"}
        res = await asyncio.gather(
            co.sync("g", 1, leader.member_id, list(assigned.items())), co.sync("g", 1, other.member_id, [])
        )
        assert [r[1] for r in res] == [b"L", b"O"]
        # Only the leader keeps heartbeating; the other one's session (1 s) expires.
        for _ in range(8):
            await asyncio.sleep(0.25)
            err = co.heartbeat("g", 1, leader.member_id)
            if err:
                break
        assert err == 27  # REBALANCE_IN_PROGRESS: rejoin
        again = await co.join("g", leader.member_id, "a", "h", 1000, 5000, "consumer", proto)
        assert again.generation == 2 and [m for m, _ in again.members] == [leader.member_id]
        assert co.heartbeat("g", 1, other.member_id) == 25  # UNKNOWN_MEMBER_ID
        await co.stop()

    asyncio.run(scenario())


# -- record batches ----------------------------------------------------------------------------


def test_record_batch_round_trip_and_crc() -> None:
    from changefeed.server.kafka.records import encode_batch, parse_batches
    from changefeed.server.kafka.wire import MalformedRequest

    keys = [None, b"", b"k" * 9000, b"key"]
    values = [b"", b"v" * 70_000, b"x", b"\x00\xff"]
    ts = [1_700_000_000_000, 1_699_999_000_000, 1_700_000_900_000, 1_700_000_000_001]
    data = encode_batch(41, [41, 42, 9000, 9001], keys, values, ts)
    (batch,) = parse_batches(data)
    assert (batch.keys, batch.values, batch.timestamps_ms.tolist()) == (keys, values, ts)
    assert struct.unpack(">q", data[:8])[0] == 41
    assert struct.unpack(">i", data[23:27])[0] == 9001 - 41  # last offset delta
    damaged = bytearray(data)
    damaged[-1] ^= 1
    with pytest.raises(MalformedRequest, match="CRC"):
        parse_batches(bytes(damaged))
    with pytest.raises(MalformedRequest):
        parse_batches(data[:-3])


def test_sasl_handshake_v0_raw_plain_tokens(auth_port: int) -> None:
    def frame(sock: socket.socket) -> bytes:
        head = b""
        while len(head) < 4:
            head += sock.recv(4 - len(head))
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            body += sock.recv(size - len(body))
        return body

    with socket.create_connection(("127.0.0.1", auth_port), timeout=5) as s:
        s.sendall(_request(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        assert struct.unpack(">ih", frame(s)[:6]) == (7, 0)
        token = b"\x00alice\x00wonderland"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert frame(s) == b""  # authenticated: an empty server token
        s.sendall(_request(3, 0, struct.pack(">i", 0), corr=8))
        assert struct.unpack(">i", frame(s)[:4]) == (8,)
    with socket.create_connection(("127.0.0.1", auth_port), timeout=5) as s:
        s.sendall(_request(17, 0, struct.pack(">h", 5) + b"PLAIN"))
        frame(s)
        token = b"\x00alice\x00wrong"
        s.sendall(struct.pack(">i", len(token)) + token)
        assert s.recv(10) == b""  # closed


def test_fetch_long_polls_until_data_or_max_wait(db: Path, port: int) -> None:
    st = TopicStore(db)
    st.ensure_topic("poll", 1)
    st.ensure_topic("poll-warm-up", 1)  # the first append in a process pays pyarrow's start-up
    st.append("poll-warm-up", 0, "w", 1, pa.table({"key": [b"k"], "value": [b"v"], "ts": [1]}))
    name = b"poll"

    def fetch(offset: int, max_wait_ms: int) -> tuple[float, int, int, bytes]:
        body = (
            struct.pack(">iiiib", -1, max_wait_ms, 1, 1 << 20, 0)
            + struct.pack(">ih", 1, len(name))
            + name
            + struct.pack(">iiqi", 1, 0, offset, 1 << 20)
        )
        t0 = time.monotonic()
        resp = _exchange(port, _request(1, 4, body))
        took = time.monotonic() - t0
        at = 4 + 4 + 4 + 4 + 2 + len(name) + 4 + 4
        error, hw = struct.unpack(">hq", resp[at : at + 10])
        records = resp[at + 10 + 8 + 4 + 4 :]
        return took, error, hw, records

    took, error, hw, records = fetch(0, 400)
    assert (error, hw, records) == (0, 0, b"") and took >= 0.35  # waited max.wait.ms for nothing
    timer = threading.Timer(
        0.15, lambda: st.append("poll", 0, "w", 1, pa.table({"key": [b"k"], "value": [b"v"], "ts": [1]}))
    )
    timer.start()
    took, error, hw, records = fetch(0, 5000)
    timer.join()
    assert error == 0 and hw == 1 and len(records) > 61 and took < 2.0  # answered when data came
    took, error, _, _ = fetch(7, 100)
    assert error == 1  # OFFSET_OUT_OF_RANGE: past the end


def test_a_record_past_message_max_bytes_is_message_too_large(db: Path, port: int) -> None:
    """A batch larger than Kafka's default ``message.max.bytes`` (1 MiB of records) is refused
    with MESSAGE_TOO_LARGE, as a broker refuses it; one within it is stored."""
    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "message.max.bytes": 10_000_000})
    got: list[Any] = []
    p.produce("sized", b"x" * 2_000_000, on_delivery=lambda err, msg: got.append(err))
    p.produce("sized", b"y" * 500_000, on_delivery=lambda err, msg: got.append(err))
    p.flush(30)
    codes = sorted(e.code() if e is not None else 0 for e in got)
    assert codes == sorted([0, ck.KafkaError.MSG_SIZE_TOO_LARGE]), got
    assert [len(v) for (_k, v, _ts) in stored(db, "sized").values()] == [500_000]


# -- changing topics: retention, partitions, offsets by spec -----------------------------------


def _retention_ms(admin: Any, topic: str) -> str:
    res = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    return str(admin.describe_configs([res])[res].result(10)["retention.ms"].value)


def test_topic_changes_are_the_logs_and_survive_a_restart(db: Path, loop_thread: LoopThread) -> None:
    """Retention set through IncrementalAlterConfigs/AlterConfigs is what the topic log stores and
    applies, CreatePartitions grows the log's topic, and both survive a restart of the endpoint."""
    topic = "changed"
    ep = create(EndpointConfig(db=db))
    port = loop_thread.start(ep)
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([ck_admin.NewTopic(topic, 2, 1)])[topic].result(10)
        p = ck.Producer({"bootstrap.servers": bootstrap})
        for i in range(10):
            p.produce(topic, b"old %d" % i, partition=i % 2)
        assert p.flush(10) == 0

        op = ck_admin.AlterConfigOpType.SET
        res = ck_admin.ConfigResource(
            ck_admin.ResourceType.TOPIC,
            topic,
            incremental_configs=[ck_admin.ConfigEntry("retention.ms", "60000", incremental_operation=op)],
        )
        admin.incremental_alter_configs([res])[res].result(10)
        assert TopicStore(db).topic(topic).retention_ns == 60_000 * 1_000_000
        assert _retention_ms(admin, topic) == "60000"
        # the log applies it: a minute later every record is gone (offsets stay)
        assert TopicStore(db).apply_retention(time.time_ns() + 61 * 1_000_000_000) >= 10
        c = confluent_consumer(port, "changed-readers")
        for part in (0, 1):
            assert c.get_watermark_offsets(ck.TopicPartition(topic, part), timeout=10) == (5, 5)
        c.close()

        # the legacy AlterConfigs: the configs given replace the topic's
        legacy = ck_admin.ConfigResource(
            ck_admin.ResourceType.TOPIC, topic, set_config={"retention.ms": "-1"}
        )
        with pytest.warns(DeprecationWarning):
            admin.alter_configs([legacy])[legacy].result(10)
        assert TopicStore(db).topic(topic).retention_ns == 0  # kept for ever
        admin.create_partitions([ck_admin.NewPartitions(topic, 3)])[topic].result(10)
        assert TopicStore(db).topic(topic).partitions == 3

        # kafka-python's admin (IncrementalAlterConfigs, CreatePartitions)
        kadmin = kp.KafkaAdminClient(bootstrap_servers=bootstrap)
        kres = kp_admin.ConfigResource(kp_admin.ConfigResourceType.TOPIC, topic, {"retention.ms": "7200000"})
        kadmin.alter_configs([kres])
        kadmin.create_partitions({topic: kp_admin.NewPartitions(4)})
        with pytest.raises(kp_errors.InvalidPartitionsError):
            kadmin.create_partitions({topic: kp_admin.NewPartitions(2)})
        kadmin.close()
        p = ck.Producer({"bootstrap.servers": bootstrap})  # one that knows the new partitions
        for i, ts in enumerate((1_700_000_003_000, 1_700_000_009_000, 1_700_000_001_000, 1_700_000_009_000)):
            p.produce(topic, b"new %d" % i, partition=3, timestamp=ts)
        assert p.flush(10) == 0
    finally:
        loop_thread.call(ep.stop())

    info = TopicStore(db).topic(topic)
    assert (info.partitions, info.retention_ns) == (4, 7_200_000 * 1_000_000)
    ep = create(EndpointConfig(db=db))
    port = loop_thread.start(ep)
    bootstrap = f"127.0.0.1:{port}"
    try:
        admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
        assert _retention_ms(admin, topic) == "7200000"
        assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
        tp = ck.TopicPartition(topic, 3)
        found = admin.list_offsets({tp: ck_admin.OffsetSpec.max_timestamp()})[tp].result(10)
        assert (found.offset, found.timestamp) == (1, 1_700_000_009_000)
        # a changefeed's topic is the changefeed's
        res = ck_admin.ConfigResource(
            ck_admin.ResourceType.TOPIC, FEED_TOPIC, set_config={"retention.ms": "1"}
        )
        with pytest.warns(DeprecationWarning), pytest.raises(ck.KafkaException) as err:
            admin.alter_configs([res])[res].result(10)
        assert err.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
        with pytest.raises(ck.KafkaException) as err:
            admin.create_partitions([ck_admin.NewPartitions(FEED_TOPIC, 9)])[FEED_TOPIC].result(10)
        assert err.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
        assert "DROP CHANGEFEED" in err.value.args[0].str()
        feed = TopicStore(db).topic(FEED_TOPIC)
        assert (feed.partitions, feed.retention_ns) == (3, 24 * 3600 * 1_000_000_000)
    finally:
        loop_thread.call(ep.stop())


def test_topic_changes_need_an_admin(db: Path, auth_port: int) -> None:
    conf = {
        "bootstrap.servers": f"127.0.0.1:{auth_port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "wonderland",
    }
    TopicStore(db).ensure_topic("admins-only", 1)
    admin = ck_admin.AdminClient(conf)
    with pytest.raises(ck.KafkaException) as err:
        admin.create_partitions([ck_admin.NewPartitions("admins-only", 2)])["admins-only"].result(10)
    assert err.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    res = ck_admin.ConfigResource(
        ck_admin.ResourceType.TOPIC,
        "admins-only",
        incremental_configs=[
            ck_admin.ConfigEntry("retention.ms", "1", incremental_operation=ck_admin.AlterConfigOpType.SET)
        ],
    )
    with pytest.raises(ck.KafkaException) as err:
        admin.incremental_alter_configs([res])[res].result(10)
    assert err.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    info = TopicStore(db).topic("admins-only")
    assert (info.partitions, info.retention_ns) == (1, 24 * 3600 * 1_000_000_000)


def test_delete_topics_old_and_flexible_versions(port: int) -> None:
    """DeleteTopics of a changefeed's topic: v1 (non-flexible) answers the code alone, v5
    (flexible: compact strings, tagged fields, response header v1) the reason too."""
    name = FEED_TOPIC.encode()
    old = struct.pack(">i", 1) + struct.pack(">h", len(name)) + name + struct.pack(">i", 5000)
    resp = _exchange(port, _request(20, 1, old))
    _size, _corr, _throttle, n, nlen = struct.unpack(">iiiih", resp[:18])
    (code,) = struct.unpack(">h", resp[18 + nlen : 20 + nlen])
    assert (n, resp[18 : 18 + nlen], code) == (1, name, 44)

    body = bytes([2, len(name) + 1]) + name + struct.pack(">i", 5000) + b"\x00"
    head = struct.pack(">hhih", 20, 5, 7, 4) + b"test" + b"\x00"
    resp = _exchange(port, struct.pack(">i", len(head) + len(body)) + head + body)
    pos = 4 + 4 + 1 + 4  # size, correlation id, header tags, throttle
    assert resp[pos] == 2 and resp[pos + 1] == len(name) + 1  # one result, its compact name
    pos += 2 + len(name)
    (code,) = struct.unpack(">h", resp[pos : pos + 2])
    pos += 2
    length = shift = 0
    while True:  # the message's length + 1, an unsigned varint
        length |= (resp[pos] & 0x7F) << shift
        pos += 1
        shift += 7
        if not resp[pos - 1] & 0x80:
            break
    message = resp[pos : pos + length - 1].decode()
    assert code == 44 and "written by a changefeed" in message and "DROP CHANGEFEED" in message
    assert resp[pos + length - 1 :] == b"\x00\x00"  # the result's and the response's tags


def test_topic_config_values_as_kafka_checks_them() -> None:
    """retention.ms as Kafka parses it, and what the topic log makes of it; fixed configs
    accept the value they have and refuse others (INVALID_CONFIG); duplicates are one
    INVALID_REQUEST."""
    from changefeed.exceptions import InvalidOption, InvalidStatement, UnsupportedFeature
    from changefeed.server.kafka import errors as E, topic_configs as C
    from changefeed.topics import DEFAULT_RETENTION_NS

    ms = 1_000_000
    assert C.parse_retention(" 1000 ") == C.parse_retention("+1000") == 1000 * ms
    assert C.parse_retention("-1") == 0  # kept for ever
    assert C.parse_retention("0") == 1  # Kafka: deleted at the next check; 0 is "for ever" to the log
    assert C.parse_retention(str((1 << 63) - 1)) == 0  # Long.MAX_VALUE: beyond what the log counts
    assert C.retention_ms(0) == "-1" and C.retention_ms(3_600_000 * ms) == "3600000"
    for bad in ("", "1_000", "1e3", "-2", str(1 << 63), None):
        with pytest.raises(InvalidOption):
            C.parse_retention(bad)
    day = DEFAULT_RETENTION_NS
    same = [("cleanup.policy", C.SET, " delete"), ("compression.type", C.SET, " producer")]
    assert C.alter_incrementally(5, same) == 5
    assert C.alter_incrementally(5, [("cleanup.policy", C.APPEND, "delete")]) == 5
    assert C.alter_incrementally(5, [("retention.ms", C.DELETE, None)]) == day
    assert C.replace_all([("max.message.bytes", "1048588")]) == day  # retention back to its default
    for refused in (
        [("cleanup.policy", C.SET, "compact")],
        [("cleanup.policy", C.APPEND, "compact")],
        [("cleanup.policy", C.SUBTRACT, "delete")],
        [("min.insync.replicas", C.SET, "2")],
        [("segment.ms", C.SET, "1000")],
    ):
        with pytest.raises(UnsupportedFeature) as exc:
            C.alter_incrementally(5, refused)
        assert E.error_of(exc.value, E.INVALID_CONFIG) == E.INVALID_CONFIG
    with pytest.raises(InvalidOption, match=re.escape("Unknown topic config name: x.y")):
        C.alter_incrementally(5, [("x.y", C.SET, "1")])
    # Kafka's checks of values come before what the log makes of them, with Kafka's messages
    for configs, message in (
        (
            [("compression.type", "PRODUCER")],
            "String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ([("segment.ms", "0"), ("x.y", "1")], "Unknown topic config name: x.y"),  # names first
        ([("segment.ms", "1000"), ("segment.bytes", "x")], "segment.bytes: Not a number of type INT"),
        (
            [("min.cleanable.dirty.ratio", "-0.5")],
            "Invalid value -0.5 for configuration min.cleanable.dirty.ratio",
        ),
        ([("leader.replication.throttled.replicas", "0:1,x")], "must be the literal '*'"),
        ([("preallocate", None)], "Null value not supported for topic configs: preallocate"),
    ):
        for check in (C.create, C.replace_all):
            with pytest.raises(InvalidOption, match=re.escape(message)):
                check(configs)
    assert C.create([("retention.ms", "60000"), ("cleanup.policy", "delete")]) == 60_000 * ms
    assert C.create([]) == day
    with pytest.raises(UnsupportedFeature, match=re.escape("Topic config preallocate is not supported")):
        C.create([("preallocate", " TRUE ")])
    # DELETE of a config that is not set changes nothing, whatever its name (as in Kafka)
    assert C.alter_incrementally(5, [("x.y", C.DELETE, None), ("segment.ms", C.DELETE, None)]) == 5
    with pytest.raises(
        InvalidOption, match=re.escape("Can't SUBTRACT to key retention.ms because its type is not LIST.")
    ):
        C.alter_incrementally(5, [("retention.ms", C.SUBTRACT, "1")])
    with pytest.raises(InvalidStatement) as dup:
        C.alter_incrementally(5, [("retention.ms", C.SET, "1"), ("retention.ms", C.SET, "2")])
    assert E.error_of(dup.value, E.INVALID_CONFIG) == E.INVALID_REQUEST
