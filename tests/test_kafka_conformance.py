"""One Kafka conformance suite, run against Apache Kafka 4.4 itself and against our endpoint.

Every scenario is parametrized over the two brokers (issue 19): the real KRaft broker of the
session (``kafka_broker`` in conftest) and ``changefeed serve --kafka`` on a fresh database, and
drives them with the same clients: confluent-kafka (librdkafka), kafka-python, and Kafka's own
Java client through its command-line tools (``kafka-topics``, ``kafka-consumer-groups``, the
console producer and consumer, ``GetOffsetShell``, the producer and consumer perf tests), run as
``java -cp build/kafka/libs/* org.apache.kafka.tools.X``. Where our endpoint differs on purpose
(docs/kafka.md: YDB topic names with ``/``, changefeed topics that only DROP CHANGEFEED removes),
the test asserts the documented difference for ``changefeed`` and Kafka's behaviour for ``kafka``.
"""

from __future__ import annotations

import itertools
import os
import re
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin as ck_admin
import crc32c
import kafka as kp
import kafka.admin as kp_admin
import kafka.errors as kp_errors
import pytest

import changefeed
from changefeed.server.kafka.retention import CHECK_INTERVAL_ENV as RETENTION_CHECK_ENV
from changefeed.testing.kafka_broker import KafkaBroker, run_java

KINDS = ("kafka", "changefeed")
_names = itertools.count(1)


@dataclass
class Target:
    kind: str
    bootstrap: str

    @property
    def ours(self) -> bool:
        return self.kind == "changefeed"

    def topic(self, stem: str, partitions: int = 3, config: dict[str, str] | None = None) -> str:
        """A new topic (CreateTopics through confluent-kafka's admin client)."""
        name = f"conf-{stem}-{next(_names)}"
        admin = ck_admin.AdminClient({"bootstrap.servers": self.bootstrap})
        new = ck_admin.NewTopic(name, partitions, 1, config=config or {})
        fut = admin.create_topics([new], operation_timeout=10)
        fut[name].result(30)
        wait_for(lambda: len(admin.list_topics(name, timeout=10).topics[name].partitions) == partitions)
        return name

    def tool(self, cls: str, *args: str, check: bool = True, input_text: str | None = None) -> Any:
        return run_java(
            f"org.apache.kafka.tools.{cls}",
            ["--bootstrap-server", self.bootstrap, *args],
            timeout=180,
            check=check,
            input_text=input_text,
        )


def wait_for(cond: Any, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if cond():
                return
        except Exception:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    """``changefeed serve --kafka`` on a database with a YDB changefeed (topic ``t/f``)."""
    db = tmp_path_factory.mktemp("conformance") / "db"
    conn = changefeed.connect(str(db))
    conn.execute("CREATE TABLE t (id Uint64, v Utf8, PRIMARY KEY (id))")
    conn.execute(
        "ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT='JSON', MODE='UPDATES', TOPIC_MIN_ACTIVE_PARTITIONS=2)"
    )
    conn.close()
    env = {
        **os.environ,
        "PYTHONPATH": str(Path(changefeed.__file__).parents[1]),
        RETENTION_CHECK_ENV: "1000",  # as the real broker's log.retention.check.interval.ms here
    }
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
        yield Target("changefeed", f"127.0.0.1:{int(line.rsplit(':', 1)[1])}")
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(params=KINDS)
def target(request: pytest.FixtureRequest) -> Target:
    if request.param == "kafka":
        broker: KafkaBroker = request.getfixturevalue("kafka_broker")
        return Target("kafka", broker.bootstrap)
    return request.getfixturevalue("ours")  # type: ignore[no-any-return]


def consumer(t: Target, group: str | None = None, **extra: Any) -> Any:
    conf = {
        "bootstrap.servers": t.bootstrap,
        "group.id": group or f"g-{next(_names)}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **extra,
    }
    return ck.Consumer(conf)


def drain(c: Any, n: int, timeout: float = 30.0) -> list[Any]:
    out: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        for m in c.consume(n - len(out), 0.5):
            if m.error() is None:
                out.append(m)
            elif m.error().code() != ck.KafkaError._PARTITION_EOF:
                raise AssertionError(m.error())
    return out


def commit(c: Any) -> None:
    """Commit what ``c`` consumed; a member that got nothing has nothing to commit."""
    try:
        c.commit(asynchronous=False)
    except ck.KafkaException as exc:
        if exc.args[0].code() != ck.KafkaError._NO_OFFSET:
            raise


def produce(t: Target, topic: str, n: int, *, start: int = 0, **conf: Any) -> list[tuple[bytes, bytes]]:
    p = ck.Producer({"bootstrap.servers": t.bootstrap, "linger.ms": 5, **conf})
    msgs = [(f"k{i % 17}".encode(), f"value {i}".encode()) for i in range(start, start + n)]
    failed: list[Any] = []
    for k, v in msgs:
        p.produce(topic, v, k, on_delivery=lambda err, _m: failed.append(err) if err else None)
    assert p.flush(30) == 0
    assert not failed, failed
    return msgs


# -- metadata ----------------------------------------------------------------------------------


def test_metadata(target: Target) -> None:
    topic = target.topic("meta", 3)
    md = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10)
    assert len(md.brokers) == 1
    (broker_id,) = md.brokers
    host, port = target.bootstrap.split(":")
    assert (md.brokers[broker_id].host, md.brokers[broker_id].port) == (host, int(port))
    parts = md.topics[topic].partitions
    assert sorted(parts) == [0, 1, 2]
    assert all(p.leader == broker_id and p.replicas == [broker_id] for p in parts.values())

    kc = kp.KafkaConsumer(bootstrap_servers=target.bootstrap)
    try:
        assert kc.partitions_for_topic(topic) == {0, 1, 2}
        assert topic in kc.topics()
    finally:
        kc.close()

    out = target.tool("TopicCommand", "--describe", "--topic", topic).stdout
    assert re.search(rf"Topic: {re.escape(topic)}\s.*PartitionCount: 3", out), out
    assert len(re.findall(r"Partition: \d+\s+Leader: \d+", out)) == 3, out
    listed = target.tool("TopicCommand", "--list").stdout.split()
    assert topic in listed


# -- produce and fetch -------------------------------------------------------------------------


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_produce_acks_then_fetch(target: Target, acks: str) -> None:
    topic = target.topic(f"acks{acks}", 2)
    sent = produce(target, topic, 200, acks=acks)
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(2)])
    got = drain(c, 200)
    c.close()
    assert sorted((m.key(), m.value()) for m in got) == sorted(sent)
    for p in range(2):
        offs = [m.offset() for m in got if m.partition() == p]
        assert offs == list(range(len(offs)))
    # librdkafka's partitioner put each key in one partition
    assert all(len({m.partition() for m in got if m.key() == k}) == 1 for k, _ in sent)


def test_idempotent_producers(target: Target) -> None:
    topic = target.topic("idem", 1)
    sent = produce(target, topic, 300, **{"enable.idempotence": True, "acks": "all"})
    kprod = kp.KafkaProducer(bootstrap_servers=target.bootstrap, enable_idempotence=True, acks="all")
    for i in range(50):
        kprod.send(topic, key=b"kp", value=f"kp {i}".encode())
    kprod.flush(30)
    kprod.close()
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = drain(c, 350)
    c.close()
    assert [m.value() for m in got] == [v for _, v in sent] + [f"kp {i}".encode() for i in range(50)]


