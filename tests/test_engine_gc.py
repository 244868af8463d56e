"""Journal retention: expired log rows go, protected change rows stay."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.engine import gc
from changefeed.engine.gc import NS, collect_garbage


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_700_000_000 * NS

    def now_ns(self) -> int:
        return self.now


def test_log_ttl_and_feed_protection(tmp_path: Path) -> None:
    clock = FakeClock()
    cql = changefeed.connect(tmp_path / "db", dialect="cql", clock=clock)
    cql.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 60}")
    cql.execute("INSERT INTO ks.t (k, v) VALUES (1, 1)")
    clock.now += 30 * NS
    cql.execute("INSERT INTO ks.t (k, v) VALUES (2, 2)")
    clock.now += 45 * NS  # the first row is 75 s old, the second 45 s
    report = collect_garbage(cql.db)
    assert report.log_rows == 1
    assert [r[0] for r in cql.execute("SELECT k FROM ks.t_scylla_cdc_log").rows] == [2]
    cql.close()

    sql = changefeed.connect(tmp_path / "db", clock=clock)
    sql.execute("CREATE TABLE o (id Uint64, v Utf8, PRIMARY KEY (id))")
    sql.execute("ALTER TABLE o ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
    for i in range(5):
        sql.execute("UPSERT INTO o (id, v) VALUES (?, 'x')", (i,))
    clock.now += 3600 * NS
    # Nothing delivered yet: every change row is protected by the feed.
    assert collect_garbage(sql.db).change_rows == 0
    schema = sql.db.find_table("o")
    assert schema is not None
    feed_id = sql.db.conn.execute("SELECT id FROM _feeds").fetchone()[0]
    sql.db.conn.execute("INSERT INTO _progress VALUES (?, 3, 0, 0, 0, NULL)", (feed_id,))
    assert collect_garbage(sql.db).change_rows == 3
    assert [r[0] for r in sql.db.conn.execute(f"SELECT seq FROM x{schema.id} ORDER BY seq")] == [4, 5]
    sql.close()


def test_gc_commits_are_durable_chunk_by_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each chunk of a GC pass commits as every commit does: through the durability board and
    synced before the next (group commit, the default ``FULL``), leaving no commit of the
    process unsynced."""
    monkeypatch.setattr(gc, "DELETE_CHUNK", 2)
    clock = FakeClock()
    cql = changefeed.connect(tmp_path / "db", dialect="cql", clock=clock)
    cql.execute("CREATE TABLE ks.t (k int PRIMARY KEY, v int) WITH cdc = {'enabled': true, 'ttl': 60}")
    for k in range(5):
        cql.execute("INSERT INTO ks.t (k, v) VALUES (?, 1)", (k,))
    clock.now += 120 * NS
    syncer = cql.db.syncer
    assert syncer is not None
    commits: list[int] = []
    real = cql.db.commit_sqlite

    def counted(*, wrote: bool = True) -> int:
        ticket = real(wrote=wrote)
        commits.append(ticket)
        return ticket

    monkeypatch.setattr(cql.db, "commit_sqlite", counted)
    syncs = syncer.syncs
    assert collect_garbage(cql.db).log_rows == 5
    assert len(commits) == 3  # chunks of 2, 2 and 1 rows
    assert syncer.pending() == 0  # every GC commit synced
    assert syncer.syncs >= syncs + 3
    assert cql.execute("SELECT k FROM ks.t_scylla_cdc_log").rows == []
    cql.close()
