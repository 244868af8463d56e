"""CockroachDB's Kafka sink settings: the ``kafka://`` URI, ``kafka_sink_config`` and topic names.

Everything here is validated when ``CREATE CHANGEFEED .. INTO 'kafka://..'`` runs (so a bad URI or
configuration creates nothing) into a frozen, picklable :class:`KafkaConfig` that the pipeline's
Kafka sink writer (``changefeed.pipeline.sinks.kafka``) turns into a librdkafka producer
configuration with :meth:`KafkaConfig.librdkafka`. The error texts are CockroachDB's
(``sink_kafka.go``: ``buildKafkaConfig``, ``saramaConfig``; ``topic.go``: ``SQLNameToKafkaName``).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from changefeed.exceptions import InvalidOption

SCHEME = "kafka"

# URI query parameters (changefeedbase.SinkParam*)
PARAM_TOPIC_PREFIX = "topic_prefix"
PARAM_TOPIC_NAME = "topic_name"
PARAM_SCHEMA_TOPIC = "schema_topic"
PARAM_TLS_ENABLED = "tls_enabled"
PARAM_SKIP_TLS_VERIFY = "insecure_tls_skip_verify"
PARAM_CA_CERT = "ca_cert"
PARAM_CLIENT_CERT = "client_cert"
PARAM_CLIENT_KEY = "client_key"
PARAM_SASL_ENABLED = "sasl_enabled"
PARAM_SASL_HANDSHAKE = "sasl_handshake"
PARAM_SASL_MECHANISM = "sasl_mechanism"
PARAM_SASL_USER = "sasl_user"
PARAM_SASL_PASSWORD = "sasl_password"
PARAMS = (
    PARAM_TOPIC_PREFIX,
    PARAM_TOPIC_NAME,
    PARAM_SCHEMA_TOPIC,
    PARAM_TLS_ENABLED,
    PARAM_SKIP_TLS_VERIFY,
    PARAM_CA_CERT,
    PARAM_CLIENT_CERT,
    PARAM_CLIENT_KEY,
    PARAM_SASL_ENABLED,
    PARAM_SASL_HANDSHAKE,
    PARAM_SASL_MECHANISM,
    PARAM_SASL_USER,
    PARAM_SASL_PASSWORD,
)

SASL_PLAIN = "PLAIN"
SASL_SCRAM_256 = "SCRAM-SHA-256"
SASL_SCRAM_512 = "SCRAM-SHA-512"
SASL_MECHANISMS = (SASL_SCRAM_256, SASL_SCRAM_512, SASL_PLAIN)

#: ``RequiredAcks`` -> Kafka's ``acks`` (sarama's NoResponse, WaitForLocal, WaitForAll).
REQUIRED_ACKS = {"0": 0, "NONE": 0, "1": 1, "ONE": 1, "-1": -1, "ALL": -1}
#: ``Compression`` (sarama's codec names) -> librdkafka's ``compression.type``.
COMPRESSIONS = {"NONE": "none", "GZIP": "gzip", "SNAPPY": "snappy", "LZ4": "lz4", "ZSTD": "zstd"}
DEFAULT_CLIENT_ID = "CockroachDB"
DEFAULT_FLUSH_MAX_MESSAGES = 1000  # CockroachDB's default Flush.MaxMessages
#: Kafka's limit on a topic name's length.
MAX_TOPIC_LENGTH = 249
#: How long a produced message may wait for its acknowledgement before the micro-batch fails
#: (librdkafka retries within it); the job then retries the batch (and fails or pauses after
#: the runner's retries, per ``on_error``).
DELIVERY_TIMEOUT_MS = int(os.environ.get("CHANGEFEED_KAFKA_DELIVERY_TIMEOUT_MS", "30000"))
#: Time allowed for metadata and topic creation requests.
METADATA_TIMEOUT_S = float(os.environ.get("CHANGEFEED_KAFKA_METADATA_TIMEOUT_S", "10"))

_KAFKA_OK = re.compile(r"[A-Za-z0-9._\-]")
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:\.(\d+))?")


def escape_rune(r: str) -> str:
    """``_u<hex code point>_``: how CockroachDB writes a character a name may not hold."""
    cp = ord(r)
    return f"_u{cp:04x}_" if cp < 0x10000 else f"_u{cp:08x}_"


def kafka_name(sql_name: str) -> str:
    """CockroachDB's ``SQLNameToKafkaName``: keep ``[A-Za-z0-9._-]``, write any other character
    as ``_u<hex code point>_`` (``☃`` -> ``_u2603_``); ``.`` and ``..`` alone are escaped too
    (Kafka refuses them as names)."""
    if sql_name in (".", ".."):
        return "".join(escape_rune(r) for r in sql_name)
    return "".join(r if _KAFKA_OK.fullmatch(r) else escape_rune(r) for r in sql_name)


def topic_name(
    table: str,
    family: str | None = None,
    *,
    prefix: str = "",
    single_name: str = "",
    full_table_name: str | None = None,
) -> str:
    """The Kafka topic of a target (CockroachDB's TopicNamer): ``prefix`` + (``topic_name`` when
    given, else the table name, ``db.schema.table`` with ``full_table_name``) + ``.family`` for a
    column family, escaped for Kafka and cut to Kafka's 249 characters."""
    base = single_name or full_table_name or table
    name = kafka_name(prefix + base + (f".{family}" if family else ""))
    return name[:MAX_TOPIC_LENGTH]