def test_java_console_producer_and_consumer(target: Target) -> None:
    topic = target.topic("console", 1)
    lines = "".join(f"key{i}\tjava value {i}\n" for i in range(20))
    target.tool(
        "ConsoleProducer",
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        "--command-property",
        "acks=all",
        input_text=lines,
    )
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = drain(c, 20)
    c.close()
    assert [(m.key(), m.value()) for m in got] == [
        (f"key{i}".encode(), f"java value {i}".encode()) for i in range(20)
    ]
    produce(target, topic, 10, start=100)
    out = target.tool(
        "consumer.ConsoleConsumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        "30",
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "key.separator=|",
    ).stdout.splitlines()
    assert out[:20] == [f"key{i}|java value {i}" for i in range(20)]
    assert out[20:] == [f"k{i % 17}|value {i}" for i in range(100, 110)]


def test_fetch_from_inside_a_batch_with_headers_and_tombstones(target: Target) -> None:
    """Records produced as one batch, read from an offset inside it by the three clients: a
    fetch returns the whole batch (ours sends it as stored, as Kafka sends its log), the clients
    skip its leading records; headers and null values come back as produced."""
    topic = target.topic("midbatch", 1)
    p = ck.Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 200, "batch.num.messages": 1000})
    for i in range(50):
        value = None if i % 10 == 7 else f"v{i}".encode()
        p.produce(topic, value, f"k{i}".encode(), headers=[("h", f"{i}".encode())] if i % 2 else None)
    assert p.flush(30) == 0
    want = [(f"k{i}".encode(), None if i % 10 == 7 else f"v{i}".encode()) for i in range(20, 50)]
    c = consumer(target, **{"isolation.level": "read_committed"})
    c.assign([ck.TopicPartition(topic, 0, 20)])
    got = drain(c, 30)
    c.close()
    assert [m.offset() for m in got] == list(range(20, 50))
    assert [(m.key(), m.value()) for m in got] == want
    assert [m.headers() for m in got[:2]] == [None, [("h", b"21")]]
    kc = kp.KafkaConsumer(bootstrap_servers=target.bootstrap, enable_auto_commit=False)
    tp = kp.TopicPartition(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 33)
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    while len(seen) < 17 and time.monotonic() < deadline:
        for recs in kc.poll(500).values():
            seen.extend(recs)
    kc.close()
    assert [(r.offset, r.key, r.value) for r in seen] == [(20 + i, k, v) for i, (k, v) in enumerate(want)][
        13:
    ]
    out = target.tool(
        "consumer.ConsoleConsumer",
        "--topic",
        topic,
        "--partition",
        "0",
        "--offset",
        "45",
        "--max-messages",
        "5",
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "key.separator=|",
    ).stdout.splitlines()
    assert out == [f"k{i}|{'null' if i % 10 == 7 else f'v{i}'}" for i in range(45, 50)]


# -- offsets by time ---------------------------------------------------------------------------


def test_offsets_by_time(target: Target) -> None:
    # records of 2023: kept whatever their age (the broker's retention check would delete them
    # whenever it happens to run)
    topic = target.topic("times", 1, {"retention.ms": "-1"})
    base = 1_700_000_000_000
    p = ck.Producer({"bootstrap.servers": target.bootstrap})
    for i in range(10):
        p.produce(topic, f"v{i}".encode(), b"k", partition=0, timestamp=base + 1000 * i)
    assert p.flush(30) == 0
    c = consumer(target)
    got = c.offsets_for_times([ck.TopicPartition(topic, 0, base + 3500)], timeout=10)
    assert got[0].offset == 4
    lo, hi = c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10)
    assert (lo, hi) == (0, 10)
    late = c.offsets_for_times([ck.TopicPartition(topic, 0, base + 99_000)], timeout=10)
    assert late[0].offset == -1  # nothing at or after: Kafka's "end"
    c.close()

    kc = kp.KafkaConsumer(bootstrap_servers=target.bootstrap)
    try:
        tp = kp.TopicPartition(topic, 0)
        found = kc.offsets_for_times({tp: base + 7000})[tp]
        assert (found.offset, found.timestamp) == (7, base + 7000)
        assert kc.beginning_offsets([tp])[tp] == 0
        assert kc.end_offsets([tp])[tp] == 10
    finally:
        kc.close()

    for spec, want in (("-1", 10), ("-2", 0), (str(base + 5000), 5)):
        out = target.tool("GetOffsetShell", "--topic", topic, "--time", spec).stdout.strip()
        assert out == f"{topic}:0:{want}", out


#: Records of partition 0 of :func:`_spec_topic`: timestamps (ms after BASE) out of order, the
#: largest twice (offsets 2 and 4); partition 1 stays empty.
_SPEC_TIMES = (0, 5000, 9000, 2000, 9000, 1000)
_BASE_MS = 1_700_000_000_000


def _spec_topic(t: Target) -> str:
    topic = t.topic("specs", 2, {"retention.ms": "-1"})
    p = ck.Producer({"bootstrap.servers": t.bootstrap})
    for i, d in enumerate(_SPEC_TIMES):
        p.produce(topic, f"v{i}".encode(), b"k", partition=0, timestamp=_BASE_MS + d)
    assert p.flush(30) == 0
    return topic


def test_get_offsets_with_every_time_spec(target: Target) -> None:
    """``kafka-get-offsets --time`` -1 latest, -2 earliest, -3 max timestamp (v7), -4 earliest
    local (v8), -5 latest tiered (v9; without tiered storage: none, so nothing is printed), -6
    earliest pending upload (v11; none), a timestamp, and -7 (no such spec: UNSUPPORTED_VERSION
    for each partition, which the tool skips)."""
    topic = _spec_topic(target)
    want = {
        "-1": [f"{topic}:0:6", f"{topic}:1:0"],
        "-2": [f"{topic}:0:0", f"{topic}:1:0"],
        "-3": [f"{topic}:0:2"],  # the first record of the largest timestamp
        "-4": [f"{topic}:0:0", f"{topic}:1:0"],
        "-5": [],
        "-6": [],
        str(_BASE_MS + 4000): [f"{topic}:0:1"],
    }
    for spec, lines in want.items():
        res = target.tool("GetOffsetShell", "--topic", topic, "--time", spec)
        assert sorted(res.stdout.split()) == lines, (spec, res.stdout, res.stderr[-2000:])
    res = target.tool("GetOffsetShell", "--topic", topic, "--time", "-7")
    assert res.stdout.strip() == "", res.stdout
    assert res.stderr.count("UnsupportedVersionException") == 2, res.stderr[-2000:]

    # confluent-kafka's list_offsets (librdkafka's ListOffsets; max timestamp needs v7)
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    tp = ck.TopicPartition(topic, 0)
    specs = {
        "max": (ck_admin.OffsetSpec.max_timestamp(), (2, _BASE_MS + 9000)),
        "earliest": (ck_admin.OffsetSpec.earliest(), (0, -1)),
        "latest": (ck_admin.OffsetSpec.latest(), (6, -1)),
        "time": (ck_admin.OffsetSpec.for_timestamp(_BASE_MS + 1500), (1, _BASE_MS + 5000)),
    }
    for label, (spec, (offset, ts)) in specs.items():
        got = admin.list_offsets({tp: spec})[tp].result(30)
        assert (got.offset, got.timestamp) == (offset, ts), label
    empty = ck.TopicPartition(topic, 1)
    assert admin.list_offsets({empty: ck_admin.OffsetSpec.max_timestamp()})[empty].result(30).offset == -1


