"""The feed checks (:func:`validate_feed`), over every record of a feed's topic against the journal
and the table: ``order``, ``exactly_once``, ``images``, ``resolved`` and ``initial_scan`` (see
:mod:`changefeed.testing.validators`)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import changefeed
from changefeed.feeds.spec import FeedSpec, Mode
from changefeed.formats.base import partition_of
from changefeed.testing.validators.journal import (
    CHANGE_ERASE,
    CHANGE_UPSERT,
    ChangeRow,
    change_rows,
    table_state,
)
from changefeed.testing.validators.records import FeedEvent, decode_records, find_feed, read_topic
from changefeed.testing.validators.report import Report
from changefeed.testing.validators.values import Image, Key

__all__ = ["validate_events", "validate_feed", "validate_records"]


def _order(e: FeedEvent, spec: FeedSpec) -> tuple[int, int]:
    """Commit order of an event: (wall ns, transaction id). Transaction ids are allocated with the
    commit timestamp under the write lock, so they order commits even within one wall ns."""
    if e.kind == "snapshot":
        return (spec.created_wall, spec.created_tx)
    if e.kind == "resolved":
        return (e.ts, e.tx if e.tx is not None else 1 << 62)  # wall only: covers that whole ns
    return (e.ts, e.tx if e.tx is not None else 0)


def validate_feed(db: str | Path, feed: str | int, *, complete: bool = True) -> Report:
    """Read the whole topic of ``feed`` and run every feed check against the journal and table.

    ``complete``: the pipeline has delivered everything committed (run after ``--until-idle``);
    when False, missing records are not reported (only duplicates, order, images...)."""
    return validate_records(db, feed, None, complete=complete)


# (issue 10, the Kafka sink: records read back from an external sink)
def validate_records(
    db: str | Path,
    feed: str | int,
    records: Sequence[tuple[int, int, bytes | None, bytes, int]] | None,
    *,
    complete: bool = True,
    partition_of_key: Callable[[bytes], int] | None = None,
    at_least_once: bool = False,
) -> Report:
    """:func:`validate_feed` over ``records`` (partition, offset, key, value, ts) read from a sink
    (None: the feed's embedded topic). ``partition_of_key``: the sink's partitioner (default:
    the embedded topics'). ``at_least_once``: a sink that replays a micro-batch after a crash
    may repeat records; a repeat must equal the first delivery of that change and is dropped
    before the checks (as CockroachDB's validators allow), counted in ``stats["repeats"]``;
    a repeat that differs from its first delivery is a violation."""
    with changefeed.connect(db) as conn:
        spec, schema = find_feed(conn, feed)
        if records is None:
            records = read_topic(db, spec.topic)
        events = decode_records(records, spec, schema)
        rows = change_rows(conn, schema.name)
        table = table_state(conn, schema)
        extra = Report()
        if spec.kind == "crdb":  # column families, schema changes (testing/crdb_schema.py)
            from changefeed.testing.crdb_schema import adjust

            events, rows, table = adjust(conn, spec, schema, events, rows, table, extra)
    repeats = 0
    if at_least_once:
        first: dict[tuple[Any, ...], FeedEvent] = {}
        kept: list[FeedEvent] = []
        for e in sorted(events, key=lambda e: (e.partition, e.offset)):
            if e.kind == "resolved":
                kept.append(e)
                continue
            ident = (e.partition, e.raw_key, e.kind == "snapshot", e.ts, e.tx)
            seen = first.get(ident)
            if seen is None:
                first[ident] = e
                kept.append(e)
            elif (seen.kind, seen.new, seen.old) != (e.kind, e.new, e.old):
                extra.add(
                    "exactly_once", e.key, f"offset {e.offset}: a repeat differs from offset {seen.offset}"
                )
            else:
                repeats += 1
        events = kept
    rep = validate_events(events, rows, table, spec, complete=complete, partition_of_key=partition_of_key)
    rep.stats["repeats"] = repeats
    return rep.merge(extra)


def validate_events(
    events: Sequence[FeedEvent],
    rows: Sequence[ChangeRow],
    table: Mapping[Key, Image],
    spec: FeedSpec,
    *,
    complete: bool = True,
    partition_of_key: Callable[[bytes], int] | None = None,
) -> Report:
    """The feed checks over decoded events (see the module doc). ``rows`` is the whole change
    stream of the table, ``table`` its current state."""
    rep = Report()
    data = [e for e in events if e.kind != "resolved"]
    resolved = [e for e in events if e.kind == "resolved"]
    after_rows = [
        r for r in rows if r.seq > spec.created_seq and r.op in (CHANGE_UPSERT, CHANGE_ERASE) and not r.static
    ]
    by_ts: dict[int, list[ChangeRow]] = defaultdict(list)
    for r in after_rows:
        by_ts[r.ts].append(r)
    rep.stats.update(
        records=len(events),
        data_records=len(data),
        resolved_records=len(resolved),
        change_rows=len(after_rows),
    )

    # ---- snapshot expectation: the table at creation (undo later changes with their old images)
    at_creation: dict[Key, Image] = dict(table)
    for r in reversed(after_rows):
        if r.old is None:
            at_creation.pop(r.key, None)
        else:
            at_creation[r.key] = r.old

    # ---- (i) order: one partition per key, the right one, in commit order
    per_key: dict[Key, list[FeedEvent]] = defaultdict(list)
    for e in sorted(data, key=lambda e: (e.partition, e.offset)):
        assert e.key is not None
        per_key[e.key].append(e)
    for k, evs in per_key.items():
        parts = {e.partition for e in evs}
        if len(parts) > 1:
            rep.add("order", k, f"records of one key in partitions {sorted(parts)}")
        raw = evs[0].raw_key
        part_of = partition_of_key or (lambda b: partition_of(b, spec.partitions))
        hashed = None if raw is None else part_of(raw)
        if hashed is not None and hashed != evs[0].partition:
            rep.add("order", k, f"key hashes to partition {hashed} but was written to {evs[0].partition}")
        if len({e.raw_key for e in evs}) > 1:
            rep.add("order", k, "one key encoded as different message keys")
        prev: tuple[int, int] | None = None
        for e in evs:
            o = _order(e, spec)
            if prev is not None and o < prev:
                rep.add("order", k, f"offset {e.offset} (ts {o}) delivered after a later change (ts {prev})")
            prev = o if prev is None or o > prev else prev

    # ---- (ii) exactly once
    def ident_event(e: FeedEvent) -> tuple[Any, ...]:
        if e.kind == "snapshot":
            return ("snapshot", e.key)
        return (e.key, e.tx) if e.tx is not None else (e.key, e.ts)

    use_tx = all(e.tx is not None for e in data if e.kind != "snapshot")
    expected: dict[tuple[Any, ...], ChangeRow | Image] = {}
    for r in after_rows:
        expected[(r.key, r.tx) if use_tx else (r.key, r.ts)] = r
    if spec.initial_scan:
        for k, img in at_creation.items():
            expected[("snapshot", k)] = img
    got = Counter(ident_event(e) for e in data)
    for ident, n in got.items():
        if n > 1:
            rep.add(
                "exactly_once",
                ident[-2] if ident[0] != "snapshot" else ident[1],
                f"delivered {n} times: {ident}",
            )
        if ident not in expected:
            rep.add("exactly_once", ident, "delivered but no such committed change (phantom)")
    if complete:
        for ident in expected:
            if ident not in got:
                rep.add("exactly_once", ident, "committed but never delivered (lost)")

    # ---- (iii) images vs the journal, and chained per key
    wants_new = spec.mode in (Mode.NEW_IMAGE, Mode.NEW_AND_OLD_IMAGES)
    wants_old = spec.mode in (Mode.OLD_IMAGE, Mode.NEW_AND_OLD_IMAGES)
    for e in data:
        exp = expected.get(ident_event(e))
        if exp is None:
            continue
        if isinstance(exp, ChangeRow):
            want_kind = "erase" if exp.op == CHANGE_ERASE else "update"
            if e.kind != want_kind:
                rep.add("images", e.key, f"tx {exp.tx}: record is {e.kind}, journal says {want_kind}")
            if wants_new and (e.new if e.has_new else None) != exp.new:
                rep.add("images", e.key, f"tx {exp.tx}: new image {e.new} != journal {exp.new}")
            if wants_old and (e.old if e.has_old else None) != exp.old:
                rep.add("images", e.key, f"tx {exp.tx}: old image {e.old} != journal {exp.old}")
            if spec.mode is Mode.UPDATES and exp.new is not None:
                want = {c: exp.new[c] for c in exp.written}
                if e.update != want:
                    rep.add("images", e.key, f"tx {exp.tx}: update columns {e.update} != journal {want}")
        elif wants_new and e.new != exp:
            rep.add("images", e.key, f"snapshot image {e.new} != table at creation {exp}")
    if wants_new and wants_old:
        for k, evs in per_key.items():
            prev_new: Image | None = None
            have_prev = False
            for e in evs:
                if e.kind == "snapshot":
                    prev_new, have_prev = e.new, True
                    continue
                if have_prev and (e.old if e.has_old else None) != prev_new:
                    rep.add(
                        "images",
                        k,
                        f"offset {e.offset}: old image {e.old} != previous record's new image {prev_new}",
                    )
                prev_new, have_prev = (e.new if e.has_new else None), True

    # ---- (iv) resolved timestamps
    if resolved:
        _check_resolved(rep, data, resolved, rows, spec, at_creation, wants_new)

    # ---- (v) initial scan
    if spec.initial_scan:
        for k, evs in per_key.items():
            snaps = [i for i, e in enumerate(evs) if e.kind == "snapshot"]
            if len(snaps) > 1:
                rep.add("initial_scan", k, f"{len(snaps)} snapshot records")
            if snaps and snaps[0] != 0:
                rep.add(
                    "initial_scan",
                    k,
                    f"snapshot record at offset {evs[snaps[0]].offset} after an update of the key",
                )
    return rep


def _check_resolved(
    rep: Report,
    data: Sequence[FeedEvent],
    resolved: Sequence[FeedEvent],
    rows: Sequence[ChangeRow],
    spec: FeedSpec,
    at_creation: Mapping[Key, Image],
    wants_new: bool,
) -> None:
    def order_of(e: FeedEvent) -> tuple[int, int]:
        return _order(e, spec)

    res_order = order_of

    # no record at or below a resolved timestamp after it, in its partition
    by_part: dict[int, list[FeedEvent]] = defaultdict(list)
    for e in [*data, *resolved]:
        by_part[e.partition].append(e)
    for p, evs in by_part.items():
        evs.sort(key=lambda e: e.offset)
        high: tuple[int, int] | None = None
        for e in evs:
            if e.kind == "resolved":
                r = res_order(e)
                high = r if high is None or r > high else high
            elif high is not None and order_of(e) <= high:
                rep.add(
                    "resolved",
                    e.key,
                    f"partition {p} offset {e.offset}: record at {order_of(e)} after resolved {high}",
                )
    if not wants_new:
        return
    # fingerprint: replay the feed (all partitions) up to each resolved ts == journal state then
    marks = sorted({res_order(e) for e in resolved})
    feed_evs = sorted(data, key=lambda e: (order_of(e), e.partition, e.offset))
    stream = [r for r in rows if not r.static and r.op in (CHANGE_UPSERT, CHANGE_ERASE)]
    stream.sort(key=lambda r: (r.ts, r.tx))
    feed_state: dict[Key, Image] = {}
    truth: dict[Key, Image] = dict(at_creation)
    covered: set[Key] = set(at_creation) if spec.initial_scan else set()
    i = j = 0
    for m in marks:
        while i < len(feed_evs) and order_of(feed_evs[i]) <= m:
            e = feed_evs[i]
            assert e.key is not None
            if e.kind == "erase" or e.new is None:
                feed_state.pop(e.key, None)
            else:
                feed_state[e.key] = e.new
            i += 1
        while j < len(stream) and (stream[j].ts, stream[j].tx) <= m:
            sr = stream[j]
            if sr.seq > spec.created_seq:
                covered.add(sr.key)
                if sr.new is None:
                    truth.pop(sr.key, None)
                else:
                    truth[sr.key] = sr.new
            j += 1
        for k in covered:
            if feed_state.get(k) != truth.get(k):
                rep.add(
                    "resolved",
                    k,
                    f"at resolved {m}: feed replay has {feed_state.get(k)}, table had {truth.get(k)}",
                )
    rep.stats["resolved_marks"] = len(marks)
