"""The sink seam of ``CREATE CHANGEFEED .. INTO 'uri'``: a registry of sink kinds keyed by URI scheme.

A sink kind parses and validates its URI into a frozen :class:`SinkSpec` when the changefeed is
created (so a bad URI creates nothing) and names the topic each target table delivers to. The
pipeline delivers a job's records through the sink kind its spec names.

``topics://[?topic_prefix=P]`` is the embedded topic log of the database directory;
``kafka://HOST:PORT`` produces to a Kafka cluster (settings in :mod:`changefeed.feeds.kafka_config`).
The other schemes CockroachDB knows are recognised here and refused with a clear error until
their sink is registered.

The webhook and cloud-storage sinks (``webhook-https://``, ``nodelocal://``, ``s3://``, ``gs://``,
``azure://``...) register below in their own block; their per-job settings (the URI's query
parameters plus the ``WITH`` options that concern the sink) are validated by
:func:`validate_sink_options` when the job is created, into a :class:`WebhookConfig` or
:class:`CloudStorageConfig` that the pipeline's sink writers take.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

from changefeed.exceptions import InvalidOption, UnsupportedFeature
from changefeed.feeds import kafka_config
from changefeed.feeds.crdb_options import CLOUD_STORAGE_SCHEMES, WEBHOOK_SCHEME
from changefeed.feeds.go_errors import base64_error, json_error
from changefeed.feeds.kafka_config import KafkaConfig


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """A validated sink URI."""

    scheme: str
    uri: str  # as written in the statement
    topic_prefix: str = ""
    params: Mapping[str, str] = field(default_factory=dict)

    def topic_for(self, table: str, family: str | None = None, *, full_table_name: str | None = None) -> str:
        """The topic a target delivers to: ``prefix + table`` (``table.family`` for a family).
        Kafka: CockroachDB's topic namer (``topic_name``, ``full_table_name``: the
        ``db.schema.table`` name given, escaping of characters Kafka refuses)."""
        if self.scheme == kafka_config.SCHEME:
            return kafka_config.topic_name(
                table,
                family,
                prefix=self.topic_prefix,
                single_name=self.params.get(kafka_config.PARAM_TOPIC_NAME, ""),
                full_table_name=full_table_name,
            )
        if self.params.get("topic_name"):
            return self.topic_prefix + self.params["topic_name"]
        return self.topic_prefix + table + (f".{family}" if family else "")

    @property
    def redacted(self) -> str:
        """The URI with secrets replaced, as ``SHOW CHANGEFEED JOBS`` shows ``sink_uri``."""
        return redact_uri(self.uri)


#: scheme -> parser of (uri, query parameters) into a SinkSpec.
SinkParser = Callable[[str, dict[str, str]], SinkSpec]
REGISTRY: dict[str, SinkParser] = {}

#: Schemes CockroachDB accepts whose sinks are not registered in this build (yet).
KNOWN_SCHEMES = (
    "kafka",
    "webhook-https",
    "webhook-http",
    "nodelocal",
    "s3",
    "gs",
    "azure",
    "azure-blob",
    "azure-storage",
    "http",
    "https",
    "file-http",
    "file-https",
    "userfile",
    "gcpubsub",
    "external",
    "null",
)

#: Query parameters whose values ``sink_uri`` hides.
SECRET_PARAMS = ("sasl_password", "client_key", "shared_access_key", "AWS_SECRET_ACCESS_KEY", "CREDENTIALS")


def register_sink(scheme: str) -> Callable[[SinkParser], SinkParser]:
    def deco(parser: SinkParser) -> SinkParser:
        REGISTRY[scheme] = parser
        return parser

    return deco


def parse_sink_uri(uri: str) -> SinkSpec:
    """Validate a sink URI (CockroachDB's errors for a missing/unknown scheme and parameters)."""
    parts = urlsplit(uri)
    if not parts.scheme or "://" not in uri:
        raise InvalidOption("no scheme found for sink URL")
    scheme = parts.scheme.lower()
    parser = REGISTRY.get(scheme)
    if parser is None:
        if scheme in KNOWN_SCHEMES:
            raise UnsupportedFeature(
                f"sink scheme {scheme} not available yet: this build delivers CREATE CHANGEFEED .. INTO "
                f"only to {', '.join(repr(s + '://') for s in sorted(REGISTRY))}"
            )
        raise InvalidOption(f"unsupported sink: {scheme}")
    raw = parse_qs(parts.query, keep_blank_values=True)
    params = {k: v[-1] for k, v in raw.items()}
    return parser(uri, params)


def redact_uri(uri: str) -> str:
    parts = urlsplit(uri)
    raw = parse_qs(parts.query, keep_blank_values=True)
    if not parts.password and not any(k in SECRET_PARAMS for k in raw):
        return uri
    query = "&".join(
        f"{k}=redacted" if k in SECRET_PARAMS else f"{k}={v}" for k, vs in raw.items() for v in vs
    )
    netloc = parts.netloc
    if parts.password:
        netloc = netloc.replace(f":{parts.password}@", ":redacted@")
    return parts._replace(netloc=netloc, query=query).geturl()


def _unknown(kind: str, params: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise InvalidOption(f"unknown {kind} sink query parameters: [{', '.join(extra)}]")


# ------------------------------------------------------------------------------------- topics
#: ``topic_name``: every target into that one topic (after ``topic_prefix``), as with Kafka.
TOPICS_PARAMS = ("topic_prefix", "topic_name")


@register_sink("topics")
def _topics(uri: str, params: dict[str, str]) -> SinkSpec:
    parts = urlsplit(uri)
    if parts.netloc or parts.path not in ("", "/"):
        raise InvalidOption(
            f"the topics sink takes no host or path ({uri!r}): write 'topics://' or 'topics://?topic_prefix=P'"
        )
    _unknown("topics", params, TOPICS_PARAMS)
    return SinkSpec("topics", uri, params.get("topic_prefix", ""), params)


# ====================================================================== webhook and cloud storage
# (issue 8: CockroachDB's webhook sink and cloud-storage sink; see docs/sinks.md)
WEBHOOK_PARAMS = ("ca_cert", "insecure_tls_skip_verify", "client_cert", "client_key")
#: Query parameters the cloud-storage sink consumes; the storage provider's own (credentials,
#: region, endpoint...) are passed on to the Hadoop file system configuration.
CLOUD_STORAGE_PARAMS = ("file_size", "partition_format")
CLOUD_PROVIDER_PARAMS = {
    "s3": (
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_ENDPOINT",
        "AUTH",
    ),
    "gs": ("AUTH", "CREDENTIALS", "ASSUME_ROLE"),
    "azure": ("AZURE_ACCOUNT_NAME", "AZURE_ACCOUNT_KEY", "AZURE_ENVIRONMENT", "AUTH"),
}
PARTITION_FORMATS = {"daily": "%Y-%m-%d/", "hourly": "%Y-%m-%d/%H/", "flat": ""}
COMPRESSIONS = ("gzip", "zstd")
DEFAULT_FILE_SIZE = 16 << 20
DEFAULT_WEBHOOK_CLIENT_TIMEOUT_NS = 3_000_000_000
DEFAULT_RETRY_MAX = 3
DEFAULT_RETRY_BACKOFF_NS = 500_000_000
RETRY_MULTIPLIER = 2.0
MAX_RETRY_BACKOFF_NS = 30_000_000_000
INFINITE_RETRIES = -1


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Everything the webhook sink writer needs (picklable: it travels to Spark executors)."""

    url: str  # https://HOST:PORT/PATH?rest, the sink URI without ``webhook-`` and its TLS params
    ca_cert: bytes | None = None  # PEM
    client_cert: bytes | None = None
    client_key: bytes | None = None
    insecure_tls_skip_verify: bool = False
    auth_header: str | None = None
    client_timeout_s: float = DEFAULT_WEBHOOK_CLIENT_TIMEOUT_NS / 1e9
    compression: str | None = None
    flush_messages: int = 0  # 0: every message is its own request (CockroachDB's default)
    flush_bytes: int = 0
    flush_frequency_s: float = 0.0
    retry_max: int = DEFAULT_RETRY_MAX  # INFINITE_RETRIES: retry for ever
    retry_backoff_s: float = DEFAULT_RETRY_BACKOFF_NS / 1e9
    csv: bool = False  # format=csv: text/csv bodies


@dataclass(frozen=True, slots=True)
class CloudStorageConfig:
    """Where and how the cloud-storage sink writes files."""

    scheme: str
    base: str  # nodelocal: the path under DIR/extern; else the Hadoop URI of the directory
    partition_format: str = "daily"
    file_size: int = DEFAULT_FILE_SIZE
    compression: str | None = None
    extension: str = ".ndjson"
    hadoop_conf: tuple[tuple[str, str], ...] = ()

    @property
    def nodelocal(self) -> bool:
        return self.scheme in ("nodelocal", "experimental-nodelocal")


def go_duration_ns(text: str) -> int | None:
    """A Go ``time.ParseDuration`` string in nanoseconds (None if it is not one)."""
    units = {
        "ns": 1,
        "us": 1_000,
        "µs": 1_000,
        "ms": 1_000_000,
        "s": 10**9,
        "m": 60 * 10**9,
        "h": 3600 * 10**9,
    }
    t = text.strip()
    if t in ("0", ""):
        return 0 if t == "0" else None
    neg = t.startswith("-")
    t = t.lstrip("+-")
    parts = re.findall(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)", t)
    if not parts or "".join(a + b for a, b in parts) != t:
        return None
    total = sum(int(float(a) * units[b]) for a, b in parts)
    return -total if neg else total


def _b64_param(params: Mapping[str, str], name: str) -> bytes | None:
    if name not in params:
        return None
    problem = base64_error(params[name])
    if problem is not None:
        raise InvalidOption(f"param {name} must be base 64 encoded: {problem}")
    return base64.b64decode(params[name], validate=True)


def _bool_param(params: Mapping[str, str], name: str) -> bool:
    v = params.get(name)
    if v is None:
        return False
    if v.lower() not in ("true", "false", "1", "0", "t", "f"):
        raise InvalidOption(f'param {name} must be a bool: "{v}"')
    return v.lower() in ("true", "1", "t")


def _unknown_plain(params: Mapping[str, str], allowed: tuple[str, ...]) -> None:
    extra = sorted(set(params) - set(allowed))
    if extra:
        raise InvalidOption(f"unknown sink query parameters: {', '.join(extra)}")


@register_sink("webhook-https")
def _webhook(uri: str, params: dict[str, str]) -> SinkSpec:
    parts = urlsplit(uri)
    if not parts.hostname:
        raise InvalidOption(
            f"webhook sink URI {redact_uri(uri)!r} has no host: write webhook-https://HOST:PORT/PATH"
        )
    _unknown_plain(params, WEBHOOK_PARAMS)
    for name in ("ca_cert", "client_cert", "client_key"):
        _b64_param(params, name)
    _bool_param(params, "insecure_tls_skip_verify")
    if ("client_cert" in params) != ("client_key" in params):
        raise InvalidOption(
            "client_cert requires client_key to be set"
            if "client_cert" in params
            else "client_key requires client_cert to be set"
        )
    return SinkSpec(WEBHOOK_SCHEME, uri, "", params)


# ============================================================================== kafka
# (issue 10: CockroachDB's Kafka sink; see docs/sinks.md and changefeed.feeds.kafka_config)
@register_sink(kafka_config.SCHEME)
def _kafka(uri: str, params: dict[str, str]) -> SinkSpec:
    kafka_config.validate_uri(uri, params)
    return SinkSpec(kafka_config.SCHEME, uri, params.get(kafka_config.PARAM_TOPIC_PREFIX, ""), params)


@register_sink("webhook-http")
def _webhook_http(uri: str, params: dict[str, str]) -> SinkSpec:
    raise InvalidOption("this sink requires webhook-https")


def _file_size(v: str) -> int:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", v)
    if not m:
        raise InvalidOption(f'parsing {v}: strconv.ParseFloat: parsing "{v}": invalid syntax')
    num, unit = float(m.group(1)), m.group(2).lower()
    mult = {
        "": 1,
        "b": 1,
        "k": 1000,
        "kb": 1000,
        "kib": 1024,
        "m": 10**6,
        "mb": 10**6,
        "mib": 1 << 20,
        "g": 10**9,
        "gb": 10**9,
        "gib": 1 << 30,
        "t": 10**12,
        "tb": 10**12,
        "tib": 1 << 40,
    }.get(unit)
    if mult is None:
        raise InvalidOption(f"parsing {v}: unhandled size name: {unit}")
    return int(num * mult)


def _cloud(uri: str, params: dict[str, str]) -> SinkSpec:
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    provider = scheme.removeprefix("experimental-").split("-")[0]
    allowed = CLOUD_STORAGE_PARAMS + CLOUD_PROVIDER_PARAMS.get(provider, ())
    _unknown_plain(params, allowed)
    pf = params.get("partition_format", "daily")
    if pf not in PARTITION_FORMATS:
        raise InvalidOption(f"invalid partition_format of {pf}")
    if "file_size" in params:
        _file_size(params["file_size"])
    if scheme in ("nodelocal", "experimental-nodelocal"):
        if parts.netloc not in ("1", "self", "0"):
            raise InvalidOption(
                f"nodelocal sink {uri!r}: this database is one node: write nodelocal://1/PATH"
            )
        if ".." in parts.path.split("/"):
            raise InvalidOption(f"nodelocal sink {uri!r}: the path must stay under the extern directory")
    return SinkSpec(scheme, uri, "", params)


for _scheme in CLOUD_STORAGE_SCHEMES:
    register_sink(_scheme)(_cloud)


def _compression(options: Mapping[str, str | None]) -> str | None:
    if "compression" not in options:
        return None
    v = (options["compression"] or "").lower()
    if v not in COMPRESSIONS:
        raise InvalidOption(
            f"unknown compression: {options['compression']}, valid values are 'gzip' and 'zstd'"
        )
    return v


def parse_webhook_sink_config(text: str | None) -> dict[str, Any]:
    """``webhook_sink_config`` -> keyword arguments of :class:`WebhookConfig` (CockroachDB's errors)."""
    if text is None or text.strip() == "":
        return {}
    try:
        cfg = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise InvalidOption(f"error unmarshalling json: {json_error(text)}") from None
    if not isinstance(cfg, dict):
        raise InvalidOption(
            "error unmarshalling json: json: cannot unmarshal into Go value of type changefeedccl.webhookSinkConfig"
        )
    flush = cfg.get("Flush") or {}
    retry = cfg.get("Retry") or {}
    if not isinstance(flush, dict) or not isinstance(retry, dict):
        raise InvalidOption("error unmarshalling json: Flush and Retry must be JSON objects")
    out: dict[str, Any] = {}
    for name, key in (("Messages", "flush_messages"), ("Bytes", "flush_bytes")):
        v = flush.get(name, 0)
        if not isinstance(v, int) or isinstance(v, bool):
            raise InvalidOption(
                f"error unmarshalling json: json: cannot unmarshal {type(v).__name__} into Go struct field .Flush.{name} of type int"
            )
        if v < 0:
            raise InvalidOption("invalid sink config, all values must be non-negative")
        out[key] = v
    freq_ns = 0
    for name, key in (("Frequency", "flush_frequency_s"), ("Backoff", "retry_backoff_s")):
        src = flush if name == "Frequency" else retry
        if name in src:
            ns = go_duration_ns(str(src[name]))
            if ns is None:
                raise InvalidOption(f'error unmarshalling json: time: invalid duration "{src[name]}"')
            if ns < 0:
                raise InvalidOption("invalid sink config, all values must be non-negative")
            out[key] = ns / 1e9
            if name == "Frequency":
                freq_ns = ns
    if (out.get("flush_messages", 0) > 0 or out.get("flush_bytes", 0) > 0) and freq_ns == 0:
        raise InvalidOption("invalid sink config, Flush.Frequency is not set, messages may never be sent")
    if "Max" in retry:
        m = retry["Max"]
        if isinstance(m, str):
            if m.lower() != "inf":
                raise InvalidOption("Retry.Max must be either a positive int or 'inf' for infinite retries.")
            out["retry_max"] = INFINITE_RETRIES
        elif isinstance(m, int) and not isinstance(m, bool):
            if m <= 0:
                raise InvalidOption("Retry.Max must be a positive integer. use 'inf' for infinite retries.")
            out["retry_max"] = m
        else:
            raise InvalidOption("Retry.Max must be either a positive int or 'inf' for infinite retries.")
    return out


def validate_sink_options(
    sink: SinkSpec, options: Mapping[str, str | None]
) -> WebhookConfig | CloudStorageConfig | KafkaConfig | None:
    """The sink's settings from its URI and the job's ``WITH`` options; raises CockroachDB's error
    for a bad one. None for the sinks without settings of their own (``topics``)."""
    fmt = (options.get("format") or "json").lower()
    envelope = (options.get("envelope") or "wrapped").lower()
    scan_only = "initial_scan_only" in options or (options.get("initial_scan") or "").lower() == "only"
    if fmt == "csv" and not scan_only:
        raise InvalidOption("format=csv is only usable with initial_scan_only")
    webhook_only = ("webhook_auth_header", "webhook_client_timeout", "webhook_sink_config")
    if sink.scheme != WEBHOOK_SCHEME:
        for name in webhook_only:
            if name in options:
                raise InvalidOption(f"this sink is incompatible with option {name}")
    if sink.scheme not in (WEBHOOK_SCHEME, *CLOUD_STORAGE_SCHEMES):
        if "compression" in options:
            raise InvalidOption("this sink is incompatible with option compression")
        if sink.scheme == kafka_config.SCHEME:
            return kafka_config.kafka_config(sink.uri, sink.params, options)
        return None
    if envelope in ("row", "deprecated_row", "key_only"):
        raise InvalidOption(f"this sink is incompatible with envelope={envelope}")
    compression = _compression(options)
    if sink.scheme == WEBHOOK_SCHEME:
        if fmt not in ("json", "csv"):
            raise InvalidOption(f"this sink is incompatible with format={fmt}")
        parts = urlsplit(sink.uri)
        rest = {k: v for k, v in sink.params.items() if k not in WEBHOOK_PARAMS}
        url = parts._replace(scheme="https", query="&".join(f"{k}={v}" for k, v in rest.items())).geturl()
        timeout_ns = DEFAULT_WEBHOOK_CLIENT_TIMEOUT_NS
        if "webhook_client_timeout" in options:
            got = go_duration_ns(options["webhook_client_timeout"] or "")
            if got is None:
                raise InvalidOption(f'time: invalid duration "{options["webhook_client_timeout"]}"')
            if got <= 0:
                raise InvalidOption("option webhook_client_timeout must be a duration greater than 0")
            timeout_ns = got
        return WebhookConfig(
            url=url,
            ca_cert=_b64_param(sink.params, "ca_cert"),
            client_cert=_b64_param(sink.params, "client_cert"),
            client_key=_b64_param(sink.params, "client_key"),
            insecure_tls_skip_verify=_bool_param(sink.params, "insecure_tls_skip_verify"),
            auth_header=options.get("webhook_auth_header"),
            client_timeout_s=timeout_ns / 1e9,
            compression=compression,
            csv=fmt == "csv",
            **parse_webhook_sink_config(options.get("webhook_sink_config")),
        )
    if fmt not in ("json", "csv", "parquet"):
        raise InvalidOption(f"this sink is incompatible with format={fmt}")
    parts = urlsplit(sink.uri)
    if fmt == "parquet":
        ext = ".parquet"  # compression is the parquet file's own (its column chunks)
    else:
        ext = ".csv" if fmt == "csv" else ".ndjson"
        ext += {"gzip": ".gz", "zstd": ".zst"}.get(compression or "", "")
    provider = {k: v for k, v in sink.params.items() if k not in CLOUD_STORAGE_PARAMS}
    nodelocal = sink.scheme in ("nodelocal", "experimental-nodelocal")
    base = parts.path.strip("/") if nodelocal else parts._replace(query="").geturl()
    return CloudStorageConfig(
        scheme=sink.scheme,
        base=base,
        partition_format=sink.params.get("partition_format", "daily"),
        file_size=_file_size(sink.params["file_size"]) if "file_size" in sink.params else DEFAULT_FILE_SIZE,
        compression=compression,
        extension=ext,
        hadoop_conf=tuple(sorted(provider.items())),
    )