def _flexible_frame(api_key: int, version: int, body: bytes) -> bytes:
    """A request with header v2 (client id, then an empty tagged-field section)."""
    head = struct.pack(">hhi", api_key, version, 7) + struct.pack(">h", 4) + b"test" + b"\x00"
    return struct.pack(">i", len(head) + len(body)) + head + body


def _list_offsets_raw(t: Target, topic: str, version: int, specs: list[tuple[int, int]]) -> list[Any]:
    """One ListOffsets request of ``specs`` ((partition, timestamp)) in ``version`` (flexible
    from 6): each partition's (partition, error, timestamp, offset)."""
    flexible = version >= 6

    def count(n: int) -> bytes:
        return bytes([n + 1]) if flexible else struct.pack(">i", n)

    tags = b"\x00" if flexible else b""
    name = topic.encode()
    body = struct.pack(">i", -1) + (b"\x00" if version >= 2 else b"") + count(1)
    body += (bytes([len(name) + 1]) if flexible else struct.pack(">h", len(name))) + name + count(len(specs))
    for p, ts in specs:
        body += (
            struct.pack(">i", p)
            + (struct.pack(">i", -1) if version >= 4 else b"")
            + struct.pack(">q", ts)
            + tags
        )
    body += tags + (struct.pack(">i", 30000) if version >= 10 else b"") + tags
    host, port = t.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_flexible_frame(2, version, body) if flexible else _frame(2, version, body))
        resp = _answer(s)
    pos = 4 + (1 if flexible else 0) + (4 if version >= 2 else 0)  # correlation id, tags, throttle

    def take(fmt: str) -> Any:
        nonlocal pos
        (v,) = struct.unpack_from(fmt, resp, pos)
        pos += struct.calcsize(fmt)
        return v

    def length() -> int:
        return int(take(">B")) - 1 if flexible else int(take(">i"))

    out = []
    for _ in range(length()):
        n = length() if flexible else take(">h")
        pos += n
        for _ in range(length()):
            row = (take(">i"), take(">h"), take(">q"), take(">q"))
            pos += (4 if version >= 4 else 0) + len(tags)
            out.append(row)
        pos += len(tags)
    return sorted(out)


def test_list_offsets_old_and_flexible_versions(target: Target) -> None:
    """ListOffsets v1 to v11 on the wire: the non-flexible versions older clients use and the
    flexible ones (v6+), each special timestamp from the version that carries it and refused
    (UNSUPPORTED_VERSION, 35) in older ones."""
    topic = _spec_topic(target)
    late = _BASE_MS + 4000
    assert _list_offsets_raw(target, topic, 1, [(0, -1), (1, -2)]) == [(0, 0, -1, 6), (1, 0, -1, 0)]
    assert _list_offsets_raw(target, topic, 5, [(0, late)]) == [(0, 0, _BASE_MS + 5000, 1)]
    assert _list_offsets_raw(target, topic, 5, [(0, -3)]) == [(0, 35, -1, -1)]
    assert _list_offsets_raw(target, topic, 6, [(0, -1), (1, -2)]) == [(0, 0, -1, 6), (1, 0, -1, 0)]
    assert _list_offsets_raw(target, topic, 7, [(0, -3), (1, -4)]) == [
        (0, 0, _BASE_MS + 9000, 2),
        (1, 35, -1, -1),
    ]
    assert _list_offsets_raw(target, topic, 8, [(0, -4), (1, -3)]) == [(0, 0, -1, 0), (1, 0, -1, -1)]
    assert _list_offsets_raw(target, topic, 9, [(0, -5), (1, -6)]) == [(0, 0, -1, -1), (1, 35, -1, -1)]
    assert _list_offsets_raw(target, topic, 11, [(0, -6), (1, -7)]) == [(0, 0, -1, -1), (1, 35, -1, -1)]
    assert _list_offsets_raw(target, topic, 11, [(0, late)]) == [(0, 0, _BASE_MS + 5000, 1)]


# -- consumer groups ---------------------------------------------------------------------------


def test_group_rebalances_and_resumes_from_commits(target: Target) -> None:
    topic = target.topic("grp", 4)
    produce(target, topic, 400)
    group = f"rebal-{next(_names)}"
    conf = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 500}
    a = consumer(target, group, **conf)
    b = consumer(target, group, **conf)
    a.subscribe([topic])
    b.subscribe([topic])
    seen: list[Any] = []

    def both_assigned() -> bool:
        for c in (a, b):
            seen.extend(m for m in c.consume(50, 0.2) if m.error() is None)
        pa, pb = {tp.partition for tp in a.assignment()}, {tp.partition for tp in b.assignment()}
        return bool(pa) and bool(pb) and not pa & pb and pa | pb == {0, 1, 2, 3}

    wait_for(both_assigned, 60, "both members assigned")

    def unique() -> int:
        return len({(m.partition(), m.offset()) for m in seen})

    def all_read() -> bool:
        for c in (a, b):
            seen.extend(m for m in c.consume(100, 0.2) if m.error() is None)
        return unique() == 400

    wait_for(all_read, 60, "every record read")
    for c in (a, b):
        commit(c)
    b.close()  # LeaveGroup: a takes every partition

    def a_has_all() -> bool:
        seen.extend(m for m in a.consume(50, 0.2) if m.error() is None)
        return {tp.partition for tp in a.assignment()} == {0, 1, 2, 3}

    wait_for(a_has_all, 60, "the survivor owns every partition")
    a.close()
    assert unique() == 400

    # kafka-python in the same group resumes from the committed offsets: nothing left
    produce(target, topic, 8, start=1000)
    kc = kp.KafkaConsumer(
        topic,
        bootstrap_servers=target.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=8000,
    )
    rest = [m.value for m in kc]
    kc.close()
    assert sorted(rest) == sorted(f"value {i}".encode() for i in range(1000, 1008))


# -- admin -------------------------------------------------------------------------------------


def test_topic_admin(target: Target) -> None:
    name = f"conf-admin-{next(_names)}"
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    fut = admin.create_topics([ck_admin.NewTopic(name, 2, 1, config={"retention.ms": "3600000"})])
    fut[name].result(30)
    again = admin.create_topics([ck_admin.NewTopic(name, 2, 1)])
    with pytest.raises(ck.KafkaException) as err:
        again[name].result(30)
    assert err.value.args[0].code() == ck.KafkaError.TOPIC_ALREADY_EXISTS
    res = admin.describe_configs([ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, name)])
    (cfg,) = res.values()
    assert cfg.result(30)["retention.ms"].value == "3600000"

    kadmin = kp_admin.KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        assert name in kadmin.list_topics()
        kadmin.delete_topics([name])
        wait_for(lambda: name not in kadmin.list_topics(), what="topic deleted")
    finally:
        kadmin.close()

    jname = f"conf-java-{next(_names)}"
    target.tool(
        "TopicCommand", "--create", "--topic", jname, "--partitions", "2", "--replication-factor", "1"
    )
    assert "PartitionCount: 2" in target.tool("TopicCommand", "--describe", "--topic", jname).stdout
    target.tool("TopicCommand", "--delete", "--topic", jname)
    wait_for(lambda: jname not in target.tool("TopicCommand", "--list").stdout.split(), what="java delete")


