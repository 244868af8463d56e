"""Changefeed definitions: options parsed and validated into one frozen :class:`FeedSpec`.

YDB ``ALTER TABLE t ADD CHANGEFEED name WITH (...)`` options are named constants below, each with
its default and validation. A spec is stored as JSON in ``_feeds.spec``.
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from changefeed.engine.catalog import TableSchema
from changefeed.engine.clock import CommitTs
from changefeed.engine.temporal_text import parse_interval
from changefeed.engine.type_errors import iso_duration, sql_text
from changefeed.engine.types import Kind
from changefeed.exceptions import InvalidOption
from changefeed.feeds.cdc_plan import CdcQuery
from changefeed.feeds.crdb_options import CrdbOptions

NS_PER_S = 1_000_000_000


class Mode(enum.Enum):
    KEYS_ONLY = "KEYS_ONLY"
    UPDATES = "UPDATES"
    NEW_IMAGE = "NEW_IMAGE"
    OLD_IMAGE = "OLD_IMAGE"
    NEW_AND_OLD_IMAGES = "NEW_AND_OLD_IMAGES"


# ---------------------------------------------------------------------------- YDB option names
OPT_MODE = "mode"
OPT_FORMAT = "format"
OPT_VIRTUAL_TIMESTAMPS = "virtual_timestamps"
OPT_BARRIERS_INTERVAL = "barriers_interval"
#: The older name of BARRIERS_INTERVAL (YDB's changefeeds called barriers resolved timestamps).
OPT_RESOLVED_TIMESTAMPS = "resolved_timestamps"
OPT_INITIAL_SCAN = "initial_scan"
OPT_RETENTION_PERIOD = "retention_period"
OPT_TOPIC_MIN_ACTIVE_PARTITIONS = "topic_min_active_partitions"
OPT_TOPIC_AUTO_PARTITIONING = "topic_auto_partitioning"
OPT_AWS_REGION = "aws_region"
OPT_USER_SIAS = "user_sids"

YDB_OPTIONS = (
    OPT_MODE,
    OPT_FORMAT,
    OPT_VIRTUAL_TIMESTAMPS,
    OPT_BARRIERS_INTERVAL,
    OPT_RESOLVED_TIMESTAMPS,
    OPT_INITIAL_SCAN,
    OPT_RETENTION_PERIOD,
    OPT_TOPIC_MIN_ACTIVE_PARTITIONS,
)

#: Encoder names (see changefeed.formats): YDB's FORMAT values map onto them.
YDB_FORMATS = {"JSON": "ydb-json", "DEBEZIUM_JSON": "debezium-json"}

DEFAULT_RETENTION = dt.timedelta(hours=24)
#: Barriers carry whole milliseconds (YDB's step): a shorter interval could not advance them.
MIN_BARRIERS_INTERVAL = dt.timedelta(milliseconds=1)
MAX_RETENTION = dt.timedelta(days=30)
MAX_TOPIC_PARTITIONS = 1000


@dataclass(frozen=True, slots=True)
class FeedSpec:
    """Everything the pipeline needs to run one changefeed."""

    id: int
    table_id: int
    name: str
    kind: str  # "ydb" | "crdb"
    topic: str
    partitions: int
    format: str  # an encoder name in changefeed.formats
    mode: Mode
    virtual_timestamps: bool = False
    resolved_ns: int | None = None  # emit resolved (barrier) records this often
    initial_scan: bool = False
    retention_ns: int = int(DEFAULT_RETENTION.total_seconds()) * NS_PER_S
    created_seq: int = 0  # change-stream position at creation: the feed delivers seq > this
    created_wall: int = 0  # commit timestamp of the creating transaction (the scan snapshot)
    created_logical: int = 0
    created_tx: int = 0
    crdb: CrdbOptions | None = None  # kind "crdb": the CockroachDB changefeed's WITH options
    #: kind "crdb": the column family whose messages the feed emits (``FAMILY`` targets and
    #: ``split_column_families``: topic ``table.family``), None for whole rows
    family: str | None = None
    #: kind "crdb": a CDC query (``CREATE CHANGEFEED .. AS SELECT``): its predicate and projection
    query: CdcQuery | None = None

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["mode"] = self.mode.value
        d["crdb"] = None if self.crdb is None else self.crdb.to_json()
        d["query"] = None if self.query is None else self.query.to_json()
        if self.query is None:
            del d["query"]  # specs without a query keep their stored form
        return d

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> FeedSpec:
        crdb = d.get("crdb")
        query = d.get("query")
        return FeedSpec(
            **{
                **d,
                "mode": Mode(d["mode"]),
                "crdb": None if crdb is None else CrdbOptions.from_json(crdb),
                "query": None if query is None else CdcQuery.from_json(query),
            }
        )

    def with_ids(self, **kw: Any) -> FeedSpec:
        return replace(self, **kw)


def barrier_of(closed: CommitTs, interval_ns: int) -> CommitTs:
    """YDB's barrier for a closed timestamp: its step (ms) rounded down to a whole number of
    intervals, with transaction id 0 (YDB's ``AdjustVersion``). Every change with a virtual
    timestamp below it (step < barrier) is at or below ``closed``; barriers of feeds with one
    interval fall on the same steps, so a consumer of several topics can cut all at one barrier."""
    interval_ms = max(1, interval_ns // 1_000_000)
    step = closed.wall // 1_000_000 // interval_ms * interval_ms
    return CommitTs(step * 1_000_000, 0)


def _text(value: Any, option: str) -> str:
    if isinstance(value, str):
        return value
    raise InvalidOption(f"changefeed option {option.upper()} takes a string, got {_yql(value)}")


def _bool(value: Any, option: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise InvalidOption(f"changefeed option {option.upper()} takes TRUE or FALSE, got {_yql(value)}")


def _interval(value: Any, option: str) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, str):
        try:
            return parse_interval(value)
        except ValueError:
            pass
    raise InvalidOption(
        f'changefeed option {option.upper()} takes an Interval such as Interval("PT1S"), got {_yql(value)}'
    )


def _yql(value: Any) -> str:
    """A value as YQL text: ``"text"``, ``Interval("P1D")``, ``Date("2026-11-26")``, ``5``."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, dt.timedelta):
        return f'Interval("{iso_duration(value)}")'
    if isinstance(value, dt.datetime):
        return f'Timestamp("{value.isoformat()}")'
    if isinstance(value, dt.date):
        return f'Date("{value.isoformat()}")'
    return sql_text(value)


def parse_ydb_options(
    table: TableSchema, name: str, options: Mapping[str, Any], *, feed_id: int = 0
) -> FeedSpec:
    """Validate YDB ``ADD CHANGEFEED`` options (already evaluated to Python values)."""
    opts = {k.lower(): v for k, v in options.items()}
    unknown = sorted(set(opts) - set(YDB_OPTIONS))
    if unknown:
        raise InvalidOption(
            f"unknown changefeed option {unknown[0].upper()}; valid options are: {', '.join(o.upper() for o in YDB_OPTIONS)}"
        )
    if OPT_MODE not in opts:
        raise InvalidOption(
            "changefeed option MODE is required (KEYS_ONLY, UPDATES, NEW_IMAGE, OLD_IMAGE, NEW_AND_OLD_IMAGES)"
        )
    if OPT_FORMAT not in opts:
        raise InvalidOption("changefeed option FORMAT is required (JSON or DEBEZIUM_JSON)")
    mode_text = _text(opts[OPT_MODE], OPT_MODE).upper()
    try:
        mode = Mode(mode_text)
    except ValueError:
        raise InvalidOption(
            f"invalid MODE {_yql(opts[OPT_MODE])}; expected one of {', '.join(m.value for m in Mode)}"
        ) from None
    fmt_text = _text(opts[OPT_FORMAT], OPT_FORMAT).upper()
    if fmt_text not in YDB_FORMATS:
        raise InvalidOption(f"invalid FORMAT {_yql(opts[OPT_FORMAT])}; expected JSON or DEBEZIUM_JSON")
    virtual = _bool(opts.get(OPT_VIRTUAL_TIMESTAMPS, False), OPT_VIRTUAL_TIMESTAMPS)
    if OPT_BARRIERS_INTERVAL in opts and OPT_RESOLVED_TIMESTAMPS in opts:
        raise InvalidOption(
            "BARRIERS_INTERVAL and RESOLVED_TIMESTAMPS are one option (RESOLVED_TIMESTAMPS is its older name);"
            " give only one"
        )
    resolved_ns = None
    for opt in (OPT_BARRIERS_INTERVAL, OPT_RESOLVED_TIMESTAMPS):
        if opt in opts:
            interval = _interval(opts[opt], opt)
            if interval < MIN_BARRIERS_INTERVAL:
                raise InvalidOption(
                    f"{opt.upper()} must be an interval of at least 1 millisecond, got {interval}"
                )
            resolved_ns = interval // dt.timedelta(microseconds=1) * 1_000
    initial_scan = _bool(opts.get(OPT_INITIAL_SCAN, False), OPT_INITIAL_SCAN)
    retention = _interval(opts.get(OPT_RETENTION_PERIOD, DEFAULT_RETENTION), OPT_RETENTION_PERIOD)
    if not dt.timedelta(seconds=1) <= retention <= MAX_RETENTION:
        # YDB's SchemeShard check (its words), with the spec's maximum, durations in ISO 8601
        raise InvalidOption(
            f"Invalid retention period: specified: {iso_duration(retention)}, min: PT1S, "
            f"max: {iso_duration(MAX_RETENTION)}"
        )
    partitions = table.partitions
    if OPT_TOPIC_MIN_ACTIVE_PARTITIONS in opts:
        n = opts[OPT_TOPIC_MIN_ACTIVE_PARTITIONS]
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_TOPIC_PARTITIONS:
            raise InvalidOption(
                f"TOPIC_MIN_ACTIVE_PARTITIONS must be an integer from 1 to {MAX_TOPIC_PARTITIONS}, got {_yql(n)}"
            )
        first = table.key[0]
        if not (first.type.kind is Kind.UINT and first.type.bits in (32, 64)):
            raise InvalidOption(
                "TOPIC_MIN_ACTIVE_PARTITIONS is supported only for tables whose first primary key column is "
                f"Uint64 or Uint32; {table.name}.{first.name} is {first.type.name}"
            )
        partitions = n
    return FeedSpec(
        id=feed_id,
        table_id=table.id,
        name=name,
        kind="ydb",
        topic=f"{table.short_name}/{name}",
        partitions=partitions,
        format=YDB_FORMATS[fmt_text],
        mode=mode,
        virtual_timestamps=virtual,
        resolved_ns=resolved_ns,
        initial_scan=initial_scan,
        retention_ns=int(retention.total_seconds()) * NS_PER_S,
    )
