"""Randomised engine checks: replaying the journal into an empty table reproduces the table
exactly, and every image row equals the table's state before/after that change."""

from __future__ import annotations

from pathlib import Path

import pytest

import changefeed
from changefeed.engine.changes import read_changes
from changefeed.testing import validators as v, workload as w


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_scylla_log_replay_and_images(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "db"
    w.setup_cql(db)
    stats = w.run_cql(db, seed=seed, ops=250)
    assert stats.committed > 200
    with changefeed.connect(db, dialect="cql") as conn:
        rep = v.check_scylla_replay(conn, "ks.t")
        assert rep.ok, str(rep)
        assert rep.stats["log_rows"] > 300
        images = v.check_scylla_images(conn, "ks.t")
        assert images.ok, str(images)


@pytest.mark.parametrize("seed", [5, 6, 7])
def test_change_stream_with_savepoints_vs_shadow_history(tmp_path: Path, seed: int) -> None:
    """Transactions that take savepoints, roll back to them (at random, and to recover from a
    failed statement) and release them: the change stream holds exactly the committed changes,
    each image the table's state before and after its transaction."""
    db = tmp_path / "db"
    w.setup_sql(db, initial_rows=10, seed=seed)
    history = w.History()
    stats = w.run_sql(
        db, seed=seed, txns=250, snapshots=True, history=history, multi_rate=0.6, savepoint_rate=0.4
    )
    assert stats.committed > 150 and stats.savepoints > 100 and stats.rolled_back_to > 40
    with changefeed.connect(db) as conn:
        rep = v.check_change_stream(conn, "t", history)
        assert rep.ok, str(rep)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_change_stream_replay_and_images_vs_shadow_history(tmp_path: Path, seed: int) -> None:
    db = tmp_path / "db"
    w.setup_sql(db, initial_rows=10, seed=seed)
    history = w.History()
    stats = w.run_sql(db, seed=seed, txns=250, snapshots=True, history=history)
    assert stats.committed > 150 and stats.rolled_back > 5
    with changefeed.connect(db) as conn:
        rep = v.check_change_stream(conn, "t", history)
        assert rep.ok, str(rep)
        assert rep.stats["change_rows"] > 200


def test_change_stream_multi_process(tmp_path: Path) -> None:
    db = tmp_path / "db"
    w.setup_sql(db)
    stats = w.run_parallel(db, seeds=[21, 22, 23], txns=150)
    assert sum(s.committed for s in stats) > 300
    with changefeed.connect(db) as conn:
        rep = v.check_change_stream(conn, "t")
        assert rep.ok, str(rep)


def test_scylla_multi_process(tmp_path: Path) -> None:
    db = tmp_path / "db"
    w.setup_cql(db)
    w.run_parallel(db, dialect="cql", seeds=[31, 32, 33], ops=150)
    with changefeed.connect(db, dialect="cql") as conn:
        rep = v.check_scylla_replay(conn, "ks.t")
        assert rep.ok, str(rep)
        images = v.check_scylla_images(conn, "ks.t")
        assert images.ok, str(images)


def test_validators_catch_a_corrupted_journal(tmp_path: Path) -> None:
    """The engine checks are not vacuous: tampering with the journal is reported."""
    db = tmp_path / "db"
    w.setup_sql(db)
    history = w.History()
    w.run_sql(db, seed=9, txns=120, snapshots=True, history=history)
    w.setup_cql(db)
    w.run_cql(db, seed=9, ops=150)
    with changefeed.connect(db) as conn:
        schema = v.table_schema(conn, "t")
        batch = read_changes(conn.db.conn, schema, 0, 1 << 62)
        seq = batch.column("seq")[len(batch) // 2].as_py()
        conn.db.conn.execute(f"UPDATE x{schema.id} SET c2 = 999999 WHERE seq = ?", (seq,))
        rep = v.check_change_stream(conn, "t", history)
        assert rep.counts["new_image"] >= 1, str(rep)
        conn.db.conn.execute(f"DELETE FROM x{schema.id} WHERE seq = ?", (seq + 1,))
        rep = v.check_change_stream(conn, "t", history)
        assert rep.counts["stream_gap"] >= 1, str(rep)
    with changefeed.connect(db, dialect="cql") as conn:
        cql = v.table_schema(conn, "ks.t")
        # drop one delta (op 1/2) from the CDC log: replay diverges or an image mismatches
        conn.db.conn.execute(
            f"DELETE FROM j{cql.id} WHERE seq = (SELECT MAX(seq) FROM j{cql.id} WHERE op IN (1, 2))"
        )
        conn.db.conn.execute(
            f"UPDATE j{cql.id} SET c3 = 4242 WHERE seq = (SELECT MIN(seq) FROM j{cql.id} WHERE op = 9 AND c3 IS NOT NULL)"
        )
        images = v.check_scylla_images(conn, "ks.t")
        assert images.counts["postimage"] >= 1, str(images)