def _configs(t: Target, topic: str) -> dict[str, tuple[str, Any]]:
    admin = ck_admin.AdminClient({"bootstrap.servers": t.bootstrap})
    res = ck_admin.ConfigResource(ck_admin.ResourceType.TOPIC, topic)
    return {k: (v.value, v.source) for k, v in admin.describe_configs([res])[res].result(30).items()}


def _dynamic(t: Target, topic: str) -> list[str]:
    """What ``kafka-configs --describe`` lists as the topic's dynamic configs."""
    out = t.tool("ConfigCommand", "--describe", "--entity-type", "topics", "--entity-name", topic).stdout
    return [line.split()[0] for line in out.splitlines()[1:] if line.strip()]


def test_kafka_configs_alters_retention(target: Target) -> None:
    """``kafka-configs --alter --add-config/--delete-config retention.ms`` (IncrementalAlterConfigs),
    confluent-kafka's incremental_alter_configs and alter_configs (the legacy AlterConfigs: the
    configs given replace the topic's), and the values Kafka refuses, with Kafka's messages."""
    topic = target.topic("cfg", 1)
    dynamic = ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    def alter(*args: str, check: bool = True) -> Any:
        base = ("--alter", "--entity-type", "topics", "--entity-name", topic)
        return target.tool("ConfigCommand", *base, *args, check=check)

    assert "Completed updating config" in alter("--add-config", "retention.ms=3600000").stdout
    assert _dynamic(target, topic) == ["retention.ms=3600000"]
    assert _configs(target, topic)["retention.ms"] == ("3600000", dynamic)
    refused = {
        "retention.ms=abc": "InvalidConfigurationException: Invalid value abc for configuration retention.ms: "
        "Not a number of type LONG",
        "retention.ms=-2": "InvalidConfigurationException: Invalid value -2 for configuration retention.ms: "
        "Value must be at least -1",
        "no.such.config=1": "InvalidConfigurationException: Unknown topic config name: no.such.config",
    }
    for config, message in refused.items():
        res = alter("--add-config", config, check=False)
        assert res.returncode == 1 and message in res.stdout + res.stderr, (config, res.stdout, res.stderr)
    assert _dynamic(target, topic) == ["retention.ms=3600000"]  # nothing half applied
    missing = target.tool(
        "ConfigCommand",
        "--alter",
        "--entity-type",
        "topics",
        "--entity-name",
        f"no-such-{topic}",
        "--add-config",
        "retention.ms=1000",
        check=False,
    )
    assert "UnknownTopicOrPartitionException" in missing.stdout + missing.stderr
    alter("--delete-config", "retention.ms")
    assert _dynamic(target, topic) == []

    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    T = ck_admin.ResourceType.TOPIC
    op = ck_admin.AlterConfigOpType
    res = ck_admin.ConfigResource(
        T,
        topic,
        incremental_configs=[ck_admin.ConfigEntry("retention.ms", "-1", incremental_operation=op.SET)],
    )
    admin.incremental_alter_configs([res])[res].result(30)
    assert _configs(target, topic)["retention.ms"] == ("-1", dynamic)
    res = ck_admin.ConfigResource(
        T,
        topic,
        incremental_configs=[ck_admin.ConfigEntry("retention.ms", "5", incremental_operation=op.APPEND)],
    )
    with pytest.raises(ck.KafkaException) as err:
        admin.incremental_alter_configs([res])[res].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    assert "Can't APPEND to key retention.ms because its type is not LIST." in err.value.args[0].str()
    legacy = ck_admin.ConfigResource(T, topic, set_config={"retention.ms": "7200000"})
    with pytest.warns(DeprecationWarning):
        admin.alter_configs([legacy])[legacy].result(30)
    assert _configs(target, topic)["retention.ms"] == ("7200000", dynamic)
    # validate_only changes nothing
    res = ck_admin.ConfigResource(
        T,
        topic,
        incremental_configs=[ck_admin.ConfigEntry("retention.ms", "60000", incremental_operation=op.SET)],
    )
    admin.incremental_alter_configs([res], validate_only=True)[res].result(30)
    assert _configs(target, topic)["retention.ms"][0] == "7200000"

    # A config Kafka takes but the topic log cannot honour: ours refuses it (INVALID_CONFIG)
    res = alter("--add-config", "segment.bytes=1048576", check=False)
    if target.ours:
        assert res.returncode == 1 and "InvalidConfigurationException" in res.stdout + res.stderr, res.stdout
        assert "segment.bytes is not supported" in res.stdout + res.stderr
    else:
        assert res.returncode == 0, res.stdout + res.stderr


#: Topic configs both brokers refuse, with Kafka 4.4's INVALID_CONFIG message: names first, then
#: each value by its type and validator.
_REFUSED_CONFIGS: tuple[tuple[dict[str, str], str], ...] = (
    ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"retention.ms": "abc", "no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ({"segment.bytes": "abc"}, "Invalid value abc for configuration segment.bytes: Not a number of type INT"),
    (
        {"segment.bytes": "10"},
        "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576",
    ),
    (
        {"cleanup.policy": "foo"},
        "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete",
    ),
    ({"cleanup.policy": "delete,"}, "Configuration 'cleanup.policy' values must not be empty."),
    (
        {"compression.type": "Producer"},
        "Invalid value Producer for configuration compression.type: String must be one of: uncompressed, "
        "zstd, lz4, snappy, gzip, producer",
    ),
    (
        {"max.message.bytes": "-5"},
        "Invalid value -5 for configuration max.message.bytes: Value must be at least 0",
    ),
    (
        {"max.message.bytes": "2147483648"},
        "Invalid value 2147483648 for configuration max.message.bytes: Not a number of type INT",
    ),
    (
        {"retention.bytes": "1k"},
        "Invalid value 1k for configuration retention.bytes: Not a number of type LONG",
    ),
    ({"retention.ms": "-2"}, "Invalid value -2 for configuration retention.ms: Value must be at least -1"),
    (
        {"min.insync.replicas": "0"},
        "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1",
    ),
    (
        {"min.cleanable.dirty.ratio": "2"},
        "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1",
    ),
    (
        {"preallocate": "maybe"},
        "Invalid value maybe for configuration preallocate: Expected value to be either true or false",
    ),
    (
        {"compression.gzip.level": "20"},
        "Invalid value 20 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1",
    ),
)

#: Topic configs Kafka takes whose semantics the topic log does not have: ours refuses them.
_UNSUPPORTED_CONFIGS: tuple[dict[str, str], ...] = (
    {"cleanup.policy": "compact"},
    {"cleanup.policy": "delete,compact"},
    {"max.message.bytes": "2000000"},
    {"retention.bytes": "1000000"},
    {"message.timestamp.type": "LogAppendTime"},
    {"compression.type": "gzip"},
    {"segment.bytes": "1048576"},
    {"min.compaction.lag.ms": "0"},
)


