"""CockroachDB changefeed options: defaults, values, and every error with CockroachDB's text."""

from __future__ import annotations

import pytest

from changefeed.engine.clock import CommitTs
from changefeed.exceptions import InvalidOption, UnsupportedFeature
from changefeed.feeds.crdb_options import (
    CrdbOptions,
    format_go_duration,
    parse_crdb_options,
    parse_crdb_timestamp,
    parse_go_duration,
)
from changefeed.feeds.spec import FeedSpec, Mode

NOW = CommitTs(1_700_000_000_000_000_000, 3)


def core(**raw: str | None) -> CrdbOptions:
    return parse_crdb_options(raw, sink_scheme=None, statement_time=NOW)


def test_defaults() -> None:
    o = core()
    assert (o.format, o.envelope, o.initial_scan) == ("json", "wrapped", "yes")
    assert not (o.updated or o.diff or o.mvcc_timestamp or o.key_in_value or o.topic_in_value)
    assert o.resolved_ns is None and not o.resolved
    assert o.cursor is None and o.end_time is None
    assert (o.schema_change_policy, o.schema_change_events, o.on_error) == ("backfill", "default", "fail")
    assert o.virtual_columns == "omitted"
    assert o.topic_name("t") == "t"
    assert core(full_table_name=None).topic_name("t") == "defaultdb.public.t"


def test_flags_and_values() -> None:
    o = core(UPDATED=None, diff=None, mvcc_timestamp=None, key_in_value=None, topic_in_value=None)
    assert o.updated and o.diff and o.mvcc_timestamp and o.key_in_value and o.topic_in_value
    assert core(envelope="ROW").envelope == "row"
    assert core(envelope="deprecated_row").row_envelope
    assert core(envelope="key_only").envelope == "key_only"
    assert core(envelope="bare").envelope == "bare"
    assert core(format="experimental_avro", confluent_schema_registry="http://r").format == "avro"
    assert core(virtual_columns="null").virtual_columns == "null"
    assert core(schema_change_policy="NoBackfill").schema_change_policy == "nobackfill"
    assert core(schema_change_events="column_changes").schema_change_events == "column_changes"
    assert core(on_error="pause").on_error == "pause"


def test_resolved_and_durations() -> None:
    assert core(resolved=None).resolved_ns == 0
    assert core(resolved="").resolved_ns == 0
    assert core(resolved="10s").resolved_ns == 10 * 10**9
    assert core(resolved="1m30s").resolved_ns == 90 * 10**9
    assert core(resolved="1.5h").resolved_ns == 5400 * 10**9
    assert core(resolved="250ms").resolved_ns == 250 * 10**6
    assert core(resolved="0").resolved_ns == 0
    assert core(min_checkpoint_frequency="0s").min_checkpoint_frequency_ns == 0
    # Resolved messages are never more frequent than min_checkpoint_frequency (30s for jobs).
    assert core(resolved="10s").resolved_interval_ns(core=False) == 10 * 10**9
    assert core(resolved=None).resolved_interval_ns(core=False) == 30 * 10**9
    assert core(resolved=None).resolved_interval_ns(core=True) == 0
    assert core(resolved="1s", min_checkpoint_frequency="5s").resolved_interval_ns(core=True) == 5 * 10**9
    assert core(gc_protect_expires_after="24h").gc_protect_expires_after_ns == 86400 * 10**9


