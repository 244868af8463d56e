"""CockroachDB changefeed options: the ``WITH`` clause of ``CREATE CHANGEFEED`` and
``EXPERIMENTAL CHANGEFEED FOR``, parsed and validated into one frozen :class:`CrdbOptions`.

Every option CockroachDB knows is a named constant below, with its kind (flag, value, or flag
with an optional value), its default and its validation. Error texts are CockroachDB's own
(``invalid option "foo"``, ``cannot specify both initial_scan and no_initial_scan``,
``unknown envelope: nope``...), so a client ported from CockroachDB sees the messages it expects.

Durations (``resolved``, ``min_checkpoint_frequency``, ``gc_protect_expires_after``,
``webhook_client_timeout``...) are Go durations as CockroachDB parses them (``10s``, ``1m30s``,
``500ms``, ``1.5h``). Timestamps (``cursor``, ``end_time``) are what CockroachDB's
``AS OF SYSTEM TIME`` accepts: an HLC decimal ``<wall ns>.<logical>``, nanoseconds since the
epoch, a timestamp string, or a negative interval relative to the statement time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

import orjson

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.exceptions import InvalidOption
from changefeed.feeds.crdb_time import format_go_duration, parse_crdb_timestamp, parse_go_duration
from changefeed.feeds.go_errors import json_error

NS_PER_S = 1_000_000_000

# ---------------------------------------------------------------------------- option names
OPT_AVRO_SCHEMA_PREFIX = "avro_schema_prefix"
OPT_COMPRESSION = "compression"
OPT_CONFLUENT_SCHEMA_REGISTRY = "confluent_schema_registry"
OPT_CURSOR = "cursor"
OPT_DIFF = "diff"
OPT_ENCODE_JSON_VALUE_NULL_AS_OBJECT = "encode_json_value_null_as_object"
OPT_END_TIME = "end_time"
OPT_ENRICHED_PROPERTIES = "enriched_properties"
OPT_ENVELOPE = "envelope"
OPT_EXACTLY_ONCE = "exactly_once"  # ours (issue 19): Kafka transactions; CockroachDB has no such option
OPT_EXECUTION_LOCALITY = "execution_locality"
OPT_FORMAT = "format"
OPT_FULL_TABLE_NAME = "full_table_name"
OPT_GC_PROTECT_EXPIRES_AFTER = "gc_protect_expires_after"
OPT_IGNORE_DISABLE_CHANGEFEED_REPLICATION = "ignore_disable_changefeed_replication"
OPT_INITIAL_SCAN = "initial_scan"
OPT_INITIAL_SCAN_ONLY = "initial_scan_only"
OPT_KAFKA_SINK_CONFIG = "kafka_sink_config"
OPT_KEY_COLUMN = "key_column"
OPT_KEY_IN_VALUE = "key_in_value"
OPT_LAGGING_RANGES_POLLING_INTERVAL = "lagging_ranges_polling_interval"
OPT_LAGGING_RANGES_THRESHOLD = "lagging_ranges_threshold"
OPT_METRICS_LABEL = "metrics_label"
OPT_MIN_CHECKPOINT_FREQUENCY = "min_checkpoint_frequency"
OPT_MVCC_TIMESTAMP = "mvcc_timestamp"
OPT_NO_INITIAL_SCAN = "no_initial_scan"
OPT_ON_ERROR = "on_error"
#: This product's extension: ``ordering = 'total'`` delivers a multi-table job's changes in one
#: commit order with transaction boundaries (CockroachDB orders per key only).
OPT_ORDERING = "ordering"
OPT_PARTITION_ALG = "partition_alg"
OPT_PROTECT_DATA_FROM_GC_ON_PAUSE = "protect_data_from_gc_on_pause"
OPT_PUBSUB_SINK_CONFIG = "pubsub_sink_config"
OPT_RESOLVED = "resolved"
OPT_SCHEMA_CHANGE_EVENTS = "schema_change_events"
OPT_SCHEMA_CHANGE_POLICY = "schema_change_policy"
OPT_SPLIT_COLUMN_FAMILIES = "split_column_families"
OPT_TOPIC_IN_VALUE = "topic_in_value"
OPT_UNORDERED = "unordered"
OPT_UPDATED = "updated"
OPT_VIRTUAL_COLUMNS = "virtual_columns"
OPT_WEBHOOK_AUTH_HEADER = "webhook_auth_header"
OPT_WEBHOOK_CLIENT_TIMEOUT = "webhook_client_timeout"
OPT_WEBHOOK_SINK_CONFIG = "webhook_sink_config"


class Kind(enum.Enum):
    FLAG = "flag"  # no value: WITH updated
    VALUE = "value"  # a value is required: WITH envelope = 'row'
    OPTIONAL = "optional"  # either: WITH resolved / WITH resolved = '10s'


#: Every option and whether it takes a value (CockroachDB's ``changefeedbase.ChangefeedOptionExpectValues``).
OPTION_KINDS: dict[str, Kind] = {
    OPT_AVRO_SCHEMA_PREFIX: Kind.VALUE,
    OPT_COMPRESSION: Kind.VALUE,
    OPT_CONFLUENT_SCHEMA_REGISTRY: Kind.VALUE,
    OPT_CURSOR: Kind.VALUE,
    OPT_DIFF: Kind.FLAG,
    OPT_ENCODE_JSON_VALUE_NULL_AS_OBJECT: Kind.FLAG,
    OPT_ENRICHED_PROPERTIES: Kind.VALUE,
    OPT_END_TIME: Kind.VALUE,
    OPT_ENVELOPE: Kind.VALUE,
    OPT_EXACTLY_ONCE: Kind.FLAG,
    OPT_EXECUTION_LOCALITY: Kind.VALUE,
    OPT_FORMAT: Kind.VALUE,
    OPT_FULL_TABLE_NAME: Kind.FLAG,
    OPT_GC_PROTECT_EXPIRES_AFTER: Kind.VALUE,
    OPT_IGNORE_DISABLE_CHANGEFEED_REPLICATION: Kind.FLAG,
    OPT_INITIAL_SCAN: Kind.OPTIONAL,
    OPT_INITIAL_SCAN_ONLY: Kind.FLAG,
    OPT_KAFKA_SINK_CONFIG: Kind.VALUE,
    OPT_KEY_COLUMN: Kind.VALUE,
    OPT_KEY_IN_VALUE: Kind.FLAG,
    OPT_LAGGING_RANGES_POLLING_INTERVAL: Kind.VALUE,
    OPT_LAGGING_RANGES_THRESHOLD: Kind.VALUE,
    OPT_METRICS_LABEL: Kind.VALUE,
    OPT_MIN_CHECKPOINT_FREQUENCY: Kind.VALUE,
    OPT_MVCC_TIMESTAMP: Kind.FLAG,
    OPT_NO_INITIAL_SCAN: Kind.FLAG,
    OPT_ON_ERROR: Kind.VALUE,
    OPT_ORDERING: Kind.VALUE,
    OPT_PARTITION_ALG: Kind.VALUE,
    OPT_PROTECT_DATA_FROM_GC_ON_PAUSE: Kind.FLAG,
    OPT_PUBSUB_SINK_CONFIG: Kind.VALUE,
    OPT_RESOLVED: Kind.OPTIONAL,
    OPT_SCHEMA_CHANGE_EVENTS: Kind.VALUE,
    OPT_SCHEMA_CHANGE_POLICY: Kind.VALUE,
    OPT_SPLIT_COLUMN_FAMILIES: Kind.FLAG,
    OPT_TOPIC_IN_VALUE: Kind.FLAG,
    OPT_UNORDERED: Kind.FLAG,
    OPT_UPDATED: Kind.FLAG,
    OPT_VIRTUAL_COLUMNS: Kind.VALUE,
    OPT_WEBHOOK_AUTH_HEADER: Kind.VALUE,
    OPT_WEBHOOK_CLIENT_TIMEOUT: Kind.VALUE,
    OPT_WEBHOOK_SINK_CONFIG: Kind.VALUE,
}

# ---------------------------------------------------------------------------- option values
FORMAT_JSON = "json"
FORMAT_AVRO = "avro"
FORMAT_CSV = "csv"
FORMAT_PARQUET = "parquet"
FORMAT_EXPERIMENTAL_AVRO = "experimental_avro"  # alias of avro
FORMATS = (FORMAT_JSON, FORMAT_AVRO, FORMAT_CSV, FORMAT_PARQUET, FORMAT_EXPERIMENTAL_AVRO)

ENVELOPE_WRAPPED = "wrapped"
ENVELOPE_ROW = "row"
ENVELOPE_DEPRECATED_ROW = "deprecated_row"  # alias of row
ENVELOPE_BARE = "bare"
ENVELOPE_KEY_ONLY = "key_only"
ENVELOPE_ENRICHED = "enriched"
ENVELOPES = (
    ENVELOPE_WRAPPED,
    ENVELOPE_ROW,
    ENVELOPE_DEPRECATED_ROW,
    ENVELOPE_BARE,
    ENVELOPE_KEY_ONLY,
    ENVELOPE_ENRICHED,
)

ENRICHED_SOURCE = "source"
ENRICHED_SCHEMA = "schema"
ENRICHED_PROPERTIES = (ENRICHED_SOURCE, ENRICHED_SCHEMA)

ORDERING_KEY = "key"
ORDERING_TOTAL = "total"
ORDERINGS = (ORDERING_KEY, ORDERING_TOTAL)

INITIAL_SCAN_YES = "yes"
INITIAL_SCAN_NO = "no"
INITIAL_SCAN_ONLY = "only"
INITIAL_SCANS = (INITIAL_SCAN_YES, INITIAL_SCAN_NO, INITIAL_SCAN_ONLY)

SCHEMA_CHANGE_POLICY_BACKFILL = "backfill"
SCHEMA_CHANGE_POLICY_NOBACKFILL = "nobackfill"
SCHEMA_CHANGE_POLICY_STOP = "stop"
SCHEMA_CHANGE_POLICY_IGNORE = "ignore"
SCHEMA_CHANGE_POLICIES = (
    SCHEMA_CHANGE_POLICY_BACKFILL,
    SCHEMA_CHANGE_POLICY_NOBACKFILL,
    SCHEMA_CHANGE_POLICY_STOP,
    SCHEMA_CHANGE_POLICY_IGNORE,
)

SCHEMA_CHANGE_EVENTS_DEFAULT = "default"
SCHEMA_CHANGE_EVENTS_COLUMN_CHANGES = "column_changes"
SCHEMA_CHANGE_EVENTS = (SCHEMA_CHANGE_EVENTS_DEFAULT, SCHEMA_CHANGE_EVENTS_COLUMN_CHANGES)

ON_ERROR_PAUSE = "pause"
ON_ERROR_FAIL = "fail"
ON_ERRORS = (ON_ERROR_PAUSE, ON_ERROR_FAIL)
#: Kafka partitioners of ``partition_alg``: sarama's FNV-1a (CockroachDB's default) and Kafka's murmur2.
PARTITION_ALG_FNV1A = "fnv-1a"
PARTITION_ALG_MURMUR2 = "murmur2"
PARTITION_ALGS = (PARTITION_ALG_FNV1A, PARTITION_ALG_MURMUR2)

VIRTUAL_COLUMNS_OMITTED = "omitted"
VIRTUAL_COLUMNS_NULL = "null"
VIRTUAL_COLUMNS = (VIRTUAL_COLUMNS_OMITTED, VIRTUAL_COLUMNS_NULL)

COMPRESSION_GZIP = "gzip"
COMPRESSION_ZSTD = "zstd"
COMPRESSIONS = (COMPRESSION_GZIP, COMPRESSION_ZSTD)

# ---------------------------------------------------------------------------- defaults
DEFAULT_FORMAT = FORMAT_JSON
DEFAULT_ENVELOPE = ENVELOPE_WRAPPED
DEFAULT_SCHEMA_CHANGE_POLICY = SCHEMA_CHANGE_POLICY_BACKFILL
DEFAULT_SCHEMA_CHANGE_EVENTS = SCHEMA_CHANGE_EVENTS_DEFAULT
DEFAULT_ON_ERROR = ON_ERROR_FAIL
DEFAULT_VIRTUAL_COLUMNS = VIRTUAL_COLUMNS_OMITTED
DEFAULT_MIN_CHECKPOINT_FREQUENCY_NS = 30 * NS_PER_S
DEFAULT_WEBHOOK_CLIENT_TIMEOUT_NS = 3 * NS_PER_S

#: Options that only some sinks take (any other sink: ``this sink is incompatible with option X``).
SINK_SPECIFIC_OPTIONS: dict[str, tuple[str, ...]] = {
    OPT_KAFKA_SINK_CONFIG: ("kafka",),
    OPT_PARTITION_ALG: ("kafka",),
    OPT_EXACTLY_ONCE: ("kafka",),
    OPT_WEBHOOK_AUTH_HEADER: ("webhook-https",),
    OPT_WEBHOOK_CLIENT_TIMEOUT: ("webhook-https",),
    OPT_WEBHOOK_SINK_CONFIG: ("webhook-https",),
    OPT_PUBSUB_SINK_CONFIG: ("gcpubsub",),
}
#: The schema registry's options are the Kafka sink's (CockroachDB's ``KafkaValidOptions``): the
#: cloud-storage, webhook and Pub/Sub sinks refuse them (``this sink is incompatible with option
#: confluent_schema_registry``), so ``format = avro``, which needs the registry, is refused there;
#: the embedded topics, ``null://`` and sinkless changefeeds (None) take them.
REGISTRY_OPTIONS = (OPT_CONFLUENT_SCHEMA_REGISTRY, OPT_AVRO_SCHEMA_PREFIX)
REGISTRY_SINKS: tuple[str | None, ...] = ("kafka", "topics", "null", None)

#: Sink URI schemes of cloud storage (CockroachDB's cloud-storage sink).
CLOUD_STORAGE_SCHEMES = (
    "nodelocal",
    "s3",
    "gs",
    "azure",
    "azure-blob",
    "azure-storage",
    "file-http",
    "file-https",
    "http",
    "https",
    "userfile",
    "experimental-s3",
    "experimental-gs",
    "experimental-nodelocal",
    "experimental-azure",
)
WEBHOOK_SCHEME = "webhook-https"
SINKS_WITH_COMPRESSION = (WEBHOOK_SCHEME, *CLOUD_STORAGE_SCHEMES)
# Sinks that take every envelope (kafka, pubsub, the embedded topics, core changefeeds).
ENVELOPE_LIMITED_SINKS = (WEBHOOK_SCHEME, *CLOUD_STORAGE_SCHEMES)
#: CockroachDB's name of each sink kind (``changefeed_sink`` of the enriched envelope's source,
#: ``envelope=enriched is incompatible with <kind> sink``); None is a sinkless changefeed.
SINK_KINDS: dict[str | None, str] = {
    None: "sinkless buffer",
    "kafka": "kafka",
    "topics": "kafka",
    "webhook-https": "webhook",
    "gcpubsub": "pubsub",
    "null": "null",
    **{scheme: "cloudstorage" for scheme in CLOUD_STORAGE_SCHEMES},
}
#: The sink kinds CockroachDB allows ``envelope=enriched`` on.
ENRICHED_SINKS = ("kafka", "pubsub", "webhook", "sinkless buffer", "null")

# Options that cannot be combined with initial_scan='only' (checked in this order).
_NOT_WITH_SCAN_ONLY = (OPT_END_TIME, OPT_RESOLVED, OPT_DIFF, OPT_MVCC_TIMESTAMP, OPT_UPDATED)


def _valid_values(values: tuple[str, ...]) -> str:
    """CockroachDB's list of permitted values: ``'a' and 'b'``; ``'a', 'b',  and 'c'``."""
    quoted = [f"'{v}'" for v in values]
    if len(quoted) == 2:
        return f"{quoted[0]} and {quoted[1]}"
    # The double space before "and" is in CockroachDB's source.
    return ", ".join(quoted[:-1]) + ",  and " + quoted[-1]