def _create_error(admin: Any, name: str, config: dict[str, str], validate_only: bool) -> Any:
    """The error CreateTopics answers for topic ``name`` with ``config`` (None: created)."""
    fut = admin.create_topics([ck_admin.NewTopic(name, 1, 1, config=config)], validate_only=validate_only)
    try:
        fut[name].result(30)
    except ck.KafkaException as exc:
        return exc.args[0]
    return None


def test_create_topics_checks_configs_as_kafka_does(target: Target) -> None:
    """CreateTopics (and its validateOnly) refuses unknown config names and invalid values with
    Kafka's INVALID_CONFIG messages, on both, and creates nothing; configs whose semantics the
    topic log does not have are refused by ours (INVALID_CONFIG saying so) where Kafka takes them;
    what the log holds is accepted and reported by DescribeConfigs."""
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    refused: list[str] = []
    for config, message in _REFUSED_CONFIGS:
        for validate_only in (True, False):
            name = f"conf-badcfg-{next(_names)}"
            refused.append(name)
            err = _create_error(admin, name, config, validate_only)
            assert err is not None, config
            assert (err.code(), err.str()) == (ck.KafkaError.INVALID_CONFIG, message), (config, err)
    unsupported: list[str] = []
    for config in _UNSUPPORTED_CONFIGS:
        name = f"conf-unsupported-{next(_names)}"
        unsupported.append(name)
        err = _create_error(admin, name, config, validate_only=False)
        if target.ours:
            assert err is not None and err.code() == ck.KafkaError.INVALID_CONFIG, config
            assert f"Topic config {next(iter(config))}" in err.str() and "is not supported" in err.str(), err
        else:
            assert err is None, (config, err)
    if not target.ours:
        wait_for(lambda: set(unsupported) <= set(admin.list_topics(timeout=10).topics), what="created")
    listed = admin.list_topics(timeout=10).topics
    assert [n for n in refused if n in listed] == []  # a refused CreateTopics creates nothing
    assert [n for n in unsupported if n in listed] == ([] if target.ours else unsupported)

    # What the topic log holds, spelled as Kafka reads it (blanks around a value are ignored)
    held = {
        "retention.ms": " 60000 ",
        "cleanup.policy": "delete",
        "compression.type": "producer",
        "message.timestamp.type": "CreateTime",
        "max.message.bytes": "1048588",
        "min.insync.replicas": "1",
        "retention.bytes": "-1",
    }
    name = f"conf-held-{next(_names)}"
    assert _create_error(admin, name, held, validate_only=True) is None
    assert name not in admin.list_topics(timeout=10).topics  # validateOnly creates nothing
    assert _create_error(admin, name, held, validate_only=False) is None
    wait_for(lambda: name in admin.list_topics(name, timeout=10).topics, what="created")
    described = _configs(target, name)
    assert {k: described[k][0] for k in held} == {k: v.strip() for k, v in held.items()}

    # kafka-topics --create --config: the same checks through the Java admin client
    jname = f"conf-javacfg-{next(_names)}"
    create = ("TopicCommand", "--create", "--topic", jname, "--partitions", "1", "--replication-factor", "1")
    res = target.tool(*create, "--config", "segment.bytes=10", check=False)
    assert res.returncode == 1, res.stdout
    assert (
        "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"
        in res.stdout + res.stderr
    )
    res = target.tool(*create, "--config", "cleanup.policy=compact", check=False)
    if target.ours:
        assert res.returncode == 1 and "InvalidConfigurationException" in res.stdout + res.stderr, res.stdout
        assert "cleanup.policy=compact is not supported" in res.stdout + res.stderr
        assert jname not in target.tool("TopicCommand", "--list").stdout.split()
    else:
        assert res.returncode == 0, res.stdout + res.stderr


def test_alter_configs_checks_values_as_kafka_does(target: Target) -> None:
    """IncrementalAlterConfigs and AlterConfigs refuse what CreateTopics refuses, with the same
    messages on both, and change nothing; DELETE of a config that is not set (an unknown name
    too) is accepted, as Kafka accepts it."""
    topic = target.topic("altercfg", 1, config={"retention.ms": "3600000"})
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    T = ck_admin.ResourceType.TOPIC
    op = ck_admin.AlterConfigOpType

    def incremental(*entries: tuple[str, str | None, Any]) -> Any:
        res = ck_admin.ConfigResource(
            T,
            topic,
            incremental_configs=[ck_admin.ConfigEntry(k, v, incremental_operation=o) for k, v, o in entries],
        )
        try:
            admin.incremental_alter_configs([res])[res].result(30)
        except ck.KafkaException as exc:
            return exc.args[0]
        return None

    for config, message in _REFUSED_CONFIGS:
        err = incremental(*((k, v, op.SET) for k, v in config.items()))
        assert err is not None and (err.code(), err.str()) == (ck.KafkaError.INVALID_CONFIG, message), config
    err = incremental(("cleanup.policy", "foo", op.APPEND))
    assert err is not None and err.str() == (
        "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"
    )
    assert incremental(("no.such.config", None, op.DELETE), ("segment.ms", None, op.DELETE)) is None
    legacy = ck_admin.ConfigResource(T, topic, set_config={"retention.ms": "7200000", "segment.bytes": "10"})
    with pytest.warns(DeprecationWarning), pytest.raises(ck.KafkaException) as raised:
        admin.alter_configs([legacy])[legacy].result(30)
    assert raised.value.args[0].str() == (
        "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"
    )
    unsupported = incremental(("retention.ms", "60000", op.SET), ("cleanup.policy", "compact", op.APPEND))
    if target.ours:
        assert unsupported is not None and unsupported.code() == ck.KafkaError.INVALID_CONFIG
        assert "cleanup.policy=delete,compact is not supported" in unsupported.str(), unsupported.str()
        assert _configs(target, topic)["retention.ms"][0] == "3600000"  # nothing half applied
        assert _configs(target, topic)["cleanup.policy"][0] == "delete"
    else:
        assert unsupported is None
        assert _configs(target, topic)["retention.ms"][0] == "60000"


def test_retention_deletes_expired_records_and_moves_the_log_start(target: Target) -> None:
    """The broker applies retention.ms on its own (both run their check every second here:
    Kafka's log.retention.check.interval.ms, ours CHANGEFEED_KAFKA_RETENTION_CHECK_INTERVAL_MS):
    the expired records go, ListOffsets earliest moves to the next offset, a fetch below it is
    OFFSET_OUT_OF_RANGE, and the partition continues at the same offset."""
    topic = target.topic("retention", 1, config={"retention.ms": "2000"})
    producer = ck.Producer({"bootstrap.servers": target.bootstrap})
    for i in range(5):
        producer.produce(topic, b"old-%d" % i, partition=0)
    assert producer.flush(10) == 0
    c = consumer(target)
    tp = ck.TopicPartition(topic, 0)
    assert c.get_watermark_offsets(tp, timeout=10, cached=False) == (0, 5)
    wait_for(lambda: c.get_watermark_offsets(tp, timeout=10, cached=False) == (5, 5), 60, "retention")
    assert target.tool("GetOffsetShell", "--topic", topic, "--time", "-2").stdout.split() == [f"{topic}:0:5"]
    c.close()
    strict = consumer(target, **{"auto.offset.reset": "error"})
    strict.assign([ck.TopicPartition(topic, 0, 0)])
    deadline, err = time.monotonic() + 20, None
    while err is None and time.monotonic() < deadline:
        m = strict.poll(0.5)
        if m is not None:
            err = m.error()
    strict.close()
    assert err is not None and err.code() == ck.KafkaError._AUTO_OFFSET_RESET, err
    assert "Offset out of range" in err.str(), err.str()
    producer.produce(topic, b"new", partition=0)
    assert producer.flush(10) == 0
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    (m,) = drain(c, 1)
    c.close()
    assert (m.offset(), m.value()) == (5, b"new")


