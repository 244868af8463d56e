"""The ``kafka://`` sink without Spark: topic naming and escaping, URI and ``kafka_sink_config``
validation (CockroachDB's error texts), the librdkafka configuration, the partitioner, and the
sink writer producing to the Kafka endpoint (one per module, in-process, port 0), read back with
confluent-kafka."""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import changefeed
from changefeed.engine.clock import CommitTs
from changefeed.exceptions import InvalidOption, SinkError
from changefeed.feeds import kafka_config as K
from changefeed.feeds.sinks import parse_sink_uri, validate_sink_options
from changefeed.pipeline.sinks import kafka as KW
from changefeed.server import EndpointConfig
from changefeed.server.kafka import create
from tests.test_kafka import LoopThread

ck = pytest.importorskip("confluent_kafka")
ck_admin = pytest.importorskip("confluent_kafka.admin")


# ----------------------------------------------------------------------------- naming
@pytest.mark.parametrize(
    ("args", "kw", "want"),
    [
        (("foo",), {}, "foo"),
        (("foo", "most"), {}, "foo.most"),
        (("foo",), {"prefix": "cdc_"}, "cdc_foo"),
        (("foo", "f1"), {"prefix": "p-"}, "p-foo.f1"),
        (("foo",), {"single_name": "all"}, "all"),
        (("foo", "fam"), {"single_name": "all", "prefix": "x."}, "x.all.fam"),
        (("foo",), {"full_table_name": "defaultdb.public.foo"}, "defaultdb.public.foo"),
        (("☃",), {}, "_u2603_"),
        (("a b/c",), {}, "a_u0020_b_u002f_c"),
        (("🍦",), {}, "_u0001f366_"),
        (("t",), {"prefix": "ü"}, "_u00fc_t"),
    ],
)
def test_topic_names(args: tuple[str, ...], kw: dict[str, Any], want: str) -> None:
    assert K.topic_name(*args, **kw) == want


def test_topic_name_escaping_of_dots_and_length() -> None:
    assert K.kafka_name(".") == "_u002e_"
    assert K.kafka_name("..") == "_u002e__u002e_"
    assert K.kafka_name("a.b-c_D9") == "a.b-c_D9"
    assert len(K.topic_name("x" * 300)) == K.MAX_TOPIC_LENGTH


def test_sink_spec_names_kafka_topics() -> None:
    spec = parse_sink_uri("kafka://h:9092?topic_prefix=pre_&topic_name=")
    assert spec.topic_for("☃") == "pre__u2603_"
    assert spec.topic_for("t", "fam", full_table_name="defaultdb.public.t") == "pre_defaultdb.public.t.fam"
    assert parse_sink_uri("kafka://h:9092?topic_name=one").topic_for("t") == "one"


# ----------------------------------------------------------------------------- URI
@pytest.mark.parametrize(
    ("uri", "error"),
    [
        ("kafka://h:9092?kafka_topic_prefix=x", "unknown kafka sink query parameters: [kafka_topic_prefix]"),
        ("kafka://h:9092?b=1&a=2", "unknown kafka sink query parameters: [a, b]"),
        ("kafka://h:9092?schema_topic=s", "schema_topic is not yet supported"),
        ("kafka://h:9092?tls_enabled=yes", "param tls_enabled must be a bool"),
        ("kafka://h:9092?tls_enabled=true&ca_cert=%%%", "param ca_cert must be base 64 encoded"),
        ("kafka://h:9092?ca_cert=Zm9v", "ca_cert requires tls_enabled=true"),
        ("kafka://h:9092?client_cert=Zm9v", "client_cert requires tls_enabled=true"),
        ("kafka://h:9092?tls_enabled=true&client_cert=Zm9v", "client_cert requires client_key to be set"),
        ("kafka://h:9092?tls_enabled=true&client_key=Zm9v", "client_key requires client_cert to be set"),
        ("kafka://h:9092?sasl_mechanism=PLAIN", "sasl_enabled must be enabled to configure SASL mechanism"),
        (
            "kafka://h:9092?sasl_enabled=true&sasl_mechanism=GSSAPI&sasl_user=u&sasl_password=p",
            "param sasl_mechanism must be one of SCRAM-SHA-256, SCRAM-SHA-512, or PLAIN",
        ),
        (
            "kafka://h:9092?sasl_enabled=true&sasl_password=p",
            "sasl_user must be provided when SASL is enabled",
        ),
        (
            "kafka://h:9092?sasl_enabled=true&sasl_user=u",
            "sasl_password must be provided when SASL is enabled",
        ),
        ("kafka://h:9092?sasl_user=u", "sasl_enabled must be enabled if a SASL user is provided"),
        ("kafka://h:9092?sasl_password=p", "sasl_enabled must be enabled if a SASL password is provided"),
        (
            "kafka://h:9092?sasl_handshake=false",
            "sasl_enabled must be enabled to configure SASL handshake behavior",
        ),
        ("kafka://?topic_prefix=x", "has no broker"),
    ],
)
def test_uri_errors(uri: str, error: str) -> None:
    with pytest.raises(InvalidOption, match=re.escape(error)):
        parse_sink_uri(uri)


