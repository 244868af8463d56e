"""Feed validators against the single-process baseline, and planted bugs each validator catches."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from changefeed.pipeline import baseline
from changefeed.testing import validators as v, workload as w

OPTS = 'TOPIC_MIN_ACTIVE_PARTITIONS = 4, RESOLVED_TIMESTAMPS = Interval("PT0.05S")'


def _build(db: Path, *, seed: int, extra: str = OPTS, initial_rows: int = 20, rounds: int = 3) -> None:
    w.setup_sql(db, feed_options=extra, initial_rows=initial_rows, seed=seed)
    for r in range(rounds):
        w.run_sql(db, seed=seed * 100 + r, txns=80)
        baseline.deliver(db, "f", batch_rows=37)


def _events(
    db: Path,
) -> tuple[list[v.FeedEvent], list[v.ChangeRow], dict[tuple[object, ...], dict[str, object]], object]:
    import changefeed

    with changefeed.connect(db) as conn:
        spec, schema = v.find_feed(conn, "f")
        events = v.decode_records(v.read_topic(db, spec.topic), spec, schema)
        rows = v.change_rows(conn, schema.name)
        table = v.table_state(conn, schema)
    return events, rows, table, spec


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_baseline_passes_all_validators(tmp_path: Path, seed: int) -> None:
    _build(tmp_path / "db", seed=seed)
    rep = v.validate_feed(tmp_path / "db", "f")
    assert rep.ok, str(rep)
    assert rep.stats["data_records"] > 100 and rep.stats["resolved_marks"] >= 3


def test_initial_scan_passes(tmp_path: Path) -> None:
    _build(
        tmp_path / "db", seed=7, extra="TOPIC_MIN_ACTIVE_PARTITIONS = 3, INITIAL_SCAN = TRUE", initial_rows=30
    )
    rep = v.validate_feed(tmp_path / "db", "f")
    assert rep.ok, str(rep)
    events, *_ = _events(tmp_path / "db")
    assert sum(e.kind == "snapshot" for e in events) == 30


def test_baseline_resumes_after_crash_between_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "db"
    w.setup_sql(db, feed_options="TOPIC_MIN_ACTIVE_PARTITIONS = 4")
    w.run_sql(db, seed=11, txns=120)
    from changefeed.topics import TopicStore

    real = TopicStore.append
    calls = {"n": 0}

    def flaky(
        self: TopicStore, topic: str, partition: int, writer: str, batch_id: int, records: object
    ) -> int:
        calls["n"] += 1
        if calls["n"] == 7:  # second chunk, third partition
            raise KeyboardInterrupt("simulated crash")
        return real(self, topic, partition, writer, batch_id, records)  # type: ignore[arg-type]

    monkeypatch.setattr(TopicStore, "append", flaky)
    with pytest.raises(KeyboardInterrupt):
        baseline.deliver(db, "f", batch_rows=25)
    monkeypatch.setattr(TopicStore, "append", real)
    rep = v.validate_feed(db, "f", complete=False)
    assert rep.ok, str(rep)
    w.run_sql(db, seed=12, txns=50)
    baseline.deliver(db, "f", batch_rows=25)
    baseline.deliver(db, "f", batch_rows=25)  # a second run delivers nothing twice
    rep = v.validate_feed(db, "f")
    assert rep.ok, str(rep)


# ------------------------------------------------------------------------------ planted bugs
@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("planted") / "db"
    _build(db, seed=5)
    return db


def _check(built: Path, mutate: object) -> v.Report:
    events, rows, table, spec = _events(built)
    mutated = mutate(list(events))  # type: ignore[operator]
    return v.validate_events(mutated, rows, table, spec)  # type: ignore[arg-type]


def _data(events: list[v.FeedEvent]) -> list[int]:
    return [i for i, e in enumerate(events) if e.kind != "resolved"]


def _multi_key(events: list[v.FeedEvent]) -> tuple[int, int]:
    """Indexes of two records of one key (the first key with two updates)."""
    seen: dict[object, int] = {}
    for i in _data(events):
        e = events[i]
        if e.key in seen and e.kind == "update" and events[seen[e.key]].kind == "update":
            return seen[e.key], i
        seen[e.key] = i
    raise AssertionError("no key with two records")


def test_clean_feed_is_clean(built: Path) -> None:
    assert _check(built, lambda evs: evs).ok


def test_catches_dropped_record(built: Path) -> None:
    rep = _check(built, lambda evs: evs[:5] + evs[6:] if evs[5].kind != "resolved" else evs[:4] + evs[5:])
    assert rep.counts["exactly_once"] >= 1, str(rep)
    assert any("lost" in x.detail for x in rep.of("exactly_once"))


def test_catches_duplicate(built: Path) -> None:
    def dup(evs: list[v.FeedEvent]) -> list[v.FeedEvent]:
        i = _data(evs)[10]
        e = evs[i]
        return [*evs, dataclasses.replace(e, offset=10**9)]

    rep = _check(built, dup)
    assert any("delivered 2 times" in x.detail for x in rep.of("exactly_once")), str(rep)


def test_catches_reordered_key(built: Path) -> None:
    def swap(evs: list[v.FeedEvent]) -> list[v.FeedEvent]:
        i, j = _multi_key(evs)
        a, b = evs[i], evs[j]
        evs[i] = dataclasses.replace(b, offset=a.offset)
        evs[j] = dataclasses.replace(a, offset=b.offset)
        return evs

    rep = _check(built, swap)
    assert rep.counts["order"] >= 1, str(rep)


def test_catches_wrong_partition(built: Path) -> None:
    def move(evs: list[v.FeedEvent]) -> list[v.FeedEvent]:
        i = _data(evs)[3]
        evs[i] = dataclasses.replace(evs[i], partition=(evs[i].partition + 1) % 4)
        return evs

    rep = _check(built, move)
    assert rep.counts["order"] >= 1, str(rep)


def test_catches_wrong_image(built: Path) -> None:
    def corrupt(evs: list[v.FeedEvent]) -> list[v.FeedEvent]:
        i = next(i for i in _data(evs) if evs[i].new is not None and evs[i].kind == "update")
        evs[i] = dataclasses.replace(evs[i], new={**(evs[i].new or {}), "b": 123456})
        return evs

    rep = _check(built, corrupt)
    assert rep.counts["images"] >= 1, str(rep)


def test_catches_record_after_resolved(built: Path) -> None:
    def late(evs: list[v.FeedEvent]) -> list[v.FeedEvent]:
        # move the first data record behind the last resolved record of its partition
        i = _data(evs)[0]
        e = evs.pop(i)
        last = max(x.offset for x in evs if x.partition == e.partition)
        return [*evs, dataclasses.replace(e, offset=last + 1)]

    rep = _check(built, late)
    assert rep.counts["resolved"] >= 1, str(rep)


def test_catches_resolved_fingerprint_mismatch(built: Path) -> None:
    # Drop the last record of a key (and do not ask for completeness): only the replay at the
    # resolved timestamps that follow it can notice.
    events, rows, table, spec = _events(built)
    # (YDB barriers fall on whole intervals: the newest records may follow the last barrier, so the
    # record dropped is the last of its key among those a later barrier covers)
    covered = max(e.ts for e in events if e.kind == "resolved")
    last: dict[object, int] = {}
    for i in _data(events):
        last[events[i].key] = i
    i = max(j for j in last.values() if events[j].ts <= covered)
    mutated = events[:i] + events[i + 1 :]
    rep = v.validate_events(mutated, rows, table, spec, complete=False)  # type: ignore[arg-type]
    assert rep.counts["resolved"] >= 1, str(rep)
    assert rep.counts["exactly_once"] == 0


def test_catches_snapshot_after_update(tmp_path: Path) -> None:
    db = tmp_path / "db"
    _build(
        db, seed=8, extra="TOPIC_MIN_ACTIVE_PARTITIONS = 2, INITIAL_SCAN = TRUE", initial_rows=30, rounds=1
    )
    events, rows, table, spec = _events(db)
    snap = next(
        i
        for i, e in enumerate(events)
        if e.kind == "snapshot" and any(x.key == e.key and x.kind != "snapshot" for x in events)
    )
    e = events[snap]
    last = max(x.offset for x in events if x.partition == e.partition)
    mutated = [x for i, x in enumerate(events) if i != snap] + [dataclasses.replace(e, offset=last + 1)]
    rep = v.validate_events(mutated, rows, table, spec)  # type: ignore[arg-type]
    assert rep.counts["initial_scan"] >= 1, str(rep)
