"""Kafka's topic configs as its broker defines them: every name, its type and the check of its
values (``LogConfig``'s ``ConfigDef`` in Kafka 4.4), with the broker's own error messages.

This is what a Kafka broker refuses before anything else: a name it does not know (``Unknown
topic config name: x``), a value that does not parse as the config's type (``Invalid value abc
for configuration segment.bytes: Not a number of type INT``) or that its validator refuses
(``Value must be at least 1048576``, ``String must be one of: compact, delete``, ...). What the
topic log makes of a valid value is :mod:`changefeed.server.kafka.topic_configs`' business.

Values are read as Kafka's ``ConfigDef`` reads them: blanks around a value are ignored; a LONG
or INT is an optionally signed decimal within its range; a BOOLEAN is ``true`` or ``false`` in
any case; a LIST is comma-separated (an empty value is the empty list, an empty item in a
non-empty list is refused).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from changefeed.exceptions import InvalidOption

__all__ = ["BOOLEAN", "DOUBLE", "INT", "LIST", "LONG", "STRING", "ConfigDef", "check_value", "definition"]

BOOLEAN, DOUBLE, INT, LIST, LONG, STRING = "BOOLEAN", "DOUBLE", "INT", "LIST", "LONG", "STRING"

_INTEGER = re.compile(r"[+-]?[0-9]+")
# What Java's Double.parseDouble takes (decimal forms; its hexadecimal form is left out).
_DECIMAL = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_LIST_SPLIT = re.compile(r"\s*,\s*")
_THROTTLED = re.compile(r"[0-9]+:[0-9]+")
_BITS = {INT: 31, LONG: 63}

#: A validator's check of a parsed value: the reason it is refused, or None.
Check = Callable[[object], str | None]


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One Kafka topic config: its ``ConfigDef`` type and validator."""

    kind: str
    check: Check | None = None


def _at_least(low: float) -> Check:
    def check(v: object) -> str | None:
        assert isinstance(v, int | float)
        return None if v >= low else f"Value must be at least {_number_text(low)}"

    return check


def _between(low: float, high: float) -> Check:
    def check(v: object) -> str | None:
        assert isinstance(v, int | float)
        if v < low:
            return f"Value must be at least {_number_text(low)}"
        return None if v <= high else f"Value must be no more than {_number_text(high)}"

    return check


def _level(low: int, high: int) -> Check:
    """gzip's level check: ``low..high`` or -1 (the codec's default)."""

    def check(v: object) -> str | None:
        ok = v == -1 or (isinstance(v, int) and low <= v <= high)
        return None if ok else f"Value must be between {low} and {high} or equal to -1"

    return check


def _one_of(*values: str) -> Check:
    def check(v: object) -> str | None:
        return None if v in values else f"String must be one of: {', '.join(values)}"

    return check


_CLEANUP_POLICIES = ("compact", "delete")
_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_THROTTLED_CONFIGS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")