def test_uri_to_librdkafka() -> None:
    pem = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    b64 = base64.b64encode(pem).decode()
    uri = (
        f"kafka://b1:9093,b2:9093?tls_enabled=true&ca_cert={b64}&insecure_tls_skip_verify=true"
        "&sasl_enabled=true&sasl_mechanism=SCRAM-SHA-512&sasl_user=u&sasl_password=s3cret"
    )
    cfg = validate_sink_options(parse_sink_uri(uri), {})
    assert isinstance(cfg, K.KafkaConfig)
    conf = cfg.librdkafka()
    assert conf["bootstrap.servers"] == "b1:9093,b2:9093"
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["ssl.ca.pem"] == pem.decode()
    assert conf["enable.ssl.certificate.verification"] is False
    assert (conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"]) == (
        "SCRAM-SHA-512",
        "u",
        "s3cret",
    )
    assert conf["client.id"] == "CockroachDB"
    assert conf["enable.idempotence"] is True and conf["acks"] == -1
    plain = validate_sink_options(
        parse_sink_uri("kafka://h:1?sasl_enabled=true&sasl_user=u&sasl_password=p"), {}
    )
    assert isinstance(plain, K.KafkaConfig)
    assert plain.librdkafka()["security.protocol"] == "SASL_PLAINTEXT"
    assert "security.protocol" not in K.KafkaConfig(brokers="h:1").librdkafka()


# ----------------------------------------------------------------------------- kafka_sink_config
def test_kafka_sink_config_mapping() -> None:
    cfg = validate_sink_options(
        parse_sink_uri("kafka://h:9092"),
        {
            "kafka_sink_config": '{"Flush": {"Messages": 100, "Bytes": 65536, "Frequency": "250ms", '
            '"MaxMessages": 500}, "RequiredAcks": "ONE", "Compression": "LZ4", "ClientID": "me", '
            '"Version": "2.7.2"}'
        },
    )
    assert isinstance(cfg, K.KafkaConfig)
    conf = cfg.librdkafka()
    assert conf["linger.ms"] == 250
    assert conf["batch.num.messages"] == 500
    assert conf["batch.size"] == 65536
    assert conf["acks"] == 1 and conf["enable.idempotence"] is False  # idempotence needs acks=all
    assert conf["compression.type"] == "lz4"
    assert conf["client.id"] == "me"
    assert conf["broker.version.fallback"] == "2.7.2"
    for acks, want in (("NONE", 0), ("0", 0), ("ALL", -1), ("-1", -1), ("1", 1)):
        c = K.KafkaConfig(brokers="h:1", **K.parse_kafka_sink_config(f'{{"RequiredAcks": "{acks}"}}'))
        assert c.librdkafka()["acks"] == want
        assert c.idempotent is (want == -1)
    for codec in ("NONE", "GZIP", "SNAPPY", "LZ4", "ZSTD"):
        assert K.parse_kafka_sink_config(f'{{"Compression": "{codec}"}}')["compression"] == codec.lower()
    assert K.parse_kafka_sink_config('{"Unknown": 1}') == {}  # Go's json.Unmarshal ignores it


