"""Asynchronous replication without Spark (issue 20): statements, options and errors with YDB's
texts, read-only replicas, and the apply (``pipeline.replication.apply``) fed by the plain-Python
delivery of the source's changefeeds (``pipeline.baseline``): GLOBAL replicas equal the source at
every barrier under a random multi-table transactional workload, replays change nothing, ROW
replicas converge, DONE makes them writable."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import changefeed
from changefeed.connection import Connection
from changefeed.engine.database import Database
from changefeed.exceptions import (
    DuplicateObject,
    InvalidOption,
    InvalidStatement,
    ReplicaReadOnly,
    ReplicaSchemaLocked,
    ReplicationError,
    UndefinedObject,
    UndefinedTable,
)
from changefeed.feeds import replication as R
from changefeed.pipeline import baseline
from changefeed.pipeline.replication.apply import Applier, SourceRecord
from changefeed.testing.replication import bank_transactions, check_at_barrier, check_equal, setup_bank
from changefeed.topics import TopicStore


def _source(path: Path) -> Connection:
    setup_bank(path)
    return changefeed.connect(path)


def _pump(src: Path, dst: Path, name: str, applier: Applier, rng: random.Random | None = None) -> int:
    """Deliver the source's feeds (baseline), then apply every new record in one or more
    batches (``rng``: random batch cuts, and now and then a replayed batch)."""
    db = Database(dst)
    rep = R.find(db.conn, name)
    db.close()
    assert rep is not None
    for it in rep.items:
        baseline.deliver(src, it.changefeed)
    db = Database(dst)
    pos = R.positions(db.conn, rep.id)
    db.close()
    store = TopicStore(src)
    records: list[SourceRecord] = []
    for it in rep.items:
        for p in range(it.partitions):
            t = store.read_arrow(it.topic, p, pos[(it.item_id, p)].next_offset)
            for o, v, ts in zip(
                t.column("offset").to_pylist(),
                t.column("value").to_pylist(),
                t.column("ts").to_pylist(),
                strict=True,
            ):
                records.append(SourceRecord(it.item_id, p, o, ts, v))
    store.close()
    if rng is None:
        applier.apply(records)
        return len(records)
    # batches as a source reads them: each partition's records in offset order, a random prefix
    # of what is left of every partition per batch (records within a batch in any order)
    left: dict[tuple[int, int], list[SourceRecord]] = {}
    for r in records:
        left.setdefault((r.item, r.partition), []).append(r)
    while any(left.values()):
        batch: list[SourceRecord] = []
        for k, rs in left.items():
            n = rng.randint(0, len(rs))
            batch += rs[:n]
            left[k] = rs[n:]
        rng.shuffle(batch)
        applier.apply(batch)
        if batch and rng.random() < 0.3:
            applier.apply(batch)  # a replayed batch: nothing applied twice
    return len(records)


def _workload(c: Connection, rng: random.Random, txns: int) -> None:
    bank_transactions(c, rng, txns)


def _replication(dst: Connection, src: Path, level: str, extra: str = "") -> None:
    dst.execute(
        "CREATE ASYNC REPLICATION r FOR accounts AS accounts_r, `moves` AS moves_r WITH ("
        f"CONNECTION_STRING = 'file://{src}', CONSISTENCY_LEVEL = '{level}'{extra})"
    )


@pytest.mark.parametrize("seed", [1, 2])
def test_global_replica_equals_source_at_every_barrier(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    _replication(dst, src_path, "GLOBAL", ", COMMIT_INTERVAL = Interval('PT0.001S')")
    rid = R.require(dst.db.conn, "r").id
    applier = Applier(dst.db, rid)
    barriers = []
    for _ in range(12):
        _workload(src, rng, rng.randint(1, 15))
        _pump(src_path, dst_path, "r", applier, rng)
        check = check_at_barrier(src_path, dst_path, "r")
        assert check.ok, str(check)
        barriers.append(check.barrier)
    assert barriers == sorted(barriers) and len(set(barriers)) > 5
    assert barriers[-1] > 0
    # quiet source: one more barrier covers everything; DONE leaves the replicas equal and writable
    _pump(src_path, dst_path, "r", applier)
    assert check_equal(src_path, dst_path, "r").ok
    dst.execute("ALTER ASYNC REPLICATION r SET (STATE = 'DONE', FAILOVER_MODE = 'FORCE')")
    assert check_equal(src_path, dst_path, "r").ok
    dst.execute("UPSERT INTO accounts_r (id, owner, balance) VALUES (999, 'x', 1)")
    src.close()
    dst.close()


def test_row_replica_converges(tmp_path: Path) -> None:
    rng = random.Random(7)
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    _replication(dst, src_path, "ROW")
    applier = Applier(dst.db, R.require(dst.db.conn, "r").id)
    for _ in range(6):
        _workload(src, rng, 20)
        _pump(src_path, dst_path, "r", applier, rng)
    _pump(src_path, dst_path, "r", applier)
    check = check_equal(src_path, dst_path, "r")
    assert check.ok, str(check)
    rows = dst.execute("SELECT name, state, consistency_level, lag FROM `.sys/async_replications`").rows
    assert [r[:3] for r in rows] == [("r", "Running", "Row")] * 2 and rows[0][3] is not None
    src.close()
    dst.close()


def test_paused_replication_applies_nothing(tmp_path: Path) -> None:
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    _replication(dst, src_path, "ROW")
    applier = Applier(dst.db, R.require(dst.db.conn, "r").id)
    dst.execute('ALTER ASYNC REPLICATION r SET (STATE = "Paused")')
    _pump(src_path, dst_path, "r", applier)
    assert dst.execute("SELECT COUNT(*) FROM accounts_r").rows == [(0,)]
    dst.execute('ALTER ASYNC REPLICATION r SET (STATE = "StandBy")')
    _pump(src_path, dst_path, "r", applier)  # read again from where it stood: nothing lost
    assert check_equal(src_path, dst_path, "r").ok
    assert dst.execute("SELECT DISTINCT state FROM `.sys/async_replications`").rows == [("Running",)]
    src.close()
    dst.close()


def test_replicas_are_read_only_with_ydbs_texts(tmp_path: Path) -> None:
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    _replication(dst, src_path, "ROW")
    writes = [
        "UPSERT INTO accounts_r (id, owner) VALUES (1, 'x')",
        "INSERT INTO accounts_r (id, owner) VALUES (100, 'x')",
        "UPDATE accounts_r SET owner = 'y' WHERE id = 1",
        "DELETE FROM accounts_r WHERE id = 1",
    ]
    for sql in writes:
        with pytest.raises(ReplicaReadOnly, match=r"^Can.t execute write tx at replicated table") as info:
            dst.execute(sql)
        assert info.value.code == "25006"
    for sql in [
        "ALTER TABLE accounts_r ADD COLUMN x Int32",
        "ALTER TABLE accounts_r ADD CHANGEFEED f WITH (FORMAT = 'JSON', MODE = 'UPDATES')",
        "DROP TABLE accounts_r",
    ]:
        with pytest.raises(ReplicaSchemaLocked, match=r"^path is an async replica table"):
            dst.execute(sql)
    # DROP without CASCADE: the replicas stay, writable; the source's changefeeds are gone
    assert len(src.execute("SELECT * FROM `.sys/table_schemas` WHERE path = 'accounts'").rows) == 1
    dst.execute("DROP ASYNC REPLICATION r")
    dst.execute("UPSERT INTO accounts_r (id, owner) VALUES (1, 'x')")
    src.db.refresh_catalog()
    assert src.db.conn.execute("SELECT COUNT(*) FROM _feeds").fetchone()[0] == 0
    src.close()
    dst.close()


def test_drop_cascade_and_errors(tmp_path: Path) -> None:
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    cases: list[tuple[str, type[Exception], str]] = [
        (
            "CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONSISTENCY_LEVEL = 'ROW')",
            InvalidOption,
            "CONNECTION_STRING is required",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', FOO = 1)",
            InvalidOption,
            "unknown asynchronous replication option FOO",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', CONSISTENCY_LEVEL = 'SOME')",
            InvalidOption,
            "expected ROW or GLOBAL",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', COMMIT_INTERVAL = Interval('PT1S'))",
            InvalidOption,
            "COMMIT_INTERVAL is an option of CONSISTENCY_LEVEL = 'GLOBAL'",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', CONSISTENCY_LEVEL = 'GLOBAL', COMMIT_INTERVAL = 'soon')",
            InvalidOption,
            "takes an Interval",
        ),
        (
            "CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'grpcs://example.com:2135/?database=/Root/db')",
            InvalidOption,
            "grpc:// endpoints are not served",
        ),
        (
            "CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'changefeed://h:99999')",
            InvalidOption,
            "port must be a number from 1 to 65535",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = '{tmp_path}/none')",
            ReplicationError,
            "is not a changefeed database",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR missing AS a WITH (CONNECTION_STRING = 'file://{src_path}')",
            UndefinedTable,
            'table "missing" does not exist in the source database',
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', TOKEN_SECRET_NAME = 's')",
            InvalidOption,
            "not by token",
        ),
        (
            f"CREATE ASYNC REPLICATION x FOR accounts AS a WITH (CONNECTION_STRING = 'file://{src_path}', USER = 'u', PASSWORD_SECRET_NAME = 'nope')",
            UndefinedObject,
            "secret 'nope' does not exist",
        ),
        (
            "ALTER ASYNC REPLICATION nope SET (STATE = 'DONE')",
            UndefinedObject,
            "asynchronous replication 'nope' does not exist",
        ),
        ("DROP ASYNC REPLICATION nope", UndefinedObject, "asynchronous replication 'nope' does not exist"),
    ]
    for sql, exc, text in cases:
        before = dst.db.conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
        with pytest.raises(exc, match=__import__("re").escape(text)):
            dst.execute(sql)
        assert dst.db.conn.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == before, sql
    assert src.db.conn.execute("SELECT COUNT(*) FROM _feeds").fetchone()[0] == 0  # nothing left behind
    _replication(dst, src_path, "GLOBAL")
    with pytest.raises(DuplicateObject, match="asynchronous replication 'r' already exists"):
        _replication(dst, src_path, "GLOBAL")
    with pytest.raises(InvalidOption, match="FAILOVER_MODE can only be used with STATE = 'DONE'"):
        dst.execute("ALTER ASYNC REPLICATION r SET (FAILOVER_MODE = 'FORCE')")
    with pytest.raises(InvalidOption, match="invalid STATE 'GONE'"):
        dst.execute("ALTER ASYNC REPLICATION r SET (STATE = 'GONE')")
    dst.execute("ALTER ASYNC REPLICATION r SET (STATE = 'DONE', FAILOVER_MODE = 'FORCE')")
    with pytest.raises(InvalidStatement, match="a completed replication cannot be resumed"):
        dst.execute("ALTER ASYNC REPLICATION r SET (STATE = 'StandBy')")
    dst.execute("DROP ASYNC REPLICATION r CASCADE")
    assert dst.execute("SHOW TABLES").rows == []
    assert src.db.conn.execute("SELECT COUNT(*) FROM _feeds").fetchone()[0] == 0
    src.close()
    dst.close()


def test_secrets_and_privileges(tmp_path: Path) -> None:
    src_path, dst_path = tmp_path / "src", tmp_path / "dst"
    src = _source(src_path)
    dst = changefeed.connect(dst_path)
    dst.execute("CREATE USER alice")
    dst.execute('CREATE SECRET pw WITH (value = "s3cret")')
    with pytest.raises(DuplicateObject):
        dst.execute('CREATE SECRET pw WITH (value = "x")')
    dst.execute('CREATE SECRET IF NOT EXISTS pw WITH (value = "x")')
    dst.execute('CREATE OR REPLACE SECRET pw WITH (value = "y")')
    alice = changefeed.connect(dst_path, user="alice")
    with pytest.raises(Exception, match="does not own secret 'pw'"):
        alice.execute(
            f"CREATE ASYNC REPLICATION a FOR accounts AS acc_a WITH (CONNECTION_STRING = 'file://{src_path}',"
            " USER = 'root', PASSWORD_SECRET_NAME = 'pw')"
        )
    alice.execute(
        f"CREATE ASYNC REPLICATION a FOR accounts AS acc_a WITH (CONNECTION_STRING = 'file://{src_path}')"
    )
    assert [r[0] for r in alice.execute("SELECT name FROM `.sys/async_replications`").rows] == ["a"]
    dst.execute(
        f"CREATE ASYNC REPLICATION b FOR moves AS moves_b WITH (CONNECTION_STRING = 'file://{src_path}')"
    )
    assert [r[0] for r in alice.execute("SELECT name FROM `.sys/async_replications`").rows] == ["a"]
    with pytest.raises(Exception, match="does not own asynchronous replication 'b'"):
        alice.execute("DROP ASYNC REPLICATION b")
    alice.execute("DROP ASYNC REPLICATION a CASCADE")
    dst.execute("DROP SECRET pw")
    with pytest.raises(UndefinedObject):
        dst.execute("DROP SECRET pw")
    dst.execute("DROP SECRET IF EXISTS pw")
    alice.close()
    src.close()
    dst.close()


def test_replication_within_one_database(tmp_path: Path) -> None:
    """The source may be the destination itself (YDB allows a connection string to the same
    database): the changefeed is made in the same transaction."""
    path = tmp_path / "db"
    c = _source(path)
    c.execute(
        f"CREATE ASYNC REPLICATION self FOR accounts AS accounts_copy WITH (CONNECTION_STRING = 'file://{path}')"
    )
    applier = Applier(c.db, R.require(c.db.conn, "self").id)
    _pump(path, path, "self", applier)
    assert check_equal(path, path, "self").ok
    c.close()