def test_kafka_topics_alter_partitions(target: Target) -> None:
    """``kafka-topics --alter --partitions`` (CreatePartitions) grows a topic; the new partitions
    take records; not growing is INVALID_PARTITIONS with Kafka's messages."""
    topic = target.topic("grow", 2)
    produce(target, topic, 20)
    target.tool("TopicCommand", "--alter", "--topic", topic, "--partitions", "4")
    out = target.tool("TopicCommand", "--describe", "--topic", topic).stdout
    assert "PartitionCount: 4" in out and len(re.findall(r"Partition: \d+\s+Leader: 1", out)) == 4, out
    for count, message in (
        ("4", "InvalidPartitionsException: Topic already has 4 partition(s)."),
        (
            "3",
            f"InvalidPartitionsException: The topic {topic} currently has 4 partition(s); 3 would not be an increase.",
        ),
    ):
        res = target.tool("TopicCommand", "--alter", "--topic", topic, "--partitions", count, check=False)
        assert res.returncode == 1 and message in res.stdout + res.stderr, (count, res.stdout, res.stderr)

    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    admin.create_partitions([ck_admin.NewPartitions(topic, 5)])[topic].result(30)
    wait_for(lambda: len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 5)
    p = ck.Producer({"bootstrap.servers": target.bootstrap})
    for part in (3, 4):
        p.produce(topic, b"new %d" % part, partition=part)
    assert p.flush(30) == 0
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, part, ck.OFFSET_BEGINNING) for part in (3, 4)])
    assert sorted(m.value() for m in drain(c, 2)) == [b"new 3", b"new 4"]
    c.close()
    with pytest.raises(ck.KafkaException) as err:
        admin.create_partitions([ck_admin.NewPartitions(topic, 2)])[topic].result(30)
    assert err.value.args[0].code() == ck.KafkaError.INVALID_PARTITIONS


def _committed_group(t: Target, topic: str, n: int, group: str, consume: int) -> None:
    c = consumer(t, group)
    c.subscribe([topic])
    try:
        drain(c, consume)
        commit(c)
    finally:
        c.close()


