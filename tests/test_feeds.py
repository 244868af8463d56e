"""Changefeed definitions: topics follow feeds; partition counts follow the spec's rules."""

from __future__ import annotations

from pathlib import Path

import changefeed
from changefeed.feeds.store import all_feeds
from changefeed.topics import TopicStore


def topics(db: Path) -> dict[str, int]:
    return {t.name: t.partitions for t in TopicStore(db).topics()}


def test_topics_follow_feeds_and_tables(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = changefeed.connect(db)
    conn.execute("CREATE TABLE t (k Uint64, v Utf8, PRIMARY KEY (k)) WITH (UNIFORM_PARTITIONS = 3)")
    conn.execute("ALTER TABLE t ADD CHANGEFEED a WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
    conn.execute(
        "ALTER TABLE t ADD CHANGEFEED b WITH (FORMAT = 'DEBEZIUM_JSON', MODE = 'NEW_IMAGE', TOPIC_MIN_ACTIVE_PARTITIONS = 5)"
    )
    # A feed's topic has the table's partition count unless TOPIC_MIN_ACTIVE_PARTITIONS says otherwise.
    assert topics(db) == {"t/a": 3, "t/b": 5}
    conn.execute("ALTER TABLE t DROP CHANGEFEED a")
    assert topics(db) == {"t/b": 5}
    assert [f.spec.name for f in all_feeds(conn.db.conn)] == ["b"]
    conn.execute("DROP TABLE t")  # dropping the table drops its feeds and their topics
    assert topics(db) == {}
    assert all_feeds(conn.db.conn) == []


def test_feed_starts_after_its_creating_transaction(tmp_path: Path) -> None:
    conn = changefeed.connect(tmp_path / "db")
    conn.execute("CREATE TABLE t (k Uint64, v Utf8, PRIMARY KEY (k))")
    conn.execute("UPSERT INTO t (k, v) VALUES (1, 'before')")
    conn.execute(
        "ALTER TABLE t ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES', VIRTUAL_TIMESTAMPS = TRUE)"
    )
    conn.execute("UPSERT INTO t (k, v) VALUES (2, 'after')")
    (row,) = all_feeds(conn.db.conn)
    spec = row.spec
    # The change stream was switched on by the feed: the earlier write is not in it, the later is.
    schema = conn.db.find_table("t")
    assert schema is not None and schema.changes
    seqs = [s for (s,) in conn.db.conn.execute(f"SELECT seq FROM x{schema.id}")]
    assert seqs and all(s > spec.created_seq for s in seqs) and len(seqs) == 1
    assert spec.topic == "t/f" and spec.virtual_timestamps and spec.retention_ns == 24 * 3600 * 10**9


def test_delete_then_write_in_one_transaction_clears_the_columns_left_out(tmp_path: Path) -> None:
    """A key deleted and written again in one transaction gives one change; in UPDATES mode it
    lists every column (the ones the write left out as null), so a consumer applying it, as an
    asynchronous replication does, ends with the table's row and not the old values."""
    import orjson

    from changefeed.pipeline.runner import run_until_idle
    from changefeed.topics import TopicStore

    db = tmp_path / "db"
    with changefeed.connect(db) as c:
        c.execute("CREATE TABLE accounts (id Uint64, owner Utf8, balance Int64, PRIMARY KEY (id))")
        c.execute("ALTER TABLE accounts ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')")
        c.execute("UPSERT INTO accounts (id, owner, balance) VALUES (1, 'a', 6)")
        with c.transaction():
            c.execute("DELETE FROM accounts WHERE id = 1")
            c.execute("UPSERT INTO accounts (id, owner) VALUES (1, 'n3')")
        assert c.execute("SELECT owner, balance FROM accounts").rows == [("n3", None)]
    run_until_idle(db)
    values = [orjson.loads(r.value) for r in TopicStore(db).read("accounts/f", 0, 0, 100)]
    assert values[-1] == {"key": [1], "update": {"owner": "n3", "balance": None}}