@dataclass(frozen=True, slots=True)
class KafkaConfig:
    """Everything the Kafka sink writer needs (picklable: it travels to Spark executors)."""

    brokers: str  # HOST:PORT[,HOST:PORT...]
    tls: bool = False
    tls_skip_verify: bool = False
    ca_cert: bytes | None = None  # PEM
    client_cert: bytes | None = None
    client_key: bytes | None = None
    sasl: bool = False
    sasl_mechanism: str = SASL_PLAIN
    sasl_user: str = ""
    sasl_password: str = ""
    client_id: str = DEFAULT_CLIENT_ID
    required_acks: int | None = None  # None: not set (the idempotent producer: acks=all)
    compression: str = "none"
    flush_messages: int = 0
    flush_bytes: int = 0
    flush_frequency_ms: int = 0
    flush_max_messages: int = DEFAULT_FLUSH_MAX_MESSAGES
    version: str = ""
    delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS
    #: ``partition_alg``: ``fnv-1a`` (sarama's hash partitioner, CockroachDB's default) or
    #: ``murmur2`` (Kafka's Java client's default partitioner)
    partition_alg: str = "fnv-1a"
    #: ``exactly_once`` (ours, issue 19): each micro-batch in one Kafka transaction
    exactly_once: bool = False

    @property
    def idempotent(self) -> bool:
        """The producer is idempotent unless ``RequiredAcks`` asks for less than ALL (librdkafka's
        idempotence needs acks=all)."""
        return self.required_acks in (None, -1)

    def librdkafka(self) -> dict[str, Any]:
        """The producer configuration (librdkafka property names)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.brokers,
            "client.id": self.client_id,
            "enable.idempotence": self.idempotent,
            "acks": -1 if self.required_acks is None else self.required_acks,
            "compression.type": self.compression,
            # Flush.Frequency: how long messages may wait to fill a batch (the micro-batch's
            # flush sends whatever is left at once).
            "linger.ms": self.flush_frequency_ms,
            "batch.num.messages": max(1, self.flush_max_messages or DEFAULT_FLUSH_MAX_MESSAGES),
            "message.timeout.ms": self.delivery_timeout_ms,
            "message.max.bytes": 1_000_000_000,
            "socket.keepalive.enable": True,
        }
        if self.flush_bytes > 0:
            conf["batch.size"] = self.flush_bytes
        if self.version:
            conf["broker.version.fallback"] = self.version
        if self.tls:
            conf["security.protocol"] = "SASL_SSL" if self.sasl else "SSL"
            if self.tls_skip_verify:
                conf["enable.ssl.certificate.verification"] = False
                conf["ssl.endpoint.identification.algorithm"] = "none"
            if self.ca_cert is not None:
                conf["ssl.ca.pem"] = self.ca_cert.decode()
            if self.client_cert is not None and self.client_key is not None:
                conf["ssl.certificate.pem"] = self.client_cert.decode()
                conf["ssl.key.pem"] = self.client_key.decode()
        elif self.sasl:
            conf["security.protocol"] = "SASL_PLAINTEXT"
        if self.sasl:
            conf["sasl.mechanism"] = self.sasl_mechanism
            conf["sasl.username"] = self.sasl_user
            conf["sasl.password"] = self.sasl_password
        return conf

    def admin(self) -> dict[str, Any]:
        """The admin client's configuration: the connection settings of :meth:`librdkafka`."""
        keep = ("bootstrap.servers", "client.id", "security.protocol", "socket.keepalive.enable")
        return {
            k: v
            for k, v in self.librdkafka().items()
            if k in keep or k.startswith(("ssl.", "sasl.", "enable.ssl"))
        }