# ---------------------------------------------------------------------------- the options
@dataclass(frozen=True, slots=True)
class CrdbOptions:
    """A CockroachDB changefeed's validated ``WITH`` options.

    ``initial_scan`` is the effective mode after defaults (``yes`` without ``cursor``, ``no``
    with one). ``resolved_ns`` is None without ``resolved``, 0 for ``resolved`` without a value
    (emit as the frontier advances), else the minimum spacing. Timestamps are HLC pairs.
    ``raw`` keeps the options as given (lower-cased names), for job descriptions.
    """

    format: str = DEFAULT_FORMAT
    envelope: str = DEFAULT_ENVELOPE
    updated: bool = False
    resolved_ns: int | None = None
    min_checkpoint_frequency_ns: int | None = None  # None: not given (default 30s)
    mvcc_timestamp: bool = False
    diff: bool = False
    key_in_value: bool = False
    topic_in_value: bool = False
    full_table_name: bool = False
    cursor_wall: int | None = None
    cursor_logical: int = 0
    end_time_wall: int | None = None
    end_time_logical: int = 0
    initial_scan: str = INITIAL_SCAN_YES
    split_column_families: bool = False
    virtual_columns: str = DEFAULT_VIRTUAL_COLUMNS
    schema_change_policy: str = DEFAULT_SCHEMA_CHANGE_POLICY
    schema_change_events: str = DEFAULT_SCHEMA_CHANGE_EVENTS
    on_error: str = DEFAULT_ON_ERROR
    partition_alg: str = PARTITION_ALG_FNV1A
    exactly_once: bool = False
    confluent_schema_registry: str | None = None
    avro_schema_prefix: str = ""
    compression: str | None = None
    kafka_sink_config: str | None = None
    webhook_sink_config: str | None = None
    pubsub_sink_config: str | None = None
    webhook_auth_header: str | None = None
    webhook_client_timeout_ns: int = DEFAULT_WEBHOOK_CLIENT_TIMEOUT_NS
    protect_data_from_gc_on_pause: bool = False
    gc_protect_expires_after_ns: int | None = None
    key_column: str | None = None
    unordered: bool = False
    metrics_label: str | None = None
    execution_locality: str | None = None
    lagging_ranges_threshold_ns: int | None = None
    lagging_ranges_polling_interval_ns: int | None = None
    encode_json_value_null_as_object: bool = False
    ignore_disable_changefeed_replication: bool = False
    enriched_properties: tuple[str, ...] = ()  # envelope=enriched: "source", "schema"
    ordering: str = ORDERING_KEY
    #: the sink kind (``SINK_KINDS``): what the enriched envelope's source calls the sink
    sink_kind: str = "sinkless buffer"
    #: set by the statement, for the enriched envelope's source: the job id (0 sinkless) and
    #: the database's cluster id
    job_id: int = 0
    cluster_id: str = ""
    raw: tuple[tuple[str, str | None], ...] = ()
    notices: tuple[str, ...] = ()

    # ------------------------------------------------------------------ derived
    @property
    def cursor(self) -> CommitTs | None:
        return None if self.cursor_wall is None else CommitTs(self.cursor_wall, self.cursor_logical)

    @property
    def end_time(self) -> CommitTs | None:
        return None if self.end_time_wall is None else CommitTs(self.end_time_wall, self.end_time_logical)

    @property
    def resolved(self) -> bool:
        return self.resolved_ns is not None

    @property
    def initial_scan_only(self) -> bool:
        return self.initial_scan == INITIAL_SCAN_ONLY

    @property
    def enriched(self) -> bool:
        return self.envelope == ENVELOPE_ENRICHED

    @property
    def enriched_source(self) -> bool:
        return ENRICHED_SOURCE in self.enriched_properties

    @property
    def enriched_schema(self) -> bool:
        return ENRICHED_SCHEMA in self.enriched_properties

    @property
    def row_envelope(self) -> bool:
        """``row`` (or its alias ``deprecated_row``): columns at the top level."""
        return self.envelope in (ENVELOPE_ROW, ENVELOPE_DEPRECATED_ROW)

    def resolved_interval_ns(self, *, core: bool) -> int:
        """Minimum spacing of resolved messages. Resolved messages never come more often than
        ``min_checkpoint_frequency`` (default 30s for jobs); a core changefeed has no job to
        checkpoint, so there only an explicit ``min_checkpoint_frequency`` bounds them."""
        base = self.resolved_ns or 0
        floor = self.min_checkpoint_frequency_ns
        if floor is None:
            floor = 0 if core or base else DEFAULT_MIN_CHECKPOINT_FREQUENCY_NS
        return max(base, floor)

    def topic_name(self, table: str, *, database: str = "defaultdb", schema: str = "public") -> str:
        """The topic (and ``table`` column of a core changefeed) of a table's messages."""
        return f"{database}.{schema}.{table}" if self.full_table_name else table

    def options_clause(self) -> str:
        """The normalized ``WITH OPTIONS (...)`` of a job description: sorted by name, flags
        bare, values single-quoted (CockroachDB's ``SHOW JOBS`` description)."""
        parts = []
        for name, value in sorted(self.raw):
            if value is None:
                parts.append(name)
            else:
                parts.append(f"{name} = '" + value.replace("'", "''") + "'")
        return f"WITH OPTIONS ({', '.join(parts)})" if parts else ""

    # ------------------------------------------------------------------ JSON round trip
    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["raw"] = [list(p) for p in self.raw]
        d["notices"] = list(self.notices)
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> CrdbOptions:
        known = {f.name for f in fields(CrdbOptions)}
        kw = {k: v for k, v in d.items() if k in known}
        kw["raw"] = tuple((str(p[0]), None if p[1] is None else str(p[1])) for p in d.get("raw", ()))
        kw["notices"] = tuple(d.get("notices", ()))
        kw["enriched_properties"] = tuple(d.get("enriched_properties", ()))
        return CrdbOptions(**kw)