def test_consumer_group_admin_confluent(target: Target) -> None:
    topic = target.topic("cgadm", 2)
    produce(target, topic, 100)
    group = f"cgadm-{next(_names)}"
    _committed_group(target, topic, 100, group, 100)
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})

    listed = admin.list_consumer_groups(request_timeout=10).result(30)
    assert group in {g.group_id for g in listed.valid}
    (g,) = [g for g in listed.valid if g.group_id == group]
    assert g.state == ck.ConsumerGroupState.EMPTY

    # a live member: describe shows it with its assignment
    live = consumer(target, group)
    live.subscribe([topic])
    wait_for(lambda: live.poll(0.2) is None and len(live.assignment()) == 2, 60, "assignment")
    desc = admin.describe_consumer_groups([group], request_timeout=10)[group].result(30)
    assert desc.state == ck.ConsumerGroupState.STABLE
    assert desc.partition_assignor in ("range", "roundrobin", "cooperative-sticky", "uniform", "")
    (member,) = desc.members
    assert {tp.partition for tp in member.assignment.topic_partitions} == {0, 1}
    live.close()

    offs = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)])[group].result(30)
    committed = {tp.partition: tp.offset for tp in offs.topic_partitions if tp.topic == topic}
    lo_hi = {
        p: consumer(target).get_watermark_offsets(ck.TopicPartition(topic, p), timeout=10) for p in (0, 1)
    }
    assert committed == {p: hi for p, (_, hi) in lo_hi.items()}

    # reset: alter offsets to the beginning, then delete one partition's offset (OffsetDelete)
    wait_for(
        lambda: (
            admin.describe_consumer_groups([group])[group].result(30).state == ck.ConsumerGroupState.EMPTY
        ),
        60,
        "group empty",
    )
    altered = admin.alter_consumer_group_offsets(
        [ck.ConsumerGroupTopicPartitions(group, [ck.TopicPartition(topic, p, 0) for p in (0, 1)])]
    )[group].result(30)
    assert {tp.offset for tp in altered.topic_partitions} == {0}
    kadmin = kp_admin.KafkaAdminClient(bootstrap_servers=target.bootstrap)  # OffsetDelete
    try:
        deleted = kadmin.delete_group_offsets(group, [kp.TopicPartition(topic, 1)])
    finally:
        kadmin.close()
    assert {tp.partition: err.errno for tp, err in deleted.items()} == {1: 0}, deleted
    offs = admin.list_consumer_group_offsets([ck.ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {
        tp.partition: tp.offset for tp in offs.topic_partitions if tp.topic == topic and tp.offset >= 0
    } == {0: 0}

    admin.delete_consumer_groups([group])[group].result(30)
    listed = admin.list_consumer_groups(request_timeout=10).result(30)
    assert group not in {g.group_id for g in listed.valid}
    with pytest.raises(ck.KafkaException) as err:
        admin.delete_consumer_groups([group])[group].result(30)
    assert err.value.args[0].code() == ck.KafkaError.GROUP_ID_NOT_FOUND


def test_consumer_group_admin_kafka_python(target: Target) -> None:
    topic = target.topic("kpadm", 2)
    produce(target, topic, 50)
    group = f"kpadm-{next(_names)}"
    _committed_group(target, topic, 50, group, 50)
    admin = kp_admin.KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        groups = admin.list_groups()
        assert {"group_id": group, "protocol_type": "consumer", "group_state": "Empty"}.items() <= next(
            g for g in groups if g["group_id"] == group
        ).items(), groups
        desc = admin.describe_groups([group])[group]
        assert (desc["group_state"], desc["protocol_type"], desc["members"], desc["error"]) == (
            "Empty",
            "consumer",
            [],
            None,
        ), desc
        offs = admin.list_group_offsets({group: None})[group]
        assert sum(o.offset for tp, o in offs.items() if tp.topic == topic) == 50, offs
        assert admin.delete_groups([group]) == {group: "OK"}
        assert group not in {g["group_id"] for g in admin.list_groups()}
        assert admin.delete_groups([group]) == {group: "GroupIdNotFoundError"}
    finally:
        admin.close()


def test_kafka_consumer_groups_tool(target: Target) -> None:
    topic = target.topic("cgtool", 2)
    produce(target, topic, 60)
    group = f"cgtool-{next(_names)}"
    _committed_group(target, topic, 60, group, 40)

    listed = target.tool("consumer.group.ConsumerGroupCommand", "--list").stdout
    assert group in listed.split(), listed

    out = target.tool("consumer.group.ConsumerGroupCommand", "--describe", "--group", group).stdout
    rows = [line.split() for line in out.splitlines() if line.startswith(group)]
    assert {r[1] for r in rows} == {topic}
    # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG ...
    lag = sum(int(r[5]) for r in rows)
    assert sum(int(r[4]) for r in rows) == 60
    assert lag == 60 - sum(int(r[3]) for r in rows) == 20

    out = target.tool(
        "consumer.group.ConsumerGroupCommand",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    ).stdout
    assert re.findall(rf"{re.escape(group)}\s+{re.escape(topic)}\s+\d+\s+0", out), out
    c = consumer(target)
    offs = c.committed([ck.TopicPartition(topic, p) for p in (0, 1)], timeout=10)
    c.close()
    c2 = ck.Consumer({"bootstrap.servers": target.bootstrap, "group.id": group, "enable.auto.commit": False})
    assert [tp.offset for tp in c2.committed([ck.TopicPartition(topic, p) for p in (0, 1)], timeout=10)] == [
        0,
        0,
    ]
    c2.close()
    del offs

    out = target.tool(
        "consumer.group.ConsumerGroupCommand",
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:1",
        "--to-offset",
        "3",
        "--execute",
    ).stdout
    assert re.search(rf"{re.escape(topic)}\s+1\s+3", out), out

    out = target.tool(
        "consumer.group.ConsumerGroupCommand", "--delete-offsets", "--group", group, "--topic", topic
    ).stdout
    assert "Request succeed" in out or "Successful" in out or topic in out, out

    out = target.tool("consumer.group.ConsumerGroupCommand", "--delete", "--group", group).stdout
    assert f"'{group}'" in out and "successful" in out.lower(), out
    assert group not in target.tool("consumer.group.ConsumerGroupCommand", "--list").stdout.split()


# -- Kafka's perf tools (a smoke run; the figures are benchmarks/kafka_broker_bench.py's) --------


def test_perf_tools_run(target: Target) -> None:
    topic = target.topic("perf", 2)
    out = target.tool(
        "ProducerPerformance",
        "--topic",
        topic,
        "--num-records",
        "5000",
        "--record-size",
        "100",
        "--throughput",
        "-1",
        "--producer-props",
        "acks=all",
    ).stdout
    assert re.search(r"5000 records sent, [\d.]+ records/sec", out), out
    out = target.tool(
        "ConsumerPerformance", "--topic", topic, "--num-records", "5000", "--timeout", "60000"
    ).stdout
    summary = [ln for ln in out.splitlines() if re.match(r"\d{4}-\d\d-\d\d", ln)]
    assert summary and int(float(summary[-1].split(",")[4])) == 5000, out


# -- errors ------------------------------------------------------------------------------------


def test_unknown_topic(target: Target) -> None:
    """Clients that do not ask for auto-creation get UNKNOWN_TOPIC_OR_PARTITION; Kafka's tools
    say the topic does not exist."""
    name = f"conf-missing-{next(_names)}"
    kadmin = kp_admin.KafkaAdminClient(bootstrap_servers=target.bootstrap)
    try:
        with pytest.raises(kp_errors.UnknownTopicOrPartitionError):
            kadmin.delete_topics([name])
        assert name not in kadmin.list_topics()
    finally:
        kadmin.close()
    res = target.tool("TopicCommand", "--describe", "--topic", name, check=False)
    assert res.returncode == 1
    assert f"Topic '{name}' does not exist as expected" in res.stdout + res.stderr, res


def test_producing_to_an_unknown_topic_answers_at_once(target: Target) -> None:
    """A producer's metadata request asks for auto-creation; both brokers create the topic
    (Kafka's auto.create.topics.enable, num.partitions) and the message is delivered at once."""
    name = f"conf-auto-{next(_names)}"
    p = ck.Producer({"bootstrap.servers": target.bootstrap})
    got: list[Any] = []
    start = time.monotonic()
    p.produce(name, b"first", b"k", on_delivery=lambda err, msg: got.append((err, time.monotonic() - start)))
    p.flush(20)
    assert len(got) == 1 and got[0][0] is None, got
    assert got[0][1] < 5.0
    md = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(name, timeout=10)
    assert md.topics[name].error is None and md.topics[name].partitions
    # An illegal name is refused at once too.
    bad: list[Any] = []
    p.produce("bad name!", b"x", on_delivery=lambda err, msg: bad.append(err))
    p.flush(20)
    assert bad and bad[0] is not None and time.monotonic() - start < 15, bad


def _frame(api_key: int, version: int, body: bytes, correlation: int = 7) -> bytes:
    head = struct.pack(">hhi", api_key, version, correlation) + struct.pack(">h", 4) + b"test"
    return struct.pack(">i", len(head) + len(body)) + head + body


def _answer(sock: socket.socket) -> bytes:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return b""
        head += chunk
    (n,) = struct.unpack(">i", head)
    body = b""
    while len(body) < n:
        chunk = sock.recv(n - len(body))
        if not chunk:
            break
        body += chunk
    return body


@pytest.mark.parametrize(
    "bad",
    [
        _frame(9999, 0, b""),  # an API that does not exist
        _frame(3, 8, b"\x00\x00\x00\x05\x00"),  # Metadata truncated mid-array
        struct.pack(">i", 2) + b"\x00\x03",  # a frame shorter than its header
    ],
    ids=["unknown-api", "truncated-body", "short-header"],
)
def test_bad_requests_close_the_connection(target: Target, bad: bytes) -> None:
    host, port = target.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_frame(18, 0, b""))  # ApiVersions v0 first: the connection works
        first = _answer(s)
        assert struct.unpack(">ih", first[:6]) == (7, 0)
        s.sendall(bad)
        assert _answer(s) == b""  # the broker closed the connection without an answer
    # and the broker goes on serving others
    assert ck_admin.AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10).brokers


# -- compressed produce ------------------------------------------------------------------------