@pytest.mark.parametrize(
    ("config", "error"),
    [
        (
            '{"Flush": {"Messages": 10}}',
            "invalid sarama configuration: Flush.Frequency must be > 0 when Flush.Bytes > 0 or Flush.Messages > 1",
        ),
        (
            '{"Flush": {"Bytes": 10, "Frequency": "0"}}',
            "invalid sarama configuration: Flush.Frequency must be > 0",
        ),
        (
            '{"RequiredAcks": "TWO"}',
            'failed to apply kafka client configuration: invalid acks value "TWO", must be "NONE"/"0", '
            '"ONE"/"1", or "ALL"/"-1"',
        ),
        ('{"Version": "two"}', "failed to apply kafka client configuration: invalid version `two`"),
        ('{"Flush": {"Frequency": "soon"}}', 'check kafka_sink_config option: time: invalid duration "soon"'),
        ('{"Flush": {"Messages": "ten"}}', "cannot unmarshal string into Go struct field .Flush.Messages"),
        ('{"Compression": "BROTLI"}', "failed to parse sarama config; check kafka_sink_config option"),
        ("{nope", "failed to parse sarama config; check kafka_sink_config option"),
    ],
)
def test_kafka_sink_config_errors(config: str, error: str) -> None:
    with pytest.raises(InvalidOption, match=re.escape(error)):
        validate_sink_options(parse_sink_uri("kafka://h:9092"), {"kafka_sink_config": config})


def test_partitioner_is_saramas_fnv1a() -> None:
    assert KW.fnv32a(b"") == 0x811C9DC5
    assert KW.fnv32a(b"a") == 0xE40C292C
    assert KW.fnv32a(b"foobar") == 0xBF9CF968
    # int32(0xbf9cf968) = -1080231576; Go: -1080231576 % 7 = -4 (truncated), negated -> 4
    assert KW.partition_for(b"foobar", 7) == 4
    # int32(0xe40c292c) = -468965076; Go: % 3 = 0
    assert KW.partition_for(b"a", 3) == 0
    assert all(0 <= KW.partition_for(bytes([i]), 5) < 5 for i in range(256))


# ----------------------------------------------------------------------------- statements
def test_create_changefeed_into_kafka(tmp_path: Path) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING)")
        conn.execute('CREATE TABLE "☃" (id INT PRIMARY KEY)')
        (job,) = conn.execute(
            'CREATE CHANGEFEED FOR foo, "☃" INTO \'kafka://127.0.0.1:1?topic_prefix=cdc_'
            "&sasl_enabled=true&sasl_user=u&sasl_password=hunter2' WITH full_table_name"
        ).rows[0]
        row = conn.execute(f"SHOW CHANGEFEED JOB {job}").rows[0]
        cols = conn.execute(f"SHOW CHANGEFEED JOB {job}").columns
        got = dict(zip(cols, row, strict=True))
        assert "hunter2" not in got["sink_uri"] and "sasl_password=redacted" in got["sink_uri"]
        assert got["topics"] == "cdc_defaultdb.public.foo,cdc_defaultdb.public._u2603_"
        for bad, error in (
            ("kafka://h:1?topic=x", "unknown kafka sink query parameters: [topic]"),
            ("kafka://h:1' WITH compression = 'gzip", "this sink is incompatible with option compression"),
            ('kafka://h:1\' WITH kafka_sink_config = \'{"RequiredAcks": "MANY"}', "invalid acks value"),
        ):
            with pytest.raises(changefeed.ChangefeedError, match=re.escape(error)):
                conn.execute(f"CREATE CHANGEFEED FOR foo INTO '{bad}'")
        with pytest.raises(changefeed.ChangefeedError, match="incompatible with option kafka_sink_config"):
            conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH kafka_sink_config = '{}'")
        assert len(conn.execute("SHOW CHANGEFEED JOBS").rows) == 1  # the refused ones created nothing