# ---------------------------------------------------------------------------- parsing
def _enum(name: str, value: str, allowed: tuple[str, ...], *, short: bool = False) -> str:
    v = value.lower()
    if v in allowed:
        return v
    if short:
        raise InvalidOption(f"unknown {name}: {value}")
    raise InvalidOption(f"unknown {name}: {value}, valid values are {_valid_values(allowed)}")


def _duration(name: str, value: str, *, positive: bool = False, prefixed: bool = False) -> int:
    try:
        ns = parse_go_duration(value)
    except InvalidOption as e:
        if prefixed:
            raise InvalidOption(f"problem parsing option {name}: {e}") from None
        raise
    if positive and ns <= 0:
        raise InvalidOption(f"option {name} must be a duration greater than 0")
    if ns < 0:
        raise InvalidOption(f"negative durations are not accepted: {name}='{value}'")
    return ns


def _json_config(name: str, value: str) -> str:
    try:
        parsed = orjson.loads(value)
    except orjson.JSONDecodeError:
        raise InvalidOption(f"error unmarshalling json: {name}: {json_error(value)}") from None
    if not isinstance(parsed, dict):
        raise InvalidOption(f"error unmarshalling json: {name} must be a JSON object")
    return value


def parse_crdb_options(
    raw: Mapping[str, str | None],
    *,
    sink_scheme: str | None,
    statement_time: CommitTs | None = None,
    query: bool = False,
) -> CrdbOptions:
    """Validate a CockroachDB changefeed's ``WITH`` clause.

    ``query``: the changefeed is a CDC query (``AS SELECT``): its envelope defaults to ``bare``,
    ``enriched`` is refused, and sinks force no ``key_in_value``/``topic_in_value`` on it.

    ``raw`` maps option names to their string values (None for a flag without a value).
    ``sink_scheme`` is the ``INTO`` URI's scheme (``kafka``, ``webhook-https``, ``nodelocal``,
    ``topics``...), or None for a core changefeed. ``statement_time`` (the statement's commit
    timestamp) resolves relative timestamps and checks that ``cursor`` is not in the future
    and ``end_time`` not before the statement; without it those checks are left to the caller.
    Raises :class:`InvalidOption` with CockroachDB's text.
    """
    opts: dict[str, str | None] = {}
    for name, value in raw.items():
        key = name.lower()
        kind = OPTION_KINDS.get(key)
        if kind is None:
            raise InvalidOption(f'invalid option "{name}"')
        if kind is Kind.FLAG and value is not None:
            raise InvalidOption(f'option "{key}" does not take a value')
        if kind is Kind.VALUE and value is None:
            raise InvalidOption(f'option "{key}" requires a value')
        opts[key] = value
    kw: dict[str, Any] = {"raw": tuple(opts.items())}
    notices: list[str] = []

    def val(name: str) -> str:
        v = opts[name]
        assert v is not None
        return v

    # --- format and envelope
    fmt = _enum(OPT_FORMAT, val(OPT_FORMAT), FORMATS, short=True) if OPT_FORMAT in opts else DEFAULT_FORMAT
    if fmt == FORMAT_EXPERIMENTAL_AVRO:
        fmt = FORMAT_AVRO
    kw["format"] = fmt
    envelope = ENVELOPE_BARE if query else DEFAULT_ENVELOPE
    if OPT_ENVELOPE in opts:
        envelope = _enum(OPT_ENVELOPE, val(OPT_ENVELOPE), ENVELOPES, short=True)
    kw["envelope"] = envelope
    scheme = sink_scheme.lower() if sink_scheme is not None else None
    sink_kind = SINK_KINDS.get(scheme, scheme or "sinkless buffer")
    kw["sink_kind"] = sink_kind
    if OPT_ENRICHED_PROPERTIES in opts:
        props: list[str] = []
        for part in val(OPT_ENRICHED_PROPERTIES).split(","):
            p = part.strip()
            if p == "":
                continue
            if p not in ENRICHED_PROPERTIES:
                raise InvalidOption(
                    f"unknown {OPT_ENRICHED_PROPERTIES}: {p}, valid values are: {', '.join(ENRICHED_PROPERTIES)}"
                )
            if p not in props:
                props.append(p)
        kw["enriched_properties"] = tuple(props)
    if envelope == ENVELOPE_ENRICHED:
        if fmt not in (FORMAT_JSON, FORMAT_AVRO):
            raise InvalidOption("envelope=enriched is only usable with format=json/avro")
        if query:
            raise InvalidOption("envelope=enriched is incompatible with SELECT statement")
    elif kw.get("enriched_properties"):
        raise InvalidOption("enriched_properties is only usable with envelope=enriched")
    if OPT_ORDERING in opts:
        kw["ordering"] = _enum(OPT_ORDERING, val(OPT_ORDERING), ORDERINGS)
        if kw["ordering"] == ORDERING_TOTAL:
            if sink_scheme is None:
                raise InvalidOption(
                    "ordering = 'total' needs a changefeed job (CREATE CHANGEFEED .. INTO): a sinkless "
                    "changefeed emits every change in commit order already"
                )
            if fmt != FORMAT_JSON:
                raise InvalidOption("ordering = 'total' is only usable with format=json")
            if OPT_SPLIT_COLUMN_FAMILIES in opts:
                raise InvalidOption("ordering = 'total' is incompatible with split_column_families")
    if fmt == FORMAT_PARQUET and OPT_TOPIC_IN_VALUE in opts:
        raise InvalidOption("cannot specify both format=parquet and topic_in_value")
    for flag in (
        OPT_UPDATED,
        OPT_MVCC_TIMESTAMP,
        OPT_DIFF,
        OPT_KEY_IN_VALUE,
        OPT_TOPIC_IN_VALUE,
        OPT_FULL_TABLE_NAME,
        OPT_SPLIT_COLUMN_FAMILIES,
        OPT_PROTECT_DATA_FROM_GC_ON_PAUSE,
        OPT_UNORDERED,
        OPT_ENCODE_JSON_VALUE_NULL_AS_OBJECT,
        OPT_IGNORE_DISABLE_CHANGEFEED_REPLICATION,
        OPT_EXACTLY_ONCE,
    ):
        kw[flag] = flag in opts

    # --- durations
    if OPT_RESOLVED in opts:
        v = opts[OPT_RESOLVED]
        kw["resolved_ns"] = 0 if v is None or v == "" else _duration(OPT_RESOLVED, v)
    if OPT_MIN_CHECKPOINT_FREQUENCY in opts:
        kw["min_checkpoint_frequency_ns"] = _duration(
            OPT_MIN_CHECKPOINT_FREQUENCY, val(OPT_MIN_CHECKPOINT_FREQUENCY)
        )
    if OPT_GC_PROTECT_EXPIRES_AFTER in opts:
        kw["gc_protect_expires_after_ns"] = _duration(
            OPT_GC_PROTECT_EXPIRES_AFTER, val(OPT_GC_PROTECT_EXPIRES_AFTER)
        )
    if OPT_WEBHOOK_CLIENT_TIMEOUT in opts:
        kw["webhook_client_timeout_ns"] = _duration(
            OPT_WEBHOOK_CLIENT_TIMEOUT, val(OPT_WEBHOOK_CLIENT_TIMEOUT), positive=True, prefixed=True
        )
    for name, field in (
        (OPT_LAGGING_RANGES_THRESHOLD, "lagging_ranges_threshold_ns"),
        (OPT_LAGGING_RANGES_POLLING_INTERVAL, "lagging_ranges_polling_interval_ns"),
    ):
        if name in opts:
            kw[field] = _duration(name, val(name), positive=True)

    # --- enums
    for name, allowed, field in (
        (OPT_SCHEMA_CHANGE_POLICY, SCHEMA_CHANGE_POLICIES, "schema_change_policy"),
        (OPT_SCHEMA_CHANGE_EVENTS, SCHEMA_CHANGE_EVENTS, "schema_change_events"),
        (OPT_ON_ERROR, ON_ERRORS, "on_error"),
        (OPT_VIRTUAL_COLUMNS, VIRTUAL_COLUMNS, "virtual_columns"),
        (OPT_COMPRESSION, COMPRESSIONS, "compression"),
        (OPT_PARTITION_ALG, PARTITION_ALGS, "partition_alg"),
    ):
        if name in opts:
            kw[field] = _enum(name, val(name), allowed)

    # --- strings
    for name in (
        OPT_CONFLUENT_SCHEMA_REGISTRY,
        OPT_WEBHOOK_AUTH_HEADER,
        OPT_KEY_COLUMN,
        OPT_METRICS_LABEL,
        OPT_EXECUTION_LOCALITY,
    ):
        if name in opts:
            kw[name] = val(name)
    if OPT_AVRO_SCHEMA_PREFIX in opts:
        kw["avro_schema_prefix"] = val(OPT_AVRO_SCHEMA_PREFIX)
    for name in (OPT_KAFKA_SINK_CONFIG, OPT_WEBHOOK_SINK_CONFIG, OPT_PUBSUB_SINK_CONFIG):
        if name in opts:
            kw[name] = _json_config(name, val(name))
    if OPT_PROTECT_DATA_FROM_GC_ON_PAUSE in opts:
        notices.append("protect_data_from_gc_on_pause option is no longer needed")

    # --- initial scan
    has_scan = OPT_INITIAL_SCAN in opts
    scan_value = opts.get(OPT_INITIAL_SCAN)
    scan_mode = None
    if has_scan:
        scan_mode = INITIAL_SCAN_YES if scan_value is None else _initial_scan_value(scan_value)
    if OPT_NO_INITIAL_SCAN in opts:
        if has_scan and scan_mode == INITIAL_SCAN_ONLY:
            raise InvalidOption("cannot specify both initial_scan='only' and no_initial_scan")
        if has_scan:
            raise InvalidOption("cannot specify both initial_scan and no_initial_scan")
        if OPT_INITIAL_SCAN_ONLY in opts:
            raise InvalidOption("cannot specify both initial_scan='only' and no_initial_scan")
        scan_mode = INITIAL_SCAN_NO
    if OPT_INITIAL_SCAN_ONLY in opts:
        if has_scan and scan_mode != INITIAL_SCAN_ONLY:
            raise InvalidOption("cannot specify both initial_scan and initial_scan_only")
        scan_mode = INITIAL_SCAN_ONLY
    if scan_mode == INITIAL_SCAN_ONLY:
        for other in _NOT_WITH_SCAN_ONLY:
            if other in opts:
                raise InvalidOption(f"cannot specify both initial_scan='only' and {other}")
    if scan_mode is None:
        scan_mode = INITIAL_SCAN_NO if OPT_CURSOR in opts else INITIAL_SCAN_YES
    kw["initial_scan"] = scan_mode

    # --- cursor and end_time
    start = statement_time
    if OPT_CURSOR in opts:
        cursor = parse_crdb_timestamp(val(OPT_CURSOR), statement_time)
        if statement_time is not None and cursor > statement_time:
            raise InvalidOption(f"timestamp '{val(OPT_CURSOR)}' is in the future")
        kw["cursor_wall"], kw["cursor_logical"] = cursor.wall, cursor.logical
        start = cursor
    if OPT_END_TIME in opts:
        end = parse_crdb_timestamp(val(OPT_END_TIME), statement_time)
        if start is not None and end < start:
            raise InvalidOption(
                f"specified end time {end.crdb()} cannot be less than statement time {start.crdb()}"
            )
        kw["end_time_wall"], kw["end_time_logical"] = end.wall, end.logical

    # --- format / envelope combinations
    resolved = OPT_RESOLVED in opts
    if fmt == FORMAT_CSV and scan_mode != INITIAL_SCAN_ONLY:
        raise InvalidOption("format=csv is only usable with initial_scan_only")
    if fmt == FORMAT_AVRO:
        if envelope in (ENVELOPE_ROW, ENVELOPE_DEPRECATED_ROW):
            raise InvalidOption("envelope=row is not supported with format=avro")
        for flag in (OPT_KEY_IN_VALUE, OPT_TOPIC_IN_VALUE):
            if flag in opts:
                raise InvalidOption(f"{flag} is not supported with format=avro")
        if envelope not in (ENVELOPE_WRAPPED, ENVELOPE_ENRICHED):
            for flag in (OPT_UPDATED, OPT_MVCC_TIMESTAMP, OPT_DIFF):
                if flag in opts and envelope != ENVELOPE_KEY_ONLY:
                    raise InvalidOption(f"{flag} is only usable with envelope=wrapped")
        if OPT_CONFLUENT_SCHEMA_REGISTRY not in opts:
            raise InvalidOption("WITH option confluent_schema_registry is required for format=avro")
    else:
        if envelope not in (ENVELOPE_WRAPPED, ENVELOPE_BARE, ENVELOPE_ENRICHED):
            for flag in (OPT_KEY_IN_VALUE, OPT_TOPIC_IN_VALUE):
                if flag in opts:
                    raise InvalidOption(f"{flag} is only usable with envelope=wrapped")
        if OPT_DIFF in opts and envelope not in (ENVELOPE_WRAPPED, ENVELOPE_ENRICHED) and not query:
            raise InvalidOption("diff is only usable with envelope=wrapped")
    if OPT_KEY_COLUMN in opts and OPT_UNORDERED not in opts:
        raise InvalidOption(
            "key_column requires the unordered option because messages for the same key are not "
            "guaranteed to be ordered when the message key is not the primary key"
        )
    if OPT_EXACTLY_ONCE in opts and OPT_UNORDERED in opts:
        raise InvalidOption("exactly_once is not usable with unordered")
    if resolved and OPT_UNORDERED in opts:
        raise InvalidOption(
            "resolved timestamps cannot be guaranteed to be correct in unordered mode because we "
            "have no way to know when every message for a timestamp has been emitted"
        )

    # --- sink compatibility
    if scheme == "webhook-http":
        raise InvalidOption("this sink requires webhook-https")
    for name, sinks in SINK_SPECIFIC_OPTIONS.items():
        if name in opts and scheme not in sinks:
            raise InvalidOption(f"this sink is incompatible with option {name}")
    if scheme not in REGISTRY_SINKS:
        for name in REGISTRY_OPTIONS:
            if name in opts:
                raise InvalidOption(f"this sink is incompatible with option {name}")
    if OPT_COMPRESSION in opts and scheme not in SINKS_WITH_COMPRESSION:
        raise InvalidOption(f"this sink is incompatible with option {OPT_COMPRESSION}")
    if scheme in ENVELOPE_LIMITED_SINKS and envelope in (
        ENVELOPE_ROW,
        ENVELOPE_DEPRECATED_ROW,
        ENVELOPE_KEY_ONLY,
    ):
        raise InvalidOption(f"this sink is incompatible with envelope={envelope}")
    if envelope == ENVELOPE_ENRICHED and sink_kind not in ENRICHED_SINKS:
        if scheme in CLOUD_STORAGE_SCHEMES:
            raise InvalidOption(f"this sink is incompatible with envelope={envelope}")
        raise InvalidOption(f"envelope=enriched is incompatible with {sink_kind} sink")
    if fmt == FORMAT_PARQUET and scheme not in CLOUD_STORAGE_SCHEMES:
        raise InvalidOption(f"this sink is incompatible with format={fmt}")
    if scheme == WEBHOOK_SCHEME:
        if fmt not in (FORMAT_JSON, FORMAT_CSV):
            raise InvalidOption(f"this sink is incompatible with format={fmt}")
        # The webhook sink puts the key and the topic in every message (not in CDC queries).
        if fmt == FORMAT_JSON and not query:
            kw["key_in_value"] = kw["topic_in_value"] = True
    elif scheme in CLOUD_STORAGE_SCHEMES and fmt == FORMAT_JSON and not query:
        kw["key_in_value"] = True
    if scheme is None and OPT_SPLIT_COLUMN_FAMILIES in opts and resolved:
        pass  # core changefeeds emit resolved rows with no topic, so families do not matter
    elif scheme in ("kafka", "gcpubsub", "topics") and OPT_SPLIT_COLUMN_FAMILIES in opts and resolved:
        raise InvalidOption(
            "Resolved timestamps are not currently supported with split_column_families for this sink "
            "as the set of topics to fan them out to may change. Instead, use TABLE tablename FAMILY "
            "familyname to specify individual families to watch."
        )
    kw["notices"] = tuple(notices)
    return CrdbOptions(**kw)


def _initial_scan_value(value: str) -> str:
    v = value.lower()
    if v not in INITIAL_SCANS:
        raise InvalidOption(f"unknown initial_scan: {value}")
    return v


__all__ = [
    "ENVELOPES",
    "FORMATS",
    "OPTION_KINDS",
    "CrdbOptions",
    "Kind",
    "format_go_duration",
    "parse_crdb_options",
    "parse_crdb_timestamp",
    "parse_go_duration",
]


def triggers_backfill(old: TableSchema, new: TableSchema, opts: CrdbOptions) -> bool:
    """Whether a schema change from ``old`` to ``new`` re-emits the table under ``opts``
    (``schema_change_events``: every column change, or only those that rewrite rows)."""
    before = {c.id for c in old.stored}
    after = {c.id: c for c in new.stored}
    added = [c for cid, c in after.items() if cid not in before]
    dropped = before - set(after)
    if opts.schema_change_events == SCHEMA_CHANGE_EVENTS_COLUMN_CHANGES:
        return bool(added or dropped)
    return bool(dropped) or any(c.default is not None or c.computed is not None for c in added)