# ------------------------------------------------------------------------------------- URI
def _bool(params: Mapping[str, str], name: str) -> tuple[bool, bool]:
    """(was set, value) of a bool parameter (Go's strconv.ParseBool)."""
    if name not in params:
        return False, False
    v = params[name]
    if v not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
        raise InvalidOption(f"param {name} must be a bool: {v!r}")
    return True, v in ("1", "t", "T", "TRUE", "true", "True")


def _b64(params: Mapping[str, str], name: str) -> bytes | None:
    if name not in params or params[name] == "":
        return None
    try:
        return base64.b64decode(params[name], validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidOption(f"param {name} must be base 64 encoded: {exc}") from None


def validate_uri(uri: str, params: Mapping[str, str]) -> None:
    """The URI checks of ``CREATE CHANGEFEED .. INTO 'kafka://..'`` (raises InvalidOption)."""
    parts = urlsplit(uri)
    if not parts.netloc:
        raise InvalidOption(f"kafka sink URI {uri.split('?', 1)[0]!r} has no broker: write kafka://HOST:PORT")
    if params.get(PARAM_SCHEMA_TOPIC):
        raise InvalidOption(f"{PARAM_SCHEMA_TOPIC} is not yet supported")
    extra = sorted(set(params) - set(PARAMS))
    if extra:
        raise InvalidOption(f"unknown kafka sink query parameters: [{', '.join(extra)}]")
    connection_config(uri, params)


def connection_config(uri: str, params: Mapping[str, str]) -> dict[str, Any]:
    """The connection settings of a kafka URI as :class:`KafkaConfig` keyword arguments."""
    _, tls = _bool(params, PARAM_TLS_ENABLED)
    _, skip = _bool(params, PARAM_SKIP_TLS_VERIFY)
    ca, cert, key = (_b64(params, n) for n in (PARAM_CA_CERT, PARAM_CLIENT_CERT, PARAM_CLIENT_KEY))
    _, sasl = _bool(params, PARAM_SASL_ENABLED)
    handshake_set, _ = _bool(params, PARAM_SASL_HANDSHAKE)
    if handshake_set and not sasl:
        raise InvalidOption(f"{PARAM_SASL_ENABLED} must be enabled to configure SASL handshake behavior")
    mechanism = params.get(PARAM_SASL_MECHANISM, "")
    if mechanism and not sasl:
        raise InvalidOption(f"{PARAM_SASL_ENABLED} must be enabled to configure SASL mechanism")
    mechanism = mechanism or SASL_PLAIN
    if mechanism not in SASL_MECHANISMS:
        raise InvalidOption(
            f"param {PARAM_SASL_MECHANISM} must be one of {SASL_SCRAM_256}, {SASL_SCRAM_512}, or {SASL_PLAIN}"
        )
    user, password = params.get(PARAM_SASL_USER, ""), params.get(PARAM_SASL_PASSWORD, "")
    if sasl:
        if not user:
            raise InvalidOption(f"{PARAM_SASL_USER} must be provided when SASL is enabled")
        if not password:
            raise InvalidOption(f"{PARAM_SASL_PASSWORD} must be provided when SASL is enabled")
    else:
        if user:
            raise InvalidOption(f"{PARAM_SASL_ENABLED} must be enabled if a SASL user is provided")
        if password:
            raise InvalidOption(f"{PARAM_SASL_ENABLED} must be enabled if a SASL password is provided")
    if tls:
        if cert is not None and key is None:
            raise InvalidOption(f"{PARAM_CLIENT_CERT} requires {PARAM_CLIENT_KEY} to be set")
        if key is not None and cert is None:
            raise InvalidOption(f"{PARAM_CLIENT_KEY} requires {PARAM_CLIENT_CERT} to be set")
    else:
        if ca is not None:
            raise InvalidOption(f"{PARAM_CA_CERT} requires {PARAM_TLS_ENABLED}=true")
        if cert is not None:
            raise InvalidOption(f"{PARAM_CLIENT_CERT} requires {PARAM_TLS_ENABLED}=true")
    return {
        "brokers": urlsplit(uri).netloc,
        "tls": tls,
        "tls_skip_verify": skip,
        "ca_cert": ca,
        "client_cert": cert,
        "client_key": key,
        "sasl": sasl,
        "sasl_mechanism": mechanism,
        "sasl_user": user,
        "sasl_password": password,
    }


# ------------------------------------------------------------------------------ kafka_sink_config
_PARSE = "failed to parse sarama config; check kafka_sink_config option: "
_APPLY = "failed to apply kafka client configuration: "


def _go_duration_ms(text: str) -> int | None:
    units = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}
    t = text.strip()
    if t == "0":
        return 0
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", t)
    if not parts or "".join(a + b for a, b in parts) != t:
        return None
    return int(sum(float(a) * units[b] for a, b in parts))


