"""Topic configs as Kafka names them, and what the topic log makes of them.

A config in CreateTopics, AlterConfigs or IncrementalAlterConfigs goes through three checks, in
Kafka's order, and the request changes nothing unless every config passes all of them:

1. its name: one Kafka does not know is refused with Kafka's ``INVALID_CONFIG`` message
   (``Unknown topic config name: x``), before any value is looked at;
2. its value, as Kafka's broker checks it (:mod:`changefeed.server.kafka.config_defs`: type and
   range, with the broker's messages);
3. what the topic log makes of it. The log has one changeable setting per topic, its retention
   (``retention.ms``, what :meth:`changefeed.topics.TopicStore.apply_retention` applies). Every
   other config DescribeConfigs reports is fixed by how the log works (:data:`TOPIC_CONFIGS`):
   setting one to the value it has is accepted and changes nothing, any other value is refused
   with ``INVALID_CONFIG`` and the reason. Every other Kafka topic config (``segment.bytes``,
   ``min.compaction.lag.ms``, ...) names semantics the log does not have and is refused the same
   way, whatever its value, rather than accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from changefeed.exceptions import InvalidOption, InvalidStatement, UnsupportedFeature
from changefeed.server.kafka import config_defs as D
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
    "create",
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


@dataclass(frozen=True, slots=True)
class ConfigSpec:
    """A topic config DescribeConfigs reports: unless it can be changed, the one value the log
    holds and why."""

    name: str
    fixed: str | None = None  #: None: changeable (retention.ms)
    because: str = ""


#: What DescribeConfigs reports for every topic, in this order.
TOPIC_CONFIGS: tuple[ConfigSpec, ...] = (
    ConfigSpec(RETENTION_MS),
    ConfigSpec("cleanup.policy", "delete", "the topic log deletes records by age and never compacts"),
    ConfigSpec(
        "message.timestamp.type",
        "CreateTime",
        "records keep their producer's or their change's commit timestamp",
    ),
    ConfigSpec("compression.type", "producer", "batches are stored as their producer compressed them"),
    ConfigSpec("retention.bytes", "-1", "retention is by age only (retention.ms)"),
    ConfigSpec(
        "max.message.bytes",
        str(MAX_MESSAGE_BYTES),
        "the batch size limit is Kafka's default message.max.bytes",
    ),
    ConfigSpec("min.insync.replicas", "1", "this endpoint is one broker"),
)
_SPECS = {c.name: c for c in TOPIC_CONFIGS}


def retention_ms(retention_ns: int) -> str:
    """``retention.ms`` of a topic log retention (0, kept forever, is -1)."""
    return str(retention_ns // _NS_PER_MS) if retention_ns else "-1"


def parse_retention(value: str | None) -> int:
    """The topic log retention (ns, 0 for ever) of a ``retention.ms`` value; InvalidOption with
    Kafka's message for a value Kafka refuses. 0 ms (Kafka: delete at the next check) is kept as
    1 ns, since 0 means "for ever" to the log."""
    ms = D.check_value(RETENTION_MS, value)
    assert isinstance(ms, int)
    if ms == -1 or ms > _MAX_RETENTION_MS:
        return 0
    return max(ms * _NS_PER_MS, 1)


def _held(spec: ConfigSpec, parsed: object) -> bool:
    """Whether ``parsed`` (a value Kafka takes) is the value the fixed config ``spec`` has."""
    assert spec.fixed is not None
    if isinstance(parsed, list):
        return sorted(set(parsed)) == [spec.fixed]
    if isinstance(parsed, int):
        return parsed == int(spec.fixed)
    return parsed == spec.fixed


def _take(name: str, value: str | None, retention_ns: int) -> int:
    """The retention after setting ``name`` (a name Kafka knows) to ``value``: Kafka's value
    checks first, then what the topic log makes of it."""
    parsed = D.check_value(name, value)
    spec = _SPECS.get(name)
    if spec is None:
        raise UnsupportedFeature(
            f"Topic config {name} is not supported by this endpoint's topic log, which keeps no "
            "segments, compaction, replicas or tiered storage: only retention.ms can be changed"
        )
    if spec.fixed is None:
        return parse_retention(value)
    if not _held(spec, parsed):
        raise UnsupportedFeature(
            f"Topic config {name}={(value or '').strip()} is not supported by this endpoint: {name} is "
            f"always {spec.fixed}, because {spec.because}"
        )
    return retention_ns


def _unique(names: Sequence[str]) -> None:
    if len(set(names)) != len(names):
        raise InvalidStatement("Error due to duplicate config keys")


def create(configs: Sequence[tuple[str, str | None]]) -> int:
    """The retention of a topic CreateTopics makes with ``configs`` (every config checked: names
    first, then values, then what the log makes of them)."""
    _unique([name for name, _ in configs])
    for name, _ in configs:
        D.definition(name)
    retention_ns = DEFAULT_RETENTION_NS
    for name, value in configs:
        D.check_value(name, value)
    for name, value in configs:
        retention_ns = _take(name, value, retention_ns)
    return retention_ns


def alter_incrementally(retention_ns: int, ops: Sequence[tuple[str, int, str | None]]) -> int:
    """The topic's retention after IncrementalAlterConfigs' ``(name, operation, value)`` list
    (validated whole before anything is applied: the caller stores the result). As in Kafka,
    DELETE of a config that is not set (an unknown name included) changes nothing."""
    _unique([name for name, _, _ in ops])
    for name, op, _ in ops:
        if op not in _OPS:
            raise InvalidStatement(f"Unknown config operation {op} for {name}")
        if op != DELETE:
            D.definition(name)
    changes: list[tuple[str, str | None]] = []  # the values to set, each checked as a whole
    for name, op, value in ops:
        if op == DELETE:
            if name == RETENTION_MS:
                retention_ns = DEFAULT_RETENTION_NS
            continue
        if op in (APPEND, SUBTRACT) and D.definition(name).kind != D.LIST:
            raise InvalidOption(f"Can't {_OPS[op]} to key {name} because its type is not LIST.")
        if op == SET:
            changes.append((name, value))
            continue
        items = D.check_value(name, value)  # the items added or taken away
        assert isinstance(items, list)
        spec = _SPECS.get(name)
        held = [] if spec is None or spec.fixed is None else [spec.fixed]
        left = (
            held + [i for i in items if i not in held]
            if op == APPEND
            else [i for i in held if i not in items]
        )
        changes.append((name, ",".join(left)))
    for name, value in changes:
        D.check_value(name, value)
    for name, value in changes:
        retention_ns = _take(name, value, retention_ns)
    return retention_ns


def replace_all(configs: Sequence[tuple[str, str | None]]) -> int:
    """The topic's retention after AlterConfigs (the legacy API: the configs given replace the
    topic's, every other one returns to its default)."""
    return create(configs)
