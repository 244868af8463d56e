"""Topic configs as Kafka names them, and what the topic log makes of them.

The topic log has one changeable setting per topic: its retention (``retention.ms``, what
:meth:`changefeed.topics.TopicStore.apply_retention` applies). Every other config DescribeConfigs
reports is fixed by how the log works (:data:`TOPIC_CONFIGS`); setting one to the value it has
is accepted and changes nothing, any other value is refused with ``INVALID_CONFIG`` and the
reason. A Kafka topic config the log has no notion of (``segment.bytes``, ``min.compaction.lag.ms``,
...) is refused the same way; a name Kafka does not know is refused with Kafka's own message.

Values are checked as Kafka's broker checks them (a LONG is an optionally signed decimal within
int64, surrounding blanks ignored; ``retention.ms`` is at least -1), so a value Kafka refuses is
refused here with the same message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from changefeed.exceptions import InvalidOption, InvalidStatement, UnsupportedFeature
from changefeed.server.kafka.topic_apis import MAX_MESSAGE_BYTES
from changefeed.topics.store import DEFAULT_RETENTION_NS

__all__ = [
    "APPEND",
    "DELETE",
    "SET",
    "SUBTRACT",
    "TOPIC_CONFIGS",
    "ConfigSpec",
    "alter_incrementally",
    "parse_retention",
    "replace_all",
    "retention_ms",
]

# IncrementalAlterConfigs' operations (Kafka's AlterConfigOp.OpType ids).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

RETENTION_MS = "retention.ms"
_NS_PER_MS = 1_000_000
#: The longest retention the log counts (its ns fit int64, about 292 years); a longer one (Kafka's
#: Long.MAX_VALUE idiom included) keeps records forever, as -1 does, and is reported as -1.
_MAX_RETENTION_MS = ((1 << 63) - 1) // _NS_PER_MS
_LONG = re.compile(r"[+-]?[0-9]+")


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """A topic config DescribeConfigs reports: its Kafka type, and, unless it can be changed,
    the one value the log holds and why."""

    name: str
    kind: str  #: Kafka's ConfigDef type: LONG, INT, STRING, LIST
    fixed: str | None = None  #: None: changeable (retention.ms)
    because: str = ""


#: What DescribeConfigs reports for every topic, in this order.
TOPIC_CONFIGS: tuple[ConfigSpec, ...] = (
    ConfigSpec(RETENTION_MS, "LONG"),
    ConfigSpec("cleanup.policy", "LIST", "delete", "the topic log deletes records by age and never compacts"),
    ConfigSpec(
        "message.timestamp.type",
        "STRING",
        "CreateTime",
        "records keep their producer's or their change's commit timestamp",
    ),
    ConfigSpec(
        "compression.type", "STRING", "producer", "batches are stored as their producer compressed them"
    ),
    ConfigSpec("retention.bytes", "LONG", "-1", "retention is by age only (retention.ms)"),
    ConfigSpec(
        "max.message.bytes",
        "INT",
        str(MAX_MESSAGE_BYTES),
        "the batch size limit is Kafka's default message.max.bytes",
    ),
    ConfigSpec("min.insync.replicas", "INT", "1", "this endpoint is one broker"),
)
_SPECS = {c.name: c for c in TOPIC_CONFIGS}

#: Every topic config Kafka 4.4 knows, with its type (LogConfig.configNames()).
_KAFKA_TOPIC_CONFIGS: dict[str, str] = {
    "cleanup.policy": "LIST",
    "compression.gzip.level": "INT",
    "compression.lz4.level": "INT",
    "compression.type": "STRING",
    "compression.zstd.level": "INT",
    "delete.retention.ms": "LONG",
    "errors.deadletterqueue.group.enable": "BOOLEAN",
    "file.delete.delay.ms": "LONG",
    "flush.messages": "LONG",
    "flush.ms": "LONG",
    "follower.replication.throttled.replicas": "LIST",
    "index.interval.bytes": "INT",
    "leader.replication.throttled.replicas": "LIST",
    "local.retention.bytes": "LONG",
    "local.retention.ms": "LONG",
    "max.compaction.lag.ms": "LONG",
    "max.message.bytes": "INT",
    "message.timestamp.after.max.ms": "LONG",
    "message.timestamp.before.max.ms": "LONG",
    "message.timestamp.type": "STRING",
    "min.cleanable.dirty.ratio": "DOUBLE",
    "min.compaction.lag.ms": "LONG",
    "min.insync.replicas": "INT",
    "preallocate": "BOOLEAN",
    "remote.copy.lag.bytes": "LONG",
    "remote.copy.lag.ms": "LONG",
    "remote.log.copy.disable": "BOOLEAN",
    "remote.log.delete.on.disable": "BOOLEAN",
    "remote.storage.enable": "BOOLEAN",
    "retention.bytes": "LONG",
    "retention.ms": "LONG",
    "segment.bytes": "INT",
    "segment.index.bytes": "INT",
    "segment.jitter.ms": "LONG",
    "segment.ms": "LONG",
    "unclean.leader.election.enable": "BOOLEAN",
}


def retention_ms(retention_ns: int) -> str:
    """``retention.ms`` of a topic log retention (0, kept forever, is -1)."""
    return str(retention_ns // _NS_PER_MS) if retention_ns else "-1"


def parse_retention(value: str | None) -> int:
    """The topic log retention (ns, 0 for ever) of a ``retention.ms`` value; InvalidOption with
    Kafka's message for a value Kafka refuses. 0 ms (Kafka: delete at the next check) is kept as
    1 ns, since 0 means "for ever" to the log."""
    ms = _number(RETENTION_MS, value)
    if ms < -1:
        raise InvalidOption(
            f"Invalid value {value} for configuration {RETENTION_MS}: Value must be at least -1"
        )
    if ms == -1 or ms > _MAX_RETENTION_MS:
        return 0
    return max(ms * _NS_PER_MS, 1)


def _number(name: str, value: str | None, kind: str = "LONG") -> int:
    """A LONG or INT config value as Kafka parses it (blanks around it ignored)."""
    text = (value or "").strip()
    bits = 63 if kind == "LONG" else 31
    if not _LONG.fullmatch(text) or not -(1 << bits) <= int(text) < 1 << bits:
        raise InvalidOption(f"Invalid value {value} for configuration {name}: Not a number of type {kind}")
    return int(text)


def _check_known(name: str) -> ConfigSpec:
    """The spec of a config the log reports; InvalidOption for a name Kafka does not know,
    UnsupportedFeature for a Kafka config the log has no notion of."""
    spec = _SPECS.get(name)
    if spec is not None:
        return spec
    if name not in _KAFKA_TOPIC_CONFIGS:
        raise InvalidOption(f"Unknown topic config name: {name}")
    raise UnsupportedFeature(
        f"Topic config {name} is not supported by this endpoint's topic log, which keeps no "
        "segments, replicas or tiered storage: only retention.ms can be changed"
    )


def _fixed(spec: ConfigSpec, value: str) -> None:
    """A fixed config set to ``value``: accepted if that is the value it has."""
    assert spec.fixed is not None
    if spec.kind == "LIST":
        same = sorted({v.strip() for v in value.split(",") if v.strip()}) == [spec.fixed]
    elif spec.kind in ("LONG", "INT"):
        same = _number(spec.name, value, spec.kind) == int(spec.fixed)
    else:
        same = value.strip().lower() == spec.fixed.lower()
    if not same:
        raise UnsupportedFeature(
            f"Topic config {spec.name} cannot be {value!r} on this endpoint: it is {spec.fixed} "
            f"because {spec.because}"
        )


def _set(spec: ConfigSpec, value: str | None, retention_ns: int) -> int:
    """The retention after setting ``spec`` to ``value`` (a fixed config: unchanged)."""
    if spec.fixed is None:
        return parse_retention(value)
    if value is None:
        raise InvalidOption(f"Invalid value null for configuration {spec.name}")
    _fixed(spec, value)
    return retention_ns


def _unique(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise InvalidStatement("Error due to duplicate config keys")


def alter_incrementally(retention_ns: int, ops: Sequence[tuple[str, int, str | None]]) -> int:
    """The topic's retention after IncrementalAlterConfigs' ``(name, operation, value)`` list
    (validated whole before anything is applied: the caller stores the result)."""
    _unique([name for name, _, _ in ops])
    for name, op, value in ops:
        if op not in _OPS:
            raise InvalidStatement(f"Unknown config operation {op} for {name}")
        spec = _check_known(name)
        if op == SET:
            retention_ns = _set(spec, value, retention_ns)
        elif op == DELETE:  # back to the default
            if spec.fixed is None:
                retention_ns = DEFAULT_RETENTION_NS
        elif spec.kind != "LIST":
            raise InvalidOption(f"Can't {_OPS[op]} to key {name} because its type is not LIST.")
        else:  # a list (cleanup.policy): it keeps its one value unless that is taken away
            items = {v.strip() for v in (value or "").split(",") if v.strip()}
            held = {spec.fixed or ""}
            left = held | items if op == APPEND else held - items
            _fixed(spec, ",".join(sorted(left)))
    return retention_ns


def replace_all(configs: Sequence[tuple[str, str | None]]) -> int:
    """The topic's retention after AlterConfigs (the legacy API: the configs given replace the
    topic's, every other one returns to its default)."""
    _unique([name for name, _ in configs])
    retention_ns = DEFAULT_RETENTION_NS
    for name, value in configs:
        retention_ns = _set(_check_known(name), value, retention_ns)
    return retention_ns