CODECS = ("snappy", "lz4", "zstd")
_CODEC_ID = {"gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def _produce_raw(t: Target, topic: str, version: int, batch: bytes) -> int:
    """One Produce request (v3..v8, not flexible) of ``batch`` to partition 0: its error code."""
    name = topic.encode()
    parts = struct.pack(">ii", 1, 0) + struct.pack(">i", len(batch)) + batch
    body = struct.pack(">hhi", -1, -1, 30_000) + struct.pack(">ih", 1, len(name)) + name + parts
    host, port = t.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(_frame(0, version, body))
        answer = _answer(s)
    # correlation id, topic count, topic name, partition count, partition index, then the error
    (error,) = struct.unpack_from(">h", answer, 4 + 4 + 2 + len(name) + 4 + 4)
    return int(error)


def _fetched_codecs(t: Target, topic: str) -> list[int]:
    """The codec of every batch a Fetch (v4) of partition 0 from offset 0 returns."""
    name = topic.encode()
    body = struct.pack(">iiiib", -1, 1000, 1, 10_000_000, 0) + struct.pack(">ih", 1, len(name)) + name
    body += struct.pack(">iiqi", 1, 0, 0, 10_000_000)
    host, port = t.bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(_frame(1, 4, body))
        answer = _answer(s)
    # correlation, throttle, topics, name, partitions, index, error, hw, last stable, aborted
    pos = 4 + 4 + 4 + 2 + len(name) + 4 + 4
    (error,) = struct.unpack_from(">h", answer, pos)
    assert error == 0
    pos += 2 + 8 + 8
    (aborted,) = struct.unpack_from(">i", answer, pos)
    pos += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", answer, pos)
    records = answer[pos + 4 : pos + 4 + size]
    codecs: list[int] = []
    at = 0
    while at + 61 <= len(records):
        (length,) = struct.unpack_from(">i", records, at + 8)
        (attributes,) = struct.unpack_from(">h", records, at + 21)
        codecs.append(attributes & 7)
        at += 12 + length
    return codecs


def test_compressed_produce_with_every_codec(target: Target) -> None:
    """Batches compressed with snappy, lz4 and zstd by librdkafka and by Kafka's Java client
    (the console producer's ``--compression-codec``), read back by confluent-kafka, kafka-python
    and the Java console consumer; a Fetch returns them compressed, as produced."""
    topic = target.topic("codecs", 1)
    want: list[tuple[bytes, bytes]] = []
    for codec in CODECS:
        p = ck.Producer({"bootstrap.servers": target.bootstrap, "linger.ms": 50, "compression.type": codec})
        rows = [
            (f"{codec}-c{i}".encode(), f"{codec} from librdkafka, record {i} ".encode() * 3)
            for i in range(20)
        ]
        for k, v in rows:
            p.produce(topic, v, k)
        assert p.flush(30) == 0
        lines = [(f"{codec}-j{i}", f"{codec} from java record {i}") for i in range(20)]
        target.tool(
            "ConsoleProducer",
            "--topic",
            topic,
            "--compression-codec",
            codec,
            "--reader-property",
            "parse.key=true",
            input_text="".join(f"{k}\t{v}\n" for k, v in lines),
        )
        want += rows + [(k.encode(), v.encode()) for k, v in lines]
    # stored and fetched as produced: every batch compressed, in the order of the codecs
    got_codecs = _fetched_codecs(target, topic)
    assert [c for i, c in enumerate(got_codecs) if i == 0 or got_codecs[i - 1] != c] == [
        _CODEC_ID[c] for c in CODECS
    ]
    c = consumer(target)
    c.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
    got = drain(c, len(want))
    c.close()
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(i, k, v) for i, (k, v) in enumerate(want)]
    kc = kp.KafkaConsumer(bootstrap_servers=target.bootstrap, enable_auto_commit=False)
    tp = kp.TopicPartition(topic, 0)
    kc.assign([tp])
    kc.seek(tp, 0)
    seen: list[Any] = []
    deadline = time.monotonic() + 30
    while len(seen) < len(want) and time.monotonic() < deadline:
        for recs in kc.poll(500).values():
            seen.extend(recs)
    kc.close()
    assert [(r.key, r.value) for r in seen] == want
    out = target.tool(
        "consumer.ConsoleConsumer",
        "--topic",
        topic,
        "--from-beginning",
        "--max-messages",
        str(len(want)),
        "--timeout-ms",
        "30000",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "key.separator=|",
    ).stdout.splitlines()
    assert out == [f"{k.decode()}|{v.decode()}" for k, v in want]


def test_corrupt_or_too_old_compressed_produce_is_refused(target: Target) -> None:
    """A batch whose CRC-32C holds but whose compressed records do not decompress is refused
    and stores nothing (Kafka 4.4 answers UNKNOWN_SERVER_ERROR: its "Failed to decompress record
    stream" maps to no API error; ours does the same, with the reason in the error message); zstd in a Produce request older than v7 is
    UNSUPPORTED_COMPRESSION_TYPE; the same zstd batch in v7 is stored."""
    from changefeed.topics.batch import compress_batch, encode_batch

    topic = target.topic("badcodec", 1)
    plain = encode_batch(
        0, range(30), [b"k"] * 30, [b"value %d" % i for i in range(30)], [int(time.time() * 1000)] * 30
    )
    for codec in CODECS:
        packed = compress_batch(plain, _CODEC_ID[codec])
        body = packed[61:-9]  # truncated compressed records, the length and CRC-32C made to match
        head = bytearray(packed[:61])
        struct.pack_into(">i", head, 8, 49 + len(body))
        bad = bytearray(head + body)
        struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
        assert _produce_raw(target, topic, 8, bytes(bad)) == -1, codec  # UNKNOWN_SERVER_ERROR
    zstd = compress_batch(plain, _CODEC_ID["zstd"])
    assert _produce_raw(target, topic, 3, zstd) == 76  # UNSUPPORTED_COMPRESSION_TYPE
    assert _produce_raw(target, topic, 6, zstd) == 76
    c = consumer(target)
    assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10) == (0, 0)
    assert _produce_raw(target, topic, 7, zstd) == 0
    assert c.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=10) == (0, 30)
    c.close()


# -- documented differences --------------------------------------------------------------------


def test_ydb_topic_names_and_changefeed_topics(target: Target) -> None:
    """Ours serves the YDB changefeed's topic ``t/f`` (and ``t.f`` for kafka-python), and refuses
    to delete it (POLICY_VIOLATION: DROP CHANGEFEED owns it); Kafka refuses ``/`` in names."""
    admin = ck_admin.AdminClient({"bootstrap.servers": target.bootstrap})
    if not target.ours:
        fut = admin.create_topics([ck_admin.NewTopic("t/f", 1, 1)])
        with pytest.raises(ck.KafkaException) as err:
            fut["t/f"].result(30)
        assert err.value.args[0].code() == ck.KafkaError.TOPIC_EXCEPTION
        return
    md = admin.list_topics(timeout=10)
    assert len(md.topics["t/f"].partitions) == 2
    kc = kp.KafkaConsumer(bootstrap_servers=target.bootstrap)
    try:
        tps = [kp.TopicPartition("t.f", p) for p in (0, 1)]
        assert kc.end_offsets(tps) == dict.fromkeys(tps, 0)
    finally:
        kc.close()
    with pytest.raises(ck.KafkaException) as err:
        admin.delete_topics(["t/f"], operation_timeout=5)["t/f"].result(30)
    assert err.value.args[0].code() == ck.KafkaError.POLICY_VIOLATION
    # DeleteTopics v5 carries the reason; so do CreatePartitions and IncrementalAlterConfigs
    for args in (
        ("TopicCommand", "--delete", "--topic", "t/f"),
        ("TopicCommand", "--alter", "--topic", "t/f", "--partitions", "3"),
        (
            "ConfigCommand",
            "--alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "t/f",
            "--add-config",
            "retention.ms=1000",
        ),
    ):
        res = target.tool(*args, check=False)
        text = res.stdout + res.stderr
        assert res.returncode == 1 and "PolicyViolationException" in text, (args, text)
        assert "written by a changefeed" in text and "DROP CHANGEFEED" in text, text
    assert len(admin.list_topics(timeout=10).topics["t/f"].partitions) == 2