# ----------------------------------------------------------------------------- the writer
@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    lt = LoopThread()
    db = tmp_path_factory.mktemp("kafka-cluster") / "db"  # the "cluster": its own directory
    changefeed.connect(db).close()
    ep = create(EndpointConfig(db=db))
    p = lt.start(ep)
    yield p
    lt.call(ep.stop())
    lt.close()


def _consume(port: int, topic: str, want: int, timeout: float = 20.0) -> list[Any]:
    c = ck.Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": f"read-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                assert m.error() is None, m.error()
                got.append(m)
    finally:
        c.close()
    return got


def _records(rows: list[tuple[bytes | None, bytes, int]]) -> pa.Table:
    return pa.table(
        {
            "key": pa.array([r[0] for r in rows], pa.binary()),
            "value": pa.array([r[1] for r in rows], pa.binary()),
            "ts": pa.array([r[2] for r in rows], pa.int64()),
        }
    )


def test_writer_partitions_by_key_and_fans_out_resolved(port: int) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([ck_admin.NewTopic("five", 5, 1)])["five"].result(10)
    w = KW.KafkaWriter(K.KafkaConfig(brokers=f"127.0.0.1:{port}"))
    w = type(w).__new__(type(w))  # as an executor receives it: pickled state only
    w.__setstate__({"config": K.KafkaConfig(brokers=f"127.0.0.1:{port}")})
    rows = [
        (f"[{i % 17}]".encode(), f'{{"after": {{"n": {i}}}}}'.encode(), 1_700_000_000_000_000_000 + i)
        for i in range(200)
    ]
    w.append("five", 0, "feed-1", 0, _records(rows))
    w.emit_resolved(
        "five", "feed-1", 0, b'{"resolved":"1.0000000000"}', CommitTs(1_700_000_001_000_000_000, 0)
    )
    got = _consume(port, "five", 205)
    data = [m for m in got if m.key() is not None]
    assert len(data) == 200 and len(got) == 205
    for m in data:
        assert m.partition() == KW.partition_for(m.key(), 5)
        assert m.timestamp()[1] // 1000 == 1_700_000_000
    per_key: dict[bytes, list[int]] = {}
    for m in sorted(data, key=lambda m: (m.partition(), m.offset())):
        per_key.setdefault(m.key(), []).append(int(m.value().split(b": ")[-1].rstrip(b"}")))
    assert all(ns == sorted(ns) for ns in per_key.values())  # per-key commit order
    resolved = [m for m in got if m.key() is None]
    assert sorted(m.partition() for m in resolved) == [0, 1, 2, 3, 4]
    assert all(m.value() == b'{"resolved":"1.0000000000"}' for m in resolved)


def test_writer_creates_missing_topics_and_gzips(port: int) -> None:
    cfg = K.KafkaConfig(brokers=f"127.0.0.1:{port}", **K.parse_kafka_sink_config('{"Compression": "GZIP"}'))
    KW.KafkaWriter(cfg).append("fresh_u2603_", 0, "w", 0, _records([(b"[1]", b'{"after": {}}', 10**18)]))
    (m,) = _consume(port, "fresh_u2603_", 1)
    assert (m.key(), m.value(), m.partition()) == (b"[1]", b'{"after": {}}', 0)  # broker default: 1 partition


def test_writer_unreachable_broker_is_a_sink_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setattr(KW, "METADATA_TIMEOUT_S", 1.5)
    t0 = time.monotonic()
    with pytest.raises(SinkError, match=f"kafka sink: connecting to kafka: 127.0.0.1:{dead}"):
        KW.KafkaWriter(K.KafkaConfig(brokers=f"127.0.0.1:{dead}")).append(
            "t", 0, "w", 0, _records([(b"[1]", b"{}", 10**18)])
        )
    assert time.monotonic() - t0 < 15
