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

import confluent_kafka as ck
import confluent_kafka.admin as ck_admin
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
from changefeed.testing.kafka_broker import KafkaBroker
from tests.test_kafka import LoopThread


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


def test_murmur2_is_kafkas() -> None:
    """Kafka's Utils.murmur2 (the Java client's default partitioner): known values."""
    known = {  # Kafka's UtilsTest.testMurmur2
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    assert {k: KW.murmur2(k) for k in known} == {k: v & 0xFFFFFFFF for k, v in known.items()}
    assert KW.partitions_for([b"a", b"foobar", b"[1]", b"x" * 13], 7) == [
        KW.partition_for(k, 7) for k in (b"a", b"foobar", b"[1]", b"x" * 13)
    ]
    assert KW.partitions_for([b"k1", b"k22"], 5, "murmur2") == [
        KW.partition_for(b"k1", 5, "murmur2"),
        KW.partition_for(b"k22", 5, "murmur2"),
    ]


# ----------------------------------------------------------------------------- statements
def test_create_changefeed_into_kafka(tmp_path: Path, kafka_broker: KafkaBroker) -> None:
    with changefeed.connect(tmp_path / "db") as conn:
        conn.execute("CREATE TABLE foo (id INT PRIMARY KEY, v STRING)")
        conn.execute('CREATE TABLE "☃" (id INT PRIMARY KEY)')
        (job,) = conn.execute(
            f'CREATE CHANGEFEED FOR foo, "☃" INTO \'kafka://{kafka_broker.sasl_bootstrap}?topic_prefix=cdc_'
            "&sasl_enabled=true&sasl_mechanism=SCRAM-SHA-256&sasl_user=admin&sasl_password=admin-secret' "
            "WITH full_table_name"
        ).rows[0]
        row = conn.execute(f"SHOW CHANGEFEED JOB {job}").rows[0]
        cols = conn.execute(f"SHOW CHANGEFEED JOB {job}").columns
        got = dict(zip(cols, row, strict=True))
        assert "admin-secret" not in got["sink_uri"] and "sasl_password=redacted" in got["sink_uri"]
        assert got["topics"] == "cdc_defaultdb.public.foo,cdc_defaultdb.public._u2603_"
        b = kafka_broker.bootstrap
        for bad, error in (
            (f"kafka://{b}?topic=x", "unknown kafka sink query parameters: [topic]"),
            (f"kafka://{b}' WITH compression = 'gzip", "this sink is incompatible with option compression"),
            (f'kafka://{b}\' WITH kafka_sink_config = \'{{"RequiredAcks": "MANY"}}', "invalid acks value"),
            (f"kafka://{b}' WITH partition_alg = 'crc32", "unknown partition_alg: crc32"),
            (
                f'kafka://{b}\' WITH exactly_once, kafka_sink_config = \'{{"RequiredAcks": "ONE"}}',
                'exactly_once requires kafka_sink_config RequiredAcks "ALL"',
            ),
            # CockroachDB dials the sink at CREATE
            ("kafka://127.0.0.1:2", "unable to dial: dial tcp 127.0.0.1:2: connect: connection refused"),
            (
                "kafka://no-such-host.invalid:9092",
                "unable to dial: dial tcp: lookup no-such-host.invalid: no such host",
            ),
            (
                f"kafka://{kafka_broker.sasl_bootstrap}?sasl_enabled=true&sasl_mechanism=SCRAM-SHA-512"
                "&sasl_user=alice&sasl_password=wrong",
                "unable to dial: kafka sink",
            ),
        ):
            with pytest.raises(changefeed.ChangefeedError, match=re.escape(error)):
                conn.execute(f"CREATE CHANGEFEED FOR foo INTO '{bad}'")
        with pytest.raises(changefeed.ChangefeedError, match="incompatible with option kafka_sink_config"):
            conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH kafka_sink_config = '{}'")
        with pytest.raises(changefeed.ChangefeedError, match="incompatible with option exactly_once"):
            conn.execute("CREATE CHANGEFEED FOR foo INTO 'topics://' WITH exactly_once")
        assert len(conn.execute("SHOW CHANGEFEED JOBS").rows) == 1  # the refused ones created nothing


# ----------------------------------------------------------------------------- the writer
@pytest.fixture(scope="module")
def ours(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Our endpoint as a second cluster (its own directory)."""
    lt = LoopThread()
    db = tmp_path_factory.mktemp("kafka-cluster") / "db"
    changefeed.connect(db).close()
    ep = create(EndpointConfig(db=db))
    p = lt.start(ep)
    yield f"127.0.0.1:{p}"
    lt.call(ep.stop())
    lt.close()


@pytest.fixture(params=["kafka", "changefeed"])
def brokers(request: pytest.FixtureRequest) -> str:
    if request.param == "kafka":
        return str(request.getfixturevalue("kafka_broker").bootstrap)
    return str(request.getfixturevalue("ours"))


def _consume(bootstrap: str, topic: str, want: int, timeout: float = 20.0, **extra: Any) -> list[Any]:
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"read-{topic}-{time.monotonic_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
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


_names = iter(range(1, 1_000_000))


def _topic(bootstrap: str, stem: str, partitions: int, **config: str) -> str:
    name = f"{stem}-{next(_names)}"
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([ck_admin.NewTopic(name, partitions, 1, config=config)])[name].result(30)
    return name


@pytest.mark.parametrize("alg", ["fnv-1a", "murmur2"])
def test_writer_partitions_by_key_and_fans_out_resolved(brokers: str, alg: str) -> None:
    topic = _topic(brokers, "five", 5)
    cfg = K.KafkaConfig(brokers=brokers, partition_alg=alg)
    w = type(KW.KafkaWriter(cfg)).__new__(KW.KafkaWriter)  # as an executor receives it: pickled state
    w.__setstate__({"config": cfg, "job_id": 1})
    rows = [
        (f"[{i % 17}]".encode(), f'{{"after": {{"n": {i}}}}}'.encode(), 1_700_000_000_000_000_000 + i)
        for i in range(200)
    ]
    w.append(topic, 0, "feed-1", 0, _records(rows))
    w.emit_resolved(
        topic, "feed-1", 0, b'{"resolved":"1.0000000000"}', CommitTs(1_700_000_001_000_000_000, 0)
    )
    got = _consume(brokers, topic, 205)
    data = [m for m in got if m.key() is not None]
    assert len(data) == 200 and len(got) == 205
    for m in data:
        assert m.partition() == KW.partition_for(m.key(), 5, alg)
        assert m.timestamp()[1] // 1000 == 1_700_000_000
    per_key: dict[bytes, list[int]] = {}
    for m in sorted(data, key=lambda m: (m.partition(), m.offset())):
        per_key.setdefault(m.key(), []).append(int(m.value().split(b": ")[-1].rstrip(b"}")))
    assert all(ns == sorted(ns) for ns in per_key.values())  # per-key commit order
    resolved = [m for m in got if m.key() is None]
    assert sorted(m.partition() for m in resolved) == [0, 1, 2, 3, 4]
    assert all(m.value() == b'{"resolved":"1.0000000000"}' for m in resolved)


def test_murmur2_partitions_like_kafkas_java_producer(kafka_broker: KafkaBroker) -> None:
    """Kafka's console producer (the Java client's default partitioner, murmur2) puts each key
    in the partition our ``partition_alg='murmur2'`` computes."""
    topic = _topic(kafka_broker.bootstrap, "java-murmur", 7)
    keys = [f"[{i}]" for i in range(40)] + ["☃", "a-much-longer-key-with-17+-bytes"]
    kafka_broker.tool(
        "ConsoleProducer",
        "--bootstrap-server",
        kafka_broker.bootstrap,
        "--topic",
        topic,
        "--reader-property",
        "parse.key=true",
        input_text="".join(f"{k}\tv\n" for k in keys),
    )
    got = _consume(kafka_broker.bootstrap, topic, len(keys))
    assert {m.key().decode(): m.partition() for m in got} == {
        k: KW.partition_for(k.encode(), 7, "murmur2") for k in keys
    }


def test_writer_topic_created_by_the_brokers_and_compression(brokers: str) -> None:
    cfg = K.KafkaConfig(
        brokers=brokers, **K.parse_kafka_sink_config('{"Compression": "GZIP", "ClientID": "cdc-test"}')
    )
    name = f"fresh_u2603_{next(_names)}"
    KW.KafkaWriter(cfg).append(name, 0, "w", 0, _records([(b"[1]", b'{"after": {}}', 10**18)]))
    (m,) = _consume(brokers, name, 1)
    assert (m.key(), m.value()) == (b"[1]", b'{"after": {}}')


@pytest.mark.parametrize("codec", ["SNAPPY", "LZ4", "ZSTD"])
def test_writer_codecs_on_kafka(kafka_broker: KafkaBroker, codec: str) -> None:
    cfg = K.KafkaConfig(
        brokers=kafka_broker.bootstrap, **K.parse_kafka_sink_config(f'{{"Compression": "{codec}"}}')
    )
    topic = _topic(kafka_broker.bootstrap, f"codec-{codec.lower()}", 1)
    KW.KafkaWriter(cfg).append(topic, 0, "w", 0, _records([(b"[1]", b"x" * 1000, 10**18)] * 20))
    assert len(_consume(kafka_broker.bootstrap, topic, 20)) == 20


def _acl(kafka_broker: KafkaBroker, user: str, prefix: str, *ops: Any) -> None:
    admin = ck_admin.AdminClient({"bootstrap.servers": kafka_broker.bootstrap})
    bindings = [
        ck_admin.AclBinding(
            ck_admin.ResourceType.TOPIC,
            prefix,
            ck_admin.ResourcePatternType.PREFIXED,
            f"User:{user}",
            "*",
            op,
            ck_admin.AclPermissionType.ALLOW,
        )
        for op in ops
    ]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def test_tls_and_sasl_uri_parameters(kafka_broker: KafkaBroker) -> None:
    """Every listener of the real broker through the sink's own URI parameters."""
    assert kafka_broker.tls is not None
    ca = base64.b64encode(kafka_broker.tls.ca_pem).decode()
    _acl(kafka_broker, "alice", "sec-", ck_admin.AclOperation.ALL)
    uris = [
        f"kafka://{kafka_broker.ssl_bootstrap}?tls_enabled=true&ca_cert={ca}",
        f"kafka://{kafka_broker.ssl_bootstrap}?tls_enabled=true&insecure_tls_skip_verify=true",
        *(
            f"kafka://{kafka_broker.sasl_bootstrap}?sasl_enabled=true&sasl_mechanism={m}"
            "&sasl_user=alice&sasl_password=alice-secret"
            for m in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
        ),
        f"kafka://{kafka_broker.sasl_ssl_bootstrap}?tls_enabled=true&ca_cert={ca}&sasl_enabled=true"
        "&sasl_mechanism=SCRAM-SHA-512&sasl_user=alice&sasl_password=alice-secret",
    ]
    for i, uri in enumerate(uris):
        cfg = validate_sink_options(parse_sink_uri(uri), {})
        assert isinstance(cfg, K.KafkaConfig)
        KW.dial(cfg)
        topic = f"sec-{i}-{next(_names)}"
        KW.KafkaWriter(cfg).append(topic, 0, "w", 0, _records([(b"[1]", f"v{i}".encode(), 10**18)]))
        (m,) = _consume(kafka_broker.bootstrap, topic, 1)
        assert m.value() == f"v{i}".encode()
    untrusted = validate_sink_options(
        parse_sink_uri(f"kafka://{kafka_broker.ssl_bootstrap}?tls_enabled=true"), {}
    )
    assert isinstance(untrusted, K.KafkaConfig)
    with pytest.raises(SinkError, match="unable to dial: kafka sink"):
        KW.dial(untrusted)  # the test CA is in no trust store


def _sasl(kafka_broker: KafkaBroker, user: str) -> K.KafkaConfig:
    cfg = validate_sink_options(
        parse_sink_uri(
            f"kafka://{kafka_broker.sasl_bootstrap}?sasl_enabled=true&sasl_mechanism=SCRAM-SHA-256"
            f"&sasl_user={user}&sasl_password={user}-secret"
        ),
        {},
    )
    assert isinstance(cfg, K.KafkaConfig)
    return cfg


def test_broker_refusals_as_cockroachdb_words_them(
    kafka_broker: KafkaBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(KW, "METADATA_TIMEOUT_S", 3.0)
    monkeypatch.setattr(KW, "TOPIC_PROPAGATION_S", 3.0)
    # bob has no ACL at all: the broker refuses the topic
    with pytest.raises(SinkError) as err:
        KW.KafkaWriter(_sasl(kafka_broker, "bob")).append(
            "bobs", 0, "w", 0, _records([(b"[1]", b"v", 10**18)])
        )
    assert "kafka server: The client is not authorized to access this topic" in str(err.value)
    assert KW.RETRYABLE not in str(err.value)  # not retryable: on_error decides
    # alice may write and describe alice-*, not create: Kafka refuses the auto-creation
    _acl(kafka_broker, "alice", "alice-", ck_admin.AclOperation.WRITE, ck_admin.AclOperation.DESCRIBE)
    with pytest.raises(SinkError, match="The client is not authorized to access this topic"):
        KW.KafkaWriter(_sasl(kafka_broker, "alice")).append(
            "alice-missing", 0, "w", 0, _records([(b"[1]", b"v", 10**18)])
        )
    # a cluster with auto.create.topics.enable=false (the shared broker restarted so, and back)
    kafka_broker.auto_create_topics = False
    kafka_broker.restart()
    try:
        with pytest.raises(SinkError) as err:
            KW.KafkaWriter(K.KafkaConfig(brokers=kafka_broker.bootstrap)).append(
                "never-created", 0, "w", 0, _records([(b"[1]", b"v", 10**18)])
            )
    finally:
        kafka_broker.auto_create_topics = True
        kafka_broker.restart()
    assert "kafka server: Request was for a topic or partition that does not exist on this broker" in str(
        err.value
    )
    assert KW.RETRYABLE not in str(err.value)
    # a message above the topic's max.message.bytes
    topic = _topic(kafka_broker.bootstrap, "small", 1, **{"max.message.bytes": "2000"})
    with pytest.raises(SinkError) as err:
        KW.KafkaWriter(K.KafkaConfig(brokers=kafka_broker.bootstrap)).append(
            topic, 0, "w", 0, _records([(b"[1]", b"x" * 5000, 10**18)])
        )
    assert (
        f"kafka: Failed to produce message to topic {topic}: kafka server: Message was too large, server "
        "rejected it to avoid allocation error" in str(err.value)
    )
    assert KW.RETRYABLE not in str(err.value)


def test_unreachable_broker_is_retryable_and_librdkafka_logs_are_rate_limited(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import logging
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    monkeypatch.setattr(KW, "METADATA_TIMEOUT_S", 4.0)
    caplog.set_level(logging.DEBUG, logger=KW.librdkafka_log.name)
    KW.librdkafka_limit.reset()
    t0 = time.monotonic()
    with pytest.raises(SinkError) as err:
        KW.KafkaWriter(K.KafkaConfig(brokers=f"127.0.0.1:{dead}")).append(
            "t", 0, "w", 0, _records([(b"[1]", b"{}", 10**18)])
        )
    assert str(err.value).startswith(f"retryable changefeed error: kafka sink 127.0.0.1:{dead}: ")
    assert time.monotonic() - t0 < 15
    lines = [r for r in caplog.records if r.name == KW.librdkafka_log.name]
    assert 1 <= len(lines) <= 5, [r.getMessage() for r in lines]  # librdkafka retries ~every 100 ms


# ----------------------------------------------------------------------------- exactly once
def test_exactly_once_transactions_markers_and_fencing(kafka_broker: KafkaBroker) -> None:
    """A batch committed before a crash is skipped when replayed; a batch whose transaction was
    left open is aborted by the restarted writer (fenced zombie) and produced again; a
    read_committed consumer sees each record once."""
    from changefeed.pipeline.sinks import kafka_txn as T

    topic = _topic(kafka_broker.bootstrap, "eos", 3)
    cfg = K.KafkaConfig(brokers=kafka_broker.bootstrap, exactly_once=True)
    job = next(_names) + 10_000

    def batch(w: KW.KafkaWriter, b: int, commit: bool = True) -> None:
        w.begin_batch("feed-1", b)
        rows = [(f"[{i}]".encode(), f"b{b}-{i}".encode(), 10**18 + i) for i in range(30)]
        w.append(topic, 0, "feed-1", b, _records(rows))
        w.emit_resolved(topic, "feed-1", b, f'{{"resolved":"{b}"}}'.encode(), CommitTs(10**18 + b, 0))
        if commit:
            w.commit_batch("feed-1", b)

    w1 = KW.KafkaWriter(cfg, job)
    assert w1.driver_only
    batch(w1, 0)
    batch(w1, 1)  # committed, then "killed" before the job recorded its progress
    batch(w1, 2, commit=False)  # "killed" with the transaction open
    zombie = T.Transactions._registry[(cfg, T.transactional_id(job, "feed-1"))].producer
    T.Transactions._registry.clear()  # a new process
    w2 = KW.KafkaWriter(cfg, job)
    batch(w2, 1)  # the replay of batch 1: skipped (its marker is there)
    batch(w2, 2)  # batch 2 again: produced
    with pytest.raises(ck.KafkaException):  # the killed writer's producer is fenced
        zombie.produce(topic, b"zombie", b"[z]", partition=0)
        zombie.commit_transaction(10)
    got = _consume(kafka_broker.bootstrap, topic, 99, timeout=10, **{"isolation.level": "read_committed"})
    values = sorted(m.value() for m in got if m.key() is not None)
    assert values == sorted(f"b{b}-{i}".encode() for b in range(3) for i in range(30))
    assert sorted(m.value() for m in got if m.key() is None) == sorted(
        f'{{"resolved":"{b}"}}'.encode() for b in range(3) for _ in range(3)
    )
    # the marker: the consumer group of the transactional id, at batch id + 1
    c = ck.Consumer(
        {"bootstrap.servers": kafka_broker.bootstrap, "group.id": T.transactional_id(job, "feed-1")}
    )
    assert c.committed([ck.TopicPartition(topic, 0)], timeout=10)[0].offset == 3
    c.close()
    T.check_no_open_transactions()