def _int_field(section: Mapping[str, Any], name: str) -> int:
    v = section.get(name, 0)
    if not isinstance(v, int) or isinstance(v, bool):
        kind = "string" if isinstance(v, str) else "number" if isinstance(v, float) else type(v).__name__
        raise InvalidOption(
            f"{_PARSE}json: cannot unmarshal {kind} into Go struct field .Flush.{name} of type int"
        )
    return v


def parse_kafka_sink_config(text: str | None) -> dict[str, Any]:
    """``kafka_sink_config`` -> :class:`KafkaConfig` keyword arguments (CockroachDB's errors)."""
    if text is None or text.strip() == "":
        return {}
    try:
        cfg = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidOption(f"{_PARSE}{exc}") from None
    if not isinstance(cfg, dict):
        raise InvalidOption(
            f"{_PARSE}json: cannot unmarshal into Go value of type changefeedccl.saramaConfig"
        )
    flush = cfg.get("Flush") or {}
    if not isinstance(flush, dict):
        raise InvalidOption(f"{_PARSE}json: cannot unmarshal into Go struct field .Flush")
    out: dict[str, Any] = {}
    for name, key in (
        ("Messages", "flush_messages"),
        ("Bytes", "flush_bytes"),
        ("MaxMessages", "flush_max_messages"),
    ):
        if name in flush:
            out[key] = _int_field(flush, name)
    freq = 0
    if "Frequency" in flush:
        raw = flush["Frequency"]
        got = _go_duration_ms(raw) if isinstance(raw, str) else None
        if got is None:
            raise InvalidOption(
                f"{_PARSE}json: cannot unmarshal {type(raw).__name__} into Go value of type string"
                if not isinstance(raw, str)
                else f'{_PARSE}time: invalid duration "{raw}"'
            )
        freq = got
        out["flush_frequency_ms"] = got
    if (out.get("flush_bytes", 0) > 0 or out.get("flush_messages", 0) > 1) and freq == 0:
        raise InvalidOption(
            "invalid sarama configuration: Flush.Frequency must be > 0 when Flush.Bytes > 0 or Flush.Messages > 1"
        )
    if cfg.get("Version"):
        v = str(cfg["Version"])
        if not _VERSION.fullmatch(v):
            raise InvalidOption(f"{_APPLY}invalid version `{v}`")
        out["version"] = v
    if cfg.get("RequiredAcks"):
        a = str(cfg["RequiredAcks"])
        if a not in REQUIRED_ACKS:
            raise InvalidOption(
                f'{_APPLY}invalid acks value "{a}", must be "NONE"/"0", "ONE"/"1", or "ALL"/"-1"'
            )
        out["required_acks"] = REQUIRED_ACKS[a]
    if cfg.get("Compression"):
        c = str(cfg["Compression"])
        if c.upper() not in COMPRESSIONS:
            raise InvalidOption(
                f"{_PARSE}failed to unmarshal CompressionCodec: unknown compression codec {c}"
            )
        out["compression"] = COMPRESSIONS[c.upper()]
    if cfg.get("ClientID"):
        out["client_id"] = str(cfg["ClientID"])
    # other fields are ignored, as Go's json.Unmarshal ignores them
    return out


def kafka_config(uri: str, params: Mapping[str, str], options: Mapping[str, str | None]) -> KafkaConfig:
    """The validated :class:`KafkaConfig` of a kafka URI and the job's ``WITH`` options."""
    sink_config = parse_kafka_sink_config(options.get("kafka_sink_config"))
    exactly_once = "exactly_once" in options
    if exactly_once and sink_config.get("required_acks", -1) != -1:
        raise InvalidOption(
            'exactly_once requires kafka_sink_config RequiredAcks "ALL" (Kafka transactions need acks=all)'
        )
    return KafkaConfig(
        **connection_config(uri, params),
        **sink_config,
        partition_alg=(options.get("partition_alg") or "fnv-1a").lower(),
        exactly_once=exactly_once,
    )