@pytest.mark.parametrize(
    ("text", "ns"),
    [("10s", 10 * 10**9), ("1h2m3s", 3723 * 10**9), ("1us", 1000), ("1µs", 1000), ("-2ms", -2_000_000)],
)
def test_go_durations(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


def test_go_duration_format() -> None:
    assert [format_go_duration(n) for n in (0, 10 * 10**9, 90 * 10**9, 5 * 10**8, 3723 * 10**9)] == [
        "0s",
        "10s",
        "1m30s",
        "500ms",
        "1h2m3s",
    ]


def test_initial_scan_modes() -> None:
    assert core(initial_scan=None).initial_scan == "yes"
    assert core(initial_scan="yes").initial_scan == "yes"
    assert core(initial_scan="NO").initial_scan == "no"
    assert core(initial_scan="only").initial_scan_only
    assert core(initial_scan_only=None).initial_scan == "only"
    assert core(no_initial_scan=None).initial_scan == "no"
    assert core(initial_scan="only", initial_scan_only=None).initial_scan == "only"
    # With a cursor the default is no scan; initial_scan='yes' scans at the cursor.
    assert core(cursor="1.0000000000").initial_scan == "no"
    assert core(cursor="1.0000000000", initial_scan="yes").initial_scan == "yes"


def test_cursor_and_end_time_forms() -> None:
    assert core(cursor="1536242855577149065.0000000000").cursor == CommitTs(1536242855577149065, 0)
    assert core(cursor="1536242855577149065.0000000007").cursor == CommitTs(1536242855577149065, 7)
    assert core(cursor="1536242855577149065").cursor == CommitTs(1536242855577149065, 0)
    assert core(cursor="2020-01-02 03:04:05").cursor == CommitTs(1577934245 * 10**9, 0)
    assert core(cursor="2020-01-02T03:04:05.5Z").cursor == CommitTs(1577934245 * 10**9 + 5 * 10**8, 0)
    assert core(cursor="2020-01-02 04:04:05+01:00").cursor == CommitTs(1577934245 * 10**9, 0)
    assert core(cursor="-10s").cursor == CommitTs(NOW.wall - 10 * 10**9, 0)
    assert core(cursor="-1 day").cursor == CommitTs(NOW.wall - 86400 * 10**9, 0)
    end = core(end_time="1800000000000000000").end_time
    assert end == CommitTs(1800000000000000000, 0)
    assert parse_crdb_timestamp("5.0000000001", None) == CommitTs(5, 1)


ERRORS: list[tuple[dict[str, str | None], str]] = [
    ({"foo": None}, 'invalid option "foo"'),
    ({"topics": "x"}, 'invalid option "topics"'),
    ({"updated": "yes"}, 'option "updated" does not take a value'),
    ({"on_error": None}, 'option "on_error" requires a value'),
    ({"envelope": None}, 'option "envelope" requires a value'),
    ({"format": "nope"}, "unknown format: nope"),
    ({"envelope": "nope"}, "unknown envelope: nope"),
    ({"envelope": "lobster"}, "unknown envelope: lobster"),
    ({"initial_scan": "foo"}, "unknown initial_scan: foo"),
    ({"on_error": "not_valid"}, "unknown on_error: not_valid, valid values are 'pause' and 'fail'"),
    (
        {"schema_change_policy": "sometimes"},
        "unknown schema_change_policy: sometimes, valid values are 'backfill', 'nobackfill', 'stop',  and 'ignore'",
    ),
    (
        {"schema_change_events": "x"},
        "unknown schema_change_events: x, valid values are 'default' and 'column_changes'",
    ),
    ({"virtual_columns": "x"}, "unknown virtual_columns: x, valid values are 'omitted' and 'null'"),
    ({"initial_scan": None, "no_initial_scan": None}, "cannot specify both initial_scan and no_initial_scan"),
    (
        {"initial_scan": "yes", "no_initial_scan": None},
        "cannot specify both initial_scan and no_initial_scan",
    ),
    (
        {"initial_scan": None, "initial_scan_only": None},
        "cannot specify both initial_scan and initial_scan_only",
    ),
    (
        {"initial_scan_only": None, "no_initial_scan": None},
        "cannot specify both initial_scan='only' and no_initial_scan",
    ),
    (
        {"initial_scan": "only", "no_initial_scan": None},
        "cannot specify both initial_scan='only' and no_initial_scan",
    ),
    ({"initial_scan": "only", "resolved": None}, "cannot specify both initial_scan='only' and resolved"),
    ({"initial_scan_only": None, "diff": None}, "cannot specify both initial_scan='only' and diff"),
    ({"initial_scan": "only", "updated": None}, "cannot specify both initial_scan='only' and updated"),
    (
        {"initial_scan": "only", "mvcc_timestamp": None},
        "cannot specify both initial_scan='only' and mvcc_timestamp",
    ),
    (
        {"initial_scan_only": None, "end_time": "1800000000000000000"},
        "cannot specify both initial_scan='only' and end_time",
    ),
    ({"resolved": "bar"}, 'time: invalid duration "bar"'),
    ({"resolved": "10"}, 'time: missing unit in duration "10"'),
    ({"resolved": "1d"}, 'time: unknown unit "d" in duration "1d"'),
    ({"resolved": "-1s"}, "negative durations are not accepted: resolved='-1s'"),
    (
        {"min_checkpoint_frequency": "-1s"},
        "negative durations are not accepted: min_checkpoint_frequency='-1s'",
    ),
    ({"format": "csv"}, "format=csv is only usable with initial_scan_only"),
    ({"format": "avro"}, "WITH option confluent_schema_registry is required for format=avro"),
    (
        {"format": "avro", "envelope": "row", "confluent_schema_registry": "http://r"},
        "envelope=row is not supported with format=avro",
    ),
    (
        {"format": "avro", "key_in_value": None, "confluent_schema_registry": "http://r"},
        "key_in_value is not supported with format=avro",
    ),
    (
        {"format": "avro", "topic_in_value": None, "confluent_schema_registry": "http://r"},
        "topic_in_value is not supported with format=avro",
    ),
    (
        {"format": "avro", "envelope": "bare", "updated": None, "confluent_schema_registry": "http://r"},
        "updated is only usable with envelope=wrapped",
    ),
    ({"envelope": "row", "key_in_value": None}, "key_in_value is only usable with envelope=wrapped"),
    ({"envelope": "key_only", "topic_in_value": None}, "topic_in_value is only usable with envelope=wrapped"),
    ({"envelope": "row", "diff": None}, "diff is only usable with envelope=wrapped"),
    ({"key_column": "x"}, "key_column requires the unordered option"),
    (
        {"unordered": None, "resolved": None},
        "resolved timestamps cannot be guaranteed to be correct in unordered mode",
    ),
    ({"cursor": "bogus"}, "AS OF SYSTEM TIME: value is neither timestamp, decimal, nor interval"),
    (
        {"cursor": "1800000000000000000.0000000000"},
        "timestamp '1800000000000000000.0000000000' is in the future",
    ),
    ({"cursor": "1.00000000001"}, "logical part of 1.00000000001 has too many digits"),
    ({"end_time": "1.0000000000"}, "specified end time 1.0000000000 cannot be less than statement time"),
    (
        {"kafka_sink_config": '{"Flush": {"Messages": 1}}'},
        "this sink is incompatible with option kafka_sink_config",
    ),
    ({"webhook_auth_header": "Basic x"}, "this sink is incompatible with option webhook_auth_header"),
    ({"compression": "gzip"}, "this sink is incompatible with option compression"),
    ({"format": "parquet"}, "this sink is incompatible with format=parquet"),
]


@pytest.mark.parametrize(("raw", "message"), ERRORS, ids=[e[1][:60] for e in ERRORS])
def test_core_errors(raw: dict[str, str | None], message: str) -> None:
    with pytest.raises((InvalidOption, UnsupportedFeature)) as e:
        parse_crdb_options(raw, sink_scheme=None, statement_time=NOW)
    assert message in str(e.value)
    assert str(e.value).startswith(message)


SINK_ERRORS: list[tuple[str, dict[str, str | None], str]] = [
    ("webhook-https", {"envelope": "row"}, "this sink is incompatible with envelope=row"),
    ("webhook-https", {"envelope": "key_only"}, "this sink is incompatible with envelope=key_only"),
    ("nodelocal", {"envelope": "key_only"}, "this sink is incompatible with envelope=key_only"),
    ("webhook-http", {}, "this sink requires webhook-https"),
    ("kafka", {"compression": "gzip"}, "this sink is incompatible with option compression"),
    (
        "webhook-https",
        {"compression": "lz4"},
        "unknown compression: lz4, valid values are 'gzip' and 'zstd'",
    ),
    (
        "webhook-https",
        {"webhook_client_timeout": "not_an_integer"},
        'problem parsing option webhook_client_timeout: time: invalid duration "not_an_integer"',
    ),
    (
        "webhook-https",
        {"webhook_client_timeout": "0s"},
        "option webhook_client_timeout must be a duration greater than 0",
    ),
    ("kafka", {"kafka_sink_config": "{bad"}, "error unmarshalling json"),
    (
        "kafka",
        {"split_column_families": None, "resolved": None},
        "Resolved timestamps are not currently supported",
    ),
    ("kafka", {"webhook_sink_config": "{}"}, "this sink is incompatible with option webhook_sink_config"),
    (
        "gcpubsub",
        {"format": "avro", "confluent_schema_registry": "http://r"},
        "this sink is incompatible with option confluent_schema_registry",
    ),
    ("azure", {"avro_schema_prefix": "super"}, "this sink is incompatible with option avro_schema_prefix"),
]


@pytest.mark.parametrize("scheme", ["kafka", "topics", "null", None])
def test_registry_sinks(scheme: str | None) -> None:
    """The registry's options are the Kafka sink's; sinkless and null changefeeds take them too."""
    raw: dict[str, str | None] = {
        "format": "avro",
        "confluent_schema_registry": "http://r",
        "avro_schema_prefix": "super",
    }
    o = parse_crdb_options(raw, sink_scheme=scheme, statement_time=NOW)
    assert (o.format, o.confluent_schema_registry, o.avro_schema_prefix) == ("avro", "http://r", "super")


@pytest.mark.parametrize(("scheme", "raw", "message"), SINK_ERRORS, ids=[e[2][:60] for e in SINK_ERRORS])
def test_sink_errors(scheme: str, raw: dict[str, str | None], message: str) -> None:
    with pytest.raises(InvalidOption) as e:
        parse_crdb_options(raw, sink_scheme=scheme, statement_time=NOW)
    assert str(e.value).startswith(message)


def test_sink_options() -> None:
    w = parse_crdb_options(
        {"webhook_auth_header": "Basic x", "webhook_client_timeout": "5s", "compression": "GZIP"},
        sink_scheme="webhook-https",
    )
    assert w.key_in_value and w.topic_in_value  # the webhook sink puts both in every message
    assert (w.webhook_auth_header, w.webhook_client_timeout_ns, w.compression) == (
        "Basic x",
        5 * 10**9,
        "gzip",
    )
    c = parse_crdb_options({}, sink_scheme="nodelocal")
    assert c.key_in_value and not c.topic_in_value
    k = parse_crdb_options({"kafka_sink_config": '{"Flush": {"Messages": 10}}'}, sink_scheme="kafka")
    assert k.kafka_sink_config == '{"Flush": {"Messages": 10}}'
    p = parse_crdb_options({"protect_data_from_gc_on_pause": None}, sink_scheme="kafka")
    assert p.protect_data_from_gc_on_pause
    assert p.notices == ("protect_data_from_gc_on_pause option is no longer needed",)


def test_options_clause_and_json_round_trip() -> None:
    o = core(updated=None, envelope="wrapped", resolved="10s", cursor="1.0000000002")
    assert (
        o.options_clause()
        == "WITH OPTIONS (cursor = '1.0000000002', envelope = 'wrapped', resolved = '10s', updated)"
    )
    assert CrdbOptions.from_json(o.to_json()) == o
    spec = FeedSpec(
        id=1, table_id=2, name="crdb", kind="crdb", topic="t", partitions=1, format="crdb-json",
        mode=Mode.NEW_IMAGE, crdb=o,
    )  # fmt: skip
    assert FeedSpec.from_json(spec.to_json()) == spec
    plain = FeedSpec(
        id=1,
        table_id=2,
        name="f",
        kind="ydb",
        topic="t/f",
        partitions=1,
        format="ydb-json",
        mode=Mode.UPDATES,
    )
    assert FeedSpec.from_json(plain.to_json()) == plain