#: Every topic config Kafka 4.4 knows (``LogConfig.configNames()``), with its type and validator.
_DEFS: dict[str, ConfigDef] = {
    "cleanup.policy": ConfigDef(LIST),  # items: one of _CLEANUP_POLICIES (see check_value)
    "compression.gzip.level": ConfigDef(INT, _level(1, 9)),
    "compression.lz4.level": ConfigDef(INT, _between(1, 17)),
    "compression.type": ConfigDef(STRING, _one_of(*_COMPRESSION_TYPES)),
    "compression.zstd.level": ConfigDef(INT, _between(-131072, 22)),
    "delete.retention.ms": ConfigDef(LONG, _at_least(0)),
    "errors.deadletterqueue.group.enable": ConfigDef(BOOLEAN),
    "file.delete.delay.ms": ConfigDef(LONG, _at_least(0)),
    "flush.messages": ConfigDef(LONG, _at_least(1)),
    "flush.ms": ConfigDef(LONG, _at_least(0)),
    "follower.replication.throttled.replicas": ConfigDef(LIST),
    "index.interval.bytes": ConfigDef(INT, _at_least(0)),
    "leader.replication.throttled.replicas": ConfigDef(LIST),
    "local.retention.bytes": ConfigDef(LONG, _at_least(-2)),
    "local.retention.ms": ConfigDef(LONG, _at_least(-2)),
    "max.compaction.lag.ms": ConfigDef(LONG, _at_least(1)),
    "max.message.bytes": ConfigDef(INT, _at_least(0)),
    "message.timestamp.after.max.ms": ConfigDef(LONG, _at_least(0)),
    "message.timestamp.before.max.ms": ConfigDef(LONG, _at_least(0)),
    "message.timestamp.type": ConfigDef(STRING, _one_of(*_TIMESTAMP_TYPES)),
    "min.cleanable.dirty.ratio": ConfigDef(DOUBLE, _between(0, 1)),
    "min.compaction.lag.ms": ConfigDef(LONG, _at_least(0)),
    "min.insync.replicas": ConfigDef(INT, _at_least(1)),
    "preallocate": ConfigDef(BOOLEAN),
    "remote.copy.lag.bytes": ConfigDef(LONG, _at_least(-1)),
    "remote.copy.lag.ms": ConfigDef(LONG, _at_least(-1)),
    "remote.log.copy.disable": ConfigDef(BOOLEAN),
    "remote.log.delete.on.disable": ConfigDef(BOOLEAN),
    "remote.storage.enable": ConfigDef(BOOLEAN),
    "retention.bytes": ConfigDef(LONG),
    "retention.ms": ConfigDef(LONG, _at_least(-1)),
    "segment.bytes": ConfigDef(INT, _at_least(1024 * 1024)),
    "segment.index.bytes": ConfigDef(INT, _at_least(4)),
    "segment.jitter.ms": ConfigDef(LONG, _at_least(0)),
    "segment.ms": ConfigDef(LONG, _at_least(1)),
    "unclean.leader.election.enable": ConfigDef(BOOLEAN),
}


def definition(name: str) -> ConfigDef:
    """The definition of topic config ``name``; InvalidOption with Kafka's message for a name
    Kafka does not know."""
    found = _DEFS.get(name)
    if found is None:
        raise InvalidOption(f"Unknown topic config name: {name}")
    return found


def _number_text(v: float) -> str:
    """A number as Java prints it in a validator's message (an int bare, a double as 2.0)."""
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def parse(name: str, value: str) -> object:
    """``value`` parsed as Kafka parses config ``name`` (an int, float, bool, str or list of
    str); InvalidOption with Kafka's message when it does not parse as the config's type."""
    kind = definition(name).kind
    text = value.strip()

    def refuse(why: str) -> InvalidOption:
        return InvalidOption(f"Invalid value {value} for configuration {name}: {why}")

    if kind in _BITS:
        bits = _BITS[kind]
        if not _INTEGER.fullmatch(text) or not -(1 << bits) <= int(text) < 1 << bits:
            raise refuse(f"Not a number of type {kind}")
        return int(text)
    if kind == DOUBLE:
        if not _DECIMAL.fullmatch(text):
            raise refuse("Not a number of type DOUBLE")
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    if kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise refuse("Expected value to be either true or false")
        return text.lower() == "true"
    if kind == LIST:
        return _LIST_SPLIT.split(text) if text else []
    return text


def check_value(name: str, value: str | None) -> object:
    """The value of config ``name`` as Kafka parses it, after Kafka's checks of it (type, then
    validator); InvalidOption with the broker's message when Kafka would refuse it."""
    if value is None:
        raise InvalidOption(f"Null value not supported for topic configs: {name}")
    parsed = parse(name, value)
    if isinstance(parsed, list):
        if parsed and any(not item for item in parsed):
            raise InvalidOption(f"Configuration '{name}' values must not be empty.")
        if name == "cleanup.policy":
            for item in parsed:
                if item not in _CLEANUP_POLICIES:
                    raise InvalidOption(
                        f"Invalid value {item} for configuration {name}: String must be one of: "
                        f"{', '.join(_CLEANUP_POLICIES)}"
                    )
        elif name in _THROTTLED_CONFIGS and parsed != ["*"] and not all(map(_THROTTLED.fullmatch, parsed)):
            raise InvalidOption(
                f"Invalid value [{', '.join(parsed)}] for configuration {name}: {name} must be the "
                "literal '*' or a list of replicas in the following format: "
                "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
            )
        return parsed
    check = definition(name).check
    why = None if check is None else check(parsed)
    if why is not None:
        shown = _number_text(parsed) if isinstance(parsed, int | float) else parsed
        raise InvalidOption(f"Invalid value {shown} for configuration {name}: {why}")
    return parsed
